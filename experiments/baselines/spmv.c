/*
 * SpMV baselines: y = A x with A in CSR or in COO, as a performance engineer writes them.
 *
 * CSR: one dot product per row, rows shared out by `#pragma omp parallel for
 * schedule(static)` (contiguous row blocks, one per thread).
 * COO: one pass over the entries, y[row] += val * x[col]; in parallel the entries are shared
 * out and y is an OpenMP array reduction (`reduction(+ : y[:n])`: a private copy of y per
 * thread, summed at the end).
 * ELL: one dot product per row over its width slots, a padding slot (column -1) skipped, as
 * CUSP's ell_matrix kernel; rows shared out like CSR's.
 * DIA: one pass per stored diagonal over the rows it covers (scipy's dia_matvec), the rows of
 * each diagonal shared out statically (the barrier after each keeps y's updates apart).
 *
 * Compiled by experiments/spmv.py with spf's flags plus -fopenmp and called through ctypes
 * on the very arrays of the inputs; spmv_threads sets the thread count.
 */
#include <omp.h>
#include <stdint.h>
#include <string.h>

void spmv_threads(int threads) { omp_set_num_threads(threads); }

void spmv_csr(int32_t n, const int32_t *restrict ptr, const int32_t *restrict idx,
              const double *restrict val, const double *restrict x, double *restrict y)
{
    #pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < n; ++i) {
        double sum = 0.0;
        for (int32_t p = ptr[i]; p < ptr[i + 1]; ++p)
            sum += val[p] * x[idx[p]];
        y[i] = sum;
    }
}

void spmv_coo(int32_t n, int64_t nnz, const int32_t *restrict row,
              const int32_t *restrict col, const double *restrict val,
              const double *restrict x, double *restrict y)
{
    memset(y, 0, sizeof(double) * (size_t)n);
    #pragma omp parallel for schedule(static) reduction(+ : y[:n])
    for (int64_t p = 0; p < nnz; ++p)
        y[row[p]] += val[p] * x[col[p]];
}

void spmv_ell(int32_t n, int32_t width, const int32_t *restrict col,
              const double *restrict val, const double *restrict x, double *restrict y)
{
    #pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < n; ++i) {
        double sum = 0.0;
        const int64_t row = (int64_t)i * width;
        for (int32_t k = 0; k < width; ++k) {
            const int32_t c = col[row + k];
            if (c >= 0)
                sum += val[row + k] * x[c];
        }
        y[i] = sum;
    }
}

void spmv_dia(int32_t n, int32_t m, int32_t ndiags, const int32_t *restrict offset,
              const double *restrict val, const double *restrict x, double *restrict y)
{
    memset(y, 0, sizeof(double) * (size_t)n);
    #pragma omp parallel
    for (int32_t d = 0; d < ndiags; ++d) {
        const int32_t off = offset[d];
        const int32_t lo = off < 0 ? -off : 0;
        const int32_t hi = n < m - off ? n : m - off;
        const double *restrict diag = val + (int64_t)d * n;
        #pragma omp for schedule(static)
        for (int32_t i = lo; i < hi; ++i)
            y[i] += diag[i] * x[i + off];
    }
}
