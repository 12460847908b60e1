/* The exchange in rounds under a small in-flight window, under mpirun:
 * - data integrity with uneven counts (one rank empty), empty samples and
 *   samples several times larger than the window, on both stores: every
 *   sample arrives intact, none lost or doubled;
 * - the window bound: peak_bytes <= bytes held + bytes received + window,
 *   and not less than the samples held at once;
 * - overlap: with the progress thread, the whole transfer completes with no
 *   ps_progress() call that moves data, and the statistics say so; without
 *   a thread and without calls, they say nothing moved before the end.
 *
 * usage: mpi_window [--dir DIR] */
#include <unistd.h>

#include "tcommon.h"

static int M, R, have_thread;
static const char *dir;
#define WINDOW 4096
#define MAXSIZE (3 * WINDOW)

static size_t size_of(uint64_t id) { return id % 5 == 0 ? 0 : t_size(id, MAXSIZE); }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t init_count(int r, uint64_t n) { return M == 1 ? n : r == 0 ? 3 * n : r == 1 ? 0 : n + (uint64_t)r; }

static ps_shuffler_t *open_fill(double q, uint64_t n, uint64_t window, int thread, const char *store, uint64_t *N)
{
    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = 11;
    cfg.q.q0 = q;
    cfg.window_bytes = window;
    cfg.store_dir = store;
    cfg.fsync = 0;
    cfg.resume = 0;
    cfg.progress_thread = thread;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &cfg));
    uint64_t lo = 0;
    *N = 0;
    for (int r = 0; r < M; r++) {
        if (r < R)
            lo += init_count(r, n);
        *N += init_count(r, n);
    }
    unsigned char *buf = malloc(MAXSIZE + 1);
    for (uint64_t id = lo; id < lo + init_count(R, n); id++) {
        size_t len = size_of(id);
        t_fill(id, buf, len);
        T_OK(ps_add(ps, id, t_label(id, 7), buf, len));
    }
    free(buf);
    T_OK(ps_start(ps));
    return ps;
}

/* Every held sample intact; the union over ranks is 0..N-1 exactly.
 * Returns the payload bytes held. */
static uint64_t check_holdings(ps_shuffler_t *ps, uint64_t N, const char *what)
{
    uint64_t n = ps_size(ps), bytes = 0;
    unsigned char *buf = malloc(MAXSIZE + 1), *want = malloc(MAXSIZE + 1);
    uint64_t *ids = malloc((n + 1) * sizeof *ids), bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        T_OK(ps_read(ps, i, buf, MAXSIZE));
        size_t len = size_of(s.id);
        t_fill(s.id, want, len);
        bad += s.size != len || memcmp(buf, want, len) || s.label != t_label(s.id, 7);
        ids[i] = s.id;
        bytes += s.size;
    }
    T_CHECK(bad == 0, "%s: %" PRIu64 " samples arrived damaged", what, bad);
    int cnt = (int)n, *rc = malloc(M * sizeof *rc), *rd = malloc(M * sizeof *rd);
    MPI_Allgather(&cnt, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
    uint64_t tot = 0;
    for (int r = 0; r < M; r++)
        rd[r] = (int)tot, tot += (uint64_t)rc[r];
    T_CHECK(tot == N, "%s: %" PRIu64 " samples over the ranks, %" PRIu64 " expected", what, tot, N);
    uint64_t *all = malloc((tot + 1) * sizeof *all);
    MPI_Allgatherv(ids, cnt, MPI_UINT64_T, all, rc, rd, MPI_UINT64_T, MPI_COMM_WORLD);
    qsort(all, tot, sizeof *all, cmp_u64);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < tot; i++)
        wrong += all[i] != i;
    T_CHECK(wrong == 0, "%s: the union differs from the original set at %" PRIu64 " places", what, wrong);
    free(buf), free(want), free(ids), free(rc), free(rd), free(all);
    return bytes;
}

