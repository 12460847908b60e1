/* Index chase: i = next[i] over 32-bit indices, one per 64-byte line, in a
 * random cyclic order over SIZE bytes, followed STEPS times (the address of
 * each load is computed from the index the previous one loaded).
 * usage: ichase SIZE STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ichase SIZE STEPS\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0), steps = strtoull(argv[2], NULL, 0);
    size_t n = size / 64;
    uint32_t *next = aligned_alloc(64, n * 64);
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!next || !perm || n < 2 || n * 16 >= UINT32_MAX)
        return 1;
    hetmem_name(next, "next");
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    uint64_t x = 88172645463325252ull; /* xorshift: same order every run */
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = x % (i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        next[perm[i] * 16] = perm[(i + 1) % n] * 16;
    free(perm);
    uint32_t i = next[0];
    hetmem_phase_begin("chase");
    for (size_t k = 0; k < steps; k++)
        i = next[i];
    hetmem_phase_end("chase");
    printf("%u\n", i);
    return 0;
}
