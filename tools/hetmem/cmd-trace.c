#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_trace, "trace", "Inspect trace files: info, dump, objects",
                 "hetmem trace info|dump|objects FILE");