static void integrity(double q, const char *store)
{
    uint64_t N;
    char what[160];
    ps_shuffler_t *ps = open_fill(q, 30, WINDOW, 0, store, &N);
    uint64_t held = check_holdings(ps, N, "start");
    for (uint64_t e = 0; e < 3; e++) {
        snprintf(what, sizeof what, "%s store, Q=%g, epoch %" PRIu64, store ? "directory" : "memory", q, e);
        T_OK(ps_exchange(ps, e));
        ps_stats_t st;
        ps_stats(ps, &st);
        uint64_t now = check_holdings(ps, N, what);
        T_CHECK(now == held - st.bytes_sent + st.bytes_recv, "%s: %" PRIu64 " bytes held, %" PRIu64 " expected", what,
                now, held - st.bytes_sent + st.bytes_recv);
        /* The bound: what was held, what arrived, and at most the window. */
        T_CHECK(st.peak_bytes <= held + st.bytes_recv + WINDOW,
                "%s: peak_bytes %" PRIu64 " > held %" PRIu64 " + received %" PRIu64 " + window %d", what,
                st.peak_bytes, held, st.bytes_recv, WINDOW);
        T_CHECK(st.peak_bytes >= held + st.bytes_recv, "%s: peak_bytes %" PRIu64 " < held + received %" PRIu64,
                what, st.peak_bytes, held + st.bytes_recv);
        /* Streams longer than the window: several rounds, and samples
         * larger than a round's share cut across rounds. */
        uint64_t mx = st.rounds;
        MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        T_CHECK(mx == st.rounds, "%s: %" PRIu64 " rounds here, %" PRIu64 " on another rank", what, st.rounds, mx);
        if (q == 1 && M > 1)
            T_CHECK(st.rounds >= 3, "%s: only %" PRIu64 " rounds for streams larger than the window", what,
                    st.rounds);
        held = now;
    }
    ps_close(ps);
    if (R == 0)
        printf("%s store, Q=%g: 3 exchanges intact within the window\n", store ? "directory" : "memory", q);
}

static void overlap(int thread)
{
    uint64_t N;
    ps_shuffler_t *ps = open_fill(1.0, 100, 16384, thread, NULL, &N);
    T_OK(ps_exchange_begin(ps, 0));
    int done = 0;
    if (thread) {
        /* With a thread, ps_progress() only reports: the thread moves all. */
        for (int i = 0; i < 30000 && !done; i++) {
            T_OK(ps_progress(ps, &done));
            if (!done)
                usleep(1000);
        }
        T_CHECK(done, "the progress thread did not finish the exchange within 30 s");
    } else {
        usleep(100000);
    }
    T_OK(ps_exchange_end(ps));
    ps_stats_t st;
    ps_stats(ps, &st);
    check_holdings(ps, N, "overlap");
    if (thread) {
        T_CHECK(st.bytes_recv == 0 || st.bytes_recv_overlapped == st.bytes_recv,
                "thread: %" PRIu64 " of %" PRIu64 " bytes received before ps_exchange_end", st.bytes_recv_overlapped,
                st.bytes_recv);
        T_CHECK(st.bytes_recv == 0 || st.overlap_ns > 0, "thread: overlap_ns is 0 after a full overlap");
        T_CHECK(st.rounds > 1, "thread: %" PRIu64 " rounds (the window should cut the exchange)", st.rounds);
    } else {
        T_CHECK(st.bytes_recv_overlapped == 0 && st.overlap_ns == 0,
                "no thread, no ps_progress: %" PRIu64 " bytes and %" PRIu64 " ns reported as overlapped",
                st.bytes_recv_overlapped, st.overlap_ns);
    }
    uint64_t got = st.bytes_recv, any;
    MPI_Allreduce(&got, &any, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    T_CHECK(M == 1 || any > 0, "nothing moved at Q=1");
    ps_close(ps);
    if (R == 0)
        printf("overlap %s: %s\n", thread ? "with the progress thread" : "without thread or calls",
               thread ? "everything received before ps_exchange_end" : "nothing reported as overlapped");
}

int main(int argc, char **argv)
{
    int got;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got);
    have_thread = got >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    t_rank_ = R;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--dir"))
            dir = argv[++i];
    integrity(1.0, NULL);
    integrity(0.5, NULL);
    if (dir) {
        integrity(1.0, dir);
        integrity(0.5, dir);
    }
    overlap(0);
    if (have_thread)
        overlap(1);
    else if (R == 0)
        printf("skip: overlap with a thread (this MPI does not provide MPI_THREAD_MULTIPLE)\n");
    return t_done();
}
