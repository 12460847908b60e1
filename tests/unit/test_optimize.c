/* Placement search on synthetic estimator summaries with known optima.
 *
 * Each summary gives every object a window of its own in which only that
 * object is sampled, so the linear model's estimate is the sum over objects
 * of the window time on the device the object is placed on: the optimum
 * under capacities is a knapsack whose answer a brute force over the
 * estimator's own states gives independently of the search code. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hetmem/error.h"
#include "hetmem/estimate.h"
#include "hetmem/optimize.h"

#define MAXO 32
#define MAXD 3
#define MIB (1024.0 * 1024.0)

typedef struct {
    int nobj, ndev, nph;
    uint64_t size[MAXO];
    /* time of object o's window in phase p on device d (ns); device 0 is the
     * slowest and the default */
    double t[MAXO][2][MAXD];
    int phase_of[MAXO][2];   /* which phases the object is active in */
    uint64_t devcap[MAXD];
    int def;                 /* the summary's default device */
} inst_t;

static uint64_t rng_state;
static double unif(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* Random instance: sizes 1..20 MiB, window 10..30 ms on the slow device,
 * 10..60% faster on the others (device 2 faster than device 1). */
static void random_inst(inst_t *in, int nobj, int ndev, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    rng_state = seed;
    in->nobj = nobj;
    in->ndev = ndev;
    in->nph = 1;
    for (int o = 0; o < nobj; o++) {
        in->size[o] = (uint64_t)(1 + (int)(unif() * 20)) << 20;
        double slow = 10e6 + unif() * 20e6, gain = 0.1 + 0.5 * unif();
        in->t[o][0][0] = slow;
        for (int d = 1; d < ndev; d++)
            in->t[o][0][d] = slow * (1 - gain * (0.6 + 0.4 * (d == ndev - 1)));
    }
    for (int d = 0; d < ndev; d++)
        in->devcap[d] = 64ull << 30;
}

/* The summary JSON (format of estimate.h). Returns a malloc'd string. */
static char *summary_json(const inst_t *in)
{
    size_t cap = 1 << 20, len = 0;
    char *s = malloc(cap);
    static const char *names[MAXD] = {"slow", "mid", "fast"};
    static const double lat[MAXD] = {300, 200, 100};
    double total[MAXD] = {0};
    for (int o = 0; o < in->nobj; o++)
        for (int p = 0; p < in->nph; p++)
            for (int d = 0; d < in->ndev; d++)
                total[d] += in->t[o][p][d];
#define OUT(...) len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__)
    OUT("{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": %d, \"devices\": [", in->def);
    for (int d = 0; d < in->ndev; d++)
        OUT("%s{\"name\": \"%s\", \"runtime_ns\": %.17g, \"period\": 1000, \"capacity\": %llu, "
            "\"bandwidth_gbs\": %g, \"read_latency_ns\": %g}",
            d ? ", " : "", in->ndev == 2 && d == 1 ? "fast" : names[d], total[d], (unsigned long long)in->devcap[d],
            5.0 * (d + 1), lat[in->ndev == 2 && d == 1 ? 2 : d]);
    OUT("], \"phases\": [\"(no phase)\"");
    for (int p = 1; p < in->nph; p++)
        OUT(", \"phase%d\"", p);
    OUT("], \"objects\": [");
    for (int o = 0; o < in->nobj; o++) {
        OUT("%s{\"site\": \"0x%016llx\", \"name\": \"obj%d\", \"size\": %llu, \"allocations\": 1, \"pages\": [",
            o ? ", " : "", 0x1000ull + (unsigned long long)o, o, (unsigned long long)in->size[o]);
        for (int k = 0; k < 100; k++)
            OUT("%s10", k ? ", " : "");
        OUT("]}");
    }
    OUT("], \"windows\": [");
    int first = 1;
    for (int p = 0; p < in->nph; p++)
        for (int o = 0; o < in->nobj; o++) {
            if (in->t[o][p][0] <= 0)
                continue;
            OUT("%s{\"phase\": %d, \"instructions\": 1000000, \"t_ns\": [", first ? "" : ", ", p);
            first = 0;
            for (int d = 0; d < in->ndev; d++)
                OUT("%s%.17g", d ? ", " : "", in->t[o][p][d]);
            OUT("], \"stats\": [");
            for (int d = 0; d < in->ndev; d++)
                OUT("%s[%d, %d, 1000, %g, 1000]", d ? ", " : "", o, d, 1000 * lat[d] * 1.4);
            OUT("]}");
        }
    OUT("]}");
#undef OUT
    return s;
}

static hm_estimator_t *open_inst(const inst_t *in)
{
    char *js = summary_json(in);
    hm_estimator_t *e = NULL;
    int rc = hm_estimator_parse_summary(&e, "synthetic", js);
    if (rc < 0)
        fprintf(stderr, "parse_summary: %s: %s\n", hm_strerror(rc), hm_errdetail());
    free(js);
    CHECK_EQ_INT(rc, 0);
    return e;
}

/* Object index in the estimator of synthetic object o (objects are sorted
 * hottest first, so look them up by name). */
static int obj_index(hm_estimator_t *e, int o)
{
    char name[16];
    snprintf(name, sizeof name, "obj%d", o);
    return hm_estimator_find_object(e, 0x1000ull + (uint64_t)o, name);
}

/* Brute force over every whole-object assignment of the unphased state. */
static double brute_force(hm_estimator_t *e, const inst_t *in, const uint64_t *cap, hm_est_model_t model)
{
    hm_est_state_t *s = NULL;
    CHECK_EQ_INT(hm_est_state_open(&s, e, model, 0), 0);
    int idx[MAXO], a[MAXO] = {0};
    for (int o = 0; o < in->nobj; o++)
        idx[o] = obj_index(e, o);
    double best = INFINITY;
    long total = 1;
    for (int o = 0; o < in->nobj; o++)
        total *= in->ndev;
    for (long k = 0; k < total; k++) {
        long v = k;
        uint64_t used[MAXD] = {0};
        for (int o = 0; o < in->nobj; o++) {
            a[o] = (int)(v % in->ndev);
            v /= in->ndev;
            used[a[o]] += in->size[o];
        }
        int ok = 1;
        for (int d = 1; d < in->ndev; d++)
            ok &= used[d] <= cap[d];
        if (!ok)
            continue;
        double ns = 0;
        for (int o = 0; o < in->nobj; o++)
            hm_est_state_move(s, -1, idx[o], a[o], 100, &ns);
        if (ns < best)
            best = ns;
    }
    hm_est_state_close(s);
    return best;
}

static uint64_t footprint(const inst_t *in)
{
    uint64_t f = 0;
    for (int o = 0; o < in->nobj; o++)
        f += in->size[o];
    return f;
}

static int run(hm_estimator_t *e, hm_optimize_algo_t algo, const uint64_t *cap, uint64_t seed, uint64_t budget,
               hm_optimize_result_t *res)
{
    hm_optimize_opts_t o = {.algo = algo, .model = HM_EST_LINEAR, .capacity = cap, .seed = seed, .budget = budget};
    int rc = hm_optimize_run(e, &o, res);
    if (rc < 0)
        fprintf(stderr, "%s: %s: %s\n", hm_optimize_algo_name(algo), hm_strerror(rc), hm_errdetail());
    return rc;
}

static void check_fits(hm_estimator_t *e, const inst_t *in, const hm_optimize_result_t *r, const uint64_t *cap)
{
    uint64_t used[MAXD] = {0};
    for (int o = 0; o < in->nobj; o++) {
        int pct = 100, d = hm_est_state_device(r->state, -1, obj_index(e, o), &pct);
        CHECK(d >= 0 && d < in->ndev);
        if (d > 0)
            used[d] += in->size[o] * (uint64_t)pct / 100;
    }
    for (int d = 1; d < in->ndev; d++) {
        CHECK(used[d] <= cap[d]);
        CHECK(hm_est_state_bytes(r->state, d) <= cap[d]);
    }
}

/* Instances of test_optimum where greedy stops short of the optimum: rl
 * must reach it there by its own search. */
static int greedy_short;

/* Exhaustive equals brute force; every algorithm stays within capacity;
 * rl reaches the optimum on these small instances. */
static void test_optimum(int nobj, int ndev, uint64_t seed, double frac)
{
    inst_t in;
    random_inst(&in, nobj, ndev, seed);
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[MAXD];
    cap[0] = HM_OPT_UNLIMITED;
    for (int d = 1; d < ndev; d++)
        cap[d] = (uint64_t)(frac * (double)footprint(&in)) / (uint64_t)(ndev - 1);
    double opt = brute_force(e, &in, cap, HM_EST_LINEAR);
    for (int a = 0; a < HM_OPT_NALGOS; a++) {
        hm_optimize_result_t r;
        if (run(e, (hm_optimize_algo_t)a, cap, 7, 0, &r) < 0) {
            CHECK(0);
            continue;
        }
        check_fits(e, &in, &r, cap);
        CHECK(r.estimate.runtime_ns >= opt * (1 - 1e-9));
        CHECK(r.estimator_calls > 0);
        CHECK(r.placement_json && strstr(r.placement_json, "\"default\""));
        if (a == HM_OPT_EXHAUSTIVE) {
            CHECK_NEAR(r.estimate.runtime_ns, opt, 1e-9);
            CHECK_EQ_INT(r.complete, 1);
        }
        if (a == HM_OPT_GREEDY && r.estimate.runtime_ns > opt * (1 + 1e-9))
            greedy_short++;
        if (a == HM_OPT_RL) {
            if (fabs(r.estimate.runtime_ns - opt) > 1e-9 * opt)
                fprintf(stderr, "rl: %d objects, %d devices, seed %llu: %.6g vs optimum %.6g (%llu calls)\n", nobj, ndev,
                        (unsigned long long)seed, r.estimate.runtime_ns, opt, (unsigned long long)r.estimator_calls);
            CHECK_NEAR(r.estimate.runtime_ns, opt, 1e-9);
        }
        hm_optimize_result_free(&r);
    }
    hm_estimator_close(e);
}

/* A fast default device capped below the footprint: the search falls back
 * to the slow device and still finds the optimum. */
static void test_fallback(void)
{
    inst_t in;
    random_inst(&in, 9, 2, 77);
    in.def = 1;
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    CHECK_EQ_INT(hm_estimator_default_device(e), 1);
    uint64_t cap[2] = {HM_OPT_UNLIMITED, footprint(&in) / 3};
    double opt = brute_force(e, &in, cap, HM_EST_LINEAR);
    hm_optimize_algo_t algos[] = {HM_OPT_EXHAUSTIVE, HM_OPT_RL, HM_OPT_GREEDY, HM_OPT_ANNEAL};
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
        hm_optimize_result_t r;
        CHECK_EQ_INT(run(e, algos[i], cap, 3, 0, &r), 0);
        if (!r.state)
            continue;
        CHECK(hm_est_state_bytes(r.state, 1) <= cap[1]);
        CHECK(r.estimate.runtime_ns >= opt * (1 - 1e-9));
        if (algos[i] == HM_OPT_EXHAUSTIVE || algos[i] == HM_OPT_RL)
            CHECK_NEAR(r.estimate.runtime_ns, opt, 1e-9);
        hm_optimize_result_free(&r);
    }
    hm_optimize_opts_t o = {.model = HM_EST_LINEAR, .capacity = cap};
    hm_optimize_result_t ft;
    CHECK_EQ_INT(hm_optimize_reference(e, &o, HM_OPT_REF_FIRST_TOUCH, &ft), 0);
    if (ft.state) {
        CHECK(hm_est_state_bytes(ft.state, 1) <= cap[1]);
        CHECK(hm_est_state_bytes(ft.state, 1) > 0);
        CHECK(ft.estimate.runtime_ns >= opt * (1 - 1e-9));
    }
    hm_optimize_result_free(&ft);
    uint64_t none[2] = {footprint(&in) / 2, footprint(&in) / 3};
    hm_optimize_result_t r;
    CHECK_EQ_INT(run(e, HM_OPT_GREEDY, none, 1, 0, &r), HM_ECAPACITY);
    hm_estimator_close(e);
}

