/* Command line, timers and reporting shared by the mini-apps. */
#include "miniapp.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

const char *ma_app_name = "miniapp";
size_t ma_footprint;

void ma_fail(int status, const char *what, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: %s: ", ma_app_name, what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

void ma_oom(const char *name, size_t bytes)
{
    ma_fail(1, name, "cannot allocate %zu bytes", bytes);
}

double ma_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(const ma_app_t *app)
{
    printf("usage: %s [--size PRESET] [options]\n%s\n\noptions:\n", app->name, app->purpose);
    printf("  %-22s %s\n", "--size PRESET", "problem size preset (default: first below)");
    for (size_t i = 0; i < app->npresets; i++)
        printf("  %-22s   %-7s %s\n", "", app->presets[i].name, app->presets[i].summary);
    for (size_t i = 0; i < app->nopts; i++) {
        const ma_opt_t *o = &app->opts[i];
        char lhs[64];
        if (!o->help) continue;
        snprintf(lhs, sizeof lhs, "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-22s %s\n", lhs, o->help);
    }
    printf("  %-22s %s\n", "--help", "show this help");
    printf("\nExit status: 0 verification passed, 1 verification failed or runtime error, 2 bad usage.\n");
}

/* Strict number parsing: the whole argument must be a finite number inside
 * the option's range; strtoull alone would accept "-1" and "12abc". */
static void parse_value(const ma_opt_t *o, const char *s)
{
    char *end = NULL;
    double v;
    errno = 0;
    if (o->kind == MA_OPT_U64) {
        unsigned long long u;
        if (*s < '0' || *s > '9')
            ma_fail(2, o->name, "expected a non-negative integer, got '%s'", s);
        u = strtoull(s, &end, 10);
        if (errno || *end)
            ma_fail(2, o->name, "expected a non-negative integer, got '%s'", s);
        if ((double)u < o->min || (double)u > o->max)
            ma_fail(2, o->name, "%s is out of range [%.0f, %.0f]", s, o->min, o->max);
        *(uint64_t *)o->dst = u;
        return;
    }
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        ma_fail(2, o->name, "expected a number, got '%s'", s);
    if (v < o->min || v > o->max)
        ma_fail(2, o->name, "%s is out of range [%g, %g]", s, o->min, o->max);
    *(double *)o->dst = v;
}

/* Splits "--name=value" so both spellings work. Returns the option or NULL. */
static const ma_opt_t *find_opt(const ma_app_t *app, const char *arg, const char **inline_val)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    *inline_val = eq ? eq + 1 : NULL;
    for (size_t i = 0; i < app->nopts; i++)
        if (strlen(app->opts[i].name) == len && strncmp(app->opts[i].name, arg, len) == 0)
            return &app->opts[i];
    return NULL;
}

void ma_parse(const ma_app_t *app, int argc, char **argv)
{
    const ma_preset_t *preset = &app->presets[0];
    ma_app_name = app->name;

    /* Pass 1: --help and --size, so that the preset is applied before any
     * explicit option regardless of the order on the command line. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(app);
            exit(0);
        }
        if (strcmp(a, "--size") == 0) {
            if (i + 1 >= argc) ma_fail(2, "--size", "missing value");
            val = argv[++i];
        } else if (strncmp(a, "--size=", 7) == 0) {
            val = a + 7;
        } else {
            continue;
        }
        preset = NULL;
        for (size_t p = 0; p < app->npresets; p++)
            if (strcmp(app->presets[p].name, val) == 0) preset = &app->presets[p];
        if (!preset) {
            char names[128] = "";
            for (size_t p = 0; p < app->npresets; p++) {
                if (p) strncat(names, "|", sizeof names - strlen(names) - 1);
                strncat(names, app->presets[p].name, sizeof names - strlen(names) - 1);
            }
            ma_fail(2, "--size", "unknown preset '%s' (expected %s)", val, names);
        }
    }
    preset->apply();

    /* Pass 2: everything else, in order. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        const ma_opt_t *o;
        if (strcmp(a, "--size") == 0) { i++; continue; }
        if (strncmp(a, "--size=", 7) == 0) continue;
        o = find_opt(app, a, &val);
        if (!o) {
            if (a[0] == '-') ma_fail(2, a, "unknown option (see --help)");
            ma_fail(2, a, "unexpected argument (see --help)");
        }
        if (o->kind == MA_OPT_FLAG) {
            if (val) ma_fail(2, o->name, "takes no value");
            *(int *)o->dst = 1;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) ma_fail(2, o->name, "missing value");
            val = argv[++i];
        }
        parse_value(o, val);
    }
}

void ma_report_phases(const ma_phase_t *phases, size_t n)
{
    printf("%-12s %8s %10s\n", "phase", "calls", "seconds");
    for (size_t i = 0; i < n; i++)
        printf("%-12s %8lu %10.4f\n", phases[i].name, phases[i].count, phases[i].total);
}

int ma_finish(int passed)
{
    printf("footprint: %.1f MiB\n", (double)ma_footprint / (1024.0 * 1024.0));
    printf("verification: %s\n", passed ? "PASSED" : "FAILED");
    fflush(stdout);
    return passed ? 0 : 1;
}
