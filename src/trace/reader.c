/* Trace reader: validates the preamble, header, trailer and index at open
 * (O(1) in the trace's length apart from the index itself), then decodes
 * one block at a time on demand. Every length read from the file is bounded
 * before it sizes an allocation or a read. */
#define _GNU_SOURCE
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

/* libFuzzer builds skip checksum checks so that mutated inputs reach the
 * decoders behind them (the usual FUZZING_BUILD_MODE convention). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CHECKSUMS 0
#else
#define CHECKSUMS 1
#endif

struct hm_trace {
    int fd;
    uint64_t size;
    json_t *hdr;
    char *hdr_text;
    char *machine_text;
    char *host_text;
    const char **argv;
    hm_trace_meta_t meta;
    uint64_t data_start, index_off;
    hm_block_info_t *blocks;
    uint32_t nblocks;
    hm_trace_stats_t stats;

    ZSTD_DCtx *dctx;
    uint8_t *cbuf;
    size_t ccap;
    uint8_t *raw;
    size_t rawcap;
    size_t max_c, max_raw;        /* the largest block's compressed and raw bytes: every block's are at most these */
    hm__cols_t cols;
    hm_block_t blk;
    int64_t decoded;              /* block held in cols, or -1 */
    hm__scan_t *scan;             /* hm_trace_batch_begin()'s state */
    hm__scan_chunk_t *chunk;      /* the batch hm_trace_batch_next() decodes into */
    uint32_t scan_block;
    int scanning;                 /* a block is being read a batch at a time */

    uint32_t it_block, si, ei;
    int it_loaded;
};

static int read_at(const hm_trace_t *t, void *buf, size_t len, uint64_t off, const char *what)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(t->fd, p + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return hm__errf(-errno, "reading %s at offset %llu", what, (unsigned long long)(off + done));
        }
        if (n == 0)
            return hm__errf(HM_ETRUNC, "%s at offset %llu: file ends at %llu", what,
                            (unsigned long long)off, (unsigned long long)(off + done));
        done += (size_t)n;
    }
    return 0;
}

static const char *jstr(const json_t *h, const char *key)
{
    const json_t *v = json_object_get(h, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Header values the readers of a trace compute with must be in range: a
 * clock of 9e9 ns per unit or a negative bandwidth would otherwise turn
 * into estimates without a word. Keys that are absent keep their defaults
 * (older traces); keys that are present must make sense. */
#define CLOCK_MIN 1e-3   /* ns per unit: a picosecond clock */
#define CLOCK_MAX 1e6    /* ns per unit: a millisecond clock */
#define FIGURE_MAX 1e6   /* ns of latency, GB/s of bandwidth, points of a curve: far above any memory */

static int check_figure(const json_t *o, const char *key, int i, double lo_excl, double hi)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_number(v) || !(json_number_value(v) > lo_excl) || !(json_number_value(v) <= hi))
        return hm__errf(HM_ERANGE, "header: machine.devices[%d].%s %s%g is outside (%g, %g]", i, key,
                        json_is_number(v) ? "" : "(not a number) ", json_is_number(v) ? json_number_value(v) : 0.0,
                        lo_excl, hi);
    return 0;
}

