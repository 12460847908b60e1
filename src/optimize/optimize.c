/* Search driver: options, the unit list, capacity accounting, budget and
 * the reference placements. The algorithms live in their own files. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt_int.h"

static const char *const algo_names[HM_OPT_NALGOS] = {"rl", "greedy", "anneal", "exhaustive", "random"};

/* Default budgets in estimator calls: greedy and exhaustive end by
 * themselves; the sampling searches need a bound. */
#define DEFAULT_BUDGET 20000

HM_API const char *hm_optimize_algo_name(hm_optimize_algo_t a)
{
    return (unsigned)a < HM_OPT_NALGOS ? algo_names[a] : NULL;
}

HM_API int hm_optimize_algo_parse(const char *name, hm_optimize_algo_t *out)
{
    hm__errclear();
    for (int i = 0; name && i < HM_OPT_NALGOS; i++)
        if (strcmp(name, algo_names[i]) == 0) {
            *out = (hm_optimize_algo_t)i;
            return 0;
        }
    return hm__errf(HM_EUSAGE, "unknown algorithm '%s' (rl, greedy, anneal, exhaustive, random)", name ? name : "");
}

uint64_t hm__opt_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double hm__opt_unif(uint64_t *st)
{
    return (double)(hm__opt_rand(st) >> 11) * (1.0 / 9007199254740992.0);
}

int hm__opt_randint(uint64_t *st, int n)
{
    return n <= 1 ? 0 : (int)(hm__opt_rand(st) % (uint64_t)n);
}

int hm__opt_state(hm__opt_t *o, hm_est_state_t **out)
{
    int rc = hm_est_state_open(out, o->e, o->opts->model, o->opts->phased);
    for (int i = 0; rc >= 0 && o->def != o->estdef && i < o->nobj; i++) {
        rc = hm_est_state_move(*out, -1, o->objs[i], o->def, 100, NULL);
        o->calls++;
    }
    if (rc < 0) {
        hm_est_state_close(*out);
        *out = NULL;
    }
    return rc;
}

int hm__opt_dev(const hm__opt_t *o, const hm_est_state_t *s, int u, int *pct)
{
    int p = 100;
    int d = hm_est_state_device(s, o->units[u].phase, o->units[u].obj, &p);
    if (pct)
        *pct = p;
    return d;
}

/* Bytes an object of @p size placed on @p od with @p pct percent puts on @p dev. */
static uint64_t share(uint64_t size, int od, int pct, int dev, int def)
{
    if (od == def)
        return dev == def ? size : 0;
    uint64_t on = size * (uint64_t)pct / 100;
    if (od == dev)
        return on;
    return dev == def ? size - on : 0;
}

uint64_t hm__opt_bytes_in(const hm__opt_t *o, const hm_est_state_t *s, int u, int dev)
{
    int base = (u / o->nobj) * o->nobj;
    uint64_t sum = 0;
    for (int i = 0; i < o->nobj; i++) {
        int pct, d = hm__opt_dev(o, s, base + i, &pct);
        sum += share(o->units[base + i].size, d, pct, dev, o->def);
    }
    return sum;
}

int hm__opt_fits(const hm__opt_t *o, const hm_est_state_t *s, int u, int dev, int pct)
{
    if (o->cap[dev] == HM_OPT_UNLIMITED)
        return 1;
    int cp, cd = hm__opt_dev(o, s, u, &cp);
    uint64_t size = o->units[u].size;
    uint64_t now = hm__opt_bytes_in(o, s, u, dev);
    uint64_t after = now - share(size, cd, cp, dev, o->def) + share(size, dev, pct, dev, o->def);
    return after <= o->cap[dev];
}

