/* hetmem run: run a command with its objects bound per a placement, and
 * report where each object went. The run is the recording API's placement
 * run (hetmem/record.h); this file holds its options and the report. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "common/env.h"
#include "hetmem/record.h"

enum { OPT_PLACEMENT = 256, OPT_REPORT, OPT_REPORT_OBJECTS, OPT_CAPACITY, OPT_MIN_SIZE, OPT_STRICT };

static const hm_cli_opt_t opts[] = {
    {OPT_PLACEMENT, "placement", "FILE", "placement JSON (docs/placement-format.md)", HM_OPT_REQUIRED},
    {OPT_REPORT, "report", "FILE", "write the placement report as JSON (default: table on stderr)", 0},
    {OPT_REPORT_OBJECTS, "report-objects", "N",
     "placement events the report lists one by one (default 10000, 0: none); its \"sites\" totals count all", 0},
    {OPT_CAPACITY, "capacity", "DEV=SIZE", "capacity of a placement device (K/M/G/T suffixes; without one, at least a page); default: its nodes' memory",
     HM_OPT_REPEAT},
    {OPT_MIN_SIZE, "min-size", "SIZE", "bind allocations of at least SIZE bytes (default 64K)", 0},
    {OPT_STRICT, "strict", NULL, "a placement rule that matches nothing is an error (exit 1 if the command succeeded)", 0},
    {0},
};

/* Placement events the stderr table lists one by one; a run with more gets
 * totals per site, as a table of a long run's events would be unreadable. */
enum { TABLE_OBJECTS = 50 };

static json_t *nodes_of(uint64_t mask)
{
    json_t *a = json_array();
    for (int i = 0; i < 64; i++)
        if (mask >> i & 1)
            json_array_append_new(a, json_integer(i));
    return a;
}

/* The nodes array of device dev (NULL: left to first touch, no nodes),
 * built once per name: a long run places the same few devices many times.
 * The array is borrowed from cache. */
static json_t *device_nodes(json_t *cache, const char *dev, uint64_t mask)
{
    const char *key = dev ? dev : "";
    json_t *a = json_object_get(cache, key);
    if (!a) {
        a = nodes_of(dev ? mask : 0);
        json_object_set_new(cache, key, a);
    }
    return a;
}

/* The report's "sites": one entry per distinct (site, name, phase,
 * requested, device, global) over all placement events, in order of first
 * appearance, with its totals. Memory grows with the distinct tuples, not
 * with the events. */
typedef struct {
    json_t *entry; /* the tuple and its nodes; the totals are added at the end */
    uint64_t placements, bytes, bound_bytes, spilled, moved, failed;
} site_t;

typedef struct {
    json_t *index; /* "site name phase requested device global" -> position */
    site_t *v;
    size_t n, cap;
} sites_t;

/* The strings are the spool's tokens, "-" for none; tokens hold no spaces,
 * so the composed key is unambiguous. */
static site_t *site_add(sites_t *ss, const char *site, const char *name, const char *phase, const char *req,
                     const char *dev, uint32_t flags, json_t *nodes, uint64_t size, uint64_t bound)
{
    char key[400];
    int global = (flags & HM_PLACED_GLOBAL) != 0;
    snprintf(key, sizeof key, "%s %s %s %s %s %d", site, name, phase, req, dev, global);
    json_t *at = json_object_get(ss->index, key);
    site_t *x;
    if (at) {
        x = &ss->v[json_integer_value(at)];
    } else {
        if (ss->n == ss->cap) {
            ss->cap = ss->cap ? 2 * ss->cap : 64;
            ss->v = hm__xrealloc(ss->v, ss->cap * sizeof *ss->v);
        }
        json_object_set_new(ss->index, key, json_integer((json_int_t)ss->n));
        x = &ss->v[ss->n++];
        memset(x, 0, sizeof *x);
        x->entry = json_pack("{s:s,s:s?,s:s?,s:s,s:s?,s:b,s:O}", "site", site, "name", strcmp(name, "-") ? name : NULL,
                             "phase", strcmp(phase, "-") ? phase : NULL, "requested", req, "device",
                             strcmp(dev, "-") ? dev : NULL, "global", global, "nodes", nodes);
    }
    x->placements++;
    x->bytes += size;
    x->bound_bytes += bound;
    x->spilled += (flags & HM_PLACED_SPILLED) != 0;
    x->moved += (flags & HM_PLACED_MOVED) != 0;
    x->failed += (flags & HM_PLACED_FAILED) != 0;
    return x;
}

