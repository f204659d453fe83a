/*
 * gen: the content of benchmark objects, computed rather than stored.
 *
 * Every object's bytes follow from a seed derived from (run seed, key,
 * size): byte i is byte i%8 of mix(seed, i/8). Any range of any object can
 * be produced or checked on its own, so GETs (ranged or whole) verify
 * without a stored copy, and an object of another size or another key (a
 * torn or misplaced write) fails the check.
 */
#ifndef WL_GEN_H
#define WL_GEN_H

#include <stddef.h>
#include <stdint.h>

/* Seed of one object's content. */
uint64_t gen_seed(uint64_t run_seed, const char *key, uint64_t size);

/* The len bytes of the object at offset off. */
void gen_fill(uint64_t seed, uint64_t off, void *buf, size_t len);

/* Offset (relative to buf) of the first byte that differs, or -1 when all match. */
int64_t gen_check(uint64_t seed, uint64_t off, const void *buf, size_t len);

/* Key number n under prefix: "<prefix>" + 12-digit zero-padded n (sorts in order). */
void gen_key(const char *prefix, uint64_t n, char *out, size_t cap);

#endif