static int check_header(const json_t *h)
{
    const json_t *v = json_object_get(h, "clock_ns_per_unit");
    if (v && (!json_is_number(v) || !(json_number_value(v) >= CLOCK_MIN) || !(json_number_value(v) <= CLOCK_MAX)))
        return hm__errf(HM_ERANGE, "header: clock_ns_per_unit %g is outside [%g, %g] ns", json_is_number(v) ? json_number_value(v) : 0.0,
                        CLOCK_MIN, CLOCK_MAX);
    v = json_object_get(h, "period");
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0))
        return hm__errf(HM_ERANGE, "header: period %s%" JSON_INTEGER_FORMAT " is not a non-negative integer",
                        json_is_integer(v) ? "" : "(not an integer) ", json_is_integer(v) ? json_integer_value(v) : 0);
    const json_t *m = json_object_get(h, "machine");
    if (m && !json_is_null(m)) {
        if (!json_is_object(m))
            return hm__errf(HM_ERANGE, "header: machine is not an object");
        v = json_object_get(m, "cores");
        if (v && (!json_is_number(v) || !(json_number_value(v) >= 1) || !(json_number_value(v) <= FIGURE_MAX)))
            return hm__errf(HM_ERANGE, "header: machine.cores %g is outside [1, %g]",
                            json_is_number(v) ? json_number_value(v) : 0.0, FIGURE_MAX);
        const json_t *devs = json_object_get(m, "devices"), *d;
        size_t i;
        json_array_foreach(devs, i, d) {
            if (!json_is_object(d))
                continue;
            static const char *const keys[] = {"read_latency_ns", "write_latency_ns", "read_bandwidth_gbs",
                                               "write_bandwidth_gbs"};
            for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
                int rc = check_figure(d, keys[k], (int)i, 0, FIGURE_MAX);
                if (rc < 0)
                    return rc;
            }
            v = json_object_get(d, "capacity");
            if (v && json_is_number(v) && !(json_number_value(v) >= 0))
                return hm__errf(HM_ERANGE, "header: machine.devices[%d].capacity %g is negative", (int)i,
                                json_number_value(v));
            const json_t *ll = json_object_get(d, "loaded_latency"), *pt;
            size_t k;
            json_array_foreach(ll, k, pt) {
                const json_t *u = json_array_get(pt, 0), *ns = json_array_get(pt, 1);
                if (!json_is_number(u) || !json_is_number(ns) || !(json_number_value(u) > 0) ||
                    !(json_number_value(u) <= 1) || !(json_number_value(ns) > 0) || !(json_number_value(ns) <= FIGURE_MAX))
                    return hm__errf(HM_ERANGE, "header: machine.devices[%d].loaded_latency[%d] is not [utilisation "
                                    "in (0, 1], ns in (0, %g]]", (int)i, (int)k, FIGURE_MAX);
            }
        }
    }
    const json_t *host = json_object_get(h, "host");
    if (host && !json_is_null(host)) {
        if (!json_is_object(host))
            return hm__errf(HM_ERANGE, "header: host is not an object");
        static const char *const keys[] = {"name", "cpu", "figures"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            v = json_object_get(host, keys[k]);
            if (v && !json_is_string(v) && !json_is_null(v))
                return hm__errf(HM_ERANGE, "header: host.%s is not a string", keys[k]);
        }
        const json_t *nodes = json_object_get(host, "nodes"), *n;
        size_t i;
        if (nodes && !json_is_array(nodes))
            return hm__errf(HM_ERANGE, "header: host.nodes is not an array");
        json_array_foreach(nodes, i, n)
            if (!json_is_object(n) || !json_is_string(json_object_get(n, "name")))
                return hm__errf(HM_ERANGE, "header: host.nodes[%d] is not an object with a name", (int)i);
        const json_t *bn = json_object_get(host, "bound_nodes");
        if (bn && !json_is_array(bn))
            return hm__errf(HM_ERANGE, "header: host.bound_nodes is not an array");
        json_array_foreach(bn, i, n)
            if (!json_is_integer(n) || json_integer_value(n) < 0 || json_integer_value(n) > 1023)
                return hm__errf(HM_ERANGE, "header: host.bound_nodes[%d] is not a node number in 0..1023", (int)i);
    }
    return 0;
}

