/*
 * obj_heal: puts back what one object's current version is missing on its
 * stores: heads where a store has none or an older one (a store that was
 * down or refused during the commit), and blocks that are missing or fail
 * their crc, rebuilt from the stripe's other blocks (ers_verify_stripe).
 * A multipart object heals each of its parts the same way.
 *
 * The version is pinned while it heals (obj_open), so its blocks cannot be
 * dropped under it; heads go under the stores' condition that nothing newer
 * is there (a version committed meanwhile is never covered), blocks are
 * plain puts of records whose identity names this version alone. Healed
 * through a refill (obj_heal_via, obj_refill.c) an erasure-coded version's
 * rebuilt blocks are written without waiting, and its heads after them.
 *
 * The heal queue (obj.h) feeds it the keys of writes acknowledged short of
 * some stores: a FIFO of keys (a hash finds one already queued), drained by
 * one thread that waits while any store is not up (healing then would only
 * fail against it) and puts a key that still fails back at the tail, later.
 */
#include "server/obj_int.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "common/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The stores that should hold info's head at pos and hold none, or an older one; *held:
 * those that hold one of the version (it, or a rewrite of it). */
static uint32_t heads_missing(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                              const obj_info_t *info, uint32_t *held)
{
    uint32_t want = info->sparse ? info->inl : UINT32_MAX, missing = 0;
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, want, stores);
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n; j++) {
        if (h[j].rc == ERR_NOT_FOUND) {
            missing |= 1u << stores[j];
            continue;
        }
        if (!h[j].ok) continue; /* a failing store: nothing to do there now */
        const obj_info_t *o = &h[j].info;
        if (!o->deleted && strcmp(o->upload_id, info->upload_id) == 0) *held |= 1u << stores[j];
        if (obj__newer(info, o)) missing |= 1u << stores[j];
    }
    free(h);
    return missing;
}

void (*obj__heal_write_hook)(void *arg, const char *key);
void *obj__heal_write_hook_arg;
void (*obj__heal_recheck_hook)(void *arg, const char *key);
void *obj__heal_recheck_hook_arg;
uint64_t obj__head_drop_delay_ns = (uint64_t)OBJ_HEAD_DROP_DELAY_S * 1000000000ull;

/*
 * A heal reads which stores miss a head, then writes it there under "nothing
 * newer" (SHARD_IF_AT_MOST): a store with nothing takes it. A DELETE through
 * another node between the two leaves nothing anywhere, then the heal puts
 * the version back on the stores it missed (a small object read whole from
 * one copy: deleted, acknowledged, and back). Read again where it was held:
 * if it is gone from any of those, or a store there cannot say (a review: a
 * store that failed the re-read hid the delete), what this heal wrote goes,
 * that very head alone and only under its condition (an older node that
 * cannot judge one keeps it: a plain delete there could take a newer write),
 * and the heal is tried again later.
 */
/* Whether info's version has gone from a store of `held` (read now): GONE, or UNSURE when
 * none says so but one cannot answer, or 0. */
enum { GONE = 1, UNSURE = 2 };
static int version_gone(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                        const obj_info_t *info, uint32_t held)
{
    int stores[OBJ_MAX_SHARDS], n = 0, gone = held ? 0 : GONE; /* (the caller writes nothing) */
    for (int i = 0; i < s->n; i++)
        if ((held >> i) & 1) stores[n++] = i;
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n && gone != GONE; j++) {
        if (h[j].rc == ERR_NOT_FOUND)
            gone = GONE; /* nothing there */
        else if (!h[j].ok)
            gone = UNSURE;
        else if (h[j].info.deleted || strcmp(h[j].info.upload_id, info->upload_id))
            gone = GONE;
    }
    free(h);
    return gone;
}

static uint64_t mono_ns(void)
{
    wl_clock_t *c = clock_real();
    return c->now_ns(c);
}

/*
 * Why the read must be fresh (a quarter of the drop delay): the recheck
 * after the write catches one heal whose read came before a DELETE, but not
 * two, through different nodes, that both read before the DELETE and write
 * after its tombstones were dropped (a minute on): each writes where the
 * other found the version missing, and each one's recheck finds the other's
 * heads where the version was. With this, a heal writes only within 15 s of
 * a read that found the version where it was; a DELETE before that read left
 * tombstones there, to be read (still standing: they go a minute after it),
 * and one after it leaves tombstones that refuse the write. The first head
 * written over a dropped tombstone would need a read that found the version
 * after its drop, on stores that only such a write could have filled.
 */
