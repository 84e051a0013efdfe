/*
 * DIA -> CSR baseline: the loop a performance engineer writes (scipy 1.17's dia_tocsr has
 * the same shape): rows outer, the diagonals of each row inner in increasing offset order,
 * so each row's columns come out sorted and the entries are written once, in order.  The
 * caller allocates the output for every in-range slot (an upper bound: zeros are not
 * stored) and trims it to the returned count; out_ptr has num_rows + 1 entries.
 *
 * Compiled by experiments/conversion.py with spf's own flags (spf.runtime.build.compile_flags()).
 */
#include <stdint.h>

int64_t dia_to_csr(int32_t num_rows, int32_t num_cols, int32_t num_diags, int32_t length,
                   const int32_t *restrict offsets, const double *restrict data,
                   int32_t *restrict out_ptr, int32_t *restrict out_idx,
                   double *restrict out_val)
{
    int64_t q = 0;
    out_ptr[0] = 0;
    for (int32_t i = 0; i < num_rows; ++i) {
        for (int32_t d = 0; d < num_diags; ++d) {
            const int32_t j = i + offsets[d];
            if (j < 0 || j >= num_cols || j >= length)
                continue;
            const double v = data[(int64_t)d * length + j];
            if (v != 0.0) {
                out_idx[q] = j;
                out_val[q] = v;
                ++q;
            }
        }
        out_ptr[i + 1] = (int32_t)q;
    }
    return q;
}
