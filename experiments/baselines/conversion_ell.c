/*
 * CSR -> ELL baseline: the textbook conversion (SPARSKIT's csrell, the library route of the
 * paper's Table 3), written for spf's ELL layout (row-major colIdx[row][slot] and
 * data[row][slot], unused slots colIdx = -1, data = 0).
 *
 * csr_ell_width: the width, the longest row (reads rowPtr only).
 * csr_to_ell:    copies each row into its slots; the caller passes colIdx prefilled with -1
 *                and data with zeros (numpy allocates them, as it does for spf's result).
 *
 * Compiled by experiments/conversion.py with spf's own flags (spf.runtime.build.compile_flags()).
 */
#include <stdint.h>

int32_t csr_ell_width(int32_t num_rows, const int32_t *restrict row_ptr)
{
    int32_t width = 0;
    for (int32_t i = 0; i < num_rows; ++i) {
        const int32_t len = row_ptr[i + 1] - row_ptr[i];
        width = len > width ? len : width;
    }
    return width;
}

void csr_to_ell(int32_t num_rows, const int32_t *restrict row_ptr,
                const int32_t *restrict col_idx, const double *restrict data, int32_t width,
                int32_t *restrict ell_col, double *restrict ell_data)
{
    for (int32_t i = 0; i < num_rows; ++i) {
        const int64_t base = (int64_t)i * width;
        for (int32_t p = row_ptr[i]; p < row_ptr[i + 1]; ++p) {
            ell_col[base + p - row_ptr[i]] = col_idx[p];
            ell_data[base + p - row_ptr[i]] = data[p];
        }
    }
}
