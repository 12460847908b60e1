/* libhetmem_preload.so: allocation interposer, event collector and
 * samplers, loaded with LD_PRELOAD by `hetmem record` and `hetmem run`.
 *
 * Rules this file lives by (as mimalloc's and the sanitizers' interposers):
 * - dlsym(RTLD_NEXT) may itself call calloc before we know the real one:
 *   serve that from a static bootstrap buffer that free() recognises;
 * - every thread carries an initial-exec TLS re-entry guard, so that memory
 *   the runtime allocates for itself never recurses into tracking (and no
 *   TLS access ever calls malloc through __tls_get_addr);
 * - options come from secure_getenv only (common/env.h); diagnostics go out with write(2);
 * - the signal handler only copies registers into a per-thread ring.
 */
#define _GNU_SOURCE
#include "preload/preload_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "common/env.h"
#include "hetmem/trace.h"
#include "os/os.h"

#define HM_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------- call sites */

typedef struct {
    uintptr_t pcs[16];
    int n, max;
    int all;   /* keep library frames too */
    int walked;
} bt_t;

static int own_frame(uintptr_t pc);

static _Unwind_Reason_Code bt_step(struct _Unwind_Context *ctx, void *arg)
{
    bt_t *b = arg;
    uintptr_t pc = _Unwind_GetIP(ctx);
    if (!pc)
        return _URC_END_OF_STACK;
    if (++b->walked > 64)
        return _URC_END_OF_STACK;
    if (b->all ? (pc >= hm__S.self_lo && pc < hm__S.self_hi) || hm__site_entry(pc) : !own_frame(pc))
        return _URC_NO_REASON; /* ours and the libraries' frames do not name the site */
    b->pcs[b->n++] = pc;
    return b->n >= b->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* Sites seen, and the source location of each ("file:line", or empty):
 * placement rules may name a site by it. A slot's site id is published
 * (release) after its source is written. */
#define SEEN 4096
static uint64_t seen[SEEN];
static char seen_src[SEEN][256];
static uint8_t seen_ready[SEEN];

const char *hm__site_source(uint64_t id)
{
    size_t h = (size_t)(id % SEEN);
    for (size_t i = 0; i < 16; i++) {
        size_t j = (h + i) % SEEN;
        uint64_t cur = __atomic_load_n(&seen[j], __ATOMIC_RELAXED);
        if (cur == id)
            return __atomic_load_n(&seen_ready[j], __ATOMIC_ACQUIRE) && seen_src[j][0] ? seen_src[j] : NULL;
        if (cur == 0)
            return NULL;
    }
    return NULL;
}

/* Whether a frame is the program's own: not ours, and not the allocator's
 * or the standard library's (hm__site_skip), whose frames would make
 * every std::vector one site. */
static int own_frame(uintptr_t pc)
{
    return !(pc >= hm__S.self_lo && pc < hm__S.self_hi) && !hm__site_skip(pc);
}

/* Claims the slot of a site seen for the first time: its index, or -1
 * when it was seen already (or the table is full around it). */
static int seen_claim(uint64_t id)
{
    size_t h = (size_t)(id % SEEN);
    for (size_t i = 0; i < 16; i++) {
        size_t j = (h + i) % SEEN;
        uint64_t cur = __atomic_load_n(&seen[j], __ATOMIC_RELAXED);
        if (cur == id)
            return -1;
        if (cur == 0 && __atomic_compare_exchange_n(&seen[j], &cur, id, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return (int)j;
    }
    return -1;
}

/* Publishes a claimed site's source and writes its record (frames, one a
 * line) once. */
static void seen_publish(int j, uint64_t id, const char *frames)
{
    if (!hm__frame_source(frames, seen_src[j], sizeof seen_src[j]))
        seen_src[j][0] = 0;
    __atomic_store_n(&seen_ready[j], 1, __ATOMIC_RELEASE);
    hm__spool_direct(HM_REC_SITE, hm__tid(), id, 0, 0, frames);
}

/* The site of the allocation being made: the program's own frames above
 * the allocator (hm__site_id() takes the first hm__opt.depth links of
 * their source chain), the same id hetmem sim gives it. */
static uint64_t site_now(void)
{
    bt_t b = {.n = 0, .max = hm__opt.depth};
    _Unwind_Backtrace(bt_step, &b);
    if (b.n == 0) { /* only library frames: the innermost one past the allocator, as it is */
        b.all = 1;
        b.walked = 0;
        b.max = 1;
        _Unwind_Backtrace(bt_step, &b);
    }
    uint64_t id = hm__site_id(b.pcs, b.n, hm__opt.depth);
    /* First sighting of a site: its frames symbolized once. */
    int j = seen_claim(id);
    if (j < 0)
        return id;
    char frames[2048];
    hm__site_frames(b.pcs, b.n, hm__opt.depth, frames, sizeof frames);
    seen_publish(j, id, frames);
    return id;
}

uint64_t hm__site_global(uintptr_t addr, const char *name)
{
    uint64_t id = hm__global_site(name);
    int j = seen_claim(id);
    if (j >= 0) {
        char frames[1024];
        if (hm__global_frame(addr, name, frames, sizeof frames) < 0)
            frames[0] = '\0';
        seen_publish(j, id, frames);
    }
    return id;
}

/* Tracking of a new object; the guard is up. */
static void track(void *p, size_t size)
{
    if (!p)
        return;
    uint64_t site = site_now();
    hm__obj_add(p, size, site);
}

/* ------------------------------------------------------------- options */

/* A variable the runtime cannot use: one line, as the CLI words an error,
 * and the program is not started. Going on with a default would record or
 * place otherwise than asked, with nothing to show for it. */
__attribute__((noreturn)) void hm__env_refuse(int id, const char *v, const char *why)
{
    /* One writev: the line whole, however long the value, and nothing
     * allocated. */
    const char *name = hm__env_name(id);
    struct iovec iov[] = {{(void *)"hetmem: ", 8}, {(void *)name, strlen(name)}, {(void *)"=", 1},
                          {(void *)v, strlen(v)}, {(void *)": ", 2}, {(void *)why, strlen(why)}, {(void *)"\n", 1}};
    ssize_t r = writev(2, iov, (int)(sizeof iov / sizeof iov[0]));
    (void)r;
    _exit(1);
}

/* An integer variable in [min, max] (hm__parse_u64_in), or dflt when unset. */
static uint64_t env_int(int id, uint64_t min, uint64_t max, uint64_t dflt)
{
    const char *v = hm__env_get(id);
    uint64_t x;
    char why[96];
    if (!v)
        return dflt;
    if (hm__parse_u64_in(v, min, max, &x) != 0)
        hm__env_refuse(id, v, hm__range_why(why, sizeof why, min, max));
    return x;
}

static void env_str(int id, char *dst, size_t len)
{
    const char *v = hm__env_get(id);
    dst[0] = '\0';
    if (!v)
        return;
    size_t n = strnlen(v, len);
    if (n == len) /* cut short it would name another file or device */
        hm__env_refuse(id, v, len == 256 ? "longer than 255 bytes" : "too long");
    memcpy(dst, v, n);
    dst[n] = '\0';
}

/* HETMEM_CAPACITY: "DEV=SIZE" items joined by commas, each size
 * hm__parse_size's (hetmem run checks the names against the placement's
 * devices before the run). */
static void check_capacity(const char *v)
{
    char why[160];
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        char size[64];
        size_t sn = eq ? n - (size_t)(eq + 1 - p) : 0;
        if (!eq || eq == p || sn == 0 || sn >= sizeof size) {
            snprintf(why, sizeof why, "'%.*s' is not DEV=SIZE", (int)(n < 64 ? n : 64), p);
            hm__env_refuse(HM_ENV_CAPACITY, v, why);
        }
        memcpy(size, eq + 1, sn);
        size[sn] = '\0';
        uint64_t x;
        if (hm__parse_size(size, &x) != 0) {
            snprintf(why, sizeof why, "'%s' is not a size (%s)", size, HM_SIZE_GRAMMAR);
            hm__env_refuse(HM_ENV_CAPACITY, v, why);
        }
        p += n + (end ? 1 : 0);
    }
}

static void read_opts(void)
{
    /* In a secure-execution process (setuid, file capabilities) the
     * variables read as unset: the runtime stays inactive rather than
     * write where an unprivileged caller said. */
    if (getauxval(AT_SECURE) && getenv(hm__env_name(HM_ENV_SPOOL)))
        hm__pdiag("secure-execution process: not recording it");
    env_str(HM_ENV_SPOOL, hm__opt.spool_dir, sizeof hm__opt.spool_dir);
    hm__opt.record = hm__opt.spool_dir[0] != '\0';
    hm__opt.backend = -1;
    const char *b = hm__env_get(HM_ENV_BACKEND);
    hm_backend_t be;
    if (b && b[0] && hm_backend_parse(b, &be) == 0)
        hm__opt.backend = (int)be;
    else if (b && !strcmp(b, "perf-sw"))
        hm__opt.backend = HM__BACKEND_PERFSW;
    else if (b && b[0])
        hm__env_refuse(HM_ENV_BACKEND, b, "not a sampling backend (soft, pebs, ibs, spe, perf-sw; empty for none)");
    /* soft and perf-sw: nanoseconds; the others: events, the kernel's
     * limit. Either way a trace holds at most 2^63-1. Without a backend
     * nothing samples, and 0 says so (hetmem record -b none). */
    int timed = hm__opt.backend == HM_BACKEND_SOFT || hm__opt.backend == HM__BACKEND_PERFSW;
    hm__opt.period = env_int(HM_ENV_PERIOD, hm__opt.backend >= 0 ? 1 : 0, HM_TRACE_PERIOD_MAX, timed ? 1000000 : 4000);
    const char *ms = hm__env_get(HM_ENV_MIN_SIZE);
    hm__opt.min_size = HM_MIN_OBJECT_SIZE;
    if (ms && hm__parse_size(ms, &hm__opt.min_size) != 0) {
        char why[160];
        snprintf(why, sizeof why, "not a size (%s)", HM_SIZE_GRAMMAR);
        hm__env_refuse(HM_ENV_MIN_SIZE, ms, why);
    }
    const char *sm = hm__env_get(HM_ENV_SPOOL_MAX);
    hm__opt.spool_max = HM_SPOOL_MAX_DEFAULT;
    if (sm && (hm__parse_size(sm, &hm__opt.spool_max) != 0 || hm__opt.spool_max < HM_SPOOL_MIN))
        hm__env_refuse(HM_ENV_SPOOL_MAX, sm, "not a size of at least 64K (" HM_SIZE_GRAMMAR ")");
    hm__opt.events = (int)env_int(HM_ENV_EVENTS, 0, 1, 1);
    hm__opt.depth = (int)env_int(HM_ENV_DEPTH, 1, HM_SITE_DEPTH_MAX, HM_SITE_DEPTH);
    int off = 4;
    const char *so = hm__env_get(HM_ENV_SIGNAL_OFFSET);
    if (so && hm__signal_offset(so, &off) != 0) {
        char why[96];
        snprintf(why, sizeof why, "not an offset in 0..%d (SIGRTMIN+N must be a real-time signal)",
                 SIGRTMAX - SIGRTMIN);
        hm__env_refuse(HM_ENV_SIGNAL_OFFSET, so, why);
    }
    hm__opt.sig = SIGRTMIN + off;
    hm__opt.null_handler = hm__env_get(HM_ENV_SOFT_NULL) != NULL;
    env_str(HM_ENV_PLACEMENT, hm__opt.placement, sizeof hm__opt.placement);
    env_str(HM_ENV_CAPACITY, hm__opt.capacity, sizeof hm__opt.capacity);
    check_capacity(hm__opt.capacity);
    env_str(HM_ENV_BIND, hm__opt.bind, sizeof hm__opt.bind);
}

static int self_range(struct dl_phdr_info *info, size_t sz, void *arg)
{
    (void)sz;
    uintptr_t me = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (me >= lo && me < hi) {
            hm__S.self_lo = lo;
            hm__S.self_hi = hi;
            return 1;
        }
    }
    return 0;
}

__attribute__((constructor)) static void hm_preload_init(void)
{
    hm__guard++;
    hm__resolve();
    read_opts();
    if (hm__log_init() != 0)
        hm__env_refuse(HM_ENV_LOG, hm__env_get(HM_ENV_LOG), "not a log level (" HM_LOG_LEVELS ")");
    dl_iterate_phdr(self_range, (void *)(uintptr_t)&hm_preload_init);
    pthread_key_create(&hm__thr_key, hm__thr_exit);
    hm__S.pid = hm__S.pid_now = getpid();
    if (hm__opt.record) {
        hm__open_spool();
        if (hm__sampler_init() != 0 && hm__opt.backend >= 0)
            hm__pdiag("sampler setup failed; recording allocations only");
    }
    hm__bind_init();
    pthread_atfork(NULL, NULL, hm__atfork_child);
    hm__S.ready = 1;
    hm__collector_start();
    hm__thr_get(); /* the main thread: starts its sampler */
    hm__bind_globals();
    hm__guard--;
}

__attribute__((destructor)) static void hm_preload_fini(void)
{
    hm__guard++;
    if (hm__t_thr)
        hm__sampler_stop(hm__t_thr);
    hm__bind_fini();
    hm__finish(1);
    hm__guard--;
}

/* ------------------------------------------------------------- allocator */

#define TRACKED(n) (HM_UNLIKELY((n) >= hm__opt.min_size) && hm__S.ready && !hm__guard)

static void *alloc_common(size_t size, size_t align, int zero, void *(*real)(size_t))
{
    if (TRACKED(size)) {
        hm__guard++;
        uint64_t site = site_now();
        void *p = hm__bind_alloc(size, align, zero, site);
        if (!p) {
            p = real ? real(size) : NULL;
            if (p) {
                if (zero)
                    memset(p, 0, size);
                hm__obj_add(p, size, site);
            }
        }
        hm__guard--;
        return p;
    }
    return NULL;
}

HM_EXPORT void *malloc(size_t n)
{
    if (HM_UNLIKELY(!hm__real.malloc)) {
        hm__resolve();
        if (!hm__real.malloc)
            return hm__boot_alloc(n);
    }
    if (TRACKED(n))
        return alloc_common(n, 16, 0, hm__real.malloc);
    return hm__real.malloc(n);
}

HM_EXPORT void *calloc(size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (HM_UNLIKELY(!hm__real.calloc)) {
        /* dlsym's own calloc while we resolve: the bootstrap buffer. */
        if (hm__resolving)
            return hm__boot_alloc(total);
        hm__resolve();
        if (!hm__real.calloc)
            return hm__boot_alloc(total);
    }
    if (TRACKED(total)) {
        hm__guard++;
        uint64_t site = site_now();
        void *p = hm__bind_alloc(total, 16, 1, site);
        if (!p) {
            p = hm__real.calloc(n, sz);
            if (p)
                hm__obj_add(p, total, site);
        }
        hm__guard--;
        return p;
    }
    return hm__real.calloc(n, sz);
}

/* Releases p whatever made it; returns its tracked size or 0. */
static void release(void *p)
{
    if (!p || hm__is_boot(p))
        return;
    size_t sz;
    if (hm__S.ready && !hm__guard) {
        hm__guard++;
        int own = 0;
        if (hm__bind_owns(p, &sz)) {
            hm__obj_remove(p, &own, &sz);
            hm__bind_release(p, sz);
            hm__guard--;
            return;
        }
        if (hm__real.malloc_usable_size(p) >= hm__opt.min_size)
            hm__obj_remove(p, &own, &sz);
        hm__guard--;
    } else if (hm__S.ready && hm__bind_owns(p, &sz)) {
        /* The runtime never frees an app object, but a guard-time free of
         * bind memory must still not reach glibc. */
        hm__bind_release(p, sz);
        return;
    }
    hm__real.free(p);
}

HM_EXPORT void free(void *p)
{
    if (!p || hm__is_boot(p))
        return;
    if (HM_UNLIKELY(!hm__real.free)) {
        hm__resolve();
        if (!hm__real.free)
            return; /* cannot happen after resolve; leak rather than crash */
    }
    release(p);
}

HM_EXPORT void cfree(void *p) { free(p); }

HM_EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (hm__is_boot(p))
        return hm__boot_size(p);
    size_t sz;
    if (hm__S.ready && hm__bind_owns(p, &sz))
        return sz;
    hm__resolve();
    return hm__real.malloc_usable_size(p);
}

