/* Object table, placement enforcement and the hetmem.h runtime API.
 *
 * In bind mode every tracked object gets its own page-aligned mapping, so
 * that mbind() moves exactly that object and nothing that shares its pages
 * (glibc's heap would mix neighbours into the same pages). Global and
 * static arrays that rules name by symbol cannot be given their own pages:
 * only the whole pages inside them are bound, and the partial pages at
 * either end, shared with neighbouring data, stay with the rest of the
 * program's static data. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hetmem/placement.h"
#include "hetmem/record.h"
#include "hetmem/trace.h"
#include "common/env.h"
#include "common/objtab.h"
#include "placement/placement_int.h"
#include "os/os.h"
#include "preload/preload_int.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 16
/* Object records live in chunks mapped on demand and are reused through a
 * free list, so their memory follows the peak number of live objects. */
#define CHUNK_OBJS 4096u
#define MAXCHUNK 4096u

typedef struct {
    uint64_t addr, size, site;
    char name[40];      /* hetmem_name() */
    const char *sym;    /* symbol of a global array (in its module's mapped symbol table) */
    int16_t dev;        /* device holding it (-1: left to first touch) */
    int16_t want;       /* device the placement asked for last time */
    int16_t rest_dev;   /* device charged with the pages_percent remainder */
    uint8_t own;
    uint8_t global;     /* a global or static array: only its whole pages are bound */
    uint8_t live;       /* in the address table (not on the free list) */
    uint32_t next_free; /* free-list link (id + 1) while unused */
    uint64_t bytes;     /* bytes charged to dev */
    uint64_t rest;      /* bytes charged to rest_dev */
} obj_t;

static struct {
    hm_objtab_t *t;             /* live objects by address -> record id */
    obj_t *chunk[MAXCHUNK];
    uint32_t nchunk, nobj, free_obj;
    _Atomic int lock;
    uint64_t dropped;
    int active;                 /* bind mode */
    _Atomic long own;           /* objects in own mappings */
    hm_placement_t *pl;
    int ndev;
    const char *dname[MAXDEV];
    uint64_t mask[MAXDEV], cap[MAXDEV], used[MAXDEV], peak[MAXDEV];
    const char *phase[16];
    int phase_ref[16];
    int nphase;
    size_t pg;
} B;

/* A recursive spin lock: code running under it (jansson in the matcher,
 * strdup/free of phase names) may re-enter free(), which looks here. */
static int lock_depth;

static void lock(void)
{
    int me = (int)hm__tid();
    if (atomic_load_explicit(&B.lock, memory_order_relaxed) == me) {
        lock_depth++;
        return;
    }
    int z = 0;
    while (!atomic_compare_exchange_weak(&B.lock, &z, me)) {
        z = 0;
        sched_yield();
    }
    lock_depth = 1;
}

static void unlock(void)
{
    if (--lock_depth == 0)
        atomic_store(&B.lock, 0);
}

