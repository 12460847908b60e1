/* Architectures hetmem has no decoder for: the soft sampler is refused
 * (src/record/backend.c) and hetmem-cc is not built, so nothing here is
 * reached; these keep the rest of the tree linking. */
#include "arch/arch.h"

void hm__arch_save_context(hm__soft_raw_t *r, const void *ucontext)
{
    (void)ucontext;
    r->regs[HM__ARCH_REG_PC] = 0;
    r->has_vec = 0;
}
