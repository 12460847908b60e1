/* hetmem estimate: the runtime of a placement from per-device traces. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "estimate/estimate_int.h"
#include "hetmem/estimate.h"
#include "hetmem/placement.h"

enum { OPT_MODEL = 256, OPT_PLACEMENT, OPT_JSON, OPT_WINDOWS, OPT_SAVE, OPT_SUMMARY, OPT_STRICT, OPT_MACHINE, OPT_EXPLAIN, OPT_CALIBRATE };

static const hm_cli_opt_t est_opts[] = {
    {OPT_PLACEMENT, "placement", "FILE", "placement to estimate (docs/placement-format.md)", HM_OPT_REQUIRED},
    {OPT_MODEL, "model", "linear|default|all", "the model, or all of them (default: default)", 0},
    {OPT_JSON, "json", NULL, "print JSON instead of tables", 0},
    {OPT_WINDOWS, "windows", "N", "windows over the whole run (default 1000)", 0},
    {OPT_SAVE, "save-summary", "FILE", "also write the traces' summary as JSON", 0},
    {OPT_SUMMARY, "summary", "FILE", "use a saved summary instead of traces", 0},
    {OPT_MACHINE, "machine", "MACHINE", "device figures from this machine preset or JSON file instead of the traces'", 0},
    {OPT_STRICT, "strict", NULL, "a placement rule that matches nothing is an error, not a warning", 0},
    {OPT_EXPLAIN, "explain", NULL, "also print the default model's terms per class of windows (with --json, also each object's traffic)", 0},
    {OPT_CALIBRATE, "calibrate", "TRACE=PLACEMENT",
     "calibrate the default model on a run under a mixed placement (its trace and placement file); repeatable",
     HM_OPT_REPEAT},
    {0},
};

static int cmd_estimate(const hm_cmd_t *cmd, int argc, char **argv);
static int run_estimate(const char **traces, int ntr, const char *placement, const int *models, int nm, int json,
                        const char *save, const char *summary, const char *machine, const hm_estimator_opts_t *o,
                        const hm_cmd_t *cmd, int strict, int explain, const char *const *calib, int ncal);

const hm_cmd_t hm_cmd_estimate = {
    "estimate", "Estimate the runtime of a placement from per-device traces",
    "TRACE...\n"
    "       hetmem estimate --summary FILE --placement FILE [options]\n"
    "       hetmem estimate app.%r.ddr.hmt app.%r.hbm.hmt --placement FILE   (MPI job, %r = rank)",
    "Give one trace per memory device, each a run of the same program with all\n"
    "data on that device (hetmem record --bind DEV, or hetmem sim --device DEV).\n"
    "The estimate comes with a 95% interval (sampling error and, for the default\n"
    "model, model error; both half-widths are shown) and a breakdown\n"
    "by phase and by object. Models are described in docs/estimator.md.\n"
    "Device figures (bandwidth, latency) come from the traces' headers (HMAT\n"
    "or record --machine), or from --machine; one line on stderr names those\n"
    "lacking and what the default model does without them.\n"
    "Traces named with %r (as hetmem record -o writes them) are the ranks of an\n"
    "MPI job, 0, 1, ... as long as files exist; the job estimate takes, phase\n"
    "by phase, the slowest rank (bulk-synchronous).\n"
    "Each --calibrate run (a trace of the same command on the same machine,\n"
    "recorded or simulated under PLACEMENT) fits what device runs cannot show:\n"
    "how much the devices' channels overlap (docs/estimator.md, Calibration).",
    est_opts, cmd_estimate};

static void print_table(hm_estimator_t *e, const hm_estimate_t *est, const int *models, int nm,
                        const hm_est_breakdown_t *bd, const char *const *devnames)
{
    printf("  %-12s %14s %s\n", "device run", "measured (s)", "");
    for (int d = 0; d < hm_estimator_ndevices(e); d++)
        printf("  %-12s %14.6f\n", devnames[d], hm_estimator_measured_ns(e, d) / 1e9);
    printf("\n  %-12s %14s   %-26s %12s %12s %14s\n", "model", "estimate (s)", "95% interval (s)", "+-sampling",
           "+-model", "migration (s)");
    for (int i = 0; i < nm; i++) {
        char iv[64];
        snprintf(iv, sizeof iv, "[%.6f, %.6f]", est[i].lo_ns / 1e9, est[i].hi_ns / 1e9);
        printf("  %-12s %14.6f   %-26s %12.6f %12.6f %14.6f\n", hm_est_model_name((hm_est_model_t)models[i]),
               est[i].runtime_ns / 1e9, iv, est[i].sampling_ns / 1e9, est[i].model_ns / 1e9,
               est[i].migration_ns / 1e9);
    }
    if (!bd)
        return;
    printf("\n  %-24s %14s   (%s model)\n", "phase", "estimate (s)", hm_est_model_name((hm_est_model_t)models[nm - 1]));
    for (int p = 0; p < bd->nphases; p++)
        if (bd->phase_ns[p] > 0)
            printf("  %-24s %14.6f\n", hm_estimator_phase_name(e, p), bd->phase_ns[p] / 1e9);
    printf("\n  %-18s %-14s %12s %16s  %s\n", "object site", "name", "size", "memory time (s)", "source");
    for (int o = 0; o < bd->nobjects && o < 20; o++) {
        hm_est_object_t ob;
        hm_estimator_object(e, o, &ob);
        char site[24], sz[32];
        if (ob.movable)
            snprintf(site, sizeof site, "0x%016llx", (unsigned long long)ob.site);
        else
            snprintf(site, sizeof site, "(untracked)");
        printf("  %-18s %-14s %12s %16.6f  %s\n", site, ob.name ? ob.name : "-",
               ob.movable ? hm__fmt_size(ob.size, sz, sizeof sz) : "-", bd->object_ns[o] / 1e9,
               ob.source ? ob.source : "-");
    }
    if (bd->nobjects > 20)
        printf("  (%d more objects)\n", bd->nobjects - 20);
}

/* The device figures the estimate used: where from, and what lacks. */
static json_t *figures_json(const hm_estimator_t *e, const char *machine)
{
    json_t *lack = json_array();
    for (int d = 0; d < hm_estimator_ndevices(e); d++) {
        int l = hm_estimator_device_lacks(e, d);
        if (!l)
            continue;
        json_t *f = json_array();
        if (l & HM_EST_LACKS_BANDWIDTH)
            json_array_append_new(f, json_string("read_bandwidth_gbs"));
        if (l & HM_EST_LACKS_LATENCY)
            json_array_append_new(f, json_string("read_latency_ns"));
        json_array_append_new(lack, json_pack("{s:s, s:o}", "device", hm_estimator_device_name(e, d), "figures", f));
    }
    char src[4200];
    snprintf(src, sizeof src, "%s%s", machine ? "--machine " : "traces", machine ? machine : "");
    double ghz = hm_estimator_core_ghz(e);
    return json_pack("{s:s, s:o, s:o, s:s?}", "source", src, "lacking", lack, "core_ghz",
                     ghz > 0 ? json_real(ghz) : json_null(), "note", hm_estimator_figures_note(e));
}

