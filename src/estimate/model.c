/* The models (docs/estimator.md), placement-file estimates and incremental
 * states.
 *
 * Both models reduce, once per summary, to terms that do not depend on the
 * placement, so that an estimate costs O(objects x devices x phases) and a
 * move O(devices x phases):
 *
 * linear  (Denoyelle et al., ISC 2022) t = sum_w t_s,w - sum_d (t_s,w - t_d,w) f_w,d
 *         where s is the slowest run, f_w,d the share of the slow run's
 *         memory samples (those that missed L1, as a load-latency event
 *         with a threshold samples) in window w whose pages are on d, and a
 *         window whose runs differ by less than 3% keeps t_s,w. Linear in
 *         the placement.
 *
 * default per phase label c (the windows of a label summed):
 *         t_c = max(C_c + sum_d k_c,d sum_o x_o,d L_c,o,d,  max_d Y_c,d / bw_d)
 *               + sum_d xi_d r_c,d
 *         C_c is the device-independent time and k_c the time per unit of
 *         sampled latency weight, fitted on the runs whose device was not
 *         near its bandwidth share (t = C + k L); L the object's sampled
 *         latency cost in the run on d (when d's run was bandwidth-bound,
 *         an unbound run's unloaded cost with each memory load's idle
 *         latency changed to d's); Y_c,d the bytes the placement sends to d
 *         (sampled L1 misses x line size); r the residual that makes every
 *         all-on-one-device estimate equal its measured run, spread by xi_d,
 *         the share of the latency cost placed on d. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimate/estimate_int.h"

/* ------------------------------------------------------------ tunables */

/* Every number the models take that is not read from the traces, held
 * once here (as mimalloc holds its options) and stated in
 * docs/estimator.md's table: name, value, unit, what it means and where it
 * comes from (hardware, literature, or fitted: chosen on the bench's
 * mini-apps). Solver settings (bisection steps, tolerances) are not model
 * tunables and stay where they are used. */
typedef enum {
    T_LINE_BYTES,
    T_CUTOFF,
    T_BOUND_UTIL,
    T_LAT_MARGIN,
    T_BW_MATCH,
    T_SATURATED,
    T_STREAM_PASSES,
    T_STREAMED,
    T_STORE_HITS_PER_LINE,
    T_FLOOR_TOL,
    T_SPLIT_SSE,
    T_SPLIT_L1,
    T_SPLIT_MIN,
    T_MIX_SAMPLES,
    T_HIT_BASE,
    T_HIT_WAIT,
    T_MODEL_ERROR_Q,
    T_COUNT
} tune_t;

typedef struct {
    const char *name;
    double value;
    const char *unit, *source, *meaning;
} tunable_t;

#ifdef HM_EST_MUTATION
#define TUNE_CONST
#else
#define TUNE_CONST const
#endif

static TUNE_CONST tunable_t tunables[T_COUNT] = {
    [T_LINE_BYTES] = {"line_bytes", 64, "B", "hardware", "bytes a sampled L1 miss moves (one cache line)"},
    [T_CUTOFF] = {"cutoff", 1.03, "ratio", "literature",
                  "linear model: a window whose runs differ by less than this keeps the slow run's time"},
    [T_BOUND_UTIL] = {"bound_util", 0.8, "share", "fitted",
                      "a run whose sampled traffic kept its channels busy this share of its time is bandwidth-bound"},
    [T_LAT_MARGIN] = {"lat_margin", 1.1, "ratio", "fitted",
                      "a run slower than another by more than this times their ratio of idle latencies is "
                      "bandwidth-bound"},
    [T_BW_MATCH] = {"bw_match", 0.05, "relative", "fitted",
                    "two runs whose time ratio is within this of their bandwidth ratio are both bandwidth-bound"},
    [T_SATURATED] = {"saturated", 0.95, "share", "fitted",
                     "with every run bound, a reference run this busy on its channels measured only queueing"},
    [T_STREAM_PASSES] = {"stream_passes", 2, "misses/line/instance", "fitted",
                         "an object missed at most this often per line and instance (or allocation) is swept: all "
                         "its misses are traffic"},
    [T_STREAMED] = {"streamed", 0.02, "share", "fitted",
                    "an object whose cache hits waited for memory this often in some run is streamed"},
    [T_STORE_HITS_PER_LINE] = {"store_hits_per_line", 8, "stores/line", "hardware",
                               "store hits that dirty one line (64-byte lines of 8-byte elements stored in order)"},
    [T_FLOOR_TOL] = {"floor_tol", 0.02, "relative", "fitted",
                     "runs within this of a phase's fastest run (or of their channel time) took a floor no device "
                     "changes"},
    [T_SPLIT_SSE] = {"split_sse", 0.5, "share", "fitted",
                     "a 2-means split is kept when it leaves at most this share of the spread within the class"},
    [T_SPLIT_L1] = {"split_l1", 0.3, "share", "fitted",
                    "and when the two halves' mixes differ by at least this share of the traffic (L1 distance)"},
    [T_SPLIT_MIN] = {"split_min", 0.05, "share", "fitted",
                     "and when each half holds at least this share of the instances (and 2)"},
    [T_MIX_SAMPLES] = {"mix_samples", 8, "samples", "fitted",
                       "fewest sampled misses that say an instance's or window's mix; fewer join their neighbour"},
    [T_HIT_BASE] = {"hit_base", 5, "percentile", "fitted",
                    "a cache level's usual hit latency: this percentile of the weights of a run's loads that hit there"},
    [T_HIT_WAIT] = {"hit_wait", 2, "ratio", "fitted",
                    "a cache hit that took more than this times its level's usual latency waited for a line on its "
                    "way from memory"},
    [T_MODEL_ERROR_Q] = {"model_error_q", 0.6117, "ratio",
                         "fitted: split-conformal 95% quantile on every program of the estimator corpus, command "
                         "bench/estimator-interval --work DIR --fit all (after bench/estimator --report-only "
                         "--reestimate); leave one program out: bench/estimator-interval --by-app --fit all",
                         "the 95% interval's model-error half-width per unit of the placement's spread between its "
                         "device runs"},
};

/* The model's rules: each can be switched off in a mutation build (the
 * mutation check, tests/est_mutation.sh, removes each in turn and expects
 * a unit test to fail). */
typedef enum {
    R_STREAMED_HITS,     /* waiting cache hits make an object streamed */
    R_BLEND_STREAMED,    /* a waiting share near streamed is blended by its probability */
    R_SWEPT,             /* few misses per line make an object swept */
    R_FRESH_ALLOCS,      /* each allocation of an object is a pass of fresh lines */
    R_DIRTY_LINES,       /* store hits dirty lines that are written back */
    R_POSTED_WB,         /* those write-backs are shared by a phase's regimes */
    R_TRAFFIC_IN_RUN,    /* no run's channels were busy longer than it ran */
    R_STORE_EXCESS,      /* store misses beyond one pass are taken back first */
    R_BOUND_BY_LATENCY,  /* slower than latency explains: bandwidth-bound */
    R_BOUND_BY_BW,       /* times in the ratio of bandwidths: bandwidth-bound */
    R_BOUND_BY_UNSAMPLED,/* bound once the unsampled traffic counts */
    R_UNSAMPLED,         /* the traffic the samples miss goes to the objects */
    R_C_BOUND,           /* the fit: C at most the fastest run's time */
    R_K_BOUND,           /* the fit: k at most 1 */
    R_BOUND_NO_K,        /* the fit: a bound run does not inform k */
    R_STORE_FLOOR,       /* no latency cost, runs at a floor: C is the floor */
    R_SATURATED_REF,     /* a saturated reference leaves the phase to its channels */
    R_QUEUEING_CARRIED,  /* only the idle latency changes with the device */
    R_QUEUE_BY_LOAD,     /* without a curve, a run's queueing scales with the load (Kingman) */
    R_CHANNEL_IN_RUN,    /* a run's channel time is at most its time */
    R_PROFILE,           /* a class is timed window by window */
    R_CLASSES,           /* instances are cut into classes by traffic mix */
    R_REGIMES,           /* windows are cut into regimes */
    R_HIT_WAITS,         /* a slow cache hit waited for memory (summary building) */
    R_MODEL_ERROR,       /* the interval has a model-error term, not only sampling error */
    R_BLEND_SPLITS,      /* a split near its thresholds is blended by its probability */
    R_BLEND_BOUND,       /* a run near bound_util is blended by its probability */
    R_MIX,               /* a calibrated class's time moves by beta x its spread */
    R_MIX_CAP,           /* by at most the runs' largest relative error x its time */
    R_COUNT
} rule_t;

#ifdef HM_EST_MUTATION
static const char *const rule_names[R_COUNT] = {
    "streamed_hits", "blend_streamed", "swept", "fresh_allocations", "dirty_lines", "posted_writebacks", "traffic_in_run", "store_excess",
    "bound_by_latency", "bound_by_bandwidth", "bound_by_unsampled", "unsampled_traffic", "c_at_most_fastest",
    "k_at_most_1", "bound_runs_no_k",
    "store_floor", "saturated_reference", "queueing_carried", "queue_by_load", "channel_in_run", "window_profile",
    "classes", "regimes", "hit_waits", "model_error", "blend_splits", "blend_bound", "mix", "mix_cap"};
static int rules_off[R_COUNT];

/* HM_EST_MUTATE="name*factor" scales a tunable, "-name" removes a rule;
 * read once, before the first summary is prepared (mutation builds only). */
static void mutate_once(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *m = getenv("HM_EST_MUTATE");
    if (!m || !*m)
        return;
    if (m[0] == '-') {
        for (int r = 0; r < R_COUNT; r++)
            if (!strcmp(m + 1, rule_names[r])) {
                rules_off[r] = 1;
                return;
            }
    } else {
        const char *star = strchr(m, '*');
        for (int t = 0; t < T_COUNT && star; t++)
            if (strlen(tunables[t].name) == (size_t)(star - m) && !strncmp(m, tunables[t].name, (size_t)(star - m))) {
                tunables[t].value *= strtod(star + 1, NULL);
                if (t == T_MIX_SAMPLES || t == T_STORE_HITS_PER_LINE || t == T_LINE_BYTES)
                    tunables[t].value = round(tunables[t].value);
                return;
            }
    }
    fprintf(stderr, "HM_EST_MUTATE=%s: no such tunable or rule\n", m);
    exit(2);
}
#define RULE(r) (!rules_off[r])
#else
#define RULE(r) 1
#endif

#define TUNE(t) (tunables[t].value)

void hm__est_hit_figures(double *pct, double *ratio)
{
#ifdef HM_EST_MUTATION
    mutate_once();
#endif
    *pct = TUNE(T_HIT_BASE);
    *ratio = RULE(R_HIT_WAITS) ? TUNE(T_HIT_WAIT) : INFINITY;
}

static const char *const model_names[HM_EST_NMODELS] = {"linear", "default"};

HM_API const char *hm_est_model_name(hm_est_model_t m)
{
    return (unsigned)m < HM_EST_NMODELS ? model_names[m] : NULL;
}

HM_API int hm_est_model_parse(const char *name, hm_est_model_t *out)
{
    hm__errclear();
    for (int i = 0; i < HM_EST_NMODELS; i++)
        if (name && !strcmp(name, model_names[i])) {
            *out = (hm_est_model_t)i;
            return 0;
        }
    return hm__errf(HM_EUSAGE, "unknown model '%s' (models: linear, default)", name ? name : "");
}

/* ---------------------------------------------------------- preparation */

static size_t ix3(const hm_estimator_t *e, int a, int o, int d)
{
    return ((size_t)a * (size_t)e->nobj + (size_t)o) * (size_t)e->ndev + (size_t)d;
}

static int prepare_linear(hm_estimator_t *e)
{
    int D = e->ndev, O = e->nobj, P = e->nphase, s = e->ref;
    e->lin_phase_base = calloc((size_t)P, sizeof(double));
    e->lin_phase_gain = calloc((size_t)P * O * D, sizeof(double));
    e->lin_var = calloc((size_t)P * O * D, sizeof(double));
    if (!e->lin_phase_base || !e->lin_phase_gain || !e->lin_var)
        return -ENOMEM;
    for (int w = 0; w < e->nwin; w++) {
        int p = e->win[w].phase;
        double ts = e->t[(size_t)w * D + s], n = 0;
        e->lin_phase_base[p] += ts;
        /* Memory samples, or all samples in a window that has none. */
        int all = 0;
        for (int o = 0; o < O; o++)
            n += hm__est_cell(e, w, o, s)->m;
        if (n <= 0) {
            all = 1;
            for (int o = 0; o < O; o++)
                n += hm__est_cell(e, w, o, s)->n;
        }
        if (n <= 0)
            continue;
        for (int d = 0; d < D; d++) {
            double td = e->t[(size_t)w * D + d];
            if (d == s || !(ts > TUNE(T_CUTOFF) * td))
                continue;
            double g = ts - td;
            for (int o = 0; o < O; o++) {
                double c = all ? hm__est_cell(e, w, o, s)->n : hm__est_cell(e, w, o, s)->m;
                if (c <= 0)
                    continue;
                e->lin_phase_gain[ix3(e, p, o, d)] += g * c / n;
                e->lin_var[ix3(e, p, o, d)] += (g / n) * (g / n) * c;
            }
        }
    }
    return 0;
}

/* Channel time of device d for this thread to read and write back bytes. */
static inline double chan_time(const hm_estimator_t *e, int d, double rd, double wr)
{
    if (!(e->bw[d] > 0))
        return 0;
    return rd / e->bw[d] + wr / (e->wbw[d] > 0 ? e->wbw[d] : e->bw[d]);
}

/* Device d's latency at utilisation u over its idle latency: its
 * loaded-latency curve (from the machine description, as MLC measures it),
 * linear between points, flat past the last; 1 without a curve. */
static double ll_factor(const hm_estimator_t *e, int d, double u)
{
    int n = e->ll_n[d];
    if (!n || !(e->lat_ns[d] > 0))
        return 1;
    double pu = 0, pn = e->lat_ns[d];
    for (int k = 0; k < n; k++) {
        double ku = e->ll[d][0][k], kn = e->ll[d][1][k];
        if (u <= ku)
            return (pn + (kn - pn) * (u - pu) / (ku - pu)) / e->lat_ns[d];
        pu = ku, pn = kn;
    }
    return pn / e->lat_ns[d];
}

/* Device d's latency in class c at utilisation u over its idle latency:
 * its curve where the trace header has one, else the queue its own run
 * showed (queue_factor). */
static double load_factor(const hm_estimator_t *e, int c, int d, double u)
{
    double q = e->dm.kq ? e->dm.kq[(size_t)c * e->ndev + d] : 0;
    if (!(q > 0))
        return ll_factor(e, d, u);
    u = u < 1 - 1e-9 ? u : 1 - 1e-9;
    return 1 + q * u / (1 - u);
}

/* A window of a class's profile: its latency share a, channel share b and
 * their ratio r. */
typedef struct {
    double r, a, b;
} prof_t;

static int prof_cmp(const void *x, const void *y)
{
    double a = ((const prof_t *)x)->r, b = ((const prof_t *)y)->r;
    return a < b ? -1 : a > b;
}

/* Class c's time from its latency side lat and its busiest channel time
 * bp, summed over its windows: sum_w max(a_w lat, b_w bp), a_w and b_w the
 * window's shares of each side. Windows whose channel demand comes in
 * bursts are channel-bound while the others are not, so a class is slower
 * than the max of its sums, max(lat, bp), which it equals when every
 * window has the same mix. */
static double profile_time(const hm_estimator_t *e, int c, double lat, double bp)
{
    const hm__est_default_t *m = &e->dm;
    double mx = lat > bp ? lat : bp;
    if (m->g_off[c + 1] <= m->g_off[c] || !(lat > 0) || !(bp > 0))
        return mx;
    int lo = m->g_off[c], hi = m->g_off[c + 1];
    double rho = bp / lat;
    if (rho <= m->g_r[lo])
        return mx; /* every window on its latency side */
    /* windows before the first with g_r >= rho are channel-bound */
    int a = lo, b = hi;
    while (a < b) {
        int mid = (a + b) / 2;
        if (m->g_r[mid] < rho)
            a = mid + 1;
        else
            b = mid;
    }
    double A = a > lo ? m->g_a[a - 1] : 0, B = a > lo ? m->g_b[a - 1] : 0;
    double t = bp * B + lat * (1 - A);
    return t > mx ? t : mx;
}

/* Builds class c's window profile at g_*[gn...] from the windows' times
 * in run lr (latency side) and run br (channel side); returns the next
 * free entry (gn again when either run has no time in the class). */
