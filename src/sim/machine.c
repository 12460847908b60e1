/* Machine files: parse and validate (docs/machines.md). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env.h"
#include "sim_int.h"

#define CACHE_PER_CORE_MAX (512ull << 20)

#ifndef HETMEM_SOURCE_DIR
#define HETMEM_SOURCE_DIR ""
#endif

void hm_sim_machine_close(hm_sim_machine_t *m)
{
    if (!m)
        return;
    free(m->json);
    free(m);
}

static int bad(const char *what, const char *fmt, const char *a, const char *b)
{
    return hm__errf(HM_EBADMACHINE, "%s: %s%s%s", what, a, fmt, b ? b : "");
}

/* Unknown keys are refused so that a misspelt figure never silently falls
 * back to a default. */
static int check_keys(const json_t *o, const char *const *keys, const char *what, const char *where)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        int ok = 0;
        for (int i = 0; keys[i]; i++)
            ok |= strcmp(k, keys[i]) == 0;
        if (!ok)
            return hm__errf(HM_EBADMACHINE, "%s: %sunknown key \"%s\"", what, where, k);
    }
    return 0;
}

static int num(const json_t *o, const char *key, int required, double def, double lo, double hi, double *out,
               const char *what, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required)
            return hm__errf(HM_EBADMACHINE, "%s: %smissing \"%s\"", what, where, key);
        *out = def;
        return 0;
    }
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi)
        return hm__errf(HM_EBADMACHINE, "%s: %s\"%s\" must be a number in [%g, %g]", what, where, key, lo, hi);
    *out = json_number_value(v);
    return 0;
}

static int size_of(const json_t *o, const char *key, int required, uint64_t *out, const char *what, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required)
            return hm__errf(HM_EBADMACHINE, "%s: %smissing \"%s\"", what, where, key);
        *out = 0;
        return 0;
    }
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && hm__parse_size(json_string_value(v), out) == 0)
        return 0;
    return hm__errf(HM_EBADMACHINE, "%s: %s\"%s\" must be a size (bytes or \"48K\", \"2M\", \"16G\")", what, where, key);
}

static int str_of(const json_t *o, const char *key, char *buf, size_t len, const char *what, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_string(v) || !*json_string_value(v) || strlen(json_string_value(v)) >= len)
        return hm__errf(HM_EBADMACHINE, "%s: %s\"%s\" must be a non-empty string (< %zu chars)", what, where, key, len);
    snprintf(buf, len, "%s", json_string_value(v));
    return 0;
}

static const char *const top_keys[] = {"name", "description", "sources", "cores", "core", "line", "burst_window_us",
                                       "caches", "devices", NULL};
static const char *const core_keys[] = {"freq_ghz", "base_cpi", "rob", "mlp", "prefetch", NULL};
static const char *const cache_keys[] = {"name", "size", "assoc", "latency", "shared", NULL};
static const char *const dev_keys[] = {"name", "read_latency_ns", "write_latency_ns", "read_bandwidth_gbs",
                                       "write_bandwidth_gbs", "capacity", "channels", "loaded_latency", "note", NULL};

