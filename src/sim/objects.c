/* Objects and pages: which device holds each page, and whose it is.
 *
 * Pages are placed when an allocation is made, as an OS places them on
 * first touch under a memory policy: a radix map from virtual page to
 * (allocation, device). A page shared by several allocations belongs to
 * the first, which placed it, until it is freed (then to one still on the
 * page); a byte of such a page outside its owner's range takes the device
 * of the allocation that holds it (core.c's line_device), as hetmem run
 * gives each placed object pages of its own. Allocations the runtime does not
 * place (hm_sim_alloc_unplaced: under hetmem run's --min-size) stay on the
 * default device. A
 * device holds at most capacity/cores bytes for this thread; pages beyond
 * that spill to the default device and are counted. What a device is
 * reported to hold (its peak) counts a page from its first touch on, on
 * the device it is on, as the OS populates pages: placing takes capacity,
 * touching takes memory. */
#include <stdlib.h>
#include <string.h>

#include "common/objtab.h"
#include "sim_int.h"

static uint64_t *page_slot(hm_sim_t *s, uint64_t pg)
{
    uint64_t r = pg >> HM_SIM_LEAF_BITS;
    if (r >= (1ull << HM_SIM_ROOT_BITS))
        return NULL;
    if (!s->pagemap)
        s->pagemap = hm__xcalloc(1ull << HM_SIM_ROOT_BITS, sizeof(uint64_t *));
    if (!s->pagemap[r])
        s->pagemap[r] = hm__xcalloc(1u << HM_SIM_LEAF_BITS, sizeof(uint64_t));
    return &s->pagemap[r][pg & ((1u << HM_SIM_LEAF_BITS) - 1)];
}

void hm__sim_objects_free(hm_sim_t *s)
{
    if (s->pagemap) {
        for (uint64_t r = 0; r < (1ull << HM_SIM_ROOT_BITS); r++)
            free(s->pagemap[r]);
        free(s->pagemap);
    }
    for (uint32_t g = 0; g < s->ngroups; g++)
        free(s->groups[g].name);
    free(s->groups);
    free(s->allocs);
    hm__objtab_close(s->live);
    for (int i = 0; i < s->nphase; i++)
        free(s->phase[i]);
    for (uint32_t i = 0; i < s->npstat; i++)
        free(s->pstat[i].name);
    free(s->pstat);
}

/* ---- groups: one per (site, name), in order of first appearance */

uint32_t hm__sim_group(hm_sim_t *s, uint64_t site, const char *name)
{
    /* Few distinct sites exist, but each malloc asks; a one-entry cache
     * catches loops that allocate from one site. */
    static const char *const none = "";
    const char *n = name ? name : none;
    for (uint32_t g = s->ngroups; g-- > 0;) {
        const hm__group_t *x = &s->groups[g];
        if (x->site == site && strcmp(x->name ? x->name : none, n) == 0)
            return g;
    }
    if (s->ngroups == s->cap_groups) {
        s->cap_groups = s->cap_groups ? s->cap_groups * 2 : 64;
        s->groups = hm__xrealloc(s->groups, s->cap_groups * sizeof(hm__group_t));
    }
    hm__group_t *x = &s->groups[s->ngroups];
    memset(x, 0, sizeof *x);
    x->site = site;
    x->name = name ? hm__xstrdup(name) : NULL;
    x->device = -1;
    return s->ngroups++;
}

/* ---- live allocations by start address (the shared interval table) */

static int64_t live_find(const hm_sim_t *s, uint64_t addr)
{
    const hm_objtab_entry_t *e = s->live ? hm__objtab_get(s->live, addr) : NULL;
    return e ? (int64_t)e->id : -1;
}

/* ---- page placement */

/* Places page @p pg (its entry @p e) of allocation @p idx by its
 * hm_place_t. With @p keep_shared, a page owned by another allocation keeps
 * its device. With @p migrate, a page of this allocation that changes device is copied
 * as move_pages() would if the allocation has touched it (the others are
 * not yet populated: nothing to copy): its lines are read from the old
 * device and written to the new one, and *end gets the time the copy
 * completes. */
