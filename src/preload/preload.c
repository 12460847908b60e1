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
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "common/env.h"
#include "hetmem/trace.h"
#include "os/os.h"

#define EXPORT __attribute__((visibility("default")))

hm__real_t hm__real;
hm__opts_t hm__opt;
__thread int hm__guard HM_TLS;

/* ------------------------------------------------------------ bootstrap */

static char boot_buf[64 * 1024] __attribute__((aligned(64)));
static size_t boot_used;

/* Each bootstrap block is preceded by 16 bytes holding its size, so that
 * realloc copies what the block holds and no more. */
static void *boot_alloc(size_t n)
{
    if (n > sizeof boot_buf)
        return NULL;
    size_t need = 16 + ((n + 15) & ~(size_t)15);
    size_t at = __atomic_fetch_add(&boot_used, need, __ATOMIC_RELAXED);
    if (at + need > sizeof boot_buf)
        return NULL;
    memcpy(boot_buf + at, &n, sizeof n);
    return boot_buf + at + 16; /* static storage: already zero */
}

static size_t boot_size(const void *p)
{
    size_t n;
    memcpy(&n, (const char *)p - 16, sizeof n);
    return n;
}

static int is_boot(const void *p)
{
    return (const char *)p >= boot_buf && (const char *)p < boot_buf + sizeof boot_buf;
}

static int resolving;

static void resolve(void)
{
    if (hm__real.malloc || resolving)
        return;
    resolving = 1;
#define R(name) hm__real.name = (__typeof__(hm__real.name))dlsym(RTLD_NEXT, #name)
    R(calloc);
    R(malloc);
    R(realloc);
    R(free);
    R(posix_memalign);
    R(aligned_alloc);
    R(memalign);
    R(valloc);
    R(pvalloc);
    R(malloc_usable_size);
    R(mmap);
    R(munmap);
#undef R
    resolving = 0;
}

void hm__pdiag(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "hetmem-preload[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w HM_UNUSED = write(2, buf, len);
}

static __thread uint32_t tid_cache HM_TLS;

uint32_t hm__tid(void)
{
    if (!tid_cache)
        tid_cache = (uint32_t)syscall(SYS_gettid);
    return tid_cache;
}

/* After fork the child's thread has a new tid. */
static void tid_reset(void) { tid_cache = 0; }

/* --------------------------------------------------------- thread state */

#define EVN 1024       /* events per thread ring */
#define SOFTN 512      /* soft samples per thread ring */
#define PAYLOAD 88

typedef struct {
    hm__spool_rec_t r;
    char payload[PAYLOAD];
} ev_t;

enum { T_FREE = 0, T_ACTIVE = 1, T_DEAD = 2 };

typedef struct thr {
    struct thr *next;
    _Atomic int state;
    uint32_t tid;
    _Atomic uint64_t eh, et;        /* event ring head (thread) / tail (collector) */
    ev_t ev[EVN];
    _Atomic uint64_t sh, st;        /* soft sample ring */
    hm__soft_raw_t soft[SOFTN];
    uint64_t soft_dropped, ev_dropped;
    int has_timer;
    timer_t timer;
    int nperf;
    int perf_fd[HM_REC_MAX_EVENTS];
    hm__perf_ring_t *ring[HM_REC_MAX_EVENTS];
} thr_t;

static _Atomic(thr_t *) threads;
static __thread thr_t *t_thr HM_TLS;
static pthread_key_t thr_key;

static struct {
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
    uintptr_t self_lo, self_hi; /* our own text, skipped in call stacks */
} S = {.fd = -1, .drain_lock = PTHREAD_MUTEX_INITIALIZER};

static void *raw_map(size_t n)
{
    void *p = hm__real.mmap ? hm__real.mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                            : mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void sampler_start(thr_t *t);
static void sampler_stop(thr_t *t);

/* The calling thread's state, created on first use. Reuses slots of
 * threads that exited once the collector has drained them. */
static thr_t *thr_get(void)
{
    thr_t *t = t_thr;
    if (HM_LIKELY(t))
        return t;
    if (!S.ready)
        return NULL;
    for (thr_t *x = atomic_load(&threads); x; x = x->next) {
        int fr = T_FREE;
        if (atomic_compare_exchange_strong(&x->state, &fr, T_ACTIVE)) {
            t = x;
            break;
        }
    }
    if (!t) {
        t = raw_map(sizeof *t);
        if (!t)
            return NULL;
        atomic_store(&t->state, T_ACTIVE);
        thr_t *head = atomic_load(&threads);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&threads, &head, t));
    }
    t->tid = hm__tid();
    t->soft_dropped = t->ev_dropped = 0;
    t_thr = t;
    pthread_setspecific(thr_key, t);
    sampler_start(t);
    return t;
}

