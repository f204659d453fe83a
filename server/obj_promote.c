/*
 * obj_promote.c: deleting a version by id (room of the object layer; map in
 * obj_int.h): its retire by tombstones on a write quorum of stores, and,
 * when it was current, the promotion of the newest noncurrent version in its
 * place (its head copied to the current position); the retire made again
 * where a delete refused short of a quorum left it. The layout and crash
 * order of versions: obj_version.c.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * A delete by id's retire of v: 0 when its tombstones stand, else an error and the delete is
 * not acknowledged (its blocks stay). Answered 204 short of a quorum, the delete came undone
 * once the stores that missed the tombstone were back: readers that asked them found v
 * whole (a probe killing a node: 11-29 deletes a run, some readable with their old bytes).
 * Too few stores up: refused before anything is written. A shortfall found by the writes
 * leaves the tombstones where they landed, as a failed unversioned DELETE leaves its own
 * (taken back, a tombstone other readers have seen, and answered for, would be undone: a
 * review); the client's retry finishes it.
 */
static int retire_for_delete(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v)
{
    /* Stores not down: the tombstone goes to suspect ones too. */
    if (s->n - __builtin_popcount(obj__down(s)) < s->wq) return ERR_UNRECOVERABLE;
    return obj__retire(s, bucket, key, v);
}

#define MAX_DUPS 4

/* A successor search's state (pick_successor). */
typedef struct {
    obj_info_t *out;
    const obj_info_t *cur; /* the current version */
    obj_info_t *dups;      /* copies of cur (room for MAX_DUPS) */
    int ndups, found;
    obj_info_t *stale; /* null versions below a null one (room for MAX_DUPS) */
    int nstale, seen_null;
} successor_t;

static int same_version(const obj_info_t *a, const obj_info_t *b)
{
    return strcmp(a->upload_id, b->upload_id) == 0 && strcmp(a->vid, b->vid) == 0;
}

/*
 * The newest noncurrent version that is not a copy of cur (copies are
 * noted), nor a null version below another null one (stale: noted too).
 */
static int pick_successor(void *arg, const obj_info_t *v)
{
    successor_t *p = arg;
    if (same_version(v, p->cur)) {
        if (p->ndups < MAX_DUPS) obj_info_copy(&p->dups[p->ndups++], v);
        return 0;
    }
    if (!v->vid[0] && p->seen_null) {
        if (p->nstale < MAX_DUPS) obj_info_copy(&p->stale[p->nstale++], v);
        return 0;
    }
    obj_info_copy(p->out, v);
    p->found = 1;
    return 1;
}

/*
 * The null version v goes, and the walk stopped at its successor: the null
 * versions below that one are stale too (v replaced them), noted with those
 * the walk passed. A Suspended write that landed late retires none (it may be
 * undone yet): the null version it replaced stayed below the versioned one,
 * and came back as the key's null version once v was deleted by id, bytes
 * the client had replaced and then deleted. Best effort: one not noted (a
 * failed walk, more than MAX_DUPS) stays, as before.
 */
static void more_stale_nulls(obj_set_t *s, const char *bucket, const char *key, successor_t *p)
{
    obj_info_t *nuls = NULL;
    int n = obj__collect_nulls(s, bucket, key, &nuls);
    for (int i = 0; i < n; i++) {
        int seen = same_version(&nuls[i], p->cur); /* v's own noncurrent copy: a dup */
        for (int j = 0; j < p->nstale && !seen; j++)
            seen = same_version(&nuls[i], &p->stale[j]) && nuls[i].stamp_ns == p->stale[j].stamp_ns;
        if (!seen && p->nstale < MAX_DUPS) obj_info_copy(&p->stale[p->nstale++], &nuls[i]);
    }
    free(nuls);
}

