/* Writes crafted trace files into a directory: two valid traces
 * ("good.hmt", "varied.hmt") and one damaged variant of good.hmt per named
 * case ("<case>.hmt"). Used to build the
 * fuzzing seed corpus and by the CLI bad-input test. With --codec DIR,
 * writes the hand-made block payloads in fuzz_block's input format (the
 * seed corpus of that target). With --list, prints
 * the case names instead. */
#include <stdio.h>
#include <string.h>

#include "codec_cases.h"
#include "trace_cases.h"

/* --objects PATH: a trace of allocations and frees over reused, out of
 * order addresses with samples in and between them; prints the expected
 * per-site sample counts, computed by brute force, as JSON. */
static int write_objects(const char *path)
{
    enum { SLOTS = 512, SITES = 37, STEPS = 60000 };
    static int live[SLOTS], site_of[SLOTS];
    static uint64_t size_of[SLOTS], expect[SITES];
    uint64_t unattributed = 0, samples = 0;
    const uint64_t base = 0x7f0000000000ULL;
    hm_trace_writer_t *w;
    int rc = hm_trace_writer_open(&w, path, NULL);
    if (rc < 0)
        return rc;
    hm_trace_writer_set_block_records(w, 1000);
    uint64_t x = 88172645463325252ULL;
    for (uint64_t t = 1; t <= STEPS; t++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned slot = (unsigned)(x % SLOTS), what = (unsigned)(x >> 40) % 8;
        uint64_t addr = base + (uint64_t)slot * 4096;
        if (what == 0 && !live[slot]) {
            live[slot] = 1;
            site_of[slot] = (int)((x >> 20) % SITES);
            size_of[slot] = 1 + (x >> 50) % 4096;
            hm_alloc_t a = {t, addr, size_of[slot], 0x1000 + (uint64_t)site_of[slot], 1};
            hm_trace_write_alloc(w, &a);
        } else if (what == 1 && live[slot]) {
            live[slot] = 0;
            hm_trace_write_free(w, t, addr, 1);
        } else {
            uint64_t off = (x >> 24) % 4096;
            hm_sample_t s = {t, addr + off, 0x400000, 1, 0, 0, (uint8_t)(x & 1)};
            hm_trace_write_sample(w, &s);
            samples++;
            if (live[slot] && off < size_of[slot])
                expect[site_of[slot]]++;
            else
                unattributed++;
        }
    }
    hm_trace_end_t end = {STEPS + 1, 0};
    if ((rc = hm_trace_writer_close(w, &end)) < 0)
        return rc;
    printf("{\"samples\": %llu, \"unattributed\": %llu, \"sites\": {", (unsigned long long)samples,
           (unsigned long long)unattributed);
    for (int i = 0; i < SITES; i++)
        printf("%s\"0x%016llx\": %llu", i ? ", " : "", 0x1000ULL + (unsigned long long)i,
               (unsigned long long)expect[i]);
    printf("}}\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--objects") == 0) {
        int rc = write_objects(argv[2]);
        if (rc < 0) {
            fprintf(stderr, "trace_corpus: %s: %s: %s\n", argv[2], hm_strerror(rc), hm_errdetail());
            return 1;
        }
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--codec") == 0) {
        codec_case_t *cs;
        size_t n = codec_cases(&cs);
        static uint8_t buf[CC_FUZZ_HDR + (1 << 16)];
        for (size_t i = 0; i < n; i++) {
            char out[512];
            snprintf(out, sizeof out, "%s/%s.bin", argv[2], cs[i].name);
            FILE *f = fopen(out, "wb");
            size_t len = codec_case_fuzz_bytes(&cs[i], buf);
            if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
                perror(out);
                return 1;
            }
        }
        codec_cases_free(cs, n);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < HM_ARRAY_LEN(tc_cases); i++)
            printf("%s\n", tc_cases[i].name);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: trace_corpus DIR | --list | --objects PATH | --codec DIR\n");
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