/* The table's memory comes from mmap: this code runs inside malloc. */
static void *tab_alloc(size_t n)
{
    void *p = hm__real.mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void tab_free(void *p, size_t n) { hm__real.munmap(p, n); }

static obj_t *obj_at(uint64_t id) { return &B.chunk[id / CHUNK_OBJS][id % CHUNK_OBJS]; }

static obj_t *find(uint64_t a)
{
    const hm_objtab_entry_t *e = B.t ? hm__objtab_get(B.t, a) : NULL;
    return e ? obj_at(e->id) : NULL;
}

static void obj_release(uint64_t id)
{
    obj_t *o = obj_at(id);
    o->live = 0;
    o->next_free = B.free_obj;
    B.free_obj = (uint32_t)id + 1;
}

static void uncharge(obj_t *o)
{
    if (o->dev >= 0)
        B.used[o->dev] -= o->bytes;
    if (o->rest_dev >= 0)
        B.used[o->rest_dev] -= o->rest;
    o->bytes = o->rest = 0;
    o->dev = o->rest_dev = -1;
}

/* Drops live records that [a, a+size) overlaps: their memory was freed
 * where we could not see it (inside libc, or munmap) and is reused. */
static void drop_overlaps(uint64_t a, uint64_t size)
{
    const hm_objtab_entry_t *e;
    while ((e = hm__objtab_overlap(B.t, a, size)) != NULL) {
        hm_objtab_entry_t x;
        hm__objtab_remove(B.t, e->addr, &x);
        obj_t *o = obj_at(x.id);
        uncharge(o);
        if (o->own)
            atomic_fetch_sub(&B.own, 1);
        obj_release(x.id);
    }
}

static obj_t *insert(uint64_t a, uint64_t size)
{
    if (!B.t)
        return NULL;
    uint64_t id;
    if (B.free_obj) {
        id = B.free_obj - 1;
        B.free_obj = obj_at(id)->next_free;
    } else {
        if (B.nobj == B.nchunk * CHUNK_OBJS) {
            if (B.nchunk == MAXCHUNK || !(B.chunk[B.nchunk] = tab_alloc(CHUNK_OBJS * sizeof(obj_t))))
                return NULL;
            B.nchunk++;
        }
        id = B.nobj++;
    }
    drop_overlaps(a, size);
    if (hm__objtab_insert(B.t, a, size, id) != 0) {
        obj_release(id);
        return NULL;
    }
    obj_t *o = obj_at(id);
    memset(o, 0, sizeof *o);
    o->addr = a;
    o->size = size;
    o->live = 1;
    o->dev = o->want = o->rest_dev = -1;
    return o;
}

/* ---------------------------------------------------------------- binding */

/* The name rules see: hetmem_name()'s, else a global's symbol. */
static const char *obj_name(const obj_t *o)
{
    return o->name[0] ? o->name : o->sym;
}

/* The pages a placement applies to: all of an object in its own mapping;
 * of a global array only the whole pages inside it (none when it lies
 * within two pages). */
static void obj_span(const obj_t *o, uint64_t *base, uint64_t *pages)
{
    if (!o->global) {
        *base = o->addr;
        *pages = (o->size + B.pg - 1) / B.pg;
        return;
    }
    uint64_t lo = (o->addr + B.pg - 1) & ~(uint64_t)(B.pg - 1), hi = (o->addr + o->size) & ~(uint64_t)(B.pg - 1);
    *base = lo;
    *pages = hi > lo ? (hi - lo) / B.pg : 0;
}

/* Payload: requested device, device, name, phase, bytes bound. Names are
 * single tokens (symbols, or what the program gave hetmem_name). */
static void report(const obj_t *o, int want, int flags, const char *phase, uint64_t bound)
{
    char m[200];
    const char *nm = obj_name(o);
    snprintf(m, sizeof m, "%s %s %.63s %.63s %llu", want >= 0 ? B.dname[want] : "-", o->dev >= 0 ? B.dname[o->dev] : "-",
             nm && nm[0] ? nm : "-", phase ? phase : "-", (unsigned long long)bound);
    hm__spool_direct(HM_SPOOL_PLACE, (uint32_t)(flags | (o->global ? HM_PLACED_GLOBAL : 0)), o->addr, o->size, o->site, m);
}

/* A refused bind is reported (HM_PLACED_FAILED; hetmem run then exits 1)
 * rather than ending the program: the allocation is made already, and the
 * program's work would be lost with it. The first refusal of a process
 * says why; the report counts the others. */
static int mbind_range(uint64_t a, uint64_t len, int dev, int move)
{
    if (dev < 0 || !len)
        return 0;
    int r = hm__os_mbind((void *)(uintptr_t)a, (size_t)len, B.mask[dev], move);
    static int told;
    if (r && !__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        hm__pdiag("mbind(%#llx, %llu, %s) failed: %s", (unsigned long long)a, (unsigned long long)len,
                  B.dname[dev], strerror(-r));
    return r;
}

/* Places (or re-places, with move) one object per the placement in the
 * current phase, charging capacity and spilling when the device is full. */
static void place(obj_t *o, int move)
{
    const char *phase = B.nphase ? B.phase[B.nphase - 1] : NULL;
    hm_object_desc_t d = {o->site, obj_name(o), o->addr, o->size, hm__site_source(o->site)};
    hm_place_t pl;
    hm_placement_match(B.pl, phase, &d, &pl);
    uint64_t base, pages;
    obj_span(o, &base, &pages);
    uint64_t on_dev = pl.pages_percent >= 100 ? pages : pages * (uint64_t)pl.pages_percent / 100;
    uint64_t bytes = on_dev * B.pg, rest = (pages - on_dev) * B.pg;
    int old = o->dev;
    uncharge(o); /* both parts of what it held, remainder included */
    int dev = pl.device, flags = phase ? HM_PLACED_PHASE : 0;
    if (dev < 0 || dev >= B.ndev)
        dev = -1;
    if (dev >= 0 && B.used[dev] + bytes > B.cap[dev]) {
        int fb = pl.default_device >= 0 && pl.default_device < B.ndev ? pl.default_device : -1;
        flags |= HM_PLACED_SPILLED;
        if (fb == dev || (fb >= 0 && B.used[fb] + bytes + rest > B.cap[fb]))
            fb = -1;
        dev = fb;
        on_dev = pages;
        bytes = pages * B.pg;
        rest = 0;
    }
    if (!pages) /* a global within two pages: nothing of its own to bind */
        dev = -1;
    if (dev < 0)
        flags |= HM_PLACED_UNBOUND;
    if (move && old == dev && pl.pages_percent >= 100)
        goto charge; /* nothing moves */
    /* A global's pages may hold data already (initialised data, or written
     * by constructors): they move with it from the start. */
    int mv = move || o->global, refused = 0;
    if (dev >= 0 && (pl.pages_percent >= 100 || (flags & HM_PLACED_SPILLED))) {
        refused = mbind_range(base, pages * B.pg, dev, mv) != 0;
    } else if (dev >= 0) {
        /* Page split: runs of pages going to the same device, one mbind each. */
        int def = pl.default_device;
        uint64_t run_start = base;
        int run_dev = hm_placement_page_device(&pl, base);
        for (uint64_t v = base + B.pg; v <= base + pages * B.pg; v += B.pg) {
            int dv = v < base + pages * B.pg ? hm_placement_page_device(&pl, v) : -2;
            if (dv != run_dev) {
                refused |= mbind_range(run_start, v - run_start, run_dev == pl.device ? dev : def, mv) != 0;
                run_start = v;
                run_dev = dv;
            }
        }
        if (def >= 0 && def < B.ndev && rest) {
            B.used[def] += rest;
            if (B.used[def] > B.peak[def])
                B.peak[def] = B.used[def];
            o->rest_dev = (int16_t)def;
            o->rest = rest;
        }
    }
    if (refused) { /* not where asked: charged nowhere, reported as failed */
        flags |= HM_PLACED_FAILED;
        if (o->rest_dev >= 0)
            B.used[o->rest_dev] -= o->rest;
        o->rest = 0;
        o->rest_dev = -1;
        dev = -1;
    }
    if (move && old != dev && !refused)
        flags |= HM_PLACED_MOVED;
charge:
    o->dev = (int16_t)dev;
    o->bytes = dev >= 0 ? bytes : 0;
    if (dev >= 0) {
        B.used[dev] += bytes;
        if (B.used[dev] > B.peak[dev])
            B.peak[dev] = B.used[dev];
    }
    /* Re-placements are reported only when something changed. */
    if (!move || (flags & HM_PLACED_MOVED) || o->want != pl.device)
        report(o, pl.device, flags, phase, dev >= 0 ? pages * B.pg : 0);
    o->want = (int16_t)pl.device;
}

/* ---------------------------------------------------------- global arrays */

/* Global and static arrays are objects, as in hetmem sim (src/inst/rt.c),
 * so that a placement and a trace mean the same in both: which ones is
 * hm__placement_globals()'s rule. Their site id and record are the ones
 * hetmem sim gives them (hm__site_global), and a recording gets an
 * allocation and a name record for each, as a heap object has, so that
 * samples in them are attributed. The others stay with the program's
 * static data, unbound. */
static int on_global(void *ctx, int module, uintptr_t addr, size_t size, const char *name)
{
    (void)ctx, (void)module;
    uint64_t site = hm__site_global(addr, name); /* before placing: a file:line rule may name it */
    lock();
    obj_t *o = insert(addr, size);
    if (!o) {
        B.dropped++;
        unlock();
        return 0;
    }
    o->site = site;
    o->sym = name;
    o->global = 1;
    if (B.active)
        place(o, 0);
    unlock();
    hm__ev_alloc(addr, size, site);
    hm__ev_name(addr, name);
    return 1;
}

void hm__bind_globals(void)
{
    /* Recording writes their records; a placement places them. Before the
     * program's constructors write them. */
    if (!B.t || !(B.active || (hm__opt.record && hm__opt.events)))
        return;
    int dropped = 0;
    hm__placement_globals(B.active ? B.pl : NULL, 0, on_global, NULL, &dropped);
    lock();
    B.dropped += (uint64_t)dropped;
    unlock();
}

static void parse_capacity(void)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", hm__opt.capacity);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        uint64_t v;
        if (!eq)
            continue;
        *eq = '\0';
        if (hm__parse_size(eq + 1, &v) != 0)
            continue;
        for (int i = 0; i < B.ndev; i++)
            if (!strcmp(B.dname[i], t))
                B.cap[i] = v;
    }
}

