/* One epoch's exchange: headers, payload rounds, commit.
 *
 * Two collectives carry the data. First one MPI_Ialltoallv of the sample
 * headers (id, label, size, checksum of every sample, in slot order; both
 * sides know the counts from the plan). Then the payload of each (sender,
 * receiver) pair, seen as one byte stream of its samples back to back,
 * moves in rounds: round k carries bytes [k*B, (k+1)*B) of every pair's
 * stream, B = window / 2 / (M-1), in one MPI_Ialltoallw. So a round moves
 * at most half the window out and half in, whatever the sample sizes (a
 * sample larger than B spans rounds), every MPI count stays below 2^31,
 * and every buffer is addressed by an absolute address (MPI_BOTTOM and a
 * one-block hindexed type per peer), so no displacement can overflow. The
 * number of rounds is the largest over all pairs; the senders know it, and
 * it travels in the same reduction that agrees to start.
 *
 * Per byte: the sender copies each sample once into the round's send
 * buffer and checks its checksum on the copy just written, slice by slice
 * while the slice is in cache (the sample is checked where it is read:
 * the memory store's copy, or the directory store's file). MPI moves the
 * contiguous buffer (one copy with Open MPI's single-copy shared memory).
 * A memory store receives straight into its own memory: the stream of
 * each peer lands in one arena block, where its samples stay. A directory
 * store receives into a round buffer and writes each sample's file from
 * it, checking the checksum on the slice just written.
 *
 * A memory store does not copy or read a sample of x->direct bytes or
 * more (64 KiB) on the sender: it sends it from where it lies, and the
 * receiver checks it as its messages complete (test_round()). Its rounds
 * are point-to-point messages instead of one collective (post_pair():
 * both sides cut a pair's piece of a round into the same messages of at
 * most 256 KiB, from the sample sizes, and post them in the same order;
 * runs of smaller samples still go through the send buffer, checked there,
 * one message per run). Each byte is thus checked once, against the
 * checksum taken when the sample entered the store. Streams are in ascending id order, so packing reads the store
 * forward and receivers merge sorted runs.
 *
 * Work is done by ps__step(): by the progress thread, by bounded
 * ps_progress() calls, or by ps_exchange_end(). When the headers arrive it
 * also builds the store of the next epoch (merging kept and received
 * entries), so that ps_exchange_end() has little left to do.
 *
 * Commit protocol (directory store): received samples are written as files
 * but are not in the manifest; each rank then writes the manifest of
 * epoch+1 atomically; all ranks agree that all committed; only then are
 * the sent samples' files and the old manifest deleted. A crash before the
 * agreement leaves every rank with its epoch manifest (some also with
 * epoch+1), and ps_open() rolls back to the lowest epoch. */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exchange.h"

/* Packing and storing work in slices of this size, so a slice is still in
 * cache when it is checksummed, and ps_progress() can stop between slices. */
#define SLICE (64u << 10)
/* A memory store sends a sample of at least this size straight from the
 * store, as messages of its own (Open MPI moves a contiguous message of
 * this size with one copy, by the receiver); smaller samples are packed
 * into the round's send buffer and sent in runs, as a message each costs
 * more than copying a few KiB. */
#define DIRECT (64u << 10)
#define TAG_ROUND 7
/* A memory store cuts its messages at this size (at sample boundaries
 * where the samples are smaller), so that the receiver checks a sample
 * soon after it lands, and a bounded ps_progress() call checks at most a
 * few messages. */
#define MSG_MAX (256u << 10)

/* Little-endian on the wire, whatever the host. */
static void put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}
static uint64_t hdr_size(const ps__peer_t *p, uint64_t j) { return get64(p->hdr + j * PS_WIRE_HDR + 16); }

/* The profile's clock: wall time, or with PSHUFFLE_PROFILE=cpu the
 * calling thread's CPU time (on a host shared by more ranks than cores,
 * the work each part costs, whoever else runs). */
