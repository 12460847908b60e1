/**
 * @file estimate.h
 * @brief Differential-tracing runtime estimator.
 *
 * From N sampled traces of one program, one run per memory device with all
 * data on that device, the estimator predicts the runtime of any mixed
 * placement (docs/estimator.md):
 *
 *  1. open: the traces are aligned (phase markers, then windows of equal
 *     instruction count when the traces carry instruction counters, else of
 *     equal time) and summarised per window, per object and per device;
 *  2. query: a placement file (hm_estimator_estimate()) or an incremental
 *     state (hm_est_state_*) gives the estimated runtime with a confidence
 *     interval and a breakdown.
 *
 * Objects are allocation sites (all allocations of a site share a
 * placement, as site rules do), told apart by name where hetmem_name()
 * named them. They are matched across runs by site and name, never by
 * address. The untracked pseudo-object (stack, static data, unrecorded
 * allocations) stays on the placement's default device.
 *
 * Models: HM_EST_LINEAR is the published method (Denoyelle et al., ISC
 * 2022): windows matched by index, the slowest run interpolated towards
 * each faster one by the share of its samples placed there, with the 3%
 * cut-off. HM_EST_DEFAULT splits each window into device-independent time
 * and the latency cost of each object's accesses, calibrated from the runs,
 * and bounds each device by its bandwidth share.
 *
 * A summary can be saved as JSON and opened again without the traces
 * (hm_estimator_save(), hm_estimator_open_summary()); hand-written summaries
 * serve as synthetic instances. Its shape (docs/estimator.md):
 * @code
 * { "format": "hetmem-estimate-summary", "version": 1,
 *   "default": 0, "core_ghz": 2.0,
 *   "devices": [ {"name": "ddr", "runtime_ns": 1.52e10, "period": 1000,
 *                 "capacity": 1481763717, "bandwidth_gbs": 1.32, "write_bandwidth_gbs": 1.32,
 *                 "read_latency_ns": 130}, ... ],
 *   "phases": ["(no phase)", "copy", ...],
 *   "objects": [ {"site": "0x332b5c7b30010890", "name": "a", "size": 67108864, "allocations": 1}, ... ],
 *   "windows": [ {"phase": 1, "region": 3, "instructions": 1049881, "t_ns": [759230, 361022],
 *                 "stats": [ [OBJ, DEV, SAMPLES, WEIGHT_SUM, L1_MISSES, MEMORY_WEIGHT, STORE_MISSES, MEMORY_LOADS, HIT_WAITS, STORE_HITS], ... ] }, ... ] }
 * @endcode
 * "core_ghz" (optional) is the core clock the latency weights (core cycles)
 * count in; without it they are taken as ns. "bandwidth_gbs" and
 * "write_bandwidth_gbs" (default: the read figure) are
 * the traced thread's share of the device (GB/s = bytes per ns); "runtime_ns" the measured runtime of the run with all data on the
 * device; per window "t_ns" that run's time in the window, and "region" the
 * stretch between two phase markers it lies in (optional: without it a new
 * region starts wherever the phase changes; any non-negative integers, of
 * which only the order counts). Times, rates and counts above 1e18 are
 * refused. "stats" rows give,
 * for object OBJ (index into "objects"; the number of objects stands for the
 * untracked pseudo-object) in the run on device DEV, its sample count, the sum
 * of the samples' latency weights (core cycles), the samples that missed
 * L1, and the memory-bound part of the weights (all of a memory-served
 * load's weight; what a cache hit waited beyond that level's usual latency);
 * the store samples among the L1 misses (each also writes a line back), and
 * the load samples that reached memory (served by it, or a hit that waited
 * for a line on its way), and among those the cache hits that waited;
 * and the store samples that hit L1 (each dirties a line already there);
 * rows left out are zero; MEMORY_WEIGHT may be left out (it is then
 * WEIGHT_SUM), STORE_MISSES (then 0), MEMORY_LOADS (then every load that
 * missed L1), HIT_WAITS (then 0) and STORE_HITS (then 0). Optional per object: "pages", 100 counts of
 * sampled L1 misses by (page number % 100), for pages_percent splits
 * (without it a split moves its percentage of the object's accesses).
 *
 * Thread safety: an estimator is read-only after open (but for the
 * placements it keeps compiled, under a lock), so estimates and states on
 * one estimator may run on several threads, one state per thread.
 */
