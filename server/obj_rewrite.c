/*
 * obj_rewrite.c: versioned rewrites of heads (room of the object layer; map
 * in obj_int.h): in-place metadata rewrites of a version (PutObjectTagging,
 * PutObjectAcl, a bucket record's settings) and the undo a refused head
 * write needs, which promotions (obj_promote.c) and key moves (obj_move.c)
 * share.
 *
 * A rewrite writes the version's heads again, newer by stamp, under
 * SHARD_IF_AT_MOST of the version it read: a store that holds a newer
 * version refuses. Where a store refused, obj__put_back puts the version
 * back as it was where the rewrite landed, and the rewrite looks again,
 * unless it landed on enough stores to stand: then it is filled in where it
 * was refused, never undone (fill_rewrite). A
 * noncurrent version promoted meanwhile (a delete of the version above it,
 * through another node) is rewritten at the current position too:
 * promoted_meanwhile here and promoted_rewrite in obj_promote.c each read
 * the other's write, so one of the two carries the new metadata over.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void obj__put_back(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                   const obj_info_t *orig, const obj_info_t *nv)
{
    obj__put_back_bytes(s, bucket, key, pos, orig, NULL, nv);
}

void obj__put_back_bytes(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                         const obj_info_t *orig, const void *orig_bytes, const obj_info_t *nv)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX & ~obj__unhealthy(s), stores);
    uint32_t took = 0;
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n; j++)
        if (h[j].ok && h[j].info.stamp_ns == nv->stamp_ns &&
            strcmp(h[j].info.upload_id, nv->upload_id) == 0)
            took |= 1u << stores[j];
    if (!took) {
        free(h);
        return;
    }
    /*
     * Each store gets back what it had: orig's head where orig had one (every store, or a
     * sparse one's copies), nothing where it had none. And nothing either when orig's bytes
     * are gone (deleted by its id meanwhile, through another node): left, nv stayed there.
     * A promotion of v0 over a sparse v2 that a PUT (sparse v3) refused on the copies had
     * landed on the other stores, which hold no head of either, newer by its stamp than v3;
     * v2 deleted meanwhile, nothing was put back and v0 was current again for every reader
     * that asked those stores: the acknowledged PUT lost to their listings (a probe's
     * DeleteObjects, a delete by id and a PUT at once, 4 rounds in 150).
     */
    uint32_t back = orig->sparse ? took & orig->inl : took, gone = took & ~back;
    void *bytes = NULL;
    if (back && orig->inl && orig->size && !orig_bytes) {
        bytes = xmalloc(orig->size);
        if (obj__inline_load(s, bucket, key, orig, bytes) != 0 &&
            (strcmp(nv->upload_id, orig->upload_id) != 0 || /* a rewrite: the same bytes */
             obj__inline_load(s, bucket, key, nv, bytes) != 0)) {
            log_warn("event=umeta_undo_failed key=%s: no copy to put back, its heads go", key);
            gone = took;
            back = 0;
        }
    }
    /*
     * Only where nv's very head (its stamp too) still stands: every rewrite of a version has
     * its upload id, so by upload id alone this put-back covered another node's rewrite of
     * the same version that landed after the read above, acknowledged by then (a bucket's
     * tags lost to a racing versioning PUT's undo through another node, ~1 round in 100 of
     * test_bucket_settings_set_at_once_through_different_nodes).
     */
    shard_cond_t mine = {.mode = SHARD_IF_UPLOAD, .stamp = nv->stamp_ns};
    memcpy(mine.upload, nv->upload_id, sizeof(mine.upload));
    uint32_t failed = 0;
    int refused = 0, first_err = 0;
    if (back)
        (void)obj__heads_to(s, bucket, key, pos, orig, orig_bytes ? orig_bytes : bytes, back, &mine,
                            &failed, &refused, &first_err);
    free(bytes);
    /* Where nv's head still stands (looked at again: a newer one may have come), it goes. */
    n = obj__stores_in(s, gone, stores);
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n; j++) {
        drive_id_t id = {bucket, key, pos, (uint32_t)stores[j]};
        if (!h[j].ok || h[j].info.stamp_ns != nv->stamp_ns ||
            strcmp(h[j].info.upload_id, nv->upload_id) != 0)
            continue;
        int rc = obj__undo_del(s, stores[j], &id, &h[j].info);
        if (rc && rc != ERR_NOT_FOUND && rc != ERR_PRECOND) { /* (refused: covered meanwhile) */
            failed |= 1u << stores[j];
            if (!first_err) first_err = rc;
        }
    }
    free(h);
    if (failed)
        log_warn("event=umeta_undo_incomplete key=%s left=0x%x err=%s", key, failed,
                 err_name(first_err));
}

