/* Prints where a series of small and medium allocations land. The simulator
 * runtime shares this process's heap, so these addresses (and with them the
 * program's cache behaviour) are reproducible only if the runtime allocates
 * and frees in the same order on every run. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    void *keep[96];
    unsigned long h = 1469598103934665603ul;
    for (int i = 0; i < 96; i++) {
        keep[i] = malloc((size_t)(16 + (i * 37) % 400));
        h = (h ^ (unsigned long)keep[i]) * 1099511628211ul;
        if (i % 3 == 0)
            printf("%p\n", keep[i]);
    }
    for (int i = 0; i < 96; i += 2)
        free(keep[i]);
    printf("hash %lx\n", h);
    for (int i = 1; i < 96; i += 2)
        free(keep[i]);
    return 0;
}
