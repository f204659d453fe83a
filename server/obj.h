/*
 * obj: objects on one erasure set (k+m shard stores), the layer under the
 * S3 gateway.
 *
 * Layout on each store of the set:
 *   - blocks: for every stripe s and shard i, the block bytes followed by
 *     their crc32c (one ers shard-stream piece) as a record with identity
 *     {bucket "\x01", key, upload id, (s << 5) | i}. The "\x01" suffix keeps
 *     blocks out of listings (S3 bucket names cannot contain it).
 *   - the head: {bucket, key, "", i}, no payload, the object's metadata in
 *     the record's blob (layout, upload id, size, ETag, content type, user
 *     metadata, mtime). Every shard carries it, so any k stores answer.
 *
 * A PUT streams through the erasure encoder; each block is stored as it is
 * produced (memory per upload: the encoder's (k+m) x B plus one block), and
 * the heads are written last: writing them is the commit point, so a reader
 * never sees a partial object. A new PUT of the same key writes under a new
 * upload id, so readers of the old version are not mixed with the new one;
 * the old blocks are deleted after the commit. A delete writes a delete
 * marker head, so a store that missed the delete cannot bring the object
 * back: the newest head (by mtime) wins.
 *
 * Threads: an obj_set_t is shared; writers and readers belong to one thread
 * at a time. Every call blocks on drive I/O: call from worker threads.
 */
#ifndef WL_OBJ_H
#define WL_OBJ_H

#include "common/bufpool.h"
#include "erasure/ers.h"
#include "server/shard.h"

#define OBJ_MAX_SHARDS ERS_MAX_SHARDS

typedef struct obj_set obj_set_t;

typedef struct {
    uint64_t size;
    uint64_t mtime_ns; /* wall clock, nanoseconds since the epoch */
    char etag[80];     /* hex MD5 of the content (quotes not included) */
    char content_type[256];
    char upload_id[33];
    ers_layout_t layout;
    char umeta[16384]; /* "name\0value\0" pairs: user metadata (at most 2 KiB of it, as S3)
                         and internal entries (names starting with \001: ACL, checksum,
                         standard headers, tags) */
    size_t umeta_len;
    int deleted;      /* no data: a delete marker (marker), or nothing current (a tombstone) */
    int marker;       /* with deleted: an S3 delete marker, a version of its own */
    int multipart;    /* made by a multipart upload: upload_id names its parts */
    uint32_t inl;     /* stored inline: the stores whose heads carry the bytes (bitmask); 0:
                         in blocks */
    uint32_t inl_crc; /* inline: crc32c of the bytes */
    int sparse;       /* inline: heads only on the stores of inl (none elsewhere at this
                         position); 0: a head on every store (obj_head_write.c) */
    int nparts;
    char vid[20];      /* the S3 version id, OBJ_VID_LEN hex digits; "" is the null version */
    uint64_t stamp_ns; /* when this head was written: of two heads, the later wins
                          (= mtime_ns, unless rewritten: metadata, a version made current) */
    uint64_t umeta_ns; /* when its metadata (umeta) was decided, if before stamp_ns: a copy
                          of a head written later (a promotion, an archive) keeps its
                          source's; 0: at stamp_ns (obj_umeta_ns) */
} obj_info_t;

#define OBJ_VID_LEN 16

/*
 * Walk the "name\0value\0" pairs of info's metadata: from *pos, the next
 * pair's name and value; 0 at the end (or at a truncated pair).
 */
int obj_umeta_next(const obj_info_t *info, size_t *pos, const char **name, const char **value);
/* The value of a pair of info's metadata, "" when absent. */
const char *obj_umeta_get(const obj_info_t *info, const char *name);

/* When o's metadata was decided (o->umeta_ns, or its stamp: written with it). */
static inline uint64_t obj_umeta_ns(const obj_info_t *o)
{
    return o->umeta_ns ? o->umeta_ns : o->stamp_ns ? o->stamp_ns : o->mtime_ns;
}

/*
 * A bucket's versioning (S3: never enabled, Enabled, Suspended). Versions
 * are kept while Enabled; a write while Suspended (or never enabled)
 * replaces the null version. See obj_version.c for the layout.
 */
typedef enum { OBJ_UNVERSIONED = 0, OBJ_VERSIONED, OBJ_SUSPENDED } obj_versioning_t;

/*
 * Clear / copy an obj_info_t without touching the unused part of umeta:
 * the struct is 16 KiB for a room most objects use a few bytes of, and a
 * healthy GET decodes k+m heads (measured: clearing and copying it whole
 * cost 4 KiB GETs ~10%).
 */
void obj_info_clear(obj_info_t *o);
void obj_info_copy(obj_info_t *dst, const obj_info_t *src);

/* stores: n = k+m shard stores (copied). block: the erasure block size. */
obj_set_t *obj_set_new(const shard_store_t *stores, int k, int m, uint32_t block, int *err);
void obj_set_free(obj_set_t *s);

