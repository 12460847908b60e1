/* Soft sampler, decoding side (x86-64). The signal handler (src/preload) only copies
 * the interrupted PC and registers; everything here runs in the collector
 * thread, where dladdr, the unwinder's FDE lookup and malloc are allowed.
 *
 * Why look back: a timer interrupt lands on the instruction *after* the one
 * that was stalling, which on a streaming loop is usually an add/cmp/jcc
 * with no memory operand. So we walk back within the basic block to the
 * closest memory instruction whose address registers we can still
 * reconstruct from the saved context. How far after the stall the PC
 * lands depends on the core, so in a loop the sample then goes to one of
 * the loop's accesses by the cache lines each brings (charge(), below).
 *
 * Each function is decoded once (Zydis) into a compact table: per
 * instruction its memory operand and its effect on general registers, so a
 * sample costs table lookups, not decoding. */
#define _GNU_SOURCE
#include "arch/arch.h"
#include "common/common.h"

#include <Zydis/Zydis.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ucontext.h>

#include "hetmem/trace.h"

/* From libgcc's unwind-dw2-fde.h (not installed): finds the FDE covering pc
 * and the start of its function. Every function compiled with CFI (the
 * default on x86-64, even static ones) has one, unlike dynamic symbols. */
struct hm_eh_bases_ {
    void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct hm_eh_bases_ *bases);

enum {
    F_LEADER = 1, F_END = 2, F_MEM = 4, F_STORE = 8, F_RIP = 16, F_VSIB = 32, F_ADDR32 = 64, F_VSIB_D = 128,
    F_COND = 256 /* a conditional branch: the next instruction is reached by falling through it */
};

/* Registers are numbered by their ucontext greg index (REG_R8 = 0 ...
 * REG_RIP = 16); vector index registers xmm/ymm/zmm0-15 as 0..15. */
typedef struct {
    uint32_t off;
    uint8_t len;
    uint16_t flags;
    int8_t base, index;      /* -1 none */
    uint8_t scale;
    int8_t adj_reg;          /* register changed by an undoable amount, or -1 */
    int8_t adj_src;          /* ... plus adj_mul times this register, or -1 */
    int8_t adj_mul;          /* 1, 2, 4, 8 (add, lea) or -1 (sub) */
    int64_t disp, adj;       /* displacement; the constant part */
    uint32_t clobber;        /* gregs written in a way we cannot undo */
    uint32_t reads;          /* gregs read (register operands, address registers) */
    uint32_t vals;           /* gregs read as register operands (values, not addresses) */
    uint32_t tgt;            /* a direct branch's target offset in the function, or NO_TGT */
    uint16_t vclobber;       /* vector registers written */
    uint16_t vreads;         /* vector registers read as register operands */
} ins_t;

#define NO_TGT UINT32_MAX

typedef struct {
    uint64_t start;
    ins_t *ins;
    uint32_t n;
    int failed;
} func_t;

struct hm__soft_cache {
    struct {
        uint64_t pc, start;
    } recent[4096];          /* pc -> function start, saves the FDE search */
    func_t *tab;             /* open addressing on start */
    size_t cap, used;
    hm__soft_stats_t st;
};

static const ZydisDecoder *decoder(void)
{
    static ZydisDecoder d;
    static int init;
    if (!init) {
        ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        init = 1;
    }
    return &d;
}

int hm__soft_cache_open(hm__soft_cache_t **out)
{
    hm__soft_cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return -12;
    c->cap = 1024;
    c->tab = calloc(c->cap, sizeof *c->tab);
    if (!c->tab) {
        free(c);
        return -12;
    }
    *out = c;
    return 0;
}

void hm__soft_cache_close(hm__soft_cache_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        free(c->tab[i].ins);
    free(c->tab);
    free(c);
}

const hm__soft_stats_t *hm__soft_cache_stats(const hm__soft_cache_t *c) { return &c->st; }

static ZydisRegister big(ZydisRegister r)
{
    if (r == ZYDIS_REGISTER_NONE)
        return r;
    ZydisRegister b = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    return b == ZYDIS_REGISTER_NONE ? r : b;
}

/* greg index (sys/ucontext.h REG_*) of a GPR (any width), or -1. */
static int greg_of(ZydisRegister r)
{
    switch (big(r)) {
    case ZYDIS_REGISTER_RAX: return REG_RAX;
    case ZYDIS_REGISTER_RBX: return REG_RBX;
    case ZYDIS_REGISTER_RCX: return REG_RCX;
    case ZYDIS_REGISTER_RDX: return REG_RDX;
    case ZYDIS_REGISTER_RSI: return REG_RSI;
    case ZYDIS_REGISTER_RDI: return REG_RDI;
    case ZYDIS_REGISTER_RBP: return REG_RBP;
    case ZYDIS_REGISTER_RSP: return REG_RSP;
    case ZYDIS_REGISTER_R8: return REG_R8;
    case ZYDIS_REGISTER_R9: return REG_R9;
    case ZYDIS_REGISTER_R10: return REG_R10;
    case ZYDIS_REGISTER_R11: return REG_R11;
    case ZYDIS_REGISTER_R12: return REG_R12;
    case ZYDIS_REGISTER_R13: return REG_R13;
    case ZYDIS_REGISTER_R14: return REG_R14;
    case ZYDIS_REGISTER_R15: return REG_R15;
    case ZYDIS_REGISTER_RIP: return REG_RIP;
    default: return -1;
    }
}

