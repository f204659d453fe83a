/*
 * obj_commit.c: committing a version's heads (room of the object layer; map
 * in obj_int.h), and the conditions a commit checks.
 *
 * No lock spans nodes: the stores decide. A commit reads every store's
 * head to find the version that stands (heads on k stores, or on every
 * copy of a sparse one), then writes its own heads under SHARD_IF_AT_MOST
 * of that version: a store holding anything newer refuses. A commit that
 * falls short is undone where it landed and tried again from the new
 * current version, so racing writers through different gateways end with
 * one winner on every store and no acknowledged version lost between them
 * (docs/design-notes.md, "conditions at the stores").
 */
#include "server/obj_int.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int64_t obj__wall_skew_ns;

uint64_t obj__wall_ns(void)
{
    return clock_wall_ns() + (uint64_t)obj__wall_skew_ns;
}

/* c's identity conditions against v (a delete marker too): 0 or ERR_PRECOND. */
static int identity_check(const obj_cond_t *c, const obj_info_t *v)
{
    if (c->if_upload[0] && (!v || strcmp(v->upload_id, c->if_upload) != 0)) return ERR_PRECOND;
    if (c->if_stamp && (!v || v->stamp_ns != c->if_stamp)) return ERR_PRECOND;
    return 0;
}

int obj_cond_check(const obj_cond_t *c, const obj_info_t *cur)
{
    if (!c) return 0;
    if (identity_check(c, cur)) return ERR_PRECOND;
    if (c->none_match && cur) return ERR_PRECOND;
    if (c->if_match[0] || c->if_size >= 0 || c->if_mtime_s >= 0) {
        if (!cur) return c->if_match[0] ? ERR_NOT_FOUND : ERR_PRECOND;
        const char *e = c->if_match;
        size_t el = strlen(e);
        if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
            e++;
            el -= 2;
        }
        if (c->if_match[0] && !(el == 1 && e[0] == '*') &&
            (el == 0 || strlen(cur->etag) != el || memcmp(cur->etag, e, el)))
            return ERR_PRECOND; /* an empty ETag matches nothing */
        if (c->if_size >= 0 && (uint64_t)c->if_size != cur->size) return ERR_PRECOND;
        if (c->if_mtime_s >= 0 && (uint64_t)c->if_mtime_s != cur->mtime_ns / 1000000000ull)
            return ERR_PRECOND;
    }
    return 0;
}

uint64_t obj__now_after(const obj_info_t *cur)
{
    uint64_t t = obj__wall_ns();
    if (cur && t <= cur->mtime_ns) t = cur->mtime_ns + 1;
    if (cur && t <= cur->stamp_ns) t = cur->stamp_ns + 1;
    return t;
}

int obj__cond_identity(const obj_cond_t *c, const obj_info_t *v)
{
    return c ? identity_check(c, v) : 0;
}

/*
 * A commit that fell short: the stores that took the new version's head get
 * back the one it covered (old), or lose it (no old), so that a failed write
 * leaves nothing a reader or a listing could find. Best effort: a store that
 * fails here may keep a head of a version whose PUT was refused (as a crash
 * mid-commit may). Returns those stores (0: the undo is whole).
 */
uint32_t obj__undo_heads(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *nv,
                         const obj_info_t *old, const void *old_bytes, uint32_t never, uint64_t at)
{
    /* at: only heads of nv stamped so (0: any). A leftover's undo by another writer than its
     * own: a retry of the same upload (a Complete resumed) writes fresh heads of it. */
    uint32_t left = 0; /* stores where the new head may still stand */
    uint32_t took = 0;
    int first_err = 0, stores[OBJ_MAX_SHARDS];
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    /* Not the stores no head of it was sent to (`never`: away when it was written, and
     * perhaps silent now: asking would wait out their deadline). */
    int n = obj__stores_in(s, UINT32_MAX & ~never, stores);
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++)
        if (h[j].ok && strcmp(h[j].info.upload_id, nv->upload_id) == 0 &&
            (!at || h[j].info.stamp_ns == at))
            took |= 1u << stores[j];
    /*
     * Each store that took the new head gets back what it had: the old
     * head where the old version had one (all stores, or a sparse one's
     * copies; as it was, sparse or not, bytes and all), and nothing where it
     * had none. Only where the new head still stands: a newer one that came
     * meanwhile stays. When the old version is gone meanwhile (replaced
     * through another node: an inline one's bytes with it), the new heads
     * just go.
     */
    uint32_t back = old ? (old->sparse ? took & old->inl : took) : 0, gone = took & ~back;
    void *bytes = NULL;
    if (back && old->inl && old->size && !old_bytes) {
        bytes = xmalloc(old->size);
        if (obj__inline_load(s, bucket, key, old, bytes) != 0) {
            gone = took;
            back = 0;
        }
    }
    if (back) {
        shard_cond_t mine = {.mode = SHARD_IF_UPLOAD, .stamp = at};
        memcpy(mine.upload, nv->upload_id, sizeof(mine.upload));
        uint32_t failed = 0;
        int refused = 0;
        obj__heads_to(s, bucket, key, "", old, old_bytes ? old_bytes : bytes, back, &mine, &failed,
                      &refused, &first_err);
        left |= failed;
    }
    free(bytes);
    /* Where the new head still stands (looked at again: a newer one may have come). */
    n = obj__stores_in(s, gone, stores);
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++) {
        drive_id_t id = {bucket, key, "", (uint32_t)stores[j]};
        if (h[j].ok && strcmp(h[j].info.upload_id, nv->upload_id) == 0 &&
            (!at || h[j].info.stamp_ns == at)) {
            int rc = obj__undo_del(s, stores[j], &id, &h[j].info);
            if (rc == ERR_PRECOND || rc == ERR_NOT_FOUND) continue; /* covered meanwhile */
            if (rc && !first_err) first_err = rc;
            if (rc) left |= 1u << stores[j];
        } else if (!h[j].ok && h[j].rc != ERR_NOT_FOUND) {
            left |= 1u << stores[j]; /* cannot tell */
        }
    }
    if (left)
        log_warn("event=commit_undo_incomplete key=%s upload=%s left=0x%x err=%s", key,
                 nv->upload_id, left, err_name(first_err));
    free(h);
    return left;
}