/* The interval's two half-widths (docs/estimator.md, "The interval"). */
static json_t *interval_json(const hm_estimate_t *est)
{
    return json_pack("{s:f, s:f, s:f}", "sampling_s", est->sampling_ns / 1e9, "model_s", est->model_ns / 1e9,
                     "spread_s", est->spread_ns / 1e9);
}

/* The default model's terms of the estimate, per class of windows
 * (docs/estimator.md): its weight, C, k, the latency side, the busiest
 * channels, what the two give together, the residual, the calibrated mix
 * term (a column only when the model is calibrated with one), the class's
 * time and which term binds. */
static void print_explain(const json_t *ex, int mix)
{
    printf("\n  terms of the default model per class of windows (s; docs/estimator.md)\n");
    printf("  %-18s %5s %6s %10s %7s %10s %10s %-8s %10s %10s ", "phase", "class", "weight", "C", "k", "latency",
           "channels", "(device)", "together", "residual");
    if (mix)
        printf("%10s ", "mix");
    printf("%10s  %s\n", "time", "binds");
    size_t i;
    json_t *x;
    json_array_foreach(ex, i, x) {
        const char *dev = json_string_value(json_object_get(x, "channel_device"));
        printf("  %-18s %5d %6.4f %10.6f %7.4f %10.6f %10.6f %-8s %10.6f %10.6f ",
               json_string_value(json_object_get(x, "phase")), (int)json_integer_value(json_object_get(x, "class")),
               json_real_value(json_object_get(x, "weight")), json_real_value(json_object_get(x, "C_s")), json_real_value(json_object_get(x, "k")),
               json_real_value(json_object_get(x, "latency_s")), json_real_value(json_object_get(x, "channel_s")),
               dev ? dev : "-", json_real_value(json_object_get(x, "bound_s")),
               json_real_value(json_object_get(x, "residual_s")));
        if (mix)
            printf("%10.6f ", json_real_value(json_object_get(x, "mix_s")));
        printf("%10.6f  %s\n", json_real_value(json_object_get(x, "time_s")),
               json_string_value(json_object_get(x, "binds")));
    }
}