/* xmm number of a vector register (xmm/ymm/zmm 0..15), or -1. */
static int vec_of(ZydisRegister r)
{
    if (r >= ZYDIS_REGISTER_XMM0 && r <= ZYDIS_REGISTER_XMM15) return r - ZYDIS_REGISTER_XMM0;
    if (r >= ZYDIS_REGISTER_YMM0 && r <= ZYDIS_REGISTER_YMM15) return r - ZYDIS_REGISTER_YMM0;
    if (r >= ZYDIS_REGISTER_ZMM0 && r <= ZYDIS_REGISTER_ZMM15) return r - ZYDIS_REGISTER_ZMM0;
    return -1;
}

static int vsib_dword(ZydisMnemonic m)
{
    const char *s = ZydisMnemonicGetString(m);
    /* vgatherdps/vpgatherqq/vscatterdpd...: the letter after the verb says
     * whether indices are dwords or qwords. */
    const char *p = s ? strstr(s, "gather") : NULL;
    if (p)
        return p[6] == 'd';
    p = s ? strstr(s, "scatter") : NULL;
    return p ? p[7] == 'd' : 0;
}

/* Fills the memory operand and register effects of one instruction. */
static void describe(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, ins_t *x)
{
    x->base = x->index = x->adj_reg = x->adj_src = -1;
    /* Data operand: not stack traffic (push/pop/call, rsp-based spills), not
     * TLS (fs/gs), not lea (address generation only), not a multi-byte nop
     * (alignment padding names a memory operand but touches nothing). */
    for (int i = 0; i < in->operand_count && in->mnemonic != ZYDIS_MNEMONIC_NOP; i++) {
        const ZydisDecodedOperand *o = &op[i];
        if (o->type != ZYDIS_OPERAND_TYPE_MEMORY)
            continue;
        if (o->mem.type != ZYDIS_MEMOP_TYPE_MEM && o->mem.type != ZYDIS_MEMOP_TYPE_VSIB)
            continue;
        if (o->mem.segment == ZYDIS_REGISTER_FS || o->mem.segment == ZYDIS_REGISTER_GS)
            continue;
        ZydisRegister b = big(o->mem.base);
        if (b == ZYDIS_REGISTER_RSP)
            continue;
        int bg = greg_of(b);
        if (o->mem.base != ZYDIS_REGISTER_NONE && bg < 0)
            continue;
        x->flags |= F_MEM;
        if (b == ZYDIS_REGISTER_RIP)
            x->flags |= F_RIP;
        else
            x->base = (int8_t)bg;
        if (o->mem.base != ZYDIS_REGISTER_NONE && o->mem.base != b && b != ZYDIS_REGISTER_RIP)
            x->flags |= F_ADDR32;
        if (o->mem.type == ZYDIS_MEMOP_TYPE_VSIB) {
            x->flags |= F_VSIB | (vsib_dword(in->mnemonic) ? F_VSIB_D : 0);
            int v = vec_of(o->mem.index);
            if (v < 0) {
                x->flags &= (uint16_t)~F_MEM; /* xmm16-31: not in the saved context */
                continue;
            }
            x->index = (int8_t)v;
        } else if (o->mem.index != ZYDIS_REGISTER_NONE) {
            x->index = (int8_t)greg_of(o->mem.index);
        }
        x->scale = o->mem.scale ? o->mem.scale : 1;
        x->disp = o->mem.disp.value;
        if (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)
            x->flags |= F_STORE;
        break;
    }
    /* A zero idiom (xor eax,eax; pxor xmm1,xmm1) reads nothing: the core
     * breaks the dependency. */
    int zero = 0;
    switch (in->mnemonic) {
    case ZYDIS_MNEMONIC_XOR:
    case ZYDIS_MNEMONIC_SUB:
    case ZYDIS_MNEMONIC_PXOR:
    case ZYDIS_MNEMONIC_XORPS:
    case ZYDIS_MNEMONIC_XORPD:
    case ZYDIS_MNEMONIC_VPXOR:
    case ZYDIS_MNEMONIC_VXORPS:
    case ZYDIS_MNEMONIC_VXORPD: {
        int nr = 0, same = 1;
        ZydisRegister first = ZYDIS_REGISTER_NONE;
        for (int i = 0; i < in->operand_count; i++) {
            const ZydisDecodedOperand *o = &op[i];
            if (o->visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT)
                continue;
            if (o->type != ZYDIS_OPERAND_TYPE_REGISTER) {
                same = 0;
                break;
            }
            if (nr++ == 0)
                first = o->reg.value;
            else if (o->reg.value != first)
                same = 0;
        }
        zero = same && nr >= 2;
        break;
    }
    default: break;
    }
    for (int i = 0; i < in->operand_count && !zero; i++) {
        const ZydisDecodedOperand *o = &op[i];
        int r[2] = {-1, -1};
        if (o->type == ZYDIS_OPERAND_TYPE_REGISTER && (o->actions & ZYDIS_OPERAND_ACTION_MASK_READ)) {
            r[0] = greg_of(o->reg.value);
            int v = vec_of(o->reg.value);
            if (v >= 0)
                x->vreads |= (uint16_t)(1u << v);
            if (r[0] >= 0 && r[0] != REG_RIP)
                x->vals |= 1u << r[0];
        } else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
            r[0] = greg_of(o->mem.base), r[1] = greg_of(o->mem.index);
        }
        for (int j = 0; j < 2; j++)
            if (r[j] >= 0 && r[j] != REG_RIP)
                x->reads |= 1u << r[j];
    }
    /* Register effects: add/sub/inc/dec by a constant or by another
     * register, and lea r,[r+i*s+d] (or [i+r]), can be undone, the other
     * register's value coming from the saved context; any other write
     * clobbers. Strided stores step their pointer by a register
     * (add %rbx,%r11), so without this the store behind the sample is lost
     * and the look-back lands on an older load. */
    const ZydisDecodedOperand *o0 = &op[0], *o1 = &op[1];
    int full0 = in->operand_count > 0 && o0->type == ZYDIS_OPERAND_TYPE_REGISTER && o0->reg.value == big(o0->reg.value) &&
                greg_of(o0->reg.value) >= 0;
    int64_t delta = 0;
    int undo = 0, src = -1, mul = 0;
    if (full0) {
        switch (in->mnemonic) {
        case ZYDIS_MNEMONIC_ADD:
        case ZYDIS_MNEMONIC_SUB:
            if (o1->type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
                int64_t v = o1->imm.is_signed ? o1->imm.value.s : (int64_t)o1->imm.value.u;
                delta = in->mnemonic == ZYDIS_MNEMONIC_ADD ? v : -v;
                undo = 1;
            } else if (o1->type == ZYDIS_OPERAND_TYPE_REGISTER && o1->reg.value == big(o1->reg.value) &&
                       greg_of(o1->reg.value) >= 0 && o1->reg.value != o0->reg.value &&
                       o1->reg.value != ZYDIS_REGISTER_RIP) {
                src = greg_of(o1->reg.value);
                mul = in->mnemonic == ZYDIS_MNEMONIC_ADD ? 1 : -1;
                undo = 1;
            }
            break;
        case ZYDIS_MNEMONIC_INC: delta = 1; undo = 1; break;
        case ZYDIS_MNEMONIC_DEC: delta = -1; undo = 1; break;
        case ZYDIS_MNEMONIC_LEA:
            if (o1->type != ZYDIS_OPERAND_TYPE_MEMORY || in->address_width != 64)
                break;
            {
                ZydisRegister b = o1->mem.base, ix = o1->mem.index, d = o0->reg.value;
                unsigned sc = o1->mem.scale ? o1->mem.scale : 1;
                if (b == d && ix == ZYDIS_REGISTER_NONE) {
                    delta = o1->mem.disp.value;
                    undo = 1;
                } else if (b == d && ix != d && greg_of(ix) >= 0) {
                    delta = o1->mem.disp.value; /* lea d, [d + ix*sc + disp] */
                    src = greg_of(ix);
                    mul = (int)sc;
                    undo = 1;
                } else if (ix == d && sc == 1 && b != d && greg_of(b) >= 0 && b != ZYDIS_REGISTER_RIP) {
                    delta = o1->mem.disp.value; /* lea d, [b + d + disp] */
                    src = greg_of(b);
                    mul = 1;
                    undo = 1;
                }
            }
            break;
        default: break;
        }
    }
    for (int i = 0; i < in->operand_count; i++) {
        const ZydisDecodedOperand *o = &op[i];
        if (o->type != ZYDIS_OPERAND_TYPE_REGISTER || !(o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
            continue;
        int g = greg_of(o->reg.value);
        int v = vec_of(o->reg.value);
        if (g >= 0 && g != REG_RIP) {
            if (undo && i == 0) {
                x->adj_reg = (int8_t)g;
                x->adj = delta;
                x->adj_src = (int8_t)src;
                x->adj_mul = (int8_t)mul;
            } else {
                x->clobber |= 1u << g;
            }
        }
        if (v >= 0)
            x->vclobber |= (uint16_t)(1u << v);
    }
}

/* Decodes [start, end) into the table, marking basic-block leaders: the
 * start, targets of direct jumps inside the range, and instructions after
 * any control transfer (calls included: they clobber the caller-saved
 * registers we would need). */
static int decode_range(const uint8_t *code, uint64_t start, uint64_t end, func_t *f)
{
    size_t cap = 256, n = 0;
    ins_t *ins = calloc(cap, sizeof *ins);
    uint64_t *targets = NULL;
    size_t nt = 0, tcap = 0;
    if (!ins)
        return -1;
    uint64_t at = start;
    int after_branch = 1;
    while (at < end) {
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(decoder(), code + (at - start), (ZyanUSize)(end - at), &in, op)))
            break; /* data or padding: what we have is still valid */
        if (n == cap) {
            ins_t *t = realloc(ins, cap * 2 * sizeof *ins);
            if (!t)
                break;
            ins = t;
            memset(ins + cap, 0, cap * sizeof *ins);
            cap *= 2;
        }
        ins_t *x = &ins[n];
        x->off = (uint32_t)(at - start);
        x->len = in.length;
        x->flags = after_branch ? F_LEADER : 0;
        x->tgt = NO_TGT;
        after_branch = 0;
        describe(&in, op, x);
        switch (in.meta.category) {
        case ZYDIS_CATEGORY_COND_BR:
        case ZYDIS_CATEGORY_UNCOND_BR:
        case ZYDIS_CATEGORY_RET:
        case ZYDIS_CATEGORY_CALL:
        case ZYDIS_CATEGORY_SYSCALL:
        case ZYDIS_CATEGORY_INTERRUPT:
            x->flags |= F_END;
            if (in.meta.category == ZYDIS_CATEGORY_COND_BR)
                x->flags |= F_COND;
            after_branch = 1;
            if ((in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) && in.raw.imm[0].size) {
                uint64_t tgt = at + in.length + (uint64_t)in.raw.imm[0].value.s;
                if (tgt >= start && tgt < end) {
                    if (in.meta.category == ZYDIS_CATEGORY_COND_BR || in.meta.category == ZYDIS_CATEGORY_UNCOND_BR)
                        x->tgt = (uint32_t)(tgt - start);
                    if (nt == tcap) {
                        size_t nc = tcap ? tcap * 2 : 64;
                        uint64_t *t = realloc(targets, nc * sizeof *targets);
                        if (!t)
                            break;
                        targets = t;
                        tcap = nc;
                    }
                    targets[nt++] = tgt;
                }
            }
            break;
        default:
            break;
        }
        n++;
        at += in.length;
    }
    for (size_t t = 0; t < nt; t++) {
        uint32_t off = (uint32_t)(targets[t] - start);
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ins[mid].off < off)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && ins[lo].off == off)
            ins[lo].flags |= F_LEADER;
    }
    free(targets);
    f->start = start;
    f->ins = ins;
    f->n = (uint32_t)n;
    return 0;
}

