/* The fuzz input as a NUL-terminated string, for the targets whose parser
 * takes text (JSON); NULL when out of memory. The caller frees it. */
#ifndef HETMEM_FUZZ_TEXT_H
#define HETMEM_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = 0;
    }
    return s;
}

#endif
