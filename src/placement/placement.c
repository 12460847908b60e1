/* Placement files: parse, validate, match objects (docs/placement-format.md). */
#include "hetmem/placement.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "placement/placement_int.h"

/* A rule with its selectors. Missing selectors match everything, so a rule
 * {"device": "hbm"} is a catch-all. The rule's JSON text is kept for the
 * unmatched-rule report so users see the rule exactly as they wrote it. */
typedef struct {
    int has_site, has_addr, has_min_size;
    uint64_t site;
    char *source;                /* "site": "file:line": the allocating call's source location */
    char *name;
    uint64_t addr_lo, addr_hi;   /* [lo, hi) */
    uint64_t min_size;
    int pages_percent;           /* 100 = whole object */
    int device;
    char *text;                  /* compact JSON of the rule */
    char *where;                 /* "rules[2]" or "phases.spmv.rules[0]" */
    uint64_t hits;               /* updated atomically */
} rule_t;

typedef struct {
    rule_t *r;
    int n;
} rule_list_t;

typedef struct {
    char *name;
    rule_list_t rules;
} phase_t;

struct hm_placement {
    char **dev;          /* device names, owned */
    int ndev;
    int fixed_devices;   /* 1: names resolved against the machine's list */
    int def;
    rule_list_t top;
    phase_t *phases;
    int nphases;
    uint64_t serial;     /* unique over the process's placements, never reused */
};

static void list_free(rule_list_t *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->r[i].name);
        free(l->r[i].source);
        free(l->r[i].text);
        free(l->r[i].where);
    }
    free(l->r);
    l->r = NULL;
    l->n = 0;
}

void hm_placement_close(hm_placement_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->ndev; i++)
        free(p->dev[i]);
    free(p->dev);
    list_free(&p->top);
    for (int i = 0; i < p->nphases; i++) {
        free(p->phases[i].name);
        list_free(&p->phases[i].rules);
    }
    free(p->phases);
    free(p);
}

/* Resolves a device name to an index: against the machine's names when
 * given, else by order of first appearance in the file. */
static int resolve_device(hm_placement_t *p, const char *name, const char *what, const char *where)
{
    for (int i = 0; i < p->ndev; i++)
        if (strcmp(p->dev[i], name) == 0)
            return i;
    if (p->fixed_devices) {
        char known[512];
        size_t off = 0;
        known[0] = 0;
        for (int i = 0; i < p->ndev && off < sizeof known; i++)
            off += (size_t)snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "", p->dev[i]);
        return hm__errf(HM_ENODEV, "%s: %s: unknown device \"%s\" (machine has: %s)", what, where, name, known);
    }
    char **dev = realloc(p->dev, sizeof(char *) * (size_t)(p->ndev + 1));
    if (!dev)
        return -ENOMEM;
    p->dev = dev;
    if (!(p->dev[p->ndev] = strdup(name)))
        return -ENOMEM;
    return p->ndev++;
}

/* Addresses and site ids are 64-bit, beyond JSON's safe integers, so they
 * are written as "0x..." strings; plain integers are accepted too. */
static int get_u64_hexish(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v))
        return hm__parse_u64(json_string_value(v), out) == 0 ? 0 : -1;
    return -1;
}

/* Whether a "site" value names a source line ("file:line", the file not
 * empty, the line a positive decimal) rather than a hex id. */
static int source_spec(const char *v)
{
    const char *c = strrchr(v, ':');
    if (!c || c == v || !c[1])
        return 0;
    for (const char *d = c + 1; *d; d++)
        if (*d < '0' || *d > '9')
            return 0;
    return atoi(c + 1) > 0;
}

static const char *const rule_keys[] = {"site", "name", "addr", "min_size", "pages_percent", "device"};