/* Value register g had when instruction `at` ran, given the saved context
 * at instruction `k`, by undoing (at < k) or replaying (at > k) the
 * adjustments in between. An adjustment by another register needs that
 * register's value where the adjustment ran, found the same way (depth
 * limits the chain). Returns -1 when something clobbered a register. */
static int reg_at(const func_t *f, int g, uint32_t at, uint32_t k, const hm__soft_raw_t *raw, int depth,
                  uint64_t *out)
{
    uint64_t total = 0;
    uint32_t lo = at < k ? at : k, hi = at < k ? k : at;
    for (uint32_t i = lo; i < hi; i++) {
        const ins_t *x = &f->ins[i];
        if (x->clobber >> g & 1)
            return -1;
        if (x->adj_reg != g)
            continue;
        total += (uint64_t)x->adj;
        if (x->adj_src >= 0) {
            uint64_t v;
            if (depth >= 2 || reg_at(f, x->adj_src, i, k, raw, depth + 1, &v) != 0)
                return -1;
            total += v * (uint64_t)(int64_t)x->adj_mul;
        }
    }
    uint64_t now = raw->regs[g];
    *out = at < k ? now - total : now + total;
    return 0;
}

/* Effective address of instruction i for a sample at instruction k. */
static int ea_of(const func_t *f, uint32_t i, uint32_t k, const hm__soft_raw_t *raw, uint64_t *ea, int *access)
{
    const ins_t *x = &f->ins[i];
    if (!(x->flags & F_MEM))
        return -1;
    uint64_t basev = 0, idxv = 0;
    if (x->flags & F_RIP)
        basev = f->start + x->off + x->len;
    else if (x->base >= 0 && reg_at(f, x->base, i, k, raw, 0, &basev) != 0)
        return -1;
    if (x->flags & F_VSIB) {
        /* A gather touches one address per lane; we attribute lane 0, which
         * is in the low bits of the index vector the context saved, unless
         * the vector was rewritten between the gather and the interrupt. */
        if (!raw->has_vec)
            return -1;
        uint32_t lo = i < k ? i + 1 : k, hi = i < k ? k : i;
        for (uint32_t m = lo; m < hi; m++)
            if (f->ins[m].vclobber >> x->index & 1)
                return -1;
        uint64_t lane = raw->vec_lo[x->index];
        idxv = (x->flags & F_VSIB_D) ? (uint64_t)(int64_t)(int32_t)lane : lane;
    } else if (x->index >= 0 && reg_at(f, x->index, i, k, raw, 0, &idxv) != 0) {
        return -1;
    }
    uint64_t a = basev + idxv * x->scale + (uint64_t)x->disp;
    if (x->flags & F_ADDR32)
        a &= 0xffffffffu;
    *ea = a;
    *access = (x->flags & F_STORE) ? HM_ACCESS_STORE : HM_ACCESS_LOAD;
    return 0;
}

