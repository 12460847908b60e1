/* Static and global arrays, as NPB-style codes keep them: fills a global
 * array and a file-static one of 8 MiB each, then reads both REPS times;
 * with "lib", also lvec, a 2 MiB static array of the shared library
 * libsimglobals.so, reached through a pointer.
 * usage: globals REPS [lib] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 20)
double gvec[N];
static double svec[N];
double *globals_lib_vec(size_t *n);

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "lib"))) {
        fprintf(stderr, "usage: globals REPS [lib]\n");
        return 2;
    }
    size_t reps = strtoull(argv[1], NULL, 0);
    for (size_t i = 0; i < N; i++)
        gvec[i] = svec[i] = (double)i;
    double sum = 0;
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < N; i++)
            sum += gvec[i] + svec[i];
    if (argc == 3) {
        size_t n;
        double *l = globals_lib_vec(&n);
        for (size_t i = 0; i < n; i++)
            l[i] = (double)i;
        for (size_t r = 0; r < reps; r++)
            for (size_t i = 0; i < n; i++)
                sum += l[i];
    }
    printf("%g\n", sum);
    return 0;
}
