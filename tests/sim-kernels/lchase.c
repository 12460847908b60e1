/* Loaded latency: a dependent pointer chase over SIZE bytes (one pointer
 * per line, random cyclic order) with K lines of a separate array read in
 * order (one load per line) between steps, STEPS times: the stream loads
 * the device while the chase measures its latency.
 * usage: lchase SIZE STEPS K */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: lchase SIZE STEPS K\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0), steps = strtoull(argv[2], NULL, 0), k = strtoull(argv[3], NULL, 0);
    size_t n = size / 64, sn = (steps * k + 1) * 8;
    void **a = aligned_alloc(64, n * 64);
    size_t *perm = malloc(n * sizeof *perm);
    double *s = aligned_alloc(64, sn * sizeof *s);
    if (!a || !perm || !s || n < 2)
        return 1;
    hetmem_name(a, "chain");
    hetmem_name(s, "stream");
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t x = 88172645463325252ull;
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = x % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        a[perm[i] * 8] = &a[perm[(i + 1) % n] * 8];
    free(perm);
    void **p = a;
    double sum = 0;
    size_t off = 0;
    hetmem_phase_begin("chase");
    for (size_t i = 0; i < steps; i++) {
        p = *p;
        for (size_t e = off; e < off + k * 8; e += 8)
            sum += s[e];
        off += k * 8;
    }
    hetmem_phase_end("chase");
    printf("%p %g\n", (void *)p, sum);
    return 0;
}
