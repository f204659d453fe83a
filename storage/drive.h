/*
 * drive: the per-drive segment store.
 *
 * A drive is a directory holding append-only segment files of a fixed size
 * (a multiple of the drive's indirection unit, IU) and a RocksDB index. The
 * engine turns shard writes into large IU-aligned appends:
 *
 *   - every write the engine issues has offset and length that are
 *     multiples of the IU, with O_DIRECT where the filesystem allows; a
 *     partial IU at a commit is zero-padded and never written again;
 *   - concurrent appends are group-committed: one write and one fdatasync
 *     carry many records, and each append returns only once durable (an
 *     unsynced append returns once written, and is indexed at the flush
 *     that makes it durable: drive_sync);
 *   - the index is written after the data is durable; the segments are the
 *     source of truth, so the index can be replayed or rebuilt from them:
 *     it has no write-ahead log of its own, and a kill -9 costs a replay of
 *     what was appended since its last flush (index_flush_bytes at most,
 *     memtable aside), never an acknowledged write;
 *   - compaction relocates live records out of mostly-dead segments into GC
 *     segments and releases whole segments;
 *   - an endurance budget (DWPD) meters every byte written.
 *
 * Threads: a drive_t is shared by any number of threads; every call is
 * thread-safe. drive_put/drive_delete block until durable (or failed);
 * drive_put_async/drive_delete_async return at once and call back when
 * durable, so a caller can keep many writes in flight on many drives
 * without a thread blocked per write. A commit thread per drive runs group
 * commits for asynchronous submissions (a synchronous caller that finds no
 * commit under way runs its own, saving the hand-off). A background thread
 * runs compaction unless cfg.compaction is 0.
 */
#ifndef WL_DRIVE_H
#define WL_DRIVE_H

#include "common/clock.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct drive drive_t;

typedef struct {
    const char *path;       /* drive directory (created if missing) */
    const char *index_path; /* RocksDB dir; NULL = <path>/index (set it to a faster device) */
    uint64_t capacity;      /* bytes the drive may use; 0 = as recorded in <path>/DRIVE */
    uint32_t iu;            /* 0 = detect from the device, else 4096 */
    uint64_t segment_size;  /* 0 = 256 MiB; multiple of iu */
    double dwpd;            /* rated DWPD for sequential writes (e.g. 1.83 for a P5430) */
    double dwpd_random;     /* rated DWPD for random 4 KiB writes (e.g. 0.58); used only when
                               dwpd is 0, since the engine only writes large sequential
                               appends; both 0 = no budget */
    double warranty_years;  /* 0 = 5 */
    uint64_t burst_bytes;   /* budget bucket; 0 = one hour of budget */
    uint64_t max_delay_ms;  /* longest a throttled append waits; 0 = 2000 */
    uint32_t max_batch;     /* bytes per group commit; 0 = 32 MiB */
    /*
     * A group commit of less than an IU waits up to this long (and at most
     * as long as a flush takes) for more records, while callers keep
     * several in flight (the last commit carried more than one): fewer
     * flushes and less IU padding for small records. 0 = never wait.
     */
    uint32_t commit_gather_us;
    int compaction;      /* 1 = background compaction thread */
    double gc_free_low;  /* compact when free segments fall below this fraction (0 = 0.10) */
    double gc_dead_high; /* ... or a segment is this dead (0 = 0.75) */
    double gc_max_live;  /* never relocate a segment more live than this unless space is
                            critical (0 = 0.85) */
    double gc_reserve;   /* budget fraction kept for foreground (0 = 0.25) */
    /*
     * Files of released segments kept to be written again as user segments
     * (drive_seg.c, the pool): 0 = 4, -1 = none (every released file is
     * unlinked). A file written before needs no extent conversion at its
     * next fdatasync; a fresh preallocated one does.
     */
    int segment_pool;
    int buffered;      /* 1 = no O_DIRECT (testing on tmpfs) */
    wl_clock_t *clock; /* NULL = real time */

    /*
     * Start an index flush after this many bytes appended to segments (0 =
     * 256 MiB), or after 64k records: bounds what an open after kill -9
     * rescans. Each flush costs one small table file and a MANIFEST record:
     * nothing next to the data it covers.
     */
    uint64_t index_flush_bytes;

    /*
     * The block cache the drive's index shares with the node's other drives
     * (storage/idx.h); NULL: a cache of its own (IDX_OWN_CACHE bytes).
     */
    struct idx_cache *index_cache;
} drive_cfg_t;

