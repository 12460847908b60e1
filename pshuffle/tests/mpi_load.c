/* Loading the initial partition from shared storage: a list of files and a
 * packed dataset with its index; ranks read disjoint slices. Then a broken
 * index is refused on every rank.
 * usage: mpi_load SCRATCH_DIR */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tcommon.h"

#define N 37
#define MAXSIZE 100

static void put64(FILE *f, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    fwrite(b, 1, 8, f);
}

static void check_partition(ps_shuffler_t *ps, int M, const char *what)
{
    uint64_t n = ps_size(ps), lo = (uint64_t)N * t_rank_ / M, hi = (uint64_t)N * (t_rank_ + 1) / M;
    unsigned char buf[MAXSIZE], want[MAXSIZE];
    T_CHECK(n == hi - lo, "%s: rank holds %" PRIu64 ", slice is %" PRIu64, what, n, hi - lo);
    for (uint64_t i = 0; i < n && i < hi - lo; i++) {
        ps_sample_t s;
        T_OK(ps_info(ps, i, &s));
        T_OK(ps_read(ps, i, buf, sizeof buf));
        t_fill(s.id, want, t_size(s.id, MAXSIZE));
        T_CHECK(s.id == lo + i && s.size == t_size(s.id, MAXSIZE) && !memcmp(buf, want, s.size) &&
                s.label == t_label(s.id, 7), "%s: sample %" PRIu64 " wrong", what, lo + i);
    }
}

static ps_shuffler_t *open_mem(void)
{
    ps_config_t c;
    ps_config_init(&c);
    c.q.q0 = 0.5;
    ps_shuffler_t *ps;
    T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
    return ps;
}

int main(int argc, char **argv)
{
    int M;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    const char *dir = argc > 1 ? argv[1] : "/tmp/pshuffle-load";
    char path[4200], data[4200], index[4200], badidx[4200];
    static char names[N][4200];
    const char *paths[N];
    int32_t labels[N];
    snprintf(data, sizeof data, "%s/data.bin", dir);
    snprintf(index, sizeof index, "%s/index.bin", dir);
    snprintf(badidx, sizeof badidx, "%s/bad-index.bin", dir);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%s/f%03d.bin", dir, i);
        paths[i] = names[i];
        labels[i] = t_label((uint64_t)i, 7);
    }
    if (t_rank_ == 0) {
        unsigned char buf[MAXSIZE];
        mkdir(dir, 0755);
        FILE *d = fopen(data, "wb"), *x = fopen(index, "wb"), *b = fopen(badidx, "wb");
        fwrite("PSIDX001", 1, 8, x);
        put64(x, N);
        fwrite("PSIDX001", 1, 8, b);
        put64(b, N);
        uint64_t off = 0;
        for (int i = 0; i < N; i++) {
            size_t len = t_size((uint64_t)i, MAXSIZE);
            t_fill((uint64_t)i, buf, len);
            FILE *f = fopen(names[i], "wb");
            fwrite(buf, 1, len, f);
            fclose(f);
            fwrite(buf, 1, len, d);
            put64(x, off), put64(x, len), put64(x, (uint64_t)labels[i]);
            /* record 30 of the bad index points past the data */
            put64(b, i == 30 ? off + 100000 : off), put64(b, len), put64(b, (uint64_t)labels[i]);
            off += len;
        }
        fclose(d), fclose(x), fclose(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    ps_shuffler_t *ps = open_mem();
    T_OK(ps_load_files(ps, paths, N, labels));
    T_OK(ps_start(ps));
    check_partition(ps, M, "files");
    T_OK(ps_exchange(ps, 0));
    ps_close(ps);

    ps = open_mem();
    T_OK(ps_load_packed(ps, data, index));
    T_OK(ps_start(ps));
    check_partition(ps, M, "packed");
    ps_close(ps);

    /* The rank whose slice holds record 30 fails; every rank gets an error. */
    ps = open_mem();
    int err = ps_load_packed(ps, data, badidx);
    printf("[rank %d] bad index: %s: %s\n", t_rank_, ps_err_name(err), ps_errdetail());
    T_CHECK(err == PS_EFORMAT || err == PS_EPEER, "bad index: %s", ps_err_name(err));
    T_CHECK(strstr(ps_errdetail(), "record 30") != NULL, "message lacks the record: %s", ps_errdetail());
    ps_close(ps);

    /* A missing file in the list. */
    ps = open_mem();
    snprintf(path, sizeof path, "%s/missing.bin", dir);
    paths[N - 1] = path;
    err = ps_load_files(ps, paths, N, NULL);
    T_CHECK(err == -ENOENT || err == PS_EPEER, "missing file: %s", ps_err_name(err));
    T_CHECK(strstr(ps_errdetail(), "missing.bin") != NULL, "message lacks the file: %s", ps_errdetail());
    ps_close(ps);
    return t_done();
}
