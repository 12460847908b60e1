#define _GNU_SOURCE
#include "common.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- site ids
 *
 * A site id hashes the first HM_SITE_DEPTH links of the allocating call's
 * source chain, innermost first: a frame with line information gives one
 * link per function of the program's own that the call sits in (its
 * inlined functions, then the function of the frame), each its
 * "file:line:column function" (file as a base name, as hm__srcloc_key()
 * writes it); a frame without gives one link, (module basename, offset in
 * module). Source links make the id a property of the source program: a
 * native build and a hetmem-cc build of one program, whose code differs
 * by the instrumentation (and so by every offset), give each allocation
 * the same id, whichever of them inlined a function of the program's own
 * into another. Module-relative offsets, where there is no line table,
 * keep the id stable across runs and ASLR. The call instruction's own
 * address (return address - 1) is looked up. */

static const char *frame_path(Dl_info *info, uintptr_t pc);

#define HM_LINK_SRC 0x736f75726365ull /* "source": a link named by its source, not its module */
#define HM_LINKS_CACHED 8

/* Frames' links, cached per pc (a DWARF lookup is slow). The lock guards
 * the table only: a lookup runs outside it (it takes the source-location
 * lock, so the two are never held together), and a fork waits for it
 * (pthread_atfork), so that a child never starts with it held by a thread
 * it does not have. A pc whose links do not fit is looked up every time. */
static struct {
    uintptr_t pc;
    int n;
    uint64_t key[HM_LINKS_CACHED][2];
} hm_link_cache[1024];
static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t link_once = PTHREAD_ONCE_INIT;
static void link_lock_take(void) { pthread_mutex_lock(&link_lock); }
static void link_lock_give(void) { pthread_mutex_unlock(&link_lock); }
static void link_atfork(void) { pthread_atfork(link_lock_take, link_lock_give, link_lock_give); }

/* The links of the frame at return address pc into key (up to max);
 * returns their count (at least 1). */
static int frame_links(uintptr_t pc, uint64_t (*key)[2], int max)
{
    Dl_info info;
    uintptr_t a = pc ? pc - 1 : 0;
    key[0][0] = 0;
    key[0][1] = a;
    if (!a || !dladdr((void *)a, &info) || !info.dli_fname)
        return 1;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    uint64_t off = a - (uintptr_t)info.dli_fbase;
    char src[1024];
    int n = 0;
    if (hm__srcloc_key(frame_path(&info, pc), off, src, sizeof src) > 0) {
        for (const char *p = src; p && n < max;) {
            const char *end = strstr(p, " < ");
            size_t k = end ? (size_t)(end - p) : strlen(p);
            key[n][0] = HM_LINK_SRC;
            key[n][1] = hm__hash64(p, k, HM_LINK_SRC);
            n++;
            p = end ? end + 3 : NULL;
        }
    }
    if (n == 0) {
        key[0][0] = hm__hash64(base, strlen(base), 0);
        key[0][1] = off;
        n = 1;
    }
    return n;
}

static int frame_links_cached(uintptr_t pc, uint64_t (*key)[2], int max)
{
    size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 54) % HM_ARRAY_LEN(hm_link_cache);
    pthread_once(&link_once, link_atfork);
    pthread_mutex_lock(&link_lock);
    for (size_t i = 0; i < 8; i++) {
        size_t j = (h + i) % HM_ARRAY_LEN(hm_link_cache);
        if (hm_link_cache[j].pc == pc) {
            int n = hm_link_cache[j].n < max ? hm_link_cache[j].n : max;
            memcpy(key, hm_link_cache[j].key, sizeof key[0] * (size_t)n);
            pthread_mutex_unlock(&link_lock);
            return n;
        }
        if (!hm_link_cache[j].pc)
            break;
    }
    pthread_mutex_unlock(&link_lock);
    uint64_t tmp[HM_SITE_DEPTH_MAX][2];
    int n = frame_links(pc, tmp, HM_SITE_DEPTH_MAX);
    if (n <= HM_LINKS_CACHED) {
        /* Into the first free slot of its probe run, unless another thread
         * cached the pc meanwhile (the same links). */
        pthread_mutex_lock(&link_lock);
        for (size_t i = 0; i < 8; i++) {
            size_t j = (h + i) % HM_ARRAY_LEN(hm_link_cache);
            if (hm_link_cache[j].pc == pc)
                break;
            if (!hm_link_cache[j].pc) {
                hm_link_cache[j].n = n;
                memcpy(hm_link_cache[j].key, tmp, sizeof tmp[0] * (size_t)n);
                hm_link_cache[j].pc = pc;
                break;
            }
        }
        pthread_mutex_unlock(&link_lock);
    }
    if (n > max)
        n = max;
    memcpy(key, tmp, sizeof tmp[0] * (size_t)n);
    return n;
}

