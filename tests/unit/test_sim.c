/* Simulator model through its API: machine files, closed-form timing of
 * dependent and independent misses, placement of pages, capacity, report. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/common.h"
#include "hetmem/sim.h"
#include "sim/sim_int.h"

/* Round figures: 1 core, so the thread has the whole device. */
static const char *machine_json =
    "{\"name\": \"unit\", \"cores\": 1, \"burst_window_us\": 0,"
    " \"core\": {\"freq_ghz\": 1.0, \"base_cpi\": 1.0, \"rob\": 4096, \"mlp\": 10},"
    " \"caches\": [{\"name\": \"L1\", \"size\": \"4K\", \"assoc\": 4, \"latency\": 2},"
    "              {\"name\": \"L2\", \"size\": \"64K\", \"assoc\": 8, \"latency\": 10, \"shared\": true}],"
    " \"devices\": [{\"name\": \"ddr\", \"read_latency_ns\": 100, \"read_bandwidth_gbs\": 64, \"capacity\": \"64M\"},"
    "              {\"name\": \"hbm\", \"read_latency_ns\": 50, \"read_bandwidth_gbs\": 6.4, \"capacity\": \"1M\"}]}";

static hm_sim_machine_t *machine(void)
{
    hm_sim_machine_t *m = NULL;
    int rc = hm_sim_machine_parse(&m, "unit.json", machine_json);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        fprintf(stderr, "%s\n", hm_errdetail());
    return m;
}

static double report_num(const char *rep, const char *path)
{
    json_t *j = json_loads(rep, 0, NULL), *v = j;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = (*tok >= '0' && *tok <= '9') ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    double d = v && json_is_number(v) ? json_number_value(v) : -1;
    json_decref(j);
    return d;
}

/* Dependent chase: each load's address is the previous load's value, so
 * misses serialize at the device latency. */
static void test_chase(int dev, double lat)
{
    hm_sim_machine_t *m = machine();
    hm_sim_t *s;
    if (!m || hm_sim_open(&s, m, NULL, dev) < 0) {
        CHECK(0 && "machine, placement or hm_sim_open failed");
        return;
    }
    const uint64_t base = 0x10000000, n = 20000;
    uint64_t addr = base;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t next = base + ((i * 7919 + 1) % 65536) * 4096; /* 256 MiB span, no reuse */
        hm_sim_instructions(s, 3);
        hm_sim_load(s, addr, 8, next, 0);
        addr = next;
    }
    char *rep = hm_sim_report(s);
    CHECK_NEAR(report_num(rep, "runtime_s") * 1e9 / (double)n, lat, 0.05);
    CHECK_EQ_U64((uint64_t)report_num(rep, "instructions"), 3 * n);
    free(rep);
    hm_sim_close(s);
    hm_sim_machine_close(m);
}

/* Independent misses overlap up to the MLP limit (10): n misses take about
 * n * latency / 10 while the device is far from its bandwidth. */
static void test_mlp(void)
{
    hm_sim_machine_t *m = machine();
    hm_sim_t *s;
    if (!m || hm_sim_open(&s, m, NULL, 0) < 0) {
        CHECK(0 && "machine, placement or hm_sim_open failed");
        return;
    }
    const uint64_t n = 20000;
    for (uint64_t i = 0; i < n; i++)
        hm_sim_load(s, 0x10000000 + (i * 7919 % 65536) * 4096, 8, 0, 0);
    char *rep = hm_sim_report(s);
    CHECK_NEAR(report_num(rep, "runtime_s") * 1e9, (double)n * 100 / 10, 0.05);
    free(rep);
    hm_sim_close(s);
    hm_sim_machine_close(m);
}

/* Bandwidth-bound: hbm moves 6.4 B/ns, so a 64-byte line takes 10 ns; with
 * 10 misses in flight at 50 ns the demand is 12.8 B/ns, twice that. */
static void test_bandwidth(void)
{
    hm_sim_machine_t *m = machine();
    hm_sim_t *s;
    if (!m || hm_sim_open(&s, m, NULL, 1) < 0) {
        CHECK(0 && "machine, placement or hm_sim_open failed");
        return;
    }
    const uint64_t n = 20000;
    for (uint64_t i = 0; i < n; i++)
        hm_sim_load(s, 0x10000000 + (i * 7919 % 65536) * 4096, 8, 0, 0);
    char *rep = hm_sim_report(s);
    CHECK_NEAR(report_num(rep, "runtime_s") * 1e9, (double)n * 10, 0.05);
    CHECK_NEAR(report_num(rep, "devices.1.bandwidth_gbs"), 6.4, 0.05);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.1.bytes_read"), n * 64);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.0.bytes_read"), 0);
    free(rep);
    hm_sim_close(s);
    hm_sim_machine_close(m);
}

