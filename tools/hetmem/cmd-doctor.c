/* hetmem doctor: what this machine offers for recording and placement, with
 * a remedy line for every missing piece. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hetmem/record.h"
#include "os/os.h"

enum { OPT_JSON = 256, OPT_NO_OPEN };

static const hm_cli_opt_t opts[] = {
    {OPT_JSON, "json", NULL, "machine-readable output (documented in docs/record.md)", 0},
    {OPT_NO_OPEN, "no-open", NULL, "do not try perf_event_open, judge from sysfs only", 0},
    {0},
};

typedef struct {
    int ok[HM_BACKEND_COUNT];
    char why[HM_BACKEND_COUNT][256], remedy[HM_BACKEND_COUNT][256];
    int best;
} backends_t;

/* Pieces that are missing, each with its remedy; shared by both outputs. */
typedef struct {
    const char *what;
    char remedy[256];
} gap_t;

static int gaps(const hm_os_info_t *o, gap_t *g)
{
    int n = 0, cpuless = 0, hmat = 0;
    for (int i = 0; i < o->nnodes; i++) {
        cpuless += o->nodes[i].ncpus == 0;
        hmat |= o->nodes[i].access[0].valid;
    }
    if (o->nnodes < 2) {
        g[n].what = "only one NUMA node: there is no second memory device to place data on";
        snprintf(g[n++].remedy, sizeof g->remedy,
                 "expose HBM/CXL/PMEM as NUMA nodes (Xeon Max: flat or SNC mode in BIOS; CXL/PMEM: "
                 "daxctl reconfigure-device --mode=system-ram daxX.Y); meanwhile use 'hetmem sim'");
    } else if (!cpuless) {
        g[n].what = "no CPU-less NUMA node: all nodes are sockets' DRAM (no HBM/CXL tier)";
        snprintf(g[n++].remedy, sizeof g->remedy,
                 "placement across sockets still works; for tiers, online HBM/CXL memory as its own node");
    }
    if (!o->ntiers) {
        g[n].what = "no memory tiers in /sys/devices/virtual/memory_tiering";
        snprintf(g[n++].remedy, sizeof g->remedy, "needs Linux >= 6.1; tier names (tierN) are then unavailable, use node numbers");
    } else if (o->ntiers == 1 && o->nnodes > 1 && cpuless) {
        g[n].what = "all nodes share one memory tier";
        snprintf(g[n++].remedy, sizeof g->remedy, "the kernel could not rank the nodes (no HMAT or kmem driver); name devices by node number");
    }
    if (!hmat) {
        g[n].what = "no HMAT latency/bandwidth (nodeN/access0/initiators absent)";
        snprintf(g[n++].remedy, sizeof g->remedy,
                 "firmware lacks an ACPI HMAT or the kernel lacks CONFIG_HMEM_REPORTING; give device speeds in a machine preset");
    }
    if (!o->ndax && !o->memkind[0]) {
        g[n].what = "no DAX devices and no memkind";
        snprintf(g[n++].remedy, sizeof g->remedy,
                 "optional: PMEM/CXL as devdax appear under /sys/bus/dax (ndctl/daxctl); apt install libmemkind0 for memkind");
    }
    return n;
}

static void probe_backends(backends_t *b, int try_open)
{
    b->best = -1;
    for (int i = 0; i < HM_BACKEND_COUNT; i++) {
        b->ok[i] = hm_backend_probe((hm_backend_t)i, try_open, b->why[i], sizeof b->why[i], b->remedy[i],
                                    sizeof b->remedy[i]) == 0;
        if (b->ok[i] && b->best < 0)
            b->best = i;
    }
}

static json_t *hmat_json(const hm_os_hmat_t *h)
{
    if (!h->valid)
        return json_null();
    return json_pack("{s:I,s:I,s:I,s:I,s:s}", "read_latency_ns", (json_int_t)h->read_latency,
                     "write_latency_ns", (json_int_t)h->write_latency, "read_bandwidth_mbs",
                     (json_int_t)h->read_bandwidth, "write_bandwidth_mbs", (json_int_t)h->write_bandwidth,
                     "initiators", h->initiators);
}

