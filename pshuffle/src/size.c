/* Sizes a user writes (PSHUFFLE_WINDOW): the grammar hetmem uses for every
 * size, so that one value means the same to both products. Both parsers'
 * unit tests read one table of cases (tests/fixtures/sizes.txt). */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

int ps__parse_size(const char *s, uint64_t *out)
{
    /* Decimal digits, then optionally K, M, G or T (binary), which may be
     * followed by "B" or "iB". No fractions, exponents, hex or signs. */
    if (!s || *s < '0' || *s > '9')
        return -1;
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    int shift = 0;
    switch (*p) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if ((p[0] == 'i' || p[0] == 'I') && (p[1] == 'B' || p[1] == 'b'))
            p += 2;
        else if (p[0] == 'B' || p[0] == 'b')
            p++;
    }
    if (*p || v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

/* PSHUFFLE_WINDOW (a size, as hetmem reads one: "64M", "256K") replaces
 * the default in-flight window of 64 MiB; a value that does not parse or
 * lies outside 1K..1G gives 0, which ps_open() refuses naming the
 * variable. */
uint64_t ps__env_window(void)
{
    const char *s = getenv("PSHUFFLE_WINDOW");
    uint64_t v;
    if (!s || !*s)
        return UINT64_C(64) << 20;
    if (ps__parse_size(s, &v) != 0 || v < PS_MIN_WINDOW || v > PS_MAX_WINDOW)
        return 0;
    return v;
}
