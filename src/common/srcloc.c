/* Source locations of allocation call sites, from the program's DWARF line
 * tables and inline scopes (elfutils' libdw). A frame is named by the
 * first place in the caller's own code: when the call sits inside
 * standard-library code inlined into the caller (std::vector's constructor,
 * std::allocator::allocate), the inline chain is followed outwards to the
 * line that called it. Files are opened by path, offline, so the same code
 * serves a running program and a tool reading a trace. */
#define _GNU_SOURCE
#include "common.h"

#include <pthread.h>
#include <string.h>

#ifdef HM_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

typedef struct {
    char path[512];
    Dwfl *dwfl;
    Dwfl_Module *mod;
    GElf_Addr low; /* lowest PT_LOAD vaddr, page-aligned: what dladdr's fbase maps to */
    int bad;
} srcmod_t;

static srcmod_t mods[8];
static unsigned nmods_next;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* A fork waits for a lookup in progress (the modules' libdw state), so
 * that a child never starts with the lock held by a thread it does not
 * have. */
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static void lock_take(void) { pthread_mutex_lock(&lock); }
static void lock_give(void) { pthread_mutex_unlock(&lock); }
static void lock_atfork(void) { pthread_atfork(lock_take, lock_give, lock_give); }
static const Dwfl_Callbacks callbacks = {
    .find_elf = NULL,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

static void mod_close(srcmod_t *m)
{
    if (m->dwfl)
        dwfl_end(m->dwfl);
    memset(m, 0, sizeof *m);
}

static srcmod_t *mod_open(const char *path)
{
    for (size_t i = 0; i < HM_ARRAY_LEN(mods); i++)
        if (mods[i].path[0] && !strcmp(mods[i].path, path))
            return mods[i].bad ? NULL : &mods[i];
    if (strlen(path) >= sizeof mods[0].path)
        return NULL;
    srcmod_t *m = &mods[nmods_next++ % HM_ARRAY_LEN(mods)];
    mod_close(m);
    strcpy(m->path, path);
    m->bad = 1;
    m->dwfl = dwfl_begin(&callbacks);
    if (!m->dwfl)
        return NULL;
    dwfl_report_begin(m->dwfl);
    m->mod = dwfl_report_elf(m->dwfl, "m", path, -1, 0, true);
    dwfl_report_end(m->dwfl, NULL, NULL);
    if (!m->mod)
        return NULL;
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(m->mod, &bias);
    size_t nph;
    if (!elf || elf_getphdrnum(elf, &nph) != 0)
        return NULL;
    GElf_Addr low = (GElf_Addr)-1;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < low)
            low = ph.p_vaddr & ~(GElf_Addr)0xfff;
    }
    if (low == (GElf_Addr)-1)
        return NULL;
    m->low = low + bias;
    m->bad = 0;
    return m;
}

/* Standard-library code: by the function's linkage name, or by the file
 * it comes from (the compiler's and the system's headers). */
static int std_code(Dwarf_Die *fn, const char *file)
{
    if (file && (!strncmp(file, "/usr/include/", 13) || !strncmp(file, "/usr/lib/gcc/", 13) ||
                 !strncmp(file, "/usr/lib/llvm", 13)))
        return 1;
    Dwarf_Attribute a;
    const char *ln = NULL;
    if (fn && (dwarf_attr_integrate(fn, DW_AT_linkage_name, &a) || dwarf_attr_integrate(fn, DW_AT_MIPS_linkage_name, &a)))
        ln = dwarf_formstring(&a);
    return ln && hm__site_skip_name(NULL, ln);
}

static const char *die_name(Dwarf_Die *d)
{
    Dwarf_Attribute a;
    return dwarf_attr_integrate(d, DW_AT_name, &a) ? dwarf_formstring(&a) : NULL;
}

/* The functions, inlined instances and blocks that hold pc, outermost
 * first: a walk down the compile unit's tree (namespaces are looked
 * into, not kept). Returns the count. */
