/* Placement files: selectors, first match wins, phases with fallback, page
 * interleave, device resolution, and bad input refused with a located detail. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"
#include "hetmem/placement.h"

static const char *const devs[] = {"ddr", "hbm", "cxl"};

static hm_placement_t *parse(const char *json)
{
    hm_placement_t *p = NULL;
    int rc = hm_placement_parse(&p, "test.json", json, devs, 3);
    if (rc < 0)
        fprintf(stderr, "parse failed: %s: %s\n", hm_err_name(rc), hm_errdetail());
    CHECK_EQ_INT(rc, 0);
    return p;
}

static hm_place_t match(hm_placement_t *p, const char *phase, uint64_t site, const char *name, uint64_t addr,
                        uint64_t size)
{
    hm_object_desc_t o = {site, name, addr, size, NULL};
    hm_place_t pl;
    hm_placement_match(p, phase, &o, &pl);
    return pl;
}

static void test_selectors(void)
{
    hm_placement_t *p = parse("{\"default\": \"ddr\", \"rules\": ["
                              " {\"site\": \"0x3f2a91c07d5e1b44\", \"device\": \"hbm\"},"
                              " {\"name\": \"matrix\", \"device\": \"cxl\"},"
                              " {\"addr\": [\"0x10000\", \"0x20000\"], \"device\": \"hbm\"},"
                              " {\"min_size\": \"64M\", \"device\": \"cxl\"},"
                              " {\"name\": \"x\", \"min_size\": 100, \"device\": \"hbm\"},"
                              " {\"name\": \"vec\", \"pages_percent\": 30, \"device\": \"hbm\"}]}");
    if (!p)
        return;
    hm_place_t pl = match(p, NULL, 0x3f2a91c07d5e1b44ull, NULL, 0x5000000, 10);
    CHECK_EQ_INT(pl.rule, 0);
    CHECK_EQ_INT(pl.device, 1);
    CHECK_EQ_INT(pl.pages_percent, 100);
    pl = match(p, NULL, 1, "matrix", 0x5000000, 10);
    CHECK_EQ_INT(pl.rule, 1);
    CHECK_EQ_INT(pl.device, 2);
    /* first match wins: site rule before name rule */
    pl = match(p, NULL, 0x3f2a91c07d5e1b44ull, "matrix", 0, 10);
    CHECK_EQ_INT(pl.rule, 0);
    pl = match(p, NULL, 2, NULL, 0x18000, 10);
    CHECK_EQ_INT(pl.rule, 2);
    CHECK_EQ_INT(pl.device, 1);
    pl = match(p, NULL, 2, NULL, 0x20000, 10); /* hi is exclusive */
    CHECK_EQ_INT(pl.rule, -1);
    CHECK_EQ_INT(pl.device, 0);
    pl = match(p, NULL, 2, NULL, 0x900000, 64ull << 20);
    CHECK_EQ_INT(pl.rule, 3);
    CHECK_EQ_INT(pl.device, 2);
    /* combined selectors: all must match */
    pl = match(p, NULL, 2, "x", 0x900000, 99);
    CHECK_EQ_INT(pl.rule, -1);
    pl = match(p, NULL, 2, "x", 0x900000, 100);
    CHECK_EQ_INT(pl.rule, 4);
    pl = match(p, NULL, 2, "vec", 0x900000, 100);
    CHECK_EQ_INT(pl.rule, 5);
    CHECK_EQ_INT(pl.pages_percent, 30);
    CHECK_EQ_INT(pl.default_device, 0);
    /* page interleave: (vaddr>>12)%100 < 30 goes to hbm */
    int on_hbm = 0;
    for (uint64_t pg = 0; pg < 1000; pg++)
        on_hbm += hm_placement_page_device(&pl, pg << 12) == 1;
    CHECK_EQ_INT(on_hbm, 300);
    CHECK_EQ_INT(hm_placement_page_device(&pl, 29ull << 12), 1);
    CHECK_EQ_INT(hm_placement_page_device(&pl, 30ull << 12), 0);
    CHECK_EQ_INT(hm_placement_page_device(&pl, 129ull << 12), 1);
    CHECK_STR_EQ(hm_placement_device_name(p, 2), "cxl");
    CHECK(hm_placement_device_name(p, 3) == NULL);
    CHECK_EQ_INT(hm_placement_default_device(p), 0);
    CHECK_EQ_INT(hm_placement_has_phases(p), 0);
    CHECK(hm_placement_unmatched(p) == NULL);
    hm_placement_close(p);
}

