/*
 * bufpool: large page-aligned buffers, kept for reuse.
 *
 * Per-request buffers of megabytes (a GET's stripe buffers, a PUT's stripe
 * slots, a drive's read bounce buffers) are taken and given back at a high
 * rate by many threads. Through malloc they land in per-thread arenas whose
 * freed middles are never handed back to the kernel: a node's RSS grew to
 * 2 GiB under 16 GET streams that need 200 MiB. Here they come from mmap
 * (page-aligned, so O_DIRECT can fill them; returned whole by munmap) and up
 * to keep_bytes of them wait for the next request, so steady load does not
 * fault in and zero fresh pages for every request either.
 */
#ifndef WL_BUFPOOL_H
#define WL_BUFPOOL_H

#include <stddef.h>

typedef struct bufpool bufpool_t;

bufpool_t *bufpool_new(size_t keep_bytes);
/* Everything given back is unmapped; buffers still out must not be put after this. */
void bufpool_free(bufpool_t *p);

/* A buffer of at least len bytes (len > 0), page-aligned, contents undefined. Aborts on OOM. */
void *bufpool_get(bufpool_t *p, size_t len);
/* Give a buffer back (NULL is a no-op): kept while the pool holds under keep_bytes, else unmapped.
 */
void bufpool_put(bufpool_t *p, void *buf);

typedef struct {
    size_t kept_bytes; /* waiting in the pool */
    size_t out_bytes;  /* handed out, not yet given back */
    size_t maps;       /* mmap calls so far (a get the pool could not serve) */
} bufpool_stats_t;
void bufpool_stats(bufpool_t *p, bufpool_stats_t *st);

#endif
