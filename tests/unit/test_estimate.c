/* Estimator: alignment, the linear model against hand-computed results,
 * exact all-on-one-device estimates, monotonicity, the interval, incremental
 * moves against full estimates, saved summaries, placements compiled once
 * and estimated again, and bad input. Traces are
 * written with the trace writer, so every figure is known. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"
#include "estimate/estimate_int.h"
#include "hetmem/estimate.h"
#include "hetmem/trace.h"
#include "estimate/estimate_int.h"

static char dir[256];

/* A synthetic run: phases p1 then p2 (after 1 ms outside any phase), object A
 * (hot in p1), object B (hot in p2), one untracked sample stream. Per phase,
 * samples are spread evenly in time; `weight` is the latency weight of A's
 * and B's samples in this run. */
typedef struct {
    const char *device;
    const char *argv0;
    double p1_ms, p2_ms;   /* phase durations */
    int wa, wb;            /* load weights of A and B samples */
    int n1, n2;            /* samples per phase (A+untracked in p1, B+untracked in p2) */
    uint64_t period;
    int phases_swapped;    /* p2 before p1 (a run of another program) */
    int no_end;            /* leave out the end record */
    int no_samples;
} run_spec_t;

#define A_ADDR 0x100000000ull
#define B_ADDR 0x200000000ull
#define U_ADDR 0x700000000ull
#define OBJ_SIZE (64ull << 20)

static void write_run(const char *path, const run_spec_t *r)
{
    const char *argv[] = {r->argv0 ? r->argv0 : "./app.sim", "--size", "tiny", NULL};
    hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", r->period ? r->period : 1000, r->device, NULL, argv, NULL, 0};
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, &m), 0);
    hm_trace_write_site(w, 0xa, "app.sim+0x10 alloc_a");
    hm_trace_write_site(w, 0xb, "app.sim+0x20 alloc_b");
    hm_alloc_t a = {10, A_ADDR, OBJ_SIZE, 0xa, 0}, b = {20, B_ADDR, OBJ_SIZE / 2, 0xb, 0};
    hm_trace_write_alloc(w, &a);
    hm_trace_write_alloc(w, &b);
    hm_trace_write_name(w, 11, A_ADDR, "A");
    uint64_t t = 1000000; /* 1 ms before the first phase */
    double instr = 0;
    const char *first = r->phases_swapped ? "p2" : "p1", *second = r->phases_swapped ? "p1" : "p2";
    for (int ph = 0; ph < 2; ph++) {
        const char *name = ph ? second : first;
        int is_p1 = !strcmp(name, "p1");
        double dur = (is_p1 ? r->p1_ms : r->p2_ms) * 1e6;
        int n = is_p1 ? r->n1 : r->n2;
        hm_trace_write_phase(w, 1, t, 0, name);
        for (int i = 0; i < n && !r->no_samples; i++) {
            uint64_t st = t + (uint64_t)((i + 0.5) * dur / n);
            /* 3 of 4 samples on the phase's object, 1 untracked */
            int untracked = i % 4 == 3;
            uint64_t base = untracked ? U_ADDR : is_p1 ? A_ADDR : B_ADDR;
            hm_sample_t s = {st, base + (uint64_t)(i * 4096 % (OBJ_SIZE / 2)), 0x1234, 0,
                             (uint32_t)(untracked ? 4 : is_p1 ? r->wa : r->wb),
                             (uint16_t)(untracked ? HM_DSRC_L1 : HM_DSRC_MAKE_MEM(0)), HM_ACCESS_LOAD};
            hm_trace_write_sample(w, &s);
            /* Instructions grow at the same rate per phase on every device. */
            if (i % 16 == 0) {
                hm_counter_t c = {st, (uint64_t)(instr + (is_p1 ? 2e6 : 1e6) * (i + 0.5) / n), HM_COUNTER_INSTRUCTIONS, 0};
                hm_trace_write_counter(w, &c);
            }
        }
        instr += is_p1 ? 2e6 : 1e6;
        t += (uint64_t)dur;
        hm_trace_write_phase(w, 0, t, 0, name);
    }
    hm_trace_write_free(w, t + 10, A_ADDR, 0);
    hm_trace_end_t end = {t + 1000000, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, r->no_end ? NULL : &end), 0);
}

static char *path_of(const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

static hm_estimator_t *open2(const run_spec_t *slow, const run_spec_t *fast, const char *tag)
{
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%s-slow.hmt", tag);
    snprintf(n2, sizeof n2, "%s-fast.hmt", tag);
    char *p1 = path_of(n1), *p2 = path_of(n2);
    write_run(p1, slow);
    write_run(p2, fast);
    const char *paths[] = {p1, p2};
    hm_estimator_t *e = NULL;
    int rc = hm_estimator_open(&e, paths, 2, NULL);
    if (rc < 0)
        fprintf(stderr, "open %s: %s: %s\n", tag, hm_strerror(rc), hm_errdetail());
    CHECK_EQ_INT(rc, 0);
    free(p1);
    free(p2);
    return e;
}

static double est_json(hm_estimator_t *e, hm_est_model_t m, const char *json, hm_estimate_t *out)
{
    const char *devs[] = {hm_estimator_device_name(e, 0), hm_estimator_device_name(e, 1)};
    hm_placement_t *p = NULL;
    int rc = hm_placement_parse(&p, "test", json, devs, 2);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0)
        return NAN;
    hm_estimate_t r;
    CHECK_EQ_INT(hm_estimator_estimate(e, p, m, &r, NULL), 0);
    hm_placement_close(p);
    if (out)
        *out = r;
    return r.runtime_ns;
}

static const run_spec_t SLOW = {"slow", NULL, 200, 100, 400, 300, 4000, 2000, 1000, 0, 0, 0};
static const run_spec_t FAST = {"fast", NULL, 100, 90, 200, 270, 4000, 2000, 1000, 0, 0, 0};

static void test_alignment(void)
{
    hm_estimator_t *e = open2(&SLOW, &FAST, "align");
    if (!e)
        return;
    CHECK_EQ_INT(hm_estimator_ndevices(e), 2);
    CHECK_STR_EQ(hm_estimator_device_name(e, 0), "slow");
    CHECK_EQ_INT(hm_estimator_nphases(e), 3);
    CHECK_STR_EQ(hm_estimator_phase_name(e, 0), "(no phase)");
    CHECK_STR_EQ(hm_estimator_phase_name(e, 1), "p1");
    CHECK_STR_EQ(hm_estimator_phase_name(e, 2), "p2");
    /* Objects: A (named), B (site), the untracked pseudo-object last. */
    CHECK_EQ_INT(hm_estimator_nobjects(e), 3);
    hm_est_object_t o;
    int ia = hm_estimator_find_object(e, 0, "A"), ib = hm_estimator_find_object(e, 0xb, NULL);
    CHECK(ia >= 0 && ib >= 0 && ia != ib);
    hm_estimator_object(e, ia, &o);
    CHECK_EQ_U64(o.size, OBJ_SIZE);
    CHECK_EQ_U64(o.site, 0xa);
    hm_estimator_object(e, 2, &o);
    CHECK_EQ_INT(o.movable, 0);
    CHECK_NEAR(hm_estimator_measured_ns(e, 0), 302e6, 1e-9);
    CHECK_NEAR(hm_estimator_measured_ns(e, 1), 192e6, 1e-9);
    /* Windows follow the slow run's time: about 1000, at least one per region. */
    int nw = hm_estimator_nwindows(e);
    CHECK(nw >= 995 && nw <= 1010);
    /* Phase breakdown of all-on-slow equals the phases' durations. */
    const char *devs[] = {"slow", "fast"};
    hm_placement_t *p;
    CHECK_EQ_INT(hm_placement_parse(&p, "t", "{\"default\": \"slow\", \"rules\": []}", devs, 2), 0);
    hm_estimate_t r;
    const hm_est_breakdown_t *bd;
    for (int m = 0; m < HM_EST_NMODELS; m++) {
        CHECK_EQ_INT(hm_estimator_estimate(e, p, (hm_est_model_t)m, &r, &bd), 0);
        CHECK_EQ_INT(bd->nphases, 3);
        CHECK_NEAR(bd->phase_ns[1], 200e6, 1e-6);
        CHECK_NEAR(bd->phase_ns[2], 100e6, 1e-6);
        CHECK_NEAR(bd->phase_ns[0], 2e6, 1e-3);
    }
    hm_placement_close(p);
    hm_estimator_close(e);
}

static void test_corners(void)
{
    hm_estimator_t *e = open2(&SLOW, &FAST, "corner");
    if (!e)
        return;
    for (int m = 0; m < HM_EST_NMODELS; m++) {
        double s = est_json(e, (hm_est_model_t)m, "{\"default\": \"slow\", \"rules\": []}", NULL);
        double f = est_json(e, (hm_est_model_t)m, "{\"default\": \"fast\", \"rules\": []}", NULL);
        CHECK_NEAR(s, 302e6, 0.005);
        CHECK_NEAR(f, 192e6, 0.005);
        /* Every object moved, untracked left on slow: the untracked data's share remains. */
        double g = est_json(e, (hm_est_model_t)m, "{\"default\": \"slow\", \"rules\": [{\"device\": \"fast\"}]}", NULL);
        CHECK(g < s && g >= f * 0.999);
    }
    hm_estimator_close(e);
}

/* The published method by hand: in p1 the slow run takes 200 ms against
 * 100 ms, and all of its memory samples there are on A (the untracked
 * samples hit L1, which a load-latency event does not sample); in p2 (100
 * vs 90 ms, more than the 3% cut-off) all are on B. So A on fast saves
 * 100 ms, B on fast 10 ms. */
static void test_linear_by_hand(void)
{
    hm_estimator_t *e = open2(&SLOW, &FAST, "linear");
    if (!e)
        return;
    double a = est_json(e, HM_EST_LINEAR, "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"device\": \"fast\"}]}", NULL);
    CHECK_NEAR(a, 302e6 - 100e6, 1e-3);
    double b = est_json(e, HM_EST_LINEAR, "{\"default\": \"slow\", \"rules\": [{\"site\": \"0xb\", \"device\": \"fast\"}]}", NULL);
    CHECK_NEAR(b, 302e6 - 10e6, 1e-3);
    /* Half of A's pages: half of its samples' pages are below 50% by page number. */
    double h = est_json(e, HM_EST_LINEAR, "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"pages_percent\": 50, \"device\": \"fast\"}]}", NULL);
    CHECK_NEAR(h, 302e6 - 50e6, 0.01);
    hm_estimator_close(e);

    /* The 3% cut-off: p2 differs by 2%, so moving B changes nothing. */
    run_spec_t fast = FAST;
    fast.p2_ms = 98;
    e = open2(&SLOW, &fast, "cutoff");
    if (!e)
        return;
    b = est_json(e, HM_EST_LINEAR, "{\"default\": \"slow\", \"rules\": [{\"site\": \"0xb\", \"device\": \"fast\"}]}", NULL);
    CHECK_NEAR(b, 302e6, 1e-3); /* against 10 ms (3.3%) without the cut-off */
    hm_estimator_close(e);
}

/* Latency-bound runs (no bandwidth figures): moving a hot object to the
 * lower-latency device never makes the estimate worse. */
static void test_monotonic(void)
{
    hm_estimator_t *e = open2(&SLOW, &FAST, "mono");
    if (!e)
        return;
    for (int m = 0; m < HM_EST_NMODELS; m++) {
        double none = est_json(e, (hm_est_model_t)m, "{\"default\": \"slow\", \"rules\": []}", NULL);
        double a = est_json(e, (hm_est_model_t)m, "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"device\": \"fast\"}]}", NULL);
        double ab = est_json(e, (hm_est_model_t)m, "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"device\": \"fast\"}, {\"site\": \"0xb\", \"device\": \"fast\"}]}", NULL);
        CHECK(a < none);
        CHECK(ab <= a);
        for (int pct = 10; pct <= 100; pct += 10) {
            char js[160];
            snprintf(js, sizeof js, "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"pages_percent\": %d, \"device\": \"fast\"}]}", pct);
            double v = est_json(e, (hm_est_model_t)m, js, NULL);
            CHECK(v <= none * (1 + 1e-12) && v >= a * (1 - 1e-12));
        }
    }
    hm_estimator_close(e);
}

/* Ten times as many samples: the interval's sampling term narrows (by
 * about sqrt(10)); the default model's model-error term does not depend
 * on the sampling (test_interval_model_error). */
static void test_interval(void)
{
    run_spec_t s10 = SLOW, f10 = FAST;
    s10.n1 *= 10, s10.n2 *= 10, f10.n1 *= 10, f10.n2 *= 10, s10.period = f10.period = 100;
    hm_estimator_t *sparse = open2(&SLOW, &FAST, "sparse"), *dense = open2(&s10, &f10, "dense");
    if (!sparse || !dense)
        return;
    const char *js = "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"device\": \"fast\"}]}";
    for (int m = 0; m < HM_EST_NMODELS; m++) {
        hm_estimate_t a, b;
        est_json(sparse, (hm_est_model_t)m, js, &a);
        est_json(dense, (hm_est_model_t)m, js, &b);
        double wa = a.hi_ns - a.lo_ns, wb = b.hi_ns - b.lo_ns;
        CHECK(wa > 0 && wb > 0);
        CHECK(b.sampling_ns > 0 && b.sampling_ns < a.sampling_ns / 2);
        if (m == HM_EST_LINEAR)
            CHECK(wb < wa / 2);
        CHECK(a.lo_ns <= a.runtime_ns && a.runtime_ns <= a.hi_ns);
        CHECK_NEAR(a.runtime_ns, b.runtime_ns, 0.02);
    }
    hm_estimator_close(sparse);
    hm_estimator_close(dense);
}

/* The 95% interval's two terms, by hand (docs/estimator.md, "The
 * interval"). Two devices, near (20 GB/s, 100 ns) and far (5 GB/s, 300
 * ns), runs of 10 and 30 ms, one window; two objects of 64 MiB, each with
 * 100 sampled loads that reached memory at period 1000 (6.4 MB each) and
 * no latency weight. No run is bound: the channels are busy 0.64 / 10 and
 * 2.56 / 30 ms, and the time ratio, 3, is within lat_margin x the latency
 * ratio (3.3), far from the bandwidth ratio, 4.
 *
 * Sampling: each object's variance on its device is (k L)^2 / n (0: no
 * latency cost) plus its channel time squared over its sampled misses:
 * object 0 on far 6.4e6 B / 5 B/ns = 1.28e6 ns, object 1 on near 0.32e6
 * ns: var = (1.28e6^2 + 0.32e6^2) / 100 = 1.7408e10 ns^2, half-width
 * 1.96 sqrt(var) = 258,600 ns.
 * Model error: the placement puts half the class's traffic on each device
 * (w = 0.5); the device runs' mix by it is 0.5 x 10 + 0.5 x 30 = 20 ms,
 * and its spread 0.5 |10 - 20| + 0.5 |30 - 20| = 10 ms (2 w (1 - w) x 20
 * ms). The model-error half-width is model_error_q (MODEL_ERROR_Q, the
 * value of model.c's table) x 10 ms, and the interval's half-width is
 * sqrt(258,600^2 + (MODEL_ERROR_Q x 1e7)^2) ns: with 0.6117, 6,117,000 ns
 * of model error and 6,122,464 ns in all (at 0.306 or 0.918: 3.07e6 or
 * 9.18e6 ns; without the term: 258,600 ns).
 * All on near: no spread (the model reproduces that run exactly), and the
 * interval is the sampling term alone: var = 2 x 0.32e6^2 / 100 =
 * 2.048e9 ns^2, half-width 88,700 ns. */
#define MODEL_ERROR_Q 0.6117
static void test_interval_model_error(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 3e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 300}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e7, 3e7], \"stats\": ["
        "   [0, 0, 100, 0, 100, 0, 0, 100, 0, 0], [1, 0, 100, 0, 100, 0, 0, 100, 0, 0],"
        "   [0, 1, 100, 0, 100, 0, 0, 100, 0, 0], [1, 1, 100, 0, 100, 0, 0, 100, 0, 0]]}]}";
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, "interval", js), 0);
    if (!e)
        return;
    hm_estimate_t mix, near;
    est_json(e, HM_EST_DEFAULT, "{\"default\": \"near\", \"rules\": [{\"site\": \"0x1\", \"device\": \"far\"}]}", &mix);
    CHECK_NEAR(mix.sampling_ns, 1.96 * sqrt(1.7408e10), 1e-6);
    CHECK_NEAR(mix.spread_ns, 1e7, 1e-9);
    CHECK_NEAR(mix.model_ns, MODEL_ERROR_Q * 1e7, 1e-9);
    double h = sqrt(1.96 * 1.96 * 1.7408e10 + MODEL_ERROR_Q * 1e7 * MODEL_ERROR_Q * 1e7);
    CHECK_NEAR(mix.hi_ns - mix.runtime_ns, h, 1e-6);
    CHECK_NEAR(mix.runtime_ns - mix.lo_ns, h, 1e-6);
    est_json(e, HM_EST_DEFAULT, "{\"default\": \"near\"}", &near);
    CHECK_NEAR(near.runtime_ns, 1e7, 1e-9);
    CHECK(near.spread_ns == 0 && near.model_ns == 0);
    CHECK_NEAR(near.hi_ns - near.runtime_ns, 1.96 * sqrt(2.048e9), 1e-6);
    hm_estimator_close(e);
}

/* Random moves on a state equal a fresh estimate of the same assignment. */
static void test_incremental(void)
{
    hm_estimator_t *e = open2(&SLOW, &FAST, "incr");
    if (!e)
        return;
    uint64_t rng = 42;
    for (int m = 0; m < HM_EST_NMODELS; m++)
        for (int phased = 0; phased < 2; phased++) {
            hm_est_state_t *s, *t;
            CHECK_EQ_INT(hm_est_state_open(&s, e, (hm_est_model_t)m, phased), 0);
            CHECK_EQ_INT(hm_est_state_open(&t, e, (hm_est_model_t)m, phased), 0);
            double rt = 0;
            for (int i = 0; i < 200; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                int obj = (int)((rng >> 33) % 2), dev = (int)((rng >> 40) % 2), pct = (int)((rng >> 20) % 5) * 25;
                int ph = phased ? (int)((rng >> 50) % 3) : -1;
                CHECK_EQ_INT(hm_est_state_move(s, ph, obj, dev, pct, &rt), 0);
            }
            CHECK_NEAR(rt, hm_est_state_runtime(s), 1e-12);
            /* Rebuild on a fresh state from the final assignment. */
            int np = phased ? 3 : 1;
            for (int p = 0; p < np; p++)
                for (int o = 0; o < 2; o++) {
                    int pct, dev = hm_est_state_device(s, phased ? p : -1, o, &pct);
                    CHECK_EQ_INT(hm_est_state_move(t, phased ? p : -1, o, dev, pct, NULL), 0);
                }
            CHECK_NEAR(hm_est_state_runtime(t), rt, 1e-9);
            /* And through the placement file it writes. */
            char *js = hm_est_state_placement_json(s);
            CHECK(js != NULL);
            if (js) {
                hm_estimate_t r;
                double v = est_json(e, (hm_est_model_t)m, js, &r);
                CHECK_NEAR(v, rt, 1e-9);
                hm_estimate_t se;
                hm_est_state_estimate(s, &se);
                CHECK_NEAR(r.migration_ns, se.migration_ns, 1e-9);
                free(js);
            }
            /* Copies carry the assignment. */
            hm_est_state_t *c;
            CHECK_EQ_INT(hm_est_state_open(&c, e, (hm_est_model_t)m, phased), 0);
            CHECK_EQ_INT(hm_est_state_copy(c, s), 0);
            CHECK_NEAR(hm_est_state_runtime(c), rt, 1e-12);
            hm_est_state_close(c);
            hm_est_state_close(s);
            hm_est_state_close(t);
        }
    /* Phased states pay for moving pages at phase boundaries. */
    hm_est_state_t *s;
    CHECK_EQ_INT(hm_est_state_open(&s, e, HM_EST_DEFAULT, 1), 0);
    hm_estimate_t r0, r1;
    hm_est_state_estimate(s, &r0);
    CHECK_EQ_INT(hm_est_state_move(s, 1, hm_estimator_find_object(e, 0, "A"), 1, 100, NULL), 0);
    hm_est_state_estimate(s, &r1);
    CHECK(r0.migration_ns == 0);
    hm_est_state_close(s);
    /* Errors. */
    CHECK_EQ_INT(hm_est_state_open(&s, e, HM_EST_DEFAULT, 0), 0);
    CHECK_EQ_INT(hm_est_state_move(s, -1, 2, 1, 100, NULL), HM_EUSAGE); /* untracked */
    CHECK_EQ_INT(hm_est_state_move(s, -1, 5, 1, 100, NULL), HM_ERANGE);
    CHECK_EQ_INT(hm_est_state_move(s, -1, 0, 7, 100, NULL), HM_ERANGE);
    CHECK_EQ_INT(hm_est_state_move(s, -1, 0, 1, 101, NULL), HM_ERANGE);
    CHECK_EQ_INT(hm_est_state_move(s, 1, 0, 1, 100, NULL), HM_EUSAGE); /* phase on an unphased state */
    CHECK_EQ_U64(hm_est_state_bytes(s, 1), 0);
    CHECK_EQ_INT(hm_est_state_move(s, -1, 0, 1, 100, NULL), 0);
    hm_est_object_t o;
    hm_estimator_object(e, 0, &o);
    CHECK_EQ_U64(hm_est_state_bytes(s, 1), o.size);
    hm_est_state_close(s);
    hm_estimator_close(e);
}

