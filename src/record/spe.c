/* Arm SPE. The event is encoded from the arm_spe PMU's sysfs format files
 * (load/store filters, timestamps, min latency). SPE writes its packets to
 * the ring's AUX area, not as PERF_RECORD_SAMPLE; the AUX packet decoder is
 * not built, so opening for recording stops with HM_ENOTIMPL after the
 * event is encoded (doctor still probes it). */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "os/os.h"

int hm__spe_events(uint64_t period, hm__rec_events_t *ev)
{
    hm_os_info_t *info = hm__xmalloc(sizeof *info);
    hm__os_probe(info);
    int rc;
    if (info->spe_type < 0) {
        rc = hm__errf(HM_ENOPMU, "no arm_spe PMU (see 'hetmem doctor')");
        goto out;
    }
    memset(ev, 0, sizeof *ev);
    struct perf_event_attr *a = (void *)ev->attr[0];
    a->size = sizeof *a;
    a->type = (uint32_t)info->spe_type;
    uint64_t cfg[3] = {0, 0, 0};
    char terms[128];
    snprintf(terms, sizeof terms, "ts_enable=1,load_filter=1,store_filter=1,jitter=1,min_latency=%u", 30u);
    if ((rc = hm__perf_sysfs_encode(info->spe_name, terms, cfg)))
        goto out;
    a->config = cfg[0];
    a->config1 = cfg[1];
    a->config2 = cfg[2];
    a->sample_period = period;
    a->exclude_kernel = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    ev->n = 1;
    ev->leader[0] = -1;
    ev->sampling[0] = 1;
    snprintf(ev->name[0], sizeof ev->name[0], "%s/ts_enable=1,load_filter=1,store_filter=1/", info->spe_name);
    snprintf(ev->event, sizeof ev->event, "%s", ev->name[0]);
    rc = hm__errf(HM_ENOTIMPL, "%s is present, but decoding SPE AUX-area packets is not built", info->spe_name);
out:
    free(info);
    return rc;
}
