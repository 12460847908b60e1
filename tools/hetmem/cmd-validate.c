#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_validate, "validate", "Compare estimates with measured runtimes over many placements",
                 "hetmem validate --machine MACHINE [--placements K] [--period N] [--real] -- CMD ARGS");
