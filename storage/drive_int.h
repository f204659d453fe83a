/*
 * drive_int.h: internals shared by the drive engine's files.
 *
 *   drive.c        index entries, the write entry points, stats
 *   drive_open.c   open (replay, rebuild), close, the offline rebuild and dump
 *   drive_read.c   stat, reads (ranges, whole records), scans and listings
 *   drive_seg.c    segment files: create, load, refs, the pool, scan, IU detection
 *   drive_io.c     the I/O table tests replace (drive_io), aligned and in-place reads
 *   drive_write.c  writers (pack, pad, write, flush, index), group commit,
 *                  the switch to read-only after a failed write or flush
 *   drive_gc.c     compaction and the background thread
 *   codec.c        on-disk formats: superblock, index keys and values (codec.h)
 *   idx.c          the RocksDB index (idx.h)
 *   rec.c          the record format (rec.h)
 *   budget.c       the endurance budget (budget.h)
 *
 * Locks, in the order they may be taken:
 *   q_lock     the group-commit queue of user appends, `leader`, `closing`
 *              (never held across a commit, nor while callbacks run)
 *   gc_lock    one compaction at a time (owns the GC writer)
 *   lock       segment table, accounting, every index read-modify-write,
 *              `failed` (drive__readonly takes it: never call it under lock)
 * Leaves, taken under any of these and taking none: bg_lock (the background
 * thread's sleep), the budget's lock, idx.c's statistics cache lock.
 * The user writer belongs to whichever thread is the commit leader (only one
 * at a time: the commit thread, or a synchronous caller that found none),
 * the GC writer to the holder of gc_lock. No I/O is done under `lock`: the
 * RocksDB writes of index batches done under it go to the memtable only (no
 * WAL), and index flushes are waited for outside it. Completion callbacks of
 * asynchronous writes run on the leader with none of these locks held (they
 * may take q_lock again, to submit more).
 *
 * The index is durable only as of its last flush (idx.h). Nothing
 * irreversible may be done on disk on the strength of index state that is
 * not yet flushed: a segment is unlinked only after a flush that holds its
 * removal and every entry moved off it (drive_gc.c release).
 */
#ifndef WL_DRIVE_INT_H
#define WL_DRIVE_INT_H

#include "common/bufpool.h"
#include "storage/budget.h"
#include "storage/codec.h"
#include "storage/drive.h"
#include "storage/idx.h"
#include "storage/rec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define DIO_ALIGN     4096u      /* O_DIRECT buffer/offset alignment: reads, and writes' pieces */
#define BOUNCE_KEEP   (4u << 20) /* per drive: 64 direct-read head/tail buffers */
#define RESERVE_SLOTS 2          /* segments only compaction may take */

/*
 * Start an index flush after this many records too: replay costs per record
 * (an index lookup each), and the 64 MiB memtable holds hundreds of
 * thousands of small ones (bench_storage's 200k of 128 B: 2.8 s of replay
 * after kill -9; with this bound 0.12 s).
 */
#define INDEX_FLUSH_RECORDS 65536

typedef struct seg {
    uint32_t id;
    uint8_t kind;
    uint8_t open;    /* a writer appends here */
    uint8_t gc_skip; /* compaction could not empty it (bad record): leave it */
    uint8_t dirty;   /* replay: its accounting changed since its meta was last put */
    int fd;
    int refs;         /* the table's reference + readers in flight */
    uint64_t live;    /* bytes of records the index points at */
    uint64_t tail;    /* next write offset (IU-aligned) */
    uint64_t min_seq; /* UINT64_MAX when empty */
    uint64_t max_seq;
    uint64_t sealed_ns;
    uint64_t first_seq; /* records below it are the file's earlier life (0: a fresh file) */
    uint32_t seed;      /* its records' header crcs start here (0: a fresh file) */
    char *free_path;    /* released into the pool: the file's name there */
} seg_t;