/* Identity of a shard on the drive: NUL-terminated strings without NUL inside. */
typedef struct {
    const char *bucket;
    const char *key;
    const char *version; /* "" for the null version */
    uint32_t shard;
} drive_id_t;

typedef struct {
    uint64_t len; /* payload bytes */
    uint64_t seq; /* sequence number of the record */
    uint32_t crc; /* crc32c of the record header (covers the payload's chunk crcs) */
    uint32_t meta_len;
} drive_stat_t;

typedef struct {
    uint32_t iu;
    uint64_t capacity, segment_size;
    uint32_t segments, segments_free, segments_gc;
    uint64_t live_bytes;      /* bytes of live records (headers included) */
    uint64_t used_bytes;      /* segments allocated x segment size */
    uint64_t written_bytes;   /* bytes written into the segments that stand, up to each one's
                               * tail; one an open sealed counts whole (its end is not kept) */
    uint64_t user_bytes;      /* payload bytes appended by callers */
    uint64_t host_bytes;      /* every byte written: records, padding, relocation, index */
    uint64_t padding_bytes;   /* zero fill to IU boundaries */
    uint64_t relocated_bytes; /* records copied by compaction */
    uint64_t index_bytes;     /* RocksDB's own writes (flush, compaction; there is no WAL) */
    uint64_t flushes, flush_records, flush_bytes, flush_max_records;
    uint64_t commit_gathers;   /* group commits that waited for more records (commit_gather_us) */
    uint64_t unsynced_commits; /* commits of unsynced writes alone: written without a flush */
    uint64_t uncopied_bytes;   /* payload bytes written from the caller's memory, not copied */
    uint64_t queued; /* appends waiting for a commit to take them (group commit's queue) */
    uint64_t compactions, segments_released, tombstones_dropped;
    uint64_t segments_recycled; /* user segments written into a pooled file */
    uint32_t segments_pooled;   /* released files waiting in the pool */
    uint64_t throttled;         /* appends refused with ERR_THROTTLED */
    uint64_t reads_direct;      /* payload reads the device put straight into the caller's buffer */
    uint64_t reads_copied;      /* payload reads through a bounce buffer and a copy */
    double write_amp;           /* host_bytes / user_bytes */
    double budget_left;         /* tokens in bytes (negative while in debt) */
    double budget_rate;         /* bytes per second */
    double projected_years;     /* rated life left at the current write rate */
    uint64_t lifetime_host_bytes;
    uint64_t index_disk_bytes; /* RocksDB SST files */
    uint64_t index_mem_bytes;  /* memtables + table readers (+ its block cache, unless shared) */
    int readonly;              /* a write or flush failed: writes refused until reopened */
    int refilling;             /* drive_set_refilling: replaced, not yet refilled */

    /*
     * At open: segment bytes past the index's recorded tails that held
     * records (what a crash took from the index's memtable), rescanned.
     */
    uint64_t replayed_bytes;
} drive_stats_t;

/*
 * Open (or create) a drive. Replays records written after the last indexed
 * position; rebuilds the index from the segments if it is missing or
 * unreadable (or of the layout before versioned values). Returns 0,
 * ERR_INVAL (bad config), ERR_CORRUPT (a segment superblock that does not
 * decode or disagrees with the drive's geometry, or an index value that does
 * not decode: logged, naming what; nothing is thrown away), ERR_NOMEM,
 * ERR_IO.
 */
int drive_open(const drive_cfg_t *cfg, drive_t **out) __attribute__((warn_unused_result));
/*
 * Stop compaction, commit the writes still queued (their callbacks run
 * before it returns), flush state, close. NULL is a no-op. A write that
 * races the close is either committed like the rest or refused with
 * ERR_CLOSED; none may be submitted once it returned (d is gone).
 */
void drive_close(drive_t *d);

/*
 * Store a shard (replacing any previous one with the same identity). meta is
 * an opaque blob kept with the index entry and in the record. Blocks until
 * durable. Returns 0, ERR_INVAL, ERR_TOO_LARGE, ERR_NOSPC, ERR_THROTTLED
 * (retry later), ERR_READONLY (an earlier write or flush failed), ERR_IO,
 * ERR_CLOSED (drive_close has begun).
 */
int drive_put(drive_t *d, const drive_id_t *id, const void *data, size_t len, const void *meta,
              size_t meta_len) __attribute__((warn_unused_result));

/* Delete: writes a tombstone. ERR_NOT_FOUND when there is nothing to delete. */
int drive_delete(drive_t *d, const drive_id_t *id) __attribute__((warn_unused_result));

