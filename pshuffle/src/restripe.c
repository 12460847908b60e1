/* Rewriting a directory store for another number of ranks.
 *
 * A job that resumes a store written by M ranks with M' ranks has rank 0
 * rewrite it: the committed state (the epoch every rank can resume, as
 * ps_open() finds it) is dealt to M' rank directories built beside the
 * store, in a private sibling directory, by hard links to the sample
 * files (no payload is copied), with a manifest per new rank; once that is
 * durable, one renameat2(RENAME_EXCHANGE) swaps the sibling and the store.
 * The swap is the only step that changes the store, and it is atomic: a
 * crash before it leaves the old store whole, a crash after it the new
 * one; the sibling is garbage in both cases (every sample it holds is
 * linked from the store), and the next open removes it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Where the store and its staging sibling are: DIR = parent/base, the
 * sibling parent/.base.pshuffle-restripe. */
typedef struct {
    int pfd;
    char parent[4096];
    char base[256];
    char stage[300];
    char stagepath[4400];
} where_t;

static int locate(const char *root, where_t *w)
{
    char buf[4096];
    w->pfd = -1;
    if (snprintf(buf, sizeof buf, "%s", root) >= (int)sizeof buf)
        return ps__errf(-ENAMETOOLONG, "%s", root);
    size_t l = strlen(buf);
    while (l > 1 && buf[l - 1] == '/')
        buf[--l] = 0;
    char *slash = strrchr(buf, '/');
    const char *base = slash ? slash + 1 : buf;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || strlen(base) > 200)
        return ps__errf(PS_EINVAL, "store %s: name it by a path that ends in a directory name (not /, . or ..) to "
                        "resume it on another number of ranks", root);
    memcpy(w->base, base, strlen(base) + 1); /* at most 200 bytes, checked above */
    if (!slash)
        snprintf(w->parent, sizeof w->parent, ".");
    else if (slash == buf)
        snprintf(w->parent, sizeof w->parent, "/");
    else {
        *slash = 0;
        snprintf(w->parent, sizeof w->parent, "%s", buf);
    }
    snprintf(w->stage, sizeof w->stage, ".%s.pshuffle-restripe", w->base);
    snprintf(w->stagepath, sizeof w->stagepath, "%s/%s", w->parent, w->stage);
    w->pfd = open(w->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->pfd < 0)
        return ps__errf(-errno, "open %s: %s", w->parent, strerror(errno));
    return 0;
}

/* Removes the entries of directory fd (files, and directories holding
 * only files); links are removed, never followed. */
static int empty_dir(int fd, const char *path, int depth)
{
    int dfd = dup(fd);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return ps__errf(-errno, "open %s: %s", path, strerror(errno));
    }
    int err = 0;
    struct dirent *de;
    while (!err && (de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        if (!unlinkat(fd, n, 0) || errno == ENOENT)
            continue;
        if ((errno != EISDIR && errno != EPERM) || depth == 0) {
            err = ps__errf(-errno, "unlink %s/%s: %s", path, n, strerror(errno));
            break;
        }
        int sub = openat(fd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            err = ps__errf(-errno, "open %s/%s: %s", path, n, strerror(errno));
            break;
        }
        char sp[4600];
        snprintf(sp, sizeof sp, "%s/%s", path, n);
        err = empty_dir(sub, sp, depth - 1);
        close(sub);
        if (!err && unlinkat(fd, n, AT_REMOVEDIR))
            err = ps__errf(-errno, "rmdir %s: %s", sp, strerror(errno));
    }
    closedir(d);
    return err;
}

/* Removes the staging sibling, if any: only a directory of this user. */
static int remove_stage(const where_t *w)
{
    int fd = openat(w->pfd, w->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : ps__errf(-errno, "open %s: %s", w->stagepath, strerror(errno));
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) || st.st_uid != geteuid())
        err = ps__errf(-EPERM, "%s: not a directory of this user: remove it by hand", w->stagepath);
    if (!err)
        err = empty_dir(fd, w->stagepath, 1);
    close(fd);
    if (!err && unlinkat(w->pfd, w->stage, AT_REMOVEDIR) && errno != ENOENT)
        err = ps__errf(-errno, "rmdir %s: %s", w->stagepath, strerror(errno));
    return err;
}

int ps__restripe_cleanup(const char *root)
{
    where_t w;
    int err = locate(root, &w);
    if (err) { /* a store that cannot be rewritten has no sibling to remove */
        ps__errclear();
        err = 0;
    } else {
        err = remove_stage(&w);
    }
    if (w.pfd >= 0)
        close(w.pfd);
    return err;
}

static int is_sample_name(const char *n)
{
    uint64_t v;
    return ps__seg_parse_name(n, &v);
}

