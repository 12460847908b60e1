/* The exchange plan without MPI: determinism, balance, consistency between
 * ranks, balance from any start, uniform destinations, a chi-square test
 * that Q=1 draws every partition equally often, fixed points, the
 * visiting order, Q schedules and rejection of bad Q. */
#include <math.h>
#include <stdlib.h>

#include "pshuffle.h"
#include "../../tests/unit/check.h"

static double chi2_crit(double df) /* p = 0.001, Wilson-Hilferty */
{
    const double z = 3.090232;
    double t = 1.0 - 2.0 / (9.0 * df) + z * sqrt(2.0 / (9.0 * df));
    return df * t * t * t;
}

static void test_count(void)
{
    CHECK_EQ_U64(ps_plan_count(0.0, 100), 0);
    CHECK_EQ_U64(ps_plan_count(1.0, 100), 100);
    CHECK_EQ_U64(ps_plan_count(0.1, 25), 3);   /* 2.5 rounds away from zero */
    CHECK_EQ_U64(ps_plan_count(0.3, 10), 3);
    CHECK_EQ_U64(ps_plan_count(0.33, 100), 33);
    CHECK_EQ_U64(ps_plan_count(0.5, 1), 1);
}

static void test_bad_q(void)
{
    ps_plan_t p;
    uint64_t counts[2] = {10, 10};
    CHECK_EQ_INT(ps_plan_compute(&p, 1, 0, 1.5, counts, 2, 0), PS_EINVAL);
    CHECK_EQ_INT(ps_plan_compute(&p, 1, 0, -0.1, counts, 2, 0), PS_EINVAL);
    CHECK_EQ_INT(ps_plan_compute(&p, 1, 0, NAN, counts, 2, 0), PS_EINVAL);
    CHECK_EQ_INT(ps_plan_compute(&p, 1, 0, 0.5, counts, 2, 2), PS_EINVAL);
    ps_schedule_t s = {.kind = PS_Q_CONST, .q0 = 1.01};
    CHECK_EQ_INT(ps_schedule_check(&s), PS_EINVAL);
    CHECK(strstr(ps_errdetail(), "1.01") != NULL);
    s.q0 = 0.2;
    CHECK_EQ_INT(ps_schedule_check(&s), 0);
    double tab[] = {0.5, 2.0};
    ps_schedule_t t = {.kind = PS_Q_TABLE, .q_table = tab, .q_table_len = 2};
    CHECK_EQ_INT(ps_schedule_check(&t), PS_EINVAL);
    s.kind = 9;
    CHECK_EQ_INT(ps_schedule_check(&s), PS_EINVAL);
}

static void test_schedule(void)
{
    ps_schedule_t e = {.kind = PS_Q_EXP, .q0 = 0.8, .q_rate = 0.5, .q_min = 0.1};
    CHECK_NEAR(ps_schedule_q(&e, 0), 0.8, 1e-12);
    CHECK_NEAR(ps_schedule_q(&e, 2), 0.2, 1e-12);
    CHECK_NEAR(ps_schedule_q(&e, 10), 0.1, 1e-12);
    ps_schedule_t l = {.kind = PS_Q_LINEAR, .q0 = 0.5, .q_rate = 0.1, .q_min = 0.0};
    CHECK_NEAR(ps_schedule_q(&l, 3), 0.2, 1e-9);
    CHECK_NEAR(ps_schedule_q(&l, 9), 0.0, 1e-12);
    double tab[] = {1.0, 0.5, 0.25};
    ps_schedule_t t = {.kind = PS_Q_TABLE, .q_table = tab, .q_table_len = 3};
    CHECK_NEAR(ps_schedule_q(&t, 1), 0.5, 1e-12);
    CHECK_NEAR(ps_schedule_q(&t, 7), 0.25, 1e-12);
}

/* All ranks' plans of one epoch agree with each other: what each sender
 * deals to a rank is what that rank expects, and every rank ends at its
 * balanced count. dest (optional) tallies [src*M + dst] over pool samples,
 * fixed points included. */
