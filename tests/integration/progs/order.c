/* Two named 2 MiB objects, "first" allocated before "second" (malloc maps
 * each on its own, the second usually below the first), both touched, then
 * a phase "hot" whose rules may not have room for both: which one spills
 * there must follow the allocation order, not the addresses. Prints 1 when
 * "second" lies below "first" (the case that tells the two orders apart). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/hetmem.h"

int main(void)
{
    size_t n = 2u << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        return 1;
    hetmem_name(a, "first");
    hetmem_name(b, "second");
    memset(a, 1, n);
    memset(b, 2, n);
    hetmem_phase_begin("hot");
    long s = a[n - 1] + b[n - 1];
    hetmem_phase_end("hot");
    printf("%d %ld\n", b < a, s);
    free(b);
    free(a);
    return 0;
}
