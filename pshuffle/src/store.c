/* Directory store: rank directories, manifests and the file helpers the
 * segment files (segment.c) use.
 *
 * Every file is written atomically: a temporary file in the same
 * directory, fsync, rename. A manifest names the committed epoch and lists
 * every sample with its size, XXH3 checksum and place (segment and
 * offset); the manifest itself ends with a checksum line, so a torn or
 * edited manifest is detected.
 *
 * A store may sit in a directory other users can write to (/tmp): its
 * directories are the user's own (mode 0700, checked when they exist), and
 * every file is opened through the rank directory's descriptor with
 * O_NOFOLLOW, temporary files with O_EXCL, so that nothing planted by
 * another user is ever followed or written through. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
/* On x86-64, libxxhash's dispatching entry points pick the widest vector
 * unit the CPU has (AVX2, AVX-512) at run time, where the plain ones use
 * SSE2: the checksums are the same, two to three times faster to compute.
 * The header redefines XXH3_64bits and XXH3_64bits_update to them. */
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif

#include "internal.h"

uint64_t ps__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ps__hash(const void *data, size_t len) { return XXH3_64bits(data, len); }

uint64_t ps__params_hash(uint64_t seed, const ps_schedule_t *q)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    int32_t kind = q->kind;
    XXH3_64bits_update(st, &seed, sizeof seed);
    XXH3_64bits_update(st, &kind, sizeof kind);
    XXH3_64bits_update(st, &q->q0, sizeof q->q0);
    if (q->kind == PS_Q_EXP || q->kind == PS_Q_LINEAR) {
        XXH3_64bits_update(st, &q->q_rate, sizeof q->q_rate);
        XXH3_64bits_update(st, &q->q_min, sizeof q->q_min);
    }
    if (q->kind == PS_Q_TABLE && q->q_table)
        XXH3_64bits_update(st, q->q_table, q->q_table_len * sizeof *q->q_table);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

int ps__cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const ps__entry_t *)a)->id, y = ((const ps__entry_t *)b)->id;
    return x < y ? -1 : x > y;
}

void ps__rank_dir(char *buf, size_t len, const char *root, int rank)
{
    snprintf(buf, len, "%s/rank-%05d", root, rank);
}

void ps__manifest_name(char *buf, size_t len, uint64_t epoch)
{
    snprintf(buf, len, "manifest.%010" PRIu64, epoch);
}

void ps__sample_path(char *buf, size_t len, const char *rankdir, const ps__entry_t *e)
{
    char name[40];
    ps__seg_name(name, sizeof name, e->seg);
    snprintf(buf, len, "%s/%s", rankdir, name);
}

void ps__manifest_path(char *buf, size_t len, const char *rankdir, uint64_t epoch)
{
    snprintf(buf, len, "%s/manifest.%010" PRIu64, rankdir, epoch);
}

int ps__mkdirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return ps__errf(-ENAMETOOLONG, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0700) && errno != EEXIST)
            return ps__errf(-errno, "mkdir %s", tmp);
        *p = '/';
    }
    if (mkdir(tmp, 0700) && errno != EEXIST)
        return ps__errf(-errno, "mkdir %s", tmp);
    return 0;
}

/* Opens directory `name` relative to `at` without following a symbolic
 * link, and with PS__DIR_PRIVATE refuses one another user could change:
 * whoever can write to a store directory can replace its files. */
static int open_dir(int at, const char *name, const char *path, int flags, int *out)
{
    int nofollow = flags & PS__DIR_PRIVATE || at != AT_FDCWD ? O_NOFOLLOW : 0;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        if ((e == ELOOP || e == ENOTDIR) && !fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
            return ps__errf(-ELOOP, "store directory %s is a symbolic link: refusing to follow it", path);
        return ps__errf(-e, "open %s: %s", path, strerror(e));
    }
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return ps__errf(-e, "stat %s: %s", path, strerror(e));
    }
    if (flags & PS__DIR_PRIVATE) {
        if (st.st_uid != geteuid()) {
            close(fd);
            return ps__errf(-EPERM, "store directory %s is owned by uid %u, not by this user (uid %u): refusing a "
                            "store another user can change", path, (unsigned)st.st_uid, (unsigned)geteuid());
        }
        if (st.st_mode & (S_IWGRP | S_IWOTH)) {
            close(fd);
            return ps__errf(-EPERM, "store directory %s is writable by group or others (mode %04o): refusing a "
                            "store another user can change", path, (unsigned)(st.st_mode & 07777));
        }
    }
    *out = fd;
    return 0;
}

