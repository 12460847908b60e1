/* Touches a 4 MiB array once, then reads it over and over for SECONDS
 * (default 0.6): after the first pass the program takes no page fault. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hetmem/hetmem.h"

#define N (512u << 10) /* doubles: 4 MiB */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.6, s = 0, t0 = now();
    volatile double *a = malloc(N * sizeof *a);
    if (!a)
        return 1;
    hetmem_name((void *)a, "A");
    for (size_t i = 0; i < N; i++)
        a[i] = (double)i;
    do
        for (size_t i = 0; i < N; i++)
            s += a[i];
    while (now() - t0 < secs);
    printf("%g\n", s);
    return 0;
}
