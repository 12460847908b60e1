#define _GNU_SOURCE
#include "os/os.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/common.h"
#include "common/env.h"

/* The root is read once without allocating: the preload calls into this file
 * before malloc is usable. */
static char root_[256];
static int root_init_;

const char *hm__os_root(void)
{
    if (!root_init_) {
        const char *r = hm__env_get(HM_ENV_SYSFS_ROOT);
        if (r && *r) {
            size_t n = strlen(r);
            if (n >= sizeof root_)
                n = sizeof root_ - 1;
            memcpy(root_, r, n);
            while (n > 1 && root_[n - 1] == '/')
                n--;
            root_[n] = '\0';
        }
        root_init_ = 1;
    }
    return root_;
}

int hm__os_is_live(void) { return hm__os_root()[0] == '\0'; }

/* Bounded copy that always terminates (names from readdir may be long). */
static void scpy(char *dst, size_t n, const char *s)
{
    size_t l = strlen(s);
    if (l >= n)
        l = n - 1;
    memcpy(dst, s, l);
    dst[l] = '\0';
}

static void path_of(char *buf, size_t len, const char *rel)
{
    snprintf(buf, len, "%s%s", hm__os_root(), rel);
}

int hm__os_read(const char *rel, char *buf, size_t len)
{
    char p[512];
    path_of(p, sizeof p, rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
        buf[--got] = '\0';
    return (int)got;
}

int hm__os_read_int(const char *rel, long long *out)
{
    char b[64];
    int r = hm__os_read(rel, b, sizeof b);
    if (r < 0)
        return r;
    char *end;
    errno = 0;
    long long v = strtoll(b, &end, 10);
    if (errno || end == b)
        return -EINVAL;
    *out = v;
    return 0;
}

static int exists(const char *rel)
{
    char p[512];
    struct stat st;
    path_of(p, sizeof p, rel);
    return stat(p, &st) == 0;
}

/* Counts CPUs in a cpulist such as "0-3,8,10-11". */
static int count_list(const char *s)
{
    int n = 0;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10);
        if (end == s)
            break;
        long b = a;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        if (b >= a)
            n += (int)(b - a + 1);
        s = end;
        if (*s == ',')
            s++;
        else
            break;
    }
    return n;
}

static int in_list(const char *s, int id)
{
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10);
        if (end == s)
            return 0;
        long b = a;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        if (id >= a && id <= b)
            return 1;
        s = end;
        if (*s == ',')
            s++;
        else
            break;
    }
    return 0;
}

static void probe_cpu(hm_os_info_t *o)
{
    char *buf = hm__xmalloc(1 << 16);
    if (hm__os_read("/proc/cpuinfo", buf, 1 << 16) > 0) {
        /* Only the first processor block matters. */
        char *end = strstr(buf, "\n\n");
        if (end)
            *end = '\0';
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            char *key = line, *val = colon + 1;
            char *k = colon;
            while (k > key && isspace((unsigned char)k[-1]))
                k--;
            *k = '\0';
            while (isspace((unsigned char)*val))
                val++;
            if (!strcmp(key, "vendor_id"))
                snprintf(o->vendor, sizeof o->vendor, "%s", val);
            else if (!strcmp(key, "model name"))
                snprintf(o->model, sizeof o->model, "%s", val);
            else if (!strcmp(key, "cpu family"))
                o->family = atoi(val);
            else if (!strcmp(key, "cpu MHz") && atof(val) > 0 && atof(val) < 1e6)
                o->core_ghz = atof(val) / 1e3;
            else if (!strcmp(key, "model"))
                o->model_num = atoi(val);
            else if (!strcmp(key, "flags"))
                o->hypervisor = strstr(val, " hypervisor") != NULL;
            else if (!strcmp(key, "CPU implementer")) { /* arm64 */
                snprintf(o->vendor, sizeof o->vendor, "ARM (implementer %s)", val);
                snprintf(o->arch, sizeof o->arch, "aarch64");
            } else if (!strcmp(key, "CPU part") && !o->model[0])
                snprintf(o->model, sizeof o->model, "part %s", val);
        }
    }
    free(buf);
    /* The nominal clock where cpufreq gives it (kHz): "cpu MHz" is the
     * clock of the moment, which a governor moves. */
    long long khz;
    if (hm__os_read_int("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency", &khz) == 0 && khz > 0 && khz < 1000000000)
        o->core_ghz = (double)khz / 1e6;
    if (!o->arch[0])
        snprintf(o->arch, sizeof o->arch, "%s", o->vendor[0] && strncmp(o->vendor, "ARM", 3) ? "x86_64" : "unknown");
    long long v;
    o->paranoid = hm__os_read_int("/proc/sys/kernel/perf_event_paranoid", &v) == 0 ? (int)v : -100;
    /* The host name through the root, so that a captured tree names its
     * machine; on the live system gethostname(2) when procfs says nothing
     * (it is the same UTS name). */
    if (hm__os_read("/proc/sys/kernel/hostname", o->hostname, sizeof o->hostname) <= 0) {
        o->hostname[0] = '\0';
        if (hm__os_is_live() && gethostname(o->hostname, sizeof o->hostname - 1) != 0)
            o->hostname[0] = '\0';
        o->hostname[sizeof o->hostname - 1] = '\0';
    }
}

