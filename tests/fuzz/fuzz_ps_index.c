/* libFuzzer target for pshuffle's packed-dataset index (ps_load_packed):
 * the input is the index file; the data file is a fixed 4 KiB of bytes.
 * Both go through memfds. A shuffler on MPI_COMM_SELF (one rank, in-memory
 * store) is opened per input so that every record of the index is read;
 * MPI is initialised once, as a singleton. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pshuffle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
const char *__asan_default_options(void);

/* Open MPI's initialisation keeps memory until exit that it never frees;
 * the leak check at exit would report it. Leaks made while an input runs
 * are still found by libFuzzer's per-input check. */
const char *__asan_default_options(void) { return "leak_check_at_exit=0"; }

static int data_fd = -1;
static char data_path[64];

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

static void finalize(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Finalize();
}

static int setup(void)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
            return -1;
        atexit(finalize);
    }
    data_fd = memfd_create("fuzz-data", MFD_CLOEXEC);
    if (data_fd < 0)
        return -1;
    uint8_t buf[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    if (write_all(data_fd, buf, sizeof buf))
        return -1;
    snprintf(data_path, sizeof data_path, "/proc/self/fd/%d", data_fd);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (data_fd < 0 && setup())
        return 0;
    int fd = memfd_create("fuzz-index", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write_all(fd, data, size) == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ps_config_t cfg;
        ps_config_init(&cfg);
        ps_shuffler_t *ps;
        if (ps_open(&ps, MPI_COMM_SELF, &cfg) == 0) {
            if (ps_load_packed(ps, data_path, path) == 0) {
                volatile uint64_t sink = ps_size(ps);
                (void)sink;
            }
            ps_close(ps);
        }
    }
    close(fd);
    return 0;
}
