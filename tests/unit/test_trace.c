/* Trace format v1: writer/reader round trips, block boundaries, sorting,
 * random access, index statistics, and damaged files. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "../fuzz/trace_cases.h"

static char dir[256];

static const char *tmp(const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

/* xorshift64*: deterministic across runs. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

/* ---------------------------------------------------------------- model */

typedef struct {
    hm_record_t r;
    char str[64];
} mrec_t;

static const char *const phase_names[] = {"init", "solve", "", "\xc3\xa9tape-2", "io"};

/* Random record of any kind; times strictly increase so the expected
 * order is the input order within each stream. */
static void random_record(mrec_t *m, uint64_t *t)
{
    *t += 1 + rnd() % 1000;
    memset(m, 0, sizeof *m);
    int kind = (int)(rnd() % 10);
    hm_record_t *r = &m->r;
    if (kind < 3) {
        r->kind = HM_REC_SAMPLE;
        uint64_t addr = rnd() % 4 == 0 ? rnd() : 0x7f0000000000ULL + (rnd() % (1 << 24)) * 8;
        r->u.sample = (hm_sample_t){*t, addr, rnd() % 2 ? 0x400000 + rnd() % 4096 : rnd(),
                                    (uint32_t)rnd(), (uint32_t)(rnd() % 3 ? rnd() % 500 : rnd()),
                                    (uint16_t)rnd(), (uint8_t)(rnd() % 2)};
        return;
    }
    r->kind = (hm_rec_kind_t)(kind - 1); /* 2..8 */
    switch (r->kind) {
    case HM_REC_ALLOC:
        r->u.alloc = (hm_alloc_t){*t, rnd(), rnd() >> (rnd() % 64), rnd(), (uint32_t)rnd()};
        break;
    case HM_REC_FREE:
        r->u.alloc = (hm_alloc_t){*t, rnd(), 0, 0, (uint32_t)rnd()};
        break;
    case HM_REC_PHASE_BEGIN:
    case HM_REC_PHASE_END: {
        const char *n = phase_names[rnd() % HM_ARRAY_LEN(phase_names)];
        snprintf(m->str, sizeof m->str, "%s", n);
        r->u.phase = (hm_phase_t){*t, 0, (uint32_t)rnd(), m->str};
        break;
    }
    case HM_REC_COUNTER:
        r->u.counter = (hm_counter_t){*t, rnd(), (uint32_t)(rnd() % 3), (uint32_t)rnd()};
        break;
    case HM_REC_SITE: {
        int len = (int)(rnd() % 40);
        for (int i = 0; i < len; i++)
            m->str[i] = (char)(i % 7 == 6 ? '\n' : 'a' + rnd() % 26);
        m->str[len] = '\0';
        r->u.site = (hm_site_t){rnd(), m->str};
        break;
    }
    case HM_REC_NAME:
        snprintf(m->str, sizeof m->str, "obj%u", (unsigned)(rnd() % 1000));
        r->u.name = (hm_name_t){*t, rnd(), m->str};
        break;
    default:
        break;
    }
}

static int write_record(hm_trace_writer_t *w, const hm_record_t *r)
{
    switch (r->kind) {
    case HM_REC_SAMPLE: return hm_trace_write_sample(w, &r->u.sample);
    case HM_REC_ALLOC: return hm_trace_write_alloc(w, &r->u.alloc);
    case HM_REC_FREE: return hm_trace_write_free(w, r->u.alloc.time, r->u.alloc.addr, r->u.alloc.tid);
    case HM_REC_PHASE_BEGIN:
    case HM_REC_PHASE_END:
        return hm_trace_write_phase(w, r->kind == HM_REC_PHASE_BEGIN, r->u.phase.time, r->u.phase.tid,
                                    r->u.phase.name);
    case HM_REC_COUNTER: return hm_trace_write_counter(w, &r->u.counter);
    case HM_REC_SITE: return hm_trace_write_site(w, r->u.site.site, r->u.site.frames);
    case HM_REC_NAME: return hm_trace_write_name(w, r->u.name.time, r->u.name.addr, r->u.name.name);
    }
    return -1;
}

