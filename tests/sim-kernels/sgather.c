/* Gather through an index array over 64-byte structs: sum += a[b[i]].x for
 * COUNT random indices b[i] (uint32, read in order) into N = SIZE / 64
 * structs. Each load's address is computed from a loaded index, but no
 * load depends on another gather's value: the gathers overlap.
 * usage: sgather SIZE COUNT */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

struct elem {
    uint64_t id;  /* the struct's own index */
    double x;
    double pad[6];
};

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: sgather SIZE COUNT\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0) / sizeof(struct elem), count = strtoull(argv[2], NULL, 0);
    if (n < 2 || n >= UINT32_MAX || !count)
        return 2;
    struct elem *a = aligned_alloc(64, n * sizeof *a);
    uint32_t *b = malloc(count * sizeof *b);
    if (!a || !b)
        return 1;
    hetmem_name(a, "a");
    hetmem_name(b, "b");
    for (size_t i = 0; i < n; i++) {
        a[i].id = i;
        a[i].x = (double)i * 0.5;
    }
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < count; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (uint32_t)(x % n);
    }
    double sum = 0;
    hetmem_phase_begin("gather");
    for (size_t i = 0; i < count; i++)
        sum += a[b[i]].x;
    hetmem_phase_end("gather");
    printf("%g\n", sum);
    free(a);
    free(b);
    return 0;
}
