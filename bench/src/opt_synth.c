/* Placement search on random synthetic estimator summaries: every algorithm
 * against the exact optimum (exhaustive), as the share of the all-default ->
 * optimum gap each closes, with estimator calls and wall time.
 *
 * usage: bench_opt_synth [--instances N] [--objects MIN-MAX] [--devices D]
 *                        [--capacity FRACTION] [--budget N] [--seed S]
 *                        [--model linear|default]
 *
 * Each instance gives every object its own window with sizes of 1..64 MiB
 * (log-uniform), a slow-device window time of 1..30 ms and a gain of 5..60%
 * on the fastest device; other devices get a share of that gain. Fast
 * devices share FRACTION of the footprint. Prints one Markdown table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/error.h"
#include "hetmem/estimate.h"
#include "hetmem/optimize.h"

static uint64_t rs;
static double unif(void)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static char *instance(int nobj, int ndev, uint64_t *foot)
{
    size_t cap = 1 << 22, len = 0;
    char *s = malloc(cap);
    static const char *names[] = {"slow", "mid", "fast"};
    double t[64][3], total[3] = {0};
    uint64_t size[64];
    *foot = 0;
    for (int o = 0; o < nobj; o++) {
        size[o] = (uint64_t)(exp(log(64.0) * unif()) * 1048576.0);
        *foot += size[o];
        double slow = 1e6 + unif() * 29e6, gain = 0.05 + 0.55 * unif(), part = 0.3 + 0.5 * unif();
        t[o][0] = slow;
        for (int d = 1; d < ndev; d++)
            t[o][d] = slow * (1 - gain * (d == ndev - 1 ? 1 : part));
        for (int d = 0; d < ndev; d++)
            total[d] += t[o][d];
    }
#define OUT(...) len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__)
    OUT("{\"format\": \"hetmem-estimate-summary\", \"version\": 1, \"default\": 0, \"devices\": [");
    for (int d = 0; d < ndev; d++)
        OUT("%s{\"name\": \"%s\", \"runtime_ns\": %.17g, \"period\": 1000, \"capacity\": 68719476736, "
            "\"bandwidth_gbs\": %d, \"read_latency_ns\": %d}",
            d ? ", " : "", ndev == 2 && d ? "fast" : names[d], total[d], 5 * (d + 1), 300 - 100 * d);
    OUT("], \"phases\": [\"(no phase)\"], \"objects\": [");
    for (int o = 0; o < nobj; o++)
        OUT("%s{\"site\": \"0x%llx\", \"name\": \"o%d\", \"size\": %llu, \"allocations\": 1}", o ? ", " : "",
            0x1000ull + (unsigned long long)o, o, (unsigned long long)size[o]);
    OUT("], \"windows\": [");
    for (int o = 0; o < nobj; o++) {
        OUT("%s{\"phase\": 0, \"instructions\": 1000000, \"t_ns\": [", o ? ", " : "");
        for (int d = 0; d < ndev; d++)
            OUT("%s%.17g", d ? ", " : "", t[o][d]);
        OUT("], \"stats\": [");
        for (int d = 0; d < ndev; d++)
            OUT("%s[%d, %d, 1000, %d, 1000]", d ? ", " : "", o, d, 1000 * (300 - 100 * d));
        OUT("]}");
    }
    OUT("]}");
#undef OUT
    return s;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = 20, lo = 12, hi = 20, ndev = 2;
    double frac = 0.25;
    uint64_t budget = 0, seed = 1000;
    hm_est_model_t model = HM_EST_LINEAR;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--instances"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--objects") && sscanf(argv[i + 1], "%d-%d", &lo, &hi) == 2)
            ;
        else if (!strcmp(argv[i], "--devices"))
            ndev = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--capacity"))
            frac = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--budget"))
            budget = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--model") && hm_est_model_parse(argv[i + 1], &model) == 0)
            ;
        else {
            fprintf(stderr, "bench_opt_synth: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (n < 1 || lo < 2 || hi > 24 || lo > hi || ndev < 2 || ndev > 3 || !(frac > 0)) {
        fprintf(stderr, "bench_opt_synth: arguments out of range\n");
        return 2;
    }
    double *share = calloc((size_t)(n * HM_OPT_NALGOS), sizeof *share);
    double *calls = calloc((size_t)(n * HM_OPT_NALGOS), sizeof *calls);
    double *wall = calloc((size_t)(n * HM_OPT_NALGOS), sizeof *wall);
    int *exact = calloc(HM_OPT_NALGOS, sizeof *exact);
    rs = seed;
    for (int k = 0; k < n; k++) {
        int nobj = lo + (int)(unif() * (hi - lo + 1));
        uint64_t foot;
        char *js = instance(nobj, ndev, &foot);
        hm_estimator_t *e = NULL;
        int rc = hm_estimator_parse_summary(&e, "synthetic", js);
        free(js);
        if (rc < 0) {
            fprintf(stderr, "bench_opt_synth: %s: %s\n", hm_strerror(rc), hm_errdetail());
            return 1;
        }
        uint64_t cap[3] = {HM_OPT_UNLIMITED, 0, 0};
        for (int d = 1; d < ndev; d++)
            cap[d] = (uint64_t)(frac * (double)foot) / (uint64_t)(ndev - 1);
        double rt[HM_OPT_NALGOS], base = 0;
        for (int a = HM_OPT_NALGOS - 1; a >= 0; a--) { /* exhaustive before the rest, rl last */
            int alg = (a + HM_OPT_EXHAUSTIVE) % HM_OPT_NALGOS;
            hm_optimize_opts_t o = {.algo = (hm_optimize_algo_t)alg, .model = model, .capacity = cap,
                                    .seed = seed + (uint64_t)k, .budget = alg == HM_OPT_EXHAUSTIVE ? 0 : budget};
            hm_optimize_result_t r;
            if ((rc = hm_optimize_run(e, &o, &r)) < 0) {
                fprintf(stderr, "bench_opt_synth: %s: %s: %s\n", hm_optimize_algo_name(alg), hm_strerror(rc),
                        hm_errdetail());
                return 1;
            }
            rt[alg] = r.estimate.runtime_ns;
            calls[k * HM_OPT_NALGOS + alg] = (double)r.estimator_calls;
            wall[k * HM_OPT_NALGOS + alg] = r.wall_s;
            hm_optimize_result_free(&r);
        }
        hm_est_state_t *s = NULL;
        hm_est_state_open(&s, e, model, 0);
        base = hm_est_state_runtime(s);
        hm_est_state_close(s);
        for (int a = 0; a < HM_OPT_NALGOS; a++) {
            double gap = base - rt[HM_OPT_EXHAUSTIVE];
            share[a * n + k] = gap > 0 ? (base - rt[a]) / gap : 1;
            exact[a] += rt[a] <= rt[HM_OPT_EXHAUSTIVE] * (1 + 1e-9);
        }
        hm_estimator_close(e);
    }
    printf("| algorithm | mean share of gap | worst | optimum found | median calls | median wall (ms) |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int a = 0; a < HM_OPT_NALGOS; a++) {
        double m = 0, w = 1e300, c[4096], t[4096];
        for (int k = 0; k < n && k < 4096; k++) {
            m += share[a * n + k];
            w = share[a * n + k] < w ? share[a * n + k] : w;
            c[k] = calls[k * HM_OPT_NALGOS + a];
            t[k] = wall[k * HM_OPT_NALGOS + a];
        }
        qsort(c, (size_t)n, sizeof *c, cmp_d);
        qsort(t, (size_t)n, sizeof *t, cmp_d);
        printf("| %s | %.4f | %.4f | %d/%d | %.0f | %.2f |\n", hm_optimize_algo_name(a), m / n, w, exact[a], n,
               c[n / 2], 1e3 * t[n / 2]);
    }
    return 0;
}
