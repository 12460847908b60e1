/* The recording API (hetmem/record.h): a command run under
 * libhetmem_preload.so with a sampler, its per-process spools merged into
 * one trace. hetmem record is this plus its options and messages. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env.h"
#include "hetmem/placement.h"
#include "hetmem/record.h"
#include "hetmem/sim.h"
#include "hetmem/trace.h"
#include "os/os.h"
#include "record/record_int.h"

#define DEFAULT_EVENTS 4000u       /* pebs/ibs/spe: events per sample */
#define DEFAULT_INTERVAL 1000000u  /* soft, perf-sw: ns between samples (1 kHz) */
#define DEFAULT_MIN_SIZE HM_MIN_OBJECT_SIZE
#define DEFAULT_DEPTH ((unsigned)HM_SITE_DEPTH) /* common.h: the one depth hetmem sim uses too */

struct hm_recorder {
    char **argv;                 /* the command (copied) */
    char preload[4096];
    char path[4096];             /* the trace being written */
    char spool[4096];            /* the spool folder, "" before it exists */
    char event[256];
    const char *backend;         /* name in the trace header */
    int none, perfsw, per_cpu, figures, ran;
    hm_backend_t b;
    uint64_t period;             /* as the runtime takes it: events, or ns for soft and perf-sw */
    uint64_t min_size;
    unsigned depth;
    char bind[128];
    int has_bind;
    hm_trace_writer_t *w;
    void (*on_message)(void *ctx, const char *msg);
    void *ctx;
    /* A placement run: */
    char *placement;             /* its absolute path, NULL for a recording */
    char *capacity;              /* "DEV=BYTES,..." ("" for none) */
    void (*on_placement)(void *ctx, const hm_record_placement_t *p);
    hm_os_info_t *info;          /* NUMA nodes, for the nodes of each device */
    struct { char *name; uint64_t nodes; } *dn; /* device -> nodes, resolved once per name */
    int ndn;
    hm_record_device_t *dev;     /* devices reported (names owned here) */
    int ndev;
    char *unmatched;             /* rules that matched nothing, one a line */
};

HM_API int hm_recorder_exit_code(int status)
{
    return hm__exit_code(status);
}

/* rc with the detail "WHAT: reason[: detail]", the reason said once. */
static int fail_with(int rc, const char *what)
{
    char d[768];
    snprintf(d, sizeof d, "%s", hm_errdetail());
    size_t wl = strlen(what);
    if (!d[0] || !strcmp(d, what))
        return hm__errf(rc, "%s: %s", what, hm_strerror(rc));
    if (!strncmp(d, what, wl) && d[wl] == ':') /* "FILE:3:1: ...": the file named once */
        return hm__errf(rc, "%s", d);
    if (strstr(d, hm_strerror(rc)))
        return hm__errf(rc, "%s: %s", what, d);
    return hm__errf(rc, "%s: %s: %s", what, hm_strerror(rc), d);
}

/* libhetmem_preload.so beside the libhetmem that holds this code: a
 * program linked with the installed library finds the runtime installed
 * with it. 0 or -1. */
static int preload_beside_library(char *buf, size_t len)
{
    Dl_info di;
    if (!dladdr((void *)&hm_recorder_exit_code, &di) || !di.dli_fname)
        return -1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", di.dli_fname);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = 0;
    if (snprintf(buf, len, "%s/libhetmem_preload.so", dir) >= (int)len)
        return -1;
    return access(buf, R_OK) == 0 ? 0 : -1;
}

