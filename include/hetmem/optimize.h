/**
 * @file optimize.h
 * @brief Placement search under device capacities, on the estimator.
 *
 * Every algorithm drives an incremental estimator state
 * (hm_est_state_move(), hm_est_state_copy()) and never exceeds a capacity
 * (checked with hm_est_state_bytes()); all work with two or more devices
 * (docs/optimizer.md):
 *
 *  - greedy: knapsack by estimated time saved per byte;
 *  - anneal: simulated annealing;
 *  - exhaustive: the exact optimum by branch and bound (refused beyond
 *    HM_OPT_EXHAUSTIVE_MAX decisions);
 *  - random: the best of random feasible assignments;
 *  - rl: a small policy network trained online against the estimator.
 *
 * A decision is one movable object, or one (phase label, object) pair when
 * the search is phased. Searches are reproducible for one seed when they
 * are bounded by a budget of estimator calls, not by time.
 *
 * Thread safety: one search per estimator at a time (the estimator is
 * read-only, but a search keeps its states until it returns).
 */
#ifndef HETMEM_OPTIMIZE_H
#define HETMEM_OPTIMIZE_H

#include <stdint.h>

#include "hetmem/estimate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    HM_OPT_RL = 0,
    HM_OPT_GREEDY = 1,
    HM_OPT_ANNEAL = 2,
    HM_OPT_EXHAUSTIVE = 3,
    HM_OPT_RANDOM = 4,
    HM_OPT_NALGOS = 5
} hm_optimize_algo_t;

/** Largest number of decisions the exhaustive search accepts. */
#define HM_OPT_EXHAUSTIVE_MAX 24
/** Default grid of page splits, in percent. */
#define HM_OPT_SPLIT_STEP 10
/** Capacity value meaning "no limit". */
#define HM_OPT_UNLIMITED UINT64_MAX

/** Algorithm name ("rl", "greedy"...), or NULL. */
const char *hm_optimize_algo_name(hm_optimize_algo_t a);
/** Algorithm by name; HM_EUSAGE (detail lists the names) when unknown. */
int hm_optimize_algo_parse(const char *name, hm_optimize_algo_t *out);

/** Options of a search; zero means the default. */
typedef struct {
    hm_optimize_algo_t algo;
    hm_est_model_t model;
    int phased;              /**< one device per (phase label, object), migration cost included */
    /** Page splits: a decision may put a percentage of an object's pages on
     *  a device and the rest on the default device (every algorithm; then a
     *  split refinement, docs/optimizer.md). Off: whole objects only, as
     *  before. */
    int split;
    /** Bytes per device (hm_estimator_ndevices() entries), HM_OPT_UNLIMITED
     *  for no limit; NULL: hm_estimator_device_capacity() (0 there: no limit). */
    const uint64_t *capacity;
    uint64_t budget;         /**< estimator calls (moves); 0: the algorithm's default */
    double time_s;           /**< wall-clock limit in seconds; 0: none */
    uint64_t seed;           /**< anneal, random, rl */
    const char *policy_in;   /**< rl: start from this saved policy */
    const char *policy_out;  /**< rl: save the trained policy here */
    int split_step;          /**< the grid of split percentages (1..100); 0: HM_OPT_SPLIT_STEP */
} hm_optimize_opts_t;

/** Result of a search. Free with hm_optimize_result_free(). */
typedef struct {
    hm_est_state_t *state;   /**< the best assignment found (owned by the result) */
    char *placement_json;    /**< its placement file (owned by the result) */
    hm_estimate_t estimate;  /**< its estimate */
    uint64_t estimator_calls;/**< state moves made by the search */
    double wall_s;           /**< wall time of the search */
    int complete;            /**< the search ran to its end (exhaustive: optimum proven) */
    uint64_t episodes;       /**< rl: training episodes; random: assignments tried */
} hm_optimize_result_t;

/**
 * Searches for the fastest placement of @p e's movable objects.
 * Errors (detail names what): HM_EUSAGE (algorithm, model, zero time or
 * policy file that does not fit), HM_ECAPACITY (a capacity larger than the
 * device, or a default device that cannot hold the footprint), HM_ETOOBIG
 * (exhaustive over more than HM_OPT_EXHAUSTIVE_MAX decisions), -errno
 * (policy files). On success *res holds the result; the caller frees it
 * with hm_optimize_result_free().
 */
int hm_optimize_run(hm_estimator_t *e, const hm_optimize_opts_t *opts, hm_optimize_result_t *res);

