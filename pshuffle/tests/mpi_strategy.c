/* The global strategy under mpirun: each epoch's partition is a fresh
 * uniformly random one. Over E epochs of real exchanges rank 0 tallies
 * where every sample lands and which pairs share a rank, and runs
 * chi-square tests (p = 0.001) on both; fixed points (a sample staying on
 * its rank) occur at the rate 1/M, and with neither ps_progress calls nor a
 * progress thread no overlap is reported. Then the local strategy: nothing
 * moves, and the exchange time reported is not the time between begin and
 * end.
 *
 * usage: mpi_strategy [--epochs E] [--per-rank K]
 */
#include <math.h>
#include <time.h>
#include <unistd.h>

#include "tcommon.h"

static int M, R;

static double chi2_crit(double df) /* p = 0.001, Wilson-Hilferty */
{
    const double z = 3.090232;
    double t = 1.0 - 2.0 / (9.0 * df) + z * sqrt(2.0 / (9.0 * df));
    return df * t * t * t;
}

static ps_shuffler_t *open_start(double q, uint64_t per, uint64_t *N)
{
    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = 1234;
    cfg.q.q0 = q;
    cfg.resume = 0;
    cfg.progress_thread = 0;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &cfg));
    for (uint64_t id = per * (uint64_t)R; id < per * (uint64_t)(R + 1); id++)
        T_OK(ps_add(ps, id, 0, &id, sizeof id));
    T_OK(ps_start(ps));
    *N = per * (uint64_t)M;
    return ps;
}

