/* Two phases, each streaming over its own array: a placement with
 * per-phase rules moves each array to the fast device for its phase.
 * usage: phases SIZE REPS */
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
    if (argc != 3) {
        fprintf(stderr, "usage: phases SIZE REPS\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0) / sizeof(double), reps = strtoull(argv[2], NULL, 0);
    double *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    if (!a || !b)
        return 1;
    hetmem_name(a, "A");
    hetmem_name(b, "B");
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
