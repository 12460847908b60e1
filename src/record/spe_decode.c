/* Arm SPE packet decoder. Pure: bytes in, hm_perf_sample_t out.
 *
 * Layout per the Arm Architecture Reference Manual, chapter "Statistical
 * Profiling Extension" (packet formats), as the Linux perf tool's
 * tools/perf/util/arm-spe-decoder/arm-spe-pkt-decoder.[ch] also lays it out:
 *
 *   header byte        packet            payload
 *   0000 0000          padding           -
 *   0000 0001          end               -
 *   0111 0001          timestamp         8 bytes (generic timer count)
 *   01ss 0010          events            1 << ss bytes (bitmask)
 *   01ss 0011          data source       1 << ss bytes
 *   0110 01ii          context           4 bytes (CONTEXTIDR_EL1/EL2)
 *   0100 10cc          operation type    1 byte (cc: 0 other, 1 load/store, 2 branch)
 *   1011 0iii          address           8 bytes (index 0 PC, 1 branch target,
 *                                        2 data VA, 3 data PA, 4 previous branch)
 *   1001 1iii          counter           2 bytes (index 0 total, 1 issue,
 *                                        2 translation latency)
 *   0010 00II + byte   extended header: II are index bits 4:3 of the
 *                      address or counter header in the second byte.
 *
 * Payloads are little-endian. Address payloads: bits 55:0 the address; for
 * PC and branch addresses bit 63 = NS and bits 62:61 = EL; for the data PA
 * bit 63 = NS; virtual addresses are sign-extended from bit 55 (the top
 * byte of a data VA carries the tag, not address bits).
 *
 * A record ends with an end packet, or with a timestamp packet when
 * timestamps are enabled (ts_enable=1). */
#include "record/record_int.h"

#include <linux/perf_event.h>
#include <string.h>

enum {
    OP_OTHER = 0, OP_LDST = 1, OP_BRANCH = 2,
    ADDR_PC = 0, ADDR_DATA_VA = 2, ADDR_DATA_PA = 3,
    CNT_TOTAL = 0,
    /* events packet bits */
    EV_L1D_ACCESS = 1u << 2, EV_L1D_REFILL = 1u << 3,
    EV_LLC_ACCESS = 1u << 8, EV_LLC_MISS = 1u << 9, EV_REMOTE = 1u << 10,
};

/* Neoverse data-source values (Arm Neoverse N1/N2/V1/V2 TRMs, "SPE data
 * source packet"): mapped to a perf mem level. Table, not a chain. */
typedef struct {
    uint8_t lvlnum, remote;
} nsrc_t;
static const nsrc_t neoverse_src_[16] = {
    [0x0] = {PERF_MEM_LVLNUM_L1, 0},
    [0x8] = {PERF_MEM_LVLNUM_L2, 0},
    [0x9] = {PERF_MEM_LVLNUM_L2, 0},        /* peer core: another core's L1/L2 */
    [0xa] = {PERF_MEM_LVLNUM_L3, 0},        /* local cluster */
    [0xb] = {PERF_MEM_LVLNUM_L3, 0},        /* system level cache */
    [0xc] = {PERF_MEM_LVLNUM_L3, 0},        /* peer cluster */
    [0xd] = {PERF_MEM_LVLNUM_ANY_CACHE, 1}, /* remote: other chip */
    [0xe] = {PERF_MEM_LVLNUM_RAM, 0},
};

/* What one record has collected so far. */
typedef struct {
    uint64_t pc, va, pa, ts, total_lat, events, src;
    uint32_t ctx;
    int op, st, has_va, has_pa, has_ts, has_src, has_ctx, has_pc, bad;
} rec_t;