static void check_epoch(uint64_t seed, uint64_t e, double q, const uint64_t *counts, int M, uint64_t *dest)
{
    ps_plan_t *p = calloc(M, sizeof *p);
    uint64_t *t = calloc(M, sizeof *t), *got = calloc((size_t)M * M, sizeof *got), N = 0;
    ps_plan_balance(counts, M, t);
    for (int r = 0; r < M; r++) {
        CHECK_EQ_INT(ps_plan_compute(&p[r], seed, e, q, counts, M, r), 0);
        N += counts[r];
    }
    for (int r = 0; r < M; r++) {
        CHECK(p[r].npool >= ps_plan_count(q, counts[r]));
        CHECK(p[r].npool <= counts[r]);
        CHECK_EQ_U64(p[r].nsend + p[r].nkept, p[r].npool);
        CHECK_EQ_U64(p[r].count_after, t[r]);
        CHECK(t[r] == N / M || t[r] == N / M + 1);
        CHECK_EQ_U64(counts[r] - p[r].nsend + p[r].nrecv, p[r].count_after);
        unsigned char *seen = calloc(counts[r] + 1, 1);
        for (uint64_t i = 0; i < p[r].nsend; i++) {
            int d = p[r].send_to[i];
            CHECK(p[r].send_pos[i] < counts[r]);
            CHECK(!seen[p[r].send_pos[i]]);
            seen[p[r].send_pos[i]] = 1;
            CHECK(d != r && d >= 0 && d < M);
            got[r * M + d]++;
            if (dest)
                dest[r * M + d]++;
        }
        if (dest)
            dest[r * M + r] += p[r].nkept;
        free(seen);
    }
    for (int r = 0; r < M; r++)
        for (int s = 0; s < M; s++)
            CHECK_EQ_U64(got[s * M + r], p[r].recv_count[s]);
    /* The all-ranks variant gives the same plans. */
    ps_plan_t *all = calloc(M, sizeof *all);
    CHECK_EQ_INT(ps_plan_compute_all(all, seed, e, q, counts, M), 0);
    for (int r = 0; r < M; r++) {
        CHECK_EQ_U64(all[r].nsend, p[r].nsend);
        CHECK(!memcmp(all[r].send_pos, p[r].send_pos, p[r].nsend * sizeof *p[r].send_pos));
        CHECK(!memcmp(all[r].send_to, p[r].send_to, p[r].nsend * sizeof *p[r].send_to));
        CHECK(!memcmp(all[r].recv_count, p[r].recv_count, M * sizeof *p[r].recv_count));
        CHECK_EQ_U64(all[r].nkept, p[r].nkept);
        ps_plan_free(&all[r]);
    }
    free(all);
    for (int r = 0; r < M; r++)
        ps_plan_free(&p[r]);
    free(p), free(t), free(got);
}

static void test_consistency(void)
{
    uint64_t eq[8] = {100, 100, 100, 100, 100, 100, 100, 100};
    uint64_t uneq[5] = {21, 20, 20, 20, 20};
    uint64_t empty[4] = {300, 0, 7, 1}; /* one rank with nothing, one with most */
    const double qs[] = {0, 0.1, 0.5, 1};
    for (int i = 0; i < 4; i++) {
        for (uint64_t e = 0; e < 5; e++) {
            check_epoch(7, e, qs[i], eq, 8, NULL);
            check_epoch(7, e, qs[i], uneq, 5, NULL);
            check_epoch(7, e, qs[i], empty, 4, NULL);
            check_epoch(7, e, qs[i], eq, 1, NULL);
            check_epoch(7, e, qs[i], eq, 2, NULL);
        }
    }
    /* With one rank nothing leaves. */
    ps_plan_t p;
    CHECK_EQ_INT(ps_plan_compute(&p, 1, 0, 1.0, eq, 1, 0), 0);
    CHECK_EQ_U64(p.nsend, 0);
    CHECK_EQ_U64(p.nkept, 100);
    ps_plan_free(&p);
    /* Balanced at Q=0: nothing moves, and the larger shares stay where
     * they are. */
    uint64_t odd[4] = {10, 10, 10, 11}, t[4];
    ps_plan_balance(odd, 4, t);
    CHECK(!memcmp(t, odd, sizeof t));
    for (int r = 0; r < 4; r++) {
        CHECK_EQ_INT(ps_plan_compute(&p, 3, 0, 0.0, odd, 4, r), 0);
        CHECK_EQ_U64(p.nsend + p.nrecv, 0);
        ps_plan_free(&p);
    }
    /* Uneven at Q=0: only the surplus moves, and the empty rank gets its share. */
    uint64_t moved = 0;
    for (int r = 0; r < 4; r++) {
        CHECK_EQ_INT(ps_plan_compute(&p, 3, 0, 0.0, empty, 4, r), 0);
        moved += p.nsend;
        if (r == 1)
            CHECK_EQ_U64(p.nrecv, 77);
        ps_plan_free(&p);
    }
    CHECK_EQ_U64(moved, 300 - 77); /* only rank 0's surplus moves */
}

