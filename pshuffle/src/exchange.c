/* One epoch's exchange: post, progress, complete, commit.
 *
 * Messages per (sender, receiver) pair: one headers message (id, label,
 * size, checksum of every sample, in slot order) and then the payload in
 * chunks. Both sides know the sample count from the plan, and the receiver
 * derives the chunk boundaries from the headers with the same rule as the
 * sender, so no other size message is needed. Chunks are bounded by
 * chunk_bytes (at most 1 GiB), which keeps every MPI count far below 2 GiB.
 *
 * Commit protocol (directory store): received samples are written as files
 * but are not in the manifest; each rank then writes the manifest of
 * epoch+1 atomically; all ranks agree that all committed; only then are
 * the sent samples' files and the old manifest deleted. A crash before the
 * agreement leaves every rank with its epoch manifest (some also with
 * epoch+1), and ps_open() rolls back to the lowest epoch. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

#include "shuffler.h"

enum { TAG_HDR = 0x5053, TAG_DATA = 0x5054 };

static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint64_t get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static void hook(ps_shuffler_t *ps, int point)
{
    if (ps->hook)
        ps->hook(ps->hook_arg, point, ps->x ? ps->x->epoch : ps->epoch);
}

/* Keeps the first local failure of the exchange; it is reported when the
 * exchange ends, so that messages keep flowing and no peer is left waiting. */
static void xfail(ps__xchg_t *x, int err, int secondary)
{
    if (x->err && !(x->err_secondary && !secondary))
        return;
    x->err = err;
    x->err_secondary = secondary;
    snprintf(x->errdetail, sizeof x->errdetail, "%s", ps_errdetail());
}

static void drop_staged(ps_shuffler_t *ps, ps__xchg_t *x)
{
    char path[4200];
    for (uint64_t i = 0; i < x->nstaged; i++) {
        if (ps->root) {
            ps__sample_path(path, sizeof path, ps->rankdir, x->staged[i].id);
            unlink(path);
        } else {
            ps__arena_free(&ps->arena, x->staged[i].blk, x->staged[i].size);
        }
    }
    x->nstaged = 0;
}

/* Chunk buffers are kept between exchanges (up to PS_POOL_MAX bytes):
 * fresh large allocations come from mmap and each first touch of a page
 * faults, which on a test machine cost more than the copy itself. */
#define PS_POOL_MAX (UINT64_C(256) << 20)

static void pool_put(ps_shuffler_t *ps, unsigned char *buf, size_t len)
{
    if (!buf)
        return;
    if (ps->pool_n < PS_POOL_SLOTS && ps->pool_bytes + len <= PS_POOL_MAX) {
        ps->pool[ps->pool_n].buf = buf;
        ps->pool[ps->pool_n].len = len;
        ps->pool_n++;
        ps->pool_bytes += len;
    } else {
        free(buf);
    }
}

static unsigned char *pool_get(ps_shuffler_t *ps, size_t need, size_t *len)
{
    int best = -1;
    for (int i = 0; i < ps->pool_n; i++)
        if (ps->pool[i].len >= need && (best < 0 || ps->pool[i].len < ps->pool[best].len))
            best = i;
    if (best < 0) {
        *len = need ? need : 1;
        return malloc(*len);
    }
    unsigned char *b = ps->pool[best].buf;
    *len = ps->pool[best].len;
    ps->pool_bytes -= *len;
    ps->pool[best] = ps->pool[--ps->pool_n];
    return b;
}

void ps__pool_free(ps_shuffler_t *ps)
{
    for (int i = 0; i < ps->pool_n; i++)
        free(ps->pool[i].buf);
    ps->pool_n = 0;
    ps->pool_bytes = 0;
}

static void free_peers(ps_shuffler_t *ps, ps__peer_t *p, int n)
{
    for (int i = 0; p && i < n; i++) {
        free(p[i].idx);
        free(p[i].hdr);
        pool_put(ps, p[i].buf, p[i].buflen);
    }
    free(p);
}

static void stop_thread(ps_shuffler_t *ps)
{
    if (!ps->thread_running)
        return;
    ps->thread_stop = 1;
    pthread_join(ps->thread, NULL);
    ps->thread_running = 0;
}

