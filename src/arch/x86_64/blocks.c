/* Basic-block lengths on x86-64, decoded with Zydis (src/inst/blocks.c
 * calls this once per block, from the coverage hook's return address, and
 * caches the result by that address).
 *
 * The count is meant to be the native program's, so it leaves out what
 * exists only because every access is a call into the runtime:
 *  - the hook calls themselves;
 *  - each hook's argument set-up: the copy or address computation into rdi
 *    since the previous call (a load into rdi is kept: it is the program
 *    reading a pointer);
 *  - spills and reloads: plain moves between a register and a stack slot.
 *    Vector and many general registers are caller-saved, so a value live
 *    across a hook is spilled before it and reloaded after; tsan never
 *    instruments register-allocator traffic, so a stack move that is not
 *    the access of an addressable local whose address a hook was given is
 *    such traffic. (Native spills under register pressure are discounted
 *    too: an undercount, small at -O2.)
 *  - pointer bumps (add/sub/lea of a constant) of a register that carried a
 *    hook's address: the hook needs the address in a register, so the
 *    compiler walks one pointer per array where native code indexes all of
 *    them from one induction variable with scaled addressing. A bumped
 *    register that the block's compare reads is the loop's own induction
 *    variable and is kept.
 * Loops that native code vectorises stay scalar in the instrumented build
 * (each access is a call): such loops are still counted per scalar
 * iteration (docs/sim.md).
 * A block ends at a branch or return, or at the next coverage call (the
 * next block, which gcc may place without a branch). Ordinary calls do not
 * end it: the instructions after the callee returns belong to the same
 * block. */
#include <stdint.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "arch/arch.h"

/* The caller's hook test and block limit, set on entry to
 * hm__arch_block_insns() (the instrumentation runtime decodes on one thread
 * at a time). */
static int (*is_hook)(uintptr_t);
static unsigned max_block;

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
    /* A copy or an address computation; a load into rdi is program work
     * (the value is a pointer the program follows). */
    if (ins->mnemonic == ZYDIS_MNEMONIC_MOV) {
        if (ins->operand_count < 2 || ops[1].type != ZYDIS_OPERAND_TYPE_REGISTER)
            return 0;
    } else if (ins->mnemonic != ZYDIS_MNEMONIC_LEA) {
        return 0;
    }
    return ins->operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
           (ops[0].reg.value == ZYDIS_REGISTER_RDI || ops[0].reg.value == ZYDIS_REGISTER_EDI);
}

/* 64-bit general-purpose register number 0..15 of @p r (any width), or -1. */
static int gpr(ZydisRegister r)
{
    if (r == ZYDIS_REGISTER_NONE)
        return -1;
    ZydisRegister w = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    if (w < ZYDIS_REGISTER_RAX || w > ZYDIS_REGISTER_R15)
        return -1;
    return (int)(w - ZYDIS_REGISTER_RAX);
}

static int is_frame_reg(ZydisRegister r)
{
    return r == ZYDIS_REGISTER_RSP || r == ZYDIS_REGISTER_RBP;
}

/* The key of a memory operand that names a fixed slot: a stack slot (frame
 * or stack pointer plus a constant; keyed by offset and base) or a
 * rip-relative address (keyed by the address, which @p next, the next
 * instruction's address, resolves). */
static int mem_slot(const ZydisDecodedOperand *o, uintptr_t next, int64_t *slot)
{
    if (o->mem.index != ZYDIS_REGISTER_NONE ||
        (o->mem.segment != ZYDIS_REGISTER_NONE && o->mem.segment != ZYDIS_REGISTER_SS &&
         o->mem.segment != ZYDIS_REGISTER_DS))
        return 0;
    if (is_frame_reg(o->mem.base))
        *slot = o->mem.disp.value * 2 + (o->mem.base == ZYDIS_REGISTER_RBP);
    else if (o->mem.base == ZYDIS_REGISTER_RIP)
        *slot = (int64_t)((next + (uintptr_t)o->mem.disp.value) | (1ull << 62));
    else
        return 0;
    return 1;
}

