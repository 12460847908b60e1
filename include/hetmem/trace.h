/**
 * @file trace.h
 * @brief hetmem trace format v1: streaming writer and block reader.
 *
 * A trace holds one run of one program: a header (JSON metadata), then
 * zstd-compressed blocks of time-ordered records, then a block index and an
 * end record. See docs/trace-format.md for the byte layout.
 *
 * Writers and readers are not thread-safe: use one handle per thread.
 * All times are in the trace's clock units (meta.clock_ns_per_unit converts
 * to nanoseconds; 1 for every producer today).
 */
#ifndef HETMEM_TRACE_H
#define HETMEM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HM_TRACE_VERSION 1

/** Record kinds. */
typedef enum {
    HM_REC_SAMPLE = 1,      /**< a sampled memory access */
    HM_REC_ALLOC = 2,       /**< an allocation (malloc family, mmap) */
    HM_REC_FREE = 3,        /**< a free of a recorded allocation */
    HM_REC_PHASE_BEGIN = 4, /**< hetmem_phase_begin() */
    HM_REC_PHASE_END = 5,   /**< hetmem_phase_end() */
    HM_REC_COUNTER = 6,     /**< a running counter value (e.g. instructions) */
    HM_REC_SITE = 7,        /**< site id -> symbolized frames */
    HM_REC_NAME = 8,        /**< hetmem_name(): names the allocation holding addr */
} hm_rec_kind_t;

/** Access kinds of a sample. */
enum { HM_ACCESS_LOAD = 0, HM_ACCESS_STORE = 1 };

/**
 * Data source of a sample: which level served it. Memory sources carry the
 * device index (machine "devices" order in the simulator; NUMA node on
 * hardware) in the upper byte: HM_DSRC_MEM | (dev << 8).
 */
enum {
    HM_DSRC_UNKNOWN = 0,
    HM_DSRC_L1 = 1,
    HM_DSRC_L2 = 2,
    HM_DSRC_L3 = 3,
    HM_DSRC_LFB = 4,   /**< line fill buffer: a miss already in flight */
    HM_DSRC_MEM = 5,   /**< memory device; device index in bits 8..15 */
    HM_DSRC_REMOTE = 6 /**< remote cache or other socket */
};
#define HM_DSRC_LEVEL(d) ((d) & 0xff)
#define HM_DSRC_DEVICE(d) (((d) >> 8) & 0xff)
#define HM_DSRC_MAKE_MEM(dev) ((uint16_t)(HM_DSRC_MEM | ((unsigned)(dev) << 8)))

/** Counter ids for HM_REC_COUNTER. */
enum { HM_COUNTER_INSTRUCTIONS = 1, HM_COUNTER_CYCLES = 2 };

typedef struct {
    uint64_t time;
    uint64_t addr;     /**< data virtual address */
    uint64_t ip;       /**< instruction pointer (0 when unknown) */
    uint32_t tid;
    uint32_t weight;   /**< access latency in core cycles; 0 = unknown */
    uint16_t dsrc;     /**< HM_DSRC_* */
    uint8_t access;    /**< HM_ACCESS_LOAD or HM_ACCESS_STORE */
} hm_sample_t;

typedef struct {
    uint64_t time;
    uint64_t addr;
    uint64_t size;     /**< bytes (0 for HM_REC_FREE) */
    uint64_t site;     /**< call-site id: stable across runs and ASLR */
    uint32_t tid;
} hm_alloc_t;

typedef struct {
    uint64_t time;
    uint32_t id;       /**< phase id: equal names have equal ids in one trace */
    uint32_t tid;
    const char *name;  /**< NUL-terminated; owned by the trace handle */
} hm_phase_t;

typedef struct {
    uint64_t time;
    uint64_t value;
    uint32_t counter;  /**< HM_COUNTER_* */
    uint32_t tid;
} hm_counter_t;

typedef struct {
    uint64_t site;
    const char *frames; /**< "module+0xoff symbol" lines joined by '\n'; owned by the handle */
} hm_site_t;

typedef struct {
    uint64_t time;
    uint64_t addr;
    const char *name;   /**< owned by the handle */
} hm_name_t;

/** One record of any kind. Strings point into the handle's storage and stay
 *  valid until the next call on the handle. */
typedef struct {
    hm_rec_kind_t kind;
    union {
        hm_sample_t sample;
        hm_alloc_t alloc; /**< HM_REC_ALLOC and HM_REC_FREE */
        hm_phase_t phase; /**< HM_REC_PHASE_BEGIN and HM_REC_PHASE_END */
        hm_counter_t counter;
        hm_site_t site;
        hm_name_t name;
    } u;
} hm_record_t;