enum { HOW_NONE = 0, HOW_BACK, HOW_AT, HOW_FWD };

/* Which access of a block the sample is charged to.
 *
 * The PC a timer interrupt saves is not where the stall was: the core
 * retires what it can once the stalling access returns, so the PC lands
 * one or several instructions after it, how many depending on the core.
 * On one host the gather loop below is interrupted after the load that
 * stalled, on another after the next one, and the closest access behind
 * the PC is then a neighbour that hits the cache:
 *
 *     mov    (%rbp,%rax,4),%edx        col[k]     4 bytes per iteration
 *     movsd  (%r13,%rdx,8),%xmm0       x[col[k]]  a new line each time
 *     mulsd  (%r12,%rax,8),%xmm0       val[k]     8 bytes per iteration
 *     add $1,%rax ; addsd ; cmp ; jne               <- PC
 *
 * So the PC only says which block the time went to. When that block is a
 * loop (its branch goes back to its first instruction), the sample is
 * charged to one of the loop's accesses drawn in proportion to the cache
 * lines each brings per iteration: an access that moves by d bytes per
 * iteration brings d/64 of a line (a sequential double: 1/8; a step of a
 * line or more, as a transposed store: 1); an indirect access, whose index
 * (or base, when it has no index) comes from a data load in the loop
 * (gathers, pointer chasing), a whole line; one that does not move
 * (y[i] inside the loop over k), none. The draw is a hash of the sample's
 * time and registers, so a run's attribution is reproducible from its
 * samples.
 *
 * After a loop, in the block it falls out of, the core still retires the
 * loop's last iteration: it retires in order, so an instruction there
 * that takes a value the loop loaded (y[i] += s, then the store of y[i],
 * after the loop over k) reaches the head only to wait for the loop's
 * last loads, and a sample on the block's first instruction had only
 * the loop's branch retired before it. Such samples get the loop's draw
 * (after_loop(), below). An access of that block whose address does not
 * come from the loop's loads was issued while the loop ran (the core
 * dispatches past the predicted exit), so its latency hides under the
 * loop's; a store waits only for its data; one whose address does come
 * from them is a dependent miss of its own and keeps the sample.
 *
 * Elsewhere, the closest access behind the PC is charged, unless an
 * indirect access lies behind it in the block. A sample after a page
 * fault is the faulting access and is left as it is. */