static int load_header(hm_trace_t *t)
{
    uint8_t pre[HM__TR_PREAMBLE_BYTES];
    size_t have = t->size < sizeof pre ? (size_t)t->size : sizeof pre;
    if (t->size == 0)
        return hm__errf(HM_ETRUNC, "empty file");
    int rc = read_at(t, pre, have, 0, "preamble");
    if (rc < 0)
        return rc;
    if (memcmp(pre, HM__TR_MAGIC, have < 8 ? have : 8) != 0)
        return hm__errf(HM_EBADTRACE, "offset 0: expected \"HMTRACE\"");
    if (have < sizeof pre)
        return hm__errf(HM_ETRUNC, "preamble: file ends at %zu (need %d bytes)", have,
                        HM__TR_PREAMBLE_BYTES);
    uint32_t version = hm__get_u32(pre + 8), flags = hm__get_u32(pre + 12);
    uint32_t hlen = hm__get_u32(pre + 16), hsum = hm__get_u32(pre + 20);
    if (version == 0 || version > HM_TRACE_VERSION)
        return hm__errf(HM_EVERSION, "offset 8: version %u (this reader reads 1..%d)",
                        version, HM_TRACE_VERSION);
    if (flags & HM__TR_FLAGS_REQUIRED_MASK)
        return hm__errf(HM_EVERSION, "offset 12: unknown required feature flags 0x%x",
                        flags & HM__TR_FLAGS_REQUIRED_MASK);
    if (hlen > HM__TR_MAX_HEADER)
        return hm__errf(HM_ETOOBIG, "offset 16: header length %u (max %u)", hlen,
                        HM__TR_MAX_HEADER);
    if ((uint64_t)HM__TR_PREAMBLE_BYTES + hlen > t->size)
        return hm__errf(HM_ETRUNC, "header of %u bytes at offset %d: file ends at %llu",
                        hlen, HM__TR_PREAMBLE_BYTES, (unsigned long long)t->size);
    t->hdr_text = malloc((size_t)hlen + 1);
    if (!t->hdr_text)
        return hm__errf(-ENOMEM, "header");
    if ((rc = read_at(t, t->hdr_text, hlen, HM__TR_PREAMBLE_BYTES, "header")) < 0)
        return rc;
    t->hdr_text[hlen] = '\0';
    if (CHECKSUMS && (uint32_t)hm__hash64(t->hdr_text, hlen, 0) != hsum)
        return hm__errf(HM_ECORRUPT, "header at offset %d: checksum mismatch",
                        HM__TR_PREAMBLE_BYTES);
    json_error_t je;
    t->hdr = json_loadb(t->hdr_text, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!t->hdr && json_error_code(&je) == json_error_out_of_memory)
        return hm__errf(-ENOMEM, "header at offset %d", HM__TR_PREAMBLE_BYTES);
    if (!t->hdr || !json_is_object(t->hdr))
        return hm__errf(HM_ECORRUPT, "header at offset %d: %s", HM__TR_PREAMBLE_BYTES,
                        t->hdr ? "not a JSON object" : je.text);
    t->data_start = HM__TR_PREAMBLE_BYTES + (uint64_t)hlen;

    hm_trace_meta_t *m = &t->meta;
    m->producer = jstr(t->hdr, "producer");
    m->clock = jstr(t->hdr, "clock");
    m->backend = jstr(t->hdr, "backend");
    m->event = jstr(t->hdr, "event");
    m->device = jstr(t->hdr, "device");
    if ((rc = check_header(t->hdr)) < 0)
        return rc;
    json_t *v = json_object_get(t->hdr, "clock_ns_per_unit");
    m->clock_ns_per_unit = json_is_number(v) ? json_number_value(v) : 1.0;
    v = json_object_get(t->hdr, "period");
    m->period = json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
    v = json_object_get(t->hdr, "min_size");
    m->min_size = json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    v = json_object_get(t->hdr, "machine");
    /* A value just parsed always dumps: NULL is for want of memory. */
    if (v && !json_is_null(v) && !(t->machine_text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)))
        return hm__errf(-ENOMEM, "header machine");
    m->machine_json = t->machine_text;
    v = json_object_get(t->hdr, "host");
    if (v && !json_is_null(v) && !(t->host_text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        return hm__errf(-ENOMEM, "header host");
    m->host_json = t->host_text;
    v = json_object_get(t->hdr, "argv");
    if (json_is_array(v)) {
        size_t n = json_array_size(v), k = 0;
        t->argv = calloc(n + 1, sizeof *t->argv);
        if (!t->argv)
            return hm__errf(-ENOMEM, "header argv");
        for (size_t i = 0; i < n; i++)
            if (json_is_string(json_array_get(v, i)))
                t->argv[k++] = json_string_value(json_array_get(v, i));
        m->argv = t->argv;
    }
    return 0;
}

static int load_index(hm_trace_t *t)
{
    uint8_t tr[HM__TR_TRAILER_BYTES];
    uint64_t min_size = t->data_start + HM__TR_TRAILER_BYTES;
    if (t->size < min_size ||
        read_at(t, tr, sizeof tr, t->size - HM__TR_TRAILER_BYTES, "trailer") < 0 ||
        memcmp(tr + 24, HM__TR_TRAILER_MAGIC, 8) != 0)
        return hm__errf(HM_ETRUNC, "no index or end record: file ends at offset %llu (the writer did not finish)",
                        (unsigned long long)t->size);
    uint64_t off = hm__get_u64(tr), len = hm__get_u64(tr + 8), sum = hm__get_u64(tr + 16);
    uint64_t toff = t->size - HM__TR_TRAILER_BYTES;
    if (off < t->data_start || off > toff || len != toff - off)
        return hm__errf(HM_ECORRUPT, "trailer at offset %llu: index at %llu+%llu does not end at the trailer",
                        (unsigned long long)toff, (unsigned long long)off, (unsigned long long)len);
    if (len < 8 + HM__TR_END_BYTES || (len - 8 - HM__TR_END_BYTES) % HM__TR_INDEX_ENTRY_BYTES)
        return hm__errf(HM_ECORRUPT, "index at offset %llu: bad length %llu",
                        (unsigned long long)off, (unsigned long long)len);
    uint64_t nb = (len - 8 - HM__TR_END_BYTES) / HM__TR_INDEX_ENTRY_BYTES;
    if (nb > HM__TR_MAX_BLOCKS)
        return hm__errf(HM_ETOOBIG, "index at offset %llu: %llu blocks",
                        (unsigned long long)off, (unsigned long long)nb);
    /* The index's own head must agree before its length sizes a buffer. */
    uint8_t head[8];
    int hrc = read_at(t, head, sizeof head, off, "index");
    if (hrc < 0)
        return hrc;
    if (hm__get_u32(head) != HM__TR_INDEX_MAGIC || hm__get_u32(head + 4) != nb)
        return hm__errf(HM_ECORRUPT, "index at offset %llu: bad magic or block count",
                        (unsigned long long)off);
    uint8_t *buf = malloc((size_t)len);
    if (!buf)
        return hm__errf(-ENOMEM, "index of %llu bytes", (unsigned long long)len);
    int rc = read_at(t, buf, (size_t)len, off, "index");
    if (rc < 0)
        goto out;
    rc = HM_ECORRUPT;
    if (CHECKSUMS && hm__hash64(buf, (size_t)len, 0) != sum) {
        hm__errf(rc, "index at offset %llu: checksum mismatch", (unsigned long long)off);
        goto out;
    }
    if (hm__get_u32(buf) != HM__TR_INDEX_MAGIC || hm__get_u32(buf + 4) != nb) {
        hm__errf(rc, "index at offset %llu: bad magic or block count", (unsigned long long)off);
        goto out;
    }
    t->nblocks = (uint32_t)nb;
    t->blocks = calloc(nb ? nb : 1, sizeof *t->blocks);
    if (!t->blocks) {
        rc = hm__errf(-ENOMEM, "index");
        goto out;
    }
    uint64_t expect = t->data_start, prev_last = 0, nrec = 0, nsamp = 0;
    for (uint32_t i = 0; i < nb; i++) {
        const uint8_t *e = buf + 8 + (size_t)i * HM__TR_INDEX_ENTRY_BYTES;
        hm_block_info_t *b = &t->blocks[i];
        b->offset = hm__get_u64(e);
        b->first_time = hm__get_u64(e + 8);
        b->last_time = hm__get_u64(e + 16);
        b->records = hm__get_u32(e + 24);
        b->samples = hm__get_u32(e + 28);
        b->compressed_bytes = hm__get_u32(e + 32);
        b->raw_bytes = hm__get_u32(e + 36);
        const char *why = NULL;
        int err = HM_ECORRUPT;
        if (b->offset != expect)
            why = "block is not where the previous one ends";
        else if (b->records == 0 || b->records > HM__TR_MAX_BLOCK_RECORDS || b->samples > b->records)
            why = "record count out of range", err = HM_ETOOBIG;
        else if (b->raw_bytes > HM__TR_MAX_RAW || b->compressed_bytes > ZSTD_compressBound(b->raw_bytes))
            why = "raw or compressed length out of range", err = HM_ETOOBIG;
        else if (b->first_time > b->last_time || b->first_time < prev_last)
            why = "times out of order";
        else if (b->offset + HM__TR_BLOCK_HDR_BYTES + b->compressed_bytes > off)
            why = "block runs into the index";
        if (why) {
            rc = hm__errf(err, "index entry %u (block at offset %llu): %s", i,
                          (unsigned long long)b->offset, why);
            goto out;
        }
        expect = b->offset + HM__TR_BLOCK_HDR_BYTES + b->compressed_bytes;
        prev_last = b->last_time;
        nrec += b->records;
        nsamp += b->samples;
        t->max_c = b->compressed_bytes > t->max_c ? b->compressed_bytes : t->max_c;
        t->max_raw = b->raw_bytes > t->max_raw ? b->raw_bytes : t->max_raw;
    }
    if (expect != off) {
        hm__errf(rc, "index at offset %llu: blocks end at %llu", (unsigned long long)off,
                 (unsigned long long)expect);
        goto out;
    }
    const uint8_t *end = buf + 8 + nb * HM__TR_INDEX_ENTRY_BYTES;
    uint64_t eoff = off + 8 + nb * HM__TR_INDEX_ENTRY_BYTES;
    if (hm__get_u32(end) != HM__TR_END_MAGIC) {
        hm__errf(rc, "end record at offset %llu: bad magic", (unsigned long long)eoff);
        goto out;
    }
    hm_trace_stats_t *s = &t->stats;
    s->has_end = hm__get_u32(end + 4) & 1;
    s->end.total_time = hm__get_u64(end + 8);
    s->end.exit_status = (int)hm__get_u32(end + 16);
    uint64_t sum_counts = 0;
    for (int k = 1; k <= 8; k++)
        sum_counts += s->records[k] = hm__get_u64(end + 24 + 8 * (k - 1));
    s->loads = hm__get_u64(end + 88);
    s->stores = hm__get_u64(end + 96);
    s->reordered = hm__get_u64(end + 104);
    s->first_time = hm__get_u64(end + 112);
    s->last_time = hm__get_u64(end + 120);
    s->blocks = t->nblocks;
    s->file_bytes = t->size;
    if (sum_counts != nrec || s->records[HM_REC_SAMPLE] != nsamp ||
        s->loads + s->stores != nsamp) {
        hm__errf(rc, "end record at offset %llu: counts disagree with the index",
                 (unsigned long long)eoff);
        goto out;
    }
    t->index_off = off;
    rc = 0;
out:
    free(buf);
    return rc;
}

int hm_trace_open(hm_trace_t **out, const char *path)
{
    *out = NULL;
    hm__errclear();
    hm_trace_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->decoded = -1;
    int rc;
    /* Non-blocking: a FIFO or device named as a trace is refused below
     * instead of hanging the open. */
    t->fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (t->fd < 0) {
        rc = -errno; /* the caller names the file */
        hm__errclear();
        goto fail;
    }
    struct stat st;
    if (fstat(t->fd, &st) < 0) {
        rc = -errno; /* the caller names the file */
        hm__errclear();
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = hm__errf(-EINVAL, "not a regular file");
        goto fail;
    }
    t->size = (uint64_t)st.st_size;
    if ((rc = load_header(t)) < 0 || (rc = load_index(t)) < 0)
        goto fail;
    t->dctx = ZSTD_createDCtx();
    if (!t->dctx) {
        rc = hm__errf(-ENOMEM, "zstd context");
        goto fail;
    }
    *out = t;
    return 0;
fail:
    hm_trace_close(t);
    return rc;
}

void hm_trace_close(hm_trace_t *t)
{
    if (!t)
        return;
    if (t->fd >= 0)
        close(t->fd);
    json_decref(t->hdr);
    free(t->hdr_text);
    free(t->machine_text);
    free(t->host_text);
    free(t->argv);
    free(t->blocks);
    ZSTD_freeDCtx(t->dctx);
    free(t->cbuf);
    free(t->raw);
    hm__cols_free(&t->cols);
    free(t->scan);
    free(t->chunk);
    free(t);
}

const hm_trace_meta_t *hm_trace_meta(const hm_trace_t *t) { return &t->meta; }
const char *hm_trace_header_json(const hm_trace_t *t) { return t->hdr_text; }
void hm_trace_stats(const hm_trace_t *t, hm_trace_stats_t *out) { *out = t->stats; }
uint32_t hm_trace_nblocks(const hm_trace_t *t) { return t->nblocks; }

int hm_trace_block_info(const hm_trace_t *t, uint32_t i, hm_block_info_t *out)
{
    hm__errclear();
    if (i >= t->nblocks)
        return hm__errf(HM_ERANGE, "block %u of %u", i, t->nblocks);
    *out = t->blocks[i];
    return 0;
}

/* A buffer of at least @p need bytes, to be written whole by each block.
 * Sized by the caller for the largest block of the index at once: a buffer
 * grown block by block would take fresh pages, each faulted in on first
 * touch, at every step. */
static int grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    free(*p);
    *p = malloc(need);
    if (!*p) {
        *cap = 0;
        return -ENOMEM;
    }
    *cap = need;
    (void)hm__prefault(*p, need);
    return 0;
}

