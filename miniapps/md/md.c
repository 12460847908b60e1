/*
 * md: Lennard-Jones molecular dynamics with link cells and Verlet neighbour
 * lists (CoMD/LAMMPS-like), velocity-Verlet integration, periodic box.
 *
 * Atoms start on an fcc lattice at reduced density 0.8442 with random
 * velocities at T = 1.44 (the system melts). Pair potential truncated and
 * shifted at rc = 2.5 sigma; the neighbour list holds all pairs within
 * rc + skin and is rebuilt (binning atoms into cells) when a running bound
 * on the displacement since the last build exceeds skin / 2, so it is always
 * complete.
 *
 * Verification:
 *  1. total energy is conserved: max_t |E(t) - E(0)| / |E(0)| <= 1e-3, the
 *     usual 0.1% criterion (velocity Verlet's O(dt^2) fluctuation is ~3e-4
 *     at dt = 0.005 in the melting start; a wrong force shows as drift);
 *  2. total momentum stays zero (forces are antisymmetric pairwise);
 *  3. the final forces on a subset of atoms equal a brute-force O(N) sum over
 *     all atoms with the minimum-image convention (no cells, no lists).
 *
 * Objects: pos (hottest: gathered for every neighbour), nbr_list (streamed
 * every step), vel and force (streamed a few times per step), nbr_start,
 * cell_start/cell_atoms (rebuild only), traj (cold: one frame of positions
 * every --dump steps, read once by the mean-square-displacement analysis).
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

static uint64_t nx, iters, dump;
static double dt;
static int inject;

static void preset_tiny(void)   { nx = 12; iters = 20;  dump = 5; }
static void preset_small(void)  { nx = 32; iters = 100; dump = 10; }
static void preset_medium(void) { nx = 48; iters = 100; dump = 10; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "12^3 fcc cells (6912 atoms), 20 steps, a frame every 5"},
    {"small", preset_small, "32^3 cells (131072 atoms), 100 steps"},
    {"medium", preset_medium, "48^3 cells (442368 atoms), 100 steps"},
};

static const ma_opt_t opts[] = {
    {"--cells", "N", MA_OPT_U64, &nx, 1, 100, "fcc unit cells per dimension (atoms = 4 N^3)"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e6, "time steps"},
    {"--dump", "N", MA_OPT_U64, &dump, 1, 1e6, "store a trajectory frame every N steps"},
    {"--dt", "T", MA_OPT_F64, &dt, 1e-5, 0.01, "time step in LJ units (default 0.005)"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"md", "Lennard-Jones MD with cell lists and neighbour lists",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_SETUP, PH_NEIGH, PH_FORCE, PH_INTEGRATE, PH_DUMP, PH_ANALYSIS, PH_VERIFY, PH_N };

static const double rc = 2.5, skin = 0.3, density = 0.8442, temp0 = 1.44;

typedef struct {
    size_t natoms, ncell, cap;
    double L, cellw;
    double *pos, *vel, *force, *traj;
    int32_t *nbr_start, *nbr_list, *cell_start, *cell_atoms;
} sys_t;

/* Minimum image. Positions are kept unwrapped (for the trajectory), so a
 * difference may span several boxes. Rounds through a long conversion
 * because nearbyint/floor are library calls on baseline x86-64, and this
 * sits in the innermost loop. */
static inline double min_image(double d, double L, double invL)
{
    const double t = d * invL;
    return d - L * (double)(long)(t + copysign(0.5, t));
}

static inline size_t cell_of(const sys_t *s, const double *x)
{
    size_t c[3];
    for (int d = 0; d < 3; d++) {
        double w = x[d] - s->L * floor(x[d] / s->L); /* wrap into [0, L) for binning */
        long k = (long)(w / s->cellw);
        c[d] = (size_t)(k < 0 ? 0 : k >= (long)s->ncell ? (long)s->ncell - 1 : k);
    }
    return (c[2] * s->ncell + c[1]) * s->ncell + c[0];
}

/* Bins atoms into cells (counting sort), then lists every j within
 * rc + skin of i from the 27 surrounding cells. Returns 0, or -1 when the
 * list capacity is too small (the caller grows it and retries). */