int hm__opt_move(hm__opt_t *o, hm_est_state_t *s, int u, int dev, int pct, double *ns)
{
    if (!hm__opt_fits(o, s, u, dev, pct))
        return HM_ECAPACITY;
    int cp, cd = hm__opt_dev(o, s, u, &cp);
    int rc = hm_est_state_move(s, o->units[u].phase, o->units[u].obj, dev, pct, ns);
    o->calls++;
    if (rc < 0)
        return rc;
    /* The estimator's own byte count has the last word (it may round to
     * pages): a move it finds over capacity is undone. */
    if (o->cap[dev] != HM_OPT_UNLIMITED && hm_est_state_bytes(s, dev) > o->cap[dev]) {
        rc = hm_est_state_move(s, o->units[u].phase, o->units[u].obj, cd, cp, NULL);
        o->calls++;
        return rc < 0 ? rc : HM_ECAPACITY;
    }
    return 0;
}

static double elapsed_s(const hm__opt_t *o)
{
    return (double)(hm__now_ns() - o->t0_ns) * 1e-9;
}

int hm__opt_spent(const hm__opt_t *o)
{
    if (o->calls >= o->budget)
        return 1;
    return o->deadline_ns && hm__now_ns() >= o->deadline_ns;
}

int hm__opt_affords(const hm__opt_t *o, uint64_t calls)
{
    return o->budget == UINT64_MAX || o->calls + calls <= o->budget;
}

double hm__opt_progress(const hm__opt_t *o)
{
    double p = o->budget == UINT64_MAX ? 0 : (double)o->calls / (double)o->budget;
    if (o->opts->time_s > 0) {
        double t = elapsed_s(o) / o->opts->time_s;
        if (t > p)
            p = t;
    }
    return p > 1 ? 1 : p;
}

int hm__opt_offer(hm__opt_t *o, const hm_est_state_t *s, double ns)
{
    if (!(ns < o->best_ns))
        return 0;
    o->best_ns = ns;
    return hm_est_state_copy(o->best, s);
}

int hm__opt_single_savings(hm__opt_t *o, double *sav, double *nomig)
{
    hm_est_state_t *s = NULL;
    int rc = hm__opt_state(o, &s);
    if (rc < 0)
        return rc;
    for (int u = 0; u < o->nunits; u++)
        for (int d = 0; d < o->ndev; d++) {
            sav[u * o->ndev + d] = 0;
            if (nomig)
                nomig[u * o->ndev + d] = 0;
            if (d == o->def)
                continue;
            double ns;
            /* Capacity is ignored here on purpose: these are bounds and
             * features, not placements. */
            rc = hm_est_state_move(s, o->units[u].phase, o->units[u].obj, d, 100, &ns);
            o->calls++;
            if (rc < 0)
                goto out;
            sav[u * o->ndev + d] = o->base_ns - ns;
            if (nomig) {
                hm_estimate_t est;
                if ((rc = hm_est_state_estimate(s, &est)) < 0)
                    goto out;
                nomig[u * o->ndev + d] = o->base_ns - (est.runtime_ns - est.migration_ns);
            }
            rc = hm_est_state_move(s, o->units[u].phase, o->units[u].obj, o->def, 100, NULL);
            o->calls++;
            if (rc < 0)
                goto out;
        }
    rc = 0;
out:
    hm_est_state_close(s);
    return rc;
}

static void ctx_free(hm__opt_t *o)
{
    free(o->objs);
    free(o->units);
    free(o->cap);
    free(o->speed);
    hm_est_state_close(o->best);
    memset(o, 0, sizeof *o);
}

