/* Test helper: reads a trace and prints, per allocation of at least 1 MiB,
 * "obj SITE SIZE NAME SAMPLES IN-PHASE-SAMPLES FIRST-FRAME", then "samples TOTAL WITHADDR",
 * "end STATUS TIME", "phases N", "allocs N frees N" and "unmatched N reused N": frees
 * of no live allocation, and allocations overlapping a live one (a free
 * missing from the trace). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/objtab.h"
#include "hetmem/error.h"
#include "hetmem/trace.h"

typedef struct {
    uint64_t addr, size, site, n, inphase;
    char name[32];
} obj_t;

int main(int argc, char **argv)
{
    hm_trace_t *t;
    if (argc < 2 || hm_trace_open(&t, argv[1]) != 0) {
        fprintf(stderr, "cannot open %s: %s\n", argc > 1 ? argv[1] : "?", hm_errdetail());
        return 1;
    }
    /* Allocations of >= 1 MiB in order of appearance; the live ones are in
     * the interval table by address, with their index here as id. */
    obj_t o[256];
    int no = 0;
    hm_objtab_t *live;
    hm_objtab_t *all; /* every live allocation, whatever its size */
    uint64_t unmatched = 0, reused = 0;
    if (hm__objtab_open(&live) != 0 || hm__objtab_open(&all) != 0)
        return 1;
    int depth = 0;
    uint64_t total = 0, withaddr = 0, phases = 0, allocs = 0, frees = 0;
    char *frames[256] = {0};
    uint64_t fsite[256];
    int nf = 0;
    hm_record_t r;
    int rc;
    while ((rc = hm_trace_next(t, &r)) == 1) {
        switch (r.kind) {
        case HM_REC_ALLOC:
            allocs++;
            if (hm__objtab_overlap(all, r.u.alloc.addr, r.u.alloc.size))
                reused++; /* the insert below replaces it */
            hm__objtab_insert(all, r.u.alloc.addr, r.u.alloc.size ? r.u.alloc.size : 1, 0);
            if (r.u.alloc.size >= (1u << 20) && no < 256) {
                hm__objtab_insert(live, r.u.alloc.addr, r.u.alloc.size, (uint64_t)no);
                o[no++] = (obj_t){r.u.alloc.addr, r.u.alloc.size, r.u.alloc.site, 0, 0, "-"};
            }
            break;
        case HM_REC_FREE:
            frees++;
            if (hm__objtab_remove(all, r.u.alloc.addr, NULL) != 0)
                unmatched++;
            hm__objtab_remove(live, r.u.alloc.addr, NULL);
            break;
        case HM_REC_NAME: {
            const hm_objtab_entry_t *e = hm__objtab_find(live, r.u.name.addr);
            if (e)
                snprintf(o[e->id].name, sizeof o[e->id].name, "%s", r.u.name.name);
            break;
        }
        case HM_REC_SITE:
            if (nf < 256) {
                fsite[nf] = r.u.site.site;
                frames[nf++] = strdup(r.u.site.frames);
            }
            break;
        case HM_REC_PHASE_BEGIN: phases++; depth++; break;
        case HM_REC_PHASE_END: if (depth) depth--; break;
        case HM_REC_SAMPLE:
            total++;
            if (r.u.sample.addr) {
                withaddr++;
                const hm_objtab_entry_t *e = hm__objtab_find(live, r.u.sample.addr);
                if (e) {
                    o[e->id].n++;
                    o[e->id].inphase += depth > 0;
                }
            }
            break;
        default: break;
        }
    }
    if (rc < 0) {
        fprintf(stderr, "read error: %s\n", hm_errdetail());
        hm_trace_close(t);
        hm__objtab_close(live);
        hm__objtab_close(all);
        return 1;
    }
    for (int i = 0; i < no; i++) {
        const char *f = "?";
        for (int k = 0; k < nf; k++)
            if (fsite[k] == o[i].site)
                f = frames[k];
        char first[256];
        snprintf(first, sizeof first, "%s", f);
        char *nl = strchr(first, '\n');
        if (nl)
            *nl = '\0';
        for (char *c = first; *c; c++)
            if (*c == ' ')
                *c = '_';
        printf("obj 0x%016" PRIx64 " %" PRIu64 " %s %" PRIu64 " %" PRIu64 " %s\n", o[i].site, o[i].size, o[i].name,
               o[i].n, o[i].inphase, first);
    }
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    printf("samples %" PRIu64 " %" PRIu64 "\n", total, withaddr);
    printf("end %d %d %.3f\n", st.has_end, st.end.exit_status, (double)st.end.total_time / 1e9);
    printf("phases %" PRIu64 "\nallocs %" PRIu64 " frees %" PRIu64 "\n", phases, allocs, frees);
    printf("unmatched %" PRIu64 " reused %" PRIu64 "\n", unmatched, reused);
    hm_trace_close(t);
    hm__objtab_close(live);
    hm__objtab_close(all);
    for (int k = 0; k < nf; k++)
        free(frames[k]);
    return 0;
}
