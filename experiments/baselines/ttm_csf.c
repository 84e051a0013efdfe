/*
 * TTM mode-1 on CSF, written by hand: C(i,j,l) = sum_k A(i,j,k) * B(k,l), B dense K x R
 * (row-major), the baseline of the TTM experiment (paper Table 6).  Two outputs, as spf
 * generates them:
 *
 * - ttm_dense:  C dense I x J x R (zeroed here, with the same threads);
 * - ttm_fibres: C shares A's (i, j) fibres, R values per fibre (fibre p1 owns C[p1*R .. +R)).
 *
 * The straightforward loops: root fibres, their (i, j) fibres, the fibre's nonzeros, the R
 * columns of B; the root-fibre loop is an OpenMP loop with the same schedule as spf's
 * (threads from OMP_NUM_THREADS / omp_set_num_threads; 1 thread = serial).  Compiled with
 * spf's flags plus -fopenmp.
 */
#include <stdint.h>
#include <string.h>

void ttm_dense(int32_t n0, const int32_t *restrict idx0, const int32_t *restrict ptr1,
               const int32_t *restrict idx1, const int32_t *restrict ptr2,
               const int32_t *restrict idx2, const double *restrict val, int32_t J, int32_t R,
               const double *restrict B, double *restrict C, int64_t c_size)
{
    #pragma omp parallel for schedule(static)
    for (int64_t z = 0; z < c_size; ++z)
        C[z] = 0.0;
    #pragma omp parallel for schedule(guided,32)
    for (int p0 = 0; p0 < n0; ++p0) {
        const int64_t i = idx0[p0];
        for (int p1 = ptr1[p0]; p1 < ptr1[p0 + 1]; ++p1) {
            double *restrict c = C + (i * J + idx1[p1]) * R;
            for (int p2 = ptr2[p1]; p2 < ptr2[p1 + 1]; ++p2) {
                const double a = val[p2];
                const double *restrict b = B + (int64_t)idx2[p2] * R;
                for (int l = 0; l < R; ++l)
                    c[l] += a * b[l];
            }
        }
    }
}

void ttm_fibres(int32_t n0, const int32_t *restrict ptr1, const int32_t *restrict ptr2,
                const int32_t *restrict idx2, const double *restrict val, int32_t R,
                const double *restrict B, double *restrict C)
{
    #pragma omp parallel for schedule(guided,32)
    for (int p0 = 0; p0 < n0; ++p0) {
        for (int p1 = ptr1[p0]; p1 < ptr1[p0 + 1]; ++p1) {
            double *restrict c = C + (int64_t)p1 * R;
            for (int l = 0; l < R; ++l)
                c[l] = 0.0;
            for (int p2 = ptr2[p1]; p2 < ptr2[p1 + 1]; ++p2) {
                const double a = val[p2];
                const double *restrict b = B + (int64_t)idx2[p2] * R;
                for (int l = 0; l < R; ++l)
                    c[l] += a * b[l];
            }
        }
    }
}