/*
 * Several erasure sets as one (pool 0, more added by obj_set_add_pool):
 * each key lives on one of them, picked by placement (XXH64 of bucket and
 * key under seed, modulo the sets of the key's pool), so the sets and the
 * seed must stay what they were when data was written.
 * Takes the sets (freed with the result); all must have the same k, m and
 * block. The result serves every call of this header: those naming a key
 * go to its set, listings merge the sets' in order, counters and health
 * number the stores of all sets in turn (set j's store i is j*(k+m) + i),
 * settings (inline size, write quorum, heal queue) apply to every set.
 * NULL with ERR_INVAL when the sets do not fit.
 */
#define OBJ_MAX_SETS 64
obj_set_t *obj_set_multi(obj_set_t **sets, int nsets, uint64_t seed, int *err);
/* How many sets (1 for a plain set), and the one bucket/key lives on (0..count-1; with
 * several pools, found by obj_set_pool_of: a head lookup in each pool). */
int obj_set_count(const obj_set_t *s);
int obj_set_place(const obj_set_t *s, const char *bucket, const char *key);

/*
 * Pools (server/obj_pool.c): capacity grows by groups of sets that new
 * objects go to, while an object stays in the pool that holds it. The
 * sets given to obj_set_multi are pool 0 (weight 1, active);
 * obj_set_add_pool appends nsets more sets (the same k, m and block) as
 * pool obj_set_pools() - 1, while the set is in use: calls that started
 * before it see the pools they started with. A key held by a pool (any
 * version, delete marker or head) is served by that pool; a new key goes
 * to an active pool picked by a rendezvous hash weighted by the pools'
 * weights (the same pool on every node that has the same weights).
 * Placement within a pool is obj_set_place's, with that pool's sets. 0, or
 * ERR_INVAL (not a multi set, too many pools or sets, another geometry).
 */
#define OBJ_MAX_POOLS 8
int obj_set_add_pool(obj_set_t *s, obj_set_t **sets, int nsets, uint32_t weight, int draining)
    __attribute__((warn_unused_result));
/*
 * Pool p's share of new objects, and its state: OBJ_POOL_ACTIVE, OBJ_POOL_DRAINING (it takes
 * no new objects; its keys move off, obj_move_key) or OBJ_POOL_REMOVED (drained and taken
 * out of service, wl-admin pool remove: asked for nothing any more, not by routing, listings,
 * uploads or the background workers, so its nodes may go; its stores count as up). 0 or
 * ERR_INVAL.
 */
enum { OBJ_POOL_ACTIVE = 0, OBJ_POOL_DRAINING = 1, OBJ_POOL_REMOVED = 2 };
int obj_set_pool_state(obj_set_t *s, int p, uint32_t weight, int draining);
int obj_set_pools(const obj_set_t *s); /* 1 for a plain set */
/* The pool bucket/key lives in (the newest head's when several hold it), else the first pool
 * that could not say (more than m stores of its lookup failed), else the pool a new key goes
 * to. A head lookup in every pool. */
int obj_set_pool_of(obj_set_t *s, const char *bucket, const char *key);
/* Pool p's sets (*first: the index of its first, for obj_set_sub) and its state (*draining:
 * OBJ_POOL_*): their number, or ERR_INVAL. */
int obj_set_pool_sets(const obj_set_t *s, int p, int *first, int *draining);
/* Set j of a multi set (NULL past the last). */
obj_set_t *obj_set_sub(const obj_set_t *s, int j);
/* Whether this process moves set j's keys when its pool drains: the set's first store is a
 * local one (one node per set, so that no key has two movers at once). */
int obj_set_mover_here(const obj_set_t *s, int j);
/*
 * Draining (server/obj_move.c): every version of bucket/key that pool
 * `from` (draining) holds goes to the pool a new key goes to, keeping its
 * identity (version id, Last-Modified, ETag, parts, metadata, ACL, tags);
 * then the source's copies go. 0 (moved, or nothing there), ERR_BUSY (a
 * write to the key in flight or landed meanwhile: try again later),
 * ERR_INVAL (not a draining pool, or nowhere to go), or a store error.
 */
typedef struct {
    uint64_t versions, bytes; /* versions (markers included) and object bytes copied */
    int waiting; /* ERR_BUSY before anything was done: a store of the target set is not up */
} obj_move_report_t;
int obj_move_key(obj_set_t *s, int from, const char *bucket, const char *key,
                 obj_move_report_t *rep) __attribute__((warn_unused_result));

/*
 * Objects of at most `bytes` are stored inline: whole, as the payload of
 * their heads on m+1 of the set's stores (any m may fail), written in one
 * durable round and read with one lookup and one read on one store. 0 turns
 * it off; at most OBJ_INLINE_LIMIT. Set before the set is used.
 */