/*
 * A caller's append waiting in the group-commit queue. Synchronous (done_fn
 * NULL): on the caller's stack, `done` set under q_lock when finished.
 * Asynchronous: malloc'd by the drive with the identity's names behind it,
 * freed by the leader after done_fn ran.
 */
typedef struct req {
    uint8_t type;
    rec_id_t id;
    const void *data;
    size_t len;
    const void *meta;
    size_t meta_len;
    int rc;
    int done;
    drive_done_fn done_fn;
    void *done_arg;
    uint8_t frees;    /* drive_put_async_frees: it may take the space kept for deletes */
    uint8_t unsynced; /* drive_put_async_unsynced: written without a flush of its own */
    uint8_t sync;     /* drive_sync: no record; the unsynced writes made durable and indexed */
    struct req *next;
} req_t;

/*
 * A record written without a flush of its own (drive_put_async_unsynced), not
 * yet indexed: its header is kept (unsynced_t.hdrs) until a flush makes it
 * durable (drive__settle, or the drive's next durable commit), and only then
 * does it go into the index, as a durable commit's records do. So the index
 * never names a record that is not durable, and what a crash takes was never
 * said to be durable.
 */
typedef struct {
    uint64_t off;             /* in unsynced_t.seg */
    uint32_t rec_len;         /* the record, padding before it excluded */
    uint32_t hdr_at, hdr_len; /* its header, in unsynced_t.hdrs */
} unsynced_rec_t;

/*
 * The unsynced records of a drive, all in one segment (the user writer's: a
 * segment is settled before it is sealed). The leader's, as the writer is.
 */
typedef struct {
    seg_t *seg;
    unsynced_rec_t *recs;
    size_t n, cap;
    uint8_t *hdrs;
    size_t hdrs_len, hdrs_cap;
} unsynced_t;

/* One record packed into a writer's commit, not yet durable. */
typedef struct {
    uint32_t buf_off, rec_len; /* buf_off: where it starts in the commit (as written) */
    req_t *req;                /* user append; NULL for a relocation */
    uint32_t from_seg;         /* relocation: where the record came from */
    uint64_t from_off;
    uint32_t ext_before; /* caller-held payload bytes before it: its header is at
                            buf + buf_off - ext_before */
} pend_t;

/* A payload written from its caller's memory: at off in the commit, len bytes. */
typedef struct {
    size_t off, len;
    const uint8_t *data;
} ext_t;

/*
 * A large payload whose caller's buffer is DIO_ALIGN-aligned is not copied:
 * the commit's pwritev takes its aligned part from the caller (drive_put_async
 * keeps it valid until done runs). Records of a payload of at least
 * REC_ALIGN_MIN already start it on a REC_ALIGN boundary (rec_pad_for), so the
 * pieces of the write between such payloads (headers, small payloads, the
 * payloads' last partial 4 KiB) are whole aligned runs of buf. At most this
 * many per commit: a pwritev takes IOV_MAX (1024) pieces.
 */
#define WRITER_EXT_MAX 500

typedef struct {
    uint8_t kind;
    seg_t *seg;
    uint8_t *buf; /* what the commit writes from the writer's own memory */
    size_t cap;
    size_t fill;      /* the commit's bytes so far, as they go to the file */
    size_t ext_bytes; /* of which written from callers' memory (ext), not in buf */
    ext_t *ext;
    size_t next, cap_ext;
    struct iovec *iov; /* the commit's pieces, built at the flush */
    size_t cap_iov;
    pend_t *pend;
    size_t npend, cap_pend;
    idx_batch_t *batch;
    size_t peak;    /* the largest commit since the last look at the buffer's size */
    uint32_t since; /* commits since then */
} writer_t;

/*
 * A writer's buffer grows with the commits it carries, up to max_batch (32 MiB),
 * and is kept: every commit is copied into it. After a burst of large writes it
 * would stay that large for good, on every drive of the node (6 drives kept 167
 * MiB after 8 MiB PUTs). Every WRITER_SHRINK_COMMITS commits the writer looks:
 * when none of them filled a quarter of the buffer, it lets the buffer go, and the
 * next commit takes one twice its size. Steady traffic keeps its buffer.
 */
