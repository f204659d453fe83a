/*
 * pool: a pool of threads running jobs in FIFO order, the one job pool of a
 * node: the HTTP front end runs each request's handler on one, the object
 * layer runs a stripe's shard reads and writes on another.
 *
 * A job is a pool_job_t embedded in the caller's own struct (no allocation
 * per job). Jobs submitted together can share a latch the caller waits on.
 * A job submitted while threads are idle goes straight to the one that went
 * idle last (warm caches; only it is woken); jobs queue only while none is.
 *
 * Blocking outside the pool. A job that waits on something the pool cannot
 * speed up (an HTTP client that sends or reads slowly) brackets the wait
 * with pool_block_begin/end. Blocked threads do not count against the
 * pool's size: while queued jobs wait and fewer than `threads` are running,
 * another thread is started, up to threads + max_blocked. At that bound the
 * pool calls on_saturated (from the thread that found it, with no pool lock
 * held) so that its owner can free a blocked thread, e.g. by closing the
 * connection stalled longest. Threads beyond `threads` end after a while
 * idle.
 */
#ifndef WL_POOL_H
#define WL_POOL_H

#include <pthread.h>
#include <stdint.h>

/*
 * A latch counts work down to zero. Finishing a piece that is not the last
 * is one atomic decrement (latch_done takes no lock then: three commit
 * threads finishing a PUT's three copies fought over the latch's lock and
 * the waiter woke into it). The last piece takes the lock and opens the
 * latch; a waiter returns only once it is open, so that nothing touches a
 * latch its waiter has freed. A latch that latch_wait_below will watch is
 * marked (latch_watch) before its work starts: every latch_done takes the
 * lock then, so that no wake-up a watcher waits for is missed.
 */
typedef struct latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int left;
    int open;    /* (mu) left reached 0, told by the piece that took it there */
    int watched; /* latch_watch: every latch_done locks */
    int watch;   /* (mu) latch_wait_below's: a waiter wants to hear of left < watch */
} latch_t;

void latch_init(latch_t *l);
/* Wait until every job submitted on l has run. */
void latch_wait(latch_t *l);
/* latch_wait for at most ms milliseconds: 0 when it opened, ERR_AGAIN when the time passed. */
int latch_wait_ms(latch_t *l, uint32_t ms);
/*
 * Wait until fewer than `left` jobs are left on l (one more finished, for a
 * caller that counted them) or ms milliseconds passed; returns how many are
 * left. One such waiter per latch at a time.
 */
int latch_wait_below(latch_t *l, int left, uint32_t ms);
/* l will be waited on with latch_wait_below: call while no work is counted on it. */
void latch_watch(latch_t *l);
/*
 * Count work that is not a pool job (an asynchronous write's callback):
 * latch_add before starting it, latch_done once when it finished.
 */
void latch_add(latch_t *l, int n);
void latch_done(latch_t *l);
void latch_destroy(latch_t *l);

typedef struct pool_job {
    void (*run)(struct pool_job *j);
    struct pool_job *next; /* the pool's */
    latch_t *latch;        /* the pool's: counted down after run returns */
    const char *request;   /* the pool's: the submitter's request id, for the job's log lines */
} pool_job_t;

typedef struct pool pool_t;

typedef struct {
    const char *name; /* thread name (top -H, perf): at most 15 characters */
    int threads;      /* threads kept running */
    int max_blocked;  /* extra threads for jobs blocked outside (0: none) */
    void (*on_saturated)(void *arg);
    void *arg;
} pool_cfg_t;

/* NULL when no thread could be started (*err ERR_NOMEM). */
pool_t *pool_new(const pool_cfg_t *cfg, int *err);
/* Run every queued job, then end the threads and free the pool. */
void pool_free(pool_t *p);

/* Queue n jobs; l (may be NULL) counts them down as they finish. */
void pool_submit(pool_t *p, pool_job_t **jobs, int n, latch_t *l);
/* Jobs waiting for a thread. */
int pool_queued(pool_t *p);
/*
 * Idle threads that no queued job is waiting for: what a submit now would
 * find free at once (0: every thread is running a job or about to take a
 * queued one, the pool is saturated). A hint; it may change at any time.
 */
int pool_spare(pool_t *p);

/* The calling job waits on something outside the pool (see above). Pairs nest. */
void pool_block_begin(pool_t *p);
void pool_block_end(pool_t *p);

/* Counters for tests and stats. */
typedef struct {
    int threads, idle, blocked, queued;
} pool_stats_t;
void pool_stats(pool_t *p, pool_stats_t *st);

#endif
