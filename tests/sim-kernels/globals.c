/* Static and global arrays, as NPB-style codes keep them: fills a global
 * array and a file-static one of 8 MiB each, then reads both REPS times.
 * usage: globals REPS */
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 20)
double gvec[N];
static double svec[N];

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: globals REPS\n");
        return 2;
    }
    size_t reps = strtoull(argv[1], NULL, 0);
    for (size_t i = 0; i < N; i++)
        gvec[i] = svec[i] = (double)i;
    double sum = 0;
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < N; i++)
            sum += gvec[i] + svec[i];
    printf("%g\n", sum);
    return 0;
}
