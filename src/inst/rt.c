/* libhetmem_inst runtime: starts the simulator inside a hetmem-cc program
 * when `hetmem sim` runs it, tracks allocations and libc bulk operations,
 * and writes the report (and the sampled trace) at exit.
 *
 * `hetmem sim` passes its settings in the environment:
 *   HETMEM_SIM_MACHINE    machine file (required; unset = runtime inactive)
 *   HETMEM_SIM_PLACEMENT  placement file, or
 *   HETMEM_SIM_DEVICE     device holding all data
 *   HETMEM_SIM_RESULT     where the JSON report goes (required)
 *   HETMEM_SIM_TRACE      sampled trace output (optional)
 *   HETMEM_SIM_PERIOD     sample period (default 1000)
 *   HETMEM_SIM_PROGRESS   1: progress line on stderr
 *   HETMEM_SIM_ARGV0      argv[0] as given (the program's own is padded)
 * The report is how the runtime "reports in": a program that does not
 * write it was not built with hetmem-cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include "inst.h"
#include "common/env.h"
#include "placement/placement_int.h"
#include "hetmem/trace.h" /* HM_TRACE_PERIOD_MAX; the writer only with HM_HAVE_TRACE */

/* A marker `hetmem sim` looks for in the binary before running it. */
HM_API __attribute__((used)) const char hm_inst_marker[] = "hetmem-inst-runtime-v1";

#define SITE_DEPTH HM_SITE_DEPTH /* one depth for sim, record and run (common.h) */
#define SITE_WALK 16 /* frames walked to find SITE_DEPTH of the program's own */
#define BULK_CALLOC_LIMIT (128u << 10) /* larger callocs get fresh zero pages */

__thread hm_sim_t *hm__inst_sim __attribute__((tls_model("initial-exec")));
int hm__inst_on;
int hm__inst_busy;

static struct {
    int started, finished;
    hm_sim_machine_t *m;
    hm_placement_t *pl;
    const char *result;
    char *error;
#ifdef HM_HAVE_TRACE
    hm_trace_writer_t *tw;
    uint64_t last_counter;
#endif
    int trace_err;
    int progress;
    pid_t pid;
    uint64_t min_size; /* smaller allocations are not placed nor traced, as under hetmem run */
} rt;

/* Diagnostics are written with write(2): no stdio inside an interposer. */
static void say(const char *msg)
{
    ssize_t r = write(2, msg, strlen(msg));
    (void)r;
}

static void set_error(const char *fmt, const char *a, const char *b)
{
    if (rt.error)
        return;
    size_t n = strlen(fmt) + strlen(a) + (b ? strlen(b) : 0) + 1;
    rt.error = malloc(n);
    if (rt.error)
        snprintf(rt.error, n, fmt, a, b ? b : "");
}

/* Writes the JSON report for `hetmem sim` (atomically: temp file, rename).
 * @p rep is the simulator's report or NULL (error, or no simulator). */
static void write_result(char *rep)
{
    if (!rt.result)
        return;
    json_t *j = rep ? json_loads(rep, 0, NULL) : json_object();
    if (!j)
        j = json_object();
    if (rt.error)
        json_object_set_new(j, "error", json_string(rt.error));
    if (rt.trace_err)
        json_object_set_new(j, "trace_error", json_string(hm_strerror(rt.trace_err)));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", rt.result);
    if (json_dump_file(j, tmp, JSON_PRESERVE_ORDER | JSON_INDENT(2) | JSON_REAL_PRECISION(17)) == 0)
        rename(tmp, rt.result);
    json_decref(j);
}

static int exit_status; /* wait(2)-style, from on_exit() */
static const char *site_source(uint64_t site);
static void global_src_add(uint64_t site, uintptr_t addr, const char *name);
static void site_name_all(void);
static int site_src_rules;

static void finish(void)
{
    /* A forked child exits through here too; only the simulated process reports. */
    if (!rt.started || getpid() != rt.pid || __atomic_exchange_n(&rt.finished, 1, __ATOMIC_ACQ_REL))
        return;
    hm__inst_on = 0;
    hm__inst_busy = 1;
    if (rt.progress) {
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
        say("\r\033[K");
    }
    /* Sites are named now (site_src_t), before the report lists them and
     * the trace is closed. */
    site_name_all();
    /* The report drains the outstanding misses: its run time is the end
     * time the trace records. */
    char *rep = hm__inst_sim && !rt.error ? hm_sim_report(hm__inst_sim) : NULL;
#ifdef HM_HAVE_TRACE
    if (rt.tw) {
        hm_trace_end_t end = {0, exit_status};
        if (hm__inst_sim) {
            end.total_time = hm_sim_now_ns(hm__inst_sim);
            hm_counter_t c = {end.total_time, hm_sim_instruction_count(hm__inst_sim), HM_COUNTER_INSTRUCTIONS, 0};
            int rc = hm_trace_write_counter(rt.tw, &c);
            if (rc < 0 && !rt.trace_err)
                rt.trace_err = rc;
        }
        int rc = hm_trace_writer_close(rt.tw, &end);
        rt.tw = NULL;
        if (rc < 0 && !rt.trace_err)
            rt.trace_err = rc;
    }
#endif
    write_result(rep);
    free(rep);
    hm__inst_sim = NULL;
}

