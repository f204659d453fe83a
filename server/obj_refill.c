/*
 * obj_refill: a refill's pipeline. A heal writes the blocks it rebuilt and
 * waits for each write (obj_heal.c, heal_blocks): on a replaced drive,
 * which lacks a block of every object, that is a durable round (a write and
 * an fdatasync) per object, and a heal thread spends most of its time
 * waiting for it (bench/heal.sh, 12 threads: of 83 thread-seconds, 38 in
 * the stripes' reads and decode, 25 waiting for the block's write and 17
 * for the head's, which went first).
 *
 * Here the heal thread verifies an object's stripes as heal_blocks does,
 * hands each rebuilt block to its store's put_async and goes on to the next
 * object; the drive's group commit then puts many blocks in one write and
 * one flush. What is in flight is bounded by a window of rebuilt bytes: a
 * heal waits for room before it submits a stripe's blocks.
 *
 * A drive's store takes the blocks unsynced (put_unsynced): its commits of
 * them skip their fdatasync, and the pipeline thread syncs each store once
 * per batch of objects, before their heads (sync_blocks).
 *
 * Crash safety is the heal's: an object's heads are written only once all
 * of its blocks are durable (or failed), so a head on the refilled drive
 * never names a block that is not there; a refill cut short (kill -9)
 * leaves blocks without heads, which the next pass finds in place
 * (verified, not rewritten) and whose heads it writes. The version stays
 * pinned (obj__pin) from the heal until its heads are done, so a drop that
 * comes meanwhile (an overwrite, a delete) waits and then covers the blocks
 * written here too. What failed is counted (obj_refill_drain), so a pass
 * with a block or head not written is not whole and the drive's refilling
 * mark stays.
 *
 * The heads: a thread of the pipeline takes every object whose blocks are
 * done, starts all their heads (obj__heads_to_start, under the heal's
 * condition) and waits for them at once: one durable round for many
 * objects' heads on each store, not one per object.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "common/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One object whose rebuilt blocks are in flight; its heads follow. */
typedef struct rf_obj {
    obj_refill_t *rf;
    obj_set_t *s;
    char *bucket, *key;
    char pos[OBJ_VID_LEN + 1];
    obj_info_t *info;
    shard_cond_t cond;
    uint32_t heads;        /* stores missing its head */
    uint32_t held;         /* stores that held it at the heal's read (obj__heal_recheck) */
    uint64_t read_ns;      /* ... when (obj__heal_still_there) */
    int pending;           /* block writes in flight, +1 while its heal submits */
    uint32_t blocks_fixed; /* under rf->mu */
    uint32_t failed;       /* block writes that failed; under rf->mu */
    uint32_t failed_at;    /* ... the stores they failed on: no head there this time */
    uint32_t unsynced_at;  /* stores that took blocks of it unsynced; under rf->mu */
    uint32_t unsynced_n[OBJ_MAX_SHARDS]; /* ... how many, each */
    struct rf_obj *next;                 /* the ready list */
    obj__put_job_t *hjobs;               /* its heads (the pipeline thread's) */
    uint8_t *meta;
    int nh;
} rf_obj_t;

/*
 * One rebuilt block in flight: the record (block and crc) lives until it is
 * durable, then goes back to the refill's spares for the next block (a
 * fresh megabyte per block was a page fault and a page zeroed per 4 KiB:
 * 14% of the node's CPU during a refill, perf). The record's buffer is the
 * decoder's that the block was rebuilt in, swapped for the spare's
 * (ers_decoder_swap_block): no copy (a refill's heal threads spent 6% of
 * the machine's CPU copying rebuilt blocks, perf).
 */
typedef struct rf_blk {
    rf_obj_t *o;
    int store;
    int unsynced; /* written with put_unsynced: durable at the sync before its heads */
    size_t bytes, cap;
    uint8_t *rec;
    bufpool_t *pool;     /* rec's, or NULL: malloc'd */
    struct rf_blk *next; /* the spares */
} rf_blk_t;

struct obj_refill {
    pthread_mutex_t mu;
    pthread_cond_t room;  /* the window has room; an object finished (drain) */
    pthread_cond_t ready; /* the pipeline thread has work, or stop */
    size_t window, inflight;
    int objects; /* submitted, heads not yet done */
    rf_obj_t *ready_head, *ready_tail;
    obj_heal_report_t rep; /* what finished objects wrote, until drained */
    rf_blk_t *spares;      /* blocks' records written, to be used again */
    int stop;
    pthread_t th;
};

/* Under mu: o's blocks are done; its heads are the pipeline thread's to write. */
static void obj_ready(obj_refill_t *rf, rf_obj_t *o)
{
    o->next = NULL;
    if (rf->ready_tail)
        rf->ready_tail->next = o;
    else
        rf->ready_head = o;
    rf->ready_tail = o;
    pthread_cond_signal(&rf->ready);
}

