/**
 * @file pshuffle.h
 * @brief pshuffle: partial distributed shuffling of a training set over MPI.
 *
 * The dataset is partitioned over the M ranks of a communicator. Every epoch
 * each rank sends round(Q*n) of its n local samples to other ranks and
 * receives exactly as many, so partitions stay balanced and storage per rank
 * stays at (1+Q)*n. Q=0 is local shuffling, Q=1 global shuffling.
 *
 * The exchange plan of an epoch is a pure function of (seed, epoch, Q
 * schedule, per-rank counts): every rank computes it without communication.
 * The exchange can overlap with training: ps_exchange_begin() at the start of
 * epoch e, ps_progress() during it, ps_exchange_end() at its end. Samples
 * received during epoch e are used from epoch e+1.
 *
 * Errors: every function returns 0 or a negative code, either a PS_E* code
 * below or -errno for a failed system call; ps_strerror() names it and
 * ps_errdetail() gives the detail of the calling thread's last failure.
 *
 * Collective calls are marked "Collective": every rank of the communicator
 * must make them in the same order. A collective call that fails on one rank
 * fails on all ranks (the others return PS_EPEER naming the failing rank),
 * so no rank is left waiting. Each collective call starts by checking that
 * every rank is in the same call for the same epoch (else PS_ESTATE or
 * PS_EEPOCH on all ranks). Where no error can be returned without leaving
 * peers waiting (an allocation or MPI failure after the ranks agreed to
 * exchange, ranks out of step with messages in flight, a rank that does not
 * answer within PSHUFFLE_TIMEOUT seconds, default 300), the library writes
 * one line "pshuffle: rank R: <call>: <error>; aborting the job" to stderr
 * and calls MPI_Abort: the job ends instead of hanging.
 *
 * The library never calls MPI_Init: MPI must be initialised by the caller.
 * It prints nothing, except the line before an MPI_Abort. It duplicates
 * the communicator it is given.
 *
 * Thread safety: one shuffler is used from one thread (its optional
 * progress thread is internal). Reads (ps_info, ps_read, ps_order) make no
 * MPI call, so a forked process may use them.
 */
#ifndef PSHUFFLE_H
#define PSHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PS_VERSION_MAJOR 0
#define PS_VERSION_MINOR 1

/* X(name, value, message) */
#define PS_ERRNO_MAP(X)                                                         \
    X(EINVAL,    -2001, "invalid argument")                                     \
    X(EMISMATCH, -2002, "parameters differ across ranks")                       \
    X(ENRANKS,   -2003, "store was written by a different number of ranks")     \
    X(ECORRUPT,  -2004, "corrupt sample or manifest")                           \
    X(ESTATE,    -2005, "call not valid in the current state")                  \
    X(EEPOCH,    -2006, "wrong epoch")                                          \
    X(EPEER,     -2007, "another rank failed")                                  \
    X(EMPI,      -2008, "MPI call failed")                                      \
    X(EDUP,      -2009, "duplicate sample id")                                  \
    X(ETOOBIG,   -2010, "sample too large")                                     \
    X(ENOSTORE,  -2011, "no pshuffle store found")                              \
    X(EFORMAT,   -2012, "malformed input file")

/** Error codes (all below -2000, so they never collide with -errno). */
typedef enum {
#define PS_ERR_ENUM_(name, val, msg) PS_##name = (val),
    PS_ERRNO_MAP(PS_ERR_ENUM_)
#undef PS_ERR_ENUM_
} ps_errno_t;

/** Message for a code (PS_E* or -errno). Static storage, never NULL. */
const char *ps_strerror(int err);
/** Symbolic name ("PS_ECORRUPT", "ENOSPC"). Static storage, never NULL. */
const char *ps_err_name(int err);
/** Detail of the calling thread's last failure ("" when none). Valid until
 *  the thread's next pshuffle call. */
const char *ps_errdetail(void);

