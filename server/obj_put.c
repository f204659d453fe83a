/*
 * obj_put.c: the writer (room of the object layer; map in obj_int.h).
 *
 * The body streams through the erasure encoder, hashed (MD5, the ETag) on
 * the way. Two stripe slots take turns: while the k+m block writes of one
 * stripe are in flight (obj__put_start), the next is received, hashed and
 * encoded into the other. A store that fails a write is skipped from then
 * on; up to m may fail. The commit waits for every block to be durable,
 * then writes the heads (obj__commit_heads): the commit point.
 *
 * A small object never reaches the encoder: its bytes are held until they
 * pass the set's inline_max (then they are fed to a fresh encoder and the
 * stream goes on as above) or the commit, which writes them inline, as the
 * payload of m+1 of the heads: one durable round, no blocks.
 */
#include "server/obj_int.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "common/md5.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct obj_writer {
    obj_set_t *s;
    obj_set_t *pools; /* the multi set it was routed from, when it has pools (obj_put_begin) */
    char bucket[SHARD_MAX_BUCKET + 2], bbucket[SHARD_MAX_BUCKET + 2];
    char *key;
    char upload[33];
    ers_encoder_t *enc;
    uint64_t size_hint; /* obj_put_size_hint: the object's size as its client said it */
    md5_t md5; /* the ETag's; long updates share vector rounds with other PUTs' (common/md5.h) */
    md5_pending_t md5_pend; /* the last update, maybe still in the hub (md5_settle) */
    void *md5_buf;          /* obj_put_write_pooled's buffer it reads, back to md5_pool after */
    bufpool_t *md5_pool;
    /*
     * Two stripe slots. Per slot and shard: block + crc, the record payload, each on a 4 KiB
     * boundary (block_at: n x (B + 4) rounded up to 4 KiB).
     */
    uint8_t *blk[2];
    uint32_t blen[2][OBJ_MAX_SHARDS];
    obj__put_job_t jobs[2][OBJ_MAX_SHARDS];
    latch_t latch[2];
    int inflight[2];
    uint32_t dead; /* stores that failed a write: skipped from then on */
    int cause;     /* why stores failed, when it says more than "unavailable": throttled, full */
    int err;
    uint64_t stripes;
    /* The bytes so far, while they fit inline (no encoder yet): small_cap bytes of room. */
    uint8_t *small;
    size_t small_len, small_cap;
    char etag[33];         /* set once the MD5 is final; no writes after that */
    char mpu_upload[33];   /* a part of this upload: it must still be open at the commit */
    uint64_t mpu_rec_size; /* the size of that upload's record while it is open */
    obj_cond_t cond;       /* what the replaced version must be (conditional writes) */
    int has_cond;
    obj_versioning_t versioning; /* the bucket's, at commit */
};

void (*obj__part_commit_hook)(void *arg, const char *upload);
void *obj__part_commit_hook_arg;

/*
 * More stores failed than the write quorum leaves room for: the PUT fails. Say why in the terms a
 * client can act on: throttled (retry later: 503 SlowDown), full (507), else the drives are
 * unavailable.
 */
static int dead_verdict(const obj_writer_t *w)
{
    if (__builtin_popcount(w->dead) <= w->s->n - w->s->wq) return 0;
    return w->cause ? w->cause : ERR_UNRECOVERABLE;
}

/* Wait for the writes of a slot's stripe; failed stores join w->dead. */
static int slot_wait(obj_writer_t *w, int slot)
{
    obj_set_t *s = w->s;
    if (!w->inflight[slot]) return 0;
    /*
     * Hedged: once the write quorum has this stripe, writes still out to other nodes after
     * the delay are given up on, and their stores count as failed for this write (skipped
     * from now on, the object healed once committed). Every call has let go of the slot's
     * buffer when this returns: the encoder may fill it again.
     */
    uint32_t gave = obj__put_wait(s, w->jobs[slot], s->n, &w->latch[slot], s->wq,
                                  w->dead); /* the stores lost in the other slot's stripe */
    w->inflight[slot] = 0;
    if (gave)
        log_warn("event=put_hedged key=%s upload=%s stores=0x%x: the quorum had the stripe; "
                 "going on without them",
                 w->key, w->upload, gave);
    for (int i = 0; i < s->n; i++) {
        obj__put_job_t *j = &w->jobs[slot][i];
        if (!j->base.run || j->rc == 0) continue;
        if (j->rc == ERR_CANCELED) {
            w->dead |= 1u << i; /* given up on: not a failure of the store to report */
            continue;
        }
        /* Up to m stores may fail; the object is still whole on the rest. */
        if (!(w->dead & (1u << i)))
            log_limited(LOG_LVL_WARN, "event=shard_write_failed shard=%d key=%s err=%s", i, w->key,
                        err_name(j->rc));
        w->dead |= 1u << i;
        if (j->rc == ERR_THROTTLED || (j->rc == ERR_NOSPC && w->cause != ERR_THROTTLED))
            w->cause = j->rc;
    }
    return dead_verdict(w);
}