/* A block's write ended (drive_done_fn: any thread, short, no blocking but rf's lock). */
static void blk_done(void *arg, int rc)
{
    rf_blk_t *b = arg;
    rf_obj_t *o = b->o;
    obj_refill_t *rf = o->rf;
    pthread_mutex_lock(&rf->mu);
    if (rc == 0) {
        o->blocks_fixed++;
        if (b->unsynced) {
            o->unsynced_at |= 1u << b->store;
            o->unsynced_n[b->store]++;
        }
    } else {
        o->failed++; /* the store is away or refused: healed another time */
        o->failed_at |= 1u << b->store;
    }
    rf->inflight -= b->bytes;
    pthread_cond_broadcast(&rf->room);
    if (--o->pending == 0) obj_ready(rf, o);
    b->next = rf->spares;
    rf->spares = b;
    pthread_mutex_unlock(&rf->mu);
}

static void blk_release(rf_blk_t *b)
{
    if (b->pool)
        bufpool_put(b->pool, b->rec);
    else
        free(b->rec);
    b->rec = NULL;
    b->cap = 0;
}

/* A record of cap bytes from pool (NULL: malloc) for a block: a spare (as many as were ever in
 * flight at once) or new. */
static rf_blk_t *blk_get(obj_refill_t *rf, bufpool_t *pool, size_t cap)
{
    pthread_mutex_lock(&rf->mu);
    rf_blk_t *b = rf->spares;
    if (b) rf->spares = b->next;
    pthread_mutex_unlock(&rf->mu);
    if (!b) b = xcalloc(1, sizeof(*b));
    if (b->cap < cap || b->pool != pool) {
        blk_release(b);
        b->rec = pool ? bufpool_get(pool, cap) : xmalloc(cap);
        b->pool = pool;
        b->cap = cap;
    }
    return b;
}

/*
 * The blocks of a batch of objects that were written unsynced, made durable
 * before any head names them: one sync of each store they went to, however
 * many commits wrote them (a flush per 32 MiB commit held a refilled drive
 * to 595-671 MB/s where fio wrote 878-913 with one flush at the end, session
 * 46). A store whose sync fails has none of them: failed, no head there.
 */
typedef struct {
    void *ctx; /* a store synced */
    int rc;
} synced_t;

static void sync_blocks(obj_refill_t *rf, rf_obj_t *list)
{
    synced_t done[64];
    int ndone = 0;
    for (rf_obj_t *o = list; o; o = o->next) {
        for (uint32_t m = o->unsynced_at; m; m &= m - 1) {
            int i = __builtin_ctz(m);
            const shard_store_t *st = &o->s->st[i];
            int rc = 0, seen = 0;
            for (int j = 0; j < ndone && !seen; j++)
                if (done[j].ctx == st->ctx) {
                    rc = done[j].rc;
                    seen = 1;
                }
            if (!seen) {
                rc = st->ops->sync(st->ctx);
                if (rc) log_warn("event=refill_sync_failed store=%d err=%s", i, err_name(rc));
                if (ndone < (int)(sizeof(done) / sizeof(done[0])))
                    done[ndone++] = (synced_t){st->ctx, rc};
            }
            if (!rc) continue;
            pthread_mutex_lock(&rf->mu);
            o->blocks_fixed -= o->unsynced_n[i];
            o->failed += o->unsynced_n[i];
            o->failed_at |= 1u << i;
            pthread_mutex_unlock(&rf->mu);
        }
    }
}

