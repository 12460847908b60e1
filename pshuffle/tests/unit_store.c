/* Directory store formats without MPI: segment files, manifests, the
 * compaction rule and the offline verifier, on stores built here and then
 * damaged on purpose.
 * usage: unit_store SCRATCH_DIR */
#include <errno.h>
#include <inttypes.h>
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

/* Writes ent[n] (payload `txt[i]`) as one segment `key` of rank directory
 * d and a manifest of epoch e naming them. */
static void put_rank(ps__dir_t *d, int r, uint64_t e, uint64_t key, ps__entry_t *ent, const char **txt, int n)
{
    for (int i = 0; i < n; i++) {
        ent[i].size = strlen(txt[i]);
        ent[i].hash = ps__hash(txt[i], ent[i].size);
        CHECK_EQ_INT(ps__seg_add(d, key, &ent[i], txt[i]), 0);
    }
    /* Not fsync'd: durability is not what these tests look at, and
     * hundreds of syncs would make them slow on a busy disk. */
    CHECK_EQ_INT(ps__seg_finish(d, 0), 0);
    ps__manifest_t m = {.rank = r, .nranks = 2, .epoch = e, .seed = 9, .params = 1, .count = (uint64_t)n, .ent = ent};
    CHECK_EQ_INT(ps__manifest_write(d, &m, 0), 0);
    CHECK_EQ_INT(ps__seg_gc(d, ent, (uint64_t)n, NULL, NULL), 0);
}

/* Two ranks, three samples each in one segment per rank, epoch `e`;
 * built[r] are rank r's entries. */
static ps__entry_t built[2][3];
static char texts[2][3][64];

