/**
 * @file hetmem.h
 * @brief App-facing hetmem API: phase markers and object names.
 *
 * Header-only. Every call is a no-op unless a hetmem runtime is loaded
 * (libhetmem_preload.so through LD_PRELOAD under `hetmem record`/`hetmem run`,
 * or libhetmem_inst linked by `hetmem-cc`). The app needs no extra library
 * at link time: the runtime entry points are weak references that resolve to
 * NULL when no runtime provides them.
 *
 * Thread safety: all calls may be made from any thread. Phase markers are
 * meant to be called by every thread of an SPMD region, or by one thread
 * around a whole parallel region.
 */
#ifndef HETMEM_HETMEM_H
#define HETMEM_HETMEM_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runtime entry points. Defined by libhetmem_preload and libhetmem_inst. */
extern void hm_rt_phase_begin(const char *name) __attribute__((weak));
extern void hm_rt_phase_end(const char *name) __attribute__((weak));
extern void hm_rt_name(const void *ptr, const char *name) __attribute__((weak));

/**
 * Marks the start of a named program phase (e.g. "spmv"). Phases may nest.
 * @param name  NUL-terminated; copied by the runtime, caller keeps ownership.
 */
static inline void hetmem_phase_begin(const char *name)
{
    if (hm_rt_phase_begin) hm_rt_phase_begin(name);
}

/** Marks the end of the phase opened by hetmem_phase_begin(name). */
static inline void hetmem_phase_end(const char *name)
{
    if (hm_rt_phase_end) hm_rt_phase_end(name);
}

/**
 * Names the live allocation that contains @p ptr, so that placement rules
 * and reports can refer to it as {"name": "..."}. Call after allocation.
 * @param name  NUL-terminated; copied by the runtime.
 */
static inline void hetmem_name(const void *ptr, const char *name)
{
    if (hm_rt_name) hm_rt_name(ptr, name);
}

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_HETMEM_H */
