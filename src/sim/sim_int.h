/* Simulator internals, private to src/sim. The instrumentation runtime sees
 * only sim.h (the hot path), which this extends. */
#ifndef HETMEM_SIM_INT_H
#define HETMEM_SIM_INT_H

#include <stdint.h>

#include "common/common.h"
#include "hetmem/sim.h"
#include "sim.h"

#define HM_SIM_MAX_LEVELS 4
#define HM_SIM_MAX_DEVICES 8
#define HM_SIM_MAX_CHANNELS 64
#define HM_SIM_MAX_MLP 256
#define HM_SIM_DEP_SLOTS 8
#define HM_SIM_IDX_IPS 256    /* load instructions whose index stride is learnt */
#define HM_SIM_ROB_RING 1024 /* misses held in program order (the load queue) */
#define HM_SIM_PAGE_SHIFT 12
#define HM_SIM_MAX_LL 8       /* points of a loaded-latency curve */
#define HM_SIM_UTIL_WINDOW_NS 2000.0 /* utilisation measured over this */

typedef struct {
    char name[32];
    uint64_t size;       /* bytes, whole cache (shared ones: whole node) */
    uint32_t assoc;
    double latency_cyc;  /* load-to-use latency of a hit at this level */
    int shared;          /* shared by all cores: each thread gets size/cores */
} hm__cache_cfg_t;

typedef struct {
    char name[32];
    double read_lat_ns, write_lat_ns;
    double read_bw_gbs, write_bw_gbs;  /* node-level, GB/s = bytes/ns */
    uint64_t capacity;                  /* node-level bytes; 0 = unlimited */
    uint32_t channels;
    /* loaded-latency curve: read latency ll_ns[i] at utilisation ll_u[i] */
    int nll;
    double ll_u[HM_SIM_MAX_LL], ll_ns[HM_SIM_MAX_LL];
} hm__device_cfg_t;

struct hm_sim_machine {
    char name[64];
    char *json;          /* canonical text */
    uint32_t cores;
    double freq_ghz, base_cpi;
    uint32_t rob, mlp;
    uint32_t prefetch;   /* stream prefetch distance in lines; 0 = off */
    double burst_ns;     /* device-time averaging window (SPMD de-phasing) */
    uint32_t line;
    int nlevels;
    hm__cache_cfg_t level[HM_SIM_MAX_LEVELS];
    int ndevices;
    hm__device_cfg_t dev[HM_SIM_MAX_DEVICES];
    const char *devnames[HM_SIM_MAX_DEVICES + 1];
};

/* One cache level of the simulated thread: tags per way and one word of
 * MRU bits per set (bit-PLRU replacement). */
typedef struct {
    uint64_t *tag;       /* line number + 1; 0 = invalid */
    uint16_t *ptag;      /* per way: partial tag (hm__ptag()), 0 = invalid */
    uint32_t stride;     /* ptag entries per set: assoc rounded up to 8 */
    uint32_t wmask;      /* bits 0..assoc-1 */
    uint32_t *mru;       /* per set: bit w = way w used since the last reset */
    uint8_t *dirty;
    double *ready;       /* time a prefetched line arrives (0: present) */
    uint32_t sets, assoc;
    uint32_t set_mask;   /* sets - 1 when sets is a power of two, else 0 */
    double lat_ns;
    uint64_t hits[2], misses[2]; /* [load, store] */
} hm__cache_t;

typedef struct {
    double xfer_r_ns, xfer_w_ns;     /* channel time per line, this thread's share */
    double read_lat_ns, write_lat_ns;
    uint32_t nch;
    double burst_ns;
    double next_free[HM_SIM_MAX_CHANNELS];
    double busy_ns;
    uint64_t lines_read, lines_written;
    uint64_t cap_pages;              /* this thread's share; 0 = unlimited */
    uint64_t used_pages;             /* pages placed here: what capacity and spills count */
    uint64_t resident_pages;         /* of those, pages populated (touched) here */
    uint64_t peak_pages;             /* most resident pages at once */
    uint64_t spilled_pages;          /* pages that wanted this device and did not fit */
    /* loaded latency: the curve, and this thread's channel time in the
     * current and the previous utilisation window */
    int nll;
    double ll_u[HM_SIM_MAX_LL], ll_ns[HM_SIM_MAX_LL];
    double uw0, ucur, uprev;         /* uprev: utilisation of the previous window */
} hm__device_t;

