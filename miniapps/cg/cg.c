/*
 * cg: preconditioned conjugate gradient on the 27-point 3D Poisson matrix in
 * CSR, as in HPCG (diagonal 26, off-diagonals -1, symmetric Gauss-Seidel
 * preconditioner), with separate spmv, precond, dot and axpy phases.
 *
 * Verification:
 *  1. The residual carried by the CG recurrence must agree with the true
 *     residual b - A x recomputed at the end.
 *  2. b is built from a manufactured solution x_exact by applying the
 *     27-point stencil directly on grid coordinates, independently of the
 *     CSR matrix. The matrix is 27 I - T(x)T(x)T with T = tridiag(1,1,1), so
 *     its smallest eigenvalue is known in closed form:
 *       lambda_min = 27 - prod_d (1 + 2 cos(pi / (n_d + 1))),
 *     and ||x - x_exact||_2 <= ||b - A x||_2 / lambda_min must hold. A wrong
 *     CSR entry makes CG solve another system and breaks this bound.
 *  3. The residual and the A-norm of the error must have decreased.
 *
 * Objects: vals and cols (matrix, streamed three times per iteration: spmv and
 * the two Gauss-Seidel sweeps), row_ptr, diag (preconditioner diagonal), the
 * CG vectors x r z p Ap, and the cold ones: cols_global (the generator's
 * 64-bit global column ids, HPCG's mtxIndG: written and read once at setup,
 * the largest object), b and x_exact (setup and verification).
 */
#include "../common/miniapp.h"

#include <math.h>

static uint64_t n, iters;
static double tol;
static int inject;

static void preset_tiny(void)   { n = 28;  iters = 40; }
static void preset_small(void)  { n = 96;  iters = 50; }
static void preset_medium(void) { n = 160; iters = 50; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "28^3 rows (7 MiB matrix + 4.5 MiB global ids), 40 iterations"},
    {"small", preset_small, "96^3 rows (300 MiB matrix), 50 iterations"},
    {"medium", preset_medium, "160^3 rows (1.4 GiB matrix), 50 iterations"},
};

