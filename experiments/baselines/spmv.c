/*
 * SpMV baselines: y = A x with A in CSR or in COO, as a performance engineer writes them.
 *
 * CSR: one dot product per row, rows shared out by `#pragma omp parallel for
 * schedule(static)` (contiguous row blocks, one per thread).
 * COO: one pass over the entries, y[row] += val * x[col]; in parallel the entries are shared
 * out and y is an OpenMP array reduction (`reduction(+ : y[:n])`: a private copy of y per
 * thread, summed at the end).
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
