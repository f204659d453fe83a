/*
 * testlib: what the unit tests of the drive engine share: scratch
 * directories (under $WL_TEST_DIR, else /tmp) removed again, and content
 * that is a function of a seed (so nothing written needs keeping to check
 * it; it does not compress, so drives and RocksDB see real sizes), and
 * stderr captured to check what a failure logs.
 */
#ifndef WL_TESTLIB_H
#define WL_TESTLIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* A new directory "wl-NAME-XXXXXX" (malloc'd path); fails the test if it cannot be made. */
char *tl_tmpdir(const char *name);
/* Remove a tree, as rm -rf. */
void tl_rm_rf(const char *path);
/* A 64-bit mixer (splitmix64's finaliser): seeds, sizes, choices. */
uint64_t tl_mix(uint64_t x);
/* n bytes that depend only on (seed, position). */
void tl_fill(uint8_t *p, size_t n, uint64_t seed);
/* Capture stderr (the log lines a failure must leave) in /tmp/wl-NAME-log-XXXXXX, until
 * tl_cap_stop. One capture at a time. */
void tl_cap_start(const char *name);
/* Stop capturing: what was logged (malloc'd, up to 1 MiB), echoed to stderr if echo. */
char *tl_cap_stop(int echo);
/* A pwritev hook that looks at a write whole: the pieces joined, given to a pwrite-like one. */
ssize_t tl_pwritev_joined(ssize_t (*pwrite_fn)(int, const void *, size_t, off_t), int fd,
                          const struct iovec *iov, int cnt, off_t off);
/* n bytes at buf written through a pwritev (a hook's real one), as one piece. */
ssize_t tl_pwrite_via(ssize_t (*pwritev)(int, const struct iovec *, int, off_t), int fd,
                      const void *buf, size_t n, off_t off);
/*
 * A one-shot gate for an fdatasync hook (drive_io.fdatasync = tl_gated_fdatasync): armed with
 * the real one, the next flush waits at the gate until it opens, so its commit's leader keeps
 * the lead while the test queues what it needs behind it. tl_gate_wait_held waits until a
 * flush is there (failing the test after a minute). One gate at a time, armed again only
 * once the flush it held has gone on.
 */
void tl_gate_arm(int (*real_fdatasync)(int));
int tl_gated_fdatasync(int fd);
void tl_gate_wait_held(void);
void tl_gate_open(void);

#endif
