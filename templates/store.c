/* Writing entries into a layout (spf.store): per-entry integer vectors, an order of the
 * entries by several keys, ranks within groups.  Index arrays the writer computes (pointers,
 * bounds) are built in int64 and narrowed into the layout's own widths at the end; those only
 * stored per entry are written in their own width. */

/* floor(a / b) and a - b * floor(a / b) for b > 0 (C's / rounds toward zero). */
static inline int64_t spf_st_fdiv(int64_t a, int64_t b)
{
    const int64_t q = a / b;
    return q - ((a % b) != 0 && ((a < 0) != (b < 0)));
}

/* The offset of a read of a one-dimensional array, -1 outside its extent (reads of several
 * dimensions are printed in place). */
static inline int64_t spf_st_off1(int64_t a, int64_t n0)
{
    return a >= 0 && a < n0 ? a : -1;
}


/* A read at an offset; outside (-1), a value below every bound, so the constraint reading it
 * fails. */
#define SPF_ST_OUTSIDE (INT64_MIN / 4)
static inline int64_t spf_st_read(const int64_t *restrict a, int64_t off)
{
    return off >= 0 ? a[off] : SPF_ST_OUTSIDE;
}
/* The same read of an array written in its own (narrower) type, widened to int64; off, a pure
 * expression, is evaluated twice. */
#define SPF_ST_READ_NARROW(a, off) ((off) >= 0 ? (int64_t)(a)[(off)] : SPF_ST_OUTSIDE)

/* bytes of memory (at least one byte); a block of 4 MiB or more on 2 MiB boundaries with
 * transparent huge pages asked for: arrays of millions of entries are written once, and 4 KiB
 * pages would cost a page fault each.  Freed with free. */
#include <sys/mman.h>
static inline void *spf_st_alloc(size_t bytes)
{
    const size_t huge = (size_t)1 << 21;
    if (bytes < 2 * huge)
        return malloc(bytes > 0 ? bytes : 1);
    const size_t rounded = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, rounded);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}

/* An int64 vector of n entries. */
static inline int64_t *spf_st_vector(int64_t n)
{
    return spf_st_alloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 0));
}

/* A vector of n entries, each set to fill. */
static inline int64_t *spf_st_filled(int64_t n, int64_t fill)
{
    int64_t *v = spf_st_vector(n);
    if (v)
        for (int64_t e = 0; e < n; ++e)
            v[e] = fill;
    return v;
}

/* Stable order of the entries by one column (counting sort on digits of col - min, least
 * significant first: 8-bit digits below 65536 entries, 16-bit ones above), applied to the
 * current order in place. */
static inline int spf_st_sort_column(int64_t n, const int64_t *restrict col, int descending,
                                     int64_t *restrict order, int64_t *restrict tmp)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t e = 0; e < n; ++e) {
        lo = col[e] < lo ? col[e] : lo;
        hi = col[e] > hi ? col[e] : hi;
    }
    if (n < 2 || lo == hi)
        return 0;
    const uint64_t span = (uint64_t)hi - (uint64_t)lo;
    const int bits = n < 65536 ? 8 : 16;
    const uint64_t mask = ((uint64_t)1 << bits) - 1;
    int64_t *count = malloc(sizeof(int64_t) * (size_t)(mask + 2));
    if (!count)
        return 1;
    for (int shift = 0; shift < 64 && (span >> shift) != 0; shift += bits) {
        memset(count, 0, sizeof(int64_t) * (size_t)(mask + 2));
        for (int64_t e = 0; e < n; ++e) {
            const uint64_t v = descending ? (uint64_t)hi - (uint64_t)col[order[e]]
                                          : (uint64_t)col[order[e]] - (uint64_t)lo;
            ++count[((v >> shift) & mask) + 1];
        }
        for (uint64_t d = 0; d <= mask; ++d)
            count[d + 1] += count[d];
        for (int64_t e = 0; e < n; ++e) {
            const uint64_t v = descending ? (uint64_t)hi - (uint64_t)col[order[e]]
                                          : (uint64_t)col[order[e]] - (uint64_t)lo;
            tmp[count[(v >> shift) & mask]++] = order[e];
        }
        memcpy(order, tmp, sizeof(int64_t) * (size_t)n);
    }
    free(count);
    return 0;
}

