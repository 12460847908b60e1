/* Prints where its allocations land: a hash of every address. The
 * simulator runtime runs in this process, and the program's addresses
 * (and with them its cache sets and which pages its small objects share)
 * must not depend on what the runtime itself allocates: whether the run
 * writes a trace, at which sample period, where the machine and placement
 * files are. The allocations are shaped like HPCG's: many 108-byte blocks
 * from two call sites, interleaved, some freed, then arrays of 1.5 MiB
 * (above glibc's initial mmap threshold, which a large block freed by
 * anyone raises). */
#include <stdio.h>
#include <stdlib.h>

#define SMALL 20000

static unsigned long h = 1469598103934665603ul;

static void mix(const void *p) { h = (h ^ (unsigned long)p) * 1099511628211ul; }

static __attribute__((noinline)) void *site_a(size_t n) { return malloc(n); }
static __attribute__((noinline)) void *site_b(size_t n) { return malloc(n); }

int main(void)
{
    void *keep[96];
    for (int i = 0; i < 96; i++) {
        keep[i] = malloc((size_t)(16 + (i * 37) % 400));
        mix(keep[i]);
        if (i % 3 == 0)
            printf("%p\n", keep[i]);
    }
    for (int i = 0; i < 96; i += 2)
        free(keep[i]);
    static void *small[SMALL];
    for (int i = 0; i < SMALL; i++) {
        small[i] = i % 2 ? site_b(108) : site_a(108);
        ((volatile char *)small[i])[0] = (char)i; /* touched, as a program does */
        mix(small[i]);
    }
    for (int i = 0; i < SMALL; i += 3)
        free(small[i]);
    for (int i = 0; i < SMALL; i += 3) {
        small[i] = site_a(108);
        mix(small[i]);
    }
    double *x = malloc(3 << 19), *y = malloc(3 << 19);
    mix(x);
    mix(y);
    for (int i = 0; i < (3 << 16); i++)
        x[i] = y[i] = i;
    printf("hash %lx\n", h);
    free(x);
    free(y);
    for (int i = 0; i < SMALL; i++)
        free(small[i]);
    for (int i = 1; i < 96; i += 2)
        free(keep[i]);
    return 0;
}
