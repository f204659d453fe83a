/* uring: see uring.h. */
#include "common/uring.h"

#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct uring {
    struct io_uring ring;
    ssize_t *res;  /* the batch's results */
    unsigned left; /* its reads submitted and not done yet */
    int broken;    /* a submission failed: SQEs may be left in the queue */
    int dead;      /* made anew after that, and it failed: no ring (every read -ECANCELED) */
};

static atomic_int usable; /* 0 not tried, 1 yes, -1 no */
static atomic_uint_fast64_t reads_done;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread uring_t *thread_ring;

static int ring_init(uring_t *u)
{
    int rc = io_uring_queue_init(URING_MAX_READS, &u->ring, 0);
    /* The first ring decides: none, not here at all; one, rings here (a later failure, a
     * limit reached, is that ring's alone). */
    int was = 0;
    if (rc < 0) {
        if (atomic_compare_exchange_strong(&usable, &was, -1))
            log_info("event=uring_unusable err=%s: block reads go to pool threads", strerror(-rc));
        else
            log_limited(LOG_LVL_WARN, "event=uring_ring_failed err=%s", strerror(-rc));
        return rc;
    }
    (void)atomic_compare_exchange_strong(&usable, &was, 1);
    return 0;
}

/*
 * Rings given back, kept for the next uring_new: making one costs a syscall, three mappings
 * and a descriptor (20-50 us here, up to 3% of a 9 MiB GET's CPU). A ring is no thread's
 * (no SQPOLL, no single-issuer flag): any may take a kept one.
 */
#define RINGS_KEPT 32
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static uring_t *kept[RINGS_KEPT];
static int nkept;

uring_t *uring_new(void)
{
    if (atomic_load(&usable) < 0) return NULL;
    pthread_mutex_lock(&kept_mu);
    uring_t *u = nkept ? kept[--nkept] : NULL;
    pthread_mutex_unlock(&kept_mu);
    if (u) return u;
    const char *no = getenv("WARMLAKE_NO_URING");
    if (no && no[0] && strcmp(no, "0") != 0) {
        atomic_store(&usable, -1);
        return NULL;
    }
    u = xcalloc(1, sizeof(*u));
    if (ring_init(u) != 0) {
        free(u);
        return NULL;
    }
    return u;
}

void uring_free(uring_t *u)
{
    if (!u) return;
    uring_finish(u);
    if (!u->dead) {
        pthread_mutex_lock(&kept_mu);
        int keep = nkept < RINGS_KEPT;
        if (keep) kept[nkept++] = u;
        pthread_mutex_unlock(&kept_mu);
        if (keep) return;
        io_uring_queue_exit(&u->ring);
    }
    free(u);
}

static void thread_ring_free(void *p)
{
    thread_ring = NULL; /* (a later destructor of this thread may read again: a new one) */
    uring_free(p);
}

static void key_init(void)
{
    if (pthread_key_create(&ring_key, thread_ring_free) != 0) abort();
}

int uring_usable(void)
{
    if (atomic_load(&usable) == 0) uring_free(uring_new());
    return atomic_load(&usable) > 0;
}

uint64_t uring_reads(void)
{
    return atomic_load(&reads_done);
}

/* Every completion there is, into the batch's results. */
static void reap(uring_t *u)
{
    struct io_uring_cqe *c;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&u->ring, head, c)
    {
        u->res[io_uring_cqe_get_data64(c)] = c->res;
        seen++;
    }
    io_uring_cq_advance(&u->ring, seen);
    u->left -= seen;
    atomic_fetch_add(&reads_done, seen);
}

void uring_start(uring_t *u, unsigned n, const uring_read_t *rd, ssize_t *res)
{
    u->res = res;
    if (u->dead) {
        for (unsigned i = 0; i < n; i++)
            res[i] = -ECANCELED;
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring); /* never NULL: the ring is idle */
        io_uring_prep_readv(sqe, rd[i].fd, rd[i].iov, (unsigned)rd[i].cnt, rd[i].pos);
        io_uring_sqe_set_data64(sqe, i);
        res[i] = -ECANCELED; /* until it completes */
    }
    for (unsigned queued = n; queued;) {
        int s = io_uring_submit(&u->ring);
        if (s == -EINTR) continue;
        if (s <= 0) {
            /* The kernel took none of those left (it takes some or fails): they stay
             * -ECANCELED, for the caller to read another way, and the ring is made anew
             * once those in flight are done (the rest would go with the next batch). */
            log_limited(LOG_LVL_WARN, "event=uring_submit_failed err=%s", strerror(-s));
            u->broken = 1;
            break;
        }
        queued -= (unsigned)s < queued ? (unsigned)s : queued;
        u->left += (unsigned)s;
    }
}

void uring_finish(uring_t *u)
{
    /* One sleep for all of them (a sleep per completion was three a 1 MiB GET). */
    while (u->left) {
        reap(u);
        if (!u->left) break;
        struct io_uring_cqe *c;
        int w = io_uring_wait_cqe_nr(&u->ring, &c, u->left);
        if (w < 0 && w != -EINTR && w != -EAGAIN) {
            /* Reads in flight into the caller's buffers, and no way to wait for them. */
            log_error("event=uring_wait_failed err=%s", strerror(-w));
            abort();
        }
    }
    if (u->broken) {
        io_uring_queue_exit(&u->ring);
        u->broken = 0;
        u->dead = ring_init(u) != 0;
    }
}

uring_t *uring_thread(void)
{
    static __thread unsigned retry_in; /* calls until a failed ring is tried again */
    if (thread_ring || atomic_load(&usable) < 0) return thread_ring;
    if (retry_in) {
        retry_in--;
        return NULL;
    }
    if (!(thread_ring = uring_new())) {
        retry_in = 1024;
        return NULL;
    }
    pthread_once(&key_once, key_init);
    (void)pthread_setspecific(ring_key, thread_ring);
    return thread_ring;
}

int uring_readv(unsigned n, const uring_read_t *rd, ssize_t *res)
{
    uring_t *u = n <= URING_MAX_READS ? uring_thread() : NULL;
    if (!u) return 0;
    uring_start(u, n, rd, res);
    uring_finish(u);
    return 1;
}
