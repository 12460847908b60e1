/* Builds the estimator's summary from N device traces: checks that they are
 * runs of one program on distinct devices, aligns them (phase markers, then
 * windows of equal instruction count, or equal time without counters),
 * matches objects by allocation site and name, and accumulates per window,
 * object and run the sample statistics the models read. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/objtab.h"
#include "estimate/estimate_int.h"
#include "hetmem/trace.h"

#define NO_PHASE "(no phase)"

typedef struct {
    uint64_t time, instr;
} ipoint_t;

/* A sample as the binning needs it, kept from the one decoding pass:
 * 8 bytes instead of the decoded record's 35, since the window bounds are
 * known only once every run has been read. Times are deltas from the
 * previous sample. The tag is (object of this run + 1, 0: untracked) << 5 |
 * level << 2 | load << 1 | store. A sample whose delta, weight or tag does
 * not fit a short entry (32, 16 and 16 bits, the tag below SAMP_LONG)
 * takes three: {delta's high bits, SAMP_LONG << 16}, {delta's low bits,
 * weight}, {tag, 0}. */
typedef struct {
    uint32_t dt;
    uint32_t wtag;            /* weight | tag << 16 */
} samp_t;

#define SAMP_LONG 0xffffu
#define SAMP_SHORT_OBJ ((SAMP_LONG >> 5) - 1) /* largest object + 1 of a short entry */
#define SAMP_MAX_OBJ ((1u << 27) - 2)

/* The kept samples are the one large allocation of summary building (8
 * bytes a sample, tens of MB for long traces). They are mapped with
 * transparent huge pages where the kernel allows them: on 4 KiB pages, the
 * page faults of first touching the buffer cost about a tenth of the whole
 * pass. */
#define SAMP_HUGE ((size_t)2 << 20)

/* Bytes of the mapping for n entries: whole huge pages from half of one up.
 * Clearing a huge page costs less than the 4 KiB page faults it saves once
 * half of it is used (a profile of the stream traces, then 2.6 MB a run: page
 * faults took about 13% of summary building on 4 KiB pages; on huge pages,
 * clearing them took about 6%). */
static size_t samp_bytes(size_t n)
{
    size_t b = n * sizeof(samp_t), a = b >= SAMP_HUGE / 2 ? SAMP_HUGE : 4096;
    return (b + a - 1) & ~(a - 1);
}

static samp_t *samp_map(size_t n, size_t *cap)
{
    size_t bytes = samp_bytes(n);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= SAMP_HUGE)
        madvise(p, bytes, MADV_HUGEPAGE); /* advice only: without it, 4 KiB pages */
#endif
    (void)hm__prefault(p, bytes); /* after the advice, so that the pages it takes are huge */
    *cap = bytes / sizeof(samp_t);
    return p;
}

/* The mapping is whole pages of whole entries, so cap entries are all of it. */
_Static_assert(4096 % sizeof(samp_t) == 0, "a page holds whole samp_t entries");
static void samp_unmap(samp_t *p, size_t cap)
{
    if (p)
        munmap(p, cap * sizeof *p);
}

/* One run while it is read. */
typedef struct {
    const char *path;
    hm_trace_t *t;
    const hm_trace_meta_t *meta;
    hm_trace_stats_t st;
    int dev;                  /* index into the estimator's devices */
    /* phase events: kind (1 begin, 0 end), name, time */
    int nev, cev;
    int *ev_kind;
    char **ev_name;
    uint64_t *ev_time;
    ipoint_t *ip;             /* instruction counter points, time order */
    int nip, cip;
    uint64_t *bound;          /* window boundaries (nwin + 1 times) */
    uint32_t hist[4][512];    /* load weights per cache level (first pass) */
    float base[4];            /* usual latency of a hit per level: the hit_base percentile */
    double hit_wait;          /* a hit above this times base waited for memory (INFINITY: none) */
    struct oset *os;          /* this run's objects */
    int *map;                 /* this run's object -> the union's */
    uint64_t (*pages)[100];   /* per object of this run + 1: pages of sampled misses (row 0: untracked, unread) */
    int npages;               /* rows that pages has room for */
    samp_t *buf;              /* the samples, compact, in time order */
    size_t nbuf, cbuf;
    hm_estimator_t *e;        /* where bin_run() puts the samples */
    int rc;                   /* a worker's result, and its detail: */
    char err[512];
} run_t;

/* ------------------------------------------------------------ objects */

typedef struct {
    uint64_t site;
    char *name;
    char *source; /* "file:line" of the allocating call, from the run's site record */
    uint64_t live, peak, allocations;
} okey_t;

typedef struct oset {
    okey_t *v;
    int n, cap;
} oset_t;

/* The entry of (site, name), added when new: its index, or -ENOMEM (the
 * set unchanged). */
static int oset_get(oset_t *s, uint64_t site, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i].site == site && ((!name && !s->v[i].name) || (name && s->v[i].name && !strcmp(name, s->v[i].name))))
            return i;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        okey_t *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    char *nm = NULL;
    if (name && !(nm = strdup(name)))
        return -ENOMEM;
    s->v[s->n] = (okey_t){site, nm, NULL, 0, 0, 0};
    return s->n++;
}

/* An allocation's current object and size, kept per run in the objtab's id. */
typedef struct {
    uint64_t size;
    int obj;
} alloc_t;

/* ------------------------------------------------------------ helpers */

static void run_free(run_t *r)
{
    if (r->t)
        hm_trace_close(r->t);
    for (int i = 0; i < r->nev; i++)
        free(r->ev_name[i]);
    free(r->ev_kind);
    free(r->ev_name);
    free(r->ev_time);
    free(r->ip);
    free(r->bound);
    if (r->os) {
        for (int k = 0; k < r->os->n; k++) {
            free(r->os->v[k].name);
            free(r->os->v[k].source);
        }
        free(r->os->v);
        free(r->os);
    }
    free(r->map);
    free(r->pages);
    samp_unmap(r->buf, r->cbuf);
}

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Instructions at @p time between counter points k and k + 1. */
static inline double seg_instr(const run_t *r, int k, uint64_t time)
{
    const ipoint_t *a = &r->ip[k], *b = &r->ip[k + 1];
    double f = b->time > a->time ? (double)(time - a->time) / (double)(b->time - a->time) : 0;
    return (double)a->instr + f * (double)(b->instr - a->instr);
}

/* Instructions at @p time, interpolated between counter points (0 before the first). */
static double instr_at(const run_t *r, uint64_t time)
{
    if (r->nip == 0)
        return 0;
    int lo = 0, hi = r->nip - 1;
    if (time <= r->ip[0].time)
        return (double)r->ip[0].instr * (r->ip[0].time ? (double)time / (double)r->ip[0].time : 1.0);
    if (time >= r->ip[hi].time) {
        /* After the last point: extrapolate at the run's last rate. */
        const ipoint_t *a = hi > 0 ? &r->ip[hi - 1] : &(ipoint_t){0, 0}, *b = &r->ip[hi];
        double rate = b->time > a->time ? (double)(b->instr - a->instr) / (double)(b->time - a->time) : 0;
        return (double)b->instr + rate * (double)(time - b->time);
    }
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (r->ip[mid].time <= time)
            lo = mid;
        else
            hi = mid;
    }
    return seg_instr(r, lo, time);
}

/* Time at which the run reached @p instr within [t0, t1] (inverse of
 * instr_at): the first time in (t0, t1) at which instr_at() reaches it, else
 * t1. instr_at() does not fall, and equals a counter point's value at its
 * time, so the counter points first narrow the search down to one segment
 * between points; the bisection inside it gives what a bisection over all of
 * [t0, t1] would. */
