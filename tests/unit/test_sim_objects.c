/* The simulator's table of live allocations: heavy alloc/free churn with
 * few live objects keeps its memory flat, a missed free is replaced by the
 * next allocation over the same range, and sizes are found by address. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/common.h"
#include "hetmem/sim.h"
#include "sim/sim_int.h"

/* Heap in use, large (mmapped) blocks included. */
static size_t heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static const char *machine_json =
    "{\"name\": \"unit\", \"cores\": 1,"
    " \"core\": {\"freq_ghz\": 1.0, \"base_cpi\": 1.0, \"rob\": 64, \"mlp\": 4},"
    " \"caches\": [{\"name\": \"L1\", \"size\": \"4K\", \"assoc\": 4, \"latency\": 2}],"
    " \"devices\": [{\"name\": \"ddr\", \"read_latency_ns\": 100, \"read_bandwidth_gbs\": 64, \"capacity\": \"64M\"}]}";

int main(void)
{
    hm_sim_machine_t *m = NULL;
    hm_sim_t *s = NULL;
    int rc = hm_sim_machine_parse(&m, "unit.json", machine_json);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        return check_done();
    rc = hm_sim_open(&s, m, NULL, 0);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "hm_sim_open: %s %s\n", hm_strerror(rc), hm_errdetail());
        return check_done();
    }

    /* 8 live objects, 1 M alloc/free pairs at moving addresses. */
    uint64_t live[8] = {0}, x = 1;
    size_t before = 0;
    int bad = 0;
    for (uint64_t i = 0; i < 1000000; i++) {
        int k = (int)(i & 7);
        if (live[k])
            bad += hm_sim_free(s, live[k]) != 0;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        live[k] = 0x100000000ull + ((uint64_t)k << 28) + (x >> 40) % (1u << 20) * 64;
        hm_sim_alloc(s, live[k], 256, 0x1234);
        if (i == 10000)
            before = heap_used();
    }
    CHECK_EQ_INT(bad, 0);
    size_t after = heap_used();
    if (after > before + (1u << 20))
        fprintf(stderr, "heap grew by %zu bytes over 990k alloc/free pairs with 8 live\n", after - before);
    CHECK(after <= before + (1u << 20));

    /* Sizes by start address; interior addresses are not starts. */
    CHECK_EQ_U64(hm__sim_alloc_size(s, live[3]), 256);
    CHECK_EQ_U64(hm__sim_alloc_size(s, live[3] + 8), 0);
    /* A double free is refused. */
    CHECK_EQ_INT(hm_sim_free(s, live[3]), 0);
    CHECK_EQ_INT(hm_sim_free(s, live[3]), HM_ENOTFOUND);
    /* An allocation over a live range whose free was missed replaces it. */
    hm_sim_alloc(s, live[4] + 128, 4096, 0x99);
    CHECK_EQ_U64(hm__sim_alloc_size(s, live[4]), 0);
    CHECK_EQ_U64(hm__sim_alloc_size(s, live[4] + 128), 4096);
    CHECK_EQ_INT(hm_sim_free(s, live[4]), HM_ENOTFOUND);
    hm_sim_close(s);
    hm_sim_machine_close(m);
    return check_done();
}
