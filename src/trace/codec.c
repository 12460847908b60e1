/* Block codec of trace format v1: columnar varint coding of samples and a
 * tagged event stream, before zstd. The decoder is the reader's hot loop,
 * so each column is decoded by its own tight loop over a padded buffer with
 * a branch-free error flag, and nothing is allocated per record. */
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

/* Writes one column from its symbols: a constant column (every sample the
 * same symbol, common for tid/dsrc/access) costs one varint. */
static void put_column(hm__buf_t *out, const uint64_t *sym, uint32_t n)
{
    int same = 1;
    for (uint32_t i = 1; i < n && same; i++)
        same = sym[i] == sym[0];
    hm__buf_reserve(out, 5 + (size_t)n * 10 + 10);
    uint8_t *hdr = out->p + out->len;
    uint8_t *p = hdr + 5;
    if (same) {
        hdr[0] = HM__COLMODE_CONST;
        p = hm__put_varint(p, n ? sym[0] : 0);
    } else {
        hdr[0] = HM__COLMODE_VARINT;
        for (uint32_t i = 0; i < n; i++)
            p = hm__put_varint(p, sym[i]);
    }
    hm__put_u32(hdr + 1, (uint32_t)(p - hdr - 5));
    out->len = (size_t)(p - out->p);
}

/* Addresses: each sample picks the recent-address slot that predicts it
 * best, with or without that slot's last stride, so several interleaved
 * strided streams each code as small residuals. A far miss replaces the
 * least recently used slot instead of clobbering an active stream. */
static void put_addr_column(hm__buf_t *out, const hm_sample_t *s, uint32_t n)
{
    uint64_t last[HM__ADDR_SLOTS] = {0}, stride[HM__ADDR_SLOTS] = {0}, used[HM__ADDR_SLOTS] = {0};
    hm__buf_reserve(out, 5 + (size_t)n * 20 + 10);
    uint8_t *hdr = out->p + out->len;
    uint8_t *p = hdr + 5;
    hdr[0] = HM__COLMODE_VARINT;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = s[i].addr;
        uint64_t best = UINT64_MAX;
        unsigned bj = 0, bs = 0;
        for (unsigned j = 0; j < HM__ADDR_SLOTS; j++) {
            uint64_t z0 = hm__zigzag((int64_t)(a - last[j]));
            uint64_t z1 = hm__zigzag((int64_t)(a - last[j] - stride[j]));
            if (z0 < best) { best = z0; bj = j; bs = 0; }
            if (z1 < best && j != HM__ADDR_SLOTS - 1) { best = z1; bj = j; bs = 1; }
        }
        if (best > (1u << 20)) {
            /* Far from every slot: a new stream or a random access. Code it
             * against the least recently used slot and take that slot. */
            unsigned v = 0;
            for (unsigned j = 1; j < HM__ADDR_SLOTS; j++)
                if (used[j] < used[v])
                    v = j;
            bj = v;
            bs = 0;
            best = hm__zigzag((int64_t)(a - last[v]));
        }
        if (best >= (UINT64_C(1) << 59)) {
            p = hm__put_varint(p, HM__ADDR_ESCAPE);
            p = hm__put_varint(p, a);
            continue;
        }
        p = hm__put_varint(p, (best << 4) | (bs << 3) | bj);
        stride[bj] = a - last[bj];
        last[bj] = a;
        used[bj] = i + 1;
    }
    hm__put_u32(hdr + 1, (uint32_t)(p - hdr - 5));
    out->len = (size_t)(p - out->p);
}

static uint8_t *put_str(uint8_t *p, const char *strings, uint32_t off, uint32_t len)
{
    p = hm__put_varint(p, len);
    memcpy(p, strings + off, len);
    return p + len;
}

