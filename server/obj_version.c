/*
 * obj_version.c: versioning (room of the object layer; map in obj_int.h):
 * noncurrent versions, delete markers, finding versions (deleting one by id
 * and promoting the next: obj_promote.c).
 *
 * Layout. The current head of a key stays where it always was, {bucket,
 * key, "", i}: the current version is one head lookup whether or not the
 * bucket keeps versions, and a bucket that never did is laid out exactly
 * as before versioning existed. A noncurrent version (or delete marker)
 * has its head at {bucket, key, P, i}, P = OBJ_VID_LEN hex digits of the
 * version's ~mtime: a key's noncurrent versions sort newest first right
 * after its current head, and one ordered walk of a store lists them all.
 * A version's id is that same P (the null version has none: "", and is
 * found by walking). Versions keep their blocks under their own upload ids,
 * so keeping a version is keeping its head, and deleting one drops its
 * blocks as an overwrite does.
 *
 * Crash order. A write that covers the current version first writes the
 * covered one's noncurrent head, then the new current head: a crash in
 * between leaves the old version both current and noncurrent, a duplicate
 * (same upload id and version id) that listings and promotions skip and a
 * later delete of that version retires. A version deleted for good gets a
 * tombstone head (its newer stamp wins over a store that missed it); when
 * every store took the tombstone, the records themselves go. Deleting the
 * current version promotes the newest noncurrent one: its head is copied
 * to the current position (newer stamp) and its noncurrent head stays, a
 * duplicate again, so that a reader never finds it in neither place.
 * A Suspended write replaces the null version: the noncurrent null ones
 * are found before the new head is written and retired after it; a crash
 * in between leaves a stale null below the current null one, which walks
 * skip and the next write or delete of the null version retires.
 */
#include "server/obj_int.h"

#include "cluster/features.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void obj__vid_of(char out[OBJ_VID_LEN + 1], uint64_t mtime_ns)
{
    snprintf(out, OBJ_VID_LEN + 1, "%016llx", (unsigned long long)~mtime_ns);
}

/*
 * After an archive of cur at pos: the newest metadata of cur's version there, when newer
 * than a's (a rewrite by id that a store kept, refusing the archive): a gets it, and a stamp
 * newer than any head there (*stamp). 0 when a's stays.
 */
static int newer_metadata_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                             obj_info_t *a, uint64_t *stamp)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX & ~obj__unhealthy(s), stores);
    int best = -1;
    uint64_t top = 0;
    obj__read_heads(s, bucket, key, pos, stores, n, h);
    for (int j = 0; j < n; j++) {
        if (!h[j].ok) continue;
        if (h[j].info.stamp_ns > top) top = h[j].info.stamp_ns;
        if (h[j].info.deleted || strcmp(h[j].info.upload_id, a->upload_id) != 0) continue;
        if (obj_umeta_ns(&h[j].info) > obj_umeta_ns(best < 0 ? a : &h[best].info)) best = j;
    }
    if (best >= 0) {
        memcpy(a->umeta, h[best].info.umeta, h[best].info.umeta_len);
        a->umeta_len = h[best].info.umeta_len;
        a->umeta_ns = obj_umeta_ns(&h[best].info);
        *stamp = top;
    }
    free(h);
    return best >= 0;
}

