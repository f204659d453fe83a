#include "storage/budget.h"

#include "common/err.h"

void budget_init(budget_t *b, wl_clock_t *clock, double rate, double burst, uint64_t max_delay_ns)
{
    pthread_mutex_init(&b->lock, NULL);
    b->clock = clock;
    b->rate = rate;
    b->burst = burst;
    b->tokens = burst;
    b->last_ns = clock->now_ns(clock);
    b->max_delay_ns = max_delay_ns;
    b->throttled = 0;
    b->delayed_ns = 0;
}

void budget_destroy(budget_t *b)
{
    pthread_mutex_destroy(&b->lock);
}

/* Caller holds b->lock. */
static void refill(budget_t *b)
{
    uint64_t now = b->clock->now_ns(b->clock);
    if (now > b->last_ns) {
        b->tokens += (double)(now - b->last_ns) * 1e-9 * b->rate;
        if (b->tokens > b->burst) b->tokens = b->burst;
        b->last_ns = now;
    }
}

int budget_take(budget_t *b, uint64_t bytes)
{
    if (b->rate <= 0) return 0;
    pthread_mutex_lock(&b->lock);
    refill(b);
    double deficit = (double)bytes - b->tokens;
    if (deficit <= 0) {
        b->tokens -= (double)bytes;
        pthread_mutex_unlock(&b->lock);
        return 0;
    }
    uint64_t wait = (uint64_t)(deficit / b->rate * 1e9) + 1;
    /* A write larger than the bucket is fine: it waits for its deficit like any other. */
    if (wait > b->max_delay_ns) {
        b->throttled++;
        pthread_mutex_unlock(&b->lock);
        return ERR_THROTTLED;
    }
    /*
     * Reserve the bytes now (the bucket goes into debt) so that concurrent
     * takers queue behind us instead of racing for the same refill.
     */
    b->tokens -= (double)bytes;
    b->delayed_ns += wait;
    pthread_mutex_unlock(&b->lock);
    b->clock->sleep_ns(b->clock, wait);
    return 0;
}

int budget_try_take(budget_t *b, uint64_t bytes, double reserve_frac)
{
    int rc = 0;
    if (b->rate <= 0) return 0;
    pthread_mutex_lock(&b->lock);
    refill(b);
    if (b->tokens - (double)bytes >= reserve_frac * b->burst)
        b->tokens -= (double)bytes;
    else
        rc = ERR_THROTTLED;
    pthread_mutex_unlock(&b->lock);
    return rc;
}

void budget_charge(budget_t *b, uint64_t bytes)
{
    if (b->rate <= 0) return;
    pthread_mutex_lock(&b->lock);
    refill(b);
    b->tokens -= (double)bytes;
    pthread_mutex_unlock(&b->lock);
}

double budget_tokens(budget_t *b)
{
    double t;
    pthread_mutex_lock(&b->lock);
    refill(b);
    t = b->tokens;
    pthread_mutex_unlock(&b->lock);
    return t;
}
