/* Object table, placement enforcement and the hetmem.h runtime API.
 *
 * In bind mode every tracked object gets its own page-aligned mapping, so
 * that mbind() moves exactly that object and nothing that shares its pages
 * (glibc's heap would mix neighbours into the same pages). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hetmem/placement.h"
#include "hetmem/trace.h"
#include "os/os.h"
#include "preload/preload_int.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 16
#define TABN (1u << 18)

enum { E_EMPTY = 0, E_LIVE = 1, E_TOMB = 2 };

typedef struct {
    uint64_t addr, size, site;
    char name[40];
    int16_t dev;        /* device holding it (-1: left to first touch) */
    int16_t want;       /* device the placement asked for last time */
    uint8_t own, state;
    uint32_t dense_i;   /* position in B.dense */
    uint64_t bytes;     /* bytes charged to dev */
} obj_t;

enum { PL_SPILLED = 1, PL_MOVED = 2, PL_PHASE = 4, PL_UNBOUND = 8 };

static struct {
    obj_t *tab;
    uint32_t *dense;            /* slots of live objects, for scans that must
                                   not touch the whole (mostly empty) table */
    size_t live, tombs;
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

static size_t slot_of(uint64_t a) { return (size_t)((a >> 4) * 0x9e3779b97f4a7c15ull >> 46) & (TABN - 1); }

static obj_t *find(uint64_t a)
{
    if (!B.tab)
        return NULL;
    for (size_t i = slot_of(a), n = 0; n < TABN; i = (i + 1) & (TABN - 1), n++) {
        obj_t *o = &B.tab[i];
        if (o->state == E_EMPTY)
            return NULL;
        if (o->state == E_LIVE && o->addr == a)
            return o;
    }
    return NULL;
}

static obj_t *insert(uint64_t a)
{
    if (!B.tab || (B.live + B.tombs + 1) * 4 > (size_t)TABN * 3)
        return NULL;
    for (size_t i = slot_of(a);; i = (i + 1) & (TABN - 1)) {
        obj_t *o = &B.tab[i];
        if (o->state != E_LIVE) {
            if (o->state == E_TOMB)
                B.tombs--;
            memset(o, 0, sizeof *o);
            o->state = E_LIVE;
            o->addr = a;
            o->dev = -1;
            o->want = -1;
            o->dense_i = (uint32_t)B.live;
            B.dense[B.live++] = (uint32_t)i;
            return o;
        }
    }
}

/* ---------------------------------------------------------------- binding */

static void report(const obj_t *o, int want, int flags, const char *phase)
{
    char m[200];
    snprintf(m, sizeof m, "%s %s %s %s", want >= 0 ? B.dname[want] : "-", o->dev >= 0 ? B.dname[o->dev] : "-",
             o->name[0] ? o->name : "-", phase ? phase : "-");
    hm__spool_direct(HM_SPOOL_PLACE, (uint32_t)flags, o->addr, o->size, o->site, m);
}

static int mbind_range(uint64_t a, uint64_t len, int dev, int move)
{
    if (dev < 0 || !len)
        return 0;
    int r = hm__os_mbind((void *)(uintptr_t)a, (size_t)len, B.mask[dev], move);
    if (r)
        hm__pdiag("mbind(%#llx, %llu, %s) failed: %s", (unsigned long long)a, (unsigned long long)len,
                  B.dname[dev], strerror(-r));
    return r;
}

/* Places (or re-places, with move) one object per the placement in the
 * current phase, charging capacity and spilling when the device is full. */
static void place(obj_t *o, int move)
{
    const char *phase = B.nphase ? B.phase[B.nphase - 1] : NULL;
    hm_object_desc_t d = {o->site, o->name[0] ? o->name : NULL, o->addr, o->size};
    hm_place_t pl;
    hm_placement_match(B.pl, phase, &d, &pl);
    uint64_t pages = (o->size + B.pg - 1) / B.pg;
    uint64_t on_dev = pl.pages_percent >= 100 ? pages : pages * (uint64_t)pl.pages_percent / 100;
    uint64_t bytes = on_dev * B.pg, rest = (pages - on_dev) * B.pg;
    int old = o->dev;
    if (old >= 0)
        B.used[old] -= o->bytes;
    int dev = pl.device, flags = phase ? PL_PHASE : 0;
    if (dev < 0 || dev >= B.ndev)
        dev = -1;
    if (dev >= 0 && B.used[dev] + bytes > B.cap[dev]) {
        int fb = pl.default_device >= 0 && pl.default_device < B.ndev ? pl.default_device : -1;
        flags |= PL_SPILLED;
        if (fb == dev || (fb >= 0 && B.used[fb] + bytes + rest > B.cap[fb]))
            fb = -1;
        dev = fb;
        on_dev = pages;
        bytes = pages * B.pg;
        rest = 0;
    }
    if (dev < 0)
        flags |= PL_UNBOUND;
    if (move && old == dev && pl.pages_percent >= 100)
        goto charge; /* nothing moves */
    if (dev >= 0 && (pl.pages_percent >= 100 || (flags & PL_SPILLED))) {
        mbind_range(o->addr, pages * B.pg, dev, move);
    } else if (dev >= 0) {
        /* Page split: runs of pages going to the same device, one mbind each. */
        int def = pl.default_device;
        uint64_t run_start = o->addr;
        int run_dev = hm_placement_page_device(&pl, o->addr);
        for (uint64_t v = o->addr + B.pg; v <= o->addr + pages * B.pg; v += B.pg) {
            int dv = v < o->addr + pages * B.pg ? hm_placement_page_device(&pl, v) : -2;
            if (dv != run_dev) {
                mbind_range(run_start, v - run_start, run_dev == pl.device ? dev : def, move);
                run_start = v;
                run_dev = dv;
            }
        }
        if (def >= 0 && def < B.ndev) {
            B.used[def] += rest;
            if (B.used[def] > B.peak[def])
                B.peak[def] = B.used[def];
        }
    }
    if (move && old != dev)
        flags |= PL_MOVED;
charge:
    o->dev = (int16_t)dev;
    o->bytes = dev >= 0 ? bytes : 0;
    if (dev >= 0) {
        B.used[dev] += bytes;
        if (B.used[dev] > B.peak[dev])
            B.peak[dev] = B.used[dev];
    }
    /* Re-placements are reported only when something changed. */
    if (!move || (flags & PL_MOVED) || o->want != pl.device)
        report(o, pl.device, flags, phase);
    o->want = (int16_t)pl.device;
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
    B.tab = hm__real.mmap(NULL, (size_t)TABN * sizeof(obj_t), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    B.dense = hm__real.mmap(NULL, (size_t)TABN * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (B.tab == MAP_FAILED || B.dense == MAP_FAILED)
        B.tab = NULL;
    hm_os_info_t *info = NULL;
    if (hm__opt.bind[0] || hm__opt.placement[0]) {
        info = malloc(sizeof *info);
        if (!info)
            return;
        hm__os_probe(info);
    }
    if (hm__opt.bind[0]) {
        uint64_t m;
        int r = hm__os_resolve_device(info, hm__opt.bind, &m);
        if (!r)
            r = hm__os_set_mempolicy_bind(m);
        if (r)
            hm__pdiag("--bind %s: %s %s", hm__opt.bind, hm_strerror(r), hm_errdetail());
    }
    if (hm__opt.placement[0]) {
        int r = hm_placement_load(&B.pl, hm__opt.placement, NULL, 0);
        if (r) {
            hm__pdiag("placement %s: %s %s; running unbound", hm__opt.placement, hm_strerror(r), hm_errdetail());
            goto out;
        }
        for (B.ndev = 0; B.ndev < MAXDEV && hm_placement_device_name(B.pl, B.ndev); B.ndev++) {
            const char *n = hm_placement_device_name(B.pl, B.ndev);
            B.dname[B.ndev] = n;
            if ((r = hm__os_resolve_device(info, n, &B.mask[B.ndev])) != 0) {
                hm__pdiag("placement %s: %s; running unbound", hm__opt.placement, hm_errdetail());
                hm_placement_close(B.pl);
                B.pl = NULL;
                goto out;
            }
            for (int k = 0; k < info->nnodes; k++)
                if (B.mask[B.ndev] >> info->nodes[k].id & 1)
                    B.cap[B.ndev] += info->nodes[k].mem_total;
        }
        parse_capacity();
        B.active = B.tab != NULL;
    }
out:
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
    obj_t *o = insert((uint64_t)(uintptr_t)p);
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
    obj_t *o = insert((uint64_t)(uintptr_t)p);
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
    obj_t *o = find((uint64_t)(uintptr_t)p);
    if (!o) {
        unlock();
        return 0;
    }
    *own = o->own;
    *size = o->size;
    if (o->dev >= 0)
        B.used[o->dev] -= o->bytes;
    o->state = E_TOMB;
    uint32_t last = B.dense[--B.live];
    B.dense[o->dense_i] = last;
    B.tab[last].dense_i = o->dense_i;
    B.tombs++;
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
        hm__spool_direct(HM_SPOOL_PLACE + 3, 0, 0, 0, 0, u);
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

static void replace_all(void)
{
    for (size_t i = 0; i < B.live; i++)
        if (B.tab[B.dense[i]].own)
            place(&B.tab[B.dense[i]], 1);
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
    obj_t *hit = NULL;
    for (size_t i = 0; B.tab && i < B.live && !hit; i++) {
        obj_t *o = &B.tab[B.dense[i]];
        if (a >= o->addr && a < o->addr + o->size)
            hit = o;
    }
    if (hit) {
        snprintf(hit->name, sizeof hit->name, "%s", name);
        if (B.active && hit->own)
            place(hit, 1);
    }
    unlock();
    hm__ev_name(a, name);
    hm__guard = g;
}