void hm__bind_init(void)
{
    B.pg = (size_t)sysconf(_SC_PAGESIZE);
    if (hm__objtab_open_with(&B.t, tab_alloc, tab_free) != 0)
        B.t = NULL;
    hm_os_info_t *info = NULL;
    char why[400];
    /* A binding or a placement asked for and not applied would leave the
     * program running on other memory than asked, with nothing to show
     * for it: the program does not start (hetmem run and record check the
     * same before they start it, so this is a file changed or gone since,
     * or the runtime started by hand). */
    if (hm__opt.bind[0] || hm__opt.placement[0]) {
        info = malloc(sizeof *info);
        if (!info)
            hm__env_refuse(hm__opt.placement[0] ? HM_ENV_PLACEMENT : HM_ENV_BIND,
                           hm__opt.placement[0] ? hm__opt.placement : hm__opt.bind, strerror(ENOMEM));
        hm__os_probe(info);
    }
    if (hm__opt.bind[0]) {
        uint64_t m;
        int r = hm__os_resolve_device(info, hm__opt.bind, &m);
        if (!r)
            r = hm__os_set_mempolicy_bind(m);
        if (r) {
            snprintf(why, sizeof why, "%s%s%s", hm_strerror(r), *hm_errdetail() ? ": " : "", hm_errdetail());
            hm__env_refuse(HM_ENV_BIND, hm__opt.bind, why);
        }
    }
    if (hm__opt.placement[0]) {
        int r = hm_placement_load(&B.pl, hm__opt.placement, NULL, 0);
        if (r) {
            snprintf(why, sizeof why, "%s%s%s", hm_strerror(r), *hm_errdetail() ? ": " : "", hm_errdetail());
            hm__env_refuse(HM_ENV_PLACEMENT, hm__opt.placement, why);
        }
        for (B.ndev = 0; B.ndev < MAXDEV && hm_placement_device_name(B.pl, B.ndev); B.ndev++) {
            const char *n = hm_placement_device_name(B.pl, B.ndev);
            B.dname[B.ndev] = n;
            if ((r = hm__os_resolve_device(info, n, &B.mask[B.ndev])) != 0) {
                snprintf(why, sizeof why, "%s%s%s", hm_strerror(r), *hm_errdetail() ? ": " : "", hm_errdetail());
                hm__env_refuse(HM_ENV_PLACEMENT, hm__opt.placement, why);
            }
            for (int k = 0; k < info->nnodes; k++)
                if (B.mask[B.ndev] >> info->nodes[k].id & 1)
                    B.cap[B.ndev] += info->nodes[k].mem_total;
        }
        parse_capacity();
        B.active = B.t != NULL;
    }
    free(info);
}

