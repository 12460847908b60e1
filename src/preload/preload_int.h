/* libhetmem_preload internals shared by its files. */
#ifndef HETMEM_PRELOAD_INT_H
#define HETMEM_PRELOAD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/record_int.h"

#define HM_TLS __attribute__((tls_model("initial-exec")))

/* Real functions from dlsym(RTLD_NEXT). */
typedef struct {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void *);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
} hm__real_t;
extern hm__real_t hm__real;

/* Per-thread re-entry guard: set while the runtime itself runs, so that its
 * own allocations (jansson, zstd, dladdr...) are passed straight through. */
extern __thread int hm__guard HM_TLS;

/* Options, read once from the environment without allocating. */
typedef struct {
    int record;            /* HETMEM_SPOOL set */
    int events;            /* allocation, name and phase records wanted (HETMEM_EVENTS not 0) */
    int backend;           /* hm_backend_t, or -1 for no sampling */
    uint64_t period;       /* soft: ns between samples; perf: events per sample */
    uint64_t min_size;     /* track allocations of at least this many bytes */
    uint64_t spool_max;    /* HETMEM_SPOOL_MAX: most bytes of this process's spool */
    int depth;             /* call-stack frames hashed into a site id */
    int sig;               /* soft sampler signal */
    char spool_dir[256];
    char placement[256];   /* HETMEM_PLACEMENT */
    char capacity[256];    /* HETMEM_CAPACITY "dev=bytes,..." */
    char bind[64];         /* HETMEM_BIND: device for set_mempolicy */
    int null_handler;      /* HETMEM_SOFT_NULL: timers fire, nothing is recorded
                              (measures the interrupt floor) */
} hm__opts_t;
extern hm__opts_t hm__opt;

/* Writes a runtime diagnostic to stderr with write(2). */
void hm__pdiag(const char *fmt, ...) HM_PRINTF(1, 2);
/* Writes "hetmem: VAR=VALUE: why" (VAR: common/env.h's id) and ends the
 * process with status 1: a setting the runtime cannot apply is never
 * replaced by a default, and the program does not start. */
__attribute__((noreturn)) void hm__env_refuse(int id, const char *v, const char *why);

/* Event stream (collector.c): queued on the calling thread, drained by the
 * collector into the spool. Strings are copied (truncated to 80 bytes). */
void hm__ev_alloc(uint64_t addr, uint64_t size, uint64_t site);
void hm__ev_free(uint64_t addr);
void hm__ev_phase(int begin, const char *name);
void hm__ev_name(uint64_t addr, const char *name);
/* A record written straight to the spool (rare events: placement reports). */
void hm__spool_direct(uint16_t kind, uint32_t tid, uint64_t a, uint64_t b, uint64_t c, const char *payload);
uint32_t hm__tid(void);

/* Object table and placement (bind.c). */
void hm__bind_init(void);
/* Makes the program's global and static arrays objects (the rule of
 * hm__placement_globals): placed when a placement is in force, and
 * reported as allocation and name records when recording. Called once
 * the runtime is ready, before the program's constructors. */
void hm__bind_globals(void);
int hm__bind_active(void);
/* Called for every tracked allocation; returns the memory to hand out when
 * bind mode allocated it itself (page-aligned mmap), else NULL. */
void *hm__bind_alloc(size_t size, size_t align, int zero, uint64_t site);
/* Records a tracked object made by the real allocator. */
void hm__obj_add(void *p, size_t size, uint64_t site);
/* The allocating call's "file:line" of a site seen in this process, or NULL. */
const char *hm__site_source(uint64_t site);
/* The site id of the global or static array @p name at @p addr
 * (hm__global_site: hetmem sim's), its declaring line kept for
 * hm__site_source and its site record written, on first sight. */
uint64_t hm__site_global(uintptr_t addr, const char *name);
/* Removes a tracked object; returns 1 when it was tracked, and sets *own
 * when bind mode owns its memory (the caller must then hm__bind_release). */
