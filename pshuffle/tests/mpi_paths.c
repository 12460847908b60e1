/* The memory store's send and receive paths under mpirun, with the test
 * thresholds lowered (PSHUFFLE_TEST_DIRECT=2048, PSHUFFLE_TEST_MSG=3000) so
 * that small test samples take all of them at once:
 * - many small samples (packed into runs, cut into messages of at most
 *   3000 bytes at sample boundaries) mixed with large ones (sent from the
 *   store, each cut into several messages, and across rounds by a 64 KiB
 *   window), over several epochs at Q=1 and Q=0.5: the holdings are exactly
 *   the original set, every sample intact, labels kept, byte counts
 *   consistent with the statistics;
 * - checksum verification: a sample damaged in the sender's store is found
 *   by its receiver when it is sent from the store, by its sender when it
 *   is packed; either way the exchange fails on every rank (the receiver or
 *   sender with PS_ECORRUPT, the others with PS_EPEER) and the epoch stays.
 *
 * usage: mpi_paths (with PSHUFFLE_TEST_DIRECT and PSHUFFLE_TEST_MSG set) */
#include "tcommon.h"

static int M, R;
#define WINDOW 65536
#define LARGE 40000
#define DIRECT 2048

/* Two in three samples small (1..1500 bytes, packed), the others from 2 KiB
 * to 40 KB (sent from the store; larger than a round's share of a pair's
 * stream at 3 and more ranks), some empty. */
static size_t size_of(uint64_t id)
{
    if (id % 7 == 0)
        return 0;
    if (id % 3)
        return t_size(id, 1500);
    return DIRECT + t_size(id, LARGE - DIRECT);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static ps_shuffler_t *open_fill(double q, uint64_t n, uint64_t *N)
{
    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = 5;
    cfg.q.q0 = q;
    cfg.window_bytes = WINDOW;
    cfg.resume = 0;
    cfg.progress_thread = 0;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &cfg));
    unsigned char *buf = malloc(LARGE + 1);
    /* Uneven: rank r starts with n + 7r samples. */
    uint64_t lo = 0;
    *N = 0;
    for (int r = 0; r < M; r++) {
        if (r < R)
            lo += n + 7 * (uint64_t)r;
        *N += n + 7 * (uint64_t)r;
    }
    for (uint64_t id = lo; id < lo + n + 7 * (uint64_t)R; id++) {
        size_t len = size_of(id);
        t_fill(id, buf, len);
        T_OK(ps_add(ps, id, t_label(id, 11), buf, len));
    }
    free(buf);
    T_OK(ps_start(ps));
    return ps;
}

/* Every held sample intact and the union over ranks exactly 0..N-1.
 * Returns the payload bytes held. */