/* Whether the entries in their given order already are in the order of the columns (each
 * increasing, or decreasing where desc[c]): then no sort is needed. */
static inline int spf_st_in_order(int64_t n, int ncols, const int64_t *const *cols, const int *desc)
{
    for (int64_t e = 1; e < n; ++e)
        for (int c = 0; c < ncols; ++c) {
            const int64_t a = cols[c][e - 1], b = cols[c][e];
            if (a != b) {
                if (desc[c] ? a < b : a > b)
                    return 0;
                break;
            }
        }
    return 1;
}

/* order[0..n): the entries sorted by the columns (the first most significant; decreasing
 * where desc[c]), stably.  Returns 1 when out of memory. */
static inline int spf_st_order(int64_t n, int ncols, const int64_t *const *cols, const int *desc,
                        int64_t *restrict order)
{
    for (int64_t e = 0; e < n; ++e)
        order[e] = e;
    if (spf_st_in_order(n, ncols, cols, desc))
        return 0;
    int64_t *tmp = spf_st_vector(n);
    if (!tmp)
        return 1;
    for (int c = ncols - 1; c >= 0; --c)
        if (spf_st_sort_column(n, cols[c], desc[c], order, tmp)) {
            free(tmp);
            return 1;
        }
    free(tmp);
    return 0;
}

/* The joint range of columns cols[0..ncols): each one's lowest and highest value and width;
 * returns the number of ids (the product of the widths), or 0 where it exceeds 4n + 64 (a
 * table of it would outgrow the entries). */
static inline int64_t spf_st_span(int64_t n, int ncols, const int64_t *const *cols,
                                  int64_t *lo, int64_t *hi, int64_t *width)
{
    int64_t span = 1;
    for (int c = 0; c < ncols; ++c) {
        int64_t a = INT64_MAX, b = INT64_MIN;
        for (int64_t e = 0; e < n; ++e) {
            a = cols[c][e] < a ? cols[c][e] : a;
            b = cols[c][e] > b ? cols[c][e] : b;
        }
        lo[c] = a;
        hi[c] = b;
        width[c] = b - a + 1;
        if (width[c] > (4 * n + 64) / span)
            return 0;
        span *= width[c];
    }
    return span;
}

/* Whether each group (columns 0..ngroup-1) is one run of consecutive entries (a CSR source's
 * rows, whatever order its rows take): 1 when its keys (the other columns) are in order within
 * it too, then ranks need no sort; 2 when they are not, then each run is sorted on its own
 * (spf_st_sort_runs).  Groups are numbered row-major over the columns' ranges and marked when
 * their run starts; ranges whose product exceeds 4n + 64 give up (0).  -1 when out of memory. */
static inline int spf_st_in_runs(int64_t n, int ngroup, int ncols, const int64_t *const *cols,
                                 const int *desc)
{
    if (ngroup == 0 || ngroup > 8 || n < 2)
        return 0;
    int64_t lo[8], hi[8], width[8];
    const int64_t span = spf_st_span(n, ngroup, cols, lo, hi, width);
    if (!span)
        return 0;
    uint8_t *started = calloc((size_t)span, 1);
    if (!started)
        return -1;
    int runs = 1, keyed = 1;
    int64_t last = -1;
    for (int64_t e = 0; e < n && runs; ++e) {
        int64_t id = 0;
        for (int c = 0; c < ngroup; ++c)
            id = id * width[c] + (cols[c][e] - lo[c]);
        if (id != last) {
            runs = !started[id];        /* a group seen again after its run: not runs */
            started[id] = 1;
            last = id;
            continue;
        }
        for (int c = ngroup; c < ncols && keyed; ++c) {  /* keys in order within the run */
            const int64_t a = cols[c][e - 1], b = cols[c][e];
            if (a != b) {
                keyed = desc[c] ? a > b : a < b;
                break;
            }
        }
    }
    free(started);
    return runs ? (keyed ? 1 : 2) : 0;
}

