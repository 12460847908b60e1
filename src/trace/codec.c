/* Block codec of trace format v1: samples as byte-plane integer columns
 * (delta and predictor coded) and other records as a tagged varint event
 * stream, before zstd. The decoder is the reader's hot loop: each column is
 * decoded by its own straight loop with a branch-free error flag, and
 * nothing is allocated per record. */
#include "trace_internal.h"

#include <errno.h>
#include <stdlib.h>

void hm__buf_reserve(hm__buf_t *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    b->p = hm__xrealloc(b->p, cap);
    b->cap = cap;
}

void hm__buf_free(hm__buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------- encoder */

/* Integer column: frame of reference (the block's minimum), a shift by the
 * trailing zero bits all values share (alignment), then w whole bytes per
 * value stored as byte planes (all low bytes, then all second bytes...),
 * with the few values wider than w patched in afterwards (patched frame of
 * reference: one outlier does not widen the whole block). Planes give zstd
 * one byte distribution per plane and decode with straight vectorizable
 * loops: no varint branches in the hot path. */
static void put_int_column(hm__buf_t *out, uint64_t *v, uint32_t n)
{
    /* v is the encoder's scratch: values are reduced in place. */
    uint64_t mn = n ? UINT64_MAX : 0, orv = 0;
    for (uint32_t i = 0; i < n; i++)
        mn = v[i] < mn ? v[i] : mn;
    for (uint32_t i = 0; i < n; i++)
        orv |= v[i] -= mn;
    unsigned sh = orv ? (unsigned)__builtin_ctzll(orv) : 0;
    uint32_t cnt[9] = {0};
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = v[i] >>= sh;
        cnt[x ? (71 - __builtin_clzll(x)) / 8 : 0]++;
    }
    /* Width that minimises planes plus patches. A patch is weighted well
     * above its raw size: interleaved varints compress worse than planes,
     * so only true outliers become patches. */
    unsigned w = 8;
    uint64_t best = UINT64_MAX, above = 0;
    for (int k = 8; k >= 0; k--) {
        uint64_t cost = (uint64_t)k * n + above * 16;
        if (cost < best)
            best = cost, w = (unsigned)k;
        above += cnt[k];
    }
    uint32_t npatch = 0;
    for (unsigned k = w + 1; k <= 8; k++)
        npatch += cnt[k];
    hm__buf_reserve(out, 2 + 20 + (size_t)w * n + (size_t)npatch * 20);
    uint8_t *p = out->p + out->len;
    *p++ = (uint8_t)w;
    *p++ = (uint8_t)sh;
    p = hm__put_varint(p, mn);
    p = hm__put_varint(p, npatch);
    uint64_t mask = w == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * w)) - 1;
    for (unsigned j = 0; j < w; j++) {
        if (npatch)
            for (uint32_t i = 0; i < n; i++)
                p[i] = v[i] > mask ? 0 : (uint8_t)(v[i] >> (8 * j));
        else
            for (uint32_t i = 0; i < n; i++)
                p[i] = (uint8_t)(v[i] >> (8 * j));
        p += n;
    }
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n && npatch; i++) {
        if (v[i] > mask) {
            p = hm__put_varint(p, i - prev);
            p = hm__put_varint(p, v[i]);
            prev = i;
        }
    }
    out->len = (size_t)(p - out->p);
}

static void put_varint_list(hm__buf_t *out, const uint64_t *v, uint32_t n)
{
    hm__buf_reserve(out, 4 + (size_t)n * 10);
    uint8_t *hdr = out->p + out->len, *p = hdr + 4;
    for (uint32_t i = 0; i < n; i++)
        p = hm__put_varint(p, v[i]);
    hm__put_u32(hdr, (uint32_t)(p - hdr - 4));
    out->len = (size_t)(p - out->p);
}

/* Victim choice for a far address: the CLOCK approximation of least
 * recently used. Each use sets a slot's reference bit; the hand skips (and
 * clears) referenced slots. Cheap enough for the decoder's hot loop, and
 * both sides run the same steps. */
typedef struct {
    uint8_t ref[HM__ADDR_SLOTS];
    unsigned hand;
} clock_t_;

static inline unsigned clock_victim(clock_t_ *c)
{
    for (;;) {
        unsigned h = c->hand;
        c->hand = (h + 1) & (HM__ADDR_SLOTS - 1);
        if (!c->ref[h])
            return h;
        c->ref[h] = 0;
    }
}

/* Addresses: each sample is coded against one of HM__ADDR_SLOTS recent
 * addresses, with or without that slot's last stride, so interleaved
 * strided streams each code as small residuals. An address far from every
 * slot (a new stream, a random access) takes a slot not used lately (CLOCK)
 * instead of clobbering an active stream; the decoder runs the same victim choice, so only the mode says so. */