/* The backend the options name, resolved ("auto") and checked usable. */
static int pick_backend(hm_recorder_t *r, const char *name)
{
    char why[256], remedy[256];
    if (!name || !strcmp(name, "auto")) {
        if (hm_backend_auto(1, &r->b) != 0)
            return hm__errf(HM_ENOPMU, "no sampling backend works here (see 'hetmem doctor')");
        r->backend = hm_backend_name(r->b);
        return 0;
    }
    if (!strcmp(name, "none")) {
        r->none = 1;
        r->b = HM_BACKEND_SOFT; /* no sampler runs */
        r->backend = "none";
        return 0;
    }
    if (!strcmp(name, "perf-sw")) {
        /* Diagnostic: the perf ring path with a software clock event. */
        hm__rec_events_t ev;
        hm__perfsw_events(1000000, &ev);
        int fd = hm__os_perf_open(ev.attr[0], 0, -1, -1, 0);
        if (fd < 0)
            return hm__errf(fd, "backend perf-sw is not usable here: perf_event_open(task-clock): %s; remedy: lower "
                            "kernel.perf_event_paranoid (<= 2)", strerror(-fd));
        close(fd);
        r->perfsw = 1;
        r->b = (hm_backend_t)HM__BACKEND_PERFSW;
        r->backend = "perf-sw";
        return 0;
    }
    if (hm_backend_parse(name, &r->b) != 0)
        return hm__errf(HM_EUSAGE, "unknown backend '%s' (auto, pebs, ibs, spe, soft, none, perf-sw)", name);
    int rc = hm_backend_probe(r->b, 1, why, sizeof why, remedy, sizeof remedy);
    if (rc != 0)
        return hm__errf(rc, "backend %s is not usable here: %s; remedy: %s", name, why, remedy);
    r->backend = hm_backend_name(r->b);
    return 0;
}

/* The machine as the trace header describes it: identity always, figures
 * from opts->machine, else from the kernel (HMAT). */
static int describe(hm_recorder_t *r, const hm_record_opts_t *o, char **host_json, char **machine_json)
{
    hm_os_info_t *info = malloc(sizeof *info);
    if (!info)
        return -ENOMEM;
    hm__os_probe(info);
    uint64_t mask = 0;
    int rc = o->bind ? hm__os_resolve_device(info, o->bind, &mask) : 0;
    if (rc) {
        free(info);
        return fail_with(rc, "--bind");
    }
    hm_sim_machine_t *m = NULL;
    char mpath[4096];
    if (o->machine) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        if ((rc = hm_sim_machine_find(o->machine, n > 0 ? exe : NULL, mpath, sizeof mpath)) < 0 ||
            (rc = hm_sim_machine_load(&m, mpath)) < 0) {
            free(info);
            return fail_with(rc, o->machine);
        }
        /* The estimator looks a run's figures up by its device name (or by
         * the nodes it was bound to): a machine file that names neither
         * would leave the trace without figures. */
        int found = !o->bind || hm_sim_machine_device_index(m, o->bind) >= 0;
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
            names[0] = 0;
            for (int i = 0; i < hm_sim_machine_ndevices(m) && off < sizeof names; i++)
                off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", dn[i]);
            hm_sim_machine_close(m);
            free(info);
            return hm__errf(HM_EBADMACHINE, "%s: has no device '%s' (its devices: %s): name the machine's devices as "
                            "--bind names them, or nodeN", o->machine, o->bind, names);
        }
    }
    rc = hm__rec_describe(info, mask, m ? hm_sim_machine_json(m) : NULL, o->machine ? mpath : NULL, host_json,
                          machine_json);
    hm_sim_machine_close(m);
    free(info);
    if (rc)
        return fail_with(rc, "machine description");
    (void)r;
    return 0;
}

/* Checks the options against the backend, and sets the runtime's period
 * and the trace's event description. */
