/* pshuffle-epochs: runs E epochs of partial shuffling over synthetic
 * samples and prints per-epoch statistics (rank 0). A C example of the API
 * and the driver of the demo and the exchange benchmark.
 *
 *   mpirun -n 4 pshuffle-epochs --q 0.3 --epochs 5 [--dir DIR] [--json]
 *
 * Options: --samples N (per rank, default 1000), --size BYTES (mean sample
 * size, default 256), --classes C (default 10; the initial partition is
 * sorted by class, the worst case for local shuffling), --work-us U (busy
 * work per sample while the exchange runs, default 0), --seed S, --hold FILE
 * (after ps_open, so with the store's locks taken, every rank waits until
 * FILE exists before it goes on: a test can act while the job provably
 * holds its store, however slow the machine). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pshuffle.h"

static void die(int rank, const char *what, int err)
{
    fprintf(stderr, "pshuffle-epochs: rank %d: %s: %s: %s\n", rank, what, ps_strerror(err), ps_errdetail());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void busy_us(double us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3 < us);
}

int main(int argc, char **argv)
{
    int rank, M, json = 0, classes = 10, overlap = 1;
    uint64_t n = 1000, size = 256, epochs = 5, seed = 1;
    double q = 0.3, work_us = 0;
    const char *dir = NULL, *hold = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--no-overlap")) { overlap = 0; continue; }
        if (!v) { if (!rank) fprintf(stderr, "pshuffle-epochs: %s needs a value\n", a); MPI_Abort(MPI_COMM_WORLD, 2); }
        i++;
        if (!strcmp(a, "--q")) q = strtod(v, NULL);
        else if (!strcmp(a, "--epochs")) epochs = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--samples")) n = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--size")) size = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--classes")) classes = atoi(v);
        else if (!strcmp(a, "--work-us")) work_us = strtod(v, NULL);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "--hold")) hold = v;
        else { if (!rank) fprintf(stderr, "pshuffle-epochs: unknown option %s\n", a); MPI_Abort(MPI_COMM_WORLD, 2); }
    }
    if (classes < 1 || classes > 1000 || size < 1) {
        if (!rank) fprintf(stderr, "pshuffle-epochs: --classes 1..1000, --size >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = seed;
    cfg.q.q0 = q;
    cfg.store_dir = dir;
    cfg.window_bytes = 8u << 20;
    ps_shuffler_t *ps;
    int err = ps_open(&ps, MPI_COMM_WORLD, &cfg);
    if (err) die(rank, "open", err);
    if (hold) { /* every rank polls (no MPI call spins meanwhile), then all go on together */
        while (access(hold, F_OK)) {
            struct timespec tick = {0, 20000000};
            nanosleep(&tick, NULL);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    unsigned char *buf = malloc(2 * size);
    if (!ps_resumed(ps)) {
        uint64_t N = n * (uint64_t)M;
        for (uint64_t id = n * rank; id < n * (rank + 1); id++) {
            uint64_t len = size / 2 + id * 2654435761u % (size + 1); /* size/2 .. 3*size/2 */
            memset(buf, (int)(id & 0xff), len);
            if ((err = ps_add(ps, id, (int32_t)(id * classes / N), buf, len))) die(rank, "add", err);
        }
    }
    if ((err = ps_start(ps))) die(rank, "start", err);
    uint64_t *order = malloc(n * sizeof *order), *hist = calloc(classes, sizeof *hist);
    if (!json && !rank)
        printf("%5s %6s %9s %9s %10s %12s %12s %9s\n", "epoch", "Q", "sent", "received", "MiB sent", "exchange ms",
               "blocked ms", "classes");
    uint64_t cap = n;
    for (uint64_t e = ps_epoch(ps); e < epochs; e++) {
        if (ps_size(ps) > cap) { /* a resumed store, or counts off by one after an exchange */
            cap = ps_size(ps);
            if (!(order = realloc(order, cap * sizeof *order))) die(rank, "order", -ENOMEM);
        }
        if ((err = ps_order(ps, order, ps_size(ps)))) die(rank, "order", err);
        if (overlap && (err = ps_exchange_begin(ps, e))) die(rank, "exchange_begin", err);
        for (uint64_t i = 0; i < ps_size(ps); i++) { /* "training" */
            if ((err = ps_read(ps, order[i], buf, 2 * size))) die(rank, "read", err);
            if (work_us > 0) busy_us(work_us);
            if (overlap && i % 16 == 0 && (err = ps_progress(ps, NULL))) die(rank, "progress", err);
        }
        if (!overlap && (err = ps_exchange_begin(ps, e))) die(rank, "exchange_begin", err);
        if ((err = ps_exchange_end(ps))) die(rank, "exchange_end", err);
        ps_stats_t st;
        ps_stats(ps, &st);
        ps_label_hist(ps, hist, classes, NULL);
        int have = 0;
        for (int c = 0; c < classes; c++) have += hist[c] > 0;
        /* min and max over ranks of: sent, received, classes; sums of bytes; max of times */
        uint64_t v[4] = {st.samples_sent, st.samples_recv, (uint64_t)have, 0}, mn[4], mx[4];
        uint64_t t[2] = {st.exchange_ns, st.blocked_ns}, tmax[2], bytes = st.bytes_sent, btot;
        MPI_Reduce(v, mn, 3, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(v, mx, 3, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(t, tmax, 2, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&bytes, &btot, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank)
            continue;
        if (json) {
            printf("{\"ranks\": %d, \"epoch\": %" PRIu64 ", \"q\": %g, \"sent_min\": %" PRIu64 ", \"sent_max\": %" PRIu64
                   ", \"recv_min\": %" PRIu64 ", \"recv_max\": %" PRIu64 ", \"bytes_sent\": %" PRIu64
                   ", \"exchange_ns\": %" PRIu64 ", \"blocked_ns\": %" PRIu64 ", \"classes_min\": %" PRIu64 "}\n",
                   M, e, st.q, mn[0], mx[0], mn[1], mx[1], btot, tmax[0], tmax[1], mn[2]);
        } else {
            char s[40], r[40], c[40];
            snprintf(s, sizeof s, mn[0] == mx[0] ? "%" PRIu64 : "%" PRIu64 "..%" PRIu64, mn[0], mx[0]);
            snprintf(r, sizeof r, mn[1] == mx[1] ? "%" PRIu64 : "%" PRIu64 "..%" PRIu64, mn[1], mx[1]);
            snprintf(c, sizeof c, mn[2] == mx[2] ? "%" PRIu64 : "%" PRIu64 "..%" PRIu64, mn[2], mx[2]);
            printf("%5" PRIu64 " %6.3f %9s %9s %10.2f %12.2f %12.2f %9s\n", e, st.q, s, r, btot / 1048576.0,
                   tmax[0] / 1e6, tmax[1] / 1e6, c);
        }
        fflush(stdout);
    }
    free(buf), free(order), free(hist);
    ps_close(ps);
    MPI_Finalize();
    return 0;
}
