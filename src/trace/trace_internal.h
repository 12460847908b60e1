/* Trace format v1: on-disk constants and the block codec shared by the
 * writer and the reader. docs/trace-format.md is the normative description;
 * keep the two in step. All integers on disk are little-endian. */
#ifndef HETMEM_TRACE_INTERNAL_H
#define HETMEM_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/common.h"
#include "hetmem/trace.h"

#define HM__TR_MAGIC "HMTRACE\0"          /* 8 bytes, file start */
#define HM__TR_TRAILER_MAGIC "HMTREND\0"  /* 8 bytes, file end */
#define HM__TR_BLOCK_MAGIC 0x4b424d48u    /* "HMBK" */
#define HM__TR_INDEX_MAGIC 0x58494d48u    /* "HMIX" */
#define HM__TR_END_MAGIC 0x4e454d48u      /* "HMEN" */

#define HM__TR_PREAMBLE_BYTES 24
#define HM__TR_BLOCK_HDR_BYTES 48
#define HM__TR_INDEX_ENTRY_BYTES 40
#define HM__TR_END_BYTES 128
#define HM__TR_TRAILER_BYTES 32

/* Preamble flags: the low 16 bits name features a reader must understand
 * (unknown ones -> HM_EVERSION); the high 16 bits are advisory. v1 defines
 * none. */
#define HM__TR_FLAGS_REQUIRED_MASK 0x0000ffffu

/* Bounds every reader applies before trusting a length from the file. The
 * writer stays well inside them (see writer.c). */
#define HM__TR_MAX_HEADER (16u << 20)
#define HM__TR_MAX_BLOCK_RECORDS (1u << 20)
#define HM__TR_MAX_RAW (64u << 20)
#define HM__TR_MAX_STRING (1u << 20)
#define HM__TR_MAX_BLOCKS (1u << 26)

/* Writer: default records per block, and its allowed range. */
#define HM__TR_WRITER_MAX_RECORDS (1u << 18)
/* Writer flushes a block once its strings reach this many bytes. */
#define HM__TR_WRITER_STR_FLUSH (4u << 20)

/* Sample columns, in payload order. Every column but the address
 * exceptions is an integer column (see codec.c). */
enum { HM__COL_TIME, HM__COL_ADDR_CODE, HM__COL_ADDR_RES, HM__COL_ADDR_EXC, HM__COL_IP,
       HM__COL_TID, HM__COL_WEIGHT, HM__COL_DSRC, HM__COL_ACCESS, HM__NCOLS };

/* Address predictor: HM__ADDR_SLOTS recent (address, stride) pairs. A code
 * is mode << 4 | slot. */
#define HM__ADDR_SLOTS 16
enum {
    HM__ADDR_NEAR = 0,   /* last[slot] + residual, stored back into slot */
    HM__ADDR_STRIDE = 1, /* last[slot] + stride[slot] + residual, into slot */
    HM__ADDR_FAR = 2,    /* last[slot] + residual, into the CLOCK victim slot */
    HM__ADDR_ABS = 3,    /* next exception value, into the CLOCK victim slot */
};
/* Zigzag residual limits of the encoder's choices (not format rules). */
#define HM__ADDR_NEAR_MAX (UINT64_C(1) << 21)
#define HM__ADDR_FAR_MAX (UINT64_C(1) << 41)

/* Bytes of zero padding after a decoded payload so the varint reader can run
 * a few varints (at most 10 bytes each) past a section's end before the
 * bounds check notices. */
#define HM__RAW_PAD 64

static inline void hm__put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void hm__put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t hm__get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t hm__get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static inline uint64_t hm__zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t hm__unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline uint8_t *hm__put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads one LEB128 value of at most 10 bytes. The caller guarantees 10
 * readable bytes at *pp (payload padding) and checks *pp against the
 * section's end afterwards. */
static inline uint64_t hm__get_varint(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    uint64_t v = *p++;
    if (HM_LIKELY(v < 0x80)) {
        *pp = p;
        return v;
    }
    v &= 0x7f;
    for (unsigned sh = 7; sh < 64; sh += 7) {
        uint64_t b = *p++;
        v |= (b & 0x7f) << sh;
        if (b < 0x80)
            break;
    }
    *pp = p;
    return v;
}

