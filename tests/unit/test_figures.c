/* Device figures as an input: the HMAT figures and identity that record
 * writes into a trace header (read from the captured tree hmat-ddr-cxl),
 * the estimator reading them by device name or by the nodes a run was bound
 * to, --machine figures overriding them, the note naming lacking figures,
 * and runs of different machines refused. */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"
#include "hetmem/estimate.h"
#include "hetmem/trace.h"
#include "os/os.h"
#include "record/record_int.h"

static char dir[256];

static char *path_of(const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static double jnum(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* A run of "./app" on @p device: one object streamed for @p ms, samples
 * served by memory, with the given header identity and figures. */
static void write_run(const char *path, const char *device, double ms, const char *backend, const char *machine,
                      const char *host)
{
    static const char *const argv[] = {"./app", NULL};
    hm_trace_meta_t m = {0};
    m.producer = "unit";
    m.clock = backend && !strcmp(backend, "sim") ? "sim" : "CLOCK_MONOTONIC";
    m.clock_ns_per_unit = 1.0;
    m.backend = backend;
    m.event = "loads";
    m.period = 1000;
    m.device = device;
    m.machine_json = machine;
    m.host_json = host;
    m.argv = argv;
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, &m), 0);
    hm_trace_write_site(w, 0xa, "app+0x10 alloc_a");
    hm_alloc_t a = {10, 0x100000000ull, 64ull << 20, 0xa, 0};
    hm_trace_write_alloc(w, &a);
    uint64_t dur = (uint64_t)(ms * 1e6);
    for (int i = 0; i < 400; i++) {
        hm_sample_t s = {100 + (uint64_t)i * dur / 400, 0x100000000ull + (uint64_t)i * 4096, 0x1234, 0,
                         (uint32_t)(ms * 2), HM_DSRC_MAKE_MEM(0), HM_ACCESS_LOAD};
        hm_trace_write_sample(w, &s);
    }
    hm_trace_end_t end = {100 + dur, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
}

/* Opens an estimator on two runs; returns the open's result. */
static int open_pair(hm_estimator_t **e, const char *tag, const char *dev0, const char *be0, const char *m0,
                     const char *h0, const char *dev1, const char *be1, const char *m1, const char *h1,
                     const char *override)
{
    char n0[64], n1[64];
    snprintf(n0, sizeof n0, "%s-0.hmt", tag);
    snprintf(n1, sizeof n1, "%s-1.hmt", tag);
    char *p0 = path_of(n0), *p1 = path_of(n1);
    write_run(p0, dev0, 30, be0, m0, h0);
    write_run(p1, dev1, 20, be1, m1, h1);
    const char *paths[] = {p0, p1};
    hm_estimator_opts_t o = {0, override};
    *e = NULL;
    int rc = hm_estimator_open(e, paths, 2, &o);
    free(p0);
    free(p1);
    return rc;
}

/* The devices of a saved summary: the figures as the estimator holds them. */
static json_t *saved_devices(hm_estimator_t *e, const char *tag)
{
    char n[64];
    snprintf(n, sizeof n, "%s-summary.json", tag);
    char *p = path_of(n);
    CHECK_EQ_INT(hm_estimator_save(e, p), 0);
    json_t *s = json_load_file(p, 0, NULL);
    free(p);
    CHECK(s != NULL);
    json_t *d = json_incref(json_object_get(s, "devices"));
    json_decref(s);
    return d;
}

static char *host_json, *machine_json; /* of node 0 (bound) and node 2 */
static char *host_json2;

/* What record writes on the captured machine: identity, and figures from
 * HMAT with access1 (CPU initiators) preferred, access0 where access1 lacks
 * a figure, MB/s to GB/s. */
static void test_hmat_header(void)
{
    hm_os_info_t *info = hm__xcalloc(1, sizeof *info);
    hm__os_probe(info);
    CHECK_STR_EQ(info->hostname, "cxl-lab-07");
    CHECK_EQ_INT(info->nnodes, 2);
    char *host = NULL, *machine = NULL;
    CHECK_EQ_INT(hm__rec_describe(info, 1ull << 2, NULL, NULL, &host, &machine), 0);
    CHECK(host && machine);
    json_t *h = json_loads(host, 0, NULL), *m = json_loads(machine, 0, NULL);
    CHECK(h && m);
    CHECK_STR_EQ(jstr(h, "name"), "cxl-lab-07");
    CHECK_STR_EQ(jstr(h, "cpu"), "Intel(R) Xeon(R) Gold 6430");
    CHECK_STR_EQ(jstr(h, "figures"), "hmat");
    json_t *nodes = json_object_get(h, "nodes");
    CHECK_EQ_INT((int)json_array_size(nodes), 2);
    json_t *n0 = json_array_get(nodes, 0), *n2 = json_array_get(nodes, 1);
    CHECK_STR_EQ(jstr(n0, "name"), "node0");
    CHECK_STR_EQ(jstr(n0, "kind"), "ddr");
    CHECK_EQ_INT((int)json_integer_value(json_object_get(n0, "tier")), 4);
    CHECK_EQ_INT((int)json_integer_value(json_object_get(n0, "cpus")), 32);
    CHECK_STR_EQ(jstr(n2, "name"), "node2");
    CHECK_STR_EQ(jstr(n2, "kind"), "cxl"); /* 210 ns against 96: over 1.3x */
    CHECK_EQ_INT((int)json_integer_value(json_object_get(n2, "tier")), 22);
    CHECK_EQ_U64((uint64_t)json_integer_value(json_object_get(n2, "bytes")), 134217728ull * 1024);
    json_t *bound = json_object_get(h, "bound_nodes");
    CHECK_EQ_INT((int)json_array_size(bound), 1);
    CHECK_EQ_INT((int)json_integer_value(json_array_get(bound, 0)), 2);

    CHECK_EQ_INT((int)jnum(m, "cores"), 32); /* CPUs of the node with CPUs */
    json_t *devs = json_object_get(m, "devices");
    CHECK_EQ_INT((int)json_array_size(devs), 2);
    json_t *d0 = json_array_get(devs, 0), *d2 = json_array_get(devs, 1);
    CHECK_STR_EQ(jstr(d0, "name"), "node0");
    CHECK_NEAR(jnum(d0, "read_latency_ns"), 96, 1e-12);
    CHECK_NEAR(jnum(d0, "write_latency_ns"), 102, 1e-12);
    CHECK_NEAR(jnum(d0, "read_bandwidth_gbs"), 262.144, 1e-12);  /* 262144 MB/s */
    CHECK_NEAR(jnum(d0, "write_bandwidth_gbs"), 196.608, 1e-12);
    CHECK_EQ_U64((uint64_t)json_integer_value(json_object_get(d0, "capacity")), 33554432ull * 1024);
    CHECK_STR_EQ(jstr(d2, "name"), "node2");
    CHECK_NEAR(jnum(d2, "read_latency_ns"), 271, 1e-12);          /* access1, not access0's 210 */
    CHECK_NEAR(jnum(d2, "write_latency_ns"), 230, 1e-12);         /* access1 has none: access0's */
    CHECK_NEAR(jnum(d2, "read_bandwidth_gbs"), 52.0, 1e-12);      /* access1, not access0's 65.536 */
    CHECK_NEAR(jnum(d2, "write_bandwidth_gbs"), 48.0, 1e-12);
    json_decref(h);
    json_decref(m);
    host_json2 = host;
    machine_json = machine;
    /* The run bound to node 0, for the estimator test. */
    CHECK_EQ_INT(hm__rec_describe(info, 1ull << 0, NULL, NULL, &host, &machine), 0);
    host_json = host;
    free(machine);

    /* A machine file given: its figures, and the identity still the host's. */
    const char *file = "{\"name\":\"lab\",\"cores\":4,\"devices\":[{\"name\":\"ddr\",\"read_latency_ns\":90,"
                       "\"read_bandwidth_gbs\":100}]}";
    CHECK_EQ_INT(hm__rec_describe(info, 1, file, "lab.json", &host, &machine), 0);
    h = json_loads(host, 0, NULL);
    m = json_loads(machine, 0, NULL);
    CHECK_STR_EQ(jstr(h, "figures"), "machine file lab.json");
    CHECK_STR_EQ(jstr(h, "name"), "cxl-lab-07");
    CHECK_STR_EQ(jstr(m, "name"), "lab");
    /* The core clock the file lacks is the host's (cpuinfo "cpu MHz" 2100);
     * one the file gives is kept. */
    CHECK(fabs(jnum(json_object_get(m, "core"), "freq_ghz") - 2.1) < 1e-9);
    json_decref(h);
    json_decref(m);
    free(host);
    free(machine);
    CHECK_EQ_INT(hm__rec_describe(info, 1,
                                  "{\"name\":\"lab\",\"core\":{\"freq_ghz\":3,\"rob\":512},\"devices\":[{\"name\":"
                                  "\"ddr\",\"read_latency_ns\":90}]}",
                                  "lab.json", &host, &machine),
                 0);
    m = json_loads(machine, 0, NULL);
    CHECK(jnum(json_object_get(m, "core"), "freq_ghz") == 3 && jnum(json_object_get(m, "core"), "rob") == 512);
    json_decref(m);
    free(host);
    free(machine);
    CHECK_EQ_INT(hm__rec_describe(info, 1, "{bad", "bad.json", &host, &machine), HM_EBADJSON);

    /* The header carries both through a trace. */
    char *p = path_of("hdr.hmt");
    write_run(p, "node2", 10, "soft", machine_json, host_json2);
    hm_trace_t *t;
    CHECK_EQ_INT(hm_trace_open(&t, p), 0);
    const hm_trace_meta_t *rm = hm_trace_meta(t);
    CHECK(rm->host_json && strstr(rm->host_json, "\"cxl-lab-07\"") && strstr(rm->host_json, "\"bound_nodes\":[2]"));
    CHECK(rm->machine_json && strstr(rm->machine_json, "\"read_bandwidth_gbs\":52"));
    CHECK(rm->machine_json && strstr(rm->machine_json, "\"freq_ghz\":2.1")); /* HMAT figures, the host's clock */
    hm_trace_close(t);
    free(p);
    free(info);
}

/* The estimator finds a recorded run's figures through the nodes it was
 * bound to, takes --machine figures over the traces', and says which
 * figures it lacks. */
static void test_estimator_figures(void)
{
    hm_estimator_t *e;
    /* Runs named as record --bind names them ("ddr", "cxl"), bound to nodes
     * 0 and 2: the figures are those of node0 and node2, per core. */
    CHECK_EQ_INT(open_pair(&e, "hmat", "ddr", "soft", machine_json, host_json, "cxl", "soft", machine_json,
                           host_json2, NULL), 0);
    CHECK(hm_estimator_figures_note(e) == NULL);
    CHECK_EQ_INT(hm_estimator_device_lacks(e, 0), 0);
    CHECK_EQ_INT(hm_estimator_device_lacks(e, 1), 0);
    json_t *d = saved_devices(e, "hmat");
    CHECK_NEAR(jnum(json_array_get(d, 0), "bandwidth_gbs"), 262.144 / 32, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 0), "write_bandwidth_gbs"), 196.608 / 32, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 0), "read_latency_ns"), 96, 1e-12);
    CHECK_EQ_U64((uint64_t)json_integer_value(json_object_get(json_array_get(d, 0), "capacity")),
                 33554432ull * 1024 / 32);
    CHECK_NEAR(jnum(json_array_get(d, 1), "bandwidth_gbs"), 52.0 / 32, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 1), "read_latency_ns"), 271, 1e-12);
    json_decref(d);
    hm_estimator_close(e);

    /* --machine: its figures by device name, over the traces'. */
    const char *ov = "{\"name\":\"lab\",\"cores\":2,\"devices\":[{\"name\":\"ddr\",\"read_latency_ns\":100,"
                     "\"read_bandwidth_gbs\":64},{\"name\":\"cxl\",\"read_latency_ns\":300,\"read_bandwidth_gbs\":16,"
                     "\"write_bandwidth_gbs\":8,\"capacity\":\"64G\"}]}";
    CHECK_EQ_INT(open_pair(&e, "ov", "ddr", "soft", machine_json, host_json, "cxl", "soft", machine_json, host_json2,
                           ov), 0);
    d = saved_devices(e, "ov");
    CHECK_NEAR(jnum(json_array_get(d, 0), "bandwidth_gbs"), 32, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 0), "read_latency_ns"), 100, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 1), "bandwidth_gbs"), 8, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 1), "write_bandwidth_gbs"), 4, 1e-12);
    CHECK_NEAR(jnum(json_array_get(d, 1), "read_latency_ns"), 300, 1e-12);
    CHECK_EQ_U64((uint64_t)json_integer_value(json_object_get(json_array_get(d, 1), "capacity")), 32ull << 30);
    json_decref(d);
    CHECK(hm_estimator_figures_note(e) == NULL);
    hm_estimator_close(e);

    /* A --machine without the device: that device lacks its figures, and
     * the note names it and what the model does without them. */
    const char *half = "{\"name\":\"lab\",\"devices\":[{\"name\":\"ddr\",\"read_latency_ns\":100,\"read_bandwidth_gbs\":64}]}";
    CHECK_EQ_INT(open_pair(&e, "half", "ddr", "soft", NULL, host_json, "hbm", "soft", NULL, host_json2, half), 0);
    CHECK_EQ_INT(hm_estimator_device_lacks(e, 0), 0);
    CHECK_EQ_INT(hm_estimator_device_lacks(e, 1), HM_EST_LACKS_BANDWIDTH | HM_EST_LACKS_LATENCY);
    const char *note = hm_estimator_figures_note(e);
    CHECK(note && strstr(note, "read bandwidth of hbm;") && strstr(note, "read latency of hbm:") &&
          strstr(note, "no migration cost") && !strstr(note, "ddr"));
    hm_estimator_close(e);

    /* No figures anywhere (a recorded run without HMAT or --machine). */
    CHECK_EQ_INT(open_pair(&e, "none", "ddr", "soft", NULL, host_json, "cxl", "soft", NULL, host_json2, NULL), 0);
    note = hm_estimator_figures_note(e);
    CHECK(note && strstr(note, "read bandwidth of ddr, cxl") && strstr(note, "read latency of ddr, cxl"));
    hm_estimator_close(e);

    /* A malformed --machine. */
    CHECK_EQ_INT(open_pair(&e, "badov", "ddr", "soft", NULL, host_json, "cxl", "soft", NULL, host_json2, "{x"),
                 HM_EBADJSON);
}