static uint64_t time_at(const run_t *r, double instr, uint64_t t0, uint64_t t1)
{
    uint64_t lo = t0, hi = t1;
    int seg = -1; /* the segment (lo, hi) lies in, when it lies in one */
    if (r->nip > 0) {
        /* Last point before the crossing, first point at or past it. */
        int a = 0, b = r->nip;
        while (a < b) {
            int mid = (a + b) / 2;
            if ((double)r->ip[mid].instr < instr)
                a = mid + 1;
            else
                b = mid;
        }
        if (a > 0 && r->ip[a - 1].time > lo && r->ip[a - 1].time < hi)
            lo = r->ip[a - 1].time;
        if (a < r->nip && r->ip[a].time > lo && r->ip[a].time < hi)
            hi = r->ip[a].time;
        if (a > 0 && a < r->nip && lo >= r->ip[a - 1].time && hi <= r->ip[a].time)
            seg = a - 1;
    }
    if (seg >= 0 && hi - lo > 1) {
        /* Inside one segment the interpolation inverts in closed form; a
         * few steps from there find the bisection's answer exactly, since
         * seg_instr() does not fall (each of its operations rounds
         * monotonically). */
        const ipoint_t *a = &r->ip[seg], *b = &r->ip[seg + 1];
        double g = (double)a->time + (instr - (double)a->instr) / (double)(b->instr - a->instr) *
                                         (double)(b->time - a->time);
        if (g > (double)lo && g < (double)hi) {
            uint64_t t = (uint64_t)g;
            t = t <= lo ? lo + 1 : t > hi ? hi : t;
            for (int k = 0; k < 8; k++) {
                if (t > lo + 1 && seg_instr(r, seg, t - 1) >= instr)
                    t--;
                else if (t < hi && seg_instr(r, seg, t) < instr)
                    t++;
                else
                    return t; /* the first time in (lo, hi) that reaches it, or hi */
            }
        }
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((seg >= 0 ? seg_instr(r, seg, mid) : instr_at(r, mid)) < instr)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* Phase markers and instruction counters, kept on the first pass. 0 or
 * -ENOMEM (the arrays grown so far stay the run's, freed with it). */
static int add_event(run_t *r, const hm_record_t *ev)
{
    if (ev->kind == HM_REC_PHASE_BEGIN || ev->kind == HM_REC_PHASE_END) {
        if (r->nev == r->cev) {
            int cev = r->cev ? 2 * r->cev : 64;
            int *k = realloc(r->ev_kind, (size_t)cev * sizeof *r->ev_kind);
            if (k)
                r->ev_kind = k;
            char **nm = k ? realloc(r->ev_name, (size_t)cev * sizeof *r->ev_name) : NULL;
            if (nm)
                r->ev_name = nm;
            uint64_t *tm = nm ? realloc(r->ev_time, (size_t)cev * sizeof *r->ev_time) : NULL;
            if (!tm)
                return -ENOMEM;
            r->ev_time = tm;
            r->cev = cev;
        }
        if (!(r->ev_name[r->nev] = strdup(ev->u.phase.name ? ev->u.phase.name : "")))
            return -ENOMEM;
        r->ev_kind[r->nev] = ev->kind == HM_REC_PHASE_BEGIN;
        r->ev_time[r->nev++] = ev->u.phase.time;
    } else if (ev->u.counter.counter == HM_COUNTER_INSTRUCTIONS) {
        if (r->nip == r->cip) {
            int cip = r->cip ? 2 * r->cip : 1024;
            ipoint_t *ip = realloc(r->ip, (size_t)cip * sizeof *r->ip);
            if (!ip)
                return -ENOMEM;
            r->ip = ip;
            r->cip = cip;
        }
        if (r->nip && ev->u.counter.time <= r->ip[r->nip - 1].time)
            return 0; /* keep the points strictly increasing in time */
        r->ip[r->nip++] = (ipoint_t){ev->u.counter.time, ev->u.counter.value};
    }
    return 0;
}

static int walk_run(run_t *r);
static int bin_run(run_t *r);

/* Samples that take a thread about a millisecond to read (walk_run) or to
 * bin (bin_run, several times faster per sample). */
#define WALK_PER_THREAD ((uint64_t)1 << 15)
#define BIN_PER_THREAD ((uint64_t)1 << 16)

/* Runs fn on every run, on up to one thread per online CPU, each taking the
 * next run not yet taken (the runs are independent until their objects are
 * merged, and a queue keeps every thread busy when runs outnumber CPUs). */
typedef struct {
    run_t *runs;
    int n, next;
    int (*fn)(run_t *);
} queue_t;

static void *worker(void *arg)
{
    queue_t *q = arg;
    for (int i; (i = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED)) < q->n;) {
        run_t *r = &q->runs[i];
        r->rc = q->fn(r);
        if (r->rc < 0)
            snprintf(r->err, sizeof r->err, "%s", *hm_errdetail() ? hm_errdetail() : hm_strerror(r->rc));
    }
    return NULL;
}

/* A thread is started only for at least @p per_thread samples of work: on
 * a busy host, a new thread can wait milliseconds for a core, longer than
 * a small run takes on the calling thread. */
static int for_runs(run_t *runs, int n, int (*fn)(run_t *), uint64_t per_thread)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int par = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
    uint64_t samples = 0;
    for (int i = 0; i < n; i++)
        samples += runs[i].st.records[HM_REC_SAMPLE];
    if (par > n)
        par = n;
    if ((uint64_t)par > samples / per_thread)
        par = samples / per_thread < 1 ? 1 : (int)(samples / per_thread);
    queue_t q = {runs, n, 0, fn};
    pthread_t th[64];
    int started[64] = {0};
    for (int j = 1; j < par; j++)
        started[j] = pthread_create(&th[j], NULL, worker, &q) == 0;
    worker(&q); /* also does the runs of threads that could not be had */
    for (int j = 1; j < par; j++)
        if (started[j])
            pthread_join(th[j], NULL);
    for (int i = 0; i < n; i++)
        if (runs[i].rc < 0)
            return hm__errf(runs[i].rc, "%s", runs[i].err);
    return 0;
}

/* The machine description's entry for device @p name, or NULL. */
static json_t *machine_device(json_t *m, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(m, "devices"), i, v) {
        const char *nm = json_string_value(json_object_get(v, "name"));
        if (nm && !strcmp(nm, name))
            return v;
    }
    return NULL;
}

/* The core clock a machine description gives (core.freq_ghz, GHz), 0 when
 * none (or for want of memory to parse it again). */
static double machine_clock(const char *machine_json)
{
    json_t *m = machine_json ? json_loads(machine_json, 0, NULL) : NULL;
    json_t *g = json_object_get(json_object_get(m, "core"), "freq_ghz");
    double v = json_is_number(g) && json_number_value(g) > 0 && json_number_value(g) <= 1e3 ? json_number_value(g) : 0;
    json_decref(m);
    return v;
}

/* Device figures of run @p d, from a machine description (the trace's, or
 * the --machine one): the entry named as the run's device, else, for a
 * recorded run bound to NUMA nodes (host.bound_nodes), the entries of those
 * nodes ("nodeN", as record writes HMAT figures): bandwidths and capacities
 * add up over interleaved nodes, latencies average. Figures a description
 * does not give stay 0 (hm_estimator_figures_note() names them). Both
 * texts were parsed once already (the trace reader, or the caller's check
 * of --machine): parsing them again fails only for want of memory. 0 or
 * -ENOMEM. */
static int device_figures(hm_estimator_t *e, int d, const char *machine_json, const char *dev, const char *host_json)
{
    if (!machine_json)
        return 0;
    json_t *m = json_loads(machine_json, 0, NULL);
    if (!m)
        return -ENOMEM;
    double cores = 1;
    json_t *c = json_object_get(m, "cores");
    if (json_is_number(c) && json_number_value(c) >= 1)
        cores = json_number_value(c);
    json_t *ent[64];
    int k = 0;
    if ((ent[0] = machine_device(m, dev))) {
        k = 1;
    } else if (host_json) {
        json_t *h = json_loads(host_json, 0, NULL);
        if (!h) {
            json_decref(m);
            return -ENOMEM;
        }
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(h, "bound_nodes"), i, n) {
            char nm[32];
            snprintf(nm, sizeof nm, "node%lld", (long long)json_integer_value(n));
            json_t *v = machine_device(m, nm);
            if (!v || k == 64) {
                k = 0; /* all of the run's nodes or none */
                break;
            }
            ent[k++] = v;
        }
        json_decref(h);
    }
    double bw = 0, wbw = 0, lat = 0, cap = 0;
    int nbw = 0, nwbw = 0, nlat = 0;
    for (int j = 0; j < k; j++) {
        json_t *v = ent[j], *x;
        if (json_is_number(x = json_object_get(v, "read_bandwidth_gbs")))
            bw += json_number_value(x), nbw++;
        if (json_is_number(x = json_object_get(v, "write_bandwidth_gbs")))
            wbw += json_number_value(x), nwbw++;
        if (json_is_number(x = json_object_get(v, "read_latency_ns")))
            lat += json_number_value(x), nlat++;
        uint64_t bytes = 0;
        x = json_object_get(v, "capacity");
        if (json_is_string(x) && hm__parse_size(json_string_value(x), &bytes) == 0)
            cap += (double)bytes;
        else if (json_is_number(x))
            cap += json_number_value(x);
    }
    if (k && nbw == k)
        e->bw[d] = bw / cores;
    e->wbw[d] = k && nwbw == k ? wbw / cores : e->bw[d];
    if (k && nlat == k)
        e->lat_ns[d] = lat / k;
    if (k)
        e->cap[d] = (uint64_t)(cap / cores);
    /* A loaded-latency curve (as Intel MLC measures it): [[u, ns], ...],
     * for a single device only (no curve is known for an interleave). */
    json_t *pt;
    size_t i;
    json_array_foreach(k == 1 ? json_object_get(ent[0], "loaded_latency") : NULL, i, pt) {
        if (i >= 16 || !json_is_number(json_array_get(pt, 0)) || !json_is_number(json_array_get(pt, 1)))
            break;
        e->ll[d][0][i] = json_number_value(json_array_get(pt, 0));
        e->ll[d][1][i] = json_number_value(json_array_get(pt, 1));
        e->ll_n[d] = (int)i + 1;
    }
    json_decref(m);
    return 0;
}