static void put_addr_columns(hm__buf_t *out, const hm_sample_t *s, uint32_t n, uint64_t *code,
                             uint64_t *res, uint64_t *exc, uint64_t *ipres)
{
    uint64_t last[HM__ADDR_SLOTS] = {0}, stride[HM__ADDR_SLOTS] = {0}, ip[HM__ADDR_SLOTS] = {0};
    clock_t_ clk = {{0}, 0};
    uint32_t nexc = 0;
    /* Residuals are shifted right by the alignment all addresses share
     * before zigzag coding, so 8-byte aligned streams lose 3 bits. */
    uint64_t orv = 0;
    for (uint32_t i = 0; i < n; i++)
        orv |= s[i].addr;
    unsigned sh = orv ? (unsigned)__builtin_ctzll(orv) : 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = s[i].addr, best = UINT64_MAX;
        unsigned bj = 0, bm = 0;
        for (unsigned j = 0; j < HM__ADDR_SLOTS; j++) {
            uint64_t z0 = hm__zigzag((int64_t)(a - last[j]) >> sh);
            uint64_t z1 = hm__zigzag((int64_t)(a - last[j] - stride[j]) >> sh);
            if (z0 < best) best = z0, bj = j, bm = HM__ADDR_NEAR;
            if (z1 < best) best = z1, bj = j, bm = HM__ADDR_STRIDE;
            if (best < 16) /* good enough: spare the writer the full search */
                break;
        }
        unsigned store = bj;
        if (best > (HM__ADDR_NEAR_MAX >> sh)) {
            store = clock_victim(&clk);
            if (best < (HM__ADDR_FAR_MAX >> sh)) {
                bm = HM__ADDR_FAR;
                best = hm__zigzag((int64_t)(a - last[bj]) >> sh);
            } else {
                bm = HM__ADDR_ABS;
                bj = 0;
                best = 0;
                exc[nexc++] = a;
            }
            stride[store] = 0;
        } else {
            stride[store] = a - last[bj];
        }
        code[i] = (uint64_t)(bm << 4 | bj);
        res[i] = best;
        /* The instructions that touch one object are few: predict the ip
         * from the last sample coded through the same slot. */
        ipres[i] = hm__zigzag((int64_t)(s[i].ip - ip[bj]));
        ip[store] = s[i].ip;
        last[store] = a;
        clk.ref[store] = 1;
    }
    put_int_column(out, code, n);
    put_int_column(out, res, n);
    hm__buf_reserve(out, 1);
    out->p[out->len++] = (uint8_t)sh;
    put_varint_list(out, exc, nexc);
}

static uint8_t *put_str(uint8_t *p, const char *strings, uint32_t off, uint32_t len)
{
    p = hm__put_varint(p, len);
    memcpy(p, strings + off, len);
    return p + len;
}

void hm__block_encode(hm__buf_t *out, const hm_sample_t *s, uint32_t ns,
                      const hm__wevent_t *ev, uint32_t nev, const char *strings,
                      uint64_t base_time, uint64_t *scratch)
{
    uint64_t *sym = scratch, *res = scratch + ns, *exc = scratch + 2 * (size_t)ns,
             *ipres = scratch + 3 * (size_t)ns;
    uint64_t prev = base_time;
    for (uint32_t i = 0; i < ns; i++) {
        sym[i] = s[i].time - prev;
        prev = s[i].time;
    }
    put_int_column(out, sym, ns);
    put_addr_columns(out, s, ns, sym, res, exc, ipres);
    put_int_column(out, ipres, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].tid;
    put_int_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].weight;
    put_int_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].dsrc;
    put_int_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].access;
    put_int_column(out, sym, ns);

    /* Events: kind, time delta, body length, body. The length lets a v1
     * reader skip kinds added later. */
    size_t need = 4;
    for (uint32_t i = 0; i < nev; i++)
        need += 1 + 10 + 10 + 4 * 10 + 8 + ev[i].str_len;
    hm__buf_reserve(out, need);
    uint8_t *sec = out->p + out->len;
    uint8_t *p = sec + 4;
    uint8_t body[64 + 8];
    prev = base_time;
    for (uint32_t i = 0; i < nev; i++) {
        const hm__wevent_t *e = &ev[i];
        uint8_t *b = body;
        int has_str = 0;
        switch (e->kind) {
        case HM_REC_ALLOC:
            b = hm__put_varint(b, e->a);
            b = hm__put_varint(b, e->b);
            hm__put_u64(b, e->c);
            b += 8;
            b = hm__put_varint(b, e->tid);
            break;
        case HM_REC_FREE:
            b = hm__put_varint(b, e->a);
            b = hm__put_varint(b, e->tid);
            break;
        case HM_REC_PHASE_BEGIN:
        case HM_REC_PHASE_END:
            b = hm__put_varint(b, e->a);
            b = hm__put_varint(b, e->tid);
            has_str = 1;
            break;
        case HM_REC_COUNTER:
            b = hm__put_varint(b, e->a);
            b = hm__put_varint(b, e->b);
            b = hm__put_varint(b, e->tid);
            break;
        case HM_REC_SITE:
            hm__put_u64(b, e->a);
            b += 8;
            has_str = 1;
            break;
        case HM_REC_NAME:
            b = hm__put_varint(b, e->a);
            has_str = 1;
            break;
        default:
            break;
        }
        size_t blen = (size_t)(b - body);
        size_t slen = 0;
        if (has_str) {
            uint8_t tmp[10];
            slen = (size_t)(hm__put_varint(tmp, e->str_len) - tmp) + e->str_len;
        }
        *p++ = e->kind;
        p = hm__put_varint(p, e->time - prev);
        prev = e->time;
        p = hm__put_varint(p, blen + slen);
        memcpy(p, body, blen);
        p += blen;
        if (has_str)
            p = put_str(p, strings, e->str_off, e->str_len);
    }
    hm__put_u32(sec, (uint32_t)(p - sec - 4));
    out->len = (size_t)(p - out->p);
}

