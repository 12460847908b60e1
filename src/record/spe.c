/* Arm SPE. The event is encoded from the arm_spe PMU's sysfs format files
 * (load/store filters, timestamps, min latency). SPE writes its packets to
 * the ring's AUX area, not as PERF_RECORD_SAMPLE: the rings of this process
 * are therefore mapped with an AUX area (hm__perf_ring_set_aux), and
 * hm__perf_ring_read() runs the packet decoder (spe_decode.c) on it. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "os/os.h"

/* 16 pages (64 KiB with 4 KiB pages) per thread: at the default period of
 * 4000 operations a record of ~64 bytes each, the collector tick drains it
 * long before it fills. */
#define HM_SPE_AUX_PAGES 16u

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
    /* The data-source packet is IMPLEMENTATION DEFINED; its encoding is
     * known for Arm Ltd (implementer 0x41) Neoverse cores only:
     * N1 0xd0c, V1 0xd40, N2 0xd49, V2 0xd4f. */
    static const char *const neoverse[] = {"part 0xd0c", "part 0xd40", "part 0xd49", "part 0xd4f"};
    int nv = 0;
    if (strstr(info->vendor, "0x41"))
        for (size_t i = 0; i < sizeof neoverse / sizeof neoverse[0]; i++)
            nv |= !strcmp(info->model, neoverse[i]);
    hm__perf_ring_set_aux(HM_SPE_AUX_PAGES, nv);
    rc = 0;
out:
    free(info);
    return rc;
}