/*
 * Completion of an asynchronous write: rc is what drive_put (drive_delete)
 * would have returned. It runs once the record is durable and indexed (or
 * failed), on the drive's commit thread or inside another caller's
 * drive_put/drive_delete of the same drive, with no lock of the drive held.
 * It must be short and must not block: in particular it must not call the
 * synchronous drive_put/drive_delete (nor drive_close) of that drive, which
 * would wait for the very commit that runs it. Submitting more
 * asynchronous writes from it is fine.
 */
typedef void (*drive_done_fn)(void *arg, int rc);

/*
 * drive_put without waiting. Returns 0 when the write is queued: done(arg, rc) then runs exactly
 * once, and data and meta must stay valid and unchanged until it does (id is copied): a large
 * payload in a 4 KiB-aligned buffer is written to the drive from there, not copied. Returns
 * ERR_INVAL or ERR_TOO_LARGE (checked at once), or ERR_CLOSED (the drive is closing), and then
 * done is never called. Writes submitted from one thread are committed in submission order.
 * drive_close waits for every write queued before it (their callbacks run before it returns).
 */
int drive_put_async(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                    const void *meta, size_t meta_len, drive_done_fn done, void *arg)
    __attribute__((warn_unused_result));

/*
 * drive_put_async for a writer that needs durability only at checkpoints of
 * its own (a refill's rebuilt blocks, durable before the heads that name
 * them): done(arg, rc) runs once the record is written, and rc 0 says only
 * that. It is neither durable nor readable (not indexed) until a flush covers
 * it: drive_sync, or any durable commit of the drive after it. A commit of
 * such writes alone skips its fdatasync, so many commits share one flush. A
 * crash before that flush may take any of them (replay indexes those that
 * landed whole). Otherwise as drive_put_async.
 */
int drive_put_async_unsynced(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                             const void *meta, size_t meta_len, drive_done_fn done, void *arg)
    __attribute__((warn_unused_result));

/*
 * Make every drive_put_async_unsynced write whose callback has run durable
 * and readable (one fdatasync, then the index); blocks. 0, or the drive's
 * error when it cannot: ERR_READONLY or ERR_IO (a write or flush failed:
 * unsynced writes may be lost, none of them is indexed), ERR_CLOSED. Cheap
 * when there is nothing to flush: one pass through the commit queue. Never
 * from a drive_done_fn of the same drive (as drive_put: it would wait for the
 * commit that runs it).
 */
int drive_sync(drive_t *d) __attribute__((warn_unused_result));

/*
 * drive_put_async of a metadata-only record whose write lets space go (the
 * gateway's tombstone head: the version it retires is dropped after it):
 * like a tombstone it may take the space kept for deletes, the file
 * system's spare included, so that a full drive still takes deletes.
 */
int drive_put_async_frees(drive_t *d, const drive_id_t *id, const void *meta, size_t meta_len,
                          drive_done_fn done, void *arg) __attribute__((warn_unused_result));

/*
 * drive_delete without waiting; as drive_put_async. ERR_NOT_FOUND (nothing
 * to delete: looked up before returning) is returned at once, done not called.
 */
int drive_delete_async(drive_t *d, const drive_id_t *id, drive_done_fn done, void *arg)
    __attribute__((warn_unused_result));

/*
 * Metadata of a shard. If meta is non-NULL, up to meta_cap bytes of the blob
 * are copied there (st->meta_len tells the full length). ERR_NOT_FOUND.
 */
int drive_stat(drive_t *d, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap)
    __attribute__((warn_unused_result));

/*
 * Read payload bytes [off, off+len) of a shard into buf, verifying the crc of
 * every 64 KiB chunk touched. Returns 0, ERR_NOT_FOUND, ERR_RANGE, ERR_CORRUPT
 * (never the bad bytes as a success: on any error buf's contents are
 * undefined), ERR_IO.
 */
int drive_read(drive_t *d, const drive_id_t *id, uint64_t off, void *buf, size_t len)
    __attribute__((warn_unused_result));

/*
 * drive_read of [off, off+len+tail_len) into two places: the first len bytes
 * into buf, the rest into tail, for a payload that is data followed by a
 * trailer (a block and its crc). When buf is DIO_ALIGN (4096) aligned, off is
 * a chunk boundary and the record was written aligned (large payloads are),
 * the data is read from the device straight into buf: no bounce, no copy.
 * With buf_crc, *buf_crc is the crc32c of the len bytes as they lie in buf,
 * derived from the chunk crcs checked over those very bytes (no second pass)
 * or, after a copy, computed over the copy.
 */
int drive_read_split(drive_t *d, const drive_id_t *id, uint64_t off, void *buf, size_t len,
                     void *tail, size_t tail_len, uint32_t *buf_crc)
    __attribute__((warn_unused_result));

