/* Intel PEBS: load-latency loads and precise stores. Encoding goes through
 * libpfm4, which knows each microarchitecture's event names; the kernel's
 * own sysfs description (events/mem-loads) is the fallback. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <dlfcn.h>
#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "os/os.h"

_Static_assert(sizeof(struct perf_event_attr) <= 160, "hm__rec_events_t.attr too small");

static void base_attr(struct perf_event_attr *a, uint64_t period)
{
    a->size = sizeof *a;
    a->sample_period = period;
    a->sample_type = hm__rec_sample_type();
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC; /* same clock as the allocation events */
}

/* libpfm4 is opened on first use rather than linked: its event tables
 * carry some 40,000 relocations, and the page faults of applying them cost
 * several milliseconds at the start of every process that maps the library,
 * which would be every program `hetmem record` runs (the preload links this
 * file) and the CLI itself. Only PEBS encoding needs it. Called from one
 * thread (option parsing, or the preload's constructor). */
static struct {
    int state; /* -1 not tried, 0 unusable, 1 ready */
    __typeof__(&pfm_initialize) initialize;
    __typeof__(&pfm_get_os_event_encoding) encode;
} pfm = {-1, NULL, NULL};

static int pfm_load(void)
{
    if (pfm.state >= 0)
        return pfm.state;
    pfm.state = 0;
    static const char *const names[] = {"libpfm.so.4", "libpfm.so"};
    void *h = NULL;
    for (size_t i = 0; i < HM_ARRAY_LEN(names) && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    pfm.initialize = (__typeof__(pfm.initialize))dlsym(h, "pfm_initialize");
    pfm.encode = (__typeof__(pfm.encode))dlsym(h, "pfm_get_os_event_encoding");
    /* The handle stays open: libpfm keeps its tables for later lookups. */
    if (pfm.initialize && pfm.encode && pfm.initialize() == PFM_SUCCESS)
        pfm.state = 1;
    return pfm.state;
}

static int pfm_encode(const char *name, struct perf_event_attr *a)
{
    if (!pfm_load())
        return -1;
    pfm_perf_encode_arg_t arg;
    memset(&arg, 0, sizeof arg);
    arg.attr = a;
    arg.size = sizeof arg;
    char *fstr = NULL;
    arg.fstr = &fstr;
    int r = pfm.encode(name, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
    free(fstr);
    return r == PFM_SUCCESS ? 0 : -1;
}

static int sysfs_event(const char *pmu, const char *ev, unsigned ldlat, struct perf_event_attr *a)
{
    char rel[256], terms[256];
    snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/events/%s", pmu, ev);
    if (hm__os_read(rel, terms, sizeof terms) <= 0)
        return hm__errf(HM_ENOPMU, "no event %s/%s", pmu, ev);
    /* mem-loads says "ldlat=3" as a placeholder; we set our threshold. */
    char *l = strstr(terms, "ldlat=");
    if (l)
        snprintf(l, sizeof terms - (size_t)(l - terms), "ldlat=%u", ldlat);
    uint64_t cfg[3] = {0, 0, 0};
    int r = hm__perf_sysfs_encode(pmu, terms, cfg);
    if (r)
        return r;
    long long type;
    snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/type", pmu);
    if (hm__os_read_int(rel, &type) != 0)
        return hm__errf(HM_ENOPMU, "PMU %s has no type", pmu);
    a->type = (uint32_t)type;
    a->config = cfg[0];
    a->config1 = cfg[1];
    a->config2 = cfg[2];
    return 0;
}

int hm__pebs_events(uint64_t period, unsigned ldlat, hm__rec_events_t *ev)
{
    hm_os_info_t *info = hm__xmalloc(sizeof *info);
    hm__os_probe(info);
    int rc = 0;
    if (!info->has_mem_loads) {
        rc = hm__errf(HM_ENOPMU, "no Intel core PMU with mem-loads (see 'hetmem doctor')");
        goto out;
    }
    const char *pmu = info->core_pmu;
    memset(ev, 0, sizeof *ev);
    char rel[256];
    /* Sapphire Rapids and later: the load-latency event must be in a group
     * led by mem-loads-aux, which itself does not sample. */
    snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/events/mem-loads-aux", pmu);
    char tmp[64];
    if (hm__os_read(rel, tmp, sizeof tmp) > 0) {
        struct perf_event_attr *a = (void *)ev->attr[ev->n];
        base_attr(a, period);
        if ((rc = sysfs_event(pmu, "mem-loads-aux", ldlat, a)))
            goto out;
        a->sample_period = 0;
        a->sample_type = 0;
        ev->leader[ev->n] = -1;
        ev->sampling[ev->n] = 0;
        snprintf(ev->name[ev->n], sizeof ev->name[0], "%s/mem-loads-aux/", pmu);
        ev->n++;
    }
    int lead = ev->n ? 0 : -1;
    {
        struct perf_event_attr *a = (void *)ev->attr[ev->n];
        char name[96];
        snprintf(name, sizeof name, "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=%u", ldlat);
        if (pfm_encode(name, a) != 0 && (rc = sysfs_event(pmu, "mem-loads", ldlat, a)))
            goto out;
        base_attr(a, period);
        a->precise_ip = 2;
        ev->leader[ev->n] = lead;
        ev->sampling[ev->n] = 1;
        snprintf(ev->name[ev->n], sizeof ev->name[0], "mem-loads:ldlat=%u", ldlat);
        ev->n++;
    }
    if (info->has_mem_stores) {
        struct perf_event_attr *a = (void *)ev->attr[ev->n];
        if (pfm_encode("MEM_INST_RETIRED:ALL_STORES", a) != 0 &&
            pfm_encode("MEM_UOPS_RETIRED:ALL_STORES", a) != 0 &&
            (rc = sysfs_event(pmu, "mem-stores", ldlat, a)))
            goto out;
        base_attr(a, period);
        a->precise_ip = 2;
        ev->leader[ev->n] = -1;
        ev->sampling[ev->n] = 1;
        snprintf(ev->name[ev->n], sizeof ev->name[0], "mem-stores");
        ev->n++;
    }
    size_t off = 0;
    for (int i = 0; i < ev->n; i++)
        if (ev->sampling[i])
            off += (size_t)snprintf(ev->event + off, sizeof ev->event - off, "%s%s", off ? "," : "", ev->name[i]);
out:
    free(info);
    return rc;
}
