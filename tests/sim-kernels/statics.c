/* Global and static arrays as objects without a placement rule: a file-static
 * array (sarr), a global one (garr) and a heap array (harr), 8 MiB each,
 * written once and then read REPS times. Beside them, arrays that must not
 * become objects: a global under the 64 KiB object size (below, one double
 * short of it), a read-only table (ctab, .rodata), and one at exactly the
 * size (edge, 64 KiB), which must.
 * usage: statics REPS */
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 20)
static double sarr[N];
double garr[N];
double edge[8192];
double below[8191];
const double ctab[16384] = {1.0, 2.0, 3.0};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: statics REPS\n");
        return 2;
    }
    size_t reps = strtoull(argv[1], NULL, 0);
    double *harr = malloc(N * sizeof(double));
    if (!harr)
        return 1;
    for (size_t i = 0; i < N; i++)
        sarr[i] = garr[i] = harr[i] = (double)i;
    for (size_t i = 0; i < 8192; i++)
        edge[i] = (double)i;
    for (size_t i = 0; i < 8191; i++)
        below[i] = ctab[i & 15];
    double sum = 0;
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < N; i++)
            sum += sarr[i] + garr[i] + harr[i];
    for (size_t i = 0; i < 8191; i++)
        sum += edge[i] + below[i];
    printf("%g\n", sum);
    free(harr);
    return 0;
}
