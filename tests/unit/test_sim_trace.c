/* The sampled trace of `hetmem sim -o`, read back with the trace reader:
 * every Nth load and store with simulated time and data source, alloc and
 * free events with sites, names, phases, instruction counters, end time. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"
#include "hetmem/trace.h"

int main(void)
{
    const char *build = getenv("HETMEM_BUILD"), *src = getenv("HETMEM_SRC");
    if (!build || !src) {
        printf("HETMEM_BUILD/HETMEM_SRC not set\n");
        return 77;
    }
    char kernel[1024], cmd[4096], dir[] = "/tmp/hm_simtrace_XXXXXX";
    snprintf(kernel, sizeof kernel, "%s/tests/sim-kernels/chase.sim", build);
    if (access(kernel, X_OK) != 0) {
        printf("%s not built\n", kernel);
        return 77;
    }
    if (!mkdtemp(dir))
        return 1;
    /* fast is device 1: the chase's data is there, the rest on slow (0). */
    snprintf(cmd, sizeof cmd,
             "echo '{\"default\": \"slow\", \"rules\": [{\"name\": \"chain\", \"device\": \"fast\"}]}' > %s/p.json && "
             "%s/bin/hetmem sim -m %s/tests/sim-kernels/machines/two.json --placement %s/p.json "
             "-o %s/t.trace --sample-period 101 --json %s/r.json -- %s 4194304 20000 > /dev/null",
             dir, build, src, dir, dir, dir, kernel);
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/r.json", dir);
    json_t *rep = NULL;
    CHECK_EQ_INT(hm__json_load_file(path, &rep), 0);
    snprintf(path, sizeof path, "%s/t.trace", dir);
    hm_trace_t *t = NULL;
    rc = hm_trace_open(&t, path);
    CHECK_EQ_INT(rc, 0);
    if (!t || !rep)
        return check_done();
    uint64_t loads = (uint64_t)json_integer_value(json_object_get(rep, "loads"));
    uint64_t stores = (uint64_t)json_integer_value(json_object_get(rep, "stores"));
    uint64_t runtime_ns = (uint64_t)json_integer_value(json_object_get(rep, "runtime_ns"));
    const hm_trace_meta_t *meta = hm_trace_meta(t);
    CHECK_STR_EQ(meta->backend, "sim");
    CHECK_EQ_U64(meta->period, 101);
    CHECK(meta->machine_json && strstr(meta->machine_json, "test-two"));
    hm_trace_stats_t st;
    hm_trace_stats(t, &st);
    CHECK(st.has_end);
    CHECK_EQ_U64(st.end.total_time, runtime_ns);
    /* the period is drawn in [51, 151] (mean 101) */
    CHECK(st.loads * 101 >= loads * 95 / 100 && st.loads * 101 <= loads * 105 / 100);
    CHECK(st.stores * 101 >= stores * 90 / 100 && st.stores * 101 <= stores * 110 / 100);

    hm_record_t r;
    uint64_t last = 0, allocs = 0, frees = 0, sites = 0, names = 0, pbeg = 0, pend = 0, counters = 0;
    uint64_t in_chase = 0, chase_fast = 0, last_insn = 0, chain = 0;
    int in_phase = 0, ordered = 1, insn_mono = 1;
    while ((rc = hm_trace_next(t, &r)) == 1) {
        switch (r.kind) {
        case HM_REC_SAMPLE:
            if (r.u.sample.time < last)
                ordered = 0;
            last = r.u.sample.time;
            /* stores carry only L1 hit or miss, no latency (as on hardware) */
            if (r.u.sample.access == HM_ACCESS_STORE) {
                CHECK_EQ_U64(r.u.sample.weight, 0);
                CHECK(r.u.sample.dsrc == HM_DSRC_L1 || r.u.sample.dsrc == HM_DSRC_UNKNOWN);
            }
            if (in_phase && r.u.sample.access == HM_ACCESS_LOAD) {
                in_chase++;
                /* The chase misses everywhere: served by device 1 with at
                 * least its 80 ns (160 cycles at 2 GHz) latency. */
                if (HM_DSRC_LEVEL(r.u.sample.dsrc) == HM_DSRC_MEM && HM_DSRC_DEVICE(r.u.sample.dsrc) == 1 &&
                    r.u.sample.weight >= 160)
                    chase_fast++;
            }
            break;
        case HM_REC_ALLOC:
            allocs++;
            if (r.u.alloc.size == 4194304)
                chain = r.u.alloc.addr;
            break;
        case HM_REC_FREE: frees++; break;
        case HM_REC_SITE: sites++; CHECK(r.u.site.frames && strstr(r.u.site.frames, "chase.sim+0x")); break;
        case HM_REC_NAME:
            names++;
            CHECK_STR_EQ(r.u.name.name, "chain");
            CHECK_EQ_U64(r.u.name.addr, chain);
            break;
        case HM_REC_PHASE_BEGIN: pbeg++; in_phase = 1; CHECK_STR_EQ(r.u.phase.name, "chase"); break;
        case HM_REC_PHASE_END: pend++; in_phase = 0; break;
        case HM_REC_COUNTER:
            counters++;
            if (r.u.counter.value < last_insn)
                insn_mono = 0;
            last_insn = r.u.counter.value;
            break;
        default: break;
        }
    }
    CHECK_EQ_INT(rc, 0);
    CHECK(ordered);
    CHECK(insn_mono);
    CHECK_EQ_U64(allocs, 2); /* the chain and the permutation */
    CHECK_EQ_U64(frees, 1);
    CHECK_EQ_U64(sites, 2);
    CHECK_EQ_U64(names, 1);
    CHECK_EQ_U64(pbeg, 1);
    CHECK_EQ_U64(pend, 1);
    CHECK(counters >= 1);
    CHECK_EQ_U64(last_insn, (uint64_t)json_integer_value(json_object_get(rep, "instructions")));
    /* 20000 chase loads in the phase, one sampled in 101 */
    CHECK(in_chase >= 20000 / 101 * 9 / 10 && in_chase <= 20000 / 101 * 11 / 10);
    CHECK(chase_fast * 10 >= in_chase * 9);
    printf("samples %llu+%llu, chase samples %llu (%llu from fast)\n", (unsigned long long)st.loads,
           (unsigned long long)st.stores, (unsigned long long)in_chase, (unsigned long long)chase_fast);
    hm_trace_close(t);
    json_decref(rep);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return check_done();
}
