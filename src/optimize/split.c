/* Page splits chosen for bandwidth. A phase bound by its channels whose
 * pages are split over two devices uses both devices' channels at once,
 * and can run faster than with all its data on the fastest device (CAMP,
 * ASPLOS'26; Linux's weighted interleave splits in proportion to the
 * devices' bandwidths). A whole-object search cannot reach such a
 * placement, so with opts->split every search ends here: each unit in turn
 * is tried on every device at every percentage of the grid (the rest of
 * its pages on the default device), and takes the best of them when that
 * saves time; sweeps repeat until one changes nothing. Every accepted move
 * makes the estimate strictly faster, so the result is never slower than
 * the search's, and is the search's own when no split helps. */
#include <stdlib.h>

#include "opt_int.h"

/* Sweeps over the units at most; each accepted move strictly lowers the
 * estimate, so the descent ends anyway, this bounds its cost. */
#define MAX_SWEEPS 8

static int step_of(const hm__opt_t *o)
{
    int st = o->opts->split_step;
    return st >= 1 && st <= 100 ? st : HM_OPT_SPLIT_STEP;
}

int hm__opt_grid_pct(hm__opt_t *o)
{
    int st = step_of(o), n = (100 + st - 1) / st; /* st, 2 st, ..., and 100 */
    int k = 1 + hm__opt_randint(&o->rng, n);
    return k * st >= 100 ? 100 : k * st;
}

/* Puts the n units of g at (d, pct), or each at its own (at[i], pc[i])
 * when at is non-NULL: first all on the fallback device (which holds the
 * footprint), then each at its place, so that no step passes through a
 * state over capacity the end state is not over. HM_ECAPACITY when the end
 * state does not fit. */
static int place_group(hm__opt_t *o, hm_est_state_t *s, const int *g, int n, int d, int pct, const int *at,
                       const int *pc, double *ns)
{
    for (int i = 0; n > 1 && i < n; i++) {
        if (hm__opt_dev(o, s, g[i], NULL) == o->def)
            continue;
        int rc = hm__opt_move(o, s, g[i], o->def, 100, ns);
        if (rc < 0)
            return rc;
    }
    for (int i = 0; i < n; i++) {
        int rc = hm__opt_move(o, s, g[i], at ? at[i] : d, at ? pc[i] : pct, ns);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Tries the units of g (one unit, one object in every phase, or every
 * unit) together at every (device, grid percent) and leaves them at the
 * best, or where they were (kept in at[], pc[]) when nothing is faster;
 * *cur is the state's runtime and becomes the new one. Sets *moved when
 * they changed place. */
static int refine_group(hm__opt_t *o, hm_est_state_t *s, const int *g, int n, int *at, int *pc, double *cur,
                        int *moved)
{
    int st = step_of(o);
    int same = 1;
    for (int i = 0; i < n; i++) {
        at[i] = hm__opt_dev(o, s, g[i], &pc[i]);
        if (at[i] == o->def)
            pc[i] = 100;
        same &= at[i] == at[0] && pc[i] == pc[0];
    }
    int bd = -1, bp = 0;
    double best = *cur, ns;
    for (int d = 0; d < o->ndev; d++)
        for (int k = d == o->def ? (100 + st - 1) / st : 1;; k++) {
            int pct = k * st >= 100 ? 100 : k * st;
            if (!(same && d == at[0] && pct == pc[0])) {
                int rc = place_group(o, s, g, n, d, pct, NULL, NULL, &ns);
                if (rc < 0 && rc != HM_ECAPACITY)
                    return rc;
                if (rc == 0 && ns < best * (1 - 1e-9)) {
                    best = ns;
                    bd = d;
                    bp = pct;
                }
            }
            if (pct == 100)
                break;
        }
    *moved = bd >= 0;
    /* The winner, or back where they were; either fitted before. */
    return bd >= 0 ? place_group(o, s, g, n, bd, bp, NULL, NULL, cur) : place_group(o, s, g, n, 0, 0, at, pc, cur);
}

int hm__opt_split_refine(hm__opt_t *o)
{
    if (!o->opts->split || o->nunits == 0)
        return 0;
    int st = step_of(o);
    /* Its own allowance: per sweep and group, at most two calls per unit
     * and candidate and as many to settle; three kinds of group (all
     * units, each object in all phases, each unit); the search before it
     * may have spent its budget or its time. */
    uint64_t per_sweep = 3 * 2 * (uint64_t)o->nunits * ((uint64_t)(o->ndev - 1) * (uint64_t)((100 + st - 1) / st) + 2);
    uint64_t saved_budget = o->budget, saved_deadline = o->deadline_ns;
    o->budget = o->calls + per_sweep * MAX_SWEEPS;
    o->deadline_ns = 0;
    hm_est_state_t *s = o->best;
    double cur = o->best_ns;
    int *g = hm__xcalloc((size_t)o->nunits, sizeof *g);
    int *at = hm__xcalloc((size_t)o->nunits, sizeof *at);
    int *pc = hm__xcalloc((size_t)o->nunits, sizeof *pc);
    int rc = 0;
    for (int sweep = 0; sweep < MAX_SWEEPS && rc >= 0; sweep++) {
        int any = 0, moved = 0;
        /* Every unit at one split first (Linux's weighted interleave of the
         * whole program; moving objects one at a time may not reach it
         * where each alone leaves the other device's channels idle), then
         * with phases each object in all of them (a split that pays only
         * when every phase has it, since one phase alone migrates), then
         * each unit alone. */
        for (int u = 0; u < o->nunits; u++)
            g[u] = u;
        if (o->nunits > 1) {
            rc = refine_group(o, s, g, o->nunits, at, pc, &cur, &moved);
            any |= moved;
        }
        for (int i = 0; o->nph > 1 && i < o->nobj && rc >= 0; i++) {
            for (int p = 0; p < o->nph; p++)
                g[p] = p * o->nobj + i;
            rc = refine_group(o, s, g, o->nph, at, pc, &cur, &moved);
            any |= moved;
        }
        for (int u = 0; u < o->nunits && rc >= 0; u++) {
            rc = refine_group(o, s, &u, 1, at, pc, &cur, &moved);
            any |= moved;
        }
        if (!any)
            break;
    }
    free(g);
    free(at);
    free(pc);
    if (rc >= 0)
        o->best_ns = cur; /* the state's own runtime, at most the search's */
    o->budget = saved_budget == UINT64_MAX ? UINT64_MAX : o->calls > saved_budget ? o->calls : saved_budget;
    o->deadline_ns = saved_deadline;
    return rc < 0 ? rc : 0;
}
