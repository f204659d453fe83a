/*
 * mem: allocation helpers. xmalloc and friends abort on OOM (server policy,
 * as redis zmalloc); aligned buffers for O_DIRECT and SIMD.
 */
#ifndef WL_MEM_H
#define WL_MEM_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Aligned allocation, size rounded up to a multiple of align; free with free(). */
void *xaligned_alloc(size_t align, size_t n);

static inline size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}
static inline size_t align_down(size_t v, size_t a)
{
    return v / a * a;
}

#endif
