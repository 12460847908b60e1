#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "hetmem/estimate.h"
#include "hetmem/sim.h"

void hm_cli_init(hm_cli_t *p, const hm_cmd_t *cmd, int argc, char **argv, int stop_at_operand)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->ind = 1;
    p->stop_at_operand = stop_at_operand;
}

static const hm_cli_opt_t *find_short(const hm_cmd_t *cmd, int c)
{
    for (const hm_cli_opt_t *o = cmd->opts; o->name; o++)
        if (o->key == c)
            return o;
    return NULL;
}

static const hm_cli_opt_t *find_long(const hm_cmd_t *cmd, const char *name, size_t len)
{
    for (const hm_cli_opt_t *o = cmd->opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

/* Refuses a second occurrence of an option that is not repeatable: the
 * second value would silently win (or, for a flag, mean nothing), and a
 * user who wrote both probably meant something else. */
static int once(hm_cli_t *p, const hm_cli_opt_t *o)
{
    size_t i = (size_t)(o - p->cmd->opts);
    if (i >= 64 || (o->flags & HM_OPT_REPEAT))
        return o->key;
    if (p->seen >> i & 1) {
        if (o->key > 0 && o->key < 256)
            hm_cli_usage(p->cmd, "option '-%c' (--%s) given twice", o->key, o->name);
        else
            hm_cli_usage(p->cmd, "option '--%s' given twice", o->name);
        return HM_CLI_ERROR;
    }
    p->seen |= UINT64_C(1) << i;
    return o->key;
}

int hm_cli_next(hm_cli_t *p, const char **arg)
{
    *arg = NULL;
    if (p->cluster && *p->cluster) {
        const hm_cli_opt_t *o = find_short(p->cmd, (unsigned char)*p->cluster);
        if (!o) {
            hm_cli_usage(p->cmd, "unknown option '-%c'", *p->cluster);
            return HM_CLI_ERROR;
        }
        p->cluster++;
        if (o->arg) {
            if (*p->cluster) {
                *arg = p->cluster;
            } else if (p->ind < p->argc) {
                *arg = p->argv[p->ind++];
            } else {
                hm_cli_usage(p->cmd, "option '-%c' needs %s", o->key, o->arg);
                return HM_CLI_ERROR;
            }
            p->cluster = NULL;
        }
        return once(p, o);
    }
    p->cluster = NULL;
    while (p->ind < p->argc) {
        char *a = p->argv[p->ind];
        if (strcmp(a, "--") == 0) {
            p->ind++;
            return -1;
        }
        if (a[0] != '-' || a[1] == '\0')
            return -1; /* operand: options end here (no permutation) */
        p->ind++;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            if (len == 4 && strncmp(name, "help", 4) == 0) {
                hm_cli_help(p->cmd, stdout);
                return HM_CLI_HELP;
            }
            const hm_cli_opt_t *o = find_long(p->cmd, name, len);
            if (!o) {
                hm_cli_usage(p->cmd, "unknown option '--%.*s'", (int)len, name);
                return HM_CLI_ERROR;
            }
            if (o->arg) {
                if (eq) {
                    *arg = eq + 1;
                } else if (p->ind < p->argc) {
                    *arg = p->argv[p->ind++];
                } else {
                    hm_cli_usage(p->cmd, "option '--%s' needs %s", o->name, o->arg);
                    return HM_CLI_ERROR;
                }
            } else if (eq) {
                hm_cli_usage(p->cmd, "option '--%s' takes no value", o->name);
                return HM_CLI_ERROR;
            }
            return once(p, o);
        }
        if (a[1] == 'h' && a[2] == '\0') {
            hm_cli_help(p->cmd, stdout);
            return HM_CLI_HELP;
        }
        p->cluster = a + 1;
        return hm_cli_next(p, arg);
    }
    return -1;
}

int hm_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

static void cat(char *buf, size_t size, const char *a, const char *b)
{
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, "%s%s", a, b);
}

/* Appends word to the usage line. The line is not wrapped: help2man takes
 * the synopsis of a man page from the usage line's first line. */
static void usage_word(FILE *f, const char *word)
{
    fputc(' ', f);
    fputs(word, f);
}