/* ------------------------------------------------------------- decoder */

void hm__cols_free(hm__cols_t *c)
{
    free(c->time);
    free(c->addr);
    free(c->ip);
    free(c->tid);
    free(c->weight);
    free(c->dsrc);
    free(c->access);
    free(c->scratch);
    free(c->codes);
    free(c->events);
    free(c->evtime);
    free(c->arena);
    memset(c, 0, sizeof *c);
}

static int cols_reserve(hm__cols_t *c, uint32_t ns, uint32_t nev, size_t arena)
{
    if (ns > c->cap) {
        /* Columns are freed and reallocated rather than realloc'ed: their
         * old contents are never needed. */
        free(c->time); free(c->addr); free(c->ip); free(c->tid);
        free(c->weight); free(c->dsrc); free(c->access); free(c->scratch); free(c->codes);
        c->time = malloc((size_t)ns * 8);
        c->addr = malloc((size_t)ns * 8);
        c->ip = malloc((size_t)ns * 8);
        c->tid = malloc((size_t)ns * 4);
        c->weight = malloc((size_t)ns * 4);
        c->dsrc = malloc((size_t)ns * 2);
        c->access = malloc(ns);
        c->scratch = malloc((size_t)ns * 8);
        c->codes = malloc(ns);
        c->cap = ns;
        if (!c->time || !c->addr || !c->ip || !c->tid || !c->weight || !c->dsrc || !c->access ||
            !c->scratch || !c->codes) {
            hm__cols_free(c);
            return -ENOMEM;
        }
    }
    if (nev > c->evcap) {
        free(c->events);
        free(c->evtime);
        c->events = malloc((size_t)nev * sizeof *c->events);
        c->evtime = malloc((size_t)nev * sizeof *c->evtime);
        if (!c->events || !c->evtime) {
            free(c->events);
            free(c->evtime);
            c->events = NULL;
            c->evtime = NULL;
            c->evcap = 0;
            return -ENOMEM;
        }
        c->evcap = nev;
    }
    if (arena > c->arena_cap) {
        free(c->arena);
        c->arena = malloc(arena);
        if (!c->arena) {
            c->arena_cap = 0;
            return -ENOMEM;
        }
        c->arena_cap = arena;
    }
    return 0;
}

typedef hm__icol_t icol_t;

static int get_icol(const uint8_t **pp, const uint8_t *end, uint32_t n, icol_t *c, int which)
{
    const uint8_t *p = *pp;
    if (end - p < 4)
        return hm__errf(HM_ECORRUPT, "column %d: header past payload end", which);
    c->w = p[0];
    c->sh = p[1];
    p += 2;
    c->base = hm__get_varint(&p);
    uint64_t np = hm__get_varint(&p);
    if (c->w > 8 || c->sh > 63 || p > end || np > n)
        return hm__errf(HM_ECORRUPT, "column %d: bad header", which);
    c->npatch = (uint32_t)np;
    if ((uint64_t)c->w * n > (uint64_t)(end - p))
        return hm__errf(HM_ECORRUPT, "column %d: %u-byte values for %u samples past payload end", which,
                        c->w, n);
    c->planes = p;
    p += (size_t)c->w * n;
    c->patch = p;
    /* Patches: (index gap, value) varint pairs; validated here, applied by
     * the patch loops. */
    uint64_t idx = 0;
    for (uint32_t k = 0; k < c->npatch; k++) {
        uint64_t gap = hm__get_varint(&p);
        hm__get_varint(&p);
        idx += gap;
        if (p > end || idx >= n || (k && gap == 0))
            return hm__errf(HM_ECORRUPT, "column %d: bad patch %u", which, k);
    }
    c->patch_end = p;
    *pp = p;
    return 0;
}