static void test_summary_roundtrip(void)
{
    hm_estimator_t *e = open2(&SLOW, &FAST, "save");
    if (!e)
        return;
    char *p = path_of("summary.json");
    CHECK_EQ_INT(hm_estimator_save(e, p), 0);
    hm_estimator_t *f = NULL;
    CHECK_EQ_INT(hm_estimator_open_summary(&f, p), 0);
    if (f) {
        const char *js = "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"pages_percent\": 30, \"device\": \"fast\"}]}";
        for (int m = 0; m < HM_EST_NMODELS; m++)
            CHECK_NEAR(est_json(f, (hm_est_model_t)m, js, NULL), est_json(e, (hm_est_model_t)m, js, NULL), 1e-6);
        hm_estimator_close(f);
    }
    free(p);
    hm_estimator_close(e);
    /* Malformed summaries are refused with a detail. */
    static const char *bad[] = {
        "{",
        "{\"format\": \"x\", \"version\": 1}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 2}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}], \"objects\": [], \"windows\": [{}]}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}, {\"name\": \"a\", \"runtime_ns\": 2}], \"objects\": [], \"windows\": [{\"phase\": 0, \"t_ns\": [1, 2]}]}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}, {\"name\": \"b\", \"runtime_ns\": 2}], \"objects\": [], \"windows\": [{\"phase\": 0, \"t_ns\": [1]}]}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}, {\"name\": \"b\", \"runtime_ns\": 2}], \"objects\": [{\"size\": 4}], \"windows\": [{\"phase\": 0, \"t_ns\": [1, 2], \"stats\": [[3, 0, 1, 1, 1]]}]}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}, {\"name\": \"b\", \"runtime_ns\": 2}], \"objects\": [{\"size\": 4}], \"windows\": [{\"phase\": 0, \"t_ns\": [1, 2], \"stats\": [[0, 0, -1, 1, 1]]}]}",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 5, \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}, {\"name\": \"b\", \"runtime_ns\": 2}], \"objects\": [], \"windows\": [{\"phase\": 0, \"t_ns\": [1, 2]}]}",
    };
    for (size_t i = 0; i < HM_ARRAY_LEN(bad); i++) {
        hm_estimator_t *x = NULL;
        int rc = hm_estimator_parse_summary(&x, "bad.json", bad[i]);
        CHECK(rc < 0 && x == NULL);
        if (rc < 0)
            CHECK(strstr(hm_errdetail(), "bad.json") != NULL);
    }
}

/* A loaded-latency curve: corners stay exact, and a placement that loads a
 * device pays more than it would at idle latency. */
static void test_loaded_latency(void)
{
    const char *fmt =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100%s},"
        "               {\"name\": \"far\", \"runtime_ns\": 2e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}, {\"site\": \"0x2\", \"size\": 1048576}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e6, 2e6], \"stats\": ["
        "   [0, 0, 100, 10000, 100, 10000, 0], [1, 0, 100, 10000, 100, 10000, 0],"
        "   [0, 1, 100, 20000, 100, 20000, 0], [1, 1, 100, 20000, 100, 20000, 0]]}]}";
    /* Each memory load waits its device's idle latency (100 and 200 ns):
     * without a curve there is no queue to scale (queue_by_load). */
    char flat[2048], curve[2048];
    snprintf(flat, sizeof flat, fmt, "");
    snprintf(curve, sizeof curve, fmt, ", \"loaded_latency\": [[0.5, 150], [0.9, 400]]");
    hm_estimator_t *a = NULL, *b = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&a, "flat", flat), 0);
    CHECK_EQ_INT(hm_estimator_parse_summary(&b, "curve", curve), 0);
    if (!a || !b)
        return;
    hm_est_state_t *sa, *sb;
    CHECK_EQ_INT(hm_est_state_open(&sa, a, HM_EST_DEFAULT, 0), 0);
    CHECK_EQ_INT(hm_est_state_open(&sb, b, HM_EST_DEFAULT, 0), 0);
    CHECK_NEAR(hm_est_state_runtime(sa), 1e6, 1e-6);
    CHECK_NEAR(hm_est_state_runtime(sb), 1e6, 1e-6);
    double ra, rb;
    hm_est_state_move(sa, -1, 0, 1, 100, NULL);
    hm_est_state_move(sb, -1, 0, 1, 100, NULL);
    hm_est_state_move(sa, -1, 1, 1, 100, &ra);
    hm_est_state_move(sb, -1, 1, 1, 100, &rb);
    CHECK_NEAR(ra, 2e6, 1e-6);
    CHECK_NEAR(rb, 2e6, 1e-6);
    hm_est_state_move(sa, -1, 1, 0, 100, &ra);
    hm_est_state_move(sb, -1, 1, 0, 100, &rb);
    CHECK(ra > 1e6 && ra < 2e6);
    CHECK(rb > 1e6 && rb < 2e6);
    /* Half the traffic leaves "near" (64% busy in its run): its latency
     * falls along the curve, which the flat model cannot see. */
    CHECK(rb < ra * 0.999);
    hm_est_state_close(sa);
    hm_est_state_close(sb);
    hm_estimator_close(a);
    hm_estimator_close(b);
    /* A curve that falls is refused. */
    snprintf(curve, sizeof curve, fmt, ", \"loaded_latency\": [[0.5, 150], [0.9, 120]]");
    CHECK(hm_estimator_parse_summary(&b, "bad", curve) < 0);
    CHECK(strstr(hm_errdetail(), "loaded_latency[1]") != NULL);
}

/* Parses a hand-written summary and opens a default-model state on it,
 * checking that all on the default device gives base_ns; NULL when either
 * fails (*e, set either way, is for hm_estimator_close). */
static hm_est_state_t *open_default(hm_estimator_t **e, const char *name, const char *js, double base_ns)
{
    hm_est_state_t *st = NULL;
    *e = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(e, name, js), 0);
    if (!*e)
        return NULL;
    CHECK_EQ_INT(hm_est_state_open(&st, *e, HM_EST_DEFAULT, 0), 0);
    if (st)
        CHECK_NEAR(hm_est_state_runtime(st), base_ns, 1e-6);
    return st;
}

/* Opens a default-model state on a two-device summary and gives the
 * estimate with object 0 alone on device 1 (*far0) and with object 1 alone
 * there (*far1); -1 when the summary does not open. */
