/* The environment protocol between the hetmem CLI and the runtimes it
 * starts (libhetmem_preload.so under record/run, libhetmem_inst in
 * hetmem-cc programs under sim), plus the variables a user may set. One
 * table: both sides and `hetmem --help` take the names from here.
 *
 * Runtimes read these with secure_getenv (hm__env_get), so a program
 * running with elevated privileges (AT_SECURE: setuid, file capabilities)
 * sees none of them and its runtime stays inactive; it must not write
 * files or read paths an unprivileged caller named. */
#ifndef HETMEM_COMMON_ENV_H
#define HETMEM_COMMON_ENV_H

#include <stdlib.h>
#include <string.h>

/* glibc's, declared here so that includers need not define _GNU_SOURCE. */
extern char *secure_getenv(const char *name);

/* X(ID, NAME, WHO, HELP): WHO is "user" (documented for users to set) or
 * the CLI command that sets it for its runtime. */
#define HM_ENV_TABLE(X)                                                                               \
    X(SPOOL, "HETMEM_SPOOL", "record, run", "spool folder the preload writes to (set: runtime records)") \
    X(BACKEND, "HETMEM_BACKEND", "record, run", "sampling backend (soft, pebs, ibs, spe, perf-sw; empty: none)") \
    X(PERIOD, "HETMEM_PERIOD", "record", "sample period: ns (soft, perf-sw) or events (PMU)")       \
    X(MIN_SIZE, "HETMEM_MIN_SIZE", "record, run, sim", "track allocations of at least this many bytes")  \
    X(DEPTH, "HETMEM_DEPTH", "record, run", "links of the call chain hashed into a site id (1..16, default 4)") \
    X(BIND, "HETMEM_BIND", "record", "device every page is bound to (--bind)")                      \
    X(PLACEMENT, "HETMEM_PLACEMENT", "run", "placement file to enforce")                           \
    X(CAPACITY, "HETMEM_CAPACITY", "run", "device capacities, DEV=BYTES,...")                       \
    X(EVENTS, "HETMEM_EVENTS", "run", "0: no allocation, name or phase records (the report needs none)") \
    X(SIM_MACHINE, "HETMEM_SIM_MACHINE", "sim", "machine file (unset: simulator runtime inactive)") \
    X(SIM_RESULT, "HETMEM_SIM_RESULT", "sim", "where the simulator's JSON report goes")            \
    X(SIM_PLACEMENT, "HETMEM_SIM_PLACEMENT", "sim", "placement file for the simulated run")         \
    X(SIM_DEVICE, "HETMEM_SIM_DEVICE", "sim", "device holding all data (no placement)")             \
    X(SIM_TRACE, "HETMEM_SIM_TRACE", "sim", "sampled trace output")                                 \
    X(SIM_PERIOD, "HETMEM_SIM_PERIOD", "sim", "simulated sample period (loads and stores)")         \
    X(SIM_PROGRESS, "HETMEM_SIM_PROGRESS", "sim", "1: progress line on stderr")                    \
    X(SIM_ARGV0, "HETMEM_SIM_ARGV0", "sim", "the program's argv[0] as given (the one it gets is padded)") \
    X(LOG, "HETMEM_LOG", "user", "library log level: error, warn, info or debug")                   \
    X(VERBOSE, "HETMEM_VERBOSE", "user", "record: print the sampler's resolution statistics")      \
    X(SIGNAL_OFFSET, "HETMEM_SIGNAL_OFFSET", "user", "soft sampler signal is SIGRTMIN+N (default 4)") \
    X(SOFT_NULL, "HETMEM_SOFT_NULL", "user", "soft sampler timers fire but record nothing (overhead floor)") \
    X(PRELOAD, "HETMEM_PRELOAD", "user", "path of libhetmem_preload.so to use")                     \
    X(MACHINES, "HETMEM_MACHINES", "user", "extra folder of machine presets")                      \
    X(JSON_MAX, "HETMEM_JSON_MAX", "user", "largest JSON input read (a size; default 256M)")       \
    X(SPOOL_MAX, "HETMEM_SPOOL_MAX", "user", "record, run: most bytes of one process's spool (a size; default 2G)") \
    X(SYSFS_ROOT, "HETMEM_SYSFS_ROOT", "user", "read /sys and /proc from this folder (captured trees)")

enum {
#define HM_ENV_ENUM_(id, name, who, help) HM_ENV_##id,
    HM_ENV_TABLE(HM_ENV_ENUM_)
#undef HM_ENV_ENUM_
    HM_ENV_COUNT
};

typedef struct {
    const char *name, *who, *help;
} hm_env_var_t;

static const hm_env_var_t hm__env_vars[HM_ENV_COUNT] __attribute__((unused)) = {
#define HM_ENV_ROW_(id, name, who, help) {name, who, help},
    HM_ENV_TABLE(HM_ENV_ROW_)
#undef HM_ENV_ROW_
};

/* The default of HETMEM_SPOOL_MAX, per process spool file. */
#define HM_SPOOL_MAX_DEFAULT (UINT64_C(2) << 30)
/* Its least value: room for a process's first records and its last ones. */
#define HM_SPOOL_MIN (UINT64_C(64) << 10)

/* Name of variable id (HM_ENV_SPOOL ...). */
static inline const char *hm__env_name(int id) { return hm__env_vars[id].name; }

/* Its value, or NULL when unset or when the process runs in secure-
 * execution mode. Allocation-free: safe inside the malloc interposer. */
static inline const char *hm__env_get(int id) { return secure_getenv(hm__env_vars[id].name); }

/* Whether environment entry e ("NAME=VALUE") sets one of the runtimes'
 * settings: a variable of the table that a command sets (WHO is not
 * "user"). hetmem record and hetmem run start their command with exactly
 * the settings their options give and drop such an entry of the caller's
 * environment (a stray HETMEM_PLACEMENT would bind a recording,
 * HETMEM_EVENTS=0 empty its trace, HETMEM_SIM_MACHINE start the simulator
 * in a recorded hetmem-cc program). */
static inline int hm__env_is_setting(const char *e)
{
    const char *eq = strchr(e, '=');
    size_t nl = eq ? (size_t)(eq - e) : strlen(e);
    for (int i = 0; i < HM_ENV_COUNT; i++)
        if (strcmp(hm__env_vars[i].who, "user") && !strncmp(e, hm__env_vars[i].name, nl) &&
            hm__env_vars[i].name[nl] == 0)
            return 1;
    return 0;
}

#endif