static void place_page(hm_sim_t *s, uint32_t idx, uint64_t pg, uint64_t *e, int keep_shared, int migrate, double t,
                       double *end)
{
    hm__alloc_t *a = &s->allocs[idx];
    hm__group_t *g = &s->groups[a->group];
    /* A page already placed for another object stays its (line_device
     * gives this object's bytes there its own device). */
    if (*e && keep_shared && HM_PE_ALLOC(*e) != idx + 1)
        return;
    if (*e)
        s->dev[HM_PE_DEV(*e)].used_pages--;
    int dev = hm_placement_page_device(&a->place, pg << HM_SIM_PAGE_SHIFT);
    hm__device_t *d = &s->dev[dev];
    if (dev != s->def && d->cap_pages && d->used_pages >= d->cap_pages) {
        d->spilled_pages++;
        g->spilled_bytes += 1u << HM_SIM_PAGE_SHIFT;
        dev = s->def;
    }
    s->dev[dev].used_pages++;
    int old = *e ? HM_PE_DEV(*e) : -1;
    /* A populated page that changes device is resident on the new
     * one and no longer on the old. */
    if ((*e & HM_PE_RESIDENT) && old != dev) {
        s->dev[old].resident_pages--;
        hm__sim_resident_add(s, dev);
    }
    if (migrate && old >= 0 && old != dev && HM_PE_ALLOC(*e) == idx + 1 && (*e & HM_PE_TOUCHED)) {
        uint64_t l0 = (pg << HM_SIM_PAGE_SHIFT) >> s->line_shift;
        uint64_t nl = (1u << HM_SIM_PAGE_SHIFT) >> s->line_shift;
        for (uint64_t l = l0; l < l0 + nl; l++) {
            double done = hm__device_read(&s->dev[old], l, t);
            hm__device_write(&s->dev[dev], l, done);
            if (done > *end)
                *end = done;
        }
        g->lines_read += nl;
        g->lines_written += nl;
        s->migrated_pages++;
    }
    uint64_t touched = HM_PE_ALLOC(*e) == idx + 1 ? *e & HM_PE_TOUCHED : 0;
    *e = ((uint64_t)idx + 1) | ((uint64_t)(dev + 1) << 32) | touched | (*e & HM_PE_RESIDENT);
}

static void place_pages_at(hm_sim_t *s, uint32_t idx, int keep_shared, int migrate, double t, double *end)
{
    hm__alloc_t *a = &s->allocs[idx];
    uint64_t first = a->addr >> HM_SIM_PAGE_SHIFT, last = (a->addr + a->size - 1) >> HM_SIM_PAGE_SHIFT;
    for (uint64_t pg = first; pg <= last; pg++) {
        uint64_t *e = page_slot(s, pg);
        if (e)
            place_page(s, idx, pg, e, keep_shared, migrate, t, end);
    }
}

static void place_pages(hm_sim_t *s, uint32_t idx, int keep_shared)
{
    double end = 0;
    place_pages_at(s, idx, keep_shared, 0, 0, &end);
}

static void match(hm_sim_t *s, hm__alloc_t *a, const char *name)
{
    if (!s->pl || a->unplaced) {
        memset(&a->place, 0, sizeof a->place);
        a->place.rule = -1;
        a->place.device = a->place.default_device = s->fixed_device >= 0 ? s->fixed_device : s->def;
        a->place.pages_percent = 100;
        return;
    }
    hm_object_desc_t o = {a->site, name, a->addr, a->size, s->site_source ? s->site_source(a->site) : NULL};
    hm_placement_match(s->pl, s->nphase ? s->phase[s->nphase - 1] : NULL, &o, &a->place);
}

void hm_sim_set_site_source(hm_sim_t *s, hm_sim_site_source_fn fn)
{
    s->site_source = fn;
}

static void alloc_at(hm_sim_t *s, uint64_t addr, uint64_t size, uint64_t site, int unplaced);

void hm_sim_alloc(hm_sim_t *s, uint64_t addr, uint64_t size, uint64_t site)
{
    alloc_at(s, addr, size, site, 0);
}

void hm_sim_alloc_unplaced(hm_sim_t *s, uint64_t addr, uint64_t size)
{
    alloc_at(s, addr, size, 0, 1);
}

int hm_sim_placed_at(const hm_sim_t *s, uint64_t addr)
{
    int64_t i = live_find(s, addr);
    return i < 0 ? HM_ENOTFOUND : !s->allocs[i].unplaced;
}