/* What a refused threaded run tells the user to do. */
#define HM_THREADS_HINT                                                                               \
    "multi-threaded program not supported: a second thread ran instrumented code (hetmem sim models " \
    "one thread): run it with one thread (OMP_NUM_THREADS=1, or the program's own thread option), or " \
    "build it without -fopenmp"

/* Called by the coverage hook in a thread other than the simulated one
 * while a simulation runs: the report says why and the process ends at
 * once (the simulated thread never sees the other's accesses, so going on
 * would give a wrong answer). */
void hm__inst_foreign_thread(void)
{
    if (__atomic_exchange_n(&rt.finished, 1, __ATOMIC_ACQ_REL))
        for (;;) /* the simulated thread is already reporting and exiting */
            pause();
    hm__inst_on = 0;
    set_error("%s%s", HM_THREADS_HINT, NULL);
    write_result(NULL);
    _exit(1);
}

__attribute__((destructor)) static void fini(void) { finish(); }

/* on_exit() rather than atexit(): it also gives the exit status, which the
 * trace's end record carries. Registered first, it runs after the
 * program's own handlers. */
static void finish_status(int status, void *arg)
{
    (void)arg;
    exit_status = (status & 0xff) << 8;
    finish();
}

/* ---- sampled trace */

#ifdef HM_HAVE_TRACE
static void on_sample(void *ctx, const hm_sample_t *s)
{
    (void)ctx;
    if (!rt.tw || rt.trace_err)
        return;
    int busy = hm__inst_busy;
    hm__inst_busy = 1;
    int rc = hm_trace_write_sample(rt.tw, s);
    uint64_t ic = hm_sim_instruction_count(hm__inst_sim);
    if (rc == 0 && ic - rt.last_counter >= (1u << 20)) {
        hm_counter_t c = {s->time, ic, HM_COUNTER_INSTRUCTIONS, 0};
        rc = hm_trace_write_counter(rt.tw, &c);
        rt.last_counter = ic;
    }
    if (rc < 0)
        rt.trace_err = rc;
    hm__inst_busy = busy;
}
#endif

/* v / 10^dec with dec decimals, by hand: snprintf is not async-signal-safe
 * (and "%f" may allocate), and this runs in a SIGALRM handler. */
static char *put_fixed(char *p, uint64_t v, int dec)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v || n <= dec);
    while (n > 0) {
        if (n == dec)
            *p++ = '.';
        *p++ = d[--n];
    }
    return p;
}

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static void progress_tick(int sig)
{
    (void)sig;
    int saved = errno;
    hm_sim_t *s = hm__inst_sim;
    if (!s)
        return;
    char buf[160], *p = buf;
    uint64_t ic, ns;
    hm_sim_progress(s, &ic, &ns);
    p = put_str(p, "\r[hetmem sim] ");
    p = put_fixed(p, ic / 100000, 1);
    p = put_str(p, " M instructions, ");
    p = put_fixed(p, ns / 1000, 3);
    p = put_str(p, " ms simulated\033[K");
    ssize_t r = write(2, buf, (size_t)(p - buf));
    (void)r;
    errno = saved;
}

static char *read_cmdline_argv(char ***argv_out)
{
    int fd = open("/proc/self/cmdline", O_RDONLY);
    if (fd < 0)
        return NULL;
    char *buf = calloc(1, 8192);
    ssize_t n = buf ? read(fd, buf, 8191) : -1;
    close(fd);
    if (n <= 0) {
        free(buf);
        return NULL;
    }
    int cnt = 0;
    for (ssize_t i = 0; i < n; i++)
        cnt += buf[i] == 0;
    char **argv = calloc((size_t)cnt + 2, sizeof(char *));
    int k = 0;
    for (ssize_t i = 0; argv && i < n; i += (ssize_t)strlen(buf + i) + 1)
        argv[k++] = buf + i;
    /* hetmem sim pads argv[0] (a fixed stack layout); the trace records
     * the command as the user gave it */
    const char *a0 = hm__env_get(HM_ENV_SIM_ARGV0);
    if (argv && k && a0 && *a0)
        argv[0] = (char *)a0;
    *argv_out = argv;
    return buf;
}

