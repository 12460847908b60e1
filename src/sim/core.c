/* Core model: interval-style out-of-order core over the cache hierarchy.
 *
 * Time advances by base_cpi per instruction. A load or store that misses L1
 * is an outstanding miss: the core keeps issuing instructions until either
 * the ROB is full (the oldest unretired miss has been waited on for `rob`
 * instructions: retirement is in order) or `mlp` misses are in flight; a
 * miss holds its fill buffer until it completes, so a slot frees as soon as
 * any miss completes, whatever its age (out of order), and a new miss
 * waits only for the earliest completion. Independent misses therefore
 * overlap up to the MLP limit, and a slow miss blocks the others only
 * through the ROB. A load whose address was computed from a value loaded by a
 * miss still in flight (a pointer: p = p->next; an index: i = next[i])
 * depends on it and cannot issue before that value arrives, so chases
 * serialize. */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/objtab.h"
#include "sim_int.h"

static inline double core_now(const hm_sim_t *s)
{
    return s->t + (double)(s->icount - s->t_icount) * s->cpi_ns;
}

uint64_t hm_sim_now_ns(hm_sim_t *s)
{
    hm__sim_drain(s);
    return (uint64_t)core_now(s);
}

uint64_t hm_sim_instruction_count(hm_sim_t *s)
{
    hm__sim_drain(s);
    return s->icount;
}

uint64_t hm_sim_access_count(hm_sim_t *s)
{
    hm__sim_drain(s);
    return s->loads + s->stores;
}

void hm_sim_progress(const hm_sim_t *s, uint64_t *instructions, uint64_t *ns)
{
    *instructions = s->icount;
    *ns = (uint64_t)core_now(s);
}

static inline void win_pop(hm_sim_t *s)
{
    s->win_head = (s->win_head + 1) & (HM_SIM_ROB_RING - 1);
    s->win_n--;
    s->rob_limit = s->win_n ? s->win_inst[s->win_head] + s->rob : UINT64_MAX;
}

/* The oldest outstanding miss blocks retirement once `rob` younger
 * instructions have entered the ROB: the core stops at that instruction
 * until the miss completes. */
void hm__sim_rob_stall(hm_sim_t *s)
{
    while (s->win_n && s->icount >= s->win_inst[s->win_head] + s->rob) {
        uint64_t lim = s->win_inst[s->win_head] + s->rob;
        double done = s->win_done[s->win_head];
        if (lim >= s->t_icount) {
            double tl = s->t + (double)(lim - s->t_icount) * s->cpi_ns;
            if (done > tl) {
                s->t = done;
                s->t_icount = lim;
            }
        } else if (done > s->t) {
            s->t = done;
        }
        win_pop(s);
    }
}

void hm_sim_instructions(hm_sim_t *s, uint64_t n)
{
    hm__sim_drain(s);
    s->hot.live_icount += n;
    s->icount = s->hot.live_icount;
    if (HM_UNLIKELY(s->icount >= s->rob_limit))
        hm__sim_rob_stall(s);
}

/* The MLP slots: the completion times of the misses holding them, kept
 * sorted in a ring, earliest first. Only a full window needs the earliest:
 * that slot is the one the next miss takes (at once if it has completed,
 * else when it does). A new miss usually completes after all the others,
 * so the insertion usually shifts nothing, and the cost is a FIFO's. */
static inline void mlp_insert(hm_sim_t *s, double done)
{
    double *r = s->mlp_slot;
    uint32_t h = s->mlp_head, i = s->mlp_n++;
    while (i && r[(h + i - 1) & (HM_SIM_MAX_MLP - 1)] > done) {
        r[(h + i) & (HM_SIM_MAX_MLP - 1)] = r[(h + i - 1) & (HM_SIM_MAX_MLP - 1)];
        i--;
    }
    r[(h + i) & (HM_SIM_MAX_MLP - 1)] = done;
}

/* Makes room for one more miss and returns its earliest issue time. */
static inline double win_reserve(hm_sim_t *s)
{
    double now = core_now(s);
    while (s->win_n && s->win_done[s->win_head] <= now)
        win_pop(s);
    if (s->mlp_n >= s->mlp) {
        double d = s->mlp_slot[s->mlp_head];
        if (d > now) {
            s->t = now = d;
            s->t_icount = s->icount;
        }
        s->mlp_head = (s->mlp_head + 1) & (HM_SIM_MAX_MLP - 1);
        s->mlp_n--;
    }
    if (HM_UNLIKELY(s->win_n == HM_SIM_ROB_RING)) { /* load queue full */
        double d = s->win_done[s->win_head];
        if (d > now) {
            s->t = now = d;
            s->t_icount = s->icount;
        }
        win_pop(s);
    }
    return now;
}

static inline void win_push(hm_sim_t *s, double done)
{
    uint32_t i = (s->win_head + s->win_n) & (HM_SIM_ROB_RING - 1);
    s->win_done[i] = done;
    s->win_inst[i] = s->icount;
    if (s->win_n++ == 0)
        s->rob_limit = s->icount + s->rob;
    mlp_insert(s, done);
    if (done > s->last_done)
        s->last_done = done;
}

