/* Invariants of the exchange under mpirun, for Q in {0, 0.1, 0.5, 1} and
 * 10 epochs: no loss, no duplicate (ids and content), balanced counts,
 * exact send counts, peak storage, agreement of the data moved with the
 * plan, determinism across seeds, and a chi-square test of destinations.
 *
 * usage: mpi_invariants [--dir DIR] [--n PER_RANK] [--chunk BYTES] [--thread]
 * (--thread: a progress thread instead of ps_progress calls)
 */
#include <math.h>
#include <unistd.h>

#include <xxhash.h>

#include "tcommon.h"

static int M, R;
static uint64_t n_per = 120, chunk = 2048;
static const char *dir;
static int thread;
#define MAXSIZE 300

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Chi-square critical value at p = 0.001 (Wilson-Hilferty). */
static double chi2_crit(double df)
{
    const double z = 3.090232;
    double t = 1.0 - 2.0 / (9.0 * df) + z * sqrt(2.0 / (9.0 * df));
    return df * t * t * t;
}

/* Runs 10 epochs; returns a fingerprint of every epoch's holdings and
 * visiting order (same on every rank). With dest != NULL (rank 0), tallies
 * destinations [src*M + dst]. */
static uint64_t run(double q, uint64_t seed, uint64_t *dest)
{
    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = seed;
    cfg.q.q0 = q;
    cfg.chunk_bytes = chunk;
    cfg.store_dir = dir;
    cfg.fsync = 0;
    cfg.resume = 0;
    cfg.progress_thread = thread;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &cfg));
    unsigned char buf[MAXSIZE];
    uint64_t lo = n_per * (uint64_t)R, N = n_per * (uint64_t)M;
    for (uint64_t id = lo; id < lo + n_per; id++) {
        size_t len = t_size(id, MAXSIZE);
        t_fill(id, buf, len);
        T_OK(ps_add(ps, id, t_label(id, 10), buf, len));
    }
    T_OK(ps_start(ps));

    uint64_t *counts = malloc(M * sizeof *counts), *mine = malloc(n_per * sizeof *mine);
    uint64_t *all = malloc(N * sizeof *all), *held = malloc(N * sizeof *held), *pred = malloc(N * sizeof *pred);
    uint64_t *order = malloc(n_per * sizeof *order);
    ps_plan_t *plans = calloc(M, sizeof *plans);
    for (int r = 0; r < M; r++)
        counts[r] = n_per;
    for (uint64_t i = 0; i < N; i++)
        held[i] = i; /* rank r holds held[r*n .. (r+1)*n), sorted */
    uint64_t fp = 0;
    uint64_t k = M > 1 ? ps_plan_count(q, n_per) : 0;

    for (uint64_t e = 0; e < 10; e++) {
        T_OK(ps_exchange_begin(ps, e));
        /* Train over the epoch's order while the exchange progresses. */
        T_OK(ps_order(ps, order, n_per));
        for (uint64_t i = 0; i < n_per; i++) {
            ps_sample_t s;
            unsigned char want[MAXSIZE];
            T_OK(ps_info(ps, order[i], &s));
            T_OK(ps_read(ps, order[i], buf, sizeof buf));
            t_fill(s.id, want, t_size(s.id, MAXSIZE));
            T_CHECK(s.size == t_size(s.id, MAXSIZE) && !memcmp(buf, want, s.size) && s.label == t_label(s.id, 10),
                    "epoch %" PRIu64 ": content of sample %" PRIu64 " wrong", e, s.id);
            fp = t_mix(fp ^ s.id);
            if (i % 8 == 0 && !thread)
                T_OK(ps_progress(ps, NULL));
        }
        T_OK(ps_exchange_end(ps));
        T_CHECK(ps_epoch(ps) == e + 1, "epoch %" PRIu64 " after exchange %" PRIu64, ps_epoch(ps), e);

        ps_stats_t st;
        ps_stats(ps, &st);
        T_CHECK(ps_size(ps) == n_per, "epoch %" PRIu64 ": holds %" PRIu64 ", started with %" PRIu64, e, ps_size(ps), n_per);
        T_CHECK(st.samples_sent == k && st.samples_recv == k,
                "Q=%g epoch %" PRIu64 ": sent %" PRIu64 " received %" PRIu64 ", expected round(Q*n) = %" PRIu64, q, e,
                st.samples_sent, st.samples_recv, k);
        T_CHECK(st.peak_samples <= n_per + k, "peak %" PRIu64 " > (1+Q)n = %" PRIu64, st.peak_samples, n_per + k);
        T_CHECK(st.exchange_ns > 0 || k == 0, "no exchange time recorded");

        /* Gather every rank's holdings; check each checksum against the
         * content the id stands for. */
        for (uint64_t i = 0; i < n_per; i++) {
            ps_sample_t s;
            T_OK(ps_info(ps, i, &s));
            mine[i] = s.id;
            size_t len = t_size(s.id, MAXSIZE);
            t_fill(s.id, buf, len);
            T_CHECK(s.hash == XXH3_64bits(buf, len), "sample %" PRIu64 ": checksum does not match its content", s.id);
            T_CHECK(i == 0 || mine[i] > mine[i - 1], "canonical order not ascending");
        }
        MPI_Allgather(mine, (int)n_per, MPI_UINT64_T, all, (int)n_per, MPI_UINT64_T, MPI_COMM_WORLD);

        /* Prediction from the plans of every rank. */
        for (int r = 0; r < M; r++)
            T_OK(ps_plan_compute(&plans[r], seed, e, q, counts, M, r));
        for (int r = 0; r < M; r++) {
            unsigned char *gone = calloc(n_per, 1);
            uint64_t *out = pred + r * n_per, c = 0;
            for (uint64_t i = 0; i < plans[r].nsend; i++)
                if (plans[r].send_to[i] != r)
                    gone[plans[r].send_pos[i]] = 1;
            for (uint64_t i = 0; i < n_per; i++)
                if (!gone[i])
                    out[c++] = held[r * n_per + i];
            for (uint64_t i = 0; i < plans[r].nsend; i++) {
                int src = plans[r].recv_from[i];
                if (src == r)
                    continue;
                T_CHECK(plans[src].send_to[i] == r, "plans of %d and %d disagree", src, r);
                out[c++] = held[src * n_per + plans[src].send_pos[i]];
                if (dest)
                    dest[src * M + r]++;
            }
            free(gone);
            T_CHECK(c == n_per, "predicted count %" PRIu64, c);
            qsort(out, n_per, sizeof *out, cmp_u64);
            T_CHECK(!memcmp(out, all + r * n_per, n_per * sizeof *out),
                    "Q=%g epoch %" PRIu64 ": rank %d holds other samples than the plan says", q, e, r);
        }
        for (int r = 0; r < M; r++)
            ps_plan_free(&plans[r]);
        memcpy(held, all, N * sizeof *held);

        /* Union equals the original set, no duplicates; content hashes too. */
        memcpy(pred, all, N * sizeof *pred);
        qsort(pred, N, sizeof *pred, cmp_u64);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < N; i++)
            bad += pred[i] != i;
        T_CHECK(bad == 0, "Q=%g epoch %" PRIu64 ": union differs from the original set at %" PRIu64 " places", q, e, bad);
        for (uint64_t i = 0; i < N; i++)
            fp = t_mix(fp ^ all[i]);
    }
    /* Fingerprint must be the same on every rank's view: combine. */
    uint64_t fpx = 0;
    MPI_Allreduce(&fp, &fpx, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    free(counts), free(mine), free(all), free(held), free(pred), free(order), free(plans);
    ps_close(ps);
    return fpx;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        thread |= !strcmp(argv[i], "--thread");
    if (thread) {
        int got;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got);
        if (got < MPI_THREAD_MULTIPLE) {
            printf("skip: this MPI does not provide MPI_THREAD_MULTIPLE\n");
            MPI_Finalize();
            return 77;
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    t_rank_ = R;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--thread"))
            continue;
        if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--n"))
            n_per = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--chunk"))
            chunk = strtoull(argv[i + 1], NULL, 10);
        else
            continue;
        i++;
    }
    const double qs[] = {0, 0.1, 0.5, 1};
    uint64_t *dest = calloc((size_t)M * M, sizeof *dest);
    for (int i = 0; i < 4; i++) {
        /* Destinations from one run only: runs with different Q share the
         * slot permutations of a (seed, epoch), so summing them would count
         * the same draws more than once. */
        uint64_t a = run(qs[i], 42, qs[i] == 1 ? dest : NULL);
        if (R == 0)
            printf("M=%d Q=%-4g 10 epochs ok, fingerprint %016" PRIx64 "\n", M, qs[i], a);
        if (qs[i] == 0.5) {
            uint64_t b = run(qs[i], 42, NULL), c = run(qs[i], 43, NULL);
            T_CHECK(a == b, "same seed, different result: %016" PRIx64 " vs %016" PRIx64, a, b);
            T_CHECK(a != c, "seeds 42 and 43 gave the same result");
        }
    }
    if (M > 2 && R == 0) {
        /* Destinations of each source uniform over the M-1 other ranks. */
        double chi = 0;
        for (int s = 0; s < M; s++) {
            uint64_t tot = 0;
            for (int d = 0; d < M; d++)
                tot += dest[s * M + d];
            T_CHECK(dest[s * M + s] == 0, "rank %d sent to itself", s);
            double expct = (double)tot / (M - 1);
            for (int d = 0; d < M; d++)
                if (d != s)
                    chi += (dest[s * M + d] - expct) * (dest[s * M + d] - expct) / expct;
        }
        double df = (double)M * (M - 2), crit = chi2_crit(df);
        printf("destination spread: chi2 = %.2f, df = %.0f, critical (p=0.001) = %.2f\n", chi, df, crit);
        T_CHECK(chi < crit, "destinations not uniform: chi2 %.2f >= %.2f", chi, crit);
    }
    free(dest);
    return t_done();
}