int obj__heal_still_there(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                          const obj_info_t *info, uint32_t held, uint64_t *read_ns)
{
    uint64_t now = mono_ns();
    if (now - *read_ns <= obj__head_drop_delay_ns / 4) return 1;
    int gone = version_gone(s, bucket, key, pos, info, held);
    if (gone) {
        log_info("event=heal_stale key=%s upload=%s read_s_ago=%.1f: %s since the heal read it",
                 key, info->upload_id, (double)(now - *read_ns) / 1e9,
                 gone == GONE ? "the version went" : "a store that held it cannot say");
        return gone == GONE ? 0 : ERR_IO;
    }
    *read_ns = now;
    return 1;
}

int obj__heal_recheck(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                      const obj_info_t *info, uint32_t held, uint32_t wrote)
{
    if (!wrote) return 0;
    if (obj__heal_recheck_hook) obj__heal_recheck_hook(obj__heal_recheck_hook_arg, key);
    if (!version_gone(s, bucket, key, pos, info, held)) return 0;
    shard_cond_t that = {.mode = SHARD_IF_UPLOAD, .stamp = info->stamp_ns};
    memcpy(that.upload, info->upload_id, sizeof(that.upload));
    int undone = 0;
    for (int i = 0; i < s->n; i++) {
        if (!((wrote >> i) & 1)) continue;
        drive_id_t id = {bucket, key, pos, (uint32_t)i};
        int rc = obj__del_head(s, i, &id, &that);
        if (rc == 0)
            undone++;
        else if (rc != ERR_NOT_FOUND && rc != ERR_PRECOND)
            log_warn("event=heal_undo_failed shard=%d key=%s err=%s", i, key, err_name(rc));
    }
    log_info("event=heal_taken_back key=%s upload=%s heads=%d: the version went, or a store "
             "that held it could not say, while it healed",
             key, info->upload_id, undone);
    return 1;
}

/* Verify every stripe of r's version, rewrite the blocks rebuilt. */
static int heal_blocks(obj_set_t *s, obj_reader_t *r, const char *bucket, const char *key,
                       const obj_info_t *info, obj_heal_report_t *rep)
{
    ers_decoder_t *d = obj__reader_decoder(r);
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, bucket);
    uint64_t stripes = ers_stripe_count(&info->layout);
    uint8_t *rec = xmalloc(info->layout.block_size + 4);
    int rc = 0;
    for (uint64_t st = 0; st < stripes && !rc; st++) {
        uint32_t rebuilt = 0;
        rc = ers_verify_stripe(d, st, obj__block_source, r, &rebuilt);
        rep->blocks_checked += (uint32_t)s->n;
        for (int i = 0; i < s->n && !rc; i++) {
            if (!((rebuilt >> i) & 1)) continue;
            uint32_t len = ers_block_len(&info->layout, st, (unsigned)i);
            memcpy(rec, ers_decoder_block(d, (unsigned)i), len);
            le_put32(rec + len, ers_decoder_block_crc(d, (unsigned)i));
            drive_id_t id = {bb, key, info->upload_id, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            int prc = s->st[i].ops->put(s->st[i].ctx, &id, rec, (size_t)len + 4, NULL, 0);
            if (prc == 0)
                rep->blocks_fixed++;
            else
                rep->failed++; /* the store is still away: healed another time */
        }
    }
    free(rec);
    return rc;
}

/*
 * Heal one version: vid NULL for the current one (its heads at the current
 * position), else that version wherever it lives (obj__locate: a
 * noncurrent one's heads at its own position).
 * `again`: after the heads of a commit cut short above it were dropped (once per heal);
 * with vid, HEAL_NONCURRENT: nothing when that version is the current one.
 */
static int heal_version_in(obj_set_t *s, obj_refill_t *rf, const char *bucket, const char *key,
                           const char *vid, obj_heal_report_t *rep, int again);

/*
 * Set while this thread heals: what the heal reads may note the key for the heal again
 * (current_for_commit on a key split short), and a heal that keeps failing would then run
 * again at once, for ever, instead of after its backoff.
 */
static __thread int healing;

/* heal_version's `again`: a version by id only while it is noncurrent (the queue's notes). */
#define HEAL_NONCURRENT 2

static int heal_version(obj_set_t *s, obj_refill_t *rf, const char *bucket, const char *key,
                        const char *vid, obj_heal_report_t *rep, int again)
{
    healing++;
    int rc = heal_version_in(s, rf, bucket, key, vid, rep, again);
    healing--;
    return rc;
}

