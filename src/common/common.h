/* Internal helpers shared by all components: error details, logging, JSON,
 * sizes, hashing. Not installed. */
#ifndef HETMEM_COMMON_H
#define HETMEM_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "hetmem/error.h"

#define HM_UNUSED __attribute__((unused))
#define HM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define HM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HM_LIKELY(x) __builtin_expect(!!(x), 1)
#define HM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HM_API __attribute__((visibility("default")))

/* Records a detail for hm_errdetail() and returns err, so call sites read
 * `return hm__errf(HM_ECORRUPT, "block %u: ...", i);`. */
int hm__errf(int err, const char *fmt, ...) HM_PRINTF(2, 3);
void hm__errclear(void);

/* Logging. Quiet by default; HETMEM_LOG=error|warn|info|debug raises it.
 * Disabled levels still type-check their arguments. */
enum { HM_LOG_ERROR = 0, HM_LOG_WARN, HM_LOG_INFO, HM_LOG_DEBUG };
extern int hm__log_level;
/* Reads HETMEM_LOG: 0, or HM_ERANGE when it is set to no level (the level
 * is then left as it was; the caller says so). */
#define HM_LOG_LEVELS "error, warn, info or debug"
int hm__log_init(void);
void hm__logf(int level, const char *fmt, ...) HM_PRINTF(2, 3);
#define HM_LOG(level, ...)                                                       \
    do {                                                                         \
        if (HM_UNLIKELY((level) <= hm__log_level)) hm__logf((level), __VA_ARGS__); \
    } while (0)
#define HM_WARN(...) HM_LOG(HM_LOG_WARN, __VA_ARGS__)
#define HM_INFO(...) HM_LOG(HM_LOG_INFO, __VA_ARGS__)
#define HM_DEBUG(...) HM_LOG(HM_LOG_DEBUG, __VA_ARGS__)

/* Opens a file a user named as an input for reading. Non-blocking, so that
 * a FIFO or a device cannot hang the command, and refused unless it is a
 * regular file: 0 and *fd (the caller closes it), or -errno with the
 * detail "PATH", or -EINVAL with "PATH: not a regular file (a FIFO)". */
int hm__open_input(const char *path, int *fd);

/* The most bytes a JSON input may have: HETMEM_JSON_MAX (a size), else
 * HM_JSON_MAX_DEFAULT; 0 when the variable is set but is not a size of at
 * least 1, which hm__json_load_file() refuses naming it. Parsing is linear, but jansson holds the whole
 * document in memory at several times its size. */
#define HM_JSON_MAX_DEFAULT (UINT64_C(256) << 20)
uint64_t hm__json_max(void);

/* JSON (jansson). Loads a file (a regular file of at most hm__json_max()
 * bytes); on failure returns HM_EBADJSON (or -errno) with a detail
 * "PATH:LINE:COL: message". *out owned by caller (json_decref). */
int hm__json_load_file(const char *path, json_t **out);
int hm__json_load_string(const char *what, const char *text, json_t **out);
/* Typed getters that fail with HM_EBADJSON naming the key and the file. */
int hm__json_get_u64(const json_t *obj, const char *key, int required, uint64_t *out, const char *where);
int hm__json_get_double(const json_t *obj, const char *key, int required, double *out, const char *where);
int hm__json_get_string(const json_t *obj, const char *key, int required, const char **out, const char *where);

/* A size: decimal digits with an optional K, M, G or T suffix (binary,
 * 1K = 1024), itself optionally followed by "B" or "iB" (letters in either
 * case): "0", "512", "64K", "16GiB". Anything else (fractions, exponents,
 * hex, signs, spaces, a value over 2^64-1) is HM_ERANGE. */
#define HM_SIZE_GRAMMAR "an integer of bytes with an optional K, M, G or T suffix, e.g. 512M or 16G"
int hm__parse_size(const char *s, uint64_t *out);
/* HETMEM_SIGNAL_OFFSET's value: a decimal integer N with SIGRTMIN+N at most
 * SIGRTMAX. 0 and *off, or HM_ERANGE. Allocation-free. */
int hm__signal_offset(const char *s, int *off);
/* Human size "1.5 GiB" into buf. Returns buf. */
char *hm__fmt_size(uint64_t bytes, char *buf, size_t len);
/* Unsigned decimal or 0x-hex (never octal: "010" is 10); rejects junk,
 * spaces, signs and overflow with HM_ERANGE. Allocation-free. */
