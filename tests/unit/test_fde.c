/* .eh_frame FDE ranges in every pointer encoding a CIE can name, malformed
 * records refused, and the FDEs of this very program. A fixed read of a
 * 4-byte pc_range at offset 12 (what the soft sampler did) gets udata8,
 * absptr and uleb128 ranges wrong. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "arch/arch.h"

typedef struct {
    uint8_t b[256];
    size_t n;
} buf_t;

static void put(buf_t *x, const void *p, size_t n)
{
    memcpy(x->b + x->n, p, n);
    x->n += n;
}
static void u8(buf_t *x, uint8_t v) { put(x, &v, 1); }
static void uleb(buf_t *x, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        u8(x, (uint8_t)(c | (v ? 0x80 : 0)));
    } while (v);
}
static void val(buf_t *x, uint8_t enc, uint64_t v)
{
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: put(x, &v, 8); break;
    case 0x03: case 0x0b: put(x, &v, 4); break;
    case 0x02: case 0x0a: put(x, &v, 2); break;
    case 0x01: uleb(x, v); break;
    }
}
static void set_len(buf_t *x, size_t at) { uint32_t l = (uint32_t)(x->n - at - 4); memcpy(x->b + at, &l, 4); }

/* A CIE with augmentation aug (and R encoding enc), then an FDE whose
 * pc_begin is 0x400000 and pc_range is range. Returns the FDE's offset. */
static size_t make(buf_t *x, const char *aug, uint8_t enc, uint64_t range)
{
    memset(x, 0, sizeof *x);
    uint32_t z = 0;
    put(x, &z, 4);
    put(x, &z, 4);            /* CIE id */
    u8(x, 1);                 /* version */
    put(x, aug, strlen(aug) + 1);
    uleb(x, 1);               /* code alignment */
    u8(x, 0x78);              /* data alignment -8 */
    u8(x, 16);                /* return address register */
    if (aug[0] == 'z') {
        buf_t a = {{0}, 0};
        for (const char *c = aug + 1; *c; c++) {
            if (*c == 'R') u8(&a, enc);
            if (*c == 'L') u8(&a, 0x1b);
            if (*c == 'P') { u8(&a, 0x9b); val(&a, 0x0b, 0x1234); }
        }
        uleb(x, a.n);
        put(x, a.b, a.n);
    }
    while (x->n % 8 != 4) u8(x, 0);
    set_len(x, 0);
    size_t fde = x->n;
    put(x, &z, 4);
    uint32_t cie_ptr = (uint32_t)(x->n);
    put(x, &cie_ptr, 4);
    val(x, enc, 0x400000);
    val(x, enc, range);
    if (aug[0] == 'z')
        uleb(x, 0);
    while (x->n % 8 != 0) u8(x, 0);
    set_len(x, fde);
    return fde;
}

struct eh_bases_ {
    void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct eh_bases_ *bases);

static uint64_t range_of(const char *aug, uint8_t enc, uint64_t range, int *rc)
{
    buf_t x;
    size_t fde = make(&x, aug, enc, range);
    uint64_t r = 0;
    *rc = hm__fde_range(x.b + fde, sizeof x.b, &r);
    return r;
}

int main(void)
{
    int rc;
    CHECK_EQ_U64(range_of("zR", 0x1b, 0x1234, &rc), 0x1234);       /* pcrel|sdata4: gcc, clang */
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_U64(range_of("zR", 0x04, 0x123456, &rc), 0x123456);   /* udata8 */
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_U64(range_of("zR", 0x00, 0x2345, &rc), 0x2345);       /* absptr */
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_U64(range_of("zR", 0x01, 300, &rc), 300);             /* uleb128 */
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_U64(range_of("zR", 0x02, 0x777, &rc), 0x777);         /* udata2 */
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_U64(range_of("zPLR", 0x1b, 0x99, &rc), 0x99);         /* personality and LSDA skipped */
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_U64(range_of("", 0x00, 0x4444, &rc), 0x4444);         /* no augmentation: absptr */
    CHECK_EQ_INT(rc, 0);

    /* Refused: unknown encodings and augmentations, omitted pointers. */
    range_of("zR", 0x07, 0x10, &rc);
    CHECK_EQ_INT(rc, -1);
    range_of("zR", 0xff, 0x10, &rc);
    CHECK_EQ_INT(rc, -1);
    range_of("zRX", 0x1b, 0x10, &rc);
    CHECK_EQ_INT(rc, -1);

    buf_t x;
    size_t fde = make(&x, "zR", 0x1b, 0x10);
    uint64_t r;
    /* A length past the limit, a CIE where an FDE was expected, a bad id. */
    CHECK_EQ_INT(hm__fde_range(x.b + fde, 8, &r), -1);
    CHECK_EQ_INT(hm__fde_range(x.b, sizeof x.b, &r), -1);
    x.b[4] = 1;
    CHECK_EQ_INT(hm__fde_range(x.b + fde, sizeof x.b, &r), -1);
    CHECK_EQ_INT(hm__fde_range(NULL, sizeof x.b, &r), -1);

    /* A record whose pc_range runs past its own end. */
    fde = make(&x, "zR", 0x04, 0x10);
    uint32_t shortlen = 4 + 8 + 4; /* CIE pointer, pc_begin, half a range */
    memcpy(x.b + fde, &shortlen, 4);
    CHECK_EQ_INT(hm__fde_range(x.b + fde, sizeof x.b, &r), -1);

    /* The 64-bit length form. */
    {
        buf_t y;
        size_t f = make(&y, "zR", 0x1b, 0x321);
        buf_t z;
        memset(&z, 0, sizeof z);
        put(&z, y.b, f);                            /* the CIE */
        uint32_t ext = 0xffffffffu;
        uint32_t body;
        memcpy(&body, y.b + f, 4);
        uint64_t len = body;
        put(&z, &ext, 4);
        put(&z, &len, 8);
        uint32_t cie_ptr = (uint32_t)z.n;
        put(&z, &cie_ptr, 4);
        put(&z, y.b + f + 8, body - 4);
        CHECK_EQ_INT(hm__fde_range(z.b + f, sizeof z.b, &r), 0);
        CHECK_EQ_U64(r, 0x321);
    }
    /* The FDE the unwinder finds for this function covers it. */
    {
        struct eh_bases_ b = {0};
        void *pc = (void *)(uintptr_t)&range_of;
        const uint8_t *f = _Unwind_Find_FDE((char *)pc + 1, &b);
        CHECK(f != NULL);
        if (f) {
            CHECK_EQ_INT(hm__fde_range(f, 1u << 20, &r), 0);
            CHECK(b.func == pc);
            CHECK(r > 1 && r < 4096);
        }
    }
    return check_done();
}
