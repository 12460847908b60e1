/* The shuffler's state, shared by shuffler.c, agree.c and exchange.c, and
 * the agreement among ranks (agree.c) that both the shuffler and the
 * exchange use. */
#ifndef PSHUFFLE_SHUFFLER_H
#define PSHUFFLE_SHUFFLER_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

/* The exchange in flight (exchange.h). */
typedef struct ps__xchg ps__xchg_t;

struct ps_shuffler {
    MPI_Comm comm;           /* agreements and checks */
    MPI_Comm dcomm;          /* the exchange's collectives (headers, rounds) */
    MPI_Datatype hdrtype;    /* PS_WIRE_HDR contiguous bytes: one sample's header */
    int rank, nranks;
    uint64_t seed;
    ps_schedule_t q;
    double *qtable;
    uint64_t params;
    uint64_t window;         /* in-flight window: bound of the round buffers, send + receive */
    int fsync, resume;
    ps_hook_fn hook;
    void *hook_arg;
    int progress_thread;
    double timeout_s;        /* longest wait for the other ranks (PSHUFFLE_TIMEOUT) */
    int profile;             /* PSHUFFLE_PROFILE: time the parts of each exchange (1 wall, 2 CPU) */
    pthread_t thread;        /* progress thread of the exchange in flight */
    pthread_mutex_t mu;      /* serialises the progress thread and ps_progress */
    int thread_running;
    atomic_int thread_stop;  /* set by the caller, read by the progress thread */
    char *root;              /* NULL: memory store */
    ps__arena_t arena;       /* memory store */
    ps__dir_t rankdir;       /* directory store: this rank's directory, open and locked */
    int started, resumed;
    uint64_t epoch;
    ps__entry_t *ent;        /* committed samples, ascending id after start */
    uint64_t n, cap, bytes;
    uint64_t *counts;        /* per-rank counts */
    ps__xchg_t *x;
    ps_stats_t stats;
    unsigned char *keep;     /* memory store: the send round buffer, kept between exchanges */
    size_t keeplen;
};

/* Samples over all ranks (ps_total()), from the per-rank counts. */
static inline uint64_t ps__total(const ps_shuffler_t *ps)
{
    uint64_t t = 0;
    for (int r = 0; ps->counts && r < ps->nranks; r++)
        t += ps->counts[r];
    return t;
}

/* Agreement among ranks (agree.c). Collective entry points, for ps__sync(). */
enum { PS_OP_LOAD = 1, PS_OP_START, PS_OP_BEGIN, PS_OP_END, PS_OP_CLOSE, PS_OP_BEGIN_TO, PS_OP_AGREE, PS_OP_BEGIN_DEST,
       PS_OP_MAX_ };
int ps__agree(ps_shuffler_t *ps, int err, int secondary);
/* ps__agree() that also returns the largest *val over the ranks in *val
 * (same single reduction). */
int ps__agree_max(ps_shuffler_t *ps, int err, int secondary, uint64_t *val);
int ps__sync(ps_shuffler_t *ps, int op, uint64_t epoch);
int ps__wait(ps_shuffler_t *ps, MPI_Request *req, const char *what);
void ps__fatal(ps_shuffler_t *ps, int err, const char *what) __attribute__((noreturn));
/* Test hook (the test build only, PS_TEST_HOOKS; 0 in the released
 * library): PSHUFFLE_TEST_FAIL_ALLOC=RANK:WHERE makes the named
 * allocation fail on that rank ("begin": planning an exchange, before the
 * ranks agree; "chunk": a round buffer or the memory for received samples,
 * after they agreed). */
#ifdef PS_TEST_HOOKS
int ps__fault(const ps_shuffler_t *ps, const char *where);
#else
#define ps__fault(ps, where) ((void)(ps), (void)(where), 0)
#endif

#endif