/*
 * Whether noncurrent version v still has its noncurrent head (not retired).
 * A promotion copies its successor to the current position and then asks
 * this; a delete of a noncurrent version retires it and then asks whether
 * it is current (promote_past). Each writes before it reads what the other
 * writes, on quorums that meet (heads on wq stores, reads of m+1), so at
 * least one of two racing deletes sees the other: without this, deleting
 * the current version and the one below it at once through two nodes left
 * the lower one current with its blocks dropped (a probe: 15 rounds in 30).
 */
static int successor_stays(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v)
{
    char pos[OBJ_VID_LEN + 1];
    obj_info_t h;
    obj__vid_of(pos, v->mtime_ns);
    int rc = obj__newest_at(s, bucket, key, pos, &h);
    if (rc == ERR_NOT_FOUND) return 0; /* retired on every store: the records went */
    if (rc) {
        /* Cannot tell: the delete's own check decides, unless it ran before this promotion
         * landed. The heal looks again (obj__heal_retired_current). */
        obj__heal_note(s, bucket, key, NULL);
        return 1;
    }
    return !(h.deleted && !h.marker && strcmp(h.upload_id, v->upload_id) == 0);
}

/*
 * The current version v goes: the newest noncurrent one takes its place, or
 * nothing does (lone: v must be the only version, else ERR_PRECOND and
 * nothing written). The successor's noncurrent head stays (a copy of the
 * current one, skipped wherever versions are walked, retired when it goes):
 * a reader that looked for it as noncurrent, just before it became current,
 * still finds it there. Stale null versions found on the way go;
 * *stale and *nstale get them for dropping.
 */
/*
 * v's own noncurrent copy (at its position), when the walk stopped at a
 * successor before reaching it: v is not always the newest version. A
 * promotion cut short by a failing store can make an older version current
 * over a newer one whose noncurrent copy stays; deleting the older one then
 * met the newer one first, and its own copy outlived its blocks, listed as
 * a version that no longer reads (a six-node probe killing a node).
 */
static int note_own_copy(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v,
                         successor_t *p)
{
    char pos[OBJ_VID_LEN + 1];
    obj__vid_of(pos, v->mtime_ns);
    for (int i = 0; i < p->ndups; i++) {
        char at[OBJ_VID_LEN + 1];
        obj__vid_of(at, p->dups[i].mtime_ns);
        if (strcmp(at, pos) == 0) return 1; /* met on the way */
    }
    obj_info_t h;
    if (p->ndups < MAX_DUPS && obj__newest_at(s, bucket, key, pos, &h) == 0 &&
        !(h.deleted && !h.marker) && same_version(&h, v)) {
        obj_info_copy(&p->dups[p->ndups++], &h);
        return 1;
    }
    return 0;
}

/*
 * A promotion written: the successor's noncurrent copy read again. A rewrite of its metadata
 * (PutObjectTagging, PutObjectAcl by version id, through another node) that landed there
 * after the walk read it is not in the promoted head, which readers of that version take:
 * acknowledged tags were lost (a 3-node probe: 38 rounds in 40). The promoted head gets them,
 * only over itself (a store holding anything newer, a rewrite there or a PUT, refuses; then
 * it goes back as it was where it landed: the rewrite's own check, promoted_meanwhile in
 * obj_rewrite.c, sees the promotion and rewrites the current head).
 */
