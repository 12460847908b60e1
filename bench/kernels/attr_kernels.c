/* Kernels for checking sample attribution, built natively (for hetmem
 * record) and with hetmem-cc (for hetmem sim). Each names its arrays.
 *   transpose N REPS  B[j*n+i] = A[i*n+j]          strided stores
 *   gather N REPS     y[i] += val[k] * x[col[k]]    indirect loads (SpMV, 8 per row)
 *   rmw N REPS        a[i] += s * b[i], a[idx[i]] += 1   read-modify-write
 * Prints a checksum so the work cannot be optimised away. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/hetmem.h"

static void *named(size_t bytes, const char *name)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "attr_kernels: out of memory\n");
        exit(1);
    }
    hetmem_name(p, name);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: attr_kernels transpose|gather|rmw N REPS\n");
        return 2;
    }
    size_t n = strtoul(argv[2], NULL, 0);
    int reps = atoi(argv[3]);
    double sum = 0;
    uint64_t x64 = 88172645463325252ull;
    if (!strcmp(argv[1], "transpose")) {
        double *A = named(n * n * sizeof *A, "A"), *B = named(n * n * sizeof *B, "B");
        for (size_t i = 0; i < n * n; i++)
            A[i] = (double)i;
        for (int r = 0; r < reps; r++)
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    B[j * n + i] = A[i * n + j];
        sum = B[n + 1] + B[n * n - 1];
    } else if (!strcmp(argv[1], "gather")) {
        size_t nnz = 8 * n;
        uint32_t *col = named(nnz * sizeof *col, "col");
        double *val = named(nnz * sizeof *val, "val"), *x = named(n * sizeof *x, "x"), *y = named(n * sizeof *y, "y");
        for (size_t k = 0; k < nnz; k++) {
            x64 ^= x64 << 13, x64 ^= x64 >> 7, x64 ^= x64 << 17;
            col[k] = (uint32_t)(x64 % n);
            val[k] = 1.0 / (double)(k + 1);
        }
        for (size_t i = 0; i < n; i++)
            x[i] = (double)i, y[i] = 0;
        for (int r = 0; r < reps; r++)
            for (size_t i = 0; i < n; i++) {
                double s = 0;
                for (size_t k = 8 * i; k < 8 * i + 8; k++)
                    s += val[k] * x[col[k]];
                y[i] += s;
            }
        for (size_t i = 0; i < n; i++)
            sum += y[i];
    } else if (!strcmp(argv[1], "rmw")) {
        double *a = named(n * sizeof *a, "a"), *b = named(n * sizeof *b, "b");
        uint32_t *idx = named(n * sizeof *idx, "idx");
        for (size_t i = 0; i < n; i++) {
            x64 ^= x64 << 13, x64 ^= x64 >> 7, x64 ^= x64 << 17;
            a[i] = 0, b[i] = (double)i, idx[i] = (uint32_t)(x64 % n);
        }
        for (int r = 0; r < reps; r++) {
            for (size_t i = 0; i < n; i++)
                a[i] += 0.5 * b[i];
            for (size_t i = 0; i < n; i++)
                a[idx[i]] += 1;
        }
        for (size_t i = 0; i < n; i++)
            sum += a[i];
    } else {
        fprintf(stderr, "attr_kernels: unknown kernel '%s'\n", argv[1]);
        return 2;
    }
    printf("%g\n", sum);
    return 0;
}