static int ctx_init(hm__opt_t *o, hm_estimator_t *e, const hm_optimize_opts_t *opts)
{
    char b1[32], b2[32];
    int rc;
    memset(o, 0, sizeof *o);
    o->e = e;
    o->opts = opts;
    if ((unsigned)opts->algo >= HM_OPT_NALGOS)
        return hm__errf(HM_EUSAGE, "unknown algorithm %d", (int)opts->algo);
    if ((unsigned)opts->model >= HM_EST_NMODELS)
        return hm__errf(HM_EUSAGE, "unknown model %d", (int)opts->model);
    if (opts->split_step < 0 || opts->split_step > 100)
        return hm__errf(HM_EUSAGE, "split step %d%% is not within 1..100", opts->split_step);
    if (opts->time_s < 0 || isnan(opts->time_s))
        return hm__errf(HM_EUSAGE, "time limit must be positive");
    o->ndev = hm_estimator_ndevices(e);
    o->def = hm_estimator_default_device(e);
    if (o->ndev < 2 || o->def < 0 || o->def >= o->ndev)
        return hm__errf(HM_EUSAGE, "the estimator needs at least two devices");
    o->nph = opts->phased ? hm_estimator_nphases(e) : 1;
    if (o->nph < 1)
        o->nph = 1;
    int n = hm_estimator_nobjects(e);
    o->objs = hm__xcalloc((size_t)(n > 0 ? n : 1), sizeof *o->objs);
    uint64_t footprint = 0;
    for (int i = 0; i < n; i++) {
        hm_est_object_t ob;
        if ((rc = hm_estimator_object(e, i, &ob)) < 0)
            return rc;
        if (!ob.movable)
            continue;
        o->objs[o->nobj++] = i;
        footprint += ob.size;
    }
    o->nunits = o->nobj * o->nph;
    o->units = hm__xcalloc((size_t)(o->nunits ? o->nunits : 1), sizeof *o->units);
    for (int u = 0; u < o->nunits; u++) {
        hm_est_object_t ob;
        o->units[u].obj = o->objs[u % o->nobj];
        o->units[u].phase = opts->phased ? u / o->nobj : -1;
        hm_estimator_object(e, o->units[u].obj, &ob);
        o->units[u].size = ob.size;
    }
    o->cap = hm__xcalloc((size_t)o->ndev, sizeof *o->cap);
    for (int d = 0; d < o->ndev; d++) {
        uint64_t dc = hm_estimator_device_capacity(e, d);
        uint64_t c = opts->capacity ? opts->capacity[d] : (dc ? dc : HM_OPT_UNLIMITED);
        if (c != HM_OPT_UNLIMITED && dc && c > dc)
            return hm__errf(HM_ECAPACITY, "%s: capacity %s is larger than the device's %s",
                            hm_estimator_device_name(e, d), hm__fmt_size(c, b1, sizeof b1),
                            hm__fmt_size(dc, b2, sizeof b2));
        o->cap[d] = c;
    }
    o->speed = hm__xcalloc((size_t)o->ndev, sizeof *o->speed);
    for (int d = 0; d < o->ndev; d++)
        o->speed[d] = d;
    for (int i = 1; i < o->ndev; i++) /* insertion sort, fastest first; stable */
        for (int j = i; j > 0 && hm_estimator_measured_ns(e, o->speed[j]) < hm_estimator_measured_ns(e, o->speed[j - 1]); j--) {
            int t = o->speed[j];
            o->speed[j] = o->speed[j - 1];
            o->speed[j - 1] = t;
        }
    /* The fallback: the default device if it holds the footprint, else the
     * slowest device that does (a capped fast default, as on a CXL
     * machine where DDR is the default). */
    o->estdef = o->def;
    if (o->cap[o->def] != HM_OPT_UNLIMITED && footprint > o->cap[o->def]) {
        o->def = -1;
        for (int k = o->ndev - 1; k >= 0 && o->def < 0; k--)
            if (o->cap[o->speed[k]] == HM_OPT_UNLIMITED || footprint <= o->cap[o->speed[k]])
                o->def = o->speed[k];
        if (o->def < 0)
            return hm__errf(HM_ECAPACITY, "no device can hold the footprint %s (default device %s: %s)",
                            hm__fmt_size(footprint, b2, sizeof b2), hm_estimator_device_name(e, o->estdef),
                            hm__fmt_size(o->cap[o->estdef], b1, sizeof b1));
        if (opts->split)
            return hm__errf(HM_EUSAGE, "page splits need a default device that holds the footprint");
    }
    o->budget = opts->budget ? opts->budget
                : (opts->algo == HM_OPT_GREEDY || opts->algo == HM_OPT_EXHAUSTIVE) ? UINT64_MAX : DEFAULT_BUDGET;
    /* With a budget of at least 50 calls a unit, the search leaves
     * canonical() its two calls per unit (at most 4% of the budget); a
     * smaller budget is the search's alone, and canonical() uses what it
     * leaves. */
    o->reserve = o->budget != UINT64_MAX && o->budget >= 50 * (uint64_t)o->nunits ? 2 * (uint64_t)o->nunits : 0;
    o->budget -= o->reserve;
    o->t0_ns = hm__now_ns();
    o->deadline_ns = opts->time_s > 0 ? o->t0_ns + (uint64_t)(opts->time_s * 1e9) : 0;
    o->rng = opts->seed ^ 0x6a09e667f3bcc909ull;
    if ((rc = hm__opt_state(o, &o->best)) < 0)
        return rc;
    o->base_ns = o->best_ns = hm_est_state_runtime(o->best);
    return 0;
}

