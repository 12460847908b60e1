/* Internal declarations of libpshuffle. Not installed. */
#ifndef PSHUFFLE_INTERNAL_H
#define PSHUFFLE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "pshuffle.h"

#define PS_API __attribute__((visibility("default")))
#define PS_PRINTF(a, b) __attribute__((format(printf, a, b)))

#define PS_MAX_SAMPLE (UINT64_C(1) << 30)
#define PS_MIN_WINDOW (UINT64_C(1) << 10)
#define PS_MAX_WINDOW (UINT64_C(1) << 30)
uint64_t ps__env_window(void);
/* A size as hetmem reads one: digits with an optional K/M/G/T suffix
 * (binary), which may be followed by "B" or "iB". 0, or -1 when s is not
 * one (out untouched). */
int ps__parse_size(const char *s, uint64_t *out);

int ps__errf(int err, const char *fmt, ...) PS_PRINTF(2, 3);
void ps__errset(const char *text);
void ps__errclear(void);

uint64_t ps__now_ns(void);
uint64_t ps__hash(const void *data, size_t len);
/* "Q=0.5", "Q=0.8*0.5^e (min 0.1)": for messages and manifests. */
void ps__schedule_desc(const ps_schedule_t *q, char *buf, size_t len);
uint64_t ps__params_hash(uint64_t seed, const ps_schedule_t *q);

/* Counter-based PRNG: splitmix64's finaliser applied to key + counter*gamma.
 * Every random choice of the plan comes from a stream keyed by what it is
 * for (domain, epoch, slot or rank), so each rank can recompute any part of
 * the plan independently. */
typedef struct {
    uint64_t key;
    uint64_t ctr;
} ps__rng_t;
uint64_t ps__mix64(uint64_t z);
void ps__rng_init(ps__rng_t *r, uint64_t seed, uint64_t domain, uint64_t a, uint64_t b);
uint64_t ps__rng_next(ps__rng_t *r);
uint64_t ps__rng_below(ps__rng_t *r, uint64_t n);

/* One sample as the shuffler tracks it. */
typedef struct {
    uint64_t id;
    int32_t label;
    uint32_t flags;
    uint64_t size;
    uint64_t hash;
    union {
        struct {          /* memory store: in the arena */
            void *data;
            struct ps__block *blk;
        };
        struct {          /* directory store: in segment file `seg` at byte `off` */
            uint64_t seg; /* PS_SEG_KEY(epoch, rank) of the segment */
            uint64_t off;
        };
    };
} ps__entry_t;

/* The memory store's arena (arena.c). */
typedef struct ps__block ps__block_t;
typedef struct {
    ps__block_t *head, *cur;
    size_t reserved, live;
    /* Emptied blocks kept for reuse, up to spare_max bytes (0: none kept):
     * their pages are already resident, where a fresh block's pages would
     * each fault and be zeroed by the kernel on first touch. */
    ps__block_t *spare;
    size_t spare_bytes, spare_max;
} ps__arena_t;
void *ps__arena_alloc(ps__arena_t *a, size_t n, ps__block_t **blk);
void ps__arena_free(ps__arena_t *a, ps__block_t *blk, size_t n);
void ps__arena_destroy(ps__arena_t *a);
/* Frees spare blocks until at most `keep` bytes of them remain. */
void ps__arena_trim(ps__arena_t *a, size_t keep);
/* Bytes the arena accounts for a sample of n bytes. */
size_t ps__arena_need(size_t n);
/* A block of exactly `bytes` bytes that will hold samples placed by the
 * caller, back to back; `live` is the sum of ps__arena_need() of their
 * sizes, so that freeing each of them with ps__arena_free() releases it. */
void *ps__arena_region(ps__arena_t *a, size_t bytes, size_t live, ps__block_t **blk);
/* Moves the samples of ent[n] that sit in blocks less than half live, and
 * while the blocks hold more than `slack` bytes beyond the live samples
 * (holes) those of the next sparsest blocks down to half the slack, whole
 * blocks at a time, into the holes of denser blocks; then the samples of
 * blocks less than half live that the holes could not take into fresh
 * blocks. Emptied blocks are
 * released. Always succeeds (without memory it leaves things as they
 * are). */
int ps__arena_compact(ps__arena_t *a, ps__entry_t *ent, uint64_t n, size_t slack);