uint64_t hm__site_id(const uintptr_t *pcs, int n, int depth)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    int links = 0;
    if (depth > HM_SITE_DEPTH_MAX)
        depth = HM_SITE_DEPTH_MAX;
    for (int i = 0; i < n && links < depth; i++) {
        uint64_t key[HM_SITE_DEPTH_MAX][2];
        int k = frame_links_cached(pcs[i], key, depth - links);
        for (int j = 0; j < k; j++)
            h = hm__hash64(key[j], sizeof key[j], h);
        links += k;
    }
    return h;
}

int hm__site_frames(const uintptr_t *pcs, int n, int depth, char *buf, size_t len)
{
    size_t off = 0;
    int links = 0;
    if (!len)
        return 0;
    buf[0] = 0;
    for (int i = 0; i < n && links < depth && off + 1 < len; i++) {
        if (i)
            buf[off++] = '\n', buf[off] = 0;
        int w = hm__site_frame(pcs[i], buf + off, len - off);
        if (w < 0)
            break;
        /* The frame's links past the depth are not part of the site. */
        char *at = strstr(buf + off, " at ");
        int k = 1;
        for (char *p = at ? at + 4 : NULL; p && (p = strstr(p, " < ")) != NULL; p += 3) {
            if (k >= depth - links) {
                *p = 0;
                w = (int)(p - (buf + off));
                break;
            }
            k++;
        }
        links += k;
        off += (size_t)w < len - off ? (size_t)w : len - off - 1;
    }
    return (int)off;
}

/* The static symbol table (.symtab) of a module: what names functions that
 * are not exported, main among them, in any binary that is not stripped.
 * Files are mapped read-only once and kept; a few modules cover a program. */
typedef struct {
    uintptr_t fbase;         /* dli_fbase: the module's identity here */
    const uint8_t *map;
    size_t len;
    const ElfW(Sym) *syms;
    size_t nsyms;
    const char *str;
    size_t strsz;
    uintptr_t bias;
    const ElfW(Shdr) *sh; /* section headers: which sections are writable */
    size_t shnum;
    int bad;
} symtab_t;

static symtab_t symtabs[16];
static pthread_mutex_t symtab_lock = PTHREAD_MUTEX_INITIALIZER;

/* Address space taken by a module's file mapping (see symtab_load). */
#define HM_SYMTAB_SLOT ((size_t)1 << 30)

static void symtab_load(symtab_t *t, const char *path)
{
    t->bad = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    void *m = MAP_FAILED;
    /* The mapping takes a whole number of HM_SYMTAB_SLOT bytes of address
     * space, not the file's size: a program's later mappings (its large
     * arrays, which malloc maps) are placed below this one, so a file that
     * is a few bytes longer (debug information naming a longer build path)
     * would otherwise move them, and with them a simulated run's pages and
     * cache sets. Bytes past the end of the file are never read. */
    size_t n = 0, len = 0;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(ElfW(Ehdr))) {
        n = (size_t)st.st_size;
        len = (n + HM_SYMTAB_SLOT - 1) / HM_SYMTAB_SLOT * HM_SYMTAB_SLOT;
        m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    close(fd);
    if (m == MAP_FAILED)
        return;
    const uint8_t *b = m;
    const ElfW(Ehdr) *eh = m;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
        eh->e_shoff > n || eh->e_shnum > (n - eh->e_shoff) / sizeof(ElfW(Shdr)) ||
        eh->e_phoff > n || eh->e_phnum > (n - eh->e_phoff) / sizeof(ElfW(Phdr)))
        goto fail;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(b + eh->e_shoff);
    t->sh = sh;
    t->shnum = eh->e_shnum;
    /* .symtab, or in a stripped file .dynsym, which still lists what the
     * module exports (a stripped shared library's global arrays). */
    for (int i = 0, pass = 0; pass < 2 && !t->syms; i++) {
        if (i == eh->e_shnum) {
            i = -1;
            pass++;
            continue;
        }
        if (sh[i].sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB) || sh[i].sh_link >= eh->e_shnum)
            continue;
        const ElfW(Shdr) *ss = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > n || sh[i].sh_size > n - sh[i].sh_offset || ss->sh_offset > n ||
            ss->sh_size > n - ss->sh_offset || ss->sh_size == 0)
            goto fail;
        t->syms = (const ElfW(Sym) *)(b + sh[i].sh_offset);
        t->nsyms = sh[i].sh_size / sizeof(ElfW(Sym));
        t->str = (const char *)(b + ss->sh_offset);
        t->strsz = ss->sh_size;
        break;
    }
    if (!t->syms)
        goto fail;
    /* Symbol values are link-time addresses: a shared object or PIE is
     * moved by (where it is) - (its lowest PT_LOAD), an ET_EXEC is not. */
    uintptr_t lo = UINTPTR_MAX;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(b + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lo)
            lo = ph[i].p_vaddr & ~(uintptr_t)0xfff;
    t->bias = eh->e_type == ET_DYN && lo != UINTPTR_MAX ? t->fbase - lo : 0;
    t->map = b;
    t->len = len;
    t->bad = 0;
    return;
