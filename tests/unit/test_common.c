/* Common helpers: error table, sizes, numbers, JSON error details, site ids,
 * prefaulting. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"

static void test_errors(void)
{
    CHECK_STR_EQ(hm_err_name(HM_EBADTRACE), "HM_EBADTRACE");
    CHECK_STR_EQ(hm_strerror(HM_EBADTRACE), "not a hetmem trace (bad magic)");
    CHECK_STR_EQ(hm_err_name(-ENOENT), "ENOENT");
    CHECK_STR_EQ(hm_strerror(-ENOENT), "No such file or directory");
    CHECK_STR_EQ(hm_strerror(0), "success");
    CHECK_STR_EQ(hm_strerror(-99999), "unknown error");
    CHECK_EQ_INT(hm__errf(HM_ECORRUPT, "block %d", 7), HM_ECORRUPT);
    CHECK_STR_EQ(hm_errdetail(), "block 7");
    hm__errclear();
    CHECK_STR_EQ(hm_errdetail(), "");
}

/* Every line of the shared grammar table (tests/fixtures/sizes.txt, also
 * read by pshuffle's unit test): "INPUT BYTES" or "INPUT bad". */
static void test_size_table(void)
{
    const char *dir = getenv("HETMEM_FIXTURES");
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/sizes.txt", dir ? dir : "tests/fixtures");
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char in[128], want[64];
        if (line[0] == '#' || sscanf(line, "%127s %63s", in, want) != 2)
            continue;
        uint64_t v = 7;
        int rc = hm__parse_size(in, &v);
        if (!strcmp(want, "bad")) {
            if (rc != HM_ERANGE)
                fprintf(stderr, "size '%s' was accepted as %llu\n", in, (unsigned long long)v);
            CHECK_EQ_INT(rc, HM_ERANGE);
        } else {
            if (rc != 0)
                fprintf(stderr, "size '%s' was refused\n", in);
            CHECK_EQ_INT(rc, 0);
            CHECK_EQ_U64(v, strtoull(want, NULL, 10));
        }
        n++;
    }
    fclose(f);
    CHECK(n >= 25);
}