/* Global and static arrays are objects, placed and reported like heap
 * objects and named by their symbol: what NPB codes and Fortran COMMON
 * blocks and main programs keep their arrays in. Which ones is
 * hm__placement_globals()'s rule, the same in hetmem record and hetmem
 * run (src/preload/bind.c). Without a placement the program's file is
 * mapped only for the scan unless it has such arrays, so a program without
 * them runs on the addresses it had before. */
static int on_global(void *ctx, int module, uintptr_t addr, size_t size, const char *name)
{
    (void)module;
    hm_sim_t *s = ctx;
    uint64_t site = hm__global_site(name);
    global_src_add(site, addr, name); /* before the object is matched: a file:line rule may name it */
    hm_sim_alloc(s, addr, size, site);
    hm_sim_name(s, addr, name);
#ifdef HM_HAVE_TRACE
    if (rt.tw) {
        hm_alloc_t a = {hm_sim_now_ns(s), addr, size, site, 0};
        hm_trace_write_alloc(rt.tw, &a);
        hm_trace_write_name(rt.tw, hm_sim_now_ns(s), addr, name);
    }
#endif
    return 1;
}

void hm__inst_init(void)
{
    if (rt.started)
        return;
    rt.started = 1;
    const char *machine = hm__env_get(HM_ENV_SIM_MACHINE);
    rt.result = hm__env_get(HM_ENV_SIM_RESULT);
    if (!machine || !rt.result)
        return; /* not under `hetmem sim`: run as a plain program */
    rt.pid = getpid();
    /* From here on the runtime allocates from its own heap (heap.c): the
     * program's allocations land where they would without the runtime,
     * with or without a trace. */
    hm__rtheap_init();
    hm__inst_busy = 1;
    /* jansson seeds its hash tables from /dev/urandom by default; a fixed
     * seed keeps the runtime's own behaviour (the order of its frees, when
     * its heap could not be reserved and it shares the program's) the same
     * from run to run. */
    json_object_seed(0x686d73696dull);
    int rc = hm_sim_machine_load(&rt.m, machine);
    if (rc < 0) {
        set_error("%s: %s", hm_strerror(rc), hm_errdetail());
        goto out;
    }
    const char *plp = hm__env_get(HM_ENV_SIM_PLACEMENT), *devname = hm__env_get(HM_ENV_SIM_DEVICE);
    int dev = -1;
    if (plp && *plp) {
        rc = hm_placement_load(&rt.pl, plp, hm_sim_machine_device_names(rt.m), hm_sim_machine_ndevices(rt.m));
        if (rc >= 0)
            site_src_rules = hm__placement_has_sources(rt.pl);
    } else if (devname && *devname) {
        rc = dev = hm_sim_machine_device_index(rt.m, devname);
    }
    if (rc < 0) {
        set_error("%s: %s", hm_strerror(rc), hm_errdetail());
        goto out;
    }
    rt.min_size = HM_MIN_OBJECT_SIZE;
    const char *ms = hm__env_get(HM_ENV_MIN_SIZE);
    if (ms && hm__parse_size(ms, &rt.min_size) != 0) {
        char m[160];
        snprintf(m, sizeof m, "%s=%.40s", hm__env_name(HM_ENV_MIN_SIZE), ms);
        set_error("%s: not a size (bytes, or with K, M or G)", m, NULL);
        goto out;
    }
    hm_sim_t *s;
    if ((rc = hm_sim_open(&s, rt.m, rt.pl, dev)) < 0) {
        set_error("%s: %s", hm_strerror(rc), hm_errdetail());
        goto out;
    }
    hm_sim_set_site_source(s, site_source);
    const char *tp = hm__env_get(HM_ENV_SIM_TRACE);
    uint64_t period = 1000;
    const char *ps = hm__env_get(HM_ENV_SIM_PERIOD);
    if (ps && hm__parse_u64_in(ps, 1, HM_TRACE_PERIOD_MAX, &period) != 0) {
        char why[96], m[160];
        snprintf(m, sizeof m, "%s=%.40s: %s", hm__env_name(HM_ENV_SIM_PERIOD), ps,
                 hm__range_why(why, sizeof why, 1, HM_TRACE_PERIOD_MAX));
        set_error("%s%s", m, NULL);
        hm_sim_close(s);
        goto out;
    }
    if (tp && *tp) {
#ifdef HM_HAVE_TRACE
        char **argv = NULL;
        char *argbuf = read_cmdline_argv(&argv);
        hm_trace_meta_t meta = {"hetmem-sim " HETMEM_VERSION, "sim", 1.0, "sim", "loads+stores", period,
                                devname && *devname ? devname : NULL, hm_sim_machine_json(rt.m),
                                (const char *const *)argv, NULL, rt.min_size};
        rc = hm_trace_writer_open(&rt.tw, tp, &meta);
        free(argv);
        free(argbuf);
        if (rc < 0) {
            set_error("%s: %s", hm_strerror(rc), hm_errdetail());
            hm_sim_close(s);
            goto out;
        }
        hm_sim_set_sampler(s, period, on_sample, NULL);
#else
        char **argv = NULL;
        free(read_cmdline_argv(&argv));
        free(argv);
        set_error("%s%s", "trace output is not built into this runtime", NULL);
        hm_sim_close(s);
        goto out;
#endif
    }
    const char *pg = hm__env_get(HM_ENV_SIM_PROGRESS);
    if (pg && strcmp(pg, "1") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = progress_tick;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{1, 0}, {1, 0}};
        setitimer(ITIMER_REAL, &it, NULL);
        rt.progress = 1;
    }
    int dropped = 0;
    hm__placement_globals(rt.pl, rt.pl ? 0 : HM_MODOBJ_UNCACHED, on_global, s, &dropped);
    if (dropped)
        HM_WARN("%d global arrays beyond the first %d are left with the static data", dropped, HM_MODULE_KEPT);
    hm__inst_sim = s;
    hm__inst_on = 1;
