#define _GNU_SOURCE
/* The placement agent (docs/optimizer.md). An episode decides the units one
 * at a time, phase by phase and, within a phase, by best estimated saving
 * per byte; the action is the device of the unit, among those with room.
 * One network scores each (unit, device) pair from features of both, so the
 * same policy serves any number of devices and objects (and can be carried
 * to another program with --policy); a softmax over the feasible devices is
 * the policy. The reward of a step is the runtime the move saved, in percent
 * of the all-default runtime, so an episode's return is its total saving,
 * migration included when phased. Training is REINFORCE with a per-step
 * moving-average baseline and an entropy bonus, on Adam. The agent returns
 * the best assignment it visited, and a final greedy (argmax) episode. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../opt_int.h"
#include "hetmem/placement.h"
#include "net.h"

#define NF 14      /* features per (unit, device) */
#define HID 16
#define LR 0.01      /* Adam step */
#define ENTROPY 0.02 /* entropy bonus, decaying with the budget used */
#define EXPLORE 0.2  /* share of uniformly random actions, decaying likewise */
#define CLIP 4.0

typedef struct {
    hm__opt_t *o;
    hm__net_t net;
    int n, D;
    int *order;          /* [n] units in decision order */
    double *sav;         /* [n * D] single-move savings */
    double max_ratio;    /* largest saving per byte */
    double footprint;
    double *dens;        /* [n] log density feature */
    double *activity;    /* [nph] */
    int *rank;           /* [D] speed rank */
    double *x;           /* [n * D * NF] features of an episode */
    double *h;           /* [n * D * HID] hidden activations */
    double *pi;          /* [n * D] probabilities (0: infeasible) */
    int *act;            /* [n] */
    double *r;           /* [n] rewards */
    double *baseline;    /* [n] */
    int baseline_set;
    hm_est_state_t *base, *s, *tmp;
} agent_t;

