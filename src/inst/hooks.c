/* Access and coverage hooks called by code that hetmem-cc compiled.
 *
 * gcc/clang -fsanitize=thread emits a call before every load and store
 * (__tsan_readN/__tsan_writeN) and -fsanitize-coverage=trace-pc one at the
 * start of every basic block. This file defines those entry points, so the
 * program links against us instead of the TSan runtime. */
#include <string.h>

#include "inst.h"

#define HM_HOOK HM_API __attribute__((used))

/* ---- loads and stores */

/* 4- and 8-byte loads pass the value about to be loaded: pointer and
 * index chases are detected from it (src/sim). The program itself is about to read it, so
 * the read is safe. Queueing the access (sim/sim.h) inlines into the hook. */
#define LOAD_HOOK(name, sz, value_expr)                                          \
    HM_HOOK void name(void *p)                                                   \
    {                                                                            \
        hm_sim_t *s = hm__inst_sim;                                              \
        if (HM_LIKELY(s != NULL))                                                \
            hm__sim_load(s, (uintptr_t)p, sz, value_expr, HM_RET_IP);            \
    }
#define STORE_HOOK(name, sz)                                                     \
    HM_HOOK void name(void *p)                                                   \
    {                                                                            \
        hm_sim_t *s = hm__inst_sim;                                              \
        if (HM_LIKELY(s != NULL))                                                \
            hm__sim_store(s, (uintptr_t)p, sz, HM_RET_IP);                       \
    }