/* Bounds on the scans, so that a sample costs the same in generated code
 * with huge blocks: a loop of more instructions is taken as straight-line
 * code, and a walk back stops after this many. */
enum { LOOP_MAX = 256, SCAN_MAX = 64 };

/* Does register g, as instruction i reads it, derive from a data load in
 * the block [lead, end]? Walks back from i (once around the back edge of a
 * loop), following the sources of whatever computed g. Loads of the stack
 * and of RIP-relative globals (spilled or invariant pointers) do not count. */
static int from_load(const func_t *f, int g, uint32_t i, uint32_t lead, uint32_t end, int loop)
{
    if (i < lead || i > end)
        return 0;
    uint32_t want = 1u << g, m = i;
    /* Around a loop the walk ends on i itself (mov (%rax),%rax). */
    uint32_t steps = loop ? end - lead + 1 : i - lead;
    if (steps > SCAN_MAX)
        steps = SCAN_MAX;
    for (uint32_t s = 0; s < steps; s++) {
        m = m == lead ? end : m - 1;
        const ins_t *x = &f->ins[m];
        if (x->adj_reg >= 0 && (want >> x->adj_reg & 1) && x->adj_src >= 0)
            want |= 1u << x->adj_src; /* add %rcx,%rdx: rdx derives from rcx too */
        uint32_t w = x->clobber & want;
        if (!w)
            continue;
        if ((x->flags & (F_MEM | F_STORE | F_RIP)) == F_MEM)
            return 1;
        want = (want & ~w) | (x->reads & ~(1u << REG_RSP));
        if (!want)
            return 0;
    }
    return 0;
}

/* How far register g moves per iteration of the loop [lead, end], from
 * its undoable adjustments (a register step read from the context).
 * -1 if something else writes it. */
static int step_of(const func_t *f, int g, uint32_t lead, uint32_t end, uint32_t k, const hm__soft_raw_t *raw,
                   uint64_t *step)
{
    uint64_t s = 0; /* modulo 2^64, as the registers */
    for (uint32_t m = lead; m <= end; m++) {
        const ins_t *x = &f->ins[m];
        if (x->clobber >> g & 1)
            return -1;
        if (x->adj_reg != g)
            continue;
        s += (uint64_t)x->adj;
        if (x->adj_src >= 0) {
            uint64_t v;
            if (reg_at(f, x->adj_src, m, k, raw, 1, &v) != 0)
                return -1;
            s += v * (uint64_t)(int64_t)x->adj_mul;
        }
    }
    *step = s;
    return 0;
}

static int indirect(const func_t *f, uint32_t i, uint32_t lead, uint32_t end, int loop)
{
    const ins_t *x = &f->ins[i];
    if (x->flags & F_VSIB)
        return 1;
    return x->index >= 0 ? from_load(f, x->index, i, lead, end, loop)
                         : x->base >= 0 && from_load(f, x->base, i, lead, end, loop);
}

/* Cache lines access i of the loop [lead, end] brings per iteration, in
 * 64ths (0..64). A base written otherwise than by a step (reloaded from
 * the stack, say) is taken as fixed when an index steps; an address
 * computed anew each iteration (a row pointer loaded with a fixed column
 * index, A[i][j] over i) counts as a line. */
