/* hetmem optimize: search for the fastest placement under device capacities,
 * on the estimator built from per-device traces (or a saved summary), and
 * compare it with the reference placements (all on the default device,
 * first touch, all on the slowest and on the fastest device). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hetmem/estimate.h"
#include "hetmem/optimize.h"
#include "hetmem/placement.h"

enum {
    OPT_CAPACITY = 256, OPT_ALGO, OPT_MODEL, OPT_PHASES, OPT_SPLIT, OPT_BUDGET, OPT_TIME, OPT_SEED,
    OPT_JSON, OPT_SUMMARY, OPT_POLICY, OPT_SAVE_POLICY, OPT_MACHINE, OPT_BY_SOURCE, OPT_REFINE,
    OPT_ALLOW_EXIT, OPT_SPLIT_STEP, OPT_PICK
};

static const hm_cli_opt_t opt_opts[] = {
    {OPT_CAPACITY, "capacity", "DEV=SIZE", "bytes the placement may use on DEV (K/M/G/T suffixes; without one, at least a page); repeat per device",
     HM_OPT_REQUIRED | HM_OPT_REPEAT},
    {OPT_ALGO, "algo", "rl|greedy|anneal|exhaustive|random", "the search (default rl)", 0},
    {OPT_MODEL, "model", "default|linear", "estimator model (default: default)", 0},
    {OPT_PHASES, "phases", NULL, "place per phase (objects move at phase boundaries, migration cost included)", 0},
    {OPT_SPLIT, "split", NULL, "an object's pages may go in part to a device (pages_percent), for room or for bandwidth", 0},
    {OPT_SPLIT_STEP, "split-step", "PCT", "the percentages a split may take: PCT, 2 PCT, ..., 100 (default 10; implies --split)", 0},
    {OPT_BUDGET, "budget", "N", "at most N estimator calls (default 20000 for rl, anneal, random)", 0},
    {OPT_TIME, "time", "S", "stop after S seconds (results then depend on the machine's speed)", HM_OPT_ALT},
    {OPT_SEED, "seed", "S", "random seed (default 1)", 0},
    {'o', "output", "FILE", "write the placement file", 0},
    {OPT_BY_SOURCE, "by-source", NULL,
     "name objects in the placement by source line (file:line) where one line picks out that object alone", 0},
    {OPT_JSON, "json", NULL, "print the result as JSON", 0},
    {OPT_SUMMARY, "summary", "FILE", "use a saved estimator summary instead of traces", 0},
    {OPT_MACHINE, "machine", "MACHINE", "device figures from this machine preset or JSON file instead of the traces'", 0},
    {OPT_POLICY, "policy", "FILE", "rl: start from this saved policy", 0},
    {OPT_SAVE_POLICY, "save-policy", "FILE", "rl: save the trained policy", 0},
    {OPT_PICK, "pick", "estimate|upper",
     "return the search's placement (estimate, the default), or of it and greedy's the one whose 95% interval "
     "ends lower (upper: the lowest estimate of many is the likeliest to be an underestimate)", 0},
    {OPT_REFINE, "refine", "N",
     "N rounds of: run the chosen placement in the simulator, calibrate on it, optimize again (simulated traces)", 0},
    {OPT_ALLOW_EXIT, "allow-exit", "N",
     "--refine: exit status N (1-255) of the program also means success (for programs that return one when they "
     "finish); repeatable",
     HM_OPT_REPEAT},
    {0},
};

static int cmd_optimize(const hm_cmd_t *cmd, int argc, char **argv);

const hm_cmd_t hm_cmd_optimize = {
    "optimize", "Search for the fastest placement under capacity limits",
    "TRACE...\n"
    "       hetmem optimize --summary FILE --capacity DEV=SIZE... [options]",
    "TRACEs are one sampled trace per device with all data on it (hetmem sim -o, hetmem\n"
    "record --bind). Devices without --capacity keep the capacity recorded in the traces.\n"
    "Prints the predicted runtime with its 95% interval and compares it with all data on\n"
    "the default device, with first touch (objects in order, each on the fastest device\n"
    "with room) and with greedy: 'gap closed' is the share of the gap from all data on the\n"
    "slowest device to the better of greedy and first touch (first touch alone for --algo\n"
    "greedy) that the result closes; above 100% it beats both. Algorithms and the --json\n"
    "fields: docs/optimizer.md.\n"
    "--refine N runs the chosen placement with hetmem sim --placement (the traces' machine,\n"
    "command and sampling period), calibrates the default model on that measured run\n"
    "(docs/estimator.md, Calibration) and optimizes again, N times; each round's\n"
    "predicted and measured times are printed, and its runs kept for estimate --calibrate.\n"
    "It returns the fastest measured round's placement unless the last search's pick was\n"
    "not run and its whole 95% interval lies below that time (docs/optimizer.md).",
    opt_opts, cmd_optimize};

#define MAX_CAPS 16

static double s_of(double ns)
{
    return ns * 1e-9;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fputs(text, f);
    fputc('\n', f);
    return fclose(f) == 0 ? 0 : -errno;
}

/* The link of @p o's source chain (allocating line first, then its
 * callers) that no other object's chain holds, as "file:line" in @p buf, or
 * NULL when every link is shared (a wrapper called from one line for two
 * objects) or the object has no source. */
