/* Binary search: LOOKUPS random keys searched in a sorted array of N
 * 64-bit values (a[i] = 2i), branch-free (the compiler's conditional
 * move), so the next probe's address depends on the loaded value only
 * through a comparison.
 * usage: bsearch N LOOKUPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

__attribute__((noinline)) static size_t lower_bound(const uint64_t *a, size_t n, uint64_t key)
{
    const uint64_t *base = a;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] < key ? base + half : base;
        n -= half;
    }
    return (size_t)(base - a) + (*base < key);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bsearch N LOOKUPS\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0), lookups = strtoull(argv[2], NULL, 0);
    uint64_t *a = malloc(n * sizeof *a);
    if (!a || n == 0)
        return 1;
    hetmem_name(a, "a");
    for (size_t i = 0; i < n; i++)
        a[i] = 2 * i;
    uint64_t x = 88172645463325252ull, found = 0;
    hetmem_phase_begin("search");
    for (size_t k = 0; k < lookups; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        found += lower_bound(a, n, x % (2 * n));
    }
    hetmem_phase_end("search");
    printf("%llu\n", (unsigned long long)found);
    return 0;
}