int ps__dir_open(ps__dir_t *d, const char *root, int rank, int flags)
{
    *d = (ps__dir_t)PS__DIR_INIT;
    int err;
    if (snprintf(d->root, sizeof d->root, "%s", root) >= (int)sizeof d->root)
        return ps__errf(-ENAMETOOLONG, "%s", root);
    ps__rank_dir(d->path, sizeof d->path, root, rank);
    if ((flags & PS__DIR_CREATE) && (err = ps__mkdirs(root)))
        return err;
    if ((err = open_dir(AT_FDCWD, root, root, flags, &d->rootfd)))
        return err;
    if (rank < 0)
        return 0;
    char name[32];
    snprintf(name, sizeof name, "rank-%05d", rank);
    if ((flags & PS__DIR_CREATE) && mkdirat(d->rootfd, name, 0700) && errno != EEXIST) {
        err = ps__errf(-errno, "mkdir %s: %s", d->path, strerror(errno));
        ps__dir_close(d);
        return err;
    }
    if ((err = open_dir(d->rootfd, name, d->path, flags, &d->fd))) {
        ps__dir_close(d);
        return err;
    }
    return 0;
}

/* Who holds a lock file: its first line, printable characters only. */
static void lock_holder(int fd, char *buf, size_t len)
{
    ssize_t n = pread(fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n') {
            *p = 0;
            break;
        } else if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
            *p = '?';
        }
    if (!buf[0])
        snprintf(buf, len, "a process that has not written its name yet");
}

int ps__dir_lock(ps__dir_t *d)
{
    char path[4300], holder[160];
    snprintf(path, sizeof path, "%s/lock", d->path);
    int fd = openat(d->fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0)
        return ps__errf(-errno, "open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        close(fd);
        return ps__errf(-EPERM, "%s: not a regular file of this user", path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        if (e == EWOULDBLOCK) {
            lock_holder(fd, holder, sizeof holder);
            close(fd);
            return ps__errf(-EBUSY, "store %s is in use by another job: %s holds the lock %s/lock", d->root, holder,
                            d->path + strlen(d->root) + 1);
        }
        close(fd);
        return ps__errf(-e, "lock %s: %s (the store needs a filesystem with flock)", path, strerror(e));
    }
    char host[128] = "?", line[200];
    if (gethostname(host, sizeof host))
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = 0;
    int n = snprintf(line, sizeof line, "pid %ld on host %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return ps__errf(-e, "write %s: %s", path, strerror(e));
    }
    d->lockfd = fd;
    return 0;
}

void ps__dir_close(ps__dir_t *d)
{
    ps__seg_close_all(d);
    if (d->lockfd >= 0)
        close(d->lockfd); /* releases the lock */
    if (d->fd >= 0)
        close(d->fd);
    if (d->rootfd >= 0)
        close(d->rootfd);
    d->fd = d->rootfd = d->lockfd = -1;
}

int ps__dir_unlink_manifest(const ps__dir_t *d, uint64_t epoch)
{
    char name[32];
    ps__manifest_name(name, sizeof name, epoch);
    return unlinkat(d->fd, name, 0) && errno != ENOENT ? -errno : 0;
}

/* Creates temporary file `name` for writing. O_EXCL and O_NOFOLLOW: a file
 * or link of that name is never written through; one left by a crash of
 * this store's own job (the directory is private) is removed first. */
int ps__create_tmp(const ps__dir_t *d, const char *name, int *fd)
{
    for (int tries = 0;; tries++) {
        *fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (*fd >= 0)
            return 0;
        if (errno != EEXIST || tries || (unlinkat(d->fd, name, 0) && errno != ENOENT))
            return ps__errf(-errno, "create %s/%s: %s", d->path, name, strerror(errno));
    }
}

/* Opens file `name` of the directory for reading, refusing anything but a
 * regular file (a symbolic link, a FIFO, a device): O_NONBLOCK so that a
 * FIFO cannot block the open. */
int ps__open_regular(const ps__dir_t *d, const char *name, int *fd)
{
    *fd = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return ps__errf(PS_ECORRUPT, "%s/%s: %s", d->path, name,
                            name[0] == 'm' ? "manifest missing" : "segment file missing");
        if (e == ELOOP)
            return ps__errf(PS_ECORRUPT, "%s/%s: a symbolic link, not a file of the store", d->path, name);
        return ps__errf(-e, "open %s/%s: %s", d->path, name, strerror(e));
    }
    struct stat st;
    if (fstat(*fd, &st) || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return ps__errf(PS_ECORRUPT, "%s/%s: not a regular file", d->path, name);
    }
    return 0;
}

