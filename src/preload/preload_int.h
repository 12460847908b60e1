/* libhetmem_preload internals shared by its files. */
#ifndef HETMEM_PRELOAD_INT_H
#define HETMEM_PRELOAD_INT_H

#include <stdatomic.h>
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
    int backend;           /* hm_backend_t, or -1 for no sampling */
    uint64_t period;       /* soft: ns between samples; perf: events per sample */
    uint64_t min_size;     /* track allocations of at least this many bytes */
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

/* Event stream (preload.c): queued on the calling thread, drained by the
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
int hm__bind_active(void);
/* Called for every tracked allocation; returns the memory to hand out when
 * bind mode allocated it itself (page-aligned mmap), else NULL. */
void *hm__bind_alloc(size_t size, size_t align, int zero, uint64_t site);
/* Records a tracked object made by the real allocator. */
void hm__obj_add(void *p, size_t size, uint64_t site);
/* Removes a tracked object; returns 1 when it was tracked, and sets *own
 * when bind mode owns its memory (the caller must then hm__bind_release). */
int hm__obj_remove(void *p, int *own, size_t *size);
int hm__bind_owns(void *p, size_t *size);
void hm__bind_release(void *p, size_t size);
void hm__bind_fini(void);
void hm__bind_atfork_child(void);

#endif
