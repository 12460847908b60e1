/* hetmem trace info|dump|objects: inspect trace files. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "common/objtab.h"
#include "hetmem/trace.h"

enum { OPT_JSON = 256, OPT_CSV, OPT_JSONL, OPT_LIMIT };

static const hm_cli_opt_t info_opts[] = {
    {OPT_JSON, "json", NULL, "machine-readable output (documented in docs/trace-format.md)", 0},
    {0}};
static const hm_cli_opt_t dump_opts[] = {
    {OPT_CSV, "csv", NULL, "comma-separated values with a header row", 0},
    {OPT_JSONL, "jsonl", NULL, "one JSON object per line", HM_OPT_ALT},
    {'n', "limit", "N", "stop after N records", 0},
    {0}};
static const hm_cli_opt_t objects_opts[] = {
    {OPT_JSON, "json", NULL, "machine-readable output", 0},
    {0}};

static int run_info(const hm_cmd_t *cmd, int argc, char **argv);
static int run_dump(const hm_cmd_t *cmd, int argc, char **argv);
static int run_objects(const hm_cmd_t *cmd, int argc, char **argv);

static const hm_cmd_t sub_info = {
    "trace info", "Summarize a trace: header, record counts, duration, objects, phases",
    "FILE", NULL, info_opts, run_info};
static const hm_cmd_t sub_dump = {
    "trace dump", "Print every record in time order",
    "FILE",
    "Times are in the trace's clock units; addresses, ips and site ids are hex.", dump_opts, run_dump};
static const hm_cmd_t sub_objects = {
    "trace objects", "Per allocation site: size, lifetime and the samples that hit it",
    "FILE",
    "A sample is attributed to the allocation live at its time whose address\n"
    "range holds the sampled address; samples outside every live allocation\n"
    "(stack, static data, untracked memory) are counted as unattributed;\n"
    "samples without a data address (a thread blocked in a system call, an\n"
    "instruction with no memory operand nearby) are counted apart. The\n"
    "where column is the site's first frame outside the allocator (operator\n"
    "new, malloc and their kin); --json gives every frame.",
    objects_opts, run_objects};
static const hm_cmd_t *const subs[] = {&sub_info, &sub_dump, &sub_objects};

static int run_trace(const hm_cmd_t *cmd, int argc, char **argv)
{
    if (argc < 2)
        return hm_cli_usage(cmd, "missing subcommand (info, dump or objects)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        printf("usage: hetmem trace %s\n\n%s\n\nsubcommands:\n", cmd->usage, cmd->summary);
        for (size_t i = 0; i < HM_ARRAY_LEN(subs); i++)
            printf("  %-8s %s\n", subs[i]->name + 6, subs[i]->summary);
        printf("\nRun 'hetmem trace <subcommand> --help' for its options.\n");
        return HM_EXIT_OK;
    }
    for (size_t i = 0; i < HM_ARRAY_LEN(subs); i++)
        if (strcmp(argv[1], subs[i]->name + 6) == 0)
            return subs[i]->run(subs[i], argc - 1, argv + 1);
    return hm_cli_usage(cmd, "unknown subcommand '%s'", argv[1]);
}

const hm_cmd_t hm_cmd_trace = {"trace", "Inspect trace files: info, dump, objects",
                               "info|dump|objects [options] FILE", NULL, NULL, run_trace};

/* ------------------------------------------------------------- helpers */

static const char *const kind_names[] = {"?", "sample", "alloc", "free", "phase_begin", "phase_end",
                                         "counter", "site", "name"};

static const char *kind_name(int k) { return k >= 1 && k <= 8 ? kind_names[k] : "?"; }

static const char *dsrc_name(uint16_t d, char *buf, size_t len)
{
    static const char *const lv[] = {"unknown", "L1", "L2", "L3", "LFB", "MEM", "REMOTE"};
    unsigned l = HM_DSRC_LEVEL(d);
    if (l == HM_DSRC_MEM)
        snprintf(buf, len, "MEM%u", HM_DSRC_DEVICE(d));
    else if (l < HM_ARRAY_LEN(lv))
        snprintf(buf, len, "%s", lv[l]);
    else
        snprintf(buf, len, "0x%x", d);
    return buf;
}