static void build(uint64_t e)
{
    rmrf(root);
    for (int r = 0; r < 2; r++) {
        ps__dir_t rd = open_rank(root, r);
        const char *txt[3];
        for (int i = 0; i < 3; i++) {
            snprintf(texts[r][i], sizeof texts[r][i], "sample %d of rank %d", i, r);
            txt[i] = texts[r][i];
            built[r][i] = (ps__entry_t){.id = (uint64_t)r * 10 + (uint64_t)i, .label = i};
        }
        put_rank(&rd, r, e, PS_SEG_KEY(0, r), built[r], txt, 3);
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
    for (uint64_t i = 0; i < N; i++) {
        ent[i] = (ps__entry_t){.id = 3 * i + 1, .label = (int32_t)(i % 7) - 3, .size = (i * 7919) % PS_MAX_SAMPLE,
                               .hash = i * UINT64_C(0x9e3779b97f4a7c15)};
        ent[i].seg = PS_SEG_KEY(i % 5000, i % 3);
        ent[i].off = PS_SEG_HDR + i * 4096;
    }
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
                r.ent[i].hash == ent[i].hash && r.ent[i].seg == ent[i].seg && r.ent[i].off == ent[i].off;
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
 * (its temporary files) and reads (segment files) are never followed: the
 * file they point to keeps its contents, and a segment that is a link or a
 * FIFO is refused at once instead of read or waited on. */
static void test_planted_links(void)
{
    char victim[4300], link[4400], store[4200];
    snprintf(store, sizeof store, "%s-links", root);
    snprintf(victim, sizeof victim, "%s-victim", root);
    rmrf(store);
    put_file(victim, "victim\n", 0600);
    ps__dir_t d = open_rank(store, 0);
    const char *tmps[] = {".tmp.manifest.0000000003", ".tmp.seg.0000000003.00000"};
    for (int i = 0; i < 2; i++) {
        snprintf(link, sizeof link, "%s/%s", d.path, tmps[i]);
        CHECK_EQ_INT(symlink(victim, link), 0);
    }
    ps__entry_t e = {.id = 7, .label = 1, .size = 5, .hash = ps__hash("hello", 5)};
    CHECK_EQ_INT(ps__seg_add(&d, PS_SEG_KEY(3, 0), &e, "hello"), 0);
    CHECK_EQ_INT(ps__seg_finish(&d, 0), 0);
    ps__manifest_t m = {.rank = 0, .nranks = 1, .epoch = 3, .seed = 1, .params = 1, .count = 1, .ent = &e};
    CHECK_EQ_INT(ps__manifest_write(&d, &m, 0), 0);
    CHECK(file_is(victim, "victim\n"));
    struct stat st;
    snprintf(link, sizeof link, "%s/manifest.0000000003", d.path);
    CHECK(lstat(link, &st) == 0 && S_ISREG(st.st_mode));
    CHECK_EQ_INT((int)(st.st_mode & 0777), 0600);

    /* The segment itself replaced by a link to the victim. */
    snprintf(link, sizeof link, "%s/seg.0000000003.00000", d.path);
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


/* Writes `text` as manifest file `name` of rank directory d, with a right
 * checksum line. */
static void put_manifest_text(const ps__dir_t *d, const char *name, const char *text)
{
    char path[4400], sum[64];
    snprintf(path, sizeof path, "%s/%s", d->path, name);
    snprintf(sum, sizeof sum, "checksum %016" PRIx64 "\n", ps__hash(text, strlen(text)));
    char *all = malloc(strlen(text) + strlen(sum) + 1);
    strcpy(all, text);
    strcat(all, sum);
    put_file(path, all, 0600);
    free(all);
}

static int one_line(const char *s) { return s[0] && !strchr(s, '\n'); }

/* A manifest of the former format (a file per sample) and one of a format
 * this version does not know are refused with one line saying so, by the
 * reader and by verify. */
static void test_old_formats(void)
{
    char store[4200];
    snprintf(store, sizeof store, "%s-old", root);
    rmrf(store);
    ps__dir_t d = open_rank(store, 0);
    put_manifest_text(&d, "manifest.0000000002", "pshuffle-manifest 1\nrank 0\nnranks 1\nepoch 2\nseed 1\n"
                      "params 0x1\nschedule Q=0.5\ncount 1\ns 0000000000000001 0 5 0000000000000001\n");
    ps__manifest_t m;
    ps_verify_t v;
    CHECK_EQ_INT(ps__manifest_read(&d, 2, &m), PS_EFORMAT);
    printf("format 1: %s\n", ps_errdetail());
    CHECK(one_line(ps_errdetail()) && strstr(ps_errdetail(), "older pshuffle (format 1") &&
          strstr(ps_errdetail(), "start afresh"));
    CHECK_EQ_INT(ps_verify_dir(store, &v), PS_EFORMAT);
    CHECK(strstr(ps_errdetail(), "format 1") != NULL);
    put_manifest_text(&d, "manifest.0000000002", "pshuffle-manifest 7\nrank 0\n");
    CHECK_EQ_INT(ps__manifest_read(&d, 2, &m), PS_EFORMAT);
    printf("format 7: %s\n", ps_errdetail());
    CHECK(one_line(ps_errdetail()) && strstr(ps_errdetail(), "manifest format 7, this version of pshuffle reads "
                                                             "format 2"));
    put_manifest_text(&d, "manifest.0000000002", "pshuffle-manifest\nrank 0\n");
    CHECK_EQ_INT(ps__manifest_read(&d, 2, &m), PS_ECORRUPT);
    CHECK(strstr(ps_errdetail(), "not a pshuffle manifest") != NULL);
    ps__dir_close(&d);
    rmrf(store);
}

/* A damaged segment header, a segment of another epoch under a name, and a
 * manifest placing a sample beyond its segment: each refused with one
 * line, by reading, by loading the state (ps_open's check) and by verify. */
static void test_bad_segments(void)
{
    char rdp[4200], path[4300], buf[64];
    ps_verify_t v;
    struct {
        long off;  /* byte of the segment's header changed (-1: none) */
        const char *want;
    } cases[] = {{0, "not a segment file"}, {4, "segment format"}, {8, "header names epoch"},
                 {16, "header names epoch"}, {20, "reserved"}, {24, "its header says"}};
    ps__rank_dir(rdp, sizeof rdp, root, 0);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        build(0);
        ps__sample_path(path, sizeof path, rdp, &built[0][0]);
        flip_byte(path, cases[c].off);
        ps__dir_t rd = open_rank(root, 0);
        CHECK_EQ_INT(ps__sample_read(&rd, &built[0][0], buf, sizeof buf), PS_ECORRUPT);
        printf("header byte %ld: %s\n", cases[c].off, ps_errdetail());
        CHECK(one_line(ps_errdetail()) && strstr(ps_errdetail(), cases[c].want));
        CHECK_EQ_INT(ps__seg_load(&rd, built[0], 3), PS_ECORRUPT);
        CHECK(strstr(ps_errdetail(), cases[c].want) != NULL);
        ps__dir_close(&rd);
        CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
        CHECK(strstr(v.first_problem, cases[c].want) != NULL);
    }
    /* A sample placed beyond the end of its segment. */
    build(0);
    {
        ps__dir_t rd = open_rank(root, 0);
        ps__entry_t ent[3];
        memcpy(ent, built[0], sizeof ent);
        ent[2].off += 5;
        ps__manifest_t m = {.rank = 0, .nranks = 2, .epoch = 0, .seed = 9, .params = 1, .count = 3, .ent = ent};
        CHECK_EQ_INT(ps__manifest_write(&rd, &m, 0), 0);
        CHECK_EQ_INT(ps__seg_load(&rd, ent, 3), PS_ECORRUPT);
        printf("beyond: %s\n", ps_errdetail());
        CHECK(one_line(ps_errdetail()) && strstr(ps_errdetail(), "lies beyond the segment"));
        ps__dir_close(&rd);
        CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
        CHECK(strstr(v.first_problem, "lies beyond the segment") != NULL);
    }
}

/* Random damage to a segment (a byte changed, the file cut or extended)
 * or to a manifest (a byte changed, which the checksum catches, or a
 * correctly checksummed manifest with a changed field): never a crash,
 * always a one-line refusal or a sound read of the right bytes. */
static char *slurp_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = malloc(1 << 16);
    *len = f ? fread(b, 1, 1 << 16, f) : 0;
    if (f)
        fclose(f);
    return b;
}

static void spit_file(const char *path, const char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_U64(fwrite(b, 1, len, f), len);
        fclose(f);
    }
}

