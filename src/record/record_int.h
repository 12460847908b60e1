/* Internal recording interfaces shared by the backends, the preload runtime
 * and the hetmem CLI. Not installed. */
#ifndef HETMEM_RECORD_INT_H
#define HETMEM_RECORD_INT_H

#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "common/common.h"
#include "hetmem/record.h"

/* ------------------------------------------------------------ perf rings */

typedef struct {
    int fd;
    void *base;            /* metadata page followed by the data area */
    size_t map_len;
    uint8_t *data;
    uint64_t data_size;
    hm_perf_ring_stats_t stats;
    /* AUX area (Arm SPE): mapped when hm__perf_ring_set_aux() asked for it. */
    uint8_t *aux;
    uint64_t aux_size;
    uint8_t *aux_lin;      /* linear copy of the unread AUX bytes (they may wrap) */
    hm_spe_opts_t spe_opts;
    hm_spe_stats_t spe;
    uint64_t stats_spe_seen; /* spe.records already added to stats.samples */
    uint8_t scratch[65536];/* a record is at most 64 KiB (u16 size) */
} hm__perf_ring_t;

/* AUX pages (a power of two, 0 = none) that hm__perf_ring_map() maps after
 * the data area from now on, in this process. Set by the SPE backend when
 * it builds its events: the per-thread openers map rings without knowing
 * which backend opened the fd. neoverse_dsrc: see hm_spe_opts_t. */
void hm__perf_ring_set_aux(unsigned aux_pages, int neoverse_dsrc);
int hm__perf_ring_map(hm__perf_ring_t *r, int fd, unsigned data_pages);
void hm__perf_ring_unmap(hm__perf_ring_t *r);
/* Decodes everything published so far (data area, then AUX area) and
 * releases it to the kernel. */
int hm__perf_ring_read(hm__perf_ring_t *r, uint64_t sample_type, hm_perf_sample_cb cb, void *ctx);

/* ------------------------------------------------ perf backend event sets */

#define HM_REC_MAX_EVENTS 3

/* Up to three perf events per thread (e.g. a Sapphire Rapids aux leader,
 * load latency, precise stores). attr is a struct perf_event_attr kept as
 * bytes so that this header needs no kernel headers. */
typedef struct {
    int n;
    int leader[HM_REC_MAX_EVENTS];     /* index of the group leader, -1 = own group */
    int sampling[HM_REC_MAX_EVENTS];   /* has a ring buffer */
    _Alignas(8) unsigned char attr[HM_REC_MAX_EVENTS][160];
    char name[HM_REC_MAX_EVENTS][96];  /* for the trace's "event" and messages */
    char event[192];                   /* joined names */
} hm__rec_events_t;

/* Fills the events of a perf backend for period @p period (events per
 * sample). Reads sysfs format files through the os layer; PEBS encoding goes
 * through libpfm4 first. Returns 0, HM_ENOPMU (detail names the remedy) or
 * HM_ENOTIMPL. */
int hm__pebs_events(uint64_t period, unsigned ldlat, hm__rec_events_t *ev);
int hm__ibs_events(uint64_t period, hm__rec_events_t *ev);
int hm__spe_events(uint64_t period, hm__rec_events_t *ev);
int hm__rec_events(hm_backend_t b, uint64_t period, hm__rec_events_t *ev);

/* Diagnostic backend: the kernel's task-clock software event through the
 * same per-thread perf ring path as PEBS/IBS (no data addresses). It checks
 * the perf plumbing on machines without a PMU. Not chosen by auto. */
#define HM__BACKEND_PERFSW 16
int hm__perfsw_events(uint64_t period_ns, hm__rec_events_t *ev);

/* Per-CPU mode (hetmem record --per-cpu): the recording process opens the
 * events with pid = -1 on every CPU, one ring each, and a collector thread
 * writes the samples of its descendants to SPOOLDIR/percpu-<pid>.spool.
 * hm__percpu_permitted: 0, or -EACCES with why/remedy filled (paranoid > 0
 * and no CAP_PERFMON/CAP_SYS_ADMIN; reads through the os layer's root). */
typedef struct hm__percpu hm__percpu_t;
int hm__percpu_permitted(char *why, size_t whylen, char *remedy, size_t remlen);
int hm__percpu_open(hm__percpu_t **out, const hm__rec_events_t *ev, uint64_t sample_type, const char *spooldir);
/* Stops the collector, drains the rings, writes the stats record, frees.
 * kept: samples written; foreign: samples of other processes dropped. */
void hm__percpu_close(hm__percpu_t *p, uint64_t *kept, uint64_t *foreign);

/* The first usable backend: hm_backend_auto() (hetmem/record.h). */

/* Sample fields every perf backend asks for. */
uint64_t hm__rec_sample_type(void);