static void json_string_out(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void csv_string_out(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

/* Parses "[opts] FILE" for a subcommand, options before or after the file
 * as GNU tools take them. Returns -1 to continue, or an exit code. */
static int parse_file_args(const hm_cmd_t *cmd, int argc, char **argv, int *json, int *fmt,
                           uint64_t *limit, const char **file)
{
    hm_cli_t p;
    hm_cli_init(&p, cmd, argc, argv, 0);
    const char *arg, *ops[2];
    int k, nops = 0;
    for (;;) {
        if ((k = hm_cli_next(&p, &arg)) == -1) {
            int r = hm_cli_operand(&p, argv, argc, ops, &nops, 2);
            if (r < 0)
                return hm_cli_usage(cmd, "unexpected argument '%s'", argv[p.ind]);
            if (r == 0)
                break;
            continue;
        }
        switch (k) {
        case HM_CLI_HELP: return HM_EXIT_OK;
        case HM_CLI_ERROR: return HM_EXIT_USAGE;
        case OPT_JSON: *json = 1; break;
        case OPT_CSV:
        case OPT_JSONL:
            if (*fmt && *fmt != k)
                return hm_cli_usage(cmd, "--csv and --jsonl are exclusive");
            *fmt = k;
            break;
        case 'n':
            if (hm_cli_u64(cmd, "--limit", arg, limit))
                return HM_EXIT_USAGE;
            break;
        default: return hm_cli_usage(cmd, "unexpected option");
        }
    }
    if (nops == 0)
        return hm_cli_usage(cmd, "missing FILE");
    if (nops > 1)
        return hm_cli_usage(cmd, "unexpected argument '%s'", ops[1]);
    *file = ops[0];
    return -1;
}

static uint64_t rec_time(const hm_record_t *r)
{
    switch (r->kind) {
    case HM_REC_SAMPLE: return r->u.sample.time;
    case HM_REC_ALLOC: case HM_REC_FREE: return r->u.alloc.time;
    case HM_REC_PHASE_BEGIN: case HM_REC_PHASE_END: return r->u.phase.time;
    case HM_REC_COUNTER: return r->u.counter.time;
    case HM_REC_NAME: return r->u.name.time;
    default: return 0;
    }
}

/* ------------------------------------------------------------- phases */

typedef struct {
    char *name;
    uint32_t id;
    uint64_t count, total;
} phase_t;

typedef struct {
    uint32_t id, tid, depth;
    uint64_t begin;
} open_phase_t;

typedef struct {
    phase_t *v;
    size_t n;
    open_phase_t *open;
    size_t nopen;
} phases_t;

static phase_t *phase_get(phases_t *ps, uint32_t id, const char *name)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->v[i].id == id)
            return &ps->v[i];
    ps->v = hm__xrealloc(ps->v, (ps->n + 1) * sizeof *ps->v);
    ps->v[ps->n] = (phase_t){hm__xstrdup(name), id, 0, 0};
    return &ps->v[ps->n++];
}

/* Time inside a phase counts once per thread, from its outermost begin to
 * the matching end; an end without a begin is ignored. */
static void phase_event(phases_t *ps, const hm_phase_t *e, int begin)
{
    phase_t *ph = phase_get(ps, e->id, e->name);
    open_phase_t *o = NULL;
    for (size_t i = 0; i < ps->nopen; i++)
        if (ps->open[i].id == e->id && ps->open[i].tid == e->tid)
            o = &ps->open[i];
    if (begin) {
        ph->count++;
        if (!o) {
            ps->open = hm__xrealloc(ps->open, (ps->nopen + 1) * sizeof *ps->open);
            o = &ps->open[ps->nopen++];
            *o = (open_phase_t){e->id, e->tid, 0, e->time};
        }
        if (o->depth++ == 0)
            o->begin = e->time;
    } else if (o && o->depth > 0 && --o->depth == 0) {
        ph->total += e->time - o->begin;
    }
}

static void phases_free(phases_t *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->v[i].name);
    free(ps->v);
    free(ps->open);
}