/*
 * Where block i of a stripe slot starts: each block, with its 4-byte crc after it, on a 4 KiB
 * boundary, so that the drive writes it from here without copying it (drive_write.c: a
 * payload in an aligned buffer goes to the file from its caller's memory; at a stride of
 * B + 4 only block 0 was aligned).
 */
static size_t block_at(const obj_set_t *s, int i)
{
    return (size_t)i * align_up((size_t)s->block + 4, 4096);
}

/* Start the k+m block writes of one stripe; they finish in the background. */
static int flush_stripe(obj_writer_t *w, uint64_t stripe)
{
    obj_set_t *s = w->s;
    int slot = (int)(stripe & 1);
    for (int i = 0; i < s->n; i++) {
        obj__put_job_t *j = &w->jobs[slot][i];
        memset(j, 0, sizeof(*j));
        if (w->dead & (1u << i)) continue;
        j->base.run = obj__run_put;
        j->st = &s->st[i];
        j->id = (drive_id_t){w->bbucket, w->key, w->upload,
                             (uint32_t)(stripe << SHARD_BITS) | (uint32_t)i};
        j->data = w->blk[slot] + block_at(s, i);
        j->len = w->blen[slot][i] + 4;
        j->hedge = s->hedge_ms != 0;
    }
    w->inflight[slot] = 1;
    obj__put_start(s, w->jobs[slot], s->n, &w->latch[slot]); /* skipped stores: st NULL */
    return dead_verdict(w);
}

/*
 * The encoder lays each stripe's blocks straight into a stripe slot (ers_encoder_place): block
 * i at blk[slot] + block_at(i), the 4 bytes after it for its crc, so that each record's payload
 * is ready where the encoder leaves it. The slot's previous stripe (two back) must be on its
 * stores before the slot is filled again.
 */
static int place_stripe(void *arg, uint64_t stripe, uint8_t *blocks[])
{
    obj_writer_t *w = arg;
    int slot = (int)(stripe & 1), rc;
    if ((rc = slot_wait(w, slot)) != 0) return rc;
    for (int i = 0; i < w->s->n; i++)
        blocks[i] = w->blk[slot] + block_at(w->s, i);
    return 0;
}

static int block_sink(void *arg, unsigned shard, uint64_t stripe, const uint8_t *block,
                      uint32_t len, uint32_t crc)
{
    obj_writer_t *w = arg;
    obj_set_t *s = w->s;
    int slot = (int)(stripe & 1);
    uint8_t *dst = w->blk[slot] + block_at(s, (int)shard);
    if (stripe + 1 > w->stripes) w->stripes = stripe + 1;
    if (block != dst) memcpy(dst, block, len); /* placed: it is there already */
    le_put32(dst + len, crc);
    w->blen[slot][shard] = len;
    /* The encoder hands over shards 0..k+m-1 in order: the last one completes the stripe. */
    return shard == (unsigned)s->n - 1 ? flush_stripe(w, stripe) : 0;
}

/* From here on the bytes stream through the encoder into blocks. */
static int start_encoder(obj_writer_t *w)
{
    obj_set_t *s = w->s;
    int err = dead_verdict(w); /* too big for inline copies: the quorum decides now */
    if (err) return err;
    w->enc = ers_encoder_new_in(s->bufs, s->k, s->m, s->block, block_sink, w, &err);
    if (!w->enc) return err ? err : ERR_NOMEM;
    ers_encoder_place(w->enc, place_stripe, w->size_hint);
    for (int i = 0; i < 2; i++)
        w->blk[i] = bufpool_get(s->bufs, block_at(s, s->n));
    if (w->small_len) err = ers_encoder_write(w->enc, w->small, w->small_len);
    free(w->small);
    w->small = NULL;
    w->small_len = w->small_cap = 0;
    return err;
}