static int build_profile(hm_estimator_t *e, int c, int lr, int br, int gn)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, n = 0;
    double sa = 0, sb = 0;
    for (int j = m->cls_woff[c]; j < m->cls_woff[c + 1]; j++) {
        int w = m->cls_win[j];
        sa += e->t[(size_t)w * D + lr], sb += e->t[(size_t)w * D + br], n++;
    }
    if (!(sa > 0) || !(sb > 0))
        return gn;
    prof_t *pr = calloc((size_t)n, sizeof *pr);
    if (!pr)
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        int w = m->cls_win[m->cls_woff[c] + i];
        pr[i].a = e->t[(size_t)w * D + lr] / sa, pr[i].b = e->t[(size_t)w * D + br] / sb;
        pr[i].r = pr[i].b > 0 ? pr[i].a / pr[i].b : INFINITY;
    }
    qsort(pr, (size_t)n, sizeof *pr, prof_cmp);
    double ca = 0, cb = 0;
    for (int i = 0; i < n; i++) {
        ca += pr[i].a, cb += pr[i].b;
        m->g_r[gn + i] = pr[i].r, m->g_a[gn + i] = ca, m->g_b[gn + i] = cb;
    }
    free(pr);
    return gn + n;
}

/* The channel side of a class from the channel time of its traffic per
 * device (y) and their max (bp): bp, unless a calibration fitted an overlap
 * w below 1, which adds the share 1 - w of the other devices' channel time
 * (hm_estimator_calibrate). */
static inline double channel_side(const hm_estimator_t *e, const double *y, double bp)
{
    double w = e->dm.overlap;
    if (!(w < 1))
        return bp;
    double sum = 0;
    for (int d = 0; d < e->ndev; d++)
        sum += y[d];
    return bp + (1 - w) * (sum - bp);
}

/* The latency side at time t: C + sum_d lpd_d x load factor at y_d / t. */
static double lat_side_at(const hm_estimator_t *e, int c, double C, const double *lpd, const double *y, double t)
{
    double lp = C;
    for (int d = 0; d < e->ndev; d++)
        lp += lpd[d] > 0 ? lpd[d] * load_factor(e, c, d, y[d] < t ? y[d] / t : 1) : 0;
    return lp;
}

/* Class c's time from its latency terms per device (unloaded: lpd, ns) and
 * the channel time of its traffic per device (y): profile_time of the
 * latency side, C + sum_d lpd_d x loaded factor at the device's
 * utilisation y_d / t, and of the channel side bp = max_d y_d. The
 * utilisation depends on the time, so where a device's latency loads (a
 * curve, or the queue its run showed) the latency side is the fixed point
 * t = lat(t), found by bisection (the latency part falls as t grows), and
 * it is sought at or above the channel time as well as the unloaded
 * latency side: the class takes at least bp, and at that time the busiest
 * device's channels are full, so its loads wait as its curve (or queue)
 * says there. Sought above the unloaded latency side alone, the time
 * jumped where the two sides cross: a placement whose channel side was
 * just above its latency side was timed with unloaded latencies, one just
 * below with latencies loaded to the curve's end (BabelStream on optane,
 * a fifth of the pages on the slow device: 0.190 against 0.226 s for a
 * 1.5% change of one array's traffic; test_loaded_at_channels). With
 * loaded latencies that stay below t at t = bp, the class is timed by its
 * channels. */
static double lat_bw_time(const hm_estimator_t *e, int c, double C, const double *lpd, const double *y)
{
    int D = e->ndev, loads = 0;
    double lo = C, bp = 0;
    for (int d = 0; d < D; d++) {
        lo += lpd[d];
        bp = y[d] > bp ? y[d] : bp;
        loads |= lpd[d] > 0 && (e->ll_n[d] > 0 || (e->dm.kq && e->dm.kq[(size_t)c * D + d] > 0));
    }
    bp = channel_side(e, y, bp);
    if (!loads)
        return profile_time(e, c, lo, bp);
    lo = lo > bp ? lo : bp;
    double l = lat_side_at(e, c, C, lpd, y, lo);
    if (!(l > lo))
        return profile_time(e, c, l, bp);
    double hi = 2 * lo; /* a queue's latency grows without bound: double until lat(hi) <= hi */
    for (int it = 0; it < 64 && lat_side_at(e, c, C, lpd, y, hi) > hi; it++)
        lo = hi, hi *= 2;
    for (int it = 0; it < 100 && hi - lo > 1e-7 * hi; it++) {
        double t = (lo + hi) / 2;
        if (lat_side_at(e, c, C, lpd, y, t) > t)
            lo = t;
        else
            hi = t;
    }
    return profile_time(e, c, (lo + hi) / 2, bp);
}

/* ------------------------------------------------------------- classes */

/* A phase is cut into classes when its instances (the stretches between
 * its markers, aligned in every run) fall into groups with clearly
 * different traffic mixes: a Jacobi sweep between two grids reads one and
 * writes the other, then the other way round, so with one grid on a slow
 * device half the sweeps wait for its write-backs while the other half
 * hardly use it. Timed as one class, the phase would let those write-backs
 * overlap the other half's traffic to the fast device, and a placement that
 * sends one grid to a slow device would look cheaper than it is. Windows
 * inside an instance are not split by their mix (splitting them made
 * `coupled` on knl-mcdram 11% off instead of 3%: a window's mix is noisy
 * and its alignment across runs only as fine as the instruction counters),
 * only by their regime (split_regimes). An instance's mix
 * is its objects' shares of its sampled L1 misses, loads and stores apart,
 * over all runs. A class is split in two (2-means from its two most
 * distant instances) while the split leaves at most split_sse of the
 * spread within the class, the two mixes differ by at least split_l1 of
 * the traffic, and each half has at least split_min of the phase's
 * instances (and 2), as long as the largest class splits. Instances with too
 * few samples to say join the class of the instance before them. */

static double dist2(const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return s;
}

static void centroid(const double *sig, int dim, const int *ix, int n, double *c)
{
    memset(c, 0, (size_t)dim * sizeof *c);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < dim; k++)
            c[k] += sig[(size_t)ix[i] * dim + k];
    for (int k = 0; k < dim && n > 0; k++)
        c[k] /= n;
}

/* The probability that a 2-means split is the data's, not its sampling's:
 * Phi((split_sse - R) / sigma_R) x Phi((l1 - split_l1) / sigma_l1), R the
 * share of the spread the split keeps and l1 the halves' distance. Each
 * sigma is the sampling error of its figure over the points (the delta
 * method, the points taken as independent draws): R = S1 / S0 is a ratio of
 * sums of squared distances, to the point's half's mean (q1) and to the
 * class's (q0), so Var R = n / (n - 1) sum_i (q1_i - R q0_i)^2 / S0^2 (the
 * means minimise both sums, so to first order their own error does not
 * move them); l1 = sum_k |a_k - b_k| is a distance between two means, so
 * Var l1 = sum_k (s2_A,k / n_A + s2_B,k / n_B), s2 the halves' variances. A
 * sigma of 0 (points that agree exactly) gives the step itself. */
static double phi(double z)
{
    return 0.5 * erfc(-z / sqrt(2.0));
}

static double step_or_phi(double margin, double sigma, int strict)
{
    if (sigma > 0 && isfinite(sigma))
        return phi(margin / sigma);
    return strict ? margin > 0 : margin >= 0;
}

/* Far from a threshold (a probability below this, or above 1 minus it) a
 * decision is taken as made: one preparation, as before the blend. A
 * solver setting: it bounds what is left out at a thousandth of the
 * difference between the two preparations. */
#define BLEND_EPS 1e-3
/* At most this many blended decisions per phase cut (classify); beyond it
 * a decision is taken by its likelier side. */
#define BLEND_MAX 8

/* Tries to split the n points in ix (reordered: the first *na form one
 * half); returns 1 when the split is kept with probability *p (1 without
 * the blend, or far enough from the thresholds), 0 when it is not (or only
 * with a probability below BLEND_EPS). */
static int bisect(const double *sig, int dim, int *ix, int n, int minw, int *na, double *scratch, double *p)
{
    double *c0 = scratch, *ca = c0 + dim, *cb = ca + dim;
    int8_t *side = (int8_t *)(cb + dim);
    *p = 0;
    if (n < 2 * minw)
        return 0;
    centroid(sig, dim, ix, n, c0);
    double sse0 = 0, far = -1;
    int a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        double q = dist2(&sig[(size_t)ix[i] * dim], c0, dim);
        sse0 += q;
        if (q > far)
            far = q, a = i;
    }
    if (!(sse0 > 0))
        return 0;
    far = -1;
    for (int i = 0; i < n; i++) {
        double q = dist2(&sig[(size_t)ix[i] * dim], &sig[(size_t)ix[a] * dim], dim);
        if (q > far)
            far = q, b = i;
    }
    memcpy(ca, &sig[(size_t)ix[a] * dim], (size_t)dim * sizeof *ca);
    memcpy(cb, &sig[(size_t)ix[b] * dim], (size_t)dim * sizeof *cb);
    memset(side, -1, (size_t)n);
    int nA = 0;
    for (int it = 0; it < 12; it++) {
        int changed = 0;
        nA = 0;
        for (int i = 0; i < n; i++) {
            const double *x = &sig[(size_t)ix[i] * dim];
            int8_t sd = dist2(x, cb, dim) < dist2(x, ca, dim);
            changed |= sd != side[i];
            side[i] = sd;
            nA += !sd;
        }
        if (!changed || nA == 0 || nA == n)
            break;
        memset(ca, 0, (size_t)dim * sizeof *ca);
        memset(cb, 0, (size_t)dim * sizeof *cb);
        for (int i = 0; i < n; i++) {
            double *c = side[i] ? cb : ca;
            for (int k = 0; k < dim; k++)
                c[k] += sig[(size_t)ix[i] * dim + k];
        }
        for (int k = 0; k < dim; k++)
            ca[k] /= nA, cb[k] /= n - nA;
    }
    double sse1 = 0, l1 = 0;
    for (int i = 0; i < n; i++)
        sse1 += dist2(&sig[(size_t)ix[i] * dim], side[i] ? cb : ca, dim);
    for (int k = 0; k < dim; k++)
        l1 += fabs(ca[k] - cb[k]);
    if (nA < minw || n - nA < minw) {
        HM_DEBUG("estimate: bisect %d points (min %d): halves %d and %d, too small", n, minw, nA, n - nA);
        return 0;
    }
    /* Sampling errors of the kept spread and of the halves' distance. */
    double R = sse1 / sse0, vr = 0, vl = 0;
    for (int i = 0; i < n; i++) {
        const double *x = &sig[(size_t)ix[i] * dim];
        double q = dist2(x, side[i] ? cb : ca, dim) - R * dist2(x, c0, dim);
        vr += q * q;
    }
    vr = n > 1 ? vr * n / (n - 1) / (sse0 * sse0) : 0;
    for (int k = 0; k < dim; k++) {
        double sa = 0, sb = 0;
        for (int i = 0; i < n; i++) {
            double v = sig[(size_t)ix[i] * dim + k] - (side[i] ? cb[k] : ca[k]);
            if (side[i])
                sb += v * v;
            else
                sa += v * v;
        }
        vl += (nA > 1 ? sa / (nA - 1) / nA : 0) + (n - nA > 1 ? sb / (n - nA - 1) / (n - nA) : 0);
    }
    double pr;
    if (RULE(R_BLEND_SPLITS))
        pr = step_or_phi(TUNE(T_SPLIT_SSE) - R, sqrt(vr), 1) * step_or_phi(l1 - TUNE(T_SPLIT_L1), sqrt(vl), 0);
    else
        pr = sse1 < TUNE(T_SPLIT_SSE) * sse0 && !(l1 < TUNE(T_SPLIT_L1));
    HM_DEBUG("estimate: bisect %d points (min %d): halves %d and %d, spread kept %.3f +- %.3f, halves %.3f +- %.3f "
             "apart: split with probability %.4f",
             n, minw, nA, n - nA, R, sqrt(vr), l1, sqrt(vl), pr);
    if (!(pr >= BLEND_EPS))
        return 0;
    *p = pr > 1 - BLEND_EPS ? 1 : pr;
    /* Stable partition: the first half keeps the windows' order. */
    int *tmp = calloc((size_t)n, sizeof *tmp), j = 0;
    if (!tmp)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        if (!side[i])
            tmp[j++] = ix[i];
    for (int i = 0; i < n; i++)
        if (side[i])
            tmp[j++] = ix[i];
    memcpy(ix, tmp, (size_t)n * sizeof *ix);
    free(tmp);
    *na = nA;
    return 1;
}

/* Classes while they are built: each its phase, weight, regime sibling and
 * windows (ascending). */
typedef struct {
    int n, cap;
    int *phase, *sib, *len;
    int **win;
    double *w;
} cls_build_t;

/* Adds a class of the len windows in win (taken over, freed on failure);
 * its index, or -ENOMEM. */
static int cb_add(cls_build_t *b, int phase, double w, int *win, int len)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        int *ph = realloc(b->phase, (size_t)cap * sizeof *ph);
        if (ph)
            b->phase = ph;
        int *sb = realloc(b->sib, (size_t)cap * sizeof *sb);
        if (sb)
            b->sib = sb;
        int *ln = realloc(b->len, (size_t)cap * sizeof *ln);
        if (ln)
            b->len = ln;
        int **wn = realloc(b->win, (size_t)cap * sizeof *wn);
        if (wn)
            b->win = wn;
        double *ww = realloc(b->w, (size_t)cap * sizeof *ww);
        if (ww)
            b->w = ww;
        if (!ph || !sb || !ln || !wn || !ww) {
            free(win);
            return -ENOMEM;
        }
        b->cap = cap;
    }
    b->phase[b->n] = phase, b->sib[b->n] = -1, b->len[b->n] = len, b->win[b->n] = win, b->w[b->n] = w;
    return b->n++;
}

static void cb_free(cls_build_t *b)
{
    for (int c = 0; c < b->n; c++)
        free(b->win[c]);
    free(b->phase);
    free(b->sib);
    free(b->len);
    free(b->win);
    free(b->w);
}

/* Regimes inside a class: the windows of an instance can wait for
 * different things. A Gauss-Seidel sweep forward streams its matrix, which
 * the prefetcher keeps ahead of (few loads reach memory: the channels bound
 * it), and backward misses on every line (most loads reach memory: as many
 * misses in flight as the core holds bound it); a time step of rtm runs a
 * stencil loop over two wavefields and, every few steps, an imaging loop
 * over one of them and two other arrays. Timed as one class, the max of
 * the summed latency and channel terms takes the larger sum for the whole
 * instance, while each part pays its own bound: a placement that sends
 * part of the traffic to a slower device then looks cheaper than it is.
 * Windows are aligned by instruction counts where the traces carry them
 * (the same work in every run), so a window's regime is what its sampled
 * L1 misses, over all runs, say: the share that memory served, and each
 * object's share of them. A class is split once in two by that (2-means,
 * at least split_l1 apart, leaving at most split_sse of the spread, each
 * half at least split_min of the class's windows and 2); windows with
 * fewer than mix_samples misses take the regime of the window before them
 * in their instance. Without instruction counts windows are a stretch of
 * time and are not split. (Splitting the instances' own classes by window
 * mix, up to four times, made `coupled` on knl-mcdram 11% off; one
 * split of instruction-aligned windows did not.) A split kept with a
 * probability p between the blend's edges (bisect) keeps the class whole
 * at weight (1 - p) beside its two regimes at weight p. */