/* Fractional knapsack: greedy with splits equals the analytic optimum. */
static void test_fractional(void)
{
    inst_t in;
    random_inst(&in, 8, 2, 42);
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[2] = {HM_OPT_UNLIMITED, footprint(&in) * 3 / 10};
    /* analytic: by saving per byte, the last object in part */
    int ord[MAXO];
    double base = 0;
    for (int o = 0; o < in.nobj; o++) {
        ord[o] = o;
        base += in.t[o][0][0];
    }
    for (int i = 1; i < in.nobj; i++)
        for (int j = i; j > 0; j--) {
            int x = ord[j], y = ord[j - 1];
            double rx = (in.t[x][0][0] - in.t[x][0][1]) / (double)in.size[x];
            double ry = (in.t[y][0][0] - in.t[y][0][1]) / (double)in.size[y];
            if (rx <= ry)
                break;
            ord[j] = y;
            ord[j - 1] = x;
        }
    double room = (double)cap[1], want = base;
    for (int i = 0; i < in.nobj && room > 0; i++) {
        int o = ord[i];
        double f = (double)in.size[o] <= room ? 1 : floor(100 * room / (double)in.size[o]) / 100;
        want -= f * (in.t[o][0][0] - in.t[o][0][1]);
        room -= f * (double)in.size[o];
    }
    hm_optimize_opts_t opts = {.algo = HM_OPT_GREEDY, .model = HM_EST_LINEAR, .capacity = cap, .split = 1};
    hm_optimize_result_t r;
    CHECK_EQ_INT(hm_optimize_run(e, &opts, &r), 0);
    if (r.state) {
        CHECK_NEAR(r.estimate.runtime_ns, want, 1e-6);
        CHECK(hm_est_state_bytes(r.state, 1) <= cap[1]);
    }
    hm_optimize_result_free(&r);
    hm_estimator_close(e);
}