static double clip(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void features(agent_t *a, int t, int d, double *x)
{
    hm__opt_t *o = a->o;
    int u = a->order[t], D = a->D;
    double size = (double)o->units[u].size;
    double s = a->sav[u * D + d], b = o->base_ns;
    double ratio = size > 0 ? s / size : 0;
    double room = 0, cap = 0;
    int unlimited = o->cap[d] == HM_OPT_UNLIMITED || d == o->def;
    if (!unlimited) {
        cap = (double)o->cap[d];
        uint64_t used = hm__opt_bytes_in(o, a->s, u, d);
        room = used < o->cap[d] ? (double)(o->cap[d] - used) : 0;
    }
    /* Capacity claimed by undecided units of the same phase that would save
     * more per byte on this device: what placing this one may crowd out. */
    double demand = 0, better = 0;
    for (int k = t + 1; k < a->n; k++) {
        int v = a->order[k];
        if (o->units[v].phase != o->units[u].phase || a->sav[v * D + d] <= 0)
            continue;
        double vs = (double)o->units[v].size;
        demand += vs;
        if (vs > 0 && a->sav[v * D + d] / vs > ratio)
            better += vs;
    }
    double other = -INFINITY;
    for (int e = 0; e < D; e++)
        if (e != d && a->sav[u * D + e] > other)
            other = a->sav[u * D + e];
    int prev = 0;
    if (o->opts->phased && o->units[u].phase > 0)
        prev = hm__opt_dev(o, a->s, u - o->nobj, NULL) == d;
    x[0] = a->footprint > 0 ? size / a->footprint : 0;
    x[1] = a->dens[u];
    x[2] = a->activity[o->opts->phased ? o->units[u].phase : 0];
    x[3] = (double)t / a->n;
    x[4] = d == o->def;
    x[5] = clip(10 * s / b, -CLIP, CLIP);
    x[6] = a->max_ratio > 0 ? clip(ratio / a->max_ratio, -1, 1) : 0;
    x[7] = unlimited ? 1 : room / cap;
    x[8] = unlimited ? 1 : clip((room - size) / cap, -1, 1);
    x[9] = unlimited ? 0 : clip(demand / (room > 0 ? room : 1), 0, CLIP);
    x[10] = unlimited ? 0 : clip(better / (room > 0 ? room : 1), 0, CLIP);
    x[11] = prev;
    x[12] = D > 1 ? (double)a->rank[d] / (D - 1) : 0;
    x[13] = clip(10 * (s - other) / b, -CLIP, CLIP);
}

/* One episode from the all-default state; trains when @p learn. */
static int episode(agent_t *a, int greedy, int learn)
{
    hm__opt_t *o = a->o;
    int D = a->D, rc = hm_est_state_copy(a->s, a->base);
    if (rc < 0)
        return rc;
    double cur = o->base_ns;
    int steps = 0;
    for (int t = 0; t < a->n; t++, steps++) {
        if (!greedy && hm__opt_spent(o))
            break;
        int u = a->order[t];
        double *pi = &a->pi[t * D], mx = -INFINITY;
        for (int d = 0; d < D; d++) {
            pi[d] = 0;
            if (d != o->def && !hm__opt_fits(o, a->s, u, d, 100)) {
                pi[d] = -INFINITY;
                continue;
            }
            double *x = &a->x[(t * D + d) * NF];
            features(a, t, d, x);
            pi[d] = hm__net_forward(&a->net, x, &a->h[(t * D + d) * HID]);
            if (pi[d] > mx)
                mx = pi[d];
        }
        double z = 0;
        for (int d = 0; d < D; d++) {
            pi[d] = pi[d] == -INFINITY ? 0 : exp(pi[d] - mx);
            z += pi[d];
        }
        int act = o->def;
        double best = -1, r = hm__opt_unif(&o->rng), acc = 0;
        for (int d = 0; d < D; d++)
            pi[d] /= z;
        double eps = EXPLORE * (1 - hm__opt_progress(o));
        if (!greedy && hm__opt_unif(&o->rng) < eps) {
            int k = 0, pick;
            for (int d = 0; d < D; d++)
                k += pi[d] > 0;
            pick = hm__opt_randint(&o->rng, k);
            double cum = 0;
            for (int d = 0; d < D; d++) {
                if (pi[d] > 0 && pick-- == 0) {
                    r = cum + 0.5 * pi[d];
                    break;
                }
                cum += pi[d];
            }
        }
        for (int d = 0; d < D; d++) {
            if (pi[d] <= 0)
                continue;
            if (greedy ? pi[d] > best : r < acc + pi[d] || best < 0) {
                best = pi[d];
                act = d;
                if (!greedy && r < acc + pi[d])
                    break;
            }
            acc += pi[d];
        }
        double ns = cur;
        if (act != o->def) {
            rc = hm__opt_move(o, a->s, u, act, 100, &ns);
            if (rc == HM_ECAPACITY) { /* the estimator rounded to more pages */
                act = o->def;
                ns = cur;
                rc = 0;
            }
            if (rc < 0)
                return rc;
        }
        a->act[t] = act;
        a->r[t] = 100 * (cur - ns) / o->base_ns;
        cur = ns;
    }
    o->episodes += !greedy;
    if ((rc = hm__opt_offer(o, a->s, cur)) < 0 || !learn || steps == 0)
        return rc;
    double g = 0, beta = ENTROPY * (1 - hm__opt_progress(o));
    for (int t = steps - 1; t >= 0; t--) {
        g += a->r[t];
        if (!a->baseline_set)
            a->baseline[t] = g;
        double adv = g - a->baseline[t];
        a->baseline[t] = 0.9 * a->baseline[t] + 0.1 * g;
        double *pi = &a->pi[t * D], ent = 0;
        for (int d = 0; d < D; d++)
            if (pi[d] > 0)
                ent -= pi[d] * log(pi[d]);
        for (int d = 0; d < D; d++) {
            if (pi[d] <= 0)
                continue;
            /* loss = -adv log pi(act) - beta H; its derivative by the score. */
            double dl = -adv * ((d == a->act[t]) - pi[d]) + beta * pi[d] * (log(pi[d]) + ent);
            hm__net_backward(&a->net, &a->x[(t * D + d) * NF], &a->h[(t * D + d) * HID], dl);
        }
    }
    a->baseline_set = 1;
    hm__net_step(&a->net, LR);
    return 0;
}

/* Moves object @p i (index into o->objs) to @p dev in every phase, all or
 * nothing: HM_ECAPACITY (the state as it was) when one phase has no room. */
static int move_object(agent_t *a, hm_est_state_t *s, int i, int dev, int *moved)
{
    hm__opt_t *o = a->o;
    int rc = 0, p;
    *moved = 0;
    for (p = 0; p < o->nph; p++) {
        int u = p * o->nobj + i, pct;
        if (hm__opt_dev(o, s, u, &pct) == dev && pct == 100)
            continue;
        if ((rc = hm__opt_move(o, s, u, dev, 100, NULL)) < 0)
            break;
        *moved = 1;
    }
    return rc;
}

/* Device of object @p i when every phase has it whole on one device, else -1. */
static int object_device(const hm__opt_t *o, const hm_est_state_t *s, int i)
{
    int dev = -1;
    for (int p = 0; p < o->nph; p++) {
        int pct, d = hm__opt_dev(o, s, p * o->nobj + i, &pct);
        if (pct != 100 || (dev >= 0 && d != dev))
            return -1;
        dev = d;
    }
    return dev;
}

/* Local search from @p s (runtime *cur): first-improvement hill climbing
 * over whole-object moves (every phase at once), exchanges of two objects
 * between the fallback and another device and, when phased, single
 * (phase, object) moves, until no move saves time or the budget is spent.
 * Whole-object moves matter under --phases: moving an object in one phase
 * only pays migration at that phase's boundaries, so a placement that
 * wants an object fast everywhere is out of reach of single moves that
 * each cost more than they save. @p tmp is scratch. */
static int polish(agent_t *a, hm_est_state_t *s, hm_est_state_t *tmp, double *cur)
{
    hm__opt_t *o = a->o;
    int rc, improved = 1;
    while (improved && !hm__opt_spent(o)) {
        improved = 0;
        for (int k = 0; k < a->n && !hm__opt_spent(o); k++) {
            int u = a->order[k];
            if (o->units[u].phase > 0)
                continue; /* whole-object moves: once per object */
            int i = u % o->nobj;
            for (int d = 0; d < a->D && !hm__opt_spent(o); d++) {
                int moved;
                if ((rc = hm_est_state_copy(tmp, s)) < 0)
                    return rc;
                rc = move_object(a, s, i, d, &moved);
                double ns = hm_est_state_runtime(s);
                if (rc >= 0 && moved && ns < *cur * (1 - 1e-12)) {
                    *cur = ns;
                    improved = 1;
                    continue;
                }
                if (rc < 0 && rc != HM_ECAPACITY)
                    return rc;
                if ((rc = hm_est_state_copy(s, tmp)) < 0)
                    return rc;
            }
        }
        /* Exchanges of two objects' devices: the move a full device needs
         * (one object out, a better one in) that no single move makes. */
        for (int i = 0; i < o->nobj && !improved && !hm__opt_spent(o); i++) {
            int di = object_device(o, s, i);
            for (int j = 0; j < o->nobj && di >= 0 && !improved && !hm__opt_spent(o); j++) {
                int dj = object_device(o, s, j), m1, m2, m3;
                if (j == i || dj < 0 || dj == di || (di != o->def && dj != o->def))
                    continue;
                if ((rc = hm_est_state_copy(tmp, s)) < 0)
                    return rc;
                rc = move_object(a, s, i, o->def, &m1);
                if (rc >= 0)
                    rc = move_object(a, s, j, di, &m2);
                if (rc >= 0)
                    rc = move_object(a, s, i, dj, &m3);
                double ns = hm_est_state_runtime(s);
                if (rc >= 0 && ns < *cur * (1 - 1e-12)) {
                    *cur = ns;
                    improved = 1;
                    break;
                }
                if (rc < 0 && rc != HM_ECAPACITY)
                    return rc;
                if ((rc = hm_est_state_copy(s, tmp)) < 0)
                    return rc;
            }
        }
        for (int k = 0; o->opts->phased && k < a->n && !hm__opt_spent(o); k++) {
            int u = a->order[k], cd = hm__opt_dev(o, s, u, NULL);
            for (int d = 0; d < a->D && !hm__opt_spent(o); d++) {
                double ns;
                if (d == cd)
                    continue;
                rc = hm__opt_move(o, s, u, d, 100, &ns);
                if (rc == HM_ECAPACITY)
                    continue;
                if (rc < 0)
                    return rc;
                if (ns < *cur * (1 - 1e-12)) {
                    *cur = ns;
                    cd = d;
                    improved = 1;
                    continue;
                }
                if ((rc = hm__opt_move(o, s, u, cd, 100, NULL)) < 0)
                    return rc;
            }
        }
    }
    return hm__opt_offer(o, s, *cur);
}

static int by_ratio(const void *pa, const void *pb, void *arg)
{
    const agent_t *a = arg;
    int u = *(const int *)pa, v = *(const int *)pb;
    const hm__opt_t *o = a->o;
    if (o->units[u].phase != o->units[v].phase)
        return o->units[u].phase - o->units[v].phase;
    double ru = 0, rv = 0;
    for (int d = 0; d < a->D; d++) {
        double x = o->units[u].size ? a->sav[u * a->D + d] / (double)o->units[u].size : 0;
        double y = o->units[v].size ? a->sav[v * a->D + d] / (double)o->units[v].size : 0;
        ru = x > ru ? x : ru;
        rv = y > rv ? y : rv;
    }
    return ru < rv ? 1 : ru > rv ? -1 : u - v;
}

/* Share of the all-default runtime spent in each phase label, scaled so
 * that the mean is 1 (1 everywhere when that breakdown is not available). */
static void phase_activity(agent_t *a)
{
    hm__opt_t *o = a->o;
    for (int p = 0; p < o->nph; p++)
        a->activity[p] = 1;
    if (!o->opts->phased)
        return;
    const char **names = hm__xcalloc((size_t)a->D, sizeof *names);
    for (int d = 0; d < a->D; d++)
        names[d] = hm_estimator_device_name(o->e, d);
    char json[256];
    snprintf(json, sizeof json, "{\"default\": \"%s\"}", names[o->def]);
    hm_placement_t *p = NULL;
    hm_estimate_t est;
    const hm_est_breakdown_t *bd = NULL;
    if (hm_placement_parse(&p, "(all default)", json, names, a->D) == 0 &&
        hm_estimator_estimate(o->e, p, o->opts->model, &est, &bd) == 0 && bd && bd->nphases >= o->nph) {
        double sum = 0;
        for (int k = 0; k < o->nph; k++)
            sum += bd->phase_ns[k];
        for (int k = 0; k < o->nph && sum > 0; k++)
            a->activity[k] = bd->phase_ns[k] / sum * o->nph;
    }
    o->calls++;
    hm_placement_close(p);
    free(names);
}

static void agent_free(agent_t *a)
{
    hm__net_free(&a->net);
    hm_est_state_close(a->base);
    hm_est_state_close(a->s);
    hm_est_state_close(a->tmp);
    free(a->order);
    free(a->sav);
    free(a->dens);
    free(a->activity);
    free(a->rank);
    free(a->x);
    free(a->h);
    free(a->pi);
    free(a->act);
    free(a->r);
    free(a->baseline);
}

int hm__opt_rl(hm__opt_t *o)
{
    agent_t a = {.o = o, .n = o->nunits, .D = o->ndev};
    int n = a.n, D = a.D, rc;
    if (n == 0) {
        o->complete = 1;
        return 0;
    }
    if ((rc = hm__net_init(&a.net, NF, HID, &o->rng)) < 0)
        return rc;
    a.order = hm__xcalloc((size_t)n, sizeof *a.order);
    a.sav = hm__xcalloc((size_t)(n * D), sizeof *a.sav);
    a.dens = hm__xcalloc((size_t)n, sizeof *a.dens);
    a.activity = hm__xcalloc((size_t)o->nph, sizeof *a.activity);
    a.rank = hm__xcalloc((size_t)D, sizeof *a.rank);
    a.x = hm__xcalloc((size_t)(n * D * NF), sizeof *a.x);
    a.h = hm__xcalloc((size_t)(n * D * HID), sizeof *a.h);
    a.pi = hm__xcalloc((size_t)(n * D), sizeof *a.pi);
    a.act = hm__xcalloc((size_t)n, sizeof *a.act);
    a.r = hm__xcalloc((size_t)n, sizeof *a.r);
    a.baseline = hm__xcalloc((size_t)n, sizeof *a.baseline);
    if (o->opts->policy_in && (rc = hm__net_load(&a.net, o->opts->policy_in)) < 0)
        goto out;
    if ((rc = hm__opt_single_savings(o, a.sav, NULL)) < 0)
        goto out;
    phase_activity(&a);
    double mean = 0;
    int cnt = 0;
    for (int u = 0; u < n; u++) {
        hm_est_object_t ob;
        hm_estimator_object(o->e, o->units[u].obj, &ob);
        a.dens[u] = ob.size ? ob.samples / (double)ob.size : 0;
        mean += a.dens[u];
        cnt++;
        if (u < o->nobj)
            a.footprint += (double)ob.size;
        for (int d = 0; d < D; d++)
            if (ob.size && a.sav[u * D + d] / (double)ob.size > a.max_ratio)
                a.max_ratio = a.sav[u * D + d] / (double)ob.size;
        a.order[u] = u;
    }
    mean /= cnt;
    for (int u = 0; u < n; u++)
        a.dens[u] = mean > 0 ? log1p(a.dens[u] / mean) : 0;
    for (int k = 0; k < D; k++)
        a.rank[o->speed[k]] = k;
    qsort_r(a.order, (size_t)n, sizeof *a.order, by_ratio, &a);
    if ((rc = hm__opt_state(o, &a.base)) < 0 || (rc = hm__opt_state(o, &a.s)) < 0)
        goto out;
    if ((rc = hm__opt_state(o, &a.tmp)) < 0)
        goto out;
    /* A loaded policy is tried as it is first: the no-update transfer. */
    if (o->opts->policy_in && (rc = episode(&a, 1, 0)) < 0)
        goto out;
    /* Calls kept for polishing the best assignment at the end: two passes
     * over every unit and device, at most a fifth of the budget. */
    uint64_t reserve = 4 * (uint64_t)(n + o->nobj) * (uint64_t)D;
    if (o->budget != UINT64_MAX && reserve > o->budget / 5)
        reserve = o->budget / 5;
    /* Train while a whole episode, the final greedy one and the polish fit
     * the budget. Episodes that move nothing (no room anywhere, or nothing
     * worth moving learnt) cost no calls; a run of them ends the training. */
    uint64_t idle = 0;
    while (!hm__opt_spent(o) && hm__opt_affords(o, 2 * (uint64_t)n + reserve) && idle < 1000) {
        uint64_t before = o->calls;
        if ((rc = episode(&a, 0, 1)) < 0)
            goto out;
        idle = o->calls == before ? idle + 1 : 0;
    }
    if ((rc = episode(&a, 1, 0)) < 0)
        goto out;
    /* The best assignment seen, improved by local search. */
    double cur = o->best_ns;
    if ((rc = hm_est_state_copy(a.s, o->best)) < 0 || (rc = polish(&a, a.s, a.tmp, &cur)) < 0)
        goto out;
    if (o->opts->policy_out && (rc = hm__net_save(&a.net, o->opts->policy_out)) < 0)
        goto out;
    o->complete = 1;
out:
    agent_free(&a);
    return rc < 0 ? rc : 0;
}