/* where[id] = rank holding id, on every rank. */
static void locate(ps_shuffler_t *ps, uint64_t N, int *where)
{
    uint64_t n = ps_size(ps), *mine = malloc((n + 1) * sizeof *mine), *all = malloc(N * sizeof *all);
    int *cnt = malloc(M * sizeof *cnt), *dsp = malloc(M * sizeof *dsp), nn = (int)n;
    for (uint64_t i = 0; i < n; i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        mine[i] = s.id;
    }
    MPI_Allgather(&nn, 1, MPI_INT, cnt, 1, MPI_INT, MPI_COMM_WORLD);
    int tot = 0;
    for (int r = 0; r < M; r++)
        dsp[r] = tot, tot += cnt[r];
    T_CHECK((uint64_t)tot == N, "ranks hold %d samples, not %" PRIu64, tot, N);
    MPI_Allgatherv(mine, nn, MPI_UINT64_T, all, cnt, dsp, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < M; r++)
        for (int i = 0; i < cnt[r]; i++)
            where[all[dsp[r] + i]] = r;
    free(mine), free(all), free(cnt), free(dsp);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    t_rank_ = R;
    uint64_t E = 400, per = 4, N;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--epochs"))
            E = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--per-rank"))
            per = strtoull(argv[i + 1], NULL, 10);
    }
    if (M < 2) {
        if (R == 0)
            printf("skip: needs at least 2 ranks\n");
        MPI_Finalize();
        return 77;
    }

    ps_shuffler_t *ps = open_start(1.0, per, &N);
    uint64_t *land = calloc(N * (uint64_t)M, sizeof *land), *pair = calloc(N / 2, sizeof *pair), stay = 0;
    int *where = malloc(N * sizeof *where), *prev = malloc(N * sizeof *prev);
    locate(ps, N, prev);
    for (uint64_t e = 0; e < E; e++) {
        T_OK(ps_exchange_begin(ps, e));
        usleep(e < 3 ? 2000 : 0); /* "training" without ps_progress calls */
        T_OK(ps_exchange_end(ps));
        ps_stats_t st;
        ps_stats(ps, &st);
        /* Nothing progressed before ps_exchange_end: no overlap may be claimed. */
        T_CHECK(st.overlap_ns == 0, "epoch %" PRIu64 ": overlap %" PRIu64 " ns reported without progress", e,
                st.overlap_ns);
        locate(ps, N, where);
        for (uint64_t i = 0; i < N; i++) {
            land[i * M + where[i]]++;
            stay += where[i] == prev[i];
        }
        for (uint64_t i = 0; i + 1 < N; i += 2)
            pair[i / 2] += where[i] == where[i + 1];
        memcpy(prev, where, N * sizeof *prev);
    }
    if (R == 0) {
        /* Landing: each sample uniform over the M ranks (equal counts). */
        double chi = 0, ex = (double)E / M;
        for (uint64_t i = 0; i < N * (uint64_t)M; i++)
            chi += ((double)land[i] - ex) * ((double)land[i] - ex) / ex;
        double df = (double)N * (M - 1);
        printf("global, M=%d N=%" PRIu64 " E=%" PRIu64 ": landing chi2 %.1f (df %.0f, critical %.1f)\n", M, N, E, chi,
               df, chi2_crit(df));
        T_CHECK(chi < chi2_crit(df), "landing ranks not uniform: chi2 %.1f", chi);
        /* Pairs: two given samples share a rank with p = (n-1)/(N-1). */
        double p = (double)(per - 1) / (double)(N - 1), cp = 0;
        for (uint64_t k = 0; k < N / 2; k++)
            cp += pow((double)pair[k] - E * p, 2) / (E * p * (1 - p));
        printf("pairs sharing a rank: chi2 %.1f (df %" PRIu64 ", critical %.1f)\n", cp, N / 2, chi2_crit((double)(N / 2)));
        T_CHECK(per < 2 || cp < chi2_crit((double)(N / 2)), "pair co-location off: chi2 %.1f", cp);
        /* Fixed points at rate 1/M: within 5 standard deviations. */
        double share = (double)stay / (double)(N * E), sd = sqrt((1.0 / M) * (1 - 1.0 / M) / (double)(N * E));
        printf("share staying on its rank: %.4f (1/M = %.4f)\n", share, 1.0 / M);
        T_CHECK(fabs(share - 1.0 / M) < 5 * sd, "share staying %.4f, expected %.4f", share, 1.0 / M);
    }
    ps_close(ps);

    /* Local: nothing moves. */
    ps = open_start(0.0, per, &N);
    locate(ps, N, prev);
    for (uint64_t e = 0; e < 5; e++) {
        T_OK(ps_exchange(ps, e));
        ps_stats_t st;
        ps_stats(ps, &st);
        T_CHECK(st.samples_sent == 0 && st.samples_recv == 0, "local strategy moved samples");
    }
    /* Nothing to move, so no time moving it: the exchange's time is not
     * the span from begin to end, and no overlap is claimed. With no
     * round to run (checked below), the exchange completes inside
     * ps_exchange_begin (exchange.c: begin_local takes t_begin, begin sets
     * t_complete when the agreement finds nothing to move), so its time
     * is at most that call's, timed here on the same clock; scheduling
     * can lengthen both, never make one exceed the other. The sleep
     * between begin and end ("training") is longer than the begin call,
     * so that a time spanning it could not pass this check either. */
    struct timespec b0, b1, s0, s1;
    clock_gettime(CLOCK_MONOTONIC, &b0);
    T_OK(ps_exchange_begin(ps, 5));
    clock_gettime(CLOCK_MONOTONIC, &b1);
    uint64_t in_begin = (uint64_t)(b1.tv_sec - b0.tv_sec) * 1000000000u + (uint64_t)b1.tv_nsec - (uint64_t)b0.tv_nsec;
    uint64_t nap = in_begin + 100000000u; /* 0.1 s more than the begin call */
    struct timespec req = {(time_t)(nap / 1000000000u), (long)(nap % 1000000000u)};
    clock_gettime(CLOCK_MONOTONIC, &s0);
    while (nanosleep(&req, &req))
        ;
    clock_gettime(CLOCK_MONOTONIC, &s1);
    T_OK(ps_exchange_end(ps));
    uint64_t slept = (uint64_t)(s1.tv_sec - s0.tv_sec) * 1000000000u + (uint64_t)s1.tv_nsec - (uint64_t)s0.tv_nsec;
    ps_stats_t sl;
    ps_stats(ps, &sl);
    T_CHECK(sl.exchange_ns <= in_begin, "local strategy: exchange_ns %" PRIu64 " is longer than ps_exchange_begin (%"
            PRIu64 " ns; %" PRIu64 " ns of training after it)", sl.exchange_ns, in_begin, slept);
    T_CHECK(sl.overlap_ns == 0 && sl.rounds == 0 && sl.chunks_sent == 0, "local strategy: overlap %" PRIu64
            " ns, %" PRIu64 " rounds, %" PRIu64 " chunks", sl.overlap_ns, sl.rounds, sl.chunks_sent);
    locate(ps, N, where);
    T_CHECK(!memcmp(where, prev, N * sizeof *where), "local strategy changed the partition");
    ps_close(ps);
    free(land), free(pair), free(where), free(prev);
    return t_done();
}
