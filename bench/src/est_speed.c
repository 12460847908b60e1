/* Speed of the runtime estimator: full estimates, incremental moves and
 * summary building, as medians of several repetitions.
 *
 * Usage: bench_est_speed [--reps N] [--placement FILE] [--synthetic W,O,D]
 *                        [--synthetic-out FILE] [--summary FILE | TRACE...]
 *
 * With traces: summary building (hm_estimator_open) in samples per second
 * (the median of the repetitions, and the first one, this process's first
 * summary, apart),
 * the samples counted from the traces' indexes (hm_trace_stats). With
 * traces or a saved summary: full estimates per second of the placement
 * file (hm_estimator_estimate: the same handle again, whose rules the
 * estimator keeps matched, and the first estimate of a handle, which
 * matches them), of a state rebuilt from scratch
 * (hm_est_state_open, which recomputes every term, then
 * hm_est_state_estimate), and incremental moves per second
 * (hm_est_state_move of random objects to random devices), for each model.
 * --synthetic W,O,D also builds a summary of W windows x O objects x D
 * devices as JSON (the format of estimate.h), opens it with
 * hm_estimator_parse_summary and times the same queries, with a placement
 * that puts every other object on the second device, and again calibrated
 * on that placement measured 10% slower than estimated (the mix term on:
 * "synthetic_calibrated"). Prints one JSON object.
 * Queries are timed in CPU time of the thread (the machine may be shared);
 * summary building in wall time and in CPU time of the process (it reads
 * the traces on several threads). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "hetmem/estimate.h"
#include "hetmem/placement.h"
#include "hetmem/trace.h"

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

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_est_speed: %s: %s%s%s\n", what, hm_strerror(rc), *hm_errdetail() ? ": " : "",
            hm_errdetail());
    exit(1);
}

/* Calls per timing: enough for ~20 ms at the expected speed. */
#define BATCH_EST 20000
#define BATCH_MOVE 200000

static volatile double sink;

/* CPU time of the calling thread, ns: the queries run on one thread, and on a
 * shared machine its CPU time is far steadier than wall time. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t proc_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Times the queries on @p e; prints the JSON members (no braces). @p cold
 * holds NCOLD handles of the same placement, more than an estimator keeps
 * compiled, estimated in turn: each estimate then matches the rules again
 * (the first estimate of a placement). */
