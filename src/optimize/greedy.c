/* Greedy knapsack on estimated time saved per byte (the ecoHMEM / X-Mem
 * placers rank by access density; this ranks by what the estimator says a
 * move saves). Each round tries every unit still on the default device on
 * every other device, and takes the move with the best saving per byte that
 * fits; it stops when no move that fits saves time. With opts->split, a last
 * round may place part of one unit's pages in the room left. */
#include <stdlib.h>

#include "opt_int.h"

typedef struct {
    int u, dev, pct;
    double ratio, ns;
} cand_t;

/* Tries unit u on dev with pct percent and undoes it; returns the runtime
 * after the move, or a negative code (HM_ECAPACITY when it does not fit). */
static int trial(hm__opt_t *o, hm_est_state_t *s, int u, int dev, int pct, double *ns)
{
    int rc = hm__opt_move(o, s, u, dev, pct, ns);
    if (rc < 0)
        return rc;
    rc = hm_est_state_move(s, o->units[u].phase, o->units[u].obj, o->def, 100, NULL);
    o->calls++;
    return rc;
}

static int best_round(hm__opt_t *o, hm_est_state_t *s, double cur, int split, cand_t *best)
{
    best->u = -1;
    best->ratio = 0;
    for (int u = 0; u < o->nunits; u++) {
        if (hm__opt_dev(o, s, u, NULL) != o->def || o->units[u].size == 0)
            continue;
        for (int d = 0; d < o->ndev; d++) {
            if (d == o->def)
                continue;
            int pct = 100;
            if (split) {
                uint64_t room = o->cap[d] == HM_OPT_UNLIMITED ? o->units[u].size
                                : o->cap[d] - hm__opt_bytes_in(o, s, u, d);
                uint64_t p = room * 100 / o->units[u].size;
                if (p == 0)
                    continue;
                pct = p >= 100 ? 100 : (int)p;
            }
            if (hm__opt_spent(o))
                return 0;
            double ns;
            int rc = trial(o, s, u, d, pct, &ns);
            if (rc == HM_ECAPACITY)
                continue;
            if (rc < 0)
                return rc;
            double bytes = (double)o->units[u].size * pct / 100.0;
            double ratio = (cur - ns) / bytes;
            if (cur - ns > 0 && ratio > best->ratio) {
                *best = (cand_t){u, d, pct, ratio, ns};
            }
        }
    }
    return 0;
}

int hm__opt_greedy(hm__opt_t *o)
{
    hm_est_state_t *s = NULL;
    int rc = hm__opt_state(o, &s);
    if (rc < 0)
        return rc;
    double cur = o->base_ns;
    for (int round = 0;; round++) {
        cand_t c;
        if ((rc = best_round(o, s, cur, 0, &c)) < 0)
            goto out;
        if (c.u < 0 && o->opts->split && (rc = best_round(o, s, cur, 1, &c)) < 0)
            goto out;
        if (c.u < 0 || hm__opt_spent(o))
            break;
        if ((rc = hm__opt_move(o, s, c.u, c.dev, c.pct, &cur)) < 0)
            goto out;
    }
    o->complete = !hm__opt_spent(o);
    rc = hm__opt_offer(o, s, cur);
out:
    hm_est_state_close(s);
    return rc < 0 ? rc : 0;
}
