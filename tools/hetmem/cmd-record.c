/* hetmem record: the options of the recording API (hetmem/record.h), its
 * messages, and the command's exit status as ours. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "common/env.h"
#include "hetmem/record.h"
#include "hetmem/trace.h"

/* Fastest soft sampling rate (hetmem/record.h says why). */
#define HM_SOFT_MAX_HZ (1000000000u / HM_RECORD_MIN_INTERVAL_NS)

enum { OPT_BIND = 256, OPT_MIN_SIZE, OPT_DEPTH, OPT_PER_CPU, OPT_MACHINE };

static const hm_cli_opt_t opts[] = {
    {'b', "backend", "auto|pebs|ibs|spe|soft|none|perf-sw", "sampling backend: auto (default), pebs, ibs, spe, soft, none (allocations only), perf-sw (check the perf path)", 0},
    {'p', "period", "PERIOD", "events per sample (pebs/ibs/spe, default 4000); soft: microseconds between samples (default 1000 = 1 kHz)", 0},
    {'F', "freq", "HZ", "soft: samples per second per thread (alternative to -p)", HM_OPT_ALT},
    {OPT_BIND, "bind", "DEVICE", "bind all data to a NUMA node, tierN or kind (see 'hetmem doctor')", 0},
    {OPT_MACHINE, "machine", "MACHINE", "device figures for the trace header: a machine preset or JSON file "
                                        "(docs/machines.md), used instead of the kernel's HMAT figures", 0},
    {'o', "output", "FILE", "trace file (default hetmem.hmt); %r becomes the MPI/Slurm rank", 0},
    {OPT_MIN_SIZE, "min-size", "SIZE", "track allocations of at least SIZE bytes (default 64K)", 0},
    {OPT_DEPTH, "depth", "N", "links of the call chain in a site id (default 4, the depth hetmem sim and hetmem run use; max 16)", 0},
    {OPT_PER_CPU, "per-cpu", NULL, "PMU backends and perf-sw: one event and ring per CPU (pid -1), opened by hetmem; "
                                   "needs perf_event_paranoid <= 0 or CAP_PERFMON", 0},
    {0},
};

/* -o with %r: the rank from Open MPI, MPICH/PMI or Slurm, so that each rank
 * of `mpirun -n 4 hetmem record -o t.%r.hmt` writes its own trace. */
static int expand_rank(const char *in, char *out, size_t len)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    const char *rank = NULL;
    for (size_t i = 0; i < HM_ARRAY_LEN(vars) && !rank; i++)
        rank = getenv(vars[i]);
    size_t o = 0;
    for (const char *p = in; *p; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            int w = snprintf(out + o, len - o, "%s", rank ? rank : "0");
            o += (size_t)w;
            p++;
        } else if (o + 1 < len) {
            out[o++] = *p;
        }
        if (o >= len - 1)
            return -1;
    }
    out[o] = '\0';
    return 0;
}

/* The runtimes' messages, one line each. */
static void on_message(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "hetmem: record: %s\n", msg);
}

/* The backend that will record, for the units of -p and -F (auto resolved
 * here into *bk, a named one checked by the recorder), and the period as
 * the recording API takes it into *rt_period: events, or nanoseconds for
 * soft and perf-sw. @p arg_p is -p as given (NULL: none). -1 to go on,
 * else the exit status. */
