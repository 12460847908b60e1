/* Naming after the data is written: writes SIZE bytes, then names the
 * array "x" (a placement rule may send "x" to another device, whose pages
 * then move as move_pages() would).  usage: rename SIZE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/hetmem.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rename SIZE\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0), n = size / sizeof(double);
    double *a = aligned_alloc(4096, n * sizeof *a);
    if (!a || n == 0)
        return 1;
    for (size_t i = 0; i < n; i++)
        a[i] = (double)i;
    hetmem_name(a, "x");
    printf("%g\n", a[n / 2]);
    return 0;
}
