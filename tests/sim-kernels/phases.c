/* Two phases, each streaming over its own array: a placement with
 * per-phase rules moves each array to the fast device for its phase. The
 * arrays come from calloc (fresh pages, not populated before the phases)
 * unless WRITE is 1, which writes them first.
 * usage: phases SIZE REPS [WRITE] */
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

static double sweep(const double *x, size_t n, size_t reps)
{
    double s = 0;
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i++)
            s += x[i];
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: phases SIZE REPS [WRITE]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0) / sizeof(double), reps = strtoull(argv[2], NULL, 0);
    double *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    if (!a || !b)
        return 1;
    hetmem_name(a, "A");
    hetmem_name(b, "B");
    if (argc == 4 && strtoull(argv[3], NULL, 0) == 1)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = 1;
    hetmem_phase_begin("pa");
    double s = sweep(a, n, reps);
    hetmem_phase_end("pa");
    hetmem_phase_begin("pb");
    s += sweep(b, n, reps);
    hetmem_phase_end("pb");
    printf("%g\n", s);
    free(a);
    free(b);
    return 0;
}
