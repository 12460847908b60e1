/* A directory store resumed on another number of ranks: every sample
 * exactly once, with its bytes and label, balanced counts, and exchanges
 * that go on from the resumed epoch.
 *
 * usage: mpi_restripe --dir D --n N --make [--epochs E]   (a fresh store of N samples, E exchanges)
 *        mpi_restripe --dir D --n N [--epoch E] [--crash POINT]
 *            (resume: expects epoch E, checks, one more exchange, checks again;
 *             --crash kills rank 0 at ps_point_t POINT of the rewrite) */
#include <unistd.h>

#include "tcommon.h"

#define MAXSIZE 300

/* Every id in 0..n-1 held exactly once over the ranks, with its content. */
static void check_holdings(ps_shuffler_t *ps, uint64_t n, int M, const char *when)
{
    unsigned char buf[MAXSIZE], want[MAXSIZE];
    uint64_t cnt = ps_size(ps);
    uint64_t *ids = malloc((cnt ? cnt : 1) * sizeof *ids);
    for (uint64_t i = 0; i < cnt; i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        T_OK(ps_read(ps, i, buf, sizeof buf));
        size_t len = t_size(s.id, MAXSIZE);
        t_fill(s.id, want, len);
        T_CHECK(s.size == len && !memcmp(buf, want, len) && s.label == t_label(s.id, 10),
                "%s: sample %" PRIu64 " content or label", when, s.id);
        ids[i] = s.id;
    }
    int c = (int)cnt, *counts = malloc((size_t)M * sizeof *counts), *displs = malloc((size_t)M * sizeof *displs);
    MPI_Allgather(&c, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0, lo = c, hi = c;
    for (int r = 0; r < M; r++) {
        displs[r] = total;
        total += counts[r];
        lo = counts[r] < lo ? counts[r] : lo;
        hi = counts[r] > hi ? counts[r] : hi;
    }
    uint64_t *all = malloc((total ? (size_t)total : 1) * sizeof *all);
    MPI_Allgatherv(ids, c, MPI_UINT64_T, all, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
    if (t_rank_ == 0) {
        unsigned char *seen = calloc(n, 1);
        uint64_t dup = 0, bad = 0, missing = 0;
        for (int i = 0; i < total; i++) {
            if (all[i] >= n)
                bad++;
            else if (seen[all[i]]++)
                dup++;
        }
        for (uint64_t id = 0; id < n; id++)
            missing += !seen[id];
        T_CHECK(!dup && !bad && !missing && (uint64_t)total == n,
                "%s: %d samples held, %" PRIu64 " expected; %" PRIu64 " duplicated, %" PRIu64 " missing, %" PRIu64
                " unknown", when, total, n, dup, missing, bad);
        T_CHECK(hi - lo <= 1, "%s: counts %d..%d not balanced", when, lo, hi);
        printf("%s: %d ranks hold %d samples (%d..%d a rank), each once\n", when, M, total, lo, hi);
        free(seen);
    }
    free(ids), free(counts), free(displs), free(all);
}

static int crash_point;
static void crash_hook(void *arg, int point, uint64_t epoch)
{
    (void)arg;
    if (t_rank_ == 0 && point == crash_point) {
        fprintf(stderr, "[rank 0] crashing at point %d (epoch %" PRIu64 ")\n", point, epoch);
        fflush(stderr);
        raise(SIGKILL);
    }
}

int main(int argc, char **argv)
{
    int provided, M;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    const char *dir = NULL;
    uint64_t n = 100, epochs = 2, expect = UINT64_MAX;
    int make = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--make"))
            make = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--dir"))
            dir = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--n"))
            n = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(argv[i], "--epochs"))
            epochs = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(argv[i], "--epoch"))
            expect = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(argv[i], "--crash"))
            crash_point = atoi(argv[++i]);
    }
    if (!dir) {
        fprintf(stderr, "usage: mpi_restripe --dir D --n N [--make] [--epochs E] [--epoch E] [--crash POINT]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = 99;
    cfg.q.q0 = 0.5;
    cfg.store_dir = dir;
    cfg.window_bytes = 4096;
    cfg.resume = !make;
    if (crash_point) {
        cfg.hook = crash_hook;
    }
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &cfg));
    T_CHECK(ps_resumed(ps) == !make, "resumed %d, expected %d", ps_resumed(ps), !make);
    if (make) {
        unsigned char buf[MAXSIZE];
        for (uint64_t id = n * (uint64_t)t_rank_ / (uint64_t)M; id < n * (uint64_t)(t_rank_ + 1) / (uint64_t)M; id++) {
            size_t len = t_size(id, MAXSIZE);
            t_fill(id, buf, len);
            T_OK(ps_add(ps, id, t_label(id, 10), buf, len));
        }
    }
    T_OK(ps_start(ps));
    char when[96];
    if (make) {
        for (uint64_t e = 0; e < epochs; e++)
            T_OK(ps_exchange(ps, e));
        snprintf(when, sizeof when, "made, epoch %" PRIu64, ps_epoch(ps));
        check_holdings(ps, n, M, when);
    } else {
        T_CHECK(expect == UINT64_MAX || ps_epoch(ps) == expect, "resumed at epoch %" PRIu64 ", expected %" PRIu64,
                ps_epoch(ps), expect);
        snprintf(when, sizeof when, "resumed at epoch %" PRIu64, ps_epoch(ps));
        check_holdings(ps, n, M, when);
        uint64_t e = ps_epoch(ps);
        T_OK(ps_exchange(ps, e));
        snprintf(when, sizeof when, "after the exchange of epoch %" PRIu64, e);
        check_holdings(ps, n, M, when);
    }
    ps_close(ps);
    return t_done();
}
