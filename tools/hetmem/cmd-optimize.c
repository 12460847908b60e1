#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_optimize, "optimize", "Search for the fastest placement under capacity limits",
                 "hetmem optimize TRACE... --capacity DEV=SIZE [--algo rl|greedy|anneal|exhaustive|random] [--phases] [-o FILE] [--json]");
