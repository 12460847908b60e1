/* Appends one line to the file named by PARENTLOG: its parent's process
 * id, that process's parent's id and its command line (arguments joined
 * by spaces); then streams two named 8 MiB arrays a fixed number of times
 * (argument 1, default 16), so that runs on different devices do the same
 * work. For tests of which process started it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hetmem/hetmem.h"

#define N (1u << 20) /* doubles: 8 MiB per array */

static int log_parent(const char *path)
{
    char f[64], line[512], cmd[4096];
    pid_t pp = getppid();
    long ppp = -1;
    snprintf(f, sizeof f, "/proc/%ld/status", (long)pp);
    FILE *s = fopen(f, "r");
    if (!s)
        return -1;
    while (fgets(line, sizeof line, s))
        if (sscanf(line, "PPid: %ld", &ppp) == 1)
            break;
    fclose(s);
    snprintf(f, sizeof f, "/proc/%ld/cmdline", (long)pp);
    FILE *c = fopen(f, "r");
    if (!c)
        return -1;
    size_t n = fread(cmd, 1, sizeof cmd - 1, c);
    fclose(c);
    for (size_t i = 0; i + 1 < n; i++)
        if (!cmd[i])
            cmd[i] = ' ';
    cmd[n] = 0;
    FILE *o = fopen(path, "a");
    if (!o)
        return -1;
    fprintf(o, "%ld %ld %s\n", (long)pp, ppp, cmd);
    return fclose(o);
}

int main(int argc, char **argv)
{
    const char *path = getenv("PARENTLOG");
    if (!path || log_parent(path) < 0) {
        fprintf(stderr, "parentlog: cannot log the parent (PARENTLOG unset or unwritable)\n");
        return 1;
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 16;
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), s = 0;
    if (!a || !b)
        return 1;
    hetmem_name(a, "A");
    hetmem_name(b, "B");
    for (size_t i = 0; i < N; i++)
        a[i] = 1.0, b[i] = 2.0;
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < N; i++)
            s += a[i] * b[i];
    printf("checksum %.0f\n", s);
    free(a);
    free(b);
    return 0;
}
