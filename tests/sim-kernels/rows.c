/* Many small allocations, as a sparse matrix kept row by row (HPCG's
 * 27-entry rows): ROWS blocks of BYTES each, summed PASSES times in
 * allocation order.  usage: rows ROWS BYTES PASSES */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: rows ROWS BYTES PASSES\n");
        return 2;
    }
    size_t rows = strtoull(argv[1], NULL, 0), bytes = strtoull(argv[2], NULL, 0), n = bytes / sizeof(double);
    int passes = atoi(argv[3]);
    double **row = malloc(rows * sizeof *row);
    if (!row || n == 0)
        return 1;
    for (size_t i = 0; i < rows; i++) {
        if (!(row[i] = malloc(n * sizeof(double))))
            return 1;
        for (size_t k = 0; k < n; k++)
            row[i][k] = (double)(i + k);
    }
    double s = 0;
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < rows; i++)
            for (size_t k = 0; k < n; k += 8)
                s += row[i][k];
    printf("%g\n", s);
    for (size_t i = 0; i < rows; i++)
        free(row[i]);
    free(row);
    return 0;
}
