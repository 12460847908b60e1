/* hetmem record: run a command under libhetmem_preload with a sampler and
 * write one trace. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common/env.h"

/* Fastest soft sampling rate. Each sample costs the thread a signal and
 * the collector a decode: about 8 us in all on a 2-core x86-64 (a 0.19 s
 * kernel took 0.8 s at 100 kHz and 0.23 s at 20 kHz), and more on a busy
 * or slower machine, where 100 kHz starved the program outright. */
#define HM_SOFT_MAX_HZ 20000u
#include "hetmem/sim.h"
#include "hetmem/trace.h"
#include "os/os.h"
#include "record/record_int.h"

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
    {OPT_DEPTH, "depth", "N", "call-stack frames in a site id (default 6, max 16)", 0},
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

typedef struct {
    uint64_t seen, withaddr, samples, allocs, frees, unresolved, lost, sites, procs, phases, names, errors;
    uint64_t unwritten; /* records a runtime did not write past HETMEM_SPOOL_MAX */
    int full, counted;  /* spools that reached it, and that counted what they lack */
    char soft[160];
} totals_t;

/* Sites can be announced by several processes (fork): write each once. */
typedef struct {
    uint64_t *v;
    size_t cap, n;
} set_t;

static int set_add(set_t *s, uint64_t x)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        uint64_t *nv = hm__xcalloc(nc, sizeof *nv);
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i])
                for (size_t j = s->v[i] & (nc - 1);; j = (j + 1) & (nc - 1))
                    if (!nv[j]) {
                        nv[j] = s->v[i];
                        break;
                    }
        free(s->v);
        s->v = nv;
        s->cap = nc;
    }
    if (!x)
        x = 1;
    for (size_t j = x & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
        if (s->v[j] == x)
            return 0;
        if (!s->v[j]) {
            s->v[j] = x;
            s->n++;
            return 1;
        }
    }
}

/* Record times are CLOCK_MONOTONIC readings; the trace counts from the
 * program's start (t0), as the end record's run time does, so that a time
 * and the run time compare (the estimator's windows rely on it). Records
 * a clock step could put before t0 count from 0. */
static int merge(const char *dir, hm_trace_writer_t *w, totals_t *t, uint64_t t0)
{
    hm__spool_set_t *s;
    int rc = hm__spool_open(&s, dir);
    if (rc)
        return rc;
    set_t sites = {0};
    const hm__spool_rec_t *r;
    const char *pl;
    while (!rc && hm__spool_next(s, &r, &pl)) {
        hm__spool_rec_t rel = *r;
        rel.time = r->time > t0 ? r->time - t0 : 0;
        r = &rel;
        switch (r->kind) {
        case HM_REC_SAMPLE: {
            hm_sample_t x = {r->time, r->a, r->b, r->tid, (uint32_t)(r->c >> 32), (uint16_t)(r->c >> 8),
                             (uint8_t)(r->c & 0xff)};
            rc = hm_trace_write_sample(w, &x);
            t->seen++;
            t->withaddr += r->a != 0;
            break;
        }
        case HM_REC_ALLOC: {
            hm_alloc_t a = {r->time, r->a, r->b, r->c, r->tid};
            rc = hm_trace_write_alloc(w, &a);
            t->allocs++;
            break;
        }
        case HM_REC_FREE: rc = hm_trace_write_free(w, r->time, r->a, r->tid); t->frees++; break;
        case HM_REC_PHASE_BEGIN:
        case HM_REC_PHASE_END:
            rc = hm_trace_write_phase(w, r->kind == HM_REC_PHASE_BEGIN, r->time, r->tid, pl);
            t->phases++;
            break;
        case HM_REC_NAME: rc = hm_trace_write_name(w, r->time, r->a, pl); t->names++; break;
        case HM_REC_SITE:
            if (set_add(&sites, r->a)) {
                rc = hm_trace_write_site(w, r->a, pl);
                t->sites++;
            }
            break;
        case HM_SPOOL_STATS:
            t->lost += r->a;
            t->samples += r->b;
            t->unresolved += r->c;
            break;
        case HM_SPOOL_STATS + 10: snprintf(t->soft, sizeof t->soft, "%s", pl); break;
        case HM_SPOOL_PROC: t->procs++; break;
        case HM_SPOOL_ERROR:
            if (r->b == 2) { /* the mark; the count follows at the process's exit */
                t->full++;
                break;
            }
            fprintf(stderr, "hetmem: record: runtime: %s (%llu)\n", pl, (unsigned long long)r->a);
            t->errors++;
            if (r->b == 1)
                t->unwritten += r->a, t->counted++;
            break;
        default: break;
        }
    }
    int files, trunc;
    hm__spool_counts(s, &files, &trunc);
    if (trunc)
        fprintf(stderr, "hetmem: record: %d of %d process spools ended mid-record (killed while writing); kept what was complete\n",
                trunc, files);
    free(sites.v);
    hm__spool_close(s);
    return rc;
}

