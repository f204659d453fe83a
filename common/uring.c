/* uring: see uring.h. */
#include "common/uring.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int usable; /* 0 not tried, 1 yes, -1 no */
static atomic_uint_fast64_t reads_done;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread struct io_uring *ring;

static void ring_free(void *p)
{
    io_uring_queue_exit(p);
    free(p);
}

static void key_init(void)
{
    if (pthread_key_create(&ring_key, ring_free) != 0) abort();
}

/* This thread's ring, made on first use; NULL when none can be had. */
static struct io_uring *thread_ring(void)
{
    if (ring) return ring;
    if (atomic_load(&usable) < 0) return NULL;
    const char *no = getenv("WARMLAKE_NO_URING");
    if (no && no[0] && strcmp(no, "0") != 0) {
        atomic_store(&usable, -1);
        return NULL;
    }
    pthread_once(&key_once, key_init);
    struct io_uring *r = xmalloc(sizeof(*r));
    int rc = io_uring_queue_init(URING_MAX_READS, r, 0);
    if (rc < 0) {
        free(r);
        /* Never worked: not here at all. Worked before (a limit reached): this call only. */
        int was = 0;
        if (atomic_compare_exchange_strong(&usable, &was, -1))
            log_info("event=uring_unusable err=%s: block reads go to pool threads", strerror(-rc));
        return NULL;
    }
    atomic_store(&usable, 1);
    ring = r;
    (void)pthread_setspecific(ring_key, r);
    return r;
}

uint64_t uring_reads(void)
{
    return atomic_load(&reads_done);
}

int uring_usable(void)
{
    if (atomic_load(&usable) == 0) (void)thread_ring();
    return atomic_load(&usable) > 0;
}

/* Every completion there is, into res; how many. */
static unsigned reap(struct io_uring *r, ssize_t *res)
{
    struct io_uring_cqe *c;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(r, head, c)
    {
        res[io_uring_cqe_get_data64(c)] = c->res;
        seen++;
    }
    io_uring_cq_advance(r, seen);
    atomic_fetch_add(&reads_done, seen);
    return seen;
}

int uring_readv(unsigned n, const uring_read_t *rd, ssize_t *res)
{
    struct io_uring *r = n <= URING_MAX_READS ? thread_ring() : NULL;
    if (!r) return 0;
    for (unsigned i = 0; i < n; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(r); /* never NULL: the ring is drained */
        io_uring_prep_readv(sqe, rd[i].fd, rd[i].iov, (unsigned)rd[i].cnt, rd[i].pos);
        io_uring_sqe_set_data64(sqe, i);
        res[i] = -ECANCELED; /* until it completes */
    }
    /*
     * One sleep for all of them: the wait is for every read not done yet (a sleep per
     * completion was three a 1 MiB GET). The kernel waits only once it took all it was
     * given; a partial submission comes back at once and the rest goes again.
     */
    unsigned queued = n, left = n;
    int broken = 0;
    while (queued) {
        int s = io_uring_submit_and_wait(r, left);
        if (s == -EINTR) continue; /* (none taken: a wait cut short returns the count) */
        if (s < 0) {
            /* The kernel took none of those left (it takes some or fails): they stay
             * -ECANCELED, for the caller to read another way. */
            log_limited(LOG_LVL_WARN, "event=uring_submit_failed err=%s", strerror(-s));
            broken = 1;
            left -= queued;
            break;
        }
        queued -= (unsigned)s < queued ? (unsigned)s : queued;
        left -= reap(r, res);
    }
    while (left) {
        struct io_uring_cqe *c;
        int w = io_uring_wait_cqe_nr(r, &c, left);
        if (w == -EINTR || w == -EAGAIN) continue;
        if (w < 0) abort(); /* in-flight reads into the caller's buffers, not waitable */
        left -= reap(r, res);
    }
    if (broken) {
        /* Reads left in its submission queue would go with the next call's: a new ring. */
        (void)pthread_setspecific(ring_key, NULL);
        ring_free(r);
        ring = NULL;
    }
    return 1;
}
