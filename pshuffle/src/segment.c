/* Segment files of a directory store.
 *
 * A rank writes the samples it receives in one exchange into one segment
 * file (seg.<epoch>.<rank>, the epoch the exchange commits), laid out as
 * the pair streams arrive: each sending peer's samples back to back, so
 * that a round's piece from a peer is one pwrite. The initial load writes
 * one segment too. The manifest locates each sample (segment, offset,
 * size, checksum); a segment is never changed after its rename, and
 * removed once no committed manifest refers to it.
 *
 * Per exchange that is one file created, written, fsync'd (when fsync is
 * on) and renamed, and the removal of the segments left without samples,
 * instead of a file created, renamed and later removed per sample.
 *
 * Compaction: when a segment would be less than half live after an
 * exchange (its samples sent away), the samples the rank keeps in it are
 * copied into the exchange's segment and it is removed once the new
 * manifest is committed. So every segment a committed manifest refers to,
 * but the newest, is at least half live, and the segments take at most
 * twice the bytes the rank holds. The copy is part of the exchange that
 * commits it: a crash before the commit leaves the old manifest, whose
 * segments are all still there; after it the new one, whose samples are
 * in the new segment. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

void ps__seg_name(char *buf, size_t len, uint64_t key)
{
    snprintf(buf, len, "seg.%010" PRIu64 ".%05d", PS_SEG_EPOCH(key), PS_SEG_RANK(key));
}

int ps__seg_parse_name(const char *n, uint64_t *key)
{
    if (strlen(n) < 20 || strncmp(n, "seg.", 4))
        return 0;
    uint64_t e = 0, r = 0;
    const char *p = n + 4;
    int i;
    for (i = 0; i < 10; i++, p++) {
        if (*p < '0' || *p > '9')
            return 0;
        e = e * 10 + (uint64_t)(*p - '0');
    }
    if (*p++ != '.')
        return 0;
    for (i = 0; *p; i++, p++) {
        if (*p < '0' || *p > '9' || i >= 8)
            return 0;
        r = r * 10 + (uint64_t)(*p - '0');
    }
    if (i < 5 || e > PS_SEG_MAX_EPOCH || r >= (UINT64_C(1) << PS_SEG_RANK_BITS))
        return 0;
    *key = PS_SEG_KEY(e, r);
    return 1;
}

static void put_u32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t get_u32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get_u64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static void tmp_name(char *buf, size_t len, uint64_t key)
{
    char n[40];
    ps__seg_name(n, sizeof n, key);
    snprintf(buf, len, ".tmp.%s", n);
}

/* Index of `key` in the table, or -1. */
static long find(const ps__dir_t *d, uint64_t key)
{
    size_t lo = 0, hi = d->nsegs;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (d->segs[m].key < key)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < d->nsegs && d->segs[lo].key == key ? (long)lo : -1;
}

static int insert(ps__dir_t *d, uint64_t key, uint64_t len, int pending)
{
    if (find(d, key) >= 0)
        return ps__errf(PS_ECORRUPT, "%s: segment %#" PRIx64 " twice", d->path, key);
    if (d->nsegs == d->capsegs) {
        size_t cap = d->capsegs ? 2 * d->capsegs : 16;
        ps__seg_t *t = realloc(d->segs, cap * sizeof *t);
        if (!t)
            return ps__errf(-ENOMEM, "the segment table of %s", d->path);
        d->segs = t;
        d->capsegs = cap;
    }
    size_t i = d->nsegs;
    while (i > 0 && d->segs[i - 1].key > key) {
        d->segs[i] = d->segs[i - 1];
        i--;
    }
    d->segs[i] = (ps__seg_t){.key = key, .len = len, .fd = -1, .pending = pending};
    d->nsegs++;
    return 0;
}

/* Opens segment `key` and checks its header: magic, version, the epoch
 * and rank its name gives, and a payload length that matches the file's
 * size. *len: the payload length. */