#ifndef HETMEM_ESTIMATE_H
#define HETMEM_ESTIMATE_H

#include <stddef.h>
#include <stdint.h>

#include "hetmem/placement.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hm_estimator hm_estimator_t;

typedef enum {
    HM_EST_LINEAR = 0,  /**< the published method */
    HM_EST_DEFAULT = 1, /**< latency cost and bandwidth bound (docs/estimator.md) */
    HM_EST_NMODELS = 2
} hm_est_model_t;

/** Model name ("linear", "default"), or NULL. */
const char *hm_est_model_name(hm_est_model_t m);
/** Model by name; HM_EUSAGE when unknown. */
int hm_est_model_parse(const char *name, hm_est_model_t *out);

/** Options of hm_estimator_open(); zero means the default. */
typedef struct {
    uint32_t windows;   /**< windows over the whole run (default 1000) */
    /** Device figures (a machine description as JSON text, docs/machines.md)
     *  used instead of those the traces carry; NULL: the traces'. Devices
     *  are looked up by the traces' device names, else by the NUMA nodes a
     *  recorded run was bound to ("nodeN"). */
    const char *machine_json;
} hm_estimator_opts_t;

/**
 * Opens an estimator from @p n traces (n >= 2), one per device.
 * Errors (detail names the file and what): HM_EUSAGE (fewer than 2 traces),
 * HM_EMISMATCH (different programs or command lines, runs of different
 * machines: host name, CPU model, memory nodes or simulated machine, two
 * traces of one device, phases that differ), HM_EBADJSON (opts->machine_json), HM_EBADTRACE/HM_ETRUNC/HM_ECORRUPT (a trace
 * that cannot be read, has no end record, or holds no samples), -errno.
 * *out is owned by the caller (hm_estimator_close()).
 */
int hm_estimator_open(hm_estimator_t **out, const char *const *paths, int n, const hm_estimator_opts_t *opts);
/** Opens a summary saved by hm_estimator_save() (or written by hand). */
int hm_estimator_open_summary(hm_estimator_t **out, const char *path);
/** Same, from JSON text; @p what names the source in error details. */
int hm_estimator_parse_summary(hm_estimator_t **out, const char *what, const char *json);
/** Writes the summary as JSON (docs/estimator.md). 0 or -errno. */
int hm_estimator_save(const hm_estimator_t *e, const char *path);
void hm_estimator_close(hm_estimator_t *e);

/* ------------------------------------------------------------ description */

int hm_estimator_ndevices(const hm_estimator_t *e);
/** Device name (owned by the handle), or NULL when out of range. */
const char *hm_estimator_device_name(const hm_estimator_t *e, int dev);
/** Index of device @p name, or HM_ENODEV (detail lists the devices). */
int hm_estimator_device_index(const hm_estimator_t *e, const char *name);
/** Capacity in bytes available to the traced process (0 when unknown). */
uint64_t hm_estimator_device_capacity(const hm_estimator_t *e, int dev);
/** Measured runtime of the run with all data on @p dev, in ns. */
double hm_estimator_measured_ns(const hm_estimator_t *e, int dev);
/** The default device: the first device of the traces' machine. */
int hm_estimator_default_device(const hm_estimator_t *e);

/** Device figures a device lacks (bits), for hm_estimator_device_lacks(). */
enum { HM_EST_LACKS_BANDWIDTH = 1, HM_EST_LACKS_LATENCY = 2 };
/** Which of its read bandwidth and idle read latency device @p dev lacks
 *  (HM_EST_LACKS_* bits; 0: it has both). */
int hm_estimator_device_lacks(const hm_estimator_t *e, int dev);
/**
 * One sentence naming the device figures the estimator lacks and what the
 * default model does without them (docs/estimator.md, "Device figures"), or
 * NULL when every device has its bandwidth and latency and the core clock
 * is given or was not needed (hm_estimator_core_ghz()). Owned by the handle.
 */
const char *hm_estimator_figures_note(const hm_estimator_t *e);
/**
 * The core clock of the runs' machine in GHz (the machine description's
 * core.freq_ghz, or a summary's "core_ghz"), 0 when not given. Latency
 * weights are core cycles; the default model compares them with a
 * device's idle latency (ns) through it (docs/estimator.md, "Device
 * figures").
 */
