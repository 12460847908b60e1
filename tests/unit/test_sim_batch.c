/* The simulator queues accesses and simulates them in batches (src/sim/core.c).
 * This replays one synthetic program twice, once batched through sim.h's
 * inline hot path (the hooks' path: instructions counted inline, accesses
 * queued) and once through the public API an access at a time (the queue
 * drained after every access), and requires
 * the two runs to agree bit for bit: the report, and every sample. The
 * program mixes what the model distinguishes: streams (prefetcher), random
 * misses over a large range, pointer chases (dependence detection),
 * line-crossing accesses, stores (write-backs), an L1-resident loop, bulk
 * copies, allocations with a placement, phases and frees.
 *
 * With an argument (a machine name) it prints the batched run's report and
 * sample digest instead, for comparing two builds of the simulator. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"
#include "hetmem/placement.h"
#include "hetmem/sim.h"
#include "sim/sim.h"

typedef struct {
    uint64_t n, hash;
} digest_t;

static void on_sample(void *ctx, const hm_sample_t *smp)
{
    digest_t *d = ctx;
    uint64_t v[6] = {smp->time, smp->addr, smp->ip, smp->weight, smp->dsrc, smp->access};
    d->hash = hm__hash64(v, sizeof v, d->hash);
    d->n++;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* One access: queued as the hooks queue it, or (@p each) through the API
 * and drained at once. */
static void ld(hm_sim_t *s, int each, uint64_t a, unsigned sz, uint64_t val, uint64_t ip)
{
    if (!each) {
        hm__sim_load(s, a, sz, val, ip);
        return;
    }
    hm_sim_load(s, a, sz, val, ip);
    (void)hm_sim_access_count(s);
}

static void st(hm_sim_t *s, int each, uint64_t a, unsigned sz, uint64_t ip)
{
    if (!each) {
        hm__sim_store(s, a, sz, ip);
        return;
    }
    hm_sim_store(s, a, sz, ip);
    (void)hm_sim_access_count(s);
}

/* Runs the synthetic program; returns the report (malloc'd). */
static char *replay(const hm_sim_machine_t *m, hm_placement_t *pl, int each, uint64_t scale, digest_t *d)
{
    hm_sim_t *s;
    if (hm_sim_open(&s, m, pl, -1) < 0)
        return NULL;
    memset(d, 0, sizeof *d);
    hm_sim_set_sampler(s, 61, on_sample, d);
    const uint64_t A = 0x7f0000000000ull, B = 0x7f2000000000ull, C = 0x7f4000000000ull;
    const uint64_t big = 64ull << 20, small = 16ull << 10;
    hm_sim_alloc(s, A, big, 0x1111);
    hm_sim_alloc(s, B, big, 0x2222);
    hm_sim_name(s, B, "b");
    uint64_t x = 88172645463325252ull;
    for (uint64_t rep = 0; rep < scale; rep++) {
        hm_sim_phase(s, 1, "stream");
        for (uint64_t i = 0; i < (1u << 16); i++) { /* copy A -> B, 8-byte elements */
            hm__sim_instr(s, 5);
            ld(s, each, A + i * 8, 8, i, 0x401000);
            st(s, each, B + i * 8, 8, 0x401010);
        }
        hm_sim_phase(s, 0, "stream");
        hm_sim_phase(s, 1, "random");
        for (uint64_t i = 0; i < (1u << 15); i++) { /* independent random reads and updates */
            hm__sim_instr(s, 7);
            uint64_t a = A + (rnd(&x) % (big / 8)) * 8;
            ld(s, each, a, 8, rnd(&x) & 0xffff, 0x402000);
            if (i % 3 == 0)
                st(s, each, B + (rnd(&x) % (big / 4)) * 4, 4, 0x402010);
        }
        hm_sim_phase(s, 0, "random");
        /* a chase: each load's address is the previous load's value */
        uint64_t p = B + 64;
        for (uint64_t i = 0; i < (1u << 13); i++) {
            uint64_t next = B + (rnd(&x) % (big / 64)) * 64;
            hm__sim_instr(s, 3);
            ld(s, each, p, 8, next, 0x403000);
            p = next;
        }
        /* an L1-resident loop with line-crossing 16-byte accesses */
        for (uint64_t i = 0; i < (1u << 14); i++) {
            hm__sim_instr(s, 4);
            ld(s, each, C + (i * 24) % small, 16, 0, 0x404000);
            st(s, each, C + (i * 40 + 56) % small, 16, 0x404010);
        }
        /* a short-lived object placed by name, bulk copies into it */
        uint64_t t = C + (1ull << 30) + rep * (1ull << 24);
        hm_sim_alloc(s, t, 1u << 20, 0x3333);
        hm_sim_name(s, t, "tmp");
        hm_sim_load_range(s, A + rep * 4096, 1u << 19, 0x405000);
        hm_sim_store_range(s, t + 8, 1u << 19, 0x405000);
        for (uint64_t i = 0; i < (1u << 12); i++) {
            hm__sim_instr(s, 2);
            ld(s, each, t + (rnd(&x) % (1u << 20)), 1, 0, 0x406000);
        }
        hm_sim_free(s, t);
    }
    hm__sim_instr(s, 1000);
    char *rep = hm_sim_report(s);
    hm_sim_close(s);
    return rep;
}

