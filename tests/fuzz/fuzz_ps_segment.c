/* libFuzzer target for pshuffle's segment files: the input is the file
 * seg.0000000000.00000 of a rank directory whose manifest places three
 * samples in it (8 bytes at 32, 10 at 40, an empty one at 50). Loading the
 * state and reading each sample must refuse a damaged file with one line
 * (PS_ECORRUPT) or return the bytes the manifest's checksum vouches for. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void cleanup(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/rank-00000/seg.0000000000.00000", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/rank-00000", dir);
    rmdir(p);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz-ps-segment.XXXXXX");
        if (!mkdtemp(dir))
            abort();
        atexit(cleanup);
    }
    ps__dir_t d;
    if (ps__dir_open(&d, dir, 0, PS__DIR_CREATE))
        abort();
    int fd = openat(d.fd, "seg.0000000000.00000", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
        abort();
    close(fd);
    static const char *payload[3] = {"abcdefgh", "0123456789", ""};
    ps__entry_t ent[3];
    uint64_t off[3] = {32, 40, 50};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(payload[i]);
        ent[i] = (ps__entry_t){.id = (uint64_t)i, .size = n, .hash = ps__hash(payload[i], n)};
        ent[i].seg = PS_SEG_KEY(0, 0);
        ent[i].off = off[i];
    }
    int err = ps__seg_load(&d, ent, 3);
    if (err && (err != PS_ECORRUPT || strchr(ps_errdetail(), '\n') || !ps_errdetail()[0]))
        abort();
    for (int i = 0; i < 3; i++) {
        char buf[16];
        err = ps__sample_read(&d, &ent[i], buf, sizeof buf);
        if (err && (err != PS_ECORRUPT || strchr(ps_errdetail(), '\n')))
            abort();
        if (!err && memcmp(buf, payload[i], ent[i].size))
            abort();
    }
    ps__dir_close(&d);
    return 0;
}