static int open_checked(const ps__dir_t *d, uint64_t key, int *fd, uint64_t *len)
{
    char name[40];
    unsigned char h[PS_SEG_HDR];
    struct stat st;
    ps__seg_name(name, sizeof name, key);
    int err = ps__open_regular(d, name, fd);
    if (err)
        return err;
    int r = ps__pread_all(*fd, h, sizeof h, 0);
    if (r == -EINTR || (r < 0 && r != PS_ECORRUPT))
        err = ps__errf(r, "read %s/%s: %s", d->path, name, strerror(-r));
    else if (r || memcmp(h, PS_SEG_MAGIC, 4))
        err = ps__errf(PS_ECORRUPT, "%s/%s: not a segment file (bad header)", d->path, name);
    else if (get_u32(h + 4) != PS_SEG_VERSION)
        err = ps__errf(PS_ECORRUPT, "%s/%s: segment format %u, this version reads %d", d->path, name, get_u32(h + 4),
                       PS_SEG_VERSION);
    else if (get_u64(h + 8) != PS_SEG_EPOCH(key) || get_u32(h + 16) != (uint32_t)PS_SEG_RANK(key) || get_u32(h + 20))
        err = ps__errf(PS_ECORRUPT, "%s/%s: header names epoch %" PRIu64 " rank %u (reserved %u)", d->path, name,
                       get_u64(h + 8), get_u32(h + 16), get_u32(h + 20));
    else if (fstat(*fd, &st) || (uint64_t)st.st_size != PS_SEG_HDR + get_u64(h + 24))
        err = ps__errf(PS_ECORRUPT, "%s/%s: %lld bytes, its header says %" PRIu64, d->path, name,
                       (long long)st.st_size, PS_SEG_HDR + get_u64(h + 24));
    if (err) {
        close(*fd);
        *fd = -1;
        return err;
    }
    *len = get_u64(h + 24);
    return 0;
}

static int bounds(const ps__dir_t *d, const ps__entry_t *e, uint64_t len)
{
    if (e->off < PS_SEG_HDR || e->off - PS_SEG_HDR > len || e->size > len - (e->off - PS_SEG_HDR)) {
        char path[4300];
        ps__sample_path(path, sizeof path, d->path, e);
        return ps__errf(PS_ECORRUPT, "%s: sample %#" PRIx64 " (%" PRIu64 " bytes at %" PRIu64 ") lies beyond the "
                        "segment's %" PRIu64 " bytes", path, e->id, e->size, e->off, PS_SEG_HDR + len);
    }
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int ps__seg_keys(const ps__entry_t *ent, uint64_t n, uint64_t **keys, size_t *nk)
{
    *nk = 0;
    *keys = malloc((n ? n : 1) * sizeof **keys);
    if (!*keys)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++)
        (*keys)[i] = ent[i].seg;
    if (n)
        qsort(*keys, n, sizeof **keys, cmp_key);
    for (uint64_t i = 0; i < n; i++)
        if (!*nk || (*keys)[*nk - 1] != (*keys)[i])
            (*keys)[(*nk)++] = (*keys)[i];
    return 0;
}

void ps__seg_close_all(ps__dir_t *d)
{
    ps__seg_drop(d);
    for (size_t i = 0; i < d->nsegs; i++)
        if (d->segs[i].fd >= 0)
            close(d->segs[i].fd);
    free(d->segs);
    free(d->wbase);
    free(d->moves);
    d->segs = NULL;
    d->wbase = NULL;
    d->moves = NULL;
    d->nsegs = d->capsegs = d->nmoves = d->capmoves = 0;
}

int ps__seg_load(ps__dir_t *d, const ps__entry_t *ent, uint64_t n)
{
    uint64_t *keys;
    size_t nk;
    int err = ps__seg_keys(ent, n, &keys, &nk);
    if (err)
        return err;
    ps__seg_close_all(d);
    for (size_t i = 0; i < nk && !err; i++) {
        int fd;
        uint64_t len;
        if (!(err = open_checked(d, keys[i], &fd, &len))) {
            close(fd);
            err = insert(d, keys[i], len, 0);
        }
    }
    free(keys);
    for (uint64_t i = 0; i < n && !err; i++) {
        long k = find(d, ent[i].seg);
        err = bounds(d, &ent[i], d->segs[k].len);
    }
    if (err)
        ps__seg_close_all(d);
    return err;
}