static int split_regimes(hm_estimator_t *e, cls_build_t *b)
{
    int W = e->nwin, O = e->nobj, D = e->ndev, n0 = b->n, rc = 0;
    int dim = 1 + O;
    double *sig = calloc((size_t)W * dim + 1, sizeof *sig), *tot = calloc((size_t)W + 1, sizeof *tot);
    double *scratch = calloc((size_t)3 * dim + (size_t)W / sizeof(double) + 8, sizeof *scratch);
    int *ix = calloc((size_t)W + 1, sizeof *ix);
    int8_t *side = calloc((size_t)W + 1, 1);
    if (!sig || !tot || !scratch || !ix || !side) {
        rc = -ENOMEM;
        goto out;
    }
    for (int w = 0; w < W; w++) {
        double mm = 0, *x = &sig[(size_t)w * dim];
        for (int o = 0; o < O; o++)
            for (int d = 0; d < D; d++) {
                const hm__est_cell_t *c = hm__est_cell(e, w, o, d);
                mm += c->mm;
                tot[w] += c->m;
                x[1 + o] += c->m;
            }
        x[0] = tot[w] > 0 ? mm / tot[w] : 0;
        for (int o = 0; o < O && tot[w] > 0; o++)
            x[1 + o] /= tot[w];
    }
    for (int c = 0; c < n0; c++) {
        int n = 0, all = b->len[c], timed = 0;
        const int *cw = b->win[c];
        for (int i = 0; i < all; i++) {
            int w = cw[i];
            timed |= !(e->win[w].instructions > 0);
            if (tot[w] >= TUNE(T_MIX_SAMPLES))
                ix[n++] = w;
        }
        if (timed)
            continue;
        int minw = (int)ceil(TUNE(T_SPLIT_MIN) * all), na;
        minw = minw < 2 ? 2 : minw;
        double p;
        int split = bisect(sig, dim, ix, n, minw, &na, scratch, &p);
        if (split < 0) {
            rc = split;
            goto out;
        }
        if (!split) {
            HM_DEBUG("estimate: class %d (%s): %d windows, %d with samples, no regime split", c,
                     e->phase_name[b->phase[c]], all, n);
            continue;
        }
        for (int i = 0; i < n; i++)
            side[ix[i]] = i >= na;
        /* Windows with too few samples: the regime of the window before
         * them in their instance, else the first half's. */
        int prev = 0, nb = 0;
        for (int i = 0; i < all; i++) {
            int w = cw[i];
            if (w == 0 || e->win[w].region != e->win[w - 1].region)
                prev = 0;
            if (tot[w] >= TUNE(T_MIX_SAMPLES))
                prev = side[w];
            else
                side[w] = (int8_t)prev;
            nb += side[w];
        }
        int *wa = malloc((size_t)(all - nb + 1) * sizeof *wa), *wb = malloc((size_t)(nb + 1) * sizeof *wb);
        if (!wa || !wb) {
            free(wa);
            free(wb);
            rc = -ENOMEM;
            goto out;
        }
        for (int i = 0, ja = 0, jb = 0; i < all; i++) {
            if (side[cw[i]])
                wb[jb++] = cw[i];
            else
                wa[ja++] = cw[i];
        }
        int ca, cb2, ph = b->phase[c];
        double wt = b->w[c];
        if (p >= 1) {
            /* The class keeps the first regime, the second is a new class. */
            free(b->win[c]);
            b->win[c] = wa, b->len[c] = all - nb;
            ca = c;
        } else {
            b->w[c] = wt * (1 - p);
            if ((ca = cb_add(b, ph, wt * p, wa, all - nb)) < 0) {
                free(wb);
                rc = ca;
                goto out;
            }
        }
        if ((cb2 = cb_add(b, ph, p >= 1 ? wt : wt * p, wb, nb)) < 0) {
            rc = cb2;
            goto out;
        }
        b->sib[ca] = cb2, b->sib[cb2] = ca;
        HM_DEBUG("estimate: phase %s: windows split in two regimes by what their misses say (weight %.4f)",
                 e->phase_name[ph], p);
    }
out:
    free(sig);
    free(tot);
    free(scratch);
    free(ix);
    free(side);
    return rc;
}

/* Adds phase p's classes of one cut: the k ranges [start[j], start[j] +
 * len[j]) of ix (regions with enough samples), each at weight w; regions
 * with too few samples take the class of the region before them in the
 * phase (else the cut's first), and each class takes its regions'
 * windows. 0 or -ENOMEM. */
static int add_cut(hm_estimator_t *e, cls_build_t *b, int p, const int *ix, const int *start, const int *len, int k,
                   double w, const int *rphase, const double *tot, int R, int *rcls, int *cnt)
{
    int base = b->n, W = e->nwin;
    for (int j = 0; j < k; j++)
        for (int i = start[j]; i < start[j] + len[j]; i++)
            rcls[ix[i]] = j;
    int prev = 0;
    for (int r = 0; r < R; r++) {
        if (rphase[r] != p)
            continue;
        if (tot[r] >= TUNE(T_MIX_SAMPLES))
            prev = rcls[r];
        else
            rcls[r] = prev;
    }
    memset(cnt, 0, (size_t)k * sizeof *cnt);
    for (int v = 0; v < W; v++)
        if (rphase[e->win[v].region] == p)
            cnt[rcls[e->win[v].region]]++;
    for (int j = 0; j < k; j++) {
        int *wl = malloc((size_t)(cnt[j] + 1) * sizeof *wl), rc;
        if (!wl)
            return -ENOMEM;
        if ((rc = cb_add(b, p, w, wl, 0)) < 0)
            return rc;
    }
    for (int v = 0; v < W; v++) {
        int r = e->win[v].region;
        if (rphase[r] == p) {
            int c = base + rcls[r];
            b->win[c][b->len[c]++] = v;
        }
    }
    return 0;
}

/* Classes of windows (m->cls_*, m->ncls). 0 or -ENOMEM (what was allocated
 * is e's). A split of a phase's instances kept with a probability p
 * between the blend's edges (bisect) ends one cut of the phase there, at
 * weight 1 - p, and the cut goes on splitting at weight p: the classes of
 * all cuts, weighted, time the phase together. */
static int classify(hm_estimator_t *e)
{
    hm__est_default_t *m = &e->dm;
    int P = e->nphase, O = e->nobj, D = e->ndev, W = e->nwin, dim = 2 * O, R = 0, rc = 0;
    cls_build_t b = {0};
    for (int w = 0; w < W; w++)
        R = e->win[w].region + 1 > R ? e->win[w].region + 1 : R;
    double *sig = calloc((size_t)R * dim + 1, sizeof *sig), *tot = calloc((size_t)R + 1, sizeof *tot);
    double *scratch = calloc((size_t)3 * dim + (size_t)R / sizeof(double) + 2, sizeof *scratch);
    int *ix = calloc((size_t)R + 1, sizeof *ix), *rphase = calloc((size_t)R + 1, sizeof *rphase);
    int *rcls = calloc((size_t)R + 1, sizeof *rcls), *cnt = calloc((size_t)R + 1, sizeof *cnt);
    int *start = calloc((size_t)R + 1, sizeof *start), *len = calloc((size_t)R + 1, sizeof *len);
    if (!sig || !tot || !scratch || !ix || !rphase || !rcls || !cnt || !start || !len) {
        rc = -ENOMEM;
        goto out;
    }
    for (int r = 0; r < R; r++)
        rphase[r] = -1;
    for (int w = 0; w < W; w++) {
        int r = e->win[w].region;
        double *x = &sig[(size_t)r * dim];
        rphase[r] = e->win[w].phase;
        for (int o = 0; o < O; o++)
            for (int d = 0; d < D; d++) {
                const hm__est_cell_t *c = hm__est_cell(e, w, o, d);
                x[o] += c->m - c->sm;
                x[O + o] += c->sm;
                tot[r] += c->m;
            }
    }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < dim && tot[r] > 0; k++)
            sig[(size_t)r * dim + k] /= tot[r];
    for (int p = 0; p < P; p++) {
        int n = 0, all = 0, blended = 0;
        double wt = 1;
        for (int r = 0; r < R; r++)
            if (rphase[r] == p) {
                all++;
                if (tot[r] >= TUNE(T_MIX_SAMPLES))
                    ix[n++] = r;
            }
        int minw = (int)ceil(TUNE(T_SPLIT_MIN) * all);
        minw = minw < 2 ? 2 : minw;
        /* Classes of this phase: ranges [start[k], start[k] + len[k]) of ix. */
        int k = 1;
        start[0] = 0, len[0] = n;
        while (RULE(R_CLASSES)) {
            int best = -1;
            for (int j = 0; j < k; j++)
                if (best < 0 || len[j] > len[best])
                    best = j;
            double pr;
            int na, split = bisect(sig, dim, ix + start[best], len[best], minw, &na, scratch, &pr);
            if (split < 0) {
                rc = split;
                goto out;
            }
            if (!split)
                break; /* the largest class does not split: stop */
            if (pr < 1) {
                if (blended == BLEND_MAX) {
                    if (pr < 0.5)
                        break;
                } else {
                    /* The cut without this split, at its weight (the split
                     * only reordered the range). */
                    if ((rc = add_cut(e, &b, p, ix, start, len, k, wt * (1 - pr), rphase, tot, R, rcls, cnt)) < 0)
                        goto out;
                    wt *= pr;
                    blended++;
                }
            }
            start[k] = start[best] + na;
            len[k] = len[best] - na;
            len[best] = na;
            k++;
        }
        if ((rc = add_cut(e, &b, p, ix, start, len, k, wt, rphase, tot, R, rcls, cnt)) < 0)
            goto out;
        if (k > 1)
            HM_DEBUG("estimate: phase %s: %d classes of its %d instances by traffic mix (%d cuts blended)",
                     e->phase_name[p], k, all, blended);
    }
    if (RULE(R_REGIMES) && (rc = split_regimes(e, &b)) < 0)
        goto out;
    /* Flattened into the model. */
    int C = b.n, tw = 0;
    for (int c = 0; c < C; c++)
        tw += b.len[c];
    m->cls_phase = calloc((size_t)C + 1, sizeof *m->cls_phase);
    m->cls_sib = calloc((size_t)C + 1, sizeof *m->cls_sib);
    m->cls_w = calloc((size_t)C + 1, sizeof *m->cls_w);
    m->cls_woff = calloc((size_t)C + 1, sizeof *m->cls_woff);
    m->cls_win = calloc((size_t)tw + 1, sizeof *m->cls_win);
    if (!m->cls_phase || !m->cls_sib || !m->cls_w || !m->cls_woff || !m->cls_win) {
        rc = -ENOMEM;
        goto out;
    }
    for (int c = 0, o = 0; c < C; c++) {
        m->cls_phase[c] = b.phase[c], m->cls_sib[c] = b.sib[c], m->cls_w[c] = b.w[c];
        m->cls_woff[c] = o;
        memcpy(m->cls_win + o, b.win[c], (size_t)b.len[c] * sizeof *m->cls_win);
        o += b.len[c];
        m->cls_woff[c + 1] = o;
    }
    m->ncls = C;
out:
    cb_free(&b);
    free(sig);
    free(tot);
    free(scratch);
    free(ix);
    free(rphase);
    free(rcls);
    free(cnt);
    free(start);
    free(len);
    return rc;
}

/* ----------------------------------------------- default model: steps */

/* What the default model's preparation works from, per class (c), object
 * (o) and device run (d), the class's windows summed; counts of sampled
 * events times the run's sampling period. */
typedef struct {
    double *T;                   /* (c, d): the run's time in the class */
    double *raw;                 /* (c, o, d): latency cost (ns) */
    double *nsamp, *nmiss;       /* samples and sampled L1 misses (not scaled) */
    double *lmiss, *lmem, *smiss; /* load misses, loads memory served, store misses */
    double *hwait, *shit;        /* cache hits that waited for memory, store hits */
    double *ninst;               /* (c): instances (stretches between phase markers) */
    double *omiss;               /* (o): sampled misses over all classes and runs (fresh allocations) */
    /* (c, o), bytes: the loads' traffic up to one pass over the object per
     * instance (or what its loads took from memory, if more), the loads'
     * traffic beyond that, the reads of its store misses, its store misses
     * beyond one pass, and the write-backs of lines store hits dirtied. */
    double *lbase, *lexc, *rfo, *sexc, *dirt;
} prep_t;

/* One class's runs (summaries have at most 64 devices). */
typedef struct {
    double Br, Bw;                /* sampled bytes read and written back */
    double L[64], T[64], tau[64]; /* per run: latency cost, time, channel time of Br and Bw */
    int bound[64];                /* per run: bandwidth-bound */
    int nu, nb;                   /* runs unbound, bound */
    double extra, shrink;         /* sums over bound runs: read bytes the samples missed, time over channel time */
    double unsampled;             /* read bytes per run the samples missed */
    double tfast;                 /* the fastest run's time */
    double nm;                    /* sampled L1 misses (not scaled), all objects and runs */
    double C, k;                  /* device-independent time, time per unit of latency cost */
} runs_t;

/* Step 1: the windows' samples summed per class. */
static int sum_windows(hm_estimator_t *e, prep_t *p)
{
    hm__est_default_t *m = &e->dm;
    int C = m->ncls, D = e->ndev, O = e->nobj;
    size_t cod = (size_t)C * O * D, co = (size_t)C * O;
    p->T = calloc((size_t)C * D, sizeof(double));
    p->raw = calloc(cod, sizeof(double));
    p->nsamp = calloc(cod, sizeof(double));
    p->nmiss = calloc(cod, sizeof(double));
    p->lmiss = calloc(cod, sizeof(double));
    p->lmem = calloc(cod, sizeof(double));
    p->smiss = calloc(cod, sizeof(double));
    p->hwait = calloc(cod, sizeof(double));
    p->shit = calloc(cod, sizeof(double));
    p->ninst = calloc((size_t)C, sizeof(double));
    p->omiss = calloc((size_t)O, sizeof(double));
    p->lbase = calloc(co, sizeof(double));
    p->lexc = calloc(co, sizeof(double));
    p->rfo = calloc(co, sizeof(double));
    p->sexc = calloc(co, sizeof(double));
    p->dirt = calloc(co, sizeof(double));
    if (!p->T || !p->raw || !p->nsamp || !p->nmiss || !p->lmiss || !p->lmem || !p->smiss || !p->hwait || !p->shit ||
        !p->ninst || !p->omiss || !p->lbase || !p->lexc || !p->rfo || !p->sexc || !p->dirt)
        return -ENOMEM;
    /* Latency weights are core cycles: in ns through the core clock, the
     * unit of the devices' latencies and of the runs' times, which the fit
     * of C and k (k <= 1: a miss adds at most its latency) and the idle
     * part of a latency (latency_terms) compare them with. Without the
     * clock they are taken as ns, and the figures note says so. */
    const double cyc_ns = e->core_ghz > 0 ? 1 / e->core_ghz : 1;
    for (int c = 0; c < C; c++) {
        for (int j = m->cls_woff[c]; j < m->cls_woff[c + 1]; j++) {
            int w = m->cls_win[j];
            if (w == 0 || e->win[w].region != e->win[w - 1].region)
                p->ninst[c] += 1;
            for (int d = 0; d < D; d++) {
                p->T[(size_t)c * D + d] += e->t[(size_t)w * D + d];
                for (int o = 0; o < O; o++) {
                    const hm__est_cell_t *x = hm__est_cell(e, w, o, d);
                    size_t i = ix3(e, c, o, d);
                    p->raw[i] += x->x * e->period[d] * cyc_ns;
                    m->clock_needed |= x->x > 0 && !(e->core_ghz > 0);
                    p->nsamp[i] += x->n;
                    p->nmiss[i] += x->m;
                    p->lmiss[i] += (x->m - x->sm) * e->period[d];
                    p->lmem[i] += x->mm * e->period[d];
                    p->smiss[i] += x->sm * e->period[d];
                    p->hwait[i] += x->hw * e->period[d];
                    p->shit[i] += x->sh * e->period[d];
                }
            }
        }
    }
    return 0;
}