int obj_update_umeta(obj_set_t *s, const char *bucket, const char *key, obj_umeta_fn fn, void *arg)
{
    return obj_update_umeta_version(s, bucket, key, NULL, fn, arg, NULL);
}

static int update_umeta(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                        obj_umeta_fn fn, void *arg, int *marker);

int obj_update_umeta_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                             obj_umeta_fn fn, void *arg, int *marker)
{
    obj_set_t *top = s;
    s = obj__route(top, bucket, key);
    int rc = update_umeta(s, bucket, key, vid, fn, arg, marker);
    if (rc == ERR_NOT_FOUND && obj_set_pools(top) > 1) {
        /* Routed before its key moved off a draining pool (obj_move.c): where it is now. */
        obj_set_t *now = obj__route(top, bucket, key);
        if (now != s) rc = update_umeta(now, bucket, key, vid, fn, arg, marker);
    }
    return rc;
}

/*
 * After a rewrite of noncurrent version v at its position: whether v is the newest head at
 * the current position with other metadata, promoted meanwhile by a delete of the version
 * above it (through another node) from its copy read before this rewrite landed. Readers of
 * v by id take the current copy: the rewrite must go there too. The promotion reads v's
 * copy again after its write (promoted_rewrite), and one of the two sees the other.
 */
static int promoted_meanwhile(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *v)
{
    obj_info_t *cur = xmalloc(sizeof(*cur));
    int p = obj__newest_head(s, bucket, key, cur) == 0 && !cur->deleted &&
            !strcmp(cur->upload_id, v->upload_id) && !strcmp(cur->vid, v->vid) &&
            (cur->umeta_len != v->umeta_len || memcmp(cur->umeta, v->umeta, v->umeta_len));
    free(cur);
    return p;
}

#define REWRITE_STALE_NS (10ull * 1000000000) /* as a commit's OBJ__COMMIT_STALE_NS */

/*
 * After a refused rewrite of v at pos: the newest head there that is another rewrite of v
 * (same upload id, newer stamp) and has stood short for longer than any rewrite takes (a
 * rewrite whose put-back failed, never acknowledged): its stamp and upload id, for the next
 * attempt to cover. A fresh one is a rewrite in flight: left alone (it stands, and is read
 * as the version, or is put back).
 */
static void stale_rewrite(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                          const obj_info_t *v, uint64_t *stamp, char up[33])
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX & ~obj__unhealthy(s), stores);
    uint64_t now = obj__wall_ns();
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n; j++)
        if (h[j].ok && !h[j].info.deleted && !strcmp(h[j].info.upload_id, v->upload_id) &&
            h[j].info.stamp_ns > v->stamp_ns && h[j].info.stamp_ns > *stamp &&
            h[j].info.stamp_ns + REWRITE_STALE_NS <= now) {
            *stamp = h[j].info.stamp_ns;
            memcpy(up, v->upload_id, 33);
        }
    free(h);
}

/*
 * Which stores hold a record at pos now: how many hold one (a store that is away or fails
 * the read counts: its write will tell), and the ones that answer "nothing" into *absent.
 */