/* Links segment `key` of old rank directory `from` into `to` unless it is
 * there already (a segment is named by the epoch and rank that wrote it,
 * so the same name is the same file: another is refused). */
static int link_seg(const ps__dir_t *from, const ps__dir_t *to, uint64_t key)
{
    char name[40];
    ps__seg_name(name, sizeof name, key);
    if (!linkat(from->fd, name, to->fd, name, 0))
        return 0;
    int e = errno;
    struct stat a, b;
    if (e == EEXIST && !fstatat(from->fd, name, &a, AT_SYMLINK_NOFOLLOW) &&
        !fstatat(to->fd, name, &b, AT_SYMLINK_NOFOLLOW) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return 0;
    if (e == EEXIST)
        return ps__errf(PS_ECORRUPT, "store: %s/%s and another file of that name in a rank directory differ",
                        from->path, name);
    return ps__errf(-e, "link %s/%s: %s", from->path, name, strerror(e));
}

static int is_ours(const char *n)
{
    uint64_t v;
    char tail;
    return is_sample_name(n) || !strncmp(n, ".tmp.", 5) || !strcmp(n, "lock") ||
           (strlen(n) == 19 && sscanf(n, "manifest.%" SCNu64 "%c", &v, &tail) == 1);
}

/* Links the regular files of directory `from` that `keep` accepts into
 * `to`; anything else that is not "." or ".." and that `skip` does not
 * accept is refused before anything is written (with to < 0, only checks). */
static int link_extras(int from, const char *frompath, int to, int (*keep)(const char *), int (*skip)(int, const char *))
{
    int dfd = dup(from);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return ps__errf(-errno, "open %s: %s", frompath, strerror(errno));
    }
    rewinddir(d);
    int err = 0;
    struct dirent *de;
    while (!err && (de = readdir(d))) {
        const char *n = de->d_name;
        struct stat st;
        if (!strcmp(n, ".") || !strcmp(n, "..") || (skip && skip(from, n)))
            continue;
        if (fstatat(from, n, &st, AT_SYMLINK_NOFOLLOW)) {
            err = ps__errf(-errno, "stat %s/%s: %s", frompath, n, strerror(errno));
        } else if (!S_ISREG(st.st_mode)) {
            if (!keep(n))
                continue; /* the library's own names: the manifests decide */
            err = ps__errf(PS_ECORRUPT, "store %s/%s is not a regular file: move it out of the store to resume it on "
                           "another number of ranks", frompath, n);
        } else if (keep(n) && to >= 0 && linkat(from, n, to, n, 0)) {
            err = ps__errf(-errno, "link %s/%s: %s", frompath, n, strerror(errno));
        }
    }
    closedir(d);
    return err;
}

static int not_ours(const char *n) { return !is_ours(n); }

/* Top level of the store: rank directories are the library's; other
 * regular files travel with the store. */
static int is_rank_dir(int fd, const char *n)
{
    int k;
    char tail;
    struct stat st;
    return strlen(n) == 10 && sscanf(n, "rank-%5d%c", &k, &tail) == 1 && !fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) &&
           S_ISDIR(st.st_mode);
}

static int any_name(const char *n)
{
    (void)n;
    return 1;
}