/* A plain move between a register and a fixed slot (mem_slot()) that no
 * hook was told of: the shape of a register-allocator spill or reload, or
 * of a constant reloaded because the register holding it is caller-saved. */
static int is_stack_move(const ZydisDecodedInstruction *ins, const ZydisDecodedOperand *ops, uintptr_t next,
                         int64_t *slot)
{
    switch (ins->mnemonic) {
    case ZYDIS_MNEMONIC_MOV: case ZYDIS_MNEMONIC_MOVSD: case ZYDIS_MNEMONIC_MOVSS:
    case ZYDIS_MNEMONIC_MOVQ: case ZYDIS_MNEMONIC_MOVD: case ZYDIS_MNEMONIC_MOVAPS:
    case ZYDIS_MNEMONIC_MOVAPD: case ZYDIS_MNEMONIC_MOVUPS: case ZYDIS_MNEMONIC_MOVUPD:
    case ZYDIS_MNEMONIC_MOVDQA: case ZYDIS_MNEMONIC_MOVDQU: case ZYDIS_MNEMONIC_VMOVSD:
    case ZYDIS_MNEMONIC_VMOVSS: case ZYDIS_MNEMONIC_VMOVQ: case ZYDIS_MNEMONIC_VMOVD:
    case ZYDIS_MNEMONIC_VMOVAPS: case ZYDIS_MNEMONIC_VMOVAPD: case ZYDIS_MNEMONIC_VMOVUPS:
    case ZYDIS_MNEMONIC_VMOVUPD: case ZYDIS_MNEMONIC_VMOVDQA: case ZYDIS_MNEMONIC_VMOVDQU:
        break;
    default:
        return 0;
    }
    int nreg = 0, nmem = 0;
    for (int k = 0; k < ins->operand_count; k++) {
        const ZydisDecodedOperand *o = &ops[k];
        if (o->visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT)
            continue;
        if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
            nreg++;
        } else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
            if (o->mem.index != ZYDIS_REGISTER_NONE || !mem_slot(o, next, slot))
                return 0;
            nmem++;
        } else {
            return 0;
        }
    }
    return nreg == 1 && nmem == 1;
}

#define MAX_SLOTS 32
#define MAX_HEAD 256 /* bytes searched back for a loop block's head */

/* What one block's decoding has seen so far (hm__arch_block_insns()). */
typedef struct {
    int64_t n;
    /* rdi written since the last call: by a copy of register rdi_reg, or by
     * the address of stack slot rdi_slot (an addressable local). */
    int rdi_set, rdi_reg, rdi_is_slot;
    int64_t rdi_slot;
    uint32_t arg_regs, cmp_regs, bumps[16];
    int64_t arg_slots[MAX_SLOTS], moves[MAX_SLOTS];
    int n_arg_slots, n_moves;
    uintptr_t target; /* the terminating branch's target, or 0 */
} scan_t;

enum { SCAN_END, SCAN_COVER, SCAN_STOP };

/* Decodes from @p p into @p st until the block's terminating branch
 * (SCAN_END), a coverage call (SCAN_COVER, at @p stop if stop is that
 * call's address) or @p stop itself (SCAN_STOP). */