/* Whether rule @p r selects estimator object @p ob (by name, else site). */
static int selects(json_t *r, const hm_est_object_t *ob)
{
    const char *nm = json_string_value(json_object_get(r, "name"));
    if (nm)
        return ob->name && strcmp(nm, ob->name) == 0;
    const char *site = json_string_value(json_object_get(r, "site"));
    uint64_t v;
    return site && hm__parse_u64(site, &v) == 0 && v == ob->site;
}

static const char *rule_device(json_t *rules, const hm_est_object_t *ob)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
        if (selects(r, ob))
            return json_string_value(json_object_get(r, "device"));
    return NULL;
}

/* A phase's rule list falls back to the top-level rules for objects it does
 * not match (docs/placement-format.md). Checks, for every phase and object,
 * that the file puts the object where the search did, and adds an explicit
 * rule where it would not (say an object the phase keeps on the default
 * device while the top-level rules send it elsewhere), so that the file
 * never differs from the estimate, nor exceeds a capacity. Returns a
 * malloc'd string, or NULL. */
static char *placement_json(const hm__opt_t *o, const hm_est_state_t *s)
{
    char *txt = hm_est_state_placement_json(s);
    if (!txt || !o->opts->phased)
        return txt;
    json_t *root = json_loads(txt, 0, NULL);
    json_t *top = json_object_get(root, "rules"), *phases = json_object_get(root, "phases");
    const char *def = json_string_value(json_object_get(root, "default"));
    if (!root || !json_is_array(top) || !json_is_object(phases) || !def) {
        json_decref(root);
        return txt;
    }
    int changed = 0;
    for (int p = 1; p < o->nph; p++) {
        const char *pname = hm_estimator_phase_name(o->e, p);
        json_t *ph = pname ? json_object_get(phases, pname) : NULL;
        if (!ph) {
            ph = json_pack("{s:[]}", "rules");
            json_object_set_new(phases, pname, ph);
        }
        json_t *rules = json_object_get(ph, "rules");
        for (int i = 0; i < o->nobj; i++) {
            hm_est_object_t ob;
            if (hm_estimator_object(o->e, o->objs[i], &ob) < 0)
                continue;
            int pct = 100, want = hm_est_state_device(s, p, o->objs[i], &pct);
            const char *have = rule_device(rules, &ob);
            if (!have)
                have = rule_device(top, &ob);
            if (!have)
                have = def;
            const char *wn = hm_estimator_device_name(o->e, want);
            if (!wn || strcmp(have, wn) == 0)
                continue;
            json_t *r = json_object();
            if (ob.name) {
                json_object_set_new(r, "name", json_string(ob.name));
            } else {
                char site[32];
                snprintf(site, sizeof site, "0x%016llx", (unsigned long long)ob.site);
                json_object_set_new(r, "site", json_string(site));
            }
            if (pct < 100 && want != o->estdef)
                json_object_set_new(r, "pages_percent", json_integer(pct));
            json_object_set_new(r, "device", json_string(wn));
            json_array_insert_new(rules, 0, r);
            changed = 1;
        }
    }
    char *fixed = changed ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!fixed)
        return txt;
    free(txt);
    return fixed;
}

