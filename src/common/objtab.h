/* Live-object interval table: address ranges of live allocations, each with
 * the caller's id, looked up by any address inside them.
 *
 * A treap keyed by start address, with nodes in one array that grows by
 * doubling and reuses freed nodes, so memory follows the peak number of
 * live objects, never the number of allocations made. Lookups, inserts and
 * removals are O(log n) expected, whatever the order of addresses.
 *
 * Live ranges never overlap: an insert first drops every live entry its
 * range overlaps (memory that was realloc'd or munmapped behind our back
 * and is now reused). A zero-size entry covers its first byte, so that
 * malloc(0) results stay distinct and findable.
 *
 * Not thread-safe: callers lock. The table itself never calls malloc when
 * opened with hm__objtab_open_with(), so an allocator interposer can use it
 * with mmap-backed hooks. */
#ifndef HETMEM_COMMON_OBJTAB_H
#define HETMEM_COMMON_OBJTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct hm_objtab hm_objtab_t;
typedef struct {
    uint64_t addr, size;
    uint64_t id; /* the caller's value */
} hm_objtab_entry_t;

/* Memory hooks: alloc returns NULL on failure; free gets the size that was
 * asked of alloc (munmap needs it). */
typedef void *(*hm_objtab_alloc_fn)(size_t size);
typedef void (*hm_objtab_free_fn)(void *p, size_t size);

/* Opens an empty table using malloc/free. 0 or -ENOMEM; close with
 * hm__objtab_close(). */
int hm__objtab_open(hm_objtab_t **out);
/* Same, with the table's memory (header included) from alloc_fn/free_fn. */
int hm__objtab_open_with(hm_objtab_t **out, hm_objtab_alloc_fn alloc_fn, hm_objtab_free_fn free_fn);
/* Frees the table; NULL is allowed. */
void hm__objtab_close(hm_objtab_t *t);

/* Adds [addr, addr+size) with id. Live entries overlapping it are removed
 * first (use hm__objtab_overlap() beforehand to see them). 0 or -ENOMEM
 * (the table is then unchanged). */
int hm__objtab_insert(hm_objtab_t *t, uint64_t addr, uint64_t size, uint64_t id);
/* Removes the entry starting exactly at addr, copying it to *out (may be
 * NULL). 0 or HM_ENOTFOUND. */
int hm__objtab_remove(hm_objtab_t *t, uint64_t addr, hm_objtab_entry_t *out);
/* The live entry containing addr, or NULL. The pointer is valid until the
 * next insert or remove. */
const hm_objtab_entry_t *hm__objtab_find(const hm_objtab_t *t, uint64_t addr);
/* The live entry starting exactly at addr, or NULL (same validity). */
const hm_objtab_entry_t *hm__objtab_get(const hm_objtab_t *t, uint64_t addr);
/* A live entry overlapping [addr, addr+size) (size 0 counts as 1), or NULL:
 * what an insert of that range would replace. Same validity. */
const hm_objtab_entry_t *hm__objtab_overlap(const hm_objtab_t *t, uint64_t addr, uint64_t size);
/* In address order: the entry with the smallest start >= addr, or NULL.
 * Iterate with e = next(t, 0); e; e = next(t, e->addr + 1) (valid as long
 * as the loop body does not insert or remove). */
const hm_objtab_entry_t *hm__objtab_next(const hm_objtab_t *t, uint64_t addr);
size_t hm__objtab_count(const hm_objtab_t *t);
/* Copies every live entry, in address order, to out (room for
 * hm__objtab_count() entries); O(n), where n next() calls take O(n log n).
 * stack is scratch of as many uint32_t (a path from the root is never
 * longer than the count). Returns the number copied. */
size_t hm__objtab_list(const hm_objtab_t *t, hm_objtab_entry_t *out, uint32_t *stack);
/* Bytes of memory the table holds (for tests of its footprint). */
size_t hm__objtab_footprint(const hm_objtab_t *t);

#endif