static int scan(const ZydisDecoder *dec, scan_t *st, uintptr_t p, uintptr_t stop)
{
    ZydisDecodedInstruction ins;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    for (int k = 0; k < (int)max_block; k++) {
        if (p == stop)
            return SCAN_STOP;
        if (!decode(dec, p, &ins, ops))
            return SCAN_END;
        uintptr_t next = p + ins.length;
        if (ins.meta.category == ZYDIS_CATEGORY_CALL) {
            uintptr_t target = 0;
            if (ins.operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
                target = next + (uintptr_t)ops[0].imm.value.s;
            int h = target ? is_hook(target) : 0;
            if (h == 2) /* the next block's coverage call */
                return SCAN_COVER;
            if (h && st->rdi_set) {
                st->n--; /* the hook's argument set-up */
                if (st->rdi_reg >= 0)
                    st->arg_regs |= 1u << st->rdi_reg;
                if (st->rdi_is_slot && st->n_arg_slots < MAX_SLOTS)
                    st->arg_slots[st->n_arg_slots++] = st->rdi_slot;
            }
            st->rdi_set = 0;
            if (h) {
                p = next;
                continue;
            }
        }
        st->n++;
        switch (ins.meta.category) {
        case ZYDIS_CATEGORY_COND_BR:
        case ZYDIS_CATEGORY_UNCOND_BR:
            if (ins.operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
                st->target = next + (uintptr_t)ops[0].imm.value.s;
            return SCAN_END;
        case ZYDIS_CATEGORY_RET:
        case ZYDIS_CATEGORY_INTERRUPT:
        case ZYDIS_CATEGORY_SYSTEM:
            return SCAN_END;
        default:
            break;
        }
        if (ins.mnemonic == ZYDIS_MNEMONIC_UD2 || ins.mnemonic == ZYDIS_MNEMONIC_HLT)
            return SCAN_END;
        int64_t slot = 0;
        int r0 = ins.operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER ? gpr(ops[0].reg.value) : -1;
        if (writes_rdi(&ins, ops)) {
            st->rdi_set = 1;
            st->rdi_reg = -1;
            st->rdi_is_slot = 0;
            if (ins.mnemonic == ZYDIS_MNEMONIC_MOV && ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER)
                st->rdi_reg = gpr(ops[1].reg.value);
            if (ins.mnemonic == ZYDIS_MNEMONIC_LEA && mem_slot(&ops[1], next, &st->rdi_slot))
                st->rdi_is_slot = 1;
        } else if (is_stack_move(&ins, ops, next, &slot)) {
            if (st->n_moves < MAX_SLOTS)
                st->moves[st->n_moves++] = slot;
        } else if (r0 >= 0 && (ins.mnemonic == ZYDIS_MNEMONIC_ADD || ins.mnemonic == ZYDIS_MNEMONIC_SUB) &&
                   ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
            st->bumps[r0]++;
        } else if (r0 >= 0 && ins.mnemonic == ZYDIS_MNEMONIC_LEA && gpr(ops[1].mem.base) == r0 &&
                   ops[1].mem.index == ZYDIS_REGISTER_NONE) {
            st->bumps[r0]++;
        } else if (ins.mnemonic == ZYDIS_MNEMONIC_CMP || ins.mnemonic == ZYDIS_MNEMONIC_TEST) {
            for (int o = 0; o < 2 && o < ins.operand_count; o++)
                if (ops[o].type == ZYDIS_OPERAND_TYPE_REGISTER && gpr(ops[o].reg.value) >= 0)
                    st->cmp_regs |= 1u << gpr(ops[o].reg.value);
        }
        p = next;
    }
    return SCAN_END;
}

/* Whether the instruction at @p p is a direct call to the coverage hook. */
static int is_cover_call(const ZydisDecoder *dec, uintptr_t p)
{
    ZydisDecodedInstruction ins;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!decode(dec, p, &ins, ops) || ins.meta.category != ZYDIS_CATEGORY_CALL || ins.length != 5 ||
        ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[0].imm.is_relative)
        return 0;
    return is_hook(p + 5 + (uintptr_t)ops[0].imm.value.s) == 2;
}

/* Select dependences. A binary search compiled to a conditional move
 * (base = a[mid] < key ? base + half : base) computes its next probe's
 * address from a comparison of the value just loaded: no pointer or index
 * is loaded, yet the next load cannot issue before this one completes. A
 * block is marked when a register written by a cmov whose condition
 * compares a loaded value (directly from memory, or a register loaded
 * from memory) reaches the address passed to an access hook, through
 * register moves and arithmetic, within the block or in the block's next
 * execution (the register carried around a loop). The runtime then makes
 * the first load of each execution of the block wait for the loads issued
 * since the previous one (hm__sim_select_mark()). */
typedef struct {
    uint32_t sel, loaded; /* per general register: select-derived, loaded */
    int flags_loaded;     /* the flags come from a comparison of a loaded value */
    int rdi_sel;          /* rdi holds a select-derived address */
    int found;
} sel_t;

static int writes_flags(ZydisMnemonic m)
{
    switch (m) {
    case ZYDIS_MNEMONIC_CMP: case ZYDIS_MNEMONIC_TEST: case ZYDIS_MNEMONIC_SUB:
    case ZYDIS_MNEMONIC_ADD: case ZYDIS_MNEMONIC_AND: case ZYDIS_MNEMONIC_OR:
    case ZYDIS_MNEMONIC_XOR: case ZYDIS_MNEMONIC_INC: case ZYDIS_MNEMONIC_DEC:
    case ZYDIS_MNEMONIC_NEG: case ZYDIS_MNEMONIC_SHR: case ZYDIS_MNEMONIC_SHL:
    case ZYDIS_MNEMONIC_SAR: case ZYDIS_MNEMONIC_UCOMISD: case ZYDIS_MNEMONIC_COMISD:
    case ZYDIS_MNEMONIC_UCOMISS: case ZYDIS_MNEMONIC_COMISS: case ZYDIS_MNEMONIC_VUCOMISD:
    case ZYDIS_MNEMONIC_VCOMISD: case ZYDIS_MNEMONIC_VUCOMISS: case ZYDIS_MNEMONIC_VCOMISS:
    case ZYDIS_MNEMONIC_BT:
        return 1;
    default:
        return 0;
    }
}

/* Follows the select taint from @p p to @p stop (or the block's end). */
static void sel_scan(const ZydisDecoder *dec, sel_t *t, uintptr_t p, uintptr_t stop)
{
    ZydisDecodedInstruction ins;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    for (int k = 0; k < (int)max_block && p != stop; k++) {
        if (!decode(dec, p, &ins, ops))
            return;
        uintptr_t next = p + ins.length;
        if (ins.meta.category == ZYDIS_CATEGORY_CALL) {
            uintptr_t target = 0;
            if (ins.operand_count > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative)
                target = next + (uintptr_t)ops[0].imm.value.s;
            int h = target ? is_hook(target) : 0;
            if (h == 2)
                return;
            if (h == 1 && t->rdi_sel)
                t->found = 1;
            t->rdi_sel = 0;
            p = next;
            continue; /* a hook preserves what the program keeps in registers */
        }
        switch (ins.meta.category) {
        case ZYDIS_CATEGORY_COND_BR: case ZYDIS_CATEGORY_UNCOND_BR: case ZYDIS_CATEGORY_RET:
        case ZYDIS_CATEGORY_INTERRUPT: case ZYDIS_CATEGORY_SYSTEM:
            return;
        default:
            break;
        }
        int rs = 0, rl = 0, mem = 0, dst = -1, is_lea = ins.mnemonic == ZYDIS_MNEMONIC_LEA;
        for (int o = 0; o < ins.operand_count; o++) {
            const ZydisDecodedOperand *op = &ops[o];
            if (op->visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN)
                continue;
            if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
                int g = gpr(op->reg.value);
                if (g < 0)
                    continue;
                if (op->actions & ZYDIS_OPERAND_ACTION_MASK_READ) {
                    rs |= (int)(t->sel >> g & 1);
                    rl |= (int)(t->loaded >> g & 1);
                }
                if ((op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) && dst < 0)
                    dst = g;
            } else if (op->type == ZYDIS_OPERAND_TYPE_MEMORY) {
                int b = gpr(op->mem.base), x = gpr(op->mem.index);
                if (is_lea)
                    rs |= (b >= 0 && (t->sel >> b & 1)) || (x >= 0 && (t->sel >> x & 1));
                else if (!is_frame_reg(op->mem.base) && op->mem.base != ZYDIS_REGISTER_RIP)
                    mem = 1; /* a program load (stack slots are spills) */
            }
        }
        if (ins.meta.category == ZYDIS_CATEGORY_CMOV) {
            rs |= t->flags_loaded;
        } else if (writes_flags(ins.mnemonic)) {
            t->flags_loaded = mem || rl;
        }
        if (dst >= 0) {
            if (dst == 7) /* rdi: a hook's argument */
                t->rdi_sel = rs;
            t->sel = (t->sel & ~(1u << dst)) | (uint32_t)rs << dst;
            t->loaded = (t->loaded & ~(1u << dst)) | (uint32_t)((mem && !is_lea) || rl) << dst;
        }
        p = next;
    }
}

