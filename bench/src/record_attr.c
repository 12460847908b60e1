/* Attribution of a recorded trace: of all samples, how many carry a data
 * address, and how many of those fall inside a live tracked allocation.
 * Prints "samples N addr N in_objects N", then with --names one line
 * "obj NAME SAMPLES" per name given with hetmem_name(), in order of first
 * naming. With --phase NAME, only samples taken between a begin and an end
 * of phase NAME count (a first pass collects those windows, by time, so
 * the order records come in does not matter). Used by bench/record-overhead
 * and bench/record-attribution. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/objtab.h"
#include "hetmem/error.h"
#include "hetmem/trace.h"

typedef struct {
    char name[64];
    uint64_t samples;
} named_t;

typedef struct {
    uint64_t lo, hi;
} window_t;

/* Time windows of phase `phase` in the trace at `path`: *out (malloc'd,
 * caller frees), *n of them. Returns 0, or -1 on a trace error. */
static int phase_windows(const char *path, const char *phase, window_t **out, size_t *n)
{
    hm_trace_t *t;
    if (hm_trace_open(&t, path) != 0)
        return -1;
    size_t cap = 16, k = 0;
    window_t *w = malloc(cap * sizeof *w);
    uint64_t open_at = 0;
    int depth = 0, rc;
    hm_record_t r;
    while (w && (rc = hm_trace_next(t, &r)) == 1) {
        if ((r.kind != HM_REC_PHASE_BEGIN && r.kind != HM_REC_PHASE_END) || strcmp(r.u.phase.name, phase) != 0)
            continue;
        if (r.kind == HM_REC_PHASE_BEGIN && depth++ == 0)
            open_at = r.u.phase.time;
        if (r.kind == HM_REC_PHASE_END && depth > 0 && --depth == 0) {
            if (k == cap) {
                window_t *g = realloc(w, (cap *= 2) * sizeof *w);
                if (!g) {
                    free(w);
                    w = NULL;
                    break;
                }
                w = g;
            }
            w[k++] = (window_t){open_at, r.u.phase.time};
        }
    }
    hm_trace_close(t);
    if (!w || rc < 0) {
        free(w);
        return -1;
    }
    *out = w;
    *n = k;
    return 0;
}

int main(int argc, char **argv)
{
    int names = argc >= 3 && strcmp(argv[1], "--names") == 0;
    const char *phase = names && argc == 5 && strcmp(argv[2], "--phase") == 0 ? argv[3] : NULL;
    if (argc != 2 && !(names && argc == 3) && !phase) {
        fprintf(stderr, "usage: bench_record_attr [--names [--phase NAME]] TRACE\n");
        return 2;
    }
    const char *path = argv[argc - 1];
    window_t *win = NULL;
    size_t nwin = 0;
    if (phase && phase_windows(path, phase, &win, &nwin) != 0) {
        fprintf(stderr, "bench_record_attr: %s: %s\n", path, hm_errdetail());
        return 1;
    }
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    if (rc) {
        fprintf(stderr, "bench_record_attr: %s: %s %s\n", path, hm_strerror(rc), hm_errdetail());
        return 1;
    }
    /* Live allocations -> index into owner[] (the name each one carries,
     * -1 for none), one slot per allocation. */
    hm_objtab_t *live;
    size_t nalloc = 0, cap = 1024, nnamed = 0;
    int *owner = malloc(cap * sizeof *owner);
    named_t *nm = calloc(256, sizeof *nm);
    if (hm__objtab_open(&live) != 0 || !owner || !nm) {
        fprintf(stderr, "bench_record_attr: out of memory\n");
        return 1;
    }
    uint64_t total = 0, withaddr = 0, inobj = 0;
    hm_record_t r;
    while ((rc = hm_trace_next(t, &r)) == 1) {
        if (r.kind == HM_REC_ALLOC) {
            if (nalloc == cap && !(owner = realloc(owner, (cap *= 2) * sizeof *owner))) {
                fprintf(stderr, "bench_record_attr: out of memory\n");
                return 1;
            }
            owner[nalloc] = -1;
            if (hm__objtab_insert(live, r.u.alloc.addr, r.u.alloc.size, nalloc++) != 0) {
                fprintf(stderr, "bench_record_attr: out of memory\n");
                return 1;
            }
        } else if (r.kind == HM_REC_FREE) {
            hm__objtab_remove(live, r.u.alloc.addr, NULL);
        } else if (r.kind == HM_REC_NAME) {
            const hm_objtab_entry_t *e = hm__objtab_find(live, r.u.name.addr);
            if (!e)
                continue;
            size_t k;
            for (k = 0; k < nnamed && strcmp(nm[k].name, r.u.name.name) != 0; k++)
                ;
            if (k == nnamed && nnamed < 256)
                snprintf(nm[nnamed++].name, sizeof nm[k].name, "%s", r.u.name.name);
            if (k < nnamed)
                owner[e->id] = (int)k;
        } else if (r.kind == HM_REC_SAMPLE) {
            if (phase) {
                size_t w = 0;
                while (w < nwin && !(r.u.sample.time >= win[w].lo && r.u.sample.time <= win[w].hi))
                    w++;
                if (w == nwin)
                    continue;
            }
            total++;
            uint64_t a = r.u.sample.addr;
            if (!a)
                continue;
            withaddr++;
            const hm_objtab_entry_t *e = hm__objtab_find(live, a);
            if (e) {
                inobj++;
                if (owner[e->id] >= 0)
                    nm[owner[e->id]].samples++;
            }
        }
    }
    hm_trace_close(t);
    hm__objtab_close(live);
    free(owner);
    free(win);
    if (rc < 0) {
        free(nm);
        return 1;
    }
    printf("samples %" PRIu64 " addr %" PRIu64 " in_objects %" PRIu64 "\n", total, withaddr, inobj);
    for (size_t k = 0; names && k < nnamed; k++)
        printf("obj %s %" PRIu64 "\n", nm[k].name, nm[k].samples);
    free(nm);
    return 0;
}
