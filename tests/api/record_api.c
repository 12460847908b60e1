/* The recording API from a program of its own: built with only the public
 * headers (include/) and linked with the shared libhetmem, it records
 * CHILD (tests/api/record_api_child.c: allocates and frees 8 MiB, exits 3)
 * and checks what the trace holds, then runs it with a placement (as
 * hetmem run does) and checks what the placement callback got.
 *
 *   record_api TRACE CHILD
 *
 * libhetmem_preload.so comes from HETMEM_PRELOAD. Exit status 0 when
 * every check passed, 1 otherwise (each failure one line on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetmem/error.h"
#include "hetmem/record.h"
#include "hetmem/trace.h"

#define CHILD_BYTES (8u << 20) /* as record_api_child.c allocates */

static int fails;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "record_api: %s:%d: ", __FILE__, __LINE__);        \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            fails++;                                                           \
        }                                                                      \
    } while (0)

static int messages;
static void on_message(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "record_api: runtime said: %s\n", msg);
    messages++;
}

/* Records CHILD with backend @p backend into @p path. */
static void record(const char *child, const char *path, const char *backend)
{
    char *argv[] = {(char *)child, "now", NULL};
    hm_record_opts_t o = {0};
    o.output = path;
    o.backend = backend;
    o.min_size = 1u << 20;
    o.on_message = on_message;
    hm_recorder_t *r = NULL;
    int rc = hm_recorder_open(&r, &o, argv);
    EXPECT(rc == 0, "hm_recorder_open(%s): %s: %s", backend, hm_strerror(rc), hm_errdetail());
    if (rc < 0)
        return;
    EXPECT(!strcmp(hm_recorder_backend(r), backend), "backend '%s', wanted '%s'", hm_recorder_backend(r), backend);
    hm_record_result_t res;
    rc = hm_recorder_run(r, &res);
    EXPECT(rc == 0, "hm_recorder_run(%s): %s: %s", backend, hm_strerror(rc), hm_errdetail());
    EXPECT(hm_recorder_run(r, &res) == HM_EUSAGE, "a second run was not refused");
    hm_recorder_close(r);
    if (rc < 0)
        return;
    EXPECT(hm_recorder_exit_code(res.status) == 3, "exit code %d, wanted 3", hm_recorder_exit_code(res.status));
    EXPECT(res.processes == 1, "%llu processes, wanted 1", (unsigned long long)res.processes);
    EXPECT(res.allocs >= 1 && res.frees >= 1, "%llu allocs, %llu frees", (unsigned long long)res.allocs,
           (unsigned long long)res.frees);
    EXPECT(res.runtime_errors == (uint64_t)messages, "%llu runtime errors, %d messages",
           (unsigned long long)res.runtime_errors, messages);

    /* The trace: the header says who wrote it, and the 8 MiB block is there. */
    hm_trace_t *t;
    rc = hm_trace_open(&t, path);
    EXPECT(rc == 0, "hm_trace_open(%s): %s: %s", path, hm_strerror(rc), hm_errdetail());
    if (rc < 0)
        return;
    const hm_trace_meta_t *m = hm_trace_meta(t);
    EXPECT(m->producer && !strncmp(m->producer, "hetmem-record ", 14), "producer '%s'",
           m->producer ? m->producer : "(none)");
    EXPECT(m->backend && !strcmp(m->backend, backend), "trace backend '%s'", m->backend ? m->backend : "(none)");
    EXPECT(m->argv && m->argv[0] && m->argv[1] && !strcmp(m->argv[1], "now"), "trace argv");
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    EXPECT(st.has_end && st.end.exit_status == res.status, "end record: %d, status %d", st.has_end,
           st.end.exit_status);
    hm_record_t rec;
    int found = 0;
    while ((rc = hm_trace_next(t, &rec)) == 1)
        found += rec.kind == HM_REC_ALLOC && rec.u.alloc.size == CHILD_BYTES;
    EXPECT(rc == 0, "reading the trace: %s", hm_strerror(rc));
    EXPECT(found == 1, "%d allocations of %u bytes in the trace, wanted 1", found, CHILD_BYTES);
    hm_trace_close(t);
}

/* What the placement callback saw. */
typedef struct {
    int events, big;          /* events, and of them the child's 8 MiB block */
    char big_req[64], big_dev[64];
    unsigned big_flags;
    uint64_t big_nodes;
} placed_t;

static void on_placement(void *ctx, const hm_record_placement_t *p)
{
    placed_t *c = ctx;
    c->events++;
    if (p->size == CHILD_BYTES) {
        c->big++;
        snprintf(c->big_req, sizeof c->big_req, "%s", p->requested);
        snprintf(c->big_dev, sizeof c->big_dev, "%s", p->device ? p->device : "(unbound)");
        c->big_flags = p->flags;
        c->big_nodes = p->nodes;
    }
}