#define OBJ_INLINE_DEFAULT (64u << 10)
#define OBJ_INLINE_LIMIT   (1u << 20)
void obj_set_inline_max(obj_set_t *s, uint32_t bytes);
/*
 * Hedged reads: a whole stripe's block read from another node that has not
 * answered after `ms` is given up on once parity read from other stores
 * stands in for it (shard_ops_t.read_split_cancelable), and that store is
 * read around for a while (OBJ_SLOW_MS) by every reader of the set: one slow
 * node costs a GET this delay, not its own latency. Writes are hedged by the
 * same delay: a round of a PUT (a stripe's blocks, the commit's heads) whose
 * write quorum is durable goes on without the calls to other nodes still out
 * after it; their stores count as failed for that write (healed) and are
 * skipped by writes for OBJ_SLOW_MS. 0 turns both off. Local drives are never
 * given up on (their reads and writes cannot be). Before the set is used.
 */
#define OBJ_HEDGE_DEFAULT_MS 50
#define OBJ_SLOW_MS          2000
void obj_set_hedge_ms(obj_set_t *s, uint32_t ms);
/*
 * The cluster's features in use (cluster/features.h; member_features_in_use),
 * read by the writers of gated formats; NULL (the default): every feature of
 * this build. Before the set is used; kept by pools added later.
 */
void obj_set_features(obj_set_t *s, const _Atomic uint32_t *in_use);
/* Reads given up on (hedged) since the set started, over all its sets. */
uint64_t obj_set_hedged(const obj_set_t *s);
/* Writes given up on (a block or head call still out once the quorum had the round). */
uint64_t obj_set_hedged_writes(const obj_set_t *s);

/*
 * Stores a write needs durable before it is acknowledged (blocks and heads
 * alike): k..k+m, default k. With more than k an acknowledged object keeps
 * redundancy however the write went (k+1 survives one more failure before
 * healing); with k a set keeps taking writes with m stores away. A write
 * that cannot reach the quorum fails and leaves nothing behind. ERR_INVAL
 * outside k..k+m. Before the set is used.
 */
int obj_set_write_quorum(obj_set_t *s, int stores) __attribute__((warn_unused_result));

/* Number of stores (k+m, times the sets), and the engine counters of store i: 0 or
 * ERR_NOT_FOUND. */
int obj_set_width(const obj_set_t *s);
/* k: the data stores of a stripe. */
int obj_set_data_width(const obj_set_t *s);
int obj_set_stats(obj_set_t *s, int i, drive_stats_t *st);
/* Store i is a replaced drive not yet refilled, as this node knows it (shard_ops_t.refilling). */
int obj_set_refilling(const obj_set_t *s, int i);
/* How the way to store i is doing (shard_health_t: up, suspect, down); no I/O. */
int obj_set_health(const obj_set_t *s, int i);
/* 1 when every store of s is up (what background work that must reach them all waits for). */
int obj_set_all_up(const obj_set_t *s);
/*
 * 1 when no store of s is away for a while: each is up or failed for good
 * (SHARD_FAILED). What healers wait for: they go on without a failed drive,
 * which is refilled once it is back.
 */
int obj_set_none_away(const obj_set_t *s);
/*
 * The set's pool of stripe-sized buffers (PUT slots, GET pieces): page-
 * aligned, so drives read blocks into them directly. Up to OBJ_BUF_KEEP
 * bytes stay mapped between requests.
 */
#define OBJ_BUF_KEEP (128u << 20)
bufpool_t *obj_set_buffers(obj_set_t *s);

typedef struct obj_writer obj_writer_t;

/*
 * Conditions on the version a write replaces (conditional writes, S3's
 * If-None-Match: * and If-Match), checked at the commit point under the
 * key's lock, so of racing conditional creates exactly one wins. A failed
 * condition is ERR_PRECOND, or ERR_NOT_FOUND for if_match on no object.
 */
typedef struct {
    int none_match;     /* there must be no current version */
    char if_match[80];  /* the current version's ETag ("*": any); "" for none */
    int64_t if_size;    /* deletes: the current version's size; -1 for none */
    int64_t if_mtime_s; /* deletes: its last-modified second; -1 for none */
    /*
     * The very version (the lifecycle worker's deletes: what it decided on,
     * not a later write of the same bytes or a retagged head): its upload id
     * ("" for none) and head stamp (0 for none); delete markers included.
     */
    char if_upload[33];
    uint64_t if_stamp;
    int noncurrent;       /* obj_delete_version: the version must not be the current one */
    int lone;             /* obj_delete_version: ... or be the current one with no other version */
    uint64_t stamp_after; /* the new head's stamp is later than this (0: no floor): a part
                             uploaded again comes after the uploads of it before, on any
                             node's clock (obj_put.c) */
} obj_cond_t;
#define OBJ_COND_NONE                                                                              \
    {                                                                                              \
        .none_match = 0, .if_match = "", .if_size = -1, .if_mtime_s = -1                           \
    }
