/* The memory store's arena. Samples are carved from 1 MiB blocks (a larger
 * sample gets a block of its own), so a store of many small samples costs
 * a few large allocations instead of one per sample; the samples received
 * from one peer in one exchange share a block of their own (a region), into
 * which MPI writes them directly. A block is freed when its last sample
 * leaves. Since samples leave at random, blocks thin out over epochs, and
 * the holes they leave are memory the store holds beyond its samples.
 * ps__arena_compact() moves the samples of blocks less than half live, and
 * of the next sparsest while the holes exceed a slack, a whole block at a
 * time, into the holes of denser blocks (samples of one size fill holes of
 * that size exactly, so each byte moved frees a byte), and what the holes
 * cannot take of blocks less than half live into fresh blocks.
 *
 * An emptied block is kept as a spare, up to spare_max bytes, and a block
 * asked for later reuses the smallest spare that fits closely: the memory
 * store empties and refills about Q*n*s bytes every epoch, and a freshly
 * mapped block costs a page fault and a page clear per 4 KiB on first
 * touch, which is about as much as copying the data into it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BLOCK (UINT64_C(1) << 20)
#define ALIGN 16

struct ps__block {
    ps__block_t *prev, *next;
    size_t cap, used, live;
    int evac;
    _Alignas(ALIGN) unsigned char data[];
};

static void unlink_block(ps__arena_t *a, ps__block_t *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        a->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    if (a->cur == b)
        a->cur = NULL;
    a->reserved -= b->cap;
    if (b->cap > a->spare_max) {
        free(b);
        return;
    }
    /* The newest spares are kept: the shapes of the last exchange are the
     * likeliest to come back (the blocks the initial load carved do not). */
    b->next = a->spare;
    a->spare = b;
    a->spare_bytes += b->cap;
    if (a->spare_bytes > a->spare_max)
        ps__arena_trim(a, a->spare_max);
}

void ps__arena_trim(ps__arena_t *a, size_t keep)
{
    /* Newest first, as they are listed (the list is short: a few blocks
     * per peer). */
    ps__block_t **pp = &a->spare;
    size_t kept = 0;
    while (*pp) {
        ps__block_t *b = *pp;
        if (kept + b->cap <= keep) {
            kept += b->cap;
            pp = &b->next;
        } else {
            *pp = b->next;
            a->spare_bytes -= b->cap;
            free(b);
        }
    }
}

/* The smallest spare of at least `cap` bytes and at most `cap + extra`
 * (more would hold memory the store does not use). */
static ps__block_t *take_spare(ps__arena_t *a, size_t cap, size_t extra)
{
    ps__block_t **best = NULL;
    for (ps__block_t **pp = &a->spare; *pp; pp = &(*pp)->next) {
        size_t c = (*pp)->cap;
        if (c >= cap && c - cap <= extra && (!best || c < (*best)->cap))
            best = pp;
    }
    if (!best)
        return NULL;
    ps__block_t *b = *best;
    *best = b->next;
    a->spare_bytes -= b->cap;
    return b;
}

size_t ps__arena_need(size_t n)
{
    size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    return need ? need : ALIGN;
}

/* A block of at least `cap` bytes. A region (`slack`) gets a sixteenth
 * more, rounded to pages, when it is freshly allocated: the next epoch's
 * streams differ in length by a few samples, and the slack lets them fit
 * this one when it comes back as a spare. Pages never touched cost no
 * memory. */
static ps__block_t *new_block(ps__arena_t *a, size_t cap, size_t extra, int slack)
{
    ps__block_t *b = take_spare(a, cap, extra);
    if (b) {
        cap = b->cap;
    } else {
        if (slack && cap <= SIZE_MAX / 2)
            cap = (cap + cap / 16 + 4095) & ~(size_t)4095;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
    }
    b->cap = cap;
    b->used = b->live = 0;
    b->evac = 0;
    b->prev = NULL;
    b->next = a->head;
    if (a->head)
        a->head->prev = b;
    a->head = b;
    a->reserved += cap;
    return b;
}

void *ps__arena_region(ps__arena_t *a, size_t bytes, size_t live, ps__block_t **blk)
{
    ps__block_t *b = new_block(a, bytes ? bytes : 1, bytes / 2, 1);
    if (!b)
        return NULL;
    b->used = b->cap; /* nothing else is carved from it */
    b->live = live;
    a->live += live;
    *blk = b;
    return b->data;
}

void *ps__arena_alloc(ps__arena_t *a, size_t n, ps__block_t **blk)
{
    size_t need = ps__arena_need(n);
    ps__block_t *b = a->cur;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > BLOCK / 4 ? need : BLOCK;
        if (!(b = new_block(a, cap, cap == BLOCK ? SIZE_MAX : cap / 4, 0)))
            return NULL;
        /* A large sample's own block does not replace the current block. */
        if (cap == BLOCK || !a->cur)
            a->cur = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    b->live += need;
    a->live += need;
    *blk = b;
    return p;
}

