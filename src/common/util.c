#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

int hm__open_input(const char *path, int *fd)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (*fd < 0)
        return hm__errf(-errno, "%s", path);
    struct stat st;
    if (fstat(*fd, &st) != 0) {
        int e = errno;
        close(*fd);
        *fd = -1;
        return hm__errf(-e, "%s", path);
    }
    if (!S_ISREG(st.st_mode)) {
        const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                         : S_ISSOCK(st.st_mode) ? "a socket" : "of another kind";
        close(*fd);
        *fd = -1;
        return hm__errf(-EINVAL, "%s: not a regular file (%s)", path, what);
    }
    /* Reads of a regular file never block; the flag only mattered for the
     * open itself. */
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    return 0;
}

int hm__parse_u64(const char *s, uint64_t *out)
{
    /* Decimal, or hex after "0x"; never octal: "010" is ten, as a user
     * writing a period or a count means it, not eight. Digits must follow
     * the prefix at once (strtoull would take "0x -1"). */
    if (!s)
        return HM_ERANGE;
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *d = hex ? s + 2 : s;
    if (!(hex ? isxdigit((unsigned char)*d) : isdigit((unsigned char)*d)))
        return HM_ERANGE;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, hex ? 16 : 10);
    if (errno || *end)
        return HM_ERANGE;
    *out = v;
    return 0;
}

int hm__parse_u64_in(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (hm__parse_u64(s, &v) != 0 || v < min || v > max)
        return HM_ERANGE;
    *out = v;
    return 0;
}

const char *hm__range_why(char *buf, size_t len, uint64_t min, uint64_t max)
{
    snprintf(buf, len, "not an integer from %llu to %llu", (unsigned long long)min, (unsigned long long)max);
    return buf;
}

int hm__parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return HM_ERANGE;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return HM_ERANGE;
    *out = v;
    return 0;
}

int hm__parse_size(const char *s, uint64_t *out)
{
    /* One grammar for every size a user gives (options, environment
     * variables, JSON strings): decimal digits, then optionally K, M, G or
     * T (binary: 1K = 1024), which may be followed by "B" or "iB". No
     * fractions, exponents, hex or signs: "0.5K" or "1e3" would otherwise
     * be rounded or read in a way the user did not mean. */
    if (!s || !isdigit((unsigned char)*s))
        return HM_ERANGE;
    uint64_t v = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return HM_ERANGE;
        v = v * 10 + d;
    }
    int shift = 0;
    switch (*p) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if ((p[0] == 'i' || p[0] == 'I') && (p[1] == 'B' || p[1] == 'b'))
            p += 2;
        else if (p[0] == 'B' || p[0] == 'b')
            p++;
    }
    if (*p || v > (UINT64_MAX >> shift))
        return HM_ERANGE;
    *out = v << shift;
    return 0;
}

int hm__signal_offset(const char *s, int *off)
{
    /* A decimal integer only: 4294967296 must not wrap to 0, and an offset
     * past SIGRTMAX names no signal (the sampler's timers would then never
     * fire, and the run would record nothing). Allocation-free. */
    uint64_t v = 0;
    int max = SIGRTMAX - SIGRTMIN;
    if (!s || !*s)
        return HM_ERANGE;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (uint64_t)max)
            return HM_ERANGE;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > (uint64_t)max)
        return HM_ERANGE;
    *off = (int)v;
    return 0;
}

char *hm__fmt_size(uint64_t b, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

uint64_t hm__hash64(const void *data, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, len, seed);
}

uint64_t hm__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int hm__prefault(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    const uintptr_t pg = 4096;
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + n) & ~(pg - 1);
    if (b > a && madvise((void *)a, b - a, MADV_POPULATE_WRITE) < 0)
        return -errno;
    return 0;
#else
    (void)p;
    (void)n;
    return -EINVAL;
#endif
}

void hm__oom(size_t n)
{
    /* One line and exit status 1, as for any runtime error: no abort, whose
     * core dump and signal would read as a crash. _exit, since exit
     * handlers may need memory too. */
    fprintf(stderr, "hetmem: out of memory allocating %zu bytes\n", n);
    fflush(NULL);
    _exit(1);
}

void *hm__xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        hm__oom(n);
    return p;
}

void *hm__xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p)
        hm__oom(n * sz);
    return p;
}

void *hm__xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        hm__oom(n);
    return q;
}

char *hm__xstrdup(const char *s)
{
    if (!s)
        s = "";
    char *d = strdup(s);
    if (!d)
        hm__oom(strlen(s) + 1);
    return d;
}
