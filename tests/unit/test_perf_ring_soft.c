#define _GNU_SOURCE
/* Soft-sampler attribution on hand-assembled x86-64: look-back within the
 * block, undoing constant register increments, at-PC and gather lanes. */
#include <sys/ucontext.h>

#include "check.h"
#include "hetmem/trace.h"
#include "record/record_int.h"

/* 0: mov rax,[rdi+rcx*8]   4: add rcx,1   8: cmp rcx,rdx   11: jne 0
 * 13: mov [rsi+8],rax      17: imul rcx,rdx 21: mov rbx,[rcx] 24: ret */
static const uint8_t loop[] = {0x48, 0x8b, 0x04, 0xcf, 0x48, 0x83, 0xc1, 0x01, 0x48, 0x39, 0xd1, 0x75, 0xf3,
                               0x48, 0x89, 0x46, 0x08, 0x48, 0x0f, 0xaf, 0xca, 0x48, 0x8b, 0x19, 0xc3};
#define BASE 0x400000ull

static int run(uint64_t pc_off, uint64_t *addr, uint64_t *ip, int *acc, int *how)
{
    hm__soft_raw_t r = {0};
    r.gregs[REG_RIP] = BASE + pc_off;
    r.gregs[REG_RDI] = 0x10000;
    r.gregs[REG_RCX] = 5;
    r.gregs[REG_RDX] = 100;
    r.gregs[REG_RSI] = 0x20000;
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
    r.gregs[REG_RIP] = BASE + 6;
    r.gregs[REG_RDI] = 0x50000;
    r.has_xmm = 1;
    r.xmm_lo[1] = 0x0000000700000003ull; /* lanes 3, 7 */
    CHECK_EQ_INT(hm__soft_resolve_code(g, sizeof g, BASE, &r, &a, &ip, &acc, &how), 1);
    CHECK_EQ_U64(a, 0x50000 + 3 * 4);
    CHECK_EQ_INT(acc, HM_ACCESS_LOAD);
    r.has_xmm = 0;
    CHECK_EQ_INT(hm__soft_resolve_code(g, sizeof g, BASE, &r, &a, &ip, &acc, &how), 0);
    return check_done();
}
