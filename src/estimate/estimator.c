/* Estimator handle: accessors, and the summary saved as JSON and read back
 * (the format is in include/hetmem/estimate.h and docs/estimator.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimate/estimate_int.h"

HM_API void hm_estimator_close(hm_estimator_t *e)
{
    if (!e)
        return;
    for (int d = 0; d < e->ndev; d++)
        free(e->dev_name ? e->dev_name[d] : NULL);
    for (int p = 0; p < e->nphase; p++)
        free(e->phase_name[p]);
    for (int o = 0; o < e->nobj && e->obj; o++) {
        free(e->obj[o].name);
        free(e->obj[o].source);
    }
    free(e->dev_name);
    free(e->runtime_ns);
    free(e->period);
    free(e->bw);
    free(e->wbw);
    free(e->lat_ns);
    free(e->cap);
    free(e->ll_n);
    free(e->fig_note);
    free(e->ll);
    free(e->phase_name);
    free(e->obj);
    free(e->win);
    free(e->t);
    free(e->cell);
    free(e->lin_var);
    free(e->lin_phase_base);
    free(e->lin_phase_gain);
    hm__est_default_t *m = &e->dm;
    free(m->cls_phase);
    free(m->cls_sib);
    free(m->cls_w);
    free(m->cls_woff);
    free(m->cls_win);
    free(m->c_ns);
    free(m->k);
    free(m->resid);
    free(m->ys);
    free(m->kq);
    free(m->tdev);
    free(m->g_off);
    free(m->g_r);
    free(m->g_a);
    free(m->g_b);
    free(m->lat);
    free(m->bytes);
    free(m->bytes_x);
    free(m->wbytes);
    free(m->latsum);
    free(m->xw);
    free(m->xwsum);
    free(m->var);
    free(e->trans);
    free(e->bd_phase);
    free(e->bd_obj);
    for (int i = 0; i < HM__EST_PCACHE; i++)
        free(e->pc[i].a);
    if (e->pc_ready)
        pthread_mutex_destroy(&e->pc_mu);
    free(e);
}

HM_API int hm_estimator_ndevices(const hm_estimator_t *e) { return e->ndev; }
HM_API const char *hm_estimator_device_name(const hm_estimator_t *e, int d)
{
    return d >= 0 && d < e->ndev ? e->dev_name[d] : NULL;
}
HM_API int hm_estimator_device_index(const hm_estimator_t *e, const char *name)
{
    for (int d = 0; d < e->ndev; d++)
        if (name && !strcmp(name, e->dev_name[d]))
            return d;
    char list[256] = "";
    size_t at = 0;
    for (int d = 0; d < e->ndev && at < sizeof list; d++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", d ? ", " : "", e->dev_name[d]);
    return hm__errf(HM_ENODEV, "'%s' is not a device of the traces (devices: %s)", name ? name : "", list);
}
HM_API uint64_t hm_estimator_device_capacity(const hm_estimator_t *e, int d)
{
    return d >= 0 && d < e->ndev ? e->cap[d] : 0;
}
HM_API double hm_estimator_measured_ns(const hm_estimator_t *e, int d)
{
    return d >= 0 && d < e->ndev ? e->runtime_ns[d] : 0;
}
HM_API int hm_estimator_default_device(const hm_estimator_t *e) { return e->def; }

HM_API int hm_estimator_device_lacks(const hm_estimator_t *e, int d)
{
    if (d < 0 || d >= e->ndev)
        return 0;
    return (e->bw[d] > 0 ? 0 : HM_EST_LACKS_BANDWIDTH) | (e->lat_ns[d] > 0 ? 0 : HM_EST_LACKS_LATENCY);
}

HM_API const char *hm_estimator_figures_note(const hm_estimator_t *e) { return e->fig_note; }

/* What the default model does without a figure (model.c): the read
 * bandwidth sizes the channel-time bound, the traffic a bound run moved
 * beyond its samples, and the cost of moving pages between phases; the
 * idle latency scales latency costs between devices and tells a
 * bandwidth-bound run from a latency-bound one. */
static void names_lacking(const hm_estimator_t *e, int bit, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (int d = 0; d < e->ndev && off < len; d++)
        if (hm_estimator_device_lacks(e, d) & bit)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", e->dev_name[d]);
}