int obj__archive(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *cur,
                 uint64_t stamp_ns)
{
    obj_info_t a;
    char pos[OBJ_VID_LEN + 1];
    int first_err = 0;
    obj_info_copy(&a, cur);
    a.umeta_ns = obj_umeta_ns(cur); /* (a copy: its metadata is cur's, not of its stamp) */
    a.stamp_ns = stamp_ns;
    obj__vid_of(pos, cur->mtime_ns);
    /*
     * Newer wins here too (it was unconditional), and never over the version's own
     * tombstone (SHARD_IF_KEPT): a store that refuses holds the same version kept by a later
     * commit, or the tombstone of its delete by id since this commit read it as current
     * (current again for a moment: promoted by a delete of the version above it, racing).
     * Either way there is nothing to keep: refused counts as kept. Written over that
     * tombstone, the deleted version came back, its blocks gone (a probe: a PUT, a marker
     * and deletes by id at once, 10 rounds in 30). Until every node reads the mode (a
     * rolling upgrade: an older build refuses it as corrupt, and the archive would fail
     * there), newer wins alone, as before it.
     */
    shard_cond_t newer = {.mode = obj__feature(s, WL_FEAT_IF_KEPT) ? SHARD_IF_KEPT : SHARD_IF_NEWER,
                          .stamp = stamp_ns};
    memcpy(newer.upload, cur->upload_id, sizeof(newer.upload));
    int refused = 0;
    int w = obj__write_at_cond(s, bucket, key, pos, &a, NULL, 0, &newer, &refused, &first_err);
    /*
     * A current head copied from this position (a promotion: its metadata older than its
     * stamp), or a store that refused: a rewrite of the version by id may be there, newer
     * than the copy. The stores that hold it refused, but the others (all but a sparse
     * version's copies) took the archive, newer by its stamp, and readers take that: the
     * archive is written again with the rewrite's metadata. A rewrite landing after this
     * read finds the archive there itself (obj_rewrite.c, stale_over).
     */
    if (!obj__enough(s, &a, w + refused)) return first_err ? first_err : ERR_UNRECOVERABLE;
    /* Kept short of some stores (away): the heal puts it back there by its id, noncurrent
     * now (a refusal holds a copy of it already). */
    if (w + refused < (a.sparse ? __builtin_popcount(a.inl) : s->n))
        obj__heal_note(s, bucket, key, obj__vid_or_null(cur));
    uint64_t top = 0;
    for (int again = 0; again < 4 && (refused || obj_umeta_ns(cur) < cur->stamp_ns) &&
                        newer_metadata_at(s, bucket, key, pos, &a, &top);
         again++) {
        a.stamp_ns = (top > a.stamp_ns ? top : a.stamp_ns) + 1;
        newer.stamp = a.stamp_ns;
        int err2 = 0;
        refused = 0;
        w = obj__write_at_cond(s, bucket, key, pos, &a, NULL, 0, &newer, &refused, &err2);
        log_info("event=archive_took_rewrite key=%s version=%s heads=%d refused=%d", key, pos, w,
                 refused);
    }
    return 0;
}

int obj__retire(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v)
{
    obj_info_t t;
    char pos[OBJ_VID_LEN + 1];
    int first_err = 0;
    obj__vid_of(pos, v->mtime_ns);
    obj_info_clear(&t);
    t.deleted = 1;
    t.mtime_ns = v->mtime_ns;
    t.stamp_ns = obj__now_after(v);
    memcpy(t.upload_id, v->upload_id, sizeof(t.upload_id));
    int w = obj__write_at(s, bucket, key, pos, &t, 0, &first_err);
    if (w == s->n) {
        /* No store holds the version any more: the tombstones can go too, later. Until then
         * they refuse an archive of the version by a commit that read it as current before
         * this (obj__archive); at once, such a late archive brought it back. */
        obj__head_drop_note(s, bucket, key, pos);
    } else if (!obj__enough(s, &t, w)) {
        log_warn("event=retire_incomplete key=%s version=%s heads=%d err=%s", key, pos, w,
                 err_name(first_err));
        return first_err && first_err != ERR_NOT_FOUND ? first_err : ERR_UNRECOVERABLE;
    } else {
        /* A store that missed it keeps the version's head: the heal puts the tombstone there
         * too once it is back (obj_heal.c, heal_deleted), then they go. */
        obj__heal_note(s, bucket, key, pos);
    }
    return 0;
}

typedef struct {
    obj_set_t *s;
    const char *bucket, *key;
    obj_noncurrent_fn fn;
    void *arg;
    uint32_t shard;
    char last[OBJ_VID_LEN + 1]; /* the last position seen: a store that fails resumes after it */
    int err, stopped;
} walk_t;

static int walk_one(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    walk_t *w = arg;
    obj_info_t o;
    (void)st;
    if (strcmp(id->key, w->key) != 0) return 1; /* past the key: the end */
    if (!id->version[0] || id->shard != w->shard) return 0;
    if (w->last[0] && strcmp(id->version, w->last) <= 0) return 0;
    int rc = obj__newest_at(w->s, w->bucket, w->key, id->version, &o);
    if (rc == ERR_NOT_FOUND) return 0;
    if (rc) {
        w->err = rc;
        return 1;
    }
    snprintf(w->last, sizeof(w->last), "%s", id->version);
    if (o.deleted && !o.marker) return 0; /* retired */
    if (w->fn(w->arg, &o)) {
        w->stopped = 1;
        return 1;
    }
    return 0;
}