static int heads_present(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                         uint32_t *absent)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    uint32_t away = obj__unhealthy(s);
    int stores[OBJ_MAX_SHARDS], present = obj__stores_in(s, away, stores);
    int n = obj__stores_in(s, UINT32_MAX & ~away, stores);
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    *absent = 0;
    for (int j = 0; j < n; j++) {
        if (h[j].rc == ERR_NOT_FOUND)
            *absent |= 1u << stores[j];
        else
            present++;
    }
    free(h);
    return present;
}

/*
 * After a rewrite (info) of a noncurrent version at pos: whether a copy of that version with
 * older metadata but a newer stamp is there, on stores this rewrite did not write (a sparse
 * version's others) or wrote before it landed: a commit's archive of a current head copied
 * from this position before the rewrite (a promotion), stamped before this rewrite and
 * landed first. Readers take the newest stamp: the rewrite is made again, newer (*floor:
 * the stamp to pass). The archive reads the position after its write too (obj__archive), so
 * of the two at least one sees the other.
 */
static int stale_over(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                      const obj_info_t *info, uint64_t *floor)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX & ~obj__unhealthy(s), stores);
    int stale = 0;
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n; j++)
        if (h[j].ok && !h[j].info.deleted && !strcmp(h[j].info.upload_id, info->upload_id) &&
            h[j].info.stamp_ns > info->stamp_ns && obj_umeta_ns(&h[j].info) < info->stamp_ns) {
            stale = 1;
            if (h[j].info.stamp_ns > *floor) *floor = h[j].info.stamp_ns;
        }
    free(h);
    return stale;
}

void (*obj__rewrite_read_hook)(void *arg, const char *key);
void *obj__rewrite_read_hook_arg;
void (*obj__rewrite_write_hook)(void *arg, const char *key);
void *obj__rewrite_write_hook_arg;

static int same_head(const obj_info_t *a, const obj_info_t *b)
{
    return !a->deleted && a->stamp_ns == b->stamp_ns && !strcmp(a->upload_id, b->upload_id);
}

/* Whether head a is newer than b in the order readers pick the newest head by. */
/*
 * A rewrite (info, at pos) refused on some stores that landed on enough of them to stand
 * (obj__standing: heads on k stores, a failing store counted for it) and on more than n-k
 * (so that no other rewrite of the version can stand beside it: their stores would
 * overlap): readers and other rewriters take it for the version from now on, and another
 * rewrite may already carry its entry over. Undoing it could leave a change in force whose
 * writer answered 503 (a lifecycle PUT racing tag rewrites of a bucket record through other
 * nodes). So it is never undone: it is written again wherever the version is at an older
 * stamp (the head it read, another node's refused rewrite, which that writer puts back or
 * this fill covers, each only where its own exact head stands; or an older head a heal put
 * back), until `need` stores hold it. Done too when a writer that read it changed a store
 * (every condition names what its writer read): a store that answered for the version
 * before the write and now holds nothing (a delete), a tombstone of the version (deleted by
 * its id), a newer head where it stood, or k newer heads: as if acknowledged just before.
 * Returns 0, or ERR_UNRECOVERABLE when it stays short (in doubt: it stands; the heal is
 * told). `absent`: the stores that held nothing before the write.
 */