/* Field-by-field equality; phase ids are checked separately. */
static int same_record(const hm_record_t *a, const hm_record_t *b)
{
    if (a->kind != b->kind)
        return 0;
    switch (a->kind) {
    case HM_REC_SAMPLE: {
        const hm_sample_t *x = &a->u.sample, *y = &b->u.sample;
        return x->time == y->time && x->addr == y->addr && x->ip == y->ip && x->tid == y->tid &&
               x->weight == y->weight && x->dsrc == y->dsrc && x->access == y->access;
    }
    case HM_REC_ALLOC:
    case HM_REC_FREE: {
        const hm_alloc_t *x = &a->u.alloc, *y = &b->u.alloc;
        return x->time == y->time && x->addr == y->addr && x->size == y->size && x->site == y->site &&
               x->tid == y->tid;
    }
    case HM_REC_PHASE_BEGIN:
    case HM_REC_PHASE_END:
        return a->u.phase.time == b->u.phase.time && a->u.phase.tid == b->u.phase.tid &&
               strcmp(a->u.phase.name, b->u.phase.name) == 0;
    case HM_REC_COUNTER:
        return a->u.counter.time == b->u.counter.time && a->u.counter.value == b->u.counter.value &&
               a->u.counter.counter == b->u.counter.counter && a->u.counter.tid == b->u.counter.tid;
    case HM_REC_SITE:
        return a->u.site.site == b->u.site.site && strcmp(a->u.site.frames, b->u.site.frames) == 0;
    case HM_REC_NAME:
        return a->u.name.time == b->u.name.time && a->u.name.addr == b->u.name.addr &&
               strcmp(a->u.name.name, b->u.name.name) == 0;
    }
    return 0;
}

static uint64_t rec_time(const hm_record_t *r)
{
    switch (r->kind) {
    case HM_REC_SAMPLE: return r->u.sample.time;
    case HM_REC_ALLOC: case HM_REC_FREE: return r->u.alloc.time;
    case HM_REC_PHASE_BEGIN: case HM_REC_PHASE_END: return r->u.phase.time;
    case HM_REC_COUNTER: return r->u.counter.time;
    case HM_REC_NAME: return r->u.name.time;
    default: return 0;
    }
}

/* Writes n random records with the given block size, reads them back with
 * hm_trace_next and checks: the sample stream and the event stream each
 * come back exactly, in order; the merged stream is time-ordered; phase ids
 * follow names; the index statistics match the scan. */