/* Reads block i, checks it against the index and its checksum, and
 * decompresses its payload into t->raw (followed by HM__RAW_PAD zero bytes). */
static int load_raw(hm_trace_t *t, uint32_t i)
{
    const hm_block_info_t *b = &t->blocks[i];
    unsigned long long boff = (unsigned long long)b->offset;
    size_t clen = b->compressed_bytes, rlen = b->raw_bytes;
    int rc;
    /* The payload is replaced: neither a decoded block nor a batch scan
     * survives. */
    t->decoded = -1;
    t->scanning = 0;
    if (grow(&t->cbuf, &t->ccap, HM__TR_BLOCK_HDR_BYTES + t->max_c) < 0 ||
        grow(&t->raw, &t->rawcap, t->max_raw + HM__RAW_PAD) < 0)
        return hm__errf(-ENOMEM, "block %u at offset %llu", i, boff);
    if ((rc = read_at(t, t->cbuf, HM__TR_BLOCK_HDR_BYTES + clen, b->offset, "block")) < 0)
        return rc;
    const uint8_t *h = t->cbuf;
    uint32_t ns = hm__get_u32(h + 4), nev = hm__get_u32(h + 8);
    if (hm__get_u32(h) != HM__TR_BLOCK_MAGIC || ns != b->samples ||
        (uint64_t)ns + nev != b->records || hm__get_u32(h + 12) != rlen ||
        hm__get_u32(h + 16) != clen || hm__get_u32(h + 20) != 0 ||
        hm__get_u64(h + 24) != b->first_time || hm__get_u64(h + 32) != b->last_time)
        return hm__errf(HM_ECORRUPT, "block %u at offset %llu: header disagrees with the index", i, boff);
    if (CHECKSUMS &&
        hm__hash64(h + HM__TR_BLOCK_HDR_BYTES, clen, hm__hash64(h, 40, 0)) != hm__get_u64(h + 40))
        return hm__errf(HM_ECORRUPT, "block %u at offset %llu: checksum mismatch", i, boff);
    /* The sample count cannot be bounded by the payload: a column whose
     * values are all equal takes no bytes per sample. The index bounds it
     * (HM__TR_MAX_BLOCK_RECORDS), which bounds what the columns allocate. */
    unsigned long long fcs = ZSTD_getFrameContentSize(h + HM__TR_BLOCK_HDR_BYTES, clen);
    if (fcs != rlen)
        return hm__errf(HM_ECORRUPT, "block %u at offset %llu: zstd frame does not declare %zu bytes", i,
                        boff, rlen);
    size_t got = ZSTD_decompressDCtx(t->dctx, t->raw, rlen, h + HM__TR_BLOCK_HDR_BYTES, clen);
    if (ZSTD_isError(got) && ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation)
        return hm__errf(-ENOMEM, "block %u at offset %llu: zstd: %s", i, boff, ZSTD_getErrorName(got));
    if (ZSTD_isError(got))
        return hm__errf(HM_ECORRUPT, "block %u at offset %llu: zstd: %s", i, boff, ZSTD_getErrorName(got));
    if (got != rlen)
        return hm__errf(HM_ECORRUPT, "block %u at offset %llu: decompressed %zu bytes, expected %zu", i,
                        boff, got, rlen);
    memset(t->raw + rlen, 0, HM__RAW_PAD);
    return 0;
}

