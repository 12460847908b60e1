/* libhetmem_preload: per-thread event and sample rings, the collector thread
 * that drains them into this process's spool file, and the final flush at
 * exit and exec. Rings are single-producer (their thread) and
 * single-consumer (whoever holds hm__S.drain_lock): acquire-load the head,
 * release-store the tail. */
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

hm__opts_t hm__opt;
__thread int hm__guard HM_TLS;

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
void hm__tid_reset(void) { tid_cache = 0; }

/* ------------------------------------------------------------ thread state */

_Atomic(hm__thr_t *) hm__threads;
__thread hm__thr_t *hm__t_thr HM_TLS;
pthread_key_t hm__thr_key;
hm__state_t hm__S = {.fd = -1, .drain_lock = PTHREAD_MUTEX_INITIALIZER};

void *hm__raw_map(size_t n)
{
    void *p = hm__real.mmap ? hm__real.mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                            : mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The calling thread's state, created on first use. Reuses slots of
 * threads that exited once the collector has drained them. */
hm__thr_t *hm__thr_get(void)
{
    hm__thr_t *t = hm__t_thr;
    if (HM_LIKELY(t))
        return t;
    if (!hm__S.ready)
        return NULL;
    for (hm__thr_t *x = atomic_load(&hm__threads); x; x = x->next) {
        int fr = HM_T_FREE;
        if (atomic_compare_exchange_strong(&x->state, &fr, HM_T_ACTIVE)) {
            t = x;
            break;
        }
    }
    if (!t) {
        t = hm__raw_map(sizeof *t);
        if (!t)
            return NULL;
        atomic_store(&t->state, HM_T_ACTIVE);
        hm__thr_t *head = atomic_load(&hm__threads);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&hm__threads, &head, t));
    }
    t->tid = hm__tid();
    t->soft_dropped = t->ev_dropped = 0;
    hm__t_thr = t;
    pthread_setspecific(hm__thr_key, t);
    hm__sampler_start(t);
    return t;
}

/* pthread key destructor: runs at pthread_exit and on return from the
 * start routine, so the timer never outlives its thread. */
void hm__thr_exit(void *p)
{
    hm__thr_t *t = p;
    int g = hm__guard;
    hm__guard = 1;
    hm__sampler_stop(t);
    hm__t_thr = NULL;
    atomic_store(&t->state, HM_T_DEAD);
    hm__guard = g;
}

/* ------------------------------------------------------------- events */

static void drain_events(hm__thr_t *t);
#ifdef HM_TEST_HOOKS
static _Atomic uint64_t self_drains; /* reported at exit when the collector is delayed */
#endif

/* The calling thread's event ring is full. It drains the ring into the
 * spool itself, as the collector would: whoever holds drain_lock is the
 * consumer, and that lock is only ever held for copying into the spool and
 * writing it (the collector holds it while it resolves samples too, which
 * takes no lock a producer could hold while it records an event). So an
 * allocation event waits for nothing but the spool: not for the collector
 * to be scheduled, which on a loaded machine may take longer than any
 * bound. Returns 0 when the ring has room; -1 once the collector has
 * stopped (the process is exiting or exec'ing: its last drain is done or
 * under way, and records after it would follow the statistics). */
static int drain_own(hm__thr_t *t)
{
    if (hm__S.fd < 0 || atomic_load(&hm__S.stop))
        return -1;
    pthread_mutex_lock(&hm__S.drain_lock);
    int ok = hm__S.fd >= 0 && !atomic_load(&hm__S.stop);
    if (ok)
        drain_events(t);
    pthread_mutex_unlock(&hm__S.drain_lock);
#ifdef HM_TEST_HOOKS
    atomic_fetch_add(&self_drains, ok);
#endif
    return ok ? 0 : -1;
}

static _Atomic uint64_t late_drops;

