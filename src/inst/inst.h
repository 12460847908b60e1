/* libhetmem_inst internals: state shared by the hooks and the runtime. */
#ifndef HETMEM_INST_H
#define HETMEM_INST_H

#include "sim/sim_int.h"

/* The simulator of this process; NULL while inactive (not run under
 * `hetmem sim`, or before initialisation), which makes every hook a no-op. */
extern hm_sim_t *hm__inst_sim;
/* Non-zero while the runtime itself runs: its own allocations are not the
 * program's. Single-threaded by construction (threads are refused). */
extern int hm__inst_busy;

void hm__inst_init(void);
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