/* ------------------------------------------------------------------------ */
/* Q schedule and exchange plan (pure functions, no MPI needed).            */

/** Kinds of Q schedule. */
typedef enum {
    PS_Q_CONST = 0, /**< Q_e = q0 */
    PS_Q_EXP = 1,   /**< Q_e = max(q_min, q0 * q_rate^e) */
    PS_Q_LINEAR = 2,/**< Q_e = max(q_min, q0 - q_rate * e) */
    PS_Q_TABLE = 3  /**< Q_e = q_table[min(e, q_table_len-1)] */
} ps_q_kind_t;

/** A per-epoch Q schedule. All values must lie in [0, 1] (q_rate in [0, 1]
 *  for PS_Q_EXP, >= 0 for PS_Q_LINEAR). */
typedef struct {
    int kind;             /**< ps_q_kind_t */
    double q0;
    double q_rate;
    double q_min;
    const double *q_table;/**< borrowed; copied by ps_open() */
    uint32_t q_table_len;
} ps_schedule_t;

/** Checks a schedule. 0 or PS_EINVAL with a detail. */
int ps_schedule_check(const ps_schedule_t *s);
/** Q of epoch e under the schedule (assumes a valid schedule). */
double ps_schedule_q(const ps_schedule_t *s, uint64_t epoch);
/** round(q*n), half away from zero: the number of samples a rank holding n
 *  samples (at its balanced share) puts in the epoch's pool at this Q. */
uint64_t ps_plan_count(double q, uint64_t n);

/** One rank's part of an epoch's plan. Arrays are owned by the plan; free
 *  with ps_plan_free(). */
typedef struct {
    uint64_t npool;        /**< samples this rank puts in the epoch's pool */
    uint64_t nsend;        /**< pool samples that land on another rank (they move) */
    uint64_t *send_pos;    /**< [nsend] positions (in canonical id order) that move */
    int *send_to;          /**< [nsend] destination rank of each */
    uint64_t nrecv;        /**< samples this rank receives */
    uint64_t *recv_count;  /**< [nranks] samples received from each rank (0 for itself) */
    uint64_t nkept;        /**< pool samples that land back on this rank (fixed points) */
    uint64_t count_after;  /**< samples held after the exchange */
} ps_plan_t;

/**
 * Balanced per-rank counts for N = sum(counts) samples: every rank gets
 * N/M or N/M+1, and the N%M larger shares go first to the ranks that hold
 * more than N/M now (lowest ranks first), so a balanced job never moves a
 * sample just to rebalance. targets[M] is written. Pure.
 */
void ps_plan_balance(const uint64_t *counts, int nranks, uint64_t *targets);

/**
 * Computes rank `rank`'s plan for one epoch.
 *
 * counts[M] are the per-rank sample counts, q the epoch's Q. Each rank r
 * puts k_r = max(round(q*counts[r]), counts[r] - t_r) samples in the pool
 * (t = ps_plan_balance(counts)): the first k_r positions of a random
 * permutation of its samples (canonical order = ascending id). The pool is
 * then dealt uniformly at random to the ranks, each rank d receiving
 * t_d - (counts[d] - k_d) pool samples, so every rank ends with its
 * balanced count. A pool sample may land back on its own rank (a fixed
 * point: it does not move). With q = 1 the pool is the whole dataset and
 * the new partition is a uniformly random partition of all N samples into
 * parts of the balanced sizes, whatever the current one: a fresh global
 * shuffle, as DistributedSampler's. Deterministic in (seed, epoch, q,
 * counts); no communication. Costs O(sum k) time and 4 bytes per pool
 * sample.
 * @return 0, PS_EINVAL or -ENOMEM.
 */
int ps_plan_compute(ps_plan_t *out, uint64_t seed, uint64_t epoch, double q,
                    const uint64_t *counts, int nranks, int rank);
void ps_plan_free(ps_plan_t *p);

