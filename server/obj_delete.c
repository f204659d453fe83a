/*
 * obj_delete.c: unversioned deletes (room of the object layer; map in
 * obj_int.h): the version read retired by a tombstone head on every store,
 * under the condition of that version, dropped a minute later (or kept
 * where a store that holds the version could not take it); undone where
 * the delete could not stand (delete markers: obj_version.c; deletes by
 * version id: obj_promote.c).
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

int obj_delete(obj_set_t *s, const char *bucket, const char *key)
{
    return obj_delete_if(s, bucket, key, NULL);
}

void (*obj__delete_read_hook)(void *arg, const char *key);
void *obj__delete_read_hook_arg;

int obj__del_head(obj_set_t *s, int i, const drive_id_t *id, const shard_cond_t *cond)
{
    const shard_store_t *st = &s->st[i];
    /* A store that cannot judge the condition fails the delete: never an unconditional one. */
    return st->ops->del_head ? st->ops->del_head(st->ctx, id, cond) : ERR_INVAL;
}

int obj__undo_del(obj_set_t *s, int i, const drive_id_t *id, const obj_info_t *v)
{
    /*
     * Only that very head (its upload id and stamp): read as the undoer's just before, it
     * may be covered since by a writer that took it for standing (failing stores count for
     * a version), and that writer's head must stay.
     */
    shard_cond_t that = {.mode = SHARD_IF_UPLOAD, .stamp = v->stamp_ns};
    memcpy(that.upload, v->upload_id, sizeof(that.upload));
    int rc = obj__del_head(s, i, id, &that);
    /* A node of an older build reads no condition in a delete and answers ERR_CORRUPT: the
     * plain delete it knows, right after the read, as before conditional deletes. */
    if (rc == ERR_CORRUPT || rc == ERR_INVAL) rc = s->st[i].ops->del(s->st[i].ctx, id);
    return rc;
}

/* One store's conditional delete of a key's current head, as a pool job. */
typedef struct {
    pool_job_t base;
    obj_set_t *s;
    drive_id_t id;
    const shard_cond_t *cond;
    int rc;
} del_job_t;

static void run_del(pool_job_t *j)
{
    del_job_t *d = (del_job_t *)j;
    d->rc = obj__del_head(d->s, (int)d->id.shard, &d->id, d->cond);
    if (d->rc == ERR_NOT_FOUND) d->rc = 0; /* nothing there (gone already) */
}

/*
 * An unversioned delete writes a tombstone head (the version's upload id,
 * a newer stamp) on every store in one parallel round. While it is there no
 * head of that version goes over it (shard.c cond_holds): a heal, a
 * rewrite's fill or an undo through another node that read the version
 * before the delete is refused, where a store holding nothing would have
 * taken it (the deleted object back after the 204). A minute later the heal
 * thread removes the tombstones, each only where it is still that very head
 * (obj__tombstone_drop_note): the index does not grow with churn. A store
 * that holds the version and fails keeps its head: then the tombstones must
 * be on the write quorum, so that any m+1 stores a reader asks include one,
 * and they stay for good (until the next write of the key covers them).
 *
 * Every tombstone is conditioned on the version the delete read
 * (SHARD_IF_AT_MOST: that version, anything older, nothing, or any head of
 * that version: a rewrite of its metadata, the tombstone itself): a store
 * that took a commit through another node after the read keeps it. A refusal means another
 * writer came after the read; the delete linearizes before it, and waits for it to settle
 * (obj__delete_settle): once a version newer than the one read stands, the
 * delete is done (204: that version replaced the one it deleted). A writer
 * that is undone instead puts back, where it landed, the version it covered,
 * which may be the one deleted here: the round goes again and covers it.
 * So a version this delete answered 204 for never comes back from a
 * refusing store. A head in the way for longer than any commit takes is a
 * crash's leftover, never acknowledged: covered with the rest. Writers still
 * in flight after the commit's tries: 503 SlowDown, the version read kept
 * (its blocks stay: the outcome is open).
 */
static int delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c);

int obj_delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c)
{
    obj_set_t *top = s;
    s = obj__route(s, bucket, key);
    int rc = delete_if(s, bucket, key, c);
    if (rc == ERR_NOT_FOUND && obj_set_pools(top) > 1) {
        /* Routed before its key moved off a draining pool, found here after (obj_move.c):
         * where the key is now. */
        obj_set_t *now = obj__route(top, bucket, key);
        if (now != s) rc = delete_if(s = now, bucket, key, c);
    }
    if (rc || obj_set_pools(top) < 2) return rc;
    /*
     * A key that two pools hold (writes racing over a weight change): the
     * older pool's copy would be current again once the newest is gone.
     * Deleted too.
     */
    obj_info_t *h = xmalloc(sizeof(*h));
    for (int p = 0; p < obj_set_pools(top) && !rc; p++) {
        obj_set_t *other = top->sub[obj__in_pool(top, p, bucket, key)];
        if (other != s && obj__newest_head(other, bucket, key, h) == 0 && !h->deleted) {
            rc = delete_if(other, bucket, key, NULL);
            if (rc == ERR_NOT_FOUND) rc = 0;
        }
    }
    free(h);
    return rc;
}

