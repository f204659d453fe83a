/*
 * budget: the endurance budget of one drive, a token bucket of bytes.
 *
 * Tokens accrue at rate = DWPD x capacity / 86400 bytes per second up to a
 * bounded burst. Every byte the engine writes (data, padding, relocation,
 * the index's own writes) spends tokens. Foreground writes wait for tokens
 * up to a bound, then fail with ERR_THROTTLED (retryable, the gateway's 503
 * SlowDown); background work (compaction) only spends what lies above a
 * reserve, so it never starves the foreground. Time comes from an injectable
 * clock. Thread-safe.
 */
#ifndef WL_BUDGET_H
#define WL_BUDGET_H

#include "common/clock.h"

#include <pthread.h>
#include <stdint.h>

typedef struct {
    pthread_mutex_t lock;
    wl_clock_t *clock;
    double rate;  /* bytes per second; 0 = unlimited */
    double burst; /* bucket size in bytes */
    double tokens;
    uint64_t last_ns;
    uint64_t max_delay_ns; /* longest a foreground write waits */
    uint64_t throttled;    /* foreground writes refused */
    uint64_t delayed_ns;   /* total time foreground writes waited */
} budget_t;

void budget_init(budget_t *b, wl_clock_t *clock, double rate, double burst, uint64_t max_delay_ns);
void budget_destroy(budget_t *b);

/*
 * Foreground: take `bytes`, sleeping (on b->clock) up to max_delay_ns for
 * them to accrue. Returns 0, or ERR_THROTTLED without taking anything when
 * the wait would be longer. Blocking; call without engine locks held.
 */
int budget_take(budget_t *b, uint64_t bytes) __attribute__((warn_unused_result));

/*
 * Background: take `bytes` only if at least reserve_frac x burst tokens stay
 * in the bucket afterwards. Returns 0 or ERR_THROTTLED. Never blocks.
 */
int budget_try_take(budget_t *b, uint64_t bytes, double reserve_frac)
    __attribute__((warn_unused_result));

/* Spend bytes already written elsewhere (e.g. RocksDB's own I/O); may go into debt. */
void budget_charge(budget_t *b, uint64_t bytes);

/* Tokens now (after refill); may be negative while in debt. */
double budget_tokens(budget_t *b);

#endif
