/* The instruction-set boundary. Everything that reads a signal context or
 * decodes machine code lives in src/arch/<isa>/ (x86_64, aarch64, generic);
 * the rest of hetmem is portable C and reaches the machine only through
 * this header. CMake (src/arch/CMakeLists.txt) picks one folder per build.
 *
 * What each architecture provides:
 *   x86_64   register context, soft-sampler decoding (Zydis), block counts
 *   aarch64  register context, block counts (A64 branches); no soft decoding
 *            (the SPE backend gives data addresses there)
 *   generic  nothing: the soft sampler and hetmem-cc are refused */
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
