/*
 * Sparse add baseline: C = A + B with A, B and C in CSR (sorted, unique column indices).
 *
 * The textbook two-pointer merge per row (what scipy's csr_binop_csr and a performance
 * engineer write): while both rows have entries, take the smaller column (both when equal);
 * then copy the rest of the row that is left.  C's arrays are preallocated by the caller
 * with room for nnz(A) + nnz(B) entries; the function returns nnz(C).  Explicit zeros from
 * cancellation are kept (like spf; scipy drops them).
 *
 * Compiled by experiments/sparse_add.py with spf's own flags (spf.runtime.build.compile_flags())
 * and called through ctypes on the very arrays of the inputs.
 */
#include <stdint.h>

int64_t csr_add(int32_t num_rows, const int32_t *restrict a_ptr, const int32_t *restrict a_idx,
                const double *restrict a_val, const int32_t *restrict b_ptr,
                const int32_t *restrict b_idx, const double *restrict b_val,
                int32_t *restrict c_ptr, int32_t *restrict c_idx, double *restrict c_val)
{
    int64_t n = 0;
    c_ptr[0] = 0;
    for (int32_t i = 0; i < num_rows; ++i) {
        int32_t pa = a_ptr[i], pb = b_ptr[i];
        const int32_t ea = a_ptr[i + 1], eb = b_ptr[i + 1];
        while (pa < ea && pb < eb) {
            const int32_t ca = a_idx[pa], cb = b_idx[pb];
            if (ca < cb) {
                c_idx[n] = ca;
                c_val[n++] = a_val[pa++];
            } else if (cb < ca) {
                c_idx[n] = cb;
                c_val[n++] = b_val[pb++];
            } else {
                c_idx[n] = ca;
                c_val[n++] = a_val[pa++] + b_val[pb++];
            }
        }
        for (; pa < ea; ++pa) {
            c_idx[n] = a_idx[pa];
            c_val[n++] = a_val[pa];
        }
        for (; pb < eb; ++pb) {
            c_idx[n] = b_idx[pb];
            c_val[n++] = b_val[pb];
        }
        c_ptr[i + 1] = (int32_t)n;
    }
    return n;
}
