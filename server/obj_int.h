/*
 * obj_int.h: internals shared by the object layer's files (obj.h is the
 * public door).
 *
 *   obj_set.c   the set: lifecycle, counters, the job pool that runs shard
 *               I/O in parallel (stripe writes, heads, decoder fetches)
 *   obj_meta.c  the head metadata codec (the format is laid out there)
 *   obj_head.c  reading heads: the newest one, the one that stands, routed
 *               to the key's pool; key and upload locks; inline copies' bytes
 *   obj_head_write.c  a round of heads on the stores (conditioned, hedged);
 *               which stores hold an inline object's copies
 *   obj_pin.c   dropping replaced versions' blocks, at once or after their
 *               last reader (pins)
 *   obj_delete.c  unversioned deletes (conditioned removal, tombstones, undo)
 *   obj_rewrite.c  in-place metadata rewrite of a version, and putting a
 *               version back where a refused head write landed
 *   obj_commit.c  the commit of a version's heads (the stores decide between
 *               gateways: read what stands, write under a condition, undo
 *               and retry on a refusal) and the conditions it checks
 *   obj_cut.c   commits cut short by a kill: told apart, carried through, undone
 *   obj_put.c   the writer: streamed encode, double-buffered stripe writes,
 *               the commit
 *   obj_get.c   the reader: block source, read-ahead, multipart manifests
 *               and reads across parts
 *   obj_version.c  versioning: noncurrent versions, delete markers, finding
 *               versions (the layout is described there)
 *   obj_promote.c  deleting a version by id, and promoting the next one when
 *               it was current
 *   obj_mpu.c   multipart uploads: create, parts, abort, listings
 *   obj_mpu_complete.c  Complete, and the end of one a kill cut short
 *   obj_mpu_record.c  an upload's record (open, closing, aborting) and the
 *               conditional writes that close and reopen it
 *   obj_heal.c  healing one object (heads, blocks)
 *   obj_heal_queue.c  the heal queue and its thread: keys written short,
 *               dropped versions' blocks, retired heads
 *   obj_refill.c  a refill's pipeline: rebuilt blocks written without
 *               waiting, a bounded window of them, heads once they are durable
 *   obj_list.c  listing a bucket's objects and their versions: the ordered
 *               indexes of k stores merged (drive_scan), no head read per key
 *   obj_multi.c several sets as one: placement of a key on its set, set-wide
 *               counters, listings merged over the sets
 *
 * Locks, in the order they may be taken:
 *   (the S3 layer's bucket rwlock)
 *   mpu_locks  one upload (striped): a part's commit, Complete and Abort of
 *              that upload exclude each other
 *   key_locks  one key (striped): commits to a key are serialised, so the
 *              head order is the mtime order
 *   pin_mu     the pin list and drop_epoch; no I/O under it
 *   the job pool's own lock and the latches (common/pool.c)
 * At most one lock of each striped kind at a time: two keys (or uploads)
 * may share a stripe. Head reads and writes run under a key lock; dropping
 * a replaced version (deletes, reading a manifest) runs after it is
 * released, since it takes key locks of its own.
 */
#ifndef WL_OBJ_INT_H
#define WL_OBJ_INT_H

#include "common/pool.h"
#include "proto/net.h"
#include "server/obj.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define BLK_SUFFIX "\x01" /* blocks live under "<bucket>\x01", out of listings */
#define SHARD_BITS 5      /* block record shard index: (stripe << SHARD_BITS) | shard */
#define HEAD_MAX   20480  /* a head's metadata: up to 16 KiB of metadata pairs and small fields */
#define KEY_LOCKS  256    /* stripes of key_locks and of mpu_locks */

#define OBJ_MPU_MAX_PARTS 10000 /* part numbers 1..10000 (S3's limit) */

/* Internal buckets of multipart uploads ("\x03" keeps them apart from S3 names). */
#define MPU_UPLOADS         "\x03mpu" /* one object per upload: body "bucket\nkey" */
#define MPU_PARTS           "\x03mpp" /* one object per part: "<upload>/<part, 5 digits>" */
#define MPU_MANIFEST        "\x03mpm" /* per completed upload: "part size etag [note]" lines */
/* The manifest's user metadata: this name, its value "bucket\nkey" of the object completed. */
#define OBJ__MANIFEST_OWNER "wl-object"

struct obj_set {
    shard_store_t st[OBJ_MAX_SHARDS];
    int k, m, n;
    int wq; /* write quorum: stores a write needs (obj_set_write_quorum) */
    uint32_t block;
    uint32_t inline_max; /* objects up to this size are stored inline (obj_set_inline_max) */
    uint32_t hedge_ms;   /* obj_set_hedge_ms; 0: reads wait for every block they asked */
    /* Stores behind the network (their ops have stat_async): only their reads can be hedged. */
    uint32_t remote;
    const _Atomic uint32_t *features; /* obj_set_features: in use; NULL: all of this build's */
    /* Per store: read around until this time (ms, CLOCK_MONOTONIC): a read was given up on. */
    _Atomic uint64_t slow_until[OBJ_MAX_SHARDS];
    _Atomic uint64_t hedged;        /* reads given up on */
    _Atomic uint64_t hedged_writes; /* writes given up on (obj__put_wait) */
    /*
     * Runs shard I/O in parallel: the block reads of a stripe for GETs, and
     * the puts of stores without put_async (obj__put_start: the k+m block
     * writes of a stripe and the heads of a commit are in flight at once).
     */
    pool_t *pool;
    pthread_mutex_t key_locks[KEY_LOCKS];
    pthread_mutex_t mpu_locks[KEY_LOCKS];
    pthread_mutex_t pin_mu;
    struct pin *pins;     /* versions being read (obj_pin.c) */
    uint64_t drop_epoch;  /* versions dropped at once (unpinned); under pin_mu */
    bufpool_t *bufs;      /* stripe-sized buffers of PUTs and GETs */
    struct heal_q *healq; /* the heal queue and its thread (obj_heal_queue.c); NULL: not started */
    int bufs_shared;      /* bufs is another set's (obj_set_multi) */
    /* Several sets as one (obj_multi.c): nsub > 0, and nothing above but k, m, n, block. */
    _Atomic int nsub; /* grows when a pool is added (obj_pool.c); sub has OBJ_MAX_SETS */
    struct obj_set **sub;
    struct obj_set *parent; /* a set of several: the multi set it is one of (NULL: none) */
    uint64_t seed;
    /* Pools of the sets (obj_pool.c): pool p is sub[first .. first + n). */
    _Atomic int npool;
    struct obj_pool {
        int first, n;
        _Atomic uint32_t weight;
        _Atomic int draining;
    } pools[OBJ_MAX_POOLS];
    pthread_mutex_t pools_mu; /* obj_set_add_pool's */
};

/* Whether the cluster uses feature (cluster/features.h), so that its format may be written. */
int obj__feature(const obj_set_t *s, uint32_t feature);