/* Whether the block at @p pc (with its loop head @p head, or 0) has a
 * select dependence; twice round, for a register carried to the block's
 * next execution. */
static int select_dep(const ZydisDecoder *dec, uintptr_t pc, uintptr_t head)
{
    sel_t t = {0};
    for (int round = 0; round < 2 && !t.found; round++) {
        if (head)
            sel_scan(dec, &t, head, pc - 5);
        sel_scan(dec, &t, pc, 0);
        if (!t.sel)
            break;
        t.rdi_sel = 0;
        t.flags_loaded = 0;
    }
    return t.found;
}

/* The block's native instruction count: the instructions decoded from @p pc
 * to the block's end, less what exists only because of the hooks (see the
 * comment at the top). gcc may schedule some of a block's instructions
 * before its coverage call; when the block is a loop whose back edge jumps
 * to such a head (a target just before the call, reached from it without a
 * branch), the head's instructions run once per trip and are counted. */
uint32_t hm__arch_block_insns(uintptr_t pc, int (*hook)(uintptr_t), unsigned max, uint32_t *sel)
{
    is_hook = hook;
    max_block = max;
    static ZydisDecoder dec;
    static int ready;
    if (!ready) {
        ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        ready = 1;
    }
    static scan_t st; /* large: static (the runtime runs one thread) */
    memset(&st, 0, sizeof st);
    st.rdi_reg = -1;
    scan(&dec, &st, pc, 0);
    uintptr_t call = pc - 5, head = st.target;
    if (head && head < call && head + MAX_HEAD >= call) {
        memset(&st, 0, sizeof st);
        st.rdi_reg = -1;
        if (is_cover_call(&dec, call) && scan(&dec, &st, head, call) == SCAN_STOP && st.target == 0) {
            scan(&dec, &st, pc, 0);
        } else { /* not a head of this block: count the block alone */
            memset(&st, 0, sizeof st);
            st.rdi_reg = -1;
            scan(&dec, &st, pc, 0);
            head = 0;
        }
    } else {
        head = 0;
    }
    *sel = (uint32_t)select_dep(&dec, pc, head);
    int64_t n = st.n;
    /* Spills and reloads: stack moves other than the accesses of an
     * addressable local whose address a hook was given. */
    for (int i = 0; i < st.n_moves; i++) {
        int hooked = 0;
        for (int j = 0; j < st.n_arg_slots && !hooked; j++)
            hooked = st.arg_slots[j] == st.moves[i];
        n -= !hooked;
    }
    /* Pointer bumps of registers that carried a hook's address, unless the
     * loop's exit test reads them (then they are its induction variable). */
    for (int r = 0; r < 16; r++)
        if ((st.arg_regs >> r & 1) && !(st.cmp_regs >> r & 1))
            n -= st.bumps[r];
    return n > 0 ? (uint32_t)n : 0;
}
