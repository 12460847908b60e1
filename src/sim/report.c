/* The run's report: everything `hetmem sim` prints, as JSON. */
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static json_t *u64(uint64_t v) { return json_integer((json_int_t)v); }

char *hm_sim_report(hm_sim_t *s)
{
    hm__sim_drain(s);
    s->hot.done = 1;
    /* Drain: the run ends when its last miss completes. */
    double now = s->t + (double)(s->icount - s->t_icount) * s->cpi_ns;
    double end = s->last_done > now ? s->last_done : now;
    s->t = end; /* so that hm_sim_now_ns() reports the end from now on */
    s->t_icount = s->icount;
    const hm_sim_machine_t *m = s->m;
    uint64_t line = m->line;
    json_t *r = json_object();
    json_object_set_new(r, "machine", json_string(m->name));
    json_object_set_new(r, "cores", u64(m->cores));
    json_object_set_new(r, "runtime_s", json_real(end * 1e-9));
    json_object_set_new(r, "runtime_ns", u64((uint64_t)end));
    json_object_set_new(r, "instructions", u64(s->icount));
    json_object_set_new(r, "cycles", u64((uint64_t)(end * m->freq_ghz)));
    json_object_set_new(r, "loads", u64(s->loads));
    json_object_set_new(r, "stores", u64(s->stores));
    json_object_set_new(r, "prefetches", u64(s->prefetches));
    json_t *lv = json_array();
    for (int i = 0; i < s->nlevels; i++) {
        const hm__cache_t *c = &s->c[i];
        json_t *o = json_object();
        uint64_t acc = c->hits[0] + c->hits[1] + c->misses[0] + c->misses[1];
        json_object_set_new(o, "name", json_string(m->level[i].name));
        json_object_set_new(o, "size_per_thread", u64((uint64_t)c->sets * c->assoc * line));
        json_object_set_new(o, "accesses", u64(acc));
        json_object_set_new(o, "load_hits", u64(c->hits[0]));
        json_object_set_new(o, "load_misses", u64(c->misses[0]));
        json_object_set_new(o, "store_hits", u64(c->hits[1]));
        json_object_set_new(o, "store_misses", u64(c->misses[1]));
        json_object_set_new(o, "hit_rate", json_real(acc ? (double)(c->hits[0] + c->hits[1]) / (double)acc : 0));
        json_array_append_new(lv, o);
    }
    json_object_set_new(r, "levels", lv);
    json_t *dv = json_array();
    for (int i = 0; i < s->ndev; i++) {
        const hm__device_t *d = &s->dev[i];
        json_t *o = json_object();
        double rd = (double)(d->lines_read * line), wr = (double)(d->lines_written * line);
        json_object_set_new(o, "name", json_string(m->dev[i].name));
        json_object_set_new(o, "bytes_read", u64(d->lines_read * line));
        json_object_set_new(o, "bytes_written", u64(d->lines_written * line));
        /* GB/s of this thread, and of the node (all cores alike). */
        json_object_set_new(o, "bandwidth_gbs", json_real(end > 0 ? (rd + wr) / end : 0));
        json_object_set_new(o, "node_bandwidth_gbs", json_real(end > 0 ? (rd + wr) / end * m->cores : 0));
        json_object_set_new(o, "utilization", json_real(end > 0 ? d->busy_ns / end : 0));
        json_object_set_new(o, "capacity_per_thread", u64(d->cap_pages << HM_SIM_PAGE_SHIFT));
        json_object_set_new(o, "peak_bytes", u64(d->peak_pages << HM_SIM_PAGE_SHIFT));
        json_object_set_new(o, "spilled_bytes", u64(d->spilled_pages << HM_SIM_PAGE_SHIFT));
        json_array_append_new(dv, o);
    }
    json_object_set_new(r, "devices", dv);
    json_t *ob = json_array();
    uint64_t other_r = s->other_lines_read, other_w = s->other_lines_written;
    for (uint32_t g = 0; g < s->ngroups; g++) {
        const hm__group_t *x = &s->groups[g];
        if (x->unplaced) {
            other_r += x->lines_read;
            other_w += x->lines_written;
            continue;
        }
        if (!x->allocs && !x->lines_read && !x->lines_written)
            continue; /* left empty when its only allocation was named */
        json_t *o = json_object();
        char site[32];
        snprintf(site, sizeof site, "0x%016llx", (unsigned long long)x->site);
        json_object_set_new(o, "site", json_string(site));
        json_object_set_new(o, "name", x->name ? json_string(x->name) : json_null());
        const char *src = s->site_source && x->site ? s->site_source(x->site) : NULL;
        json_object_set_new(o, "source", src ? json_string(src) : json_null());
        json_object_set_new(o, "bytes_read", u64(x->lines_read * line));
        json_object_set_new(o, "bytes_written", u64(x->lines_written * line));
        json_object_set_new(o, "device", json_string(m->dev[x->device >= 0 ? x->device : s->fixed_device >= 0 ? s->fixed_device : s->def].name));
        json_object_set_new(o, "pages_percent", u64((uint64_t)(x->device >= 0 ? x->pages_percent : 100)));
        json_object_set_new(o, "allocs", u64(x->allocs));
        json_object_set_new(o, "bytes_allocated", u64(x->bytes_allocated));
        json_object_set_new(o, "spilled_bytes", u64(x->spilled_bytes));
        json_array_append_new(ob, o);
    }
    json_object_set_new(r, "objects", ob);
    json_t *ph = json_array();
    for (uint32_t i = 0; i < s->npstat; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(s->pstat[i].name));
        json_object_set_new(o, "time_s", json_real(s->pstat[i].ns * 1e-9));
        json_object_set_new(o, "instructions", u64(s->pstat[i].instructions));
        json_object_set_new(o, "count", u64(s->pstat[i].count));
        json_array_append_new(ph, o);
    }
    json_object_set_new(r, "phases", ph);
    json_t *oth = json_object();
    json_object_set_new(oth, "bytes_read", u64(other_r * line));
    json_object_set_new(oth, "bytes_written", u64(other_w * line));
    json_object_set_new(r, "untracked", oth);
    json_object_set_new(r, "migrated_bytes", u64(s->migrated_pages << HM_SIM_PAGE_SHIFT));
    json_t *un = json_array();
    char *txt = s->pl ? hm_placement_unmatched(s->pl) : NULL;
    for (char *p = txt, *nl; p && *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl)
            break;
        json_array_append_new(un, json_stringn(p, (size_t)(nl - p)));
    }
    free(txt);
    json_object_set_new(r, "unmatched_rules", un);
    char *out = json_dumps(r, JSON_PRESERVE_ORDER | JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(r);
    return out;
}
