/* An MPI program for hetmem sim run as one rank (tests/integration/
 * test_sim_mpi.sh builds it with HETMEM_CC=mpicc hetmem-cc): two arrays of
 * their own sizes and lines and a reduction through MPI. Whatever threads
 * the MPI library starts run none of the program's instrumented code. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t n = 1 << 17;
    double *a = malloc(n * sizeof *a);     /* 1 MiB, line 16 */
    double *b = malloc(n / 4 * sizeof *b); /* 256 KiB, line 17 */
    if (!a || !b)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < n; i++)
        a[i] = (double)(i & 7);
    for (size_t i = 0; i < n / 4; i++)
        b[i] = a[i * 4];
    double s = 0, t = 0;
    for (size_t i = 0; i < n / 4; i++)
        s += b[i];
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %.0f\n", rank, size, t);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