typedef enum {
    HM_OPT_REF_DEFAULT = 0,     /**< every object on the default device */
    HM_OPT_REF_SLOWEST = 1,     /**< every object on the slowest device (capacity ignored) */
    HM_OPT_REF_FASTEST = 2,     /**< every object on the fastest device (capacity ignored) */
    HM_OPT_REF_FIRST_TOUCH = 3  /**< objects in order, each on the fastest device with room */
} hm_optimize_ref_t;

/**
 * Builds a reference placement for comparisons, with the same options
 * (model, phasing, capacities) as a search. "Fastest" and "slowest" rank
 * devices by their measured all-in runtime (hm_estimator_measured_ns()).
 * Same errors and ownership as hm_optimize_run().
 */
int hm_optimize_reference(hm_estimator_t *e, const hm_optimize_opts_t *opts, hm_optimize_ref_t which,
                          hm_optimize_result_t *res);

/** Frees what a result owns and zeroes it; NULL-safe. */
void hm_optimize_result_free(hm_optimize_result_t *res);

/**
 * Measures a placement for hm_optimize_refine(): runs @p pick (its
 * placement_json and state) and writes the measured time to *measured_ns.
 * @p round counts from 1. Returns 0, or a negative value that stops the
 * loop and is returned by hm_optimize_refine() (the callback says why).
 */
typedef int (*hm_optimize_measure_fn)(void *ctx, int round, const hm_optimize_result_t *pick, double *measured_ns);

/** One measured round of hm_optimize_refine(). */
typedef struct {
    double predicted_ns;      /**< the search's estimate of its pick, before the run (model calibrated on the earlier rounds) */
    double measured_ns;       /**< the run's time */
    hm_estimate_t calibrated; /**< the pick on the model calibrated on every round (in sample: its own run is one) */
    hm_est_calibration_t cal; /**< the calibration once this round's run was added */
    char *placement_json;     /**< the pick (owned by the refine result) */
} hm_optimize_round_t;

/** Why hm_optimize_refine() returned the placement it did. */
typedef enum {
    HM_OPT_KEEP_MEASURED = 0, /**< the best measured round: the last search's pick is that placement or a measured
                               *   one, or its 95% interval does not lie below the best measured time */
    HM_OPT_KEEP_SEARCH = 1    /**< the last search's pick, unmeasured: its whole 95% interval lies below the best
                               *   measured time */
} hm_optimize_keep_t;

/** Result of hm_optimize_refine(). Free with hm_optimize_refine_free(). */
typedef struct {
    hm_optimize_result_t result; /**< the returned placement; its estimate is the calibrated model's (its
                                  *   state's assignment holds, but a measured round's state kept the
                                  *   estimate of when it was searched: use result.estimate) */
    hm_optimize_keep_t why;
    int returned_round;          /**< 1..nrounds: the measured round returned; 0: the last search's pick */
    int best_round;              /**< the round with the least measured time (the first of equals) */
    int last_round;              /**< the round whose placement the last search picked again; 0: a new one */
    hm_estimate_t last;          /**< the last search's pick on the calibrated model */
    int nrounds;
    hm_optimize_round_t *rounds; /**< [nrounds], owned */
} hm_optimize_refine_t;

/**
 * The measured refinement loop (docs/optimizer.md, "--refine"): @p rounds
 * times, search (hm_optimize_run()), measure the pick with @p measure, and
 * calibrate @p e's default model on every run so far
 * (hm_estimator_calibrate()); then search once more. A measurement beats
 * a prediction: the placement returned is the measured round with the
 * least time, unless the last search's pick is a placement not measured
 * whose 95% interval's upper end (the calibrated model's, hm_estimate_t
 * hi_ns) lies below that time (HM_OPT_KEEP_SEARCH). @p e stays calibrated
 * on the rounds' runs (any earlier calibration of @p e is dropped first:
 * the first search is the uncalibrated model's). Errors: those of hm_optimize_run() and
 * hm_estimator_calibrate(), HM_EUSAGE (@p rounds < 1, no @p measure, a
 * model other than the default), or what @p measure returned. On success
 * *out holds the result; the caller frees it with hm_optimize_refine_free().
 */
int hm_optimize_refine(hm_estimator_t *e, const hm_optimize_opts_t *opts, int rounds, hm_optimize_measure_fn measure,
                       void *ctx, hm_optimize_refine_t *out);

/** Frees what a refine result owns and zeroes it; NULL-safe. */
void hm_optimize_refine_free(hm_optimize_refine_t *r);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_OPTIMIZE_H */
