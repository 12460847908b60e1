/* Bad input, refused collectively: every rank must return an error (none
 * may hang or succeed), and the message must name the problem.
 * usage: mpi_bad MODE [DIR]
 *   seed | q | qrange | qrange1 | window | env | epoch | dup | state  (memory store)
 *   create DIR | reopen DIR                           (rank count change)
 *   corrupt DIR | enospc DIR                           (directory store)
 *   dupx | allocbegin | loneend                        (errors every rank returns)
 *   allocchunk | closemid | stall | badheader          (the job must abort with a message) */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include <dirent.h>

#include "tcommon.h"

static int M;

static ps_config_t config(void)
{
    ps_config_t c;
    ps_config_init(&c);
    c.seed = 77;
    c.q.q0 = 0.5;
    c.fsync = 1;
    return c;
}

/* Every rank got `want` (or PS_EPEER from a rank that got it), with the
 * expected words in the message on the rank that failed. */
static void expect(const char *what, int got, int want, const char *words)
{
    const char *d = ps_errdetail();
    printf("[rank %d] %s: %s: %s\n", t_rank_, what, ps_err_name(got), d);
    T_CHECK(got == want || (got == PS_EPEER && want != 0), "%s: got %s, expected %s", what, ps_err_name(got),
            ps_err_name(want));
    char full[800];
    snprintf(full, sizeof full, "%s: %s", ps_strerror(got), d);
    T_CHECK(!words || strstr(full, words), "%s: message '%s' lacks '%s'", what, full, words);
    int mine = got != 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    T_CHECK(all == M, "%s: only %d of %d ranks reported an error", what, all, M);
}