static unsigned lines64(const func_t *f, uint32_t i, uint32_t lead, uint32_t end, uint32_t k,
                        const hm__soft_raw_t *raw)
{
    const ins_t *x = &f->ins[i];
    if (indirect(f, i, lead, end, 1))
        return 64;
    uint64_t sb = 0, si = 0;
    int bok = x->base < 0 || step_of(f, x->base, lead, end, k, raw, &sb) == 0;
    int iok = x->index < 0 || step_of(f, x->index, lead, end, k, raw, &si) == 0;
    if (!iok || (!bok && (x->index < 0 || si * x->scale == 0)))
        return 64;
    uint64_t st = (bok ? sb : 0) + si * x->scale;
    if (st >> 63)
        st = -st; /* a step down */
    return st > 64 ? 64 : (unsigned)st;
}

/* Address of access m of the loop [lead, end] for a sample at k: as it
 * ran in this iteration (m <= k) or will run next (m > k, replayed
 * forward); failing the latter (a register written in between: the load
 * of an index), as it ran in the previous iteration, from the registers
 * rewound to the loop head (`prev`, filled on first use: poison marks the
 * ones that could not be) and undone over [m, end]. */
typedef struct {
    int ready;
    uint32_t poison;
    hm__soft_raw_t raw;
} prev_t;

static int ea_loop(const func_t *f, uint32_t m, uint32_t k, uint32_t lead, uint32_t end, const hm__soft_raw_t *raw,
                   prev_t *pv, uint64_t *ea, int *access)
{
    if (ea_of(f, m, k, raw, ea, access) == 0)
        return 0;
    const ins_t *x = &f->ins[m];
    if (m <= k || (x->flags & F_VSIB))
        return -1;
    if (!pv->ready) {
        pv->ready = 1;
        pv->raw = *raw;
        for (int g = 0; g < 16; g++) {
            uint64_t v;
            if (reg_at(f, g, lead, k, raw, 0, &v) == 0)
                pv->raw.regs[g] = v;
            else
                pv->poison |= 1u << g;
        }
    }
    uint32_t need = (x->base >= 0 ? 1u << x->base : 0) | (x->index >= 0 ? 1u << x->index : 0);
    for (uint32_t j = m; j <= end; j++)
        if (f->ins[j].adj_src >= 0)
            need |= 1u << f->ins[j].adj_src;
    if (need & pv->poison)
        return -1;
    return ea_of(f, m, end + 1, &pv->raw, ea, access);
}

/* Draws the access of the loop [lead, end] a sample at k is charged to
 * (step 4a): one of its accesses with an address rebuildable from the
 * sample, in proportion to the lines each brings per iteration. Returns
 * 0 when none takes part. */
static int draw(const func_t *f, const hm__soft_raw_t *raw, uint32_t k, uint32_t lead, uint32_t end, uint32_t *best,
                uint64_t *ea, int *access)
{
    /* At most MAXC accesses of a loop take part, the first ones. */
    enum { MAXC = 64 };
    uint32_t cm[MAXC], cw[MAXC], nc = 0;
    uint64_t ca[MAXC];
    int cacc[MAXC];
    uint64_t tot = 0;
    prev_t pv = {0};
    for (uint32_t m = lead; m <= end && nc < MAXC; m++)
        if ((f->ins[m].flags & F_MEM) && ea_loop(f, m, k, lead, end, raw, &pv, &ca[nc], &cacc[nc]) == 0) {
            cm[nc] = m;
            cw[nc] = lines64(f, m, lead, end, k, raw);
            tot += cw[nc++];
        }
    if (!tot)
        return 0;
    uint64_t r = hm__hash64(raw->regs, sizeof raw->regs, raw->time) % tot;
    uint32_t c = 0;
    while (r >= cw[c])
        r -= cw[c++];
    *best = cm[c], *ea = ca[c], *access = cacc[c];
    return 1;
}

/* Data flow of one instruction over the registers that hold a value
 * computed from a data load of a loop (gregs in *g, vector registers in
 * *v): what it writes joins them if it reads one of them (or, with
 * `loads`, if it is itself a data load), and leaves them otherwise. */
static void flow(const ins_t *x, uint32_t *g, uint16_t *v, int loads)
{
    uint32_t wg = x->clobber | (x->adj_reg >= 0 ? 1u << x->adj_reg : 0);
    int from = (x->reads & *g) || (x->vreads & *v) || ((x->flags & F_VSIB) && x->index >= 0 && (*v >> x->index & 1)) ||
               (loads && (x->flags & (F_MEM | F_STORE | F_RIP)) == F_MEM);
    if (from) {
        *g |= wg;
        *v |= x->vclobber;
    } else {
        *g &= ~wg;
        *v &= (uint16_t)~x->vclobber;
    }
}

/* Step 4c: is a sample at k, in the block that starts at `lead`, the time
 * of the loop that block falls out of? If so, *ll and *le are the loop's
 * bounds. It is when the block's leader follows the conditional branch
 * back to the start of a loop, and either no access of the block lies
 * before k (the closest access behind the PC is the loop's), or the
 * closest one, or an instruction between it and k, takes as an operand a
 * value the loop computed from its loads, while that access's address
 * does not derive from them. */