static void round_trip(uint32_t n, uint32_t block)
{
    const char *path = tmp("rt.hmt");
    mrec_t *in = malloc((size_t)(n ? n : 1) * sizeof *in);
    uint64_t t = 1000;
    for (uint32_t i = 0; i < n; i++)
        random_record(&in[i], &t);
    static const char *const argv[] = {"prog", "--flag", "\xe2\x82\xac", NULL};
    hm_trace_meta_t m = {"unit", "CLOCK_MONOTONIC", 1.0, "soft", "ev", 1000, NULL, "{\"x\":[1,2]}", argv, NULL, 65536};
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, &m), 0);
    if (block)
        CHECK_EQ_INT(hm_trace_writer_set_block_records(w, block), 0);
    uint64_t expect_counts[9] = {0}, loads = 0;
    for (uint32_t i = 0; i < n; i++) {
        CHECK_EQ_INT(write_record(w, &in[i].r), 0);
        expect_counts[in[i].r.kind]++;
        if (in[i].r.kind == HM_REC_SAMPLE && in[i].r.u.sample.access == HM_ACCESS_LOAD)
            loads++;
    }
    hm_trace_end_t end = {t + 5, 3 << 8};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);

    hm_trace_t *tr;
    int rc = hm_trace_open(&tr, path);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "open: %s\n", hm_errdetail());
        free(in);
        return;
    }
    const hm_trace_meta_t *rm = hm_trace_meta(tr);
    CHECK_STR_EQ(rm->producer, "unit");
    CHECK_STR_EQ(rm->backend, "soft");
    CHECK_EQ_U64(rm->period, 1000);
    CHECK_EQ_U64(rm->min_size, 65536); /* "min_size" in the header */
    CHECK(rm->device == NULL);
    CHECK_STR_EQ(rm->machine_json, "{\"x\":[1,2]}");
    CHECK(rm->argv && rm->argv[2] && strcmp(rm->argv[2], "\xe2\x82\xac") == 0 && !rm->argv[3]);
    hm_trace_stats_t st;
    hm_trace_stats(tr, &st);
    uint32_t eff = block ? block : 65536;
    CHECK_EQ_INT(st.blocks, (n + eff - 1) / eff);
    CHECK_EQ_INT(st.has_end, 1);
    CHECK_EQ_U64(st.end.total_time, t + 5);
    CHECK_EQ_INT(st.end.exit_status, 3 << 8);
    for (int k = 1; k <= 8; k++)
        CHECK_EQ_U64(st.records[k], expect_counts[k]);
    CHECK_EQ_U64(st.loads, loads);
    CHECK_EQ_U64(st.reordered, 0);

    uint32_t is = 0, ie = 0, got = 0;
    uint64_t prev_t = 0, scan_counts[9] = {0}, first = UINT64_MAX, last = 0;
    int order_ok = 1, samples_ok = 1, events_ok = 1, ids_ok = 1;
    const char *id_names[8] = {0};
    hm_record_t r;
    while ((rc = hm_trace_next(tr, &r)) == 1) {
        got++;
        scan_counts[r.kind]++;
        if (r.kind != HM_REC_SITE) {
            uint64_t rt = rec_time(&r);
            order_ok &= rt >= prev_t;
            prev_t = rt;
            first = rt < first ? rt : first;
            last = rt > last ? rt : last;
        }
        if (r.kind == HM_REC_SAMPLE) {
            while (is < n && in[is].r.kind != HM_REC_SAMPLE)
                is++;
            samples_ok &= is < n && same_record(&r, &in[is].r);
            is++;
        } else {
            while (ie < n && in[ie].r.kind == HM_REC_SAMPLE)
                ie++;
            int ok = ie < n && same_record(&r, &in[ie].r);
            if (!ok && events_ok)
                fprintf(stderr, "event %u differs (kind %d vs %d)\n", ie, r.kind, ie < n ? (int)in[ie].r.kind : -1);
            events_ok &= ok;
            ie++;
            if (r.kind == HM_REC_PHASE_BEGIN || r.kind == HM_REC_PHASE_END) {
                if (r.u.phase.id >= 8)
                    ids_ok = 0;
                else if (!id_names[r.u.phase.id])
                    id_names[r.u.phase.id] = strdup(r.u.phase.name);
                else
                    ids_ok &= strcmp(id_names[r.u.phase.id], r.u.phase.name) == 0;
            }
        }
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(got, n);
    CHECK(order_ok);
    CHECK(samples_ok);
    CHECK(events_ok);
    CHECK(ids_ok);
    for (int k = 1; k <= 8; k++)
        CHECK_EQ_U64(scan_counts[k], st.records[k]);
    if (n && expect_counts[HM_REC_SITE] < n) {
        CHECK_EQ_U64(st.first_time, first);
        CHECK_EQ_U64(st.last_time, last);
    }
    for (int i = 0; i < 8; i++)
        free((char *)id_names[i]);
    hm_trace_close(tr);
    free(in);
}

/* Samples only, at exact block boundaries. */
static void boundaries(uint32_t block)
{
    const uint32_t counts[] = {0, 1, block - 1, block, block + 1, 3 * block};
    for (size_t c = 0; c < HM_ARRAY_LEN(counts); c++) {
        uint32_t n = counts[c];
        const char *path = tmp("bnd.hmt");
        hm_trace_writer_t *w;
        CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
        if (block != 65536)
            CHECK_EQ_INT(hm_trace_writer_set_block_records(w, block), 0);
        for (uint32_t i = 0; i < n; i++) {
            hm_sample_t s = {i * 3ull, 0x1000 + i * 64ull, 0x400000, 7, i % 100, 0, (uint8_t)(i & 1)};
            hm_trace_write_sample(w, &s);
        }
        hm_trace_end_t end = {n * 3ull, 0};
        CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
        hm_trace_t *t;
        CHECK_EQ_INT(hm_trace_open(&t, path), 0);
        if (!t)
            continue;
        CHECK_EQ_INT(hm_trace_nblocks(t), (n + block - 1) / block);
        uint64_t k = 0;
        int ok = 1;
        for (uint32_t b = 0; b < hm_trace_nblocks(t); b++) {
            const hm_block_t *blk;
            CHECK_EQ_INT(hm_trace_read_block(t, b, &blk), 0);
            hm_block_info_t bi;
            CHECK_EQ_INT(hm_trace_block_info(t, b, &bi), 0);
            CHECK_EQ_INT(bi.samples, blk->n);
            for (uint32_t i = 0; i < blk->n; i++, k++)
                ok &= blk->time[i] == k * 3 && blk->addr[i] == 0x1000 + k * 64 && blk->weight[i] == k % 100 &&
                      blk->access[i] == (k & 1) && blk->tid[i] == 7 && blk->ip[i] == 0x400000;
        }
        CHECK(ok);
        CHECK_EQ_U64(k, n);
        const hm_block_t *blk;
        CHECK_EQ_INT(hm_trace_read_block(t, hm_trace_nblocks(t), &blk), HM_ERANGE);
        hm_trace_close(t);
    }
}