static void alloc_at(hm_sim_t *s, uint64_t addr, uint64_t size, uint64_t site, int unplaced)
{
    hm__sim_drain(s);
    if (!size || s->hot.done)
        return;
    /* Frees we did not see (e.g. inside libc): the range is reused. */
    const hm_objtab_entry_t *stale;
    while (s->live && (stale = hm__objtab_overlap(s->live, addr, size)) != NULL)
        hm_sim_free(s, stale->addr);
    if (!s->live && hm__objtab_open(&s->live) != 0)
        hm__oom(sizeof(void *));
    s->idx_obj_size = 0; /* it may overlap core.c's cached object */
    uint32_t idx;
    if (s->free_alloc) {
        idx = s->free_alloc - 1;
        s->free_alloc = s->allocs[idx].group;
    } else {
        if (s->nallocs == s->cap_allocs) {
            s->cap_allocs = s->cap_allocs ? s->cap_allocs * 2 : 1024;
            s->allocs = hm__xrealloc(s->allocs, s->cap_allocs * sizeof(hm__alloc_t));
        }
        idx = s->nallocs++;
    }
    hm__alloc_t *a = &s->allocs[idx];
    memset(a, 0, sizeof *a);
    a->addr = addr;
    a->size = size;
    /* the span of all allocations: what core.c takes for a pointer */
    if (!s->ptr_span) {
        s->ptr_lo = addr;
        s->ptr_span = size;
    } else {
        uint64_t lo = addr < s->ptr_lo ? addr : s->ptr_lo;
        uint64_t hi = addr + size > s->ptr_lo + s->ptr_span ? addr + size : s->ptr_lo + s->ptr_span;
        s->ptr_lo = lo;
        s->ptr_span = hi - lo;
    }
    a->site = site;
    a->live = 1;
    a->unplaced = unplaced;
    a->group = hm__sim_group(s, site, NULL);
    s->groups[a->group].unplaced |= unplaced;
    match(s, a, NULL);
    hm__group_t *g = &s->groups[a->group];
    g->allocs++;
    g->bytes_allocated += size;
    if (g->device < 0) {
        g->device = a->place.device;
        g->pages_percent = a->place.pages_percent;
    }
    if (hm__objtab_insert(s->live, addr, size, idx) != 0)
        hm__oom(sizeof(void *));
    place_pages(s, idx, 1);
}

int hm_sim_free(hm_sim_t *s, uint64_t addr)
{
    hm__errclear();
    hm__sim_drain(s);
    int64_t i = live_find(s, addr);
    if (i < 0)
        return HM_ENOTFOUND;
    hm__objtab_remove(s->live, addr, NULL);
    hm__alloc_t *a = &s->allocs[i];
    s->idx_obj_size = 0; /* core.c's cached object may be this one */
    uint64_t first = a->addr >> HM_SIM_PAGE_SHIFT, last = (a->addr + a->size - 1) >> HM_SIM_PAGE_SHIFT;
    for (uint64_t pg = first; pg <= last; pg++) {
        uint64_t *e = page_slot(s, pg);
        if (e && HM_PE_ALLOC(*e) == (uint32_t)i + 1) {
            s->dev[HM_PE_DEV(*e)].used_pages--;
            if (*e & HM_PE_RESIDENT)
                s->dev[HM_PE_DEV(*e)].resident_pages--;
            *e = 0;
            /* A live allocation still on the page (only its first or last
             * page can be shared) takes it over on its own device. */
            const hm_objtab_entry_t *o;
            if ((pg == first || pg == last) && s->live &&
                (o = hm__objtab_overlap(s->live, pg << HM_SIM_PAGE_SHIFT, (uint64_t)1 << HM_SIM_PAGE_SHIFT))) {
                double end = 0;
                place_page(s, (uint32_t)o->id, pg, e, 0, 0, 0, &end);
            }
        }
    }
    a->live = 0;
    a->group = s->free_alloc;
    s->free_alloc = (uint32_t)i + 1;
    return 0;
}

