/* The exchange (exchange.c) as the shuffler sees it: its state and the
 * calls that end it. The dependency goes one way: shuffler.c calls the
 * exchange through this header, and exchange.c calls nothing of
 * shuffler.c (the agreement among ranks it needs is agree.c's). */
#ifndef PSHUFFLE_EXCHANGE_H
#define PSHUFFLE_EXCHANGE_H

#include "shuffler.h"

#include <xxhash.h>
/* On x86-64, libxxhash's dispatching entry points pick the widest vector
 * unit the CPU has (AVX2, AVX-512) at run time, where the plain ones use
 * SSE2: the checksums are the same, two to three times faster to compute.
 * The header redefines XXH3_64bits and XXH3_64bits_update to them. */
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif

/* One side of the exchange with one peer. The pair's payload is one byte
 * stream (its samples back to back, in slot order), moved in rounds of at
 * most `budget` bytes per pair; (j, off) is the sample and offset the next
 * byte of the stream belongs to. */
typedef struct {
    uint64_t n;              /* samples to/from this peer */
    uint64_t *idx;           /* send side: committed indices, slot order */
    unsigned char *hdr;      /* n * PS_WIRE_HDR bytes (inside the exchange's header array) */
    uint64_t len;            /* payload bytes of the pair's stream */
    uint64_t j, off;         /* stream cursor */
    uint64_t rlen, rpos;     /* this round's piece and how much of it is packed/unpacked */
    size_t boff;             /* the piece's offset in the round buffer */
    XXH3_state_t *hs;        /* checksum of a sample cut by the slicing or by a round */
    uint64_t j0, off0;       /* the cursor where this round's piece starts */
    int fd;                  /* directory store: file of the sample at the cursor, or -1 */
    unsigned char *region;   /* memory store, receive side: the whole stream, in the arena */
    /* Memory store, receive side: the round's messages from this peer are
     * requests [q0, q1) of the round, qv the next one to verify; (vj,
     * voff) the sample and offset, vpos the stream offset, where
     * checksum verification stands. */
    int q0, q1, qv;
    uint64_t vj, voff, vpos;
} ps__peer_t;

#define PS_WIRE_HDR 32

/* Where an exchange's time goes (PSHUFFLE_PROFILE=1, or =cpu for CPU
 * time): time per part, summed over the exchange, printed by the rank when
 * the exchange ends. Off by default; when off, no clock is read for it. */
enum {
    PS_PROF_SYNC, PS_PROF_PLAN, PS_PROF_AGREE, PS_PROF_HDRWAIT, PS_PROF_ONHDR, PS_PROF_PACK, PS_PROF_POST,
    PS_PROF_WAIT, PS_PROF_VERIFY, PS_PROF_ENDSYNC, PS_PROF_COMMIT, PS_PROF_RELEASE, PS_PROF_COMPACT,
    PS_PROF_FREE, PS_PROF_N
};

/* Phases of an exchange, driven by ps__step(). */
enum { PS_PH_HDR = 1, PS_PH_PACK, PS_PH_WAIT, PS_PH_UNPACK, PS_PH_DONE };

struct ps__xchg {
    uint64_t epoch;
    double q;
    ps_plan_t plan;
    ps__peer_t *sp, *rp;     /* [nranks] each, indexed by rank */
    unsigned char *shdr, *rhdr;
    int phase;
    MPI_Request req;         /* the collective in flight */
    MPI_Request *reqs;       /* memory store: the round's messages in flight ([nreqs]) */
    uint64_t *reqlen;        /* [capreqs] bytes of each message */
    unsigned char *reqdone;  /* [capreqs] 1 once completed */
    int *outidx;             /* [capreqs] for MPI_Testsome */
    int nreqs, capreqs, ndone;
    MPI_Datatype *types;     /* [2 * nranks] of the round in flight (send then receive) */
    uint64_t budget;         /* bytes per pair and round */
    uint64_t direct;         /* memory store: samples this large are sent from the store */
    uint64_t msgmax;         /* memory store: the longest message (MSG_MAX) */
    uint64_t round, nrounds;
    unsigned char *sbuf, *rbuf; /* round buffers (rbuf: directory store only) */
    size_t sbuflen, rbuflen;
    int pk_peer;             /* next peer to pack/unpack in this round */
    ps__entry_t *staged;     /* received samples, ascending id (known once headers arrived) */
    uint64_t nstaged, staged_bytes;
    ps__entry_t *newent;     /* the store after the exchange, built off the critical path */
    uint64_t nnew;
    unsigned char *sent;     /* [n] 1: committed sample i leaves this rank */
    int targeted;            /* ps_exchange_begin_to/_dest(): counts_after holds every rank's count after */
    uint64_t *counts_after;  /* [nranks] */
    int err, err_secondary;
    char errdetail[480];
    int commit_err;          /* found while building newent (duplicate id, count) */
    char commit_detail[480];
    int complete;
    uint64_t bytes_in;       /* payload bytes of completed rounds received */
    uint64_t t_begin, t_complete, t_endcall;
    uint64_t t_outside;      /* last progress made before ps_exchange_end() */
    uint64_t buf_bytes;      /* round buffers held by this exchange */
    int part_hooked;
    ps_stats_t st;           /* of this exchange, published when it ends */
    uint64_t prof[PS_PROF_N];/* PSHUFFLE_PROFILE: ns per part */
    uint64_t prof_t;         /* start of the part being timed */
};

/* Stops the progress thread and frees the exchange in flight, if any (no
 * communication). */
void ps__xchg_free(ps_shuffler_t *ps);
/* Frees the send round buffer kept between exchanges. */
void ps__pool_free(ps_shuffler_t *ps);
/* Runs the exchange in flight to its end and drops it (every rank closes). */
void ps__xchg_drain(ps_shuffler_t *ps);

#endif