/* Bit-PLRU: a hit or fill sets the way's MRU bit; when every way's bit
 * is set, the others are cleared. The victim is the first invalid way, else
 * the first way without its bit: one word per set instead of a stamp per
 * way keeps the simulator's own memory traffic low. */
static inline void touch(hm__cache_t *c, uint32_t set, uint64_t idx)
{
    uint32_t bit = 1u << (uint32_t)(idx - (uint64_t)set * c->assoc);
    uint32_t m = c->mru[set] | bit;
    /* All ways used: a new round starts with this one, except in a
     * direct-mapped cache, whose one way is always the victim. */
    c->mru[set] = m == c->wmask ? (c->assoc > 1 ? bit : 0) : m;
}

/* A set's partial tags are one to four 16-byte vectors of 8 lanes: one
 * compare finds the candidate ways, instead of a loop over 64-bit tags.
 * mask8() gives bit w set where lane w of @p v equals @p k. */
#if defined(__SSE2__)
typedef __m128i lanes_t;
static inline lanes_t lanes_splat(uint16_t x) { return _mm_set1_epi16((short)x); }
static inline uint32_t mask16(const uint16_t *v, lanes_t k)
{
    __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)v), k);
    __m128i b = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(v + 8)), k);
    return (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(a, b));
}
static inline uint32_t mask8(const uint16_t *v, lanes_t k)
{
    __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)v), k);
    return (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(a, a)) & 0xff;
}
#else
typedef uint16_t lanes_t;
static inline lanes_t lanes_splat(uint16_t x) { return x; }
static inline uint32_t mask8(const uint16_t *v, lanes_t k)
{
    uint32_t m = 0;
    for (int i = 0; i < 8; i++)
        m |= (uint32_t)(v[i] == k) << i;
    return m;
}
static inline uint32_t mask16(const uint16_t *v, lanes_t k) { return mask8(v, k) | mask8(v + 8, k) << 8; }
#endif

/* Bit w set where lane w of @p v (@p n lanes: 8, 16, 24 or 32) equals @p x. */
static inline uint32_t lanes_eq(const uint16_t *v, uint32_t n, uint16_t x)
{
    lanes_t k = lanes_splat(x);
    switch (n) {
    case 8:
        return mask8(v, k);
    case 16:
        return mask16(v, k);
    case 24:
        return mask16(v, k) | mask8(v + 16, k) << 16;
    default:
        return mask16(v, k) | mask16(v + 16, k) << 16;
    }
}

static inline uint32_t set_of(const hm__cache_t *c, uint64_t line)
{
    if (c->set_mask)
        return (uint32_t)line & c->set_mask;
    uint64_t h = line * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(((h >> 32) * c->sets) >> 32);
}

/* What a lookup learnt about the line's set: enough for the fill that
 * follows a miss to pick its victim without scanning again. Levels are
 * filled deepest first, and a fill only writes back into deeper levels, so
 * a level does not change between its lookup and its fill. */
typedef struct {
    uint32_t set, way;
    uint32_t inv;        /* invalid ways */
} look_t;

static inline __attribute__((always_inline)) int lookup(const hm__cache_t *c, uint64_t line, look_t *lk)
{
    uint32_t set = set_of(c, line);
    const uint16_t *pt = c->ptag + (uint64_t)set * c->stride;
    uint64_t base = (uint64_t)set * c->assoc;
    lk->set = set;
    for (uint32_t m = lanes_eq(pt, c->stride, hm__ptag(line)) & c->wmask; m; m &= m - 1) {
        uint32_t w = (uint32_t)__builtin_ctz(m);
        if (c->tag[base + w] == line + 1) {
            lk->way = w;
            return 1;
        }
    }
    lk->inv = lanes_eq(pt, c->stride, 0) & c->wmask;
    return 0;
}

/* Device and group of a byte on a page outside the allocation that placed
 * the page (its owner, entry @p e): the allocation holding the byte decides
 * (hetmem run gives each placed object pages of its own, so its
 * neighbours' placements do not reach it). A line start in no allocation
 * (malloc's header before a block: prefetches and write-backs look lines
 * up by their start) goes with the first allocation in the rest of its
 * line. A line of no allocation (the free end of the page, which the
 * prefetcher may reach before the next allocation is made there) is where
 * the page is, untracked. The page is counted once, for its owner, in the
 * devices' capacity. */
static __attribute__((noinline)) int shared_device(hm_sim_t *s, uint64_t addr, uint64_t e, uint32_t *group)
{
    const hm_objtab_entry_t *ent = hm__objtab_find(s->live, addr);
    if (!ent)
        ent = hm__objtab_overlap(s->live, addr, (addr | (((uint64_t)1 << s->line_shift) - 1)) - addr + 1);
    if (ent) {
        const hm__alloc_t *a = &s->allocs[ent->id];
        *group = a->group;
        return hm_placement_page_device(&a->place, addr & ~(((uint64_t)1 << HM_SIM_PAGE_SHIFT) - 1));
    }
    *group = UINT32_MAX;
    return HM_PE_DEV(e);
}