/* The machine() of this file with placement @p json; NULL (and a failed
 * check) when either does not load. */
static hm_sim_t *open_placed(hm_sim_machine_t *m, const char *json, hm_placement_t **pl)
{
    *pl = NULL;
    int rc = hm_placement_parse(pl, "p.json", json, hm_sim_machine_device_names(m), hm_sim_machine_ndevices(m));
    CHECK_EQ_INT(rc, 0);
    hm_sim_t *s;
    if (!m || !*pl || hm_sim_open(&s, m, *pl, -1) < 0) {
        CHECK(0 && "machine, placement or hm_sim_open failed");
        return NULL;
    }
    return s;
}

/* Placement: page interleave, capacity with spill, naming moves pages,
 * frees give capacity back. */
static void test_placement(void)
{
    hm_sim_machine_t *m = machine();
    hm_placement_t *pl;
    hm_sim_t *s = open_placed(m,
                              "{\"rules\": [{\"site\": \"0x11\", \"pages_percent\": 25, \"device\": \"hbm\"},"
                              "             {\"name\": \"hot\", \"device\": \"hbm\"}]}",
                              &pl);
    if (!s)
        return;
    /* 100 pages from a page-aligned address: 25 on hbm. */
    hm_sim_alloc(s, 0x40000000, 100 * 4096, 0x11);
    /* 512 KiB named "hot": fits in hbm's remaining 1 MiB - 100 KiB. */
    hm_sim_alloc(s, 0x50000000, 512 << 10, 0x22);
    CHECK_EQ_INT(hm_sim_name(s, 0x50000010, "hot"), 0);
    CHECK_EQ_INT(hm_sim_name(s, 0x60000000, "nothing"), HM_ENOTFOUND);
    /* Another 1 MiB wants hbm and spills all but what is left. */
    hm_sim_alloc(s, 0x70000000, 1 << 20, 0x33);
    CHECK_EQ_INT(hm_sim_name(s, 0x70000000, "hot"), 0);
    for (uint64_t a = 0x40000000; a < 0x40000000 + 100 * 4096; a += 64)
        hm_sim_load(s, a, 8, 0, 0);
    CHECK_EQ_INT(hm_sim_free(s, 0x70000000), 0);
    CHECK_EQ_INT(hm_sim_free(s, 0x70000000), HM_ENOTFOUND);
    char *rep = hm_sim_report(s);
    /* pages 0x40000..0x40063: (page % 100) < 25 -> hbm */
    uint64_t hbm_pages = 0;
    for (uint64_t p = 0x40000; p < 0x40000 + 100; p++)
        hbm_pages += p % 100 < 25;
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.1.bytes_read"), hbm_pages * 64 * 64);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.0.bytes_read"), (100 - hbm_pages) * 64 * 64);
    /* Capacity counts pages placed (the "hot" objects filled hbm and the
     * second spilled), the peak pages populated: only the touched ones. */
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.1.peak_bytes"), hbm_pages * 4096);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.1.spilled_bytes"), (1 << 20) - ((1 << 20) - (512 << 10) - hbm_pages * 4096));
    CHECK(strstr(rep, "\"name\": \"hot\"") != NULL);
    free(rep);
    hm_sim_close(s);
    hm_placement_close(pl);
    hm_sim_machine_close(m);
}

static void expect_bad(const char *json, int err, const char *part)
{
    hm_sim_machine_t *m = (hm_sim_machine_t *)0x1;
    int rc = hm_sim_machine_parse(&m, "bad.json", json);
    CHECK_EQ_INT(rc, err);
    CHECK(m == NULL);
    if (!strstr(hm_errdetail(), part)) {
        fprintf(stderr, "detail \"%s\" lacks \"%s\"\n", hm_errdetail(), part);
        CHECK(0);
    }
}

/* peak_bytes counts pages where they are populated (touched), as the OS
 * does: an object named (and moved) before it is written never counts on
 * the device it left; a written one moves its pages' count with them; the
 * peak is the most held at once and stays within capacity. */