static void prep_free(prep_t *p)
{
    double **all[] = {&p->T, &p->raw, &p->nsamp, &p->nmiss, &p->lmiss, &p->lmem, &p->smiss, &p->hwait,
                      &p->shit, &p->ninst, &p->omiss, &p->lbase, &p->lexc, &p->rfo, &p->sexc, &p->dirt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

/* Step 2: sampled traffic per class and object. A load that missed L1
 * and hit a lower level is either a cache hit or a line a prefetcher
 * brought from memory in time; samples cannot tell them apart one by one,
 * but an object streamed from memory has some of those hits wait for a
 * line still on its way in some run (the prefetcher falls behind on a
 * slower device), while the hits of a cache-resident object, even one
 * whose other loads go to memory at random, never wait. So an object of
 * which at least a share `streamed` of the cache hits waited, in the run
 * where the most did, is streamed: all its misses are traffic; otherwise
 * only the loads that reached memory are. Store misses (a store sample
 * says only that it missed L1) count at the same share, and each reads
 * the line and later writes it back. An object with no missing loads
 * counts all its store misses.
 *
 * A pass over an object is one miss per line of it, per instance of the
 * class, or per allocation of it where it is allocated anew more often
 * than that (a temporary array freed and allocated again every time step
 * brings fresh lines each time: its first touches come from memory, as a
 * sweep's do). The allocations go to the classes in the share of the
 * object's misses that fall there (counted once over the copies of a
 * blended class: by their weights). */
static void object_traffic(hm_estimator_t *e, prep_t *p)
{
    hm__est_default_t *m = &e->dm;
    int C = m->ncls, D = e->ndev, O = e->nobj;
    const double lb = TUNE(T_LINE_BYTES);
    for (int o = 0; o < O; o++) {
        p->omiss[o] = 0;
        for (int c = 0; c < C; c++)
            for (int d = 0; d < D; d++)
                p->omiss[o] += m->cls_w[c] * (p->lmiss[ix3(e, c, o, d)] + p->smiss[ix3(e, c, o, d)]);
    }
    for (int c = 0; c < C; c++)
        for (int o = 0; o < O; o++) {
            double rd = 0, sm = 0, ld = 0, sh = 0, wshare = 0, cm = 0, nh = 0;
            size_t co = (size_t)c * O + o;
            for (int d = 0; d < D; d++) {
                size_t i = ix3(e, c, o, d);
                if (p->lmem[i] > rd)
                    rd = p->lmem[i];
                sm += p->smiss[i] / D;
                ld += p->lmiss[i] / D;
                sh += p->shit[i] / D;
                cm += p->lmiss[i] + p->smiss[i];
                double hits = p->lmiss[i] - (p->lmem[i] - p->hwait[i]);
                if (!(hits > 0))
                    continue;
                double ws = p->hwait[i] / hits, n = hits / e->period[d]; /* n: sampled hits */
                if (ws > wshare || (ws == wshare && n > nh)) /* ties: the run with more hits */
                    wshare = ws, nh = n;
            }
            /* The waiting share is a sampled ratio: near `streamed` the
             * test is blended by the probability that the object's true
             * share lies above it (binomial error of the run's nh sampled
             * hits), and its traffic share is the blend of the two sides. */
            double ps = 0, w0 = TUNE(T_STREAMED);
            if (RULE(R_STREAMED_HITS))
                ps = RULE(R_BLEND_STREAMED) && nh > 0 ? step_or_phi(wshare - w0, sqrt(w0 * (1 - w0) / nh), 0)
                                                      : wshare >= w0;
            double mshare = ld > 0 ? fmin(1.0, rd / ld) : 1.0;
            double rho = ps + (1 - ps) * mshare;
            /* An object whose lines miss L1 at most stream_passes times per
             * instance, and some of whose loads reach memory, is swept, not
             * reused: its cache hits are lines a prefetcher brought in
             * time. */
            double lines = (double)e->obj[o].size / lb, passes = p->ninst[c];
            if (RULE(R_FRESH_ALLOCS) && p->omiss[o] > 0)
                passes = fmax(passes, (double)e->obj[o].allocations * cm / p->omiss[o]);
            if (RULE(R_SWEPT) && lines > 0 && rd > 0 && ld + sm <= TUNE(T_STREAM_PASSES) * passes * lines)
                rho = 1;
            m->bytes[co] = rho * (ld + sm) * lb;
            double first = fmin(rho * ld, fmax(rd, passes * lines)); /* one pass, or what reached memory */
            p->lbase[co] = first * lb;
            p->lexc[co] = (rho * ld - first) * lb;
            p->rfo[co] = rho * sm * lb;
            /* An object that only stores (no load missed): its store misses
             * beyond one pass per instance revisited lines that L1 had
             * lost, most likely to L2 (a scatter over more lines than L1
             * holds). */
            p->sexc[co] = ld > 0 ? 0 : fmax(0.0, rho * sm - passes * lines) * lb;
            /* Stores that hit L1 dirty lines that loads brought in (a
             * read-modify-write sweep: u[i] = f(u[i], ...)); each such line
             * is written back once, however many stores hit it. Those
             * write-backs are the object's, not prefetches: counted here,
             * they are not spread over the objects with the traffic the
             * samples miss. Lines: the store hits over store_hits_per_line
             * (8-byte elements stored one after another), and at most the
             * lines its loads took from memory (all its misses for a stream
             * whose hits waited; a line a store miss brought is already
             * counted). The swept rule alone does not say the lines left
             * the caches: a small array read and written once per sweep
             * stays in them. */
            double rw = ps + (1 - ps) * (ld > 0 ? mshare : 0.0);
            double dirty = RULE(R_DIRTY_LINES) ? fmin(rw * ld, sh / TUNE(T_STORE_HITS_PER_LINE)) : 0;
            m->wbytes[co] = (rho * sm + dirty) * lb;
            p->dirt[co] = dirty * lb;
            HM_DEBUG("estimate: class %s object %d: memory share %.3f, waiting hits %.3f -> traffic share %.3f, "
                     "lines dirtied by store hits %.4g, passes %.4g", e->phase_name[m->cls_phase[c]], o,
                     ld > 0 ? rd / ld : 1.0, wshare, rho, dirty, passes);
        }
}

/* Step 3: a line dirtied by store hits is written back when something
 * evicts it, not when it is stored to: a histogram that stays in the
 * caches while its phase streams other arrays through them is written back
 * as they pass, over the whole instance, and the write-backs are posted:
 * they take channel time, not the core's. Between the two regimes of a
 * phase (split_regimes) those write-backs are shared by the regimes' time
 * (summed over the runs), not charged to the windows whose stores dirtied
 * the lines (test_dirty_lines_posted). Store misses keep their regime: a
 * stream or a scatter of stores writes back lines as it goes. */
static void share_posted_writebacks(hm_estimator_t *e, const prep_t *p)
{
    hm__est_default_t *m = &e->dm;
    int C = m->ncls, D = e->ndev, O = e->nobj;
    for (int c = 0; c < C && RULE(R_POSTED_WB); c++) {
        int sb = m->cls_sib[c];
        if (sb < 0)
            continue;
        double tc = 0, ts = 0;
        for (int d = 0; d < D; d++)
            tc += p->T[(size_t)c * D + d], ts += p->T[(size_t)sb * D + d];
        if (!(tc + ts > 0))
            continue;
        for (int o = 0; o < O; o++) {
            size_t i = (size_t)c * O + o, j = (size_t)sb * O + o;
            m->wbytes[i] += (p->dirt[i] + p->dirt[j]) * tc / (tc + ts) - p->dirt[i];
        }
    }
}

/* Step 4: class c's runs: time, latency cost and the channel time of the
 * sampled traffic. */
static void class_runs(hm_estimator_t *e, const prep_t *p, int c, runs_t *r)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj;
    memset(r, 0, sizeof *r);
    for (int o = 0; o < O; o++) {
        r->Br += m->bytes[(size_t)c * O + o];
        r->Bw += m->wbytes[(size_t)c * O + o];
    }
    r->tfast = INFINITY;
    for (int d = 0; d < D; d++) {
        for (int o = 0; o < O; o++)
            r->L[d] += p->raw[ix3(e, c, o, d)], r->nm += p->nmiss[ix3(e, c, o, d)];
        r->T[d] = p->T[(size_t)c * D + d];
        if (r->T[d] > 0 && r->T[d] < r->tfast)
            r->tfast = r->T[d];
        /* Time the device's channels were busy for this thread: reads at
         * the read share, write-backs at the write share. */
        r->tau[d] = chan_time(e, d, r->Br, r->Bw);
    }
}

/* Step 5: no run can have kept its channels busy longer than it ran:
 * sampled traffic beyond that (store misses to a line already on its way
 * count again, for one) is scaled down until every run fits. The loads'
 * share is the uncertain part (a miss that hit a cache counts as traffic
 * for a streamed object), while every store miss and every dirtied line
 * is written back once: the loads' traffic is scaled down, and the whole
 * only if the stores alone do not fit. Of the loads, those beyond one
 * pass over the object per instance go first: a line missed again within
 * an instance (a stencil's neighbour planes) more likely came from a cache
 * than from memory. */
static void traffic_within_runs(hm_estimator_t *e, prep_t *p, int c, runs_t *r)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj;
    double Lb = 0, Lx = 0, R = 0, Se = 0, cap = INFINITY, *Tc = r->T, *tau = r->tau;
    if (!RULE(R_TRAFFIC_IN_RUN))
        return;
    for (int o = 0; o < O; o++) {
        Lb += p->lbase[(size_t)c * O + o];
        Lx += p->lexc[(size_t)c * O + o];
        R += p->rfo[(size_t)c * O + o];
        Se += p->sexc[(size_t)c * O + o];
    }
    /* Budget per over run, in read bytes at its read share: the store
     * excess (read and written back) goes first, then the loads beyond
     * one pass, then the loads' first pass. */
    int over = 0;
    double sf = 1;
    for (int d = 0; d < D; d++)
        if (tau[d] > Tc[d] && Tc[d] > 0) {
            over = 1;
            double rb = 1 / e->bw[d], wb = 1 / (e->wbw[d] > 0 ? e->wbw[d] : e->bw[d]);
            double avail = Tc[d] - (R - Se) * rb - (r->Bw - Se) * wb - (Lb + Lx) * rb;
            if (avail < Se * (rb + wb))
                sf = fmin(sf, Se > 0 ? fmax(0.0, avail / (Se * (rb + wb))) : 1);
        }
    if (RULE(R_STORE_EXCESS) && over && Se > 0 && sf < 1) {
        for (int o = 0; o < O; o++) {
            size_t i = (size_t)c * O + o;
            p->rfo[i] -= p->sexc[i] * (1 - sf);
            m->bytes[i] -= p->sexc[i] * (1 - sf);
            m->wbytes[i] -= p->sexc[i] * (1 - sf);
        }
        R -= Se * (1 - sf), r->Br -= Se * (1 - sf), r->Bw -= Se * (1 - sf);
        for (int d = 0; d < D; d++)
            tau[d] = chan_time(e, d, r->Br, r->Bw);
    }
    for (int d = 0; d < D; d++)
        if (tau[d] > Tc[d] && Tc[d] > 0)
            cap = fmin(cap, (Tc[d] - r->Bw / (e->wbw[d] > 0 ? e->wbw[d] : e->bw[d])) * e->bw[d] - R);
    if (over && cap > 0) {
        double xf = cap >= Lb + Lx ? 1 : cap >= Lb ? (Lx > 0 ? (cap - Lb) / Lx : 1) : 0;
        double bf = cap >= Lb ? 1 : cap / Lb;
        for (int o = 0; o < O; o++)
            m->bytes[(size_t)c * O + o] = p->rfo[(size_t)c * O + o] + p->lbase[(size_t)c * O + o] * bf +
                                          p->lexc[(size_t)c * O + o] * xf;
        r->Br = R + Lb * bf + Lx * xf;
        for (int d = 0; d < D; d++)
            tau[d] = chan_time(e, d, r->Br, r->Bw);
    } else if (over) {
        double fit = 1;
        for (int d = 0; d < D; d++)
            if (tau[d] > Tc[d] && Tc[d] > 0)
                fit = fmin(fit, Tc[d] / tau[d]);
        for (int o = 0; o < O; o++) {
            m->bytes[(size_t)c * O + o] *= fit;
            m->wbytes[(size_t)c * O + o] *= fit;
        }
        r->Br *= fit, r->Bw *= fit;
        for (int d = 0; d < D; d++)
            tau[d] *= fit;
    }
}

static void mark_bound(const hm_estimator_t *e, runs_t *r, int d)
{
    r->bound[d] = 1;
    r->extra += (r->T[d] - r->tau[d]) * e->bw[d]; /* read bytes the samples missed */
    r->shrink += r->tau[d] > 0 ? r->T[d] / r->tau[d] : 1;
    r->nb++;
}

/* Step 6: which runs were bandwidth-bound. A run is when its sampled
 * traffic kept its channels busy bound_util of its time, or when it is
 * slower than another run by more than lat_margin times their ratio of
 * idle latencies (latency alone can slow a run at most by that ratio). Its
 * channels were then busy all the time, a better figure than sampled
 * misses give. */
static void find_bound_runs(const hm_estimator_t *e, runs_t *r, const int8_t *force, double *pu)
{
    int D = e->ndev;
    const double *Tc = r->T, *tau = r->tau;
    double bm = TUNE(T_BW_MATCH);
    for (int d = 0; d < D; d++) {
        int on = e->bw[d] > 0 && Tc[d] > 0, bl = 0, bb = 0;
        double u = on ? tau[d] / Tc[d] : 0;
        int b = on && u >= TUNE(T_BOUND_UTIL);
        for (int j = 0; j < D && RULE(R_BOUND_BY_LATENCY); j++)
            if (j != d && e->lat_ns[d] > 0 && e->lat_ns[j] > 0 && Tc[j] > 0 &&
                Tc[d] / Tc[j] > TUNE(T_LAT_MARGIN) * fmax(1.0, e->lat_ns[d] / e->lat_ns[j]))
                bl = e->bw[d] > 0;
        /* The utilisation test on a sampled figure: with the blend (steps
         * below), its probability, and in a preparation of one side, that
         * side. Only where no test on the runs' times binds the run. */
        for (int j = 0; j < D && RULE(R_BOUND_BY_BW) && on && !bl; j++) {
            if (j == d || !(e->bw[j] > 0) || !(Tc[j] > 0))
                continue;
            double rt = Tc[d] / Tc[j], rb = e->bw[j] / e->bw[d];
            double rl = e->lat_ns[d] > 0 && e->lat_ns[j] > 0 ? e->lat_ns[d] / e->lat_ns[j] : 0;
            bb |= rb > 1 + 2 * bm && fabs(rt / rb - 1) <= bm && (rl <= 0 || fabs(rt / rl - 1) > 2 * bm);
        }
        if (pu)
            pu[d] = on && !bl && !bb && RULE(R_BLEND_BOUND)
                        ? step_or_phi(u - TUNE(T_BOUND_UTIL), r->nm > 0 ? u / sqrt(r->nm) : 0, 0)
                        : -1;
        if (force && force[d] >= 0)
            b = force[d];
        if (b || bl)
            mark_bound(e, r, d);
    }
    /* Two runs whose times are in the ratio of their devices' bandwidths
     * (within bw_match) moved the same bytes at full rate: both are
     * bandwidth-bound, even when their samples show little traffic
     * (prefetches are not sampled). Only where the ratio of latencies is
     * not the same too, which would time a latency-bound pair alike. */
    for (int d = 0; d < D && RULE(R_BOUND_BY_BW); d++)
        for (int j = 0; j < D; j++) {
            if (j == d || r->bound[d] || !(e->bw[d] > 0) || !(e->bw[j] > 0) || !(Tc[d] > 0) || !(Tc[j] > 0))
                continue;
            double rt = Tc[d] / Tc[j], rb = e->bw[j] / e->bw[d];
            double rl = e->lat_ns[d] > 0 && e->lat_ns[j] > 0 ? e->lat_ns[d] / e->lat_ns[j] : 0;
            if (rb > 1 + 2 * bm && fabs(rt / rb - 1) <= bm && (rl <= 0 || fabs(rt / rl - 1) > 2 * bm))
                mark_bound(e, r, d);
        }
    /* The traffic the samples missed is the program's, not the device's:
     * a run that the sampled traffic showed below its share may be near it
     * once that traffic is counted too (prefetches and write-backs load a
     * fast device as well), and is then bandwidth-bound too. */
    if (RULE(R_BOUND_BY_UNSAMPLED) && r->nb > 0 && r->extra > 0) {
        double more = r->extra / r->nb;
        for (int d = 0; d < D; d++)
            if (!r->bound[d] && e->bw[d] > 0 && Tc[d] > 0 && (tau[d] + more / e->bw[d]) / Tc[d] >= TUNE(T_BOUND_UTIL))
                mark_bound(e, r, d);
    }
    for (int d = 0; d < D; d++)
        r->nu += !r->bound[d];
    r->unsampled = r->nb > 0 && r->extra > 0 ? r->extra / r->nb : 0;
}

/* Step 7: traffic the samples do not show is mostly hardware prefetches,
 * whose volume follows the demand misses they run ahead of (a stream the
 * prefetcher keeps ahead of waits for nothing, yet brings the most): it
 * goes to the objects in proportion to their sampled traffic (reads; the
 * write-backs where a class reads nothing). Sampled traffic beyond what
 * the bound runs moved is scaled down. */
static void spread_unsampled(hm_estimator_t *e, const prep_t *p, int c, runs_t *r)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj;
    for (int d = 0; d < D; d++) {
        /* Queueing per run (a debugging aid): mean latency weight of a load
         * that waited for memory, over the device's idle latency. */
        double nm = 0;
        for (int o = 0; o < O; o++)
            nm += p->lmem[ix3(e, c, o, d)];
        HM_DEBUG("estimate: class %s run %s: memory loads wait %.3f x idle latency", e->phase_name[m->cls_phase[c]],
                 e->dev_name[d], nm > 0 && e->lat_ns[d] > 0 ? r->L[d] / nm / e->lat_ns[d] : 0.0);
    }
    HM_DEBUG("estimate: class %s: sampled traffic %.4g read, %.4g written; unsampled from bound runs %.4g",
             e->phase_name[m->cls_phase[c]], r->Br, r->Bw, r->nb ? r->extra / r->nb : 0.0);
    if (!RULE(R_UNSAMPLED) || !(r->nb > 0 && r->Br + r->Bw > 0))
        return;
    double extra = r->extra / r->nb, shrink = r->shrink / r->nb;
    for (int o = 0; o < O; o++) {
        size_t co = (size_t)c * O + o;
        if (extra < 0) {
            m->bytes[co] *= shrink;
            m->wbytes[co] *= shrink;
        } else {
            m->bytes_x[co] = r->Br > 0 ? extra * m->bytes[co] / r->Br : extra * m->wbytes[co] / r->Bw;
        }
    }
}

/* Sum of squares of t_d - C - k L_d over the runs in use. */
static double fit_sse(const double *L, const double *T, const int *use, int D, double C, double k)
{
    double s = 0;
    for (int d = 0; d < D; d++)
        if (use[d])
            s += (T[d] - C - k * L[d]) * (T[d] - C - k * L[d]);
    return s;
}

enum { AT_C0 = 1, AT_CMAX = 2, AT_K0 = 4, AT_KMAX = 8 };

