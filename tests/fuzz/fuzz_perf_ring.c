/* libFuzzer target for the perf ring-buffer decoder. Input layout:
 *   u8  log2 of the ring size (taken mod 13: 1 B .. 4 KiB)
 *   u64 sample_type, u64 tail, u64 head   (little-endian, from the input)
 *   rest: ring data (zero-padded or cut to the ring size)
 * The decoder is run with the raw tail/head and once more with head/tail
 * forced into range so that record parsing is reached; the returned tail
 * must never pass head. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hetmem/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void on_sample(void *ctx, const hm_perf_sample_t *s)
{
    volatile uint64_t *sink = ctx;
    *sink += s->ip + s->addr + s->time + s->data_src + s->weight + s->tid;
    if (s->raw_size)
        *sink += s->raw[0] + s->raw[s->raw_size - 1];
}

static uint8_t scratch[65536];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 25)
        return 0;
    uint64_t ring = 1ull << (data[0] % 13);
    uint64_t type = rd64(data + 1), tail = rd64(data + 9), head = rd64(data + 17);
    data += 25;
    size -= 25;
    uint8_t *buf = calloc(1, ring);
    if (!buf)
        return 0;
    memcpy(buf, data, size < ring ? size : ring);
    volatile uint64_t sink = 0;
    hm_perf_ring_stats_t st = {0};
    uint64_t nt;
    int rc = hm_perf_ring_decode(buf, ring, tail, head, type, scratch, sizeof scratch, on_sample, (void *)&sink,
                                 &st, &nt);
    if (rc == 0 && nt > head)
        abort();
    /* Same bytes with valid counters (wrapping at an input-chosen offset)
     * and a sample_type the decoder accepts: reaches the record parser. */
    for (int b = 0; b < 64; b++)
        if ((type >> b & 1) && !hm_perf_sample_type_ok(1ull << b))
            type &= ~(1ull << b);
    if (!hm_perf_sample_type_ok(type))
        type &= ~(uint64_t)(1u << 14); /* PERF_SAMPLE_WEIGHT vs WEIGHT_STRUCT */
    if (hm_perf_sample_type_ok(type)) {
        uint64_t len = size < ring ? size : ring;
        tail = tail % ring + (head & 0xffffffff00000000ull);
        head = tail + len;
        rc = hm_perf_ring_decode(buf, ring, tail, head, type, scratch, sizeof scratch, on_sample, (void *)&sink,
                                 &st, &nt);
        if (nt > head || nt < tail)
            abort();
    }
    free(buf);
    return 0;
}
