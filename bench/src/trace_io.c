/* Trace I/O throughput: writes a synthetic sampled stream with the trace
 * writer and reads it back with the batch reader (hm_trace_read_block) and
 * the record iterator (hm_trace_next), reporting records/s, MB/s and
 * compressed bytes per sample. Also writes small synthetic traces for the
 * demo (--synth). --read TRACE times an existing trace instead: zstd
 * decompression of its blocks alone, and the sample scan summary building
 * reads (hm_trace_batch_begin/_next), in CPU time per sample, medians of
 * --runs, printed as one JSON object.
 *
 * The stream imitates PEBS-style load sampling of a loop nest: five arrays
 * streamed with stride 8 (each sample lands a variable number of elements
 * further on, as a sampling period does), one 64 MiB table read at random,
 * four threads, a dozen load/store instructions, latency weights and data
 * sources drawn by level. Timestamps increase by ~500 ns with jitter. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <zstd.h>

#include "common/common.h"
#include "hetmem/trace.h"

typedef struct {
    uint64_t s;
} rng_t;

static inline uint64_t rnd(rng_t *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dULL;
}

#define NSTREAMS 5
#define NOBJ (NSTREAMS + 1)

typedef struct {
    const char *name;
    uint64_t base, size, site;
} obj_t;

static obj_t objs[NOBJ] = {
    {"a", 0x7f3a10000000ULL, 256u << 20, 0x9f1c2e3d4b5a6978ULL},
    {"b", 0x7f3a20000000ULL, 256u << 20, 0x1a2b3c4d5e6f7081ULL},
    {"c", 0x7f3a30000000ULL, 256u << 20, 0x2b3c4d5e6f708192ULL},
    {"x", 0x7f3a40000000ULL, 256u << 20, 0x3c4d5e6f708192a3ULL},
    {"y", 0x55d0c8000000ULL, 256u << 20, 0x4d5e6f708192a3b4ULL},
    {"table", 0x7f3b00000000ULL, 64u << 20, 0x5e6f708192a3b4c5ULL},
};

typedef struct {
    rng_t r;
    uint64_t t, it;
} gen_t;

static void gen_samples(gen_t *g, hm_sample_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t x = rnd(&g->r);
        g->t += 400 + (x & 255);
        g->it += 180 + ((x >> 8) & 31); /* loop iterations between samples */
        unsigned o = (unsigned)((x >> 16) % 6);
        uint64_t addr;
        if (o < NSTREAMS)
            addr = objs[o].base + ((g->it * 8 + o * 4096) % objs[o].size);
        else
            addr = objs[o].base + (((x >> 24) % (objs[o].size / 8)) * 8);
        unsigned lvl = (unsigned)((x >> 52) & 15);
        uint16_t dsrc;
        uint32_t w;
        if (o == NSTREAMS) {
            dsrc = lvl < 3 ? HM_DSRC_L3 : HM_DSRC_MAKE_MEM(lvl & 1);
            w = lvl < 3 ? 40 + (unsigned)((x >> 40) & 15) : 180 + (unsigned)((x >> 40) & 255);
        } else {
            dsrc = lvl < 10 ? HM_DSRC_L1 : lvl < 13 ? HM_DSRC_LFB : HM_DSRC_L2;
            w = lvl < 10 ? 5 : lvl < 13 ? 30 + (unsigned)((x >> 40) & 63) : 14;
        }
        out[i] = (hm_sample_t){g->t, addr, 0x401a20 + o * 0x24 + ((x >> 60) & 1) * 8,
                               (uint32_t)(1000 + ((x >> 44) & 3)), w, dsrc,
                               (uint8_t)(o == 4 && (x >> 46) % 2 == 0 ? HM_ACCESS_STORE : HM_ACCESS_LOAD)};
    }
}

/* Writes a trace of n samples. Samples come from a pre-generated pool of
 * `pool` samples replayed with shifted times, so that the timed section is
 * the writer's work only; blocks are compressed independently, so the
 * replay gives zstd nothing to exploit across blocks. */