static void test_determinism(void)
{
    inst_t in;
    random_inst(&in, 16, 3, 99);
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[3] = {HM_OPT_UNLIMITED, footprint(&in) / 8, footprint(&in) / 8};
    hm_optimize_algo_t seeded[] = {HM_OPT_ANNEAL, HM_OPT_RANDOM, HM_OPT_RL};
    for (size_t i = 0; i < sizeof seeded / sizeof seeded[0]; i++) {
        hm_optimize_result_t a, b;
        CHECK_EQ_INT(run(e, seeded[i], cap, 5, 3000, &a), 0);
        CHECK_EQ_INT(run(e, seeded[i], cap, 5, 3000, &b), 0);
        CHECK_STR_EQ(a.placement_json, b.placement_json);
        CHECK(a.estimate.runtime_ns == b.estimate.runtime_ns);
        CHECK_EQ_U64(a.estimator_calls, b.estimator_calls);
        if (a.estimator_calls > 3000)
            fprintf(stderr, "%s: %llu calls\n", hm_optimize_algo_name(seeded[i]), (unsigned long long)a.estimator_calls);
        CHECK(a.estimator_calls <= 3000);
        check_fits(e, &in, &a, cap);
        hm_optimize_result_free(&a);
        hm_optimize_result_free(&b);
    }
    hm_estimator_close(e);
}

/* Objects the estimator sees no effect of stay on the default device,
 * whatever the search: objects 4 and 5 take the same time on both devices,
 * the fast device holds everything, and every algorithm's result puts
 * objects 0-3 on it and leaves 4 and 5 where they were. Left to the
 * searches, rl, anneal and random put them wherever their last visit did. */
static void test_no_effect_stays(void)
{
    inst_t in;
    random_inst(&in, 6, 2, 7);
    for (int o = 4; o < 6; o++)
        in.t[o][0][1] = in.t[o][0][0];
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[2] = {HM_OPT_UNLIMITED, footprint(&in)};
    hm_optimize_algo_t all[] = {HM_OPT_RL, HM_OPT_GREEDY, HM_OPT_ANNEAL, HM_OPT_EXHAUSTIVE, HM_OPT_RANDOM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            hm_optimize_result_t r;
            if (run(e, all[i], cap, seed, 2000, &r) < 0) {
                CHECK(0);
                continue;
            }
            for (int o = 0; o < 6; o++) {
                int d = hm_est_state_device(r.state, -1, obj_index(e, o), NULL);
                if (d != (o < 4 ? 1 : 0))
                    fprintf(stderr, "%s seed %llu: obj%d on device %d\n", hm_optimize_algo_name(all[i]),
                            (unsigned long long)seed, o, d);
                CHECK_EQ_INT(d, o < 4 ? 1 : 0);
            }
            hm_optimize_result_free(&r);
        }
    hm_estimator_close(e);
}

/* Two objects, each hot in its own phase, and room for one: per phase, the
 * fast device can hold the hot object of each phase in turn. */