static int check_opts(hm_recorder_t *r, const hm_record_opts_t *o)
{
    int timed = r->b == HM_BACKEND_SOFT || r->perfsw; /* periods in time, not events */
    if (o->per_cpu && (r->none || (r->b == HM_BACKEND_SOFT && !r->perfsw)))
        return hm__errf(HM_EUSAGE, "--per-cpu applies to perf backends (pebs, ibs, perf-sw), not to %s",
                        r->backend);
    if (o->per_cpu && r->b == HM_BACKEND_SPE)
        return hm__errf(HM_EUSAGE, "--per-cpu is not supported with spe (SPE records carry no process id to "
                        "filter by)");
    if (r->none && o->period)
        return hm__errf(HM_EUSAGE, "a period has no meaning with backend none");
    if (o->depth > 16)
        return hm__errf(HM_EUSAGE, "depth %u is outside 1..16", o->depth);
    r->period = r->none ? 0 : o->period ? o->period : timed ? DEFAULT_INTERVAL : DEFAULT_EVENTS;
    if (!timed && r->period > (uint64_t)INT64_MAX)
        return hm__errf(HM_EUSAGE, "a period of %llu events is over the kernel's limit of 2^63-1",
                        (unsigned long long)r->period);
    if (timed && !r->none && r->period < HM_RECORD_MIN_INTERVAL_NS)
        return hm__errf(HM_EUSAGE, "soft sampling faster than every %u us (%u kHz) is not supported",
                        HM_RECORD_MIN_INTERVAL_NS / 1000u, 1000000u / HM_RECORD_MIN_INTERVAL_NS);
    if (r->none) {
        snprintf(r->event, sizeof r->event, "none");
    } else if (r->perfsw) {
        snprintf(r->event, sizeof r->event, "task-clock %.0f Hz (perf-sw)", 1e9 / (double)r->period);
    } else if (r->b == HM_BACKEND_SOFT) {
        snprintf(r->event, sizeof r->event, "soft:timer %.0f Hz", 1e9 / (double)r->period);
    } else {
        hm__rec_events_t ev;
        if (hm__rec_events(r->b, r->period, &ev) != 0)
            return hm__errf(HM_ENOPMU, "backend %s: %s", r->backend, hm_errdetail());
        snprintf(r->event, sizeof r->event, "%s", ev.event);
    }
    if (o->per_cpu)
        snprintf(r->event + strlen(r->event), sizeof r->event - strlen(r->event), " per-cpu");
    return 0;
}

/* A placement run's checks before the command runs: the placement loads,
 * its devices exist here, and each capacity is DEV=BYTES for one of them. */
static int open_placement(hm_recorder_t *r, const hm_record_opts_t *o)
{
    hm_placement_t *pl;
    int rc = hm_placement_load(&pl, o->placement, NULL, 0);
    if (rc)
        return fail_with(rc, o->placement);
    if (!(r->info = malloc(sizeof *r->info))) {
        hm_placement_close(pl);
        return -ENOMEM;
    }
    hm__os_probe(r->info);
    int ndev = 0;
    for (; ndev < 64 && hm_placement_device_name(pl, ndev); ndev++) {
        uint64_t m;
        if ((rc = hm__os_resolve_device(r->info, hm_placement_device_name(pl, ndev), &m))) {
            hm_placement_close(pl);
            return fail_with(rc, o->placement);
        }
    }
    const char *cap = o->capacity ? o->capacity : "";
    for (const char *t = cap; *t;) {
        size_t len = strcspn(t, ",");
        const char *eq = memchr(t, '=', len);
        char *end = NULL;
        if (eq && eq > t && eq[1] >= '0' && eq[1] <= '9')
            (void)strtoull(eq + 1, &end, 10);
        if (end != t + len) {
            hm_placement_close(pl);
            return hm__errf(HM_EUSAGE, "capacity: '%.*s' is not DEV=BYTES", (int)len, t);
        }
        int found = 0;
        for (int i = 0; i < ndev && !found; i++) {
            const char *dn = hm_placement_device_name(pl, i);
            found = strlen(dn) == (size_t)(eq - t) && !strncmp(dn, t, (size_t)(eq - t));
        }
        if (!found) {
            hm_placement_close(pl);
            return hm__errf(HM_ENODEV, "--capacity: %s: %.*s is not a device of %s", hm_strerror(HM_ENODEV),
                            (int)(eq - t), t, o->placement);
        }
        t += len + (t[len] == ',');
    }
    hm_placement_close(pl);
    return (r->capacity = strdup(cap)) ? 0 : -ENOMEM;
}