/* Objects as reports and placement see them: one group per (site, name). */
typedef struct {
    uint64_t site;
    char *name;
    int device;          /* placement device of its first allocation */
    int pages_percent;
    uint64_t allocs, bytes_allocated;
    uint64_t lines_read, lines_written;
    uint64_t spilled_bytes;
    int unplaced;        /* the allocations the runtime does not place: reported as untracked */
} hm__group_t;

typedef struct {
    uint64_t addr, size, site;
    uint32_t group;
    int live;
    int unplaced;        /* below the runtime's min size: stays on the default device */
    hm_place_t place;
} hm__alloc_t;

struct hm_sim {
    /* accesses queued by the hooks, simulated in batches (sim.h, core.c);
     * first, so that sim.h's inline functions reach it from a hm_sim_t
     * pointer without knowing the rest */
    hm__sim_hot_t hot;
    const hm_sim_machine_t *m;
    hm_placement_t *pl;
    int fixed_device;           /* -1: placement/default */
    int def;
    uint32_t line_shift;
    /* the line of the last L1 access and its way: sequential accesses to
     * one line skip the set scan (it is still the set's most recent) */
    uint64_t last_line, last_idx;
    /* the pointer loaded by the last L1 hit that loaded one, and when it is
     * there: a load at that address (p = p->next over a list that fits L1)
     * waits for it, so that an L1 chase costs the L1 latency per step */
    uint64_t l1p_val;
    double l1p_done;
    /* [ptr_lo, ptr_lo + ptr_span): the span of the tracked allocations; only
     * values in it are taken for pointers by the L1 chase check */
    uint64_t ptr_lo, ptr_span;
    int nlevels;
    hm__cache_t c[HM_SIM_MAX_LEVELS];
    int ndev;
    hm__device_t dev[HM_SIM_MAX_DEVICES];

    /* core */
    double cpi_ns, cyc_ns;
    uint64_t icount;            /* instructions retired (hook-fed) */
    double t;                   /* core time at instruction it_icount */
    uint64_t t_icount;
    uint32_t rob, mlp;
    uint32_t win_head, win_n;   /* ring of misses not yet retired, below */
    /* completion times of the misses holding a fill buffer (the MLP
     * limit): a slot frees when its miss completes, in any order */
    double mlp_slot[HM_SIM_MAX_MLP]; /* ring, sorted from mlp_head */
    uint32_t mlp_head, mlp_n;
    uint64_t rob_limit;         /* icount at which the oldest miss blocks retirement */
    double last_done;           /* latest completion of anything issued */
    /* loaded values still in flight, for dependence detection */
    uint64_t dep_val[HM_SIM_DEP_SLOTS];
    double dep_done[HM_SIM_DEP_SLOTS];
    uint32_t dep_next;
    double dep_latest;
    uint64_t dep_min, dep_max;  /* range of dep_val[] */
    /* small integers (array indices) loaded by misses still in flight */
    uint64_t idx_val[HM_SIM_DEP_SLOTS];
    double idx_done[HM_SIM_DEP_SLOTS];
    uint32_t idx_next;
    double idx_latest;
    uint64_t idx_obj_base, idx_obj_size; /* the object of the last index check */
    /* per load instruction and object: the stride its offsets show (the
     * gcd of their differences), for indices scaled by an element or
     * struct size (core.c idx_check()) */
    struct {
        uint64_t ip, base, last, stride;
        uint32_t shift, seen;   /* shift: log2(stride) if a power of two, else 0 */
    } idx_ip[HM_SIM_IDX_IPS];
    /* selects (cmov) of a loaded value that feed the next address: the
     * latest completion of the loads since the last select mark, and the
     * time the next load must wait for (hm__sim_select_mark()) */
    double sel_acc, sel_wait;

    /* stream prefetcher: line streams within a page, ascending or
     * descending, unit or small stride (0: not known yet), and the demand
     * misses seen along each */
    struct {
        uint64_t next, pf;
        int64_t stride;
        uint32_t seen;
    } stream[16];
    uint16_t stream_h[16];      /* hm__ptag() of stream[k].next */
    uint32_t stream_rr;
    uint32_t pf_dist;
    uint64_t prefetches;

    uint64_t loads, stores;
    uint64_t ld_left, st_left, period;
    uint64_t rng;               /* sampling jitter: splitmix64 state, fixed seed */
    hm_sim_sample_fn sample_fn;
    void *sample_ctx;