/* The note names the core clock only where the default model needed it
 * (hm__est_prepare() has run): runs with latency costs, whose weights
 * (core cycles) it compares with the devices' latencies and the runs'
 * times (ns). */
int hm__est_figures_note(hm_estimator_t *e)
{
    free(e->fig_note);
    e->fig_note = NULL;
    char bw[256], lat[256];
    names_lacking(e, HM_EST_LACKS_BANDWIDTH, bw, sizeof bw);
    names_lacking(e, HM_EST_LACKS_LATENCY, lat, sizeof lat);
    int clk = e->dm.clock_needed && !(e->core_ghz > 0);
    if (!bw[0] && !lat[0] && !clk)
        return 0;
    char *s = NULL;
    if (asprintf(&s, "%s%s%s%s%s%s%s%s%s%s%s%s (give --machine FILE, docs/estimator.md)",
                 bw[0] || lat[0] ? "device figures lacking:" : "", bw[0] ? " read bandwidth of " : "", bw,
                 bw[0] && lat[0] ? ";" : "", lat[0] ? " read latency of " : "", lat,
                 bw[0] || lat[0] ? ": the default model then " : "",
                 bw[0] ? "has no channel-time bound, no traffic beyond the samples and no migration cost there" : "",
                 bw[0] && lat[0] ? ", and " : "", lat[0] ? "takes the latency ratio to those devices as 1" : "",
                 clk ? (bw[0] || lat[0] ? "; core clock lacking: " : "core clock lacking (the machine's core.freq_ghz): ")
                     : "",
                 clk ? "the samples' latency weights (core cycles) are taken as ns" : "") < 0)
        return -ENOMEM;
    e->fig_note = s;
    return 0;
}

HM_API double hm_estimator_core_ghz(const hm_estimator_t *e) { return e->core_ghz; }
HM_API int hm_estimator_nphases(const hm_estimator_t *e) { return e->nphase; }
HM_API const char *hm_estimator_phase_name(const hm_estimator_t *e, int p)
{
    return p >= 0 && p < e->nphase ? e->phase_name[p] : NULL;
}
HM_API int hm_estimator_nobjects(const hm_estimator_t *e) { return e->nobj; }
HM_API int hm_estimator_nwindows(const hm_estimator_t *e) { return e->nwin; }

HM_API int hm_estimator_object(const hm_estimator_t *e, int o, hm_est_object_t *out)
{
    hm__errclear();
    if (o < 0 || o >= e->nobj)
        return hm__errf(HM_ERANGE, "object %d of %d", o, e->nobj);
    const hm__est_obj_t *x = &e->obj[o];
    *out = (hm_est_object_t){x->site, x->name, x->size, x->allocations, x->samples, o < e->nobj - 1, x->source};
    return 0;
}

HM_API int hm_estimator_find_object(const hm_estimator_t *e, uint64_t site, const char *name)
{
    hm__errclear();
    for (int o = 0; o < e->nobj - 1; o++)
        if (name ? e->obj[o].name && !strcmp(name, e->obj[o].name) : e->obj[o].site == site)
            return o;
    return HM_ENOTFOUND;
}

/* ------------------------------------------------------------- saving */

