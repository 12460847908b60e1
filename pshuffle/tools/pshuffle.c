/* pshuffle: operator commands for partial distributed shuffling.
 *   pshuffle plan --ranks M --samples N --q Q --epochs E   (no MPI)
 *   pshuffle verify DIR
 * One table of commands; per command one table of options that drives both
 * getopt_long and --help. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pshuffle.h"

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* How an option shows in the generated usage line. */
#define OPT_REQUIRED 1 /* without brackets; with OPT_ALT options after it: "(--a A | --b B)" */
#define OPT_ALT 2      /* an alternative to the option before it */

typedef struct {
    int key;
    const char *name;
    const char *arg;
    const char *help;
    int flags;
} opt_t;

typedef struct cmd {
    /* usage: the operands, after the options that help() lists from opts. */
    const char *name, *summary, *usage, *details;
    const opt_t *opts;
    int (*run)(const struct cmd *c, int argc, char **argv);
} cmd_t;

static int fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pshuffle: %s: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_RUNTIME;
}

static int usage(const cmd_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(const cmd_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pshuffle: %s: ", c->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'pshuffle %s --help')\n", c->name);
    va_end(ap);
    return EXIT_USAGE;
}

static void help(const cmd_t *c)
{
    /* The usage line from the option table, on one line (help2man takes a
     * man page's synopsis from it). */
    printf("usage: pshuffle %s", c->name);
    for (const opt_t *o = c->opts;; o++) {
        char word[160] = "";
        size_t n = 0;
        if (o->name && (o->flags & OPT_ALT))
            continue;
        if (o->name) {
            int req = (o->flags & OPT_REQUIRED) != 0, group = req && o[1].name && (o[1].flags & OPT_ALT);
            n += (size_t)snprintf(word, sizeof word, "%s", !req ? "[" : group ? "(" : "");
            for (const opt_t *a = o; a->name && (a == o || (a->flags & OPT_ALT)) && n < sizeof word; a++)
                n += (size_t)snprintf(word + n, sizeof word - n, "%s--%s%s%s", a == o ? "" : " | ", a->name,
                                      a->arg ? " " : "", a->arg ? a->arg : "");
            if (n < sizeof word)
                snprintf(word + n, sizeof word - n, "%s", !req ? "]" : group ? ")" : "");
        } else {
            snprintf(word, sizeof word, "%s", c->usage);
        }
        if (*word)
            printf(" %s", word);
        if (!o->name)
            break;
    }
    printf("\n\n%s\n\noptions:\n", c->summary);
    for (const opt_t *o = c->opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        printf("  %-22s %s\n", left, o->help);
    }
    printf("  %-22s %s\n", "-h, --help", "show this help");
    if (c->details)
        printf("\n%s\n", c->details);
}

/* Parses options from the command's table: calls back for each one. */
static int parse(const cmd_t *c, int argc, char **argv, int (*on)(const cmd_t *, int, const char *, void *), void *ctx)
{
    struct option lo[32];
    int n = 0;
    for (const opt_t *o = c->opts; o->name && n < 30; o++, n++)
        lo[n] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->key};
    lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n] = (struct option){0};
    opterr = 0;
    optind = 1;
    int k;
    uint64_t seen = 0;
    /* Options and operands in any order, as GNU tools take them. */
    while ((k = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (k == 'h') {
            help(c);
            return -1;
        }
        if (k == '?' || k == ':')
            return usage(c, "unknown option or missing value '%s'", argv[optind - 1]);
        /* As in hetmem: an option given twice is refused, naming it, rather
         * than letting the last value silently win. */
        for (int i = 0; i < n - 1; i++)
            if (lo[i].val == k) {
                if (seen >> i & 1)
                    return usage(c, "option '--%s' given twice", lo[i].name);
                seen |= UINT64_C(1) << i;
            }
        int r = on(c, k, optarg, ctx);
        if (r)
            return r;
    }
    return 0;
}

static int num_u64(const cmd_t *c, const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-' || (*out = strtoull(s, &end, 0), errno) || *end)
        return usage(c, "--%s: '%s' is not a non-negative integer", opt, s ? s : "");
    return 0;
}

static int num_double(const cmd_t *c, const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || (*out = strtod(s, &end), errno) || *end || isnan(*out))
        return usage(c, "--%s: '%s' is not a number", opt, s ? s : "");
    return 0;
}

