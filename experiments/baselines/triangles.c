/* Triangle counting by the textbook masked dot product ("SandiaDot", Wolf et al. 2017):
 * L is the strictly lower triangle of an undirected graph in CSR with sorted rows; for every
 * edge (i, j) of L the rows i and j of L are merged with two pointers and their common
 * columns counted.  counts[e] receives the count of edge e (what C<L> = L * L' under
 * plus_pair stores); the caller sums them.  Rows in parallel when compiled with OpenMP. */
#include <stdint.h>

void triangles(int32_t n, const int32_t *restrict ptr, const int32_t *restrict idx,
               double *restrict counts)
{
    #pragma omp parallel for schedule(dynamic, 64)
    for (int32_t i = 0; i < n; ++i) {
        for (int32_t e = ptr[i]; e < ptr[i + 1]; ++e) {
            const int32_t j = idx[e];
            int32_t p = ptr[i], q = ptr[j];
            const int32_t pe = ptr[i + 1], qe = ptr[j + 1];
            int64_t c = 0;
            while (p < pe && q < qe) {
                const int32_t a = idx[p], b = idx[q];
                c += a == b;
                p += a <= b;
                q += b <= a;
            }
            counts[e] = (double)c;
        }
    }
}
