/* hm_errdetail() describes the last failing call, never an earlier one:
 * every public call that can set a detail clears it first, so a call that
 * fails (or succeeds) without one leaves no stale detail for the CLI to
 * print after its own error. */
#include <string.h>

#include "check.h"
#include "hetmem/error.h"
#include "hetmem/estimate.h"
#include "hetmem/optimize.h"
#include "hetmem/placement.h"
#include "hetmem/record.h"
#include "hetmem/sim.h"
#include "hetmem/trace.h"

static const char *devs[] = {"ddr", "hbm"};

/* Leaves a detail naming STALEMARK behind. */
static void stale(void)
{
    hm_placement_t *p = NULL;
    int rc = hm_placement_parse(&p, "STALEMARK", "{\"rules\": [{\"name\": \"x\", \"device\": \"STALEMARK\"}]}", devs, 2);
    CHECK(rc < 0);
    CHECK(strstr(hm_errdetail(), "STALEMARK") != NULL);
}

#define FRESH(call)                                                              \
    do {                                                                         \
        stale();                                                                 \
        (void)(call);                                                            \
        const char *d_ = hm_errdetail();                                         \
        if (strstr(d_, "STALEMARK"))                                             \
            fprintf(stderr, "%s left the stale detail: %s\n", #call, d_);        \
        CHECK(strstr(d_, "STALEMARK") == NULL);                                  \
    } while (0)

int main(void)
{
    /* A detail that wraps the one it was given ("%s: %s", where,
     * hm_errdetail()) keeps that one intact. */
    {
        hm_estimator_t *e = NULL;
        const char *paths[] = {"/nonexistent/wrapA.hmt", "/nonexistent/wrapB.hmt"};
        CHECK(hm_estimator_open(&e, paths, 2, NULL) < 0);
        const char *d = hm_errdetail();
        size_t n = strlen(d), k = strlen("No such file or directory");
        CHECK(n >= k && strcmp(d + n - k, "No such file or directory") == 0);
        CHECK(strstr(d, "directory/") == NULL);
    }
    hm_backend_t b;
    FRESH(hm_backend_parse("soft", &b));
    FRESH(hm_backend_parse("no-such-backend", &b));
    hm_optimize_algo_t a;
    FRESH(hm_optimize_algo_parse("greedy", &a));
    FRESH(hm_optimize_algo_parse("no-such-algo", &a));
    hm_est_model_t m;
    FRESH(hm_est_model_parse("linear", &m));
    FRESH(hm_est_model_parse("no-such-model", &m));

    hm_trace_t *t = NULL;
    FRESH(hm_trace_open(&t, "/nonexistent/x.hmt"));
    hm_trace_writer_t *w = NULL;
    hm_trace_meta_t meta;
    memset(&meta, 0, sizeof meta);
    FRESH(hm_trace_writer_open(&w, "/nonexistent/dir/x.hmt", &meta));

    hm_placement_t *p = NULL;
    FRESH(hm_placement_load(&p, "/nonexistent/p.json", devs, 2));
    FRESH(hm_placement_parse(&p, "ok", "{\"default\": \"ddr\"}", devs, 2));
    hm_placement_close(p);

    hm_sim_machine_t *mc = NULL;
    FRESH(hm_sim_machine_load(&mc, "/nonexistent/m.json"));
    char buf[256];
    FRESH(hm_sim_machine_find("no-such-machine", NULL, buf, sizeof buf));

    hm_spe_stats_t st;
    memset(&st, 0, sizeof st);
    size_t used = 0;
    uint8_t junk[4] = {0};
    FRESH(hm_spe_decode(junk, 0, NULL, NULL, NULL, NULL, &st, &used));
    return check_done();
}