/* ---------------------------------------------------------------- plan */

enum { O_RANKS = 256, O_SAMPLES, O_Q, O_STRATEGY, O_EPOCHS, O_SEED, O_DECAY, O_QMIN, O_JSON, O_PERRANK };
static const opt_t plan_opts[] = {
    {O_RANKS, "ranks", "M", "number of ranks (required)", OPT_REQUIRED},
    {O_SAMPLES, "samples", "N", "dataset size (required)", OPT_REQUIRED},
    {O_Q, "q", "Q", "partial: share of each rank's samples put in the pool per epoch, 0..1", OPT_REQUIRED},
    {O_STRATEGY, "strategy", "global|local|partial", "global (Q=1), local (Q=0) or partial (needs --q; the default)", OPT_ALT},
    {O_EPOCHS, "epochs", "E", "number of epochs (default 10)", 0},
    {O_SEED, "seed", "S", "seed (default 0)", 0},
    {O_DECAY, "q-decay", "R", "exponential schedule: Q_e = max(q-min, Q * R^e)", 0},
    {O_QMIN, "q-min", "Q", "floor of a decaying schedule (default 0)", 0},
    {O_PERRANK, "per-rank", NULL, "also print each rank's totals over all epochs", 0},
    {O_JSON, "json", NULL, "print JSON instead of tables", 0},
    {0},
};

typedef struct {
    uint64_t ranks, samples, epochs, seed;
    double q, decay, qmin;
    int have_ranks, have_samples, have_q, decaying, json, per_rank, strategy;
} plan_args_t;

