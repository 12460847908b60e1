/* Allocates, then dies by SIGSEGV. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    printf("about to crash\n");
    fflush(stdout);
    raise(SIGSEGV);
    return 0;
}
