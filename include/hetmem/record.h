/**
 * @file record.h
 * @brief Recording on real hardware: sampling backends, the perf
 *        ring-buffer decoder, and recording a command into a trace
 *        (hm_recorder_open(), as `hetmem record` does).
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
    uint64_t aux_records;      /**< PERF_RECORD_AUX records (AUX-area events such as Arm SPE) */
    uint64_t aux_bytes;        /**< sum of their aux_size */
    uint64_t aux_truncated;    /**< ... with PERF_AUX_FLAG_TRUNCATED: the AUX area was full, data lost */
    uint64_t aux_collision;    /**< ... with PERF_AUX_FLAG_COLLISION: samples overwritten by the hardware */
    uint64_t aux_partial;      /**< ... with PERF_AUX_FLAG_PARTIAL */
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

/**
 * Conversion of Arm SPE timestamp packets (generic-timer counts) to
 * nanoseconds, from the perf_event_mmap_page fields time_zero, time_mult and
 * time_shift (valid when cap_user_time_zero is set), as perf_event_open(2)
 * describes: ns = time_zero + (cyc >> shift) * mult + (((cyc & mask) * mult) >> shift).
 * offset_ns is then added (perf clock to CLOCK_MONOTONIC). With valid = 0
 * the raw counter value is passed through.
 */
typedef struct {
    uint64_t time_zero;
    uint32_t time_mult;
    uint16_t time_shift;
    int valid;
    int64_t offset_ns;
} hm_spe_clock_t;

/** Counts kept by hm_spe_decode(); cumulative across calls. */
typedef struct {
    uint64_t records;          /**< records passed to the callback */
    uint64_t packets;          /**< packets decoded (padding included) */
    uint64_t padding;          /**< padding bytes */
    uint64_t no_addr;          /**< records without a data virtual address */
    uint64_t bad_packets;      /**< unknown or malformed headers */
    uint64_t bad_records;      /**< records dropped because they held a bad packet */
} hm_spe_stats_t;

/** Options of hm_spe_decode(). */
typedef struct {
    /** The data-source packet uses the Arm Neoverse encoding (N1, N2, V1, V2:
     *  0 L1D, 8 L2, 9 peer core, 10 local cluster, 11 system cache, 12 peer
     *  cluster, 13 remote, 14 DRAM). The packet is IMPLEMENTATION DEFINED,
     *  so with 0 only the events packet gives the level. */
    int neoverse_dsrc;
    uint32_t pid, tid;         /**< put in every sample (the context packet, if any, overrides tid) */
} hm_spe_opts_t;

/**
 * Decodes Arm SPE packets (Arm ARM, "Statistical Profiling Extension",
 * packet formats) from buf[0..len) into samples, one per record. A record
 * is the packets up to and including an End or Timestamp packet.
 *
 * Each sample has ip = PC (instruction address packet), addr = data virtual
 * address, phys_addr, time (timestamp packet through @p clk), weight = total
 * latency counter, and data_src in the perf_mem_data_src encoding (load or
 * store from the operation-type packet; level from the data-source packet
 * or the events packet: L1 hit, LLC access/miss, remote), so that
 * hm_perf_dsrc() maps it like a PEBS sample.
 *
 * Pure: no I/O, no allocation. A record holding an unknown header is
 * dropped whole (the decoder skips the byte and drops everything up to the
 * record's end). *consumed is set to the end of the last complete record:
 * a record cut at the end of the buffer is left for the next call.
 * Returns 0, or HM_EUSAGE for NULL arguments.
 */
int hm_spe_decode(const uint8_t *buf, size_t len, const hm_spe_clock_t *clk, const hm_spe_opts_t *opts,
                  hm_perf_sample_cb cb, void *ctx, hm_spe_stats_t *stats, size_t *consumed);

/** Converts an SPE timestamp (counter value) with @p clk; see hm_spe_clock_t. */
uint64_t hm_spe_time(const hm_spe_clock_t *clk, uint64_t cyc);

/** First usable backend in preference order (pebs, ibs, spe, soft): 0
 *  with *out set, or HM_ENOPMU. With @p try_open, really opens each event. */
int hm_backend_auto(int try_open, hm_backend_t *out);

/* ------------------------------------------------------------ recording */

/** Fastest soft sampling: every 50 us (20 kHz). Each sample costs the
 *  thread a signal and the collector a decode, about 8 us in all on a
 *  2-core x86-64; faster rates starved programs on a busy machine. */
#define HM_RECORD_MIN_INTERVAL_NS 50000u

