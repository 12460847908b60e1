/**
 * @file record.h
 * @brief Recording on real hardware: sampling backends and the perf
 *        ring-buffer decoder.
 *
 * The decoder is a pure function over the bytes of a perf_event_open(2)
 * ring buffer's data area, so it is tested on crafted buffers and shared by
 * every perf-based backend (PEBS, IBS, SPE). See docs/record.md.
 */
#ifndef HETMEM_RECORD_H
#define HETMEM_RECORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Sampling backends, in the order `auto` prefers them. */
typedef enum {
    HM_BACKEND_PEBS = 0, /**< Intel PEBS: load latency + precise stores */
    HM_BACKEND_IBS = 1,  /**< AMD IBS op sampling (ibs_op PMU) */
    HM_BACKEND_SPE = 2,  /**< Arm SPE (arm_spe PMU) */
    HM_BACKEND_SOFT = 3, /**< timer interrupt + instruction decoding, no PMU */
    HM_BACKEND_COUNT
} hm_backend_t;

/** "pebs", "ibs", "spe", "soft". Static storage. */
const char *hm_backend_name(hm_backend_t b);
/** Parses a backend name; returns HM_EUSAGE for an unknown one. "auto" is
 *  not a backend: callers resolve it with hm_backend_probe(). */
int hm_backend_parse(const char *name, hm_backend_t *out);

/**
 * Whether backend @p b can run here. Returns 0 when usable, else a negative
 * code (HM_ENOPMU, -EACCES...) with @p why and @p remedy filled (one line each).
 * With @p try_open non-zero, really opens and closes the event (cheap).
 */
int hm_backend_probe(hm_backend_t b, int try_open, char *why, size_t whylen, char *remedy, size_t remlen);

/** One decoded PERF_RECORD_SAMPLE. Fields absent from sample_type are 0. */
typedef struct {
    uint64_t ip, time, addr, id, period, phys_addr, data_src, weight;
    uint32_t pid, tid, cpu;
    uint32_t raw_size;         /**< PERF_SAMPLE_RAW payload size */
    const uint8_t *raw;        /**< points into the ring or scratch; valid during the callback */
} hm_perf_sample_t;

/** Counts kept by the decoder; cumulative across calls. */
typedef struct {
    uint64_t samples;          /**< PERF_RECORD_SAMPLE decoded */
    uint64_t lost_records;     /**< PERF_RECORD_LOST records seen */
    uint64_t lost;             /**< samples lost (sum of LOST and LOST_SAMPLES counts) */
    uint64_t throttle, unthrottle;
    uint64_t other;            /**< records of other types, skipped */
    uint64_t wrapped;          /**< records copied to scratch because they wrapped */
    uint64_t bad;              /**< garbage/truncated records; the rest of the chunk is dropped */
} hm_perf_ring_stats_t;

typedef void (*hm_perf_sample_cb)(void *ctx, const hm_perf_sample_t *s);

/**
 * Decodes the records in the ring data area between @p tail and @p head
 * (free-running byte counters as in struct perf_event_mmap_page; the data
 * area has @p size bytes, a power of two). Records that wrap around the end
 * are copied to @p scratch (at least as large as the largest record, 64 KiB
 * covers every record the kernel can emit).
 *
 * Pure: reads only its arguments, calls @p cb for each sample.
 * @param sample_type  the PERF_SAMPLE_* bits the event was opened with;
 *                     bits the decoder cannot lay out give HM_EUSAGE.
 * @return the new tail (always <= head) through *new_tail, and 0, or
 *         HM_ECORRUPT when a record had an impossible size (the tail then
 *         skips to head and stats->bad counts it) or HM_ETRUNC when the
 *         last record is incomplete (the tail stops before it).
 */
int hm_perf_ring_decode(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head,
                        uint64_t sample_type, uint8_t *scratch, size_t scratch_len,
                        hm_perf_sample_cb cb, void *ctx, hm_perf_ring_stats_t *stats,
                        uint64_t *new_tail);

/** Whether hm_perf_ring_decode() can lay out samples of @p sample_type. */
int hm_perf_sample_type_ok(uint64_t sample_type);

/**
 * Maps a perf_mem_data_src value to HM_DSRC_* (trace.h) and an access kind
 * (HM_ACCESS_LOAD/STORE, or -1 when the sample says neither). Memory hits get
 * @p mem_device as the device index.
 */
uint16_t hm_perf_dsrc(uint64_t data_src, int mem_device, int *access);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_RECORD_H */