/* Largest value the planes (not the patches) allow, saturated. */
static uint64_t icol_max(const icol_t *c)
{
    unsigned __int128 m = c->w ? (((unsigned __int128)1 << (8 * c->w)) - 1) << c->sh : 0;
    m += c->base;
    return m > UINT64_MAX ? UINT64_MAX : (uint64_t)m;
}

/* A column's patches are applied in index order, a range of samples at a
 * time; the cursor holds the next patch's index (validated by get_icol). */
static void pcur_init(hm__pcur_t *q, const icol_t *c)
{
    q->p = c->patch;
    q->left = c->npatch;
    q->idx = q->left ? hm__get_varint(&q->p) : 0;
}

/* Plane-major loops over a destination type, for samples [i0, i0 + m) of a
 * column of n (the plane stride); the compiler vectorizes them. The patch
 * loop then overwrites the patched values in that range and returns
 * non-zero when one does not fit the type. */
#define DEFINE_PLANES(name, patchname, T, TMAX)                                  \
    static void name(T *restrict dst, const icol_t *c, uint32_t i0, uint32_t m, uint32_t n) \
    {                                                                            \
        const uint8_t *restrict pl = c->planes + i0;                             \
        if (c->w == 0) {                                                         \
            for (uint32_t i = 0; i < m; i++)                                     \
                dst[i] = (T)c->base;                                             \
        } else if (c->w == 1) {                                                  \
            /* One fused pass for the common narrow widths. */                   \
            T b = (T)c->base;                                                    \
            unsigned sh = c->sh;                                                 \
            for (uint32_t i = 0; i < m; i++)                                     \
                dst[i] = (T)(b + (T)((T)pl[i] << sh));                           \
        } else if (c->w == 2 && sizeof(T) >= 2) {                                \
            T b = (T)c->base;                                                    \
            unsigned sh = c->sh;                                                 \
            const uint8_t *restrict q = pl + n;                                  \
            for (uint32_t i = 0; i < m; i++)                                     \
                dst[i] = (T)(b + (T)((T)(pl[i] | (T)((T)q[i] << 8)) << sh));     \
        } else if ((c->w == 3 || c->w == 4) && sizeof(T) >= 4) {                 \
            T b = (T)c->base;                                                    \
            unsigned sh = c->sh;                                                 \
            const uint8_t *restrict q1 = pl + n, *restrict q2 = pl + 2 * (size_t)n; \
            const uint8_t *restrict q3 = c->w == 4 ? pl + 3 * (size_t)n : NULL; \
            if (q3)                                                              \
                for (uint32_t i = 0; i < m; i++)                                 \
                    dst[i] = (T)(b + ((T)(pl[i] | (uint32_t)q1[i] << 8 | (uint32_t)q2[i] << 16 | \
                                          (uint32_t)q3[i] << 24) << sh));       \
            else                                                                 \
                for (uint32_t i = 0; i < m; i++)                                 \
                    dst[i] = (T)(b + ((T)(pl[i] | (uint32_t)q1[i] << 8 | (uint32_t)q2[i] << 16) << sh)); \
        } else {                                                                 \
            for (uint32_t i = 0; i < m; i++)                                     \
                dst[i] = pl[i];                                                  \
            for (unsigned j = 1; j < c->w && j < sizeof(T); j++) {               \
                const uint8_t *restrict q = pl + (size_t)j * n;                 \
                for (uint32_t i = 0; i < m; i++)                                 \
                    dst[i] |= (T)((T)q[i] << (8 * j));                           \
            }                                                                    \
            if (c->sh || c->base) {                                              \
                T b = (T)c->base;                                                \
                unsigned sh = c->sh;                                             \
                for (uint32_t i = 0; i < m; i++)                                 \
                    dst[i] = (T)(b + (T)(dst[i] << sh));                         \
            }                                                                    \
        }                                                                        \
    }                                                                            \
    static int patchname(T *dst, const icol_t *c, hm__pcur_t *q, uint32_t i0, uint32_t m) \
    {                                                                            \
        uint64_t bad = 0;                                                        \
        while (q->left && q->idx < (uint64_t)i0 + m) {                           \
            uint64_t v = hm__get_varint(&q->p);                                  \
            unsigned __int128 full = ((unsigned __int128)v << c->sh) + c->base;  \
            bad |= (v >> (63 - c->sh) >> 1) != 0 || full > (TMAX);               \
            dst[q->idx - i0] = (T)full;                                          \
            if (--q->left)                                                       \
                q->idx += hm__get_varint(&q->p);                                 \
        }                                                                        \
        return bad != 0;                                                         \
    }