obj_writer_t *obj__put_begin(obj_set_t *s, const char *bucket, const char *key,
                             const char *mpu_upload, uint64_t mpu_rec_size, int *err)
{
    if (!bucket[0] || strlen(bucket) > SHARD_MAX_BUCKET - 1 || strlen(key) > SHARD_MAX_KEY) {
        *err = ERR_INVAL;
        return NULL;
    }
    obj_writer_t *w = xcalloc(1, sizeof(*w));
    w->s = s;
    latch_init(&w->latch[0]);
    latch_init(&w->latch[1]);
    snprintf(w->bucket, sizeof(w->bucket), "%s", bucket);
    obj__blk_bucket(w->bbucket, bucket);
    w->key = xstrdup(key);
    if (mpu_upload) snprintf(w->mpu_upload, sizeof(w->mpu_upload), "%s", mpu_upload);
    w->mpu_rec_size = mpu_rec_size;
    if ((*err = obj__new_upload_id(w->upload)) != 0) goto fail;
    /*
     * Stores known not to be up (a node that stopped answering) are skipped
     * from the start, as if they had failed: each write to one would wait
     * out its deadline. The write goes on if the rest make the quorum, and
     * what they missed is healed once they are back.
     */
    w->dead = obj__unhealthy(s);
    /*
     * Stores a write was given up on lately (slow: obj__put_wait, or a read's hedge) are
     * skipped too while the quorum does without them, so that each PUT does not pay the
     * hedge delay again; readers still ask them (they are up).
     */
    uint32_t slow = obj__slow(s) & ~w->dead;
    if (slow && __builtin_popcount(w->dead | slow) <= s->n - s->wq) w->dead |= slow;
    /*
     * Too few up for the write quorum: fail now (503), before a byte is taken or a head read
     * waits on a store that is away; unless the object may turn out small and its m+1 inline
     * copies avoid them (its copies are its quorum), which start_encoder checks again.
     */
    if ((*err = dead_verdict(w)) != 0 &&
        (!s->inline_max || (obj__inline_stores(s, bucket, key) & w->dead))) {
        log_limited(LOG_LVL_WARN, "event=put_refused key=%s up=%d quorum=%d: too few stores up",
                    key, s->n - __builtin_popcount(w->dead), s->wq);
        goto fail;
    }
    *err = 0;
    /* The encoder and stripe slots (tens of MiB) only for what does not fit inline. */
    if (!s->inline_max && (*err = start_encoder(w)) != 0) goto fail;
    md5_init(&w->md5);
    return w;
fail:
    obj_put_abort(w);
    return NULL;
}

obj_writer_t *obj_put_begin(obj_set_t *s, const char *bucket, const char *key, int *err)
{
    obj_set_t *top = s;
    s = obj__route(s, bucket, key);
    obj_writer_t *w = obj__put_begin(s, bucket, key, NULL, 0, err);
    if (w && obj_set_pools(top) > 1) w->pools = top;
    return w;
}

static int put_bytes(obj_writer_t *w, const void *data, size_t len);

/* The last update hashed, and its pooled buffer given back: before the MD5 is touched again. */
static void md5_settle(obj_writer_t *w)
{
    md5_update_end(&w->md5_pend);
    if (w->md5_buf) bufpool_put(w->md5_pool, w->md5_buf);
    w->md5_buf = NULL;
}

int obj_put_write(obj_writer_t *w, const void *data, size_t len)
{
    if (w->err) return w->err;
    if (w->etag[0]) return ERR_CLOSED;
    if (!len) return 0;
    /*
     * The MD5 waits in the hub for a round while the encoder takes the same bytes: other PUTs'
     * MD5s join it there meanwhile, so rounds run wider (common/md5.h).
     */
    md5_settle(w);
    md5_update_begin(&w->md5, data, len, &w->md5_pend);
    int rc = put_bytes(w, data, len);
    md5_settle(w);
    return rc;
}

int obj_put_write_pooled(obj_writer_t *w, void *buf, size_t len, bufpool_t *pool)
{
    int rc = w->err ? w->err : w->etag[0] ? ERR_CLOSED : 0;
    if (rc || !len) {
        bufpool_put(pool, buf);
        return rc;
    }
    /* The MD5 stays in the hub past the return, until the next write, the ETag or the end. */
    md5_settle(w);
    md5_update_begin(&w->md5, buf, len, &w->md5_pend);
    w->md5_buf = buf;
    w->md5_pool = pool;
    return put_bytes(w, buf, len);
}

static int put_bytes(obj_writer_t *w, const void *data, size_t len)
{
    if (!w->enc && len <= w->s->inline_max - w->small_len) {
        if (w->small_len + len > w->small_cap) {
            size_t cap = w->small_cap ? w->small_cap : 4096;
            while (cap < w->small_len + len)
                cap *= 2;
            w->small = xrealloc(w->small, cap < w->s->inline_max ? cap : w->s->inline_max);
            w->small_cap = cap < w->s->inline_max ? cap : w->s->inline_max;
        }
        memcpy(w->small + w->small_len, data, len);
        w->small_len += len;
        return 0;
    }
    if (!w->enc && (w->err = start_encoder(w)) != 0) return w->err;
    return w->err = ers_encoder_write(w->enc, data, len);
}

