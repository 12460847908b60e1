#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_doctor, "doctor", "Report what this machine offers: PMUs, NUMA nodes, memory tiers",
                 "hetmem doctor [--json]");