fail:
    munmap(m, len);
    t->syms = NULL;
}

/* Name of the function holding pc in the module at fbase, from its file. */
static const char *symtab_name(const char *path, uintptr_t fbase, uintptr_t pc)
{
    pthread_mutex_lock(&symtab_lock);
    symtab_t *t = NULL;
    for (size_t i = 0; i < sizeof symtabs / sizeof symtabs[0]; i++) {
        if (symtabs[i].fbase == fbase) {
            t = &symtabs[i];
            break;
        }
        if (!symtabs[i].fbase) {
            t = &symtabs[i];
            t->fbase = fbase;
            symtab_load(t, path);
            break;
        }
    }
    const char *name = NULL;
    if (t && !t->bad) {
        uintptr_t v = pc - t->bias;
        for (size_t i = 0; i < t->nsyms; i++) {
            const ElfW(Sym) *y = &t->syms[i];
            if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || y->st_shndx == SHN_UNDEF || y->st_name >= t->strsz)
                continue;
            if (v >= y->st_value && v < y->st_value + (y->st_size ? y->st_size : 1)) {
                name = t->str + y->st_name;
                break;
            }
        }
    }
    pthread_mutex_unlock(&symtab_lock);
    return name;
}

/* The file of the module holding pc (the main program's own name may be
 * relative to a directory it left). */
static const char *frame_path(Dl_info *info, uintptr_t pc)
{
    struct link_map *lm = NULL;
    Dl_info tmp;
    if (dladdr1((void *)(pc - 1), &tmp, (void **)&lm, RTLD_DL_LINKMAP) && lm && !lm->l_name[0])
        return "/proc/self/exe";
    return info->dli_fname;
}

int hm__site_frame(uintptr_t pc, char *buf, size_t len)
{
    Dl_info info;
    if (!pc || !dladdr((void *)(pc - 1), &info) || !info.dli_fname)
        return snprintf(buf, len, "0x%llx", (unsigned long long)pc);
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    unsigned long long off = (unsigned long long)(pc - 1 - (uintptr_t)info.dli_fbase);
    const char *sym = info.dli_sname;
    if (!sym) {
        /* Not exported: the main program's own functions, static ones. The
         * main program's dli_fname may be relative to a directory it left. */
        struct link_map *lm = NULL;
        int main_prog = dladdr1((void *)(pc - 1), &info, (void **)&lm, RTLD_DL_LINKMAP) && lm && !lm->l_name[0];
        sym = symtab_name(main_prog ? "/proc/self/exe" : info.dli_fname, (uintptr_t)info.dli_fbase, pc - 1);
    }
    int w = sym && strnlen(sym, 256) < 256 ? snprintf(buf, len, "%s+0x%llx %s", base, off, sym)
                                            : snprintf(buf, len, "%s+0x%llx", base, off);
    /* The source locations, from the module's debug information. */
    char src[512];
    if (w >= 0 && (size_t)w < len && hm__srcloc(frame_path(&info, pc), off, src, sizeof src) > 0) {
        int x = snprintf(buf + w, len - (size_t)w, " at %s", src);
        if (x > 0)
            w += x;
    }
    return w;
}