static void test_phased(void)
{
    inst_t in = {.nobj = 3, .ndev = 2, .nph = 2};
    for (int o = 0; o < 3; o++) {
        in.size[o] = 1 << 20;
        for (int p = 0; p < 2; p++) {
            int hot = (o == p);
            in.t[o][p][0] = hot ? 40e6 : 1e6;
            in.t[o][p][1] = hot ? 10e6 : 0.9e6;
        }
    }
    in.t[2][0][0] = in.t[2][1][0] = 12e6; /* a mildly hot object in both */
    in.t[2][0][1] = in.t[2][1][1] = 9e6;
    in.devcap[0] = in.devcap[1] = 64ull << 30;
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[2] = {HM_OPT_UNLIMITED, 1 << 20};
    hm_optimize_opts_t st = {.algo = HM_OPT_EXHAUSTIVE, .model = HM_EST_LINEAR, .capacity = cap};
    hm_optimize_opts_t ph = st;
    ph.phased = 1;
    hm_optimize_result_t rs, rp, rr;
    CHECK_EQ_INT(hm_optimize_run(e, &st, &rs), 0);
    CHECK_EQ_INT(hm_optimize_run(e, &ph, &rp), 0);
    ph.algo = HM_OPT_RL;
    ph.seed = 3;
    CHECK_EQ_INT(hm_optimize_run(e, &ph, &rr), 0);
    if (rs.state && rp.state && rr.state) {
        CHECK(rp.estimate.runtime_ns < rs.estimate.runtime_ns);
        CHECK(rp.estimate.migration_ns > 0);
        CHECK_NEAR(rr.estimate.runtime_ns, rp.estimate.runtime_ns, 1e-9);
        CHECK(hm_est_state_bytes(rp.state, 1) <= cap[1]);
        CHECK(hm_est_state_bytes(rr.state, 1) <= cap[1]);
        CHECK(strstr(rp.placement_json, "\"phases\"") != NULL);
        int p1 = hm_estimator_nphases(e) > 1;
        CHECK(p1);
    }
    hm_optimize_result_free(&rs);
    hm_optimize_result_free(&rp);
    hm_optimize_result_free(&rr);
    hm_estimator_close(e);
}

static void test_bad_input(void)
{
    inst_t in;
    random_inst(&in, 26, 2, 1);
    in.devcap[1] = 100ull << 20;
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    hm_optimize_result_t r;
    hm_optimize_algo_t a;
    CHECK_EQ_INT(hm_optimize_algo_parse("dqn", &a), HM_EUSAGE);
    CHECK_EQ_INT(hm_optimize_algo_parse("anneal", &a), 0);
    CHECK_EQ_INT(a, HM_OPT_ANNEAL);
    uint64_t big[2] = {HM_OPT_UNLIMITED, 200ull << 20};
    CHECK_EQ_INT(run(e, HM_OPT_GREEDY, big, 1, 0, &r), HM_ECAPACITY);
    CHECK(r.state == NULL && r.placement_json == NULL);
    uint64_t cap[2] = {HM_OPT_UNLIMITED, 50ull << 20};
    CHECK_EQ_INT(run(e, HM_OPT_EXHAUSTIVE, cap, 1, 0, &r), HM_ETOOBIG);
    uint64_t small_default[2] = {1 << 20, 50ull << 20};
    CHECK_EQ_INT(run(e, HM_OPT_GREEDY, small_default, 1, 0, &r), HM_ECAPACITY);
    hm_optimize_opts_t o = {.algo = HM_OPT_RL, .model = HM_EST_LINEAR, .capacity = cap, .time_s = -1};
    CHECK_EQ_INT(hm_optimize_run(e, &o, &r), HM_EUSAGE);
    o.time_s = 0;
    o.algo = (hm_optimize_algo_t)17;
    CHECK_EQ_INT(hm_optimize_run(e, &o, &r), HM_EUSAGE);
    /* policies: a saved one loads; another shape or junk is refused */
    char pol[] = "/tmp/hm-test-policy-XXXXXX";
    int fd = mkstemp(pol);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        o.algo = HM_OPT_RL;
        o.budget = 2000;
        o.policy_out = pol;
        CHECK_EQ_INT(hm_optimize_run(e, &o, &r), 0);
        hm_optimize_result_free(&r);
        o.policy_out = NULL;
        o.policy_in = pol;
        o.budget = 300;
        CHECK_EQ_INT(hm_optimize_run(e, &o, &r), 0);
        if (r.state)
            CHECK(hm_est_state_bytes(r.state, 1) <= cap[1]);
        hm_optimize_result_free(&r);
        FILE *f = fopen(pol, "w");
        fprintf(f, "hetmem-rl-policy 1 3 4\n0 0 0\n");
        fclose(f);
        CHECK_EQ_INT(hm_optimize_run(e, &o, &r), HM_EUSAGE);
        unlink(pol);
        CHECK_EQ_INT(hm_optimize_run(e, &o, &r), -ENOENT);
    }
    hm_estimator_close(e);
}

/* The reference placements: first touch fills the fastest device in
 * object order; all-slowest is the default here. */
static void test_references(void)
{
    inst_t in;
    random_inst(&in, 6, 3, 11);
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[3] = {HM_OPT_UNLIMITED, HM_OPT_UNLIMITED, footprint(&in) / 3};
    hm_optimize_opts_t o = {.model = HM_EST_LINEAR, .capacity = cap};
    hm_optimize_result_t def, slow, fast, ft;
    CHECK_EQ_INT(hm_optimize_reference(e, &o, HM_OPT_REF_DEFAULT, &def), 0);
    CHECK_EQ_INT(hm_optimize_reference(e, &o, HM_OPT_REF_SLOWEST, &slow), 0);
    CHECK_EQ_INT(hm_optimize_reference(e, &o, HM_OPT_REF_FASTEST, &fast), 0);
    CHECK_EQ_INT(hm_optimize_reference(e, &o, HM_OPT_REF_FIRST_TOUCH, &ft), 0);
    if (def.state && slow.state && fast.state && ft.state) {
        CHECK_NEAR(def.estimate.runtime_ns, slow.estimate.runtime_ns, 1e-12);
        CHECK(fast.estimate.runtime_ns < ft.estimate.runtime_ns);
        CHECK(ft.estimate.runtime_ns < def.estimate.runtime_ns);
        CHECK(hm_est_state_bytes(ft.state, 2) <= cap[2]);
        /* first touch: in object order, "fast" while it has room, else "mid" */
        uint64_t used = 0;
        for (int i = 0; i < hm_estimator_nobjects(e); i++) {
            hm_est_object_t ob;
            hm_estimator_object(e, i, &ob);
            if (!ob.movable)
                continue;
            int d = hm_est_state_device(ft.state, -1, i, NULL);
            if (used + ob.size <= cap[2]) {
                CHECK_EQ_INT(d, 2);
                used += ob.size;
            } else {
                CHECK_EQ_INT(d, 1);
            }
        }
    }
    hm_optimize_result_free(&def);
    hm_optimize_result_free(&slow);
    hm_optimize_result_free(&fast);
    hm_optimize_result_free(&ft);
    hm_estimator_close(e);
}