/*
 * Whether head a is newer than head b in the one order every reader and writer goes by:
 * stamp, then upload id (two gateways' commits at one stamp still have one winner).
 */
static inline int obj__newer(const obj_info_t *a, const obj_info_t *b)
{
    return a->stamp_ns > b->stamp_ns ||
           (a->stamp_ns == b->stamp_ns && strcmp(a->upload_id, b->upload_id) > 0);
}

/*
 * The upload id of the tombstone a moved key leaves in its draining pool
 * (obj_move.c): after any real id (so its head sorts newer than the moved
 * version's, same stamp, and a rewrite of that version is refused there),
 * and what a commit that finds it knows the key moved by.
 */
#define OBJ_MOVED_UPLOAD "ffffffffffffffffffffffffffffffff"
static inline int obj__moved_mark(const obj_info_t *h)
{
    return h->deleted && !h->marker && strcmp(h->upload_id, OBJ_MOVED_UPLOAD) == 0;
}

/*
 * Version v was deleted by its id in `from`, a set of s's draining pools (the
 * key's until its move switches): the copies an unfinished move made of it
 * in the active pools go too (obj_move.c). No-op when from's pool is active.
 */
void obj__forget_copies(obj_set_t *s, obj_set_t *from, const char *bucket, const char *key,
                        const obj_info_t *v);
/* Whether set j of multi set s is in a removed pool (OBJ_POOL_REMOVED): asked for nothing. */
static inline int obj__sub_removed(const obj_set_t *s, int j)
{
    int np = atomic_load(&((obj_set_t *)s)->npool);
    for (int p = 0; p < np; p++)
        if (j >= s->pools[p].first && j < s->pools[p].first + s->pools[p].n)
            return atomic_load(&((obj_set_t *)s)->pools[p].draining) == OBJ_POOL_REMOVED;
    return 0;
}

/* Tests: called by obj_move_key between its copies and the switch (NULL: nothing); nonzero:
 * the mover dies there (obj_move_key returns ERR_BUSY, leaving what a kill -9 would). */
extern int (*obj__move_between)(void *arg, const char *key);
extern void *obj__move_between_arg;
/* Tests: called by a move after each internal object it copied (a manifest, a part); non-zero
 * cuts the move there, as a kill of the mover would. */
extern int (*obj__move_copied)(void *arg, const char *bucket, const char *key);
extern void *obj__move_copied_arg;
/* Tests: called by a delete by id of a noncurrent version between retiring it and making sure
 * it is not current (promote_past), where a racing delete of the version above may promote it. */
extern void (*obj__retired_hook)(void *arg, const char *key);
extern void *obj__retired_hook_arg;
/* Tests: called by a promotion between its walk (the successor read) and its write. */
extern void (*obj__promote_hook)(void *arg, const char *key);
extern void *obj__promote_hook_arg;
/* Tests: called by a promotion once its write stands, before it reads its successor's
 * noncurrent copy again (promoted_rewrite). */
extern void (*obj__promoted_hook)(void *arg, const char *key);
extern void *obj__promoted_hook_arg;
/* Tests: called by a delete by id that found its version current, before it checks that it
 * stands. */
extern void (*obj__located_hook)(void *arg, const char *key);
extern void *obj__located_hook_arg;
/* The wall clock in ns: what heads' stamps are, so what their age is measured against. */
uint64_t obj__wall_ns(void);
/* Tests: added to obj__wall_ns (another node's clock, ahead or behind). */
extern int64_t obj__wall_skew_ns;
/* Tests: called by a metadata rewrite between its read of the version that stands and its
 * read of the version it rewrites, as another node's rewrite may land there. */
extern void (*obj__rewrite_read_hook)(void *arg, const char *key);
extern void *obj__rewrite_read_hook_arg;
/* Tests: called by a metadata rewrite just before it writes its heads (after every read), as
 * another node's rewrite of the same version may land first on some stores, and before each
 * round of filling them in where it was refused (fill_rewrite). */
extern void (*obj__rewrite_write_hook)(void *arg, const char *key);
extern void *obj__rewrite_write_hook_arg;
/* Tests: called by an unversioned delete between its read of the version it deletes and
 * its removal round, as another node's commit may land there. */
extern void (*obj__delete_read_hook)(void *arg, const char *key);
extern void *obj__delete_read_hook_arg;
/* Tests: called by a key's head read (obj__stat_routed) between its routing and its read, as
 * a move's switch may land there. */
extern void (*obj__routed_hook)(void *arg, const char *key);
extern void *obj__routed_hook_arg;

/* ---- obj_multi.c ---- */

/* The set a key lives on (s has sets): obj__pool_route's when s has pools. */
obj_set_t *obj__place(obj_set_t *s, const char *bucket, const char *key);
/* Set j of pool p's placement of bucket/key (obj_multi.c). */
int obj__in_pool(const obj_set_t *s, int p, const char *bucket, const char *key);

/* ---- obj_pool.c ---- */

/* The set of the pool holding bucket/key (the newest head's, if several do), else of the pool
 * a new key goes to. */
obj_set_t *obj__pool_route(obj_set_t *s, const char *bucket, const char *key);
/* The pool holding bucket/key (the newest head's), else the first pool that could not say
 * (more than m stores of its lookup failed), else -1. A head lookup in every pool. */
int obj__pool_holder(obj_set_t *s, const char *bucket, const char *key);
/* The active pool a new key goes to (weighted rendezvous over np pools). */
int obj__new_key_pool(const obj_set_t *s, int np, const char *bucket, const char *key);
/* The set of the pool holding upload_id (for bucket/key), else obj__route's. */
obj_set_t *obj__route_upload(obj_set_t *s, const char *bucket, const char *key,
                             const char *upload_id);
/* Where every call that names a key starts: the key's own set. */
static inline obj_set_t *obj__route(obj_set_t *s, const char *bucket, const char *key)
{
    return s->nsub ? obj__place(s, bucket, key) : s;
}
void obj__multi_free(obj_set_t *s);
/* Store *i of all the sets' (set j's store i is j*n + i): its set, *i made its index there;
 * NULL when out of range. */
obj_set_t *obj__store_set(const obj_set_t *s, int *i);
/* The listings of obj__list and obj__list_versions, merged over s's sets. */
int obj__multi_list(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                    const char *after, size_t want, int wide, obj_list_fn fn, void *arg);
int obj__multi_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                        const char *after, const char *after_vid, size_t want, int wide,
                        obj_version_fn fn, void *arg);

/* ---- obj_list.c ---- */

/*
 * obj_list_delim and obj_list_versions_delim; wide: merge every store of
 * the set, not k (what a healer walks: a store emptied by a drive replaced
 * holds nothing, and k stores that include it may miss a version whose
 * heads are on the rest, an inline one's m+1 copies).
 */
int obj__list(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
              const char *after, size_t want, int wide, obj_list_fn fn, void *arg);
int obj__list_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                       const char *after, const char *after_vid, size_t want, int wide,
                       obj_version_fn fn, void *arg);

