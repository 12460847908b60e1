#define _GNU_SOURCE
/* Soft-sampler attribution on hand-assembled x86-64: look-back within the
 * block, undoing constant and register-register increments (add, sub,
 * lea), at-PC and gather lanes. */
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
    /* PC on imul after the store (new block after jne): store found behind. */
    CHECK_EQ_INT(run(17, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x20008);
    CHECK_EQ_INT(acc, HM_ACCESS_STORE);
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

    /* Strided store (transpose, B[j*n+i] = A[i*n+j]), the pointer stepped by
     * a register:
     *  0: movsd xmm0,[rsi+rax*8]  5: movsd [r11],xmm0  10: add r11,rbx
     * 13: add rax,1  17: cmp rdx,rax  20: jne 0  22: ret
     * A sample on the add rax or the cmp is charged to the store, whose
     * pointer is the saved r11 minus the saved rbx. */
    static const uint8_t tr[] = {0xf2, 0x0f, 0x10, 0x04, 0xc6, 0xf2, 0x41, 0x0f, 0x11, 0x03, 0x49, 0x01,
                                 0xdb, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x39, 0xc2, 0x75, 0xea, 0xc3};
    memset(&r, 0, sizeof r);
    r.regs[REG_RSI] = 0x100000;
    r.regs[REG_RAX] = 9;
    r.regs[REG_R11] = 0x900000 + 8 * 8192;
    r.regs[REG_RBX] = 8 * 8192;
    for (uint64_t pc = 13; pc <= 17; pc += 4) {
        r.regs[REG_RIP] = BASE + pc;
        CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
        CHECK_EQ_U64(a, 0x900000);
        CHECK_EQ_U64(ip, BASE + 5);
        CHECK_EQ_INT(acc, HM_ACCESS_STORE);
    }
    /* PC on the store itself. Without a page fault since the last sample,
     * the timer landed after the load before it (the load stalled). After a
     * page fault, the PC is the faulting store the kernel restarts (first
     * touch of B): the sample is the store's, at the saved r11. */
    r.regs[REG_RIP] = BASE + 5;
    CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x100000 + 9 * 8);
    CHECK_EQ_U64(ip, BASE);
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    r.faulted = 1;
    CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x900000 + 8 * 8192);
    CHECK_EQ_U64(ip, BASE + 5);
    CHECK_EQ_INT(acc, HM_ACCESS_STORE);
    CHECK_EQ_INT(how, 2);
    /* A fault does not change a sample whose PC has no data access: the add
     * after the store still gives the store. */
    r.regs[REG_RIP] = BASE + 13;
    CHECK_EQ_INT(hm__soft_resolve_code(tr, sizeof tr, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x900000);
    CHECK_EQ_U64(ip, BASE + 5);
    r.faulted = 0;

    /* lea r11,[r11+rbx*8+16] and sub r10,rcx are undone from the saved rbx
     * and rcx; add rcx,rcx (a register doubled) cannot be and clobbers.
     *  0: movsd [r11],xmm0  5: lea r11,[r11+rbx*8+0x10]  10: sub r10,rcx
     * 13: mov [r10],rax  16: add rcx,rcx  19: cmp rdx,rax  22: jne 0 */
    static const uint8_t le[] = {0xf2, 0x41, 0x0f, 0x11, 0x03, 0x4d, 0x8d, 0x5c, 0xdb, 0x10, 0x49, 0x29,
                                 0xca, 0x4d, 0x89, 0x02, 0x48, 0x01, 0xc9, 0x48, 0x39, 0xc2, 0x75, 0xe8};
    memset(&r, 0, sizeof r);
    r.regs[REG_R11] = 0x700000 + 3 * 8 + 16;
    r.regs[REG_RBX] = 3;
    r.regs[REG_R10] = 0x800000;
    r.regs[REG_RCX] = 0x40;
    r.regs[REG_RIP] = BASE + 13; /* on the store to [r10]: nothing behind but the lea'd store */
    CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x700000);
    CHECK_EQ_U64(ip, BASE);
    r.regs[REG_RIP] = BASE + 16; /* behind: mov [r10],rax at 13, r10 unchanged since */
    CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x800000);
    CHECK_EQ_U64(ip, BASE + 13);
    /* On the cmp: add rcx,rcx clobbers rcx (it cannot be undone), not r10,
     * so the store at 13 is still found. */
    r.regs[REG_RIP] = BASE + 19;
    CHECK_EQ_INT(hm__soft_resolve_code(le, sizeof le, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x800000);
    return check_done();
}
#else
int main(void)
{
    printf("skip: the soft sampler decodes x86-64 only\n");
    return 77;
}
#endif