/* The "sites" array (caller owns it); releases the rest of ss. */
static json_t *sites_finish(sites_t *ss)
{
    json_t *a = json_array();
    for (size_t i = 0; i < ss->n; i++) {
        site_t *x = &ss->v[i];
        json_object_set_new(x->entry, "placements", json_integer((json_int_t)x->placements));
        json_object_set_new(x->entry, "bytes", json_integer((json_int_t)x->bytes));
        json_object_set_new(x->entry, "bound_bytes", json_integer((json_int_t)x->bound_bytes));
        json_object_set_new(x->entry, "spilled", json_integer((json_int_t)x->spilled));
        json_object_set_new(x->entry, "moved", json_integer((json_int_t)x->moved));
        json_object_set_new(x->entry, "failed", json_integer((json_int_t)x->failed));
        json_array_append_new(a, x->entry);
    }
    json_decref(ss->index);
    free(ss->v);
    return a;
}

static void print_objects(json_t *objs)
{
    fprintf(stderr, "%-18s %-10s %-12s %-10s %-10s %-22s %s\n", "site", "name", "size", "requested", "device", "note",
            "source");
    for (size_t i = 0; i < json_array_size(objs); i++) {
        json_t *o = json_array_get(objs, i);
        char sz[32];
        hm__fmt_size((uint64_t)json_integer_value(json_object_get(o, "size")), sz, sizeof sz);
        const char *nm = json_string_value(json_object_get(o, "name"));
        const char *dv = json_string_value(json_object_get(o, "device"));
        char note[48];
        int failed = json_is_true(json_object_get(o, "failed"));
        snprintf(note, sizeof note, "%s%s%s%s", json_is_true(json_object_get(o, "global")) ? "global " : "",
                 json_is_true(json_object_get(o, "spilled")) ? "spilled " : "",
                 json_is_true(json_object_get(o, "moved")) ? "moved " : "", failed ? "bind failed" : "");
        const char *src = json_string_value(json_object_get(o, "source"));
        fprintf(stderr, "%-18s %-10s %-12s %-10s %-10s %-22s %s\n", json_string_value(json_object_get(o, "site")),
                nm ? nm : "-", sz, json_string_value(json_object_get(o, "requested")),
                dv ? dv : failed ? "(failed)" : "(unbound)", note[0] ? note : "-", src ? src : "-");
    }
}

static void print_sites(json_t *sites, unsigned long long nobj)
{
    fprintf(stderr, "hetmem: run: %llu object placements, more than %d: totals per site instead of one line per "
            "object (--report FILE lists them one by one)\n", nobj, TABLE_OBJECTS);
    fprintf(stderr, "%-18s %-10s %-10s %10s %-12s %-10s %-10s %8s %8s %8s\n", "site", "name", "phase", "placements",
            "bytes", "requested", "device", "spilled", "moved", "failed");
    for (size_t i = 0; i < json_array_size(sites); i++) {
        json_t *o = json_array_get(sites, i);
        char sz[32];
        hm__fmt_size((uint64_t)json_integer_value(json_object_get(o, "bytes")), sz, sizeof sz);
        const char *nm = json_string_value(json_object_get(o, "name"));
        const char *ph = json_string_value(json_object_get(o, "phase"));
        const char *dv = json_string_value(json_object_get(o, "device"));
        long long nf = (long long)json_integer_value(json_object_get(o, "failed"));
        fprintf(stderr, "%-18s %-10s %-10s %10lld %-12s %-10s %-10s %8lld %8lld %8lld%s\n",
                json_string_value(json_object_get(o, "site")), nm ? nm : "-", ph ? ph : "-",
                (long long)json_integer_value(json_object_get(o, "placements")), sz,
                json_string_value(json_object_get(o, "requested")), dv ? dv : nf ? "(failed)" : "(unbound)",
                (long long)json_integer_value(json_object_get(o, "spilled")),
                (long long)json_integer_value(json_object_get(o, "moved")), nf,
                json_is_true(json_object_get(o, "global")) ? " global" : "");
    }
}