#define WRITER_SHRINK_COMMITS 256
/* A drive that has committed nothing for this long gives its buffer back too (drive__writer_idle):
 * a burst followed by silence left it at the burst's size for good. */
#define WRITER_IDLE_NS        (10 * NS_PER_SEC)
#define WRITER_KEEP           (1u << 20) /* never given back below this */

struct drive {
    drive_cfg_t cfg;
    _Atomic int refilling; /* drive_set_refilling */
    char *path, *seg_dir, *idx_path;
    uint32_t iu;
    uint64_t seg_size;
    uint32_t slots; /* capacity / segment size */
    int direct;
    wl_clock_t *clock;
    idx_t *idx;
    budget_t budget;

    pthread_mutex_t lock;
    /*
     * Read bounce buffers kept for reuse (BOUNCE_KEEP bytes at most): a read
     * per block must not cost an mmap, page faults and munmap, nor leave
     * memory behind in a thread's malloc arena.
     */
    bufpool_t *bounce;
    seg_t **segs; /* sorted by id */
    uint32_t nsegs, cap_segs, creating;
    uint32_t next_seg_id;
    /* A compaction's below_id while one runs, else 0: ids under it are its victims' alone
     * (a segment whose create failed gives its id back only at or above it). */
    uint32_t gc_below;
    uint64_t next_seq;
    int failed;  /* sticky: a write or flush failed, the drive is read-only */
    int lock_fd; /* <path>/LOCK, flock'ed while open: one process per drive */

    pthread_mutex_t q_lock;
    pthread_cond_t q_cond;  /* synchronous callers: a request done, or no leader */
    pthread_cond_t ct_cond; /* the commit thread: queued work and no leader, or closing */
    req_t *q_head, *q_tail;
    int leader;
    uint32_t q_sync, q_async; /* queued requests of each kind */
    size_t q_bytes;           /* their record bytes (headers included) */
    pthread_cond_t q_more;    /* a leader gathering (commit_gather_us): a request came */
    int gathering;
    uint32_t last_recs;      /* records of the last group commit */
    uint64_t flush_ns_avg;   /* how long a group commit takes (moving average) */
    uint64_t last_commit_ns; /* when the last group commit ended (q_lock) */
    int closing;    /* drive_close: submissions refused, the commit thread drains and ends */
    int ct_running; /* the commit thread was started */
    pthread_t ct_thread;
    writer_t uw;
    unsynced_t unsynced; /* uw's records written without a flush, not yet indexed */

    pthread_mutex_t gc_lock;
    writer_t gw;

    pthread_mutex_t bg_lock;
    pthread_cond_t bg_cond;
    pthread_t bg_thread;
    int bg_running, bg_stop, bg_paused;

    /* counters, under lock */
    uint64_t user_bytes, host_bytes, padding_bytes, relocated_bytes, index_bytes;
    uint64_t reads_direct, reads_copied; /* atomic: readers do not take the lock */
    uint64_t flushes, flush_records, flush_bytes, flush_max_records;
    uint64_t commit_gathers;
    uint64_t unsynced_commits; /* user commits written without a flush of their own */
    uint64_t uncopied_bytes;   /* payload bytes written from their callers' memory (ext_t) */
    uint64_t compactions, segments_released, tombstones_dropped, throttled;
    /* The pool (drive_seg.c), under lock: "<id>.<clear>.free" files ready to be written again, and
     * every such file (ready, and released ones still read). */
    char **pool;
    uint32_t npool, pool_files, pool_max;
    uint64_t segments_recycled;
    uint64_t lifetime_host; /* persisted across opens */
    uint64_t idx_written_seen;
    uint64_t idx_unflushed;      /* bytes appended since the last index flush began */
    uint64_t idx_unflushed_recs; /* records appended since then */
    uint64_t replayed_bytes;     /* at open: see drive_stats_t */
    uint64_t open_ns, host_at_open;
};