/* Simulates E epochs of Q=1 on M ranks and N samples; returns the tally of
 * whole partitions (sample -> rank, base-M number) for small N. */
static void simulate(uint64_t seed, double q, int M, uint64_t N, uint64_t E, uint64_t *part_tally,
                     uint64_t *land, double *stay_share)
{
    uint64_t *counts = calloc(M, sizeof *counts), *where = calloc(N, sizeof *where);
    uint64_t **held = calloc(M, sizeof *held);
    for (uint64_t i = 0; i < N; i++)
        where[i] = i * (uint64_t)M / N;
    ps_plan_t *p = calloc(M, sizeof *p);
    uint64_t stay = 0;
    for (uint64_t e = 0; e < E; e++) {
        for (int r = 0; r < M; r++)
            counts[r] = 0;
        for (int r = 0; r < M; r++)
            held[r] = realloc(held[r], (N + 1) * sizeof **held);
        for (uint64_t i = 0; i < N; i++)
            held[where[i]][counts[where[i]]++] = i; /* ascending id = canonical order */
        CHECK_EQ_INT(ps_plan_compute_all(p, seed, e, q, counts, M), 0);
        for (int r = 0; r < M; r++)
            for (uint64_t i = 0; i < p[r].nsend; i++)
                where[held[r][p[r].send_pos[i]]] = (uint64_t)p[r].send_to[i];
        for (int r = 0; r < M; r++) {
            stay += counts[r] - p[r].nsend;
            ps_plan_free(&p[r]);
        }
        uint64_t code = 0;
        for (uint64_t i = 0; i < N; i++) {
            code = code * (uint64_t)M + where[i];
            if (land)
                land[i * M + where[i]]++;
        }
        if (part_tally)
            part_tally[code]++;
    }
    *stay_share = (double)stay / (double)(N * E);
    for (int r = 0; r < M; r++)
        free(held[r]);
    free(held), free(counts), free(where), free(p);
}

/* Q=1 is a global shuffle: every partition of 6 samples into 3 parts of 2
 * equally likely (90 of them), fixed points allowed (a third of the
 * samples stay), and at M=2 about half the samples move each epoch. */
static void test_global_uniform(void)
{
    enum { M = 3, N = 6, E = 9000 };
    uint64_t *tally = calloc(729, sizeof *tally);
    double stay;
    simulate(21, 1.0, M, N, E, tally, NULL, &stay);
    int cells = 0;
    double chi = 0, expct = (double)E / 90;
    for (int c = 0; c < 729; c++) {
        int cnt[3] = {0}, x = c;
        for (int i = 0; i < N; i++, x /= 3)
            cnt[x % 3]++;
        if (cnt[0] != 2 || cnt[1] != 2 || cnt[2] != 2) {
            CHECK_EQ_U64(tally[c], 0); /* unbalanced partitions never occur */
            continue;
        }
        cells++;
        chi += pow((double)tally[c] - expct, 2) / expct;
    }
    CHECK_EQ_INT(cells, 90);
    printf("global partitions: chi2 %.2f (df 89, critical %.2f), share staying %.3f\n", chi, chi2_crit(89), stay);
    CHECK(chi < chi2_crit(89));
    CHECK(fabs(stay - 1.0 / 3) < 0.02);
    free(tally);
    /* M=2, Q=1 and Q=0.5: mixing, not swapping. */
    simulate(5, 1.0, 2, 200, 200, NULL, NULL, &stay);
    printf("M=2 Q=1: share staying %.3f\n", stay);
    CHECK(fabs(stay - 0.5) < 0.03);
    simulate(5, 0.5, 2, 200, 200, NULL, NULL, &stay);
    printf("M=2 Q=0.5: share staying %.3f\n", stay);
    CHECK(fabs(stay - 0.75) < 0.03);
}