static uint32_t block_records = 0; /* 0: the writer's default */

static int write_trace(const char *path, uint64_t n, int events, double *secs)
{
    static const char *const argv[] = {"./stream-app", "--size", "1G", NULL};
    hm_trace_meta_t m = {"hetmem-bench 0.1.0", "sim", 1.0, "sim", "mem-loads:ldlat=3", 1000, "ddr",
                         "{\"name\":\"synthetic\",\"devices\":[\"ddr\",\"hbm\"]}", argv, NULL, 0};
    const size_t pool = 1u << 20;
    hm_sample_t *s = hm__xmalloc(pool * sizeof *s);
    gen_t g = {{0x243f6a8885a308d3ULL}, 1000, 0};
    gen_samples(&g, s, pool);
    uint64_t span = g.t - 1000 + 1000;
    hm_trace_writer_t *w;
    int rc = hm_trace_writer_open(&w, path, &m);
    if (rc < 0) {
        free(s);
        return rc;
    }
    if (block_records && (rc = hm_trace_writer_set_block_records(w, block_records)) < 0) {
        hm_trace_writer_close(w, NULL);
        free(s);
        return rc;
    }
    uint64_t t0 = hm__now_ns();
    if (events) {
        hm_trace_write_phase(w, 1, 500, 1000, "init");
        for (int o = 0; o < NOBJ; o++) {
            char frames[128];
            snprintf(frames, sizeof frames, "stream-app+0x%x alloc_%s\nstream-app+0x1f0 main", 0x1200 + o * 0x40,
                     objs[o].name);
            hm_trace_write_site(w, objs[o].site, frames);
            hm_alloc_t a = {600 + (uint64_t)o, objs[o].base, objs[o].size, objs[o].site, 1000};
            hm_trace_write_alloc(w, &a);
            hm_trace_write_name(w, 600 + (uint64_t)o, objs[o].base, objs[o].name);
        }
        hm_trace_write_phase(w, 0, 900, 1000, "init");
        hm_trace_write_phase(w, 1, 950, 1000, "solve");
    }
    uint64_t done = 0, round = 0;
    while (done < n && rc == 0) {
        size_t k = n - done < pool ? (size_t)(n - done) : pool;
        uint64_t shift = round * span;
        for (size_t i = 0; i < k && rc == 0; i++) {
            hm_sample_t x = s[i];
            x.time += shift;
            rc = hm_trace_write_sample(w, &x);
        }
        if (events && rc == 0) {
            hm_counter_t c = {s[k - 1].time + shift, (round + 1) * 1000000000ull, HM_COUNTER_INSTRUCTIONS, 1000};
            rc = hm_trace_write_counter(w, &c);
        }
        done += k;
        round++;
    }
    uint64_t tend = n ? s[(n - 1) % pool].time + (round - 1) * span : 1000;
    if (events && rc == 0) {
        hm_trace_write_phase(w, 0, tend + 1, 1000, "solve");
        /* "x" and "y" are freed before the end; the rest live to exit. */
        hm_trace_write_free(w, tend + 2, objs[3].base, 1000);
        hm_trace_write_free(w, tend + 3, objs[4].base, 1000);
    }
    hm_trace_end_t end = {tend + 10, 0};
    int rc2 = hm_trace_writer_close(w, &end);
    *secs = (double)(hm__now_ns() - t0) / 1e9;
    free(s);
    return rc ? rc : rc2;
}

