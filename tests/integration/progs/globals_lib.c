/* A shared library with a static array of its own (only in its symbol
 * table) and a global one that the program uses, for hetmem run to place
 * by symbol. */
#include <stddef.h>

static double lvec[1 << 18];
double cvec[1 << 16];

double *globals_lib_vec(size_t *n)
{
    *n = sizeof lvec / sizeof lvec[0];
    return lvec;
}
