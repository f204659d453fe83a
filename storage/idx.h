/*
 * idx: the drive's RocksDB index (C API), behind a small interface.
 *
 * Tuned for low write amplification on flash: a large memtable, universal
 * compaction, LZ4 blocks with a bloom filter. No write-ahead log: the
 * drive's segments are the log, and its replay restores what a crash took
 * from the memtable. Flushes and compactions write with O_DIRECT in
 * IDX_WRITE_CHUNK pieces. RocksDB's errptr strings are turned into ERR_IO
 * plus one log line here and freed. Thread-safe as RocksDB is; batches and
 * iterators belong to one thread.
 *
 * Durability: idx_write applies a batch to the memtable only. What a crash
 * (kill -9 included) leaves is the state as of the last completed flush: a
 * prefix of the batches written, in order. Only idx_flush makes a batch
 * durable.
 */
#ifndef WL_IDX_H
#define WL_IDX_H

#include <stddef.h>
#include <stdint.h>

/* Size of each write of a flush or compaction (the last one of a file: up to this). */
#define IDX_WRITE_CHUNK (1u << 20)

typedef struct idx idx_t;
typedef struct idx_batch idx_batch_t;
typedef struct idx_iter idx_iter_t;
typedef struct idx_cache idx_cache_t;

/* Open or create the index at path. ERR_IO (logged) when RocksDB refuses it. */
int idx_open(const char *path, idx_t **out) __attribute__((warn_unused_result));

/*
 * A block cache that several indexes share (a node's drives): its capacity
 * bounds what they keep all together, and a busy drive may use what an idle
 * one does not. idx_open_shared takes one (NULL: the index gets a cache of
 * IDX_OWN_CACHE bytes of its own, as idx_open gives). Free it after every
 * index that uses it has closed.
 */
#define IDX_OWN_CACHE (32u << 20)
idx_cache_t *idx_cache_new(size_t bytes);
void idx_cache_free(idx_cache_t *c);
size_t idx_cache_usage(idx_cache_t *c);
size_t idx_cache_capacity(idx_cache_t *c);
int idx_open_shared(const char *path, idx_cache_t *cache, idx_t **out)
    __attribute__((warn_unused_result));
void idx_close(idx_t *x);

/*
 * Point lookup, through batch b's uncommitted writes when b is non-NULL.
 * On 0, *val is a malloc'd copy (free with free()) of *vlen bytes.
 * ERR_NOT_FOUND or ERR_IO otherwise.
 */
int idx_get(idx_t *x, idx_batch_t *b, const void *key, size_t klen, void **val, size_t *vlen)
    __attribute__((warn_unused_result));

idx_batch_t *idx_batch_new(void);
/*
 * A write-only batch: cheaper by far for large batches (each write to an
 * indexed one is a search of its skiplist of entries), but idx_get cannot
 * read through it (it aborts if asked to).
 */
idx_batch_t *idx_batch_new_plain(void);
void idx_batch_put(idx_batch_t *b, const void *k, size_t kl, const void *v, size_t vl);
void idx_batch_delete(idx_batch_t *b, const void *k, size_t kl);
void idx_batch_clear(idx_batch_t *b);
int idx_batch_count(idx_batch_t *b);
void idx_batch_free(idx_batch_t *b);

/* Apply a batch atomically, to the memtable: durable once a later idx_flush returns. */
int idx_write(idx_t *x, idx_batch_t *b) __attribute__((warn_unused_result));

/*
 * Iterate keys >= start, in order:
 *
 *   idx_iter_t *it = idx_iter_new(x, start, len);
 *   for (; idx_iter_valid(it); idx_iter_next(it)) ... key, value ...
 *   rc = idx_iter_status(it);   0: ran out of keys; ERR_IO: stopped by an error
 *   idx_iter_free(it);
 *
 * An iteration also ends when RocksDB fails under it (an unreadable block):
 * idx_iter_valid returns 0 then too, and only idx_iter_status tells the two
 * apart. A walk that does not ask may be silently short.
 */
idx_iter_t *idx_iter_new(idx_t *x, const void *start, size_t len);
/*
 * The same over [start, end) only: keys >= end are never read (RocksDB
 * stops every sorted run at end, so the walk's last step reads nothing past
 * the range). end is copied. For scans that know where they stop.
 */
idx_iter_t *idx_iter_range(idx_t *x, const void *start, size_t len, const void *end,
                           size_t end_len);
int idx_iter_valid(idx_iter_t *it) __attribute__((warn_unused_result));
void idx_iter_next(idx_iter_t *it);
const char *idx_iter_key(idx_iter_t *it, size_t *len);
const char *idx_iter_value(idx_iter_t *it, size_t *len);
/* 0, or ERR_IO (logged once) when the iteration stopped on an error. */
int idx_iter_status(idx_iter_t *it) __attribute__((warn_unused_result));
void idx_iter_free(idx_iter_t *it);

/*
 * Bytes RocksDB wrote so far in this process: flush + compaction (no WAL).
 * Reading RocksDB's statistics means formatting all of them as text (the C
 * API of RocksDB 7.8 has no per-ticker read), so the figure is cached and
 * read again only when this index was written through since, or RocksDB was
 * still flushing or compacting at the last read: an idle drive costs nothing.
 */
uint64_t idx_bytes_written(idx_t *x);
/* Times idx_bytes_written read RocksDB's statistics (for tests). */
uint64_t idx_stats_reads(idx_t *x);
/* SST + WAL bytes on disk. */
uint64_t idx_disk_bytes(idx_t *x);
/* Memory the index holds, in bytes. */
typedef struct {
    uint64_t memtables; /* active and immutable memtables (flushed ones RocksDB still holds) */
    uint64_t readers;   /* open table files' index and filter blocks outside the cache */
    uint64_t cache;     /* its own block cache's contents; 0 when it shares one */
} idx_mem_t;
void idx_mem(idx_t *x, idx_mem_t *m);
/* The sum of idx_mem's parts. */
uint64_t idx_mem_bytes(idx_t *x);
/* Flush memtables to SST files and wait: every batch written before the call is durable. */
int idx_flush(idx_t *x) __attribute__((warn_unused_result));
/*
 * Merge every sorted run into one and wait (RocksDB's manual compaction of the whole key
 * range): entries that newer ones replaced or deleted are dropped. What the index takes on
 * disk once its own compaction has caught up. Offline (wl-drive compact): it runs on the
 * caller's thread and holds RocksDB's own compactions back meanwhile. 0 or ERR_IO.
 */
int idx_compact(idx_t *x) __attribute__((warn_unused_result));
/* Start a flush of what was written so far and return (RocksDB's threads write it). */
int idx_flush_start(idx_t *x) __attribute__((warn_unused_result));
/* 1 while a flush is waiting or running (for tests that wait for idx_flush_start's). */
int idx_flushing(idx_t *x);

#endif