/* ------------------------------------------------------------- info */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int run_info(const hm_cmd_t *cmd, int argc, char **argv)
{
    int json = 0, fmt = 0;
    uint64_t limit = 0;
    const char *file;
    int rc = parse_file_args(cmd, argc, argv, &json, &fmt, &limit, &file);
    if (rc >= 0)
        return rc;
    hm_trace_t *t;
    if ((rc = hm_trace_open(&t, file)) < 0)
        return hm_cli_fail(file, rc);
    const hm_trace_meta_t *m = hm_trace_meta(t);
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);

    /* Events only: phases, allocation bytes, distinct sites. */
    phases_t ps = {0};
    uint64_t alloc_bytes = 0, *sites = NULL;
    size_t nsites = 0, capsites = 0;
    for (uint32_t b = 0; b < hm_trace_nblocks(t); b++) {
        /* The block's events without decoding its samples. */
        hm_event_list_t el;
        if ((rc = hm_trace_batch_begin(t, b, &el)) < 0)
            break;
        for (uint32_t i = 0; i < el.n; i++) {
            const hm_record_t *r = &el.rec[i];
            if (r->kind == HM_REC_PHASE_BEGIN || r->kind == HM_REC_PHASE_END) {
                phase_event(&ps, &r->u.phase, r->kind == HM_REC_PHASE_BEGIN);
            } else if (r->kind == HM_REC_ALLOC) {
                alloc_bytes += r->u.alloc.size;
                if (nsites == capsites) {
                    capsites = capsites ? capsites * 2 : 64;
                    sites = hm__xrealloc(sites, capsites * sizeof *sites);
                }
                sites[nsites++] = r->u.alloc.site;
            }
        }
    }
    if (rc < 0) {
        rc = hm_cli_fail(file, rc);
        goto out;
    }
    if (nsites) /* qsort wants a valid pointer even for 0 elements */
        qsort(sites, nsites, sizeof *sites, cmp_u64);
    size_t distinct = 0;
    for (size_t i = 0; i < nsites; i++)
        distinct += i == 0 || sites[i] != sites[i - 1];
    double ns_unit = m->clock_ns_per_unit;
    double span_s = st.last_time >= st.first_time ? (double)(st.last_time - st.first_time) * ns_unit / 1e9 : 0;
    double dur_s = st.has_end ? (double)st.end.total_time * ns_unit / 1e9 : span_s;

    if (json) {
        json_t *o = json_object();
        json_t *hdr = NULL;
        hm__json_load_string("header", hm_trace_header_json(t), &hdr);
        json_object_set_new(o, "file", json_string(file));
        json_object_set_new(o, "format_version", json_integer(HM_TRACE_VERSION));
        json_object_set_new(o, "bytes", json_integer((json_int_t)st.file_bytes));
        json_object_set_new(o, "blocks", json_integer(st.blocks));
        json_object_set_new(o, "header", hdr ? hdr : json_null());
        json_t *rec = json_object();
        for (int k = 1; k <= 8; k++)
            json_object_set_new(rec, kind_names[k], json_integer((json_int_t)st.records[k]));
        json_object_set_new(o, "records", rec);
        json_object_set_new(o, "samples", json_integer((json_int_t)st.records[HM_REC_SAMPLE]));
        json_object_set_new(o, "loads", json_integer((json_int_t)st.loads));
        json_object_set_new(o, "stores", json_integer((json_int_t)st.stores));
        json_object_set_new(o, "allocs", json_integer((json_int_t)st.records[HM_REC_ALLOC]));
        json_object_set_new(o, "frees", json_integer((json_int_t)st.records[HM_REC_FREE]));
        json_object_set_new(o, "alloc_bytes", json_integer((json_int_t)alloc_bytes));
        json_object_set_new(o, "objects", json_integer((json_int_t)distinct));
        json_t *pa = json_array();
        for (size_t i = 0; i < ps.n; i++) {
            json_t *p = json_object();
            json_object_set_new(p, "name", json_string(ps.v[i].name));
            json_object_set_new(p, "id", json_integer(ps.v[i].id));
            json_object_set_new(p, "count", json_integer((json_int_t)ps.v[i].count));
            json_object_set_new(p, "time_s", json_real((double)ps.v[i].total * ns_unit / 1e9));
            json_array_append_new(pa, p);
        }
        json_object_set_new(o, "phases", pa);
        json_object_set_new(o, "duration_s", json_real(dur_s));
        json_object_set_new(o, "first_time", json_integer((json_int_t)st.first_time));
        json_object_set_new(o, "last_time", json_integer((json_int_t)st.last_time));
        json_object_set_new(o, "exit_status", st.has_end ? json_integer(st.end.exit_status) : json_null());
        json_object_set_new(o, "exit_code", st.has_end ? json_integer(WIFSIGNALED(st.end.exit_status)
                                                                            ? 128 + WTERMSIG(st.end.exit_status)
                                                                            : WEXITSTATUS(st.end.exit_status))
                                                       : json_null());
        json_object_set_new(o, "reordered", json_integer((json_int_t)st.reordered));
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        puts(s);
        free(s);
        json_decref(o);
    } else {
        char sz[32], ab[32];
        printf("%-10s %s (%s, format v%d, %u blocks)\n", "file", file, hm__fmt_size(st.file_bytes, sz, sizeof sz),
               HM_TRACE_VERSION, st.blocks);
        printf("%-10s %s\n", "producer", m->producer ? m->producer : "-");
        printf("%-10s %s, event %s, period %" PRIu64 "\n", "backend", m->backend ? m->backend : "-",
               m->event ? m->event : "-", m->period);
        printf("%-10s %s (%g ns/unit)\n", "clock", m->clock ? m->clock : "-", ns_unit);
        printf("%-10s %s\n", "device", m->device ? m->device : "-");
        printf("%-10s", "command");
        for (const char *const *a = m->argv; a && *a; a++)
            printf(" %s", *a);
        printf("%s\n", m->argv && m->argv[0] ? "" : " -");
        printf("%-10s %.6f s", "duration", dur_s);
        /* The end record holds a wait(2) status: say what it means. */
        int ws = st.end.exit_status;
        if (!st.has_end)
            printf(" (truncated: no end record)\n");
        else if (WIFSIGNALED(ws))
            printf(" (killed by signal %d, %s)\n", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
        else
            printf(" (exit %d)\n", WEXITSTATUS(ws));
        printf("%-10s %" PRIu64 " (%" PRIu64 " loads, %" PRIu64 " stores)\n", "samples",
               st.records[HM_REC_SAMPLE], st.loads, st.stores);
        printf("%-10s %" PRIu64 " allocations (%s), %" PRIu64 " frees, %zu allocation sites", "objects",
               st.records[HM_REC_ALLOC], hm__fmt_size(alloc_bytes, ab, sizeof ab), st.records[HM_REC_FREE],
               distinct);
        if (m->min_size)
            printf(" (tracked from %s)", hm__fmt_size(m->min_size, ab, sizeof ab));
        printf("\n");
        printf("%-10s", "records");
        for (int k = 1; k <= 8; k++)
            printf(" %s %" PRIu64 "%s", kind_names[k], st.records[k], k < 8 ? "," : "\n");
        if (st.reordered)
            printf("%-10s %" PRIu64 " records arrived late and were clamped\n", "reordered", st.reordered);
        if (ps.n) {
            printf("\n%-24s %6s %10s %12s\n", "phase", "id", "entered", "time (s)");
            for (size_t i = 0; i < ps.n; i++)
                printf("%-24s %6u %10" PRIu64 " %12.6f\n", ps.v[i].name[0] ? ps.v[i].name : "(unnamed)",
                       ps.v[i].id, ps.v[i].count, (double)ps.v[i].total * ns_unit / 1e9);
        } else {
            printf("%-10s none\n", "phases");
        }
    }
    rc = HM_EXIT_OK;
out:
    free(sites);
    phases_free(&ps);
    hm_trace_close(t);
    return rc;
}

