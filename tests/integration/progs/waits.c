/* Sleeps and waits that a sampling signal must not cut short: each line is
 * "NAME RESULT ELAPSED_MS" and a program behaving as without sampling
 * prints results 0 and elapsed times of at least the requested 150 ms. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#define RUN(name, expr)                                                        \
    do {                                                                       \
        double t0_ = now_ms();                                                 \
        long r_ = (long)(expr);                                                \
        int e_ = errno;                                                        \
        printf("%s %ld%s %.0f\n", name, r_, r_ < 0 && e_ == EINTR ? "-EINTR" : "", now_ms() - t0_); \
    } while (0)

int main(void)
{
    /* Some work first, so the sampler has a running thread to sample. */
    volatile double s = 0;
    for (int i = 0; i < 20000000; i++)
        s += i;
    struct timespec ts = {0, 150000000};
    struct timeval tv = {0, 150000};
    int ep = epoll_create1(0);
    struct epoll_event ev;
    RUN("nanosleep", nanosleep(&ts, NULL));
    RUN("usleep", usleep(150000));
    RUN("poll", poll(NULL, 0, 150));
    RUN("select", select(0, NULL, NULL, NULL, &tv));
    RUN("epoll_wait", epoll_wait(ep, &ev, 1, 150));
    RUN("clock_nanosleep", clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL));
    return 0;
}