/*
 * One shard put (a block or a head): an asynchronous write of a store that
 * has put_async, else a pool job. st NULL: no put (a store skipped).
 */
typedef struct {
    pool_job_t base;
    latch_t *latch; /* obj__put_start's: counted down when the put finished */
    const shard_store_t *st;
    drive_id_t id;
    const void *data;
    size_t len;
    const void *meta; /* heads: metadata only */
    size_t meta_len;
    const shard_cond_t *cond; /* a head's condition (put_head), or NULL */
    int rc;
    /*
     * Hedged writes: set by the caller, the put may be given up on (a call to
     * another node made with tok; a local drive's ignores it). obj__put_start
     * and obj__put_wait own fin and tok.
     */
    int hedge;
    _Atomic int fin; /* the put ended: rc is set */
    proto_cancel_t tok;
} obj__put_job_t;

/* ---- obj_set.c ---- */

/* pool_job_t.run of an obj__put_job_t. */
void obj__run_put(pool_job_t *j);
/*
 * Start the puts of jobs[0..n) (those with a store) without waiting: each
 * goes to its store's put_async, or to the pool for a store without; l
 * counts them all down as they finish (latch_wait on it). No pool thread
 * waits for an asynchronous write, so the writes in flight are not capped
 * by the pool's size and each drive's group commit sees them all.
 */
void obj__put_start(obj_set_t *s, obj__put_job_t *jobs, int n, latch_t *l);
/* obj__put_start and wait for all of them (each job's rc set). */
void obj__put_all(obj_set_t *s, obj__put_job_t *jobs, int n);
/*
 * Wait for the puts obj__put_start started on l (jobs[0..n)), hedged: once
 * `need` of them are durable and hedge_ms more passed, the puts still out
 * are given up on if each is a call to another node in flight (a job with
 * hedge set): waited for, which is at once, each then has rc ERR_CANCELED
 * and its store is slow for OBJ_SLOW_MS. A local put, or one not yet sent,
 * is always waited for. A durable put of a store in `lost` does not count
 * towards need: the store failed (or was given up on) in another round of
 * the same write, so it will not hold the whole version. Returns the stores
 * given up on, as a mask. On return no put points into the jobs' data any
 * more (proto_call_async_cancelable).
 */
uint32_t obj__put_wait(obj_set_t *s, obj__put_job_t *jobs, int n, latch_t *l, int need,
                       uint32_t lost);
/* CLOCK_MONOTONIC in milliseconds. */
uint64_t obj__now_ms(void);
/* The pool has no spare thread: the drives are busy, more depth only lengthens queues. */
int obj__busy(obj_set_t *s);
/*
 * The stores that are not up (shard_ops_t.health), as a mask: asked last.
 * Cheap (no I/O); a store may change state right after.
 */
uint32_t obj__unhealthy(const obj_set_t *s);
/* The stores that are down (their node's lease gone, or silent): no write reaches them. */
uint32_t obj__down(const obj_set_t *s);
/* The stores failed for good (SHARD_FAILED: a drive that did not open): healed around. */
uint32_t obj__failed(const obj_set_t *s);
/* The stores replaced and not yet refilled (shard_ops_t.refilling), as a mask. */
uint32_t obj__refilling(const obj_set_t *s);
/*
 * The stores in `from` (a mask), in the order to ask them: those that are
 * up (and not slow, and not being refilled) first, each group starting at
 * store `first` and going round. Returns how many went into order.
 */
int obj__ask_order(const obj_set_t *s, uint32_t from, uint32_t first, int order[OBJ_MAX_SHARDS]);
/* Run jobs[0..n) on the set's pool and wait for all of them. */
void obj__run_all(obj_set_t *s, pool_job_t **jobs, int n);
/* ers_parallel_fn on the set's pool (arg: the set). */
void obj__parallel(void *arg, unsigned n, void (*fn)(void *ctx, unsigned i), void *ctx);
/* ers_hedged_fn on the set's pool (arg: the set): waits hedge_ms before spares. */
void obj__hedged(void *arg, unsigned n, unsigned spare, unsigned need,
                 int (*fn)(void *ctx, unsigned i), void *ctx);
/*
 * obj__hedged; alone: also when there is no spare to start, the fetches
 * still out after hedge_ms as calls to other nodes are given up on (the
 * caller asks elsewhere in their place).
 */
void obj__hedged_run(obj_set_t *s, unsigned n, unsigned spare, unsigned need,
                     int (*fn)(void *ctx, unsigned i), void *ctx, int alone);
/* Store i's read was given up on: read around it for OBJ_SLOW_MS. */
void obj__mark_slow(obj_set_t *s, unsigned i);
/* Stores read around because they were slow (obj__mark_slow), as a mask. */
uint32_t obj__slow(const obj_set_t *s);

/* ---- obj_meta.c ---- */

/* Whether the codec knows tag (an unknown one is skipped on decode): for the fuzzer. */
int obj__meta_tag_known(unsigned tag);

/* ---- obj_head.c, obj_head_write.c, obj_pin.c, obj_delete.c ---- */

/* A fresh random upload id (32 hex digits). 0 or ERR_IO. */
int obj__new_upload_id(char out[33]) __attribute__((warn_unused_result));
/* "<bucket>\x01" into out (SHARD_MAX_BUCKET + 2 bytes); bucket at most SHARD_MAX_BUCKET - 1. */
void obj__blk_bucket(char *out, const char *bucket);
/*
 * The key of one upload of a part in MPU_PARTS: "<upload>/<part, 5 digits>.<tag>", tag a
 * fresh id per UploadPart, so that no upload of a part ever replaces another's: the
 * manifest names the one its Complete took. An empty tag gives "<upload>/<part>", the
 * key parts had before tags (their uploads and manifests still read).
 */
#define OBJ__PART_KEY_MAX 80
#define OBJ__PART_TAG_LEN 32
void obj__part_key(char *out, size_t cap, const char *upload, int part, const char *tag);
/* Part number (1..) and tag ("" for none) of a key in MPU_PARTS: what follows the upload's
 * "/". 0 when it is not a part's key. */
int obj__part_of_key(const char *key, char tag[OBJ__PART_TAG_LEN + 1]);
pthread_mutex_t *obj__key_lock(obj_set_t *s, const char *bucket, const char *key);
pthread_mutex_t *obj__mpu_lock(obj_set_t *s, const char *upload);
/*
 * The newest head over all stores (by stamp, then upload id), delete
 * markers and tombstones included. ERR_NOT_FOUND when more than m stores
 * say absent, ERR_UNRECOVERABLE when failing stores leave it open.
 */
int obj__newest_head(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best);
/*
 * A key's current version as read(set, ...) finds it on the key's set
 * (ERR_NOT_FOUND for a delete marker or tombstone). Routed just before the
 * key moved off a draining pool (obj_move.c: the switch leaves a tombstone
 * in the source), the read is made again where the key is now.
 */