HM_API int hm_recorder_open(hm_recorder_t **out, const hm_record_opts_t *o, char *const argv[])
{
    *out = NULL;
    hm__errclear();
    if (!o || ((!o->output || !*o->output) && !o->placement))
        return hm__errf(HM_EUSAGE, "no output trace (or placement) named");
    if (o->output && o->placement)
        return hm__errf(HM_EUSAGE, "a placement run writes no trace: give an output or a placement, not both");
    if (o->placement && ((o->backend && strcmp(o->backend, "none")) || o->period || o->bind || o->machine || o->depth ||
                         o->per_cpu))
        return hm__errf(HM_EUSAGE, "a placement run samples nothing: backend, period, bind, machine, depth and "
                        "per_cpu apply to a recording");
    if (!o->placement && (o->capacity || o->on_placement))
        return hm__errf(HM_EUSAGE, "capacity and on_placement apply to a placement run");
    if (!argv || !argv[0])
        return hm__errf(HM_EUSAGE, "missing command to run");
    if (o->output && strlen(o->output) >= sizeof((hm_recorder_t *)0)->path)
        return hm__errf(HM_EUSAGE, "output path too long");
    if (o->bind && strlen(o->bind) >= sizeof((hm_recorder_t *)0)->bind)
        return hm__errf(HM_EUSAGE, "--bind %.40s...: name too long", o->bind);
    /* The runtime reads it too, but could only warn from inside the
     * command; refused here, nothing runs. */
    const char *sm = getenv(hm__env_name(HM_ENV_SPOOL_MAX));
    uint64_t smv;
    if (sm && (hm__parse_size(sm, &smv) != 0 || smv < HM_SPOOL_MIN))
        return hm__errf(HM_EUSAGE, "%s: '%s' is not a size of at least 64K (%s)", hm__env_name(HM_ENV_SPOOL_MAX), sm,
                        HM_SIZE_GRAMMAR);
    hm_recorder_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    int rc, n = 0;
    char *host_json = NULL, *machine_json = NULL;
    while (argv[n])
        n++;
    if (!(r->argv = calloc((size_t)n + 1, sizeof *r->argv))) {
        rc = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < n; i++)
        if (!(r->argv[i] = strdup(argv[i]))) {
            rc = -ENOMEM;
            goto fail;
        }
    if (o->output)
        snprintf(r->path, sizeof r->path, "%s", o->output);
    r->per_cpu = o->per_cpu != 0;
    r->min_size = o->min_size ? o->min_size : DEFAULT_MIN_SIZE;
    r->depth = o->depth ? o->depth : DEFAULT_DEPTH;
    r->on_message = o->on_message;
    r->on_placement = o->on_placement;
    r->ctx = o->ctx;
    if (o->bind) {
        snprintf(r->bind, sizeof r->bind, "%s", o->bind);
        r->has_bind = 1;
    }
    if (o->per_cpu) {
        char why[256], remedy[256];
        if (hm__percpu_permitted(why, sizeof why, remedy, sizeof remedy) != 0) {
            rc = hm__errf(-EACCES, "--per-cpu is not permitted here: %s; remedy: %s", why, remedy);
            goto fail;
        }
    }
    if (o->placement) {
        r->none = 1;
        r->backend = "none";
        if ((rc = open_placement(r, o)) < 0)
            goto fail;
    } else if ((rc = pick_backend(r, o->backend)) < 0 || (rc = check_opts(r, o)) < 0) {
        goto fail;
    }
    if (o->preload) {
        if (snprintf(r->preload, sizeof r->preload, "%s", o->preload) >= (int)sizeof r->preload) {
            rc = hm__errf(HM_EUSAGE, "preload path too long");
            goto fail;
        }
    } else if ((rc = hm__find_preload(r->preload, sizeof r->preload)) != 0) {
        if (hm__env_get(HM_ENV_PRELOAD) || preload_beside_library(r->preload, sizeof r->preload) != 0)
            goto fail; /* the detail names where it looked */
        hm__errclear();
    }
    /* No loader runs in a static program, so the runtime would silently
     * record nothing. */
    if (hm__exe_is_static(argv[0])) {
        rc = hm__errf(-ENOEXEC, "%s: statically linked: the hetmem runtime (LD_PRELOAD) cannot load into it; "
                      "%s needs a dynamically linked program", argv[0], o->placement ? "run" : "record");
        goto fail;
    }
    if (o->placement) {
        /* The runtimes of the command's processes read it wherever they
         * run (a chdir, a pipeline's other folder): an absolute path. */
        char abs[PATH_MAX];
        if (!realpath(o->placement, abs)) {
            int e = errno;
            rc = hm__errf(-e, "%s: %s", o->placement, strerror(e));
            goto fail;
        }
        if (!(r->placement = strdup(abs))) {
            rc = -ENOMEM;
            goto fail;
        }
        *out = r;
        return 0;
    }
    if ((rc = describe(r, o, &host_json, &machine_json)) < 0)
        goto fail;
    /* The trace first: an unwritable output fails before the run. */
    hm_trace_meta_t meta = {0};
    meta.producer = "hetmem-record " HETMEM_VERSION;
    meta.clock = "CLOCK_MONOTONIC";
    meta.clock_ns_per_unit = 1.0;
    meta.backend = r->backend;
    meta.event = r->event;
    meta.period = r->period;
    meta.device = r->has_bind ? r->bind : NULL;
    meta.argv = (const char *const *)r->argv;
    meta.machine_json = machine_json;
    meta.host_json = host_json;
    meta.min_size = r->min_size;
    r->figures = machine_json != NULL;
    rc = hm_trace_writer_open(&r->w, r->path, &meta);
    free(host_json);
    free(machine_json);
    host_json = machine_json = NULL;
    if (rc < 0) {
        rc = fail_with(rc, r->path);
        goto fail;
    }
    *out = r;
    return 0;
fail:
    free(host_json);
    free(machine_json);
    hm_recorder_close(r);
    return rc;
}

