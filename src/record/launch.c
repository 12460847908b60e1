/* Launching a traced command and merging the spool files its processes
 * wrote. */
#define _GNU_SOURCE
#include "record/record_int.h"

#include "common/env.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int hm__find_preload(char *buf, size_t len)
{
    const char *env = hm__env_get(HM_ENV_PRELOAD);
    if (env && *env) {
        if (access(env, R_OK) != 0)
            return hm__errf(HM_ENOTFOUND, "HETMEM_PRELOAD=%s: %s", env, strerror(errno));
        snprintf(buf, len, "%s", env);
        return 0;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return hm__errf(HM_ENOTFOUND, "cannot read /proc/self/exe");
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    static const char *const rel[] = {"/../lib/libhetmem_preload.so", "/libhetmem_preload.so",
                                      "/../lib/hetmem/libhetmem_preload.so"};
    for (size_t i = 0; i < HM_ARRAY_LEN(rel); i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", exe, rel[i]);
        char *r = realpath(p, NULL);
        if (r && access(r, R_OK) == 0) {
            snprintf(buf, len, "%s", r);
            free(r);
            return 0;
        }
        free(r);
    }
    return hm__errf(HM_ENOTFOUND, "libhetmem_preload.so is not in %s/../lib or %s (set HETMEM_PRELOAD)", exe, exe);
}

static volatile sig_atomic_t child_pid_;

static void forward(int sig)
{
    if (child_pid_ > 0)
        kill((pid_t)child_pid_, sig);
}

int hm__exit_code(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 1;
}

/* The child's environment: ours, with every NAME=... of set (and then
 * LD_PRELOAD=ld) replacing an entry of the same name, and without the
 * runtime settings set does not give (hm__env_is_setting: the command's
 * options decide them, never a variable left in the caller's
 * environment; the CLI warns of each, hm_cli_env_settings). Only the
 * array is allocated; the strings are borrowed. */
static char **child_env(char *const set[], char *ld)
{
    size_t n = 0, k = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    for (char *const *e = set; e && *e; e++)
        k++;
    char **env = hm__xmalloc((n + k + 2) * sizeof *env);
    size_t o = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        size_t nl = eq ? (size_t)(eq - *e) + 1 : strlen(*e);
        int replaced = !strncmp(*e, "LD_PRELOAD=", nl);
        for (char *const *x = set; x && *x && !replaced; x++)
            replaced = !strncmp(*e, *x, nl);
        if (!replaced && hm__env_is_setting(*e))
            replaced = 1;
        if (!replaced)
            env[o++] = *e;
    }
    for (char *const *x = set; x && *x; x++)
        env[o++] = *x;
    env[o++] = ld;
    env[o] = NULL;
    return env;
}

/* Whether cmd (found through PATH like execvp) is an ELF program without
 * an interpreter: LD_PRELOAD has no loader to act on there. Anything else
 * (dynamic, scripts, unreadable) is 0 and left to the launch. */
int hm__exe_is_static(const char *cmd)
{
    char path[4096];
    if (strchr(cmd, '/')) {
        snprintf(path, sizeof path, "%s", cmd);
    } else {
        const char *p = getenv("PATH");
        int found = 0;
        for (p = p ? p : "/usr/bin:/bin"; *p && !found;) {
            size_t n = strcspn(p, ":");
            snprintf(path, sizeof path, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", cmd);
            found = access(path, X_OK) == 0;
            p += n + (p[n] == ':');
        }
        if (!found)
            return 0;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block */
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    int st = 0;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 &&
        eh.e_phnum < 4096 && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN)) {
        st = 1;
        for (unsigned i = 0; i < eh.e_phnum && st; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
                st = 0;
            else if (ph.p_type == PT_INTERP)
                st = 0;
        }
        /* A shared library (ET_DYN, no interpreter, no entry) is not run. */
        if (st && eh.e_type == ET_DYN && eh.e_entry == 0)
            st = 0;
    }
    close(fd);
    return st;
}