void ps__arena_free(ps__arena_t *a, ps__block_t *b, size_t n)
{
    size_t need = ps__arena_need(n);
    b->live -= need;
    a->live -= need;
    if (b->live == 0 && b != a->cur)
        unlink_block(a, b);
}

void ps__arena_destroy(ps__arena_t *a)
{
    a->spare_max = 0;
    while (a->head)
        unlink_block(a, a->head);
    ps__arena_trim(a, 0);
    memset(a, 0, sizeof *a);
}

/* A live sample's place, for compaction (16 bytes a sample while it
 * runs; its block is ent[i].blk). */
typedef struct {
    unsigned char *p;
    uint64_t i; /* its entry */
} ext_t;

/* Sorts by address (blocks are disjoint, so each block's samples end up
 * together, in order): least-significant-digit radix sort, 16 bits a pass,
 * over the address bits that differ; a comparison sort of every entry cost
 * about as much as the moves themselves. */
static int sort_ext(ext_t *v, size_t n)
{
    if (n < 2)
        return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)v[i].p;
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    ext_t *t = malloc(n * sizeof *t);
    size_t *cnt = malloc(65536 * sizeof *cnt);
    if (!t || !cnt) {
        free(t);
        free(cnt);
        return -1;
    }
    uintptr_t span = hi - lo;
    for (int sh = 0; sh == 0 || (sh < (int)(8 * sizeof span) && (span >> sh)); sh += 16) {
        memset(cnt, 0, 65536 * sizeof *cnt);
        for (size_t i = 0; i < n; i++)
            cnt[(((uintptr_t)v[i].p - lo) >> sh) & 0xffff]++;
        size_t at = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = cnt[d];
            cnt[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            t[cnt[(((uintptr_t)v[i].p - lo) >> sh) & 0xffff]++] = v[i];
        memcpy(v, t, n * sizeof *v);
    }
    free(t);
    free(cnt);
    return 0;
}

/* A block and its samples (a run of the sorted ext_t). */
typedef struct {
    ps__block_t *blk;
    size_t first, count;
    size_t hole0, nholes; /* its holes, in the hole array */
} grp_t;

static int cmp_density(const void *x, const void *y)
{
    const grp_t *a = x, *b = y;
    /* live / cap, compared without division */
    unsigned __int128 l = (unsigned __int128)a->blk->live * b->blk->cap, r = (unsigned __int128)b->blk->live * a->blk->cap;
    return l < r ? -1 : l > r;
}

typedef struct {
    unsigned char *p;
    size_t len;
    ps__block_t *blk;
} hole_t;

/* Moves entry i's sample to dst (in block db). */
static void move_to(ps__arena_t *a, ps__entry_t *e, unsigned char *dst, ps__block_t *db)
{
    size_t need = ps__arena_need(e->size);
    if (e->size)
        memcpy(dst, e->data, e->size);
    db->live += need;
    a->live += need;
    ps__arena_free(a, e->blk, e->size);
    e->data = dst;
    e->blk = db;
}

/* Fills the holes of the denser blocks with the samples of the sparsest
 * ones, a whole block at a time: every block less than half live, and
 * more while the bytes held beyond the live samples exceed `target`. */
