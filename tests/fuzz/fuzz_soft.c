/* libFuzzer target for the soft sampler's decoder and effective-address
 * computation. Input layout:
 *   u8  pc offset into the code (mod code length)
 *   u8  flags: bit 0 has_vec; bit 5 faulted; bit 6: a second byte of pc
 *       offset follows (its high byte: blocks past 256 instructions);
 *       bit 7: register values follow
 *   (bit 6 set) u8 high byte of the pc offset
 *   (bit 7 set) 23 x u64 regs (ucontext gregs), 16 x u64 vec_lo (as many as the input
 *               has; the rest 0; RIP is then set from the pc offset)
 *   rest: up to 4 KiB of x86-64 code at runtime address 0x400000
 * A resolved sample must point at an instruction inside the code. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ucontext.h>

#include "arch/arch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    hm__soft_raw_t raw;
    memset(&raw, 0, sizeof raw);
    unsigned pcoff = data[0];
    uint8_t flags = data[1];
    data += 2;
    size -= 2;
    if (flags & 0x40) {
        pcoff |= (unsigned)data[0] << 8;
        data++;
        size--;
    }
    raw.has_vec = flags & 1;
    raw.faulted = (flags >> 5) & 1;
    size_t regs = sizeof raw.regs + sizeof raw.vec_lo;
    size_t take = (flags & 0x80) ? (size < regs ? size : regs) : 0;
    uint8_t rb[sizeof raw.regs + sizeof raw.vec_lo];
    memset(rb, 0, sizeof rb);
    memcpy(rb, data, take);
    memcpy(raw.regs, rb, sizeof raw.regs);
    memcpy(raw.vec_lo, rb + sizeof raw.regs, sizeof raw.vec_lo);
    data += take;
    size -= take;
    if (size == 0)
        return 0;
    if (size > 4096)
        size = 4096;
    /* Own copy: the decoder must not read past len. */
    uint8_t *code = malloc(size);
    if (!code)
        return 0;
    memcpy(code, data, size);
    const uint64_t base = 0x400000;
    raw.regs[HM__ARCH_REG_PC] = base + pcoff % size;
    raw.time = size * 2654435761u + pcoff; /* the draw among a loop's accesses */
    uint64_t addr = 0, ip = 0;
    int access = 0, how = 0;
    int r = hm__soft_resolve_code(code, size, base, &raw, &addr, &ip, &access, &how);
    if (r == 1 && (ip < base || ip >= base + size))
        abort();
    free(code);
    return 0;
}