static int build_neighbours(sys_t *s)
{
    const size_t nc = s->ncell, ncells = nc * nc * nc, n = s->natoms;
    const double rl2 = (rc + skin) * (rc + skin), invL = 1.0 / s->L;
    memset(s->cell_start, 0, (ncells + 1) * sizeof *s->cell_start);
    for (size_t i = 0; i < n; i++) s->cell_start[cell_of(s, &s->pos[3 * i]) + 1]++;
    for (size_t c = 0; c < ncells; c++) s->cell_start[c + 1] += s->cell_start[c];
    for (size_t i = 0; i < n; i++) {
        /* fill by walking starts upward, then restore them below */
        size_t c = cell_of(s, &s->pos[3 * i]);
        s->cell_atoms[s->cell_start[c]++] = (int32_t)i;
    }
    for (size_t c = ncells; c > 0; c--) s->cell_start[c] = s->cell_start[c - 1];
    s->cell_start[0] = 0;

    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const double *xi = &s->pos[3 * i];
        const size_t ci = cell_of(s, xi);
        const long cx = (long)(ci % nc), cy = (long)(ci / nc % nc), cz = (long)(ci / nc / nc);
        s->nbr_start[i] = (int32_t)k;
        for (long dz = -1; dz <= 1; dz++)
            for (long dy = -1; dy <= 1; dy++)
                for (long dx = -1; dx <= 1; dx++) {
                    const size_t c = ((size_t)((cz + dz + (long)nc) % (long)nc) * nc +
                                      (size_t)((cy + dy + (long)nc) % (long)nc)) * nc +
                                     (size_t)((cx + dx + (long)nc) % (long)nc);
                    const int32_t qend = s->cell_start[c + 1];
                    for (int32_t q = s->cell_start[c]; q < qend; q++) {
                        const size_t j = (size_t)s->cell_atoms[q];
                        if (j == i) continue;
                        const double *xj = &s->pos[3 * j];
                        const double ddx = min_image(xi[0] - xj[0], s->L, invL);
                        const double ddy = min_image(xi[1] - xj[1], s->L, invL);
                        const double ddz = min_image(xi[2] - xj[2], s->L, invL);
                        if (ddx * ddx + ddy * ddy + ddz * ddz < rl2) {
                            if (k == s->cap) return -1;
                            s->nbr_list[k++] = (int32_t)j;
                        }
                    }
                }
    }
    s->nbr_start[n] = (int32_t)k;
    return 0;
}

/* Full-list force pass: each pair is evaluated from both sides, so every
 * atom writes only its own force (no races under OpenMP). Returns the
 * potential energy. */
