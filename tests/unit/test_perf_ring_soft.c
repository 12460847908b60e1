#define _GNU_SOURCE
/* Soft-sampler attribution on hand-assembled x86-64: look-back within the
 * block, undoing constant and register-register increments (add, sub,
 * lea), at-PC and gather lanes, and the preference for the access of a
 * block the prefetcher cannot follow (indirect, or a stride of a line). */
#include <math.h>
#include <stdio.h>
#include <sys/ucontext.h>

#include "check.h"
#include "hetmem/trace.h"
#include "record/record_int.h"

#if HM_ARCH_SOFT_DECODE
/* 0: mov rax,[rdi+rcx*8]   4: add rcx,1   8: cmp rcx,rdx   11: jne 0
 * 13: mov [rsi+8],rax      17: imul rcx,rdx 21: mov rbx,[rcx] 24: ret */
static const uint8_t loop[] = {0x48, 0x8b, 0x04, 0xcf, 0x48, 0x83, 0xc1, 0x01, 0x48, 0x39, 0xd1, 0x75, 0xf3,
                               0x48, 0x89, 0x46, 0x08, 0x48, 0x0f, 0xaf, 0xca, 0x48, 0x8b, 0x19, 0xc3};
#define BASE 0x400000ull

static int run(uint64_t pc_off, uint64_t *addr, uint64_t *ip, int *acc, int *how)
{
    hm__soft_raw_t r = {0};
    r.regs[REG_RIP] = BASE + pc_off;
    r.regs[REG_RDI] = 0x10000;
    r.regs[REG_RCX] = 5;
    r.regs[REG_RDX] = 100;
    r.regs[REG_RSI] = 0x20000;
    return hm__soft_resolve_code(loop, sizeof loop, BASE, &r, addr, ip, acc, how);
}

/* Resolves the sample r (at r.regs[REG_RIP]) n times with times 0..n-1
 * and counts how many landed on each of ips; each must land on one of
 * them, at the address want[] gives for it. */
static void draws(const uint8_t *code, size_t len, hm__soft_raw_t r, int n, const uint64_t *ips,
                  const uint64_t *want, int nips, int *got)
{
    for (int j = 0; j < nips; j++)
        got[j] = 0;
    for (int i = 0; i < n; i++) {
        uint64_t a = 0, ip = 0;
        int acc, how;
        r.time = (uint64_t)i;
        CHECK_EQ_INT(hm__soft_resolve_code(code, len, BASE, &r, &a, &ip, &acc, &how), 1);
        int j = 0;
        while (j < nips && ips[j] != ip)
            j++;
        CHECK(j < nips);
        if (j < nips) {
            CHECK_EQ_U64(a, want[j]);
            got[j]++;
        }
    }
}