const char *hm__frame_source(const char *frames, char *buf, size_t len)
{
    if (!frames || !len)
        return NULL;
    size_t out = 0;
    for (const char *f = frames; *f;) {
        size_t n = strcspn(f, "\n");
        const char *at = NULL;
        for (const char *p = f; p + 4 <= f + n; p++)
            if (!memcmp(p, " at ", 4)) {
                at = p + 4;
                break;
            }
        if (at) {
            size_t k = (size_t)(f + n - at);
            if (out + (out ? 3 : 0) + k >= len)
                break;
            if (out)
                memcpy(buf + out, " < ", 3), out += 3;
            memcpy(buf + out, at, k);
            out += k;
        }
        f += n;
        if (*f)
            f++;
    }
    if (!out)
        return NULL;
    buf[out] = 0;
    return buf;
}

const char *hm__source_link(const char *p, size_t *k)
{
    /* each link is "file:line[ function]" up to " < " */
    const char *end = strstr(p, " < ");
    size_t n = end ? (size_t)(end - p) : strlen(p);
    *k = strcspn(p, " ");
    if (*k > n)
        *k = n;
    return end ? end + 3 : NULL;
}

int hm__source_has(const char *chain, const char *file_line)
{
    if (!chain || !file_line)
        return 0;
    const char *want = strrchr(file_line, '/');
    want = want ? want + 1 : file_line;
    size_t wl = strlen(want), k;
    for (const char *p = chain, *next; p && *p; p = next) {
        next = hm__source_link(p, &k);
        if (k == wl && !memcmp(p, want, wl))
            return 1;
    }
    return 0;
}

/* The malloc family by name: glibc's are skipped with libc, and these are
 * the hetmem-cc runtime's definitions in the program (src/inst/heap.c),
 * between its wrappers and the preload when a hetmem-cc build is recorded. */
static int alloc_fn(const char *sym)
{
    static const char *const names[] = {"malloc", "calloc", "realloc", "free", "memalign", "aligned_alloc",
                                        "posix_memalign", "valloc", "pvalloc"};
    for (size_t i = 0; i < HM_ARRAY_LEN(names); i++)
        if (!strcmp(sym, names[i]))
            return 1;
    return 0;
}

int hm__site_skip_name(const char *module, const char *sym)
{
    /* Runtime libraries: what they allocate is done for the caller. */
    static const char *const libs[] = {"libc.so", "libstdc++.so", "libc++.so", "libc++abi.so",
                                       "libgcc_s.so", "libgfortran.so", "libm.so"};
    if (module)
        for (size_t i = 0; i < HM_ARRAY_LEN(libs); i++)
            if (!strncmp(module, libs[i], strlen(libs[i])))
                return 1;
    if (!sym)
        return 0;
    /* The hetmem-cc runtime's allocator wrappers (--wrap=malloc...), seen
     * when a hetmem-cc build is recorded; and _start, below main, which a
     * frame-pointer walk never reaches. */
    if (!strncmp(sym, "__wrap_", 7) || !strcmp(sym, "_start") || alloc_fn(sym))
        return 1;
    /* Itanium C++ ABI names: operator new/delete (_Znw, _Zna, _Zdl, _Zda);
     * functions in std:: (St, and the abbreviations Sa allocator, Sb
     * basic_string, Ss string, Si/So/Sd streams), const members (NK), and
     * __gnu_cxx::. */
    static const char *const pre[] = {"_Znw", "_Zna", "_Zdl", "_Zda", "_ZSt", "_ZNSt", "_ZNKSt", "_ZNSa",
                                      "_ZNKSa", "_ZNSb", "_ZNKSb", "_ZNSs", "_ZNKSs", "_ZNSi", "_ZNSo",
                                      "_ZNSd", "_ZN9__gnu_cxx", "_ZNK9__gnu_cxx"};
    for (size_t i = 0; i < HM_ARRAY_LEN(pre); i++)
        if (!strncmp(sym, pre[i], strlen(pre[i])))
            return 1;
    return 0;
}