static void promoted_rewrite(obj_set_t *s, const char *bucket, const char *key, obj_info_t *next,
                             uint64_t walked)
{
    char pos[OBJ_VID_LEN + 1];
    obj_info_t *h = xmalloc(sizeof(*h)), *nv = xmalloc(sizeof(*nv));
    obj__vid_of(pos, next->mtime_ns);
    /*
     * Once: a rewrite landing there after this read sees the promotion (written before it)
     * in its own check. Read again, the copy may be a commit's archive of this very promotion
     * as it was (old metadata): taken, it undid the rewrite just carried over (a probe's
     * tagging, promotion and PUT at once, 3 rounds in 100).
     */
    if (obj__newest_at(s, bucket, key, pos, h) == 0 && !h->deleted && same_version(h, next) &&
        h->stamp_ns > walked &&
        (h->umeta_len != next->umeta_len || memcmp(h->umeta, next->umeta, h->umeta_len))) {
        obj_info_copy(nv, next);
        memcpy(nv->umeta, h->umeta, h->umeta_len);
        nv->umeta_len = h->umeta_len;
        nv->umeta_ns = obj_umeta_ns(h);
        nv->stamp_ns = obj__now_after(next);
        shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = next->stamp_ns};
        memcpy(bound.upload, next->upload_id, sizeof(bound.upload));
        int refused = 0, first_err = 0;
        int heads =
            obj__write_at_cond(s, bucket, key, "", nv, NULL, 0, &bound, &refused, &first_err);
        if (refused || !obj__enough(s, nv, heads)) {
            obj__put_back(s, bucket, key, "", next, nv);
        } else {
            log_info("event=promoted_rewrite key=%s version=%s", key, next->vid);
            obj_info_copy(next, nv);
        }
    }
    free(h);
    free(nv);
}

#define PROMOTE_RACED 1 /* a newer version came meanwhile: nothing promoted, look again */
#define PROMOTE_GONE                                                                               \
    2 /* promoted, but the successor was deleted meanwhile: *promoted must go too */
#define PROMOTE_GONE_LATE                                                                          \
    3 /* as PROMOTE_GONE, and the promotion landed late: the delete stays in doubt */