/* Least squares t_d = C + k L_d over the runs in use, within the box
 * 0 <= C <= cmax, 0 <= k <= kmax; returns which bounds hold the solution
 * (AT_*). The sum of squares is convex in (C, k): its minimum in the box
 * is the free one when that lies inside, else the best of the edges' (one
 * parameter fixed at a bound, the other's least squares clamped to its
 * range). Runs whose latency costs are all one value fix only C + k L:
 * the largest k that fits is taken (a miss adds at least its latency cost
 * times k, and misses overlap: k = 1 unless the runs took less time than
 * their latency cost), which with one run is its cost at face value.
 * Without any latency cost there is nothing to fit: C = k = 0. */
static int box_lsq(const double *L, const double *T, const int *use, int D, double cmax, double kmax, double *C,
                   double *k)
{
    double n = 0, sl = 0, st = 0, sll = 0, slt = 0;
    for (int d = 0; d < D; d++)
        if (use[d])
            n++, sl += L[d], st += T[d], sll += L[d] * L[d], slt += L[d] * T[d];
    *C = *k = 0;
    if (!(n > 0) || !(sll > 0))
        return AT_C0 | AT_K0;
    double den = n * sll - sl * sl;
    if (!(den > 1e-9 * sll * n)) {
        /* One latency cost l (> 0) for every run in use: C + k l = mean t. */
        double l = sl / n, v = st / n;
        *k = fmax(0.0, fmin(kmax, v / l));
        *C = v - *k * l;
        if (*C > cmax) {
            *C = cmax;
            *k = fmax(0.0, fmin(kmax, (v - cmax) / l));
        }
        int at = (*k <= 0 ? AT_K0 : 0) | (*k >= kmax ? AT_KMAX : 0) | (*C >= cmax ? AT_CMAX : 0);
        return at | (*C <= 0 ? AT_C0 : 0);
    }
    double kf = (n * slt - sl * st) / den, cf = (st - kf * sl) / n;
    if (kf > 0 && kf < kmax && cf >= 0 && cf <= cmax) {
        *C = cf, *k = kf;
        return (cf <= 0 ? AT_C0 : 0) | (cf >= cmax ? AT_CMAX : 0);
    }
    /* The edges: C at 0 or cmax (least squares for k), k at 0 or kmax
     * (for C). */
    double best = INFINITY;
    int at = 0;
    for (int edge = 0; edge < 4; edge++) {
        double c, kk;
        if (edge < 2) {
            c = edge ? cmax : 0;
            if (!isfinite(c))
                continue;
            kk = fmax(0.0, fmin(kmax, (slt - c * sl) / sll));
        } else {
            kk = edge == 2 ? 0 : kmax;
            if (!isfinite(kk))
                continue;
            c = fmax(0.0, fmin(cmax, (st - kk * sl) / n));
        }
        double s = fit_sse(L, T, use, D, c, kk);
        if (s < best) {
            best = s, *C = c, *k = kk;
            at = (c <= 0 ? AT_C0 : 0) | (c >= cmax ? AT_CMAX : 0) | (kk <= 0 ? AT_K0 : 0) | (kk >= kmax ? AT_KMAX : 0);
        }
    }
    return at;
}

/* Step 8: the fit of t = C + k L, one box-constrained least-squares solve
 * with three constraints:
 *   0 <= C <= the fastest run's time   C is time every run spends;
 *   0 <= k <= 1                        a miss adds at most its latency
 *                                      cost (misses overlap), and time
 *                                      does not fall as latency grows;
 *   a bound run does not inform k      its channels set its time.
 * The solve is over every run first, whose measured latencies include
 * what queueing added, so that a run near its bandwidth still says how
 * much of the time the memory accesses took. When that needs a bound other
 * than C's upper one (a line steeper than k = 1, or no positive split of
 * the times), the bound runs were slowed by what the latency cost does not
 * weigh (their channels, stores): the solve is over the unbound runs alone,
 * or, when every run is bound, over the reference run whose latency terms
 * the others take (lowest idle latency, on a tie the faster run). With one
 * run its latency cost is taken at face value (box_lsq). Through
 * channel-bound runs far apart the free line says little of the latency:
 * in STREAM's triad on spr-hbm-cxl (DDR, HBM and CXL runs 39, 10 and 188
 * ms) it had C = 18 ms, above the fastest run (test_fit_below_fastest). */
static void fit_latency(const hm_estimator_t *e, runs_t *r)
{
    int D = e->ndev, use[64];
    double cmax = RULE(R_C_BOUND) ? r->tfast : INFINITY, kmax = RULE(R_K_BOUND) ? 1.0 : INFINITY;
    if (!isfinite(r->tfast))
        cmax = 0;
    for (int d = 0; d < D; d++)
        use[d] = 1;
    int at = box_lsq(r->L, r->T, use, D, cmax, kmax, &r->C, &r->k);
    if (!RULE(R_BOUND_NO_K) || !(at & (AT_C0 | AT_K0 | AT_KMAX)) || r->nb == 0)
        return;
    int u = -1;
    for (int d = 0; d < D; d++)
        use[d] = !r->bound[d];
    for (int d = 0; d < D && r->nu == 0; d++)
        if (r->T[d] > 0 && r->L[d] > 0 &&
            (u < 0 || e->lat_ns[d] < e->lat_ns[u] || (e->lat_ns[d] == e->lat_ns[u] && r->T[d] < r->T[u])))
            u = d;
    if (u >= 0)
        use[u] = 1;
    box_lsq(r->L, r->T, use, D, cmax, kmax, &r->C, &r->k);
}

/* Step 9: no run shows a latency cost (the phase only stores, or caches
 * serve its loads): there is nothing to fit, and the residuals carry each
 * run's whole time beyond its channels. When every run took either its
 * channel time or the fastest run's time (within floor_tol), that time is
 * a floor no device changes: C is the fastest run's time, and a placement
 * takes the larger of it and its channel time. Carried by the residuals
 * instead, the floor came out per device, and a placement that split the
 * phase's stores over two devices whose runs took the same time was
 * estimated below both (test_store_floor). Where the runs' times differ
 * otherwise (stores slower on the slower devices), the residuals keep
 * them. */
static void store_floor(const hm_estimator_t *e, runs_t *r)
{
    int D = e->ndev, flat = RULE(R_STORE_FLOOR) && !(r->k > 0);
    for (int d = 0; d < D && flat; d++)
        flat = !(r->L[d] > 0) && !(r->T[d] > (1 + TUNE(T_FLOOR_TOL)) * fmax(r->tfast, r->tau[d]));
    if (flat && r->tfast < INFINITY)
        r->C = r->tfast;
}

/* Run d's channel utilisation in class c (its traffic, sampled and
 * unsampled, over its time: as the estimate of all data on d counts it)
 * and its memory loads' mean latency weight over d's idle latency (*w, 0
 * without memory loads). */
static double run_load(const hm_estimator_t *e, const prep_t *p, int c, const runs_t *r, int d, double *w)
{
    const hm__est_default_t *m = &e->dm;
    double y = 0, nm = 0, raw = 0;
    for (int o = 0; o < e->nobj; o++) {
        size_t co = (size_t)c * e->nobj + o;
        y += chan_time(e, d, m->bytes[co] + m->bytes_x[co], m->wbytes[co]);
        nm += p->lmem[ix3(e, c, o, d)];
        raw += p->raw[ix3(e, c, o, d)];
    }
    *w = nm > 0 && e->lat_ns[d] > 0 ? raw / (nm * e->lat_ns[d]) : 0;
    return r->T[d] > 0 ? y / r->T[d] : 0;
}

/* The queue a run on a device without a loaded-latency curve showed
 * (rule queue_by_load). Its memory loads waited W idle latencies on
 * average (their latency weight over the device's idle latency). Part of
 * that is the phase's own, whatever the device (the cache path, its own
 * write-backs): the least loaded run shows it, W0 (unloaded by its curve,
 * where it has one). The trace header gives this device's latency as flat
 * below saturation, so the rest, W / W0, is queueing for its channels:
 * bursts that outran this thread's share. A queue's wait grows with its
 * utilisation u as u / (1 - u) (Kingman's G/G/1 approximation, Wq = V S
 * u / (1 - u): S the service time, V the arrivals' and services'
 * variability, neither known), so with V S fitted on the run itself, at
 * the utilisation u its traffic put on its channels (sampled and
 * unsampled, as the estimate of all data on the device counts it), a
 * placement that loads the device to u' waits 1 + q u' / (1 - u') times
 * the phase's own latency, q = (W / W0 - 1) (1 - u) / u: the run's own
 * wait at u, less where the placement sends the device less traffic.
 * Returns q, and the run's factor W / W0 in *wait (1 without a queue).
 * Only for an unbound run (a bound run's time is its channels'), never for
 * the least loaded run itself; 0 where the device has a curve or the run
 * waited no longer than the phase's own. */
static double queue_factor(const hm_estimator_t *e, const prep_t *p, int c, const runs_t *r, int d, double *wait)
{
    *wait = 1;
    if (!RULE(R_QUEUE_BY_LOAD) || r->bound[d] || e->ll_n[d] > 0 || !(e->lat_ns[d] > 0) || !(r->T[d] > 0))
        return 0;
    double w, u = run_load(e, p, c, r, d, &w);
    if (!(u > 0) || !(u < 1) || !(w > 0))
        return 0;
    /* The phase's own wait: the least loaded run's, unloaded by its curve. */
    int lr = -1;
    double lu = 0, lw = 0;
    for (int j = 0; j < e->ndev; j++) {
        double wj, uj = run_load(e, p, c, r, j, &wj);
        if (wj > 0 && e->bw[j] > 0 && (lr < 0 || uj < lu))
            lr = j, lu = uj, lw = wj;
    }
    if (lr < 0 || lr == d)
        return 0;
    double w0 = lw / ll_factor(e, lr, fmin(1.0, lu));
    if (!(w > w0) || !(w0 > 0))
        return 0;
    *wait = w / w0;
    return (*wait - 1) * (1 - u) / u;
}

/* Step 10: latency terms per device: measured for unbound runs; for bound
 * ones, the unloaded cost of the nearest unbound run (in idle latency),
 * each of its memory loads' idle latency changed to the device's. When
 * every run was bandwidth-bound, the reference is the run on the device
 * with the lowest idle latency (on a tie, the faster run), so that the
 * others take its costs with their idle part scaled up, never down (not
 * which device comes first in the traces: the estimate must not depend on
 * their order)... unless even that one kept its channels all but busy
 * (saturated): its latencies then measure only queueing, which a placement
 * that splits the traffic changes, and the phase is timed by its channels
 * (plus C). */
static void latency_terms(hm_estimator_t *e, const prep_t *p, int c, const runs_t *r)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj;
    const double *Tc = r->T, *tau = r->tau;
    for (int d = 0; d < D; d++) {
        int src = d;
        double scale = 1;
        if (r->bound[d]) {
            int u = -1;
            for (int j = 0; j < D; j++)
                if (!r->bound[j] && (u < 0 || fabs(e->lat_ns[j] - e->lat_ns[d]) < fabs(e->lat_ns[u] - e->lat_ns[d])))
                    u = j;
            for (int j = 0; j < D && r->nu == 0; j++)
                if (Tc[j] > 0 && (u < 0 || e->lat_ns[j] < e->lat_ns[u] || (e->lat_ns[j] == e->lat_ns[u] && Tc[j] < Tc[u])))
                    u = j;
            if (RULE(R_SATURATED_REF) && r->nu == 0 && u >= 0 && e->bw[u] > 0 &&
                tau[u] + r->unsampled / e->bw[u] >= TUNE(T_SATURATED) * Tc[u])
                u = -1;
            if (u >= 0 && u != d && e->lat_ns[u] > 0 && e->lat_ns[d] > 0) {
                src = u;
                scale = e->lat_ns[d] / e->lat_ns[u];
            } else if (u == d) {
                scale = 1; /* the least loaded run itself */
            } else {
                scale = 0;
            }
        }
        m->k[(size_t)c * D + d] = r->k;
        /* Measured latencies carry the run's own load: unloaded, they are
         * what a placement's load then raises again. Taken from another
         * run, only the idle latency of each load that reached memory
         * changes with the device: that part of the unloaded cost (at most
         * the loads times the run's idle latency) is scaled by the ratio of
         * latencies, and stays unloaded (the placement's load is applied to
         * it later, as to every term), while the wait beyond it (behind the
         * phase's own write-backs and bursts, which an unbound run still
         * shows) is the phase's, not the device's, and is carried over as
         * it is (test_queueing_carried, test_queueing_carried_clock). */
        double llf = ll_factor(e, src, Tc[src] > 0 ? fmin(1.0, tau[src] / Tc[src]) : 0);
        double w, q = queue_factor(e, p, c, r, d, &w);
        if (src == d && q > 0) {
            HM_DEBUG("estimate: class %s run %s: waits %.3f x the phase's own latency, queue factor q %.4g",
                     e->phase_name[m->cls_phase[c]], e->dev_name[d], w, q);
            m->kq[(size_t)c * D + d] = q;
            llf = w; /* 1 + q u / (1 - u) at the run's own utilisation */
        }
        for (int o = 0; o < O; o++) {
            size_t is = ix3(e, c, o, src);
            double l = p->raw[is] * scale / llf;
            if (RULE(R_QUEUEING_CARRIED) && src != d && scale > 0) {
                double a = p->raw[is] / llf, idle = fmin(a, p->lmem[is] * e->lat_ns[src]);
                l = idle * scale + (a - idle);
            }
            m->lat[ix3(e, c, o, d)] = l;
            m->latsum[(size_t)c * D + d] += l;
            /* Sampling error: relative 1/sqrt(n) on the object's latency
             * cost and on its traffic (from its sampled misses). */
            double n = p->nsamp[is], nm = p->nmiss[ix3(e, c, o, d)];
            double ct = chan_time(e, d, m->bytes[(size_t)c * O + o], m->wbytes[(size_t)c * O + o]);
            m->var[ix3(e, c, o, d)] = (n > 0 ? (r->k * l) * (r->k * l) / n : 0) + (nm > 0 ? ct * ct / nm : 0);
        }
    }
}

/* Step 11: residual weights: the latency cost, else the samples, else the
 * untracked data alone (it follows the placement's default device). One
 * basis for every device of the class, so that the shares a placement puts
 * on the devices add up to one: samples as soon as one run has no latency
 * cost (a phase of stores, say). */
static void residual_weights(hm_estimator_t *e, const prep_t *p, int c)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj, by_lat = 1;
    for (int d = 0; d < D; d++) {
        double l = 0;
        for (int o = 0; o < O; o++)
            l += m->lat[ix3(e, c, o, d)];
        by_lat &= l > 0;
    }
    for (int d = 0; d < D; d++) {
        double *ws = &m->xwsum[(size_t)c * D + d];
        for (int o = 0; o < O && by_lat; o++)
            *ws += m->xw[ix3(e, c, o, d)] = m->lat[ix3(e, c, o, d)];
        if (*ws <= 0)
            for (int o = 0; o < O; o++)
                *ws += m->xw[ix3(e, c, o, d)] = p->nsamp[ix3(e, c, o, d)];
        if (*ws <= 0)
            *ws = m->xw[ix3(e, c, O - 1, d)] = 1;
    }
}

/* Step 12: the window profile (profile_time): the latency side's from the
 * run least busy on its channels, the channel side's from the bound run
 * busiest on them; none without a bound run. Returns the next free
 * profile entry. */
static int window_profile(hm_estimator_t *e, int c, const runs_t *r, int gn)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, lr = -1, br = -1;
    double lu = 0, bu = 0;
    m->g_off[c] = gn;
    for (int d = 0; d < D && RULE(R_PROFILE); d++) {
        if (!(r->T[d] > 0) || !(e->bw[d] > 0))
            continue;
        double u = (r->tau[d] + (r->bound[d] ? r->unsampled / e->bw[d] : 0)) / r->T[d];
        if (lr < 0 || u < lu)
            lr = d, lu = u;
        if (r->bound[d] && (br < 0 || u > bu))
            br = d, bu = u;
    }
    if (lr >= 0 && br >= 0 && lr != br && (gn = build_profile(e, c, lr, br, gn)) < 0)
        return gn;
    m->g_off[c + 1] = gn;
    return gn;
}

/* Step 13: residuals: all on d must give the measured time. A run whose
 * estimate its channels set, at more than the run took, moved less than
 * the traffic counted for it (the prefetches and write-backs the samples
 * do not show are estimated): that device's channel times are scaled down
 * to the run's time, so that a placement sending it part of the traffic
 * pays the same share of the run's time (test_channel_within_run). Spread
 * as a residual instead, the excess was taken off the latency of every mix
 * by its share of the latency cost. A run slower than its channel time is
 * not scaled up: the time beyond the channels may be latency. */