/* Out-of-order samples within a block come back sorted; a record older
 * than an already written block is clamped and counted. */
static void sorting(void)
{
    const char *path = tmp("sort.hmt");
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 100), 0);
    /* block 0: times 0..99 shuffled; equal times keep arrival order */
    uint32_t perm[100];
    for (uint32_t i = 0; i < 100; i++)
        perm[i] = i;
    for (uint32_t i = 99; i > 0; i--) {
        uint32_t j = (uint32_t)(rnd() % (i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (uint32_t i = 0; i < 98; i++) {
        hm_sample_t s = {perm[i] / 2 * 10, perm[i], 0, 0, 0, 0, 0};
        hm_trace_write_sample(w, &s);
    }
    hm_alloc_t a = {35, 0xa, 1, 2, 3};
    hm_trace_write_alloc(w, &a);
    a.time = 5;
    hm_trace_write_alloc(w, &a);
    /* block 1: one record older than block 0's end */
    hm_sample_t old = {1, 0xdead, 0, 0, 0, 0, 0};
    hm_trace_write_sample(w, &old);
    hm_sample_t nw = {10000, 0xbeef, 0, 0, 0, 0, 0};
    hm_trace_write_sample(w, &nw);
    hm_trace_end_t end = {10000, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    if (!t)
        return;
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    CHECK_EQ_U64(st.reordered, 1);
    const hm_block_t *b;
    CHECK_EQ_INT(hm_trace_read_block(t, 0, &b), 0);
    CHECK_EQ_INT(b->n, 98);
    int sorted = 1;
    for (uint32_t i = 1; i < b->n; i++)
        sorted &= b->time[i] >= b->time[i - 1];
    CHECK(sorted);
    CHECK_EQ_INT(b->nevents, 2);
    CHECK_EQ_U64(b->events[0].u.alloc.time, 5);
    CHECK_EQ_U64(b->events[1].u.alloc.time, 35);
    uint64_t end0 = b->time[b->n - 1];
    CHECK_EQ_U64(end0, 490);
    CHECK_EQ_INT(hm_trace_read_block(t, 1, &b), 0);
    CHECK_EQ_INT(b->n, 2);
    CHECK_EQ_U64(b->time[0], end0); /* clamped */
    CHECK_EQ_U64(b->addr[0], 0xdead);
    CHECK_EQ_U64(b->addr[1], 0xbeef);
    /* merged order: event at time 35 comes between samples at 30 and 40 */
    hm_record_t r;
    uint64_t prev = 0;
    int ok = 1, seen = 0;
    while (hm_trace_next(t, &r) == 1) {
        uint64_t rt = rec_time(&r);
        ok &= rt >= prev;
        prev = rt;
        seen++;
    }
    CHECK(ok);
    CHECK_EQ_INT(seen, 102);
    hm_trace_close(t);
}

/* Stable sort: equal times keep arrival order. */
static void stability(void)
{
    const char *path = tmp("stable.hmt");
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    for (uint32_t i = 0; i < 50; i++) {
        hm_sample_t s = {100 - (i % 5), i, 0, 0, 0, 0, 0}; /* times 100,99,..96 repeating */
        hm_trace_write_sample(w, &s);
    }
    hm_trace_end_t end = {1, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    if (!t)
        return;
    const hm_block_t *b;
    CHECK_EQ_INT(hm_trace_read_block(t, 0, &b), 0);
    int ok = b->n == 50;
    for (uint32_t i = 0; ok && i < 50; i++) {
        uint32_t grp = i / 10, j = i % 10; /* time 96+grp holds addrs with i%5 == 4-grp */
        ok &= b->time[i] == 96 + grp && b->addr[i] == (4 - grp) + 5 * j;
    }
    CHECK(ok);
    hm_trace_close(t);
}

/* Random access: seeking to block i yields that block's records. */
static void seeking(void)
{
    const char *path = tmp("seek.hmt");
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 64), 0);
    for (uint32_t i = 0; i < 64 * 40; i++) {
        hm_sample_t s = {i, i * 8ull, 0, 0, 0, 0, 0};
        hm_trace_write_sample(w, &s);
        if (i % 100 == 0) {
            hm_counter_t c = {i, i, HM_COUNTER_CYCLES, 0};
            hm_trace_write_counter(w, &c);
        }
    }
    hm_trace_end_t end = {64 * 40, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    if (!t)
        return;
    uint32_t nb = hm_trace_nblocks(t);
    CHECK(nb > 40);
    for (int k = 0; k < 50; k++) {
        uint32_t i = (uint32_t)(rnd() % nb);
        hm_block_info_t bi;
        CHECK_EQ_INT(hm_trace_block_info(t, i, &bi), 0);
        CHECK_EQ_INT(hm_trace_seek_block(t, i), 0);
        hm_record_t r;
        CHECK_EQ_INT(hm_trace_next(t, &r), 1);
        CHECK_EQ_U64(rec_time(&r), bi.first_time);
        /* interleave a batch read of another block: next() must continue */
        const hm_block_t *b;
        CHECK_EQ_INT(hm_trace_read_block(t, (i + 7) % nb, &b), 0);
        uint32_t cnt = 1;
        uint64_t last = rec_time(&r);
        while (cnt < bi.records && hm_trace_next(t, &r) == 1) {
            cnt++;
            last = rec_time(&r);
        }
        CHECK_EQ_INT(cnt, bi.records);
        CHECK_EQ_U64(last, bi.last_time);
    }
    CHECK_EQ_INT(hm_trace_seek_block(t, nb), 0);
    hm_record_t r;
    CHECK_EQ_INT(hm_trace_next(t, &r), 0);
    CHECK_EQ_INT(hm_trace_seek_block(t, nb + 1), HM_ERANGE);
    hm_trace_close(t);
}

/* Extreme field values survive every column coding (wide planes, patches,
 * address exceptions, wrapping deltas). */
static void extremes(void)
{
    const char *path = tmp("ext.hmt");
    const hm_sample_t in[] = {
        {0, 0, 0, 0, 0, 0, 0},
        {1, UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT16_MAX, 255},
        {2, 0x8000000000000000ULL, 1, 1, 1, 1, 1},
        {3, 0x7fffffffffffffffULL, 0x8000000000000000ULL, 0, 0, 0, 0},
        {4, 8, 0xffffffffffff0000ULL, 5, 6, 7, 1},
        {UINT64_MAX - 1, 16, 2, 5, 6, 7, 0},
        {UINT64_MAX, 24, 3, 5, 6, 7, 0},
    };
    size_t n = HM_ARRAY_LEN(in);
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_INT(hm_trace_write_sample(w, &in[i]), 0);
    hm_alloc_t a = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT32_MAX};
    CHECK_EQ_INT(hm_trace_write_alloc(w, &a), 0);
    hm_trace_end_t end = {UINT64_MAX, -1};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    if (!t)
        return;
    hm_record_t r;
    size_t k = 0;
    int ok = 1, rc;
    while ((rc = hm_trace_next(t, &r)) == 1) {
        if (r.kind == HM_REC_SAMPLE) {
            hm_record_t want = {.kind = HM_REC_SAMPLE, .u.sample = in[k < n ? k : 0]};
            ok &= k < n && same_record(&r, &want);
            k++;
        } else {
            hm_record_t want = {.kind = HM_REC_ALLOC, .u.alloc = a};
            ok &= same_record(&r, &want);
        }
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(k, n);
    CHECK(ok);
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    CHECK_EQ_INT(st.end.exit_status, -1);
    CHECK_EQ_U64(st.end.total_time, UINT64_MAX);
    hm_trace_close(t);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

/* Many blocks: a stream far larger than any one block (12M samples, 3072
 * blocks) is written and read back with bounded memory. Held in memory the
 * samples would take 480 MB; the writer and reader must stay within a few
 * blocks. Offsets and times are 64-bit (times start above 2^40 here). */
static void many_blocks(void)
{
    const char *path = tmp("big.hmt");
    const uint64_t n = 12u << 20;
    const uint64_t t0 = (UINT64_C(1) << 40) + 123;
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 4096), 0); /* 3072 blocks */
    long before = rss_kib(), peak = 0;
    for (uint64_t i = 0; i < n; i++) {
        hm_sample_t s = {t0 + i * 11, 0x7f0000000000ULL + ((i * 2654435761u) & 0xfffff8), 0x401000 + (i & 7),
                         (uint32_t)(i & 3), (uint32_t)(i % 300), HM_DSRC_L3, (uint8_t)(i % 4 == 0)};
        if (hm_trace_write_sample(w, &s) < 0)
            break;
        if ((i & 0xfffff) == 0) {
            long r = rss_kib();
            peak = r > peak ? r : peak;
        }
    }
    hm_trace_end_t end = {n * 11, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    CHECK(peak - before < 64 * 1024);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    if (!t)
        return;
    CHECK_EQ_INT(hm_trace_nblocks(t), n / 4096);
    uint64_t k = 0;
    int ok = 1;
    before = rss_kib();
    peak = 0;
    for (uint32_t b = 0; b < hm_trace_nblocks(t); b++) {
        const hm_block_t *blk;
        if (hm_trace_read_block(t, b, &blk) < 0) {
            ok = 0;
            break;
        }
        for (uint32_t i = 0; i < blk->n; i++, k++)
            ok &= blk->time[i] == t0 + k * 11 &&
                  blk->addr[i] == 0x7f0000000000ULL + ((k * 2654435761u) & 0xfffff8) &&
                  blk->weight[i] == k % 300 && blk->tid[i] == (k & 3) && blk->ip[i] == 0x401000 + (k & 7);
        if ((b & 255) == 0) {
            long r = rss_kib();
            peak = r > peak ? r : peak;
        }
    }
    CHECK(ok);
    CHECK_EQ_U64(k, n);
    CHECK(peak - before < 64 * 1024);
    hm_block_info_t bi;
    CHECK_EQ_INT(hm_trace_block_info(t, hm_trace_nblocks(t) - 1, &bi), 0);
    CHECK_EQ_U64(bi.last_time, t0 + (n - 1) * 11);
    hm_trace_close(t);
    unlink(path);
}

/* The varied seed trace (every kind, extremes, small blocks) reads back
 * with scan counts equal to the index statistics. */
static void varied(void)
{
    const char *path = tmp("varied.hmt");
    CHECK_EQ_INT(tc_write_varied(path), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, path), 0);
    if (!t)
        return;
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    uint64_t cnt[9] = {0}, total = 0;
    hm_record_t r;
    int rc;
    while ((rc = hm_trace_next(t, &r)) == 1)
        cnt[r.kind]++, total++;
    CHECK_EQ_INT(rc, 0);
    uint64_t sum = 0;
    for (int k = 1; k <= 8; k++) {
        CHECK_EQ_U64(cnt[k], st.records[k]);
        sum += st.records[k];
    }
    CHECK_EQ_U64(total, sum);
    CHECK_EQ_U64(total, 301 + st.records[HM_REC_FREE]); /* each alloc comes with a free */
    CHECK(st.blocks > 5);
    hm_trace_close(t);
}

/* Named damaged files fail with the expected code and a detail. */
static void damaged(void)
{
    const char *good = tmp("good.hmt"), *bad = tmp("bad.hmt");
    CHECK_EQ_INT(tc_write_good(good, 1), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, good), 0);
    hm_record_t r;
    int rc, n = 0;
    while ((rc = hm_trace_next(t, &r)) == 1)
        n++;
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(n, 127);
    hm_trace_close(t);
    for (size_t c = 0; c < HM_ARRAY_LEN(tc_cases); c++) {
        const tc_case_t *tc = &tc_cases[c];
        if (tc_make(tc->name, good, bad) != 0) {
            fprintf(stderr, "case %s: could not be made\n", tc->name);
            CHECK(0);
            continue;
        }
        rc = hm_trace_open(&t, bad);
        if (!tc->at_open && rc == 0) {
            while ((rc = hm_trace_next(t, &r)) == 1)
                ;
            hm_trace_close(t);
        } else if (rc == 0) {
            hm_trace_close(t);
        }
        if (rc != tc->err)
            fprintf(stderr, "case %s: got %s (%s), want %s\n", tc->name, hm_err_name(rc), hm_errdetail(),
                    hm_err_name(tc->err));
        CHECK_EQ_INT(rc, tc->err);
        CHECK(strlen(hm_errdetail()) > 0);
    }
}

/* Every truncation and every single-byte flip of a small trace is either
 * read in full or rejected with an error; none crashes (ASan build) or
 * yields more records than were written. */
static void sweep(void)
{
    const char *good = tmp("good.hmt"), *bad = tmp("bad.hmt");
    CHECK_EQ_INT(tc_write_good(good, 1), 0);
    tc_bytes_t b;
    CHECK_EQ_INT(tc_read(good, &b), 0);
    int bad_count = 0, wrong = 0;
    for (size_t len = 0; len <= b.n; len++) {
        tc_write(bad, b.p, len);
        hm_trace_t *t;
        int rc = hm_trace_open(&t, bad);
        if (rc == 0) {
            hm_trace_close(t);
            if (len != b.n)
                wrong++;
        } else if (rc != HM_ETRUNC && rc != HM_EBADTRACE && rc != HM_ECORRUPT) {
            fprintf(stderr, "truncated at %zu: %s\n", len, hm_err_name(rc));
            wrong++;
        }
    }
    CHECK_EQ_INT(wrong, 0);
    for (size_t i = 0; i < b.n; i++) {
        b.p[i] ^= 0x10;
        tc_write(bad, b.p, b.n);
        b.p[i] ^= 0x10;
        hm_trace_t *t;
        int rc = hm_trace_open(&t, bad), n = 0;
        hm_record_t r;
        if (rc == 0) {
            while ((rc = hm_trace_next(t, &r)) == 1)
                n++;
            hm_trace_close(t);
        }
        if (rc < 0)
            bad_count++;
        else if (n != 127)
            wrong++;
    }
    /* Flips in the header JSON's whitespace-free text or in checksummed
     * regions are all detected; only the advisory high flag bits and the
     * reserved end-record padding may pass. */
    CHECK(bad_count >= (int)b.n - 16);
    CHECK_EQ_INT(wrong, 0);
    free(b.p);
}

/* Header values out of range are refused at open with HM_ERANGE and a
 * detail naming the key: each value below is patched into a valid trace's
 * header (same length, checksum fixed), so it is the only fault. */
static void header_ranges(void)
{
    const char *good = tmp("ranges.hmt"), *bad = tmp("ranges-bad.hmt");
    static const char *const argv[] = {"./app", NULL};
    hm_trace_meta_t m = {"test", "CLOCK_MONOTONIC", 1.5, "soft", "ev", 1000, "ddr",
                         "{\"name\":\"m\",\"cores\":8,\"devices\":[{\"name\":\"ddr\",\"read_latency_ns\":110,"
                         "\"write_latency_ns\":120,\"read_bandwidth_gbs\":100,\"write_bandwidth_gbs\":200,"
                         "\"capacity\":4096,\"loaded_latency\":[[0.5,200]]}]}",
                         argv, "{\"name\":\"h\",\"cpu\":\"c\",\"nodes\":[{\"name\":\"node0\"}],\"bound_nodes\":[20]}", 0};
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, good, &m), 0);
    hm_sample_t smp = {5, 0x1000, 0, 1, 0, 0, 0};
    hm_trace_write_sample(w, &smp);
    hm_trace_end_t end = {10, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, good), 0);
    CHECK(hm_trace_meta(t)->clock_ns_per_unit == 1.5);
    CHECK(hm_trace_meta(t)->host_json && strstr(hm_trace_meta(t)->host_json, "\"bound_nodes\":[20]"));
    hm_trace_close(t);
    static const struct {
        const char *from, *to, *detail;
    } p[] = {
        {"\"clock_ns_per_unit\":1.5", "\"clock_ns_per_unit\":9e9", "clock_ns_per_unit 9e+09"},
        {"\"clock_ns_per_unit\":1.5", "\"clock_ns_per_unit\":0.0", "clock_ns_per_unit 0 "},
        {"\"period\":1000", "\"period\":-100", "period -100"},
        {"\"period\":1000", "\"period\":1e+3", "period (not an integer)"},
        {"\"read_latency_ns\":110", "\"read_latency_ns\":-11", "devices[0].read_latency_ns -11"},
        {"\"write_latency_ns\":120", "\"write_latency_ns\":0.0", "devices[0].write_latency_ns 0"},
        {"\"read_bandwidth_gbs\":100", "\"read_bandwidth_gbs\":-10", "devices[0].read_bandwidth_gbs -10"},
        {"\"write_bandwidth_gbs\":200", "\"write_bandwidth_gbs\":9e9", "devices[0].write_bandwidth_gbs 9e+09"},
        {"\"capacity\":4096", "\"capacity\":-409", "devices[0].capacity -409"},
        {"\"cores\":8", "\"cores\":0", "machine.cores 0"},
        {"[[0.5,200]]", "[[1.5,200]]", "loaded_latency[0]"},
        {"[[0.5,200]]", "[[0.5,-20]]", "loaded_latency[0]"},
        {"\"bound_nodes\":[20]", "\"bound_nodes\":[-2]", "host.bound_nodes[0]"},
        {"\"cpu\":\"c\"", "\"cpu\":123", "host.cpu"},
    };
    tc_bytes_t b;
    CHECK_EQ_INT(tc_read(good, &b), 0);
    uint32_t hlen = hm__get_u32(b.p + 16);
    for (size_t i = 0; i < HM_ARRAY_LEN(p); i++) {
        char *hdr = (char *)b.p + 24;
        char *at = memmem(hdr, hlen, p[i].from, strlen(p[i].from));
        CHECK(at != NULL && strlen(p[i].from) == strlen(p[i].to));
        if (!at)
            continue;
        char save[64];
        memcpy(save, at, strlen(p[i].from));
        memcpy(at, p[i].to, strlen(p[i].to));
        uint32_t sum = (uint32_t)hm__hash64(hdr, hlen, 0), old = hm__get_u32(b.p + 20);
        memcpy(b.p + 20, &sum, 4);
        tc_write(bad, b.p, b.n);
        int rc = hm_trace_open(&t, bad);
        if (rc == 0)
            hm_trace_close(t);
        if (rc != HM_ERANGE || !strstr(hm_errdetail(), p[i].detail))
            fprintf(stderr, "patch %s: got %s (%s), want HM_ERANGE naming '%s'\n", p[i].to, hm_err_name(rc),
                    hm_errdetail(), p[i].detail);
        CHECK_EQ_INT(rc, HM_ERANGE);
        CHECK(strstr(hm_errdetail(), p[i].detail) != NULL);
        memcpy(at, save, strlen(p[i].from));
        memcpy(b.p + 20, &old, 4);
    }
    free(b.p);
}