/* Device of byte address @p addr and its object's group (UINT32_MAX:
 * memory outside any tracked allocation): its page's device, which its
 * owner placed. */
static inline int line_device(hm_sim_t *s, uint64_t addr, uint32_t *group)
{
    uint64_t *pe = hm__sim_page_ptr(s, addr);
    uint64_t e = pe ? *pe : 0;
    if (e) {
        if (!(e & HM_PE_TOUCHED)) {
            *pe = e | HM_PE_TOUCHED | HM_PE_RESIDENT;
            if (!(e & HM_PE_RESIDENT))
                hm__sim_resident_add(s, HM_PE_DEV(e));
        }
        const hm__alloc_t *a = &s->allocs[HM_PE_ALLOC(e) - 1];
        if (HM_UNLIKELY(addr - a->addr >= a->size))
            return shared_device(s, addr, e, group);
        *group = a->group;
        return HM_PE_DEV(e);
    }
    *group = UINT32_MAX;
    return s->fixed_device >= 0 ? s->fixed_device : s->def;
}

static __attribute__((noinline)) void writeback(hm_sim_t *s, int lvl, uint64_t line, double t);

/* Inserts @p line into level @p lvl, evicting the LRU way: the first
 * invalid way, else the first way whose MRU bit is clear; @p lk is the
 * line's missed lookup at this level. The data is there from time @p ready
 * on (0: now). Returns the way's index. */
static inline __attribute__((always_inline)) uint64_t fill_look(hm_sim_t *s, int lvl, uint64_t line, int dirty, double t, double ready,
                                 const look_t *lk)
{
    hm__cache_t *c = &s->c[lvl];
    uint32_t set = lk->set;
    uint32_t w = (uint32_t)__builtin_ctz(lk->inv ? lk->inv : ~c->mru[set]);
    uint64_t v = (uint64_t)set * c->assoc + w;
    if (HM_UNLIKELY(!lk->inv && c->dirty[v]))
        writeback(s, lvl + 1, c->tag[v] - 1, t);
    if (lvl == 0)
        s->last_line = UINT64_MAX;
    c->tag[v] = line + 1;
    c->ptag[(uint64_t)set * c->stride + w] = hm__ptag(line);
    touch(c, set, v);
    c->dirty[v] = (uint8_t)dirty;
    if (lvl > 0) /* L1 never holds lines in flight */
        c->ready[v] = ready;
    return v;
}

/* Stream prefetcher, as on current cores (the L2 streamer for ascending
 * and descending streams, the L1 stride prefetcher for every other line).
 * Two misses to consecutive ascending lines of one page start a stream
 * that runs up to `prefetch` lines ahead of the demand stream, issuing at
 * most PF_PER_LOOKUP prefetches per lookup (an L1 miss), as Intel's L2
 * streamer does ("may issue two prefetch requests on every L2 lookup",
 * up to 20 lines ahead: Intel 64 and IA-32 Architectures Optimization
 * Reference Manual, Data Prefetching): a stream's distance grows by one
 * line per access it follows, and a short ascending run that is no stream
 * (one int per nuclide of a lookup) fetches two lines beyond it, not the
 * rest of its page. A descending or stride-2 stream (the L1 stride
 * prefetcher's) must be confirmed by a third miss in step (two random misses a line or two apart are common
 * in gathers, and following them would flood the device), and its
 * distance then ramps up by two lines per miss to `prefetch`. Prefetches
 * stay within the 4 KiB page (hardware prefetchers do not cross pages),
 * go to the device queues like demand misses but occupy no ROB or MLP
 * slot; a demand access to a line still in flight waits for it. */
#define PF_PER_LOOKUP 2
static void prefetch_line(hm_sim_t *s, uint64_t p, int lvl, double now)
{
    look_t lk[HM_SIM_MAX_LEVELS];
    int present = 0;
    for (int l = lvl; l < s->nlevels && !present; l++)
        present = lookup(&s->c[l], p, &lk[l]);
    if (present)
        return;
    uint32_t g;
    int d = line_device(s, p << s->line_shift, &g);
    double done = hm__device_read(&s->dev[d], p, now);
    if (g != UINT32_MAX)
        s->groups[g].lines_read++;
    else
        s->other_lines_read++;
    for (int l = s->nlevels - 1; l >= lvl; l--)
        fill_look(s, l, p, 0, now, done, &lk[l]);
    s->prefetches++;
}

