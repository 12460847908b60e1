/* Arm SPE packet decoder on crafted bytes laid out per the Arm ARM SPE
 * packet formats: each packet kind, several records, padding, a record cut
 * at the end of the buffer, unknown headers, extended headers, garbage;
 * plus PERF_RECORD_AUX accounting in the perf ring decoder. */
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hetmem/error.h"
#include "hetmem/record.h"
#include "hetmem/trace.h"

static uint8_t buf[8192];
static size_t n;

static void b1(uint8_t v) { buf[n++] = v; }
static void le(uint64_t v, unsigned k)
{
    for (unsigned i = 0; i < k; i++)
        b1((uint8_t)(v >> (8 * i)));
}
static void pad(void) { b1(0x00); }
static void end(void) { b1(0x01); }
static void ts(uint64_t v) { b1(0x71); le(v, 8); }
static void addr(unsigned idx, uint64_t v)
{
    if (idx >= 8) {
        b1((uint8_t)(0x20 | (idx >> 3)));
        b1((uint8_t)(0xb0 | (idx & 7)));
    } else {
        b1((uint8_t)(0xb0 | idx));
    }
    le(v, 8);
}
static void counter(unsigned idx, uint64_t v) { b1((uint8_t)(0x98 | idx)); le(v, 2); }
static void events(uint64_t v, unsigned sz) { b1((uint8_t)(0x42 | sz << 4)); le(v, 1u << sz); }
static void source(uint64_t v) { b1(0x43); le(v, 1); }
static void context(uint32_t v) { b1(0x64); le(v, 4); }
static void op(unsigned cls, uint8_t v) { b1((uint8_t)(0x48 | cls)); b1(v); }

#define MAXS 64
static hm_perf_sample_t got[MAXS];
static int ngot;
static void cb(void *ctx, const hm_perf_sample_t *s)
{
    (void)ctx;
    if (ngot < MAXS)
        got[ngot] = *s;
    ngot++;
}

/* A load or store record with the usual packets, ended by a timestamp. */
static void ldst(uint64_t pc, uint64_t va, int store, uint64_t lat, uint64_t ev, int src, uint64_t t)
{
    addr(0, pc | (1ull << 63) | (2ull << 61)); /* NS, EL2 bits must not leak into the PC */
    op(1, store ? 1 : 0);
    counter(0, lat);
    counter(1, 7); /* issue latency: not the weight */
    counter(2, 3); /* translation latency */
    addr(2, va | (0x5aull << 56)); /* tag in the top byte */
    addr(3, 0x80001234ull | (1ull << 63));
    events(ev, 1);
    if (src >= 0)
        source((uint64_t)src);
    ts(t);
}

static int level(const hm_perf_sample_t *s, int *acc)
{
    return HM_DSRC_LEVEL(hm_perf_dsrc(s->data_src, 0, acc));
}