/* A commit cut short (cut: its newest head) above the version that stands: its undo finished
 * (those heads only, at their stamp); or an unversioned delete's tombstones over it: the
 * delete finished. Then the key healed once more. */
static int heal_past_leftover(obj_set_t *s, obj_refill_t *rf, const char *bucket, const char *key,
                              const obj_info_t *cut, obj_heal_report_t *rep)
{
    int rc = cut->deleted && !cut->marker
                 ? obj__finish_cut_delete(s, bucket, key, cut)
                 : obj__drop_cut_heads_at(s, bucket, key, cut->upload_id, cut->stamp_ns);
    if (rc) return rc == ERR_BUSY ? ERR_THROTTLED : rc;
    return heal_version(s, rf, bucket, key, NULL, rep, 1);
}

static int heal_version_in(obj_set_t *s, obj_refill_t *rf, const char *bucket, const char *key,
                           const char *vid, obj_heal_report_t *rep, int again)
{
    obj_info_t *info = xmalloc(sizeof(*info));
    char pos[OBJ_VID_LEN + 1] = "";
    int err = 0;
    if (vid && (err = obj__locate(s, bucket, key, vid, info, pos)) != 0) {
        free(info);
        return err == ERR_NOT_FOUND ? 0 : err; /* deleted meanwhile */
    }
    if (vid && !pos[0] && (again & HEAL_NONCURRENT)) {
        free(info);
        return 0; /* current: healed by the current version's heal, with its checks */
    }
    obj_reader_t *r = vid ? obj_open_version(s, bucket, key, vid, info, &err)
                          : obj_open(s, bucket, key, info, &err);
    if (!r) {
        /*
         * A delete marker cut short above the version that stands (a versioned DELETE killed
         * after half its heads): commits take that version for current, readers asking the
         * marker's stores find the key deleted. Its undo finished here too, as a PUT's is.
         * An unversioned DELETE cut short (its tombstones, which carry the version's own
         * upload id, on fewer stores than it needs) is finished instead.
         */
        if (err == ERR_NOT_FOUND && !vid && !again && obj__newest_head(s, bucket, key, info) == 0 &&
            info->deleted) {
            obj_info_t *st = xmalloc(sizeof(*st));
            int in_way = 0, src = obj__standing(s, bucket, key, st, &in_way);
            int same = strcmp(info->upload_id, st->upload_id) == 0;
            int cut = src == 0 && !in_way && obj__newer(info, st) &&
                      (info->marker ? !same : same && !st->deleted);
            free(st);
            int rc = cut ? heal_past_leftover(s, rf, bucket, key, info, rep) : 0;
            free(info);
            return rc;
        }
        free(info);
        return err == ERR_NOT_FOUND ? 0 : err; /* deleted (or a delete marker): nothing to heal */
    }
    if (!vid) {
        /*
         * The newest head a read finds may be another gateway's commit in
         * flight, or the leftover of one that lost a race and is being
         * undone: healed into place, it would cover the version that stands
         * (acknowledged, and never archived: lost from a versioned key).
         * When another version stands, the key is tried again later, once
         * the commit settled. When none does (a sparse version that lost a
         * copy with its drive stands no more, and is what must be healed),
         * the newest head is healed as it always was. A delete marker that
         * stands is such another version (obj_stat_standing, which answers
         * "not found" for one, let a racing promotion's heads in flight on
         * one store be healed over an acknowledged marker: a probe).
         */
        obj_info_t *st = xmalloc(sizeof(*st));
        int in_way = 0, above = 0;
        int src = obj__standing_under(s, bucket, key, st, &in_way, &above);
        int other = src == 0 &&
                    (st->stamp_ns != info->stamp_ns || strcmp(st->upload_id, info->upload_id) != 0);
        /*
         * A head above what stands and in nobody's way (older than any commit takes), found
         * by this read or only on stores it did not ask: a plain write cut short by a crash
         * (obj_commit.c, current_for_commit). Its undo finished, the version that stands is
         * healed. A multipart one is a Complete's, carried through or undone by its upload (a
         * retry, an Abort, the reaper); a rewrite or tombstone of what stands is not undone
         * by upload id.
         */
        obj_info_t *top = xmalloc(sizeof(*top));
        int leftover = src == 0 && above && !in_way && !again &&
                       obj__newest_anywhere(s, bucket, key, top) == 0 && obj__newer(top, st) &&
                       !top->multipart &&
                       (top->deleted && !top->marker
                            ? strcmp(top->upload_id, st->upload_id) == 0 && !st->deleted
                            : strcmp(top->upload_id, st->upload_id) != 0);
        free(st);
        if (leftover) {
            obj_close(r);
            free(info);
            int rc = heal_past_leftover(s, rf, bucket, key, top, rep);
            free(top);
            return rc;
        }
        free(top);
        if (other || src == ERR_UNRECOVERABLE) {
            obj_close(r);
            free(info);
            return other ? ERR_THROTTLED : src;
        }
        /* A version a delete by id retired, made current by a promotion that landed after the
         * delete looked (its blocks dropped): promoted past, nothing of it to heal. */
        int past = obj__heal_retired_current(s, bucket, key, info);
        if (past) {
            obj_close(r);
            free(info);
            return past < 0 ? past : 0;
        }
    }
    rep->objects++;
    obj__reader_ask_all(r);
    uint64_t read_ns = mono_ns(); /* (before the read: its stores answered after it) */
    uint32_t held = 0, missing = heads_missing(s, bucket, key, pos, info, &held);
    /* An inline version's copies are its data: one whose bytes rot is rewritten like a
     * missing head (its head's metadata still read fine, so a heal passed it by while every
     * read of it failed over to another copy). */
    if (info->inl && obj__reader_inline(r))
        missing |= obj__inline_rotten(s, bucket, key, pos, info) & ~missing;
    if (missing && !(held & ~missing)) {
        /* No store answered with the version (only some that missed it or hold rot): a
         * delete may have emptied them since it was read. Nothing to check a write
         * against: again later. */
        obj_close(r);
        free(info);
        return ERR_THROTTLED;
    }
    if (missing && obj__heal_write_hook) obj__heal_write_hook(obj__heal_write_hook_arg, key);
    shard_cond_t c = {.mode = SHARD_IF_AT_MOST, .stamp = info->stamp_ns};
    memcpy(c.upload, info->upload_id, sizeof(c.upload));
    memcpy(c.self, info->upload_id, sizeof(c.self));
    if (rf && !info->inl && !info->multipart && obj__reader_decoder(r)) {
        /* Through the refill: blocks first, without waiting, the heads once they are durable. */
        int rc =
            obj__refill_object(rf, s, r, bucket, key, pos, info, missing, held, read_ns, &c, rep);
        obj_close(r);
        if (rc) log_warn("event=heal_failed key=%s err=%s", key, err_name(rc));
        free(info);
        return rc;
    }
    if (missing &&
        obj__heal_still_there(s, bucket, key, pos, info, held & ~missing, &read_ns) != 1) {
        obj_close(r);
        free(info);
        return ERR_THROTTLED; /* again later: deleted meanwhile, or a store could not say */
    }
    if (missing) {
        uint32_t failed = 0;
        int refused = 0, first_err = 0;
        int n = obj__heads_to(s, bucket, key, pos, info, obj__reader_inline(r), missing, &c,
                              &failed, &refused, &first_err);
        rep->failed += (uint32_t)__builtin_popcount(failed);
        if (n > 0 &&
            obj__heal_recheck(s, bucket, key, pos, info, held & ~missing, missing & ~failed)) {
            obj_close(r);
            free(info);
            return ERR_THROTTLED; /* again later: deleted meanwhile, or a store could not say */
        }
        rep->heads_fixed += (uint32_t)n;
    }
    int rc = 0;
    if (info->multipart) {
        const int *nums;
        const uint64_t *sizes;
        int nparts = obj_read_parts(r, &nums, &sizes);
        /* Its manifest too: without it no part can be found (one of m+1 copies lost per
         * replaced drive, and never put back, it would go with the m+1st). */
        rc = heal_version(s, rf, MPU_MANIFEST, info->upload_id, NULL, rep, 0);
        for (int i = 0; i < nparts && !rc; i++) {
            char pk[OBJ__PART_KEY_MAX];
            obj__read_part_key(r, i, pk);
            rc = heal_version(s, rf, MPU_PARTS, pk, NULL, rep, 0);
            /* A part that is not the one its Complete read (obj_get.c, read_parts): the
             * object cannot be read; a scrub counts it, as nobody may GET it. */
            obj_info_t *pi = xmalloc(sizeof(*pi));
            const char *want = obj__read_part_etag(r, i);
            if (!rc && want[0] && obj_stat(s, MPU_PARTS, pk, pi) == 0 && strcmp(pi->etag, want)) {
                log_error("event=multipart_part_replaced key=%s upload=%s part=%d etag=%s "
                          "manifest_etag=%s (heal)",
                          key, info->upload_id, nums[i], pi->etag, want);
                rep->failed++;
            }
            free(pi);
        }
    } else if (!info->inl && obj__reader_decoder(r)) {
        rc = heal_blocks(s, r, bucket, key, info, rep);
    }
    obj_close(r);
    if (rc) log_warn("event=heal_failed key=%s err=%s", key, err_name(rc));
    free(info);
    return rc;
}

