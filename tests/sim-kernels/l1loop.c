/* A working set that fits L1 (or L2), swept REPS times.
 * usage: l1loop BYTES REPS */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: l1loop BYTES REPS\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 0) / sizeof(long), reps = strtoull(argv[2], NULL, 0);
    long *a = calloc(n, sizeof *a);
    if (!a)
        return 1;
    long sum = 0;
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i++) {
            a[i] += (long)r;
            sum += a[i];
        }
    printf("%ld\n", sum);
    free(a);
    return 0;
}
