/* A program with a second thread. MODE "plain": the thread runs only code
 * of a library built without hetmem-cc (as an MPI progress thread does),
 * while the main thread sums N doubles; hetmem sim runs it. MODE "inst":
 * the thread runs instrumented code (this file's own function); hetmem sim
 * must refuse it.
 * usage: pthreads plain|inst N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *globals_lib_worker(void *arg);

static void *inst_worker(void *arg)
{
    double *x = arg;
    for (int i = 0; i < 1000; i++)
        x[0] += i;
    return arg;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "plain") && strcmp(argv[1], "inst"))) {
        fprintf(stderr, "usage: pthreads plain|inst N\n");
        return 2;
    }
    size_t n = strtoull(argv[2], NULL, 0);
    double *a = calloc(n ? n : 1, sizeof *a), res = 0;
    if (!a)
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, argv[1][0] == 'p' ? globals_lib_worker : inst_worker, &res) != 0)
        return 3;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] + (double)i;
    pthread_join(t, NULL);
    printf("%g %g\n", s, res);
    free(a);
    return 0;
}