static void test_random_damage(void)
{
    char rdp[4200], path[4300], mpath[4300], buf[64];
    ps_verify_t v;
    uint64_t x = 88172645463325252ull;
    int refused = 0, sound = 0;
    ps__rank_dir(rdp, sizeof rdp, root, 0);
    ps__manifest_path(mpath, sizeof mpath, rdp, 0);
    build(0);
    ps__sample_path(path, sizeof path, rdp, &built[0][0]);
    size_t slen, mlen;
    char *seg = slurp_file(path, &slen), *man = slurp_file(mpath, &mlen);
    for (int t = 0; t < 300; t++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* The store as built, then one change. */
        spit_file(path, seg, slen);
        spit_file(mpath, man, mlen);
        struct stat st;
        CHECK_EQ_INT(stat(path, &st), 0);
        int what = (int)(x % 5);
        if (what == 0 || what == 1) {
            flip_byte(path, (long)((x >> 8) % (uint64_t)st.st_size));
        } else if (what == 2) {
            CHECK_EQ_INT(truncate(path, (off_t)((x >> 8) % (uint64_t)st.st_size)), 0);
        } else if (what == 3) {
            CHECK_EQ_INT(truncate(path, st.st_size + 1 + (off_t)((x >> 8) % 40)), 0);
        } else {
            CHECK_EQ_INT(stat(mpath, &st), 0);
            flip_byte(mpath, (long)((x >> 8) % (uint64_t)st.st_size));
        }
        int err = ps_verify_dir(root, &v);
        if (err) {
            refused++;
            CHECK(one_line(ps_errdetail()));
        } else {
            sound++;
            ps__dir_t rd = open_rank(root, 0);
            for (int i = 0; i < 3; i++) {
                CHECK_EQ_INT(ps__sample_read(&rd, &built[0][i], buf, sizeof buf), 0);
                CHECK(!memcmp(buf, texts[0][i], built[0][i].size));
            }
            ps__dir_close(&rd);
        }
    }
    free(seg);
    free(man);
    printf("random damage: %d refused, %d read back sound\n", refused, sound);
    CHECK_EQ_INT(refused, 300); /* every byte of a segment or manifest is checked */
}

/* The compaction rule: after an exchange, the kept samples of a segment
 * that would be less than half live move into the new segment, which
 * removes the old one; a segment exactly half live stays. */