int hm__parse_u64(const char *s, uint64_t *out);
/* The one parser of a bounded integer option or variable: hm__parse_u64's
 * grammar, then min <= value <= max; else HM_ERANGE and *out untouched.
 * hm__range_why() words the refusal ("not an integer from MIN to MAX")
 * into buf, for messages "OPTION: 'VALUE' is ..." and "VAR=VALUE: ...".
 * Allocation-free (the preload library reads its variables with it). */
int hm__parse_u64_in(const char *s, uint64_t min, uint64_t max, uint64_t *out);
const char *hm__range_why(char *buf, size_t len, uint64_t min, uint64_t max);
int hm__parse_double(const char *s, double *out);

/* 64-bit hash (xxh3) for site ids and checksums. */
uint64_t hm__hash64(const void *data, size_t len, uint64_t seed);

/* How many links of an allocation's call chain name its site: one depth
 * for hetmem sim, hetmem record and hetmem run (docs/record.md, "Call
 * sites"), so that the three give a program's allocations the same ids.
 * A link is one function of the program's own on the way to the
 * allocator: an inlined function counts as one, as a frame does. */
#define HM_SITE_DEPTH 4
#define HM_SITE_DEPTH_MAX 16 /* the most HETMEM_DEPTH may ask for */
/* Call-site id from the program's return addresses (innermost first, the
 * allocator's and the standard library's frames already left out, see
 * hm__site_skip()): the first @p depth links hashed, each frame's links
 * from its source chain where the module has line information
 * ("file:line:column function" per function of the program's own,
 * inlined ones included), else the frame as (module basename, offset in
 * module). So ids are stable across runs and ASLR, and one source program
 * gives the same ids built natively or with hetmem-cc. A frame's links are
 * looked up once (hm__srcloc_key(), libdw) and cached per pc; thread-safe.
 * libdw allocates: hetmem sim calls this as the runtime, whose allocations
 * come from its own heap (src/inst/heap.c). */
uint64_t hm__site_id(const uintptr_t *pcs, int n, int depth);
/* A site's record: the frames that hold its first @p depth links, one a
 * line as hm__site_frame() writes them, the last one's locations cut to
 * the links that count (so hm__frame_source() gives the site's source
 * chain, the links its id hashes); returns the length written. */
int hm__site_frames(const uintptr_t *pcs, int n, int depth, char *buf, size_t len);
/* One frame as "module+0xoff symbol at LOCATIONS" into buf (the " at"
 * part when the module has line tables, as hm__srcloc() writes it; the
 * symbol when it has one); returns snprintf's count. */
int hm__site_frame(uintptr_t pc, char *buf, size_t len);
/* The source chain of site frames (lines as hm__site_frame() writes them):
 * every frame's locations, innermost first, joined by " < "
 * ("lulesh.h:140 Allocate < lulesh.cc:2731 AllocateElemPersistent < ...")
 * into buf; NULL when no frame has one. */
const char *hm__frame_source(const char *frames, char *buf, size_t len);
/* Whether "file:line" (a directory before the file is ignored) is one of
 * the locations of a source chain as hm__frame_source() writes it. */
int hm__source_has(const char *chain, const char *file_line);
/* The link of a source chain that starts at p: the length of its
 * "file:line" in *k; returns where the next link starts, or NULL after the
 * last one. */
const char *hm__source_link(const char *p, size_t *k);
/* Source locations of module-relative offset off (from the module's lowest
 * loaded page, as dladdr's dli_fbase) in the ELF file at path, from its
 * DWARF: "file:line function", file as a base name, then " < " and the
 * line that called it for each inlined function of the program's own
 * (inlined standard-library code hands over to the line that called it
 * and is not listed). Returns the length, or -1 when the file has no line
 * table there or libdw is not built in. */
int hm__srcloc(const char *path, uint64_t off, char *buf, size_t len);
/* hm__srcloc() with each link's line as "line:column" (column 0 where the
 * compiler gave none): the text site ids hash (hm__site_id()). */
int hm__srcloc_key(const char *path, uint64_t off, char *buf, size_t len);
/* Where the global or static variable at module-relative offset off of the
 * ELF file at path is declared, from its DWARF: "file:line", file as a base
 * name (a Fortran COMMON block's first declaration in the first unit that
 * has it). Returns the length, or -1 when no variable there has a
 * declaration line or libdw is not built in. */