static int site_skip_uncached(uintptr_t pc)
{
    Dl_info info;
    if (!pc || !dladdr((void *)(pc - 1), &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    const char *sym = info.dli_sname;
    if (hm__site_skip_name(base, sym))
        return 1;
    if (!sym) {
        struct link_map *lm = NULL;
        int main_prog = dladdr1((void *)(pc - 1), &info, (void **)&lm, RTLD_DL_LINKMAP) && lm && !lm->l_name[0];
        sym = symtab_name(main_prog ? "/proc/self/exe" : info.dli_fname, (uintptr_t)info.dli_fbase, pc - 1);
    }
    return hm__site_skip_name(NULL, sym);
}

int hm__site_entry(uintptr_t pc)
{
    Dl_info info;
    if (!pc || !dladdr((void *)(pc - 1), &info) || !info.dli_fname)
        return 0;
    const char *sym = info.dli_sname;
    if (!sym) {
        struct link_map *lm = NULL;
        int main_prog = dladdr1((void *)(pc - 1), &info, (void **)&lm, RTLD_DL_LINKMAP) && lm && !lm->l_name[0];
        sym = symtab_name(main_prog ? "/proc/self/exe" : info.dli_fname, (uintptr_t)info.dli_fbase, pc - 1);
    }
    return sym && (!strncmp(sym, "_Znw", 4) || !strncmp(sym, "_Zna", 4) || !strncmp(sym, "__wrap_", 7) || alloc_fn(sym));
}

int hm__site_skip(uintptr_t pc)
{
    /* Entries are (pc << 2) | 2 | skip; 0 is empty. User-space return
     * addresses fit in 62 bits. */
    static uint64_t cache[2048];
    uint64_t key = (uint64_t)pc << 2;
    size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 53);
    for (size_t i = 0; i < 16; i++) {
        uint64_t *slot = &cache[(h + i) % HM_ARRAY_LEN(cache)];
        uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
        if (cur && (cur & ~(uint64_t)3) == key)
            return (int)(cur & 1);
        if (!cur) {
            int skip = site_skip_uncached(pc);
            uint64_t v = key | 2 | (uint64_t)skip;
            __atomic_compare_exchange_n(slot, &cur, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
            return skip;
        }
    }
    return site_skip_uncached(pc);
}

/* Whether symbol y of t is a defined data object of at least min bytes
 * with a name. */
static int symtab_is_object(const symtab_t *t, const ElfW(Sym) *y, size_t min)
{
    return ELF64_ST_TYPE(y->st_info) == STT_OBJECT && y->st_shndx != SHN_UNDEF && y->st_shndx < SHN_LORESERVE &&
           y->st_size >= min && y->st_name < t->strsz && t->str[y->st_name] &&
           memchr(t->str + y->st_name, 0, t->strsz - y->st_name);
}

/* The cached symbol table of the module at fbase (file path), loaded on
 * first use; NULL when the cache is full. Called with symtab_lock held. */
static symtab_t *symtab_cached(uintptr_t fbase, const char *path)
{
    for (size_t i = 0; i < sizeof symtabs / sizeof symtabs[0]; i++) {
        if (symtabs[i].fbase == fbase)
            return &symtabs[i];
        if (!symtabs[i].fbase) {
            symtabs[i].fbase = fbase;
            symtab_load(&symtabs[i], path);
            return &symtabs[i];
        }
    }
    return NULL;
}

/* The modules loaded now, in dl_iterate_phdr's order: the program first,
 * then its libraries in load order. */
#define HM_MAX_MODULES 512
typedef struct {
    int n;
    struct {
        uintptr_t fbase;
        const char *path;
    } m[HM_MAX_MODULES];
} modules_t;

static int list_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    modules_t *ms = data;
    uintptr_t lo = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lo)
            lo = info->dlpi_phdr[i].p_vaddr & ~(uintptr_t)0xfff;
    /* The program's own name may be relative to a directory it left. */
    const char *path = ms->n == 0 ? "/proc/self/exe" : info->dlpi_name;
    if (lo != UINTPTR_MAX && path && path[0]) {
        ms->m[ms->n].fbase = info->dlpi_addr + lo;
        ms->m[ms->n].path = path;
        ms->n++;
    }
    return ms->n == HM_MAX_MODULES;
}

/* Whether symbol y of t lies in a writable section that is not
 * thread-local: .data and .bss, not .rodata. */