/* The machine a run says it ran on, for telling runs of different machines
 * apart: the simulated machine's name and devices, or the recording host's
 * name, CPU model and memory nodes (trace header "host"). Unknown parts
 * (older traces) are "" and match anything. */
typedef struct {
    int sim;                /* 1 simulated, 0 recorded, -1 unknown */
    char name[128], host[128], cpu[128], devices[512];
} ident_t;

static void join_names(json_t *arr, char *buf, size_t len)
{
    size_t i, off = 0;
    json_t *v;
    buf[0] = 0;
    json_array_foreach(arr, i, v) {
        const char *nm = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "name"));
        if (nm && off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "", nm);
    }
}

static void identity(const hm_trace_meta_t *meta, ident_t *id)
{
    memset(id, 0, sizeof *id);
    id->sim = meta->backend ? !strcmp(meta->backend, "sim") : -1;
    json_t *m = meta->machine_json ? json_loads(meta->machine_json, 0, NULL) : NULL;
    json_t *h = meta->host_json ? json_loads(meta->host_json, 0, NULL) : NULL;
    const char *s;
    /* A recorded run's machine name only names its figures' source. */
    if (!h && (s = json_string_value(json_object_get(m, "name"))))
        snprintf(id->name, sizeof id->name, "%s", s);
    if ((s = json_string_value(json_object_get(h, "name"))))
        snprintf(id->host, sizeof id->host, "%s", s);
    if ((s = json_string_value(json_object_get(h, "cpu"))))
        snprintf(id->cpu, sizeof id->cpu, "%s", s);
    /* A recorded run's devices are the host's memory nodes (its machine
     * description may be a file that any host could give); a simulated
     * run's are its machine's. */
    join_names(h ? json_object_get(h, "nodes") : json_object_get(m, "devices"), id->devices, sizeof id->devices);
    json_decref(m);
    json_decref(h);
}

static int differ(const char *a, const char *b) { return *a && *b && strcmp(a, b); }

static void describe(const ident_t *id, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s%s%s%s%s%s%s", id->sim == 1 ? "simulated" : id->sim == 0 ? "recorded" : "a run",
             *id->name ? " machine '" : "", id->name, *id->name ? "'" : "", *id->host ? ", host " : "", id->host,
             *id->cpu ? ", CPU " : "", id->cpu, *id->devices ? ", devices " : "", id->devices);
}

static int same_argv(const char *const *a, const char *const *b)
{
    if (!a || !b)
        return a == b;
    int i = 0;
    for (; a[i] && b[i]; i++)
        if (strcmp(a[i], b[i]))
            return 0;
    return !a[i] && !b[i];
}

int hm__est_alloc_devices(hm_estimator_t *e)
{
    size_t n = (size_t)e->ndev;
    e->dev_name = calloc(n, sizeof *e->dev_name);
    e->runtime_ns = calloc(n, sizeof(double));
    e->period = calloc(n, sizeof(double));
    e->bw = calloc(n, sizeof(double));
    e->wbw = calloc(n, sizeof(double));
    e->lat_ns = calloc(n, sizeof(double));
    e->cap = calloc(n, sizeof(uint64_t));
    e->ll_n = calloc(n, sizeof *e->ll_n);
    e->ll = calloc(n, sizeof *e->ll);
    if (!e->dev_name || !e->runtime_ns || !e->period || !e->bw || !e->wbw || !e->lat_ns || !e->cap || !e->ll_n ||
        !e->ll)
        return -ENOMEM;
    return 0;
}

int hm__est_alloc(hm_estimator_t *e)
{
    size_t W = (size_t)e->nwin, O = (size_t)e->nobj, D = (size_t)e->ndev;
    if (W == 0 || O == 0 || D == 0 || W * O * D > ((size_t)1 << 31))
        return hm__errf(HM_ETOOBIG, "summary of %zu windows x %zu objects x %zu devices", W, O, D);
    e->win = calloc(W, sizeof *e->win);
    e->t = calloc(W * D, sizeof *e->t);
    e->cell = calloc(W * O * D, sizeof *e->cell);
    if (!e->win || !e->t || !e->cell)
        return -ENOMEM;
    return 0;
}

static void live_add(oset_t *os, int o, uint64_t size, int count)
{
    os->v[o].live += size;
    os->v[o].allocations += (uint64_t)count;
    if (os->v[o].live > os->v[o].peak)
        os->v[o].peak = os->v[o].live;
}

/* Where recent samples' objects lie, which spares most samples a lookup
 * in the allocation table: the ranges of objects, and the untracked
 * stretches (stack, static data) found around samples outside them. A
 * direct-mapped slot per 64 KiB of addresses answers most samples with one
 * well-predicted test (a loop over a few large arrays stays in a few
 * slots); behind it, the last few ranges found catch small objects that
 * share a slot. The ranges never disagree (objects are disjoint, and a
 * stretch is free of objects), so any range that holds the address gives
 * the answer. A range stays right until the table changes at one of its
 * addresses, so a change forgets only the ranges it overlaps (rec_forget):
 * a program that allocates and frees small buffers all along keeps its
 * large arrays' ranges. A slot keeps only the part of its range inside its
 * own 64 KiB (the only addresses that look it up), so a change looks at the
 * slots of the 64 KiB blocks it touches, not at every slot in use: a
 * program that allocates thousands of small objects while it is sampled
 * (HPCG) otherwise spent a tenth of summary building in that walk. An
 * empty entry has size 0, which holds no address. */
#define SLOTS 512
#define SLOT_SHIFT 16
#define RECENT 8
typedef struct {
    uint64_t addr, size;
    int obj; /* this run's object, -1: untracked */
} range_t;

typedef struct {
    range_t slot[SLOTS];
    range_t recent[RECENT];
    unsigned next;
} recent_t;

/* Whether [a, a + n) and [b, b + m) share an address (n, m >= 1; written
 * so that no end wraps past 2^64). */
static inline int overlaps(uint64_t a, uint64_t n, uint64_t b, uint64_t m)
{
    return a - b < m || b - a < n;
}

/* The part of range g (which holds a) inside a's 64 KiB block: what a's
 * slot keeps. */
static inline range_t slot_part(range_t g, uint64_t a)
{
    uint64_t blo = a & ~(((uint64_t)1 << SLOT_SHIFT) - 1), blast = blo + (((uint64_t)1 << SLOT_SHIFT) - 1);
    uint64_t glast = g.addr + (g.size - 1);
    if (glast < g.addr)
        glast = UINT64_MAX; /* a range that would run past 2^64 */
    uint64_t lo = g.addr > blo ? g.addr : blo, last = glast < blast ? glast : blast;
    return (range_t){lo, last - lo + 1, g.obj};
}

/* Forgets the ranges that hold any address of [lo, lo + len) (len 0: its
 * first byte, as for a zero-size allocation). A slot's range lies in a
 * block whose number is the slot's modulo SLOTS, so only the slots of the
 * blocks [lo, lo + len) touches can hold one of its addresses. */
static void rec_forget(recent_t *rec, uint64_t lo, uint64_t len)
{
    if (len == 0)
        len = 1;
    uint64_t last = lo + (len - 1);
    if (last < lo)
        last = UINT64_MAX;
    uint64_t b0 = lo >> SLOT_SHIFT, nb = (last >> SLOT_SHIFT) - b0 + 1;
    for (uint64_t b = 0; b < nb && b < SLOTS; b++) {
        range_t *sl = &rec->slot[(b0 + b) % SLOTS];
        if (sl->size && overlaps(sl->addr, sl->size, lo, len))
            sl->size = 0;
    }
    for (int x = 0; x < RECENT; x++)
        if (rec->recent[x].size && overlaps(rec->recent[x].addr, rec->recent[x].size, lo, len))
            rec->recent[x].size = 0;
}

/* Lookups in the table after its last change before its sorted copy is
 * built: a fixed part, plus one per 8 live objects (copying the table
 * costs about as much as that many lookups in it, so a program that changes
 * its objects all along pays at most about twice what the table alone
 * would cost it). */
#define SNAP_AFTER 64

/* A live object as the sorted copy of the table holds it. */
typedef struct {
    uint64_t addr, ext, last; /* start, size (1 for a zero-size entry), last byte (saturated) */
    int obj;
} snap_ent_t;

