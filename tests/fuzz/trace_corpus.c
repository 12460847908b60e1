/* Writes crafted trace files into a directory: two valid traces
 * ("good.hmt", "varied.hmt") and one damaged variant of good.hmt per named
 * case ("<case>.hmt"). Used to build the
 * fuzzing seed corpus and by the CLI bad-input test. With --list, prints
 * the case names instead. */
#include <stdio.h>
#include <string.h>

#include "trace_cases.h"

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < HM_ARRAY_LEN(tc_cases); i++)
            printf("%s\n", tc_cases[i].name);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: trace_corpus DIR | --list\n");
        return 2;
    }
    char good[4096], out[4096];
    snprintf(good, sizeof good, "%s/good.hmt", argv[1]);
    int rc = tc_write_good(good, 1);
    if (rc < 0) {
        fprintf(stderr, "trace_corpus: %s: %s: %s\n", good, hm_strerror(rc), hm_errdetail());
        return 1;
    }
    snprintf(out, sizeof out, "%s/varied.hmt", argv[1]);
    if ((rc = tc_write_varied(out)) < 0) {
        fprintf(stderr, "trace_corpus: %s: %s: %s\n", out, hm_strerror(rc), hm_errdetail());
        return 1;
    }
    for (size_t i = 0; i < HM_ARRAY_LEN(tc_cases); i++) {
        snprintf(out, sizeof out, "%s/%s.hmt", argv[1], tc_cases[i].name);
        if ((rc = tc_make(tc_cases[i].name, good, out)) < 0) {
            fprintf(stderr, "trace_corpus: case %s: %s\n", tc_cases[i].name, hm_strerror(rc));
            return 1;
        }
    }
    return 0;
}