static hm_sim_machine_t *preset(const char *name)
{
    char path[4096];
    hm_sim_machine_t *m = NULL;
    if (hm_sim_machine_find(name, NULL, path, sizeof path) < 0 || hm_sim_machine_load(&m, path) < 0) {
        fprintf(stderr, "%s: %s\n", name, hm_errdetail());
        return NULL;
    }
    return m;
}

/* Object b 40% and object tmp wholly on the machine's second device. */
static hm_placement_t *placement(const hm_sim_machine_t *m)
{
    if (hm_sim_machine_ndevices(m) < 2)
        return NULL;
    const char *fast = hm_sim_machine_device_names(m)[1];
    char json[512];
    snprintf(json, sizeof json,
             "{\"default\": \"%s\", \"rules\": [ {\"name\": \"b\", \"device\": \"%s\", \"pages_percent\": 40},"
             " {\"name\": \"tmp\", \"device\": \"%s\"}]}",
             hm_sim_machine_device_names(m)[0], fast, fast);
    char path[] = "/tmp/hetmem-test-batch-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    fputs(json, f);
    fclose(f);
    hm_placement_t *pl = NULL;
    int rc = hm_placement_load(&pl, path, hm_sim_machine_device_names(m), hm_sim_machine_ndevices(m));
    unlink(path);
    if (rc < 0)
        fprintf(stderr, "placement: %s\n", hm_errdetail());
    return pl;
}

static void compare(const char *name, int with_placement)
{
    hm_sim_machine_t *m = preset(name);
    CHECK(m != NULL);
    if (!m)
        return;
    hm_placement_t *pl = with_placement ? placement(m) : NULL;
    CHECK(!with_placement || pl != NULL);
    digest_t d1, d2, d3;
    char *r1 = replay(m, pl, 0, 2, &d1);
    char *r2 = replay(m, pl, 1, 2, &d2);
    char *r3 = replay(m, pl, 0, 2, &d3);
    CHECK(r1 && r2 && r3);
    if (r1 && r2 && r3) {
        CHECK_STR_EQ(r1, r2); /* batched == one at a time */
        CHECK_STR_EQ(r1, r3); /* deterministic */
    }
    CHECK_EQ_U64(d1.n, d2.n);
    CHECK_EQ_U64(d1.hash, d2.hash);
    CHECK_EQ_U64(d1.hash, d3.hash);
    CHECK(d1.n > 1000);
    free(r1);
    free(r2);
    free(r3);
    hm_placement_close(pl);
    hm_sim_machine_close(m);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        hm_sim_machine_t *m = preset(argv[1]);
        if (!m)
            return 1;
        hm_placement_t *pl = argc > 2 ? placement(m) : NULL;
        digest_t d;
        char *r = replay(m, pl, 0, argc > 3 ? strtoull(argv[3], NULL, 0) : 2, &d);
        printf("%s\nsamples %llu digest %016llx\n", r ? r : "(failed)", (unsigned long long)d.n,
               (unsigned long long)d.hash);
        free(r);
        hm_placement_close(pl);
        hm_sim_machine_close(m);
        return r ? 0 : 1;
    }
    compare("ddr5", 0);
    compare("knl-mcdram", 1);
    compare("optane", 0);
    return check_done();
}
