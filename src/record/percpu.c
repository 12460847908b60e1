/* Per-CPU perf mode for `hetmem record --per-cpu`. The hetmem process
 * itself opens every event once per online CPU (pid = -1: all tasks on that
 * CPU), maps one ring per CPU and runs a collector thread that keeps the
 * samples of its own descendants (the traced command and everything it
 * forks) and writes them to a spool file beside the runtime's. The traced
 * threads open nothing. CPU-wide events need kernel.perf_event_paranoid
 * <= 0, or CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8). */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "hetmem/trace.h"
#include "os/os.h"

#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38

int hm__percpu_permitted(char *why, size_t whylen, char *remedy, size_t remlen)
{
    hm_os_info_t *info = hm__xmalloc(sizeof *info);
    hm__os_probe(info);
    int par = info->paranoid;
    free(info);
    /* Effective capabilities, through the os layer so that a captured tree
     * (which has no proc/self/status) reads as "none". */
    char st[4096];
    uint64_t caps = 0;
    if (hm__os_read("/proc/self/status", st, sizeof st) > 0) {
        const char *p = strstr(st, "CapEff:");
        if (p)
            caps = strtoull(p + 7, NULL, 16);
    }
    int capable = (caps >> CAP_PERFMON_BIT & 1) || (caps >> CAP_SYS_ADMIN_BIT & 1);
    if (capable || (par != -100 && par <= 0))
        return 0;
    if (par == -100)
        snprintf(why, whylen, "kernel.perf_event_paranoid is unreadable and hetmem lacks CAP_PERFMON");
    else
        snprintf(why, whylen, "per-CPU events need kernel.perf_event_paranoid <= 0 (it is %d) or CAP_PERFMON", par);
    snprintf(remedy, remlen, "sudo sysctl kernel.perf_event_paranoid=0, or sudo setcap cap_perfmon+ep on the hetmem "
                             "binary, or record without --per-cpu");
    return -EACCES;
}

struct hm__percpu {
    int ncpu, nev;
    int *fd;                  /* ncpu * nev */
    hm__perf_ring_t **ring;   /* ncpu * nev, NULL when not sampling */
    uint64_t sample_type;
    int out;                  /* spool file */
    pid_t self;
    pthread_t th;
    atomic_int stop;
    uint64_t kept, foreign;
    struct { int32_t pid; int8_t v; } seen[4096]; /* descendant verdicts, open addressing */
};

/* 1 when pid descends from this process (not itself), from the ppid chain
 * in /proc. A process that has already gone cannot be judged: 0. */
static int descends_(hm__percpu_t *p, int32_t pid)
{
    if (pid <= 0 || pid == p->self)
        return 0;
    size_t h = (size_t)pid * 2654435761u % 4096;
    for (size_t i = 0; i < 4096; i++) {
        size_t k = (h + i) % 4096;
        if (p->seen[k].pid == pid)
            return p->seen[k].v;
        if (p->seen[k].pid == 0) {
            int v = 0;
            int32_t cur = pid;
            for (int depth = 0; depth < 64 && cur > 1; depth++) {
                char path[64], buf[512];
                snprintf(path, sizeof path, "/proc/%d/stat", (int)cur);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                    break;
                ssize_t n = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (n <= 0)
                    break;
                buf[n] = '\0';
                /* "pid (comm) state ppid": comm may hold spaces and ')'. */
                const char *rp = strrchr(buf, ')');
                int ppid = 0;
                if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
                    break;
                if (ppid == p->self) {
                    v = 1;
                    break;
                }
                cur = ppid;
            }
            p->seen[k].pid = pid;
            p->seen[k].v = (int8_t)v;
            return v;
        }
    }
    return 0;
}

static void put_(hm__percpu_t *p, const hm__spool_rec_t *r)
{
    ssize_t w = write(p->out, r, sizeof *r);
    (void)w; /* a full disk shows as a short trace; the merge copes */
}

static void sample_cb_(void *ctx, const hm_perf_sample_t *s)
{
    hm__percpu_t *p = ctx;
    if (!descends_(p, (int32_t)s->pid)) {
        p->foreign++;
        return;
    }
    int acc;
    uint16_t ds = hm_perf_dsrc(s->data_src, 0, &acc);
    hm__spool_rec_t r = {HM_REC_SAMPLE, 0, s->tid, s->time, s->addr, s->ip,
                         (uint64_t)(uint32_t)s->weight << 32 | (uint64_t)ds << 8 | (uint64_t)(acc < 0 ? 0 : acc)};
    put_(p, &r);
    p->kept++;
}