HM_API int hm_estimator_save(const hm_estimator_t *e, const char *path)
{
    hm__errclear();
    int D = e->ndev, O = e->nobj;
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("hetmem-estimate-summary"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "default", json_integer(e->def));
    json_t *devs = json_array();
    for (int d = 0; d < D; d++) {
        json_t *dv = json_pack("{s:s, s:f, s:f, s:I, s:f, s:f, s:f}", "name", e->dev_name[d], "runtime_ns",
                                              e->runtime_ns[d], "period", e->period[d], "capacity",
                                              (json_int_t)e->cap[d], "bandwidth_gbs", e->bw[d], "write_bandwidth_gbs",
                                              e->wbw[d], "read_latency_ns", e->lat_ns[d]);
        if (e->ll_n[d]) {
            json_t *ll = json_array();
            for (int k = 0; k < e->ll_n[d]; k++)
                json_array_append_new(ll, json_pack("[f, f]", e->ll[d][0][k], e->ll[d][1][k]));
            json_object_set_new(dv, "loaded_latency", ll);
        }
        json_array_append_new(devs, dv);
    }
    json_object_set_new(root, "devices", devs);
    if (e->core_ghz > 0)
        json_object_set_new(root, "core_ghz", json_real(e->core_ghz));
    json_t *ph = json_array();
    for (int p = 0; p < e->nphase; p++)
        json_array_append_new(ph, json_string(e->phase_name[p]));
    json_object_set_new(root, "phases", ph);
    json_t *objs = json_array();
    for (int o = 0; o < O - 1; o++) {
        char site[32];
        snprintf(site, sizeof site, "0x%016llx", (unsigned long long)e->obj[o].site);
        json_t *x = json_pack("{s:s, s:I, s:I}", "site", site, "size", (json_int_t)e->obj[o].size, "allocations",
                              (json_int_t)e->obj[o].allocations);
        if (e->obj[o].name)
            json_object_set_new(x, "name", json_string(e->obj[o].name));
        if (e->obj[o].source)
            json_object_set_new(x, "source", json_string(e->obj[o].source));
        json_t *pg = json_array();
        for (int b = 0; b < 100; b++)
            json_array_append_new(pg, json_real(e->obj[o].pages[b]));
        json_object_set_new(x, "pages", pg);
        json_array_append_new(objs, x);
    }
    json_object_set_new(root, "objects", objs);
    json_t *wins = json_array();
    for (int w = 0; w < e->nwin; w++) {
        json_t *t = json_array(), *st = json_array();
        for (int d = 0; d < D; d++)
            json_array_append_new(t, json_real(e->t[(size_t)w * D + d]));
        for (int o = 0; o < O; o++)
            for (int d = 0; d < D; d++) {
                const hm__est_cell_t *c = hm__est_cell(e, w, o, d);
                if (c->n > 0 || c->w > 0 || c->m > 0)
                    json_array_append_new(st, json_pack("[i, i, f, f, f, f, f, f, f, f]", o, d, (double)c->n,
                                                        (double)c->w, (double)c->m, (double)c->x, (double)c->sm,
                                                        (double)c->mm, (double)c->hw, (double)c->sh));
            }
        json_array_append_new(wins, json_pack("{s:i, s:i, s:f, s:o, s:o}", "phase", e->win[w].phase, "region",
                                              e->win[w].region, "instructions", e->win[w].instructions, "t_ns", t,
                                              "stats", st));
    }
    json_object_set_new(root, "windows", wins);
    int rc = json_dump_file(root, path, JSON_COMPACT) == 0 ? 0 : hm__errf(-EIO, "cannot write %s", path);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------ loading */

/* The most bytes a summarys objects may hold together: 2^56, so that a
 * byte count times a percentage (at most 100) stays within 64 bits. */
#define HM_EST_BYTES_MAX (UINT64_C(1) << 56)
#define BAD(...) do { rc = hm__errf(HM_EBADJSON, __VA_ARGS__); goto fail; } while (0)
#define NOMEM() do { rc = -ENOMEM; goto fail; } while (0)

/* Times (ns), counts and rates above this are no measurement (1e18 ns is 31
 * years), and sums of such figures lose the precision the models need: a
 * window of 1e67 ns made a placement's estimate negative. */
#define FIGURE_MAX 1e18

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* A hand-written summary may number its regions as it likes (any
 * non-negative int): the models index arrays by region, so the ids become
 * their ranks, 0 to (distinct ids - 1), in the same order. */
static int renumber_regions(hm_estimator_t *e)
{
    int n = e->nwin, k = 0;
    int *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids)
        return -ENOMEM;
    for (int w = 0; w < n; w++)
        ids[w] = e->win[w].region;
    qsort(ids, (size_t)n, sizeof *ids, cmp_int);
    for (int w = 0; w < n; w++)
        if (w == 0 || ids[w] != ids[k - 1])
            ids[k++] = ids[w];
    for (int w = 0; w < n; w++) {
        const int *at = bsearch(&e->win[w].region, ids, (size_t)k, sizeof *ids, cmp_int);
        e->win[w].region = (int)(at - ids);
    }
    free(ids);
    return 0;
}

