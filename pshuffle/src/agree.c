/* The agreement among ranks that every collective step of the shuffler and
 * of the exchange starts and ends with: the same call for the same epoch on
 * every rank (ps__sync), one result for all (ps__agree), a bounded wait
 * (ps__wait), and the job's end when no agreement is possible (ps__fatal);
 * and ps_agree_error(), the same agreement offered to the caller. Used by
 * shuffler.c and exchange.c; it calls neither. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shuffler.h"

static const char *const op_names[] = {"?", "a load (ps_load_files/ps_load_packed)", "ps_start",
                                       "ps_exchange_begin", "ps_exchange_end",
                                       "ps_close during an exchange", "ps_exchange_begin_to",
                                       "ps_agree_error", "ps_exchange_begin_dest"};

void ps__fatal(ps_shuffler_t *ps, int err, const char *what)
{
    /* The one place the library writes: the job is about to end, and the
     * reason must reach the user from the rank that knows it. */
    char line[900];
    int n = snprintf(line, sizeof line, "pshuffle: rank %d: %s: %s%s%s; aborting the job\n", ps->rank, what,
                     ps_strerror(err), ps_errdetail()[0] ? ": " : "", ps_errdetail());
    if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        n = 0;
    MPI_Abort(ps->comm, 70);
    _exit(70); /* MPI_Abort does not return; this is in case it does */
}

#ifdef PS_TEST_HOOKS
int ps__fault(const ps_shuffler_t *ps, const char *where)
{
    const char *s = getenv("PSHUFFLE_TEST_FAIL_ALLOC");
    char *end;
    if (!s || !*s)
        return 0;
    long r = strtol(s, &end, 10);
    return *end == ':' && r == ps->rank && !strcmp(end + 1, where);
}
#endif

/* Waits for a nonblocking collective, at most timeout_s. A rank that never
 * arrives (it died, or called another function) would otherwise leave this
 * one waiting forever; past the limit the job is aborted with a message. */