static void prefetch(hm_sim_t *s, uint64_t line, double now)
{
    int k = 16;
    int64_t stride = 0;
    for (uint32_t m = lanes_eq(s->stream_h, 16, hm__ptag(line)); m; m &= m - 1) {
        int j = __builtin_ctz(m);
        if (s->stream[j].next == line) {
            k = j;
            stride = s->stream[j].stride ? s->stream[j].stride : 1;
            break;
        }
    }
    if (k == 16) {
        /* A stream seen once (at line b) expects b + 1; a miss at b + 2,
         * b - 1 or b - 2 makes it a candidate stride-2, descending or
         * descending stride-2 stream. */
        static const int64_t cand[3] = {2, -1, -2};
        for (int c = 0; c < 3 && k == 16; c++) {
            uint64_t want = line - (uint64_t)cand[c] + 1;
            for (uint32_t m = lanes_eq(s->stream_h, 16, hm__ptag(want)); m; m &= m - 1) {
                int j = __builtin_ctz(m);
                if (s->stream[j].next == want && s->stream[j].stride == 0) {
                    k = j;
                    stride = cand[c];
                    break;
                }
            }
        }
    }
    if (k == 16) {
        k = (int)(s->stream_rr++ & 15);
        s->stream[k].next = line + 1;
        s->stream[k].stride = 0;
        s->stream[k].seen = 1;
        s->stream_h[k] = hm__ptag(line + 1);
        s->stream[k].pf = line;
        return;
    }
    uint32_t seen = ++s->stream[k].seen;
    s->stream[k].stride = stride;
    s->stream[k].next = line + (uint64_t)stride;
    s->stream_h[k] = hm__ptag(line + (uint64_t)stride);
    uint64_t dist = s->pf_dist;
    if (stride != 1) {
        if (seen < 3)
            return; /* not confirmed yet */
        uint64_t ramp = 2ull * (seen - 2);
        dist = ramp < dist ? ramp : dist;
    }
    uint64_t lpp = 1ull << (HM_SIM_PAGE_SHIFT - s->line_shift);
    uint64_t page_first = line & ~(lpp - 1), page_last = page_first + lpp - 1;
    uint64_t pf = s->stream[k].pf;
    int lvl = s->nlevels > 1 ? 1 : 0;
    int n = 0; /* prefetches issued on this lookup */
    if (stride > 0) {
        uint64_t from = pf > line ? pf + (uint64_t)stride : line + (uint64_t)stride;
        uint64_t reach = dist * (uint64_t)stride;
        uint64_t to = line + reach < page_last ? line + reach : page_last;
        for (uint64_t p = from; p <= to && (stride != 1 || n < PF_PER_LOOKUP); p += (uint64_t)stride, n++) {
            prefetch_line(s, p, lvl, now);
            pf = p;
        }
    } else {
        uint64_t back = (uint64_t)-stride;
        uint64_t from = pf < line ? pf - back : line - back;
        uint64_t reach = dist * back;
        uint64_t to = line - page_first > reach ? line - reach : page_first;
        for (uint64_t p = from; p >= to && p <= line; p -= back) {
            prefetch_line(s, p, lvl, now);
            pf = p;
        }
    }
    s->stream[k].pf = pf;
}

static __attribute__((noinline)) void writeback(hm_sim_t *s, int lvl, uint64_t line, double t)
{
    if (lvl >= s->nlevels) {
        uint32_t g;
        int d = line_device(s, line << s->line_shift, &g);
        hm__device_write(&s->dev[d], line, t);
        if (g != UINT32_MAX)
            s->groups[g].lines_written++;
        else
            s->other_lines_written++;
        return;
    }
    hm__cache_t *c = &s->c[lvl];
    look_t lk;
    if (lookup(c, line, &lk))
        c->dirty[(uint64_t)lk.set * c->assoc + lk.way] = 1;
    else
        fill_look(s, lvl, line, 1, t, 0, &lk);
}

/* What served the last access, for samples. */
typedef struct {
    int level;      /* 0.. nlevels-1 caches, nlevels = memory */
    int dev;
    double issue, done;
} served_t;

static inline double dep_check(hm_sim_t *s, uint64_t addr, double now)
{
    /* Usually no loaded value is near the address at all: a slot can match
     * only if addr - dep_min < span + 4096 (exact unless that wraps). */
    uint64_t span = s->dep_max - s->dep_min;
    if (span < UINT64_MAX - 4096 && addr - s->dep_min >= span + 4096)
        return 0;
    double w = 0;
    for (int i = 0; i < HM_SIM_DEP_SLOTS; i++)
        if (addr - s->dep_val[i] < 4096 && s->dep_done[i] > now && s->dep_done[i] > w)
            w = s->dep_done[i];
    return w;
}

