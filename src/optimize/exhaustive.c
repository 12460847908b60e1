/* Exact search by branch and bound. Every node of the tree is a complete
 * assignment (the units not decided yet stay on the default device), so
 * every node is offered as a candidate, and greedy's result is the first
 * incumbent. A subtree is cut when even the best case cannot beat the
 * incumbent: its runtime without migration, less a fractional-knapsack
 * relaxation of what the undecided units could save (each unit's best
 * single-move saving without migration, per phase, in the room left on all
 * the non-default devices together).
 *
 * The bound is exact when per-unit savings add up (the linear model) or
 * shrink when combined; docs/optimizer.md says where that may not hold. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>

#include "opt_int.h"

typedef struct {
    hm__opt_t *o;
    hm_est_state_t *s;
    double *sav, *nomig;   /* [unit * ndev + dev] */
    double *value;         /* [unit] best single saving without migration */
    int *order;            /* units, best saving first */
    int *byratio;          /* units, best saving per byte first */
    int *devorder;         /* [unit * ndev] devices to try, best first, default last */
    int *decided;          /* [unit] */
    double tol;
} bb_t;

static int cmp_desc(const double *a, const double *b)
{
    return *a < *b ? 1 : *a > *b ? -1 : 0;
}

static int by_key(const void *a, const void *b, void *arg)
{
    const double *key = arg;
    int x = *(const int *)a, y = *(const int *)b;
    int c = cmp_desc(&key[x], &key[y]);
    return c ? c : x - y;
}

/* Upper bound on what the undecided units can still save. */
static double relaxation(bb_t *b)
{
    hm__opt_t *o = b->o;
    double total = 0;
    for (int p = 0; p < o->nph; p++) {
        double room = 0;
        int unlimited = 0;
        for (int d = 0; d < o->ndev; d++) {
            if (d == o->def)
                continue;
            if (o->cap[d] == HM_OPT_UNLIMITED) {
                unlimited = 1;
                break;
            }
            uint64_t used = hm__opt_bytes_in(o, b->s, p * o->nobj, d);
            room += used < o->cap[d] ? (double)(o->cap[d] - used) : 0;
        }
        for (int i = 0; i < o->nunits; i++) {
            int u = b->byratio[i];
            if (b->decided[u] || o->units[u].phase != (o->opts->phased ? p : -1) || b->value[u] <= 0)
                continue;
            double w = (double)o->units[u].size;
            if (unlimited || w <= room) {
                total += b->value[u];
                room -= w;
            } else {
                total += b->value[u] * room / w;
                room = 0;
                break;
            }
        }
    }
    return total;
}

static int dfs(bb_t *b, int k, double cur)
{
    hm__opt_t *o = b->o;
    if (hm__opt_spent(o))
        return 0;
    int rc = hm__opt_offer(o, b->s, cur);
    if (rc < 0 || k == o->nunits)
        return rc;
    double free_ns = cur;
    if (o->opts->phased) {
        hm_estimate_t est;
        if ((rc = hm_est_state_estimate(b->s, &est)) < 0)
            return rc;
        free_ns = est.runtime_ns - est.migration_ns;
    }
    if (free_ns - relaxation(b) >= o->best_ns - b->tol)
        return 0;
    int u = b->order[k];
    b->decided[u] = 1;
    for (int i = 0; i < o->ndev && rc >= 0; i++) {
        int d = b->devorder[u * o->ndev + i];
        if (d == o->def) {
            rc = dfs(b, k + 1, cur);
            continue;
        }
        double ns;
        rc = hm__opt_move(o, b->s, u, d, 100, &ns);
        if (rc == HM_ECAPACITY) {
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        rc = dfs(b, k + 1, ns);
        int rc2 = hm_est_state_move(b->s, o->units[u].phase, o->units[u].obj, o->def, 100, NULL);
        o->calls++;
        if (rc >= 0)
            rc = rc2;
    }
    b->decided[u] = 0;
    return rc;
}

int hm__opt_exhaustive(hm__opt_t *o)
{
    bb_t b = {.o = o};
    int n = o->nunits, D = o->ndev, rc;
    if ((rc = hm__opt_greedy(o)) < 0)
        return rc;
    b.sav = hm__xcalloc((size_t)(n * D + 1), sizeof *b.sav);
    b.nomig = hm__xcalloc((size_t)(n * D + 1), sizeof *b.nomig);
    b.value = hm__xcalloc((size_t)n + 1, sizeof *b.value);
    b.order = hm__xcalloc((size_t)n + 1, sizeof *b.order);
    b.byratio = hm__xcalloc((size_t)n + 1, sizeof *b.byratio);
    b.devorder = hm__xcalloc((size_t)(n * D + 1), sizeof *b.devorder);
    b.decided = hm__xcalloc((size_t)n + 1, sizeof *b.decided);
    double *ratio = hm__xcalloc((size_t)n + 1, sizeof *ratio);
    double *key = hm__xcalloc((size_t)D, sizeof *key);
    b.tol = 1e-9 * o->base_ns;
    if ((rc = hm__opt_single_savings(o, b.sav, b.nomig)) < 0)
        goto out;
    for (int u = 0; u < n; u++) {
        double v = 0;
        for (int d = 0; d < D; d++)
            if (b.nomig[u * D + d] > v)
                v = b.nomig[u * D + d];
        b.value[u] = v;
        ratio[u] = o->units[u].size ? v / (double)o->units[u].size : INFINITY;
        b.order[u] = b.byratio[u] = u;
        int *dv = &b.devorder[u * D];
        for (int d = 0; d < D; d++) {
            dv[d] = d;
            key[d] = d == o->def ? -INFINITY : b.sav[u * D + d];
        }
        qsort_r(dv, (size_t)D, sizeof *dv, by_key, key);
    }
    qsort_r(b.order, (size_t)n, sizeof *b.order, by_key, b.value);
    qsort_r(b.byratio, (size_t)n, sizeof *b.byratio, by_key, ratio);
    if ((rc = hm__opt_state(o, &b.s)) < 0)
        goto out;
    rc = dfs(&b, 0, o->base_ns);
    o->complete = rc >= 0 && !hm__opt_spent(o);
out:
    hm_est_state_close(b.s);
    free(b.sav);
    free(b.nomig);
    free(b.value);
    free(b.order);
    free(b.byratio);
    free(b.devorder);
    free(b.decided);
    free(ratio);
    free(key);
    return rc < 0 ? rc : 0;
}
