/* The shuffler: opening (with the collective consistency check and resume),
 * the initial partition, local reads and closing. It reaches the exchange
 * only through exchange.h, and the agreement among ranks through agree.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exchange.h"

PS_API void ps_config_init(ps_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->version = PS_CONFIG_VERSION;
    cfg->seed = 0;
    cfg->q.kind = PS_Q_CONST;
    cfg->q.q0 = 0.1;
    cfg->window_bytes = ps__env_window();
    cfg->fsync = 1;
    cfg->resume = 1;
    cfg->progress_thread = -1;
}

/* The environment variables the library reads, and what a good value is.
 * ps_open() checks them all, so that a typo is refused with one line
 * instead of silently giving a default. */
static int env_num(const char *s, double min, int integer, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min) || v > 1e18 || (integer && v != (double)(uint64_t)v))
        return -1;
    *out = v;
    return 0;
}

static int env_rank_point(const char *s, const char *const *points)
{
    char *end;
    errno = 0;
    long r = strtol(s, &end, 10);
    if (errno || end == s || r < 0 || *end != ':')
        return -1;
    for (; *points; points++)
        if (!strcmp(end + 1, *points))
            return 0;
    return -1;
}

/* The test-only variables (PS_TEST_HOOKS: the test build of the library,
 * never installed) are read and checked only there: the released library
 * has no fault injection a stray environment variable could trigger. */
enum { ENV_SECONDS, ENV_WINDOW, ENV_PROFILE, ENV_ALLOC_POINT, ENV_CORRUPT_POINT, ENV_BYTES_POS, ENV_BYTES };
static const struct {
    const char *name;
    const char *want;
    int kind;
} env_table[] = {
    {"PSHUFFLE_TIMEOUT", "a number of seconds > 0", ENV_SECONDS},
    {"PSHUFFLE_WINDOW", "a size from 1K to 1G (an integer of bytes with an optional K, M or G suffix)", ENV_WINDOW},
    {"PSHUFFLE_PROFILE", "0, 1 or cpu", ENV_PROFILE},
#ifdef PS_TEST_HOOKS
    {"PSHUFFLE_TEST_FAIL_ALLOC", "RANK:begin or RANK:chunk", ENV_ALLOC_POINT},
    {"PSHUFFLE_TEST_CORRUPT", "RANK:direct, RANK:packed or RANK:header", ENV_CORRUPT_POINT},
    {"PSHUFFLE_TEST_DIRECT", "a number of bytes > 0", ENV_BYTES_POS},
    {"PSHUFFLE_TEST_MSG", "a number of bytes > 0", ENV_BYTES_POS},
    {"PSHUFFLE_TEST_ENOSPC_AFTER", "a number of bytes", ENV_BYTES},
#endif
};

static int env_check(void)
{
    static const char *const alloc_points[] = {"begin", "chunk", NULL};
    static const char *const corrupt_points[] = {"direct", "packed", "header", NULL};
    for (size_t i = 0; i < sizeof env_table / sizeof env_table[0]; i++) {
        const char *s = getenv(env_table[i].name);
        double v;
        if (!s || !*s)
            continue;
        int bad;
        switch (env_table[i].kind) {
        case ENV_SECONDS: bad = env_num(s, 1e-3, 0, &v); break;
        case ENV_WINDOW: bad = ps__env_window() < PS_MIN_WINDOW; break;
        case ENV_PROFILE: bad = strcmp(s, "0") && strcmp(s, "1") && strcmp(s, "cpu"); break;
        case ENV_ALLOC_POINT: bad = env_rank_point(s, alloc_points); break;
        case ENV_CORRUPT_POINT: bad = env_rank_point(s, corrupt_points); break;
        case ENV_BYTES_POS: bad = env_num(s, 1, 1, &v); break;
        default: bad = env_num(s, 0, 1, &v); break;
        }
        if (bad)
            return ps__errf(PS_EINVAL, "%s=%s: expected %s", env_table[i].name, s, env_table[i].want);
    }
    return 0;
}