int main(void)
{
    hm_spe_clock_t clk = {.time_zero = 1000, .time_mult = 3, .time_shift = 1, .valid = 1, .offset_ns = 7};
    hm_spe_opts_t o = {.neoverse_dsrc = 0, .pid = 11, .tid = 12};
    hm_spe_stats_t st;
    size_t used;
    int acc;

    /* One load record with every packet kind: events give LLC miss -> memory. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    ldst(0x400123, 0x7fff0000a0ull, 0, 123, (1u << 2) | (1u << 3) | (1u << 8) | (1u << 9), -1, 1000);
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 1);
    CHECK_EQ_U64(used, n);
    CHECK_EQ_U64(got[0].ip, 0x400123);
    CHECK_EQ_U64(got[0].addr, 0x7fff0000a0ull);
    CHECK_EQ_U64(got[0].phys_addr, 0x80001234ull);
    CHECK_EQ_U64(got[0].weight, 123);
    CHECK_EQ_U64(got[0].time, 1000 + 500 * 3 + 7); /* time_zero + (cyc>>1)*mult + offset */
    CHECK_EQ_INT(got[0].pid, 11);
    CHECK_EQ_INT(got[0].tid, 12);
    CHECK_EQ_INT(level(&got[0], &acc), HM_DSRC_MEM);
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    CHECK_EQ_U64(st.records, 1);
    CHECK_EQ_U64(st.no_addr, 0);
    CHECK_EQ_U64(st.packets, 9);

    /* Level from events alone: L1 hit, LLC hit, L1 refill only, remote. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    ldst(0x10, 0x1000, 1, 5, 1u << 2, -1, 1);
    ldst(0x20, 0x2000, 0, 40, (1u << 2) | (1u << 3) | (1u << 8), -1, 2);
    ldst(0x30, 0x3000, 0, 12, (1u << 2) | (1u << 3), -1, 3);
    addr(0, 0x40); op(1, 0); addr(2, 0x4000); events((1u << 9) | (1u << 10), 1); end(); /* 2-byte events */
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 4);
    CHECK_EQ_INT(level(&got[0], &acc), HM_DSRC_L1);
    CHECK_EQ_INT(acc, HM_ACCESS_STORE);
    CHECK_EQ_INT(level(&got[1], &acc), HM_DSRC_L3);
    CHECK_EQ_INT(level(&got[2], &acc), HM_DSRC_L2);
    CHECK_EQ_INT(level(&got[3], &acc), HM_DSRC_REMOTE);
    CHECK_EQ_U64(got[3].time, 0); /* ended by End, no timestamp */
    CHECK_EQ_U64(got[3].weight, 0);

    /* Neoverse data source wins over events when enabled; ignored otherwise. */
    static const struct { int src, want; } ns[] = {
        {0x0, HM_DSRC_L1}, {0x8, HM_DSRC_L2}, {0x9, HM_DSRC_L2}, {0xa, HM_DSRC_L3},
        {0xb, HM_DSRC_L3}, {0xc, HM_DSRC_L3}, {0xd, HM_DSRC_REMOTE}, {0xe, HM_DSRC_MEM},
        {0x3, HM_DSRC_L1} /* unknown value: falls back to events (L1 access) */,
    };
    hm_spe_opts_t on = o;
    on.neoverse_dsrc = 1;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        n = 0; ngot = 0; memset(&st, 0, sizeof st);
        ldst(0x10, 0x1000, 0, 5, 1u << 2, ns[i].src, 1);
        CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &on, cb, NULL, &st, &used), 0);
        CHECK_EQ_INT(ngot, 1);
        CHECK_EQ_INT(level(&got[0], NULL), ns[i].want);
        ngot = 0;
        CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
        CHECK_EQ_INT(level(&got[0], NULL), HM_DSRC_L1);
    }

    /* Branch and other operations: no load/store, no address. Context
     * packet names the thread; kernel-half PC sign-extends from bit 55. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    addr(0, 0x00ffff0000001000ull); op(2, 1); addr(1, 0x2000); context(4242); ts(10);
    op(0, 0); addr(0, 0x500); end();
    CHECK_EQ_INT(hm_spe_decode(buf, n, NULL, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 2);
    CHECK_EQ_U64(got[0].ip, 0xffffff0000001000ull);
    CHECK_EQ_INT(got[0].tid, 4242);
    CHECK_EQ_U64(got[0].time, 10); /* no clock: raw counter */
    CHECK_EQ_U64(got[0].addr, 0);
    level(&got[0], &acc);
    CHECK_EQ_INT(acc, -1);
    CHECK_EQ_INT(got[1].tid, 12);
    CHECK_EQ_U64(st.no_addr, 2);

    /* Padding between and inside records, End packets alone. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    for (int i = 0; i < 5; i++) pad();
    ldst(0x10, 0x1000, 0, 5, 0, -1, 1);
    pad(); pad(); end(); end();
    addr(0, 0x20); pad(); op(1, 0); addr(2, 0x2000); pad(); ts(2);
    for (int i = 0; i < 3; i++) pad();
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 2);
    CHECK_EQ_U64(got[1].addr, 0x2000);
    CHECK_EQ_U64(st.padding, 12);
    CHECK_EQ_U64(used, n);

    /* Many records back to back. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    for (int i = 0; i < 40; i++)
        ldst(0x1000 + (uint64_t)i, 0x10000 + 64 * (uint64_t)i, i & 1, (uint64_t)i, 1u << 2, -1, (uint64_t)i);
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 40);
    CHECK_EQ_U64(got[39].addr, 0x10000 + 64 * 39);
    CHECK_EQ_U64(got[38].weight, 38);
    CHECK_EQ_U64(used, n);

    /* A record cut at the end of the buffer (inside the data address
     * payload) waits; given the rest, it decodes once, not twice. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    ldst(0x10, 0x1000, 0, 5, 0, -1, 1);
    size_t first = n;
    ldst(0x20, 0x2000, 1, 6, 0, -1, 2);
    size_t full = n;
    size_t cuts[] = {first + 1, first + 15, first + 20, full - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        ngot = 0;
        CHECK_EQ_INT(hm_spe_decode(buf, cuts[c], &clk, &o, cb, NULL, &st, &used), 0);
        CHECK_EQ_INT(ngot, 1);
        CHECK_EQ_U64(used, first);
        CHECK_EQ_INT(hm_spe_decode(buf + used, full - used, &clk, &o, cb, NULL, &st, &used), 0);
        CHECK_EQ_INT(ngot, 2);
        CHECK_EQ_U64(got[1].addr, 0x2000);
        CHECK_EQ_U64(used, full - first);
    }
    /* Cut inside an extended header. */
    n = 0; ngot = 0;
    b1(0x20);
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_U64(used, 0);
    CHECK_EQ_INT(ngot, 0);

    /* Extended headers: data VA as index 2 through the long form; a
     * counter with index 8+ is ignored; a bad second byte is unknown. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    addr(0, 0x30); op(1, 0);
    b1(0x20); b1(0xb2); le(0xabc000, 8);
    b1(0x21); b1(0x98); le(999, 2); /* counter index 8 */
    counter(0, 77);
    end();
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 1);
    CHECK_EQ_U64(got[0].addr, 0xabc000);
    CHECK_EQ_U64(got[0].weight, 77);
    CHECK_EQ_U64(st.bad_packets, 0);

    /* Unknown header: its record is dropped whole, the next one survives. */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    ldst(0x10, 0x1000, 0, 5, 0, -1, 1);
    addr(0, 0x20); b1(0xff); op(1, 0); addr(2, 0x2000); ts(2);
    b1(0x20); b1(0x42); pad(); end(); /* extended header with a non-address/counter byte */
    ldst(0x30, 0x3000, 0, 5, 0, -1, 3);
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 2);
    CHECK_EQ_U64(got[0].addr, 0x1000);
    CHECK_EQ_U64(got[1].addr, 0x3000);
    CHECK_EQ_U64(st.bad_records, 2);
    CHECK(st.bad_packets >= 2);
    CHECK_EQ_U64(used, n);

    /* Garbage: all-unknown bytes give nothing and consume nothing (no
     * record ever ended); random bytes never read out of bounds (ASan). */
    n = 0; ngot = 0; memset(&st, 0, sizeof st);
    for (int i = 0; i < 256; i++) b1(0xff);
    CHECK_EQ_INT(hm_spe_decode(buf, n, &clk, &o, cb, NULL, &st, &used), 0);
    CHECK_EQ_INT(ngot, 0);
    CHECK_EQ_U64(used, 0);
    CHECK_EQ_U64(st.bad_packets, 256);
    uint32_t seed = 12345;
    for (int round = 0; round < 200; round++) {
        size_t len = 1 + (size_t)(round * 37 % 4000);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (uint8_t)(seed >> 16);
        }
        memset(&st, 0, sizeof st);
        ngot = 0;
        CHECK_EQ_INT(hm_spe_decode(buf, len, &clk, &o, cb, NULL, &st, &used), 0);
        CHECK(used <= len);
        CHECK(st.records == (uint64_t)ngot);
    }

    /* Bad arguments. */
    CHECK_EQ_INT(hm_spe_decode(NULL, 4, &clk, &o, cb, NULL, &st, &used), HM_EUSAGE);
    CHECK_EQ_INT(hm_spe_decode(buf, 4, &clk, &o, cb, NULL, NULL, &used), HM_EUSAGE);
    CHECK_EQ_INT(hm_spe_decode(NULL, 0, &clk, &o, cb, NULL, &st, &used), 0);

    /* Time conversion against 128-bit arithmetic, large counts included. */
    hm_spe_clock_t c2 = {.time_zero = 5, .time_mult = 0x9a3e6c1f, .time_shift = 31, .valid = 1, .offset_ns = -5};
    uint64_t cycs[] = {0, 1, 25000000, 1ull << 40, (1ull << 62) + 12345};
    for (size_t i = 0; i < sizeof cycs / sizeof cycs[0]; i++) {
        unsigned __int128 w = (unsigned __int128)cycs[i] * c2.time_mult >> c2.time_shift;
        CHECK_EQ_U64(hm_spe_time(&c2, cycs[i]), (uint64_t)w);
    }
    c2.valid = 0;
    CHECK_EQ_U64(hm_spe_time(&c2, 777), 777);

    /* PERF_RECORD_AUX in the data ring: counted with their flags. */
    static uint8_t ring[256], scr[256];
    uint64_t w = 0;
    uint64_t flags[] = {0, PERF_AUX_FLAG_TRUNCATED, 0x08 /* COLLISION */, PERF_AUX_FLAG_PARTIAL};
    for (int i = 0; i < 4; i++) {
        struct perf_event_header h = {PERF_RECORD_AUX, 0, 8 + 24};
        uint64_t body[3] = {(uint64_t)i * 4096, 4096, flags[i]};
        memcpy(ring + w, &h, 8);
        memcpy(ring + w + 8, body, 24);
        w += 32;
    }
    hm_perf_ring_stats_t rs;
    memset(&rs, 0, sizeof rs);
    uint64_t nt;
    CHECK_EQ_INT(hm_perf_ring_decode(ring, sizeof ring, 0, w, PERF_SAMPLE_IP, scr, sizeof scr, NULL, NULL, &rs, &nt), 0);
    CHECK_EQ_U64(nt, w);
    CHECK_EQ_U64(rs.aux_records, 4);
    CHECK_EQ_U64(rs.aux_bytes, 4 * 4096);
    CHECK_EQ_U64(rs.aux_truncated, 1);
    CHECK_EQ_U64(rs.aux_collision, 1);
    CHECK_EQ_U64(rs.aux_partial, 1);
    CHECK_EQ_U64(rs.other, 0);
    return check_done();
}
