/* The exchange plan: a pure function of (seed, epoch, Q, per-rank counts).
 * No communication, no global state, so the CLI can simulate whole runs and
 * every rank of a job derives the same plan. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

enum { D_ORDER = 0x6f72646572ULL, D_SEND = 0x73656e64ULL, D_DEAL = 0x6465616cULL, D_PART = 0x70617274ULL };

uint64_t ps__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void ps__rng_init(ps__rng_t *r, uint64_t seed, uint64_t domain, uint64_t a, uint64_t b)
{
    /* Chained finalisers make the key depend on every input bit; streams
     * that differ in any input get unrelated keys. */
    uint64_t k = ps__mix64(seed ^ UINT64_C(0x243f6a8885a308d3));
    k = ps__mix64(k ^ domain);
    k = ps__mix64(k ^ (a + UINT64_C(0x9e3779b97f4a7c15)));
    k = ps__mix64(k ^ (b + UINT64_C(0x3c6ef372fe94f82a)));
    r->key = k;
    r->ctr = 0;
}

uint64_t ps__rng_next(ps__rng_t *r)
{
    r->ctr++;
    return ps__mix64(r->key + r->ctr * UINT64_C(0x9e3779b97f4a7c15));
}

/* Lemire's multiply-shift with rejection: exactly uniform on [0, n). */
uint64_t ps__rng_below(ps__rng_t *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)ps__rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = (0 - n) % n;
        while (lo < t) {
            m = (unsigned __int128)ps__rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static int q_ok(double q) { return q >= 0.0 && q <= 1.0; }  /* false for NaN */

PS_API int ps_schedule_check(const ps_schedule_t *s)
{
    if (!s)
        return ps__errf(PS_EINVAL, "no Q schedule");
    switch (s->kind) {
    case PS_Q_CONST:
        if (!q_ok(s->q0))
            return ps__errf(PS_EINVAL, "Q=%g is outside [0, 1]", s->q0);
        return 0;
    case PS_Q_EXP:
        if (!q_ok(s->q0) || !q_ok(s->q_min) || !q_ok(s->q_rate))
            return ps__errf(PS_EINVAL, "exponential Q schedule q0=%g rate=%g min=%g: values must lie in [0, 1]",
                            s->q0, s->q_rate, s->q_min);
        return 0;
    case PS_Q_LINEAR:
        if (!q_ok(s->q0) || !q_ok(s->q_min) || !(s->q_rate >= 0.0) || isinf(s->q_rate))
            return ps__errf(PS_EINVAL, "linear Q schedule q0=%g step=%g min=%g: q0 and min must lie in [0, 1], step >= 0",
                            s->q0, s->q_rate, s->q_min);
        return 0;
    case PS_Q_TABLE:
        if (!s->q_table || s->q_table_len == 0)
            return ps__errf(PS_EINVAL, "table Q schedule without entries");
        for (uint32_t i = 0; i < s->q_table_len; i++)
            if (!q_ok(s->q_table[i]))
                return ps__errf(PS_EINVAL, "Q table entry %u = %g is outside [0, 1]", i, s->q_table[i]);
        return 0;
    default:
        return ps__errf(PS_EINVAL, "unknown Q schedule kind %d", s->kind);
    }
}

PS_API double ps_schedule_q(const ps_schedule_t *s, uint64_t e)
{
    double q;
    switch (s->kind) {
    case PS_Q_EXP:
        q = s->q0 * pow(s->q_rate, (double)e);
        return q < s->q_min ? s->q_min : q;
    case PS_Q_LINEAR:
        q = s->q0 - s->q_rate * (double)e;
        return q < s->q_min ? s->q_min : q;
    case PS_Q_TABLE:
        return s->q_table[e < s->q_table_len ? e : s->q_table_len - 1];
    default:
        return s->q0;
    }
}

PS_API uint64_t ps_plan_count(double q, uint64_t n)
{
    if (!(q > 0.0))
        return 0;
    if (q >= 1.0)
        return n;
    uint64_t k = (uint64_t)floor(q * (double)n + 0.5);
    return k > n ? n : k;
}

PS_API void ps_plan_free(ps_plan_t *p)
{
    if (!p)
        return;
    free(p->send_pos);
    free(p->send_to);
    free(p->recv_count);
    memset(p, 0, sizeof *p);
}

/* First k entries of a uniformly random permutation of 0..n-1 (partial
 * Fisher-Yates). */
static int partial_perm(uint64_t *out, uint64_t k, uint64_t n, ps__rng_t *r)
{
    uint64_t *a = malloc((n ? n : 1) * sizeof *a);
    if (!a)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++)
        a[i] = i;
    for (uint64_t i = 0; i < k; i++) {
        uint64_t j = i + ps__rng_below(r, n - i);
        uint64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
        out[i] = a[i];
    }
    free(a);
    return 0;
}

