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

/* Calls fn for each global or static array that is an object of a run
 * under placement p (NULL: a run without one, as hetmem record's), with
 * its address, size and symbol, as hm__module_objects() does (flags are
 * its HM_MODOBJ_* flags; fn's return value and *dropped mean what they
 * mean there). The one rule of hetmem sim, hetmem record and hetmem run,
 * so that an object means the same in all three: the program's own arrays
 * in .data and .bss of at least HM_MIN_OBJECT_SIZE bytes, the size from
 * which a heap allocation is tracked by default, except names beginning
 * with "hm_" (hetmem's own buffers); and with a placement, also any array
 * of 4 KiB or more, of the program or of a library loaded with it, that a
 * top-level rule names by symbol (hm__placement_names). A name defined by
 * several modules is the first one's, as the dynamic linker binds it.
 * Returns how many arrays were passed to fn. */
int hm__placement_globals(hm_placement_t *p, int flags,
                          int (*fn)(void *ctx, int module, uintptr_t addr, size_t size, const char *name), void *ctx,
                          int *dropped);

#endif
