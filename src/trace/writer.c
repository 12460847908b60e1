/* Streaming trace writer: buffers one block of records, sorts it by time,
 * encodes and compresses it, appends it to the file and keeps only a
 * 40-byte index entry per block, so memory stays bounded whatever the
 * trace's length. */
#define _GNU_SOURCE
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

#define ZSTD_LEVEL 3

struct hm_trace_writer {
    int fd;
    uint64_t off;                 /* bytes written so far: 64-bit by design */
    uint32_t block_records;
    int err;                      /* sticky: first I/O error */

    hm_sample_t *s;
    uint64_t *scratch;            /* 4 per sample, for the encoder */
    uint32_t ns;
    int s_unsorted;
    uint64_t s_last;

    hm__wevent_t *ev;
    uint32_t nev, evcap, seq;
    int e_unsorted;
    uint64_t e_last;
    hm__buf_t str;                /* strings of buffered events */

    hm__buf_t raw, comp, index;
    ZSTD_CCtx *zc;
    uint32_t nblocks;

    uint64_t floor;               /* last time of the last flushed block */
    uint64_t max_time;
    uint64_t counts[9], loads, stores, reordered, first_time, last_time;
    int any;

    char **phase_names;
    uint32_t nphases;
};

static int write_all(hm_trace_writer_t *w, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(w->fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            w->err = hm__errf(-errno, "write at offset %llu", (unsigned long long)w->off);
            return w->err;
        }
        p += n;
        len -= (size_t)n;
        w->off += (uint64_t)n;
    }
    return 0;
}

static json_t *json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* json_dumps allocates through jansson's allocator, which a caller may have
 * replaced (json_set_alloc_funcs): the simulator runtime builds the header
 * in a scratch arena outside the program's heap. */
static void free_header(char *hdr)
{
    json_free_t f;
    json_get_alloc_funcs(NULL, &f);
    if (hdr)
        f(hdr);
}

static int build_header(const hm_trace_meta_t *m, char **out)
{
    json_t *h = json_object();
    json_object_set_new(h, "format", json_string("hetmem-trace"));
    json_object_set_new(h, "version", json_integer(HM_TRACE_VERSION));
    json_object_set_new(h, "producer", json_str_or_null(m ? m->producer : NULL));
    json_object_set_new(h, "clock", json_str_or_null(m ? m->clock : NULL));
    json_object_set_new(h, "clock_ns_per_unit",
                        json_real(m && m->clock_ns_per_unit > 0 ? m->clock_ns_per_unit : 1.0));
    json_object_set_new(h, "backend", json_str_or_null(m ? m->backend : NULL));
    json_object_set_new(h, "event", json_str_or_null(m ? m->event : NULL));
    json_object_set_new(h, "period", json_integer(m ? (json_int_t)m->period : 0));
    json_object_set_new(h, "device", json_str_or_null(m ? m->device : NULL));
    if (m && m->min_size)
        json_object_set_new(h, "min_size", json_integer((json_int_t)(m->min_size > INT64_MAX ? INT64_MAX : m->min_size)));
    json_t *machine = json_null();
    if (m && m->machine_json) {
        json_decref(machine);
        int rc = hm__json_load_string("machine description", m->machine_json, &machine);
        if (rc < 0) {
            json_decref(h);
            return rc;
        }
    }
    json_object_set_new(h, "machine", machine);
    if (m && m->host_json) {
        json_t *host = NULL;
        int rc = hm__json_load_string("host description", m->host_json, &host);
        if (rc < 0) {
            json_decref(h);
            return rc;
        }
        if (!json_is_object(host)) {
            json_decref(host);
            json_decref(h);
            return hm__errf(HM_EBADJSON, "host description: not a JSON object");
        }
        json_object_set_new(h, "host", host);
    }
    json_t *argv = json_array();
    for (const char *const *a = m ? m->argv : NULL; a && *a; a++)
        json_array_append_new(argv, json_string(*a));
    json_object_set_new(h, "argv", argv);
    /* Strings that are not valid UTF-8 make json_string() return NULL,
     * which jansson's set_new silently drops; report them instead. */
    static const char *const keys[] = {"producer", "clock", "backend", "event", "device"};
    const char *vals[] = {m ? m->producer : NULL, m ? m->clock : NULL, m ? m->backend : NULL,
                          m ? m->event : NULL, m ? m->device : NULL};
    for (size_t i = 0; i < HM_ARRAY_LEN(keys); i++)
        if (!json_object_get(h, keys[i])) {
            json_decref(h);
            return hm__errf(HM_ERANGE, "trace header: \"%s\" is not valid UTF-8: %.40s", keys[i], vals[i]);
        }
    if (json_array_size(argv) != 0 || (m && m->argv && m->argv[0])) {
        size_t n = 0;
        for (const char *const *a = m->argv; *a; a++)
            n++;
        if (n != json_array_size(argv)) {
            json_decref(h);
            return hm__errf(HM_ERANGE, "trace header: argv is not valid UTF-8");
        }
    }
    *out = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!*out)
        return hm__errf(-ENOMEM, "trace header");
    size_t len = strlen(*out);
    if (len > HM__TR_MAX_HEADER) {
        free_header(*out);
        *out = NULL;
        return hm__errf(HM_ETOOBIG, "trace header is %zu bytes (max %u)", len, HM__TR_MAX_HEADER);
    }
    return 0;
}