static const ma_opt_t opts[] = {
    {"--n", "N", MA_OPT_U64, &n, 2, 400, "grid points per dimension (rows = N^3)"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e6, "maximum CG iterations"},
    {"--tol", "T", MA_OPT_F64, &tol, 0, 1, "stop when ||r||/||r0|| < T (default 0: run all iterations)"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"cg", "HPCG-like preconditioned CG on a 27-point 3D Poisson matrix",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_SETUP, PH_SPMV, PH_PRECOND, PH_DOT, PH_AXPY, PH_VERIFY, PH_N };

typedef struct {
    size_t rows;
    const int32_t *row_ptr, *cols;
    const double *vals, *diag;
} csr_t;

static void spmv(const csr_t *A, const double *restrict x, double *restrict y)
{
    MA_OMP("omp parallel for schedule(static)")
    for (size_t i = 0; i < A->rows; i++) {
        double s = 0.0;
        for (int32_t q = A->row_ptr[i]; q < A->row_ptr[i + 1]; q++) s += A->vals[q] * x[A->cols[q]];
        y[i] = s;
    }
}

/* Symmetric Gauss-Seidel z = M^-1 r with z starting at 0, as HPCG's
 * ComputeSYMGS: a forward then a backward sweep. Inherently sequential. */
static void symgs(const csr_t *A, const double *restrict r, double *restrict z)
{
    for (size_t i = 0; i < A->rows; i++) z[i] = 0.0;
    for (size_t i = 0; i < A->rows; i++) {
        double s = r[i];
        for (int32_t q = A->row_ptr[i]; q < A->row_ptr[i + 1]; q++) s -= A->vals[q] * z[A->cols[q]];
        z[i] = (s + A->diag[i] * z[i]) / A->diag[i];
    }
    for (size_t i = A->rows; i-- > 0;) {
        double s = r[i];
        for (int32_t q = A->row_ptr[i]; q < A->row_ptr[i + 1]; q++) s -= A->vals[q] * z[A->cols[q]];
        z[i] = (s + A->diag[i] * z[i]) / A->diag[i];
    }
}

static double dot(size_t m, const double *restrict a, const double *restrict b)
{
    double s = 0.0;
    MA_OMP("omp parallel for schedule(static) reduction(+:s)")
    for (size_t i = 0; i < m; i++) s += a[i] * b[i];
    return s;
}

/* w = alpha x + beta y (HPCG's WAXPBY); w may alias x or y. */
static void waxpby(size_t m, double alpha, const double *x, double beta, const double *y, double *w)
{
    MA_OMP("omp parallel for schedule(static)")
    for (size_t i = 0; i < m; i++) w[i] = alpha * x[i] + beta * y[i];
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("setup"), MA_PHASE("spmv"), MA_PHASE("precond"),
                           MA_PHASE("dot"), MA_PHASE("axpy"), MA_PHASE("verify")};
    int32_t *row_ptr, *cols;
    int64_t *cols_global;
    double *vals, *diag, *x, *r, *z, *p, *Ap, *b, *x_exact;
    ma_rng_t rng;

    tol = 0.0;
    ma_parse(&app, argc, argv);
    const size_t rows = (size_t)n * n * n;
    printf("cg: n=%llu rows=%zu iters=%llu tol=%g\n", (unsigned long long)n, rows,
           (unsigned long long)iters, tol);

    MA_ALLOC(row_ptr, rows + 1, "row_ptr");
    MA_ALLOC(cols_global, rows * 27, "cols_global");
    MA_ALLOC(cols, rows * 27, "cols");
    MA_ALLOC(vals, rows * 27, "vals");
    MA_ALLOC(diag, rows, "diag");
    MA_ALLOC(x, rows, "x");
    MA_ALLOC(r, rows, "r");
    MA_ALLOC(z, rows, "z");
    MA_ALLOC(p, rows, "p");
    MA_ALLOC(Ap, rows, "Ap");
    MA_ALLOC(b, rows, "b");
    MA_ALLOC(x_exact, rows, "x_exact");

    ma_phase_begin(&ph[PH_SETUP]);
    ma_rng_seed(&rng, 0xc9);
    for (size_t i = 0; i < rows; i++) x_exact[i] = 0.5 + ma_rng_uniform(&rng);
    size_t nnz = 0;
    for (size_t iz = 0; iz < n; iz++)
        for (size_t iy = 0; iy < n; iy++)
            for (size_t ix = 0; ix < n; ix++) {
                const size_t row = (iz * n + iy) * n + ix;
                double bsum = 0.0;
                row_ptr[row] = (int32_t)nnz;
                for (int dz = -1; dz <= 1; dz++)
                    for (int dy = -1; dy <= 1; dy++)
                        for (int dx = -1; dx <= 1; dx++) {
                            const long jx = (long)ix + dx, jy = (long)iy + dy, jz = (long)iz + dz;
                            if (jx < 0 || jy < 0 || jz < 0 || jx >= (long)n || jy >= (long)n || jz >= (long)n)
                                continue;
                            const size_t col = ((size_t)jz * n + (size_t)jy) * n + (size_t)jx;
                            const double a = (col == row) ? 26.0 : -1.0;
                            cols_global[nnz] = (int64_t)col;
                            vals[nnz] = a;
                            nnz++;
                            if (col == row) diag[row] = a;
                            /* b from the stencil itself, not from the CSR arrays */
                            bsum += (dx == 0 && dy == 0 && dz == 0 ? 26.0 : -1.0) *
                                    x_exact[((size_t)jz * n + (size_t)jy) * n + (size_t)jx];
                        }
                b[row] = bsum;
            }
    row_ptr[rows] = (int32_t)nnz;
    /* As in HPCG, the generator emits global column ids and a second pass
     * maps them to local 32-bit ids for the kernels; on one process the map
     * is the identity, but the global copy stays allocated (cold). */
    for (size_t q = 0; q < nnz; q++) {
        if (cols_global[q] < 0 || cols_global[q] >= (int64_t)rows)
            ma_fail(1, "setup", "column %lld out of range", (long long)cols_global[q]);
        cols[q] = (int32_t)cols_global[q];
    }
    if (inject) vals[row_ptr[rows / 2]] = -1.01; /* test hook: must be caught */
    const csr_t A = {rows, row_ptr, cols, vals, diag};
    for (size_t i = 0; i < rows; i++) {
        x[i] = 0.0;
        r[i] = b[i];
    }
    ma_phase_end(&ph[PH_SETUP]);

    const double normr0 = sqrt(dot(rows, r, r));
    double normr = normr0, rtz = 0.0, rtz_old = 0.0;
    uint64_t it = 0;
    while (it < iters && !(normr / normr0 < tol)) {
        it++;
        ma_phase_begin(&ph[PH_PRECOND]);
        symgs(&A, r, z);
        ma_phase_end(&ph[PH_PRECOND]);

        ma_phase_begin(&ph[PH_DOT]);
        rtz_old = rtz;
        rtz = dot(rows, r, z);
        ma_phase_end(&ph[PH_DOT]);
        /* r^T M^-1 r == 0 only when r == 0: converged exactly, and going on
         * would divide 0 by 0. */
        if (!(rtz > 0.0)) break;

        ma_phase_begin(&ph[PH_AXPY]);
        if (it == 1) waxpby(rows, 1.0, z, 0.0, z, p);
        else waxpby(rows, 1.0, z, rtz / rtz_old, p, p);
        ma_phase_end(&ph[PH_AXPY]);

        ma_phase_begin(&ph[PH_SPMV]);
        spmv(&A, p, Ap);
        ma_phase_end(&ph[PH_SPMV]);

        ma_phase_begin(&ph[PH_DOT]);
        const double pAp = dot(rows, p, Ap);
        ma_phase_end(&ph[PH_DOT]);

        if (!(pAp > 0.0)) break;
        const double alpha = rtz / pAp;
        ma_phase_begin(&ph[PH_AXPY]);
        waxpby(rows, 1.0, x, alpha, p, x);
        waxpby(rows, 1.0, r, -alpha, Ap, r);
        ma_phase_end(&ph[PH_AXPY]);

        ma_phase_begin(&ph[PH_DOT]);
        normr = sqrt(dot(rows, r, r));
        ma_phase_end(&ph[PH_DOT]);
    }

    ma_phase_begin(&ph[PH_VERIFY]);
    /* True residual into Ap (free now), error and its A-norm. */
    spmv(&A, x, Ap);
    double rtrue2 = 0.0, drift2 = 0.0, err2 = 0.0, xe2 = 0.0, eAe = 0.0, e0Ae0 = 0.0;
    for (size_t i = 0; i < rows; i++) {
        const double rt = b[i] - Ap[i], e = x_exact[i] - x[i];
        rtrue2 += rt * rt;
        drift2 += (rt - r[i]) * (rt - r[i]);
        err2 += e * e;
        xe2 += x_exact[i] * x_exact[i];
        eAe += e * rt;          /* e^T A e = e^T (b - A x) */
        e0Ae0 += x_exact[i] * b[i];
    }
    ma_phase_end(&ph[PH_VERIFY]);

    double lprod = 1.0;
    for (int d = 0; d < 3; d++) lprod *= 1.0 + 2.0 * cos(M_PI / (double)(n + 1));
    const double lambda_min = 27.0 - lprod;
    const double rtrue = sqrt(rtrue2), err = sqrt(err2), drift = sqrt(drift2);
    const double err_bound = rtrue / lambda_min * (1.0 + 1e-9) + 1e-12 * sqrt(xe2);
    const int ok_drift = drift <= 1e-9 * normr0;
    const int ok_err = err <= err_bound;
    const int ok_decrease = rtrue < normr0 && eAe < e0Ae0;

    ma_report_phases(ph, PH_N);
    printf("iterations: %llu, relative residual: %.3e (true %.3e)\n", (unsigned long long)it,
           normr / normr0, rtrue / normr0);
    printf("recurrence drift: %.3e (limit %.3e) %s\n", drift, 1e-9 * normr0, ok_drift ? "ok" : "BAD");
    printf("error vs manufactured solution: %.3e (bound ||r||/lambda_min = %.3e, lambda_min = %.6f) %s\n",
           err, err_bound, lambda_min, ok_err ? "ok" : "BAD");
    printf("A-norm error: %.3e -> %.3e %s\n", sqrt(e0Ae0), sqrt(eAe > 0 ? eAe : 0),
           ok_decrease ? "ok" : "BAD");
    const double flops = (double)it * (6.0 * (double)nnz + 10.0 * (double)rows);
    printf("rate: %.1f MFLOP/s\n", flops / (ph[PH_SPMV].total + ph[PH_PRECOND].total +
                                            ph[PH_DOT].total + ph[PH_AXPY].total) / 1e6);

    free(row_ptr);
    free(cols);
    free(cols_global);
    free(vals);
    free(diag);
    free(x);
    free(r);
    free(z);
    free(p);
    free(Ap);
    free(b);
    free(x_exact);
    return ma_finish(ok_drift && ok_err && ok_decrease);
}
