/*
 * xsbench: macroscopic cross-section lookups of a Monte Carlo neutron
 * transport code over a unionized energy grid (XSBench-like, event-based).
 * Latency-bound random access.
 *
 * Data: every nuclide has a sorted energy grid with five cross sections per
 * point (nuclide_grids). The unionized grid holds all nuclide energies sorted
 * (union_energy) and, for every union point and nuclide, the index of the
 * nuclide grid interval that contains it (index_grid), so one binary search
 * per lookup replaces one search per nuclide. A lookup samples an energy and
 * a material (12 materials, the composition and frequencies of XSBench's
 * "small" reactor model), then sums concentration-weighted interpolated
 * cross sections over the material's nuclides.
 *
 * Verification: on every 16th lookup the five macroscopic cross sections are
 * recomputed independently, by a binary search on each nuclide's own grid
 * (no union grid, no index grid), and must match to 1e-12. A checksum of all
 * results is printed for run-to-run comparison.
 *
 * Objects: nuclide_grids (hot: ~186 loads per lookup), index_grid (the
 * largest; ~16 loads per lookup, one row), union_energy (binary search, ~17
 * loads per lookup on a smaller array), mat_nucs/mat_concs (tiny, hottest per
 * byte), p_energy/p_mat (particle bank, one load each per lookup) and
 * macro_xs (results, five stores per lookup, read once by verification).
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

enum { NXS = 5, NMAT = 12, CHECK_EVERY = 16 };

typedef struct { double energy, xs[NXS]; } gridpoint_t;

static uint64_t n_iso, n_gp, lookups, iters;
static int inject;

static void preset_tiny(void)   { n_iso = 68; n_gp = 600;   lookups = 100000;  iters = 1; }
static void preset_small(void)  { n_iso = 68; n_gp = 11303; lookups = 1000000; iters = 1; }
static void preset_medium(void) { n_iso = 68; n_gp = 11303; lookups = 5000000; iters = 1; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "68 nuclides x 600 points (index grid 11 MiB), 100k lookups"},
    {"small", preset_small, "68 x 11303 points, XSBench small (index grid 209 MiB), 1M lookups"},
    {"medium", preset_medium, "68 x 11303 points, 5M lookups"},
};

static const ma_opt_t opts[] = {
    {"--isotopes", "N", MA_OPT_U64, &n_iso, 34, 4096, "number of nuclides (>= 34, the fuel's)"},
    {"--gridpoints", "N", MA_OPT_U64, &n_gp, 2, 1e6, "energy points per nuclide"},
    {"--lookups", "N", MA_OPT_U64, &lookups, 1, 1e9, "cross-section lookups per iteration"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e4, "repetitions of the lookup batch (fresh particles)"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"xsbench", "XSBench-like unionized-grid cross-section lookups",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

/* XSBench "small" model: nuclides per material and material frequencies. */
static const int mat_count[NMAT] = {34, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9};
static const double mat_freq[NMAT] = {0.140, 0.052, 0.275, 0.134, 0.154, 0.064,
                                      0.066, 0.055, 0.008, 0.015, 0.025, 0.013};

enum { PH_INIT, PH_UNIONIZE, PH_SAMPLE, PH_LOOKUP, PH_VERIFY, PH_N };

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Largest i in [0, len) with v[i] <= e, or 0 when none; strided view. */
static size_t search(const double *v, size_t stride, size_t len, double e)
{
    size_t lo = 0, hi = len; /* invariant: answer in [lo, hi) */
    if (v[0] > e) return 0;
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (v[mid * stride] <= e) lo = mid;
        else hi = mid;
    }
    return lo;
}