static int symtab_is_writable(const symtab_t *t, const ElfW(Sym) *y)
{
    if (!t->sh || y->st_shndx >= t->shnum)
        return 0;
    uint64_t f = t->sh[y->st_shndx].sh_flags;
    return (f & SHF_ALLOC) && (f & SHF_WRITE) && !(f & SHF_TLS);
}

int hm__module_objects(size_t min, int flags,
                       int (*want)(void *ctx, int module, const char *name, uintptr_t addr, size_t size, int writable),
                       int (*fn)(void *ctx, int module, uintptr_t addr, size_t size, const char *name), void *ctx,
                       int *dropped)
{
    static modules_t ms; /* large for a stack; callers are serialised by symtab_lock */
    static struct {
        int module;
        const char *name;
    } kept_names[HM_MODULE_KEPT];
    int nkept = 0;
    pthread_mutex_lock(&symtab_lock);
    ms.n = 0;
    dl_iterate_phdr(list_module, &ms);
    if ((flags & HM_MODOBJ_PROGRAM) && ms.n > 1)
        ms.n = 1;
    int n = 0;
    for (int k = 0; k < ms.n; k++) {
        symtab_t tmp, *t = NULL;
        for (size_t i = 0; i < HM_ARRAY_LEN(symtabs) && !t && (flags & HM_MODOBJ_UNCACHED); i++)
            if (symtabs[i].fbase == ms.m[k].fbase)
                t = &symtabs[i];
        if (!t && !(flags & HM_MODOBJ_UNCACHED))
            t = symtab_cached(ms.m[k].fbase, ms.m[k].path);
        if (!t) { /* uncached, or the cache is full: a mapping of its own, kept only if used */
            memset(&tmp, 0, sizeof tmp);
            tmp.fbase = ms.m[k].fbase;
            symtab_load(&tmp, ms.m[k].path);
            t = &tmp;
        }
        int kept = 0;
        for (size_t i = 0; !t->bad && i < t->nsyms; i++) {
            if (!symtab_is_object(t, &t->syms[i], min))
                continue;
            const char *name = t->str + t->syms[i].st_name;
            uintptr_t addr = t->syms[i].st_value + t->bias;
            if (want && !want(ctx, k, name, addr, t->syms[i].st_size, symtab_is_writable(t, &t->syms[i])))
                continue;
            int earlier = 0;
            for (int j = 0; j < nkept && !earlier; j++)
                earlier = kept_names[j].module != k && !strcmp(kept_names[j].name, name);
            if (earlier)
                continue;
            if (nkept == HM_MODULE_KEPT) {
                ++*dropped;
                continue;
            }
            n++;
            if (fn(ctx, k, addr, t->syms[i].st_size, name)) {
                kept_names[nkept].module = k;
                kept_names[nkept++].name = name;
                kept = 1;
            }
        }
        if (t == &tmp && !tmp.bad && !kept) {
            munmap((void *)tmp.map, tmp.len);
        } else if (t == &tmp && !tmp.bad) {
            /* kept: its names stay mapped, and later lookups use this mapping */
            for (size_t i = 0; i < HM_ARRAY_LEN(symtabs); i++)
                if (!symtabs[i].fbase) {
                    symtabs[i] = tmp;
                    break;
                }
        }
    }
    pthread_mutex_unlock(&symtab_lock);
    return n;
}

int hm__global_frame(uintptr_t addr, const char *name, char *buf, size_t len)
{
    Dl_info info;
    if (!dladdr((void *)addr, &info) || !info.dli_fname)
        return snprintf(buf, len, "0x%llx %s", (unsigned long long)addr, name);
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    unsigned long long off = (unsigned long long)(addr - (uintptr_t)info.dli_fbase);
    int w = snprintf(buf, len, "%s+0x%llx %s", base, off, name);
    char src[512];
    struct link_map *lm = NULL;
    Dl_info tmp;
    const char *path = dladdr1((void *)addr, &tmp, (void **)&lm, RTLD_DL_LINKMAP) && lm && !lm->l_name[0]
                           ? "/proc/self/exe"
                           : info.dli_fname;
    if (w >= 0 && (size_t)w < len && hm__srcloc_data(path, off, src, sizeof src) > 0) {
        int x = snprintf(buf + w, len - (size_t)w, " at %s", src);
        if (x > 0)
            w += x;
    }
    return w;
}

uint64_t hm__global_site(const char *name)
{
    return hm__hash64(name, strlen(name), 0x676c6f62616cull); /* "global" */
}
