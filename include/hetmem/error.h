/**
 * @file error.h
 * @brief Error codes shared by every hetmem component.
 *
 * Functions return 0 on success or a negative code: -errno for a failed
 * system call, or one of the HM_E* domain codes below (all below -1000, so
 * they never collide with errno values). One X-macro table generates the
 * enum, hm_strerror() and hm_err_name().
 */
#ifndef HETMEM_ERROR_H
#define HETMEM_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define HM_ERRNO_MAP(X)                                                          \
    X(EUSAGE,      -1001, "invalid usage")                                       \
    X(EBADTRACE,   -1002, "not a hetmem trace (bad magic)")                      \
    X(EVERSION,    -1003, "unsupported trace format version")                    \
    X(ETRUNC,      -1004, "file is truncated")                                   \
    X(ECORRUPT,    -1005, "corrupt data")                                        \
    X(ETOOBIG,     -1006, "length out of range")                                 \
    X(EBADJSON,    -1007, "malformed JSON")                                      \
    X(EBADMACHINE, -1008, "invalid machine description")                        \
    X(EBADPLACE,   -1009, "invalid placement")                                   \
    X(ENODEV,      -1010, "unknown memory device")                               \
    X(ECAPACITY,   -1011, "device capacity exceeded")                            \
    X(ENOPMU,      -1012, "no usable sampling PMU")                              \
    X(ENOTINST,    -1013, "binary was not built with hetmem-cc")                 \
    X(ETHREADS,    -1014, "multi-threaded program not supported")                \
    X(ECHILD,      -1015, "child process failed")                                \
    X(ENOTIMPL,    -1016, "not implemented yet")                                 \
    X(EZSTD,       -1017, "compression error")                                   \
    X(ERANGE,      -1018, "value out of range")                                  \
    X(ENOTFOUND,   -1019, "not found")                                           \
    X(EMISMATCH,   -1020, "inputs do not match")

typedef enum {
#define HM_ERR_ENUM_(name, val, msg) HM_##name = (val),
    HM_ERRNO_MAP(HM_ERR_ENUM_)
#undef HM_ERR_ENUM_
} hm_errno_t;

/** Message for an error code (HM_E* or -errno). Static storage; never NULL. */
const char *hm_strerror(int err);

/** Symbolic name ("HM_EBADTRACE", "ENOENT"...). Static storage; never NULL. */
const char *hm_err_name(int err);

/**
 * Detail of the last error raised on this thread by a hetmem function, naming
 * what and where ("block 12 at offset 40960: zstd: corrupted block"). Empty
 * string when the failing function left none. Thread-local storage, valid
 * until the next hetmem call on this thread.
 */
const char *hm_errdetail(void);

#ifdef __cplusplus
}
#endif
#endif /* HETMEM_ERROR_H */
