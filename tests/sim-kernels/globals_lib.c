/* A shared library (built with the plain compiler, not hetmem-cc) with a
 * static array of its own, which the globals kernel reaches through a
 * pointer: hetmem sim must find it in the library's symbol table. */
#include <stddef.h>

static double lvec[1 << 18];

double *globals_lib_vec(size_t *n)
{
    *n = sizeof lvec / sizeof lvec[0];
    return lvec;
}

/* A thread body that runs no instrumented code, as an MPI library's
 * progress thread: sums a private buffer of its own. */
void *globals_lib_worker(void *arg)
{
    static volatile double buf[4096];
    double s = 0;
    for (int r = 0; r < 100; r++)
        for (size_t i = 0; i < 4096; i++)
            s += buf[i] += 1.0;
    *(double *)arg = s;
    return arg;
}