static void residuals(hm_estimator_t *e, int c, const runs_t *r)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj;
    for (int d = 0; d < D; d++) {
        double lpd[64] = {0}, y[64] = {0};
        lpd[d] = m->k[(size_t)c * D + d] * m->latsum[(size_t)c * D + d];
        for (int o = 0; o < O; o++)
            y[d] += chan_time(e, d, m->bytes[(size_t)c * O + o] + m->bytes_x[(size_t)c * O + o],
                              m->wbytes[(size_t)c * O + o]);
        m->ys[(size_t)c * D + d] = 1;
        if (RULE(R_CHANNEL_IN_RUN) && y[d] > r->C + lpd[d] && r->T[d] < y[d]) {
            m->ys[(size_t)c * D + d] = r->T[d] / y[d];
            y[d] = r->T[d];
        }
        m->resid[(size_t)c * D + d] = r->T[d] - lat_bw_time(e, c, r->C, lpd, y);
        HM_DEBUG("estimate: class %s run %s: latency %.4g, channel %.4g (scaled by %.3f), residual %.4g ns",
                 e->phase_name[m->cls_phase[c]], e->dev_name[d], r->C + lpd[d], y[d], m->ys[(size_t)c * D + d],
                 m->resid[(size_t)c * D + d]);
    }
}

static void free_terms(hm__est_default_t *m)
{
    double **all[] = {&m->c_ns, &m->k, &m->resid, &m->lat, &m->bytes, &m->bytes_x, &m->wbytes, &m->latsum,
                      &m->xw, &m->xwsum, &m->var, &m->ys, &m->kq, &m->tdev, &m->g_r, &m->g_a, &m->g_b};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
    free(m->g_off);
    m->g_off = NULL;
}

/* The default model's terms per class, in the steps above
 * (docs/estimator.md): with force (per class and device: -1, or the side
 * of the utilisation test taken), and pu (where not NULL, per class and
 * device: the probability that the utilisation test binds the run, -1
 * where no blend applies). */
static int prepare_terms(hm_estimator_t *e, const int8_t *force, double *pu)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, O = e->nobj, rc;
    int C = m->ncls;
    m->c_ns = calloc((size_t)C, sizeof(double));
    m->k = calloc((size_t)C * D, sizeof(double));
    m->resid = calloc((size_t)C * D, sizeof(double));
    m->lat = calloc((size_t)C * O * D, sizeof(double));
    m->bytes = calloc((size_t)C * O, sizeof(double));
    m->bytes_x = calloc((size_t)C * O, sizeof(double));
    m->wbytes = calloc((size_t)C * O, sizeof(double));
    m->latsum = calloc((size_t)C * D, sizeof(double));
    m->xw = calloc((size_t)C * O * D, sizeof(double));
    m->xwsum = calloc((size_t)C * D, sizeof(double));
    m->var = calloc((size_t)C * O * D, sizeof(double));
    m->ys = calloc((size_t)C * D, sizeof(double));
    m->kq = calloc((size_t)C * D, sizeof(double));
    m->tdev = calloc((size_t)C * D, sizeof(double));
    m->g_off = calloc((size_t)C + 1, sizeof(int));
    m->g_r = calloc((size_t)m->cls_woff[C] + 1, sizeof(double));
    m->g_a = calloc((size_t)m->cls_woff[C] + 1, sizeof(double));
    m->g_b = calloc((size_t)m->cls_woff[C] + 1, sizeof(double));
    if (!m->c_ns || !m->k || !m->resid || !m->lat || !m->bytes || !m->bytes_x || !m->wbytes || !m->latsum || !m->xw ||
        !m->xwsum || !m->var || !m->ys || !m->kq || !m->tdev || !m->g_off || !m->g_r || !m->g_a || !m->g_b)
        return -ENOMEM;
    prep_t p = {0};
    if ((rc = sum_windows(e, &p)) < 0) {
        prep_free(&p);
        return rc;
    }
    object_traffic(e, &p);
    share_posted_writebacks(e, &p);
    int gn = 0;
    for (int c = 0; c < C; c++) {
        runs_t r;
        class_runs(e, &p, c, &r);
        traffic_within_runs(e, &p, c, &r);
        find_bound_runs(e, &r, force ? &force[(size_t)c * D] : NULL, pu ? &pu[(size_t)c * D] : NULL);
        spread_unsampled(e, &p, c, &r);
        fit_latency(e, &r);
        store_floor(e, &r);
        m->c_ns[c] = r.C;
        for (int d = 0; d < D; d++)
            m->tdev[(size_t)c * D + d] = r.T[d];
        HM_DEBUG("estimate: class %s: C %.4g ns, k %.4g", e->phase_name[m->cls_phase[c]], r.C, r.k);
        for (int d = 0; d < D; d++)
            HM_DEBUG("estimate:   run %s: T %.4g ns, L %.4g, sampled util %.2f%s", e->dev_name[d], r.T[d], r.L[d],
                     r.T[d] > 0 ? r.tau[d] / r.T[d] : 0.0, r.bound[d] ? " (bandwidth-bound)" : "");
        latency_terms(e, &p, c, &r);
        residual_weights(e, &p, c);
        if ((gn = window_profile(e, c, &r, gn)) < 0) {
            prep_free(&p);
            return gn;
        }
        residuals(e, c, &r);
    }
    prep_free(&p);
    return 0;
}

/* At most this many runs of a class blended on the utilisation test (2^n
 * preparations of the class); beyond, a run goes by its likelier side. */
#define BLEND_RUNS 3

/* The default model (docs/estimator.md): classes, then their terms. A run
 * whose sampled utilisation lies near bound_util is bandwidth-bound with
 * a probability (find_bound_runs): its class is prepared with each side
 * taken, as copies of the class weighted by the sides' probabilities (the
 * classes' weights, as for a blended split), and prepared again. */
static int prepare_default(hm_estimator_t *e)
{
    hm__est_default_t *m = &e->dm;
    int D = e->ndev, rc;
    m->overlap = 1;
    m->mix = m->mix_cap = 0;
    if ((rc = classify(e)) < 0)
        return rc;
    int C = m->ncls, C2 = 0;
    double *pu = calloc((size_t)C * D + 1, sizeof *pu);
    int *nv = calloc((size_t)C + 1, sizeof *nv), *first = calloc((size_t)C + 1, sizeof *first);
    int *ph = NULL, *sib = NULL, *woff = NULL, *win = NULL;
    double *w = NULL;
    int8_t *force = NULL;
    if (!pu || !nv || !first) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = prepare_terms(e, NULL, pu)) < 0)
        goto out;
    /* The runs near the threshold, per class: the rest take their side. */
    for (int c = 0; c < C; c++) {
        int k = 0;
        for (int d = 0; d < D; d++) {
            double *q = &pu[(size_t)c * D + d];
            if (*q >= 0 && (*q < BLEND_EPS || *q > 1 - BLEND_EPS || k == BLEND_RUNS))
                *q = -1; /* no blend: the preparation's own side */
            k += *q >= 0;
        }
        first[c] = C2;
        C2 += nv[c] = 1 << k;
    }
    if (C2 == C)
        goto out;
    int tw = 0;
    for (int c = 0; c < C; c++)
        tw += nv[c] * (m->cls_woff[c + 1] - m->cls_woff[c]);
    ph = calloc((size_t)C2 + 1, sizeof *ph), sib = calloc((size_t)C2 + 1, sizeof *sib);
    woff = calloc((size_t)C2 + 1, sizeof *woff), win = calloc((size_t)tw + 1, sizeof *win);
    w = calloc((size_t)C2 + 1, sizeof *w), force = malloc((size_t)C2 * D + 1);
    if (!ph || !sib || !woff || !win || !w || !force) {
        rc = -ENOMEM;
        goto out;
    }
    for (int c = 0, o = 0; c < C; c++) {
        int n = m->cls_woff[c + 1] - m->cls_woff[c];
        for (int v = 0; v < nv[c]; v++) {
            int c2 = first[c] + v, bit = 0;
            ph[c2] = m->cls_phase[c];
            sib[c2] = m->cls_sib[c] >= 0 ? first[m->cls_sib[c]] : -1; /* every copy of it has the same windows */
            w[c2] = m->cls_w[c];
            for (int d = 0; d < D; d++) {
                double q = pu[(size_t)c * D + d];
                int8_t *f = &force[(size_t)c2 * D + d];
                *f = -1;
                if (q < 0)
                    continue;
                *f = (int8_t)((v >> bit++) & 1);
                w[c2] *= *f ? q : 1 - q;
            }
            woff[c2] = o;
            memcpy(win + o, m->cls_win + m->cls_woff[c], (size_t)n * sizeof *win);
            o += n;
            woff[c2 + 1] = o;
            HM_DEBUG("estimate: class %d (%s) copy %d of %d: weight %.4f", c, e->phase_name[ph[c2]], v, nv[c], w[c2]);
        }
    }
    free(m->cls_phase);
    free(m->cls_sib);
    free(m->cls_w);
    free(m->cls_woff);
    free(m->cls_win);
    m->cls_phase = ph, m->cls_sib = sib, m->cls_w = w, m->cls_woff = woff, m->cls_win = win, m->ncls = C2;
    ph = sib = woff = win = NULL;
    w = NULL;
    free_terms(m);
    rc = prepare_terms(e, force, NULL);
out:
    free(pu);
    free(nv);
    free(first);
    free(ph);
    free(sib);
    free(woff);
    free(win);
    free(w);
    free(force);
    return rc;
}

int hm__est_prepare(hm_estimator_t *e)
{
#ifdef HM_EST_MUTATION
    mutate_once();
#endif
    /* pages_percent splits: share of an object's sampled misses below each
     * percentage; without samples, the percentage itself. */
    for (int o = 0; o < e->nobj; o++) {
        hm__est_obj_t *x = &e->obj[o];
        double all = 0, acc = 0;
        for (int b = 0; b < 100; b++)
            all += x->pages[b];
        for (int p = 0; p <= 100; p++) {
            x->cum[p] = (float)(all > 0 ? acc / all : p / 100.0);
            if (p < 100)
                acc += x->pages[p];
        }
    }
    int rc;
    if ((rc = prepare_linear(e)) < 0 || (rc = prepare_default(e)) < 0)
        return rc;
    /* Phase label transitions, for migration costs. */
    int P = e->nphase;
    e->trans = calloc((size_t)P * P, sizeof *e->trans);
    e->bd_phase = calloc((size_t)P, sizeof(double));
    e->bd_obj = calloc((size_t)e->nobj, sizeof(double));
    if (!e->trans || !e->bd_phase || !e->bd_obj)
        return -ENOMEM;
    for (int w = 1; w < e->nwin; w++)
        if (e->win[w].phase != e->win[w - 1].phase)
            e->trans[e->win[w - 1].phase * P + e->win[w].phase]++;
    e->bd.nphases = P;
    e->bd.phase_ns = e->bd_phase;
    e->bd.nobjects = e->nobj;
    e->bd.object_ns = e->bd_obj;
    if (pthread_mutex_init(&e->pc_mu, NULL) != 0)
        return hm__errf(-ENOMEM, "cannot create the estimator's lock");
    e->pc_ready = 1;
    return 0;
}

/* -------------------------------------------------------------- states */

typedef hm__est_slot_t slot_t;

struct hm_est_state {
    hm_estimator_t *e;
    hm_est_model_t model;
    int def;                 /* default device: where the rest of split objects and untracked data go */
    int phased, np;          /* np: assignments (phases when phased, else 1) */
    slot_t *a;               /* per (assignment, object) */
    /* default model: per class */
    double *lp;              /* per (class, device): k sum_o x L (unloaded latency terms) */
    double *y;               /* per (class, device): channel time of the traffic sent there */
    double *xi;              /* per (class, device): latency cost placed there */
    double *tw;              /* per (class, device): bytes of traffic placed there (the interval's spread) */
    double *var;             /* per class: variance */
    double *sp;              /* per class: spread, kept only when calibrated with a mix term */
    /* linear model */
    double *lin_t;           /* per class */
    double *lin_var;
    double *t;               /* per class, current time */
    double mig;              /* migration time */
    double total;
    uint64_t calib_gen;      /* the estimator's calib_gen its terms were computed under */
};

/* Fraction of object o's accesses on its slot's device (by sampled pages). */
static inline double frac(const hm_estimator_t *e, int o, int pct)
{
    return pct >= 100 ? 1 : pct <= 0 ? 0 : e->obj[o].cum[pct];
}

/* Classes of the state's model: the default model's classes of windows,
 * the linear model's phase labels. */
static inline int nclass(const hm_est_state_t *s)
{
    return s->model == HM_EST_DEFAULT ? s->e->dm.ncls : s->e->nphase;
}

static inline int phase_of(const hm_est_state_t *s, int c)
{
    return s->model == HM_EST_DEFAULT ? s->e->dm.cls_phase[c] : c;
}

static int slot_of(const hm_est_state_t *s, int c)
{
    return s->phased ? phase_of(s, c) : 0;
}

/* Adds (sign +1) or removes (-1) object o's terms in class c for slot sl. */
static void apply(hm_est_state_t *s, int c, int o, slot_t sl, double sign)
{
    hm_estimator_t *e = s->e;
    int D = e->ndev, def = s->def;
    double f = frac(e, o, sl.pct), u = sl.pct >= 100 ? 1 : sl.pct / 100.0;
    double share[2] = {f, 1 - f}, even[2] = {u, 1 - u};
    int devs[2] = {sl.dev, def};
    for (int i = 0; i < 2; i++) {
        double x = share[i] * sign;
        int d = devs[i];
        if (x == 0 && even[i] == 0)
            continue;
        if (s->model == HM_EST_DEFAULT) {
            const hm__est_default_t *m = &e->dm;
            double l = m->lat[ix3(e, c, o, d)];
            s->lp[(size_t)c * D + d] += x * m->k[(size_t)c * D + d] * l;
            size_t co = (size_t)c * e->nobj + o;
            s->y[(size_t)c * D + d] +=
                m->ys[(size_t)c * D + d] * chan_time(e, d, x * m->bytes[co] + even[i] * sign * m->bytes_x[co], x * m->wbytes[co]);
            s->xi[(size_t)c * D + d] += x * m->xw[ix3(e, c, o, d)];
            s->tw[(size_t)c * D + d] += x * (m->bytes[co] + m->wbytes[co]) + even[i] * sign * m->bytes_x[co];
            s->var[c] += fabs(x) * m->var[ix3(e, c, o, d)] * (sign > 0 ? 1 : -1);
        } else {
            s->lin_t[c] -= x * e->lin_phase_gain[ix3(e, c, o, d)];
            s->lin_var[c] += x * e->lin_var[ix3(e, c, o, d)];
        }
    }
}

/* Class c's term of the placement's spread (spread() below). */
static double class_spread(const hm_est_state_t *s, int c)
{
    const hm_estimator_t *e = s->e;
    const hm__est_default_t *m = &e->dm;
    int D = e->ndev;
    const double *tw = &s->tw[(size_t)c * D], *td = &m->tdev[(size_t)c * D];
    double w[64], all = 0, mean = 0, dev = 0;
    for (int d = 0; d < D; d++)
        all += w[d] = tw[d] > 0 ? tw[d] : 0;
    if (!(all > 0))
        for (int d = 0; d < D; d++) {
            double ws = m->xwsum[(size_t)c * D + d], xs = ws > 0 ? s->xi[(size_t)c * D + d] / ws : 0;
            all += w[d] = xs > 0 ? xs : 0;
        }
    if (!(all > 0))
        return 0;
    for (int d = 0; d < D; d++)
        mean += (w[d] /= all) * td[d];
    for (int d = 0; d < D; d++)
        dev += w[d] * fabs(td[d] - mean);
    return dev * m->cls_w[c]; /* its weight among the blended cuts (classify) */
}

/* The calibrated mix term (hm_estimator_calibrate): beta x the
 * placement's spread, at most mix_cap x its time either way; each class's
 * share of it, beta x its spread x the factor returned (1 unless the cap
 * holds the term), goes to its phase in a breakdown. *term gets the term;
 * 0 uncalibrated. The classes' spreads are kept in s->sp. */
static double mix_factor(const hm_est_state_t *s, double *term)
{
    const hm__est_default_t *m = &s->e->dm;
    *term = 0;
    if (s->model != HM_EST_DEFAULT || m->mix == 0 || !RULE(R_MIX))
        return 0;
    double S = 0, U = 0;
    for (int c = 0; c < m->ncls; c++)
        S += s->sp[c], U += s->t[c];
    double x = m->mix * S, cap = m->mix_cap * (U > 0 ? U : 0);
    if (!(x != 0))
        return 0;
    if (RULE(R_MIX_CAP) && !(fabs(x) <= cap))
        x = x > 0 ? cap : -cap;
    *term = x;
    return x / (m->mix * S);
}

