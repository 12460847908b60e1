/* hetmem sim: run a hetmem-cc program inside a simulated machine.
 *
 * The simulation runs inside the program (libhetmem_inst), which gets its
 * settings from the environment and writes a JSON report at exit; this
 * command validates the inputs first (so that bad input fails before any
 * run), runs the program with address-space randomisation off (so that runs
 * are bit-for-bit repeatable), and prints the report. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "common/env.h"
#include "hetmem/placement.h"
#include "hetmem/sim.h"
#include "hetmem/trace.h"

enum { OPT_DEVICE = 256, OPT_PLACEMENT, OPT_PERIOD, OPT_JSON, OPT_STRICT, OPT_MIN_SIZE };

static const hm_cli_opt_t sim_opts[] = {
    {'m', "machine", "MACHINE", "machine preset (ddr4, ddr5, knl-mcdram, spr-hbm, cxl, optane, cxl3, spr-hbm-cxl) or JSON file",
     HM_OPT_REQUIRED},
    {OPT_DEVICE, "device", "NAME", "put all data on this device, up to its capacity (the rest spills to the first device; default: the first device)", 0},
    {OPT_PLACEMENT, "placement", "FILE", "place objects by this placement file (docs/placement-format.md)", HM_OPT_ALT},
    {'o', "output", "TRACE", "write a sampled trace (trace format v1) of the run", 0},
    {OPT_PERIOD, "sample-period", "N", "sample loads and stores with a mean period of N, jittered (default 1000)", 0},
    {OPT_JSON, "json", "FILE", "write the summary as JSON to FILE ('-': to stdout, and the program's own output to stderr)", 0},
    {OPT_STRICT, "strict", NULL, "a placement rule that matches nothing is an error, not a warning", 0},
    {OPT_MIN_SIZE, "min-size", "SIZE", "place and trace allocations of at least SIZE bytes, as hetmem run and record do; smaller ones stay on the default device (default 64K)", 0},
    {0},
};

static int cmd_sim(const hm_cmd_t *cmd, int argc, char **argv);

const hm_cmd_t hm_cmd_sim = {
    "sim", "Run a hetmem-cc binary inside a simulated tiered-memory machine",
    "-- ./app.sim ARGS",
    "The program must be built with hetmem-cc. It runs as one of the machine's\n"
    "\"cores\" identical threads: it gets 1/cores of each device's bandwidth and\n"
    "capacity and of shared caches. The summary goes to stdout after the run;\n"
    "the model is described in docs/sim.md, machine files in docs/machines.md.",
    sim_opts, cmd_sim};

/* The runtime's marker string; a binary without it was not built with
 * hetmem-cc, and running it would only waste the user's time. */
static const char inst_marker[] = "hetmem-inst-runtime-v1";