static int parse_rule(hm_placement_t *p, json_t *j, rule_t *r, const char *what, const char *where)
{
    if (!json_is_object(j))
        return hm__errf(HM_EBADPLACE, "%s: %s: a rule must be an object", what, where);
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        size_t k;
        for (k = 0; k < HM_ARRAY_LEN(rule_keys); k++)
            if (strcmp(key, rule_keys[k]) == 0)
                break;
        if (k == HM_ARRAY_LEN(rule_keys))
            return hm__errf(HM_EBADPLACE, "%s: %s: unknown key \"%s\" (known: site, name, addr, min_size, pages_percent, device)",
                            what, where, key);
    }
    r->pages_percent = 100;
    if ((v = json_object_get(j, "site"))) {
        const char *sv = json_is_string(v) ? json_string_value(v) : NULL;
        if (sv && source_spec(sv)) {
            if (!(r->source = strdup(sv)))
                return -ENOMEM;
        } else if (get_u64_hexish(v, &r->site)) {
            return hm__errf(HM_EBADPLACE,
                            "%s: %s: \"site\" must be a hex id like \"0x3f2a91c07d5e1b44\" or a source line like \"lulesh.cc:2731\"",
                            what, where);
        } else {
            r->has_site = 1;
        }
    }
    if ((v = json_object_get(j, "name"))) {
        if (!json_is_string(v) || !*json_string_value(v))
            return hm__errf(HM_EBADPLACE, "%s: %s: \"name\" must be a non-empty string", what, where);
        if (!(r->name = strdup(json_string_value(v))))
            return -ENOMEM;
    }
    if ((v = json_object_get(j, "addr"))) {
        if (!json_is_array(v) || json_array_size(v) != 2 || get_u64_hexish(json_array_get(v, 0), &r->addr_lo) ||
            get_u64_hexish(json_array_get(v, 1), &r->addr_hi) || r->addr_lo >= r->addr_hi)
            return hm__errf(HM_EBADPLACE, "%s: %s: \"addr\" must be [\"0xLO\", \"0xHI\"] with LO < HI", what, where);
        r->has_addr = 1;
    }
    if ((v = json_object_get(j, "min_size"))) {
        if (hm__json_get_u64(j, "min_size", 1, &r->min_size, where) < 0)
            return hm__errf(HM_EBADPLACE, "%s: %s: \"min_size\" must be a size (bytes or \"64M\")", what, where);
        r->has_min_size = 1;
    }
    if ((v = json_object_get(j, "pages_percent"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100)
            return hm__errf(HM_EBADPLACE, "%s: %s: \"pages_percent\" must be an integer 0..100", what, where);
        r->pages_percent = (int)json_integer_value(v);
    }
    v = json_object_get(j, "device");
    if (!v)
        return hm__errf(HM_EBADPLACE, "%s: %s: missing \"device\"", what, where);
    if (!json_is_string(v))
        return hm__errf(HM_EBADPLACE, "%s: %s: \"device\" must be a string", what, where);
    int d = resolve_device(p, json_string_value(v), what, where);
    if (d < 0)
        return d;
    r->device = d;
    /* A rule just parsed always dumps: NULL is for want of memory. */
    if (!(r->text = json_dumps(j, JSON_PRESERVE_ORDER)) || !(r->where = strdup(where)))
        return -ENOMEM;
    return 0;
}