int main(void)
{
    uint64_t a = 0, ip = 0;
    int acc = -1, how = -1;
    /* PC on add: the load just before, registers intact. */
    CHECK_EQ_INT(run(4, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x10000 + 5 * 8);
    CHECK_EQ_U64(ip, BASE);
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    CHECK_EQ_INT(how, 1);
    /* PC on cmp: rcx was incremented since the load; the decoder undoes it. */
    CHECK_EQ_INT(run(8, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x10000 + 4 * 8);
    CHECK_EQ_INT(how, 1);
    /* PC on the load itself (block leader): taken as is. */
    CHECK_EQ_INT(run(0, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x10000 + 5 * 8);
    CHECK_EQ_INT(how, 2);
    /* PC on imul after the store, in the block the loop falls out of: the
     * store stores rax, which the loop's load produced, so it retired only
     * once that load had (step 4c): the sample is the loop's, its one load
     * as it ran in the last iteration (rcx 4 once the add is undone). */
    CHECK_EQ_INT(run(17, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x10000 + 4 * 8);
    CHECK_EQ_U64(ip, BASE);
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    CHECK_EQ_INT(how, 1);
    /* PC on ret: mov rbx,[rcx] is behind, but imul clobbered... no: imul is
     * before the load, so rcx at the load is the saved rcx. */
    CHECK_EQ_INT(run(24, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 5);
    CHECK_EQ_U64(ip, BASE + 21);
    /* A PC inside an instruction is rejected, not guessed. */
    CHECK_EQ_INT(run(2, &a, &ip, &acc, &how), 0);

    /* vpgatherdd ymm0,[rdi+ymm1*4],ymm2 (c4 e2 75 90 04 8f); lane 0 of ymm1. */
    static const uint8_t g[] = {0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x8f, 0xc3};
    hm__soft_raw_t r = {0};
    r.regs[REG_RIP] = BASE + 6;
    r.regs[REG_RDI] = 0x50000;
    r.has_vec = 1;
    r.vec_lo[1] = 0x0000000700000003ull; /* lanes 3, 7 */
    CHECK_EQ_INT(hm__soft_resolve_code(g, sizeof g, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x50000 + 3 * 4);
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    r.has_vec = 0;
    CHECK_EQ_INT(hm__soft_resolve_code(g, sizeof g, BASE, &r, &a, &ip, &acc, &how), 0);

    /* A multi-byte nop (code alignment padding) names a memory operand but
     * touches nothing: the sample is the load's behind it.
     *  0: mov rax,[rdi]  3: nop word [rax+rax*1+0]  9: ret */
    static const uint8_t np[] = {0x48, 0x8b, 0x07, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RIP] = BASE + 9;
    r.regs[REG_RDI] = 0x70000;
    r.regs[REG_RAX] = 0x123;
    CHECK_EQ_INT(hm__soft_resolve_code(np, sizeof np, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x70000);
    CHECK_EQ_U64(ip, BASE);

    /* Strided store (transpose, B[j*n+i] = A[i*n+j]), the pointer stepped by
     * a register:
     *  0: movsd xmm0,[rsi+rax*8]  5: movsd [r11],xmm0  10: add r11,rbx
     * 13: add rax,1  17: cmp rdx,rax  20: jne 0  22: ret
     * The block is a loop: wherever the PC is in it, the sample goes to the
     * load of A (8 bytes per iteration: 8/64 of a line) or the store to B
     * (rbx = 64 KiB per iteration: a whole line), 1:8. Either way its
     * address is the one of this iteration: the store's pointer is the
     * saved r11 minus the saved rbx behind the add, the saved r11 on the
     * store itself. */
    static const uint8_t tr[] = {0xf2, 0x0f, 0x10, 0x04, 0xc6, 0xf2, 0x41, 0x0f, 0x11, 0x03, 0x49, 0x01,
                                 0xdb, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xc2, 0x75, 0xea, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RSI] = 0x100000;
    r.regs[REG_RAX] = 9;
    r.regs[REG_R11] = 0x900000 + 8 * 8192;
    r.regs[REG_RBX] = 8 * 8192;
    static const struct {
        uint64_t pc, a, b; /* PC; the addresses of A and B the accesses behind it (or on it) used */
    } at[] = {{5, 0x100000 + 9 * 8, 0x900000 + 8 * 8192},
              {10, 0x100000 + 9 * 8, 0x900000 + 8 * 8192},
              {13, 0x100000 + 9 * 8, 0x900000},
              {17, 0x100000 + 8 * 8, 0x900000}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        r.regs[REG_RIP] = BASE + at[i].pc;
        const uint64_t ips[] = {BASE, BASE + 5}, want[] = {at[i].a, at[i].b};
        int got[2];
        draws(tr, sizeof tr, r, 4000, ips, want, 2, got);
        CHECK(fabs(got[1] / 4000.0 - 8.0 / 9) <= 0.03);
    }
    /* The same loop with an 8-byte store step (a copy, not a transpose):
     * both accesses bring 1/8 of a line, one sample in two each. */
    r.regs[REG_RBX] = 8;
    r.regs[REG_R11] = 0x900000 + 8;
    r.regs[REG_RIP] = BASE + 13;
    {
        const uint64_t ips[] = {BASE, BASE + 5}, want[] = {0x100000 + 9 * 8, 0x900000};
        int got[2];
        draws(tr, sizeof tr, r, 4000, ips, want, 2, got);
        CHECK(fabs(got[0] / 4000.0 - 0.5) <= 0.03);
    }
    /* The same sample twice is charged the same way. */
    r.time = 12345;
    CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
    uint64_t ip1 = ip;
    CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(ip, ip1);
    /* After a page fault, the PC is the faulting store the kernel restarts
     * (first touch of B): the sample is the store's, at the saved r11,
     * whatever the draw. */
    r.regs[REG_RBX] = 8 * 8192;
    r.regs[REG_R11] = 0x900000 + 8 * 8192;
    r.regs[REG_RIP] = BASE + 5;
    r.faulted = 1;
    for (r.time = 0; r.time < 100; r.time++) {
        CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x900000 + 8 * 8192);
        CHECK_EQ_U64(ip, BASE + 5);
        CHECK_EQ_INT(acc, HM_ACCESS_STORE);
        CHECK_EQ_INT(how, 2);
    }
    r.faulted = 0;

    /* lea r11,[r11+rbx*8+16] and sub r10,rcx are undone from the saved rbx
     * and rcx; add rcx,rcx (a register doubled) cannot be and clobbers.
     *  0: movsd [r11],xmm0  5: lea r11,[r11+rbx*8+0x10]  10: sub r10,rcx
     * 13: mov [r10],rax  16: add rcx,rcx  19: cmp rdx,rax  22: jne 0
     * A loop again. With rcx = 0 the store to [r10] does not move (no line
     * per iteration) and every sample is the store to [r11], whose pointer
     * the lea stepped by 3 * 8 + 16 bytes. */
    static const uint8_t le[] = {0xf2, 0x41, 0x0f, 0x11, 0x03, 0x4d, 0x8d, 0x5c, 0xdb, 0x10, 0x49, 0x29,
                                 0xca, 0x4d, 0x89, 0x02, 0x48, 0x01, 0xc9, 0x48, 0x39, 0xc2, 0x75, 0xe8};
    memset(&r, 0, sizeof r);
    r.regs[REG_R11] = 0x700000 + 3 * 8 + 16;
    r.regs[REG_RBX] = 3;
    r.regs[REG_R10] = 0x800000;
    r.regs[REG_RCX] = 0;
    for (r.time = 0; r.time < 50; r.time++) {
        r.regs[REG_RIP] = BASE + 13;
        CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x700000);
        CHECK_EQ_U64(ip, BASE);
    }
    /* With the lea's step at 0 (rbx = -2) and rcx = 0x40, every sample is
     * the store to [r10]: on the add rcx,rcx, r10 unchanged since; on the
     * cmp, add rcx,rcx has clobbered rcx, not r10; on the leader, ahead of
     * the PC, its address replayed from the saved r10 (r10 - rcx). */
    r.regs[REG_RBX] = (uint64_t)-2;
    r.regs[REG_R11] = 0x700000;
    r.regs[REG_RCX] = 0x40;
    for (r.time = 0; r.time < 50; r.time++) {
        r.regs[REG_RIP] = BASE + 16;
        CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x800000);
        CHECK_EQ_U64(ip, BASE + 13);
        r.regs[REG_RIP] = BASE + 19;
        CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x800000);
        r.regs[REG_RIP] = BASE;
        CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x800000 - 0x40);
        CHECK_EQ_U64(ip, BASE + 13);
        CHECK_EQ_INT(how, 3);
    }

    /* Gather (SpMV inner loop, s += val[k] * x[col[k]], as GCC 12 -O2
     * builds it):
     *  0: mov edx,[rbp+rax*4]  4: movsd xmm0,[r13+rdx*8]  11: mulsd xmm0,[r12+rax*8]
     * 17: add rax,1  21: addsd xmm1,xmm0  25: cmp rax,rdi  28: jne 0
     * x's index comes from the load of col: a line per iteration, against
     * 8/64 for val and 4/64 for col, wherever the PC lands in the loop. */
    static const uint8_t ga[] = {0x8b, 0x54, 0x85, 0x00, 0xf2, 0x41, 0x0f, 0x10, 0x44, 0xd5, 0x00,
                                 0xf2, 0x41, 0x0f, 0x59, 0x04, 0xc4, 0x48, 0x83, 0xc0, 0x01, 0xf2,
                                 0x0f, 0x58, 0xc8, 0x48, 0x39, 0xf8, 0x75, 0xe2, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RBP] = 0x100000;
    r.regs[REG_R12] = 0x200000;
    r.regs[REG_R13] = 0x300000;
    r.regs[REG_RAX] = 40;
    r.regs[REG_RDX] = 777;
    /* PC 0, the loop head after a taken back edge: the load of col at the
     * PC has not run, so x's address is the previous iteration's (edx
     * still holds that col[k]), rebuilt around the back edge. */
    static const uint64_t pcs[] = {0, 4, 11, 17, 21, 25, 28};
    for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++) {
        r.regs[REG_RIP] = BASE + pcs[i];
        int k = pcs[i] > 17 ? 39 : 40; /* rax as the accesses saw it */
        const uint64_t ips[] = {BASE, BASE + 4, BASE + 11},
                       want[] = {0x100000 + 4 * (uint64_t)k, 0x300000 + 777 * 8, 0x200000 + 8 * (uint64_t)k};
        int got[3];
        draws(ga, sizeof ga, r, 4000, ips, want, 3, got);
        CHECK(fabs(got[1] / 4000.0 - 64.0 / 76) <= 0.03);
        CHECK(fabs(got[2] / 4000.0 - 8.0 / 76) <= 0.03);
    }
    /* After the loop (step 4c). The same loop falling out into the update
     * of y[i] (as GCC 12 -O2 builds y[i] += s after the loop over k):
     * 30: addsd xmm1,[rsi+r9]  36: lea rax,[rdi+8]  40: movsd [rsi+r9],xmm1
     * 46: add r9,8  50: ret
     * The addsd waits for xmm1, the loop's sum, and the store for the
     * addsd: both retire only after the loop's last loads. A sample after
     * either, or on the block's first instruction (the closest access
     * behind it is then the loop's), goes to the loop's draw, its accesses
     * as they ran in the last iteration (rax 39 once the add is undone).
     * Once the lea has overwritten rax (PC 40, 46), only x can be rebuilt. */
    static const uint8_t gx[] = {0x8b, 0x54, 0x85, 0x00, 0xf2, 0x41, 0x0f, 0x10, 0x44, 0xd5, 0x00, 0xf2, 0x41,
                                 0x0f, 0x59, 0x04, 0xc4, 0x48, 0x83, 0xc0, 0x01, 0xf2, 0x0f, 0x58, 0xc8, 0x48,
                                 0x39, 0xf8, 0x75, 0xe2, 0xf2, 0x42, 0x0f, 0x58, 0x0c, 0x0e, 0x48, 0x8d, 0x47,
                                 0x08, 0xf2, 0x42, 0x0f, 0x11, 0x0c, 0x0e, 0x49, 0x83, 0xc1, 0x08, 0xc3};
    r.regs[REG_RSI] = 0x400000;
    r.regs[REG_R9] = 0x80;
    r.regs[REG_RDI] = 40;
    {
        const uint64_t ips[] = {BASE, BASE + 4, BASE + 11},
                       want[] = {0x100000 + 4 * 39, 0x300000 + 777 * 8, 0x200000 + 8 * 39};
        static const uint64_t xpcs[] = {30, 36};
        for (size_t i = 0; i < sizeof xpcs / sizeof xpcs[0]; i++) {
            int got[3];
            r.regs[REG_RIP] = BASE + xpcs[i];
            draws(gx, sizeof gx, r, 4000, ips, want, 3, got);
            CHECK(fabs(got[1] / 4000.0 - 64.0 / 76) <= 0.03);
            CHECK(fabs(got[2] / 4000.0 - 8.0 / 76) <= 0.03);
        }
        int got[3];
        r.regs[REG_RAX] = 48; /* rdi + 8 */
        r.regs[REG_RIP] = BASE + 40;
        draws(gx, sizeof gx, r, 200, ips, want, 3, got);
        CHECK_EQ_INT(got[1], 200);
        r.regs[REG_RIP] = BASE + 46;
        draws(gx, sizeof gx, r, 200, ips, want, 3, got);
        CHECK_EQ_INT(got[1], 200);
        r.regs[REG_RAX] = 40;
    }
    /* The same loop falling out into a load of y[i] that the loop does not
     * feed: 30: movsd xmm2,[rsi+r9]  36: add r9,8  40: addsd xmm2,xmm1  44: ret
     * After the load (PC 36, 40) the sample is the load's: its address and
     * its value owe nothing to the loop. After the addsd, which takes the
     * loop's sum (PC 44), it is the loop's. */
    static const uint8_t gy[] = {0x8b, 0x54, 0x85, 0x00, 0xf2, 0x41, 0x0f, 0x10, 0x44, 0xd5, 0x00, 0xf2,
                                 0x41, 0x0f, 0x59, 0x04, 0xc4, 0x48, 0x83, 0xc0, 0x01, 0xf2, 0x0f, 0x58,
                                 0xc8, 0x48, 0x39, 0xf8, 0x75, 0xe2, 0xf2, 0x42, 0x0f, 0x10, 0x14, 0x0e,
                                 0x49, 0x83, 0xc1, 0x08, 0xf2, 0x0f, 0x58, 0xd1, 0xc3};
    for (r.time = 0; r.time < 50; r.time++) {
        r.regs[REG_R9] = 0x80;
        r.regs[REG_RIP] = BASE + 36;
        CHECK_EQ_INT(hm__soft_resolve_code(gy, sizeof gy, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x400080);
        CHECK_EQ_U64(ip, BASE + 30);
        CHECK_EQ_INT(how, 1);
        r.regs[REG_R9] = 0x88;
        r.regs[REG_RIP] = BASE + 40;
        CHECK_EQ_INT(hm__soft_resolve_code(gy, sizeof gy, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x400080);
        CHECK_EQ_U64(ip, BASE + 30);
    }
    {
        const uint64_t ips[] = {BASE, BASE + 4, BASE + 11},
                       want[] = {0x100000 + 4 * 39, 0x300000 + 777 * 8, 0x200000 + 8 * 39};
        int got[3];
        r.regs[REG_RIP] = BASE + 44;
        draws(gy, sizeof gy, r, 4000, ips, want, 3, got);
        CHECK(fabs(got[1] / 4000.0 - 64.0 / 76) <= 0.03);
    }
    /* After a pointer chase, the next node's field is read through the
     * pointer the loop loaded: a dependent miss of its own, which keeps the
     * sample.  0: mov rax,[rax]  3: dec rcx  6: jne 0  8: mov rdx,[rax+8]  12: ret */
    static const uint8_t pc[] = {0x48, 0x8b, 0x00, 0x48, 0xff, 0xc9, 0x75, 0xf8, 0x48, 0x8b, 0x50, 0x08, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RAX] = 0x540000;
    r.regs[REG_RIP] = BASE + 12;
    for (r.time = 0; r.time < 50; r.time++) {
        CHECK_EQ_INT(hm__soft_resolve_code(pc, sizeof pc, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x540008);
        CHECK_EQ_U64(ip, BASE + 8);
    }
    /* The transpose loop falling out into a block without an access:
     *  ... 20: jne 0  22: add r9,8  26: ret
     * With the PC on the ret the closest access behind it is the loop's: the
     * loop's draw, 1:8 between A and B, as they ran in the last iteration
     * (no access lies at or after the PC in the block, so the sample had
     * no address). */
    static const uint8_t tx[] = {0xf2, 0x0f, 0x10, 0x04, 0xc6, 0xf2, 0x41, 0x0f, 0x11, 0x03, 0x49, 0x01, 0xdb, 0x48,
                                 0x83, 0xc0, 0x01, 0x48, 0x39, 0xc2, 0x75, 0xea, 0x49, 0x83, 0xc1, 0x08, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RSI] = 0x100000;
    r.regs[REG_RAX] = 9;
    r.regs[REG_RDX] = 9;
    r.regs[REG_R11] = 0x900000 + 8 * 8192;
    r.regs[REG_RBX] = 8 * 8192;
    r.regs[REG_RIP] = BASE + 26;
    {
        const uint64_t ips[] = {BASE, BASE + 5}, want[] = {0x100000 + 8 * 8, 0x900000};
        int got[2];
        draws(tx, sizeof tx, r, 4000, ips, want, 2, got);
        CHECK(fabs(got[1] / 4000.0 - 8.0 / 9) <= 0.03);
    }
    /* The same with the sum zeroed (pxor xmm1,xmm1: a zero idiom, it reads
     * nothing) after a load of y[i] in the gather's exit block:
     * 30: movsd xmm2,[rsi+r9]  36: pxor xmm1,xmm1  40: ret
     * nothing between the load and the PC waits on the loop. */
    static const uint8_t gz[] = {0x8b, 0x54, 0x85, 0x00, 0xf2, 0x41, 0x0f, 0x10, 0x44, 0xd5, 0x00, 0xf2,
                                 0x41, 0x0f, 0x59, 0x04, 0xc4, 0x48, 0x83, 0xc0, 0x01, 0xf2, 0x0f, 0x58,
                                 0xc8, 0x48, 0x39, 0xf8, 0x75, 0xe2, 0xf2, 0x42, 0x0f, 0x10, 0x14, 0x0e,
                                 0x66, 0x0f, 0xef, 0xc9, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RSI] = 0x400000;
    r.regs[REG_R9] = 0x80;
    r.regs[REG_RIP] = BASE + 40;
    for (r.time = 0; r.time < 50; r.time++) {
        CHECK_EQ_INT(hm__soft_resolve_code(gz, sizeof gz, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x400080);
        CHECK_EQ_U64(ip, BASE + 30);
    }
    memset(&r, 0, sizeof r);
    r.regs[REG_RBP] = 0x100000;
    r.regs[REG_R12] = 0x200000;
    r.regs[REG_R13] = 0x300000;
    r.regs[REG_RAX] = 40;
    r.regs[REG_RDX] = 777;
    /* The same three accesses followed by a ret, no loop: the closest
     * access behind the PC (val) would be charged, but x, indirect, lies
     * behind it in the block and is charged instead. */
    static const uint8_t gn[] = {0x8b, 0x54, 0x85, 0x00, 0xf2, 0x41, 0x0f, 0x10, 0x44, 0xd5,
                                 0x00, 0xf2, 0x41, 0x0f, 0x59, 0x04, 0xc4, 0xc3};
    r.regs[REG_RIP] = BASE + 17;
    CHECK_EQ_INT(hm__soft_resolve_code(gn, sizeof gn, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x300000 + 777 * 8);
    CHECK_EQ_U64(ip, BASE + 4);
    CHECK_EQ_INT(how, 1);
    /* A column walk through row pointers (A[i][j] over i, as GCC 12 -O2
     * builds it from double **A):
     *  0: mov rax,[rdi]  3: add rdi,8  7: addsd xmm0,[rax+rdx]  12: cmp rsi,rdi  15: jne 0
     * The element's base is loaded anew each iteration and its index is
     * fixed: a line per iteration, against 8/64 for the row pointers. */
    static const uint8_t rp[] = {0x48, 0x8b, 0x07, 0x48, 0x83, 0xc7, 0x08, 0xf2, 0x0f,
                                 0x58, 0x04, 0x10, 0x48, 0x39, 0xfe, 0x75, 0xef, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RDI] = 0x500000 + 8 * 10;
    r.regs[REG_RAX] = 0x600000;
    r.regs[REG_RDX] = 0x40;
    r.regs[REG_RIP] = BASE + 12;
    {
        const uint64_t ips[] = {BASE, BASE + 7}, want[] = {0x500000 + 8 * 9, 0x600040};
        int got[2];
        draws(rp, sizeof rp, r, 4000, ips, want, 2, got);
        CHECK(fabs(got[1] / 4000.0 - 64.0 / 72) <= 0.03);
    }
    /* A block that ends in a call to its own start is not a loop: two
     * sequential loads, the closest behind the PC is charged every time.
     *  0: mov rax,[rdi]  3: mov rcx,[rsi]  6: add rsi,8  10: add rdi,8  14: call 0  19: ret */
    static const uint8_t cl[] = {0x48, 0x8b, 0x07, 0x48, 0x8b, 0x0e, 0x48, 0x83, 0xc6, 0x08,
                                 0x48, 0x83, 0xc7, 0x08, 0xe8, 0xed, 0xff, 0xff, 0xff, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RDI] = 0x500008;
    r.regs[REG_RSI] = 0x700008;
    r.regs[REG_RIP] = BASE + 14;
    {
        const uint64_t ips[] = {BASE + 3}, want[] = {0x700000};
        int got[1];
        draws(cl, sizeof cl, r, 200, ips, want, 1, got);
        CHECK_EQ_INT(got[0], 200);
    }
    /* A straight-line block longer than the loop scan (a load, then 300
     * addsd): the closest access lies before where the scan stops; it is
     * charged as is (this read out of bounds once). */
    {
        enum { N = 300 };
        uint8_t lb[4 + 4 * N + 1];
        memcpy(lb, (const uint8_t[]){0xf2, 0x0f, 0x10, 0x07}, 4); /* movsd xmm0,[rdi] */
        for (int i = 0; i < N; i++)
            memcpy(lb + 4 + 4 * i, (const uint8_t[]){0xf2, 0x0f, 0x58, 0xc0}, 4); /* addsd xmm0,xmm0 */
        lb[4 + 4 * N] = 0xc3;
        memset(&r, 0, sizeof r);
        r.regs[REG_RDI] = 0x800000;
        r.regs[REG_RIP] = BASE + 4 + 4 * (N - 1);
        CHECK_EQ_INT(hm__soft_resolve_code(lb, sizeof lb, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x800000);
        CHECK_EQ_U64(ip, BASE);
    }
    return check_done();
}
#else
int main(void)
{
    printf("skip: the soft sampler decodes x86-64 only\n");
    return 77;
}
#endif