typedef int (*obj_head_read_fn)(obj_set_t *set, const char *bucket, const char *key,
                                obj_info_t *info);
int obj__stat_routed(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                     obj_head_read_fn read);
/*
 * obj__newest_head, and the bytes of an inline object with it when the
 * first store asked holds them (its record read whole into buf, cap bytes:
 * one lookup on that store, not two). *have: whether buf holds best's
 * bytes, checked against its crc; else they are to be read
 * (obj__inline_load), if best is inline.
 */
int obj__newest_inline(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best,
                       void *buf, size_t cap, int *have);
/*
 * Heads of one identity read from several stores at once: stat_async on
 * the stores that have it (remote ones: their calls in flight together),
 * stat on the others (local drives: a lookup each, on this thread, while
 * the remote ones answer). out[j] is store stores[j]'s answer.
 */
typedef struct {
    int rc;          /* the store's answer: 0, ERR_NOT_FOUND, or its failure */
    int ok;          /* rc 0 and the head decoded into info */
    obj_info_t info; /* (16 KiB: allocate arrays of these) */
} obj__head_t;
typedef struct {
    obj_set_t *s;
    const char *bucket, *key, *pos;
    const int *stores;
    int n, async;
    obj__head_t *out;
    latch_t latch;
    void *jobs[OBJ_MAX_SHARDS];
} obj__heads_rd_t;
/* Send the asynchronous ones (the others are asked in finish); the caller may work meanwhile. */
void obj__heads_start(obj_set_t *s, obj__heads_rd_t *rd, const char *bucket, const char *key,
                      const char *pos, const int *stores, int n, obj__head_t *out);
/* Ask the rest, wait for all: out[] filled. */
void obj__heads_finish(obj__heads_rd_t *rd);
/*
 * obj__heads_finish, but calls still out after hedge_ms (0: wait for all)
 * are given up on, if there are no more of them than `spare` (the stores
 * left for the caller to ask in their place; else it waits for all): their
 * out[] say ERR_CANCELED, and their stores are marked slow (obj__mark_slow).
 */
void obj__heads_finish_hedged(obj__heads_rd_t *rd, uint32_t hedge_ms, int spare);
/* The stores of mask (bits at or above the set's width ignored) into stores; returns how many. */
int obj__stores_in(const obj_set_t *s, uint32_t mask, int stores[OBJ_MAX_SHARDS]);
/* Both. */
void obj__read_heads(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                     const int *stores, int n, obj__head_t *out);
/*
 * Store i's del_head of id under cond (server/shard.h): 0, ERR_NOT_FOUND,
 * ERR_PRECOND (refused), or an error (ERR_INVAL: the store cannot judge a
 * condition; it is never deleted without one).
 */
int obj__del_head(obj_set_t *s, int i, const drive_id_t *id, const shard_cond_t *cond);
/*
 * An undo's delete of head v (read from store i at id just before, its
 * writer's own): removed only while it is still that head (SHARD_IF_UPLOAD
 * with its stamp); ERR_PRECOND when another writer covered it meanwhile. A
 * store that cannot judge the condition (an older node) gets the plain delete.
 */
int obj__undo_del(obj_set_t *s, int i, const drive_id_t *id, const obj_info_t *v);
/* The same for the head at version position pos ("": the current head). */
int obj__newest_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                   obj_info_t *best);
/*
 * The heads of a version, all at once, on every store not in `dead`, or
 * (info->sparse) only on the stores of info->inl. Returns the number
 * written (obj__enough says whether the version stands); *first_err gets
 * the first failure. A sparse write that falls short, or finds a store of
 * its copies dead, becomes a head on every store with the bytes on the
 * first m+1 stores that work: info->sparse and info->inl say so after.
 */
int obj__write_heads(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                     uint32_t dead, int *first_err);
/*
 * The same at version position pos. An inline version's heads carry its
 * bytes on the stores info->inl names: data (info->size bytes), or, when
 * data is NULL, the bytes of that version read back first (obj__inline_load:
 * a rewrite of its metadata, a version moved between positions).
 */
int obj__write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                  obj_info_t *info, uint32_t dead, int *first_err);
int obj__write_at_data(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       obj_info_t *info, const void *data, uint32_t dead, int *first_err);
/*
 * obj__write_at_data with the stores' condition for each head (server/
 * shard.h: the stores decide between writers on different nodes): cond, or
 * when NULL, at the current position, SHARD_IF_NEWER of info (a store that
 * holds a newer head keeps it). A store that refuses is not a failure:
 * *refused counts them (a newer version, or not the one a condition named).
 */
int obj__write_at_cond(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                       int *refused, int *first_err);
/*
 * obj__write_at_cond at the current position for a commit, hedged: once the
 * version has its write quorum of heads (every copy of a sparse one), calls
 * to other nodes still out after hedge_ms are given up on; their stores are
 * left out of the count (the commit is healed as one short of them).
 */
int obj__write_commit(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                      const void *data, uint32_t dead, const shard_cond_t *cond, int *refused,
                      int *first_err);
/*
 * Whether `heads` heads let a write of version info be acknowledged: the
 * write quorum of them (k or more, obj_set_write_quorum), or every copy of
 * a sparse one (m+1 whole copies; any m+1 stores a reader asks, starting at
 * the key's first inline store, include one of them). A version stands for
 * readers with k heads (obj_commit.c): the quorum is the writers' margin.
 */
int obj__enough(const obj_set_t *s, const obj_info_t *info, int heads);
/*
 * One round of info's heads at position pos ("": the current one) on the
 * stores of `to` (its bytes, data, on those of info->inl), each under cond:
 * what the healer puts back. Returns the heads written; failures join
 * *failed, refusals count in *refused.
 */
int obj__heads_to(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                  const obj_info_t *info, const void *data, uint32_t to, const shard_cond_t *cond,
                  uint32_t *failed, int *refused, int *first_err);
/*
 * obj__heads_to in two halves, for a version without inline bytes: start
 * the puts (meta, HEAD_MAX bytes, and jobs, OBJ_MAX_SHARDS, kept until l
 * opens; returns how many started, -1 when the metadata does not encode),
 * then, once l opened, count them (the heads written, as obj__heads_to).
 * A refill starts the heads of many objects and waits for them at once.
 */
int obj__heads_to_start(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                        const obj_info_t *info, uint32_t to, const shard_cond_t *cond,
                        uint8_t *meta, obj__put_job_t *jobs, latch_t *l, int *first_err);
int obj__heads_to_count(const obj__put_job_t *jobs, int n, const shard_cond_t *cond,
                        uint32_t *failed, int *refused, int *first_err);

/* ---- obj_refill.c ---- */

/*
 * The blocks of r's version (info; its heads at pos, missing on the stores
 * of `heads`, to go under cond) verified stripe by stripe as heal_blocks
 * does, the rebuilt ones written through rf without waiting; the heads
 * follow once every block is durable (or failed), and only if the heal's
 * read of `held` (at read_ns) is fresh or still holds (obj__heal_still_there),
 * the version pinned until
 * then (r may be closed on return). Counts what it verified in rep; what it
 * writes is counted at obj_refill_drain. Returns 0 or ERR_UNRECOVERABLE
 * (the blocks rebuilt before it are written, the heads too).
 */