int hm__launch(char *const argv[], const char *preload, char *const extra_env[], int *status, uint64_t *wall_ns)
{
    const char *old = getenv("LD_PRELOAD");
    size_t n = strlen(preload) + (old ? strlen(old) : 0) + 32;
    char *ld = hm__xmalloc(n);
    snprintf(ld, n, "LD_PRELOAD=%s%s%s", preload, old && *old ? ":" : "", old && *old ? old : "");
    char **env = child_env(extra_env, ld);
    /* posix_spawn rather than fork: glibc spawns with CLONE_VM|CLONE_VFORK,
     * which neither copies our page tables nor makes our pages
     * copy-on-write, a fixed cost of every recording. */
    uint64_t t0 = hm__now_ns();
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], NULL, NULL, argv, env);
    if (e == ENOEXEC) {
        /* A script without #!: execvp would hand it to the shell, and so
         * do we (glibc's posix_spawnp no longer does). */
        size_t argc = 0;
        while (argv[argc])
            argc++;
        char **sh = hm__xmalloc((argc + 2) * sizeof *sh);
        sh[0] = "sh";
        memcpy(sh + 1, argv, (argc + 1) * sizeof *sh);
        e = posix_spawn(&pid, "/bin/sh", NULL, NULL, sh, env);
        free(sh);
    }
    free(env);
    free(ld);
    if (e == ENOMEM || e == EAGAIN)
        return hm__errf(-e, "cannot start %s: %s", argv[0], strerror(e));
    if (e) {
        /* The program could not be executed: report it as a shell would,
         * and let the caller see an exit status 127 (not found) or 126. */
        fprintf(stderr, "hetmem: %s: %s\n", argv[0], strerror(e));
        *status = (e == ENOENT ? 127 : 126) << 8;
        *wall_ns = hm__now_ns() - t0;
        return 0;
    }
    child_pid_ = pid;
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    *wall_ns = hm__now_ns() - t0;
    child_pid_ = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    *status = st;
    return 0;
}

/* ---------------------------------------------------------------- spools */

typedef struct {
    const uint8_t *base;
    size_t len, off;
    size_t released; /* pages before this offset were given back */
    int truncated;
} sfile_t;

struct hm__spool_set {
    sfile_t *f;
    int n;
    int *heap; /* file indices ordered by their next record's time */
    int nheap;
};

static int peek(sfile_t *f, const hm__spool_rec_t **r)
{
    if (f->off + sizeof(hm__spool_rec_t) > f->len) {
        if (f->off != f->len)
            f->truncated = 1;
        return 0;
    }
    const hm__spool_rec_t *x = (const void *)(f->base + f->off);
    /* Payloads are strings: one without its terminator ends the file as
     * damage would, rather than be read past its end. */
    if (f->off + sizeof *x + x->len > f->len || (x->len && ((const char *)(x + 1))[x->len - 1] != '\0')) {
        f->truncated = 1;
        return 0;
    }
    *r = x;
    return 1;
}

static uint64_t key(hm__spool_set_t *s, int i)
{
    const hm__spool_rec_t *r;
    return peek(&s->f[i], &r) ? r->time : UINT64_MAX;
}

static void sift_down(hm__spool_set_t *s, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < s->nheap && key(s, s->heap[l]) < key(s, s->heap[m]))
            m = l;
        if (l + 1 < s->nheap && key(s, s->heap[l + 1]) < key(s, s->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        int t = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = t;
        i = m;
    }
}

