/* Block lengths on 64-bit Arm: read the code where it runs. */
#include "arch/arch.h"

uint32_t hm__arch_block_insns(uintptr_t pc, int (*is_hook)(uintptr_t), unsigned max, uint32_t *sel)
{
    *sel = 0;
    return hm__a64_block_insns((const uint32_t *)pc, max, pc, is_hook);
}