int hm__obj_remove(void *p, int *own, size_t *size);
int hm__bind_owns(void *p, size_t *size);
void hm__bind_release(void *p, size_t size);
void hm__bind_fini(void);
void hm__bind_atfork_child(void);

/* ------------------------------------------------------------ thread state
 * (collector.c) */

#define HM_EVN 1024       /* events per thread ring */
#define HM_SOFTN 512      /* soft samples per thread ring */
#define HM_PAYLOAD 88

typedef struct {
    hm__spool_rec_t r;
    char payload[HM_PAYLOAD];
} hm__ev_t;

enum { HM_T_FREE = 0, HM_T_ACTIVE = 1, HM_T_DEAD = 2 };

typedef struct hm__thr {
    struct hm__thr *next;
    _Atomic int state;
    uint32_t tid;
    _Atomic uint64_t eh, et;        /* event ring head (thread) / tail (collector) */
    hm__ev_t ev[HM_EVN];
    _Atomic uint64_t sh, st;        /* soft sample ring */
    hm__soft_raw_t soft[HM_SOFTN];
    uint64_t soft_dropped, ev_dropped;
    uint64_t soft_faults;           /* page faults at the previous soft sample */
    int has_timer;
    timer_t timer;
    int nperf;
    int perf_fd[HM_REC_MAX_EVENTS];
    hm__perf_ring_t *ring[HM_REC_MAX_EVENTS];
} hm__thr_t;

/* Per-process runtime state. */
typedef struct {
    int ready;                  /* constructor finished */
    int fd;                     /* spool file */
    pid_t pid, pid_now;
    pthread_t collector;
    _Atomic int running, stop;
    _Atomic int wake;           /* futex word: a producer wants a drain */
    pthread_mutex_t drain_lock; /* one consumer at a time (collector or exec) */
    char buf[256 * 1024];
    size_t len;
    hm__rec_events_t ev;        /* perf backends */
    uint64_t sample_type;
    hm__soft_cache_t *soft;
    uint64_t samples, unresolved, lost;
    /* The spool's bound: bytes written or buffered, and the per-event
     * records not written once it was reached (counted, and reported in
     * the spool's last record). */
    uint64_t spool_bytes, over_recs, over_bytes;
    uintptr_t self_lo, self_hi; /* our own text, skipped in call stacks */
} hm__state_t;
extern hm__state_t hm__S;
extern _Atomic(hm__thr_t *) hm__threads;   /* every thread slot, never freed */
extern __thread hm__thr_t *hm__t_thr HM_TLS; /* the calling thread's slot */
extern pthread_key_t hm__thr_key;           /* destructor: hm__thr_exit */
extern pthread_mutex_t hm__direct_lock;     /* hm__spool_direct writers */

/* The calling thread's slot, created (and its sampler started) on first use. */
hm__thr_t *hm__thr_get(void);
void hm__thr_exit(void *slot);
void *hm__raw_map(size_t n);
void hm__tid_reset(void);
void hm__open_spool(void);
void hm__collector_start(void);
/* Stops the collector and writes everything out (at exit, _exit, exec). */
void hm__finish(int final);

/* Samplers (sampler.c). */
int hm__sampler_init(void);
void hm__sampler_start(hm__thr_t *t);
void hm__sampler_stop(hm__thr_t *t);

/* Bootstrap (boot.c): the real functions, and a static buffer for what
 * dlsym allocates before they are known. */
void hm__resolve(void);
extern int hm__resolving;
void *hm__boot_alloc(size_t n);
size_t hm__boot_size(const void *p);
int hm__is_boot(const void *p);
/* realloc of a bootstrap block: a new block from alloc holding what the
 * old one held, never more than the old block's own size. */
void *hm__boot_realloc(void *p, size_t n, void *(*alloc)(size_t));

/* fork child handler (process.c). */
void hm__atfork_child(void);

#define HM_EXPORT __attribute__((visibility("default")))

#endif
