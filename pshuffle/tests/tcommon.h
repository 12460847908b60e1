/* Helpers for the pshuffle MPI tests: deterministic sample content, checks
 * that name the rank, and a crash hook. */
#ifndef PSHUFFLE_TCOMMON_H
#define PSHUFFLE_TCOMMON_H

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "pshuffle.h"

static int t_rank_, t_fail_;

#define T_CHECK(cond, ...)                                                          \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", t_rank_, __FILE__, \
                    __LINE__, #cond);                                               \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            t_fail_++;                                                              \
        }                                                                           \
    } while (0)

#define T_OK(call)                                                                  \
    do {                                                                            \
        int e_ = (call);                                                            \
        if (e_) {                                                                   \
            fprintf(stderr, "[rank %d] %s:%d: %s -> %s (%s): %s\n", t_rank_, __FILE__, \
                    __LINE__, #call, ps_err_name(e_), ps_strerror(e_), ps_errdetail()); \
            t_fail_++;                                                              \
            MPI_Abort(MPI_COMM_WORLD, 3);                                           \
        }                                                                           \
    } while (0)

static inline uint64_t t_mix(uint64_t z)
{
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Sample content is a function of its id, so any rank can check any
 * sample's bytes. Sizes vary from 1 to maxsize bytes. */
static inline size_t t_size(uint64_t id, size_t maxsize) { return 1 + (size_t)(t_mix(id ^ 0x5a5a) % maxsize); }
static inline void t_fill(uint64_t id, unsigned char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(t_mix(id * 1000003u + i / 8) >> (8 * (i % 8)));
}
static inline int32_t t_label(uint64_t id, int nlabels) { return (int32_t)(t_mix(id ^ 0xabc) % (uint64_t)nlabels); }

/* Crash hook: SIGKILL this process at (rank, epoch, point). */
typedef struct {
    int rank;
    uint64_t epoch;
    int point;
} t_crash_t;

static inline void t_crash_hook(void *arg, int point, uint64_t epoch)
{
    const t_crash_t *c = arg;
    if (c->rank == t_rank_ && c->epoch == epoch && c->point == point) {
        fprintf(stderr, "[rank %d] crashing at point %d of epoch %" PRIu64 "\n", t_rank_, point, epoch);
        fflush(stderr);
        raise(SIGKILL);
    }
}

static inline int t_done(void)
{
    int all = 0;
    MPI_Allreduce(&t_fail_, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t_rank_ == 0)
        fprintf(stderr, "%s (%d failed checks)\n", all ? "FAIL" : "PASS", all);
    MPI_Finalize();
    return all ? 1 : 0;
}

#endif