/* "t.%r.hmt" with rank r. */
static char *rank_path(const char *pat, int r)
{
    const char *at = strstr(pat, "%r");
    char *out;
    if (asprintf(&out, "%.*s%d%s", (int)(at - pat), pat, r, at + 2) < 0)
        abort();
    return out;
}

static int estimate_job(const char **traces, int ntr, const char *placement, const int *models, int nm, int json,
                        const hm_estimator_opts_t *opts, const char *machine)
{
    hm_estimator_t *ranks[4096];
    int nr = 0, status = HM_EXIT_RUNTIME, rc;
    hm_placement_t *pl = NULL;
    for (; nr < 4096; nr++) {
        char *first = rank_path(traces[0], nr);
        int exists = access(first, F_OK) == 0;
        free(first);
        if (!exists)
            break;
        char *paths[64];
        for (int i = 0; i < ntr; i++)
            paths[i] = rank_path(traces[i], nr);
        rc = hm_estimator_open(&ranks[nr], (const char *const *)paths, ntr, opts);
        for (int i = 0; i < ntr; i++)
            free(paths[i]);
        if (rc < 0) {
            hm_cli_failf("estimate", "rank %d: %s", nr, *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
            goto out;
        }
    }
    if (nr == 0) {
        char *first = rank_path(traces[0], 0);
        hm_cli_failf(first, "no such file (the traces of rank 0)");
        free(first);
        return HM_EXIT_RUNTIME;
    }
    hm_cli_figures_note("estimate", ranks[0]);
    int nd = hm_estimator_ndevices(ranks[0]);
    const char *devnames[64];
    for (int d = 0; d < nd; d++)
        devnames[d] = hm_estimator_device_name(ranks[0], d);
    if ((rc = hm_placement_load(&pl, placement, devnames, nd)) < 0) {
        hm_cli_fail(placement, rc);
        goto out;
    }
    json_t *root = json_object(), *jm = json_object();
    if (!json)
        printf("hetmem estimate: %s, MPI job of %d ranks, %d devices\n\n  %-12s %14s   %-26s\n", placement, nr, nd,
               "model", "job (s)", "95% interval (s)");
    for (int i = 0; i < nm; i++) {
        hm_estimate_t est;
        if ((rc = hm_estimator_estimate_job(ranks, nr, pl, (hm_est_model_t)models[i], &est)) < 0) {
            hm_cli_failf(placement, "%s", *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
            json_decref(root);
            json_decref(jm);
            goto out;
        }
        const char *mn = hm_est_model_name((hm_est_model_t)models[i]);
        json_object_set_new(jm, mn, json_pack("{s:f, s:[f,f], s:o, s:f}", "runtime_s", est.runtime_ns / 1e9, "ci_s",
                                              est.lo_ns / 1e9, est.hi_ns / 1e9, "interval", interval_json(&est),
                                              "migration_s", est.migration_ns / 1e9));
        if (!json) {
            char iv[64];
            snprintf(iv, sizeof iv, "[%.6f, %.6f]", est.lo_ns / 1e9, est.hi_ns / 1e9);
            printf("  %-12s %14.6f   %-26s\n", mn, est.runtime_ns / 1e9, iv);
        }
    }
    if (json) {
        json_object_set_new(root, "ranks", json_integer(nr));
        json_object_set_new(root, "figures", figures_json(ranks[0], machine));
        json_object_set_new(root, "models", jm);
        json_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
    } else {
        json_decref(jm);
    }
    json_decref(root);
    status = HM_EXIT_OK;
out:
    hm_placement_close(pl);
    for (int r = 0; r < nr; r++)
        hm_estimator_close(ranks[r]);
    return status;
}

static int cmd_estimate(const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t cli;
    const char *arg, *placement = NULL, *model = "default", *save = NULL, *summary = NULL, *machine = NULL;
    const char *traces[64], *calib[64];
    int ntr = 0, json = 0, strict = 0, explain = 0, ncal = 0, key;
    uint64_t windows = 0;
    hm_cli_init(&cli, cmd, argc, argv, 0);
    for (;;) {
        key = hm_cli_next(&cli, &arg);
        if (key == -1) {
            int r = hm_cli_operand(&cli, argv, argc, traces, &ntr, 64);
            if (r < 0)
                return hm_cli_usage(cmd, "too many traces (at most 64)");
            if (r == 0)
                break;
            continue;
        }
        switch (key) {
        case OPT_PLACEMENT: placement = arg; break;
        case OPT_MODEL: model = arg; break;
        case OPT_JSON: json = 1; break;
        case OPT_SAVE: save = arg; break;
        case OPT_SUMMARY: summary = arg; break;
        case OPT_STRICT: strict = 1; break;
        case OPT_MACHINE: machine = arg; break;
        case OPT_EXPLAIN: explain = 1; break;
        case OPT_CALIBRATE:
            if (ncal == 64)
                return hm_cli_usage(cmd, "--calibrate: at most 64 runs");
            calib[ncal++] = arg;
            break;
        case OPT_WINDOWS:
            if (hm_cli_u64_in(cmd, "--windows", arg, 1, 100000, NULL, &windows))
                return HM_EXIT_USAGE;
            break;
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    int models[HM_EST_NMODELS], nm = 0;
    if (!strcmp(model, "all")) {
        for (int i = 0; i < HM_EST_NMODELS; i++)
            models[nm++] = i;
    } else {
        hm_est_model_t m;
        if (hm_est_model_parse(model, &m) < 0)
            return hm_cli_usage(cmd, "unknown model '%s' (linear, default or all)", model);
        models[nm++] = (int)m;
    }
    if (!placement)
        return hm_cli_usage(cmd, "--placement FILE is required");
    if (summary && ntr)
        return hm_cli_usage(cmd, "--summary and traces exclude each other");
    if (!summary && ntr < 2)
        return hm_cli_usage(cmd, "give one trace per device, at least two (got %d)", ntr);

    if (summary && machine)
        return hm_cli_usage(cmd, "--machine applies to traces; a summary carries its own device figures");
    hm_estimator_opts_t opts = {(uint32_t)windows, NULL};
    char *mjson = NULL;
    if (machine && hm_cli_machine_json(machine, &mjson))
        return HM_EXIT_RUNTIME;
    opts.machine_json = mjson;
    int status = run_estimate(traces, ntr, placement, models, nm, json, save, summary, machine, &opts, cmd, strict, explain,
                              calib, ncal);
    free(mjson);
    return status;
}

static int run_estimate(const char **traces, int ntr, const char *placement, const int *models, int nm, int json,
                        const char *save, const char *summary, const char *machine, const hm_estimator_opts_t *o,
                        const hm_cmd_t *cmd, int strict, int explain, const char *const *calib, int ncal)
{
    hm_estimator_opts_t opts = *o;
    int with_r = 0;
    for (int i = 0; i < ntr; i++)
        with_r += strstr(traces[i], "%r") != NULL;
    if (with_r && (with_r != ntr || summary))
        return hm_cli_usage(cmd, "either every trace names its rank with %%r (an MPI job) or none does");
    if (explain && (with_r || models[nm - 1] != HM_EST_DEFAULT))
        return hm_cli_usage(cmd, "--explain gives the default model's terms of one process's estimate "
                                 "(not with --model linear or an MPI job)");
    if (with_r && ncal)
        return hm_cli_usage(cmd, "--calibrate applies to one process's traces, not an MPI job's");
    if (with_r)
        return estimate_job(traces, ntr, placement, models, nm, json, &opts, machine);
    hm_estimator_t *e = NULL;
    int rc = summary ? hm_estimator_open_summary(&e, summary) : hm_estimator_open(&e, traces, ntr, &opts);
    if (rc < 0)
        return summary ? hm_cli_fail(summary, rc)
                       : hm_cli_failf("estimate", "%s", *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
    hm_cli_figures_note("estimate", e);
    if (save && (rc = hm_estimator_save(e, save)) < 0) {
        hm_estimator_close(e);
        return hm_cli_fail(save, rc);
    }
    int nd = hm_estimator_ndevices(e);
    const char *devnames[64];
    for (int d = 0; d < nd; d++)
        devnames[d] = hm_estimator_device_name(e, d);
    hm_placement_t *pl = NULL;
    /* Calibration runs: checked to be runs of the device traces' command
     * on their machine (a summary carries neither: not checked then). */
    hm_cli_calib_t cr = {0};
    hm_est_calibration_t cal = {1, 0, 0, 0, 0};
    for (int i = 0; i < ncal; i++)
        if ((rc = hm_cli_calib_spec(&cr, e, summary ? NULL : traces[0], calib[i])) != 0) {
            hm_cli_calib_free(&cr);
            hm_estimator_close(e);
            return rc;
        }
    if (ncal && (rc = hm_cli_calib_fit("estimate", &cr, e, &cal)) != 0) {
        hm_cli_calib_free(&cr);
        hm_estimator_close(e);
        return rc;
    }
    if ((rc = hm_placement_load(&pl, placement, devnames, nd)) < 0) {
        hm_cli_calib_free(&cr);
        hm_estimator_close(e);
        return hm_cli_fail(placement, rc);
    }
    hm_estimate_t est[HM_EST_NMODELS];
    const hm_est_breakdown_t *bd = NULL;
    int status = HM_EXIT_OK;
    json_t *root = json ? json_object() : NULL, *jm = json ? json_object() : NULL;
    for (int i = 0; i < nm; i++) {
        if ((rc = hm_estimator_estimate(e, pl, (hm_est_model_t)models[i], &est[i], &bd)) < 0) {
            status = hm_cli_failf(placement, "%s", *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
            goto out;
        }
        if (json) {
            json_t *ph = json_object(), *ob = json_array();
            for (int p = 0; p < bd->nphases; p++)
                json_object_set_new(ph, hm_estimator_phase_name(e, p), json_real(bd->phase_ns[p] / 1e9));
            for (int o = 0; o < bd->nobjects; o++) {
                hm_est_object_t x;
                hm_estimator_object(e, o, &x);
                char site[32];
                snprintf(site, sizeof site, "0x%016llx", (unsigned long long)x.site);
                json_t *jo = json_pack("{s:s?, s:s?, s:s?, s:I, s:f}", "site", x.movable ? site : NULL, "source",
                                       x.source, "name", x.movable ? x.name : "(untracked)", "size",
                                       (json_int_t)x.size, "memory_s", bd->object_ns[o] / 1e9);
                /* With --explain, the traffic the default model gives the
                 * object (read and written back, bytes). */
                double rd, wr;
                if (explain && models[i] == HM_EST_DEFAULT && hm__est_object_traffic(e, o, &rd, &wr) == 0) {
                    json_object_set_new(jo, "read_bytes", json_real(rd));
                    json_object_set_new(jo, "written_bytes", json_real(wr));
                }
                json_array_append_new(ob, jo);
            }
            json_object_set_new(jm, hm_est_model_name((hm_est_model_t)models[i]),
                                json_pack("{s:f, s:[f,f], s:o, s:f, s:o, s:o}", "runtime_s", est[i].runtime_ns / 1e9,
                                          "ci_s", est[i].lo_ns / 1e9, est[i].hi_ns / 1e9, "interval",
                                          interval_json(&est[i]), "migration_s", est[i].migration_ns / 1e9, "phases",
                                          ph, "objects", ob));
        }
    }
    /* A rule that matched no object is almost always a typo or a placement
     * meant for another program: reported as sim and run report it, and an
     * error with --strict. */
    if (hm_cli_unmatched(placement, hm_placement_unmatched(pl), strict)) {
        status = HM_EXIT_RUNTIME;
        goto out;
    }
    json_t *ex = NULL;
    if (explain && !(ex = hm__est_explain(e, pl))) {
        status = hm_cli_failf(placement, "%s", hm_errdetail());
        goto out;
    }
    if (json) {
        if (ex)
            json_object_set_new(root, "explain", ex);
        ex = NULL;
        json_t *dv = json_array();
        for (int d = 0; d < nd; d++)
            json_array_append_new(dv, json_pack("{s:s, s:f}", "name", devnames[d], "measured_s",
                                                hm_estimator_measured_ns(e, d) / 1e9));
        json_object_set_new(root, "devices", dv);
        json_object_set_new(root, "windows", json_integer(hm_estimator_nwindows(e)));
        json_object_set_new(root, "figures", figures_json(e, machine));
        if (ncal)
            json_object_set_new(root, "calibration", hm_cli_calib_json(&cr, &cal));
        json_object_set_new(root, "models", jm);
        jm = NULL;
        json_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
    } else {
        printf("hetmem estimate: %s, %d devices, %d windows, %d objects\n", placement, nd, hm_estimator_nwindows(e),
               hm_estimator_nobjects(e) - 1);
        if (ncal)
            printf("  calibrated on %d mixed run%s: channel overlap %.4f (1 uncalibrated), mix coefficient %+.4f "
                   "(0 uncalibrated; at most %.2f%% of a class's time); their mean |error| %.2f%% -> %.2f%%\n\n",
                   ncal, ncal == 1 ? "" : "s", cal.overlap, cal.mix, 100 * cal.mix_cap, 100 * cal.mean_err_before,
                   100 * cal.mean_err_after);
        print_table(e, est, models, nm, bd, devnames);
        if (ex) {
            print_explain(ex, hm_estimator_mix(e) != 0);
            const hm_estimate_t *d = &est[nm - 1];
            printf("\n  95%% interval: +-%.6f s = sampling +-%.6f s (1.96 sigma) and model +-%.6f s "
                   "(model_error_q x spread %.6f s) in quadrature\n",
                   (d->hi_ns - d->runtime_ns) / 1e9, d->sampling_ns / 1e9, d->model_ns / 1e9, d->spread_ns / 1e9);
        }
    }
    json_decref(ex);
out:
    json_decref(jm);
    json_decref(root);
    hm_placement_close(pl);
    hm_cli_calib_free(&cr);
    hm_estimator_close(e);
    return status;
}