/* What the placement callback builds: the first `keep` events one by one,
 * and every event in its site's totals. */
typedef struct {
    uint64_t keep, seen, failed;
    json_t *objs, *nodes;
    sites_t sites;
} run_t;

/* The spool's tokens, "-" for none, as the site totals key them. */
static const char *tok(const char *s) { return s ? s : "-"; }

static void on_placement(void *vctx, const hm_record_placement_t *e)
{
    run_t *c = vctx;
    char site[32];
    snprintf(site, sizeof site, "0x%016llx", (unsigned long long)e->site);
    json_t *nd = device_nodes(c->nodes, e->device, e->nodes);
    if (c->seen < c->keep) {
        json_t *o = json_pack("{s:I,s:I,s:s,s:s?,s:s?,s:s,s:s?,s:b,s:b,s:b,s:I,s:O}", "addr", (json_int_t)e->addr,
                              "size", (json_int_t)e->size, "site", site, "name", e->name, "phase", e->phase,
                              "requested", e->requested, "device", e->device, "spilled",
                              (e->flags & HM_PLACED_SPILLED) != 0, "moved", (e->flags & HM_PLACED_MOVED) != 0,
                              "global", (e->flags & HM_PLACED_GLOBAL) != 0, "bound_bytes",
                              (json_int_t)e->bound_bytes, "nodes", nd);
        if (e->source)
            json_object_set_new(o, "source", json_string(e->source));
        if (e->flags & HM_PLACED_FAILED)
            json_object_set_new(o, "failed", json_true());
        json_array_append_new(c->objs, o);
    }
    c->failed += (e->flags & HM_PLACED_FAILED) != 0;
    site_t *x = site_add(&c->sites, site, tok(e->name), tok(e->phase), e->requested, tok(e->device), e->flags, nd,
                         e->size, e->bound_bytes);
    if (e->source && !json_object_get(x->entry, "source"))
        json_object_set_new(x->entry, "source", json_string(e->source));
    c->seen++;
}

/* The runtimes' messages, one line each. */
static void on_message(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "hetmem: run: %s\n", msg);
}

/* --capacity DEV=SIZE appended to @p capacity ("DEV=BYTES,..."). 0, or
 * the usage error's exit status. */
static int add_capacity(const hm_cmd_t *cmd, char *capacity, size_t size, const char *arg)
{
    const char *eq = strchr(arg, '=');
    uint64_t v;
    if (!eq || eq == arg)
        return hm_cli_usage(cmd, "--capacity: '%s' is not DEV=SIZE", arg);
    if (hm_cli_capacity(cmd, "--capacity", eq + 1, &v))
        return HM_EXIT_USAGE;
    int dl = (int)(eq - arg);
    if (memchr(arg, ',', (size_t)dl))
        return hm_cli_usage(cmd, "--capacity: device name '%.*s' holds a comma", dl, arg);
    /* As optimize does: a second value for one device would silently
     * replace the first. */
    for (const char *c = capacity; *c; c += strcspn(c, ",") + (c[strcspn(c, ",")] == ',')) {
        if (!strncmp(c, arg, (size_t)dl) && c[dl] == '=')
            return hm_cli_usage(cmd, "--capacity: device '%.*s' given twice", dl, arg);
    }
    size_t l = strlen(capacity);
    int w = snprintf(capacity + l, size - l, "%s%.*s=%llu", l ? "," : "", dl, arg, (unsigned long long)v);
    if (w < 0 || (size_t)w >= size - l)
        return hm_cli_usage(cmd, "--capacity: the capacities exceed %zu characters", size - 1);
    return 0;
}