/** Flags of a placement event (hm_record_placement_t). */
enum {
    HM_PLACED_SPILLED = 1, /**< did not fit its device: placed on the placement's default */
    HM_PLACED_MOVED = 2,   /**< moved at a phase change */
    HM_PLACED_PHASE = 4,   /**< placed by a phase's rules */
    HM_PLACED_UNBOUND = 8, /**< left to first touch */
    HM_PLACED_GLOBAL = 16, /**< a global array, not an allocation */
    HM_PLACED_FAILED = 32  /**< the kernel refused the bind (mbind): the pages keep the policy they had, and
                                @c device is NULL; hetmem run exits 1 */
};

/** One object placed by a placement run (hm_record_opts_t.placement), as
 *  a runtime applied it. The strings live until the callback returns. */
typedef struct {
    uint64_t addr, size;
    uint64_t site;         /**< allocation site id */
    uint64_t bound_bytes;  /**< bytes bound to the device */
    const char *name;      /**< the object's hetmem_name(), or NULL */
    const char *phase;     /**< the phase whose rules placed it, or NULL */
    const char *requested; /**< the device the placement asked for ("-": none) */
    const char *device;    /**< the device it got, or NULL (unbound) */
    unsigned flags;        /**< HM_PLACED_* */
    uint64_t nodes;        /**< NUMA nodes of @c device, bit N for node N (0: none) */
    const char *source;    /**< the site's source chain ("file:line <- ..."), or NULL */
} hm_record_placement_t;

/** A placement device's use over a placement run (hm_recorder_device()). */
typedef struct {
    const char *name;      /**< owned by the recorder */
    uint64_t capacity;     /**< bytes the runtime let the placement put there */
    uint64_t peak;         /**< the largest peak of one process */
    uint64_t at_exit;      /**< bytes all processes left charged at exit */
    int processes;         /**< processes that ran the placement */
    uint64_t nodes;        /**< its NUMA nodes, bit N for node N */
} hm_record_device_t;

/**
 * What to record (hm_recorder_open()). Zero-initialise and set what you
 * need; 0 and NULL take the defaults. Strings are copied.
 *
 * Two kinds of run: a recording (@c output set: samples and allocations
 * into a trace, as `hetmem record`), or a placement run (@c placement set,
 * @c output NULL: the command's objects bound to devices per a placement
 * file, each placement reported to @c on_placement, nothing sampled or
 * traced, as `hetmem run`). Of the options below, a placement run takes
 * min_size, preload, on_message and its own three (the others are refused
 * with HM_EUSAGE, as capacity and on_placement are for a recording).
 */
typedef struct {
    const char *output;    /**< the trace file to write (a recording) */
    const char *backend;   /**< "auto" (NULL), "pebs", "ibs", "spe", "soft", "none" (allocations only), or
                                "perf-sw" (the perf path with a software clock event: a check) */
    uint64_t period;       /**< pebs, ibs, spe: events per sample (default 4000); soft and perf-sw:
                                nanoseconds between samples (default 1 ms, at least
                                HM_RECORD_MIN_INTERVAL_NS); 0 with "none" */
    const char *bind;      /**< bind all data to a device (NUMA node, tierN or kind, as `hetmem doctor`
                                lists them), or NULL */
    const char *machine;   /**< device figures for the trace header: a machine preset or JSON file, or
                                NULL for the kernel's HMAT figures */
    uint64_t min_size;     /**< track allocations of at least this many bytes (default 64 KiB) */
    unsigned depth;        /**< links of the call chain in a site id, 1..16 (0: HM_SITE_DEPTH, 4, the depth hetmem sim and hetmem run use; another depth gives ids only a recording or run with that depth gives) */
    int per_cpu;           /**< pebs, ibs, perf-sw: one event and ring per CPU, opened by the recorder
                                (needs perf_event_paranoid <= 0 or CAP_PERFMON) */
    const char *preload;   /**< libhetmem_preload.so to inject, or NULL: next to the running program
                                (../lib or its folder) or $HETMEM_PRELOAD */
    /** Called with each message of the runtimes in the recorded processes
     *  ("runtime: ..."), from hm_recorder_run(); NULL: not reported. */
    void (*on_message)(void *ctx, const char *msg);
    void *ctx;             /**< passed to on_message and on_placement */
    const char *placement; /**< a placement file (docs/placement-format.md): a placement run */
    const char *capacity;  /**< placement run: "DEV=BYTES,..." capacities of its devices, or NULL: each
                                device's nodes' memory */
    /** Placement run: called with each object placed, in time order, from
     *  hm_recorder_run(); NULL: counted only. */
    void (*on_placement)(void *ctx, const hm_record_placement_t *p);
} hm_record_opts_t;