int obj_heal(obj_set_t *s, const char *bucket, const char *key, obj_heal_report_t *rep)
{
    s = obj__route(s, bucket, key);
    return heal_version(s, NULL, bucket, key, NULL, rep, 0);
}

int obj_heal_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                     obj_heal_report_t *rep)
{
    s = obj__route(s, bucket, key);
    return heal_version(s, NULL, bucket, key, vid, rep, 0);
}

int obj_heal_via(obj_refill_t *rf, obj_set_t *s, const char *bucket, const char *key,
                 const char *vid, obj_heal_report_t *rep)
{
    s = obj__route(s, bucket, key);
    return heal_version(s, rf, bucket, key, vid && vid[0] ? vid : NULL, rep, 0);
}

/* ---- the heal queue ---- */

#define HQ_BUCKETS 65536

/* Versions noted by id for one key, at most: past it, every noncurrent version is healed. */
#define HEAL_VIDS_MAX 32

typedef struct heal_ent {
    char *bucket, *key;
    /* Versions noted by id besides the current one (obj__heal_note's vid): a version
     * written short that is noncurrent by the time the queue reaches it, or the archive of
     * one that a write covered short of some stores. all: more than HEAL_VIDS_MAX. */
    char *vids[HEAL_VIDS_MAX];
    int nvids, all;
    int tries;
    uint64_t not_before_ns;
    struct heal_ent *next;  /* FIFO */
    struct heal_ent *hnext; /* hash chain */
} heal_ent_t;

