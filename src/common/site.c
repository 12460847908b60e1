#define _GNU_SOURCE
#include "common.h"

#include <dlfcn.h>
#include <string.h>

/* Site ids must be equal across runs despite ASLR, so each frame is hashed
 * as (module basename, offset in module), never as a raw address. The call
 * instruction's own address (return address - 1) is used, so that two calls
 * on adjacent lines never share an id through their return addresses. */
uint64_t hm__site_id(const uintptr_t *pcs, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        Dl_info info;
        uintptr_t pc = pcs[i] ? pcs[i] - 1 : 0;
        uint64_t key[2] = {0, pc};
        if (pc && dladdr((void *)pc, &info) && info.dli_fname) {
            const char *base = strrchr(info.dli_fname, '/');
            base = base ? base + 1 : info.dli_fname;
            key[0] = hm__hash64(base, strlen(base), 0);
            key[1] = pc - (uintptr_t)info.dli_fbase;
        }
        h = hm__hash64(key, sizeof key, h);
    }
    return h;
}

int hm__site_frame(uintptr_t pc, char *buf, size_t len)
{
    Dl_info info;
    if (!pc || !dladdr((void *)(pc - 1), &info) || !info.dli_fname)
        return snprintf(buf, len, "0x%llx", (unsigned long long)pc);
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    unsigned long long off = (unsigned long long)(pc - 1 - (uintptr_t)info.dli_fbase);
    if (info.dli_sname)
        return snprintf(buf, len, "%s+0x%llx %s", base, off, info.dli_sname);
    return snprintf(buf, len, "%s+0x%llx", base, off);
}