int ps__seg_create(ps__dir_t *d, uint64_t key, int parts)
{
    char tmp[64];
    if (d->wfd >= 0 || find(d, key) >= 0)
        return ps__errf(PS_ESTATE, "%s: segment %#" PRIx64 " is written twice", d->path, key);
    free(d->wbase);
    d->wbase = calloc((size_t)(parts > 0 ? parts : 1), sizeof *d->wbase);
    if (!d->wbase)
        return -ENOMEM;
    d->wparts = parts;
    tmp_name(tmp, sizeof tmp, key);
    int err = ps__create_tmp(d, tmp, &d->wfd);
    if (err)
        return err;
    d->wkey = key;
    d->wend = PS_SEG_HDR;
    d->nmoves = 0;
    return 0;
}

uint64_t ps__seg_reserve(ps__dir_t *d, int part, uint64_t len)
{
    if (d->wfd < 0)
        return PS_SEG_HDR; /* its creation failed: the exchange fails */
    uint64_t at = d->wend;
    if (part >= 0 && part < d->wparts)
        d->wbase[part] = at;
    d->wend += len;
    return at;
}

static int write_err(const ps__dir_t *d, int err)
{
    char tmp[64];
    tmp_name(tmp, sizeof tmp, d->wkey);
    return ps__errf(err, "write %s/%s: %s", d->path, tmp, strerror(-err));
}

int ps__seg_pwrite_part(ps__dir_t *d, int part, uint64_t off, const void *buf, size_t len)
{
    int err = ps__pwrite_all(d->wfd, buf, len, d->wbase[part] + off);
    return err ? write_err(d, err) : 0;
}

int ps__seg_add(ps__dir_t *d, uint64_t key, ps__entry_t *e, const void *data)
{
    int err;
    if (d->wfd < 0 && (err = ps__seg_create(d, key, 0)))
        return err;
    e->seg = d->wkey;
    e->off = ps__seg_reserve(d, -1, e->size);
    if (e->size && (err = ps__pwrite_all(d->wfd, data, e->size, e->off))) {
        d->wend -= e->size;
        return write_err(d, err);
    }
    return 0;
}

int ps__seg_plan_moves(ps__dir_t *d, ps__entry_t *ent, uint64_t n, uint64_t key)
{
    if (!d->nsegs)
        return 0;
    uint64_t *live = calloc(d->nsegs, sizeof *live);
    if (!live)
        return -ENOMEM;
    int err = 0;
    for (uint64_t i = 0; i < n; i++) {
        long k = ent[i].seg == d->wkey && d->wfd >= 0 ? -1 : find(d, ent[i].seg);
        if (k >= 0)
            live[k] += ent[i].size;
    }
    for (uint64_t i = 0; i < n && !err; i++) {
        long k = ent[i].seg == d->wkey && d->wfd >= 0 ? -1 : find(d, ent[i].seg);
        if (k < 0 || 2 * live[k] >= d->segs[k].len)
            continue;
        if (d->wfd < 0 && (err = ps__seg_create(d, key, 0)))
            break;
        if (d->nmoves == d->capmoves) {
            size_t cap = d->capmoves ? 2 * d->capmoves : 256;
            ps__move_t *t = realloc(d->moves, cap * sizeof *t);
            if (!t) {
                err = -ENOMEM;
                break;
            }
            d->moves = t;
            d->capmoves = cap;
        }
        ps__move_t *m = &d->moves[d->nmoves++];
        m->from = ent[i].seg;
        m->from_off = ent[i].off;
        m->size = ent[i].size;
        m->to_off = ps__seg_reserve(d, -1, ent[i].size);
        ent[i].seg = d->wkey;
        ent[i].off = m->to_off;
    }
    free(live);
    return err;
}

/* The cached descriptor of table entry k, opened (and its header checked)
 * at first use. */