/* 0 when cur (NULL: no current version) meets c. */
int obj_cond_check(const obj_cond_t *c, const obj_info_t *cur);

obj_writer_t *obj_put_begin(obj_set_t *s, const char *bucket, const char *key, int *err);
/* Commit only if c holds for the version replaced (copied; NULL: unconditional). */
void obj_put_set_cond(obj_writer_t *w, const obj_cond_t *c);
/* The bucket's versioning at commit (default OBJ_UNVERSIONED). */
void obj_put_set_versioning(obj_writer_t *w, obj_versioning_t v);
/*
 * The object's size, when its client said it (Content-Length), before the first write: an
 * object of one short stripe then has its bytes laid out in its blocks as they come, rather
 * than again at the commit (erasure/ers.h, ers_encoder_place). Any other size is still right.
 */
void obj_put_size_hint(obj_writer_t *w, uint64_t size);
int obj_put_write(obj_writer_t *w, const void *data, size_t len)
    __attribute__((warn_unused_result));
/*
 * obj_put_write of a buffer from pool that w takes: w gives it back to the
 * pool once it is done with it, whatever the outcome (at the latest when w
 * is committed or aborted). Its MD5 then need not be done when this returns:
 * it waits for a round of the MD5 hub (common/md5.h) while the caller reads
 * the next bytes and the commit waits for the blocks, and other PUTs' MD5s
 * join the round meanwhile.
 */
int obj_put_write_pooled(obj_writer_t *w, void *buf, size_t len, bufpool_t *pool)
    __attribute__((warn_unused_result));
/*
 * Commit: finish the last stripe, write the heads, delete the version it
 * replaces. content_type and umeta (pairs as in obj_info_t) may be NULL.
 * Frees w whatever the outcome. 0, ERR_UNRECOVERABLE (more than m stores
 * failed), or the first store error when fewer than k heads could be written.
 */
int obj_put_commit(obj_writer_t *w, const char *content_type, const char *umeta, size_t umeta_len,
                   obj_info_t *out) __attribute__((warn_unused_result));
/* Hex MD5 of everything written so far; ends the writes (for Content-MD5 checks). */
const char *obj_put_etag(obj_writer_t *w);
/* After the last obj_put_write: 1 when the object will be stored inline (its bytes in its
 * heads), 0 when erasure-coded. */
int obj_put_inline(const obj_writer_t *w);
/* The bucket and key w writes (valid until w is committed or aborted). */
const char *obj_put_bucket(const obj_writer_t *w);
const char *obj_put_key(const obj_writer_t *w);
/* Give up: delete the blocks written so far and free w. */
void obj_put_abort(obj_writer_t *w);

/* Newest head of an object. ERR_NOT_FOUND when absent or deleted. */
int obj_stat(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info)
    __attribute__((warn_unused_result));
/*
 * The version that stands (heads on k stores, or on every copy of a sparse
 * one), read from every store as a commit reads it: never a head another
 * gateway's commit left short (in flight, or not wholly undone). For
 * decisions that must agree with the stores' conditional commits (who owns
 * a bucket a create raced for); costs a head read on all n stores.
 * ERR_NOT_FOUND when none stands or it is deleted.
 */
int obj_stat_standing(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info)
    __attribute__((warn_unused_result));
/*
 * One version: vid NULL for the current one, "null" for the null version,
 * else a version id. Delete markers are found too (info->deleted and
 * info->marker set). ERR_NOT_FOUND when there is no such version (and no
 * current one, for NULL).
 */
int obj_stat_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                     obj_info_t *info) __attribute__((warn_unused_result));
/* Whether vid is a well-formed version id ("null" included). */
int obj_vid_valid(const char *vid);

typedef struct obj_reader obj_reader_t;

obj_reader_t *obj_open(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                       int *err);
/* Open one version (vid as for obj_stat_version). A delete marker: ERR_NOT_FOUND, with
 * its head in *info (info->deleted) when info is not NULL. */
obj_reader_t *obj_open_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                               obj_info_t *info, int *err);
/* Read [off, off+len): healthy blocks straight, up to m lost ones rebuilt. */
int obj_read(obj_reader_t *r, uint64_t off, void *buf, size_t len)
    __attribute__((warn_unused_result));
/*
 * Start reading [off, off+len) into buf in the background (on the set's
 * pool, when it is idle); the next obj_read of exactly that range into buf
 * finds the blocks there. buf must stay untouched until then. Whole stripes
 * (obj_read_unit at multiples of it) only; anything else is ignored.
 */
void obj_read_ahead(obj_reader_t *r, uint64_t off, void *buf, size_t len);
/* Shards that failed in the last failing read (bitmask). */
uint32_t obj_read_missing(const obj_reader_t *r);
/* A multipart object's parts (numbers and sizes, in order; valid until obj_close): their
 * count, 0 for an object made by one PUT. */