/*
 * What a commit replaces, read from every store: *best, the newest version
 * that stands (heads on k stores, or on every copy of a sparse one; a
 * failing store counts for it: it may hold one), and *anywhere, the newest
 * head any store holds, standing or not: another gateway's commit in
 * flight, or one cut short by a crash. Such a head is never *best: its
 * blocks are its writer's to keep or drop, not this commit's. 0,
 * ERR_NOT_FOUND (no version stands and more than m stores hold no head),
 * ERR_UNRECOVERABLE (failing stores leave it open).
 */
int obj__current_for_commit(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best,
                            shard_cond_t *anywhere, uint32_t skip, uint32_t *gave, int margin)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], have[OBJ_MAX_SHARDS] = {0}, failed = 0, absent = 0;
    /* Stores not up are not asked (a silent node would hold every commit for its deadline),
     * nor those the writer skips (skip): each counts as failing, for every version (it may
     * hold a head). */
    uint32_t all = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    uint32_t away = (obj__unhealthy(s) | skip) & all;
    /* Hedged: stores given up on lately (slow) are not asked either, while the margin allows:
     * else each such read would pay the delay again. */
    uint32_t slow = gave ? obj__slow(s) & all & ~away : 0;
    if (slow && __builtin_popcount(away | slow) <= margin) away |= slow;
    int rc = ERR_NOT_FOUND, n = obj__stores_in(s, UINT32_MAX & ~away, stores);
    failed = __builtin_popcount(away);
    /* Ages are judged as of before the read: a head that landed while it went on was in
     * flight when the read began (the bound a late commit answers by, obj__landed_late). */
    uint64_t read_at = obj__wall_ns();
    obj__heads_rd_t rd;
    obj__heads_start(s, &rd, bucket, key, "", stores, n, h); /* all at once */
    /*
     * Hedged (gave): calls still out after the hedge delay are given up on while no more
     * than `margin` stores are left out (a writer's: those its quorum does without; they are
     * not written either, *gave), and count as failing here: a node that froze a moment ago
     * costs the delay, not its deadline, as it costs a store that is not up.
     */
    int spare = margin - failed;
    obj__heads_finish_hedged(&rd, gave ? s->hedge_ms : 0, gave && spare > 0 ? spare : 0);
    /*
     * A replaced drive not yet refilled holds nothing of anything: its "nothing" says no more
     * than a failing store's answer, and counts as one. Taken as absent, a small version that
     * had a copy there stood short on its other copies, and a PUT or DELETE over it in a
     * versioned bucket took the key for new (503 for 10 s, then the version overwritten
     * without being kept: a probe, 6 keys of 12 right after a drive was replaced).
     */
    uint32_t blank = obj__refilling(s);
    for (int i = 0; i < n; i++) {
        if (gave && h[i].rc == ERR_CANCELED) *gave |= 1u << stores[i];
        if (h[i].rc == ERR_NOT_FOUND && ((blank >> stores[i]) & 1)) {
            failed++;
            continue;
        }
        if (h[i].rc == ERR_NOT_FOUND) {
            absent++;
            continue;
        }
        if (!h[i].ok) {
            failed += h[i].rc != 0;
            continue;
        }
        have[i] = 1;
        if (h[i].info.stamp_ns > anywhere->stamp ||
            (h[i].info.stamp_ns == anywhere->stamp &&
             strcmp(h[i].info.upload_id, anywhere->upload) > 0)) {
            anywhere->stamp = h[i].info.stamp_ns;
            memcpy(anywhere->upload, h[i].info.upload_id, sizeof(anywhere->upload));
        }
    }
    /* Newest first: the first version that stands is the current one. */
    for (;;) {
        int top = -1;
        for (int i = 0; i < n; i++)
            if (have[i] && (top < 0 || h[i].info.stamp_ns > h[top].info.stamp_ns ||
                            (h[i].info.stamp_ns == h[top].info.stamp_ns &&
                             strcmp(h[i].info.upload_id, h[top].info.upload_id) > 0)))
                top = i;
        if (top < 0) break;
        int count = 0;
        for (int i = 0; i < n; i++)
            if (have[i] && h[i].info.stamp_ns == h[top].info.stamp_ns &&
                !strcmp(h[i].info.upload_id, h[top].info.upload_id)) {
                count++;
                have[i] = 0;
            }
        const obj_info_t *t = &h[top].info;
        if (count + failed >= (t->sparse ? __builtin_popcount(t->inl) : s->k)) {
            obj_info_copy(best, t);
            rc = 0;
            break;
        }
    }
    /*
     * None stands by its exact heads, and nothing is in flight (the newest head is older than
     * any writer takes): a rewrite of the metadata (tags, an ACL) cut by a crash left one
     * version's heads at two stamps, some copies rewritten and some not. That version stands
     * on its heads of both stamps: the newest of them is current. Taken for no version, a
     * small one (on its m+1 copies) was lost to the next PUT in a versioned bucket, which
     * wrote over its heads without keeping it (a probe: kill -9 during PutObjectTagging,
     * then PUTs: 2 versions of 12 lost).
     */
    uint64_t newest = 0;
    for (int i = 0; i < n; i++)
        if (h[i].ok && h[i].info.stamp_ns > newest) newest = h[i].info.stamp_ns;
    if (rc && newest && newest + OBJ__COMMIT_STALE_NS <= read_at) {
        int used[OBJ_MAX_SHARDS] = {0};
        for (;;) {
            int top = -1;
            for (int i = 0; i < n; i++)
                if (h[i].ok && !used[i] &&
                    (top < 0 || h[i].info.stamp_ns > h[top].info.stamp_ns ||
                     (h[i].info.stamp_ns == h[top].info.stamp_ns &&
                      strcmp(h[i].info.upload_id, h[top].info.upload_id) > 0)))
                    top = i;
            if (top < 0) break;
            const obj_info_t *t = &h[top].info;
            int count = 0;
            for (int i = 0; i < n; i++)
                if (h[i].ok && !used[i] && !strcmp(h[i].info.upload_id, t->upload_id) &&
                    !strcmp(h[i].info.vid, t->vid) && h[i].info.deleted == t->deleted) {
                    count++;
                    used[i] = 1;
                }
            if (count + failed >= (t->sparse ? __builtin_popcount(t->inl) : s->k)) {
                log_warn("event=commit_split_version key=%s upload=%s heads=%d: a rewrite cut "
                         "short; its newest heads taken",
                         key, t->upload_id, count);
                obj_info_copy(best, t);
                rc = 0;
                break;
            }
        }
    }
    /*
     * Still none, and no more stores failing or empty than an acknowledged version can lose
     * and still have k heads (wq - k: none when the write quorum is k): a commit cut short
     * by a crash after so many heads that neither it nor the version it covered has k (3
     * and 3 of 4+2; any count between m and k). It was never acknowledged (that takes the
     * write quorum, and a head goes only to a newer write, a commit's undo or a drive's
     * loss). Its heads are its undo left undone: each took the place of a head of the
     * version that stood, which the undo puts back, so they count for the next older
     * version. Taken for no version, a create-only PUT went over the acknowledged one and a
     * heal gave up on the key (obj_heal finishes the undo).
     */
    if (rc && newest && newest + OBJ__COMMIT_STALE_NS <= read_at &&
        failed + absent <= s->wq - s->k) {
        int used[OBJ_MAX_SHARDS] = {0}, credit = 0;
        uint32_t above = 0; /* the stores holding the heads credited so far */
        for (;;) {
            int top = -1;
            for (int i = 0; i < n; i++)
                if (h[i].ok && !used[i] && (top < 0 || obj__newer(&h[i].info, &h[top].info)))
                    top = i;
            if (top < 0) break;
            const obj_info_t *t = &h[top].info;
            int count = 0;
            uint32_t mine = 0;
            for (int i = 0; i < n; i++)
                if (h[i].ok && !used[i] && h[i].info.stamp_ns == t->stamp_ns &&
                    !strcmp(h[i].info.upload_id, t->upload_id)) {
                    count++;
                    used[i] = 1;
                    mine |= 1u << stores[i];
                }
            /* A small version's heads are on its copies only: the heads credited to it are
             * those that took the place of its copies (passed by, over a delete's tombstones
             * its copies and the cut's went to the tombstone: an acknowledged PUT lost). */
            int stood =
                t->sparse ? count + __builtin_popcount(above & t->inl) >= __builtin_popcount(t->inl)
                          : count + credit >= s->k;
            /* A small version none of whose copies holds its head: its bytes went with them (the
             * cut landed on every copy; a versioned one is kept at its own position). Credited,
             * it stood with nothing to read, and the heal's undo then dropped the only bytes
             * the key had. */
            if (stood && t->inl && t->size && !t->deleted && !t->vid[0] && !(mine & t->inl))
                stood = 0;
            if (stood) {
                log_warn("event=commit_cut_leftover key=%s upload=%s heads=%d above=%d: a "
                         "commit cut short above the version that stands",
                         key, t->upload_id, count, credit);
                obj_info_copy(best, t);
                rc = 0;
                obj__heal_note(s, bucket, key, NULL); /* the undo finished */
                break;
            }
            credit += count;
            above |= mine;
        }
    }
    free(h);
    if (rc && absent <= s->m) rc = ERR_UNRECOVERABLE;
    return rc;
}

