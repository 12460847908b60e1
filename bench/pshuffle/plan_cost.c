/* bench_pshuffle_plan: time and memory of one rank's exchange plan
 * (ps_plan_compute, the call every rank makes at ps_exchange_begin) for a
 * job of M ranks and N samples, without MPI. Driven by bench/pshuffle-scale.
 *
 *   bench_pshuffle_plan --ranks M --samples N --q Q [--reps R] [--rank r]
 *
 * Prints one JSON object: the median, min and max wall time of R plans
 * (epochs 0..R-1) of rank r, their median CPU time (what the plan costs
 * whatever else runs on the machine), the peak resident memory the plan added (VmHWM after
 * resetting it through /proc/self/clear_refs; -1 where that is not
 * allowed), and the plan's shape (pool, sent, received, distinct peers).
 *
 *   bench_pshuffle_plan --copy MIB
 *
 * measures instead the per-byte work a receiver does on each sample (copy
 * into the store and XXH3 checksum) over MIB MiB, in CPU time, so that the
 * figure does not depend on how busy the machine is. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "pshuffle.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* kB of a "Name:   123 kB" line of /proc/self/status, -1 if absent. */
static long status_kb(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Resets the peak RSS to the current RSS (Linux >= 4.0). */
static int reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Copy + checksum in 1 MiB pieces through 64 MiB buffers (beyond the
 * caches, as a stream of received samples is). */
static int copy_bench(uint64_t mib)
{
    const size_t buf = 64u << 20, piece = 1u << 20;
    unsigned char *src = malloc(buf), *dst = malloc(buf);
    if (!src || !dst) {
        fprintf(stderr, "bench_pshuffle_plan: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < buf; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13), dst[i] = 0;
    uint64_t h = 0;
    double w0 = now_s(), c0 = cpu_s();
    for (uint64_t done = 0; done < mib; done++) {
        size_t off = (size_t)(done % (buf / piece)) * piece;
        memcpy(dst + off, src + off, piece);
        h ^= XXH3_64bits(dst + off, piece);
    }
    double c = cpu_s() - c0, w = now_s() - w0;
    printf("{\"copy_mib\": %" PRIu64 ", \"cpu_s\": %.4f, \"wall_s\": %.4f, \"copy_hash_gbps\": %.3f, \"check\": %" PRIu64 "}\n",
           mib, c, w, (double)mib * 1048576.0 / c / 1e9, h & 1);
    free(src);
    free(dst);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_pshuffle_plan --ranks M --samples N --q Q [--reps R] [--rank r] | --copy MIB\n");
    return 2;
}

static int parse_u64(const char *opt, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "bench_pshuffle_plan: %s: '%s' is not a non-negative integer\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t M = 0, N = 0, reps = 5, rank = 0;
    double q = -1;
    int have_rank = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--ranks")) {
            if (parse_u64(a, v, &M)) return 2;
        } else if (!strcmp(a, "--samples")) {
            if (parse_u64(a, v, &N)) return 2;
        } else if (!strcmp(a, "--reps")) {
            if (parse_u64(a, v, &reps)) return 2;
        } else if (!strcmp(a, "--copy")) {
            uint64_t mib;
            if (parse_u64(a, v, &mib) || mib < 1 || mib > 1u << 20) {
                fprintf(stderr, "bench_pshuffle_plan: --copy: 1..1048576 MiB\n");
                return 2;
            }
            return copy_bench(mib);
        } else if (!strcmp(a, "--rank")) {
            if (parse_u64(a, v, &rank)) return 2;
            have_rank = 1;
        } else if (!strcmp(a, "--q")) {
            char *end;
            q = strtod(v, &end);
            if (end == v || *end || !(q >= 0 && q <= 1)) {
                fprintf(stderr, "bench_pshuffle_plan: --q: '%s' is not a number in [0, 1]\n", v);
                return 2;
            }
        } else {
            return usage();
        }
    }
    if (M < 1 || M > 1u << 20 || N < 1 || q < 0 || reps < 1 || reps > 1000) {
        fprintf(stderr, "bench_pshuffle_plan: need --ranks 1..1048576, --samples >= 1, --q in [0, 1], --reps 1..1000\n");
        return 2;
    }
    if (!have_rank)
        rank = M / 2;
    if (rank >= M) {
        fprintf(stderr, "bench_pshuffle_plan: --rank %" PRIu64 " of %" PRIu64 " ranks\n", rank, M);
        return 2;
    }
    /* Balanced counts, as after any exchange. */
    uint64_t *counts = malloc(M * sizeof *counts);
    double *t = malloc(reps * sizeof *t), *tc = malloc(reps * sizeof *tc);
    if (!counts || !t || !tc) {
        fprintf(stderr, "bench_pshuffle_plan: out of memory\n");
        return 1;
    }
    for (uint64_t r = 0; r < M; r++)
        counts[r] = N / M + (r < N % M);
    long rss0 = -1, peak_kb = -1;
    ps_plan_t p;
    uint64_t npool = 0, nsend = 0, nrecv = 0, peers = 0;
    for (uint64_t e = 0; e < reps; e++) {
        int hwm = reset_hwm() == 0;
        if (hwm)
            rss0 = status_kb("VmRSS");
        double a = now_s(), ac = cpu_s();
        int err = ps_plan_compute(&p, 1, e, q, counts, (int)M, (int)rank);
        t[e] = now_s() - a;
        tc[e] = cpu_s() - ac;
        if (err) {
            fprintf(stderr, "bench_pshuffle_plan: plan: %s: %s\n", ps_strerror(err), ps_errdetail());
            return 1;
        }
        long h = hwm ? status_kb("VmHWM") : -1;
        if (h >= 0 && rss0 >= 0 && h - rss0 > peak_kb)
            peak_kb = h - rss0;
        if (e == 0) {
            npool = p.npool, nsend = p.nsend, nrecv = p.nrecv;
            /* Distinct peers: ranks this one sends to or receives from. */
            unsigned char *seen = calloc(M, 1);
            if (seen) {
                for (uint64_t j = 0; j < p.nsend; j++)
                    seen[p.send_to[j]] |= 1;
                for (uint64_t r = 0; r < M; r++)
                    if (p.recv_count[r])
                        seen[r] |= 2;
                for (uint64_t r = 0; r < M; r++)
                    peers += seen[r] != 0;
                free(seen);
            }
        }
        ps_plan_free(&p);
    }
    qsort(t, reps, sizeof *t, cmp_d);
    qsort(tc, reps, sizeof *tc, cmp_d);
    double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    double medc = reps % 2 ? tc[reps / 2] : 0.5 * (tc[reps / 2 - 1] + tc[reps / 2]);
    printf("{\"ranks\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"q\": %g, \"rank\": %" PRIu64 ", \"reps\": %" PRIu64
           ", \"plan_ms_median\": %.4f, \"plan_ms_min\": %.4f, \"plan_ms_max\": %.4f, \"plan_cpu_ms_median\": %.4f"
           ", \"peak_kib\": %ld"
           ", \"npool\": %" PRIu64 ", \"nsend\": %" PRIu64 ", \"nrecv\": %" PRIu64 ", \"peers\": %" PRIu64 "}\n",
           M, N, q, rank, reps, med * 1e3, t[0] * 1e3, t[reps - 1] * 1e3, medc * 1e3, peak_kb, npool, nsend, nrecv, peers);
    free(counts);
    free(t);
    free(tc);
    return 0;
}