/* Allocation tracking of one run while it is read. Behind the recent
 * ranges, a sorted copy of the table (starts apart, for a binary search
 * that stays in cache) answers lookups once the table has stayed unchanged
 * for a while (SNAP_AFTER): a program with thousands of small objects
 * (a sparse matrix's rows) allocates them first and then reads them for
 * millions of samples, each a walk down the table's tree otherwise. Any
 * change to the table or to an object's name drops the copy. */
typedef struct {
    hm_objtab_t *tab;
    alloc_t *allocs;
    size_t nalloc, cap;
    uint64_t *s_addr;         /* the copy's starts, ascending */
    snap_ent_t *s_ent;
    hm_objtab_entry_t *s_tmp; /* scratch of a build */
    uint32_t *s_stack;
    size_t s_n, s_cap;
    int s_valid;
    uint64_t s_misses;        /* lookups in the table since it last changed */
    int err;                  /* -ENOMEM once a copy could not be made (said after the batch) */
} track_t;

static void track_free(track_t *k)
{
    free(k->allocs);
    free(k->s_addr);
    free(k->s_ent);
    free(k->s_tmp);
    free(k->s_stack);
    hm__objtab_close(k->tab);
}

/* The table or an object's name changes at [lo, lo + len): the ranges that
 * hold its addresses are forgotten, and the sorted copy dropped. */
static void track_changed(track_t *k, recent_t *rec, uint64_t lo, uint64_t len)
{
    rec_forget(rec, lo, len);
    k->s_valid = 0;
    k->s_misses = 0;
}

/* Builds the sorted copy of the table. On want of memory there is none,
 * the lookup goes on in the table, and k->err makes the walk fail after the
 * batch (the per-sample loop keeps no test for it). */
static void snap_build(track_t *k)
{
    size_t n = hm__objtab_count(k->tab);
    if (n > k->s_cap) {
        size_t c = n + n / 2;
        free(k->s_addr);
        free(k->s_ent);
        free(k->s_tmp);
        free(k->s_stack);
        k->s_addr = malloc(c * sizeof *k->s_addr);
        k->s_ent = malloc(c * sizeof *k->s_ent);
        k->s_tmp = malloc(c * sizeof *k->s_tmp);
        k->s_stack = malloc(c * sizeof *k->s_stack);
        k->s_cap = c;
        if (!k->s_addr || !k->s_ent || !k->s_tmp || !k->s_stack) {
            free(k->s_addr);
            free(k->s_ent);
            free(k->s_tmp);
            free(k->s_stack);
            k->s_addr = NULL, k->s_ent = NULL, k->s_tmp = NULL, k->s_stack = NULL;
            k->s_cap = 0;
            k->s_misses = 0;
            k->err = -ENOMEM;
            return;
        }
    }
    k->s_n = hm__objtab_list(k->tab, k->s_tmp, k->s_stack);
    for (size_t i = 0; i < k->s_n; i++) {
        const hm_objtab_entry_t *e = &k->s_tmp[i];
        uint64_t ext = e->size ? e->size : 1;
        k->s_addr[i] = e->addr;
        k->s_ent[i] = (snap_ent_t){e->addr, ext, e->addr + (ext - 1) < e->addr ? UINT64_MAX : e->addr + (ext - 1),
                                   k->allocs[e->id].obj};
    }
    k->s_valid = 1;
}

/* The copy's last object starting at or below @p a, or -1. */
static inline ptrdiff_t snap_floor(const track_t *k, uint64_t a)
{
    const uint64_t *base = k->s_addr;
    size_t n = k->s_n;
    if (!n)
        return -1;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] <= a ? base + half : base;
        n -= half;
    }
    return *base <= a ? base - k->s_addr : -1;
}

/* Applies one non-sample record: phase markers and counters are kept,
 * allocations, frees and names update the live objects. */
static int track_event(run_t *r, track_t *k, recent_t *rec, const hm_record_t *ev)
{
    oset_t *os = r->os;
    if (ev->kind == HM_REC_PHASE_BEGIN || ev->kind == HM_REC_PHASE_END || ev->kind == HM_REC_COUNTER) {
        if (add_event(r, ev) < 0)
            return -ENOMEM;
    }
    if (ev->kind == HM_REC_ALLOC) {
        const hm_alloc_t *a = &ev->u.alloc;
        int o = oset_get(os, a->site, NULL);
        if (o < 0)
            return o;
        if (k->nalloc == k->cap) {
            size_t cap = k->cap ? 2 * k->cap : 256;
            alloc_t *v = realloc(k->allocs, cap * sizeof *k->allocs);
            if (!v)
                return -ENOMEM;
            k->allocs = v;
            k->cap = cap;
        }
        k->allocs[k->nalloc] = (alloc_t){a->size, o};
        /* A live entry it overlaps was freed behind our back (realloc,
         * munmap): the ranges remembered at any of its addresses go, those
         * in the slots of blocks the new one does not reach too. */
        const hm_objtab_entry_t *old;
        while ((old = hm__objtab_overlap(k->tab, a->addr, a->size))) {
            os->v[k->allocs[old->id].obj].live -= k->allocs[old->id].size;
            rec_forget(rec, old->addr, old->size);
            hm__objtab_remove(k->tab, old->addr, NULL);
        }
        if (hm__objtab_insert(k->tab, a->addr, a->size, k->nalloc) < 0)
            return -ENOMEM;
        /* Untracked stretches remembered over its addresses go. */
        track_changed(k, rec, a->addr, a->size);
        k->nalloc++;
        live_add(os, o, a->size, 1);
    } else if (ev->kind == HM_REC_FREE) {
        hm_objtab_entry_t ent;
        if (hm__objtab_remove(k->tab, ev->u.alloc.addr, &ent) == 0) {
            os->v[k->allocs[ent.id].obj].live -= k->allocs[ent.id].size;
            track_changed(k, rec, ent.addr, ent.size);
        }
    } else if (ev->kind == HM_REC_SITE) {
        /* Written before the site's first allocation: the entry is made
         * here, and holds the source for the objects named from it too. */
        char src[512];
        if (hm__frame_source(ev->u.site.frames, src, sizeof src)) {
            int o = oset_get(os, ev->u.site.site, NULL);
            if (o < 0)
                return o;
            if (!os->v[o].source && !(os->v[o].source = strdup(src)))
                return -ENOMEM;
        }
    } else if (ev->kind == HM_REC_NAME) {
        const hm_objtab_entry_t *ent = hm__objtab_find(k->tab, ev->u.name.addr);
        if (ent) {
            alloc_t *al = &k->allocs[ent->id];
            int o = oset_get(os, os->v[al->obj].site, ev->u.name.name);
            if (o < 0)
                return o;
            os->v[al->obj].live -= al->size;
            os->v[al->obj].allocations--;
            al->obj = o;
            track_changed(k, rec, ent->addr, ent->size);
            live_add(os, o, al->size, 1);
        }
    }
    if (os->n + 1 > r->npages) {
        if ((unsigned)os->n > SAMP_MAX_OBJ)
            return hm__errf(HM_ETOOBIG, "%s: more than %u objects", r->path, SAMP_MAX_OBJ);
        int np = 2 * (os->n + 1);
        uint64_t(*pages)[100] = realloc(r->pages, (size_t)np * sizeof *r->pages);
        if (!pages)
            return -ENOMEM;
        r->pages = pages;
        memset(r->pages + r->npages, 0, (size_t)(np - r->npages) * sizeof *r->pages);
        r->npages = np;
    }
    return 0;
}

/* Makes room for @p more entries in the run's sample buffer. */
static int buf_grow(run_t *r, size_t more)
{
    size_t c;
    samp_t *b = samp_map(r->nbuf + more + r->cbuf / 8 + 64, &c);
    if (!b)
        return -ENOMEM;
    memcpy(b, r->buf, r->nbuf * sizeof *b);
    samp_unmap(r->buf, r->cbuf);
    r->buf = b;
    r->cbuf = c;
    return 0;
}

/* The object at @p a when its slot does not hold it: from the recent
 * ranges, else from the table (or its sorted copy, which gives the same
 * range); the range found goes into the slot. */