int obj__each_noncurrent(obj_set_t *s, const char *bucket, const char *key, obj_noncurrent_fn fn,
                         void *arg)
{
    walk_t w = {.s = s, .bucket = bucket, .key = key, .fn = fn, .arg = arg};
    /*
     * One store's walk sees every version: each has a head on every store,
     * or (sparse) on the key's m+1 inline stores, which are the first m+1
     * from obj__first_store: a store that fails is replaced by the next.
     */
    uint32_t first = obj__first_store(s, bucket, key);
    for (int j = 0, failed = 0; j < s->n; j++) {
        int i = (int)((first + (uint32_t)j) % (uint32_t)s->n);
        w.shard = (uint32_t)i;
        int rc = s->st[i].ops->list(s->st[i].ctx, bucket, key, NULL, walk_one, &w);
        if (w.err) return w.err;
        if (w.stopped) return 1;
        if (rc >= 0 || rc == ERR_INVAL) return rc < 0 ? rc : 0;
        log_warn("event=list_store_failed shard=%d bucket=%s err=%s", i, bucket, err_name(rc));
        if (++failed > s->m) break;
    }
    return ERR_UNRECOVERABLE;
}

#define MAX_DUPS 4

typedef struct {
    obj_info_t *out;
    obj_info_t *dups; /* stale null versions (room for MAX_DUPS), or NULL: the newest only */
    int ndups, found;
} pick_t;

/*
 * The newest noncurrent null version; older ones (a crash between a
 * Suspended write and the retiring of the null version it replaced) are
 * stale, noted in dups when there is room.
 */
static int pick_null(void *arg, const obj_info_t *v)
{
    pick_t *p = arg;
    if (v->vid[0]) return 0;
    if (!p->found) {
        obj_info_copy(p->out, v);
        p->found = 1;
        return p->dups ? 0 : 1;
    }
    if (p->ndups < MAX_DUPS) obj_info_copy(&p->dups[p->ndups++], v);
    return 0;
}

typedef struct {
    obj_info_t *v;
    int n, cap;
} all_t;

static int pick_all(void *arg, const obj_info_t *v)
{
    all_t *a = arg;
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        a->v = xrealloc(a->v, (size_t)a->cap * sizeof(*a->v));
    }
    obj_info_copy(&a->v[a->n++], v);
    return 0;
}

static int by_position(const void *x, const void *y)
{
    const obj_info_t *a = x, *b = y;
    /* (A position is ~mtime in hex: the newest sorts first.) */
    return a->mtime_ns == b->mtime_ns ? 0 : a->mtime_ns > b->mtime_ns ? -1 : 1;
}

/*
 * Every store's walk, not one as obj__each_noncurrent's: the mover's view, which
 * must not miss a version whose head is not on the first store. A version
 * acknowledged while that store was away (a full head on every store that
 * worked) has none there until healed, and a move's cleanup cut short by a
 * kill can remove it there first: a one-store walk then missed it for
 * good, and the drained pool kept it (a six-node probe killing the mover:
 * a pass that found a key every time, never DRAINED). n walks instead of one.
 */
int obj__noncurrent_all(obj_set_t *s, const char *bucket, const char *key, obj_info_t **out)
{
    all_t a = {0};
    int failed = 0;
    *out = NULL;
    for (int i = 0; i < s->n; i++) {
        walk_t w = {.s = s, .bucket = bucket, .key = key, .fn = pick_all, .arg = &a};
        w.shard = (uint32_t)i;
        int rc = s->st[i].ops->list(s->st[i].ctx, bucket, key, NULL, walk_one, &w);
        if (w.err) {
            free(a.v);
            return w.err;
        }
        if (rc < 0 && rc != ERR_INVAL) {
            log_warn("event=list_store_failed shard=%d bucket=%s err=%s", i, bucket, err_name(rc));
            if (++failed > s->m) {
                free(a.v);
                return ERR_UNRECOVERABLE;
            }
        }
    }
    if (a.n > 1) qsort(a.v, (size_t)a.n, sizeof(*a.v), by_position);
    int n = 0;
    for (int i = 0; i < a.n; i++)
        if (!n || a.v[i].mtime_ns != a.v[n - 1].mtime_ns) {
            if (n != i) obj_info_copy(&a.v[n], &a.v[i]);
            n++;
        }
    *out = a.v;
    return n;
}

