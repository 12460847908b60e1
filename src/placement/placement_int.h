/* Internals of placement handles that other components may rely on. */
#ifndef HETMEM_PLACEMENT_INT_H
#define HETMEM_PLACEMENT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "hetmem/placement.h"

/* Whether a top-level rule places the global array NAME, at [addr,
 * addr + size), otherwise than it would an array without a name: only then
 * is the array made an object of that name (a global array that no rule
 * names stays with the program's static data). Asks without counting a
 * hit, so a catch-all rule is not marked as matched by it. */
int hm__placement_names(hm_placement_t *p, const char *name, uintptr_t addr, size_t size);

/* Whether a rule names a site by its source line ("site": "file:line"):
 * then objects must be named by source as they are allocated. */
int hm__placement_has_sources(const hm_placement_t *p);

#endif
