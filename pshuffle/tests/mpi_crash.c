/* Runs E epochs on a directory store, resuming from it when it holds a
 * checkpoint; optionally SIGKILLs one rank at a protocol point. Writes the
 * final holdings of every rank to OUT (rank 0).
 * usage: mpi_crash --dir D --out FILE [--epochs E] [--q Q] [--n N]
 *                  [--crash RANK:EPOCH:POINT] */
#include <unistd.h>

#include "tcommon.h"

#define MAXSIZE 200

int main(int argc, char **argv)
{
    int M;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    const char *dir = NULL, *out = NULL;
    uint64_t epochs = 8, n = 40;
    double q = 0.3;
    t_crash_t crash = {.rank = -1};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--epochs"))
            epochs = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--n"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--q"))
            q = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--crash"))
            sscanf(argv[i + 1], "%d:%" SCNu64 ":%d", &crash.rank, &crash.epoch, &crash.point);
    }
    ps_config_t cfg;
    ps_config_init(&cfg);
    cfg.seed = 1234;
    cfg.q.q0 = q;
    cfg.store_dir = dir;
    cfg.window_bytes = 1024;
    if (crash.rank >= 0) {
        cfg.hook = t_crash_hook;
        cfg.hook_arg = &crash;
    }
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &cfg));
    unsigned char buf[MAXSIZE], want[MAXSIZE];
    if (!ps_resumed(ps)) {
        for (uint64_t id = n * t_rank_; id < n * (t_rank_ + 1); id++) {
            size_t len = t_size(id, MAXSIZE);
            t_fill(id, buf, len);
            T_OK(ps_add(ps, id, t_label(id, 10), buf, len));
        }
    } else if (t_rank_ == 0) {
        printf("resumed at epoch %" PRIu64 "\n", ps_epoch(ps));
    }
    T_OK(ps_start(ps));
    uint64_t *order = malloc(n * sizeof *order);
    for (uint64_t e = ps_epoch(ps); e < epochs; e++) {
        T_OK(ps_exchange_begin(ps, e));
        T_OK(ps_order(ps, order, ps_size(ps)));
        for (uint64_t i = 0; i < ps_size(ps); i++) {
            ps_sample_t s;
            T_OK(ps_info(ps, order[i], &s));
            T_OK(ps_read(ps, order[i], buf, sizeof buf));
            t_fill(s.id, want, t_size(s.id, MAXSIZE));
            T_CHECK(s.size == t_size(s.id, MAXSIZE) && !memcmp(buf, want, s.size), "sample %" PRIu64 " content", s.id);
            T_OK(ps_progress(ps, NULL));
        }
        T_OK(ps_exchange_end(ps));
    }
    /* Final holdings, one line per rank. */
    uint64_t cnt = ps_size(ps);
    T_CHECK(cnt == n, "holds %" PRIu64 " samples, started with %" PRIu64, cnt, n);
    uint64_t *ids = malloc(n * sizeof *ids), *all = malloc(n * M * sizeof *all);
    for (uint64_t i = 0; i < n; i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        ids[i] = s.id;
    }
    MPI_Gather(ids, (int)n, MPI_UINT64_T, all, (int)n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (t_rank_ == 0 && out) {
        FILE *f = fopen(out, "w");
        T_CHECK(f != NULL, "cannot write %s", out);
        for (int r = 0; f && r < M; r++) {
            fprintf(f, "rank %d epoch %" PRIu64 ":", r, ps_epoch(ps));
            for (uint64_t i = 0; i < n; i++)
                fprintf(f, " %" PRIu64, all[r * n + i]);
            fputc('\n', f);
        }
        if (f)
            fclose(f);
    }
    free(ids), free(all), free(order);
    ps_close(ps);
    return t_done();
}