static void test_peak(void)
{
    hm_sim_machine_t *m = machine();
    hm_placement_t *pl = NULL;
    int rc = hm_placement_parse(&pl, "p.json", "{\"rules\": [{\"name\": \"hot\", \"device\": \"hbm\"}]}",
                                hm_sim_machine_device_names(m), hm_sim_machine_ndevices(m));
    CHECK_EQ_INT(rc, 0);
    hm_sim_t *s;
    if (!m || !pl || hm_sim_open(&s, m, pl, -1) < 0) {
        CHECK(0 && "machine, placement or hm_sim_open failed");
        return;
    }
    /* A: 200 pages on ddr, named to hbm before any touch, then written. */
    hm_sim_alloc(s, 0x40000000, 200 * 4096, 0x44);
    CHECK_EQ_INT(hm_sim_name(s, 0x40000000, "hot"), 0);
    for (uint64_t a = 0x40000000; a < 0x40000000 + 200 * 4096; a += 4096)
        hm_sim_store(s, a, 8, 0);
    /* B: 100 pages written on ddr, then named: 56 fit in what is left of
     * hbm's 1 MiB and move with their data, 44 spill and stay. */
    hm_sim_alloc(s, 0x50000000, 100 * 4096, 0x55);
    for (uint64_t a = 0x50000000; a < 0x50000000 + 100 * 4096; a += 4096)
        hm_sim_store(s, a, 8, 0);
    CHECK_EQ_INT(hm_sim_name(s, 0x50000000, "hot"), 0);
    /* Freed, A gives its pages back; B's stay where they are. */
    CHECK_EQ_INT(hm_sim_free(s, 0x40000000), 0);
    hm_sim_alloc(s, 0x60000000, 10 * 4096, 0x66); /* allocated, never touched */
    char *rep = hm_sim_report(s);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.1.peak_bytes"), 1 << 20);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.0.peak_bytes"), 100 * 4096);
    CHECK_EQ_U64((uint64_t)report_num(rep, "devices.1.spilled_bytes"), 44 * 4096);
    CHECK_EQ_U64((uint64_t)report_num(rep, "migrated_bytes"), 56 * 4096);
    free(rep);
    hm_sim_close(s);
    hm_placement_close(pl);
    hm_sim_machine_close(m);
}

static void test_bad_machines(void)
{
    expect_bad("{\"name\": \"x\",\n \"cores\": }", HM_EBADJSON, "bad.json:2:");
    expect_bad("[]", HM_EBADMACHINE, "top level");
    expect_bad("{\"name\": \"x\"}", HM_EBADMACHINE, "missing \"cores\"");
    expect_bad("{\"name\": \"x\", \"cores\": 0}", HM_EBADMACHINE, "\"cores\" must be a number in [1, 4096]");
    expect_bad("{\"name\": \"x\", \"cores\": 1, \"core\": {\"freq_ghz\": 2, \"base_cpi\": 1, \"rob\": 100}}",
               HM_EBADMACHINE, "core: missing \"mlp\"");
    const char *core = "\"core\": {\"freq_ghz\": 2, \"base_cpi\": 1, \"rob\": 100, \"mlp\": 4}";
    char buf[1024];
    snprintf(buf, sizeof buf, "{\"name\": \"x\", \"cores\": 1, %s, \"caches\": []}", core);
    expect_bad(buf, HM_EBADMACHINE, "\"caches\" must be an array");
    snprintf(buf, sizeof buf,
             "{\"name\": \"x\", \"cores\": 1, %s, \"caches\": [{\"name\": \"L1\", \"size\": \"lots\", \"assoc\": 4, \"latency\": 1}]}",
             core);
    expect_bad(buf, HM_EBADMACHINE, "caches[0]: \"size\" must be a size");
    snprintf(buf, sizeof buf,
             "{\"name\": \"x\", \"cores\": 8, %s, \"caches\": [{\"name\": \"L3\", \"size\": 1024, \"assoc\": 4, \"latency\": 1, \"shared\": true}]}",
             core);
    expect_bad(buf, HM_EBADMACHINE, "smaller than one set");
    /* 912.5 GB of L3 over 56 cores (a fuzzed preset, 934400M) once asked for 2.2 GB of tags */
    snprintf(buf, sizeof buf,
             "{\"name\": \"x\", \"cores\": 56, %s, \"caches\": [{\"name\": \"L3\", \"size\": \"934400M\", \"assoc\": 15, \"latency\": 70, \"shared\": true}]}",
             core);
    expect_bad(buf, HM_EBADMACHINE, "caches[0]: \"size\" 979789414400 (per core 17496239542) is above the 536870912 per core");
    const char *l1 = "\"caches\": [{\"name\": \"L1\", \"size\": \"32K\", \"assoc\": 8, \"latency\": 4}]";
    snprintf(buf, sizeof buf, "{\"name\": \"x\", \"cores\": 1, %s, %s, \"devices\": []}", core, l1);
    expect_bad(buf, HM_EBADMACHINE, "\"devices\" must be an array");
    snprintf(buf, sizeof buf, "{\"name\": \"x\", \"cores\": 1, %s, %s, \"devices\": [{\"name\": \"d\", \"read_latency_ns\": 90}]}",
             core, l1);
    expect_bad(buf, HM_EBADMACHINE, "devices[0]: missing \"read_bandwidth_gbs\"");
    snprintf(buf, sizeof buf,
             "{\"name\": \"x\", \"cores\": 1, %s, %s, \"devices\": [{\"name\": \"d\", \"read_latency_ns\": 90, \"read_bandwidth_gbs\": 10},"
             " {\"name\": \"d\", \"read_latency_ns\": 90, \"read_bandwidth_gbs\": 10}]}",
             core, l1);
    expect_bad(buf, HM_EBADMACHINE, "duplicate device name \"d\"");
    snprintf(buf, sizeof buf, "{\"name\": \"x\", \"cores\": 1, \"colour\": 3, %s, %s}", core, l1);
    expect_bad(buf, HM_EBADMACHINE, "unknown key \"colour\"");
}