int obj__refill_object(obj_refill_t *rf, obj_set_t *s, obj_reader_t *r, const char *bucket,
                       const char *key, const char *pos, const obj_info_t *info, uint32_t heads,
                       uint32_t held, uint64_t read_ns, const shard_cond_t *cond,
                       obj_heal_report_t *rep);

/* ---- obj_heal.c ---- */

/*
 * After a heal wrote info's heads at pos on the stores of `wrote`: when a
 * store of `held` (those that held the version at the heal's read) has lost
 * it since (nothing there, a tombstone of it, another version), a writer
 * that removed or replaced it came after that read, and the heads just
 * written may have landed behind its round: they are taken back, that very
 * head alone (obj__undo_del). Returns 1 if so. (The other order, a head
 * healed in behind a delete's removal where the delete has not yet removed
 * it elsewhere, is the delete's re-read: obj_delete.c.)
 */
int obj__heal_recheck(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                      const obj_info_t *info, uint32_t held, uint32_t wrote);
/*
 * Before a heal writes info's heads: whether its read of the stores (at
 * *read_ns, monotonic) is fresh enough to write on, reading the stores of
 * `held` again when it is older than a quarter of the tombstone drop delay
 * (*read_ns then moves to now): 1 to write. 0 when the version has gone from
 * any of them since (nothing to heal), ERR_IO when none says so but
 * one cannot answer: write nothing either, try again later. A heal whose
 * read is older than a DELETE's tombstones could write over the nothing they
 * left once dropped; with this, every head a heal writes follows a read of
 * the version, where it was, well within their minute.
 */
int obj__heal_still_there(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                          const obj_info_t *info, uint32_t held, uint64_t *read_ns);
/* Called by a heal once it knows which heads to write, before it writes them, and by
 * obj__heal_recheck before its read (tests). */
extern void (*obj__heal_write_hook)(void *arg, const char *key);
extern void *obj__heal_write_hook_arg;
extern void (*obj__heal_recheck_hook)(void *arg, const char *key);
extern void *obj__heal_recheck_hook_arg;

/* ---- obj_rewrite.c ---- */

/*
 * A head write (nv: a metadata rewrite of orig, or a promotion over it) that
 * a store refused: where nv landed at pos (its stamp and upload id), orig's
 * head goes back, bytes and all for an inline version, only where nv still
 * stands, and only where orig had one (a sparse one's copies); elsewhere, or
 * when orig's bytes are gone, nv's head goes (best effort: a store that
 * fails keeps it, as a failed undo of a commit does).
 */
void obj__put_back(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                   const obj_info_t *orig, const obj_info_t *nv);
/* The same, an inline orig's bytes read before nv was written (NULL: read now). */
void obj__put_back_bytes(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                         const obj_info_t *orig, const void *orig_bytes, const obj_info_t *nv);

/* ---- obj_heal_queue.c ---- */

/*
 * The blocks of a dropped version (blocks bucket bb, key, upload, stripes) that stores of
 * mask kept, away when it was dropped: deleted there by the heal thread once every store is
 * up (no-op unstarted, or the queue full: then they stay, space a reaper must find).
 */
void obj__drop_note(obj_set_t *s, const char *bb, const char *key, const char *upload,
                    uint64_t stripes, uint32_t mask);
/*
 * The head records at pos of bucket/key on every store (a retired version's tombstones, which
 * every store took): removed by the heal thread a minute from now (OBJ_HEAD_DROP_DELAY_S),
 * when no commit that read the version as current before its delete can still be writing
 * its archive. No-op unstarted (the tombstones stay).
 */
#define OBJ_HEAD_DROP_DELAY_S 60
extern uint64_t obj__head_drop_delay_ns; /* OBJ_HEAD_DROP_DELAY_S; tests shorten it */
void obj__head_drop_note(obj_set_t *s, const char *bucket, const char *key, const char *pos);
/*
 * Tombstone t, the head an unversioned delete left at the current position on the stores of
 * mask: removed by the heal thread after the same delay, and only where it is still that very
 * head (SHARD_IF_UPLOAD with its stamp: a write since keeps its own). Until then it refuses
 * every head of the version it retired (a heal, a rewrite, an undo that read it before the
 * delete: shard.c cond_holds). No-op unstarted (the tombstones stay; readers and listings
 * pass them by, and the next write of the key covers them).
 */
void obj__tombstone_drop_note(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *t, uint32_t mask);
/* The same at version position pos (a retirement's tombstone, obj__retire). */
void obj__tombstone_drop_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                            const obj_info_t *t, uint32_t mask);
/* A version's id as requests name it: "null" for the null version. */
static inline const char *obj__vid_or_null(const obj_info_t *v)
{
    return v->vid[0] ? v->vid : "null";
}

/*
 * A write of bucket/key was acknowledged short of some stores: heal it soon (no-op
 * unstarted). vid (NULL or "": none) names the version written, besides the key's current
 * one: healed by id if it is noncurrent by then ("null" for a null version).
 */
void obj__heal_note(obj_set_t *s, const char *bucket, const char *key, const char *vid);
/* Stop the heal thread and free the queue (obj_set_free). */
void obj__heal_stop(obj_set_t *s);

/* ---- obj_heal.c, for the queue ---- */

/* Whether the calling thread is healing: what a heal reads may note its key again, and a
 * heal that keeps failing would then run again at once instead of after its backoff. */
int obj__healing(void);
/*
 * A queue entry's heal: bucket/key's current version, then each of the noted version ids
 * (all_noncurrent: every noncurrent version instead) by id while it is noncurrent. 0, or the
 * first error; rep adds up every version's. failed(arg, vid) for each noted version whose
 * heal failed, (arg, NULL) when the noncurrent versions could not be walked.
 */
int obj__heal_key(obj_set_t *s, const char *bucket, const char *key, char *const *noted, int nnoted,
                  int all_noncurrent, obj_heal_report_t *rep,
                  void (*failed)(void *arg, const char *vid), void *arg);

/* ---- obj_get.c, for the healer ---- */

/* The reader's decoder (NULL for an inline or multipart object) and its block source. */
ers_decoder_t *obj__reader_decoder(obj_reader_t *r);
int obj__block_source(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                      ers_crc_t *crc);
int obj__block_batch(void *arg, unsigned n, const unsigned *shard, uint64_t stripe,
                     uint8_t *const *buf, const uint32_t *len, ers_crc_t *crc, int *rc);
/* An inline object's bytes as the reader holds them (NULL otherwise). */
const uint8_t *obj__reader_inline(const obj_reader_t *r);
/* Ask every store for its block, up or not (the healer: it wants each one's answer). */
void obj__reader_ask_all(obj_reader_t *r);

