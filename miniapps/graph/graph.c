/*
 * graph: PageRank (pull direction, as in the GAP benchmark suite) on a
 * generated power-law Kronecker/R-MAT graph stored in CSR. Irregular,
 * gather-dominated accesses.
 *
 * The generator draws M = degree * 2^scale directed edges with GAP's
 * Kronecker parameters (A, B, C) = (0.57, 0.19, 0.19) and relabels vertices by
 * a random permutation, so hubs are scattered over the id space. Edges go to
 * an edge list, out- and in-degrees are counted on the fly, then the in-edge
 * CSR is filled in one pass and the edge list is freed.
 *
 * PageRank: damping d = 0.85, teleport and dangling-vertex mass spread
 * uniformly, so the scores are a probability vector. Each iteration computes
 * contrib[u] = score[u] / outdeg[u] (contrib phase), then gathers contrib
 * over in-edges for every vertex (gather phase).
 *
 * Verification:
 *  1. the scores sum to 1;
 *  2. the PageRank operator F is recomputed independently of the CSR, by
 *     replaying the edge generator (same seed, no stored edges), and the
 *     residual must obey the contraction bound of F in the L1 norm:
 *       ||x_k - F(x_k)||_1 = ||F(x_{k-1}) - F(x_k)||_1 <= d ||x_k - x_{k-1}||_1,
 *     which fails for any wrong CSR entry, degree or weight;
 *  3. the out-degrees recounted during the replay match.
 *
 * Objects: in_neighbors (streamed every iteration), contrib (gathered once
 * per edge per iteration: hottest per byte), scores, in_offsets, out_degree
 * (streamed every iteration), perm (generator), and the large edge list
 * (cold: written once and read once, during the build).
 */
#include "../common/miniapp.h"

#include <math.h>
#include <string.h>

static uint64_t scale, degree, iters;
static int inject;

static void preset_tiny(void)   { scale = 15; degree = 16; iters = 80; }
static void preset_small(void)  { scale = 20; degree = 16; iters = 50; }
static void preset_medium(void) { scale = 22; degree = 16; iters = 50; }

static const ma_preset_t presets[] = {
    {"tiny", preset_tiny, "2^15 vertices, 524k edges (edge list 4 MiB), 80 iterations"},
    {"small", preset_small, "2^20 vertices, 16.8M edges (edge list 128 MiB), 50 iterations"},
    {"medium", preset_medium, "2^22 vertices, 67M edges (edge list 512 MiB), 50 iterations"},
};

static const ma_opt_t opts[] = {
    {"--scale", "S", MA_OPT_U64, &scale, 2, 26, "2^S vertices"},
    {"--degree", "D", MA_OPT_U64, &degree, 1, 64, "edges per vertex (edge factor)"},
    {"--iters", "N", MA_OPT_U64, &iters, 1, 1e5, "PageRank iterations"},
    {"--inject-error", NULL, MA_OPT_FLAG, &inject, 0, 0, NULL},
};

static const ma_app_t app = {"graph", "GAP-like pull PageRank on a Kronecker power-law graph in CSR",
                             presets, MA_COUNT(presets), opts, MA_COUNT(opts)};

enum { PH_GENERATE, PH_BUILD, PH_CONTRIB, PH_GATHER, PH_VERIFY, PH_N };

static const double damping = 0.85;
static const uint64_t seed = 0x9a7;

/* One R-MAT edge: at each of `scale` levels pick a quadrant with
 * probabilities A, B, C, D; 21 random bits per level, three levels per draw. */
static void rmat_edge(ma_rng_t *rng, const int32_t *perm, int32_t *src, int32_t *dst)
{
    const uint32_t a = (uint32_t)(0.57 * (1 << 21)), ab = (uint32_t)(0.76 * (1 << 21)),
                   abc = (uint32_t)(0.95 * (1 << 21));
    uint64_t u = 0, v = 0, bits = 0;
    for (uint64_t lvl = 0; lvl < scale; lvl++) {
        if (lvl % 3 == 0) bits = ma_rng_next(rng);
        const uint32_t r = (uint32_t)(bits & ((1u << 21) - 1));
        bits >>= 21;
        /* Quadrants A|B|C|D by thresholds, without branches: the choice is
         * random, so a branch would mispredict at every level. */
        const uint64_t ge_a = r >= a, ge_ab = r >= ab, ge_abc = r >= abc;
        u = (u << 1) | ge_ab;
        v = (v << 1) | (ge_a ^ ge_ab ^ ge_abc);
    }
    *src = perm[u];
    *dst = perm[v];
}

