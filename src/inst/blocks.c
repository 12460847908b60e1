/* Dynamic instruction counts: each basic block is decoded once with Zydis,
 * from the coverage hook's return address to the block's end, and its
 * instruction count cached by that address.
 *
 * The count leaves out the instrumentation: the hook calls themselves and
 * the one instruction before an access hook that loads its address argument
 * into rdi. A block ends at a branch or return, or at the next coverage
 * call (the next block, which gcc may place without a branch). Ordinary
 * calls do not end it: the instructions after the callee returns belong to
 * the same block. */
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "inst.h"

#define INIT_BITS 14
#define MAX_BLOCK 4096

static hm__bb_t init_tab[1u << INIT_BITS];
hm__bb_t *hm__bb_tab = init_tab;
unsigned hm__bb_shift = 64 - INIT_BITS;
static uint32_t bb_used;

static int decode(const ZydisDecoder *d, uintptr_t p, ZydisDecodedInstruction *ins, ZydisDecodedOperand *ops)
{
#ifdef ZYDIS_MAX_OPERAND_COUNT_VISIBLE /* Zydis v4 API */
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(d, (const void *)p, 15, ins, ops));
#else
    int ok = ZYAN_SUCCESS(ZydisDecoderDecodeBuffer(d, (const void *)p, 15, ins));
    if (ok)
        memcpy(ops, ins->operands, sizeof(ZydisDecodedOperand) * ins->operand_count);
    return ok;
#endif
}

static int writes_rdi(const ZydisDecodedInstruction *ins, const ZydisDecodedOperand *ops)
{
    if (ins->mnemonic != ZYDIS_MNEMONIC_MOV && ins->mnemonic != ZYDIS_MNEMONIC_LEA)
        return 0;
    return ins->operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
           (ops[0].reg.value == ZYDIS_REGISTER_RDI || ops[0].reg.value == ZYDIS_REGISTER_EDI);
}

static uint32_t count_block(uintptr_t pc)
{
    static ZydisDecoder dec;
    static int ready;
    if (!ready) {
        ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        ready = 1;
    }
    ZydisDecodedInstruction ins;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    uint32_t n = 0;
    int prev_rdi = 0;
    uintptr_t p = pc;
    for (int k = 0; k < MAX_BLOCK; k++) {
        if (!decode(&dec, p, &ins, ops))
            break;
        uintptr_t next = p + ins.length;
        if (ins.meta.category == ZYDIS_CATEGORY_CALL) {
            uintptr_t target = 0;
            if (ins.operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
                target = next + (uintptr_t)ops[0].imm.value.s;
            int h = target ? hm__inst_is_hook(target) : 0;
            if (h) {
                if (h == 2) /* the next block's coverage call */
                    break;
                if (prev_rdi)
                    n--; /* the hook's argument set-up */
                prev_rdi = 0;
                p = next;
                continue;
            }
        }
        n++;
        switch (ins.meta.category) {
        case ZYDIS_CATEGORY_COND_BR:
        case ZYDIS_CATEGORY_UNCOND_BR:
        case ZYDIS_CATEGORY_RET:
        case ZYDIS_CATEGORY_INTERRUPT:
        case ZYDIS_CATEGORY_SYSTEM:
            return n;
        default:
            break;
        }
        if (ins.mnemonic == ZYDIS_MNEMONIC_UD2 || ins.mnemonic == ZYDIS_MNEMONIC_HLT)
            return n;
        prev_rdi = writes_rdi(&ins, ops);
        p = next;
    }
    return n;
}

static void insert(hm__bb_t *tab, unsigned shift, uintptr_t pc, uint32_t n)
{
    uint64_t mask = (1ull << (64 - shift)) - 1;
    uint64_t i = (pc * 0x9e3779b97f4a7c15ull) >> shift;
    while (tab[i].pc && tab[i].pc != pc)
        i = (i + 1) & mask;
    tab[i].pc = pc;
    tab[i].n = n;
}

uint32_t hm__inst_block_slow(uintptr_t pc)
{
    uint64_t mask = (1ull << (64 - hm__bb_shift)) - 1;
    uint64_t i = (pc * 0x9e3779b97f4a7c15ull) >> hm__bb_shift;
    while (hm__bb_tab[i].pc) {
        if (hm__bb_tab[i].pc == pc)
            return hm__bb_tab[i].n;
        i = (i + 1) & mask;
    }
    uint32_t n = count_block(pc);
    int busy = hm__inst_busy;
    hm__inst_busy = 1;
    /* Keep the table at most half full so that probes stay short. */
    if ((bb_used + 1) * 2 > mask + 1) {
        unsigned nshift = hm__bb_shift - 1;
        hm__bb_t *nt = calloc(1ull << (64 - nshift), sizeof(hm__bb_t));
        if (nt) {
            for (uint64_t k = 0; k <= mask; k++)
                if (hm__bb_tab[k].pc)
                    insert(nt, nshift, hm__bb_tab[k].pc, hm__bb_tab[k].n);
            if (hm__bb_tab != init_tab)
                free(hm__bb_tab);
            hm__bb_tab = nt;
            hm__bb_shift = nshift;
        } else if (bb_used + 1 > mask) {
            hm__inst_busy = busy;
            return n; /* table full and no memory: count without caching */
        }
    }
    insert(hm__bb_tab, hm__bb_shift, pc, n);
    bb_used++;
    hm__inst_busy = busy;
    return n;
}