#ifdef PS_TEST_HOOKS
/* Simulated full disk for tests on machines where no small filesystem can
 * be mounted: PSHUFFLE_TEST_ENOSPC_AFTER=N makes writes fail with ENOSPC
 * once N bytes were written by this process. */
static int64_t enospc_left_ = -2; /* -2: not read yet, -1: off */

static int write_budget(size_t len)
{
    if (enospc_left_ == -2) {
        const char *s = getenv("PSHUFFLE_TEST_ENOSPC_AFTER");
        enospc_left_ = s && *s ? strtoll(s, NULL, 10) : -1;
    }
    if (enospc_left_ < 0)
        return 0;
    if ((int64_t)len > enospc_left_) {
        enospc_left_ = 0;
        return -ENOSPC;
    }
    enospc_left_ -= (int64_t)len;
    return 0;
}
#else
#define write_budget(len) ((void)(len), 0)
#endif

int ps__write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    int e = write_budget(len);
    if (e)
        return e;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes two buffers to file `name` atomically. */
static int atomic_write(const ps__dir_t *d, const char *name, const void *a, size_t alen, const void *b, size_t blen,
                        int do_fsync)
{
    char tmp[64];
    int fd;
    snprintf(tmp, sizeof tmp, ".tmp.%s", name);
    int err = ps__create_tmp(d, tmp, &fd);
    if (err)
        return err;
    err = ps__write_all(fd, a, alen);
    if (!err && blen)
        err = ps__write_all(fd, b, blen);
    if (!err && do_fsync && fsync(fd))
        err = -errno;
    if (close(fd) && !err)
        err = -errno;
    if (!err && renameat(d->fd, tmp, d->fd, name))
        err = -errno;
    if (err) {
        unlinkat(d->fd, tmp, 0);
        return ps__errf(err, "write %s/%s", d->path, name);
    }
    return 0;
}

int ps__pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;
    int e = write_budget(len);
    if (e)
        return e;
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        off += (uint64_t)w;
        len -= (size_t)w;
    }
    return 0;
}

/* 0, -errno, or PS_ECORRUPT when the file ends before len bytes. */
int ps__pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return PS_ECORRUPT;
        got += (size_t)r;
    }
    return 0;
}

int ps__manifest_write(const ps__dir_t *d, const ps__manifest_t *m, int do_fsync)
{
    char *buf = NULL;
    size_t len = 0;
    char name[32];
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -ENOMEM;
    fprintf(f, "%s %d\nrank %d\nnranks %d\nepoch %" PRIu64 "\nseed %" PRIu64 "\nparams %#" PRIx64 "\nschedule %s\ncount %" PRIu64 "\n",
            PS_MANIFEST_MAGIC, PS_MANIFEST_VERSION, m->rank, m->nranks, m->epoch, m->seed, m->params, m->qdesc[0] ? m->qdesc : "-", m->count);
    for (uint64_t i = 0; i < m->count; i++) {
        const ps__entry_t *e = &m->ent[i];
        fprintf(f, "s %016" PRIx64 " %" PRId32 " %" PRIu64 " %016" PRIx64 " %" PRIu64 " %d %" PRIu64 "\n", e->id,
                e->label, e->size, e->hash, PS_SEG_EPOCH(e->seg), PS_SEG_RANK(e->seg), e->off);
    }
    if (fflush(f)) {
        fclose(f);
        free(buf);
        return -ENOMEM;
    }
    fprintf(f, "checksum %016" PRIx64 "\n", ps__hash(buf, len));
    fclose(f);
    ps__manifest_name(name, sizeof name, m->epoch);
    int err = atomic_write(d, name, buf, len, NULL, 0, do_fsync);
    free(buf);
    if (!err && do_fsync && fsync(d->fd))
        err = ps__errf(-errno, "fsync %s: %s", d->path, strerror(errno));
    return err;
}

void ps__manifest_free(ps__manifest_t *m)
{
    if (m) {
        free(m->ent);
        m->ent = NULL;
    }
}

