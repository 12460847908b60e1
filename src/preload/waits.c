/* Blocking waits under the soft sampler.
 *
 * The sampler's timer runs on wall time, so its signal also lands while a
 * thread sleeps or waits, and the sleep and wait calls return EINTR (or a
 * short sleep) whatever SA_RESTART says. A program must behave as it does
 * without sampling, so these wrappers keep the sampling signal blocked for
 * the duration of the call: nothing is lost, since a blocked thread has no
 * memory access to sample, and a signal that comes due meanwhile is taken
 * when the call returns. Other signals interrupt the calls as before. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "hetmem/record.h"
#include "preload/preload_int.h"

#define EXPORT __attribute__((visibility("default")))

static int soft_on(void) { return hm__opt.record && hm__opt.backend == HM_BACKEND_SOFT; }

/* Blocks the sampling signal; returns whether it did (and the old mask). */
static int hold(sigset_t *old)
{
    if (!soft_on())
        return 0;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, hm__opt.sig);
    return pthread_sigmask(SIG_BLOCK, &s, old) == 0;
}

static void release(int held, const sigset_t *old)
{
    if (held)
        pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* A caller's signal mask for the duration of the call, with ours added. */
static const sigset_t *with_ours(const sigset_t *m, sigset_t *buf)
{
    if (!m || !soft_on())
        return m;
    *buf = *m;
    sigaddset(buf, hm__opt.sig);
    return buf;
}

#define REAL(type, name, args)                                     \
    static type(*real_##name) args;                                \
    if (!real_##name)                                              \
        real_##name = (type(*) args)dlsym(RTLD_NEXT, #name);       \
    if (!real_##name) {                                            \
        errno = ENOSYS;                                            \
        return (type)-1;                                           \
    }

/* Each wrapper: hold, call, restore errno across the mask restore. */
#define HELD_CALL(type, expr)        \
    do {                             \
        sigset_t old_;               \
        int held_ = hold(&old_);     \
        type r_ = (expr);            \
        int e_ = errno;              \
        release(held_, &old_);       \
        errno = e_;                  \
        return r_;                   \
    } while (0)

EXPORT unsigned int sleep(unsigned int s)
{
    REAL(unsigned int, sleep, (unsigned int))
    HELD_CALL(unsigned int, real_sleep(s));
}

EXPORT int usleep(useconds_t us)
{
    REAL(int, usleep, (useconds_t))
    HELD_CALL(int, real_usleep(us));
}

EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    REAL(int, nanosleep, (const struct timespec *, struct timespec *))
    HELD_CALL(int, real_nanosleep(req, rem));
}

EXPORT int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem)
{
    REAL(int, clock_nanosleep, (clockid_t, int, const struct timespec *, struct timespec *))
    HELD_CALL(int, real_clock_nanosleep(c, flags, req, rem));
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    REAL(int, poll, (struct pollfd *, nfds_t, int))
    HELD_CALL(int, real_poll(fds, n, timeout));
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m)
{
    REAL(int, ppoll, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *))
    sigset_t buf;
    HELD_CALL(int, real_ppoll(fds, n, t, with_ours(m, &buf)));
}

EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t)
{
    REAL(int, select, (int, fd_set *, fd_set *, fd_set *, struct timeval *))
    HELD_CALL(int, real_select(n, r, w, x, t));
}

EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *t, const sigset_t *m)
{
    REAL(int, pselect, (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *))
    sigset_t buf;
    HELD_CALL(int, real_pselect(n, r, w, x, t, with_ours(m, &buf)));
}

EXPORT int epoll_wait(int fd, struct epoll_event *ev, int n, int timeout)
{
    REAL(int, epoll_wait, (int, struct epoll_event *, int, int))
    HELD_CALL(int, real_epoll_wait(fd, ev, n, timeout));
}

EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int n, int timeout, const sigset_t *m)
{
    REAL(int, epoll_pwait, (int, struct epoll_event *, int, int, const sigset_t *))
    sigset_t buf;
    HELD_CALL(int, real_epoll_pwait(fd, ev, n, timeout, with_ours(m, &buf)));
}

EXPORT int pause(void)
{
    REAL(int, pause, (void))
    HELD_CALL(int, real_pause());
}

EXPORT int sigsuspend(const sigset_t *m)
{
    REAL(int, sigsuspend, (const sigset_t *))
    sigset_t buf;
    HELD_CALL(int, real_sigsuspend(with_ours(m, &buf)));
}
