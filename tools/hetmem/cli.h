/* Command frame for the hetmem CLI: one table of subcommands (main.c), and
 * per subcommand one table of options that drives both parsing and --help. */
#ifndef HETMEM_CLI_H
#define HETMEM_CLI_H

#include <stdio.h>

#include "common/common.h"

#define HM_EXIT_OK 0
#define HM_EXIT_RUNTIME 1
#define HM_EXIT_USAGE 2

/* How an option shows in the generated usage line (hm_cli_help). */
#define HM_OPT_REQUIRED 1 /* without brackets */
#define HM_OPT_ALT 2      /* in the previous option's brackets: [-p N | -F HZ] */
#define HM_OPT_REPEAT 4   /* followed by "...": may be given several times */

typedef struct {
    int key;             /* short option char, or a value >= 256 for long-only */
    const char *name;    /* long name without "--" */
    const char *arg;     /* argument placeholder ("FILE", "auto|soft"), NULL for a flag */
    const char *help;
    int flags;           /* HM_OPT_* */
} hm_cli_opt_t;

typedef struct hm_cmd hm_cmd_t;
struct hm_cmd {
    const char *name;
    const char *summary;     /* one line, for `hetmem --help` */
    /* After the options in the usage line, which hm_cli_help() generates
     * from opts: the operands ("-- CMD ARGS"). Further lines ("\n") are
     * other forms of the command, printed as they are. */
    const char *usage;
    const char *details;     /* paragraph after the options, or NULL */
    const hm_cli_opt_t *opts;/* terminated by {0} */
    int (*run)(const hm_cmd_t *cmd, int argc, char **argv);
};

/* Option iterator. hm_cli_next() returns the key of the next option (with
 * its argument in *arg), -1 when options end (at "--", the first operand, or
 * argv's end), or HM_CLI_ERROR after printing a usage error: an unknown
 * option, a missing value, or an option given a second time that its
 * table entry does not mark HM_OPT_REPEAT (one line naming it, in every
 * command alike).
 * --help is handled: it prints help and returns HM_CLI_HELP. */
#define HM_CLI_HELP (-2)
/* Whether argv asks for help: -h or --help before any "--". */
int hm_cli_wants_help(int argc, char **argv);
#define HM_CLI_ERROR (-3)
typedef struct {
    const hm_cmd_t *cmd;
    int argc;
    char **argv;
    int ind;       /* index of the next argv element to look at */
    const char *cluster; /* rest of a "-abc" cluster */
    int stop_at_operand; /* 1: stop at the first operand (for -- CMD ARGS) */
    uint64_t seen;       /* bit i: cmd->opts[i] was given (an option given twice
                          * without HM_OPT_REPEAT is a usage error) */
} hm_cli_t;

void hm_cli_init(hm_cli_t *p, const hm_cmd_t *cmd, int argc, char **argv, int stop_at_operand);
int hm_cli_next(hm_cli_t *p, const char **arg);
/* Prints the usage line ("hetmem NAME" + the options of cmd->opts + the
 * operands), the summary, the options and the details. */
void hm_cli_help(const hm_cmd_t *cmd, FILE *f);
/* For commands whose operands and options mix ("TRACE... --placement F"):
 * after hm_cli_next() returned -1, takes the operand at cli->ind into
 * ops[*nops] (all remaining ones after "--") and returns 1, so that option
 * parsing can resume; 0 when argv is exhausted, -1 when more than max. */
int hm_cli_operand(hm_cli_t *cli, char **argv, int argc, const char **ops, int *nops, int max);

/* Prints "hetmem: <what>: <why>" (one line) and returns HM_EXIT_RUNTIME.
 * When err is non-zero, <why> is hm_strerror(err) followed by the detail of
 * hm_errdetail() when there is one; a detail that is <what> itself is left
 * out, one that starts with "<what>:" is printed instead of both, and one
 * that holds the reason already follows <what> alone, so that a file and
 * the reason are named once. */
int hm_cli_fail(const char *what, int err);
int hm_cli_failf(const char *what, const char *fmt, ...) HM_PRINTF(2, 3);
/* A library error whose one-line detail is complete and may begin with
 * the file or program at fault ("FILE: ..."): printed "hetmem: DETAIL"
 * when it begins with one of the NULL-terminated subjects, else "hetmem:
 * WHAT: DETAIL" (the reason alone when there is no detail). Returns
 * HM_EXIT_RUNTIME. */
int hm_cli_fail_subject(const char *what, int err, ...);
/* The executable NAME as the shell finds it (a name with a '/' as given,
 * else the first match on PATH) into out; 0 or -errno. */
int hm_cli_find_program(const char *name, char *out, size_t len);
/* Whether the regular file at path holds the bytes of marker (1, 0), or
 * -errno (-EINVAL for anything but a regular file: a FIFO would block). */
int hm_cli_file_has(const char *path, const char *marker);
/* Prints "hetmem: <cmd>: <why> (see 'hetmem <cmd> --help')" and returns 2. */
int hm_cli_usage(const hm_cmd_t *cmd, const char *fmt, ...) HM_PRINTF(2, 3);

