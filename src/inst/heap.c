/* The runtime's own heap.
 *
 * The simulator runtime runs inside the program it simulates, and what it
 * allocates (the simulator's tables, the parsed machine and placement
 * files, the trace writer's buffers and zstd's contexts, libdw's DWARF
 * caches) must not come from the program's heap. glibc's malloc serves
 * requests from free lists and a top chunk shared by every caller, and
 * large requests from mmap with a threshold that grows when a large block
 * is freed; so each allocation of the runtime moves the program's later
 * ones. A run that writes a trace (whose writer allocates as it goes)
 * then simulated the program at other addresses than the same run without
 * a trace, and a page shared by small objects takes the device of its
 * first object (src/sim/objects.c): the same placement put other data on
 * each device (HPCG on cxl, one placement: 1.869 s without a trace, 1.041 s
 * with one).
 *
 * So every allocation made while the runtime runs (hm__inst_busy) is
 * served from a private region reserved at start, away from the program's
 * heap and mappings, and the program's allocations are exactly those of
 * the program. The executable defines malloc and its family (weak, so a
 * program's own allocator, or a static link's libc, keeps precedence):
 * the shared libraries the runtime calls (jansson, zstd, libdw, libc
 * itself) reach them by symbol interposition. Outside the runtime they
 * forward to the next definition in the lookup order (dlsym(RTLD_NEXT):
 * `hetmem record`'s preloaded library when it records this program, else
 * glibc's; glibc's own __libc_malloc and the others until that is looked
 * up), and free() tells the two kinds of block apart by address.
 *
 * The region is reserved without access (PROT_NONE: it costs no memory and
 * no commit charge) at a fixed address when that is free, so the program's
 * own mappings are where they would be without it, and made writable in
 * steps as it fills. Blocks are powers of two from 32 bytes, each size with
 * its own free list: what the runtime frees is reused by its later
 * requests (the trace writer frees and allocates per block), and nothing is
 * ever returned to the program's heap. When the region cannot be reserved
 * or is full, the runtime falls back to glibc's heap (its allocations then
 * move the program's again, as they did before). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "inst.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#if UINTPTR_MAX > 0xffffffffu
#define HEAP_HINT ((uintptr_t)0x100000000000ull) /* 16 TiB: below a PIE's load address, above any brk heap */
#define HEAP_MAX ((size_t)64 << 30)
#else
#define HEAP_HINT ((uintptr_t)0)
#define HEAP_MAX ((size_t)1 << 30)
#endif
#define HEAP_MIN ((size_t)64 << 20)
#define COMMIT_STEP ((size_t)8 << 20)
#define MIN_SHIFT 5 /* smallest block: 32 bytes, header included */
#define NCLASS 40
#define MAGIC 0x6d68u

/* In front of every block's user pointer. */
typedef struct {
    uint64_t size; /* requested */
    uint32_t off;  /* user pointer - block start */
    uint16_t cls;
    uint16_t magic;
} hdr_t;
#define HDR sizeof(hdr_t)

static struct {
    char *base, *end, *top, *committed;
    void *free[NCLASS];
    char lock;
} heap;

static void lock(void)
{
    while (__atomic_test_and_set(&heap.lock, __ATOMIC_ACQUIRE))
        ;
}

static void unlock(void) { __atomic_clear(&heap.lock, __ATOMIC_RELEASE); }

int hm__rtheap_init(void)
{
    if (heap.base)
        return 0;
    size_t max = HEAP_MAX;
    struct rlimit rl;
    /* Address space is what a reservation costs: under a limit on it, at
     * most a sixteenth of the limit, so the program keeps what it had. */
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        while (max > HEAP_MIN && max > rl.rlim_cur / 16)
            max /= 2;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    for (size_t sz = max; sz >= HEAP_MIN; sz /= 2) {
        void *p = MAP_FAILED;
        if (HEAP_HINT)
            p = mmap((void *)HEAP_HINT, sz, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            p = mmap(NULL, sz, PROT_NONE, flags, -1, 0);
        if (p != MAP_FAILED) {
            heap.base = heap.top = heap.committed = p;
            heap.end = heap.base + sz;
            return 0;
        }
    }
    return -errno;
}

/* Whether p lies in the runtime's region (a free or realloc of a block
 * that came from it). */
static int rtheap_owns(const void *p) { return (const char *)p >= heap.base && (const char *)p < heap.end; }

/* A block for @p n bytes aligned to @p al (a power of two), or NULL when
 * the region cannot hold it; *fresh: never used before (zero-filled). */
static void *heap_alloc(size_t n, size_t al, int *fresh)
{
    if (!heap.base || n > ((size_t)1 << (MIN_SHIFT + NCLASS - 2)))
        return NULL;
    if (al < 16)
        al = 16;
    size_t need = n + HDR + (al > 16 ? al : 0);
    unsigned c = 0;
    while (((size_t)1 << (MIN_SHIFT + c)) < need)
        c++;
    size_t bs = (size_t)1 << (MIN_SHIFT + c);
    char *b;
    lock();
    if (heap.free[c]) {
        b = heap.free[c];
        memcpy(&heap.free[c], b, sizeof(void *));
        *fresh = 0;
    } else {
        if (bs > (size_t)(heap.end - heap.top)) {
            unlock();
            return NULL;
        }
        if (heap.top + bs > heap.committed) {
            size_t want = (size_t)(heap.top + bs - heap.committed);
            want = (want + COMMIT_STEP - 1) / COMMIT_STEP * COMMIT_STEP;
            if (want > (size_t)(heap.end - heap.committed))
                want = (size_t)(heap.end - heap.committed);
            if (mprotect(heap.committed, want, PROT_READ | PROT_WRITE) != 0) {
                unlock();
                return NULL;
            }
            heap.committed += want;
        }
        b = heap.top;
        heap.top += bs;
        *fresh = 1;
    }
    unlock();
    char *p = (char *)(((uintptr_t)b + HDR + al - 1) & ~(uintptr_t)(al - 1));
    hdr_t h = {n, (uint32_t)(p - b), (uint16_t)c, MAGIC};
    memcpy(p - HDR, &h, HDR);
    return p;
}

static hdr_t *header(void *p)
{
    hdr_t *h = (hdr_t *)((char *)p - HDR);
    if (h->magic != MAGIC || h->cls >= NCLASS || h->off < HDR) {
        static const char m[] = "hetmem: runtime heap: free or realloc of a pointer it did not allocate\n";
        ssize_t r = write(2, m, sizeof m - 1);
        (void)r;
        abort();
    }
    return h;
}

static void heap_free(void *p)
{
    hdr_t *h = header(p);
    char *b = (char *)p - h->off;
    unsigned c = h->cls;
    h->magic = 0;
    lock();
    memcpy(b, &heap.free[c], sizeof(void *));
    heap.free[c] = b;
    unlock();
}

/* What the program's allocations go to. */
static struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*memalign)(size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
} next = {__libc_malloc, __libc_free, __libc_calloc, __libc_realloc, __libc_memalign, NULL, NULL};