static int plan_opt(const cmd_t *c, int k, const char *a, void *ctx)
{
    plan_args_t *p = ctx;
    switch (k) {
    case O_RANKS: p->have_ranks = 1; return num_u64(c, "ranks", a, &p->ranks);
    case O_SAMPLES: p->have_samples = 1; return num_u64(c, "samples", a, &p->samples);
    case O_Q: p->have_q = 1; return num_double(c, "q", a, &p->q);
    case O_STRATEGY:
        if (!strcmp(a, "global"))
            p->strategy = 1;
        else if (!strcmp(a, "local"))
            p->strategy = 2;
        else if (!strcmp(a, "partial"))
            p->strategy = 0;
        else
            return usage(c, "--strategy: '%s' is not global, local or partial", a);
        return 0;
    case O_EPOCHS: return num_u64(c, "epochs", a, &p->epochs);
    case O_SEED: return num_u64(c, "seed", a, &p->seed);
    case O_DECAY: p->decaying = 1; return num_double(c, "q-decay", a, &p->decay);
    case O_QMIN: return num_double(c, "q-min", a, &p->qmin);
    case O_JSON: p->json = 1; return 0;
    case O_PERRANK: p->per_rank = 1; return 0;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double q;
    uint64_t send_min, send_max, recv_min, recv_max, peak;
    double mixed;
} epoch_row_t;

static int run_plan(const cmd_t *c, int argc, char **argv)
{
    plan_args_t a = {.epochs = 10};
    int r = parse(c, argc, argv, plan_opt, &a);
    if (r)
        return r < 0 ? 0 : r;
    if (optind < argc)
        return usage(c, "unexpected operand '%s'", argv[optind]);
    if (!a.have_ranks || !a.have_samples)
        return usage(c, "--ranks and --samples are required");
    if (a.strategy && (a.have_q || a.decaying))
        return usage(c, "--strategy %s takes no --q or --q-decay", a.strategy == 1 ? "global" : "local");
    if (!a.strategy && !a.have_q)
        return usage(c, "--q is required with the partial strategy");
    if (a.strategy)
        a.q = a.strategy == 1 ? 1.0 : 0.0;
    if (a.ranks < 1 || a.ranks > 65536)
        return usage(c, "--ranks: %" PRIu64 " outside 1..65536", a.ranks);
    if (a.samples < a.ranks || a.samples > (UINT64_C(1) << 32))
        return usage(c, "--samples: %" PRIu64 " must be at least the rank count and at most 2^32", a.samples);
    if (a.epochs < 1 || a.epochs > 100000)
        return usage(c, "--epochs: %" PRIu64 " outside 1..100000", a.epochs);
    ps_schedule_t s = {.kind = a.decaying ? PS_Q_EXP : PS_Q_CONST, .q0 = a.q, .q_rate = a.decay, .q_min = a.qmin};
    if (ps_schedule_check(&s))
        return usage(c, "%s", ps_errdetail());

    int M = (int)a.ranks;
    uint64_t N = a.samples;
    uint64_t **held = calloc((size_t)M, sizeof *held), **next = calloc((size_t)M, sizeof *next);
    uint64_t *counts = calloc((size_t)M, sizeof *counts), *origin_lo = calloc((size_t)M + 1, sizeof *origin_lo);
    ps_plan_t *plans = calloc((size_t)M, sizeof *plans);
    epoch_row_t *rows = calloc(a.epochs, sizeof *rows);
    uint64_t *tot_sent = calloc((size_t)M, sizeof *tot_sent), *tot_recv = calloc((size_t)M, sizeof *tot_recv);
    uint64_t *peak_r = calloc((size_t)M, sizeof *peak_r);
    int err = 0;
    if (!held || !next || !counts || !origin_lo || !plans || !rows || !tot_sent || !tot_recv || !peak_r)
        return fail("plan", "out of memory");
    for (int q = 0; q <= M; q++)
        origin_lo[q] = N * (uint64_t)q / (uint64_t)M;
    for (int q = 0; q < M; q++) {
        counts[q] = origin_lo[q + 1] - origin_lo[q];
        held[q] = malloc(counts[q] * sizeof **held);
        next[q] = malloc(counts[q] * sizeof **next);
        if (!held[q] || !next[q])
            return fail("plan", "out of memory");
        for (uint64_t i = 0; i < counts[q]; i++)
            held[q][i] = origin_lo[q] + i;
    }
    for (uint64_t e = 0; e < a.epochs && !err; e++) {
        epoch_row_t *row = &rows[e];
        row->q = ps_schedule_q(&s, e);
        row->send_min = row->recv_min = UINT64_MAX;
        err = ps_plan_compute_all(plans, a.seed, e, row->q, counts, M);
        if (err)
            break;
        for (int q = 0; q < M; q++) {
            /* What q keeps, then what every sender's plan deals to it; the
             * result must be the count q's own plan promises. */
            const ps_plan_t *p = &plans[q];
            unsigned char *gone = calloc(counts[q] ? counts[q] : 1, 1);
            uint64_t *nx = realloc(next[q], (p->count_after ? p->count_after : 1) * sizeof **next);
            uint64_t k = 0, sent = p->nsend, got = 0;
            if (!gone || !nx)
                return fail("plan", "out of memory");
            next[q] = nx;
            for (uint64_t i = 0; i < p->nsend; i++)
                gone[p->send_pos[i]] = 1;
            for (uint64_t i = 0; i < counts[q]; i++)
                if (!gone[i] && k < p->count_after)
                    next[q][k++] = held[q][i];
            for (int src = 0; src < M; src++) {
                uint64_t from = 0;
                for (uint64_t i = 0; i < plans[src].nsend; i++) {
                    if (plans[src].send_to[i] != q)
                        continue;
                    if (k < p->count_after)
                        next[q][k] = held[src][plans[src].send_pos[i]];
                    k++, got++, from++;
                }
                if (from != p->recv_count[src]) {
                    free(gone);
                    return fail("plan", "internal error: rank %d sends %" PRIu64 " samples to rank %d, which expects %"
                                PRIu64, src, from, q, p->recv_count[src]);
                }
            }
            free(gone);
            if (k != p->count_after)
                return fail("plan", "internal error: rank %d would hold %" PRIu64 " samples, not %" PRIu64, q, k,
                            p->count_after);
            row->send_min = sent < row->send_min ? sent : row->send_min;
            row->send_max = sent > row->send_max ? sent : row->send_max;
            row->recv_min = got < row->recv_min ? got : row->recv_min;
            row->recv_max = got > row->recv_max ? got : row->recv_max;
            if (counts[q] + got > row->peak)
                row->peak = counts[q] + got;
            tot_sent[q] += sent;
            tot_recv[q] += got;
            if (counts[q] + got > peak_r[q])
                peak_r[q] = counts[q] + got;
        }
        for (int q = 0; q < M; q++) {
            uint64_t *hq = realloc(held[q], (plans[q].count_after ? plans[q].count_after : 1) * sizeof **held);
            if (!hq)
                return fail("plan", "out of memory");
            held[q] = hq;
        }
        uint64_t away = 0;
        for (int q = 0; q < M; q++) {
            uint64_t *t = held[q];
            held[q] = next[q];
            next[q] = t;
            counts[q] = plans[q].count_after;
            qsort(held[q], counts[q], sizeof **held, cmp_u64);
            for (uint64_t i = 0; i < counts[q]; i++)
                away += held[q][i] < origin_lo[q] || held[q][i] >= origin_lo[q + 1];
            ps_plan_free(&plans[q]);
        }
        row->mixed = (double)away / (double)N;
    }
    if (err)
        return fail("plan", "%s", ps_errdetail());

    uint64_t nmin = counts[M - 1], nmax = counts[0];
    for (int q = 0; q < M; q++) {
        nmin = counts[q] < nmin ? counts[q] : nmin;
        nmax = counts[q] > nmax ? counts[q] : nmax;
    }
    if (a.json) {
        if (a.per_rank) {
            printf("{\"per_rank\": [");
            for (int q = 0; q < M; q++)
                printf("%s{\"rank\": %d, \"samples\": %" PRIu64 ", \"sent\": %" PRIu64 ", \"received\": %" PRIu64
                       ", \"peak_storage\": %" PRIu64 "}", q ? ", " : "", q, counts[q], tot_sent[q], tot_recv[q], peak_r[q]);
            printf("],\n ");
        } else {
            printf("{");
        }
        printf("\"ranks\": %d, \"samples\": %" PRIu64 ", \"seed\": %" PRIu64 ", \"local_min\": %" PRIu64
               ", \"local_max\": %" PRIu64 ", \"epochs\": [",
               M, N, a.seed, nmin, nmax);
        for (uint64_t e = 0; e < a.epochs; e++)
            printf("%s\n  {\"epoch\": %" PRIu64 ", \"q\": %.6g, \"send_min\": %" PRIu64 ", \"send_max\": %" PRIu64
                   ", \"recv_min\": %" PRIu64 ", \"recv_max\": %" PRIu64 ", \"peak_storage\": %" PRIu64
                   ", \"mixed\": %.6f}",
                   e ? "," : "", e, rows[e].q, rows[e].send_min, rows[e].send_max, rows[e].recv_min, rows[e].recv_max,
                   rows[e].peak, rows[e].mixed);
        printf("\n]}\n");
    } else {

        printf("plan: %d ranks, %" PRIu64 " samples (%" PRIu64 "..%" PRIu64 " per rank), seed %" PRIu64 "\n\n", M, N,
               nmin, nmax, a.seed);
        printf("%5s  %8s  %17s  %17s  %12s  %8s\n", "epoch", "Q", "sent/rank", "received/rank", "peak/rank", "mixed");
        for (uint64_t e = 0; e < a.epochs; e++) {
            char sr[40], rr[40];
            if (rows[e].send_min == rows[e].send_max)
                snprintf(sr, sizeof sr, "%" PRIu64, rows[e].send_min);
            else
                snprintf(sr, sizeof sr, "%" PRIu64 "..%" PRIu64, rows[e].send_min, rows[e].send_max);
            if (rows[e].recv_min == rows[e].recv_max)
                snprintf(rr, sizeof rr, "%" PRIu64, rows[e].recv_min);
            else
                snprintf(rr, sizeof rr, "%" PRIu64 "..%" PRIu64, rows[e].recv_min, rows[e].recv_max);
            printf("%5" PRIu64 "  %8.4f  %17s  %17s  %12" PRIu64 "  %7.2f%%\n", e, rows[e].q, sr, rr, rows[e].peak,
                   100.0 * rows[e].mixed);
        }
        printf("\nmixed: share of all samples that are not on their original rank after the epoch\n");
        if (a.per_rank) {
            printf("\nper rank, over %" PRIu64 " epochs:\n%6s  %10s  %10s  %10s  %10s\n", a.epochs, "rank", "samples", "sent",
                   "received", "peak");
            for (int q = 0; q < M; q++)
                printf("%6d  %10" PRIu64 "  %10" PRIu64 "  %10" PRIu64 "  %10" PRIu64 "\n", q, counts[q], tot_sent[q],
                       tot_recv[q], peak_r[q]);
        }
    }
    for (int q = 0; q < M; q++)
        free(held[q]), free(next[q]);
    free(held), free(next), free(counts), free(origin_lo), free(plans), free(rows);
    free(tot_sent), free(tot_recv), free(peak_r);
    return 0;
}

/* -------------------------------------------------------------- verify */

static const opt_t verify_opts[] = {
    {O_JSON, "json", NULL, "print JSON", 0},
    {0},
};

static int verify_opt(const cmd_t *c, int k, const char *a, void *ctx)
{
    if (k == O_JSON)
        *(int *)ctx = 1;
    return 0;
}

static int run_verify(const cmd_t *c, int argc, char **argv)
{
    int json = 0, r = parse(c, argc, argv, verify_opt, &json);
    if (r)
        return r < 0 ? 0 : r;
    if (optind + 1 != argc)
        return usage(c, "expected one store directory");
    const char *dir = argv[optind];
    ps_verify_t v;
    int err = ps_verify_dir(dir, &v);
    if (err && (err != PS_ECORRUPT || !v.nranks || !v.first_problem[0]))
        return fail(dir, "%s%s%s", ps_strerror(err), ps_errdetail()[0] ? ": " : "", ps_errdetail());
    if (json) {
        printf("{\"ok\": %s, \"ranks\": %d, \"epoch\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"min_count\": %" PRIu64 ", \"max_count\": %" PRIu64 ", \"bad_checksum\": %" PRIu64
               ", \"missing\": %" PRIu64 ", \"duplicates\": %" PRIu64 ", \"orphans\": %" PRIu64 "}\n",
               err ? "false" : "true", v.nranks, v.epoch, v.samples, v.bytes, v.min_count, v.max_count, v.bad_checksum,
               v.missing, v.duplicates, v.orphans);
    } else {
        printf("store        %s\n", dir);
        printf("ranks        %d\n", v.nranks);
        printf("epoch        %" PRIu64 "\n", v.epoch);
        printf("samples      %" PRIu64 " (%" PRIu64 "..%" PRIu64 " per rank)\n", v.samples, v.min_count, v.max_count);
        printf("bytes        %" PRIu64 "\n", v.bytes);
        printf("bad          %" PRIu64 "\n", v.bad_checksum);
        printf("missing      %" PRIu64 "\n", v.missing);
        printf("duplicates   %" PRIu64 "\n", v.duplicates);
        printf("orphans      %" PRIu64 " (left by an interrupted exchange; removed on the next open)\n", v.orphans);
    }
    if (err)
        return fail(dir, "%s", v.first_problem[0] ? v.first_problem : ps_errdetail());
    return 0;
}

static const cmd_t cmds[] = {
    {"plan", "Print the exchange plan's statistics for a configuration, without MPI.",
     "",
     "Columns: samples sent and received per rank (min..max over ranks), peak samples stored on a\n"
     "rank during the exchange, and the share of samples that have left their original rank.",
     plan_opts, run_plan},
    {"verify", "Check a directory store: manifests, checksums, counts, duplicates across ranks.",
     "DIR", "Exit status 0 when the store is sound, 1 when a problem was found.", verify_opts,
     run_verify},
};

#ifndef PSHUFFLE_VERSION
#define PSHUFFLE_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        printf("pshuffle %s\n", PSHUFFLE_VERSION);
        return 0;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: pshuffle COMMAND [OPTIONS]\n\ncommands:\n");
        for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
            fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
        fprintf(f, "\nRun 'pshuffle COMMAND --help' or 'pshuffle help COMMAND' for a command's options,\n"
                   "'pshuffle --version' for the version.\n");
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "help") && argc >= 3) {
        /* pshuffle help COMMAND: the command's --help. */
        for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
            if (!strcmp(argv[2], cmds[i].name)) {
                help(&cmds[i]);
                return 0;
            }
        fprintf(stderr, "pshuffle: help: %s: unknown command (see 'pshuffle --help')\n", argv[2]);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help")) {
        char *h[] = {argv[0], "--help", NULL};
        return main(2, h);
    }
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].run(&cmds[i], argc - 1, argv + 1);
    fprintf(stderr, "pshuffle: unknown command '%s' (see 'pshuffle --help')\n", argv[1]);
    return EXIT_USAGE;
}
