/* Backend table, probing and the sysfs event encoder shared by the perf
 * backends. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "os/os.h"

static const char *const names_[HM_BACKEND_COUNT] = {"pebs", "ibs", "spe", "soft"};

HM_API const char *hm_backend_name(hm_backend_t b)
{
    return (unsigned)b < HM_BACKEND_COUNT ? names_[b] : "?";
}

HM_API int hm_backend_parse(const char *name, hm_backend_t *out)
{
    hm__errclear();
    for (int i = 0; i < HM_BACKEND_COUNT; i++)
        if (name && !strcmp(name, names_[i])) {
            *out = (hm_backend_t)i;
            return 0;
        }
    return hm__errf(HM_EUSAGE, "unknown backend '%s' (auto, pebs, ibs, spe, soft)", name ? name : "");
}

uint64_t hm__rec_sample_type(void)
{
    return PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_WEIGHT |
           PERF_SAMPLE_DATA_SRC;
}

int hm__perf_format_apply(const char *spec, uint64_t value, uint64_t cfg[3])
{
    /* "config:0-7", "config1:0-15", "config:33" or split "config:0-7,32-35". */
    int which;
    const char *p;
    if (!strncmp(spec, "config1:", 8)) { which = 1; p = spec + 8; }
    else if (!strncmp(spec, "config2:", 8)) { which = 2; p = spec + 8; }
    else if (!strncmp(spec, "config:", 7)) { which = 0; p = spec + 7; }
    else return hm__errf(HM_ECORRUPT, "format '%s': unknown field", spec);
    int shift_in = 0;
    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10);
        if (end == p || lo < 0 || lo > 63)
            return hm__errf(HM_ECORRUPT, "format '%s': bad bit range", spec);
        long hi = lo;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo || hi > 63)
                return hm__errf(HM_ECORRUPT, "format '%s': bad bit range", spec);
        }
        int w = (int)(hi - lo + 1);
        uint64_t m = w == 64 ? ~0ull : ((1ull << w) - 1);
        cfg[which] |= ((value >> shift_in) & m) << lo;
        shift_in += w;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return hm__errf(HM_ECORRUPT, "format '%s': trailing junk", spec);
    }
    return 0;
}

int hm__perf_sysfs_encode(const char *pmu, const char *terms, uint64_t cfg[3])
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", terms);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        uint64_t v = 1;
        if (eq) {
            *eq = '\0';
            v = strtoull(eq + 1, NULL, 0);
        }
        char rel[256], spec[128];
        snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/format/%s", pmu, t);
        if (hm__os_read(rel, spec, sizeof spec) <= 0)
            return hm__errf(HM_ENOPMU, "PMU %s has no format term '%s'", pmu, t);
        int r = hm__perf_format_apply(spec, v, cfg);
        if (r)
            return r;
    }
    return 0;
}

int hm__perfsw_events(uint64_t period_ns, hm__rec_events_t *ev)
{
    memset(ev, 0, sizeof *ev);
    struct perf_event_attr *a = (void *)ev->attr[0];
    a->size = sizeof *a;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_TASK_CLOCK;
    a->sample_period = period_ns;
    a->sample_type = hm__rec_sample_type();
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    ev->n = 1;
    ev->leader[0] = -1;
    ev->sampling[0] = 1;
    snprintf(ev->name[0], sizeof ev->name[0], "task-clock");
    snprintf(ev->event, sizeof ev->event, "task-clock (perf-sw)");
    return 0;
}

int hm__rec_events(hm_backend_t b, uint64_t period, hm__rec_events_t *ev)
{
    memset(ev, 0, sizeof *ev);
    if ((int)b == HM__BACKEND_PERFSW)
        return hm__perfsw_events(period, ev);
    switch (b) {
    case HM_BACKEND_PEBS: return hm__pebs_events(period, 30, ev);
    case HM_BACKEND_IBS: return hm__ibs_events(period, ev);
    case HM_BACKEND_SPE: return hm__spe_events(period, ev);
    default: return hm__errf(HM_EUSAGE, "backend %s has no perf events", hm_backend_name(b));
    }
}

static void put(char *dst, size_t len, const char *s)
{
    if (dst && len)
        snprintf(dst, len, "%s", s);
}

