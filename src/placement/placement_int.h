/* Internals of placement handles that other components may rely on. */
#ifndef HETMEM_PLACEMENT_INT_H
#define HETMEM_PLACEMENT_INT_H

#include <stdint.h>

#include "hetmem/placement.h"

/* A number that tells this handle apart from every other placement handle
 * loaded in the process, freed ones included (an address can be reused; a
 * serial is not), so that what was derived from a placement (the
 * estimator's compiled placements) can be kept and found again by it. */
uint64_t hm__placement_serial(const hm_placement_t *p);

/* hm_placement_match without counting a hit: for asking how a candidate
 * would be placed before deciding to make it an object (a global array
 * that no rule names is not one, and must not mark a catch-all rule as
 * matched). */
void hm__placement_probe(hm_placement_t *p, const char *phase, const hm_object_desc_t *obj, hm_place_t *out);

#endif
