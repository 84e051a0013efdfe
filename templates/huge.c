/* realloc, asking for transparent huge pages on large blocks: arrays of millions of entries
 * are written once, and 4 KiB pages would cost a page fault each. */
#include <sys/mman.h>
static inline void *spf_realloc(void *p, size_t bytes)
{
    p = realloc(p, bytes);
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)1 << 21;
    if (p && bytes >= 2 * huge) {
        const uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
        madvise((void *)start, ((uintptr_t)p + bytes - start) & ~(huge - 1), MADV_HUGEPAGE);
    }
#endif
    return p;
}