static const char *unique_line(hm_estimator_t *e, int o, char *buf, size_t len)
{
    hm_est_object_t ob;
    if (hm_estimator_object(e, o, &ob) < 0 || !ob.source)
        return NULL;
    size_t k;
    for (const char *p = ob.source, *next; p && *p; p = next) {
        next = hm__source_link(p, &k);
        if (k > 0 && k < len && memchr(p, ':', k)) {
            memcpy(buf, p, k);
            buf[k] = 0;
            int shared = 0;
            for (int j = 0; j < hm_estimator_nobjects(e) && !shared; j++) {
                hm_est_object_t other;
                shared = j != o && hm_estimator_object(e, j, &other) == 0 && hm__source_has(other.source, buf);
            }
            if (!shared)
                return buf;
        }
    }
    return NULL;
}

/* Rewrites the site-id rules of placement @p text (top level and phases)
 * as "file:line" rules where unique_line finds one; returns the new text
 * (the old one freed), or @p text unchanged when it does not parse. */
static char *by_source(hm_estimator_t *e, char *text)
{
    json_t *root = json_loads(text, 0, NULL);
    if (!root)
        return text;
    json_t *lists[64];
    int nl = 0;
    lists[nl++] = json_object_get(root, "rules");
    const char *ph;
    json_t *pv;
    json_object_foreach(json_object_get(root, "phases"), ph, pv) if (nl < 64) lists[nl++] = json_object_get(pv, "rules");
    for (int l = 0; l < nl; l++) {
        size_t i;
        json_t *r;
        json_array_foreach(lists[l], i, r)
        {
            const char *site = json_string_value(json_object_get(r, "site"));
            uint64_t id;
            if (!site || strncmp(site, "0x", 2) || hm__parse_u64(site, &id) < 0)
                continue;
            for (int o = 0; o < hm_estimator_nobjects(e); o++) {
                hm_est_object_t ob;
                char line[256];
                if (hm_estimator_object(e, o, &ob) == 0 && ob.site == id) {
                    if (unique_line(e, o, line, sizeof line))
                        json_object_set_new(r, "site", json_string(line));
                    break;
                }
            }
        }
    }
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!txt)
        return text;
    free(text);
    return txt;
}

static void print_objects(FILE *f, hm_estimator_t *e, const hm_optimize_result_t *r, int phased)
{
    char b[32];
    int nph = phased ? hm_estimator_nphases(e) : 1;
    fprintf(f, "\n  %-18s %-16s %10s  %-*s  %s\n", "object site", "name", "size", phased ? 40 : 12,
            phased ? "device per phase" : "device", "source");
    for (int i = 0; i < hm_estimator_nobjects(e); i++) {
        hm_est_object_t ob;
        if (hm_estimator_object(e, i, &ob) < 0 || !ob.movable)
            continue;
        char site[24], where[256];
        snprintf(site, sizeof site, "0x%016llx", (unsigned long long)ob.site);
        size_t len = 0;
        where[0] = 0;
        for (int p = 0; p < nph && len < sizeof where - 40; p++) {
            int pct = 100, d = hm_est_state_device(r->state, phased ? p : -1, i, &pct);
            const char *dn = hm_estimator_device_name(e, d);
            if (phased)
                len += (size_t)snprintf(where + len, sizeof where - len, "%s%s=", p ? " " : "",
                                        hm_estimator_phase_name(e, p));
            len += (size_t)snprintf(where + len, sizeof where - len, pct < 100 ? "%s %d%%" : "%s", dn ? dn : "?", pct);
        }
        fprintf(f, "  %-18s %-16s %10s  %-*s  %s\n", site, ob.name ? ob.name : "-", hm__fmt_size(ob.size, b, sizeof b),
                phased ? 40 : 12, where, ob.source ? ob.source : "-");
    }
}

