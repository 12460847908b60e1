/* The program tests/api/record_api.c records: one allocation of 8 MiB,
 * touched and freed, then exit status 3 ("churn N": N blocks of 4 KiB
 * allocated and freed instead). Built without sanitizers, so that
 * the recording runtime (LD_PRELOAD) loads into it in every build. */
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    /* "churn N": N allocations of 4 KiB, each freed, for a spool to fill. */
    if (argc == 3 && !strcmp(argv[1], "churn")) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++) {
            volatile char *q = malloc(4096);
            if (!q)
                return 1;
            q[0] = 1;
            free((void *)q);
        }
        return 3;
    }
    size_t n = 8u << 20;
    volatile char *p = malloc(n);
    if (!p)
        return 1;
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (char)i;
    free((void *)p);
    return 3;
}