#define NCOLD 9
static void queries(hm_estimator_t *e, hm_placement_t *pl, hm_placement_t *const *cold, int reps)
{
    int O = hm_estimator_nobjects(e), D = hm_estimator_ndevices(e);
    double *v = hm__xcalloc((size_t)reps, sizeof *v);
    printf("\"windows\": %d, \"objects\": %d, \"devices\": %d, \"phases\": %d", hm_estimator_nwindows(e), O, D,
           hm_estimator_nphases(e));
    for (int m = 0; m < HM_EST_NMODELS; m++) {
        const char *mn = hm_est_model_name((hm_est_model_t)m);
        hm_estimate_t r;
        int rc;
        if (pl) {
            for (int k = 0; k < reps; k++) {
                uint64_t t0 = cpu_ns();
                for (int i = 0; i < BATCH_EST; i++) {
                    if ((rc = hm_estimator_estimate(e, pl, (hm_est_model_t)m, &r, NULL)) < 0)
                        die("hm_estimator_estimate", rc);
                    sink += r.runtime_ns;
                }
                v[k] = (double)(cpu_ns() - t0) / BATCH_EST;
            }
            printf(", \"%s_placement_estimate_ns\": %.1f", mn, median(v, reps));
        }
        if (cold) {
            for (int k = 0; k < reps; k++) {
                uint64_t t0 = cpu_ns();
                for (int i = 0; i < BATCH_EST; i++) {
                    if ((rc = hm_estimator_estimate(e, cold[i % NCOLD], (hm_est_model_t)m, &r, NULL)) < 0)
                        die("hm_estimator_estimate", rc);
                    sink += r.runtime_ns;
                }
                v[k] = (double)(cpu_ns() - t0) / BATCH_EST;
            }
            printf(", \"%s_placement_first_estimate_ns\": %.1f", mn, median(v, reps));
        }
        for (int k = 0; k < reps; k++) {
            uint64_t t0 = cpu_ns();
            for (int i = 0; i < BATCH_EST; i++) {
                hm_est_state_t *s;
                if ((rc = hm_est_state_open(&s, e, (hm_est_model_t)m, 0)) < 0)
                    die("hm_est_state_open", rc);
                hm_est_state_estimate(s, &r);
                sink += r.runtime_ns;
                hm_est_state_close(s);
            }
            v[k] = (double)(cpu_ns() - t0) / BATCH_EST;
        }
        printf(", \"%s_state_estimate_ns\": %.1f", mn, median(v, reps));
        if (O < 2)
            continue;
        hm_est_state_t *s;
        if ((rc = hm_est_state_open(&s, e, (hm_est_model_t)m, 0)) < 0)
            die("hm_est_state_open", rc);
        /* Moves drawn beforehand, so that the draw is not timed. */
        int *mo = hm__xcalloc(BATCH_MOVE, sizeof *mo), *md = hm__xcalloc(BATCH_MOVE, sizeof *md);
        for (int i = 0; i < BATCH_MOVE; i++) {
            mo[i] = (int)(rng() % (uint64_t)(O - 1)); /* the last object is the untracked one */
            md[i] = (int)(rng() % (uint64_t)D);
        }
        for (int k = 0; k < reps; k++) {
            double t;
            uint64_t t0 = cpu_ns();
            for (int i = 0; i < BATCH_MOVE; i++) {
                if ((rc = hm_est_state_move(s, -1, mo[i], md[i], 100, &t)) < 0)
                    die("hm_est_state_move", rc);
                sink += t;
            }
            v[k] = (double)(cpu_ns() - t0) / BATCH_MOVE;
        }
        printf(", \"%s_move_ns\": %.1f", mn, median(v, reps));
        free(mo);
        free(md);
        hm_est_state_close(s);
    }
    free(v);
}

/* A synthetic summary: W windows in 4 phases, O objects of decreasing
 * heat, D devices of rising latency and falling bandwidth. */
static char *synthetic(int W, int O, int D)
{
    size_t cap = 1 << 20, len = 0;
    char *s = hm__xcalloc(cap, 1);
#define PUT(...)                                                                 \
    do {                                                                         \
        int n_ = snprintf(NULL, 0, __VA_ARGS__);                                 \
        while (len + (size_t)n_ + 1 > cap)                                       \
            s = hm__xrealloc(s, cap *= 2);                                       \
        snprintf(s + len, cap - len, __VA_ARGS__);                               \
        len += (size_t)n_;                                                       \
    } while (0)
    PUT("{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [");
    for (int d = 0; d < D; d++)
        PUT("%s{\"name\": \"d%d\", \"runtime_ns\": %.0f, \"period\": 1000, \"capacity\": %llu, \"bandwidth_gbs\": %.2f, "
            "\"read_latency_ns\": %d}",
            d ? ", " : "", d, W * 1e6 * (1 + 0.5 * d), 1ull << 36, 4.0 / (1 + d), 100 + 100 * d);
    PUT("], \"phases\": [\"(no phase)\", \"p1\", \"p2\", \"p3\"], \"objects\": [");
    for (int o = 0; o < O; o++)
        PUT("%s{\"site\": \"0x%016llx\", \"name\": \"o%d\", \"size\": %llu, \"allocations\": 1}", o ? ", " : "",
            0x1000ull + (unsigned long long)o, o, (unsigned long long)(1u << 20) * (unsigned long long)(1 + o % 8));
    PUT("], \"windows\": [");
    for (int w = 0; w < W; w++) {
        PUT("%s{\"phase\": %d, \"instructions\": 1000000, \"t_ns\": [", w ? ", " : "", 1 + w * 3 / W);
        for (int d = 0; d < D; d++)
            PUT("%s%.0f", d ? ", " : "", 1e6 * (1 + 0.5 * d));
        PUT("], \"stats\": [");
        int first = 1;
        for (int o = 0; o <= O; o++) /* O: the untracked pseudo-object */
            for (int d = 0; d < D; d++) {
                double n = 1 + (double)(rng() % 64) / (1 + o % 16);
                double wt = n * (20 + 200.0 * (1 + d) * (double)(rng() % 100) / 100.0);
                PUT("%s[%d, %d, %.0f, %.0f, %.0f, %.0f]", first ? "" : ", ", o, d, n, wt, n / 2, wt / 2);
                first = 0;
            }
        PUT("]}");
    }
    PUT("]}");
#undef PUT
    return s;
}

