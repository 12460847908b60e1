/* x86-64 register context for the soft sampler's signal handler. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/ucontext.h>

#include "arch/arch.h"

_Static_assert(sizeof(((hm__soft_raw_t *)0)->regs) == sizeof(((mcontext_t *)0)->gregs),
               "regs mirrors the ucontext gregs");
_Static_assert(HM__ARCH_REG_PC == REG_RIP, "REG_RIP");

void hm__arch_save_context(hm__soft_raw_t *r, const void *ucv)
{
    const ucontext_t *uc = ucv;
    memcpy(r->regs, uc->uc_mcontext.gregs, sizeof r->regs);
    r->has_vec = uc->uc_mcontext.fpregs != NULL;
    if (r->has_vec)
        for (int i = 0; i < 16; i++)
            memcpy(&r->vec_lo[i], &uc->uc_mcontext.fpregs->_xmm[i], 8);
}