static inline void interpolate(const gridpoint_t *lo, double e, double conc, double *macro)
{
    const gridpoint_t *hi = lo + 1;
    const double f = (hi->energy - e) / (hi->energy - lo->energy);
    for (int k = 0; k < NXS; k++) macro[k] += conc * (hi->xs[k] - f * (hi->xs[k] - lo->xs[k]));
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("init"), MA_PHASE("unionize"), MA_PHASE("sample"),
                           MA_PHASE("lookup"), MA_PHASE("verify")};
    gridpoint_t *nuclide_grids;
    double *union_energy, *mat_concs, *p_energy, *macro_xs;
    int32_t *index_grid, *mat_nucs, *p_mat;
    size_t *cursor;
    ma_rng_t rng;
    size_t checked = 0, bad = 0;
    double maxerr = 0.0;
    uint64_t checksum = 0;

    ma_parse(&app, argc, argv);
    const size_t n_union = (size_t)n_iso * n_gp;
    const size_t maxnucs = 34;
    printf("xsbench: isotopes=%llu gridpoints=%llu union=%zu lookups=%llu iters=%llu\n",
           (unsigned long long)n_iso, (unsigned long long)n_gp, n_union,
           (unsigned long long)lookups, (unsigned long long)iters);
    if (n_union > INT32_MAX) ma_fail(2, "--gridpoints", "isotopes x gridpoints exceeds 2^31");

    MA_ALLOC(nuclide_grids, n_union, "nuclide_grids");
    MA_ALLOC(union_energy, n_union, "union_energy");
    MA_ALLOC(index_grid, n_union * n_iso, "index_grid");
    MA_ALLOC(mat_nucs, NMAT * maxnucs, "mat_nucs");
    MA_ALLOC(mat_concs, NMAT * maxnucs, "mat_concs");
    MA_ALLOC(p_energy, lookups, "p_energy");
    MA_ALLOC(p_mat, lookups, "p_mat");
    MA_ALLOC(macro_xs, lookups * NXS, "macro_xs");
    cursor = calloc(n_iso, sizeof *cursor);
    if (!cursor) ma_oom("cursor", n_iso * sizeof *cursor);

    ma_phase_begin(&ph[PH_INIT]);
    ma_rng_seed(&rng, 0x58b);
    for (size_t i = 0; i < n_union; i++) {
        nuclide_grids[i].energy = ma_rng_uniform(&rng);
        for (int k = 0; k < NXS; k++) nuclide_grids[i].xs[k] = ma_rng_uniform(&rng);
    }
    for (size_t nuc = 0; nuc < n_iso; nuc++) /* each nuclide's grid sorted by energy */
        qsort(&nuclide_grids[nuc * n_gp], n_gp, sizeof(gridpoint_t), cmp_double);
    /* Fuel holds nuclides 0..33; other materials draw distinct nuclides. */
    for (int m = 0; m < NMAT; m++)
        for (int j = 0; j < mat_count[m]; j++) {
            int32_t pick;
            int dup;
            if (m == 0) {
                pick = j;
            } else {
                do {
                    pick = (int32_t)ma_rng_below(&rng, n_iso);
                    dup = 0;
                    for (int q = 0; q < j; q++) dup |= mat_nucs[m * maxnucs + q] == pick;
                } while (dup);
            }
            mat_nucs[m * maxnucs + j] = pick;
            mat_concs[m * maxnucs + j] = ma_rng_uniform(&rng);
        }
    ma_phase_end(&ph[PH_INIT]);

    ma_phase_begin(&ph[PH_UNIONIZE]);
    for (size_t i = 0; i < n_union; i++) union_energy[i] = nuclide_grids[i].energy;
    qsort(union_energy, n_union, sizeof(double), cmp_double);
    /* One cursor per nuclide walks its grid as the union energy grows:
     * index = largest i with e_nuc[i] <= union energy, within [0, n_gp-2]. */
    for (size_t u = 0; u < n_union; u++) {
        for (size_t nuc = 0; nuc < n_iso; nuc++) {
            const gridpoint_t *g = &nuclide_grids[nuc * n_gp];
            size_t i = cursor[nuc];
            while (i + 2 < n_gp && g[i + 1].energy <= union_energy[u]) i++;
            cursor[nuc] = i;
            index_grid[u * n_iso + nuc] = (int32_t)(n_gp > 1 ? i : 0);
        }
    }
    ma_phase_end(&ph[PH_UNIONIZE]);

    double cdf[NMAT], acc = 0.0;
    for (int m = 0; m < NMAT; m++) cdf[m] = (acc += mat_freq[m]);

    for (uint64_t it = 0; it < iters; it++) {
        ma_phase_begin(&ph[PH_SAMPLE]);
        for (size_t l = 0; l < lookups; l++) {
            const double r = ma_rng_uniform(&rng) * acc;
            int m = 0;
            while (m < NMAT - 1 && r >= cdf[m]) m++;
            p_energy[l] = ma_rng_uniform(&rng);
            p_mat[l] = m;
        }
        if (inject) {
            /* test hook: a unionization bug on the row lookup 0 uses */
            const size_t u = search(union_energy, 1, n_union, p_energy[0]);
            for (size_t nuc = 0; nuc < n_iso; nuc++) {
                int32_t *ix = &index_grid[u * n_iso + nuc];
                *ix = *ix > 0 ? *ix - 1 : *ix + 1;
            }
        }
        ma_phase_end(&ph[PH_SAMPLE]);

        ma_phase_begin(&ph[PH_LOOKUP]);
        MA_OMP("omp parallel for schedule(dynamic, 256)")
        for (size_t l = 0; l < lookups; l++) {
            const double e = p_energy[l];
            const int m = p_mat[l];
            const size_t u = search(union_energy, 1, n_union, e);
            const int32_t *row = &index_grid[u * n_iso];
            double macro[NXS] = {0};
            for (int j = 0; j < mat_count[m]; j++) {
                const int32_t nuc = mat_nucs[m * maxnucs + j];
                interpolate(&nuclide_grids[(size_t)nuc * n_gp + (size_t)row[nuc]], e,
                            mat_concs[m * maxnucs + j], macro);
            }
            for (int k = 0; k < NXS; k++) macro_xs[l * NXS + k] = macro[k];
        }
        ma_phase_end(&ph[PH_LOOKUP]);

        ma_phase_begin(&ph[PH_VERIFY]);
        for (size_t l = 0; l < lookups; l++) {
            for (int k = 0; k < NXS; k++) {
                uint64_t bits;
                memcpy(&bits, &macro_xs[l * NXS + k], sizeof bits);
                checksum = (checksum ^ bits) * 0x100000001b3ull;
            }
            if (l % CHECK_EVERY) continue;
            /* Reference: per-nuclide binary search, no union grid. */
            const double e = p_energy[l];
            const int m = p_mat[l];
            double ref[NXS] = {0};
            for (int j = 0; j < mat_count[m]; j++) {
                const int32_t nuc = mat_nucs[m * maxnucs + j];
                const gridpoint_t *g = &nuclide_grids[(size_t)nuc * n_gp];
                size_t i = search(&g[0].energy, sizeof(gridpoint_t) / sizeof(double), n_gp, e);
                if (i > n_gp - 2) i = n_gp - 2;
                interpolate(&g[i], e, mat_concs[m * maxnucs + j], ref);
            }
            for (int k = 0; k < NXS; k++) {
                const double got = macro_xs[l * NXS + k];
                const double err = fabs(got - ref[k]) / fmax(fabs(ref[k]), 1e-300);
                if (!(err <= 1e-12)) bad++;
                if (err > maxerr || err != err) maxerr = err;
            }
            checked++;
        }
        ma_phase_end(&ph[PH_VERIFY]);
    }

    ma_report_phases(ph, PH_N);
    printf("lookup rate: %.3f Mlookups/s\n", (double)lookups * (double)iters / ph[PH_LOOKUP].total / 1e6);
    printf("checksum: %016llx\n", (unsigned long long)checksum);
    printf("reference lookups: %zu, mismatches: %zu, max relative error: %.3e\n", checked, bad, maxerr);

    free(cursor);
    free(nuclide_grids);
    free(union_energy);
    free(index_grid);
    free(mat_nucs);
    free(mat_concs);
    free(p_energy);
    free(p_mat);
    free(macro_xs);
    return ma_finish(bad == 0 && checked > 0);
}
