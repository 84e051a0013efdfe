/*
 * CSR -> CSC baseline (and CSC -> CSR: the same transpose of the compressed arrays): the
 * textbook counting sort a performance engineer writes (SPARSKIT's csrcsc, scipy's csr_tocsc):
 * count the entries per column, prefix-sum the counts into the column pointer, then scatter
 * every entry to its column's next free slot, rows in increasing order, so each column comes
 * out sorted.  The caller allocates the output arrays (numpy, as for spf's result); out_ptr
 * has num_cols + 1 entries and is written completely.
 *
 * Compiled by experiments/conversion.py with spf's own flags (spf.runtime.build.compile_flags()).
 */
#include <stdint.h>
#include <string.h>

void csr_transpose(int32_t num_rows, int32_t num_cols, const int32_t *restrict ptr,
                   const int32_t *restrict idx, const double *restrict val,
                   int32_t *restrict out_ptr, int32_t *restrict out_idx,
                   double *restrict out_val)
{
    const int32_t nnz = ptr[num_rows];
    memset(out_ptr, 0, sizeof(int32_t) * ((size_t)num_cols + 1));
    for (int32_t p = 0; p < nnz; ++p)
        ++out_ptr[idx[p] + 1];
    for (int32_t j = 0; j < num_cols; ++j)
        out_ptr[j + 1] += out_ptr[j];
    for (int32_t i = 0; i < num_rows; ++i) {
        for (int32_t p = ptr[i]; p < ptr[i + 1]; ++p) {
            const int32_t q = out_ptr[idx[p]]++;
            out_idx[q] = i;
            out_val[q] = val[p];
        }
    }
    for (int32_t j = num_cols; j > 0; --j)      /* the slots moved one column on: shift back */
        out_ptr[j] = out_ptr[j - 1];
    out_ptr[0] = 0;
}
