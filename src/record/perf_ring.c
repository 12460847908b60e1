/* perf ring-buffer decoding. hm_perf_ring_decode() is pure so that crafted
 * byte buffers test it; hm__perf_ring_read() adds the libperf-style
 * head/tail protocol on a live mmap. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hetmem/trace.h"

/* Sample fields the decoder lays out. Anything else (READ, BRANCH_STACK,
 * REGS_*, STACK_USER...) has a variable layout that depends on other attr
 * fields; the backends never ask for them. */
#define SUPPORTED                                                                                  \
    (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |                \
     PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |                 \
     PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_WEIGHT |           \
     PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION | PERF_SAMPLE_PHYS_ADDR |                      \
     PERF_SAMPLE_WEIGHT_STRUCT)

int hm_perf_sample_type_ok(uint64_t t)
{
    if (t & ~(uint64_t)SUPPORTED)
        return 0;
    /* WEIGHT and WEIGHT_STRUCT are mutually exclusive in the kernel too. */
    if ((t & PERF_SAMPLE_WEIGHT) && (t & PERF_SAMPLE_WEIGHT_STRUCT))
        return 0;
    return 1;
}

typedef struct {
    const uint8_t *p, *end;
    int bad;
} cur_t;

static uint64_t u64_(cur_t *c)
{
    uint64_t v = 0;
    if (c->end - c->p < 8) {
        c->bad = 1;
        c->p = c->end;
        return 0;
    }
    memcpy(&v, c->p, 8);
    c->p += 8;
    return v;
}

/* Decodes the body of one PERF_RECORD_SAMPLE in perf_event_open(2) order. */
static int parse_sample(const uint8_t *body, size_t len, uint64_t t, hm_perf_sample_t *s)
{
    cur_t c = {body, body + len, 0};
    memset(s, 0, sizeof *s);
    if (t & PERF_SAMPLE_IDENTIFIER) s->id = u64_(&c);
    if (t & PERF_SAMPLE_IP) s->ip = u64_(&c);
    if (t & PERF_SAMPLE_TID) {
        uint64_t v = u64_(&c);
        s->pid = (uint32_t)v;
        s->tid = (uint32_t)(v >> 32);
    }
    if (t & PERF_SAMPLE_TIME) s->time = u64_(&c);
    if (t & PERF_SAMPLE_ADDR) s->addr = u64_(&c);
    if (t & PERF_SAMPLE_ID) s->id = u64_(&c);
    if (t & PERF_SAMPLE_STREAM_ID) (void)u64_(&c);
    if (t & PERF_SAMPLE_CPU) s->cpu = (uint32_t)u64_(&c);
    if (t & PERF_SAMPLE_PERIOD) s->period = u64_(&c);
    if (t & PERF_SAMPLE_CALLCHAIN) {
        uint64_t nr = u64_(&c);
        if (nr > (uint64_t)(c.end - c.p) / 8)
            return -1;
        c.p += nr * 8;
    }
    if (t & PERF_SAMPLE_RAW) {
        /* u32 size then the payload; size + 4 keeps the record 8-aligned. */
        if (c.end - c.p < 4)
            return -1;
        uint32_t rs;
        memcpy(&rs, c.p, 4);
        c.p += 4;
        if (rs > (size_t)(c.end - c.p))
            return -1;
        s->raw = c.p;
        s->raw_size = rs;
        c.p += rs;
    }
    if (t & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) {
        uint64_t w = u64_(&c);
        /* WEIGHT_STRUCT: var1_dw (low 32 bits) is the access latency. */
        s->weight = (t & PERF_SAMPLE_WEIGHT_STRUCT) ? (w & 0xffffffffu) : w;
    }
    if (t & PERF_SAMPLE_DATA_SRC) s->data_src = u64_(&c);
    if (t & PERF_SAMPLE_TRANSACTION) (void)u64_(&c);
    if (t & PERF_SAMPLE_PHYS_ADDR) s->phys_addr = u64_(&c);
    return c.bad ? -1 : 0;
}

