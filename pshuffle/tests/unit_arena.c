/* The memory store's arena: allocation, freeing, block release and
 * compaction keep every live sample's bytes intact; a region (a received
 * stream) is released with its last sample. */
#include <stdlib.h>

#include "internal.h"
#include "../../tests/unit/check.h"

static void fill(unsigned char *p, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(id * 31 + i);
}

static int intact(const ps__entry_t *e)
{
    const unsigned char *p = e->data;
    for (size_t i = 0; i < e->size; i++)
        if (p[i] != (unsigned char)(e->id * 31 + i))
            return 0;
    return 1;
}

int main(void)
{
    enum { N = 20000 };
    ps__arena_t a = {0};
    ps__entry_t *e = calloc(N, sizeof *e);
    for (uint64_t i = 0; i < N; i++) {
        e[i].id = i;
        e[i].size = i % 7 == 0 ? 0 : (i % 5000 == 4999 ? 400000 : 1 + i % 300);
        e[i].data = ps__arena_alloc(&a, e[i].size, &e[i].blk);
        CHECK(e[i].data != NULL);
        fill(e[i].data, e[i].size, i);
    }
    size_t before = a.reserved;
    CHECK(before >= a.live);
    /* Free seven eighths, at random. */
    uint64_t k = 0;
    srand(1);
    for (uint64_t i = 0; i < N; i++) {
        if (rand() % 8) {
            ps__arena_free(&a, e[i].blk, e[i].size);
        } else {
            e[k++] = e[i];
        }
    }
    CHECK(a.reserved < before); /* the big samples' own blocks went away */
    size_t holey = a.reserved;
    CHECK(holey > 2 * a.live + (1u << 20)); /* so that compaction has work */
    CHECK_EQ_INT(ps__arena_compact(&a, e, k, 0), 0);
    printf("reserved %zu -> %zu (holes) -> %zu (compacted), live %zu\n", before, holey, a.reserved, a.live);
    CHECK(a.reserved <= 2 * a.live + (1u << 20));
    CHECK(a.reserved < holey);
    int ok = 1;
    for (uint64_t i = 0; i < k; i++)
        ok &= intact(&e[i]);
    CHECK(ok);
    for (uint64_t i = 0; i < k; i++)
        ps__arena_free(&a, e[i].blk, e[i].size);
    CHECK_EQ_U64(a.live, 0);
    CHECK(a.reserved <= (1u << 20)); /* at most the current block remains */

    /* A region: samples placed back to back by the caller (as MPI writes
     * a peer's stream); the block goes when its last sample is freed. */
    size_t sizes[4] = {0, 5, 1000, 77}, live = 0, bytes = 0;
    for (int i = 0; i < 4; i++)
        live += ps__arena_need(sizes[i]), bytes += sizes[i];
    size_t r0 = a.reserved;
    ps__block_t *rb;
    unsigned char *base = ps__arena_region(&a, bytes, live, &rb);
    CHECK(base != NULL);
    /* A fresh region has a sixteenth of slack, rounded to pages. */
    size_t rcap = a.reserved - r0;
    CHECK(rcap >= bytes && rcap <= bytes + bytes / 16 + 4096);
    for (int i = 0; i < 4; i++) {
        ps__arena_free(&a, rb, sizes[i]);
        if (i < 3)
            CHECK_EQ_U64(a.reserved, r0 + rcap);
    }
    CHECK_EQ_U64(a.reserved, r0);
    CHECK_EQ_U64(a.live, 0);
    CHECK_EQ_U64(a.spare_bytes, 0); /* no spares unless asked for */

    /* Spares: an emptied block is kept (up to spare_max) and a region of
     * about its size reuses it; one much smaller does not. */
    a.spare_max = 4u << 20;
    size_t big = 300000;
    base = ps__arena_region(&a, big, ps__arena_need(big), &rb);
    CHECK(base != NULL);
    rcap = a.reserved - r0;
    ps__arena_free(&a, rb, big);
    CHECK_EQ_U64(a.reserved, r0);
    CHECK_EQ_U64(a.spare_bytes, rcap);
    ps__block_t *rb2;
    unsigned char *small = ps__arena_region(&a, 1000, ps__arena_need(1000), &rb2);
    CHECK(small != NULL && small != base);
    CHECK_EQ_U64(a.spare_bytes, rcap);
    unsigned char *again = ps__arena_region(&a, big - 5000, ps__arena_need(big - 5000), &rb);
    CHECK(again == base);
    CHECK_EQ_U64(a.spare_bytes, 0);
    ps__arena_free(&a, rb, big - 5000);
    ps__arena_free(&a, rb2, 1000);
    CHECK(a.spare_bytes > rcap); /* both kept */
    a.spare_max = rcap; /* a smaller limit applies at the next release */
    ps__arena_trim(&a, 0);
    CHECK_EQ_U64(a.spare_bytes, 0);
    CHECK_EQ_U64(a.reserved, r0);
    ps__arena_destroy(&a);
    CHECK_EQ_U64(a.reserved, 0);

    /* Equal sizes, as a memory store of one kind of sample holds them:
     * samples carved from blocks and received in regions (back to back,
     * unaligned), then three in ten leave at random, as at Q = 0.3. No
     * block falls below half live, so evacuating sparse blocks alone
     * would move nothing; the holes take the samples of the sparsest
     * blocks instead, a whole block at a time, until what the blocks hold
     * beyond the live samples is within the slack or no block's samples
     * fit the holes left. */
    enum { S = 4000, NE = 3000 };
    ps__entry_t *q = calloc(NE, sizeof *q);
    for (uint64_t i = 0; i < NE; i++) {
        q[i].id = i;
        q[i].size = i % 97 == 0 ? 0 : S; /* a few empty samples too */
    }
    for (uint64_t i = 0; i < NE / 2; i++) {
        q[i].data = ps__arena_alloc(&a, q[i].size, &q[i].blk);
        CHECK(q[i].data != NULL);
    }
    for (uint64_t i = NE / 2; i < NE; i += 500) { /* regions of 500 samples */
        size_t bytes = 0, rl = 0;
        for (uint64_t j = i; j < i + 500; j++)
            bytes += q[j].size, rl += ps__arena_need(q[j].size);
        ps__block_t *blk;
        unsigned char *p = ps__arena_region(&a, bytes, rl, &blk);
        CHECK(p != NULL);
        for (uint64_t j = i; j < i + 500; j++) {
            q[j].data = p;
            q[j].blk = blk;
            p += q[j].size;
        }
    }
    for (uint64_t i = 0; i < NE; i++)
        fill(q[i].data, q[i].size, i);
    uint64_t kq = 0;
    srand(7);
    for (uint64_t i = 0; i < NE; i++) {
        if (rand() % 10 < 3)
            ps__arena_free(&a, q[i].blk, q[i].size);
        else
            q[kq++] = q[i];
    }
    size_t holes0 = a.reserved - a.live, slack = 512u << 10;
    CHECK(holes0 > 3 * slack);
    CHECK_EQ_INT(ps__arena_compact(&a, q, kq, slack), 0);
    size_t holes1 = a.reserved - a.live;
    printf("equal sizes: holes %zu -> %zu (slack %zu), live %zu\n", holes0, holes1, slack, a.live);
    /* Half the blocks' holes hold the other half's samples at best (the
     * blocks are 60-80% live); evacuating sparse blocks alone leaves
     * holes0. */
    CHECK(holes1 <= holes0 * 6 / 10);
    ok = 1;
    for (uint64_t i = 0; i < kq; i++)
        ok &= intact(&q[i]);
    CHECK(ok);
    /* Within the slack already: nothing moves. */
    const void *first = q[0].data;
    size_t r1 = a.reserved;
    CHECK_EQ_INT(ps__arena_compact(&a, q, kq, a.reserved - a.live), 0);
    CHECK(q[0].data == first && a.reserved == r1);
    for (uint64_t i = 0; i < kq; i++)
        ps__arena_free(&a, q[i].blk, q[i].size);
    CHECK_EQ_U64(a.live, 0);
    ps__arena_destroy(&a);
    free(q);
    free(e);
    return check_done();
}