/* Prefixes a codec error with the block and its offset. */
static int block_err(const hm_trace_t *t, uint32_t i, int rc)
{
    char why[256];
    snprintf(why, sizeof why, "%s", hm_errdetail());
    return hm__errf(rc, "block %u at offset %llu: %s", i, (unsigned long long)t->blocks[i].offset, why);
}

static int load_block(hm_trace_t *t, uint32_t i)
{
    const hm_block_info_t *b = &t->blocks[i];
    int rc = load_raw(t, i);
    if (rc < 0)
        return rc;
    rc = hm__block_decode(&t->cols, t->raw, b->raw_bytes, b->samples, (uint32_t)(b->records - b->samples),
                          b->first_time, b->last_time);
    if (rc < 0)
        return block_err(t, i, rc);
    hm__cols_t *c = &t->cols;
    t->blk = (hm_block_t){b->samples, c->time, c->addr, c->ip, c->tid, c->weight, c->dsrc, c->access,
                          c->nev, c->events};
    t->decoded = i;
    return 0;
}

int hm_trace_batch_begin(hm_trace_t *t, uint32_t i, hm_event_list_t *events)
{
    hm__errclear();
    *events = (hm_event_list_t){0};
    t->scanning = 0;
    if (i >= t->nblocks)
        return hm__errf(HM_ERANGE, "block %u of %u", i, t->nblocks);
    if (!t->scan && !(t->scan = malloc(sizeof *t->scan)))
        return hm__errf(-ENOMEM, "block %u", i);
    if (!t->chunk && !(t->chunk = malloc(sizeof *t->chunk)))
        return hm__errf(-ENOMEM, "block %u", i);
    /* The events and the payload are replaced: no block stays decoded. */
    int rc = load_raw(t, i);
    if (rc < 0)
        return rc;
    const hm_block_info_t *b = &t->blocks[i];
    rc = hm__block_scan_begin(t->scan, &t->cols, t->raw, b->raw_bytes, b->samples,
                              (uint32_t)(b->records - b->samples), b->first_time, b->last_time);
    if (rc < 0)
        return block_err(t, i, rc);
    t->scan_block = i;
    t->scanning = 1;
    *events = (hm_event_list_t){t->cols.nev, t->cols.events, t->cols.evtime};
    return 0;
}

