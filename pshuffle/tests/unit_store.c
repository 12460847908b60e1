/* Directory store formats without MPI: sample files, manifests and the
 * offline verifier, on stores built here and then damaged on purpose.
 * usage: unit_store SCRATCH_DIR */
#include <errno.h>
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

/* Two ranks, three samples each, epoch `e`. */
static void build(uint64_t e)
{
    rmrf(root);
    for (int r = 0; r < 2; r++) {
        char rd[4200];
        ps__entry_t ent[3];
        ps__rank_dir(rd, sizeof rd, root, r);
        CHECK_EQ_INT(ps__mkdirs(rd), 0);
        for (int i = 0; i < 3; i++) {
            char data[64];
            uint64_t id = (uint64_t)r * 10 + (uint64_t)i;
            int len = snprintf(data, sizeof data, "sample %d of rank %d", i, r);
            ent[i] = (ps__entry_t){.id = id, .label = i, .size = (uint64_t)len, .hash = ps__hash(data, (size_t)len)};
            CHECK_EQ_INT(ps__sample_write(rd, &ent[i], data, 0), 0);
        }
        ps__manifest_t m = {.rank = r, .nranks = 2, .epoch = e, .seed = 9, .params = 1, .count = 3, .ent = ent};
        CHECK_EQ_INT(ps__manifest_write(rd, &m, 1), 0);
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
    char rd[4200], path[4300];
    ps__entry_t *ent = malloc(N * sizeof *ent);
    for (uint64_t i = 0; i < N; i++)
        ent[i] = (ps__entry_t){.id = 3 * i + 1, .label = (int32_t)(i % 7) - 3, .size = (i * 7919) % PS_MAX_SAMPLE,
                               .hash = i * UINT64_C(0x9e3779b97f4a7c15)};
    ent[5].label = INT32_MIN;
    ent[6].label = INT32_MAX;
    snprintf(rd, sizeof rd, "%s-big", root);
    rmrf(rd);
    CHECK_EQ_INT(ps__mkdirs(rd), 0);
    ps__manifest_t m = {.rank = 0, .nranks = 1, .epoch = 4, .seed = 1, .params = 2, .count = N, .ent = ent};
    CHECK_EQ_INT(ps__manifest_write(rd, &m, 0), 0);
    ps__manifest_path(path, sizeof path, rd, 4);
    ps__manifest_t r;
    /* CPU time, so that other work on a shared machine does not count. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    CHECK_EQ_INT(ps__manifest_read(path, &r), 0);
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
    if (!getenv("PS_KEEP_BIG"))
        rmrf(rd);
}

int main(int argc, char **argv)
{
    snprintf(root, sizeof root, "%s", argc > 1 ? argv[1] : "/tmp/pshuffle-unit-store");
    ps_verify_t v;
    char rd[4200], path[4300];

    test_big_manifest();
    build(0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), 0);
    CHECK_EQ_INT(v.nranks, 2);
    CHECK_EQ_U64(v.samples, 6);
    CHECK_EQ_U64(v.duplicates + v.missing + v.bad_checksum + v.orphans, 0);

    /* Manifest round trip. */
    ps__manifest_t m;
    ps__rank_dir(rd, sizeof rd, root, 1);
    ps__manifest_path(path, sizeof path, rd, 0);
    CHECK_EQ_INT(ps__manifest_read(path, &m), 0);
    CHECK_EQ_INT(m.rank, 1);
    CHECK_EQ_U64(m.count, 3);
    CHECK_EQ_U64(m.ent[2].id, 12);
    CHECK_EQ_INT(m.ent[2].label, 2);
    ps__manifest_free(&m);

    /* An edited manifest fails its checksum. */
    flip_byte(path, 30);
    CHECK_EQ_INT(ps__manifest_read(path, &m), PS_ECORRUPT);
    CHECK(strstr(ps_errdetail(), "checksum") != NULL);
    CHECK(ps_verify_dir(root, &v) == PS_ECORRUPT);

    /* A flipped payload byte is a checksum mismatch, named by file. */
    build(0);
    ps__rank_dir(rd, sizeof rd, root, 0);
    ps__sample_path(path, sizeof path, rd, 1);
    flip_byte(path, PS_SAMPLE_HDR + 2);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 1);
    CHECK(strstr(v.first_problem, "0000000000000001.s") != NULL);
    char buf[64];
    ps__entry_t e1 = {.id = 1, .label = 1, .size = 18};
    e1.hash = ps__hash("sample 1 of rank 0", 18);
    CHECK_EQ_INT(ps__sample_read(rd, &e1, buf, sizeof buf), PS_ECORRUPT);

    /* A truncated sample file. */
    build(0);
    ps__sample_path(path, sizeof path, rd, 2);
    CHECK_EQ_INT(truncate(path, PS_SAMPLE_HDR + 3), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.bad_checksum, 1);

    /* A missing sample file. */
    build(0);
    ps__sample_path(path, sizeof path, rd, 0);
    CHECK_EQ_INT(unlink(path), 0);
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.missing, 1);

    /* The same id on two ranks. */
    build(0);
    {
        char rd1[4200];
        ps__rank_dir(rd1, sizeof rd1, root, 1);
        ps__entry_t ent[3];
        const char *txt[3] = {"sample 0 of rank 0", "sample 1 of rank 1", "sample 2 of rank 1"};
        uint64_t ids[3] = {0, 11, 12};
        for (int i = 0; i < 3; i++) {
            ent[i] = (ps__entry_t){.id = ids[i], .label = i, .size = strlen(txt[i]), .hash = ps__hash(txt[i], strlen(txt[i]))};
            CHECK_EQ_INT(ps__sample_write(rd1, &ent[i], txt[i], 0), 0);
        }
        ps__manifest_t m2 = {.rank = 1, .nranks = 2, .epoch = 0, .seed = 9, .params = 1, .count = 3, .ent = ent};
        CHECK_EQ_INT(ps__manifest_write(rd1, &m2, 0), 0);
    }
    CHECK_EQ_INT(ps_verify_dir(root, &v), PS_ECORRUPT);
    CHECK_EQ_U64(v.duplicates, 1);
    CHECK_EQ_U64(v.orphans, 1); /* 0000..0a.s is listed by no manifest now */

    /* Interrupted commit: rank 0 has epochs 0 and 1, rank 1 only 0; the
     * verifier resolves to epoch 0 as ps_open() would. */
    build(0);
    {
        ps__manifest_t m0;
        ps__rank_dir(rd, sizeof rd, root, 0);
        ps__manifest_path(path, sizeof path, rd, 0);
        CHECK_EQ_INT(ps__manifest_read(path, &m0), 0);
        m0.epoch = 1;
        CHECK_EQ_INT(ps__manifest_write(rd, &m0, 0), 0);
        ps__manifest_free(&m0);
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