DEFINE_PLANES(planes_u64, patch_u64, uint64_t, UINT64_MAX)
DEFINE_PLANES(planes_u32, patch_u32, uint32_t, UINT32_MAX)
DEFINE_PLANES(planes_u16, patch_u16, uint16_t, UINT16_MAX)
DEFINE_PLANES(planes_u8, patch_u8, uint8_t, UINT8_MAX)

/* Decodes samples [i0, i0 + m) of a column of n into a narrower type. When
 * the header alone proves the planes fit, the type's own loop runs;
 * otherwise values go through the 64-bit scratch and each is checked. */
#define DECODE_NARROW(fn, pfn, T, maxv, dst, col, cur, i0, m, n, scratch, which) \
    do {                                                                         \
        uint64_t bad_ = 0;                                                       \
        if (icol_max(&(col)) <= (maxv)) {                                        \
            fn((dst), &(col), (i0), (m), (n));                                   \
            bad_ = pfn((dst), &(col), (cur), (i0), (m));                         \
        } else {                                                                 \
            planes_u64((scratch), &(col), (i0), (m), (n));                       \
            bad_ = patch_u64((scratch), &(col), (cur), (i0), (m));               \
            for (uint32_t i_ = 0; i_ < (m); i_++) {                              \
                bad_ |= (scratch)[i_] > (maxv);                                  \
                (dst)[i_] = (T)(scratch)[i_];                                    \
            }                                                                    \
        }                                                                        \
        if (bad_)                                                                \
            return hm__errf(HM_ECORRUPT, "column %d: value out of range", (which)); \
    } while (0)

#define DECODE_U64(dst, col, cur, i0, m, n, which)                               \
    do {                                                                         \
        planes_u64((dst), &(col), (i0), (m), (n));                               \
        if (patch_u64((dst), &(col), (cur), (i0), (m)))                          \
            return hm__errf(HM_ECORRUPT, "column %d: value out of range", (which)); \
    } while (0)

static int decode_events(hm__cols_t *c, const uint8_t *p, const uint8_t *end, uint32_t nev,
                         uint64_t first, uint64_t last, uint32_t *out_n)
{
    uint64_t t = first;
    char *arena = c->arena;
    uint32_t k = 0;
    for (uint32_t i = 0; i < nev; i++) {
        if (end - p < 3)
            return hm__errf(HM_ECORRUPT, "event %u past payload end", i);
        uint8_t kind = *p++;
        uint64_t d = hm__get_varint(&p);
        uint64_t blen = hm__get_varint(&p);
        if (p > end || blen > (uint64_t)(end - p))
            return hm__errf(HM_ECORRUPT, "event %u: length past payload end", i);
        if (d > last - t)
            return hm__errf(HM_ECORRUPT, "event %u: time outside the block's range", i);
        t += d;
        const uint8_t *b = p, *bend = p + blen;
        p = bend;
        hm_record_t *r = &c->events[k];
        memset(r, 0, sizeof *r);
        c->evtime[k] = t;
        r->kind = (hm_rec_kind_t)kind;
        /* Bodies are read through the same padded varint reader; a body
         * overrunning its stated length is caught by the final check. */
        uint64_t slen = 0;
        const uint8_t *str = NULL;
        switch (kind) {
        case HM_REC_ALLOC:
            r->u.alloc.time = t;
            r->u.alloc.addr = hm__get_varint(&b);
            r->u.alloc.size = hm__get_varint(&b);
            if (bend - b < 8)
                return hm__errf(HM_ECORRUPT, "event %u: short alloc record", i);
            r->u.alloc.site = hm__get_u64(b);
            b += 8;
            r->u.alloc.tid = (uint32_t)hm__get_varint(&b);
            break;
        case HM_REC_FREE:
            r->u.alloc.time = t;
            r->u.alloc.addr = hm__get_varint(&b);
            r->u.alloc.tid = (uint32_t)hm__get_varint(&b);
            break;
        case HM_REC_PHASE_BEGIN:
        case HM_REC_PHASE_END:
            r->u.phase.time = t;
            r->u.phase.id = (uint32_t)hm__get_varint(&b);
            r->u.phase.tid = (uint32_t)hm__get_varint(&b);
            slen = hm__get_varint(&b);
            str = b;
            break;
        case HM_REC_COUNTER:
            r->u.counter.time = t;
            r->u.counter.counter = (uint32_t)hm__get_varint(&b);
            r->u.counter.value = hm__get_varint(&b);
            r->u.counter.tid = (uint32_t)hm__get_varint(&b);
            break;
        case HM_REC_SITE:
            if (bend - b < 8)
                return hm__errf(HM_ECORRUPT, "event %u: short site record", i);
            r->u.site.site = hm__get_u64(b);
            b += 8;
            slen = hm__get_varint(&b);
            str = b;
            break;
        case HM_REC_NAME:
            r->u.name.time = t;
            r->u.name.addr = hm__get_varint(&b);
            slen = hm__get_varint(&b);
            str = b;
            break;
        default:
            continue; /* a kind from a later minor revision: skip it */
        }
        if (str) {
            if (b > bend || slen > (uint64_t)(bend - b))
                return hm__errf(HM_ECORRUPT, "event %u: string past record end", i);
            memcpy(arena, str, slen);
            arena[slen] = '\0';
            b += slen;
            if (kind == HM_REC_SITE)
                r->u.site.frames = arena;
            else if (kind == HM_REC_NAME)
                r->u.name.name = arena;
            else
                r->u.phase.name = arena;
            arena += slen + 1;
        }
        if (b != bend)
            return hm__errf(HM_ECORRUPT, "event %u: record length mismatch", i);
        k++;
    }
    if (p != end)
        return hm__errf(HM_ECORRUPT, "events: %zu trailing bytes", (size_t)(end - p));
    *out_n = k;
    return 0;
}