static void far_each(const char *name, const char *js, double base_ns, double *far0, double *far1)
{
    hm_estimator_t *e;
    *far0 = *far1 = -1;
    hm_est_state_t *st = open_default(&e, name, js, base_ns);
    if (st) {
        hm_est_state_move(st, -1, 0, 1, 100, far0);
        hm_est_state_move(st, -1, 0, 0, 100, NULL);
        hm_est_state_move(st, -1, 1, 1, 100, far1);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
}

/* Cache hits are traffic only for an object whose hits wait for memory in
 * some run (a prefetched stream that falls behind); the hits of a randomly
 * accessed object that never wait are cache hits. Two objects with the same
 * memory loads and latency, one with many hits besides: on a bandwidth-bound
 * pair of runs (times in the ratio of the bandwidths), moving either to the
 * far device costs the same unless the hits waited. The runs' channels
 * moved all of the first object's 500,000 sampled misses and the second's
 * 100,000 (38.4 MB: 1.92 ms at 20 GB/s), so that no sampled traffic has to
 * be taken back. */
static double hits_far(const char *hw_far, int obj, const char *size0)
{
    const char *fmt =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1.92e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 7.68e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": %s}, {\"site\": \"0x2\", \"size\": 1048576}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1.92e6, 7.68e6], \"stats\": ["
        "   [0, 0, 2000, 29000, 500, 20000, 0, 100, 0], [1, 0, 100, 20000, 100, 20000, 0, 100, 0],"
        "   [0, 1, 2000, 49000, 500, 40000, 0, 100, %s], [1, 1, 100, 40000, 100, 40000, 0, 100, 0]]}]}";
    char js[2048];
    snprintf(js, sizeof js, fmt, size0, hw_far);
    hm_estimator_t *e;
    double r = -1;
    hm_est_state_t *st = open_default(&e, "hits", js, 1.92e6);
    if (st) {
        hm_est_state_move(st, -1, obj, 1, 100, &r);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    return r;
}

static void test_cache_hits_traffic(void)
{
    double a = hits_far("0", 0, "1048576"), b = hits_far("0", 1, "1048576");
    CHECK(a > 1e6 && b > 1e6);
    CHECK_NEAR(a, b, 0.02);
    /* 90 of the first object's memory loads were hits that waited, in the
     * far run: a stream, all of whose 500 sampled misses are traffic. */
    double as = hits_far("90", 0, "1048576"), bs = hits_far("90", 1, "1048576");
    CHECK(as > 1.5 * bs);
    CHECK(as > 1.5 * a);
    /* No hit waited, but the object (128 MiB, 2 M lines) is larger than its
     * 500,000 misses in lines: no line missed twice, so it was swept and its
     * hits were prefetched lines, traffic as for the stream. */
    double aw = hits_far("0", 0, "134217728");
    CHECK(aw > 1.5 * a);
    CHECK_NEAR(aw, as, 0.02);
    /* The line at streamed (0.02), blended (blend_streamed): of the far
     * run's 400 + hw cache hits, hw waited, a share sampled with binomial
     * error sigma = sqrt(0.02 x 0.98 / n) at the line, and the object is
     * streamed with p = Phi((share - 0.02) / sigma); its traffic share is
     * p + (1 - p) x 0.2 (its loads' memory share, 100 of 500). Both runs
     * are bound, so object 0 alone on far takes its share of the far run's
     * traffic: 7.68 ms x 500 rho / (500 rho + 100) (object 1's 100 misses
     * all count): 3.84 ms at rho 0.2, 6.4 ms at 1 (as). a is 0 of 400
     * (z = -2.89, p = 0.0019, 3.856 ms); 30 of 430 (z = +7.4) is as; 10 of 410 (2.44%, sigma 0.006914, z = +0.635):
     * p = 0.7373, rho = 0.7898, 6.1282 ms; 6 of 406 (1.48%, sigma
     * 0.006948, z = -0.752): p = 0.2262, rho = 0.3809, 5.0360 ms. A step
     * would give as and a. */
    CHECK_NEAR(hits_far("30", 0, "1048576"), as, 0.02);
    CHECK_NEAR(hits_far("10", 0, "1048576"), 6.1282e6, 1e-3);
    CHECK_NEAR(hits_far("6", 0, "1048576"), 5.0360e6, 1e-3);
    /* The line at stream_passes (2): the object's 500,000 misses over
     * 200,000 lines (12.8 MB) are 2.5 passes in its one instance: reused,
     * not swept (a); over 333,333 lines (21.3 MB), 1.5 passes: swept (as). */
    CHECK_NEAR(hits_far("0", 0, "12800000"), a, 0.02);
    CHECK_NEAR(hits_far("0", 0, "21333312"), as, 0.02);
    /* An object allocated anew brings fresh lines each time (a temporary
     * freed and allocated again every time step): a pass is one miss per
     * line per allocation. 1 MiB is 16,384 lines; its 500,000 misses in the
     * one class (all of them: the allocations all go there) are 30.5
     * passes over one allocation (reused: a), 500,000 / (40 x 16,384) = 0.76
     * over 40 (swept: as). The line at stream_passes 2: 16 allocations are
     * 262,144 lines, 1.91 passes (swept), 15 are 245,760, 2.03 (reused). */
    CHECK_NEAR(hits_far("0", 0, "1048576, \"allocations\": 1"), a, 0.02);
    CHECK_NEAR(hits_far("0", 0, "1048576, \"allocations\": 40"), as, 0.02);
    CHECK_NEAR(hits_far("0", 0, "1048576, \"allocations\": 16"), as, 0.02);
    CHECK_NEAR(hits_far("0", 0, "1048576, \"allocations\": 15"), a, 0.02);
}

/* Instances of one phase with different traffic mixes are timed apart: 20
 * instances (one window each) alternate between moving only object 0's
 * data and only object 1's, both runs bandwidth-bound (times in the ratio
 * of the bandwidths). With object 0 on the far device, its instances take
 * the far run's time and the others the near run's: 10 x 1.28
 * + 10 x 0.32 ms = 16 ms. Timing the phase as one class would overlap object 0's
 * far traffic with object 1's near traffic (12.8 ms). */
static void test_window_classes(void)
{
    char js[8192];
    size_t len = 0;
    len += (size_t)snprintf(js + len, sizeof js - len,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 6.4e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 25.6e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}, {\"site\": \"0x2\", \"size\": 1048576}],"
        " \"windows\": [");
    for (int w = 0; w < 20; w++) {
        int o = w % 2;
        len += (size_t)snprintf(js + len, sizeof js - len,
            "%s{\"phase\": 0, \"region\": %d, \"t_ns\": [0.32e6, 1.28e6], \"stats\": ["
            "[%d, 0, 100, 20000, 100, 20000, 0], [%d, 1, 100, 40000, 100, 40000, 0]]}",
            w ? ", " : "", w, o, o);
    }
    snprintf(js + len, sizeof js - len, "]}");
    hm_estimator_t *e;
    hm_est_state_t *st = open_default(&e, "classes", js, 6.4e6);
    if (st) {
        double r = 0;
        hm_est_state_move(st, -1, 0, 1, 100, &r);
        CHECK_NEAR(r, 16e6, 0.03);
        hm_est_state_move(st, -1, 1, 1, 100, &r);
        CHECK_NEAR(r, 25.6e6, 1e-6);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
}

/* split_l1 (0.3) from either side: a phase's instances are cut in two
 * classes when their mixes differ by at least that share of the traffic.
 * Twenty instances (one window each) alternate between two mixes of
 * object 0's and object 1's loads, 100 sampled misses a window (6.4 MB):
 * near (20 GB/s) moves them in 0.32 ms, far (15 GB/s) in 0.4267 ms, both
 * runs bound by their channels. Their latency costs (3 and 3.6 ms a
 * window) put the line through the runs below C = 0, so C = 0, and every
 * run is saturated: the phase is timed by its channels. Object 0 alone on
 * the far device, mixes 60/40 and 40/60 (0.4 apart: two classes): the
 * 60/40 instances wait for the far channels, 0.6 x 4.267 = 2.56 ms, the
 * 40/60 ones for the near channels, 0.6 x 3.2 = 1.92 ms: 4.48 ms; as one
 * class, half the traffic on each: 4.267 ms. Mixes 50/50 and 40/60 (0.2
 * apart: one class): object 0's 45% of the traffic on the far channels,
 * 0.45 x 8.533 = 3.84 ms; cut in two, 2.133 + 1.92 = 4.053 ms. */
static double mix_far(int a0, int b0)
{
    char js[16384];
    size_t len = 0;
    len += (size_t)snprintf(js + len, sizeof js - len,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 6.4e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 8.5333333e6, \"period\": 1000, \"bandwidth_gbs\": 15, \"read_latency_ns\": 100}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 134217728}, {\"site\": \"0x2\", \"size\": 134217728}],"
        " \"windows\": [");
    for (int w = 0; w < 20; w++) {
        int m0 = w % 2 ? b0 : a0, m1 = 100 - m0;
        len += (size_t)snprintf(js + len, sizeof js - len,
            "%s{\"phase\": 0, \"region\": %d, \"t_ns\": [0.32e6, 0.42666667e6], \"stats\": ["
            "[0, 0, %d, %d, %d, %d, 0, %d], [1, 0, %d, %d, %d, %d, 0, %d],"
            "[0, 1, %d, %d, %d, %d, 0, %d], [1, 1, %d, %d, %d, %d, 0, %d]]}",
            w ? ", " : "", w, m0, 30 * m0, m0, 30 * m0, m0, m1, 30 * m1, m1, 30 * m1, m1,
            m0, 36 * m0, m0, 36 * m0, m0, m1, 36 * m1, m1, 36 * m1, m1);
    }
    snprintf(js + len, sizeof js - len, "]}");
    hm_estimator_t *e;
    double r = -1;
    hm_est_state_t *st = open_default(&e, "mixes", js, 6.4e6);
    if (st) {
        hm_est_state_move(st, -1, 0, 1, 100, &r);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    return r;
}

static void test_split_l1(void)
{
    CHECK_NEAR(mix_far(60, 40), 4.48e6, 0.005);
    CHECK_NEAR(mix_far(50, 40), 3.84e6, 0.005);
}

/* The summary of mixes_far(): ninst instances of one phase (one window
 * each), instance i drawing cnt[i][o] sampled load misses on object o in
 * each run, at a sampling period that makes every instance 100,000 misses
 * (6.4 MB) a run: near (20 GB/s) moves them in 0.32 ms, far (15 GB/s) in
 * 0.4267 ms, both runs bound by their channels, with latency costs (30 and
 * 36 ns a miss) that put C at 0, as in mix_far(). Every run is saturated,
 * so a class is timed by its channels: with object 0 alone on the far
 * device, a class of N instances whose object-0 share is f takes
 * N x max(f x 0.4267, (1 - f) x 0.32) ms, f above 0.4286 waiting for the
 * far channels. Gives that estimate; -1 when the summary does not open. */
static char *mixes_summary_x(int ninst, int nobj, const double (*cnt)[4], double period, int one_instance)
{
    size_t cap = 65536, len = 0;
    char *js = malloc(cap);
    if (!js)
        abort();
    len += (size_t)snprintf(js + len, cap - len,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": %.9g, \"period\": %.9g, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": %.9g, \"period\": %.9g, \"bandwidth_gbs\": 15, \"read_latency_ns\": 100}],"
        " \"objects\": [", ninst * 0.32e6, period, ninst * 0.42666667e6, period);
    for (int o = 0; o < nobj; o++)
        len += (size_t)snprintf(js + len, cap - len, "%s{\"site\": \"0x%x\", \"size\": 134217728}", o ? ", " : "", o + 1);
    len += (size_t)snprintf(js + len, cap - len, "], \"windows\": [");
    for (int w = 0; w < ninst; w++) {
        len += (size_t)snprintf(js + len, cap - len,
                                "%s{\"phase\": 0, \"region\": %d, \"instructions\": %d, \"t_ns\": [0.32e6, 0.42666667e6], "
                                "\"stats\": [",
                                w ? ", " : "", one_instance ? 0 : w, one_instance ? 1000000 : 0);
        int first = 1;
        for (int d = 0; d < 2; d++)
            for (int o = 0; o < nobj; o++) {
                double m = cnt[w][o], lat = d ? 36 : 30;
                if (!(m > 0))
                    continue;
                len += (size_t)snprintf(js + len, cap - len, "%s[%d, %d, %.9g, %.9g, %.9g, %.9g, 0, %.9g]", first ? "" : ", ",
                                        o, d, m, lat * m, m, lat * m, m);
                first = 0;
            }
        len += (size_t)snprintf(js + len, cap - len, "]}");
    }
    snprintf(js + len, cap - len, "]}");
    CHECK(len + 8 < cap);
    return js;
}

static char *mixes_summary(int ninst, int nobj, const int (*cnt)[4], double period)
{
    double (*c)[4] = calloc((size_t)ninst, sizeof *c);
    if (!c)
        abort();
    for (int i = 0; i < ninst; i++)
        for (int o = 0; o < 4; o++)
            c[i][o] = cnt[i][o];
    char *js = mixes_summary_x(ninst, nobj, (const double (*)[4])c, period, 0);
    free(c);
    return js;
}

static double mixes_far(const char *name, int ninst, int nobj, const int (*cnt)[4], double period)
{
    char *js = mixes_summary(ninst, nobj, cnt, period);
    hm_estimator_t *e;
    double r = -1;
    hm_est_state_t *st = open_default(&e, name, js, ninst * 0.32e6);
    if (st) {
        hm_est_state_move(st, -1, 0, 1, 100, &r);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    free(js);
    return r;
}

/* split_sse (0.5) from either side. An instance's mix is its objects'
 * shares of its misses; the spread of a class is the sum of the squared
 * distances of its instances' mixes from their mean (the 2-means SSE).
 *
 * Kept at 0.5, not at 0.25: twenty instances cycle through four mixes of
 * three objects, in %: A+ (50, 32, 18), B+ (30, 42, 28), A- (50, 18, 32),
 * B- (30, 28, 42). Their mean is (40, 30, 30); each lies 100 + 4 + 144 =
 * 248 %^2 from it. The 2-means starts from A+ and the mix farthest from
 * it, B- (992 %^2, against 600 for B+ and 392 for A-), and keeps A = {A+,
 * A-} and B = {B+, B-}: within them each mix lies 0 + 49 + 49 = 98 %^2
 * from its half's mean, 98 / 248 = 0.395 of the spread (below 0.5, above
 * 0.25), and the halves' means (50, 25, 25) and (30, 35, 35) are 0.4 apart
 * (at least split_l1). A's two mixes are 0.28 apart (below split_l1): no
 * further split, nor would one move object 0's share. Two classes: A
 * (f = 0.5) 10 x 0.2133 = 2.133 ms, B (f = 0.3) 10 x 0.7 x 0.32 = 2.24
 * ms: 4.373 ms; one class (f = 0.4): 20 x 0.6 x 0.32 = 3.84 ms.
 *
 * Not kept at 0.5, kept at 0.75: four mixes of four objects at the corners
 * of a regular simplex, (55, 15, 15, 15), (15, 55, 15, 15) and so on,
 * fifteen instances each. Any split of k equally weighted corners of a
 * regular simplex in two leaves (k - 2) / (k - 1) of the spread: 2/3 here.
 * The 2-means keeps one corner apart from three; with s the squared
 * distance of a corner from the mean, the lone corner's instances lie 0
 * from their half's mean and the others 8/9 s, so the sampling error of
 * the share kept (bisect) is Var R = n / (n - 1) x (n/4 (2/3)^2 + 3n/4
 * (2/9)^2) s^2 / (n s)^2 = 4 / (27 (n - 1)): sigma 0.050 for n = 60, and
 * the split is kept with probability Phi((0.5 - 2/3) / 0.050) = 4.4e-4,
 * below the blend's 1e-3: the phase stays one class (f = 0.25: 60 x 0.75
 * x 0.32 = 14.4 ms). At 0.75 it is kept with probability 0.95. */
static void test_split_sse(void)
{
    static const int four[4][4] = {{50, 32, 18}, {30, 42, 28}, {50, 18, 32}, {30, 28, 42}};
    int cnt[20][4];
    for (int i = 0; i < 20; i++)
        memcpy(cnt[i], four[i % 4], sizeof cnt[i]);
    CHECK_NEAR(mixes_far("split_sse kept", 20, 3, (const int (*)[4])cnt, 1000), 4.3733e6, 0.002);
    int cnt60[60][4];
    for (int i = 0; i < 60; i++)
        for (int o = 0; o < 4; o++)
            cnt60[i][o] = o == i % 4 ? 55 : 15;
    CHECK_NEAR(mixes_far("split_sse not kept", 60, 4, (const int (*)[4])cnt60, 1000), 14.4e6, 0.002);
}

/* A split decision sitting on its threshold is blended, not stepped
 * (bisect): a sample count moved by a thousandth of itself moves the
 * estimate by about a thousandth, not by the step between the two
 * preparations. Thirty instances (one window each, 1,000 sampled misses
 * a run at period 100: 100,000 misses, as in mixes_far()) of six mixes of
 * four objects, five each: A0 = (55, 15, 15, 15)% and B0 = (25, 25, 25,
 * 25)%, v = A0 - B0 of squared length 0.12 and L1 length 0.6, and about
 * each a pair at distance d = sqrt(0.045) along a direction square to v
 * (A: (0, 1, -1, 0) / sqrt 2; B: (0, 1, 1, -2) / sqrt 6). The 2-means
 * keeps A and B: about the mean, an A+- or B+- mix lies 0.12 / 4 + d^2 =
 * 0.075, A0 and B0 0.03; within the halves 0.045 and 0; the split keeps
 * R = 20 x 0.045 / (20 x 0.075 + 10 x 0.03) = 0.9 / 1.8 = 0.5 of the
 * spread: split_sse itself. Its sampling error (delta method, bisect):
 * q1 - R q0 is 0.0075 for the 20 paired mixes and -0.015 for the 10
 * centres, Var R = 30 / 29 x (20 x 0.0075^2 + 10 x 0.015^2) / 1.8^2 =
 * 0.001078, sigma 0.0328; the halves are 0.6 apart, 4.6 sigma above
 * split_l1. So the split is kept with probability Phi(0) x Phi(4.6) =
 * 0.5. Object 0 alone on the far device: one class (f = 0.4) 30 x 0.6 x
 * 0.32 = 5.76 ms; two (f = 0.55 and 0.25) 15 x 0.55 x 0.4267 + 15 x 0.75
 * x 0.32 = 3.52 + 3.6 = 7.12 ms; blended, 0.5 x (5.76 + 7.12) = 6.44 ms.
 * Object 1 of the A+ mixes (300 misses) moved by 1e-3 of itself moves R
 * by -+1.8e-4, p by +-0.0044 and the estimate by about 1e-3 of itself;
 * a step would move it from 5.76 to 7.12 ms (24%). The same with the
 * thirty windows in one instance, aligned by instructions: the regimes
 * of split_regimes, the same figures. The incremental move gives what a
 * full estimate of the placement does. */
static double cont_far(int one_instance, double eta)
{
    const double d = sqrt(0.045), ua[4] = {0, 1 / sqrt(2.0), -1 / sqrt(2.0), 0};
    const double ub[4] = {0, 1 / sqrt(6.0), 1 / sqrt(6.0), -2 / sqrt(6.0)};
    const double a0[4] = {0.55, 0.15, 0.15, 0.15}, b0[4] = {0.25, 0.25, 0.25, 0.25};
    double cnt[30][4];
    for (int i = 0; i < 30; i++) {
        int t = i % 6, sg = t % 3 == 0 ? 1 : t % 3 == 2 ? -1 : 0;
        for (int o = 0; o < 4; o++)
            cnt[i][o] = 1000 * (t < 3 ? a0[o] + sg * d * ua[o] : b0[o] + sg * d * ub[o]);
        if (t == 0)
            cnt[i][1] *= 1 + eta;
    }
    char *js = mixes_summary_x(30, 4, (const double (*)[4])cnt, 100, one_instance);
    hm_estimator_t *e;
    double r = -1;
    hm_est_state_t *st = open_default(&e, "continuity", js, 30 * 0.32e6);
    if (st) {
        hm_est_state_move(st, -1, 0, 1, 100, &r);
        hm_estimate_t full;
        CHECK_NEAR(est_json(e, HM_EST_DEFAULT, "{\"default\": \"near\", \"rules\": [{\"site\": \"0x1\", \"device\": \"far\"}]}",
                            &full), r, 1e-9);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    free(js);
    return r;
}

/* A run whose sampled utilisation sits on bound_util is blended, not
 * stepped (find_bound_runs, prepare_default). Near (20 GB/s) and far (10
 * GB/s) with the same idle latency (100 ns), so that no test on the runs'
 * times binds either (1.0 / 0.95 ms is below lat_margin x 1, and far from
 * the bandwidths' ratio 2); one window, objects 0 and 1 with 62.5 sampled
 * misses each a run at period 1000, every one from memory and without
 * memory-bound weight (no latency cost: C = k = 0, the residuals spread by
 * samples, half each): 4 MB each, 8 MB in all, 0.4 ms of near channels
 * (0.42 of its 0.95 ms) and 0.8 ms of far ones, 0.8 of its 1 ms: on
 * bound_util. Its sampling error: 250 sampled misses over both runs, a
 * relative 1 / sqrt(250), sigma 0.8 / 15.81 = 0.0506, so the far run is
 * bound with probability Phi(0) = 0.5. Object 0 alone on far:
 * unbound, y_near = 4 MB / 20 GB/s = 0.2 ms, y_far = 0.4 ms; residuals
 * near 0.95 - 0.4 = 0.55 ms and far 1 - 0.8 = 0.2 ms, half each: 0.4 +
 * 0.375 = 0.775 ms. Bound, its channels moved (1 - 0.8) ms x 10 GB/s = 2
 * MB beyond the samples, 1 MB per object (near then at (0.4 + 0.1) / 0.95
 * = 0.53: unbound): y_near = 5 MB / 20 GB/s = 0.25 ms, y_far = 0.5 ms;
 * residuals 0.95 - 0.5 = 0.45 and 1 - 1 = 0, half each: 0.5 + 0.225 =
 * 0.725 ms. Blended: 0.75 ms. Object 0's far sampled misses moved by 1e-3
 * of themselves move u by -+2e-4 and the estimate by about 1e-4 of itself;
 * a step would move it 0.725 -> 0.775 ms (7%). */
static double bound_cont_far(double eta)
{
    char js[2048];
    double m0 = 62.5 * (1 + eta);
    snprintf(js, sizeof js,
             "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
             " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 0.95e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
             "               {\"name\": \"far\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 10, \"read_latency_ns\": 100}],"
             " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
             " \"windows\": [{\"phase\": 0, \"t_ns\": [0.95e6, 1e6], \"stats\": ["
             "   [0, 0, 62.5, 6250, 62.5, 0, 0, 62.5, 0], [1, 0, 62.5, 6250, 62.5, 0, 0, 62.5, 0],"
             "   [0, 1, %.9g, 6250, %.9g, 0, 0, %.9g, 0], [1, 1, 62.5, 6250, 62.5, 0, 0, 62.5, 0]]}]}",
             m0, m0, m0);
    hm_estimator_t *e;
    double r = -1;
    hm_est_state_t *st = open_default(&e, "bound continuity", js, 0.95e6);
    if (st) {
        hm_est_state_move(st, -1, 0, 1, 100, &r);
        hm_estimate_t full;
        CHECK_NEAR(est_json(e, HM_EST_DEFAULT, "{\"default\": \"near\", \"rules\": [{\"site\": \"0x1\", \"device\": \"far\"}]}",
                            &full), r, 1e-9);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    return r;
}

static void test_bound_continuity(void)
{
    double at = bound_cont_far(0), up = bound_cont_far(1e-3), down = bound_cont_far(-1e-3);
    CHECK_NEAR(at, 0.75e6, 1e-3);
    CHECK(fabs(up - at) < 1e-3 * at);
    CHECK(fabs(down - at) < 1e-3 * at);
}

static void test_split_continuity(void)
{
    for (int one = 0; one < 2; one++) {
        double at = cont_far(one, 0), up = cont_far(one, 1e-3), down = cont_far(one, -1e-3);
        CHECK_NEAR(at, 6.44e6, 1e-3);
        CHECK(fabs(up - at) < 2e-3 * at);
        CHECK(fabs(down - at) < 2e-3 * at);
        CHECK(down > up); /* fewer misses apart, a likelier split */
    }
}

/* split_min (0.05) from either side: each half of a split holds at least
 * ceil(0.05 x 60) = 3 of a phase's 60 instances (ceil(0.025 x 60) = 2 at
 * half, ceil(0.075 x 60) = 5 at one and a half times). A few instances
 * whose mix is 90/10 among others at 30/70 (0.6 apart, no spread within
 * either: 2-means keeps them apart whenever both halves are large enough).
 * Three of them: cut at 0.05 (and 0.025), not at 0.075. Cut, the three
 * (f = 0.9) take 3 x 0.9 x 0.4267 = 1.152 ms and the 57 others (f = 0.3)
 * 57 x 0.7 x 0.32 = 12.768 ms: 13.92 ms; as one class (f = 19.8 / 60 =
 * 0.33), 60 x 0.67 x 0.32 = 12.864 ms. Two of them: one class at 0.05
 * (f = 19.2 / 60 = 0.32: 60 x 0.68 x 0.32 = 13.056 ms), cut at 0.025
 * (2 x 0.384 + 58 x 0.224 = 13.76 ms). */
static double minority_far(int few)
{
    int cnt[60][4] = {{0}};
    for (int i = 0; i < 60; i++) {
        int odd = i % 20 == 10 && i / 20 < few;
        cnt[i][0] = odd ? 90 : 30;
        cnt[i][1] = odd ? 10 : 70;
    }
    return mixes_far("split_min", 60, 2, (const int (*)[4])cnt, 1000);
}

static void test_split_min(void)
{
    CHECK_NEAR(minority_far(3), 13.92e6, 0.002);
    CHECK_NEAR(minority_far(2), 13.056e6, 0.002);
}

/* mix_samples (8) from either side: an instance whose sampled misses, over
 * all runs, number fewer than 8 does not say its mix and joins the class of
 * the instance before it. Twenty instances alternate between two mixes of
 * objects 0 and 1, each 100,000 misses a run as in mixes_far().
 *
 * Five samples a run (period 20,000; 10 over both runs: enough at 8, not
 * at 12), mixes 4/1 and 1/4 (0.6 apart): two classes, f = 0.8 10 x 0.8 x
 * 0.4267 = 3.413 ms and f = 0.2 10 x 0.8 x 0.32 = 2.56 ms: 5.973 ms. At
 * 12 no instance says its mix and the phase is one class (f = 0.5): 20 x
 * 0.5 x 0.4267 = 4.267 ms.
 *
 * Two samples a run (period 50,000; 4 over both runs: too few at 8, enough
 * at 4), mixes 2/0 and 0/2: one class (f = 0.5), 4.267 ms; at 4 two, f = 1
 * 10 x 0.4267 = 4.267 ms and f = 0 10 x 0.32 = 3.2 ms: 7.467 ms. */
static void test_mix_samples(void)
{
    int cnt[20][4] = {{0}};
    for (int i = 0; i < 20; i++)
        cnt[i][0] = i % 2 ? 1 : 4, cnt[i][1] = 5 - cnt[i][0];
    CHECK_NEAR(mixes_far("mix_samples enough", 20, 2, (const int (*)[4])cnt, 20000), 5.9733e6, 0.002);
    for (int i = 0; i < 20; i++)
        cnt[i][0] = i % 2 ? 0 : 2, cnt[i][1] = 2 - cnt[i][0];
    CHECK_NEAR(mixes_far("mix_samples too few", 20, 2, (const int (*)[4])cnt, 50000), 4.2667e6, 0.002);
}

/* The calibration tests' estimator: twenty instances of one mix, 60% of
 * the misses on object 0 and 40% on object 1 (mixes_summary); NULL (and a
 * failed check) when it cannot be made. */
static hm_estimator_t *calib_estimator(const char *name)
{
    int cnt[20][4] = {{0}};
    for (int i = 0; i < 20; i++)
        cnt[i][0] = 60, cnt[i][1] = 40;
    char *js = mixes_summary(20, 2, (const int (*)[4])cnt, 1000);
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, name, js), 0);
    free(js);
    return e;
}

/* The calibration tests' placements on the near/far summary: object 0 on
 * far, object 1 on far, everything on far; r0 and r1 the first two's
 * uncalibrated default-model estimates. */
static void calib_placements(hm_estimator_t *e, hm_placement_t **p0, hm_placement_t **p1, hm_placement_t **pf,
                             hm_estimate_t *r0, hm_estimate_t *r1)
{
    const char *far0 = "{\"default\": \"near\", \"rules\": [{\"site\": \"0x1\", \"device\": \"far\"}]}";
    const char *far1 = "{\"default\": \"near\", \"rules\": [{\"site\": \"0x2\", \"device\": \"far\"}]}";
    const char *all_far = "{\"default\": \"far\", \"rules\": []}";
    const char *devs[] = {"near", "far"};
    CHECK_EQ_INT(hm_placement_parse(p0, "far0", far0, devs, 2), 0);
    CHECK_EQ_INT(hm_placement_parse(p1, "far1", far1, devs, 2), 0);
    CHECK_EQ_INT(hm_placement_parse(pf, "all far", all_far, devs, 2), 0);
    CHECK_EQ_INT(hm_estimator_estimate(e, *p0, HM_EST_DEFAULT, r0, NULL), 0);
    CHECK_EQ_INT(hm_estimator_estimate(e, *p1, HM_EST_DEFAULT, r1, NULL), 0);
}

/* Calibration on measured mixed runs fits the channel overlap w that the
 * runs with all data on one device cannot show (docs/estimator.md), with
 * the mix term from three runs on (fewer are fitted by the mix term
 * alone: test_calibrate_mix). Twenty instances of one mix, 60% of the misses on
 * object 0 and 40% on object 1, as in mixes_far(): every run is bound by
 * its channels, so a class's time is its channel side, max_d y_d + (1 - w)
 * (sum_d y_d - max_d y_d). Object 0 alone on far: y_far = 0.6 x 20 x
 * 0.4267 = 5.12 ms, y_near = 0.4 x 20 x 0.32 = 2.56 ms: 5.12 ms
 * uncalibrated (w = 1); object 1 alone on far, y_far = 0.4 x 20 x 0.4267 =
 * 3.413 ms and y_near = 0.6 x 20 x 0.32 = 3.84 ms: 3.84 ms. Measured at
 * 6.4 ms (channels that overlap half: 5.12 + 0.5 x 2.56) and 5.547 ms
 * (3.84 + 0.5 x 3.413), with all on far at its run's 8.533 ms (one
 * device's channels alone), the three runs fix w = 0.5 and leave no error
 * for the mix term. The mix term alone could not fit them: both mixes have
 * the spread 2 x 0.6 x 0.4 x (8.533 - 6.4) = 1.024 ms but miss by 1.28
 * and 1.707 ms. The same two mixes alone are fitted by beta alone. A
 * calibration on the run all on far cannot tell w and leaves it at 1, as
 * no calibration does (every estimate as before, to the last bit). */
static void test_calibrate_overlap(void)
{
    hm_estimator_t *e = calib_estimator("calibrate");
    if (!e)
        return;
    CHECK_NEAR(hm_estimator_overlap(e), 1, 0);
    hm_placement_t *p0 = NULL, *p1 = NULL, *pf = NULL;
    hm_estimate_t r0, r1;
    calib_placements(e, &p0, &p1, &pf, &r0, &r1);
    CHECK_NEAR(r0.runtime_ns, 5.12e6, 1e-6);
    CHECK_NEAR(r1.runtime_ns, 3.84e6, 1e-6);
    hm_est_calibration_t cal;
    hm_placement_t *three[3] = {p0, p1, pf};
    double meas[3] = {6.4e6, 5.5467e6, 8.5333e6}, t;
    CHECK_EQ_INT(hm_estimator_calibrate(e, three, meas, 2, &cal), 0);
    CHECK_NEAR(cal.overlap, 1, 0);
    CHECK(cal.mix > 0);
    CHECK_EQ_INT(hm_estimator_calibrate(e, three, meas, 3, &cal), 0);
    CHECK_NEAR(cal.overlap, 0.5, 1e-4);
    CHECK_NEAR(hm_estimator_overlap(e), cal.overlap, 0);
    CHECK_NEAR(cal.mean_err_before, (0.2 + (5.5467 - 3.84) / 5.5467 + 0) / 3, 1e-4);
    CHECK(cal.mean_err_after < 1e-4);
    CHECK(fabs(cal.mix) < 1e-3);
    hm_estimate_t c1, cf;
    CHECK_EQ_INT(hm_estimator_estimate(e, p1, HM_EST_DEFAULT, &c1, NULL), 0);
    CHECK_NEAR(c1.runtime_ns, 5.5467e6, 1e-4);
    CHECK_EQ_INT(hm_estimator_estimate(e, pf, HM_EST_DEFAULT, &cf, NULL), 0);
    CHECK_NEAR(cf.runtime_ns, 8.5333e6, 1e-4);
    /* The same through a state, as the optimizer moves. */
    hm_est_state_t *st = NULL;
    CHECK_EQ_INT(hm_est_state_open(&st, e, HM_EST_DEFAULT, 0), 0);
    if (st) {
        double m = -1;
        hm_est_state_move(st, -1, 1, 1, 100, &m);
        CHECK_NEAR(m, 5.5467e6, 1e-4);
        hm_est_state_close(st);
    }
    /* A run that cannot tell w, and no run at all: w = 1, estimates as before. */
    t = 9e6;
    CHECK_EQ_INT(hm_estimator_calibrate(e, &pf, &t, 1, &cal), 0);
    CHECK_NEAR(cal.overlap, 1, 0);
    CHECK_EQ_INT(hm_estimator_calibrate(e, &p0, &t, 0, NULL), 0);
    CHECK_NEAR(hm_estimator_overlap(e), 1, 0);
    CHECK_NEAR(hm_estimator_mix(e), 0, 0);
    CHECK_EQ_INT(hm_estimator_estimate(e, p1, HM_EST_DEFAULT, &c1, NULL), 0);
    CHECK(c1.runtime_ns == r1.runtime_ns && c1.lo_ns == r1.lo_ns && c1.hi_ns == r1.hi_ns);
    /* A measured time that is no time is refused. */
    t = 0;
    CHECK_EQ_INT(hm_estimator_calibrate(e, &p0, &t, 1, NULL), HM_EUSAGE);
    CHECK(strstr(hm_errdetail(), "calibration run 1") != NULL);
    hm_placement_close(p0);
    hm_placement_close(p1);
    hm_placement_close(pf);
    hm_estimator_close(e);
}

/* One measured mixed run that the model overestimates, which w cannot fix
 * (w only slows mixes): the mix term moves the estimate down. The case of
 * test_calibrate_overlap, one class: the device runs take T_near = 20 x
 * 0.32 = 6.4 ms and T_far = 20 x 0.4267 = 8.533 ms. Object 0 alone on far
 * puts 60% of the traffic there: spread 2 x 0.6 x 0.4 x (8.533 - 6.4) =
 * 1.024 ms, estimate 5.12 ms. Measured at 4.608 ms (10% below), the fit is
 * beta = (4.608 - 5.12) / 1.024 = -0.5 with a cap of 0.512 / 5.12 = 10%
 * of a class's time, and w stays 1. That run is then estimated at 4.608
 * ms. Object 1 alone on far (40% of the traffic there) has the same spread,
 * 1.024 ms: -0.5 x 1.024 = -0.512 ms would take its 3.84 ms to 3.328 ms,
 * more than 10% of it, so the cap holds it at 3.84 - 0.384 = 3.456 ms. All
 * on far has no spread and keeps its run's 8.533 ms. A state moving object
 * 0 to far gives the same 4.608 ms, and the explanation's mix term is
 * -0.512 ms. */
static void test_calibrate_mix(void)
{
    hm_estimator_t *e = calib_estimator("calibrate mix");
    if (!e)
        return;
    hm_placement_t *p0 = NULL, *p1 = NULL, *pf = NULL;
    hm_estimate_t r0, r1;
    calib_placements(e, &p0, &p1, &pf, &r0, &r1);
    CHECK_NEAR(r0.runtime_ns, 5.12e6, 1e-6);
    CHECK_NEAR(r0.spread_ns, 1.024e6, 1e-4);
    CHECK_NEAR(r1.spread_ns, 1.024e6, 1e-4);
    hm_est_calibration_t cal;
    double t = 4.608e6;
    CHECK_EQ_INT(hm_estimator_calibrate(e, &p0, &t, 1, &cal), 0);
    CHECK_NEAR(cal.overlap, 1, 0);
    CHECK_NEAR(cal.mix, -0.5, 1e-4);
    CHECK_NEAR(hm_estimator_mix(e), cal.mix, 0);
    CHECK_NEAR(cal.mix_cap, 0.1, 1e-4);
    CHECK_NEAR(cal.mean_err_before, 0.512 / 4.608, 1e-4);
    CHECK(cal.mean_err_after < 1e-4);
    hm_estimate_t c0, c1, cf;
    CHECK_EQ_INT(hm_estimator_estimate(e, p0, HM_EST_DEFAULT, &c0, NULL), 0);
    CHECK_NEAR(c0.runtime_ns, 4.608e6, 1e-4);
    CHECK_EQ_INT(hm_estimator_estimate(e, p1, HM_EST_DEFAULT, &c1, NULL), 0);
    CHECK_NEAR(c1.runtime_ns, 3.456e6, 1e-4);
    CHECK_EQ_INT(hm_estimator_estimate(e, pf, HM_EST_DEFAULT, &cf, NULL), 0);
    CHECK_NEAR(cf.runtime_ns, 8.5333e6, 1e-4);
    hm_est_state_t *st = NULL;
    CHECK_EQ_INT(hm_est_state_open(&st, e, HM_EST_DEFAULT, 0), 0);
    if (st) {
        double m = -1;
        hm_est_state_move(st, -1, 0, 1, 100, &m);
        CHECK_NEAR(m, 4.608e6, 1e-4);
        hm_est_state_move(st, -1, 0, 0, 100, &m);
        hm_est_state_move(st, -1, 1, 1, 100, &m);
        CHECK_NEAR(m, 3.456e6, 1e-4);
        hm_est_state_close(st);
    }
    json_t *ex = hm__est_explain(e, p0);
    CHECK(ex != NULL && json_array_size(ex) == 1);
    if (ex) {
        CHECK_NEAR(json_real_value(json_object_get(json_array_get(ex, 0), "mix_s")), -0.512e-3, 1e-4);
        json_decref(ex);
    }
    /* No run: beta back to 0, every estimate as before to the last bit. */
    CHECK_EQ_INT(hm_estimator_calibrate(e, NULL, NULL, 0, &cal), 0);
    CHECK_NEAR(cal.mix, 0, 0);
    CHECK_EQ_INT(hm_estimator_estimate(e, p1, HM_EST_DEFAULT, &c1, NULL), 0);
    CHECK(c1.runtime_ns == r1.runtime_ns && c1.lo_ns == r1.lo_ns && c1.hi_ns == r1.hi_ns);
    hm_placement_close(p0);
    hm_placement_close(p1);
    hm_placement_close(pf);
    hm_estimator_close(e);
}

/* A state opened before a calibration sees it on its next use, as one
 * opened after it does (the cases of test_calibrate_mix and
 * test_calibrate_overlap): object 0 on far, 5.12 ms uncalibrated, is 4.608
 * ms once calibrated on that run (beta = -0.5), through the state's
 * runtime, its estimate (bit for bit the estimator's, interval included),
 * its next move (object 1 alone on far: 3.456 ms, the cap) and a copy;
 * a calibration with no run takes it back to 5.12 ms. With the channel
 * overlap fitted to 0.5 on three runs, object 1 on far goes from 3.84 to
 * 5.547 ms. Before, such a state kept the old terms: 5.12 ms after the
 * calibration, and a move mixed old and new terms. */
static void test_calibrate_open_states(void)
{
    hm_estimator_t *e = calib_estimator("calibrate open states");
    if (!e)
        return;
    hm_placement_t *p0 = NULL, *p1 = NULL, *pf = NULL;
    hm_estimate_t r0, r1;
    calib_placements(e, &p0, &p1, &pf, &r0, &r1);
    hm_est_state_t *st = NULL, *cp = NULL;
    CHECK_EQ_INT(hm_est_state_open(&st, e, HM_EST_DEFAULT, 0), 0);
    CHECK_EQ_INT(hm_est_state_open(&cp, e, HM_EST_DEFAULT, 0), 0);
    if (!st || !cp)
        goto out;
    double m = -1;
    CHECK_EQ_INT(hm_est_state_move(st, -1, 0, 1, 100, &m), 0);
    CHECK_NEAR(m, 5.12e6, 1e-6);
    double t = 4.608e6;
    CHECK_EQ_INT(hm_estimator_calibrate(e, &p0, &t, 1, NULL), 0);
    CHECK_NEAR(hm_est_state_runtime(st), 4.608e6, 1e-4);
    hm_estimate_t se, ee;
    CHECK_EQ_INT(hm_est_state_estimate(st, &se), 0);
    CHECK_EQ_INT(hm_estimator_estimate(e, p0, HM_EST_DEFAULT, &ee, NULL), 0);
    CHECK(se.runtime_ns == ee.runtime_ns && se.lo_ns == ee.lo_ns && se.hi_ns == ee.hi_ns);
    CHECK_EQ_INT(hm_est_state_copy(cp, st), 0);
    CHECK_NEAR(hm_est_state_runtime(cp), 4.608e6, 1e-4);
    CHECK_EQ_INT(hm_est_state_move(st, -1, 0, 0, 100, &m), 0);
    CHECK_EQ_INT(hm_est_state_move(st, -1, 1, 1, 100, &m), 0);
    CHECK_NEAR(m, 3.456e6, 1e-4);
    CHECK_EQ_INT(hm_estimator_calibrate(e, NULL, NULL, 0, NULL), 0);
    CHECK_NEAR(hm_est_state_runtime(cp), 5.12e6, 1e-6);
    CHECK(hm_est_state_runtime(st) == r1.runtime_ns);
    /* The overlap: object 1 on far, then three runs fit w = 0.5. */
    hm_placement_t *three[3] = {p0, p1, pf};
    double meas[3] = {6.4e6, 5.5467e6, 8.5333e6};
    CHECK_EQ_INT(hm_estimator_calibrate(e, three, meas, 3, NULL), 0);
    CHECK_NEAR(hm_estimator_overlap(e), 0.5, 1e-4);
    CHECK_NEAR(hm_est_state_runtime(st), 5.5467e6, 1e-4);
out:
    hm_est_state_close(st);
    hm_est_state_close(cp);
    hm_placement_close(p0);
    hm_placement_close(p1);
    hm_placement_close(pf);
    hm_estimator_close(e);
}

/* Sampled traffic beyond what a run's channels could move comes from the
 * loads (misses that hit a cache count as traffic for a streamed object),
 * not the stores: every store miss dirties a line that is written back
 * once. Object 0 loads 200 sampled misses a window of which 100 are lines
 * from memory; object 1 stores 50 lines. Per window the near run moves 9.6
 * MB read and 3.2 MB written at 20 GB/s both ways (0.64 ms), the far run
 * at 5 GB/s reads and 1 GB/s writes (5.12 ms). With object 1 alone on the
 * far device its 3.2 MB read and 3.2 MB written there take 3.84 ms a
 * window; scaling all sampled traffic alike would cut its writes by a
 * fifth (3.07 ms). The objects (128 MiB each) hold every line sampled:
 * no miss revisits a line. */
static void test_store_traffic_kept(void)
{
    char js[8192];
    size_t len = 0;
    len += (size_t)snprintf(js + len, sizeof js - len,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 6.4e6, \"period\": 1000, \"bandwidth_gbs\": 20,"
        "                \"write_bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 51.2e6, \"period\": 1000, \"bandwidth_gbs\": 5,"
        "                \"write_bandwidth_gbs\": 1, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 134217728}, {\"site\": \"0x2\", \"size\": 134217728}],"
        " \"windows\": [");
    for (int w = 0; w < 10; w++)
        len += (size_t)snprintf(js + len, sizeof js - len,
            "%s{\"phase\": 0, \"t_ns\": [0.64e6, 5.12e6], \"stats\": ["
            "[0, 0, 200, 2000, 200, 2000, 0, 200], [0, 1, 200, 4000, 200, 4000, 0, 200],"
            "[1, 0, 50, 500, 50, 500, 50, 0], [1, 1, 50, 1000, 50, 1000, 50, 0]]}",
            w ? ", " : "");
    snprintf(js + len, sizeof js - len, "]}");
    hm_estimator_t *e;
    hm_est_state_t *st = open_default(&e, "stores", js, 6.4e6);
    if (st) {
        double r = 0;
        hm_est_state_move(st, -1, 1, 1, 100, &r);
        CHECK_NEAR(r, 38.4e6, 0.03);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
}

/* Stores that hit L1 in lines a load brought from memory (a read-modify-
 * write sweep) write those lines back: the object's own traffic, not
 * prefetches to spread over the objects. Per window object 0 loads 100
 * sampled lines from memory and stores 800 times (8 stores per line: 100
 * dirty lines), object 1 loads 100 lines and stores nothing; with period
 * 1000 that is 12.8 MB read and 6.4 MB written, 0.96 ms at 20 GB/s and
 * 3.84 ms at 5 GB/s (both runs bound). Object 0 alone on the far device
 * sends it 6.4 MB read and 6.4 MB written (2.56 ms); object 1 alone, 6.4 MB
 * read (1.28 ms). Counted as traffic the samples missed, the write-backs
 * would be spread over both objects and time the two placements alike.
 * Without store hits the two cost alike; and an object whose loads mostly
 * hit a cache (memory share 0.05, no hit waited) dirties only the lines
 * its loads took from memory. */
static void rmw_far(const char *store_hits, const char *mem_loads, double *far0, double *far1)
{
    char js[2048];
    snprintf(js, sizeof js,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 0.96e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 3.84e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [0.96e6, 3.84e6], \"stats\": ["
        "   [0, 0, 900, 2000, 100, 2000, 0, %s, 0, %s], [0, 1, 900, 4000, 100, 4000, 0, %s, 0, %s],"
        "   [1, 0, 100, 2000, 100, 2000, 0, 100, 0, 0], [1, 1, 100, 4000, 100, 4000, 0, 100, 0, 0]]}]}",
        mem_loads, store_hits, mem_loads, store_hits);
    far_each("rmw", js, 0.96e6, far0, far1);
}

static void test_store_hits_write_back(void)
{
    double a, b;
    rmw_far("800", "100", &a, &b);
    CHECK_NEAR(a, 2.56e6, 0.03);
    CHECK_NEAR(b, 1.28e6, 0.03);
    /* The same loads, no store hits: the write-backs are traffic the samples
     * missed, and the two objects look alike. */
    rmw_far("0", "100", &a, &b);
    CHECK_NEAR(a, b, 0.02);
    /* Loads that mostly hit a cache: 5 of its 100 lines dirtied, not 100. */
    double c, d;
    rmw_far("800", "5", &c, &d);
    CHECK(c < 0.8 * 2.56e6);
    /* 400 store hits over its 100 lines: 4 a line, so half of them are
     * dirtied (store_hits_per_line 8: 8-byte elements in 64-byte lines),
     * 3.2 MB written back. The near run then moves 12.8 MB read and 3.2 MB
     * written (0.8 of its 0.96 ms: bound), and its channels had time for
     * 3.2 MB more, as the far run's had (16 MB in 3.2 of its 3.84 ms): the
     * traffic the samples missed, spread by reads, 1.6 MB to each object.
     * Object 0 alone on the far device: 6.4 + 1.6 MB read and 3.2 MB
     * written at 5 GB/s, 2.24 ms; object 1: 8 MB, 1.6 ms. */
    rmw_far("400", "100", &c, &d);
    CHECK_NEAR(c, 2.24e6, 0.03);
    CHECK_NEAR(d, 1.6e6, 0.03);
    /* A 10-column row with more store hits than its samples allow is refused. */
    hm_estimator_t *e = NULL;
    CHECK(hm_estimator_parse_summary(&e, "bad",
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"a\", \"runtime_ns\": 1}, {\"name\": \"b\", \"runtime_ns\": 1}],"
        " \"objects\": [], \"windows\": [{\"phase\": 0, \"t_ns\": [1, 1], \"stats\": [[0, 0, 10, 0, 5, 0, 0, 5, 0, 6]]}]}") < 0);
    CHECK(strstr(hm_errdetail(), "store hits") != NULL);
    hm_estimator_close(e);
}

/* When the sampled traffic is more than the bound runs' channels moved, the
 * loads beyond one pass over an object per instance are taken back first: a
 * line missed again within an instance (a stencil's neighbour planes) more
 * likely came from a cache. Two streamed objects of 16,000 lines each, read
 * once from memory per instance; object 0's lines miss L1 three times,
 * object 1's once (sampled: 48 and 16 misses at period 1000). The runs'
 * channels moved 2 x 16,000 lines (102.4 us at 20 GB/s, 409.6 us at 5 GB/s),
 * half the sampled 64,000. Either object alone on the far device sends it
 * 16,000 lines (204.8 us); scaling all loads alike would give object 0
 * 24,000 lines there (307.2 us) and object 1 8,000 (102.4 us). */
static void test_reuse_scaled_first(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 102400, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 409600, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1024000}, {\"site\": \"0x2\", \"size\": 1024000}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [102400, 409600], \"stats\": ["
        "   [0, 0, 48, 4800, 48, 1000, 0, 10, 5], [1, 0, 16, 1600, 16, 500, 0, 5, 2],"
        "   [0, 1, 48, 9600, 48, 2000, 0, 10, 5], [1, 1, 16, 3200, 16, 1000, 0, 5, 2]]}]}";
    double a, b;
    far_each("reuse", js, 102400, &a, &b);
    CHECK_NEAR(a, 204800, 0.03);
    CHECK_NEAR(b, 204800, 0.03);
}

/* The traffic a bound run moved beyond its samples (prefetches) follows the
 * objects' sampled traffic, not how long their loads waited: a stream the
 * prefetcher keeps ahead of waits for nothing yet brings the most. Two
 * objects with 100,000 sampled lines each, one of whose loads wait four
 * times longer; the runs (times in the ratio of the bandwidths, so both
 * bound) moved 20 MB, 7.2 MB more than the samples show. Either object
 * alone on the far device sends it 6.4 + 3.6 MB (2 ms); spread by latency,
 * the slow-waiting object would take 5.76 MB of the rest (2.43 ms) and the
 * other 1.44 MB (1.57 ms). */
static void test_unsampled_by_traffic(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 4e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e6, 4e6], \"stats\": ["
        "   [0, 0, 100, 80000, 100, 80000, 0, 100, 0], [1, 0, 100, 20000, 100, 20000, 0, 100, 0],"
        "   [0, 1, 100, 160000, 100, 160000, 0, 100, 0], [1, 1, 100, 40000, 100, 40000, 0, 100, 0]]}]}";
    double a, b;
    far_each("unsampled", js, 1e6, &a, &b);
    CHECK_NEAR(a, 2e6, 0.03);
    CHECK_NEAR(b, 2e6, 0.03);
}

/* A phase whose only unbound run cannot give C and k apart (one point, and
 * the other run's latency cost does not grow with the device's latency) is
 * charged its sampled latency cost at face value, k = 1 (misses overlap at
 * least that well), and C takes the rest: not its whole time to that cost,
 * which made k 100 here and the far placement of object 0 cost 40 ms. The
 * near run takes 10 ms, 0.1 of it its loads' latency cost; the far run is
 * bound by object 1's stores (64 MB read and 64 MB written back at 5 GB/s).
 * Object 0 alone on the far device (latency 4x): 9.9 + 0.4 ms. */
static void test_one_unbound_run(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 2.56e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 400}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e7, 2.56e7], \"stats\": ["
        "   [0, 0, 100, 1000, 10, 100, 0, 10, 0], [1, 0, 1000, 0, 1000, 0, 1000, 0, 0],"
        "   [0, 1, 100, 1000, 10, 0, 0, 0, 0], [1, 1, 1000, 0, 1000, 0, 1000, 0, 0]]}]}";
    double a, b;
    far_each("one unbound", js, 1e7, &a, &b);
    CHECK_NEAR(a, 1.03e7, 0.03);
    CHECK(b > 2e7); /* the stores' object on the far device takes its channel time */
}

/* A fit steeper than k = 1 through a bound run: the far run is slow
 * because of object 1's stores (bound by its channel), not because object
 * 0's loads wait four times longer there (1 -> 4 ms of latency cost). The
 * line through both runs (k 5.2, C 4.8 ms) would charge object 0's move to
 * the far device 5.2 x its 3 ms more of latency (25.6 ms); at k = 1 and C
 * from the near run (9 ms) it costs those 3 ms: 13 ms. */
static void test_steep_fit(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 2.56e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 400}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e7, 2.56e7], \"stats\": ["
        "   [0, 0, 1000, 2000, 100, 1000, 0, 100, 0], [1, 0, 1000, 0, 1000, 0, 1000, 0, 0],"
        "   [0, 1, 1000, 5000, 100, 4000, 0, 100, 0], [1, 1, 1000, 0, 1000, 0, 1000, 0, 0]]}]}";
    double a, b;
    far_each("steep", js, 1e7, &a, &b);
    CHECK_NEAR(a, 1.3e7, 0.03);
    CHECK(b > 2e7);
}

/* A scatter of stores over more lines than L1 holds misses each line again
 * and again, mostly in L2: object 1 only stores, and its store misses come
 * to three passes over it, while the far run's channels moved one pass of
 * each object (object 0 read, object 1 read for ownership and written
 * back: 201 MB at 5 GB/s, its whole 40.3 ms). When the sampled traffic has
 * to be taken back, the store misses beyond one pass go first: object 1
 * alone on the far device moves 64 MiB each way (26.8 ms), not the 86 MB
 * each way that scaling all traffic alike leaves (34.4 ms). */
static void test_store_scatter_excess(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1.4e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 4.027e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 400}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1.4e7, 4.027e7], \"stats\": ["
        "   [0, 0, 1049, 200, 1049, 200, 0, 1049, 0], [1, 0, 3146, 0, 3146, 0, 3146, 0, 0],"
        "   [0, 1, 1049, 800, 1049, 800, 0, 1049, 0], [1, 1, 3146, 0, 3146, 0, 3146, 0, 0]]}]}";
    double a, b;
    far_each("scatter", js, 1.4e7, &a, &b);
    CHECK_NEAR(b, 2.68e7, 0.03);
    CHECK(a > 1.4e7 && a < b);
}

