/* Crafted trace files: a small valid trace, and named damaged variants of
 * it with every checksum fixed up where the damage is meant to reach a
 * deeper check. Shared by the unit test, the corpus generator and (through
 * the generator) the CLI bad-input test. */
#ifndef HETMEM_TEST_TRACE_CASES_H
#define HETMEM_TEST_TRACE_CASES_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "hetmem/trace.h"
#include "trace/trace_internal.h"

typedef struct {
    const char *name;
    int err;           /* error hm_trace_open() or reading returns */
    int at_open;       /* 1: open fails; 0: open succeeds, reading fails */
} tc_case_t;

static const tc_case_t tc_cases[] = {
    {"empty", HM_ETRUNC, 1},
    {"short-magic", HM_ETRUNC, 1},
    {"bad-magic", HM_EBADTRACE, 1},
    {"future-version", HM_EVERSION, 1},
    {"required-flag", HM_EVERSION, 1},
    {"absurd-header-length", HM_ETOOBIG, 1},
    {"header-checksum", HM_ECORRUPT, 1},
    {"header-not-json", HM_ECORRUPT, 1},
    {"truncated-header", HM_ETRUNC, 1},
    {"truncated-middle", HM_ETRUNC, 1},
    {"truncated-last-byte", HM_ETRUNC, 1},
    {"no-end-record", HM_ETRUNC, 1},
    {"index-checksum", HM_ECORRUPT, 1},
    {"absurd-index-offset", HM_ECORRUPT, 1},
    {"absurd-block-length", HM_ETOOBIG, 1},
    {"absurd-record-count", HM_ETOOBIG, 1},
    {"counts-disagree", HM_ECORRUPT, 1},
    {"block-checksum", HM_ECORRUPT, 0},
    {"corrupt-zstd", HM_ECORRUPT, 0},
    {"corrupt-payload", HM_ECORRUPT, 0},
};

/* Writes a small valid trace: three blocks of samples and events of every
 * kind. with_end 0 leaves it unfinished. */
static int tc_write_good(const char *path, int with_end)
{
    static const char *const argv[] = {"./app", "-n", "10", NULL};
    hm_trace_meta_t m = {"test", "sim", 1.0, "sim", "loads", 97, "ddr",
                         "{\"name\":\"toy\",\"devices\":[\"ddr\",\"hbm\"]}", argv, NULL, 0};
    hm_trace_writer_t *w;
    int rc = hm_trace_writer_open(&w, path, &m);
    if (rc < 0)
        return rc;
    hm_trace_writer_set_block_records(w, 50);
    hm_trace_write_site(w, 0x1234abcdULL, "app+0x10 main\napp+0x20 init");
    hm_alloc_t a = {10, 0x10000, 4096, 0x1234abcdULL, 1};
    hm_trace_write_alloc(w, &a);
    hm_trace_write_name(w, 11, 0x10000, "matrix");
    hm_trace_write_phase(w, 1, 12, 1, "solve");
    for (int i = 0; i < 120; i++) {
        hm_sample_t s = {20 + (uint64_t)i * 7, 0x10000 + (uint64_t)(i * 64) % 4096, 0x400000 + (uint64_t)(i % 5) * 4,
                         1, (uint32_t)(i % 9) * 10, HM_DSRC_MAKE_MEM(i % 2), (uint8_t)(i % 3 == 0)};
        hm_trace_write_sample(w, &s);
    }
    hm_counter_t c = {900, 123456, HM_COUNTER_INSTRUCTIONS, 1};
    hm_trace_write_counter(w, &c);
    hm_trace_write_phase(w, 0, 901, 1, "solve");
    hm_trace_write_free(w, 902, 0x10000, 1);
    hm_trace_end_t end = {1000, 0};
    return hm_trace_writer_close(w, with_end ? &end : NULL);
}

/* A varied trace for the fuzzing seed corpus: small blocks, every record
 * kind, extreme values, address exceptions and patched columns. */