/* -1, 0 or 1 as entry a's key (columns ngroup..ncols-1) comes before, with or after b's. */
static inline int spf_st_key_cmp(int ngroup, int ncols, const int64_t *const *cols,
                                 const int *desc, int64_t a, int64_t b)
{
    for (int c = ngroup; c < ncols; ++c) {
        const int64_t x = cols[c][a], y = cols[c][b];
        if (x != y)
            return (desc[c] ? x > y : x < y) ? -1 : 1;
    }
    return 0;
}

/* order[0..n): the entries, whose groups come in runs (spf_st_in_runs), with each run sorted
 * by its keys on its own, stably: insertion sorts of 16 entries, then merges.  Returns 1 when
 * out of memory. */
static inline int spf_st_sort_runs(int64_t n, int ngroup, int ncols, const int64_t *const *cols,
                                   const int *desc, int64_t *restrict order)
{
    int64_t *tmp = spf_st_vector(n);
    if (!tmp)
        return 1;
    for (int64_t e = 0; e < n; ++e)
        order[e] = e;
    for (int64_t s = 0; s < n;) {
        int64_t t = s + 1;          /* the run [s, t): entries of one group */
        while (t < n) {
            int same = 1;
            for (int c = 0; c < ngroup && same; ++c)
                same = cols[c][t] == cols[c][s];
            if (!same)
                break;
            ++t;
        }
        int64_t *a = order + s, *w = tmp + s;
        const int64_t len = t - s;
        for (int64_t b = 0; b < len; b += 16) {
            const int64_t end = b + 16 < len ? b + 16 : len;
            for (int64_t i = b + 1; i < end; ++i) {
                const int64_t v = a[i];
                int64_t j = i;
                for (; j > b && spf_st_key_cmp(ngroup, ncols, cols, desc, v, a[j - 1]) < 0; --j)
                    a[j] = a[j - 1];
                a[j] = v;
            }
        }
        for (int64_t width = 16; width < len; width *= 2) {
            for (int64_t b = 0; b < len; b += 2 * width) {
                const int64_t m = b + width < len ? b + width : len;
                const int64_t end = b + 2 * width < len ? b + 2 * width : len;
                int64_t i = b, j = m, k = b;
                while (i < m && j < end)    /* the left one first where equal: stable */
                    w[k++] = spf_st_key_cmp(ngroup, ncols, cols, desc, a[j], a[i]) < 0 ? a[j++]
                                                                                      : a[i++];
                while (i < m)
                    w[k++] = a[i++];
                while (j < end)
                    w[k++] = a[j++];
            }
            memcpy(a, w, sizeof(int64_t) * (size_t)len);
        }
        s = t;
    }
    free(tmp);
    return 0;
}

/* Entry e's id in the columns' joint range (row-major; decreasing columns reversed). */
static inline int64_t spf_st_id(int64_t e, int ncols, const int64_t *const *cols,
                                const int *desc, const int64_t *lo, const int64_t *hi,
                                const int64_t *width)
{
    int64_t id = 0;
    for (int c = 0; c < ncols; ++c)
        id = id * width[c] + (desc[c] ? hi[c] - cols[c][e] : cols[c][e] - lo[c]);
    return id;
}

/* Ranks (and first marks) through a table over the columns' joint range, when it holds at
 * most 4n + 64 ids: each entry's (group, key) marked at its id (row-major over the columns'
 * ranges, decreasing columns reversed), the marks turned into ranks by counting along each
 * group's ids, then read back per entry.  1: done; 0: the range is too wide; -1: out of
 * memory. */