/* Best effort: marker's tombstone heads, wherever they still are. */
static void tombstones_go(obj_set_t *s, const char *bucket, const char *key,
                          const obj_info_t *marker)
{
    shard_cond_t mine = {.mode = SHARD_IF_UPLOAD, .stamp = marker->stamp_ns};
    memcpy(mine.upload, marker->upload_id, sizeof(mine.upload));
    del_job_t jobs[OBJ_MAX_SHARDS];
    pool_job_t *q[OBJ_MAX_SHARDS];
    uint32_t away = obj__unhealthy(s);
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if ((away >> i) & 1) continue;
        jobs[n] = (del_job_t){
            .base = {.run = run_del}, .s = s, .id = {bucket, key, "", (uint32_t)i}, .cond = &mine};
        q[n] = &jobs[n].base;
        n++;
    }
    obj__run_all(s, q, n);
    for (int i = 0; i < n; i++)
        if (jobs[i].rc && jobs[i].rc != ERR_PRECOND)
            log_warn("event=delete_tombstone_left shard=%u key=%s err=%s", jobs[i].id.shard, key,
                     err_name(jobs[i].rc));
}

static int delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c)
{
    obj_info_t old, marker;
    uint32_t failed = 0, targets = 0;
    int written = 0, first_err = 0;
    int rc;
    obj_info_clear(&marker);
    marker.deleted = 1;
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    int reread = 0;
again:
    if ((rc = obj_stat(s, bucket, key, &old)) != 0 || (rc = obj_cond_check(c, &old)) != 0) {
        pthread_mutex_unlock(lk);
        return rc;
    }
    if (obj__delete_read_hook) obj__delete_read_hook(obj__delete_read_hook_arg, key);
    /*
     * The version read, anything older, nothing, or any head of that version (`self`): a
     * metadata rewrite of it (tags, ACL through another node) is newer by its stamp but is
     * still the version deleted here, and goes (before: the DELETE took it for a newer
     * version and stood back, the object kept with its tags after a 204). The tombstone is
     * that version's retirement, with its upload id: `self` too, and no head of the version
     * (a rewrite, an undo putting it back) is put over it at a store (shard.c cond_holds).
     */
    shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = old.stamp_ns};
    memcpy(bound.upload, old.upload_id, sizeof(bound.upload));
    memcpy(bound.self, old.upload_id, sizeof(bound.self));
    memcpy(marker.upload_id, old.upload_id, sizeof(marker.upload_id));
    /* One stamp for every round: a tombstone written again is the same one. */
    marker.mtime_ns = marker.stamp_ns = obj__now_after(&old);
    /*
     * Every store takes the tombstone, also those a small version never had a head on: it
     * stands as any head does (on k stores), and a commit after this delete finds it
     * standing instead of a head in flight to wait for.
     */
    targets = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    for (int attempt = 0;; attempt++) {
        /*
         * A store not up is not asked (it would hold the delete for its deadline): it keeps
         * the old head, as one that fails.
         */
        uint32_t away = obj__unhealthy(s), f = 0;
        int refused = 0;
        failed = targets & away;
        written = obj__heads_to(s, bucket, key, "", &marker, NULL, targets & ~away, &bound, &f,
                                &refused, &first_err);
        failed |= f;
        if (!refused) break;
        int settled = obj__delete_settle(s, bucket, key, &bound, attempt);
        if (settled < 0) {
            pthread_mutex_unlock(lk);
            log_warn("event=delete_in_doubt key=%s: writers through other nodes stay in flight",
                     key);
            return settled;
        }
        if (settled == 2) {
            /*
             * The version that stands was written on the condition that the one read here
             * was current (If-Match): this delete cannot come before it (it answered 204 and
             * the write 200: a compare-and-swap and a delete of the same ETag both won, a
             * cluster probe). It comes after: its tombstones go, and the key is read and the
             * condition judged again (412, or that version deleted).
             */
            tombstones_go(s, bucket, key, &marker);
            obj__tombstone_drop_note(s, bucket, key, &marker,
                                     s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1);
            log_info("event=delete_after_conditional_write key=%s upload=%s", key, old.upload_id);
            if (++reread > 3) {
                pthread_mutex_unlock(lk);
                return ERR_THROTTLED;
            }
            obj_info_clear(&marker);
            marker.deleted = 1;
            goto again;
        }
        if (settled) {
            /* A newer version stands: this delete came before it, which replaced (and drops)
             * the version deleted here. The tombstone, newer by its stamp than that version
             * where it landed first, would hide it from readers there: it goes (that very
             * one only). */
            tombstones_go(s, bucket, key, &marker);
            /* (Where one could not go now, a store away or failing: later, that very one.) */
            obj__tombstone_drop_note(s, bucket, key, &marker,
                                     s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1);
            failed = 0;
            pthread_mutex_unlock(lk);
            obj__drop_version(s, bucket, key, &old);
            return 0;
        }
        /* A writer that refused was undone, and may have put the version back where it had
         * landed: the next round covers it there. */
    }
    pthread_mutex_unlock(lk);
    /* In doubt: the version's blocks kept (its heads may be put back yet), the tombstones
     * left to what settles the key. */
    if (obj__landed_late(key, &marker)) return ERR_UNRECOVERABLE;
    /* The stores that may hold the version: a small one's copies, or every store. */
    uint32_t all = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    uint32_t holders = old.sparse ? old.inl : all;
    if (failed & holders) {
        /*
         * A store that holds the version failed and keeps its head: the tombstone, newer,
         * must be on enough of the others that any m+1 a reader asks include one (the write
         * quorum, as for any head), and it stays for good (a review: dropped after the
         * minute, the head that store kept was the version again, read whole and healed).
         */
        if (!obj__enough(s, &marker, written)) {
            /* In doubt (the tombstones stay where they landed): once the stores are back, a
             * heal that finds them standing rolls the delete forward, the version's data
             * with it (obj_heal.c, heal_deleted); one that does not leaves the version. */
            if (written >= s->k) obj__heal_note(s, bucket, key, NULL);
            return first_err == ERR_NOSPC || first_err == ERR_THROTTLED ? first_err
                                                                        : ERR_UNRECOVERABLE;
        }
        /* ... until the heal queue puts it on that store too, once back (obj_heal.c,
         * heal_deleted): then they go as any delete's do. */
        obj__heal_note(s, bucket, key, NULL);
    } else if (written < s->k) {
        /*
         * Every store that held it took the tombstone (a small one's copies), but too few
         * stores in all for it to stand (more than m others failing): a commit would wait
         * on it as a head in flight. It replaced the version everywhere: it goes (nothing
         * left, as a delete left before tombstones; a heal racing it is caught by its own
         * re-read, obj__heal_recheck).
         */
        tombstones_go(s, bucket, key, &marker);
    } else {
        /*
         * Every store that held it took the tombstone (a small one's copies: the others
         * failing do not fail the delete, as they never held it). The tombstones stay a
         * while: a heal or a rewrite through another node that read the version before
         * this delete is refused by them, then they go.
         */
        obj__tombstone_drop_note(s, bucket, key, &marker, all);
    }
    obj__drop_version(s, bucket, key, &old);
    return 0;
}

