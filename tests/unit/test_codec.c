/* Block decoder on hand-made payloads, valid and malformed. Each payload is
 * placed so that its HM__RAW_PAD bytes of padding end exactly at an
 * inaccessible page: a decoder that reads past the padding crashes here
 * even without a sanitizer. Every malformed payload must be refused with
 * HM_ECORRUPT. The same cases seed the raw-block fuzz corpus. The chunked
 * sample scan must give what the whole-block decoder gives. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "fuzz/codec_cases.h"
#include "hetmem/error.h"
#include "hetmem/trace.h"
#include "trace/trace_internal.h"

static uint8_t *region;
static size_t region_len, pg;

/* Copies the payload to just before the guard page, pad zeroed. */
static const uint8_t *guarded(const uint8_t *p, size_t n)
{
    size_t need = n + HM__RAW_PAD;
    if (need > region_len - pg)
        return NULL;
    uint8_t *dst = region + (region_len - pg) - need;
    memcpy(dst, p, n);
    memset(dst + n, 0, HM__RAW_PAD);
    return dst;
}

static int decode(hm__cols_t *c, const codec_case_t *k)
{
    const uint8_t *p = guarded(k->bytes, k->len);
    if (!p)
        return -1;
    return hm__block_decode(c, p, k->len, k->ns, k->nev, k->first, k->last);
}

/* A trace whose block has more samples than payload bytes (identical
 * samples: every column of width 0) is valid and reads back. */
static void flat_trace(void)
{
    char path[] = "/tmp/hetmem-codec-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    hm_sample_t s = {.time = 42, .addr = 0x7f0000000040ull, .ip = 0x401000, .tid = 1, .weight = 1};
    for (int i = 0; i < 5000; i++)
        CHECK_EQ_INT(hm_trace_write_sample(w, &s), 0);
    hm_trace_end_t end = {100, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    if (rc < 0)
        fprintf(stderr, "flat trace: open: %s\n", hm_errdetail());
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        hm_record_t r;
        uint64_t n = 0, same = 0;
        while ((rc = hm_trace_next(t, &r)) == 1)
            if (r.kind == HM_REC_SAMPLE) {
                n++;
                same += r.u.sample.addr == s.addr && r.u.sample.time == s.time;
            }
        if (rc < 0)
            fprintf(stderr, "flat trace: %s\n", hm_errdetail());
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_U64(n, 5000);
        CHECK_EQ_U64(same, 5000);
        hm_trace_close(t);
    }
    unlink(path);
}

/* Scans a payload a chunk at a time; 0 when every sample and event agrees
 * with the whole-block decode in d (NULL: not compared), else the scan's
 * error or 1. */
static int scan_matches(const hm__cols_t *d, const uint8_t *p, const codec_case_t *k)
{
    static hm__scan_t s;
    static hm__scan_chunk_t ch;
    hm__cols_t c;
    memset(&c, 0, sizeof c);
    int rc = hm__block_scan_begin(&s, &c, p, k->len, k->ns, k->nev, k->first, k->last), got;
    uint32_t at = 0;
    if (rc == 0 && d && c.nev != d->nev)
        rc = 1;
    while (rc == 0 && (got = hm__block_scan_chunk(&s, &ch)) != 0) {
        if (got < 0) {
            rc = got;
            break;
        }
        for (int i = 0; i < got && rc == 0; i++, at++)
            if (d && (ch.time[i] != d->time[at] || ch.addr[i] != d->addr[at] || ch.weight[i] != d->weight[at] ||
                      ch.dsrc[i] != d->dsrc[at] || ch.access[i] != d->access[at]))
                rc = 1;
    }
    if (rc == 0 && at != k->ns)
        rc = 1;
    hm__cols_free(&c);
    return rc;
}

/* Samples of every address mode (strided, near, far, absolute), outlier
 * weights (patches) and events between them, over several scan chunks and
 * blocks: the scan reads what hm_trace_read_block() reads. */
