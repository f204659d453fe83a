#include "common/bufpool.h"

#include "common/log.h"
#include "common/mem.h"

#include <pthread.h>

/*
 * Under AddressSanitizer the pool keeps what malloc'd buffers had: bytes past
 * the length asked for, and a buffer given back, are poisoned, so overruns
 * and use after bufpool_put are reported (mmap'd memory is not tracked).
 */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/*
 * Each buffer is one mapping: a header page, then the buffer. The header
 * page keeps the buffer page-aligned and says how big the mapping is.
 */
#define HDR     4096u
#define GRAIN   (64u << 10) /* sizes are rounded to this, so near sizes share buffers */
#define MAX_BUF (64u << 20)

typedef struct buf {
    struct buf *next;
    size_t cap; /* bytes after the header page */
} buf_t;

struct bufpool {
    pthread_mutex_t mu;
    buf_t *kept; /* sorted by cap, smallest first */
    size_t keep, kept_bytes, out_bytes, maps;
};

bufpool_t *bufpool_new(size_t keep_bytes)
{
    bufpool_t *p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    p->keep = keep_bytes;
    return p;
}

/*
 * Buffers of HUGE and more start on a HUGE boundary and ask for transparent
 * huge pages: a 1 MiB block read into them is one physically contiguous DMA
 * segment instead of 256 (virtio queues take 254 at most, so a block plus its
 * header was split in two requests), a fresh buffer faults in 2 MiB at a time,
 * and the crc, copy and send passes over it miss the TLB less.
 */
#define HUGE (2u << 20)

static buf_t *map_buffer(size_t cap)
{
    size_t extra = cap >= HUGE ? HUGE : 0;
    char *m =
        mmap(NULL, HDR + cap + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        log_error("event=oom bytes=%zu", HDR + cap + extra);
        abort();
    }
    if (!extra) return (buf_t *)m;
    /* Keep [data - HDR, data + cap) with data HUGE-aligned; give back the rest. */
    char *data = (char *)align_up((uintptr_t)m + HDR, HUGE), *end = m + HDR + cap + extra;
    if (data - HDR > m) munmap(m, (size_t)(data - HDR - m));
    if (data + cap < end) munmap(data + cap, (size_t)(end - (data + cap)));
    (void)madvise(data, cap, MADV_HUGEPAGE); /* advice: without THP it is plain pages */
    return (buf_t *)(data - HDR);
}

static void unmap(buf_t *b)
{
    size_t len = HDR + b->cap;
    UNPOISON(b, len); /* a later mapping at this address must start clean */
    munmap(b, len);
}

void bufpool_free(bufpool_t *p)
{
    if (!p) return;
    for (buf_t *b = p->kept, *nx; b; b = nx) {
        nx = b->next;
        unmap(b);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void *bufpool_get(bufpool_t *p, size_t len)
{
    buf_t *b = NULL;
    pthread_mutex_lock(&p->mu);
    /* Smallest kept buffer that fits (the list is short: keep / GRAIN at most). */
    for (buf_t **pp = &p->kept; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= len) {
            b = *pp;
            *pp = b->next;
            p->kept_bytes -= b->cap;
            break;
        }
    if (b) p->out_bytes += b->cap;
    pthread_mutex_unlock(&p->mu);
    if (!b) {
        size_t cap = align_up(len ? len : 1, GRAIN);
        b = map_buffer(cap);
        b->cap = cap;
        pthread_mutex_lock(&p->mu);
        p->out_bytes += cap;
        p->maps++;
        pthread_mutex_unlock(&p->mu);
    }
    char *data = (char *)b + HDR;
    UNPOISON(data, len);
    POISON(data + len, b->cap - len);
    return data;
}

void bufpool_put(bufpool_t *p, void *buf)
{
    if (!buf) return;
    buf_t *b = (buf_t *)((char *)buf - HDR);
    POISON(buf, b->cap); /* kept or unmapped: no one may touch it now */
    pthread_mutex_lock(&p->mu);
    p->out_bytes -= b->cap;
    if (b->cap <= MAX_BUF && p->kept_bytes + b->cap <= p->keep) {
        buf_t **pp = &p->kept;
        while (*pp && (*pp)->cap < b->cap)
            pp = &(*pp)->next;
        b->next = *pp;
        *pp = b;
        p->kept_bytes += b->cap;
        b = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (b) unmap(b);
}

void bufpool_stats(bufpool_t *p, bufpool_stats_t *st)
{
    pthread_mutex_lock(&p->mu);
    st->kept_bytes = p->kept_bytes;
    st->out_bytes = p->out_bytes;
    st->maps = p->maps;
    pthread_mutex_unlock(&p->mu);
}
