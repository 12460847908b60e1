/* Directory store formats without MPI: sample files, manifests and the
 * offline verifier, on stores built here and then damaged on purpose.
 * usage: unit_store SCRATCH_DIR */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../../tests/unit/check.h"

static char root[4096];

static void rmrf(const char *p)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0)
        fprintf(stderr, "rm failed\n");
}

/* Rank directory r of the store at `at`, created if missing. */
static ps__dir_t open_rank(const char *at, int r)
{
    ps__dir_t d;
    int err = ps__dir_open(&d, at, r, PS__DIR_CREATE | PS__DIR_PRIVATE);
    if (err)
        fprintf(stderr, "open_rank %s %d: %s\n", at, r, ps_errdetail());
    CHECK_EQ_INT(err, 0);
    return d;
}

/* Two ranks, three samples each, epoch `e`. */
static void build(uint64_t e)
{
    rmrf(root);
    for (int r = 0; r < 2; r++) {
        ps__dir_t rd = open_rank(root, r);
        ps__entry_t ent[3];
        for (int i = 0; i < 3; i++) {
            char data[64];
            uint64_t id = (uint64_t)r * 10 + (uint64_t)i;
            int len = snprintf(data, sizeof data, "sample %d of rank %d", i, r);
            ent[i] = (ps__entry_t){.id = id, .label = i, .size = (uint64_t)len, .hash = ps__hash(data, (size_t)len)};
            CHECK_EQ_INT(ps__sample_write(&rd, &ent[i], data, 0), 0);
        }
        ps__manifest_t m = {.rank = r, .nranks = 2, .epoch = e, .seed = 9, .params = 1, .count = 3, .ent = ent};
        CHECK_EQ_INT(ps__manifest_write(&rd, &m, 1), 0);
        ps__dir_close(&rd);
    }
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

/* A manifest of 1 M entries (negative labels, large sizes) reads back
 * intact in under a second: parsing is linear in its length. */
static void test_big_manifest(void)
{
    enum { N = 1000000 };
    char rdp[4200];
    ps__entry_t *ent = malloc(N * sizeof *ent);
    for (uint64_t i = 0; i < N; i++)
        ent[i] = (ps__entry_t){.id = 3 * i + 1, .label = (int32_t)(i % 7) - 3, .size = (i * 7919) % PS_MAX_SAMPLE,
                               .hash = i * UINT64_C(0x9e3779b97f4a7c15)};
    ent[5].label = INT32_MIN;
    ent[6].label = INT32_MAX;
    snprintf(rdp, sizeof rdp, "%s-big", root);
    rmrf(rdp);
    ps__dir_t rd = open_rank(rdp, 0);
    ps__manifest_t m = {.rank = 0, .nranks = 1, .epoch = 4, .seed = 1, .params = 2, .count = N, .ent = ent};
    CHECK_EQ_INT(ps__manifest_write(&rd, &m, 0), 0);
    ps__manifest_t r;
    /* CPU time, so that other work on a shared machine does not count. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    CHECK_EQ_INT(ps__manifest_read(&rd, 4, &r), 0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
    const double limit = 5.0; /* instrumented build */
#else
    const double limit = 1.0;
#endif
    printf("1 M-entry manifest read in %.3f s of CPU time (limit %.1f s)\n", s, limit);
    CHECK(s < limit);
    CHECK_EQ_U64(r.count, N);
    int same = 1;
    for (uint64_t i = 0; i < N && r.ent; i++)
        same &= r.ent[i].id == ent[i].id && r.ent[i].label == ent[i].label && r.ent[i].size == ent[i].size &&
                r.ent[i].hash == ent[i].hash;
    CHECK(same);
    ps__manifest_free(&r);
    free(ent);
    ps__dir_close(&rd);
    if (!getenv("PS_KEEP_BIG"))
        rmrf(rdp);
}

static void put_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK_EQ_INT((int)write(fd, text, strlen(text)), (int)strlen(text));
        close(fd);
    }
}

static int file_is(const char *path, const char *text)
{
    char buf[256] = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n == (ssize_t)strlen(text) && !memcmp(buf, text, (size_t)n);
}