/* A bound run's latency terms come from an unbound one, and only the idle
 * latency of each memory load changes with the device: what the loads
 * waited beyond it is the phase's own queueing (here behind object 1's
 * write-backs, which stay where object 1 is) and is carried over as it is.
 * Object 0's 100,000 loads wait 500 ns on the near device (idle 100 ns);
 * object 1's 10.5 M store misses keep the far device's channels 90% busy
 * (bound) and make no latency cost. The near run takes 100 ms, 50 of them
 * object 0's latency cost (k = 1, C 50 ms). Object 0 alone on the far
 * device (idle 400 ns) waits 400 + 400 ns per load: 50 + 80 = 130 ms.
 * Scaling its whole cost by the ratio of latencies charged 50 + 200 ms.
 * The weights are core cycles, here of a 1 GHz core (core_ghz 1: a cycle
 * is a ns). */
static void test_queueing_carried(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"core_ghz\": 1,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e8, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 3e8, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 400}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 6400000}, {\"site\": \"0x2\", \"size\": 704643072}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e8, 3e8], \"stats\": ["
        "   [0, 0, 100, 50000, 100, 50000, 0, 100, 0], [1, 0, 10500, 0, 10500, 0, 10500, 0, 0],"
        "   [0, 1, 100, 80000, 100, 80000, 0, 100, 0], [1, 1, 10500, 0, 10500, 0, 10500, 0, 0]]}]}";
    double a, b;
    far_each("queueing", js, 1e8, &a, &b);
    CHECK_NEAR(a, 1.3e8, 0.03);
    CHECK(b > 2.5e8); /* object 1 on the far device: its channels */
}

