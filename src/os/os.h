/* Operating-system layer: the only code that reads sysfs/procfs, calls the
 * NUMA syscalls or perf_event_open. Everything it reads goes through a
 * redirectable root (env HETMEM_SYSFS_ROOT), so that tests can point it at a
 * captured tree of another machine, as hwloc does. Not installed. */
#ifndef HETMEM_OS_H
#define HETMEM_OS_H

#include <stddef.h>
#include <stdint.h>

#define HM_OS_MAX_NODES 64
#define HM_OS_MAX_TIERS 16
#define HM_OS_MAX_PMUS 48
#define HM_OS_MAX_DAX 16

/* HMAT performance of a memory node as seen from its best initiators
 * (accessN/initiators/ in sysfs). Latencies in ns, bandwidths in MB/s. */
typedef struct {
    int valid;
    uint32_t read_latency, write_latency, read_bandwidth, write_bandwidth;
    char initiators[64];     /* "node0,node1" */
} hm_os_hmat_t;

typedef struct {
    int id;
    uint64_t mem_total, mem_free; /* bytes */
    int ncpus;
    char cpulist[64];
    int tier;                /* memory_tierN id, -1 when the kernel has no tiers */
    hm_os_hmat_t access[2];  /* access0 (any initiator), access1 (CPU initiators) */
    char kind[8];            /* "ddr", "hbm", "cxl"/"far": heuristic, see os.c */
} hm_os_node_t;

typedef struct {
    int id;
    char nodelist[64];
} hm_os_tier_t;

typedef struct {
    char name[40];
    int type;                /* perf_event_attr.type, -1 unknown */
} hm_os_pmu_t;

typedef struct {
    char name[32];
    int target_node;
    uint64_t size;
    char mode[16];           /* "devdax" or "system-ram" (kmem) */
} hm_os_dax_t;

typedef struct hm_os_info {
    char root[256];          /* "" for the live system */
    char hostname[65];       /* /proc/sys/kernel/hostname (live: else gethostname), "" when unknown */
    char arch[16];           /* "x86_64", "aarch64" */
    char vendor[32];         /* "GenuineIntel", "AuthenticAMD", "ARM" */
    char model[96];
    int family, model_num;
    double core_ghz;         /* nominal core clock: cpufreq base_frequency, else cpuinfo "cpu MHz"; 0 unknown */
    int paranoid;            /* kernel.perf_event_paranoid, -100 when unreadable */
    int hypervisor;          /* cpuinfo flags has "hypervisor" */
    int nnodes;
    hm_os_node_t nodes[HM_OS_MAX_NODES];
    int ntiers;
    hm_os_tier_t tiers[HM_OS_MAX_TIERS];
    int npmus;
    hm_os_pmu_t pmus[HM_OS_MAX_PMUS];
    char core_pmu[40];       /* "cpu" or "cpu_core" when it has mem-loads */
    int has_mem_loads, has_mem_stores, has_ldlat;
    int ibs_op_type, spe_type; /* PMU types, -1 when absent */
    char spe_name[40];
    int ndax;
    hm_os_dax_t dax[HM_OS_MAX_DAX];
    char memkind[128];       /* path of libmemkind found, "" when none */
} hm_os_info_t;

/* Root prefix for sysfs/procfs reads ("" = live). Read once from
 * HETMEM_SYSFS_ROOT; no allocation. */
const char *hm__os_root(void);
int hm__os_is_live(void);
/* Reads ROOT/rel into buf (NUL-terminated, trailing newline stripped).
 * Returns bytes read or -errno. */
int hm__os_read(const char *rel, char *buf, size_t len);
int hm__os_read_int(const char *rel, long long *out);

/* Collects everything doctor shows. Never fails: missing pieces stay empty. */
void hm__os_probe(hm_os_info_t *out);

/* Device names: "N", "nodeN", "tierN" (all nodes of a memory tier), or a kind
 * ("ddr", "hbm", "cxl", "far") from the node heuristics. Fills a node mask
 * (bit i = node i). Returns 0 or HM_ENODEV with a detail listing the known
 * names. */
int hm__os_resolve_device(const hm_os_info_t *info, const char *name, uint64_t *mask);

/* NUMA wrappers (libnuma's numaif.h syscalls). -errno on failure. */
int hm__os_mbind(void *addr, size_t len, uint64_t mask, int move);
int hm__os_set_mempolicy_bind(uint64_t mask);
/* Node of each page (move_pages with nodes=NULL); status[i] < 0 = -errno
 * (e.g. -ENOENT for a page not yet touched). */
int hm__os_page_nodes(void *const *pages, size_t n, int *status);
/* Moves pages to node (move_pages). */
int hm__os_move_pages(void *const *pages, size_t n, int node, int *status);
/* get_mempolicy(MPOL_F_ADDR|MPOL_F_NODE): node of the page at addr. */
int hm__os_addr_node(const void *addr, int *node);

/* perf_event_open(2); returns fd or -errno. attr is a struct perf_event_attr. */
int hm__os_perf_open(void *attr, int pid, int cpu, int group_fd, unsigned long flags);

#endif