void ps__xchg_free(ps_shuffler_t *ps)
{
    ps__xchg_t *x = ps->x;
    stop_thread(ps);
    if (!x)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    for (int i = 0; !fin && i < 2 * (x->nsp + x->nrp); i++)
        if (x->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&x->reqs[i]);
            MPI_Request_free(&x->reqs[i]);
        }
    drop_staged(ps, x);
    free(x->staged);
    free(x->sent);
    free(x->reqs);
    free_peers(ps, x->sp, x->nsp);
    free_peers(ps, x->rp, x->nrp);
    ps_plan_free(&x->plan);
    free(x);
    ps->x = NULL;
}

/* The chunk starting at sample `first`: as many samples as fit in
 * chunk_bytes, at least one. Sender and receiver both use this rule. */
static uint64_t chunk_span(const ps_shuffler_t *ps, const unsigned char *hdr, uint64_t first, uint64_t n,
                           uint64_t *bytes)
{
    uint64_t cnt = 0, b = 0;
    while (first + cnt < n) {
        uint64_t s = get64(hdr + (first + cnt) * PS_WIRE_HDR + 16);
        if (cnt && b + s > ps->chunk)
            break;
        b += s;
        cnt++;
    }
    *bytes = b;
    return cnt;
}

/* Called once the ranks agreed to exchange: the peer's messages are
 * already on their way, and without a buffer this rank cannot take part,
 * so a failure ends the job with a message rather than leave peers waiting. */
static void note_peak(ps_shuffler_t *ps, ps__xchg_t *x)
{
    uint64_t b = ps->bytes + x->staged_bytes + x->buf_bytes;
    if (b > x->st.peak_bytes)
        x->st.peak_bytes = b;
}

static int buf_reserve(ps_shuffler_t *ps, ps__peer_t *p, size_t len)
{
    if (len <= p->buflen && p->buf)
        return 0;
    ps->x->buf_bytes -= p->buflen;
    pool_put(ps, p->buf, p->buflen);
    p->buf = ps__fault(ps, "chunk") ? NULL : pool_get(ps, len, &p->buflen);
    if (p->buf) {
        ps->x->buf_bytes += p->buflen;
        note_peak(ps, ps->x);
    }
    if (!p->buf) {
        p->buflen = 0;
        ps__errf(-ENOMEM, "a %zu-byte payload buffer for the exchange with rank %d", len, p->peer);
        ps__fatal(ps, -ENOMEM, "exchange");
    }
    return 0;
}

