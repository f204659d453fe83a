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
 * The heal queue (obj_heal_queue.c) feeds it the keys of writes
 * acknowledged short of some stores, with the ids of the versions written
 * (obj__heal_key).
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

/*
 * Whether head o is info's: a head of the same version (it, or a rewrite of its metadata);
 * for a deleted head (a delete marker, or a tombstone, which carries the upload id of the
 * version it retires), one of the same kind and upload id.
 */
static int same_head(const obj_info_t *o, const obj_info_t *info)
{
    if (info->deleted)
        return o->deleted && o->marker == info->marker && !strcmp(o->upload_id, info->upload_id);
    return !o->deleted && !strcmp(o->upload_id, info->upload_id);
}

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
        if (same_head(o, info)) *held |= 1u << stores[j];
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
        else if (!same_head(&h[j].info, info))
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
            log_limited(LOG_LVL_WARN, "event=heal_undo_failed shard=%d key=%s err=%s", i, key,
                        err_name(rc));
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
    uint32_t gone = obj__failed(s); /* (healed around: refilled once back, node_drives.c) */
    int rc = 0;
    for (uint64_t st = 0; st < stripes && !rc; st++) {
        uint32_t rebuilt = 0;
        rc = ers_verify_stripe(d, st, obj__block_source, r, &rebuilt);
        rebuilt &= ~gone;
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
 * A deleted head that stands at pos, put where a store missed it: an
 * unversioned DELETE's tombstone (or a retirement's, at a noncurrent
 * position: a delete by version id) or a delete marker. A store away during
 * the delete kept the head it held; the others' tombstones outranked it for
 * readers, but a refill carried no tombstone, so two more drives lost and
 * a reader asking m+1 stores could find the deleted version again on that
 * one store (a review: deleted keys listed again, some read back 200; a
 * marker the same, and a version deleted by id). Now the store gets the
 * deleted head too, under "nothing newer" (a version written since is kept).
 *
 * A delete marker is a version: it goes to every store that lacks it. A
 * tombstone goes where a store holds an older head; while a store may still
 * hold the version (it cannot answer, or the write there failed), also where
 * a store holds nothing, so that readers asking any m+1 stores meet one
 * (a replaced drive, refilled: the tombstones stay on the write quorum).
 * Once every store answered with the tombstone or nothing, the tombstones
 * go a minute on, that very head only, as a whole delete's do: they
 * stayed "for good" only because a store kept the version. A failed drive
 * is left out (emptied or refilled once back, node_drives.c). Written heads
 * are checked as a heal's are: gone from a store that held the deleted
 * head (a delete by id of the marker, racing), they are taken back.
 */
static int heal_deleted_write(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                              const obj_info_t *info, obj_heal_report_t *rep, uint64_t read_ns,
                              uint32_t held, uint32_t older, uint32_t live, uint32_t absent,
                              uint32_t unsure, int *whole);

static int heal_deleted(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                        const obj_info_t *info, obj_heal_report_t *rep)
{
    /* A key moved off a draining pool: the mark its mover left stays (obj_move.c), never
     * dropped as a tombstone (a review: the scanner's walk dropped every one, and a commit
     * routed here before the move then covered nothing in a pool the key had left). */
    if (obj__moved_mark(info)) return 0;
    uint64_t read_ns = mono_ns();
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX, stores);
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    uint32_t held = 0, older = 0, live = 0, absent = 0, unsure = 0;
    obj_info_t *retired = NULL; /* a head of the version a tombstone retires, still there */
    for (int j = 0; j < n; j++) {
        uint32_t b = 1u << stores[j];
        if (h[j].rc == ERR_NOT_FOUND) {
            absent |= b;
        } else if (!h[j].ok) {
            unsure |= b;
        } else if (same_head(&h[j].info, info)) {
            held |= b;
        } else if (obj__newer(info, &h[j].info)) {
            older |= b, live |= h[j].info.deleted ? 0 : b;
            if (!info->marker && !h[j].info.deleted && !retired &&
                !strcmp(h[j].info.upload_id, info->upload_id)) {
                retired = xmalloc(sizeof(*retired));
                obj_info_copy(retired, &h[j].info);
            }
        }
        /* (a newer head: a version written since, kept) */
    }
    free(h);
    if (!held) {
        free(retired);
        return 0; /* gone meanwhile (dropped, or covered): nothing stands to heal */
    }
    int whole = 0;
    int rc = heal_deleted_write(s, bucket, key, pos, info, rep, read_ns, held, older, live, absent,
                                unsure, &whole);
    /*
     * The version it retires, still held by a store: a delete that missed its write quorum
     * (a node down) answered 503 and kept the version's blocks and parts, its outcome open;
     * the tombstone standing now, the delete is rolled forward and that version's data goes
     * (before, nothing dropped it: a multipart object's parts stayed for good, 50-70 MB a run
     * of a 3-node probe). Only once no store keeps a head of it (every store answered, each
     * took the tombstone): a reader meeting one must find it whole (a null version's retire
     * that fell short keeps its blocks for that, obj_commit.c), and none at any other position
     * either: a null version's copy retired at its noncurrent position may be the very version
     * current again at the key's own (a commit's undo put it back; a review: dropped there, it
     * stayed listed and unreadable for good). Dropped twice (a delete that did drop it):
     * nothing found the second time.
     */
    if (retired && rc == 0 && whole && obj__upload_named(s, bucket, key, retired->upload_id) == 0)
        obj__drop_version(s, bucket, key, retired);
    free(retired);
    return rc;
}