static void probe_pmus(hm_os_info_t *o)
{
    char p[512];
    path_of(p, sizeof p, "/sys/bus/event_source/devices");
    o->ibs_op_type = o->spe_type = -1;
    DIR *d = opendir(p);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && o->npmus < HM_OS_MAX_PMUS) {
        if (e->d_name[0] == '.')
            continue;
        hm_os_pmu_t *m = &o->pmus[o->npmus++];
        scpy(m->name, sizeof m->name, e->d_name);
        char rel[256];
        long long t;
        snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/type", m->name);
        m->type = hm__os_read_int(rel, &t) == 0 ? (int)t : -1;
    }
    closedir(d);
    /* Sorted output makes doctor's report and its golden tests stable. */
    for (int i = 1; i < o->npmus; i++)
        for (int j = i; j > 0 && strcmp(o->pmus[j - 1].name, o->pmus[j].name) > 0; j--) {
            hm_os_pmu_t t = o->pmus[j];
            o->pmus[j] = o->pmus[j - 1];
            o->pmus[j - 1] = t;
        }
    for (int i = 0; i < o->npmus; i++) {
        const char *n = o->pmus[i].name;
        char rel[256];
        if (!strcmp(n, "cpu") || !strcmp(n, "cpu_core")) {
            snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/events/mem-loads", n);
            if (exists(rel)) {
                o->has_mem_loads = 1;
                snprintf(o->core_pmu, sizeof o->core_pmu, "%s", n);
                snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/events/mem-stores", n);
                o->has_mem_stores = exists(rel);
                snprintf(rel, sizeof rel, "/sys/bus/event_source/devices/%s/format/ldlat", n);
                o->has_ldlat = exists(rel);
            }
        } else if (!strcmp(n, "ibs_op")) {
            o->ibs_op_type = o->pmus[i].type;
        } else if (!strncmp(n, "arm_spe", 7)) {
            o->spe_type = o->pmus[i].type;
            snprintf(o->spe_name, sizeof o->spe_name, "%s", n);
        }
    }
}

static void read_hmat(int node, int acc, hm_os_hmat_t *h)
{
    char rel[256];
    long long v;
    const char *keys[4] = {"read_latency", "write_latency", "read_bandwidth", "write_bandwidth"};
    uint32_t *dst[4] = {&h->read_latency, &h->write_latency, &h->read_bandwidth, &h->write_bandwidth};
    for (int k = 0; k < 4; k++) {
        snprintf(rel, sizeof rel, "/sys/devices/system/node/node%d/access%d/initiators/%s", node, acc, keys[k]);
        if (hm__os_read_int(rel, &v) == 0) {
            *dst[k] = (uint32_t)v;
            h->valid = 1;
        }
    }
    if (!h->valid)
        return;
    char p[512];
    snprintf(rel, sizeof rel, "/sys/devices/system/node/node%d/access%d/initiators", node, acc);
    path_of(p, sizeof p, rel);
    DIR *d = opendir(p);
    if (!d)
        return;
    int ids[HM_OS_MAX_NODES], n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "node", 4) && isdigit((unsigned char)e->d_name[4]) && n < HM_OS_MAX_NODES)
            ids[n++] = atoi(e->d_name + 4);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int t = ids[j]; ids[j] = ids[j - 1]; ids[j - 1] = t;
        }
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof h->initiators; i++)
        off += (size_t)snprintf(h->initiators + off, sizeof h->initiators - off, "%snode%d", i ? "," : "", ids[i]);
}

