/* Resident memory of a memory store over many exchanges at a given Q,
 * against the bound (1+Q)·n·s + window.
 *
 * usage: bench_pshuffle_mem --n SAMPLES_PER_RANK --size BYTES --q Q --epochs E
 *                           [--dir DIR [--fsync 0|1]]
 * (--dir: a directory store at DIR, emptied first, instead of the memory
 * store; fsync on by default, as in ps_config_init.)
 * Prints one JSON line (rank 0): the largest peak RSS growth over ranks
 * (ru_maxrss after the last exchange, less what it was before the first
 * sample was added), peak_bytes of the last exchange, the bound, and the
 * wall time of the E exchanges (slowest rank). Samples leave at random
 * every epoch, so the arena's blocks thin out: what compaction does with
 * the holes decides how far above n·s the store stays. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <mpi.h>

#include "pshuffle.h"
#include "bench_store.h"

static void die(const char *what, int err)
{
    bench_die("bench_pshuffle_mem", what, err);
}

int main(int argc, char **argv)
{
    int prov, rank, M;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    uint64_t n = 1000, size = 4096;
    double q = 0.1;
    int epochs = 40, do_fsync = 1;
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--size"))
            size = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--q"))
            q = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--fsync"))
            do_fsync = atoi(argv[i + 1]);
    }
    if (!n || !size || !(q >= 0 && q <= 1) || epochs < 1) {
        if (rank == 0)
            fprintf(stderr, "bench_pshuffle_mem: need --n >= 1, --size >= 1, --q in [0, 1], --epochs >= 1\n");
        MPI_Finalize();
        return 2;
    }
    ps_config_t cfg;
    struct rusage ru0, ru;
    ps_shuffler_t *ps = bench_store("bench_pshuffle_mem", rank, n, size, q, &cfg, &ru0, dir, do_fsync);
    int err;
    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int e = 0; e < epochs; e++)
        if ((err = ps_exchange(ps, (uint64_t)e)))
            die("exchange", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), wmax;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)(ru.ru_maxrss - ru0.ru_maxrss) / 1024.0, rmax;
    ps_stats_t st;
    ps_stats(ps, &st);
    uint64_t pk = st.peak_bytes, pkmax;
    MPI_Allreduce(&wall, &wmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&rss, &rmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&pk, &pkmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    uint64_t window = cfg.window_bytes;
    if (rank == 0)
        printf("{\"store\": \"%s\", \"fsync\": %d, \"ranks\": %d, \"n\": %" PRIu64 ", \"size\": %" PRIu64 ", \"q\": %g, \"epochs\": %d, \"wall_s\": %.4f, "
               "\"peak_rss_MiB\": %.1f, \"peak_bytes_MiB\": %.1f, \"bound_MiB\": %.1f}\n",
               dir ? "directory" : "memory", dir ? do_fsync : 0, M, n, size, q, epochs, wmax, rmax, (double)pkmax / 1048576.0,
               ((1 + q) * (double)n * (double)size + (double)window) / 1048576.0);
    ps_close(ps);
    MPI_Finalize();
    return 0;
}