static int print_json(const hm_os_info_t *o, const backends_t *b, const gap_t *g, int ng)
{
    json_t *root = json_object();
    json_object_set_new(root, "cpu", json_pack("{s:s,s:s,s:i,s:i,s:s,s:b,s:o}", "vendor", o->vendor, "model", o->model,
                                               "family", o->family, "model_number", o->model_num, "arch", o->arch,
                                               "virtual_machine", o->hypervisor, "core_ghz",
                                               o->core_ghz > 0 ? json_real(o->core_ghz) : json_null()));
    json_object_set_new(root, "perf_event_paranoid", o->paranoid == -100 ? json_null() : json_integer(o->paranoid));
    json_t *pm = json_array();
    for (int i = 0; i < o->npmus; i++)
        json_array_append_new(pm, json_string(o->pmus[i].name));
    json_object_set_new(root, "pmus", pm);
    json_t *ba = json_array();
    for (int i = 0; i < HM_BACKEND_COUNT; i++)
        json_array_append_new(ba, json_pack("{s:s,s:b,s:s,s:s?}", "name", hm_backend_name((hm_backend_t)i),
                                             "available", b->ok[i], "detail", b->why[i], "remedy",
                                             b->ok[i] ? NULL : b->remedy[i]));
    json_object_set_new(root, "backends", ba);
    json_object_set_new(root, "auto", b->best >= 0 ? json_string(hm_backend_name((hm_backend_t)b->best)) : json_null());
    json_t *na = json_array();
    for (int i = 0; i < o->nnodes; i++) {
        const hm_os_node_t *n = &o->nodes[i];
        json_array_append_new(na, json_pack("{s:i,s:s,s:i,s:s,s:I,s:I,s:o,s:o,s:o}", "id", n->id, "kind", n->kind,
                                            "cpus", n->ncpus, "cpulist", n->cpulist, "mem_total", (json_int_t)n->mem_total,
                                            "mem_free", (json_int_t)n->mem_free, "tier",
                                            n->tier >= 0 ? json_integer(n->tier) : json_null(), "access0",
                                            hmat_json(&n->access[0]), "access1", hmat_json(&n->access[1])));
    }
    json_object_set_new(root, "nodes", na);
    json_t *ta = json_array();
    for (int i = 0; i < o->ntiers; i++)
        json_array_append_new(ta, json_pack("{s:i,s:s,s:s}", "id", o->tiers[i].id, "name",
                                            "", "nodes", o->tiers[i].nodelist));
    for (size_t i = 0; i < json_array_size(ta); i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "tier%d", o->tiers[i].id);
        json_object_set_new(json_array_get(ta, i), "name", json_string(nm));
    }
    json_object_set_new(root, "tiers", ta);
    json_t *da = json_array();
    for (int i = 0; i < o->ndax; i++)
        json_array_append_new(da, json_pack("{s:s,s:i,s:I,s:s}", "name", o->dax[i].name, "target_node",
                                            o->dax[i].target_node, "size", (json_int_t)o->dax[i].size, "mode",
                                            o->dax[i].mode));
    json_object_set_new(root, "dax", da);
    json_object_set_new(root, "memkind", o->memkind[0] ? json_string(o->memkind) : json_null());
    json_t *ga = json_array();
    for (int i = 0; i < ng; i++)
        json_array_append_new(ga, json_pack("{s:s,s:s}", "missing", g[i].what, "remedy", g[i].remedy));
    json_object_set_new(root, "missing", ga);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s)
        return hm_cli_failf("doctor", "out of memory");
    puts(s);
    free(s);
    return HM_EXIT_OK;
}

static void hmat_cell(const hm_os_hmat_t *h, char *buf, size_t len)
{
    if (!h->valid)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%u/%u ns %u/%u MB/s", h->read_latency, h->write_latency, h->read_bandwidth,
                 h->write_bandwidth);
}

