/* A64 basic-block lengths for libhetmem_inst on 64-bit Arm. A64 has fixed
 * 4-byte instructions, so finding a block's end needs only the branch
 * encodings; this is plain C on words and builds (and is tested) on any
 * host. */
#include "arch/arch.h"

static int64_t sext(uint64_t v, int bits) { return (int64_t)(v << (64 - bits)) >> (64 - bits); }

/* The instruction writes x0, where the hooks take their address argument:
 * mov x0, xN (orr), add/sub x0, xN, #imm, add x0, xN, xM. */
static int writes_x0(uint32_t w)
{
    return (w & 0xffe0ffffu) == 0xaa0003e0u || (w & 0xff80001fu) == 0x91000000u ||
           (w & 0xff80001fu) == 0xd1000000u || (w & 0xff20001fu) == 0x8b000000u;
}

uint32_t hm__a64_block_insns(const uint32_t *words, size_t n, uintptr_t pc, int (*is_hook)(uintptr_t))
{
    uint32_t count = 0;
    int prev_x0 = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t w = words[k];
        uintptr_t at = pc + 4 * k;
        if ((w & 0xfc000000u) == 0x94000000u) { /* bl imm26 */
            uintptr_t target = at + (uintptr_t)(sext(w & 0x03ffffffu, 26) * 4);
            int h = is_hook ? is_hook(target) : 0;
            if (h == 2) /* the next block's coverage call */
                return count;
            if (h) {
                if (prev_x0)
                    count--; /* the hook's argument set-up */
                prev_x0 = 0;
                continue;
            }
            count++; /* an ordinary call does not end the block */
            prev_x0 = 0;
            continue;
        }
        count++;
        if ((w & 0xfffffc1fu) == 0xd63f0000u) { /* blr: an indirect call */
            prev_x0 = 0;
            continue;
        }
        if ((w & 0x7c000000u) == 0x14000000u ||  /* b */
            (w & 0xff000010u) == 0x54000000u ||  /* b.cond */
            (w & 0x7e000000u) == 0x34000000u ||  /* cbz, cbnz */
            (w & 0x7e000000u) == 0x36000000u ||  /* tbz, tbnz */
            (w & 0xfe000000u) == 0xd6000000u ||  /* br, ret, eret */
            (w & 0xff000000u) == 0xd4000000u ||  /* svc, hvc, brk, hlt */
            (w & 0xffff0000u) == 0)              /* udf */
            return count;
        prev_x0 = writes_x0(w);
    }
    return count;
}
