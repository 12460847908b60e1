/*
 * stream: the four STREAM kernels (copy, scale, add, triad) over three
 * arrays, repeated. Bandwidth-bound.
 *
 * Objects: a, b, c (hot, streamed by every iteration) and a_init, the saved
 * initial state (cold: written once at setup, read once at verification).
 *
 * Verification: every element of a, b and c is compared against the value the
 * kernels must produce analytically. With the STREAM update order the state
 * after one iteration depends only on a's previous value:
 *   c = a; b = s*a; c = a + s*a; a = s*a + s*(a + s*a).
 * We pick s = sqrt(2) - 1 so that a's growth factor 2s + s^2 is exactly 1 in
 * real arithmetic: values stay O(1) for any iteration count, and the expected
 * value of every element is a_init times a coefficient from the scalar chain.
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

static uint64_t n, iters;
static int inject;

static void preset_tiny(void)   { n = 1u << 20; iters = 20; }
static void preset_small(void)  { n = 1u << 23; iters = 20; }
static void preset_medium(void) { n = 1u << 25; iters = 20; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "n=2^20 doubles per array (4 x 8 MiB), 20 iterations"},
    {"small", preset_small, "n=2^23 (4 x 64 MiB), 20 iterations"},
    {"medium", preset_medium, "n=2^25 (4 x 256 MiB), 20 iterations"},
};

static const ma_opt_t opts[] = {
    {"--n", "N", MA_OPT_U64, &n, 1, 1ull << 31, "elements per array"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e6, "repetitions of the four kernels"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"stream", "STREAM copy/scale/add/triad over three arrays",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_INIT, PH_COPY, PH_SCALE, PH_ADD, PH_TRIAD, PH_VERIFY, PH_N };

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("init"), MA_PHASE("copy"), MA_PHASE("scale"),
                           MA_PHASE("add"), MA_PHASE("triad"), MA_PHASE("verify")};
    double *a, *b, *c, *a_init;
    const double s = sqrt(2.0) - 1.0;
    double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
    const double bytes[4] = {16.0, 16.0, 24.0, 24.0}; /* per element, STREAM counting */
    static const char *kname[4] = {"copy", "scale", "add", "triad"};
    ma_rng_t rng;
    size_t bad = 0;
    double maxerr = 0;

    ma_parse(&app, argc, argv);
    printf("stream: n=%llu iters=%llu\n", (unsigned long long)n, (unsigned long long)iters);

    MA_ALLOC(a, n, "a");
    MA_ALLOC(b, n, "b");
    MA_ALLOC(c, n, "c");
    MA_ALLOC(a_init, n, "a_init");

    ma_phase_begin(&ph[PH_INIT]);
    ma_rng_seed(&rng, 0x5eedu);
    for (size_t i = 0; i < n; i++) {
        /* Distinct per-element values, so a misplaced or skipped element shows. */
        a_init[i] = 1.0 + ma_rng_uniform(&rng);
    }
    MA_OMP("omp parallel for schedule(static)")
    for (size_t i = 0; i < n; i++) {
        a[i] = a_init[i];
        b[i] = 2.0;
        c[i] = 0.0;
    }
    ma_phase_end(&ph[PH_INIT]);

    for (uint64_t k = 0; k < iters; k++) {
        double t;

        ma_phase_begin(&ph[PH_COPY]);
        t = ma_now();
        MA_OMP("omp parallel for schedule(static)")
        for (size_t i = 0; i < n; i++) c[i] = a[i];
        t = ma_now() - t;
        ma_phase_end(&ph[PH_COPY]);
        if (t < best[0]) best[0] = t;

        ma_phase_begin(&ph[PH_SCALE]);
        t = ma_now();
        MA_OMP("omp parallel for schedule(static)")
        for (size_t i = 0; i < n; i++) b[i] = s * c[i];
        t = ma_now() - t;
        ma_phase_end(&ph[PH_SCALE]);
        if (t < best[1]) best[1] = t;

        ma_phase_begin(&ph[PH_ADD]);
        t = ma_now();
        MA_OMP("omp parallel for schedule(static)")
        for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
        t = ma_now() - t;
        ma_phase_end(&ph[PH_ADD]);
        if (t < best[2]) best[2] = t;

        ma_phase_begin(&ph[PH_TRIAD]);
        t = ma_now();
        MA_OMP("omp parallel for schedule(static)")
        for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        t = ma_now() - t;
        ma_phase_end(&ph[PH_TRIAD]);
        if (t < best[3]) best[3] = t;

        if (inject && k == iters / 2) a[n / 3] *= 1.0 + 1e-9; /* test hook: must be caught */
    }

    /* The kernels are linear in a's previous value, so every element must
     * equal a_init[i] times a coefficient that we obtain by replaying the
     * kernels on scalars (as STREAM's checkSTREAMresults does). Rounding
     * differs between the two paths by a few ulps per operation; nothing in
     * the chain cancels (all terms positive), so the bound grows linearly. */
    ma_phase_begin(&ph[PH_VERIFY]);
    double ga = 1.0, gb = 2.0, gc = 0.0;
    for (uint64_t k = 0; k < iters; k++) {
        gc = ga;
        gb = s * gc;
        gc = ga + gb;
        ga = gb + s * gc;
    }
    const double tol = 1e-13 + 16.0 * (double)iters * 0x1.0p-52;
    for (size_t i = 0; i < n; i++) {
        const double ref[3] = {ga * a_init[i], gb * a_init[i], gc * a_init[i]};
        const double got[3] = {a[i], b[i], c[i]};
        for (int j = 0; j < 3; j++) {
            double err = fabs(got[j] - ref[j]) / fabs(ref[j]);
            if (!(err <= tol)) bad++;
            if (err > maxerr || err != err) maxerr = err;
        }
    }
    ma_phase_end(&ph[PH_VERIFY]);

    printf("%-8s %12s %12s\n", "kernel", "best_MB/s", "best_s");
    for (int k = 0; k < 4; k++)
        printf("%-8s %12.1f %12.6f\n", kname[k], bytes[k] * (double)n / best[k] / 1e6, best[k]);
    ma_report_phases(ph, PH_N);
    printf("max relative error: %.3e, mismatched elements: %zu\n", maxerr, bad);

    free(a);
    free(b);
    free(c);
    free(a_init);
    return ma_finish(bad == 0);
}
