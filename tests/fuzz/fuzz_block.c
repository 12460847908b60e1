/* libFuzzer target for the block decoder alone: the input is a raw block
 * payload (as after zstd) behind a small header, so mutations reach the
 * decoder's own checks without passing zstd or checksums first.
 * Input: u16 samples, u16 events, u64 first time, u64 time span, payload.
 * The payload is copied into a buffer of exactly its size plus the
 * documented padding, so ASan sees any read beyond what the decoder may
 * touch. A decoded block is checked against the header's promises, and
 * the chunked sample scan runs on the same payload: it must not crash, and
 * where the decoder accepts the block, it must read the same samples. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { HDR = 20 };
    if (size < HDR)
        return 0;
    uint16_t ns, nev;
    uint64_t first, span;
    memcpy(&ns, data, 2);
    memcpy(&nev, data + 2, 2);
    memcpy(&first, data + 4, 8);
    memcpy(&span, data + 12, 8);
    uint64_t last = first + span < first ? UINT64_MAX : first + span;
    size_t len = size - HDR;
    uint8_t *raw = malloc(len + HM__RAW_PAD);
    if (!raw)
        return 0;
    memcpy(raw, data + HDR, len);
    memset(raw + len, 0, HM__RAW_PAD);
    hm__cols_t c;
    memset(&c, 0, sizeof c);
    if (hm__block_decode(&c, raw, len, ns, nev, first, last) == 0) {
        for (uint32_t i = 0; i < ns; i++)
            if (c.time[i] < first || c.time[i] > last || (i && c.time[i] < c.time[i - 1]))
                abort();
        if (c.nev > nev)
            abort();
        for (uint32_t i = 0; i < c.nev; i++)
            if (c.evtime[i] < first || c.evtime[i] > last)
                abort();
    }
    int drc = hm__block_decode(&c, raw, len, ns, nev, first, last);
    static hm__scan_t s;
    static hm__scan_chunk_t ch;
    hm__cols_t e;
    memset(&e, 0, sizeof e);
    if (hm__block_scan_begin(&s, &e, raw, len, ns, nev, first, last) == 0) {
        uint32_t at = 0;
        int got;
        while ((got = hm__block_scan_chunk(&s, &ch)) > 0)
            for (int i = 0; i < got; i++, at++)
                if (drc == 0 && (ch.time[i] != c.time[at] || ch.addr[i] != c.addr[at] ||
                                 ch.weight[i] != c.weight[at] || ch.dsrc[i] != c.dsrc[at] ||
                                 ch.access[i] != c.access[at]))
                    abort();
        if (drc == 0 && (got != 0 || at != ns || e.nev != c.nev))
            abort();
    } else if (drc == 0) {
        abort(); /* the scan checks no more than the decoder */
    }
    hm__cols_free(&e);
    hm__cols_free(&c);
    free(raw);
    return 0;
}