static int seg_fd(ps__dir_t *d, long k, int *fd)
{
    if (d->segs[k].fd < 0) {
        uint64_t len;
        int err = open_checked(d, d->segs[k].key, &d->segs[k].fd, &len);
        if (err)
            return err;
        if (len != d->segs[k].len) {
            close(d->segs[k].fd);
            d->segs[k].fd = -1;
            char name[40];
            ps__seg_name(name, sizeof name, d->segs[k].key);
            return ps__errf(PS_ECORRUPT, "%s/%s: changed size since it was opened", d->path, name);
        }
    }
    *fd = d->segs[k].fd;
    return 0;
}

int ps__seg_pread(ps__dir_t *d, const ps__entry_t *e, void *buf, size_t len, uint64_t off)
{
    long k = find(d, e->seg);
    char path[4300];
    int fd, err;
    if (k < 0) {
        ps__sample_path(path, sizeof path, d->path, e);
        return ps__errf(PS_ECORRUPT, "%s: segment of sample %#" PRIx64 " not in the store", path, e->id);
    }
    if ((err = seg_fd(d, k, &fd)) || (err = bounds(d, e, d->segs[k].len)))
        return err;
    if ((err = ps__pread_all(fd, buf, len, e->off + off))) {
        ps__sample_path(path, sizeof path, d->path, e);
        return err == PS_ECORRUPT ? ps__errf(err, "%s: truncated", path)
                                  : ps__errf(err, "read %s: %s", path, strerror(-err));
    }
    return 0;
}

/* Copies the planned moves into the segment being written. Through the
 * kernel (copy_file_range) where it can; the samples' checksums are in the
 * manifest and checked whenever they are read. */
static int do_moves(ps__dir_t *d)
{
    unsigned char *buf = NULL;
    int err = 0;
    for (size_t i = 0; i < d->nmoves && !err; i++) {
        const ps__move_t *m = &d->moves[i];
        long k = find(d, m->from);
        int fd;
        if (k < 0)
            return ps__errf(PS_ECORRUPT, "%s: segment %#" PRIx64 " not in the store", d->path, m->from);
        if ((err = seg_fd(d, k, &fd)))
            break;
        loff_t in = (loff_t)m->from_off, out = (loff_t)m->to_off;
        uint64_t left = m->size;
        while (left) {
            ssize_t c = copy_file_range(fd, &in, d->wfd, &out, left, 0);
            if (c <= 0)
                break;
            left -= (uint64_t)c;
        }
        /* Where the kernel cannot copy (another filesystem type, a short
         * copy), through a buffer. */
        while (left && !err) {
            size_t take = left < (64u << 10) ? (size_t)left : (64u << 10);
            if (!buf && !(buf = malloc(64u << 10)))
                err = -ENOMEM;
            else if ((err = ps__pread_all(fd, buf, take, (uint64_t)in)) ||
                     (err = ps__pwrite_all(d->wfd, buf, take, (uint64_t)out)))
                err = write_err(d, err == PS_ECORRUPT ? -EIO : err);
            in += (loff_t)take, out += (loff_t)take, left -= take;
        }
    }
    free(buf);
    return err;
}

int ps__seg_finish(ps__dir_t *d, int do_fsync)
{
    if (d->wfd < 0)
        return 0;
    char tmp[64], name[40];
    unsigned char h[PS_SEG_HDR] = {0};
    tmp_name(tmp, sizeof tmp, d->wkey);
    ps__seg_name(name, sizeof name, d->wkey);
    memcpy(h, PS_SEG_MAGIC, 4);
    put_u32(h + 4, PS_SEG_VERSION);
    put_u64(h + 8, PS_SEG_EPOCH(d->wkey));
    put_u32(h + 16, (uint32_t)PS_SEG_RANK(d->wkey));
    put_u64(h + 24, d->wend - PS_SEG_HDR);
    int err = do_moves(d);
    /* The file's size must be the header's, also when its last samples
     * are empty or a part was never written (a failed exchange is dropped
     * before this). */
    if (!err && ftruncate(d->wfd, (off_t)d->wend))
        err = write_err(d, -errno);
    if (!err && (err = ps__pwrite_all(d->wfd, h, sizeof h, 0)))
        err = write_err(d, err);
    if (!err && do_fsync && fsync(d->wfd))
        err = write_err(d, -errno);
    int fd = d->wfd;
    d->wfd = -1;
    if (close(fd) && !err)
        err = write_err(d, -errno);
    if (!err && renameat(d->fd, tmp, d->fd, name))
        err = ps__errf(-errno, "rename %s/%s: %s", d->path, tmp, strerror(errno));
    if (!err)
        err = insert(d, d->wkey, d->wend - PS_SEG_HDR, 1);
    if (err)
        unlinkat(d->fd, tmp, 0);
    d->nmoves = 0;
    return err;
}