static void test_phases_and_unmatched(void)
{
    hm_placement_t *p = parse("{\"default\": \"cxl\", \"rules\": [{\"name\": \"a\", \"device\": \"hbm\"},"
                              " {\"name\": \"matrx\", \"device\": \"hbm\"}],"
                              " \"phases\": {\"spmv\": {\"rules\": [{\"name\": \"b\", \"device\": \"ddr\"}]},"
                              "              \"init\": {\"rules\": [{\"name\": \"never\", \"device\": \"ddr\"}]}}}");
    if (!p)
        return;
    CHECK_EQ_INT(hm_placement_has_phases(p), 1);
    CHECK_EQ_INT(hm_placement_default_device(p), 2);
    hm_place_t pl = match(p, "spmv", 0, "b", 0, 1);
    CHECK_EQ_INT(pl.phase_rule, 1);
    CHECK_EQ_INT(pl.rule, 0);
    CHECK_EQ_INT(pl.device, 0);
    /* outside the phase, "b" has no rule: default */
    pl = match(p, NULL, 0, "b", 0, 1);
    CHECK_EQ_INT(pl.rule, -1);
    CHECK_EQ_INT(pl.device, 2);
    /* in the phase, "a" falls back to the top-level rules */
    pl = match(p, "spmv", 0, "a", 0, 1);
    CHECK_EQ_INT(pl.phase_rule, 0);
    CHECK_EQ_INT(pl.rule, 0);
    CHECK_EQ_INT(pl.device, 1);
    /* an unknown phase uses the top-level rules */
    pl = match(p, "other", 0, "a", 0, 1);
    CHECK_EQ_INT(pl.device, 1);
    char *u = hm_placement_unmatched(p);
    CHECK(u != NULL);
    if (u) {
        CHECK(strstr(u, "rules[1] {\"name\": \"matrx\", \"device\": \"hbm\"} matched nothing\n") != NULL);
        CHECK(strstr(u, "phases.init.rules[0]") != NULL);
        CHECK(strstr(u, "phases.spmv") == NULL);
        CHECK(strstr(u, "rules[0] {\"name\": \"a\"") == NULL);
        free(u);
    }
    hm_placement_close(p);
}

static void test_no_machine(void)
{
    hm_placement_t *p = NULL;
    int rc = hm_placement_parse(&p, "x", "{\"default\": \"slow\", \"rules\": [{\"device\": \"fast\"}]}", NULL, 0);
    CHECK_EQ_INT(rc, 0);
    if (!p)
        return;
    CHECK_STR_EQ(hm_placement_device_name(p, 0), "slow");
    CHECK_STR_EQ(hm_placement_device_name(p, 1), "fast");
    hm_place_t pl = match(p, NULL, 0, NULL, 0, 1); /* catch-all rule */
    CHECK_EQ_INT(pl.device, 1);
    hm_placement_close(p);
    /* without a machine the default is required */
    rc = hm_placement_parse(&p, "x", "{\"rules\": []}", NULL, 0);
    CHECK_EQ_INT(rc, HM_EBADPLACE);
    /* with a machine it defaults to the machine's first device */
    rc = hm_placement_parse(&p, "x", "{\"rules\": []}", devs, 3);
    CHECK_EQ_INT(rc, 0);
    if (p) {
        CHECK_EQ_INT(hm_placement_default_device(p), 0);
        hm_placement_close(p);
    }
}

static void expect_fail(const char *json, int err, const char *detail_part)
{
    hm_placement_t *p = (hm_placement_t *)0x1;
    int rc = hm_placement_parse(&p, "bad.json", json, devs, 3);
    CHECK_EQ_INT(rc, err);
    CHECK(p == NULL);
    if (!strstr(hm_errdetail(), detail_part)) {
        fprintf(stderr, "detail \"%s\" lacks \"%s\" (input %s)\n", hm_errdetail(), detail_part, json);
        CHECK(0);
    }
}

/* "site": "file:line" matches an object whose source chain (the
 * allocating call, the program's own inlined functions and callers)
 * passes through that line; a directory in the rule is ignored, a line
 * is the whole number (12 is not 120), and the hex form still works. */
static void test_source_sites(void)
{
    hm_placement_t *p = parse("{\"default\": \"ddr\", \"rules\": ["
                              " {\"site\": \"src/a.cc:12\", \"device\": \"hbm\"},"
                              " {\"site\": \"w.h:3\", \"device\": \"cxl\"}]}");
    if (!p)
        return;
    const char *wrapped = "w.h:3 Alloc < a.cc:12 main", *direct = "a.cc:12 main", *other = "a.cc:120 f";
    const char *srcs[] = {wrapped, direct, other, NULL};
    int want_rule[] = {0, 0, -1, -1};
    for (int i = 0; i < 4; i++) {
        hm_object_desc_t o = {7, NULL, 0, 64, srcs[i]};
        hm_place_t pl;
        hm_placement_match(p, NULL, &o, &pl);
        CHECK_EQ_INT(pl.rule, want_rule[i]);
    }
    hm_object_desc_t o = {7, NULL, 0, 64, "x.c:1 g < w.h:3 Alloc"};
    hm_place_t pl;
    hm_placement_match(p, NULL, &o, &pl);
    CHECK_EQ_INT(pl.rule, 1);
    CHECK_EQ_INT(pl.device, 2);
    hm_placement_close(p);
    expect_fail("{\"rules\": [{\"site\": \"a.cc:0\", \"device\": \"hbm\"}]}", HM_EBADPLACE, "source line");
    expect_fail("{\"rules\": [{\"site\": \":12\", \"device\": \"hbm\"}]}", HM_EBADPLACE, "source line");
}

