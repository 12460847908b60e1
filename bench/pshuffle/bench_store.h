/* The store both pshuffle benchmarks start from: n samples of `size`
 * bytes per rank (ids n*rank ..), a memory store (dir NULL) or a directory
 * store at dir (fsync as given), seed 3, constant Q, no resume.
 * Header-only: each benchmark is one program. */
#ifndef PSHUFFLE_BENCH_STORE_H
#define PSHUFFLE_BENCH_STORE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <mpi.h>

#include "pshuffle.h"

static void bench_die(const char *prog, const char *what, int err)
{
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, ps_strerror(err), ps_errdetail());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Opens and fills the store; *ru0 is the rank's resource use before the
 * first sample (MPI's own footprint), for RSS growth. */
static ps_shuffler_t *bench_store(const char *prog, int rank, uint64_t n, uint64_t size, double q, ps_config_t *cfg,
                                  struct rusage *ru0, const char *dir, int do_fsync)
{
    ps_config_init(cfg);
    cfg->store_dir = dir;
    cfg->fsync = do_fsync;
    cfg->seed = 3;
    cfg->q.q0 = q;
    cfg->resume = 0;
    ps_shuffler_t *ps;
    int err;
    if ((err = ps_open(&ps, MPI_COMM_WORLD, cfg)))
        bench_die(prog, "open", err);
    getrusage(RUSAGE_SELF, ru0);
    unsigned char *blob = malloc(size ? size : 1);
    for (uint64_t i = 0; i < size; i++)
        blob[i] = (unsigned char)(i * 131 + (uint64_t)rank);
    for (uint64_t id = n * (uint64_t)rank; id < n * (uint64_t)(rank + 1); id++) {
        memcpy(blob, &id, size < 8 ? size : 8);
        if ((err = ps_add(ps, id, 0, blob, size)))
            bench_die(prog, "add", err);
    }
    free(blob);
    if ((err = ps_start(ps)))
        bench_die(prog, "start", err);
    return ps;
}

#endif
