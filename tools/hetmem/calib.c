/* Calibration runs of the estimator (docs/estimator.md, "Calibration"):
 * measured runs of mixed placements, read from a trace recorded or
 * simulated under the placement (hetmem estimate --calibrate), or run in
 * the simulator (hetmem optimize --refine). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "hetmem/estimate.h"
#include "hetmem/placement.h"
#include "hetmem/trace.h"

extern char **environ;

static int same_argv(const char *const *a, const char *const *b)
{
    if (!a || !b)
        return a == b;
    for (; *a && *b; a++, b++)
        if (strcmp(*a, *b))
            return 0;
    return !*a && !*b;
}

static int same_str(const char *a, const char *b)
{
    return a && b ? !strcmp(a, b) : a == b;
}

int hm_cli_trace_time(const char *path, const char *ref, double *ns)
{
    hm_trace_t *t = NULL, *r = NULL;
    int rc = hm_trace_open(&t, path);
    if (rc < 0)
        return hm_cli_failf(path, "%s%s%s", hm_strerror(rc), *hm_errdetail() ? ": " : "", hm_errdetail());
    int status = HM_EXIT_RUNTIME;
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    const hm_trace_meta_t *m = hm_trace_meta(t);
    if (ref) {
        if ((rc = hm_trace_open(&r, ref)) < 0) {
            hm_cli_failf(ref, "%s", hm_strerror(rc));
            goto out;
        }
        const hm_trace_meta_t *q = hm_trace_meta(r);
        if (!same_argv(m->argv, q->argv)) {
            hm_cli_failf(path, "not a run of the device traces' command (%s)", q->argv && q->argv[0] ? q->argv[0] : "?");
            goto out;
        }
        if (!same_str(m->machine_json, q->machine_json) || !same_str(m->host_json, q->host_json)) {
            hm_cli_failf(path, "not a run on the device traces' machine");
            goto out;
        }
    }
    *ns = (double)st.end.total_time * (m->clock_ns_per_unit > 0 ? m->clock_ns_per_unit : 1.0);
    if (!st.has_end || !(*ns > 0)) {
        hm_cli_failf(path, "no measured time (the run has no end record)");
        goto out;
    }
    status = 0;
out:
    hm_trace_close(r);
    hm_trace_close(t);
    return status;
}

int hm_cli_calib_add(hm_cli_calib_t *c, struct hm_estimator *e, const char *trace, const char *placement, double ns)
{
    int nd = hm_estimator_ndevices(e);
    const char *dn[64];
    for (int d = 0; d < nd && d < 64; d++)
        dn[d] = hm_estimator_device_name(e, d);
    hm_placement_t *pl = NULL;
    int rc = hm_placement_load(&pl, placement, dn, nd);
    if (rc < 0)
        return hm_cli_fail(placement, rc);
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->pls = hm__xrealloc(c->pls, (size_t)c->cap * sizeof *c->pls);
        c->ns = hm__xrealloc(c->ns, (size_t)c->cap * sizeof *c->ns);
    }
    c->pls[c->n] = pl;
    c->ns[c->n++] = ns;
    if (!c->runs)
        c->runs = json_array();
    json_array_append_new(c->runs, json_pack("{s:s, s:s, s:f}", "trace", trace, "placement", placement, "measured_s", ns / 1e9));
    return 0;
}

int hm_cli_calib_spec(hm_cli_calib_t *c, struct hm_estimator *e, const char *ref, const char *spec)
{
    const char *eq = strrchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return hm_cli_failf(spec, "--calibrate takes TRACE=PLACEMENT (a run under that placement, and the placement file)");
    char *trace = hm__xstrdup(spec);
    trace[eq - spec] = 0;
    double ns;
    int rc = hm_cli_trace_time(trace, ref, &ns);
    if (rc == 0)
        rc = hm_cli_calib_add(c, e, trace, eq + 1, ns);
    free(trace);
    return rc;
}

int hm_cli_calib_fit(const char *what, hm_cli_calib_t *c, struct hm_estimator *e, hm_est_calibration_t *out)
{
    int rc = hm_estimator_calibrate(e, c->pls, c->ns, c->n, out);
    if (rc < 0)
        return hm_cli_failf(what, "calibration: %s", *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
    return 0;
}

json_t *hm_cli_calib_json(const hm_cli_calib_t *c, const hm_est_calibration_t *cal)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:O}", "overlap", cal->overlap, "mix", cal->mix, "mix_cap",
                     cal->mix_cap, "mean_error_before", cal->mean_err_before, "mean_error_after", cal->mean_err_after,
                     "runs", c->runs ? c->runs : json_array());
}

void hm_cli_calib_free(hm_cli_calib_t *c)
{
    for (int i = 0; i < c->n; i++)
        hm_placement_close(c->pls[i]);
    free(c->pls);
    free(c->ns);
    json_decref(c->runs);
    memset(c, 0, sizeof *c);
}

int hm_cli_report_exit(const char *report)
{
    json_t *j = report && report[0] ? json_load_file(report, 0, NULL) : NULL;
    json_t *v = j ? json_object_get(j, "exit_status") : NULL;
    int st = json_is_integer(v) && !json_object_get(j, "error") && json_object_get(j, "runtime_s")
                 ? (int)json_integer_value(v)
                 : -1;
    json_decref(j);
    return st;
}

int hm_cli_sim_placement(const char *ref, const char *placement, const char *dir, int round,
                         const unsigned char allowed_exit[256], char *trace, size_t tlen, double *ns)
{
    hm_trace_t *r = NULL;
    int rc = hm_trace_open(&r, ref);
    if (rc < 0)
        return hm_cli_failf(ref, "%s", hm_strerror(rc));
    const hm_trace_meta_t *m = hm_trace_meta(r);
    int status = HM_EXIT_RUNTIME;
    char mfile[PATH_MAX], log[PATH_MAX], rep[PATH_MAX], per[32], ms[32], self[PATH_MAX];
    char **argv = NULL;
    if (!m->machine_json || !m->argv || !m->argv[0] || !m->backend || strcmp(m->backend, "sim")) {
        hm_cli_failf(ref, "--refine runs the program in the simulator: the traces must be simulated runs "
                          "(hetmem sim), with their machine and command in the header");
        goto out;
    }
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        hm_cli_failf("/proc/self/exe", "%s", strerror(errno));
        goto out;
    }
    self[sl] = 0;
    snprintf(mfile, sizeof mfile, "%s/machine.json", dir);
    FILE *f = fopen(mfile, "w");
    if (!f || fputs(m->machine_json, f) < 0 || fclose(f) != 0) {
        if (f)
            fclose(f);
        hm_cli_failf(mfile, "cannot write: %s", strerror(errno));
        goto out;
    }
    snprintf(trace, tlen, "%s/refine-%d.hmt", dir, round);
    snprintf(log, sizeof log, "%s/refine-%d.log", dir, round);
    snprintf(rep, sizeof rep, "%s/refine-%d.report.json", dir, round);
    snprintf(per, sizeof per, "%llu", (unsigned long long)(m->period ? m->period : 1000));
    /* The traces' --min-size (64K, the default, when they do not say). */
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)(m->min_size ? m->min_size : HM_MIN_OBJECT_SIZE));
    const char *head[] = {self,  "sim",   "-m", mfile, "--placement",     placement, "-o",         trace,
                          "--json", rep, "--sample-period", per, "--min-size", ms, "--"};
    size_t nh = sizeof head / sizeof *head, na = 0;
    while (m->argv[na])
        na++;
    argv = hm__xcalloc(nh + na + 1, sizeof *argv);
    for (size_t i = 0; i < nh; i++)
        argv[i] = (char *)head[i];
    for (size_t i = 0; i < na; i++)
        argv[nh + i] = (char *)m->argv[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        hm_cli_failf(self, "cannot run: %s", strerror(rc));
        goto out;
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR) {
            hm_cli_failf("hetmem sim", "%s", strerror(errno));
            goto out;
        }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        /* The program's own status, from the report: some programs return
         * one on success (XSBench exits 1 at any non-published size). */
        int st = WIFEXITED(ws) ? hm_cli_report_exit(rep) : -1;
        if (st > 0 && st < 256 && !(allowed_exit && allowed_exit[st])) {
            hm_cli_failf("hetmem sim", "round %d: the program exited with status %d (log: %s); if it returns %d on "
                                       "success, add --allow-exit %d",
                         round, st, log, st, st);
            goto out;
        }
        if (st <= 0) {
            hm_cli_failf("hetmem sim", "the run of round %d failed (log: %s)", round, log);
            goto out;
        }
    }
    status = hm_cli_trace_time(trace, ref, ns);
out:
    free(argv);
    hm_trace_close(r);
    return status;
}