/* The report's "devices": one entry per device over all processes. */
static json_t *report_devices(const hm_recorder_t *rec, json_t *nodes)
{
    json_t *devs = json_array();
    for (int i = 0; i < hm_recorder_ndevices(rec); i++) {
        hm_record_device_t d;
        hm_recorder_device(rec, i, &d);
        json_array_append_new(devs, json_pack("{s:s,s:I,s:I,s:I,s:i,s:O}", "name", d.name, "capacity",
                                              (json_int_t)d.capacity, "peak", (json_int_t)d.peak, "at_exit",
                                              (json_int_t)d.at_exit, "processes", d.processes, "nodes",
                                              device_nodes(nodes, d.name, d.nodes)));
    }
    return devs;
}

/* The exit status after the report: the command's, unless it succeeded
 * and the report lacks records (a spool past HETMEM_SPOOL_MAX). */
static int run_status(const hm_record_result_t *res)
{
    int code = hm_recorder_exit_code(res->status), uncounted = res->spool_limit_uncounted;
    if (uncounted)
        fprintf(stderr, "hetmem: run: report incomplete: %d process%s reached the spool limit (%s) and ended before "
                "counting the records not written (killed?)\n", uncounted, uncounted == 1 ? "" : "es",
                hm__env_name(HM_ENV_SPOOL_MAX));
    if (res->spool_limit_reached && code == 0) {
        if (uncounted)
            return HM_EXIT_RUNTIME;
        return hm_cli_failf("run", "report incomplete: %llu placement records past the spool limit (%s) were not "
                            "written", (unsigned long long)res->unwritten, hm__env_name(HM_ENV_SPOOL_MAX));
    }
    return code;
}