static inline void dep_record(hm_sim_t *s, uint64_t value, double done)
{
    uint32_t i = s->dep_next++ & (HM_SIM_DEP_SLOTS - 1);
    uint64_t old = s->dep_val[i];
    s->dep_val[i] = value;
    s->dep_done[i] = done;
    if (done > s->dep_latest)
        s->dep_latest = done;
    if (old != s->dep_min && old != s->dep_max) { /* the range only widens */
        s->dep_min = value < s->dep_min ? value : s->dep_min;
        s->dep_max = value > s->dep_max ? value : s->dep_max;
        return;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int k = 0; k < HM_SIM_DEP_SLOTS; k++) {
        uint64_t v = s->dep_val[k];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    s->dep_min = lo;
    s->dep_max = hi;
}

/* Indices: a load at byte offset v x S + f into the object holding its
 * address, where v was loaded by a miss still in flight (i = next[i],
 * x[col[j]], a[idx].field), computes its address from that value and waits
 * for it. S is the stride at which the index scales: the access size (an
 * array of the loaded type), or the stride that load instruction's offsets
 * into that object show (an element or struct size, or any multiple of the
 * access size), learnt as the gcd of their differences (a gather or chase
 * visits elements at random, so a few differences give the element size);
 * f = offset mod S is the field. A learnt stride counts once two more
 * offsets have agreed with it. Only exact offsets from an allocation's start
 * count: an array streamed in order whose elements hold their own index
 * never matches the next element's offset. Values 0 and >= 2^31 are not
 * taken as indices. */
#define HM_SIM_IDX_MAX (1ull << 31)
#define HM_SIM_IDX_AGREE 2

static inline uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* The stride learnt for load @p ip in the object at @p base, now at offset
 * @p off; 0 while unknown. */
static inline uint64_t idx_stride(hm_sim_t *s, uint64_t ip, uint64_t base, uint64_t off, uint32_t *shift)
{
    uint64_t h = (ip ^ (ip >> 8) ^ (ip >> 16)) & (HM_SIM_IDX_IPS - 1);
    __typeof__(&s->idx_ip[0]) e = &s->idx_ip[h];
    if (HM_UNLIKELY(e->ip != ip || e->base != base)) {
        e->ip = ip;
        e->base = base;
        e->last = off;
        e->stride = 0;
        e->seen = 0;
        return 0;
    }
    uint64_t d = off > e->last ? off - e->last : e->last - off;
    e->last = off;
    if (d) {
        uint64_t g = e->stride;
        int agrees = g && (e->shift ? (d & (g - 1)) == 0 : d % g == 0);
        if (agrees) {
            if (e->seen < HM_SIM_IDX_AGREE)
                e->seen++;
        } else {
            g = gcd64(g, d);
            e->stride = g;
            e->shift = (g & (g - 1)) == 0 ? (uint32_t)__builtin_ctzll(g) : 0;
            e->seen = 0;
        }
    }
    *shift = e->shift;
    return e->seen >= HM_SIM_IDX_AGREE ? e->stride : 0;
}

static inline double idx_check(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t ip, double now)
{
    /* the object of the last check first: index chases and gathers stay
     * in one object */
    uint64_t off = addr - s->idx_obj_base;
    if (off >= s->idx_obj_size) {
        uint64_t e = hm__sim_page_entry(s, addr);
        if (!e)
            return 0;
        const hm__alloc_t *a = &s->allocs[HM_PE_ALLOC(e) - 1];
        off = addr - a->addr;
        if (off >= a->size) {
            /* a page shared with the object that placed it */
            const hm_objtab_entry_t *ent = hm__objtab_find(s->live, addr);
            if (!ent)
                return 0;
            a = &s->allocs[ent->id];
            off = addr - a->addr;
        }
        s->idx_obj_base = a->addr;
        s->idx_obj_size = a->size;
    }
    uint64_t base = s->idx_obj_base;
    /* k1: index of an array of the access size; k2: of the learnt stride */
    uint64_t k1 = UINT64_MAX, k2 = UINT64_MAX;
    if (size && !(size & (size - 1)) && !(off & (size - 1)))
        k1 = off >> __builtin_ctz(size);
    uint32_t sh = 0;
    uint64_t g = idx_stride(s, ip, base, off, &sh);
    if (g > size || (g && k1 == UINT64_MAX))
        k2 = g == 1 ? off : sh ? off >> sh : off / g;
    double w = 0;
    for (int i = 0; i < HM_SIM_DEP_SLOTS; i++) {
        uint64_t v = s->idx_val[i];
        double d = v == k1 || v == k2 ? s->idx_done[i] : 0;
        w = d > w ? d : w;
    }
    return w > now ? w : 0;
}

static inline void idx_record(hm_sim_t *s, uint64_t value, double done)
{
    uint32_t i = s->idx_next++ & (HM_SIM_DEP_SLOTS - 1);
    s->idx_val[i] = value;
    s->idx_done[i] = done;
    if (done > s->idx_latest)
        s->idx_latest = done;
}

/* Records what a load that completes at @p done loaded, for the loads that
 * may depend on it. */
static inline void val_record(hm_sim_t *s, uint64_t value, double done)
{
    if (value >= 4096)
        dep_record(s, value, done);
    if (value - 1 < HM_SIM_IDX_MAX - 1)
        idx_record(s, value, done);
}

static void access_miss(hm_sim_t *s, uint64_t line, int st, uint64_t addr, uint64_t value, double dep,
                        const look_t *lk0, served_t *sv);

/* Pointers loaded by L1 hits. A miss is in the window, so the loads that
 * depend on it wait through the dependence slots above; an L1 hit is not,
 * and a chase over a list that fits L1 would cost only its instructions.
 * The pointer an L1 hit loads is there the L1 latency after its issue; the
 * next load from that address waits for it, and the core may run at most a
 * ROB's worth of instructions ahead of such a chain (in-order retirement),
 * so a chase costs the L1 latency per step. Only values within the span
 * of the program's allocations count as pointers: keys, indices and
 * doubles do not, and cost nothing here. */
static inline void l1_pointer(hm_sim_t *s, uint64_t value, double dep, double lat)
{
    double now = core_now(s);
    double issue = dep > now ? dep : now;
    s->l1p_val = value;
    s->l1p_done = issue + lat;
    double behind = issue - (double)s->rob * s->cpi_ns;
    if (behind > now) {
        s->t = behind;
        s->t_icount = s->icount;
    }
}

/* One line access. Returns through @p sv what served it. The L1 hit path is
 * inline; everything past L1 is in access_miss(). */
static inline void access_line(hm_sim_t *s, uint64_t line, int st, uint64_t addr, unsigned size, uint64_t value,
                               uint64_t ip, served_t *sv)
{
    hm__cache_t *c0 = &s->c[0];
    double dep = 0;
    if (!st && (s->dep_latest > s->t || s->idx_latest > s->t || s->sel_wait > s->t)) {
        double now = core_now(s);
        if (s->sel_wait > 0) { /* the first load after a select mark */
            dep = s->sel_wait > now ? s->sel_wait : 0;
            s->sel_wait = 0;
        }
        if (s->dep_latest > now) {
            double w = dep_check(s, addr, now);
            dep = w > dep ? w : dep;
        }
        if (s->idx_latest > now) {
            double w = idx_check(s, addr, size, ip, now);
            dep = w > dep ? w : dep;
        }
    }
    if (HM_UNLIKELY(addr - s->l1p_val < 4096) && !st) {
        double now = core_now(s);
        if (s->l1p_done > now && s->l1p_done > dep)
            dep = s->l1p_done;
    }
    if (line == s->last_line && HM_LIKELY(dep <= 0)) {
        c0->dirty[s->last_idx] |= (uint8_t)st;
        c0->hits[st]++;
        sv->issue = sv->done = 0;
        sv->level = 0;
        if (HM_UNLIKELY(value - s->ptr_lo < s->ptr_span) && !st)
            l1_pointer(s, value, 0, c0->lat_ns);
        return;
    }
    look_t lk0;
    if (HM_LIKELY(lookup(c0, line, &lk0))) {
        uint64_t i = (uint64_t)lk0.set * c0->assoc + lk0.way;
        s->last_line = line;
        s->last_idx = i;
        touch(c0, lk0.set, i);
        c0->dirty[i] |= (uint8_t)st;
        c0->hits[st]++;
        if (HM_UNLIKELY(dep > 0)) {
            /* Served by L1, but only once the address is known. */
            sv->issue = dep;
            sv->done = dep + c0->lat_ns;
            val_record(s, value, sv->done);
        } else {
            sv->issue = sv->done = 0;
        }
        if (HM_UNLIKELY(value - s->ptr_lo < s->ptr_span) && !st)
            l1_pointer(s, value, dep, c0->lat_ns);
        sv->level = 0;
        return;
    }
    access_miss(s, line, st, addr, value, dep, &lk0, sv);
}

__attribute__((noinline)) static void access_miss(hm_sim_t *s, uint64_t line, int st, uint64_t addr,
                                                  uint64_t value, double dep, const look_t *lk0, served_t *sv)
{
    hm__cache_t *c0 = &s->c[0];
    look_t lk[HM_SIM_MAX_LEVELS];
    c0->misses[st]++;
    double now = win_reserve(s);
    double issue = dep > now ? dep : now, done;
    int lvl;
    double ready = 0;
    for (lvl = 1; lvl < s->nlevels; lvl++) {
        hm__cache_t *c = &s->c[lvl];
        if (lookup(c, line, &lk[lvl])) {
            uint64_t i = (uint64_t)lk[lvl].set * c->assoc + lk[lvl].way;
            touch(c, lk[lvl].set, i);
            c->hits[st]++;
            ready = c->ready[i];
            break;
        }
        c->misses[st]++;
    }
    sv->dev = -1;
    if (lvl < s->nlevels) {
        done = (ready > issue ? ready : issue) + s->c[lvl].lat_ns;
    } else {
        uint32_t g;
        int d = line_device(s, addr, &g);
        done = hm__device_read(&s->dev[d], line, issue);
        if (g != UINT32_MAX)
            s->groups[g].lines_read++;
        else
            s->other_lines_read++;
        sv->dev = d;
    }
    for (int k = lvl - 1; k > 0; k--)
        fill_look(s, k, line, 0, issue, 0, &lk[k]);
    uint64_t l1 = fill_look(s, 0, line, st, issue, 0, lk0);
    if (s->pf_dist)
        prefetch(s, line, issue);
    if (c0->tag[l1] == line + 1) { /* a one-level machine's prefetch may have evicted it */
        s->last_line = line;
        s->last_idx = l1;
    }
    win_push(s, done);
    if (!st) {
        val_record(s, value, done);
        s->sel_acc = done > s->sel_acc ? done : s->sel_acc;
    }
    sv->level = lvl;
    sv->issue = issue;
    sv->done = done;
}

/* The next sampling interval: uniform in [P - P/2, P + P/2] (mean P), from
 * a generator with a fixed seed, so that runs stay bit-identical. A fixed
 * period aliases with loops: at period 1000 a loop reading a[i] and b[i]
 * would sample only one of them. */
static uint64_t next_period(hm_sim_t *s)
{
    uint64_t p = s->period;
    if (p < 2 || p == UINT64_MAX)
        return p;
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return p - p / 2 + z % (2 * (p / 2) + 1);
}

/* Load samples carry what PEBS load-latency sampling gives: the latency
 * from issue to data and the level or device that served it. Store samples
 * carry what the precise store event gives, no more: whether the store hit
 * L1 (HM_DSRC_L1) or missed it (HM_DSRC_UNKNOWN), and no latency. */
static void emit_sample(hm_sim_t *s, uint64_t addr, uint64_t ip, int st, const served_t *sv)
{
    hm_sample_t smp;
    memset(&smp, 0, sizeof smp);
    double now = core_now(s);
    double issue = sv->issue > 0 ? sv->issue : now;
    double lat = sv->level == 0 ? s->c[0].lat_ns + (sv->done > issue ? sv->done - issue : 0) : sv->done - issue;
    smp.time = (uint64_t)issue;
    smp.addr = addr;
    smp.ip = ip;
    smp.tid = 0;
    if (st) {
        smp.access = HM_ACCESS_STORE;
        smp.weight = 0;
        smp.dsrc = (uint16_t)(sv->level == 0 ? HM_DSRC_L1 : HM_DSRC_UNKNOWN);
    } else {
        smp.access = HM_ACCESS_LOAD;
        smp.weight = (uint32_t)(lat / s->cyc_ns + 0.5);
        if (sv->level >= s->nlevels)
            smp.dsrc = HM_DSRC_MAKE_MEM(sv->dev);
        else
            smp.dsrc = (uint16_t)(sv->level < 2 ? HM_DSRC_L1 + sv->level : HM_DSRC_L3);
    }
    s->sample_fn(s->sample_ctx, &smp);
}

static inline void sim_access(hm_sim_t *s, uint64_t addr, unsigned size, int st, uint64_t value, uint64_t ip)
{
    served_t sv;
    uint64_t line = addr >> s->line_shift;
    uint64_t last = (addr + (size ? size : 1) - 1) >> s->line_shift;
    access_line(s, line, st, addr, size, value, ip, &sv);
    if (HM_UNLIKELY(last != line)) {
        served_t sv2;
        access_line(s, last, st, last << s->line_shift, size, 0, ip, &sv2);
        if (sv2.level > sv.level)
            sv = sv2;
    }
    uint64_t *left = st ? &s->st_left : &s->ld_left;
    if (HM_UNLIKELY(--*left == 0)) {
        *left = next_period(s);
        emit_sample(s, addr, ip, st, &sv);
    }
}

/* The hooks queue accesses (sim.h) and the queue is simulated here, in
 * batches. The model sees exactly the same sequence of instruction counts
 * and accesses as if each were simulated at once (a ROB stall found late is
 * resolved from the recorded counts, see hm__sim_rob_stall()), so results
 * are unchanged. What changes is the host's work: a hook is a few stores,
 * so the program's own cache misses overlap across iterations as they do
 * natively. */
void hm__sim_drain(hm_sim_t *s)
{
    if (s->draining)
        return; /* a sample callback asking for the time: the entry's own */
    s->draining = 1;
    uint32_t n = s->hot.qn;
    for (uint32_t i = 0; i < n; i++) {
        const hm__qent_t *e = &s->hot.q[i];
        s->icount = e->icount;
        if (HM_UNLIKELY(s->icount >= s->rob_limit))
            hm__sim_rob_stall(s);
        int st = (int)(e->ipx >> 63);
        unsigned size = (unsigned)(e->ipx >> 48) & 0x7fff;
        if (HM_UNLIKELY(size == 0)) { /* a select mark */
            s->sel_wait = s->sel_acc;
            s->sel_acc = 0;
            continue;
        }
        if (st)
            s->stores++;
        else
            s->loads++;
        sim_access(s, e->addr, size, st, e->value, e->ipx & 0xffffffffffffull);
    }
    s->hot.qn = 0;
    s->icount = s->hot.live_icount;
    if (HM_UNLIKELY(s->icount >= s->rob_limit))
        hm__sim_rob_stall(s);
    s->draining = 0;
}

void hm_sim_load(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t value, uint64_t ip)
{
    hm__sim_load(s, addr, size, value, ip);
}

void hm_sim_store(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t ip)
{
    hm__sim_store(s, addr, size, ip);
}

/* Bulk operations (memcpy and friends) run in libc, outside the hooks: they
 * are modelled as one access per line plus two instructions per line
 * (a vectorised copy loop moves a 64-byte line in about that many). */
static void range(hm_sim_t *s, uint64_t addr, uint64_t len, int st, uint64_t ip)
{
    if (!len || s->hot.done)
        return;
    hm__sim_drain(s);
    uint64_t first = addr >> s->line_shift, last = (addr + len - 1) >> s->line_shift;
    for (uint64_t l = first; l <= last; l++) {
        uint64_t a = l == first ? addr : l << s->line_shift;
        hm_sim_instructions(s, 2);
        if (st)
            s->stores++;
        else
            s->loads++;
        sim_access(s, a, 1, st, 0, ip);
    }
}

void hm_sim_load_range(hm_sim_t *s, uint64_t addr, uint64_t len, uint64_t ip) { range(s, addr, len, 0, ip); }
void hm_sim_store_range(hm_sim_t *s, uint64_t addr, uint64_t len, uint64_t ip) { range(s, addr, len, 1, ip); }

void hm_sim_set_sampler(hm_sim_t *s, uint64_t period, hm_sim_sample_fn fn, void *ctx)
{
    hm__sim_drain(s);
    s->period = period && fn ? period : UINT64_MAX;
    s->rng = 0x5eed5eed5eed5eedull;
    s->ld_left = next_period(s);
    s->st_left = next_period(s);
    s->sample_fn = fn;
    s->sample_ctx = ctx;
}

int hm_sim_open(hm_sim_t **out, const hm_sim_machine_t *m, hm_placement_t *pl, int device)
{
    hm__errclear();
    int rc;
    *out = NULL;
    if (device >= m->ndevices)
        return hm__errf(HM_ENODEV, "device index %d out of range", device);
    hm_sim_t *s = hm__xcalloc(1, sizeof *s);
    s->m = m;
    s->pl = pl;
    s->fixed_device = pl ? -1 : (device >= 0 ? device : 0);
    /* With --device, pages beyond the device's capacity spill to the
     * machine's first device, as with a placement whose default it is. */
    s->def = pl ? hm_placement_default_device(pl) : 0;
    s->line_shift = (uint32_t)__builtin_ctz(m->line);
    s->cyc_ns = 1.0 / m->freq_ghz;
    s->cpi_ns = m->base_cpi * s->cyc_ns;
    s->rob = m->rob;
    s->mlp = m->mlp;
    s->pf_dist = m->prefetch;
    s->rob_limit = UINT64_MAX;
    s->last_line = UINT64_MAX;
    s->nlevels = m->nlevels;
    for (int i = 0; i < m->nlevels; i++) {
        const hm__cache_cfg_t *l = &m->level[i];
        uint64_t size = l->shared ? l->size / m->cores : l->size;
        if ((rc = hm__cache_init(&s->c[i], size, l->assoc, m->line, l->latency_cyc * s->cyc_ns)) < 0) {
            rc = hm__errf(rc, "cache %s: cannot allocate %llu sets", l->name, (unsigned long long)size);
            goto fail;
        }
    }
    s->ndev = m->ndevices;
    for (int i = 0; i < m->ndevices; i++) {
        const hm__device_cfg_t *d = &m->dev[i];
        hm__device_t *v = &s->dev[i];
        /* GB/s is bytes per ns: a line takes line/(bw/cores) ns of this
         * thread's share. */
        v->xfer_r_ns = (double)m->line * m->cores / d->read_bw_gbs;
        v->xfer_w_ns = (double)m->line * m->cores / d->write_bw_gbs;
        v->read_lat_ns = d->read_lat_ns;
        v->write_lat_ns = d->write_lat_ns;
        v->nch = d->channels;
        v->burst_ns = m->burst_ns;
        v->nll = d->nll;
        memcpy(v->ll_u, d->ll_u, sizeof v->ll_u);
        memcpy(v->ll_ns, d->ll_ns, sizeof v->ll_ns);
        v->cap_pages = d->capacity ? (d->capacity / m->cores) >> HM_SIM_PAGE_SHIFT : 0;
    }
    hm_sim_set_sampler(s, 0, NULL, NULL);
    *out = s;
    return 0;
fail:
    hm_sim_close(s);
    return rc;
}

void hm_sim_close(hm_sim_t *s)
{
    if (!s)
        return;
    hm__sim_drain(s);
    for (int i = 0; i < HM_SIM_MAX_LEVELS; i++)
        hm__cache_free(&s->c[i]);
    hm__sim_objects_free(s);
    free(s);
}