static int find_obj(track_t *k, recent_t *rec, uint64_t a)
{
    range_t *sl = &rec->slot[(a >> SLOT_SHIFT) % SLOTS];
    for (int x = 0; x < RECENT; x++)
        if (a - rec->recent[x].addr < rec->recent[x].size) {
            *sl = slot_part(rec->recent[x], a);
            return sl->obj;
        }
    range_t g;
    if (!k->s_valid && ++k->s_misses >= SNAP_AFTER + hm__objtab_count(k->tab) / 8)
        snap_build(k);
    if (k->s_valid) {
        /* As the table's path below: the object holding a; else the free
         * part of its page around it, up to the next object, and just a
         * when the object below it ends inside its page. */
        ptrdiff_t f = snap_floor(k, a);
        if (f >= 0 && k->s_ent[f].last >= a) {
            g = (range_t){k->s_ent[f].addr, k->s_ent[f].ext, k->s_ent[f].obj};
        } else {
            uint64_t lo = a & ~(uint64_t)4095, hi = lo + 4096;
            size_t nx = (size_t)(f + 1);
            if (nx < k->s_n && k->s_ent[nx].addr < hi)
                hi = k->s_ent[nx].addr;
            if (a > lo && f >= 0 && k->s_ent[f].last >= lo)
                lo = a;
            g = (range_t){lo, hi > lo ? hi - lo : 1, -1};
        }
        rec->recent[rec->next++ % RECENT] = g;
        *sl = slot_part(g, a);
        return g.obj;
    }
    const hm_objtab_entry_t *ent = hm__objtab_find(k->tab, a);
    if (ent) {
        /* A zero-size entry covers its first byte. */
        g = (range_t){ent->addr, ent->size ? ent->size : 1, k->allocs[ent->id].obj};
    } else {
        /* Untracked: the free part of its page around it, so that the next
         * samples there need no lookup either. */
        uint64_t lo = a & ~(uint64_t)4095, hi = lo + 4096;
        const hm_objtab_entry_t *nx = hm__objtab_next(k->tab, a);
        if (nx && nx->addr < hi)
            hi = nx->addr;
        if (a > lo && hm__objtab_overlap(k->tab, lo, a - lo))
            lo = a; /* something below it in its page: just this byte */
        g = (range_t){lo, hi > lo ? hi - lo : 1, -1};
    }
    rec->recent[rec->next++ % RECENT] = g;
    *sl = slot_part(g, a);
    return g.obj;
}

/* The one decoding pass over a run: phase markers and counters, objects
 * (allocations, frees and names, keyed by site and name), the usual latency
 * of hits per level, the pages of each object's misses, and every sample's
 * object, kept compact for bin_run() once the window bounds are known. */
static int walk_run(run_t *r)
{
    track_t k = {0};
    if (hm__objtab_open(&k.tab) < 0)
        return -ENOMEM;
    int rc = 0;
    recent_t rec;
    memset(&rec, 0, sizeof rec);
    uint64_t prev = 0;
    /* Per kind of sample (t5 = level << 2 | load << 1 | store, levels past
     * 7 as 7): its row of the hit-latency histogram (the loads that hit a
     * cache count in their level's, the rest in row 0, which nothing
     * reads), and whether it missed L1; tables rather than branches on the
     * sample's kind, which follows no pattern. */
    uint16_t kind_row[32]; /* the row's offset in the histogram */
    uint32_t kind_miss[32];
    for (unsigned t5 = 0; t5 < 32; t5++) {
        unsigned lv = t5 >> 2, load = t5 >> 1 & 1, store = t5 & 1;
        kind_row[t5] = (uint16_t)((load && lv >= HM_DSRC_L1 && lv <= HM_DSRC_L3 ? lv : 0) * 512);
        kind_miss[t5] = store ? lv != HM_DSRC_L1 : lv >= HM_DSRC_L2;
    }
    /* The kind's two parts from the data source's level and the access,
     * by table too. */
    uint8_t lv_part[256], acc_part[256];
    uint32_t miss_o1[HM_TRACE_BATCH]; /* a batch's misses: object + 1 and page number */
    uint64_t miss_pg[HM_TRACE_BATCH];
    for (unsigned v = 0; v < 256; v++) {
        lv_part[v] = (uint8_t)((v > 7 ? 7 : v) << 2);
        acc_part[v] = (uint8_t)((unsigned)(v == HM_ACCESS_LOAD) << 1 | (unsigned)(v == HM_ACCESS_STORE));
    }
    r->nbuf = 0;
    r->npages = 16;
    r->pages = calloc((size_t)r->npages, sizeof *r->pages);
    if (!r->pages || !(r->buf = samp_map(r->st.records[HM_REC_SAMPLE] + 16, &r->cbuf))) {
        hm__objtab_close(k.tab);
        return -ENOMEM;
    }
    uint32_t nb = hm_trace_nblocks(r->t);
    for (uint32_t b = 0; b < nb && rc == 0; b++) {
        hm_event_list_t el;
        hm_sample_batch_t bt;
        uint32_t ei = 0;
        int got = 0;
        rc = hm_trace_batch_begin(r->t, b, &el);
        const hm_record_t *evs = el.rec;
        const uint64_t *evt = el.time;
        const uint32_t nev = el.n;
        if (rc < 0) {
            rc = hm__errf(rc, "%s: %s%s%s", r->path, hm_strerror(rc), *hm_errdetail() ? ": " : "", hm_errdetail());
            break;
        }
        /* Samples and events merged by time, events first at equal times. */
        uint64_t et = nev ? evt[0] : UINT64_MAX;
        while (rc == 0 && (got = hm_trace_batch_next(r->t, &bt)) > 0) {
            uint32_t n = (uint32_t)got;
            /* The columns in locals: the calls in the loop below cannot
             * then make the compiler load them again from the batch. */
            const uint64_t *b_time = bt.time, *b_addr = bt.addr;
            const uint32_t *b_weight = bt.weight;
            const uint16_t *b_dsrc = bt.dsrc;
            const uint8_t *b_access = bt.access;
            /* Room for these samples (sized from the index, it always is
             * but for escape entries). */
            if (r->cbuf - r->nbuf < (size_t)n && (rc = buf_grow(r, n)) < 0)
                break;
            samp_t *out = r->buf + r->nbuf;
            uint32_t *hist = &r->hist[0][0];
            uint32_t nm = 0;
            for (uint32_t i = 0; i < n; i++) {
                uint64_t st = b_time[i];
                if (HM_UNLIKELY(st >= et)) {
                    r->nbuf = (size_t)(out - r->buf);
                    while (rc == 0 && st >= et) {
                        rc = track_event(r, &k, &rec, &evs[ei++]);
                        et = ei < nev ? evt[ei] : UINT64_MAX;
                    }
                    if (rc < 0)
                        break;
                }
                uint32_t wt = b_weight[i];
                unsigned t5 = (unsigned)lv_part[HM_DSRC_LEVEL(b_dsrc[i])] | acc_part[b_access[i]];
                hist[kind_row[t5] + (wt < 511 ? wt : 511)]++;
                uint64_t a = b_addr[i];
                const range_t *sl = &rec.slot[(a >> SLOT_SHIFT) % SLOTS];
                int o = HM_LIKELY(a - sl->addr < sl->size) ? sl->obj : find_obj(&k, &rec, a);
                uint32_t o1 = (uint32_t)(o + 1);
                /* Pages of the accesses that reach memory: a pages_percent
                 * split moves those, whatever the cache hits do. Untracked
                 * samples count in a row of their own, which nothing reads.
                 * Every sample is written to the list and only a miss
                 * keeps its entry: the misses are counted after the batch,
                 * and the hits, most samples, cost no page number. */
                miss_o1[nm] = o1;
                miss_pg[nm] = a >> 12;
                nm += kind_miss[t5];
                uint64_t dt = st - prev;
                prev = st;
                if (HM_UNLIKELY((dt >> 32) | (wt >> 16) | (o1 > SAMP_SHORT_OBJ))) {
                    r->nbuf = (size_t)(out - r->buf);
                    if (r->cbuf - r->nbuf < (size_t)(n - i) + 2 && (rc = buf_grow(r, n - i + 2)) < 0)
                        break;
                    out = r->buf + r->nbuf;
                    *out++ = (samp_t){(uint32_t)(dt >> 32), SAMP_LONG << 16};
                    *out++ = (samp_t){(uint32_t)dt, wt};
                    *out++ = (samp_t){o1 << 5 | t5, 0};
                } else {
                    *out++ = (samp_t){(uint32_t)dt, wt | (o1 << 5 | t5) << 16};
                }
            }
            if (rc == 0)
                r->nbuf = (size_t)(out - r->buf);
            for (uint32_t m = 0; m < nm; m++)
                r->pages[miss_o1[m]][miss_pg[m] % 100]++;
            if (rc == 0 && HM_UNLIKELY(k.err))
                rc = k.err;
        }
        if (rc == 0 && got < 0)
            rc = hm__errf(got, "%s: %s%s%s", r->path, hm_strerror(got), *hm_errdetail() ? ": " : "", hm_errdetail());
        /* Events after the block's last sample. */
        while (rc == 0 && ei < nev)
            rc = track_event(r, &k, &rec, &evs[ei++]);
    }
    track_free(&k);
    return rc;
}

