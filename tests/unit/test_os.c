/* os layer on captured sysfs trees (device-name resolution, node kinds,
 * HMAT, tiers, PMU formats) and the live NUMA wrappers on node 0. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "os/os.h"
#include "record/record_int.h"

static hm_os_info_t info;

static void probe_fixture(const char *name)
{
    char root[1024];
    snprintf(root, sizeof root, "%s/sysfs/%s", getenv("HETMEM_FIXTURES"), name);
    /* The root is read once per process; tests swap it through a re-exec. */
    setenv("HETMEM_SYSFS_ROOT", root, 1);
    hm__os_probe(&info);
}

int main(int argc, char **argv)
{
    if (!getenv("HETMEM_FIXTURES")) {
        printf("skip: HETMEM_FIXTURES not set\n");
        return 77;
    }
    if (argc == 1) {
        /* Live part first (root unset), then the fixture part in a child. */
        long pg = sysconf(_SC_PAGESIZE);
        char *p = mmap(NULL, (size_t)pg * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED);
        hm__os_probe(&info);
        uint64_t m = 0;
        CHECK_EQ_INT(hm__os_resolve_device(&info, "node0", &m), 0);
        CHECK_EQ_U64(m, 1);
        CHECK_EQ_INT(hm__os_mbind(p, (size_t)pg * 4, m, 0), 0);
        memset(p, 1, (size_t)pg * 4);
        void *pages[4] = {p, p + pg, p + 2 * pg, p + 3 * pg};
        int st[4] = {-1, -1, -1, -1};
        CHECK_EQ_INT(hm__os_page_nodes(pages, 4, st), 0);
        for (int i = 0; i < 4; i++)
            CHECK_EQ_INT(st[i], 0);
        int node = -1;
        CHECK_EQ_INT(hm__os_addr_node(p, &node), 0);
        CHECK_EQ_INT(node, 0);
        CHECK_EQ_INT(hm__os_move_pages(pages, 4, 0, st), 0);
        CHECK_EQ_INT(hm__os_resolve_device(&info, "node63", &m), HM_ENODEV);
        CHECK(strstr(hm_errdetail(), "node63") != NULL);
        munmap(p, (size_t)pg * 4);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "'%s' fixtures", argv[0]);
        int rc = system(cmd);
        CHECK_EQ_INT(rc, 0);
        return check_done();
    }
    probe_fixture("xeonmax-flat-hbm");
    uint64_t m = 0;
    CHECK_EQ_INT(info.nnodes, 4);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "hbm", &m), 0);
    CHECK_EQ_U64(m, 0xc);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "ddr", &m), 0);
    CHECK_EQ_U64(m, 0x3);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "3", &m), 0);
    CHECK_EQ_U64(m, 0x8);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "tier4", &m), 0);
    CHECK_EQ_U64(m, 0xf);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "cxl", &m), HM_ENODEV);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "node9", &m), HM_ENODEV);
    CHECK_EQ_INT(hm__os_resolve_device(&info, "", &m), HM_ENODEV);
    CHECK_EQ_U64(info.nodes[2].mem_total, 67108864ull * 1024);
    CHECK_EQ_INT(info.nodes[2].ncpus, 0);
    CHECK_EQ_INT(info.nodes[0].ncpus, 56);
    CHECK_EQ_INT(info.nodes[3].access[0].read_bandwidth, 410000);
    CHECK_STR_EQ(info.nodes[3].access[1].initiators, "node1");
    CHECK(info.has_mem_loads && info.has_mem_stores && info.has_ldlat);
    CHECK_EQ_INT(info.paranoid, 2);
    /* PEBS encoding through sysfs for SPR: aux leader + loads + stores. */
    hm__rec_events_t ev;
    CHECK_EQ_INT(hm__pebs_events(4000, 30, &ev), 0);
    CHECK_EQ_INT(ev.n, 3);
    CHECK_EQ_INT(ev.leader[1], 0);
    CHECK_EQ_INT(ev.sampling[0], 0);
    CHECK_STR_EQ(ev.event, "mem-loads:ldlat=30,mem-stores");
    uint64_t cfg[3] = {0, 0, 0};
    CHECK_EQ_INT(hm__perf_sysfs_encode("cpu", "event=0xcd,umask=0x1,ldlat=30", cfg), 0);
    CHECK_EQ_U64(cfg[0], 0x1cd);
    CHECK_EQ_U64(cfg[1], 30);
    CHECK_EQ_INT(hm__perf_sysfs_encode("cpu", "bogus=1", cfg), HM_ENOPMU);
    CHECK_EQ_INT(hm__ibs_events(4000, &ev), HM_ENOPMU);
    return check_done();
}
