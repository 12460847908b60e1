/* fork + exec of itself, fork without exec, and allocations on each side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned long work(int seed)
{
    unsigned long s = 0;
    for (int i = 0; i < 50; i++) {
        size_t n = (size_t)(64 + i) << 10;
        char *p = malloc(n);
        memset(p, seed + i, n);
        s += (unsigned char)p[n / 2];
        free(p);
    }
    return s;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        printf("child %s %lu\n", argv[1], work(atoi(argv[1])));
        return 3;
    }
    unsigned long s = work(1);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        execl("/proc/self/exe", argv[0], "7", (char *)NULL);
        _exit(99);
    }
    int st;
    waitpid(p, &st, 0);
    pid_t q = fork();
    if (q == 0) {
        printf("forked %lu\n", work(2));
        fflush(stdout);
        _exit(0);
    }
    waitpid(q, NULL, 0);
    printf("parent %lu child-exit %d\n", s, WEXITSTATUS(st));
    return 0;
}