/* Links planted in a rank directory under the names the store writes
 * (its temporary files) and reads (sample files) are never followed: the
 * file they point to keeps its contents, and a sample that is a link or a
 * FIFO is refused at once instead of read or waited on. */
static void test_planted_links(void)
{
    char victim[4300], link[4400], store[4200];
    snprintf(store, sizeof store, "%s-links", root);
    snprintf(victim, sizeof victim, "%s-victim", root);
    rmrf(store);
    put_file(victim, "victim\n", 0600);
    ps__dir_t d = open_rank(store, 0);
    const char *tmps[] = {".tmp.manifest.0000000003", ".tmp.0000000000000007.s"};
    for (int i = 0; i < 2; i++) {
        snprintf(link, sizeof link, "%s/%s", d.path, tmps[i]);
        CHECK_EQ_INT(symlink(victim, link), 0);
    }
    ps__entry_t e = {.id = 7, .label = 1, .size = 5, .hash = ps__hash("hello", 5)};
    CHECK_EQ_INT(ps__sample_write(&d, &e, "hello", 0), 0);
    ps__manifest_t m = {.rank = 0, .nranks = 1, .epoch = 3, .seed = 1, .params = 1, .count = 1, .ent = &e};
    CHECK_EQ_INT(ps__manifest_write(&d, &m, 0), 0);
    CHECK(file_is(victim, "victim\n"));
    struct stat st;
    snprintf(link, sizeof link, "%s/manifest.0000000003", d.path);
    CHECK(lstat(link, &st) == 0 && S_ISREG(st.st_mode));
    CHECK_EQ_INT((int)(st.st_mode & 0777), 0600);

    /* The sample file itself replaced by a link to the victim. */
    snprintf(link, sizeof link, "%s/0000000000000007.s", d.path);
    CHECK_EQ_INT(unlink(link), 0);
    CHECK_EQ_INT(symlink(victim, link), 0);
    char buf[16];
    CHECK_EQ_INT(ps__sample_read(&d, &e, buf, sizeof buf), PS_ECORRUPT);
    CHECK(strstr(ps_errdetail(), "symbolic link") != NULL);
    ps_verify_t v;
    CHECK_EQ_INT(ps_verify_dir(store, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 1);
    /* A FIFO in its place: refused without waiting for a writer (alarm
     * ends the test if anything blocks). */
    CHECK_EQ_INT(unlink(link), 0);
    CHECK_EQ_INT(mkfifo(link, 0600), 0);
    alarm(20);
    CHECK_EQ_INT(ps__sample_read(&d, &e, buf, sizeof buf), PS_ECORRUPT);
    CHECK(strstr(ps_errdetail(), "not a regular file") != NULL);
    CHECK_EQ_INT(ps_verify_dir(store, &v), PS_ECORRUPT);
    CHECK(strstr(v.first_problem, "not a regular file") != NULL);
    /* A FIFO as the manifest. */
    snprintf(link, sizeof link, "%s/manifest.0000000003", d.path);
    CHECK_EQ_INT(unlink(link), 0);
    CHECK_EQ_INT(mkfifo(link, 0600), 0);
    CHECK_EQ_INT(ps__manifest_read(&d, 3, &m), PS_ECORRUPT);
    CHECK_EQ_INT(ps_verify_dir(store, &v), PS_ECORRUPT);
    alarm(0);
    ps__dir_close(&d);
    rmrf(store);
    unlink(victim);
}

/* New directories are private (0700); existing ones another user could
 * change are refused with a message naming them; a rank directory that is
 * a symbolic link is refused. */
static void test_private_dirs(void)
{
    char store[4200], rank0[4300], other[4300];
    snprintf(store, sizeof store, "%s-private/a/store", root);
    snprintf(rank0, sizeof rank0, "%s/rank-00000", store);
    snprintf(other, sizeof other, "%s-other", root);
    snprintf(rank0, sizeof rank0, "%s/rank-00000", store);
    {
        char top[4200];
        snprintf(top, sizeof top, "%s-private", root);
        rmrf(top);
    }
    rmrf(other);
    mode_t old = umask(0);
    ps__dir_t d;
    CHECK_EQ_INT(ps__dir_open(&d, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), 0);
    ps__dir_close(&d);
    umask(old);
    struct stat st;
    CHECK(stat(store, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(stat(rank0, &st) == 0 && (st.st_mode & 0777) == 0700);

    CHECK_EQ_INT(chmod(rank0, 0777), 0);
    CHECK_EQ_INT(ps__dir_open(&d, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), -EPERM);
    CHECK(strstr(ps_errdetail(), rank0) && strstr(ps_errdetail(), "writable by group or others (mode 0777)"));
    CHECK(strchr(ps_errdetail(), '\n') == NULL);
    CHECK_EQ_INT(chmod(rank0, 0700), 0);
    CHECK_EQ_INT(chmod(store, 0770), 0);
    CHECK_EQ_INT(ps__dir_open(&d, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), -EPERM);
    CHECK(strstr(ps_errdetail(), store) && strstr(ps_errdetail(), "writable by group or others"));
    CHECK_EQ_INT(chmod(store, 0700), 0);
    /* Verifying another user's store reads it without these checks. */
    CHECK_EQ_INT(chmod(rank0, 0777), 0);
    CHECK_EQ_INT(ps__dir_open(&d, store, 0, 0), 0);
    ps__dir_close(&d);
    CHECK_EQ_INT(chmod(rank0, 0700), 0);

    /* Owned by another user: only root can make one here. */
    struct passwd *nobody = getpwnam("nobody");
    if (geteuid() == 0 && nobody) {
        CHECK_EQ_INT(chown(rank0, nobody->pw_uid, nobody->pw_gid), 0);
        CHECK_EQ_INT(ps__dir_open(&d, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), -EPERM);
        CHECK(strstr(ps_errdetail(), rank0) && strstr(ps_errdetail(), "is owned by uid"));
        CHECK_EQ_INT(chown(rank0, 0, 0), 0);
    } else {
        printf("SKIP: directory owned by another user (needs root)\n");
    }

    /* rank-00000 a symbolic link to a directory of the user's own. */
    rmrf(rank0);
    CHECK_EQ_INT(mkdir(other, 0700), 0);
    CHECK_EQ_INT(symlink(other, rank0), 0);
    CHECK_EQ_INT(ps__dir_open(&d, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), -ELOOP);
    CHECK(strstr(ps_errdetail(), rank0) && strstr(ps_errdetail(), "symbolic link"));
    rmrf(other);
}

/* The store lock: a second holder of a rank directory is refused with the
 * first one's pid and host, and gets it once the first closes. */
static void test_lock(void)
{
    char store[4200], want[200], host[128] = "";
    snprintf(store, sizeof store, "%s-lock", root);
    rmrf(store);
    ps__dir_t a, b;
    CHECK_EQ_INT(ps__dir_open(&a, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), 0);
    CHECK_EQ_INT(ps__dir_lock(&a), 0);
    CHECK_EQ_INT(ps__dir_open(&b, store, 0, PS__DIR_CREATE | PS__DIR_PRIVATE), 0);
    CHECK_EQ_INT(ps__dir_lock(&b), -EBUSY);
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "pid %ld on host %s holds the lock rank-00000/lock", (long)getpid(), host);
    printf("second holder: %s\n", ps_errdetail());
    CHECK(strstr(ps_errdetail(), want) != NULL);
    CHECK(strstr(ps_errdetail(), "in use by another job") != NULL);
    ps__dir_close(&a);
    CHECK_EQ_INT(ps__dir_lock(&b), 0);
    ps__dir_close(&b);
    rmrf(store);
}

int main(int argc, char **argv)
{
    snprintf(root, sizeof root, "%s", argc > 1 ? argv[1] : "/tmp/pshuffle-unit-store");
    ps_verify_t v;
    char rdp[4200], path[4300];
    ps__dir_t rd;

    test_big_manifest();
    test_planted_links();
    test_private_dirs();
    test_lock();
    build(0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), 0);
    CHECK_EQ_INT(v.nranks, 2);
    CHECK_EQ_U64(v.samples, 6);
    CHECK_EQ_U64(v.duplicates + v.missing + v.bad_checksum + v.orphans, 0);

    /* Manifest round trip. */
    ps__manifest_t m;
    rd = open_rank(root, 1);
    ps__manifest_path(path, sizeof path, rd.path, 0);
    CHECK_EQ_INT(ps__manifest_read(&rd, 0, &m), 0);
    CHECK_EQ_INT(m.rank, 1);
    CHECK_EQ_U64(m.count, 3);
    CHECK_EQ_U64(m.ent[2].id, 12);
    CHECK_EQ_INT(m.ent[2].label, 2);
    ps__manifest_free(&m);

    /* An edited manifest fails its checksum. */
    flip_byte(path, 30);
    CHECK_EQ_INT(ps__manifest_read(&rd, 0, &m), PS_ECORRUPT);
    CHECK(strstr(ps_errdetail(), "checksum") != NULL);
    CHECK(ps_verify_dir(root, &v) == PS_ECORRUPT);
    ps__dir_close(&rd);

    /* A flipped payload byte is a checksum mismatch, named by file. */
    build(0);
    ps__rank_dir(rdp, sizeof rdp, root, 0);
    ps__sample_path(path, sizeof path, rdp, 1);
    flip_byte(path, PS_SAMPLE_HDR + 2);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 1);
    CHECK(strstr(v.first_problem, "0000000000000001.s") != NULL);
    char buf[64];
    ps__entry_t e1 = {.id = 1, .label = 1, .size = 18};
    e1.hash = ps__hash("sample 1 of rank 0", 18);
    rd = open_rank(root, 0);
    CHECK_EQ_INT(ps__sample_read(&rd, &e1, buf, sizeof buf), PS_ECORRUPT);
    ps__dir_close(&rd);

    /* A truncated sample file. */
    build(0);
    ps__sample_path(path, sizeof path, rdp, 2);
    CHECK_EQ_INT(truncate(path, PS_SAMPLE_HDR + 3), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 1);

    /* A missing sample file. */
    build(0);
    ps__sample_path(path, sizeof path, rdp, 0);
    CHECK_EQ_INT(unlink(path), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.missing, 1);

    /* The same id on two ranks. */
    build(0);
    {
        ps__dir_t rd1 = open_rank(root, 1);
        ps__entry_t ent[3];
        const char *txt[3] = {"sample 0 of rank 0", "sample 1 of rank 1", "sample 2 of rank 1"};
        uint64_t ids[3] = {0, 11, 12};
        for (int i = 0; i < 3; i++) {
            ent[i] = (ps__entry_t){.id = ids[i], .label = i, .size = strlen(txt[i]), .hash = ps__hash(txt[i], strlen(txt[i]))};
            CHECK_EQ_INT(ps__sample_write(&rd1, &ent[i], txt[i], 0), 0);
        }
        ps__manifest_t m2 = {.rank = 1, .nranks = 2, .epoch = 0, .seed = 9, .params = 1, .count = 3, .ent = ent};
        CHECK_EQ_INT(ps__manifest_write(&rd1, &m2, 0), 0);
        ps__dir_close(&rd1);
    }
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.duplicates, 1);
    CHECK_EQ_U64(v.orphans, 1); /* 0000..0a.s is listed by no manifest now */

    /* Interrupted commit: rank 0 has epochs 0 and 1, rank 1 only 0; the
     * verifier resolves to epoch 0 as ps_open() would. */
    build(0);
    {
        ps__manifest_t m0;
        rd = open_rank(root, 0);
        CHECK_EQ_INT(ps__manifest_read(&rd, 0, &m0), 0);
        m0.epoch = 1;
        CHECK_EQ_INT(ps__manifest_write(&rd, &m0, 0), 0);
        ps__manifest_free(&m0);
        ps__dir_close(&rd);
    }
    CHECK_EQ_INT(ps_verify_dir(root, &v), 0);
    CHECK_EQ_U64(v.epoch, 0);

    /* Not a store. */
    rmrf(root);
    CHECK_EQ_INT(mkdir(root, 0755), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ENOSTORE);
    rmrf(root);
    CHECK_EQ_INT(ps_verify_dir(root, &v), -ENOENT);
    return check_done();
}
