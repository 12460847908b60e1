/* Block decoder on hand-made payloads, valid and malformed. Each payload is
 * placed so that its HM__RAW_PAD bytes of padding end exactly at an
 * inaccessible page: a decoder that reads past the padding crashes here
 * even without a sanitizer. Every malformed payload must be refused with
 * HM_ECORRUPT. The same cases seed the raw-block fuzz corpus. */
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

int main(void)
{
    flat_trace();
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
        } else {
            if (rc != HM_ECORRUPT)
                fprintf(stderr, "case %s: rc %d, want HM_ECORRUPT\n", cases[i].name, rc);
            CHECK_EQ_INT(rc, HM_ECORRUPT);
        }
    }
    hm__cols_free(&c);
    codec_cases_free(cases, n);
    return check_done();
}
