/* An ordinary program, not built with hetmem-cc. */
#include <stdio.h>

int main(void)
{
    puts("plain");
    return 0;
}