/* A dropped version's blocks that stores of mask kept (obj__drop_note), or (pos set) a
 * retired version's head records, due at not_before_ns (obj__head_drop_note). */
typedef struct drop_ent {
    char *bb, *key, *upload, *pos;
    uint64_t stamp; /* a tombstone at pos: that very head only (upload, stamp) */
    uint64_t stripes, not_before_ns;
    uint32_t mask;
    int tries;
    struct drop_ent *next;
} drop_ent_t;

typedef struct {
    drop_ent_t *head, *tail;
} drop_fifo_t;

static void fifo_push(drop_fifo_t *f, drop_ent_t *d)
{
    d->next = NULL;
    if (f->tail)
        f->tail->next = d;
    else
        f->head = d;
    f->tail = d;
}

static drop_ent_t *fifo_pop(drop_fifo_t *f)
{
    drop_ent_t *d = f->head;
    f->head = d->next;
    if (!f->head) f->tail = NULL;
    return d;
}

typedef struct heal_q {
    obj_set_t *s;
    /* Drops in two FIFOs, each in the order they fall due: a dropped version's blocks (due at
     * once), and head records and tombstones (due obj__head_drop_delay_ns after their note).
     * One FIFO held a block drop behind a minute's worth of tombstones. */
    drop_fifo_t at_once, delayed;
    int turn; /* the last drop was at_once's: the delayed one's turn when both are due */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stop;
    heal_ent_t *head, *tail;
    heal_ent_t **hash; /* HQ_BUCKETS chains */
    obj_heal_stats_t st;
} heal_q_t;