/* ------------------------------------------------------------- dump */

static void dump_human(const hm_record_t *r)
{
    char ds[16];
    if (r->kind == HM_REC_SITE) /* sites carry no time */
        printf("%20s  %-11s ", "-", kind_name(r->kind));
    else
        printf("%20" PRIu64 "  %-11s ", rec_time(r), kind_name(r->kind));
    switch (r->kind) {
    case HM_REC_SAMPLE: {
        const hm_sample_t *s = &r->u.sample;
        printf("tid %-7u 0x%016" PRIx64 "  %-5s ip 0x%" PRIx64 " weight %u src %s\n", s->tid, s->addr,
               s->access == HM_ACCESS_STORE ? "store" : "load", s->ip, s->weight,
               dsrc_name(s->dsrc, ds, sizeof ds));
        break;
    }
    case HM_REC_ALLOC:
        printf("tid %-7u 0x%016" PRIx64 "  size %" PRIu64 " site 0x%016" PRIx64 "\n", r->u.alloc.tid,
               r->u.alloc.addr, r->u.alloc.size, r->u.alloc.site);
        break;
    case HM_REC_FREE:
        printf("tid %-7u 0x%016" PRIx64 "\n", r->u.alloc.tid, r->u.alloc.addr);
        break;
    case HM_REC_PHASE_BEGIN:
    case HM_REC_PHASE_END:
        printf("tid %-7u %-18s  id %u name %s\n", r->u.phase.tid, "", r->u.phase.id, r->u.phase.name);
        break;
    case HM_REC_COUNTER:
        printf("tid %-7u %-18s  counter %u value %" PRIu64 "\n", r->u.counter.tid, "", r->u.counter.counter,
               r->u.counter.value);
        break;
    case HM_REC_SITE: {
        printf("%-11s %-18s  site 0x%016" PRIx64 " ", "", "", r->u.site.site);
        json_string_out(stdout, r->u.site.frames);
        putchar('\n');
        break;
    }
    case HM_REC_NAME:
        printf("%-11s 0x%016" PRIx64 "  name %s\n", "", r->u.name.addr, r->u.name.name);
        break;
    }
}