/** The plans of all ranks of one epoch into out[nranks] (same result as
 *  nranks calls of ps_plan_compute(), in one pass over the pool); free
 *  each with ps_plan_free(). For simulations such as `pshuffle plan`. */
int ps_plan_compute_all(ps_plan_t *out, uint64_t seed, uint64_t epoch, double q,
                        const uint64_t *counts, int nranks);

/** The local visiting order of epoch e on `rank`: out[n] receives a
 *  permutation of 0..n-1 (positions in canonical id order). */
void ps_plan_order(uint64_t *out, uint64_t n, uint64_t seed, uint64_t epoch, int rank);

/**
 * The seeded partition of an epoch, as DistributedSampler draws it: perm[n]
 * receives a permutation of the ids 0..n-1, uniformly random from the
 * stream (seed, "part", epoch) (the identity when shuffle is 0). Position k
 * belongs to rank k mod M, so rank r holds perm[r], perm[r+M], ...: a
 * uniformly random partition into parts of sizes ceil(N/M) (the first N%M
 * ranks) and floor(N/M), the same whatever the previous partition.
 * ps_exchange_begin_to() moves the samples there. Pure; O(n).
 */
void ps_partition_perm(uint64_t *perm, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle);

/* ------------------------------------------------------------------------ */
/* Shuffler                                                                 */

typedef struct ps_shuffler ps_shuffler_t;

/** Protocol points passed to a hook (testing, tracing). */
typedef enum {
    PS_POINT_BEGIN = 1,     /**< exchange posted */
    PS_POINT_RECV_PART,     /**< first payload round received */
    PS_POINT_STAGED,        /**< all received samples stored (a directory store's segment in
                                 place), nothing committed */
    PS_POINT_COMMITTED,     /**< this rank's new manifest is durable */
    PS_POINT_AGREED,        /**< every rank committed; sent samples not yet released */
    PS_POINT_DELETING,      /**< half of the sent samples released (a directory store: half of
                                 the segments left without samples removed) */
    PS_POINT_DONE,          /**< exchange finished */
    PS_POINT_LOADED,        /**< ps_start(): this rank's epoch-0 manifest is durable */
    PS_POINT_RESTRIPE_STAGED,  /**< ps_open(), rank 0, store of another rank count: the
                                    rewritten store is durable beside the old one */
    PS_POINT_RESTRIPE_SWAPPED  /**< ps_open(), rank 0: the rewritten store has replaced
                                    the old one, which is not yet removed */
} ps_point_t;
typedef void (*ps_hook_fn)(void *arg, int point, uint64_t epoch);

#define PS_CONFIG_VERSION 1
/** Configuration of ps_open(). Initialise with ps_config_init(). */
typedef struct {
    uint32_t version;       /**< PS_CONFIG_VERSION */
    uint64_t seed;
    ps_schedule_t q;        /**< default: constant 0.1 */
    const char *store_dir;  /**< NULL: in-memory store; else directory store root */
    union {
        /** In-flight window: the most payload bytes one round of the
         *  exchange moves, sends and receives together (1 KiB .. 1 GiB;
         *  default 64 MiB, or PSHUFFLE_WINDOW). Bounds the memory the
         *  exchange holds beyond the samples: resident memory stays within
         *  (1+Q)*n*s plus this window. Must agree across ranks. */
        uint64_t window_bytes;
        uint64_t chunk_bytes; /**< former name of window_bytes */
    };
    int fsync;              /**< directory store: fsync files and manifests (default 1) */
    int resume;             /**< directory store: 1 resume from the store's last
                                 committed epoch, 0 start afresh (default 1) */
    ps_hook_fn hook;        /**< optional, called at protocol points (from the
                                 progress thread too, when there is one) */
    void *hook_arg;
    int progress_thread;    /**< 1: a thread progresses each exchange between
                                 ps_exchange_begin() and ps_exchange_end(),
                                 needs MPI_THREAD_MULTIPLE; 0: only
                                 ps_progress() calls (each does at most about
                                 1 ms of work) and ps_exchange_end(); -1
                                 (default): a thread when MPI provides
                                 MPI_THREAD_MULTIPLE, else 0 */
} ps_config_t;