/* The key's first inline store: where its head lookups and its noncurrent walks start. */
uint32_t obj__first_store(const obj_set_t *s, const char *bucket, const char *key);
/* The m+1 stores whose heads carry the bytes of an inline object of bucket/key. */
uint32_t obj__inline_stores(const obj_set_t *s, const char *bucket, const char *key);
/*
 * The bytes of inline version v (info->size of them into buf), from the
 * first of its stores whose head (current or noncurrent position) is that
 * very version (upload id) and whose bytes match v's crc: a store that
 * fails, rots or holds another version is passed over for the next.
 * ERR_NOT_FOUND when no store holds the version any more (it was replaced
 * meanwhile), ERR_UNRECOVERABLE when the stores that do all fail.
 */
int obj__inline_load(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v,
                     void *buf);
/* The stores (of v->inl, those up) whose copy of inline version v at pos does not read back
 * whole (a rotten record, or bytes that fail v's crc): what a heal rewrites. */
uint32_t obj__inline_rotten(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                            const obj_info_t *v);
/* Delete the blocks of one version on the stores not in dead (best effort). */
void obj__drop_blocks(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                      uint64_t stripes, uint32_t dead);
/* Delete an internal object; a failure only leaves space behind and is logged. */
void obj__drop_object(obj_set_t *s, const char *bucket, const char *key);
/* Pin a version against drops; returns the drop epoch seen under the pin lock. */
uint64_t obj__pin(obj_set_t *s, const char *upload_id);
/* Unpin; the last reader runs the drops handed to the pin meanwhile. */
void obj__unpin(obj_set_t *s, const char *upload_id);
/* Free the storage of a replaced or deleted version, now or when its last reader closes. */
void obj__drop_version(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *old);

/* ---- obj_commit.c ---- */

/* A head short of standing this long (by its stamp) is a crash's leftover, never acknowledged:
 * no commit takes longer (obj__landed_late answers one that does "in doubt"). */
#define OBJ__COMMIT_STALE_NS (10ull * 1000000000)

/* c's if_upload / if_stamp against v (delete markers too; NULL: none): 0 or ERR_PRECOND. */
int obj__cond_identity(const obj_cond_t *c, const obj_info_t *v);
/* A wall-clock time later than cur's mtime and stamp (cur may be NULL). */
uint64_t obj__now_after(const obj_info_t *cur);
/*
 * The current head that stands, read from every store as a commit reads
 * it (tombstones and delete markers included); *in_way: a newer head that
 * does not stand yet (another writer's commit in flight). 0, ERR_NOT_FOUND
 * (none), ERR_UNRECOVERABLE (failing stores leave it open).
 */
int obj__standing(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best, int *in_way);
/* The same; *leftover: a newer head that does not stand and is older than any commit takes
 * (a crash's leftover, never acknowledged), which *in_way does not count. */
int obj__standing_under(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best,
                        int *in_way, int *leftover);
/* The newest head at bucket/key's current position on any store, standing or not. */
int obj__newest_anywhere(obj_set_t *s, const char *bucket, const char *key, obj_info_t *out);
/*
 * What a commit replaces, read from every store (obj_commit.c): *best, the version that stands,
 * and *anywhere, the newest head any store holds. skip, gave, margin: a writer's hedging. 0,
 * ERR_NOT_FOUND, ERR_UNRECOVERABLE.
 */
int obj__current_for_commit(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best,
                            shard_cond_t *anywhere, uint32_t skip, uint32_t *gave, int margin);
/*
 * A commit of nv that fell short undone: where a store holds nv's head (at stamp `at`, 0: any),
 * old's put back (bytes from old_bytes, else read), or the head removed. The stores where it
 * may stay (0: whole).
 */
uint32_t obj__undo_heads(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *nv,
                         const obj_info_t *old, const void *old_bytes, uint32_t never, uint64_t at);
/* obj__commit_heads of a version cut short, carried through: its version id and mtime kept
 * while they are newer than what it covers (obj__roll_forward). */
int obj__commit_heads_keep(obj_set_t *s, const char *bucket, const char *key,
                           const obj_cond_t *cond, obj_versioning_t v, obj_info_t *info,
                           int *first_err);

/*
 * The internal metadata entry of a version written on a condition that named
 * the version it replaces (If-Match): that version's upload id. A write that
 * depended on a version cannot be ordered after that version's delete (its
 * condition would have failed), so an unversioned DELETE racing it through
 * another node orders itself after it instead (obj__delete_settle: 2).
 */
#define OBJ_AFTER_META "\001aft"

/*
 * An unversioned delete's round (obj_delete.c delete_if) that stores refused:
 * they hold a head newer than *bound (the version the delete read), another
 * writer's after the read. Reads every store's head: 1 when a version newer
 * than *bound stands (the delete linearizes before it: done); 2 when that
 * version was written on the condition that the one read was current
 * (OBJ_AFTER_META: an If-Match write), so that the delete must come after it
 * (read and judged again); 0 to go round again (the refusing head was undone,
 * or, in the way longer than any commit takes, is a crash's leftover: *bound
 * now covers it; else after a back-off), or ERR_THROTTLED when the commit's
 * tries are spent (attempt counts them).
 */
int obj__delete_settle(obj_set_t *s, const char *bucket, const char *key, shard_cond_t *bound,
                       int attempt);
/*
 * An unversioned DELETE cut short (a crash): its tombstones (tomb, one of them) on fewer stores
 * than it needs, over the version they retire, which stands (they count for it, as a cut
 * commit's heads do). Finished, as the delete would have: the tombstone on every store that
 * still holds that version, then the version's blocks dropped and the tombstones a minute
 * later. 0; ERR_BUSY when that version no longer stands under them (covered, or in flight);
 * or the stores' error.
 */
int obj__finish_cut_delete(obj_set_t *s, const char *bucket, const char *key,
                           const obj_info_t *tomb);
/*
 * Whether the heads of info (a commit's, a promotion's, a delete's tombstones) landed so late
 * that others may have read some of them as a crash's leftover and acted on it: such a write
 * is answered "in doubt" (503), nothing it covered dropped (obj_commit.c).
 */
int obj__landed_late(const char *key, const obj_info_t *info);
/*
 * The commit point of a new version (or delete marker): under the key's
 * lock, check cond, stamp info with an mtime after the newest head's, give
 * it a version id (v), keep the version it covers as noncurrent (v) and
 * write its heads on the stores not in dead (with data: an inline object's
 * bytes, NULL otherwise). Once the commit stands, the
 * version it replaced (unversioned, or the null one) is dropped. Returns
 * the heads written (-1: nothing written; OBJ__COMMIT_IN_DOUBT: failed, but
 * failing stores kept heads of it that the undo could not take back, so its
 * blocks must stay: the heal queue completes it); *first_err gets the first
 * failure (ERR_PRECOND, ERR_NOT_FOUND: cond).
 */
