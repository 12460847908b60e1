/* libhetmem_inst internals: state shared by the hooks and the runtime. */
#ifndef HETMEM_INST_H
#define HETMEM_INST_H

#include "sim/sim.h"

/* The simulator, in the thread it simulates (the one that started the
 * program); NULL while inactive (not run under `hetmem sim`, or before
 * initialisation) and in every other thread, which makes every hook a
 * no-op there. Thread-local: threads that run no instrumented code (an MPI
 * library's progress thread) are allowed. */
extern __thread hm_sim_t *hm__inst_sim __attribute__((tls_model("initial-exec")));
/* Non-zero while a simulation runs in this process: the coverage hook,
 * called in every instrumented block, refuses the run when it finds a
 * simulation but none in its own thread (hm__inst_foreign_thread()). */
extern int hm__inst_on;
void hm__inst_foreign_thread(void) __attribute__((noreturn, cold));
/* Non-zero while the runtime itself runs: its own allocations are not the
 * program's. Only the simulated thread reaches it (others are refused at
 * their first instrumented block). */
extern int hm__inst_busy;

void hm__inst_init(void);
/* The runtime's own heap (heap.c): every allocation made while
 * hm__inst_busy is set comes from a private region, not the program's
 * heap. 0 or -errno (the runtime then shares glibc's heap). */
int hm__rtheap_init(void);
/* Per-block instruction counts, keyed by the coverage hook's return
 * address: open addressing, decoded once per block (blocks.c, with src/arch). */
typedef struct {
    uintptr_t pc;
    uint32_t n;   /* native instructions */
    uint32_t sel; /* 1: a select of a loaded value feeds its next load's address */
} hm__bb_t;
extern hm__bb_t *hm__bb_tab;
extern unsigned hm__bb_shift;
hm__bb_t hm__inst_block_slow(uintptr_t pc);
static inline hm__bb_t hm__inst_block(uintptr_t pc)
{
    const hm__bb_t *e = &hm__bb_tab[(pc * 0x9e3779b97f4a7c15ull) >> hm__bb_shift];
    if (HM_LIKELY(e->pc == pc))
        return *e;
    return hm__inst_block_slow(pc);
}
/* Whether @p addr is the entry of one of the runtime's hooks. */
int hm__inst_is_hook(uintptr_t addr);
void hm__inst_progress_start(void);

#define HM_RET_IP ((uintptr_t)__builtin_return_address(0))

#endif