static void dump_csv(const hm_record_t *r)
{
    /* time,kind,tid,addr,ip,size,site,weight,dsrc,access,id,value,name */
    if (r->kind == HM_REC_SITE)
        printf(",%s,", kind_name(r->kind));
    else
        printf("%" PRIu64 ",%s,", rec_time(r), kind_name(r->kind));
    switch (r->kind) {
    case HM_REC_SAMPLE: {
        const hm_sample_t *s = &r->u.sample;
        printf("%u,0x%" PRIx64 ",0x%" PRIx64 ",,,%u,%u,%s,,,\n", s->tid, s->addr, s->ip, s->weight, s->dsrc,
               s->access == HM_ACCESS_STORE ? "store" : "load");
        break;
    }
    case HM_REC_ALLOC:
        printf("%u,0x%" PRIx64 ",,%" PRIu64 ",0x%016" PRIx64 ",,,,,,\n", r->u.alloc.tid, r->u.alloc.addr,
               r->u.alloc.size, r->u.alloc.site);
        break;
    case HM_REC_FREE:
        printf("%u,0x%" PRIx64 ",,,,,,,,,\n", r->u.alloc.tid, r->u.alloc.addr);
        break;
    case HM_REC_PHASE_BEGIN:
    case HM_REC_PHASE_END:
        printf("%u,,,,,,,,%u,,", r->u.phase.tid, r->u.phase.id);
        csv_string_out(stdout, r->u.phase.name);
        putchar('\n');
        break;
    case HM_REC_COUNTER:
        printf("%u,,,,,,,,%u,%" PRIu64 ",\n", r->u.counter.tid, r->u.counter.counter, r->u.counter.value);
        break;
    case HM_REC_SITE:
        printf(",,,,0x%016" PRIx64 ",,,,,,", r->u.site.site);
        csv_string_out(stdout, r->u.site.frames);
        putchar('\n');
        break;
    case HM_REC_NAME:
        printf(",0x%" PRIx64 ",,,,,,,,,", r->u.name.addr);
        csv_string_out(stdout, r->u.name.name);
        putchar('\n');
        break;
    }
}

static void dump_jsonl(const hm_record_t *r)
{
    printf("{\"kind\":\"%s\"", kind_name(r->kind));
    if (r->kind != HM_REC_SITE)
        printf(",\"time\":%" PRIu64, rec_time(r));
    switch (r->kind) {
    case HM_REC_SAMPLE: {
        const hm_sample_t *s = &r->u.sample;
        printf(",\"tid\":%u,\"addr\":\"0x%" PRIx64 "\",\"ip\":\"0x%" PRIx64 "\",\"weight\":%u,\"dsrc\":%u,"
               "\"access\":\"%s\"}\n",
               s->tid, s->addr, s->ip, s->weight, s->dsrc, s->access == HM_ACCESS_STORE ? "store" : "load");
        return;
    }
    case HM_REC_ALLOC:
        printf(",\"tid\":%u,\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"site\":\"0x%016" PRIx64 "\"}\n",
               r->u.alloc.tid, r->u.alloc.addr, r->u.alloc.size, r->u.alloc.site);
        return;
    case HM_REC_FREE:
        printf(",\"tid\":%u,\"addr\":\"0x%" PRIx64 "\"}\n", r->u.alloc.tid, r->u.alloc.addr);
        return;
    case HM_REC_PHASE_BEGIN:
    case HM_REC_PHASE_END:
        printf(",\"tid\":%u,\"id\":%u,\"name\":", r->u.phase.tid, r->u.phase.id);
        json_string_out(stdout, r->u.phase.name);
        break;
    case HM_REC_COUNTER:
        printf(",\"tid\":%u,\"counter\":%u,\"value\":%" PRIu64, r->u.counter.tid, r->u.counter.counter,
               r->u.counter.value);
        break;
    case HM_REC_SITE:
        printf(",\"site\":\"0x%016" PRIx64 "\",\"frames\":", r->u.site.site);
        json_string_out(stdout, r->u.site.frames);
        break;
    case HM_REC_NAME:
        printf(",\"addr\":\"0x%" PRIx64 "\",\"name\":", r->u.name.addr);
        json_string_out(stdout, r->u.name.name);
        break;
    }
    printf("}\n");
}

static int run_dump(const hm_cmd_t *cmd, int argc, char **argv)
{
    int json = 0, fmt = 0;
    uint64_t limit = UINT64_MAX;
    const char *file;
    int rc = parse_file_args(cmd, argc, argv, &json, &fmt, &limit, &file);
    if (rc >= 0)
        return rc;
    hm_trace_t *t;
    if ((rc = hm_trace_open(&t, file)) < 0)
        return hm_cli_fail(file, rc);
    void (*out)(const hm_record_t *) = fmt == OPT_CSV ? dump_csv : fmt == OPT_JSONL ? dump_jsonl : dump_human;
    if (fmt == OPT_CSV)
        printf("time,kind,tid,addr,ip,size,site,weight,dsrc,access,id,value,name\n");
    else if (!fmt)
        printf("%20s  %-11s %-11s %-18s  %s\n", "time", "kind", "tid", "address", "details");
    hm_record_t r;
    uint64_t n = 0;
    while (n < limit && (rc = hm_trace_next(t, &r)) == 1) {
        out(&r);
        n++;
    }
    hm_trace_close(t);
    if (rc < 0) {
        fflush(stdout);
        return hm_cli_fail(file, rc);
    }
    if (fflush(stdout) != 0)
        return hm_cli_failf(file, "cannot write the output");
    return HM_EXIT_OK;
}

