#define _GNU_SOURCE
#include "hetmem/error.h"

#include <string.h>

const char *hm_strerror(int err)
{
    switch (err) {
#define HM_ERR_MSG_(name, val, msg) case (val): return msg;
        HM_ERRNO_MAP(HM_ERR_MSG_)
#undef HM_ERR_MSG_
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return err == 0 ? "success" : "unknown error";
}

const char *hm_err_name(int err)
{
    switch (err) {
#define HM_ERR_NAME_(name, val, msg) case (val): return "HM_" #name;
        HM_ERRNO_MAP(HM_ERR_NAME_)
#undef HM_ERR_NAME_
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
