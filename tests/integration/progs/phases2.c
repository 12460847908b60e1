/* Two named objects streamed in two alternating phases, a fixed amount of
 * work (so that runs on different devices have the same phase markers):
 * phase "pa" reads A, phase "pb" reads B. */
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

#define N (2u << 20) /* doubles: 16 MiB per object */

__attribute__((noinline)) static double *alloc_a(void) { return malloc(N * sizeof(double)); }
__attribute__((noinline)) static double *alloc_b(void) { return malloc(N * sizeof(double)); }

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
    int rounds = argc > 1 ? atoi(argv[1]) : 8;
    double *a = alloc_a(), *b = alloc_b();
    if (!a || !b)
        return 1;
    hetmem_name(a, "A");
    hetmem_name(b, "B");
    for (size_t i = 0; i < N; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
    }
    double s = 0;
    for (int r = 0; r < rounds; r++) {
        hetmem_phase_begin("pa");
        for (int k = 0; k < 4; k++)
            s += sum(a, N);
        hetmem_phase_end("pa");
        hetmem_phase_begin("pb");
        for (int k = 0; k < 4; k++)
            s += sum(b, N);
        hetmem_phase_end("pb");
    }
    printf("checksum %.0f\n", s);
    free(a);
    free(b);
    return 0;
}