/* Latency weights are core cycles and device latencies ns: the core clock
 * relates them. test_queueing_carried's runs on a 2 GHz core, object 0's
 * near loads weighing 1,600 cycles (800 ns) each: its cost, 80 ms, fits
 * in the near run's 100 ms, so k = 1 and C = 20 ms, and alone on far it
 * costs 10 x 4 (idle, scaled) + 70 (the wait) = 110 ms: 130 ms in all.
 * Read as ns (no clock), the cost would be 160 ms, more than the run:
 * k = 100 / 160 = 0.625, C = 0, and object 0 alone on far 0.625 x (10 x
 * 4 + 150) = 118.75 ms; the note then says the clock lacks. With a
 * loaded-latency curve on near (100 ns idle, 200 ns at full load) its
 * run, 67.52% busy (object 1's 10.5 M store misses, a read and a
 * write-back of 64 B each, and object 0's 6.4 MB: 1350.4 MB at 20 GB/s
 * over 100 ms), waited 1.6752 idle latencies: object 0's unloaded cost is
 * 80 / 1.6752 = 47.755 ms, of which 10 ms idle, so alone on far it costs
 * 10 x 4 + 37.755 = 77.755 ms, 97.755 ms in all with C (the idle part
 * charged at near's load again, 10 x 4 x 1.6752 + 37.755, gave 124.76
 * ms). */
static void test_queueing_carried_clock(void)
{
    const char *fmt =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0%s,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e8, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100%s},"
        "               {\"name\": \"far\", \"runtime_ns\": 3e8, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 400}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 6400000}, {\"site\": \"0x2\", \"size\": 704643072}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e8, 3e8], \"stats\": ["
        "   [0, 0, 100, 160000, 100, 160000, 0, 100, 0], [1, 0, 10500, 0, 10500, 0, 10500, 0, 0],"
        "   [0, 1, 100, 320000, 100, 320000, 0, 100, 0], [1, 1, 10500, 0, 10500, 0, 10500, 0, 0]]}]}";
    char js[2048];
    double a, b;
    hm_estimator_t *e = NULL;
    snprintf(js, sizeof js, fmt, ", \"core_ghz\": 2", "");
    far_each("queueing, 2 GHz", js, 1e8, &a, &b);
    CHECK_NEAR(a, 1.3e8, 1e-3);
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, "queueing clock", js), 0);
    CHECK(e && hm_estimator_figures_note(e) == NULL && hm_estimator_core_ghz(e) == 2);
    hm_estimator_close(e);
    snprintf(js, sizeof js, fmt, "", "");
    far_each("queueing, no clock", js, 1e8, &a, &b);
    CHECK_NEAR(a, 1.1875e8, 1e-3);
    e = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, "queueing clock", js), 0);
    const char *note = e ? hm_estimator_figures_note(e) : NULL;
    CHECK(note && strstr(note, "core clock lacking") && strstr(note, "taken as ns"));
    CHECK(e && hm_estimator_core_ghz(e) == 0);
    hm_estimator_close(e);
    snprintf(js, sizeof js, fmt, ", \"core_ghz\": 2", ", \"loaded_latency\": [[1, 200]]");
    far_each("queueing, loaded near", js, 1e8, &a, &b);
    CHECK_NEAR(a, 9.7755e7, 1e-3);
}

/* A device without a loaded-latency curve whose run's memory loads waited
 * beyond its idle latency queued for its channels; the queue shrinks with
 * the load a placement puts there (queue_by_load, Kingman: the wait
 * beyond idle latency grows as u / (1 - u)). Two objects of 100 sampled
 * memory loads each (period 1000: 1e5 lines, 6.4 MB). near (20 GB/s,
 * 100 ns): each load waits 100 ns, 10 ms of latency cost per object, run
 * 70 ms. far (0.256 GB/s, 200 ns): each waits 400 ns, W = 2 idle
 * latencies, 40 ms per object, run 100 ms, its channels 2 x 25 ms = 50 ms
 * busy: u = 0.5, unbound (time ratio 1.43 < 1.1 x 2), so q = (W - 1) (1 -
 * u) / u = 1 and far's latency is 1 / (1 - u) idle latencies. The fit
 * through (20 ms, 70 ms) and (80 ms, 100 ms): k = 0.5, C = 60 ms. Object 0
 * alone on far: 25 ms of far channels, its idle cost 20 ms, so t = 60 +
 * 0.5 (10 + 20 / (1 - 25 / t)): t^2 - 100 t + 1625 = 0, t = 50 +
 * sqrt(875) = 79.58 ms. All on far: t^2 - 130 t + 3000 = 0, t = 100 ms,
 * the run. Carried at the run's 2 idle latencies instead: 60 + 0.5 (10 +
 * 40) = 85 ms. The queue is what far waited beyond the phase's own wait,
 * which the least loaded run shows (near, u = 0.01): with near's loads at
 * 1.5 idle latencies (15 ms per object, run 55 ms) and far's at 3 (60 ms,
 * W / W0 = 2, q = 1 again), k = 0.5 and C = 40 ms, far's unloaded cost is
 * 30 ms per object and object 0 alone there gives t = 40 + 0.5 (15 + 30 /
 * (1 - 25 / t)): t^2 - 87.5 t + 1187.5 = 0, t = 70.71 ms (with all of
 * far's wait as queue, q = 2, it would be 68.89 ms). */
static void test_queue_by_load(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 7e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 1e8, \"period\": 1000, \"bandwidth_gbs\": 0.256, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [7e7, 1e8], \"stats\": ["
        "   [0, 0, 100, 10000, 100, 10000, 0, 100, 0, 0], [1, 0, 100, 10000, 100, 10000, 0, 100, 0, 0],"
        "   [0, 1, 100, 40000, 100, 40000, 0, 100, 0, 0], [1, 1, 100, 40000, 100, 40000, 0, 100, 0, 0]]}]}";
    hm_estimator_t *e;
    hm_est_state_t *st = open_default(&e, "queue by load", js, 7e7);
    if (st) {
        double t = 0;
        CHECK_EQ_INT(hm_est_state_move(st, -1, 0, 1, 100, &t), 0);
        CHECK_NEAR(t, 7.958e7, 1e-3);
        CHECK_EQ_INT(hm_est_state_move(st, -1, 1, 1, 100, &t), 0);
        CHECK_NEAR(t, 1e8, 1e-6);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    const char *js0 =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 5.5e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 1e8, \"period\": 1000, \"bandwidth_gbs\": 0.256, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [5.5e7, 1e8], \"stats\": ["
        "   [0, 0, 100, 15000, 100, 15000, 0, 100, 0, 0], [1, 0, 100, 15000, 100, 15000, 0, 100, 0, 0],"
        "   [0, 1, 100, 60000, 100, 60000, 0, 100, 0, 0], [1, 1, 100, 60000, 100, 60000, 0, 100, 0, 0]]}]}";
    st = open_default(&e, "queue beyond the phase's wait", js0, 5.5e7);
    if (st) {
        double t = 0;
        CHECK_EQ_INT(hm_est_state_move(st, -1, 0, 1, 100, &t), 0);
        CHECK_NEAR(t, 7.071e7, 1e-3);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
}

/* A bound run's channel time is at most its time. Both runs are bound by
 * object 1's stream (200 MB sampled), and they disagree on the traffic
 * their samples missed: the near run's channels could have moved 40 MB
 * more in its 12 ms, the far run's none in its 40 ms. Their mean (20 MB)
 * made the far run's channel time 44 ms, and the 4 ms over its time went
 * to the residual, which is spread by the latency cost a placement puts on
 * the device: object 0 (a chase: 9 ms of latency cost near, 39 ms far, k
 * 0.93) alone on the far device lost most of it, though that placement
 * sends the far device almost no traffic. Scaling the far channels to the
 * run's time instead leaves object 0's latency cost: C 2.7 ms + 0.93 x
 * (15 ms of object 0, idle part scaled from the near run, + 1 ms of object
 * 1) = 17.6 ms (the residual gave 14.1 ms). */
static void test_channel_within_run(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"core_ghz\": 1,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1.2e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 4e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}, {\"site\": \"0x2\", \"size\": 268435456}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1.2e7, 4e7], \"stats\": ["
        "   [0, 0, 60, 9000, 60, 9000, 0, 60, 0, 0], [1, 0, 3065, 1000, 3065, 1000, 0, 10, 0, 0],"
        "   [0, 1, 60, 39000, 60, 39000, 0, 60, 0, 0], [1, 1, 3065, 1000, 3065, 1000, 0, 10, 0, 0]]}]}";
    double a, b;
    far_each("channel within run", js, 1.2e7, &a, &b);
    CHECK_NEAR(a, 1.76e7, 0.03);
    CHECK(b > 3.5e7); /* object 1 on the far device: its channels */
}

/* A class whose traffic comes in bursts: window A streams 80 MB (4 ms
 * near, channel-bound; 16 ms far) and window B computes for 6 ms with a
 * trickle of it; one object, the same latencies on both devices. The far
 * run (22 ms) is bound. Half the pages on the far device: window A waits
 * for the far channels (8 ms), B computes (6 ms): 14 ms. The max of the
 * class's sums, max(10 ms of latency side, 11 ms of far channel time),
 * gave 11 ms: it lets window B's compute hide window A's transfers. */
static void test_bursts(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 2.2e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 100}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 134217728}],"
        " \"windows\": [{\"phase\": 0, \"region\": 0, \"t_ns\": [4e6, 1.6e7], \"stats\": ["
        "   [0, 0, 1250, 1000, 1250, 1000, 0, 10, 0, 0], [0, 1, 1250, 1000, 1250, 1000, 0, 10, 0, 0]]},"
        "  {\"phase\": 0, \"region\": 0, \"t_ns\": [6e6, 6e6], \"stats\": ["
        "   [0, 0, 62, 100, 62, 100, 0, 1, 0, 0], [0, 1, 62, 100, 62, 100, 0, 1, 0, 0]]}]}";
    hm_estimator_t *e;
    hm_est_state_t *st = open_default(&e, "bursts", js, 1e7);
    if (st) {
        double t = 0;
        CHECK_EQ_INT(hm_est_state_move(st, -1, 0, 1, 50, &t), 0);
        CHECK_NEAR(t, 1.4e7, 0.03);
        CHECK_EQ_INT(hm_est_state_move(st, -1, 0, 1, 100, &t), 0);
        CHECK_NEAR(t, 2.2e7, 1e-6);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
}

/* Lines dirtied by store hits are written back when something evicts
 * them, over the rest of the instance, and the write-backs are posted:
 * between the two regimes of a phase they are shared by the regimes' time.
 * Each instance first updates a table in place (object 0: 100 sampled
 * loads from memory and 800 store hits per window, so 6.4 MB read and 6.4
 * MB dirtied) while streaming object 2 (25.6 MB per window), then chases
 * object 1 for 16 ms. The near device (20 GB/s) runs the first regime in
 * 4 ms, the far one (5 GB/s read, 2 GB/s write) in 19.2 ms, both bound by
 * their channels. The table alone on the far device: its reads, 12.8 MB
 * (2.56 ms), stay with the first regime, and its 12.8 MB of write-backs
 * (6.4 ms at 2 GB/s) are shared by time, 23.2 of the 55.2 ms the two runs
 * spent in it: 2.56 + 2.69 = 5.25 ms, beyond the 4 ms near; the chase
 * hides the rest (3.71 of its 16 ms): 21.25 ms, plus the table's share of
 * the traffic the samples missed and of the far run's residual (about 1
 * ms). Charged to the first regime alone, they made it 8.96 ms (24.9 ms).
 * The same traffic as store misses (each line read for ownership and
 * written back as the stores go on: a stream or a scatter of stores) stays
 * with its regime: 24.96 ms. */
static const char *hist_js(char *js, size_t cap, const char *row0near, const char *row0far)
{
    char a[4][1024];
    for (int w = 0; w < 2; w++) {
        snprintf(a[w], sizeof a[w],
            "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [2e6, 9.6e6], \"stats\": ["
            "   %s, [2, 0, 400, 40000, 400, 40000, 0, 400, 0, 0], %s, [2, 1, 400, 40000, 400, 40000, 0, 400, 0, 0]]},",
            row0near, row0far);
        snprintf(a[2 + w], sizeof a[2 + w],
            "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [8e6, 8e6], \"stats\": ["
            "   [1, 0, 100, 6000, 100, 6000, 0, 100, 0, 0], [1, 1, 100, 6000, 100, 6000, 0, 100, 0, 0]]}%s",
            w ? "" : ",");
    }
    snprintf(js, cap,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 20e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 35.2e6, \"period\": 1000, \"bandwidth_gbs\": 5,"
        "                \"write_bandwidth_gbs\": 2, \"read_latency_ns\": 100}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864},"
        "               {\"site\": \"0x3\", \"size\": 67108864}],"
        " \"windows\": [%s%s%s%s]}", a[0], a[1], a[2], a[3]);
    return js;
}

static void test_dirty_lines_posted(void)
{
    char js[8192];
    double a, b;
    hist_js(js, sizeof js, "[0, 0, 900, 10000, 100, 10000, 0, 100, 0, 800]", "[0, 1, 900, 10000, 100, 10000, 0, 100, 0, 800]");
    far_each("dirty lines", js, 20e6, &a, &b);
    CHECK(a >= 21.25e6 && a < 23.4e6);
    CHECK_NEAR(b, 20e6, 0.01); /* the chase: the same latency on both devices */
    hist_js(js, sizeof js, "[0, 0, 100, 0, 100, 0, 100, 0, 0, 0]", "[0, 1, 100, 0, 100, 0, 100, 0, 0, 0]");
    far_each("store misses", js, 20e6, &a, &b);
    CHECK_NEAR(a, 24.96e6, 0.03);
}

/* Two runs whose times are in the ratio of their devices' bandwidths
 * (within bw_match, 5%), and not of their latencies (beyond twice that),
 * moved the same bytes at full rate: both bound, however little traffic
 * the samples show. Near: 20 GB/s, 100 ns, 1 ms; far: 10 GB/s, 240 ns,
 * 2.08 ms (time ratio 2.08: 4% from the bandwidths' 2, 13% from the
 * latencies' 2.4, and below 1.1 x 2.4, so the latency rule does not mark
 * it). Two objects, 50 sampled loads from memory each (3.2 MB), latency
 * cost 0.05 ms each near and 0.12 ms far. The far run is bound (its
 * channels had time for 14.4 MB more than the 6.4 MB sampled), and so is
 * the near one once that counts (0.32 + 0.72 of its 1 ms); its channels
 * had 13.6 MB more: 14 MB unsampled per run, 7 MB per object. The line
 * through (0.1, 1) and (0.24, 2.08) is steeper than k = 1, so C and k
 * come from the reference run (near, lowest latency) alone: k = 1,
 * C = 0.9 ms. That run is saturated (1.02 of its time with the unsampled
 * traffic), so the latency terms are left out and the phase is timed by
 * its channels and C. Residuals: near 0 (its 20.4 MB, 1.02 ms, scaled to
 * its 1 ms), far 2.08 - 2.04 = 0.04 ms, spread by samples. Object 0 alone
 * on the far device: 10.2 MB there, 1.02 ms, over C, plus half the far
 * residual: 1.04 ms. Unbound, the runs give C = 1 ms, k = 1, the
 * residuals -0.1 and 0.84 ms: 1.17 + 0.37 = 1.54 ms. With only the far
 * run bound (the near one not by the unsampled traffic): C = 0.9 ms, the
 * far latency cost from the near run's (0.12 ms per object), 7.2 MB
 * unsampled per object, both residuals 0: 0.9 + 0.05 + 0.12 = 1.07 ms. */
static void test_bound_by_bandwidth_ratio(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 2.08e6, \"period\": 1000, \"bandwidth_gbs\": 10, \"read_latency_ns\": 240}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e6, 2.08e6], \"stats\": ["
        "   [0, 0, 50, 50, 50, 50, 0, 50, 0, 0], [1, 0, 50, 50, 50, 50, 0, 50, 0, 0],"
        "   [0, 1, 50, 120, 50, 120, 0, 50, 0, 0], [1, 1, 50, 120, 50, 120, 0, 50, 0, 0]]}]}";
    double a, b;
    far_each("bandwidth ratio", js, 1e6, &a, &b);
    CHECK_NEAR(a, 1.04e6, 0.005);
    CHECK_NEAR(b, 1.04e6, 0.005);
}

/* A run slower than another by more than lat_margin (1.1) times their
 * ratio of idle latencies is bandwidth-bound: latency alone slows a run at
 * most by that ratio. Near: 20 GB/s, 100 ns, 1 ms; far: 5 GB/s, 200 ns,
 * 2.6 ms (1.3 x the latency ratio; 0.65 of the bandwidth ratio, so the
 * bandwidth rule does not mark it; 6.4 MB sampled, 1.28 ms of its
 * channels, below bound_util). Two objects, 50 sampled loads from memory
 * each, latency cost 0.05 ms each near, 0.1 ms far. The far run bound,
 * its channels had time for 6.6 MB more (3.3 MB per object; the near run
 * stays below bound_util with it). The line through the runs is steeper
 * than k = 1: C and k from the unbound near run, k = 1, C = 0.9 ms. The
 * far latency terms from the near run's, idle latency doubled: 0.1 ms per
 * object. Both residuals 0 (near: 1 ms of latency side over 0.65 ms of
 * channels; far: its 13 MB of channels, 2.6 ms). Object 0 alone on the
 * far device: 6.5 MB there, 1.3 ms of channels over 0.9 + 0.05 + 0.1 ms
 * of latency side: 1.3 ms. Taken as unbound, the runs give C = 1 ms,
 * k = 1, residuals -0.1 and 1.32 ms (2.6 - 1.28 ms of far channels): 1.15
 * + 0.61 = 1.76 ms. */