static double class_time(hm_est_state_t *s, int c)
{
    hm_estimator_t *e = s->e;
    if (s->model == HM_EST_LINEAR) /* at least the fastest windows' time; below 0 only by rounding */
        return s->lin_t[c] > 0 ? s->lin_t[c] : 0;
    const hm__est_default_t *m = &e->dm;
    int D = e->ndev;
    double r = 0;
    for (int d = 0; d < D; d++)
        r += s->xi[(size_t)c * D + d] / m->xwsum[(size_t)c * D + d] * m->resid[(size_t)c * D + d];
    double t = lat_bw_time(e, c, m->c_ns[c], &s->lp[(size_t)c * D], &s->y[(size_t)c * D]) + r;
    /* A calibrated program's classes keep their spread for its mix term (0
     * at every corner, where the spread is 0); uncalibrated, beta is 0 and
     * this is skipped, so that every estimate stays what it was to the
     * last bit. */
    if (m->mix != 0)
        s->sp[c] = class_spread(s, c);
    return (t > 0 ? t : 0) * m->cls_w[c]; /* its weight among the blended cuts (classify) */
}

/* Time to move object o's pages between two slots at one boundary. */
static double move_cost(const hm_estimator_t *e, int def, int o, slot_t a, slot_t b)
{
    if (a.dev == b.dev && a.pct == b.pct)
        return 0;
    /* Bytes leaving each device: the pages whose device differs. */
    double fa = (a.pct >= 100 ? 100 : a.pct) / 100.0, fb = (b.pct >= 100 ? 100 : b.pct) / 100.0;
    double size = (double)e->obj[o].size, moved;
    if (a.dev == b.dev)
        moved = fabs(fa - fb) * size;
    else if (a.dev == def)
        moved = fb * size;
    else if (b.dev == def)
        moved = fa * size;
    else
        moved = (fa > fb ? fa : fb) * size;
    /* The copy is read from where the pages were and written where they go;
     * the slower of the two sets its pace (as move_pages on a busy node). */
    int src = a.dev != def || b.dev == def ? a.dev : def, dst = src == a.dev ? b.dev : a.dev;
    if (src == dst)
        dst = def;
    double rd = e->bw[src] > 0 ? moved / e->bw[src] : 0, wr = e->wbw[dst] > 0 ? moved / e->wbw[dst] : 0;
    return rd > wr ? rd : wr;
}

static double migration(const hm_est_state_t *s)
{
    if (!s->phased)
        return 0;
    const hm_estimator_t *e = s->e;
    int P = e->nphase;
    double t = 0;
    for (int a = 0; a < P; a++)
        for (int b = 0; b < P; b++) {
            int n = e->trans[a * P + b];
            if (!n)
                continue;
            for (int o = 0; o < e->nobj - 1; o++)
                t += n * move_cost(e, s->def, o, s->a[(size_t)a * e->nobj + o], s->a[(size_t)b * e->nobj + o]);
        }
    return t;
}

static void recompute(hm_est_state_t *s)
{
    hm_estimator_t *e = s->e;
    int C = nclass(s), D = e->ndev, O = e->nobj;
    memset(s->lp, 0, (size_t)C * D * sizeof(double));
    memset(s->y, 0, (size_t)C * D * sizeof(double));
    memset(s->xi, 0, (size_t)C * D * sizeof(double));
    memset(s->tw, 0, (size_t)C * D * sizeof(double));
    memset(s->var, 0, (size_t)C * sizeof(double));
    memset(s->lin_var, 0, (size_t)C * sizeof(double));
    for (int c = 0; c < C; c++) {
        if (s->model == HM_EST_LINEAR)
            s->lin_t[c] = e->lin_phase_base[c];
        for (int o = 0; o < O; o++)
            apply(s, c, o, s->a[(size_t)slot_of(s, c) * O + o], 1);
    }
    s->total = 0;
    for (int c = 0; c < C; c++)
        s->total += s->t[c] = class_time(s, c);
    s->mig = migration(s);
    s->total += s->mig;
    double mix;
    mix_factor(s, &mix);
    s->total += mix;
    s->calib_gen = e->dm.calib_gen;
}

/* A state opened before its estimator was calibrated (again) holds the
 * per-class times of the old overlap and mix term: computed again from its
 * assignment, its estimates are those of a state opened now. The state is
 * the caller's (never const in fact): the times are a cache of it. */
static void calibrated(const hm_est_state_t *s)
{
    if (s->calib_gen != s->e->dm.calib_gen)
        recompute((hm_est_state_t *)s);
}

/* A state in one allocation, its assignment left for the caller to fill
 * and recompute(); NULL when memory is short. */
static hm_est_state_t *state_new(hm_estimator_t *e, hm_est_model_t model, int phased, int def)
{
    int P = e->nphase, D = e->ndev, O = e->nobj, np = phased ? P : 1;
    int C = model == HM_EST_DEFAULT ? e->dm.ncls : P;
    size_t nd = (size_t)C * D * 4 + (size_t)C * 5;
    /* The struct holds pointers and doubles, so the doubles after it are aligned. */
    hm_est_state_t *s = calloc(1, sizeof *s + nd * sizeof(double) + (size_t)np * O * sizeof(slot_t));
    if (!s)
        return NULL;
    double *p = (double *)(s + 1);
    s->lp = p, p += (size_t)C * D;
    s->y = p, p += (size_t)C * D;
    s->xi = p, p += (size_t)C * D;
    s->tw = p, p += (size_t)C * D;
    s->var = p, p += C;
    s->lin_t = p, p += C;
    s->lin_var = p, p += C;
    s->t = p, p += C;
    s->sp = p, p += C;
    s->a = (slot_t *)p;
    s->e = e;
    s->def = def;
    s->model = model;
    s->phased = phased != 0;
    s->np = np;
    return s;
}

HM_API int hm_est_state_open(hm_est_state_t **out, hm_estimator_t *e, hm_est_model_t model, int phased)
{
    *out = NULL;
    hm__errclear();
    if ((unsigned)model >= HM_EST_NMODELS)
        return hm__errf(HM_EUSAGE, "unknown model %d", (int)model);
    hm_est_state_t *s = state_new(e, model, phased, e->def);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < (size_t)s->np * e->nobj; i++)
        s->a[i] = (slot_t){(int16_t)s->def, 100};
    recompute(s);
    *out = s;
    return 0;
}

HM_API void hm_est_state_close(hm_est_state_t *s)
{
    free(s); /* one allocation (state_new) */
}

HM_API int hm_est_state_copy(hm_est_state_t *dst, const hm_est_state_t *src)
{
    hm__errclear();
    if (dst->e != src->e || dst->model != src->model || dst->phased != src->phased)
        return hm__errf(HM_EUSAGE, "states of different estimators, models or phasing");
    calibrated(src);
    const hm_estimator_t *e = src->e;
    int C = nclass(src), D = e->ndev;
    memcpy(dst->a, src->a, (size_t)src->np * e->nobj * sizeof *dst->a);
    memcpy(dst->lp, src->lp, (size_t)C * D * sizeof(double));
    memcpy(dst->y, src->y, (size_t)C * D * sizeof(double));
    memcpy(dst->xi, src->xi, (size_t)C * D * sizeof(double));
    memcpy(dst->tw, src->tw, (size_t)C * D * sizeof(double));
    memcpy(dst->var, src->var, (size_t)C * sizeof(double));
    memcpy(dst->lin_t, src->lin_t, (size_t)C * sizeof(double));
    memcpy(dst->lin_var, src->lin_var, (size_t)C * sizeof(double));
    memcpy(dst->t, src->t, (size_t)C * sizeof(double));
    memcpy(dst->sp, src->sp, (size_t)C * sizeof(double));
    dst->mig = src->mig;
    dst->total = src->total;
    dst->calib_gen = src->calib_gen;
    return 0;
}

HM_API int hm_est_state_move(hm_est_state_t *s, int phase, int obj, int dev, int pct, double *runtime_ns)
{
    hm__errclear();
    hm_estimator_t *e = s->e;
    int O = e->nobj, P = e->nphase;
    if (obj < 0 || obj >= O || dev < 0 || dev >= e->ndev || pct < 0 || pct > 100 || phase < -1 || phase >= P)
        return hm__errf(HM_ERANGE, "move of object %d to device %d (%d%%) in phase %d: out of range", obj, dev, pct, phase);
    if (obj == O - 1)
        return hm__errf(HM_EUSAGE, "the untracked pseudo-object cannot be moved");
    if (phase >= 0 && !s->phased)
        return hm__errf(HM_EUSAGE, "a phase was given to a state without phases");
    calibrated(s);
    if (pct == 0 || dev == s->def)
        dev = s->def, pct = 100;
    slot_t nw = {(int16_t)dev, (int16_t)pct};
    int p0 = phase < 0 ? 0 : phase, p1 = phase < 0 ? s->np : phase + 1;
    for (int p = p0; p < p1; p++) {
        slot_t *cur = &s->a[(size_t)p * O + obj];
        if (cur->dev == nw.dev && cur->pct == nw.pct)
            continue;
        /* Migration: boundaries into and out of phase p change. */
        if (s->phased)
            for (int b = 0; b < P; b++) {
                int nin = e->trans[b * P + p], nout = e->trans[p * P + b];
                if (!nin && !nout)
                    continue;
                slot_t other = s->a[(size_t)b * O + obj];
                if (b == p)
                    continue;
                s->mig += nin * (move_cost(e, s->def, obj, other, nw) - move_cost(e, s->def, obj, other, *cur));
                s->mig += nout * (move_cost(e, s->def, obj, nw, other) - move_cost(e, s->def, obj, *cur, other));
            }
        for (int c = 0; c < nclass(s); c++) {
            if (s->phased && phase_of(s, c) != p)
                continue;
            apply(s, c, obj, *cur, -1);
            apply(s, c, obj, nw, 1);
            double t = class_time(s, c);
            s->total += t - s->t[c];
            s->t[c] = t;
        }
        *cur = nw;
    }
    /* Keep the running sums from drifting over long searches: migration
     * is never negative, though adding and taking back the same costs can
     * leave a rounding error below zero. */
    if (s->mig < 0)
        s->mig = 0;
    double sum = s->mig, mix;
    for (int c = 0; c < nclass(s); c++)
        sum += s->t[c];
    mix_factor(s, &mix);
    s->total = sum + mix;
    if (runtime_ns)
        *runtime_ns = s->total;
    return 0;
}

HM_API double hm_est_state_runtime(const hm_est_state_t *s)
{
    calibrated(s);
    return s->total;
}

/* The placement's spread between its device runs, the scale of the
 * interval's model error (docs/estimator.md, "The interval"): per class,
 * with w_d the share of the class's traffic (bytes read and written back,
 * sampled and unsampled; where the class has none, of the residuals'
 * basis) that the placement puts on device d and T_d the class's time in
 * d's run, sum_d w_d |T_d - sum_e w_e T_e|, summed over the classes. It is
 * zero with all data on one device, which the model reproduces exactly,
 * and grows with the share moved between devices of different speed: for
 * two devices, 2 w (1 - w) |T_1 - T_2|. Summed rather than added in
 * quadrature, as a model's error in one class is no more independent of
 * its error in the next than the classes' shared fit is. */
static double spread(const hm_est_state_t *s)
{
    if (s->model != HM_EST_DEFAULT)
        return 0;
    double sum = 0;
    for (int c = 0; c < s->e->dm.ncls; c++)
        sum += class_spread(s, c);
    return sum;
}

HM_API int hm_est_state_estimate(hm_est_state_t *s, hm_estimate_t *out)
{
    hm__errclear();
    calibrated(s);
    double var = 0;
    /* A blended split's classes count at their weights: the two
     * preparations draw on the same samples, so their variances average
     * rather than add in quadrature. */
    for (int c = 0; c < nclass(s); c++)
        var += s->model == HM_EST_DEFAULT ? s->var[c] * s->e->dm.cls_w[c] : s->lin_var[c];
    /* Sampling error (1.96 sigma) and model error (a split-conformal
     * quantile times the spread between the device runs) in quadrature:
     * two independent errors. */
    double hs = 1.96 * sqrt(var > 0 ? var : 0), sp = spread(s);
    double hm = RULE(R_MODEL_ERROR) ? TUNE(T_MODEL_ERROR_Q) * sp : 0, h = sqrt(hs * hs + hm * hm);
    out->runtime_ns = s->total;
    out->lo_ns = s->total - h > 0 ? s->total - h : 0;
    out->hi_ns = s->total + h;
    out->migration_ns = s->mig;
    out->sampling_ns = hs;
    out->model_ns = hm;
    out->spread_ns = sp;
    return 0;
}

HM_API int hm_est_state_device(const hm_est_state_t *s, int phase, int obj, int *pct)
{
    const hm_estimator_t *e = s->e;
    if (obj < 0 || obj >= e->nobj || phase >= e->nphase)
        return hm__errf(HM_ERANGE, "object %d, phase %d: out of range", obj, phase);
    int p = s->phased && phase > 0 ? phase : 0;
    slot_t sl = s->a[(size_t)p * e->nobj + obj];
    if (pct)
        *pct = sl.pct;
    return sl.dev;
}

HM_API uint64_t hm_est_state_bytes(const hm_est_state_t *s, int dev)
{
    const hm_estimator_t *e = s->e;
    uint64_t peak = 0;
    for (int p = 0; p < s->np; p++) {
        uint64_t b = 0;
        for (int o = 0; o < e->nobj - 1; o++) {
            slot_t sl = s->a[(size_t)p * e->nobj + o];
            uint64_t size = e->obj[o].size;
            if (sl.dev == dev)
                b += sl.pct >= 100 ? size : (uint64_t)((double)size * sl.pct / 100.0 + 0.5);
            else if (dev == s->def)
                b += (uint64_t)((double)size * (100 - sl.pct) / 100.0 + 0.5);
        }
        peak = b > peak ? b : peak;
    }
    return peak;
}

/* Rules of one assignment: one site rule per object away from the default
 * device; named objects by name, since sites can be shared. */
static json_t *rules_json(const hm_est_state_t *s, int p)
{
    const hm_estimator_t *e = s->e;
    json_t *rules = json_array();
    for (int o = 0; o < e->nobj - 1; o++) {
        slot_t sl = s->a[(size_t)p * e->nobj + o], top = s->a[o];
        /* Phase lists fall back to the top-level rules, so they name every
         * object placed otherwise than there, the default device included. */
        if (p == 0 ? sl.dev == s->def : sl.dev == top.dev && sl.pct == top.pct)
            continue;
        json_t *r = json_object();
        if (e->obj[o].name) {
            json_object_set_new(r, "name", json_string(e->obj[o].name));
        } else {
            char site[32];
            snprintf(site, sizeof site, "0x%016llx", (unsigned long long)e->obj[o].site);
            json_object_set_new(r, "site", json_string(site));
        }
        if (sl.pct < 100)
            json_object_set_new(r, "pages_percent", json_integer(sl.pct));
        json_object_set_new(r, "device", json_string(e->dev_name[sl.dev]));
        json_array_append_new(rules, r);
    }
    return rules;
}

HM_API char *hm_est_state_placement_json(const hm_est_state_t *s)
{
    const hm_estimator_t *e = s->e;
    json_t *root = json_object();
    json_object_set_new(root, "default", json_string(e->dev_name[s->def]));
    json_object_set_new(root, "rules", rules_json(s, 0));
    if (s->phased) {
        json_t *ph = json_object();
        for (int p = 1; p < e->nphase; p++) {
            json_t *r = json_object();
            json_object_set_new(r, "rules", rules_json(s, p));
            json_object_set_new(ph, e->phase_name[p], r);
        }
        json_object_set_new(root, "phases", ph);
    }
    char *txt = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    return txt;
}

/* ------------------------------------------------------ placement files */

/* Matches every object to the placement's rules, in each assignment (phase
 * label when the placement has phases), into @p a: what a placement file
 * means for this summary. Rules are matched as the simulator and `hetmem
 * run` do, per object in the innermost phase; this counts the rules' hits. */
static int compile_placement(hm_estimator_t *e, hm_placement_t *pl, int phased, int np, slot_t *a)
{
    int O = e->nobj, pdef = hm_placement_default_device(pl);
    /* The untracked data and unmatched objects go to the placement's default
     * device, which may differ from the machine's first device. */
    for (int p = 0; p < np; p++)
        for (int o = 0; o < O; o++)
            a[(size_t)p * O + o] = (slot_t){(int16_t)pdef, 100};
    for (int p = 0; p < np; p++) {
        const char *phase = phased && p > 0 ? e->phase_name[p] : NULL;
        for (int o = 0; o < O - 1; o++) {
            hm_object_desc_t d = {e->obj[o].site, e->obj[o].name, 0, e->obj[o].size, e->obj[o].source};
            hm_place_t m;
            hm_placement_match(pl, phase, &d, &m);
            if (m.device < 0 || m.device >= e->ndev)
                return hm__errf(HM_ENODEV, "placement device %d is not one of the traces' devices", m.device);
            int pct = m.pages_percent >= 100 ? 100 : m.pages_percent;
            /* A split whose other part is not on the default device is
             * estimated as its larger part. */
            if (pct < 100 && m.default_device != pdef && pct < 50)
                m.device = m.default_device, pct = 100;
            a[(size_t)p * O + o] = m.device == pdef || pct == 0 ? (slot_t){(int16_t)pdef, 100}
                                                                : (slot_t){(int16_t)m.device, (int16_t)pct};
        }
    }
    return 0;
}

