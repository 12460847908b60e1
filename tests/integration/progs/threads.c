/* OpenMP and raw pthreads allocating, touching and freeing concurrently,
 * with a deterministic result. Usage: threads [ITERS] (per raw thread,
 * default 200). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters = 200;

static void *worker(void *arg)
{
    long id = (long)arg;
    unsigned long s = 0;
    for (int i = 0; i < iters; i++) {
        size_t n = (size_t)(1 + (i * 7 + id) % 64) << 12;
        unsigned char *p = (i & 1) ? malloc(n) : calloc(1, n);
        memset(p, (int)(i & 0xff), n);
        p = realloc(p, n * 2);
        s += p[n - 1];
        free(p);
    }
    return (void *)s;
}

int main(int argc, char **argv)
{
    unsigned long total = 0;
    if (argc > 1)
        iters = atoi(argv[1]);
#pragma omp parallel for reduction(+ : total)
    for (int i = 0; i < 64; i++) {
        double *v = malloc(100000 * sizeof *v);
        for (int k = 0; k < 100000; k++)
            v[k] = k;
        total += (unsigned long)v[99999];
        free(v);
    }
    pthread_t th[8];
    for (long i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        total += (unsigned long)r;
    }
    printf("total %lu\n", total);
    return 0;
}