static void test_compaction(void)
{
    char store[4200], name[64], path[4400];
    snprintf(store, sizeof store, "%s-compact", root);
    rmrf(store);
    ps__dir_t d = open_rank(store, 0);
    ps__entry_t ent[20];
    char txt[20][16];
    for (int i = 0; i < 20; i++) {
        snprintf(txt[i], sizeof txt[i], "payload-%02d", i); /* 10 bytes each */
        ent[i] = (ps__entry_t){.id = (uint64_t)i, .label = i, .size = 10, .hash = ps__hash(txt[i], 10)};
        /* Samples 0-9 in segment (1, 0), 10-19 in (2, 0). */
        if (i == 10)
            CHECK_EQ_INT(ps__seg_finish(&d, 0), 0);
        CHECK_EQ_INT(ps__seg_add(&d, PS_SEG_KEY(i < 10 ? 1 : 2, 0), &ent[i], txt[i]), 0);
    }
    CHECK_EQ_INT(ps__seg_finish(&d, 0), 0);
    CHECK_EQ_INT(ps__seg_gc(&d, ent, 20, NULL, NULL), 0);
    CHECK_EQ_U64(d.nsegs, 2);
    /* Keep 4 of the first ten (40 of 100 bytes live) and 5 of the others
     * (exactly half). */
    ps__entry_t keep[9];
    int k = 0;
    for (int i = 0; i < 4; i++)
        keep[k++] = ent[2 * i];
    for (int i = 10; i < 15; i++)
        keep[k++] = ent[i];
    CHECK_EQ_INT(ps__seg_plan_moves(&d, keep, 9, PS_SEG_KEY(3, 0)), 0);
    CHECK_EQ_U64(d.nmoves, 4);
    for (int i = 0; i < 9; i++)
        CHECK_EQ_U64(keep[i].seg, i < 4 ? PS_SEG_KEY(3, 0) : PS_SEG_KEY(2, 0));
    CHECK_EQ_INT(ps__seg_finish(&d, 1), 0);
    CHECK_EQ_INT(ps__seg_gc(&d, keep, 9, NULL, NULL), 0);
    CHECK_EQ_U64(d.nsegs, 2);
    ps__seg_name(name, sizeof name, PS_SEG_KEY(1, 0));
    snprintf(path, sizeof path, "%s/%s", d.path, name);
    CHECK(access(path, F_OK) != 0); /* the sparse segment is gone */
    ps__seg_name(name, sizeof name, PS_SEG_KEY(2, 0));
    snprintf(path, sizeof path, "%s/%s", d.path, name);
    CHECK(access(path, F_OK) == 0); /* the half-live one stays */
    char buf[16];
    for (int i = 0; i < 9; i++) {
        CHECK_EQ_INT(ps__sample_read(&d, &keep[i], buf, sizeof buf), 0);
        CHECK(!memcmp(buf, txt[keep[i].id], 10));
    }
    /* The new segment holds exactly the moved samples. */
    struct stat st;
    ps__seg_name(name, sizeof name, PS_SEG_KEY(3, 0));
    snprintf(path, sizeof path, "%s/%s", d.path, name);
    CHECK(stat(path, &st) == 0 && st.st_size == PS_SEG_HDR + 40);
    /* A failed exchange's segment is dropped, the committed ones stay. */
    ps__entry_t more = {.id = 99, .size = 3, .hash = ps__hash("abc", 3)};
    CHECK_EQ_INT(ps__seg_add(&d, PS_SEG_KEY(4, 0), &more, "abc"), 0);
    CHECK_EQ_INT(ps__seg_finish(&d, 0), 0);
    ps__seg_drop(&d);
    ps__seg_name(name, sizeof name, PS_SEG_KEY(4, 0));
    snprintf(path, sizeof path, "%s/%s", d.path, name);
    CHECK(access(path, F_OK) != 0);
    CHECK_EQ_U64(d.nsegs, 2);
    ps__dir_close(&d);
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
    test_old_formats();
    test_bad_segments();
    test_random_damage();
    test_compaction();
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
    ps__sample_path(path, sizeof path, rdp, &built[0][1]);
    flip_byte(path, (long)built[0][1].off + 2);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 1);
    CHECK(strstr(v.first_problem, "seg.0000000000.00000: checksum mismatch (sample 0x1)") != NULL);
    char buf[64];
    rd = open_rank(root, 0);
    CHECK_EQ_INT(ps__sample_read(&rd, &built[0][1], buf, sizeof buf), PS_ECORRUPT);
    CHECK_EQ_INT(ps__sample_read(&rd, &built[0][0], buf, sizeof buf), 0);
    ps__dir_close(&rd);

    /* A truncated segment: its size disagrees with its header. */
    build(0);
    ps__sample_path(path, sizeof path, rdp, &built[0][2]);
    CHECK_EQ_INT(truncate(path, (off_t)built[0][2].off + 3), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 3);
    CHECK(strstr(v.first_problem, "its header says") != NULL);

    /* A missing segment: every sample in it is missing. */
    build(0);
    ps__sample_path(path, sizeof path, rdp, &built[0][0]);
    CHECK_EQ_INT(unlink(path), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.missing, 3);
    CHECK(strstr(v.first_problem, "segment file missing") != NULL);

    /* The same id on two ranks; rank 1's first segment is then an orphan. */
    build(0);
    {
        ps__dir_t rd1 = open_rank(root, 1);
        ps__entry_t ent[3] = {{.id = 0, .label = 0}, {.id = 11, .label = 1}, {.id = 12, .label = 2}};
        const char *txt[3] = {"sample 0 of rank 0", "sample 1 of rank 1", "sample 2 of rank 1"};
        put_rank(&rd1, 1, 0, PS_SEG_KEY(1, 1), ent, txt, 3);
        ps__dir_close(&rd1);
    }
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.duplicates, 1);
    CHECK_EQ_U64(v.orphans, 1); /* seg.0000000000.00001 is listed by no manifest now */

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