static void drain_(hm__percpu_t *p)
{
    for (int i = 0; i < p->ncpu * p->nev; i++)
        if (p->ring[i])
            hm__perf_ring_read(p->ring[i], p->sample_type, sample_cb_, p);
}

static void *collector_(void *arg)
{
    hm__percpu_t *p = arg;
    struct timespec tick = {0, 20 * 1000 * 1000}; /* as the runtime's collector */
    while (!atomic_load(&p->stop)) {
        drain_(p);
        nanosleep(&tick, NULL);
    }
    return NULL;
}

int hm__percpu_open(hm__percpu_t **out, const hm__rec_events_t *ev, uint64_t sample_type, const char *spooldir)
{
    *out = NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu < 1)
        ncpu = 1;
    hm__percpu_t *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->ncpu = (int)ncpu;
    p->nev = ev->n;
    p->self = getpid();
    p->sample_type = sample_type;
    p->out = -1;
    p->fd = hm__xmalloc(sizeof *p->fd * (size_t)(ncpu * ev->n));
    p->ring = calloc((size_t)(ncpu * ev->n), sizeof *p->ring);
    int rc = 0, opened = 0;
    for (int i = 0; i < ncpu * ev->n; i++)
        p->fd[i] = -1;
    for (int c = 0; c < ncpu; c++) {
        for (int e = 0; e < ev->n; e++) {
            int lead = ev->leader[e] >= 0 ? p->fd[c * ev->n + ev->leader[e]] : -1;
            int fd = hm__os_perf_open((void *)ev->attr[e], -1, c, lead, PERF_FLAG_FD_CLOEXEC);
            if (fd == -ENODEV || fd == -ENOENT || fd == -EINVAL) {
                if (e == 0)
                    break; /* an offline CPU: skip it */
                continue;
            }
            if (fd < 0) {
                rc = hm__errf(fd, "perf_event_open(%s, pid=-1, cpu=%d): %s", ev->name[e], c, strerror(-fd));
                goto fail;
            }
            p->fd[c * ev->n + e] = fd;
            opened++;
            if (ev->sampling[e]) {
                hm__perf_ring_t *r = calloc(1, sizeof *r);
                int m = r ? hm__perf_ring_map(r, fd, 8) : -ENOMEM;
                if (m) {
                    free(r);
                    rc = hm__errf(m, "mmap of the cpu %d ring: %s", c, strerror(-m));
                    goto fail;
                }
                p->ring[c * ev->n + e] = r;
            }
        }
    }
    if (!opened) {
        rc = hm__errf(HM_ENOPMU, "perf_event_open(%s) failed on every CPU", ev->name[0]);
        goto fail;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/percpu-%d.spool", spooldir, (int)p->self);
    p->out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (p->out < 0) {
        rc = hm__errf(-errno, "cannot create %s: %s", path, strerror(errno));
        goto fail;
    }
    if (write(p->out, HM_SPOOL_MAGIC, 8) != 8) {
        rc = hm__errf(-EIO, "cannot write %s", path);
        goto fail;
    }
    if (pthread_create(&p->th, NULL, collector_, p) != 0) {
        rc = hm__errf(-EAGAIN, "cannot start the per-CPU collector thread");
        goto fail;
    }
    *out = p;
    return 0;
fail:
    p->th = 0;
    hm__percpu_close(p, NULL, NULL);
    return rc;
}

void hm__percpu_close(hm__percpu_t *p, uint64_t *kept, uint64_t *foreign)
{
    if (!p)
        return;
    if (p->th) {
        atomic_store(&p->stop, 1);
        pthread_join(p->th, NULL);
        /* What the kernel published after the last tick. */
        for (int i = 0; i < p->ncpu * p->nev; i++)
            if (p->fd[i] >= 0)
                ioctl(p->fd[i], PERF_EVENT_IOC_DISABLE, 0);
        drain_(p);
    }
    uint64_t lost = 0;
    for (int i = 0; i < p->ncpu * p->nev; i++) {
        if (p->ring[i]) {
            lost += p->ring[i]->stats.lost;
            hm__perf_ring_unmap(p->ring[i]);
            free(p->ring[i]);
        }
        if (p->fd[i] >= 0)
            close(p->fd[i]);
    }
    if (p->out >= 0) {
        /* Lost counts are per CPU, not per process: all are reported. */
        hm__spool_rec_t r = {HM_SPOOL_STATS, 0, 0, 0, lost, p->kept, 0};
        put_(p, &r);
        close(p->out);
    }
    if (kept)
        *kept = p->kept;
    if (foreign)
        *foreign = p->foreign;
    free(p->fd);
    free(p->ring);
    free(p);
}