int obj__standing_under(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best,
                        int *in_way, int *leftover)
{
    shard_cond_t anywhere = {.mode = SHARD_IF_AT_MOST};
    uint64_t read_at = obj__wall_ns();
    int rc = obj__current_for_commit(s, bucket, key, best, &anywhere, 0, NULL, 0);
    uint64_t st = rc == 0 ? best->stamp_ns : 0;
    const char *up = rc == 0 ? best->upload_id : "";
    *in_way = anywhere.stamp > st || (anywhere.stamp == st && strcmp(anywhere.upload, up) > 0);
    *leftover = 0;
    /* One short for longer than any commit takes: a crash's leftover, never acknowledged. */
    if (*in_way && anywhere.stamp + OBJ__COMMIT_STALE_NS <= read_at) *in_way = 0, *leftover = 1;
    return rc;
}

int obj__standing(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best, int *in_way)
{
    int leftover;
    return obj__standing_under(s, bucket, key, best, in_way, &leftover);
}

int obj__newest_anywhere(obj_set_t *s, const char *bucket, const char *key, obj_info_t *out)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX, stores), top = -1;
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++)
        if (h[j].ok && (top < 0 || obj__newer(&h[j].info, &h[top].info))) top = j;
    if (top >= 0) obj_info_copy(out, &h[top].info);
    free(h);
    return top >= 0 ? 0 : ERR_NOT_FOUND;
}

