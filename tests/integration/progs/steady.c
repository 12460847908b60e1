/* Touches a 4 MiB array once, then reads it over and over for SECONDS of
 * CPU time (default 0.6): after the first pass the program takes no page
 * fault. CPU time, so that a loaded machine lengthens the run instead of
 * thinning its samples. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "hetmem/hetmem.h"

#define N (512u << 10) /* doubles: 4 MiB */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU time of the process since it started, user and system. */
static double cpu_used(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

int main(int argc, char **argv)
{
    double started = cpu_used(), w0 = wall();
    double secs = argc > 1 ? atof(argv[1]) : 0.6, s = 0, t0 = now();
    volatile double *a = malloc(N * sizeof *a);
    if (!a)
        return 1;
    hetmem_name((void *)a, "A");
    for (size_t i = 0; i < N; i++)
        a[i] = (double)i;
    /* Every page fault the program takes falls before main or in the first
     * pass, and so do the samples a check may expect to see flagged as
     * faults: the sampler's clock is wall time, so the pass is timed on
     * the wall (a loaded machine lengthens it), the start-up in CPU time. */
    double touched = wall() - w0;
    do
        for (size_t i = 0; i < N; i++)
            s += a[i];
    while (now() - t0 < secs);
    printf("%g\n", s);
    printf("start %.4f\ntouch %.4f\n", started, touched);
    /* The CPU time the program got, for checks of the sample count. */
    printf("cpu %.3f\n", cpu_used());
    return 0;
}
