/* Hand-made block payloads (after zstd, before the decoder): valid ones and
 * named malformed variants, each aimed at one check of the decoder. Shared
 * by the codec unit test and the raw-block fuzz corpus generator
 * (trace_corpus --codec DIR writes them in fuzz_block's input format). */
#ifndef HETMEM_TEST_CODEC_CASES_H
#define HETMEM_TEST_CODEC_CASES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/trace.h"
#include "trace/trace_internal.h"

typedef struct {
    char name[48];
    uint8_t *bytes;
    size_t len;
    uint32_t ns, nev;
    uint64_t first, last;
    int valid;
    uint64_t last_addr, last_time; /* of the last sample, for valid cases */
} codec_case_t;

typedef struct {
    uint8_t b[1 << 16];
    size_t n;
} cc_buf_t;

static void cc_byte(cc_buf_t *b, uint8_t v) { b->b[b->n++] = v; }
static void cc_varint(cc_buf_t *b, uint64_t v) { b->n = (size_t)(hm__put_varint(b->b + b->n, v) - b->b); }
static void cc_u32(cc_buf_t *b, uint32_t v)
{
    hm__put_u32(b->b + b->n, v);
    b->n += 4;
}
/* Integer column of width 0: every value is base. */
static void cc_col0(cc_buf_t *b, uint64_t base)
{
    cc_byte(b, 0);
    cc_byte(b, 0);
    cc_varint(b, base);
    cc_varint(b, 0);
}
/* Integer column of width 1 from n bytes, with optional patches. */
static void cc_col1(cc_buf_t *b, uint64_t base, const uint8_t *v, uint32_t n, uint32_t npatch,
                    const uint64_t *patch)
{
    cc_byte(b, 1);
    cc_byte(b, 0);
    cc_varint(b, base);
    cc_varint(b, npatch);
    memcpy(b->b + b->n, v, n);
    b->n += n;
    for (uint32_t k = 0; k < 2 * npatch; k++)
        cc_varint(b, patch[k]);
}
/* Exception list: shift byte, length, varints. */
static void cc_exc(cc_buf_t *b, const uint64_t *v, uint32_t n)
{
    cc_byte(b, 0);
    size_t at = b->n;
    cc_u32(b, 0);
    for (uint32_t i = 0; i < n; i++)
        cc_varint(b, v[i]);
    hm__put_u32(b->b + at, (uint32_t)(b->n - at - 4));
}