out:
    on_exit(finish_status, NULL);
    hm__inst_busy = 0;
    if (rt.error) {
        write_result(NULL);
        rt.finished = 1;
        _exit(1);
    }
}

/* ---- phases and names (include/hetmem/hetmem.h) */

#ifdef HM_HAVE_TRACE
static uint64_t now_ns(void) { return hm__inst_sim ? hm_sim_now_ns(hm__inst_sim) : 0; }
#endif

static void phase(int begin, const char *name)
{
    if (!hm__inst_sim || !name)
        return;
    hm__inst_busy = 1;
    hm_sim_phase(hm__inst_sim, begin, name);
#ifdef HM_HAVE_TRACE
    if (rt.tw)
        hm_trace_write_phase(rt.tw, begin, now_ns(), 0, name);
#endif
    hm__inst_busy = 0;
}

HM_API void hm_rt_phase_begin(const char *name) { phase(1, name); }
HM_API void hm_rt_phase_end(const char *name) { phase(0, name); }

HM_API void hm_rt_name(const void *ptr, const char *name)
{
    if (!hm__inst_sim || !name)
        return;
    hm__inst_busy = 1;
    hm_sim_name(hm__inst_sim, (uintptr_t)ptr, name);
#ifdef HM_HAVE_TRACE
    if (rt.tw)
        hm_trace_write_name(rt.tw, now_ns(), (uintptr_t)ptr, name);
#endif
    hm__inst_busy = 0;
}

/* ---- threads: one simulated thread only
 *
 * Threads may be created: one that runs no instrumented code (an MPI
 * library's progress thread, a helper inside an uninstrumented library)
 * does not touch the simulation, whose state is the creating thread's
 * (hm__inst_sim is thread-local). A thread that runs instrumented code is
 * refused at its first basic block (hm__inst_foreign_thread()). */

/* ---- allocations: call sites from a frame-pointer walk */

extern void *__libc_stack_end;

/* Call-site id of the caller of the interposed function: return addresses
 * from the frame-pointer chain (hetmem-cc builds keep frame pointers), the
 * allocator's and the standard library's own frames skipped
 * (hm__site_skip: std::vector's growth function is no site, its caller
 * is), the first SITE_DEPTH links of the others' source chain hashed by
 * hm__site_id, as hetmem record and hetmem run do (libdw reads the DWARF
 * as the runtime, hm__inst_busy set: its allocations come from the
 * runtime's own heap, heap.c, not the program's). Cached by the raw
 * addresses walked. */
/* Site ids seen, with their frames and, once named, their source chain
 * (empty when the program has no line tables there): placements name
 * sites by it, and the report and the trace show it. Naming reads the
 * program's DWARF with libdw (its allocations come from the runtime's own
 * heap), which is slow, so it is put off to the end of the run (the
 * report, the trace's site records) unless the placement has a rule that
 * names a site by its source line.
 * Open addressing; a site past the table's capacity has no source. */
#define SITE_SRC_LEN 256
static struct site_src {
    uint64_t site;
    uintptr_t pcs[SITE_DEPTH]; /* a global array's: its address */
    int n, named;
    const char *global; /* a global array's symbol (hm__module_objects keeps it) */
    char src[SITE_SRC_LEN];
} hm_site_srcs[4096];
/* site_src_rules (declared above): the placement names sites by source line */