/* ---- segment files and manifests (store.c, segment.c) ---- */
#define PS_MANIFEST_MAGIC "pshuffle-manifest"
#define PS_MANIFEST_VERSION 2
/* A segment file: a 32-byte header {"PSSG", u32 version 1, u64 epoch, u32
 * rank, u32 reserved, u64 payload length} and the payloads of its samples
 * back to back. Named seg.<epoch, 10 digits>.<rank, 5 digits>: written by
 * that rank in the exchange that committed that epoch (or the initial
 * load, epoch 0), never changed after its rename. */
#define PS_SEG_MAGIC "PSSG"
#define PS_SEG_VERSION 1
#define PS_SEG_HDR 32
#define PS_SEG_RANK_BITS 24
#define PS_SEG_KEY(epoch, rank) ((uint64_t)(epoch) << PS_SEG_RANK_BITS | (uint64_t)(rank))
#define PS_SEG_EPOCH(key) ((key) >> PS_SEG_RANK_BITS)
#define PS_SEG_RANK(key) ((int)((key) & ((UINT64_C(1) << PS_SEG_RANK_BITS) - 1)))
#define PS_SEG_MAX_EPOCH ((UINT64_C(1) << (64 - PS_SEG_RANK_BITS)) - 1)

/* A segment the rank's committed state (or the exchange in flight) refers
 * to: its payload length and, once the exchange read from it, a
 * descriptor. */
typedef struct {
    uint64_t key, len;
    int fd;
    int pending; /* written by the exchange in flight, not committed yet */
} ps__seg_t;

/* A kept sample copied out of a sparse segment into the one being written. */
typedef struct {
    uint64_t from, from_off, to_off, size;
} ps__move_t;
typedef struct {
    int rank, nranks;
    uint64_t epoch;
    uint64_t seed;
    uint64_t params;
    uint64_t count;
    char qdesc[64];    /* the Q schedule, for messages */
    ps__entry_t *ent;  /* sorted by id */
} ps__manifest_t;

/* One rank directory of a directory store, held open. Every file of the
 * store is opened relative to `fd`, with O_NOFOLLOW, never by path, so a
 * symbolic link planted in the store is never followed; `path` is kept for
 * messages only. */
typedef struct {
    int fd;            /* DIR/rank-NNNNN, -1: not open */
    int rootfd;        /* DIR, -1: not open */
    int lockfd;        /* DIR/rank-NNNNN/lock while ps__dir_lock() holds it, else -1 */
    char root[4096];   /* DIR */
    char path[4200];   /* DIR/rank-NNNNN */
    /* The segments of the rank (segment.c): the committed state's, sorted
     * by key, and the one being written (wfd >= 0: its temporary file;
     * wbase[part]: where each part of it starts; moves: the kept samples
     * to copy into it). Only the exchange and the calls that commit use
     * them; ps_read opens the segment it reads each time. */
    ps__seg_t *segs;
    size_t nsegs, capsegs;
    int wfd;
    uint64_t wkey, wend;
    uint64_t *wbase;
    int wparts;
    ps__move_t *moves;
    size_t nmoves, capmoves;
} ps__dir_t;
#define PS__DIR_INIT {.fd = -1, .rootfd = -1, .lockfd = -1, .wfd = -1}

/* ps__dir_open() flags. */
enum {
    PS__DIR_CREATE = 1,  /* create DIR (and missing parents) and the rank directory, mode 0700 */
    PS__DIR_PRIVATE = 2, /* refuse DIR or the rank directory when it is a symbolic link, is
                          * not owned by the effective user or is writable by group or
                          * others (-EPERM, the detail names it) */
};
/* Opens DIR and, for rank >= 0, DIR/rank-NNNNN (which must be a directory,
 * not a symbolic link). Without PS__DIR_CREATE a missing rank directory
 * gives -ENOENT. On error nothing is left open. Close with ps__dir_close(). */
int ps__dir_open(ps__dir_t *d, const char *root, int rank, int flags);
/* Takes the store lock of the rank directory (flock on its file "lock",
 * which then names this host and process) until ps__dir_close(). -EBUSY
 * naming the holder's host and pid when another process holds it. */
int ps__dir_lock(ps__dir_t *d);
void ps__dir_close(ps__dir_t *d);
/* Removes manifest `epoch` from the directory (no error if absent; the
 * caller decides whether a failure matters). */
int ps__dir_unlink_manifest(const ps__dir_t *d, uint64_t epoch);
/* File names inside a rank directory. */
void ps__manifest_name(char *buf, size_t len, uint64_t epoch);
void ps__seg_name(char *buf, size_t len, uint64_t key);
/* 1 when `name` is a segment's (its key in *key), else 0. */
int ps__seg_parse_name(const char *name, uint64_t *key);