/** What a recording gave (hm_recorder_run()). */
typedef struct {
    int status;                /**< wait(2) status of the command */
    uint64_t wall_ns;          /**< its run time */
    uint64_t samples;          /**< samples written to the trace */
    uint64_t samples_with_addr;/**< ... of which with a data address */
    uint64_t taken, lost;      /**< samples the samplers took, and lost (ring overflow, throttling) */
    uint64_t unresolved;       /**< soft samples whose address could not be decoded */
    uint64_t allocs, frees, sites, phases, names;
    uint64_t processes;        /**< processes that loaded the runtime */
    uint64_t runtime_errors;   /**< messages the runtimes reported (each passed to on_message) */
    uint64_t unwritten;        /**< records the runtimes did not write, their spools past HETMEM_SPOOL_MAX:
                                    the trace lacks them */
    int spool_limit_reached;   /**< processes whose spool reached HETMEM_SPOOL_MAX: the trace is
                                    incomplete when this is not 0 */
    int spool_limit_uncounted; /**< ... of which ended (killed?) before counting the records they did
                                    not write: @c unwritten leaves theirs out */
    int spools, spools_truncated; /**< per-process spools read, and those cut short (a process killed
                                       while writing; what was complete is kept) */
    uint64_t percpu_kept, percpu_foreign; /**< per_cpu: samples kept, and of other processes dropped */
    char soft_stats[160];      /**< the soft sampler's own counts, as one line ("" if none) */
    uint64_t placements;       /**< placement run: objects placed (each passed to on_placement) */
    uint64_t spilled;          /**< ... of which spilled to the default device */
} hm_record_result_t;

typedef struct hm_recorder hm_recorder_t;

/**
 * Prepares the recording of @p argv (argv[0] looked up through PATH when
 * run): checks the options and the backend ("auto" resolved), finds the
 * runtime, refuses a statically linked program, describes the machine and
 * creates the output trace (a placement run: loads the placement and
 * resolves its devices and capacities), so that every error comes before
 * the command runs. Errors: HM_EUSAGE (options), HM_ENOPMU and -EACCES (backend or
 * per-CPU events not usable here, the detail says why and the remedy),
 * HM_ENOTFOUND (no runtime), -ENOEXEC (static program), HM_ENODEV (--bind),
 * HM_EBADMACHINE, -errno (output), the placement's errors (HM_EBADPLACE,
 * HM_ENODEV, -errno), -ENOMEM; the detail is one line, and begins with the
 * file or program at fault ("FILE: ...") where there is one.
 * @return 0 and *out owned by the caller (hm_recorder_close()).
 * Not thread-safe; one recording per process at a time (signals are
 * forwarded to the command while it runs).
 */
int hm_recorder_open(hm_recorder_t **out, const hm_record_opts_t *opts, char *const argv[]);

/** The backend that records ("soft" where "auto" chose it), the sampled
 *  event and the period as the trace header holds them. Owned by @p r. */
const char *hm_recorder_backend(const hm_recorder_t *r);
const char *hm_recorder_event(const hm_recorder_t *r);
uint64_t hm_recorder_period(const hm_recorder_t *r);
/** Whether the trace header has device figures (opts.machine or HMAT). */
int hm_recorder_has_figures(const hm_recorder_t *r);

/**
 * Runs the command under the runtime, waits for it (SIGINT, SIGTERM and
 * SIGHUP are forwarded to it), merges the processes' spools into the trace
 * and closes it. Once per recorder. A command that fails or is killed is
 * recorded all the same: its status is in @p out. A command that cannot
 * be executed shows as exit status 127.
 * @return 0, or a negative error (launching, per-CPU events, writing the
 *         trace) with a one-line detail.
 */
int hm_recorder_run(hm_recorder_t *r, hm_record_result_t *out);

/** Placement run, after hm_recorder_run(): the devices the runtimes
 *  placed on (one entry per device over all processes), in order of first
 *  report. hm_recorder_device() fills @p out and returns 0, or
 *  HM_ENOTFOUND when @p i is out of range; the name is owned by @p r. */
int hm_recorder_ndevices(const hm_recorder_t *r);
int hm_recorder_device(const hm_recorder_t *r, int i, hm_record_device_t *out);

/** Placement run, after hm_recorder_run(): the placement's rules that
 *  matched nothing in any process, one a line ("" when none). Owned by
 *  @p r. */
const char *hm_recorder_unmatched(const hm_recorder_t *r);

/** Placement run: the placement file's absolute path, as the runtimes
 *  read it; NULL for a recording. Owned by @p r. */
const char *hm_recorder_placement(const hm_recorder_t *r);

/** Frees @p r; a trace not finished by hm_recorder_run() is removed. */
void hm_recorder_close(hm_recorder_t *r);

/** The exit code a launcher returns for wait(2) status @p status: the
 *  command's exit code, or 128 + the signal that killed it. */
int hm_recorder_exit_code(int status);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_RECORD_H */