static void ev_push(uint16_t kind, uint64_t a, uint64_t b, uint64_t c, const char *s)
{
    /* hetmem run reads only the placement records: a long run's millions
     * of allocation records would only fill the disk. */
    if (!hm__opt.record || !hm__opt.events)
        return;
    hm__thr_t *t = hm__thr_get();
    if (!t)
        return;
    uint64_t h = atomic_load_explicit(&t->eh, memory_order_relaxed);
    /* Allocation events are never dropped while the collector runs. */
    if (h - atomic_load_explicit(&t->et, memory_order_acquire) >= HM_EVN && drain_own(t)) {
        t->ev_dropped++;
        if (atomic_fetch_add(&late_drops, 1) == 0)
            hm__pdiag("allocation events dropped: event ring full after the collector stopped (exit or exec)");
        return;
    }
    /* Half full: wake the collector early rather than wait for its tick. */
    if (h - atomic_load_explicit(&t->et, memory_order_relaxed) == HM_EVN / 2 && atomic_load(&hm__S.running)) {
        atomic_store(&hm__S.wake, 1);
        syscall(SYS_futex, &hm__S.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
    hm__ev_t *e = &t->ev[h % HM_EVN];
    e->r.kind = kind;
    e->r.tid = t->tid;
    e->r.time = hm__now_ns();
    e->r.a = a;
    e->r.b = b;
    e->r.c = c;
    e->r.len = 0;
    if (s) {
        size_t n = strnlen(s, HM_PAYLOAD - 1);
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
    while (hm__S.fd >= 0 && off < hm__S.len) {
        ssize_t w = write(hm__S.fd, hm__S.buf + off, hm__S.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    hm__S.len = 0;
}

/* Whether r is one of a process's few summary records (statistics, its
 * exe, errors, the placement totals at exit), which are written past the
 * bound so that the spool always says what it lacks; per-event records
 * (samples, allocations, placements) are not. */
static int summary_rec(const hm__spool_rec_t *r)
{
    return r->kind >= HM_SPOOL_STATS && r->kind != HM_SPOOL_PLACE;
}

static void spool_put(const hm__spool_rec_t *r, const void *payload)
{
    size_t need = sizeof *r + r->len;
    if (!summary_rec(r) && hm__S.spool_bytes + need > hm__opt.spool_max) {
        /* The bound (HETMEM_SPOOL_MAX): a long run must not fill the disk.
         * What is not written is counted, said at once on stderr and in
         * the spool's last record, never lost in silence. */
        if (!hm__S.over_recs) {
            hm__pdiag("spool limit of %llu bytes reached (%s); later records are counted, not written",
                      (unsigned long long)hm__opt.spool_max, hm__env_name(HM_ENV_SPOOL_MAX));
            /* Marked in the spool at once (b = 2), past the bound: a
             * process killed before its last records still leaves a spool
             * that says it is incomplete. */
            static const char m[] = "spool limit reached";
            hm__spool_rec_t q = {HM_SPOOL_ERROR, 0, hm__tid(), hm__now_ns(), 0, 2, 0};
            q.len = (uint16_t)((sizeof m + 7) & ~(size_t)7);
            spool_put(&q, m);
        }
        hm__S.over_recs++;
        hm__S.over_bytes += need;
        return;
    }
    hm__S.spool_bytes += need;
    if (hm__S.len + need > sizeof hm__S.buf)
        spool_flush();
    memcpy(hm__S.buf + hm__S.len, r, sizeof *r);
    if (r->len) {
        memset(hm__S.buf + hm__S.len + sizeof *r, 0, r->len);
        /* Payloads are strings: always leave their terminator. */
        memcpy(hm__S.buf + hm__S.len + sizeof *r, payload, strnlen(payload, r->len - 1u));
    }
    hm__S.len += need;
}

pthread_mutex_t hm__direct_lock = PTHREAD_MUTEX_INITIALIZER;

void hm__spool_direct(uint16_t kind, uint32_t tid, uint64_t a, uint64_t b, uint64_t c, const char *payload)
{
    if (hm__S.fd < 0)
        return;
    hm__spool_rec_t r = {kind, 0, tid, hm__now_ns(), a, b, c};
    size_t n = payload ? strlen(payload) : 0;
    if (n > 4000)
        n = 4000;
    if (payload)
        r.len = (uint16_t)((n + 1 + 7) & ~(size_t)7);
    pthread_mutex_lock(&hm__S.drain_lock);
    pthread_mutex_lock(&hm__direct_lock);
    spool_put(&r, payload ? payload : "");
    pthread_mutex_unlock(&hm__direct_lock);
    pthread_mutex_unlock(&hm__S.drain_lock);
}

void hm__open_spool(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%d-%llu.spool", hm__opt.spool_dir, (int)getpid(),
             (unsigned long long)hm__now_ns());
    hm__S.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (hm__S.fd < 0) {
        hm__pdiag("cannot create spool %s: %s; recording off in this process", path, strerror(errno));
        hm__opt.record = 0;
        return;
    }
    hm__S.len = 0;
    memcpy(hm__S.buf, HM_SPOOL_MAGIC, 8);
    hm__S.len = 8;
    hm__S.spool_bytes = 8;
    hm__S.over_recs = hm__S.over_bytes = 0;
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
    hm__S.samples++;
}

/* Moves a thread's events to the spool; drain_lock held. */
static void drain_events(hm__thr_t *t)
{
    uint64_t h = atomic_load_explicit(&t->eh, memory_order_acquire);
    for (uint64_t i = atomic_load_explicit(&t->et, memory_order_relaxed); i < h; i++) {
        hm__ev_t *e = &t->ev[i % HM_EVN];
        spool_put(&e->r, e->payload);
    }
    atomic_store_explicit(&t->et, h, memory_order_release);
}

static void drain_thread(hm__thr_t *t)
{
    drain_events(t);
    uint64_t h = atomic_load_explicit(&t->sh, memory_order_acquire);
    for (uint64_t i = atomic_load_explicit(&t->st, memory_order_relaxed); i < h; i++) {
        const hm__soft_raw_t *raw = &t->soft[i % HM_SOFTN];
        uint64_t addr = 0, ip = hm__arch_raw_pc(raw);
        int acc = HM_ACCESS_LOAD;
        int ok = hm__S.soft && hm__soft_resolve(hm__S.soft, raw, &addr, &ip, &acc);
        if (!ok) {
            hm__S.unresolved++;
            addr = 0;
        }
        /* Unresolved samples stay in the trace with addr 0: they are time
         * spent outside data accesses, and dropping them would skew shares. */
        hm__spool_rec_t r = {HM_REC_SAMPLE, 0, raw->tid, raw->time, addr, ip,
                             (uint64_t)HM_DSRC_UNKNOWN << 8 | (uint64_t)(acc < 0 ? 0 : acc)};
        spool_put(&r, NULL);
        hm__S.samples++;
    }
    atomic_store_explicit(&t->st, h, memory_order_release);
    hm__S.lost += t->soft_dropped;
    t->soft_dropped = 0;
    if (t->ev_dropped) {
        hm__spool_rec_t r = {HM_SPOOL_ERROR, 0, t->tid, hm__now_ns(), t->ev_dropped, 0, 0};
        const char *m = "allocation events dropped (event ring full after the collector stopped)";
        r.len = (uint16_t)((strlen(m) + 1 + 7) & ~(size_t)7);
        spool_put(&r, m);
        t->ev_dropped = 0;
    }

    for (int k = 0; k < t->nperf; k++)
        if (t->ring[k]) {
            hm__perf_ring_read(t->ring[k], hm__S.sample_type, perf_cb, NULL);
        }
}

static void drain_all(int final)
{
    for (hm__thr_t *t = atomic_load(&hm__threads); t; t = t->next) {
        int st = atomic_load(&t->state);
        if (st == HM_T_FREE)
            continue;
        drain_thread(t);
        if (st == HM_T_DEAD || final) {
            for (int k = 0; k < t->nperf; k++) {
                if (t->ring[k]) {
                    hm__S.lost += t->ring[k]->stats.lost;
                    hm__perf_ring_unmap(t->ring[k]);
                    hm__real.munmap(t->ring[k], sizeof *t->ring[k]);
                    t->ring[k] = NULL;
                }
                if (t->perf_fd[k] >= 0)
                    close(t->perf_fd[k]);
                t->perf_fd[k] = -1;
            }
            t->nperf = 0;
            if (st == HM_T_DEAD) {
                atomic_store(&t->et, 0);
                atomic_store(&t->eh, 0);
                atomic_store(&t->st, 0);
                atomic_store(&t->sh, 0);
                atomic_store(&t->state, HM_T_FREE);
            }
        }
    }
}

static void write_stats(void);

static void *collector(void *arg)
{
    (void)arg;
    hm__guard = 1; /* everything this thread allocates is the runtime's */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* The tick is short enough that a thread's sample ring (HM_SOFTN) cannot
     * fill at 10 kHz, and long enough that the wakeups themselves stay
     * cheap: every timer interrupt costs tens of microseconds in a VM. */
    long tick_ns = hm__opt.backend == HM_BACKEND_SOFT
        ? (long)(hm__opt.period < 20000000 / (HM_SOFTN / 4) ? hm__opt.period * (HM_SOFTN / 4) : 20000000)
        : 20000000;
#ifdef HM_TEST_HOOKS
    /* Test builds only: HETMEM_TEST_COLLECTOR_DELAY_MS=N makes the collector
     * sleep N ms before each drain, as a starved collector would. */
    const char *dv = secure_getenv("HETMEM_TEST_COLLECTOR_DELAY_MS");
    long delay_ms = dv ? atol(dv) : 0;
#endif
    while (!atomic_load(&hm__S.stop)) {
        struct timespec ts = {0, tick_ns};
        if (!atomic_exchange(&hm__S.wake, 0))
            syscall(SYS_futex, &hm__S.wake, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
#ifdef HM_TEST_HOOKS
        for (long left = delay_ms; left > 0 && !atomic_load(&hm__S.stop); left -= 10) {
            struct timespec d = {0, 10000000};
            nanosleep(&d, NULL);
        }
#endif
        pthread_mutex_lock(&hm__S.drain_lock);
        drain_all(0);
        /* Written every round: a process killed by a signal loses at most
         * one tick; _exit and exec flush first. */
        if (hm__S.len > 0)
            spool_flush();
        pthread_mutex_unlock(&hm__S.drain_lock);
    }
    /* Stopping (exit, _exit, exec): the last drain is done here rather than
     * by the thread that is leaving, which may be in a signal handler that
     * interrupted malloc or this very lock: decoding samples allocates and
     * takes the loader's locks. If the lock's holder never comes back, the
     * leaving thread stops waiting for us (hm__finish) and exits anyway. */
#ifdef HM_TEST_HOOKS
    /* Test builds only: HETMEM_TEST_COLLECTOR_FINAL_CPU_MS=N makes the last
     * round take N ms of this thread's CPU time first, as a collector
     * starved on a loaded machine, or decoding a large backlog, would. */
    const char *fv = secure_getenv("HETMEM_TEST_COLLECTOR_FINAL_CPU_MS");
    if (fv && atol(fv) > 0) {
        struct timespec c0, c;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        do
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
        while ((c.tv_sec - c0.tv_sec) * 1000 + (c.tv_nsec - c0.tv_nsec) / 1000000 < atol(fv));
    }
#endif
    pthread_mutex_lock(&hm__S.drain_lock);
    drain_all(1);
    write_stats();
    spool_flush();
    pthread_mutex_unlock(&hm__S.drain_lock);
#ifdef HM_TEST_HOOKS
    if (delay_ms)
        hm__pdiag("test: collector delayed %ld ms per round; event rings drained by their threads %llu times",
                  delay_ms, (unsigned long long)atomic_load(&self_drains));
#endif
    return NULL;
}

void hm__collector_start(void)
{
    if (!hm__opt.record)
        return;
    atomic_store(&hm__S.stop, 0);
    atomic_store(&hm__S.wake, 0);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 * 1024);
    hm__guard++;
    /* The collector itself is not sampled: the real pthread_create is used
     * and the thread never calls hm__thr_get(). */
    int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
        (__typeof__(real_create))dlsym(RTLD_NEXT, "pthread_create");
    int rc = real_create ? real_create(&hm__S.collector, &a, collector, NULL) : ENOSYS;
    hm__guard--;
    pthread_attr_destroy(&a);
    if (rc) {
        hm__pdiag("cannot start the collector thread: %s", strerror(rc));
        return;
    }
    atomic_store(&hm__S.running, 1);
}

static void write_stats(void)
{
    hm__spool_rec_t r = {HM_SPOOL_STATS, 0, hm__tid(), hm__now_ns(), hm__S.lost, hm__S.samples, hm__S.unresolved};
    spool_put(&r, NULL);
    if (hm__S.over_recs) {
        char m[200];
        snprintf(m, sizeof m, "spool limit of %llu bytes reached (%s): %llu records (%llu bytes) after it were not written",
                 (unsigned long long)hm__opt.spool_max, hm__env_name(HM_ENV_SPOOL_MAX),
                 (unsigned long long)hm__S.over_recs, (unsigned long long)hm__S.over_bytes);
        /* b = 1: records are missing from this spool (the CLI exits 1). */
        hm__spool_rec_t q = {HM_SPOOL_ERROR, 0, hm__tid(), hm__now_ns(), hm__S.over_recs, 1, 0};
        q.len = (uint16_t)((strlen(m) + 1 + 7) & ~(size_t)7);
        spool_put(&q, m);
        hm__S.over_recs = hm__S.over_bytes = 0;
    }
    if (hm__S.soft) {
        const hm__soft_stats_t *st = hm__soft_cache_stats(hm__S.soft);
        char m[160];
        snprintf(m, sizeof m, "soft: back %llu at %llu fwd %llu none %llu nofunc %llu vsib %llu moved %llu faulted %llu",
                 (unsigned long long)st->back, (unsigned long long)st->at, (unsigned long long)st->fwd,
                 (unsigned long long)st->none, (unsigned long long)st->nofunc, (unsigned long long)st->vsib,
                 (unsigned long long)st->moved, (unsigned long long)st->faulted);
        hm__spool_rec_t q = {HM_SPOOL_STATS + 10, 0, hm__tid(), hm__now_ns(), 0, 0, 0};
        q.len = (uint16_t)((strlen(m) + 1 + 7) & ~(size_t)7);
        spool_put(&q, m);
    }
}

/* Waits for the collector to end after it was told to stop; 0 once it
 * has, -1 when it gives up. A collector that waits on a lock (an _exit
 * from a signal handler that interrupted its holder) never will; one that
 * is starved of CPU on a loaded machine still moves, if slowly, and
 * giving up on it would lose what it had left to write. So the wait ends
 * when the collector's thread has used no CPU time for a whole second,
 * after at least 2 s, and after 120 s in any case. */
static int join_collector(void)
{
    clockid_t cid;
    int have_cpu = pthread_getcpuclockid(hm__S.collector, &cid) == 0;
    double start = hm__now_ns() / 1e9, moved = start, last_cpu = -1;
    for (;;) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 200000000;
        if (dl.tv_nsec >= 1000000000)
            dl.tv_sec++, dl.tv_nsec -= 1000000000;
        if (pthread_timedjoin_np(hm__S.collector, NULL, &dl) == 0)
            return 0;
        double now = hm__now_ns() / 1e9;
        struct timespec c;
        /* A clock that cannot be read (the thread is ending) counts as
         * moving: the next join takes it. */
        if (!have_cpu || clock_gettime(cid, &c) != 0)
            moved = have_cpu ? now : moved;
        else if ((double)c.tv_sec + 1e-9 * (double)c.tv_nsec > last_cpu + 1e-3) {
            last_cpu = (double)c.tv_sec + 1e-9 * (double)c.tv_nsec;
            moved = now;
        }
        if (now - start >= 120 || (now - start >= 2 && now - moved >= 1))
            return -1;
    }
}

/* Stops the collector and writes everything out. Called at exit and
 * before exec. */
void hm__finish(int final)
{
    if (!hm__opt.record || hm__S.fd < 0)
        return;
    hm__guard++;
    /* Bounded waits: _exit may come from a signal handler, or from a thread
     * that interrupted the lock's holder; losing the last tick of data is
     * better than never exiting. */
    if (atomic_load(&hm__S.running)) {
        /* The collector drains, writes the statistics and flushes on its
         * way out: nothing that allocates or decodes runs here. */
        atomic_store(&hm__S.stop, 1);
        atomic_store(&hm__S.wake, 1);
        syscall(SYS_futex, &hm__S.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        if (join_collector() != 0)
            hm__pdiag("collector did not stop; the last samples are lost");
        else
            atomic_store(&hm__S.running, 0);
        hm__guard--;
        return;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    if (pthread_mutex_timedlock(&hm__S.drain_lock, &dl) != 0) {
        hm__pdiag("spool busy at exit; the last samples are lost");
        hm__guard--;
        return;
    }
    drain_all(final);
    if (final)
        write_stats();
    spool_flush();
    pthread_mutex_unlock(&hm__S.drain_lock);
    hm__guard--;
}