static int from_json(hm_estimator_t **out, const char *what, json_t *root)
{
    int rc = 0;
    hm_estimator_t *e = calloc(1, sizeof *e);
    if (!e) {
        json_decref(root);
        return -ENOMEM;
    }
    const char *fmt = json_string_value(json_object_get(root, "format"));
    if (!fmt || strcmp(fmt, "hetmem-estimate-summary"))
        BAD("%s: \"format\" must be \"hetmem-estimate-summary\"", what);
    if (json_integer_value(json_object_get(root, "version")) != 1)
        BAD("%s: \"version\" must be 1", what);
    json_t *devs = json_object_get(root, "devices"), *phases = json_object_get(root, "phases"),
           *objs = json_object_get(root, "objects"), *wins = json_object_get(root, "windows");
    if (!json_is_array(devs) || json_array_size(devs) < 2 || json_array_size(devs) > 64)
        BAD("%s: \"devices\" must be an array of 2 to 64 devices", what);
    if (!json_is_array(objs) || !json_is_array(wins) || json_array_size(wins) == 0)
        BAD("%s: \"objects\" and \"windows\" (non-empty) arrays are required", what);
    if (phases && !json_is_array(phases))
        BAD("%s: \"phases\" must be an array of names", what);
    e->ndev = (int)json_array_size(devs);
    if ((rc = hm__est_alloc_devices(e)) < 0)
        goto fail;
    if ((rc = hm__json_get_double(root, "core_ghz", 0, &e->core_ghz, what)) < 0)
        goto fail;
    if (!(e->core_ghz >= 0) || !(e->core_ghz <= 1e3))
        BAD("%s: \"core_ghz\" must be between 0 (not given) and 1000", what);
    for (int d = 0; d < e->ndev; d++) {
        json_t *x = json_array_get(devs, (size_t)d);
        char where[64];
        snprintf(where, sizeof where, "%s: devices[%d]", what, d);
        const char *nm;
        uint64_t cap = 0;
        double per = 1;
        if ((rc = hm__json_get_string(x, "name", 1, &nm, where)) < 0 ||
            (rc = hm__json_get_double(x, "runtime_ns", 1, &e->runtime_ns[d], where)) < 0 ||
            (rc = hm__json_get_double(x, "period", 0, &per, where)) < 0 ||
            (rc = hm__json_get_u64(x, "capacity", 0, &cap, where)) < 0 ||
            (rc = hm__json_get_double(x, "bandwidth_gbs", 0, &e->bw[d], where)) < 0 ||
            (rc = hm__json_get_double(x, "write_bandwidth_gbs", 0, &e->wbw[d], where)) < 0 ||
            (rc = hm__json_get_double(x, "read_latency_ns", 0, &e->lat_ns[d], where)) < 0)
            goto fail;
        for (int j = 0; j < d; j++)
            if (!strcmp(e->dev_name[j], nm))
                BAD("%s: device '%s' appears twice", what, nm);
        if (!(e->runtime_ns[d] >= 0) || !(per >= 1) || !(e->bw[d] >= 0) || !(e->wbw[d] >= 0) || !(e->lat_ns[d] >= 0))
            BAD("%s: negative or invalid figure", where);
        if (!(e->runtime_ns[d] <= FIGURE_MAX) || !(per <= FIGURE_MAX) || !(e->bw[d] <= FIGURE_MAX) ||
            !(e->wbw[d] <= FIGURE_MAX) || !(e->lat_ns[d] <= FIGURE_MAX))
            BAD("%s: a figure above %g", where, FIGURE_MAX);
        if (!(e->dev_name[d] = strdup(nm)))
            NOMEM();
        e->period[d] = per;
        if (!json_object_get(x, "write_bandwidth_gbs"))
            e->wbw[d] = e->bw[d];
        json_t *ll = json_object_get(x, "loaded_latency"), *pt;
        size_t k;
        if (ll && (!json_is_array(ll) || json_array_size(ll) > 16))
            BAD("%s: \"loaded_latency\" must be an array of at most 16 [utilisation, ns] pairs", where);
        json_array_foreach(ll, k, pt) {
            double u = json_number_value(json_array_get(pt, 0)), ns = json_number_value(json_array_get(pt, 1));
            double pu = k ? e->ll[d][0][k - 1] : 0, pn = k ? e->ll[d][1][k - 1] : e->lat_ns[d];
            if (!json_is_array(pt) || json_array_size(pt) != 2 || !(u > pu && u <= 1) || !(ns >= pn) || !(ns <= FIGURE_MAX))
                BAD("%s: loaded_latency[%zu] must be [utilisation, ns], utilisation rising in (0, 1], ns not falling", where, k);
            e->ll[d][0][k] = u, e->ll[d][1][k] = ns;
            e->ll_n[d] = (int)k + 1;
        }
        e->cap[d] = cap;
    }
    json_int_t def = json_integer_value(json_object_get(root, "default"));
    if (def < 0 || def >= e->ndev)
        BAD("%s: \"default\" must be a device index below %d", what, e->ndev);
    e->def = (int)def;
    e->ref = 0;
    for (int d = 1; d < e->ndev; d++)
        if (e->runtime_ns[d] > e->runtime_ns[e->ref])
            e->ref = d;
    /* nphase counts the names held, for hm_estimator_close() on failure. */
    int nphase = phases && json_array_size(phases) ? (int)json_array_size(phases) : 1;
    if (!(e->phase_name = calloc((size_t)nphase, sizeof *e->phase_name)))
        NOMEM();
    for (int p = 0; p < nphase; p++) {
        const char *nm = phases ? json_string_value(json_array_get(phases, (size_t)p)) : "(no phase)";
        if (!nm)
            BAD("%s: phases[%d] must be a string", what, p);
        if (!(e->phase_name[p] = strdup(nm)))
            NOMEM();
        e->nphase = p + 1;
    }
    e->nobj = (int)json_array_size(objs) + 1;
    if (!(e->obj = calloc((size_t)e->nobj, sizeof *e->obj)))
        NOMEM();
    uint64_t total = 0;
    for (int o = 0; o < e->nobj - 1; o++) {
        json_t *x = json_array_get(objs, (size_t)o);
        char where[64];
        snprintf(where, sizeof where, "%s: objects[%d]", what, o);
        const char *site = NULL, *nm = NULL, *src = NULL;
        if ((rc = hm__json_get_string(x, "site", 0, &site, where)) < 0 ||
            (rc = hm__json_get_string(x, "name", 0, &nm, where)) < 0 ||
            (rc = hm__json_get_string(x, "source", 0, &src, where)) < 0 ||
            (rc = hm__json_get_u64(x, "size", 1, &e->obj[o].size, where)) < 0 ||
            (rc = hm__json_get_u64(x, "allocations", 0, &e->obj[o].allocations, where)) < 0)
            goto fail;
        if (site && hm__parse_u64(site, &e->obj[o].site) < 0)
            BAD("%s: \"site\" is not a number: '%s'", where, site);
        /* Byte counts are summed per device and scaled by page percentages
         * in 64 bits: objects past HM_EST_BYTES_MAX in all would wrap. */
        if (__builtin_add_overflow(total, e->obj[o].size, &total) || total > HM_EST_BYTES_MAX)
            BAD("%s: the objects' sizes add up past 64 PiB", where);
        if ((nm && !(e->obj[o].name = strdup(nm))) || (src && !(e->obj[o].source = strdup(src))))
            NOMEM();
        json_t *pg = json_object_get(x, "pages");
        if (pg && (!json_is_array(pg) || json_array_size(pg) != 100))
            BAD("%s: \"pages\" must hold 100 counts", where);
        for (int b = 0; pg && b < 100; b++)
            e->obj[o].pages[b] = (float)json_number_value(json_array_get(pg, (size_t)b));
    }
    e->nwin = (int)json_array_size(wins);
    if ((rc = hm__est_alloc(e)) < 0)
        goto fail;
    for (int w = 0; w < e->nwin; w++) {
        json_t *x = json_array_get(wins, (size_t)w), *t = json_object_get(x, "t_ns"), *st = json_object_get(x, "stats");
        json_int_t p = json_integer_value(json_object_get(x, "phase"));
        if (p < 0 || p >= e->nphase)
            BAD("%s: windows[%d].phase must be a phase index below %d", what, w, e->nphase);
        e->win[w].phase = (int)p;
        /* Region: given, else a new one wherever the phase label changes. */
        json_t *rg = json_object_get(x, "region");
        if (rg && (!json_is_integer(rg) || json_integer_value(rg) < 0 || json_integer_value(rg) > INT32_MAX))
            BAD("%s: windows[%d].region must be a non-negative integer", what, w);
        e->win[w].region = rg ? (int)json_integer_value(rg)
                              : w == 0 ? 0 : e->win[w - 1].region + (e->win[w - 1].phase != (int)p);
        e->win[w].instructions = json_number_value(json_object_get(x, "instructions"));
        if (!(e->win[w].instructions >= 0) || !(e->win[w].instructions <= FIGURE_MAX))
            BAD("%s: windows[%d].instructions must be a number from 0 to %g", what, w, FIGURE_MAX);
        if (!json_is_array(t) || (int)json_array_size(t) != e->ndev)
            BAD("%s: windows[%d].t_ns must hold one time per device (%d)", what, w, e->ndev);
        for (int d = 0; d < e->ndev; d++) {
            double v = json_number_value(json_array_get(t, (size_t)d));
            if (!(v >= 0) || !(v <= FIGURE_MAX))
                BAD("%s: windows[%d].t_ns[%d] must be a number from 0 to %g", what, w, d, FIGURE_MAX);
            e->t[(size_t)w * e->ndev + d] = v;
        }
        if (st && !json_is_array(st))
            BAD("%s: windows[%d].stats must be an array", what, w);
        size_t i;
        json_t *row;
        json_array_foreach(st, i, row) {
            size_t cols = json_array_size(row);
            if (!json_is_array(row) || cols < 5 || cols > 10)
                BAD("%s: windows[%d].stats[%zu] must be [OBJ, DEV, SAMPLES, WEIGHT_SUM, L1_MISSES(, MEMORY_WEIGHT(, STORE_MISSES(, MEMORY_LOADS(, HIT_WAITS(, STORE_HITS)))))]", what, w, i);
            json_int_t o = json_integer_value(json_array_get(row, 0)), d = json_integer_value(json_array_get(row, 1));
            if (!json_is_integer(json_array_get(row, 0)) || o < 0 || o >= e->nobj || !json_is_integer(json_array_get(row, 1)) ||
                d < 0 || d >= e->ndev)
                BAD("%s: windows[%d].stats[%zu]: object or device index out of range", what, w, i);
            double v[8];
            for (int k = 0; k < (int)cols - 2; k++) {
                v[k] = json_number_value(json_array_get(row, (size_t)k + 2));
                if (!(v[k] >= 0) || !(v[k] <= FIGURE_MAX))
                    BAD("%s: windows[%d].stats[%zu]: counts must be numbers from 0 to %g", what, w, i, FIGURE_MAX);
            }
            hm__est_cell_t *c = hm__est_cell(e, w, (int)o, (int)d);
            c->n += (float)v[0], c->w += (float)v[1], c->m += (float)v[2];
            c->x += (float)(cols >= 6 ? v[3] : v[1]); /* without it, all weight counts as memory-bound */
            c->sm += (float)(cols >= 7 ? v[4] : 0);
            /* Without it, every load that missed L1 reached memory. */
            c->mm += (float)(cols >= 8 ? v[5] : v[2] - (cols >= 7 ? v[4] : 0));
            /* Without it, no cache hit waited for memory. */
            c->hw += (float)(cols >= 9 ? v[6] : 0);
            /* Without it, no store hit L1. */
            c->sh += (float)(cols == 10 ? v[7] : 0);
            if (c->sm > c->m || c->mm > c->m - c->sm || c->hw > c->mm || c->m + c->sh > c->n)
                BAD("%s: windows[%d].stats[%zu]: more store misses or memory loads than L1 misses, more waiting hits than memory loads, or more L1 misses and store hits than samples", what, w, i);
        }
    }
    if ((rc = renumber_regions(e)) < 0)
        goto fail;
    for (int o = 0; o < e->nobj; o++)
        for (int w = 0; w < e->nwin; w++)
            e->obj[o].samples += hm__est_cell(e, w, o, e->ref)->n;
    if ((rc = hm__est_prepare(e)) < 0 || (rc = hm__est_figures_note(e)) < 0)
        goto fail;
    json_decref(root);
    *out = e;
    return 0;
fail:
    json_decref(root);
    hm_estimator_close(e);
    return rc;
}

HM_API int hm_estimator_parse_summary(hm_estimator_t **out, const char *what, const char *text)
{
    *out = NULL;
    hm__errclear();
    json_t *root;
    int rc = hm__json_load_string(what, text, &root);
    return rc < 0 ? rc : from_json(out, what, root);
}

HM_API int hm_estimator_open_summary(hm_estimator_t **out, const char *path)
{
    *out = NULL;
    hm__errclear();
    json_t *root;
    int rc = hm__json_load_file(path, &root);
    return rc < 0 ? rc : from_json(out, path, root);
}
