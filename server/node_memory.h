/*
 * node_memory: what the node's memory holds, by owner, for /_warmlake/stats.
 *
 * A node's memory that grows with use is bounded by its settings: each
 * drive's index memtables (flushed every index_flush_bytes appended or 64k
 * records), the index block cache (--index-cache, shared by the node's
 * drives), the stripe buffers kept between requests (OBJ_BUF_KEEP) and each
 * drive's direct-read buffers (BOUNCE_KEEP). The report sets those beside
 * what the process holds (RSS) and what malloc holds and hands out, so a
 * growth can be told from fragmentation or a leak.
 */
#ifndef WL_NODE_MEMORY_H
#define WL_NODE_MEMORY_H

#include <stdint.h>

typedef struct {
    uint64_t rss;                  /* resident bytes of the process */
    uint64_t malloc_in_use;        /* handed out by malloc (mmapped chunks included) */
    uint64_t malloc_held;          /* taken from the system by malloc, in use or free */
    uint64_t index_memtables;      /* every local drive's memtables */
    uint64_t index_readers;        /* their table readers outside the cache */
    uint64_t index_cache;          /* the block cache's contents (shared, or the drives' own) */
    uint64_t index_cache_capacity; /* what it may hold */
    uint64_t drive_buffers;        /* direct-read buffers the drives keep or lent out */
    uint64_t writer_buffers;       /* the drives' group commit buffers */
    uint64_t stripe_buffers_kept;  /* the object layer's stripe buffers, waiting */
    uint64_t stripe_buffers_out;   /* ... and lent out to requests now */
} node_memory_t;

/*
 * Sets malloc up for a long-running node; call first, before any thread
 * starts. glibc raises its mmap threshold to the size of each large block it
 * frees (up to 32 MiB), after which blocks of that size come from its arenas
 * and stay there once freed: a node serving 8 MiB objects held 1.34 GB of
 * malloc memory with 0.43 GB of it in use (16 arenas of freed request and
 * commit buffers). A fixed threshold (NODE_MALLOC_MMAP) keeps it where it is:
 * every block that large is mapped and unmapped on its own, and what is freed
 * below it is reused by the next request of its size.
 */
#define NODE_MALLOC_MMAP (2u << 20)
void node_memory_setup(void);

/* What the process holds (rss, malloc_*); the other fields are left as they are. */
void node_memory_process(node_memory_t *m);

#endif
