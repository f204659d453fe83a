#include "bench/wlbench/hist.h"

#include <string.h>

#define SUB (1u << HIST_SUB_BITS)

void hist_init(hist_t *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

/* Values below SUB map one to one; above, a power of two splits into SUB buckets. */
static uint32_t bucket_of(uint64_t v)
{
    if (v < SUB) return (uint32_t)v;
    int e = 63 - __builtin_clzll(v); /* >= HIST_SUB_BITS */
    uint32_t sub = (uint32_t)(v >> (e - HIST_SUB_BITS)) & (SUB - 1);
    uint32_t i = (uint32_t)(e - HIST_SUB_BITS + 1) * SUB + sub;
    return i < HIST_BUCKETS ? i : HIST_BUCKETS - 1;
}

/* The largest value that maps to bucket i. */
static uint64_t bucket_top(uint32_t i)
{
    if (i < SUB) return i;
    uint32_t e = i / SUB + HIST_SUB_BITS - 1, sub = i % SUB;
    return ((uint64_t)(SUB + sub + 1) << (e - HIST_SUB_BITS)) - 1;
}

void hist_add(hist_t *h, uint64_t v)
{
    h->b[bucket_of(v)]++;
    h->count++;
    h->sum += v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
}

void hist_merge(hist_t *into, const hist_t *from)
{
    for (uint32_t i = 0; i < HIST_BUCKETS; i++)
        into->b[i] += from->b[i];
    into->count += from->count;
    into->sum += from->sum;
    if (from->min < into->min) into->min = from->min;
    if (from->max > into->max) into->max = from->max;
}

uint64_t hist_quantile(const hist_t *h, double q)
{
    if (!h->count) return 0;
    if (q <= 0) return h->min;
    /* rank: the smallest value with at least ceil(q*count) values at or below it */
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > h->count) rank = h->count;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            if (i == HIST_BUCKETS - 1) return h->max; /* the saturating bucket */
            uint64_t top = bucket_top(i);
            if (top > h->max) top = h->max;
            if (top < h->min) top = h->min;
            return top;
        }
    }
    return h->max;
}

double hist_mean(const hist_t *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0;
}
