/* Set-associative cache arrays; lookups live in core.c's hot path. */
#include <errno.h>
#include <stdlib.h>

#include "sim_int.h"

int hm__cache_init(hm__cache_t *c, uint64_t size, uint32_t assoc, uint32_t line, double lat_ns)
{
    uint64_t sets = size / ((uint64_t)assoc * line);
    if (sets < 1 || sets > (1u << 28))
        return HM_EBADMACHINE;
    c->sets = (uint32_t)sets;
    c->assoc = assoc;
    /* Shared caches get size/cores per thread, which is rarely a power of
     * two; such caches index sets by a multiply-shift of a hashed line
     * number (as hashed LLC slices do) instead of a mask. */
    c->set_mask = (sets & (sets - 1)) == 0 ? (uint32_t)sets - 1 : 0;
    c->lat_ns = lat_ns;
    c->stride = (assoc + 7) & ~7u;
    c->wmask = assoc == 32 ? 0xffffffffu : (1u << assoc) - 1;
    c->tag = calloc(sets * assoc, sizeof(uint64_t));
    c->ptag = calloc(sets * c->stride, sizeof(uint16_t));
    c->mru = calloc(sets, sizeof(uint32_t));
    c->dirty = calloc(sets * assoc, 1);
    c->ready = calloc(sets * assoc, sizeof(double));
    if (!c->tag || !c->ptag || !c->mru || !c->dirty || !c->ready) {
        hm__cache_free(c);
        return -ENOMEM;
    }
    return 0;
}

void hm__cache_free(hm__cache_t *c)
{
    free(c->tag);
    free(c->ptag);
    free(c->mru);
    free(c->dirty);
    free(c->ready);
    c->tag = NULL;
    c->ptag = NULL;
    c->mru = NULL;
    c->dirty = NULL;
    c->ready = NULL;
}