void hm__block_encode(hm__buf_t *out, const hm_sample_t *s, uint32_t ns,
                      const hm__wevent_t *ev, uint32_t nev, const char *strings,
                      uint64_t base_time)
{
    uint64_t *sym = hm__xmalloc((size_t)(ns ? ns : 1) * sizeof *sym);
    uint64_t prev = base_time;
    for (uint32_t i = 0; i < ns; i++) {
        sym[i] = s[i].time - prev;
        prev = s[i].time;
    }
    put_column(out, sym, ns);
    put_addr_column(out, s, ns);
    prev = 0;
    for (uint32_t i = 0; i < ns; i++) {
        sym[i] = hm__zigzag((int64_t)(s[i].ip - prev));
        prev = s[i].ip;
    }
    put_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].tid;
    put_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].weight;
    put_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].dsrc;
    put_column(out, sym, ns);
    for (uint32_t i = 0; i < ns; i++)
        sym[i] = s[i].access;
    put_column(out, sym, ns);
    free(sym);

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
        free(c->weight); free(c->dsrc); free(c->access);
        c->time = malloc((size_t)ns * 8);
        c->addr = malloc((size_t)ns * 8);
        c->ip = malloc((size_t)ns * 8);
        c->tid = malloc((size_t)ns * 4);
        c->weight = malloc((size_t)ns * 4);
        c->dsrc = malloc((size_t)ns * 2);
        c->access = malloc(ns);
        c->cap = ns;
        if (!c->time || !c->addr || !c->ip || !c->tid || !c->weight || !c->dsrc || !c->access) {
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

typedef struct {
    const uint8_t *p, *end; /* section data; the buffer is padded past end */
    uint8_t mode;
} col_t;

static int get_col(const uint8_t **pp, const uint8_t *end, col_t *col, int which)
{
    const uint8_t *p = *pp;
    if (end - p < 5)
        return hm__errf(HM_ECORRUPT, "column %d header past payload end", which);
    col->mode = p[0];
    uint32_t len = hm__get_u32(p + 1);
    p += 5;
    if (col->mode > HM__COLMODE_VARINT)
        return hm__errf(HM_ECORRUPT, "column %d: unknown mode %u", which, col->mode);
    if (len > (size_t)(end - p))
        return hm__errf(HM_ECORRUPT, "column %d: length %u past payload end", which, len);
    col->p = p;
    col->end = p + len;
    *pp = p + len;
    return 0;
}

#define COL_BAD(which) hm__errf(HM_ECORRUPT, "column %d: bad values", (which))

/* Decodes an integer column that stores values directly. */
#define DECODE_PLAIN(col, which, n, dst, maxv)                                   \
    do {                                                                         \
        const uint8_t *q_ = (col).p, *e_ = (col).end;                           \
        uint64_t bad_ = 0;                                                       \
        if ((col).mode == HM__COLMODE_CONST) {                                   \
            uint64_t v_ = hm__get_varint(&q_);                                  \
            bad_ |= v_ > (maxv);                                                 \
            for (uint32_t i_ = 0; i_ < (n); i_++)                               \
                (dst)[i_] = (__typeof__((dst)[0]))v_;                            \
        } else {                                                                 \
            for (uint32_t i_ = 0; i_ < (n); i_++) {                             \
                uint64_t v_ = hm__get_varint(&q_);                              \
                bad_ |= (v_ > (maxv)) | (q_ > e_);                               \
                (dst)[i_] = (__typeof__((dst)[0]))v_;                            \
            }                                                                    \
        }                                                                        \
        if (bad_ || q_ != e_)                                                    \
            return COL_BAD(which);                                               \
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

int hm__block_decode(hm__cols_t *c, const uint8_t *raw, size_t raw_len, uint32_t ns,
                     uint32_t nev, uint64_t first, uint64_t last)
{
    const uint8_t *p = raw, *end = raw + raw_len;
    col_t col[HM__NCOLS];
    int rc;
    for (int k = 0; k < HM__NCOLS; k++)
        if ((rc = get_col(&p, end, &col[k], k)) < 0)
            return rc;
    if (end - p < 4)
        return hm__errf(HM_ECORRUPT, "events header past payload end");
    uint32_t evlen = hm__get_u32(p);
    p += 4;
    if (evlen != (size_t)(end - p))
        return hm__errf(HM_ECORRUPT, "events length %u does not match payload", evlen);
    /* Every event takes at least 3 bytes, so nev is bounded by the payload
     * before anything is sized from it. */
    if ((uint64_t)nev * 3 > evlen)
        return hm__errf(HM_ECORRUPT, "%u events cannot fit in %u bytes", nev, evlen);
    if ((rc = cols_reserve(c, ns, nev, (size_t)evlen + nev + 1)) < 0)
        return hm__errf(rc, "cannot allocate a block of %u samples", ns);

    /* time: deltas from the block's first time; must stay within [first, last]. */
    {
        const uint8_t *q = col[0].p, *e = col[0].end;
        uint64_t t = first, bad = 0;
        uint64_t *dst = c->time;
        if (col[0].mode == HM__COLMODE_CONST) {
            uint64_t d = hm__get_varint(&q);
            if (ns && d > (last - first) / ns)
                bad = 1;
            else
                for (uint32_t i = 0; i < ns; i++)
                    dst[i] = (t += d);
        } else {
            for (uint32_t i = 0; i < ns; i++) {
                uint64_t d = hm__get_varint(&q);
                uint64_t nt = t + d;
                bad |= (nt < t) | (nt > last) | (q > e);
                dst[i] = t = nt;
            }
        }
        if (bad || q != e)
            return COL_BAD(0);
    }
    /* addr */
    {
        const uint8_t *q = col[1].p, *e = col[1].end;
        uint64_t last_a[HM__ADDR_SLOTS] = {0}, stride[HM__ADDR_SLOTS] = {0}, bad = 0;
        uint64_t *dst = c->addr;
        if (col[1].mode != HM__COLMODE_VARINT && ns)
            return COL_BAD(1);
        if (ns == 0)
            q = e;
        for (uint32_t i = 0; i < ns; i++) {
            uint64_t v = hm__get_varint(&q);
            unsigned code = (unsigned)(v & 15);
            uint64_t a;
            if (HM_UNLIKELY(code == HM__ADDR_ESCAPE)) {
                a = hm__get_varint(&q);
            } else {
                unsigned j = code & 7;
                uint64_t pred = last_a[j] + (code & 8 ? stride[j] : 0);
                a = pred + (uint64_t)hm__unzigzag(v >> 4);
                stride[j] = a - last_a[j];
                last_a[j] = a;
            }
            bad |= q > e;
            dst[i] = a;
        }
        if (bad || q != e)
            return COL_BAD(1);
    }
    /* ip: zigzag deltas from the previous sample's ip */
    {
        const uint8_t *q = col[2].p, *e = col[2].end;
        uint64_t ip = 0, bad = 0;
        uint64_t *dst = c->ip;
        if (col[2].mode == HM__COLMODE_CONST) {
            uint64_t d = (uint64_t)hm__unzigzag(hm__get_varint(&q));
            for (uint32_t i = 0; i < ns; i++)
                dst[i] = (ip += d);
        } else {
            for (uint32_t i = 0; i < ns; i++) {
                ip += (uint64_t)hm__unzigzag(hm__get_varint(&q));
                bad |= q > e;
                dst[i] = ip;
            }
        }
        if (bad || q != e)
            return COL_BAD(2);
    }
    DECODE_PLAIN(col[3], 3, ns, c->tid, UINT32_MAX);
    DECODE_PLAIN(col[4], 4, ns, c->weight, UINT32_MAX);
    DECODE_PLAIN(col[5], 5, ns, c->dsrc, UINT16_MAX);
    DECODE_PLAIN(col[6], 6, ns, c->access, UINT8_MAX);

    uint32_t k = 0;
    if ((rc = decode_events(c, p, end, nev, first, last, &k)) < 0)
        return rc;
    c->nev = k;
    return 0;
}