    /* objects */
    uint64_t **pagemap;         /* radix: [vaddr >> 30] -> leaf of 2^18 entries */
    hm__alloc_t *allocs;
    uint32_t nallocs, cap_allocs, free_alloc; /* free list through .group */
    struct hm_objtab *live;     /* live allocations: address range -> index */
    hm__group_t *groups;
    uint32_t ngroups, cap_groups;
    char *phase[16];
    int nphase;
    double phase_t0[16];
    uint64_t phase_i0[16];
    /* per phase name: total time and instructions inside it */
    struct hm__phase_stat {
        char *name;
        double ns;
        uint64_t instructions, count;
    } *pstat;
    uint32_t npstat;
    uint64_t other_lines_read, other_lines_written;
    uint64_t migrated_pages;    /* pages moved at phase boundaries */
    /* the allocating call's "file:line" of a site id (hm_sim_set_site_source) */
    hm_sim_site_source_fn site_source;
    int draining;               /* inside hm__sim_drain() */
    /* misses not yet retired, in program order (the ROB limit); last, as
     * the largest and coldest part */
    double win_done[HM_SIM_ROB_RING];
    uint64_t win_inst[HM_SIM_ROB_RING];
};

/* Partial tag of a line: 15 hash bits, never 0 (0 marks an invalid way). */
static inline uint16_t hm__ptag(uint64_t line)
{
    return (uint16_t)(((line * 0xff51afd7ed558ccdull) >> 48) | 1);
}

/* cache.c */
int hm__cache_init(hm__cache_t *c, uint64_t size, uint32_t assoc, uint32_t line, double lat_ns);
void hm__cache_free(hm__cache_t *c);
/* device.c */
double hm__device_read(hm__device_t *d, uint64_t line, double t);
void hm__device_write(hm__device_t *d, uint64_t line, double t);
/* objects.c */
#define HM_SIM_LEAF_BITS 18
#define HM_SIM_ROOT_BITS (48 - HM_SIM_PAGE_SHIFT - HM_SIM_LEAF_BITS)
/* Page-map entry of byte address @p addr (0: not in any allocation). */
static inline uint64_t hm__sim_page_entry(const hm_sim_t *s, uint64_t addr)
{
    uint64_t pg = addr >> HM_SIM_PAGE_SHIFT;
    uint64_t r = pg >> HM_SIM_LEAF_BITS;
    if (!s->pagemap || r >= (1ull << HM_SIM_ROOT_BITS) || !s->pagemap[r])
        return 0;
    return s->pagemap[r][pg & ((1u << HM_SIM_LEAF_BITS) - 1)];
}
void hm__sim_objects_free(hm_sim_t *s);
uint32_t hm__sim_group(hm_sim_t *s, uint64_t site, const char *name);

/* Page-map entry: alloc index + 1 in the low 32 bits, device + 1 in 32..39,
 * bit 40 once the page has been touched by its allocation (a line of it
 * read from its device: the page is populated, and move_pages() would copy
 * it), and bit 41 while the page is populated and counted in its device's
 * resident_pages (it stays when a new allocation takes the page over). */
#define HM_PE_ALLOC(e) ((uint32_t)(e))
#define HM_PE_DEV(e) ((int)(((e) >> 32) & 0xff) - 1)
#define HM_PE_TOUCHED (1ull << 40)
#define HM_PE_RESIDENT (1ull << 41)

/* A page of device @p dev becomes populated: peak_bytes is the most memory
 * a device held at once, counting pages as the OS does (when first
 * touched), so pages placed and moved before any touch never count on the
 * device they left. */
static inline void hm__sim_resident_add(hm_sim_t *s, int dev)
{
    hm__device_t *d = &s->dev[dev];
    if (++d->resident_pages > d->peak_pages)
        d->peak_pages = d->resident_pages;
}

/* The page-map slot of @p addr, or NULL where none was ever allocated. */
static inline uint64_t *hm__sim_page_ptr(hm_sim_t *s, uint64_t addr)
{
    uint64_t pg = addr >> HM_SIM_PAGE_SHIFT;
    uint64_t r = pg >> HM_SIM_LEAF_BITS;
    if (!s->pagemap || r >= (1ull << HM_SIM_ROOT_BITS) || !s->pagemap[r])
        return NULL;
    return &s->pagemap[r][pg & ((1u << HM_SIM_LEAF_BITS) - 1)];
}



/* core.c: the oldest outstanding miss blocks retirement (ROB limit). */
void hm__sim_rob_stall(hm_sim_t *s);
#endif