static struct site_src *site_src_find(uint64_t site)
{
    for (size_t i = 0, h = (size_t)(site % HM_ARRAY_LEN(hm_site_srcs)); i < 64; i++) {
        struct site_src *e = &hm_site_srcs[(h + i) % HM_ARRAY_LEN(hm_site_srcs)];
        if (e->site == site)
            return e;
        if (!e->site)
            return NULL;
    }
    return NULL;
}

static struct site_src *site_src_add(uint64_t site, const uintptr_t *pcs, int n)
{
    for (size_t i = 0, h = (size_t)(site % HM_ARRAY_LEN(hm_site_srcs)); i < 64 && site; i++) {
        struct site_src *e = &hm_site_srcs[(h + i) % HM_ARRAY_LEN(hm_site_srcs)];
        if (!e->site) {
            e->site = site;
            e->n = n;
            memcpy(e->pcs, pcs, sizeof(uintptr_t) * (size_t)n);
            return e;
        }
    }
    return NULL;
}

static void global_src_add(uint64_t site, uintptr_t addr, const char *name)
{
    struct site_src *e = site_src_find(site);
    if (!e)
        e = site_src_add(site, &addr, 1);
    if (e)
        e->global = name;
}

/* Symbolizes a site's frames: its source chain, and its record in the trace. */
static void site_name(struct site_src *e)
{
    if (e->named)
        return;
    e->named = 1;
    char frames[SITE_DEPTH * 640];
    frames[0] = 0;
    if (e->global && hm__global_frame(e->pcs[0], e->global, frames, sizeof frames) < 0)
        frames[0] = 0;
    if (!e->global)
        hm__site_frames(e->pcs, e->n, SITE_DEPTH, frames, sizeof frames);
    if (!hm__frame_source(frames, e->src, sizeof e->src))
        e->src[0] = 0;
#ifdef HM_HAVE_TRACE
    if (rt.tw) {
        int rc = hm_trace_write_site(rt.tw, e->site, frames);
        if (rc < 0 && !rt.trace_err)
            rt.trace_err = rc;
    }
#endif
}

/* Every site seen, named (at the end of the run). */
static void site_name_all(void)
{
    for (size_t i = 0; i < HM_ARRAY_LEN(hm_site_srcs); i++)
        if (hm_site_srcs[i].site)
            site_name(&hm_site_srcs[i]);
}

static const char *site_source(uint64_t site)
{
    struct site_src *e = site_src_find(site);
    if (!e || (!e->named && !site_src_rules && !rt.finished))
        return NULL;
    site_name(e);
    return e->src[0] ? e->src : NULL;
}

static uint64_t site_id(uintptr_t *fp)
{
    uintptr_t raw[SITE_WALK], pcs[SITE_DEPTH];
    int nraw = 0, n = 0;
    uintptr_t top = (uintptr_t)__libc_stack_end;
    while (nraw < SITE_WALK && fp && (uintptr_t)fp < top && ((uintptr_t)fp & 7) == 0) {
        raw[nraw++] = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (next <= fp || (uintptr_t)next - (uintptr_t)fp > (64u << 20))
            break;
        fp = next;
    }
    static struct {
        uint64_t key, site;
    } hm_site_cache[4096];
    uint64_t key = hm__hash64(raw, sizeof(uintptr_t) * (size_t)nraw, (uint64_t)nraw) | 1;
    unsigned i = (unsigned)(key >> 52);
    if (hm_site_cache[i].key == key)
        return hm_site_cache[i].site;
    for (int k = 0; k < nraw && n < SITE_DEPTH; k++)
        if (!hm__site_skip(raw[k]))
            pcs[n++] = raw[k];
    /* Only library frames (libstdc++'s own operator new calls): the
     * innermost one past the allocator, as it is (as hetmem record names
     * it; a frame-pointer walk through a library is not to be trusted
     * further). */
    for (int k = 0; n == 0 && k < nraw; k++)
        if (!hm__site_entry(raw[k]))
            pcs[n++] = raw[k];
    uint64_t site = hm__site_id(pcs, n, SITE_DEPTH);
    hm_site_cache[i].key = key;
    hm_site_cache[i].site = site;
    if (site_src_find(site))
        return site; /* seen already, from another stack of the same frames */
    struct site_src *e = site_src_add(site, pcs, n);
    if (e && site_src_rules)
        site_name(e);
#ifdef HM_HAVE_TRACE
    else if (!e && rt.tw) { /* table full: the site is written unnamed by source */
        char frames[SITE_DEPTH * 256];
        size_t off = 0;
        frames[0] = 0;
        for (int k = 0; k < n && off < sizeof frames; k++) {
            int w = snprintf(frames + off, sizeof frames - off, "%s0x%llx", k ? "\n" : "", (unsigned long long)pcs[k]);
            if (w < 0)
                break;
            off += (size_t)w;
        }
        hm_trace_write_site(rt.tw, site, frames);
    }
#endif
    return site;
}