/*
 * drive_read_split in two halves, for a caller that does the I/O itself (all
 * of a stripe's block reads in one submission, no thread per read): on 0 with
 * *op set, read io (one preadv of io->cnt iovecs at io->pos, io->len bytes)
 * and hand its result (bytes read or -errno) to drive_read_end, which
 * finishes the read (a short or failed one here), verifies it and returns
 * what drive_read_split would. On 0 with *op NULL there was nothing to read;
 * ERR_AGAIN: nothing begun, the read is not one preadv into place (an
 * unaligned buffer or record, or a test's drive_io in place): read it with
 * drive_read_split. Other errors are drive_read_split's. id's strings must
 * stay valid until drive_read_end.
 */
typedef struct drive_rd drive_rd_t;
typedef struct {
    int fd;
    const struct iovec *iov;
    int cnt;
    uint64_t pos;
    size_t len;
} drive_rd_io_t;
int drive_read_begin(drive_t *d, const drive_id_t *id, uint64_t off, void *buf, size_t len,
                     void *tail, size_t tail_len, uint32_t *buf_crc, drive_rd_t **op,
                     drive_rd_io_t *io) __attribute__((warn_unused_result));
int drive_read_end(drive_rd_t *op, ssize_t res) __attribute__((warn_unused_result));

/*
 * A whole record in one go: its metadata (as drive_stat: up to meta_cap
 * bytes into meta, st->meta_len the full length) and its payload (into buf,
 * which must hold st->len bytes: ERR_RANGE, with *st filled, when cap is
 * smaller), both of the same record, from one index lookup and one read
 * when they lie close: a small object stored inline in its head is one
 * call, with no window in which another write of the identity could pair
 * one record's metadata with another's bytes. Every chunk is verified.
 * Returns 0, ERR_NOT_FOUND, ERR_RANGE, ERR_CORRUPT, ERR_IO.
 */
int drive_get(drive_t *d, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap,
              void *buf, size_t cap) __attribute__((warn_unused_result));

/*
 * List shards of a bucket whose key starts with prefix, in key order,
 * starting after `after` (NULL = from the start). The callback gets each
 * identity and stat; returning non-zero stops the walk (and is returned).
 * Returns 0 only when the walk ran to the end of the bucket (or prefix):
 * ERR_IO (logged) when the index failed under it, ERR_CORRUPT (logged) for
 * an index entry that does not decode, ERR_INVAL for bad arguments; then the
 * callback saw only part of the listing and the caller must not take it for
 * the whole.
 */
typedef int (*drive_list_fn)(void *arg, const drive_id_t *id, const drive_stat_t *st);
int drive_list(drive_t *d, const char *bucket, const char *prefix, const char *after,
               drive_list_fn fn, void *arg) __attribute__((warn_unused_result));

/*
 * drive_list with each entry's metadata blob (the index value holds it, so
 * it costs no extra read) and finer places to start, for listings that
 * merge several drives and resume or skip where they left off:
 *   DRIVE_FROM_START    at the start of the bucket (or prefix)
 *   DRIVE_PAST_KEY      past every version and shard of from->key
 *   DRIVE_PAST_VERSION  past every shard of (from->key, from->version)
 *   DRIVE_PAST_PREFIX   past every key that starts with from->key (a
 *                       delimiter's common prefix: one seek, however many
 *                       keys it rolls up)
 * A start before the prefix starts at the prefix. fn gets meta
 * (st->meta_len bytes, valid during the call). Returns as drive_list.
 */
enum { DRIVE_FROM_START = 0, DRIVE_PAST_KEY, DRIVE_PAST_VERSION, DRIVE_PAST_PREFIX };
typedef struct {
    int how;             /* DRIVE_FROM_START, DRIVE_PAST_* */
    const char *key;     /* DRIVE_PAST_*: a key, or a key prefix */
    const char *version; /* DRIVE_PAST_VERSION */
} drive_from_t;
typedef int (*drive_scan_fn)(void *arg, const drive_id_t *id, const drive_stat_t *st,
                             const void *meta);
int drive_scan(drive_t *d, const char *bucket, const char *prefix, const drive_from_t *from,
               drive_scan_fn fn, void *arg) __attribute__((warn_unused_result));

/*
 * Run compaction now: release empty segments and relocate at most
 * `max_victims` segments (0 = until nothing qualifies). force=1 ignores the
 * free-space trigger (still honours the budget). Returns segments released
 * (0 on a read-only drive, which writes nothing).
 */
