/* The exchange plan without MPI: determinism, balance, consistency between
 * ranks, uniform destinations and uniform choice of the samples sent, the
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

/* All ranks' plans of one epoch agree with each other; sends == receives. */
static void check_epoch(uint64_t seed, uint64_t e, double q, const uint64_t *counts, int M, uint64_t *dest)
{
    ps_plan_t *p = calloc(M, sizeof *p);
    for (int r = 0; r < M; r++)
        CHECK_EQ_INT(ps_plan_compute(&p[r], seed, e, q, counts, M, r), 0);
    for (int r = 0; r < M; r++) {
        CHECK_EQ_U64(p[r].nsend, ps_plan_count(q, counts[r]));
        unsigned char *seen = calloc(counts[r] + 1, 1);
        for (uint64_t i = 0; i < p[r].nsend; i++) {
            int d = p[r].send_to[i], s = p[r].recv_from[i];
            CHECK(p[r].send_pos[i] < counts[r]);
            CHECK(!seen[p[r].send_pos[i]]);
            seen[p[r].send_pos[i]] = 1;
            if (d == r) {
                CHECK(s == r); /* a slot with one participant */
                continue;
            }
            CHECK(i < p[d].nsend && p[d].recv_from[i] == r);
            CHECK(i < p[s].nsend && p[s].send_to[i] == r);
            if (dest)
                dest[r * M + d]++;
        }
        free(seen);
    }
    /* The all-ranks variant gives the same plans. */
    ps_plan_t *all = calloc(M, sizeof *all);
    CHECK_EQ_INT(ps_plan_compute_all(all, seed, e, q, counts, M), 0);
    for (int r = 0; r < M; r++) {
        CHECK_EQ_U64(all[r].nsend, p[r].nsend);
        CHECK(!memcmp(all[r].send_pos, p[r].send_pos, p[r].nsend * sizeof *p[r].send_pos));
        CHECK(!memcmp(all[r].send_to, p[r].send_to, p[r].nsend * sizeof *p[r].send_to));
        CHECK(!memcmp(all[r].recv_from, p[r].recv_from, p[r].nsend * sizeof *p[r].recv_from));
        CHECK_EQ_U64(all[r].nkept, p[r].nkept);
        ps_plan_free(&all[r]);
    }
    free(all);
    for (int r = 0; r < M; r++)
        ps_plan_free(&p[r]);
    free(p);
}

static void test_consistency(void)
{
    uint64_t eq[8] = {100, 100, 100, 100, 100, 100, 100, 100};
    uint64_t uneq[5] = {21, 20, 20, 20, 20};
    const double qs[] = {0, 0.1, 0.5, 1};
    for (int i = 0; i < 4; i++) {
        for (uint64_t e = 0; e < 5; e++) {
            check_epoch(7, e, qs[i], eq, 8, NULL);
            check_epoch(7, e, qs[i], uneq, 5, NULL);
            check_epoch(7, e, qs[i], eq, 1, NULL);
            check_epoch(7, e, qs[i], eq, 2, NULL);
        }
    }
    /* With one rank nothing leaves. */
    ps_plan_t p;
    CHECK_EQ_INT(ps_plan_compute(&p, 1, 0, 1.0, eq, 1, 0), 0);
    CHECK_EQ_U64(p.nkept, p.nsend);
    ps_plan_free(&p);
}

static void test_determinism(void)
{
    uint64_t c[4] = {50, 50, 50, 50};
    ps_plan_t a, b, d;
    CHECK_EQ_INT(ps_plan_compute(&a, 5, 3, 0.5, c, 4, 2), 0);
    CHECK_EQ_INT(ps_plan_compute(&b, 5, 3, 0.5, c, 4, 2), 0);
    CHECK_EQ_INT(ps_plan_compute(&d, 6, 3, 0.5, c, 4, 2), 0);
    CHECK(!memcmp(a.send_pos, b.send_pos, a.nsend * 8) && !memcmp(a.send_to, b.send_to, a.nsend * sizeof(int)));
    CHECK(memcmp(a.send_pos, d.send_pos, a.nsend * 8) || memcmp(a.send_to, d.send_to, a.nsend * sizeof(int)));
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

/* Statistics over many epochs: destinations uniform over the other ranks;
 * each local position equally likely to be sent; first position of the
 * visiting order uniform. */
static void test_statistics(void)
{
    enum { M = 6, N = 40, E = 400 };
    uint64_t counts[M], dest[M * M] = {0}, pos[N] = {0}, first[N] = {0};
    for (int r = 0; r < M; r++)
        counts[r] = N;
    for (uint64_t e = 0; e < E; e++) {
        check_epoch(11, e, 0.25, counts, M, dest);
        ps_plan_t p;
        CHECK_EQ_INT(ps_plan_compute(&p, 11, e, 0.25, counts, M, 0), 0);
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
        CHECK_EQ_U64(dest[s * M + s], 0);
        for (int d = 0; d < M; d++)
            if (d != s)
                chi += pow(dest[s * M + d] - tot / (M - 1), 2) / (tot / (M - 1));
    }
    printf("destinations: chi2 %.2f (df %d, critical %.2f)\n", chi, M * (M - 2), chi2_crit(M * (M - 2)));
    CHECK(chi < chi2_crit(M * (M - 2)));
    double cp = 0, ep = (double)E * 10 / N; /* 10 = round(0.25*40) per epoch */
    for (int i = 0; i < N; i++)
        cp += pow(pos[i] - ep, 2) / ep;
    printf("sent positions: chi2 %.2f (df %d, critical %.2f)\n", cp, N - 1, chi2_crit(N - 1));
    CHECK(cp < chi2_crit(N - 1));
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
    return check_done();
}