#define OBJ__COMMIT_IN_DOUBT (-2) /* failed, but heads of it stayed: keep its blocks */
int obj__commit_heads(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *cond,
                      obj_versioning_t v, obj_info_t *info, const void *data, uint32_t dead,
                      int *first_err);

/* ---- obj_cut.c ---- */

/*
 * Whether the commit of upload at bucket/key (a Complete's, by its upload id) was cut short
 * by a kill in the middle of its heads: 1 when a head of it lies above the version that
 * stands and is not a copy of a version of it that stood (a promotion's); 0 when a version
 * of it stands on k heads of its own, or no head of it lies above what stands (completed,
 * then replaced); ERR_THROTTLED when another writer's head is in flight above what stands;
 * the stores' error (ERR_UNRECOVERABLE: failing stores leave it open).
 */
int obj__cut_short(obj_set_t *s, const char *bucket, const char *key, const char *upload);
/*
 * Every store up, none refilling, each answering a head read of key (a head, or none):
 * current_for_commit's ERR_UNRECOVERABLE then means that nothing stands (a commit cut after as
 * many heads as the version it covered kept: 3 and 3 of 4+2), not that failing stores hide
 * what does. 1 or 0.
 */
int obj__every_store_answered(obj_set_t *s, const char *bucket, const char *key);
/*
 * A commit of upload cut short (obj__cut_short) carried through: the newest head of it
 * committed again as obj__commit_heads does (cond, v), under a fresh stamp but with the version
 * id and mtime it carries (readers may have met it) while it is newer than what it covers.
 * Returns as obj__commit_heads (*info the version); -1 with ERR_NOT_FOUND when nothing of it
 * is left above what stands (then a commit of its own).
 */
int obj__roll_forward(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                      const obj_cond_t *cond, obj_versioning_t v, obj_info_t *info, int *first_err);
/*
 * A commit of upload cut short, undone as a commit that falls short is (the version that
 * stands put back where its heads went, or they go). 0; ERR_BUSY when a version of upload
 * stands now; or the stores' error (some of its heads may stay).
 */
int obj__drop_cut_heads(obj_set_t *s, const char *bucket, const char *key, const char *upload);
/* The same, only its heads stamped `at` (0: any): a leftover undone by a writer other than
 * its upload's own closer, which a retry of the upload may be writing over meanwhile. */
int obj__drop_cut_heads_at(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                           uint64_t at);

/* ---- obj_version.c ---- (under the key's lock, unless said) */

/* The version id (and noncurrent position) of a version made at mtime. */
void obj__vid_of(char out[OBJ_VID_LEN + 1], uint64_t mtime_ns);
/* Keep cur as a noncurrent version (its head, stamped stamp_ns). 0 or an ERR_*. */
int obj__archive(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *cur,
                 uint64_t stamp_ns);
/* The noncurrent null version (or null delete marker): 0, or ERR_NOT_FOUND. */
int obj__find_null(obj_set_t *s, const char *bucket, const char *key, obj_info_t *out);
/*
 * Every noncurrent null version, the newest first (more than one only after a
 * crash: the older ones are stale): their number (*out malloc'd, NULL for
 * none), or an ERR_*.
 */
int obj__collect_nulls(obj_set_t *s, const char *bucket, const char *key, obj_info_t **out);
/*
 * Every noncurrent version and delete marker of the key (retired ones not),
 * the newest first, from every store's walk (the mover's: not only what
 * one store holds): their number (*out malloc'd, NULL for none), or an
 * ERR_*. Copies of the current version and stale null versions included.
 */
int obj__noncurrent_all(obj_set_t *s, const char *bucket, const char *key, obj_info_t **out);
/*
 * A walk of one key's noncurrent versions and delete markers, newest first (retired ones
 * skipped), from one store's walk (another when it fails, up to m): fn says 1 to stop.
 * 1 when fn stopped it, 0 at the end, or an ERR_*.
 */
typedef int (*obj_noncurrent_fn)(void *arg, const obj_info_t *v);

int obj__each_noncurrent(obj_set_t *s, const char *bucket, const char *key, obj_noncurrent_fn fn,
                         void *arg);
/*
 * Remove a noncurrent version's head (its space is the caller's to drop): a tombstone at its
 * position on every store. 0 when the tombstones stand (obj__enough), else the stores' error
 * (the tombstones stay where they landed).
 */
int obj__retire(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v);
/*
 * A version by id (vid NULL: the current one, markers included) and where
 * its head lies (pos: "" current, else the noncurrent position; at least
 * OBJ_VID_LEN + 1 bytes). ERR_NOT_FOUND when there is none.
 */
int obj__locate(obj_set_t *s, const char *bucket, const char *key, const char *vid, obj_info_t *out,
                char *pos);

/* ---- obj_promote.c ---- */

/*
 * The heal's check of the current version cur (as opened): when a delete by id retired it
 * (its tombstone at its own position) and a promotion made it current after that delete
 * looked, it is promoted past (under the key's lock). 1 when it was, 0 when cur is not such
 * a version, or an ERR_*.
 */
int obj__heal_retired_current(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *cur);

/* ---- obj_put.c ---- */

/* obj_put_begin; mpu_upload (may be NULL): a part of that upload, which must be open at commit
 * (its record there, of mpu_rec_size bytes: obj_mpu.c). */
obj_writer_t *obj__put_begin(obj_set_t *s, const char *bucket, const char *key,
                             const char *mpu_upload, uint64_t mpu_rec_size, int *err);
/*
 * For a copy that keeps its version's identity (obj_move.c): the blocks go
 * under upload (set before the first write); obj__put_finish ends the
 * writes and fills info's layout, size, etag (hex MD5 of what was written),
 * upload id and, for a small object, inl and inl_crc with *small its bytes
 * (valid until the writer goes); the caller writes the heads, then
 * obj__put_release frees the writer and keeps the blocks (obj_put_abort
 * drops them). obj__put_dead: the stores that failed a write.
 */
void obj__put_set_upload(obj_writer_t *w, const char *upload);
int obj__put_finish(obj_writer_t *w, obj_info_t *info, const void **small)
    __attribute__((warn_unused_result));
uint32_t obj__put_dead(const obj_writer_t *w);
void obj__put_release(obj_writer_t *w);

/* ---- obj_get.c ---- */

/*
 * The manifest of a completed upload: part numbers and sizes of its nparts
 * parts, in order, and (tags not NULL) the tag of the upload of each part its
 * Complete took ("" for a part stored before tags): obj__part_key. The caller
 * frees the arrays. nparts < 0: as many as the manifest has lines (*nparts_out,
 * when not NULL). 0 or an ERR_*.
 */
int obj__read_manifest(obj_set_t *s, const char *upload, int nparts, int **part_no,
                       uint64_t **sizes, char (**tags)[OBJ__PART_TAG_LEN + 1])
    __attribute__((warn_unused_result));
/* The same, and (notes not NULL) each part's note, NULL when it has none: the caller frees
 * each and the array; (etags not NULL) each part's ETag as the Complete read it. */
