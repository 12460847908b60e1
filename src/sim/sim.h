/* The simulator's interface to the instrumentation runtime (src/inst): the
 * per-access hot path, as static inline functions.
 *
 * The hooks that hetmem-cc's code calls before every load and store do not
 * simulate the access on the spot: they queue it, with the instruction
 * count at which it happened, and the simulator (core.c) runs the queue in
 * batches, in hm__sim_drain(). Queueing is a few stores, so it is inlined
 * into every hook: no call per access beyond the hook itself. The model
 * sees exactly the sequence of instruction counts and accesses it would see
 * if each access were simulated at once, so results do not depend on where
 * the batches end.
 *
 * Only the queue is visible here: it is the first member of the simulator's
 * state (struct hm_sim, sim_int.h, private to src/sim), so a hm_sim_t
 * pointer points at it. Everything else goes through hetmem/sim.h.
 * Single-threaded: a simulator belongs to the thread it simulates. */
#ifndef HETMEM_SIM_SIM_H
#define HETMEM_SIM_SIM_H

#include <stdint.h>

#include "common/common.h"
#include "hetmem/sim.h"

/* One queued access: address, instruction count at the access, the 8-byte
 * value loaded (0 if none), and the program counter with the size in bits
 * 48..62 and the store flag in bit 63. Size 0 is a select mark
 * (hm__sim_select_mark()). */
typedef struct {
    uint64_t addr, icount, value, ipx;
} hm__qent_t;
#define HM_SIM_QUEUE 256

/* The state the hooks write. */
typedef struct {
    uint64_t live_icount;       /* instructions retired so far, hook-fed */
    uint32_t qn;                /* entries queued in q */
    int done;                   /* the report was taken: accesses are ignored */
    hm__qent_t q[HM_SIM_QUEUE];
} hm__sim_hot_t;

static inline hm__sim_hot_t *hm__sim_hot(hm_sim_t *s) { return (hm__sim_hot_t *)(void *)s; }

/* Simulates the accesses queued so far (core.c). Every entry point that
 * reads or changes the model's state calls it first. */
void hm__sim_drain(hm_sim_t *s);
/* Size of the live allocation starting at @p addr, or 0 (objects.c). */
uint64_t hm__sim_alloc_size(const hm_sim_t *s, uint64_t addr);

static inline void hm__sim_enqueue(hm_sim_t *s, uint64_t addr, unsigned size, int st, uint64_t value, uint64_t ip)
{
    hm__sim_hot_t *h = hm__sim_hot(s);
    hm__qent_t *e = &h->q[h->qn];
    e->addr = addr;
    e->icount = h->live_icount;
    e->value = value;
    e->ipx = (ip & 0xffffffffffffull) | (uint64_t)size << 48 | (uint64_t)st << 63;
    if (HM_UNLIKELY(++h->qn == HM_SIM_QUEUE))
        hm__sim_drain(s);
}

/* A load of @p size bytes at @p addr by the instruction at @p ip; @p value
 * is the value it loads (used for 4- and 8-byte loads only: pointer and
 * index chases are detected from it). Same as hm_sim_load(). */
static inline void hm__sim_load(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t value, uint64_t ip)
{
    if (HM_UNLIKELY(hm__sim_hot(s)->done))
        return;
    hm__sim_enqueue(s, addr, size, 0, size == 8 || size == 4 ? value : 0, ip);
}

/* A store, as hm_sim_store(). */
static inline void hm__sim_store(hm_sim_t *s, uint64_t addr, unsigned size, uint64_t ip)
{
    if (HM_UNLIKELY(hm__sim_hot(s)->done))
        return;
    hm__sim_enqueue(s, addr, size, 1, 0, ip);
}

/* @p n instructions retired (the coverage hook, once per basic block): one
 * add; the model catches up in hm__sim_drain(). */
static inline void hm__sim_instr(hm_sim_t *s, uint64_t n) { hm__sim_hot(s)->live_icount += n; }

/* The block about to run computes its next load's address from a
 * comparison of a value loaded by the previous loads (a binary search
 * compiled to cmov), so that load waits for them. Queued like an access
 * (size 0), so that it falls between the right loads: the ones before it
 * are those the next load waits for. */
static inline void hm__sim_select_mark(hm_sim_t *s)
{
    if (!hm__sim_hot(s)->done)
        hm__sim_enqueue(s, 0, 0, 0, 0, 0);
}

#endif