/* The heads of a batch of objects whose blocks are done: all started, then waited for at once. */
static void finish(obj_refill_t *rf, rf_obj_t *list)
{
    latch_t l;
    latch_init(&l);
    sync_blocks(rf, list);
    for (rf_obj_t *o = list; o; o = o->next) {
        int first_err = 0;
        o->nh = 0;
        /* A head names its blocks: none where one of them is not written (the next pass). */
        o->heads &= ~o->failed_at;
        /* Blocks can take longer than a DELETE's tombstones stay: read again where it was. */
        int there = o->heads ? obj__heal_still_there(o->s, o->bucket, o->key, o->pos, o->info,
                                                     o->held, &o->read_ns)
                             : 1;
        if (there < 0) { /* a store that held it cannot say: not whole, the next pass */
            pthread_mutex_lock(&rf->mu);
            rf->rep.failed += (uint32_t)__builtin_popcount(o->heads);
            pthread_mutex_unlock(&rf->mu);
        }
        if (there != 1) o->heads = 0; /* deleted meanwhile: nothing to write, nothing failed */
        if (!o->heads) continue;
        o->hjobs = xmalloc(sizeof(*o->hjobs) * OBJ_MAX_SHARDS);
        o->meta = xmalloc(HEAD_MAX);
        o->nh = obj__heads_to_start(o->s, o->bucket, o->key, o->pos, o->info, o->heads, &o->cond,
                                    o->meta, o->hjobs, &l, &first_err);
    }
    latch_wait(&l);
    latch_destroy(&l);
    for (rf_obj_t *o = list, *next; o; o = next) {
        next = o->next;
        uint32_t failed = 0;
        int refused = 0, first_err = 0, heads = 0;
        if (o->nh < 0)
            failed = o->heads; /* (metadata too large to encode: never written) */
        else if (o->nh > 0)
            heads = obj__heads_to_count(o->hjobs, o->nh, &o->cond, &failed, &refused, &first_err);
        if (heads > 0 && obj__heal_recheck(o->s, o->bucket, o->key, o->pos, o->info, o->held,
                                           o->heads & ~failed))
            heads = 0; /* taken back: deleted meanwhile (the heal queue's scan comes again) */
        /* Written (or given up on): a drop that waited for this version may run now. */
        obj__unpin(o->s, o->info->upload_id);
        pthread_mutex_lock(&rf->mu);
        rf->rep.heads_fixed += (uint32_t)heads;
        rf->rep.blocks_fixed += o->blocks_fixed;
        rf->rep.failed += o->failed + (uint32_t)__builtin_popcount(failed);
        rf->objects--;
        pthread_cond_broadcast(&rf->room);
        pthread_mutex_unlock(&rf->mu);
        free(o->hjobs);
        free(o->meta);
        free(o->info);
        free(o->bucket);
        free(o->key);
        free(o);
    }
}

static void *pipeline_main(void *arg)
{
    obj_refill_t *rf = arg;
    pthread_mutex_lock(&rf->mu);
    for (;;) {
        if (rf->ready_head) {
            rf_obj_t *list = rf->ready_head;
            rf->ready_head = rf->ready_tail = NULL;
            pthread_mutex_unlock(&rf->mu);
            finish(rf, list);
            pthread_mutex_lock(&rf->mu);
            continue;
        }
        if (rf->stop) break;
        pthread_cond_wait(&rf->ready, &rf->mu);
    }
    pthread_mutex_unlock(&rf->mu);
    return NULL;
}

obj_refill_t *obj_refill_new(size_t window)
{
    obj_refill_t *rf = xcalloc(1, sizeof(*rf));
    rf->window = window ? window : 1;
    pthread_mutex_init(&rf->mu, NULL);
    pthread_cond_init(&rf->room, NULL);
    pthread_cond_init(&rf->ready, NULL);
    int rc = pthread_create(&rf->th, NULL, pipeline_main, rf);
    if (rc != 0) {
        log_warn("event=refill_thread_failed err=%s: heals wait for their writes", strerror(rc));
        pthread_cond_destroy(&rf->ready);
        pthread_cond_destroy(&rf->room);
        pthread_mutex_destroy(&rf->mu);
        free(rf);
        return NULL;
    }
    pthread_setname_np(rf->th, "wl-refill");
    return rf;
}

void obj_refill_drain(obj_refill_t *rf, obj_heal_report_t *rep)
{
    if (!rf) return;
    pthread_mutex_lock(&rf->mu);
    while (rf->objects > 0)
        pthread_cond_wait(&rf->room, &rf->mu);
    if (rep) {
        rep->heads_fixed += rf->rep.heads_fixed;
        rep->blocks_fixed += rf->rep.blocks_fixed;
        rep->failed += rf->rep.failed;
    }
    memset(&rf->rep, 0, sizeof(rf->rep));
    pthread_mutex_unlock(&rf->mu);
}

void obj_refill_free(obj_refill_t *rf)
{
    if (!rf) return;
    obj_refill_drain(rf, NULL);
    pthread_mutex_lock(&rf->mu);
    rf->stop = 1;
    pthread_cond_signal(&rf->ready);
    pthread_mutex_unlock(&rf->mu);
    pthread_join(rf->th, NULL);
    for (rf_blk_t *b = rf->spares, *next; b; b = next) {
        next = b->next;
        blk_release(b);
        free(b);
    }
    pthread_cond_destroy(&rf->ready);
    pthread_cond_destroy(&rf->room);
    pthread_mutex_destroy(&rf->mu);
    free(rf);
}

/* Wait for room for `need` bytes in the window, and take it (a write alone may exceed it). */
static void window_take(obj_refill_t *rf, size_t need)
{
    pthread_mutex_lock(&rf->mu);
    while (rf->inflight && rf->inflight + need > rf->window)
        pthread_cond_wait(&rf->room, &rf->mu);
    rf->inflight += need;
    pthread_mutex_unlock(&rf->mu);
}