static int promote_locked(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v,
                          int lone, obj_info_t **stale, int *nstale, obj_info_t *promoted)
{
    obj_info_t next;
    int first_err = 0;
    void *vbytes = NULL;
    successor_t pk = {.out = &next,
                      .cur = v,
                      .dups = xcalloc(MAX_DUPS, sizeof(obj_info_t)),
                      .stale = xcalloc(MAX_DUPS, sizeof(obj_info_t)),
                      .seen_null = !v->vid[0]},
                *p = &pk;
    *stale = NULL;
    *nstale = 0;
    int rc = obj__each_noncurrent(s, bucket, key, pick_successor, p);
    if (rc >= 0 && p->found && !v->vid[0]) more_stale_nulls(s, bucket, key, p);
    if (rc >= 0 && p->found && obj__promote_hook) obj__promote_hook(obj__promote_hook_arg, key);
    uint64_t now = obj__now_after(v);
    if (rc < 0) goto out;
    rc = 0;
    int own = note_own_copy(s, bucket, key, v, p);
    if (lone && p->found) { /* it must be the key's only version: it is not (any more) */
        rc = ERR_PRECOND;
        goto out;
    }
    uint64_t walked = next.stamp_ns; /* the successor's copy as the walk read it */
    if (p->found) {
        if (now <= next.stamp_ns) now = next.stamp_ns + 1;
        /* A copy: its metadata is the one read, not of its new stamp (obj__archive). */
        next.umeta_ns = obj_umeta_ns(&next);
        next.stamp_ns = now;
    } else {
        /* Nothing left: a tombstone is the current head (newer than any store's). */
        obj_info_clear(&next);
        next.deleted = 1;
        next.mtime_ns = next.stamp_ns = now;
        if ((rc = obj__new_upload_id(next.upload_id)) != 0) goto out;
    }
    /*
     * A head on every store: the current heads of v (anywhere) are covered, and only
     * they (or older ones): a store that holds a newer version refuses. Written "newer
     * wins", the promotion came out newer than a PUT through another node and made an
     * older version current over the acknowledged one (a probe: 9 rounds in 40). Then
     * v goes back where the promotion landed, and the caller looks again.
     */
    next.sparse = 0;
    /*
     * A small v's bytes, read before the promotion replaces its copies: landing short of its
     * quorum, the promotion is taken back with them. Read from the copies only for the
     * put-back, after the promotion had replaced some, with another copy failing (a node
     * killed, not yet seen as down), they were gone: v's heads went where the promotion had
     * landed, the delete answered 503, its retry 204 (v looked gone), and once the node was
     * back v was read again from its one copy (a cluster probe). Unreadable now: nothing is
     * written (gone from every copy: deleted meanwhile through another node, look again).
     */
    if (!v->deleted && v->inl && v->size) {
        vbytes = xmalloc(v->size);
        int lrc = obj__inline_load(s, bucket, key, v, vbytes);
        if (lrc) {
            rc = lrc == ERR_NOT_FOUND ? PROMOTE_RACED : ERR_UNRECOVERABLE;
            goto out;
        }
    }
    shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = v->stamp_ns};
    memcpy(bound.upload, v->upload_id, sizeof(bound.upload));
    memcpy(bound.self, next.upload_id, sizeof(bound.self));
    int refused = 0;
    int heads =
        obj__write_at_cond(s, bucket, key, "", &next, NULL, 0, &bound, &refused, &first_err);
    if (heads == 0 && first_err == ERR_NOT_FOUND) {
        /* A small successor's bytes are gone: it was deleted meanwhile, nothing was
         * written. Answered as it was (the delete's "no such version": 204), the
         * current version stayed after an acknowledged delete (a probe: 7 rounds in 30). */
        rc = PROMOTE_RACED;
        goto out;
    }
    if (refused) {
        obj__put_back_bytes(s, bucket, key, "", v, vbytes, &next);
        rc = PROMOTE_RACED;
        goto out;
    }
    if (!obj__enough(s, &next, heads)) {
        /* Taken back where it landed, as a commit that falls short is: left, the promoted
         * version stood on the stores that took it (newest there) while v stayed current on
         * the others, its blocks kept and its copies not retired, for a delete answered
         * with an error (a probe killing a node saw such a v listed again later). */
        obj__put_back_bytes(s, bucket, key, "", v, vbytes, &next);
        rc = first_err ? first_err : ERR_UNRECOVERABLE;
        goto out;
    }
    if (obj__landed_late(key, &next)) {
        rc = ERR_UNRECOVERABLE; /* in doubt: nothing retired, v's blocks kept */
        /* But a successor deleted meanwhile must not stay current (its blocks dropped by a
         * delete that read v current before this promotion landed): promoted past all the
         * same. */
        if (p->found && !successor_stays(s, bucket, key, &next)) {
            obj_info_copy(promoted, &next);
            rc = PROMOTE_GONE_LATE;
        }
        goto out;
    }
    if (p->found && obj__promoted_hook) obj__promoted_hook(obj__promoted_hook_arg, key);
    if (p->found) promoted_rewrite(s, bucket, key, &next, walked);
    for (int i = 0; i < p->ndups; i++)
        (void)obj__retire(s, bucket, key, &p->dups[i]);
    /* With no copy there, a tombstone at v's own position all the same: it refuses an
     * archive of v by a commit that read v as current before this delete (obj__archive). */
    if (!own && v->vid[0]) (void)obj__retire(s, bucket, key, v);
    /* The stale null versions handed back (their blocks dropped) are those whose retire
     * stood: one short keeps its heads on some stores, and its blocks with them. */
    int ns = 0;
    for (int i = 0; i < p->nstale; i++)
        if (obj__retire(s, bucket, key, &p->stale[i]) == 0 && ns++ != i)
            obj_info_copy(&p->stale[ns - 1], &p->stale[i]);
    *stale = p->stale;
    *nstale = ns;
    p->stale = NULL;
    if (p->found && !successor_stays(s, bucket, key, &next)) {
        obj_info_copy(promoted, &next);
        rc = PROMOTE_GONE;
    }
out:
    free(vbytes);
    free(p->dups);
    free(p->stale);
    return rc;
}

/* Blocks of stale null versions a promotion retired (not those of keep). */
static void drop_stale(obj_set_t *s, const char *bucket, const char *key, obj_info_t *stale,
                       int nstale, const obj_info_t *keep)
{
    for (int i = 0; i < nstale; i++)
        if (!stale[i].deleted && strcmp(stale[i].upload_id, keep->upload_id) != 0)
            obj__drop_version(s, bucket, key, &stale[i]);
    free(stale);
}