static int parse_rules(hm_placement_t *p, json_t *arr, rule_list_t *l, const char *what, const char *prefix)
{
    if (!json_is_array(arr))
        return hm__errf(HM_EBADPLACE, "%s: %s must be an array", what, prefix);
    size_t n = json_array_size(arr);
    if (!(l->r = calloc(n ? n : 1, sizeof(rule_t))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char where[256];
        snprintf(where, sizeof where, "%s[%zu]", prefix, i);
        int rc = parse_rule(p, json_array_get(arr, i), &l->r[i], what, where);
        l->n = (int)i + 1; /* so that list_free sees what was filled */
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int from_json(hm_placement_t **out, const char *what, json_t *root, const char *const *devices, int ndevices)
{
    int rc;
    hm_placement_t *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    static uint64_t serials;
    p->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    if (devices) {
        if (ndevices <= 0) {
            rc = hm__errf(HM_EBADPLACE, "%s: machine has no devices", what);
            goto fail;
        }
        p->fixed_devices = 1;
        if (!(p->dev = calloc((size_t)ndevices, sizeof(char *)))) {
            rc = -ENOMEM;
            goto fail;
        }
        for (; p->ndev < ndevices; p->ndev++)
            if (!(p->dev[p->ndev] = strdup(devices[p->ndev]))) {
                rc = -ENOMEM;
                goto fail;
            }
    }
    if (!json_is_object(root)) {
        rc = hm__errf(HM_EBADPLACE, "%s: top level must be an object", what);
        goto fail;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "default") && strcmp(key, "rules") && strcmp(key, "phases")) {
            rc = hm__errf(HM_EBADPLACE, "%s: unknown key \"%s\" (known: default, rules, phases)", what, key);
            goto fail;
        }
    }
    /* The default comes first so that, without a machine, it gets index 0
     * like a machine's default device does. */
    v = json_object_get(root, "default");
    if (v) {
        if (!json_is_string(v)) {
            rc = hm__errf(HM_EBADPLACE, "%s: \"default\" must be a string", what);
            goto fail;
        }
        if ((rc = resolve_device(p, json_string_value(v), what, "default")) < 0)
            goto fail;
        p->def = rc;
    } else if (!devices) {
        rc = hm__errf(HM_EBADPLACE, "%s: missing \"default\"", what);
        goto fail;
    } else {
        p->def = 0;
    }
    if ((v = json_object_get(root, "rules")) && (rc = parse_rules(p, v, &p->top, what, "rules")) < 0)
        goto fail;
    if ((v = json_object_get(root, "phases"))) {
        if (!json_is_object(v)) {
            rc = hm__errf(HM_EBADPLACE, "%s: \"phases\" must be an object of {\"rules\": [...]}", what);
            goto fail;
        }
        if (!(p->phases = calloc(json_object_size(v) + 1, sizeof(phase_t)))) {
            rc = -ENOMEM;
            goto fail;
        }
        const char *pname;
        json_t *pv;
        json_object_foreach(v, pname, pv) {
            phase_t *ph = &p->phases[p->nphases++];
            if (!(ph->name = strdup(pname))) {
                rc = -ENOMEM;
                goto fail;
            }
            char prefix[256];
            snprintf(prefix, sizeof prefix, "phases.%s.rules", pname);
            json_t *pr = json_is_object(pv) ? json_object_get(pv, "rules") : NULL;
            if (!pr || json_object_size(pv) != 1) {
                rc = hm__errf(HM_EBADPLACE, "%s: phases.%s must be {\"rules\": [...]}", what, pname);
                goto fail;
            }
            if ((rc = parse_rules(p, pr, &ph->rules, what, prefix)) < 0)
                goto fail;
        }
    }
    *out = p;
    return 0;
fail:
    hm_placement_close(p);
    return rc;
}

int hm_placement_parse(hm_placement_t **out, const char *what, const char *json, const char *const *devices,
                       int ndevices)
{
    hm__errclear();
    json_t *root;
    *out = NULL;
    int rc = hm__json_load_string(what, json, &root);
    if (rc < 0)
        return rc;
    rc = from_json(out, what, root, devices, ndevices);
    json_decref(root);
    return rc;
}

int hm_placement_load(hm_placement_t **out, const char *path, const char *const *devices, int ndevices)
{
    hm__errclear();
    json_t *root;
    *out = NULL;
    int rc = hm__json_load_file(path, &root);
    if (rc < 0)
        return rc;
    rc = from_json(out, path, root, devices, ndevices);
    json_decref(root);
    return rc;
}

/* A rule's "file:line" matches an object whose allocating call chain
 * (its source: the call, the inlined functions of the program's own
 * around it, and its callers up to the frames kept) passes through that
 * line, so an allocation made by a wrapper (LULESH's Allocate<T>) is
 * named by the line that called the wrapper. */
static int source_matches(const char *rule, const char *obj)
{
    return hm__source_has(obj, rule);
}

static int rule_matches(const rule_t *r, const hm_object_desc_t *o)
{
    if (r->has_site && r->site != o->site)
        return 0;
    if (r->source && !source_matches(r->source, o->source))
        return 0;
    if (r->name && (!o->name || strcmp(r->name, o->name) != 0))
        return 0;
    if (r->has_addr && (o->addr < r->addr_lo || o->addr >= r->addr_hi))
        return 0;
    if (r->has_min_size && o->size < r->min_size)
        return 0;
    return 1;
}

static int match_list(const rule_list_t *l, const hm_object_desc_t *o)
{
    for (int i = 0; i < l->n; i++)
        if (rule_matches(&l->r[i], o))
            return i;
    return -1;
}

static void match(hm_placement_t *p, const char *phase, const hm_object_desc_t *obj, hm_place_t *out, int count)
{
    out->rule = -1;
    out->phase_rule = 0;
    out->device = p->def;
    out->pages_percent = 100;
    out->default_device = p->def;
    const rule_list_t *l = NULL;
    int i = -1;
    if (phase) {
        for (int k = 0; k < p->nphases; k++) {
            if (strcmp(p->phases[k].name, phase) == 0) {
                l = &p->phases[k].rules;
                i = match_list(l, obj);
                out->phase_rule = i >= 0;
                break;
            }
        }
    }
    if (i < 0) {
        l = &p->top;
        i = match_list(l, obj);
    }
    if (i < 0)
        return;
    rule_t *r = &l->r[i];
    if (count)
        __atomic_fetch_add(&r->hits, 1, __ATOMIC_RELAXED);
    out->rule = i;
    out->device = r->device;
    out->pages_percent = r->pages_percent;
    if (r->pages_percent <= 0) /* 0% of pages on the device: all on default */
        out->device = p->def;
}

void hm_placement_match(hm_placement_t *p, const char *phase, const hm_object_desc_t *obj, hm_place_t *out)
{
    match(p, phase, obj, out, 1);
}

int hm__placement_names(hm_placement_t *p, const char *name, uintptr_t addr, size_t size)
{
    hm_object_desc_t o = {0, name, addr, size, NULL};
    hm_place_t by_name, without;
    match(p, NULL, &o, &by_name, 0);
    o.name = NULL;
    match(p, NULL, &o, &without, 0);
    return by_name.rule != without.rule || by_name.device != without.device;
}

/* The scan's state: the placement that may name arrays, and the caller's
 * callback. */
typedef struct {
    hm_placement_t *p;
    int (*fn)(void *ctx, int module, uintptr_t addr, size_t size, const char *name);
    void *ctx;
} globals_scan_t;

static int global_wanted(void *ctx, int module, const char *name, uintptr_t addr, size_t size, int writable)
{
    globals_scan_t *g = ctx;
    if (g->p && hm__placement_names(g->p, name, addr, size))
        return 1;
    return module == 0 && writable && size >= HM_MIN_OBJECT_SIZE && strncmp(name, "hm_", 3) != 0;
}

static int global_keep(void *ctx, int module, uintptr_t addr, size_t size, const char *name)
{
    globals_scan_t *g = ctx;
    return g->fn(g->ctx, module, addr, size, name);
}

int hm__placement_globals(hm_placement_t *p, int flags,
                          int (*fn)(void *ctx, int module, uintptr_t addr, size_t size, const char *name), void *ctx,
                          int *dropped)
{
    globals_scan_t g = {p, fn, ctx};
    /* Without a placement only the program's own arrays can be objects. */
    return hm__module_objects(p ? 4096 : HM_MIN_OBJECT_SIZE, p ? flags : flags | HM_MODOBJ_PROGRAM, global_wanted,
                              global_keep, &g, dropped);
}

const char *hm_placement_device_name(const hm_placement_t *p, int dev)
{
    return p && dev >= 0 && dev < p->ndev ? p->dev[dev] : NULL;
}

int hm_placement_default_device(const hm_placement_t *p)
{
    return p->def;
}

int hm_placement_has_phases(const hm_placement_t *p)
{
    return p->nphases > 0;
}

uint64_t hm_placement_serial(const hm_placement_t *p)
{
    return p->serial;
}

static int append_unmatched(const rule_list_t *l, char **buf, size_t *len)
{
    for (int i = 0; i < l->n; i++) {
        if (__atomic_load_n(&l->r[i].hits, __ATOMIC_RELAXED))
            continue;
        size_t need = strlen(l->r[i].where) + strlen(l->r[i].text) + 32;
        char *b = realloc(*buf, *len + need);
        if (!b)
            return -ENOMEM;
        *buf = b;
        *len += (size_t)snprintf(*buf + *len, need, "%s %s matched nothing\n", l->r[i].where, l->r[i].text);
    }
    return 0;
}

char *hm_placement_unmatched(const hm_placement_t *p)
{
    hm__errclear();
    char *buf = NULL;
    size_t len = 0;
    int rc = append_unmatched(&p->top, &buf, &len);
    for (int k = 0; k < p->nphases && rc == 0; k++)
        rc = append_unmatched(&p->phases[k].rules, &buf, &len);
    if (rc < 0) {
        free(buf);
        hm__errf(rc, "the list of unmatched rules");
        return NULL;
    }
    return buf;
}

static int list_has_sources(const rule_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        if (l->r[i].source)
            return 1;
    return 0;
}

int hm__placement_has_sources(const hm_placement_t *p)
{
    if (list_has_sources(&p->top))
        return 1;
    for (int i = 0; i < p->nphases; i++)
        if (list_has_sources(&p->phases[i].rules))
            return 1;
    return 0;
}