HM_API const char *hm_recorder_backend(const hm_recorder_t *r) { return r->backend; }
HM_API const char *hm_recorder_event(const hm_recorder_t *r) { return r->event; }
HM_API uint64_t hm_recorder_period(const hm_recorder_t *r) { return r->period; }
HM_API int hm_recorder_has_figures(const hm_recorder_t *r) { return r->figures; }

static void message(hm_recorder_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void message(hm_recorder_t *r, const char *fmt, ...)
{
    if (!r->on_message)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->on_message(r->ctx, buf);
}

/* Sites can be announced by several processes (fork): write each once. */
typedef struct {
    uint64_t *v;
    size_t cap, n;
} set_t;

/* 1 when x is new, 0 when seen, -ENOMEM. */
static int set_add(set_t *s, uint64_t x)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        uint64_t *nv = calloc(nc, sizeof *nv);
        if (!nv)
            return -ENOMEM;
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
static int merge(hm_recorder_t *rec, hm_record_result_t *t, uint64_t t0)
{
    hm__spool_set_t *s;
    int rc = hm__spool_open(&s, rec->spool);
    if (rc)
        return rc;
    hm_trace_writer_t *w = rec->w;
    set_t sites = {0};
    int counted = 0; /* processes whose spool filled and that counted what it lacks */
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
            t->samples++;
            t->samples_with_addr += r->a != 0;
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
        case HM_REC_SITE: {
            int fresh = set_add(&sites, r->a);
            if (fresh < 0) {
                rc = fresh;
            } else if (fresh) {
                rc = hm_trace_write_site(w, r->a, pl);
                t->sites++;
            }
            break;
        }
        case HM_SPOOL_STATS:
            t->lost += r->a;
            t->taken += r->b;
            t->unresolved += r->c;
            break;
        case HM_SPOOL_STATS + 10: snprintf(t->soft_stats, sizeof t->soft_stats, "%s", pl); break;
        case HM_SPOOL_PROC: t->processes++; break;
        case HM_SPOOL_ERROR:
            if (r->b == 2) { /* the mark; the count follows at the process's exit */
                t->spool_limit_reached++;
                break;
            }
            message(rec, "runtime: %s (%llu)", pl, (unsigned long long)r->a);
            t->runtime_errors++;
            if (r->b == 1)
                t->unwritten += r->a, counted++;
            break;
        default: break;
        }
    }
    /* A process killed after its spool filled never counted what it left
     * out: the trace is short by an unknown number of records. */
    t->spool_limit_uncounted = t->spool_limit_reached > counted ? t->spool_limit_reached - counted : 0;
    hm__spool_counts(s, &t->spools, &t->spools_truncated);
    free(sites.v);
    hm__spool_close(s);
    return rc;
}