static int read_batch(const char *path, double *secs, uint64_t *nrec, uint64_t *check)
{
    uint64_t t0 = hm__now_ns();
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    if (rc < 0)
        return rc;
    uint64_t n = 0, sum = 0;
    for (uint32_t b = 0; b < hm_trace_nblocks(t); b++) {
        const hm_block_t *blk;
        if ((rc = hm_trace_read_block(t, b, &blk)) < 0)
            break;
        /* Touch every column once so the decode cannot be elided and the
         * figure includes reading the data. */
        for (uint32_t i = 0; i < blk->n; i++)
            sum += blk->addr[i] ^ blk->time[i] ^ blk->ip[i] ^ blk->tid[i] ^ blk->weight[i] ^ blk->dsrc[i] ^
                   blk->access[i];
        n += blk->n + blk->nevents;
    }
    hm_trace_close(t);
    *secs = (double)(hm__now_ns() - t0) / 1e9;
    *nrec = n;
    *check = sum;
    return rc;
}

/* Blocks decode independently, so readers scale by giving each thread its
 * own handle and a share of the blocks. */
typedef struct {
    const char *path;
    int id, nthreads, rc;
    uint64_t n, sum;
} par_t;

static void *par_reader(void *arg)
{
    par_t *p = arg;
    hm_trace_t *t;
    if ((p->rc = hm_trace_open(&t, p->path)) < 0)
        return NULL;
    for (uint32_t b = (uint32_t)p->id; b < hm_trace_nblocks(t); b += (uint32_t)p->nthreads) {
        const hm_block_t *blk;
        if ((p->rc = hm_trace_read_block(t, b, &blk)) < 0)
            break;
        for (uint32_t i = 0; i < blk->n; i++)
            p->sum += blk->addr[i] ^ blk->time[i] ^ blk->ip[i] ^ blk->tid[i] ^ blk->weight[i] ^ blk->dsrc[i] ^
                      blk->access[i];
        p->n += blk->n + blk->nevents;
    }
    hm_trace_close(t);
    return NULL;
}

static int read_parallel(const char *path, int nthreads, double *secs, uint64_t *nrec)
{
    par_t p[64];
    pthread_t th[64];
    uint64_t t0 = hm__now_ns();
    for (int i = 0; i < nthreads; i++) {
        p[i] = (par_t){path, i, nthreads, 0, 0, 0};
        pthread_create(&th[i], NULL, par_reader, &p[i]);
    }
    int rc = 0;
    *nrec = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        rc = rc ? rc : p[i].rc;
        *nrec += p[i].n;
    }
    *secs = (double)(hm__now_ns() - t0) / 1e9;
    return rc;
}

/* zstd alone over every block's payload (pread + decompress, no checksum,
 * no column decoding): the ceiling the batch reader's decoding sits under. */
static int read_zstd_only(const char *path, double *secs)
{
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY);
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    uint8_t *cbuf = NULL, *raw = NULL;
    size_t ccap = 0, rcap = 0;
    uint64_t t0 = hm__now_ns();
    for (uint32_t b = 0; b < hm_trace_nblocks(t) && fd >= 0; b++) {
        hm_block_info_t bi;
        hm_trace_block_info(t, b, &bi);
        if (bi.compressed_bytes > ccap)
            cbuf = hm__xrealloc(cbuf, ccap = bi.compressed_bytes);
        if (bi.raw_bytes > rcap)
            raw = hm__xrealloc(raw, rcap = bi.raw_bytes);
        if (pread(fd, cbuf, bi.compressed_bytes, (off_t)bi.offset + 48) != (ssize_t)bi.compressed_bytes ||
            ZSTD_isError(ZSTD_decompressDCtx(dc, raw, bi.raw_bytes, cbuf, bi.compressed_bytes))) {
            rc = HM_ECORRUPT;
            break;
        }
    }
    *secs = (double)(hm__now_ns() - t0) / 1e9;
    if (fd >= 0)
        close(fd);
    ZSTD_freeDCtx(dc);
    free(cbuf);
    free(raw);
    hm_trace_close(t);
    return rc;
}