/* No object fits: every algorithm ends, with everything on the default
 * device (none may loop on moves that all fail). */
static void test_no_room(void)
{
    inst_t in;
    random_inst(&in, 8, 3, 21);
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[3] = {HM_OPT_UNLIMITED, 512 << 10, 512 << 10};
    for (int a = 0; a < HM_OPT_NALGOS; a++) {
        hm_optimize_result_t r;
        CHECK_EQ_INT(run(e, (hm_optimize_algo_t)a, cap, 1, 0, &r), 0);
        if (!r.state)
            continue;
        CHECK_EQ_U64(hm_est_state_bytes(r.state, 1), 0);
        CHECK_EQ_U64(hm_est_state_bytes(r.state, 2), 0);
        hm_optimize_result_free(&r);
    }
    hm_estimator_close(e);
}

/* With --phases, rl is never worse than the best static placement (a
 * phased assignment can keep every object on one device in all phases): on
 * random instances whose objects are busy in both phases, where most of the
 * optimum is static and reaching it from a partial one may take exchanges. */
static void test_phased_vs_static(uint64_t seed)
{
    inst_t in;
    random_inst(&in, 8, 2, seed);
    in.nph = 2;
    for (int o = 0; o < in.nobj; o++)
        for (int d = 0; d < in.ndev; d++) {
            double t = in.t[o][0][d];
            in.t[o][0][d] = t * (0.5 + 0.1 * (o % 3));
            in.t[o][1][d] = t * (0.7 - 0.1 * (o % 3));
        }
    hm_estimator_t *e = open_inst(&in);
    if (!e)
        return;
    uint64_t cap[2] = {HM_OPT_UNLIMITED, footprint(&in) / 3};
    hm_optimize_opts_t st = {.algo = HM_OPT_EXHAUSTIVE, .model = HM_EST_LINEAR, .capacity = cap};
    hm_optimize_opts_t ph = {.algo = HM_OPT_RL, .model = HM_EST_LINEAR, .capacity = cap, .phased = 1, .seed = seed};
    hm_optimize_result_t rs, rp;
    CHECK_EQ_INT(hm_optimize_run(e, &st, &rs), 0);
    CHECK_EQ_INT(hm_optimize_run(e, &ph, &rp), 0);
    if (rs.state && rp.state) {
        /* the static optimum, as a phased assignment */
        hm_est_state_t *s = NULL;
        double ns = 0;
        CHECK_EQ_INT(hm_est_state_open(&s, e, HM_EST_LINEAR, 1), 0);
        for (int o = 0; s && o < in.nobj; o++) {
            int pct, d = hm_est_state_device(rs.state, -1, obj_index(e, o), &pct);
            CHECK_EQ_INT(hm_est_state_move(s, -1, obj_index(e, o), d, pct, &ns), 0);
        }
        if (ns > 0 && rp.estimate.runtime_ns > ns * (1 + 1e-9))
            fprintf(stderr, "rl --phases, seed %llu: %.9g, static optimum %.9g\n", (unsigned long long)seed,
                    rp.estimate.runtime_ns, ns);
        CHECK(rp.estimate.runtime_ns <= ns * (1 + 1e-9));
        CHECK(hm_est_state_bytes(rp.state, 1) <= cap[1]);
        hm_est_state_close(s);
    }
    hm_optimize_result_free(&rs);
    hm_optimize_result_free(&rp);
    hm_estimator_close(e);
}

/* A page split that beats every device (bandwidth aggregation: CAMP's
 * interleaving model). One 64 MiB object streams 100 sampled loads from
 * memory at period 1000 (100,000 lines, 6.4 MB) and the loads carry no
 * latency cost. near (20 GB/s) and far (10 GB/s) take their channel time,
 * 0.32 ms and 0.64 ms; mid (40 GB/s, 0.16 ms of channels) takes 0.5 ms,
 * neither its channels nor the fastest run's floor, so the model has no
 * floor and no latency side (C = k = 0), and every residual but mid's is 0
 * (mid's, 0.34 ms, is spread by the placement's share on mid). With x of
 * the pages on far and the rest on near (the default), the channels of
 * both work at once: t(x) = max(0.32 (1 - x), 0.64 x) ms, least at x =
 * 1/3. On the 10% grid: x = 0.3 gives max(0.224, 0.192) = 0.224 ms (0.4:
 * 0.256), 0.7 of the fastest device's time; on a 1% grid, x = 0.33 gives
 * max(0.2144, 0.2112) = 0.2144 ms (0.34: 0.2176). Whole objects can do no
 * better than near, 0.32 ms. In two phases of that window each, the same
 * split in both moves nothing between them: twice the time. */