/* ------------------------------------------------------------- objects */

typedef struct {
    uint64_t site, size, t_alloc, t_free;
    uint64_t samples, loads, stores;
    const char *name; /* index into names, owned by the names table */
} alloc_rec_t;

/* Live allocations in the shared interval table: address range -> index
 * into a (every allocation ever made, for the per-site figures). */
typedef struct {
    alloc_rec_t *a;
    size_t na, capa;
    hm_objtab_t *live;
    const hm_objtab_entry_t *hit; /* last entry that matched: samples cluster */
    char **names;
    size_t nnames;
    uint64_t unattributed, noaddr, unmatched_frees;
} objs_t;

static void obj_alloc(objs_t *o, const hm_alloc_t *a)
{
    if (o->na == o->capa) {
        o->capa = o->capa ? o->capa * 2 : 256;
        o->a = hm__xrealloc(o->a, o->capa * sizeof *o->a);
    }
    o->a[o->na] = (alloc_rec_t){a->site, a->size, a->time, UINT64_MAX, 0, 0, 0, NULL};
    /* A new allocation over a live one means its free was not seen: end
     * the old one here rather than attribute samples twice. */
    const hm_objtab_entry_t *e;
    while ((e = hm__objtab_overlap(o->live, a->addr, a->size)) != NULL) {
        o->a[e->id].t_free = a->time;
        hm__objtab_remove(o->live, e->addr, NULL);
    }
    if (hm__objtab_insert(o->live, a->addr, a->size, o->na) != 0)
        hm__oom(sizeof(hm_objtab_entry_t));
    o->hit = NULL;
    o->na++;
}

static void obj_free(objs_t *o, uint64_t time, uint64_t addr)
{
    hm_objtab_entry_t e;
    if (hm__objtab_remove(o->live, addr, &e) == 0)
        o->a[e.id].t_free = time;
    else
        o->unmatched_frees++;
    o->hit = NULL;
}

/* Allocation holding addr, or NULL. */
static alloc_rec_t *obj_lookup(objs_t *o, uint64_t addr)
{
    const hm_objtab_entry_t *e = o->hit;
    if (!e || addr < e->addr || addr - e->addr >= (e->size ? e->size : 1))
        e = o->hit = hm__objtab_find(o->live, addr);
    return e ? &o->a[e->id] : NULL;
}

static void obj_name(objs_t *o, uint64_t addr, const char *name)
{
    alloc_rec_t *a = obj_lookup(o, addr);
    if (!a)
        return;
    o->names = hm__xrealloc(o->names, (o->nnames + 1) * sizeof *o->names);
    o->names[o->nnames] = hm__xstrdup(name);
    a->name = o->names[o->nnames++];
}

typedef struct {
    uint64_t site, allocs, bytes, max_size, lifetime, samples, loads, stores;
    const char *name, *frames;
} site_row_t;

static int cmp_alloc_site(const void *a, const void *b)
{
    const alloc_rec_t *x = a, *y = b;
    return x->site < y->site ? -1 : x->site > y->site;
}

static int cmp_row(const void *a, const void *b)
{
    const site_row_t *x = a, *y = b;
    if (x->samples != y->samples)
        return x->samples > y->samples ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

typedef struct {
    uint64_t site;
    char *frames;
} site_frames_t;


/* Whether a site frame ("module+0xoff [symbol]") is inside the allocator
 * rather than the program: operator new and new[] in all their variants,
 * and the C allocation family. */
static int alloc_frame(const char *f, size_t len)
{
    const char *sp = memchr(f, ' ', len);
    if (!sp)
        return 0;
    const char *sym = sp + 1;
    size_t n = len - (size_t)(sym - f);
    static const char *const names[] = {"malloc", "calloc", "realloc", "reallocarray", "aligned_alloc",
                                        "posix_memalign", "memalign", "valloc", "pvalloc", "strdup", "strndup"};
    if (n >= 4 && (!strncmp(sym, "_Znw", 4) || !strncmp(sym, "_Zna", 4)))
        return 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && !strncmp(sym, names[i], n))
            return 1;
    return 0;
}

/* The first frame of a site that is the program's own: C++ sites would
 * otherwise all read "libstdc++.so.6+0x... _Znwm". */
static const char *user_frame(const char *frames)
{
    for (const char *f = frames; *f;) {
        size_t l = strcspn(f, "\n");
        if (!alloc_frame(f, l))
            return f;
        if (!f[l])
            break;
        f += l + 1;
    }
    return frames;
}