static int fill_rewrite(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                        const obj_info_t *info, int need, uint32_t absent)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    void *bytes = NULL;
    int rc = ERR_UNRECOVERABLE, have = 0;
    if (info->inl && info->size) {
        bytes = xmalloc(info->size);
        if (obj__inline_load(s, bucket, key, info, bytes) != 0) goto out;
    }
    uint32_t mine = 0; /* stores seen holding this very head */
    for (int fill = 0; fill < 10; fill++) {
        if (obj__rewrite_write_hook) obj__rewrite_write_hook(obj__rewrite_write_hook_arg, key);
        int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX & ~obj__unhealthy(s), stores);
        obj__read_heads(s, bucket, key, pos, stores, n, h);
        int newer = 0, covered = 0, groups = 0;
        uint64_t under[OBJ_MAX_SHARDS];
        uint32_t to[OBJ_MAX_SHARDS];
        have = 0;
        for (int j = 0; j < n; j++) {
            uint32_t bit = 1u << stores[j];
            const obj_info_t *o = &h[j].info;
            if (!h[j].ok) {
                if (h[j].rc == ERR_NOT_FOUND && !(absent & bit)) covered = 1; /* deleted */
                continue;
            }
            int ours = !strcmp(o->upload_id, info->upload_id);
            if (same_head(o, info)) {
                have++;
                mine |= bit;
            } else if (ours && o->deleted) {
                covered = 1; /* the version's tombstone: deleted by its id */
            } else if (!ours || obj__newer(o, info)) {
                /* Another version, or a later rewrite of this one: covering it where it stood. */
                if (obj__newer(o, info)) {
                    newer++;
                    if (mine & bit) covered = 1;
                }
            } else {
                int g = 0; /* the version at an older stamp: to be written over */
                while (g < groups && under[g] != o->stamp_ns)
                    g++;
                if (g == groups) {
                    under[groups] = o->stamp_ns;
                    to[groups++] = 0;
                }
                to[g] |= bit;
            }
        }
        if (covered || newer >= s->k) {
            rc = 0;
            break;
        }
        int wrote = 0;
        for (int g = 0; g < groups; g++) {
            shard_cond_t at = {.mode = SHARD_IF_UPLOAD, .stamp = under[g]};
            memcpy(at.upload, info->upload_id, sizeof(at.upload));
            uint32_t failed = 0;
            int refused = 0, err = 0;
            wrote += obj__heads_to(s, bucket, key, pos, info, bytes, to[g], &at, &failed, &refused,
                                   &err);
        }
        have += wrote;
        /* (Where the version is at an older stamp, written once even past the quorum.) */
        if (have >= need) {
            rc = 0;
            break;
        }
        if (!wrote) usleep(200u + (uint32_t)(info->stamp_ns % (500u << (fill < 8 ? fill : 8))));
    }
out:
    free(bytes);
    free(h);
    /*
     * In doubt, the heal finishes it. Covered, the writer that covered it owns the key now:
     * no heal, which, reading the key while a delete that read this rewrite empties the
     * stores, would write it back over the emptied ones (a DeleteBucket acknowledged, its
     * record back through a racing tag rewrite's heal: 1 run in 60 of
     * test_delete_bucket_racing_bucket_tagging_through_another_node).
     */
    if (rc) {
        log_warn("event=rewrite_in_doubt key=%s: stands short, left for the heal", key);
        obj__heal_note(s, bucket, key, NULL);
    }
    return rc;
}