static void writer_errors(void)
{
    hm_trace_writer_t *w;
    CHECK(hm_trace_writer_open(&w, "/nonexistent-dir/x.hmt", NULL) == -ENOENT);
    hm_trace_meta_t m = {0};
    m.machine_json = "{not json";
    CHECK_EQ_INT(hm_trace_writer_open(&w, tmp("x.hmt"), &m), HM_EBADJSON);
    /* A period the header cannot hold (it would read back negative, and be
     * refused) is refused before the file is made; the largest it holds
     * reads back. */
    m.machine_json = NULL;
    m.period = HM_TRACE_PERIOD_MAX + 1;
    CHECK_EQ_INT(hm_trace_writer_open(&w, tmp("big.hmt"), &m), HM_ERANGE);
    CHECK(access(tmp("big.hmt"), F_OK) != 0);
    m.period = HM_TRACE_PERIOD_MAX;
    CHECK_EQ_INT(hm_trace_writer_open(&w, tmp("big.hmt"), &m), 0);
    hm_trace_end_t e0 = {0, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &e0), 0);
    hm_trace_t *bt;
    int brc = hm_trace_open(&bt, tmp("big.hmt"));
    CHECK_EQ_INT(brc, 0);
    if (brc == 0) {
        CHECK_EQ_U64(hm_trace_meta(bt)->period, HM_TRACE_PERIOD_MAX);
        hm_trace_close(bt);
    }
    CHECK_EQ_INT(hm_trace_writer_open(&w, tmp("x.hmt"), NULL), 0);
    CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 0), HM_ERANGE);
    hm_sample_t s = {0};
    hm_trace_write_sample(w, &s);
    CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 10), HM_EUSAGE);
    CHECK_EQ_INT(hm_trace_writer_close(w, NULL), 0);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, tmp("x.hmt")), HM_ETRUNC);
    CHECK(strstr(hm_errdetail(), "offset") != NULL);
    CHECK_EQ_INT(hm_trace_open(&t, dir), -EINVAL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/hm-test-trace-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    header_ranges();
    round_trip(0, 0);
    round_trip(1, 0);
    round_trip(5000, 7);
    round_trip(20000, 0);
    round_trip(20000, 1000);
    boundaries(64);
    boundaries(65536);
    sorting();
    stability();
    seeking();
    extremes();
    writer_errors();
    varied();
    damaged();
    sweep();
    many_blocks();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
