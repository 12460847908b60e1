/*
 * rtm: 2D acoustic reverse-time migration (RTM), the imaging step of seismic
 * processing, in the snapshot-saving form used by production codes that keep
 * the source wavefield's checkpoints in memory. For every shot:
 *
 *   forward:  the source wavefield is propagated from t = 0 to T; the data
 *             are recorded at a line of receivers and every K-th time level
 *             is saved as a snapshot;
 *   backward: the receiver wavefield is propagated from T back to 0 with the
 *             recorded data injected at the receivers (the adjoint of the
 *             forward modelling); at each snapshot time the imaging condition
 *             image += S(x,t) R(x,t) correlates the two wavefields.
 *
 * The two propagations are the same kernel on different arrays: the forward
 * phase streams the source wavefield (src_a, src_b) and the backward phase
 * the receiver wavefield (rcv_a, rcv_b), both with the velocity model, so
 * the phases want different data in fast memory; the snapshots are written
 * once per shot and read once, the image is touched at snapshot times only.
 *
 * Scheme: second order in time and space, 5-point Laplacian, with the grid's
 * outer ring held at zero (rigid boundary). With C = (v dt / h)^2 per cell,
 *   u[n+1] = 2 u[n] - u[n-1] + C (L u[n] + B w[n]),
 * computed in place over u[n-1] (two arrays per wavefield, as is usual).
 * The model has two layers with a dipping interface; the source is a Ricker
 * wavelet near the surface, the receivers every cell of a shallow row.
 *
 * Objects: vel (C, read every step of both phases), src_a, src_b (forward
 * only), rcv_a, rcv_b (backward only), image, snapshots (cold: one write and
 * one read per shot), traces and wavelet (small).
 *
 * Verification, per shot (both exact in real arithmetic, independent of the
 * physics and of the number of steps):
 * 1. Energy balance of the forward propagation: with M = 1/C and
 *    E[n+1/2] = (u[n+1]-u[n])' M (u[n+1]-u[n]) - u[n+1]' L u[n], the scheme
 *    gives E[n+1/2] - E[n-1/2] = w[n] (u[n+1] - u[n-1])(x_s), so E at the
 *    end must equal the source work summed over the steps.
 * 2. Dot-product test of the backward propagation against the forward one
 *    (the standard check of a migration code): with d = F w the recorded
 *    data and F' the backward propagation read at the source,
 *    <d, d> = <w, F' d>.
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

static uint64_t nx, nz, iters, shots, nsnap;
static int inject;

static void preset_tiny(void)   { nx = 512; nz = 512; iters = 32; shots = 2; nsnap = 4; }
static void preset_small(void)  { nx = 1536; nz = 1536; iters = 600; shots = 4; nsnap = 10; }
static void preset_medium(void) { nx = 4096; nz = 4096; iters = 1200; shots = 4; nsnap = 10; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "512 x 512 grid (2 MiB arrays, 4 snapshots), 2 shots of 32 steps"},
    {"small", preset_small, "1536 x 1536 (18 MiB arrays, 10 snapshots), 4 shots of 600 steps"},
    {"medium", preset_medium, "4096 x 4096 (128 MiB arrays, 10 snapshots), 4 shots of 1200 steps"},
};

static const ma_opt_t opts[] = {
    {"--nx", "N", MA_OPT_U64, &nx, 8, 1ull << 20, "grid points along x"},
    {"--nz", "N", MA_OPT_U64, &nz, 8, 1ull << 20, "grid points along z (depth)"},
    /* Two steps at least: the data reach the receivers on the second. */
    {"--iters", "N", MA_OPT_U64, &iters, 2, 1e6, "time steps per propagation"},
    {"--shots", "N", MA_OPT_U64, &shots, 1, 1e4, "shots (one forward and one backward propagation each)"},
    {"--snapshots", "N", MA_OPT_U64, &nsnap, 1, 1e4, "source wavefield time levels saved per shot (at most --iters)"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"rtm", "2D acoustic reverse-time migration: forward and backward propagation per shot",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_INIT, PH_FWD, PH_BWD, PH_VERIFY, PH_N };

/*
 * One time step over the interior: p <- 2 c - p + vel * lap(c). The outer
 * ring of p stays zero. Returns nothing; the caller adds the sources.
 */