int obj_read_parts(const obj_reader_t *r, const int **numbers, const uint64_t **sizes);
/* An inline object's bytes (its info's size of them, read and checked at the open); NULL for
 * an erasure-coded one. */
const uint8_t *obj_read_inline(const obj_reader_t *r);
/* The note the Complete's hooks kept with part index i (0-based) of a multipart object, or ""
 * (valid until obj_close). */
const char *obj_read_part_note(const obj_reader_t *r, int i);

/*
 * The read size that lets obj_read fetch a stripe's blocks in parallel and
 * land them in place: one stripe of data (k x block), read at multiples of it.
 */
size_t obj_read_unit(const obj_reader_t *r);
void obj_close(obj_reader_t *r);

/* Write delete markers and drop the blocks. ERR_NOT_FOUND when absent. */
int obj_delete(obj_set_t *s, const char *bucket, const char *key)
    __attribute__((warn_unused_result));
/* The same, only if c holds for the current version (ERR_PRECOND otherwise). */
int obj_delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c)
    __attribute__((warn_unused_result));
/*
 * DELETE of a key in a bucket with versioning v: unversioned as obj_delete_if;
 * otherwise a delete marker becomes the current version (even when the key
 * has none: S3 does so), the version it covers kept while Enabled, replaced
 * when it is the null one and Suspended. *marker (may be NULL) gets the
 * marker's head.
 */
int obj_delete_current(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c,
                       obj_versioning_t v, obj_info_t *marker) __attribute__((warn_unused_result));
/*
 * Delete one version for good ("null" names the null version); its space
 * is freed. When it is the current one, the newest remaining version (or
 * delete marker) becomes current. *gone (may be NULL) gets the deleted
 * head (a marker: gone->marker). c (may be NULL): conditions on that version
 * (ERR_PRECOND when they fail). ERR_NOT_FOUND when there is no such version.
 */
int obj_delete_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                       const obj_cond_t *c, obj_info_t *gone) __attribute__((warn_unused_result));

/*
 * Heal one object's current version: its heads put back on the stores that
 * lack them (or hold an older one), its blocks verified stripe by stripe and
 * the missing or rotten ones rebuilt and rewritten; a multipart object's
 * parts each the same way. Counts add up in *rep. 0 (also for a key with no
 * current version), or ERR_UNRECOVERABLE (fewer than k good blocks in a
 * stripe: nothing to rebuild from), ERR_IO... A store still failing is
 * counted in rep->failed and left for another pass.
 */
typedef struct {
    uint32_t objects, heads_fixed, blocks_checked, blocks_fixed, failed;
} obj_heal_report_t;
int obj_heal(obj_set_t *s, const char *bucket, const char *key, obj_heal_report_t *rep)
    __attribute__((warn_unused_result));
/* The same for one version (vid as for obj_stat_version: a noncurrent one too). No such
 * version: 0, nothing done. A deleted head that stands (a delete marker, or the tombstone of
 * a delete, by id too) is put where a store lacks it or holds an older head, as any head. */
int obj_heal_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                     obj_heal_report_t *rep) __attribute__((warn_unused_result));
/* A position obj_list_retired gave, healed in that set s: its tombstone put where a store
 * that missed the delete still holds an older head (or whatever heads the position's newest
 * version lacks, when it is a version again). */
int obj_heal_retired(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                     obj_heal_report_t *rep) __attribute__((warn_unused_result));
/* The same for an upload in progress: its record and every part uploaded so far.
 * ERR_NOT_FOUND: no such upload. */
int obj_heal_upload(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                    obj_heal_report_t *rep) __attribute__((warn_unused_result));

/*
 * A refill (obj_refill.c): heals whose rebuilt blocks are written without
 * waiting for them, so that a drive that lacks many (a replaced one) takes
 * them in large group commits, one flush for many blocks, rather than a
 * durable round per object. At most `window` bytes of rebuilt blocks are in
 * flight (a heal waits for room); an object's heads are written once its
 * blocks are durable, many objects' heads in one round, and its version
 * stays pinned until then. obj_heal_via is obj_heal_version (vid NULL: the
 * current version, as obj_heal) through rf: what it verified is counted in
 * rep at once, what it wrote (heads and blocks fixed, and failures) at
 * obj_refill_drain, which waits for every write begun and adds them to its
 * rep. Any number of threads may heal through one rf; drain once they are
 * done, then free (free drains too, with no report). Thread: a pipeline
 * thread of its own writes the heads; obj_refill_new returns NULL when it
 * cannot start one, and obj_heal_via with rf NULL heals as obj_heal_version
 * (drain and free take NULL).
 */
typedef struct obj_refill obj_refill_t;
obj_refill_t *obj_refill_new(size_t window);
int obj_heal_via(obj_refill_t *rf, obj_set_t *s, const char *bucket, const char *key,
                 const char *vid, obj_heal_report_t *rep) __attribute__((warn_unused_result));