static uint64_t jget(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static double jreal(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *jstr(const json_t *o, const char *k, const char *def)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : def;
}

static void print_summary(FILE *f, const json_t *r, const char *prog, const char *how)
{
    char b1[32], b2[32], b3[32];
    double rt = jreal(r, "runtime_s");
    uint64_t ins = jget(r, "instructions"), cyc = jget(r, "cycles");
    fprintf(f, "hetmem sim: %s on %s (1 of %llu cores), %s\n", prog, jstr(r, "machine", "?"),
            (unsigned long long)jget(r, "cores"), how);
    fprintf(f, "  simulated runtime  %.6f s\n", rt);
    fprintf(f, "  instructions       %llu (IPC %.2f)\n", (unsigned long long)ins, cyc ? (double)ins / (double)cyc : 0.0);
    fprintf(f, "  loads / stores     %llu / %llu\n\n", (unsigned long long)jget(r, "loads"),
            (unsigned long long)jget(r, "stores"));

    fprintf(f, "  %-10s %12s %12s %12s %12s %6s %12s\n", "device", "read", "written", "GB/s thread", "GB/s node",
            "util", "spilled");
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(r, "devices"), i, o) {
        fprintf(f, "  %-10s %12s %12s %12.3f %12.2f %5.0f%% %12s\n", jstr(o, "name", "?"),
                hm__fmt_size(jget(o, "bytes_read"), b1, sizeof b1), hm__fmt_size(jget(o, "bytes_written"), b2, sizeof b2),
                jreal(o, "bandwidth_gbs"), jreal(o, "node_bandwidth_gbs"), 100 * jreal(o, "utilization"),
                hm__fmt_size(jget(o, "spilled_bytes"), b3, sizeof b3));
    }
    fprintf(f, "\n  %-6s %14s %9s %14s %14s %14s %14s\n", "level", "accesses", "hit rate", "load hits", "load misses",
            "store hits", "store misses");
    json_array_foreach(json_object_get(r, "levels"), i, o) {
        fprintf(f, "  %-6s %14llu %8.2f%% %14llu %14llu %14llu %14llu\n", jstr(o, "name", "?"),
                (unsigned long long)jget(o, "accesses"), 100 * jreal(o, "hit_rate"),
                (unsigned long long)jget(o, "load_hits"), (unsigned long long)jget(o, "load_misses"),
                (unsigned long long)jget(o, "store_hits"), (unsigned long long)jget(o, "store_misses"));
    }
    json_t *objs = json_object_get(r, "objects");
    fprintf(f, "\n  %-18s %-12s %-10s %12s %12s %12s  %s\n", "object site", "name", "device", "allocated", "read",
            "written", "source");
    json_array_foreach(objs, i, o) {
        if (i >= 20) {
            fprintf(f, "  ... %zu more objects (see --json)\n", json_array_size(objs) - 20);
            break;
        }
        char dev[48];
        uint64_t pct = jget(o, "pages_percent");
        if (pct < 100)
            snprintf(dev, sizeof dev, "%s %llu%%", jstr(o, "device", "?"), (unsigned long long)pct);
        else
            snprintf(dev, sizeof dev, "%s", jstr(o, "device", "?"));
        fprintf(f, "  %-18s %-12s %-10s %12s %12s %12s  %s\n", jstr(o, "site", "?"), jstr(o, "name", "-"), dev,
                hm__fmt_size(jget(o, "bytes_allocated"), b3, sizeof b3), hm__fmt_size(jget(o, "bytes_read"), b1, sizeof b1),
                hm__fmt_size(jget(o, "bytes_written"), b2, sizeof b2), jstr(o, "source", "-"));
    }
    json_t *u = json_object_get(r, "untracked");
    fprintf(f, "  %-18s %-12s %-10s %12s %12s %12s  %s\n", "(untracked)", "-", "-", "-",
            hm__fmt_size(jget(u, "bytes_read"), b1, sizeof b1), hm__fmt_size(jget(u, "bytes_written"), b2, sizeof b2), "-");
}

/* argv[0] padded to ARGV0_LEN - 1 characters with redundant path
 * components ("/" repeated before an absolute path, "./" and ".//" before
 * a relative one), so that the strings after it (the arguments, which the
 * program reads) sit at the same addresses whatever the path the program
 * is run by; it still names the same file (a bare name found in PATH
 * becomes the path it was found at). A longer path is kept as it is.
 * Returns a malloc'd string or NULL when no padding applies. */
#define ARGV0_LEN 256
static char *padded_argv0(const char *a0)
{
    size_t n = strlen(a0), fill = ARGV0_LEN - 1 - n;
    if (n >= ARGV0_LEN - 1)
        return NULL;
    char *p = hm__xcalloc(1, ARGV0_LEN), *q = p;
    if (a0[0] == '/') {
        memset(q, '/', fill);
        q += fill;
    } else {
        if (fill % 2) { /* one ".//" makes an odd fill even */
            if (fill < 3) {
                free(p);
                return NULL;
            }
            memcpy(q, ".//", 3);
            q += 3;
            fill -= 3;
        }
        for (; fill; fill -= 2, q += 2)
            memcpy(q, "./", 2);
    }
    memcpy(q, a0, n + 1);
    return p;
}