static double compute_forces(sys_t *s)
{
    const double rc2 = rc * rc, invL = 1.0 / s->L;
    const double src6 = 1.0 / (rc2 * rc2 * rc2), eshift = 4.0 * (src6 * src6 - src6);
    double pe = 0.0;
    MA_OMP("omp parallel for schedule(static) reduction(+:pe)")
    for (size_t i = 0; i < s->natoms; i++) {
        const double *xi = &s->pos[3 * i];
        double fx = 0.0, fy = 0.0, fz = 0.0, e = 0.0;
        int lose = inject && i == 0; /* test hook: atom 0 loses one pair, must be caught */
        for (int32_t q = s->nbr_start[i]; q < s->nbr_start[i + 1]; q++) {
            const double *xj = &s->pos[3 * (size_t)s->nbr_list[q]];
            const double dx = min_image(xi[0] - xj[0], s->L, invL);
            const double dy = min_image(xi[1] - xj[1], s->L, invL);
            const double dz = min_image(xi[2] - xj[2], s->L, invL);
            const double r2 = dx * dx + dy * dy + dz * dz;
            /* Branch-free cutoff: about a third of the list lies between rc
             * and rc + skin, in no predictable order. */
            double in = r2 < rc2 ? 1.0 : 0.0;
            if (lose && in != 0.0) {
                lose = 0;
                continue;
            }
            const double sr2 = 1.0 / r2, sr6 = sr2 * sr2 * sr2;
            const double fr = in * 48.0 * sr6 * (sr6 - 0.5) * sr2;
            fx += fr * dx;
            fy += fr * dy;
            fz += fr * dz;
            e += in * (4.0 * sr6 * (sr6 - 1.0) - eshift);
        }
        s->force[3 * i] = fx;
        s->force[3 * i + 1] = fy;
        s->force[3 * i + 2] = fz;
        pe += 0.5 * e;
    }
    return pe;
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("setup"), MA_PHASE("neighbour"), MA_PHASE("force"),
                           MA_PHASE("integrate"), MA_PHASE("dump"), MA_PHASE("analysis"),
                           MA_PHASE("verify")};
    sys_t s = {0};
    ma_rng_t rng;
    size_t rebuilds = 0;

    dt = 0.005;
    ma_parse(&app, argc, argv);
    const size_t n = 4 * (size_t)nx * nx * nx;
    const double a = cbrt(4.0 / density);
    s.natoms = n;
    s.L = a * (double)nx;
    s.ncell = (size_t)floor(s.L / (rc + skin));
    s.cellw = s.L / (double)s.ncell;
    if (s.ncell < 3)
        ma_fail(2, "--cells", "a box of %llu cells is narrower than 3 neighbour cells (use >= %d)",
                (unsigned long long)nx, (int)ceil(3.0 * (rc + skin) / a));
    const size_t ncells = s.ncell * s.ncell * s.ncell;
    const size_t nframes = iters / dump + 1;
    printf("md: atoms=%zu box=%.3f cells=%zu^3 steps=%llu dt=%g dump=%llu\n", n, s.L, s.ncell,
           (unsigned long long)iters, dt, (unsigned long long)dump);

    MA_ALLOC(s.pos, 3 * n, "pos");
    MA_ALLOC(s.vel, 3 * n, "vel");
    MA_ALLOC(s.force, 3 * n, "force");
    MA_ALLOC(s.nbr_start, n + 1, "nbr_start");
    MA_ALLOC(s.cell_start, ncells + 1, "cell_start");
    MA_ALLOC(s.cell_atoms, n, "cell_atoms");
    /* Room for the expected neighbour count at liquid density plus margin;
     * grown on demand. */
    s.cap = n * (size_t)(4.0 / 3.0 * M_PI * pow(rc + skin, 3) * density * 1.3 + 8);
    MA_ALLOC(s.nbr_list, s.cap, "nbr_list");
    MA_ALLOC(s.traj, 3 * n * nframes, "traj");

    ma_phase_begin(&ph[PH_SETUP]);
    static const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
    size_t i = 0;
    for (size_t z = 0; z < nx; z++)
        for (size_t y = 0; y < nx; y++)
            for (size_t x = 0; x < nx; x++)
                for (int b = 0; b < 4; b++, i++) {
                    s.pos[3 * i] = a * ((double)x + basis[b][0] + 0.25);
                    s.pos[3 * i + 1] = a * ((double)y + basis[b][1] + 0.25);
                    s.pos[3 * i + 2] = a * ((double)z + basis[b][2] + 0.25);
                }
    ma_rng_seed(&rng, 0x3d);
    double vsum[3] = {0, 0, 0}, v2 = 0.0;
    for (size_t q = 0; q < 3 * n; q++) {
        s.vel[q] = ma_rng_uniform(&rng) - 0.5;
        vsum[q % 3] += s.vel[q];
    }
    for (size_t q = 0; q < 3 * n; q++) {
        s.vel[q] -= vsum[q % 3] / (double)n;
        v2 += s.vel[q] * s.vel[q];
    }
    const double vscale = sqrt(3.0 * (double)(n - 1) * temp0 / v2);
    for (size_t q = 0; q < 3 * n; q++) s.vel[q] *= vscale;
    ma_phase_end(&ph[PH_SETUP]);

    ma_phase_begin(&ph[PH_NEIGH]);
    while (build_neighbours(&s) != 0) {
        free(s.nbr_list);
        s.cap *= 2;
        MA_ALLOC(s.nbr_list, s.cap, "nbr_list");
    }
    rebuilds++;
    ma_phase_end(&ph[PH_NEIGH]);
    ma_phase_begin(&ph[PH_FORCE]);
    double pe = compute_forces(&s);
    ma_phase_end(&ph[PH_FORCE]);

    double ke = 0.0;
    for (size_t q = 0; q < 3 * n; q++) ke += 0.5 * s.vel[q] * s.vel[q];
    const double e0 = pe + ke;
    double maxdrift = 0.0, moved = 0.0;
    size_t frame = 0;
    memcpy(&s.traj[0], s.pos, 3 * n * sizeof(double));
    frame++;
    printf("%8s %12s %12s %12s %10s\n", "step", "pe/atom", "ke/atom", "e/atom", "T");
    printf("%8d %12.6f %12.6f %12.6f %10.4f\n", 0, pe / (double)n, ke / (double)n, e0 / (double)n,
           2.0 * ke / (3.0 * (double)(n - 1)));

    for (uint64_t step = 1; step <= iters; step++) {
        double vmax2 = 0.0;
        ma_phase_begin(&ph[PH_INTEGRATE]);
        MA_OMP("omp parallel for schedule(static) reduction(max:vmax2)")
        for (size_t q = 0; q < n; q++) {
            double w2 = 0.0;
            for (int d = 0; d < 3; d++) {
                s.vel[3 * q + d] += 0.5 * dt * s.force[3 * q + d];
                s.pos[3 * q + d] += dt * s.vel[3 * q + d];
                w2 += s.vel[3 * q + d] * s.vel[3 * q + d];
            }
            if (w2 > vmax2) vmax2 = w2;
        }
        ma_phase_end(&ph[PH_INTEGRATE]);

        /* Two atoms approach by at most twice the largest displacement. */
        moved += sqrt(vmax2) * dt;
        if (2.0 * moved > skin) {
            ma_phase_begin(&ph[PH_NEIGH]);
            while (build_neighbours(&s) != 0) {
                free(s.nbr_list);
                s.cap *= 2;
                MA_ALLOC(s.nbr_list, s.cap, "nbr_list");
            }
            rebuilds++;
            moved = 0.0;
            ma_phase_end(&ph[PH_NEIGH]);
        }

        ma_phase_begin(&ph[PH_FORCE]);
        pe = compute_forces(&s);
        ma_phase_end(&ph[PH_FORCE]);

        ma_phase_begin(&ph[PH_INTEGRATE]);
        ke = 0.0;
        MA_OMP("omp parallel for schedule(static) reduction(+:ke)")
        for (size_t q = 0; q < 3 * n; q++) {
            s.vel[q] += 0.5 * dt * s.force[q];
            ke += 0.5 * s.vel[q] * s.vel[q];
        }
        ma_phase_end(&ph[PH_INTEGRATE]);

        const double drift = fabs(pe + ke - e0) / fabs(e0);
        if (drift > maxdrift || drift != drift) maxdrift = drift;
        if (step % dump == 0) {
            ma_phase_begin(&ph[PH_DUMP]);
            memcpy(&s.traj[3 * n * frame], s.pos, 3 * n * sizeof(double));
            frame++;
            ma_phase_end(&ph[PH_DUMP]);
        }
        if (step == iters)
            printf("%8llu %12.6f %12.6f %12.6f %10.4f\n", (unsigned long long)step, pe / (double)n,
                   ke / (double)n, (pe + ke) / (double)n, 2.0 * ke / (3.0 * (double)(n - 1)));
    }

    /* Mean-square displacement per stored frame, from the trajectory. */
    ma_phase_begin(&ph[PH_ANALYSIS]);
    printf("%8s %12s\n", "frame", "msd");
    for (size_t f = 0; f < frame; f++) {
        double msd = 0.0;
        for (size_t q = 0; q < 3 * n; q++) {
            const double d = s.traj[3 * n * f + q] - s.traj[q];
            msd += d * d;
        }
        printf("%8zu %12.6f\n", f * dump, msd / (double)n);
    }
    ma_phase_end(&ph[PH_ANALYSIS]);

    ma_phase_begin(&ph[PH_VERIFY]);
    double p[3] = {0, 0, 0}, ferr = 0.0;
    for (size_t q = 0; q < 3 * n; q++) p[q % 3] += s.vel[q];
    const double pnorm = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) / (double)n;
    const size_t stride = n / 64 ? n / 64 : 1;
    const double invL = 1.0 / s.L;
    size_t checked = 0;
    for (size_t at = 0; at < n; at += stride, checked++) {
        double f[3] = {0, 0, 0};
        for (size_t j = 0; j < n; j++) {
            if (j == at) continue;
            double d[3], r2 = 0.0;
            for (int k = 0; k < 3; k++) {
                d[k] = min_image(s.pos[3 * at + k] - s.pos[3 * j + k], s.L, invL);
                r2 += d[k] * d[k];
            }
            if (r2 >= rc * rc) continue;
            const double sr6 = 1.0 / (r2 * r2 * r2);
            for (int k = 0; k < 3; k++) f[k] += 48.0 * sr6 * (sr6 - 0.5) / r2 * d[k];
        }
        for (int k = 0; k < 3; k++) {
            const double e = fabs(f[k] - s.force[3 * at + k]) / fmax(1.0, fabs(f[k]));
            if (e > ferr || e != e) ferr = e;
        }
    }
    ma_phase_end(&ph[PH_VERIFY]);

    const int ok_e = maxdrift <= 1e-3, ok_p = pnorm <= 1e-12, ok_f = ferr <= 1e-10;
    ma_report_phases(ph, PH_N);
    printf("neighbour rebuilds: %zu, list entries: %d\n", rebuilds, s.nbr_start[n]);
    printf("max relative energy error: %.3e (limit 1e-3) %s\n", maxdrift, ok_e ? "ok" : "BAD");
    printf("momentum per atom: %.3e (limit 1e-12) %s\n", pnorm, ok_p ? "ok" : "BAD");
    printf("force vs brute force on %zu atoms: %.3e (limit 1e-10) %s\n", checked, ferr,
           ok_f ? "ok" : "BAD");
    printf("rate: %.3f Matom-steps/s\n", (double)n * (double)iters /
           (ph[PH_FORCE].total + ph[PH_NEIGH].total + ph[PH_INTEGRATE].total) / 1e6);

    free(s.pos);
    free(s.vel);
    free(s.force);
    free(s.nbr_start);
    free(s.cell_start);
    free(s.cell_atoms);
    free(s.nbr_list);
    free(s.traj);
    return ma_finish(ok_e && ok_p && ok_f);
}
