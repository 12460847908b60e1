/* Random reads: COUNT loads at pseudo-random positions of a SIZE-byte
 * array (independent of each other, unlike the chase). With a third
 * argument D (lines, negative or positive), each random load at line L is
 * followed by one at line L + D, as bracketing lookups read neighbours.
 * usage: gather SIZE COUNT [D] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: gather SIZE COUNT [D]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0) / sizeof(uint64_t), count = strtoull(argv[2], NULL, 0);
    long d = argc == 4 ? strtol(argv[3], NULL, 0) * 8 : 0; /* 8 elements per line */
    size_t mask = 1;
    while (mask * 2 <= n)
        mask *= 2;
    mask--;
    uint64_t *a = malloc((mask + 1) * sizeof *a);
    if (!a)
        return 1;
    for (size_t i = 0; i <= mask; i++)
        a[i] = i;
    uint64_t x = 88172645463325252ull, sum = 0;
    hetmem_phase_begin("gather");
    if (!d) {
        for (size_t i = 0; i < count; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sum += a[x & mask];
        }
    } else {
        for (size_t i = 0; i < count; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t i0 = x & mask;
            sum += a[i0] + a[(i0 + (size_t)d) & mask];
        }
    }
    hetmem_phase_end("gather");
    printf("%llu\n", (unsigned long long)sum);
    free(a);
    return 0;
}
