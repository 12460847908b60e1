/* Internals of the estimator: the summary that every model reads, and the
 * models' precomputed terms. */
#ifndef HETMEM_ESTIMATE_INT_H
#define HETMEM_ESTIMATE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "common/common.h"
#include "hetmem/estimate.h"

/* Sample statistics of one object in one window of one run. */
typedef struct {
    float n;    /* samples */
    float w;    /* sum of latency weights (core cycles) */
    float m;    /* samples that missed L1 (loads and stores) */
    float sm;   /* store samples that missed L1: each will also write a line back */
    float mm;   /* load samples that reached memory: served by it, or a cache hit
                 * that waited for a line on its way from memory */
    float x;    /* memory-bound part of the weights: all of a memory-served
                 * load's, and what a cache hit waited beyond that level's usual
                 * latency (a line still on its way from memory) */
    float hw;   /* load samples that hit a cache (L2, L3) but waited for memory
                 * there: a line still on its way, as a late prefetch leaves it */
    float sh;   /* store samples that hit L1: each dirties a line already there */
} hm__est_cell_t;

typedef struct {
    uint64_t site;
    char *name;
    char *source; /* "file:line" of the allocating call, or NULL */
    uint64_t size, allocations;
    double samples;
    float pages[100]; /* pages of sampled L1 misses by page number % 100 (all runs) */
    float cum[101];   /* share of those below each percentage (hm__est_prepare) */
} hm__est_obj_t;

typedef struct {
    int phase;            /* label index */
    int region;           /* the stretch between two phase markers it is in (aligned in every run) */
    double instructions;  /* in the reference run (0 when unknown) */
} hm__est_win_t;

/* The default model's terms that do not depend on the placement, per class
 * of windows. */
typedef struct {
    /* classes: the windows of one phase label that share one traffic mix
     * (a phase whose iterations alternate what they read and write, say,
     * has a class per kind of iteration); the terms below are per class */
    int ncls;
    int *cls_phase;       /* per class: its phase label */
    int *cls_sib;         /* per class: the other regime of its phase's split (split_regimes), or -1 */
    double *cls_w;        /* per class: its weight in the estimate: 1, or for the classes of a
                           * split kept with a probability p (classify, split_regimes), p for
                           * its halves and 1 - p for the class unsplit; a phase's windows'
                           * classes weigh 1 in all */
    int *cls_woff;        /* class c's windows are cls_win[cls_woff[c] .. cls_woff[c+1]-1] */
    int *cls_win;         /* (ascending within a class) */
    double *c_ns;         /* device-independent time */
    double *k;            /* ns per latency-weight unit, per (class, device) */
    double *resid;        /* corner residual per (class, device) */
    double *kq;           /* per (class, device): the queue's growth with load of a device
                           * without a loaded-latency curve (0: none) */
    double *ys;           /* per (class, device): scale of the channel time (at most 1: a
                           * bound run that moved less than its traffic estimate) */
    double *lat;          /* per (class, object, device): latency cost (weight x period) */
    double *bytes;        /* per (class, object): sampled bytes read from memory */
    double *wbytes;       /* per (class, object): sampled bytes written back */
    double *bytes_x;      /* per (class, object): traffic the samples do not show
                           * (prefetches), which covers an object's pages evenly */
    double *latsum;       /* per (class, device): sum over objects of lat */
    double *xw, *xwsum;   /* weights that spread the residuals: per (class, object,
                           * device) and their sum per (class, device) */
    double *var;          /* per (object, device): variance of the object's cost, ns^2 */
    double *tdev;         /* per (class, device): the class's time in the run on that device
                           * (the interval's model-error term spreads between them) */
    /* Per class, how its windows share the latency side and the channel
     * side of its time (profile_time): windows sorted by the ratio of their
     * latency share to their channel share (g_r), with running sums of
     * both shares (g_a, g_b); class c's entries are g_off[c] .. g_off[c+1]-1 */
    int *g_off;
    double *g_r, *g_a, *g_b;
    /* Channel overlap (hm_estimator_calibrate): the share of the other
     * devices' channel time that the busiest device's hides; 1 unless
     * calibrated on measured mixed runs. */
    double overlap;
    /* Mix term (hm_estimator_calibrate): a class's time moves by mix times
     * its spread between the device runs, at most mix_cap times its time;
     * 0 unless calibrated. */
    double mix, mix_cap;
    /* Counts the calls of hm_estimator_calibrate: a state whose terms were
     * computed under another count computes them again before it is used. */
    uint64_t calib_gen;
    /* Latency costs were taken as ns for want of the core clock (the
     * weights are core cycles): hm__est_figures_note() names the clock. */
    int clock_needed;
} hm__est_default_t;

