/* The soft sampler's decoding side where there is no instruction decoder
 * (every architecture but x86-64). The backend is refused before any of
 * this runs (hm_backend_check in src/record/backend.c); the cache still
 * opens so that callers need no special case, and resolves nothing. */
#include <stdlib.h>

#include "arch/arch.h"

struct hm__soft_cache {
    hm__soft_stats_t st;
};

int hm__soft_cache_open(hm__soft_cache_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : -12;
}

void hm__soft_cache_close(hm__soft_cache_t *c) { free(c); }

const hm__soft_stats_t *hm__soft_cache_stats(const hm__soft_cache_t *c) { return &c->st; }

int hm__soft_resolve(hm__soft_cache_t *c, const hm__soft_raw_t *raw, uint64_t *addr, uint64_t *ip, int *access)
{
    (void)addr, (void)ip, (void)access;
    c->st.total++;
    c->st.faulted += raw->faulted != 0;
    c->st.nofunc++;
    return 0;
}

int hm__soft_resolve_code(const uint8_t *code, size_t len, uint64_t code_addr, const hm__soft_raw_t *raw,
                          uint64_t *addr, uint64_t *ip, int *access, int *how)
{
    (void)code, (void)len, (void)code_addr, (void)raw, (void)addr, (void)ip, (void)access;
    *how = 0;
    return -1;
}