static uint64_t meminfo_kb(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p)
        return 0;
    p += strlen(key);
    while (*p == ':' || *p == ' ')
        p++;
    return strtoull(p, NULL, 10);
}

/* Kind of each node, for names like "hbm" in --bind and placements. A node
 * with CPUs is local DRAM. A CPU-less node is HBM when HMAT says it reads at
 * least 1.5x faster than DRAM, "cxl" when it is clearly slower (latency
 * 1.3x or a lower memory tier), and "mem" when nothing tells them apart. */
static void classify(hm_os_info_t *o)
{
    const hm_os_node_t *ref = NULL;
    for (int i = 0; i < o->nnodes; i++)
        if (o->nodes[i].ncpus > 0) {
            ref = &o->nodes[i];
            break;
        }
    for (int i = 0; i < o->nnodes; i++) {
        hm_os_node_t *n = &o->nodes[i];
        const char *k = "mem";
        if (n->ncpus > 0) {
            k = "ddr";
        } else if (ref) {
            const hm_os_hmat_t *a = &n->access[0], *b = &ref->access[0];
            if (a->valid && b->valid && a->read_bandwidth && b->read_bandwidth &&
                a->read_bandwidth * 2 >= b->read_bandwidth * 3)
                k = "hbm";
            else if (a->valid && b->valid && a->read_latency * 10 >= b->read_latency * 13)
                k = "cxl";
            else if (n->tier >= 0 && ref->tier >= 0 && n->tier > ref->tier)
                k = "cxl";
        }
        snprintf(n->kind, sizeof n->kind, "%s", k);
    }
}

static void probe_numa(hm_os_info_t *o)
{
    char list[256];
    if (hm__os_read("/sys/devices/system/node/online", list, sizeof list) <= 0)
        snprintf(list, sizeof list, "0");
    char cpu_list[256] = "";
    hm__os_read("/sys/devices/system/node/has_cpu", cpu_list, sizeof cpu_list);
    for (int id = 0; id < HM_OS_MAX_NODES && o->nnodes < HM_OS_MAX_NODES; id++) {
        if (!in_list(list, id))
            continue;
        hm_os_node_t *n = &o->nodes[o->nnodes++];
        memset(n, 0, sizeof *n);
        n->id = id;
        n->tier = -1;
        char rel[256], buf[4096];
        snprintf(rel, sizeof rel, "/sys/devices/system/node/node%d/meminfo", id);
        if (hm__os_read(rel, buf, sizeof buf) > 0) {
            n->mem_total = meminfo_kb(buf, "MemTotal") * 1024;
            n->mem_free = meminfo_kb(buf, "MemFree") * 1024;
        }
        snprintf(rel, sizeof rel, "/sys/devices/system/node/node%d/cpulist", id);
        if (hm__os_read(rel, n->cpulist, sizeof n->cpulist) > 0)
            n->ncpus = count_list(n->cpulist);
        for (int a = 0; a < 2; a++)
            read_hmat(id, a, &n->access[a]);
    }
    (void)cpu_list;
    char p[512];
    path_of(p, sizeof p, "/sys/devices/virtual/memory_tiering");
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && o->ntiers < HM_OS_MAX_TIERS) {
            if (strncmp(e->d_name, "memory_tier", 11) || !isdigit((unsigned char)e->d_name[11]))
                continue;
            hm_os_tier_t *t = &o->tiers[o->ntiers++];
            t->id = atoi(e->d_name + 11);
            char rel[256];
            snprintf(rel, sizeof rel, "/sys/devices/virtual/memory_tiering/%.200s/nodelist", e->d_name);
            hm__os_read(rel, t->nodelist, sizeof t->nodelist);
        }
        closedir(d);
        for (int i = 1; i < o->ntiers; i++)
            for (int j = i; j > 0 && o->tiers[j - 1].id > o->tiers[j].id; j--) {
                hm_os_tier_t t = o->tiers[j]; o->tiers[j] = o->tiers[j - 1]; o->tiers[j - 1] = t;
            }
        for (int i = 0; i < o->ntiers; i++)
            for (int k = 0; k < o->nnodes; k++)
                if (in_list(o->tiers[i].nodelist, o->nodes[k].id))
                    o->nodes[k].tier = o->tiers[i].id;
    }
    classify(o);
}