/* Half a cell (n, w, m, sm or mm, x, hw, sh) as one vector: the cell's
 * eight sums are updated by two vector additions per sample, each lane the
 * same float addition, in the same order, as a scalar update would make. */
typedef float v4f_t __attribute__((vector_size(16)));
_Static_assert(sizeof(hm__est_cell_t) == 8 * sizeof(float) && offsetof(hm__est_cell_t, mm) == 4 * sizeof(float),
               "a cell is eight floats, n first, mm fifth");

/* Puts a run's kept samples into their windows and objects (the union's
 * order); each run fills only its own device's cells. */
static int bin_run(run_t *r)
{
    const hm_estimator_t *e = r->e;
    const int d = r->dev, last = e->nwin - 1, O = e->nobj;
    const uint64_t *bound = r->bound;
    const float base[4] = {r->base[0], r->base[1], r->base[2], r->base[3]};
    hm__est_cell_t *cw = hm__est_cell(e, 0, 0, d); /* window w's cells, this run's device */
    /* This run's cells, first touched by a write: a read of a page never
     * written maps the shared zero page, and the write that follows then
     * copies it and flushes every thread's TLB. */
    (void)hm__prefault(cw, (size_t)e->nwin * (size_t)O * sizeof *cw);
    memset(cw, 0, (size_t)e->nwin * (size_t)O * sizeof *cw);
    /* Offset of each object's cell in a window (o1: the run's object + 1,
     * 0 untracked), without a branch on whether it is tracked. */
    size_t *off = malloc(((size_t)r->os->n + 1) * sizeof *off);
    if (!off)
        return -ENOMEM;
    off[0] = (size_t)(O - 1);
    for (int j = 0; j < r->os->n; j++)
        off[j + 1] = (size_t)r->map[j];
    /* What each kind of sample (t5 = level << 2 | load << 1 | store) adds to
     * a cell, as add[k] + weight * mul[k] for k = t5 << 1 | hitwait, with
     * no branch on the kind, which follows no pattern. A store sample says
     * only whether it hit L1 (as Intel's store event). A store miss moves
     * two lines: the read for ownership and, later, the write-back of the
     * dirty line. A load from memory is memory-bound; a cache hit that
     * took more than hit_wait times that level's usual latency (hitwait)
     * waited for a line on its way from memory, the wait being its weight
     * less that latency. The products are exact (by 0 or 1), so every lane adds what
     * the scalar formula would. */
    v4f_t add[64][2], mul[64][2];
    float wait[32]; /* weight above which a sample of kind t5 waited (hitwait): loads that hit L2 or L3 */
    for (unsigned k = 0; k < 64; k++) {
        unsigned t5 = k >> 1, h = k & 1, lv = t5 >> 2, load = t5 >> 1 & 1, store = t5 & 1;
        int miss = store ? lv != HM_DSRC_L1 : lv >= HM_DSRC_L2;
        int mem = load && (lv == HM_DSRC_MEM || lv == HM_DSRC_LFB || lv == HM_DSRC_REMOTE);
        int ishit = load && lv >= HM_DSRC_L2 && lv <= HM_DSRC_L3;
        wait[t5] = ishit && r->hit_wait < INFINITY ? (float)(r->hit_wait * base[lv & 3]) : INFINITY;
        h = h && ishit;
        add[k][0] = (v4f_t){1.0f, 0.0f, (float)miss, (float)(miss && store)};
        mul[k][0] = (v4f_t){0.0f, 1.0f, 0.0f, 0.0f};
        add[k][1] = (v4f_t){(float)(mem || h), h && !mem ? -base[lv & 3] : 0.0f, (float)h, (float)(store && !miss)};
        mul[k][1] = (v4f_t){0.0f, (float)(mem || h), 0.0f, 0.0f};
    }
    int w = 0;
    uint64_t st = 0;
    /* The next window's start, or UINT64_MAX in the last window: one
     * test a sample. */
    uint64_t next = last > 0 ? bound[1] : UINT64_MAX;
    /* Locals: the cell stores could otherwise alias the run's fields. */
    const samp_t *buf = r->buf;
    const size_t nbuf = r->nbuf;
    for (size_t i = 0; i < nbuf; i++) {
        samp_t s = buf[i];
        uint64_t dt = s.dt;
        uint32_t wu = s.wtag & 0xffff, tag = s.wtag >> 16;
        if (HM_UNLIKELY(tag == SAMP_LONG)) {
            dt = dt << 32 | buf[i + 1].dt;
            wu = buf[i + 1].wtag;
            tag = buf[i + 2].dt;
            i += 2;
        }
        st += dt;
        if (st >= next) {
            while (w < last && st >= bound[w + 1])
                w++;
            cw = hm__est_cell(e, w, 0, d);
            next = w < last ? bound[w + 1] : UINT64_MAX;
        }
        uint32_t o1 = tag >> 5;
        unsigned t5 = tag & 31;
        hm__est_cell_t *c = cw + off[o1];
        float wt = (float)wu;
        unsigned k = t5 << 1 | (wt > wait[t5]);
        v4f_t wv = {wt, wt, wt, wt}, lo, hi;
        memcpy(&lo, &c->n, sizeof lo);
        memcpy(&hi, &c->mm, sizeof hi);
        lo += add[k][0] + wv * mul[k][0];
        hi += add[k][1] + wv * mul[k][1];
        memcpy(&c->n, &lo, sizeof lo);
        memcpy(&c->mm, &hi, sizeof hi);
    }
    free(off);
    return 0;
}