/*
 * Rolled forward, not undone: readers that asked the stores holding the tombstones answered
 * "no such key", and a version put back under them would come back after they had (the
 * reason a failed delete leaves its tombstones, above). Under the key's lock, against what
 * stands now: the delete's own bound (the version, anything older, or its own tombstone), so
 * a store that took a newer version meanwhile refuses and keeps it.
 */
int obj__finish_cut_delete(obj_set_t *s, const char *bucket, const char *key,
                           const obj_info_t *tomb)
{
    obj_info_t *old = xmalloc(sizeof(*old));
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    int in_way = 0, rc = obj__standing(s, bucket, key, old, &in_way);
    if (rc || in_way || strcmp(old->upload_id, tomb->upload_id) != 0 || old->deleted ||
        !obj__newer(tomb, old)) {
        pthread_mutex_unlock(lk);
        free(old);
        return rc && rc != ERR_NOT_FOUND ? rc : ERR_BUSY;
    }
    shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = old->stamp_ns};
    memcpy(bound.upload, old->upload_id, sizeof(bound.upload));
    memcpy(bound.self, old->upload_id, sizeof(bound.self));
    uint32_t all = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1, failed = 0;
    int refused = 0, first_err = 0;
    uint32_t away = obj__unhealthy(s);
    int written = obj__heads_to(s, bucket, key, "", tomb, NULL, all & ~away, &bound, &failed,
                                &refused, &first_err);
    pthread_mutex_unlock(lk);
    if (refused || !obj__enough(s, tomb, written)) {
        /* A newer version on some store, or too few took it: the key is looked at again. */
        free(old);
        return refused ? ERR_BUSY : first_err ? first_err : ERR_UNRECOVERABLE;
    }
    log_info("event=cut_delete_finished key=%s upload=%s tombstones=%d", key, tomb->upload_id,
             written);
    /* A store that may hold the version and did not take the tombstone keeps its head: the
     * tombstones stay until a heal puts one there too (as delete_if's, above); dropped a
     * minute on, that store's head was the version again. (The heal that called this goes
     * on to the tombstone, now standing, and counts a store it cannot reach as failed:
     * the queue tries the key again, the scanner's pass finds it.) */
    if (written == s->n) obj__tombstone_drop_note(s, bucket, key, tomb, all);
    /* In a draining pool, the copies of the version a move cut short made in the active
     * pools go too, as a whole delete's do (obj_delete_if): left, the copy was the key's
     * newest head anywhere, the deleted object back (a review). */
    if (s->parent && obj_set_pools(s->parent) > 1)
        obj__forget_copies(s->parent, s, bucket, key, old);
    obj__drop_version(s, bucket, key, old);
    free(old);
    return 0;
}