double hm_estimator_core_ghz(const hm_estimator_t *e);

/** Phase labels (innermost phase names; label 0 is "(no phase)"). */
int hm_estimator_nphases(const hm_estimator_t *e);
const char *hm_estimator_phase_name(const hm_estimator_t *e, int phase);

typedef struct {
    uint64_t site;       /**< allocation site id (0 for the untracked pseudo-object) */
    const char *name;    /**< hetmem_name() or NULL; owned by the handle */
    uint64_t size;       /**< peak live bytes of the object's allocations */
    uint64_t allocations;/**< allocations of the site in one run */
    double samples;      /**< samples in the reference run (the slowest) */
    int movable;         /**< 0 for the untracked pseudo-object */
    const char *source;  /**< "file:line" of the allocating call, or NULL; owned by the handle */
} hm_est_object_t;

/** Objects, hottest first; the untracked pseudo-object is the last one. */
int hm_estimator_nobjects(const hm_estimator_t *e);
int hm_estimator_object(const hm_estimator_t *e, int obj, hm_est_object_t *out);
/** Object of a placement rule-style selector: by name, else site; its
 *  index, or HM_ENOTFOUND when no object matches. */
int hm_estimator_find_object(const hm_estimator_t *e, uint64_t site, const char *name);
/** Windows of the summary. */
int hm_estimator_nwindows(const hm_estimator_t *e);

/* --------------------------------------------------------------- queries */

typedef struct {
    double runtime_ns;   /**< estimate */
    double lo_ns, hi_ns; /**< 95% interval: sampling and model error (the half-widths below in quadrature) */
    double migration_ns; /**< part of the estimate spent moving pages at phase boundaries */
    double sampling_ns;  /**< half-width of the interval from sampling error alone (1.96 sigma) */
    double model_ns;     /**< half-width from model error: model_error_q times spread_ns (default model; 0 for linear) */
    double spread_ns;    /**< the placement's spread between its device runs, per class of windows the mean
                          *   distance of each device run's time from their mix by the traffic the placement
                          *   puts on each device, summed (0 with all data on one device) */
} hm_estimate_t;

/** Breakdown of the last estimate (owned by the handle or state; valid until its next call). */
typedef struct {
    int nphases;
    const double *phase_ns;   /**< per phase label */
    int nobjects;
    const double *object_ns;  /**< per object: its share of the memory-dependent time */
} hm_est_breakdown_t;

/**
 * Estimates the runtime of a placement file's placement. @p p must have been
 * loaded with this estimator's device names (hm_estimator_device_name()).
 * Rules are matched as the simulator and `hetmem run` do: per object, in the
 * innermost phase of each window (objects move at phase boundaries, with a
 * migration cost from bytes moved and device bandwidth); pages_percent splits
 * use the sampled pages of the object. With @p bd non-NULL, *bd points to a
 * breakdown owned by the estimator (not thread-safe then).
 * The rules are matched to the objects on the first estimate of @p p and
 * kept by the estimator (the last 8 placements used), so that estimating
 * the same handle again costs only the model's arithmetic; the rules' hit
 * counts (hm_placement_unmatched()) are those of that first match.
 * Errors: HM_EUSAGE (model), HM_ENODEV (device index out of range).
 */
int hm_estimator_estimate(hm_estimator_t *e, hm_placement_t *p, hm_est_model_t model,
                          hm_estimate_t *out, const hm_est_breakdown_t **bd);

/** What hm_estimator_calibrate() fitted, and how the runs' estimates moved. */
typedef struct hm_est_calibration {
    double overlap;        /**< channel overlap: 1 (uncalibrated) down to 0 */
    double mean_err_before;/**< mean |estimate - measured| / measured of the runs, uncalibrated */
    double mean_err_after; /**< the same, calibrated */
    double mix;            /**< mix coefficient beta: a class's time moves by beta x its spread (0 uncalibrated) */
    double mix_cap;        /**< the term is at most this share of the placement's time (the runs' largest relative error at w) */
} hm_est_calibration_t;