HM_EXPORT void *realloc(void *p, size_t n)
{
    if (HM_UNLIKELY(!hm__real.realloc)) {
        hm__resolve();
        if (!hm__real.realloc)
            return NULL;
    }
    if (!p)
        return malloc(n);
    if (hm__is_boot(p))
        return hm__boot_realloc(p, n, malloc);
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t old;
    int owned = hm__S.ready && hm__bind_owns(p, &old);
    int was_tracked = owned || (hm__S.ready && hm__real.malloc_usable_size(p) >= hm__opt.min_size);
    if (!owned && !TRACKED(n) && !was_tracked)
        return hm__real.realloc(p, n);
    if (hm__guard)
        return owned ? NULL : hm__real.realloc(p, n);
    /* A tracked object changes identity: free event for the old, alloc
     * event (new site) for the new. */
    if (!owned && !TRACKED(n)) {
        hm__guard++;
        int own;
        size_t sz;
        hm__obj_remove(p, &own, &sz);
        hm__guard--;
        return hm__real.realloc(p, n);
    }
    if (!owned && !hm__bind_active()) {
        hm__guard++;
        int own;
        size_t sz;
        hm__obj_remove(p, &own, &sz);
        void *q = hm__real.realloc(p, n);
        if (q)
            track(q, n);
        else
            hm__obj_add(p, sz, 0);
        hm__guard--;
        return q;
    }
    size_t cur = owned ? old : hm__real.malloc_usable_size(p);
    void *q = malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, cur < n ? cur : n);
    free(p);
    return q;
}

