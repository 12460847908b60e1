/* Timer floor: what periodic per-thread timer interrupts cost on this
 * machine, with no hetmem code at all. A fixed compute loop runs with no
 * timer, then under a per-thread POSIX timer (CLOCK_MONOTONIC,
 * SIGEV_THREAD_ID, the soft sampler's kind of timer) at each rate, whose
 * handler only counts. Rounds are interleaved (every rate once, then
 * again) so that machine noise hits every rate alike; each rate's slowdown
 * is the median over --reps rounds of its time against the timer-free run
 * of the same round. The slowdown at a rate is the least any sampler driven by such a
 * timer can cost; divided by the ticks it gives the cost of one interrupt.
 *
 * Usage: bench_timer_floor [--iters N] [--reps R] [--hz A,B,...]
 * Prints one line per rate and, last, a line of key=value pairs for
 * scripts: plain_s=, then hz<R>_pct= and hz<R>_us= per rate. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

#define MAXHZ 8
#define MAXREPS 64

static volatile sig_atomic_t ticks;

static void on_tick(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    ticks++;
}

/* The loop carries a dependency through a volatile so the compiler can
 * neither vectorise nor drop it: its time is proportional to iters. */
static double loop(uint64_t iters)
{
    volatile double x = 0;
    uint64_t t0 = hm__now_ns();
    for (uint64_t i = 0; i < iters; i++)
        x += (double)i * 0.5;
    return (double)(hm__now_ns() - t0) / 1e9;
}

/* Runs the loop under a per-thread timer at hz (0: none); returns seconds
 * and leaves the ticks delivered in *nt. */
static int timed_run(uint64_t iters, unsigned hz, int sig, double *sec, long *nt)
{
    timer_t tm;
    ticks = 0;
    if (hz) {
        struct sigevent se;
        memset(&se, 0, sizeof se);
        se.sigev_notify = SIGEV_THREAD_ID;
        se.sigev_signo = sig;
        se._sigev_un._tid = (pid_t)syscall(SYS_gettid);
        if (timer_create(CLOCK_MONOTONIC, &se, &tm) != 0)
            return -errno;
        long ns = 1000000000L / (long)hz;
        struct itimerspec its = {{0, ns}, {0, ns}};
        if (timer_settime(tm, 0, &its, NULL) != 0) {
            int e = errno;
            timer_delete(tm);
            return -e;
        }
    }
    *sec = loop(iters);
    if (hz)
        timer_delete(tm);
    *nt = ticks;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_timer_floor [--iters N] [--reps R (1..%d)] [--hz A,B,... (at most %d rates, 1..100000)]\n",
            MAXREPS, MAXHZ - 1);
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t iters = 400000000, reps = 7;
    unsigned hz[MAXHZ] = {0, 1000, 10000};
    int nhz = 3;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--iters") && v) {
            if (hm__parse_u64(v, &iters) != 0 || !iters) {
                fprintf(stderr, "bench_timer_floor: --iters: '%s' is not a positive integer\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "--reps") && v) {
            if (hm__parse_u64(v, &reps) != 0 || reps < 1 || reps > MAXREPS) {
                fprintf(stderr, "bench_timer_floor: --reps: '%s' is outside 1..%d\n", v, MAXREPS);
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "--hz") && v) {
            nhz = 1; /* slot 0 stays the run without a timer */
            char *s = strdup(v), *save = NULL;
            for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                uint64_t x;
                if (nhz == MAXHZ || hm__parse_u64(tok, &x) != 0 || x < 1 || x > 100000) {
                    fprintf(stderr, "bench_timer_floor: --hz: '%s' is not a list of at most %d rates in 1..100000\n", v,
                            MAXHZ - 1);
                    free(s);
                    return 2;
                }
                hz[nhz++] = (unsigned)x;
            }
            free(s);
            i++;
        } else {
            usage();
        }
    }

    int sig = SIGRTMIN + 4;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) {
        fprintf(stderr, "bench_timer_floor: sigaction: %s\n", strerror(errno));
        return 1;
    }

    static double sec[MAXHZ][MAXREPS];
    static long nt[MAXHZ][MAXREPS];
    loop(iters / 8); /* warm up: clock ramp, page faults */
    for (uint64_t r = 0; r < reps; r++)
        for (int k = 0; k < nhz; k++) {
            int rc = timed_run(iters, hz[k], sig, &sec[k][r], &nt[k][r]);
            if (rc) {
                fprintf(stderr, "bench_timer_floor: per-thread timer at %u Hz: %s\n", hz[k], strerror(-rc));
                return 1;
            }
        }

    /* Slowdowns are paired by round (each rate against the timer-free run
     * of the same round), then the median is taken: a burst of load on the
     * shared machine then spoils one round, not one rate. */
    double med[MAXHZ], slow[MAXHZ], us[MAXHZ], tk[MAXHZ];
    for (int k = 0; k < nhz; k++) {
        double t[MAXREPS], p[MAXREPS], u[MAXREPS];
        for (uint64_t r = 0; r < reps; r++) {
            t[r] = (double)nt[k][r];
            p[r] = 100.0 * (sec[k][r] - sec[0][r]) / sec[0][r];
            u[r] = nt[k][r] > 0 ? (sec[k][r] - sec[0][r]) * 1e6 / (double)nt[k][r] : 0;
        }
        tk[k] = median(t, (int)reps);
        slow[k] = median(p, (int)reps);
        us[k] = median(u, (int)reps);
        double c[MAXREPS];
        memcpy(c, sec[k], sizeof c);
        med[k] = median(c, (int)reps);
    }
    printf("loop of %llu iterations, medians of %llu interleaved rounds\n", (unsigned long long)iters,
           (unsigned long long)reps);
    printf("%-10s %9s %9s %10s %12s\n", "timer", "time (s)", "slowdown", "ticks", "us per tick");
    printf("%-10s %9.3f %9s %10s %12s\n", "none", med[0], "", "", "");
    char kv[512];
    int o = snprintf(kv, sizeof kv, "plain_s=%.3f", med[0]);
    for (int k = 1; k < nhz; k++) {
        char name[32];
        snprintf(name, sizeof name, "%u Hz", hz[k]);
        printf("%-10s %9.3f %+8.1f%% %10.0f %12.1f\n", name, med[k], slow[k], tk[k], us[k]);
        if (o >= 0 && (size_t)o < sizeof kv)
            o += snprintf(kv + o, sizeof kv - (size_t)o, " hz%u_pct=%.1f hz%u_us=%.1f", hz[k], slow[k], hz[k], us[k]);
    }
    printf("%s\n", kv);
    return 0;
}
