/* Dependent pointer chase: one pointer per 64-byte line, in a random cyclic
 * order over SIZE bytes, followed STEPS times.  usage: chase SIZE STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: chase SIZE STEPS\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0), steps = strtoull(argv[2], NULL, 0);
    size_t n = size / 64;
    void **a = aligned_alloc(64, n * 64);
    size_t *perm = malloc(n * sizeof *perm);
    if (!a || !perm || n < 2)
        return 1;
    hetmem_name(a, "chain");
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t x = 88172645463325252ull; /* xorshift: same order every run */
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = x % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        a[perm[i] * 8] = &a[perm[(i + 1) % n] * 8];
    free(perm);
    /* Warm-up lap, then the measured chase in its own phase. */
    void **p = a;
    for (size_t i = 0; i < n; i++)
        p = *p;
    hetmem_phase_begin("chase");
    for (size_t i = 0; i < steps; i++)
        p = *p;
    hetmem_phase_end("chase");
    printf("%p\n", (void *)p == (void *)a ? (void *)0 : (void *)1);
    return 0;
}