static int heal_deleted_write(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                              const obj_info_t *info, obj_heal_report_t *rep, uint64_t read_ns,
                              uint32_t held, uint32_t older, uint32_t live, uint32_t absent,
                              uint32_t unsure, int *whole)
{
    uint32_t failed_for_good = obj__failed(s);
    uint32_t missing = older | (info->marker || live || unsure ? absent : 0);
    missing &= ~failed_for_good;
    /* A store that could not answer may hold an older head: again later (the queue's retry,
     * the next pass), as for a write that fails. */
    rep->failed += (uint32_t)__builtin_popcount(unsure & ~failed_for_good);
    uint32_t failed = 0;
    int refused = 0;
    if (missing) {
        rep->objects++;
        if (obj__heal_still_there(s, bucket, key, pos, info, held, &read_ns) != 1)
            return ERR_THROTTLED; /* again later: gone meanwhile, or a store could not say */
        if (obj__heal_write_hook) obj__heal_write_hook(obj__heal_write_hook_arg, key);
        shard_cond_t c = {.mode = SHARD_IF_AT_MOST, .stamp = info->stamp_ns};
        memcpy(c.upload, info->upload_id, sizeof(c.upload));
        memcpy(c.self, info->upload_id, sizeof(c.self));
        int first_err = 0;
        int w = obj__heads_to(s, bucket, key, pos, info, NULL, missing, &c, &failed, &refused,
                              &first_err);
        rep->failed += (uint32_t)__builtin_popcount(failed);
        if (w > 0 && obj__heal_recheck(s, bucket, key, pos, info, held, missing & ~failed))
            return ERR_THROTTLED;
        rep->heads_fixed += (uint32_t)(w > 0 ? w : 0);
        log_info("event=heal_deleted key=%s pos=%s upload=%s kind=%s heads=%d older=%d", key,
                 pos[0] ? pos : "current", info->upload_id, info->marker ? "marker" : "tombstone",
                 w, __builtin_popcount(older));
    }
    *whole = !unsure && !failed && !refused && !(live & ~missing);
    if (info->marker) return 0;
    /* Every store answered, none keeps an older live head: the tombstones may go. Young ones
     * (a delete's own, noted by it) are left to their note; those just written, a minute on,
     * as a delete's; an old one at once (what its minute was for is long past), that very head
     * only: noted, it was noted again by every pass of every node until it fell due (a
     * probe: each wipe tombstone about six times). */
    uint32_t all = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    if (*whole && missing) {
        obj__tombstone_drop_at(s, bucket, key, pos, info, all);
    } else if (*whole && obj__wall_ns() > info->stamp_ns + 2 * obj__head_drop_delay_ns) {
        shard_cond_t that = {.mode = SHARD_IF_UPLOAD, .stamp = info->stamp_ns};
        memcpy(that.upload, info->upload_id, sizeof(that.upload));
        for (int i = 0; i < s->n; i++) {
            if (!((held >> i) & 1)) continue;
            drive_id_t id = {bucket, key, pos, (uint32_t)i};
            int dr = obj__del_head(s, i, &id, &that);
            if (dr && dr != ERR_NOT_FOUND && dr != ERR_PRECOND)
                log_limited(LOG_LVL_WARN, "event=tombstone_drop_failed shard=%d key=%s err=%s", i,
                            key, err_name(dr));
        }
    }
    return 0;
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
        /* Deleted by id (or meanwhile): its retirement put where a store missed it. */
        int rc = err != ERR_NOT_FOUND ? err
                 : !obj_vid_valid(vid) || obj__newest_at(s, bucket, key, vid, info) != 0 ||
                         !info->deleted || info->marker
                     ? 0
                     : heal_deleted(s, bucket, key, vid, info, rep);
        free(info);
        return rc;
    }
    if (vid && pos[0] && info->deleted) {
        int rc = heal_deleted(s, bucket, key, pos, info, rep); /* a delete marker, noncurrent */
        free(info);
        return rc;
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
        if (err == ERR_NOT_FOUND && !vid && obj__newest_head(s, bucket, key, info) == 0 &&
            info->deleted) {
            obj_info_t *st = xmalloc(sizeof(*st));
            int in_way = 0, src = obj__standing(s, bucket, key, st, &in_way);
            int same = strcmp(info->upload_id, st->upload_id) == 0;
            int cut = !again && src == 0 && !in_way && obj__newer(info, st) &&
                      (info->marker ? !same : same && !st->deleted);
            /* Or that deleted head stands: put where a store missed it. */
            int stands = src == 0 && !in_way && same_head(st, info);
            free(st);
            int rc = cut      ? heal_past_leftover(s, rf, bucket, key, info, rep)
                     : stands ? heal_deleted(s, bucket, key, "", info, rep)
                              : 0;
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
        if (rc) log_limited(LOG_LVL_WARN, "event=heal_failed key=%s err=%s", key, err_name(rc));
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
    if (rc) log_limited(LOG_LVL_WARN, "event=heal_failed key=%s err=%s", key, err_name(rc));
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

int obj_heal_retired(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                     obj_heal_report_t *rep)
{
    return heal_version(s, NULL, bucket, key, pos[0] ? pos : NULL, rep,
                        pos[0] ? HEAL_NONCURRENT : 0);
}

int obj_heal_via(obj_refill_t *rf, obj_set_t *s, const char *bucket, const char *key,
                 const char *vid, obj_heal_report_t *rep)
{
    s = obj__route(s, bucket, key);
    return heal_version(s, rf, bucket, key, vid && vid[0] ? vid : NULL, rep, 0);
}

int obj__healing(void)
{
    return healing;
}

typedef struct {
    char **vids;
    int n, cap;
} vids_t;

static int collect_vid(void *arg, const obj_info_t *v)
{
    vids_t *c = arg;
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
 * A heal-queue entry: the key's current version, then each version noted by id that is not
 * current now. A write acknowledged while a store was away, then covered by another before
 * the queue came to it, was healed as the key's current version only: the covered one stayed
 * short of that store for good (until the scanner's weekly pass), and one more store lost
 * made it unreadable (a cluster probe: 36 of 65 such versions).
 */
int obj__heal_key(obj_set_t *s, const char *bucket, const char *key, char *const *noted, int nnoted,
                  int all_noncurrent, obj_heal_report_t *rep,
                  void (*failed)(void *arg, const char *vid), void *arg)
{
    uint32_t before = rep->failed;
    int rc = obj_heal(s, bucket, key, rep);
    /*
     * The current version's heal failed: every noted version is tried again, those healed by
     * id now too. A noted version that was current now was passed over as healed with it; a
     * write covering it before the retry (on every store: no note) left it short for good (a
     * review).
     */
    int current_failed = rc != 0 || rep->failed != before;
    vids_t all = {0};
    obj_set_t *at = obj__route(s, bucket, key);
    if (all_noncurrent) {
        healing++;
        int wr = obj__each_noncurrent(at, bucket, key, collect_vid, &all);
        healing--;
        if (wr < 0 && !rc) rc = wr;
        if (wr < 0 || current_failed) failed(arg, NULL);
    }
    char *const *vids = all_noncurrent ? all.vids : noted;
    int n = all_noncurrent ? all.n : nnoted;
    for (int i = 0; i < n; i++) {
        before = rep->failed;
        int r = heal_noted(at, bucket, key, vids[i], rep);
        if (r && !rc) rc = r;
        if (r || rep->failed != before || current_failed) failed(arg, vids[i]);
    }
    for (int i = 0; i < all.n; i++)
        free(all.vids[i]);
    free(all.vids);
    return rc;
}
