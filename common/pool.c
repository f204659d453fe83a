#include "common/pool.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <assert.h>
#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPARE_IDLE_S 10 /* a thread beyond cfg.threads ends after this long idle */

/*
 * An idle thread, waiting on a semaphore of its own. The idle threads are a
 * stack: a submit hands its job to the one that went idle last and wakes
 * only that one, which runs the job without taking the pool's lock. With
 * one condition variable they all slept on, each wake-up woke a thread that
 * had been idle longest (cold stack and caches) into a fight for the lock
 * the others slept under: of a 4 KiB GET's six futex calls at 8 clients,
 * three were the HTTP pool's lock changing hands.
 */
typedef struct waiter {
    struct waiter *next; /* (p->mu) the idle stack */
    pool_job_t *job;     /* (p->mu) handed over; NULL when woken to stop */
    int woken;           /* (p->mu) taken off the stack: a post is on its way */
    sem_t sem;
} waiter_t;

struct pool {
    pool_cfg_t cfg;
    char name[16];
    pthread_mutex_t mu;
    pthread_cond_t exit_cv;
    pool_job_t *head, *tail; /* jobs no idle thread was waiting for */
    waiter_t *idle_top;      /* threads waiting for a job; while any waits, no job is queued */
    /* nthreads run; idle of them wait for a job (or are starting); blocked wait outside. */
    int nthreads, idle, blocked, queued, stop;
};

void latch_init(latch_t *l)
{
    pthread_mutex_init(&l->mu, NULL);
    clock_cond_init(&l->cv); /* latch_wait_ms: a clock that only goes on */
    atomic_init(&l->left, 0);
    l->open = 1;
    l->watched = 0;
    l->watch = 0;
}

void latch_watch(latch_t *l)
{
    l->watched = 1;
}

/* ms from now on the monotonic clock the latches' condition variables wait by. */
static struct timespec deadline_in(uint32_t ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)ms * 1000000ull;
    dl.tv_sec += (time_t)(ns / 1000000000ull);
    dl.tv_nsec = (long)(ns % 1000000000ull);
    return dl;
}

int latch_wait_ms(latch_t *l, uint32_t ms)
{
    struct timespec dl = deadline_in(ms);
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    while (!l->open && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&l->cv, &l->mu, &dl);
    int open = l->open;
    pthread_mutex_unlock(&l->mu);
    return open ? 0 : ERR_AGAIN;
}

int latch_wait_below(latch_t *l, int left, uint32_t ms)
{
    struct timespec dl = deadline_in(ms);
    int rc = 0;
    assert(l->watched); /* else a latch_done could slip by unheard */
    pthread_mutex_lock(&l->mu);
    l->watch = left;
    while (atomic_load(&l->left) >= left && !l->open && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&l->cv, &l->mu, &dl);
    l->watch = 0;
    int now = atomic_load(&l->left);
    pthread_mutex_unlock(&l->mu);
    return now;
}

void latch_wait(latch_t *l)
{
    pthread_mutex_lock(&l->mu);
    while (!l->open)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

void latch_add(latch_t *l, int n)
{
    pthread_mutex_lock(&l->mu);
    /*
     * A last piece that took the count to 0 and has not taken the lock to
     * open the latch yet: it opens it first. Counted up again under it, the
     * next piece's end would open it instead; its waiter could return and
     * free the latch before that first piece touched it (a review: work
     * submitted one piece at a time on one latch, as a batch GET does).
     */
    while (!l->open && atomic_load(&l->left) == 0)
        pthread_cond_wait(&l->cv, &l->mu);
    if (atomic_fetch_add(&l->left, n) + n > 0) l->open = 0;
    pthread_mutex_unlock(&l->mu);
}

void latch_done(latch_t *l)
{
    if (!l->watched && atomic_fetch_sub(&l->left, 1) != 1)
        return; /* not the last: l may be freed from here on (its last piece opens it) */
    /* The waiter may free l once it sees it open: nothing touches l after the unlock. */
    pthread_mutex_lock(&l->mu);
    int left = l->watched ? atomic_fetch_sub(&l->left, 1) - 1 : atomic_load(&l->left);
    if (left == 0) l->open = 1; /* (a latch_add meanwhile: its own last piece opens it) */
    if (left == 0 || left < l->watch) pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void latch_destroy(latch_t *l)
{
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
}

static void *worker(void *arg);

/* One more thread, counted idle until it takes a job (p->mu held). */
static int spawn(pool_t *p)
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, worker, p);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        log_error("event=thread_start_failed pool=%s errno=%d threads=%d", p->name, rc,
                  p->nthreads);
        return ERR_NOMEM;
    }
    pthread_setname_np(t, p->name);
    p->nthreads++;
    p->idle++;
    return 0;
}

/*
 * Queued jobs no idle thread will take, while blocked threads leave fewer
 * than cfg.threads running: start threads, or report saturation (p->mu
 * held; returns whether on_saturated should be called once it is released).
 */
static int grow(pool_t *p)
{
    while (p->queued > p->idle && p->blocked > 0 && !p->stop &&
           p->nthreads - p->idle - p->blocked < p->cfg.threads) {
        if (p->nthreads >= p->cfg.threads + p->cfg.max_blocked || spawn(p) != 0)
            return p->cfg.on_saturated != NULL;
    }
    return 0;
}

/* Take w off the idle stack (p->mu held; w is on it). */
static void unstack(pool_t *p, waiter_t *w)
{
    waiter_t **at = &p->idle_top;
    while (*at != w)
        at = &(*at)->next;
    *at = w->next;
}

/*
 * Wait on the idle stack for a job (p->mu held, released meanwhile): the
 * job handed over, NULL when woken to stop or when SPARE_IDLE_S passed
 * (*timed_out) with nothing for it.
 */