static int from_json(hm_sim_machine_t *m, json_t *root, const char *what)
{
    int rc;
    double d;
    char where[64];
    if (!json_is_object(root))
        return bad(what, "top level must be an object", "", NULL);
    if ((rc = check_keys(root, top_keys, what, "")) < 0)
        return rc;
    if ((rc = str_of(root, "name", m->name, sizeof m->name, what, "")) < 0)
        return rc;
    if ((rc = num(root, "cores", 1, 1, 1, 4096, &d, what, "")) < 0)
        return rc;
    m->cores = (uint32_t)d;
    if ((rc = num(root, "line", 0, 64, 16, 1024, &d, what, "")) < 0)
        return rc;
    m->line = (uint32_t)d;
    if ((rc = num(root, "burst_window_us", 0, 200, 0, 1e6, &d, what, "")) < 0)
        return rc;
    m->burst_ns = d * 1000;
    if (m->line & (m->line - 1))
        return bad(what, "\"line\" must be a power of two", "", NULL);
    json_t *core = json_object_get(root, "core");
    if (!core || !json_is_object(core))
        return bad(what, "missing \"core\" object", "", NULL);
    if ((rc = check_keys(core, core_keys, what, "core: ")) < 0 ||
        (rc = num(core, "freq_ghz", 1, 0, 0.1, 10, &m->freq_ghz, what, "core: ")) < 0 ||
        (rc = num(core, "base_cpi", 1, 0, 0.05, 20, &m->base_cpi, what, "core: ")) < 0)
        return rc;
    if ((rc = num(core, "rob", 1, 0, 1, 4096, &d, what, "core: ")) < 0)
        return rc;
    m->rob = (uint32_t)d;
    if ((rc = num(core, "mlp", 1, 0, 1, HM_SIM_MAX_MLP, &d, what, "core: ")) < 0)
        return rc;
    m->mlp = (uint32_t)d;
    if ((rc = num(core, "prefetch", 0, 0, 0, 64, &d, what, "core: ")) < 0)
        return rc;
    m->prefetch = (uint32_t)d;

    json_t *caches = json_object_get(root, "caches");
    if (!json_is_array(caches) || json_array_size(caches) < 1 || json_array_size(caches) > HM_SIM_MAX_LEVELS)
        return hm__errf(HM_EBADMACHINE, "%s: \"caches\" must be an array of 1..%d levels", what, HM_SIM_MAX_LEVELS);
    m->nlevels = (int)json_array_size(caches);
    for (int i = 0; i < m->nlevels; i++) {
        json_t *c = json_array_get(caches, (size_t)i);
        hm__cache_cfg_t *l = &m->level[i];
        snprintf(where, sizeof where, "caches[%d]: ", i);
        if (!json_is_object(c))
            return hm__errf(HM_EBADMACHINE, "%s: %smust be an object", what, where);
        if ((rc = check_keys(c, cache_keys, what, where)) < 0 ||
            (rc = str_of(c, "name", l->name, sizeof l->name, what, where)) < 0 ||
            (rc = size_of(c, "size", 1, &l->size, what, where)) < 0 ||
            (rc = num(c, "latency", 1, 0, 0, 10000, &l->latency_cyc, what, where)) < 0)
            return rc;
        if ((rc = num(c, "assoc", 1, 0, 1, 32, &d, what, where)) < 0)
            return rc;
        l->assoc = (uint32_t)d;
        json_t *sh = json_object_get(c, "shared");
        if (sh && !json_is_boolean(sh))
            return hm__errf(HM_EBADMACHINE, "%s: %s\"shared\" must be true or false", what, where);
        l->shared = sh && json_is_true(sh);
        uint64_t per = l->shared ? l->size / m->cores : l->size;
        if (per < (uint64_t)l->assoc * m->line)
            return hm__errf(HM_EBADMACHINE, "%s: %s\"size\" %llu (per core %llu) is smaller than one set (%u ways x %u B)",
                            what, where, (unsigned long long)l->size, (unsigned long long)per, l->assoc, m->line);
        /* The simulated thread keeps state for every line of its share
         * (about 20 bytes a line): 512 MiB per core, far above any
         * processor cache, keeps that within 160 MiB a level. */
        if (per > CACHE_PER_CORE_MAX)
            return hm__errf(HM_EBADMACHINE, "%s: %s\"size\" %llu (per core %llu) is above the %llu per core the simulator supports",
                            what, where, (unsigned long long)l->size, (unsigned long long)per,
                            (unsigned long long)CACHE_PER_CORE_MAX);
    }
    json_t *devs = json_object_get(root, "devices");
    if (!json_is_array(devs) || json_array_size(devs) < 1 || json_array_size(devs) > HM_SIM_MAX_DEVICES)
        return hm__errf(HM_EBADMACHINE, "%s: \"devices\" must be an array of 1..%d devices, default first", what,
                        HM_SIM_MAX_DEVICES);
    m->ndevices = (int)json_array_size(devs);
    for (int i = 0; i < m->ndevices; i++) {
        json_t *o = json_array_get(devs, (size_t)i);
        hm__device_cfg_t *v = &m->dev[i];
        snprintf(where, sizeof where, "devices[%d]: ", i);
        if (!json_is_object(o))
            return hm__errf(HM_EBADMACHINE, "%s: %smust be an object", what, where);
        if ((rc = check_keys(o, dev_keys, what, where)) < 0 ||
            (rc = str_of(o, "name", v->name, sizeof v->name, what, where)) < 0 ||
            (rc = num(o, "read_latency_ns", 1, 0, 1, 100000, &v->read_lat_ns, what, where)) < 0 ||
            (rc = num(o, "write_latency_ns", 0, v->read_lat_ns, 1, 100000, &v->write_lat_ns, what, where)) < 0 ||
            (rc = num(o, "read_bandwidth_gbs", 1, 0, 0.01, 100000, &v->read_bw_gbs, what, where)) < 0 ||
            (rc = num(o, "write_bandwidth_gbs", 0, v->read_bw_gbs, 0.01, 100000, &v->write_bw_gbs, what, where)) < 0 ||
            (rc = size_of(o, "capacity", 0, &v->capacity, what, where)) < 0)
            return rc;
        if ((rc = num(o, "channels", 0, 1, 1, HM_SIM_MAX_CHANNELS, &d, what, where)) < 0)
            return rc;
        v->channels = (uint32_t)d;
        json_t *ll = json_object_get(o, "loaded_latency");
        if (ll) {
            if (!json_is_array(ll) || json_array_size(ll) < 1 || json_array_size(ll) > HM_SIM_MAX_LL)
                return hm__errf(HM_EBADMACHINE, "%s: %s\"loaded_latency\" must be an array of 1..%d [utilisation, ns] pairs",
                                what, where, HM_SIM_MAX_LL);
            v->nll = (int)json_array_size(ll);
            for (int k = 0; k < v->nll; k++) {
                json_t *pt = json_array_get(ll, (size_t)k);
                json_t *pu = json_array_get(pt, 0), *pn = json_array_get(pt, 1);
                double prev_u = k ? v->ll_u[k - 1] : 0, prev_ns = k ? v->ll_ns[k - 1] : v->read_lat_ns;
                if (!json_is_array(pt) || json_array_size(pt) != 2 || !json_is_number(pu) || !json_is_number(pn) ||
                    json_number_value(pu) <= prev_u || json_number_value(pu) > 1 ||
                    json_number_value(pn) < prev_ns || json_number_value(pn) > 100000)
                    return hm__errf(HM_EBADMACHINE,
                                    "%s: %s\"loaded_latency\"[%d] must be [utilisation, ns] with utilisation rising "
                                    "in (0, 1] and ns not below the previous point (nor read_latency_ns)",
                                    what, where, k);
                v->ll_u[k] = json_number_value(pu);
                v->ll_ns[k] = json_number_value(pn);
            }
        }
        for (int k = 0; k < i; k++)
            if (strcmp(m->dev[k].name, v->name) == 0)
                return hm__errf(HM_EBADMACHINE, "%s: %sduplicate device name \"%s\"", what, where, v->name);
        m->devnames[i] = v->name;
    }
    m->devnames[m->ndevices] = NULL;
    m->json = json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT);
    if (!m->json)
        return -ENOMEM;
    return 0;
}

