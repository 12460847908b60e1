/* Shared search context of the placement algorithms. A search works on
 * "units": one movable object, or one (phase label, object) pair when
 * phased. Every state move goes through hm__opt_move(), which refuses moves
 * that would exceed a capacity before asking the estimator, and counts the
 * estimator calls against the budget. */
#ifndef HETMEM_OPT_INT_H
#define HETMEM_OPT_INT_H

#include <stdint.h>

#include "common/common.h"
#include "hetmem/optimize.h"

typedef struct {
    int obj;        /* estimator object index */
    int phase;      /* phase label, or -1 when unphased */
    uint64_t size;  /* bytes of the object */
} hm__opt_unit_t;

typedef struct {
    hm_estimator_t *e;
    const hm_optimize_opts_t *opts;
    int ndev, def;         /* devices; the fallback device, where units not
                            * placed elsewhere live: the default device, or
                            * when it cannot hold the footprint, the slowest
                            * device that can */
    int estdef;            /* the estimator's default device */
    int nph;               /* phase labels searched (1 when unphased) */
    int nobj;              /* movable objects */
    int *objs;             /* their estimator indices [nobj] */
    int nunits;
    hm__opt_unit_t *units; /* [nunits]; unit u = phase-major: (u / nobj, objs[u % nobj]) */
    uint64_t *cap;         /* [ndev] bytes, HM_OPT_UNLIMITED for none */
    int *speed;            /* devices, fastest first by measured runtime [ndev] */
    uint64_t calls, budget;
    uint64_t reserve;      /* calls held back from the search for the final clean-up */
    uint64_t t0_ns, deadline_ns; /* deadline 0: none */
    double base_ns;        /* estimate with everything on the default device */
    uint64_t rng;
    hm_est_state_t *best;  /* best state seen (kept by hm__opt_offer()) */
    double best_ns;
    int complete;
    uint64_t episodes;
} hm__opt_t;

/* Opens a state of the search's model and phasing, everything on the
 * fallback device. */
int hm__opt_state(hm__opt_t *o, hm_est_state_t **out);
/* Device and percent of unit u in state s. */
int hm__opt_dev(const hm__opt_t *o, const hm_est_state_t *s, int u, int *pct);
/* Bytes on dev in the phase of unit u (all phases' peak when unphased), from
 * the state's assignment. */
uint64_t hm__opt_bytes_in(const hm__opt_t *o, const hm_est_state_t *s, int u, int dev);
/* Whether moving unit u to dev with pct percent keeps dev within capacity. */
int hm__opt_fits(const hm__opt_t *o, const hm_est_state_t *s, int u, int dev, int pct);
/* Moves unit u to dev (pct percent), counting a call; the new runtime goes to
 * *ns. HM_ECAPACITY (state unchanged) when it would not fit. */
int hm__opt_move(hm__opt_t *o, hm_est_state_t *s, int u, int dev, int pct, double *ns);
/* Whether the budget or the time is spent. */
int hm__opt_spent(const hm__opt_t *o);
/* Whether @p calls more estimator calls stay within the budget. */
int hm__opt_affords(const hm__opt_t *o, uint64_t calls);
/* Fraction of the budget or time used, in [0, 1]. */
double hm__opt_progress(const hm__opt_t *o);
/* Keeps s as the best state when it is faster than the best so far. */
int hm__opt_offer(hm__opt_t *o, const hm_est_state_t *s, double ns);

/* Random numbers (splitmix64), reproducible per seed. */
uint64_t hm__opt_rand(uint64_t *st);
double hm__opt_unif(uint64_t *st);       /* [0, 1) */
int hm__opt_randint(uint64_t *st, int n); /* [0, n) */

/* Per-unit single-move savings: sav[u * ndev + d] = base - runtime with only
 * unit u on d (0 for the default device); also the migration-free saving
 * when nomig is non-NULL. Costs two calls per (unit, device). */
int hm__opt_single_savings(hm__opt_t *o, double *sav, double *nomig);

/* The algorithms: each leaves its best in o->best / o->best_ns. */
int hm__opt_greedy(hm__opt_t *o);
int hm__opt_anneal(hm__opt_t *o);
int hm__opt_exhaustive(hm__opt_t *o);
int hm__opt_random(hm__opt_t *o);
int hm__opt_rl(hm__opt_t *o);

/* Percent of a split move drawn from the grid (step, 2 step, ..., 100). */
int hm__opt_grid_pct(hm__opt_t *o);
/* With opts->split: coordinate descent over page splits from o->best (each
 * unit in turn takes the best of every device and grid percent while that
 * saves time), on its own allowance of calls. */
int hm__opt_split_refine(hm__opt_t *o);

#endif
