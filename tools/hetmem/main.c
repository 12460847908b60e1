/* hetmem: one binary, one table of subcommands (as perf's cmd_struct). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common/env.h"

extern const hm_cmd_t hm_cmd_doctor, hm_cmd_record, hm_cmd_run, hm_cmd_sim,
    hm_cmd_estimate, hm_cmd_optimize, hm_cmd_validate, hm_cmd_trace;

static const hm_cmd_t *const commands[] = {
    &hm_cmd_doctor, &hm_cmd_record,   &hm_cmd_run,      &hm_cmd_sim,
    &hm_cmd_estimate, &hm_cmd_optimize, &hm_cmd_validate, &hm_cmd_trace,
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hetmem <command> [options] [--] [args]\n\n"
               "Heterogeneous-memory placement: record, simulate, estimate, optimize.\n\n"
               "commands:\n");
    for (size_t i = 0; i < HM_ARRAY_LEN(commands); i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\nenvironment:\n");
    for (int i = 0; i < HM_ENV_COUNT; i++)
        if (!strcmp(hm__env_vars[i].who, "user"))
            fprintf(f, "  %-22s %s\n", hm__env_vars[i].name, hm__env_vars[i].help);
    fprintf(f, "  (set by the commands for their runtimes:");
    for (int i = 0, k = 0; i < HM_ENV_COUNT; i++)
        if (strcmp(hm__env_vars[i].who, "user"))
            fprintf(f, "%s%s", k++ % 4 ? " " : "\n   ", hm__env_vars[i].name);
    fprintf(f, ")\nRuntimes ignore all of these in setuid or capability-raised programs.\n");
    fprintf(f, "\nRun 'hetmem <command> --help' or 'hetmem help <command>' for a command's options,\n"
               "'hetmem --version' for the version.\n");
}

static const hm_cmd_t *find_command(const char *name)
{
    for (size_t i = 0; i < HM_ARRAY_LEN(commands); i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

/* hetmem help [COMMAND [SUBCOMMAND]]: the command's own --help. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return HM_EXIT_OK;
    }
    const hm_cmd_t *c = find_command(argv[2]);
    if (!c) {
        fprintf(stderr, "hetmem: help: %s: unknown command (see 'hetmem --help')\n", argv[2]);
        return HM_EXIT_USAGE;
    }
    char *args[4] = {argv[2], NULL, NULL, NULL};
    int n = 1;
    if (argc > 3)
        args[n++] = argv[3];
    args[n++] = "--help";
    return c->run(c, n, args);
}

int main(int argc, char **argv)
{
    if (hm__log_init() != 0) {
        fprintf(stderr, "hetmem: %s=%s: not a log level (%s)\n", hm__env_name(HM_ENV_LOG), hm__env_get(HM_ENV_LOG),
                HM_LOG_LEVELS);
        return HM_EXIT_RUNTIME;
    }
    if (argc < 2) {
        usage(stderr);
        return HM_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return HM_EXIT_OK;
    }
    if (strcmp(name, "help") == 0)
        return help(argc, argv);
    if (strcmp(name, "--version") == 0) {
        printf("hetmem %s\n", HETMEM_VERSION);
        return HM_EXIT_OK;
    }
    const hm_cmd_t *c = find_command(name);
    if (c)
        return c->run(c, argc - 1, argv + 1);
    fprintf(stderr, "hetmem: %s: unknown command (see 'hetmem --help')\n", name);
    return HM_EXIT_USAGE;
}
