/* Error table and the thread-local error detail. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char detail_[512];

PS_API const char *ps_strerror(int err)
{
    switch (err) {
#define PS_ERR_MSG_(name, val, msg) case (val): return msg;
        PS_ERRNO_MAP(PS_ERR_MSG_)
#undef PS_ERR_MSG_
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return err == 0 ? "success" : "unknown error";
}

PS_API const char *ps_err_name(int err)
{
    switch (err) {
#define PS_ERR_NAME_(name, val, msg) case (val): return "PS_" #name;
        PS_ERRNO_MAP(PS_ERR_NAME_)
#undef PS_ERR_NAME_
    default:
        break;
    }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    if (err < 0 && err > -4096) {
        const char *n = strerrorname_np(-err);
        if (n)
            return n;
    }
#endif
    return err == 0 ? "OK" : "UNKNOWN";
}

PS_API const char *ps_errdetail(void) { return detail_; }

int ps__errf(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail_, sizeof detail_, fmt, ap);
    va_end(ap);
    return err;
}

void ps__errset(const char *text)
{
    snprintf(detail_, sizeof detail_, "%s", text);
}

void ps__errclear(void) { detail_[0] = 0; }