static int finish(hm_sim_machine_t **out, json_t *root, const char *what)
{
    hm_sim_machine_t *m = hm__xcalloc(1, sizeof *m);
    int rc = from_json(m, root, what);
    json_decref(root);
    if (rc < 0) {
        hm_sim_machine_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int hm_sim_machine_load(hm_sim_machine_t **out, const char *path)
{
    hm__errclear();
    json_t *root;
    *out = NULL;
    int rc = hm__json_load_file(path, &root);
    return rc < 0 ? rc : finish(out, root, path);
}

int hm_sim_machine_parse(hm_sim_machine_t **out, const char *what, const char *json)
{
    hm__errclear();
    json_t *root;
    *out = NULL;
    int rc = hm__json_load_string(what, json, &root);
    return rc < 0 ? rc : finish(out, root, what);
}

int hm_sim_machine_find(const char *name, const char *exe_dir, char *buf, size_t len)
{
    hm__errclear();
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 5 && strcmp(name + n - 5, ".json") == 0)) {
        snprintf(buf, len, "%s", name);
        return 0;
    }
    const char *env = hm__env_get(HM_ENV_MACHINES);
    /* An installation (PREFIX/bin next to PREFIX/share/hetmem/machines), then
     * a build tree (build/bin, two levels below share/machines). */
    const char *dirs[5] = {env, NULL, NULL, NULL, HETMEM_SOURCE_DIR "/share/machines"};
    char d0[PATH_MAX], d1[PATH_MAX], d2[PATH_MAX];
    if (exe_dir) {
        snprintf(d0, sizeof d0, "%s/../share/hetmem/machines", exe_dir);
        snprintf(d1, sizeof d1, "%s/../share/machines", exe_dir);
        snprintf(d2, sizeof d2, "%s/../../share/machines", exe_dir);
        dirs[1] = d0;
        dirs[2] = d1;
        dirs[3] = d2;
    }
    for (size_t i = 0; i < HM_ARRAY_LEN(dirs); i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        snprintf(buf, len, "%s/%s.json", dirs[i], name);
        if (access(buf, R_OK) == 0)
            return 0;
    }
    return hm__errf(HM_ENOTFOUND, "no preset \"%s\" (looked in $HETMEM_MACHINES, %s/../share/hetmem/machines, %s)", name,
                    exe_dir ? exe_dir : "?", HETMEM_SOURCE_DIR "/share/machines");
}

const char *hm_sim_machine_name(const hm_sim_machine_t *m) { return m->name; }
const char *hm_sim_machine_json(const hm_sim_machine_t *m) { return m->json; }
int hm_sim_machine_ndevices(const hm_sim_machine_t *m) { return m->ndevices; }
const char *const *hm_sim_machine_device_names(const hm_sim_machine_t *m) { return m->devnames; }

int hm_sim_machine_device_index(const hm_sim_machine_t *m, const char *name)
{
    hm__errclear();
    char known[256];
    size_t off = 0;
    known[0] = 0;
    for (int i = 0; i < m->ndevices; i++) {
        if (strcmp(m->dev[i].name, name) == 0)
            return i;
        if (off < sizeof known)
            off += (size_t)snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "", m->dev[i].name);
    }
    return hm__errf(HM_ENODEV, "unknown device \"%s\" (machine %s has: %s)", name, m->name, known);
}