#define COMMIT_TRIES 10

/*
 * Another writer is in the way of a commit: wait a random while, longer
 * each time (two racers rarely meet again). 0 when the tries are spent.
 */
static int backoff(const char *key, int attempt, int heads, int refused)
{
    log_info("event=commit_conflict key=%s attempt=%d heads=%d refused=%d", key, attempt + 1, heads,
             refused);
    if (attempt + 1 >= COMMIT_TRIES) return 0;
    uint32_t r;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = (uint32_t)attempt * 7919u;
    usleep(200 + r % (500u << (attempt < 8 ? attempt : 8)));
    return 1;
}

/* Set (value, never "") or remove (NULL) an entry of info's metadata; -1 when it does not fit. */
static int umeta_put(obj_info_t *info, const char *name, const char *value)
{
    if (!value && !obj_umeta_get(info, name)[0]) return 0; /* (most commits: nothing to do) */
    char *out = xmalloc(sizeof(info->umeta));
    size_t len = 0, nl = strlen(name) + 1, vl = value ? strlen(value) + 1 : 0;
    const char *n, *v;
    for (size_t p = 0; obj_umeta_next(info, &p, &n, &v);) {
        if (strcmp(n, name) == 0) continue;
        size_t a = strlen(n) + 1, b = strlen(v) + 1;
        memcpy(out + len, n, a);
        memcpy(out + len + a, v, b);
        len += a + b;
    }
    int rc = value && len + nl + vl > sizeof(info->umeta) ? -1 : 0;
    if (value && !rc) {
        memcpy(out + len, name, nl);
        memcpy(out + len + nl, value, vl);
        len += nl + vl;
    }
    memcpy(info->umeta, out, len);
    info->umeta_len = len;
    free(out);
    return rc;
}

int obj__delete_settle(obj_set_t *s, const char *bucket, const char *key, shard_cond_t *bound,
                       int attempt)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], rc = 0;
    int n = obj__stores_in(s, UINT32_MAX & ~obj__unhealthy(s), stores);
    obj__read_heads(s, bucket, key, "", stores, n, h);
    const obj_info_t *way = NULL; /* the newest head past the bound, not the delete's own */
    for (int i = 0; i < n && rc == 0; i++) {
        const obj_info_t *v = &h[i].info;
        /* Past the bound, and another writer's: not the version read (a rewrite of it goes
         * with it) nor the delete's own tombstone (`self`, that version's upload id). */
        if (!h[i].ok || v->stamp_ns < bound->stamp ||
            (v->stamp_ns == bound->stamp && strcmp(v->upload_id, bound->upload) <= 0) ||
            strcmp(v->upload_id, bound->self) == 0)
            continue;
        /*
         * Stands on its own heads (k, or every copy of a sparse one), failing stores not
         * counted for it: its writer then counts as many and never undoes it, so what it
         * covered (the version this delete read) cannot come back.
         */
        int count = 0;
        for (int j = 0; j < n; j++)
            count += h[j].ok && h[j].info.stamp_ns == v->stamp_ns &&
                     strcmp(h[j].info.upload_id, v->upload_id) == 0;
        if (count >= (v->sparse ? __builtin_popcount(v->inl) : s->k)) {
            /* Written against the version this delete read: the delete comes after it. */
            rc = strcmp(obj_umeta_get(v, OBJ_AFTER_META), bound->self) == 0 ? 2 : 1;
            break;
        }
        if (!way || obj__newer(v, way)) way = v;
    }
    if (rc == 0 && way) {
        if (way->stamp_ns + OBJ__COMMIT_STALE_NS <= obj__wall_ns()) {
            /* Short of standing for longer than any commit takes: a crash's leftover, never
             * acknowledged. The delete removes it with the rest. */
            log_info("event=delete_covers_leftover key=%s upload=%s", key, way->upload_id);
            bound->stamp = way->stamp_ns;
            memcpy(bound->upload, way->upload_id, sizeof(bound->upload));
        } else if (!backoff(key, attempt, 0, 1)) {
            rc = ERR_THROTTLED; /* another writer stays in flight: the client retries */
        }
    }
    /* No head past the bound but the delete's own: the writer that refused it was undone,
     * and what it put back (perhaps the version read) goes in the next round. Bounded as a
     * commit's tries are, whatever keeps refusing. */
    if (rc == 0 && attempt + 1 >= COMMIT_TRIES) rc = ERR_THROTTLED;
    free(h);
    return rc;
}

