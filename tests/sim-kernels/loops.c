/* Simple loops whose native instruction count is known from the plain -O2
 * build of this same file: a sum reduction and a STREAM triad over N
 * doubles, REPS times.
 * usage: loops sum|triad N REPS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static double sum(const double *a, size_t n)
{
    double t = 0;
    for (size_t i = 0; i < n; i++)
        t += a[i];
    return t;
}

__attribute__((noinline)) static void triad(double *a, const double *b, const double *c, double s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "sum") != 0 && strcmp(argv[1], "triad") != 0)) {
        fprintf(stderr, "usage: loops sum|triad N REPS\n");
        return 2;
    }
    size_t n = strtoull(argv[2], NULL, 0), reps = strtoull(argv[3], NULL, 0);
    double *a = calloc(n + 1, sizeof *a), *b = calloc(n + 1, sizeof *b), *c = calloc(n + 1, sizeof *c);
    if (!a || !b || !c)
        return 1;
    double t = 0;
    for (size_t r = 0; r < reps; r++) {
        if (argv[1][0] == 's')
            t += sum(a, n);
        else
            triad(a, b, c, 3.0, n);
    }
    printf("%g %g\n", t, a[n / 2]);
    return 0;
}