int hm_trace_writer_open(hm_trace_writer_t **out, const char *path, const hm_trace_meta_t *meta)
{
    hm__errclear();
    *out = NULL;
    hm_trace_writer_t *w = hm__xcalloc(1, sizeof *w);
    w->fd = -1;
    w->block_records = 65536;
    char *hdr = NULL;
    int rc;
    /* Written as is it would read back negative, and the reader refuses it. */
    if (meta && meta->period > HM_TRACE_PERIOD_MAX) {
        rc = hm__errf(HM_ERANGE, "%s: sampling period %llu is over %llu", path, (unsigned long long)meta->period,
                      (unsigned long long)HM_TRACE_PERIOD_MAX);
        goto fail;
    }
    rc = build_header(meta, &hdr);
    if (rc < 0)
        goto fail;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = hm__errf(-errno, "%s", path);
        goto fail;
    }
    w->zc = ZSTD_createCCtx();
    if (!w->zc) {
        rc = hm__errf(-ENOMEM, "zstd context");
        goto fail;
    }
    uint8_t pre[HM__TR_PREAMBLE_BYTES];
    size_t hlen = strlen(hdr);
    memcpy(pre, HM__TR_MAGIC, 8);
    hm__put_u32(pre + 8, HM_TRACE_VERSION);
    hm__put_u32(pre + 12, 0);
    hm__put_u32(pre + 16, (uint32_t)hlen);
    hm__put_u32(pre + 20, (uint32_t)hm__hash64(hdr, hlen, 0));
    if ((rc = write_all(w, pre, sizeof pre)) < 0 || (rc = write_all(w, hdr, hlen)) < 0) {
        rc = hm__errf(rc, "%s: cannot write the header", path);
        goto fail;
    }
    free_header(hdr);
    w->s = hm__xmalloc((size_t)w->block_records * sizeof *w->s);
    w->scratch = hm__xmalloc((size_t)w->block_records * 4 * sizeof *w->scratch);
    *out = w;
    return 0;
fail:
    free_header(hdr);
    if (w->fd >= 0)
        close(w->fd);
    ZSTD_freeCCtx(w->zc);
    free(w);
    return rc;
}

int hm_trace_writer_set_block_records(hm_trace_writer_t *w, uint32_t records)
{
    hm__errclear();
    if (records < 1 || records > HM__TR_WRITER_MAX_RECORDS)
        return hm__errf(HM_ERANGE, "block size %u records (allowed 1..%u)", records,
                        HM__TR_WRITER_MAX_RECORDS);
    if (w->ns || w->nev || w->nblocks)
        return hm__errf(HM_EUSAGE, "block size must be set before the first record");
    w->block_records = records;
    free(w->s);
    free(w->scratch);
    w->s = hm__xmalloc((size_t)records * sizeof *w->s);
    w->scratch = hm__xmalloc((size_t)records * 4 * sizeof *w->scratch);
    return 0;
}

/* ------------------------------------------------------------- flushing */

typedef struct {
    uint64_t time;
    uint32_t idx;
} skey_t;

