/* The measured refinement loop: search, run the pick, calibrate the model
 * on every run so far, search again; and which placement to return.
 *
 * Every round's pick has a measured time, and a measurement beats a
 * prediction: the calibrated model's estimate of a placement it was fitted
 * on is in sample (one run makes it exact), and its estimate of a placement
 * never run is what the loop was started to doubt. So the loop returns the
 * best measured round, and the last search's unmeasured pick only when the
 * model itself is confident that it is faster: the upper end of its 95%
 * interval (sampling and model error, docs/estimator.md "The interval")
 * lies below the best measured time. The interval is the estimator's own;
 * no constant is added here. */
#include <stdlib.h>
#include <string.h>

#include "hetmem/placement.h"
#include "opt_int.h"

static int parse_pick(hm_estimator_t *e, const char *json, hm_placement_t **out)
{
    int nd = hm_estimator_ndevices(e);
    const char **names = hm__xcalloc((size_t)nd, sizeof *names);
    for (int d = 0; d < nd; d++)
        names[d] = hm_estimator_device_name(e, d);
    int rc = hm_placement_parse(out, "refine round", json, names, nd);
    free(names);
    return rc;
}

HM_API int hm_optimize_refine(hm_estimator_t *e, const hm_optimize_opts_t *opts, int rounds,
                              hm_optimize_measure_fn measure, void *ctx, hm_optimize_refine_t *out)
{
    hm__errclear();
    memset(out, 0, sizeof *out);
    if (rounds < 1 || !measure)
        return hm__errf(HM_EUSAGE, "refine: %s", rounds < 1 ? "at least one round" : "no way to measure a placement");
    if (opts->model != HM_EST_DEFAULT)
        return hm__errf(HM_EUSAGE, "refine calibrates the default model");
    hm_optimize_result_t *res = hm__xcalloc((size_t)rounds + 1, sizeof *res); /* every round's pick, then the last */
    hm_placement_t **pls = hm__xcalloc((size_t)rounds, sizeof *pls);
    double *ns = hm__xcalloc((size_t)rounds, sizeof *ns);
    out->rounds = hm__xcalloc((size_t)rounds, sizeof *out->rounds);
    /* The rounds' runs are the calibration: the first search is the
     * uncalibrated model's, as a plain search. */
    int rc = hm_estimator_calibrate(e, NULL, NULL, 0, NULL), n = 0;
    if (rc >= 0)
        rc = hm_optimize_run(e, opts, &res[0]);
    for (int k = 0; k < rounds && rc >= 0; k++) {
        hm_optimize_round_t *r = &out->rounds[k];
        r->predicted_ns = res[k].estimate.runtime_ns;
        if ((rc = measure(ctx, k + 1, &res[k], &ns[k])) < 0)
            break;
        if (!(ns[k] > 0)) {
            rc = hm__errf(HM_EUSAGE, "refine round %d: measured time %g ns is not a positive time", k + 1, ns[k]);
            break;
        }
        r->measured_ns = ns[k];
        r->placement_json = hm__xstrdup(res[k].placement_json);
        out->nrounds = ++n;
        if ((rc = parse_pick(e, res[k].placement_json, &pls[k])) < 0 ||
            (rc = hm_estimator_calibrate(e, pls, ns, k + 1, &r->cal)) < 0)
            break;
        rc = hm_optimize_run(e, opts, &res[k + 1]);
    }
    if (rc < 0)
        goto out;
    /* Every measured placement on the final model; the best by measured time. */
    for (int k = 0; k < n; k++) {
        if ((rc = hm_estimator_estimate(e, pls[k], HM_EST_DEFAULT, &out->rounds[k].calibrated, NULL)) < 0)
            goto out;
        if (!out->best_round || ns[k] < ns[out->best_round - 1])
            out->best_round = k + 1;
        if (!out->last_round && strcmp(res[k].placement_json, res[n].placement_json) == 0)
            out->last_round = k + 1;
    }
    out->last = res[n].estimate;
    int keep;
    if (!out->last_round && res[n].estimate.hi_ns < ns[out->best_round - 1]) {
        out->why = HM_OPT_KEEP_SEARCH;
        keep = n;
    } else {
        out->why = HM_OPT_KEEP_MEASURED;
        out->returned_round = out->best_round;
        keep = out->best_round - 1;
        /* Its state's cached estimate is the model's of when it was picked. */
        res[keep].estimate = out->rounds[keep].calibrated;
    }
    out->result = res[keep];
    memset(&res[keep], 0, sizeof res[keep]);
out:
    for (int k = 0; k <= rounds; k++)
        hm_optimize_result_free(&res[k]);
    for (int k = 0; k < rounds; k++)
        hm_placement_close(pls[k]);
    free(res);
    free(pls);
    free(ns);
    if (rc < 0)
        hm_optimize_refine_free(out);
    return rc;
}

HM_API void hm_optimize_refine_free(hm_optimize_refine_t *r)
{
    if (!r)
        return;
    hm_optimize_result_free(&r->result);
    for (int k = 0; k < r->nrounds; k++)
        free(r->rounds[k].placement_json);
    free(r->rounds);
    memset(r, 0, sizeof *r);
}