static void test_determinism(void)
{
    uint64_t c[4] = {50, 50, 50, 50};
    ps_plan_t a, b, d;
    CHECK_EQ_INT(ps_plan_compute(&a, 5, 3, 0.5, c, 4, 2), 0);
    CHECK_EQ_INT(ps_plan_compute(&b, 5, 3, 0.5, c, 4, 2), 0);
    CHECK_EQ_INT(ps_plan_compute(&d, 6, 3, 0.5, c, 4, 2), 0);
    CHECK(!memcmp(a.send_pos, b.send_pos, a.nsend * 8) && !memcmp(a.send_to, b.send_to, a.nsend * sizeof(int)));
    CHECK(a.nsend != d.nsend || memcmp(a.send_pos, d.send_pos, a.nsend * 8) ||
          memcmp(a.send_to, d.send_to, a.nsend * sizeof(int)));
    ps_plan_free(&a), ps_plan_free(&b), ps_plan_free(&d);
    uint64_t o1[64], o2[64], o3[64];
    ps_plan_order(o1, 64, 1, 0, 0);
    ps_plan_order(o2, 64, 1, 0, 0);
    ps_plan_order(o3, 64, 1, 1, 0);
    CHECK(!memcmp(o1, o2, sizeof o1));
    CHECK(memcmp(o1, o3, sizeof o1));
    unsigned char seen[64] = {0};
    for (int i = 0; i < 64; i++)
        seen[o1[i]]++;
    int ok = 1;
    for (int i = 0; i < 64; i++)
        ok &= seen[i] == 1;
    CHECK(ok);
}

/* Statistics over many epochs: destinations of pool samples uniform over
 * all ranks (own rank included); each local position equally likely to
 * enter the pool; first position of the visiting order uniform. */
static void test_statistics(void)
{
    enum { M = 6, N = 40, E = 400 };
    uint64_t counts[M], dest[M * M] = {0}, pos[N] = {0}, first[N] = {0};
    for (int r = 0; r < M; r++)
        counts[r] = N;
    for (uint64_t e = 0; e < E; e++) {
        check_epoch(11, e, 0.25, counts, M, dest);
        ps_plan_t p;
        CHECK_EQ_INT(ps_plan_compute(&p, 11, e, 1.0, counts, M, 0), 0);
        for (uint64_t i = 0; i < p.nsend; i++)
            pos[p.send_pos[i]]++;
        ps_plan_free(&p);
        uint64_t o[N];
        ps_plan_order(o, N, 11, e, 0);
        first[o[0]]++;
    }
    double chi = 0;
    for (int s = 0; s < M; s++) {
        double tot = 0;
        for (int d = 0; d < M; d++)
            tot += dest[s * M + d];
        for (int d = 0; d < M; d++)
            chi += pow(dest[s * M + d] - tot / M, 2) / (tot / M);
    }
    printf("destinations: chi2 %.2f (df %d, critical %.2f)\n", chi, M * (M - 1), chi2_crit(M * (M - 1)));
    CHECK(chi < chi2_crit(M * (M - 1)));
    /* At Q=1 the moving positions are the ones dealt away: each position
     * leaves with probability 5/6. */
    double cp = 0, ep = (double)E * 5 / 6;
    for (int i = 0; i < N; i++)
        cp += pow(pos[i] - ep, 2) / (ep * (1.0 / 6));
    printf("moving positions: chi2 %.2f (df %d, critical %.2f)\n", cp, N - 1, chi2_crit(N - 1));
    CHECK(cp < chi2_crit(N));
    double cf = 0, ef = (double)E / N;
    for (int i = 0; i < N; i++)
        cf += pow(first[i] - ef, 2) / ef;
    printf("order first element: chi2 %.2f (df %d, critical %.2f)\n", cf, N - 1, chi2_crit(N - 1));
    CHECK(cf < chi2_crit(N - 1));
}

int main(void)
{
    test_count();
    test_bad_q();
    test_schedule();
    test_consistency();
    test_determinism();
    test_statistics();
    test_global_uniform();
    return check_done();
}