/*
 * gone (retired, or about to have its blocks dropped) must not be current:
 * if a racing delete of the version above it promoted it meanwhile, the
 * next older version takes its place (see successor_stays). 0 when it is
 * not current (any more).
 *
 * Current is what stands (obj__standing), not the newest head of m+1
 * stores: that may be another writer's head in flight, short of standing,
 * and then it is waited for. Taken for current, a racing delete's
 * promotion of gone that had landed on two stores of six (and was about
 * to be put back: a delete marker stood on the other four) was promoted
 * past, over the marker, whose stamp was older than the promotion's: an
 * acknowledged marker lost (a probe's racing PUT, marker and deletes by
 * id).
 */
static int promote_past(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *gone)
{
    obj_info_t g, cur;
    obj_info_copy(&g, gone);
    for (int attempt = 0; attempt < 10; attempt++) {
        int in_way = 0;
        int rc = obj__standing(s, bucket, key, &cur, &in_way);
        if (rc && rc != ERR_NOT_FOUND && !(rc == ERR_UNRECOVERABLE && in_way)) return rc;
        if (in_way) {
            usleep(200u + (uint32_t)(g.stamp_ns % (500u << (attempt < 8 ? attempt : 8))));
            continue;
        }
        if (rc == ERR_NOT_FOUND) return 0;
        if (!same_version(&cur, &g) || (cur.deleted && !cur.marker)) return 0;
        log_info("event=promote_past key=%s version=%s", key, cur.vid[0] ? cur.vid : "null");
        obj_info_t *stale = NULL, next;
        int nstale = 0;
        rc = promote_locked(s, bucket, key, &cur, 0, &stale, &nstale, &next);
        drop_stale(s, bucket, key, stale, nstale, &g);
        if (rc == PROMOTE_GONE_LATE) {
            (void)promote_past(s, bucket, key, &next);
            return ERR_UNRECOVERABLE;
        }
        if (rc == PROMOTE_GONE) {
            obj_info_copy(&g, &next); /* a third delete took that one: on */
            attempt = -1;
            continue;
        }
        if (rc != PROMOTE_RACED) return rc;
        usleep(200u + (uint32_t)(cur.stamp_ns % (500u << (attempt < 8 ? attempt : 8))));
    }
    return ERR_THROTTLED;
}

static int delete_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                          const obj_cond_t *c, obj_info_t *gone);

void (*obj__retired_hook)(void *arg, const char *key);
void (*obj__promote_hook)(void *arg, const char *key);
void *obj__promote_hook_arg;
void (*obj__promoted_hook)(void *arg, const char *key);
void *obj__promoted_hook_arg;
void (*obj__located_hook)(void *arg, const char *key);
void *obj__located_hook_arg;
void *obj__retired_hook_arg;

int obj_delete_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                       const obj_cond_t *c, obj_info_t *gone)
{
    obj_set_t *top = s;
    s = obj__route(top, bucket, key);
    obj_info_t *v = xmalloc(sizeof(*v));
    int rc = delete_version(s, bucket, key, vid, c, v);
    if (rc == ERR_NOT_FOUND && obj_set_pools(top) > 1) {
        /* Routed before its key moved off a draining pool (obj_move.c): where it is now. */
        obj_set_t *now = obj__route(top, bucket, key);
        if (now != s) rc = delete_version(now, bucket, key, vid, c, v);
        s = now;
    }
    if (rc == 0 && obj_set_pools(top) > 1) obj__forget_copies(top, s, bucket, key, v);
    if (rc == 0 && gone) obj_info_copy(gone, v);
    free(v);
    return rc;
}

