/* perf ring-buffer decoder on crafted bytes laid out as perf_event_open(2)
 * describes: samples, wrap-around, LOST/LOST_SAMPLES, THROTTLE/UNTHROTTLE,
 * truncated records and garbage sizes. */
#include <linux/perf_event.h>
#include <stdlib.h>

#include "check.h"
#include "hetmem/record.h"
#include "hetmem/trace.h"
#include "record/record_int.h"

#define RING 256
static uint8_t ring[RING];
static uint64_t wpos; /* free-running head */

static void put_bytes(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ring[(wpos + i) & (RING - 1)] = ((const uint8_t *)p)[i];
    wpos += n;
}
static void put_hdr(uint32_t type, uint16_t size)
{
    struct perf_event_header h = {type, 0, size};
    put_bytes(&h, sizeof h);
}
static void put_u64(uint64_t v) { put_bytes(&v, 8); }

#define ST (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC)

static void put_sample(uint64_t ip, uint32_t pid, uint32_t tid, uint64_t time, uint64_t addr, uint64_t w, uint64_t ds)
{
    put_hdr(PERF_RECORD_SAMPLE, 8 + 6 * 8);
    put_u64(ip);
    put_u64((uint64_t)pid | (uint64_t)tid << 32);
    put_u64(time);
    put_u64(addr);
    put_u64(w);
    put_u64(ds);
}

static hm_perf_sample_t got[16];
static int ngot;
static void cb(void *ctx, const hm_perf_sample_t *s)
{
    (void)ctx;
    if (ngot < 16)
        got[ngot++] = *s;
}

static uint8_t scratch[65536];

static int decode(uint64_t tail, uint64_t st, hm_perf_ring_stats_t *stats, uint64_t *nt)
{
    ngot = 0;
    return hm_perf_ring_decode(ring, RING, tail, wpos, st, scratch, sizeof scratch, cb, NULL, stats, nt);
}

static void test_samples(void)
{
    hm_perf_ring_stats_t s = {0};
    uint64_t nt;
    wpos = 0;
    put_sample(0x401000, 10, 11, 1000, 0x7f0000001000, 250, 0);
    put_sample(0x401008, 10, 12, 2000, 0x7f0000002000, 30, 0);
    CHECK_EQ_INT(decode(0, ST, &s, &nt), 0);
    CHECK_EQ_U64(nt, wpos);
    CHECK_EQ_INT(ngot, 2);
    CHECK_EQ_U64(got[0].ip, 0x401000);
    CHECK_EQ_INT(got[0].pid, 10);
    CHECK_EQ_INT(got[0].tid, 11);
    CHECK_EQ_U64(got[0].time, 1000);
    CHECK_EQ_U64(got[0].addr, 0x7f0000001000);
    CHECK_EQ_U64(got[0].weight, 250);
    CHECK_EQ_INT(got[1].tid, 12);
    CHECK_EQ_U64(got[1].addr, 0x7f0000002000);
    CHECK_EQ_INT(s.samples, 2);
    CHECK_EQ_INT(s.wrapped, 0);
}

static void test_wrap(void)
{
    /* Start 24 bytes before the end: the 56-byte sample wraps in its body;
     * the next one's header straddles the end too (start 4 bytes before). */
    for (uint64_t start = RING - 24; start <= RING - 4; start += 20) {
        hm_perf_ring_stats_t s = {0};
        uint64_t nt;
        wpos = start + RING * 3; /* counters are free-running */
        uint64_t tail = wpos;
        put_sample(0xaaa, 1, 2, 3, 0xdead0000, 7, 0);
        put_sample(0xbbb, 1, 2, 4, 0xbeef0000, 8, 0);
        CHECK_EQ_INT(decode(tail, ST, &s, &nt), 0);
        CHECK_EQ_INT(ngot, 2);
        CHECK_EQ_U64(got[0].addr, 0xdead0000);
        CHECK_EQ_U64(got[1].addr, 0xbeef0000);
        CHECK_EQ_U64(got[1].weight, 8);
        CHECK_EQ_INT(s.wrapped, 1);
        CHECK_EQ_U64(nt, wpos);
    }
}