static int backend_period(const hm_cmd_t *cmd, const char **bkp, int per_cpu, const char *arg_p, uint64_t period,
                          uint64_t freq, uint64_t *rt_period)
{
    const char *bk = *bkp;
    int have_p = arg_p != NULL;
    hm_backend_t b = HM_BACKEND_SOFT;
    int none = !strcmp(bk, "none"), perfsw = !strcmp(bk, "perf-sw");
    if (none) {
        if (have_p || freq)
            return hm_cli_usage(cmd, "-p/-F have no meaning with -b none");
    } else if (!perfsw && !strcmp(bk, "auto")) {
        if (hm_backend_auto(1, &b) != 0)
            return hm_cli_fail("record", HM_ENOPMU);
        bk = *bkp = hm_backend_name(b);
    } else if (!perfsw && hm_backend_parse(bk, &b) != 0) {
        return hm_cli_usage(cmd, "-b: unknown backend '%s' (auto, pebs, ibs, spe, soft, none, perf-sw)", bk);
    }
    int timed = b == HM_BACKEND_SOFT || perfsw; /* periods in time, not events */
    if ((!timed || perfsw) && freq)
        return hm_cli_usage(cmd, "-F applies to the soft backend only; use -p for %s", perfsw ? "perf-sw" : bk);
    if (per_cpu && !strcmp(bk, "soft"))
        return hm_cli_usage(cmd, "--per-cpu applies to perf backends; auto chose soft here");
    /* soft and perf-sw: period in ns for the runtime; -p is in microseconds. */
    *rt_period = none ? 0
        : timed ? (freq ? 1000000000ull / freq : (have_p ? period * 1000 : 1000000))
                : (have_p ? period : 4000);
    /* -p is microseconds for a timed backend: a period whose nanoseconds
     * do not fit 64 bits would wrap (to a fast rate) before the check
     * below. The kernel refuses event periods with the top bit set. */
    if (have_p && timed && period > HM_TRACE_PERIOD_MAX / 1000)
        return hm_cli_usage(cmd, "-p: %s microseconds is over %llu (a trace holds the period in nanoseconds, at "
                            "most 2^63-1)", arg_p, (unsigned long long)(HM_TRACE_PERIOD_MAX / 1000));
    if (have_p && !timed && period > (uint64_t)INT64_MAX)
        return hm_cli_usage(cmd, "-p: %s events is over the kernel's limit of 2^63-1", arg_p);
    if (timed && !none && *rt_period < HM_RECORD_MIN_INTERVAL_NS)
        return hm_cli_usage(cmd, "-p: soft sampling faster than every %u us (%u kHz) is not supported",
                            HM_RECORD_MIN_INTERVAL_NS / 1000u, HM_SOFT_MAX_HZ / 1000);
    return -1;
}

/* The summary line, and the exit status: the command's, so scripts see
 * the traced program's; but a trace that lacks records is not a success. */