/* Growable byte buffer for the encoder. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} hm__buf_t;

void hm__buf_reserve(hm__buf_t *b, size_t extra);
void hm__buf_free(hm__buf_t *b);

/* An event (non-sample record) as the writer buffers it. */
typedef struct {
    uint64_t time;
    uint64_t a, b, c;  /* addr/size/site, id, counter value... per kind */
    uint32_t tid;
    uint32_t seq;      /* arrival order, for a stable sort */
    uint32_t str_off, str_len;
    uint8_t kind;
} hm__wevent_t;

/* Encodes one block's payload (before compression) into out (appended).
 * Samples and events must be sorted by time, all >= base_time. scratch
 * holds 4 * ns values, reused across blocks to spare the allocator. */
void hm__block_encode(hm__buf_t *out, const hm_sample_t *s, uint32_t ns,
                      const hm__wevent_t *ev, uint32_t nev, const char *strings,
                      uint64_t base_time, uint64_t *scratch);

/* Decoded block storage (reader side), reused from block to block. */
typedef struct {
    uint32_t cap;                 /* sample capacity of the columns */
    uint64_t *time, *addr, *ip;
    uint32_t *tid, *weight;
    uint16_t *dsrc;
    uint8_t *access;
    uint64_t *scratch;            /* per-sample scratch for the decoder */
    uint8_t *codes;
    uint32_t evcap, nev;          /* nev: events decoded (unknown kinds skipped) */
    hm_record_t *events;
    uint64_t *evtime;             /* time of each event (sites have none in hm_site_t) */
    char *arena;                  /* NUL-terminated strings of events */
    size_t arena_cap;
} hm__cols_t;

void hm__cols_free(hm__cols_t *c);

/* Decodes a payload of raw_len bytes (followed by HM__RAW_PAD readable
 * bytes) holding ns samples and nev events with times in [first, last].
 * Returns 0 or HM_ECORRUPT with a detail naming the section (the caller
 * prefixes block and offset). */
int hm__block_decode(hm__cols_t *c, const uint8_t *raw, size_t raw_len, uint32_t ns,
                     uint32_t nev, uint64_t first, uint64_t last);


/* An integer column as read from the payload (header checked). */
typedef struct {
    unsigned w, sh;
    uint64_t base;
    uint32_t npatch;
    const uint8_t *planes, *patch, *patch_end;
} hm__icol_t;

/* Next patch of a column: its index and where its value is. */
typedef struct {
    const uint8_t *p;
    uint32_t left;
    uint64_t idx;
} hm__pcur_t;

/* The address predictor's state while a block's samples are replayed. */
typedef struct {
    uint64_t last_a[HM__ADDR_SLOTS], stride[HM__ADDR_SLOTS], slot_ip[HM__ADDR_SLOTS];
    uint8_t ref[HM__ADDR_SLOTS];
    unsigned hand;
    const uint8_t *q;             /* next address exception */
} hm__addr_state_t;

/* Samples decoded a chunk at a time, small enough to stay in the first-level
 * cache while the caller reads them. */
#define HM__SCAN_CHUNK HM_TRACE_BATCH
typedef struct {
    uint32_t n;
    uint64_t time[HM__SCAN_CHUNK], addr[HM__SCAN_CHUNK];
    uint32_t weight[HM__SCAN_CHUNK];
    uint16_t dsrc[HM__SCAN_CHUNK];
    uint8_t access[HM__SCAN_CHUNK];
} hm__scan_chunk_t;

/* A block's samples being scanned: the columns a scan decodes (time,
 * address code, residual, weight, data source, access), their patch
 * cursors, and the carried state. Instruction pointers and thread ids are
 * not decoded. */
typedef struct {
    uint32_t ns, next;
    uint64_t cur, last;           /* time of the last sample decoded; the block's last time */
    hm__icol_t col[6];
    hm__pcur_t pc[6];
    const uint8_t *exc_end;
    unsigned ash;
    hm__addr_state_t st;
    uint8_t code[HM__SCAN_CHUNK];
    uint64_t scratch[HM__SCAN_CHUNK];
} hm__scan_t;

/* Starts a scan of a payload (as hm__block_decode() takes it): checks every
 * column header and decodes the events into c (c->nev, c->events,
 * c->evtime). 0 or HM_ECORRUPT. */
int hm__block_scan_begin(hm__scan_t *s, hm__cols_t *c, const uint8_t *raw, size_t raw_len, uint32_t ns,
                         uint32_t nev, uint64_t first, uint64_t last);
/* Decodes the next samples (at most HM__SCAN_CHUNK) into o: their count, 0
 * at the block's end, or HM_ECORRUPT. The payload must stay in place. */
int hm__block_scan_chunk(hm__scan_t *s, hm__scan_chunk_t *o);

#endif