static void scan_trace(void)
{
    char path[] = "/tmp/hetmem-codec-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, NULL), 0);
    CHECK_EQ_INT(hm_trace_writer_set_block_records(w, 7000), 0);
    uint64_t x = 99;
    for (int i = 0; i < 20000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(x >> 40);
        uint64_t a = r % 4 == 0 ? 0x7f0000000000ull + (uint64_t)i * 8          /* a stream */
                     : r % 4 == 1 ? 0x10000000ull + (x >> 20) % 4096 * 64     /* near */
                     : r % 4 == 2 ? (x >> 13) & 0xffffffffffull                /* far */
                                  : x;                                          /* anywhere */
        hm_sample_t smp = {(uint64_t)i * 10 + r % 7, a, 0x400000 + r % 64, r % 3,
                           r % 97 == 0 ? 1u << 30 : r % 300, (uint16_t)(r % 7 | (r % 5) << 8), (uint8_t)(r % 2)};
        CHECK_EQ_INT(hm_trace_write_sample(w, &smp), 0);
        if (i % 1500 == 0) {
            hm_alloc_t al = {(uint64_t)i * 10, a, 4096, 0x42, 0};
            CHECK_EQ_INT(hm_trace_write_alloc(w, &al), 0);
        }
    }
    hm_trace_end_t end = {300000, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    CHECK_EQ_INT(rc, 0);
    unlink(path);
    if (rc < 0)
        return;
    hm_sample_batch_t ch;
    uint32_t nb = hm_trace_nblocks(t), total = 0;
    CHECK(nb >= 3);
    for (uint32_t b = 0; b < nb; b++) {
        /* The block as the public reader decodes it, kept aside. */
        const hm_block_t *blk;
        CHECK_EQ_INT(hm_trace_read_block(t, b, &blk), 0);
        uint32_t n = blk->n, nev = blk->nevents;
        uint64_t *col = malloc((size_t)n * 8 * 2 + (size_t)nev * 8);
        uint32_t *wt = malloc((size_t)n * 4 + 1);
        uint16_t *ds = malloc((size_t)n * 2 + 1);
        uint8_t *ac = malloc((size_t)n + 1);
        for (uint32_t i = 0; i < n; i++)
            col[i] = blk->time[i], col[n + i] = blk->addr[i], wt[i] = blk->weight[i], ds[i] = blk->dsrc[i],
            ac[i] = blk->access[i];
        hm_event_list_t el;
        uint32_t at = 0, bad = 0;
        CHECK_EQ_INT(hm_trace_batch_begin(t, b, &el), 0);
        CHECK_EQ_INT((int)el.n, (int)nev);
        int got;
        while ((got = hm_trace_batch_next(t, &ch)) > 0)
            for (int i = 0; i < got; i++, at++)
                bad += at >= n || ch.time[i] != col[at] || ch.addr[i] != col[n + at] || ch.weight[i] != wt[at] ||
                       ch.dsrc[i] != ds[at] || ch.access[i] != ac[at];
        CHECK_EQ_INT(got, 0);
        CHECK_EQ_INT((int)at, (int)n);
        CHECK_EQ_INT((int)bad, 0);
        total += at;
        free(col);
        free(wt);
        free(ds);
        free(ac);
    }
    CHECK_EQ_INT((int)total, 20000);
    /* A batch read is refused once another block read replaced its
     * payload, and on a block that does not exist. */
    hm_event_list_t el;
    const hm_block_t *blk;
    CHECK_EQ_INT(hm_trace_batch_begin(t, 1, &el), 0);
    CHECK_EQ_INT(hm_trace_batch_next(t, &ch), HM_TRACE_BATCH);
    CHECK_EQ_INT(hm_trace_read_block(t, 0, &blk), 0);
    CHECK_EQ_INT(hm_trace_batch_next(t, &ch), HM_EUSAGE);
    CHECK_EQ_INT((int)ch.n, 0);
    CHECK_EQ_INT(hm_trace_batch_begin(t, nb, &el), HM_ERANGE);
    CHECK_EQ_INT(hm_trace_batch_next(t, &ch), HM_EUSAGE);
    /* The public reader still works after a scan. */
    hm_record_t rec;
    CHECK_EQ_INT(hm_trace_seek_block(t, 0), 0);
    CHECK_EQ_INT(hm_trace_next(t, &rec), 1);
    hm_trace_close(t);
}

int main(void)
{
    flat_trace();
    scan_trace();
    pg = (size_t)sysconf(_SC_PAGESIZE);
    region_len = 64 * pg;
    region = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(region != MAP_FAILED);
    if (region == MAP_FAILED)
        return check_done();
    CHECK_EQ_INT(mprotect(region + region_len - pg, pg, PROT_NONE), 0);

    codec_case_t *cases;
    size_t n = codec_cases(&cases);
    CHECK(n >= 12);
    hm__cols_t c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < n; i++) {
        int rc = decode(&c, &cases[i]);
        if (cases[i].valid) {
            if (rc != 0)
                fprintf(stderr, "case %s: %s\n", cases[i].name, hm_errdetail());
            CHECK_EQ_INT(rc, 0);
            if (rc == 0 && cases[i].ns) {
                CHECK_EQ_U64(c.addr[cases[i].ns - 1], cases[i].last_addr);
                CHECK_EQ_U64(c.time[cases[i].ns - 1], cases[i].last_time);
            }
            if (rc == 0) {
                int sr = scan_matches(&c, guarded(cases[i].bytes, cases[i].len), &cases[i]);
                if (sr != 0)
                    fprintf(stderr, "case %s: scan: %d %s\n", cases[i].name, sr, hm_errdetail());
                CHECK_EQ_INT(sr, 0);
            }
        } else {
            if (rc != HM_ECORRUPT)
                fprintf(stderr, "case %s: rc %d, want HM_ECORRUPT\n", cases[i].name, rc);
            CHECK_EQ_INT(rc, HM_ECORRUPT);
            /* The scan skips two columns' values, so it may take what the
             * decoder refuses; what it refuses, it refuses as corrupt. */
            int sr = scan_matches(NULL, guarded(cases[i].bytes, cases[i].len), &cases[i]);
            CHECK(sr == HM_ECORRUPT || sr == 0);
        }
    }
    hm__cols_free(&c);
    codec_cases_free(cases, n);
    return check_done();
}