void hm_cli_help(const hm_cmd_t *cmd, FILE *f)
{
    /* The usage line: the options as the table lists them, then the operands. */
    fprintf(f, "usage: hetmem %s", cmd->name);
    for (const hm_cli_opt_t *o = cmd->opts; o && o->name; o++) {
        if (o->flags & HM_OPT_ALT)
            continue; /* printed with the option before it */
        char word[256] = "";
        int req = (o->flags & HM_OPT_REQUIRED) != 0;
        if (!req)
            cat(word, sizeof word, "[", "");
        for (const hm_cli_opt_t *a = o; a->name && (a == o || (a->flags & HM_OPT_ALT)); a++) {
            char one[8];
            if (a != o)
                cat(word, sizeof word, " | ", "");
            if (a->key > 0 && a->key < 256) {
                snprintf(one, sizeof one, "-%c", a->key);
                cat(word, sizeof word, one, "");
            } else {
                cat(word, sizeof word, "--", a->name);
            }
            if (a->arg)
                cat(word, sizeof word, " ", a->arg);
        }
        if (!req)
            cat(word, sizeof word, "]", "");
        if (o->flags & HM_OPT_REPEAT)
            cat(word, sizeof word, "...", "");
        usage_word(f, word);
    }
    const char *ops = cmd->usage ? cmd->usage : "";
    size_t first = strcspn(ops, "\n");
    if (first) {
        char word[256];
        snprintf(word, sizeof word, "%.*s", (int)first, ops);
        usage_word(f, word);
    }
    if (ops[first])
        fprintf(f, "\n%s", ops + first + 1);
    fprintf(f, "\n\n%s\n", cmd->summary);
    int has = cmd->opts && cmd->opts[0].name;
    if (has) {
        fprintf(f, "\noptions:\n");
        for (const hm_cli_opt_t *o = cmd->opts; o->name; o++) {
            char left[96];
            if (o->key > 0 && o->key < 256)
                snprintf(left, sizeof left, "-%c, --%s%s%s", o->key, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
            else
                snprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
            if (strlen(left) > 30)
                fprintf(f, "  %s\n  %-30s %s\n", left, "", o->help);
            else
                fprintf(f, "  %-30s %s\n", left, o->help);
        }
    }
    fprintf(f, "  %-30s %s\n", has ? "-h, --help" : "-h, --help", "show this help");
    if (cmd->details)
        fprintf(f, "\n%s\n", cmd->details);
}

int hm_cli_fail(const char *what, int err)
{
    const char *d = err ? hm_errdetail() : NULL;
    size_t wl = strlen(what);
    /* The library's detail often names the file already ("FILE" alone for
     * a system error, "FILE:3:1: ..." or "FILE: rules[0]: ..." for bad
     * content): the file is named once. */
    if (!d || !*d || strcmp(d, what) == 0)
        fprintf(stderr, "hetmem: %s: %s\n", what, hm_strerror(err));
    else if (strncmp(d, what, wl) == 0 && d[wl] == ':')
        fprintf(stderr, "hetmem: %s\n", d);
    else if (strstr(d, hm_strerror(err))) /* "TRACE: No such file or directory" */
        fprintf(stderr, "hetmem: %s: %s\n", what, d);
    else
        fprintf(stderr, "hetmem: %s: %s: %s\n", what, hm_strerror(err), d);
    return HM_EXIT_RUNTIME;
}

int hm_cli_fail_subject(const char *what, int err, ...)
{
    const char *d = hm_errdetail();
    if (!d || !*d)
        return hm_cli_fail(what, err);
    va_list ap;
    va_start(ap, err);
    for (const char *s; (s = va_arg(ap, const char *));) {
        size_t l = strlen(s);
        if (l && !strncmp(d, s, l) && d[l] == ':') {
            va_end(ap);
            fprintf(stderr, "hetmem: %s\n", d);
            return HM_EXIT_RUNTIME;
        }
    }
    va_end(ap);
    fprintf(stderr, "hetmem: %s: %s\n", what, d);
    return HM_EXIT_RUNTIME;
}

int hm_cli_failf(const char *what, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hetmem: %s: %s\n", what, buf);
    return HM_EXIT_RUNTIME;
}

int hm_cli_usage(const hm_cmd_t *cmd, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hetmem: %s: %s (see 'hetmem %s --help')\n", cmd->name, buf, cmd->name);
    return HM_EXIT_USAGE;
}

int hm_cli_u64(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t *out)
{
    if (hm__parse_u64(s, out) != 0) {
        hm_cli_usage(cmd, "%s: '%s' is not a non-negative integer", opt, s);
        return HM_EXIT_USAGE;
    }
    return 0;
}

int hm_cli_u64_in(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, const char *note,
                  uint64_t *out)
{
    if (hm__parse_u64_in(s, min, max, out) == 0)
        return 0;
    char why[96];
    return hm_cli_usage(cmd, "%s: '%s' is %s%s%s%s", opt, s, hm__range_why(why, sizeof why, min, max),
                        note ? " (" : "", note ? note : "", note ? ")" : "");
}

int hm_cli_size(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t *out)
{
    if (hm__parse_size(s, out) != 0) {
        hm_cli_usage(cmd, "%s: '%s' is not a size (%s)", opt, s, HM_SIZE_GRAMMAR);
        return HM_EXIT_USAGE;
    }
    return 0;
}

int hm_cli_unmatched(const char *placement, char *rules, int strict)
{
    if (!rules || !*rules) {
        free(rules);
        return 0;
    }
    int n = 0;
    for (char *save, *t = strtok_r(rules, "\n", &save); t; t = strtok_r(NULL, "\n", &save), n++)
        if (!strict)
            fprintf(stderr, "hetmem: warning: %s: %s\n", placement, t);
        else if (n == 0)
            fprintf(stderr, "hetmem: %s: %s (--strict)\n", placement, t);
    free(rules);
    return strict;
}

int hm_cli_capacity(const hm_cmd_t *cmd, const char *opt, const char *s, uint64_t *out)
{
    if (hm_cli_size(cmd, opt, s, out))
        return HM_EXIT_USAGE;
    size_t len = strlen(s);
    int unit = len && !(s[len - 1] >= '0' && s[len - 1] <= '9');
    if (!unit && *out > 0 && *out < 4096) {
        hm_cli_usage(cmd, "%s: %s bytes is smaller than a page; did you mean %sM?", opt, s, s);
        return HM_EXIT_USAGE;
    }
    return 0;
}

int hm_cmd_not_built(const hm_cmd_t *cmd, int argc, char **argv)
{
    if (hm_cli_wants_help(argc, argv)) {
        hm_cli_help(cmd, stdout);
        return HM_EXIT_OK;
    }
    fprintf(stderr, "hetmem: %s: not built yet in this version\n", cmd->name);
    return HM_EXIT_USAGE;
}

int hm_cli_operand(hm_cli_t *cli, char **argv, int argc, const char **ops, int *nops, int max)
{
    if (cli->ind >= argc)
        return 0;
    int after_dd = cli->ind > 1 && strcmp(argv[cli->ind - 1], "--") == 0;
    do {
        if (*nops >= max)
            return -1;
        ops[(*nops)++] = argv[cli->ind++];
    } while (after_dd && cli->ind < argc);
    return 1;
}


int hm_cli_machine_json(const char *arg, char **json)
{
    char exe[4096], path[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    hm_sim_machine_t *m = NULL;
    int rc = hm_sim_machine_find(arg, n > 0 ? exe : NULL, path, sizeof path);
    if (rc < 0)
        return hm_cli_fail(arg, rc);
    if ((rc = hm_sim_machine_load(&m, path)) < 0)
        return hm_cli_fail(path, rc);
    *json = hm__xstrdup(hm_sim_machine_json(m));
    hm_sim_machine_close(m);
    return 0;
}

void hm_cli_figures_note(const char *what, const struct hm_estimator *e)
{
    const char *note = hm_estimator_figures_note(e);
    if (note)
        fprintf(stderr, "hetmem: %s: %s\n", what, note);
}

int hm_cli_file_has(const char *path, const char *marker)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* a FIFO would block the reads */
        close(fd);
        return -EINVAL;
    }
    char buf[1 << 16];
    size_t keep = 0, ml = strlen(marker);
    int found = 0;
    for (;;) {
        ssize_t n = read(fd, buf + keep, sizeof buf - keep);
        if (n <= 0)
            break;
        size_t len = keep + (size_t)n;
        if (memmem(buf, len, marker, ml)) {
            found = 1;
            break;
        }
        keep = len < ml ? len : ml - 1;
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    return found;
}

int hm_cli_find_program(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -errno;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        snprintf(out, len, "%.*s/%s", (int)n, n ? path : ".", name);
        if (access(out, X_OK) == 0)
            return 0;
        path += n + (c ? 1 : 0);
    }
    return -ENOENT;
}

