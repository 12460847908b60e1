/* libhetmem_preload: process and thread wrappers. exec and _exit skip
 * destructors, so they flush what this process recorded first; fork
 * children start their own spool; new threads get their sampler. */
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

void hm__atfork_child(void)
{
    /* Only the forking thread exists in the child: every other thread's
     * slot is dead, the spool and collector belong to the parent. */
    hm__guard++;
    hm__tid_reset();
    hm__thr_t *me = hm__t_thr;
    for (hm__thr_t *t = atomic_load(&hm__threads); t; t = t->next) {
        if (t == me)
            continue;
        t->nperf = 0;
        atomic_store(&t->eh, 0);
        atomic_store(&t->et, 0);
        atomic_store(&t->sh, 0);
        atomic_store(&t->st, 0);
        atomic_store(&t->state, HM_T_FREE);
    }
    pthread_mutex_init(&hm__S.drain_lock, NULL);
    pthread_mutex_init(&hm__direct_lock, NULL);
    atomic_store(&hm__S.running, 0);
    hm__S.samples = hm__S.unresolved = hm__S.lost = 0;
    hm__S.pid_now = getpid();
    if (hm__opt.record) {
        if (hm__S.fd >= 0)
            close(hm__S.fd);
        hm__S.fd = -1;
        hm__S.len = 0;
        hm__open_spool();
    }
    if (me) {
        atomic_store(&me->eh, 0);
        atomic_store(&me->et, 0);
        atomic_store(&me->sh, 0);
        atomic_store(&me->st, 0);
        me->tid = hm__tid();
        /* perf fds and timers are not inherited: start afresh. */
        me->nperf = 0;
        hm__sampler_start(me);
    }
    hm__bind_atfork_child();
    hm__collector_start();
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
    if (getpid() != hm__S.pid_now)
        return;
    hm__guard++;
    if (hm__t_thr)
        hm__sampler_stop(hm__t_thr);
    hm__bind_fini();
    hm__finish(1);
    hm__guard--;
}

#define EXEC_WRAP(name, params, args)                                                   \
    HM_EXPORT int name params                                                            \
    {                                                                                 \
        static int (*real) params;                                                    \
        if (!real)                                                                    \
            real = (__typeof__(real))dlsym(RTLD_NEXT, #name);                         \
        before_exec();                                                                \
        int r = real args;                                                            \
        int saved_errno_ = errno;                                                    \
        /* exec failed: keep recording in this image. */                              \
        if (hm__opt.record && getpid() == hm__S.pid_now) {                                \
            hm__guard++;                                                              \
            hm__S.samples = hm__S.unresolved = hm__S.lost = 0;                                    \
            if (hm__S.fd >= 0) close(hm__S.fd);                                               \
            hm__S.fd = -1;                                                                \
            hm__open_spool();                                                             \
            hm__collector_start();                                                        \
            if (hm__t_thr) hm__sampler_start(hm__t_thr);                                          \
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

HM_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    char **av;
    va_start(ap, arg);
    COLLECT_ARGV(arg, ap, av);
    va_end(ap);
    return execv(path, av);
}

HM_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    char **av;
    va_start(ap, arg);
    COLLECT_ARGV(arg, ap, av);
    va_end(ap);
    return execvp(file, av);
}

HM_EXPORT int execle(const char *path, const char *arg, ...)
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
HM_EXPORT void _exit(int code)
{
    static void (*real)(int) __attribute__((noreturn));
    if (!real)
        real = (__typeof__(real))dlsym(RTLD_NEXT, "_exit");
    if (hm__S.ready && getpid() == hm__S.pid_now) {
        hm__guard++;
        if (hm__t_thr)
            hm__sampler_stop(hm__t_thr);
        hm__finish(1);
    }
    if (real)
        real(code);
    syscall(SYS_exit_group, code);
    __builtin_unreachable();
}

HM_EXPORT void _Exit(int code) { _exit(code); }

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
    hm__thr_get(); /* sampler for this thread */
    return st.fn(st.arg);
}

HM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = (__typeof__(real))dlsym(RTLD_NEXT, "pthread_create");
    if (!hm__opt.record || hm__opt.backend < 0 || !hm__S.ready)
        return real(th, attr, fn, arg);
    hm__resolve();
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