uint64_t hm_spe_time(const hm_spe_clock_t *clk, uint64_t cyc)
{
    if (!clk || !clk->valid)
        return cyc;
    /* perf_event_open(2), "time_zero": split to avoid the 64-bit overflow. */
    unsigned sh = clk->time_shift & 63u;
    uint64_t quot = cyc >> sh, rem = cyc & ((1ull << sh) - 1);
    uint64_t ns = clk->time_zero + quot * clk->time_mult + ((rem * clk->time_mult) >> sh);
    return ns + (uint64_t)clk->offset_ns;
}

static uint64_t le_(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t sext55_(uint64_t a)
{
    a &= (1ull << 56) - 1;
    return (a & (1ull << 55)) ? (a | 0xff00000000000000ull) : a;
}

/* perf_mem_data_src for a record, as the Linux perf tool synthesises it
 * for SPE, reduced to what hm_perf_dsrc() reads. */
static uint64_t dsrc_(const rec_t *r, int neoverse)
{
    union perf_mem_data_src d = {.val = 0};
    d.mem_op = r->op != OP_LDST ? PERF_MEM_OP_NA : r->st ? PERF_MEM_OP_STORE : PERF_MEM_OP_LOAD;
    d.mem_lvl = PERF_MEM_LVL_NA;
    if (r->op != OP_LDST)
        return d.val;
    if (neoverse && r->has_src && r->src < 16 && (r->src == 0 || neoverse_src_[r->src].lvlnum)) {
        d.mem_lvl_num = neoverse_src_[r->src].lvlnum;
        d.mem_remote = neoverse_src_[r->src].remote;
        return d.val;
    }
    /* Events only: the remote bit wins, then the deepest level reached. */
    if (r->events & EV_REMOTE) {
        d.mem_lvl_num = PERF_MEM_LVLNUM_ANY_CACHE;
        d.mem_remote = 1;
    } else if (r->events & EV_LLC_MISS) {
        d.mem_lvl_num = PERF_MEM_LVLNUM_RAM;
    } else if (r->events & EV_LLC_ACCESS) {
        d.mem_lvl_num = PERF_MEM_LVLNUM_L3;
    } else if (r->events & EV_L1D_REFILL) {
        d.mem_lvl_num = PERF_MEM_LVLNUM_L2;
    } else if (r->events & EV_L1D_ACCESS) {
        d.mem_lvl_num = PERF_MEM_LVLNUM_L1;
    }
    return d.val;
}

/* Length of the packet at p (header included), or 0 when more bytes are
 * needed, or -1 for an unknown header. Fills *kind, *idx and *payload. */
enum { K_PAD, K_END, K_TS, K_EVENTS, K_SRC, K_CTX, K_OP, K_ADDR, K_CNT };
static int packet_(const uint8_t *p, size_t n, int *kind, unsigned *idx, uint64_t *payload)
{
    uint8_t h = p[0];
    size_t hl = 1;
    unsigned ext = 0;
    *idx = 0;
    if (h == 0x00) { *kind = K_PAD; return 1; }
    if (h == 0x01) { *kind = K_END; return 1; }
    if ((h & 0xfc) == 0x20) {
        /* Extended header: only address and counter packets have one. */
        if (n < 2)
            return 0;
        ext = (unsigned)(h & 3) << 3;
        h = p[1];
        hl = 2;
        if ((h & 0xf8) != 0xb0 && (h & 0xf8) != 0x98)
            return -1;
    }
    size_t pl;
    if (h == 0x71) {
        *kind = K_TS;
        pl = 8;
    } else if ((h & 0xcf) == 0x42 || (h & 0xcf) == 0x43) {
        *kind = (h & 1) ? K_SRC : K_EVENTS;
        pl = (size_t)1 << ((h >> 4) & 3);
    } else if ((h & 0xfc) == 0x64) {
        *kind = K_CTX;
        *idx = h & 3;
        pl = 4;
    } else if ((h & 0xfc) == 0x48) {
        *kind = K_OP;
        *idx = h & 3;
        pl = 1;
    } else if ((h & 0xf8) == 0xb0) {
        *kind = K_ADDR;
        *idx = ext | (h & 7);
        pl = 8;
    } else if ((h & 0xf8) == 0x98) {
        *kind = K_CNT;
        *idx = ext | (h & 7);
        pl = 2;
    } else {
        return -1;
    }
    if (n < hl + pl)
        return 0;
    *payload = le_(p + hl, (unsigned)pl);
    return (int)(hl + pl);
}

static void emit_(const rec_t *r, const hm_spe_clock_t *clk, const hm_spe_opts_t *o, hm_perf_sample_cb cb,
                  void *ctx, hm_spe_stats_t *st)
{
    if (r->bad) {
        st->bad_records++;
        return;
    }
    if (!r->has_pc && !r->has_va && !r->has_ts && r->op < 0)
        return; /* nothing but padding/end: not a sampled operation */
    hm_perf_sample_t s;
    memset(&s, 0, sizeof s);
    s.ip = r->pc;
    s.addr = r->has_va ? r->va : 0;
    s.phys_addr = r->has_pa ? r->pa : 0;
    s.time = r->has_ts ? hm_spe_time(clk, r->ts) : 0;
    s.weight = r->total_lat;
    s.data_src = dsrc_(r, o ? o->neoverse_dsrc : 0);
    s.pid = o ? o->pid : 0;
    s.tid = r->has_ctx ? r->ctx : o ? o->tid : 0;
    st->records++;
    if (!r->has_va)
        st->no_addr++;
    if (cb)
        cb(ctx, &s);
}

int hm_spe_decode(const uint8_t *buf, size_t len, const hm_spe_clock_t *clk, const hm_spe_opts_t *opts,
                  hm_perf_sample_cb cb, void *ctx, hm_spe_stats_t *st, size_t *consumed)
{
    hm__errclear();
    if ((!buf && len) || !st || !consumed)
        return hm__errf(HM_EUSAGE, "hm_spe_decode: NULL argument");
    size_t pos = 0, rec_start = 0;
    rec_t r;
    memset(&r, 0, sizeof r);
    r.op = -1;
    *consumed = 0;
    while (pos < len) {
        int kind;
        unsigned idx;
        uint64_t v = 0;
        int n = packet_(buf + pos, len - pos, &kind, &idx, &v);
        if (n == 0)
            break; /* cut at the end of the buffer: keep the record for later */
        if (n < 0) {
            /* Unknown header: no length to skip by, so step one byte and
             * drop the record it sits in (its fields cannot be trusted). */
            st->bad_packets++;
            r.bad = 1;
            pos++;
            continue;
        }
        st->packets++;
        pos += (size_t)n;
        switch (kind) {
        case K_PAD:
            st->padding++;
            if (rec_start == pos - 1 && !r.bad)
                rec_start = pos; /* padding between records belongs to none */
            break;
        case K_EVENTS: r.events = v; break;
        case K_SRC: r.src = v; r.has_src = 1; break;
        case K_CTX: r.ctx = (uint32_t)v; r.has_ctx = 1; break;
        case K_OP: r.op = (int)idx; r.st = (int)(v & 1); break;
        case K_ADDR:
            if (idx == ADDR_PC) { r.pc = sext55_(v); r.has_pc = 1; }
            else if (idx == ADDR_DATA_VA) { r.va = sext55_(v); r.has_va = 1; }
            else if (idx == ADDR_DATA_PA) { r.pa = v & ((1ull << 56) - 1); r.has_pa = 1; }
            break;
        case K_CNT:
            if (idx == CNT_TOTAL)
                r.total_lat = v;
            break;
        case K_TS:
            r.ts = v;
            r.has_ts = 1;
            /* fall through - a timestamp ends the record */
        case K_END:
            emit_(&r, clk, opts, cb, ctx, st);
            memset(&r, 0, sizeof r);
            r.op = -1;
            rec_start = pos;
            break;
        }
    }
    /* Bytes after the last complete record: garbage that can never end a
     * record (a whole buffer of it) is the caller's call; here it waits. */
    *consumed = rec_start;
    return 0;
}