int hm_cli_runtime_env(void)
{
    /* The runtime refuses these too, but only once the program is started
     * (a record or run then fails without saying where); refused here,
     * nothing runs. The words are the runtime's. */
    const char *v = getenv(hm__env_name(HM_ENV_SPOOL_MAX));
    uint64_t m;
    if (v && (hm__parse_size(v, &m) != 0 || m < HM_SPOOL_MIN)) {
        fprintf(stderr, "hetmem: %s=%s: not a size of at least 64K (%s)\n", hm__env_name(HM_ENV_SPOOL_MAX), v,
                HM_SIZE_GRAMMAR);
        return HM_EXIT_RUNTIME;
    }
    v = getenv(hm__env_name(HM_ENV_SIGNAL_OFFSET));
    int off;
    if (v && hm__signal_offset(v, &off) != 0) {
        fprintf(stderr, "hetmem: %s=%s: not an offset in 0..%d (SIGRTMIN+N must be a real-time signal)\n",
                hm__env_name(HM_ENV_SIGNAL_OFFSET), v, SIGRTMAX - SIGRTMIN);
        return HM_EXIT_RUNTIME;
    }
    return 0;
}

void hm_cli_env_settings(const char *cmd)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++)
        if (hm__env_is_setting(*e))
            fprintf(stderr, "hetmem: warning: %.*s in the environment is ignored (hetmem %s sets the runtime's "
                            "settings from its own options)\n",
                    (int)strcspn(*e, "="), *e, cmd);
}