int hm_perf_ring_decode(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head,
                        uint64_t sample_type, uint8_t *scratch, size_t scratch_len,
                        hm_perf_sample_cb cb, void *ctx, hm_perf_ring_stats_t *st,
                        uint64_t *new_tail)
{
    *new_tail = tail;
    if (!hm_perf_sample_type_ok(sample_type))
        return hm__errf(HM_EUSAGE, "sample_type 0x%llx has fields the decoder cannot lay out",
                        (unsigned long long)sample_type);
    if (size == 0 || (size & (size - 1)))
        return hm__errf(HM_EUSAGE, "ring size %llu is not a power of two", (unsigned long long)size);
    if (head < tail || head - tail > size) {
        /* The kernel never runs ahead by more than the buffer: the
         * counters themselves are garbage, so nothing here can be trusted. */
        st->bad++;
        *new_tail = head;
        return hm__errf(HM_ECORRUPT, "ring head %llu / tail %llu out of range for %llu bytes",
                        (unsigned long long)head, (unsigned long long)tail, (unsigned long long)size);
    }
    uint64_t mask = size - 1;
    while (tail < head) {
        uint64_t avail = head - tail;
        if (avail < sizeof(struct perf_event_header)) {
            *new_tail = tail;
            return hm__errf(HM_ETRUNC, "%llu stray bytes at ring offset %llu",
                            (unsigned long long)avail, (unsigned long long)tail);
        }
        struct perf_event_header h;
        uint64_t off = tail & mask;
        /* The header itself may straddle the end of the buffer. */
        for (size_t i = 0; i < sizeof h; i++)
            ((uint8_t *)&h)[i] = data[(off + i) & mask];
        if (h.size < sizeof h || (h.size & 7)) {
            st->bad++;
            *new_tail = head;
            return hm__errf(HM_ECORRUPT, "record at ring offset %llu has size %u (type %u)",
                            (unsigned long long)tail, h.size, h.type);
        }
        if (h.size > avail) {
            *new_tail = tail;
            return hm__errf(HM_ETRUNC, "record at ring offset %llu needs %u bytes, %llu published",
                            (unsigned long long)tail, h.size, (unsigned long long)avail);
        }
        const uint8_t *rec = data + off;
        if (off + h.size > size) {
            if (h.size > scratch_len) {
                st->bad++;
                *new_tail = head;
                return hm__errf(HM_ECORRUPT, "record of %u bytes wraps and exceeds the %zu-byte scratch",
                                h.size, scratch_len);
            }
            size_t first = (size_t)(size - off);
            memcpy(scratch, data + off, first);
            memcpy(scratch + first, data, h.size - first);
            rec = scratch;
            st->wrapped++;
        }
        const uint8_t *body = rec + sizeof h;
        size_t blen = h.size - sizeof h;
        switch (h.type) {
        case PERF_RECORD_SAMPLE: {
            hm_perf_sample_t s;
            if (parse_sample(body, blen, sample_type, &s) != 0) {
                st->bad++; /* truncated sample: its size is sane, so skip just it */
                break;
            }
            st->samples++;
            if (cb)
                cb(ctx, &s);
            break;
        }
        case PERF_RECORD_LOST: /* u64 id; u64 lost; */
            st->lost_records++;
            if (blen >= 16) {
                uint64_t n;
                memcpy(&n, body + 8, 8);
                st->lost += n;
            }
            break;
        case PERF_RECORD_LOST_SAMPLES: /* u64 lost; */
            if (blen >= 8) {
                uint64_t n;
                memcpy(&n, body, 8);
                st->lost += n;
            }
            break;
        case PERF_RECORD_THROTTLE: st->throttle++; break;
        case PERF_RECORD_UNTHROTTLE: st->unthrottle++; break;
        default: st->other++; break;
        }
        tail += h.size;
    }
    *new_tail = tail;
    return 0;
}