static const char *split_summary(int phased)
{
    return phased
        ? "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
          " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 6.4e5, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
          "  {\"name\": \"far\", \"runtime_ns\": 1.28e6, \"period\": 1000, \"bandwidth_gbs\": 10, \"read_latency_ns\": 200},"
          "  {\"name\": \"mid\", \"runtime_ns\": 1e6, \"period\": 1000, \"bandwidth_gbs\": 40, \"read_latency_ns\": 300}],"
          " \"phases\": [\"(no phase)\", \"one\", \"two\"],"
          " \"objects\": [{\"site\": \"0x1\", \"name\": \"a\", \"size\": 67108864}],"
          " \"windows\": [{\"phase\": 1, \"t_ns\": [3.2e5, 6.4e5, 5e5], \"stats\": [[0, 0, 100, 0, 100, 0, 0, 100], [0, 1, 100, 0, 100, 0, 0, 100], [0, 2, 100, 0, 100, 0, 0, 100]]},"
          "  {\"phase\": 2, \"t_ns\": [3.2e5, 6.4e5, 5e5], \"stats\": [[0, 0, 100, 0, 100, 0, 0, 100], [0, 1, 100, 0, 100, 0, 0, 100], [0, 2, 100, 0, 100, 0, 0, 100]]}]}"
        : "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
          " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 3.2e5, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
          "  {\"name\": \"far\", \"runtime_ns\": 6.4e5, \"period\": 1000, \"bandwidth_gbs\": 10, \"read_latency_ns\": 200},"
          "  {\"name\": \"mid\", \"runtime_ns\": 5e5, \"period\": 1000, \"bandwidth_gbs\": 40, \"read_latency_ns\": 300}],"
          " \"objects\": [{\"site\": \"0x1\", \"name\": \"a\", \"size\": 67108864}],"
          " \"windows\": [{\"phase\": 0, \"t_ns\": [3.2e5, 6.4e5, 5e5], \"stats\": [[0, 0, 100, 0, 100, 0, 0, 100], [0, 1, 100, 0, 100, 0, 0, 100], [0, 2, 100, 0, 100, 0, 0, 100]]}]}";
}

static void test_split_beats_devices(void)
{
    for (int phased = 0; phased <= 1; phased++) {
        hm_estimator_t *e = NULL;
        CHECK_EQ_INT(hm_estimator_parse_summary(&e, "split", split_summary(phased)), 0);
        if (!e)
            return;
        double n = phased ? 2 : 1;
        for (int a = 0; a < HM_OPT_NALGOS; a++) {
            hm_optimize_opts_t o = {.algo = (hm_optimize_algo_t)a, .model = HM_EST_DEFAULT, .phased = phased,
                                    .seed = 3, .budget = 2000};
            hm_optimize_result_t r;
            /* Whole objects: near is the best, 0.32 ms. */
            CHECK_EQ_INT(hm_optimize_run(e, &o, &r), 0);
            CHECK_NEAR(r.estimate.runtime_ns, n * 3.2e5, 1e-6);
            hm_optimize_result_free(&r);
            o.split = 1;
            CHECK_EQ_INT(hm_optimize_run(e, &o, &r), 0);
            if (!r.state)
                continue;
            if (fabs(r.estimate.runtime_ns - n * 2.24e5) > 1e-6 * n * 2.24e5)
                fprintf(stderr, "split, %s%s: %.6g ns\n", hm_optimize_algo_name(o.algo), phased ? " phased" : "",
                        r.estimate.runtime_ns);
            CHECK_NEAR(r.estimate.runtime_ns, n * 2.24e5, 1e-6);
            for (int p = phased ? 1 : -1; p <= (phased ? 2 : -1); p++) {
                int pct = 0;
                CHECK_EQ_INT(hm_est_state_device(r.state, p, 0, &pct), 1);
                CHECK_EQ_INT(pct, 30);
            }
            /* The placement file says the same to the estimator. */
            const char *devs[] = {"near", "far", "mid"};
            hm_placement_t *pl = NULL;
            CHECK_EQ_INT(hm_placement_parse(&pl, "split", r.placement_json, devs, 3), 0);
            hm_estimate_t est;
            if (pl && hm_estimator_estimate(e, pl, HM_EST_DEFAULT, &est, NULL) == 0)
                CHECK_NEAR(est.runtime_ns, n * 2.24e5, 1e-6);
            CHECK(strstr(r.placement_json, "\"pages_percent\": 30") != NULL);
            hm_placement_close(pl);
            hm_optimize_result_free(&r);
            /* A 1% grid reaches x = 0.33. */
            o.split_step = 1;
            CHECK_EQ_INT(hm_optimize_run(e, &o, &r), 0);
            CHECK_NEAR(r.estimate.runtime_ns, n * 2.144e5, 1e-6);
            hm_optimize_result_free(&r);
        }
        hm_optimize_opts_t bad = {.algo = HM_OPT_GREEDY, .split = 1, .split_step = 101};
        hm_optimize_result_t r;
        CHECK_EQ_INT(hm_optimize_run(e, &bad, &r), HM_EUSAGE);
        hm_estimator_close(e);
    }
}

/* The refinement loop (hm_optimize_refine) on one class of the default
 * model, with a stub in place of the runs. Twenty instances of one mix of
 * three 128 MiB objects, 45%, 35% and 20% of the sampled load misses,
 * 100,000 misses (6.4 MB) a run each: near (20 GB/s) moves them in 0.32
 * ms, far (15 GB/s) in 0.4267 ms, every run bound by its channels. With a
 * share s of the traffic on far (w = 1) the class takes max(s x 8.533,
 * (1 - s) x 6.4) ms, and its spread is 2 s (1 - s) (8.533 - 6.4) ms. near
 * holds two objects (256 MiB), so the search's fallback is far, and the
 * feasible shares on far are the objects left there: 1 (8.533 ms, spread
 * 0), 0.45 (object 0 alone: 3.84 ms, spread 1.056), 0.35 (object 1:
 * 4.16, 0.9707), 0.2 (object 2: 5.12, 0.6827), 0.55 (4.693, 1.056), 0.65
 * (5.547, 0.9707), 0.8 (6.827, 0.6827). A calibration moves an estimate t
 * by beta x spread, capped at mix_cap x t (docs/estimator.md). */