/* Rank directory path "DIR/rank-NNNNN" into buf (for messages). */
void ps__rank_dir(char *buf, size_t len, const char *root, int rank);
/* Path of the segment holding sample e (for messages). */
void ps__sample_path(char *buf, size_t len, const char *rankdir, const ps__entry_t *e);
void ps__manifest_path(char *buf, size_t len, const char *rankdir, uint64_t epoch);
/* Creates path and its missing parents, mode 0700 (existing ones are left
 * as they are). */
int ps__mkdirs(const char *path);

/* Internal helpers of store.c that segment.c shares. */
int ps__create_tmp(const ps__dir_t *d, const char *name, int *fd);
int ps__open_regular(const ps__dir_t *d, const char *name, int *fd);
int ps__write_all(int fd, const void *buf, size_t len);
int ps__pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int ps__pread_all(int fd, void *buf, size_t len, uint64_t off);

/* ---- segments (segment.c) ----
 * The segment being written: ps__seg_create() makes its temporary file,
 * with `parts` parts whose places ps__seg_reserve() fixes (part p's bytes
 * are then written with ps__seg_pwrite_part()); ps__seg_add() appends a
 * sample (the initial load); ps__seg_plan_moves() decides which kept
 * samples leave sparse segments for it; ps__seg_finish() copies them,
 * writes the header, fsyncs (do_fsync) and renames it into place, pending
 * until ps__seg_gc() commits the entries that refer to it (and removes
 * the segments no entry refers to any more) or ps__seg_drop() removes it. */
int ps__seg_create(ps__dir_t *d, uint64_t key, int parts);
uint64_t ps__seg_reserve(ps__dir_t *d, int part, uint64_t len);
int ps__seg_pwrite_part(ps__dir_t *d, int part, uint64_t off, const void *buf, size_t len);
int ps__seg_add(ps__dir_t *d, uint64_t key, ps__entry_t *e, const void *data);
/* Kept samples of ent[n] (the next committed state) in segments that
 * would be less than half live get a place in the segment being written
 * (creating it as key `key` when none is open); their entries are updated. */
int ps__seg_plan_moves(ps__dir_t *d, ps__entry_t *ent, uint64_t n, uint64_t key);
int ps__seg_finish(ps__dir_t *d, int do_fsync);
void ps__seg_drop(ps__dir_t *d);
/* `mid` (may be NULL) is called once, when half of the unreferenced
 * segments are removed. */
int ps__seg_gc(ps__dir_t *d, const ps__entry_t *ent, uint64_t n, void (*mid)(void *), void *arg);
/* The table of the segments ent[n] refers to (a resumed state): each must
 * be a regular file with a sound header, long enough for its samples. */
int ps__seg_load(ps__dir_t *d, const ps__entry_t *ent, uint64_t n);
/* Payload bytes [off, off+len) of sample e, through the table's cached
 * descriptors (the exchange). */
int ps__seg_pread(ps__dir_t *d, const ps__entry_t *e, void *buf, size_t len, uint64_t off);
/* Sorted distinct segment keys of ent[n]; *keys malloc'd. */
int ps__seg_keys(const ps__entry_t *ent, uint64_t n, uint64_t **keys, size_t *nk);
void ps__seg_close_all(ps__dir_t *d);
/* Reads sample e whole and checks it against its checksum, opening its
 * segment for this read only (ps_read, verify). */
int ps__sample_read(const ps__dir_t *d, const ps__entry_t *e, void *buf, size_t cap);
int ps__manifest_write(const ps__dir_t *d, const ps__manifest_t *m, int do_fsync);
int ps__manifest_read(const ps__dir_t *d, uint64_t epoch, ps__manifest_t *m);
/* Parses the manifest open on fd (read from its start); `name` is for
 * messages. */
int ps__manifest_read_fd(int fd, const char *name, ps__manifest_t *m);
void ps__manifest_free(ps__manifest_t *m);
/* Epochs of the manifests present in the directory, ascending; *out malloc'd. */
int ps__manifest_list(const ps__dir_t *d, uint64_t **out, size_t *n);

int ps__cmp_entry(const void *a, const void *b);

/* Rewrites the directory store at root, written by m_old ranks, for m_new
 * ranks (restripe.c): the epoch every rank can resume, dealt to balanced
 * counts, swapped in atomically. Single-process: the caller's job holds no
 * lock of the store meanwhile. */
int ps__restripe(const char *root, int m_old, int m_new, uint64_t seed, uint64_t params, int do_fsync,
                 ps_hook_fn hook, void *hook_arg);
/* Removes what an interrupted ps__restripe() left beside the store. */
int ps__restripe_cleanup(const char *root);

#endif