int ps__wait(ps_shuffler_t *ps, MPI_Request *req, const char *what)
{
    uint64_t t0 = ps__now_ns(), limit = (uint64_t)(ps->timeout_s * 1e9);
    long nap = 1000;
    for (;;) {
        int flag = 0;
        if (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return ps__errf(PS_EMPI, "%s failed", what);
        if (flag)
            return 0;
        /* The ranks usually arrive within a few milliseconds of each other:
         * spin that long (a sleep would add its wake-up to every
         * collective), then back off so that a long wait costs no CPU. */
        if (ps__now_ns() - t0 < 5000000)
            continue;
        if (ps__now_ns() - t0 > limit) {
            ps__errf(PS_EPEER, "no answer from the other ranks within %g s (PSHUFFLE_TIMEOUT) in %s: a rank "
                     "died, or called another pshuffle function", ps->timeout_s, what);
            ps__fatal(ps, PS_EPEER, what);
        }
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        if (nap < 1000000)
            nap *= 2;
    }
}

/* First step of every collective call after ps_open(): all ranks learn
 * whether they are in the same call for the same epoch. Ranks in different
 * calls would otherwise match unrelated messages or wait forever. */
int ps__sync(ps_shuffler_t *ps, int op, uint64_t epoch)
{
    /* One reduction: the maxima of (op, ~op, epoch, ~epoch) give the
     * largest and smallest of each. */
    uint64_t v[4] = {(uint64_t)op, ~(uint64_t)op, epoch, ~epoch}, r[4];
    MPI_Request q;
    if (MPI_Iallreduce(v, r, 4, MPI_UINT64_T, MPI_MAX, ps->comm, &q) != MPI_SUCCESS)
        return ps__errf(PS_EMPI, "MPI_Iallreduce failed at the start of %s", op_names[op]);
    int err = ps__wait(ps, &q, op_names[op]);
    if (err)
        return err;
    if (r[0] != ~r[1]) {
        uint64_t a = ~r[1], b = r[0];
        if (a >= PS_OP_MAX_ || b >= PS_OP_MAX_)
            a = b = 0;
        return ps__errf(PS_ESTATE, "ranks called different functions: %s on some, %s on others", op_names[a],
                        op_names[b]);
    }
    if (r[2] != epoch || ~r[3] != epoch)
        return ps__errf(PS_EEPOCH, "ranks called %s for different epochs (%" PRIu64 " to %" PRIu64 ")",
                        op_names[op], ~r[3], r[2]);
    return 0;
}

/* Every collective step ends here: each rank brings its local result, all
 * learn whether any rank failed, and the failing rank's message is shared.
 * A "secondary" failure (a consequence of another rank's failure, such as a
 * corrupt payload from a sender that could not read its file) loses to a
 * primary one when choosing whose message to show. */
int ps__agree_max(ps_shuffler_t *ps, int err, int secondary, uint64_t *val)
{
    int M = ps->nranks;
    int64_t key = err ? (secondary ? M : 0) + ps->rank : 2 * M;
    char saved[480];
    snprintf(saved, sizeof saved, "%s", ps_errdetail());
    /* Minima of (key, -val): the first failing rank and the largest value. */
    int64_t v[2] = {key, val ? -(int64_t)*val : 0}, r[2];
    MPI_Request q;
    if (MPI_Iallreduce(v, r, 2, MPI_INT64_T, MPI_MIN, ps->comm, &q) != MPI_SUCCESS ||
        ps__wait(ps, &q, "agreeing on a result"))
        return ps__errf(PS_EMPI, "MPI_Allreduce failed while agreeing on a result");
    int min = (int)r[0];
    if (val)
        *val = (uint64_t)-r[1];
    if (min == 2 * M)
        return 0;
    int who = min % M;
    struct {
        int32_t err;
        char detail[480];
    } msg;
    memset(&msg, 0, sizeof msg);
    if (who == ps->rank) {
        msg.err = err;
        snprintf(msg.detail, sizeof msg.detail, "%s", saved);
    }
    if (MPI_Ibcast(&msg, (int)sizeof msg, MPI_BYTE, who, ps->comm, &q) != MPI_SUCCESS ||
        ps__wait(ps, &q, "sharing an error"))
        return ps__errf(PS_EMPI, "MPI_Bcast failed while sharing an error");
    ps__errset(saved);
    if (who == ps->rank)
        return err;
    if (err && !secondary)
        return err; /* this rank failed too, on its own account: keep its message */
    return ps__errf(PS_EPEER, "rank %d: %s%s%s", who, ps_strerror(msg.err), msg.detail[0] ? ": " : "",
                    msg.detail);
}

int ps__agree(ps_shuffler_t *ps, int err, int secondary) { return ps__agree_max(ps, err, secondary, NULL); }

PS_API int ps_agree_error(ps_shuffler_t *ps, uint64_t epoch, const char *msg)
{
    ps__errclear();
    int err = ps__sync(ps, PS_OP_AGREE, epoch);
    if (err)
        return err;
    int mine = msg && *msg ? ps__errf(PS_EINVAL, "rank %d: %s", ps->rank, msg) : 0;
    /* All failures count as secondary, so that every rank, a failing one
     * included, shows the lowest failing rank's message. */
    err = ps__agree(ps, mine, 1);
    if (!err)
        return 0;
    /* The same line on every rank: the peers' "rank R: ..." prefix (from
     * ps__agree()) is dropped in favour of the failing rank's own text. */
    const char *d = ps_errdetail();
    if (err == PS_EPEER && !strncmp(d, "rank ", 5)) {
        const char *p = strstr(d, ": ");
        p = p ? strstr(p + 2, ": ") : NULL; /* past "rank R: <strerror>" */
        if (p) {
            char line[480];
            snprintf(line, sizeof line, "%s", p + 2);
            ps__errset(line);
        }
    }
    return err;
}