/* pthread key destructor: runs at pthread_exit and on return from the
 * start routine, so the timer never outlives its thread. */
static void thr_exit(void *p)
{
    thr_t *t = p;
    int g = hm__guard;
    hm__guard = 1;
    sampler_stop(t);
    t_thr = NULL;
    atomic_store(&t->state, T_DEAD);
    hm__guard = g;
}

/* ------------------------------------------------------------- events */

static void ev_push(uint16_t kind, uint64_t a, uint64_t b, uint64_t c, const char *s)
{
    if (!hm__opt.record)
        return;
    thr_t *t = thr_get();
    if (!t)
        return;
    uint64_t h = atomic_load_explicit(&t->eh, memory_order_relaxed);
    /* Allocation events must not be lost: wait for the collector (it never
     * waits on us). Only when it is gone (exiting) do we drop and count. */
    for (int spin = 0; h - atomic_load_explicit(&t->et, memory_order_acquire) >= EVN; spin++) {
        if (!atomic_load(&S.running) || spin > 100000) {
            t->ev_dropped++;
            return;
        }
        sched_yield();
    }
    /* Half full: wake the collector early rather than wait for its tick. */
    if (h - atomic_load_explicit(&t->et, memory_order_relaxed) == EVN / 2 && atomic_load(&S.running)) {
        atomic_store(&S.wake, 1);
        syscall(SYS_futex, &S.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
    ev_t *e = &t->ev[h % EVN];
    e->r.kind = kind;
    e->r.tid = t->tid;
    e->r.time = hm__now_ns();
    e->r.a = a;
    e->r.b = b;
    e->r.c = c;
    e->r.len = 0;
    if (s) {
        size_t n = strnlen(s, PAYLOAD - 1);
        memcpy(e->payload, s, n);
        e->payload[n] = '\0';
        e->r.len = (uint16_t)((n + 1 + 7) & ~(size_t)7);
    }
    atomic_store_explicit(&t->eh, h + 1, memory_order_release);
}

void hm__ev_alloc(uint64_t addr, uint64_t size, uint64_t site) { ev_push(HM_REC_ALLOC, addr, size, site, NULL); }
void hm__ev_free(uint64_t addr) { ev_push(HM_REC_FREE, addr, 0, 0, NULL); }
void hm__ev_phase(int begin, const char *name) { ev_push(begin ? HM_REC_PHASE_BEGIN : HM_REC_PHASE_END, 0, 0, 0, name); }
void hm__ev_name(uint64_t addr, const char *name) { ev_push(HM_REC_NAME, addr, 0, 0, name); }

/* ------------------------------------------------------------- spool */

static void spool_flush(void)
{
    size_t off = 0;
    while (S.fd >= 0 && off < S.len) {
        ssize_t w = write(S.fd, S.buf + off, S.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    S.len = 0;
}

static void spool_put(const hm__spool_rec_t *r, const void *payload)
{
    size_t need = sizeof *r + r->len;
    if (S.len + need > sizeof S.buf)
        spool_flush();
    memcpy(S.buf + S.len, r, sizeof *r);
    if (r->len) {
        memset(S.buf + S.len + sizeof *r, 0, r->len);
        /* Payloads are strings: always leave their terminator. */
        memcpy(S.buf + S.len + sizeof *r, payload, strnlen(payload, r->len - 1u));
    }
    S.len += need;
}

static pthread_mutex_t direct_lock = PTHREAD_MUTEX_INITIALIZER;

void hm__spool_direct(uint16_t kind, uint32_t tid, uint64_t a, uint64_t b, uint64_t c, const char *payload)
{
    if (S.fd < 0)
        return;
    hm__spool_rec_t r = {kind, 0, tid, hm__now_ns(), a, b, c};
    size_t n = payload ? strlen(payload) : 0;
    if (n > 4000)
        n = 4000;
    if (payload)
        r.len = (uint16_t)((n + 1 + 7) & ~(size_t)7);
    pthread_mutex_lock(&S.drain_lock);
    pthread_mutex_lock(&direct_lock);
    spool_put(&r, payload ? payload : "");
    pthread_mutex_unlock(&direct_lock);
    pthread_mutex_unlock(&S.drain_lock);
}

static void open_spool(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%d-%llu.spool", hm__opt.spool_dir, (int)getpid(),
             (unsigned long long)hm__now_ns());
    S.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (S.fd < 0) {
        hm__pdiag("cannot create spool %s: %s; recording off in this process", path, strerror(errno));
        hm__opt.record = 0;
        return;
    }
    S.len = 0;
    memcpy(S.buf, HM_SPOOL_MAGIC, 8);
    S.len = 8;
    char exe[256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    hm__spool_rec_t r = {HM_SPOOL_PROC, 0, hm__tid(), hm__now_ns(), (uint64_t)getpid(), (uint64_t)getppid(), 0};
    r.len = (uint16_t)((strlen(exe) + 1 + 7) & ~(size_t)7);
    spool_put(&r, exe);
}

/* ------------------------------------------------------------- collector */

static void perf_cb(void *ctx, const hm_perf_sample_t *s)
{
    (void)ctx;
    int acc;
    uint16_t ds = hm_perf_dsrc(s->data_src, 0, &acc);
    hm__spool_rec_t r = {HM_REC_SAMPLE, 0, s->tid, s->time, s->addr, s->ip,
                         (uint64_t)(uint32_t)s->weight << 32 | (uint64_t)ds << 8 | (uint64_t)(acc < 0 ? 0 : acc)};
    spool_put(&r, NULL);
    S.samples++;
}

static void drain_thread(thr_t *t)
{
    uint64_t h = atomic_load_explicit(&t->eh, memory_order_acquire);
    for (uint64_t i = atomic_load_explicit(&t->et, memory_order_relaxed); i < h; i++) {
        ev_t *e = &t->ev[i % EVN];
        spool_put(&e->r, e->payload);
    }
    atomic_store_explicit(&t->et, h, memory_order_release);

    h = atomic_load_explicit(&t->sh, memory_order_acquire);
    for (uint64_t i = atomic_load_explicit(&t->st, memory_order_relaxed); i < h; i++) {
        const hm__soft_raw_t *raw = &t->soft[i % SOFTN];
        uint64_t addr = 0, ip = hm__arch_raw_pc(raw);
        int acc = HM_ACCESS_LOAD;
        int ok = S.soft && hm__soft_resolve(S.soft, raw, &addr, &ip, &acc);
        if (!ok) {
            S.unresolved++;
            addr = 0;
        }
        /* Unresolved samples stay in the trace with addr 0: they are time
         * spent outside data accesses, and dropping them would skew shares. */
        hm__spool_rec_t r = {HM_REC_SAMPLE, 0, raw->tid, raw->time, addr, ip,
                             (uint64_t)HM_DSRC_UNKNOWN << 8 | (uint64_t)(acc < 0 ? 0 : acc)};
        spool_put(&r, NULL);
        S.samples++;
    }
    atomic_store_explicit(&t->st, h, memory_order_release);
    S.lost += t->soft_dropped;
    t->soft_dropped = 0;
    if (t->ev_dropped) {
        hm__spool_rec_t r = {HM_SPOOL_ERROR, 0, t->tid, hm__now_ns(), t->ev_dropped, 0, 0};
        const char *m = "allocation events dropped (ring full at exit)";
        r.len = (uint16_t)((strlen(m) + 1 + 7) & ~(size_t)7);
        spool_put(&r, m);
        t->ev_dropped = 0;
    }

    for (int k = 0; k < t->nperf; k++)
        if (t->ring[k]) {
            hm__perf_ring_read(t->ring[k], S.sample_type, perf_cb, NULL);
        }
}

static void drain_all(int final)
{
    for (thr_t *t = atomic_load(&threads); t; t = t->next) {
        int st = atomic_load(&t->state);
        if (st == T_FREE)
            continue;
        drain_thread(t);
        if (st == T_DEAD || final) {
            for (int k = 0; k < t->nperf; k++) {
                if (t->ring[k]) {
                    S.lost += t->ring[k]->stats.lost;
                    hm__perf_ring_unmap(t->ring[k]);
                    hm__real.munmap(t->ring[k], sizeof *t->ring[k]);
                    t->ring[k] = NULL;
                }
                if (t->perf_fd[k] >= 0)
                    close(t->perf_fd[k]);
                t->perf_fd[k] = -1;
            }
            t->nperf = 0;
            if (st == T_DEAD) {
                atomic_store(&t->et, 0);
                atomic_store(&t->eh, 0);
                atomic_store(&t->st, 0);
                atomic_store(&t->sh, 0);
                atomic_store(&t->state, T_FREE);
            }
        }
    }
}

static void *collector(void *arg)
{
    (void)arg;
    hm__guard = 1; /* everything this thread allocates is the runtime's */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* The tick is short enough that a thread's sample ring (SOFTN) cannot
     * fill at 10 kHz, and long enough that the wakeups themselves stay
     * cheap: every timer interrupt costs tens of microseconds in a VM. */
    long tick_ns = hm__opt.backend == HM_BACKEND_SOFT
        ? (long)(hm__opt.period * (SOFTN / 4) < 20000000 ? hm__opt.period * (SOFTN / 4) : 20000000)
        : 20000000;
    while (!atomic_load(&S.stop)) {
        struct timespec ts = {0, tick_ns};
        if (!atomic_exchange(&S.wake, 0))
            syscall(SYS_futex, &S.wake, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
        pthread_mutex_lock(&S.drain_lock);
        drain_all(0);
        /* Written every round: a process killed by a signal loses at most
         * one tick; _exit and exec flush first. */
        if (S.len > 0)
            spool_flush();
        pthread_mutex_unlock(&S.drain_lock);
    }
    return NULL;
}

static void collector_start(void)
{
    if (!hm__opt.record)
        return;
    atomic_store(&S.stop, 0);
    atomic_store(&S.wake, 0);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 * 1024);
    hm__guard++;
    /* The collector itself is not sampled: the real pthread_create is used
     * and the thread never calls thr_get(). */
    int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
        (__typeof__(real_create))dlsym(RTLD_NEXT, "pthread_create");
    int rc = real_create ? real_create(&S.collector, &a, collector, NULL) : ENOSYS;
    hm__guard--;
    pthread_attr_destroy(&a);
    if (rc) {
        hm__pdiag("cannot start the collector thread: %s", strerror(rc));
        return;
    }
    atomic_store(&S.running, 1);
}

static void write_stats(void)
{
    hm__spool_rec_t r = {HM_SPOOL_STATS, 0, hm__tid(), hm__now_ns(), S.lost, S.samples, S.unresolved};
    spool_put(&r, NULL);
    if (S.soft) {
        const hm__soft_stats_t *st = hm__soft_cache_stats(S.soft);
        char m[160];
        snprintf(m, sizeof m, "soft: back %llu at %llu fwd %llu none %llu nofunc %llu vsib %llu",
                 (unsigned long long)st->back, (unsigned long long)st->at, (unsigned long long)st->fwd,
                 (unsigned long long)st->none, (unsigned long long)st->nofunc, (unsigned long long)st->vsib);
        hm__spool_rec_t q = {HM_SPOOL_STATS + 10, 0, hm__tid(), hm__now_ns(), 0, 0, 0};
        q.len = (uint16_t)((strlen(m) + 1 + 7) & ~(size_t)7);
        spool_put(&q, m);
    }
}

/* Stops the collector and writes everything out. Called at exit and
 * before exec. */
static void finish(int final)
{
    if (!hm__opt.record || S.fd < 0)
        return;
    hm__guard++;
    /* Bounded waits: _exit may come from a signal handler, or from a thread
     * that interrupted the lock's holder; losing the last tick of data is
     * better than never exiting. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    if (atomic_load(&S.running)) {
        atomic_store(&S.stop, 1);
        atomic_store(&S.wake, 1);
        syscall(SYS_futex, &S.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        if (pthread_timedjoin_np(S.collector, NULL, &dl) != 0) {
            hm__pdiag("collector did not stop; the last samples are lost");
            hm__guard--;
            return;
        }
        atomic_store(&S.running, 0);
    }
    if (pthread_mutex_timedlock(&S.drain_lock, &dl) != 0) {
        hm__pdiag("spool busy at exit; the last samples are lost");
        hm__guard--;
        return;
    }
    drain_all(final);
    if (final)
        write_stats();
    spool_flush();
    pthread_mutex_unlock(&S.drain_lock);
    hm__guard--;
}

/* ------------------------------------------------------------- samplers */

#define SOFT_MAGIC 0x68746d73

static void on_sample(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved = errno;
    thr_t *t = t_thr;
    if (hm__opt.null_handler)
        goto out;
    /* Only our own timer, and only for the thread it belongs to: a stray
     * signal must never make two producers write one ring. */
    if (!t || si->si_code != SI_TIMER || si->si_value.sival_ptr != t)
        goto out;
    uint64_t h = atomic_load_explicit(&t->sh, memory_order_relaxed);
    if (h - atomic_load_explicit(&t->st, memory_order_acquire) >= SOFTN) {
        t->soft_dropped++;
        goto out;
    }
    hm__soft_raw_t *r = &t->soft[h % SOFTN];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->time = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    hm__arch_save_context(r, ucv);
    r->tid = t->tid;
    atomic_store_explicit(&t->sh, h + 1, memory_order_release);
out:
    errno = saved;
}

static void sampler_start(thr_t *t)
{
    t->has_timer = 0;
    t->nperf = 0;
    if (!hm__opt.record || hm__opt.backend < 0)
        return;
    if (hm__opt.backend == HM_BACKEND_SOFT) {
        struct sigevent se;
        memset(&se, 0, sizeof se);
        se.sigev_notify = SIGEV_THREAD_ID;
        se.sigev_signo = hm__opt.sig;
        se.sigev_value.sival_ptr = t;
        se._sigev_un._tid = (pid_t)t->tid;
        if (timer_create(CLOCK_MONOTONIC, &se, &t->timer) != 0)
            return;
        /* A per-thread random phase keeps threads from sampling in lockstep. */
        uint64_t first = hm__opt.period / 2 + (hm__now_ns() ^ t->tid * 2654435761u) % hm__opt.period;
        struct itimerspec its = {{(time_t)(hm__opt.period / 1000000000), (long)(hm__opt.period % 1000000000)},
                                 {(time_t)(first / 1000000000), (long)(first % 1000000000)}};
        timer_settime(t->timer, 0, &its, NULL);
        t->has_timer = 1;
        return;
    }
    int fds[HM_REC_MAX_EVENTS];
    for (int i = 0; i < S.ev.n; i++) {
        int lead = S.ev.leader[i] >= 0 ? fds[S.ev.leader[i]] : -1;
        fds[i] = hm__os_perf_open(S.ev.attr[i], 0, -1, lead, PERF_FLAG_FD_CLOEXEC);
        t->perf_fd[i] = fds[i];
        t->ring[i] = NULL;
        if (fds[i] >= 0 && S.ev.sampling[i]) {
            hm__perf_ring_t *r = raw_map(sizeof *r);
            if (r && hm__perf_ring_map(r, fds[i], 8) == 0)
                t->ring[i] = r;
        }
    }
    t->nperf = S.ev.n;
}

static void sampler_stop(thr_t *t)
{
    if (t->has_timer) {
        timer_delete(t->timer);
        t->has_timer = 0;
    }
    for (int k = 0; k < t->nperf; k++)
        if (t->perf_fd[k] >= 0)
            ioctl(t->perf_fd[k], PERF_EVENT_IOC_DISABLE, 0);
}

static int sampler_init(void)
{
    if (hm__opt.backend < 0)
        return 0;
    if (hm__opt.backend == HM_BACKEND_SOFT) {
        if (hm__soft_cache_open(&S.soft) != 0)
            return -1;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sample;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        return sigaction(hm__opt.sig, &sa, NULL);
    }
    int rc = hm__rec_events((hm_backend_t)hm__opt.backend, hm__opt.period, &S.ev);
    if (rc) {
        hm__pdiag("backend %d: %s", hm__opt.backend, hm_errdetail());
        hm__opt.backend = -1;
        return rc;
    }
    S.sample_type = hm__rec_sample_type();
    return 0;
}

/* ------------------------------------------------------------- call sites */

typedef struct {
    uintptr_t pcs[16];
    int n, max;
} bt_t;

static _Unwind_Reason_Code bt_step(struct _Unwind_Context *ctx, void *arg)
{
    bt_t *b = arg;
    uintptr_t pc = _Unwind_GetIP(ctx);
    if (!pc)
        return _URC_END_OF_STACK;
    if (pc >= S.self_lo && pc < S.self_hi)
        return _URC_NO_REASON; /* our own frames do not name the site */
    b->pcs[b->n++] = pc;
    return b->n >= b->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static uint64_t site_now(void)
{
    bt_t b = {.n = 0, .max = hm__opt.depth};
    _Unwind_Backtrace(bt_step, &b);
    uint64_t id = hm__site_id(b.pcs, b.n);
    /* First sighting of a site: queue its frames once, symbolized later. */
    static uint64_t seen[4096];
    size_t h = (size_t)(id % 4096);
    for (size_t i = 0; i < 16; i++) {
        uint64_t cur = __atomic_load_n(&seen[(h + i) % 4096], __ATOMIC_RELAXED);
        if (cur == id)
            return id;
        if (cur == 0 && __atomic_compare_exchange_n(&seen[(h + i) % 4096], &cur, id, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            char frames[1024];
            size_t off = 0;
            for (int k = 0; k < b.n && off < sizeof frames - 1; k++) {
                int w = hm__site_frame(b.pcs[k], frames + off, sizeof frames - off);
                if (w < 0)
                    break;
                off += (size_t)w;
                if (off < sizeof frames - 1)
                    frames[off++] = '\n';
            }
            if (off > 0)
                frames[off - 1] = '\0';
            else
                frames[0] = '\0';
            hm__spool_direct(HM_REC_SITE, hm__tid(), id, 0, 0, frames);
            return id;
        }
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

static uint64_t env_u64(int id, uint64_t dflt)
{
    const char *v = hm__env_get(id);
    uint64_t x;
    if (!v || hm__parse_size(v, &x) != 0)
        return dflt;
    return x;
}

static void env_str(int id, char *dst, size_t len)
{
    const char *v = hm__env_get(id);
    dst[0] = '\0';
    if (v) {
        size_t n = strnlen(v, len - 1);
        memcpy(dst, v, n);
        dst[n] = '\0';
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
    char b[16];
    env_str(HM_ENV_BACKEND, b, sizeof b);
    hm_backend_t be;
    if (b[0] && hm_backend_parse(b, &be) == 0)
        hm__opt.backend = (int)be;
    else if (!strcmp(b, "perf-sw"))
        hm__opt.backend = HM__BACKEND_PERFSW;
    hm__opt.period = env_u64(HM_ENV_PERIOD, hm__opt.backend == HM_BACKEND_SOFT || hm__opt.backend == HM__BACKEND_PERFSW
                                                  ? 1000000 : 4000);
    if (!hm__opt.period)
        hm__opt.period = 1000000;
    hm__opt.min_size = env_u64(HM_ENV_MIN_SIZE, 64 * 1024);
    hm__opt.depth = (int)env_u64(HM_ENV_DEPTH, 6);
    if (hm__opt.depth < 1 || hm__opt.depth > 16)
        hm__opt.depth = 6;
    hm__opt.sig = SIGRTMIN + (int)env_u64(HM_ENV_SIGNAL_OFFSET, 4);
    hm__opt.null_handler = hm__env_get(HM_ENV_SOFT_NULL) != NULL;
    env_str(HM_ENV_PLACEMENT, hm__opt.placement, sizeof hm__opt.placement);
    env_str(HM_ENV_CAPACITY, hm__opt.capacity, sizeof hm__opt.capacity);
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
            S.self_lo = lo;
            S.self_hi = hi;
            return 1;
        }
    }
    return 0;
}

static void atfork_child(void);

__attribute__((constructor)) static void hm_preload_init(void)
{
    hm__guard++;
    resolve();
    read_opts();
    hm__log_init();
    dl_iterate_phdr(self_range, (void *)(uintptr_t)&hm_preload_init);
    pthread_key_create(&thr_key, thr_exit);
    S.pid = S.pid_now = getpid();
    if (hm__opt.record) {
        open_spool();
        if (sampler_init() != 0 && hm__opt.backend >= 0)
            hm__pdiag("sampler setup failed; recording allocations only");
    }
    hm__bind_init();
    pthread_atfork(NULL, NULL, atfork_child);
    S.ready = 1;
    collector_start();
    thr_get(); /* the main thread: starts its sampler */
    hm__guard--;
}

__attribute__((destructor)) static void hm_preload_fini(void)
{
    hm__guard++;
    if (t_thr)
        sampler_stop(t_thr);
    hm__bind_fini();
    finish(1);
    hm__guard--;
}

static void atfork_child(void)
{
    /* Only the forking thread exists in the child: every other thread's
     * slot is dead, the spool and collector belong to the parent. */
    hm__guard++;
    tid_reset();
    thr_t *me = t_thr;
    for (thr_t *t = atomic_load(&threads); t; t = t->next) {
        if (t == me)
            continue;
        t->nperf = 0;
        atomic_store(&t->eh, 0);
        atomic_store(&t->et, 0);
        atomic_store(&t->sh, 0);
        atomic_store(&t->st, 0);
        atomic_store(&t->state, T_FREE);
    }
    pthread_mutex_init(&S.drain_lock, NULL);
    pthread_mutex_init(&direct_lock, NULL);
    atomic_store(&S.running, 0);
    S.samples = S.unresolved = S.lost = 0;
    S.pid_now = getpid();
    if (hm__opt.record) {
        if (S.fd >= 0)
            close(S.fd);
        S.fd = -1;
        S.len = 0;
        open_spool();
    }
    if (me) {
        atomic_store(&me->eh, 0);
        atomic_store(&me->et, 0);
        atomic_store(&me->sh, 0);
        atomic_store(&me->st, 0);
        me->tid = hm__tid();
        /* perf fds and timers are not inherited: start afresh. */
        me->nperf = 0;
        sampler_start(me);
    }
    hm__bind_atfork_child();
    collector_start();
    hm__guard--;
}

/* ------------------------------------------------------------- exec */

/* exec replaces the image without running destructors: write out what
 * this process recorded before it goes. The new image re-initialises from
 * the same environment (LD_PRELOAD and HETMEM_* pass through). */
static void before_exec(void)
{
    /* A vfork child (Python's subprocess, for one) shares the parent's
     * memory and threads' state: it must not stop the parent's collector
     * or write the parent's spool. Its new image starts afresh anyway. */
    if (getpid() != S.pid_now)
        return;
    hm__guard++;
    if (t_thr)
        sampler_stop(t_thr);
    hm__bind_fini();
    finish(1);
    hm__guard--;
}

#define EXEC_WRAP(name, params, args)                                                   \
    EXPORT int name params                                                            \
    {                                                                                 \
        static int (*real) params;                                                    \
        if (!real)                                                                    \
            real = (__typeof__(real))dlsym(RTLD_NEXT, #name);                         \
        before_exec();                                                                \
        int r = real args;                                                            \
        int saved_errno_ = errno;                                                    \
        /* exec failed: keep recording in this image. */                              \
        if (hm__opt.record && getpid() == S.pid_now) {                                \
            hm__guard++;                                                              \
            S.samples = S.unresolved = S.lost = 0;                                    \
            if (S.fd >= 0) close(S.fd);                                               \
            S.fd = -1;                                                                \
            open_spool();                                                             \
            collector_start();                                                        \
            if (t_thr) sampler_start(t_thr);                                          \
            hm__guard--;                                                              \
        }                                                                             \
        errno = saved_errno_;                                                        \
        return r;                                                                     \
    }
EXEC_WRAP(execve, (const char *p, char *const a[], char *const e[]), (p, a, e))
EXEC_WRAP(execv, (const char *p, char *const a[]), (p, a))
EXEC_WRAP(execvp, (const char *p, char *const a[]), (p, a))
EXEC_WRAP(execvpe, (const char *p, char *const a[], char *const e[]), (p, a, e))

/* execl* are variadic and glibc implements them with an internal execve,
 * so they are rebuilt here on top of the wrapped execv/execve/execvp. */
#define COLLECT_ARGV(first, ap, argv_out)                                        \
    do {                                                                         \
        va_list cp_;                                                             \
        va_copy(cp_, ap);                                                        \
        size_t n_ = 1;                                                           \
        while (va_arg(cp_, char *))                                              \
            n_++;                                                                \
        va_end(cp_);                                                             \
        argv_out = __builtin_alloca((n_ + 1) * sizeof(char *));                  \
        argv_out[0] = (char *)(first);                                           \
        for (size_t i_ = 1; i_ <= n_; i_++)                                      \
            argv_out[i_] = va_arg(ap, char *);                                   \
    } while (0)

EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    char **av;
    va_start(ap, arg);
    COLLECT_ARGV(arg, ap, av);
    va_end(ap);
    return execv(path, av);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    char **av;
    va_start(ap, arg);
    COLLECT_ARGV(arg, ap, av);
    va_end(ap);
    return execvp(file, av);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char **av;
    va_start(ap, arg);
    COLLECT_ARGV(arg, ap, av);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, av, envp);
}

/* _exit skips destructors; what the process recorded must still reach the
 * spool (fork children commonly leave this way). */
EXPORT void _exit(int code)
{
    static void (*real)(int) __attribute__((noreturn));
    if (!real)
        real = (__typeof__(real))dlsym(RTLD_NEXT, "_exit");
    if (S.ready && getpid() == S.pid_now) {
        hm__guard++;
        if (t_thr)
            sampler_stop(t_thr);
        finish(1);
    }
    if (real)
        real(code);
    syscall(SYS_exit_group, code);
    __builtin_unreachable();
}

EXPORT void _Exit(int code) { _exit(code); }

/* ------------------------------------------------------------- threads */

typedef struct {
    void *(*fn)(void *);
    void *arg;
} start_t;

static void *thread_start(void *p)
{
    start_t st = *(start_t *)p;
    hm__guard++;
    hm__real.free(p);
    hm__guard--;
    thr_get(); /* sampler for this thread */
    return st.fn(st.arg);
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = (__typeof__(real))dlsym(RTLD_NEXT, "pthread_create");
    if (!hm__opt.record || hm__opt.backend < 0 || !S.ready)
        return real(th, attr, fn, arg);
    resolve();
    hm__guard++;
    start_t *st = hm__real.malloc(sizeof *st);
    hm__guard--;
    if (!st)
        return real(th, attr, fn, arg);
    st->fn = fn;
    st->arg = arg;
    int r = real(th, attr, thread_start, st);
    if (r) {
        hm__guard++;
        hm__real.free(st);
        hm__guard--;
    }
    return r;
}

/* ------------------------------------------------------------- allocator */

#define TRACKED(n) (HM_UNLIKELY((n) >= hm__opt.min_size) && S.ready && !hm__guard)

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

EXPORT void *malloc(size_t n)
{
    if (HM_UNLIKELY(!hm__real.malloc)) {
        resolve();
        if (!hm__real.malloc)
            return boot_alloc(n);
    }
    if (TRACKED(n))
        return alloc_common(n, 16, 0, hm__real.malloc);
    return hm__real.malloc(n);
}

EXPORT void *calloc(size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (HM_UNLIKELY(!hm__real.calloc)) {
        /* dlsym's own calloc while we resolve: the bootstrap buffer. */
        if (resolving)
            return boot_alloc(total);
        resolve();
        if (!hm__real.calloc)
            return boot_alloc(total);
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
    if (!p || is_boot(p))
        return;
    size_t sz;
    if (S.ready && !hm__guard) {
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
    } else if (S.ready && hm__bind_owns(p, &sz)) {
        /* The runtime never frees an app object, but a guard-time free of
         * bind memory must still not reach glibc. */
        hm__bind_release(p, sz);
        return;
    }
    hm__real.free(p);
}

EXPORT void free(void *p)
{
    if (!p || is_boot(p))
        return;
    if (HM_UNLIKELY(!hm__real.free)) {
        resolve();
        if (!hm__real.free)
            return; /* cannot happen after resolve; leak rather than crash */
    }
    release(p);
}

EXPORT void cfree(void *p) { free(p); }

EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (is_boot(p))
        return boot_size(p);
    size_t sz;
    if (S.ready && hm__bind_owns(p, &sz))
        return sz;
    resolve();
    return hm__real.malloc_usable_size(p);
}

EXPORT void *realloc(void *p, size_t n)
{
    if (HM_UNLIKELY(!hm__real.realloc)) {
        resolve();
        if (!hm__real.realloc)
            return NULL;
    }
    if (!p)
        return malloc(n);
    if (is_boot(p)) {
        void *q = malloc(n);
        size_t have = boot_size(p);
        if (q)
            memcpy(q, p, have < n ? have : n);
        return q;
    }
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t old;
    int owned = S.ready && hm__bind_owns(p, &old);
    int was_tracked = owned || (S.ready && hm__real.malloc_usable_size(p) >= hm__opt.min_size);
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

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    resolve();
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
    resolve();
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

EXPORT void *aligned_alloc(size_t align, size_t n) { return aligned_common(align, n, hm__real.aligned_alloc ? hm__real.aligned_alloc : (resolve(), hm__real.aligned_alloc)); }
EXPORT void *memalign(size_t align, size_t n) { return aligned_common(align, n, hm__real.memalign ? hm__real.memalign : (resolve(), hm__real.memalign)); }

EXPORT void *valloc(size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    return memalign((size_t)pg, n);
}

EXPORT void *pvalloc(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(pg, (n + pg - 1) & ~(pg - 1));
}

/* Anonymous mappings the program makes itself (glibc's own mmap calls for
 * large mallocs go through internal symbols and are seen as malloc). */
EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (HM_UNLIKELY(!hm__real.mmap)) {
        resolve();
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

EXPORT int munmap(void *addr, size_t len)
{
    if (HM_UNLIKELY(!hm__real.munmap)) {
        resolve();
        if (!hm__real.munmap)
            return (int)syscall(SYS_munmap, addr, len);
    }
    if (S.ready && !hm__guard && len >= hm__opt.min_size) {
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
