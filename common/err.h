/*
 * err: the one list of warmlake error codes.
 *
 * 0 is success; every failure is a negative ERR_* code. errno values are
 * mapped once, at the syscall wrapper (err_from_errno), never passed around
 * raw, so callers can switch on a closed set of outcomes.
 */
#ifndef WL_ERR_H
#define WL_ERR_H

/* X(name, value, message) */
#define ERR_MAP(X)                                                                                 \
    X(OK, 0, "ok")                                                                                 \
    X(NOMEM, -1, "out of memory")                                                                  \
    X(IO, -2, "I/O error")                                                                         \
    X(INVAL, -3, "invalid argument")                                                               \
    X(NOT_FOUND, -4, "not found")                                                                  \
    X(CORRUPT, -5, "checksum mismatch: data is corrupt")                                           \
    X(NOSPC, -6, "no space left on drive")                                                         \
    X(THROTTLED, -7, "write throttled by endurance budget; retry later")                           \
    X(READONLY, -8, "drive is read-only after a failed write")                                     \
    X(EXISTS, -9, "already exists")                                                                \
    X(UNRECOVERABLE, -10, "more shards lost than parity can rebuild")                              \
    X(TOO_LARGE, -11, "too large")                                                                 \
    X(AGAIN, -12, "incomplete input; more data needed")                                            \
    X(CLOSED, -13, "closed")                                                                       \
    X(RANGE, -14, "range not satisfiable")                                                         \
    X(DENIED, -15, "access denied: bad signature or credentials")                                  \
    X(PRECOND, -16, "a precondition of the request does not hold")                                 \
    X(BUSY, -17, "in use by another process")                                                      \
    X(CANCELED, -18, "given up: no longer needed")                                                 \
    X(TIMEOUT, -19, "timed out")                                                                   \
    X(DRIVE_FAILED, -20, "the drive did not open at its node's start")

enum {
#define ERR_ENUM(name, val, msg) ERR_##name = (val),
    ERR_MAP(ERR_ENUM)
#undef ERR_ENUM
};

/* Message for a code; never NULL (unknown codes get a generic text). */
const char *err_str(int err);

/* Short symbolic name ("NOSPC"); never NULL. */
const char *err_name(int err);

/* Map an errno value to an ERR_* code (ENOSPC->NOSPC, ENOMEM->NOMEM, ...). */
int err_from_errno(int e);

#endif
