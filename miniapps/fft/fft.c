/*
 * fft: 3D FFT time evolution of a diffusion-like PDE in spectral space
 * (NPB FT-like): forward 3D FFT of a random field once, then per time step
 * multiply the spectrum by exp(-4 pi^2 alpha |k|^2) and inverse-transform it.
 *
 * The 3D transform is three passes of 1D radix-2 transforms: contiguous
 * lines along x in place, then lines along y and z gathered into a small
 * line buffer and scattered back (long strides: the all-to-all pattern of
 * distributed FFTs, within one memory).
 *
 * Verification:
 *  1. after setup, a few spectral coefficients equal a direct O(N) DFT of
 *     the initial field;
 *  2. every step, Parseval: sum |u|^2 = sum |u_hat|^2 / N;
 *  3. after the last step, a few points of the field equal a direct inverse
 *     DFT of the evolved spectrum (no FFT code involved).
 *
 * Objects: u (the field being transformed: ~7 passes per step), u_hat
 * (spectrum: read and written once per step), twiddle (decay factors: read
 * once per step), u0 (the initial field: written, transformed and checked at
 * setup only: cold), roots and line (small, hottest per byte).
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

typedef struct { double re, im; } cplx;

static uint64_t lnx, lny, lnz, iters;
static int inject;

static void preset_tiny(void)   { lnx = 6; lny = 6; lnz = 6; iters = 6; }
static void preset_small(void)  { lnx = 8; lny = 8; lnz = 7; iters = 6; }
static void preset_medium(void) { lnx = 9; lny = 8; lnz = 8; iters = 10; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "64^3 grid (4 x 4 MiB), 6 steps (NPB FT class S)"},
    {"small", preset_small, "256x256x128 (4 x 128 MiB), 6 steps (class A)"},
    {"medium", preset_medium, "512x256x256 (4 x 512 MiB), 10 steps"},
};

static const ma_opt_t opts[] = {
    {"--log2-nx", "L", MA_OPT_U64, &lnx, 1, 12, "grid size along x is 2^L"},
    {"--log2-ny", "L", MA_OPT_U64, &lny, 1, 12, "grid size along y is 2^L"},
    {"--log2-nz", "L", MA_OPT_U64, &lnz, 1, 12, "grid size along z is 2^L"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e5, "time steps"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"fft", "NPB FT-like 3D FFT spectral time evolution",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_SETUP, PH_EVOLVE, PH_FFT, PH_CHECKSUM, PH_VERIFY, PH_N };

static const double alpha = 1e-6;

/* In-place radix-2 transform of a[0..n) (n a power of two). roots[j] =
 * exp(-2 pi i j / nmax) for j < nmax/2; inverse uses the conjugates. The
 * inverse is unnormalized. */
static void fft1d(cplx *a, size_t n, const cplx *roots, size_t nmax, int inverse)
{
    for (size_t i = 1, j = 0; i < n; i++) { /* bit-reversal permutation */
        size_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) {
            cplx t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }
    for (size_t len = 2; len <= n; len <<= 1) {
        const size_t half = len / 2, step = nmax / len;
        for (size_t s = 0; s < n; s += len)
            for (size_t k = 0; k < half; k++) {
                const cplx w = roots[k * step];
                const double wi = inverse ? -w.im : w.im;
                cplx *x = &a[s + k], *y = &a[s + k + half];
                const double tr = y->re * w.re - y->im * wi, ti = y->re * wi + y->im * w.re;
                y->re = x->re - tr;
                y->im = x->im - ti;
                x->re += tr;
                x->im += ti;
            }
    }
}

static size_t nx, ny, nz, nmax;

static void fft3d(cplx *u, cplx *line, const cplx *roots, int inverse)
{
    for (size_t zy = 0; zy < nz * ny; zy++) fft1d(&u[zy * nx], nx, roots, nmax, inverse);
    for (size_t z = 0; z < nz; z++)
        for (size_t x = 0; x < nx; x++) {
            cplx *base = &u[z * ny * nx + x];
            for (size_t y = 0; y < ny; y++) line[y] = base[y * nx];
            fft1d(line, ny, roots, nmax, inverse);
            for (size_t y = 0; y < ny; y++) base[y * nx] = line[y];
        }
    for (size_t yx = 0; yx < ny * nx; yx++) {
        cplx *base = &u[yx];
        for (size_t z = 0; z < nz; z++) line[z] = base[z * ny * nx];
        fft1d(line, nz, roots, nmax, inverse);
        for (size_t z = 0; z < nz; z++) base[z * ny * nx] = line[z];
    }
}