void obj_put_size_hint(obj_writer_t *w, uint64_t size)
{
    w->size_hint = size;
    if (w->enc) ers_encoder_place(w->enc, place_stripe, size); /* started at the begin */
}

int obj_put_inline(const obj_writer_t *w)
{
    return !w->err && !w->enc;
}

const char *obj_put_bucket(const obj_writer_t *w)
{
    return w->bucket;
}

const char *obj_put_key(const obj_writer_t *w)
{
    return w->key;
}

const char *obj_put_etag(obj_writer_t *w)
{
    if (!w->etag[0]) {
        uint8_t digest[16];
        md5_settle(w);
        md5_final(&w->md5, digest);
        for (unsigned i = 0; i < 16; i++)
            snprintf(w->etag + 2 * i, 3, "%02x", digest[i]);
    }
    return w->etag;
}

static void writer_free(obj_writer_t *w)
{
    /* No write may still point into the buffers, nor the MD5 hub into a pooled one. */
    md5_settle(w);
    (void)slot_wait(w, 0);
    (void)slot_wait(w, 1);
    ers_encoder_free(w->enc);
    for (int i = 0; i < 2; i++) {
        bufpool_put(w->s->bufs, w->blk[i]);
        latch_destroy(&w->latch[i]);
    }
    free(w->small);
    free(w->key);
    free(w);
}

void obj_put_abort(obj_writer_t *w)
{
    if (!w) return;
    (void)slot_wait(w, 0);
    (void)slot_wait(w, 1);
    /* The encoder may have stored the first block of the next stripe too. */
    if (w->enc) obj__drop_blocks(w->s, w->bucket, w->key, w->upload, w->stripes + 1, w->dead);
    writer_free(w);
}

