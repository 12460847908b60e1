/* Runs a command once and writes its wall time and the CPU time (user and
 * system) of its whole process tree, in seconds with microsecond
 * resolution, where /usr/bin/time gives hundredths: a start-up cost of a
 * few milliseconds must be measurable.
 *
 * Usage: bench_timeit -o FILE -- CMD ARGS
 * FILE gets "WALL USER SYS\n". The command's output is left alone; the
 * exit status is the command's (128+N when killed by signal N). */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"

extern char **environ;

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec / 1e6; }

int main(int argc, char **argv)
{
    const char *out = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            break;
        }
    }
    if (!out || i >= argc) {
        fprintf(stderr, "usage: bench_timeit -o FILE -- CMD ARGS\n");
        return 2;
    }
    FILE *f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "bench_timeit: %s: %s\n", out, strerror(errno));
        return 1;
    }
    uint64_t t0 = hm__now_ns();
    pid_t pid;
    int e = posix_spawnp(&pid, argv[i], NULL, NULL, argv + i, environ);
    if (e) {
        fprintf(stderr, "bench_timeit: %s: %s\n", argv[i], strerror(e));
        fclose(f);
        return 127;
    }
    int st;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "bench_timeit: wait: %s\n", strerror(errno));
            fclose(f);
            return 1;
        }
    }
    double wall = (double)(hm__now_ns() - t0) / 1e9;
    /* wait4's rusage covers the child and the descendants it waited for,
     * which is the whole tree of a well-behaved command. */
    fprintf(f, "%.6f %.6f %.6f\n", wall, tv(ru.ru_utime), tv(ru.ru_stime));
    if (fclose(f) != 0) {
        fprintf(stderr, "bench_timeit: %s: %s\n", out, strerror(errno));
        return 1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}