static void test_bound_by_latency_ratio(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 2.6e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e6, 2.6e6], \"stats\": ["
        "   [0, 0, 50, 50, 50, 50, 0, 50, 0, 0], [1, 0, 50, 50, 50, 50, 0, 50, 0, 0],"
        "   [0, 1, 50, 100, 50, 100, 0, 50, 0, 0], [1, 1, 50, 100, 50, 100, 0, 50, 0, 0]]}]}";
    double a, b;
    far_each("latency ratio", js, 1e6, &a, &b);
    CHECK_NEAR(a, 1.3e6, 0.005);
    CHECK_NEAR(b, 1.3e6, 0.005);
    /* `hetmem estimate --explain` gives those terms: object 0 (site 0x1)
     * alone on the far device, one class: C 0.9 ms, k 1, latency side
     * 1.05 ms, far channels 1.3 ms, which bind; residual 0. */
    hm_estimator_t *e = NULL;
    hm_placement_t *pl = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, "explain", js), 0);
    const char *devs[] = {"near", "far"};
    CHECK_EQ_INT(hm_placement_parse(&pl, "explain", "{\"default\": \"near\", \"rules\": [{\"site\": \"0x1\", \"device\": \"far\"}]}",
                                    devs, 2), 0);
    json_t *ex = e && pl ? hm__est_explain(e, pl) : NULL;
    CHECK(ex && json_array_size(ex) == 1);
    json_t *x = json_array_get(ex, 0);
    if (x) {
        CHECK_NEAR(json_real_value(json_object_get(x, "C_s")), 0.9e-3, 0.005);
        CHECK_NEAR(json_real_value(json_object_get(x, "k")), 1, 0.005);
        CHECK_NEAR(json_real_value(json_object_get(x, "latency_s")), 1.05e-3, 0.005);
        CHECK_NEAR(json_real_value(json_object_get(x, "channel_s")), 1.3e-3, 0.005);
        CHECK(!strcmp(json_string_value(json_object_get(x, "channel_device")), "far"));
        CHECK(fabs(json_real_value(json_object_get(x, "residual_s"))) < 1e-9);
        CHECK_NEAR(json_real_value(json_object_get(x, "time_s")), 1.3e-3, 0.005);
        CHECK(!strcmp(json_string_value(json_object_get(x, "binds")), "channels"));
    }
    json_decref(ex);
    /* And the traffic it gives each object (`--explain --json`, whatever
     * the placement): 50 sampled loads from memory x period 1000 x 64 B =
     * 3.2 MB, plus its half of the 6.6 MB the far run's channels had time
     * for beyond the samples: 6.5 MB read, nothing written. */
    double rd = -1, wr = -1;
    CHECK_EQ_INT(e ? hm__est_object_traffic(e, 0, &rd, &wr) : -1, 0);
    CHECK_NEAR(rd, 6.5e6, 0.005);
    CHECK(wr == 0);
    CHECK_EQ_INT(e ? hm__est_object_traffic(e, 99, &rd, &wr) : 0, -EINVAL);
    hm_placement_close(pl);
    hm_estimator_close(e);
}

/* A phase that only stores has no latency cost to fit. Here each run took
 * either its channel time or the same 10 ms (near: 10 ms, its channels 2
 * ms; far: 16 ms, all of it its channels): 10 ms is time no device
 * changes, and object 0 alone on the far device (8 ms of far channel
 * time) takes 10 ms. Carried by residuals per device, that floor was
 * spread by the objects' shares: 8 ms + half of the near run's 8 ms = 12
 * ms. When the far run is slower than both its channels and the near run
 * (stores that wait on a slower device), the residuals keep that. */
static void test_store_floor(void)
{
    char js[2048];
    const char *fmt =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 40, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": %g, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e7, %g], \"stats\": ["
        "   [0, 0, 312.5, 0, 312.5, 0, 312.5, 0, 0, 0], [1, 0, 312.5, 0, 312.5, 0, 312.5, 0, 0, 0],"
        "   [0, 1, 312.5, 0, 312.5, 0, 312.5, 0, 0, 0], [1, 1, 312.5, 0, 312.5, 0, 312.5, 0, 0, 0]]}]}";
    double a, b;
    snprintf(js, sizeof js, fmt, 1.6e7, 1.6e7);
    far_each("store floor", js, 1e7, &a, &b);
    CHECK_NEAR(a, 1e7, 0.01);
    CHECK_NEAR(b, 1e7, 0.01);
    /* The far run 20 ms, its channels 16: not a floor. */
    snprintf(js, sizeof js, fmt, 2e7, 2e7);
    far_each("store no floor", js, 1e7, &a, &b);
    CHECK(a > 1.05e7);
    /* floor_tol (2%) from either side. The far run 1.5% over its channels
     * (16.24 ms) is at the floor: the 0.24 ms its channels had beyond the
     * samples is traffic the samples missed (1.2 MB, 0.6 MB per object),
     * C = 10 ms, and object 0 alone on the far device (8.12 ms of
     * channels) takes 10 ms. At 2.5% over (16.4 ms) it is not: C = 0, the
     * residuals carry the runs' time beyond their channels (near: 10 -
     * 2.05 = 7.95 ms, far: 0), spread by the objects' samples (half each),
     * and object 0 alone on the far device takes its 8 + 0.2 ms of far
     * channels plus half of the near residual: 12.175 ms. */
    snprintf(js, sizeof js, fmt, 1.624e7, 1.624e7);
    far_each("store floor 1.5%", js, 1e7, &a, &b);
    CHECK_NEAR(a, 1e7, 0.005);
    snprintf(js, sizeof js, fmt, 1.64e7, 1.64e7);
    far_each("store floor 2.5%", js, 1e7, &a, &b);
    CHECK_NEAR(a, 1.2175e7, 0.005);
}

/* Every run bound and no line through them (the far run is slower than a
 * positive C allows): the latency cost is then taken at face value from
 * the run the latency terms come from, the near one (k = 10 / 20.1 ms),
 * as with one unbound run. Without it the phase had no latency side at
 * all: object 0, a chase (20 ms of latency cost near), alone on the far
 * device cost nothing more (9 ms, the near channels), where its loads'
 * idle latency doubles: 0.5 x (10 x 2 + 10 ms of queueing) = 15 ms. */
static void test_all_bound_face_value(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"core_ghz\": 1,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 3.4e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 268435456}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e7, 3.4e7], \"stats\": ["
        "   [0, 0, 100, 20000, 100, 20000, 0, 100, 0, 0], [1, 0, 2500, 100, 2500, 100, 0, 1, 0, 0],"
        "   [0, 1, 100, 30000, 100, 30000, 0, 100, 0, 0], [1, 1, 2500, 200, 2500, 200, 0, 1, 0, 0]]}]}";
    double a, b;
    far_each("all bound", js, 1e7, &a, &b);
    CHECK_NEAR(a, 1.5e7, 0.03);
    CHECK(b > 3e7); /* the stream on the far device: its channels */
}

/* A line through channel-bound runs far apart says nothing of the
 * latency. Object 0 is read (its loads wait 20, 180 and 2,800 ms in all),
 * object 1 only stored (64 MB read for ownership and written back): 192 MB
 * per run, 4.8 ms of near channel time in a 10 ms run, the mid and far
 * runs bound by their channels (40 and 192 ms). The least-squares line
 * through the three runs has C = 18.5 ms, above the near run's 10 ms, and
 * the near run's residual (-9.7 ms) then came off the mix with object 1
 * on the mid device, bound by its channels there (128 MB at 4.8 GB/s:
 * 26.67 ms): 17 ms. With C at its bound, 10 ms, least squares gives
 * k = sum L (T - 10) / sum L^2 = 515,000 / 7,872,800 = 0.0654, the near
 * run's latency side 11.31 ms, its residual -1.31 ms: 25.36 ms. */
static void test_fit_below_fastest(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e7, \"period\": 1000, \"bandwidth_gbs\": 40, \"read_latency_ns\": 100},"
        "               {\"name\": \"mid\", \"runtime_ns\": 4e7, \"period\": 1000, \"bandwidth_gbs\": 4.8, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 1.92e8, \"period\": 1000, \"bandwidth_gbs\": 1, \"read_latency_ns\": 250}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e7, 4e7, 1.92e8], \"stats\": ["
        "   [0, 0, 1000, 20000, 1000, 20000, 0, 1000, 0, 0], [1, 0, 1000, 0, 1000, 0, 1000, 0, 0, 0],"
        "   [0, 1, 1000, 180000, 1000, 180000, 0, 1000, 0, 0], [1, 1, 1000, 0, 1000, 0, 1000, 0, 0, 0],"
        "   [0, 2, 1000, 2800000, 1000, 2800000, 0, 1000, 0, 0], [1, 2, 1000, 0, 1000, 0, 1000, 0, 0, 0]]}]}";
    hm_estimator_t *e;
    hm_est_state_t *st = open_default(&e, "fit below fastest", js, 1e7);
    double t = -1;
    if (st) {
        CHECK_EQ_INT(hm_est_state_move(st, -1, 1, 1, 100, &t), 0);
        CHECK_NEAR(t, 25.36e6, 0.005);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
}

/* Two regimes in one class: each instance of the phase first streams
 * object 0 (prefetched: a tenth of its misses reach memory; the channels
 * bound both runs: 64 MB per window, 3.2 ms at 20 GB/s, 12.8 ms at 5 GB/s)
 * and then chases object 1 (every miss reaches memory; 100,000 loads per
 * window, latency-bound: 2.5 ms near, 10 ms far). Object 0 alone on the far
 * device: the streaming windows take their far channel time, the chasing
 * ones their near time: 2 x 12.8 + 2 x 2.5 = 30.6 ms. Timed as one class,
 * the instance's summed channel time (25.6 ms) hid the chasing half. */
/* Many small objects, sampled at random, with the objects changing in
 * between (some freed and allocated again from another site, one named):
 * every sample counts for the object that held its address then, whether
 * the lookup went through the allocation table or through the sorted copy
 * of it that summary building makes once the table has stayed unchanged for
 * a while (more than SNAP_AFTER = 64 + 512 / 8 lookups here per stretch). The
 * expected counts come from the addresses written. */
#define SM_BASE 0x300000000ull
#define SM_N 512
#define SM_SIZE 192 /* 256 bytes apart: 64 untracked bytes after each */
static uint32_t sm_hash(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Classes: 0 site 0x51, 1 site 0x52, 2 site 0x53, 3 site 0x52 named "hot", 4 untracked. */
static void write_small_run(const char *path, const char *dev, uint64_t end_time, double want[5])
{
    const char *argv[] = {"./small.sim", NULL};
    hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", 1000, dev, NULL, argv, NULL, 0};
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, &m), 0);
    int cls[SM_N];
    uint64_t t = 100;
    for (int i = 0; i < SM_N; i++) {
        cls[i] = i & 1;
        hm_alloc_t a = {t++, SM_BASE + (uint64_t)i * 256, SM_SIZE, cls[i] ? 0x52 : 0x51, 0};
        CHECK_EQ_INT(hm_trace_write_alloc(w, &a), 0);
    }
    memset(want, 0, 5 * sizeof *want);
    for (uint32_t j = 0; j < 9000; j++) {
        if (j == 3000) {
            /* Every eighth object freed and allocated again from site 0x53. */
            for (int i = 0; i < SM_N; i += 8) {
                CHECK_EQ_INT(hm_trace_write_free(w, t++, SM_BASE + (uint64_t)i * 256, 0), 0);
                hm_alloc_t a = {t++, SM_BASE + (uint64_t)i * 256, SM_SIZE, 0x53, 0};
                CHECK_EQ_INT(hm_trace_write_alloc(w, &a), 0);
                cls[i] = 2;
            }
        }
        if (j == 6000) {
            CHECK_EQ_INT(hm_trace_write_name(w, t++, SM_BASE + 256, "hot"), 0);
            cls[1] = 3;
        }
        uint32_t i = j >= 6000 && j % 10 == 0 ? 1 : sm_hash(j) % SM_N, off = sm_hash(j + 77777) % 256;
        hm_sample_t s = {t, SM_BASE + (uint64_t)i * 256 + off, 0x1234, 0, 100, (uint16_t)HM_DSRC_MAKE_MEM(0),
                         HM_ACCESS_LOAD};
        t += 1000;
        CHECK_EQ_INT(hm_trace_write_sample(w, &s), 0);
        want[off < SM_SIZE ? cls[i] : 4] += 1;
    }
    hm_trace_end_t end = {end_time, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
}

static void test_many_small_objects(void)
{
    char *p1 = path_of("small-slow.hmt"), *p2 = path_of("small-fast.hmt");
    double want[5], want2[5];
    write_small_run(p1, "slow", 20000000, want);
    write_small_run(p2, "fast", 10000000, want2);
    const char *paths[] = {p1, p2};
    hm_estimator_t *e = NULL;
    int rc = hm_estimator_open(&e, paths, 2, NULL);
    if (rc < 0)
        fprintf(stderr, "open small: %s: %s\n", hm_strerror(rc), hm_errdetail());
    CHECK_EQ_INT(rc, 0);
    if (e) {
        static const uint64_t site[4] = {0x51, 0x52, 0x53, 0x52};
        static const char *const name[4] = {NULL, NULL, NULL, "hot"};
        for (int c = 0; c < 5; c++) {
            int o = c < 4 ? hm_estimator_find_object(e, site[c], name[c]) : hm_estimator_nobjects(e) - 1;
            CHECK(o >= 0);
            hm_est_object_t ob = {0};
            if (o >= 0)
                CHECK_EQ_INT(hm_estimator_object(e, o, &ob), 0);
            if (c < 4)
                CHECK(ob.site == site[c] && (name[c] ? ob.name && !strcmp(ob.name, name[c]) : !ob.name));
            CHECK_EQ_U64((uint64_t)ob.samples, (uint64_t)want[c]);
        }
        /* Each class holds samples, so a miscount shows. */
        for (int c = 0; c < 5; c++)
            CHECK(want[c] >= 100);
    }
    hm_estimator_close(e);
    free(p1);
    free(p2);
}

/* A block in the middle of a run that does not decode: summary building
 * (the runs read on worker threads when there are CPUs for them) fails with
 * HM_ECORRUPT and a detail naming the file and the block, frees what it
 * built (ASan's leak check) and does not hang (the test's timeout), with the
 * payload's checksum wrong, and with the checksum made right again over a
 * broken zstd frame, which only the decompression can catch. */
static void corrupt_block(const char *path, uint32_t blk, int fix_checksum)
{
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    CHECK(hm_trace_nblocks(t) > blk);
    hm_block_info_t b;
    CHECK_EQ_INT(hm_trace_block_info(t, blk, &b), 0);
    hm_trace_close(t);
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f)
        return;
    size_t len = 48 + b.compressed_bytes;
    uint8_t *buf = malloc(len);
    CHECK(buf && fseek(f, (long)b.offset, SEEK_SET) == 0 && fread(buf, 1, len, f) == len);
    /* Past the frame header: bytes of the compressed blocks. */
    for (size_t i = 48 + 16; i < len; i += 7)
        buf[i] ^= 0x5a;
    if (fix_checksum) {
        uint64_t sum = hm__hash64(buf + 48, b.compressed_bytes, hm__hash64(buf, 40, 0));
        memcpy(buf + 40, &sum, 8);
    }
    CHECK(fseek(f, (long)b.offset, SEEK_SET) == 0 && fwrite(buf, 1, len, f) == len);
    fclose(f);
    free(buf);
}

static void test_corrupt_block_mid_run(void)
{
    run_spec_t slow = SLOW, fast = FAST;
    slow.n1 = slow.n2 = fast.n1 = fast.n2 = 100000; /* 3 blocks a run, threads worth starting */
    for (int fix = 0; fix < 2; fix++) {
        char *p1 = path_of("corrupt-slow.hmt"), *p2 = path_of("corrupt-fast.hmt");
        write_run(p1, &slow);
        write_run(p2, &fast);
        corrupt_block(p2, 1, fix);
        const char *paths[] = {p1, p2};
        hm_estimator_t *e = NULL;
        int rc = hm_estimator_open(&e, paths, 2, NULL);
        CHECK_EQ_INT(rc, HM_ECORRUPT);
        CHECK(e == NULL);
        const char *d = hm_errdetail();
        CHECK(strstr(d, p2) != NULL);
        CHECK(strstr(d, "block 1 at offset") != NULL);
        CHECK(strstr(d, fix ? "zstd" : "checksum mismatch") != NULL);
        CHECK(strchr(d, '\n') == NULL);
        if (!strstr(d, p2) || !strstr(d, fix ? "zstd" : "checksum"))
            fprintf(stderr, "corrupt block (checksum %s): %s\n", fix ? "fixed" : "wrong", d);
        hm_estimator_close(e);
        free(p1);
        free(p2);
    }
}

static void test_regimes(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 11.4e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 45.6e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 400}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 134217728}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": ["
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [3.2e6, 12.8e6], \"stats\": ["
        "   [0, 0, 1000, 2000, 1000, 2000, 0, 100, 100], [0, 1, 1000, 8000, 1000, 8000, 0, 100, 100]]},"
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [3.2e6, 12.8e6], \"stats\": ["
        "   [0, 0, 1000, 2000, 1000, 2000, 0, 100, 100], [0, 1, 1000, 8000, 1000, 8000, 0, 100, 100]]},"
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [2.5e6, 1e7], \"stats\": ["
        "   [1, 0, 100, 10000, 100, 10000, 0, 100, 0], [1, 1, 100, 40000, 100, 40000, 0, 100, 0]]},"
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [2.5e6, 1e7], \"stats\": ["
        "   [1, 0, 100, 10000, 100, 10000, 0, 100, 0], [1, 1, 100, 40000, 100, 40000, 0, 100, 0]]}]}";
    double a, b;
    far_each("regimes", js, 11.4e6, &a, &b);
    CHECK_NEAR(a, 30.6e6, 0.03);
    CHECK_NEAR(b, 2 * 3.2e6 + 2 * 1e7, 0.03); /* object 1 alone far: its latency 4x */
}

/* Two loops in one instance that stream different arrays: windows 0-1
 * stream objects 0 and 1, windows 2-3 objects 0 and 2 (32 MB each per
 * window, a tenth of the misses reaching memory in every window: the same
 * regime by that share alone). The channels bound every run (64 MB per
 * window: 3.2 ms near, 12.8 ms far). Object 1 alone on the far device: its
 * windows wait for the far channel (6.4 ms each), the others for the near
 * one (3.2 ms each): 19.2 ms. Timed as one class, object 1's far traffic
 * (12.8 ms) overlapped the whole instance's near traffic (9.6 ms). */