void ps__seg_drop(ps__dir_t *d)
{
    if (d->wfd >= 0) {
        char tmp[64];
        tmp_name(tmp, sizeof tmp, d->wkey);
        close(d->wfd);
        d->wfd = -1;
        if (d->fd >= 0)
            unlinkat(d->fd, tmp, 0);
    }
    d->nmoves = 0;
    for (size_t i = 0; i < d->nsegs;) {
        if (!d->segs[i].pending) {
            i++;
            continue;
        }
        char name[40];
        ps__seg_name(name, sizeof name, d->segs[i].key);
        if (d->fd >= 0)
            unlinkat(d->fd, name, 0);
        if (d->segs[i].fd >= 0)
            close(d->segs[i].fd);
        memmove(&d->segs[i], &d->segs[i + 1], (d->nsegs - i - 1) * sizeof *d->segs);
        d->nsegs--;
    }
}

int ps__seg_gc(ps__dir_t *d, const ps__entry_t *ent, uint64_t n, void (*mid)(void *), void *arg)
{
    /* Committed: whatever happens below, no segment is pending any more
     * (ps__seg_drop() must not remove the one the manifest names). */
    for (size_t i = 0; i < d->nsegs; i++)
        d->segs[i].pending = 0;
    unsigned char *used = calloc(d->nsegs ? d->nsegs : 1, 1);
    if (!used) {
        if (mid)
            mid(arg);
        return -ENOMEM; /* the segments stay, removed by the next open */
    }
    for (uint64_t i = 0; i < n; i++) {
        long k = find(d, ent[i].seg);
        if (k >= 0)
            used[k] = 1;
    }
    size_t dead = 0, done = 0, w = 0;
    for (size_t i = 0; i < d->nsegs; i++)
        dead += !used[i];
    int err = 0;
    for (size_t i = 0; i < d->nsegs; i++) {
        if (mid && done == dead / 2) {
            mid(arg);
            mid = NULL;
        }
        if (used[i]) {
            d->segs[w++] = d->segs[i];
            continue;
        }
        char name[40];
        ps__seg_name(name, sizeof name, d->segs[i].key);
        if (d->segs[i].fd >= 0)
            close(d->segs[i].fd);
        if (unlinkat(d->fd, name, 0) && errno != ENOENT && !err)
            err = ps__errf(-errno, "unlink %s/%s: %s", d->path, name, strerror(errno));
        done++;
    }
    if (mid)
        mid(arg);
    d->nsegs = w;
    free(used);
    return err;
}

int ps__sample_read(const ps__dir_t *d, const ps__entry_t *e, void *buf, size_t cap)
{
    if (cap < e->size)
        return ps__errf(PS_EINVAL, "sample %#" PRIx64 ": buffer of %zu bytes for %" PRIu64, e->id, cap, e->size);
    int fd;
    uint64_t len;
    int err = open_checked(d, e->seg, &fd, &len);
    if (err)
        return err;
    char path[4300];
    ps__sample_path(path, sizeof path, d->path, e);
    if (!(err = bounds(d, e, len)) && (err = ps__pread_all(fd, buf, e->size, e->off)))
        err = err == PS_ECORRUPT ? ps__errf(err, "%s: truncated", path) : ps__errf(err, "read %s: %s", path,
                                                                                   strerror(-err));
    close(fd);
    if (!err && ps__hash(buf, e->size) != e->hash)
        err = ps__errf(PS_ECORRUPT, "%s: checksum mismatch (sample %#" PRIx64 ")", path, e->id);
    return err;
}