/* NUMA nodes of device @p dev (NULL: none), resolved once per name: a
 * long run places the same few devices many times. 0 or -ENOMEM. */
static int device_nodes(hm_recorder_t *rec, const char *dev, uint64_t *out)
{
    *out = 0;
    if (!dev)
        return 0;
    for (int i = 0; i < rec->ndn; i++)
        if (!strcmp(rec->dn[i].name, dev)) {
            *out = rec->dn[i].nodes;
            return 0;
        }
    uint64_t m = 0;
    if (hm__os_resolve_device(rec->info, dev, &m) != 0)
        m = 0; /* a device the runtime named but this machine does not: no nodes */
    void *nv = realloc(rec->dn, (size_t)(rec->ndn + 1) * sizeof *rec->dn);
    if (!nv)
        return -ENOMEM;
    rec->dn = nv;
    if (!(rec->dn[rec->ndn].name = strdup(dev)))
        return -ENOMEM;
    rec->dn[rec->ndn++].nodes = *out = m;
    return 0;
}

/* One device record of a process that ran the placement (fork, exec and
 * pipelines give several): one entry per device, with the largest peak and
 * what all left charged. *nproc: the most processes of one device. */
static int device_add(hm_recorder_t *rec, const hm__spool_rec_t *r, const char *name, int *nproc)
{
    hm_record_device_t *d = NULL;
    for (int i = 0; i < rec->ndev && !d; i++)
        if (!strcmp(rec->dev[i].name, name))
            d = &rec->dev[i];
    if (!d) {
        void *nv = realloc(rec->dev, (size_t)(rec->ndev + 1) * sizeof *rec->dev);
        if (!nv)
            return -ENOMEM;
        rec->dev = nv;
        d = &rec->dev[rec->ndev];
        memset(d, 0, sizeof *d);
        if (!(d->name = strdup(name)))
            return -ENOMEM;
        rec->ndev++;
        d->capacity = r->a;
        d->peak = r->b;
        d->at_exit = r->c;
        d->processes = 1;
    } else {
        d->peak = d->peak > r->b ? d->peak : r->b;
        d->at_exit += r->c;
        d->processes++;
        *nproc = *nproc > d->processes ? *nproc : d->processes;
    }
    if (*nproc < 1)
        *nproc = 1;
    return 0;
}

/* A placement run's spools: each placement to on_placement, the devices'
 * totals, the rules no process matched, and the runtimes' messages. */
