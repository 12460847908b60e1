/* First touch: one store per page of a fresh 128 MiB allocation, the value
 * read from a small array that stays in cache. Nearly all the time goes to
 * the kernel's page faults on B (zeroing each page); A costs next to
 * nothing. Repeats with a new B until SECONDS (default 0.6) of CPU time
 * have passed (CPU time, so that a loaded machine lengthens the run instead
 * of thinning its samples), and prints that CPU time as "cpu SECONDS". */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "hetmem/hetmem.h"

#define NB (16u << 20) /* doubles: 128 MiB */
#define NA (128u << 10) /* doubles: 1 MiB */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.6, s = 0, t0 = now();
    double *a = malloc(NA * sizeof *a);
    if (!a)
        return 1;
    hetmem_name(a, "A");
    for (size_t i = 0; i < NA; i++)
        a[i] = (double)i;
    int rounds = 0;
    do {
        double *b = malloc(NB * sizeof *b);
        if (!b)
            return 1;
        hetmem_name(b, "B");
        for (size_t p = 0; p < NB / 512; p++)
            b[p * 512] = a[p % NA] + 1.0;
        s += b[NB - 512];
        free(b);
        rounds++;
    } while (now() - t0 < secs);
    printf("%d %g\n", rounds, s);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("cpu %.3f\n", (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec);
    return 0;
}