int ps__restripe(const char *root, int m_old, int m_new, uint64_t seed, uint64_t params, int do_fsync,
                 ps_hook_fn hook, void *hook_arg)
{
    where_t w = {.pfd = -1};
    ps__dir_t *old = calloc((size_t)m_old, sizeof *old);
    ps__manifest_t *om = calloc((size_t)m_old, sizeof *om);
    ps__manifest_t *nm = calloc((size_t)m_new, sizeof *nm);
    ps__dir_t nd = PS__DIR_INIT, sd = PS__DIR_INIT;
    uint64_t *hi = calloc((size_t)m_old, sizeof *hi);
    char *prev = calloc((size_t)m_old, 1);
    uint64_t *keep = NULL, *target = NULL;
    int err = 0, staged = 0;
    if (!old || !om || !nm || !hi || !prev) {
        err = -ENOMEM;
        goto out;
    }
    for (int k = 0; k < m_old; k++)
        old[k] = (ps__dir_t)PS__DIR_INIT;
    if ((err = locate(root, &w)))
        goto out;
    if ((err = remove_stage(&w)))
        goto out;
    char host[128] = "?";
    if (gethostname(host, sizeof host))
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = 0;

    /* Every old rank directory, checked and locked as a job's own. */
    struct stat pst, rst;
    for (int k = 0; k < m_old; k++) {
        err = ps__dir_open(&old[k], root, k, PS__DIR_PRIVATE);
        if (err == -ENOENT) {
            char rd[4200];
            ps__rank_dir(rd, sizeof rd, root, k);
            err = ps__errf(PS_ENRANKS, "store %s was written by %d ranks and %s is not on this node (%s, rank 0): "
                           "resuming on %d ranks needs every rank directory in one filesystem; gather them there, or "
                           "run with %d ranks", root, m_old, rd, host, m_new, m_old);
        }
        if (err || (err = ps__dir_lock(&old[k])))
            goto out;
        /* Hard links need one filesystem: the store's rank directories
         * and the parent the sibling is made in. */
        if (fstat(w.pfd, &pst) || fstat(old[k].fd, &rst)) {
            err = ps__errf(-errno, "stat %s: %s", old[k].path, strerror(errno));
            goto out;
        }
        if (pst.st_dev != rst.st_dev) {
            err = ps__errf(PS_EINVAL, "store %s (or its %s) is a mount point: resuming on another number of ranks "
                           "rewrites the store beside it, on one filesystem; put the store in a directory under the "
                           "mount, or run with %d ranks", root, old[k].path, m_old);
            goto out;
        }
        uint64_t *eps = NULL;
        size_t n = 0;
        if ((err = ps__manifest_list(&old[k], &eps, &n)))
            goto out;
        if (!n) {
            err = ps__errf(PS_ECORRUPT, "store %s: %s has no manifest (the first load was interrupted?): start afresh "
                           "(resume = 0)", root, old[k].path);
            goto out;
        }
        hi[k] = eps[n - 1];
        prev[k] = n > 1 && eps[n - 2] + 1 == eps[n - 1];
        free(eps);
    }
    /* The epoch to resume, as ps_open() finds it for the same rank count. */
    uint64_t lo = UINT64_MAX, top = 0;
    for (int k = 0; k < m_old; k++) {
        lo = hi[k] < lo ? hi[k] : lo;
        top = hi[k] > top ? hi[k] : top;
    }
    if (top > lo + 1) {
        err = ps__errf(PS_ECORRUPT, "store %s: ranks are at epochs %" PRIu64 " and %" PRIu64
                       " (at most one apart after a crash)", root, lo, top);
        goto out;
    }
    uint64_t total = 0;
    for (int k = 0; k < m_old; k++) {
        if (hi[k] != lo && !prev[k]) {
            err = ps__errf(PS_ECORRUPT, "store %s: rank %d is at epoch %" PRIu64 " without the manifest of epoch %"
                           PRIu64 " needed to roll back", root, k, hi[k], lo);
            goto out;
        }
        if ((err = ps__manifest_read(&old[k], lo, &om[k])))
            goto out;
        if (om[k].rank != k || om[k].nranks != m_old || om[k].epoch != lo) {
            err = ps__errf(PS_ECORRUPT, "store %s: %s's manifest names rank %d of %d ranks, epoch %" PRIu64, root,
                           old[k].path, om[k].rank, om[k].nranks, om[k].epoch);
            goto out;
        }
        if (om[k].seed != seed || om[k].params != params) {
            err = ps__errf(PS_EMISMATCH, "store %s was written with seed %" PRIu64 " and Q schedule %s, unlike this "
                           "job", root, om[k].seed, om[k].qdesc);
            goto out;
        }
        if ((err = ps__seg_load(&old[k], om[k].ent, om[k].count)))
            goto out;
        /* Refuse what cannot travel before anything is written. */
        if ((err = link_extras(old[k].fd, old[k].path, -1, not_ours, NULL)))
            goto out;
        total += om[k].count;
    }
    if ((err = link_extras(old[0].rootfd, root, -1, any_name, is_rank_dir)))
        goto out;

    /* The deal: balanced counts (floor or ceil of N/M'), the larger shares
     * first to ranks that already hold more than the floor, then to the
     * lowest; a rank that keeps its directory keeps its samples up to its
     * share (ascending ids), and the rest is dealt in ascending rank and id
     * order to the ranks short of theirs, lowest rank first. Deterministic:
     * a function of the store and M' alone. */
    keep = calloc((size_t)m_new, sizeof *keep);
    target = calloc((size_t)m_new, sizeof *target);
    if (!keep || !target) {
        err = -ENOMEM;
        goto out;
    }
    uint64_t base = total / (uint64_t)m_new, extra = total % (uint64_t)m_new;
    for (int r = 0; r < m_new; r++)
        target[r] = base;
    for (int r = 0; r < m_new && extra; r++)
        if (r < m_old && om[r].count > base)
            target[r]++, extra--;
    for (int r = 0; r < m_new && extra; r++)
        if (target[r] == base)
            target[r]++, extra--;
    for (int r = 0; r < m_new; r++) {
        keep[r] = r < m_old ? (om[r].count < target[r] ? om[r].count : target[r]) : 0;
        nm[r] = (ps__manifest_t){.rank = r, .nranks = m_new, .epoch = lo, .seed = seed, .params = params,
                                 .count = target[r]};
        snprintf(nm[r].qdesc, sizeof nm[r].qdesc, "%s", om[0].qdesc);
        if (!(nm[r].ent = malloc((target[r] ? target[r] : 1) * sizeof *nm[r].ent))) {
            err = -ENOMEM;
            goto out;
        }
    }

    if (mkdirat(w.pfd, w.stage, 0700)) {
        err = ps__errf(-errno, "mkdir %s: %s", w.stagepath, strerror(errno));
        goto out;
    }
    staged = 1;
    if ((err = ps__dir_open(&sd, w.stagepath, -1, PS__DIR_PRIVATE)) ||
        (err = link_extras(old[0].rootfd, root, sd.rootfd, any_name, is_rank_dir)))
        goto out;
    int src = 0;
    uint64_t pos = keep[0]; /* rank 0 keeps its first keep[0]; the pool starts after them */
    for (int r = 0; r < m_new; r++) {
        if ((err = ps__dir_open(&nd, w.stagepath, r, PS__DIR_CREATE | PS__DIR_PRIVATE)))
            goto out;
        /* The application's files of a rank directory stay with it; a new
         * rank's directory gets rank 0's. */
        const ps__dir_t *from = &old[r < m_old ? r : 0];
        if ((err = link_extras(from->fd, from->path, nd.fd, not_ours, NULL)))
            goto out;
        uint64_t c = 0;
        for (; c < keep[r]; c++)
            nm[r].ent[c] = om[r].ent[c];
        for (; c < target[r]; c++) {
            /* The pool: ranks at or beyond M' give everything, the others
             * what is beyond their share. */
            while (src < m_old && pos >= om[src].count)
                src++, pos = src < m_new && src < m_old ? keep[src] : 0;
            if (src >= m_old) {
                err = ps__errf(PS_ECORRUPT, "store %s: the deal ran out of samples (a bug)", root);
                goto out;
            }
            nm[r].ent[c] = om[src].ent[pos];
            if ((err = link_seg(&old[src], &nd, om[src].ent[pos].seg)))
                goto out;
            pos++;
        }
        for (c = 0; c < keep[r]; c++)
            if ((err = link_seg(&old[r], &nd, nm[r].ent[c].seg)))
                goto out;
        qsort(nm[r].ent, nm[r].count, sizeof *nm[r].ent, ps__cmp_entry);
        /* The manifests are fsync'd by the sync below, not one by one. */
        if ((err = ps__manifest_write(&nd, &nm[r], 0)))
            goto out;
        if (do_fsync && fsync(nd.fd)) {
            err = ps__errf(-errno, "fsync %s: %s", nd.path, strerror(errno));
            goto out;
        }
        ps__dir_close(&nd);
    }
    /* Durable before the swap: every link, manifest and directory entry. */
    if (do_fsync && (syncfs(sd.rootfd) || fsync(sd.rootfd))) {
        err = ps__errf(-errno, "syncfs %s: %s", w.stagepath, strerror(errno));
        goto out;
    }
    if (hook)
        hook(hook_arg, PS_POINT_RESTRIPE_STAGED, lo);
    if (renameat2(w.pfd, w.base, w.pfd, w.stage, RENAME_EXCHANGE)) {
        int e = errno;
        err = ps__errf(-e, "swap %s and %s: %s%s", root, w.stagepath, strerror(e),
                       e == EINVAL || e == ENOSYS ? " (the filesystem has no renameat2 RENAME_EXCHANGE)" : "");
        goto out;
    }
    staged = 0; /* the sibling now holds the old store: garbage from here on */
    if (do_fsync && fsync(w.pfd)) {
        err = ps__errf(-errno, "fsync %s: %s", w.parent, strerror(errno));
        goto out;
    }
    if (hook)
        hook(hook_arg, PS_POINT_RESTRIPE_SWAPPED, lo);
    for (int k = 0; k < m_old; k++)
        ps__dir_close(&old[k]);
    ps__dir_close(&sd);
    /* A failure here leaves only garbage, which the next open removes. */
    remove_stage(&w);
    ps__errclear();
out:
    ps__dir_close(&nd);
    ps__dir_close(&sd);
    if (staged && w.pfd >= 0) {
        char saved[480];
        snprintf(saved, sizeof saved, "%s", ps_errdetail());
        remove_stage(&w);
        ps__errset(saved);
    }
    if (w.pfd >= 0)
        close(w.pfd);
    for (int k = 0; old && k < m_old; k++) {
        ps__dir_close(&old[k]);
        if (om)
            ps__manifest_free(&om[k]);
    }
    for (int r = 0; nm && r < m_new; r++)
        free(nm[r].ent);
    free(old), free(om), free(nm), free(hi), free(prev), free(keep), free(target);
    return err;
}
