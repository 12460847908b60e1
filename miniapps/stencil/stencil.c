/*
 * stencil: 3D 7-point Jacobi iteration with two grids and a coefficient
 * field, as in the implicit step of a variable-coefficient diffusion solver.
 *
 * Problem: on an n^3 node grid with Dirichlet boundary,
 *   (A u)_i = u_i + alpha * sum_{j in 6 neighbours} kf_ij (u_i - u_j) = f_i,
 *   kf_ij = (k_i + k_j) / 2,
 * solved by Jacobi sweeps u' = (f + alpha sum kf u_j) / (1 + alpha sum kf),
 * ping-ponging between grids u_a and u_b.
 *
 * Verification (manufactured solution): f is computed as A applied to a
 * known field u_exact, so u_exact is the discrete solution. A is strictly
 * diagonally dominant, so each Jacobi sweep contracts the max-norm error by
 * at least rho = max_i alpha S_i / (1 + alpha S_i) (S_i = sum of kf_ij), which
 * we compute from the actual coefficient field. After n sweeps from u = 0 the
 * error must satisfy ||u - u_exact||_inf <= rho^n ||u_exact||_inf plus a
 * rounding allowance; any wrong stencil weight, index or boundary breaks it.
 *
 * Objects: u_a, u_b (hot, read and written every sweep), coef (read-only,
 * read every sweep), rhs (read-only, read every sweep), u_exact (cold: written
 * at setup, read once at verification).
 */
#include "../common/miniapp.h"

#include <math.h>

static uint64_t n, iters;
static double alpha;
static int inject;

static void preset_tiny(void)   { n = 96;  iters = 30; }
static void preset_small(void)  { n = 192; iters = 30; }
static void preset_medium(void) { n = 320; iters = 30; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "96^3 grid (5 x 6.8 MiB), 30 sweeps"},
    {"small", preset_small, "192^3 grid (5 x 54 MiB), 30 sweeps"},
    {"medium", preset_medium, "320^3 grid (5 x 250 MiB), 30 sweeps"},
};

