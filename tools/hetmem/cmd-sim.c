#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_sim, "sim", "Run a hetmem-cc binary inside a simulated tiered-memory machine",
                 "hetmem sim -m MACHINE [--device NAME | --placement FILE] [-o TRACE] [--sample-period N] [--json FILE] -- ./app.sim ARGS");