/* Every preset parses, has a default device first and two devices where
 * the preset is a tiered machine. */
static void test_presets(void)
{
    static const struct {
        const char *name;
        int ndev;
        const char *first;
    } presets[] = {{"ddr4", 1, "ddr"}, {"ddr5", 1, "ddr"}, {"knl-mcdram", 2, "ddr"},
                   {"spr-hbm", 2, "ddr"}, {"cxl", 2, "ddr"}, {"optane", 2, "ddr"}};
    for (size_t i = 0; i < HM_ARRAY_LEN(presets); i++) {
        char path[4096];
        int rc = hm_sim_machine_find(presets[i].name, NULL, path, sizeof path);
        CHECK_EQ_INT(rc, 0);
        hm_sim_machine_t *m = NULL;
        rc = hm_sim_machine_load(&m, path);
        if (rc)
            fprintf(stderr, "%s: %s\n", path, hm_errdetail());
        CHECK_EQ_INT(rc, 0);
        if (!m)
            continue;
        CHECK_STR_EQ(hm_sim_machine_name(m), presets[i].name);
        CHECK_EQ_INT(hm_sim_machine_ndevices(m), presets[i].ndev);
        CHECK_STR_EQ(hm_sim_machine_device_names(m)[0], presets[i].first);
        CHECK_EQ_INT(hm_sim_machine_device_index(m, "nope"), HM_ENODEV);
        hm_sim_t *s;
        CHECK_EQ_INT(hm_sim_open(&s, m, NULL, -1), 0);
        hm_sim_close(s);
        hm_sim_machine_close(m);
    }
    char path[64];
    CHECK_EQ_INT(hm_sim_machine_find("no-such-preset", NULL, path, sizeof path), HM_ENOTFOUND);
    CHECK_EQ_INT(hm_sim_machine_find("./x.json", NULL, path, sizeof path), 0);
    CHECK_STR_EQ(path, "./x.json");
}

/* A direct-mapped cache (assoc 1): two lines one cache size apart share the
 * one way of their set and evict each other on every access; two lines in
 * different sets both stay. Bit-PLRU must still pick way 0 as the victim. */
static void test_direct_mapped(void)
{
    const char *js =
        "{\"name\": \"dm\", \"cores\": 1, \"core\": {\"freq_ghz\": 1.0, \"base_cpi\": 1.0, \"rob\": 64, \"mlp\": 4},"
        " \"caches\": [{\"name\": \"L1\", \"size\": \"4K\", \"assoc\": 1, \"latency\": 2}],"
        " \"devices\": [{\"name\": \"ddr\", \"read_latency_ns\": 100, \"read_bandwidth_gbs\": 64, \"capacity\": \"64M\"}]}";
    for (int conflict = 0; conflict < 2; conflict++) {
        hm_sim_machine_t *m = NULL;
        hm_sim_t *s;
        if (hm_sim_machine_parse(&m, "dm.json", js) < 0 || hm_sim_open(&s, m, NULL, 0) < 0) {
            CHECK(0 && "direct-mapped machine or hm_sim_open failed");
            hm_sim_machine_close(m);
            return;
        }
        const uint64_t a = 0x10000000, b = a + (conflict ? 4096 : 64 * 3);
        for (int i = 0; i < 1000; i++) {
            hm_sim_load(s, a, 8, 0, 0);
            hm_sim_load(s, b, 8, 0, 0);
        }
        char *rep = hm_sim_report(s);
        double misses = report_num(rep, "levels.0.load_misses"), hits = report_num(rep, "levels.0.load_hits");
        if (conflict) {
            CHECK_EQ_U64((uint64_t)misses, 2000);
            CHECK_EQ_U64((uint64_t)hits, 0);
        } else {
            CHECK_EQ_U64((uint64_t)misses, 2);
            CHECK_EQ_U64((uint64_t)hits, 1998);
        }
        free(rep);
        hm_sim_close(s);
        hm_sim_machine_close(m);
    }
}

