/* Allocation churn for capacity accounting: rounds of mixed-size objects
 * (sizes that are not multiples of 100 pages, so pages_percent splits
 * leave remainders), freed in an order unlike their allocation, some
 * rounds inside a phase so that live objects are re-placed, and a
 * realloc'd object. Everything is freed before exit.
 * Then CYCLES alloc/free pairs of 64-128 KiB objects, 16 live at a time,
 * and one object named "last". PAUSE_US, when given, is slept after each
 * round (a long soak at a bounded number of objects). With "kill" after
 * them, the process kills itself with SIGKILL once the cycles are done,
 * before "last" and before freeing the ring (a process killed with no
 * chance to finish, at a point that does not depend on timing).
 * Usage: churn ROUNDS [CYCLES [PAUSE_US [kill]]] */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    long pause_us = argc > 3 ? atol(argv[3]) : 0;
    uint64_t x = 12345;
    char *keep = malloc(3u << 20); /* lives across all rounds */
    for (int r = 0; r < rounds; r++) {
        char *p[8];
        if (r % 3 == 1)
            hetmem_phase_begin("solve");
        for (int i = 0; i < 8; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t n = (1u << 20) + (size_t)(x >> 40) % (7u << 20) + 123;
            p[i] = malloc(n);
            if (!p[i])
                return 1;
            p[i][0] = p[i][n - 1] = (char)i;
        }
        p[3] = realloc(p[3], (5u << 20) + 4097);
        if (r % 3 == 1)
            hetmem_phase_end("solve");
        for (int i = 7; i >= 0; i -= 2)
            free(p[i]);
        for (int i = 0; i < 8; i += 2)
            free(p[i]);
        if (pause_us > 0)
            usleep((useconds_t)pause_us);
    }
    free(keep);
    long cycles = argc > 2 ? atol(argv[2]) : 0;
    char *ring[16] = {0};
    for (long c = 0; c < cycles; c++) {
        /* 16 live objects of varying sizes, so addresses keep moving. */
        free(ring[c % 16]);
        char *q = ring[c % 16] = malloc((64u << 10) + (size_t)(c * 4096 % (64u << 10)));
        if (!q)
            return 1;
        q[0] = 1;
    }
    if (argc > 4 && !strcmp(argv[4], "kill"))
        raise(SIGKILL);
    for (int i = 0; i < 16; i++)
        free(ring[i]);
    char *last = malloc(2u << 20);
    hetmem_name(last, "last");
    memset(last, 1, 2u << 20);
    free(last);
    return 0;
}