static uint64_t prof_now(const ps_shuffler_t *ps)
{
    if (ps->profile != 2)
        return ps__now_ns();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* PSHUFFLE_PROFILE: adds the time since the last mark to `part`. */
static void prof(const ps_shuffler_t *ps, ps__xchg_t *x, int part)
{
    if (!ps->profile)
        return;
    uint64_t t = prof_now(ps);
    if (part >= 0)
        x->prof[part] += t - x->prof_t;
    x->prof_t = t;
}

static const char *const prof_names[PS_PROF_N] = {
    [PS_PROF_SYNC] = "sync", [PS_PROF_PLAN] = "plan", [PS_PROF_AGREE] = "agree", [PS_PROF_HDRWAIT] = "headers",
    [PS_PROF_ONHDR] = "merge", [PS_PROF_PACK] = "pack", [PS_PROF_POST] = "post", [PS_PROF_WAIT] = "wait",
    [PS_PROF_VERIFY] = "verify", [PS_PROF_ENDSYNC] = "endsync", [PS_PROF_COMMIT] = "commit",
    [PS_PROF_RELEASE] = "release", [PS_PROF_COMPACT] = "compact", [PS_PROF_FREE] = "free"};

/* One line per exchange on stderr, asked for with PSHUFFLE_PROFILE=1. */
static void prof_print(const ps_shuffler_t *ps, uint64_t epoch, const uint64_t *v)
{
    char line[600];
    size_t o = (size_t)snprintf(line, sizeof line, "pshuffle: rank %d: exchange of epoch %" PRIu64 " (ms):", ps->rank,
                                epoch);
    uint64_t tot = 0;
    for (int i = 0; i < PS_PROF_N && o < sizeof line; i++) {
        o += (size_t)snprintf(line + o, sizeof line - o, " %s %.2f", prof_names[i], (double)v[i] / 1e6);
        tot += v[i];
    }
    if (o < sizeof line)
        o += (size_t)snprintf(line + o, sizeof line - o, " total %.2f\n", (double)tot / 1e6);
    if (o >= sizeof line)
        o = sizeof line - 1;
    if (write(2, line, o) < 0)
        return;
}

static void hook(ps_shuffler_t *ps, int point)
{
    if (ps->hook)
        ps->hook(ps->hook_arg, point, ps->x ? ps->x->epoch : ps->epoch);
}

/* Keeps the first local failure of the exchange; it is reported when the
 * exchange ends, so that rounds keep flowing and no peer is left waiting. */
static void xfail(ps__xchg_t *x, int err, int secondary)
{
    if (x->err && !(x->err_secondary && !secondary))
        return;
    x->err = err;
    x->err_secondary = secondary;
    snprintf(x->errdetail, sizeof x->errdetail, "%s", ps_errdetail());
}

/* What a memory store may keep in spare blocks out of `budget`: the bytes
 * its blocks hold beyond the live samples (the holes samples left, which
 * compaction keeps within half the window) count against it. */
static size_t spare_room(const ps__arena_t *a, size_t budget)
{
    size_t holes = a->reserved - a->live;
    return holes < budget ? budget - holes : 0;
}

static void note_peak(ps_shuffler_t *ps, ps__xchg_t *x)
{
    uint64_t b = ps->bytes + x->staged_bytes + x->buf_bytes + ps->arena.spare_bytes;
    if (b > x->st.peak_bytes)
        x->st.peak_bytes = b;
}

static void drop_staged(ps_shuffler_t *ps, ps__xchg_t *x)
{
    if (ps->root)
        ps__seg_drop(&ps->rankdir); /* the exchange's segment, unless committed */
    for (uint64_t i = 0; i < x->nstaged && !ps->root; i++)
        ps__arena_free(&ps->arena, x->staged[i].blk, x->staged[i].size);
    x->nstaged = 0;
}

void ps__pool_free(ps_shuffler_t *ps)
{
    free(ps->keep);
    ps->keep = NULL;
    ps->keeplen = 0;
}

static void stop_thread(ps_shuffler_t *ps)
{
    if (!ps->thread_running)
        return;
    atomic_store(&ps->thread_stop, 1);
    pthread_join(ps->thread, NULL);
    ps->thread_running = 0;
}

static void free_types(ps_shuffler_t *ps, ps__xchg_t *x)
{
    for (int i = 0; x->types && i < 2 * ps->nranks; i++)
        if (x->types[i] != MPI_DATATYPE_NULL && x->types[i] != MPI_BYTE) {
            MPI_Type_free(&x->types[i]);
            x->types[i] = MPI_DATATYPE_NULL;
        }
}

static void free_peers(ps_shuffler_t *ps, ps__peer_t *p, int recv_side)
{
    (void)recv_side;
    for (int r = 0; p && r < ps->nranks; r++) {
        free(p[r].idx);
        if (p[r].hs)
            XXH3_freeState(p[r].hs);
        if (p[r].fd >= 0)
            close(p[r].fd);
    }
    free(p);
}

void ps__xchg_free(ps_shuffler_t *ps)
{
    ps__xchg_t *x = ps->x;
    stop_thread(ps);
    if (!x)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    /* A collective cannot be cancelled: one still in flight here belongs to
     * a job that is being aborted, and its buffers must outlive it. */
    int inflight = x->req != MPI_REQUEST_NULL;
    for (int i = 0; i < x->nreqs; i++)
        inflight |= x->reqs[i] != MPI_REQUEST_NULL;
    if (!fin && inflight)
        return;
    if (!fin)
        free_types(ps, x);
    drop_staged(ps, x);
    free(x->counts_after);
    free(x->types);
    free(x->reqs);
    free(x->reqlen);
    free(x->reqdone);
    free(x->outidx);
    free(x->staged);
    free(x->newent);
    free(x->sent);
    free(x->shdr);
    free(x->rhdr);
    free_peers(ps, x->sp, 0);
    free_peers(ps, x->rp, 1);
    /* The memory store keeps its send buffer for the next exchange (fresh
     * pages fault on first touch, which costs about as much as the copy);
     * the directory store keeps no payload in memory between epochs. */
    if (!ps->root && x->sbuf && !ps->keep) {
        ps->keep = x->sbuf;
        ps->keeplen = x->sbuflen;
    } else {
        free(x->sbuf);
    }
    free(x->rbuf);
    ps_plan_free(&x->plan);
    free(x);
    ps->x = NULL;
}

/* A round buffer. Called once the ranks agreed to exchange: the peers'
 * rounds are coming, and without a buffer this rank cannot take part, so a
 * failure ends the job with a message rather than leave peers waiting. */
static unsigned char *round_buf(ps_shuffler_t *ps, ps__xchg_t *x, unsigned char **buf, size_t *len, size_t need)
{
    if (*buf && *len >= need)
        return *buf;
    x->buf_bytes -= *len;
    free(*buf);
    *buf = NULL;
    *len = 0;
    if (buf == &x->sbuf && ps->keep && ps->keeplen < need)
        ps__pool_free(ps); /* too small: no reason to hold it beside a larger one */
    if (buf == &x->sbuf && ps->keep && ps->keeplen >= need) {
        *buf = ps->keep, *len = ps->keeplen;
        ps->keep = NULL, ps->keeplen = 0;
    } else {
        /* The memory store keeps its send buffer for the next exchange,
         * whose rounds differ in length: it takes the whole send half of
         * the window at once (pages never touched cost nothing). */
        size_t want = need;
        if (buf == &x->sbuf && !ps->root && need < ps->window / 2)
            want = ps->window / 2;
        if (!ps__fault(ps, "chunk") && (*buf = malloc(want ? want : 1)))
            *len = want;
    }
    if (!*buf) {
        ps__errf(-ENOMEM, "a %zu-byte round buffer for the exchange", need);
        ps__fatal(ps, -ENOMEM, "exchange");
    }
    x->buf_bytes += *len;
    note_peak(ps, x);
    return *buf;
}

/* Bytes of pair stream `p` in round k. */
static uint64_t piece(const ps__xchg_t *x, const ps__peer_t *p, uint64_t k)
{
    uint64_t lo = k * x->budget;
    if (lo >= p->len)
        return 0;
    return p->len - lo < x->budget ? p->len - lo : x->budget;
}

static int sender_check(ps_shuffler_t *ps, ps__xchg_t *x, const ps__entry_t *e, uint64_t h)
{
    if (h == e->hash)
        return 0;
    char path[4300];
    if (ps->root)
        ps__sample_path(path, sizeof path, ps->rankdir.path, e);
    else
        snprintf(path, sizeof path, "memory store");
    /* Sent anyway, so that no peer is left waiting; the exchange fails on
     * every rank when it ends. */
    ps__errf(PS_ECORRUPT, "%s: checksum mismatch (sample %#" PRIx64 ")", path, e->id);
    xfail(x, PS_ECORRUPT, 0);
    return PS_ECORRUPT;
}

/* Feeds the next @p take bytes of a sample cut into pieces (by the slicing,
 * a round or a message), at offset `off` in it, to the peer's running
 * checksum, started at its first byte. */
static void hash_part(ps_shuffler_t *ps, ps__peer_t *p, uint64_t off, const void *buf, size_t take)
{
    if (off == 0) {
        if (!p->hs && !(p->hs = XXH3_createState())) {
            ps__errf(-ENOMEM, "a checksum state");
            ps__fatal(ps, -ENOMEM, "exchange");
        }
        XXH3_64bits_reset(p->hs);
    }
    XXH3_64bits_update(p->hs, buf, take);
}

/* Copies the next slice of send stream `p` into the round buffer and
 * checks it. Returns 1 when the round's piece is complete. */
static int pack_slice(ps_shuffler_t *ps, ps__xchg_t *x, ps__peer_t *p)
{
    while (p->j < p->n && ps->ent[p->idx[p->j]].size == 0)
        p->j++; /* an empty sample has no payload (its header travelled) */
    if (p->rpos == p->rlen)
        return 1;
    const ps__entry_t *e = &ps->ent[p->idx[p->j]];
    uint64_t take = e->size - p->off;
    if (take > p->rlen - p->rpos)
        take = p->rlen - p->rpos;
    if (take > SLICE)
        take = SLICE;
    unsigned char *dst = x->sbuf + p->boff + p->rpos;
    /* Each byte is checked once, against the checksum taken when the
     * sample entered the store (it travels in the header), where that is
     * cheapest: a packed sample on the copy just written, while it is in
     * cache; a memory store's sample sent from where it lies (which the
     * sender does not read) by its receiver, as it arrives. */
    int check = ps->root || e->size < x->direct;
    int whole = p->off == 0 && take == e->size;
    if (ps->root) {
        int err = ps__seg_pread(&ps->rankdir, e, dst, take, p->off);
        if (err) {
            xfail(x, err, 0);
            memset(dst, 0, take);
        }
    } else if (e->size >= x->direct) {
        /* Sent from where it lies: nothing to do here. */
        take = e->size - p->off < p->rlen - p->rpos ? e->size - p->off : p->rlen - p->rpos;
    } else {
        memcpy(dst, (const unsigned char *)e->data + p->off, take);
    }
    if (check && whole) {
        sender_check(ps, x, e, ps__hash(dst, take));
    } else if (check) {
        hash_part(ps, p, p->off, dst, take);
    }
    p->off += take;
    p->rpos += take;
    if (p->off == e->size) {
        if (check && !whole)
            sender_check(ps, x, e, XXH3_64bits_digest(p->hs));
        if (p->fd >= 0) {
            close(p->fd);
            p->fd = -1;
        }
        p->j++;
        p->off = 0;
    }
    return p->rpos == p->rlen;
}

/* Directory store: writes this round's piece of receive stream `p` from
 * the round buffer into the exchange's segment (one write: the stream's
 * place in the segment was fixed when the headers arrived), then checks
 * the checksum of the next slice of it. Returns 1 when the piece is done. */
static int unpack_slice(ps_shuffler_t *ps, ps__xchg_t *x, int peer)
{
    ps__peer_t *p = &x->rp[peer];
    if (p->rpos == 0 && p->rlen && !x->err) {
        int err = ps__seg_pwrite_part(&ps->rankdir, peer, x->round * x->budget, x->rbuf + p->boff, p->rlen);
        if (err)
            xfail(x, err, 0);
    }
    while (p->j < p->n && hdr_size(p, p->j) == 0)
        p->j++; /* an empty sample has no payload */
    if (p->rpos == p->rlen)
        return 1;
    const unsigned char *h = p->hdr + p->j * PS_WIRE_HDR;
    ps__entry_t e = {.id = get64(h), .label = (int32_t)(uint32_t)get64(h + 8), .size = get64(h + 16),
                     .hash = get64(h + 24)};
    uint64_t take = e.size - p->off;
    if (take > p->rlen - p->rpos)
        take = p->rlen - p->rpos;
    if (take > SLICE)
        take = SLICE;
    const unsigned char *src = x->rbuf + p->boff + p->rpos;
    int whole = p->off == 0 && take == e.size;
    uint64_t hv = 0;
    if (whole) {
        hv = ps__hash(src, take);
    } else {
        hash_part(ps, p, p->off, src, take);
    }
    p->off += take;
    p->rpos += take;
    if (p->off == e.size) {
        if (!whole)
            hv = XXH3_64bits_digest(p->hs);
        if (hv != e.hash) {
            ps__errf(PS_ECORRUPT, "sample %#" PRIx64 " from rank %d arrived with a bad checksum", e.id, peer);
            xfail(x, PS_ECORRUPT, 1);
        }
        p->j++;
        p->off = 0;
    }
    return p->rpos == p->rlen;
}

static int cmp_entry(const void *a, const void *b) { return ps__cmp_entry(a, b); }

/* Sorts the received entries by id. Each peer's run arrives sorted (the
 * senders send in id order), so runs are merged pairwise, log2(M) linear
 * passes; a run out of order (which a correct peer never sends) falls back
 * to a sort. */
static void sort_staged(ps_shuffler_t *ps, ps__xchg_t *x)
{
    uint64_t k = x->nstaged, nr = 0;
    int M = ps->nranks;
    uint64_t *start = malloc(((size_t)M + 1) * sizeof *start);
    ps__entry_t *tmp = k ? malloc(k * sizeof *tmp) : NULL;
    int sorted = start && (tmp || !k);
    uint64_t o = 0;
    for (int r = 0; sorted && r < M; r++) {
        const ps__peer_t *p = &x->rp[r];
        for (uint64_t j = 1; j < p->n && sorted; j++)
            sorted = x->staged[o + j - 1].id < x->staged[o + j].id;
        if (p->n)
            start[nr++] = o;
        o += p->n;
    }
    if (!sorted) {
        if (k)
            qsort(x->staged, k, sizeof *x->staged, cmp_entry);
        free(start);
        free(tmp);
        return;
    }
    start[nr] = k;
    ps__entry_t *src = x->staged, *dst = tmp;
    while (nr > 1) {
        uint64_t w = 0;
        for (uint64_t i = 0; i < nr; i += 2) {
            /* Runs i and i+1 (the last run of an odd count is copied). */
            uint64_t a = start[i], ae = start[i + 1], b = ae, be = i + 1 < nr ? start[i + 2] : ae, d = a;
            while (a < ae && b < be)
                dst[d++] = src[a].id < src[b].id ? src[a++] : src[b++];
            while (a < ae)
                dst[d++] = src[a++];
            while (b < be)
                dst[d++] = src[b++];
            start[w++] = start[i];
        }
        start[w] = k;
        nr = w;
        ps__entry_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != x->staged)
        memcpy(x->staged, src, k * sizeof *src);
    free(start);
    free(tmp);
}

/* The headers arrived: check them, make room for the samples, and build
 * the store of the next epoch (kept entries merged with received ones),
 * all before the payload moves. */
static int on_headers(ps_shuffler_t *ps, ps__xchg_t *x)
{
    int M = ps->nranks;
    uint64_t k = 0;
    for (int r = 0; r < M; r++) {
        ps__peer_t *p = &x->rp[r];
        p->len = 0;
        for (uint64_t j = 0; j < p->n; j++) {
            uint64_t s = hdr_size(p, j);
            if (s > PS_MAX_SAMPLE)
                return ps__errf(PS_ECORRUPT, "headers from rank %d: sample size over 1 GiB", r);
            p->len += s;
        }
    }
    /* A directory store writes what it receives into one segment, each
     * peer's stream in one piece of it. */
    uint64_t skey = PS_SEG_KEY(x->epoch + 1, ps->rank);
    if (ps->root) {
        uint64_t nrecv = 0;
        for (int r = 0; r < M; r++)
            nrecv += x->rp[r].n;
        int err = 0;
        if (nrecv && x->epoch + 1 > PS_SEG_MAX_EPOCH)
            err = ps__errf(PS_EINVAL, "epoch %" PRIu64 ": beyond the directory store's epochs", x->epoch + 1);
        if (nrecv && !err)
            err = ps__seg_create(&ps->rankdir, skey, M);
        if (err)
            xfail(x, err, 0);
    }
    for (int r = 0; r < M; r++) {
        ps__peer_t *p = &x->rp[r];
        size_t live = 0;
        uint64_t sbase = ps->root && p->n ? ps__seg_reserve(&ps->rankdir, r, p->len) : 0;
        unsigned char *base = NULL;
        ps__block_t *blk = NULL;
        if (!ps->root && p->n) {
            for (uint64_t j = 0; j < p->n; j++)
                live += ps__arena_need(hdr_size(p, j));
            if (ps__fault(ps, "chunk") || !(base = ps__arena_region(&ps->arena, p->len, live, &blk))) {
                ps__errf(-ENOMEM, "%" PRIu64 " bytes for the samples from rank %d", p->len, r);
                ps__fatal(ps, -ENOMEM, "exchange");
            }
            p->region = base;
        }
        uint64_t off = 0;
        for (uint64_t j = 0; j < p->n; j++) {
            const unsigned char *h = p->hdr + j * PS_WIRE_HDR;
            ps__entry_t e = {.id = get64(h), .label = (int32_t)(uint32_t)get64(h + 8), .size = get64(h + 16),
                             .hash = get64(h + 24)};
            if (base) {
                e.data = base + off;
                e.blk = blk;
            } else if (ps->root) {
                e.seg = skey;
                e.off = sbase + off;
            }
            off += e.size;
            x->staged[k++] = e;
            x->staged_bytes += e.size;
        }
    }
    /* The regions took the spares that fit; the others may stay within
     * the receive half of the window (the memory store receives into its
     * regions, not into a round buffer), for the compaction after commit. */
    if (!ps->root)
        ps__arena_trim(&ps->arena, spare_room(&ps->arena, ps->window / 2));
    x->nstaged = k;
    if (ps->n + k > x->st.peak_samples)
        x->st.peak_samples = ps->n + k;
    note_peak(ps, x);
    sort_staged(ps, x);
    /* Merge: the kept entries are in ascending id order already. */
    uint64_t a = 0, b = 0, n = 0;
    for (;;) {
        while (a < ps->n && x->sent[a])
            a++;
        if (a == ps->n && b == k)
            break;
        if (n == x->plan.count_after) {
            n++;
            break;
        }
        if (b == k || (a < ps->n && ps->ent[a].id < x->staged[b].id)) {
            x->newent[n++] = ps->ent[a++];
        } else {
            if ((a < ps->n && ps->ent[a].id == x->staged[b].id) || (n && x->newent[n - 1].id == x->staged[b].id)) {
                x->commit_err = ps__errf(PS_EDUP, "rank %d: sample id %#" PRIx64 " received while already held",
                                         ps->rank, x->staged[b].id);
                snprintf(x->commit_detail, sizeof x->commit_detail, "%s", ps_errdetail());
                return 0;
            }
            x->newent[n++] = x->staged[b++];
        }
    }
    if (n != x->plan.count_after) {
        uint64_t total = 0;
        for (uint64_t i = 0; i < ps->n; i++)
            total += !x->sent[i];
        x->commit_err = ps__errf(PS_ECORRUPT, "rank %d would hold %" PRIu64 " samples after the exchange, the plan "
                                 "says %" PRIu64, ps->rank, total + k, x->plan.count_after);
        snprintf(x->commit_detail, sizeof x->commit_detail, "%s", ps_errdetail());
        return 0;
    }
    x->nnew = n;
    /* Kept samples of segments this exchange leaves less than half live
     * move into its segment (copied at the commit). */
    if (ps->root && !x->err) {
        int err = ps__seg_plan_moves(&ps->rankdir, x->newent, n, skey);
        if (err)
            xfail(x, err, 0);
    }
    return 0;
}

static int hindexed(void *addr, uint64_t len, MPI_Datatype *t)
{
    MPI_Aint a;
    int bl = (int)len;
    if (MPI_Get_address(addr, &a) != MPI_SUCCESS || MPI_Type_create_hindexed(1, &bl, &a, MPI_BYTE, t) != MPI_SUCCESS ||
        MPI_Type_commit(t) != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Type_create_hindexed of %" PRIu64 " bytes failed", len);
    return 0;
}

/* Sets up round x->round: pieces and buffers. */
static void round_setup(ps_shuffler_t *ps, ps__xchg_t *x)
{
    int M = ps->nranks;
    size_t so = 0, ro = 0;
    for (int r = 0; r < M; r++) {
        ps__peer_t *s = &x->sp[r], *p = &x->rp[r];
        s->rlen = piece(x, s, x->round), s->rpos = 0, s->boff = so, so += s->rlen;
        p->rlen = piece(x, p, x->round), p->rpos = 0, p->boff = ro, ro += p->rlen;
        s->j0 = s->j, s->off0 = s->off;
        p->j0 = p->j, p->off0 = p->off;
    }
    if (so)
        round_buf(ps, x, &x->sbuf, &x->sbuflen, so);
    if (ro && ps->root)
        round_buf(ps, x, &x->rbuf, &x->rbuflen, ro);
    x->pk_peer = 0;
}

/* One message of a round. The peers have posted theirs: a failure here
 * ends the job with a message rather than leave them waiting. */
static void post_msg(ps_shuffler_t *ps, ps__xchg_t *x, void *buf, uint64_t len, int peer, int send)
{
    if (x->nreqs == x->capreqs) {
        int cap = x->capreqs ? 2 * x->capreqs : 64;
        MPI_Request *r = realloc(x->reqs, (size_t)cap * sizeof *r);
        if (r)
            x->reqs = r;
        uint64_t *l = r ? realloc(x->reqlen, (size_t)cap * sizeof *l) : NULL;
        if (l)
            x->reqlen = l;
        unsigned char *d = l ? realloc(x->reqdone, (size_t)cap) : NULL;
        if (d)
            x->reqdone = d;
        int *o = d ? realloc(x->outidx, (size_t)cap * sizeof *o) : NULL;
        if (!o) {
            ps__errf(-ENOMEM, "requests of an exchange round");
            ps__fatal(ps, -ENOMEM, "exchange");
        }
        x->outidx = o, x->capreqs = cap;
    }
    x->reqlen[x->nreqs] = len;
    x->reqdone[x->nreqs] = 0;
    MPI_Request *q = &x->reqs[x->nreqs];
    if ((send ? MPI_Isend(buf, (int)len, MPI_BYTE, peer, TAG_ROUND, ps->dcomm, q)
              : MPI_Irecv(buf, (int)len, MPI_BYTE, peer, TAG_ROUND, ps->dcomm, q)) != MPI_SUCCESS) {
        ps__errf(PS_EMPI, "%s of round %" PRIu64 " failed", send ? "MPI_Isend" : "MPI_Irecv", x->round);
        ps__fatal(ps, PS_EMPI, "exchange");
    }
    x->nreqs++;
}

/* Posts the messages of round x->round of one pair's stream, as both
 * sides cut it from the sample sizes alone (so they post matching
 * messages in the same order): each part of a sample of at least
 * x->direct bytes is a message from (to) where the sample lies in the store, each
 * run of smaller samples one message from the send buffer (to the
 * receive region). A memory store's receive cursor is left at the end of
 * the piece. */
static void post_pair(ps_shuffler_t *ps, ps__xchg_t *x, int peer, int send)
{
    ps__peer_t *p = send ? &x->sp[peer] : &x->rp[peer];
    uint64_t lo = x->round * x->budget, pos = lo, left = p->rlen, j = p->j0, off = p->off0, run = 0, run_at = 0;
    p->q0 = p->qv = x->nreqs;
    while (left || run) {
        uint64_t size = 0, take = 0;
        int direct = 0;
        if (left) {
            size = send ? ps->ent[p->idx[j]].size : hdr_size(p, j);
            take = size - off < left ? size - off : left;
            direct = size >= x->direct;
        }
        if (run && (direct || !left || run + take > x->msgmax)) {
            void *b = send ? (void *)(x->sbuf + p->boff + (run_at - lo)) : (void *)(p->region + run_at);
            post_msg(ps, x, b, run, peer, send);
            run = 0;
        }
        if (!left)
            break;
        if (direct && take) {
            unsigned char *b = send ? (unsigned char *)ps->ent[p->idx[j]].data + off : p->region + pos;
            for (uint64_t o = 0; o < take; o += x->msgmax)
                post_msg(ps, x, b + o, take - o < x->msgmax ? take - o : x->msgmax, peer, send);
        } else if (take) {
            if (!run)
                run_at = pos;
            run += take;
        }
        pos += take, left -= take, off += take;
        if (off == size)
            j++, off = 0;
    }
    p->q1 = x->nreqs;
    if (!send)
        p->j = j, p->off = off; /* nothing unpacks a memory store's stream */
}

/* Checks the samples sent from the sender's store (and their parts) among
 * the next `len` bytes of receive stream `p`, which MPI just wrote into the
 * region, against the checksums of their headers. A mismatch fails the exchange on every rank
 * when it ends (secondary: the sender may have reported its own cause). */
static void verify_msg(ps_shuffler_t *ps, ps__xchg_t *x, int peer, uint64_t len)
{
    ps__peer_t *p = &x->rp[peer];
    const unsigned char *src = p->region + p->vpos;
    p->vpos += len;
    while (len) {
        while (p->vj < p->n && hdr_size(p, p->vj) == 0)
            p->vj++;
        if (p->vj >= p->n)
            return;
        const unsigned char *h = p->hdr + p->vj * PS_WIRE_HDR;
        uint64_t size = get64(h + 16), take = size - p->voff < len ? size - p->voff : len, hv = 0;
        int whole = p->voff == 0 && take == size, check = size >= x->direct; /* packed: the sender checked it */
        if (check && whole)
            hv = ps__hash(src, take);
        else if (check)
            hash_part(ps, p, p->voff, src, take);
        p->voff += take, src += take, len -= take;
        if (p->voff < size)
            return;
        if (check && !whole)
            hv = XXH3_64bits_digest(p->hs);
        if (check && hv != get64(h + 24)) {
            ps__errf(PS_ECORRUPT, "sample %#" PRIx64 " from rank %d arrived with a bad checksum", get64(h), peer);
            xfail(x, PS_ECORRUPT, 1);
        }
        p->vj++, p->voff = 0;
    }
}

/* Tests the round's messages; checks the received ones, each peer's in the
 * order they were posted (so a sample cut across messages is hashed in
 * order), as soon as they complete, until `deadline` (ns, 0: none) passes.
 * Sets *moved when a message completed or was checked. Returns 1 when all
 * completed and were checked, 0 if not yet, or an MPI failure. */
static int test_round(ps_shuffler_t *ps, ps__xchg_t *x, uint64_t deadline, int *moved)
{
    int outc = 0, left = 0;
    if (x->ndone < x->nreqs &&
        MPI_Testsome(x->nreqs, x->reqs, &outc, x->outidx, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Testsome failed during the exchange of epoch %" PRIu64, x->epoch);
    prof(ps, x, PS_PROF_WAIT);
    if (outc == MPI_UNDEFINED)
        outc = 0;
    for (int i = 0; i < outc; i++)
        x->reqdone[x->outidx[i]] = 1;
    x->ndone += outc;
    if (outc)
        *moved = 1;
    for (int r = 0; r < ps->nranks; r++) {
        ps__peer_t *p = &x->rp[r];
        if (!p->rlen || !p->region)
            continue;
        while (p->qv < p->q1 && x->reqdone[p->qv] && !(deadline && ps__now_ns() > deadline)) {
            verify_msg(ps, x, r, x->reqlen[p->qv]);
            p->qv++;
            *moved = 1;
        }
        left |= p->qv < p->q1;
    }
    prof(ps, x, PS_PROF_VERIFY);
    return x->ndone == x->nreqs && !left;
}

static int post_round(ps_shuffler_t *ps, ps__xchg_t *x)
{
    int M = ps->nranks, err = 0;
    if (!ps->root) {
        /* Receives first, so that every send finds its receive posted. */
        x->nreqs = x->ndone = 0;
        for (int r = 0; r < M; r++)
            if (x->rp[r].rlen) {
                post_pair(ps, x, r, 0);
                x->st.chunks_recv++;
            }
        for (int r = 0; r < M; r++)
            if (x->sp[r].rlen) {
                post_pair(ps, x, r, 1);
                x->st.chunks_sent++;
            }
        return 0;
    }
    int *cnt = calloc(4 * (size_t)M, sizeof *cnt);
    if (!cnt) {
        ps__errf(-ENOMEM, "round counts");
        ps__fatal(ps, -ENOMEM, "exchange");
    }
    int *rcnt = cnt + M, *zero = cnt + 2 * M;
    for (int r = 0; r < M && !err; r++) {
        ps__peer_t *s = &x->sp[r], *p = &x->rp[r];
        x->types[r] = x->types[M + r] = MPI_BYTE;
        if (s->rlen) {
            cnt[r] = 1;
            err = hindexed(x->sbuf + s->boff, s->rlen, &x->types[r]);
            x->st.chunks_sent++;
        }
        if (p->rlen && !err) {
            rcnt[r] = 1;
            err = hindexed(ps->root ? x->rbuf + p->boff : p->region + x->round * x->budget, p->rlen, &x->types[M + r]);
            x->st.chunks_recv++;
        }
    }
    if (!err && MPI_Ialltoallw(MPI_BOTTOM, cnt, zero, x->types, MPI_BOTTOM, rcnt, zero, x->types + M, ps->dcomm,
                               &x->req) != MPI_SUCCESS)
        err = ps__errf(PS_EMPI, "MPI_Ialltoallw of round %" PRIu64 " failed", x->round);
    free(cnt);
    return err;
}

/* Advances the exchange until it waits on MPI, completes, or `deadline`
 * (ns, 0: none) passes. Returns 1 when it moved, 0 when it only waits,
 * or an error that the job cannot survive (an MPI failure). */
static int step(ps_shuffler_t *ps, ps__xchg_t *x, uint64_t deadline)
{
    int moved = 0, flag, err;
    prof(ps, x, -1);
    for (;;) {
        switch (x->phase) {
        case PS_PH_HDR:
        case PS_PH_WAIT:
            if (x->phase == PS_PH_WAIT && x->nreqs) {
                if ((flag = test_round(ps, x, deadline, &moved)) < 0)
                    return flag;
            } else {
                if (MPI_Test(&x->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    return ps__errf(PS_EMPI, "MPI_Test failed during the exchange of epoch %" PRIu64, x->epoch);
                prof(ps, x, x->phase == PS_PH_HDR ? PS_PROF_HDRWAIT : PS_PROF_WAIT);
            }
            if (flag)
                x->nreqs = 0;
            if (!flag)
                return moved;
            moved = 1;
            if (x->phase == PS_PH_HDR) {
                /* Headers this rank cannot take: the senders cut their
                 * payload by them, into messages it cannot match. */
                if ((err = on_headers(ps, x)))
                    ps__fatal(ps, err, "exchange");
                prof(ps, x, PS_PROF_ONHDR);
                x->round = 0;
                if (x->nrounds)
                    round_setup(ps, x);
                x->phase = PS_PH_PACK;
                break;
            }
            free_types(ps, x);
            for (int r = 0; r < ps->nranks; r++)
                x->bytes_in += x->rp[r].rlen;
            if (!x->part_hooked && x->bytes_in) {
                x->part_hooked = 1;
                hook(ps, PS_POINT_RECV_PART);
            }
            x->pk_peer = 0;
            x->phase = ps->root ? PS_PH_UNPACK : PS_PH_PACK;
            if (!ps->root) {
                if (++x->round < x->nrounds)
                    round_setup(ps, x);
            }
            break;
        case PS_PH_PACK:
            if (x->round >= x->nrounds) {
                x->phase = PS_PH_DONE;
                break;
            }
            while (x->pk_peer < ps->nranks) {
                if (pack_slice(ps, x, &x->sp[x->pk_peer]))
                    x->pk_peer++;
                moved = 1;
                if (deadline && ps__now_ns() > deadline) {
                    prof(ps, x, PS_PROF_PACK);
                    return moved;
                }
            }
            prof(ps, x, PS_PROF_PACK);
            if ((err = post_round(ps, x)))
                return err;
            prof(ps, x, PS_PROF_POST);
            x->phase = PS_PH_WAIT;
            break;
        case PS_PH_UNPACK:
            while (x->pk_peer < ps->nranks) {
                if (unpack_slice(ps, x, x->pk_peer))
                    x->pk_peer++;
                moved = 1;
                if (deadline && ps__now_ns() > deadline)
                    return moved;
            }
            if (++x->round < x->nrounds)
                round_setup(ps, x);
            x->phase = PS_PH_PACK;
            break;
        case PS_PH_DONE:
            if (!x->complete) {
                x->complete = 1;
                x->t_complete = ps__now_ns();
            }
            return moved;
        }
        if (deadline && ps__now_ns() > deadline)
            return moved;
    }
}

/* The destination of each committed sample for ps_exchange_begin_to(),
 * and the samples each rank receives. */
typedef struct {
    int *dest;          /* [n] */
    uint64_t *recv;     /* [nranks] */
    uint64_t *after;    /* [nranks] every rank's count after the exchange */
} ps__target_t;
static int begin_local(ps_shuffler_t *ps, uint64_t epoch, const ps__target_t *tg);
static int post_headers(ps_shuffler_t *ps);

/* The progress thread: runs the exchange until it completes or
 * ps_exchange_end() takes over. The mutex keeps it from running a step at
 * the same time as ps_progress(). */
static void *progress_main(void *arg)
{
    ps_shuffler_t *ps = arg;
    ps__xchg_t *x = ps->x;
    long nap = 20000;
    while (!atomic_load(&ps->thread_stop)) {
        pthread_mutex_lock(&ps->mu);
        int r = step(ps, x, ps__now_ns() + 5000000);
        if (r > 0)
            x->t_outside = ps__now_ns();
        if (r < 0)
            xfail(x, r, 0);
        int stop = x->complete || r < 0;
        pthread_mutex_unlock(&ps->mu);
        if (stop)
            break;
        /* Poll often while data moves (MPI's rendezvous needs the receiver
         * to answer), back off to 1 ms when idle, so the thread costs little
         * CPU during a long epoch. */
        nap = r > 0 ? 20000 : (nap < 1000000 ? 2 * nap : 1000000);
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int begin(ps_shuffler_t *ps, uint64_t epoch, int thread, const uint64_t *part, const int32_t *dest);

PS_API int ps_exchange_begin(ps_shuffler_t *ps, uint64_t epoch)
{
    return begin(ps, epoch, ps->progress_thread, NULL, NULL);
}

PS_API int ps_exchange_begin_to(ps_shuffler_t *ps, uint64_t epoch, uint64_t part_epoch, int shuffle)
{
    uint64_t part[2] = {part_epoch, shuffle != 0};
    return begin(ps, epoch, ps->progress_thread, part, NULL);
}

PS_API int ps_exchange_begin_dest(ps_shuffler_t *ps, uint64_t epoch, const int32_t *dest)
{
    return begin(ps, epoch, ps->progress_thread, NULL, dest);
}

/* Where each committed sample goes in the seeded partition of part[0]
 * (shuffled when part[1]), and how many samples each rank sends this one:
 * one all-to-all of counts, which every rank joins even when its own part
 * failed (it then sends zeros and the agreement that follows fails). */
static int target_counts(ps_shuffler_t *ps, const uint64_t *part, const int32_t *dest, int err,
                         ps__target_t *tg)
{
    int M = ps->nranks;
    uint64_t N = ps__total(ps);
    uint64_t *send = calloc((size_t)M + 1, sizeof *send);
    tg->recv = calloc((size_t)M, sizeof *tg->recv);
    tg->after = calloc((size_t)M, sizeof *tg->after);
    tg->dest = malloc((ps->n ? ps->n : 1) * sizeof *tg->dest);
    uint64_t *perm = NULL;
    if (!err && (!send || !tg->recv || !tg->after || !tg->dest))
        err = -ENOMEM;
    if (dest) {
        for (uint64_t i = 0; !err && i < ps->n; i++) {
            if (dest[i] < 0 || dest[i] >= M)
                err = ps__errf(PS_EINVAL, "ps_exchange_begin_dest: destination %d of sample %" PRIu64 " on rank %d "
                               "outside 0..%d", (int)dest[i], ps->ent[i].id, ps->rank, M - 1);
            else
                send[tg->dest[i] = dest[i]]++;
        }
    }
    for (uint64_t i = 0; !err && !dest && i < ps->n; i++)
        if (ps->ent[i].id >= N)
            err = ps__errf(PS_EINVAL, "ps_exchange_begin_to needs the ids 0..N-1 of the N = %" PRIu64 " samples, "
                           "rank %d holds id %" PRIu64, N, ps->rank, ps->ent[i].id);
    if (!err && !dest && !(perm = malloc((N ? N : 1) * sizeof *perm)))
        err = -ENOMEM;
    if (!err && !dest) {
        /* Rank of id = its position in the permutation, mod M: the inverse
         * permutation, written over the permutation's own array. */
        ps_partition_perm(perm, N, ps->seed, part[0], (int)part[1]);
        uint64_t *pos = malloc((N ? N : 1) * sizeof *pos);
        if (!pos)
            err = -ENOMEM;
        else {
            for (uint64_t k = 0; k < N; k++)
                pos[perm[k]] = k;
            for (uint64_t i = 0; i < ps->n; i++) {
                tg->dest[i] = (int)(pos[ps->ent[i].id] % (uint64_t)M);
                send[tg->dest[i]]++;
            }
            free(pos);
        }
    }
    free(perm);
    if (err && send)
        memset(send, 0, (size_t)M * sizeof *send);
    int rc = MPI_SUCCESS;
    MPI_Request q = MPI_REQUEST_NULL;
    uint64_t one = 0, *sb = send ? send : &one, *rb = tg->recv ? tg->recv : &one;
    if (send && tg->recv)
        rc = MPI_Ialltoall(sb, 1, MPI_UINT64_T, rb, 1, MPI_UINT64_T, ps->comm, &q);
    else /* no memory for the counts: the job cannot go on in step */
        ps__fatal(ps, -ENOMEM, "ps_exchange_begin_to");
    if (rc != MPI_SUCCESS)
        err = ps__errf(PS_EMPI, "MPI_Ialltoall of the counts failed");
    else if (ps__wait(ps, &q, "ps_exchange_begin_to"))
        err = ps__errf(PS_EMPI, "MPI_Ialltoall of the counts failed");
    /* Every rank's count after the exchange, which the plans of later
     * exchanges start from: kept + received, gathered. */
    uint64_t mine = 0;
    for (int r = 0; r < M; r++)
        mine += tg->recv ? tg->recv[r] : 0;
    if (tg->after && (rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, tg->after, 1, MPI_UINT64_T, ps->comm, &q)) !=
                         MPI_SUCCESS)
        err = ps__errf(PS_EMPI, "MPI_Iallgather of the counts failed");
    else if (tg->after && ps__wait(ps, &q, "ps_exchange_begin_to"))
        err = ps__errf(PS_EMPI, "MPI_Iallgather of the counts failed");
    free(send);
    return err;
}

static int begin(ps_shuffler_t *ps, uint64_t epoch, int thread, const uint64_t *part, const int32_t *dest)
{
    ps__errclear();
    int err = 0;
    if (!ps->started)
        err = ps__errf(PS_ESTATE, "exchange before ps_start");
    else if (ps->x)
        err = ps__errf(PS_ESTATE, "exchange of epoch %" PRIu64 " still in progress", ps->x->epoch);
    else if (epoch != ps->epoch)
        err = ps__errf(PS_EEPOCH, "exchange for epoch %" PRIu64 " asked, the store is at epoch %" PRIu64, epoch,
                       ps->epoch);
    /* Ranks in another call, or asking for another epoch, would wait for
     * each other forever: all learn it here and fail. */
    uint64_t t0 = ps->profile ? prof_now(ps) : 0;
    int serr = ps__sync(ps, part ? PS_OP_BEGIN_TO : dest ? PS_OP_BEGIN_DEST : PS_OP_BEGIN, epoch);
    /* Every rank must aim at the same partition: the target epoch, and
     * whether it is shuffled (folded into the top bit), are checked too. */
    if (!serr && part)
        serr = ps__sync(ps, PS_OP_BEGIN_TO, part[0] ^ (part[1] ? 0 : UINT64_C(1) << 63));
    if (serr)
        return serr;
    uint64_t t1 = ps->profile ? prof_now(ps) : 0;
    int created = 0;
    ps__target_t tg = {NULL, NULL, NULL};
    if (part || dest)
        err = target_counts(ps, part, dest, err, &tg);
    if (!err) {
        err = begin_local(ps, epoch, part || dest ? &tg : NULL);
        created = ps->x != NULL;
    }
    if (created && (part || dest)) {
        ps->x->counts_after = tg.after; /* owned by the exchange now */
        tg.after = NULL;
    }
    free(tg.dest);
    free(tg.recv);
    free(tg.after);
    if (created && ps->profile) {
        ps->x->prof_t = prof_now(ps);
        ps->x->prof[PS_PROF_SYNC] = t1 - t0;
        ps->x->prof[PS_PROF_PLAN] = ps->x->prof_t - t1;
    }
    /* The same reduction agrees on success and on the number of rounds,
     * sent as rounds + 1 by a rank that sends anything: 0 means that no
     * sample moves anywhere (the local strategy on balanced counts). */
    uint64_t rounds = created && ps->x->plan.nsend ? ps->x->nrounds + 1 : 0;
    if ((err = ps__agree_max(ps, err, 0, &rounds))) {
        if (created)
            ps__xchg_free(ps);
        return err;
    }
    prof(ps, ps->x, PS_PROF_AGREE);
    ps->x->nrounds = rounds ? rounds - 1 : 0;
    ps->x->st.rounds = ps->x->nrounds;
    if (!rounds) {
        /* No collective to run: the exchange is complete once the next
         * epoch's entries are built, and its time is that work alone. */
        ps__xchg_t *x = ps->x;
        if ((err = on_headers(ps, x)))
            xfail(x, err, 0);
        prof(ps, x, PS_PROF_ONHDR);
        x->phase = PS_PH_DONE;
        x->complete = 1;
        x->t_complete = ps__now_ns();
        hook(ps, PS_POINT_BEGIN);
        return 0;
    }
    if ((err = post_headers(ps)))
        ps__fatal(ps, err, "ps_exchange_begin"); /* the peers posted theirs: no way back */
    prof(ps, ps->x, PS_PROF_HDRWAIT);
    if (thread) {
        atomic_store(&ps->thread_stop, 0);
        if ((err = pthread_create(&ps->thread, NULL, progress_main, ps)))
            return ps__errf(-err, "cannot start the progress thread"); /* ps_exchange_end() still completes */
        ps->thread_running = 1;
    }
    return 0;
}

#ifdef PS_TEST_HOOKS
/* Test hook: PSHUFFLE_TEST_CORRUPT=RANK:direct (or RANK:packed) damages,
 * on that rank of a memory store, the first sample with a payload that it
 * sends from the store (or packs), after its checksum was taken: the
 * checks of the exchange must find it. RANK:header announces the first
 * sample it sends as 2 GiB, as a header damaged on its way would: its
 * receiver must end the job with a message, since the two sides then cut
 * the payload into different messages. */
static void test_corrupt(ps_shuffler_t *ps, ps__xchg_t *x)
{
    const char *s = getenv("PSHUFFLE_TEST_CORRUPT");
    char *end;
    if (!s || !*s || strtol(s, &end, 10) != ps->rank || *end != ':')
        return;
    if (!strcmp(end + 1, "header")) {
        if (x->plan.nsend)
            put64(x->shdr + 16, UINT64_C(1) << 31);
        return;
    }
    if (ps->root)
        return;
    int direct = !strcmp(end + 1, "direct");
    for (uint64_t i = 0; i < ps->n; i++) {
        ps__entry_t *e = &ps->ent[i];
        if (x->sent[i] && e->size && (e->size >= x->direct) == direct) {
            ((unsigned char *)e->data)[e->size / 2] ^= 0x40;
            return;
        }
    }
}
#else
#define test_corrupt(ps, x) ((void)0)
#endif

/* Everything that can fail before the ranks agree: the plan, the headers
 * to send, and the memory for the entries of the next epoch. */
/* The plan of ps_exchange_begin_to(): every sample whose destination is
 * another rank is sent there; nothing is pooled at random. */
static int plan_target(ps_plan_t *pl, const ps_shuffler_t *ps, const ps__target_t *tg)
{
    int M = ps->nranks;
    memset(pl, 0, sizeof *pl);
    pl->npool = ps->n;
    for (uint64_t i = 0; i < ps->n; i++)
        pl->nsend += tg->dest[i] != ps->rank;
    pl->send_pos = malloc((pl->nsend ? pl->nsend : 1) * sizeof *pl->send_pos);
    pl->send_to = malloc((pl->nsend ? pl->nsend : 1) * sizeof *pl->send_to);
    pl->recv_count = calloc((size_t)M, sizeof *pl->recv_count);
    if (!pl->send_pos || !pl->send_to || !pl->recv_count)
        return -ENOMEM;
    uint64_t k = 0;
    for (uint64_t i = 0; i < ps->n; i++)
        if (tg->dest[i] != ps->rank) {
            pl->send_pos[k] = i;
            pl->send_to[k++] = tg->dest[i];
        }
    for (int r = 0; r < M; r++)
        if (r != ps->rank) {
            pl->recv_count[r] = tg->recv[r];
            pl->nrecv += tg->recv[r];
        }
    pl->nkept = ps->n - pl->nsend;
    pl->count_after = pl->nkept + pl->nrecv;
    return 0;
}

static int begin_local(ps_shuffler_t *ps, uint64_t epoch, const ps__target_t *tg)
{
    int err = 0, M = ps->nranks;
    if (ps__fault(ps, "begin"))
        return ps__errf(-ENOMEM, "planning the exchange of epoch %" PRIu64 " (injected allocation failure)", epoch);
    ps__xchg_t *x = calloc(1, sizeof *x);
    if (!x)
        return -ENOMEM;
    ps->x = x;
    x->req = MPI_REQUEST_NULL;
    x->t_begin = ps__now_ns();
    x->epoch = epoch;
    x->targeted = tg != NULL;
    x->q = tg ? 1.0 : ps_schedule_q(&ps->q, epoch);
    x->st.epoch = epoch;
    x->st.q = x->q;
    x->st.peak_samples = ps->n;
    x->st.peak_bytes = ps->bytes;
    /* Half the window each way, shared by the peers. */
    x->budget = ps->window / 2 / (uint64_t)(M > 1 ? M - 1 : 1);
    if (x->budget == 0)
        x->budget = 1;
    x->direct = DIRECT;
    x->msgmax = MSG_MAX;
#ifdef PS_TEST_HOOKS
    /* Test hook: PSHUFFLE_TEST_DIRECT=BYTES lowers the threshold, so that
     * small test samples take both paths (the same on every rank). */
    const char *td = getenv("PSHUFFLE_TEST_DIRECT");
    x->direct = td && *td ? strtoull(td, NULL, 10) : DIRECT;
    if (!x->direct)
        x->direct = 1;
    /* PSHUFFLE_TEST_MSG=BYTES shortens the messages likewise. */
    const char *tm = getenv("PSHUFFLE_TEST_MSG");
    x->msgmax = tm && *tm ? strtoull(tm, NULL, 10) : MSG_MAX;
    if (!x->msgmax)
        x->msgmax = 1;
#endif
    if ((err = tg ? plan_target(&x->plan, ps, tg) : ps_plan_compute(&x->plan, ps->seed, epoch, x->q, ps->counts, M,
                                                                     ps->rank)))
        goto fail;
    const ps_plan_t *pl = &x->plan;
    x->sp = calloc((size_t)M, sizeof *x->sp);
    x->rp = calloc((size_t)M, sizeof *x->rp);
    x->types = malloc(2 * (size_t)M * sizeof *x->types);
    x->sent = calloc(ps->n ? ps->n : 1, 1);
    x->shdr = malloc((pl->nsend ? pl->nsend : 1) * PS_WIRE_HDR);
    x->rhdr = malloc((pl->nrecv ? pl->nrecv : 1) * PS_WIRE_HDR);
    x->staged = malloc((pl->nrecv ? pl->nrecv : 1) * sizeof *x->staged);
    x->newent = malloc((pl->count_after ? pl->count_after : 1) * sizeof *x->newent);
    if (!x->sp || !x->rp || !x->types || !x->sent || !x->shdr || !x->rhdr || !x->staged || !x->newent) {
        err = -ENOMEM;
        goto fail;
    }
    for (int r = 0; r < M; r++) {
        x->sp[r].fd = x->rp[r].fd = -1;
        x->types[r] = x->types[M + r] = MPI_DATATYPE_NULL;
    }
    /* Headers travel as counts of PS_WIRE_HDR-byte records with int
     * displacements: the totals must fit an int. */
    if (pl->nsend > INT_MAX || pl->nrecv > INT_MAX) {
        err = ps__errf(PS_ETOOBIG, "exchange of epoch %" PRIu64 ": rank %d sends %" PRIu64 " and receives %" PRIu64
                       " samples (limit %d each)", epoch, ps->rank, pl->nsend, pl->nrecv, INT_MAX);
        goto fail;
    }
    for (uint64_t i = 0; i < pl->nsend; i++)
        x->sp[pl->send_to[i]].n++;
    uint64_t o = 0;
    for (int r = 0; r < M; r++) {
        ps__peer_t *p = &x->sp[r];
        p->hdr = x->shdr + o * PS_WIRE_HDR;
        o += p->n;
        if (p->n && !(p->idx = malloc(p->n * sizeof *p->idx))) {
            err = -ENOMEM;
            goto fail;
        }
        p->n = 0; /* refilled below */
    }
    o = 0;
    for (int r = 0; r < M; r++) {
        ps__peer_t *p = &x->rp[r];
        p->n = r == ps->rank ? 0 : pl->recv_count[r];
        p->hdr = x->rhdr + o * PS_WIRE_HDR;
        o += p->n;
    }
    x->st.samples_kept = pl->nkept;
    /* Each peer's stream in ascending id order, which is the store's order:
     * the packing reads memory forward, and every receiver gets M sorted
     * runs that it merges instead of sorting. */
    int *to = malloc((ps->n ? ps->n : 1) * sizeof *to);
    if (!to) {
        err = -ENOMEM;
        goto fail;
    }
    for (uint64_t i = 0; i < ps->n; i++)
        to[i] = -1;
    for (uint64_t i = 0; i < pl->nsend; i++)
        to[pl->send_pos[i]] = pl->send_to[i];
    for (uint64_t pos = 0; pos < ps->n; pos++) {
        if (to[pos] < 0)
            continue;
        ps__peer_t *p = &x->sp[to[pos]];
        const ps__entry_t *e = &ps->ent[pos];
        unsigned char *h = p->hdr + p->n * PS_WIRE_HDR;
        put64(h, e->id);
        put64(h + 8, (uint64_t)(uint32_t)e->label);
        put64(h + 16, e->size);
        put64(h + 24, e->hash);
        p->idx[p->n++] = pos;
        p->len += e->size;
        x->sent[pos] = 1;
        x->st.samples_sent++;
        x->st.bytes_sent += e->size;
    }
    free(to);
    test_corrupt(ps, x);
    for (int r = 0; r < M; r++) {
        uint64_t k = (x->sp[r].len + x->budget - 1) / x->budget;
        if (k > x->nrounds)
            x->nrounds = k;
    }
    return 0;
fail:
    ps__xchg_free(ps);
    return err;
}

/* Starts the headers' all-to-all. A failure here is an MPI failure, which
 * the job does not survive; it is still reported, not hidden. */
static int post_headers(ps_shuffler_t *ps)
{
    ps__xchg_t *x = ps->x;
    int M = ps->nranks;
    int *v = malloc(4 * (size_t)M * sizeof *v);
    if (!v)
        return ps__errf(-ENOMEM, "header counts");
    int *sc = v, *sd = v + M, *rc = v + 2 * M, *rd = v + 3 * M, so = 0, ro = 0;
    for (int r = 0; r < M; r++) {
        sc[r] = (int)x->sp[r].n, sd[r] = so, so += sc[r];
        rc[r] = (int)x->rp[r].n, rd[r] = ro, ro += rc[r];
    }
    int rc_ = MPI_Ialltoallv(x->shdr, sc, sd, ps->hdrtype, x->rhdr, rc, rd, ps->hdrtype, ps->dcomm, &x->req);
    free(v);
    if (rc_ != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Ialltoallv of the sample headers failed");
    x->phase = PS_PH_HDR;
    hook(ps, PS_POINT_BEGIN);
    return 0;
}

PS_API int ps_progress(ps_shuffler_t *ps, int *done)
{
    ps__xchg_t *x = ps->x;
    if (!x) {
        if (done)
            *done = 1;
        return ps__errf(PS_ESTATE, "no exchange in progress");
    }
    int err = 0, r;
    if (ps->thread_running) {
        pthread_mutex_lock(&ps->mu);
        if (done)
            *done = x->complete;
        pthread_mutex_unlock(&ps->mu);
        return 0;
    }
    /* Bounded by time, so a caller in a training loop is never held up
     * long: about 1 ms (work is cut into slices of at most 64 KiB). */
    if (!x->complete) {
        if ((r = step(ps, x, ps__now_ns() + 1000000)) < 0)
            err = r;
        else if (r > 0)
            x->t_outside = ps__now_ns();
    }
    if (done)
        *done = x->complete;
    return err;
}

/* Runs the exchange to its end: every collective must complete on every
 * rank. Polled rather than waited on, so that a peer that stopped taking
 * part ends the job with a message instead of a silent hang. */
static void finish(ps_shuffler_t *ps, ps__xchg_t *x, const char *what)
{
    uint64_t last = ps__now_ns(), limit = (uint64_t)(ps->timeout_s * 1e9);
    while (!x->complete) {
        int r = step(ps, x, 0);
        if (r < 0) {
            ps__fatal(ps, r, what); /* an MPI failure: the collectives cannot complete */
        }
        if (r > 0) {
            last = ps__now_ns();
            continue;
        }
        uint64_t idle = ps__now_ns() - last;
        if (idle > limit) {
            ps__errf(PS_EPEER, "no message from the other ranks within %g s (PSHUFFLE_TIMEOUT) during the exchange "
                     "of epoch %" PRIu64 ": a rank died or left the exchange", ps->timeout_s, x->epoch);
            ps__fatal(ps, PS_EPEER, what);
        }
        /* Spin on MPI (which yields by itself when told to) while the
         * peers are busy; only a long wait backs off, to spare the CPU. */
        if (idle > 10000000)
            sched_yield();
    }
}

void ps__xchg_drain(ps_shuffler_t *ps)
{
    if (!ps->x)
        return;
    stop_thread(ps);
    finish(ps, ps->x, "ps_close during an exchange");
}

static int commit(ps_shuffler_t *ps, ps__xchg_t *x)
{
    if (x->commit_err) {
        ps__errset(x->commit_detail);
        return x->commit_err;
    }
    int err = 0;
    if (ps->root) {
        /* The segment (its moves copied, fsync'd) is in place before the
         * manifest that names it. */
        if ((err = ps__seg_finish(&ps->rankdir, ps->fsync)))
            return err;
        hook(ps, PS_POINT_STAGED);
        ps__manifest_t m = {.rank = ps->rank, .nranks = ps->nranks, .epoch = x->epoch + 1, .seed = ps->seed,
                            .params = ps->params, .count = x->nnew, .ent = x->newent};
        ps__schedule_desc(&ps->q, m.qdesc, sizeof m.qdesc);
        err = ps__manifest_write(&ps->rankdir, &m, ps->fsync);
    } else {
        hook(ps, PS_POINT_STAGED);
    }
    return err;
}

static void deleting_hook(void *ps) { hook(ps, PS_POINT_DELETING); }

PS_API int ps_exchange_end(ps_shuffler_t *ps)
{
    ps__xchg_t *x = ps->x;
    int err = 0;
    ps__errclear();
    /* Collective: ranks without an exchange still take part, so one rank's
     * misuse fails everybody instead of hanging them. */
    uint64_t t_end = ps__now_ns();
    if (x && ps->profile)
        x->prof_t = prof_now(ps);
    if (x) {
        pthread_mutex_lock(&ps->mu);
        x->st.bytes_recv_overlapped = x->bytes_in; /* what moved before this call */
        pthread_mutex_unlock(&ps->mu);
    }
    if ((err = ps__sync(ps, PS_OP_END, x ? x->epoch : ps->epoch))) {
        /* Out of step with the other ranks: nothing can complete. */
        if (x)
            ps__fatal(ps, err, "ps_exchange_end");
        return err;
    }
    if (!x)
        return ps__agree(ps, ps__errf(PS_ESTATE, "ps_exchange_end without ps_exchange_begin"), 0);
    x->t_endcall = t_end;
    prof(ps, x, PS_PROF_ENDSYNC);
    stop_thread(ps);
    finish(ps, x, "ps_exchange_end");
    prof(ps, x, -1);
    x->st.samples_recv = x->nstaged;
    x->st.bytes_recv = x->staged_bytes;
    int committed = 0;
    if (x->err) {
        err = x->err;
        ps__errset(x->errdetail);
    } else {
        err = commit(ps, x);
        committed = !err;
    }
    hook(ps, PS_POINT_COMMITTED);
    int secondary = x->err && x->err_secondary;
    if ((err = ps__agree(ps, err, secondary))) {
        /* No partial commit: every rank returns to the old epoch. */
        if (ps->root && committed)
            ps__dir_unlink_manifest(&ps->rankdir, x->epoch + 1);
        ps__xchg_free(ps);
        return err;
    }
    hook(ps, PS_POINT_AGREED);
    prof(ps, x, PS_PROF_COMMIT);
    /* Blocks that empty from here on keep their pages for the next
     * exchange (its receive regions and compaction), up to what it may
     * receive, Q(e+1) times the bytes held, plus half the window: so
     * between epochs the store stays within (1+Q)*n*s + window, the bound
     * the exchange itself needs. */
    if (!ps->root) {
        double qn = ps_schedule_q(&ps->q, x->epoch + 1);
        uint64_t held = ps->bytes - x->st.bytes_sent + x->staged_bytes;
        ps->arena.spare_max = (size_t)(qn * (double)held) + ps->window / 2;
    }
    /* Every receiver has committed: the sent samples can go (a directory
     * store's segments that no sample of the new manifest is in). */
    if (ps->root) {
        ps__seg_gc(&ps->rankdir, x->newent, x->nnew, deleting_hook, ps);
        ps__dir_unlink_manifest(&ps->rankdir, x->epoch);
    }
    uint64_t done = 0, half = x->st.samples_sent / 2;
    for (uint64_t i = 0; i < ps->n && !ps->root; i++) {
        if (!x->sent[i])
            continue;
        ps__arena_free(&ps->arena, ps->ent[i].blk, ps->ent[i].size);
        if (++done == half && half)
            hook(ps, PS_POINT_DELETING);
    }
    free(ps->ent);
    ps->ent = x->newent;
    x->newent = NULL;
    ps->n = ps->cap = x->nnew;
    prof(ps, x, PS_PROF_RELEASE);
    if (!ps->root) {
        ps__arena_compact(&ps->arena, ps->ent, ps->n, ps->window / 2);
        ps__arena_trim(&ps->arena, spare_room(&ps->arena, ps->arena.spare_max));
    }
    prof(ps, x, PS_PROF_COMPACT);
    ps->bytes = ps->bytes - x->st.bytes_sent + x->staged_bytes;
    ps->epoch = x->epoch + 1;
    if (x->targeted) {
        memcpy(ps->counts, x->counts_after, (size_t)ps->nranks * sizeof *ps->counts);
    } else {
        ps_plan_balance(ps->counts, ps->nranks, ps->counts); /* what every rank now holds */
    }
    x->nstaged = 0; /* now owned by ps->ent */
    uint64_t now = ps__now_ns();
    x->st.exchange_ns = x->t_complete - x->t_begin;
    x->st.blocked_ns = now - x->t_endcall;
    /* Only progress that happened before ps_exchange_end() counts. */
    x->st.overlap_ns = x->t_outside > x->t_begin && x->t_outside <= x->t_endcall ? x->t_outside - x->t_begin : 0;
    ps->stats = x->st;
    uint64_t pv[PS_PROF_N], t_free = ps->profile ? prof_now(ps) : 0;
    memcpy(pv, x->prof, sizeof pv);
    ps__xchg_free(ps);
    if (ps->profile) {
        pv[PS_PROF_FREE] = prof_now(ps) - t_free;
        prof_print(ps, ps->epoch - 1, pv);
    }
    hook(ps, PS_POINT_DONE);
    return 0;
}

PS_API int ps_exchange(ps_shuffler_t *ps, uint64_t epoch)
{
    /* Nothing to overlap with: the calling thread does all the work. */
    int err = begin(ps, epoch, 0, NULL, NULL);
    return err ? err : ps_exchange_end(ps);
}
