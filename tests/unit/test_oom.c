/* Allocation failure in libhetmem's public entry points. This test is
 * linked with the linker's --wrap of malloc, calloc, realloc, strdup and
 * asprintf (tests/CMakeLists.txt), so every allocation that hetmem's own
 * code makes goes through the counters below. For each entry point, one
 * call is made with no failure to count its allocations (n), then the call
 * is made again n times, the k-th allocation failing in the k-th: each must
 * return -ENOMEM with nothing handed back (no handle, no partial state),
 * never crash; under AddressSanitizer (make test-sanitize) nothing may leak
 * either. The one tolerated success is an estimate whose failed allocation
 * was only the compiled-placement cache: it must then give the same figures.
 * Allocations made inside jansson, zstd and libc are not failed here. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hetmem/error.h"
#include "hetmem/estimate.h"
#include "hetmem/placement.h"
#include "hetmem/trace.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
int __wrap_asprintf(char **out, const char *fmt, ...);

static long calls;        /* allocations since arm() */
static long fail_at = -1; /* the one to fail (1-based), or -1 */
static int failed;        /* whether it was reached */

static int fail_now(void)
{
    long k = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (k == __atomic_load_n(&fail_at, __ATOMIC_RELAXED)) {
        __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t sz) { return fail_now() ? NULL : __real_calloc(n, sz); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
int __wrap_asprintf(char **out, const char *fmt, ...)
{
    if (fail_now())
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(out, fmt, ap);
    va_end(ap);
    return rc;
}

static void arm(long k)
{
    calls = 0;
    failed = 0;
    fail_at = k;
}

/* Allocations counted since arm(), and stops failing. */
static long disarm(void)
{
    fail_at = -1;
    return calls;
}

static char dir[] = "/tmp/hm-oom-XXXXXX";
static char trace_path[2][300];

/* A run of two phases over two objects (one named), with instruction
 * counters, on device dev; the slow device's samples weigh more. */
static void write_run(const char *path, const char *dev, int slow)
{
    const char *argv[] = {"./app.sim", NULL};
    const char *machine = "{\"name\": \"m\", \"devices\": [{\"name\": \"slow\", \"read_latency_ns\": 300, "
                          "\"read_bandwidth_gbs\": 20}, {\"name\": \"fast\", \"read_latency_ns\": 100, "
                          "\"read_bandwidth_gbs\": 80}]}";
    hm_trace_meta_t m = {"unit", "sim", 1.0, "sim", "loads", 1000, dev, machine, argv, NULL, 0};
    hm_trace_writer_t *w;
    CHECK_EQ_INT(hm_trace_writer_open(&w, path, &m), 0);
    if (!w)
        return;
    hm_trace_write_site(w, 0xa, "app.sim+0x10 alloc_a");
    hm_trace_write_site(w, 0xb, "app.sim+0x20 alloc_b");
    hm_alloc_t a = {10, 0x100000000ull, 64 << 20, 0xa, 0}, b = {20, 0x200000000ull, 32 << 20, 0xb, 0};
    hm_trace_write_alloc(w, &a);
    hm_trace_write_alloc(w, &b);
    hm_trace_write_name(w, 11, a.addr, "A");
    uint64_t t = 1000000, ins = 0;
    for (int ph = 0; ph < 2; ph++) {
        const char *name = ph ? "p2" : "p1";
        uint64_t dur = (uint64_t)(ph ? 1e6 : 2e6) * (slow ? 2 : 1);
        hm_trace_write_phase(w, 1, t, 0, name);
        for (int i = 0; i < 2000; i++) {
            uint64_t st = t + (uint64_t)i * dur / 2000;
            uint64_t base = i % 4 == 3 ? 0x700000000ull : ph ? b.addr : a.addr;
            hm_sample_t s = {st, base + (uint64_t)(i * 4096 % (16 << 20)), 0x1234, 0,
                             (uint32_t)(slow ? 300 : 100), HM_DSRC_MAKE_MEM(0), (uint8_t)(i % 5 == 0)};
            hm_trace_write_sample(w, &s);
            if (i % 16 == 0) {
                hm_counter_t c = {st, ins + (uint64_t)i * 1000, HM_COUNTER_INSTRUCTIONS, 0};
                hm_trace_write_counter(w, &c);
            }
        }
        ins += 2000 * 1000;
        t += dur;
        hm_trace_write_phase(w, 0, t, 0, name);
    }
    hm_trace_end_t end = {t + 1000, 0};
    CHECK_EQ_INT(hm_trace_writer_close(w, &end), 0);
}

static const char *const devs[] = {"slow", "fast"};
static const char placement_json[] =
    "{\"default\": \"slow\", \"rules\": [{\"name\": \"A\", \"device\": \"fast\"}, "
    "{\"site\": \"0xb\", \"pages_percent\": 40, \"device\": \"fast\"}, {\"site\": \"app.c:12\", \"device\": \"slow\"}], "
    "\"phases\": {\"p2\": {\"rules\": [{\"site\": \"0xb\", \"device\": \"fast\"}]}}}";

static void test_placement_parse(void)
{
    hm_placement_t *p = NULL;
    arm(-1);
    int rc = hm_placement_parse(&p, "oom.json", placement_json, devs, 2);
    long n = disarm();
    CHECK_EQ_INT(rc, 0);
    hm_placement_close(p);
    CHECK(n >= 10); /* rules, their strings, the devices, the phases */
    int bad = 0;
    for (long k = 1; k <= n; k++) {
        p = (hm_placement_t *)&bad; /* must come back NULL */
        arm(k);
        rc = hm_placement_parse(&p, "oom.json", placement_json, devs, 2);
        disarm();
        if (rc != -ENOMEM || p || !failed) {
            fprintf(stderr, "placement parse, allocation %ld of %ld failing: rc %d (%s), handle %p\n", k, n, rc,
                    hm_err_name(rc), (void *)p);
            bad++;
            if (rc == 0)
                hm_placement_close(p);
        }
    }
    CHECK_EQ_INT(bad, 0);
    printf("placement parse: %ld allocations, each failed in turn\n", n);
}

static void test_estimator_open(void)
{
    const char *paths[] = {trace_path[0], trace_path[1]};
    hm_estimator_t *e = NULL;
    arm(-1);
    int rc = hm_estimator_open(&e, paths, 2, NULL);
    long n = disarm();
    CHECK_EQ_INT(rc, 0);
    hm_estimator_close(e);
    CHECK(n >= 50);
    int bad = 0;
    for (long k = 1; k <= n; k++) {
        e = (hm_estimator_t *)&bad;
        arm(k);
        rc = hm_estimator_open(&e, paths, 2, NULL);
        disarm();
        if (rc != -ENOMEM || e || !failed) {
            fprintf(stderr, "estimator open, allocation %ld of %ld failing: rc %d (%s: %s), handle %p\n", k, n, rc,
                    hm_err_name(rc), hm_errdetail(), (void *)e);
            bad++;
            if (rc == 0)
                hm_estimator_close(e);
        }
    }
    CHECK_EQ_INT(bad, 0);
    printf("estimator open: %ld allocations, each failed in turn\n", n);
}

static void test_parse_summary(hm_estimator_t *e)
{
    char path[320];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    CHECK_EQ_INT(hm_estimator_save(e, path), 0);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    unlink(path);
    hm_estimator_t *s = NULL;
    arm(-1);
    int rc = hm_estimator_parse_summary(&s, "summary", text);
    long n = disarm();
    CHECK_EQ_INT(rc, 0);
    hm_estimator_close(s);
    CHECK(n >= 30);
    int bad = 0;
    for (long k = 1; k <= n; k++) {
        s = (hm_estimator_t *)&bad;
        arm(k);
        rc = hm_estimator_parse_summary(&s, "summary", text);
        disarm();
        if (rc != -ENOMEM || s || !failed) {
            fprintf(stderr, "summary parse, allocation %ld of %ld failing: rc %d (%s: %s)\n", k, n, rc,
                    hm_err_name(rc), hm_errdetail());
            bad++;
            if (rc == 0)
                hm_estimator_close(s);
        }
    }
    CHECK_EQ_INT(bad, 0);
    printf("summary parse: %ld allocations, each failed in turn\n", n);
}

static void test_estimate(hm_estimator_t *e, hm_est_model_t model)
{
    /* A fresh placement handle each time: its first estimate compiles it
     * against the objects (and caches the result), as the first of a
     * search's does. */
    hm_placement_t *p = NULL;
    CHECK_EQ_INT(hm_placement_parse(&p, "oom.json", placement_json, devs, 2), 0);
    hm_estimate_t ref, r;
    const hm_est_breakdown_t *bd;
    arm(-1);
    int rc = hm_estimator_estimate(e, p, model, &ref, &bd);
    long n = disarm();
    hm_placement_close(p);
    CHECK_EQ_INT(rc, 0);
    CHECK(n >= 2); /* the state and the cache's copy */
    int bad = 0, cached_only = 0;
    for (long k = 1; k <= n; k++) {
        CHECK_EQ_INT(hm_placement_parse(&p, "oom.json", placement_json, devs, 2), 0);
        memset(&r, 0, sizeof r);
        arm(k);
        rc = hm_estimator_estimate(e, p, model, &r, &bd);
        disarm();
        hm_placement_close(p);
        if (rc == 0 && failed && r.runtime_ns == ref.runtime_ns && r.lo_ns == ref.lo_ns && r.hi_ns == ref.hi_ns) {
            cached_only++; /* the cache's copy: the estimate stands */
            continue;
        }
        if (rc != -ENOMEM || !failed) {
            fprintf(stderr, "estimate (%s), allocation %ld of %ld failing: rc %d (%s: %s)\n",
                    hm_est_model_name(model), k, n, rc, hm_err_name(rc), hm_errdetail());
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(cached_only <= 1);
    printf("estimate (%s): %ld allocations, each failed in turn (%d only the cache's)\n", hm_est_model_name(model), n,
           cached_only);

    /* And a state opened from scratch. */
    hm_est_state_t *s = NULL;
    arm(-1);
    rc = hm_est_state_open(&s, e, model, 1);
    n = disarm();
    CHECK_EQ_INT(rc, 0);
    hm_est_state_close(s);
    for (long k = 1; k <= n; k++) {
        s = (hm_est_state_t *)&bad;
        arm(k);
        rc = hm_est_state_open(&s, e, model, 1);
        disarm();
        CHECK_EQ_INT(rc, -ENOMEM);
        CHECK(s == NULL);
        if (rc == 0)
            hm_est_state_close(s);
    }
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        snprintf(trace_path[i], sizeof trace_path[i], "%s/%s.hmt", dir, devs[i]);
        write_run(trace_path[i], devs[i], i == 0);
    }
    test_placement_parse();
    test_estimator_open();
    const char *paths[] = {trace_path[0], trace_path[1]};
    hm_estimator_t *e = NULL;
    CHECK_EQ_INT(hm_estimator_open(&e, paths, 2, NULL), 0);
    if (e) {
        CHECK_EQ_INT(hm_estimator_find_object(e, 0, "no such object"), HM_ENOTFOUND);
        CHECK(hm_estimator_find_object(e, 0, "A") >= 0);
        test_parse_summary(e);
        test_estimate(e, HM_EST_LINEAR);
        test_estimate(e, HM_EST_DEFAULT);
        hm_estimator_close(e);
    }
    for (int i = 0; i < 2; i++)
        unlink(trace_path[i]);
    rmdir(dir);
    return check_done();
}