/* Bytes read from device @p d so far (the report would end the run). */
static uint64_t dev_read(hm_sim_t *s, int d)
{
    hm__sim_drain(s);
    return s->dev[d].lines_read * 64;
}

static void load_lines(hm_sim_t *s, uint64_t lo, uint64_t hi)
{
    for (uint64_t a = lo; a < hi; a += 64)
        hm_sim_load(s, a, 8, 0, 0);
}

/* A (ddr, the default) has page 0x40000 and the first half of 0x40001; B
 * (hbm) the second half of 0x40001, which A placed first, and 0x40002. C
 * (hbm) places page 0x40003; U, unplaced, shares it. */
static void shared_layout(hm_sim_t *s)
{
    hm_sim_alloc(s, 0x40000000, 0x1800, 0xa);
    hm_sim_alloc(s, 0x40001800, 0x1800, 0xb);
    hm_sim_alloc(s, 0x40003000, 0x800, 0xc);
    hm_sim_alloc_unplaced(s, 0x40003800, 0x800);
}

/* Pages shared by objects (glibc puts neighbours on one page): hetmem run
 * gives each placed object pages of its own, so each object's bytes come
 * from its own device, whoever placed the page first; an unplaced
 * allocation (under --min-size: left in the program's heap) stays on the
 * default device, also on a page a placed object owns; a freed owner hands
 * the page to the allocation still on it, on that one's device. Each step
 * loads 32 lines (2 KiB) not loaded before: no cache hits, no prefetcher. */
static void test_shared_pages(void)
{
    hm_sim_machine_t *m = machine();
    hm_placement_t *pl;
    hm_sim_t *s = open_placed(m, "{\"rules\": [{\"site\": \"0xb\", \"device\": \"hbm\"}, {\"site\": \"0xc\", \"device\": \"hbm\"}]}", &pl);
    if (!s)
        return;
    shared_layout(s);
    CHECK_EQ_INT(hm_sim_placed_at(s, 0x40003800), 0);
    CHECK_EQ_INT(hm_sim_placed_at(s, 0x40003000), 1);
    CHECK_EQ_INT(hm_sim_placed_at(s, 0x40003808), HM_ENOTFOUND);
    load_lines(s, 0x40001800, 0x40002000); /* B on the page A placed: hbm */
    CHECK_EQ_U64(dev_read(s, 1), 2048);
    CHECK_EQ_U64(dev_read(s, 0), 0);
    load_lines(s, 0x40001000, 0x40001800); /* A on it: ddr */
    CHECK_EQ_U64(dev_read(s, 0), 2048);
    load_lines(s, 0x40003800, 0x40004000); /* U on C's page: ddr */
    CHECK_EQ_U64(dev_read(s, 0), 4096);
    CHECK_EQ_U64(dev_read(s, 1), 2048);
    hm_sim_close(s);
    /* The same steps, then A and C freed: B takes page 0x40001 over on
     * hbm, U page 0x40003 on ddr; placed pages: B's two on hbm, U's one
     * on ddr. */
    if (hm_sim_open(&s, m, pl, -1) == 0) {
        shared_layout(s);
        CHECK_EQ_INT(hm_sim_free(s, 0x40000000), 0);
        CHECK_EQ_INT(hm_sim_free(s, 0x40003000), 0);
        load_lines(s, 0x40001800, 0x40002000);
        load_lines(s, 0x40003800, 0x40004000);
        CHECK_EQ_U64(dev_read(s, 1), 2048);
        CHECK_EQ_U64(dev_read(s, 0), 2048);
        CHECK_EQ_U64(hm__sim_page_entry(s, 0x40001000) >> 32 & 0xff, 2); /* device + 1 */
        CHECK_EQ_U64(hm__sim_page_entry(s, 0x40003000) >> 32 & 0xff, 1);
        CHECK_EQ_U64(s->dev[1].used_pages, 2);
        CHECK_EQ_U64(s->dev[0].used_pages, 1);
        hm_sim_close(s);
    }
    hm_placement_close(pl);
    hm_sim_machine_close(m);
}

int main(void)
{
    test_chase(0, 100);
    test_chase(1, 50);
    test_mlp();
    test_bandwidth();
    test_placement();
    test_shared_pages();
    test_peak();
    test_bad_machines();
    test_presets();
    test_direct_mapped();
    return check_done();
}
