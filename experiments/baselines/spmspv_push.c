/*
 * SpMSpV push baseline: y = A x with A in CSC and x a sparse vector (idx, val).
 *
 * The column-wise saxpy a performance engineer writes: zero y, then for each nonzero x(j)
 * scatter x(j) * A(:, j) into y.  Work O(rows + sum of the matched columns' lengths).
 *
 * Compiled by experiments/spmspv_push.py with spf's own flags (spf.runtime.build.compile_flags())
 * and called through ctypes on the very arrays of the inputs.
 */
#include <stdint.h>
#include <string.h>

void spmspv_push(int32_t num_rows, const int32_t *restrict col_ptr,
                 const int32_t *restrict row_idx, const double *restrict a_val, int32_t x_len,
                 const int32_t *restrict x_idx, const double *restrict x_val,
                 double *restrict y)
{
    memset(y, 0, sizeof(double) * (size_t)num_rows);
    for (int32_t p = 0; p < x_len; ++p) {
        const int32_t j = x_idx[p];
        const double xj = x_val[p];
        for (int32_t q = col_ptr[j]; q < col_ptr[j + 1]; ++q)
            y[row_idx[q]] += a_val[q] * xj;
    }
}
