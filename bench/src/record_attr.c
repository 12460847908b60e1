/* Attribution of a recorded trace: of all samples, how many carry a data
 * address, and how many of those fall inside a live tracked allocation.
 * Prints "samples N addr N in_objects N". Used by bench/record-overhead. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "hetmem/error.h"
#include "hetmem/trace.h"

typedef struct {
    uint64_t addr, size;
} live_t;

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
    size_t n = 0, cap = 64;
    live_t *l = malloc(cap * sizeof *l);
    uint64_t total = 0, withaddr = 0, inobj = 0;
    hm_record_t r;
    while ((rc = hm_trace_next(t, &r)) == 1) {
        if (r.kind == HM_REC_ALLOC) {
            if (n == cap)
                l = realloc(l, (cap *= 2) * sizeof *l);
            l[n++] = (live_t){r.u.alloc.addr, r.u.alloc.size};
        } else if (r.kind == HM_REC_FREE) {
            for (size_t i = 0; i < n; i++)
                if (l[i].addr == r.u.alloc.addr) {
                    l[i] = l[--n];
                    break;
                }
        } else if (r.kind == HM_REC_SAMPLE) {
            total++;
            uint64_t a = r.u.sample.addr;
            if (!a)
                continue;
            withaddr++;
            for (size_t i = 0; i < n; i++)
                if (a >= l[i].addr && a < l[i].addr + l[i].size) {
                    inobj++;
                    break;
                }
        }
    }
    hm_trace_close(t);
    free(l);
    if (rc < 0)
        return 1;
    printf("samples %" PRIu64 " addr %" PRIu64 " in_objects %" PRIu64 "\n", total, withaddr, inobj);
    return 0;
}