static const ma_opt_t opts[] = {
    {"--n", "N", MA_OPT_U64, &n, 4, 1500, "grid points per dimension (boundary included)"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e6, "Jacobi sweeps"},
    {"--alpha", "A", MA_OPT_F64, &alpha, 1e-6, 1e3, "diffusion number dt*D/h^2 (default 0.1)"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"stencil", "3D 7-point Jacobi with two grids and a coefficient field",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_SETUP, PH_SWEEP, PH_VERIFY, PH_N };

#define IDX(i, j, k) (((size_t)(k) * n + (size_t)(j)) * n + (size_t)(i))

/* One Jacobi sweep over the interior; returns the largest change. */
static double sweep(const double *restrict src, double *restrict dst,
                    const double *restrict coef, const double *restrict rhs)
{
    const size_t sx = 1, sy = n, sz = n * n;
    double maxdiff = 0.0;
    MA_OMP("omp parallel for schedule(static) reduction(max:maxdiff)")
    for (size_t k = 1; k < n - 1; k++)
        for (size_t j = 1; j < n - 1; j++) {
            size_t p = IDX(1, j, k);
            for (size_t i = 1; i < n - 1; i++, p++) {
                const double kc = coef[p];
                const double kw = 0.5 * (kc + coef[p - sx]), ke = 0.5 * (kc + coef[p + sx]);
                const double ks = 0.5 * (kc + coef[p - sy]), kn = 0.5 * (kc + coef[p + sy]);
                const double kb = 0.5 * (kc + coef[p - sz]), kt = 0.5 * (kc + coef[p + sz]);
                const double off = kw * src[p - sx] + ke * src[p + sx] + ks * src[p - sy] +
                                   kn * src[p + sy] + kb * src[p - sz] + kt * src[p + sz];
                const double sum = kw + ke + ks + kn + kb + kt;
                const double v = (rhs[p] + alpha * off) / (1.0 + alpha * sum);
                const double d = fabs(v - src[p]);
                if (d > maxdiff) maxdiff = d;
                dst[p] = v;
            }
        }
    return maxdiff;
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("setup"), MA_PHASE("sweep"), MA_PHASE("verify")};
    double *u_a, *u_b, *coef, *rhs, *u_exact, *tx, *ty, *tz;
    double rho = 0.0, umax = 0.0, err = 0.0, lastdiff = 0.0;
    ma_rng_t rng;

    alpha = 0.1;
    ma_parse(&app, argc, argv);
    const size_t cells = (size_t)n * n * n;
    printf("stencil: n=%llu iters=%llu alpha=%g\n", (unsigned long long)n,
           (unsigned long long)iters, alpha);

    MA_ALLOC(u_a, cells, "u_a");
    MA_ALLOC(u_b, cells, "u_b");
    MA_ALLOC(coef, cells, "coef");
    MA_ALLOC(rhs, cells, "rhs");
    MA_ALLOC(u_exact, cells, "u_exact");
    tx = malloc(3 * n * sizeof *tx);
    if (!tx) ma_oom("profiles", 3 * n * sizeof *tx);
    ty = tx + n;
    tz = ty + n;

    ma_phase_begin(&ph[PH_SETUP]);
    /* Separable smooth solution: the 1D profiles let setup compute rhs
     * without re-reading u_exact, which keeps u_exact cold by construction. */
    for (size_t i = 0; i < n; i++) {
        const double x = (double)i / (double)(n - 1);
        tx[i] = 1.0 + sin(3.0 * x);
        ty[i] = cos(2.0 * x) + 0.5;
        tz[i] = 1.0 + x * x;
    }
    /* Coefficients in [0.5, 1.5], rough on purpose (a heterogeneous medium). */
    ma_rng_seed(&rng, 0xc0eff);
    for (size_t p = 0; p < cells; p++) coef[p] = 0.5 + ma_rng_uniform(&rng);
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                const size_t p = IDX(i, j, k);
                const double ue = tx[i] * ty[j] * tz[k];
                const int boundary = i == 0 || j == 0 || k == 0 || i == n - 1 || j == n - 1 || k == n - 1;
                u_exact[p] = ue;
                if (fabs(ue) > umax) umax = fabs(ue);
                u_a[p] = u_b[p] = boundary ? ue : 0.0;
                rhs[p] = boundary ? ue : 0.0;
            }
    /* rhs = A u_exact on the interior, and the contraction factor rho. */
    for (size_t k = 1; k < n - 1; k++)
        for (size_t j = 1; j < n - 1; j++)
            for (size_t i = 1; i < n - 1; i++) {
                const size_t p = IDX(i, j, k);
                const double uc = tx[i] * ty[j] * tz[k];
                const double kc = coef[p];
                const double nb[6][2] = {
                    {coef[p - 1], tx[i - 1] * ty[j] * tz[k]},
                    {coef[p + 1], tx[i + 1] * ty[j] * tz[k]},
                    {coef[p - n], tx[i] * ty[j - 1] * tz[k]},
                    {coef[p + n], tx[i] * ty[j + 1] * tz[k]},
                    {coef[p - n * n], tx[i] * ty[j] * tz[k - 1]},
                    {coef[p + n * n], tx[i] * ty[j] * tz[k + 1]},
                };
                double acc = 0.0, s = 0.0;
                for (int q = 0; q < 6; q++) {
                    const double kf = 0.5 * (kc + nb[q][0]);
                    acc += kf * (uc - nb[q][1]);
                    s += kf;
                }
                rhs[p] = uc + alpha * acc;
                if (alpha * s / (1.0 + alpha * s) > rho) rho = alpha * s / (1.0 + alpha * s);
            }
    ma_phase_end(&ph[PH_SETUP]);

    double *src = u_a, *dst = u_b;
    for (uint64_t it = 0; it < iters; it++) {
        ma_phase_begin(&ph[PH_SWEEP]);
        lastdiff = sweep(src, dst, coef, rhs);
        ma_phase_end(&ph[PH_SWEEP]);
        double *t = src;
        src = dst;
        dst = t;
    }
    if (inject) src[IDX(n / 2, n / 2, n / 2)] += 1e-6 * umax; /* test hook: must be caught */

    ma_phase_begin(&ph[PH_VERIFY]);
    for (size_t p = 0; p < cells; p++) {
        const double e = fabs(src[p] - u_exact[p]);
        if (e > err || e != e) err = e;
    }
    ma_phase_end(&ph[PH_VERIFY]);

    /* Initial error is max|u_exact| over the interior <= umax (u starts at 0).
     * Rounding: each sweep adds a few ulps of umax, damped by the same rho. */
    const double bound = pow(rho, (double)iters) * umax * (1.0 + 1e-12) +
                         64.0 * 0x1.0p-52 * umax / (1.0 - rho);
    ma_report_phases(ph, PH_N);
    printf("contraction rho: %.6f, last update: %.3e\n", rho, lastdiff);
    printf("max error vs manufactured solution: %.3e (bound %.3e)\n", err, bound);
    printf("sweep rate: %.1f Mcell/s\n",
           (double)(n - 2) * (n - 2) * (n - 2) * (double)iters / ph[PH_SWEEP].total / 1e6);

    free(tx);
    free(u_a);
    free(u_b);
    free(coef);
    free(rhs);
    free(u_exact);
    return ma_finish(err <= bound);
}