static int merge_placements(hm_recorder_t *rec, hm_record_result_t *t)
{
    hm__spool_set_t *s;
    int rc = hm__spool_open(&s, rec->spool);
    if (rc)
        return rc;
    json_t *srcs = json_object();        /* site id -> source chain, from the site records */
    json_t *unmatched_n = json_object(); /* rule -> processes that did not match it */
    int counted = 0, nproc = 0;
    if (!srcs || !unmatched_n)
        rc = -ENOMEM;
    const hm__spool_rec_t *r;
    const char *pay;
    while (!rc && hm__spool_next(s, &r, &pay)) {
        switch (r->kind) {
        case HM_REC_SITE: {
            char site[32], src[512];
            snprintf(site, sizeof site, "0x%016llx", (unsigned long long)r->a);
            if (hm__frame_source(pay, src, sizeof src) && json_object_set_new(srcs, site, json_string(src)))
                rc = -ENOMEM;
            break;
        }
        case HM_SPOOL_PLACE: {
            char req[64] = "-", got[64] = "-", name[64] = "-", phase[64] = "-", site[32];
            unsigned long long bound = 0;
            sscanf(pay, "%63s %63s %63s %63s %llu", req, got, name, phase, &bound);
            snprintf(site, sizeof site, "0x%016llx", (unsigned long long)r->c);
            hm_record_placement_t p = {r->a, r->b, r->c, bound, strcmp(name, "-") ? name : NULL,
                                       strcmp(phase, "-") ? phase : NULL, req, strcmp(got, "-") ? got : NULL,
                                       r->tid, 0, json_string_value(json_object_get(srcs, site))};
            if ((rc = device_nodes(rec, p.device, &p.nodes)) < 0)
                break;
            t->placements++;
            t->spilled += (r->tid & HM_PLACED_SPILLED) != 0;
            if (rec->on_placement)
                rec->on_placement(rec->ctx, &p);
            break;
        }
        case HM_SPOOL_PLACE + 4: rc = device_add(rec, r, pay, &nproc); break;
        case HM_SPOOL_PLACE + 3: {
            /* Each process lists the rules it did not match: count them. */
            char *copy = strdup(pay);
            if (!copy) {
                rc = -ENOMEM;
                break;
            }
            for (char *save, *tok = strtok_r(copy, "\n", &save); tok && !rc; tok = strtok_r(NULL, "\n", &save))
                if (json_object_set_new(unmatched_n, tok,
                                        json_integer(json_integer_value(json_object_get(unmatched_n, tok)) + 1)))
                    rc = -ENOMEM;
            free(copy);
            break;
        }
        case HM_SPOOL_PROC: t->processes++; break;
        case HM_SPOOL_ERROR:
            if (r->b == 2) { /* the mark; the count follows at the process's exit */
                t->spool_limit_reached++;
                break;
            }
            /* Without the count: hetmem run has always printed them so. */
            message(rec, "runtime: %s", pay);
            t->runtime_errors++;
            if (r->b == 1)
                t->unwritten += r->a, counted++;
            break;
        default: break;
        }
    }
    t->spool_limit_uncounted = t->spool_limit_reached > counted ? t->spool_limit_reached - counted : 0;
    hm__spool_counts(s, &t->spools, &t->spools_truncated);
    hm__spool_close(s);
    /* A rule matched nothing only if it matched nothing in any process. */
    size_t len = 0;
    const char *rule;
    json_t *cnt;
    if (!rc && !(rec->unmatched = calloc(1, 1)))
        rc = -ENOMEM;
    json_object_foreach(unmatched_n, rule, cnt) {
        if (rc || json_integer_value(cnt) < nproc)
            continue;
        char *nu = realloc(rec->unmatched, len + strlen(rule) + 2);
        if (!nu) {
            rc = -ENOMEM;
            continue;
        }
        rec->unmatched = nu;
        len += (size_t)sprintf(nu + len, "%s\n", rule);
    }
    json_decref(unmatched_n);
    json_decref(srcs);
    for (int i = 0; !rc && i < rec->ndev; i++)
        rc = device_nodes(rec, rec->dev[i].name, &rec->dev[i].nodes);
    return rc;
}

HM_API const char *hm_recorder_placement(const hm_recorder_t *r) { return r->placement; }

HM_API int hm_recorder_ndevices(const hm_recorder_t *r) { return r->ndev; }

HM_API int hm_recorder_device(const hm_recorder_t *r, int i, hm_record_device_t *out)
{
    if (i < 0 || i >= r->ndev)
        return HM_ENOTFOUND;
    *out = r->dev[i];
    return 0;
}

HM_API const char *hm_recorder_unmatched(const hm_recorder_t *r) { return r->unmatched ? r->unmatched : ""; }

/* A placement run: the command under the runtime with the placement, no
 * sampler and no allocation events (the report reads only the placement
 * records, and a long run's allocation records would only fill the disk). */
static int run_placement(hm_recorder_t *r, hm_record_result_t *out)
{
    char e_spool[4200], e_place[PATH_MAX + 32], e_min[64], e_nob[64], e_noev[64];
    char *e_cap = malloc(strlen(r->capacity) + 32);
    if (!e_cap)
        return -ENOMEM;
    snprintf(e_spool, sizeof e_spool, "%s=%s", hm__env_name(HM_ENV_SPOOL), r->spool);
    snprintf(e_place, sizeof e_place, "%s=%s", hm__env_name(HM_ENV_PLACEMENT), r->placement);
    sprintf(e_cap, "%s=%s", hm__env_name(HM_ENV_CAPACITY), r->capacity);
    snprintf(e_min, sizeof e_min, "%s=%llu", hm__env_name(HM_ENV_MIN_SIZE), (unsigned long long)r->min_size);
    snprintf(e_nob, sizeof e_nob, "%s=", hm__env_name(HM_ENV_BACKEND));
    snprintf(e_noev, sizeof e_noev, "%s=0", hm__env_name(HM_ENV_EVENTS));
    char *env[] = {e_spool, e_place, e_cap, e_min, e_nob, e_noev, NULL};
    int rc = hm__launch(r->argv, r->preload, env, &out->status, &out->wall_ns);
    free(e_cap);
    if (rc)
        return fail_with(rc, "launching the command");
    rc = merge_placements(r, out);
    return rc ? fail_with(rc, "reading the placement records") : 0;
}

