/* Global and static arrays, as NPB-style codes keep them, for hetmem run
 * to place by symbol: a page-aligned 5000-byte "head" (no rule names it),
 * then gvec (global) and svec (static) of 8 MiB each, which share their
 * first and last pages with their neighbours, and lvec, a static array of
 * the library libglobals_lib.so, and cvec, a global array of that library
 * which the program uses (so the program holds the copy in use). Before main touches anything it prints,
 * for each array, "NAME ADDR SIZE": then "NAME WHERE MODE MASK" for WHERE =
 * head (its first page, partial unless page-aligned), first and last (its
 * first and last whole pages) and tail (its last page), MODE being the
 * policy get_mempolicy(MPOL_F_ADDR) reports (0 default, 2 bind, 3
 * interleave) or "-" where the array has no such page; then after writing
 * the arrays "NAME pages N ON NODE" from move_pages (nodes = NULL): its N
 * whole pages, ON of them on node NODE (-2: mixed); then it reads gvec
 * and svec in phase "solve". Built with
 * -fno-toplevel-reorder so that the layout is as written. */
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetmem/hetmem.h"

#define N (1 << 20)
char head[5000] __attribute__((aligned(4096)));
double gvec[N];
static double svec[N];
double *globals_lib_vec(size_t *n); /* lvec of the library */
extern double cvec[1 << 16];        /* the library's, used here: copied into the program */

static long pg;

static void policy(const char *name, const char *where, uintptr_t a, int have)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    if (!have) {
        printf("%s %s - -\n", name, where);
        return;
    }
    if (get_mempolicy(&mode, mask, 1024, (void *)a, MPOL_F_ADDR) != 0)
        mode = -1;
    printf("%s %s %d 0x%lx\n", name, where, mode, mask[0]);
}

static void layout(const char *name, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, lo = (a + pg - 1) & ~(uintptr_t)(pg - 1), hi = (a + n) & ~(uintptr_t)(pg - 1);
    printf("%s %#lx %zu\n", name, (unsigned long)a, n);
    policy(name, "head", a & ~(uintptr_t)(pg - 1), lo != a);
    policy(name, "first", lo, hi > lo);
    policy(name, "last", hi - pg, hi > lo);
    policy(name, "tail", hi, a + n > hi);
}

static void nodes(const char *name, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, lo = (a + pg - 1) & ~(uintptr_t)(pg - 1), hi = (a + n) & ~(uintptr_t)(pg - 1);
    size_t np = hi > lo ? (hi - lo) / (size_t)pg : 0, on = 0;
    void **pages = malloc((np + 1) * sizeof *pages);
    int *st = malloc((np + 1) * sizeof *st), node = -1;
    for (size_t i = 0; i < np; i++)
        pages[i] = (void *)(lo + i * (size_t)pg);
    if (np && move_pages(0, np, pages, NULL, st, 0) == 0) {
        node = st[0];
        for (size_t i = 0; i < np; i++) {
            if (st[i] != node)
                node = -2;
            on += st[i] >= 0;
        }
    }
    printf("%s pages %zu %zu %d\n", name, np, on, node);
    free(pages);
    free(st);
}

int main(void)
{
    pg = sysconf(_SC_PAGESIZE);
    size_t ln;
    double *lvec = globals_lib_vec(&ln);
    layout("head", head, sizeof head);
    layout("gvec", gvec, sizeof gvec);
    layout("svec", svec, sizeof svec);
    layout("lvec", lvec, ln * sizeof *lvec);
    layout("cvec", cvec, sizeof cvec);
    memset(head, 1, sizeof head);
    for (size_t i = 0; i < N; i++)
        gvec[i] = svec[i] = (double)i;
    for (size_t i = 0; i < ln; i++)
        lvec[i] = 1;
    memset(cvec, 2, sizeof cvec);
    nodes("gvec", gvec, sizeof gvec);
    nodes("svec", svec, sizeof svec);
    nodes("lvec", lvec, ln * sizeof *lvec);
    nodes("cvec", cvec, sizeof cvec);
    double s = 0;
    hetmem_phase_begin("solve");
    for (size_t i = 0; i < N; i++)
        s += gvec[i] + svec[i];
    hetmem_phase_end("solve");
    printf("sum %g\n", s);
    return 0;
}
