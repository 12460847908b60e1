/* Attribution of a recorded trace: of all samples, how many carry a data
 * address, and how many of those fall inside a live tracked allocation.
 * Prints "samples N addr N in_objects N". Used by bench/record-overhead. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/objtab.h"
#include "hetmem/error.h"
#include "hetmem/trace.h"

int main(int argc, char **argv)
{
    hm_trace_t *t;
    if (argc != 2) {
        fprintf(stderr, "usage: bench_record_attr TRACE\n");
        return 2;
    }
    int rc = hm_trace_open(&t, argv[1]);
    if (rc) {
        fprintf(stderr, "bench_record_attr: %s: %s %s\n", argv[1], hm_strerror(rc), hm_errdetail());
        return 1;
    }
    hm_objtab_t *live;
    if (hm__objtab_open(&live) != 0) {
        fprintf(stderr, "bench_record_attr: out of memory\n");
        return 1;
    }
    uint64_t total = 0, withaddr = 0, inobj = 0;
    hm_record_t r;
    while ((rc = hm_trace_next(t, &r)) == 1) {
        if (r.kind == HM_REC_ALLOC) {
            if (hm__objtab_insert(live, r.u.alloc.addr, r.u.alloc.size, 0) != 0) {
                fprintf(stderr, "bench_record_attr: out of memory\n");
                return 1;
            }
        } else if (r.kind == HM_REC_FREE) {
            hm__objtab_remove(live, r.u.alloc.addr, NULL);
        } else if (r.kind == HM_REC_SAMPLE) {
            total++;
            uint64_t a = r.u.sample.addr;
            if (!a)
                continue;
            withaddr++;
            inobj += hm__objtab_find(live, a) != NULL;
        }
    }
    hm_trace_close(t);
    hm__objtab_close(live);
    if (rc < 0)
        return 1;
    printf("samples %" PRIu64 " addr %" PRIu64 " in_objects %" PRIu64 "\n", total, withaddr, inobj);
    return 0;
}