static int update_umeta(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                        obj_umeta_fn fn, void *arg, int *marker)
{
    uint64_t floor = 0; /* a stamp the rewrite must pass (stale_over) */
    obj_info_t *info = xmalloc(sizeof(*info)), *orig = xmalloc(sizeof(*orig));
    char pos[OBJ_VID_LEN + 1];
    int first_err = 0, rc;
    uint64_t leftover = 0; /* the stamp of a stale rewrite of the version, to cover */
    char leftover_up[33] = "";
    if (marker) *marker = 0;
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    for (int attempt = 0;; attempt++) {
        /*
         * Whether the version is current is what stands, not the newest head of m+1 stores:
         * that may be another writer's head in flight (a delete marker on two stores of six,
         * to be undone), and the version, still current, was taken for noncurrent: the rewrite
         * went to a copy a commit's archive then wrote over with the current head's old
         * metadata (a probe: acknowledged tags lost, 1 round in 40). Waited for, as a commit
         * waits.
         */
        int in_way = 0;
        rc = obj__standing(s, bucket, key, orig, &in_way);
        if (obj__rewrite_read_hook) obj__rewrite_read_hook(obj__rewrite_read_hook_arg, key);
        if (rc != 0 && rc != ERR_NOT_FOUND && !(rc == ERR_UNRECOVERABLE && in_way))
            break; /* (nothing standing while heads are in flight: waited for too) */
        if (in_way) {
            if (attempt + 1 >= 10) {
                rc = ERR_THROTTLED;
                break;
            }
            usleep(200u + (uint32_t)(attempt * 7919u % (500u << (attempt < 8 ? attempt : 8))));
            continue;
        }
        int stood = rc == 0;
        if ((rc = obj__locate(s, bucket, key, vid, info, pos)) == 0 && info->deleted) {
            if (marker) *marker = 1;
            rc = ERR_NOT_FOUND;
        }
        if (rc) break;
        /*
         * The current version located is the one that stands, or the rewrite waits: a head
         * that landed between the two reads (another node's rewrite of the record, on one
         * copy of its m+1) read as the version would be carried over into this rewrite, and
         * then stand with it after its own writer undid it and answered 503 (a lifecycle
         * PUT racing tag rewrites of the bucket record: its configuration in force after a
         * 503, 1 run in 3). A leftover short for longer than any rewrite takes is not waited
         * for (as obj__standing does not).
         */
        if (!pos[0] &&
            (!stood || info->stamp_ns != orig->stamp_ns ||
             strcmp(info->upload_id, orig->upload_id) != 0) &&
            info->stamp_ns + REWRITE_STALE_NS > obj__wall_ns()) {
            if (attempt + 1 >= 10) {
                rc = ERR_THROTTLED;
                break;
            }
            usleep(200u + (uint32_t)(attempt * 7919u % (500u << (attempt < 8 ? attempt : 8))));
            continue;
        }
        obj_info_copy(orig, info);
        char um[sizeof(info->umeta)];
        size_t ul = 0;
        if ((rc = fn(arg, info, um, &ul)) == 0 && ul > sizeof(info->umeta)) rc = ERR_TOO_LARGE;
        if (rc) break;
        memcpy(info->umeta, um, ul);
        info->umeta_len = ul;
        /* The rewritten heads must win over any store that misses them; the object's
         * Last-Modified stays (S3 does not change it for tags or ACLs). */
        info->stamp_ns = obj__now_after(info);
        if (info->stamp_ns <= floor) info->stamp_ns = floor + 1;
        info->umeta_ns = 0; /* (decided now: obj__archive keeps it over older copies) */
        /*
         * Only over the version read (or a rewrite of it): a store that holds a newer
         * version (a PUT through another node meanwhile) refuses. Unconditional, this
         * rewrite of the old version came out newer than the PUT's and brought the old
         * bytes back over an acknowledged write (a probe: 2 rounds in 40).
         */
        /*
         * Not over another rewrite of it, though (no `self`): rewrites of one version share
         * its upload id, and with `self` two rewrites through different nodes (a bucket's
         * versioning and its tags; an object's tags and ACL) each covered the other, each
         * acknowledged, one lost (a 4-node probe: most rounds). A store holding another
         * rewrite refuses; this one is put back and made again over it. A rewrite of it
         * left short longer than any rewrite takes (its put-back failed) is covered.
         */
        shard_cond_t bound = {.mode = SHARD_IF_REWRITE, .stamp = orig->stamp_ns};
        memcpy(bound.upload, orig->upload_id, sizeof(bound.upload));
        if (leftover > bound.stamp && !strcmp(leftover_up, orig->upload_id)) bound.stamp = leftover;
        /*
         * And only where the version is (SHARD_IF_REWRITE: never over nothing). An
         * unversioned DELETE through another node leaves no head: under "nothing, or no
         * newer" the rewrite landed on the stores it had just emptied and the deleted
         * object came back after its DELETE was acknowledged, whole when small, else a
         * listed key every GET of which was 503 (a 4-node probe: most rounds; a bucket
         * record the same way after DeleteBucket). Stores that answer "nothing" now are
         * left out (a store that missed the version is the heal's); fewer than the
         * version needs to stand is a delete in progress, or done: look again.
         */
        uint32_t absent = 0;
        int present = heads_present(s, bucket, key, pos, &absent);
        if (present < (info->sparse ? __builtin_popcount(info->inl) : s->k) ||
            (info->sparse && (info->inl & absent))) {
            /* A copy on a replaced drive not refilled yet: no delete, a hole the heal fills.
             * Queued now, so that a retry soon finds the copy back (with the scanner off,
             * nothing else would heal it and such rewrites answered 503 for good). */
            if (attempt == 0 && info->sparse && (info->inl & absent & obj__refilling(s)))
                obj__heal_note(s, bucket, key, pos[0] ? obj__vid_or_null(info) : NULL);
            if (attempt + 1 >= 10) {
                rc = ERR_THROTTLED;
                break;
            }
            usleep(200u + (uint32_t)(info->stamp_ns % (500u << (attempt < 8 ? attempt : 8))));
            continue;
        }
        /*
         * Too few stores up for the write quorum: refused now (503), nothing written, as a PUT
         * is (obj_put.c). Written, the rewrite landed on the stores up, stood on them (k), and
         * answered 500 with the change in force: every tag or ACL change while a node was down
         * (a 4-node probe: 9 of 9).
         */
        uint32_t away = obj__unhealthy(s);
        if (info->sparse ? (info->inl & away) != 0 : s->n - __builtin_popcount(away) < s->wq) {
            log_warn("event=rewrite_refused key=%s up=%d quorum=%d: too few stores up", key,
                     s->n - __builtin_popcount(away), s->wq);
            rc = ERR_UNRECOVERABLE;
            break;
        }
        if (obj__rewrite_write_hook) obj__rewrite_write_hook(obj__rewrite_write_hook_arg, key);
        int refused = 0;
        int heads = obj__write_at_cond(s, bucket, key, pos, info, NULL, absent, &bound, &refused,
                                       &first_err);
        int need = present < s->wq ? present : s->wq;
        if (heads == 0 && first_err == ERR_NOT_FOUND) {
            /* A small version's bytes are gone: another node's write covered it (and
             * dropped it) meanwhile; nothing was written. Look again (answered as it
             * was, a PutObjectAcl racing an overwrite got 404 for a key that exists). */
            refused = 1;
        } else if (refused && !info->sparse && heads > s->n - s->k &&
                   heads + (s->n - __builtin_popcount(absent) - heads - refused) >= s->k) {
            /* It stands (failing stores counted for it, as readers count them): filled in,
             * never undone (fill_rewrite). */
            if ((rc = fill_rewrite(s, bucket, key, pos, info, need, absent)) != 0) break;
            if (pos[0] && attempt + 1 < 10 &&
                (stale_over(s, bucket, key, pos, info, &floor) ||
                 promoted_meanwhile(s, bucket, key, info)))
                continue; /* (as below) */
            break;
        } else if (!refused) {
            /* Rewritten wherever the version is, up to the write quorum. Short of it (stores
             * that failed the write): in doubt, as a commit is (503, not the stores' own
             * error: what landed stays, and may stand); the heal finishes it. */
            if (info->sparse ? !obj__enough(s, info, heads) : heads < need) {
                rc = first_err == ERR_THROTTLED || first_err == ERR_NOSPC ? first_err
                                                                          : ERR_UNRECOVERABLE;
                if (heads > 0)
                    obj__heal_note(s, bucket, key, pos[0] ? obj__vid_or_null(info) : NULL);
            } else if (pos[0] && attempt + 1 < 10 &&
                       (stale_over(s, bucket, key, pos, info, &floor) ||
                        promoted_meanwhile(s, bucket, key, info)))
                continue; /* the copy readers take is another one: rewritten there */
            break;
        }
        /* Put the version back as it was where the rewrite landed, then try again on
         * whatever is there now (the newer version, or another rewrite of it). */
        obj__put_back(s, bucket, key, pos, orig, info);
        stale_rewrite(s, bucket, key, pos, orig, &leftover, leftover_up);
        if (attempt + 1 >= 10) {
            rc = ERR_THROTTLED;
            break;
        }
        usleep(200u + (uint32_t)(info->stamp_ns % (500u << (attempt < 8 ? attempt : 8))));
    }
    pthread_mutex_unlock(lk);
    free(info);
    free(orig);
    return rc;
}
