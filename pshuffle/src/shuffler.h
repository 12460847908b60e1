/* The shuffler's state, shared by shuffler.c and exchange.c. */
#ifndef PSHUFFLE_SHUFFLER_H
#define PSHUFFLE_SHUFFLER_H

#include <pthread.h>

#include "internal.h"

/* One side of the exchange with one peer: the headers message, then the
 * payload in chunks of at most chunk_bytes (one chunk in flight per peer,
 * so buffers stay at one chunk per peer). */
typedef struct {
    int peer;
    uint64_t n;              /* samples to/from this peer */
    uint64_t *idx;           /* send side: committed indices, slot order */
    unsigned char *hdr;      /* n * PS_WIRE_HDR bytes */
    uint64_t next;           /* first sample of the next chunk */
    uint64_t cfirst, ccount; /* samples of the chunk in flight */
    unsigned char *buf;
    size_t buflen;
    int hdr_done, finished;
} ps__peer_t;

#define PS_WIRE_HDR 32
#define PS_WIRE_UNREADABLE 1u /* sender could not read this sample */

typedef struct {
    uint64_t epoch;
    double q;
    ps_plan_t plan;
    int nsp, nrp;
    ps__peer_t *sp, *rp;
    MPI_Request *reqs;       /* 2 per peer: [2i] headers, [2i+1] payload; sends first */
    ps__entry_t *staged;
    uint64_t nstaged, capstaged, staged_bytes;
    unsigned char *sent;     /* [n] 1: committed sample i leaves this rank */
    int err, err_secondary;
    char errdetail[480];
    int complete;
    uint64_t t_begin, t_complete, t_endcall;
    uint64_t t_outside;      /* last completion handled before ps_exchange_end() */
    uint64_t buf_bytes;      /* payload buffers held by this exchange */
    int part_hooked;
    ps_stats_t st;           /* of this exchange, published when it ends */
} ps__xchg_t;

struct ps_shuffler {
    MPI_Comm comm;
    MPI_Datatype hdrtype;    /* PS_WIRE_HDR contiguous bytes: one sample's header */
    int rank, nranks;
    uint64_t seed;
    ps_schedule_t q;
    double *qtable;
    uint64_t params;
    uint64_t chunk;
    int fsync, resume;
    ps_hook_fn hook;
    void *hook_arg;
    int progress_thread;
    double timeout_s;        /* longest wait for the other ranks (PSHUFFLE_TIMEOUT) */
    pthread_t thread;        /* progress thread of the exchange in flight */
    pthread_mutex_t mu;      /* serialises the progress thread and ps_progress */
    int thread_running;
    volatile int thread_stop;
    char *root;              /* NULL: memory store */
    ps__arena_t arena;       /* memory store */
    char rankdir[4200];
    int started, resumed;
    uint64_t epoch;
    ps__entry_t *ent;        /* committed samples, ascending id after start */
    uint64_t n, cap, bytes;
    uint64_t *counts;        /* per-rank counts */
    ps__xchg_t *x;
    ps_stats_t stats;
#define PS_POOL_SLOTS 64
    struct {
        unsigned char *buf;
        size_t len;
    } pool[PS_POOL_SLOTS];   /* chunk buffers kept between exchanges */
    int pool_n;
    uint64_t pool_bytes;
};

/* Collective entry points, for ps__sync(). */
enum { PS_OP_LOAD = 1, PS_OP_START, PS_OP_BEGIN, PS_OP_END, PS_OP_CLOSE };
int ps__agree(ps_shuffler_t *ps, int err, int secondary);
int ps__sync(ps_shuffler_t *ps, int op, uint64_t epoch);
int ps__wait(ps_shuffler_t *ps, MPI_Request *req, const char *what);
void ps__fatal(ps_shuffler_t *ps, int err, const char *what) __attribute__((noreturn));
/* Test hook: PSHUFFLE_TEST_FAIL_ALLOC=RANK:WHERE makes the named
 * allocation fail on that rank ("begin": planning an exchange, before the
 * ranks agree; "chunk": a payload buffer, after they agreed). */
int ps__fault(const ps_shuffler_t *ps, const char *where);
void ps__xchg_free(ps_shuffler_t *ps);
void ps__pool_free(ps_shuffler_t *ps);

#endif
