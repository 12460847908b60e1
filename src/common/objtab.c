/* Live-object interval table (see objtab.h).
 *
 * Nodes live in one array addressed by 32-bit index (0 is "none"), so the
 * whole table is one block the interposer can mmap, and growing it is one
 * copy. Split and merge are written as loops over link pointers: no
 * recursion depth to worry about inside a signal-sensitive allocator. */
#include "common/objtab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/error.h"

typedef struct {
    hm_objtab_entry_t e;
    uint32_t l, r;
    uint32_t pri; /* 0: free node (its l links the free list) */
} node_t;

struct hm_objtab {
    node_t *n;
    uint32_t cap, root, free, count;
    uint32_t rng;
    hm_objtab_alloc_fn alloc_fn;
    hm_objtab_free_fn free_fn;
};

#define MIN_CAP 64u

static void *std_alloc(size_t size) { return malloc(size); }
static void std_free(void *p, size_t size) { (void)size; free(p); }

static uint64_t last_byte(const hm_objtab_entry_t *e)
{
    uint64_t ext = e->size ? e->size : 1;
    return e->addr + (ext - 1) < e->addr ? UINT64_MAX : e->addr + (ext - 1);
}

static uint32_t next_pri(hm_objtab_t *t)
{
    uint32_t x = t->rng; /* xorshift32: priorities independent of addresses */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t->rng = x;
    return x | 1; /* never 0, which marks free nodes */
}

int hm__objtab_open_with(hm_objtab_t **out, hm_objtab_alloc_fn alloc_fn, hm_objtab_free_fn free_fn)
{
    *out = NULL;
    hm_objtab_t *t = alloc_fn(sizeof *t);
    if (!t)
        return -ENOMEM;
    memset(t, 0, sizeof *t);
    t->rng = 0x9e3779b9u;
    t->alloc_fn = alloc_fn;
    t->free_fn = free_fn;
    *out = t;
    return 0;
}

int hm__objtab_open(hm_objtab_t **out) { return hm__objtab_open_with(out, std_alloc, std_free); }

void hm__objtab_close(hm_objtab_t *t)
{
    if (!t)
        return;
    if (t->n)
        t->free_fn(t->n, (size_t)t->cap * sizeof(node_t));
    t->free_fn(t, sizeof *t);
}

/* Moves the nodes to an array of ncap entries (>= count + 1). Nodes whose
 * index does not fit are moved to free slots below ncap, and the link that
 * pointed at them (found by searching their key from the root) is fixed. */
static int resize(hm_objtab_t *t, uint32_t ncap)
{
    node_t *nn = t->alloc_fn((size_t)ncap * sizeof(node_t));
    if (!nn)
        return -ENOMEM;
    uint32_t keep = ncap < t->cap ? ncap : t->cap;
    if (t->n)
        memcpy(nn, t->n, (size_t)keep * sizeof(node_t));
    memset(nn + keep, 0, (size_t)(ncap - keep) * sizeof(node_t));
    if (ncap < t->cap) {
        uint32_t hole = 1;
        for (uint32_t i = ncap; i < t->cap; i++) {
            if (!t->n[i].pri)
                continue;
            while (nn[hole].pri)
                hole++; /* count < ncap, so a hole exists below ncap */
            nn[hole] = t->n[i];
            uint64_t k = t->n[i].e.addr;
            uint32_t *link = &t->root;
            while (*link != i) {
                /* A node on the path is either below ncap (in the new
                 * array) or not moved yet (still in the old one). */
                node_t *p = *link < ncap ? &nn[*link] : &t->n[*link];
                link = k < p->e.addr ? &p->l : &p->r;
            }
            *link = hole;
        }
    }
    if (t->n)
        t->free_fn(t->n, (size_t)t->cap * sizeof(node_t));
    t->n = nn;
    t->cap = ncap;
    t->free = 0;
    for (uint32_t i = ncap; i-- > 1;)
        if (!nn[i].pri) {
            nn[i].l = t->free;
            t->free = i;
        }
    return 0;
}

/* Splits subtree n into keys < k (*lo) and keys >= k (*hi). */
static void split(node_t *N, uint32_t n, uint64_t k, uint32_t *lo, uint32_t *hi)
{
    while (n) {
        if (N[n].e.addr < k) {
            *lo = n;
            lo = &N[n].r;
            n = N[n].r;
        } else {
            *hi = n;
            hi = &N[n].l;
            n = N[n].l;
        }
    }
    *lo = *hi = 0;
}

/* Joins a and b (every key of a below every key of b) into *out. */
static void merge(node_t *N, uint32_t a, uint32_t b, uint32_t *out)
{
    while (a && b) {
        if (N[a].pri > N[b].pri) {
            *out = a;
            out = &N[a].r;
            a = N[a].r;
        } else {
            *out = b;
            out = &N[b].l;
            b = N[b].l;
        }
    }
    *out = a ? a : b;
}