/* Reports a placement's rules that matched nothing (rules: lines as
 * hm_placement_unmatched() gives them, freed here; NULL: none), one
 * "hetmem: warning: FILE: RULE matched nothing" line each; with strict,
 * one "hetmem: FILE: ..." error line instead. Returns 1 when strict made it
 * an error, else 0. */
int hm_cli_unmatched(const char *placement, char *rules, int strict);

/* One "hetmem: warning: NAME in the environment is ignored (...)" line
 * for each runtime setting in our environment (hm__env_is_setting), which
 * hetmem record and hetmem run do not pass to their command: its options
 * decide them. */
void hm_cli_env_settings(const char *cmd);

/* Parses numbers and sizes for an option, failing with a usage error. */
int hm_cli_u64(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t *out);
/* An integer option in [min, max] (hm__parse_u64_in), else the usage error
 * "OPT: 'S' is not an integer from MIN to MAX" with " (NOTE)" when note is
 * not NULL. */
int hm_cli_u64_in(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, const char *note,
                  uint64_t *out);
int hm_cli_size(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t *out);
/* A device capacity (the SIZE of --capacity DEV=SIZE): a size, of at least a
 * page when it has no unit, so that "mcdram=64" is not taken as 64 bytes. */
int hm_cli_capacity(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t *out);

/* Checks the variables a user may set for the runtime of record and run
 * before a run: HETMEM_SPOOL_MAX (unset, or a size of at least
 * HM_SPOOL_MIN) and HETMEM_SIGNAL_OFFSET (hm__signal_offset). Else prints
 * "hetmem: VAR=VALUE: why" and returns HM_EXIT_RUNTIME; 0 when fine. */
int hm_cli_runtime_env(void);

/* Loads a machine preset or JSON file (docs/machines.md) given to
 * --machine and returns its canonical JSON text in *json (malloc'd, the
 * caller frees it); on failure prints the one-line error and returns
 * HM_EXIT_RUNTIME. */
int hm_cli_machine_json(const char *arg, char **json);

/* Prints the estimator's note on the device figures it lacks (one line on
 * stderr, "hetmem: <what>: device figures lacking: ...") when there is one. */
struct hm_estimator;
void hm_cli_figures_note(const char *what, const struct hm_estimator *e);

/* Calibration runs (calib.c; docs/estimator.md, "Calibration"): measured
 * runs of mixed placements, each a placement handle loaded with the
 * estimator's devices and its measured time. */
typedef struct {
    int n, cap;
    struct hm_placement **pls;
    double *ns;
    json_t *runs; /* [{trace, placement, measured_s}] */
} hm_cli_calib_t;
struct hm_est_calibration;
/* The measured time (ns) of the run in trace @p path, from its end record;
 * with @p ref, the trace must be a run of ref's command on ref's machine.
 * 0, or an exit status after printing the one-line error. */
int hm_cli_trace_time(const char *path, const char *ref, double *ns);
/* Adds a run (its trace, for the JSON, and its placement file) to @p c;
 * 0 or an exit status. */
int hm_cli_calib_add(hm_cli_calib_t *c, struct hm_estimator *e, const char *trace, const char *placement, double ns);
/* Adds the run of --calibrate TRACE=PLACEMENT (checked against @p ref as
 * hm_cli_trace_time does); 0 or an exit status. */
int hm_cli_calib_spec(hm_cli_calib_t *c, struct hm_estimator *e, const char *ref, const char *spec);
/* Calibrates @p e on the runs of @p c (hm_estimator_calibrate); 0 or an exit status. */
int hm_cli_calib_fit(const char *what, hm_cli_calib_t *c, struct hm_estimator *e, struct hm_est_calibration *out);
/* {overlap, mean_error_before, mean_error_after, runs}: a new reference. */
json_t *hm_cli_calib_json(const hm_cli_calib_t *c, const struct hm_est_calibration *cal);
void hm_cli_calib_free(hm_cli_calib_t *c);
/* Runs the program of the simulated trace @p ref under @p placement in the
 * simulator (hetmem sim -m with ref's machine, ref's command and sampling
 * period), writing DIR/refine-ROUND.hmt (its path in @p trace), .report.json and
 * .log; a program exit status s with allowed_exit[s] set (may be NULL)
 * also counts as success;
 * *ns its measured time. 0, or an exit status after the one-line error. */
int hm_cli_sim_placement(const char *ref, const char *placement, const char *dir, int round,
                         const unsigned char allowed_exit[256], char *trace, size_t tlen, double *ns);

/* The program's exit status in a `hetmem sim --json` report (hetmem sim
 * itself exits 1 when the program does not exit 0), or -1 when the report
 * is missing, says the run failed or has no runtime. */
int hm_cli_report_exit(const char *report);

/* Declares a subcommand that exists in the CLI but is not built yet. */
#define HM_CMD_NOT_BUILT(ident, nm, sum, use)                                     \
    static const hm_cli_opt_t ident##_opts_[] = {{0}};                            \
    const hm_cmd_t ident = {nm, sum, use,                                         \
        "This subcommand is not built yet.", ident##_opts_, hm_cmd_not_built}
int hm_cmd_not_built(const hm_cmd_t *cmd, int argc, char **argv);

#endif