HM_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    hm__resolve();
    if (align > 4096 || !TRACKED(n))
        return hm__real.posix_memalign(out, align, n);
    hm__guard++;
    uint64_t site = site_now();
    void *p = hm__bind_alloc(n, align, 0, site);
    int r = 0;
    if (!p) {
        r = hm__real.posix_memalign(&p, align, n);
        if (!r)
            hm__obj_add(p, n, site);
    }
    hm__guard--;
    if (!r)
        *out = p;
    return r;
}

static void *aligned_common(size_t align, size_t n, void *(*real)(size_t, size_t))
{
    hm__resolve();
    if (align > 4096 || !TRACKED(n))
        return real(align, n);
    hm__guard++;
    uint64_t site = site_now();
    void *p = hm__bind_alloc(n, align, 0, site);
    if (!p) {
        p = real(align, n);
        if (p)
            hm__obj_add(p, n, site);
    }
    hm__guard--;
    return p;
}

HM_EXPORT void *aligned_alloc(size_t align, size_t n) { return aligned_common(align, n, hm__real.aligned_alloc ? hm__real.aligned_alloc : (hm__resolve(), hm__real.aligned_alloc)); }
HM_EXPORT void *memalign(size_t align, size_t n) { return aligned_common(align, n, hm__real.memalign ? hm__real.memalign : (hm__resolve(), hm__real.memalign)); }