static int print_human(const hm_os_info_t *o, const backends_t *b, const gap_t *g, int ng)
{
    printf("CPU      %s %s (family %d, model %d, %s)%s\n", o->vendor[0] ? o->vendor : "unknown",
           o->model[0] ? o->model : "", o->family, o->model_num, o->arch, o->hypervisor ? ", virtual machine" : "");
    if (o->core_ghz > 0)
        printf("clock    %.3g GHz nominal (record writes it as the machine's core.freq_ghz)\n", o->core_ghz);
    else
        printf("clock    unknown (no cpufreq base_frequency nor cpuinfo \"cpu MHz\"): give core.freq_ghz in --machine\n");
    if (o->paranoid == -100)
        printf("perf     kernel.perf_event_paranoid unreadable\n");
    else
        printf("perf     kernel.perf_event_paranoid = %d\n", o->paranoid);
    printf("PMUs    ");
    for (int i = 0; i < o->npmus; i++)
        printf(" %s", o->pmus[i].name);
    printf("%s\n", o->npmus ? "" : " none");
    if (o->root[0])
        printf("root     %s (captured tree; perf_event_open not tried)\n", o->root);

    printf("\nsampling backends\n");
    printf("  %-6s %-4s %s\n", "name", "ok", "detail");
    for (int i = 0; i < HM_BACKEND_COUNT; i++) {
        printf("  %-6s %-4s %s\n", hm_backend_name((hm_backend_t)i), b->ok[i] ? "yes" : "no", b->why[i]);
        if (!b->ok[i] && b->remedy[i][0])
            printf("  %-6s %-4s remedy: %s\n", "", "", b->remedy[i]);
    }
    printf("  auto -> %s\n", b->best >= 0 ? hm_backend_name((hm_backend_t)b->best) : "none");

    printf("\nNUMA nodes (names for --bind and placements: N, nodeN, tierN, kind)\n");
    printf("  %-5s %-5s %-10s %-11s %-11s %-5s %-32s %s\n", "node", "kind", "cpus", "memory", "free", "tier",
           "HMAT access0 (rd/wr lat, bw)", "access1");
    int cpuless = 0;
    for (int i = 0; i < o->nnodes; i++) {
        const hm_os_node_t *n = &o->nodes[i];
        char mt[32], mf[32], tier[16], h0[64], h1[64];
        hm__fmt_size(n->mem_total, mt, sizeof mt);
        hm__fmt_size(n->mem_free, mf, sizeof mf);
        snprintf(tier, sizeof tier, n->tier >= 0 ? "%d" : "-", n->tier);
        hmat_cell(&n->access[0], h0, sizeof h0);
        hmat_cell(&n->access[1], h1, sizeof h1);
        printf("  %-5d %-5s %-10s %-11s %-11s %-5s %-32s %s\n", n->id, n->kind, n->ncpus ? n->cpulist : "(none)", mt,
               mf, tier, h0, h1);
        cpuless += n->ncpus == 0;
    }
    printf("  CPU-less nodes: ");
    if (!cpuless)
        printf("none");
    for (int i = 0, k = 0; i < o->nnodes; i++)
        if (!o->nodes[i].ncpus)
            printf("%snode%d", k++ ? ", " : "", o->nodes[i].id);
    printf("\n");

    printf("\nmemory tiers\n");
    if (!o->ntiers)
        printf("  none\n");
    for (int i = 0; i < o->ntiers; i++)
        printf("  tier%-4d nodes %s\n", o->tiers[i].id, o->tiers[i].nodelist);

    printf("\nDAX devices and memkind\n");
    if (!o->ndax)
        printf("  DAX: none\n");
    for (int i = 0; i < o->ndax; i++) {
        char sz[32];
        printf("  %-10s %-10s target node %d, %s\n", o->dax[i].name, o->dax[i].mode, o->dax[i].target_node,
               hm__fmt_size(o->dax[i].size, sz, sizeof sz));
    }
    printf("  memkind: %s\n", o->memkind[0] ? o->memkind : "not installed");

    printf("\nmissing (%d)\n", ng);
    if (!ng)
        printf("  nothing\n");
    for (int i = 0; i < ng; i++)
        printf("  - %s\n    remedy: %s\n", g[i].what, g[i].remedy);
    return HM_EXIT_OK;
}

static int run(const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t p;
    const char *arg;
    int json = 0, try_open = 1, k;
    hm_cli_init(&p, cmd, argc, argv, 0);
    while ((k = hm_cli_next(&p, &arg)) != -1) {
        switch (k) {
        case OPT_JSON: json = 1; break;
        case OPT_NO_OPEN: try_open = 0; break;
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (p.ind < argc)
        return hm_cli_usage(cmd, "unexpected argument '%s'", argv[p.ind]);
    hm_os_info_t *o = hm__xmalloc(sizeof *o);
    hm__os_probe(o);
    backends_t *b = hm__xcalloc(1, sizeof *b);
    probe_backends(b, try_open);
    gap_t g[8];
    int ng = gaps(o, g);
    int rc = json ? print_json(o, b, g, ng) : print_human(o, b, g, ng);
    free(b);
    free(o);
    return rc;
}

const hm_cmd_t hm_cmd_doctor = {
    "doctor", "Report what this machine offers: PMUs, NUMA nodes, memory tiers",
    "",
    "Reads /proc and /sys (under $HETMEM_SYSFS_ROOT when set, for captured trees)\n"
    "and tries to open each sampling backend's perf event once.",
    opts, run};