int obj__find_null(obj_set_t *s, const char *bucket, const char *key, obj_info_t *out)
{
    pick_t p = {.out = out};
    int rc = obj__each_noncurrent(s, bucket, key, pick_null, &p);
    if (rc < 0) return rc;
    return p.found ? 0 : ERR_NOT_FOUND;
}

int obj__collect_nulls(obj_set_t *s, const char *bucket, const char *key, obj_info_t **out)
{
    obj_info_t first;
    pick_t p = {.out = &first, .dups = xcalloc(MAX_DUPS, sizeof(obj_info_t))};
    int rc = obj__each_noncurrent(s, bucket, key, pick_null, &p);
    *out = NULL;
    if (rc < 0 || !p.found) {
        free(p.dups);
        return rc < 0 ? rc : 0;
    }
    obj_info_t *all = xcalloc((size_t)p.ndups + 1, sizeof(obj_info_t));
    obj_info_copy(&all[0], &first);
    for (int i = 0; i < p.ndups; i++)
        obj_info_copy(&all[i + 1], &p.dups[i]);
    free(p.dups);
    *out = all;
    return p.ndups + 1;
}

int obj_vid_valid(const char *vid)
{
    if (strcmp(vid, "null") == 0) return 1;
    if (strlen(vid) != OBJ_VID_LEN) return 0;
    for (const char *p = vid; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

int obj__locate(obj_set_t *s, const char *bucket, const char *key, const char *vid, obj_info_t *out,
                char *pos)
{
    obj_info_t cur;
    /* Cleared, so "not found" never reads as a delete marker (out->marker) from whatever the
     * caller's out held: GetObjectTagging of a missing version answered 405 or 404 by chance. */
    obj_info_clear(out);
    int rc = obj__newest_head(s, bucket, key, &cur);
    if (rc && rc != ERR_NOT_FOUND) return rc;
    int has_cur = rc == 0 && (!cur.deleted || cur.marker);
    pos[0] = 0;
    if (!vid || (has_cur && (strcmp(vid, "null") == 0 ? !cur.vid[0] : !strcmp(cur.vid, vid)))) {
        if (!has_cur) return ERR_NOT_FOUND;
        obj_info_copy(out, &cur);
        return 0;
    }
    if (strcmp(vid, "null") == 0) {
        if ((rc = obj__find_null(s, bucket, key, out)) == 0) obj__vid_of(pos, out->mtime_ns);
        return rc;
    }
    if (!obj_vid_valid(vid)) return ERR_NOT_FOUND;
    if ((rc = obj__newest_at(s, bucket, key, vid, out)) != 0) return rc;
    if ((out->deleted && !out->marker) || strcmp(out->vid, vid) != 0) {
        obj_info_clear(out); /* a retired or another version's head is no answer */
        return ERR_NOT_FOUND;
    }
    snprintf(pos, OBJ_VID_LEN + 1, "%s", vid);
    return 0;
}

int obj_stat_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                     obj_info_t *info)
{
    obj_set_t *set = obj__route(s, bucket, key);
    char pos[OBJ_VID_LEN + 1];
    /* No lock: a version moves to noncurrent before anything covers it, and to current
     * before its noncurrent head goes, so a reader finds it in one place or the other. */
    int rc = obj__locate(set, bucket, key, vid, info, pos);
    if (rc == ERR_NOT_FOUND && obj_set_pools(s) > 1) {
        /* Routed just before its key moved off a draining pool (obj_move.c): where it is. */
        obj_set_t *now = obj__route(s, bucket, key);
        if (now != set) rc = obj__locate(now, bucket, key, vid, info, pos);
    }
    return rc;
}

int obj_delete_current(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c,
                       obj_versioning_t v, obj_info_t *marker)
{
    if (v == OBJ_UNVERSIONED) {
        if (marker) obj_info_clear(marker);
        return obj_delete_if(s, bucket, key, c); /* (it routes: every pool that holds the key) */
    }
    s = obj__route(s, bucket, key);
    obj_info_t m;
    int first_err = 0;
    obj_info_clear(&m);
    m.deleted = m.marker = 1;
    int rc = obj__new_upload_id(m.upload_id);
    if (rc) return rc;
    int heads = obj__commit_heads(s, bucket, key, c, v, &m, NULL, 0, &first_err);
    if (heads < 0 || !obj__enough(s, &m, heads)) return first_err ? first_err : ERR_UNRECOVERABLE;
    if (marker) obj_info_copy(marker, &m);
    return 0;
}