/* Before the program's own constructors (priority 101); dlsym may allocate,
 * which then goes to glibc's. */
__attribute__((constructor(101))) static void next_lookup(void)
{
#define NEXT(f)                                                   \
    do {                                                          \
        __typeof__(next.f) p = (__typeof__(next.f))dlsym(RTLD_NEXT, #f); \
        if (p)                                                    \
            next.f = p;                                           \
    } while (0)
    NEXT(malloc);
    NEXT(free);
    NEXT(calloc);
    NEXT(realloc);
    NEXT(memalign);
    NEXT(posix_memalign);
    NEXT(aligned_alloc);
#undef NEXT
}

/* Whether this allocation is the runtime's. */
#define RUNTIME (hm__inst_busy && heap.base)

HM_API __attribute__((weak)) void *malloc(size_t n)
{
    int fresh;
    void *p = RUNTIME ? heap_alloc(n, 0, &fresh) : NULL;
    return p ? p : next.malloc(n);
}

HM_API __attribute__((weak)) void free(void *p)
{
    if (rtheap_owns(p))
        heap_free(p);
    else
        next.free(p);
}

HM_API __attribute__((weak)) void *calloc(size_t n, size_t m)
{
    if (RUNTIME) {
        size_t t;
        if (__builtin_mul_overflow(n, m, &t)) {
            errno = ENOMEM;
            return NULL;
        }
        int fresh;
        void *p = heap_alloc(t, 0, &fresh);
        if (p) {
            if (!fresh)
                memset(p, 0, t);
            return p;
        }
    }
    return next.calloc(n, m);
}

HM_API __attribute__((weak)) void *realloc(void *old, size_t n)
{
    if (!old)
        return malloc(n);
    if (!rtheap_owns(old))
        return next.realloc(old, n);
    if (n == 0) {
        heap_free(old);
        return NULL;
    }
    hdr_t *h = header(old);
    size_t cap = ((size_t)1 << (MIN_SHIFT + h->cls)) - h->off;
    if (n <= cap) {
        h->size = n;
        return old;
    }
    int fresh;
    void *p = heap_alloc(n, 0, &fresh);
    if (!p && !(p = next.malloc(n)))
        return NULL;
    memcpy(p, old, h->size < n ? h->size : n);
    heap_free(old);
    return p;
}

/* The aligned forms: the runtime's from the region, the program's from the
 * next definitions (glibc's posix_memalign and aligned_alloc come down to
 * its memalign where there is no other). */
static void *heap_aligned(size_t al, size_t n)
{
    size_t a = 16;
    while (a < al && a)
        a <<= 1; /* a non-power of two is rounded up, as glibc does */
    int fresh;
    return RUNTIME && a ? heap_alloc(n, a, &fresh) : NULL;
}

static int pow2(size_t al) { return al && (al & (al - 1)) == 0; }

HM_API __attribute__((weak)) void *memalign(size_t al, size_t n)
{
    void *p = heap_aligned(al, n);
    return p ? p : next.memalign(al, n);
}

HM_API __attribute__((weak)) void *aligned_alloc(size_t al, size_t n)
{
    void *p = pow2(al) ? heap_aligned(al, n) : NULL;
    if (p)
        return p;
    if (next.aligned_alloc)
        return next.aligned_alloc(al, n);
    if (!pow2(al)) {
        errno = EINVAL;
        return NULL;
    }
    return next.memalign(al, n);
}

HM_API __attribute__((weak)) int posix_memalign(void **out, size_t al, size_t n)
{
    void *p = pow2(al) && al % sizeof(void *) == 0 ? heap_aligned(al, n) : NULL;
    if (p) {
        *out = p;
        return 0;
    }
    if (next.posix_memalign)
        return next.posix_memalign(out, al, n);
    if (!pow2(al) || al % sizeof(void *))
        return EINVAL;
    int saved = errno;
    if (!(p = next.memalign(al, n)))
        return ENOMEM;
    errno = saved;
    *out = p;
    return 0;
}
