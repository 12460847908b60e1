/* pshuffle's size parser against the grammar table hetmem's parser is also
 * tested on (tests/fixtures/sizes.txt), and PSHUFFLE_WINDOW's range.
 * usage: unit_size TABLE */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../../tests/unit/check.h"

int main(int argc, char **argv)
{
    FILE *f = fopen(argc > 1 ? argv[1] : "tests/fixtures/sizes.txt", "r");
    CHECK(f != NULL);
    char line[256];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        char in[128], want[64];
        if (line[0] == '#' || sscanf(line, "%127s %63s", in, want) != 2)
            continue;
        uint64_t v = 7;
        int rc = ps__parse_size(in, &v);
        if (!strcmp(want, "bad")) {
            if (rc == 0)
                fprintf(stderr, "size '%s' was accepted as %llu\n", in, (unsigned long long)v);
            CHECK_EQ_INT(rc, -1);
            CHECK_EQ_U64(v, 7);
        } else {
            if (rc != 0)
                fprintf(stderr, "size '%s' was refused\n", in);
            CHECK_EQ_INT(rc, 0);
            CHECK_EQ_U64(v, strtoull(want, NULL, 10));
        }
        n++;
    }
    if (f)
        fclose(f);
    CHECK(n >= 25);
    uint64_t v;
    CHECK_EQ_INT(ps__parse_size("", &v), -1);

    /* The window: within 1K..1G, else 0 (which ps_open refuses). */
    setenv("PSHUFFLE_WINDOW", "256KiB", 1);
    CHECK_EQ_U64(ps__env_window(), 256u << 10);
    setenv("PSHUFFLE_WINDOW", "0.5M", 1);
    CHECK_EQ_U64(ps__env_window(), 0);
    setenv("PSHUFFLE_WINDOW", "1e6", 1);
    CHECK_EQ_U64(ps__env_window(), 0);
    setenv("PSHUFFLE_WINDOW", "512", 1);
    CHECK_EQ_U64(ps__env_window(), 0);
    setenv("PSHUFFLE_WINDOW", "1G", 1);
    CHECK_EQ_U64(ps__env_window(), 1u << 30);
    setenv("PSHUFFLE_WINDOW", "2G", 1);
    CHECK_EQ_U64(ps__env_window(), 0);
    unsetenv("PSHUFFLE_WINDOW");
    CHECK_EQ_U64(ps__env_window(), 64u << 20);
    return check_done();
}