/* Entry lines are parsed by hand: sscanf() measures the whole remaining
 * buffer on every call, which made reading a manifest quadratic. Each
 * helper reads one field and stops at the first byte that is not its own. */
static int take_u64(const char **pp, const char *end, int base, int maxdig, uint64_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    int n = 0;
    if (base == 16) {
        /* At most 16 digits: no overflow possible. */
        for (; p < end && n < maxdig; p++, n++) {
            unsigned c = (unsigned char)*p, d = c - '0', x = c - 'a';
            if (d > 9 && x > 5)
                break;
            v = v << 4 | (d <= 9 ? d : x + 10);
        }
    } else {
        for (; p < end && n < maxdig; p++, n++) {
            unsigned d = (unsigned)(unsigned char)*p - '0';
            if (d > 9)
                break;
            if (n < 19)
                v = v * 10 + d; /* 19 digits fit in 64 bits */
            else if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)d, &v))
                return -1;
        }
    }
    if (n == 0 || (p < end && n == maxdig && ((*p >= '0' && *p <= '9') || (base == 16 && *p >= 'a' && *p <= 'f'))))
        return -1;
    *pp = p;
    *out = v;
    return 0;
}

static int take_char(const char **pp, const char *end, char c)
{
    if (*pp >= end || **pp != c)
        return -1;
    (*pp)++;
    return 0;
}

/* "s ID LABEL SIZE HASH EPOCH RANK OFF\n" (ID and HASH hex, LABEL a signed
 * int32; EPOCH RANK name the segment, OFF the payload's offset in it). */
static int parse_entry(char **pp, const char *end, ps__entry_t *e)
{
    const char *p = *pp;
    uint64_t lab;
    int neg;
    if (take_char(&p, end, 's') || take_char(&p, end, ' ') || take_u64(&p, end, 16, 16, &e->id) ||
        take_char(&p, end, ' '))
        return -1;
    neg = !take_char(&p, end, '-');
    if (take_u64(&p, end, 10, 11, &lab) || lab > (neg ? UINT64_C(2147483648) : UINT64_C(2147483647)))
        return -1;
    e->label = neg ? (int32_t)(-(int64_t)lab) : (int32_t)lab;
    if (take_char(&p, end, ' ') || take_u64(&p, end, 10, 20, &e->size) || take_char(&p, end, ' ') ||
        take_u64(&p, end, 16, 16, &e->hash) || take_char(&p, end, ' '))
        return -1;
    uint64_t sep, srank;
    if (take_u64(&p, end, 10, 20, &sep) || sep > PS_SEG_MAX_EPOCH || take_char(&p, end, ' ') ||
        take_u64(&p, end, 10, 8, &srank) || srank >= (UINT64_C(1) << PS_SEG_RANK_BITS) || take_char(&p, end, ' ') ||
        take_u64(&p, end, 10, 20, &e->off) || e->off < PS_SEG_HDR || take_char(&p, end, '\n'))
        return -1;
    e->seg = PS_SEG_KEY(sep, srank);
    *pp = (char *)p;
    return 0;
}

int ps__manifest_read(const ps__dir_t *d, uint64_t epoch, ps__manifest_t *m)
{
    char name[32], path[4300];
    int fd;
    memset(m, 0, sizeof *m);
    ps__manifest_name(name, sizeof name, epoch);
    int err = ps__open_regular(d, name, &fd);
    if (err)
        return err;
    snprintf(path, sizeof path, "%s/%s", d->path, name);
    err = ps__manifest_read_fd(fd, path, m);
    close(fd);
    return err;
}

int ps__manifest_read_fd(int fd, const char *path, ps__manifest_t *m)
{
    memset(m, 0, sizeof *m);
    int err = 0;
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (off_t)1 << 36)
        return ps__errf(PS_ECORRUPT, "%s: not a regular file of a readable size", path);
    size_t len = (size_t)st.st_size, got = 0;
    buf = malloc(len + 1);
    if (!buf)
        return ps__errf(-ENOMEM, "read %s", path);
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return ps__errf(r < 0 ? -errno : PS_ECORRUPT, "read %s: %s", path, r < 0 ? strerror(errno) : "truncated");
        }
        got += (size_t)r;
    }
    buf[len] = 0;
    /* The checksum line is the last line; it covers everything before it. */
    char *cl = NULL;
    if (len > 1 && buf[len - 1] == '\n') {
        buf[len - 1] = 0;
        cl = strrchr(buf, '\n');
        buf[len - 1] = '\n';
    }
    uint64_t want;
    if (!cl || sscanf(cl + 1, "checksum %" SCNx64, &want) != 1 || ps__hash(buf, (size_t)(cl + 1 - buf)) != want) {
        err = ps__errf(PS_ECORRUPT, "%s: manifest checksum missing or wrong", path);
        goto out;
    }
    char *p = buf;
    int line = 1;
