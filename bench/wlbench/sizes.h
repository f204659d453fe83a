/*
 * sizes: byte sizes and object-size distributions as users write them.
 *
 * A size is a number with an optional unit: B, KiB/MiB/GiB/TiB (powers of
 * 1024), KB/MB/GB/TB (powers of 1000), or K/M/G/T (taken as binary, as dd
 * and fio do). A distribution is "SIZE" or "SIZE:WEIGHT,SIZE:WEIGHT,...",
 * e.g. "4KiB:70,1MiB:25,64MiB:5".
 */
#ifndef WL_SIZES_H
#define WL_SIZES_H

#include <stdint.h>

#define SIZES_MAX 16

typedef struct {
    int n;
    uint64_t size[SIZES_MAX];
    uint64_t weight[SIZES_MAX];
    uint64_t total; /* sum of weights */
} size_dist_t;

/* 0 or -1 (not a size). */
int size_parse(const char *s, uint64_t *out);

/* 0 or -1 (malformed, zero total weight, too many entries). */
int size_dist_parse(const char *s, size_dist_t *d);

/* The size for a uniform random number r (any 64-bit value). */
uint64_t size_dist_pick(const size_dist_t *d, uint64_t r);

/* Weighted mean size. */
double size_dist_mean(const size_dist_t *d);

/* "64MiB", "4KiB", "1000B": the shortest exact binary form. */
void size_format(uint64_t v, char *out, int cap);

#endif