/* drive_seg.c */
/*
 * New segment. Plain user writes may not take the last RESERVE_SLOTS;
 * deletes (reserve=1) may take all but one, so a full drive can still be
 * emptied; compaction may take any.
 */
int drive__seg_create(drive_t *d, uint8_t kind, int reserve, seg_t **out);
/* (reserve 2: a tombstone's, which may also take the file system's spare, drive_seg.c) */
/*
 * Open segment file id and check its superblock. ERR_NOT_FOUND when the file
 * never became a segment (superblock not durable, nothing appended: discard
 * it); ERR_CORRUPT (logged) for a bad superblock with records behind it,
 * or one of another geometry than the drive's; ERR_IO.
 */
int drive__seg_load(drive_t *d, uint32_t id, seg_t **out);
seg_t *drive__seg_find(drive_t *d, uint32_t id); /* under lock */
void drive__seg_insert(drive_t *d, seg_t *s);    /* under lock */
void drive__seg_remove(drive_t *d, seg_t *s);    /* under lock */
seg_t *drive__seg_acquire(drive_t *d, uint32_t id);
void drive__seg_release(drive_t *d, seg_t *s);
void drive__seg_seal(drive_t *d, seg_t *s); /* under lock */
char *drive__seg_path(drive_t *d, uint32_t id);
/*
 * The file of a segment released (out of the table, index flushed): renamed
 * to "<id>.free" in the pool when it has room, else unlinked. The caller
 * makes the directory durable. The pool takes it once its last reader is
 * done (drive__seg_release).
 */
void drive__seg_retire(drive_t *d, seg_t *s);
/* A pool file found at open ("<id>.<clear>.free"): into the pool, or unlinked when it is
 * full. The caller keeps the drive's next sequence number at clear or above. */
void drive__seg_pool_found(drive_t *d, uint32_t id, uint64_t clear);
/* Whether name is a pool file's, and its id and clear (drive_seg.c). */
int drive__pool_name(const char *name, uint32_t *id, uint64_t *clear);
void drive__seg_pool_free(drive_t *d); /* at close: the files stay */
int drive__fsync_dir(const char *dir);
/* One piece through drive_io.pwritev (drive_io.c). */
ssize_t drive__pwrite(int fd, const void *buf, size_t n, off_t off);
/*
 * Aligned read of [start, end) into a bounce buffer from the drive's pool;
 * *at points at start inside it. Give the buffer back with drive__bounce_put.
 */
int drive__pread_aligned(drive_t *d, int fd, uint64_t start, uint64_t end, uint8_t **buf,
                         uint8_t **at);
/*
 * Aligned read of [start, end) in one preadv where [dst_off, dst_off +
 * dst_len) (DIO_ALIGN-aligned offset and length, dst aligned) lands straight
 * in dst, and the rest in one bounce buffer: *head points at start (the bytes
 * before dst_off), *rest at the bytes from dst_off + dst_len on.
 */
int drive__pread_around(drive_t *d, int fd, uint64_t start, uint64_t end, uint8_t *dst,
                        uint64_t dst_off, size_t dst_len, uint8_t **buf, uint8_t **head,
                        uint8_t **rest);
/*
 * drive__pread_around in two halves, for a read whose I/O someone else does
 * (drive_read_begin): the plan (one preadv of cnt iovecs at pos, len bytes;
 * the bounce buffer buf, head and rest as above), then the rest of it after
 * `done` bytes were read (0 or an ERR_*; buf stays the caller's to put back).
 */
typedef struct {
    struct iovec iov[3];
    int cnt;
    uint64_t pos;
    size_t len;
    uint8_t *buf, *head, *rest;
} drive_around_t;
void drive__around_plan(drive_t *d, uint64_t start, uint64_t end, uint8_t *dst, uint64_t dst_off,
                        size_t dst_len, drive_around_t *a);