int main(int argc, char **argv)
{
    int reps = 7, i = 1, sw = 0, so = 0, sd = 0;
    const char *placement = NULL, *summary = NULL, *synth_out = NULL;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--placement") && i + 1 < argc) {
            placement = argv[++i];
        } else if (!strcmp(argv[i], "--summary") && i + 1 < argc) {
            summary = argv[++i];
        } else if (!strcmp(argv[i], "--synthetic") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d,%d", &sw, &so, &sd) != 3 || sw < 1 || so < 1 || sd < 2) {
                fprintf(stderr, "bench_est_speed: --synthetic: expected W,O,D (W, O >= 1, D >= 2)\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--synthetic-out") && i + 1 < argc) {
            synth_out = argv[++i];
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_est_speed [--reps N] [--placement FILE] [--synthetic W,O,D] "
                            "[--synthetic-out FILE] [--summary FILE | TRACE...]\n");
            return 2;
        } else {
            break;
        }
    }
    if (reps < 1)
        reps = 1;
    int ntr = argc - i;
    const char *const *traces = (const char *const *)argv + i;
    printf("{\"reps\": %d", reps);
    if (ntr > 0 || summary) {
        hm_estimator_t *e = NULL;
        int rc;
        if (ntr > 0) {
            uint64_t samples = 0;
            for (int t = 0; t < ntr; t++) {
                hm_trace_t *tr;
                if ((rc = hm_trace_open(&tr, traces[t])) < 0)
                    die(traces[t], rc);
                hm_trace_stats_t st;
                hm_trace_stats(tr, &st);
                samples += st.records[HM_REC_SAMPLE];
                hm_trace_close(tr);
            }
            double *v = hm__xcalloc((size_t)reps, sizeof *v), *c = hm__xcalloc((size_t)reps, sizeof *c);
            for (int k = 0; k < reps; k++) {
                if (e)
                    hm_estimator_close(e);
                uint64_t t0 = hm__now_ns(), c0 = proc_cpu_ns();
                if ((rc = hm_estimator_open(&e, traces, ntr, NULL)) < 0)
                    die("hm_estimator_open", rc);
                v[k] = (double)(hm__now_ns() - t0) / 1e9;
                c[k] = (double)(proc_cpu_ns() - c0) / 1e9;
            }
            /* The first repetition is this process's first summary: what
             * one `hetmem estimate` pays (no memory of an earlier summary
             * to reuse); the median is the steady rate of a process that
             * opens many. */
            double first = v[0], cfirst = c[0];
            double med = median(v, reps), cmed = median(c, reps);
            printf(", \"traces\": {\"samples\": %llu, \"open_s\": %.6f, \"samples_per_s\": %.4g, "
                   "\"open_cpu_s\": %.6f, \"samples_per_cpu_s\": %.4g, \"first_open_s\": %.6f, "
                   "\"first_open_cpu_s\": %.6f, ",
                   (unsigned long long)samples, med, (double)samples / med, cmed, (double)samples / cmed, first,
                   cfirst);
            free(v);
            free(c);
        } else {
            if ((rc = hm_estimator_open_summary(&e, summary)) < 0)
                die(summary, rc);
            printf(", \"traces\": {");
        }
        hm_placement_t *pl = NULL, *cold[NCOLD] = {0};
        if (placement) {
            const char *dn[64];
            int nd = hm_estimator_ndevices(e);
            for (int d = 0; d < nd && d < 64; d++)
                dn[d] = hm_estimator_device_name(e, d);
            if ((rc = hm_placement_load(&pl, placement, dn, nd)) < 0)
                die(placement, rc);
            for (int k = 0; k < NCOLD; k++)
                if ((rc = hm_placement_load(&cold[k], placement, dn, nd)) < 0)
                    die(placement, rc);
        }
        queries(e, pl, placement ? cold : NULL, reps);
        printf("}");
        hm_placement_close(pl);
        for (int k = 0; k < NCOLD; k++)
            hm_placement_close(cold[k]);
        hm_estimator_close(e);
    }
    if (sw) {
        char *txt = synthetic(sw, so, sd);
        if (synth_out) {
            FILE *f = fopen(synth_out, "w");
            if (!f || fputs(txt, f) < 0 || fclose(f) != 0) {
                fprintf(stderr, "bench_est_speed: %s: %s\n", synth_out, strerror(errno));
                return 1;
            }
        }
        hm_estimator_t *e;
        int rc;
        uint64_t t0 = hm__now_ns();
        if ((rc = hm_estimator_parse_summary(&e, "synthetic summary", txt)) < 0)
            die("synthetic summary", rc);
        double parse_s = (double)(hm__now_ns() - t0) / 1e9;
        /* Every other object on the second device. */
        size_t cap = 64 + (size_t)so * 48, len = 0;
        char *pj = hm__xcalloc(cap, 1);
        len += (size_t)snprintf(pj + len, cap - len, "{\"default\": \"d0\", \"rules\": [");
        for (int o = 0; o < so; o += 2)
            len += (size_t)snprintf(pj + len, cap - len, "%s{\"name\": \"o%d\", \"device\": \"d1\"}", o ? ", " : "", o);
        snprintf(pj + len, cap - len, "]}");
        const char *dn[64];
        for (int d = 0; d < sd && d < 64; d++)
            dn[d] = hm_estimator_device_name(e, d);
        hm_placement_t *pl, *cold[NCOLD];
        if ((rc = hm_placement_parse(&pl, "synthetic placement", pj, dn, sd)) < 0)
            die("synthetic placement", rc);
        for (int k = 0; k < NCOLD; k++)
            if ((rc = hm_placement_parse(&cold[k], "synthetic placement", pj, dn, sd)) < 0)
                die("synthetic placement", rc);
        printf(", \"synthetic\": {\"json_bytes\": %zu, \"parse_s\": %.6f, ", strlen(txt), parse_s);
        queries(e, pl, cold, reps);
        printf("}");
        /* The same calibrated with a mix term (hm_estimator_calibrate on the
         * placement measured 10% slower than estimated): each move then
         * also keeps its classes' spreads. */
        hm_estimate_t r0;
        hm_est_calibration_t cal;
        double t10;
        if ((rc = hm_estimator_estimate(e, pl, HM_EST_DEFAULT, &r0, NULL)) < 0)
            die("hm_estimator_estimate", rc);
        t10 = 1.1 * r0.runtime_ns;
        if ((rc = hm_estimator_calibrate(e, &pl, &t10, 1, &cal)) < 0)
            die("hm_estimator_calibrate", rc);
        printf(", \"synthetic_calibrated\": {\"mix\": %.6g, ", cal.mix);
        queries(e, pl, cold, reps);
        printf("}");
        hm_placement_close(pl);
        for (int k = 0; k < NCOLD; k++)
            hm_placement_close(cold[k]);
        hm_estimator_close(e);
        free(pj);
        free(txt);
    }
    printf("}\n");
    return 0;
}