int obj_put_commit(obj_writer_t *w, const char *content_type, const char *umeta, size_t umeta_len,
                   obj_info_t *out)
{
    obj_set_t *s = w->s;
    obj_info_t info, old;
    int rc = w->err, first_err = 0;

    memset(&info, 0, sizeof(info));
    if (!rc && !w->enc) {
        /* Inline: the layout says the size (and the set it was written for); no blocks. */
        info.layout =
            (ers_layout_t){(uint8_t)s->k, (uint8_t)s->m, w->small_len ? s->block : 0, w->small_len};
        info.inl = obj__inline_stores(s, w->bucket, w->key);
        info.inl_crc = crc32c(0, w->small, w->small_len);
    }
    if (!rc && w->enc) rc = ers_encoder_finish(w->enc, &info.layout);
    /* Every block durable before the heads that point at them. */
    if (!rc) rc = slot_wait(w, 0);
    if (!rc) rc = slot_wait(w, 1);
    if (!rc && umeta_len > sizeof(info.umeta)) rc = ERR_TOO_LARGE;
    if (rc) {
        obj_put_abort(w);
        return rc;
    }
    snprintf(info.etag, sizeof(info.etag), "%s", obj_put_etag(w));
    info.size = info.layout.size;
    memcpy(info.upload_id, w->upload, sizeof(info.upload_id));
    snprintf(info.content_type, sizeof(info.content_type), "%s",
             content_type ? content_type : "binary/octet-stream");
    if (umeta_len) memcpy(info.umeta, umeta, umeta_len);
    info.umeta_len = umeta_len;

    /*
     * With pools, the key's pool was picked when the write began, which may
     * be minutes ago: another pool may hold the key now (deleted here and
     * written there meanwhile, or the weights changed under a racing
     * create). Committed here, the key would live in two pools: refused
     * (503 SlowDown: the client's retry goes to the pool that holds it).
     */
    int holder = w->pools && !w->mpu_upload[0] ? obj__pool_holder(w->pools, w->bucket, w->key) : -1;
    if (holder >= 0 && w->pools->sub[obj__in_pool(w->pools, holder, w->bucket, w->key)] != s) {
        log_warn("event=put_pool_moved key=%s: the key's pool changed while it was written",
                 w->key);
        obj_put_abort(w);
        return ERR_THROTTLED;
    }
    /* A part commits only while its upload is open (abort and complete take this lock). */
    pthread_mutex_t *ul = w->mpu_upload[0] ? obj__mpu_lock(s, w->mpu_upload) : NULL;
    if (ul) {
        pthread_mutex_lock(ul);
        /* A record of another size is one a Complete is closing (obj_mpu.c): closed. */
        if ((rc = obj_stat(s, MPU_UPLOADS, w->mpu_upload, &old)) != 0 ||
            (old.size != w->mpu_rec_size && (rc = ERR_NOT_FOUND))) {
            pthread_mutex_unlock(ul);
            obj_put_abort(w); /* its blocks go now: nothing will ever name them */
            return rc;
        }
        /* Later than the uploads of this part before it, on whichever node's clock: the
         * latest is the part (obj_mpu.c), and a client's last upload must be it. */
        uint64_t floor = obj__part_stamp_floor(s, w->key);
        if (floor) {
            if (!w->has_cond) w->cond = (obj_cond_t)OBJ_COND_NONE;
            w->has_cond = 1;
            w->cond.stamp_after = floor;
        }
        if (obj__part_commit_hook) obj__part_commit_hook(obj__part_commit_hook_arg, w->mpu_upload);
    }
    /*
     * The commit point: heads on every store that took the blocks. An empty object passes no
     * bytes (NULL), so it is never sparse: a head on every store. Bucket records and upload
     * markers are empty objects, and sparse they stood only while all m+1 copies agreed: a
     * rewrite in flight, or one cut by a crash, left no version standing, and a CreateBucket
     * after such a crash made the bucket anew, empty (a probe, session 23).
     */
    int heads =
        obj__commit_heads(s, w->bucket, w->key, w->has_cond ? &w->cond : NULL, w->versioning, &info,
                          w->enc ? NULL : w->small, w->dead, &first_err);
    if (ul) pthread_mutex_unlock(ul);
    if (heads == OBJ__COMMIT_IN_DOUBT) {
        /* Failed, but failing stores kept heads of it: its blocks stay for them. */
        log_error("event=commit_in_doubt key=%s upload=%s", w->key, w->upload);
        writer_free(w);
        return ERR_UNRECOVERABLE;
    }
    if (heads < 0 || !obj__enough(s, &info, heads)) {
        /* A condition that does not hold, or not enough heads to be found reliably: undo. */
        if (heads >= 0 && !first_err) first_err = w->cause; /* stores that failed earlier */
        if (heads >= 0)
            log_error("event=commit_failed key=%s heads=%d err=%s", w->key, heads,
                      err_name(first_err));
        obj_put_abort(w);
        /* Too few heads (an inline object's only round): as for too few blocks, say why in
         * terms a client can act on (dead_verdict). A condition's verdict stands as it is. */
        if (heads >= 0 && first_err != ERR_THROTTLED && first_err != ERR_NOSPC &&
            first_err != ERR_TOO_LARGE)
            first_err = ERR_UNRECOVERABLE;
        return first_err ? first_err : ERR_UNRECOVERABLE;
    }
    if (out) obj_info_copy(out, &info);
    writer_free(w);
    return 0;
}

void obj__put_set_upload(obj_writer_t *w, const char *upload)
{
    snprintf(w->upload, sizeof(w->upload), "%s", upload);
}

int obj__put_finish(obj_writer_t *w, obj_info_t *info, const void **small)
{
    obj_set_t *s = w->s;
    int rc = w->err;
    *small = NULL;
    info->inl = 0;
    info->inl_crc = 0;
    if (!rc && !w->enc) {
        info->layout =
            (ers_layout_t){(uint8_t)s->k, (uint8_t)s->m, w->small_len ? s->block : 0, w->small_len};
        info->inl = obj__inline_stores(s, w->bucket, w->key);
        info->inl_crc = crc32c(0, w->small, w->small_len);
        *small = w->small;
    }
    if (!rc && w->enc) rc = ers_encoder_finish(w->enc, &info->layout);
    if (!rc) rc = slot_wait(w, 0);
    if (!rc) rc = slot_wait(w, 1);
    if (rc) return rc;
    snprintf(info->etag, sizeof(info->etag), "%s", obj_put_etag(w));
    info->size = info->layout.size;
    memcpy(info->upload_id, w->upload, sizeof(info->upload_id));
    return 0;
}

uint32_t obj__put_dead(const obj_writer_t *w)
{
    return w->dead;
}

void obj__put_release(obj_writer_t *w)
{
    writer_free(w);
}

void obj_put_set_versioning(obj_writer_t *w, obj_versioning_t v)
{
    w->versioning = v;
}

void obj_put_set_cond(obj_writer_t *w, const obj_cond_t *c)
{
    w->has_cond = c != NULL;
    if (c) w->cond = *c;
}
