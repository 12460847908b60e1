/* The preload's bootstrap buffer (what dlsym allocates before the real
 * allocator is known): realloc of a block copies what the block holds, not
 * the new size (which read past the block, and past the buffer for its
 * last block), and the buffer refuses what it cannot hold. */
#include "../../src/preload/boot.c"

#include "check.h"

static unsigned char big[1 << 17];

static void *fill_alloc(size_t n)
{
    if (n > sizeof big)
        return NULL;
    memset(big, 0x5a, sizeof big);
    return big;
}

int main(void)
{
    unsigned char *a = hm__boot_alloc(40);
    CHECK(a != NULL && hm__is_boot(a));
    CHECK_EQ_INT(hm__boot_size(a), 40);
    memset(a, 0xab, 40);
    unsigned char *b = hm__boot_alloc(24); /* a neighbour right after a */
    CHECK(b != NULL);
    memset(b, 0xcd, 24);

    unsigned char *q = hm__boot_realloc(a, 1000, fill_alloc);
    CHECK(q == big);
    int head = 1, tail = 1;
    for (int i = 0; i < 40; i++)
        head &= q[i] == 0xab;
    for (int i = 40; i < 1000; i++)
        tail &= q[i] == 0x5a; /* untouched: nothing beyond the block is copied */
    CHECK(head);
    CHECK(tail);

    q = hm__boot_realloc(b, 8, fill_alloc); /* shrinking copies the new size */
    CHECK(q[7] == 0xcd && q[8] == 0x5a);

    /* The last block of the buffer: growing it must not read past the
     * buffer's end (ASan builds see that as an overflow). */
    size_t left = sizeof boot_buf - boot_used - 16;
    unsigned char *last = hm__boot_alloc(left);
    CHECK(last != NULL);
    if (last) {
        memset(last, 0x11, left);
        q = hm__boot_realloc(last, left + 4096, fill_alloc);
        CHECK(q[left - 1] == 0x11 && q[left] == 0x5a);
    }
    CHECK(hm__boot_alloc(16) == NULL);       /* full */
    CHECK(hm__boot_alloc(1u << 20) == NULL); /* larger than the buffer */
    CHECK(!hm__is_boot(big));
    return check_done();
}