int hm_sim_name(hm_sim_t *s, uint64_t addr, const char *name)
{
    hm__errclear();
    hm__sim_drain(s);
    const hm_objtab_entry_t *ent = s->live ? hm__objtab_find(s->live, addr) : NULL;
    if (!ent || !name)
        return HM_ENOTFOUND;
    uint32_t idx = (uint32_t)ent->id;
    hm__alloc_t *a = &s->allocs[idx];
    if (a->unplaced)
        return HM_ENOTFOUND; /* as hetmem_name() under hetmem run */
    hm__group_t *old = &s->groups[a->group];
    old->allocs--;
    old->bytes_allocated -= a->size;
    a->group = hm__sim_group(s, a->site, name);
    hm__group_t *g = &s->groups[a->group];
    g->allocs++;
    g->bytes_allocated += a->size;
    hm_place_t before = a->place;
    match(s, a, name);
    if (g->device < 0) {
        g->device = a->place.device;
        g->pages_percent = a->place.pages_percent;
    }
    /* Named after allocation: its pages move, as move_pages() would: the
     * pages already touched are copied (read from the old device, written
     * to the new) and the thread waits for the copy. */
    if (before.device != a->place.device || before.pages_percent != a->place.pages_percent) {
        double now = s->t + (double)(s->icount - s->t_icount) * s->cpi_ns, end = now;
        place_pages_at(s, idx, 0, 1, now, &end);
        if (end > now) {
            s->t = end;
            s->t_icount = s->icount;
        }
        if (end > s->last_done)
            s->last_done = end;
    }
    return 0;
}

/* Placements with per-phase rules: at every phase boundary each live
 * object is matched again under the new innermost phase and its pages move
 * where that says, as move_pages() would: the pages it has touched are
 * copied and the thread waits for the copy; the others, not yet
 * populated, just take the new device.
 * Objects leaving a device go first, so that the space they free is there
 * for those arriving. */
static void replace_live(hm_sim_t *s)
{
    double now = s->t + (double)(s->icount - s->t_icount) * s->cpi_ns, end = now;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < s->nallocs; i++) {
            hm__alloc_t *a = &s->allocs[i];
            if (!a->live)
                continue;
            hm_place_t before = a->place;
            match(s, a, s->groups[a->group].name);
            int out = a->place.pages_percent == 0 || a->place.device == s->def;
            if (before.device == a->place.device && before.pages_percent == a->place.pages_percent)
                continue;
            if (out != (pass == 0)) {
                a->place = before; /* its turn is in the other pass */
                continue;
            }
            place_pages_at(s, i, 0, 1, now, &end);
        }
    }
    /* The copy's reads stall the thread; its writes are posted, as stores are. */
    if (end > now) {
        s->t = end;
        s->t_icount = s->icount;
    }
    if (end > s->last_done)
        s->last_done = end;
}

/* A phase's time runs from its begin to its end marker in core time;
 * misses still in flight at the end are counted to whatever follows. */
static void phase_close(hm_sim_t *s)
{
    int k = --s->nphase;
    double now = s->t + (double)(s->icount - s->t_icount) * s->cpi_ns;
    uint32_t i;
    for (i = 0; i < s->npstat; i++)
        if (strcmp(s->pstat[i].name, s->phase[k]) == 0)
            break;
    if (i == s->npstat) {
        s->pstat = hm__xrealloc(s->pstat, (s->npstat + 1) * sizeof *s->pstat);
        memset(&s->pstat[i], 0, sizeof *s->pstat);
        s->pstat[i].name = s->phase[k];
        s->npstat++;
    } else {
        free(s->phase[k]);
    }
    s->pstat[i].ns += now - s->phase_t0[k];
    s->pstat[i].instructions += s->icount - s->phase_i0[k];
    s->pstat[i].count++;
}

void hm_sim_phase(hm_sim_t *s, int begin, const char *name)
{
    hm__sim_drain(s);
    if (s->hot.done)
        return;
    if (begin) {
        if (s->nphase < (int)HM_ARRAY_LEN(s->phase)) {
            s->phase_t0[s->nphase] = s->t + (double)(s->icount - s->t_icount) * s->cpi_ns;
            s->phase_i0[s->nphase] = s->icount;
            s->phase[s->nphase++] = hm__xstrdup(name ? name : "");
            if (s->pl && hm_placement_has_phases(s->pl))
                replace_live(s);
        }
        return;
    }
    /* Close the innermost phase of that name (and any left open inside). */
    for (int i = s->nphase - 1; i >= 0; i--) {
        if (strcmp(s->phase[i], name ? name : "") == 0) {
            while (s->nphase > i)
                phase_close(s);
            if (s->pl && hm_placement_has_phases(s->pl))
                replace_live(s);
            return;
        }
    }
}

uint64_t hm__sim_alloc_size(const hm_sim_t *s, uint64_t addr)
{
    int64_t i = live_find(s, addr);
    return i < 0 ? 0 : s->allocs[i].size;
}
