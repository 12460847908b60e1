/* DWARF .eh_frame FDE: the address range of the function it covers. The
 * pointer encoding of pc_begin/pc_range is not fixed: the CIE's "zR"
 * augmentation names it (gcc and clang pick pcrel|sdata4 on x86-64, but
 * udata8/absptr and uleb128 are valid and found in hand-written assembly
 * and other toolchains), so it is decoded rather than assumed. */
#include "arch/arch.h"

#include <string.h>

enum {
    PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
    PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c, PE_OMIT = 0xff,
};

typedef struct {
    const uint8_t *p, *end;
} rd_t;

static int uleb(rd_t *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int sleb(rd_t *r, int64_t *out)
{
    uint64_t v = 0;
    int shift = 0;
    while (shift < 64 && r->p < r->end) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= ~0ull << shift;
            *out = (int64_t)v;
            return 0;
        }
    }
    return -1;
}

static int fixed(rd_t *r, size_t n, uint64_t *out)
{
    if ((size_t)(r->end - r->p) < n)
        return -1;
    uint64_t v = 0;
    memcpy(&v, r->p, n); /* little-endian hosts only: x86-64, aarch64 */
    r->p += n;
    *out = v;
    return 0;
}

/* Reads one value in format enc & 0x0f (no pcrel/datarel applied: a range
 * is a length). */
static int read_enc(rd_t *r, uint8_t enc, uint64_t *out)
{
    int64_t s;
    uint64_t v;
    switch (enc & 0x0f) {
    case PE_ABSPTR: return fixed(r, sizeof(void *), out);
    case PE_ULEB128: return uleb(r, out);
    case PE_UDATA2: return fixed(r, 2, out);
    case PE_UDATA4: return fixed(r, 4, out);
    case PE_UDATA8: return fixed(r, 8, out);
    case PE_SLEB128:
        if (sleb(r, &s) != 0)
            return -1;
        *out = (uint64_t)s;
        return 0;
    case PE_SDATA2:
        if (fixed(r, 2, &v) != 0)
            return -1;
        *out = (uint64_t)(int64_t)(int16_t)v;
        return 0;
    case PE_SDATA4:
        if (fixed(r, 4, &v) != 0)
            return -1;
        *out = (uint64_t)(int64_t)(int32_t)v;
        return 0;
    case PE_SDATA8: return fixed(r, 8, out);
    default: return -1;
    }
}

/* A record's body: [p, end) after its length field. */
static int record(const uint8_t *at, rd_t *body, size_t limit)
{
    uint32_t len32;
    memcpy(&len32, at, 4);
    uint64_t len = len32;
    const uint8_t *p = at + 4;
    if (len32 == 0xffffffffu) {
        memcpy(&len, at + 4, 8);
        p += 8;
    }
    if (len == 0 || len > limit)
        return -1;
    body->p = p;
    body->end = p + len;
    return 0;
}

int hm__fde_range(const uint8_t *fde, size_t limit, uint64_t *range)
{
    rd_t f;
    if (!fde || record(fde, &f, limit) != 0 || f.end - f.p < 4)
        return -1;
    uint32_t cie_off;
    memcpy(&cie_off, f.p, 4);
    if (cie_off == 0)
        return -1; /* a CIE, not an FDE */
    const uint8_t *cie_at = f.p - cie_off;
    f.p += 4;
    rd_t c;
    if (record(cie_at, &c, limit) != 0 || c.end - c.p < 6)
        return -1;
    uint32_t id;
    memcpy(&id, c.p, 4);
    if (id != 0)
        return -1;
    c.p += 4;
    uint8_t version = *c.p++;
    if (version != 1 && version != 3)
        return -1;
    const char *aug = (const char *)c.p;
    size_t alen = strnlen(aug, (size_t)(c.end - c.p));
    if (alen == (size_t)(c.end - c.p) || alen > 8)
        return -1;
    c.p += alen + 1;
    uint64_t u;
    int64_t s;
    if (strstr(aug, "eh") && read_enc(&c, PE_ABSPTR, &u) != 0)
        return -1;
    if (uleb(&c, &u) != 0 || sleb(&c, &s) != 0) /* code and data alignment */
        return -1;
    if (version == 1 ? (c.p++ >= c.end) : uleb(&c, &u) != 0) /* return register */
        return -1;
    uint8_t enc = PE_ABSPTR;
    if (aug[0] == 'z') {
        uint64_t zlen;
        if (uleb(&c, &zlen) != 0 || zlen > (uint64_t)(c.end - c.p))
            return -1;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R') {
                if (c.p >= c.end)
                    return -1;
                enc = *c.p++;
            } else if (*a == 'L') {
                if (c.p++ >= c.end)
                    return -1;
            } else if (*a == 'P') {
                if (c.p >= c.end)
                    return -1;
                uint8_t penc = *c.p++;
                if (read_enc(&c, penc, &u) != 0)
                    return -1;
            } else if (*a != 'S' && *a != 'B') {
                return -1; /* unknown: its data cannot be skipped */
            }
        }
    } else if (aug[0] && strcmp(aug, "eh") != 0) {
        return -1;
    }
    if (enc == PE_OMIT || read_enc(&f, enc, &u) != 0 || read_enc(&f, enc, range) != 0)
        return -1;
    return 0;
}