int drive_compact(drive_t *d, int max_victims, int force);
/* The index flushed, then compacted into one sorted run (idx_compact): 0 or an ERR_*. */
int drive_index_compact(drive_t *d) __attribute__((warn_unused_result));
/* Pause or resume the background compaction thread. */
void drive_compaction_pause(drive_t *d, int paused);

void drive_stats(drive_t *d, drive_stats_t *st);

/* Memory a drive holds that grows with use, in bytes (the node's memory report). */
typedef struct {
    uint64_t index_memtables, index_readers; /* idx_mem_t's */
    uint64_t index_cache;                    /* its own block cache's contents; 0 when shared */
    uint64_t buffers_kept, buffers_out;      /* direct-read bounce buffers */
    uint64_t writer_buffers;                 /* its group commits' buffers (user, compaction) */
} drive_mem_t;
void drive_mem(drive_t *d, drive_mem_t *m);

/*
 * The engine's accounting against its index (wl-drive check): for every
 * segment, its live counter and the bytes of the index entries pointing into
 * it (they must be equal), and the bytes of entries past its tail (there
 * must be none); *dangling: entries naming a segment that does not exist.
 * fn (may be NULL) sees each segment. Returns 0 when all agree, 1 when
 * something does not, or an error. No writers meanwhile (tools, tests).
 */
typedef struct {
    uint32_t seg;
    uint8_t kind; /* 1 user, 2 GC */
    uint64_t live, indexed, past_tail;
} drive_check_seg_t;
typedef void (*drive_check_fn)(void *arg, const drive_check_seg_t *c);
int drive_check(drive_t *d, drive_check_fn fn, void *arg, uint64_t *dangling)
    __attribute__((warn_unused_result));

/* Flush the index's memtables to disk and wait (tools, benchmarks and tests). */
int drive_index_flush(drive_t *d) __attribute__((warn_unused_result));

/*
 * Walk every valid record on disk (not the index): segment id, offset, and
 * the record's type (1 data, 2 tombstone), sequence number, identity, payload
 * length and metadata. For inspection tools (wl-drive dump). Open drive only.
 * Returns 0, the callback's non-zero value, or ERR_IO (a segment read failed).
 */
typedef int (*drive_dump_fn)(void *arg, uint32_t seg, uint64_t off, int type, uint64_t seq,
                             const drive_id_t *id, uint64_t len, const void *meta, size_t meta_len);
int drive_dump(drive_t *d, drive_dump_fn fn, void *arg) __attribute__((warn_unused_result));

/* Rebuild the index of a closed drive from its segments alone. */
int drive_rebuild_index(const drive_cfg_t *cfg) __attribute__((warn_unused_result));

/*
 * Detect the IU of the device holding path from its sysfs queue attributes
 * (4096 when there are none: tmpfs, overlay, no /sys): drive_iu_choose.
 */
uint32_t drive_detect_iu(const char *path);
/*
 * The IU for a device reporting these (0 = not reported): optimal_io_size
 * when it is a power of two from 4 KiB to 1 MiB and a multiple of the larger
 * block size; else the larger of the physical and logical block sizes when
 * that is one; else 4096.
 */
/*
 * Whether a file whose direct I/O wants buffers aligned to mem_align and
 * offsets and lengths to offset_align (statx STATX_DIOALIGN; 0: not told)
 * takes the engine's: every read and every piece of a write whole 4 KiB
 * units at 4 KiB boundaries. A device with a larger logical block does not:
 * its drive runs buffered (with fdatasync) instead of failing every write.
 */
int drive_dio_fits(uint32_t mem_align, uint32_t offset_align);
uint32_t drive_iu_choose(uint64_t optimal_io_size, uint64_t physical_block_size,
                         uint64_t logical_block_size);

/* ---- test hooks: every engine syscall on segment files goes through here ---- */
typedef struct {
    /* Every write: a commit is pieces of the writer's buffer and of callers' payloads. */
    ssize_t (*pwritev)(int fd, const struct iovec *iov, int cnt, off_t off);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
    ssize_t (*preadv)(int fd, const struct iovec *iov, int cnt, off_t off);
    int (*fdatasync)(int fd);
    int (*fallocate)(int fd, int mode, off_t off, off_t len);
} drive_io_t;
extern drive_io_t drive_io;

/*
 * The drive holds less than its set expects: it replaced one that failed and
 * the heal scanner has not refilled it yet. A mark for readers that merge
 * some stores' indexes (a listing takes k of them): they take it last. Not
 * persisted by the engine (the server keeps a marker file beside it).
 */
void drive_set_refilling(drive_t *d, int on);
int drive_refilling(drive_t *d);

#endif