static void test_bad_input(void)
{
    expect_fail("{\"default\": \"ddr\",\n \"rules\": [}", HM_EBADJSON, "bad.json:2:");
    expect_fail("[]", HM_EBADPLACE, "top level");
    expect_fail("{\"default\": \"nvm\"}", HM_ENODEV, "unknown device \"nvm\"");
    expect_fail("{\"rules\": [{\"name\": \"a\", \"device\": \"hbm3\"}]}", HM_ENODEV, "rules[0]: unknown device \"hbm3\"");
    expect_fail("{\"default\": 3}", HM_EBADPLACE, "\"default\" must be a string");
    expect_fail("{\"rules\": {}}", HM_EBADPLACE, "rules must be an array");
    expect_fail("{\"rules\": [3]}", HM_EBADPLACE, "rules[0]: a rule must be an object");
    expect_fail("{\"rules\": [{\"name\": \"a\"}]}", HM_EBADPLACE, "rules[0]: missing \"device\"");
    expect_fail("{\"rules\": [{\"site\": \"zz\", \"device\": \"hbm\"}]}", HM_EBADPLACE, "\"site\"");
    expect_fail("{\"rules\": [{\"site\": -4, \"device\": \"hbm\"}]}", HM_EBADPLACE, "\"site\"");
    expect_fail("{\"rules\": [{\"name\": 5, \"device\": \"hbm\"}]}", HM_EBADPLACE, "\"name\"");
    expect_fail("{\"rules\": [{\"addr\": [\"0x20\", \"0x10\"], \"device\": \"hbm\"}]}", HM_EBADPLACE, "\"addr\"");
    expect_fail("{\"rules\": [{\"addr\": \"0x20\", \"device\": \"hbm\"}]}", HM_EBADPLACE, "\"addr\"");
    expect_fail("{\"rules\": [{\"min_size\": \"lots\", \"device\": \"hbm\"}]}", HM_EBADPLACE, "\"min_size\"");
    expect_fail("{\"rules\": [{\"pages_percent\": 101, \"device\": \"hbm\"}]}", HM_EBADPLACE, "pages_percent");
    expect_fail("{\"rules\": [{\"pages_percent\": 3.5, \"device\": \"hbm\"}]}", HM_EBADPLACE, "pages_percent");
    expect_fail("{\"rules\": [{\"devcie\": \"hbm\"}]}", HM_EBADPLACE, "unknown key \"devcie\"");
    expect_fail("{\"rule\": []}", HM_EBADPLACE, "unknown key \"rule\"");
    expect_fail("{\"phases\": []}", HM_EBADPLACE, "\"phases\"");
    expect_fail("{\"phases\": {\"a\": {\"ruls\": []}}}", HM_EBADPLACE, "phases.a");
    expect_fail("{\"phases\": {\"a\": {\"rules\": [{\"device\": \"x\"}]}}}", HM_ENODEV, "phases.a.rules[0]");
}

static void test_load_file(void)
{
    char path[] = "/tmp/hm_place_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const char *txt = "{\"default\": \"ddr\",\n  \"rules\": [\n    {\"name\": \"a\", \"device\": \"hbm\",}\n]}\n";
    CHECK(write(fd, txt, strlen(txt)) == (ssize_t)strlen(txt));
    close(fd);
    hm_placement_t *p = NULL;
    int rc = hm_placement_load(&p, path, devs, 3);
    CHECK_EQ_INT(rc, HM_EBADJSON);
    char want[64];
    snprintf(want, sizeof want, "%s:3:", path);
    CHECK(strstr(hm_errdetail(), want) != NULL);
    unlink(path);
    rc = hm_placement_load(&p, path, devs, 3);
    CHECK(rc < 0 && rc > -1000); /* -ENOENT */
    CHECK(strstr(hm_errdetail(), path) != NULL);
}

/* Serials: never 0, distinct between live handles, and not reused by a
 * handle loaded after another was closed (it may get the same address). */
static void test_serial(void)
{
    hm_placement_t *a = parse("{\"default\": \"ddr\"}"), *b = parse("{\"default\": \"ddr\"}");
    if (!a || !b)
        return;
    uint64_t sa = hm_placement_serial(a), sb = hm_placement_serial(b);
    CHECK(sa != 0 && sb != 0);
    CHECK(sa != sb);
    CHECK_EQ_U64(hm_placement_serial(a), sa); /* stable for the handle's life */
    hm_placement_close(a);
    hm_placement_t *c = parse("{\"default\": \"ddr\"}");
    if (c) {
        CHECK(hm_placement_serial(c) != sa && hm_placement_serial(c) != sb);
        hm_placement_close(c);
    }
    hm_placement_close(b);
}

int main(void)
{
    test_serial();
    test_selectors();
    test_phases_and_unmatched();
    test_no_machine();
    test_bad_input();
    test_source_sites();
    test_load_file();
    return check_done();
}