int obj__refill_object(obj_refill_t *rf, obj_set_t *s, obj_reader_t *r, const char *bucket,
                       const char *key, const char *pos, const obj_info_t *info, uint32_t heads,
                       uint32_t held, uint64_t read_ns, const shard_cond_t *cond,
                       obj_heal_report_t *rep)
{
    ers_decoder_t *d = obj__reader_decoder(r);
    ers_decoder_set_slack(d, 4); /* a rebuilt block's buffer becomes its record: block, crc */
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, bucket);
    rf_obj_t *o = xcalloc(1, sizeof(*o));
    o->rf = rf;
    o->s = s;
    o->bucket = xstrdup(bucket);
    o->key = xstrdup(key);
    snprintf(o->pos, sizeof(o->pos), "%s", pos);
    o->info = xmalloc(sizeof(*o->info));
    memcpy(o->info, info, sizeof(*info));
    o->cond = *cond;
    o->heads = heads;
    o->held = held & ~heads;
    o->read_ns = read_ns;
    o->pending = 1; /* this heal's hold, until every stripe is submitted */
    /* The reader's pin goes at its close; this one holds until the heads are written. */
    (void)obj__pin(s, info->upload_id);
    pthread_mutex_lock(&rf->mu);
    rf->objects++;
    pthread_mutex_unlock(&rf->mu);

    uint64_t stripes = ers_stripe_count(&info->layout);
    /*
     * The replaced drives' blocks are rebuilt from k others, not verified with all k+m: on
     * drives that share a disk, or a node's bandwidth, every block read is a byte the refill
     * does not write (a stripe moved k+m-1 blocks per block written, now k+1). The blocks
     * left unread are the scrub's, at its own pace, after the refill.
     */
    uint32_t target = obj__refilling(s), gone = obj__failed(s);
    int rc = 0;
    for (uint64_t st = 0; st < stripes && !rc; st++) {
        uint32_t rebuilt = 0;
        if (target) {
            rc = ers_rebuild_stripe(d, st, target, obj__block_source, r, &rebuilt);
            rep->blocks_checked += (uint32_t)(s->n - s->m + __builtin_popcount(target));
        } else {
            rc = ers_verify_stripe(d, st, obj__block_source, r, &rebuilt);
            rep->blocks_checked += (uint32_t)s->n;
        }
        rebuilt &= ~gone; /* (a drive failed for good: healed around, refilled once back) */
        if (rc || !rebuilt) continue;
        size_t need = 0;
        for (int i = 0; i < s->n; i++)
            if ((rebuilt >> i) & 1) need += ers_block_len(&info->layout, st, (unsigned)i) + 4;
        window_take(rf, need);
        for (int i = 0; i < s->n; i++) {
            if (!((rebuilt >> i) & 1)) continue;
            uint32_t len = ers_block_len(&info->layout, st, (unsigned)i);
            size_t cap = ers_decoder_buf_len(d); /* >= len + 4 */
            rf_blk_t *b = blk_get(rf, ers_decoder_bufpool(d), cap);
            b->o = o;
            b->store = i;
            b->bytes = (size_t)len + 4;
            uint8_t *full = ers_decoder_swap_block(d, (unsigned)i, b->rec);
            if (full) {
                b->rec = full; /* the decoder's: cap bytes from the same pool */
                b->cap = cap;
            } else
                memcpy(b->rec, ers_decoder_block(d, (unsigned)i), len);
            le_put32(b->rec + len, ers_decoder_block_crc(d, (unsigned)i));
            drive_id_t id = {bb, key, info->upload_id, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            const shard_store_t *sto = &s->st[i];
            pthread_mutex_lock(&rf->mu);
            o->pending++;
            pthread_mutex_unlock(&rf->mu);
            /* (the id is copied by put_async; the record must live until blk_done) */
            int prc, later = 1;
            b->unsynced = sto->ops->put_unsynced && sto->ops->sync;
            if (b->unsynced)
                prc = sto->ops->put_unsynced(sto->ctx, &id, b->rec, b->bytes, blk_done, b);
            else if (sto->ops->put_async)
                prc = sto->ops->put_async(sto->ctx, &id, b->rec, b->bytes, NULL, 0, blk_done, b);
            else
                prc = sto->ops->put(sto->ctx, &id, b->rec, b->bytes, NULL, 0), later = 0;
            if (prc || !later) blk_done(b, prc); /* done at once: no callback */
        }
    }
    pthread_mutex_lock(&rf->mu);
    if (--o->pending == 0) obj_ready(rf, o);
    pthread_mutex_unlock(&rf->mu);
    return rc;
}
