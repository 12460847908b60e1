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
 * span it cannot exceed its share.
 *
 * Below saturation, a loaded device's latency still rises (DRAM bank and
 * controller queues, which the token queue does not see: it only delays a
 * request when the thread's share is used up). A device with a
 * loaded-latency curve gets its read latency from it, at the utilisation
 * of its share over the previous window of HM_SIM_UTIL_WINDOW_NS, and a
 * request completes at the later of that and the token queue's time: the
 * two are one queue seen two ways, so they are not added. */
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

/* Counts @p busy ns of channel time at time @p t and returns the
 * utilisation of the previous window. */
static double util_at(hm__device_t *d, double t, double busy)
{
    if (t >= d->uw0 + HM_SIM_UTIL_WINDOW_NS) {
        /* the window closes at the first request past its end */
        d->uprev = t < d->uw0 + 2 * HM_SIM_UTIL_WINDOW_NS ? d->ucur / (t - d->uw0) : 0;
        d->uw0 = t;
        d->ucur = 0;
    }
    d->ucur += busy;
    return d->uprev;
}

/* Read latency at utilisation @p u: linear between the curve's points,
 * from the idle latency at 0, flat beyond the last point. */
static double loaded_latency(const hm__device_t *d, double u)
{
    double u0 = 0, l0 = d->read_lat_ns;
    for (int i = 0; i < d->nll; i++) {
        if (u < d->ll_u[i])
            return l0 + (d->ll_ns[i] - l0) * (u - u0) / (d->ll_u[i] - u0);
        u0 = d->ll_u[i];
        l0 = d->ll_ns[i];
    }
    return l0;
}

double hm__device_read(hm__device_t *d, uint64_t line, double t)
{
    uint32_t ch = channel_of(d, line);
    double v = d->next_free[ch] > t - d->burst_ns ? d->next_free[ch] : t - d->burst_ns;
    double start = v > t ? v : t;
    d->next_free[ch] = v + d->xfer_r_ns * d->nch;
    d->busy_ns += d->xfer_r_ns;
    d->lines_read++;
    double done = start + d->read_lat_ns;
    if (d->nll) {
        double l = t + loaded_latency(d, util_at(d, t, d->xfer_r_ns));
        done = l > done ? l : done;
    }
    return done;
}

void hm__device_write(hm__device_t *d, uint64_t line, double t)
{
    uint32_t ch = channel_of(d, line);
    double v = d->next_free[ch] > t - d->burst_ns ? d->next_free[ch] : t - d->burst_ns;
    d->next_free[ch] = v + d->xfer_w_ns * d->nch;
    d->busy_ns += d->xfer_w_ns;
    d->lines_written++;
    if (d->nll)
        util_at(d, t, d->xfer_w_ns);
}