HM_EXPORT void *valloc(size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    return memalign((size_t)pg, n);
}

HM_EXPORT void *pvalloc(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(pg, (n + pg - 1) & ~(pg - 1));
}

/* Anonymous mappings the program makes itself (glibc's own mmap calls for
 * large mallocs go through internal symbols and are seen as malloc). */
HM_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (HM_UNLIKELY(!hm__real.mmap)) {
        hm__resolve();
        if (!hm__real.mmap)
            return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    }
    void *p = hm__real.mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && !(flags & MAP_FIXED) && TRACKED(len)) {
        hm__guard++;
        track(p, len);
        hm__guard--;
    }
    return p;
}

HM_EXPORT int munmap(void *addr, size_t len)
{
    if (HM_UNLIKELY(!hm__real.munmap)) {
        hm__resolve();
        if (!hm__real.munmap)
            return (int)syscall(SYS_munmap, addr, len);
    }
    if (hm__S.ready && !hm__guard && len >= hm__opt.min_size) {
        hm__guard++;
        int own;
        size_t sz;
        hm__obj_remove(addr, &own, &sz);
        hm__guard--;
    }
    return hm__real.munmap(addr, len);
}

/* operator new/delete are not interposed: libstdc++ implements them with
 * malloc/free, which are, so C++ objects are tracked with their caller's
 * frames and std::bad_alloc semantics stay untouched. */