static int read_next(const char *path, double *secs, uint64_t *nrec)
{
    uint64_t t0 = hm__now_ns();
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    if (rc < 0)
        return rc;
    hm_record_t r;
    uint64_t n = 0;
    while ((rc = hm_trace_next(t, &r)) == 1)
        n++;
    hm_trace_close(t);
    *secs = (double)(hm__now_ns() - t0) / 1e9;
    *nrec = n;
    return rc;
}

/* The samples of every block a batch at a time (hm_trace_batch_begin and
 * _next: the columns summary building reads), as the estimator reads them. */
static int read_scan(const char *path, uint64_t *ns, uint64_t *check)
{
    hm_trace_t *t;
    int rc = hm_trace_open(&t, path);
    if (rc < 0)
        return rc;
    uint64_t n = 0, sum = 0;
    for (uint32_t b = 0; b < hm_trace_nblocks(t) && rc >= 0; b++) {
        hm_event_list_t el;
        hm_sample_batch_t bt;
        if ((rc = hm_trace_batch_begin(t, b, &el)) < 0)
            break;
        while ((rc = hm_trace_batch_next(t, &bt)) > 0) {
            for (uint32_t i = 0; i < bt.n; i++)
                sum += bt.addr[i] ^ bt.time[i] ^ bt.weight[i] ^ bt.dsrc[i] ^ bt.access[i];
            n += bt.n;
        }
    }
    hm_trace_close(t);
    *ns = n;
    *check = sum;
    return rc;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_trace_io [--samples N] [--runs R] [--file PATH] [--next-samples N] [--block RECORDS]\n"
                    "                      [--threads N]\n"
                    "       bench_trace_io --synth PATH [--samples N]\n"
                    "       bench_trace_io --read TRACE [--runs R]\n");
}

