/* hetmem validate: how well the estimator predicts measured runtimes.
 *
 * Runs the program once per device (all data there) to get the traces,
 * draws placements of three kinds (random objects, page percentages, hot
 * objects first), measures each by running it, estimates each with every
 * model, and prints a table and a summary per model. Runs go through
 * `hetmem sim`, several at a time, or with --real through the recording
 * API in this process (as `hetmem record --bind` and `hetmem run` do), one
 * at a time. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "hetmem/estimate.h"
#include "hetmem/placement.h"
#include "hetmem/record.h"
#include "hetmem/sim.h"
#include "hetmem/trace.h"

extern char **environ;

enum { OPT_MACHINE = 'm', OPT_PLACEMENTS = 256, OPT_PERIOD, OPT_SEED, OPT_JSON, OPT_PLOT, OPT_REAL, OPT_KEEP, OPT_REUSE, OPT_ALLOW_EXIT, OPT_CALIBRATE, OPT_MIN_SIZE };

static const hm_cli_opt_t val_opts[] = {
    {OPT_MACHINE, "machine", "MACHINE", "machine preset or JSON file (simulated runs; with --real: devices and figures)", HM_OPT_REQUIRED},
    {OPT_PLACEMENTS, "placements", "K", "placements to draw (default 12)", 0},
    {OPT_PERIOD, "period", "N", "sampling period of the device runs (default 1000)", 0},
    {'j', "jobs", "JOBS", "runs at a time (default: all cores)", 0},
    {OPT_SEED, "seed", "S", "seed of the placement draw (default 1)", 0},
    {OPT_JSON, "json", "FILE", "write rows and per-model summary as JSON", 0},
    {OPT_PLOT, "plot", "FILE.png", "scatter of estimated against measured runtime (needs python3-matplotlib)", 0},
    {OPT_REAL, "real", NULL, "run on this machine's memory devices (hetmem record --bind, hetmem run)", 0},
    {OPT_KEEP, "keep", "DIR", "keep traces, placements and reports in DIR", 0},
    {OPT_REUSE, "reuse", NULL, "with --keep: reuse device runs already in DIR (dev-DEVICE.hmt of this program, device and period)", 0},
    {OPT_ALLOW_EXIT, "allow-exit", "N", "exit status N (1-255) also means success (for programs that return one when they finish); repeatable", HM_OPT_REPEAT},
    {OPT_MIN_SIZE, "min-size", "SIZE", "place and trace allocations of at least SIZE bytes in every run (hetmem sim, record and run --min-size; default 64K)", 0},
    {OPT_CALIBRATE, "calibrate", "K", "also run K placements outside the scored ones and give the default model's error calibrated on 0..K of them", 0},
    {0},
};

static int cmd_validate(const hm_cmd_t *cmd, int argc, char **argv);

const hm_cmd_t hm_cmd_validate = {
    "validate", "Check the estimator against measured runtimes of drawn placements",
    "-- ./app.sim ARGS\n"
    "       hetmem validate --real --machine DEV,DEV...|MACHINE [...] -- CMD ARGS",
    "Errors are |estimate - measured| / measured; 'gap' errors are the same\n"
    "difference as a share of |slowest - fastest| device run, which says how\n"
    "much of the placement's effect the estimate got wrong. With --real,\n"
    "--machine lists the devices (as hetmem record --bind takes them), or names\n"
    "a machine file whose devices are so named and whose figures the device runs\n"
    "and the estimator then use instead of the kernel's (HMAT).\n"
    "Placements are distinct: one drawn again is drawn anew. An OpenMP\n"
    "program is refused unless OMP_NUM_THREADS=1 (the simulator runs one thread).\n"
    "With --calibrate K, K more placements are drawn and run (never scored), and\n"
    "the default model's error on the scored ones is given calibrated on the first\n"
    "0, 1, ..., K of those runs (docs/estimator.md, Calibration).",
    val_opts, cmd_validate};

/* ---------------------------------------------------------------- jobs */

typedef struct {
    char **argv;     /* owned */
    char log[PATH_MAX + 128];
    pid_t pid;
    int status, done;
    double wall_s;   /* wall time (for --real) */
    uint64_t t0;
    uint64_t idx;    /* the placement it measures */
    char rep[PATH_MAX + 64]; /* a simulated run's JSON report ("" for --real) */
    int prog_status; /* the program's own exit status (from the report), -1 unknown */
    /* --real: run in this process through the recording API (a recording
     * when rec.output is set, else a placement run), argv the program. */
    int api;
    hm_record_opts_t rec;
    char *own; /* rec.placement, owned */
} job_t;

static char **vec(const char *first, ...)
{
    va_list ap;
    size_t n = 1;
    va_start(ap, first);
    while (va_arg(ap, const char *))
        n++;
    va_end(ap);
    char **v = hm__xcalloc(n + 1, sizeof *v);
    v[0] = hm__xstrdup(first);
    va_start(ap, first);
    for (size_t i = 1; i < n; i++)
        v[i] = hm__xstrdup(va_arg(ap, const char *));
    va_end(ap);
    return v;
}

static char **vec_cat(char **a, char **b)
{
    size_t na = 0, nb = 0;
    while (a[na])
        na++;
    while (b && b[nb])
        nb++;
    a = hm__xrealloc(a, (na + nb + 1) * sizeof *a);
    for (size_t i = 0; i < nb; i++)
        a[na + i] = hm__xstrdup(b[i]);
    a[na + nb] = NULL;
    return a;
}

static void vec_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Exit statuses that also mean success (--allow-exit). */
static unsigned char allowed_exit[256] = {1};

/* Whether a run succeeded: it exited 0, or its program exited with a
 * status --allow-exit accepts and the run is otherwise whole. */
