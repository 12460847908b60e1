/* hetmem run: run a command with its objects bound per a placement, and
 * report where each object went. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "hetmem/trace.h"
#include "common/env.h"
#include "hetmem/placement.h"
#include "os/os.h"
#include "record/record_int.h"

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

enum { PL_SPILLED = 1, PL_MOVED = 2, PL_PHASE = 4, PL_UNBOUND = 8, PL_GLOBAL = 16 };

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

/* NUMA nodes of device dev (NULL: left to first touch, no nodes), resolved
 * once per name: a long run places the same few devices many times. The
 * array is borrowed from cache. */
static json_t *device_nodes(json_t *cache, const hm_os_info_t *info, const char *dev)
{
    const char *key = dev ? dev : "";
    json_t *a = json_object_get(cache, key);
    if (!a) {
        uint64_t m;
        a = dev && hm__os_resolve_device(info, dev, &m) == 0 ? nodes_of(m) : json_array();
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
    uint64_t placements, bytes, bound_bytes, spilled, moved;
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
    int global = (flags & PL_GLOBAL) != 0;
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
    x->spilled += (flags & PL_SPILLED) != 0;
    x->moved += (flags & PL_MOVED) != 0;
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
        char note[32];
        snprintf(note, sizeof note, "%s%s%s", json_is_true(json_object_get(o, "global")) ? "global " : "",
                 json_is_true(json_object_get(o, "spilled")) ? "spilled " : "",
                 json_is_true(json_object_get(o, "moved")) ? "moved" : "");
        const char *src = json_string_value(json_object_get(o, "source"));
        fprintf(stderr, "%-18s %-10s %-12s %-10s %-10s %-22s %s\n", json_string_value(json_object_get(o, "site")),
                nm ? nm : "-", sz, json_string_value(json_object_get(o, "requested")), dv ? dv : "(unbound)",
                note[0] ? note : "-", src ? src : "-");
    }
}

static void print_sites(json_t *sites, unsigned long long nobj)
{
    fprintf(stderr, "hetmem: run: %llu object placements, more than %d: totals per site instead of one line per "
            "object (--report FILE lists them one by one)\n", nobj, TABLE_OBJECTS);
    fprintf(stderr, "%-18s %-10s %-10s %10s %-12s %-10s %-10s %8s %8s\n", "site", "name", "phase", "placements",
            "bytes", "requested", "device", "spilled", "moved");
    for (size_t i = 0; i < json_array_size(sites); i++) {
        json_t *o = json_array_get(sites, i);
        char sz[32];
        hm__fmt_size((uint64_t)json_integer_value(json_object_get(o, "bytes")), sz, sizeof sz);
        const char *nm = json_string_value(json_object_get(o, "name"));
        const char *ph = json_string_value(json_object_get(o, "phase"));
        const char *dv = json_string_value(json_object_get(o, "device"));
        fprintf(stderr, "%-18s %-10s %-10s %10lld %-12s %-10s %-10s %8lld %8lld%s\n",
                json_string_value(json_object_get(o, "site")), nm ? nm : "-", ph ? ph : "-",
                (long long)json_integer_value(json_object_get(o, "placements")), sz,
                json_string_value(json_object_get(o, "requested")), dv ? dv : "(unbound)",
                (long long)json_integer_value(json_object_get(o, "spilled")),
                (long long)json_integer_value(json_object_get(o, "moved")),
                json_is_true(json_object_get(o, "global")) ? " global" : "");
    }
}

