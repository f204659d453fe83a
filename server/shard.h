/*
 * shard: the shard-store interface, the only way the gateway reaches a
 * drive. A local drive and (later) a drive on another node behind proto/
 * implement the same calls, so nothing above changes when a drive moves.
 */
#ifndef WL_SHARD_H
#define WL_SHARD_H

#include "storage/drive.h"

struct proto_cancel; /* proto/net.h: shard_hedge_token */

/*
 * Longest bucket and key names a store takes (bytes, without the NUL): the
 * record format's limits (shard.c checks that they match).
 */
#define SHARD_MAX_BUCKET 255
#define SHARD_MAX_KEY    1024

/*
 * The condition of a head put (put_head) or a head delete (del_head): what
 * the store must find at the identity for the put to replace it (for the
 * delete to remove it: judged as a put of "nothing" would be). The store decides, atomically with
 * the write, so that gateways on different nodes committing one key end
 * with every store holding the same winner ("the set's shards decide"):
 *   SHARD_IF_NEWER   nothing, a record that is no head, or a head older by
 *                    (stamp, upload id) than (stamp, upload): the order a
 *                    reader picks the newest head by, so every store keeps
 *                    the newest version whatever order writes arrive in
 *   SHARD_IF_UPLOAD  the head of version `upload` (and, when `stamp` is not
 *                    0, with that very stamp: one rewrite of the version, not
 *                    another): undoing a commit only where its own head still
 *                    stands
 *   SHARD_IF_AT_MOST nothing, a record that is no head, a head no newer
 *                    than (stamp, upload), or the head of version `self`
 *                    (the one being written, again): a commit replaces
 *                    what it read as current (or anything older), never
 *                    what another writer put there meanwhile
 *   SHARD_IF_KEPT    as SHARD_IF_NEWER, and never over the tombstone of
 *                    version `upload` (a version retired there, deleted by
 *                    its id): keeping a version as noncurrent must not bring
 *                    back one deleted since the writer read it as current;
 *                    nor over a head of that version whose metadata is
 *                    newer than the put's (obj_umeta_ns: a rewrite by id
 *                    that landed after the current head was copied there)
 *   SHARD_IF_REWRITE a head no newer than (stamp, upload): never nothing. A
 *                    metadata rewrite replaces the version it read where
 *                    that version is, never another rewrite of it, and never
 *                    lands where an unversioned DELETE (which leaves nothing)
 *                    emptied the store meanwhile
 * A delete under SHARD_IF_AT_MOST is what an unversioned DELETE removes the
 * version it read with (obj_delete.c delete_if): never a commit that landed
 * after its read, nor the copies of a small one (its heads are its bytes).
 * In every mode, a head that is no tombstone never replaces the tombstone of
 * its own version (same upload id): "the head of version X" (SHARD_IF_UPLOAD,
 * `self`) is not X's retirement. A metadata rewrite, a heal or an undo that
 * read X before its delete by id would bring it back, its blocks dropped.
 * Otherwise the put is refused with ERR_PRECOND and nothing is written.
 */
enum {
    SHARD_IF_NEWER = 1,
    SHARD_IF_UPLOAD = 2,
    SHARD_IF_AT_MOST = 3,
    SHARD_IF_KEPT = 4,
    SHARD_IF_REWRITE = 5
};
typedef struct {
    int mode;
    uint64_t stamp;
    char upload[33];
    char self[33]; /* SHARD_IF_AT_MOST: the version being written ("": none) */
} shard_cond_t;