int main(int argc, char **argv)
{
    ma_phase_t ph[PH_N] = {MA_PHASE("generate"), MA_PHASE("build"), MA_PHASE("contrib"),
                           MA_PHASE("gather"), MA_PHASE("verify")};
    int32_t *edges, *perm, *out_degree, *in_offsets, *in_neighbors, *recount;
    double *scores, *contrib, *check;
    ma_rng_t rng;

    ma_parse(&app, argc, argv);
    const size_t nv = (size_t)1 << scale, ne = (size_t)degree * nv;
    if (ne > INT32_MAX) ma_fail(2, "--degree", "2^scale x degree exceeds 2^31 edges");
    printf("graph: vertices=%zu edges=%zu iters=%llu\n", nv, ne, (unsigned long long)iters);

    MA_ALLOC(perm, nv, "perm");
    MA_ALLOC(out_degree, nv, "out_degree");
    MA_ALLOC(in_offsets, nv + 1, "in_offsets");
    MA_ALLOC(edges, 2 * ne, "edges");

    ma_phase_begin(&ph[PH_GENERATE]);
    ma_rng_seed(&rng, seed);
    for (size_t i = 0; i < nv; i++) perm[i] = (int32_t)i;
    for (size_t i = nv - 1; i > 0; i--) { /* Fisher-Yates */
        const size_t j = (size_t)ma_rng_below(&rng, i + 1);
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memset(out_degree, 0, nv * sizeof *out_degree);
    memset(in_offsets, 0, (nv + 1) * sizeof *in_offsets);
    const ma_rng_t edge_rng = rng; /* the verifier replays from here */
    for (size_t e = 0; e < ne; e++) {
        int32_t u, v;
        rmat_edge(&rng, perm, &u, &v);
        edges[2 * e] = u;
        edges[2 * e + 1] = v;
        out_degree[u]++;
        in_offsets[v + 1]++;
    }
    ma_phase_end(&ph[PH_GENERATE]);

    ma_phase_begin(&ph[PH_BUILD]);
    MA_ALLOC(in_neighbors, ne, "in_neighbors");
    for (size_t v = 0; v < nv; v++) in_offsets[v + 1] += in_offsets[v];
    for (size_t e = 0; e < ne; e++) { /* fill by advancing starts, restore below */
        const int32_t v = edges[2 * e + 1];
        in_neighbors[in_offsets[v]++] = edges[2 * e];
    }
    for (size_t v = nv; v > 0; v--) in_offsets[v] = in_offsets[v - 1];
    in_offsets[0] = 0;
    free(edges);
    if (inject) { /* test hook: one wrong CSR entry, must be caught */
        int32_t *x = &in_neighbors[ne / 2];
        *x = (int32_t)(((size_t)*x + nv / 2) % nv);
    }
    ma_phase_end(&ph[PH_BUILD]);

    MA_ALLOC(scores, nv, "scores");
    MA_ALLOC(contrib, nv, "contrib");
    for (size_t v = 0; v < nv; v++) scores[v] = 1.0 / (double)nv;

    double change = 0.0;
    for (uint64_t it = 0; it < iters; it++) {
        double dangling = 0.0;
        ma_phase_begin(&ph[PH_CONTRIB]);
        MA_OMP("omp parallel for schedule(static) reduction(+:dangling)")
        for (size_t u = 0; u < nv; u++) {
            if (out_degree[u]) {
                contrib[u] = scores[u] / out_degree[u];
            } else {
                contrib[u] = 0.0;
                dangling += scores[u];
            }
        }
        ma_phase_end(&ph[PH_CONTRIB]);

        const double base = (1.0 - damping) / (double)nv + damping * dangling / (double)nv;
        change = 0.0;
        ma_phase_begin(&ph[PH_GATHER]);
        MA_OMP("omp parallel for schedule(dynamic, 1024) reduction(+:change)")
        for (size_t v = 0; v < nv; v++) {
            double s = 0.0;
            for (int32_t q = in_offsets[v]; q < in_offsets[v + 1]; q++) s += contrib[in_neighbors[q]];
            const double nw = base + damping * s;
            change += fabs(nw - scores[v]);
            scores[v] = nw;
        }
        ma_phase_end(&ph[PH_GATHER]);
    }

    /* F(x) from a replay of the generator, into check[]. */
    ma_phase_begin(&ph[PH_VERIFY]);
    MA_ALLOC(check, nv, "check");
    MA_ALLOC(recount, nv, "recount");
    double sum = 0.0, dangling = 0.0, resid = 0.0;
    for (size_t v = 0; v < nv; v++) {
        sum += scores[v];
        if (!out_degree[v]) dangling += scores[v];
        check[v] = 0.0;
        recount[v] = 0;
    }
    rng = edge_rng;
    for (size_t e = 0; e < ne; e++) {
        int32_t u, v;
        rmat_edge(&rng, perm, &u, &v);
        recount[u]++;
        check[v] += out_degree[u] ? scores[u] / out_degree[u] : 0.0;
    }
    size_t degree_mismatch = 0;
    const double base = (1.0 - damping) / (double)nv + damping * dangling / (double)nv;
    for (size_t v = 0; v < nv; v++) {
        resid += fabs(scores[v] - (base + damping * check[v]));
        degree_mismatch += recount[v] != out_degree[v];
    }
    ma_phase_end(&ph[PH_VERIFY]);

    const double bound = damping * change * (1.0 + 1e-9) + 1e-12;
    const int ok_sum = fabs(sum - 1.0) <= 1e-9;
    const int ok_res = resid <= bound;
    ma_report_phases(ph, PH_N);
    printf("last L1 change: %.3e, estimated L1 error: %.3e\n", change, resid / (1.0 - damping));
    printf("score sum: %.15f %s\n", sum, ok_sum ? "ok" : "BAD");
    printf("independent residual: %.3e (bound d*change = %.3e) %s\n", resid, bound, ok_res ? "ok" : "BAD");
    printf("out-degree mismatches: %zu %s\n", degree_mismatch, degree_mismatch ? "BAD" : "ok");
    printf("gather rate: %.1f Medges/s\n", (double)ne * (double)iters / ph[PH_GATHER].total / 1e6);

    free(perm);
    free(out_degree);
    free(in_offsets);
    free(in_neighbors);
    free(scores);
    free(contrib);
    free(check);
    free(recount);
    return ma_finish(ok_sum && ok_res && degree_mismatch == 0);
}