static int tc_write_varied(const char *path)
{
    hm_trace_writer_t *w;
    int rc = hm_trace_writer_open(&w, path, NULL);
    if (rc < 0)
        return rc;
    hm_trace_writer_set_block_records(w, 40);
    uint64_t x = 0x9e3779b97f4a7c15ULL, t = 5;
    for (int i = 0; i < 300; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t += x % 50;
        int k = (int)(x >> 60) % 10;
        if (k < 5) {
            hm_sample_t s = {t, k == 0 ? x : 0x7f0000000000ULL + (x >> 40) * 8, 0x400000 + (x >> 50), (uint32_t)(x >> 62),
                             k == 1 ? (uint32_t)x : (uint32_t)(x >> 56), (uint16_t)(x >> 20), (uint8_t)(x & 1)};
            hm_trace_write_sample(w, &s);
        } else if (k == 5) {
            hm_alloc_t a = {t, x, x >> 33, x * 3, 2};
            hm_trace_write_alloc(w, &a);
            hm_trace_write_free(w, t + 1, x, 2);
        } else if (k == 6) {
            hm_trace_write_phase(w, (int)(x & 1), t, 3, (x & 2) ? "p1" : "");
        } else if (k == 7) {
            hm_counter_t c = {t, x, HM_COUNTER_CYCLES, 4};
            hm_trace_write_counter(w, &c);
        } else if (k == 8) {
            hm_trace_write_site(w, x, "m+0x1 f\nm+0x2 g");
        } else {
            hm_trace_write_name(w, t, x, "obj");
        }
    }
    hm_sample_t e = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT16_MAX, 255};
    hm_trace_write_sample(w, &e);
    hm_trace_end_t end = {UINT64_MAX, 1};
    return hm_trace_writer_close(w, &end);
}

typedef struct {
    uint8_t *p;
    size_t n;
} tc_bytes_t;

static int tc_read(const char *path, tc_bytes_t *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->p = malloc((size_t)n + 1);
    b->n = fread(b->p, 1, (size_t)n, f);
    fclose(f);
    return 0;
}

static int tc_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    int rc = fclose(f);
    return w == n && rc == 0 ? 0 : -EIO;
}

/* Offsets inside a valid trace. */
static uint64_t tc_data_start(const tc_bytes_t *b) { return 24 + hm__get_u32(b->p + 16); }
static uint64_t tc_index_off(const tc_bytes_t *b) { return hm__get_u64(b->p + b->n - 32); }

static void tc_fix_index_sum(tc_bytes_t *b)
{
    uint64_t off = tc_index_off(b), len = hm__get_u64(b->p + b->n - 24);
    hm__put_u64(b->p + b->n - 16, hm__hash64(b->p + off, (size_t)len, 0));
}

static void tc_fix_block_sum(tc_bytes_t *b, uint64_t boff)
{
    uint8_t *h = b->p + boff;
    uint32_t clen = hm__get_u32(h + 16);
    hm__put_u64(h + 40, hm__hash64(h + 48, clen, hm__hash64(h, 40, 0)));
}