static char *with(const char *host, const char *key, json_t *val)
{
    json_t *h = json_loads(host, 0, NULL);
    json_object_set_new(h, key, val);
    char *s = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    return s;
}

static void refused(int rc, const char *what)
{
    if (rc != HM_EMISMATCH)
        fprintf(stderr, "%s: got %s (%s)\n", what, hm_err_name(rc), hm_errdetail());
    CHECK_EQ_INT(rc, HM_EMISMATCH);
    CHECK(strstr(hm_errdetail(), "different machines") != NULL);
    CHECK(strstr(hm_errdetail(), "-0.hmt") && strstr(hm_errdetail(), "-1.hmt")); /* names both */
}

/* Runs of different machines are refused with one line naming both. */
static void test_mixed_machines(void)
{
    hm_estimator_t *e;
    char *other_host = with(host_json2, "name", json_string("cxl-lab-08"));
    refused(open_pair(&e, "mhost", "ddr", "soft", NULL, host_json, "cxl", "soft", NULL, other_host, NULL), "host");
    CHECK(strstr(hm_errdetail(), "host cxl-lab-07") && strstr(hm_errdetail(), "host cxl-lab-08"));
    char *other_cpu = with(host_json2, "cpu", json_string("AMD EPYC 9654"));
    refused(open_pair(&e, "mcpu", "ddr", "soft", NULL, host_json, "cxl", "soft", NULL, other_cpu, NULL), "cpu");
    CHECK(strstr(hm_errdetail(), "AMD EPYC 9654") != NULL);
    char *other_nodes = with(host_json2, "nodes", json_pack("[{s:s}]", "name", "node0"));
    refused(open_pair(&e, "mnodes", "ddr", "soft", NULL, host_json, "cxl", "soft", NULL, other_nodes, NULL), "nodes");
    /* Simulated machines: by name and devices (knl-mcdram against spr-hbm). */
    const char *knl = "{\"name\":\"knl-mcdram\",\"devices\":[{\"name\":\"ddr\"},{\"name\":\"mcdram\"}]}";
    const char *spr = "{\"name\":\"spr-hbm\",\"devices\":[{\"name\":\"ddr\"},{\"name\":\"hbm\"}]}";
    refused(open_pair(&e, "msim", "ddr", "sim", knl, NULL, "hbm", "sim", spr, NULL, NULL), "sim");
    CHECK(strstr(hm_errdetail(), "'knl-mcdram'") && strstr(hm_errdetail(), "'spr-hbm'"));
    /* A simulated run and a recorded one. */
    refused(open_pair(&e, "msimrec", "ddr", "sim", knl, NULL, "hbm", "soft", NULL, host_json, NULL), "sim+rec");
    /* --machine changes figures, not which machine a run was made on. */
    refused(open_pair(&e, "mov", "ddr", "sim", knl, NULL, "hbm", "sim", spr, NULL, knl), "override");
    /* The same machine, and runs that do not say (older traces), are accepted. */
    CHECK_EQ_INT(open_pair(&e, "same", "ddr", "sim", spr, NULL, "hbm", "sim", spr, NULL, NULL), 0);
    hm_estimator_close(e);
    CHECK_EQ_INT(open_pair(&e, "old", "ddr", "soft", NULL, NULL, "hbm", "soft", NULL, NULL, NULL), 0);
    hm_estimator_close(e);
    /* A recorded run's machine name only names its figures' source: runs
     * of one host with figures from two files are one machine's. */
    const char *fa = "{\"name\":\"a\",\"core\":{\"freq_ghz\":2},\"devices\":[{\"name\":\"ddr\",\"read_latency_ns\":90,"
                     "\"read_bandwidth_gbs\":9}]}";
    const char *fb = "{\"name\":\"b\",\"core\":{\"freq_ghz\":2},\"devices\":[{\"name\":\"cxl\",\"read_latency_ns\":300,"
                     "\"read_bandwidth_gbs\":3}]}";
    CHECK_EQ_INT(open_pair(&e, "files", "ddr", "soft", fa, host_json, "cxl", "soft", fb, host_json2, NULL), 0);
    CHECK(hm_estimator_figures_note(e) == NULL);
    hm_estimator_close(e);
    free(other_host);
    free(other_cpu);
    free(other_nodes);
}

int main(void)
{
    const char *fx = getenv("HETMEM_FIXTURES");
    if (!fx) {
        printf("skip: HETMEM_FIXTURES not set\n");
        return 77;
    }
    char root[1024];
    snprintf(root, sizeof root, "%s/sysfs/hmat-ddr-cxl", fx);
    setenv("HETMEM_SYSFS_ROOT", root, 1); /* read once, at the first probe */
    snprintf(dir, sizeof dir, "%s/hm-test-figures-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_hmat_header();
    test_estimator_figures();
    test_mixed_machines();
    free(host_json);
    free(host_json2);
    free(machine_json);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
