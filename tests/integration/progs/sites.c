/* Allocation sites that hetmem sim, hetmem record and hetmem run must name
 * alike, whether the program is built natively or with hetmem-cc
 * (test_sites_agree.sh): malloc through a helper (two links), an inlined
 * helper (its line and its caller's), calloc, posix_memalign, realloc,
 * two mallocs on one line (two sites), all of 64 KiB or more. It prints
 * "calloc policy MODE MASK" for the calloc'd block (get_mempolicy
 * MPOL_F_ADDR: MODE 2 = MPOL_BIND) and the same for the first malloc'd one. */
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1u << 15) /* doubles: 256 KiB */

static void policy(const char *what, void *p)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    if (get_mempolicy(&mode, mask, 1024, p, MPOL_F_ADDR) != 0)
        mode = -1;
    printf("%s policy %d 0x%lx\n", what, mode, mask[0]);
}

/* Not a tail call: its frame is on the stack when malloc runs. */
__attribute__((noinline)) static double *make(size_t n)
{
    double *p = malloc(n * sizeof(double));
    if (p)
        p[n - 1] = 0;
    return p;
}

static inline double *make_zeroed(size_t n)
{
    double *p = make(n);
    if (p)
        memset(p, 0, n * sizeof(double));
    return p;
}

int main(int argc, char **argv)
{
    (void)argv;
    size_t n = N + (size_t)argc - 1;
    double *a = make(n);
    double *b = calloc(n, sizeof(double));
    double *c = make_zeroed(n);
    double *d = NULL;
    if (posix_memalign((void **)&d, 64, n * sizeof(double)) != 0)
        return 1;
    double *e = malloc(n * sizeof(double)), *f = malloc(n * sizeof(double));
    if (!a || !b || !c || !e || !f)
        return 1;
    for (size_t i = 0; i < n; i++)
        a[i] = (double)i, d[i] = e[i] = f[i] = 1;
    a = realloc(a, 2 * n * sizeof(double));
    if (!a)
        return 1;
    policy("calloc", b);
    policy("malloc", e);
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] + b[i] + c[i] + d[i] + e[i] + f[i];
    printf("sum %.0f\n", s);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(f);
    return 0;
}