static uint32_t ent_hash(const char *bucket, const char *key)
{
    uint32_t h = 2166136261u;
    for (const char *p = bucket; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h % HQ_BUCKETS;
}

static heal_ent_t **ent_slot(heal_q_t *q, const char *bucket, const char *key)
{
    heal_ent_t **pp = &q->hash[ent_hash(bucket, key)];
    while (*pp && (strcmp((*pp)->bucket, bucket) != 0 || strcmp((*pp)->key, key) != 0))
        pp = &(*pp)->hnext;
    return pp;
}

/* Under mu: append e at the tail (and into the hash). */
static void ent_push(heal_q_t *q, heal_ent_t *e)
{
    e->next = NULL;
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    heal_ent_t **slot = ent_slot(q, e->bucket, e->key);
    e->hnext = NULL;
    *slot = e;
    q->st.pending++;
}

static void ent_free(heal_ent_t *e)
{
    for (int i = 0; i < e->nvids; i++)
        free(e->vids[i]);
    free(e->bucket);
    free(e->key);
    free(e);
}

/* Under mu: vid (NULL or "": the current version only) among e's versions. */
static void ent_add_vid(heal_ent_t *e, const char *vid)
{
    if (!vid || !vid[0] || e->all) return;
    for (int i = 0; i < e->nvids; i++)
        if (strcmp(e->vids[i], vid) == 0) return;
    if (e->nvids == HEAL_VIDS_MAX)
        e->all = 1;
    else
        e->vids[e->nvids++] = xstrdup(vid);
}

void obj__heal_note(obj_set_t *s, const char *bucket, const char *key, const char *vid)
{
    heal_q_t *q = s->healq;
    if (!q || healing) return;
    pthread_mutex_lock(&q->mu);
    heal_ent_t *queued = *ent_slot(q, bucket, key);
    if (queued) {
        ent_add_vid(queued, vid); /* queued already: one heal covers both writes */
        pthread_mutex_unlock(&q->mu);
        return;
    }
    if (q->st.pending >= OBJ_HEAL_QUEUE_MAX) {
        if (q->st.dropped++ % 10000 == 0)
            log_warn("event=heal_queue_full pending=%llu dropped=%llu: heal the bucket later",
                     (unsigned long long)q->st.pending, (unsigned long long)q->st.dropped);
        pthread_mutex_unlock(&q->mu);
        return;
    }
    heal_ent_t *e = xcalloc(1, sizeof(*e));
    e->bucket = xstrdup(bucket);
    e->key = xstrdup(key);
    ent_add_vid(e, vid);
    ent_push(q, e);
    q->st.queued++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void drop_free(drop_ent_t *d)
{
    free(d->bb);
    free(d->key);
    free(d->upload);
    free(d->pos);
    free(d);
}

static void drop_push(heal_q_t *q, drop_ent_t *d);

void obj__drop_note(obj_set_t *s, const char *bb, const char *key, const char *upload,
                    uint64_t stripes, uint32_t mask)
{
    heal_q_t *q = s->healq;
    if (!q) return;
    drop_ent_t *d = xcalloc(1, sizeof(*d));
    d->bb = xstrdup(bb);
    d->key = xstrdup(key);
    d->upload = xstrdup(upload);
    d->stripes = stripes;
    d->mask = mask;
    drop_push(q, d);
}

void obj__head_drop_note(obj_set_t *s, const char *bucket, const char *key, const char *pos)
{
    heal_q_t *q = s->healq;
    if (!q) return;
    drop_ent_t *d = xcalloc(1, sizeof(*d));
    d->bb = xstrdup(bucket);
    d->key = xstrdup(key);
    d->pos = xstrdup(pos);
    d->mask = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    d->not_before_ns = mono_ns() + obj__head_drop_delay_ns;
    drop_push(q, d);
}

void obj__tombstone_drop_note(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *t, uint32_t mask)
{
    heal_q_t *q = s->healq;
    if (!q || !mask) return;
    drop_ent_t *d = xcalloc(1, sizeof(*d));
    d->bb = xstrdup(bucket);
    d->key = xstrdup(key);
    d->pos = xstrdup("");
    d->upload = xstrdup(t->upload_id);
    d->stamp = t->stamp_ns;
    d->mask = mask;
    d->not_before_ns = mono_ns() + obj__head_drop_delay_ns;
    drop_push(q, d);
}

/* Queue d (FIFO: due times only grow), or let it go when the queue is full. */
static void drop_push(heal_q_t *q, drop_ent_t *d)
{
    pthread_mutex_lock(&q->mu);
    if (q->st.drops_pending >= OBJ_HEAL_QUEUE_MAX) {
        uint64_t lost = ++q->st.drops_lost;
        pthread_mutex_unlock(&q->mu);
        /* Said once at each power of two: a burst of deletes past the queue logs a few lines. */
        if (!(lost & (lost - 1)))
            log_warn("event=drop_queue_full lost=%llu: block records or tombstones stay "
                     "(the scanner reaps the blocks; the next write of a key covers its tombstone)",
                     (unsigned long long)lost);
        drop_free(d);
        return;
    }
    fifo_push(d->not_before_ns ? &q->delayed : &q->at_once, d);
    q->st.drops_pending++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* d's blocks on the stores of its mask; the stores where a delete failed stay in it. */
static void drop_run(obj_set_t *s, drop_ent_t *d)
{
    uint32_t left = 0;
    for (int i = 0; i < s->n && d->pos; i++) { /* head records */
        if (!(d->mask & (1u << i))) continue;
        drive_id_t id = {d->bb, d->key, d->pos, (uint32_t)i};
        int rc;
        if (d->stamp) {
            shard_cond_t that = {.mode = SHARD_IF_UPLOAD, .stamp = d->stamp};
            snprintf(that.upload, sizeof(that.upload), "%s", d->upload);
            rc = obj__del_head(s, i, &id, &that);
            if (rc == ERR_PRECOND || rc == ERR_INVAL || rc == ERR_CORRUPT)
                rc = 0; /* covered since, or an older node: it stays, passed by */
        } else {
            rc = s->st[i].ops->del(s->st[i].ctx, &id);
        }
        if (rc && rc != ERR_NOT_FOUND) left |= 1u << i;
    }
    for (int i = 0; i < s->n && !d->pos; i++) {
        if (!(d->mask & (1u << i))) continue;
        for (uint64_t st = 0; st < d->stripes; st++) {
            drive_id_t id = {d->bb, d->key, d->upload, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            int rc = s->st[i].ops->del(s->st[i].ctx, &id);
            if (rc && rc != ERR_NOT_FOUND) {
                left |= 1u << i;
                break;
            }
        }
    }
    d->mask = left;
}

/* Under mu: wait until woken or ns pass. */
static void wait_ns(heal_q_t *q, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    pthread_cond_timedwait(&q->cv, &q->mu, &ts);
}

typedef struct {
    char **vids;
    int n, cap;
} vids_t;

static int collect_vid(void *arg, const obj_info_t *v)
{
    vids_t *c = arg;
    if (v->marker) return 0; /* heads only, healed by the scanner's pass */
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->vids = xrealloc(c->vids, sizeof(*c->vids) * (size_t)c->cap);
    }
    c->vids[c->n++] = xstrdup(v->vid[0] ? v->vid : "null");
    return 0;
}

/* One noted version by id, unless it is the current one (healed as such just before; made
 * current since by a promotion, it is left to the next note or pass: healed by id at the
 * current position it would skip the checks the current version's heal makes). */
static int heal_noted(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                      obj_heal_report_t *rep)
{
    return heal_version(s, NULL, bucket, key, vid, rep, HEAL_NONCURRENT);
}

/*
 * A queue entry: the key's current version, then each version noted by id that is not
 * current now. A write acknowledged while a store was away, then covered by another before
 * the queue came to it, was healed as the key's current version only: the covered one stayed
 * short of that store for good (until the scanner's weekly pass), and one more store lost
 * made it unreadable (a cluster probe: 36 of 65 such versions).
 */
static int heal_entry(obj_set_t *s, heal_ent_t *e, obj_heal_report_t *rep)
{
    int rc = obj_heal(s, e->bucket, e->key, rep);
    vids_t all = {0};
    obj_set_t *at = obj__route(s, e->bucket, e->key);
    if (e->all) {
        healing++;
        int wr = obj__each_noncurrent(at, e->bucket, e->key, collect_vid, &all);
        healing--;
        if (wr < 0 && !rc) rc = wr;
    }
    char **vids = e->all ? all.vids : e->vids;
    int n = e->all ? all.n : e->nvids;
    for (int i = 0; i < n; i++) {
        int r = heal_noted(at, e->bucket, e->key, vids[i], rep);
        if (r && !rc) rc = r;
    }
    for (int i = 0; i < all.n; i++)
        free(all.vids[i]);
    free(all.vids);
    return rc;
}

static void *heal_main(void *arg)
{
    heal_q_t *q = arg;
    obj_set_t *s = q->s;
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        heal_ent_t *e = q->head;
        uint64_t now = mono_ns();
        if (!e && !q->at_once.head && !q->delayed.head) {
            pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        if (obj__unhealthy(s)) {
            /* A store is away: healing now would fail against it. Look again in a while. */
            wait_ns(q, 500000000ull);
            continue;
        }
        /* Both due: by turns (a block drop that keeps failing holds no tombstone back). */
        drop_fifo_t *f = &q->delayed;
        if (q->at_once.head &&
            !(q->turn && q->delayed.head && q->delayed.head->not_before_ns <= now))
            f = &q->at_once;
        q->turn = f == &q->at_once;
        drop_ent_t *d = f->head;
        if (d && d->not_before_ns > now && !e) {
            wait_ns(q, d->not_before_ns - now);
            continue;
        }
        if (d && d->not_before_ns <= now) {
            fifo_pop(f);
            pthread_mutex_unlock(&q->mu);
            drop_run(s, d);
            pthread_mutex_lock(&q->mu);
            if (!d->mask || ++d->tries >= OBJ_HEAL_TRIES) {
                q->st.drops_pending--;
                q->st.drops_done += !d->mask;
                drop_free(d);
            } else { /* (a store went away again: later, behind the others; due already) */
                fifo_push(f, d);
                wait_ns(q, 500000000ull);
            }
            continue;
        }
        if (e->not_before_ns > now) {
            wait_ns(q, e->not_before_ns - now);
            continue;
        }
        q->head = e->next;
        if (!q->head) q->tail = NULL;
        *ent_slot(q, e->bucket, e->key) = e->hnext;
        pthread_mutex_unlock(&q->mu); /* still counted pending until its heal is done */

        obj_heal_report_t rep = {0};
        int rc = heal_entry(s, e, &rep);

        pthread_mutex_lock(&q->mu);
        q->st.pending--;
        q->st.heads_fixed += rep.heads_fixed;
        q->st.blocks_fixed += rep.blocks_fixed;
        if (rc == 0 && rep.failed == 0) {
            q->st.healed++;
            ent_free(e);
            continue;
        }
        heal_ent_t *again = *ent_slot(q, e->bucket, e->key);
        if (again && e->tries + 1 < OBJ_HEAL_TRIES) {
            /* noted again meanwhile: that one stays, and heals this one's versions too */
            if (e->all) again->all = 1;
            for (int i = 0; i < e->nvids; i++)
                ent_add_vid(again, e->vids[i]);
        }
        if (++e->tries >= OBJ_HEAL_TRIES || again) {
            /* Given up (the bucket heal finds it), or noted again meanwhile (that one stays). */
            if (e->tries >= OBJ_HEAL_TRIES) {
                q->st.dropped++;
                log_warn("event=heal_gave_up key=%s tries=%d err=%s failed=%u", e->key, e->tries,
                         err_name(rc), rep.failed);
            }
            ent_free(e);
            continue;
        }
        q->st.retries++;
        int shift = e->tries < 6 ? e->tries : 6;
        e->not_before_ns = mono_ns() + (1000000000ull << shift); /* 2 s .. 64 s */
        ent_push(q, e);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int obj_set_heal_start(obj_set_t *s)
{
    for (int j = 0; j < s->nsub; j++) {
        int rc = obj_set_heal_start(s->sub[j]);
        if (rc) return rc;
    }
    if (s->nsub) return 0;
    if (s->healq) return 0;
    heal_q_t *q = xcalloc(1, sizeof(*q));
    q->s = s;
    q->hash = xcalloc(HQ_BUCKETS, sizeof(*q->hash));
    pthread_mutex_init(&q->mu, NULL);
    clock_cond_init(&q->cv);
    int rc = pthread_create(&q->thread, NULL, heal_main, q);
    if (rc != 0) {
        log_error("event=heal_thread_failed err=%s", strerror(rc));
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        free(q->hash);
        free(q);
        return ERR_IO;
    }
    pthread_setname_np(q->thread, "wl-heal");
    s->healq = q;
    return 0;
}

void obj__heal_stop(obj_set_t *s)
{
    heal_q_t *q = s->healq;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    s->healq = NULL;
    for (heal_ent_t *e = q->head, *next; e; e = next) {
        next = e->next;
        ent_free(e);
    }
    drop_fifo_t *fifos[2] = {&q->at_once, &q->delayed};
    for (int i = 0; i < 2; i++)
        for (drop_ent_t *d = fifos[i]->head, *next; d; d = next) {
            next = d->next;
            drop_free(d);
        }
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->hash);
    free(q);
}

void obj_heal_stats(obj_set_t *s, obj_heal_stats_t *st)
{
    heal_q_t *q = s->healq;
    memset(st, 0, sizeof(*st));
    if (s->nsub) {
        for (int j = 0; j < s->nsub; j++) {
            obj_heal_stats_t one;
            obj_heal_stats(s->sub[j], &one);
            st->queued += one.queued;
            st->healed += one.healed;
            st->retries += one.retries;
            st->dropped += one.dropped;
            st->pending += one.pending;
            st->heads_fixed += one.heads_fixed;
            st->blocks_fixed += one.blocks_fixed;
            st->drops_pending += one.drops_pending;
            st->drops_done += one.drops_done;
            st->drops_lost += one.drops_lost;
        }
        return;
    }
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    *st = q->st;
    pthread_mutex_unlock(&q->mu);
}