int hm__bind_active(void) { return B.active; }

void *hm__bind_alloc(size_t size, size_t align, int zero, uint64_t site)
{
    (void)zero; /* fresh anonymous pages are zero */
    if (!B.active || align > B.pg)
        return NULL;
    size_t len = (size + B.pg - 1) & ~(B.pg - 1);
    void *p = hm__real.mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    lock();
    obj_t *o = insert((uint64_t)(uintptr_t)p, size);
    if (!o) {
        B.dropped++;
        unlock();
        hm__real.munmap(p, len);
        return NULL;
    }
    o->size = size;
    o->site = site;
    o->own = 1;
    atomic_fetch_add(&B.own, 1);
    place(o, 0);
    unlock();
    hm__ev_alloc((uint64_t)(uintptr_t)p, size, site);
    return p;
}

void hm__obj_add(void *p, size_t size, uint64_t site)
{
    lock();
    obj_t *o = insert((uint64_t)(uintptr_t)p, size);
    if (o) {
        o->size = size;
        o->site = site;
    } else {
        B.dropped++;
    }
    unlock();
    hm__ev_alloc((uint64_t)(uintptr_t)p, size, site);
}

int hm__obj_remove(void *p, int *own, size_t *size)
{
    lock();
    hm_objtab_entry_t e;
    if (!B.t || hm__objtab_remove(B.t, (uint64_t)(uintptr_t)p, &e) != 0) {
        unlock();
        return 0;
    }
    obj_t *o = obj_at(e.id);
    *own = o->own;
    *size = o->size;
    uncharge(o);
    obj_release(e.id);
    unlock();
    hm__ev_free((uint64_t)(uintptr_t)p);
    return 1;
}

