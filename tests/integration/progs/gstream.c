/* Streams over two arrays that are not heap objects: gbig, a global, for
 * about 75% of the time and sbig, a file-static, for 25% (three passes
 * over gbig per pass over sbig, equal sizes); gsmall, a global under the
 * 64 KiB object size, is touched but is no object. Usage: gstream
 * [SECONDS] of streaming, counted in the process's CPU time, so that a
 * loaded machine lengthens the run instead of thinning its samples.
 * Before main touches anything it prints "gbig policy MODE MASK": the
 * policy get_mempolicy(MPOL_F_ADDR) reports for gbig's first whole page
 * (0 default, 2 bind). */
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hetmem/hetmem.h"

#define N (4u << 20) /* doubles: 32 MiB per array */
double gbig[N];
static double sbig[N];
double gsmall[1024];

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
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)gbig + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    int mode = -1;
    unsigned long mask[16] = {0};
    if (get_mempolicy(&mode, mask, 1024, (void *)first, MPOL_F_ADDR) != 0)
        mode = -1;
    printf("gbig policy %d 0x%lx\n", mode, mask[0]);
    for (size_t i = 0; i < N; i++) {
        gbig[i] = 1.0;
        sbig[i] = 2.0;
    }
    for (size_t i = 0; i < 1024; i++)
        gsmall[i] = 3.0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    double s = 0;
    int rounds = 0;
    do {
        hetmem_phase_begin("stream");
        for (int k = 0; k < 3; k++) {
            s += sum(gbig, N);
            __asm__ volatile("" ::: "memory");
        }
        s += sum(sbig, N);
        hetmem_phase_end("stream");
        rounds++;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    } while ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < secs);
    printf("checksum %.0f per round\n", s / rounds + sum(gsmall, 1024));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "cpu %.3f\n", (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                                      (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec);
    return 0;
}
