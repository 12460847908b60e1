/* libFuzzer target for the trace reader: the input bytes are a trace file.
 * Opens it, walks the index, iterates every record, batch-reads every block
 * and seeks at random; any crash, leak, hang or sanitizer report is a bug.
 * Libraries read paths, so the bytes go through a memfd. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hetmem/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
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
        hm_trace_stats_t st;
        hm_trace_stats(t, &st);
        const hm_trace_meta_t *m = hm_trace_meta(t);
        volatile size_t sink = 0;
        for (const char *const *a = m->argv; a && *a; a++)
            sink += (size_t)(*a)[0];
        uint32_t nb = hm_trace_nblocks(t);
        hm_block_info_t bi;
        for (uint32_t i = 0; i < nb; i++)
            hm_trace_block_info(t, i, &bi);
        hm_record_t r;
        while (hm_trace_next(t, &r) == 1) {
            if (r.kind == HM_REC_SITE)
                sink += (size_t)r.u.site.frames[0];
            else if (r.kind == HM_REC_NAME)
                sink += (size_t)r.u.name.name[0];
            else if (r.kind == HM_REC_PHASE_BEGIN || r.kind == HM_REC_PHASE_END)
                sink += (size_t)r.u.phase.name[0];
        }
        for (uint32_t i = 0; i < nb; i++) {
            const hm_block_t *b;
            if (hm_trace_read_block(t, i, &b) == 0 && b->n)
                sink += (size_t)(b->time[b->n - 1] + b->addr[0] + b->ip[0] + b->tid[0] + b->weight[0] +
                                 b->dsrc[0] + b->access[0]);
        }
        if (nb) {
            hm_trace_seek_block(t, (uint32_t)(size % nb));
            hm_trace_next(t, &r);
        }
        (void)sink;
        hm_trace_close(t);
    }
    close(fd);
    return 0;
}