int hm_trace_batch_next(hm_trace_t *t, hm_sample_batch_t *out)
{
    hm__errclear();
    *out = (hm_sample_batch_t){0};
    /* Another block read in between replaced the payload the scan reads. */
    if (!t->scanning)
        return hm__errf(HM_EUSAGE, "no block started with hm_trace_batch_begin()");
    hm__scan_chunk_t *c = t->chunk;
    int rc = hm__block_scan_chunk(t->scan, c);
    if (rc < 0) {
        t->scanning = 0;
        return block_err(t, t->scan_block, rc);
    }
    *out = (hm_sample_batch_t){c->n, c->time, c->addr, c->weight, c->dsrc, c->access};
    return rc;
}

int hm_trace_read_block(hm_trace_t *t, uint32_t i, const hm_block_t **out)
{
    hm__errclear();
    *out = NULL;
    if (i >= t->nblocks)
        return hm__errf(HM_ERANGE, "block %u of %u", i, t->nblocks);
    if (t->decoded != (int64_t)i) {
        int rc = load_block(t, i);
        if (rc < 0)
            return rc;
    }
    *out = &t->blk;
    return 0;
}

int hm_trace_seek_block(hm_trace_t *t, uint32_t i)
{
    hm__errclear();
    if (i > t->nblocks)
        return hm__errf(HM_ERANGE, "block %u of %u", i, t->nblocks);
    t->it_block = i;
    t->it_loaded = 0;
    return 0;
}

