/* libFuzzer target for simulator machine files: the input is the JSON text.
 * A machine that parses is queried for its devices and opened as a
 * simulator once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/sim.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = fuzz_text(data, size);
    if (!json)
        return 0;
    hm_sim_machine_t *m;
    if (hm_sim_machine_parse(&m, "fuzz.json", json) == 0) {
        volatile size_t sink = strlen(hm_sim_machine_name(m)) + strlen(hm_sim_machine_json(m));
        int nd = hm_sim_machine_ndevices(m);
        const char *const *names = hm_sim_machine_device_names(m);
        for (int i = 0; i < nd; i++) {
            sink += strlen(names[i]);
            (void)hm_sim_machine_device_index(m, names[i]);
        }
        (void)hm_sim_machine_device_index(m, "no-such-device");
        hm_sim_t *s;
        if (hm_sim_open(&s, m, NULL, -1) == 0) {
            hm_sim_alloc(s, 0x100000, 1 << 20, 1);
            for (uint64_t a = 0; a < 64; a++) {
                hm_sim_load(s, 0x100000 + a * 4160, 8, a, 0x401000);
                hm_sim_store(s, 0x100000 + a * 8, 8, 0x401004);
            }
            hm_sim_instructions(s, 1000);
            free(hm_sim_report(s));
            hm_sim_close(s);
        }
        (void)sink;
        hm_sim_machine_close(m);
    }
    free(json);
    return 0;
}