PS_API void ps_partition_perm(uint64_t *perm, uint64_t n, uint64_t seed, uint64_t epoch, int shuffle)
{
    for (uint64_t i = 0; i < n; i++)
        perm[i] = i;
    if (!shuffle)
        return;
    /* Fisher-Yates with exactly uniform bounded draws: every one of the n!
     * permutations is equally likely, as torch.randperm's. */
    ps__rng_t r;
    ps__rng_init(&r, seed, D_PART, epoch, 0);
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = ps__rng_below(&r, i);
        uint64_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

PS_API void ps_plan_order(uint64_t *out, uint64_t n, uint64_t seed, uint64_t epoch, int rank)
{
    ps__rng_t r;
    ps__rng_init(&r, seed, D_ORDER, epoch, (uint64_t)rank);
    for (uint64_t i = 0; i < n; i++)
        out[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = ps__rng_below(&r, i);
        uint64_t t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
    }
}

PS_API void ps_plan_balance(const uint64_t *counts, int nranks, uint64_t *t)
{
    uint64_t N = 0;
    for (int r = 0; r < nranks; r++)
        N += counts[r];
    uint64_t base = N / (uint64_t)nranks, extra = N % (uint64_t)nranks;
    /* The larger shares go where the samples already are, so a balanced
     * partition stays put at Q=0. One pass reads counts[r] before writing
     * t[r], so t may be counts. */
    for (int r = 0; r < nranks; r++) {
        int more = counts[r] > base && extra;
        t[r] = base + (uint64_t)more;
        extra -= (uint64_t)more;
    }
    for (int r = 0; r < nranks && extra; r++)
        if (t[r] == base)
            t[r]++, extra--;
}

/* Computes the plans of ranks [r0, r1) of one epoch. The pool's dealing is
 * drawn once, as a random arrangement of the multiset of destinations (each
 * rank d appearing need[d] times): pool sample p goes to lab[p]. A uniform
 * arrangement makes every split of the pool into parts of those sizes
 * equally likely, and it does not depend on which samples are in the pool,
 * so at Q=1 each epoch's partition is independent of the previous one. */
static int plan_range(ps_plan_t *out, uint64_t seed, uint64_t epoch, double q, const uint64_t *counts, int nranks,
                      int r0, int r1)
{
    int err = 0;
    uint64_t *t = malloc((size_t)nranks * sizeof *t), *k = malloc((size_t)nranks * sizeof *k);
    uint64_t *poff = malloc(((size_t)nranks + 1) * sizeof *poff);
    int32_t *lab = NULL;
    if (!t || !k || !poff) {
        err = -ENOMEM;
        goto out;
    }
    ps_plan_balance(counts, nranks, t);
    poff[0] = 0;
    for (int r = 0; r < nranks; r++) {
        uint64_t kr = ps_plan_count(q, counts[r]);
        if (counts[r] > t[r] && counts[r] - t[r] > kr)
            kr = counts[r] - t[r]; /* a rank over its share gives at least the surplus */
        k[r] = kr;
        poff[r + 1] = poff[r] + kr;
    }
    uint64_t K = poff[nranks];
    if (K > (uint64_t)SIZE_MAX / sizeof *lab) {
        err = ps__errf(PS_EINVAL, "plan: a pool of %" PRIu64 " samples is too large", K);
        goto out;
    }
    lab = malloc((K ? K : 1) * sizeof *lab);
    if (!lab) {
        err = -ENOMEM;
        goto out;
    }
    uint64_t p = 0;
    for (int r = 0; r < nranks; r++) {
        uint64_t need = t[r] - (counts[r] - k[r]);
        for (uint64_t j = 0; j < need; j++)
            lab[p++] = r;
    }
    ps__rng_t rd;
    ps__rng_init(&rd, seed, D_DEAL, epoch, 0);
    for (uint64_t i = K; i > 1; i--) {
        uint64_t j = ps__rng_below(&rd, i);
        int32_t x = lab[i - 1];
        lab[i - 1] = lab[j];
        lab[j] = x;
    }
    for (int r = r0; r < r1; r++) {
        ps_plan_t *pl = &out[r - r0];
        uint64_t kr = k[r], moving = 0;
        for (uint64_t j = 0; j < kr; j++)
            moving += lab[poff[r] + j] != r;
        pl->npool = kr;
        pl->nsend = moving;
        pl->nkept = kr - moving;
        pl->count_after = t[r];
        pl->send_pos = malloc((moving ? moving : 1) * sizeof *pl->send_pos);
        pl->send_to = malloc((moving ? moving : 1) * sizeof *pl->send_to);
        pl->recv_count = calloc((size_t)nranks, sizeof *pl->recv_count);
        uint64_t *pos = malloc((kr ? kr : 1) * sizeof *pos);
        if (!pl->send_pos || !pl->send_to || !pl->recv_count || !pos) {
            free(pos);
            err = -ENOMEM;
            goto out;
        }
        ps__rng_t rs;
        ps__rng_init(&rs, seed, D_SEND, epoch, (uint64_t)r);
        if ((err = partial_perm(pos, kr, counts[r], &rs))) {
            free(pos);
            goto out;
        }
        uint64_t m = 0;
        for (uint64_t j = 0; j < kr; j++) {
            int d = lab[poff[r] + j];
            if (d == r)
                continue;
            pl->send_pos[m] = pos[j];
            pl->send_to[m++] = d;
        }
        free(pos);
    }
    /* Receive counts: one pass over the pool serves every rank in range. */
    for (int s = 0; s < nranks; s++)
        for (uint64_t p2 = poff[s]; p2 < poff[s + 1]; p2++) {
            int d = lab[p2];
            if (d != s && d >= r0 && d < r1) {
                out[d - r0].recv_count[s]++;
                out[d - r0].nrecv++;
            }
        }
out:
    free(t);
    free(k);
    free(poff);
    free(lab);
    if (err)
        for (int r = r0; r < r1; r++)
            ps_plan_free(&out[r - r0]);
    return err;
}

static int plan_args(uint64_t seed, double q, const uint64_t *counts, int nranks)
{
    (void)seed;
    if (!counts || nranks < 1)
        return ps__errf(PS_EINVAL, "plan: %d ranks", nranks);
    uint64_t N = 0;
    for (int r = 0; r < nranks; r++) {
        if (counts[r] > UINT64_MAX - N)
            return ps__errf(PS_EINVAL, "plan: sample counts overflow");
        N += counts[r];
    }
    if (!q_ok(q))
        return ps__errf(PS_EINVAL, "Q=%g is outside [0, 1]", q);
    return 0;
}

PS_API int ps_plan_compute(ps_plan_t *out, uint64_t seed, uint64_t epoch, double q,
                           const uint64_t *counts, int nranks, int rank)
{
    memset(out, 0, sizeof *out);
    int err = plan_args(seed, q, counts, nranks);
    if (err)
        return err;
    if (rank < 0 || rank >= nranks)
        return ps__errf(PS_EINVAL, "plan: rank %d of %d", rank, nranks);
    return plan_range(out, seed, epoch, q, counts, nranks, rank, rank + 1);
}

PS_API int ps_plan_compute_all(ps_plan_t *out, uint64_t seed, uint64_t epoch, double q,
                               const uint64_t *counts, int nranks)
{
    if (nranks > 0 && out)
        memset(out, 0, (size_t)nranks * sizeof *out);
    int err = plan_args(seed, q, counts, nranks);
    return err ? err : plan_range(out, seed, epoch, q, counts, nranks, 0, nranks);
}

void ps__schedule_desc(const ps_schedule_t *q, char *buf, size_t len)
{
    switch (q->kind) {
    case PS_Q_EXP:
        snprintf(buf, len, "Q=%g*%g^e,min=%g", q->q0, q->q_rate, q->q_min);
        break;
    case PS_Q_LINEAR:
        snprintf(buf, len, "Q=%g-%g*e,min=%g", q->q0, q->q_rate, q->q_min);
        break;
    case PS_Q_TABLE:
        snprintf(buf, len, "Q=table[%u]:%g,...", q->q_table_len, q->q_table_len ? q->q_table[0] : 0.0);
        break;
    default:
        snprintf(buf, len, "Q=%g", q->q0);
        break;
    }
}