int obj__read_manifest_all(obj_set_t *s, const char *upload, int nparts, int *nparts_out,
                           int **part_no, uint64_t **sizes, char (**tags)[OBJ__PART_TAG_LEN + 1],
                           char ***notes, char (**etags)[80]) __attribute__((warn_unused_result));
/* Part i's ETag as r's Complete read it (the manifest's), "" when not known. */
const char *obj__read_part_etag(const obj_reader_t *r, int i);
/* Part i's key in MPU_PARTS (OBJ__PART_KEY_MAX bytes at out). */
void obj__read_part_key(const obj_reader_t *r, int i, char *out);
/* One manifest line at *pp ("<part>[.<tag>] <size> <etag>[ <note>]"), *pp moved past it: 0 or
 * ERR_CORRUPT. */
int obj__manifest_line(const char **pp, int *part, unsigned long long *size, char tag[33],
                       char et[80], const char **note, size_t *note_len);
/* Whether a head of bucket/key on some store of s (current or not) names upload: 1, 0, or -1
 * when that cannot be told (obj_reap.c). */
int obj__upload_named(obj_set_t *s, const char *bucket, const char *key, const char *upload);

/* ---- obj_mpu_record.c: an upload's record ---- */

/*
 * A closing record this old has no live closer: a closer writes no head once its close is
 * older than OBJ__CLOSE_FENCE_NS, and a commit of heads begun before that ends well within the
 * rest (its wait for another writer's head in flight, OBJ__COMMIT_STALE_NS, and a store's deadline,
 * 10 s each).
 */
#define OBJ__CLOSE_STALE_NS (45ull * 1000000000)
#define OBJ__CLOSE_FENCE_NS (15ull * 1000000000)

#define OBJ__UPLOAD_OPEN     0
#define OBJ__UPLOAD_CLOSING  1 /* a Complete closed it, and a kill may have cut it short */
#define OBJ__UPLOAD_ABORTING 2 /* an Abort took such a close over: the reaper ends it */

/* A record's body, split: pointers into it. */
typedef struct {
    const char *bucket, *key;
    const char *manifest; /* closing or aborting: what follows the NUL (padding included) */
    size_t bucket_len, key_len;
    size_t manifest_len; /* without the padding; 0 for an aborting record */
} obj_upload_view_t;

/* A record's body: open (manifest NULL), closing (its manifest, mlen bytes) or aborting
 * (manifest "", 0); *len bytes and a NUL. The caller frees it. */
char *obj__upload_record(const char *bucket, const char *key, const char *manifest, size_t mlen,
                         size_t *len);
/* upload's record: its head (*rec), its body (*body, a NUL after rec->size bytes; the caller
 * frees it) split into *v. OBJ__UPLOAD_*, else ERR_NOT_FOUND or a store error. */
int obj__upload_read(obj_set_t *s, const char *upload, obj_info_t *rec, char **body,
                     obj_upload_view_t *v);
/* The state of upload's record for bucket/key: OBJ__UPLOAD_* (closing: *manifest, when manifest
 * is not NULL, its manifest, NUL-terminated, *mlen bytes; the caller frees it), else
 * ERR_NOT_FOUND (no record, or another key's) or a store error. */
int obj__upload_state(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                      obj_info_t *rec, char **manifest, size_t *mlen);
/*
 * After a close that lost its condition: whether the upload still reads as open or closing.
 * A close cut short by a kill leaves its head on some stores only: newer than the record that
 * stands, it fails the next close's condition until a commit covers it as a crash's
 * (OBJ__COMMIT_STALE_NS), and a resume that loses its takeover to the reaper's reopening finds it
 * open. Not gone, so not NoSuchUpload (final to a client): 503, and the client comes back.
 */
int obj__upload_still_there(obj_set_t *s, const char *bucket, const char *key, const char *upload);
/* Whether upload_id's record is closing or aborting (a Complete cut short): 1 (*stamp its
 * stamp), 0, or an ERR_* when it cannot be read. */
int obj__upload_closing(obj_set_t *s, const char *upload_id, uint64_t *stamp);
/*
 * Close the upload: its record rec replaced by body (blen bytes: a closing or aborting record;
 * NULL: a delete marker, an Abort's), conditioned on rec's stamp, with rec's content type and
 * metadata; *closed what was written. One closer's stands across nodes. 0, ERR_NOT_FOUND
 * (closed by another), or a store error.
 */
int obj__upload_close(obj_set_t *s, const char *upload_id, const obj_info_t *rec,
                      obj_info_t *closed, const char *body, size_t blen);
/* A Complete that closed the upload and then failed: open again, as rec was, unless another
 * call reopened or closed it meanwhile (conditioned on closed's stamp). */
void obj__upload_reopen(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                        const obj_info_t *rec, const obj_info_t *closed);

/* ---- obj_mpu.c ---- */

/* Put a small internal object whole. */
int obj__put_small(obj_set_t *s, const char *bucket, const char *key, const void *body, size_t len,
                   const char *ctype, const char *umeta, size_t umeta_len, obj_info_t *out)
    __attribute__((warn_unused_result));
typedef int (*obj__part_fn)(void *arg, int part, const char *tag, const char *key,
                            const obj_info_t *info);
/*
 * Every upload of a part that committed, in part order (the uploads of one part are next to
 * each other): fn(arg, part, tag, key in MPU_PARTS, info); part 0 for a key under the upload
 * that is not a part's. wide: every store (a healer's walk), else a listing's.
 */
int obj__each_part_of(obj_set_t *s, const char *upload, int wide, obj__part_fn fn, void *arg);
/* Of two uploads of one part, the later: the part (ListParts shows it, a Complete takes it). */
int obj__later_part_upload(uint64_t stamp, const char *tag, uint64_t than_stamp,
                           const char *than_tag);
/* Every upload of every part of upload dropped: as obj__each_part_of. */
int obj__drop_parts(obj_set_t *s, const char *upload);
/* The latest commit stamp of the uploads of part key's part number so far (0: none). */
uint64_t obj__part_stamp_floor(obj_set_t *s, const char *part_key);

/* ---- obj_mpu_complete.c ---- */

/*
 * The reaper's end of a Complete cut short: the closing (or aborting) record of upload_id at
 * stamp, tidied if the object stands, else the upload opened again (an aborting one: ended).
 * 1 when settled.
 */
int obj__mpu_settle(obj_set_t *s, const char *upload_id, uint64_t stamp);
/* Tests: called by a Complete after its close (stage 1), its manifest (2) and its heads (3);
 * non-zero cuts it there, as a kill would (nothing after it is done, nothing undone). Stage 0:
 * just before the close (its answer is not heeded). */
extern int (*obj__complete_cut_hook)(const char *upload, int stage);

/* Called by a part's commit between its check that the upload is open and its heads (tests:
 * a Complete through another node in that gap). */
extern void (*obj__part_commit_hook)(void *arg, const char *upload);
extern void *obj__part_commit_hook_arg;

#endif