static int fill_result(hm__opt_t *o, hm_optimize_result_t *res)
{
    int rc = hm_est_state_estimate(o->best, &res->estimate);
    if (rc < 0)
        return rc;
    res->placement_json = placement_json(o, o->best);
    if (!res->placement_json)
        return -ENOMEM;
    res->state = o->best;
    o->best = NULL;
    res->estimator_calls = o->calls;
    res->wall_s = elapsed_s(o);
    res->complete = o->complete;
    res->episodes = o->episodes;
    return 0;
}

/* A phased search starts from the best static placement: keeping every
 * object on one device in all phases is a phased placement too (with no
 * migration), so the phased result is never worse than it. The static
 * placement comes from the exhaustive search when the objects are few
 * enough, else from greedy; its calls count against the budget. */
static int static_start(hm__opt_t *o)
{
    hm_optimize_opts_t so = *o->opts;
    hm_optimize_result_t sr;
    so.phased = 0;
    so.algo = o->nobj <= HM_OPT_EXHAUSTIVE_MAX ? HM_OPT_EXHAUSTIVE : HM_OPT_GREEDY;
    so.budget = 0;
    so.time_s = 0;
    so.policy_in = so.policy_out = NULL;
    so.capacity = NULL;
    uint64_t *cap = hm__xcalloc((size_t)o->ndev, sizeof *cap);
    memcpy(cap, o->cap, (size_t)o->ndev * sizeof *cap);
    so.capacity = cap;
    int rc = hm_optimize_run(o->e, &so, &sr);
    free(cap);
    if (rc < 0)
        return rc;
    o->calls += sr.estimator_calls;
    hm_est_state_t *s = NULL;
    double ns = o->base_ns;
    if ((rc = hm__opt_state(o, &s)) < 0)
        goto out;
    for (int i = 0; i < o->nobj; i++) {
        int pct = 100, d = hm_est_state_device(sr.state, -1, o->objs[i], &pct);
        for (int p = 0; d >= 0 && d != o->def && p < o->nph; p++)
            if ((rc = hm__opt_move(o, s, p * o->nobj + i, d, pct, &ns)) < 0 && rc != HM_ECAPACITY)
                goto out;
    }
    rc = hm__opt_offer(o, s, hm_est_state_runtime(s));
out:
    hm_est_state_close(s);
    hm_optimize_result_free(&sr);
    return rc;
}

/* A placement moves only what the estimator says matters: after the search,
 * each unit off the default device whose move back to it leaves the
 * estimate no higher (and fits) goes back, in unit order, while the budget
 * has the two calls a try takes. Searches end with such units wherever they
 * last put them (rl's episodes, greedy's capacity shuffles), so two
 * placements equal under the estimator differed in data pinned for no
 * predicted gain: in the optimizer bench, rtm's `wavelet` and a small fft
 * table, on the fast device in one placement and not in the other. */
static int canonical(hm__opt_t *o)
{
    hm_est_state_t *s = o->best;
    o->budget += o->reserve;
    o->reserve = 0;
    for (int u = 0; u < o->nunits && hm__opt_affords(o, 2); u++) {
        int pct, d = hm__opt_dev(o, s, u, &pct);
        if (d < 0 || d == o->def)
            continue;
        double ns;
        int rc = hm__opt_move(o, s, u, o->def, 100, &ns);
        if (rc == HM_ECAPACITY)
            continue;
        if (rc < 0)
            return rc;
        if (ns <= o->best_ns * (1 + 1e-12)) {
            o->best_ns = ns < o->best_ns ? ns : o->best_ns;
            continue;
        }
        if ((rc = hm__opt_move(o, s, u, d, pct, NULL)) < 0)
            return rc;
    }
    return 0;
}