#define CALLER_FP ((uintptr_t *)__builtin_frame_address(0))

static void on_alloc(void *p, uint64_t size, uintptr_t *fp)
{
    if (!p || !hm__inst_sim || hm__inst_busy)
        return;
    hm__inst_busy = 1;
    if (size < rt.min_size) {
        /* hetmem run leaves these in the program's heap and hetmem record
         * does not track them: no site, no placement, no trace record. */
        hm_sim_alloc_unplaced(hm__inst_sim, (uintptr_t)p, size);
        hm__inst_busy = 0;
        return;
    }
    uint64_t site = site_id(fp);
    hm_sim_alloc(hm__inst_sim, (uintptr_t)p, size, site);
#ifdef HM_HAVE_TRACE
    if (rt.tw) {
        hm_alloc_t a = {hm_sim_now_ns(hm__inst_sim), (uintptr_t)p, size, site, 0};
        hm_trace_write_alloc(rt.tw, &a);
    }
#endif
    hm__inst_busy = 0;
}

static void on_free(void *p)
{
    if (!p || !hm__inst_sim || hm__inst_busy)
        return;
    hm__inst_busy = 1;
    int placed = hm_sim_placed_at(hm__inst_sim, (uintptr_t)p);
    if (hm_sim_free(hm__inst_sim, (uintptr_t)p) == 0 && placed == 1) {
#ifdef HM_HAVE_TRACE
        if (rt.tw)
            hm_trace_write_free(rt.tw, hm_sim_now_ns(hm__inst_sim), (uintptr_t)p, 0);
#endif
    }
    hm__inst_busy = 0;
}

#define ACTIVE (hm__inst_sim && !hm__inst_busy)

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void __real_free(void *);
int __real_posix_memalign(void **, size_t, size_t);
void *__real_aligned_alloc(size_t, size_t);
void *__real_memalign(size_t, size_t);
void *__real_valloc(size_t);
char *__real_strdup(const char *);
char *__real_strndup(const char *, size_t);

HM_API void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    on_alloc(p, n, CALLER_FP);
    return p;
}

HM_API void *__wrap_calloc(size_t n, size_t m)
{
    void *p = __real_calloc(n, m);
    if (p && ACTIVE) {
        on_alloc(p, (uint64_t)n * m, CALLER_FP);
        if ((uint64_t)n * m <= BULK_CALLOC_LIMIT)
            hm_sim_store_range(hm__inst_sim, (uintptr_t)p, (uint64_t)n * m, HM_RET_IP);
    }
    return p;
}

HM_API void *__wrap_realloc(void *old, size_t n)
{
    uint64_t oldsize = old && hm__inst_sim ? hm__sim_alloc_size(hm__inst_sim, (uintptr_t)old) : 0;
    void *p = __real_realloc(old, n);
    if (!p || !ACTIVE)
        return p;
    if (old && p != old) {
        uint64_t c = oldsize < n ? oldsize : n;
        hm_sim_load_range(hm__inst_sim, (uintptr_t)old, c, HM_RET_IP);
        hm_sim_store_range(hm__inst_sim, (uintptr_t)p, c, HM_RET_IP);
    }
    if (old)
        on_free(old);
    on_alloc(p, n, CALLER_FP);
    return p;
}

HM_API void __wrap_free(void *p)
{
    on_free(p);
    __real_free(p);
}

HM_API int __wrap_posix_memalign(void **out, size_t al, size_t n)
{
    int rc = __real_posix_memalign(out, al, n);
    if (rc == 0)
        on_alloc(*out, n, CALLER_FP);
    return rc;
}

HM_API void *__wrap_aligned_alloc(size_t al, size_t n)
{
    void *p = __real_aligned_alloc(al, n);
    on_alloc(p, n, CALLER_FP);
    return p;
}

HM_API void *__wrap_memalign(size_t al, size_t n)
{
    void *p = __real_memalign(al, n);
    on_alloc(p, n, CALLER_FP);
    return p;
}

HM_API void *__wrap_valloc(size_t n)
{
    void *p = __real_valloc(n);
    on_alloc(p, n, CALLER_FP);
    return p;
}

HM_API char *__wrap_strdup(const char *s)
{
    char *p = __real_strdup(s);
    if (p && ACTIVE) {
        size_t n = strlen(s) + 1;
        on_alloc(p, n, CALLER_FP);
        hm_sim_load_range(hm__inst_sim, (uintptr_t)s, n, HM_RET_IP);
        hm_sim_store_range(hm__inst_sim, (uintptr_t)p, n, HM_RET_IP);
    }
    return p;
}

