/* Memory devices: fixed latency plus a per-channel token queue.
 *
 * The simulated thread is one of `cores` identical SPMD threads, so it owns
 * 1/cores of each device's bandwidth. A line occupies its channel for
 * line/bandwidth_share ns; a request that finds the channel busy waits. So a
 * device whose demand exceeds its share queues up and its effective latency
 * grows, while traffic split across two devices uses both queues. Writes
 * (write-backs) are posted: they occupy the channel at the write bandwidth,
 * delaying later requests, but never stall the core themselves.
 *
 * The share is enforced over a window of burst_ns, not per request: the
 * other SPMD threads run the same code at other points of their data, so a
 * thread that left a device idle for a while (it was streaming from another
 * device) may use the time it left over, up to one window. Over any longer
 * span it cannot exceed its share. */
#include "sim_int.h"

static inline uint32_t channel_of(const hm__device_t *d, uint64_t line)
{
    if (d->nch == 1)
        return 0;
    /* Channels interleave at line granularity, hashed so that power-of-two
     * strides do not pile onto one channel. */
    uint64_t h = (line ^ (line >> 7) ^ (line >> 17)) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(((h >> 32) * d->nch) >> 32);
}

double hm__device_read(hm__device_t *d, uint64_t line, double t)
{
    uint32_t ch = channel_of(d, line);
    double v = d->next_free[ch] > t - d->burst_ns ? d->next_free[ch] : t - d->burst_ns;
    double start = v > t ? v : t;
    d->next_free[ch] = v + d->xfer_r_ns * d->nch;
    d->busy_ns += d->xfer_r_ns;
    d->lines_read++;
    return start + d->read_lat_ns;
}

void hm__device_write(hm__device_t *d, uint64_t line, double t)
{
    uint32_t ch = channel_of(d, line);
    double v = d->next_free[ch] > t - d->burst_ns ? d->next_free[ch] : t - d->burst_ns;
    d->next_free[ch] = v + d->xfer_w_ns * d->nch;
    d->busy_ns += d->xfer_w_ns;
    d->lines_written++;
}