/* Applies one non-sample record to the object table. */
static void obj_event(objs_t *o, const hm_record_t *r, site_frames_t **sf, size_t *nsf)
{
    switch (r->kind) {
    case HM_REC_ALLOC: obj_alloc(o, &r->u.alloc); break;
    case HM_REC_FREE: obj_free(o, r->u.alloc.time, r->u.alloc.addr); break;
    case HM_REC_NAME: obj_name(o, r->u.name.addr, r->u.name.name); break;
    case HM_REC_SITE:
        *sf = hm__xrealloc(*sf, (*nsf + 1) * sizeof **sf);
        (*sf)[(*nsf)++] = (site_frames_t){r->u.site.site, hm__xstrdup(r->u.site.frames)};
        break;
    default: break;
    }
}

/* Every record of @p t into @p o: the samples a batch at a time (only
 * their address and access kind are read), merged with the block's events
 * by time, events first at equal times as hm_trace_next() orders them.
 * *samples counts the samples. 0 or a negative error. */
static int objects_scan(hm_trace_t *t, objs_t *o, site_frames_t **sf, size_t *nsf, uint64_t *samples)
{
    int rc = 0;
    for (uint32_t b = 0; b < hm_trace_nblocks(t) && rc >= 0; b++) {
        hm_event_list_t el;
        hm_sample_batch_t bt;
        uint32_t ei = 0;
        if ((rc = hm_trace_batch_begin(t, b, &el)) < 0)
            break;
        for (;;) {
            int got = rc = hm_trace_batch_next(t, &bt);
            if (got < 0)
                break;
            for (int i = 0; i < got; i++) {
                for (; ei < el.n && el.time[ei] <= bt.time[i]; ei++)
                    obj_event(o, &el.rec[ei], sf, nsf);
                (*samples)++;
                if (!bt.addr[i]) {
                    o->noaddr++; /* no data access resolved (blocked, or no memory operand) */
                    continue;
                }
                alloc_rec_t *a = obj_lookup(o, bt.addr[i]);
                if (!a) {
                    o->unattributed++;
                    continue;
                }
                a->samples++;
                if (bt.access[i] == HM_ACCESS_STORE)
                    a->stores++;
                else
                    a->loads++;
            }
            if (got == 0) {
                for (; ei < el.n; ei++) /* the events after the block's last sample */
                    obj_event(o, &el.rec[ei], sf, nsf);
                break;
            }
        }
    }
    return rc < 0 ? rc : 0;
}

/* The allocations aggregated per site (caller frees), sorted as the
 * table lists them; *nrows gets their number. A live allocation's
 * lifetime ends at @p end_time. */
static site_row_t *objects_rows(objs_t *o, const site_frames_t *sf, size_t nsf, uint64_t end_time, size_t *nrows)
{
    size_t n = 0;
    if (o->na)
        qsort(o->a, o->na, sizeof *o->a, cmp_alloc_site);
    site_row_t *rows = hm__xcalloc(o->na ? o->na : 1, sizeof *rows);
    for (size_t i = 0; i < o->na; i++) {
        const alloc_rec_t *a = &o->a[i];
        if (n == 0 || rows[n - 1].site != a->site)
            rows[n++] = (site_row_t){.site = a->site};
        site_row_t *w = &rows[n - 1];
        w->allocs++;
        w->bytes += a->size;
        w->max_size = a->size > w->max_size ? a->size : w->max_size;
        uint64_t tf = a->t_free == UINT64_MAX ? end_time : a->t_free;
        w->lifetime += tf > a->t_alloc ? tf - a->t_alloc : 0;
        w->samples += a->samples;
        w->loads += a->loads;
        w->stores += a->stores;
        if (!w->name && a->name)
            w->name = a->name;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < nsf; k++)
            if (sf[k].site == rows[i].site) {
                rows[i].frames = sf[k].frames;
                break;
            }
    qsort(rows, n, sizeof *rows, cmp_row);
    *nrows = n;
    return rows;
}