/* A placement of one object in one phase: pct percent of its pages on dev,
 * the rest on the default device. */
typedef struct {
    int16_t dev, pct;
} hm__est_slot_t;

/* A placement file compiled against the summary: its rules matched to the
 * objects once, so that estimating it again is numeric only. Keyed by the
 * placement handle's serial (hm_placement_serial()), which no other
 * handle ever has. */
#define HM__EST_PCACHE 8
typedef struct {
    uint64_t serial;      /* 0: empty */
    uint64_t used;        /* last use, for replacing the least recent */
    int np;               /* assignments: phases when the placement has any, else 1 */
    hm__est_slot_t *a;    /* per (assignment, object) */
} hm__est_pcache_t;

struct hm_estimator {
    int ndev, def, ref;
    char **dev_name;
    double *runtime_ns, *period, *bw, *wbw, *lat_ns; /* bw, wbw: read and write bytes per ns for this thread (0: unknown) */
    double core_ghz;      /* core clock of the runs' machine, GHz (0: not given): latency weights are core cycles */
    uint64_t *cap;
    /* loaded latency per device: ll_n points (utilisation, ns) after (0, lat_ns) */
    int *ll_n;
    double (*ll)[2][16];
    int nphase;
    char **phase_name;
    int nobj;             /* including the untracked pseudo-object (last) */
    hm__est_obj_t *obj;
    int nwin;
    hm__est_win_t *win;
    double *t;            /* per (window, device): time in the run on that device */
    hm__est_cell_t *cell; /* per (device, window, object): hm__est_cell() */
    /* linear model, per phase label: the slowest run's time, and per (phase,
     * object, device) the saving of placing the object there and its variance */
    double *lin_phase_base, *lin_phase_gain, *lin_var;
    hm__est_default_t dm;
    /* phase label transitions: count of boundaries from label a to label b */
    int *trans;           /* nphase x nphase */
    /* compiled placements; the lock makes estimates safe on several threads */
    pthread_mutex_t pc_mu;
    int pc_ready;         /* pc_mu initialised */
    uint64_t pc_clock;
    hm__est_pcache_t pc[HM__EST_PCACHE];
    char *fig_note;       /* hm_estimator_figures_note(), NULL when no figure lacks */
    /* scratch for breakdowns */
    double *bd_phase, *bd_obj;
    hm_est_breakdown_t bd;
};

/* Cells lie device by device, then window by window: the runs are binned
 * on parallel threads, one device each, and each thread writes only its
 * own stretch (interleaved by device, two threads wrote the same cache
 * lines and took each other's page faults). */
static inline hm__est_cell_t *hm__est_cell(const hm_estimator_t *e, int w, int o, int d)
{
    return &e->cell[((size_t)d * (size_t)e->nwin + (size_t)w) * (size_t)e->nobj + (size_t)o];
}

/* Builds the models' terms once the summary is filled (model.c). */
int hm__est_prepare(hm_estimator_t *e);
/* How summary building reads cache hits, from the default model's one
 * table of tunables and rules (model.c): a level's usual hit latency is
 * the *pct percentile of the run's hit weights there, and a hit waited for
 * memory when its weight exceeds *ratio times that (INFINITY: none did). */
void hm__est_hit_figures(double *pct, double *ratio);
/* Sets fig_note from the figures the devices lack (estimator.c). */
int hm__est_figures_note(hm_estimator_t *e);
/* The default model's terms of one estimate of @p pl, per class of
 * windows (model.c; `hetmem estimate --explain`): a JSON array the caller
 * frees with json_decref, or NULL with hm_errdetail() set. */
json_t *hm__est_explain(hm_estimator_t *e, hm_placement_t *pl);
/* The memory traffic the default model gives object @p o, whatever the
 * placement (model.c; `hetmem estimate --explain --json`): bytes read (its
 * sampled traffic and its share of the traffic the samples miss) and
 * written back, summed over the classes of windows by their weights.
 * -EINVAL for an object out of range. */
int hm__est_object_traffic(const hm_estimator_t *e, int o, double *rd, double *wr);
/* Allocates the summary arrays for the sizes set in e (summary.c). 0,
 * HM_ETOOBIG or -ENOMEM; what was allocated is e's (hm_estimator_close()). */
int hm__est_alloc(hm_estimator_t *e);
/* Allocates the per-device arrays for e->ndev devices (summary.c). 0 or
 * -ENOMEM; what was allocated is e's. */
int hm__est_alloc_devices(hm_estimator_t *e);

#endif