/* The sections of a payload, with every column header checked. */
typedef struct {
    icol_t t, code, res, ip, tid, w, dsrc, acc;
    const uint8_t *exc, *exc_end, *ev;
    unsigned ash;
    uint32_t evlen;
} payload_t;

static int parse_payload(payload_t *y, const uint8_t *raw, size_t raw_len, uint32_t ns, uint32_t nev)
{
    const uint8_t *p = raw, *end = raw + raw_len;
    int rc;
    if ((rc = get_icol(&p, end, ns, &y->t, HM__COL_TIME)) < 0 ||
        (rc = get_icol(&p, end, ns, &y->code, HM__COL_ADDR_CODE)) < 0 ||
        (rc = get_icol(&p, end, ns, &y->res, HM__COL_ADDR_RES)) < 0)
        return rc;
    if (end - p < 5 || hm__get_u32(p + 1) > (size_t)(end - p - 5) || p[0] > 63)
        return hm__errf(HM_ECORRUPT, "column %d: bad header", HM__COL_ADDR_EXC);
    y->ash = p[0];
    y->exc = p + 5;
    y->exc_end = y->exc + hm__get_u32(p + 1);
    p = y->exc_end;
    if ((rc = get_icol(&p, end, ns, &y->ip, HM__COL_IP)) < 0 ||
        (rc = get_icol(&p, end, ns, &y->tid, HM__COL_TID)) < 0 ||
        (rc = get_icol(&p, end, ns, &y->w, HM__COL_WEIGHT)) < 0 ||
        (rc = get_icol(&p, end, ns, &y->dsrc, HM__COL_DSRC)) < 0 ||
        (rc = get_icol(&p, end, ns, &y->acc, HM__COL_ACCESS)) < 0)
        return rc;
    if (end - p < 4)
        return hm__errf(HM_ECORRUPT, "events header past payload end");
    y->evlen = hm__get_u32(p);
    p += 4;
    if (y->evlen != (size_t)(end - p))
        return hm__errf(HM_ECORRUPT, "events length %u does not match payload", y->evlen);
    /* Every event takes at least 3 bytes, so nev is bounded by the payload
     * before anything is sized from it. */
    if ((uint64_t)nev * 3 > y->evlen)
        return hm__errf(HM_ECORRUPT, "%u events cannot fit in %u bytes", nev, y->evlen);
    y->ev = p;
    return 0;
}

/* Time deltas into times, kept within [*cur, last]; non-zero when one is
 * out of range. When no sum can wrap (times below 2^63, deltas below 2^42,
 * at most 2^20 of them), the times only grow, so the last one alone says
 * whether any passed last: the loop then carries only the sum. */
static inline uint64_t times_from_deltas(uint64_t *restrict t, uint32_t m, uint64_t *cur, uint64_t last)
{
    uint64_t c = *cur, bad = 0, orv = 0;
    for (uint32_t i = 0; i < m; i++)
        orv |= t[i];
    if (last >> 63 == 0 && orv >> 42 == 0 && m <= (UINT32_C(1) << 20)) {
        for (uint32_t i = 0; i < m; i++)
            t[i] = c += t[i];
        bad = c > last;
    } else {
        for (uint32_t i = 0; i < m; i++) {
            uint64_t nt = c + t[i];
            bad |= (nt < c) | (nt > last);
            t[i] = c = nt;
        }
    }
    *cur = c;
    return bad;
}