static void probe_dax(hm_os_info_t *o)
{
    char p[512];
    path_of(p, sizeof p, "/sys/bus/dax/devices");
    DIR *d = opendir(p);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && o->ndax < HM_OS_MAX_DAX) {
            if (e->d_name[0] == '.')
                continue;
            hm_os_dax_t *x = &o->dax[o->ndax++];
            scpy(x->name, sizeof x->name, e->d_name);
            char rel[256], drv[256];
            long long v;
            snprintf(rel, sizeof rel, "/sys/bus/dax/devices/%s/target_node", x->name);
            x->target_node = hm__os_read_int(rel, &v) == 0 ? (int)v : -1;
            snprintf(rel, sizeof rel, "/sys/bus/dax/devices/%s/size", x->name);
            x->size = hm__os_read_int(rel, &v) == 0 ? (uint64_t)v : 0;
            /* The bound driver tells devdax from kmem (onlined as system RAM). */
            snprintf(rel, sizeof rel, "/sys/bus/dax/devices/%s/driver", x->name);
            char lp[512];
            path_of(lp, sizeof lp, rel);
            ssize_t n = readlink(lp, drv, sizeof drv - 1);
            drv[n > 0 ? n : 0] = '\0';
            snprintf(x->mode, sizeof x->mode, "%s", strstr(drv, "kmem") ? "system-ram" : "devdax");
        }
        closedir(d);
    }
    /* memkind is looked for as a library file, never loaded: loading it would
     * run its constructors in the doctor process. */
    static const char *const libs[] = {
        "/usr/lib/x86_64-linux-gnu/libmemkind.so.0", "/usr/lib/aarch64-linux-gnu/libmemkind.so.0",
        "/usr/lib64/libmemkind.so.0", "/usr/local/lib/libmemkind.so.0", "/usr/lib/libmemkind.so.0"};
    for (size_t i = 0; i < HM_ARRAY_LEN(libs); i++)
        if (exists(libs[i])) {
            snprintf(o->memkind, sizeof o->memkind, "%s", libs[i]);
            break;
        }
}

void hm__os_probe(hm_os_info_t *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->root, sizeof o->root, "%s", hm__os_root());
    probe_cpu(o);
    probe_pmus(o);
    probe_numa(o);
    probe_dax(o);
}