HM_API char *__wrap_strndup(const char *s, size_t m)
{
    char *p = __real_strndup(s, m);
    if (p && ACTIVE) {
        size_t n = strlen(p) + 1;
        on_alloc(p, n, CALLER_FP);
        hm_sim_load_range(hm__inst_sim, (uintptr_t)s, n - 1, HM_RET_IP);
        hm_sim_store_range(hm__inst_sim, (uintptr_t)p, n, HM_RET_IP);
    }
    return p;
}

/* ---- C++ operator new and delete, the whole family (plain, array,
 * nothrow, aligned, sized), defined here under their Itanium ABI names so
 * that the program's own definitions replace libstdc++'s: the link
 * exports them, and libstdc++'s internal calls bind to them too. The
 * shared libstdc++'s operator new calls the real malloc, which --wrap
 * does not reach, so without these nothing a C++ program allocates with
 * new or std::vector would be an object. The call site is the caller of
 * operator new (site_id skips std:: frames above it). Semantics follow
 * [new.delete]: a zero size allocates one byte, a failure calls the
 * new-handler until it succeeds, and throws std::bad_alloc (aborts in a
 * program without libstdc++) when there is none; nothrow forms return
 * NULL instead. */
typedef void (*hm_new_handler_t)(void);
extern hm_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* Inlined: a tail call from the operator would reuse the frame that fp
 * points to. */
static inline __attribute__((always_inline)) void *cxx_alloc(size_t n, size_t al, int nothrow, uintptr_t *fp)
{
    if (n == 0)
        n = 1;
    if (al < sizeof(void *))
        al = sizeof(void *);
    for (;;) {
        void *p = NULL;
        if (al <= 16) {
            p = __real_malloc(n);
        } else if (__real_posix_memalign(&p, al, n) != 0) {
            p = NULL;
        }
        if (p) {
            on_alloc(p, n, fp);
            return p;
        }
        hm_new_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
        if (h) {
            h();
            continue;
        }
        if (nothrow)
            return NULL;
        if (_ZSt17__throw_bad_allocv)
            _ZSt17__throw_bad_allocv();
        say("hetmem: operator new: out of memory\n");
        abort();
    }
}

static void cxx_free(void *p)
{
    on_free(p);
    __real_free(p);
}

#define NEW_FN(name, params, size, al, nothrow)                   \
    HM_API void *name params { return cxx_alloc(size, al, nothrow, CALLER_FP); }
#define DELETE_FN(name, params) \
    HM_API void name params { cxx_free(p); }

/* operator new(size_t), new[](size_t), and their nothrow forms. */
NEW_FN(_Znwm, (size_t n), n, 0, 0)
NEW_FN(_Znam, (size_t n), n, 0, 0)
NEW_FN(_ZnwmRKSt9nothrow_t, (size_t n, const void *t), n, 0, 1)
NEW_FN(_ZnamRKSt9nothrow_t, (size_t n, const void *t), n, 0, 1)
/* C++17 aligned forms: (size_t, std::align_val_t[, nothrow]). */
NEW_FN(_ZnwmSt11align_val_t, (size_t n, size_t al), n, al, 0)
NEW_FN(_ZnamSt11align_val_t, (size_t n, size_t al), n, al, 0)
NEW_FN(_ZnwmSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, const void *t), n, al, 1)
NEW_FN(_ZnamSt11align_val_tRKSt9nothrow_t, (size_t n, size_t al, const void *t), n, al, 1)
/* delete and delete[]: plain, sized (C++14), aligned, sized aligned, nothrow. */
DELETE_FN(_ZdlPv, (void *p))
DELETE_FN(_ZdaPv, (void *p))
DELETE_FN(_ZdlPvm, (void *p, size_t n))
DELETE_FN(_ZdaPvm, (void *p, size_t n))
DELETE_FN(_ZdlPvSt11align_val_t, (void *p, size_t al))
DELETE_FN(_ZdaPvSt11align_val_t, (void *p, size_t al))
DELETE_FN(_ZdlPvmSt11align_val_t, (void *p, size_t n, size_t al))
DELETE_FN(_ZdaPvmSt11align_val_t, (void *p, size_t n, size_t al))
DELETE_FN(_ZdlPvRKSt9nothrow_t, (void *p, const void *t))
DELETE_FN(_ZdaPvRKSt9nothrow_t, (void *p, const void *t))
DELETE_FN(_ZdlPvSt11align_val_tRKSt9nothrow_t, (void *p, size_t al, const void *t))
DELETE_FN(_ZdaPvSt11align_val_tRKSt9nothrow_t, (void *p, size_t al, const void *t))

