#include "cli.h"

HM_CMD_NOT_BUILT(hm_cmd_record, "record", "Record a sampled memory-access trace of a command",
                 "hetmem record [-b auto|pebs|ibs|spe|soft] [-p PERIOD] [--bind DEVICE] [-o FILE] -- CMD ARGS");
