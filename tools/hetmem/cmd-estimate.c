#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_estimate, "estimate", "Estimate the runtime of a placement from per-device traces",
                 "hetmem estimate [--model linear|default] TRACE... --placement FILE [--json]");
