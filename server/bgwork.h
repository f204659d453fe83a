/*
 * bgwork: the scaffolding of the S3 layer's background workers (the drain
 * mover s3_drain.c, the heal scanner s3_scrub.c, the lifecycle worker
 * s3_lc_worker.c): a thread that runs passes, sleeps between them under a
 * mutex and a CLOCK_MONOTONIC condition variable until the next is due, a
 * kick or a stop; the naps a pass takes itself; pacing bytes under a rate;
 * and the bucket names a pass walks. Each worker keeps only what a pass does.
 *
 * Locking: one mutex per worker (bgwork_lock). The worker's own state that
 * other threads read (its stats) is kept under it; naps are taken holding it
 * (the condition variable releases it while asleep). stop and kick are set
 * under it; stop is also readable without it (bgwork_stopping).
 */
#ifndef WL_BGWORK_H
#define WL_BGWORK_H

#include "server/obj.h"

#include <pthread.h>
#include <stdint.h>

/*
 * A pass: runs on the worker's thread, without the lock. Returns the
 * monotonic time (bgwork_now) the next pass is due; a kick brings it forward.
 */
typedef double (*bgwork_pass_fn)(void *arg);

/* A worker, embedded in its owner's struct (so that a pass may reach it from
 * the first moment). The fields are bgwork.c's. */
typedef struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int stop;          /* under mu; read atomically without it */
    int kick;          /* a pass was asked for now; under mu */
    double first_s;
    bgwork_pass_fn pass;
    void *arg;
} bgwork_t;

/*
 * Starts the worker's thread (named name, at most 15 characters; NULL:
 * unnamed): the first pass first_s seconds after the start (or at a kick),
 * then each when the last one said, or at once when kicked meanwhile. Returns
 * 0, or ERR_NOMEM when no thread could be had (nothing to stop then; the
 * caller logs it). Any thread.
 */
int bgwork_start(bgwork_t *w, const char *name, double first_s, bgwork_pass_fn pass, void *arg)
    __attribute__((warn_unused_result));

/* Stops the worker: wakes it, waits for the pass under way to end (a pass
 * hears it through bgwork_stopping or a nap), joins the thread. Not from the
 * worker's own thread. */
void bgwork_stop(bgwork_t *w);

/* Asks for a pass now, or right after the one under way. Any thread; not under the lock. */
void bgwork_kick(bgwork_t *w);

void bgwork_lock(bgwork_t *w);
void bgwork_unlock(bgwork_t *w);

/* Under the lock: waits up to s seconds, or until stopped; a kick may wake it
 * sooner (callers loop on their own condition). Returns stopped. */
int bgwork_nap(bgwork_t *w, double s);

/* Stopped? Any thread, with or without the lock; NULL: never. */
int bgwork_stopping(bgwork_t *w);

/* Seconds on CLOCK_MONOTONIC. */
double bgwork_now(void);

/* Object bytes paced under a rate since t0 (set t0 = bgwork_now() and rate
 * when a pass begins). Fields under the worker's lock when threads share it. */
typedef struct {
    double t0;
    double rate; /* bytes a second */
    uint64_t bytes;
} bgwork_pace_t;

/* Under the lock: counts bytes; returns the MB/s since t0 (0 at t0). */
double bgwork_pace_count(bgwork_pace_t *p, uint64_t bytes);

/* Under the lock: while ahead of the rate, sleeps it off in naps of at most a
 * second (so that stop is heard). Returns stopped. */
int bgwork_pace_hold(bgwork_t *w, const bgwork_pace_t *p);

/*
 * The names of the buckets (the bucket records, BUCKETS): every store's
 * index (obj_list_versions_all: the latest version of each, not deleted)
 * when every_store, else the object listing (obj_list). Returns a malloc'd
 * NULL-terminated array (never NULL; what was listed before a failure);
 * *rc: the listing's result (< 0: failed, not logged). Free with
 * bgwork_names_free. Blocks on the stores.
 */
char **bgwork_bucket_names(obj_set_t *set, int every_store, int *rc);
void bgwork_names_free(char **names); /* NULL-safe */

#endif