void ps_config_init(ps_config_t *cfg);

/**
 * Opens a shuffler on a duplicate of `comm`. Collective.
 *
 * Checks that seed, Q schedule and window agree on every rank (else
 * PS_EMISMATCH naming the parameter and two ranks). With a directory store
 * and cfg->resume, loads the last epoch committed by every rank; a store
 * written by a different number of ranks is first rewritten for this job's
 * (rank 0 deals the samples to balanced counts and swaps the new store in
 * atomically; PS_ENRANKS when a rank directory is not on rank 0's node),
 * one written with another seed or Q schedule gives PS_EMISMATCH.
 * A directory store's directories are created with mode 0700; an existing
 * one that is a symbolic link, another user's or writable by group or
 * others is refused (-EPERM or -ELOOP), and each rank holds the store's
 * lock until ps_close() (-EBUSY naming the holder's pid and host while
 * another job holds it).
 * *out is owned by the caller: ps_close() it.
 */
int ps_open(ps_shuffler_t **out, MPI_Comm comm, const ps_config_t *cfg);
/** ps_open() taking a Fortran communicator handle (for FFI bindings). */
int ps_open_f(ps_shuffler_t **out, MPI_Fint comm, const ps_config_t *cfg);
/** Frees the shuffler and its duplicated communicator. Collective in MPI's
 *  sense (MPI_Comm_free), so call it on every rank; it does not wait for
 *  the others, unless an exchange is in flight: then it is collective, the
 *  exchange is dropped (nothing uncommitted is kept) if every rank closes,
 *  and the job is aborted with a message if another rank is in
 *  ps_exchange_end() instead. After MPI_Finalize only memory is freed.
 *  NULL is fine. */
void ps_close(ps_shuffler_t *ps);

/** 1 when ps_open() resumed from a stored checkpoint. */
int ps_resumed(const ps_shuffler_t *ps);
/** Current epoch: the next exchange is for this epoch. */
uint64_t ps_epoch(const ps_shuffler_t *ps);
int ps_rank(const ps_shuffler_t *ps);
int ps_nranks(const ps_shuffler_t *ps);

/**
 * Adds a sample to this rank's initial partition (local; only before
 * ps_start()). The data is copied. id must be unique across all ranks;
 * label is free (-1 for none). Samples over 1 GiB give PS_ETOOBIG.
 */
int ps_add(ps_shuffler_t *ps, uint64_t id, int32_t label, const void *data, size_t len);

/**
 * Builds the initial partition from a list of files, read from shared
 * storage: rank r reads files [r*N/M, (r+1)*N/M). Sample id = file index,
 * label = labels[i] (labels may be NULL: -1). Collective (a failure on one
 * rank fails all). Only before ps_start().
 */
int ps_load_files(ps_shuffler_t *ps, const char *const *paths, size_t n, const int32_t *labels);

/**
 * Builds the initial partition from a packed dataset: `data_path` holds the
 * samples back to back, `index_path` the index (see docs/pshuffle.md:
 * magic "PSIDX001", u64 count, then count records {u64 offset, u64 size,
 * i64 label}, little-endian). Rank r reads records [r*N/M, (r+1)*N/M) with
 * pread. Sample id = record number. Collective.
 */
int ps_load_packed(ps_shuffler_t *ps, const char *data_path, const char *index_path);

/** Seals the initial partition (commits epoch 0 in a directory store).
 *  Collective. Refuses (PS_EDUP, on every rank) an id held by two ranks,
 *  naming the id and both ranks. After a resume it only checks state. */
int ps_start(ps_shuffler_t *ps);

