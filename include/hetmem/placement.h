/**
 * @file placement.h
 * @brief Placement files: which memory device each data object goes to.
 *
 * A placement is JSON (docs/placement-format.md):
 * @code
 * { "default": "ddr",
 *   "rules": [ {"site": "0x3f2a91c07d5e1b44", "device": "hbm"},
 *              {"name": "matrix", "device": "hbm"},
 *              {"addr": ["0x7f0000000000", "0x7f0010000000"], "device": "hbm"},
 *              {"min_size": "64M", "device": "hbm"},
 *              {"pages_percent": 30, "device": "hbm"} ],
 *   "phases": { "spmv": { "rules": [ ... ] } } }
 * @endcode
 * Rules are tried in order and the first match wins; a rule may combine
 * selectors (all must match). A rule with "pages_percent" P sends page v of
 * the matched object to its device when ((v >> 12) % 100) < P and the rest to
 * the default device. Without selectors it matches every object.
 * A per-phase rule list applies while that phase is active and falls back
 * to the top-level rules when none of its rules match.
 *
 * Handles are immutable after load except for hit counters; matching is
 * thread-safe, counters are updated atomically.
 */
#ifndef HETMEM_PLACEMENT_H
#define HETMEM_PLACEMENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hm_placement hm_placement_t;

/** An object as the matcher sees it. */
typedef struct {
    uint64_t site;      /**< call-site id (0 when unknown) */
    const char *name;   /**< hetmem_name() or NULL */
    uint64_t addr;      /**< start address */
    uint64_t size;      /**< bytes */
    const char *source; /**< "file:line" of the allocating call, or NULL when unknown */
} hm_object_desc_t;

/** Outcome of matching one object. */
typedef struct {
    int rule;           /**< index of the matching rule in its list, -1 = default */
    int phase_rule;     /**< 1 when the rule came from the phase's list */
    int device;         /**< device index (into the devices given at load) */
    int pages_percent;  /**< 100 = whole object on device; else page split */
    int default_device; /**< where the other pages go */
} hm_place_t;

/**
 * Loads and validates a placement. Device names are resolved against
 * @p devices (the machine's device names, default device first); an unknown
 * name fails with HM_ENODEV naming it and the file. With @p devices NULL,
 * names are kept as they are and indices follow first appearance.
 * Errors: -errno, HM_EBADJSON (detail "PATH:LINE:COL: ..."), HM_EBADPLACE,
 * HM_ENODEV. *out is owned by the caller (hm_placement_close()).
 */
int hm_placement_load(hm_placement_t **out, const char *path, const char *const *devices, int ndevices);
/** Same, from JSON text; @p what names the source in error details. */
int hm_placement_parse(hm_placement_t **out, const char *what, const char *json,
                       const char *const *devices, int ndevices);
void hm_placement_close(hm_placement_t *p);

/** Matches one object in @p phase (NULL: outside any phase). Counts a hit. */
void hm_placement_match(hm_placement_t *p, const char *phase, const hm_object_desc_t *obj, hm_place_t *out);

/** Device of the page holding @p vaddr for an object placed as @p pl. */
static inline int hm_placement_page_device(const hm_place_t *pl, uint64_t vaddr)
{
    if (pl->pages_percent >= 100)
        return pl->device;
    return (int)((vaddr >> 12) % 100) < pl->pages_percent ? pl->device : pl->default_device;
}

/** Device name of index @p dev, or NULL. Owned by the handle. */
const char *hm_placement_device_name(const hm_placement_t *p, int dev);
int hm_placement_default_device(const hm_placement_t *p);
/** Whether the placement has per-phase rules. */
int hm_placement_has_phases(const hm_placement_t *p);

/**
 * A number that tells this handle apart from every other placement handle
 * loaded in the process, closed ones included (an address can be reused, a
 * serial is not; never 0), so that what a caller derives from a placement
 * (the estimator's compiled placements) can be kept and found again by it.
 * Thread-safe.
 */
uint64_t hm_placement_serial(const hm_placement_t *p);

/**
 * Rules that matched no object so far, as one line per rule
 * ("rules[2] {\"name\": \"matrx\"} matched nothing"), for reports.
 * Returns a malloc'd string (caller frees), or NULL when every rule
 * matched, or NULL with hm_errdetail() set when memory is short.
 */
char *hm_placement_unmatched(const hm_placement_t *p);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_PLACEMENT_H */
