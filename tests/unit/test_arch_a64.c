/* A64 basic-block lengths (libhetmem_inst on 64-bit Arm), on hand-encoded
 * words: this decoder is plain C and runs on any host. */
#include "arch/arch.h"
#include "check.h"

#define PC 0x10000u
#define ACCESS_HOOK 0x20000u
#define COV_HOOK 0x30000u

static int is_hook(uintptr_t a) { return a == COV_HOOK ? 2 : a == ACCESS_HOOK ? 1 : 0; }

/* bl from word k of a block at PC to target */
static uint32_t bl(unsigned k, uintptr_t target)
{
    int64_t d = ((int64_t)target - (int64_t)(PC + 4 * k)) / 4;
    return 0x94000000u | ((uint32_t)d & 0x03ffffffu);
}

enum {
    LDR = 0xf9400001u,    /* ldr x1, [x0] */
    ADD8 = 0x91002000u,   /* add x0, x0, #8 */
    MOVX0 = 0xaa1303e0u,  /* mov x0, x19 */
    MOVX1 = 0xaa1303e1u,  /* mov x1, x19 */
    BNE = 0x54000001u,    /* b.ne . */
    CBZ = 0xb4000000u,    /* cbz x0, . */
    TBZ = 0x36000000u,    /* tbz w0, #0, . */
    B = 0x14000000u,      /* b . */
    RET = 0xd65f03c0u,
    BR = 0xd61f0020u,     /* br x1 */
    BLR = 0xd63f0020u,    /* blr x1 */
    SVC = 0xd4000001u,
    NOP = 0xd503201fu,
};

int main(void)
{
    uint32_t a[] = {LDR, ADD8, LDR, BNE, LDR};
    CHECK_EQ_INT(hm__a64_block_insns(a, 5, PC, is_hook), 4);

    /* The access hook and its argument set-up are instrumentation. */
    uint32_t b[] = {MOVX0, bl(1, ACCESS_HOOK), LDR, RET};
    CHECK_EQ_INT(hm__a64_block_insns(b, 4, PC, is_hook), 2);
    /* ... but a write to another register before the hook is the program's. */
    uint32_t b2[] = {MOVX1, bl(1, ACCESS_HOOK), LDR, RET};
    CHECK_EQ_INT(hm__a64_block_insns(b2, 4, PC, is_hook), 3);

    /* The next block's coverage call ends this one, uncounted. */
    uint32_t c[] = {LDR, NOP, bl(2, COV_HOOK), LDR};
    CHECK_EQ_INT(hm__a64_block_insns(c, 4, PC, is_hook), 2);

    /* Ordinary calls, direct (backwards too) and indirect, do not end it. */
    uint32_t d[] = {bl(0, PC - 64), BLR, LDR, RET};
    CHECK_EQ_INT(hm__a64_block_insns(d, 4, PC, is_hook), 4);

    /* Every branch class ends a block and is counted. */
    const uint32_t ends[] = {BNE, CBZ, TBZ, B, RET, BR, SVC, 0 /* udf */};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        uint32_t e[] = {NOP, ends[i], LDR, LDR};
        CHECK_EQ_INT(hm__a64_block_insns(e, 4, PC, is_hook), 2);
    }

    /* The bound holds when no branch comes. */
    uint32_t f[] = {LDR, LDR, LDR};
    CHECK_EQ_INT(hm__a64_block_insns(f, 3, PC, is_hook), 3);
    CHECK_EQ_INT(hm__a64_block_insns(f, 0, PC, is_hook), 0);
    return check_done();
}