int hm__spool_open(hm__spool_set_t **out, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return hm__errf(-errno, "%s: %s", dir, strerror(errno));
    hm__spool_set_t *s = hm__xcalloc(1, sizeof *s);
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".spool"))
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 8) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            continue;
        if (memcmp(m, HM_SPOOL_MAGIC, 8) != 0) {
            munmap(m, (size_t)st.st_size);
            continue;
        }
        if (s->n == cap) {
            cap = cap ? cap * 2 : 16;
            s->f = hm__xrealloc(s->f, (size_t)cap * sizeof *s->f);
        }
        s->f[s->n++] = (sfile_t){m, (size_t)st.st_size, 8, 0, 0};
    }
    closedir(d);
    s->heap = hm__xmalloc((size_t)(s->n ? s->n : 1) * sizeof *s->heap);
    for (int i = 0; i < s->n; i++)
        s->heap[s->nheap++] = i;
    for (int i = s->nheap / 2 - 1; i >= 0; i--)
        sift_down(s, i);
    *out = s;
    return 0;
}

/* A long run's spools reach hundreds of megabytes, and every mapped page
 * read stays in the resident set: the pages the merge has moved past are
 * given back, a few megabytes at a time. The mapping is private and
 * read-only, so a page given back and touched again is read from the file. */
#define SPOOL_RELEASE_STEP ((size_t)4 << 20)

static void release_read(sfile_t *f, size_t upto)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), end = upto & ~(pg - 1);
    if (end >= f->released + SPOOL_RELEASE_STEP) {
        madvise((void *)(uintptr_t)(f->base + f->released), end - f->released, MADV_DONTNEED);
        f->released = end;
    }
}

int hm__spool_next(hm__spool_set_t *s, const hm__spool_rec_t **rec, const char **payload)
{
    while (s->nheap) {
        sfile_t *f = &s->f[s->heap[0]];
        const hm__spool_rec_t *r;
        if (!peek(f, &r)) {
            s->heap[0] = s->heap[--s->nheap];
            sift_down(s, 0);
            continue;
        }
        release_read(f, f->off);
        *rec = r;
        *payload = r->len ? (const char *)(r + 1) : "";
        f->off += sizeof *r + r->len;
        sift_down(s, 0);
        return 1;
    }
    return 0;
}

void hm__spool_counts(const hm__spool_set_t *s, int *files, int *truncated)
{
    *files = s->n;
    *truncated = 0;
    for (int i = 0; i < s->n; i++)
        *truncated += s->f[i].truncated;
}

void hm__spool_close(hm__spool_set_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        munmap((void *)s->f[i].base, s->f[i].len);
    free(s->f);
    free(s->heap);
    free(s);
}

void hm__spool_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Start time of a process (clock ticks since boot, /proc/PID/stat field
 * 22), or 0 when it does not exist: a pid alone may have been reused. */
static unsigned long long proc_start(long pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *q = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long st = 0;
    if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st) != 1)
        return 0;
    return st;
}

/* Removes spool folders in tmp left by a hetmem that died (SIGKILL, power
 * loss): ours (same uid), with an owner file naming a process that is gone.
 * Folders without an owner file are left alone (being created, or not
 * ours to judge). */
static void reap_stale(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "hetmem-spool.", 13) != 0)
            continue;
        char dir[4096], own[4200];
        snprintf(dir, sizeof dir, "%s/%s", tmp, e->d_name);
        snprintf(own, sizeof own, "%s/owner", dir);
        struct stat st;
        if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
            continue;
        FILE *f = fopen(own, "r");
        long pid = 0;
        unsigned long long start = 0;
        int ok = f && fscanf(f, "%ld %llu", &pid, &start) == 2;
        if (f)
            fclose(f);
        if (ok && pid > 0 && proc_start(pid) != start)
            hm__spool_remove(dir);
    }
    closedir(d);
}

int hm__spool_create(char *dir, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    reap_stale(tmp);
    snprintf(dir, len, "%s/hetmem-spool.XXXXXX", tmp);
    if (!mkdtemp(dir))
        return hm__errf(-errno, "cannot create spool folder %s: %s", dir, strerror(errno));
    char own[4200];
    snprintf(own, sizeof own, "%s/owner", dir);
    FILE *f = fopen(own, "w");
    if (f) {
        fprintf(f, "%ld %llu\n", (long)getpid(), proc_start((long)getpid()));
        fclose(f);
    }
    return 0;
}
