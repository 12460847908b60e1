/* 64-bit Arm register context for the soft sampler's signal handler. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/ucontext.h>

#include "arch/arch.h"

void hm__arch_save_context(hm__soft_raw_t *r, const void *ucv)
{
    const ucontext_t *uc = ucv;
    memcpy(r->regs, uc->uc_mcontext.regs, 31 * sizeof r->regs[0]);
    r->regs[31] = uc->uc_mcontext.sp;
    r->regs[32] = uc->uc_mcontext.pc;
    /* The vector registers sit in a tagged record of __reserved; nothing on
     * Arm reads them (there is no soft decoding there). */
    r->has_vec = 0;
}
