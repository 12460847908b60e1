/* Random search: the best of independent random feasible assignments. Each
 * assignment visits the units in a random order and puts each on a device
 * drawn uniformly among those with room (the default device always has). */
#include <stdlib.h>

#include "opt_int.h"

int hm__opt_random(hm__opt_t *o)
{
    hm_est_state_t *base = NULL, *s = NULL;
    int rc = hm__opt_state(o, &base);
    if (rc < 0 || (rc = hm__opt_state(o, &s)) < 0)
        goto out;
    int *order = hm__xcalloc((size_t)o->nunits + 1, sizeof *order);
    int *devs = hm__xcalloc((size_t)o->ndev, sizeof *devs);
    uint64_t idle = 0;
    /* An assignment costs at most two calls per unit (a move the estimator
     * finds over capacity is undone). */
    while (o->nunits > 0 && !hm__opt_spent(o) && hm__opt_affords(o, 2 * (uint64_t)o->nunits)) {
        /* Assignments that move nothing (no room anywhere) would loop forever. */
        if (++idle > 1000)
            break;
        uint64_t before = o->calls;
        if ((rc = hm_est_state_copy(s, base)) < 0)
            break;
        double ns = o->base_ns;
        for (int i = 0; i < o->nunits; i++)
            order[i] = i;
        for (int i = o->nunits - 1; i > 0; i--) {
            int j = hm__opt_randint(&o->rng, i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < o->nunits && rc >= 0; i++) {
            int u = order[i], k = 0;
            for (int d = 0; d < o->ndev; d++)
                if (d == o->def || hm__opt_fits(o, s, u, d, 100))
                    devs[k++] = d;
            int d = devs[hm__opt_randint(&o->rng, k)];
            if (d == o->def)
                continue;
            /* With page splits, a grid percentage of its pages (the room
             * was checked for all of them). */
            rc = hm__opt_move(o, s, u, d, o->opts->split ? hm__opt_grid_pct(o) : 100, &ns);
            if (rc == HM_ECAPACITY)
                rc = 0;
        }
        if (rc < 0)
            break;
        if (o->calls != before)
            idle = 0;
        o->episodes++;
        if ((rc = hm__opt_offer(o, s, ns)) < 0)
            break;
    }
    free(order);
    free(devs);
    if (rc >= 0)
        o->complete = 1;
out:
    hm_est_state_close(s);
    hm_est_state_close(base);
    return rc < 0 ? rc : 0;
}