static char *refine_summary(void)
{
    static const int share[3] = {45, 35, 20};
    size_t cap = 65536, len = 0;
    char *js = malloc(cap);
    if (!js)
        abort();
    len += (size_t)snprintf(js + len, cap - len,
        "{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0,"
        " \"devices\": [{\"name\": \"near\", \"runtime_ns\": 6.4e6, \"period\": 1000, \"bandwidth_gbs\": 20, \"read_latency_ns\": 100},"
        "               {\"name\": \"far\", \"runtime_ns\": 8.5333333e6, \"period\": 1000, \"bandwidth_gbs\": 15, \"read_latency_ns\": 100}],"
        " \"objects\": [{\"site\": \"0x1\", \"size\": 134217728}, {\"site\": \"0x2\", \"size\": 134217728},"
        " {\"site\": \"0x3\", \"size\": 134217728}], \"windows\": [");
    for (int w = 0; w < 20; w++) {
        len += (size_t)snprintf(js + len, cap - len, "%s{\"phase\": 0, \"region\": %d, \"t_ns\": [0.32e6, 0.42666667e6], \"stats\": [",
                                w ? ", " : "", w);
        for (int d = 0; d < 2; d++)
            for (int o = 0; o < 3; o++) {
                int m = share[o], lat = d ? 36 : 30;
                len += (size_t)snprintf(js + len, cap - len, "%s[%d, %d, %d, %d, %d, %d, 0, %d]", d || o ? ", " : "", o, d,
                                        m, lat * m, m, lat * m, m);
            }
        len += (size_t)snprintf(js + len, cap - len, "]}");
    }
    snprintf(js + len, cap - len, "]}");
    CHECK(len + 8 < cap);
    return js;
}

/* The stub of the runs: a measured time per set of objects left on far
 * (bit o for object o), and which sets were run. */
typedef struct {
    hm_estimator_t *e;
    double truth[8];
    int ran[4], nran;
} refine_stub_t;

static int far_mask(hm_estimator_t *e, const hm_est_state_t *s)
{
    int mask = 0;
    for (int o = 0; o < 3; o++) {
        int pct = 0, i = hm_estimator_find_object(e, 0x1ull + (uint64_t)o, NULL);
        if (i >= 0 && hm_est_state_device(s, -1, i, &pct) == 1 && pct == 100)
            mask |= 1 << o;
    }
    return mask;
}

static int refine_run(void *ctx, int round, const hm_optimize_result_t *pick, double *ns)
{
    refine_stub_t *st = ctx;
    int m = far_mask(st->e, pick->state);
    CHECK_EQ_INT(round, st->nran + 1);
    if (st->nran < 4)
        st->ran[st->nran++] = m;
    *ns = st->truth[m];
    return *ns > 0 ? 0 : HM_ENOTFOUND; /* a placement the case did not expect */
}