static int scope_chain(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *out, int max)
{
    Dwarf_Die child;
    if (max <= 0 || dwarf_child(parent, &child) != 0)
        return 0;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_namespace) {
            int k = scope_chain(&child, pc, out, max);
            if (k > 0)
                return k;
        } else if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
                   dwarf_haspc(&child, pc) == 1) {
            out[0] = child;
            return 1 + scope_chain(&child, pc, out + 1, max - 1);
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

/* cols: each link as "file:line:column function" (the column 0 where
 * the compiler gave none): the key site ids hash, which tells apart two
 * calls on one line. */
static int locate(srcmod_t *m, uint64_t off, char *buf, size_t len, int cols)
{
    Dwarf_Addr addr = m->low + off, bias;
    Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
    int line = 0, col = 0;
    const char *file = l ? dwfl_lineinfo(l, NULL, &line, &col, NULL, NULL) : NULL;
    if (!file || line <= 0)
        return -1;
    Dwarf_Die *cu = dwfl_module_addrdie(m->mod, addr, &bias);
    Dwarf_Die chain[32];
    int n = cu ? scope_chain(cu, addr - bias, chain, (int)HM_ARRAY_LEN(chain)) : 0;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (cu)
        dwarf_getsrcfiles(cu, &files, &nfiles);
    /* Innermost first. An inlined standard-library function hands the
     * location to the line that called it; an inlined function of the
     * program's own is one link of the chain, and so is the line that
     * called it, up to the function the frame is in. */
    size_t off_out = 0;
    int links = 0;
    for (int i = n - 1; i >= 0; i--) {
        int tag = dwarf_tag(&chain[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        int is_std = tag == DW_TAG_inlined_subroutine && std_code(&chain[i], file);
        if (!is_std) {
            const char *base = strrchr(file, '/');
            base = base ? base + 1 : file;
            const char *fn = die_name(&chain[i]);
            char lc[32];
            if (cols)
                snprintf(lc, sizeof lc, "%d:%d", line, col);
            else
                snprintf(lc, sizeof lc, "%d", line);
            int w = snprintf(buf + off_out, len - off_out, fn ? "%s%s:%s %s" : "%s%s:%s", links ? " < " : "", base,
                             lc, fn);
            if (w < 0 || (size_t)w >= len - off_out)
                break;
            off_out += (size_t)w;
            links++;
        }
        if (tag == DW_TAG_subprogram)
            break;
        Dwarf_Attribute a;
        Dwarf_Word cf, cl, cc = 0;
        if (!files || !dwarf_attr(&chain[i], DW_AT_call_file, &a) || dwarf_formudata(&a, &cf) != 0 ||
            !dwarf_attr(&chain[i], DW_AT_call_line, &a) || dwarf_formudata(&a, &cl) != 0)
            break;
        if (dwarf_attr(&chain[i], DW_AT_call_column, &a) && dwarf_formudata(&a, &cc) != 0)
            cc = 0;
        const char *f = cf < nfiles ? dwarf_filesrc(files, cf, NULL, NULL) : NULL;
        if (!f)
            break;
        file = f;
        line = (int)cl;
        col = (int)cc;
    }
    if (!links) { /* no scope: the line alone */
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        return cols ? snprintf(buf, len, "%s:%d:%d", base, line, col) : snprintf(buf, len, "%s:%d", base, line);
    }
    return (int)off_out;
}

/* The first variable or COMMON block under d whose location is the address
 * target (a single DW_OP_addr, or one followed by offsets: a COMMON block's
 * members), and that has a declaration line; functions, blocks, namespaces
 * and Fortran modules are looked into, as static locals and a main
 * program's arrays sit there. */
static int data_decl(Dwarf_Die *d, Dwarf_Addr target, Dwarf_Die *out)
{
    Dwarf_Die child;
    if (dwarf_child(d, &child) != 0)
        return 0;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_variable || tag == DW_TAG_common_block) {
            Dwarf_Attribute a;
            Dwarf_Op *ops;
            size_t nops;
            int line;
            if (dwarf_attr(&child, DW_AT_location, &a) && dwarf_getlocation(&a, &ops, &nops) == 0 && nops >= 1 &&
                ops[0].atom == DW_OP_addr && ops[0].number == target && (nops == 1 || tag == DW_TAG_common_block) &&
                dwarf_decl_line(&child, &line) == 0 && line > 0 && dwarf_decl_file(&child)) {
                *out = child;
                return 1;
            }
        }
        if ((tag == DW_TAG_subprogram || tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
             tag == DW_TAG_module || tag == DW_TAG_common_block) &&
            data_decl(&child, target, out))
            return 1;
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static int locate_data(srcmod_t *m, uint64_t off, char *buf, size_t len)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = NULL, found;
    while ((cu = dwfl_module_nextcu(m->mod, cu, &bias)) != NULL) {
        if (!data_decl(cu, m->low + off - bias, &found))
            continue;
        int line = 0;
        const char *file = dwarf_decl_file(&found);
        dwarf_decl_line(&found, &line);
        const char *base = strrchr(file, '/');
        return snprintf(buf, len, "%s:%d", base ? base + 1 : file, line);
    }
    return -1;
}
#endif

static int srcloc(const char *path, uint64_t off, char *buf, size_t len, int cols)
{
#ifdef HM_HAVE_LIBDW
    if (!path || !len)
        return -1;
    pthread_once(&lock_once, lock_atfork);
    pthread_mutex_lock(&lock);
    srcmod_t *m = mod_open(path);
    int rc = m ? locate(m, off, buf, len, cols) : -1;
    pthread_mutex_unlock(&lock);
    if (rc < 0 || (size_t)rc >= len)
        return -1;
    return rc;
#else
    (void)path;
    (void)off;
    (void)buf;
    (void)len;
    (void)cols;
    return -1;
#endif
}

int hm__srcloc(const char *path, uint64_t off, char *buf, size_t len) { return srcloc(path, off, buf, len, 0); }

int hm__srcloc_key(const char *path, uint64_t off, char *buf, size_t len) { return srcloc(path, off, buf, len, 1); }

int hm__srcloc_data(const char *path, uint64_t off, char *buf, size_t len)
{
#ifdef HM_HAVE_LIBDW
    if (!path || !len)
        return -1;
    pthread_once(&lock_once, lock_atfork);
    pthread_mutex_lock(&lock);
    srcmod_t *m = mod_open(path);
    int rc = m ? locate_data(m, off, buf, len) : -1;
    pthread_mutex_unlock(&lock);
    if (rc < 0 || (size_t)rc >= len)
        return -1;
    return rc;
#else
    (void)path;
    (void)off;
    (void)buf;
    (void)len;
    return -1;
#endif
}