static int run(const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t p;
    const char *arg, *place = NULL, *report = NULL;
    char capacity[1024] = "";
    uint64_t min_size = 64 * 1024, report_objects = 10000;
    int k, objects_given = 0, strict = 0, rc;
    hm_cli_init(&p, cmd, argc, argv, 1);
    while ((k = hm_cli_next(&p, &arg)) != -1) {
        switch (k) {
        case OPT_PLACEMENT: place = arg; break;
        case OPT_REPORT: report = arg; break;
        case OPT_REPORT_OBJECTS:
            if (hm_cli_u64(cmd, "--report-objects", arg, &report_objects))
                return HM_EXIT_USAGE;
            objects_given = 1;
            break;
        case OPT_CAPACITY:
            if ((rc = add_capacity(cmd, capacity, sizeof capacity, arg)))
                return rc;
            break;
        case OPT_MIN_SIZE:
            if (hm_cli_size(cmd, "--min-size", arg, &min_size))
                return HM_EXIT_USAGE;
            break;
        case OPT_STRICT: strict = 1; break;
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (!place)
        return hm_cli_usage(cmd, "--placement FILE is required");
    if (objects_given && !report)
        return hm_cli_usage(cmd, "--report-objects needs --report FILE (the table on stderr lists per site past %d objects)",
                            TABLE_OBJECTS);
    if (p.ind >= argc)
        return hm_cli_usage(cmd, "missing command to run (hetmem run --placement FILE -- CMD ARGS)");
    if (hm_cli_runtime_env() != 0)
        return HM_EXIT_RUNTIME;

    /* The recorder checks everything before the run: the placement, its
     * devices, the capacities' device names, the runtime, the program. */
    hm_record_opts_t o = {0};
    run_t ctx = {0};
    o.placement = place;
    o.capacity = capacity;
    o.min_size = min_size;
    o.on_message = on_message;
    o.on_placement = on_placement;
    o.ctx = &ctx;
    hm_recorder_t *rec;
    if ((rc = hm_recorder_open(&rec, &o, argv + p.ind)) < 0)
        return hm_cli_fail_subject("run", rc, place, argv[p.ind], (const char *)NULL);

    /* The report keeps the first report_objects placement events one by
     * one and every event in its site's totals, so that neither memory nor
     * the report grows with a long run's placements. The table on stderr
     * needs them one by one only while there are few. */
    ctx.keep = report ? report_objects : TABLE_OBJECTS;
    ctx.objs = json_array();
    ctx.nodes = json_object(); /* device -> its nodes, built once */
    ctx.sites = (sites_t){json_object(), NULL, 0, 0};
    hm_cli_env_settings("run");
    hm_record_result_t res;
    rc = hm_recorder_run(rec, &res);
    json_t *objs = ctx.objs, *devs = rc < 0 ? NULL : report_devices(rec, ctx.nodes), *unmatched = json_array();
    char *rules = hm__xstrdup(rc < 0 ? "" : hm_recorder_unmatched(rec)), abs_place[PATH_MAX];
    snprintf(abs_place, sizeof abs_place, "%s", rc < 0 ? "" : hm_recorder_placement(rec));
    if (rc < 0)
        hm_cli_fail_subject("run", rc, place, argv[p.ind], (const char *)NULL);
    hm_recorder_close(rec);
    json_decref(ctx.nodes);
    json_t *sa = sites_finish(&ctx.sites);
    if (rc < 0) {
        json_decref(objs);
        json_decref(sa);
        json_decref(unmatched);
        free(rules);
        return HM_EXIT_RUNTIME;
    }
    for (size_t at = 0; rules[at]; at += strcspn(rules + at, "\n") + 1)
        json_array_append_new(unmatched, json_stringn(rules + at, strcspn(rules + at, "\n")));
    uint64_t nobj = res.placements;
    if (report) {
        json_t *root = json_pack("{s:s,s:i,s:f,s:o,s:I,s:o,s:o,s:o}", "placement", abs_place, "exit_status",
                                 hm_recorder_exit_code(res.status), "wall_seconds", (double)res.wall_ns / 1e9,
                                 "objects", objs, "objects_omitted", (json_int_t)(nobj - json_array_size(objs)),
                                 "sites", sa, "devices", devs, "unmatched_rules", json_incref(unmatched));
        json_object_set_new(root, "unwritten_records", json_integer((json_int_t)res.unwritten));
        json_object_set_new(root, "spool_limit_reached", json_integer(res.spool_limit_reached));
        int wrc = json_dump_file(root, report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        int werr = errno;
        json_decref(root);
        if (wrc != 0) {
            json_decref(unmatched);
            free(rules);
            return hm_cli_failf(report, "cannot write the report: %s", strerror(werr));
        }
    } else {
        if (nobj <= TABLE_OBJECTS)
            print_objects(objs);
        else
            print_sites(sa, nobj);
        json_decref(objs);
        json_decref(sa);
        json_decref(devs);
    }
    size_t nun = json_array_size(unmatched);
    json_decref(unmatched);
    fprintf(stderr, "hetmem: run: %llu object placement%s, %llu spilled, %zu unmatched rule%s, %.3f s\n",
            (unsigned long long)nobj, nobj == 1 ? "" : "s", (unsigned long long)res.spilled, nun, nun == 1 ? "" : "s",
            (double)res.wall_ns / 1e9);
    if (hm_cli_unmatched(place, rules, strict) && hm_recorder_exit_code(res.status) == 0)
        return HM_EXIT_RUNTIME;
    /* The program ran, but not with the placement asked for. */
    if (ctx.failed && hm_recorder_exit_code(res.status) == 0)
        return hm_cli_failf("run", "%llu object placement%s could not be bound: the kernel refused mbind (the runtime's "
                            "line above says why); %s kept the pages' former policy",
                            (unsigned long long)ctx.failed, ctx.failed == 1 ? "" : "s", ctx.failed == 1 ? "it" : "they");
    /* The objects were placed, but the report lacks some: not a success. */
    return run_status(&res);
}

const hm_cmd_t hm_cmd_run = {
    "run", "Run a command with its objects bound per a placement",
    "-- CMD ARGS",
    "Devices in the placement name NUMA nodes: N, nodeN, tierN or a kind from\n"
    "'hetmem doctor' (ddr, hbm, cxl). An object that does not fit its device's\n"
    "capacity spills to the placement's default device. The report lists the\n"
    "first N placement events one by one and totals all of them per allocation\n"
    "site; without --report, stderr gets a table with one line per placement, or\n"
    "the totals per site when there are more than 50. The exit status is the\n"
    "command's, or 1 when it succeeded but an object could not be bound (the\n"
    "kernel refused mbind) or the report is incomplete. A placement the runtime\n"
    "cannot load or whose devices it cannot resolve stops the command before\n"
    "its main, with status 1.",
    opts, run};