static int summary(const char *path, const hm_record_result_t *t)
{
    int status = t->status;
    double res = t->samples ? 100.0 * (double)t->samples_with_addr / (double)t->samples : 0;
    fprintf(stderr,
            "hetmem: record: %s: %llu samples (%.1f%% with an address, %llu lost), %llu allocs, %llu frees, "
            "%llu sites, %llu process%s, %.3f s, %s %d\n",
            path, (unsigned long long)t->samples, res, (unsigned long long)t->lost, (unsigned long long)t->allocs,
            (unsigned long long)t->frees, (unsigned long long)t->sites, (unsigned long long)t->processes,
            t->processes == 1 ? "" : "es", (double)t->wall_ns / 1e9, WIFSIGNALED(status) ? "signal" : "exit",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    if (t->soft_stats[0] && hm__env_get(HM_ENV_VERBOSE))
        fprintf(stderr, "hetmem: record: %s\n", t->soft_stats);
    if (t->spool_limit_uncounted)
        fprintf(stderr, "hetmem: %s: incomplete: %d process%s reached the spool limit (%s) and ended before counting "
                "the records not written (killed?)\n", path, t->spool_limit_uncounted,
                t->spool_limit_uncounted == 1 ? "" : "es", hm__env_name(HM_ENV_SPOOL_MAX));
    if (t->spool_limit_reached && hm_recorder_exit_code(status) == 0) {
        if (t->spool_limit_uncounted)
            return HM_EXIT_RUNTIME;
        return hm_cli_failf(path, "incomplete: %llu records past the spool limit (%s) were not written",
                            (unsigned long long)t->unwritten, hm__env_name(HM_ENV_SPOOL_MAX));
    }
    return hm_recorder_exit_code(status);
}

static int run(const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t p;
    const char *arg, *bk = "auto", *bind = NULL, *out = "hetmem.hmt", *machine = NULL;
    uint64_t period = 0, freq = 0, min_size = 64 * 1024, depth = HM_SITE_DEPTH;
    int per_cpu = 0;
    int k, have_p = 0;
    const char *arg_p = NULL;
    hm_cli_init(&p, cmd, argc, argv, 1);
    while ((k = hm_cli_next(&p, &arg)) != -1) {
        switch (k) {
        case 'b': bk = arg; break;
        case 'p':
            if (hm_cli_u64(cmd, "-p", arg, &period))
                return HM_EXIT_USAGE;
            arg_p = arg;
            have_p = 1;
            break;
        case 'F':
            if (hm_cli_u64_in(cmd, "-F", arg, 1, HM_SOFT_MAX_HZ,
                              "Hz; each soft sample costs a few microseconds of handler and decoding, so faster rates "
                              "stall the program", &freq))
                return HM_EXIT_USAGE;
            break;
        case OPT_BIND: bind = arg; break;
        case OPT_MACHINE: machine = arg; break;
        case OPT_PER_CPU: per_cpu = 1; break;
        case 'o': out = arg; break;
        case OPT_MIN_SIZE:
            if (hm_cli_size(cmd, "--min-size", arg, &min_size))
                return HM_EXIT_USAGE;
            break;
        case OPT_DEPTH:
            if (hm_cli_u64_in(cmd, "--depth", arg, 1, 16, "frames", &depth))
                return HM_EXIT_USAGE;
            break;
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (p.ind >= argc)
        return hm_cli_usage(cmd, "missing command to record (hetmem record [options] -- CMD ARGS)");
    if (hm_cli_runtime_env() != 0)
        return HM_EXIT_RUNTIME;
    if (have_p && period == 0)
        return hm_cli_usage(cmd, "-p: PERIOD must be at least 1");
    if (have_p && freq)
        return hm_cli_usage(cmd, "-p and -F are alternatives; give one");
    if (per_cpu && (!strcmp(bk, "soft") || !strcmp(bk, "none")))
        return hm_cli_usage(cmd, "--per-cpu applies to perf backends (pebs, ibs, perf-sw), not to -b %s", bk);
    if (per_cpu && !strcmp(bk, "spe"))
        return hm_cli_usage(cmd, "--per-cpu is not supported with -b spe (SPE records carry no process id to filter by)");

    uint64_t rt_period = 0;
    int rc = backend_period(cmd, &bk, per_cpu, have_p ? arg_p : NULL, period, freq, &rt_period);
    if (rc >= 0)
        return rc;
    char path[4096];
    if (expand_rank(out, path, sizeof path) != 0)
        return hm_cli_usage(cmd, "-o: path too long");

    hm_record_opts_t o = {0};
    o.output = path;
    o.backend = bk;
    o.period = rt_period;
    o.bind = bind;
    o.machine = machine;
    o.min_size = min_size;
    o.depth = (unsigned)depth;
    o.per_cpu = per_cpu;
    o.on_message = on_message;
    hm_recorder_t *r;
    rc = hm_recorder_open(&r, &o, argv + p.ind);
    if (rc == HM_EUSAGE)
        return hm_cli_usage(cmd, "%s", hm_errdetail());
    if (rc < 0)
        return hm_cli_fail_subject("record", rc, path, argv[p.ind], machine ? machine : "", (const char *)NULL);
    if (bind && !hm_recorder_has_figures(r))
        fprintf(stderr, "hetmem: record: no device figures here (the kernel gives no HMAT figures and no --machine "
                "was given): estimates from this trace will have no bandwidth terms (docs/record.md)\n");
    hm_cli_env_settings("record");
    hm_record_result_t t;
    rc = hm_recorder_run(r, &t);
    hm_recorder_close(r);
    if (t.spools_truncated)
        fprintf(stderr, "hetmem: record: %d of %d process spools ended mid-record (killed while writing); kept what "
                "was complete\n", t.spools_truncated, t.spools);
    if (per_cpu && hm__env_get(HM_ENV_VERBOSE))
        fprintf(stderr, "hetmem: record: per-cpu: %llu samples kept, %llu of other processes dropped\n",
                (unsigned long long)t.percpu_kept, (unsigned long long)t.percpu_foreign);
    if (rc < 0)
        return hm_cli_fail_subject("record", rc, path, (const char *)NULL);
    return summary(path, &t);
}

const hm_cmd_t hm_cmd_record = {
    "record", "Record a sampled memory-access trace of a command",
    "-- CMD ARGS",
    "The command runs with libhetmem_preload.so (LD_PRELOAD), which tracks\n"
    "allocations of at least --min-size bytes and samples memory accesses.\n"
    "The exit status is the command's (128+N when killed by signal N).",
    opts, run};
