/* Offline check of a directory store (the `pshuffle verify` command). It
 * picks the epoch the way ps_open() would after a crash, then reads every
 * sample back against its manifest. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void problem(ps_verify_t *v, const char *fmt, ...) PS_PRINTF(2, 3);
static void problem(ps_verify_t *v, const char *fmt, ...)
{
    if (v->first_problem[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->first_problem, sizeof v->first_problem, fmt, ap);
    va_end(ap);
}

static int count_rank_dirs(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return ps__errf(-errno, "open %s", dir);
    int max = -1, cnt = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int r;
        char tail;
        if (sscanf(de->d_name, "rank-%d%c", &r, &tail) == 1 && r >= 0 && strlen(de->d_name) == 10) {
            cnt++;
            if (r > max)
                max = r;
        }
    }
    closedir(d);
    if (cnt == 0)
        return ps__errf(PS_ENOSTORE, "%s: no rank-NNNNN directories", dir);
    if (max + 1 != cnt)
        return ps__errf(PS_ECORRUPT, "%s: %d rank directories but the highest is rank-%05d", dir, cnt, max);
    *n = cnt;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

PS_API int ps_verify_dir(const char *dir, ps_verify_t *v)
{
    memset(v, 0, sizeof *v);
    ps__errclear();
    int M = 0, err = count_rank_dirs(dir, &M);
    if (err)
        return err;
    v->nranks = M;
    char path[4300];
    uint64_t *hi = calloc((size_t)M, sizeof *hi), lo = UINT64_MAX, top = 0;
    ps__manifest_t *man = calloc((size_t)M, sizeof *man);
    /* The rank directories stay open: every file is read through them,
     * never by a path that a symbolic link could redirect. */
    ps__dir_t *rd = calloc((size_t)M, sizeof *rd);
    uint64_t *ids = NULL;
    void *buf = NULL;
    if (!hi || !man || !rd) {
        err = -ENOMEM;
        goto out;
    }
    for (int r = 0; r < M; r++)
        rd[r] = (ps__dir_t)PS__DIR_INIT;
    for (int r = 0; r < M; r++) {
        uint64_t *eps;
        size_t n;
        if ((err = ps__dir_open(&rd[r], dir, r, 0)))
            goto out;
        if ((err = ps__manifest_list(&rd[r], &eps, &n)))
            goto out;
        if (!n) {
            err = ps__errf(PS_ECORRUPT, "%s: no manifest", rd[r].path);
            goto out;
        }
        hi[r] = eps[n - 1];
        free(eps);
        lo = hi[r] < lo ? hi[r] : lo;
        top = hi[r] > top ? hi[r] : top;
    }
    if (top > lo + 1) {
        err = ps__errf(PS_ECORRUPT, "%s: ranks at epochs %" PRIu64 " and %" PRIu64, dir, lo, top);
        goto out;
    }
    v->epoch = lo;
    v->min_count = UINT64_MAX;
    uint64_t total = 0;
    for (int r = 0; r < M; r++) {
        ps__manifest_path(path, sizeof path, rd[r].path, lo);
        if ((err = ps__manifest_read(&rd[r], lo, &man[r])))
            goto out;
        if (man[r].nranks != M || man[r].rank != r) {
            err = ps__errf(PS_ECORRUPT, "%s: says rank %d of %d, the store has %d rank directories", path, man[r].rank,
                           man[r].nranks, M);
            goto out;
        }
        if (r && (man[r].seed != man[0].seed || man[r].params != man[0].params))
            problem(v, "rank %d: seed or Q schedule differs from rank 0's", r);
        total += man[r].count;
        v->min_count = man[r].count < v->min_count ? man[r].count : v->min_count;
        v->max_count = man[r].count > v->max_count ? man[r].count : v->max_count;
    }
    ids = malloc((total ? total : 1) * sizeof *ids);
    if (!ids) {
        err = -ENOMEM;
        goto out;
    }
    uint64_t k = 0;
    size_t cap = 0;
    for (int r = 0; r < M; r++) {
        for (uint64_t i = 0; i < man[r].count; i++) {
            const ps__entry_t *e = &man[r].ent[i];
            ids[k++] = e->id;
            v->samples++;
            v->bytes += e->size;
            if (e->size > cap || !buf) {
                free(buf);
                cap = e->size > cap ? e->size : cap;
                if (!(buf = malloc(cap ? cap : 1))) {
                    err = -ENOMEM;
                    goto out;
                }
            }
            int rerr = ps__sample_read(&rd[r], e, buf, cap);
            if (rerr == PS_ECORRUPT && strstr(ps_errdetail(), "missing")) {
                v->missing++;
                problem(v, "%s", ps_errdetail());
            } else if (rerr) {
                v->bad_checksum++;
                problem(v, "%s", ps_errdetail());
            }
        }
        /* Files no manifest of this epoch lists: leftovers of an
         * interrupted exchange, removed by the next ps_open(). */
        int dfd = dup(rd[r].fd);
        DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
        if (!d && dfd >= 0)
            close(dfd);
        if (d)
            rewinddir(d);
        struct dirent *de;
        uint64_t *keys = NULL;
        size_t nk = 0;
        if (d && ps__seg_keys(man[r].ent, man[r].count, &keys, &nk)) {
            closedir(d);
            err = -ENOMEM;
            goto out;
        }
        while (d && (de = readdir(d))) {
            uint64_t key;
            if (!ps__seg_parse_name(de->d_name, &key))
                continue;
            if (!bsearch(&key, keys, nk, sizeof key, cmp_u64))
                v->orphans++;
        }
        free(keys);
        if (d)
            closedir(d);
    }
    qsort(ids, total, sizeof *ids, cmp_u64);
    for (uint64_t i = 1; i < total; i++)
        if (ids[i] == ids[i - 1]) {
            v->duplicates++;
            problem(v, "sample id %#" PRIx64 " is held by more than one rank", ids[i]);
        }
    if (v->min_count == UINT64_MAX)
        v->min_count = 0;
    err = v->bad_checksum || v->missing || v->duplicates || v->first_problem[0] ? PS_ECORRUPT : 0;
    if (err)
        ps__errf(err, "%s", v->first_problem);
out:
    for (int r = 0; man && r < M; r++)
        ps__manifest_free(&man[r]);
    free(man);
    for (int r = 0; rd && r < M; r++)
        ps__dir_close(&rd[r]);
    free(rd);
    free(hi);
    free(ids);
    free(buf);
    return err;
}