static inline uint64_t load4(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t load8(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

LOAD_HOOK(__tsan_read1, 1, 0)
LOAD_HOOK(__tsan_read2, 2, 0)
LOAD_HOOK(__tsan_read4, 4, load4(p))
LOAD_HOOK(__tsan_read8, 8, load8(p))
LOAD_HOOK(__tsan_read16, 16, 0)
LOAD_HOOK(__tsan_unaligned_read2, 2, 0)
LOAD_HOOK(__tsan_unaligned_read4, 4, load4(p))
LOAD_HOOK(__tsan_unaligned_read8, 8, load8(p))
LOAD_HOOK(__tsan_unaligned_read16, 16, 0)
LOAD_HOOK(__tsan_volatile_read1, 1, 0)
LOAD_HOOK(__tsan_volatile_read2, 2, 0)
LOAD_HOOK(__tsan_volatile_read4, 4, 0)
LOAD_HOOK(__tsan_volatile_read8, 8, 0)
LOAD_HOOK(__tsan_volatile_read16, 16, 0)
STORE_HOOK(__tsan_write1, 1)
STORE_HOOK(__tsan_write2, 2)
STORE_HOOK(__tsan_write4, 4)
STORE_HOOK(__tsan_write8, 8)
STORE_HOOK(__tsan_write16, 16)
STORE_HOOK(__tsan_unaligned_write2, 2)
STORE_HOOK(__tsan_unaligned_write4, 4)
STORE_HOOK(__tsan_unaligned_write8, 8)
STORE_HOOK(__tsan_unaligned_write16, 16)
STORE_HOOK(__tsan_volatile_write1, 1)
STORE_HOOK(__tsan_volatile_write2, 2)
STORE_HOOK(__tsan_volatile_write4, 4)
STORE_HOOK(__tsan_volatile_write8, 8)
STORE_HOOK(__tsan_volatile_write16, 16)

HM_HOOK void __tsan_read_range(void *p, unsigned long n)
{
    if (hm__inst_sim)
        hm_sim_load_range(hm__inst_sim, (uintptr_t)p, n, HM_RET_IP);
}

HM_HOOK void __tsan_write_range(void *p, unsigned long n)
{
    if (hm__inst_sim)
        hm_sim_store_range(hm__inst_sim, (uintptr_t)p, n, HM_RET_IP);
}

/* Function entry/exit and C++ vptr hooks carry nothing the model needs
 * (hetmem-cc turns entry/exit off where the compiler allows). */
HM_HOOK void __tsan_func_entry(void *pc) { (void)pc; }
HM_HOOK void __tsan_func_exit(void) {}
HM_HOOK void __tsan_vptr_update(void **p, void *v) { (void)p; (void)v; }
HM_HOOK void __tsan_vptr_read(void **p) { (void)p; }

HM_HOOK void __tsan_init(void) { hm__inst_init(); }

/* ---- atomics: the program's own atomic operations, done for it. One
 * thread runs, so memory orders need no more than the plain builtins. */
#define ATOMICS(bits, T)                                                                   \
    HM_HOOK T __tsan_atomic##bits##_load(const volatile T *a, int mo)                     \
    {                                                                                      \
        if (hm__inst_sim) hm__sim_load(hm__inst_sim, (uintptr_t)a, bits / 8, 0, HM_RET_IP); \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                       \
    }                                                                                      \
    HM_HOOK void __tsan_atomic##bits##_store(volatile T *a, T v, int mo)                  \
    {                                                                                      \
        if (hm__inst_sim) hm__sim_store(hm__inst_sim, (uintptr_t)a, bits / 8, HM_RET_IP);   \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                      \
    ATOMIC_RMW(bits, T, exchange, __atomic_exchange_n)                                     \
    ATOMIC_RMW(bits, T, fetch_add, __atomic_fetch_add)                                     \
    ATOMIC_RMW(bits, T, fetch_sub, __atomic_fetch_sub)                                     \
    ATOMIC_RMW(bits, T, fetch_and, __atomic_fetch_and)                                     \
    ATOMIC_RMW(bits, T, fetch_or, __atomic_fetch_or)                                       \
    ATOMIC_RMW(bits, T, fetch_xor, __atomic_fetch_xor)                                     \
    ATOMIC_RMW(bits, T, fetch_nand, __atomic_fetch_nand)                                   \
    HM_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int mo, int fmo) \
    {                                                                                      \
        rmw_access(a, bits / 8, HM_RET_IP);                                                \
        return __atomic_compare_exchange_n(a, c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
    }                                                                                      \
    HM_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int mo, int fmo) \
    {                                                                                      \
        rmw_access(a, bits / 8, HM_RET_IP);                                                \
        return __atomic_compare_exchange_n(a, c, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
    }                                                                                      \
    HM_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int mo, int fmo) \
    {                                                                                      \
        rmw_access(a, bits / 8, HM_RET_IP);                                                \
        __atomic_compare_exchange_n(a, &c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);      \
        return c;                                                                          \
    }

#define ATOMIC_RMW(bits, T, op, builtin)                                       \
    HM_HOOK T __tsan_atomic##bits##_##op(volatile T *a, T v, int mo)          \
    {                                                                          \
        rmw_access(a, bits / 8, HM_RET_IP);                                    \
        return builtin(a, v, __ATOMIC_SEQ_CST);                                \
    }

static inline void rmw_access(volatile void *a, unsigned sz, uintptr_t ip)
{
    if (hm__inst_sim) {
        hm__sim_load(hm__inst_sim, (uintptr_t)a, sz, 0, ip);
        hm__sim_store(hm__inst_sim, (uintptr_t)a, sz, ip);
    }
}

ATOMICS(8, uint8_t)
ATOMICS(16, uint16_t)
ATOMICS(32, uint32_t)
ATOMICS(64, uint64_t)

HM_HOOK void __tsan_atomic_thread_fence(int mo) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
HM_HOOK void __tsan_atomic_signal_fence(int mo) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

/* ---- instruction counting */

HM_HOOK void __sanitizer_cov_trace_pc(void)
{
    hm_sim_t *s = hm__inst_sim;
    if (HM_LIKELY(s != NULL)) {
        hm__bb_t b = hm__inst_block(HM_RET_IP);
        hm__sim_instr(s, b.n);
        if (HM_UNLIKELY(b.sel))
            hm__sim_select_mark(s);
    } else if (HM_UNLIKELY(hm__inst_on)) {
        hm__inst_foreign_thread(); /* a second thread runs instrumented code */
    }
}

/* Entry points whose calls are instrumentation (2: the coverage hook), not program instructions. */
static const void *const hooks[] = {
    (void *)__tsan_read1, (void *)__tsan_read2, (void *)__tsan_read4, (void *)__tsan_read8,
    (void *)__tsan_read16, (void *)__tsan_unaligned_read2, (void *)__tsan_unaligned_read4,
    (void *)__tsan_unaligned_read8, (void *)__tsan_unaligned_read16, (void *)__tsan_volatile_read1,
    (void *)__tsan_volatile_read2, (void *)__tsan_volatile_read4, (void *)__tsan_volatile_read8,
    (void *)__tsan_volatile_read16, (void *)__tsan_write1, (void *)__tsan_write2, (void *)__tsan_write4,
    (void *)__tsan_write8, (void *)__tsan_write16, (void *)__tsan_unaligned_write2,
    (void *)__tsan_unaligned_write4, (void *)__tsan_unaligned_write8, (void *)__tsan_unaligned_write16,
    (void *)__tsan_volatile_write1, (void *)__tsan_volatile_write2, (void *)__tsan_volatile_write4,
    (void *)__tsan_volatile_write8, (void *)__tsan_volatile_write16, (void *)__tsan_read_range,
    (void *)__tsan_write_range, (void *)__tsan_func_entry, (void *)__tsan_func_exit,
    (void *)__tsan_vptr_update, (void *)__tsan_vptr_read, (void *)__tsan_init,
    (void *)__sanitizer_cov_trace_pc,
};

int hm__inst_is_hook(uintptr_t addr)
{
    for (size_t i = 0; i < HM_ARRAY_LEN(hooks); i++)
        if ((uintptr_t)hooks[i] == addr)
            return hooks[i] == (void *)__sanitizer_cov_trace_pc ? 2 : 1;
    return 0;
}