HM_API int hm_backend_probe(hm_backend_t b, int try_open, char *why, size_t whylen, char *remedy, size_t remlen)
{
    hm__errclear();
    char why_[256], rem_[256];
    if (!why || !whylen) {
        why = why_;
        whylen = sizeof why_;
    }
    if (!remedy || !remlen) {
        remedy = rem_;
        remlen = sizeof rem_;
    }
    put(why, whylen, "");
    put(remedy, remlen, "");
    if (b == HM_BACKEND_SOFT) {
#if defined(__x86_64__)
        if (!hm__os_is_live()) {
            /* Judging a captured tree: its CPU, not ours, decides. */
            hm_os_info_t *fi = hm__xmalloc(sizeof *fi);
            hm__os_probe(fi);
            int x86 = !strcmp(fi->arch, "x86_64");
            free(fi);
            if (!x86) {
                put(why, whylen, "the soft sampler decodes x86-64 instructions only");
                put(remedy, remlen, "use the PMU backend of this architecture (spe on Arm)");
                return HM_ENOTIMPL;
            }
        }
        timer_t t;
        struct sigevent se;
        memset(&se, 0, sizeof se);
        se.sigev_notify = SIGEV_NONE;
        if (timer_create(CLOCK_MONOTONIC, &se, &t) != 0) {
            int e = errno;
            snprintf(why, whylen, "timer_create(CLOCK_MONOTONIC) failed: %s", strerror(e));
            put(remedy, remlen, "check seccomp/container limits on POSIX timers");
            return -e;
        }
        timer_delete(t);
        put(why, whylen, "timer interrupts + x86-64 instruction decoding (Zydis)");
        return 0;
#else
        put(why, whylen, "the soft sampler decodes x86-64 instructions only");
        put(remedy, remlen, "use the PMU backend of this architecture (spe on Arm)");
        return HM_ENOTIMPL;
#endif
    }
    hm_os_info_t *info = hm__xmalloc(sizeof *info);
    hm__os_probe(info);
    int rc = 0;
    hm__rec_events_t ev;
    const char *pmu_remedy = info->hypervisor
        ? "this is a virtual machine without PMU passthrough: enable the guest PMU (KVM: -cpu host,pmu=on) or run on bare metal; meanwhile use -b soft"
        : "run on a CPU that has it, or use -b soft";
    if (b == HM_BACKEND_PEBS && !info->has_mem_loads) {
        snprintf(why, whylen, "no Intel core PMU with mem-loads in %s/sys/bus/event_source/devices%s",
                 info->root, strcmp(info->vendor, "GenuineIntel") ? " (not an Intel CPU)" : "");
        put(remedy, remlen, pmu_remedy);
        rc = HM_ENOPMU;
        goto out;
    }
    if (b == HM_BACKEND_IBS && info->ibs_op_type < 0) {
        snprintf(why, whylen, "no ibs_op PMU in %s/sys/bus/event_source/devices%s", info->root,
                 strcmp(info->vendor, "AuthenticAMD") ? " (not an AMD CPU)" : "");
        put(remedy, remlen, pmu_remedy);
        rc = HM_ENOPMU;
        goto out;
    }
    if (b == HM_BACKEND_SPE && info->spe_type < 0) {
        snprintf(why, whylen, "no arm_spe PMU in %s/sys/bus/event_source/devices", info->root);
        put(remedy, remlen, "needs an Armv8.2+ CPU with SPE and CONFIG_ARM_SPE_PMU (and kpti off on some kernels); use -b soft elsewhere");
        rc = HM_ENOPMU;
        goto out;
    }
    /* IBS and SPE sample kernel code too unless the PMU can filter, so they
     * need paranoid <= 1; PEBS user-only sampling of our own process works
     * up to 2. */
    int need = b == HM_BACKEND_PEBS ? 2 : 1;
    if (info->paranoid != -100 && info->paranoid > need) {
        snprintf(why, whylen, "kernel.perf_event_paranoid is %d (needs <= %d)", info->paranoid, need);
        snprintf(remedy, remlen, "sudo sysctl kernel.perf_event_paranoid=%d, or give hetmem CAP_PERFMON", need);
        rc = -EACCES;
        goto out;
    }
    rc = hm__rec_events(b, 4000, &ev);
    if (rc) {
        snprintf(why, whylen, "%s", hm_errdetail());
        put(remedy, remlen, b == HM_BACKEND_SPE ? "use -b soft (or perf record with arm_spe and convert)" : pmu_remedy);
        goto out;
    }
    if (try_open && hm__os_is_live()) {
        int fds[HM_REC_MAX_EVENTS];
        for (int i = 0; i < ev.n; i++) {
            int lead = ev.leader[i] >= 0 ? fds[ev.leader[i]] : -1;
            fds[i] = hm__os_perf_open(ev.attr[i], 0, -1, lead, PERF_FLAG_FD_CLOEXEC);
            if (fds[i] < 0) {
                int e = fds[i];
                for (int j = 0; j < i; j++)
                    close(fds[j]);
                snprintf(why, whylen, "perf_event_open(%s) failed: %s", ev.name[i], strerror(-e));
                put(remedy, remlen, e == -EACCES || e == -EPERM
                        ? "lower kernel.perf_event_paranoid or grant CAP_PERFMON"
                        : "the PMU rejected the event (kernel too old for this CPU?); try a newer kernel or -b soft");
                rc = e;
                goto out;
            }
        }
        for (int i = 0; i < ev.n; i++)
            close(fds[i]);
        snprintf(why, whylen, "%s (opened)", ev.event);
    } else {
        snprintf(why, whylen, "%s (PMU present; not opened)", ev.event);
    }
out:
    free(info);
    return rc;
}

HM_API int hm_backend_auto(int try_open, hm_backend_t *out)
{
    for (int b = 0; b < HM_BACKEND_COUNT; b++)
        if (hm_backend_probe((hm_backend_t)b, try_open, NULL, 0, NULL, 0) == 0) {
            *out = (hm_backend_t)b;
            return 0;
        }
    return hm__errf(HM_ENOPMU, "no sampling backend works here (see 'hetmem doctor')");
}