static int job_ok(job_t *j)
{
    int ws = j->status;
    j->prog_status = -1;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
        return 1;
    if (!j->rep[0]) /* --real: hetmem run and record exit with the program's status */
        return WIFEXITED(ws) && allowed_exit[WEXITSTATUS(ws)];
    j->prog_status = hm_cli_report_exit(j->rep);
    return j->prog_status > 0 && j->prog_status < 256 && allowed_exit[j->prog_status];
}

static void on_api_message(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "hetmem: %s\n", msg);
}

/* A --real run in this process through the recording API: what `hetmem
 * record` or `hetmem run` does for it, the program's output and the
 * messages in the job's log. Its status is the exit code that command
 * gives (the program's, or 1 for an error or an incomplete trace or
 * report), its time the program's own run time. */
static void run_api_job(job_t *j)
{
    const char *what = j->rec.placement ? "run" : "record";
    int code = HM_EXIT_RUNTIME, o1 = -1, o2 = -1;
    int fd = open(j->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    fflush(stdout);
    fflush(stderr);
    if (fd >= 0) {
        o1 = dup(1), o2 = dup(2);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    j->rec.on_message = on_api_message;
    hm_recorder_t *r = NULL;
    hm_record_result_t res;
    int rc = hm_recorder_open(&r, &j->rec, j->argv);
    if (rc == 0)
        rc = hm_recorder_run(r, &res);
    if (rc < 0) {
        fprintf(stderr, "hetmem: %s: %s\n", what, *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
    } else {
        code = hm_recorder_exit_code(res.status);
        j->wall_s = (double)res.wall_ns / 1e9;
        for (const char *u = j->rec.placement ? hm_recorder_unmatched(r) : ""; *u; u += strcspn(u, "\n") + 1)
            fprintf(stderr, "hetmem: warning: %s: %.*s\n", j->rec.placement, (int)strcspn(u, "\n"), u);
        fprintf(stderr, "hetmem: %s: %.3f s, exit %d\n", what, j->wall_s, code);
        if (res.spool_limit_reached && code == 0) {
            fprintf(stderr, "hetmem: %s: incomplete: %d process%s reached the spool limit (HETMEM_SPOOL_MAX)\n", what,
                    res.spool_limit_reached, res.spool_limit_reached == 1 ? "" : "es");
            code = HM_EXIT_RUNTIME;
        }
    }
    hm_recorder_close(r);
    fflush(stdout);
    fflush(stderr);
    if (o1 >= 0) {
        dup2(o1, 1);
        dup2(o2, 2);
        close(o1);
        close(o2);
    }
    j->status = code << 8; /* as a hetmem child exiting with it */
}

static volatile sig_atomic_t interrupted;
static void on_int(int sig) { (void)sig; interrupted = 1; }

/* Runs the jobs, at most @p par at a time; stdout and stderr go to each job's log. */
static int run_jobs(job_t *jobs, int n, int par, const char *what)
{
    int next = 0, running = 0, done = 0, failed = -1;
    int tty = isatty(2);
    while (done < n) {
        while (running < par && next < n && failed < 0 && !interrupted) {
            job_t *j = &jobs[next++];
            if (j->api) {
                j->t0 = hm__now_ns();
                run_api_job(j);
                j->done = 1, done++;
                if (!job_ok(j) && failed < 0)
                    failed = (int)(j - jobs);
                if (tty)
                    fprintf(stderr, "\r  %s: %d/%d runs done ", what, done, n);
                continue;
            }
            posix_spawn_file_actions_t fa;
            posix_spawn_file_actions_init(&fa);
            posix_spawn_file_actions_addopen(&fa, 1, j->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            posix_spawn_file_actions_adddup2(&fa, 1, 2);
            j->t0 = hm__now_ns();
            int rc = posix_spawnp(&j->pid, j->argv[0], &fa, NULL, j->argv, environ);
            posix_spawn_file_actions_destroy(&fa);
            if (rc) {
                j->done = 1, j->status = 127 << 8, done++;
                failed = (int)(j - jobs);
                continue;
            }
            running++;
        }
        if (!running)
            break;
        int ws;
        pid_t pid = wait(&ws);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < n; i++)
            if (jobs[i].pid == pid && !jobs[i].done) {
                jobs[i].done = 1;
                jobs[i].status = ws;
                jobs[i].wall_s = (double)(hm__now_ns() - jobs[i].t0) / 1e9;
                if (!job_ok(&jobs[i]) && failed < 0)
                    failed = i;
                running--;
                done++;
            }
        if (tty)
            fprintf(stderr, "\r  %s: %d/%d runs done ", what, done, n);
    }
    if (tty)
        fprintf(stderr, "\r%*s\r", 60, "");
    if (interrupted)
        return hm_cli_failf(what, "interrupted");
    if (failed >= 0) {
        job_t *j = &jobs[failed];
        /* The log's last line says why. */
        char line[512] = "", buf[512];
        FILE *f = fopen(j->log, "r");
        while (f && fgets(buf, sizeof buf, f))
            if (buf[0] != '\n')
                snprintf(line, sizeof line, "%s", buf);
        if (f)
            fclose(f);
        line[strcspn(line, "\n")] = 0;
        if (WIFSIGNALED(j->status))
            return hm_cli_failf(what, "run '%s' was killed by signal %d (log %s ends: %s)", j->argv[0],
                                WTERMSIG(j->status), j->log, line);
        if (j->prog_status > 0)
            return hm_cli_failf(what, "the program exited with status %d (log: %s); if it returns %d on success, add --allow-exit %d",
                                j->prog_status, j->log, j->prog_status, j->prog_status);
        return hm_cli_failf(what, "run '%s' exited with status %d (log %s ends: %s)", j->argv[0],
                            WEXITSTATUS(j->status), j->log, line);

    }
    return 0;
}

/* ---------------------------------------------------------- placements */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

static json_t *site_rule(const hm_est_object_t *o, const char *dev)
{
    json_t *r = json_object();
    if (o->name) {
        json_object_set_new(r, "name", json_string(o->name));
    } else {
        char site[32];
        snprintf(site, sizeof site, "0x%016llx", (unsigned long long)o->site);
        json_object_set_new(r, "site", json_string(site));
    }
    json_object_set_new(r, "device", json_string(dev));
    return r;
}

/* Draws placement @p i: kinds rotate through random objects, page
 * percentages (10..90% on another device than the default) and hot objects
 * first (on that device). */
static json_t *draw(hm_estimator_t *e, int i, uint64_t *rng, char *kind, size_t klen)
{
    int nd = hm_estimator_ndevices(e), no = hm_estimator_nobjects(e) - 1, def = hm_estimator_default_device(e);
    /* Page shares and hot objects go to a device other than the default one
     * (else they would move nothing): the fastest such device, or, in turn,
     * each of them when there are several. */
    int others[64], no_ = 0;
    for (int d = 0; d < nd && no_ < 64; d++)
        if (d != def)
            others[no_++] = d;
    for (int a = 1; a < no_; a++) /* fastest first */
        for (int b = a; b > 0 && hm_estimator_measured_ns(e, others[b]) < hm_estimator_measured_ns(e, others[b - 1]); b--) {
            int t = others[b];
            others[b] = others[b - 1];
            others[b - 1] = t;
        }
    int fast = others[(i / 3) % no_];
    json_t *p = json_object(), *rules = json_array();
    json_object_set_new(p, "default", json_string(hm_estimator_device_name(e, def)));
    switch (i % 3) {
    case 0: { /* every object to a random device */
        int moved = 0;
        for (int o = 0; o < no; o++) {
            hm_est_object_t ob;
            hm_estimator_object(e, o, &ob);
            int d = (int)(rng_next(rng) % (uint64_t)nd);
            if (d != def) {
                json_array_append_new(rules, site_rule(&ob, hm_estimator_device_name(e, d)));
                moved++;
            }
        }
        snprintf(kind, klen, "random (%d of %d objects moved)", moved, no);
        break;
    }
    case 1: { /* a share of every object's pages on the fastest device */
        int pct = 10 + 10 * (int)(rng_next(rng) % 9);
        json_array_append_new(rules, json_pack("{s:i, s:s}", "pages_percent", pct, "device",
                                               hm_estimator_device_name(e, fast)));
        snprintf(kind, klen, "pages %d%% on %s", pct, hm_estimator_device_name(e, fast));
        break;
    }
    default: { /* the hottest objects on the fastest device, up to a share of the footprint */
        uint64_t total = 0, used = 0;
        for (int o = 0; o < no; o++) {
            hm_est_object_t ob;
            hm_estimator_object(e, o, &ob);
            total += ob.size;
        }
        double share = 0.1 + 0.8 * rng_unit(rng);
        int moved = 0;
        for (int o = 0; o < no; o++) { /* objects come hottest first */
            hm_est_object_t ob;
            hm_estimator_object(e, o, &ob);
            if ((double)(used + ob.size) > share * (double)total || ob.samples <= 0)
                continue;
            used += ob.size;
            json_array_append_new(rules, site_rule(&ob, hm_estimator_device_name(e, fast)));
            moved++;
        }
        snprintf(kind, klen, "hot first (%d objects, %.0f%% of bytes on %s)", moved,
                 total ? 100.0 * (double)used / (double)total : 0.0, hm_estimator_device_name(e, fast));
        break;
    }
    }
    json_object_set_new(p, "rules", rules);
    return p;
}

/* -------------------------------------------------------------- command */

static double report_runtime(const char *path)
{
    json_t *r = json_load_file(path, 0, NULL);
    double v = r ? json_number_value(json_object_get(r, "runtime_s")) : NAN;
    if (r && !json_is_number(json_object_get(r, "runtime_s")))
        v = NAN;
    json_decref(r);
    return v;
}

static int rm_rf(const char *dir)
{
    char *argv[] = {"rm", "-rf", (char *)dir, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ))
        return -1;
    int ws;
    waitpid(pid, &ws, 0);
    return 0;
}

/* Whether @p path is a complete trace of @p prog on device @p dev of the
 * machine described by @p mjson, sampled every @p period accesses: a device
 * run that --reuse may take as it is. */
static int reusable(const char *path, const char *mjson, const char *dev, uint64_t period, uint64_t min_size, char **prog)
{
    hm_trace_t *t;
    if (hm_trace_open(&t, path) < 0)
        return 0;
    const hm_trace_meta_t *m = hm_trace_meta(t);
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    int ok = st.has_end && m->period == period && m->min_size == min_size && m->device && !strcmp(m->device, dev) && m->argv &&
             (!mjson || (m->machine_json && !strcmp(m->machine_json, mjson)));
    for (int i = 0; ok && (prog[i] || m->argv[i]); i++)
        ok = prog[i] && m->argv[i] && !strcmp(prog[i], m->argv[i]);
    hm_trace_close(t);
    return ok;
}

/* Whether the program file imports the OpenMP runtime (GNU's GOMP_ or
 * LLVM's __kmpc_ entry points in its dynamic string table). A program
 * that cannot be read is left to the device runs to report. */
static int openmp_program(const char *prog)
{
    char path[PATH_MAX];
    if (hm_cli_find_program(prog, path, sizeof path) < 0)
        return 0;
    return hm_cli_file_has(path, "GOMP_parallel") > 0 || hm_cli_file_has(path, "__kmpc_fork_call") > 0;
}

static int one_thread(void)
{
    const char *v = getenv("OMP_NUM_THREADS");
    return v && !strcmp(v, "1");
}

/* --------------------------------------------------------------- steps */

/* One validation: its options, then what each step builds. */
typedef struct {
    const char *machine, *jsonf, *plot, *keep;
    uint64_t K, period, jobs, seed, Kc, NT, min_size;
    char min_size_s[24]; /* min_size in decimal, for the hetmem sim runs */
    int real, reuse;
    char **prog;
    char self[PATH_MAX];  /* this program, for the hetmem sim children */
    char mpath[PATH_MAX]; /* the machine file */
    char dir[PATH_MAX];   /* where the runs go */
    char *mjson;          /* the machine as the simulator records it in traces */
    char *figures;        /* --real with a machine file: its description */
    char *devs[64];
    int nd;
    /* 1. device runs */
    job_t *dj;
    char *traces[64];
    hm_estimator_t *e;
    double tmin, tmax;
    /* 2. placements, measured */
    json_t **pls;
    char **kinds;
    job_t *pj;
    uint64_t *first; /* per placement: the first one drawn equal to it */
    uint64_t nj;
    /* 3. estimates */
    const char *dn[64];
    double *measured, *est;
    hm_placement_t **cpl; /* --calibrate: the scored placements, then the calibration runs' */
    json_t *rows, *sum, *calj;
} val_t;

/* The options into v. -1 to go on, else the exit status. */
static int val_options(val_t *v, const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t cli;
    const char *arg;
    int key;
    hm_cli_init(&cli, cmd, argc, argv, 1);
    while ((key = hm_cli_next(&cli, &arg)) != -1) {
        switch (key) {
        case OPT_MACHINE: v->machine = arg; break;
        case OPT_PLACEMENTS:
            if (hm_cli_u64_in(cmd, "--placements", arg, 1, 10000, NULL, &v->K))
                return HM_EXIT_USAGE;
            break;
        case OPT_PERIOD:
            if (hm_cli_u64_in(cmd, "--period", arg, 1, HM_TRACE_PERIOD_MAX, "a trace header holds at most 2^63-1",
                              &v->period))
                return HM_EXIT_USAGE;
            break;
        case 'j':
            if (hm_cli_u64_in(cmd, "--jobs", arg, 1, 1024, NULL, &v->jobs))
                return HM_EXIT_USAGE;
            break;
        case OPT_SEED:
            if (hm_cli_u64(cmd, "--seed", arg, &v->seed))
                return HM_EXIT_USAGE;
            break;
        case OPT_JSON: v->jsonf = arg; break;
        case OPT_PLOT: v->plot = arg; break;
        case OPT_REAL: v->real = 1; break;
        case OPT_KEEP: v->keep = arg; break;
        case OPT_REUSE: v->reuse = 1; break;
        case OPT_MIN_SIZE:
            if (hm_cli_size(cmd, "--min-size", arg, &v->min_size))
                return HM_EXIT_USAGE;
            break;
        case OPT_CALIBRATE:
            if (hm_cli_u64_in(cmd, "--calibrate", arg, 1, 100, "runs", &v->Kc))
                return HM_EXIT_USAGE;
            break;
        case OPT_ALLOW_EXIT: {
            uint64_t st;
            if (hm_cli_u64_in(cmd, "--allow-exit", arg, 1, 255, "an exit status", &st))
                return HM_EXIT_USAGE;
            allowed_exit[st] = 1;
            break;
        }
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (!v->machine)
        return hm_cli_usage(cmd, v->real ? "--machine DEV,DEV... is required with --real"
                                         : "--machine MACHINE is required");
    if (cli.ind >= argc)
        return hm_cli_usage(cmd, "no program given (hetmem validate --machine M -- ./app.sim ARGS)");
    if (v->reuse && !v->keep)
        return hm_cli_usage(cmd, "--reuse needs --keep DIR (where the device runs are)");
    v->prog = argv + cli.ind;
    if (!v->real && openmp_program(v->prog[0]) && !one_thread())
        return hm_cli_failf(v->prog[0], "is an OpenMP program and the simulator runs one thread: run it with "
                                        "OMP_NUM_THREADS=1 (OMP_NUM_THREADS=1 hetmem validate ...), or build it without -fopenmp");
    if (v->real && v->jobs > 1)
        fprintf(stderr, "hetmem: warning: --jobs %llu ignored with --real: runs on this machine's devices run one at "
                        "a time\n", (unsigned long long)v->jobs);
    if (!v->jobs) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        v->jobs = nc > 0 ? (uint64_t)nc : 1;
    }
    if (v->real)
        v->jobs = 1; /* runs on real devices must not share the machine */
    return -1;
}

/* The devices: the machine's, or the list given with --real. -1 to go on,
 * else the exit status. */
static int val_devices(val_t *v)
{
    hm_sim_machine_t *m = NULL;
    if (!v->real) {
        char exedir[PATH_MAX];
        snprintf(exedir, sizeof exedir, "%s", v->self);
        char *s = strrchr(exedir, '/');
        if (s)
            *s = 0;
        int rc = hm_sim_machine_find(v->machine, exedir, v->mpath, sizeof v->mpath);
        if (rc < 0)
            return hm_cli_fail(v->machine, rc);
        if ((rc = hm_sim_machine_load(&m, v->mpath)) < 0)
            return hm_cli_fail(v->mpath, rc);
        v->nd = hm_sim_machine_ndevices(m);
        for (int d = 0; d < v->nd && d < 64; d++)
            v->devs[d] = hm__xstrdup(hm_sim_machine_device_names(m)[d]);
        v->mjson = hm__xstrdup(hm_sim_machine_json(m));
        hm_sim_machine_close(m);
        char *abs = realpath(v->mpath, NULL);
        if (abs) {
            snprintf(v->mpath, sizeof v->mpath, "%s", abs);
            free(abs);
        }
    } else if (!strchr(v->machine, ',') && hm_sim_machine_find(v->machine, NULL, v->mpath, sizeof v->mpath) == 0 &&
               hm_sim_machine_load(&m, v->mpath) == 0) {
        /* A machine file: its devices (named as record --bind takes them)
         * and its figures for the traces and the estimator. */
        v->nd = hm_sim_machine_ndevices(m);
        for (int d = 0; d < v->nd && d < 64; d++)
            v->devs[d] = hm__xstrdup(hm_sim_machine_device_names(m)[d]);
        v->figures = hm__xstrdup(hm_sim_machine_json(m));
        hm_sim_machine_close(m);
    } else {
        char *list = hm__xstrdup(v->machine), *save = NULL;
        for (char *t = strtok_r(list, ",", &save); t && v->nd < 64; t = strtok_r(NULL, ",", &save))
            v->devs[v->nd++] = hm__xstrdup(t);
        free(list);
    }
    if (v->nd < 2)
        return hm_cli_failf(v->machine, "has %d memory device%s: validation needs at least two", v->nd,
                            v->nd == 1 ? "" : "s");
    return -1;
}

/* The folder of the runs: --keep DIR, or a temporary one. 0 or -1. */
static int val_workdir(val_t *v)
{
    if (v->keep) {
        if (mkdir(v->keep, 0755) < 0 && errno != EEXIST) {
            hm_cli_failf(v->keep, "%s", strerror(errno));
            return -1;
        }
        snprintf(v->dir, sizeof v->dir, "%s", v->keep);
        return 0;
    }
    const char *td = getenv("TMPDIR");
    snprintf(v->dir, sizeof v->dir, "%s/hetmem-validate.XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(v->dir)) {
        hm_cli_failf("temporary directory", "%s: %s", v->dir, strerror(errno));
        v->dir[0] = 0;
        return -1;
    }
    return 0;
}

/* 1. One run per device (kept ones reused with --reuse), and the
 * estimator on their traces. 0 or -1 (said why). */
static int val_device_runs(val_t *v)
{
    /* --real: the device runs are `hetmem record -b auto -p PERIOD`'s,
     * whose -p counts events, or microseconds for the soft sampler. */
    const char *rec_backend = NULL;
    uint64_t rec_period = v->period;
    if (v->real) {
        hm_backend_t b;
        if (hm_backend_auto(1, &b) != 0) {
            hm_cli_fail("record", HM_ENOPMU);
            return -1;
        }
        rec_backend = hm_backend_name(b);
        if (b == HM_BACKEND_SOFT && v->period > HM_TRACE_PERIOD_MAX / 1000) {
            hm_cli_failf("validate", "--period: %llu microseconds is over %llu (a trace holds the period in "
                         "nanoseconds, at most 2^63-1)", (unsigned long long)v->period,
                         (unsigned long long)(HM_TRACE_PERIOD_MAX / 1000));
            return -1;
        }
        rec_period = b == HM_BACKEND_SOFT ? v->period * 1000 : v->period;
    }
    char per[32];
    snprintf(per, sizeof per, "%llu", (unsigned long long)v->period);
    v->dj = hm__xcalloc((size_t)v->nd, sizeof *v->dj);
    int ndj = 0;
    for (int d = 0; d < v->nd; d++) {
        char tr[PATH_MAX + 64], rep[PATH_MAX + 64];
        snprintf(tr, sizeof tr, "%s/dev-%s.hmt", v->dir, v->devs[d]);
        snprintf(rep, sizeof rep, "%s/dev-%s.json", v->dir, v->devs[d]);
        v->traces[d] = hm__xstrdup(tr);
        if (v->reuse && reusable(tr, v->mjson, v->devs[d], v->period, v->min_size, v->prog))
            continue;
        job_t *j = &v->dj[ndj++];
        if (v->real) {
            /* As `hetmem record -b auto -p PERIOD --bind DEV [--machine FILE] -o TRACE`. */
            j->api = 1;
            j->rec.output = v->traces[d];
            j->rec.backend = rec_backend;
            j->rec.period = rec_period;
            j->rec.bind = v->devs[d];
            j->rec.machine = v->figures ? v->mpath : NULL;
            j->rec.min_size = v->min_size;
            j->argv = vec_cat(hm__xcalloc(1, sizeof(char *)), v->prog);
        } else {
            j->argv = vec(v->self, "sim", "-m", v->mpath, "--device", v->devs[d], "-o", tr, "--sample-period", per,
                          "--min-size", v->min_size_s, "--json", rep, "--", NULL);
            j->argv = vec_cat(j->argv, v->prog);
            snprintf(j->rep, sizeof j->rep, "%s", rep);
        }
        snprintf(j->log, sizeof j->log, "%s/dev-%s.log", v->dir, v->devs[d]);
    }
    if (ndj > 0 && run_jobs(v->dj, ndj, (int)v->jobs, "device runs") != 0)
        return -1;
    hm_estimator_opts_t eo = {0, v->figures};
    int rc = hm_estimator_open(&v->e, (const char *const *)v->traces, v->nd, &eo);
    if (rc < 0) {
        hm_cli_failf("estimate", "%s", *hm_errdetail() ? hm_errdetail() : hm_strerror(rc));
        return -1;
    }
    hm_cli_figures_note("validate", v->e);
    v->tmin = INFINITY, v->tmax = 0;
    for (int d = 0; d < v->nd; d++) {
        double t = hm_estimator_measured_ns(v->e, d) / 1e9;
        v->tmin = t < v->tmin ? t : v->tmin;
        v->tmax = t > v->tmax ? t : v->tmax;
    }
    return 0;
}

/* 2. Placements drawn, each distinct, and run: K scored, then with
 * --calibrate Kc more. 0 or -1 (said why). */
static int val_placement_runs(val_t *v)
{
    uint64_t rng = v->seed;
    v->NT = v->K + v->Kc;
    v->pls = hm__xcalloc(v->NT, sizeof *v->pls);
    v->kinds = hm__xcalloc(v->NT, sizeof *v->kinds);
    v->pj = hm__xcalloc(v->NT, sizeof *v->pj);
    v->first = hm__xcalloc(v->NT, sizeof *v->first);
    for (uint64_t i = 0; i < v->NT; i++) {
        char kind[128], pf[PATH_MAX + 64], rep[PATH_MAX + 64];
        /* Every row a distinct placement: one drawn again is drawn anew
         * (a small program has few distinct placements; when the draws run
         * dry, the table has fewer rows). */
        int dup = 1;
        for (int tries = 0; dup && tries < 200; tries++) {
            if (v->pls[i])
                json_decref(v->pls[i]);
            v->pls[i] = draw(v->e, (int)i + tries, &rng, kind, sizeof kind);
            dup = 0;
            for (uint64_t k = 0; k < i && !dup; k++)
                dup = json_equal(v->pls[k], v->pls[i]);
        }
        if (dup) {
            json_decref(v->pls[i]);
            v->pls[i] = NULL;
            fprintf(stderr, "hetmem: validate: only %llu distinct placements drawn for this program (asked for %llu)\n",
                    (unsigned long long)i, (unsigned long long)v->NT);
            if (i < v->K)
                v->K = i;
            v->Kc = i - v->K;
            v->NT = i;
            break;
        }
        v->kinds[i] = hm__xstrdup(kind);
        snprintf(pf, sizeof pf, "%s/placement-%03llu.json", v->dir, (unsigned long long)i);
        snprintf(rep, sizeof rep, "%s/placement-%03llu.report.json", v->dir, (unsigned long long)i);
        if (json_dump_file(v->pls[i], pf, JSON_INDENT(2)) < 0) {
            hm_cli_failf(pf, "cannot write");
            return -1;
        }
        v->first[i] = i;
        job_t *j = &v->pj[v->nj++];
        if (v->real) {
            /* As `hetmem run --placement FILE`. */
            j->api = 1;
            j->rec.placement = j->own = hm__xstrdup(pf);
            j->rec.min_size = v->min_size;
            j->argv = vec_cat(hm__xcalloc(1, sizeof(char *)), v->prog);
        } else {
            j->argv = vec(v->self, "sim", "-m", v->mpath, "--placement", pf, "--min-size", v->min_size_s, "--json", rep,
                          "--", NULL);
            j->argv = vec_cat(j->argv, v->prog);
            snprintf(j->rep, sizeof j->rep, "%s", rep);
        }
        j->idx = i;
        snprintf(j->log, sizeof j->log, "%s/placement-%03llu.log", v->dir, (unsigned long long)i);
    }
    return run_jobs(v->pj, (int)v->nj, (int)v->jobs, "placement runs") != 0 ? -1 : 0;
}

/* 3. Each placement's measured time, and the scored ones' estimates by
 * every model (v->rows). 0 or -1 (said why). */
static int val_estimates(val_t *v)
{
    for (int d = 0; d < v->nd; d++)
        v->dn[d] = hm_estimator_device_name(v->e, d);
    v->measured = hm__xcalloc(v->NT + 1, sizeof *v->measured);
    v->est = hm__xcalloc(v->K * HM_EST_NMODELS + 1, sizeof *v->est);
    v->cpl = hm__xcalloc(v->NT + 1, sizeof *v->cpl);
    for (uint64_t i = 0; i < v->NT; i++) {
        char rep[PATH_MAX + 64];
        uint64_t f = v->first[i], jf = 0;
        while (jf < v->nj && v->pj[jf].idx != f)
            jf++;
        snprintf(rep, sizeof rep, "%s/placement-%03llu.report.json", v->dir, (unsigned long long)f);
        v->measured[i] = v->real ? (jf < v->nj ? v->pj[jf].wall_s : 0) : report_runtime(rep);
        if (!(v->measured[i] > 0)) {
            hm_cli_failf(rep, "no runtime_s in the run's report");
            return -1;
        }
        char *txt = json_dumps(v->pls[i], 0);
        hm_placement_t *pl = NULL;
        int rc = hm_placement_parse(&pl, "drawn placement", txt, v->dn, v->nd);
        free(txt);
        if (rc < 0) {
            hm_cli_failf("drawn placement", "%s", hm_errdetail());
            return -1;
        }
        if (v->Kc) { /* kept for the calibrated estimates */
            hm_placement_t *again = NULL;
            txt = json_dumps(v->pls[i], 0);
            hm_placement_parse(&again, "drawn placement", txt, v->dn, v->nd);
            free(txt);
            v->cpl[i] = again;
        }
        if (i >= v->K) { /* a calibration run: measured, not scored */
            hm_placement_close(pl);
            continue;
        }
        json_t *je = json_object();
        for (int mdl = 0; mdl < HM_EST_NMODELS; mdl++) {
            hm_estimate_t r;
            if ((rc = hm_estimator_estimate(v->e, pl, (hm_est_model_t)mdl, &r, NULL)) < 0) {
                hm_placement_close(pl);
                json_decref(je);
                hm_cli_failf("estimate", "%s", hm_errdetail());
                return -1;
            }
            v->est[i * HM_EST_NMODELS + mdl] = r.runtime_ns / 1e9;
            json_object_set_new(je, hm_est_model_name((hm_est_model_t)mdl),
                                json_pack("{s:f, s:[f,f], s:{s:f, s:f, s:f}}", "runtime_s", r.runtime_ns / 1e9,
                                          "ci_s", r.lo_ns / 1e9, r.hi_ns / 1e9, "interval", "sampling_s",
                                          r.sampling_ns / 1e9, "model_s", r.model_ns / 1e9, "spread_s",
                                          r.spread_ns / 1e9));
        }
        hm_placement_close(pl);
        json_array_append_new(v->rows, json_pack("{s:s, s:O, s:f, s:o}", "kind", v->kinds[i], "placement", v->pls[i],
                                                 "measured_s", v->measured[i], "estimates", je));
    }
    return 0;
}

/* 4. The table of placements, and the summary per model (v->sum). */
static void val_table(val_t *v)
{
    uint64_t K = v->K;
    printf("hetmem validate: %s on %s, %d devices, %llu placements, sampling period %llu\n", v->prog[0],
           v->real ? "this machine" : v->machine, v->nd, (unsigned long long)K, (unsigned long long)v->period);
    for (int d = 0; d < v->nd; d++)
        printf("  all on %-10s %12.6f s\n", v->dn[d], hm_estimator_measured_ns(v->e, d) / 1e9);
    printf("  device gap (slowest/fastest) %.3fx\n\n", v->tmax / v->tmin);
    int kw = 44; /* the placement column fits its longest label: none is cut */
    for (uint64_t i = 0; i < K; i++)
        kw = (int)strlen(v->kinds[i]) > kw ? (int)strlen(v->kinds[i]) : kw;
    printf("  %-3s %-*s %12s", "#", kw, "placement", "measured (s)");
    for (int mdl = 0; mdl < HM_EST_NMODELS; mdl++)
        printf(" %12s %7s", hm_est_model_name((hm_est_model_t)mdl), "err%");
    printf("\n");
    for (uint64_t i = 0; i < K; i++) {
        printf("  %-3llu %-*s %12.6f", (unsigned long long)i, kw, v->kinds[i], v->measured[i]);
        for (int mdl = 0; mdl < HM_EST_NMODELS; mdl++) {
            double e = v->est[i * HM_EST_NMODELS + mdl];
            printf(" %12.6f %+7.2f", e, 100 * (e - v->measured[i]) / v->measured[i]);
        }
        printf("\n");
    }
    v->sum = json_object();
    printf("\n  %-10s %14s %14s %18s %12s\n", "model", "mean |err| %", "max |err| %", "mean |err| % gap", "within 5%");
    for (int mdl = 0; mdl < HM_EST_NMODELS; mdl++) {
        double se = 0, mx = 0, sg = 0;
        int w5 = 0;
        for (uint64_t i = 0; i < K; i++) {
            double err = fabs(v->est[i * HM_EST_NMODELS + mdl] - v->measured[i]);
            double pct = 100 * err / v->measured[i];
            se += pct;
            mx = pct > mx ? pct : mx;
            sg += v->tmax > v->tmin ? 100 * err / (v->tmax - v->tmin) : 0;
            w5 += pct <= 5;
        }
        printf("  %-10s %14.2f %14.2f %18.1f %11.0f%%\n", hm_est_model_name((hm_est_model_t)mdl), se / K, mx, sg / K,
               100.0 * w5 / K);
        json_object_set_new(v->sum, hm_est_model_name((hm_est_model_t)mdl),
                            json_pack("{s:f, s:f, s:f, s:f}", "mean_abs_err_pct", se / K, "max_abs_err_pct", mx,
                                      "mean_abs_err_gap_pct", sg / K, "within_5pct", (double)w5 / K));
    }
}

/* The default model calibrated on the first k of the runs outside the
 * scored set, k = 0 (as the table) to Kc: a table, and v->calj. 0 or -1
 * (said why). */
static int val_calibration(val_t *v)
{
    uint64_t K = v->K, Kc = v->Kc;
    json_t *cruns = json_array(), *crows = json_array();
    for (uint64_t i = K; i < v->NT; i++)
        json_array_append_new(cruns, json_pack("{s:s, s:O, s:f}", "kind", v->kinds[i], "placement", v->pls[i],
                                               "measured_s", v->measured[i]));
    printf("\n  default model calibrated on the first k of %llu runs of other placements (docs/estimator.md)\n",
           (unsigned long long)Kc);
    printf("  %-3s %-44s %12s %9s %9s %14s %14s\n", "k", "placement run added", "measured (s)", "overlap", "mix",
           "mean |err| %", "max |err| %");
    double *cns = hm__xcalloc(Kc + 1, sizeof *cns);
    for (uint64_t i = 0; i < Kc; i++)
        cns[i] = v->measured[K + i] * 1e9;
    int rc = 0;
    for (uint64_t k = 0; k <= Kc && rc == 0; k++) {
        hm_est_calibration_t cal;
        if ((rc = hm_estimator_calibrate(v->e, v->cpl + K, cns, (int)k, &cal)) < 0) {
            hm_cli_failf("calibration", "%s", hm_errdetail());
            break;
        }
        double se = 0, mx = 0;
        for (uint64_t i = 0; i < K; i++) {
            hm_estimate_t r;
            if ((rc = hm_estimator_estimate(v->e, v->cpl[i], HM_EST_DEFAULT, &r, NULL)) < 0) {
                hm_cli_failf("estimate", "%s", hm_errdetail());
                break;
            }
            double pct = 100 * fabs(r.runtime_ns / 1e9 - v->measured[i]) / v->measured[i];
            se += pct;
            mx = pct > mx ? pct : mx;
        }
        if (rc < 0)
            break;
        char mb[32] = "";
        if (k)
            snprintf(mb, sizeof mb, "%.6f", v->measured[K + k - 1]);
        printf("  %-3llu %-44s %12s %9.4f %+9.4f %14.2f %14.2f\n", (unsigned long long)k,
               k ? v->kinds[K + k - 1] : "(none)", mb, cal.overlap, cal.mix, se / K, mx);
        json_array_append_new(crows, json_pack("{s:I, s:f, s:f, s:f, s:f}", "runs", (json_int_t)k, "overlap",
                                               cal.overlap, "mix", cal.mix, "mean_abs_err_pct", se / K,
                                               "max_abs_err_pct", mx));
    }
    free(cns);
    if (rc < 0) {
        json_decref(cruns);
        json_decref(crows);
        return -1;
    }
    hm_estimator_calibrate(v->e, NULL, NULL, 0, NULL);
    v->calj = json_pack("{s:o, s:o}", "runs", cruns, "default", crows);
    return 0;
}

/* The plot of estimated against measured runtime, drawn from @p jpath by
 * a small script next to the presets (share/hetmem/plot-validate.py),
 * with matplotlib. 0 or -1 (said why). */
static int val_plot(val_t *v, const char *jpath)
{
    char script[PATH_MAX + 64], exedir[PATH_MAX];
    snprintf(exedir, sizeof exedir, "%s", v->self);
    char *s = strrchr(exedir, '/');
    if (s)
        *s = 0;
    const char *cands[] = {"%s/../share/hetmem/plot-validate.py", "%s/../../share/hetmem/plot-validate.py",
                           HETMEM_SOURCE_DIR "/share/hetmem/plot-validate.py%.0s"};
    script[0] = 0;
    for (size_t c = 0; c < HM_ARRAY_LEN(cands); c++) {
        char t[PATH_MAX + 64];
        snprintf(t, sizeof t, cands[c], exedir);
        if (access(t, R_OK) == 0) {
            snprintf(script, sizeof script, "%s", t);
            break;
        }
    }
    if (!script[0]) {
        hm_cli_failf(v->plot, "plot script share/hetmem/plot-validate.py not found");
        return -1;
    }
    job_t pjob = {0};
    /* Debian's interpreter has python3-matplotlib; another one first on
     * PATH may not. */
    pjob.argv = vec(access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3", script, jpath, v->plot,
                    NULL);
    snprintf(pjob.log, sizeof pjob.log, "%s/plot.log", v->dir);
    int prc = run_jobs(&pjob, 1, 1, "plot");
    vec_free(pjob.argv);
    if (prc)
        return -1;
    printf("\n  plot: %s\n", v->plot);
    return 0;
}

/* --json FILE (or, for --plot, DIR/validate.json), then the plot. 0 or -1
 * (said why). */
static int val_output(val_t *v)
{
    json_t *dj2 = json_array();
    for (int d = 0; d < v->nd; d++)
        json_array_append_new(dj2, json_pack("{s:s, s:f}", "name", v->dn[d], "measured_s",
                                             hm_estimator_measured_ns(v->e, d) / 1e9));
    json_t *cmdj = json_array();
    for (char **pv = v->prog; *pv; pv++)
        json_array_append_new(cmdj, json_string(*pv));
    json_t *root = json_pack("{s:s, s:o, s:I, s:f, s:O, s:o, s:o}", "machine", v->machine, "command", cmdj, "period",
                             (json_int_t)v->period, "gap", v->tmax / v->tmin, "rows", v->rows, "summary", v->sum,
                             "devices", dj2);
    v->sum = NULL;
    if (v->calj)
        json_object_set_new(root, "calibration", v->calj);
    v->calj = NULL;
    char jpath[PATH_MAX + 64];
    if (v->jsonf)
        snprintf(jpath, sizeof jpath, "%s", v->jsonf);
    else
        snprintf(jpath, sizeof jpath, "%s/validate.json", v->dir);
    int wr = strcmp(jpath, "-") == 0 ? json_dumpf(root, stdout, JSON_INDENT(2))
                                     : json_dump_file(root, jpath, JSON_INDENT(2));
    json_decref(root);
    if (wr < 0) {
        hm_cli_failf(jpath, "cannot write");
        return -1;
    }
    return v->plot ? val_plot(v, jpath) : 0;
}

/* Frees what the steps built; removes the runs' folder after a success
 * unless --keep, else says where they are. */
static void val_free(val_t *v, int status)
{
    free(v->mjson);
    free(v->figures);
    json_decref(v->sum);
    json_decref(v->rows);
    json_decref(v->calj);
    hm_estimator_close(v->e);
    for (int d = 0; d < v->nd; d++) {
        if (v->dj)
            vec_free(v->dj[d].argv);
        free(v->traces[d]);
        free(v->devs[d]);
    }
    free(v->dj);
    for (uint64_t i = 0; v->pj && i < v->NT; i++) {
        vec_free(v->pj[i].argv);
        free(v->pj[i].own);
        json_decref(v->pls[i]);
        free(v->kinds[i]);
        if (v->cpl)
            hm_placement_close(v->cpl[i]);
    }
    free(v->cpl);
    free(v->pj);
    free(v->first);
    free(v->pls);
    free(v->kinds);
    free(v->measured);
    free(v->est);
    if (!v->dir[0])
        return;
    if (!v->keep && status == HM_EXIT_OK)
        rm_rf(v->dir);
    else if (!v->keep)
        fprintf(stderr, "hetmem: validate: runs kept in %s\n", v->dir);
}

static int cmd_validate(const hm_cmd_t *cmd, int argc, char **argv)
{
    val_t v = {.K = 12, .period = 1000, .seed = 1, .min_size = HM_MIN_OBJECT_SIZE};
    int status = val_options(&v, cmd, argc, argv);
    if (status >= 0)
        return status;
    snprintf(v.min_size_s, sizeof v.min_size_s, "%llu", (unsigned long long)v.min_size);
    ssize_t sl = readlink("/proc/self/exe", v.self, sizeof v.self - 1);
    if (sl <= 0)
        return hm_cli_failf("/proc/self/exe", "%s", strerror(errno));
    v.self[sl] = 0;
    status = val_devices(&v);
    if (status < 0 && val_workdir(&v) < 0)
        status = HM_EXIT_RUNTIME;
    if (status >= 0) {
        val_free(&v, status);
        return status;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    status = HM_EXIT_RUNTIME;
    v.rows = json_array();
    if (val_device_runs(&v) == 0 && val_placement_runs(&v) == 0 && val_estimates(&v) == 0) {
        val_table(&v);
        if ((!v.Kc || val_calibration(&v) == 0) && (!(v.jsonf || v.plot) || val_output(&v) == 0))
            status = HM_EXIT_OK;
    }
    val_free(&v, status);
    return status;
}
