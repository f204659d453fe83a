/*
 * hist: a latency histogram with bounded relative error (log-linear
 * buckets: 64 sub-buckets per power of two, so any quantile is within
 * 1/64 = 1.6% of the true value), fixed size, mergeable, no allocation.
 * Values are nanoseconds; anything over 2^46 ns (19 hours) lands in the top
 * bucket.
 */
#ifndef WL_HIST_H
#define WL_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_EXPS     41
#define HIST_BUCKETS  ((HIST_EXPS) << HIST_SUB_BITS)

typedef struct {
    uint64_t count, sum, min, max;
    uint32_t b[HIST_BUCKETS];
} hist_t;

void hist_init(hist_t *h);
void hist_add(hist_t *h, uint64_t v);
void hist_merge(hist_t *into, const hist_t *from);

/* Value at quantile q (0..1): the upper edge of the bucket holding it, capped by max. */
uint64_t hist_quantile(const hist_t *h, double q);
double hist_mean(const hist_t *h);

#endif
