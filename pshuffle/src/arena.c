/* The memory store's arena. Samples are carved from 1 MiB blocks (a larger
 * sample gets a block of its own), so a store of many small samples costs
 * a few large allocations instead of one per sample; the samples received
 * from one peer in one exchange share a block of their own (a region), into
 * which MPI writes them directly. A block is freed when its last sample
 * leaves. Since samples leave at random, blocks thin out over epochs;
 * ps__arena_compact() moves the samples of blocks less than half live into
 * fresh blocks. */
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
    free(b);
}

size_t ps__arena_need(size_t n)
{
    size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    return need ? need : ALIGN;
}

static ps__block_t *new_block(ps__arena_t *a, size_t cap)
{
    ps__block_t *b = malloc(sizeof *b + cap);
    if (!b)
        return NULL;
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
    ps__block_t *b = new_block(a, bytes ? bytes : 1);
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
        if (!(b = new_block(a, cap)))
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
    while (a->head)
        unlink_block(a, a->head);
    memset(a, 0, sizeof *a);
}

int ps__arena_compact(ps__arena_t *a, ps__entry_t *ent, uint64_t n)
{
    /* Only sparse blocks move, so the cost is at most the live bytes of
     * those blocks (after a global exchange, the few samples a rank kept),
     * and every block left is at least half live. */
    int any = 0;
    for (ps__block_t *b = a->head; b; b = b->next) {
        b->evac = b != a->cur && 2 * b->live < b->cap;
        any |= b->evac;
    }
    if (!any)
        return 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!ent[i].blk || !ent[i].blk->evac)
            continue;
        ps__block_t *b;
        void *p = ps__arena_alloc(a, ent[i].size, &b);
        if (!p)
            break; /* compaction only saves memory; failing it is not an error */
        if (ent[i].size)
            memcpy(p, ent[i].data, ent[i].size);
        ps__arena_free(a, ent[i].blk, ent[i].size);
        ent[i].data = p;
        ent[i].blk = b;
    }
    for (ps__block_t *b = a->head; b; b = b->next)
        b->evac = 0;
    return 0;
}
