/* Simulated annealing on the incremental estimator. A step moves one unit
 * to another device; when the device has no room, units of the same phase
 * are sent back to the default device until it has (a compound move, undone
 * as a whole when rejected); with page splits, the step puts a grid
 * percentage of the unit's pages on the device. The temperature falls geometrically with the
 * share of the budget (or time) used, from 5% of the all-default runtime to
 * 1e-5 of it, so that the schedule fits whatever budget is given. */
#include <math.h>
#include <stdlib.h>

#include "opt_int.h"

#define MAX_UNDO 64

typedef struct {
    int u, dev, pct;
} undo_t;

static int undo_all(hm__opt_t *o, hm_est_state_t *s, undo_t *log, int n, double *ns)
{
    for (int i = n - 1; i >= 0; i--) {
        int rc = hm_est_state_move(s, o->units[log[i].u].phase, o->units[log[i].u].obj, log[i].dev, log[i].pct, ns);
        o->calls++;
        if (rc < 0)
            return rc;
    }
    return 0;
}

int hm__opt_anneal(hm__opt_t *o)
{
    hm_est_state_t *s = NULL;
    int rc = hm__opt_state(o, &s);
    if (rc < 0)
        return rc;
    double cur = o->base_ns;
    double t0 = 0.05 * o->base_ns, t1 = 1e-5 * o->base_ns;
    undo_t log[MAX_UNDO];
    int *same = hm__xcalloc((size_t)o->nobj + 1, sizeof *same);
    /* A step of k evictions costs at most 2 (k + 1) calls and k + 1 to undo. */
    uint64_t idle = 0;
    while (o->nunits > 0 && !hm__opt_spent(o) && hm__opt_affords(o, 5)) {
        /* Steps that call nothing (no room anywhere) would loop forever. */
        if (++idle > 1000u * (uint64_t)o->nunits)
            break;
        uint64_t before = o->calls;
        int u = hm__opt_randint(&o->rng, o->nunits);
        int cp, cd = hm__opt_dev(o, s, u, &cp);
        int d, pct = 100;
        if (o->opts->split) {
            /* Any device at a grid percent, the same device at another
             * percent included. */
            d = hm__opt_randint(&o->rng, o->ndev);
            if (d != o->def)
                pct = hm__opt_grid_pct(o);
            if (d == cd && (d == o->def || pct == cp))
                continue;
        } else {
            d = hm__opt_randint(&o->rng, o->ndev - 1);
            if (d >= cd)
                d++;
        }
        int n = 0;
        double ns = cur;
        /* Make room on d: evict random units of u's phase from it. */
        int base = (u / o->nobj) * o->nobj;
        while (!hm__opt_fits(o, s, u, d, pct) && n < MAX_UNDO - 1 && hm__opt_affords(o, 3 * (uint64_t)n + 8)) {
            int k = 0;
            for (int i = 0; i < o->nobj; i++)
                if (base + i != u && hm__opt_dev(o, s, base + i, NULL) == d)
                    same[k++] = base + i;
            if (k == 0)
                break;
            int v = same[hm__opt_randint(&o->rng, k)];
            int vp, vd = hm__opt_dev(o, s, v, &vp);
            if ((rc = hm__opt_move(o, s, v, o->def, 100, &ns)) < 0)
                goto out;
            log[n++] = (undo_t){v, vd, vp};
        }
        rc = hm__opt_move(o, s, u, d, pct, &ns);
        if (rc == HM_ECAPACITY) {
            if ((rc = undo_all(o, s, log, n, NULL)) < 0)
                goto out;
            if (o->calls != before)
                idle = 0;
            continue;
        }
        idle = 0;
        if (rc < 0)
            goto out;
        log[n++] = (undo_t){u, cd, cp};
        double t = t0 * pow(t1 / t0, hm__opt_progress(o));
        double delta = ns - cur;
        if (delta <= 0 || hm__opt_unif(&o->rng) < exp(-delta / t)) {
            cur = ns;
            if ((rc = hm__opt_offer(o, s, cur)) < 0)
                goto out;
        } else if ((rc = undo_all(o, s, log, n, NULL)) < 0) {
            goto out;
        }
    }
    o->complete = 1;
    rc = 0;
out:
    free(same);
    hm_est_state_close(s);
    return rc;
}