static void test_regime_by_mix(void)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 12.8e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 51.2e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 128000000}, {\"site\": \"0x2\", \"size\": 64000000},"
        "               {\"site\": \"0x3\", \"size\": 64000000}],"
        " \"windows\": ["
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [3.2e6, 12.8e6], \"stats\": ["
        "   [0, 0, 500, 5000, 500, 5000, 0, 50, 50], [1, 0, 500, 5000, 500, 5000, 0, 50, 50],"
        "   [0, 1, 500, 10000, 500, 10000, 0, 50, 50], [1, 1, 500, 10000, 500, 10000, 0, 50, 50]]},"
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [3.2e6, 12.8e6], \"stats\": ["
        "   [0, 0, 500, 5000, 500, 5000, 0, 50, 50], [1, 0, 500, 5000, 500, 5000, 0, 50, 50],"
        "   [0, 1, 500, 10000, 500, 10000, 0, 50, 50], [1, 1, 500, 10000, 500, 10000, 0, 50, 50]]},"
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [3.2e6, 12.8e6], \"stats\": ["
        "   [0, 0, 500, 5000, 500, 5000, 0, 50, 50], [2, 0, 500, 5000, 500, 5000, 0, 50, 50],"
        "   [0, 1, 500, 10000, 500, 10000, 0, 50, 50], [2, 1, 500, 10000, 500, 10000, 0, 50, 50]]},"
        "  {\"phase\": 0, \"region\": 0, \"instructions\": 1e6, \"t_ns\": [3.2e6, 12.8e6], \"stats\": ["
        "   [0, 0, 500, 5000, 500, 5000, 0, 50, 50], [2, 0, 500, 5000, 500, 5000, 0, 50, 50],"
        "   [0, 1, 500, 10000, 500, 10000, 0, 50, 50], [2, 1, 500, 10000, 500, 10000, 0, 50, 50]]}]}";
    hm_estimator_t *e = NULL;
    hm_est_state_t *st = open_default(&e, "regime by mix", js, 12.8e6);
    double a = -1, b = -1;
    if (st) {
        hm_est_state_move(st, -1, 1, 1, 100, &a);
        hm_est_state_move(st, -1, 1, 0, 100, NULL);
        hm_est_state_move(st, -1, 2, 1, 100, &b);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    CHECK_NEAR(a, 19.2e6, 0.03);
    CHECK_NEAR(b, 19.2e6, 0.03);
}

/* The same runs given in either order give the same estimates. Every run
 * is bound here (the near one near its share, the far one slower than its
 * latency explains), and which run's latencies the others take was the
 * first one given: with the far run first, its unsaturated latencies set
 * the near device's terms; with the near run first, the near run (its
 * channels all but busy once the traffic the samples miss is counted) left
 * them out. Object 1 (latency-bound loads) alone on the far device then
 * estimated differently by the order of the traces. */
static void test_device_order(void)
{
    static const char *fmt =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": %d,"
        " \"devices\": [%s, %s],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 67108864}, {\"site\": \"0x2\", \"size\": 67108864}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [%s, %s], \"stats\": ["
        "   [0, 0, 1000, %s, 1000, %s, 0, 1000, 0], [1, 0, 100, %s, 100, %s, 0, 100, 0],"
        "   [0, 1, 1000, %s, 1000, %s, 0, 1000, 0], [1, 1, 100, %s, 100, %s, 0, 100, 0]]}]}";
    const char *near = "{\"name\": \"near\", \"runtime_ns\": 4e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100}";
    const char *far = "{\"name\": \"far\", \"runtime_ns\": 3e7, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}";
    /* latency weights: object 0 streams (100 ns near, 1 us far), object 1 waits 300 ns near, 2 us far */
    char a[2048], b[2048];
    snprintf(a, sizeof a, fmt, 0, near, far, "4e6", "3e7", "100000", "100000", "30000", "30000", "1000000", "1000000",
             "200000", "200000");
    snprintf(b, sizeof b, fmt, 1, far, near, "3e7", "4e6", "1000000", "1000000", "200000", "200000", "100000", "100000",
             "30000", "30000");
    double t[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
    const char *js[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        hm_estimator_t *e = NULL;
        hm_est_state_t *st = open_default(&e, i ? "order far-near" : "order near-far", js[i], 4e6);
        int fardev = i ? 0 : 1, neardev = i ? 1 : 0;
        if (st) {
            hm_est_state_move(st, -1, 0, fardev, 100, &t[i][0]);
            hm_est_state_move(st, -1, 0, neardev, 100, NULL);
            hm_est_state_move(st, -1, 1, fardev, 100, &t[i][1]);
            hm_est_state_move(st, -1, 0, fardev, 100, &t[i][2]);
            hm_est_state_close(st);
        }
        hm_estimator_close(e);
    }
    for (int k = 0; k < 3; k++)
        CHECK_NEAR(t[0][k], t[1][k], 1e-9);
}


/* A cache level's usual hit latency is the hit_base (5th) percentile of a
 * run's load weights there, and a hit that took more than hit_wait (2)
 * times that waited for a line on its way from memory: it counts as a
 * waiting hit, and its weight beyond the usual latency as memory-bound.
 * Each run loads object A 50 times: 10 loads from memory (weight 200) and
 * 40 L2 hits, weights 10, 12, 14 and 37 x 30. The 5th percentile of the
 * 40 is the second weight, 12 (2.5%: 10, 7.5%: 14); twice it is 24, so the
 * 37 hits of 30 waited (at 1x 12 the hit of 14 too; at 3x 36 none did).
 * Per run, A's cells then hold 37 waiting hits and a memory-bound weight
 * of 10 x 200 + 37 x (30 - 12) = 2666 (2740 with a base of 10, 2592 with
 * 14; 2668 at 1x, 2000 at 3x or with no waits). */
static void test_hit_figures(void)
{
    const char *devs[] = {"near", "far"};
    char *paths[2];
    for (int d = 0; d < 2; d++) {
        char nm[64];
        snprintf(nm, sizeof nm, "hits-%s.hmt", devs[d]);
        paths[d] = path_of(nm);
        const char *argv[] = {"./app.sim", NULL};
        hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", 1000, devs[d], NULL, argv, NULL, 0};
        hm_trace_writer_t *w;
        CHECK_EQ_INT(hm_trace_writer_open(&w, paths[d], &m), 0);
        hm_trace_write_site(w, 0xa, "app.sim+0x10 alloc_a");
        hm_alloc_t a = {10, A_ADDR, OBJ_SIZE, 0xa, 0};
        hm_trace_write_alloc(w, &a);
        uint64_t t = 1000000;
        for (int i = 0; i < 50; i++) {
            int mem = i % 5 == 4, h = i - i / 5; /* the i-th sample is hit h when not from memory */
            uint32_t wt = mem ? 200 : h == 0 ? 10 : h == 1 ? 12 : h == 2 ? 14 : 30;
            hm_sample_t s = {t + (uint64_t)i * 20000, A_ADDR + (uint64_t)i * 4096, 0x1234, 0, wt,
                             (uint16_t)(mem ? HM_DSRC_MAKE_MEM(0) : HM_DSRC_L2), HM_ACCESS_LOAD};
            hm_trace_write_sample(w, &s);
        }
        hm_trace_end_t end = {t + 2000000, 0};
        CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    }
    hm_estimator_t *e = NULL;
    int rc = hm_estimator_open(&e, (const char *const *)paths, 2, NULL);
    CHECK_EQ_INT(rc, 0);
    if (e) {
        int o = -1;
        for (int k = 0; k < e->nobj; k++)
            if (e->obj[k].site == 0xa)
                o = k;
        CHECK(o >= 0);
        for (int d = 0; d < 2 && o >= 0; d++) {
            double n = 0, hw = 0, x = 0;
            for (int w = 0; w < e->nwin; w++) {
                const hm__est_cell_t *c = hm__est_cell(e, w, o, d);
                n += c->n, hw += c->hw, x += c->x;
            }
            CHECK_NEAR(n, 50, 1e-9);
            CHECK_NEAR(hw, 37, 1e-9);
            CHECK_NEAR(x, 2666, 1e-9);
        }
    }
    hm_estimator_close(e);
    free(paths[0]);
    free(paths[1]);
}

/* Hand-written summaries: a time no run can have is refused (a window of
 * 2e67 ns made estimates negative: sums that large lose the precision the
 * models need), and region ids may be any non-negative integers: only their
 * order counts (ids a hundred million apart once made the classification
 * allocate for every id up to the largest). */
static void test_summary_figures(void)
{
    const char *fmt =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"phases\": [\"a\", \"b\"],"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 3e6, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 6e6, \"bandwidth_gbs\": 5, \"read_latency_ns\": 200}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}],"
        " \"windows\": [{\"phase\": 0, \"region\": %s, \"t_ns\": [1e6, %s], \"stats\": [[0, 0, 100, 9000, 50], [0, 1, 100, 19000, 50]]},"
        "               {\"phase\": 1, \"region\": %s, \"t_ns\": [2e6, 4e6], \"stats\": [[0, 0, 100, 9000, 50], [0, 1, 100, 19000, 50]]}]}";
    char js[2048];
    hm_estimator_t *e = NULL;
    snprintf(js, sizeof js, fmt, "0", "2e67", "1");
    CHECK(hm_estimator_parse_summary(&e, "huge", js) < 0);
    CHECK(strstr(hm_errdetail(), "windows[0].t_ns[1]") != NULL);
    double dense = -1, sparse = -2;
    snprintf(js, sizeof js, fmt, "0", "2e6", "1");
    for (int k = 0; k < 2; k++) {
        if (k)
            snprintf(js, sizeof js, fmt, "7", "2e6", "222222220");
        hm_est_state_t *st = open_default(&e, "regions", js, 3e6);
        if (st) {
            hm_est_state_move(st, -1, 0, 1, 100, k ? &sparse : &dense);
            hm_est_state_close(st);
        }
        hm_estimator_close(e);
        e = NULL;
    }
    CHECK(dense > 3e6);
    CHECK_NEAR(sparse, dense, 1e-12);
}

/* ------------------------------------------------ compiled placements */

/* A synthetic summary: 3 devices, 3 phases, CP_OBJ objects (some named,
 * two named objects sharing one site), windows with random statistics. */
#define CP_OBJ 10
#define CP_WIN 60
static uint64_t cp_rng = 7;
static unsigned cp_rand(unsigned n)
{
    cp_rng = cp_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(cp_rng >> 33) % n;
}

static const char *const cp_phase[] = {"(no phase)", "p1", "p2", "p3"};
static const char *const cp_dev[] = {"d0", "d1", "d2"};

static uint64_t cp_site(int o) { return o == 3 ? 0x102 : 0x100 + (uint64_t)o; } /* 2 and 3 share a site */
static const char *cp_name(int o)
{
    static const char *const names[CP_OBJ] = {"alpha", NULL, "gamma", "delta", NULL, "zeta", NULL, "theta", "iota", NULL};
    return names[o];
}
static uint64_t cp_size(int o) { return (uint64_t)(1 + o % 4) << 20; }

static char *cp_summary(void)
{
    size_t cap = 1 << 18, len = 0;
    char *s = calloc(cap, 1);
#define CP_PUT(...) (len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__))
    CP_PUT("{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [");
    for (int d = 0; d < 3; d++)
        CP_PUT("%s{\"name\": \"%s\", \"runtime_ns\": %d, \"period\": 1000, \"bandwidth_gbs\": %d, \"read_latency_ns\": %d}",
               d ? ", " : "", cp_dev[d], CP_WIN * 1000 * (2 + d), 8 / (1 + d), 100 + 80 * d);
    CP_PUT("], \"phases\": [\"%s\", \"%s\", \"%s\", \"%s\"], \"objects\": [", cp_phase[0], cp_phase[1], cp_phase[2],
           cp_phase[3]);
    for (int o = 0; o < CP_OBJ; o++) {
        CP_PUT("%s{\"site\": \"0x%llx\", \"size\": %llu, \"allocations\": 1", o ? ", " : "",
               (unsigned long long)cp_site(o), (unsigned long long)cp_size(o));
        if (cp_name(o))
            CP_PUT(", \"name\": \"%s\"", cp_name(o));
        CP_PUT(", \"pages\": [");
        for (int b = 0; b < 100; b++)
            CP_PUT("%s%u", b ? ", " : "", cp_rand(20));
        CP_PUT("]}");
    }
    CP_PUT("], \"windows\": [");
    for (int w = 0; w < CP_WIN; w++) {
        /* Phases come and go, so that placements per phase migrate. */
        CP_PUT("%s{\"phase\": %d, \"t_ns\": [%d, %d, %d], \"stats\": [", w ? ", " : "", (w / 7) % 4, 2000, 3000, 4000);
        for (int o = 0; o <= CP_OBJ; o++)
            for (int d = 0; d < 3; d++) {
                unsigned n = 1 + cp_rand(40), m = cp_rand(n + 1);
                CP_PUT("%s[%d, %d, %u, %u, %u]", o || d ? ", " : "", o, d, n, n * (20 + 60 * d + cp_rand(200)), m);
            }
        CP_PUT("]}");
    }
    CP_PUT("]}");
#undef CP_PUT
    return s;
}

/* A rule as the test draws it; pct 100 is a whole object. */
typedef struct {
    int site, name, min_size; /* the object whose selector it copies, -1: none */
    int pct, dev;
} cp_rule_t;

typedef struct {
    int def;
    int nr[4];            /* rules per list: [0] the top level, [p] phase p's */
    int has[4];           /* phase p has a rule list */
    cp_rule_t r[4][5];
} cp_place_t;

static void cp_draw(cp_place_t *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->def = cp_rand(4) ? 0 : (int)cp_rand(3);
    int phased = cp_rand(2);
    for (int l = 0; l < 4; l++) {
        pl->has[l] = l == 0 || (phased && cp_rand(2));
        pl->nr[l] = pl->has[l] ? (int)cp_rand(l ? 4 : 6) : 0;
        for (int i = 0; i < pl->nr[l]; i++) {
            cp_rule_t *r = &pl->r[l][i];
            int o = (int)cp_rand(CP_OBJ + 1); /* CP_OBJ: a site no object has */
            r->site = r->name = r->min_size = -1;
            switch (cp_rand(5)) {
            case 0: r->site = o; break;
            case 1: r->name = o < CP_OBJ && cp_name(o) ? o : -1; r->site = r->name < 0 ? o : -1; break;
            case 2: r->min_size = o % CP_OBJ; break;
            case 3: break; /* catch-all */
            default: r->site = o, r->name = o < CP_OBJ && cp_name(o) && cp_rand(2) ? o : -1; break;
            }
            r->pct = cp_rand(3) ? 100 : (int)cp_rand(101);
            r->dev = (int)cp_rand(3);
        }
    }
}

static char *cp_json(const cp_place_t *pl)
{
    size_t cap = 8192, len = 0;
    char *s = calloc(cap, 1);
#define CP_PUT(...) (len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__))
    CP_PUT("{\"default\": \"%s\", \"rules\": [", cp_dev[pl->def]);
    for (int l = 0; l < 4; l++) {
        if (l == 1)
            CP_PUT("], \"phases\": {");
        if (l > 0 && !pl->has[l])
            continue;
        if (l > 0)
            CP_PUT("%s\"%s\": {\"rules\": [", len && s[len - 1] == '{' ? "" : ", ", cp_phase[l]);
        for (int i = 0; i < pl->nr[l]; i++) {
            const cp_rule_t *r = &pl->r[l][i];
            CP_PUT("%s{", i ? ", " : "");
            if (r->site >= 0)
                CP_PUT("\"site\": \"0x%llx\", ", (unsigned long long)(r->site < CP_OBJ ? cp_site(r->site) : 0x999));
            if (r->name >= 0)
                CP_PUT("\"name\": \"%s\", ", cp_name(r->name));
            if (r->min_size >= 0)
                CP_PUT("\"min_size\": %llu, ", (unsigned long long)cp_size(r->min_size));
            if (r->pct < 100)
                CP_PUT("\"pages_percent\": %d, ", r->pct);
            CP_PUT("\"device\": \"%s\"}", cp_dev[r->dev]);
        }
        if (l > 0)
            CP_PUT("]}");
    }
    CP_PUT("}}");
#undef CP_PUT
    return s;
}

/* First matching rule of one list, or NULL; objects are matched by name
 * when named, and a site rule also matches a named object of that site. */
static const cp_rule_t *cp_match(const cp_place_t *pl, int l, int o)
{
    for (int i = 0; i < pl->nr[l]; i++) {
        const cp_rule_t *r = &pl->r[l][i];
        if (r->site >= 0 && (r->site >= CP_OBJ || cp_site(r->site) != cp_site(o)))
            continue;
        if (r->name >= 0 && (!cp_name(o) || strcmp(cp_name(r->name), cp_name(o))))
            continue;
        if (r->min_size >= 0 && cp_size(o) < cp_size(r->min_size))
            continue;
        return r;
    }
    return NULL;
}

static int cp_same(const hm_estimate_t *a, const hm_estimate_t *b)
{
    return a->runtime_ns == b->runtime_ns && a->lo_ns == b->lo_ns && a->hi_ns == b->hi_ns &&
           a->migration_ns == b->migration_ns;
}

typedef struct {
    hm_estimator_t *e;
    hm_placement_t **p;
    const hm_estimate_t *want;
    int n, bad;
} cp_thread_t;

static void *cp_thread(void *arg)
{
    cp_thread_t *t = arg;
    uint64_t r = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < 400; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((r >> 33) % (uint64_t)t->n);
        hm_estimate_t got;
        if (hm_estimator_estimate(t->e, t->p[k], HM_EST_DEFAULT, &got, NULL) < 0 || !cp_same(&got, &t->want[k]))
            t->bad++;
    }
    return NULL;
}

/* A placement file is matched to the objects once per estimator and kept:
 * estimates of it again, of other placements in between (more than are
 * kept), of new placements whose handles may reuse a freed one's address,
 * and on several threads at once, all equal its first estimate exactly;
 * and every estimate equals that of a state given the assignment that the
 * rules mean (matched here independently) through moves. */
static void test_compiled_placements(void)
{
    char *js = cp_summary();
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, "cp", js), 0);
    free(js);
    if (!e)
        return;
    CHECK_EQ_INT(hm_estimator_nobjects(e), CP_OBJ + 1);
    enum { POOL = 12 };
    hm_placement_t *pool[POOL] = {0};
    hm_estimate_t want[POOL][HM_EST_NMODELS];
    int checked = 0, against_state = 0;
    for (int iter = 0; iter < 300; iter++) {
        int k = (int)cp_rand(POOL);
        cp_place_t cp;
        cp_draw(&cp);
        char *pj = cp_json(&cp);
        hm_placement_close(pool[k]); /* its address is free for the next handle */
        pool[k] = NULL;
        int rc = hm_placement_parse(&pool[k], "cp.json", pj, cp_dev, 3);
        CHECK_EQ_INT(rc, 0);
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", pj, hm_errdetail());
            free(pj);
            continue;
        }
        free(pj);
        int phased = hm_placement_has_phases(pool[k]);
        for (int m = 0; m < HM_EST_NMODELS; m++) {
            hm_estimate_t again;
            CHECK_EQ_INT(hm_estimator_estimate(e, pool[k], (hm_est_model_t)m, &want[k][m], NULL), 0);
            CHECK_EQ_INT(hm_estimator_estimate(e, pool[k], (hm_est_model_t)m, &again, NULL), 0);
            CHECK(cp_same(&again, &want[k][m]));
            if (cp.def != 0)
                continue; /* a state's default device is the summary's */
            hm_est_state_t *s;
            CHECK_EQ_INT(hm_est_state_open(&s, e, (hm_est_model_t)m, phased), 0);
            for (int p = 0; p < (phased ? 4 : 1); p++)
                for (int o = 0; o < CP_OBJ; o++) {
                    /* The phase's list first, then the top-level one. */
                    const cp_rule_t *r = phased && p > 0 && cp.has[p] ? cp_match(&cp, p, o) : NULL;
                    if (!r)
                        r = cp_match(&cp, 0, o);
                    if (r)
                        CHECK_EQ_INT(hm_est_state_move(s, phased ? p : -1, o, r->dev, r->pct, NULL), 0);
                }
            hm_estimate_t st;
            hm_est_state_estimate(s, &st);
            CHECK_NEAR(want[k][m].runtime_ns, st.runtime_ns, 1e-6);
            /* Incremental sums of migration costs keep rounding residue. */
            CHECK(fabs(want[k][m].migration_ns - st.migration_ns) <= 1e-6 * st.migration_ns + 1e-3);
            hm_est_state_close(s);
            against_state++;
        }
        /* Another placement of the pool, kept or matched again. */
        int j = (int)cp_rand(POOL);
        if (pool[j]) {
            hm_estimate_t got;
            CHECK_EQ_INT(hm_estimator_estimate(e, pool[j], HM_EST_DEFAULT, &got, NULL), 0);
            CHECK(cp_same(&got, &want[j][HM_EST_DEFAULT]));
            checked++;
        }
    }
    CHECK(checked > 100);
    CHECK(against_state > 200);
    /* Several threads on one estimator. */
    int n = 0;
    hm_placement_t *live[POOL];
    hm_estimate_t lw[POOL];
    for (int k = 0; k < POOL; k++)
        if (pool[k]) {
            live[n] = pool[k];
            lw[n++] = want[k][HM_EST_DEFAULT];
        }
    cp_thread_t th[4];
    pthread_t tid[4];
    for (int i = 0; i < 4; i++) {
        th[i] = (cp_thread_t){e, live, lw, n, 0};
        CHECK_EQ_INT(pthread_create(&tid[i], NULL, cp_thread, &th[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(tid[i], NULL);
        CHECK_EQ_INT(th[i].bad, 0);
    }
    for (int k = 0; k < POOL; k++)
        hm_placement_close(pool[k]);
    /* A rule that matches nothing is still reported after kept estimates. */
    hm_placement_t *p = NULL;
    CHECK_EQ_INT(hm_placement_parse(&p, "cp.json", "{\"default\": \"d0\", \"rules\": [{\"name\": \"alpha\", \"device\": \"d1\"},"
                                                  " {\"name\": \"nobody\", \"device\": \"d2\"}]}", cp_dev, 3), 0);
    if (p) {
        hm_estimate_t r;
        for (int i = 0; i < 3; i++)
            CHECK_EQ_INT(hm_estimator_estimate(e, p, HM_EST_DEFAULT, &r, NULL), 0);
        char *u = hm_placement_unmatched(p);
        CHECK(u && strstr(u, "nobody") && !strstr(u, "alpha"));
        free(u);
        hm_placement_close(p);
    }
    hm_estimator_close(e);
}

/* Samples are attributed to the object live at their address when they
 * were taken, whatever recent lookups remembered: more objects than the
 * estimator keeps at hand, packed in shared pages, with untracked bytes
 * right before, between and after them, a zero-size allocation, and
 * objects freed and reallocated (at other sizes, by another site) while
 * samples go on, across blocks. The counts are checked against a
 * brute-force attribution. The runs are long enough to be read on two
 * threads. */
#define AT_OBJ 12
#define AT_BASE 0x40000000ull
static void test_attribution(void)
{
    /* Object k at AT_BASE + k * 1000 + 8 (sizes 900 or 0): neighbours share
     * pages and leave gaps of untracked bytes between them. */
    uint64_t addr[AT_OBJ], size[AT_OBJ], site[AT_OBJ];
    int live[AT_OBJ];
    double want[2 * AT_OBJ + 1] = {0}; /* per (object generation), then untracked */
    uint64_t rng = 12345;
    char *paths[2];
    for (int run = 0; run < 2; run++) {
        paths[run] = path_of(run ? "attr-fast.hmt" : "attr-slow.hmt");
        const char *argv[] = {"./app.sim", NULL};
        hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", 1000, run ? "fast" : "slow", NULL, argv, NULL, 0};
        hm_trace_writer_t *w;
        CHECK_EQ_INT(hm_trace_writer_open(&w, paths[run], &m), 0);
        CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 3000), 0);
        rng = 12345;
        uint64_t t = 100;
        for (int k = 0; k < AT_OBJ; k++) {
            addr[k] = AT_BASE + (uint64_t)k * 1000 + 8;
            size[k] = k == 5 ? 0 : 900;
            site[k] = 0x5000 + (uint64_t)k;
            live[k] = 0;
            hm_alloc_t a = {t++, addr[k], size[k], site[k], 0};
            CHECK_EQ_INT(hm_trace_write_alloc(w, &a), 0);
            live[k] = 1;
        }
        for (int i = 0; i < 40000; i++, t += 10) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned x = (unsigned)(rng >> 33);
            int k = (int)(x % AT_OBJ);
            if (i % 2500 == 1249) {
                /* Object k is freed; half the time it comes back larger, by
                 * another site (a new object), covering part of the gap. */
                CHECK_EQ_INT(hm_trace_write_free(w, t++, addr[k], 0), 0);
                live[k] = 0;
                if (x & 1) {
                    size[k] = 950;
                    site[k] = 0x6000 + (uint64_t)k;
                    hm_alloc_t a = {t++, addr[k], size[k], site[k], 0};
                    CHECK_EQ_INT(hm_trace_write_alloc(w, &a), 0);
                    live[k] = 1;
                }
            }
            /* Inside the object, its first or last byte, or the bytes just
             * before and after it. */
            uint64_t off[] = {x / 64 % 900, 0, size[k] ? size[k] - 1 : 0, (uint64_t)-1, size[k] ? size[k] : 1};
            uint64_t a = addr[k] + off[x / 8 % 5];
            hm_sample_t smp = {t, a, 0x1, 0, 10, HM_DSRC_MAKE_MEM(0), HM_ACCESS_LOAD};
            CHECK_EQ_INT(hm_trace_write_sample(w, &smp), 0);
            if (run)
                continue;
            int hit = -1;
            for (int j = 0; j < AT_OBJ; j++)
                if (live[j] && (a - addr[j] < size[j] || (size[j] == 0 && a == addr[j])))
                    hit = j + (site[j] >= 0x6000 ? AT_OBJ : 0);
            want[hit < 0 ? 2 * AT_OBJ : hit] += 1;
        }
        hm_trace_end_t end = {t + (run ? 0 : 1000), 0};
        CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    }
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_open(&e, (const char *const *)paths, 2, NULL), 0);
    if (e) {
        double got_untracked = 0;
        for (int o = 0; o < hm_estimator_nobjects(e); o++) {
            hm_est_object_t x;
            CHECK_EQ_INT(hm_estimator_object(e, o, &x), 0);
            if (!x.movable) {
                got_untracked += x.samples;
                continue;
            }
            int j = x.site >= 0x6000 ? (int)(x.site - 0x6000) + AT_OBJ : (int)(x.site - 0x5000);
            CHECK(j >= 0 && j < 2 * AT_OBJ);
            if (j >= 0 && j < 2 * AT_OBJ)
                CHECK_NEAR(x.samples, want[j], 0);
        }
        CHECK_NEAR(got_untracked, want[2 * AT_OBJ], 0);
        CHECK(want[2 * AT_OBJ] > 1000); /* the gaps were sampled */
        hm_estimator_close(e);
    }
    free(paths[0]);
    free(paths[1]);
}