HM_API int hm_recorder_run(hm_recorder_t *r, hm_record_result_t *out)
{
    hm__errclear();
    if (r->ran || (!r->w && !r->placement))
        return hm__errf(HM_EUSAGE, "a recorder runs its command once"); /* *out left as it was */
    memset(out, 0, sizeof *out);
    r->ran = 1;
    int rc = hm__spool_create(r->spool, sizeof r->spool);
    if (rc != 0) {
        r->spool[0] = 0;
        return fail_with(rc, "spool folder");
    }
    if (r->placement)
        return run_placement(r, out);
    char e_spool[4200], e_backend[64], e_period[64], e_min[64], e_depth[32], e_bind[160];
    snprintf(e_spool, sizeof e_spool, "%s=%s", hm__env_name(HM_ENV_SPOOL), r->spool);
    /* Per-CPU: the events are ours; the runtime only tracks allocations. */
    snprintf(e_backend, sizeof e_backend, "%s=%s", hm__env_name(HM_ENV_BACKEND),
             r->none || r->per_cpu ? "" : r->backend);
    snprintf(e_period, sizeof e_period, "%s=%llu", hm__env_name(HM_ENV_PERIOD), (unsigned long long)r->period);
    snprintf(e_min, sizeof e_min, "%s=%llu", hm__env_name(HM_ENV_MIN_SIZE), (unsigned long long)r->min_size);
    snprintf(e_depth, sizeof e_depth, "%s=%u", hm__env_name(HM_ENV_DEPTH), r->depth);
    snprintf(e_bind, sizeof e_bind, "%s=%s", hm__env_name(HM_ENV_BIND), r->has_bind ? r->bind : "");
    char *env[] = {e_spool, e_backend, e_period, e_min, e_depth, e_bind, NULL};

    hm__percpu_t *pc = NULL;
    if (r->per_cpu) {
        hm__rec_events_t ev;
        rc = r->perfsw ? hm__perfsw_events(r->period, &ev) : hm__rec_events(r->b, r->period, &ev);
        if (!rc)
            rc = hm__percpu_open(&pc, &ev, hm__rec_sample_type(), r->spool);
        if (rc)
            return hm__errf(rc, "--per-cpu: %s", hm_errdetail());
    }
    uint64_t t0 = hm__now_ns();
    rc = hm__launch(r->argv, r->preload, env, &out->status, &out->wall_ns);
    hm__percpu_close(pc, &out->percpu_kept, &out->percpu_foreign);
    if (rc)
        return fail_with(rc, "launching the command");
    rc = merge(r, out, t0);
    hm_trace_end_t end = {out->wall_ns, out->status};
    int rc2 = hm_trace_writer_close(r->w, &end);
    r->w = NULL;
    if (rc || rc2)
        return fail_with(rc ? rc : rc2, r->path);
    return 0;
}

HM_API void hm_recorder_close(hm_recorder_t *r)
{
    if (!r)
        return;
    if (r->w) {
        /* Not run, or the run failed before the trace was finished: no
         * half-written trace is left behind. */
        hm_trace_writer_close(r->w, NULL);
        unlink(r->path);
    }
    if (r->spool[0])
        hm__spool_remove(r->spool);
    for (int i = 0; r->argv && r->argv[i]; i++)
        free(r->argv[i]);
    free(r->argv);
    free(r->placement);
    free(r->capacity);
    free(r->info);
    for (int i = 0; i < r->ndn; i++)
        free(r->dn[i].name);
    free(r->dn);
    for (int i = 0; i < r->ndev; i++)
        free((char *)r->dev[i].name);
    free(r->dev);
    free(r->unmatched);
    free(r);
}
