/* The instruction-set boundary. Everything that reads a signal context or
 * decodes machine code lives in src/arch/<isa>/ (x86_64, aarch64, generic);
 * the rest of hetmem is portable C and reaches the machine only through
 * this header. CMake (src/arch/CMakeLists.txt) picks one folder per build.
 *
 * What each architecture provides:
 *   x86_64   register context, soft-sampler decoding (Zydis), block counts
 *   aarch64  register context, block counts (A64 branches); no soft decoding
 *            (the SPE backend gives data addresses there)
 *   generic  nothing: the soft sampler and hetmem-cc are refused
 *
 * arch depends on common/ and the public headers only, never on record or
 * preload: those include this header (record_int.h, preload_int.h). */
#ifndef HETMEM_ARCH_H
#define HETMEM_ARCH_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#define HM_ARCH_NAME "x86_64"
#define HM__ARCH_NREGS 23   /* ucontext gregs, REG_R8..REG_CR2 order */
#define HM__ARCH_REG_PC 16  /* REG_RIP */
#define HM_ARCH_SOFT_DECODE 1
#define HM_ARCH_BLOCKS 1
#elif defined(__aarch64__)
#define HM_ARCH_NAME "aarch64"
#define HM__ARCH_NREGS 33   /* x0..x30, sp, pc */
#define HM__ARCH_REG_PC 32
#define HM_ARCH_SOFT_DECODE 0
#define HM_ARCH_BLOCKS 1
#else
#define HM_ARCH_NAME "unknown"
#define HM__ARCH_NREGS 1
#define HM__ARCH_REG_PC 0
#define HM_ARCH_SOFT_DECODE 0
#define HM_ARCH_BLOCKS 0
#endif

/* What the soft sampler's signal handler saves: the interrupted PC and the
 * registers an effective address may depend on. Decoding happens later,
 * off the signal path, in the collector (hm__soft_resolve). */
typedef struct {
    uint64_t time;
    uint64_t regs[HM__ARCH_NREGS]; /* general registers, numbered as above */
    uint64_t vec_lo[16];   /* low 64 bits of vector registers 0-15 (x86: the
                              lane 0 of gather indices) */
    uint32_t tid;
    uint32_t has_vec;      /* vec_lo is valid */
    uint32_t faulted;      /* the thread took a page fault since its previous
                              sample: the PC may be an instruction the kernel
                              is restarting, not the one after a stall */
    uint32_t pad_;
} hm__soft_raw_t;

static inline uint64_t hm__arch_raw_pc(const hm__soft_raw_t *r) { return r->regs[HM__ARCH_REG_PC]; }

/* --------------------------------------------- soft sampler: decoding */

/* The decoding exists on x86-64 only (src/arch/x86_64/soft.c); elsewhere
 * (src/arch/generic/soft.c) the cache opens and resolves nothing. */

typedef struct hm__soft_cache hm__soft_cache_t;

typedef struct {
    uint64_t total, back, at, fwd, none, nofunc, vsib;
    uint64_t faulted; /* flagged by the handler: a page fault since the thread's previous sample */
    uint64_t moved; /* charged to another access than the closest: of the block (docs/record.md, soft, 4a/4b) or of the loop it falls out of (4c, also when the block had none) */
} hm__soft_stats_t;

/* Per-collector decode cache. Not thread-safe (one collector thread).
 * hm__soft_cache_open returns 0 or -ENOMEM; the caller closes it. */
int hm__soft_cache_open(hm__soft_cache_t **out);
void hm__soft_cache_close(hm__soft_cache_t *c);
const hm__soft_stats_t *hm__soft_cache_stats(const hm__soft_cache_t *c);

/* Finds the memory access the sample most likely belongs to: the closest
 * memory instruction before the PC in its basic block whose address
 * registers are still intact (or can be undone: add/sub/inc/dec by a
 * constant), else the instruction at the PC, else the next one in the
 * block. Returns 1 with addr/ip/access (HM_ACCESS_LOAD or HM_ACCESS_STORE)
 * filled, 0 when none. */
int hm__soft_resolve(hm__soft_cache_t *c, const hm__soft_raw_t *raw, uint64_t *addr, uint64_t *ip, int *access);

/* Same on a code buffer (for tests): code[0..len) is at runtime address
 * code_addr, function start = code_addr. */
int hm__soft_resolve_code(const uint8_t *code, size_t len, uint64_t code_addr, const hm__soft_raw_t *raw,
                          uint64_t *addr, uint64_t *ip, int *access, int *how);

/* pc_range of the .eh_frame FDE at fde, decoded with the pointer encoding
 * its CIE's augmentation names (src/arch/fde.c; DWARF, the same on every
 * architecture; the soft decoder's way to a function's extent). Records
 * longer than limit bytes are refused. Returns 0, or -1 for a malformed or
 * unsupported record. */
int hm__fde_range(const uint8_t *fde, size_t limit, uint64_t *range);

/* Copies the interrupted registers out of a signal handler's ucontext_t.
 * Async-signal-safe; does not touch r->time or r->tid. */
void hm__arch_save_context(hm__soft_raw_t *r, const void *ucontext);

/* Number of instructions of the basic block starting at pc, for hetmem-cc
 * builds (libhetmem_inst): up to and including the first branch or return,
 * or up to the next coverage hook call. Calls to the other hooks, and the
 * instruction that loads a hook's address argument where the decoder can
 * tell, are not counted. is_hook(addr) returns 2 for the coverage hook, 1
 * for another hook, 0 otherwise. Returns 0 where the architecture has no
 * block decoder (HM_ARCH_BLOCKS == 0). Reads code memory only.
 * *sel is set to 1 when a select (x86 cmov) of a loaded value feeds the
 * address of the block's next load, so that load waits for the value
 * (docs/sim.md); 0 where the decoder cannot tell. */
uint32_t hm__arch_block_insns(uintptr_t pc, int (*is_hook)(uintptr_t), unsigned max, uint32_t *sel);

/* A64 block counting on a word buffer, whatever the host: words[0..n) are
 * the instructions at address pc. Exposed for tests. */
uint32_t hm__a64_block_insns(const uint32_t *words, size_t n, uintptr_t pc, int (*is_hook)(uintptr_t));

#endif
