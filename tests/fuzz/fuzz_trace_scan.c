/* libFuzzer target for the trace scan path the estimator's summary takes
 * (hm_trace_batch_begin/next, as src/estimate/summary.c drives it): the input bytes
 * are a trace file. Every block is scanned, its events taken and its
 * samples decoded batch by batch; then the same block is decoded in full by
 * hm_trace_read_block(), and the two must agree on every column the scan
 * decodes (time, address, weight, data source, access) and on the events'
 * kinds: a disagreement aborts. Libraries read paths, so the bytes go through a
 * memfd. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hetmem/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scan's view of one block, copied before the full decode replaces it. */
typedef struct {
    uint32_t n, cap, nev;
    uint64_t *time, *addr;
    uint32_t *weight;
    uint16_t *dsrc;
    uint8_t *access;
    uint64_t *evtime;
    uint16_t *evkind;
} seen_t;

static int grow(seen_t *s, uint32_t need)
{
    if (need <= s->cap)
        return 0;
    uint32_t cap = s->cap ? s->cap : HM_TRACE_BATCH;
    while (cap < need)
        cap *= 2;
    uint64_t *t = realloc(s->time, cap * sizeof *t), *a = t ? realloc(s->addr, cap * sizeof *a) : NULL;
    if (t)
        s->time = t;
    if (a)
        s->addr = a;
    uint32_t *w = a ? realloc(s->weight, cap * sizeof *w) : NULL;
    if (w)
        s->weight = w;
    uint16_t *d = w ? realloc(s->dsrc, cap * sizeof *d) : NULL;
    if (d)
        s->dsrc = d;
    uint8_t *x = d ? realloc(s->access, cap) : NULL;
    if (x)
        s->access = x;
    if (!x)
        return -1;
    s->cap = cap;
    return 0;
}

static void scan_and_compare(hm_trace_t *t, uint32_t b, seen_t *s)
{
    hm_event_list_t el;
    hm_sample_batch_t bt, *ch = &bt;
    s->n = 0;
    if (hm_trace_batch_begin(t, b, &el) != 0)
        return;
    const hm_record_t *evs = el.rec;
    const uint64_t *evt = el.time;
    uint32_t nev = el.n;
    free(s->evtime);
    free(s->evkind);
    s->evtime = malloc((nev ? nev : 1) * sizeof *s->evtime);
    s->evkind = malloc((nev ? nev : 1) * sizeof *s->evkind);
    if (!s->evtime || !s->evkind)
        return;
    s->nev = nev;
    for (uint32_t i = 0; i < nev; i++) {
        s->evtime[i] = evt[i];
        s->evkind[i] = (uint16_t)evs[i].kind;
    }
    int got, ok = 1;
    while ((got = hm_trace_batch_next(t, ch)) > 0) {
        if ((uint32_t)got > HM_TRACE_BATCH || grow(s, s->n + (uint32_t)got))
            abort();
        memcpy(s->time + s->n, ch->time, (size_t)got * sizeof *ch->time);
        memcpy(s->addr + s->n, ch->addr, (size_t)got * sizeof *ch->addr);
        memcpy(s->weight + s->n, ch->weight, (size_t)got * sizeof *ch->weight);
        memcpy(s->dsrc + s->n, ch->dsrc, (size_t)got * sizeof *ch->dsrc);
        memcpy(s->access + s->n, ch->access, (size_t)got);
        s->n += (uint32_t)got;
    }
    if (got < 0)
        ok = 0; /* a damaged block: the scan refused it part-way */
    const hm_block_t *blk;
    if (hm_trace_read_block(t, b, &blk) != 0) {
        /* The full decode checks more (ips, thread ids): it may refuse a
         * block the scan accepted, never the other way round. */
        return;
    }
    if (!ok)
        abort(); /* the scan refused a block the full decode reads */
    if (blk->n != s->n || blk->nevents != s->nev)
        abort();
    for (uint32_t i = 0; i < s->n; i++)
        if (blk->time[i] != s->time[i] || blk->addr[i] != s->addr[i] || blk->weight[i] != s->weight[i] ||
            blk->dsrc[i] != s->dsrc[i] || blk->access[i] != s->access[i])
            abort();
    for (uint32_t i = 0; i < s->nev; i++)
        if ((uint16_t)blk->events[i].kind != s->evkind[i])
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-trace-scan", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return 0;
        }
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    hm_trace_t *t;
    if (hm_trace_open(&t, path) == 0) {
        seen_t s = {0};
        uint32_t nb = hm_trace_nblocks(t);
        for (uint32_t b = 0; b < nb; b++)
            scan_and_compare(t, b, &s);
        /* Scanning again after a full decode, out of order. */
        if (nb)
            scan_and_compare(t, (uint32_t)(size % nb), &s);
        free(s.time), free(s.addr), free(s.weight), free(s.dsrc), free(s.access), free(s.evtime), free(s.evkind);
        hm_trace_close(t);
    }
    close(fd);
    return 0;
}