/* The environment the program is started with: the caller's, plus padding
 * that gives the block of strings the kernel copies onto the new stack
 * (the program's path, the arguments and the environment) a fixed size and
 * the environment a fixed number of variables, so that the initial stack
 * pointer and the arguments' strings, and with them every stack address
 * and every read of an argument, are the same whatever the environment,
 * the current directory (PWD) and the path the program is run by.
 *
 * Linux (fs/exec.c, create_elf_tables()) copies the strings, S bytes,
 * below the stack top less one word, the arguments lowest; rounds down to
 * 16; puts the platform string and 16 random bytes below, then auxv and
 * the argv and envp arrays (argc + envc + 3 words), and rounds down to 16.
 * With S = 8 mod 16 nothing is rounded off the strings, so S and envc
 * fixed give a fixed stack pointer at entry. The padding makes envc the
 * next multiple of PAD_VARS above the caller's count and S the next
 * multiple of PAD_STEP plus 8. Variables named HETMEM_SIM_PAD* are the
 * padding: inherited ones are dropped. Returns a malloc'd NULL-terminated
 * array (fixed_env_free()). */
#define PAD_STEP 65536
#define PAD_VARS 128
static char **fixed_env(const char *prog, char *const *argv)
{
    extern char **environ;
    size_t n = 0, envc = 0, s = strlen(prog) + 1;
    while (environ[n])
        n++;
    size_t total = (n + 1 + PAD_VARS - 1) / PAD_VARS * PAD_VARS;
    char **env = hm__xcalloc(total + 1, sizeof *env);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "HETMEM_SIM_PAD", 14) == 0)
            continue;
        env[envc++] = environ[i];
        s += strlen(environ[i]) + 1;
    }
    for (size_t i = 0; argv[i]; i++)
        s += strlen(argv[i]) + 1;
    char name[48];
    for (size_t k = 1; envc + 1 < total; k++) { /* the count */
        snprintf(name, sizeof name, "HETMEM_SIM_PAD%zu=", k);
        env[envc++] = hm__xstrdup(name);
        s += strlen(name) + 1;
    }
    static const char pad[] = "HETMEM_SIM_PAD=";
    s += sizeof pad;
    size_t fill = (s - 8 + PAD_STEP - 1) / PAD_STEP * PAD_STEP + 8 - s; /* the size */
    char *p = hm__xcalloc(1, sizeof pad + fill);
    memcpy(p, pad, sizeof pad - 1);
    memset(p + sizeof pad - 1, 'x', fill);
    env[envc++] = p;
    env[envc] = NULL;
    return env;
}

static void fixed_env_free(char **env)
{
    for (size_t i = 0; env[i]; i++)
        if (strncmp(env[i], "HETMEM_SIM_PAD", 14) == 0)
            free(env[i]);
    free(env);
}

/* One simulated run: its options, then what each step builds. */
typedef struct {
    const char *machine, *device, *placement, *trace, *jsonf;
    uint64_t period;
    uint64_t min_size;
    int strict;
    char **prog_argv;  /* the program and its arguments (the caller's argv) */
    int pargc;
    char mpath[PATH_MAX], prog[PATH_MAX];
    hm_sim_machine_t *m;
    hm_placement_t *pl;
    char *resdir;      /* where the runtime writes its report */
    char result[PATH_MAX + 32];
    int ws;            /* the program's wait status */
    json_t *res;       /* its report */
} simrun_t;