static void cc_add(codec_case_t **cs, size_t *n, const char *name, const cc_buf_t *b, uint32_t ns, uint32_t nev,
                   uint64_t first, uint64_t last, int valid)
{
    *cs = realloc(*cs, (*n + 1) * sizeof **cs);
    codec_case_t *c = &(*cs)[(*n)++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->bytes = malloc(b->n ? b->n : 1);
    memcpy(c->bytes, b->b, b->n);
    c->len = b->n;
    c->ns = ns;
    c->nev = nev;
    c->first = first;
    c->last = last;
    c->valid = valid;
}

/* All-width-0 columns after the address code column: ns samples at time
 * first, address code `code`, one exception list, no events. */
static void cc_flat(cc_buf_t *b, uint64_t code, const uint64_t *exc, uint32_t nexc)
{
    b->n = 0;
    cc_col0(b, 0);    /* time deltas */
    cc_col0(b, code); /* address codes */
    cc_col0(b, 0);    /* residuals */
    cc_exc(b, exc, nexc);
    for (int k = 0; k < 5; k++)
        cc_col0(b, 0); /* ip, tid, weight, dsrc, access */
    cc_u32(b, 0);      /* events */
}

/* Returns the number of cases; free with codec_cases_free(). */
static size_t codec_cases(codec_case_t **out)
{
    codec_case_t *cs = NULL;
    size_t n = 0;
    static cc_buf_t b;
    static const uint64_t one[1] = {0x7f0000001000ull};

    /* Valid: a real encoder's block with near, strided, far and absolute
     * addresses, patches and events. */
    {
        enum { NS = 300, NEV = 3 };
        hm_sample_t s[NS];
        uint64_t x = 1, t = 1000;
        for (uint32_t i = 0; i < NS; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            t += 1 + (x >> 60) + (i == 77 ? 1000000 : 0);
            uint64_t a = i % 5 == 0 ? (x >> 8) : i % 5 == 1 ? 0x7f0000000000ull + 64 * i
                                            : 0x5500000000ull + 8 * i + (x >> 58);
            s[i] = (hm_sample_t){.time = t, .addr = a, .ip = 0x401000 + (x >> 61) * 4, .tid = 7,
                                 .weight = (uint32_t)(x >> 55), .dsrc = 3, .access = i & 1};
        }
        hm__wevent_t ev[NEV];
        memset(ev, 0, sizeof ev);
        const char strings[] = "solvemain+0x10";
        ev[0] = (hm__wevent_t){.kind = HM_REC_ALLOC, .time = 1000, .a = 0x7f0000000000ull, .b = 1 << 20,
                               .c = 0x1234, .tid = 7};
        ev[1] = (hm__wevent_t){.kind = HM_REC_PHASE_BEGIN, .time = 1001, .a = 1, .tid = 7, .str_off = 0,
                               .str_len = 5};
        ev[2] = (hm__wevent_t){.kind = HM_REC_SITE, .time = 1002, .a = 0x1234, .str_off = 5, .str_len = 9};
        hm__buf_t o = {0};
        uint64_t *scratch = calloc(4 * NS, sizeof *scratch);
        hm__block_encode(&o, s, NS, ev, NEV, strings, 1000, scratch);
        free(scratch);
        memcpy(b.b, o.p, o.len);
        b.n = o.len;
        cc_add(&cs, &n, "encoded", &b, NS, NEV, 1000, t, 1);
        cs[n - 1].last_addr = s[NS - 1].addr;
        cs[n - 1].last_time = t;
        /* Truncations of it at every section. */
        size_t full = b.n;
        for (size_t cut = 1; cut < full; cut += full / 11 + 1) {
            char name[48];
            b.n = cut;
            snprintf(name, sizeof name, "encoded-cut-%zu", cut);
            cc_add(&cs, &n, name, &b, NS, NEV, 1000, t, 0);
        }
        b.n = full;
        /* One byte too many, events claiming more than there are. */
        b.b[b.n++] = 0;
        cc_add(&cs, &n, "encoded-trailing-byte", &b, NS, NEV, 1000, t, 0);
        b.n = full;
        cc_add(&cs, &n, "encoded-more-events", &b, NS, NEV + 1, 1000, t, 0);
        cc_add(&cs, &n, "encoded-more-samples", &b, NS + 1, NEV, 1000, t, 0);
        cc_add(&cs, &n, "encoded-last-too-early", &b, NS, NEV, 1000, t - 1, 0);
        hm__buf_free(&o);
    }

    /* Valid: 1000 samples in a few dozen bytes (every column of width 0):
     * more samples than payload bytes is legitimate. */
    cc_flat(&b, 0, NULL, 0);
    cc_add(&cs, &n, "flat-1000", &b, 1000, 0, 5, 5, 1);
    cs[n - 1].last_time = 5;

    /* Absolute addresses with fewer exceptions than samples: the decoder
     * must stop at the list's end, not read on through the payload. */
    cc_flat(&b, HM__ADDR_ABS << 4, one, 1);
    cc_add(&cs, &n, "abs-exceptions-short", &b, 2000, 0, 5, 5, 0);
    cc_flat(&b, HM__ADDR_ABS << 4, NULL, 0);
    cc_add(&cs, &n, "abs-exceptions-empty", &b, 2000, 0, 5, 5, 0);
    /* An exception varint that runs over the list's end. */
    cc_flat(&b, HM__ADDR_ABS << 4, one, 1);
    {
        uint8_t tmp[10];
        size_t vlen = (size_t)(hm__put_varint(tmp, one[0]) - tmp);
        b.b[4 * 3 + 5 + vlen - 1] |= 0x80; /* its last byte now says "more" */
    }
    cc_add(&cs, &n, "abs-exception-overrun", &b, 1, 0, 5, 5, 0);
    /* One exception, one sample: valid. */
    cc_flat(&b, HM__ADDR_ABS << 4, one, 1);
    cc_add(&cs, &n, "abs-one", &b, 1, 0, 5, 5, 1);
    cs[n - 1].last_addr = one[0];
    cs[n - 1].last_time = 5;
    /* Unused exceptions, a mode beyond ABS, ABS with a residual. */
    cc_flat(&b, 0, one, 1);
    cc_add(&cs, &n, "exceptions-unused", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, 4 << 4, NULL, 0);
    cc_add(&cs, &n, "addr-mode-4", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, HM__ADDR_ABS << 4 | 3, one, 1);
    cc_add(&cs, &n, "abs-slot-3", &b, 1, 0, 5, 5, 0);

    /* Column headers. */
    cc_flat(&b, 0, NULL, 0);
    b.b[0] = 9;
    cc_add(&cs, &n, "width-9", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, 0, NULL, 0);
    b.b[1] = 64;
    cc_add(&cs, &n, "shift-64", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, 0, NULL, 0);
    b.b[4 * 3] = 64;
    cc_add(&cs, &n, "exc-shift-64", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, 0, NULL, 0);
    hm__put_u32(b.b + 4 * 3 + 1, 1000);
    cc_add(&cs, &n, "exc-length-past-end", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, 0, NULL, 0);
    b.b[3] = 5; /* 5 patches in a width-0 column of 4 samples, no bytes */
    cc_add(&cs, &n, "patches-past-end", &b, 4, 0, 5, 5, 0);
    cc_flat(&b, 0, NULL, 0);
    b.b[2] = 1; /* time base 1: past the block's last time */
    cc_add(&cs, &n, "time-past-last", &b, 4, 0, 5, 5, 0);

    /* Times: deltas that wrap past 2^64 back into the block's range (the
     * last time alone would pass), and valid blocks whose deltas or times
     * are too large for the decoder's short range check. */
    {
        static const uint8_t d2[2] = {0, 1};
        const uint64_t wrap[2] = {0, UINT64_MAX}; /* sample 0's delta: 2^64 - 1 */
        const uint64_t late = UINT64_C(1) << 63, gap = UINT64_C(1) << 50;
        for (int k = 0; k < 4; k++) {
            b.n = 0;
            if (k == 0)
                cc_col1(&b, 0, d2, 2, 1, wrap);
            else
                cc_col0(&b, k == 1 ? gap : 1);
            cc_col0(&b, 0);
            cc_col0(&b, 0);
            cc_exc(&b, NULL, 0);
            for (int j = 0; j < 5; j++)
                cc_col0(&b, 0);
            cc_u32(&b, 0);
            if (k == 0) {
                cc_add(&cs, &n, "time-wraps", &b, 2, 0, 5, 5, 0);
            } else if (k == 1) {
                cc_add(&cs, &n, "time-long-gaps", &b, 4, 0, 7, 7 + 4 * gap, 1);
                cs[n - 1].last_time = 7 + 4 * gap;
            } else if (k == 2) {
                cc_add(&cs, &n, "time-late", &b, 3, 0, late + 5, late + 8, 1);
                cs[n - 1].last_time = late + 8;
            } else {
                cc_add(&cs, &n, "time-late-past-last", &b, 3, 0, late + 5, late + 7, 0);
            }
        }
    }

    /* Patches: index past the samples, repeated index, value too wide. */
    {
        static const uint8_t v4[4] = {1, 2, 3, 4};
        const uint64_t far_idx[2] = {4, 9}, dup[4] = {1, 300, 0, 400}, wide[2] = {0, 0x1ffff};
        const uint64_t *ps[3] = {far_idx, dup, wide};
        const uint32_t np[3] = {1, 2, 1};
        const char *names[3] = {"patch-index-past-samples", "patch-index-repeated", "patch-code-too-wide"};
        for (int k = 0; k < 3; k++) {
            b.n = 0;
            cc_col0(&b, 0);
            if (k == 2)
                cc_col1(&b, 0, v4, 4, np[k], ps[k]); /* codes are one byte */
            else
                cc_col0(&b, 0);
            if (k == 2)
                cc_col0(&b, 0);
            else
                cc_col1(&b, 0, v4, 4, np[k], ps[k]);
            cc_exc(&b, NULL, 0);
            for (int j = 0; j < 5; j++)
                cc_col0(&b, 0);
            cc_u32(&b, 0);
            cc_add(&cs, &n, names[k], &b, 4, 0, 5, 5, 0);
        }
    }

    /* Events: a length past the payload, a string past its record, a short
     * alloc record, a body longer than its fields, a time past the block. */
    {
        struct {
            const char *name;
            uint8_t ev[24];
            size_t len;
        } evs[] = {
            {"event-length-past-end", {HM_REC_FREE, 0, 50, 1, 1}, 5},
            {"event-string-past-record", {HM_REC_NAME, 0, 3, 1, 9, 'a'}, 6},
            {"event-alloc-short", {HM_REC_ALLOC, 0, 4, 1, 1, 0, 0}, 7},
            {"event-body-too-long", {HM_REC_FREE, 0, 4, 1, 1, 0, 0}, 7},
            {"event-time-past-last", {HM_REC_FREE, 9, 2, 1, 1}, 5},
        };
        for (size_t k = 0; k < sizeof evs / sizeof evs[0]; k++) {
            b.n = 0;
            for (int j = 0; j < 3; j++)
                cc_col0(&b, 0);
            cc_exc(&b, NULL, 0);
            for (int j = 0; j < 5; j++)
                cc_col0(&b, 0);
            cc_u32(&b, (uint32_t)evs[k].len);
            memcpy(b.b + b.n, evs[k].ev, evs[k].len);
            b.n += evs[k].len;
            cc_add(&cs, &n, evs[k].name, &b, 0, 1, 5, 5, 0);
        }
    }
    *out = cs;
    return n;
}

static void codec_cases_free(codec_case_t *cs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(cs[i].bytes);
    free(cs);
}

/* fuzz_block's input: u16 samples, u16 events, u64 first time, u64 time
 * span, then the payload. */
#define CC_FUZZ_HDR 20

__attribute__((unused)) static size_t codec_case_fuzz_bytes(const codec_case_t *c, uint8_t *dst)
{
    uint16_t ns = (uint16_t)c->ns, nev = (uint16_t)c->nev;
    uint64_t span = c->last - c->first;
    memcpy(dst, &ns, 2);
    memcpy(dst + 2, &nev, 2);
    memcpy(dst + 4, &c->first, 8);
    memcpy(dst + 12, &span, 8);
    memcpy(dst + CC_FUZZ_HDR, c->bytes, c->len);
    return CC_FUZZ_HDR + c->len;
}

#endif