/* A placement run: every allocation to node0, which holds 4 MiB, so the
 * child's 8 MiB block spills to the default device "0" (node 0 too). */
static void placement_run(const char *child, const char *path)
{
    char place[4200];
    snprintf(place, sizeof place, "%s.place.json", path);
    FILE *f = fopen(place, "w");
    EXPECT(f != NULL, "cannot write %s", place);
    if (!f)
        return;
    fputs("{ \"default\": \"0\", \"rules\": [ {\"min_size\": \"1M\", \"device\": \"node0\"},\n"
          "  {\"name\": \"nothing\", \"device\": \"0\"} ] }\n", f);
    fclose(f);
    char *argv[] = {(char *)child, "now", NULL};
    hm_record_opts_t o = {0};
    placed_t c = {0};
    o.placement = place;
    o.capacity = "node0=4194304";
    o.min_size = 1u << 20;
    o.on_placement = on_placement;
    o.on_message = on_message;
    o.ctx = &c;
    hm_recorder_t *r = NULL;
    int rc = hm_recorder_open(&r, &o, argv);
    EXPECT(rc == 0, "placement run: open: %s: %s", hm_strerror(rc), hm_errdetail());
    if (rc < 0)
        return;
    EXPECT(hm_recorder_placement(r) && hm_recorder_placement(r)[0] == '/', "placement path '%s' not absolute",
           hm_recorder_placement(r) ? hm_recorder_placement(r) : "(null)");
    hm_record_result_t res;
    rc = hm_recorder_run(r, &res);
    EXPECT(rc == 0, "placement run: %s: %s", hm_strerror(rc), hm_errdetail());
    if (rc == 0) {
        EXPECT(hm_recorder_exit_code(res.status) == 3, "exit code %d, wanted 3", hm_recorder_exit_code(res.status));
        EXPECT(res.placements == (uint64_t)c.events && c.events >= 1, "%llu placements, %d callbacks",
               (unsigned long long)res.placements, c.events);
        EXPECT(c.big == 1, "%d placements of the 8 MiB block, wanted 1", c.big);
        EXPECT(!strcmp(c.big_req, "node0") && !strcmp(c.big_dev, "0"), "8 MiB block: requested %s, got %s; wanted "
               "node0 spilled to 0", c.big_req, c.big_dev);
        EXPECT((c.big_flags & HM_PLACED_SPILLED) && res.spilled >= 1, "8 MiB block flags %#x, %llu spilled",
               c.big_flags, (unsigned long long)res.spilled);
        EXPECT(c.big_nodes == 1, "8 MiB block on nodes %#llx, wanted node 0", (unsigned long long)c.big_nodes);
        EXPECT(strstr(hm_recorder_unmatched(r), "\"nothing\"") != NULL, "unmatched rules '%s'",
               hm_recorder_unmatched(r));
        int found = 0;
        hm_record_device_t d;
        for (int i = 0; hm_recorder_device(r, i, &d) == 0; i++)
            if (!strcmp(d.name, "node0")) {
                found = 1;
                EXPECT(d.capacity == 4194304 && d.processes == 1 && d.nodes == 1, "node0: capacity %llu, %d "
                       "processes, nodes %#llx", (unsigned long long)d.capacity, d.processes,
                       (unsigned long long)d.nodes);
            }
        EXPECT(found, "no device node0 among %d", hm_recorder_ndevices(r));
        EXPECT(hm_recorder_device(r, hm_recorder_ndevices(r), &d) == HM_ENOTFOUND, "a device past the end");
    }
    hm_recorder_close(r);

    /* Refused before anything runs. */
    o.capacity = "hbm=4194304";
    EXPECT(hm_recorder_open(&r, &o, argv) == HM_ENODEV && r == NULL, "a capacity for a device not in the "
           "placement was not refused: %s", hm_errdetail());
    EXPECT(strstr(hm_errdetail(), "hbm is not a device of") != NULL, "detail '%s'", hm_errdetail());
    o.capacity = "node0=lots";
    EXPECT(hm_recorder_open(&r, &o, argv) == HM_EUSAGE, "capacity 'node0=lots' not refused");
    o.capacity = NULL;
    o.output = path;
    EXPECT(hm_recorder_open(&r, &o, argv) == HM_EUSAGE, "output and placement together not refused");
    o.output = NULL;
    o.bind = "node0";
    EXPECT(hm_recorder_open(&r, &o, argv) == HM_EUSAGE, "bind in a placement run not refused");
    o.bind = NULL;
    o.output = NULL;
    char missing[4300];
    snprintf(missing, sizeof missing, "%s.none.json", path);
    o.placement = missing;
    EXPECT(hm_recorder_open(&r, &o, argv) == -ENOENT && r == NULL, "a missing placement file: %s", hm_errdetail());
    EXPECT(!strncmp(hm_errdetail(), missing, strlen(missing)), "detail '%s' does not begin with the file",
           hm_errdetail());
    unlink(place);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: record_api TRACE CHILD\n");
        return 2;
    }
    const char *path = argv[1], *child = argv[2];
    record(child, path, "none");
    /* The soft sampler where it can run (it is the fallback of "auto"). */
    hm_backend_t b;
    if (hm_backend_auto(1, &b) == 0 && b == HM_BACKEND_SOFT)
        record(child, path, "soft");

    /* A spool past HETMEM_SPOOL_MAX: the result says the trace lacks
     * records, and how many. 20000 allocations and frees make about 1.6 MB
     * of spool records, 25 times the bound. */
    {
        char *churn[] = {(char *)child, "churn", "20000", NULL};
        hm_record_opts_t o = {0};
        o.output = path;
        o.backend = "none";
        o.min_size = 4096;
        o.on_message = on_message;
        setenv("HETMEM_SPOOL_MAX", "64K", 1);
        hm_recorder_t *r = NULL;
        hm_record_result_t res;
        messages = 0;
        int rc = hm_recorder_open(&r, &o, churn);
        EXPECT(rc == 0, "open (spool bound): %s: %s", hm_strerror(rc), hm_errdetail());
        if (rc == 0) {
            rc = hm_recorder_run(r, &res);
            EXPECT(rc == 0, "run (spool bound): %s: %s", hm_strerror(rc), hm_errdetail());
            hm_recorder_close(r);
        }
        if (rc == 0) {
            EXPECT(hm_recorder_exit_code(res.status) == 3, "churn exit code %d", hm_recorder_exit_code(res.status));
            EXPECT(res.spool_limit_reached == 1, "spool_limit_reached %d, wanted 1", res.spool_limit_reached);
            EXPECT(res.spool_limit_uncounted == 0, "spool_limit_uncounted %d, wanted 0", res.spool_limit_uncounted);
            EXPECT(res.unwritten > 0 && res.allocs + res.frees < 40000, "%llu unwritten, %llu allocs, %llu frees",
                   (unsigned long long)res.unwritten, (unsigned long long)res.allocs, (unsigned long long)res.frees);
            EXPECT(res.allocs + res.frees + res.unwritten >= 40000, "%llu written + %llu unwritten < 40000 events",
                   (unsigned long long)(res.allocs + res.frees), (unsigned long long)res.unwritten);
            EXPECT(messages >= 1, "no runtime message about the bound");
        }
        setenv("HETMEM_SPOOL_MAX", "12", 1);
        rc = hm_recorder_open(&r, &o, churn);
        EXPECT(rc == HM_EUSAGE && r == NULL, "HETMEM_SPOOL_MAX=12 not refused: %s", hm_strerror(rc));
        EXPECT(strstr(hm_errdetail(), "HETMEM_SPOOL_MAX: '12' is not a size") != NULL, "detail '%s'", hm_errdetail());
        unsetenv("HETMEM_SPOOL_MAX");
    }

    /* Errors before anything runs: one-line details, and no trace left. */
    char *cmd[] = {(char *)child, "now", NULL};
    hm_record_opts_t o = {0};
    hm_recorder_t *r = (hm_recorder_t *)&o;
    o.output = path;
    o.backend = "foo";
    EXPECT(hm_recorder_open(&r, &o, cmd) == HM_EUSAGE && r == NULL, "unknown backend not refused");
    EXPECT(strstr(hm_errdetail(), "unknown backend 'foo'") != NULL, "detail '%s'", hm_errdetail());
    char missing[4200];
    snprintf(missing, sizeof missing, "%s.no-such-dir/t.hmt", path);
    o.backend = "none";
    o.output = missing;
    int rc = hm_recorder_open(&r, &o, cmd);
    EXPECT(rc == -ENOENT && r == NULL, "output in a missing folder: %s", hm_strerror(rc));
    EXPECT(strchr(hm_errdetail(), '\n') == NULL, "a detail of more than one line");
    o.output = path;
    o.bind = "no-such-device";
    EXPECT(hm_recorder_open(&r, &o, cmd) == HM_ENODEV && r == NULL, "unknown --bind device not refused: %s",
           hm_errdetail());
    o.bind = NULL;
    o.period = 5;
    EXPECT(hm_recorder_open(&r, &o, cmd) == HM_EUSAGE, "a period with backend none not refused");
    /* A recorder closed without running leaves no trace. */
    o.period = 0;
    unlink(path);
    rc = hm_recorder_open(&r, &o, cmd);
    EXPECT(rc == 0, "open: %s: %s", hm_strerror(rc), hm_errdetail());
    if (rc == 0) {
        EXPECT(access(path, F_OK) == 0, "the trace is not created by open");
        hm_recorder_close(r);
        EXPECT(access(path, F_OK) != 0, "a trace was left by a recorder that never ran");
    }
    placement_run(child, path);
    if (fails == 0)
        printf("record_api: ok\n");
    return fails ? 1 : 0;
}
