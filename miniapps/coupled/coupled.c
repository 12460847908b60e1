/*
 * coupled: an operator-split coupled model of two components, as in
 * climate codes (atmosphere and ocean) and multi-physics solvers: each time
 * step advances one component with several explicit sub-steps,
 * then the other, then exchanges heat across their interface. Each
 * component's phase streams over its own pair of fields and leaves the
 * other's alone, so the phases want different data in fast memory: the
 * mini-app for per-phase placement with migration at phase boundaries.
 *
 * Each component is a periodic 1D field of n cells (double buffered), its
 * heat carried by a wind or current with first-order upwind advection:
 *   u'[i] = u[i] - C (u[i] - u[i+1])
 * with Courant number C = 0.5 in the atmosphere and 0.25 in the ocean,
 * `--substeps` sub-steps per component and step. Coupling over the first
 * n/64 cells: f = c (a[i] - o[i]); a[i] -= f; o[i] += f, with c = 0.25.
 *
 * Objects: atm, atm_new, ocn, ocn_new (hot, each streamed in its own phase),
 * output (cold: every 8th cell of both components, written once at the end).
 *
 * Verification: every update is a convex combination of old values (C <= 1,
 * c <= 1/2) that conserves the sum, so (1) the total heat of both components
 * stays that of the initial state within rounding, and (2) every value stays
 * within the initial minimum and maximum (discrete maximum principle).
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

static uint64_t n, iters, substeps;
static int inject;

static void preset_tiny(void)   { n = 1u << 20; iters = 2; substeps = 10; }
static void preset_small(void)  { n = 1u << 23; iters = 4; substeps = 10; }
static void preset_medium(void) { n = 1u << 25; iters = 4; substeps = 10; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "n=2^20 cells per component (4 x 8 MiB fields), 2 steps of 10 sub-steps"},
    {"small", preset_small, "n=2^23 (4 x 64 MiB), 4 steps"},
    {"medium", preset_medium, "n=2^25 (4 x 256 MiB), 4 steps"},
};

static const ma_opt_t opts[] = {
    {"--n", "N", MA_OPT_U64, &n, 128, 1ull << 31, "cells per component"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e6, "coupled time steps"},
    {"--substeps", "N", MA_OPT_U64, &substeps, 1, 1e6, "advection sub-steps per component and step"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"coupled", "operator-split coupled model: two components, each in its own phase",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_INIT, PH_ATM, PH_OCN, PH_COUPLE, PH_VERIFY, PH_N };

/* One upwind advection sub-step on a periodic ring, from u into v. */
static void advect(const double *restrict u, double *restrict v, size_t len, double courant)
{
    MA_OMP("omp parallel for schedule(static)")
    for (size_t i = 0; i < len - 1; i++)
        v[i] = u[i] - courant * (u[i] - u[i + 1]);
    v[len - 1] = u[len - 1] - courant * (u[len - 1] - u[0]);
}

/* Sum with compensation, so that the conservation check sees the scheme's
 * rounding, not the summation's. */
static double ksum(const double *x, size_t len, double *lo, double *hi)
{
    double s = 0, c = 0;
    for (size_t i = 0; i < len; i++) {
        double y = x[i] - c, t = s + y;
        c = (t - s) - y;
        s = t;
        if (x[i] < *lo) *lo = x[i];
        if (x[i] > *hi) *hi = x[i];
    }
    return s;
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("init"), MA_PHASE("atmosphere"), MA_PHASE("ocean"),
                           MA_PHASE("couple"), MA_PHASE("verify")};
    double *atm, *atm_new, *ocn, *ocn_new, *output;
    ma_rng_t rng;

    ma_parse(&app, argc, argv);
    ma_check_footprint("--n", 4.25 * 8.0 * (double)n);
    printf("coupled: n=%llu iters=%llu substeps=%llu\n", (unsigned long long)n, (unsigned long long)iters,
           (unsigned long long)substeps);
    const size_t m = n / 64 > 0 ? n / 64 : 1, nout = (n + 7) / 8;

    MA_ALLOC(atm, n, "atm");
    MA_ALLOC(atm_new, n, "atm_new");
    MA_ALLOC(ocn, n, "ocn");
    MA_ALLOC(ocn_new, n, "ocn_new");
    MA_ALLOC(output, 2 * nout, "output");

    ma_phase_begin(&ph[PH_INIT]);
    ma_rng_seed(&rng, 0xc0u);
    for (size_t i = 0; i < n; i++) {
        /* A warm band in the atmosphere, a cold one in the ocean, plus noise. */
        atm[i] = 280.0 + 20.0 * (i < n / 4) + ma_rng_uniform(&rng);
        ocn[i] = 275.0 - 5.0 * (i > n / 2) + ma_rng_uniform(&rng);
    }
    ma_phase_end(&ph[PH_INIT]);
    double lo0 = INFINITY, hi0 = -INFINITY;
    const double total0 = ksum(atm, n, &lo0, &hi0) + ksum(ocn, n, &lo0, &hi0);

    for (uint64_t it = 0; it < iters; it++) {
        ma_phase_begin(&ph[PH_ATM]);
        for (uint64_t s = 0; s < substeps; s++) {
            advect(atm, atm_new, n, 0.5);
            double *t = atm; atm = atm_new; atm_new = t;
        }
        ma_phase_end(&ph[PH_ATM]);

        ma_phase_begin(&ph[PH_OCN]);
        for (uint64_t s = 0; s < substeps; s++) {
            advect(ocn, ocn_new, n, 0.25);
            double *t = ocn; ocn = ocn_new; ocn_new = t;
        }
        ma_phase_end(&ph[PH_OCN]);

        ma_phase_begin(&ph[PH_COUPLE]);
        for (size_t i = 0; i < m; i++) {
            double f = 0.25 * (atm[i] - ocn[i]);
            atm[i] -= f;
            ocn[i] += f;
        }
        if (inject && it == iters / 2) ocn[m] += 1e-6 * total0; /* test hook: must be caught */
        ma_phase_end(&ph[PH_COUPLE]);
    }

    ma_phase_begin(&ph[PH_VERIFY]);
    for (size_t j = 0; j < nout; j++) {
        output[j] = atm[8 * j];
        output[nout + j] = ocn[8 * j];
    }
    double lo = INFINITY, hi = -INFINITY;
    const double total = ksum(atm, n, &lo, &hi) + ksum(ocn, n, &lo, &hi);
    /* Each cell's update rounds once per sub-step: the drift of the total
     * stays far below 1e-12 of it; the bound leaves room for 1e-10. */
    const double drift = fabs(total - total0) / total0;
    const int conserved = drift <= 1e-10;
    const double slack = 1e-9 * hi0;
    const int bounded = lo >= lo0 - slack && hi <= hi0 + slack;
    ma_phase_end(&ph[PH_VERIFY]);

    ma_report_phases(ph, PH_N);
    printf("total heat drift: %.3e (bound 1e-10), range [%.6f, %.6f] within initial [%.6f, %.6f]: %s\n", drift, lo, hi,
           lo0, hi0, bounded ? "yes" : "no");
    printf("output checksum: %.9e\n", ksum(output, 2 * nout, &lo, &hi));

    free(atm);
    free(atm_new);
    free(ocn);
    free(ocn_new);
    free(output);
    return ma_finish(conserved && bounded);
}