/* Direct DFT of src at one point p = (px, py, pz): sum src[k] e^{sign 2 pi i k.p/n}.
 * Each phase is taken from the exact integer product k p mod n, so the
 * reference does not drift with N. */
static cplx direct(const cplx *src, size_t px, size_t py, size_t pz, double sign)
{
    cplx acc = {0, 0};
    for (size_t z = 0; z < nz; z++) {
        const double az = sign * 2.0 * M_PI * (double)((z * pz) % nz) / (double)nz;
        for (size_t y = 0; y < ny; y++) {
            const double ay = sign * 2.0 * M_PI * (double)((y * py) % ny) / (double)ny;
            const cplx *row = &src[(z * ny + y) * nx];
            for (size_t x = 0; x < nx; x++) {
                const double ax = sign * 2.0 * M_PI * (double)((x * px) % nx) / (double)nx;
                const double c = cos(az + ay + ax), s = sin(az + ay + ax);
                acc.re += row[x].re * c - row[x].im * s;
                acc.im += row[x].re * s + row[x].im * c;
            }
        }
    }
    return acc;
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("setup"), MA_PHASE("evolve"), MA_PHASE("fft"),
                           MA_PHASE("checksum"), MA_PHASE("verify")};
    cplx *u0, *u_hat, *u, *roots, *line;
    double *twiddle;
    ma_rng_t rng;
    double worst_parseval = 0.0, worst_fwd = 0.0, worst_inv = 0.0;

    ma_parse(&app, argc, argv);
    if (lnx + lny + lnz > 30) ma_fail(2, "--log2-nx", "grid larger than 2^30 points");
    nx = (size_t)1 << lnx;
    ny = (size_t)1 << lny;
    nz = (size_t)1 << lnz;
    nmax = nx > ny ? nx : ny;
    if (nz > nmax) nmax = nz;
    const size_t n = nx * ny * nz;
    printf("fft: grid=%zux%zux%zu steps=%llu\n", nx, ny, nz, (unsigned long long)iters);

    MA_ALLOC(u0, n, "u0");
    MA_ALLOC(u_hat, n, "u_hat");
    MA_ALLOC(u, n, "u");
    MA_ALLOC(twiddle, n, "twiddle");
    MA_ALLOC(roots, nmax / 2, "roots");
    MA_ALLOC(line, nmax, "line");

    ma_phase_begin(&ph[PH_SETUP]);
    for (size_t j = 0; j < nmax / 2; j++) {
        roots[j].re = cos(2.0 * M_PI * (double)j / (double)nmax);
        roots[j].im = -sin(2.0 * M_PI * (double)j / (double)nmax);
    }
    ma_rng_seed(&rng, 0xf7);
    for (size_t i = 0; i < n; i++) {
        u0[i].re = ma_rng_uniform(&rng);
        u0[i].im = ma_rng_uniform(&rng);
    }
    for (size_t z = 0; z < nz; z++)
        for (size_t y = 0; y < ny; y++)
            for (size_t x = 0; x < nx; x++) {
                const double kz = (double)(z < nz / 2 ? (long)z : (long)z - (long)nz);
                const double ky = (double)(y < ny / 2 ? (long)y : (long)y - (long)ny);
                const double kx = (double)(x < nx / 2 ? (long)x : (long)x - (long)nx);
                twiddle[(z * ny + y) * nx + x] =
                    exp(-4.0 * M_PI * M_PI * alpha * (kx * kx + ky * ky + kz * kz));
            }
    memcpy(u_hat, u0, n * sizeof *u_hat);
    fft3d(u_hat, line, roots, 0);
    ma_phase_end(&ph[PH_SETUP]);

    /* Check 1: forward transform against direct sums at a few frequencies. */
    ma_phase_begin(&ph[PH_VERIFY]);
    double scale_hat = 0.0;
    for (size_t i = 0; i < n; i++) scale_hat = fmax(scale_hat, hypot(u_hat[i].re, u_hat[i].im));
    for (int t = 0; t < 2; t++) {
        const size_t px = ma_rng_below(&rng, nx), py = ma_rng_below(&rng, ny), pz = ma_rng_below(&rng, nz);
        const cplx ref = direct(u0, px, py, pz, -1.0), got = u_hat[(pz * ny + py) * nx + px];
        worst_fwd = fmax(worst_fwd, hypot(ref.re - got.re, ref.im - got.im) / scale_hat);
    }
    ma_phase_end(&ph[PH_VERIFY]);

    if (inject) roots[nmax / 8].re *= 1.0 + 1e-6; /* test hook: a wrong twiddle, must be caught */

    printf("%6s %24s %24s\n", "step", "checksum.re", "checksum.im");
    for (uint64_t step = 1; step <= iters; step++) {
        double e_hat = 0.0, e_u = 0.0;
        const double inv_n = 1.0 / (double)n;
        ma_phase_begin(&ph[PH_EVOLVE]);
        for (size_t i = 0; i < n; i++) {
            u_hat[i].re *= twiddle[i];
            u_hat[i].im *= twiddle[i];
            e_hat += u_hat[i].re * u_hat[i].re + u_hat[i].im * u_hat[i].im;
            u[i].re = u_hat[i].re * inv_n;
            u[i].im = u_hat[i].im * inv_n;
        }
        ma_phase_end(&ph[PH_EVOLVE]);

        ma_phase_begin(&ph[PH_FFT]);
        fft3d(u, line, roots, 1);
        ma_phase_end(&ph[PH_FFT]);

        /* NPB FT's checksum over 1024 scattered points, plus Parseval. */
        ma_phase_begin(&ph[PH_CHECKSUM]);
        cplx chk = {0, 0};
        for (size_t j = 1; j <= 1024; j++) {
            const size_t i = ((j % nz) * ny + (3 * j) % ny) * nx + (5 * j) % nx;
            chk.re += u[i].re;
            chk.im += u[i].im;
        }
        for (size_t i = 0; i < n; i++) e_u += u[i].re * u[i].re + u[i].im * u[i].im;
        worst_parseval = fmax(worst_parseval, fabs(e_u - e_hat * inv_n) / (e_hat * inv_n));
        ma_phase_end(&ph[PH_CHECKSUM]);
        printf("%6llu %24.15e %24.15e\n", (unsigned long long)step, chk.re, chk.im);
    }

    /* Check 3: the field against a direct inverse DFT of the spectrum. */
    ma_phase_begin(&ph[PH_VERIFY]);
    double scale_u = 0.0;
    for (size_t i = 0; i < n; i++) scale_u = fmax(scale_u, hypot(u[i].re, u[i].im));
    for (int t = 0; t < 2; t++) {
        const size_t px = ma_rng_below(&rng, nx), py = ma_rng_below(&rng, ny), pz = ma_rng_below(&rng, nz);
        cplx ref = direct(u_hat, px, py, pz, +1.0);
        const cplx got = u[(pz * ny + py) * nx + px];
        ref.re /= (double)n;
        ref.im /= (double)n;
        worst_inv = fmax(worst_inv, hypot(ref.re - got.re, ref.im - got.im) / scale_u);
    }
    ma_phase_end(&ph[PH_VERIFY]);

    /* Radix-2 FFT error grows like eps log2 N and the direct sums like
     * eps sqrt(N) of the largest term: 1e-10 relative covers both up to 2^30
     * points and is far below the effect of any real defect. */
    const int ok = worst_fwd <= 1e-10 && worst_inv <= 1e-10 && worst_parseval <= 1e-10;
    ma_report_phases(ph, PH_N);
    printf("forward vs direct DFT: %.3e, inverse vs direct DFT: %.3e, Parseval: %.3e (limit 1e-10)\n",
           worst_fwd, worst_inv, worst_parseval);
    printf("rate: %.1f MFLOP/s\n", 5.0 * (double)n * (double)(lnx + lny + lnz) * (double)iters /
                                       ph[PH_FFT].total / 1e6);

    free(u0);
    free(u_hat);
    free(u);
    free(twiddle);
    free(roots);
    free(line);
    return ma_finish(ok);
}
