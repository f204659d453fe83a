/*
 * uring: many reads at once from one thread, through an io_uring.
 *
 * The block reads of a stripe went to pool threads, one thread per block:
 * each read woke a thread, blocked it in the kernel, and put it back to
 * sleep, about two context switches per block on top of the caller's wait
 * (10.7 per 1 MiB GET at 8 clients; a switch costs 10-16 us on a VM). One
 * submission of every read of a stripe and one wait for all of them does the
 * same I/O, just as parallel at the device, with the caller's thread alone.
 *
 * A ring carries one batch of reads at a time: uring_start submits them and
 * returns, uring_finish waits for all of them (the caller may do other work
 * between: a GET sends one stripe while the next is read). uring_readv is
 * both at once on the calling thread's own ring (made on first use, freed
 * when the thread ends). A ring of one's own (uring_new) goes with something
 * that outlives a call, such as a GET's read-ahead; whoever holds it uses it
 * from one thread at a time. Where io_uring is not there (an old kernel, a
 * container that forbids it, WARMLAKE_NO_URING=1) no ring is had and the
 * caller reads its usual way: uring_usable says which, once; a ring can
 * still fail later (a limit reached), so callers check the one they take.
 */
#ifndef WL_URING_H
#define WL_URING_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define URING_MAX_READS 64 /* reads one batch takes at most */

typedef struct {
    int fd;
    const struct iovec *iov;
    int cnt;
    uint64_t pos;
} uring_read_t;

typedef struct uring uring_t;

/* Whether io_uring works in this process (tried once, on the first call). */
int uring_usable(void);
/* Reads completed through rings so far, in this process. */
uint64_t uring_reads(void);

/* A ring of one's own; NULL when none can be had. uring_free waits for a batch in flight. */
uring_t *uring_new(void);
void uring_free(uring_t *u);

/*
 * Submit the n reads (n <= URING_MAX_READS) of a batch and return; the ring
 * must have none in flight. res[i] gets rd[i]'s bytes read or -errno by
 * uring_finish (-ECANCELED: never submitted, read it another way); res,
 * rd's iovecs and their buffers must stay until then.
 */
void uring_start(uring_t *u, unsigned n, const uring_read_t *rd, ssize_t *res);
/* Wait until every read of the batch started is done (none: at once). */
void uring_finish(uring_t *u);

/*
 * This thread's own ring, made on first use (freed when the thread ends);
 * NULL when none can be had (a failure is tried again 1024 calls later).
 */
uring_t *uring_thread(void);

/*
 * uring_start and uring_finish on this thread's own ring: 1 once all are
 * done; 0 when no ring could be had (or n > URING_MAX_READS): nothing read.
 */
int uring_readv(unsigned n, const uring_read_t *rd, ssize_t *res)
    __attribute__((warn_unused_result));

#endif
