/* Streaming over arrays of SIZE bytes, REPS times (read2: a and b; back:
 * read from the end down; skip: read one element in every other line).
 * usage: stream read|read2|back|skip|write|copy SIZE REPS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: stream read|read2|back|skip|write|copy SIZE REPS\n");
        return 2;
    }
    const char *mode = argv[1];
    size_t n = strtoull(argv[2], NULL, 0) / sizeof(double), reps = strtoull(argv[3], NULL, 0);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b)
        return 1;
    hetmem_name(a, "a");
    hetmem_name(b, "b");
    double sum = 0;
    for (size_t r = 0; r < reps; r++) {
        if (strcmp(mode, "read") == 0) {
            for (size_t i = 0; i < n; i++)
                sum += a[i];
        } else if (strcmp(mode, "read2") == 0) {
            for (size_t i = 0; i < n; i++)
                sum += a[i] * b[i];
        } else if (strcmp(mode, "back") == 0) {
            for (size_t i = n; i-- > 0;)
                sum += a[i];
        } else if (strcmp(mode, "skip") == 0) {
            for (size_t i = 0; i < n; i += 16)
                sum += a[i];
        } else if (strcmp(mode, "write") == 0) {
            for (size_t i = 0; i < n; i++)
                a[i] = (double)r;
        } else {
            for (size_t i = 0; i < n; i++)
                b[i] = a[i] * 1.5;
        }
    }
    printf("%g\n", sum);
    return 0;
}