static pool_job_t *wait_idle(pool_t *p, waiter_t *w, int *timed_out)
{
    w->job = NULL;
    w->woken = 0;
    w->next = p->idle_top;
    p->idle_top = w;
    pthread_mutex_unlock(&p->mu);
    /* (The wall clock, as sem_timedwait takes it: a clock step only moves a spare's end.) */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += SPARE_IDLE_S;
    int rc;
    while ((rc = sem_timedwait(&w->sem, &dl)) != 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&p->mu);
    *timed_out = 0;
    if (!w->woken) { /* the time passed, and nobody took it off the stack */
        unstack(p, w);
        *timed_out = 1;
        return NULL;
    }
    if (rc != 0) { /* taken off just as the time passed: its post is still to come */
        pthread_mutex_unlock(&p->mu);
        while (sem_wait(&w->sem) != 0)
            ;
        pthread_mutex_lock(&p->mu);
    }
    return w->job;
}

/* Wake the waiters of a chain taken off the stack (no lock held). */
static void post_all(waiter_t *w)
{
    while (w) {
        waiter_t *next = w->next; /* read before the post: the thread may run, or end, at once */
        sem_post(&w->sem);
        w = next;
    }
}

static void *worker(void *arg)
{
    pool_t *p = arg;
    waiter_t w;
    sem_init(&w.sem, 0, 0);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        pool_job_t *j = p->head;
        if (j) {
            p->head = j->next;
            if (!p->head) p->tail = NULL;
            p->queued--;
            p->idle--;
        } else if (p->stop) {
            break;
        } else {
            int timed_out;
            j = wait_idle(p, &w, &timed_out); /* handed over: counted busy by the submit */
            if (timed_out && !p->head && p->nthreads > p->cfg.threads) break; /* a spare */
            if (!j) continue;
        }
        pthread_mutex_unlock(&p->mu);
        latch_t *l = j->latch;       /* j may be gone once the latch opens */
        log_set_request(j->request); /* what the job logs is about its submitter's request */
        j->run(j);
        log_set_request(NULL);
        if (l) latch_done(l);
        pthread_mutex_lock(&p->mu);
        p->idle++;
    }
    p->idle--;
    p->nthreads--;
    pthread_cond_broadcast(&p->exit_cv);
    pthread_mutex_unlock(&p->mu);
    sem_destroy(&w.sem);
    return NULL;
}

pool_t *pool_new(const pool_cfg_t *cfg, int *err)
{
    pool_t *p = xcalloc(1, sizeof(*p));
    p->cfg = *cfg;
    if (p->cfg.threads < 1) p->cfg.threads = 1;
    snprintf(p->name, sizeof(p->name), "%s", cfg->name ? cfg->name : "wl-pool");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->exit_cv, NULL);
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->cfg.threads && !rc; i++)
        rc = spawn(p);
    pthread_mutex_unlock(&p->mu);
    if (rc) {
        pool_free(p);
        *err = rc;
        return NULL;
    }
    *err = 0;
    return p;
}

void pool_free(pool_t *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    waiter_t *wake = p->idle_top;
    p->idle_top = NULL;
    for (waiter_t *w = wake; w; w = w->next)
        w->woken = 1; /* no job: it ends */
    pthread_mutex_unlock(&p->mu);
    post_all(wake);
    pthread_mutex_lock(&p->mu);
    while (p->nthreads > 0) /* threads are detached: each says when it is gone */
        pthread_cond_wait(&p->exit_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->exit_cv);
    free(p);
}

void pool_submit(pool_t *p, pool_job_t **jobs, int n, latch_t *l)
{
    if (l) latch_add(l, n);
    waiter_t *wake = NULL; /* threads handed a job, to be woken once the lock is free */
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++) {
        jobs[i]->latch = l;
        jobs[i]->next = NULL;
        jobs[i]->request = log_request(); /* valid while the submitter waits (latch) */
        waiter_t *w = p->idle_top;
        if (w) {
            p->idle_top = w->next;
            w->job = jobs[i];
            w->woken = 1;
            w->next = wake;
            wake = w;
            p->idle--;
            continue;
        }
        if (p->tail)
            p->tail->next = jobs[i];
        else
            p->head = jobs[i];
        p->tail = jobs[i];
        p->queued++;
    }
    int saturated = grow(p);
    pthread_mutex_unlock(&p->mu);
    /*
     * Wake each thread handed a job once the lock is free: woken under it,
     * each went straight back to sleep on the lock (a 1 MiB GET at 8
     * clients: 16.4 -> 13.6 context switches and 31 -> 20 futex calls). A
     * thread handed a job waits for this post and for nothing else.
     */
    post_all(wake);
    if (saturated) p->cfg.on_saturated(p->cfg.arg);
}

int pool_queued(pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    int q = p->queued;
    pthread_mutex_unlock(&p->mu);
    return q;
}

int pool_spare(pool_t *p)
{
    /* A job just queued has woken an idle thread that has not taken it yet: not spare. */
    pthread_mutex_lock(&p->mu);
    int spare = p->idle > p->queued ? p->idle - p->queued : 0;
    pthread_mutex_unlock(&p->mu);
    return spare;
}

void pool_block_begin(pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->blocked++;
    int saturated = grow(p);
    pthread_mutex_unlock(&p->mu);
    if (saturated) p->cfg.on_saturated(p->cfg.arg);
}

void pool_block_end(pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->blocked--;
    pthread_mutex_unlock(&p->mu);
}

void pool_stats(pool_t *p, pool_stats_t *st)
{
    pthread_mutex_lock(&p->mu);
    *st = (pool_stats_t){p->nthreads, p->idle, p->blocked, p->queued};
    pthread_mutex_unlock(&p->mu);
}