static void step(const double *restrict c, double *restrict p, const double *restrict vel, size_t w, size_t h)
{
    MA_OMP("omp parallel for schedule(static)")
    for (size_t j = 1; j < h - 1; j++) {
        const size_t r = j * w;
        for (size_t i = r + 1; i < r + w - 1; i++) {
            const double lap = c[i - 1] + c[i + 1] + c[i - w] + c[i + w] - 4.0 * c[i];
            p[i] = 2.0 * c[i] - p[i] + vel[i] * lap;
        }
    }
}

/* E[n+1/2] from u[n+1] (a) and u[n] (b), as kinetic and potential parts
 * (their magnitudes set the rounding allowance of the balance check). */
static void energy(const double *a, const double *b, const double *vel, size_t w, size_t h, double *kin,
                   double *pot)
{
    double k = 0, p = 0;
    for (size_t j = 1; j < h - 1; j++) {
        for (size_t i = j * w + 1; i < j * w + w - 1; i++) {
            const double d = a[i] - b[i];
            const double lap = b[i - 1] + b[i + 1] + b[i - w] + b[i + w] - 4.0 * b[i];
            k += d * d / vel[i];
            p -= a[i] * lap;
        }
    }
    *kin = k;
    *pot = p;
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("init"), MA_PHASE("forward"), MA_PHASE("backward"), MA_PHASE("verify")};
    double *vel, *src_a, *src_b, *rcv_a, *rcv_b, *image, *snapshots, *traces, *wavelet;

    ma_parse(&app, argc, argv);
    if (nsnap > iters) ma_fail(2, "--snapshots", "%llu is more than the %llu time steps (--iters)",
                               (unsigned long long)nsnap, (unsigned long long)iters);
    const size_t n = nx * nz, nrec = nx - 2;
    ma_check_footprint("--nx", 8.0 * ((6.0 + (double)nsnap) * (double)n + (double)iters * ((double)nrec + 1)));
    const size_t every = iters / nsnap; /* snapshot interval, >= 1 */
    printf("rtm: nx=%llu nz=%llu iters=%llu shots=%llu snapshots=%llu (every %zu steps)\n",
           (unsigned long long)nx, (unsigned long long)nz, (unsigned long long)iters, (unsigned long long)shots,
           (unsigned long long)nsnap, every);

    MA_ALLOC(vel, n, "vel");
    MA_ALLOC(src_a, n, "src_a");
    MA_ALLOC(src_b, n, "src_b");
    MA_ALLOC(rcv_a, n, "rcv_a");
    MA_ALLOC(rcv_b, n, "rcv_b");
    MA_ALLOC(image, n, "image");
    MA_ALLOC(snapshots, nsnap * n, "snapshots");
    MA_ALLOC(traces, iters * nrec, "traces");
    MA_ALLOC(wavelet, iters, "wavelet");

    /* Model: 1500 m/s over 2500 m/s, the interface dipping from a third to
     * half of the depth, a mild gradient in each layer; dt at Courant number
     * 0.5 for the fastest velocity (the 2D stability limit is 1/sqrt 2). */
    ma_phase_begin(&ph[PH_INIT]);
    const double vmax = 2500.0 * 1.1, courant = 0.5, vslow = 1500.0;
    for (size_t j = 0; j < nz; j++) {
        for (size_t i = 0; i < nx; i++) {
            const double depth = (double)j / (double)nz, across = (double)i / (double)nx;
            const double v = depth < 1.0 / 3.0 + across / 6.0 ? vslow * (1.0 + 0.1 * depth)
                                                              : 2500.0 * (1.0 + 0.1 * depth);
            const double cr = courant * v / vmax;
            vel[j * nx + i] = cr * cr;
        }
    }
    /* Ricker wavelet peaking at 6 cells per wavelength in the slow layer. */
    const double f = courant * vslow / vmax / 6.0, t0 = 1.0 / f;
    for (size_t s = 0; s < iters; s++) {
        const double a = M_PI * f * ((double)s - t0), a2 = a * a;
        wavelet[s] = (1.0 - 2.0 * a2) * exp(-a2);
    }
    memset(image, 0, n * sizeof *image);
    ma_phase_end(&ph[PH_INIT]);

    const size_t zs = 3, zr = 2;
    int ok = 1;
    double worst_energy = 0, worst_dot = 0;
    for (uint64_t shot = 0; shot < shots; shot++) {
        const size_t xs = 1 + (size_t)((double)(shot + 1) * (double)(nx - 2) / (double)(shots + 1));
        const size_t s_at = zs * nx + xs;

        /* Forward: source wavefield, data and snapshots. */
        ma_phase_begin(&ph[PH_FWD]);
        double *cur = src_a, *prev = src_b, work = 0;
        memset(cur, 0, n * sizeof *cur);
        memset(prev, 0, n * sizeof *prev);
        for (size_t t = 0; t < iters; t++) {
            const double before = prev[s_at]; /* u[n-1] at the source */
            step(cur, prev, vel, nx, nz);
            prev[s_at] += vel[s_at] * wavelet[t];
            work += wavelet[t] * (prev[s_at] - before);
            if (inject && shot == shots - 1 && t == iters / 2) prev[(nz / 2) * nx + nx / 2] += 1e-3; /* test hook */
            double *tmp = cur; cur = prev; prev = tmp; /* cur = u[t+1] */
            memcpy(traces + t * nrec, cur + zr * nx + 1, nrec * sizeof *cur);
            if ((t + 1) % every == 0 && (t + 1) / every <= nsnap)
                memcpy(snapshots + ((t + 1) / every - 1) * n, cur, n * sizeof *cur);
        }
        double kin, pot;
        energy(cur, prev, vel, nx, nz, &kin, &pot);
        ma_phase_end(&ph[PH_FWD]);

        /* Backward: the adjoint propagation, from v[T+1] = v[T] = 0 down to
         * v[0], injecting the data of time level k while computing v[k-1]. */
        ma_phase_begin(&ph[PH_BWD]);
        double *vc = rcv_a, *vp = rcv_b, adj = 0;
        memset(vc, 0, n * sizeof *vc);
        memset(vp, 0, n * sizeof *vp);
        for (size_t k = iters; k >= 1; k--) {
            if (k % every == 0 && k / every <= nsnap) {
                const double *snap = snapshots + (k / every - 1) * n;
                MA_OMP("omp parallel for schedule(static)")
                for (size_t i = 0; i < n; i++) image[i] += snap[i] * vc[i];
            }
            step(vc, vp, vel, nx, nz);
            const double *d = traces + (k - 1) * nrec;
            double *row = vp + zr * nx + 1;
            const double *vrow = vel + zr * nx + 1;
            for (size_t r = 0; r < nrec; r++) row[r] += vrow[r] * d[r];
            double *tmp = vc; vc = vp; vp = tmp; /* vc = v[k-1] */
            adj += wavelet[k - 1] * vc[s_at];
        }
        ma_phase_end(&ph[PH_BWD]);

        double dd = 0;
        for (size_t i = 0; i < iters * nrec; i++) dd += traces[i] * traces[i];
        const double e = kin + pot;
        const double scale_e = fabs(kin) + fabs(pot) + fabs(work), scale_d = fabs(dd) + fabs(adj);
        const double err_e = scale_e > 0 ? fabs(e - work) / scale_e : 0;
        const double err_d = scale_d > 0 ? fabs(dd - adj) / scale_d : 0;
        printf("shot %llu at x=%zu: energy %.12e, source work %.12e (rel. diff %.1e); <d,d> %.12e, <w,F'd> %.12e "
               "(rel. diff %.1e)\n",
               (unsigned long long)shot, xs, e, work, err_e, dd, adj, err_d);
        if (err_e > worst_energy) worst_energy = err_e;
        if (err_d > worst_dot) worst_dot = err_d;
        /* Rounding leaves ~1e-15 per step; a wrong term leaves O(1). The
         * data must be non-zero, or the test would prove nothing. */
        ok = ok && err_e <= 1e-9 && err_d <= 1e-9 && dd > 0 && work > 0;
    }

    ma_phase_begin(&ph[PH_VERIFY]);
    double sum = 0, sum2 = 0;
    for (size_t i = 0; i < n; i++) {
        sum += image[i];
        sum2 += image[i] * image[i];
    }
    ma_phase_end(&ph[PH_VERIFY]);

    ma_report_phases(ph, PH_N);
    printf("energy balance: worst relative difference %.1e (bound 1e-9)\n", worst_energy);
    printf("dot-product test: worst relative difference %.1e (bound 1e-9)\n", worst_dot);
    printf("image checksum: sum %.9e, sum of squares %.9e\n", sum, sum2);

    free(vel);
    free(src_a);
    free(src_b);
    free(rcv_a);
    free(rcv_b);
    free(image);
    free(snapshots);
    free(traces);
    free(wavelet);
    return ma_finish(ok);
}
