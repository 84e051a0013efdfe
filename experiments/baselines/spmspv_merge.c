/*
 * SpMSpV baseline: y = A x with A in CSR and x a sparse vector with sorted unique indices.
 *
 * Per row, the textbook two-pointer conjunctive merge of the paper's Fig. 10(b) (TACO's
 * co-iteration): both cursors are loaded every iteration, the smaller coordinate is taken
 * as the current one, and each cursor advances when it holds that coordinate.  The merge
 * stops as soon as either list is exhausted.  Work per row: O(row length + x.len).
 *
 * spmspv_merge_branchy is the same merge written with branches instead of the branchless
 * cursor updates: the next load's address then no longer waits for the previous comparison
 * (the branch predictor guesses it), which matters when one list is much longer than the
 * other.  It is a second reference, not the paper's baseline.
 *
 * Compiled by experiments/spmspv.py with spf's own flags (spf.runtime.build.compile_flags()) and called
 * through ctypes on the very arrays of the spf tensors.  Every y[i] is written (no separate
 * zeroing pass).
 */
#include <stdint.h>

int spmspv_merge(int32_t num_rows, const int32_t *restrict row_ptr,
                 const int32_t *restrict col_idx, const double *restrict data,
                 int32_t x_len, const int32_t *restrict x_idx, const double *restrict x_val,
                 double *restrict y)
{
    for (int32_t i = 0; i < num_rows; ++i) {
        int32_t pA = row_ptr[i];
        const int32_t endA = row_ptr[i + 1];
        int32_t pB = 0;
        double v = 0.0;
        while (pA < endA && pB < x_len) {
            const int32_t A0 = col_idx[pA];
            const int32_t B0 = x_idx[pB];
            const int32_t j = A0 < B0 ? A0 : B0;
            if (A0 == j && B0 == j)
                v += data[pA] * x_val[pB];
            pA += (int32_t)(A0 == j);
            pB += (int32_t)(B0 == j);
        }
        y[i] = v;
    }
    return 0;
}

int spmspv_merge_branchy(int32_t num_rows, const int32_t *restrict row_ptr,
                         const int32_t *restrict col_idx, const double *restrict data,
                         int32_t x_len, const int32_t *restrict x_idx,
                         const double *restrict x_val, double *restrict y)
{
    for (int32_t i = 0; i < num_rows; ++i) {
        int32_t pA = row_ptr[i];
        const int32_t endA = row_ptr[i + 1];
        int32_t pB = 0;
        double v = 0.0;
        while (pA < endA && pB < x_len) {
            const int32_t A0 = col_idx[pA];
            const int32_t B0 = x_idx[pB];
            if (A0 == B0) {
                v += data[pA] * x_val[pB];
                ++pA;
                ++pB;
            } else if (A0 < B0) {
                ++pA;
            } else {
                ++pB;
            }
        }
        y[i] = v;
    }
    return 0;
}
