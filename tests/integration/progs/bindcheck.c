/* Allocates named objects, touches them, and prints for each the node of
 * its pages as the kernel reports them (move_pages with nodes = NULL) and
 * the policy of its range (get_mempolicy MPOL_F_ADDR): "NAME NODE MODE MASK",
 * MODE 0 = default (first touch), 2 = MPOL_BIND, 3 = MPOL_INTERLEAVE. */
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetmem/hetmem.h"

static void show(const char *name, char *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t np = n / (size_t)pg;
    void **pages = malloc(np * sizeof *pages);
    int *st = malloc(np * sizeof *st);
    for (size_t i = 0; i < np; i++)
        pages[i] = p + i * (size_t)pg;
    int node = -1, mode = -1;
    unsigned long mask[16] = {0};
    if (move_pages(0, np, pages, NULL, st, 0) == 0) {
        node = st[0];
        for (size_t i = 1; i < np; i++)
            if (st[i] != node)
                node = -2; /* mixed */
    }
    get_mempolicy(&mode, mask, 1024, p, MPOL_F_ADDR);
    printf("%s %d %d 0x%lx\n", name, node, mode, mask[0]);
    free(pages);
    free(st);
}

int main(int argc, char **argv)
{
    size_t big = argc > 1 ? strtoull(argv[1], NULL, 0) : (8u << 20);
    char *a = malloc(big), *b = malloc(4u << 20);
    hetmem_name(a, "matrix");
    hetmem_name(b, "vector");
    memset(a, 1, big);
    memset(b, 2, 4u << 20);
    show("matrix", a, big);
    show("vector", b, 4u << 20);
    hetmem_phase_begin("solve");
    memset(b, 3, 4u << 20);
    hetmem_phase_end("solve");
    free(a);
    free(b);
    return 0;
}