/*
 * The retire of the version at pos (want its vid: "" the null version) made again where a
 * delete refused short of a quorum left it: every store the retire counts on read there
 * (not down: suspect ones too, so that a tombstone one holds is counted, not written
 * again). A live head of this very version beside its tombstone (same upload: another
 * version may have come to that position since), or (by id) its tombstones on fewer
 * stores than a write quorum: retired again. 0 with *v the version (when a live head of it
 * was found), ERR_NOT_FOUND (nothing to finish there), or the stores' error.
 */
static int finish_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                     const char *want, obj_info_t *v)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX & ~obj__down(s), stores);
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    int tombs = 0, live = -1, tomb = -1;
    for (int j = 0; j < n; j++) {
        if (!h[j].ok) continue;
        if (h[j].info.deleted && !h[j].info.marker)
            tomb = j, tombs++;
        else if (strcmp(h[j].info.vid, want) == 0 && /* this very version (by id, or null) */
                 (live < 0 || obj__newer(&h[j].info, &h[live].info)))
            live = j;
    }
    int rc = ERR_NOT_FOUND;
    if (tomb >= 0 && live >= 0 && strcmp(h[live].info.upload_id, h[tomb].info.upload_id) != 0)
        live = -1; /* another version's: not this delete's to retire */
    if (tomb >= 0 && (live >= 0 || (want[0] && tombs < s->wq))) {
        const obj_info_t *of = live >= 0 ? &h[live].info : &h[tomb].info;
        log_info("event=retire_finished key=%s version=%s tombstones=%d live=%d", key,
                 want[0] ? want : "null", tombs, live >= 0);
        rc = retire_for_delete(s, bucket, key, of);
        if (rc == 0 && live >= 0)
            obj_info_copy(v, of);
        else if (rc == 0)
            rc = ERR_NOT_FOUND;
    }
    free(h);
    return rc;
}

/* The positions of bkt/key where a store holds a tombstone (a retired version's). */
typedef struct {
    const char *key;
    char (*pos)[OBJ_VID_LEN + 1];
    int n, cap;
} tomb_walk_t;

static int tomb_at(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    tomb_walk_t *t = arg;
    if (strcmp(id->key, t->key) != 0) return 1; /* a longer key: this one's are done */
    if (!id->version[0] || strlen(id->version) > OBJ_VID_LEN) return 0;
    obj_info_t *o = xmalloc(sizeof(*o));
    int tomb = obj_meta_decode(meta, st->meta_len, o) == 0 && o->deleted && !o->marker;
    free(o);
    for (int i = 0; tomb && i < t->n; i++)
        tomb = strcmp(t->pos[i], id->version) != 0;
    if (!tomb) return 0;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4;
        t->pos = xrealloc(t->pos, (size_t)t->cap * sizeof(*t->pos));
    }
    snprintf(t->pos[t->n++], OBJ_VID_LEN + 1, "%s", id->version);
    return 0;
}

/*
 * A delete by id that finds the version deleted already: by a tombstone that stands, or one a
 * delete refused short of a quorum left on too few stores for every reader to meet it (a
 * reader asking the others finds the version whole). Then this delete retires the version
 * again, over every store: done when that stands (the retry of the refused delete, or another
 * client's). The null version has no position of its own: the positions where a store holds
 * a tombstone are tried (few: a retire that stood drops its tombstones after a minute). 0
 * with *v the version found on some store (its blocks are the caller's to drop),
 * ERR_NOT_FOUND (nothing of it left, or its tombstones stand), or an error.
 */
static int finish_retire(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                         obj_info_t *v)
{
    if (strcmp(vid, "null") != 0) {
        if (strlen(vid) != OBJ_VID_LEN || !obj_vid_valid(vid)) return ERR_NOT_FOUND;
        return finish_at(s, bucket, key, vid, vid, v);
    }
    tomb_walk_t t = {.key = key};
    uint32_t down = obj__down(s);
    int failed = 0; /* a store whose walk failed may hold the only tombstone: cannot say */
    for (int i = 0; i < s->n; i++) {
        if ((down >> i) & 1) continue;
        drive_from_t from = {.how = DRIVE_FROM_START};
        int src = s->st[i].ops->scan(s->st[i].ctx, bucket, key, &from, tomb_at, &t);
        if (src < 0 && src != ERR_INVAL && !failed) failed = src;
    }
    int rc = ERR_NOT_FOUND;
    for (int i = 0; i < t.n && rc == ERR_NOT_FOUND; i++)
        rc = finish_at(s, bucket, key, t.pos[i], "", v);
    free(t.pos);
    return rc == ERR_NOT_FOUND && failed ? failed : rc;
}

