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