static int post_send_chunk(ps_shuffler_t *ps, ps__xchg_t *x, int i)
{
    ps__peer_t *p = &x->sp[i];
    uint64_t bytes, cnt = chunk_span(ps, p->hdr, p->next, p->n, &bytes);
    int err = buf_reserve(ps, p, bytes);
    if (err)
        return err;
    size_t off = 0;
    for (uint64_t j = p->next; j < p->next + cnt; j++) {
        const ps__entry_t *e = &ps->ent[p->idx[j]];
        int rerr = ps_read(ps, p->idx[j], p->buf + off, e->size);
        if (rerr) {
            /* Send the chunk anyway so the receiver is not left waiting;
             * the checksum tells it the payload is bad, and this rank
             * reports the real cause when the exchange ends. */
            xfail(x, rerr, 0);
            memset(p->buf + off, 0, e->size);
        }
        off += e->size;
    }
    p->cfirst = p->next;
    p->ccount = cnt;
    p->next += cnt;
    if (MPI_Isend(p->buf, (int)bytes, MPI_BYTE, p->peer, TAG_DATA, ps->comm, &x->reqs[2 * i + 1]) != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Isend of %" PRIu64 " bytes to rank %d failed", bytes, p->peer);
    x->st.chunks_sent++;
    return 0;
}

static int post_recv_chunk(ps_shuffler_t *ps, ps__xchg_t *x, int i)
{
    ps__peer_t *p = &x->rp[i];
    uint64_t bytes, cnt = chunk_span(ps, p->hdr, p->next, p->n, &bytes);
    int err = buf_reserve(ps, p, bytes);
    if (err)
        return err;
    p->cfirst = p->next;
    p->ccount = cnt;
    p->next += cnt;
    int slot = 2 * (x->nsp + i) + 1;
    if (MPI_Irecv(p->buf, (int)bytes, MPI_BYTE, p->peer, TAG_DATA, ps->comm, &x->reqs[slot]) != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Irecv of %" PRIu64 " bytes from rank %d failed", bytes, p->peer);
    return 0;
}

static int stage(ps_shuffler_t *ps, ps__xchg_t *x, const ps__entry_t *e, const void *data)
{
    if (x->nstaged == x->capstaged) {
        uint64_t cap = x->capstaged ? 2 * x->capstaged : 64;
        ps__entry_t *t = realloc(x->staged, cap * sizeof *t);
        if (!t)
            return -ENOMEM;
        x->staged = t;
        x->capstaged = cap;
    }
    ps__entry_t s = *e;
    int err;
    if (ps->root) {
        /* Not fsync'd one by one: the commit syncs the store once before
         * it writes the manifest, and the manifest is the commit. */
        if ((err = ps__sample_write(ps->rankdir, &s, data, 0)))
            return err;
    } else {
        if (!(s.data = ps__arena_alloc(&ps->arena, s.size, &s.blk)))
            return -ENOMEM;
        if (s.size)
            memcpy(s.data, data, s.size);
    }
    x->staged[x->nstaged++] = s;
    x->staged_bytes += s.size;
    if (ps->n + x->nstaged > x->st.peak_samples)
        x->st.peak_samples = ps->n + x->nstaged;
    note_peak(ps, x);
    return 0;
}

static void recv_chunk_done(ps_shuffler_t *ps, ps__xchg_t *x, int i)
{
    ps__peer_t *p = &x->rp[i];
    size_t off = 0;
    x->st.chunks_recv++;
    for (uint64_t j = p->cfirst; j < p->cfirst + p->ccount; j++) {
        const unsigned char *h = p->hdr + j * PS_WIRE_HDR;
        ps__entry_t e = {.id = get64(h), .label = (int32_t)(uint32_t)get64(h + 8),
                         .flags = (uint32_t)(get64(h + 8) >> 32), .size = get64(h + 16), .hash = get64(h + 24)};
        const unsigned char *d = p->buf + off;
        off += e.size;
        e.flags = 0;
        if (ps__hash(d, e.size) != e.hash) {
            ps__errf(PS_ECORRUPT, "sample %#" PRIx64 " from rank %d arrived with a bad checksum", e.id, p->peer);
            xfail(x, PS_ECORRUPT, 1);
            continue;
        }
        int err = x->err ? 0 : stage(ps, x, &e, d);
        if (err)
            xfail(x, err, 0);
        x->st.samples_recv++;
        x->st.bytes_recv += e.size;
    }
    if (!x->part_hooked) {
        x->part_hooked = 1;
        hook(ps, PS_POINT_RECV_PART);
    }
}

/* Handles the completion of request `slot`, posting what follows it. */
static void on_complete(ps_shuffler_t *ps, ps__xchg_t *x, int slot)
{
    int i = slot / 2, data = slot % 2, err = 0;
    if (i < x->nsp) {
        ps__peer_t *p = &x->sp[i];
        if (!data)
            p->hdr_done = 1;
        else if (p->next < p->n)
            err = post_send_chunk(ps, x, i);
        else
            p->finished = 1;
    } else {
        i -= x->nsp;
        ps__peer_t *p = &x->rp[i];
        if (!data) {
            p->hdr_done = 1;
            for (uint64_t j = 0; j < p->n; j++)
                if (get64(p->hdr + j * PS_WIRE_HDR + 16) > PS_MAX_SAMPLE) {
                    err = ps__errf(PS_ECORRUPT, "headers from rank %d: sample size over 1 GiB", p->peer);
                    break;
                }
            if (!err)
                err = post_recv_chunk(ps, x, i);
        } else {
            recv_chunk_done(ps, x, i);
            if (p->next < p->n)
                err = post_recv_chunk(ps, x, i);
            else
                p->finished = 1;
        }
    }
    if (err)
        xfail(x, err, 0); /* an MPI failure here cannot be hidden: the job will fail */
}

static int all_null(const ps__xchg_t *x)
{
    for (int i = 0; i < 2 * (x->nsp + x->nrp); i++)
        if (x->reqs[i] != MPI_REQUEST_NULL)
            return 0;
    return 1;
}

static int step(ps_shuffler_t *ps, ps__xchg_t *x, int blocking)
{
    int n = 2 * (x->nsp + x->nrp), idx = MPI_UNDEFINED, flag = 0, rc;
    if (n == 0 || all_null(x)) {
        x->complete = 1;
        return 0;
    }
    if (blocking) {
        rc = MPI_Waitany(n, x->reqs, &idx, MPI_STATUS_IGNORE);
        flag = 1;
    } else {
        rc = MPI_Testany(n, x->reqs, &idx, &flag, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_%s failed during the exchange of epoch %" PRIu64,
                        blocking ? "Waitany" : "Testany", x->epoch);
    if (!flag)
        return 0;
    if (idx != MPI_UNDEFINED)
        on_complete(ps, x, idx);
    if (all_null(x)) {
        x->complete = 1;
        x->t_complete = ps__now_ns();
    }
    return 1;
}

static int begin_local(ps_shuffler_t *ps, uint64_t epoch);
int ps__post(ps_shuffler_t *ps);

/* The progress thread: polls the exchange until it completes or
 * ps_exchange_end() takes over. The mutex keeps it from running a step at
 * the same time as ps_progress(). */
static void *progress_main(void *arg)
{
    ps_shuffler_t *ps = arg;
    ps__xchg_t *x = ps->x;
    long nap = 20000;
    while (!ps->thread_stop) {
        pthread_mutex_lock(&ps->mu);
        int r = 0, moved = 0;
        for (int i = 0; i < 64 && !x->complete; i++) {
            if ((r = step(ps, x, 0)) <= 0)
                break;
            moved = 1;
        }
        if (moved)
            x->t_outside = ps__now_ns();
        if (r < 0)
            xfail(x, r, 0);
        int stop = x->complete || r < 0;
        pthread_mutex_unlock(&ps->mu);
        if (stop)
            break;
        /* Poll often while messages flow, back off to 1 ms when idle, so
         * the thread costs little CPU during a long epoch. */
        nap = moved ? 20000 : (nap < 1000000 ? 2 * nap : 1000000);
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

PS_API int ps_exchange_begin(ps_shuffler_t *ps, uint64_t epoch)
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
    int serr = ps__sync(ps, PS_OP_BEGIN, epoch);
    if (serr)
        return serr;
    int created = 0;
    if (!err) {
        err = begin_local(ps, epoch);
        created = ps->x != NULL;
    }
    if ((err = ps__agree(ps, err, 0))) {
        if (created)
            ps__xchg_free(ps);
        return err;
    }
    if ((err = ps__post(ps)))
        ps__fatal(ps, err, "ps_exchange_begin"); /* the peers posted theirs: no way back */
    if (ps->progress_thread) {
        ps->thread_stop = 0;
        if ((err = pthread_create(&ps->thread, NULL, progress_main, ps)))
            return ps__errf(-err, "cannot start the progress thread"); /* ps_exchange_end() still completes */
        ps->thread_running = 1;
    }
    return 0;
}

static int begin_local(ps_shuffler_t *ps, uint64_t epoch)
{
    int err = 0;
    if (ps__fault(ps, "begin"))
        return ps__errf(-ENOMEM, "planning the exchange of epoch %" PRIu64 " (injected allocation failure)", epoch);
    ps__xchg_t *x = calloc(1, sizeof *x);
    if (!x)
        return -ENOMEM;
    ps->x = x;
    x->t_begin = ps__now_ns();
    x->epoch = epoch;
    x->q = ps_schedule_q(&ps->q, epoch);
    x->st.epoch = epoch;
    x->st.q = x->q;
    x->st.peak_samples = ps->n;
    x->st.peak_bytes = ps->bytes;
    if ((err = ps_plan_compute(&x->plan, ps->seed, epoch, x->q, ps->counts, ps->nranks, ps->rank)))
        goto fail;
    x->sent = calloc(ps->n ? ps->n : 1, 1);
    int M = ps->nranks;
    uint64_t *scnt = calloc((size_t)M, sizeof *scnt), *rcnt = calloc((size_t)M, sizeof *rcnt);
    int *smap = malloc((size_t)M * sizeof *smap), *rmap = malloc((size_t)M * sizeof *rmap);
    if (!x->sent || !scnt || !rcnt || !smap || !rmap) {
        free(scnt), free(rcnt), free(smap), free(rmap);
        err = -ENOMEM;
        goto fail;
    }
    const ps_plan_t *pl = &x->plan;
    for (uint64_t i = 0; i < pl->nsend; i++)
        scnt[pl->send_to[i]]++;
    for (int r = 0; r < M; r++)
        rcnt[r] = r == ps->rank ? 0 : pl->recv_count[r];
    for (int r = 0; r < M; r++) {
        /* Headers travel as a count of PS_WIRE_HDR-byte records (not bytes,
         * which overflowed an int past 67 M samples to one peer). */
        if (scnt[r] > INT_MAX || rcnt[r] > INT_MAX) {
            err = ps__errf(PS_ETOOBIG, "exchange of epoch %" PRIu64 ": %" PRIu64 " samples between ranks %d and %d "
                           "(limit %d per pair)", epoch, scnt[r] > rcnt[r] ? scnt[r] : rcnt[r], ps->rank, r, INT_MAX);
            free(scnt), free(rcnt), free(smap), free(rmap);
            goto fail;
        }
    }
    for (int r = 0; r < M; r++) {
        smap[r] = scnt[r] ? x->nsp++ : -1;
        rmap[r] = rcnt[r] ? x->nrp++ : -1;
    }
    x->sp = calloc((size_t)x->nsp + 1, sizeof *x->sp);
    x->rp = calloc((size_t)x->nrp + 1, sizeof *x->rp);
    x->reqs = malloc((2 * (size_t)(x->nsp + x->nrp) + 1) * sizeof *x->reqs);
    for (int r = 0; x->sp && x->rp && r < M; r++) {
        if (smap[r] >= 0) {
            ps__peer_t *p = &x->sp[smap[r]];
            p->peer = r;
            p->idx = malloc(scnt[r] * sizeof *p->idx);
            p->hdr = malloc(scnt[r] * PS_WIRE_HDR);
            if (!p->idx || !p->hdr)
                err = -ENOMEM;
        }
        if (rmap[r] >= 0) {
            ps__peer_t *p = &x->rp[rmap[r]];
            p->peer = r;
            p->n = rcnt[r];
            p->hdr = malloc(rcnt[r] * PS_WIRE_HDR);
            if (!p->hdr)
                err = -ENOMEM;
        }
    }
    if (!x->sp || !x->rp || !x->reqs)
        err = -ENOMEM;
    free(scnt), free(rcnt);
    if (err) {
        free(smap), free(rmap);
        goto fail;
    }
    for (int i = 0; i < 2 * (x->nsp + x->nrp); i++)
        x->reqs[i] = MPI_REQUEST_NULL;
    x->st.samples_kept = pl->nkept;
    for (uint64_t i = 0; i < pl->nsend; i++) {
        ps__peer_t *p = &x->sp[smap[pl->send_to[i]]];
        uint64_t pos = pl->send_pos[i];
        const ps__entry_t *e = &ps->ent[pos];
        unsigned char *h = p->hdr + p->n * PS_WIRE_HDR;
        put64(h, e->id);
        put64(h + 8, (uint64_t)(uint32_t)e->label);
        put64(h + 16, e->size);
        put64(h + 24, e->hash);
        p->idx[p->n++] = pos;
        x->sent[pos] = 1;
        x->st.samples_sent++;
        x->st.bytes_sent += e->size;
    }
    free(smap), free(rmap);
    return 0;
fail:
    ps__xchg_free(ps);
    return err;
}

/* Posts the first messages. A failure here is an MPI failure, which the
 * job does not survive; it is still reported, not hidden. */
int ps__post(ps_shuffler_t *ps)
{
    ps__xchg_t *x = ps->x;
    int err = 0;
    /* Receives first, so that the headers find a posted buffer. */
    for (int i = 0; i < x->nrp; i++) {
        ps__peer_t *p = &x->rp[i];
        if (MPI_Irecv(p->hdr, (int)p->n, ps->hdrtype, p->peer, TAG_HDR, ps->comm,
                      &x->reqs[2 * (x->nsp + i)]) != MPI_SUCCESS) {
            err = ps__errf(PS_EMPI, "MPI_Irecv of headers from rank %d failed", p->peer);
            goto fail;
        }
    }
    for (int i = 0; i < x->nsp; i++) {
        ps__peer_t *p = &x->sp[i];
        if (MPI_Isend(p->hdr, (int)p->n, ps->hdrtype, p->peer, TAG_HDR, ps->comm, &x->reqs[2 * i]) !=
            MPI_SUCCESS) {
            err = ps__errf(PS_EMPI, "MPI_Isend of headers to rank %d failed", p->peer);
            goto fail;
        }
        if ((err = post_send_chunk(ps, x, i)))
            goto fail;
    }
    hook(ps, PS_POINT_BEGIN);
    return 0;
fail:
    ps__xchg_free(ps);
    return err;
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
     * long: about 1 ms, unless one completion's work alone takes longer. */
    uint64_t t0 = ps__now_ns();
    while (!x->complete && ps__now_ns() - t0 < 1000000) {
        if ((r = step(ps, x, 0)) < 0) {
            err = r;
            break;
        }
        if (r == 0)
            break;
        x->t_outside = ps__now_ns();
    }
    if (done)
        *done = x->complete;
    return err;
}

static int commit(ps_shuffler_t *ps, ps__xchg_t *x, ps__entry_t **newent, uint64_t *newn)
{
    uint64_t kept = ps->n - x->st.samples_sent, n = kept + x->nstaged, k = 0;
    ps__entry_t *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return -ENOMEM;
    for (uint64_t i = 0; i < ps->n; i++)
        if (!x->sent[i])
            e[k++] = ps->ent[i];
    if (x->nstaged)
        memcpy(e + k, x->staged, x->nstaged * sizeof *e);
    if (n != x->plan.count_after) {
        free(e);
        return ps__errf(PS_ECORRUPT, "rank %d would hold %" PRIu64 " samples after the exchange, the plan says %" PRIu64,
                        ps->rank, n, x->plan.count_after);
    }
    qsort(e, n, sizeof *e, ps__cmp_entry);
    for (uint64_t i = 1; i < n; i++)
        if (e[i].id == e[i - 1].id) {
            int err = ps__errf(PS_EDUP, "rank %d: sample id %#" PRIx64 " received while already held", ps->rank,
                               e[i].id);
            free(e);
            return err;
        }
    int err = 0;
    if (ps->root) {
        if (ps->fsync && (err = ps__sync_store(ps->rankdir)))
            goto out;
        hook(ps, PS_POINT_STAGED);
        ps__manifest_t m = {.rank = ps->rank, .nranks = ps->nranks, .epoch = x->epoch + 1, .seed = ps->seed,
                            .params = ps->params, .count = n, .ent = e};
        ps__schedule_desc(&ps->q, m.qdesc, sizeof m.qdesc);
        err = ps__manifest_write(ps->rankdir, &m, ps->fsync);
    } else {
        hook(ps, PS_POINT_STAGED);
    }
out:
    if (err) {
        free(e);
        return err;
    }
    *newent = e;
    *newn = n;
    return 0;
}

PS_API int ps_exchange_end(ps_shuffler_t *ps)
{
    ps__xchg_t *x = ps->x;
    int err = 0;
    ps__errclear();
    /* Collective: ranks without an exchange still take part, so one rank's
     * misuse fails everybody instead of hanging them. */
    uint64_t t_end = ps__now_ns();
    if ((err = ps__sync(ps, PS_OP_END, x ? x->epoch : ps->epoch))) {
        /* Out of step with the other ranks: nothing can complete. */
        if (x)
            ps__fatal(ps, err, "ps_exchange_end");
        return err;
    }
    if (!x)
        return ps__agree(ps, ps__errf(PS_ESTATE, "ps_exchange_end without ps_exchange_begin"), 0);
    x->t_endcall = t_end;
    stop_thread(ps);
    /* Polled rather than MPI_Waitany, so that a peer that stopped sending
     * ends the job with a message instead of a silent hang. */
    uint64_t last = ps__now_ns(), limit = (uint64_t)(ps->timeout_s * 1e9);
    while (!x->complete) {
        int r = step(ps, x, 0);
        if (r < 0) {
            xfail(x, r, 0);
            break;
        }
        if (r > 0) {
            last = ps__now_ns();
            continue;
        }
        if (ps__now_ns() - last > limit) {
            ps__errf(PS_EPEER, "no message from the other ranks within %g s (PSHUFFLE_TIMEOUT) during the exchange "
                     "of epoch %" PRIu64 ": a rank died or left the exchange", ps->timeout_s, x->epoch);
            ps__fatal(ps, PS_EPEER, "ps_exchange_end");
        }
        sched_yield();
    }
    if (!x->t_complete)
        x->t_complete = ps__now_ns();
    ps__entry_t *newent = NULL;
    uint64_t newn = 0;
    if (x->err) {
        err = x->err;
        ps__errset(x->errdetail);
    } else {
        err = commit(ps, x, &newent, &newn);
    }
    hook(ps, PS_POINT_COMMITTED);
    int secondary = x->err && x->err_secondary;
    if ((err = ps__agree(ps, err, secondary))) {
        /* No partial commit: every rank returns to the old epoch. */
        char path[4200];
        if (ps->root && newent) {
            ps__manifest_path(path, sizeof path, ps->rankdir, x->epoch + 1);
            unlink(path);
        }
        free(newent);
        ps__xchg_free(ps);
        return err;
    }
    hook(ps, PS_POINT_AGREED);
    /* Every receiver has committed: the sent samples can go. */
    uint64_t done = 0, half = x->st.samples_sent / 2;
    for (uint64_t i = 0; i < ps->n; i++) {
        if (!x->sent[i])
            continue;
        if (ps->root) {
            char path[4200];
            ps__sample_path(path, sizeof path, ps->rankdir, ps->ent[i].id);
            unlink(path);
        } else {
            ps__arena_free(&ps->arena, ps->ent[i].blk, ps->ent[i].size);
        }
        if (++done == half && half)
            hook(ps, PS_POINT_DELETING);
    }
    if (ps->root) {
        char path[4200];
        ps__manifest_path(path, sizeof path, ps->rankdir, x->epoch);
        unlink(path);
    }
    free(ps->ent);
    ps->ent = newent;
    ps->n = ps->cap = newn;
    if (!ps->root)
        ps__arena_compact(&ps->arena, ps->ent, ps->n);
    ps->bytes = ps->bytes - x->st.bytes_sent + x->staged_bytes;
    ps->epoch = x->epoch + 1;
    ps_plan_balance(ps->counts, ps->nranks, ps->counts); /* what every rank now holds */
    x->nstaged = 0; /* now owned by ps->ent */
    uint64_t now = ps__now_ns();
    x->st.exchange_ns = x->t_complete - x->t_begin;
    x->st.blocked_ns = now - x->t_endcall;
    /* Only progress that happened before ps_exchange_end() counts. */
    x->st.overlap_ns = x->t_outside > x->t_begin && x->t_outside <= x->t_endcall ? x->t_outside - x->t_begin : 0;
    ps->stats = x->st;
    ps__xchg_free(ps);
    if (ps->root)
        ps__pool_free(ps); /* a directory store holds no payload in memory between epochs */
    hook(ps, PS_POINT_DONE);
    return 0;
}

PS_API int ps_exchange(ps_shuffler_t *ps, uint64_t epoch)
{
    int err = ps_exchange_begin(ps, epoch);
    return err ? err : ps_exchange_end(ps);
}