/* The options into s. -1 to go on, else the exit status. */
static int sim_options(simrun_t *s, const hm_cmd_t *cmd, int argc, char **argv)
{
    hm_cli_t cli;
    const char *arg;
    int key;
    hm_cli_init(&cli, cmd, argc, argv, 1);
    cli.ind = 1;
    while ((key = hm_cli_next(&cli, &arg)) != -1) {
        switch (key) {
        case 'm': s->machine = arg; break;
        case OPT_DEVICE: s->device = arg; break;
        case OPT_PLACEMENT: s->placement = arg; break;
        case 'o': s->trace = arg; break;
        case OPT_JSON: s->jsonf = arg; break;
        case OPT_STRICT: s->strict = 1; break;
        case OPT_MIN_SIZE:
            if (hm_cli_size(cmd, "--min-size", arg, &s->min_size))
                return HM_EXIT_USAGE;
            break;
        case OPT_PERIOD:
            if (hm_cli_u64_in(cmd, "--sample-period", arg, 1, HM_TRACE_PERIOD_MAX,
                              "a trace header holds at most 2^63-1", &s->period))
                return HM_EXIT_USAGE;
            break;
        case HM_CLI_HELP: return HM_EXIT_OK;
        default: return HM_EXIT_USAGE;
        }
    }
    if (!s->machine)
        return hm_cli_usage(cmd, "-m MACHINE is required");
    if (s->device && s->placement)
        return hm_cli_usage(cmd, "--device and --placement exclude each other");
    if (cli.ind >= argc)
        return hm_cli_usage(cmd, "no program given (hetmem sim -m MACHINE -- ./app.sim ARGS)");
    s->prog_argv = argv + cli.ind;
    s->pargc = argc - cli.ind;
    return -1;
}

/* The machine (a preset beside this executable, or a file), the placement
 * or device, and the program, which must carry the runtime's marker: all
 * checked before anything runs. 0 or -1 (said why). */
static int sim_inputs(simrun_t *s)
{
    char exe[PATH_MAX];
    int rc;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    if ((rc = hm_sim_machine_find(s->machine, n > 0 ? exe : NULL, s->mpath, sizeof s->mpath)) < 0)
        return hm_cli_fail(s->machine, rc), -1;
    if ((rc = hm_sim_machine_load(&s->m, s->mpath)) < 0)
        return hm_cli_fail(s->mpath, rc), -1;
    if (s->placement && (rc = hm_placement_load(&s->pl, s->placement, hm_sim_machine_device_names(s->m),
                                                hm_sim_machine_ndevices(s->m))) < 0)
        return hm_cli_fail(s->placement, rc), -1;
    if (s->device && (rc = hm_sim_machine_device_index(s->m, s->device)) < 0)
        return hm_cli_fail("--device", rc), -1;
    if ((rc = hm_cli_find_program(s->prog_argv[0], s->prog, sizeof s->prog)) < 0)
        return hm_cli_failf(s->prog_argv[0], "cannot run: %s", strerror(-rc)), -1;
    if ((rc = hm_cli_file_has(s->prog, inst_marker)) <= 0) {
        if (rc == -EINVAL)
            hm_cli_failf(s->prog_argv[0], "cannot run: not a regular file");
        else if (rc < 0)
            hm_cli_failf(s->prog_argv[0], "cannot read: %s", strerror(-rc));
        else
            hm_cli_fail(s->prog_argv[0], HM_ENOTINST);
        return -1;
    }
    return 0;
}

/* The folder of the runtime's report, and the settings that reach the
 * runtime through HETMEM_SIM_* variables. 0 or -1 (said why). */
static int sim_settings(simrun_t *s)
{
    char tmpl[PATH_MAX];
    const char *td = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/hetmem-sim.XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(tmpl))
        return hm_cli_failf("temporary directory", "%s: %s", tmpl, strerror(errno)), -1;
    s->resdir = hm__xstrdup(tmpl);
    char abs_m[PATH_MAX], abs_p[PATH_MAX], per[32];
    snprintf(s->result, sizeof s->result, "%s/report.json", s->resdir);
    if (!realpath(s->mpath, abs_m))
        snprintf(abs_m, sizeof abs_m, "%s", s->mpath);
    setenv(hm__env_name(HM_ENV_SIM_MACHINE), abs_m, 1);
    setenv(hm__env_name(HM_ENV_SIM_RESULT), s->result, 1);
    unsetenv(hm__env_name(HM_ENV_SIM_PLACEMENT));
    unsetenv(hm__env_name(HM_ENV_SIM_DEVICE));
    unsetenv(hm__env_name(HM_ENV_SIM_TRACE));
    if (s->placement) {
        if (!realpath(s->placement, abs_p))
            snprintf(abs_p, sizeof abs_p, "%s", s->placement);
        setenv(hm__env_name(HM_ENV_SIM_PLACEMENT), abs_p, 1);
    }
    if (s->device)
        setenv(hm__env_name(HM_ENV_SIM_DEVICE), s->device, 1);
    if (s->trace)
        setenv(hm__env_name(HM_ENV_SIM_TRACE), s->trace, 1);
    snprintf(per, sizeof per, "%llu", (unsigned long long)s->period);
    setenv(hm__env_name(HM_ENV_SIM_PERIOD), per, 1);
    snprintf(per, sizeof per, "%llu", (unsigned long long)s->min_size);
    setenv(hm__env_name(HM_ENV_MIN_SIZE), per, 1);
    setenv(hm__env_name(HM_ENV_SIM_PROGRESS), isatty(2) ? "1" : "0", 1);
    setenv(hm__env_name(HM_ENV_SIM_ARGV0), s->prog_argv[0], 1);
    return 0;
}

