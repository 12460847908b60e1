/* libFuzzer target for placement files: the input is the JSON text. It is
 * parsed against a small machine device list (and once more with no device
 * list), then a few objects are matched in and out of phases and the
 * unmatched-rule report is built. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/placement.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(hm_placement_t *p)
{
    static const hm_object_desc_t objs[] = {
        {0x3f2a91c07d5e1b44ull, "matrix", 0x7f0000001000ull, 64ull << 20, "matrix.c:12"},
        {0, "vec", 0x7f0010000000ull, 4096, NULL},
        {42, NULL, 0, 0, "a.cc:7"},
        {UINT64_MAX, "x", UINT64_MAX - 10, UINT64_MAX, NULL},
    };
    static const char *const phases[] = {NULL, "spmv", "", "solve"};
    hm_place_t pl;
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        for (size_t j = 0; j < sizeof phases / sizeof phases[0]; j++) {
            hm_placement_match(p, phases[j], &objs[i], &pl);
            (void)hm_placement_page_device(&pl, objs[i].addr);
            (void)hm_placement_device_name(p, pl.device);
        }
    (void)hm_placement_default_device(p);
    (void)hm_placement_has_phases(p);
    free(hm_placement_unmatched(p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = fuzz_text(data, size);
    if (!json)
        return 0;
    static const char *const devs[] = {"ddr", "hbm", "cxl"};
    hm_placement_t *p;
    if (hm_placement_parse(&p, "fuzz.json", json, devs, 3) == 0) {
        exercise(p);
        hm_placement_close(p);
    }
    if (hm_placement_parse(&p, "fuzz.json", json, NULL, 0) == 0) {
        exercise(p);
        hm_placement_close(p);
    }
    free(json);
    return 0;
}