int hm__srcloc_data(const char *path, uint64_t off, char *buf, size_t len);
/* Whether the frame at return address pc belongs to the allocator or the
 * language's standard library rather than to the program: operator
 * new/delete, std:: and __gnu_cxx:: functions (templates such as
 * std::vector<T>::_M_default_append instantiated in the program), and any
 * frame inside libc, libstdc++, libgcc or libgfortran; and the hetmem-cc
 * runtime's wrappers (__wrap_malloc...) and malloc family (a function named
 * malloc, calloc, realloc, free, memalign, aligned_alloc, posix_memalign,
 * valloc or pvalloc) and _start, so that a hetmem-cc
 * build recorded, or a native build, has the frames hetmem sim sees.
 * Site ids skip such frames, so two std::vector members allocated at
 * different places are two sites. Cached per pc (lock-free; safe inside an allocator interposer). */
int hm__site_skip(uintptr_t pc);
/* Whether the frame at return address pc is an allocator's entry point:
 * operator new or new[], a hetmem-cc runtime wrapper (__wrap_malloc...), or
 * a function of the malloc family's names.
 * An allocation with no frame of the program's own is named by the first
 * frame past these. */
int hm__site_entry(uintptr_t pc);
/* The rule of hm__site_skip() on a module basename and a (mangled) symbol
 * name, either of which may be NULL. */
int hm__site_skip_name(const char *module, const char *sym);
/* The smallest object that gets a call site and is tracked by default:
 * heap allocations under hetmem record and hetmem run (HETMEM_MIN_SIZE,
 * --min-size), and the global and static arrays that hetmem sim makes
 * objects without a placement rule naming them. */
#define HM_MIN_OBJECT_SIZE ((size_t)64 * 1024)
/* Calls fn for each data object of at least min bytes (global and static
 * arrays: defined STT_OBJECT symbols) of every module loaded now, with its
 * run-time address, size and symbol name: the program first, then its
 * shared libraries in load order (module 0, 1, ...), from each file's
 * .symtab, or its .dynsym when it is stripped, that want (when not NULL)
 * accepts; want is also told the module and whether the object lies in a
 * writable section (.data, .bss: not .rodata, not thread-local). fn returns
 * nonzero when it keeps the object, whose name pointer then stays valid
 * while the process lives. A name kept from one module is not passed again
 * from a later one: the first module that defines it wins, as the dynamic
 * linker binds it (an array of a library that the program uses is the
 * program's copy, a copy relocation). At most HM_MODULE_KEPT names are kept
 * per call; the objects beyond are not passed, and are counted in *dropped.
 * flags: HM_MODOBJ_PROGRAM reads the program only (module 0);
 * HM_MODOBJ_UNCACHED maps a module's file only for the call when no object
 * of it is kept, leaving the address space as it was (hetmem sim's own
 * mappings move the program's). Returns how many objects were passed to
 * fn. Not reentrant from fn. */
#define HM_MODULE_KEPT 1024
#define HM_MODOBJ_PROGRAM 1
#define HM_MODOBJ_UNCACHED 2
int hm__module_objects(size_t min, int flags,
                       int (*want)(void *ctx, int module, const char *name, uintptr_t addr, size_t size, int writable),
                       int (*fn)(void *ctx, int module, uintptr_t addr, size_t size, const char *name), void *ctx,
                       int *dropped);
/* The frame line of the global or static array @p name at @p addr, as
 * hm__site_frame names a code address: "module+0xOFF name", then " at
 * file:line" where the module's debug information declares it. Returns
 * the length written (snprintf's). */
int hm__global_frame(uintptr_t addr, const char *name, char *buf, size_t len);
/* The allocation-site id of the global or static array named @p name, the
 * same in hetmem sim, hetmem run and the traces they write. */
uint64_t hm__global_site(const char *name);

/* Monotonic clock, nanoseconds. */
uint64_t hm__now_ns(void);

/* Allocates the pages under [p, p + n) that are not yet there, in one call
 * (MADV_POPULATE_WRITE, Linux 5.14), for a buffer about to be written
 * whole: first touch would otherwise take a page fault per 4 KiB page.
 * Only the whole pages inside the range; the contents are unchanged.
 * Advice: where the kernel lacks it, pages come on first touch as before.
 * Returns 0, or -errno of madvise (-EINVAL on a kernel without it), which
 * callers may ignore. */
int hm__prefault(void *p, size_t n);

/* Memory that never returns NULL: on exhaustion the process ends with one
 * line on stderr and exit status 1 (hm__oom). Only for the CLI (tools/) and
 * for code whose callers document that choice; the library's public entry
 * points return -ENOMEM instead (docs/design.md, "Out of memory"). */
void *hm__xmalloc(size_t n);
void *hm__xcalloc(size_t n, size_t sz);
void *hm__xrealloc(void *p, size_t n);
char *hm__xstrdup(const char *s);
/* The message and exit the x-functions give on exhaustion. */
__attribute__((noreturn)) void hm__oom(size_t n);

#endif