static int entries_grow(ps_shuffler_t *ps, uint64_t need)
{
    if (need <= ps->cap)
        return 0;
    uint64_t cap = ps->cap ? ps->cap : 64;
    while (cap < need)
        cap *= 2;
    ps__entry_t *t = realloc(ps->ent, cap * sizeof *t);
    if (!t)
        return -ENOMEM;
    ps->ent = t;
    ps->cap = cap;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Removes the files this library writes from a rank directory; with `keep`
 * set, keeps the segments its samples are in and its manifest
 * (keep->epoch). */
static int clean_rankdir(const ps__dir_t *dir, const ps__manifest_t *keep)
{
    uint64_t *keys = NULL;
    size_t nk = 0;
    if (keep && ps__seg_keys(keep->ent, keep->count, &keys, &nk))
        return ps__errf(-ENOMEM, "listing %s", dir->path);
    int dfd = dup(dir->fd);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        free(keys);
        return ps__errf(-e, "open %s: %s", dir->path, strerror(e));
    }
    rewinddir(d); /* the duplicate shares the offset of an earlier listing */
    int err = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        size_t l = strlen(n);
        int ours = 0;
        uint64_t v;
        char tail;
        if (ps__seg_parse_name(n, &v)) {
            ours = !keep || !bsearch(&v, keys, nk, sizeof v, cmp_u64);
        } else if (!strncmp(n, ".tmp.", 5)) {
            ours = 1;
        } else if (l == 19 && sscanf(n, "manifest.%" SCNu64 "%c", &v, &tail) == 1) {
            /* Older manifests go too: every rank agreed to resume from
             * keep->epoch, so none can roll back below it, and one left by
             * a crash while the previous exchange was deleting would
             * otherwise stay forever. */
            ours = !keep || v != keep->epoch;
        }
        if (!ours)
            continue;
        if (unlinkat(dir->fd, n, 0) && errno != ENOENT && !err)
            err = ps__errf(-errno, "unlink %s/%s: %s", dir->path, n, strerror(errno));
    }
    closedir(d);
    free(keys);
    return err;
}

/* A fresh start in a directory that held a store of more ranks: the rank
 * directories beyond this job's would make the store look like more ranks.
 * Each is checked and locked as this job's own are before it is emptied. */
static int clean_extra_ranks(ps_shuffler_t *ps)
{
    for (int r = ps->nranks;; r++) {
        ps__dir_t d;
        int err = ps__dir_open(&d, ps->root, r, PS__DIR_PRIVATE);
        if (err == -ENOENT)
            return 0;
        if (!err && !(err = ps__dir_lock(&d)) && !(err = clean_rankdir(&d, NULL)) &&
            (unlinkat(d.fd, "lock", 0) || unlinkat(d.rootfd, d.path + strlen(d.root) + 1, AT_REMOVEDIR)))
            err = ps__errf(-errno, "rmdir %s: %s", d.path, strerror(errno));
        ps__dir_close(&d);
        if (err)
            return err;
    }
}

/* What each rank brings to the opening check. Gathered on every rank, so
 * every rank reaches the same verdict and prints the same message. */
typedef struct {
    int32_t err;
    int32_t is_dir;
    uint64_t seed, params, window;
    int32_t has;         /* has a manifest */
    int32_t m_nranks, m_rank;
    int32_t has_prev;    /* manifest hi-1 present */
    uint64_t hi, m_seed, m_params, m_count;
    char qdesc[64], m_qdesc[64];
    char detail[480];        /* the error detail (ps_errdetail() holds up to 511 bytes) */
} open_info_t;

static int open_local(ps_shuffler_t *ps, open_info_t *me)
{
    uint64_t *eps = NULL;
    size_t n = 0;
    int err;
    if (!ps->resume)
        return 0;
    if ((err = ps__manifest_list(&ps->rankdir, &eps, &n)))
        return err;
    if (n) {
        char path[4300];
        ps__manifest_t m;
        ps__manifest_path(path, sizeof path, ps->rankdir.path, eps[n - 1]);
        if ((err = ps__manifest_read(&ps->rankdir, eps[n - 1], &m))) {
            free(eps);
            return err;
        }
        me->has = 1;
        me->hi = m.epoch;
        me->m_nranks = m.nranks;
        me->m_rank = m.rank;
        me->m_seed = m.seed;
        me->m_params = m.params;
        me->m_count = m.count;
        snprintf(me->m_qdesc, sizeof me->m_qdesc, "%s", m.qdesc);
        me->has_prev = n > 1 && eps[n - 2] + 1 == eps[n - 1];
        if (m.epoch != eps[n - 1] || m.rank != ps->rank)
            err = ps__errf(PS_ECORRUPT, "%s: names rank %d epoch %" PRIu64, path, m.rank, m.epoch);
        ps__manifest_free(&m);
    }
    free(eps);
    return err;
}

#define MISMATCH(field, what, fmt)                                                         \
    for (int r = 1; r < M; r++)                                                            \
        if (all[r].field != all[0].field)                                                  \
            return ps__errf(PS_EMISMATCH, what " differs across ranks: rank 0 has " fmt   \
                            ", rank %d has " fmt, all[0].field, r, all[r].field)

/* The verdict of the opening check; identical on every rank. Sets
 * *target to the epoch to resume (or UINT64_MAX for a fresh start). */