/* The compiled placement of @p serial into @p a, when the estimator has it. */
static int pcache_get(hm_estimator_t *e, uint64_t serial, int np, slot_t *a)
{
    int hit = 0;
    pthread_mutex_lock(&e->pc_mu);
    for (int i = 0; i < HM__EST_PCACHE && !hit; i++)
        if (e->pc[i].serial == serial && e->pc[i].np == np) {
            memcpy(a, e->pc[i].a, (size_t)np * e->nobj * sizeof *a);
            e->pc[i].used = ++e->pc_clock;
            hit = 1;
        }
    pthread_mutex_unlock(&e->pc_mu);
    return hit;
}

/* Keeps a compiled placement, in place of the least recently used one. */
static void pcache_put(hm_estimator_t *e, uint64_t serial, int np, const slot_t *a)
{
    size_t bytes = (size_t)np * e->nobj * sizeof *a;
    slot_t *copy = malloc(bytes);
    if (!copy)
        return; /* only a cache */
    memcpy(copy, a, bytes);
    pthread_mutex_lock(&e->pc_mu);
    int v = 0;
    for (int i = 1; i < HM__EST_PCACHE; i++)
        if (e->pc[i].used < e->pc[v].used)
            v = i;
    free(e->pc[v].a);
    e->pc[v] = (hm__est_pcache_t){serial, ++e->pc_clock, np, copy};
    pthread_mutex_unlock(&e->pc_mu);
}

HM_API int hm_estimator_estimate(hm_estimator_t *e, hm_placement_t *pl, hm_est_model_t model,
                                 hm_estimate_t *out, const hm_est_breakdown_t **bd)
{
    hm__errclear();
    if ((unsigned)model >= HM_EST_NMODELS)
        return hm__errf(HM_EUSAGE, "unknown model %d", (int)model);
    int O = e->nobj, P = e->nphase;
    int pdef = hm_placement_default_device(pl);
    if (pdef < 0 || pdef >= e->ndev)
        return hm__errf(HM_ENODEV, "placement default device %d is not one of the traces' %d devices", pdef, e->ndev);
    int phased = hm_placement_has_phases(pl);
    hm_est_state_t *s = state_new(e, model, phased, pdef);
    if (!s)
        return -ENOMEM;
    /* A placement is matched to the objects once per estimator; estimating
     * it again (a search that re-reads its candidates) reuses the match. */
    uint64_t serial = hm_placement_serial(pl);
    if (!pcache_get(e, serial, s->np, s->a)) {
        int rc = compile_placement(e, pl, phased, s->np, s->a);
        if (rc < 0) {
            hm_est_state_close(s);
            return rc;
        }
        pcache_put(e, serial, s->np, s->a);
    }
    recompute(s);
    hm_est_state_estimate(s, out);
    if (bd) {
        const hm__est_default_t *m = &e->dm;
        int C = nclass(s);
        memset(e->bd_phase, 0, (size_t)P * sizeof *e->bd_phase);
        double mix, f = mix_factor(s, &mix);
        for (int c = 0; c < C; c++)
            e->bd_phase[phase_of(s, c)] += s->t[c] + (f != 0 ? f * m->mix * s->sp[c] : 0);
        for (int o = 0; o < O; o++) {
            double t = 0;
            for (int c = 0; c < C; c++) {
                slot_t sl = s->a[(size_t)slot_of(s, c) * O + o];
                double f = frac(e, o, sl.pct);
                if (model == HM_EST_DEFAULT)
                    t += m->cls_w[c] * (f * m->k[(size_t)c * e->ndev + sl.dev] * m->lat[ix3(e, c, o, sl.dev)] +
                                        (1 - f) * m->k[(size_t)c * e->ndev + pdef] * m->lat[ix3(e, c, o, pdef)]);
                else
                    t -= f * e->lin_phase_gain[ix3(e, c, o, sl.dev)];
            }
            e->bd_obj[o] = t;
        }
        *bd = &e->bd;
    }
    hm_est_state_close(s);
    return 0;
}

HM_API int hm_estimator_estimate_job(hm_estimator_t *const *ranks, int nranks, hm_placement_t *p, hm_est_model_t model,
                                     hm_estimate_t *out)
{
    hm__errclear();
    if (nranks < 1)
        return hm__errf(HM_EUSAGE, "a job estimate needs at least one rank");
    /* Phase labels by name over all ranks, each with the slowest rank's time. */
    int cap = 0, n = 0;
    for (int r = 0; r < nranks; r++)
        cap += ranks[r]->nphase;
    const char **names = calloc((size_t)cap + 1, sizeof *names);
    double *tmax = calloc((size_t)cap + 1, sizeof *tmax), mig = 0, lo = 1, hi = 1, rs = 0, rm = 0, rp = 0;
    int rc = names && tmax ? 0 : -ENOMEM;
    for (int r = 0; r < nranks && rc == 0; r++) {
        hm_estimate_t est;
        const hm_est_breakdown_t *bd;
        if ((rc = hm_estimator_estimate(ranks[r], p, model, &est, &bd)) < 0) {
            rc = hm__errf(rc, "rank %d: %s", r, hm_errdetail());
            break;
        }
        for (int c = 0; c < bd->nphases; c++) {
            const char *nm = ranks[r]->phase_name[c];
            int k = 0;
            while (k < n && strcmp(names[k], nm))
                k++;
            if (k == n)
                names[n++] = nm;
            if (bd->phase_ns[c] > tmax[k])
                tmax[k] = bd->phase_ns[c];
        }
        mig = est.migration_ns > mig ? est.migration_ns : mig;
        if (est.runtime_ns > 0) {
            lo = fmin(lo, est.lo_ns / est.runtime_ns);
            if (est.hi_ns / est.runtime_ns > hi) {
                hi = est.hi_ns / est.runtime_ns;
                /* The widest rank's terms, relative, as its interval. */
                rs = est.sampling_ns / est.runtime_ns, rm = est.model_ns / est.runtime_ns;
                rp = est.spread_ns / est.runtime_ns;
            }
        }
    }
    if (rc == 0) {
        double t = mig;
        for (int k = 0; k < n; k++)
            t += tmax[k];
        *out = (hm_estimate_t){t, t * lo, t * hi, mig, t * rs, t * rm, t * rp};
    }
    free(names);
    free(tmax);
    return rc;
}

/* ------------------------------------------------------------- explain */

json_t *hm__est_explain(hm_estimator_t *e, hm_placement_t *pl)
{
    hm__errclear();
    int pdef = hm_placement_default_device(pl), D = e->ndev;
    if (pdef < 0 || pdef >= D) {
        hm__errf(HM_ENODEV, "placement default device %d is not one of the traces' %d devices", pdef, D);
        return NULL;
    }
    hm_est_state_t *s = state_new(e, HM_EST_DEFAULT, hm_placement_has_phases(pl), pdef);
    if (!s) {
        hm__errf(-ENOMEM, "explain");
        return NULL;
    }
    if (compile_placement(e, pl, s->phased, s->np, s->a) < 0) {
        hm_est_state_close(s);
        return NULL;
    }
    recompute(s);
    const hm__est_default_t *m = &e->dm;
    double mixall, f = mix_factor(s, &mixall);
    json_t *out = json_array();
    for (int c = 0; c < m->ncls; c++) {
        const double *lp = &s->lp[(size_t)c * D], *y = &s->y[(size_t)c * D];
        double lat = m->c_ns[c], bp = 0, r = 0, kk = m->k[(size_t)c * D];
        int bd = -1;
        for (int d = 0; d < D; d++) {
            lat += lp[d];
            if (y[d] > bp)
                bp = y[d], bd = d;
            r += s->xi[(size_t)c * D + d] / m->xwsum[(size_t)c * D + d] * m->resid[(size_t)c * D + d];
        }
        bp = channel_side(e, y, bp); /* with a calibrated overlap, the other devices' share too */
        /* What the latency side and the channels give together: their max
         * for a class timed as one, more where its windows' profile makes
         * the bursts wait; the loaded latency adds to the latency side. */
        double both = lat_bw_time(e, c, m->c_ns[c], lp, y), mx = lat > bp ? lat : bp;
        double sp = class_spread(s, c), mix = f != 0 ? f * m->mix * sp : 0;
        /* Above both sides: loaded latencies (at the larger side's time,
         * the busier channels' loads wait longer), else the bursts. */
        double loaded = mx > 0 ? lat_side_at(e, c, m->c_ns[c], lp, y, mx) : 0;
        const char *binds = !(mx > 0)                  ? "residual"
                            : both > mx * (1 + 1e-9) ? (loaded > mx * (1 + 1e-9) ? "latency, loaded" : "channels, in bursts")
                            : bp > lat        ? "channels"
                                              : "latency";
        json_array_append_new(
            out, json_pack("{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:s?, s:f, s:f, s:f, s:f, s:f, s:s}", "phase",
                           e->phase_name[m->cls_phase[c]], "class", c, "weight", m->cls_w[c], "C_s", m->c_ns[c] / 1e9,
                           "k", kk,
                           "latency_s", lat / 1e9, "channel_s", bp / 1e9, "channel_device",
                           bd >= 0 ? e->dev_name[bd] : NULL, "bound_s", both / 1e9, "residual_s", r / 1e9,
                           "spread_s", sp / 1e9, "mix_s", mix / 1e9, "time_s", (s->t[c] + mix) / 1e9, "binds", binds));
    }
    hm_est_state_close(s);
    return out;
}

int hm__est_object_traffic(const hm_estimator_t *e, int o, double *rd, double *wr)
{
    *rd = *wr = 0;
    if (o < 0 || o >= e->nobj)
        return -EINVAL;
    const hm__est_default_t *m = &e->dm;
    for (int c = 0; c < m->ncls; c++) {
        size_t co = (size_t)c * e->nobj + o;
        *rd += m->cls_w[c] * (m->bytes[co] + m->bytes_x[co]);
        *wr += m->cls_w[c] * m->wbytes[co];
    }
    return 0;
}

/* ---------------------------------------------------------- calibration */

/* The runs' estimates (est) with the overlap at w and no mix term, and
 * the spreads (sp) the mix term moves them by. */
static int calib_eval(hm_estimator_t *e, hm_placement_t *const *pls, int n, double w, double *est, double *sp)
{
    e->dm.overlap = w;
    for (int i = 0; i < n; i++) {
        hm_estimate_t r, r1;
        /* The spread the mix term moves the estimate by: the estimate with
         * beta = 1 and no cap, less the one without the term. */
        e->dm.mix = 1, e->dm.mix_cap = INFINITY;
        int rc = hm_estimator_estimate(e, pls[i], HM_EST_DEFAULT, &r1, NULL);
        e->dm.mix = 0, e->dm.mix_cap = 0;
        if (rc < 0 || (rc = hm_estimator_estimate(e, pls[i], HM_EST_DEFAULT, &r, NULL)) < 0)
            return rc;
        est[i] = r.runtime_ns, sp[i] = r1.runtime_ns - r.runtime_ns;
    }
    return 0;
}

/* The least-squares beta of the runs' relative errors (u_i + beta s_i -
 * t_i) / t_i, into *beta, and their sum of squares at it: beta = sum a_i
 * b_i / sum a_i^2 with a_i = s_i / t_i, b_i = (t_i - u_i) / t_i. Runs whose
 * spread is below a millionth of their time (all data on one device)
 * cannot tell it: 0 then. */
static double fit_mix(const double *t, const double *u, const double *sp, int n, double *beta)
{
    double num = 0, den = 0, q = 0;
    for (int i = 0; i < n; i++) {
        double a = sp[i] / t[i], b = (t[i] - u[i]) / t[i];
        num += a * b, den += a * a;
    }
    *beta = den > 1e-12 * n ? num / den : 0;
    for (int i = 0; i < n; i++) {
        double x = (u[i] + *beta * sp[i] - t[i]) / t[i];
        q += x * x;
    }
    return q;
}

/* Mean |relative error| of the runs as the model now stands. */
static int calib_mean(hm_estimator_t *e, hm_placement_t *const *pls, const double *t, int n, double *mean)
{
    double a = 0;
    for (int i = 0; i < n; i++) {
        hm_estimate_t r;
        int rc = hm_estimator_estimate(e, pls[i], HM_EST_DEFAULT, &r, NULL);
        if (rc < 0)
            return rc;
        a += fabs(r.runtime_ns - t[i]) / t[i];
    }
    *mean = n ? a / n : 0;
    return 0;
}

/* docs/estimator.md, "Calibration on measured mixed runs": beta always,
 * by least squares (fit_mix); w with it only from three runs on, where
 * two parameters leave the runs something to be tested on. Then w is the
 * value in [0, 1] whose least-squares beta gives the smallest sum of
 * squared relative errors: the runs' estimates fall as w grows (each
 * class's channel side does), so that sum need not have one minimum over
 * [0, 1]: a grid of steps of 1/100 from w = 1 down, keeping a point only
 * when it is strictly better (runs that cannot tell leave w = 1), then
 * golden-section steps inside the best point's neighbours. beta's cap is
 * the runs' largest |t_i - u_i| / u_i at that w: no estimate moves by a
 * larger share of its time than the model was seen to miss by. */
HM_API int hm_estimator_calibrate(hm_estimator_t *e, hm_placement_t *const *pls, const double *measured_ns, int n,
                                  hm_est_calibration_t *out)
{
    hm__errclear();
    if (n < 0 || (n > 0 && (!pls || !measured_ns)))
        return hm__errf(HM_EUSAGE, "calibration: %d runs", n);
    for (int i = 0; i < n; i++)
        if (!pls[i] || !(measured_ns[i] > 0) || !(measured_ns[i] < 1e18))
            return hm__errf(HM_EUSAGE, "calibration run %d: its measured time must be a positive number of ns", i + 1);
    const double *t = measured_ns;
    double *est = calloc((size_t)(n > 0 ? n : 1) * 2, sizeof *est), *sp = est + (n > 0 ? n : 1);
    if (!est)
        return -ENOMEM;
    double before = 0, best_w = 1, best, q, mix = 0, cap = 0, after = 0;
    int rc = calib_eval(e, pls, n, 1, est, sp);
    if (rc < 0)
        goto fail;
    for (int i = 0; i < n; i++)
        before += fabs(est[i] - t[i]) / t[i] / n;
    best = fit_mix(t, est, sp, n, &mix);
    for (int g = 99; g >= 0 && n >= 3; g--) {
        if ((rc = calib_eval(e, pls, n, g / 100.0, est, sp)) < 0)
            goto fail;
        if ((q = fit_mix(t, est, sp, n, &mix)) < best * (1 - 1e-12))
            best = q, best_w = g / 100.0;
    }
    if (best_w < 1) {
        const double phi = 0.6180339887498949;
        double a = best_w > 0.01 ? best_w - 0.01 : 0, b = best_w + 0.01 < 1 ? best_w + 0.01 : 1;
        for (int it = 0; it < 40 && b - a > 1e-6; it++) {
            double x1 = b - phi * (b - a), x2 = a + phi * (b - a), q1, q2;
            if ((rc = calib_eval(e, pls, n, x1, est, sp)) < 0)
                goto fail;
            q1 = fit_mix(t, est, sp, n, &mix);
            if ((rc = calib_eval(e, pls, n, x2, est, sp)) < 0)
                goto fail;
            q2 = fit_mix(t, est, sp, n, &mix);
            if (q1 < best)
                best = q1, best_w = x1;
            if (q2 < best)
                best = q2, best_w = x2;
            if (q1 <= q2)
                b = x2;
            else
                a = x1;
        }
    }
    if ((rc = calib_eval(e, pls, n, best_w, est, sp)) < 0)
        goto fail;
    fit_mix(t, est, sp, n, &mix);
    for (int i = 0; i < n; i++)
        if (est[i] > 0 && fabs(t[i] - est[i]) / est[i] > cap)
            cap = fabs(t[i] - est[i]) / est[i];
    e->dm.mix = mix;
    e->dm.mix_cap = mix != 0 ? cap : 0;
    e->dm.calib_gen++;
    if ((rc = calib_mean(e, pls, t, n, &after)) < 0)
        goto fail;
    free(est);
    if (out)
        *out = (hm_est_calibration_t){best_w, before, after, e->dm.mix, e->dm.mix_cap};
    return 0;
fail:
    free(est);
    e->dm.overlap = 1;
    e->dm.mix = e->dm.mix_cap = 0;
    e->dm.calib_gen++;
    return rc;
}

HM_API double hm_estimator_overlap(const hm_estimator_t *e)
{
    return e->dm.overlap;
}

HM_API double hm_estimator_mix(const hm_estimator_t *e)
{
    return e->dm.mix;
}