/** The largest sampling period a trace holds: the header keeps it as a JSON
 *  integer, which is signed 64-bit. */
#define HM_TRACE_PERIOD_MAX ((uint64_t)INT64_MAX)

/** Run metadata, stored as the JSON header. Strings are copied by the writer;
 *  in a reader's hm_trace_meta() they are owned by the handle. */
typedef struct {
    const char *producer;      /**< "hetmem-sim 0.1.0", "hetmem-record 0.1.0" */
    const char *clock;         /**< "sim", "CLOCK_MONOTONIC", "perf" */
    double clock_ns_per_unit;  /**< 1.0 for nanoseconds */
    const char *backend;       /**< "sim", "pebs", "ibs", "spe", "soft" */
    const char *event;         /**< sampled event, e.g. "mem-loads:ldlat=30" */
    uint64_t period;           /**< sampling period (events per sample), at most HM_TRACE_PERIOD_MAX */
    const char *device;        /**< device the data was bound to, or NULL */
    const char *machine_json;  /**< machine description (JSON text), or NULL */
    const char *const *argv;   /**< command line, NULL-terminated, or NULL */
    const char *host_json;     /**< identity of the recording machine (JSON object text:
                                    docs/trace-format.md, "host"), or NULL */
    uint64_t min_size;         /**< smallest allocation tracked, in bytes (--min-size); 0: not said */
} hm_trace_meta_t;

/** End-of-run record. */
typedef struct {
    uint64_t total_time;       /**< run time in clock units */
    int exit_status;           /**< wait(2)-style status of the traced program */
} hm_trace_end_t;

/* ---------------------------------------------------------------- writer */

typedef struct hm_trace_writer hm_trace_writer_t;

/**
 * Creates @p path (truncating) and writes the header.
 * @return 0, or -errno / HM_E* (HM_ERANGE: a period over HM_TRACE_PERIOD_MAX,
 *         and nothing is created). On success *out is owned by the caller and
 *         must be passed to hm_trace_writer_close().
 */
int hm_trace_writer_open(hm_trace_writer_t **out, const char *path, const hm_trace_meta_t *meta);

/**
 * Sets the number of records per block (default 65536, allowed 1..262144).
 * Smaller blocks give finer random access and less memory, larger ones
 * compress slightly better. Must be called before the first record.
 * @return 0, HM_ERANGE or HM_EUSAGE.
 */
int hm_trace_writer_set_block_records(hm_trace_writer_t *w, uint32_t records);

/**
 * Appends records. Records need only be roughly time-ordered: each block is
 * sorted by time before it is written; a record older than the last flushed
 * block is clamped to that block's end time and counted as reordered.
 * Memory use is bounded by one block whatever the trace size.
 * @return 0 or a negative error (I/O failure; the writer is then unusable).
 */
int hm_trace_write_sample(hm_trace_writer_t *w, const hm_sample_t *s);
int hm_trace_write_alloc(hm_trace_writer_t *w, const hm_alloc_t *a);
int hm_trace_write_free(hm_trace_writer_t *w, uint64_t time, uint64_t addr, uint32_t tid);
int hm_trace_write_phase(hm_trace_writer_t *w, int begin, uint64_t time, uint32_t tid, const char *name);
int hm_trace_write_counter(hm_trace_writer_t *w, const hm_counter_t *c);
int hm_trace_write_site(hm_trace_writer_t *w, uint64_t site, const char *frames);
int hm_trace_write_name(hm_trace_writer_t *w, uint64_t time, uint64_t addr, const char *name);

/**
 * Flushes, writes the block index and the end record, closes the file and
 * frees @p w. With @p end NULL the trace is closed without an end record
 * (readers then report it as truncated). Always frees @p w.
 */
int hm_trace_writer_close(hm_trace_writer_t *w, const hm_trace_end_t *end);

/* ---------------------------------------------------------------- reader */

typedef struct hm_trace hm_trace_t;

/** Per-kind counts and totals, from the index (no block is decompressed). */
typedef struct {
    uint64_t records[9];       /**< indexed by hm_rec_kind_t */
    uint64_t loads, stores;
    uint64_t first_time, last_time;
    uint64_t reordered;        /**< records clamped by the writer */
    uint32_t blocks;
    int has_end;
    hm_trace_end_t end;
    uint64_t file_bytes;
} hm_trace_stats_t;

/** Block index entry. */
typedef struct {
    uint64_t offset;           /**< file offset of the block header */
    uint64_t first_time, last_time;
    uint32_t records;
    uint32_t samples;
    uint32_t compressed_bytes, raw_bytes;
} hm_block_info_t;

