/* Index chase over slots: i = next[i * (SLOT / WIDTH) + FIELD / WIDTH],
 * where next holds WIDTH-byte (4 or 8) unsigned indices, one per SLOT-byte
 * slot (an array of structs whose index field sits FIELD bytes into each
 * slot), in a pseudo-random cyclic order over every slot of SIZE bytes,
 * followed STEPS times: each load's address is the index the previous one
 * loaded, scaled by the slot size, plus the field's offset.
 * usage: schase WIDTH SLOT FIELD SIZE STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

#define CHASE(T)                                                                          \
    do {                                                                                  \
        T *next = aligned_alloc(64, n * slot);                                            \
        if (!next)                                                                        \
            return 1;                                                                     \
        hetmem_name(next, "next");                                                        \
        size_t k = slot / sizeof(T), f = field / sizeof(T);                               \
        /* i -> (a i + c) mod n, n a power of two, c odd, a = 1 mod 4: one    \
         * cycle through all slots (Hull-Dobell), written in one sequential   \
         * pass; consecutive steps land far apart */                           \
        for (size_t i = 0; i < n; i++)                                                    \
            next[i * k + f] = (T)((6364136223846793005ull * i + 1442695040888963407ull) & (n - 1)); \
        T i = next[f];                                                                    \
        hetmem_phase_begin("chase");                                                      \
        for (size_t s = 0; s < steps; s++)                                                \
            i = next[(size_t)i * k + f];                                                  \
        hetmem_phase_end("chase");                                                        \
        printf("%llu\n", (unsigned long long)i);                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: schase WIDTH SLOT FIELD SIZE STEPS\n");
        return 2;
    }
    size_t width = strtoull(argv[1], NULL, 0), slot = strtoull(argv[2], NULL, 0);
    size_t field = strtoull(argv[3], NULL, 0), size = strtoull(argv[4], NULL, 0);
    size_t steps = strtoull(argv[5], NULL, 0);
    size_t n = slot ? size / slot : 0;
    if ((width != 4 && width != 8) || slot < width || slot % width || field % width || field + width > slot ||
        n < 2 || n >= UINT32_MAX || (n & (n - 1)) || (n * slot) % 64) {
        fprintf(stderr, "schase: bad WIDTH, SLOT, FIELD or SIZE (SIZE / SLOT a power of two)\n");
        return 2;
    }
    if (width == 4)
        CHASE(uint32_t);
    else
        CHASE(uint64_t);
    return 0;
}
