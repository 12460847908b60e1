/* libhetmem_preload: the real allocator functions (dlsym(RTLD_NEXT)) and the
 * static bootstrap buffer that serves dlsym's own calloc while they are
 * being looked up; free() and realloc() recognise its blocks. */
#define _GNU_SOURCE
#include "preload/preload_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "common/env.h"
#include "hetmem/trace.h"
#include "os/os.h"

hm__real_t hm__real;

/* ------------------------------------------------------------ bootstrap */

static char boot_buf[64 * 1024] __attribute__((aligned(64)));
static size_t boot_used;

/* Each bootstrap block is preceded by 16 bytes holding its size, so that
 * realloc copies what the block holds and no more. */
void *hm__boot_alloc(size_t n)
{
    if (n > sizeof boot_buf)
        return NULL;
    size_t need = 16 + ((n + 15) & ~(size_t)15);
    size_t at = __atomic_fetch_add(&boot_used, need, __ATOMIC_RELAXED);
    if (at + need > sizeof boot_buf)
        return NULL;
    memcpy(boot_buf + at, &n, sizeof n);
    return boot_buf + at + 16; /* static storage: already zero */
}

size_t hm__boot_size(const void *p)
{
    size_t n;
    memcpy(&n, (const char *)p - 16, sizeof n);
    return n;
}

int hm__is_boot(const void *p)
{
    return (const char *)p >= boot_buf && (const char *)p < boot_buf + sizeof boot_buf;
}

void *hm__boot_realloc(void *p, size_t n, void *(*alloc)(size_t))
{
    void *q = alloc(n);
    size_t have = hm__boot_size(p);
    if (q)
        memcpy(q, p, have < n ? have : n);
    return q;
}

int hm__resolving;

void hm__resolve(void)
{
    if (hm__real.malloc || hm__resolving)
        return;
    hm__resolving = 1;
#define R(name) hm__real.name = (__typeof__(hm__real.name))dlsym(RTLD_NEXT, #name)
    R(calloc);
    R(malloc);
    R(realloc);
    R(free);
    R(posix_memalign);
    R(aligned_alloc);
    R(memalign);
    R(valloc);
    R(pvalloc);
    R(malloc_usable_size);
    R(mmap);
    R(munmap);
#undef R
    hm__resolving = 0;
}
