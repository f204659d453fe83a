/*
 * clock: injectable time, so that tests can run a simulated day in
 * milliseconds. Production code reads time only through a wl_clock_t.
 */
#ifndef WL_CLOCK_H
#define WL_CLOCK_H

#include <pthread.h>
#include <stdint.h>

typedef struct wl_clock wl_clock_t;
struct wl_clock {
    /* Nanoseconds on a monotonic scale. */
    uint64_t (*now_ns)(wl_clock_t *c);
    /* Sleep (or, for a simulated clock, advance) by ns nanoseconds. */
    void (*sleep_ns)(wl_clock_t *c, uint64_t ns);
};

/* Wall-clock time (CLOCK_REALTIME), ns since the epoch: for times stored or compared across
 * processes and nodes, never for durations within one process. */
uint64_t clock_wall_ns(void);

/* The real monotonic clock (CLOCK_MONOTONIC, nanosleep). Static storage. */
wl_clock_t *clock_real(void);

/* A simulated clock: now_ns returns *t, sleep_ns adds to it atomically. */
typedef struct {
    wl_clock_t base;
    uint64_t t;
} wl_sim_clock_t;

void clock_sim_init(wl_sim_clock_t *c, uint64_t start_ns);
void clock_sim_advance(wl_sim_clock_t *c, uint64_t ns);

/*
 * Initialise *cv to time its waits on CLOCK_MONOTONIC: pthread_cond_timedwait
 * deadlines are then clock_gettime(CLOCK_MONOTONIC) times, which a step of
 * the wall clock neither cuts short nor stretches. Freed with
 * pthread_cond_destroy.
 */
void clock_cond_init(pthread_cond_t *cv);

#define NS_PER_SEC 1000000000ull

#endif