/**
 * Calibrates the default model on @p n measured runs of mixed placements
 * (@p pls[i] run in @p measured_ns[i]; loaded with this estimator's device
 * names), fitting what the runs with all data on one device cannot show
 * (docs/estimator.md, "Calibration on measured mixed runs"):
 *  - the mix coefficient beta: each class's time moves by beta times its
 *    spread between the device runs (hm_estimate_t's spread_ns, zero at
 *    every all-on-one-device corner), in all by at most mix_cap (the runs'
 *    largest relative error) times the placement's time; the least-squares
 *    fit of the runs' relative errors;
 *  - from three runs on, with it, the channel overlap w, how much of the
 *    other devices' channel time a class's busiest device hides (its
 *    channel side is max_d y_d + (1 - w) (sum_d y_d - max_d y_d); w = 1,
 *    every device's channels busy at once, is the uncalibrated model): the
 *    value in [0, 1] whose least-squares beta leaves the smallest squared
 *    relative errors (the largest such, so that runs that cannot tell
 *    leave w = 1); fewer runs leave w = 1.
 * Every later estimate and state of @p e uses them, states opened before
 * the call included (such a state computes its terms again on its next
 * move, estimate, runtime or copy); n = 0 puts w back to 1 and beta to 0,
 * where every estimate is the uncalibrated one.
 * With @p out non-NULL, fills it. Not thread-safe with estimates on @p e.
 * Errors: HM_EUSAGE (n < 0, a time that is not a positive number),
 * HM_ENODEV (a placement's devices).
 */
int hm_estimator_calibrate(hm_estimator_t *e, hm_placement_t *const *pls, const double *measured_ns, int n,
                           hm_est_calibration_t *out);
/** The channel overlap the default model uses (1 unless calibrated). */
double hm_estimator_overlap(const hm_estimator_t *e);
/** The mix coefficient beta the default model uses (0 unless calibrated). */
double hm_estimator_mix(const hm_estimator_t *e);

/**
 * Estimate of an MPI job, bulk-synchronous: one estimator per rank (each
 * from that rank's device traces), and per phase label the slowest rank's
 * time; phases are matched by name, and migration is the slowest rank's.
 * The interval scales with the ranks' relative intervals (the widest).
 * Errors as hm_estimator_estimate(); HM_EUSAGE when @p nranks < 1.
 */
int hm_estimator_estimate_job(hm_estimator_t *const *ranks, int nranks, hm_placement_t *p, hm_est_model_t model,
                              hm_estimate_t *out);

/* ----------------------------------------------------- incremental states */

typedef struct hm_est_state hm_est_state_t;

/**
 * An assignment of objects to devices, per phase label when @p phased is
 * non-zero (with migration cost at phase boundaries), that is re-estimated
 * incrementally. It starts with everything on the default device, and
 * follows the estimator's calibration (hm_estimator_calibrate()) whenever
 * it was made.
 * *out is owned by the caller (hm_est_state_close()).
 */
int hm_est_state_open(hm_est_state_t **out, hm_estimator_t *e, hm_est_model_t model, int phased);
void hm_est_state_close(hm_est_state_t *s);
/** Copies @p src's assignment into @p dst (same estimator, model and phasing). */
int hm_est_state_copy(hm_est_state_t *dst, const hm_est_state_t *src);

/**
 * Moves object @p obj to device @p dev in phase label @p phase (-1: every
 * phase; must be -1 for an unphased state), with @p pct percent of its pages
 * there (100: the whole object; the rest stays on the default device, as a
 * pages_percent rule does). Writes the new estimate to *runtime_ns when
 * non-NULL. Errors: HM_ERANGE (index, device or percent out of range),
 * HM_EUSAGE (the untracked pseudo-object, or a phase on an unphased state).
 */
int hm_est_state_move(hm_est_state_t *s, int phase, int obj, int dev, int pct, double *runtime_ns);
/** Current estimate, with interval and migration time. */
int hm_est_state_estimate(hm_est_state_t *s, hm_estimate_t *out);
double hm_est_state_runtime(const hm_est_state_t *s);
/** Device and percent of object @p obj in phase @p phase (-1: phase 0 of a phased state). */
int hm_est_state_device(const hm_est_state_t *s, int phase, int obj, int *pct);
/** Bytes of the assignment on @p dev (peak over phases for a phased state). */
uint64_t hm_est_state_bytes(const hm_est_state_t *s, int dev);
/**
 * The assignment as placement JSON (site rules, per-phase rules when phased).
 * Malloc'd; the caller frees it. NULL on allocation failure.
 */
char *hm_est_state_placement_json(const hm_est_state_t *s);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_ESTIMATE_H */
