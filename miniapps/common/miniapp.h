/*
 * Shared scaffolding for the hetmem mini-apps: a table-driven command line
 * with size presets, a fixed-seed PRNG, timers and the allocation macro that
 * names every main object for hetmem.
 *
 * The mini-apps deliberately do not link hetmem_core: they stand in for user
 * applications and must build with nothing but a C compiler (natively, or
 * through hetmem-cc for the simulator).
 */
#ifndef HETMEM_MINIAPP_H
#define HETMEM_MINIAPP_H

/* Every app includes this header first; the feature macro makes
 * clock_gettime and M_PI available even under a strict -std=c11. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Relative include so that any compiler wrapper can build the apps from the
 * source list alone, without extra include directories. */
#include "../../include/hetmem/hetmem.h"

#ifdef _OPENMP
#define MA_OMP(x) _Pragma(x)
#else
#define MA_OMP(x)
#endif

/* ---------------------------------------------------------------- PRNG -- */

/* splitmix64: tiny, fast, passes BigCrush, and the stream is fully defined by
 * the seed, which makes every run of every app bit-reproducible. */
typedef struct { uint64_t s; } ma_rng_t;

static inline void ma_rng_seed(ma_rng_t *r, uint64_t seed) { r->s = seed; }

static inline uint64_t ma_rng_next(ma_rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/** Uniform double in [0, 1). */
static inline double ma_rng_uniform(ma_rng_t *r)
{
    return (double)(ma_rng_next(r) >> 11) * 0x1.0p-53;
}

/** Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, bias < 2^-32 for our n). */
static inline uint64_t ma_rng_below(ma_rng_t *r, uint64_t n)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)ma_rng_next(r) * n) >> 64);
}

/* ------------------------------------------------------- command line -- */

typedef enum { MA_OPT_U64, MA_OPT_F64, MA_OPT_FLAG } ma_opt_kind_t;

/** One command-line option. The same table drives parsing and --help. */
typedef struct {
    const char *name;     /**< "--iters" */
    const char *metavar;  /**< "N"; NULL for flags */
    ma_opt_kind_t kind;
    void *dst;            /**< uint64_t*, double* or int* (flag) */
    double min, max;      /**< accepted range for numbers (inclusive) */
    const char *help;     /**< NULL hides the option from --help */
} ma_opt_t;

/** One size preset: a name and a callback that fills the app's parameters. */
typedef struct {
    const char *name;
    void (*apply)(void);
    const char *summary;  /**< one line for --help */
} ma_preset_t;

/** Everything the parser needs to know about an app. */
typedef struct {
    const char *name;        /**< "stream" */
    const char *purpose;     /**< one line for --help */
    const ma_preset_t *presets;
    size_t npresets;         /**< presets[0] is the default */
    const ma_opt_t *opts;
    size_t nopts;
} ma_app_t;

/**
 * Parses argv: first applies the preset named by --size (default: the first
 * preset), then every other option in order, so explicit options override the
 * preset. Also handles --help (exit 0). Bad input prints one line
 * "<app>: <what>: <why>" to stderr and exits 2.
 */
void ma_parse(const ma_app_t *app, int argc, char **argv);

/** Prints "<app>: <what>: <why>" and exits with @p status. */
void ma_fail(int status, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* ----------------------------------------------------------- objects -- */

/* Bytes of all objects allocated through MA_ALLOC, for the report. */
extern size_t ma_footprint;

void ma_oom(const char *name, size_t bytes) __attribute__((noreturn));

static inline size_t ma_round64(size_t b) { return b == 0 ? 64 : (b + 63) & ~(size_t)63; }

/*
 * Allocates @p count elements for pointer @p ptr and names the object.
 * A macro, not a function, so that every object gets its own call site
 * (hetmem identifies objects by allocation call stack).
 */
#define MA_ALLOC(ptr, count, name)                                          \
    do {                                                                    \
        size_t ma__bytes = ma_round64((size_t)(count) * sizeof *(ptr));     \
        (ptr) = aligned_alloc(64, ma__bytes);                               \
        if (!(ptr)) ma_oom((name), ma__bytes);                              \
        hetmem_name((ptr), (name));                                         \
        ma_footprint += ma__bytes;                                          \
    } while (0)

/* ---------------------------------------------------------- reporting -- */

double ma_now(void);

/** Accumulates the wall time of one named phase for the report. */
typedef struct { const char *name; double t0, total; unsigned long count; } ma_phase_t;
#define MA_PHASE(n) {.name = (n)}

static inline void ma_phase_begin(ma_phase_t *p)
{
    hetmem_phase_begin(p->name);
    p->t0 = ma_now();
}

static inline void ma_phase_end(ma_phase_t *p)
{
    p->total += ma_now() - p->t0;
    p->count++;
    hetmem_phase_end(p->name);
}

/** Prints the phase table (name, calls, seconds). */
void ma_report_phases(const ma_phase_t *phases, size_t n);

/** Prints the footprint line, then "verification: PASSED|FAILED"; returns the exit status. */
int ma_finish(int passed);

/** Name of the running app, set by ma_parse (used in messages). */
extern const char *ma_app_name;

#define MA_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#endif /* HETMEM_MINIAPP_H */
