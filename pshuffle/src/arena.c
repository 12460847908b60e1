/* The memory store's arena. Samples are carved from 1 MiB blocks (a larger
 * sample gets a block of its own), so a store of many small samples costs
 * a few large allocations instead of one per sample; the samples received
 * from one peer in one exchange share a block of their own (a region), into
 * which MPI writes them directly. A block is freed when its last sample
 * leaves. Since samples leave at random, blocks thin out over epochs;
 * ps__arena_compact() moves the samples of blocks less than half live into
 * fresh blocks.
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

int ps__arena_compact(ps__arena_t *a, ps__entry_t *ent, uint64_t n)
{
    /* Only sparse blocks move, so the cost is at most the live bytes of
     * those blocks (after a global exchange, the few samples a rank kept),
     * and every block left is at least half live. The samples that move go
     * back to back into spares, whatever their sizes, then into one fresh
     * block for the rest. */
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
            if (!(dst = new_block(a, need, SIZE_MAX, 0)) && !(dst = new_block(a, move, 0, 0)))
                break; /* compaction only saves memory: failing it is not an error */
        }
        unsigned char *p = dst->data + dst->used;
        if (ent[i].size)
            memcpy(p, ent[i].data, ent[i].size);
        dst->used += need;
        dst->live += need;
        a->live += need;
        move -= need;
        ps__arena_free(a, ent[i].blk, ent[i].size);
        ent[i].data = p;
        ent[i].blk = dst;
    }
    for (ps__block_t *b = a->head; b; b = b->next)
        b->evac = 0;
    return 0;
}