/* Parses a sysfs PMU format spec ("config:0-7", "config1:0-15") and ORs
 * value into the matching attr field. Pure; for tests too. */
int hm__perf_format_apply(const char *spec, uint64_t value, uint64_t cfg[3]);
/* Encodes a sysfs event string ("event=0xcd,umask=0x1,ldlat=3") for
 * PMU @p pmu into cfg[0..2] using its format/ files. */
int hm__perf_sysfs_encode(const char *pmu, const char *terms, uint64_t cfg[3]);

/* ----------------------------------------------------------- soft sampler */

/* The soft sampler's raw samples (hm__soft_raw_t) and their decoding
 * (hm__soft_resolve and its cache) are the instruction-set boundary's:
 * src/arch/arch.h, included above. */

/* ------------------------------------------------------------ spool files */

/* Each traced process writes its events to SPOOLDIR/<pid>-<ns>.spool; the
 * CLI merges the spools into one trace after the run. Fixed 40-byte records;
 * string payloads (len bytes, NUL-terminated, padded to 8) follow. */
#define HM_SPOOL_MAGIC "HMSPOOL1"
enum {
    HM_SPOOL_STATS = 100, /* a: samples lost, b: samples taken, c: unresolved (soft) */
    HM_SPOOL_PLACE = 101, /* a: addr, b: size, c: site; tid: flags; time; payload "req got name" */
    HM_SPOOL_PROC = 102,  /* a: pid, b: ppid; payload: exe */
    HM_SPOOL_ERROR = 103, /* payload: message from the runtime; a: a count; b: 2 when the
                           * spool reached HETMEM_SPOOL_MAX (written then), 1 for the count of
                           * records not written past it (a; written at exit) */
};
typedef struct {
    uint16_t kind;        /* hm_rec_kind_t or HM_SPOOL_* */
    uint16_t len;         /* payload bytes (multiple of 8) */
    uint32_t tid;
    uint64_t time;
    uint64_t a, b, c;     /* sample: addr, ip, weight<<32|dsrc<<8|access */
} hm__spool_rec_t;


/* The recording machine for a trace header (docs/trace-format.md): *host
 * gets its identity (host name, CPU model, memory nodes with kind, tier,
 * CPUs and bytes, the nodes of @p bind_mask, where the figures came from)
 * and *machine its device figures: @p machine_json (a machine file, named
 * @p machine_what) when given, else the memory nodes' HMAT figures
 * ("nodeN" devices), else NULL. Both malloc'd JSON texts, the caller's to
 * free. 0, HM_EBADJSON or -ENOMEM. */
struct hm_os_info;
int hm__rec_describe(const struct hm_os_info *o, uint64_t bind_mask, const char *machine_json,
                     const char *machine_what, char **host, char **machine);

#endif

/* ------------------------------------------------------------ launcher */

/* libhetmem_preload.so next to the running hetmem binary (../lib or the
 * same folder), or $HETMEM_PRELOAD. Returns 0 or HM_ENOTFOUND. */
int hm__find_preload(char *buf, size_t len);

/* Runs argv with extra environment (NAME=VALUE strings, NULL-terminated)
 * and LD_PRELOAD prefixed with @p preload; forwards SIGINT/SIGTERM/SIGHUP
 * to the child; returns its wait status and the wall time. Returns
 * -errno when fork fails; exec failure shows as exit status 127 with a
 * message on stderr. */
int hm__launch(char *const argv[], const char *preload, char *const extra_env[], int *status, uint64_t *wall_ns);
/* 1 when cmd (looked up through PATH) is a statically linked ELF program,
 * which LD_PRELOAD cannot enter; 0 otherwise. */
int hm__exe_is_static(const char *cmd);

/* Process exit code for a wait status: the code, or 128 + signal. */
int hm__exit_code(int status);

/* Spool files of one run, merged in time order. */
typedef struct hm__spool_set hm__spool_set_t;
int hm__spool_open(hm__spool_set_t **out, const char *dir);
/* 1 with *rec and *payload ("" when none), 0 at the end. */
int hm__spool_next(hm__spool_set_t *s, const hm__spool_rec_t **rec, const char **payload);
/* Files read, and how many ended in a truncated record (a process killed
 * while writing). */
void hm__spool_counts(const hm__spool_set_t *s, int *files, int *truncated);
void hm__spool_close(hm__spool_set_t *s);
/* Removes the spool files and the directory. */
void hm__spool_remove(const char *dir);
/* Creates a fresh spool folder $TMPDIR/hetmem-spool.XXXXXX (path into dir)
 * holding an owner file (our pid and start time), after removing folders
 * that dead hetmem processes left behind. 0 or -errno with a detail. */
int hm__spool_create(char *dir, size_t len);