/* ---- libc bulk operations: libc is not instrumented, so each call is
 * modelled as the line-by-line reads and writes it performs. */

void *__real_memcpy(void *, const void *, size_t);
void *__real_memmove(void *, const void *, size_t);
void *__real_memset(void *, int, size_t);

#define RD(p, n) hm_sim_load_range(hm__inst_sim, (uintptr_t)(p), (n), HM_RET_IP)
#define WR(p, n) hm_sim_store_range(hm__inst_sim, (uintptr_t)(p), (n), HM_RET_IP)

HM_API void *__wrap_memcpy(void *d, const void *s, size_t n)
{
    if (ACTIVE) {
        RD(s, n);
        WR(d, n);
    }
    return __real_memcpy(d, s, n);
}

HM_API void *__wrap_memmove(void *d, const void *s, size_t n)
{
    if (ACTIVE) {
        RD(s, n);
        WR(d, n);
    }
    return __real_memmove(d, s, n);
}

HM_API void *__wrap_memset(void *d, int c, size_t n)
{
    if (ACTIVE)
        WR(d, n);
    return __real_memset(d, c, n);
}

HM_API void *__wrap___memcpy_chk(void *d, const void *s, size_t n, size_t dn)
{
    if (n > dn) {
        say("hetmem sim: buffer overflow detected (memcpy)\n");
        abort();
    }
    return __wrap_memcpy(d, s, n);
}

HM_API void *__wrap___memmove_chk(void *d, const void *s, size_t n, size_t dn)
{
    if (n > dn) {
        say("hetmem sim: buffer overflow detected (memmove)\n");
        abort();
    }
    return __wrap_memmove(d, s, n);
}

HM_API void *__wrap___memset_chk(void *d, int c, size_t n, size_t dn)
{
    if (n > dn) {
        say("hetmem sim: buffer overflow detected (memset)\n");
        abort();
    }
    return __wrap_memset(d, c, n);
}

int __real_memcmp(const void *, const void *, size_t);
size_t __real_strlen(const char *);
size_t __real_strnlen(const char *, size_t);
char *__real_strcpy(char *, const char *);
char *__real_strncpy(char *, const char *, size_t);
char *__real_strcat(char *, const char *);
int __real_strcmp(const char *, const char *);
int __real_strncmp(const char *, const char *, size_t);

HM_API int __wrap_memcmp(const void *a, const void *b, size_t n)
{
    if (ACTIVE) {
        RD(a, n);
        RD(b, n);
    }
    return __real_memcmp(a, b, n);
}

HM_API size_t __wrap_strlen(const char *s)
{
    size_t n = __real_strlen(s);
    if (ACTIVE)
        RD(s, n + 1);
    return n;
}

HM_API size_t __wrap_strnlen(const char *s, size_t m)
{
    size_t n = __real_strnlen(s, m);
    if (ACTIVE)
        RD(s, n < m ? n + 1 : n);
    return n;
}

HM_API char *__wrap_strcpy(char *d, const char *s)
{
    if (ACTIVE) {
        size_t n = __real_strlen(s) + 1;
        RD(s, n);
        WR(d, n);
    }
    return __real_strcpy(d, s);
}

HM_API char *__wrap_strncpy(char *d, const char *s, size_t m)
{
    if (ACTIVE) {
        size_t n = __real_strnlen(s, m);
        RD(s, n < m ? n + 1 : n);
        WR(d, m);
    }
    return __real_strncpy(d, s, m);
}

HM_API char *__wrap_strcat(char *d, const char *s)
{
    if (ACTIVE) {
        size_t dl = __real_strlen(d), n = __real_strlen(s) + 1;
        RD(d, dl);
        RD(s, n);
        WR(d + dl, n);
    }
    return __real_strcat(d, s);
}

/* Comparisons read both strings up to the first difference. */
static size_t common_prefix(const char *a, const char *b, size_t m)
{
    size_t i = 0;
    while (i < m && a[i] && a[i] == b[i])
        i++;
    return i < m ? i + 1 : m;
}

HM_API int __wrap_strcmp(const char *a, const char *b)
{
    if (ACTIVE) {
        size_t n = common_prefix(a, b, SIZE_MAX);
        RD(a, n);
        RD(b, n);
    }
    return __real_strcmp(a, b);
}

HM_API int __wrap_strncmp(const char *a, const char *b, size_t m)
{
    if (ACTIVE) {
        size_t n = common_prefix(a, b, m);
        RD(a, n);
        RD(b, n);
    }
    return __real_strncmp(a, b, m);
}