static inline int spf_st_ranks_table(int64_t n, int ngroup, int ncols,
                                     const int64_t *const *cols, const int *desc,
                                     int64_t *restrict rank, uint8_t *restrict first)
{
    if (ncols > 8 || n < 2)
        return 0;
    int64_t lo[8], hi[8], width[8], keys = 1;
    const int64_t span = spf_st_span(n, ncols, cols, lo, hi, width);
    if (!span)
        return 0;
    for (int c = ngroup; c < ncols; ++c)
        keys *= width[c];
    int64_t *table = calloc((size_t)span, sizeof(int64_t));
    if (!table)
        return -1;
    for (int64_t e = 0; e < n; ++e) {
        table[spf_st_id(e, ncols, cols, desc, lo, hi, width)] = 1;
    }
    for (int64_t g = 0; g < span; g += keys) {
        int64_t k = 0;                  /* a group's keys ranked from 0 */
        for (int64_t v = g; v < g + keys; ++v) {
            const int64_t mark = table[v];
            table[v] = k;
            k += mark;
        }
    }
    for (int64_t e = 0; e < n; ++e) {
        rank[e] = table[spf_st_id(e, ncols, cols, desc, lo, hi, width)];
    }
    if (first) {                        /* the first entry of each (group, key), in entry order */
        memset(table, 0, sizeof(int64_t) * (size_t)span);
        for (int64_t e = 0; e < n; ++e) {
            const int64_t id = spf_st_id(e, ncols, cols, desc, lo, hi, width);
            first[e] = (uint8_t)!table[id];
            table[id] = 1;
        }
    }
    free(table);
    return 1;
}

/* qsort's comparison of two ids. */
static inline int spf_st_id_cmp(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Ranks (and first marks) of entries whose groups come in runs (spf_st_in_runs), through a
 * workspace over the keys' joint range (at most 4n + 64 ids, row-major, decreasing columns
 * reversed): per run, its distinct keys marked in the workspace and listed, the list sorted (a
 * run holds few distinct keys), each key's rank put at its id, read back per entry, and the
 * marks cleared.  O(n) plus the sorts of the lists: no sort of the entries.  1: done; 0: the
 * keys' range is too wide; -1: out of memory. */
static inline int spf_st_ranks_runs(int64_t n, int ngroup, int ncols, const int64_t *const *cols,
                                    const int *desc, int64_t *restrict rank,
                                    uint8_t *restrict first)
{
    const int nkey = ncols - ngroup;
    if (nkey < 1 || nkey > 8)
        return 0;
    int64_t lo[8], hi[8], width[8];
    const int64_t span = spf_st_span(n, nkey, cols + ngroup, lo, hi, width);
    if (!span)
        return 0;
    int64_t *mark = calloc((size_t)span, sizeof(int64_t));   /* 0, or a key's rank + 1 */
    int64_t cap = 64, *keys = malloc(sizeof(int64_t) * (size_t)cap);
    if (!mark || !keys) {
        free(mark);
        free(keys);
        return -1;
    }
    for (int64_t s = 0; s < n;) {
        int64_t t = s, k = 0;       /* the run [s, t): entries of one group; k distinct keys */
        for (; t < n; ++t) {
            int same = 1;
            for (int c = 0; c < ngroup && same; ++c)
                same = cols[c][t] == cols[c][s];
            if (!same)
                break;
            const int64_t id = spf_st_id(t, nkey, cols + ngroup, desc + ngroup, lo, hi, width);
            if (first)
                first[t] = (uint8_t)!mark[id];
            if (mark[id])
                continue;
            mark[id] = 1;
            if (k == cap) {
                int64_t *grown = realloc(keys, sizeof(int64_t) * (size_t)(cap *= 2));
                if (!grown) {
                    free(mark);
                    free(keys);
                    return -1;
                }
                keys = grown;
            }
            keys[k++] = id;
        }
        if (k > 32)                     /* many keys: qsort; few: an insertion sort */
            qsort(keys, (size_t)k, sizeof(int64_t), spf_st_id_cmp);
        for (int64_t i = 1; i < k && k <= 32; ++i) {
            const int64_t v = keys[i];
            int64_t j = i;
            for (; j > 0 && keys[j - 1] > v; --j)
                keys[j] = keys[j - 1];
            keys[j] = v;
        }
        for (int64_t r = 0; r < k; ++r)
            mark[keys[r]] = r + 1;
        for (int64_t e = s; e < t; ++e)
            rank[e] = mark[spf_st_id(e, nkey, cols + ngroup, desc + ngroup, lo, hi, width)] - 1;
        for (int64_t r = 0; r < k; ++r)
            mark[keys[r]] = 0;
        s = t;
    }
    free(mark);
    free(keys);
    return 1;
}

