#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_run, "run", "Run a command with its objects bound per a placement",
                 "hetmem run --placement FILE [--report FILE] -- CMD ARGS");