int drive__around_rest(int fd, drive_around_t *a, size_t done) __attribute__((warn_unused_result));
void drive__bounce_put(drive_t *d, uint8_t *buf);
/* Whether a test replaced the engine's reads (drive_io): then every read is the engine's own. */
int drive__io_hooked(void);
typedef int (*scan_fn)(void *arg, const rec_view_t *v, const uint8_t *raw, uint64_t off);
int drive__scan(drive_t *d, seg_t *s, uint64_t from, scan_fn fn, void *arg)
    __attribute__((warn_unused_result));
void drive__seg_meta_put(drive_t *d, idx_batch_t *b, const seg_t *s); /* under lock */
void drive__meta_put(drive_t *d, idx_batch_t *b);                     /* under lock */

/* drive_write.c */
void drive__writer_init(writer_t *w, uint8_t kind);
void drive__writer_free(writer_t *w);
/* Give an empty writer's buffer back (the next record takes a new one). */
void drive__writer_release(writer_t *w);
/* The compaction thread's tick: the user writer's buffer goes after WRITER_IDLE_NS without a
 * commit (taken under q_lock while nobody leads: no commit can touch it meanwhile). */
void drive__writer_idle(drive_t *d);
/* Make room for a record of rec_len bytes, staged of them in the writer's own buffer (flushing,
 * sealing, opening a segment). */
int drive__writer_room(drive_t *d, writer_t *w, size_t rec_len, size_t staged, int reserve);
int drive__writer_flush(drive_t *d, writer_t *w);
/*
 * Make the user writer's unsynced records durable (one fdatasync) and index
 * them: 0, or the drive's error (read-only: a flush failed, and the records
 * are never indexed: the close records their segment's end past them). The
 * leader's, or at close once no one leads.
 */
int drive__settle(drive_t *d);
void drive__unsynced_free(unsynced_t *u);
/* Queue a synchronous request and wait for it (leading the commit if no one does). */
int drive__submit(drive_t *d, req_t *r);
/* Queue an asynchronous request (malloc'd); its done_fn runs once. 0 or ERR_CLOSED. */
int drive__submit_async(drive_t *d, req_t *r);
/* A drive's thread fn(d), named (logged when it cannot start). 0, ERR_NOMEM or ERR_IO. */
int drive__thread_start(drive_t *d, pthread_t *th, void *(*fn)(void *), const char *name);
/* The commit thread: start at open; stop at close, after it drained the queue. */
int drive__commit_start(drive_t *d);
void drive__commit_stop(drive_t *d);
/*
 * A write or flush failed: every later write gets ERR_READONLY until the
 * drive is reopened (reads go on); the first call says so in one log line
 * (event=drive_readonly). Takes `lock`.
 */
void drive__readonly(drive_t *d, const char *reason, uint32_t seg, int err_no);

/* drive.c */
/* A caller's identity as the record format's; ERR_INVAL for bad lengths. */
int drive__to_rec_id(const drive_id_t *in, rec_id_t *out);
/* Entry of an identity (codec.h); ERR_CORRUPT (logged) when it does not decode. */
int drive__ent_get(drive_t *d, idx_batch_t *b, const rec_id_t *id, ent_t *e, void **valbuf);
/* Put identity -> entry into a batch. */
void drive__ent_put(idx_batch_t *b, const rec_id_t *id, const ent_t *e);

/* A record with this sequence number is on disk in s (live or not). */
static inline void drive__seg_note_seq(seg_t *s, uint64_t seq)
{
    if (seq < s->min_seq) s->min_seq = seq;
    if (seq > s->max_seq) s->max_seq = seq;
}
void drive__charge_index(drive_t *d); /* RocksDB's own writes into budget and counters */
/*
 * Flush the index and wait: every batch written before is durable on
 * return. Turns the drive read-only when RocksDB fails it. Never under lock.
 */
int drive__index_flush(drive_t *d);

/* drive_gc.c */
int drive__bg_start(drive_t *d);
void drive__bg_stop(drive_t *d);
void drive__bg_kick(drive_t *d);

#endif