#define NEXT_LINE() do { char *nl_ = strchr(p, '\n'); p = nl_ ? nl_ + 1 : p + strlen(p); line++; } while (0)
    int version = 0;
    char vtail = 0;
    if (strncmp(p, PS_MANIFEST_MAGIC " ", strlen(PS_MANIFEST_MAGIC) + 1) ||
        sscanf(p + strlen(PS_MANIFEST_MAGIC) + 1, "%9d%c", &version, &vtail) != 2 || vtail != '\n') {
        err = ps__errf(PS_ECORRUPT, "%s: not a pshuffle manifest", path);
        goto out;
    }
    if (version == 1) {
        err = ps__errf(PS_EFORMAT, "%s: a store of an older pshuffle (format 1, a file per sample); this version "
                       "reads format %d (segment files): start afresh (resume = 0) and load the data again", path,
                       PS_MANIFEST_VERSION);
        goto out;
    }
    if (version != PS_MANIFEST_VERSION) {
        err = ps__errf(PS_EFORMAT, "%s: manifest format %d, this version of pshuffle reads format %d", path, version,
                       PS_MANIFEST_VERSION);
        goto out;
    }
    /* Header lines are copied out before sscanf(), which would otherwise
     * measure the whole remaining buffer on each call. */
    char lb[160];
#define HDR() (snprintf(lb, sizeof lb, "%.*s", (int)(strchrnul(p, '\n') - p), p), lb)
    NEXT_LINE();
    if (sscanf(HDR(), "rank %d", &m->rank) != 1) goto bad;
    NEXT_LINE();
    if (sscanf(HDR(), "nranks %d", &m->nranks) != 1) goto bad;
    NEXT_LINE();
    if (sscanf(HDR(), "epoch %" SCNu64, &m->epoch) != 1) goto bad;
    NEXT_LINE();
    if (sscanf(HDR(), "seed %" SCNu64, &m->seed) != 1) goto bad;
    NEXT_LINE();
    if (sscanf(HDR(), "params %" SCNx64, &m->params) != 1) goto bad;
    NEXT_LINE();
    if (sscanf(HDR(), "schedule %63[^\n]", m->qdesc) != 1) goto bad;
    NEXT_LINE();
    if (sscanf(HDR(), "count %" SCNu64, &m->count) != 1 || m->count > len / 8) goto bad;
    NEXT_LINE();
    m->ent = calloc(m->count ? m->count : 1, sizeof *m->ent);
    if (!m->ent) {
        err = -ENOMEM;
        goto out;
    }
    for (uint64_t i = 0; i < m->count; i++) {
        ps__entry_t *e = &m->ent[i];
        if (p >= cl + 1 || parse_entry(&p, cl + 1, e) || e->size > PS_MAX_SAMPLE)
            goto bad;
        if (i && e->id <= m->ent[i - 1].id) {
            err = ps__errf(PS_ECORRUPT, "%s:%d: ids not strictly ascending", path, line);
            goto out;
        }
        line++;
    }
    if (p != cl + 1)
        goto bad;
#undef NEXT_LINE
#undef HDR
    free(buf);
    return 0;
bad:
    err = ps__errf(PS_ECORRUPT, "%s:%d: malformed manifest line", path, line);
out:
    free(buf);
    ps__manifest_free(m);
    return err;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int ps__manifest_list(const ps__dir_t *dir, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int dfd = dup(dir->fd);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return ps__errf(-e, "open %s: %s", dir->path, strerror(e));
    }
    rewinddir(d); /* the duplicate shares the offset of an earlier listing */
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t e;
        char tail;
        if (sscanf(de->d_name, "manifest.%" SCNu64 "%c", &e, &tail) != 1 || strlen(de->d_name) != 19)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 4;
            uint64_t *t = realloc(*out, cap * sizeof *t);
            if (!t) {
                closedir(d);
                free(*out);
                *out = NULL;
                return -ENOMEM;
            }
            *out = t;
        }
        (*out)[(*n)++] = e;
    }
    closedir(d);
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_u64);
    return 0;
}
