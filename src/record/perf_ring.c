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
#include <sys/syscall.h>
#include <time.h>
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
    hm__errclear();
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
        case PERF_RECORD_AUX: /* u64 aux_offset; u64 aux_size; u64 flags; */
            st->aux_records++;
            if (blen >= 24) {
                uint64_t v[3];
                memcpy(v, body, sizeof v);
                st->aux_bytes += v[1];
                if (v[2] & PERF_AUX_FLAG_TRUNCATED) st->aux_truncated++;
                if (v[2] & PERF_AUX_FLAG_PARTIAL) st->aux_partial++;
#ifdef PERF_AUX_FLAG_COLLISION
                if (v[2] & PERF_AUX_FLAG_COLLISION) st->aux_collision++;
#else
                if (v[2] & 0x08) st->aux_collision++;
#endif
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

static unsigned aux_pages_;
static int aux_neoverse_;

void hm__perf_ring_set_aux(unsigned aux_pages, int neoverse_dsrc)
{
    aux_pages_ = (aux_pages & (aux_pages - 1)) ? 0 : aux_pages;
    aux_neoverse_ = neoverse_dsrc;
}

/* The AUX area sits after the data area at an offset we choose and write
 * into the metadata page before mapping it (perf_event_open(2), aux_offset
 * and aux_size). PROT_WRITE selects the non-overwrite mode: the kernel
 * stops (and flags TRUNCATED) rather than overwrite what we have not read. */
static int aux_map_(hm__perf_ring_t *r, long pg)
{
    struct perf_event_mmap_page *pc = r->base;
    size_t len = (size_t)aux_pages_ * (size_t)pg;
    pc->aux_offset = r->map_len;
    pc->aux_size = len;
    void *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, (off_t)r->map_len);
    if (a == MAP_FAILED)
        return -errno;
    void *lin = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (lin == MAP_FAILED) {
        int e = -errno;
        munmap(a, len);
        return e;
    }
    r->aux = a;
    r->aux_size = len;
    r->aux_lin = lin;
    r->spe_opts.neoverse_dsrc = aux_neoverse_;
    r->spe_opts.pid = (uint32_t)getpid();
    r->spe_opts.tid = (uint32_t)syscall(SYS_gettid);
    return 0;
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
    if (aux_pages_) {
        int rc = aux_map_(r, pg);
        if (rc) {
            munmap(m, len);
            r->base = NULL;
            return rc;
        }
    }
    return 0;
}

void hm__perf_ring_unmap(hm__perf_ring_t *r)
{
    if (r->aux)
        munmap(r->aux, r->aux_size);
    if (r->aux_lin)
        munmap(r->aux_lin, r->aux_size);
    r->aux = r->aux_lin = NULL;
    if (r->base)
        munmap(r->base, r->map_len);
    r->base = NULL;
}

/* Offset from the perf clock of SPE timestamps to CLOCK_MONOTONIC, from one
 * read of the generic timer next to clock_gettime (arm64 only). */
static int64_t mono_offset_(const hm_spe_clock_t *clk)
{
#if defined(__aarch64__)
    uint64_t cyc;
    struct timespec ts;
    __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(cyc));
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t mono = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    return (int64_t)(mono - hm_spe_time(clk, cyc));
#else
    (void)clk;
    return 0;
#endif
}

/* The AUX bytes between aux_tail and aux_head, copied linear (SPE records
 * may straddle the end of the area), decoded, and released up to the end of
 * the last complete record. */
static void aux_read_(hm__perf_ring_t *r, hm_perf_sample_cb cb, void *ctx)
{
    struct perf_event_mmap_page *pc = r->base;
    uint64_t head = atomic_load_explicit((_Atomic uint64_t *)&pc->aux_head, memory_order_acquire);
    uint64_t tail = pc->aux_tail;
    if (head == tail)
        return;
    if (head < tail || head - tail > r->aux_size) {
        r->stats.bad++; /* counters out of range: drop everything */
        atomic_store_explicit((_Atomic uint64_t *)&pc->aux_tail, head, memory_order_release);
        return;
    }
    hm_spe_clock_t clk = {0, 0, 0, 0, 0};
    if (pc->cap_user_time_zero) {
        clk.time_zero = pc->time_zero;
        clk.time_mult = pc->time_mult;
        clk.time_shift = pc->time_shift;
        clk.valid = 1;
        clk.offset_ns = mono_offset_(&clk);
    }
    uint64_t n = head - tail, off = tail & (r->aux_size - 1);
    uint64_t first = n < r->aux_size - off ? n : r->aux_size - off;
    memcpy(r->aux_lin, r->aux + off, (size_t)first);
    memcpy(r->aux_lin + first, r->aux, (size_t)(n - first));
    size_t used = 0;
    hm_spe_decode(r->aux_lin, (size_t)n, &clk, &r->spe_opts, cb, ctx, &r->spe, &used);
    if (used == 0 && n == r->aux_size) {
        r->stats.bad++; /* a full area with no record end in it: garbage */
        used = (size_t)n;
    }
    r->stats.samples += r->spe.records - r->stats_spe_seen;
    r->stats_spe_seen = r->spe.records;
    atomic_store_explicit((_Atomic uint64_t *)&pc->aux_tail, tail + used, memory_order_release);
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
    if (r->aux)
        aux_read_(r, cb, ctx);
    return rc == HM_ETRUNC ? 0 : rc;
}