/** Samples held by this rank for the current epoch. */
uint64_t ps_size(const ps_shuffler_t *ps);
/** Samples held by all ranks together (0 before ps_start()). Local: known
 *  from the counts every rank keeps. */
uint64_t ps_total(const ps_shuffler_t *ps);

/** Metadata of a sample. */
typedef struct {
    uint64_t id;
    int32_t label;
    uint64_t size;
    uint64_t hash;   /**< XXH3-64 of the payload */
} ps_sample_t;

/** Metadata of the idx-th sample (canonical order: ascending id). Local. */
int ps_info(const ps_shuffler_t *ps, uint64_t idx, ps_sample_t *out);
/** Copies the idx-th sample's payload into buf (cap >= size), verifying its
 *  checksum (PS_ECORRUPT on mismatch). Local, never calls MPI, so it is
 *  safe in a forked DataLoader worker. */
int ps_read(const ps_shuffler_t *ps, uint64_t idx, void *buf, size_t cap);

/** The ids of this rank's samples, in canonical (ascending) order: out[n],
 *  n = ps_size() (else PS_EINVAL). Local. */
int ps_ids(const ps_shuffler_t *ps, uint64_t *out, uint64_t n);

/** Visiting order of the current epoch: out[n] gets a permutation of
 *  0..n-1 (n = ps_size()). Local. */
int ps_order(const ps_shuffler_t *ps, uint64_t *out, uint64_t n);

/**
 * Starts the exchange of epoch `epoch` (must equal ps_epoch() on every
 * rank, else PS_EEPOCH on all). Collective (two small MPI_Iallreduce: one
 * to check that all ranks are in this call for this epoch, one to agree on
 * local success and on the number of rounds), then computes the plan and
 * starts the exchange of sample headers (MPI_Ialltoallv). The payload then
 * moves in rounds of one MPI_Ialltoallw each, at most window_bytes per
 * round. The current samples stay readable, and ps_order() keeps giving
 * this epoch's order, until ps_exchange_end().
 */
int ps_exchange_begin(ps_shuffler_t *ps, uint64_t epoch);
/**
 * Starts an exchange, like ps_exchange_begin(epoch), that moves every
 * sample to its rank in the seeded partition of `part_epoch`
 * (ps_partition_perm(seed, part_epoch, shuffle)) instead of following the Q
 * schedule: whatever the current holdings, one exchange reaches it, so a
 * caller can go to any epoch's partition, forward or back. The ids held by
 * all ranks must be 0..N-1 (else PS_EINVAL on every rank). Collective: the
 * checks of ps_exchange_begin(), then one MPI_Alltoall of the per-rank
 * counts. Completed by ps_exchange_end(), which commits epoch+1.
 */
int ps_exchange_begin_to(ps_shuffler_t *ps, uint64_t epoch, uint64_t part_epoch, int shuffle);

/**
 * Starts an exchange, like ps_exchange_begin_to(), that sends each sample
 * to the rank the caller names: dest[i] (0..M-1) for the i-th sample in
 * canonical order (n = ps_size()). The caller must make the destinations
 * agree across ranks (a pure function of what every rank knows): a re-deal
 * of the rest of an epoch after a change of the rank count, for one. A
 * destination out of range gives PS_EINVAL on every rank. Collective;
 * completed by ps_exchange_end().
 */
int ps_exchange_begin_dest(ps_shuffler_t *ps, uint64_t epoch, const int32_t *dest);

/**
 * Agrees on a result computed outside the library, so that an error on one
 * rank reaches every rank before they go on to a collective. `epoch` (any
 * value the caller's step is for) must be the same on every rank, else
 * PS_EEPOCH on all. `msg` is NULL
 * (or "") on a rank without error, else its one-line message. Returns 0
 * when no rank had an error; else PS_EINVAL on the failing rank and
 * PS_EPEER on the others, and ps_errdetail() is "rank R: msg" on every
 * rank (R the lowest failing rank). Collective; a rank that does not
 * arrive within PSHUFFLE_TIMEOUT ends the job with a message.
 */
