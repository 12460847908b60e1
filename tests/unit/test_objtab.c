/* Live-object interval table against a brute-force reference, under random
 * operations, plus the footprint under churn and the allocator hooks. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/objtab.h"
#include "hetmem/error.h"

typedef struct {
    uint64_t addr, size, id;
} ref_t;

static ref_t ref[4096];
static size_t nref;

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t ref_last(const ref_t *r) { return r->addr + (r->size ? r->size : 1) - 1; }

static ref_t *ref_find(uint64_t a)
{
    for (size_t i = 0; i < nref; i++)
        if (ref[i].addr <= a && a <= ref_last(&ref[i]))
            return &ref[i];
    return NULL;
}

static void ref_del(size_t i) { ref[i] = ref[--nref]; }

static void ref_insert(uint64_t a, uint64_t s, uint64_t id)
{
    ref_t q = {a, s, id};
    for (size_t i = 0; i < nref;)
        if (ref[i].addr <= ref_last(&q) && a <= ref_last(&ref[i]))
            ref_del(i);
        else
            i++;
    ref[nref++] = q;
}

static int ref_remove(uint64_t a)
{
    for (size_t i = 0; i < nref; i++)
        if (ref[i].addr == a) {
            ref_del(i);
            return 1;
        }
    return 0;
}

/* Addresses from a small space so ranges collide often. */
static void random_ops(hm_objtab_t *t, int nops, uint64_t space, uint64_t maxsize)
{
    for (int op = 0; op < nops; op++) {
        int k = (int)(rnd() % 10);
        if (k < 4 && nref < 4000) {
            uint64_t a = rnd() % space, s = rnd() % maxsize;
            uint64_t id = rnd();
            CHECK_EQ_INT(hm__objtab_insert(t, a, s, id), 0);
            ref_insert(a, s, id);
        } else if (k < 7) {
            uint64_t a = nref && (rnd() & 1) ? ref[rnd() % nref].addr : rnd() % space;
            hm_objtab_entry_t out = {0, 0, 0};
            ref_t *want = NULL;
            for (size_t i = 0; i < nref; i++)
                if (ref[i].addr == a)
                    want = &ref[i];
            ref_t w = want ? *want : (ref_t){0, 0, 0};
            int r = hm__objtab_remove(t, a, &out);
            CHECK_EQ_INT(r, want ? 0 : HM_ENOTFOUND);
            if (want) {
                CHECK_EQ_U64(out.size, w.size);
                CHECK_EQ_U64(out.id, w.id);
                ref_remove(a);
            }
        } else {
            uint64_t a = rnd() % (space + maxsize);
            const hm_objtab_entry_t *e = hm__objtab_find(t, a);
            ref_t *w = ref_find(a);
            CHECK_EQ_INT(e != NULL, w != NULL);
            if (e && w) {
                CHECK_EQ_U64(e->addr, w->addr);
                CHECK_EQ_U64(e->id, w->id);
            }
        }
        CHECK_EQ_U64(hm__objtab_count(t), nref);
        if (check_failures_)
            return;
    }
    /* In-order iteration visits every live entry once, sorted. */
    size_t seen = 0;
    uint64_t prev = 0;
    for (const hm_objtab_entry_t *e = hm__objtab_next(t, 0); e; e = hm__objtab_next(t, e->addr + 1)) {
        CHECK(seen == 0 || e->addr > prev);
        prev = e->addr;
        CHECK(hm__objtab_get(t, e->addr) == e);
        seen++;
    }
    CHECK_EQ_U64(seen, nref);
    /* The listing gives the same entries in the same order. */
    size_t cnt = hm__objtab_count(t);
    hm_objtab_entry_t *all = calloc(cnt + 1, sizeof *all);
    uint32_t *stack = calloc(cnt + 1, sizeof *stack);
    CHECK(all && stack);
    CHECK_EQ_U64(hm__objtab_list(t, all, stack), cnt);
    size_t i = 0;
    for (const hm_objtab_entry_t *e = hm__objtab_next(t, 0); e && i < cnt; e = hm__objtab_next(t, e->addr + 1), i++) {
        CHECK_EQ_U64(all[i].addr, e->addr);
        CHECK_EQ_U64(all[i].size, e->size);
        CHECK_EQ_U64(all[i].id, e->id);
    }
    CHECK_EQ_U64(i, cnt);
    free(all);
    free(stack);
}