static uint64_t check_holdings(ps_shuffler_t *ps, uint64_t N, const char *what)
{
    uint64_t n = ps_size(ps), bytes = 0, bad = 0;
    unsigned char *buf = malloc(LARGE + 1), *want = malloc(LARGE + 1);
    uint64_t *ids = malloc((n + 1) * sizeof *ids);
    for (uint64_t i = 0; i < n; i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        T_OK(ps_read(ps, i, buf, LARGE));
        size_t len = size_of(s.id);
        t_fill(s.id, want, len);
        bad += s.size != len || memcmp(buf, want, len) || s.label != t_label(s.id, 11);
        ids[i] = s.id;
        bytes += s.size;
    }
    T_CHECK(bad == 0, "%s: %" PRIu64 " samples damaged", what, bad);
    int cnt = (int)n, *rc = malloc(M * sizeof *rc), *rd = malloc(M * sizeof *rd);
    MPI_Allgather(&cnt, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
    uint64_t tot = 0;
    for (int r = 0; r < M; r++)
        rd[r] = (int)tot, tot += (uint64_t)rc[r];
    T_CHECK(tot == N, "%s: %" PRIu64 " samples over the ranks, %" PRIu64 " expected", what, tot, N);
    uint64_t *all = malloc((tot + 1) * sizeof *all), wrong = 0;
    MPI_Allgatherv(ids, cnt, MPI_UINT64_T, all, rc, rd, MPI_UINT64_T, MPI_COMM_WORLD);
    qsort(all, tot, sizeof *all, cmp_u64);
    for (uint64_t i = 0; i < tot; i++)
        wrong += all[i] != i;
    T_CHECK(wrong == 0, "%s: the union differs from the original set at %" PRIu64 " places", what, wrong);
    free(buf), free(want), free(ids), free(rc), free(rd), free(all);
    return bytes;
}

static void mixed(double q)
{
    uint64_t N;
    char what[128];
    ps_shuffler_t *ps = open_fill(q, 150, &N);
    uint64_t held = check_holdings(ps, N, "start");
    for (uint64_t e = 0; e < 3; e++) {
        snprintf(what, sizeof what, "Q=%g, epoch %" PRIu64, q, e);
        T_OK(ps_exchange(ps, e));
        ps_stats_t st;
        ps_stats(ps, &st);
        uint64_t now = check_holdings(ps, N, what);
        T_CHECK(now == held - st.bytes_sent + st.bytes_recv, "%s: %" PRIu64 " bytes held, %" PRIu64 " expected",
                what, now, held - st.bytes_sent + st.bytes_recv);
        T_CHECK(st.peak_bytes <= held + st.bytes_recv + WINDOW,
                "%s: peak_bytes %" PRIu64 " > held %" PRIu64 " + received %" PRIu64 " + window %d", what,
                st.peak_bytes, held, st.bytes_recv, WINDOW);
        /* Streams of about 300 KB per pair at Q=1 through a 64 KiB
         * window: many rounds. */
        if (M > 1 && q == 1.0)
            T_CHECK(st.rounds >= 5, "%s: only %" PRIu64 " rounds", what, st.rounds);
        uint64_t sent = st.samples_sent, recv = st.samples_recv, s2[2] = {sent, recv}, t2[2];
        MPI_Allreduce(s2, t2, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        T_CHECK(t2[0] == t2[1], "%s: %" PRIu64 " samples sent, %" PRIu64 " received", what, t2[0], t2[1]);
        T_CHECK(M == 1 || t2[0] > 0, "%s: nothing moved", what);
        held = now;
    }
    ps_close(ps);
    if (R == 0)
        printf("Q=%g: 3 exchanges of mixed small and large samples, holdings exact\n", q);
}

/* PSHUFFLE_TEST_CORRUPT=RANK:KIND damages, in that rank's store, the first
 * sample it sends of that kind ("direct": sent from the store; "packed"). */
static void corrupt(const char *kind)
{
    uint64_t N;
    ps_shuffler_t *ps = open_fill(1.0, 60, &N);
    char env[64];
    snprintf(env, sizeof env, "%d:%s", M - 1, kind);
    setenv("PSHUFFLE_TEST_CORRUPT", env, 1);
    int err = ps_exchange(ps, 0);
    unsetenv("PSHUFFLE_TEST_CORRUPT");
    const char *detail = ps_errdetail();
    T_CHECK(err == PS_ECORRUPT || err == PS_EPEER, "%s: exchange with a damaged sample returned %s", kind,
            ps_err_name(err));
    int mine = err == PS_ECORRUPT, nc = 0;
    MPI_Allreduce(&mine, &nc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    T_CHECK(nc == 1, "%s: %d ranks report PS_ECORRUPT, 1 expected", kind, nc);
    if (!strcmp(kind, "direct")) {
        T_CHECK(strstr(detail, "arrived with a bad checksum") != NULL, "%s: message: %s", kind, detail);
        T_CHECK(!mine || R != M - 1, "%s: the sender, not its receiver, reported it", kind);
    } else {
        T_CHECK(strstr(detail, "checksum mismatch") != NULL, "%s: message: %s", kind, detail);
        T_CHECK(!mine || R == M - 1, "%s: a rank other than the sender reported it", kind);
    }
    T_CHECK(ps_epoch(ps) == 0, "%s: the store moved to epoch %" PRIu64 " after a failed exchange", kind,
            ps_epoch(ps));
    ps_close(ps);
    if (R == 0)
        printf("damaged %s sample: found, the exchange failed on every rank: %s\n", kind, detail);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    t_rank_ = R;
    const char *d = getenv("PSHUFFLE_TEST_DIRECT"), *m = getenv("PSHUFFLE_TEST_MSG");
    if (!d || atoi(d) != DIRECT || !m || !*m) {
        if (R == 0)
            fprintf(stderr, "mpi_paths: run with PSHUFFLE_TEST_DIRECT=%d and PSHUFFLE_TEST_MSG set\n", DIRECT);
        MPI_Finalize();
        return 2;
    }
    mixed(1.0);
    mixed(0.5);
    if (M > 1) {
        corrupt("direct");
        corrupt("packed");
    }
    return t_done();
}