HM_API int hm_optimize_run(hm_estimator_t *e, const hm_optimize_opts_t *opts, hm_optimize_result_t *res)
{
    hm__errclear();
    hm__opt_t o;
    memset(res, 0, sizeof *res);
    int rc = ctx_init(&o, e, opts);
    if (rc < 0)
        goto out;
    if (opts->algo == HM_OPT_EXHAUSTIVE && o.nunits > HM_OPT_EXHAUSTIVE_MAX) {
        rc = hm__errf(HM_ETOOBIG, "exhaustive search over %d %s is refused (at most %d; use rl, greedy or anneal)",
                      o.nunits, opts->phased ? "(phase, object) decisions" : "movable objects", HM_OPT_EXHAUSTIVE_MAX);
        goto out;
    }
    if (opts->phased && opts->algo == HM_OPT_RL && (rc = static_start(&o)) < 0)
        goto out;
    switch (opts->algo) {
    case HM_OPT_GREEDY: rc = hm__opt_greedy(&o); break;
    case HM_OPT_ANNEAL: rc = hm__opt_anneal(&o); break;
    case HM_OPT_EXHAUSTIVE: rc = hm__opt_exhaustive(&o); break;
    case HM_OPT_RANDOM: rc = hm__opt_random(&o); break;
    case HM_OPT_RL: rc = hm__opt_rl(&o); break;
    default: rc = HM_EUSAGE; break;
    }
    if (rc >= 0)
        rc = hm__opt_split_refine(&o);
    if (rc >= 0)
        rc = canonical(&o);
    if (rc >= 0)
        rc = fill_result(&o, res);
out:
    ctx_free(&o);
    if (rc < 0)
        hm_optimize_result_free(res);
    return rc;
}

HM_API int hm_optimize_reference(hm_estimator_t *e, const hm_optimize_opts_t *opts, hm_optimize_ref_t which,
                                 hm_optimize_result_t *res)
{
    hm__errclear();
    hm__opt_t o;
    memset(res, 0, sizeof *res);
    int rc = ctx_init(&o, e, opts);
    if (rc < 0)
        goto out;
    /* References start from the estimator's default, whatever the fallback. */
    hm_est_state_t *s = NULL;
    if ((rc = hm_est_state_open(&s, e, opts->model, opts->phased)) < 0)
        goto out;
    hm_est_state_close(o.best);
    o.best = s;
    int target = which == HM_OPT_REF_SLOWEST ? o.speed[o.ndev - 1]
                 : which == HM_OPT_REF_FASTEST ? o.speed[0] : o.estdef;
    for (int i = 0; which == HM_OPT_REF_FIRST_TOUCH && o.def != o.estdef && i < o.nobj && rc >= 0; i++) {
        rc = hm_est_state_move(s, -1, o.objs[i], o.def, 100, NULL);
        o.calls++;
    }
    for (int i = 0; i < o.nobj && rc >= 0; i++) {
        int obj = o.objs[i];
        if (which != HM_OPT_REF_FIRST_TOUCH) {
            if (target != o.estdef) {
                rc = hm_est_state_move(s, -1, obj, target, 100, NULL);
                o.calls++;
            }
            continue;
        }
        /* First touch: the fastest device with room, down to the fallback
         * device (where allocations land when nothing faster has room). */
        for (int k = 0; k < o.ndev && o.speed[k] != o.def; k++) {
            int d = o.speed[k];
            if ((rc = hm_est_state_move(s, -1, obj, d, 100, NULL)) < 0)
                break;
            o.calls++;
            if (o.cap[d] == HM_OPT_UNLIMITED || hm_est_state_bytes(s, d) <= o.cap[d])
                break;
            rc = hm_est_state_move(s, -1, obj, o.def, 100, NULL);
            o.calls++;
        }
    }
    o.complete = 1;
    if (rc >= 0)
        rc = fill_result(&o, res);
out:
    ctx_free(&o);
    if (rc < 0)
        hm_optimize_result_free(res);
    return rc;
}

HM_API void hm_optimize_result_free(hm_optimize_result_t *res)
{
    if (!res)
        return;
    hm_est_state_close(res->state);
    free(res->placement_json);
    memset(res, 0, sizeof *res);
}
