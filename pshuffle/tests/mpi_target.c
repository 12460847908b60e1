/* ps_exchange_begin_to(): one exchange reaches the seeded partition of any
 * epoch, forward or back, from any holdings (uneven, an empty rank), on
 * both stores; every sample intact; going to the partition already held
 * moves nothing. ps_agree_error(): one rank's error reaches every rank with
 * the same line. Bad use refused on every rank.
 * usage: mpi_target [DIR] */
#include <unistd.h>

#include "tcommon.h"

static int M;

/* Rank r starts with a contiguous, uneven share of ids 0..N-1: rank 0
 * holds none, rank 1 three times as many as the others. */
static uint64_t weight_below(int r)
{
    /* rank 0 weighs 0, rank 1 weighs 3, the others 1 */
    return M == 1 ? (uint64_t)r : r <= 0 ? 0 : r == 1 ? 0 : 3 + (uint64_t)(r - 2);
}

static void fill(ps_shuffler_t *ps, uint64_t N)
{
    uint64_t W = weight_below(M);
    uint64_t lo = N * weight_below(t_rank_) / W, hi = N * weight_below(t_rank_ + 1) / W;
    unsigned char buf[600];
    for (uint64_t id = lo; id < hi; id++) {
        size_t len = t_size(id, sizeof buf);
        t_fill(id, buf, len);
        T_OK(ps_add(ps, id, t_label(id, 7), buf, len));
    }
}

/* This rank holds exactly the ids whose position in the epoch's
 * permutation is r mod M, each with its content. */
static void check_holdings(ps_shuffler_t *ps, uint64_t N, uint64_t part, int shuffle, const char *what)
{
    uint64_t *perm = malloc((N ? N : 1) * sizeof *perm);
    ps_partition_perm(perm, N, 77, part, shuffle);
    uint64_t want = 0;
    unsigned char *mine = calloc(N ? N : 1, 1);
    for (uint64_t k = (uint64_t)t_rank_; k < N; k += (uint64_t)M) {
        mine[perm[k]] = 1;
        want++;
    }
    T_CHECK(ps_size(ps) == want, "%s: holds %" PRIu64 " samples, the partition gives %" PRIu64, what, ps_size(ps),
            want);
    unsigned char buf[600], ref[600];
    for (uint64_t i = 0; i < ps_size(ps); i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        T_CHECK(s.id < N && mine[s.id], "%s: holds id %" PRIu64 ", not in its part", what, s.id);
        size_t len = t_size(s.id, sizeof buf);
        T_CHECK(s.size == len && s.label == t_label(s.id, 7), "%s: id %" PRIu64 " size/label wrong", what, s.id);
        T_OK(ps_read(ps, i, buf, sizeof buf));
        t_fill(s.id, ref, len);
        T_CHECK(!memcmp(buf, ref, len), "%s: id %" PRIu64 " content wrong", what, s.id);
    }
    free(mine);
    free(perm);
}

static void go(ps_shuffler_t *ps, uint64_t part, int shuffle)
{
    T_OK(ps_exchange_begin_to(ps, ps_epoch(ps), part, shuffle));
    T_OK(ps_exchange_end(ps));
}

static void run(const char *dir, uint64_t N)
{
    ps_config_t c;
    ps_config_init(&c);
    c.seed = 77;
    c.store_dir = dir;
    c.fsync = 0;
    c.resume = 0;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
    fill(ps, N);
    T_OK(ps_start(ps));
    char what[64];
    /* Forward, back, the same again, far ahead, and unshuffled (strided). */
    static const uint64_t parts[] = {0, 1, 2, 1, 0, 0, 1000};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        go(ps, parts[i], 1);
        snprintf(what, sizeof what, "%s N=%" PRIu64 " to epoch %" PRIu64, dir ? "dir" : "mem", N, parts[i]);
        check_holdings(ps, N, parts[i], 1, what);
        ps_stats_t st;
        T_OK(ps_stats(ps, &st));
        uint64_t sent = st.samples_sent, all = 0;
        MPI_Allreduce(&sent, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (i == 5)
            T_CHECK(all == 0, "%s: the partition already held, yet %" PRIu64 " samples moved", what, all);
        else if (M > 1 && N >= 8)
            T_CHECK(all > 0, "%s: nothing moved", what);
    }
    /* Explicit destinations: everything to the last rank, then back. */
    int32_t *dest = malloc((ps_size(ps) ? ps_size(ps) : 1) * sizeof *dest);
    for (uint64_t i = 0; i < ps_size(ps); i++)
        dest[i] = M - 1;
    T_OK(ps_exchange_begin_dest(ps, ps_epoch(ps), dest));
    T_OK(ps_exchange_end(ps));
    free(dest);
    T_CHECK(ps_size(ps) == (t_rank_ == M - 1 ? N : 0), "all to the last rank: %" PRIu64 " held", ps_size(ps));
    T_CHECK(ps_total(ps) == N, "total %" PRIu64 " after an explicit deal", ps_total(ps));
    go(ps, 3, 0);
    check_holdings(ps, N, 3, 0, "unshuffled");
    ps_sample_t s;
    for (uint64_t i = 0; i < ps_size(ps); i++) {
        T_OK(ps_info(ps, i, &s));
        T_CHECK(s.id % (uint64_t)M == (uint64_t)t_rank_, "unshuffled: id %" PRIu64 " on rank %d", s.id, t_rank_);
    }
    /* The Q schedule's exchanges still work after (and balance as usual). */
    T_OK(ps_exchange(ps, ps_epoch(ps)));
    ps_close(ps);
    if (dir && t_rank_ == 0) {
        ps_verify_t v;
        int err = ps_verify_dir(dir, &v);
        T_CHECK(err == 0 && v.samples == N && v.duplicates == 0 && v.missing == 0, "verify: %s (%s)",
                ps_strerror(err), v.first_problem);
    }
}

