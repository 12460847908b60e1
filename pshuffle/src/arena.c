/* The memory store's arena. Samples are carved from 1 MiB blocks (a larger
 * sample gets a block of its own), so a store of many small samples costs
 * a few large allocations instead of one per sample. A block is freed when
 * its last sample leaves. Since samples leave at random, blocks thin out
 * over epochs; ps__arena_compact() copies the live samples into fresh
 * blocks when less than half of the reserved bytes are live. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BLOCK (UINT64_C(1) << 20)
#define ALIGN 16

struct ps__block {
    ps__block_t *prev, *next;
    size_t cap, used, live;
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

void *ps__arena_alloc(ps__arena_t *a, size_t n, ps__block_t **blk)
{
    size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (need == 0)
        need = ALIGN;
    ps__block_t *b = a->cur;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > BLOCK / 4 ? need : BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->used = b->live = 0;
        b->prev = NULL;
        b->next = a->head;
        if (a->head)
            a->head->prev = b;
        a->head = b;
        a->reserved += cap;
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
    size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (need == 0)
        need = ALIGN;
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
    if (a->reserved <= 2 * a->live + BLOCK)
        return 0;
    ps__arena_t fresh = {0};
    for (uint64_t i = 0; i < n; i++) {
        ps__block_t *b;
        void *p = ps__arena_alloc(&fresh, ent[i].size, &b);
        if (!p) {
            /* Out of memory: keep what was moved (in fresh's blocks, now
             * adopted by `a`) and the rest where it is. Compaction only
             * saves memory; failing it is not an error. */
            while (fresh.head) {
                ps__block_t *t = fresh.head;
                fresh.head = t->next;
                t->prev = NULL;
                t->next = a->head;
                if (a->head)
                    a->head->prev = t;
                a->head = t;
                a->reserved += t->cap;
            }
            a->live += fresh.live;
            return 0;
        }
        memcpy(p, ent[i].data, ent[i].size);
        ps__arena_free(a, ent[i].blk, ent[i].size);
        ent[i].data = p;
        ent[i].blk = b;
    }
    ps__arena_destroy(a);
    *a = fresh;
    return 0;
}
