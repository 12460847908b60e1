/* Basic-block lengths on x86-64, decoded with Zydis.
 *
 * The count leaves out the instrumentation: the hook calls themselves and
 * the one instruction before an access hook that loads its address argument
 * into rdi. A block ends at a branch or return, or at the next coverage
 * call (the next block, which gcc may place without a branch). Ordinary
 * calls do not end it: the instructions after the callee returns belong to
 * the same block. */
#include <string.h>

#include <Zydis/Zydis.h>

#include "arch/arch.h"

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

uint32_t hm__arch_block_insns(uintptr_t pc, int (*is_hook)(uintptr_t), unsigned max)
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
    for (unsigned k = 0; k < max; k++) {
        if (!decode(&dec, p, &ins, ops))
            break;
        uintptr_t next = p + ins.length;
        if (ins.meta.category == ZYDIS_CATEGORY_CALL) {
            uintptr_t target = 0;
            if (ins.operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
                target = next + (uintptr_t)ops[0].imm.value.s;
            int h = target ? is_hook(target) : 0;
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