static int after_loop(const func_t *f, uint32_t k, uint32_t lead, uint32_t *ll, uint32_t *le)
{
    if (lead == 0 || !(f->ins[lead].flags & F_LEADER))
        return 0;
    uint32_t e = lead - 1, l = e;
    const ins_t *br = &f->ins[e];
    if (!(br->flags & F_COND) || br->tgt == NO_TGT)
        return 0;
    while (l > 0 && !(f->ins[l].flags & F_LEADER) && e - l < LOOP_MAX)
        l--;
    if (f->ins[l].off != br->tgt || e - l >= LOOP_MAX)
        return 0;
    /* The registers that hold, at the loop's exit, a value computed from
     * its loads: its body applied from none until nothing changes. Each
     * pass that changes something adds a register, so this ends within
     * one pass per register (16 general, 16 vector) and one more. */
    uint32_t g = 0;
    uint16_t v = 0;
    for (int pass = 0; pass < 33; pass++) {
        uint32_t g0 = g;
        uint16_t v0 = v;
        for (uint32_t m = l; m <= e; m++)
            flow(&f->ins[m], &g, &v, 1);
        if (g == g0 && v == v0)
            break;
    }
    int have = 0, dep = 0, waits = 0;
    for (uint32_t i = lead; i < k; i++) {
        const ins_t *x = &f->ins[i];
        if (x->flags & F_MEM) {
            have = 1, waits = 0;
            dep = (x->base >= 0 && (g >> x->base & 1)) ||
                  (x->index >= 0 && ((x->flags & F_VSIB) ? (v >> x->index & 1) : (g >> x->index & 1)));
        }
        if ((x->vals & g) || (x->vreads & v))
            waits = 1;
        flow(x, &g, &v, 0);
    }
    if (have && (dep || !waits))
        return 0;
    *ll = l, *le = e;
    return 1;
}

/* Moves the sample from `*hit` (the closest access; UINT32_MAX when there
 * is none) to the access it is charged to (see above). Returns 1 if moved. */
static int charge(const func_t *f, const hm__soft_raw_t *raw, uint32_t k, uint32_t *hit, uint64_t *ea,
                  int *access, int *how)
{
    uint32_t lead = k, end = k;
    while (lead > 0 && !(f->ins[lead].flags & F_LEADER) && k - lead < LOOP_MAX)
        lead--;
    while (!(f->ins[end].flags & F_END) && end + 1 < f->n && !(f->ins[end + 1].flags & F_LEADER) &&
           end - k < LOOP_MAX)
        end++;
    uint32_t best = *hit, ll, le;
    uint64_t a, besta = 0;
    int acc, bestacc = 0;
    if ((f->ins[end].flags & F_END) && f->ins[end].tgt == f->ins[lead].off && end - lead < LOOP_MAX) {
        if (best == UINT32_MAX || !draw(f, raw, k, lead, end, &best, &besta, &bestacc))
            return 0;
    } else if (after_loop(f, k, lead, &ll, &le)) {
        if (!draw(f, raw, k, ll, le, &best, &besta, &bestacc))
            return 0;
    } else {
        /* The look-back that found `*hit` is not bounded: it may lie
         * before a capped lead. */
        if (best == UINT32_MAX || best < lead || best > end || indirect(f, best, lead, end, 0))
            return 0;
        for (uint32_t m = best; m-- > lead && best - m <= SCAN_MAX;)
            if ((f->ins[m].flags & F_MEM) && indirect(f, m, lead, end, 0) && ea_of(f, m, k, raw, &a, &acc) == 0) {
                best = m, besta = a, bestacc = acc;
                break;
            }
    }
    if (best == *hit)
        return 0;
    *ea = besta;
    *access = bestacc;
    *how = best < k ? HOW_BACK : best == k ? HOW_AT : HOW_FWD;
    *hit = best;
    return 1;
}

