/**
 * @file sim.h
 * @brief Tiered-memory machine simulator: machine files and the model.
 *
 * The model (docs/sim.md) is driven by a stream of events: instructions,
 * loads, stores, allocations, frees, names and phases. `hetmem-cc` binaries
 * feed it from their access hooks (libhetmem_inst); tests feed it directly.
 *
 * A machine file is JSON (docs/machines.md):
 * @code
 * { "name": "spr-hbm", "cores": 56,
 *   "core": {"freq_ghz": 2.0, "base_cpi": 0.5, "rob": 512, "mlp": 24},
 *   "caches": [ {"name": "L1", "size": "48K", "assoc": 12, "latency": 5}, ...,
 *               {"name": "L3", "size": "105M", "assoc": 15, "latency": 60, "shared": true} ],
 *   "devices": [ {"name": "ddr", "read_latency_ns": 110, "read_bandwidth_gbs": 250,
 *                 "capacity": "512G"}, ... ] }
 * @endcode
 * The first device is the default one.
 *
 * Handles are not thread-safe; one simulator models one thread.
 */
#ifndef HETMEM_SIM_H
#define HETMEM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "hetmem/placement.h"
#include "hetmem/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hm_sim_machine hm_sim_machine_t;

/**
 * Loads and validates a machine file. Errors: -errno, HM_EBADJSON
 * ("PATH:LINE:COL: ..."), HM_EBADMACHINE (detail names the key).
 * *out is owned by the caller (hm_sim_machine_close()).
 */
int hm_sim_machine_load(hm_sim_machine_t **out, const char *path);
/** Same, from JSON text; @p what names the source in error details. */
int hm_sim_machine_parse(hm_sim_machine_t **out, const char *what, const char *json);
void hm_sim_machine_close(hm_sim_machine_t *m);

/**
 * Finds a machine: @p name_or_path is a JSON path when it contains '/' or
 * ends in ".json", else a preset looked up as NAME.json in $HETMEM_MACHINES or
 * next to @p exe_dir ("EXE_DIR/../share/hetmem/machines" in an installation,
 * "EXE_DIR/../share/machines", "EXE_DIR/../../share/machines" from a build tree)
 * and in the source tree. Writes the path into @p buf.
 * @return 0, or HM_ENOTFOUND (detail lists the places tried).
 */
int hm_sim_machine_find(const char *name_or_path, const char *exe_dir, char *buf, size_t len);

const char *hm_sim_machine_name(const hm_sim_machine_t *m);
/** Canonical JSON text of the machine (owned by the handle). */
const char *hm_sim_machine_json(const hm_sim_machine_t *m);
int hm_sim_machine_ndevices(const hm_sim_machine_t *m);
/** Device names, default first (owned by the handle). */
const char *const *hm_sim_machine_device_names(const hm_sim_machine_t *m);
/** Index of device @p name, or HM_ENODEV (detail lists the machine's devices). */
int hm_sim_machine_device_index(const hm_sim_machine_t *m, const char *name);

typedef struct hm_sim hm_sim_t;

/** Called for every sampled access (see hm_sim_set_sampler()). */
typedef void (*hm_sim_sample_fn)(void *ctx, const hm_sample_t *s);

/**
 * Opens a simulator for one thread of machine @p m.
 * @param placement  borrowed (must outlive the simulator), or NULL
 * @param device     with @p placement NULL: the device holding all data
 *                   (-1: the machine's default device)
 * *out is owned by the caller (hm_sim_close()); @p m must outlive it.
 */
int hm_sim_open(hm_sim_t **out, const hm_sim_machine_t *m, hm_placement_t *placement, int device);
void hm_sim_close(hm_sim_t *s);

/** Samples every @p period-th load and every @p period-th store (0: off). */
void hm_sim_set_sampler(hm_sim_t *s, uint64_t period, hm_sim_sample_fn fn, void *ctx);

/** Source location ("file:line") of allocation site @p site, or NULL. */
typedef const char *(*hm_sim_site_source_fn)(uint64_t site);
/** Names sites by source location in placements (rules with a "site" of
 *  "file:line") and in the report (each object's "source"). */
void hm_sim_set_site_source(hm_sim_t *s, hm_sim_site_source_fn fn);

/** Retires @p n instructions (besides memory accesses, which are events of their own). */
void hm_sim_instructions(hm_sim_t *s, uint64_t n);
/** A load of @p size bytes; @p value is the loaded 8-byte value (for
 *  dependence detection; 0 when unknown); @p ip for samples. */
void hm_sim_load(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t value, uint64_t ip);
void hm_sim_store(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t ip);
/** Bulk read or write of @p len bytes (memcpy and friends), line by line. */
void hm_sim_load_range(hm_sim_t *s, uint64_t addr, uint64_t len, uint64_t ip);
void hm_sim_store_range(hm_sim_t *s, uint64_t addr, uint64_t len, uint64_t ip);

/** An allocation; places its pages (placement rules, capacity, spill). */
void hm_sim_alloc(hm_sim_t *s, uint64_t addr, uint64_t size, uint64_t site);
/** An allocation the runtime does not place (smaller than hetmem run's
 *  --min-size, which leaves such allocations in the program's heap): its
 *  bytes stay on the default device (on the one device of a device run),
 *  whatever the placement says, also on a page it shares with a placed
 *  object. It is kept for the core model (index chases), cannot be named,
 *  and its traffic is reported as untracked. */
void hm_sim_alloc_unplaced(hm_sim_t *s, uint64_t addr, uint64_t size);
/** 1 if the live allocation starting at @p addr is placed, 0 if it is not
 *  (hm_sim_alloc_unplaced), HM_ENOTFOUND if there is none. */
int hm_sim_placed_at(const hm_sim_t *s, uint64_t addr);
/** Frees the allocation starting at @p addr; returns 0 or HM_ENOTFOUND. */
int hm_sim_free(hm_sim_t *s, uint64_t addr);
/** Names the live allocation holding @p addr and places it again; 0 or HM_ENOTFOUND. */
int hm_sim_name(hm_sim_t *s, uint64_t addr, const char *name);
/** Enters (@p begin 1) or leaves a phase; the phase's placement rules apply
 *  to allocations made while it is the innermost open phase. */
void hm_sim_phase(hm_sim_t *s, int begin, const char *name);

/** Simulated time so far in ns (outstanding misses not yet drained). */
uint64_t hm_sim_now_ns(hm_sim_t *s);
uint64_t hm_sim_instruction_count(hm_sim_t *s);
/** Loads plus stores simulated so far (bulk ops count one per line). */
uint64_t hm_sim_access_count(hm_sim_t *s);
/** Instructions and simulated ns so far without catching up on queued
 *  accesses (may lag by a few hundred accesses): safe in a signal handler
 *  that interrupted the simulation, for progress lines. */
void hm_sim_progress(const hm_sim_t *s, uint64_t *instructions, uint64_t *ns);

/**
 * Drains outstanding misses and returns the run's report as JSON text
 * (docs/sim.md "Report"): runtime_s, instructions, levels, devices, objects,
 * spills, unmatched placement rules. Malloc'd; the caller frees it.
 * May be called once; later events are ignored.
 */
char *hm_sim_report(hm_sim_t *s);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_SIM_H */
