/*
 * Full 2-D convolution of a sparse image (CSR) with a small dense filter, written by hand:
 * O(i,j) = sum_{k,l} I(i-k, j-l) F(k,l), O of (rows + K0 - 1) x (cols + K1 - 1), F row-major
 * K0 x K1, O row-major; the baseline of experiments/convolution.py.  Two loop orders:
 *
 * - conv_scatter: the textbook algorithm, serial: zero O, then for every stored entry
 *   I(r, c) = v add v * F into the K0 x K1 window of O at (r, c).  What spf's kernel does
 *   without parallel=True (the same loops, the filter row innermost).
 * - conv_rows: the same products grouped by output row, an OpenMP loop over O's rows
 *   (threads from OMP_NUM_THREADS / omp_set_num_threads; 1 thread = serial): output row i
 *   is zeroed, then gets image row i - k times filter row k for each k.  No two threads
 *   write the same row, so it needs no atomics or barriers; the same multiply-adds as the
 *   scatter, each image row read K0 times instead of once.
 *
 * Both zero O themselves (as spf's kernel does).  Compiled with spf's flags plus -fopenmp
 * and called through ctypes on the very arrays of the inputs.
 */
#include <stdint.h>
#include <string.h>

void conv_scatter(int32_t rows, const int32_t *restrict ptr, const int32_t *restrict idx,
                  const double *restrict val, int32_t k0, int32_t k1,
                  const double *restrict F, int32_t o1, double *restrict O, int64_t o_size)
{
    memset(O, 0, sizeof(double) * (size_t)o_size);
    for (int32_t r = 0; r < rows; ++r) {
        for (int32_t p = ptr[r]; p < ptr[r + 1]; ++p) {
            const double v = val[p];
            double *restrict o = O + (int64_t)r * o1 + idx[p];
            for (int32_t k = 0; k < k0; ++k) {
                const double *restrict f = F + (int64_t)k * k1;
                double *restrict ok = o + (int64_t)k * o1;
                #pragma omp simd
                for (int32_t l = 0; l < k1; ++l)
                    ok[l] += v * f[l];
            }
        }
    }
}

void conv_rows(int32_t rows, const int32_t *restrict ptr, const int32_t *restrict idx,
               const double *restrict val, int32_t k0, int32_t k1, const double *restrict F,
               int32_t o0, int32_t o1, double *restrict O)
{
    #pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < o0; ++i) {
        double *restrict oi = O + (int64_t)i * o1;
        memset(oi, 0, sizeof(double) * (size_t)o1);
        const int32_t k_lo = i - rows + 1 > 0 ? i - rows + 1 : 0;
        const int32_t k_hi = i + 1 < k0 ? i + 1 : k0;
        for (int32_t k = k_lo; k < k_hi; ++k) {
            const int32_t r = i - k;
            const double *restrict f = F + (int64_t)k * k1;
            for (int32_t p = ptr[r]; p < ptr[r + 1]; ++p) {
                const double v = val[p];
                double *restrict o = oi + idx[p];
                #pragma omp simd
                for (int32_t l = 0; l < k1; ++l)
                    o[l] += v * f[l];
            }
        }
    }
}