static int delete_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                          const obj_cond_t *c, obj_info_t *gone)
{
    obj_info_t v, *more = NULL;
    int nmore = 0;
    char pos[OBJ_VID_LEN + 1];
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    int rc, finished = 0;
    for (int attempt = 0;; attempt++) {
        rc = obj__locate(s, bucket, key, vid, &v, pos);
        if (rc == ERR_NOT_FOUND && !c) {
            finished = (rc = finish_retire(s, bucket, key, vid, &v)) == 0;
            break;
        }
        /* Conditions name this version (a delete marker has no ETag or size to match). */
        if (rc == 0 && c) {
            if ((c->noncurrent && !pos[0]) || (c->lone && pos[0]) || obj__cond_identity(c, &v))
                rc = ERR_PRECOND;
            else if (c->if_match[0] || c->if_size >= 0 || c->if_mtime_s >= 0)
                rc = obj_cond_check(c, v.deleted ? NULL : &v);
        }
        if (rc || pos[0]) break;
        /*
         * Read as current from the newest heads of m+1 stores, v may be another writer's head
         * in flight, short of standing: a racing delete's promotion of v that lands on two
         * stores of six while a delete marker stands on the other four. Promoted past, the
         * next version went over the marker (older by its stamp than the promotion): an
         * acknowledged marker lost. Waited for instead, as a commit waits (obj__standing).
         */
        if (obj__located_hook) obj__located_hook(obj__located_hook_arg, key);
        obj_info_t *now = xmalloc(sizeof(*now)), next;
        int in_way = 0;
        rc = obj__standing(s, bucket, key, now, &in_way);
        /*
         * And what stands must be v itself, promoted with the stamp it stands with: the head
         * read may have been in flight and gone since (a racing delete's promotion of v,
         * undone: a delete marker stands). Taken as current with its stamp, newer than the
         * marker's, it was promoted past: the next version went over the acknowledged marker
         * on every store (a probe's DeleteObjects of v1,v2 + DELETE ?versionId=v2 + marker,
         * 1 round in 150). Not v: look again.
         */
        int same = rc == 0 && same_version(now, &v) && (!now->deleted || now->marker);
        if (same) obj_info_copy(&v, now);
        /* Nothing standing while heads are in flight (racing writers' heads split the stores
         * between them for a moment): waited for too. Answered at once, a delete by id
         * racing single deletes and a PUT through other nodes got 503 "too many drives are
         * unavailable" on a healthy cluster (a probe's DeleteObjects: 7 entries in 100). */
        free(now);
        if (rc && rc != ERR_NOT_FOUND && !(rc == ERR_UNRECOVERABLE && in_way)) break;
        rc = in_way || !same
                 ? PROMOTE_RACED
                 : promote_locked(s, bucket, key, &v, c && c->lone, &more, &nmore, &next);
        if (rc == PROMOTE_GONE || rc == PROMOTE_GONE_LATE) {
            /* v went; its successor must not stay current in its place. Failing that, a
             * reader finds the successor (its delete's own check may still take it). */
            int late = rc == PROMOTE_GONE_LATE;
            int prc = promote_past(s, bucket, key, &next);
            if (prc) {
                log_warn("event=promote_past_failed key=%s version=%s err=%s", key, next.vid,
                         err_name(prc));
                obj__heal_note(s, bucket, key, NULL); /* obj__heal_retired_current */
            }
            rc = late ? ERR_UNRECOVERABLE : 0; /* late: in doubt, v's blocks kept */
        }
        if (rc == ERR_NOT_FOUND) rc = ERR_UNRECOVERABLE; /* v is there: never "no such version" */
        if (rc != PROMOTE_RACED) break;
        if (attempt + 1 >= 10) {
            rc = ERR_THROTTLED;
            break;
        }
        usleep(200u + (uint32_t)(v.stamp_ns % (500u << (attempt < 8 ? attempt : 8))));
    }
    if (finished) {
        /* A refused delete's tombstones, made to stand: and v must not be current (a delete
         * of the version above it may have promoted it meanwhile), as below. */
        rc = promote_past(s, bucket, key, &v);
    } else if (rc == 0 && !pos[0]) {
        ; /* promoted */
    } else if (rc == 0 && !v.vid[0]) {
        /* The null version, noncurrent: with it any stale copy a crash left. */
        nmore = obj__collect_nulls(s, bucket, key, &more);
        if (nmore < 0) {
            rc = nmore;
            nmore = 0;
        }
        /* The stale copies first, as garbage (best effort: one whose retire falls short is
         * not dropped below, its blocks kept for the heads it keeps), the null version
         * itself last: refused, it stays whole with no stale copy retired from under it. */
        int kept = 1;
        for (int i = 1; i < nmore; i++)
            if (obj__retire(s, bucket, key, &more[i]) == 0 && kept++ != i)
                obj_info_copy(&more[kept - 1], &more[i]);
        if (nmore > 0) nmore = kept;
        if (nmore > 0) rc = retire_for_delete(s, bucket, key, &more[0]);
        if (rc == 0 && nmore == 0) rc = retire_for_delete(s, bucket, key, &v);
        for (int i = 0; rc == 0 && i < nmore; i++)
            rc = promote_past(s, bucket, key, &more[i]);
        if (rc == 0 && nmore == 0) rc = promote_past(s, bucket, key, &v);
    } else if (rc == 0) {
        rc = retire_for_delete(s, bucket, key, &v);
        if (rc == 0 && obj__retired_hook) obj__retired_hook(obj__retired_hook_arg, key);
        if (rc == 0) rc = promote_past(s, bucket, key, &v);
    }
    pthread_mutex_unlock(lk);
    if (rc == 0 && !v.deleted) obj__drop_version(s, bucket, key, &v);
    for (int i = 0; rc == 0 && i < nmore; i++)
        if (!more[i].deleted && strcmp(more[i].upload_id, v.upload_id) != 0)
            obj__drop_version(s, bucket, key, &more[i]);
    free(more);
    if (rc) return rc;
    if (gone) obj_info_copy(gone, &v);
    return 0;
}