static void fill(ps_shuffler_t *ps, uint64_t n, size_t size)
{
    unsigned char buf[4096];
    for (uint64_t id = n * t_rank_; id < n * (t_rank_ + 1); id++) {
        t_fill(id, buf, size);
        T_OK(ps_add(ps, id, t_label(id, 4), buf, size));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &M);
    const char *mode = argc > 1 ? argv[1] : "", *dir = argc > 2 ? argv[2] : NULL;
    ps_config_t c = config();
    ps_shuffler_t *ps = NULL;
    int err;

    if (!strcmp(mode, "seed")) {
        c.seed += t_rank_ == M - 1;
        expect("seed", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EMISMATCH, "seed");
    } else if (!strcmp(mode, "q")) {
        if (t_rank_ == M - 1)
            c.q.q0 = 0.25;
        expect("q", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EMISMATCH, "Q schedule");
    } else if (!strcmp(mode, "qrange")) {
        c.q.q0 = 1.5;
        expect("Q=1.5", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EINVAL, "outside [0, 1]");
        c.q.q0 = -0.1;
        expect("Q=-0.1", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EINVAL, "outside [0, 1]");
    } else if (!strcmp(mode, "window")) {
        /* Out of range everywhere, then different on one rank; then the
         * environment variable, unparsable. */
        c.window_bytes = 100;
        expect("window 100", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EINVAL, "in-flight window 100");
        c = config();
        if (t_rank_ == M - 1)
            c.window_bytes = 1 << 20;
        expect("window differs", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EMISMATCH, "in-flight window");
        setenv("PSHUFFLE_WINDOW", "12Q", 1);
        c = config();
        expect("PSHUFFLE_WINDOW=12Q", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EINVAL, "PSHUFFLE_WINDOW=12Q");
        setenv("PSHUFFLE_WINDOW", "256K", 1);
        c = config();
        T_CHECK(c.window_bytes == 256 << 10, "PSHUFFLE_WINDOW=256K gave %" PRIu64, (uint64_t)c.window_bytes);
        unsetenv("PSHUFFLE_WINDOW");
    } else if (!strcmp(mode, "qrange1")) {
        if (t_rank_ == 1)
            c.q.q0 = 2.0;
        expect("Q=2 on rank 1", ps_open(&ps, MPI_COMM_WORLD, &c), t_rank_ == 1 ? PS_EINVAL : PS_EPEER, "outside [0, 1]");
    } else if (!strcmp(mode, "epoch")) {
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 16);
        T_OK(ps_start(ps));
        expect("epoch", ps_exchange_begin(ps, t_rank_ == 0 ? 1 : 0), PS_EEPOCH, "epoch");
        T_CHECK(ps_epoch(ps) == 0, "epoch moved");
        T_OK(ps_exchange(ps, 0)); /* still usable */
    } else if (!strcmp(mode, "dup")) {
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 16);
        if (t_rank_ == 0)
            T_OK(ps_add(ps, 3, 0, "x", 1));
        expect("duplicate id", ps_start(ps), t_rank_ == 0 ? PS_EDUP : PS_EPEER, "0x3");
    } else if (!strcmp(mode, "env")) {
        /* Every variable the library reads, with a value it must refuse
         * (on every rank, naming the variable) rather than replace by a
         * default. */
        static const char *const bad[][2] = {
            {"PSHUFFLE_TIMEOUT", "abc"},        {"PSHUFFLE_TIMEOUT", "0"},
            {"PSHUFFLE_TIMEOUT", "-5"},         {"PSHUFFLE_TIMEOUT", "10s"},
            {"PSHUFFLE_WINDOW", "12Q"},         {"PSHUFFLE_PROFILE", "yes"},
            {"PSHUFFLE_TEST_FAIL_ALLOC", "1"},  {"PSHUFFLE_TEST_FAIL_ALLOC", "x:begin"},
            {"PSHUFFLE_TEST_CORRUPT", "0:bad"}, {"PSHUFFLE_TEST_DIRECT", "0"},
            {"PSHUFFLE_TEST_MSG", "1.5"},       {"PSHUFFLE_TEST_ENOSPC_AFTER", "-1"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char words[128];
            snprintf(words, sizeof words, "%s=%s: expected", bad[i][0], bad[i][1]);
            setenv(bad[i][0], bad[i][1], 1);
            c = config();
            if (!strcmp(bad[i][0], "PSHUFFLE_WINDOW"))
                c.window_bytes = 1 << 20; /* refused even when the caller sets the window */
            expect(words, ps_open(&ps, MPI_COMM_WORLD, &c), PS_EINVAL, words);
            unsetenv(bad[i][0]);
        }
        /* Good values are taken. */
        setenv("PSHUFFLE_TIMEOUT", "2.5", 1);
        setenv("PSHUFFLE_PROFILE", "0", 1);
        c = config();
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        ps_close(ps);
        ps = NULL;
        unsetenv("PSHUFFLE_TIMEOUT");
        unsetenv("PSHUFFLE_PROFILE");
    } else if (!strcmp(mode, "state")) {
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 16);
        T_OK(ps_start(ps));
        err = ps_add(ps, 999, 0, "x", 1);
        T_CHECK(err == PS_ESTATE, "ps_add after start: %s", ps_err_name(err));
        expect("end without begin", ps_exchange_end(ps), PS_ESTATE, "without");
    } else if (!strcmp(mode, "create")) {
        c.store_dir = dir;
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 64);
        T_OK(ps_start(ps));
        T_OK(ps_exchange(ps, 0));
        T_OK(ps_exchange(ps, 1));
    } else if (!strcmp(mode, "reopen")) {
        /* Another rank count rewrites the store (mpi_restripe tests that),
         * but only once the store is known to be this job's: another seed
         * is refused first, and nothing is rewritten. */
        c.store_dir = dir;
        c.seed = 78;
        expect("reopen with another rank count and seed", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EMISMATCH, "seed 77");
        c.seed = 77;
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        uint64_t n = ps_size(ps), tot = 0;
        MPI_Allreduce(&n, &tot, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        T_CHECK(ps_resumed(ps) && ps_epoch(ps) == 2 && tot == 60, "reopen on %d ranks: resumed %d at epoch %" PRIu64
                ", %" PRIu64 " samples", M, ps_resumed(ps), ps_epoch(ps), tot);
    } else if (!strcmp(mode, "reseed")) {
        c.store_dir = dir;
        c.seed = 78;
        expect("reopen with another seed", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EMISMATCH, "seed 77");
        c.seed = 77;
        c.q.q0 = 0.4;
        expect("reopen with another Q", ps_open(&ps, MPI_COMM_WORLD, &c), PS_EMISMATCH, "Q schedule");
    } else if (!strcmp(mode, "corrupt")) {
        c.store_dir = dir;
        c.resume = 0;
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 64);
        T_OK(ps_start(ps));
        T_OK(ps_exchange(ps, 0));
        /* Rank 1 damages the first sample it will send in epoch 1. */
        if (t_rank_ == 1) {
            uint64_t *counts = malloc(M * sizeof *counts);
            for (int r = 0; r < M; r++)
                counts[r] = 20;
            ps_plan_t p;
            T_OK(ps_plan_compute(&p, c.seed, 1, 0.5, counts, M, 1));
            ps_sample_t s;
            T_OK(ps_info(ps, p.send_pos[0], &s));
            /* Its bytes are somewhere in one of rank 1's segment files:
             * found by content, one byte of them changed in place. */
            unsigned char want[64];
            T_OK(ps_read(ps, p.send_pos[0], want, sizeof want));
            int damaged = 0;
            char rdir[4200];
            snprintf(rdir, sizeof rdir, "%s/rank-00001", dir);
            DIR *dd = opendir(rdir);
            struct dirent *de;
            while (dd && !damaged && (de = readdir(dd))) {
                if (strncmp(de->d_name, "seg.", 4))
                    continue;
                char path[4600];
                snprintf(path, sizeof path, "%.4200s/%.256s", rdir, de->d_name);
                FILE *f = fopen(path, "r+b");
                static unsigned char seg[1 << 16];
                size_t got = f ? fread(seg, 1, sizeof seg, f) : 0;
                unsigned char *at = got ? memmem(seg, got, want, s.size) : NULL;
                if (at) {
                    fseek(f, (long)(at - seg) + 8, SEEK_SET);
                    fputc(0xff ^ at[8], f);
                    damaged = 1;
                }
                if (f)
                    fclose(f);
            }
            if (dd)
                closedir(dd);
            T_CHECK(damaged, "sample %#" PRIx64 " not found in %s", s.id, rdir);
            unsigned char buf[64];
            err = ps_read(ps, p.send_pos[0], buf, sizeof buf);
            T_CHECK(err == PS_ECORRUPT, "read of the damaged sample: %s", ps_err_name(err));
            ps_plan_free(&p);
            free(counts);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        expect("exchange with a corrupt sample", ps_exchange(ps, 1), t_rank_ == 1 ? PS_ECORRUPT : PS_EPEER,
               "checksum mismatch");
        T_CHECK(ps_epoch(ps) == 1, "epoch moved to %" PRIu64 " after a failed exchange", ps_epoch(ps));
    } else if (!strcmp(mode, "enospc")) {
        c.store_dir = dir;
        c.resume = 0;
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 40, 1000);
        T_OK(ps_start(ps));
        err = ps_exchange(ps, 0);
        expect("exchange on a full disk", err, err == -ENOSPC ? -ENOSPC : PS_EPEER, "No space left on device");
        T_CHECK(ps_epoch(ps) == 0, "epoch moved to %" PRIu64 " after a failed exchange", ps_epoch(ps));
        T_CHECK(ps_size(ps) == 40, "holds %" PRIu64 " after a failed exchange", ps_size(ps));
    } else if (!strcmp(mode, "dupx")) {
        /* Each rank's ids are unique, but rank 1 also has one of rank 0's. */
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 16);
        if (t_rank_ == 1)
            T_OK(ps_add(ps, 5, 0, "x", 1));
        err = ps_start(ps);
        expect("id on two ranks", err, err == PS_EDUP ? PS_EDUP : PS_EPEER, "0x5 is on ranks 0 and 1");
    } else if (!strcmp(mode, "allocbegin")) {
        /* PSHUFFLE_TEST_FAIL_ALLOC=1:begin: planning fails on rank 1 only. */
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 16);
        T_OK(ps_start(ps));
        err = ps_exchange_begin(ps, 0);
        expect("allocation failure on rank 1", err, t_rank_ == 1 ? -ENOMEM : PS_EPEER, "injected allocation failure");
        T_CHECK(ps_epoch(ps) == 0, "epoch moved");
        expect("end after the failed begin", ps_exchange_end(ps), PS_ESTATE, "without ps_exchange_begin");
    } else if (!strcmp(mode, "loneend")) {
        /* Rank 0 calls ps_exchange_end while the others begin. */
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 16);
        T_OK(ps_start(ps));
        err = t_rank_ == 0 ? ps_exchange_end(ps) : ps_exchange_begin(ps, 0);
        expect("lone ps_exchange_end", err, PS_ESTATE, "ranks called different functions");
        T_OK(ps_exchange(ps, 0)); /* still usable */
    } else if (!strcmp(mode, "allocchunk") || !strcmp(mode, "closemid") || !strcmp(mode, "stall") ||
               !strcmp(mode, "badheader")) {
        /* These end the job (MPI_Abort with a message); reaching the end is
         * the failure. */
        T_OK(ps_open(&ps, MPI_COMM_WORLD, &c));
        fill(ps, 20, 2000);
        T_OK(ps_start(ps));
        T_OK(ps_exchange_begin(ps, 0));
        if (!strcmp(mode, "closemid") && t_rank_ == 0) {
            ps_close(ps);
            ps = NULL;
        } else if (!strcmp(mode, "stall") && t_rank_ == 0) {
            /* Never comes to ps_exchange_end: the other ranks must end the
             * job. Stalled far longer than test_bad.sh waits for that (so a
             * job that is not aborted is told by its timeout), but only
             * while the launcher that started this rank lives: if the
             * test gives up and kills it, this rank goes too. */
            pid_t launcher = getppid();
            for (int s = 0; s < 3600 && getppid() == launcher; s++)
                sleep(1);
        } else {
            ps_exchange_end(ps);
        }
        fprintf(stderr, "[rank %d] %s: the job was not aborted\n", t_rank_, mode);
        t_fail_++;
    } else {
        fprintf(stderr, "unknown mode '%s'\n", mode);
        t_fail_++;
    }
    ps_close(ps);
    return t_done();
}