/* Asked by a request (a bucket's record, checked after each commit in it): a reader, hedged
 * as a head lookup is, the verdict resting on k answers at least. */
static int standing_head(obj_set_t *set, const char *bucket, const char *key, obj_info_t *info)
{
    shard_cond_t anywhere = {.mode = SHARD_IF_AT_MOST};
    uint32_t gave = 0;
    return obj__current_for_commit(set, bucket, key, info, &anywhere, 0, &gave, set->m);
}

int obj_stat_standing(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info)
{
    return obj__stat_routed(s, bucket, key, info, standing_head);
}

static int commit_heads(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *cond,
                        obj_versioning_t v, obj_info_t *info, const void *data, uint32_t dead,
                        int *first_err, int keep);

int obj__commit_heads(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *cond,
                      obj_versioning_t v, obj_info_t *info, const void *data, uint32_t dead,
                      int *first_err)
{
    return commit_heads(s, bucket, key, cond, v, info, data, dead, first_err, 0);
}

int obj__commit_heads_keep(obj_set_t *s, const char *bucket, const char *key,
                           const obj_cond_t *cond, obj_versioning_t v, obj_info_t *info,
                           int *first_err)
{
    return commit_heads(s, bucket, key, cond, v, info, NULL, 0, first_err, 1);
}

/*
 * Whether a commit's heads landed so late that others may have read some of them as a
 * crash's leftover (OBJ__COMMIT_STALE_NS by its stamp, on their clocks: half of it is the margin
 * for clocks that differ) and acted on it: a heal finishing the undo of a key split short
 * (current_for_commit), a write covering them without keeping them. Such a reader's read
 * began after that age, so a commit whose heads were all down by half of it was seen whole;
 * a later one is in doubt (503), whatever a read of it says now (the reader may be about to
 * write). Its heads stay, and the heal settles the key.
 */
int obj__landed_late(const char *key, const obj_info_t *info)
{
    uint64_t now = obj__wall_ns();
    if (now < info->stamp_ns + OBJ__COMMIT_STALE_NS / 2) return 0;
    log_warn("event=commit_late key=%s upload=%s after_ms=%llu: its heads may have been taken "
             "for a crash's leftover",
             key, info->upload_id, (unsigned long long)((now - info->stamp_ns) / 1000000));
    return 1;
}

