/* libFuzzer target for pshuffle's directory-store manifest reader. The
 * input is a manifest without its last line; it is read twice through a
 * memfd: as it is (checksum missing or wrong), and with a correct
 * "checksum" line appended so that mutations reach the line parser. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_all(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k <= 0)
            return -1;
        p = (const char *)p + k;
        n -= (size_t)k;
    }
    return 0;
}

static void read_one(const uint8_t *data, size_t size, int with_sum)
{
    int fd = memfd_create("fuzz-manifest", MFD_CLOEXEC);
    if (fd < 0)
        return;
    char sum[48];
    int ok = write_all(fd, data, size) == 0;
    if (ok && with_sum) {
        int n = snprintf(sum, sizeof sum, "checksum %016" PRIx64 "\n", ps__hash(data, size));
        ok = write_all(fd, sum, (size_t)n) == 0;
    }
    if (ok) {
        ps__manifest_t m;
        if (ps__manifest_read_fd(fd, "fuzz-manifest", &m) == 0) {
            volatile uint64_t sink = m.epoch + (uint64_t)m.rank;
            for (uint64_t i = 0; i < m.count; i++)
                sink += m.ent[i].id + m.ent[i].size;
            (void)sink;
            ps__manifest_free(&m);
        }
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_one(data, size, 0);
    read_one(data, size, 1);
    return 0;
}