static int cmp_obj(const void *a, const void *b, void *ctx)
{
    const double *s = ctx;
    double x = s[*(const int *)a], y = s[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* Phase label of the innermost open phase after each event, checking that
 * every run has the same sequence of phase events. */
static int check_phases(hm_estimator_t *e, run_t *runs, int n, int **labels_out)
{
    run_t *r0 = &runs[0];
    for (int i = 1; i < n; i++) {
        run_t *r = &runs[i];
        int k = 0;
        for (; k < r0->nev && k < r->nev; k++)
            if (r0->ev_kind[k] != r->ev_kind[k] || strcmp(r0->ev_name[k], r->ev_name[k]))
                return hm__errf(HM_EMISMATCH, "phase marker %d differs: %s '%s' in %s, %s '%s' in %s", k,
                                r0->ev_kind[k] ? "begin" : "end", r0->ev_name[k], base(r0->path),
                                r->ev_kind[k] ? "begin" : "end", r->ev_name[k], base(r->path));
        if (r0->nev != r->nev)
            return hm__errf(HM_EMISMATCH, "%s has %d phase markers, %s has %d", base(r0->path), r0->nev,
                            base(r->path), r->nev);
    }
    /* Labels: 0 is "(no phase)"; then names in order of first appearance. */
    int *labels = calloc((size_t)r0->nev + 1, sizeof *labels);
    char **stack = calloc((size_t)r0->nev + 1, sizeof *stack);
    if (!labels || !stack || !(e->phase_name = calloc((size_t)r0->nev + 1, sizeof *e->phase_name)) ||
        !(e->phase_name[e->nphase] = strdup(NO_PHASE))) {
        free(labels);
        free(stack);
        return -ENOMEM;
    }
    e->nphase++;
    int depth = 0;
    labels[0] = 0;
    for (int k = 0; k < r0->nev; k++) {
        if (r0->ev_kind[k]) {
            stack[depth++] = r0->ev_name[k];
        } else {
            int j = depth - 1;
            while (j >= 0 && strcmp(stack[j], r0->ev_name[k]))
                j--;
            if (j >= 0)
                depth = j; /* closes it and anything left open inside */
        }
        const char *nm = depth ? stack[depth - 1] : NO_PHASE;
        int l = 0;
        while (l < e->nphase && strcmp(e->phase_name[l], nm))
            l++;
        if (l == e->nphase) {
            if (!(e->phase_name[e->nphase] = strdup(nm))) {
                free(labels);
                free(stack);
                return -ENOMEM;
            }
            e->nphase++;
        }
        labels[k + 1] = l;
    }
    free(stack);
    *labels_out = labels;
    return 0;
}

/* Sorts the objects by samples in the reference run, hottest first, and
 * drops those that hold nothing. 0 or -ENOMEM, e unchanged then. */
static int sort_objects(hm_estimator_t *e, oset_t *os, int n)
{
    int O = os->n;
    double *hot = calloc((size_t)O + 1, sizeof *hot);
    int *ord = calloc((size_t)O + 1, sizeof *ord);
    hm__est_obj_t *nobj = calloc((size_t)e->nobj, sizeof *nobj);
    hm__est_cell_t *tmp = calloc((size_t)O + 1, sizeof *tmp);
    if (!hot || !ord || !nobj || !tmp) {
        free(hot);
        free(ord);
        free(nobj);
        free(tmp);
        return -ENOMEM;
    }
    for (int w = 0; w < e->nwin; w++)
        for (int o = 0; o < O; o++)
            hot[o] += hm__est_cell(e, w, o, e->ref)->n;
    /* A site's unnamed object that was named right after allocation holds
     * nothing: it is dropped, and its samples (if any) stay untracked. */
    int keep = 0;
    for (int o = 0; o < O; o++) {
        HM_DEBUG("estimate: object %d site %016llx name %s allocations %llu peak %llu samples %.0f", o,
                 (unsigned long long)os->v[o].site, os->v[o].name ? os->v[o].name : "-",
                 (unsigned long long)os->v[o].allocations, (unsigned long long)os->v[o].peak, hot[o]);
        if (os->v[o].allocations > 0 || hot[o] > 0)
            ord[keep++] = o;
    }
    qsort_r(ord, (size_t)keep, sizeof *ord, cmp_obj, hot);
    /* The names are moved (the set no longer needs them): nothing after
     * this point can fail. */
    for (int j = 0; j < keep; j++) {
        int o = ord[j];
        nobj[j] = e->obj[o];
        nobj[j].site = os->v[o].site;
        nobj[j].name = os->v[o].name;
        nobj[j].source = os->v[o].source;
        os->v[o].name = os->v[o].source = NULL;
        nobj[j].size = os->v[o].peak;
        nobj[j].allocations = (os->v[o].allocations + (uint64_t)n - 1) / (uint64_t)n;
        nobj[j].samples = hot[o];
    }
    int nn = keep + 1;
    nobj[keep] = e->obj[O];
    /* The cells reordered in place, a window at a time through a copy
     * of it: window w's new cells lie at or below its old ones, over
     * windows already copied (a second array the size of all cells
     * would cost its page faults). */
    size_t row = (size_t)(O + 1);
    for (size_t dw = 0; dw < (size_t)e->ndev * (size_t)e->nwin; dw++) {
        memcpy(tmp, &e->cell[dw * row], row * sizeof *tmp);
        hm__est_cell_t *dst = &e->cell[dw * (size_t)nn];
        for (int j = 0; j < keep; j++)
            dst[j] = tmp[ord[j]];
        /* Untracked, plus whatever the dropped objects got. */
        hm__est_cell_t *u = &dst[keep];
        memset(u, 0, sizeof *u);
        for (int o = 0; o <= O; o++) {
            if (o < O && (os->v[o].allocations > 0 || hot[o] > 0))
                continue;
            const hm__est_cell_t *src = &tmp[o];
            u->n += src->n, u->w += src->w, u->m += src->m, u->x += src->x;
            u->sm += src->sm, u->mm += src->mm, u->hw += src->hw, u->sh += src->sh;
        }
    }
    free(tmp);

    free(e->obj);
    e->obj = nobj;
    e->nobj = nn;
    for (int w = 0; w < e->nwin; w++)
        nobj[keep].samples += hm__est_cell(e, w, keep, e->ref)->n;
    free(hot);
    free(ord);
    return 0;
}

/* One summary being built: the runs, the union of their objects and what
 * each step hands the next. */
typedef struct {
    hm_estimator_t *e;
    run_t *runs;
    int n;
    const hm_estimator_opts_t *opts;
    uint32_t target;          /* windows asked for */
    oset_t os;                /* the objects of all runs */
    int *labels;              /* phase label of each region (check_phases) */
    int *nw;                  /* windows per region */
    int nreg;                 /* regions: phase markers + 1 */
} build_t;

/* Opens each run and checks it against the others: complete, sampled, on a
 * device of its own, of the same command line and the same machine; takes
 * its device's name, time, period and figures. 0 or an error (said). */
static int open_runs(build_t *b, const char *const *paths)
{
    hm_estimator_t *e = b->e;
    run_t *runs = b->runs;
    int rc;
    for (int i = 0; i < b->n; i++) {
        run_t *r = &runs[i];
        r->path = paths[i];
        r->dev = i;
        rc = hm_trace_open(&r->t, paths[i]);
        if (rc < 0)
            return hm__errf(rc, "%s: %s%s%s", paths[i], hm_strerror(rc), *hm_errdetail() ? ": " : "", hm_errdetail());
        r->meta = hm_trace_meta(r->t);
        hm_trace_stats(r->t, &r->st);
        if (!r->st.has_end)
            return hm__errf(HM_ETRUNC, "%s: the run has no end record (cut short?)", paths[i]);
        if (r->st.records[HM_REC_SAMPLE] == 0)
            return hm__errf(HM_ETRUNC, "%s: the trace holds no samples", paths[i]);
        if (!r->meta->device || !*r->meta->device)
            return hm__errf(HM_EMISMATCH, "%s: the trace does not say which device held the data (record with --bind or sim --device)", paths[i]);
        for (int j = 0; j < i; j++) {
            if (!strcmp(runs[j].meta->device, r->meta->device))
                return hm__errf(HM_EMISMATCH, "%s and %s are both runs on device '%s': give one trace per device",
                                paths[j], paths[i], r->meta->device);
            if (!same_argv(runs[j].meta->argv, r->meta->argv))
                return hm__errf(HM_EMISMATCH, "%s and %s are runs of different command lines", paths[j], paths[i]);
            /* Runs that tracked objects from different sizes hold different
             * objects (and a placement moves different data in each). A
             * trace without the key (older writers) is taken as it is. */
            if (runs[j].meta->min_size && r->meta->min_size && runs[j].meta->min_size != r->meta->min_size)
                return hm__errf(HM_EMISMATCH,
                                "%s and %s track objects from different sizes (%llu and %llu bytes): record or "
                                "simulate them with the same --min-size",
                                paths[j], paths[i], (unsigned long long)runs[j].meta->min_size,
                                (unsigned long long)r->meta->min_size);
        }
        /* Runs of different machines: their times and figures do not
         * combine into one machine's estimate. */
        if (i > 0) {
            ident_t x, y;
            identity(runs[0].meta, &x);
            identity(r->meta, &y);
            if ((x.sim >= 0 && y.sim >= 0 && x.sim != y.sim) || differ(x.name, y.name) || differ(x.host, y.host) ||
                differ(x.cpu, y.cpu) || differ(x.devices, y.devices)) {
                char da[1024], db[1024];
                describe(&x, da, sizeof da);
                describe(&y, db, sizeof db);
                return hm__errf(HM_EMISMATCH, "%s and %s are runs of different machines: %s; %s", paths[0], paths[i],
                                da, db);
            }
        }
        if (!(e->dev_name[i] = strdup(r->meta->device)))
            return -ENOMEM;
        e->runtime_ns[i] = (double)r->st.end.total_time * (r->meta->clock_ns_per_unit > 0 ? r->meta->clock_ns_per_unit : 1.0);
        e->period[i] = r->meta->period ? (double)r->meta->period : 1.0;
        if ((rc = device_figures(e, i, b->opts && b->opts->machine_json ? b->opts->machine_json : r->meta->machine_json,
                                 r->meta->device, r->meta->host_json)) < 0)
            return rc;
        /* The core clock: --machine's, else the runs' own machine's (a
         * machine file that describes the devices need not give it). */
        if (i == 0)
            e->core_ghz = b->opts && b->opts->machine_json ? machine_clock(b->opts->machine_json) : 0;
        if (!(e->core_ghz > 0))
            e->core_ghz = machine_clock(r->meta->machine_json);
        if (!(r->os = calloc(1, sizeof *r->os)))
            return -ENOMEM;
    }
    return 0;
}

/* Each run's usual latency of a hit per cache level (the hit_base
 * percentile of its histogram) and the ratio above which a hit waited. */
static void hit_bases(build_t *b)
{
    double pct, ratio;
    hm__est_hit_figures(&pct, &ratio);
    for (int i = 0; i < b->n; i++) {
        b->runs[i].hit_wait = ratio;
        for (int lv = 1; lv < 4; lv++) {
            uint64_t tot = 0, acc = 0;
            for (int k = 0; k < 512; k++)
                tot += b->runs[i].hist[lv][k];
            /* Counts well below 2^53 / 100: exact in doubles. */
            for (int k = 0; k < 512 && tot; k++)
                if ((double)(acc += b->runs[i].hist[lv][k]) * 100 >= pct * (double)tot) {
                    b->runs[i].base[lv] = (float)k;
                    break;
                }
        }
    }
}

/* The default device is the machine's first device when the traces say;
 * otherwise the first trace's. Devices keep the traces' order. The
 * reference run is the slowest. 0 or -ENOMEM. */
static int default_and_reference(build_t *b)
{
    hm_estimator_t *e = b->e;
    e->def = 0;
    const char *mj = b->opts && b->opts->machine_json ? b->opts->machine_json : b->runs[0].meta->machine_json;
    if (mj) {
        json_t *m = json_loads(mj, 0, NULL); /* parsed before: fails only for want of memory */
        if (!m)
            return -ENOMEM;
        json_t *d0 = json_array_get(json_object_get(m, "devices"), 0);
        const char *nm = json_string_value(json_object_get(d0, "name"));
        for (int i = 0; nm && i < b->n; i++)
            if (!strcmp(nm, e->dev_name[i]))
                e->def = i;
        json_decref(m);
    }
    e->ref = 0;
    for (int i = 1; i < b->n; i++)
        if (e->runtime_ns[i] > e->runtime_ns[e->ref])
            e->ref = i;
    return 0;
}

/* Regions between phase markers; windows in proportion to the slowest
 * run's time in each, at least one per region. 0 or -ENOMEM. */
static int plan_windows(build_t *b)
{
    hm_estimator_t *e = b->e;
    b->nreg = b->runs[0].nev + 1;
    run_t *rr = &b->runs[e->ref];
    double total = e->runtime_ns[e->ref] > 0 ? e->runtime_ns[e->ref] : 1;
    if (!(b->nw = calloc((size_t)b->nreg, sizeof *b->nw)))
        return -ENOMEM;
    e->nwin = 0;
    for (int g = 0; g < b->nreg; g++) {
        uint64_t a = g ? rr->ev_time[g - 1] : 0, z = g < rr->nev ? rr->ev_time[g] : rr->st.end.total_time;
        double share = (double)(z > a ? z - a : 0) / total;
        b->nw[g] = (int)lround(share * b->target);
        if (b->nw[g] < 1)
            b->nw[g] = 1;
        e->nwin += b->nw[g];
    }
    return 0;
}

/* Objects: the union over runs of (site, name); peak sizes are the
 * largest of the runs', allocation counts their sum (divided later).
 * Then the estimator's objects and cells. 0 or an error. */
static int union_objects(build_t *b)
{
    hm_estimator_t *e = b->e;
    oset_t *os = &b->os;
    for (int i = 0; i < b->n; i++) {
        oset_t *lo = b->runs[i].os;
        if (!(b->runs[i].map = calloc((size_t)lo->n + 1, sizeof *b->runs[i].map)))
            return -ENOMEM;
        for (int k = 0; k < lo->n; k++) {
            int g = oset_get(os, lo->v[k].site, lo->v[k].name);
            if (g < 0)
                return g;
            b->runs[i].map[k] = g;
            /* A named object's source is its site's (the unnamed entry's). */
            const char *src = lo->v[k].source;
            for (int q = 0; !src && q < lo->n; q++)
                if (lo->v[q].site == lo->v[k].site && lo->v[q].source)
                    src = lo->v[q].source;
            if (src && !os->v[g].source && !(os->v[g].source = strdup(src)))
                return -ENOMEM;
            if (lo->v[k].peak > os->v[g].peak)
                os->v[g].peak = lo->v[k].peak;
            os->v[g].allocations += lo->v[k].allocations;
        }
    }
    if (!(e->obj = calloc((size_t)os->n + 1, sizeof *e->obj)))
        return -ENOMEM;
    e->nobj = os->n + 1;
    return hm__est_alloc(e);
}

/* Window boundaries per run (equal instruction counts within a region
 * where the run has counters, else equal times), each window's phase,
 * region and instructions, and each run's time in each window. 0 or
 * -ENOMEM. */
static int window_bounds(build_t *b)
{
    hm_estimator_t *e = b->e;
    int n = b->n;
    for (int i = 0; i < n; i++) {
        run_t *r = &b->runs[i];
        if (!(r->bound = calloc((size_t)e->nwin + 1, sizeof *r->bound)))
            return -ENOMEM;
        int w = 0;
        for (int g = 0; g < b->nreg; g++) {
            uint64_t a = g ? r->ev_time[g - 1] : 0, z = g < r->nev ? r->ev_time[g] : r->st.end.total_time;
            if (z < a)
                z = a;
            double ia = instr_at(r, a), ib = instr_at(r, z);
            int by_instr = r->nip >= 2 && ib > ia;
            for (int j = 0; j < b->nw[g]; j++, w++) {
                double f = (double)j / b->nw[g];
                r->bound[w] = j == 0 ? a : by_instr ? time_at(r, ia + f * (ib - ia), a, z)
                                                    : a + (uint64_t)(f * (double)(z - a));
                e->win[w].phase = b->labels[g];
                e->win[w].region = g;
                if (i == e->ref)
                    e->win[w].instructions = by_instr ? (ib - ia) / b->nw[g] : 0;
            }
        }
        r->bound[e->nwin] = r->st.end.total_time;
        for (w = 0; w < e->nwin; w++) {
            uint64_t a = r->bound[w], z = r->bound[w + 1] > a ? r->bound[w + 1] : a;
            e->t[(size_t)w * n + i] = (double)(z - a) * (r->meta->clock_ns_per_unit > 0 ? r->meta->clock_ns_per_unit : 1.0);
        }
    }
    return 0;
}

/* Each object's pages of sampled misses, summed over the runs. */
static void page_counts(build_t *b)
{
    for (int i = 0; i < b->n; i++)
        for (int k = 0; k < b->runs[i].os->n; k++)
            for (int q = 0; q < 100; q++)
                /* As a float count would have it: exact up to 2^24, where
                 * adding one no longer changes a float. */
                b->e->obj[b->runs[i].map[k]].pages[q] +=
                    (float)(b->runs[i].pages[k + 1][q] < (1u << 24) ? b->runs[i].pages[k + 1][q] : (1u << 24));
}

/* The scratch of a build (the estimator is the caller's or freed apart). */
static void build_free(build_t *b)
{
    for (int k = 0; k < b->os.n; k++) {
        free(b->os.v[k].name);
        free(b->os.v[k].source);
    }
    free(b->os.v);
    for (int i = 0; i < b->n && b->runs; i++)
        run_free(&b->runs[i]);
    free(b->runs);
    free(b->labels);
    free(b->nw);
}

HM_API int hm_estimator_open(hm_estimator_t **out, const char *const *paths, int n, const hm_estimator_opts_t *opts)
{
    *out = NULL;
    hm__errclear();
    if (n < 2)
        return hm__errf(HM_EUSAGE, "%d trace%s given: one trace per device is needed, at least two", n,
                        n == 1 ? "" : "s");
    if (n > 64)
        return hm__errf(HM_EUSAGE, "%d traces given: at most 64 devices", n);
    build_t b = {.n = n, .opts = opts, .target = opts && opts->windows ? opts->windows : 1000};
    b.e = calloc(1, sizeof *b.e);
    b.runs = calloc((size_t)n, sizeof *b.runs);
    if (!b.e || !b.runs) {
        free(b.e);
        free(b.runs);
        return -ENOMEM;
    }
    int rc = 0;
    if (opts && opts->machine_json) {
        json_t *m = NULL;
        if ((rc = hm__json_load_string("machine description", opts->machine_json, &m)) < 0) {
            free(b.runs);
            free(b.e);
            return rc;
        }
        json_decref(m);
    }
    b.e->ndev = n;
    /* The one decoding pass over every run (walk_run) gives phase markers,
     * counters, objects, the usual latency of hits per cache level, and
     * the samples kept compact until the windows are known; the second
     * (bin_run) puts the kept samples into cells, objects in the union's
     * order, sorted afterwards. */
    if ((rc = hm__est_alloc_devices(b.e)) < 0 || (rc = open_runs(&b, paths)) < 0 ||
        (rc = for_runs(b.runs, n, walk_run, WALK_PER_THREAD)) < 0)
        goto out;
    hit_bases(&b);
    if ((rc = default_and_reference(&b)) < 0 || (rc = check_phases(b.e, b.runs, n, &b.labels)) < 0 ||
        (rc = plan_windows(&b)) < 0 || (rc = union_objects(&b)) < 0 || (rc = window_bounds(&b)) < 0)
        goto out;
    free(b.nw);
    b.nw = NULL;
    for (int i = 0; i < n; i++)
        b.runs[i].e = b.e;
    if ((rc = for_runs(b.runs, n, bin_run, BIN_PER_THREAD)) < 0)
        goto out;
    page_counts(&b);
    if ((rc = sort_objects(b.e, &b.os, n)) < 0 || (rc = hm__est_prepare(b.e)) < 0 ||
        (rc = hm__est_figures_note(b.e)) < 0)
        goto out;
    *out = b.e;
    b.e = NULL; /* the caller's now; the rest is scratch */
out:
    build_free(&b);
    hm_estimator_close(b.e);
    return rc;
}