static int cmp_skey(const void *a, const void *b)
{
    const skey_t *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_event(const void *a, const void *b)
{
    const hm__wevent_t *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Stable sort of the buffered samples; qsort on (time, arrival index)
 * keys, then one permutation pass. */
static void sort_samples(hm_trace_writer_t *w)
{
    uint32_t n = w->ns;
    skey_t *k = hm__xmalloc((size_t)n * sizeof *k);
    for (uint32_t i = 0; i < n; i++)
        k[i] = (skey_t){w->s[i].time, i};
    qsort(k, n, sizeof *k, cmp_skey);
    hm_sample_t *tmp = hm__xmalloc((size_t)n * sizeof *tmp);
    for (uint32_t i = 0; i < n; i++)
        tmp[i] = w->s[k[i].idx];
    memcpy(w->s, tmp, (size_t)n * sizeof *tmp);
    free(tmp);
    free(k);
}

static int flush_block(hm_trace_writer_t *w)
{
    if (w->err)
        return w->err;
    if (w->ns == 0 && w->nev == 0)
        return 0;
    /* A site filed before the block's first timed record takes that
     * record's time, so sites never stretch a block's time range. */
    uint64_t tmin = UINT64_MAX;
    int has_site = 0;
    for (uint32_t i = 0; i < w->ns; i++)
        if (w->s[i].time < tmin)
            tmin = w->s[i].time;
    for (uint32_t i = 0; i < w->nev; i++) {
        if (w->ev[i].kind == HM_REC_SITE)
            has_site = 1;
        else if (w->ev[i].time < tmin)
            tmin = w->ev[i].time;
    }
    if (has_site && tmin != UINT64_MAX)
        for (uint32_t i = 0; i < w->nev; i++)
            if (w->ev[i].kind == HM_REC_SITE && w->ev[i].time < tmin) {
                w->ev[i].time = tmin;
                w->e_unsorted = 1;
            }
    if (w->s_unsorted)
        sort_samples(w);
    if (w->e_unsorted)
        qsort(w->ev, w->nev, sizeof *w->ev, cmp_event);
    uint64_t first = UINT64_MAX, last = 0;
    if (w->ns) {
        first = w->s[0].time;
        last = w->s[w->ns - 1].time;
    }
    if (w->nev) {
        if (w->ev[0].time < first)
            first = w->ev[0].time;
        if (w->ev[w->nev - 1].time > last)
            last = w->ev[w->nev - 1].time;
    }
    w->raw.len = 0;
    hm__block_encode(&w->raw, w->s, w->ns, w->ev, w->nev, (const char *)w->str.p, first,
                     w->scratch);
    if (w->raw.len > HM__TR_MAX_RAW)
        return w->err = hm__errf(HM_ETOOBIG, "block %u encodes to %zu bytes", w->nblocks, w->raw.len);
    size_t bound = ZSTD_compressBound(w->raw.len);
    w->comp.len = 0;
    hm__buf_reserve(&w->comp, HM__TR_BLOCK_HDR_BYTES + bound);
    uint8_t *hdr = w->comp.p;
    size_t clen = ZSTD_compressCCtx(w->zc, hdr + HM__TR_BLOCK_HDR_BYTES, bound,
                                    w->raw.p, w->raw.len, ZSTD_LEVEL);
    if (ZSTD_isError(clen))
        return w->err = hm__errf(HM_EZSTD, "block %u: %s", w->nblocks, ZSTD_getErrorName(clen));
    hm__put_u32(hdr, HM__TR_BLOCK_MAGIC);
    hm__put_u32(hdr + 4, w->ns);
    hm__put_u32(hdr + 8, w->nev);
    hm__put_u32(hdr + 12, (uint32_t)w->raw.len);
    hm__put_u32(hdr + 16, (uint32_t)clen);
    hm__put_u32(hdr + 20, 0);
    hm__put_u64(hdr + 24, first);
    hm__put_u64(hdr + 32, last);
    uint64_t sum = hm__hash64(hdr + HM__TR_BLOCK_HDR_BYTES, clen, hm__hash64(hdr, 40, 0));
    hm__put_u64(hdr + 40, sum);

    uint8_t *e;
    hm__buf_reserve(&w->index, HM__TR_INDEX_ENTRY_BYTES);
    e = w->index.p + w->index.len;
    hm__put_u64(e, w->off);
    hm__put_u64(e + 8, first);
    hm__put_u64(e + 16, last);
    hm__put_u32(e + 24, w->ns + w->nev);
    hm__put_u32(e + 28, w->ns);
    hm__put_u32(e + 32, (uint32_t)clen);
    hm__put_u32(e + 36, (uint32_t)w->raw.len);

    int rc = write_all(w, hdr, HM__TR_BLOCK_HDR_BYTES + clen);
    if (rc < 0)
        return rc;
    w->index.len += HM__TR_INDEX_ENTRY_BYTES;
    w->nblocks++;
    w->floor = last;
    w->ns = w->nev = 0;
    w->s_unsorted = w->e_unsorted = 0;
    w->s_last = w->e_last = 0;
    w->str.len = 0;
    /* Keep the encode buffers from growing to a pathological block's size
     * for the rest of the run. */
    if (w->raw.cap > (8u << 20)) hm__buf_free(&w->raw);
    if (w->comp.cap > (8u << 20)) hm__buf_free(&w->comp);
    if (w->str.cap > (2 * HM__TR_WRITER_STR_FLUSH)) hm__buf_free(&w->str);
    return 0;
}

/* Applies the clamp rule and updates the run's statistics. */
static inline uint64_t admit_time(hm_trace_writer_t *w, uint64_t t, int kind)
{
    if (HM_UNLIKELY(t < w->floor)) {
        t = w->floor;
        w->reordered++;
    }
    w->counts[kind]++;
    if (kind == HM_REC_SITE)
        return t; /* timeless: kept out of the run's time range */
    if (t > w->max_time)
        w->max_time = t;
    if (!w->any || t < w->first_time)
        w->first_time = t;
    if (t > w->last_time)
        w->last_time = t;
    w->any = 1;
    return t;
}

static inline int block_full(const hm_trace_writer_t *w)
{
    return w->ns + w->nev >= w->block_records || w->str.len >= HM__TR_WRITER_STR_FLUSH;
}

int hm_trace_write_sample(hm_trace_writer_t *w, const hm_sample_t *s)
{
    hm__errclear();
    if (HM_UNLIKELY(w->err))
        return w->err;
    hm_sample_t *d = &w->s[w->ns++];
    *d = *s;
    d->time = admit_time(w, s->time, HM_REC_SAMPLE);
    if (d->time < w->s_last)
        w->s_unsorted = 1;
    w->s_last = d->time;
    if (s->access == HM_ACCESS_STORE)
        w->stores++;
    else
        w->loads++;
    return block_full(w) ? flush_block(w) : 0;
}

static int push_event(hm_trace_writer_t *w, int kind, uint64_t time, uint64_t a, uint64_t b,
                      uint64_t c, uint32_t tid, const char *str)
{
    if (w->err)
        return w->err;
    size_t slen = str ? strlen(str) : 0;
    if (slen > HM__TR_MAX_STRING)
        return hm__errf(HM_ETOOBIG, "string of %zu bytes in a trace record (max %u)", slen,
                        HM__TR_MAX_STRING);
    if (w->nev == w->evcap) {
        w->evcap = w->evcap ? w->evcap * 2 : 256;
        if (w->evcap > w->block_records)
            w->evcap = w->block_records;
        w->ev = hm__xrealloc(w->ev, (size_t)w->evcap * sizeof *w->ev);
    }
    hm__wevent_t *e = &w->ev[w->nev++];
    e->time = admit_time(w, time, kind);
    e->a = a;
    e->b = b;
    e->c = c;
    e->tid = tid;
    e->kind = (uint8_t)kind;
    e->seq = w->seq++;
    e->str_off = (uint32_t)w->str.len;
    e->str_len = (uint32_t)slen;
    if (slen) {
        hm__buf_reserve(&w->str, slen);
        memcpy(w->str.p + w->str.len, str, slen);
        w->str.len += slen;
    }
    if (e->time < w->e_last)
        w->e_unsorted = 1;
    w->e_last = e->time;
    return block_full(w) ? flush_block(w) : 0;
}

int hm_trace_write_alloc(hm_trace_writer_t *w, const hm_alloc_t *a)
{
    hm__errclear();
    return push_event(w, HM_REC_ALLOC, a->time, a->addr, a->size, a->site, a->tid, NULL);
}

int hm_trace_write_free(hm_trace_writer_t *w, uint64_t time, uint64_t addr, uint32_t tid)
{
    hm__errclear();
    return push_event(w, HM_REC_FREE, time, addr, 0, 0, tid, NULL);
}

/* Phase ids are per-trace indexes of distinct names; a run has a handful of
 * phases, so a linear table is enough. */
static uint32_t phase_id(hm_trace_writer_t *w, const char *name)
{
    for (uint32_t i = 0; i < w->nphases; i++)
        if (strcmp(w->phase_names[i], name) == 0)
            return i;
    w->phase_names = hm__xrealloc(w->phase_names, (w->nphases + 1) * sizeof *w->phase_names);
    w->phase_names[w->nphases] = hm__xstrdup(name);
    return w->nphases++;
}

int hm_trace_write_phase(hm_trace_writer_t *w, int begin, uint64_t time, uint32_t tid, const char *name)
{
    hm__errclear();
    if (!name)
        name = "";
    if (strlen(name) > HM__TR_MAX_STRING)
        return hm__errf(HM_ETOOBIG, "phase name of %zu bytes", strlen(name));
    return push_event(w, begin ? HM_REC_PHASE_BEGIN : HM_REC_PHASE_END, time,
                      phase_id(w, name), 0, 0, tid, name);
}

int hm_trace_write_counter(hm_trace_writer_t *w, const hm_counter_t *c)
{
    hm__errclear();
    return push_event(w, HM_REC_COUNTER, c->time, c->counter, c->value, 0, c->tid, NULL);
}

int hm_trace_write_site(hm_trace_writer_t *w, uint64_t site, const char *frames)
{
    hm__errclear();
    /* A site has no time of its own; it is filed at the latest time seen so
     * it lands in the current block. */
    return push_event(w, HM_REC_SITE, w->max_time, site, 0, 0, 0, frames ? frames : "");
}

int hm_trace_write_name(hm_trace_writer_t *w, uint64_t time, uint64_t addr, const char *name)
{
    hm__errclear();
    return push_event(w, HM_REC_NAME, time, addr, 0, 0, 0, name ? name : "");
}

/* ---------------------------------------------------------------- close */

static int write_tail(hm_trace_writer_t *w, const hm_trace_end_t *end)
{
    uint64_t index_off = w->off;
    hm__buf_t t = {0};
    hm__buf_reserve(&t, 8 + w->index.len + HM__TR_END_BYTES + HM__TR_TRAILER_BYTES);
    uint8_t *p = t.p;
    hm__put_u32(p, HM__TR_INDEX_MAGIC);
    hm__put_u32(p + 4, w->nblocks);
    if (w->index.len)
        memcpy(p + 8, w->index.p, w->index.len);
    p += 8 + w->index.len;
    memset(p, 0, HM__TR_END_BYTES);
    hm__put_u32(p, HM__TR_END_MAGIC);
    hm__put_u32(p + 4, 1); /* bit 0: the run ended normally */
    hm__put_u64(p + 8, end->total_time);
    hm__put_u32(p + 16, (uint32_t)end->exit_status);
    for (int k = 1; k <= 8; k++)
        hm__put_u64(p + 24 + 8 * (k - 1), w->counts[k]);
    hm__put_u64(p + 88, w->loads);
    hm__put_u64(p + 96, w->stores);
    hm__put_u64(p + 104, w->reordered);
    hm__put_u64(p + 112, w->any ? w->first_time : 0);
    hm__put_u64(p + 120, w->last_time);
    p += HM__TR_END_BYTES;
    size_t len = (size_t)(p - t.p);
    hm__put_u64(p, index_off);
    hm__put_u64(p + 8, len);
    hm__put_u64(p + 16, hm__hash64(t.p, len, 0));
    memcpy(p + 24, HM__TR_TRAILER_MAGIC, 8);
    int rc = write_all(w, t.p, len + HM__TR_TRAILER_BYTES);
    hm__buf_free(&t);
    return rc;
}

int hm_trace_writer_close(hm_trace_writer_t *w, const hm_trace_end_t *end)
{
    hm__errclear();
    if (!w)
        return 0;
    int rc = flush_block(w);
    if (rc == 0 && end)
        rc = write_tail(w, end);
    if (close(w->fd) < 0 && rc == 0)
        rc = hm__errf(-errno, "close");
    ZSTD_freeCCtx(w->zc);
    free(w->s);
    free(w->scratch);
    free(w->ev);
    hm__buf_free(&w->str);
    hm__buf_free(&w->raw);
    hm__buf_free(&w->comp);
    hm__buf_free(&w->index);
    for (uint32_t i = 0; i < w->nphases; i++)
        free(w->phase_names[i]);
    free(w->phase_names);
    free(w);
    return rc;
}
