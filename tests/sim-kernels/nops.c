/* Known instruction counts: a loop of TRIPS iterations whose body is 20 or
 * 40 nops (inline assembly) plus the loop's own few instructions.
 * usage: nops 20|40 TRIPS */
#include <stdio.h>
#include <stdlib.h>

#define NOP4 "nop\n\tnop\n\tnop\n\tnop\n\t"
#define NOP20 NOP4 NOP4 NOP4 NOP4 NOP4

__attribute__((noinline)) static void loop20(unsigned long trips)
{
    for (unsigned long i = 0; i < trips; i++)
        __asm__ volatile(NOP20);
}

__attribute__((noinline)) static void loop40(unsigned long trips)
{
    for (unsigned long i = 0; i < trips; i++)
        __asm__ volatile(NOP20 NOP20);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: nops 20|40 TRIPS\n");
        return 2;
    }
    unsigned long trips = strtoul(argv[2], NULL, 0);
    if (atoi(argv[1]) == 40)
        loop40(trips);
    else
        loop20(trips);
    return 0;
}
