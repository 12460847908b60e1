/* Kernels for checking sample attribution, built natively (for hetmem
 * record) and with hetmem-cc (for hetmem sim). Each names its arrays.
 *   transpose N REPS  B[j*n+i] = A[i*n+j]          strided stores
 *   gather N REPS     y[i] += val[k] * x[col[k]]    indirect loads (SpMV, 8 per row)
 *   rmw N REPS        a[i] += s * b[i], a[idx[i]] += 1   read-modify-write
 * The repetitions (not the initialisation) run in a phase named "kernel".
 * Prints a checksum so the work cannot be optimised away.
 *
 * Built with -DATTR_CONFINE, the environment variable ATTR_CONFINE=NAME
 * confines every access to array NAME to its first 4 KiB (the index is
 * masked), which keeps that array in the L1 cache and takes its memory
 * cost out of the run; the time this saves is the array's cost. Without
 * ATTR_CONFINE set, that build runs the same accesses as the plain one.
 * That build also prints the kernel phase's wall time on stderr
 * ("kernel_s SECONDS"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetmem/hetmem.h"

#ifdef ATTR_CONFINE
/* Index masks, all ones unless the array is the one confined. */
static size_t mask_of(const char *name, size_t elem)
{
    const char *c = getenv("ATTR_CONFINE");
    return c && !strcmp(c, name) ? 4096 / elem - 1 : ~(size_t)0;
}
#define CONFINE(arr) const size_t m_##arr = mask_of(#arr, sizeof *arr)
#define AT(arr, i) arr[(i) & m_##arr]
/* An index array read through the mask would hand out only 1024 distinct
 * indices and confine the array they index as well. So each 1024-entry
 * block of a confined index array is shifted by its own pseudo-random
 * offset (mod n): the indexed array sees as many distinct, uniformly spread
 * indices as before. The same instructions run whether or not the index
 * array is the confined one (the offset is masked to 0), so they cost the
 * same in both runs. */
static inline size_t index_at(const uint32_t *arr, size_t i, size_t m, size_t n)
{
    size_t keep = (size_t)0 - (size_t)(m + 1 != 0); /* all ones when confined */
    size_t off = (size_t)(((uint64_t)(uint32_t)((i >> 10) * 2654435761u) * n) >> 32) & keep;
    size_t v = arr[i & m] + off;
    return v >= n ? v - n : v;
}
#define INDEX(arr, i, n) index_at(arr, i, m_##arr, n)
static double t_begin;
static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#define KERNEL_BEGIN() (hetmem_phase_begin("kernel"), t_begin = now_s())
#define KERNEL_END() (fprintf(stderr, "kernel_s %.6f\n", now_s() - t_begin), hetmem_phase_end("kernel"))
#else
#define KERNEL_BEGIN() hetmem_phase_begin("kernel")
#define KERNEL_END() hetmem_phase_end("kernel")
#define CONFINE(arr) (void)0
#define AT(arr, i) arr[i]
#define INDEX(arr, i, n) arr[i]
#endif

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
        CONFINE(A);
        CONFINE(B);
        for (size_t i = 0; i < n * n; i++)
            AT(A, i) = (double)i;
        KERNEL_BEGIN();
        for (int r = 0; r < reps; r++)
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    AT(B, j * n + i) = AT(A, i * n + j);
        KERNEL_END();
        sum = B[n + 1] + B[n * n - 1];
    } else if (!strcmp(argv[1], "gather")) {
        size_t nnz = 8 * n;
        uint32_t *col = named(nnz * sizeof *col, "col");
        double *val = named(nnz * sizeof *val, "val"), *x = named(n * sizeof *x, "x"), *y = named(n * sizeof *y, "y");
        CONFINE(col);
        CONFINE(val);
        CONFINE(x);
        CONFINE(y);
        for (size_t k = 0; k < nnz; k++) {
            x64 ^= x64 << 13, x64 ^= x64 >> 7, x64 ^= x64 << 17;
            AT(col, k) = (uint32_t)(x64 % n);
            AT(val, k) = 1.0 / (double)(k + 1);
        }
        for (size_t i = 0; i < n; i++)
            AT(x, i) = (double)i, AT(y, i) = 0;
        KERNEL_BEGIN();
        for (int r = 0; r < reps; r++)
            for (size_t i = 0; i < n; i++) {
                double s = 0;
                for (size_t k = 8 * i; k < 8 * i + 8; k++)
                    s += AT(val, k) * AT(x, INDEX(col, k, n));
                AT(y, i) += s;
            }
        KERNEL_END();
        for (size_t i = 0; i < n; i++)
            sum += y[i];
    } else if (!strcmp(argv[1], "rmw")) {
        double *a = named(n * sizeof *a, "a"), *b = named(n * sizeof *b, "b");
        uint32_t *idx = named(n * sizeof *idx, "idx");
        CONFINE(a);
        CONFINE(b);
        CONFINE(idx);
        for (size_t i = 0; i < n; i++) {
            x64 ^= x64 << 13, x64 ^= x64 >> 7, x64 ^= x64 << 17;
            AT(a, i) = 0, AT(b, i) = (double)i, AT(idx, i) = (uint32_t)(x64 % n);
        }
        KERNEL_BEGIN();
        for (int r = 0; r < reps; r++) {
            for (size_t i = 0; i < n; i++)
                AT(a, i) += 0.5 * AT(b, i);
            for (size_t i = 0; i < n; i++)
                AT(a, INDEX(idx, i, n)) += 1;
        }
        KERNEL_END();
        for (size_t i = 0; i < n; i++)
            sum += a[i];
    } else {
        fprintf(stderr, "attr_kernels: unknown kernel '%s'\n", argv[1]);
        return 2;
    }
    printf("%g\n", sum);
    return 0;
}