static void test_lost_throttle(void)
{
    hm_perf_ring_stats_t s = {0};
    uint64_t nt;
    wpos = 0;
    put_hdr(PERF_RECORD_LOST, 24);
    put_u64(99); /* id */
    put_u64(7);  /* lost */
    put_hdr(PERF_RECORD_THROTTLE, 8 + 24);
    put_u64(1); put_u64(2); put_u64(3);
    put_sample(1, 2, 3, 4, 5, 6, 0);
    put_hdr(PERF_RECORD_UNTHROTTLE, 8 + 24);
    put_u64(1); put_u64(2); put_u64(3);
    put_hdr(PERF_RECORD_LOST_SAMPLES, 16);
    put_u64(3);
    put_hdr(PERF_RECORD_COMM, 24);
    put_u64(0); put_u64(0);
    CHECK_EQ_INT(decode(0, ST, &s, &nt), 0);
    CHECK_EQ_INT(ngot, 1);
    CHECK_EQ_INT(s.lost_records, 1);
    CHECK_EQ_INT(s.lost, 10);
    CHECK_EQ_INT(s.throttle, 1);
    CHECK_EQ_INT(s.unthrottle, 1);
    CHECK_EQ_INT(s.other, 1);
    CHECK_EQ_U64(nt, wpos);
}

static void test_bad(void)
{
    hm_perf_ring_stats_t s = {0};
    uint64_t nt;
    /* A sample record whose size is too small for its fields: skipped,
     * counted, and the next record still decodes. */
    wpos = 0;
    put_hdr(PERF_RECORD_SAMPLE, 8 + 16);
    put_u64(0x1); put_u64(0x2);
    put_sample(0x10, 1, 2, 3, 0x4000, 5, 0);
    CHECK_EQ_INT(decode(0, ST, &s, &nt), 0);
    CHECK_EQ_INT(s.bad, 1);
    CHECK_EQ_INT(ngot, 1);
    CHECK_EQ_U64(got[0].addr, 0x4000);

    /* Garbage size (not a multiple of 8 / below the header): the rest is
     * dropped, the tail jumps to head so the reader cannot spin. */
    uint16_t bad_sizes[] = {0, 4, 13};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        hm_perf_ring_stats_t b = {0};
        wpos = 0;
        put_sample(0x10, 1, 2, 3, 0x4000, 5, 0);
        put_hdr(PERF_RECORD_SAMPLE, bad_sizes[i]);
        put_u64(0);
        CHECK_EQ_INT(decode(0, ST, &b, &nt), HM_ECORRUPT);
        CHECK_EQ_INT(ngot, 1);
        CHECK_EQ_INT(b.bad, 1);
        CHECK_EQ_U64(nt, wpos);
    }

    /* A record larger than what is published: stop before it (ETRUNC) so the
     * next read resumes there once the kernel publishes the rest. */
    wpos = 0;
    put_sample(0x10, 1, 2, 3, 0x4000, 5, 0);
    uint64_t mid = wpos;
    put_hdr(PERF_RECORD_SAMPLE, 56);
    put_u64(1);
    CHECK_EQ_INT(decode(0, ST, &s, &nt), HM_ETRUNC);
    CHECK_EQ_U64(nt, mid);
    CHECK_EQ_INT(ngot, 1);

    /* Counters that cannot be right. */
    hm_perf_ring_stats_t c = {0};
    CHECK_EQ_INT(hm_perf_ring_decode(ring, RING, 100, 50, ST, scratch, sizeof scratch, cb, NULL, &c, &nt), HM_ECORRUPT);
    CHECK_EQ_INT(hm_perf_ring_decode(ring, RING, 0, RING + 8, ST, scratch, sizeof scratch, cb, NULL, &c, &nt), HM_ECORRUPT);
    CHECK_EQ_INT(hm_perf_ring_decode(ring, 100, 0, 0, ST, scratch, sizeof scratch, cb, NULL, &c, &nt), HM_EUSAGE);
    CHECK_EQ_INT(hm_perf_ring_decode(ring, RING, 0, 0, ST | PERF_SAMPLE_READ, scratch, sizeof scratch, cb, NULL, &c, &nt),
                 HM_EUSAGE);
    /* A wrapping record bigger than the scratch is refused, not overflowed. */
    wpos = RING - 8;
    put_sample(0x10, 1, 2, 3, 0x4000, 5, 0);
    CHECK_EQ_INT(hm_perf_ring_decode(ring, RING, RING - 8, wpos, ST, scratch, 16, cb, NULL, &c, &nt), HM_ECORRUPT);
}

