/* Dynamic instruction counts: each basic block is decoded once (by the
 * architecture's decoder, src/arch), from the coverage hook's return
 * address to the block's end, and its native instruction count (what the
 * uninstrumented program would execute: see src/arch/x86_64/blocks.c) and
 * select-dependence flag cached by that address. */
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "inst.h"

#define INIT_BITS 14
#define MAX_BLOCK 4096

/* named hm_*: the runtime's own, never a global object of the program (rt.c) */
static hm__bb_t hm_bb_init_tab[1u << INIT_BITS];
hm__bb_t *hm__bb_tab = hm_bb_init_tab;
unsigned hm__bb_shift = 64 - INIT_BITS;
static uint32_t bb_used;

static void insert(hm__bb_t *tab, unsigned shift, hm__bb_t b)
{
    uint64_t mask = (1ull << (64 - shift)) - 1;
    uint64_t i = (b.pc * 0x9e3779b97f4a7c15ull) >> shift;
    while (tab[i].pc && tab[i].pc != b.pc)
        i = (i + 1) & mask;
    tab[i] = b;
}

hm__bb_t hm__inst_block_slow(uintptr_t pc)
{
    uint64_t mask = (1ull << (64 - hm__bb_shift)) - 1;
    uint64_t i = (pc * 0x9e3779b97f4a7c15ull) >> hm__bb_shift;
    while (hm__bb_tab[i].pc) {
        if (hm__bb_tab[i].pc == pc)
            return hm__bb_tab[i];
        i = (i + 1) & mask;
    }
    hm__bb_t n = {pc, 0, 0};
    n.n = hm__arch_block_insns(pc, hm__inst_is_hook, MAX_BLOCK, &n.sel);
    int busy = hm__inst_busy;
    hm__inst_busy = 1;
    /* Keep the table at most half full so that probes stay short. */
    if ((bb_used + 1) * 2 > mask + 1) {
        unsigned nshift = hm__bb_shift - 1;
        hm__bb_t *nt = calloc(1ull << (64 - nshift), sizeof(hm__bb_t));
        if (nt) {
            for (uint64_t k = 0; k <= mask; k++)
                if (hm__bb_tab[k].pc)
                    insert(nt, nshift, hm__bb_tab[k]);
            if (hm__bb_tab != hm_bb_init_tab)
                free(hm__bb_tab);
            hm__bb_tab = nt;
            hm__bb_shift = nshift;
        } else if (bb_used + 1 > mask) {
            hm__inst_busy = busy;
            return n; /* table full and no memory: count without caching */
        }
    }
    insert(hm__bb_tab, hm__bb_shift, n);
    bb_used++;
    hm__inst_busy = busy;
    return n;
}