/*
 * A version a delete by id retired that is current all the same: a promotion of it landed
 * after that delete read the version above still current (its blocks dropped, 204), and the
 * promotion's own check could not read its position or its promote_past failed (stores
 * failing). Readers find a current version whose blocks are gone. The heal, told by either,
 * finds the version's tombstone at its own position (a commit stamps a version with its
 * mtime; only promotions and rewrites stamp it later, so other heads cost no read) and
 * promotes past it, as the delete would have.
 */
int obj__heal_retired_current(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *cur)
{
    if ((cur->deleted && !cur->marker) || cur->stamp_ns <= cur->mtime_ns) return 0;
    char pos[OBJ_VID_LEN + 1];
    obj_info_t *h = xmalloc(sizeof(*h));
    obj__vid_of(pos, cur->mtime_ns);
    int retired = obj__newest_at(s, bucket, key, pos, h) == 0 && h->deleted && !h->marker &&
                  strcmp(h->upload_id, cur->upload_id) == 0;
    free(h);
    if (!retired) return 0;
    log_warn("event=retired_version_current key=%s version=%s", key,
             cur->vid[0] ? cur->vid : "null");
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    int rc = promote_past(s, bucket, key, cur);
    pthread_mutex_unlock(lk);
    return rc ? rc : 1;
}