/* Replays the encoder's address slot table over m samples: residuals in a
 * become addresses; with ip non-NULL, ip residuals become ips too. Returns
 * non-zero on a bad mode or exception. */
static inline __attribute__((always_inline)) uint64_t
addr_replay(hm__addr_state_t *st, const uint8_t *restrict code, uint64_t *restrict a, uint64_t *restrict ip,
            uint32_t m, const uint8_t *exc_end, unsigned ash)
{
    uint64_t *last_a = st->last_a, *stride = st->stride, *slot_ip = st->slot_ip;
    clock_t_ clk;
    memcpy(clk.ref, st->ref, sizeof clk.ref);
    clk.hand = st->hand;
    const uint8_t *q = st->q;
    uint64_t bad = 0;
    unsigned orc = 0; /* the codes or'ed: a mode past HM__ADDR_ABS sets a bit above it */
    for (uint32_t i = 0; i < m; i++) {
        unsigned k = code[i], j = k & (HM__ADDR_SLOTS - 1), mode = k >> 4;
        uint64_t v;
        orc |= k;
        unsigned store = j;
        if (HM_LIKELY(mode <= HM__ADDR_STRIDE)) {
            v = last_a[j] + (stride[j] & (uint64_t)-(int64_t)mode) + ((uint64_t)hm__unzigzag(a[i]) << ash);
            stride[j] = v - last_a[j];
        } else {
            store = clock_victim(&clk);
            if (mode == HM__ADDR_FAR) {
                v = last_a[j] + ((uint64_t)hm__unzigzag(a[i]) << ash);
            } else if (HM_LIKELY(q < exc_end)) {
                /* One varint from inside the list reads at most 10
                 * bytes, within the payload; the list's end is checked
                 * before each, so corrupt modes cannot walk on. */
                v = hm__get_varint(&q);
                bad |= (q > exc_end) | (a[i] != 0) | (j != 0);
            } else {
                v = 0;
                bad = 1;
            }
            stride[store] = 0;
        }
        if (ip) {
            uint64_t x = slot_ip[j] + (uint64_t)hm__unzigzag(ip[i]);
            slot_ip[store] = x;
            ip[i] = x;
        }
        last_a[store] = v;
        clk.ref[store] = 1;
        a[i] = v;
    }
    memcpy(st->ref, clk.ref, sizeof clk.ref);
    st->hand = clk.hand;
    st->q = q;
    _Static_assert(HM__ADDR_ABS == 3 && HM__ADDR_SLOTS == 16, "modes 0-3 in bits 4-5 of a code");
    return bad | (orc >> 6);
}

int hm__block_decode(hm__cols_t *c, const uint8_t *raw, size_t raw_len, uint32_t ns,
                     uint32_t nev, uint64_t first, uint64_t last)
{
    payload_t y;
    hm__pcur_t pc;
    int rc;
    if ((rc = parse_payload(&y, raw, raw_len, ns, nev)) < 0)
        return rc;
    if ((rc = cols_reserve(c, ns, nev, (size_t)y.evlen + nev + 1)) < 0)
        return hm__errf(rc, "cannot allocate a block of %u samples", ns);

    /* time: deltas from the block's first time, kept within [first, last] */
    {
        pcur_init(&pc, &y.t);
        DECODE_U64(c->time, y.t, &pc, 0, ns, ns, HM__COL_TIME);
        uint64_t cur = first;
        if (times_from_deltas(c->time, ns, &cur, last))
            return hm__errf(HM_ECORRUPT, "column %d: time outside the block's range", HM__COL_TIME);
    }
    /* addr: replay the encoder's slot table */
    {
        pcur_init(&pc, &y.code);
        DECODE_NARROW(planes_u8, patch_u8, uint8_t, UINT8_MAX, c->codes, y.code, &pc, 0, ns, ns, c->scratch,
                      HM__COL_ADDR_CODE);
        pcur_init(&pc, &y.res);
        DECODE_U64(c->addr, y.res, &pc, 0, ns, ns, HM__COL_ADDR_RES);
        pcur_init(&pc, &y.ip);
        DECODE_U64(c->ip, y.ip, &pc, 0, ns, ns, HM__COL_IP);
        hm__addr_state_t st;
        memset(&st, 0, sizeof st);
        st.q = y.exc;
        if (addr_replay(&st, c->codes, c->addr, c->ip, ns, y.exc_end, y.ash) || st.q != y.exc_end)
            return hm__errf(HM_ECORRUPT, "column %d: bad address exceptions", HM__COL_ADDR_EXC);
    }
    pcur_init(&pc, &y.tid);
    DECODE_NARROW(planes_u32, patch_u32, uint32_t, UINT32_MAX, c->tid, y.tid, &pc, 0, ns, ns, c->scratch, HM__COL_TID);
    pcur_init(&pc, &y.w);
    DECODE_NARROW(planes_u32, patch_u32, uint32_t, UINT32_MAX, c->weight, y.w, &pc, 0, ns, ns, c->scratch,
                  HM__COL_WEIGHT);
    pcur_init(&pc, &y.dsrc);
    DECODE_NARROW(planes_u16, patch_u16, uint16_t, UINT16_MAX, c->dsrc, y.dsrc, &pc, 0, ns, ns, c->scratch,
                  HM__COL_DSRC);
    pcur_init(&pc, &y.acc);
    DECODE_NARROW(planes_u8, patch_u8, uint8_t, UINT8_MAX, c->access, y.acc, &pc, 0, ns, ns, c->scratch,
                  HM__COL_ACCESS);

    uint32_t k = 0;
    if ((rc = decode_events(c, y.ev, y.ev + y.evlen, nev, first, last, &k)) < 0)
        return rc;
    c->nev = k;
    return 0;
}