static int run(const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t p;
    const char *arg, *place = NULL, *report = NULL;
    char capacity[1024] = "";
    uint64_t min_size = 64 * 1024, report_objects = 10000;
    int k, objects_given = 0, strict = 0;
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
        case OPT_CAPACITY: {
            const char *eq = strchr(arg, '=');
            uint64_t v;
            if (!eq || eq == arg)
                return hm_cli_usage(cmd, "--capacity: '%s' is not DEV=SIZE", arg);
            if (hm_cli_capacity(cmd, "--capacity", eq + 1, &v))
                return HM_EXIT_USAGE;
            int dl = (int)(eq - arg);
            if (memchr(arg, ',', (size_t)dl))
                return hm_cli_usage(cmd, "--capacity: device name '%.*s' holds a comma", dl, arg);
            /* As optimize does: a second value for one device would
             * silently replace the first. */
            for (const char *c = capacity; *c; c += strcspn(c, ",") + (c[strcspn(c, ",")] == ',')) {
                if (!strncmp(c, arg, (size_t)dl) && c[dl] == '=')
                    return hm_cli_usage(cmd, "--capacity: device '%.*s' given twice", dl, arg);
            }
            size_t l = strlen(capacity);
            int w = snprintf(capacity + l, sizeof capacity - l, "%s%.*s=%llu", l ? "," : "", dl, arg,
                             (unsigned long long)v);
            if (w < 0 || (size_t)w >= sizeof capacity - l)
                return hm_cli_usage(cmd, "--capacity: the capacities exceed %zu characters", sizeof capacity - 1);
            break;
        }
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
    if (hm_cli_spool_max() != 0)
        return HM_EXIT_RUNTIME;

    /* Validate everything before the run: the placement, its devices, the
     * capacities' device names. */
    hm_placement_t *pl;
    int rc = hm_placement_load(&pl, place, NULL, 0);
    if (rc)
        return hm_cli_fail(place, rc);
    hm_os_info_t *info = hm__xmalloc(sizeof *info);
    hm__os_probe(info);
    int ndev = 0;
    uint64_t mask[64] = {0};
    for (; ndev < 64 && hm_placement_device_name(pl, ndev); ndev++)
        if ((rc = hm__os_resolve_device(info, hm_placement_device_name(pl, ndev), &mask[ndev]))) {
            free(info);
            hm_placement_close(pl);
            return hm_cli_fail(place, rc);
        }
    free(info);
    char capcopy[1024];
    snprintf(capcopy, sizeof capcopy, "%s", capacity);
    for (char *save, *t = strtok_r(capcopy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        *strchr(t, '=') = '\0';
        int found = 0;
        for (int i = 0; i < ndev; i++)
            found |= !strcmp(hm_placement_device_name(pl, i), t);
        if (!found) {
            hm_placement_close(pl);
            return hm_cli_failf("run: --capacity", "%s: %s is not a device of %s", hm_strerror(HM_ENODEV), t, place);
        }
    }
    hm_placement_close(pl);

    char preload[4096], abs_place[PATH_MAX];
    if (hm__find_preload(preload, sizeof preload) != 0)
        return hm_cli_fail("run", HM_ENOTFOUND);
    /* No loader runs in a static program, so the runtime would silently
     * record nothing. */
    if (hm__exe_is_static(argv[p.ind]))
        return hm_cli_failf(argv[p.ind], "statically linked: the hetmem runtime (LD_PRELOAD) cannot load into it; "
                            "%s needs a dynamically linked program", "run");
    if (!realpath(place, abs_place))
        return hm_cli_failf(place, "%s", strerror(errno));
    char tmpl[4096];
    if (hm__spool_create(tmpl, sizeof tmpl) != 0)
        return hm_cli_failf("run", "%s", hm_errdetail());
    char e_spool[4200], e_place[PATH_MAX + 32], e_cap[1100], e_min[64];
    snprintf(e_spool, sizeof e_spool, "%s=%s", hm__env_name(HM_ENV_SPOOL), tmpl);
    snprintf(e_place, sizeof e_place, "%s=%s", hm__env_name(HM_ENV_PLACEMENT), abs_place);
    snprintf(e_cap, sizeof e_cap, "%s=%s", hm__env_name(HM_ENV_CAPACITY), capacity);
    snprintf(e_min, sizeof e_min, "%s=%llu", hm__env_name(HM_ENV_MIN_SIZE), (unsigned long long)min_size);
    char e_nob[64], e_noev[64];
    snprintf(e_nob, sizeof e_nob, "%s=", hm__env_name(HM_ENV_BACKEND));
    snprintf(e_noev, sizeof e_noev, "%s=0", hm__env_name(HM_ENV_EVENTS));
    char *env[] = {e_spool, e_place, e_cap, e_min, e_nob, e_noev, NULL};
    int status;
    uint64_t wall;
    rc = hm__launch(argv + p.ind, preload, env, &status, &wall);
    if (rc) {
        hm__spool_remove(tmpl);
        return hm_cli_fail("run", rc);
    }

    /* The report keeps the first report_objects placement events one by
     * one and every event in its site's totals, so that neither memory nor
     * the report grows with a long run's placements. The table on stderr
     * needs them one by one only while there are few. */
    uint64_t keep = report ? report_objects : TABLE_OBJECTS;
    hm__spool_set_t *s;
    json_t *objs = json_array(), *devs = json_array(), *unmatched = json_array();
    json_t *unmatched_n = json_object(); /* rule -> processes that did not match it */
    json_t *nodes = json_object();       /* device -> its nodes, resolved once */
    sites_t sites = {json_object(), NULL, 0, 0};
    json_t *srcs = json_object(); /* site id -> source chain, from the site records */
    unsigned long long nspill = 0, nobj = 0, unwritten = 0;
    int nproc = 0, nfull = 0, ncounted = 0;
    /* NUMA nodes of each device, so the report says where pages are. */
    info = hm__xmalloc(sizeof *info);
    hm__os_probe(info);
    if (hm__spool_open(&s, tmpl) == 0) {
        const hm__spool_rec_t *r;
        const char *pay;
        while (hm__spool_next(s, &r, &pay)) {
            char req[64] = "-", got[64] = "-", name[64] = "-", phase[64] = "-";
            switch (r->kind) {
            case HM_REC_SITE: {
                char site[32], src[512];
                snprintf(site, sizeof site, "0x%016llx", (unsigned long long)r->a);
                if (hm__frame_source(pay, src, sizeof src))
                    json_object_set_new(srcs, site, json_string(src));
                break;
            }
            case HM_SPOOL_PLACE: {
                unsigned long long bound = 0;
                sscanf(pay, "%63s %63s %63s %63s %llu", req, got, name, phase, &bound);
                char site[32];
                snprintf(site, sizeof site, "0x%016llx", (unsigned long long)r->c);
                json_t *nd = device_nodes(nodes, info, strcmp(got, "-") ? got : NULL);
                if (nobj < keep)
                    json_array_append_new(objs, json_pack("{s:I,s:I,s:s,s:s?,s:s?,s:s,s:s?,s:b,s:b,s:b,s:I,s:O}",
                                                          "addr", (json_int_t)r->a, "size", (json_int_t)r->b, "site",
                                                          site, "name", strcmp(name, "-") ? name : NULL, "phase",
                                                          strcmp(phase, "-") ? phase : NULL, "requested", req,
                                                          "device", strcmp(got, "-") ? got : NULL, "spilled",
                                                          (r->tid & PL_SPILLED) != 0, "moved",
                                                          (r->tid & PL_MOVED) != 0, "global",
                                                          (r->tid & PL_GLOBAL) != 0, "bound_bytes",
                                                          (json_int_t)bound, "nodes", nd));
                json_t *src = json_object_get(srcs, site);
                if (nobj < keep && src)
                    json_object_set(json_array_get(objs, json_array_size(objs) - 1), "source", src);
                site_t *x = site_add(&sites, site, name, phase, req, got, r->tid, nd, r->b, bound);
                if (src)
                    json_object_set(x->entry, "source", src);
                nobj++;
                nspill += (r->tid & PL_SPILLED) != 0;
                break;
            }
            case HM_SPOOL_PLACE + 4: {
                /* One record per device from every process that ran the
                 * placement (fork, exec, pipelines): one entry per device,
                 * with the largest peak and what all left charged. */
                json_t *d = NULL;
                for (size_t i = 0; i < json_array_size(devs) && !d; i++)
                    if (!strcmp(json_string_value(json_object_get(json_array_get(devs, i), "name")), pay))
                        d = json_array_get(devs, i);
                if (!d) {
                    json_array_append_new(devs, json_pack("{s:s,s:I,s:I,s:I,s:i}", "name", pay, "capacity",
                                                          (json_int_t)r->a, "peak", (json_int_t)r->b, "at_exit",
                                                          (json_int_t)r->c, "processes", 1));
                } else {
                    json_int_t pk = json_integer_value(json_object_get(d, "peak"));
                    json_object_set_new(d, "peak", json_integer(pk > (json_int_t)r->b ? pk : (json_int_t)r->b));
                    json_object_set_new(d, "at_exit",
                                        json_integer(json_integer_value(json_object_get(d, "at_exit")) +
                                                     (json_int_t)r->c));
                    json_object_set_new(d, "processes",
                                        json_integer(json_integer_value(json_object_get(d, "processes")) + 1));
                    nproc = nproc > (int)json_integer_value(json_object_get(d, "processes"))
                        ? nproc : (int)json_integer_value(json_object_get(d, "processes"));
                }
                if (nproc < 1)
                    nproc = 1;
                break;
            }
            case HM_SPOOL_PLACE + 3: {
                /* Each process lists the rules it did not match: count them. */
                char *copy = hm__xstrdup(pay);
                for (char *save, *t = strtok_r(copy, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
                    json_object_set_new(unmatched_n, t, json_integer(json_integer_value(json_object_get(unmatched_n, t)) + 1));
                free(copy);
                break;
            }
            case HM_SPOOL_ERROR:
                if (r->b == 2) { /* the mark; the count follows at the process's exit */
                    nfull++;
                    break;
                }
                fprintf(stderr, "hetmem: run: runtime: %s\n", pay);
                if (r->b == 1)
                    unwritten += r->a, ncounted++;
                break;
            default: break;
            }
        }
        hm__spool_close(s);
        /* A rule matched nothing only if it matched nothing in any process. */
        const char *rule;
        json_t *cnt;
        json_object_foreach(unmatched_n, rule, cnt)
            if (json_integer_value(cnt) >= nproc)
                json_array_append_new(unmatched, json_string(rule));
    }
    json_decref(unmatched_n);
    hm__spool_remove(tmpl);
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *o = json_array_get(devs, i);
        json_object_set(o, "nodes", device_nodes(nodes, info, json_string_value(json_object_get(o, "name"))));
    }
    free(info);
    json_decref(nodes);
    json_decref(srcs);
    json_t *sa = sites_finish(&sites);
    if (report) {
        json_t *root = json_pack("{s:s,s:i,s:f,s:o,s:I,s:o,s:o,s:o}", "placement", abs_place, "exit_status",
                                 hm__exit_code(status), "wall_seconds", (double)wall / 1e9, "objects", objs,
                                 "objects_omitted", (json_int_t)(nobj - json_array_size(objs)), "sites", sa,
                                 "devices", devs, "unmatched_rules", unmatched);
        json_object_set_new(root, "unwritten_records", json_integer((json_int_t)unwritten));
        json_object_set_new(root, "spool_limit_reached", json_integer(nfull));
        int wrc = json_dump_file(root, report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        int werr = errno;
        json_incref(unmatched); /* for the summary line */
        json_decref(root);
        if (wrc != 0) {
            json_decref(unmatched);
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
    fprintf(stderr, "hetmem: run: %llu object placement%s, %llu spilled, %zu unmatched rule%s, %.3f s\n", nobj,
            nobj == 1 ? "" : "s", nspill, json_array_size(unmatched), json_array_size(unmatched) == 1 ? "" : "s",
            (double)wall / 1e9);
    size_t len = 0;
    char *rules = NULL;
    for (size_t i = 0; i < json_array_size(unmatched); i++) {
        const char *t = json_string_value(json_array_get(unmatched, i));
        rules = hm__xrealloc(rules, len + strlen(t) + 2);
        len += (size_t)sprintf(rules + len, "%s\n", t);
    }
    json_decref(unmatched);
    if (hm_cli_unmatched(place, rules, strict) && hm__exit_code(status) == 0)
        return HM_EXIT_RUNTIME;
    /* The objects were placed, but the report lacks some: not a success. */
    if (nfull > ncounted)
        fprintf(stderr, "hetmem: run: report incomplete: %d process%s reached the spool limit (%s) and ended before "
                "counting the records not written (killed?)\n", nfull - ncounted, nfull - ncounted == 1 ? "" : "es",
                hm__env_name(HM_ENV_SPOOL_MAX));
    if (nfull && hm__exit_code(status) == 0) {
        if (nfull > ncounted)
            return HM_EXIT_RUNTIME;
        return hm_cli_failf("run", "report incomplete: %llu placement records past the spool limit (%s) were not "
                            "written", (unsigned long long)unwritten, hm__env_name(HM_ENV_SPOOL_MAX));
    }
    return hm__exit_code(status);
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
    "command's.",
    opts, run};