int hm__bind_owns(void *p, size_t *size)
{
    if (!atomic_load_explicit(&B.own, memory_order_relaxed) || ((uintptr_t)p & (B.pg - 1)))
        return 0;
    lock();
    obj_t *o = find((uint64_t)(uintptr_t)p);
    int r = o && o->own;
    if (r)
        *size = o->size;
    unlock();
    return r;
}

void hm__bind_release(void *p, size_t size)
{
    atomic_fetch_sub(&B.own, 1);
    hm__real.munmap(p, (size + B.pg - 1) & ~(B.pg - 1));
}

void hm__bind_fini(void)
{
    if (!B.active)
        return;
    for (int i = 0; i < B.ndev; i++)
        hm__spool_direct(HM_SPOOL_PLACE + 4, 0, B.cap[i], B.peak[i], B.used[i], B.dname[i]);
    char *u = hm_placement_unmatched(B.pl);
    if (u) {
        /* One record per rule: a spool payload holds at most 4000 bytes. */
        for (char *save, *line = strtok_r(u, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            hm__spool_direct(HM_SPOOL_PLACE + 3, 0, 0, 0, 0, line);
        free(u);
    }
    if (B.dropped) {
        char m[96];
        snprintf(m, sizeof m, "%llu objects not tracked (object table full)", (unsigned long long)B.dropped);
        hm__spool_direct(HM_SPOOL_ERROR, 0, B.dropped, 0, 0, m);
    }
}

void hm__bind_atfork_child(void)
{
    /* The child inherits the table and the memory: nothing to redo, but the
     * lock may have been held by a thread that does not exist here. */
    atomic_store(&B.lock, 0);
}

/* ---------------------------------------------------------- hetmem.h API */

/* At a phase boundary every live object is matched again under the new
 * innermost phase, as in hetmem sim: in record order (which follows the
 * program's allocations and frees, not the addresses the allocator and
 * ASLR gave them, so the same program re-places in the same order, and
 * spills the same objects, on every run), those leaving their device for
 * the default one first, so that the room they free is there for those
 * arriving. */
static void replace_all(void)
{
    if (!B.t)
        return;
    const char *phase = B.nphase ? B.phase[B.nphase - 1] : NULL;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t id = 0; id < B.nobj; id++) {
            obj_t *o = obj_at(id);
            if (!o->live || !(o->own || o->global))
                continue;
            hm_object_desc_t d = {o->site, obj_name(o), o->addr, o->size, hm__site_source(o->site)};
            hm_place_t pl;
            hm_placement_match(B.pl, phase, &d, &pl);
            int out = pl.pages_percent == 0 || pl.device == pl.default_device;
            if (out == (pass == 0))
                place(o, 1);
        }
}

EXPORT void hm_rt_phase_begin(const char *name)
{
    if (!name)
        return;
    int g = hm__guard;
    hm__guard = 1;
    hm__ev_phase(1, name);
    if (B.active && hm_placement_has_phases(B.pl)) {
        lock();
        /* SPMD codes call this from every thread: one phase, counted. */
        if (B.nphase && !strcmp(B.phase[B.nphase - 1], name)) {
            B.phase_ref[B.nphase - 1]++;
        } else if (B.nphase < 16) {
            B.phase[B.nphase] = strdup(name);
            B.phase_ref[B.nphase++] = 1;
            replace_all();
        }
        unlock();
    }
    hm__guard = g;
}

EXPORT void hm_rt_phase_end(const char *name)
{
    if (!name)
        return;
    int g = hm__guard;
    hm__guard = 1;
    hm__ev_phase(0, name);
    if (B.active && hm_placement_has_phases(B.pl)) {
        lock();
        if (B.nphase && !strcmp(B.phase[B.nphase - 1], name) && --B.phase_ref[B.nphase - 1] == 0) {
            free((void *)B.phase[--B.nphase]);
            replace_all();
        }
        unlock();
    }
    hm__guard = g;
}

EXPORT void hm_rt_name(const void *ptr, const char *name)
{
    if (!ptr || !name)
        return;
    int g = hm__guard;
    hm__guard = 1;
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    lock();
    const hm_objtab_entry_t *e = B.t ? hm__objtab_find(B.t, a) : NULL;
    obj_t *hit = e ? obj_at(e->id) : NULL;
    if (hit) {
        snprintf(hit->name, sizeof hit->name, "%s", name);
        if (B.active && (hit->own || hit->global))
            place(hit, 1);
    }
    unlock();
    hm__ev_name(a, name);
    hm__guard = g;
}