static int open_verdict(ps_shuffler_t *ps, const open_info_t *all, uint64_t *target, int *from)
{
    int M = ps->nranks;
    *target = UINT64_MAX;
    *from = 0;
    if (all[ps->rank].err)
        return ps__errf(all[ps->rank].err, "%s", all[ps->rank].detail);
    for (int r = 0; r < M; r++)
        if (all[r].err)
            return ps__errf(PS_EPEER, "rank %d: %s%s%s", r, ps_strerror(all[r].err), all[r].detail[0] ? ": " : "",
                            all[r].detail);
    MISMATCH(seed, "seed", "%" PRIu64);
    for (int r = 1; r < M; r++)
        if (all[r].params != all[0].params)
            return ps__errf(PS_EMISMATCH, "Q schedule differs across ranks: rank 0 has %s, rank %d has %s",
                            all[0].qdesc, r, all[r].qdesc);
    MISMATCH(window, "in-flight window (window_bytes)", "%" PRIu64);
    MISMATCH(is_dir, "store kind (1 = directory)", "%d");
    if (!all[0].is_dir || !ps->resume)
        return 0;
    int nhave = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < M; r++) {
        if (!all[r].has)
            continue;
        nhave++;
        if (all[r].m_nranks != M && *from && all[r].m_nranks != *from)
            return ps__errf(PS_ECORRUPT, "store %s: the manifests name %d and %d ranks", ps->root, *from,
                            all[r].m_nranks);
        if (all[r].m_nranks != M)
            *from = all[r].m_nranks;
        if (all[r].m_seed != ps->seed)
            return ps__errf(PS_EMISMATCH, "store %s was written with seed %" PRIu64 ", this job uses seed %" PRIu64,
                            ps->root, all[r].m_seed, ps->seed);
        if (all[r].m_params != ps->params)
            return ps__errf(PS_EMISMATCH, "store %s was written with Q schedule %s, this job uses %s", ps->root,
                            all[r].m_qdesc, all[ps->rank].qdesc);
        lo = all[r].hi < lo ? all[r].hi : lo;
        hi = all[r].hi > hi ? all[r].hi : hi;
    }
    if (nhave == 0)
        return 0;
    if (*from) {
        /* Written by another number of ranks: rank 0 rewrites the store
         * for this job's (ps__restripe), then every rank opens it again. */
        for (int r = 0; r < M; r++)
            if (all[r].has && all[r].m_nranks == M)
                return ps__errf(PS_ECORRUPT, "store %s: the manifests name %d and %d ranks", ps->root, *from, M);
        return 0;
    }
    if (nhave < M) {
        if (hi == 0)
            return 0; /* the initial load was interrupted: start afresh */
        for (int r = 0; r < M; r++)
            if (!all[r].has)
                return ps__errf(PS_ENRANKS, "store %s: rank %d has no manifest but others are at epoch %" PRIu64
                                " (written by fewer than this job's %d ranks?)", ps->root, r, hi, M);
    }
    if (hi > lo + 1)
        return ps__errf(PS_ECORRUPT, "store %s: ranks are at epochs %" PRIu64 " and %" PRIu64
                        " (at most one apart after a crash)", ps->root, lo, hi);
    for (int r = 0; r < M; r++)
        if (all[r].hi == lo + 1 && !all[r].has_prev)
            return ps__errf(PS_ECORRUPT, "store %s: rank %d is at epoch %" PRIu64 " without the manifest of epoch %"
                            PRIu64 " needed to roll back", ps->root, r, lo + 1, lo);
    *target = lo;
    return 0;
}
#undef MISMATCH