static size_t hook_live, hook_calls;
static void *hook_alloc(size_t n)
{
    hook_live += n;
    hook_calls++;
    return malloc(n);
}
static void hook_free(void *p, size_t n)
{
    hook_live -= n;
    free(p);
}

int main(void)
{
    hm_objtab_t *t;
    CHECK_EQ_INT(hm__objtab_open(&t), 0);
    /* Empty table. */
    CHECK(hm__objtab_find(t, 0) == NULL);
    CHECK(hm__objtab_next(t, 0) == NULL);
    CHECK_EQ_INT(hm__objtab_remove(t, 5, NULL), HM_ENOTFOUND);

    /* Edges: zero size covers one byte; the top of the address space. */
    CHECK_EQ_INT(hm__objtab_insert(t, 100, 0, 1), 0);
    CHECK(hm__objtab_find(t, 100) && hm__objtab_find(t, 100)->id == 1);
    CHECK(hm__objtab_find(t, 101) == NULL);
    CHECK_EQ_INT(hm__objtab_insert(t, UINT64_MAX - 10, 100, 2), 0);
    CHECK(hm__objtab_find(t, UINT64_MAX) && hm__objtab_find(t, UINT64_MAX)->id == 2);
    /* An overlapping insert replaces: [90, 110) swallows [100]. */
    CHECK_EQ_INT(hm__objtab_insert(t, 90, 20, 3), 0);
    CHECK_EQ_U64(hm__objtab_count(t), 2);
    CHECK(hm__objtab_find(t, 100) && hm__objtab_find(t, 100)->id == 3);
    CHECK(hm__objtab_overlap(t, 109, 5) != NULL);
    CHECK(hm__objtab_overlap(t, 110, 5) == NULL);
    CHECK_EQ_INT(hm__objtab_remove(t, 100, NULL), HM_ENOTFOUND);
    CHECK_EQ_INT(hm__objtab_remove(t, 90, NULL), 0);
    CHECK_EQ_INT(hm__objtab_remove(t, UINT64_MAX - 10, NULL), 0);
    CHECK_EQ_U64(hm__objtab_count(t), 0);

    /* Random operations against the reference, dense and sparse. */
    random_ops(t, 60000, 4096, 64);
    random_ops(t, 60000, 1u << 20, 4096);
    random_ops(t, 20000, 1ull << 40, 1ull << 20);
    while (nref) {
        CHECK_EQ_INT(hm__objtab_remove(t, ref[0].addr, NULL), 0);
        ref_del(0);
    }
    CHECK_EQ_U64(hm__objtab_count(t), 0);
    hm__objtab_close(t);

    /* Many live objects, in increasing address order (the worst order for
     * an unbalanced tree), then all freed: memory follows the live count. */
    CHECK_EQ_INT(hm__objtab_open_with(&t, hook_alloc, hook_free), 0);
    const uint64_t N = 200000;
    for (uint64_t i = 0; i < N; i++)
        CHECK_EQ_INT(hm__objtab_insert(t, 0x10000 + i * 64, 48, i), 0);
    CHECK_EQ_U64(hm__objtab_count(t), N);
    size_t big = hm__objtab_footprint(t);
    int bad = 0;
    for (uint64_t i = 0; i < N; i++) {
        const hm_objtab_entry_t *e = hm__objtab_find(t, 0x10000 + i * 64 + 47);
        bad += !e || e->id != i;
        bad += hm__objtab_find(t, 0x10000 + i * 64 + 48) != NULL;
    }
    CHECK_EQ_INT(bad, 0);
    for (uint64_t i = 0; i < N; i++)
        bad += hm__objtab_remove(t, 0x10000 + i * 64, NULL) != 0;
    CHECK_EQ_INT(bad, 0);
    size_t small = hm__objtab_footprint(t);
    CHECK(small * 100 < big);

    /* Churn with few live: 4 M alloc/free pairs, 8 live, footprint stays put. */
    uint64_t live[8] = {0};
    for (uint64_t i = 0; i < 4000000; i++) {
        int k = (int)(i & 7);
        if (live[k])
            bad += hm__objtab_remove(t, live[k], NULL) != 0;
        live[k] = 0x7f0000000000ull + ((uint64_t)k << 32) + (rnd() % (1u << 24)) * 16;
        bad += hm__objtab_insert(t, live[k], 16, i) != 0;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(hm__objtab_count(t) <= 8);
    CHECK(hm__objtab_footprint(t) <= small * 2);
    hm__objtab_close(t);
    CHECK_EQ_U64(hook_live, 0);
    CHECK(hook_calls > 2);
    return check_done();
}