uint16_t hm_perf_dsrc(uint64_t ds, int mem_device, int *access)
{
    union perf_mem_data_src d = {.val = ds};
    if (access)
        *access = (d.mem_op & PERF_MEM_OP_STORE) ? HM_ACCESS_STORE
                  : (d.mem_op & PERF_MEM_OP_LOAD) ? HM_ACCESS_LOAD : -1;
    if (mem_device < 0)
        mem_device = 0;
    /* Newer kernels fill mem_lvl_num; older ones only the mem_lvl bit set. */
    switch (d.mem_lvl_num) {
    case PERF_MEM_LVLNUM_L1: return HM_DSRC_L1;
    case PERF_MEM_LVLNUM_L2: return d.mem_remote ? HM_DSRC_REMOTE : HM_DSRC_L2;
    case PERF_MEM_LVLNUM_L3: return d.mem_remote ? HM_DSRC_REMOTE : HM_DSRC_L3;
    case PERF_MEM_LVLNUM_L4: return d.mem_remote ? HM_DSRC_REMOTE : HM_DSRC_L3;
    case PERF_MEM_LVLNUM_LFB: return HM_DSRC_LFB;
    case PERF_MEM_LVLNUM_RAM:
    case PERF_MEM_LVLNUM_PMEM:
#ifdef PERF_MEM_LVLNUM_CXL
    case PERF_MEM_LVLNUM_CXL:
#endif
        return HM_DSRC_MAKE_MEM(mem_device);
    case PERF_MEM_LVLNUM_ANY_CACHE: return d.mem_remote ? HM_DSRC_REMOTE : HM_DSRC_L3;
    default: break;
    }
    uint64_t l = d.mem_lvl;
    if (l & PERF_MEM_LVL_MISS) {
        /* A miss at level X is a hit below it: only RAM bits mean memory. */
        if (l & (PERF_MEM_LVL_LOC_RAM | PERF_MEM_LVL_REM_RAM1 | PERF_MEM_LVL_REM_RAM2))
            return HM_DSRC_MAKE_MEM(mem_device);
        return HM_DSRC_UNKNOWN;
    }
    if (l & PERF_MEM_LVL_L1) return HM_DSRC_L1;
    if (l & PERF_MEM_LVL_LFB) return HM_DSRC_LFB;
    if (l & PERF_MEM_LVL_L2) return HM_DSRC_L2;
    if (l & PERF_MEM_LVL_L3) return HM_DSRC_L3;
    if (l & (PERF_MEM_LVL_LOC_RAM | PERF_MEM_LVL_REM_RAM1 | PERF_MEM_LVL_REM_RAM2))
        return HM_DSRC_MAKE_MEM(mem_device);
    if (l & (PERF_MEM_LVL_REM_CCE1 | PERF_MEM_LVL_REM_CCE2)) return HM_DSRC_REMOTE;
    return HM_DSRC_UNKNOWN;
}

int hm__perf_ring_map(hm__perf_ring_t *r, int fd, unsigned data_pages)
{
    memset(r, 0, sizeof *r);
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = (size_t)(1 + data_pages) * (size_t)pg;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return -errno;
    r->fd = fd;
    r->base = m;
    r->map_len = len;
    r->data = (uint8_t *)m + pg;
    r->data_size = (uint64_t)data_pages * (uint64_t)pg;
    return 0;
}

void hm__perf_ring_unmap(hm__perf_ring_t *r)
{
    if (r->base)
        munmap(r->base, r->map_len);
    r->base = NULL;
}

int hm__perf_ring_read(hm__perf_ring_t *r, uint64_t sample_type, hm_perf_sample_cb cb, void *ctx)
{
    struct perf_event_mmap_page *pc = r->base;
    /* As libperf's mmap.c: the acquire pairs with the kernel's release of
     * data_head, so record bytes below head are visible; the release store
     * of data_tail tells the kernel it may overwrite what we consumed. */
    uint64_t head = atomic_load_explicit((_Atomic uint64_t *)&pc->data_head, memory_order_acquire);
    uint64_t tail = pc->data_tail;
    uint64_t nt;
    int rc = hm_perf_ring_decode(r->data, r->data_size, tail, head, sample_type, r->scratch,
                                 sizeof r->scratch, cb, ctx, &r->stats, &nt);
    atomic_store_explicit((_Atomic uint64_t *)&pc->data_tail, nt, memory_order_release);
    return rc == HM_ETRUNC ? 0 : rc;
}