static void test_refine(void)
{
    char *js = refine_summary();
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_parse_summary(&e, "refine", js), 0);
    free(js);
    if (!e)
        return;
    uint64_t cap[2] = {256ull << 20, HM_OPT_UNLIMITED};
    /* Anneal: the exhaustive search's bound assumes single moves' savings
     * add up, which a calibrated mix term breaks here (from all on far
     * every single move is slower, two are faster). Seven feasible
     * placements: 2000 calls find the best. */
    hm_optimize_opts_t o = {.algo = HM_OPT_ANNEAL, .model = HM_EST_DEFAULT, .capacity = cap, .seed = 1, .budget = 2000};
    hm_optimize_result_t r;
    CHECK_EQ_INT(hm_optimize_run(e, &o, &r), 0);
    CHECK_EQ_INT(far_mask(e, r.state), 1);
    CHECK_NEAR(r.estimate.runtime_ns, 3.84e6, 1e-4);
    CHECK_NEAR(r.estimate.spread_ns, 1.056e6, 1e-4);
    hm_optimize_result_free(&r);
    hm_optimize_refine_t rf;

    /* 1. The last search picks a round measured slower: the best measured
     * round is returned. Round 1 picks object 0 on far (3.84 ms), measured
     * 8.0 ms: beta = 4.16 / 1.056 = 3.939, mix_cap = 4.16 / 3.84 = 1.083.
     * Calibrated, object 2 on far is 5.12 + 3.939 x 0.6827 = 7.809 ms,
     * below object 1's 4.16 + 3.824 = 7.984, object 0's 8.0 and all on
     * far's 8.533: round 2 picks it, measured 8.3 ms. On both runs
     * (relative errors b = 4.16 / 8.0 and 3.18 / 8.3 against a = 1.056 /
     * 8.0 and 0.6827 / 8.3) beta = sum a b / sum a^2 = 4.140, mix_cap still
     * 1.083: object 2 on far 5.12 + 2.827 = 7.947 ms, object 0 on far
     * 3.84 + min(4.372, 1.083 x 3.84 = 4.16) = 8.0 ms (the cap holds it at
     * its run), object 1 8.179, all on far 8.533. The last search picks
     * object 2 on far again, which ran in 8.3 ms; round 1 ran in 8.0 and is
     * returned, estimated at 8.0 ms. (The last search's pick, returned
     * before, is 0.3 ms slower.) */
    refine_stub_t st = {.e = e};
    st.truth[1] = 8.0e6;
    st.truth[4] = 8.3e6;
    CHECK_EQ_INT(hm_optimize_refine(e, &o, 2, refine_run, &st, &rf), 0);
    CHECK_EQ_INT(st.nran, 2);
    CHECK_EQ_INT(st.ran[0], 1);
    CHECK_EQ_INT(st.ran[1], 4);
    CHECK_EQ_INT(rf.nrounds, 2);
    if (rf.nrounds == 2) {
        CHECK_NEAR(rf.rounds[0].predicted_ns, 3.84e6, 1e-4);
        CHECK_NEAR(rf.rounds[1].predicted_ns, 7.809e6, 1e-3);
        CHECK_NEAR(rf.rounds[1].cal.mix, 4.140, 1e-3);
        CHECK_NEAR(rf.rounds[0].calibrated.runtime_ns, 8.0e6, 1e-4);
        CHECK_NEAR(rf.rounds[1].calibrated.runtime_ns, 7.947e6, 1e-3);
    }
    CHECK_NEAR(rf.last.runtime_ns, 7.947e6, 1e-3);
    CHECK_EQ_INT(rf.last_round, 2);
    CHECK_EQ_INT(rf.best_round, 1);
    CHECK_EQ_INT(rf.returned_round, 1);
    CHECK_EQ_INT(rf.why, HM_OPT_KEEP_MEASURED);
    if (rf.result.state)
        CHECK_EQ_INT(far_mask(e, rf.result.state), 1);
    CHECK_NEAR(rf.result.estimate.runtime_ns, 8.0e6, 1e-4);
    CHECK(rf.result.placement_json && rf.nrounds && !strcmp(rf.result.placement_json, rf.rounds[0].placement_json));
    hm_optimize_refine_free(&rf);

    /* 2. The last search's pick is not measured and faster by its estimate,
     * but not confidently: one round, as above (8.0 ms); the last search
     * picks object 2 on far at 7.809 ms, whose spread 0.6827 ms gives a
     * model-error half-width of 0.6117 x 0.6827 = 0.418 ms alone (the
     * interval's h_m, docs/estimator.md): its interval reaches 8.227 ms,
     * above the measured 8.0. Round 1 is returned. */
    memset(&st, 0, sizeof st);
    st.e = e;
    st.truth[1] = 8.0e6;
    CHECK_EQ_INT(hm_optimize_refine(e, &o, 1, refine_run, &st, &rf), 0);
    CHECK_EQ_INT(st.nran, 1);
    CHECK_NEAR(rf.last.runtime_ns, 7.809e6, 1e-3);
    CHECK(rf.last.hi_ns >= 7.809e6 + 0.6117 * 0.6827e6 * 0.999);
    CHECK_EQ_INT(rf.last_round, 0);
    CHECK_EQ_INT(rf.returned_round, 1);
    CHECK_EQ_INT(rf.why, HM_OPT_KEEP_MEASURED);
    if (rf.result.state)
        CHECK_EQ_INT(far_mask(e, rf.result.state), 1);
    hm_optimize_refine_free(&rf);

    /* 3. The last search's pick is confidently faster: round 1 (object 0
     * on far) measured 10.0 ms: beta = 6.16 / 1.056 = 5.833, mix_cap 1.604;
     * object 2 on far becomes 5.12 + 3.982 = 9.102 ms, object 1 9.822, and
     * all on far keeps its run's 8.533 ms (no spread, so no model error:
     * its interval is the sampling error's, well under the 1.467 ms to
     * 10.0). The last search picks all on far, never run, and it is
     * returned. */
    memset(&st, 0, sizeof st);
    st.e = e;
    st.truth[1] = 10.0e6;
    CHECK_EQ_INT(hm_optimize_refine(e, &o, 1, refine_run, &st, &rf), 0);
    CHECK_NEAR(rf.last.runtime_ns, 8.5333e6, 1e-4);
    CHECK(rf.last.spread_ns < 1e-6 * rf.last.runtime_ns);
    CHECK(rf.last.hi_ns < 10.0e6);
    CHECK_EQ_INT(rf.last_round, 0);
    CHECK_EQ_INT(rf.returned_round, 0);
    CHECK_EQ_INT(rf.why, HM_OPT_KEEP_SEARCH);
    if (rf.result.state)
        CHECK_EQ_INT(far_mask(e, rf.result.state), 7);
    CHECK_NEAR(rf.result.estimate.runtime_ns, 8.5333e6, 1e-4);
    hm_optimize_refine_free(&rf);

    /* A run that fails stops the loop with its error; bad arguments. */
    memset(&st, 0, sizeof st);
    st.e = e;
    CHECK_EQ_INT(hm_optimize_refine(e, &o, 1, refine_run, &st, &rf), HM_ENOTFOUND);
    CHECK(rf.nrounds == 0 && rf.result.state == NULL);
    CHECK_EQ_INT(hm_optimize_refine(e, &o, 0, refine_run, &st, &rf), HM_EUSAGE);
    CHECK_EQ_INT(hm_optimize_refine(e, &o, 1, NULL, &st, &rf), HM_EUSAGE);
    hm_optimize_opts_t lin = o;
    lin.model = HM_EST_LINEAR;
    CHECK_EQ_INT(hm_optimize_refine(e, &lin, 1, refine_run, &st, &rf), HM_EUSAGE);
    hm_estimator_close(e);
}

int main(void)
{
    test_optimum(10, 2, 1, 0.25);
    test_optimum(10, 2, 2, 0.5);
    test_optimum(9, 2, 3, 0.1);
    test_optimum(7, 3, 4, 0.3);
    test_optimum(7, 3, 5, 0.5);
    fprintf(stderr, "greedy short of the optimum in %d of 5 instances\n", greedy_short);
    CHECK(greedy_short >= 2);
    test_fractional();
    test_split_beats_devices();
    test_refine();
    test_determinism();
    test_no_effect_stays();
    test_phased();
    /* seeds where rl without its final local search stayed above the static optimum */
    for (int k = 0; k < 5; k++)
        test_phased_vs_static((const uint64_t[]){42, 45, 66, 71, 73}[k]);
    test_bad_input();
    test_references();
    test_no_room();
    test_fallback();
    return check_done();
}