static int gather_counts(ps_shuffler_t *ps)
{
    uint64_t n = ps->n;
    free(ps->counts);
    ps->counts = malloc((size_t)ps->nranks * sizeof *ps->counts);
    if (!ps->counts)
        return -ENOMEM;
    if (MPI_Allgather(&n, 1, MPI_UINT64_T, ps->counts, 1, MPI_UINT64_T, ps->comm) != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Allgather of sample counts failed");
    return 0;
}

/* Loads manifest `epoch` as the committed state and removes everything
 * newer: samples received in an uncommitted exchange, later manifests. */
static int resume_local(ps_shuffler_t *ps, uint64_t epoch)
{
    ps__manifest_t m;
    int err = ps__manifest_read(&ps->rankdir, epoch, &m);
    if (err)
        return err;
    if ((err = clean_rankdir(&ps->rankdir, &m)))
        goto out;
    /* A missing or truncated segment is caught here rather than at the
     * first read, so a damaged store is refused at open. Checksums are
     * checked on read. */
    if ((err = ps__seg_load(&ps->rankdir, m.ent, m.count)))
        goto out;
    free(ps->ent);
    ps->ent = m.ent;
    ps->n = ps->cap = m.count;
    ps->bytes = 0;
    for (uint64_t i = 0; i < ps->n; i++)
        ps->bytes += ps->ent[i].size;
    m.ent = NULL;
    ps->epoch = epoch;
    ps->started = 1;
    ps->resumed = 1;
out:
    ps__manifest_free(&m);
    return err;
}

PS_API int ps_open_f(ps_shuffler_t **out, MPI_Fint comm, const ps_config_t *cfg)
{
    return ps_open(out, MPI_Comm_f2c(comm), cfg);
}

PS_API int ps_open(ps_shuffler_t **out, MPI_Comm comm, const ps_config_t *cfg)
{
    int inited = 0, err = 0;
    *out = NULL;
    ps__errclear();
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited)
        return ps__errf(PS_ESTATE, "MPI is not initialised (call MPI_Init first)");
    if (!cfg || cfg->version != PS_CONFIG_VERSION)
        return ps__errf(PS_EINVAL, "configuration missing or of another version (use ps_config_init)");
    ps_shuffler_t *ps = calloc(1, sizeof *ps);
    if (!ps)
        return -ENOMEM;
    ps->rankdir = (ps__dir_t)PS__DIR_INIT;
    if (MPI_Comm_dup(comm, &ps->comm) != MPI_SUCCESS) {
        free(ps);
        return ps__errf(PS_EMPI, "MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(ps->comm, MPI_ERRORS_RETURN);
    /* The exchange's rounds run on a communicator of their own: a rank may
     * enter ps_exchange_end() (a reduction on ps->comm) while its peers
     * still post rounds, and collectives on one communicator must come in
     * the same order on every rank. */
    if (MPI_Comm_dup(ps->comm, &ps->dcomm) != MPI_SUCCESS) {
        MPI_Comm_free(&ps->comm);
        free(ps);
        return ps__errf(PS_EMPI, "MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(ps->dcomm, MPI_ERRORS_RETURN);
    ps->hdrtype = MPI_DATATYPE_NULL;
    if (MPI_Type_contiguous(PS_WIRE_HDR, MPI_BYTE, &ps->hdrtype) != MPI_SUCCESS ||
        MPI_Type_commit(&ps->hdrtype) != MPI_SUCCESS)
        err = ps__errf(PS_EMPI, "MPI_Type_contiguous failed");
    MPI_Comm_rank(ps->comm, &ps->rank);
    MPI_Comm_size(ps->comm, &ps->nranks);
    ps->seed = cfg->seed;
    ps->q = cfg->q;
    ps->window = cfg->window_bytes;
    ps->fsync = cfg->fsync;
    ps->resume = cfg->resume;
    ps->hook = cfg->hook;
    ps->hook_arg = cfg->hook_arg;
    ps->progress_thread = cfg->progress_thread;
    /* A bad value is refused below (env_check), after the gather every
     * rank joins; until then the default stands. */
    const char *tmo = getenv("PSHUFFLE_TIMEOUT");
    ps->timeout_s = 300.0;
    if (tmo && *tmo && !env_num(tmo, 1e-3, 0, &ps->timeout_s) && ps->timeout_s > 1e9)
        ps->timeout_s = 1e9;
    const char *prof = getenv("PSHUFFLE_PROFILE");
    ps->profile = !prof || !*prof || !strcmp(prof, "0") ? 0 : !strcmp(prof, "cpu") ? 2 : 1;
    pthread_mutex_init(&ps->mu, NULL);

    open_info_t me;
    memset(&me, 0, sizeof me);
    /* Local checks first; their failure is reported through the gather
     * below, so a bad value on one rank never leaves the others waiting. */
    if (!err)
        err = env_check();
    if (!err)
        err = ps_schedule_check(&cfg->q);
    if (!err && cfg->q.kind == PS_Q_TABLE) {
        ps->q.q_table = ps->qtable = malloc(cfg->q.q_table_len * sizeof *ps->qtable);
        if (!ps->qtable)
            err = -ENOMEM;
        else
            memcpy(ps->qtable, cfg->q.q_table, cfg->q.q_table_len * sizeof *ps->qtable);
    }
    if (!err && cfg->progress_thread) {
        int level = MPI_THREAD_SINGLE;
        MPI_Query_thread(&level);
        if (cfg->progress_thread < 0)
            ps->progress_thread = level >= MPI_THREAD_MULTIPLE; /* auto */
        else if (level < MPI_THREAD_MULTIPLE)
            err = ps__errf(PS_EINVAL, "a progress thread needs MPI_THREAD_MULTIPLE (initialise MPI with "
                                      "MPI_Init_thread)");
    }
    if (!err && (cfg->window_bytes < PS_MIN_WINDOW || cfg->window_bytes > PS_MAX_WINDOW)) {
        const char *env = getenv("PSHUFFLE_WINDOW");
        err = ps__errf(PS_EINVAL, "in-flight window %" PRIu64 " outside 1 KiB .. 1 GiB%s%s%s", cfg->window_bytes,
                       env && *env ? " (PSHUFFLE_WINDOW=" : "", env && *env ? env : "", env && *env ? ")" : "");
    }
    ps->params = err ? 0 : ps__params_hash(ps->seed, &ps->q);
    if (!err && cfg->store_dir) {
        if (!*cfg->store_dir)
            err = ps__errf(PS_EINVAL, "empty store directory name");
        else if (!(ps->root = strdup(cfg->store_dir)))
            err = -ENOMEM;
    }
    uint64_t target;
    for (int pass = 0;; pass++) {
        /* The directories are checked and locked before anything in them is
         * read or removed. One that does not exist holds nothing to resume: it
         * is created after the verdict, so that a refused job leaves no trace
         * in the store. */
        if (!err && ps->root) {
            if ((err = ps__dir_open(&ps->rankdir, ps->root, ps->rank, PS__DIR_PRIVATE)) == -ENOENT) {
                ps__errclear();
                err = 0;
            } else if (!err && !(err = ps__dir_lock(&ps->rankdir))) {
                err = open_local(ps, &me);
            }
        }
        me.err = err;
        me.is_dir = cfg->store_dir != NULL;
        me.seed = ps->seed;
        me.params = ps->params;
        me.window = ps->window;
        ps__schedule_desc(&ps->q, me.qdesc, sizeof me.qdesc);
        if (err)
            snprintf(me.detail, sizeof me.detail, "%s", ps_errdetail());

        open_info_t *all = calloc((size_t)ps->nranks, sizeof *all);
        if (!all) {
            err = -ENOMEM; /* cannot take part in the gather: the job is lost anyway */
            goto fail;
        }
        if (MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, ps->comm) != MPI_SUCCESS) {
            free(all);
            err = ps__errf(PS_EMPI, "MPI_Allgather of the opening check failed");
            goto fail;
        }
        int from;
        err = open_verdict(ps, all, &target, &from);
        free(all);
        if (err)
            goto fail;
        if (!from)
            break;
        if (pass) { /* the same verdict on every rank */
            err = ps__errf(PS_ECORRUPT, "store %s still holds manifests of %d ranks after it was rewritten", ps->root,
                           from);
            goto fail;
        }
        /* Every rank releases its lock before rank 0 takes them all. */
        ps__dir_close(&ps->rankdir);
        if ((err = ps__agree(ps, 0, 0)))
            goto fail;
        err = ps->rank ? 0 : ps__restripe(ps->root, from, ps->nranks, ps->seed, ps->params, ps->fsync, ps->hook,
                                          ps->hook_arg);
        if ((err = ps__agree(ps, err, 0)))
            goto fail;
        memset(&me, 0, sizeof me);
    }
    if (ps->root) {
        if (target != UINT64_MAX)
            err = resume_local(ps, target);
        else if ((ps->rankdir.fd >= 0 ||
                  (!(err = ps__dir_open(&ps->rankdir, ps->root, ps->rank, PS__DIR_CREATE | PS__DIR_PRIVATE)) &&
                   !(err = ps__dir_lock(&ps->rankdir)))) &&
                 !(err = clean_rankdir(&ps->rankdir, NULL)) && ps->rank == 0)
            err = clean_extra_ranks(ps);
    }
    /* What a rewrite for another rank count interrupted after its swap
     * left beside the store (garbage: the store links every sample). */
    if (!err && ps->root && ps->rank == 0)
        err = ps__restripe_cleanup(ps->root);
    if ((err = ps__agree(ps, err, 0)))
        goto fail;
    if (ps->started && (err = ps__agree(ps, gather_counts(ps), 0)))
        goto fail;
    *out = ps;
    return 0;
fail:
    ps_close(ps);
    return err;
}

PS_API void ps_close(ps_shuffler_t *ps)
{
    if (!ps)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (ps->x && !fin && ps->nranks > 1) {
        /* The peers expect this rank's messages: if they all close too the
         * exchange is dropped; if any is in ps_exchange_end, the calls
         * differ and the job ends with a message instead of a hang. */
        int err = ps__sync(ps, PS_OP_CLOSE, ps->x->epoch);
        if (err)
            ps__fatal(ps, err, "ps_close");
        ps__xchg_drain(ps); /* a collective in flight cannot be cancelled */
    }
    ps__xchg_free(ps);
    ps__pool_free(ps);
    ps__arena_destroy(&ps->arena);
    free(ps->ent);
    free(ps->counts);
    free(ps->qtable);
    ps__dir_close(&ps->rankdir);
    free(ps->root);
    pthread_mutex_destroy(&ps->mu);
    if (ps->comm != MPI_COMM_NULL) {
        if (!fin) {
            MPI_Comm_free(&ps->comm);
            MPI_Comm_free(&ps->dcomm);
            if (ps->hdrtype != MPI_DATATYPE_NULL)
                MPI_Type_free(&ps->hdrtype);
        }
    }
    free(ps);
}

PS_API int ps_resumed(const ps_shuffler_t *ps) { return ps->resumed; }
PS_API uint64_t ps_epoch(const ps_shuffler_t *ps) { return ps->epoch; }
PS_API int ps_rank(const ps_shuffler_t *ps) { return ps->rank; }
PS_API int ps_nranks(const ps_shuffler_t *ps) { return ps->nranks; }
PS_API uint64_t ps_size(const ps_shuffler_t *ps) { return ps->n; }

PS_API uint64_t ps_total(const ps_shuffler_t *ps) { return ps__total(ps); }

PS_API int ps_add(ps_shuffler_t *ps, uint64_t id, int32_t label, const void *data, size_t len)
{
    if (ps->started)
        return ps__errf(PS_ESTATE, "ps_add after ps_start%s", ps->resumed ? " (the store was resumed)" : "");
    if (len > PS_MAX_SAMPLE)
        return ps__errf(PS_ETOOBIG, "sample %#" PRIx64 ": %zu bytes (limit 1 GiB)", id, len);
    if (len && !data)
        return ps__errf(PS_EINVAL, "sample %#" PRIx64 ": NULL data", id);
    int err = entries_grow(ps, ps->n + 1);
    if (err)
        return err;
    ps__entry_t e = {.id = id, .label = label, .size = len, .hash = ps__hash(data, len)};
    if (ps->root) {
        /* The initial load's samples go into one segment, seg.0.RANK. */
        if ((err = ps__seg_add(&ps->rankdir, PS_SEG_KEY(0, ps->rank), &e, data)))
            return err;
    } else {
        e.data = ps__arena_alloc(&ps->arena, len, &e.blk);
        if (!e.data)
            return -ENOMEM;
        if (len)
            memcpy(e.data, data, len);
    }
    ps->ent[ps->n++] = e;
    ps->bytes += len;
    return 0;
}

static int slurp(const char *path, void **out, size_t *len)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ps__errf(-errno, "open %s", path);
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        err = ps__errf(PS_EFORMAT, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > PS_MAX_SAMPLE) {
        err = ps__errf(PS_ETOOBIG, "%s: %lld bytes (limit 1 GiB)", path, (long long)st.st_size);
        goto out;
    }
    *len = (size_t)st.st_size;
    *out = malloc(*len ? *len : 1);
    if (!*out) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t got = 0; got < *len;) {
        ssize_t r = pread(fd, (char *)*out + got, *len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            err = ps__errf(r < 0 ? -errno : PS_EFORMAT, "read %s: %s", path, r < 0 ? strerror(errno) : "file shrank");
            break;
        }
        got += (size_t)r;
    }
out:
    close(fd);
    if (err) {
        free(*out);
        *out = NULL;
    }
    return err;
}

static void slice(const ps_shuffler_t *ps, uint64_t n, uint64_t *lo, uint64_t *hi)
{
    *lo = n * (uint64_t)ps->rank / (uint64_t)ps->nranks;
    *hi = n * (uint64_t)(ps->rank + 1) / (uint64_t)ps->nranks;
}

PS_API int ps_load_files(ps_shuffler_t *ps, const char *const *paths, size_t n, const int32_t *labels)
{
    ps__errclear();
    int err = ps__sync(ps, PS_OP_LOAD, 0);
    if (err)
        return err;
    err = ps->started ? ps__errf(PS_ESTATE, "ps_load_files after ps_start") : 0;
    uint64_t lo, hi;
    slice(ps, n, &lo, &hi);
    for (uint64_t i = lo; !err && i < hi; i++) {
        void *buf = NULL;
        size_t len = 0;
        if (!(err = slurp(paths[i], &buf, &len))) {
            err = ps_add(ps, i, labels ? labels[i] : -1, buf, len);
            free(buf);
        }
    }
    return ps__agree(ps, err, 0);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int load_packed_local(ps_shuffler_t *ps, const char *data_path, const char *index_path)
{
    int err = 0, dfd = -1, ifd = open(index_path, O_RDONLY | O_CLOEXEC);
    unsigned char hdr[16], rec[24];
    void *buf = NULL;
    struct stat ist, dst;
    if (ifd < 0)
        return ps__errf(-errno, "open %s", index_path);
    if ((dfd = open(data_path, O_RDONLY | O_CLOEXEC)) < 0) {
        err = ps__errf(-errno, "open %s", data_path);
        goto out;
    }
    if (fstat(ifd, &ist) || fstat(dfd, &dst)) {
        err = ps__errf(-errno, "stat %s", data_path);
        goto out;
    }
    if (pread(ifd, hdr, 16, 0) != 16 || memcmp(hdr, "PSIDX001", 8)) {
        err = ps__errf(PS_EFORMAT, "%s: not a pshuffle index (magic PSIDX001)", index_path);
        goto out;
    }
    uint64_t count = le64(hdr + 8);
    /* Bound count first: 16 + 24 * count wraps for counts above 2^60 and
     * could then equal the file size. */
    if (count > ((uint64_t)ist.st_size - 16) / 24 || (uint64_t)ist.st_size != 16 + 24 * count) {
        err = ps__errf(PS_EFORMAT, "%s: %lld bytes for %" PRIu64 " records (expected 16 + 24 per record)",
                       index_path, (long long)ist.st_size, count);
        goto out;
    }
    uint64_t lo, hi;
    slice(ps, count, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++) {
        if (pread(ifd, rec, 24, (off_t)(16 + 24 * i)) != 24) {
            err = ps__errf(PS_EFORMAT, "%s: record %" PRIu64 ": short read", index_path, i);
            goto out;
        }
        uint64_t off = le64(rec), size = le64(rec + 8);
        int64_t label = (int64_t)le64(rec + 16);
        if (size > PS_MAX_SAMPLE || off > (uint64_t)dst.st_size || size > (uint64_t)dst.st_size - off) {
            err = ps__errf(PS_EFORMAT, "%s: record %" PRIu64 ": bytes %" PRIu64 "+%" PRIu64 " outside %s (%lld bytes)",
                           index_path, i, off, size, data_path, (long long)dst.st_size);
            goto out;
        }
        if (label < INT32_MIN || label > INT32_MAX) {
            err = ps__errf(PS_EFORMAT, "%s: record %" PRIu64 ": label %" PRId64 " out of range", index_path, i, label);
            goto out;
        }
        free(buf);
        if (!(buf = malloc(size ? size : 1))) {
            err = -ENOMEM;
            goto out;
        }
        for (uint64_t got = 0; got < size;) {
            ssize_t r = pread(dfd, (char *)buf + got, size - got, (off_t)(off + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                err = ps__errf(r < 0 ? -errno : PS_EFORMAT, "read %s at %" PRIu64, data_path, off + got);
                goto out;
            }
            got += (uint64_t)r;
        }
        if ((err = ps_add(ps, i, (int32_t)label, buf, size)))
            goto out;
    }
out:
    free(buf);
    if (dfd >= 0)
        close(dfd);
    close(ifd);
    return err;
}

PS_API int ps_load_packed(ps_shuffler_t *ps, const char *data_path, const char *index_path)
{
    ps__errclear();
    int err = ps__sync(ps, PS_OP_LOAD, 0);
    if (err)
        return err;
    err = ps->started ? ps__errf(PS_ESTATE, "ps_load_packed after ps_start") : 0;
    if (!err)
        err = load_packed_local(ps, data_path, index_path);
    return ps__agree(ps, err, 0);
}

/* Ids must be unique across ranks: each id is sent, with its rank, to the
 * rank its hash names, which sorts what it gets and looks for neighbours
 * with the same id. O(n) per rank, two collectives. Called by every rank
 * (a local failure still takes part, with nothing to send). */
static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static int check_global_ids(ps_shuffler_t *ps, int local_err)
{
    int M = ps->nranks, err = 0;
    int *sc = calloc((size_t)M, sizeof *sc), *rc = calloc((size_t)M, sizeof *rc);
    int *sd = calloc((size_t)M, sizeof *sd), *rd = calloc((size_t)M, sizeof *rd);
    uint64_t *sb = malloc((2 * ps->n + 1) * sizeof *sb), *rb = NULL, n = local_err ? 0 : ps->n;
    if (!sc || !rc || !sd || !rd || !sb)
        n = 0, err = -ENOMEM; /* still takes part, with nothing to send */
    else if (ps->n > INT_MAX / 4)
        n = 0, err = ps__errf(PS_ETOOBIG, "rank %d: %" PRIu64 " samples (limit %d per rank)", ps->rank, ps->n,
                              INT_MAX / 4);
    int *fill = sc ? calloc((size_t)M, sizeof *fill) : NULL;
    if (sc && !fill)
        n = 0, err = -ENOMEM;
    int dummy[1] = {0};
    if (sc && fill) {
        for (uint64_t i = 0; i < n; i++)
            sc[ps__mix64(ps->ent[i].id) % (uint64_t)M] += 2;
        for (int r = 1; r < M; r++)
            sd[r] = sd[r - 1] + sc[r - 1];
        for (uint64_t i = 0; i < n; i++) {
            int d = (int)(ps__mix64(ps->ent[i].id) % (uint64_t)M);
            sb[sd[d] + fill[d]++] = ps->ent[i].id;
            sb[sd[d] + fill[d]++] = (uint64_t)ps->rank;
        }
    }
    if (MPI_Alltoall(sc ? sc : dummy, 1, MPI_INT, rc ? rc : dummy, 1, MPI_INT, ps->comm) != MPI_SUCCESS) {
        err = ps__errf(PS_EMPI, "MPI_Alltoall of id counts failed");
        goto out;
    }
    uint64_t tot = 0;
    for (int r = 0; rc && r < M; r++)
        rd[r] = (int)tot, tot += (uint64_t)rc[r];
    if (tot > INT_MAX)
        err = ps__errf(PS_ETOOBIG, "rank %d would check %" PRIu64 " ids", ps->rank, tot / 2);
    rb = malloc((tot + 1) * sizeof *rb);
    if (!rb && !err)
        err = -ENOMEM;
    if (MPI_Alltoallv(sb, sc, sd, MPI_UINT64_T, rb, rc, rd, MPI_UINT64_T, ps->comm) != MPI_SUCCESS) {
        err = ps__errf(PS_EMPI, "MPI_Alltoallv of ids failed");
        goto out;
    }
    if (!err && tot) {
        qsort(rb, tot / 2, 2 * sizeof *rb, cmp_pair);
        for (uint64_t i = 2; i < tot; i += 2)
            if (rb[i] == rb[i - 2]) {
                err = ps__errf(PS_EDUP, "sample id %#" PRIx64 " is on ranks %" PRIu64 " and %" PRIu64 " (ids must "
                               "be unique across ranks)", rb[i], rb[i - 1], rb[i + 1]);
                break;
            }
    }
out:
    free(sc), free(rc), free(sd), free(rd), free(sb), free(rb), free(fill);
    return err;
}

PS_API int ps_start(ps_shuffler_t *ps)
{
    ps__errclear();
    int err = ps__sync(ps, PS_OP_START, 0);
    if (err)
        return err;
    if (ps->started) {
        if (!ps->resumed)
            err = ps__errf(PS_ESTATE, "ps_start called twice");
        return ps__agree(ps, err, 0);
    }
    if (ps->n) /* an empty rank has no array */
        qsort(ps->ent, ps->n, sizeof *ps->ent, ps__cmp_entry);
    for (uint64_t i = 1; i < ps->n && !err; i++)
        if (ps->ent[i].id == ps->ent[i - 1].id)
            err = ps__errf(PS_EDUP, "rank %d: sample id %#" PRIx64 " added twice", ps->rank, ps->ent[i].id);
    /* Before anything is written: a duplicate found epochs later could not
     * be repaired, and every exchange after it would fail. */
    if (ps->nranks > 1) {
        int gerr = check_global_ids(ps, err);
        if (!err)
            err = gerr;
    }
    if (!err && ps->root) {
        ps__manifest_t m = {.rank = ps->rank, .nranks = ps->nranks, .epoch = 0, .seed = ps->seed,
                            .params = ps->params, .count = ps->n, .ent = ps->ent};
        ps__schedule_desc(&ps->q, m.qdesc, sizeof m.qdesc);
        err = ps__seg_finish(&ps->rankdir, ps->fsync);
        if (!err)
            err = ps__manifest_write(&ps->rankdir, &m, ps->fsync);
        if (!err)
            ps__seg_gc(&ps->rankdir, ps->ent, ps->n, NULL, NULL);
        if (!err && ps->hook)
            ps->hook(ps->hook_arg, PS_POINT_LOADED, 0);
    }
    if ((err = ps__agree(ps, err, 0)))
        return err;
    if ((err = ps__agree(ps, gather_counts(ps), 0)))
        return err;
    ps->started = 1;
    ps->epoch = 0;
    return 0;
}

PS_API int ps_info(const ps_shuffler_t *ps, uint64_t idx, ps_sample_t *out)
{
    if (idx >= ps->n)
        return ps__errf(PS_EINVAL, "sample index %" PRIu64 " >= %" PRIu64, idx, ps->n);
    const ps__entry_t *e = &ps->ent[idx];
    out->id = e->id;
    out->label = e->label;
    out->size = e->size;
    out->hash = e->hash;
    return 0;
}

PS_API int ps_read(const ps_shuffler_t *ps, uint64_t idx, void *buf, size_t cap)
{
    if (idx >= ps->n)
        return ps__errf(PS_EINVAL, "sample index %" PRIu64 " >= %" PRIu64, idx, ps->n);
    const ps__entry_t *e = &ps->ent[idx];
    if (ps->root)
        return ps__sample_read(&ps->rankdir, e, buf, cap);
    if (cap < e->size)
        return ps__errf(PS_EINVAL, "buffer of %zu bytes for a %" PRIu64 "-byte sample", cap, e->size);
    if (e->size)
        memcpy(buf, e->data, e->size);
    return 0;
}

PS_API int ps_ids(const ps_shuffler_t *ps, uint64_t *out, uint64_t n)
{
    ps__errclear();
    if (n != ps->n)
        return ps__errf(PS_EINVAL, "ps_ids for %" PRIu64 " samples, this rank holds %" PRIu64, n, ps->n);
    for (uint64_t i = 0; i < n; i++)
        out[i] = ps->ent[i].id;
    return 0;
}

PS_API int ps_order(const ps_shuffler_t *ps, uint64_t *out, uint64_t n)
{
    if (!ps->started)
        return ps__errf(PS_ESTATE, "ps_order before ps_start");
    if (n != ps->n)
        return ps__errf(PS_EINVAL, "order buffer of %" PRIu64 " for %" PRIu64 " samples", n, ps->n);
    ps_plan_order(out, n, ps->seed, ps->epoch, ps->rank);
    return 0;
}

PS_API int ps_stats(const ps_shuffler_t *ps, ps_stats_t *out)
{
    *out = ps->stats;
    return 0;
}

PS_API int ps_label_hist(const ps_shuffler_t *ps, uint64_t *bins, int nbins, uint64_t *other)
{
    if (nbins < 0 || (nbins && !bins))
        return ps__errf(PS_EINVAL, "histogram of %d bins", nbins);
    uint64_t o = 0;
    if (nbins)
        memset(bins, 0, (size_t)nbins * sizeof *bins);
    for (uint64_t i = 0; i < ps->n; i++) {
        int32_t l = ps->ent[i].label;
        if (l >= 0 && l < nbins)
            bins[l]++;
        else
            o++;
    }
    if (other)
        *other = o;
    return 0;
}
