/* libhetmem_preload: the samplers. Soft: a per-thread POSIX timer whose
 * signal handler only copies the register context into the thread's ring
 * (decoding happens in the collector). Perf backends: per-thread
 * perf_event_open rings, read by the collector. */
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
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "common/env.h"
#include "hetmem/trace.h"
#include "os/os.h"

/* ------------------------------------------------------------- samplers */

#define SOFT_MAGIC 0x68746d73

/* Page faults the calling thread has taken (minor and major), or `old` if
 * the kernel will not say. A raw syscall: safe in a signal handler. */
static uint64_t thread_faults(uint64_t old)
{
    struct rusage ru;
    if (syscall(SYS_getrusage, RUSAGE_THREAD, &ru) != 0)
        return old;
    return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

static void on_sample(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved = errno;
    hm__thr_t *t = hm__t_thr;
    if (hm__opt.null_handler)
        goto out;
    /* Only our own timer, and only for the thread it belongs to: a stray
     * signal must never make two producers write one ring. */
    if (!t || si->si_code != SI_TIMER || si->si_value.sival_ptr != t)
        goto out;
    uint64_t h = atomic_load_explicit(&t->sh, memory_order_relaxed);
    if (h - atomic_load_explicit(&t->st, memory_order_acquire) >= HM_SOFTN) {
        t->soft_dropped++;
        goto out;
    }
    /* A timer that fires while the kernel serves a page fault is delivered
     * with the PC on the faulting instruction (it will run again), not
     * after it; the decoder needs to know (src/arch/x86_64/soft.c). The
     * count is read before this handler touches anything, and taken again
     * as the baseline once it is done: the faults the handler takes itself
     * (the first write to each page of the sample ring, 42 pages on
     * x86-64) are not the program's; counted as if they were, they flagged
     * 8% of a thread's first 512 samples as faults. */
    uint64_t f = thread_faults(t->soft_faults);
    int faulted = f != t->soft_faults;
    hm__soft_raw_t *r = &t->soft[h % HM_SOFTN];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->time = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    hm__arch_save_context(r, ucv);
    r->tid = t->tid;
    r->faulted = (uint32_t)faulted;
    t->soft_faults = thread_faults(f);
    atomic_store_explicit(&t->sh, h + 1, memory_order_release);
out:
    errno = saved;
}

void hm__sampler_start(hm__thr_t *t)
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
        t->soft_faults = thread_faults(0);
        /* A per-thread random phase keeps threads from sampling in lockstep. */
        uint64_t first = hm__opt.period / 2 + (hm__now_ns() ^ t->tid * 2654435761u) % hm__opt.period;
        struct itimerspec its = {{(time_t)(hm__opt.period / 1000000000), (long)(hm__opt.period % 1000000000)},
                                 {(time_t)(first / 1000000000), (long)(first % 1000000000)}};
        timer_settime(t->timer, 0, &its, NULL);
        t->has_timer = 1;
        return;
    }
    int fds[HM_REC_MAX_EVENTS];
    for (int i = 0; i < hm__S.ev.n; i++) {
        int lead = hm__S.ev.leader[i] >= 0 ? fds[hm__S.ev.leader[i]] : -1;
        fds[i] = hm__os_perf_open(hm__S.ev.attr[i], 0, -1, lead, PERF_FLAG_FD_CLOEXEC);
        t->perf_fd[i] = fds[i];
        t->ring[i] = NULL;
        if (fds[i] >= 0 && hm__S.ev.sampling[i]) {
            hm__perf_ring_t *r = hm__raw_map(sizeof *r);
            if (r && hm__perf_ring_map(r, fds[i], 8) == 0)
                t->ring[i] = r;
        }
    }
    t->nperf = hm__S.ev.n;
}

void hm__sampler_stop(hm__thr_t *t)
{
    if (t->has_timer) {
        timer_delete(t->timer);
        t->has_timer = 0;
    }
    for (int k = 0; k < t->nperf; k++)
        if (t->perf_fd[k] >= 0)
            ioctl(t->perf_fd[k], PERF_EVENT_IOC_DISABLE, 0);
}

int hm__sampler_init(void)
{
    if (hm__opt.backend < 0)
        return 0;
    if (hm__opt.backend == HM_BACKEND_SOFT) {
        if (hm__soft_cache_open(&hm__S.soft) != 0)
            return -1;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sample;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        return sigaction(hm__opt.sig, &sa, NULL);
    }
    int rc = hm__rec_events((hm_backend_t)hm__opt.backend, hm__opt.period, &hm__S.ev);
    if (rc) {
        hm__pdiag("backend %d: %s", hm__opt.backend, hm_errdetail());
        hm__opt.backend = -1;
        return rc;
    }
    hm__S.sample_type = hm__rec_sample_type();
    return 0;
}