static int resolve_in(const func_t *f, const hm__soft_raw_t *raw, uint64_t pc, uint64_t *addr, uint64_t *ip,
                      int *access, int *how, int *vsib, int *moved)
{
    uint32_t off = (uint32_t)(pc - f->start);
    uint32_t lo = 0, hi = f->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (f->ins[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    *how = HOW_NONE;
    if (lo >= f->n || f->ins[lo].off != off)
        return 0;
    uint32_t k = lo, hit = 0;
    uint64_t ea;
    /* After a page fault the PC is the faulting instruction itself, which
     * the kernel restarts: the time went to its access, not to the one
     * before (first-touch stores to a fresh array would otherwise be
     * charged to the load that precedes them). */
    if (raw->faulted && ea_of(f, k, k, raw, &ea, access) == 0) {
        *how = HOW_AT;
        hit = k;
    }
    if (*how == HOW_NONE && !(f->ins[k].flags & F_LEADER))
        for (uint32_t i = k; i-- > 0;) {
            if (ea_of(f, i, k, raw, &ea, access) == 0) {
                *how = HOW_BACK;
                hit = i;
                break;
            }
            if (f->ins[i].flags & F_LEADER)
                break;
        }
    if (*how == HOW_NONE && ea_of(f, k, k, raw, &ea, access) == 0) {
        *how = HOW_AT;
        hit = k;
    }
    for (uint32_t i = k; *how == HOW_NONE && i + 1 < f->n && !(f->ins[i].flags & F_END); i++) {
        if (f->ins[i + 1].flags & F_LEADER)
            break;
        if (ea_of(f, i + 1, k, raw, &ea, access) == 0) {
            *how = HOW_FWD;
            hit = i + 1;
        }
    }
    if (*how == HOW_NONE)
        hit = UINT32_MAX; /* step 4c may still find the access */
    *moved = !raw->faulted && charge(f, raw, k, &hit, &ea, access, how);
    if (*how == HOW_NONE)
        return 0;
    *addr = ea;
    *ip = f->start + f->ins[hit].off;
    *vsib = (f->ins[hit].flags & F_VSIB) != 0;
    return 1;
}

int hm__soft_resolve_code(const uint8_t *code, size_t len, uint64_t code_addr, const hm__soft_raw_t *raw,
                          uint64_t *addr, uint64_t *ip, int *access, int *how)
{
    func_t f;
    if (decode_range(code, code_addr, code_addr + len, &f) != 0)
        return -1;
    int vs = 0, moved = 0;
    int r = resolve_in(&f, raw, raw->regs[REG_RIP], addr, ip, access, how, &vs, &moved);
    free(f.ins);
    return r;
}

typedef struct {
    uint64_t pc, lo, hi;
} seg_t;

/* dl_iterate_phdr callback: the executable PT_LOAD segment holding pc. */
static int seg_of(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    seg_t *g = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (g->pc >= lo && g->pc < hi) {
            g->lo = lo;
            g->hi = hi;
            return 1;
        }
    }
    return 0;
}

/* Function bounds from the FDE: pc_begin comes decoded from the unwinder,
 * pc_range is decoded here with the encoding the CIE names. */
static int func_bounds(uint64_t pc, uint64_t *start, uint64_t *end)
{
    struct hm_eh_bases_ b = {0};
    const uint8_t *fde = _Unwind_Find_FDE((void *)pc, &b);
    if (!fde || !b.func)
        return -1;
    uint64_t range;
    if (hm__fde_range(fde, 1u << 20, &range) != 0)
        return -1;
    uint64_t s = (uint64_t)b.func;
    if (pc < s || range == 0 || range > (64u << 20) || pc >= s + range)
        return -1;
    /* Whatever the FDE says, decoding stays inside the executable segment
     * that holds pc: it must never read past the mapped text. */
    seg_t g = {pc, 0, 0};
    if (!dl_iterate_phdr(seg_of, &g) || s < g.lo)
        return -1;
    *start = s;
    *end = s + range < g.hi ? s + range : g.hi;
    return 0;
}

static size_t slot(const hm__soft_cache_t *c, uint64_t s) { return (size_t)(hm__hash64(&s, sizeof s, 7) & (c->cap - 1)); }

static func_t *lookup(hm__soft_cache_t *c, uint64_t pc)
{
    uint64_t s, e = 0;
    size_t r = (size_t)(pc * 0x9e3779b97f4a7c15ull >> 52) & 4095;
    if (c->recent[r].pc == pc) {
        s = c->recent[r].start;
    } else {
        if (func_bounds(pc, &s, &e) != 0)
            return NULL;
        c->recent[r].pc = pc;
        c->recent[r].start = s;
    }
    size_t h = slot(c, s);
    while (c->tab[h].start && c->tab[h].start != s)
        h = (h + 1) & (c->cap - 1);
    if (c->tab[h].start == s)
        return c->tab[h].failed ? NULL : &c->tab[h];
    if ((c->used + 1) * 2 > c->cap) {
        size_t nc = c->cap * 2;
        func_t *nt = calloc(nc, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < c->cap; i++)
            if (c->tab[i].start) {
                size_t j = (size_t)(hm__hash64(&c->tab[i].start, 8, 7) & (nc - 1));
                while (nt[j].start)
                    j = (j + 1) & (nc - 1);
                nt[j] = c->tab[i];
            }
        free(c->tab);
        c->tab = nt;
        c->cap = nc;
        h = slot(c, s);
        while (c->tab[h].start)
            h = (h + 1) & (c->cap - 1);
    }
    if (!e && func_bounds(pc, &s, &e) != 0)
        return NULL;
    func_t *f = &c->tab[h];
    if (decode_range((const uint8_t *)s, s, e, f) != 0)
        f->failed = 1;
    f->start = s; /* even on failure, so we do not retry forever */
    c->used++;
    return f->failed ? NULL : f;
}

int hm__soft_resolve(hm__soft_cache_t *c, const hm__soft_raw_t *raw, uint64_t *addr, uint64_t *ip, int *access)
{
    uint64_t pc = raw->regs[REG_RIP];
    c->st.total++;
    c->st.faulted += raw->faulted != 0;
    func_t *f = lookup(c, pc);
    if (!f) {
        c->st.nofunc++;
        return 0;
    }
    int how, vs = 0, moved = 0;
    int r = resolve_in(f, raw, pc, addr, ip, access, &how, &vs, &moved);
    switch (how) {
    case HOW_BACK: c->st.back++; break;
    case HOW_AT: c->st.at++; break;
    case HOW_FWD: c->st.fwd++; break;
    default: c->st.none++; break;
    }
    if (r && vs)
        c->st.vsib++;
    if (r && moved)
        c->st.moved++;
    return r;
}