int hm__os_resolve_device(const hm_os_info_t *o, const char *name, uint64_t *mask)
{
    uint64_t m = 0;
    char *end;
    if (!name || !*name)
        return hm__errf(HM_ENODEV, "empty device name");
    const char *num = !strncmp(name, "node", 4) ? name + 4 : name;
    if (isdigit((unsigned char)*num)) {
        long id = strtol(num, &end, 10);
        if (!*end)
            for (int i = 0; i < o->nnodes; i++)
                if (o->nodes[i].id == id)
                    m |= 1ull << id;
    } else if (!strncmp(name, "tier", 4) && isdigit((unsigned char)name[4])) {
        long id = strtol(name + 4, &end, 10);
        for (int i = 0; !*end && i < o->nnodes; i++)
            if (o->nodes[i].tier == id)
                m |= 1ull << o->nodes[i].id;
    } else {
        for (int i = 0; i < o->nnodes; i++)
            if (!strcmp(o->nodes[i].kind, name) ||
                (!strcmp(name, "far") && !strcmp(o->nodes[i].kind, "cxl")))
                m |= 1ull << o->nodes[i].id;
    }
    /* A node without memory cannot hold data. */
    for (int i = 0; i < o->nnodes; i++)
        if ((m >> o->nodes[i].id & 1) && o->nodes[i].mem_total == 0 && hm__os_is_live() == 0)
            m &= ~(1ull << o->nodes[i].id);
    if (m) {
        *mask = m;
        return 0;
    }
    char known[256];
    size_t off = 0;
    for (int i = 0; i < o->nnodes && off < sizeof known; i++)
        off += (size_t)snprintf(known + off, sizeof known - off, "%snode%d (%s%s%d)", i ? ", " : "",
                                o->nodes[i].id, o->nodes[i].kind, o->nodes[i].tier >= 0 ? ", tier" : "",
                                o->nodes[i].tier >= 0 ? o->nodes[i].tier : o->nodes[i].id);
    return hm__errf(HM_ENODEV, "'%s' is not a NUMA node, tier or kind here; known: %s (see 'hetmem doctor')",
                    name, known);
}

/* The NUMA system calls are made directly rather than through libnuma's
 * wrappers (which are the same one-line syscall()s): linking libnuma for
 * them would run its constructor, which reads /proc and sysfs and probes
 * the memory policy, at the start of every program the preload library is
 * loaded into, about a millisecond each. numaif.h still gives the
 * constants. */
static long sys_mbind(void *addr, size_t len, int mode, const unsigned long *nm, unsigned long maxnode, unsigned flags)
{
    return syscall(SYS_mbind, addr, len, mode, nm, maxnode, flags);
}

static long sys_move_pages(size_t n, void **pages, const int *nodes, int *status, int flags)
{
    return syscall(SYS_move_pages, 0, n, pages, nodes, status, flags);
}

static void mask_to(uint64_t mask, unsigned long *nm)
{
    nm[0] = (unsigned long)mask;
}

int hm__os_mbind(void *addr, size_t len, uint64_t mask, int move)
{
    unsigned long nm[1];
    mask_to(mask, nm);
    unsigned flags = move ? MPOL_MF_MOVE : 0;
    /* A single node is a strict bind; several nodes (a tier) interleave so
     * that the tier's bandwidth is used. */
    int mode = __builtin_popcountll(mask) > 1 ? MPOL_INTERLEAVE : MPOL_BIND;
    if (sys_mbind(addr, len, mode, nm, 64, flags) != 0)
        return -errno;
    return 0;
}

int hm__os_set_mempolicy_bind(uint64_t mask)
{
    unsigned long nm[1];
    mask_to(mask, nm);
    if (syscall(SYS_set_mempolicy, MPOL_BIND, nm, 64) != 0)
        return -errno;
    return 0;
}

int hm__os_page_nodes(void *const *pages, size_t n, int *status)
{
    if (sys_move_pages(n, (void **)pages, NULL, status, 0) != 0)
        return -errno;
    return 0;
}

int hm__os_move_pages(void *const *pages, size_t n, int node, int *status)
{
    int *nodes = hm__xmalloc(n * sizeof *nodes);
    for (size_t i = 0; i < n; i++)
        nodes[i] = node;
    long r = sys_move_pages(n, (void **)pages, nodes, status, MPOL_MF_MOVE);
    int err = r < 0 ? -errno : 0;
    free(nodes);
    return err;
}

int hm__os_addr_node(const void *addr, int *node)
{
    int mode = -1;
    if (syscall(SYS_get_mempolicy, &mode, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return -errno;
    *node = mode;
    return 0;
}

int hm__os_perf_open(void *attr, int pid, int cpu, int group_fd, unsigned long flags)
{
    long fd = syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
    return fd < 0 ? -errno : (int)fd;
}