int ps_agree_error(ps_shuffler_t *ps, uint64_t epoch, const char *msg);

/** Advances the exchange without blocking, for about 1 ms at most (packing
 *  and storing are cut into slices of at most 64 KiB). *done (may be NULL)
 *  becomes 1 once every round completed. Local. With a progress thread it
 *  only reports. */
int ps_progress(ps_shuffler_t *ps, int *done);
/**
 * Completes the exchange and commits epoch+1. Collective. On failure on any
 * rank (corrupt sample, full disk, ...) every rank returns an error and the
 * store stays at the old epoch: no partial commit.
 */
int ps_exchange_end(ps_shuffler_t *ps);
/** ps_exchange_begin() + ps_exchange_end(). Collective. */
int ps_exchange(ps_shuffler_t *ps, uint64_t epoch);

/** Statistics of the last completed exchange. */
typedef struct {
    uint64_t epoch;           /**< epoch of the exchange */
    double q;                 /**< Q used */
    uint64_t samples_sent, samples_recv;
    uint64_t bytes_sent, bytes_recv;
    uint64_t samples_kept;    /**< pool samples that landed back on this rank (fixed points) */
    uint64_t exchange_ns;     /**< begin() to completion of the last round; when no
                                   sample moves on any rank (local strategy, balanced
                                   counts) no message is sent and it is begin()'s own
                                   work */
    uint64_t overlap_ns;      /**< begin() to the last message completed before
                                   ps_exchange_end() was called: the span in which
                                   the exchange progressed during training (0 when
                                   nothing completed before) */
    uint64_t blocked_ns;      /**< time spent inside ps_exchange_end() */
    uint64_t peak_samples;    /**< most samples stored at once (committed + staged) */
    uint64_t peak_bytes;      /**< most payload bytes held at once: committed + staged
                                   samples + round buffers of the exchange (at most
                                   window_bytes) */
    uint64_t chunks_sent, chunks_recv; /**< payload pieces (one per peer and round) */
    uint64_t rounds;          /**< rounds of the exchange (the same on every rank) */
    uint64_t bytes_recv_overlapped; /**< payload bytes received before ps_exchange_end()
                                   was called: what moved during training */
} ps_stats_t;
int ps_stats(const ps_shuffler_t *ps, ps_stats_t *out);

/** Histogram of this rank's labels: bins[l] for 0 <= l < nbins; samples
 *  with other labels are counted in *other (may be NULL). Local. */
int ps_label_hist(const ps_shuffler_t *ps, uint64_t *bins, int nbins, uint64_t *other);

/* ------------------------------------------------------------------------ */
/* Offline store verification (no MPI).                                     */

/** Result of ps_verify_dir(). */
typedef struct {
    int nranks;
    uint64_t epoch;           /**< epoch verified (the store's committed epoch) */
    uint64_t samples;         /**< total samples */
    uint64_t bytes;
    uint64_t min_count, max_count;
    uint64_t bad_checksum;    /**< samples whose bytes or segment do not match the manifest */
    uint64_t missing;         /**< samples whose segment file is absent */
    uint64_t duplicates;      /**< ids held by more than one rank */
    uint64_t orphans;         /**< segment files referenced by no manifest */
    char first_problem[256];  /**< description of the first problem, "" if none */
} ps_verify_t;

/**
 * Checks a directory store: every rank's manifest, every segment's header,
 * every sample's place and checksum, and that no id is held twice. Resolves a store
 * interrupted mid-commit the way ps_open() would. Returns 0 when the store
 * is sound, PS_ECORRUPT when a problem was found (details in *out), or
 * another error if the store cannot be read.
 */
int ps_verify_dir(const char *dir, ps_verify_t *out);

#ifdef __cplusplus
}
#endif
#endif