int hm_trace_next(hm_trace_t *t, hm_record_t *rec)
{
    hm__errclear();
    for (;;) {
        if (t->it_block >= t->nblocks)
            return 0;
        if (t->decoded != (int64_t)t->it_block) {
            /* Either a new block, or hm_trace_read_block() replaced the
             * decoded one in between: decoding is deterministic, so the
             * positions stay valid. */
            int rc = load_block(t, t->it_block);
            if (rc < 0)
                return rc;
        }
        if (!t->it_loaded) {
            t->si = t->ei = 0;
            t->it_loaded = 1;
        }
        const hm__cols_t *c = &t->cols;
        const hm_block_t *b = &t->blk;
        /* Equal times: events first, so an allocation precedes the samples
         * that touch it. */
        if (t->ei < c->nev && (t->si >= b->n || c->evtime[t->ei] <= b->time[t->si])) {
            *rec = c->events[t->ei++];
            return 1;
        }
        if (t->si < b->n) {
            uint32_t k = t->si++;
            rec->kind = HM_REC_SAMPLE;
            rec->u.sample = (hm_sample_t){b->time[k], b->addr[k], b->ip[k], b->tid[k],
                                          b->weight[k], b->dsrc[k], b->access[k]};
            return 1;
        }
        t->it_block++;
        t->it_loaded = 0;
    }
}