static int run(const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t p;
    const char *arg, *bk = "auto", *bind = NULL, *out = "hetmem.hmt", *machine = NULL;
    uint64_t period = 0, freq = 0, min_size = 64 * 1024, depth = 6;
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
            if (hm_cli_u64(cmd, "-F", arg, &freq))
                return HM_EXIT_USAGE;
            if (!freq || freq > HM_SOFT_MAX_HZ)
                return hm_cli_usage(cmd, "-F: %s Hz is outside 1..%u (each soft sample costs a few microseconds of "
                                    "handler and decoding, so faster rates stall the program)", arg, HM_SOFT_MAX_HZ);
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
            if (hm_cli_u64(cmd, "--depth", arg, &depth))
                return HM_EXIT_USAGE;
            if (depth < 1 || depth > 16)
                return hm_cli_usage(cmd, "--depth: %s is outside 1..16", arg);
            break;
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (p.ind >= argc)
        return hm_cli_usage(cmd, "missing command to record (hetmem record [options] -- CMD ARGS)");
    if (hm_cli_spool_max() != 0)
        return HM_EXIT_RUNTIME;
    {
        /* The runtime reads it too, but could only warn; refused here it
         * stops the run before it records nothing. */
        const char *so = getenv(hm__env_name(HM_ENV_SIGNAL_OFFSET));
        int off;
        if (so && hm__signal_offset(so, &off) != 0)
            return hm_cli_failf(hm__env_name(HM_ENV_SIGNAL_OFFSET), "'%s' is not an offset in 0..%d (SIGRTMIN+N "
                                "must be a real-time signal)", so, SIGRTMAX - SIGRTMIN);
    }
    if (have_p && period == 0)
        return hm_cli_usage(cmd, "-p: PERIOD must be at least 1");
    if (have_p && freq)
        return hm_cli_usage(cmd, "-p and -F are alternatives; give one");
    if (per_cpu && (!strcmp(bk, "soft") || !strcmp(bk, "none")))
        return hm_cli_usage(cmd, "--per-cpu applies to perf backends (pebs, ibs, perf-sw), not to -b %s", bk);
    if (per_cpu && !strcmp(bk, "spe"))
        return hm_cli_usage(cmd, "--per-cpu is not supported with -b spe (SPE records carry no process id to filter by)");
    if (per_cpu) {
        char why[256], remedy[256];
        if (hm__percpu_permitted(why, sizeof why, remedy, sizeof remedy) != 0)
            return hm_cli_failf("record", "--per-cpu is not permitted here: %s; remedy: %s", why, remedy);
    }

    hm_backend_t b;
    char why[256], remedy[256];
    int none = !strcmp(bk, "none"), perfsw = !strcmp(bk, "perf-sw");
    if (perfsw) {
        /* Diagnostic: the perf ring path with a software clock event. */
        hm__rec_events_t ev;
        hm__perfsw_events(1000000, &ev);
        int fd = hm__os_perf_open(ev.attr[0], 0, -1, -1, 0);
        if (fd < 0)
            return hm_cli_failf("record", "backend perf-sw is not usable here: perf_event_open(task-clock): %s; "
                                "remedy: lower kernel.perf_event_paranoid (<= 2)", strerror(-fd));
        close(fd);
        b = (hm_backend_t)HM__BACKEND_PERFSW;
    } else if (none) {
        b = HM_BACKEND_SOFT; /* placeholder; no sampler runs */
        if (have_p || freq)
            return hm_cli_usage(cmd, "-p/-F have no meaning with -b none");
    } else if (!strcmp(bk, "auto")) {
        if (hm__backend_auto(1, &b) != 0)
            return hm_cli_fail("record", HM_ENOPMU);
    } else if (hm_backend_parse(bk, &b) != 0) {
        return hm_cli_usage(cmd, "-b: unknown backend '%s' (auto, pebs, ibs, spe, soft, none, perf-sw)", bk);
    } else if (hm_backend_probe(b, 1, why, sizeof why, remedy, sizeof remedy) != 0) {
        return hm_cli_failf("record", "backend %s is not usable here: %s; remedy: %s", bk, why, remedy);
    }
    int timed = b == HM_BACKEND_SOFT || perfsw; /* periods in time, not events */
    if ((!timed || perfsw) && freq)
        return hm_cli_usage(cmd, "-F applies to the soft backend only; use -p for %s",
                            perfsw ? "perf-sw" : hm_backend_name(b));
    /* soft and perf-sw: period in ns for the runtime; -p is in microseconds. */
    uint64_t rt_period = timed
        ? (freq ? 1000000000ull / freq : (have_p ? period * 1000 : 1000000))
        : (have_p ? period : 4000);
    if (per_cpu && b == HM_BACKEND_SOFT && !perfsw)
        return hm_cli_usage(cmd, "--per-cpu applies to perf backends; auto chose soft here");
    /* -p is microseconds for a timed backend: a period whose nanoseconds
     * do not fit 64 bits would wrap (to a fast rate) before the check
     * below. The kernel refuses event periods with the top bit set. */
    if (have_p && timed && period > UINT64_MAX / 1000)
        return hm_cli_usage(cmd, "-p: %s microseconds does not fit in 64 bits of nanoseconds (at most %llu)", arg_p,
                            (unsigned long long)(UINT64_MAX / 1000));
    if (have_p && !timed && period > (uint64_t)INT64_MAX)
        return hm_cli_usage(cmd, "-p: %s events is over the kernel's limit of 2^63-1", arg_p);
    if (timed && !none && rt_period < 1000000000ull / HM_SOFT_MAX_HZ)
        return hm_cli_usage(cmd, "-p: soft sampling faster than every %u us (%u kHz) is not supported",
                            1000000u / HM_SOFT_MAX_HZ, HM_SOFT_MAX_HZ / 1000);

    char preload[4096];
    if (hm__find_preload(preload, sizeof preload) != 0)
        return hm_cli_fail("record", HM_ENOTFOUND);
    /* No loader runs in a static program, so the runtime would silently
     * record nothing. */
    if (hm__exe_is_static(argv[p.ind]))
        return hm_cli_failf(argv[p.ind], "statically linked: the hetmem runtime (LD_PRELOAD) cannot load into it; "
                            "%s needs a dynamically linked program", "record");
    char path[4096];
    if (expand_rank(out, path, sizeof path) != 0)
        return hm_cli_usage(cmd, "-o: path too long");

    /* The machine as the header describes it: identity always, figures
     * from --machine, else from the kernel (HMAT). */
    char *host_json = NULL, *machine_json = NULL;
    {
        hm_os_info_t *info = hm__xmalloc(sizeof *info);
        hm__os_probe(info);
        uint64_t mask = 0;
        int r = bind ? hm__os_resolve_device(info, bind, &mask) : 0;
        if (r) {
            free(info);
            return hm_cli_fail("record: --bind", r);
        }
        hm_sim_machine_t *m = NULL;
        char mpath[4096];
        if (machine) {
            char exe[4096];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            exe[n > 0 ? n : 0] = 0;
            char *slash = strrchr(exe, '/');
            if (slash)
                *slash = 0;
            if ((r = hm_sim_machine_find(machine, n > 0 ? exe : NULL, mpath, sizeof mpath)) < 0 ||
                (r = hm_sim_machine_load(&m, mpath)) < 0) {
                free(info);
                return hm_cli_fail(machine, r);
            }
            /* The estimator looks a run's figures up by its device name (or
             * by the nodes it was bound to): a machine file that names
             * neither would leave the trace without figures. */
            int found = !bind || hm_sim_machine_device_index(m, bind) >= 0;
            for (int i = 0; !found && i < info->nnodes; i++) {
                char nn[32];
                snprintf(nn, sizeof nn, "node%d", info->nodes[i].id);
                found = info->nodes[i].id < 64 && (mask >> info->nodes[i].id & 1) &&
                        hm_sim_machine_device_index(m, nn) >= 0;
            }
            if (!found) {
                char names[512];
                size_t off = 0;
                const char *const *dn = hm_sim_machine_device_names(m);
                for (int i = 0; i < hm_sim_machine_ndevices(m) && off < sizeof names; i++)
                    off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", dn[i]);
                hm_sim_machine_close(m);
                free(info);
                return hm_cli_failf(machine, "has no device '%s' (its devices: %s): name the machine's devices as "
                                    "--bind names them, or nodeN", bind, names);
            }
        }
        r = hm__rec_describe(info, mask, m ? hm_sim_machine_json(m) : NULL, machine ? mpath : NULL, &host_json,
                             &machine_json);
        hm_sim_machine_close(m);
        free(info);
        if (r)
            return hm_cli_fail("record: machine description", r);
    }
    /* Open the trace first: an unwritable output fails before the run. */
    hm_trace_meta_t meta = {0};
    char event[256];
    if (none) {
        snprintf(event, sizeof event, "none");
        rt_period = 0;
    } else if (perfsw) {
        snprintf(event, sizeof event, "task-clock %.0f Hz (perf-sw)", 1e9 / (double)rt_period);
    } else if (b == HM_BACKEND_SOFT) {
        snprintf(event, sizeof event, "soft:timer %.0f Hz", 1e9 / (double)rt_period);
    } else {
        hm__rec_events_t ev;
        if (hm__rec_events(b, rt_period, &ev) != 0)
            return hm_cli_fail("record", HM_ENOPMU);
        snprintf(event, sizeof event, "%s", ev.event);
    }
    meta.producer = "hetmem-record " HETMEM_VERSION;
    meta.clock = "CLOCK_MONOTONIC";
    meta.clock_ns_per_unit = 1.0;
    meta.backend = none ? "none" : perfsw ? "perf-sw" : hm_backend_name(b);
    if (per_cpu)
        snprintf(event + strlen(event), sizeof event - strlen(event), " per-cpu");
    meta.event = event;
    meta.period = rt_period;
    meta.device = bind;
    meta.argv = (const char *const *)(argv + p.ind);
    meta.machine_json = machine_json;
    meta.host_json = host_json;
    hm_trace_writer_t *w;
    int rc = hm_trace_writer_open(&w, path, &meta);
    int figures = machine_json != NULL;
    free(host_json);
    free(machine_json);
    if (rc)
        return hm_cli_fail(path, rc);
    if (bind && !figures)
        fprintf(stderr, "hetmem: record: no device figures here (the kernel gives no HMAT figures and no --machine "
                "was given): estimates from this trace will have no bandwidth terms (docs/record.md)\n");

    char tmpl[4096];
    if (hm__spool_create(tmpl, sizeof tmpl) != 0) {
        hm_trace_writer_close(w, NULL);
        unlink(path);
        return hm_cli_failf("record", "%s", hm_errdetail());
    }
    char e_spool[4200], e_backend[64], e_period[64], e_min[64], e_depth[32], e_bind[128];
    snprintf(e_spool, sizeof e_spool, "%s=%s", hm__env_name(HM_ENV_SPOOL), tmpl);
    /* Per-CPU: the events are ours; the runtime only tracks allocations. */
    snprintf(e_backend, sizeof e_backend, "%s=%s", hm__env_name(HM_ENV_BACKEND),
             none || per_cpu ? "" : perfsw ? "perf-sw" : hm_backend_name(b));
    snprintf(e_period, sizeof e_period, "%s=%llu", hm__env_name(HM_ENV_PERIOD), (unsigned long long)rt_period);
    snprintf(e_min, sizeof e_min, "%s=%llu", hm__env_name(HM_ENV_MIN_SIZE), (unsigned long long)min_size);
    snprintf(e_depth, sizeof e_depth, "%s=%llu", hm__env_name(HM_ENV_DEPTH), (unsigned long long)depth);
    snprintf(e_bind, sizeof e_bind, "%s=%s", hm__env_name(HM_ENV_BIND), bind ? bind : "");
    char *env[] = {e_spool, e_backend, e_period, e_min, e_depth, e_bind, NULL};

    hm__percpu_t *pc = NULL;
    if (per_cpu) {
        hm__rec_events_t ev;
        rc = perfsw ? hm__perfsw_events(rt_period, &ev) : hm__rec_events(b, rt_period, &ev);
        if (!rc)
            rc = hm__percpu_open(&pc, &ev, hm__rec_sample_type(), tmpl);
        if (rc) {
            hm_trace_writer_close(w, NULL);
            hm__spool_remove(tmpl);
            unlink(path);
            return hm_cli_failf("record", "--per-cpu: %s", hm_errdetail());
        }
    }
    int status = 0;
    uint64_t wall = 0;
    uint64_t t0 = hm__now_ns();
    rc = hm__launch(argv + p.ind, preload, env, &status, &wall);
    uint64_t pc_kept = 0, pc_foreign = 0;
    hm__percpu_close(pc, &pc_kept, &pc_foreign);
    if (pc && hm__env_get(HM_ENV_VERBOSE))
        fprintf(stderr, "hetmem: record: per-cpu: %llu samples kept, %llu of other processes dropped\n",
                (unsigned long long)pc_kept, (unsigned long long)pc_foreign);
    if (rc) {
        hm_trace_writer_close(w, NULL);
        hm__spool_remove(tmpl);
        unlink(path);
        return hm_cli_fail("record", rc);
    }
    totals_t t = {0};
    rc = merge(tmpl, w, &t, t0);
    hm__spool_remove(tmpl);
    hm_trace_end_t end = {wall, status};
    int rc2 = hm_trace_writer_close(w, &end);
    if (rc || rc2)
        return hm_cli_fail(path, rc ? rc : rc2);
    double res = t.seen ? 100.0 * (double)t.withaddr / (double)t.seen : 0;
    fprintf(stderr,
            "hetmem: record: %s: %llu samples (%.1f%% with an address, %llu lost), %llu allocs, %llu frees, "
            "%llu sites, %llu process%s, %.3f s, %s %d\n",
            path, (unsigned long long)t.seen, res, (unsigned long long)t.lost, (unsigned long long)t.allocs,
            (unsigned long long)t.frees, (unsigned long long)t.sites, (unsigned long long)t.procs,
            t.procs == 1 ? "" : "es", (double)wall / 1e9, WIFSIGNALED(status) ? "signal" : "exit",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    if (t.soft[0] && hm__env_get(HM_ENV_VERBOSE))
        fprintf(stderr, "hetmem: record: %s\n", t.soft);
    /* The child's status is ours, so scripts see the traced program's;
     * but a trace that lacks records is not a success. */
    if (t.full > t.counted)
        fprintf(stderr, "hetmem: %s: incomplete: %d process%s reached the spool limit (%s) and ended before counting "
                "the records not written (killed?)\n", path, t.full - t.counted, t.full - t.counted == 1 ? "" : "es",
                hm__env_name(HM_ENV_SPOOL_MAX));
    if (t.full && hm__exit_code(status) == 0) {
        if (t.full > t.counted)
            return HM_EXIT_RUNTIME;
        return hm_cli_failf(path, "incomplete: %llu records past the spool limit (%s) were not written",
                            (unsigned long long)t.unwritten, hm__env_name(HM_ENV_SPOOL_MAX));
    }
    return hm__exit_code(status);
}

const hm_cmd_t hm_cmd_record = {
    "record", "Record a sampled memory-access trace of a command",
    "-- CMD ARGS",
    "The command runs with libhetmem_preload.so (LD_PRELOAD), which tracks\n"
    "allocations of at least --min-size bytes and samples memory accesses.\n"
    "The exit status is the command's (128+N when killed by signal N).",
    opts, run};