static void fill_holes(ps__arena_t *a, ps__entry_t *ent, uint64_t n, size_t target)
{
    size_t ne = 0;
    ext_t *ext = malloc((size_t)(n ? n : 1) * sizeof *ext);
    if (!ext)
        return;
    for (uint64_t i = 0; i < n; i++)
        if (ent[i].blk)
            ext[ne++] = (ext_t){ent[i].data, i};
    if (sort_ext(ext, ne) < 0)
        goto out_ext;
    size_t ng = 0;
    for (size_t k = 0; k < ne; k++)
        ng += k == 0 || ent[ext[k].i].blk != ent[ext[k - 1].i].blk;
    grp_t *g = malloc((ng ? ng : 1) * sizeof *g);
    /* At most one hole before each sample, one after the last. */
    hole_t *h = malloc((ne + ng + 1) * sizeof *h);
    if (!g || !h)
        goto out;
    ng = 0;
    for (size_t k = 0; k < ne; k++) {
        if (k == 0 || ent[ext[k].i].blk != ent[ext[k - 1].i].blk)
            g[ng++] = (grp_t){ent[ext[k].i].blk, k, 0, 0, 0};
        g[ng - 1].count++;
    }
    /* Densest blocks first: their holes take the samples. */
    qsort(g, ng, sizeof *g, cmp_density);
    size_t nh = 0;
    for (size_t j = ng; j-- > 0;) {
        ps__block_t *b = g[j].blk;
        unsigned char *at = b->data, *end = b->data + b->used;
        g[j].hole0 = nh;
        for (size_t k = g[j].first; k <= g[j].first + g[j].count; k++) {
            unsigned char *next = k < g[j].first + g[j].count ? ext[k].p : end;
            unsigned char *al = (unsigned char *)(((uintptr_t)at + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
            if (next > al)
                h[nh++] = (hole_t){al, (size_t)(next - al), b};
            if (k < g[j].first + g[j].count && ext[k].p + ent[ext[k].i].size > at)
                at = ext[k].p + ent[ext[k].i].size;
        }
        g[j].nholes = nh - g[j].hole0;
    }
    /* Sources from the sparse end, holes from the dense end, until they
     * meet: a source's samples go only to blocks denser than it, and only
     * a source that the holes left can take whole moves (a block half
     * emptied would only have moved bytes). */
    size_t hc = 0, hend = nh, avail = 0; /* holes [hc, hend) are open; avail: their bytes */
    for (size_t k = 0; k < nh; k++)
        avail += h[k].len;
    for (size_t si = 0; si < ng; si++) {
        grp_t *sg = &g[si];
        if (a->reserved - a->live <= target && 2 * sg->blk->live >= sg->blk->cap)
            break;
        for (size_t k = sg->hole0 > hc ? sg->hole0 : hc; k < hend; k++)
            avail -= h[k].len; /* its own holes, and those of sparser blocks */
        hend = sg->hole0 < hend ? sg->hole0 : hend;
        if (sg->blk == a->cur || sg->blk->live > avail)
            continue;
        for (size_t k = sg->first; k < sg->first + sg->count; k++) {
            ps__entry_t *e = &ent[ext[k].i];
            size_t need = ps__arena_need(e->size);
            while (hc < hend && h[hc].len < e->size)
                avail -= h[hc++].len; /* first fit: equal sizes fill the holes in order */
            if (hc >= hend)
                goto out; /* the holes left are too small for the samples left */
            size_t take = need < h[hc].len ? need : h[hc].len;
            unsigned char *p = h[hc].p;
            h[hc].p += take;
            h[hc].len -= take;
            avail -= take;
            move_to(a, e, p, h[hc].blk);
        }
    }
out:
    free(g);
    free(h);
out_ext:
    free(ext);
}

int ps__arena_compact(ps__arena_t *a, ps__entry_t *ent, uint64_t n, size_t slack)
{
    int sparse = 0;
    for (ps__block_t *b = a->head; b && !sparse; b = b->next)
        sparse = b != a->cur && 2 * b->live < b->cap;
    if (!sparse && a->reserved - a->live <= slack)
        return 0;
    /* Blocks less than half live cost less to move than the block they
     * free (which becomes a spare for the next exchange's regions, whose
     * fresh pages would fault); the holes take them first. Above the
     * slack, more blocks move, down to half the slack, so that the holes
     * of the next few exchanges fit before it is needed again. */
    fill_holes(a, ent, n, a->reserved - a->live > slack ? slack / 2 : SIZE_MAX);
    /* What the holes could not take (samples of other sizes than the
     * holes left): blocks less than half live move into fresh blocks.
     * Only sparse blocks move, so the cost is at most the live bytes of
     * those blocks, and every block left is at least half live. The
     * samples that move go back to back into spares, whatever their
     * sizes, then into one fresh block for the rest. */
    size_t move = 0;
    for (ps__block_t *b = a->head; b; b = b->next) {
        b->evac = b != a->cur && 2 * b->live < b->cap;
        if (b->evac)
            move += b->live;
    }
    ps__block_t *dst = NULL;
    for (uint64_t i = 0; i < n && move; i++) {
        if (!ent[i].blk || !ent[i].blk->evac)
            continue;
        size_t need = ps__arena_need(ent[i].size);
        if (need > move)
            break; /* ent[] and the blocks disagree: move no more */
        if (!dst || need > dst->cap - dst->used) {
            /* A spare that holds what is left to move, up to a block (the
             * smallest spare that held one sample made the next sample look
             * for a spare again, through the whole list). */
            size_t want = move < BLOCK ? move : BLOCK;
            if (!(dst = new_block(a, need > want ? need : want, SIZE_MAX, 0)) && !(dst = new_block(a, move, 0, 0)))
                break; /* compaction only saves memory: failing it is not an error */
        }
        unsigned char *p = dst->data + dst->used;
        dst->used += need;
        move -= need;
        move_to(a, &ent[i], p, dst);
    }
    for (ps__block_t *b = a->head; b; b = b->next)
        b->evac = 0;
    return 0;
}