/* Samples are attributed to the object live at their address when they
 * were taken, through every kind of change to the live objects while
 * samples go on around them: an allocation over live ones (memory reused
 * behind the allocator's back, which ends them whole), a free, a name
 * given to a live allocation, zero-size allocations, and ranges that are
 * adjacent, share pages or span 64 KiB boundaries, in regions whose
 * addresses fall in the same slots of the lookup cache and in different
 * ones. A change may leave remembered ranges it does not touch, never one
 * it does: the counts per object are checked against a brute-force replay
 * of the same changes. */
#define AC_LIVE 48
#define AC_SITES 6
#define AC_NAMES 3
#define AC_IDS (AC_SITES * (AC_NAMES + 1))
typedef struct {
    uint64_t addr, size;
    int id; /* site * (AC_NAMES + 1) + (0 unnamed, 1 + name) */
} ac_ent_t;

static int ac_holds(const ac_ent_t *x, uint64_t a) { return x->size ? a - x->addr < x->size : a == x->addr; }

static void test_attribution_changes(void)
{
    /* Regions 0 and 4 share the cache's slots (32 MiB apart), the others do not. */
    const uint64_t region[] = {0x50000000ull, 0x52010000ull, 0x54020000ull, 0x56030000ull, 0x52000000ull};
    const uint64_t sizes[] = {0, 8, 100, 1000, 5000, 70000};
    double want[AC_IDS + 1] = {0}; /* then untracked */
    char *paths[2];
    for (int run = 0; run < 2; run++) {
        paths[run] = path_of(run ? "chg-fast.hmt" : "chg-slow.hmt");
        const char *argv[] = {"./app.sim", NULL};
        hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", 1000, run ? "fast" : "slow", NULL, argv, NULL, 0};
        hm_trace_writer_t *w;
        CHECK_EQ_INT(hm_trace_writer_open(&w, paths[run], &m), 0);
        CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 2000), 0);
        ac_ent_t live[AC_LIVE];
        int nlive = 0;
        uint64_t rng = 99, t = 100;
        for (int i = 0; i < 60000; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned x = (unsigned)(rng >> 33), op = x % 16;
            uint64_t base = region[x / 16 % 5];
            if (op == 0 && nlive < AC_LIVE) {
                /* An allocation, over whatever live ranges it overlaps. */
                uint64_t a = base + (x >> 7) % 12000, sz = sizes[(x >> 3) % 6];
                /* Now and then one over more than the cache's 512 blocks of
                 * 64 KiB (32 MiB), across the other regions. */
                if ((x >> 9) % 64 == 0)
                    sz = (uint64_t)48 << 20;
                int site = (int)((x >> 20) % AC_SITES);
                hm_alloc_t al = {t++, a, sz, 0xa000 + (uint64_t)site, 0};
                CHECK_EQ_INT(hm_trace_write_alloc(w, &al), 0);
                for (int j = 0; j < nlive;)
                    if (live[j].addr - a < (sz ? sz : 1) || a - live[j].addr < (live[j].size ? live[j].size : 1))
                        live[j] = live[--nlive];
                    else
                        j++;
                live[nlive++] = (ac_ent_t){a, sz, site * (AC_NAMES + 1)};
                continue;
            }
            if (op == 1 && nlive) {
                int j = (int)((x >> 4) % (unsigned)nlive);
                CHECK_EQ_INT(hm_trace_write_free(w, t++, live[j].addr, 0), 0);
                live[j] = live[--nlive];
                continue;
            }
            if (op == 2 && nlive) {
                /* A name, given at any address inside the allocation. */
                ac_ent_t *e = &live[(x >> 4) % (unsigned)nlive];
                int nm = (int)((x >> 12) % AC_NAMES);
                char name[8];
                snprintf(name, sizeof name, "n%d", nm);
                CHECK_EQ_INT(hm_trace_write_name(w, t++, e->addr + (e->size ? (x >> 14) % e->size : 0), name), 0);
                e->id = e->id / (AC_NAMES + 1) * (AC_NAMES + 1) + 1 + nm;
                continue;
            }
            /* A sample: in, at the edges of or just outside a live range,
             * or anywhere in a region. */
            uint64_t a = base + (x >> 7) % 80000;
            if (nlive && op < 12) {
                const ac_ent_t *e = &live[(x >> 4) % (unsigned)nlive];
                uint64_t off[] = {e->size ? (x >> 12) % e->size : 0, 0, e->size ? e->size - 1 : 0, (uint64_t)-1,
                                  e->size ? e->size : 1};
                a = e->addr + off[(x >> 20) % 5];
            }
            hm_sample_t smp = {t++, a, 0x1, 0, 10, HM_DSRC_MAKE_MEM(0), HM_ACCESS_LOAD};
            CHECK_EQ_INT(hm_trace_write_sample(w, &smp), 0);
            if (run)
                continue;
            int hit = AC_IDS;
            for (int j = 0; j < nlive; j++)
                if (ac_holds(&live[j], a))
                    hit = live[j].id;
            want[hit] += 1;
        }
        hm_trace_end_t end = {t + (run ? 0 : 1000), 0};
        CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    }
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_open(&e, (const char *const *)paths, 2, NULL), 0);
    if (e) {
        double got[AC_IDS + 1] = {0};
        int seen = 0;
        for (int o = 0; o < hm_estimator_nobjects(e); o++) {
            hm_est_object_t x;
            CHECK_EQ_INT(hm_estimator_object(e, o, &x), 0);
            int id = AC_IDS;
            if (x.movable) {
                int site = (int)(x.site - 0xa000), nm = x.name ? x.name[1] - '0' + 1 : 0;
                CHECK(site >= 0 && site < AC_SITES && nm >= 0 && nm <= AC_NAMES);
                if (site < 0 || site >= AC_SITES || nm < 0 || nm > AC_NAMES)
                    continue;
                id = site * (AC_NAMES + 1) + nm;
            }
            got[id] += x.samples;
            seen++;
        }
        for (int id = 0; id <= AC_IDS; id++)
            CHECK_NEAR(got[id], want[id], 0);
        CHECK(seen > AC_SITES); /* named objects came about */
        CHECK(want[AC_IDS] > 1000); /* and untracked stretches were sampled */
        hm_estimator_close(e);
    }
    free(paths[0]);
    free(paths[1]);
}

/* Samples that the summary keeps in long form: a time gap past 2^32 units,
 * a weight past 16 bits and objects past the first 2046 of a run; their
 * windows, objects and weights must come out as for any other sample. */
#define LS_OBJ 2100
#define LS_BASE 0x300000000ull
static void test_long_samples(void)
{
    char *paths[2];
    const uint64_t t2 = 5000000000ull; /* past 2^32 after the first sample */
    for (int run = 0; run < 2; run++) {
        paths[run] = path_of(run ? "long-fast.hmt" : "long-slow.hmt");
        const char *argv[] = {"./app.sim", NULL};
        hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", 1000, run ? "fast" : "slow", NULL, argv, NULL, 0};
        hm_trace_writer_t *w;
        CHECK_EQ_INT(hm_trace_writer_open(&w, paths[run], &m), 0);
        for (int k = 0; k < LS_OBJ; k++) {
            hm_alloc_t a = {10 + (uint64_t)k, LS_BASE + (uint64_t)k * 64, 64, 0x9000 + (uint64_t)k, 0};
            CHECK_EQ_INT(hm_trace_write_alloc(w, &a), 0);
        }
        const uint16_t mem = HM_DSRC_MAKE_MEM(0);
        hm_sample_t smp[] = {
            {5000, LS_BASE, 0x1, 0, 7, mem, HM_ACCESS_LOAD},
            {t2, LS_BASE + 8, 0x1, 0, 100000, mem, HM_ACCESS_LOAD},
            {t2 + 10, LS_BASE + (LS_OBJ - 1) * 64, 0x1, 0, 9, mem, HM_ACCESS_LOAD},
            {t2 + 20, U_ADDR, 0x1, 0, 3, mem, HM_ACCESS_LOAD},
            {t2 + 30, LS_BASE + 64, 0x1, 0, 70000, mem, HM_ACCESS_STORE},
        };
        for (size_t i = 0; i < HM_ARRAY_LEN(smp); i++)
            CHECK_EQ_INT(hm_trace_write_sample(w, &smp[i]), 0);
        hm_trace_end_t end = {t2 + 40, 0};
        CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    }
    hm_estimator_t *e = NULL;
    hm_estimator_opts_t o = {10, NULL};
    CHECK_EQ_INT(hm_estimator_open(&e, (const char *const *)paths, 2, &o), 0);
    char *p = path_of("long-summary.json");
    if (e) {
        CHECK_EQ_INT(hm_estimator_save(e, p), 0);
        hm_estimator_close(e);
        /* Per window and object (by site; 0: untracked), device 0 then 1:
         * samples and weight sums. */
        double got[10][4][2][2] = {{{{0}}}};
        json_t *js = json_load_file(p, 0, NULL);
        json_t *objs = json_object_get(js, "objects"), *wins = json_object_get(js, "windows"), *win, *row;
        CHECK_EQ_INT((int)json_array_size(wins), 10);
        size_t w, i;
        json_array_foreach(wins, w, win) {
            json_array_foreach(json_object_get(win, "stats"), i, row) {
                size_t ob = (size_t)json_integer_value(json_array_get(row, 0));
                int d = (int)json_integer_value(json_array_get(row, 1));
                const char *site = json_string_value(json_object_get(json_array_get(objs, ob), "site"));
                uint64_t sv = site ? strtoull(site, NULL, 16) : 0;
                int k = !site ? 0 : sv == 0x9000 ? 1 : sv == 0x9001 ? 2 : sv == 0x9000 + LS_OBJ - 1 ? 3 : -1;
                CHECK(k >= 0 && w < 10 && (d == 0 || d == 1));
                if (k >= 0 && w < 10 && (d == 0 || d == 1)) {
                    got[w][k][d][0] += json_number_value(json_array_get(row, 2));
                    got[w][k][d][1] += json_number_value(json_array_get(row, 3));
                }
            }
        }
        json_decref(js);
        for (int d = 0; d < 2; d++) {
            CHECK_NEAR(got[0][1][d][0], 1, 0);
            CHECK_NEAR(got[0][1][d][1], 7, 0);
            CHECK_NEAR(got[9][1][d][0], 1, 0);
            CHECK_NEAR(got[9][1][d][1], 100000, 0);
            CHECK_NEAR(got[9][2][d][0], 1, 0);
            CHECK_NEAR(got[9][2][d][1], 70000, 0);
            CHECK_NEAR(got[9][3][d][0], 1, 0);
            CHECK_NEAR(got[9][3][d][1], 9, 0);
            CHECK_NEAR(got[9][0][d][0], 1, 0);
            CHECK_NEAR(got[9][0][d][1], 3, 0);
        }
    }
    free(p);
    free(paths[0]);
    free(paths[1]);
}



/* The latency side is loaded at or above the channel time: one object,
 * each run's memory loads at 100 ns idle on a curve that triples it at
 * full use (f(u) = 1 + 2u). The near run (20 GB/s) is 32% busy: its loads
 * wait 164 ns, 1.64 x idle, so its 16.4 ms of weights are 10 ms unloaded.
 * The far run (5 GB/s, 1.3 ms) is bound: 6.5 MB on its channels, 0.1 MB
 * beyond the samples. The fit through both runs' costs (16.4 and 30 ms):
 * k = 0.3 / 13.6 = 0.02206, C = 1 - 0.02206 x 16.4 = 0.6382 ms. With 70% of
 * the pages on far, far's channels take 0.7 x 6.5 MB / 5 GB/s = 910 us,
 * near's 97.5 us; the unloaded latency side, C + k x 10 ms = 858.8 us, is
 * below that, but at t = 910 us far's channels are full and its loads wait
 * three idle latencies: t = 638.2 + 66.18 f(97.5 / t) + 154.4 f(910 / t)
 * (us), so t = 858.8 + 293.9e3 / t: 1121.0 us; the residual's 30% on near
 * (-1.93 us) gives 1120.4 us. Sought above the unloaded latency side alone,
 * the class was timed by its channels with unloaded latencies (909.4 us)
 * from 70% on and with loaded ones (1095 us) at 65%: the estimate fell by
 * 17% where the traffic to far grew. */
static double loaded_at_channels(int pct)
{
    const char *js =
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100, \"loaded_latency\": [[1, 300]]},"
        "               {\"name\": \"far\", \"runtime_ns\": 1.3e6, \"period\": 1000, \"bandwidth_gbs\": 5, \"read_latency_ns\": 100, \"loaded_latency\": [[1, 300]]}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 1048576}],"
        " \"windows\": [{\"phase\": 0, \"t_ns\": [1e6, 1.3e6], \"stats\": ["
        "   [0, 0, 100, 16400, 100, 16400, 0, 100, 0], [0, 1, 100, 30000, 100, 30000, 0, 100, 0]]}]}";
    hm_estimator_t *e;
    double r = -1;
    hm_est_state_t *st = open_default(&e, "loaded at channels", js, 1e6);
    if (st) {
        hm_est_state_move(st, -1, 0, 1, pct, &r);
        hm_est_state_close(st);
    }
    hm_estimator_close(e);
    return r;
}

static void test_loaded_at_channels(void)
{
    CHECK_NEAR(loaded_at_channels(70), 1.1204e6, 1e-3);
    /* More of the traffic on the slower device never makes it faster here
     * (from 20% on, where far's channels and latency take over). */
    for (int p = 20; p < 100; p += 5)
        CHECK(loaded_at_channels(p + 5) >= loaded_at_channels(p) * 0.999);
}

static void test_bad_input(void)
{
    char *a = path_of("bad-a.hmt"), *b = path_of("bad-b.hmt"), *c = path_of("bad-c.hmt");
    hm_estimator_t *e = NULL;
    const char *paths[] = {a, b};
    write_run(a, &SLOW);

    CHECK_EQ_INT(hm_estimator_open(&e, paths, 1, NULL), HM_EUSAGE);

    run_spec_t r = FAST;
    r.device = "slow";
    write_run(b, &r);
    CHECK_EQ_INT(hm_estimator_open(&e, paths, 2, NULL), HM_EMISMATCH);
    CHECK(strstr(hm_errdetail(), "both runs on device 'slow'") != NULL);

    r = FAST;
    r.argv0 = "./other.sim";
    write_run(b, &r);
    CHECK_EQ_INT(hm_estimator_open(&e, paths, 2, NULL), HM_EMISMATCH);
    CHECK(strstr(hm_errdetail(), "different command lines") != NULL);

    r = FAST;
    r.phases_swapped = 1;
    write_run(b, &r);
    CHECK_EQ_INT(hm_estimator_open(&e, paths, 2, NULL), HM_EMISMATCH);
    CHECK(strstr(hm_errdetail(), "phase marker") != NULL);

    r = FAST;
    r.no_end = 1;
    write_run(b, &r);
    CHECK_EQ_INT(hm_estimator_open(&e, paths, 2, NULL), HM_ETRUNC);
    CHECK(strstr(hm_errdetail(), b) != NULL);

    r = FAST;
    r.no_samples = 1;
    write_run(b, &r);
    CHECK_EQ_INT(hm_estimator_open(&e, paths, 2, NULL), HM_ETRUNC);
    CHECK(strstr(hm_errdetail(), "no samples") != NULL);

    /* Not a trace, and a trace cut in half. */
    FILE *f = fopen(b, "w");
    fputs("not a trace\n", f);
    fclose(f);
    CHECK(hm_estimator_open(&e, paths, 2, NULL) < 0);
    CHECK(strstr(hm_errdetail(), b) != NULL);
    write_run(c, &FAST);
    FILE *in = fopen(c, "rb"), *out = fopen(b, "wb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, n / 2, out);
    fclose(in);
    fclose(out);
    CHECK(hm_estimator_open(&e, paths, 2, NULL) < 0);
    const char *missing[] = {a, "/nonexistent/x.hmt"};
    CHECK_EQ_INT(hm_estimator_open(&e, missing, 2, NULL), -ENOENT);
    CHECK(e == NULL);
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hm-test-estimate.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    test_alignment();
    test_corners();
    test_linear_by_hand();
    test_monotonic();
    test_interval();
    test_interval_model_error();
    test_incremental();
    test_summary_roundtrip();
    test_loaded_latency();
    test_loaded_at_channels();
    test_cache_hits_traffic();
    test_window_classes();
    test_split_l1();
    test_split_sse();
    test_split_continuity();
    test_bound_continuity();
    test_split_min();
    test_mix_samples();
    test_calibrate_overlap();
    test_calibrate_mix();
    test_calibrate_open_states();
    test_store_traffic_kept();
    test_store_hits_write_back();
    test_reuse_scaled_first();
    test_unsampled_by_traffic();
    test_one_unbound_run();
    test_steep_fit();
    test_store_scatter_excess();
    test_queueing_carried();
    test_queueing_carried_clock();
    test_queue_by_load();
    test_channel_within_run();
    test_bursts();
    test_dirty_lines_posted();
    test_bound_by_bandwidth_ratio();
    test_bound_by_latency_ratio();
    test_store_floor();
    test_all_bound_face_value();
    test_fit_below_fastest();
    test_regimes();
    test_many_small_objects();
    test_corrupt_block_mid_run();
    test_device_order();
    test_regime_by_mix();
    test_summary_figures();
    test_hit_figures();
    test_compiled_placements();
    test_attribution();
    test_attribution_changes();
    test_long_samples();
    test_bad_input();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