/**
 * Opens and validates a trace: magic, version, header, index and end record.
 * Blocks are checked when read. Errors: HM_EBADTRACE (magic), HM_EVERSION,
 * HM_ETRUNC (empty, cut short, or no valid end/index), HM_ECORRUPT,
 * HM_ETOOBIG, HM_ERANGE (a header value out of range: a negative period,
 * clock_ns_per_unit outside [1e-3, 1e6], a device figure not above 0),
 * -errno; the detail (hm_errdetail()) names the offset and block, or the
 * header key, not the path, which the caller knows.
 * @return 0 and *out owned by the caller (hm_trace_close()).
 */
int hm_trace_open(hm_trace_t **out, const char *path);
void hm_trace_close(hm_trace_t *t);

const hm_trace_meta_t *hm_trace_meta(const hm_trace_t *t);
/** The header as JSON text (owned by the handle). */
const char *hm_trace_header_json(const hm_trace_t *t);
void hm_trace_stats(const hm_trace_t *t, hm_trace_stats_t *out);
uint32_t hm_trace_nblocks(const hm_trace_t *t);
int hm_trace_block_info(const hm_trace_t *t, uint32_t i, hm_block_info_t *out);

/**
 * Iterates all records in time order. At equal times a block's non-sample
 * records come before its samples; otherwise records of equal time keep
 * their writing order (samples among samples, the others among themselves).
 * @return 1 with *rec filled, 0 at the end, or a negative error (the detail
 *         names the block and offset).
 */
int hm_trace_next(hm_trace_t *t, hm_record_t *rec);
/** Positions hm_trace_next() at the start of block @p i (random access). */
int hm_trace_seek_block(hm_trace_t *t, uint32_t i);

/**
 * Batch access for hot loops: decodes block @p i into column arrays owned by
 * the handle, valid until the next call on the handle. Samples are in time
 * order; non-sample records of the block are in @p events (time order).
 */
typedef struct {
    uint32_t n;                /**< samples */
    const uint64_t *time, *addr, *ip;
    const uint32_t *tid, *weight;
    const uint16_t *dsrc;
    const uint8_t *access;
    uint32_t nevents;
    const hm_record_t *events;
} hm_block_t;
int hm_trace_read_block(hm_trace_t *t, uint32_t i, const hm_block_t **out);

/**
 * Sample batches: the fastest way through a trace for consumers that need
 * only each sample's time, address, weight, data source and access kind
 * (the estimator's summary building, `hetmem trace objects`). A block's
 * samples are decoded a batch of at most HM_TRACE_BATCH at a time into
 * columns that stay in the first-level cache while the caller reads them;
 * instruction pointers and thread ids are never decoded. Blocks are still
 * checked against the index and their checksums.
 *
 * Use: hm_trace_batch_begin() on block i, then hm_trace_batch_next() until
 * it returns 0; merge the block's events (non-sample records) with the
 * samples by time, events first at equal times, as hm_trace_next() does.
 */
#define HM_TRACE_BATCH 1024

/** A block's non-sample records in time order, owned by the handle. */
typedef struct {
    uint32_t n;
    const hm_record_t *rec;
    const uint64_t *time;      /**< time of each record (an HM_REC_SITE has none of its own) */
} hm_event_list_t;

/** Up to HM_TRACE_BATCH consecutive samples of a block, in time order, as
 *  columns owned by the handle. */
typedef struct {
    uint32_t n;
    const uint64_t *time, *addr;
    const uint32_t *weight;
    const uint16_t *dsrc;
    const uint8_t *access;
} hm_sample_batch_t;

/**
 * Starts reading block @p i a batch at a time: reads, checks and
 * decompresses it and fills @p events (valid until the next call on @p t
 * that reads another block). A block held by hm_trace_read_block() or
 * hm_trace_next() is dropped; they decode it again when next called.
 * @return 0, HM_ERANGE (no such block), -ENOMEM, or a trace error
 *         (HM_ECORRUPT...) with a detail naming the block and offset.
 */
int hm_trace_batch_begin(hm_trace_t *t, uint32_t i, hm_event_list_t *events);

/**
 * Decodes the next samples of the block hm_trace_batch_begin() started
 * into @p out, whose columns stay valid until the next call on @p t.
 * @return the number of samples (1..HM_TRACE_BATCH), 0 once the block's
 *         samples are done, or a negative error (HM_EUSAGE when no block
 *         was started or its reading failed, HM_ECORRUPT...).
 */
int hm_trace_batch_next(hm_trace_t *t, hm_sample_batch_t *out);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_TRACE_H */