static uint32_t floor_node(const hm_objtab_t *t, uint64_t addr)
{
    uint32_t best = 0;
    for (uint32_t n = t->root; n;) {
        if (t->n[n].e.addr <= addr) {
            best = n;
            n = t->n[n].r;
        } else {
            n = t->n[n].l;
        }
    }
    return best;
}

const hm_objtab_entry_t *hm__objtab_find(const hm_objtab_t *t, uint64_t addr)
{
    uint32_t f = floor_node(t, addr);
    return f && last_byte(&t->n[f].e) >= addr ? &t->n[f].e : NULL;
}

const hm_objtab_entry_t *hm__objtab_get(const hm_objtab_t *t, uint64_t addr)
{
    uint32_t f = floor_node(t, addr);
    return f && t->n[f].e.addr == addr ? &t->n[f].e : NULL;
}

const hm_objtab_entry_t *hm__objtab_overlap(const hm_objtab_t *t, uint64_t addr, uint64_t size)
{
    hm_objtab_entry_t q = {addr, size, 0};
    uint32_t f = floor_node(t, last_byte(&q));
    /* Live ranges are disjoint and sorted: if the last one starting inside
     * the range ends before it, every earlier one does too. */
    return f && last_byte(&t->n[f].e) >= addr ? &t->n[f].e : NULL;
}

const hm_objtab_entry_t *hm__objtab_next(const hm_objtab_t *t, uint64_t addr)
{
    uint32_t best = 0;
    for (uint32_t n = t->root; n;) {
        if (t->n[n].e.addr >= addr) {
            best = n;
            n = t->n[n].l;
        } else {
            n = t->n[n].r;
        }
    }
    return best ? &t->n[best].e : NULL;
}

size_t hm__objtab_count(const hm_objtab_t *t) { return t->count; }

size_t hm__objtab_list(const hm_objtab_t *t, hm_objtab_entry_t *out, uint32_t *stack)
{
    size_t k = 0, depth = 0;
    uint32_t n = t->root;
    while (n || depth) {
        while (n) {
            stack[depth++] = n;
            n = t->n[n].l;
        }
        n = stack[--depth];
        out[k++] = t->n[n].e;
        n = t->n[n].r;
    }
    return k;
}

size_t hm__objtab_footprint(const hm_objtab_t *t) { return sizeof *t + (size_t)t->cap * sizeof(node_t); }

int hm__objtab_remove(hm_objtab_t *t, uint64_t addr, hm_objtab_entry_t *out)
{
    uint32_t *link = &t->root;
    while (*link && t->n[*link].e.addr != addr)
        link = addr < t->n[*link].e.addr ? &t->n[*link].l : &t->n[*link].r;
    uint32_t n = *link;
    if (!n)
        return HM_ENOTFOUND;
    if (out)
        *out = t->n[n].e;
    merge(t->n, t->n[n].l, t->n[n].r, link);
    memset(&t->n[n], 0, sizeof t->n[n]);
    t->n[n].l = t->free;
    t->free = n;
    t->count--;
    /* Give memory back once the table is mostly empty: it follows the live
     * count, so heavy churn with few live objects stays small. */
    if (t->cap > MIN_CAP && (uint64_t)t->count * 8 < t->cap)
        (void)resize(t, t->cap / 2); /* on failure the table stays as it is */
    return 0;
}

int hm__objtab_insert(hm_objtab_t *t, uint64_t addr, uint64_t size, uint64_t id)
{
    if (!t->free) {
        if (t->cap >= (1u << 31))
            return -ENOMEM;
        int r = resize(t, t->cap ? t->cap * 2 : MIN_CAP);
        if (r)
            return r;
    }
    const hm_objtab_entry_t *o;
    while ((o = hm__objtab_overlap(t, addr, size)) != NULL) {
        /* Removing may shrink the array; keep a free node in hand after it. */
        (void)hm__objtab_remove(t, o->addr, NULL);
        if (!t->free && resize(t, t->cap * 2))
            return -ENOMEM;
    }
    uint32_t n = t->free;
    t->free = t->n[n].l;
    t->n[n].e = (hm_objtab_entry_t){addr, size, id};
    t->n[n].pri = next_pri(t);
    /* Walk down while parents outrank it, then split that subtree under it. */
    uint32_t *link = &t->root;
    while (*link && t->n[*link].pri > t->n[n].pri)
        link = addr < t->n[*link].e.addr ? &t->n[*link].l : &t->n[*link].r;
    split(t->n, *link, addr, &t->n[n].l, &t->n[n].r);
    *link = n;
    t->count++;
    return 0;
}
