#include "common.h"
#include "env.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hm__log_level = HM_LOG_ERROR - 1; /* quiet until hm__log_init() says otherwise */

static _Thread_local char errdetail_[512];

int hm__errf(int err, const char *fmt, ...)
{
    /* Formatted apart first: callers often wrap the detail they were given
     * ("%s: %s", where, hm_errdetail()), which is this very buffer. */
    char buf[sizeof errdetail_];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(errdetail_, buf, sizeof buf);
    return err;
}

void hm__errclear(void) { errdetail_[0] = '\0'; }

const char *hm_errdetail(void) { return errdetail_; }

int hm__log_init(void)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *v = hm__env_get(HM_ENV_LOG);
    if (!v)
        return 0;
    for (int i = 0; i < (int)HM_ARRAY_LEN(names); i++)
        if (strcmp(v, names[i]) == 0) {
            hm__log_level = i;
            return 0;
        }
    return HM_ERANGE;
}

void hm__logf(int level, const char *fmt, ...)
{
    static const char *const tag[] = {"error", "warn", "info", "debug"};
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "hetmem[%s]: ", tag[level & 3]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    /* write(2), not stdio: logging may run inside the allocator interposer. */
    ssize_t w HM_UNUSED = write(2, buf, len);
}