int main(int argc, char **argv)
{
    uint64_t n = 100000000, next_n = 20000000;
    int runs = 3, threads = 2;
    const char *file = NULL, *synth = NULL, *readp = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "--samples") && v && hm__parse_u64(v, &x) == 0) n = x, i++;
        else if (!strcmp(a, "--next-samples") && v && hm__parse_u64(v, &x) == 0) next_n = x, i++;
        else if (!strcmp(a, "--runs") && v && hm__parse_u64(v, &x) == 0 && x >= 1 && x <= 99) runs = (int)x, i++;
        else if (!strcmp(a, "--file") && v) file = v, i++;
        else if (!strcmp(a, "--threads") && v && hm__parse_u64(v, &x) == 0 && x <= 64) threads = (int)x, i++;
        else if (!strcmp(a, "--block") && v && hm__parse_u64(v, &x) == 0 && x <= UINT32_MAX) block_records = (uint32_t)x, i++;
        else if (!strcmp(a, "--synth") && v) synth = v, i++;
        else if (!strcmp(a, "--read") && v) readp = v, i++;
        else {
            usage();
            return 2;
        }
    }
    double s;
    if (synth) {
        int rc = write_trace(synth, n == 100000000 ? 200000 : n, 1, &s);
        if (rc < 0) {
            fprintf(stderr, "hetmem: %s: %s: %s\n", synth, hm_strerror(rc), hm_errdetail());
            return 1;
        }
        return 0;
    }
    if (readp) {
        /* An existing trace: zstd alone and the sample scan, in CPU time of
         * this thread, per sample. */
        double zc[99], sc[99], z;
        uint64_t ns = 0, check = 0;
        int rc = 0;
        for (int r = 0; r < runs && rc == 0; r++) {
            double c0 = thread_cpu_s();
            if ((rc = read_zstd_only(readp, &z)) < 0)
                break;
            double c1 = thread_cpu_s();
            if ((rc = read_scan(readp, &ns, &check)) < 0)
                break;
            zc[r] = c1 - c0;
            sc[r] = thread_cpu_s() - c1;
        }
        if (rc < 0) {
            fprintf(stderr, "hetmem: %s: %s: %s\n", readp, hm_strerror(rc), hm_errdetail());
            return 1;
        }
        double zm = median(zc, runs), sm = median(sc, runs);
        printf("{\"trace\": \"%s\", \"samples\": %" PRIu64 ", \"runs\": %d, \"zstd_ns_per_sample\": %.2f, "
               "\"scan_ns_per_sample\": %.2f, \"checksum\": \"%016" PRIx64 "\"}\n",
               readp, ns, runs, zm * 1e9 / (double)(ns ? ns : 1), sm * 1e9 / (double)(ns ? ns : 1), check);
        return 0;
    }
    uint64_t wall0 = hm__now_ns();
    char path[512];
    if (file)
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/hetmem-trace-io-%d.hmt", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid());
    double wt[99], rt[99], nt[99], zt[99], pt[99];
    uint64_t npar = 0;
    uint64_t nrec = 0, check = 0, nnext = 0;
    struct stat st = {0};
    int rc = 0;
    for (int r = 0; r < runs && rc == 0; r++) {
        if ((rc = write_trace(path, n, 1, &wt[r])) < 0)
            break;
        stat(path, &st);
        if ((rc = read_batch(path, &rt[r], &nrec, &check)) < 0)
            break;
        if ((rc = read_zstd_only(path, &zt[r])) < 0)
            break;
        if (threads > 1 && (rc = read_parallel(path, threads, &pt[r], &npar)) < 0)
            break;
        fprintf(stderr, "run %d: write %.2f s, read %.2f s\n", r + 1, wt[r], rt[r]);
    }
    /* The record iterator on a smaller trace of the same stream (its
     * records/s do not depend on the trace's length). */
    if (rc == 0 && next_n) {
        for (int r = 0; r < runs && rc == 0; r++) {
            double dummy;
            if ((rc = write_trace(path, next_n, 1, &dummy)) < 0)
                break;
            rc = read_next(path, &nt[r], &nnext);
        }
    }
    if (!file)
        unlink(path);
    if (rc < 0) {
        fprintf(stderr, "hetmem: bench_trace_io: %s: %s\n", hm_strerror(rc), hm_errdetail());
        return 1;
    }
    double w = median(wt, runs), rd = median(rt, runs), nx = next_n ? median(nt, runs) : 0;
    double zs = median(zt, runs), ps = threads > 1 ? median(pt, runs) : 0;
    double mb = (double)st.st_size / 1e6;
    printf("samples            %" PRIu64 " (+%" PRIu64 " other records)\n", n, nrec - n);
    printf("file               %.1f MB, %.2f bytes/sample (target <= 6)\n", mb, (double)st.st_size / (double)n);
    printf("runs               %d (medians below)\n", runs);
    printf("%-34s %12s %10s %10s\n", "path", "M records/s", "MB/s file", "seconds");
    printf("%-34s %12.1f %10.1f %10.2f\n", "write (hm_trace_write_sample)", (double)nrec / w / 1e6, mb / w, w);
    printf("%-34s %12.1f %10.1f %10.2f\n", "read batch (hm_trace_read_block)", (double)nrec / rd / 1e6, mb / rd, rd);
    if (next_n)
        printf("%-34s %12.1f %10s %10.2f\n", "read records (hm_trace_next)", (double)nnext / nx / 1e6, "-", nx);
    if (threads > 1) {
        char label[64];
        snprintf(label, sizeof label, "read batch, %d threads", threads);
        printf("%-34s %12.1f %10.1f %10.2f\n", label, (double)npar / ps / 1e6, mb / ps, ps);
    }
    printf("%-34s %12.1f %10.1f %10.2f\n", "zstd decompression alone", (double)nrec / zs / 1e6, mb / zs, zs);
    printf("checksum           %016" PRIx64 "\n", check);
    /* On a shared machine the figures above depend on the CPU this process
     * actually got; say how much that was. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                 ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
    double wall = (double)(hm__now_ns() - wall0) / 1e9;
    printf("cpu share          %.0f%% (process CPU time / wall time; 100%% = one core)\n", 100 * cpu / wall);
    return 0;
}