static void objects_json(const objs_t *o, const site_row_t *rows, size_t nrows, uint64_t samples, double ns_unit)
{
    json_t *jo = json_object(), *arr = json_array();
    for (size_t i = 0; i < nrows; i++) {
        const site_row_t *w = &rows[i];
        char hex[24];
        snprintf(hex, sizeof hex, "0x%016" PRIx64, w->site);
        json_t *e = json_object();
        json_object_set_new(e, "site", json_string(hex));
        json_object_set_new(e, "name", w->name ? json_string(w->name) : json_null());
        json_object_set_new(e, "allocs", json_integer((json_int_t)w->allocs));
        json_object_set_new(e, "bytes", json_integer((json_int_t)w->bytes));
        json_object_set_new(e, "max_bytes", json_integer((json_int_t)w->max_size));
        json_object_set_new(e, "mean_lifetime_s", json_real((double)w->lifetime / (double)w->allocs * ns_unit / 1e9));
        json_object_set_new(e, "samples", json_integer((json_int_t)w->samples));
        json_object_set_new(e, "loads", json_integer((json_int_t)w->loads));
        json_object_set_new(e, "stores", json_integer((json_int_t)w->stores));
        json_object_set_new(e, "frames", w->frames ? json_string(w->frames) : json_null());
        char src[512];
        const char *sc = w->frames ? hm__frame_source(user_frame(w->frames), src, sizeof src) : NULL;
        json_object_set_new(e, "source", sc ? json_string(sc) : json_null());
        json_array_append_new(arr, e);
    }
    json_object_set_new(jo, "objects", arr);
    json_object_set_new(jo, "samples", json_integer((json_int_t)samples));
    json_object_set_new(jo, "unattributed_samples", json_integer((json_int_t)o->unattributed));
    json_object_set_new(jo, "no_address_samples", json_integer((json_int_t)o->noaddr));
    json_object_set_new(jo, "unmatched_frees", json_integer((json_int_t)o->unmatched_frees));
    char *s = json_dumps(jo, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    puts(s);
    free(s);
    json_decref(jo);
}

static void objects_table(const objs_t *o, const site_row_t *rows, size_t nrows, uint64_t samples, double ns_unit)
{
    printf("%-18s %-12s %7s %10s %10s %12s %10s %10s %10s %6s  %s\n", "site", "name", "allocs", "bytes",
           "max size", "lifetime s", "samples", "loads", "stores", "%", "where");
    for (size_t i = 0; i < nrows; i++) {
        const site_row_t *w = &rows[i];
        char b1[32], b2[32], where[96] = "-";
        if (w->frames) {
            const char *f = user_frame(w->frames);
            size_t l = strcspn(f, "\n");
            snprintf(where, sizeof where, "%.*s", (int)(l < 95 ? l : 95), f);
        }
        printf("0x%016" PRIx64 " %-12.12s %7" PRIu64 " %10s %10s %12.6f %10" PRIu64 " %10" PRIu64
               " %10" PRIu64 " %6.2f  %s\n",
               w->site, w->name ? w->name : "-", w->allocs, hm__fmt_size(w->bytes, b1, sizeof b1),
               hm__fmt_size(w->max_size, b2, sizeof b2), (double)w->lifetime / (double)w->allocs * ns_unit / 1e9,
               w->samples, w->loads, w->stores, samples ? 100.0 * (double)w->samples / (double)samples : 0.0, where);
    }
    printf("%-18s %-12s %7s %10s %10s %12s %10" PRIu64 " %10s %10s %6.2f  %s\n", "(unattributed)", "", "", "", "",
           "", o->unattributed, "", "", samples ? 100.0 * (double)o->unattributed / (double)samples : 0.0,
           "stack, static data or untracked memory");
    printf("%-18s %-12s %7s %10s %10s %12s %10" PRIu64 " %10s %10s %6.2f  %s\n", "(no address)", "", "", "", "", "",
           o->noaddr, "", "", samples ? 100.0 * (double)o->noaddr / (double)samples : 0.0,
           "no data address resolved (blocked in a call, or no memory operand)");
}

static int run_objects(const hm_cmd_t *cmd, int argc, char **argv)
{
    int json = 0, fmt = 0;
    uint64_t limit = 0;
    const char *file;
    int rc = parse_file_args(cmd, argc, argv, &json, &fmt, &limit, &file);
    if (rc >= 0)
        return rc;
    hm_trace_t *t;
    if ((rc = hm_trace_open(&t, file)) < 0)
        return hm_cli_fail(file, rc);
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    objs_t o = {0};
    if ((rc = hm__objtab_open(&o.live)) < 0) {
        hm_trace_close(t);
        return hm_cli_fail(file, rc);
    }
    site_frames_t *sf = NULL;
    size_t nsf = 0, nrows = 0;
    uint64_t samples = 0;
    if ((rc = objects_scan(t, &o, &sf, &nsf, &samples)) < 0) {
        rc = hm_cli_fail(file, rc);
    } else {
        site_row_t *rows = objects_rows(&o, sf, nsf, st.last_time, &nrows);
        double ns_unit = hm_trace_meta(t)->clock_ns_per_unit;
        if (json)
            objects_json(&o, rows, nrows, samples, ns_unit);
        else
            objects_table(&o, rows, nrows, samples, ns_unit);
        free(rows);
        rc = HM_EXIT_OK;
    }
    for (size_t k = 0; k < nsf; k++)
        free(sf[k].frames);
    free(sf);
    for (size_t k = 0; k < o.nnames; k++)
        free(o.names[k]);
    free(o.names);
    free(o.a);
    hm__objtab_close(o.live);
    hm_trace_close(t);
    return rc;
}
