/*
 * STREAM triad (McCalpin): a[i] = b[i] + s * c[i] over three arrays far larger than the
 * last-level cache; the machine's sustainable memory bandwidth, against which the SpMV
 * experiment states how much of it the generated kernels use.
 *
 *     cc -O3 -march=native -fopenmp stream_triad.c -o stream_triad
 *     OMP_NUM_THREADS=2 ./stream_triad [elements] [repetitions]
 *
 * Prints the best bandwidth in GB/s (10^9 bytes/s), counting 3 x 8 bytes per element as
 * STREAM does (the write-allocate read of a[] is not counted).  Arrays are first touched by the
 * threads that use them (static schedule), as in STREAM.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 20000000L;
    const int reps = argc > 2 ? atoi(argv[2]) : 10;
    double *a = malloc(sizeof(double) * (size_t)n);
    double *b = malloc(sizeof(double) * (size_t)n);
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!a || !b || !c || n <= 0 || reps <= 0) {
        fprintf(stderr, "stream_triad: bad size or out of memory\n");
        return 1;
    }
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    const double s = 3.0;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const double t0 = omp_get_wtime();
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < n; ++i)
            a[i] = b[i] + s * c[i];
        const double t = omp_get_wtime() - t0;
        if (t < best)
            best = t;
    }
    /* use the result so the compiler keeps the loops */
    double check = 0.0;
    for (long i = 0; i < n; i += n / 16 + 1)
        check += a[i];
    if (check <= 0.0)
        fprintf(stderr, "stream_triad: unexpected result\n");
    printf("%.3f\n", 3.0 * 8.0 * (double)n / best / 1e9);
    free(a);
    free(b);
    free(c);
    return 0;
}
