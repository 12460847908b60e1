/* Bulk libc operations and the allocation family, which the runtime
 * models itself (libc is not instrumented).  usage: libc BYTES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (8u << 20);
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        return 1;
    hetmem_name(a, "src");
    hetmem_name(b, "dst");
    hetmem_phase_begin("memset");
    memset(a, 1, n);
    hetmem_phase_end("memset");
    hetmem_phase_begin("memcpy");
    memcpy(b, a, n);
    hetmem_phase_end("memcpy");
    char *s = strdup("hello");
    size_t l = strlen(s);
    void *c = calloc(16, 16);
    a = realloc(a, n / 2);
    printf("%zu %d\n", l, a[0] + b[n - 1]);
    free(c);
    free(s);
    free(a);
    free(b);
    return 0;
}