void obj_refill_drain(obj_refill_t *rf, obj_heal_report_t *rep);
void obj_refill_free(obj_refill_t *rf);

/*
 * The reaper (obj_reap.c): block records that no version names (a write cut
 * short by a crash, a drop a store missed), and parts of multipart uploads
 * that no upload will take (a part that landed after its upload closed
 * through another node), deleted from a store once they
 * have been seen so, unchanged, for grace_s seconds (0: noted, never
 * deleted). One pass of obj_reap_bucket over every bucket (the internal
 * name, as blocks are stored) and obj_reap_internal, then obj_reaper_sweep
 * with the pass's start; passes must not overlap. Sets with a store not up
 * are passed by.
 */
typedef struct obj_reaper obj_reaper_t;
typedef struct {
    uint64_t groups_seen;     /* (store, key, upload id) groups of blocks named by nothing */
    uint64_t groups_reaped;   /* ... deleted: so for at least the grace */
    uint64_t records_reaped;  /* their block records deleted */
    uint64_t bytes_reaped;    /* and payload bytes (with the parts') */
    uint64_t parts_seen;      /* uploads of parts no upload will take (obj_reap.c) */
    uint64_t parts_reaped;    /* ... dropped: so for at least the grace */
    uint64_t uploads_settled; /* Completes cut short, tidied or opened again (obj_mpu.c) */
    uint64_t failed;          /* store walks or deletes that failed (logged) */
} obj_reap_report_t;
obj_reaper_t *obj_reaper_new(uint64_t grace_s);
void obj_reaper_free(obj_reaper_t *r);
int obj_reap_bucket(obj_set_t *s, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                    obj_reap_report_t *rep);
void obj_reap_internal(obj_set_t *s, obj_reaper_t *r, uint64_t now_s, obj_reap_report_t *rep);
/* The object layer's internal buckets (uploads, parts, manifests): i from 0, NULL past them. */
const char *obj_internal_bucket(int i);
void obj_reaper_sweep(obj_reaper_t *r, uint64_t pass_start_s);
/* Groups remembered, waiting out their grace. */
uint64_t obj_reaper_candidates(obj_reaper_t *r);
/*
 * Every record left under a deleted bucket's internal name (bucket): heads at every
 * position (tombstones, a store's stale heads) and block records (a write cut short, a drop
 * a store missed), on every store of every set but those of removed pools. Only for a name
 * nothing will write to again (a bucket incarnation deleted longer ago than any write into
 * it takes): nothing is checked, everything goes. Counts add up in *rep. 0 when every store
 * was walked to its end (rep->records 0 then: nothing was left), else ERR_UNRECOVERABLE (a
 * store away or failing: stores_left).
 */
typedef struct {
    uint64_t records, bytes; /* records deleted, and their payload bytes */
    uint64_t failed;         /* deletes that failed (logged with the walk) */
    uint64_t stores_left;    /* stores not walked to their end */
} obj_purge_report_t;
int obj_purge_bucket(obj_set_t *s, const char *bucket, obj_purge_report_t *rep)
    __attribute__((warn_unused_result));

/*
 * The heal queue: a write acknowledged with fewer than k+m stores (some
 * were away: a quorum write, a dead drive, a node down) leaves its key here
 * at once, and a background thread heals it (obj_heal) when every store is
 * up again, retrying later (1 s, doubling to a minute) while a store still
 * fails, up to OBJ_HEAL_TRIES times. The queue is in memory and bounded
 * (OBJ_HEAL_QUEUE_MAX keys; more are counted as dropped and logged): what
 * a restart or an overflow loses is found by healing the bucket
 * (POST /_warmlake/heal). Keys are queued only once the thread runs
 * (obj_set_heal_start: warmlaked starts it; tests may not).
 */
#define OBJ_HEAL_QUEUE_MAX (1u << 18)
#define OBJ_HEAL_TRIES     20
int obj_set_heal_start(obj_set_t *s) __attribute__((warn_unused_result));
typedef struct {
    uint64_t queued;  /* keys taken into the queue */
    uint64_t healed;  /* healed whole (nothing left failing) */
    uint64_t retries; /* passes that left a store failing, tried again later */
    uint64_t dropped; /* not queued (full) or given up after OBJ_HEAL_TRIES */
    uint64_t pending; /* in the queue now or being healed */
    uint64_t heads_fixed, blocks_fixed;
    uint64_t drops_pending; /* versions whose blocks wait for a store that was away (below) */
    uint64_t drops_done;    /* ... dropped there once it was back */
    uint64_t drops_lost;    /* drops not queued (full): their blocks or tombstones stay */
} obj_heal_stats_t;
void obj_heal_stats(obj_set_t *s, obj_heal_stats_t *st);