/* Per entry, the rank of its key (columns ngroup..ncols-1) among the distinct keys of its group
 * (columns 0..ngroup-1), in the sort order; first[e] = 1 for the first entry of each distinct
 * (group, key).  Entries already in that order, or in runs of one group each with their keys in
 * order, are ranked in one pass where they are; runs of one group each through a workspace over
 * the keys (spf_st_ranks_runs), or where their range is too wide a sort of each run; others
 * through a table where the columns' joint range is narrow, else a stable sort of all.
 * Returns 1 when out of memory. */
static inline int spf_st_ranks(int64_t n, int ngroup, int ncols, const int64_t *const *cols,
                               const int *desc, int64_t *restrict rank, uint8_t *restrict first)
{
    int runs = spf_st_in_order(n, ncols, cols, desc);
    if (!runs) {
        runs = spf_st_in_runs(n, ngroup, ncols, cols, desc);
        if (runs < 0)
            return 1;
    }
    if (runs == 0) {                    /* a table over a narrow range of ids: no sort (groups
                                         * arriving whole are ranked run by run: cache-local) */
        const int table = spf_st_ranks_table(n, ngroup, ncols, cols, desc, rank, first);
        if (table)
            return table < 0;
    }
    if (runs == 2) {                    /* whole groups, keys out of order: a workspace */
        const int workspace = spf_st_ranks_runs(n, ngroup, ncols, cols, desc, rank, first);
        if (workspace)
            return workspace < 0;
    }
    const int sorted = runs == 1;
    int64_t *order = sorted ? NULL : spf_st_vector(n);
    if (!sorted && (!order || (runs == 2 ? spf_st_sort_runs(n, ngroup, ncols, cols, desc, order)
                                         : spf_st_order(n, ncols, cols, desc, order)))) {
        free(order);
        return 1;
    }
    int64_t key = -1, group_start = 0;
    for (int64_t s = 0; s < n; ++s) {
        const int64_t e = sorted ? s : order[s];
        int new_group = s == 0, new_key = s == 0;
        if (s > 0) {
            const int64_t f = sorted ? s - 1 : order[s - 1];
            for (int c = 0; c < ncols; ++c)
                if (cols[c][e] != cols[c][f]) {
                    new_key = 1;
                    new_group = new_group || c < ngroup;
                }
        }
        key += new_key;
        if (new_group)
            group_start = key;
        rank[e] = key - group_start;
        if (first)
            first[e] = (uint8_t)new_key;
    }
    free(order);
    return 0;
}

/* The largest value of a vector plus one, at least 0. */
static inline int64_t spf_st_top(int64_t n, const int64_t *restrict v)
{
    int64_t top = 0;
    for (int64_t e = 0; e < n; ++e)
        top = v[e] + 1 > top ? v[e] + 1 : top;
    return top;
}

/* A value array of n elements, 64-byte aligned (freed with free), every element set to fill
 * when fill_it (not when the entries write every slot). */
static inline spf_value_t *spf_st_values(int64_t n, int fill_it, spf_value_t fill)
{
    const size_t bytes = ((sizeof(spf_value_t) * (size_t)(n > 0 ? n : 1)) + 63) & ~(size_t)63;
    spf_value_t *p = bytes < ((size_t)4 << 20) ? aligned_alloc(64, bytes) : spf_st_alloc(bytes);
    if (p && fill_it && fill == 0)
        memset(p, 0, bytes);
    else if (p && fill_it)
        for (int64_t e = 0; e < n; ++e)
            p[e] = fill;
    return p;
}
