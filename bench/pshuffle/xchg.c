/* Exchange throughput of pshuffle against a raw MPI_Alltoallv of the same
 * bytes, side by side in one job, plus the exposed exchange time of an
 * overlapped epoch and the peak RSS against the memory bound.
 *
 * usage: bench_pshuffle_xchg --n SAMPLES_PER_RANK --size BYTES [--reps R]
 * Prints one JSON line (rank 0). Global strategy (Q=1), memory store,
 * default window (64 MiB, or PSHUFFLE_WINDOW). Both methods move exactly
 * the bytes of the same plan, alternating rep by rep: for the raw
 * Alltoallv, rank r sends to d the payload bytes pshuffle's plan of that
 * epoch sends from r to d, from one contiguous buffer (no per-sample
 * work). Peak RSS is read before the Alltoallv buffers exist. */
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

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what, int err)
{
    bench_die("bench_pshuffle_xchg", what, err);
}

int main(int argc, char **argv)
{
    int got, rank, M;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    uint64_t n = 1000, size = 1024;
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--size"))
            size = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    ps_config_t cfg;
    struct rusage ru0;
    ps_shuffler_t *ps = bench_store("bench_pshuffle_xchg", rank, n, size, 1.0, &cfg, &ru0, NULL, 0);
    int err;

    /* One exchange to learn how long an exchange takes. */
    uint64_t e = 0, moved = 0;
    double t_est;
    {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if ((err = ps_exchange(ps, e++)))
            die("exchange", err);
        double dt = now() - t0;
        MPI_Allreduce(&dt, &t_est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    /* Overlapped: begin, "train" for 4x the exchange time without a
     * ps_progress call, end. Exposed = time inside ps_exchange_end. */
    double expo[3], epoch_s = 0, ovl[3];
    for (int r = 0; r < 3; r++, e++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if ((err = ps_exchange_begin(ps, e)))
            die("begin", err);
        volatile double x = 0;
        while (now() - t0 < 4 * t_est)
            x += 1.0;
        double t1 = now();
        if ((err = ps_exchange_end(ps)))
            die("end", err);
        double d = now() - t1, mx, ep = now() - t0;
        MPI_Allreduce(&d, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        expo[r] = mx;
        epoch_s = ep;
        ps_stats_t so;
        ps_stats(ps, &so);
        uint64_t v[2] = {so.bytes_recv_overlapped, so.bytes_recv}, t[2];
        MPI_Allreduce(v, t, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        ovl[r] = t[1] ? (double)t[0] / (double)t[1] : 1.0;
    }
    double exposed = median(expo, 3), overlapped = median(ovl, 3);
    ps_stats_t st;
    ps_stats(ps, &st);
    uint64_t rounds = st.rounds;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mib = (double)(ru.ru_maxrss - ru0.ru_maxrss) / 1024.0, rss_max;
    MPI_Allreduce(&rss_mib, &rss_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    uint64_t pk = st.peak_bytes, pkmax;
    MPI_Allreduce(&pk, &pkmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);

    /* Side by side, alternating: one pshuffle exchange (begin then end at
     * once), then a raw MPI_Alltoallv of the same per-pair bytes (the plan
     * of the same epoch), from one contiguous buffer. */
    uint64_t *counts = malloc((size_t)M * sizeof *counts);
    for (int r = 0; r < M; r++)
        counts[r] = n;
    int *sc = calloc((size_t)M, sizeof *sc), *rc = calloc((size_t)M, sizeof *rc);
    int *sd = calloc((size_t)M, sizeof *sd), *rd = calloc((size_t)M, sizeof *rd);
    char *sb = malloc(n * size + 1), *rb = malloc(n * size + 1);
    memset(sb, 1, n * size + 1);
    memset(rb, 0, n * size + 1);
    double *tp = calloc((size_t)reps, sizeof *tp), *ta = calloc((size_t)reps, sizeof *ta);
    for (int r = 0; r < reps; r++, e++) {
        ps_plan_t p;
        if ((err = ps_plan_compute(&p, 3, e, 1.0, counts, M, rank)))
            die("plan", err);
        memset(sc, 0, (size_t)M * sizeof *sc);
        for (uint64_t i = 0; i < p.nsend; i++)
            sc[p.send_to[i]] += (int)size;
        for (int q = 0; q < M; q++)
            rc[q] = (int)(p.recv_count[q] * size);
        uint64_t so = 0, ro = 0;
        for (int q = 0; q < M; q++) {
            sd[q] = (int)so, so += (uint64_t)sc[q];
            rd[q] = (int)ro, ro += (uint64_t)rc[q];
        }
        ps_plan_free(&p);

        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if ((err = ps_exchange(ps, e)))
            die("exchange", err);
        double dt = now() - t0, mx;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        ps_stats_t sx;
        ps_stats(ps, &sx);
        uint64_t b = sx.bytes_sent, tot;
        MPI_Allreduce(&b, &tot, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        tp[r] = (double)tot / mx;
        moved = tot;

        uint64_t raw_tot;
        MPI_Allreduce(&so, &raw_tot, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now();
        MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        dt = now() - t0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        ta[r] = (double)raw_tot / mx;
    }
    /* Ratio per repetition (the two ran seconds apart), then the median. */
    double *ratio = calloc((size_t)reps, sizeof *ratio);
    for (int r = 0; r < reps; r++)
        ratio[r] = ta[r] > 0 ? tp[r] / ta[r] : 0;
    double med_ratio = median(ratio, reps);
    double bound_mib = 2.0 * (double)(n * size) / 1048576.0; /* (1+Q) n s at Q=1 */
    if (rank == 0)
        printf("{\"ranks\": %d, \"size\": %" PRIu64 ", \"n\": %" PRIu64 ", \"bytes_moved\": %" PRIu64
               ", \"pshuffle_MiBps\": %.1f, \"alltoallv_MiBps\": %.1f, \"ratio\": %.3f, \"exposed_s\": %.6f"
               ", \"epoch_s\": %.6f, \"overlapped\": %.3f, \"rounds\": %" PRIu64 ", \"window_MiB\": %.1f"
               ", \"peak_rss_MiB\": %.1f, \"bound_MiB\": %.1f, \"peak_bytes_MiB\": %.1f}\n",
               M, size, n, moved, median(tp, reps) / 1048576.0, median(ta, reps) / 1048576.0, med_ratio, exposed,
               epoch_s, overlapped, rounds, (double)cfg.window_bytes / 1048576.0, rss_max, bound_mib,
               (double)pkmax / 1048576.0);
    free(sb), free(rb), free(sc), free(rc), free(sd), free(rd), free(counts), free(tp), free(ta), free(ratio);
    ps_close(ps);
    MPI_Finalize();
    return 0;
}
