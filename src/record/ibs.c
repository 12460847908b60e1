/* AMD IBS op sampling. Since Linux 6.1 the ibs_op PMU fills ADDR, DATA_SRC
 * and WEIGHT itself (as `perf mem` on AMD uses), so samples travel the same
 * ring path and decoder as PEBS. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "os/os.h"

int hm__ibs_events(uint64_t period, hm__rec_events_t *ev)
{
    long long type;
    if (hm__os_read_int("/sys/bus/event_source/devices/ibs_op/type", &type) != 0)
        return hm__errf(HM_ENOPMU, "no ibs_op PMU (see 'hetmem doctor')");
    memset(ev, 0, sizeof *ev);
    struct perf_event_attr *a = (void *)ev->attr[0];
    a->size = sizeof *a;
    a->type = (uint32_t)type;
    uint64_t cfg[3] = {0, 0, 0};
    /* cnt_ctl=1 counts dispatched ops rather than cycles, so the period is
     * in ops, comparable to PEBS's per-event periods. */
    char spec[64];
    if (hm__os_read("/sys/bus/event_source/devices/ibs_op/format/cnt_ctl", spec, sizeof spec) > 0)
        hm__perf_format_apply(spec, 1, cfg);
    a->config = cfg[0];
    /* IbsOpMaxCnt holds period >> 4: the period must be a multiple of 16. */
    if (period < 0x10)
        period = 0x10;
    a->sample_period = period & ~0xfull;
    a->sample_type = hm__rec_sample_type();
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    /* ibs_op cannot exclude kernel samples on most kernels (EINVAL), which
     * is why IBS needs perf_event_paranoid <= 1. */
    ev->n = 1;
    ev->leader[0] = -1;
    ev->sampling[0] = 1;
    snprintf(ev->name[0], sizeof ev->name[0], "ibs_op/cnt_ctl=1/");
    snprintf(ev->event, sizeof ev->event, "%s", ev->name[0]);
    return 0;
}
