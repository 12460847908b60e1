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

#endif
