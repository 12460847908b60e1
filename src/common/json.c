#include "common.h"

#include <errno.h>

int hm__json_load_file(const char *path, json_t **out)
{
    json_error_t e;
    FILE *f = fopen(path, "rb");
    if (!f)
        return hm__errf(-errno, "%s", path);
    json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &e);
    fclose(f);
    if (!j)
        return hm__errf(HM_EBADJSON, "%s:%d:%d: %s", path, e.line, e.column, e.text);
    *out = j;
    return 0;
}

int hm__json_load_string(const char *what, const char *text, json_t **out)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &e);
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
