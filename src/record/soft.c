/* Soft sampler, decoding side. The signal handler (src/preload) only copies
 * the interrupted PC and registers; everything here runs in the collector
 * thread, where dladdr, the unwinder's FDE lookup and malloc are allowed.
 *
 * Why look back: a timer interrupt lands on the instruction *after* the one
 * that was stalling, which on a streaming loop is usually an add/cmp/jcc
 * with no memory operand. So we walk back within the basic block to the
 * closest memory instruction whose address registers we can still
 * reconstruct from the saved context. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include <Zydis/Zydis.h>
#include <dlfcn.h>
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

enum { F_LEADER = 1, F_END = 2 };

typedef struct {
    uint32_t off;
    uint8_t len, flags;
} ins_t;

typedef struct {
    uint64_t start, end;   /* [start, end) decoded */
    ins_t *ins;
    uint32_t n;
} func_t;

struct hm__soft_cache {
    ZydisDecoder dec;
    func_t *tab;           /* open addressing on start */
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
    ZydisDecoderInit(&c->dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
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

/* Linear decode of [start, end) into instruction offsets, marking basic
 * block leaders: the start, targets of direct jumps inside the range, and
 * instructions after any control transfer (calls included: they clobber
 * the caller-saved registers we would need). */
static int decode_range(const uint8_t *code, uint64_t start, uint64_t end, func_t *f)
{
    size_t cap = 256, n = 0;
    ins_t *ins = malloc(cap * sizeof *ins);
    if (!ins)
        return -1;
    uint64_t at = start;
    int after_branch = 1;
    uint64_t *targets = NULL;
    size_t nt = 0, tcap = 0;
    while (at < end) {
        ZydisDecodedInstruction in;
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(decoder(), NULL, code + (at - start), (ZyanUSize)(end - at), &in)))
            break; /* data or padding: stop; what we have is still valid */
        if (n == cap) {
            cap *= 2;
            ins_t *t = realloc(ins, cap * sizeof *ins);
            if (!t)
                break;
            ins = t;
        }
        ins[n].off = (uint32_t)(at - start);
        ins[n].len = in.length;
        ins[n].flags = after_branch ? F_LEADER : 0;
        after_branch = 0;
        switch (in.meta.category) {
        case ZYDIS_CATEGORY_COND_BR:
        case ZYDIS_CATEGORY_UNCOND_BR:
        case ZYDIS_CATEGORY_RET:
        case ZYDIS_CATEGORY_CALL:
        case ZYDIS_CATEGORY_SYSCALL:
        case ZYDIS_CATEGORY_INTERRUPT:
            ins[n].flags |= F_END;
            after_branch = 1;
            if ((in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) && in.raw.imm[0].size) {
                uint64_t tgt = at + in.length + (uint64_t)in.raw.imm[0].value.s;
                if (tgt >= start && tgt < end) {
                    if (nt == tcap) {
                        tcap = tcap ? tcap * 2 : 64;
                        uint64_t *t = realloc(targets, tcap * sizeof *targets);
                        if (!t)
                            break;
                        targets = t;
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
    f->end = start + (n ? ins[n - 1].off + ins[n - 1].len : 0);
    f->ins = ins;
    f->n = (uint32_t)n;
    return 0;
}

/* greg index (sys/ucontext.h REG_*) of a 64-bit GPR, or -1. */
static int greg_of(ZydisRegister r)
{
    switch (r) {
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

static ZydisRegister big(ZydisRegister r)
{
    if (r == ZYDIS_REGISTER_NONE)
        return r;
    ZydisRegister b = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    return b == ZYDIS_REGISTER_NONE ? r : b;
}

/* xmm number of an index vector register (xmm/ymm/zmm 0..15), or -1. */
static int vec_of(ZydisRegister r)
{
    if (r >= ZYDIS_REGISTER_XMM0 && r <= ZYDIS_REGISTER_XMM15) return r - ZYDIS_REGISTER_XMM0;
    if (r >= ZYDIS_REGISTER_YMM0 && r <= ZYDIS_REGISTER_YMM15) return r - ZYDIS_REGISTER_YMM0;
    if (r >= ZYDIS_REGISTER_ZMM0 && r <= ZYDIS_REGISTER_ZMM15) return r - ZYDIS_REGISTER_ZMM0;
    return -1;
}

typedef struct {
    ZydisDecodedInstruction in;
    ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
} dec_t;

static int dec_at(const uint8_t *p, size_t len, dec_t *d)
{
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(decoder(), p, len, &d->in, d->op)) ? 0 : -1;
}

/* The data memory operand of an instruction, or -1. Stack traffic
 * (push/pop/call, rsp-based spills) and TLS (fs/gs) are not data objects. */
static int mem_operand(const dec_t *d)
{
    for (int i = 0; i < d->in.operand_count; i++) {
        const ZydisDecodedOperand *o = &d->op[i];
        if (o->type != ZYDIS_OPERAND_TYPE_MEMORY)
            continue;
        if (o->mem.type != ZYDIS_MEMOP_TYPE_MEM && o->mem.type != ZYDIS_MEMOP_TYPE_VSIB)
            continue;
        if (o->mem.segment == ZYDIS_REGISTER_FS || o->mem.segment == ZYDIS_REGISTER_GS)
            continue;
        if (big(o->mem.base) == ZYDIS_REGISTER_RSP)
            continue;
        return i;
    }
    return -1;
}

/* How instruction d changes register r: 0 = untouched, 1 = adds *delta,
 * 2 = clobbers in a way we cannot undo. */
static int effect(const dec_t *d, ZydisRegister r, int64_t *delta)
{
    int wrote = 0;
    for (int i = 0; i < d->in.operand_count; i++) {
        const ZydisDecodedOperand *o = &d->op[i];
        if (o->type == ZYDIS_OPERAND_TYPE_REGISTER && (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
            big(o->reg.value) == r)
            wrote = 1;
    }
    if (!wrote)
        return 0;
    const ZydisDecodedOperand *o0 = &d->op[0], *o1 = &d->op[1];
    int full = o0->type == ZYDIS_OPERAND_TYPE_REGISTER && o0->reg.value == r;
    switch (d->in.mnemonic) {
    case ZYDIS_MNEMONIC_ADD:
    case ZYDIS_MNEMONIC_SUB:
        if (full && o1->type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
            int64_t v = o1->imm.is_signed ? o1->imm.value.s : (int64_t)o1->imm.value.u;
            *delta = d->in.mnemonic == ZYDIS_MNEMONIC_ADD ? v : -v;
            return 1;
        }
        return 2;
    case ZYDIS_MNEMONIC_INC: if (full) { *delta = 1; return 1; } return 2;
    case ZYDIS_MNEMONIC_DEC: if (full) { *delta = -1; return 1; } return 2;
    case ZYDIS_MNEMONIC_LEA:
        /* lea r, [r + disp] */
        if (full && o1->type == ZYDIS_OPERAND_TYPE_MEMORY && big(o1->mem.base) == r &&
            o1->mem.index == ZYDIS_REGISTER_NONE) {
            *delta = o1->mem.disp.value;
            return 1;
        }
        return 2;
    default:
        return 2;
    }
}

typedef struct {
    const uint8_t *code;   /* bytes of the function, code[0] at base */
    uint64_t base;
    const func_t *f;
} view_t;

static int decode_idx(const view_t *v, uint32_t i, dec_t *d)
{
    const ins_t *x = &v->f->ins[i];
    return dec_at(v->code + x->off, x->len, d);
}

/* Value register r had when instruction `at` ran, given its value `now` at
 * instruction `pc_i`, by undoing (at < pc_i) or replaying (at > pc_i) the
 * constant adjustments in between. Returns -1 when something clobbered it. */
static int reg_at(const view_t *v, ZydisRegister r, uint32_t at, uint32_t pc_i, uint64_t now, uint64_t *out)
{
    int64_t total = 0;
    uint32_t lo = at < pc_i ? at : pc_i, hi = at < pc_i ? pc_i : at;
    for (uint32_t i = lo; i < hi; i++) {
        dec_t d;
        int64_t delta = 0;
        if (decode_idx(v, i, &d) != 0)
            return -1;
        int e = effect(&d, r, &delta);
        if (e == 2)
            return -1;
        if (e == 1)
            total += delta;
    }
    *out = at < pc_i ? now - (uint64_t)total : now + (uint64_t)total;
    return 0;
}

static int vsib_width(ZydisMnemonic m)
{
    const char *s = ZydisMnemonicGetString(m);
    /* vgatherdps/vpgatherqq/vscatterdpd...: the letter after the verb says
     * whether indices are dwords or qwords. */
    const char *p = s ? strstr(s, "gather") : NULL;
    if (!p && s)
        p = strstr(s, "scatter");
    if (!p)
        return 8;
    p += p[0] == 'g' ? 6 : 7;
    return (*p == 'd') ? 4 : 8;
}

/* Effective address of instruction index i, or -1. */
static int ea_of(const view_t *v, uint32_t i, uint32_t pc_i, const hm__soft_raw_t *raw, uint64_t *ea,
                 int *access, int *is_vsib)
{
    dec_t d;
    if (decode_idx(v, i, &d) != 0)
        return -1;
    int k = mem_operand(&d);
    if (k < 0)
        return -1;
    const ZydisDecodedOperand *o = &d.op[k];
    uint64_t rt = v->base + v->f->ins[i].off;
    uint64_t basev = 0, idxv = 0;
    ZydisRegister b = big(o->mem.base), x = o->mem.index;
    if (b == ZYDIS_REGISTER_RIP) {
        basev = rt + d.in.length;
    } else if (b != ZYDIS_REGISTER_NONE) {
        int g = greg_of(b);
        if (g < 0 || reg_at(v, b, i, pc_i, raw->gregs[g], &basev) != 0)
            return -1;
    }
    *is_vsib = o->mem.type == ZYDIS_MEMOP_TYPE_VSIB;
    if (*is_vsib) {
        /* A gather touches one address per lane; we attribute lane 0, which
         * is in the low bits of the index vector the context saved. The
         * index vector is rarely rewritten between gather and interrupt,
         * but we cannot tell, so a vector write in between rejects it. */
        int xv = vec_of(x);
        if (xv < 0 || !raw->has_xmm)
            return -1;
        for (uint32_t m = i < pc_i ? i + 1 : pc_i; m < (i < pc_i ? pc_i : i); m++) {
            dec_t dm;
            int64_t dl;
            if (decode_idx(v, m, &dm) != 0 || effect(&dm, x, &dl) != 0)
                return -1;
        }
        uint64_t lane = raw->xmm_lo[xv];
        idxv = vsib_width(d.in.mnemonic) == 4 ? (uint64_t)(int64_t)(int32_t)lane : lane;
    } else if (x != ZYDIS_REGISTER_NONE) {
        ZydisRegister xb = big(x);
        int g = greg_of(xb);
        if (g < 0 || reg_at(v, xb, i, pc_i, raw->gregs[g], &idxv) != 0)
            return -1;
    }
    uint64_t a = basev + idxv * (uint64_t)(o->mem.scale ? o->mem.scale : 1) + (uint64_t)o->mem.disp.value;
    if (o->mem.base != ZYDIS_REGISTER_NONE && b != o->mem.base && b != ZYDIS_REGISTER_RIP)
        a &= 0xffffffffu; /* 32-bit address size */
    *ea = a;
    *access = (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) ? HM_ACCESS_STORE : HM_ACCESS_LOAD;
    return 0;
}

enum { HOW_NONE = 0, HOW_BACK, HOW_AT, HOW_FWD };

static int resolve_in(const view_t *v, const hm__soft_raw_t *raw, uint64_t pc, uint64_t *addr, uint64_t *ip,
                      int *access, int *how, int *vsib)
{
    const func_t *f = v->f;
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
    uint32_t k = lo;
    uint64_t ea;
    /* Back to the block leader (inclusive). */
    if (!(f->ins[k].flags & F_LEADER))
        for (uint32_t i = k; i-- > 0;) {
            if (ea_of(v, i, k, raw, &ea, access, vsib) == 0) {
                *addr = ea;
                *ip = v->base + f->ins[i].off;
                *how = HOW_BACK;
                return 1;
            }
            if (f->ins[i].flags & F_LEADER)
                break;
        }
    if (ea_of(v, k, k, raw, &ea, access, vsib) == 0) {
        *addr = ea;
        *ip = pc;
        *how = HOW_AT;
        return 1;
    }
    for (uint32_t i = k; i + 1 < f->n && !(f->ins[i].flags & F_END); i++) {
        if (f->ins[i + 1].flags & F_LEADER)
            break;
        if (ea_of(v, i + 1, k, raw, &ea, access, vsib) == 0) {
            *addr = ea;
            *ip = v->base + f->ins[i + 1].off;
            *how = HOW_FWD;
            return 1;
        }
    }
    return 0;
}

int hm__soft_resolve_code(const uint8_t *code, size_t len, uint64_t code_addr, const hm__soft_raw_t *raw,
                          uint64_t *addr, uint64_t *ip, int *access, int *how)
{
    func_t f;
    if (decode_range(code, code_addr, code_addr + len, &f) != 0)
        return -1;
    view_t v = {code, code_addr, &f};
    int vs = 0;
    int r = resolve_in(&v, raw, raw->gregs[REG_RIP], addr, ip, access, how, &vs);
    free(f.ins);
    return r;
}

/* Function bounds from the FDE: pc_begin/pc_range follow the CIE pointer.
 * gcc and clang emit them as 4-byte pcrel/udata; any other encoding fails
 * the sanity check and we fall back to a window around the pc. */
static int func_bounds(uint64_t pc, uint64_t *start, uint64_t *end)
{
    struct hm_eh_bases_ b = {0};
    const uint8_t *fde = _Unwind_Find_FDE((void *)pc, &b);
    if (!fde || !b.func)
        return -1;
    uint32_t range;
    memcpy(&range, fde + 12, 4);
    uint64_t s = (uint64_t)b.func;
    if (pc < s || range == 0 || range > (64u << 20) || pc >= s + range)
        return -1;
    *start = s;
    *end = s + range;
    return 0;
}

static func_t *lookup(hm__soft_cache_t *c, uint64_t pc)
{
    uint64_t s, e;
    if (func_bounds(pc, &s, &e) != 0)
        return NULL;
    size_t h = (size_t)(hm__hash64(&s, sizeof s, 7) & (c->cap - 1));
    while (c->tab[h].start && c->tab[h].start != s)
        h = (h + 1) & (c->cap - 1);
    if (c->tab[h].start == s)
        return c->tab[h].ins ? &c->tab[h] : NULL;
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
        h = (size_t)(hm__hash64(&s, sizeof s, 7) & (c->cap - 1));
        while (c->tab[h].start)
            h = (h + 1) & (c->cap - 1);
    }
    func_t *f = &c->tab[h];
    if (decode_range((const uint8_t *)s, s, e, f) != 0) {
        f->ins = NULL;
    }
    f->start = s; /* even on failure, so we do not retry forever */
    c->used++;
    return f->ins ? f : NULL;
}

int hm__soft_resolve(hm__soft_cache_t *c, const hm__soft_raw_t *raw, uint64_t *addr, uint64_t *ip, int *access)
{
    uint64_t pc = raw->gregs[REG_RIP];
    c->st.total++;
    func_t *f = lookup(c, pc);
    if (!f) {
        c->st.nofunc++;
        return 0;
    }
    view_t v = {(const uint8_t *)f->start, f->start, f};
    int how, vs = 0;
    int r = resolve_in(&v, raw, pc, addr, ip, access, &how, &vs);
    switch (how) {
    case HOW_BACK: c->st.back++; break;
    case HOW_AT: c->st.at++; break;
    case HOW_FWD: c->st.fwd++; break;
    default: c->st.none++; break;
    }
    if (r && vs)
        c->st.vsib++;
    return r;
}