/* One search: its options, then what each step builds. */
typedef struct {
    const char *out, *summary, *machine;
    char *mjson;
    const char *cap_dev[MAX_CAPS]; /* owned */
    uint64_t cap_val[MAX_CAPS];
    int ncaps, json, src_names;
    int pick_upper;   /* --pick upper */
    int picked_greedy; /* --pick upper chose greedy's placement: o->res and o->greedy were swapped */
    uint64_t refine;
    unsigned char allowed_exit[256]; /* --allow-exit: statuses of a --refine round that mean success */
    int nallowed;
    const char **traces;
    int ntraces;
    hm_optimize_opts_t opts;
    hm_estimator_t *e;
    int ndev;
    uint64_t *caps; /* per device, HM_OPT_UNLIMITED for none */
    hm_optimize_result_t res, ref[4], greedy;
    hm_optimize_refine_t rf; /* --refine: the rounds and which placement was returned (res is its result) */
    char (*rtrace)[PATH_MAX + 32]; /* --refine: each round's simulated trace */
    int run_failed;                /* --refine: a round's run failed (said why) */
    json_t *rounds; /* --refine: one entry per round */
    char rdir[PATH_MAX];
} opt_t;

/* The options into o. -1 to go on, else the exit status. */
static int opt_options(opt_t *o, const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t cli;
    const char *arg;
    int ends = 0;
    hm_optimize_opts_t *opts = &o->opts;
    o->traces = hm__xcalloc((size_t)argc + 1, sizeof *o->traces);
    hm_cli_init(&cli, cmd, argc, argv, 1);
    while (cli.ind < argc) {
        const char *a = argv[cli.ind];
        if (ends || a[0] != '-' || a[1] == 0) {
            o->traces[o->ntraces++] = a;
            cli.ind++;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            ends = 1;
            cli.ind++;
            continue;
        }
        switch (hm_cli_next(&cli, &arg)) {
        case OPT_CAPACITY: {
            const char *eq = strchr(arg, '=');
            if (!eq || eq == arg)
                return hm_cli_usage(cmd, "--capacity '%s': expected DEV=SIZE", arg);
            if (o->ncaps == MAX_CAPS)
                return hm_cli_usage(cmd, "--capacity: at most %d devices", MAX_CAPS);
            char *dev = hm__xstrdup(arg);
            dev[eq - arg] = 0;
            if (hm_cli_capacity(cmd, "--capacity", eq + 1, &o->cap_val[o->ncaps])) {
                free(dev);
                return HM_EXIT_USAGE;
            }
            for (int i = 0; i < o->ncaps; i++)
                if (strcmp(o->cap_dev[i], dev) == 0) {
                    hm_cli_usage(cmd, "--capacity: device '%s' given twice", dev);
                    free(dev);
                    return HM_EXIT_USAGE;
                }
            o->cap_dev[o->ncaps++] = dev;
            break;
        }
        case OPT_ALGO:
            if (hm_optimize_algo_parse(arg, &opts->algo) < 0)
                return hm_cli_usage(cmd, "--algo: %s", hm_errdetail());
            break;
        case OPT_MODEL:
            if (hm_est_model_parse(arg, &opts->model) < 0)
                return hm_cli_usage(cmd, "--model: unknown model '%s' (default, linear)", arg);
            break;
        case OPT_PHASES: opts->phased = 1; break;
        case OPT_SPLIT: opts->split = 1; break;
        case OPT_SPLIT_STEP: {
            uint64_t st;
            if (hm_cli_u64_in(cmd, "--split-step", arg, 1, 100, "a percentage", &st))
                return HM_EXIT_USAGE;
            opts->split = 1;
            opts->split_step = (int)st;
            break;
        }
        case OPT_BUDGET:
            if (hm_cli_u64_in(cmd, "--budget", arg, 1, UINT64_MAX, "estimator calls", &opts->budget))
                return HM_EXIT_USAGE;
            break;
        case OPT_TIME:
            if (hm__parse_double(arg, &opts->time_s) < 0 || !(opts->time_s > 0))
                return hm_cli_usage(cmd, "--time: '%s' is not a positive number of seconds", arg);
            break;
        case OPT_SEED:
            if (hm_cli_u64(cmd, "--seed", arg, &opts->seed))
                return HM_EXIT_USAGE;
            break;
        case 'o': o->out = arg; break;
        case OPT_JSON: o->json = 1; break;
        case OPT_BY_SOURCE: o->src_names = 1; break;
        case OPT_SUMMARY: o->summary = arg; break;
        case OPT_MACHINE: o->machine = arg; break;
        case OPT_POLICY: opts->policy_in = arg; break;
        case OPT_SAVE_POLICY: opts->policy_out = arg; break;
        case OPT_PICK:
            if (!strcmp(arg, "upper"))
                o->pick_upper = 1;
            else if (strcmp(arg, "estimate"))
                return hm_cli_usage(cmd, "--pick: expected estimate or upper, got '%s'", arg);
            break;
        case OPT_REFINE:
            if (hm_cli_u64_in(cmd, "--refine", arg, 1, 100, "rounds", &o->refine))
                return HM_EXIT_USAGE;
            break;
        case OPT_ALLOW_EXIT: {
            uint64_t st;
            if (hm_cli_u64_in(cmd, "--allow-exit", arg, 1, 255, "an exit status", &st))
                return HM_EXIT_USAGE;
            o->allowed_exit[st] = 1;
            o->nallowed++;
            break;
        }
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (o->summary && o->ntraces)
        return hm_cli_usage(cmd, "--summary and traces exclude each other");
    if (!o->summary && o->ntraces < 2)
        return hm_cli_usage(cmd, "need one trace per device (at least 2), or --summary FILE");
    if (o->ncaps == 0)
        return hm_cli_usage(cmd, "--capacity DEV=SIZE is required");
    if (o->summary && o->machine)
        return hm_cli_usage(cmd, "--machine applies to traces; a summary carries its own device figures");
    if (o->refine && o->summary)
        return hm_cli_usage(cmd, "--refine runs the traces' program: it needs the traces, not a summary");
    if (o->pick_upper && o->refine)
        return hm_cli_usage(cmd, "--pick upper chooses among predictions; --refine returns a measured round");
    if (o->nallowed && !o->refine)
        return hm_cli_usage(cmd, "--allow-exit applies to the runs of --refine");
    if (o->refine && opts->model != HM_EST_DEFAULT)
        return hm_cli_usage(cmd, "--refine calibrates the default model (not with --model linear)");
    if (o->machine && hm_cli_machine_json(o->machine, &o->mjson))
        return HM_EXIT_RUNTIME;
    if ((opts->policy_in || opts->policy_out) && opts->algo != HM_OPT_RL)
        return hm_cli_usage(cmd, "--policy and --save-policy need --algo rl");
    return -1;
}

/* The estimator, and each device's capacity: the traces' unless
 * --capacity names it (never more than the traces'). 0 or -1 (said why). */
static int opt_open(opt_t *o)
{
    hm_estimator_opts_t eo = {0, o->mjson};
    int rc = o->summary ? hm_estimator_open_summary(&o->e, o->summary)
                        : hm_estimator_open(&o->e, o->traces, o->ntraces, &eo);
    if (rc < 0) {
        hm_cli_fail(o->summary ? o->summary : "traces", rc); /* the detail names the trace */
        return -1;
    }
    hm_cli_figures_note("optimize", o->e);
    o->ndev = hm_estimator_ndevices(o->e);
    o->caps = hm__xcalloc((size_t)o->ndev, sizeof *o->caps);
    for (int d = 0; d < o->ndev; d++) {
        uint64_t dc = hm_estimator_device_capacity(o->e, d);
        o->caps[d] = dc ? dc : HM_OPT_UNLIMITED;
    }
    for (int i = 0; i < o->ncaps; i++) {
        char b1[32], b2[32], what[64];
        snprintf(what, sizeof what, "--capacity %s", o->cap_dev[i]);
        int d = hm_estimator_device_index(o->e, o->cap_dev[i]);
        if (d < 0) {
            hm_cli_fail(what, d);
            return -1;
        }
        uint64_t dc = hm_estimator_device_capacity(o->e, d);
        if (dc && o->cap_val[i] > dc) {
            hm_cli_failf(what, "%s is larger than the device's capacity in the traces (%s)",
                         hm__fmt_size(o->cap_val[i], b1, sizeof b1), hm__fmt_size(dc, b2, sizeof b2));
            return -1;
        }
        o->caps[d] = o->cap_val[i];
    }
    o->opts.capacity = o->caps;
    return 0;
}

/* The search (o->res). 0 or -1 (said why). */
static int opt_search(opt_t *o)
{
    int rc = hm_optimize_run(o->e, &o->opts, &o->res);
    if (rc == HM_ETOOBIG) {
        hm_cli_failf(hm_optimize_algo_name(o->opts.algo), "%s", hm_errdetail());
        return -1;
    }
    if (rc < 0) {
        hm_cli_fail(hm_optimize_algo_name(o->opts.algo), rc);
        return -1;
    }
    return 0;
}

/* A --refine round's run: the pick written to o->rdir and run with
 * hetmem sim --placement (the traces' machine, command and period). 0, or
 * HM_ECHILD with o->run_failed set (said why). */
static int opt_measure(void *ctx, int round, const hm_optimize_result_t *pick, double *ns)
{
    opt_t *o = ctx;
    char pf[PATH_MAX + 32];
    int rc;
    snprintf(pf, sizeof pf, "%s/refine-%d.json", o->rdir, round);
    if ((rc = write_file(pf, pick->placement_json)) < 0)
        hm_cli_fail(pf, rc);
    else if (hm_cli_sim_placement(o->traces[0], pf, o->rdir, round, o->allowed_exit, o->rtrace[round - 1],
                                  sizeof o->rtrace[round - 1], ns) == 0)
        return 0;
    o->run_failed = 1;
    return HM_ECHILD;
}

/* Refinement (hm_optimize_refine): each round's pick run in the simulator
 * and added as a calibration run, the search run again on the calibrated
 * model; o->res becomes the placement returned (the best measured round,
 * or the last search's pick when its 95% interval lies below it). The runs
 * stay in o->rdir for hetmem estimate --calibrate. 0 or -1 (said why). */
static int opt_refine(opt_t *o)
{
    const char *td = getenv("TMPDIR");
    snprintf(o->rdir, sizeof o->rdir, "%s/hetmem-refine.XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(o->rdir)) {
        hm_cli_failf("temporary directory", "%s: %s", o->rdir, strerror(errno));
        return -1;
    }
    o->rtrace = hm__xcalloc(o->refine, sizeof *o->rtrace);
    int rc = hm_optimize_refine(o->e, &o->opts, (int)o->refine, opt_measure, o, &o->rf);
    if (o->run_failed)
        return -1; /* opt_measure said why */
    if (rc < 0) {
        hm_cli_failf(hm_optimize_algo_name(o->opts.algo), "refine: %s", *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
        return -1;
    }
    o->res = o->rf.result;
    memset(&o->rf.result, 0, sizeof o->rf.result);
    o->rounds = json_array();
    for (int k = 0; k < o->rf.nrounds; k++) {
        const hm_optimize_round_t *r = &o->rf.rounds[k];
        char pf[PATH_MAX + 32];
        snprintf(pf, sizeof pf, "%s/refine-%d.json", o->rdir, k + 1);
        json_array_append_new(
            o->rounds, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:[f,f], s:b, s:s, s:s}", "round", k + 1,
                                 "predicted_s", s_of(r->predicted_ns), "measured_s", s_of(r->measured_ns), "error",
                                 (r->predicted_ns - r->measured_ns) / r->measured_ns, "overlap", r->cal.overlap, "mix",
                                 r->cal.mix, "mix_cap", r->cal.mix_cap, "calibrated_s", s_of(r->calibrated.runtime_ns),
                                 "calibrated_ci_s", s_of(r->calibrated.lo_ns), s_of(r->calibrated.hi_ns), "returned",
                                 o->rf.returned_round == k + 1, "placement", pf, "trace", o->rtrace[k]));
    }
    return 0;
}

/* Why the refined result is the placement it is, in one sentence. */
static void opt_refine_why(const opt_t *o, char *buf, size_t len)
{
    const hm_optimize_refine_t *r = &o->rf;
    const hm_optimize_round_t *b = &r->rounds[r->best_round - 1];
    char last[96];
    if (r->last_round)
        snprintf(last, sizeof last, "round %d's placement, measured %.6f s", r->last_round,
                 s_of(r->rounds[r->last_round - 1].measured_ns));
    else
        snprintf(last, sizeof last, "not measured, predicted %.6f s (95%%: %.6f .. %.6f)", s_of(r->last.runtime_ns),
                 s_of(r->last.lo_ns), s_of(r->last.hi_ns));
    if (r->why == HM_OPT_KEEP_SEARCH)
        snprintf(buf, len, "the last search's pick (%s): its whole 95%% interval is below the best measured round's "
                           "%.6f s (round %d)", last, s_of(b->measured_ns), r->best_round);
    else if (r->last_round == r->best_round)
        snprintf(buf, len, "round %d's placement, measured %.6f s, the fastest measured; the last search picked it "
                           "again", r->best_round, s_of(b->measured_ns));
    else
        snprintf(buf, len, "round %d's placement, measured %.6f s, the fastest measured; the last search's pick (%s) "
                           "%s", r->best_round, s_of(b->measured_ns), last,
                 r->last_round ? "ran slower" : "is not confidently faster (its 95% interval reaches that time)");
}

/* References: same model, phasing and capacities. Greedy joins them as a
 * cheap best-known candidate. 0 or -1 (said why). */
static int opt_references(opt_t *o)
{
    int rc;
    for (int k = 0; k < 4; k++)
        if ((rc = hm_optimize_reference(o->e, &o->opts, (hm_optimize_ref_t)k, &o->ref[k])) < 0) {
            hm_cli_fail("reference placement", rc);
            return -1;
        }
    hm_optimize_opts_t gopts = o->opts;
    gopts.algo = HM_OPT_GREEDY;
    gopts.budget = 0;
    gopts.time_s = 0;
    gopts.policy_in = gopts.policy_out = NULL;
    if ((rc = hm_optimize_run(o->e, &gopts, &o->greedy)) < 0) {
        hm_cli_fail("greedy reference", rc);
        return -1;
    }
    return 0;
}

/* --pick upper: of the search's placement and greedy's, the one whose 95%
 * interval ends lower. The search returns the lowest estimate of the many
 * it tried, and the lowest of many estimates is the likeliest to be an
 * underestimate (the optimizer's curse: Smith and Winkler, Management
 * Science 52(3), 2006); an estimate's interval says how far it may be off.
 * Greedy's placement is the one other candidate that every search computes
 * (a reference), so the choice costs nothing. o->res becomes greedy's
 * placement and estimate, o->greedy the search's (the search's statistics
 * stay in o->res). */
static void opt_pick(opt_t *o)
{
    if (!o->pick_upper || o->opts.algo == HM_OPT_GREEDY || !(o->greedy.estimate.hi_ns < o->res.estimate.hi_ns))
        return;
    hm_optimize_result_t t = o->res;
    o->res.state = o->greedy.state, o->res.placement_json = o->greedy.placement_json;
    o->res.estimate = o->greedy.estimate;
    o->greedy.state = t.state, o->greedy.placement_json = t.placement_json, o->greedy.estimate = t.estimate;
    o->picked_greedy = 1;
}

static const hm_estimate_t *greedy_est(const opt_t *o)
{
    return o->picked_greedy ? &o->res.estimate : &o->greedy.estimate;
}

static const hm_estimate_t *search_est(const opt_t *o)
{
    return o->picked_greedy ? &o->greedy.estimate : &o->res.estimate;
}

/* -o FILE: the placement, checked to load as one of these devices. 0 or
 * -1 (said why). */
static int opt_write(opt_t *o)
{
    const char **names = hm__xcalloc((size_t)o->ndev, sizeof *names);
    for (int d = 0; d < o->ndev; d++)
        names[d] = hm_estimator_device_name(o->e, d);
    hm_placement_t *p = NULL;
    int rc = hm_placement_parse(&p, "optimized placement", o->res.placement_json, names, o->ndev);
    free(names);
    hm_placement_close(p);
    if (rc < 0) {
        hm_cli_fail("optimized placement", rc);
        return -1;
    }
    if ((rc = write_file(o->out, o->res.placement_json)) < 0) {
        hm_cli_fail(o->out, rc);
        return -1;
    }
    return 0;
}

/* The share of the gap from all-slowest to the best reference that the
 * result closes. The gap is measured against references found
 * independently of the result: first touch, and greedy unless greedy is
 * the search itself. Counting the result among them would make every
 * search close 100% of a gap that it defines; here a result better than
 * both closes more. */
static double opt_gap(const opt_t *o)
{
    double t = o->res.estimate.runtime_ns, t_slow = o->ref[HM_OPT_REF_SLOWEST].estimate.runtime_ns;
    double best = o->ref[HM_OPT_REF_FIRST_TOUCH].estimate.runtime_ns;
    if (o->opts.algo != HM_OPT_GREEDY && greedy_est(o)->runtime_ns < best)
        best = greedy_est(o)->runtime_ns;
    return t_slow - best > 0 ? (t_slow - t) / (t_slow - best) : 1;
}

/* --json: the result, its references and the placement on stdout. 0 or
 * -1 (said why). */
static int opt_print_json(const opt_t *o)
{
    const hm_optimize_result_t *res = &o->res;
    const hm_optimize_opts_t *opts = &o->opts;
    double t = res->estimate.runtime_ns;
    double t_def = o->ref[HM_OPT_REF_DEFAULT].estimate.runtime_ns;
    double t_ft = o->ref[HM_OPT_REF_FIRST_TOUCH].estimate.runtime_ns;
    json_t *pl = json_loads(res->placement_json, 0, NULL);
    json_t *capj = json_object();
    for (int d = 0; d < o->ndev; d++)
        json_object_set_new(capj, hm_estimator_device_name(o->e, d),
                            o->caps[d] == HM_OPT_UNLIMITED ? json_null() : json_integer((json_int_t)o->caps[d]));
    json_t *j = json_pack("{s:s, s:s, s:b, s:f, s:[f,f], s:f, s:I, s:f, s:b, s:I, s:o, "
                          "s:{s:f, s:f, s:f, s:f, s:f}, s:f, s:f, s:f, s:o, s:s?}",
                          "algo", hm_optimize_algo_name(opts->algo), "model", hm_est_model_name(opts->model),
                          "phased", opts->phased, "predicted_runtime_s", s_of(t), "ci_s", s_of(res->estimate.lo_ns),
                          s_of(res->estimate.hi_ns), "migration_s", s_of(res->estimate.migration_ns),
                          "estimator_calls", (json_int_t)res->estimator_calls, "wall_s", res->wall_s,
                          "complete", res->complete, "episodes", (json_int_t)res->episodes, "capacity", capj,
                          "references", "all_default_s", s_of(t_def), "first_touch_s", s_of(t_ft),
                          "all_slowest_s", s_of(o->ref[HM_OPT_REF_SLOWEST].estimate.runtime_ns), "all_fastest_s",
                          s_of(o->ref[HM_OPT_REF_FASTEST].estimate.runtime_ns), "greedy_s",
                          s_of(greedy_est(o)->runtime_ns), "speedup_vs_default", t > 0 ? t_def / t : 0,
                          "speedup_vs_first_touch", t > 0 ? t_ft / t : 0, "gap_closed", opt_gap(o), "placement",
                          pl ? pl : json_null(), "figures_note", hm_estimator_figures_note(o->e));
    if (j && o->pick_upper && opts->algo != HM_OPT_GREEDY) {
        const hm_estimate_t *se = search_est(o), *ge = greedy_est(o);
        json_object_set_new(j, "pick", json_pack("{s:s, s:s, s:f, s:[f,f], s:f, s:[f,f]}", "rule", "upper", "picked",
                                                 o->picked_greedy ? "greedy" : "search", "search_s",
                                                 s_of(se->runtime_ns), "search_ci_s", s_of(se->lo_ns), s_of(se->hi_ns),
                                                 "greedy_s", s_of(ge->runtime_ns), "greedy_ci_s", s_of(ge->lo_ns),
                                                 s_of(ge->hi_ns)));
    }
    if (j && o->rounds) {
        const hm_optimize_refine_t *r = &o->rf;
        char why[512];
        opt_refine_why(o, why, sizeof why);
        json_t *ret = r->returned_round
                          ? json_pack("{s:i, s:s, s:f, s:f, s:s}", "round", r->returned_round, "kept", "measured",
                                      "measured_s", s_of(r->rounds[r->returned_round - 1].measured_ns),
                                      "predicted_before_run_s", s_of(r->rounds[r->returned_round - 1].predicted_ns),
                                      "why", why)
                          : json_pack("{s:n, s:s, s:n, s:n, s:s}", "round", "kept", "search", "measured_s",
                                      "predicted_before_run_s", "why", why);
        json_t *last = json_pack("{s:f, s:[f,f], s:o}", "predicted_s", s_of(r->last.runtime_ns), "ci_s",
                                 s_of(r->last.lo_ns), s_of(r->last.hi_ns), "round",
                                 r->last_round ? json_integer(r->last_round) : json_null());
        json_object_set_new(j, "refine", json_pack("{s:s, s:f, s:f, s:O, s:i, s:o, s:o}", "dir", o->rdir, "overlap",
                                                   hm_estimator_overlap(o->e), "mix", hm_estimator_mix(o->e),
                                                   "rounds", o->rounds, "best_round", r->best_round, "last_search",
                                                   last, "returned", ret));
    }
    char *txt = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (!txt) {
        json_decref(j);
        hm_cli_fail("json", -ENOMEM);
        return -1;
    }
    printf("%s\n", txt);
    free(txt);
    json_decref(j);
    return 0;
}

/* The result as a table: capacities, predicted runtime beside the
 * references, the refinement rounds, the objects' devices. */
static void opt_print_table(const opt_t *o)
{
    const hm_optimize_result_t *res = &o->res;
    const hm_optimize_opts_t *opts = &o->opts;
    hm_estimator_t *e = o->e;
    double t = res->estimate.runtime_ns;
    double t_def = o->ref[HM_OPT_REF_DEFAULT].estimate.runtime_ns;
    double t_ft = o->ref[HM_OPT_REF_FIRST_TOUCH].estimate.runtime_ns;
    const char *dn = hm_estimator_device_name(e, hm_estimator_default_device(e));
    printf("hetmem optimize: %s, model %s%s, %d objects, %llu estimator calls in %.3f s%s\n",
           hm_optimize_algo_name(opts->algo), hm_est_model_name(opts->model), opts->phased ? ", per phase" : "",
           hm_estimator_nobjects(e) - 1, (unsigned long long)res->estimator_calls, res->wall_s,
           res->complete ? (opts->algo == HM_OPT_EXHAUSTIVE ? ", optimum proven" : "") : ", stopped by budget");
    printf("  %-26s", "capacity");
    for (int d = 0; d < o->ndev; d++) {
        char b[32];
        printf("%s%s %s", d ? ", " : "", hm_estimator_device_name(e, d),
               o->caps[d] == HM_OPT_UNLIMITED ? "unlimited" : hm__fmt_size(o->caps[d], b, sizeof b));
    }
    printf("\n  %-26s %.6f s  (95%%: %.6f .. %.6f)\n", "predicted runtime", s_of(t), s_of(res->estimate.lo_ns),
           s_of(res->estimate.hi_ns));
    if (opts->phased)
        printf("  %-26s %.6f s\n", "of which migration", s_of(res->estimate.migration_ns));
    if (o->pick_upper && opts->algo != HM_OPT_GREEDY) {
        const hm_estimate_t *se = search_est(o), *ge = greedy_est(o);
        if (o->picked_greedy)
            printf("  %-26s greedy's placement: its 95%% interval ends at %.6f s, below %s's %.6f s (predicted %.6f s)\n",
                   "pick (--pick upper)", s_of(ge->hi_ns), hm_optimize_algo_name(opts->algo), s_of(se->hi_ns),
                   s_of(se->runtime_ns));
        else
            printf("  %-26s %s's placement: its 95%% interval ends at %.6f s, not above greedy's %.6f s\n",
                   "pick (--pick upper)", hm_optimize_algo_name(opts->algo), s_of(se->hi_ns), s_of(ge->hi_ns));
    }
    char lab[64];
    snprintf(lab, sizeof lab, "all in %s (default)", dn ? dn : "?");
    printf("  %-26s %.6f s  -> %.3fx\n", lab, s_of(t_def), t > 0 ? t_def / t : 0);
    printf("  %-26s %.6f s  -> %.3fx\n", "first touch", s_of(t_ft), t > 0 ? t_ft / t : 0);
    printf("  %-26s %.6f s  -> %.3fx\n", "greedy", s_of(greedy_est(o)->runtime_ns),
           t > 0 ? greedy_est(o)->runtime_ns / t : 0);
    printf("  %-26s %.6f s  (no capacity limit)\n", "all on the slowest device",
           s_of(o->ref[HM_OPT_REF_SLOWEST].estimate.runtime_ns));
    printf("  %-26s %.6f s  (no capacity limit)\n", "all on the fastest device",
           s_of(o->ref[HM_OPT_REF_FASTEST].estimate.runtime_ns));
    printf("  %-26s %.1f%% of all-slowest -> %s\n", "gap closed", 100 * opt_gap(o),
           opts->algo != HM_OPT_GREEDY ? "best of greedy and first touch" : "first touch");
    if (o->rounds) {
        const hm_optimize_refine_t *r = &o->rf;
        char why[512];
        printf("\n  refine: each round's placement run in the simulator, then the model calibrated on it\n");
        printf("  %5s %14s %14s %9s %9s %9s %16s\n", "round", "predicted (s)", "measured (s)", "error", "overlap", "mix",
               "calibrated (s)");
        for (int k = 0; k < r->nrounds; k++) {
            const hm_optimize_round_t *x = &r->rounds[k];
            printf("  %5d %14.6f %14.6f %8.2f%% %9.4f %+9.4f %16.6f%s\n", k + 1, s_of(x->predicted_ns),
                   s_of(x->measured_ns), 100 * (x->predicted_ns - x->measured_ns) / x->measured_ns, x->cal.overlap,
                   x->cal.mix, s_of(x->calibrated.runtime_ns), r->returned_round == k + 1 ? "  <- returned" : "");
        }
        char again[32] = "-";
        if (r->last_round)
            snprintf(again, sizeof again, "(round %d's)", r->last_round);
        printf("  %5s %14.6f %14s %9s %9s %9s %16s%s\n", "last", s_of(r->last.runtime_ns), again, "", "", "", "",
               r->returned_round ? "" : "  <- returned");
        opt_refine_why(o, why, sizeof why);
        printf("  returned: %s\n", why);
        printf("  predicted runtime above: the calibrated model's estimate of it%s; runs kept in %s\n",
               r->returned_round ? " (in sample: its own run is among the calibration runs)" : "", o->rdir);
    }
    print_objects(stdout, e, res, opts->phased);
    if (o->out)
        printf("\n  placement written to %s\n", o->out);
}

static void opt_free(opt_t *o)
{
    json_decref(o->rounds);
    hm_optimize_refine_free(&o->rf);
    free(o->rtrace);
    hm_optimize_result_free(&o->res);
    hm_optimize_result_free(&o->greedy);
    for (int k = 0; k < 4; k++)
        hm_optimize_result_free(&o->ref[k]);
    free(o->caps);
    hm_estimator_close(o->e);
    free(o->mjson);
    for (int i = 0; i < o->ncaps; i++)
        free((char *)o->cap_dev[i]);
    free(o->traces);
}

static int cmd_optimize(const hm_cmd_t *cmd, int argc, char **argv)
{
    opt_t o = {.opts = {.algo = HM_OPT_RL, .model = HM_EST_DEFAULT, .seed = 1}};
    int status = opt_options(&o, cmd, argc, argv);
    if (status < 0) {
        status = HM_EXIT_RUNTIME;
        if (opt_open(&o) == 0 && (o.refine ? opt_refine(&o) : opt_search(&o)) == 0 &&
            opt_references(&o) == 0) {
            opt_pick(&o);
            if (o.src_names)
                o.res.placement_json = by_source(o.e, o.res.placement_json);
            if ((!o.out || opt_write(&o) == 0) && (o.json ? opt_print_json(&o) == 0 : (opt_print_table(&o), 1)))
                status = HM_EXIT_OK;
        }
    }
    opt_free(&o);
    return status;
}