/*
 * Objects of a bucket in key order (delete markers skipped). fn returns 0 to
 * go on, 1 to stop. Returns 0 at the end, 1 when fn stopped, or a negative
 * ERR_* when the listing could not be completed (more than m stores failed,
 * a head unreadable): never a short list that looks whole.
 */
typedef int (*obj_list_fn)(void *arg, const char *key, const obj_info_t *info);
int obj_list(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
             obj_list_fn fn, void *arg) __attribute__((warn_unused_result));
/*
 * obj_list with a delimiter (NULL or "": none): a key that holds delim past
 * the prefix is not listed; its common prefix (the key up to and including
 * that first delim) is, once, as fn(arg, common_prefix, NULL), and the
 * listing then seeks past every key under it, so a page costs the same
 * however many keys a common prefix rolls up. An `after` that is itself a
 * common prefix (an earlier page ended on it) starts past all of it.
 * want: how many entries the caller will take at most (0: no idea), so that
 * stores are not read far past the end of a page. Listings read the
 * ordered indexes of m+1 stores (obj_list.c).
 */
int obj_list_delim(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                   const char *after, size_t want, obj_list_fn fn, void *arg)
    __attribute__((warn_unused_result));
/*
 * Every version and delete marker of a bucket's keys: keys in order, each
 * key's versions newest first (the current one first, latest = 1). Starts
 * after key `after` (NULL: at the start), or, with after_vid, after that
 * version of `after` (its other versions first). Returns as obj_list.
 */
typedef int (*obj_version_fn)(void *arg, const char *key, const obj_info_t *info, int latest);
int obj_list_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
                      const char *after_vid, obj_version_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* The same with a delimiter, as obj_list_delim: fn(arg, common_prefix, NULL, 0) for each. */
int obj_list_versions_delim(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                            const char *after, const char *after_vid, size_t want,
                            obj_version_fn fn, void *arg) __attribute__((warn_unused_result));
/*
 * obj_list_versions over every store of the set rather than k: for
 * healers. After a drive was replaced by an empty one, k stores that
 * include it may miss a version whose heads are on the others (an inline
 * object's m+1 copies less the lost one); n cannot. n walks instead of k.
 */
int obj_list_versions_all(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
                          const char *after_vid, obj_version_fn fn, void *arg)
    __attribute__((warn_unused_result));
/*
 * For healers too: each position (key, and pos: "" for the current one, else a version's)
 * whose newest head over every store is a tombstone (an unversioned delete's, or a delete
 * by version id's), in order, after (after, after_pos) when after is given. Listings pass
 * such positions by; a store that missed the delete may still hold the version there, and
 * obj_heal_retired puts the tombstone on it. s one set (obj_set_sub). Returns as obj_list.
 */
typedef int (*obj_retired_fn)(void *arg, const char *key, const char *pos, const obj_info_t *tomb);
int obj_list_retired(obj_set_t *s, const char *bucket, const char *after, const char *after_pos,
                     obj_retired_fn fn, void *arg) __attribute__((warn_unused_result));

/* ---- multipart uploads ----
 * An upload is a record in an internal bucket; each part is stored as an
 * object of its own (internal bucket, key "<upload>/<part>"); completing
 * writes a manifest object listing the parts and then the head of the
 * destination object, which names the upload. Reads walk the parts. */

/* Start an upload; upload_id receives its id. */
int obj_mpu_create(obj_set_t *s, const char *bucket, const char *key, const char *content_type,
                   const char *umeta, size_t umeta_len, char upload_id[33])
    __attribute__((warn_unused_result));
/* Writer for one part (1..10000) of an upload of bucket/key. ERR_NOT_FOUND: no such upload. */
obj_writer_t *obj_mpu_part_begin(obj_set_t *s, const char *bucket, const char *key,
                                 const char *upload_id, int part, int *err);
/* The same, and the upload's record (its content type and metadata) into *rec. */
obj_writer_t *obj_mpu_part_begin_rec(obj_set_t *s, const char *bucket, const char *key,
                                     const char *upload_id, int part, obj_info_t *rec, int *err);

typedef struct {
    int part;
    char etag[80]; /* as the client sent it, quotes allowed */
} obj_mpu_part_t;

enum {
    OBJ_MPU_OK = 0,
    OBJ_MPU_NO_UPLOAD,
    OBJ_MPU_BAD_PART,
    OBJ_MPU_BAD_ORDER,
    OBJ_MPU_BAD_NUMBER, /* a part number below 1 */
    OBJ_MPU_TOO_SMALL,
    OBJ_MPU_REFUSED /* the hooks' begin or finish refused it */
};

/*
 * Complete: check every listed part exists with that ETag, in ascending
 * order, all but the last at least min_part bytes; then commit the object.
 * *why gets an OBJ_MPU_* reason when the list is refused (rc ERR_INVAL or
 * ERR_NOT_FOUND). ETag: md5 of the parts' md5s, "-N". cond (may be NULL) as
 * for obj_put_set_cond. A Complete retried after it succeeded, with the same
 * parts, returns 0 and the object as long as it is still the current version.
 */