/* Runs the program with a padded argv[0] and environment and without
 * address randomisation, and waits for it (s->ws). 0 or -1 (said why). */
static int sim_execute(simrun_t *s)
{
    char **xargv = hm__xcalloc((size_t)s->pargc + 1, sizeof *xargv);
    memcpy(xargv, s->prog_argv, (size_t)s->pargc * sizeof *xargv);
    char *argv0 = padded_argv0(strchr(s->prog_argv[0], '/') ? s->prog_argv[0] : s->prog);
    if (argv0)
        xargv[0] = argv0;
    char **env = fixed_env(s->prog, xargv);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        hm_cli_failf(s->prog_argv[0], "fork: %s", strerror(errno));
        fixed_env_free(env);
        free(argv0);
        free(xargv);
        return -1;
    }
    if (pid == 0) {
        /* Same addresses every run: page interleave and cache sets depend on them. */
        personality(ADDR_NO_RANDOMIZE);
        /* With --json -, stdout carries only the JSON: the program's own
         * output goes to stderr. */
        if (s->jsonf && strcmp(s->jsonf, "-") == 0 && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
            fprintf(stderr, "hetmem: %s: cannot redirect its output to stderr: %s\n", s->prog_argv[0], strerror(errno));
            _exit(127);
        }
        execve(s->prog, xargv, env);
        fprintf(stderr, "hetmem: %s: cannot run: %s\n", s->prog_argv[0], strerror(errno));
        _exit(127);
    }
    fixed_env_free(env);
    free(argv0);
    free(xargv);
    while (waitpid(pid, &s->ws, 0) < 0) {
        if (errno != EINTR)
            return hm_cli_failf(s->prog_argv[0], "waitpid: %s", strerror(errno)), -1;
    }
    return 0;
}

/* The runtime's report (s->res), refused when missing or when it holds an
 * error, with what this command adds: the program, its exit status, the
 * placement or device. 0 or -1 (said why). */
static int sim_report(simrun_t *s)
{
    json_error_t je;
    int ws = s->ws;
    if (!(s->res = json_load_file(s->result, 0, &je))) {
        if (WIFSIGNALED(ws))
            hm_cli_failf(s->prog_argv[0], "killed by signal %d (%s) before the simulator reported", WTERMSIG(ws),
                         strsignal(WTERMSIG(ws)));
        else if (!(WIFEXITED(ws) && WEXITSTATUS(ws) == 127))
            hm_cli_failf(s->prog_argv[0], "the simulator's report is missing: the program ended through _exit() "
                         "or was not linked by hetmem-cc (exit status %d)", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
        return -1;
    }
    const char *err = jstr(s->res, "error", NULL);
    if (err)
        return hm_cli_failf(s->prog_argv[0], "%s", err), -1;
    json_object_set_new(s->res, "program", json_string(s->prog_argv[0]));
    json_object_set_new(s->res, "exit_status", json_integer(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws)));
    if (s->placement)
        json_object_set_new(s->res, "placement", json_string(s->placement));
    else
        json_object_set_new(s->res, "device", json_string(s->device ? s->device : hm_sim_machine_device_names(s->m)[0]));
    return 0;
}

