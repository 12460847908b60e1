#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"

uint64_t hm__json_max(void)
{
    const char *v = hm__env_get(HM_ENV_JSON_MAX);
    uint64_t m;
    if (!v || !*v)
        return HM_JSON_MAX_DEFAULT;
    return hm__parse_size(v, &m) == 0 ? m : 0;
}

int hm__json_load_file(const char *path, json_t **out)
{
    json_error_t e;
    int fd, rc = hm__open_input(path, &fd);
    if (rc)
        return rc;
    struct stat st;
    uint64_t max = hm__json_max();
    char lim[32];
    if (max == 0) {
        /* A typo must not silently give the default limit (or none). */
        close(fd);
        return hm__errf(HM_ERANGE, "HETMEM_JSON_MAX=%s: not a size of at least 1 byte (%s)",
                        hm__env_get(HM_ENV_JSON_MAX), HM_SIZE_GRAMMAR);
    }
    if (fstat(fd, &st) != 0) {
        rc = hm__errf(-errno, "%s: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    if ((uint64_t)st.st_size > max) {
        char sz[32];
        close(fd);
        return hm__errf(HM_EBADJSON, "%s: %s of JSON, over the limit of %s (HETMEM_JSON_MAX)", path,
                        hm__fmt_size((uint64_t)st.st_size, sz, sizeof sz), hm__fmt_size(max, lim, sizeof lim));
    }
    /* Read up to one byte past the limit: a file that grows while it is
     * read is held to the limit too. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return hm__errf(-ENOMEM, "%s: %zu bytes", path, cap);
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2 > max + 1 ? (size_t)max + 1 : cap * 2;
            char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = hm__errf(-errno, "%s: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (!rc && len > max)
        rc = hm__errf(HM_EBADJSON, "%s: over the limit of %s of JSON (HETMEM_JSON_MAX)", path,
                      hm__fmt_size(max, lim, sizeof lim));
    if (rc) {
        free(buf);
        return rc;
    }
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
    free(buf);
    if (!j && json_error_code(&e) == json_error_out_of_memory)
        return hm__errf(-ENOMEM, "%s", path);
    if (!j)
        return hm__errf(HM_EBADJSON, "%s:%d:%d: %s", path, e.line, e.column, e.text);
    *out = j;
    return 0;
}

int hm__json_load_string(const char *what, const char *text, json_t **out)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &e);
    if (!j && json_error_code(&e) == json_error_out_of_memory)
        return hm__errf(-ENOMEM, "%s", what);
    if (!j)
        return hm__errf(HM_EBADJSON, "%s:%d:%d: %s", what, e.line, e.column, e.text);
    *out = j;
    return 0;
}

static int missing(const char *key, int required, const char *where)
{
    return required ? hm__errf(HM_EBADJSON, "%s: missing \"%s\"", where, key) : 1;
}

int hm__json_get_u64(const json_t *obj, const char *key, int required, uint64_t *out, const char *where)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return missing(key, required, where) < 0 ? HM_EBADJSON : 0;
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) { /* sizes may be written "16G" */
        if (hm__parse_size(json_string_value(v), out) == 0)
            return 0;
    }
    return hm__errf(HM_EBADJSON, "%s: \"%s\" must be a non-negative integer or size", where, key);
}

int hm__json_get_double(const json_t *obj, const char *key, int required, double *out, const char *where)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return missing(key, required, where) < 0 ? HM_EBADJSON : 0;
    if (!json_is_number(v))
        return hm__errf(HM_EBADJSON, "%s: \"%s\" must be a number", where, key);
    *out = json_number_value(v);
    return 0;
}

int hm__json_get_string(const json_t *obj, const char *key, int required, const char **out, const char *where)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return missing(key, required, where) < 0 ? HM_EBADJSON : 0;
    if (!json_is_string(v))
        return hm__errf(HM_EBADJSON, "%s: \"%s\" must be a string", where, key);
    *out = json_string_value(v);
    return 0;
}
