/* Streams over object A for about 80% of the time and B for 20%: four
 * passes over A per pass over B, equal sizes. Each object comes from its
 * own allocation site. Usage: ab [SECONDS] of streaming, counted in the
 * process's CPU time, so that a loaded machine lengthens the run instead
 * of thinning its samples. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "hetmem/hetmem.h"

#define N (8u << 20) /* doubles: 64 MiB per object */

__attribute__((noinline)) static double *alloc_a(void) { return malloc(N * sizeof(double)); }
__attribute__((noinline)) static double *alloc_b(void) { return malloc(N * sizeof(double)); }

/* noipa: gcc would otherwise infer `pure` and fold the four passes over A
 * into one. */
#if defined(__clang__)
#define NOIPA __attribute__((noinline, optnone))
#else
#define NOIPA __attribute__((noinline, noipa))
#endif
NOIPA static double sum(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    double *a = alloc_a(), *b = alloc_b();
    if (!a || !b)
        return 1;
    hetmem_name(a, "A");
    hetmem_name(b, "B");
    for (size_t i = 0; i < N; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    double s = 0;
    int rounds = 0;
    do {
        hetmem_phase_begin("stream");
        for (int k = 0; k < 4; k++) {
            s += sum(a, N);
            __asm__ volatile("" ::: "memory");
        }
        s += sum(b, N);
        hetmem_phase_end("stream");
        rounds++;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    } while ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < secs);
    printf("checksum %.0f per round\n", s / rounds);
    /* The CPU time the program got, for checks of the sample count (on
     * stderr: stdout is compared across runs). */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "cpu %.3f\n", (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                                      (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec);
    free(a);
    free(b);
    return 0;
}