static void test_sizes(void)
{
    uint64_t v = 1;
    CHECK_EQ_INT(hm__parse_size("", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_size(NULL, &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_size("4K ", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_size(" 4K", &v), HM_ERANGE);
    CHECK_EQ_U64(v, 1); /* a refusal leaves the output alone */
    test_size_table();
    char buf[32];
    CHECK_STR_EQ(hm__fmt_size(1536, buf, sizeof buf), "1.5 KiB");
    CHECK_STR_EQ(hm__fmt_size(17, buf, sizeof buf), "17 B");
}

static void test_numbers(void)
{
    uint64_t v;
    CHECK_EQ_INT(hm__parse_u64("0x3f2a91c07d5e1b44", &v), 0);
    CHECK_EQ_U64(v, 0x3f2a91c07d5e1b44ull);
    CHECK_EQ_INT(hm__parse_u64("18446744073709551615", &v), 0);
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_EQ_INT(hm__parse_u64("18446744073709551616", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64("-3", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64("12x", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64(" 1", &v), HM_ERANGE);
    /* Decimal or 0x-hex, never octal: a leading zero is decimal. */
    CHECK_EQ_INT(hm__parse_u64("010", &v), 0);
    CHECK_EQ_U64(v, 10);
    CHECK_EQ_INT(hm__parse_u64("09", &v), 0);
    CHECK_EQ_U64(v, 9);
    CHECK_EQ_INT(hm__parse_u64("0X1f", &v), 0);
    CHECK_EQ_U64(v, 31);
    CHECK_EQ_INT(hm__parse_u64("0x", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64("0x-1", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64("0x 1", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64("+1", &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64("", &v), HM_ERANGE);
    /* The bounded form: both ends included, a refusal leaves *out alone. */
    v = 7;
    CHECK_EQ_INT(hm__parse_u64_in("0", 1, 16, &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64_in("17", 1, 16, &v), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_u64_in("18446744073709551616", 1, UINT64_MAX, &v), HM_ERANGE);
    CHECK_EQ_U64(v, 7);
    CHECK_EQ_INT(hm__parse_u64_in("1", 1, 16, &v), 0);
    CHECK_EQ_U64(v, 1);
    CHECK_EQ_INT(hm__parse_u64_in("16", 1, 16, &v), 0);
    CHECK_EQ_U64(v, 16);
    char why[96];
    CHECK_STR_EQ(hm__range_why(why, sizeof why, 1, 16), "not an integer from 1 to 16");
    double d;
    CHECK_EQ_INT(hm__parse_double("0.25", &d), 0);
    CHECK_NEAR(d, 0.25, 1e-12);
    CHECK_EQ_INT(hm__parse_double("nan", &d), HM_ERANGE);
    CHECK_EQ_INT(hm__parse_double("1e999", &d), HM_ERANGE);
}

static void test_json(void)
{
    json_t *j = NULL;
    CHECK_EQ_INT(hm__json_load_string("cfg", "{\"a\": 1,\n \"b\": }", &j), HM_EBADJSON);
    CHECK(strncmp(hm_errdetail(), "cfg:2:", 6) == 0);
    CHECK_EQ_INT(hm__json_load_string("cfg", "{\"a\": 1, \"a\": 2}", &j), HM_EBADJSON);
    CHECK_EQ_INT(hm__json_load_file("/nonexistent/x.json", &j), -ENOENT);
    CHECK_EQ_INT(hm__json_load_string("cfg", "{\"n\": 3, \"s\": \"4K\", \"x\": \"y\", \"f\": 0.5}", &j), 0);
    uint64_t u = 0;
    CHECK_EQ_INT(hm__json_get_u64(j, "n", 1, &u, "cfg"), 0);
    CHECK_EQ_U64(u, 3);
    CHECK_EQ_INT(hm__json_get_u64(j, "s", 1, &u, "cfg"), 0);
    CHECK_EQ_U64(u, 4096);
    CHECK_EQ_INT(hm__json_get_u64(j, "x", 1, &u, "cfg"), HM_EBADJSON);
    CHECK(strstr(hm_errdetail(), "\"x\"") != NULL);
    CHECK_EQ_INT(hm__json_get_u64(j, "missing", 1, &u, "cfg"), HM_EBADJSON);
    u = 77;
    CHECK_EQ_INT(hm__json_get_u64(j, "missing", 0, &u, "cfg"), 0);
    CHECK_EQ_U64(u, 77);
    double f = 0;
    CHECK_EQ_INT(hm__json_get_double(j, "f", 1, &f, "cfg"), 0);
    CHECK_NEAR(f, 0.5, 1e-12);
    const char *s = NULL;
    CHECK_EQ_INT(hm__json_get_string(j, "n", 1, &s, "cfg"), HM_EBADJSON);
    json_decref(j);
}

__attribute__((noinline, noipa)) static uintptr_t here(void) { return (uintptr_t)__builtin_return_address(0); }

static void test_sites(void)
{
    uintptr_t a[2] = {here(), here()}; /* two call sites: different ids */
    CHECK(hm__site_id(&a[0], 1, HM_SITE_DEPTH) != hm__site_id(&a[1], 1, HM_SITE_DEPTH));
    CHECK_EQ_U64(hm__site_id(&a[0], 1, HM_SITE_DEPTH), hm__site_id(&a[0], 1, HM_SITE_DEPTH));
    char buf[256];
    hm__site_frame(a[0], buf, sizeof buf);
    CHECK(strstr(buf, "unit_test_common+0x") != NULL);
}

/* Site ids across fork: one thread looks up the links of fresh return
 * addresses (each a DWARF lookup, under the source-location lock, then
 * cached under the link lock) while the main thread forks; each child
 * looks one up too and exits. A lock inherited held by a thread the child
 * does not have would block the child forever: each child must exit, and
 * one still running after a minute (a lookup takes milliseconds) counts as
 * blocked. */
static int fork_stop;
static void *lookup_loop(void *arg)
{
    uintptr_t base = (uintptr_t)arg;
    for (unsigned k = 0; !__atomic_load_n(&fork_stop, __ATOMIC_RELAXED); k++) {
        uintptr_t pc = base + 1 + (k % 4000) * 4;
        (void)hm__site_id(&pc, 1, HM_SITE_DEPTH);
    }
    return NULL;
}

static void test_sites_fork(void)
{
    pthread_t t;
    uintptr_t base = (uintptr_t)&test_sites;
    CHECK_EQ_INT(pthread_create(&t, NULL, lookup_loop, (void *)base), 0);
    int blocked = 0, bad = 0;
    for (int i = 0; i < 40; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            uintptr_t pc = base + 3 + (uintptr_t)i * 8;
            char buf[256];
            (void)hm__site_id(&pc, 1, HM_SITE_DEPTH);
            hm__site_frame(pc, buf, sizeof buf);
            _exit(0);
        }
        CHECK(pid > 0);
        if (pid < 0)
            break;
        int st = 0;
        pid_t w = 0;
        for (int ms = 0; ms < 60000 && (w = waitpid(pid, &st, WNOHANG)) == 0; ms++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        if (w == 0) {
            blocked++;
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            bad++;
        }
    }
    __atomic_store_n(&fork_stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    CHECK_EQ_INT(blocked, 0);
    CHECK_EQ_INT(bad, 0);
}

/* hm__prefault allocates exactly the whole pages inside its range, in a
 * fresh mapping (mincore: resident or not), and leaves what a buffer holds
 * as it was. */
static void test_prefault(void)
{
    const size_t pg = 4096, np = 8;
    unsigned char *m = mmap(NULL, np * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    /* From the middle of page 1 to the middle of page 5: pages 2, 3, 4. */
    int rc = hm__prefault(m + pg + 100, 4 * pg);
    unsigned char in[8];
    CHECK_EQ_INT(mincore(m, np * pg, in), 0);
    if (rc == -EINVAL) {
        fprintf(stderr, "test_prefault: this kernel has no MADV_POPULATE_WRITE; residency not checked\n");
    } else {
        CHECK_EQ_INT(rc, 0);
        for (size_t i = 0; i < np; i++)
            CHECK_EQ_INT(in[i] & 1, i >= 2 && i <= 4);
    }
    CHECK_EQ_INT(hm__prefault(m + 10, 100), 0); /* no whole page inside: nothing to do */
    for (size_t i = 0; i < np * pg; i++)
        m[i] = (unsigned char)(i * 7 + 3);
    CHECK(hm__prefault(m, np * pg) == 0 || rc == -EINVAL);
    int same = 1;
    for (size_t i = 0; i < np * pg; i++)
        same &= m[i] == (unsigned char)(i * 7 + 3);
    CHECK(same);
    munmap(m, np * pg);
}

int main(void)
{
    test_prefault();
    test_errors();
    test_sizes();
    test_numbers();
    test_json();
    test_sites();
    test_sites_fork();
    return check_done();
}
