/*
 * uring: many reads at once from one thread, through an io_uring of its own.
 *
 * The block reads of a stripe went to pool threads, one thread per block:
 * each read woke a thread, blocked it in the kernel, and put it back to
 * sleep, about two context switches per block on top of the caller's wait
 * (10.7 per 1 MiB GET at 8 clients; a switch costs 10-16 us on a VM). One
 * submission of every read of a stripe and one wait for all of them does the
 * same I/O, just as parallel at the device, with the caller's thread alone.
 *
 * Each thread that calls uring_readv gets its ring on first use (freed when
 * the thread ends). Where io_uring is not there (an old kernel, a container
 * that forbids it, WARMLAKE_NO_URING=1) nothing is read and the caller reads
 * its usual way: uring_usable says which, once.
 */
#ifndef WL_URING_H
#define WL_URING_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define URING_MAX_READS 64 /* reads one call takes at most */

typedef struct {
    int fd;
    const struct iovec *iov;
    int cnt;
    uint64_t pos;
} uring_read_t;

/* Whether io_uring works in this process (tried once, on the first call). */
int uring_usable(void);
/* Reads completed through rings so far, in this process. */
uint64_t uring_reads(void);

/*
 * The n reads (n <= URING_MAX_READS) at once: 1 once all are done, res[i] the
 * bytes rd[i] read or -errno (-ECANCELED: never submitted, read it another
 * way); 0 when no ring could be had: then nothing was read.
 */
int uring_readv(unsigned n, const uring_read_t *rd, ssize_t *res)
    __attribute__((warn_unused_result));

#endif
