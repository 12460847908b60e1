/* What a recorded trace says about the machine it was recorded on: its
 * identity (host name, CPU model, memory nodes), so that the estimator can
 * refuse runs of different machines, and its memory nodes' figures where
 * the kernel gives them (ACPI HMAT, through the os layer), so that the
 * estimator's bandwidth terms have something to work with. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "os/os.h"
#include "record/record_int.h"

/* One HMAT figure of a node: CPU initiators (access1) first, as the
 * program's threads are CPUs; any initiator (access0) when the kernel has
 * no access1 class. The kernel writes 0 for a figure HMAT does not give. */
static uint32_t hmat_figure(const hm_os_node_t *n, size_t off)
{
    for (int a = 1; a >= 0; a--) {
        const hm_os_hmat_t *h = &n->access[a];
        uint32_t v;
        memcpy(&v, (const char *)h + off, sizeof v);
        if (h->valid && v > 0)
            return v;
    }
    return 0;
}

/* CPUs sharing a node's bandwidth: those of one node with CPUs (a socket),
 * the most of any. The estimator gives the traced thread that share. */
static int cpus_per_socket(const hm_os_info_t *o)
{
    int c = 0;
    for (int i = 0; i < o->nnodes; i++)
        if (o->nodes[i].ncpus > c)
            c = o->nodes[i].ncpus;
    return c > 0 ? c : 1;
}

static json_t *hmat_machine(const hm_os_info_t *o)
{
    json_t *devs = json_array();
    int figures = 0;
    for (int i = 0; i < o->nnodes; i++) {
        const hm_os_node_t *n = &o->nodes[i];
        if (n->mem_total == 0)
            continue; /* a node of CPUs only holds no data */
        char name[32];
        snprintf(name, sizeof name, "node%d", n->id);
        json_t *d = json_pack("{s:s}", "name", name);
        static const struct {
            const char *key;
            size_t off;
            double scale; /* sysfs unit to the machine file's */
        } f[] = {
            {"read_latency_ns", offsetof(hm_os_hmat_t, read_latency), 1.0},
            {"write_latency_ns", offsetof(hm_os_hmat_t, write_latency), 1.0},
            {"read_bandwidth_gbs", offsetof(hm_os_hmat_t, read_bandwidth), 1e-3}, /* MB/s */
            {"write_bandwidth_gbs", offsetof(hm_os_hmat_t, write_bandwidth), 1e-3},
        };
        for (size_t k = 0; k < HM_ARRAY_LEN(f); k++) {
            uint32_t v = hmat_figure(n, f[k].off);
            if (v) {
                json_object_set_new(d, f[k].key, json_real(v * f[k].scale));
                figures++;
            }
        }
        json_object_set_new(d, "capacity", json_integer((json_int_t)n->mem_total));
        json_array_append_new(devs, d);
    }
    if (!figures) {
        json_decref(devs);
        return NULL;
    }
    return json_pack("{s:s, s:i, s:o}", "name", o->hostname[0] ? o->hostname : "this machine", "cores",
                     cpus_per_socket(o), "devices", devs);
}

int hm__rec_describe(const struct hm_os_info *o, uint64_t bind_mask, const char *machine_json, const char *machine_what,
                     char **host_out, char **machine_out)
{
    *host_out = *machine_out = NULL;
    json_t *nodes = json_array(), *bound = json_array();
    for (int i = 0; i < o->nnodes; i++) {
        const hm_os_node_t *n = &o->nodes[i];
        char name[32];
        snprintf(name, sizeof name, "node%d", n->id);
        json_t *x = json_pack("{s:s, s:s, s:i, s:I}", "name", name, "kind", n->kind, "cpus", n->ncpus, "bytes",
                              (json_int_t)n->mem_total);
        if (n->tier >= 0)
            json_object_set_new(x, "tier", json_integer(n->tier));
        json_array_append_new(nodes, x);
        if (n->id < 64 && (bind_mask >> n->id & 1))
            json_array_append_new(bound, json_integer(n->id));
    }
    json_t *machine = NULL;
    const char *figures = "none";
    char from[300];
    if (machine_json) {
        int rc = hm__json_load_string(machine_what ? machine_what : "machine description", machine_json, &machine);
        if (rc < 0) {
            json_decref(nodes);
            json_decref(bound);
            return rc;
        }
        snprintf(from, sizeof from, "machine file %s", machine_what ? machine_what : "");
        figures = from;
    } else if ((machine = hmat_machine(o))) {
        figures = "hmat";
    }
    /* The core clock turns the samples' latency weights (core cycles) into
     * the ns of the device figures (docs/estimator.md, "Device figures"):
     * this machine's, where the description does not give one. */
    json_t *core = machine ? json_object_get(machine, "core") : NULL;
    if (machine && o->core_ghz > 0 && !json_is_number(json_object_get(core, "freq_ghz"))) {
        if (!json_is_object(core))
            json_object_set_new(machine, "core", core = json_object());
        json_object_set_new(core, "freq_ghz", json_real(o->core_ghz));
    }
    /* Strings from procfs need not be UTF-8: json_string() refuses them,
     * so such a name is kept as "" rather than lost with the whole key. */
    json_t *hn = json_string(o->hostname), *cpu = json_string(o->model);
    json_t *host = json_pack("{s:o, s:o, s:o, s:o, s:s}", "name", hn ? hn : json_string(""), "cpu",
                             cpu ? cpu : json_string(""), "nodes", nodes, "bound_nodes", bound, "figures", figures);
    *host_out = host ? json_dumps(host, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(host);
    if (machine) {
        *machine_out = json_dumps(machine, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(machine);
    }
    if (!*host_out || (machine && !*machine_out)) {
        free(*host_out);
        free(*machine_out);
        *host_out = *machine_out = NULL;
        return -ENOMEM;
    }
    return 0;
}