static int commit_heads(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *cond,
                        obj_versioning_t v, obj_info_t *info, const void *data, uint32_t dead,
                        int *first_err, int keep)
{
    /* keep: the identity info carries (a cut commit's: obj__roll_forward), kept if it can be. */
    uint64_t kept_mtime = info->mtime_ns, kept_umeta = obj_umeta_ns(info);
    char kept_vid[sizeof(info->vid)];
    memcpy(kept_vid, info->vid, sizeof(kept_vid));
    obj_info_t old, *nuls = NULL;
    void *old_bytes = NULL;      /* an inline current version's bytes, to put back on an undo */
    obj_info_t *archived = NULL; /* the version an attempt kept as noncurrent, then lost */
    int drop_old = 0, nnul = 0, heads = -1, had_old = 0, stands = 0;
    uint64_t kept_nul = 0; /* the null versions whose retire fell short (by index) */
    uint32_t ghost = 0;    /* stores where an attempt's undo left this version's head */
    /*
     * Stores known to be away (not up, or failed this write's blocks) that
     * leave fewer than the write quorum: refused before anything is written,
     * so the failure is clean. An inline object whose copies all avoid them
     * goes on: its m+1 whole copies are its quorum.
     */
    uint32_t away = obj__unhealthy(s) | dead;
    if (__builtin_popcount(away) > s->n - s->wq && !(data && info->inl && !(info->inl & away))) {
        *first_err = ERR_UNRECOVERABLE;
        return -1;
    }
    dead = away; /* not written: a head there would wait out a silent node's deadline */
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    /*
     * The key lock orders this process's commits; the stores order those of
     * every gateway: each head replaces only what is no newer than the head
     * this commit read as current (SHARD_IF_AT_MOST). A store that refuses
     * holds a head another node wrote meanwhile: this commit is undone
     * where it landed and made again from the new current version (its
     * condition checked again, the version it now covers kept or dropped),
     * so racing writers end with one winner on every store and no version
     * lost between them.
     */
    shard_cond_t bound = {.mode = SHARD_IF_AT_MOST};
    int tidied = 0; /* leftovers above what stands whose undo this commit finished */
    for (int attempt = 0;; attempt++) {
        shard_cond_t anywhere = {.mode = SHARD_IF_AT_MOST};
        drop_old = 0;
        free(nuls);
        nuls = NULL;
        nnul = 0;
        heads = -1;
        uint32_t gave = 0;
        uint64_t read_at = obj__wall_ns();
        had_old = obj__current_for_commit(s, bucket, key, &old, &anywhere, dead & obj__slow(s),
                                          &gave, s->n - s->wq) == 0;
        dead |= gave; /* given up on: not written either (healed once committed) */
        /*
         * Replace the version that stands and nothing newer. A newer head
         * that does not stand is another writer's commit in flight: it
         * stands soon (then this commit covers it, keeping or dropping it as
         * it should) or is undone, so wait for it. One that stays short for
         * longer than any commit takes (OBJ__COMMIT_STALE_NS by its stamp) was
         * left by a crash, never acknowledged: it is covered.
         */
        bound.stamp = had_old ? old.stamp_ns : 0;
        memcpy(bound.upload, had_old ? old.upload_id : "", had_old ? sizeof(bound.upload) : 1);
        int in_way = anywhere.stamp > bound.stamp ||
                     (anywhere.stamp == bound.stamp && strcmp(anywhere.upload, bound.upload) > 0);
        if (in_way && anywhere.stamp + OBJ__COMMIT_STALE_NS > read_at) {
            if (!backoff(key, attempt, 0, 0)) {
                *first_err = ERR_THROTTLED;
                break;
            }
            continue;
        }
        /*
         * A leftover above what stands (a crash's, or an undo that failed): its undo finished
         * first. Covered instead, and this commit then cut short too, the credit handed this
         * commit's heads (which took the place of what stands) to the leftover, never
         * acknowledged: it "stood", and the version acknowledged was lost. Not a
         * head of what stands (a rewrite or a tombstone of it: ERR_BUSY, covered as before).
         */
        /* Not a pool mover's switch: its tombstones carry the moved version's own (old) stamp,
         * so one in flight through another node already reads as a leftover. */
        if (in_way && had_old && tidied < 3 && strcmp(anywhere.upload, OBJ_MOVED_UPLOAD) != 0) {
            char up[sizeof(anywhere.upload)];
            memcpy(up, anywhere.upload, sizeof(up));
            tidied++;
            /* Those heads only, at the stamp read: a Complete resumed meanwhile (its upload id,
             * through another node) writes fresh heads of it, which must stay. */
            if (obj__drop_cut_heads_at(s, bucket, key, up, anywhere.stamp) == 0) {
                log_info("event=commit_leftover_undone key=%s upload=%s", key, up);
                attempt--;
                continue;
            }
        }
        if (in_way) bound = anywhere;
        /*
         * An earlier attempt kept the version it covered as noncurrent, then lost to
         * another writer. If what stands now, with no newer head anywhere (checked
         * above: another commit in flight hides what it covers for a moment), is older
         * than that version (or nothing, a tombstone), it was deleted by its id
         * meanwhile, the next older one promoted: the attempt's noncurrent head brought
         * it back (its blocks dropped by the delete), and goes. A newer version (a PUT,
         * a delete marker) covered it itself.
         */
        if (archived && !in_way &&
            (!had_old || (old.deleted && !old.marker) ||
             (old.mtime_ns < archived->mtime_ns &&
              strcmp(old.upload_id, archived->upload_id) != 0))) {
            (void)obj__retire(s, bucket, key, archived);
            log_info("event=commit_unarchived key=%s upload=%s", key, archived->upload_id);
        }
        free(archived);
        archived = NULL;
        /*
         * A tombstone left by the mover of a draining pool (obj_move.c): the key went to
         * another pool after this write picked this one (its check at the start of the
         * commit came first). Written here it would cover nothing (a condition judged
         * against nothing current, the moved version not kept as noncurrent): refused
         * (503 SlowDown), the client's retry goes to the pool that holds the key.
         */
        if (had_old && old.deleted && !old.marker && s->parent &&
            strcmp(old.upload_id, OBJ_MOVED_UPLOAD) == 0) {
            obj_set_t *top = s->parent;
            int h = obj_set_pool_of(top, bucket, key);
            if (top->sub[obj__in_pool(top, h, bucket, key)] != s) {
                log_warn("event=commit_key_moved key=%s: the key moved to another pool", key);
                *first_err = ERR_THROTTLED;
                break;
            }
        }
        /* A version or a delete marker (not a tombstone: nothing current). */
        int cur = had_old && (!old.deleted || old.marker);
        /* The condition decides here, where the version it names cannot change. */
        int crc = obj_cond_check(cond, had_old && !old.deleted ? &old : NULL);
        if (crc) {
            *first_err = crc;
            break;
        }
        /* Written against that version (If-Match): said in the head, for a delete racing it
         * through another node (obj__delete_settle); none otherwise (a copy of a head that
         * had one). */
        if (umeta_put(info, OBJ_AFTER_META,
                      cond && cond->if_match[0] && had_old && !old.deleted ? old.upload_id
                                                                           : NULL) != 0)
            log_warn("event=commit_after_not_kept key=%s: no room in its metadata", key);
        /* Later than anything the key holds: versions sort by it (obj_version.c). */
        obj_info_t *after = xmalloc(sizeof(*after));
        obj_info_clear(after);
        /* ... and than any head in the way, so that readers prefer it to one left behind. */
        after->stamp_ns = after->mtime_ns =
            anywhere.stamp > bound.stamp ? anywhere.stamp : bound.stamp;
        if (cond && cond->stamp_after > after->stamp_ns)
            after->stamp_ns = after->mtime_ns = cond->stamp_after;
        info->mtime_ns = info->stamp_ns = obj__now_after(after);
        info->umeta_ns = 0; /* (its metadata is decided now) */
        free(after);
        info->vid[0] = 0;
        if (v == OBJ_VERSIONED) obj__vid_of(info->vid, info->mtime_ns);
        /*
         * A commit cut short, carried through, keeps the version id and mtime readers may have
         * met, under this fresh stamp (as a promotion's copy does: every bound and staleness
         * rule sees a new write), while it is still newer than what it covers and the
         * bucket's versioning still gives it such an id.
         */
        if (keep && kept_mtime && (!cur || old.mtime_ns < kept_mtime) &&
            (kept_vid[0] != 0) == (v == OBJ_VERSIONED)) {
            info->mtime_ns = kept_mtime;
            info->umeta_ns = kept_umeta;
            memcpy(info->vid, kept_vid, sizeof(kept_vid));
        }
        /* Suspended: the write is the null version; noncurrent null ones go once it stands
         * (found first, so that the window between the two writes is short). */
        if (v == OBJ_SUSPENDED && (nnul = obj__collect_nulls(s, bucket, key, &nuls)) < 0) {
            *first_err = nnul;
            nnul = 0;
            break;
        }
        if (v == OBJ_UNVERSIONED || (cur && !old.vid[0] && v == OBJ_SUSPENDED)) {
            /* The version current now is the null one: it is replaced. */
            drop_old = cur && !old.deleted && strcmp(old.upload_id, info->upload_id) != 0;
        } else if (cur && (*first_err = obj__archive(s, bucket, key, &old, info->stamp_ns)) != 0) {
            /* Kept as a noncurrent version before anything covers it, or no commit; gone
               (an inline one replaced meanwhile, through another node): look again. */
            if (*first_err != ERR_NOT_FOUND || attempt + 1 == COMMIT_TRIES) break;
            *first_err = 0;
            continue;
        } else if (cur && !old.deleted) {
            archived = xmalloc(sizeof(*archived));
            obj_info_copy(archived, &old);
        }
        /*
         * Sparse heads (only the m+1 copies) when nothing else holds a head at the
         * current position that a listing could take for this key's: the key is
         * new, was deleted (a tombstone, older than this), or its current version
         * is sparse on the same stores. Otherwise every store gets one, and stale
         * heads of an older version are covered everywhere.
         */
        info->sparse = data && info->inl && !(info->inl & dead) &&
                       (!had_old || old.sparse || (old.deleted && !old.marker));
        memcpy(bound.self, info->upload_id, sizeof(bound.self)); /* its own rounds rewrite it */
        /*
         * An inline version current now is overwritten in place, bytes and all: the undo
         * of an attempt that falls short puts it back from a copy taken first. Read in the
         * undo instead, it was gone when two writers racing through different nodes had
         * each overwritten some of its copies: both undid, and the acknowledged version
         * was lost (a probe's racing If-Match PUTs, a quarter of the rounds).
         */
        free(old_bytes);
        old_bytes = NULL;
        if (had_old && !old.deleted && old.inl && old.size) {
            old_bytes = xmalloc(old.size);
            if (obj__inline_load(s, bucket, key, &old, old_bytes) != 0) {
                /* Unreadable (every copy lost or rotten): nothing to put back, and a client
                 * replacing it must not be refused for it. */
                free(old_bytes);
                old_bytes = NULL;
            }
        }
        int refused = 0;
        heads = obj__write_commit(s, bucket, key, info, data, dead, &bound, &refused, first_err);
        /*
         * Short of the write quorum but on k stores (not a sparse one: its copies
         * are its quorum), the version stands for every reader and writer
         * (current_for_commit): another commit may already cover it, keeping it
         * as noncurrent. Undoing it now would pull a version from under them.
         * It stays, as if acknowledged, and is healed; the client is told the
         * write failed (a 5xx leaves the outcome open, as in S3).
         */
        stands = obj__enough(s, info, heads) || (!info->sparse && heads >= s->k);
        /*
         * Standing, but short of the quorum because another writer's heads
         * refused it on some stores: that writer finds this version standing
         * and undoes its heads (or covers this one). Written again where
         * they are gone, the version is acknowledged instead of answered "in
         * doubt" (a 503 whose retry would find the version the client wrote
         * and, for a conditional create, refuse it: a racing CreateBucket
         * with no winner).
         */
        int superseded = 0;
        for (int fill = 0; stands && refused && !obj__enough(s, info, heads) &&
                           backoff(key, fill, heads, refused);
             fill++) {
            int again = 0, err2 = 0;
            int h2 = obj__write_commit(s, bucket, key, info, data, dead, &bound, &again, &err2);
            if (h2 > heads) heads = h2;
            refused = again;
            /*
             * Refused because a newer version stands now: its writer found this one
             * standing and covered it (kept it as noncurrent, or replaced it), as if this
             * write had been acknowledged just before. So it is: filling in heads under a
             * newer version cannot succeed, and answering "in doubt" (503) told a client
             * whose write took effect that it had failed (racing plain PUTs, 1 round in 8).
             */
            obj_info_t now;
            shard_cond_t any = {.mode = SHARD_IF_AT_MOST};
            if (refused && obj__current_for_commit(s, bucket, key, &now, &any, 0, NULL, 0) == 0 &&
                obj__newer(&now, info)) {
                superseded = 1;
                break;
            }
        }
        /* Superseded too: the newer version may have covered what a heal put back over this
         * one's heads, not this one. */
        if (stands && obj__landed_late(key, info)) {
            /* In doubt, and nothing it covered dropped: it may be undone yet. */
            stands = 0;
            drop_old = 0;
            nnul = 0;
            *first_err = ERR_UNRECOVERABLE;
            heads = OBJ__COMMIT_IN_DOUBT;
            break;
        }
        if (stands) {
            /* A null version whose retire fell short keeps its blocks (below): its heads
             * stay on some stores, and a reader that meets one must find it whole. */
            for (int i = 0; i < nnul; i++)
                if (obj__retire(s, bucket, key, &nuls[i]) != 0) kept_nul |= 1ull << (i & 63);
            if (superseded) {
                *first_err = 0;
                heads = s->n; /* nothing of it to heal: the newer version took its place */
            } else if (!obj__enough(s, info, heads)) {
                if (!*first_err) *first_err = ERR_UNRECOVERABLE;
                heads = OBJ__COMMIT_IN_DOUBT;
            }
            break;
        }
        if (heads > 0)
            ghost =
                obj__undo_heads(s, bucket, key, info, had_old ? &old : NULL, old_bytes, dead, 0);
        if (ghost && !refused) {
            /*
             * Failing stores kept heads of this version: a reader may find it.
             * Its blocks must stay (a head without them would be a listed object
             * that cannot be read) and the heal queue finishes what the commit
             * began; the client is told it failed, as S3 may answer a write
             * that took effect (a 5xx says the outcome is unknown: it retries).
             */
            *first_err = ERR_UNRECOVERABLE;
            heads = OBJ__COMMIT_IN_DOUBT;
            break;
        }
        if (!refused) break; /* failing stores, not another writer: the commit fails */
        if (!backoff(key, attempt, heads, refused)) {
            *first_err = ERR_THROTTLED; /* writers keep racing on this key: the client retries */
            break;
        }
    }
    if (ghost && !stands && heads != OBJ__COMMIT_IN_DOUBT) {
        /*
         * An attempt that lost to another writer left heads of this version
         * where its undo failed, and the commit ended without it (the
         * condition now fails, or the tries are spent): those heads would
         * show a refused write to readers (a racing CreateBucket's owner).
         * Once more, now that the stores have had a moment.
         */
        (void)obj__undo_heads(s, bucket, key, info, had_old ? &old : NULL, old_bytes, dead,
                              0); /* logs what stays */
    }
    pthread_mutex_unlock(lk);
    free(old_bytes);
    free(archived);
    /* Acknowledged short of some stores: the missing heads and blocks are put back soon. */
    if ((heads >= 0 && obj__enough(s, info, heads) && !info->sparse && heads < s->n) ||
        heads == OBJ__COMMIT_IN_DOUBT)
        obj__heal_note(s, bucket, key,
                       obj__vid_or_null(info)); /* (noncurrent by then: healed by its id) */
    if (stands) {
        if (drop_old) obj__drop_version(s, bucket, key, &old);
        for (int i = 0; i < nnul; i++) {
            int seen = drop_old && !strcmp(nuls[i].upload_id, old.upload_id);
            for (int j = 0; j < i && !seen; j++)
                seen = !strcmp(nuls[i].upload_id, nuls[j].upload_id); /* a crash's duplicate */
            if (!nuls[i].deleted && !seen && !((kept_nul >> (i & 63)) & 1))
                obj__drop_version(s, bucket, key, &nuls[i]);
        }
    }
    free(nuls);
    return heads;
}
