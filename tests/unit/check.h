/* Minimal test assertions. They work whatever NDEBUG is, print both values,
 * and count failures; a test's main returns check_done(). */
#ifndef HETMEM_TEST_CHECK_H
#define HETMEM_TEST_CHECK_H
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures_;
static int check_count_;

#define CHECK(cond)                                                              \
    do {                                                                         \
        check_count_++;                                                          \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            check_failures_++;                                                   \
        }                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                       \
    do {                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                      \
        check_count_++;                                                          \
        if (a_ != b_) {                                                          \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,  \
                    __LINE__, #a, #b, a_, b_);                                   \
            check_failures_++;                                                   \
        }                                                                        \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                       \
    do {                                                                         \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                         \
        check_count_++;                                                          \
        if (a_ != b_) {                                                          \
            fprintf(stderr, "%s:%d: %s == %s failed: 0x%" PRIx64 " != 0x%" PRIx64 "\n", \
                    __FILE__, __LINE__, #a, #b, a_, b_);                         \
            check_failures_++;                                                   \
        }                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, rel)                                                    \
    do {                                                                         \
        double a_ = (double)(a), b_ = (double)(b);                               \
        double d_ = a_ > b_ ? a_ - b_ : b_ - a_;                                 \
        double m_ = (b_ < 0 ? -b_ : b_) * (rel);                                 \
        check_count_++;                                                          \
        if (!(d_ <= m_)) {                                                       \
            fprintf(stderr, "%s:%d: %s ~= %s (rel %g) failed: %g vs %g\n",        \
                    __FILE__, __LINE__, #a, #b, (double)(rel), a_, b_);          \
            check_failures_++;                                                   \
        }                                                                        \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                       \
    do {                                                                         \
        const char *a_ = (a), *b_ = (b);                                         \
        check_count_++;                                                          \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                 \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",        \
                    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
            check_failures_++;                                                   \
        }                                                                        \
    } while (0)

static inline int check_done(void)
{
    printf("%d checks, %d failed\n", check_count_, check_failures_);
    return check_failures_ ? 1 : 0;
}
#endif