int obj_mpu_complete(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                     const obj_mpu_part_t *parts, int n, uint64_t min_part, const obj_cond_t *cond,
                     obj_versioning_t v, obj_info_t *out, int *why)
    __attribute__((warn_unused_result));
/*
 * What the layer above adds to a Complete (multipart checksums), run under
 * the upload's lock so that the parts it sees are the parts committed:
 *   begin   first, with the upload's record: non-zero refuses the Complete
 *           (OBJ_MPU_REFUSED).
 *   part    for each listed part in order, with its head: 0 accepts it (and
 *           may write a note of up to OBJ_MPU_NOTE_MAX - 1 bytes, no white
 *           space, kept with the part in the manifest: obj_read_part_note);
 *           non-zero refuses the Complete (OBJ_MPU_BAD_PART).
 *   finish  then, before anything is written: may rewrite the object's
 *           metadata pairs (*umeta_len bytes of umeta, cap bytes of room);
 *           non-zero refuses the Complete (OBJ_MPU_REFUSED).
 * Any may be NULL. A Complete retried after it succeeded (its upload record
 * gone) calls none.
 */
#define OBJ_MPU_NOTE_MAX 128
typedef struct {
    int (*begin)(void *arg, const obj_info_t *rec);
    int (*part)(void *arg, int i, const obj_info_t *head, char note[OBJ_MPU_NOTE_MAX]);
    int (*finish)(void *arg, char *umeta, size_t *umeta_len, size_t cap);
    void *arg;
} obj_mpu_hooks_t;
/* obj_mpu_complete with hooks (may be NULL). */
int obj_mpu_complete_hooked(obj_set_t *s, const char *bucket, const char *key,
                            const char *upload_id, const obj_mpu_part_t *parts, int n,
                            uint64_t min_part, const obj_cond_t *cond, obj_versioning_t v,
                            const obj_mpu_hooks_t *hooks, obj_info_t *out, int *why)
    __attribute__((warn_unused_result));
/* The record of an upload in progress (content type and metadata: the final object's).
 * 0, ERR_NOT_FOUND when there is no such upload of bucket/key, or an ERR_*. */
int obj_mpu_upload_stat(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                        obj_info_t *rec) __attribute__((warn_unused_result));
/* Parts uploaded so far, in part order: fn(arg, part, info). ERR_NOT_FOUND: no such upload. */
typedef int (*obj_part_fn)(void *arg, int part, const obj_info_t *info);
int obj_mpu_list_parts(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                       obj_part_fn fn, void *arg) __attribute__((warn_unused_result));
/* Uploads in progress for a bucket: fn(arg, key, upload_id, info of the upload record), in no
 * order to rely on (set by set). */
typedef int (*obj_upload_fn)(void *arg, const char *key, const char *upload_id,
                             const obj_info_t *info);
int obj_mpu_list_uploads(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* The same from every store's index rather than k (for healers: obj_list_versions_all). */
int obj_mpu_list_uploads_all(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* Uploads in progress and those a Complete closed and a kill may have cut short (which
 * ListMultipartUploads does not show): for a DeleteBucket, which must end them all. */
int obj_mpu_list_uploads_any(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* Abort: drop every part and the upload. ERR_NOT_FOUND: no such upload. */
int obj_mpu_abort(obj_set_t *s, const char *bucket, const char *key, const char *upload_id)
    __attribute__((warn_unused_result));

/*
 * Rewrite the user metadata (umeta pairs, as in obj_info_t) of the current
 * version in place: its data is untouched, its heads are rewritten (ACL
 * changes). fn computes the new pairs from the current version's, under the
 * key's lock, so a PUT committing meanwhile cannot get another version's
 * metadata: fn(arg, cur, out, &out_len) returns 0 or an ERR_* (passed on).
 * ERR_NOT_FOUND when there is no such object.
 */
typedef int (*obj_umeta_fn)(void *arg, const obj_info_t *cur, char *out, size_t *out_len);
int obj_update_umeta(obj_set_t *s, const char *bucket, const char *key, obj_umeta_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* The same for one version (vid as for obj_stat_version; NULL: the current one). A delete
 * marker: ERR_NOT_FOUND with *marker set (marker may be NULL). */
int obj_update_umeta_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                             obj_umeta_fn fn, void *arg, int *marker)
    __attribute__((warn_unused_result));

/* Encode/decode the head metadata blob (exposed for the fuzzer). */
size_t obj_meta_encode(const obj_info_t *info, uint8_t *buf, size_t cap);
int obj_meta_decode(const uint8_t *buf, size_t len, obj_info_t *info)
    __attribute__((warn_unused_result));

#endif
