/* libFuzzer target for estimator summaries (`hetmem estimate --summary
 * FILE`, hm_estimator_parse_summary): the input is the JSON text. A summary
 * that parses has gone through the models' preparation; it is then estimated
 * by both models, with and without phases, and every object is moved to every
 * device (whole, then half its pages), each estimate checked to be a
 * non-negative time (not NaN) inside its interval. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/estimate.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(double t)
{
    if (!(t >= 0))
        abort(); /* an estimate must be a time: never negative or NaN */
}

static void run(hm_estimator_t *e, hm_est_model_t model, int phased)
{
    hm_est_state_t *s;
    if (hm_est_state_open(&s, e, model, phased) != 0)
        return;
    int nd = hm_estimator_ndevices(e), no = hm_estimator_nobjects(e), np = phased ? hm_estimator_nphases(e) : 0;
    /* Bounded work per input: a few hundred moves at most. */
    for (int o = 0; o < no && o < 16; o++)
        for (int d = 0; d < nd && d < 4; d++)
            for (int ph = phased ? 0 : -1; ph < (phased ? (np < 3 ? np : 3) : 0); ph++) {
                double t = -1;
                if (hm_est_state_move(s, ph, o, d, 100, &t) == 0)
                    check(t);
                if (hm_est_state_move(s, ph, o, d, 50, &t) == 0)
                    check(t);
            }
    hm_estimate_t est;
    if (hm_est_state_estimate(s, &est) == 0) {
        check(est.runtime_ns);
        if (!(est.lo_ns <= est.runtime_ns + 1e-6 * est.runtime_ns + 1e-9 &&
              est.runtime_ns <= est.hi_ns + 1e-6 * est.runtime_ns + 1e-9))
            abort(); /* the interval holds its estimate */
    }
    check(hm_est_state_runtime(s));
    hm_est_state_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = fuzz_text(data, size);
    if (!json)
        return 0;
    hm_estimator_t *e;
    if (hm_estimator_parse_summary(&e, "fuzz.json", json) == 0) {
        run(e, HM_EST_DEFAULT, 0);
        run(e, HM_EST_LINEAR, 0);
        if (hm_estimator_nphases(e) > 1)
            run(e, HM_EST_DEFAULT, 1);
        hm_estimator_close(e);
    }
    free(json);
    return 0;
}