static void test_layout(void)
{
    /* IDENTIFIER, CPU, PERIOD, CALLCHAIN, RAW, WEIGHT_STRUCT, PHYS_ADDR. */
    uint64_t st = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                  PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_PHYS_ADDR;
    hm_perf_ring_stats_t s = {0};
    uint64_t nt;
    wpos = 0;
    /* 8 hdr + id 8 + ip 8 + cpu 8 + period 8 + callchain (8 + 2*8) + raw (4 + 12) + w 8 + phys 8 */
    put_hdr(PERF_RECORD_SAMPLE, 8 + 8 + 8 + 8 + 8 + 24 + 16 + 8 + 8);
    put_u64(77); put_u64(0x1234); put_u64(5); put_u64(4000);
    put_u64(2); put_u64(0xa); put_u64(0xb);
    uint32_t rs = 12; put_bytes(&rs, 4);
    uint8_t raw[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; put_bytes(raw, 12);
    put_u64(0xffff000000000123ull); /* WEIGHT_STRUCT: var1_dw = 0x123 */
    put_u64(0xfeed000);
    CHECK_EQ_INT(decode(0, st, &s, &nt), 0);
    CHECK_EQ_INT(ngot, 1);
    CHECK_EQ_U64(got[0].id, 77);
    CHECK_EQ_U64(got[0].ip, 0x1234);
    CHECK_EQ_INT(got[0].cpu, 5);
    CHECK_EQ_U64(got[0].period, 4000);
    CHECK_EQ_INT(got[0].raw_size, 12);
    CHECK_EQ_U64(got[0].weight, 0x123);
    CHECK_EQ_U64(got[0].phys_addr, 0xfeed000);
    CHECK(!hm_perf_sample_type_ok(PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT));
}

static uint64_t mkds(unsigned op, unsigned lvl, unsigned lvlnum, unsigned remote)
{
    union perf_mem_data_src d = {.val = 0};
    d.mem_op = op;
    d.mem_lvl = lvl;
    d.mem_lvl_num = lvlnum;
    d.mem_remote = remote;
    return d.val;
}

static void test_dsrc(void)
{
    int acc;
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_LOAD, PERF_MEM_LVL_HIT | PERF_MEM_LVL_LOC_RAM, PERF_MEM_LVLNUM_RAM, 0), 2, &acc),
                 HM_DSRC_MAKE_MEM(2));
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_STORE, PERF_MEM_LVL_HIT | PERF_MEM_LVL_L1, PERF_MEM_LVLNUM_NA, 0), 0, &acc),
                 HM_DSRC_L1);
    CHECK_EQ_INT(acc, HM_ACCESS_STORE);
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_LOAD, PERF_MEM_LVL_HIT | PERF_MEM_LVL_LFB, PERF_MEM_LVLNUM_NA, 0), 0, &acc),
                 HM_DSRC_LFB);
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_LOAD, 0, PERF_MEM_LVLNUM_L3, 1), 0, &acc), HM_DSRC_REMOTE);
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_LOAD, PERF_MEM_LVL_HIT | PERF_MEM_LVL_L2, PERF_MEM_LVLNUM_NA, 0), 0, &acc),
                 HM_DSRC_L2);
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_LOAD, PERF_MEM_LVL_HIT | PERF_MEM_LVL_REM_RAM1, PERF_MEM_LVLNUM_NA, 0), 1, &acc),
                 HM_DSRC_MAKE_MEM(1));
    CHECK_EQ_INT(hm_perf_dsrc(mkds(PERF_MEM_OP_NA, PERF_MEM_LVL_NA, PERF_MEM_LVLNUM_NA, 0), 0, &acc), HM_DSRC_UNKNOWN);
    CHECK_EQ_INT(acc, -1);
}

static void test_format(void)
{
    uint64_t cfg[3] = {0, 0, 0};
    CHECK_EQ_INT(hm__perf_format_apply("config:0-7,32-35", 0x1cd, cfg), 0);
    CHECK_EQ_U64(cfg[0], 0x1000000cdull);
    CHECK_EQ_INT(hm__perf_format_apply("config1:0-15", 30, cfg), 0);
    CHECK_EQ_U64(cfg[1], 30);
    CHECK_EQ_INT(hm__perf_format_apply("config2:0-11", 0xfff, cfg), 0);
    CHECK_EQ_U64(cfg[2], 0xfff);
    CHECK_EQ_INT(hm__perf_format_apply("config:33", 1, cfg), 0);
    CHECK_EQ_U64(cfg[0], 0x2000000cdull | 0x1000000cdull);
    CHECK_EQ_INT(hm__perf_format_apply("config3:1", 1, cfg), HM_ECORRUPT);
    CHECK_EQ_INT(hm__perf_format_apply("config:9-2", 1, cfg), HM_ECORRUPT);
    CHECK_EQ_INT(hm__perf_format_apply("config:70", 1, cfg), HM_ECORRUPT);
}

int main(void)
{
    test_samples();
    test_wrap();
    test_lost_throttle();
    test_bad();
    test_layout();
    test_dsrc();
    test_format();
    return check_done();
}