/* --json FILE (or '-': stdout), and the summary table unless the JSON took
 * stdout. 0 or -1 (said why). */
static int sim_print(const simrun_t *s)
{
    char how[PATH_MAX + 32];
    if (s->placement)
        snprintf(how, sizeof how, "placement %s", s->placement);
    else
        snprintf(how, sizeof how, "all data on %s", s->device ? s->device : hm_sim_machine_device_names(s->m)[0]);
    if (s->jsonf) {
        int jrc = strcmp(s->jsonf, "-") == 0
                      ? json_dumpf(s->res, stdout, JSON_PRESERVE_ORDER | JSON_INDENT(2) | JSON_REAL_PRECISION(17))
                      : json_dump_file(s->res, s->jsonf, JSON_PRESERVE_ORDER | JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        if (jrc != 0)
            return hm_cli_failf(s->jsonf, "cannot write: %s", strerror(errno)), -1;
        if (strcmp(s->jsonf, "-") == 0)
            fputc('\n', stdout);
    }
    if (!s->jsonf || strcmp(s->jsonf, "-") != 0)
        print_summary(stdout, s->res, s->prog_argv[0], how);
    return 0;
}

/* What the run leaves to say after the summary: full devices (warnings),
 * rules that matched nothing (an error with --strict), a failed trace, the
 * program's own failure. 0 when none is an error, else -1 (said why). */
static int sim_verdict(const simrun_t *s)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(s->res, "devices"), i, o) {
        char b[32];
        if (jget(o, "spilled_bytes"))
            fprintf(stderr, "hetmem: warning: device %s full (%s per thread): %s spilled to %s\n", jstr(o, "name", "?"),
                    hm__fmt_size(jget(o, "capacity_per_thread"), b, sizeof b),
                    hm__fmt_size(jget(o, "spilled_bytes"), (char[32]){0}, 32),
                    s->placement ? hm_placement_device_name(s->pl, hm_placement_default_device(s->pl))
                                 : hm_sim_machine_device_names(s->m)[0]);
    }
    size_t len = 0;
    char *rules = NULL;
    json_array_foreach(json_object_get(s->res, "unmatched_rules"), i, o) {
        const char *t = json_string_value(o);
        rules = hm__xrealloc(rules, len + strlen(t) + 2);
        len += (size_t)sprintf(rules + len, "%s\n", t);
    }
    if (hm_cli_unmatched(s->placement, rules, s->strict))
        return -1;
    if (jstr(s->res, "trace_error", NULL))
        return hm_cli_failf(s->trace, "trace write failed: %s", jstr(s->res, "trace_error", "")), -1;
    if (!WIFEXITED(s->ws) || WEXITSTATUS(s->ws) != 0) {
        if (WIFSIGNALED(s->ws))
            hm_cli_failf(s->prog_argv[0], "killed by signal %d", WTERMSIG(s->ws));
        else
            hm_cli_failf(s->prog_argv[0], "exited with status %d", WEXITSTATUS(s->ws));
        return -1;
    }
    return 0;
}

static void sim_free(simrun_t *s)
{
    if (s->resdir) {
        unlink(s->result);
        char tmpf[PATH_MAX + 40];
        snprintf(tmpf, sizeof tmpf, "%s.tmp", s->result);
        unlink(tmpf);
        rmdir(s->resdir);
        free(s->resdir);
    }
    json_decref(s->res);
    hm_placement_close(s->pl);
    hm_sim_machine_close(s->m);
}

static int cmd_sim(const hm_cmd_t *cmd, int argc, char **argv)
{
    simrun_t s = {.period = 1000, .min_size = HM_MIN_OBJECT_SIZE};
    int status = sim_options(&s, cmd, argc, argv);
    if (status < 0) {
        status = HM_EXIT_RUNTIME;
        if (sim_inputs(&s) == 0 && sim_settings(&s) == 0 && sim_execute(&s) == 0 && sim_report(&s) == 0 &&
            sim_print(&s) == 0 && sim_verdict(&s) == 0)
            status = HM_EXIT_OK;
    }
    sim_free(&s);
    return status;
}