/* The same error on every rank; or PS_EPEER / own code. */
static void expect_all(int got, const char *words, const char *what)
{
    char mine[480], first[480];
    snprintf(mine, sizeof mine, "%s", ps_errdetail());
    T_CHECK(got != 0, "%s: no error", what);
    T_CHECK(strstr(mine, words) != NULL, "%s: message '%s' lacks '%s'", what, mine, words);
    int bad = got != 0, all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    T_CHECK(all == M, "%s: %d of %d ranks failed", what, all, M);
    memcpy(first, mine, sizeof first);
    MPI_Bcast(first, sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!strcmp(what, "agree"))
        T_CHECK(!strcmp(first, mine), "%s: rank %d says '%s', rank 0 '%s'", what, t_rank_, mine, first);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    const char *dir = argc > 1 ? argv[1] : NULL;
    static const uint64_t sizes[] = {3, 10, 97};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        run(NULL, sizes[i]);
    if (dir)
        run(dir, 97);

    ps_config_t c;
    ps_config_init(&c);
    c.seed = 77;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
    fill(ps, 40);
    T_OK(ps_start(ps));
    /* No error anywhere: nothing happens. */
    T_OK(ps_agree_error(ps, 4, t_rank_ == 0 ? "" : NULL));
    /* The last rank fails: every rank gets its line. */
    char msg[64];
    snprintf(msg, sizeof msg, "bad thing on rank %d", t_rank_);
    expect_all(ps_agree_error(ps, 4, t_rank_ == M - 1 ? msg : NULL), "bad thing", "agree");
    char want[80];
    snprintf(want, sizeof want, "rank %d: bad thing on rank %d", M - 1, M - 1);
    T_CHECK(!strcmp(ps_errdetail(), want), "agree: '%s', expected '%s'", ps_errdetail(), want);
    /* Every rank fails: all show the lowest rank's line. */
    expect_all(ps_agree_error(ps, 4, msg), "bad thing on rank 0", "agree");
    T_CHECK(!strcmp(ps_errdetail(), "rank 0: bad thing on rank 0"), "agree: '%s'", ps_errdetail());
    /* Different epochs in the agreement: refused on every rank. */
    if (M > 1)
        expect_all(ps_agree_error(ps, (uint64_t)t_rank_, NULL), "different epochs", "agree epochs");
    /* ps_ids: the canonical order. */
    uint64_t ids[64];
    T_OK(ps_ids(ps, ids, ps_size(ps)));
    for (uint64_t i = 0; i < ps_size(ps); i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        T_CHECK(ids[i] == s.id, "ps_ids[%" PRIu64 "] = %" PRIu64 ", ps_info says %" PRIu64, i, ids[i], s.id);
    }
    T_CHECK(ps_ids(ps, ids, ps_size(ps) + 1) == PS_EINVAL, "ps_ids with a wrong count accepted");
    /* Different target epochs, and an id outside 0..N-1: refused on every
     * rank, nothing moves, the shuffler stays usable. */
    if (M > 1)
        expect_all(ps_exchange_begin_to(ps, 0, t_rank_ == 0 ? 5 : 6, 1), "different epochs", "target epochs");
    T_OK(ps_exchange_begin_to(ps, 0, 5, 1));
    T_OK(ps_exchange_end(ps));
    ps_close(ps);
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
    fill(ps, 40);
    if (t_rank_ == M - 1)
        T_OK(ps_add(ps, 1000, 0, "x", 1));
    T_OK(ps_start(ps));
    expect_all(ps_exchange_begin_to(ps, 0, 0, 1), "ids 0..N-1", "sparse ids");
    T_CHECK(ps_epoch(ps) == 0, "epoch moved after a refused exchange");
    {
        int32_t bad[64];
        for (int i = 0; i < 64; i++)
            bad[i] = t_rank_ == M - 1 ? M : 0; /* the last rank holds samples */
        expect_all(ps_exchange_begin_dest(ps, 0, bad), "outside 0..", "bad destination");
    }
    T_OK(ps_exchange(ps, 0));
    ps_close(ps);
    return t_done();
}