/* ---------------------------------------------------------- sample scan */

int hm__block_scan_begin(hm__scan_t *s, hm__cols_t *c, const uint8_t *raw, size_t raw_len, uint32_t ns,
                         uint32_t nev, uint64_t first, uint64_t last)
{
    payload_t y;
    int rc;
    if ((rc = parse_payload(&y, raw, raw_len, ns, nev)) < 0)
        return rc;
    if ((rc = cols_reserve(c, 0, nev, (size_t)y.evlen + nev + 1)) < 0)
        return hm__errf(rc, "cannot allocate the events of a block");
    uint32_t k = 0;
    if ((rc = decode_events(c, y.ev, y.ev + y.evlen, nev, first, last, &k)) < 0)
        return rc;
    c->nev = k;
    s->ns = ns;
    s->next = 0;
    s->cur = first;
    s->last = last;
    s->col[0] = y.t, s->col[1] = y.code, s->col[2] = y.res;
    s->col[3] = y.w, s->col[4] = y.dsrc, s->col[5] = y.acc;
    for (int j = 0; j < 6; j++)
        pcur_init(&s->pc[j], &s->col[j]);
    s->exc_end = y.exc_end;
    s->ash = y.ash;
    memset(&s->st, 0, sizeof s->st);
    s->st.q = y.exc;
    return 0;
}

int hm__block_scan_chunk(hm__scan_t *s, hm__scan_chunk_t *o)
{
    uint32_t i0 = s->next, n = s->ns, m = n - i0 < HM__SCAN_CHUNK ? n - i0 : HM__SCAN_CHUNK;
    o->n = m;
    if (m == 0)
        return 0;
    DECODE_U64(o->time, s->col[0], &s->pc[0], i0, m, n, HM__COL_TIME);
    if (times_from_deltas(o->time, m, &s->cur, s->last))
        return hm__errf(HM_ECORRUPT, "column %d: time outside the block's range", HM__COL_TIME);
    DECODE_NARROW(planes_u8, patch_u8, uint8_t, UINT8_MAX, s->code, s->col[1], &s->pc[1], i0, m, n, s->scratch,
                  HM__COL_ADDR_CODE);
    DECODE_U64(o->addr, s->col[2], &s->pc[2], i0, m, n, HM__COL_ADDR_RES);
    if (addr_replay(&s->st, s->code, o->addr, NULL, m, s->exc_end, s->ash) ||
        (i0 + m == n && s->st.q != s->exc_end))
        return hm__errf(HM_ECORRUPT, "column %d: bad address exceptions", HM__COL_ADDR_EXC);
    DECODE_NARROW(planes_u32, patch_u32, uint32_t, UINT32_MAX, o->weight, s->col[3], &s->pc[3], i0, m, n,
                  s->scratch, HM__COL_WEIGHT);
    DECODE_NARROW(planes_u16, patch_u16, uint16_t, UINT16_MAX, o->dsrc, s->col[4], &s->pc[4], i0, m, n, s->scratch,
                  HM__COL_DSRC);
    DECODE_NARROW(planes_u8, patch_u8, uint8_t, UINT8_MAX, o->access, s->col[5], &s->pc[5], i0, m, n, s->scratch,
                  HM__COL_ACCESS);
    s->next = i0 + m;
    return (int)m;
}