typedef struct {
    int (*put)(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
               size_t meta_len);
    int (*read)(void *ctx, const drive_id_t *id, uint64_t off, void *buf, size_t len);
    int (*stat)(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap);
    int (*del)(void *ctx, const drive_id_t *id);
    /*
     * Optional: del of a head under cond (see shard_cond_t), judged at the
     * store atomically with the delete: 0, ERR_NOT_FOUND (nothing there),
     * ERR_PRECOND (the condition does not hold: nothing removed), or an
     * error. A store without it cannot delete a head conditionally: callers
     * treat that as a failing store (never as an unconditional delete).
     */
    int (*del_head)(void *ctx, const drive_id_t *id, const shard_cond_t *cond);
    /*
     * Optional: del without waiting, for records nothing reads (a dropped
     * version's blocks): done(arg, rc) once durable or failed; or an error at
     * once (ERR_NOT_FOUND: nothing there) and done never runs.
     */
    int (*del_async)(void *ctx, const drive_id_t *id, drive_done_fn done, void *arg);
    int (*list)(void *ctx, const char *bucket, const char *prefix, const char *after,
                drive_list_fn fn, void *arg);
    /*
     * Optional: read [0, len+tail_len) into buf and tail (a block and its
     * crc), with *buf_crc the crc32c of buf's len bytes as they lie there
     * (see drive_read_split: a drive derives it from checks it makes anyway).
     */
    int (*read_split)(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                      size_t tail_len, uint32_t *buf_crc);
    /*
     * Optional: read_split in two halves (drive_read_begin and drive_read_end:
     * the I/O between them is the caller's), so that a stripe's block reads
     * go to the device in one submission (obj__block_batch).
     */
    int (*read_begin)(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                      size_t tail_len, uint32_t *buf_crc, drive_rd_t **op, drive_rd_io_t *io);
    int (*read_end)(drive_rd_t *op, ssize_t res);
    /*
     * Optional: metadata and payload of one record together (drive_get):
     * what an object stored inline in its head is read with. Without it,
     * stat + read + stat again.
     */
    int (*get)(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap,
               void *buf, size_t cap);
    /* Engine counters of the drive behind the store (write amplification, space). */
    void (*stats)(void *ctx, drive_stats_t *st);
    /*
     * Optional: put without waiting (drive_put_async's contract): 0 and
     * done(arg, rc) runs once when durable or failed, data and meta kept
     * valid until then; or an error at once and done never runs. A store
     * without it has put run on a pool thread that waits.
     */
    int (*put_async)(void *ctx, const drive_id_t *id, const void *data, size_t len,
                     const void *meta, size_t meta_len, drive_done_fn done, void *arg);
    /*
     * The ordered listing with each entry's metadata (drive_scan): what a
     * bucket listing merges, heads and all, without a read per key.
     */
    int (*scan)(void *ctx, const char *bucket, const char *prefix, const drive_from_t *from,
                drive_scan_fn fn, void *arg);
    /*
     * Optional: put_async of a head under cond (see shard_cond_t): 0 and
     * done later, or an error at once (ERR_PRECOND: the condition does not
     * hold) and done never runs. Without it a head is put unconditionally.
     */
    int (*put_head)(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
                    size_t meta_len, const shard_cond_t *cond, drive_done_fn done, void *arg);
    /*
     * Optional: how the way to the store is doing (shard_health_t), cheap
     * (no I/O). Without it the store is up. Readers ask stores that are up
     * first and one that is not only when the others cannot do without it:
     * a node that stopped answering costs its call deadline once (it turns
     * suspect), not on every request.
     */
    int (*health)(void *ctx);
    /*
     * Optional: stat without waiting (a store behind the network): 0 and
     * done(arg, rc) runs once, any thread, after st and meta were filled
     * (rc 0) or with the failure; or an error at once and done never runs.
     * st and meta stay valid until done. Stores without it are asked with
     * stat, one after another.
     */
    int (*stat_async)(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta,
                      size_t meta_cap, drive_done_fn done, void *arg);
    /*
     * Optional: 1 while the store holds less than the set expects (a replaced
     * drive not yet refilled: drive_refilling). Readers that merge some
     * stores' indexes take it last; writers write it as any other.
     */
    int (*refilling)(void *ctx);
    /*
     * Optional, together: a block written without a flush of its own
     * (drive_put_async_unsynced: done once written, neither durable nor
     * readable yet; no metadata, so never a head), and the flush that makes
     * every such write whose done has run durable and readable
     * (drive_sync). What a refill writes between the checkpoints where its
     * blocks must be durable (before the heads that name them). A store
     * without them is written with put_async.
     */
    int (*put_unsynced)(void *ctx, const drive_id_t *id, const void *data, size_t len,
                        drive_done_fn done, void *arg);
    int (*sync)(void *ctx);
} shard_ops_t;

/* A store's health (shard_ops_t.health). */
typedef enum {
    SHARD_UP = 0,
    SHARD_SUSPECT = 1, /* a call timed out, none answered since */
    SHARD_DOWN = 2,    /* no connection (reconnects are being tried) */
    /*
     * Down for good while this node runs: a drive that did not open at its
     * node's start. Read and written around as a store that is down; work
     * that would wait for a store to come back (the heal queue, the
     * scanner) goes on without it instead, and the drive is refilled when
     * it is back (node_drives.c: DATA/missed).
     */
    SHARD_FAILED = 3
} shard_health_t;

typedef struct {
    const shard_ops_t *ops;
    void *ctx;
} shard_store_t;

/*
 * Reads and writes that can be given up on (hedged reads and writes): while a
 * thread has a token set, the calls a store behind the network makes for it
 * (put_async and put_head too: the call is started on that thread) are made
 * with that token (proto/net.h, proto_cancel): after proto_cancel(token)
 * such a call ends with ERR_CANCELED unless its answer had already come, and
 * then it has written nothing into the caller's places; an asynchronous put
 * calls back only once the net holds none of its bytes. A local drive's read
 * or write cannot be given up on: local stores ignore the token. NULL: none
 * (the default).
 */
struct proto_cancel *shard_hedge_token(void);
void shard_set_hedge_token(struct proto_cancel *t);

/*
 * A store backed by a local drive (borrowed; the caller closes it). NULL, a
 * drive that did not open: a store whose calls all fail (ERR_IO) at once,
 * its health SHARD_FAILED.
 */
shard_store_t shard_store_local(drive_t *d);
/* Whether st is one (shard_store_local: a drive of this node, opened or not). */
int shard_store_is_local(const shard_store_t *st);

/*
 * put_head on a local drive: what the local store does, and what a node
 * does for its peers (server/peer_serve.c), so that both go through one
 * lock per identity: the check and the write are one step for every
 * writer of the drive, local or remote.
 */
int shard_put_head_local(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                         const void *meta, size_t meta_len, const shard_cond_t *cond,
                         drive_done_fn done, void *arg) __attribute__((warn_unused_result));
/*
 * A plain put and a delete on a local drive, as the local store and a node
 * serving its peers do them: a head (meta_len > 0) and every delete take the
 * identity's lock as a conditional put does, so that no condition is judged
 * while a write of that identity is still in flight.
 */
int shard_put_async_local(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                          const void *meta, size_t meta_len, drive_done_fn done, void *arg)
    __attribute__((warn_unused_result));
int shard_delete_local(drive_t *d, const drive_id_t *id) __attribute__((warn_unused_result));
/*
 * A delete of a head under cond (NULL: none) on a local drive, judged under
 * the identity's lock as shard_put_head_local judges a put: 0, ERR_NOT_FOUND,
 * ERR_PRECOND (refused, nothing removed), or the drive's error. What the
 * local store's del_head does, and what a node does for its peers.
 */
int shard_delete_head_local(drive_t *d, const drive_id_t *id, const shard_cond_t *cond)
    __attribute__((warn_unused_result));

#endif