/* Makes case @p name from the valid trace at good into out. */
static int tc_make(const char *name, const char *good, const char *out)
{
    tc_bytes_t b = {0};
    int rc = tc_read(good, &b);
    if (rc < 0)
        return rc;
    uint64_t ds = tc_data_start(&b), ix = tc_index_off(&b);
    uint8_t *blk = b.p + ds; /* first block */
    uint32_t clen = hm__get_u32(blk + 16);
    size_t n = b.n;
    rc = 0;
    if (!strcmp(name, "empty")) {
        n = 0;
    } else if (!strcmp(name, "short-magic")) {
        n = 5;
    } else if (!strcmp(name, "bad-magic")) {
        memcpy(b.p, "GIF89a", 6);
    } else if (!strcmp(name, "future-version")) {
        hm__put_u32(b.p + 8, HM_TRACE_VERSION + 1);
    } else if (!strcmp(name, "required-flag")) {
        hm__put_u32(b.p + 12, 0x4);
    } else if (!strcmp(name, "absurd-header-length")) {
        hm__put_u32(b.p + 16, 0xfffffff0u);
    } else if (!strcmp(name, "header-checksum")) {
        b.p[24 + 2] ^= 0x20;
    } else if (!strcmp(name, "header-not-json")) {
        b.p[24] = '[';
        b.p[ds - 1] = ']';
        b.p[24 + 1] = '@';
        hm__put_u32(b.p + 20, (uint32_t)hm__hash64(b.p + 24, (size_t)(ds - 24), 0));
    } else if (!strcmp(name, "truncated-header")) {
        n = 24 + 10;
    } else if (!strcmp(name, "truncated-middle")) {
        n = (size_t)(ds + (ix - ds) / 2);
    } else if (!strcmp(name, "truncated-last-byte")) {
        n = b.n - 1;
    } else if (!strcmp(name, "no-end-record")) {
        n = (size_t)ix; /* exactly what a crashed writer leaves */
    } else if (!strcmp(name, "index-checksum")) {
        b.p[ix + 8 + 8] ^= 1;
    } else if (!strcmp(name, "absurd-index-offset")) {
        hm__put_u64(b.p + b.n - 32, UINT64_C(0xfffffffffff0));
    } else if (!strcmp(name, "absurd-block-length")) {
        hm__put_u32(b.p + ix + 8 + 36, 0xffffffffu);
        tc_fix_index_sum(&b);
    } else if (!strcmp(name, "absurd-record-count")) {
        hm__put_u32(b.p + ix + 8 + 24, 0xfffffff0u);
        tc_fix_index_sum(&b);
    } else if (!strcmp(name, "counts-disagree")) {
        uint32_t nb = hm__get_u32(b.p + ix + 4);
        uint8_t *end = b.p + ix + 8 + (size_t)nb * 40;
        hm__put_u64(end + 24, hm__get_u64(end + 24) + 1);
        tc_fix_index_sum(&b);
    } else if (!strcmp(name, "block-checksum")) {
        blk[48 + clen / 2] ^= 0x55;
    } else if (!strcmp(name, "corrupt-zstd")) {
        for (uint32_t i = 12; i < clen; i += 3) /* keep the frame magic and header */
            blk[48 + i] ^= 0xa5;
        tc_fix_block_sum(&b, ds);
    } else if (!strcmp(name, "corrupt-payload")) {
        /* A well-formed zstd frame of the right size whose content is not a
         * valid block: the codec's own checks must catch it. */
        uint32_t raw = hm__get_u32(blk + 12);
        uint8_t *junk = malloc(raw);
        memset(junk, 0xff, raw);
        size_t bound = ZSTD_compressBound(raw);
        uint8_t *z = malloc(bound);
        size_t zl = ZSTD_compress(z, bound, junk, raw, 1);
        if (ZSTD_isError(zl) || zl > clen) {
            rc = -EINVAL; /* the generator could not fit the case; say so */
        } else {
            /* Pad the shorter frame with a zstd skippable frame so the block
             * keeps its length and the index stays valid. */
            memcpy(blk + 48, z, zl);
            size_t pad = clen - zl;
            if (pad >= 8) {
                hm__put_u32(blk + 48 + zl, 0x184D2A50u);
                hm__put_u32(blk + 48 + zl + 4, (uint32_t)(pad - 8));
                memset(blk + 48 + zl + 8, 0, pad - 8);
            } else {
                rc = -EINVAL;
            }
            tc_fix_block_sum(&b, ds);
        }
        free(junk);
        free(z);
    } else {
        rc = -ENOENT;
    }
    if (rc == 0)
        rc = tc_write(out, b.p, n);
    free(b.p);
    return rc;
}

#endif
