/*
 * obj_move.c: draining a pool (room of the object layer; map in obj_int.h).
 *
 * A draining pool takes no new keys (obj_pool.c); obj_move_key moves one
 * key it holds, every version, to the pool a new key goes to. The copy
 * keeps each version's identity: version id, Last-Modified, ETag, upload id
 * (a multipart object's manifest and parts move with it, under the same
 * upload id, so ?partNumber reads and composite checksums stay), metadata,
 * ACL and tags, and the head's stamp, which is what orders versions and
 * pools. The source's versions are copied oldest first, each skipped when
 * the target has it already (a move cut short is resumed, not duplicated).
 *
 * While both pools hold the current version (same stamp, same upload id),
 * routing and merged listings take the source's (obj__pool_holder breaks
 * that tie for the draining pool): until the switch stands every request
 * goes there, and the target's copies only follow it (follow_source,
 * obj__forget_copies). Then the source's current head is replaced by a tombstone
 * with that same stamp, conditioned as a commit is (SHARD_IF_AT_MOST: a
 * store that took a newer write refuses), so it never hides anything: a
 * write that reached the source meanwhile stays newest there, the key's
 * pool again, and the next pass moves it. Never a newer tombstone: it would
 * hide the moved copy. The source's noncurrent heads and every moved
 * version's blocks then go.
 *
 * The target's current version, when it is older than the one moved in (a
 * write that landed in the source after an earlier pass had moved the key)
 * is kept as noncurrent first if either is a versioned write, or replaced
 * (a null version over a null version), as a commit would have done.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOVE_CHUNK (4u << 20)

int (*obj__move_between)(void *arg, const char *key);
void *obj__move_between_arg;
int (*obj__move_copied)(void *arg, const char *bucket, const char *key);
void *obj__move_copied_arg;

/* A copy of an internal object done: a test may cut the move there (ERR_BUSY, as a kill). */
static int copied(const char *bucket, const char *key, int rc)
{
    if (!rc && obj__move_copied && obj__move_copied(obj__move_copied_arg, bucket, key))
        return ERR_BUSY;
    return rc;
}

static int same_identity(const obj_info_t *a, const obj_info_t *b)
{
    return a->stamp_ns == b->stamp_ns && strcmp(a->upload_id, b->upload_id) == 0;
}

static int older(const obj_info_t *a, const obj_info_t *b)
{
    return obj__newer(b, a);
}

/*
 * The bytes of src's version v (vid: NULL for the current one) through a
 * reader (checked, rebuilt from parity where a block is missing or rotten)
 * into a writer of dst under v's upload id. *info gets v's identity with
 * the new layout; *w the writer (its blocks durable) for the caller to
 * release once the heads stand, or abort.
 */
static int copy_bytes(obj_set_t *src, obj_set_t *dst, const char *bucket, const char *key,
                      const char *vid, const obj_info_t *v, obj_info_t *info, const void **small,
                      obj_writer_t **wout, uint64_t *bytes)
{
    int err;
    obj_info_t *ri = xmalloc(sizeof(*ri));
    obj_reader_t *r = obj_open_version(src, bucket, key, vid, ri, &err);
    *wout = NULL;
    if (!r) {
        free(ri);
        return err == ERR_NOT_FOUND ? ERR_BUSY : err; /* gone meanwhile: the next pass sees */
    }
    if (!same_identity(ri, v)) { /* another version there now: the next pass */
        obj_close(r);
        free(ri);
        return ERR_BUSY;
    }
    free(ri);
    obj_writer_t *w = obj__put_begin(dst, bucket, key, NULL, 0, &err);
    if (!w) {
        obj_close(r);
        return err;
    }
    obj__put_set_upload(w, v->upload_id);
    obj_put_size_hint(w, v->size);
    uint8_t *buf = xmalloc(MOVE_CHUNK);
    for (uint64_t off = 0; off < v->size && !err;) {
        size_t n = v->size - off < MOVE_CHUNK ? (size_t)(v->size - off) : MOVE_CHUNK;
        if ((err = obj_read(r, off, buf, n)) == 0) err = obj_put_write(w, buf, n);
        off += n;
    }
    free(buf);
    obj_close(r);
    obj_info_copy(info, v);
    if (!err) err = obj__put_finish(w, info, small);
    /* What was read must be what was written: the ETag of a plain version is its MD5. */
    if (!err && !v->multipart && strcmp(info->etag, v->etag) != 0 && strlen(v->etag) == 32) {
        log_error("event=move_etag_mismatch key=%s upload=%s", key, v->upload_id);
        err = ERR_CORRUPT;
    }
    snprintf(info->etag, sizeof(info->etag), "%s", v->etag);
    if (err) {
        /* Its blocks stay (unreferenced space): they are named by the version's own upload
         * id, which a copy another pass (or node) made may use; dropped, it would lose them. */
        obj__put_release(w);
        return err;
    }
    *bytes += v->size;
    *wout = w;
    return 0;
}

/*
 * The copy of info at pos made whole on every store of dst, heads and blocks (a heal of that
 * version: missing ones written, rotten ones rebuilt). The source's copy, which the move
 * drops, was whole; a copy acknowledged at the write quorum and never noted for the heal
 * queue stayed short until the scanner's weekly pass, and a drive lost meanwhile took
 * objects with it (a cluster probe: 9 of 60 at a write quorum of k). No client waits on a
 * move: a copy that cannot be made whole now (a target store away) keeps the key where it
 * is, and the next pass tries again.
 */
static int make_whole(obj_set_t *dst, const char *bucket, const char *key, const char *pos,
                      const obj_info_t *info)
{
    obj_heal_report_t rep = {0};
    int rc = pos[0] ? obj_heal_version(dst, bucket, key, info->vid[0] ? info->vid : "null", &rep)
                    : obj_heal(dst, bucket, key, &rep);
    if (rc == 0 && rep.failed) rc = ERR_UNRECOVERABLE;
    if (rc) /* (the drain's pass says how many stayed, and why) */
        log_debug("event=move_copy_short key=%s err=%s: the key stays for the next pass", key,
                  err_name(rc));
    return rc;
}

/*
 * A head of info at pos on dst (every store: no sparse heads in a copy), over
 * what over (NULL: a newer head stays) or anything older; then the copy made
 * whole where a store missed a head or a block, or (verify) where an
 * earlier pass may have left it short.
 */
static int put_heads(obj_set_t *dst, const char *bucket, const char *key, const char *pos,
                     obj_info_t *info, const void *data, uint32_t dead, const obj_info_t *over,
                     int verify)
{
    int refused = 0, first_err = 0;
    info->sparse = 0;
    shard_cond_t c = {.mode = SHARD_IF_AT_MOST}, *cond = NULL;
    if (over) {
        c.stamp = over->stamp_ns;
        memcpy(c.upload, over->upload_id, sizeof(c.upload));
        memcpy(c.self, info->upload_id, sizeof(c.self));
        cond = &c;
    }
    int heads =
        obj__write_at_cond(dst, bucket, key, pos, info, data, dead, cond, &refused, &first_err);
    if (refused) return ERR_BUSY; /* a newer head there (a write meanwhile) */
    if (!obj__enough(dst, info, heads)) return first_err ? first_err : ERR_UNRECOVERABLE;
    if (info->deleted) /* a delete marker or a tombstone: heads alone, which a heal passes by */
        return heads < dst->n ? ERR_UNRECOVERABLE : 0;
    if (heads < dst->n || dead || verify) return make_whole(dst, bucket, key, pos, info);
    return 0;
}

/* An object of an internal bucket (a manifest, a part), current version, unless dst has it. */
static int copy_internal(obj_set_t *src, obj_set_t *dst, const char *bucket, const char *key,
                         uint64_t *bytes)
{
    obj_info_t *v = xmalloc(sizeof(*v)), *have = xmalloc(sizeof(*have));
    int rc = obj__newest_head(src, bucket, key, v);
    if (rc == 0 && obj__newest_head(dst, bucket, key, have) == 0 && same_identity(have, v) &&
        !have->deleted) {
        /* There already (its bytes were durable before any head): the heads again, in case a
         * crash left them on fewer stores than a quorum, and the copy made whole. */
        rc = put_heads(dst, bucket, key, "", have, NULL, 0, NULL, 1);
    } else if (rc == 0) {
        obj_writer_t *w = NULL;
        const void *small = NULL;
        if ((rc = copy_bytes(src, dst, bucket, key, NULL, v, have, &small, &w, bytes)) == 0) {
            rc = put_heads(dst, bucket, key, "", have, small, obj__put_dead(w), NULL, 0);
            obj__put_release(w); /* (on failure its blocks stay: see copy_bytes) */
        }
    }
    free(v);
    free(have);
    return rc;
}

/*
 * Version v of src at pos ("" current, else its noncurrent position) to
 * the same position on dst, unless dst holds it there already.
 */
static int copy_version(obj_set_t *src, obj_set_t *dst, const char *bucket, const char *key,
                        const char *pos, const obj_info_t *v, const obj_info_t *over,
                        obj_move_report_t *rep)
{
    obj_info_t *info = xmalloc(sizeof(*info));
    int rc = 0;
    if (obj__newest_at(dst, bucket, key, pos, info) == 0 && same_identity(info, v) &&
        info->deleted == v->deleted) {
        /* There already (found on one store at least): its heads again, to a quorum, and the
         * copy made whole. */
        rc = put_heads(dst, bucket, key, pos, info, NULL, 0, over, 1);
        free(info);
        return rc;
    }
    if (v->deleted) {
        obj_info_copy(info, v); /* a delete marker: a head alone */
        rc = put_heads(dst, bucket, key, pos, info, NULL, 0, over, 0);
    } else if (v->multipart) {
        int *parts = NULL;
        uint64_t *sizes = NULL;
        char(*tags)[OBJ__PART_TAG_LEN + 1] = NULL;
        /* The manifest first: in the target, parts that no manifest names are the reaper's
         * (obj_reap.c), and a move's length has no bound. A move cut short leaves space. */
        if ((rc = obj__read_manifest(src, v->upload_id, v->nparts, &parts, &sizes, &tags)) == 0 &&
            (rc = copied(MPU_MANIFEST, v->upload_id,
                         copy_internal(src, dst, MPU_MANIFEST, v->upload_id, &rep->bytes))) == 0) {
            for (int i = 0; i < v->nparts && !rc; i++) {
                char pk[OBJ__PART_KEY_MAX];
                obj__part_key(pk, sizeof(pk), v->upload_id, parts[i], tags[i]);
                rc = copied(MPU_PARTS, pk, copy_internal(src, dst, MPU_PARTS, pk, &rep->bytes));
            }
        }
        free(parts);
        free(sizes);
        free(tags);
        obj_info_copy(info, v);
        if (!rc) rc = put_heads(dst, bucket, key, pos, info, NULL, 0, over, 0);
    } else {
        obj_writer_t *w = NULL;
        const void *small = NULL;
        const char *vid = pos[0] ? (v->vid[0] ? v->vid : "null") : NULL;
        rc = copy_bytes(src, dst, bucket, key, vid, v, info, &small, &w, &rep->bytes);
        if (!rc) {
            rc = put_heads(dst, bucket, key, pos, info, small, obj__put_dead(w), over, 0);
            obj__put_release(w); /* (on failure its blocks stay: see copy_bytes) */
        }
    }
    free(info);
    if (!rc) rep->versions++;
    return rc;
}

/* Remove src's head records at pos on every store (no tombstone: see the top). */
static void drop_heads(obj_set_t *src, const char *bucket, const char *key, const char *pos)
{
    for (int i = 0; i < src->n; i++) {
        drive_id_t id = {bucket, key, pos, (uint32_t)i};
        (void)src->st[i].ops->del(src->st[i].ctx, &id);
    }
}

/*
 * Whether the key was deleted in src after cur was read there: nothing
 * stands (an unversioned DELETE through another node removed its heads, and
 * looked for a copy in the other pools before this one's copy landed), or a
 * newer tombstone does.
 */
static int deleted_in_src(obj_set_t *src, const char *bucket, const char *key,
                          const obj_info_t *cur)
{
    obj_info_t *h = xmalloc(sizeof(*h));
    int in_way = 0, rc = obj__standing(src, bucket, key, h, &in_way);
    int gone = rc == ERR_NOT_FOUND ? !in_way
               : rc == 0           ? h->deleted && !h->marker && older(cur, h) &&
                               strcmp(h->upload_id, OBJ_MOVED_UPLOAD) != 0
                         : 0;
    free(h);
    return gone;
}

/* Versions whose space goes once the key's lock is released (drops take key locks). */
typedef struct {
    struct drop {
        obj_set_t *set;
        obj_info_t v;
    } * d;
    int n, cap;
} drops_t;

static void drop_later(drops_t *l, obj_set_t *set, const obj_info_t *v)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4;
        l->d = xrealloc(l->d, (size_t)l->cap * sizeof(*l->d));
    }
    l->d[l->n].set = set;
    obj_info_copy(&l->d[l->n++].v, v);
}

static int in_list(const obj_info_t *l, int n, const obj_info_t *v)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(l[i].upload_id, v->upload_id) && !strcmp(l[i].vid, v->vid)) return 1;
    return 0;
}

/*
 * A version deleted by its id through the source while it was copied (a
 * delete routed there before the copy stood) goes from the target too; one
 * whose tags or ACL were rewritten there meanwhile gets them. h: scratch.
 */
static void follow_source(obj_set_t *src, obj_set_t *dst, const char *bucket, const char *key,
                          const obj_info_t *nc, int nnc, obj_info_t *h, drops_t *drops)
{
    for (int i = 0; i < nnc; i++) {
        char pos[OBJ_VID_LEN + 1];
        obj__vid_of(pos, nc[i].mtime_ns);
        int hr = obj__newest_at(src, bucket, key, pos, h);
        if (hr == ERR_NOT_FOUND || (hr == 0 && h->deleted && !h->marker)) {
            if (obj__newest_at(dst, bucket, key, pos, h) == 0 && same_identity(h, &nc[i])) {
                (void)obj__retire(dst, bucket, key, &nc[i]);
                if (!nc[i].deleted) drop_later(drops, dst, &nc[i]);
            }
        } else if (hr == 0 && !strcmp(h->upload_id, nc[i].upload_id) &&
                   h->stamp_ns > nc[i].stamp_ns) {
            obj_info_t *d = xmalloc(sizeof(*d));
            if (obj__newest_at(dst, bucket, key, pos, d) == 0 &&
                !strcmp(d->upload_id, h->upload_id) && d->stamp_ns < h->stamp_ns) {
                memcpy(d->umeta, h->umeta, h->umeta_len);
                d->umeta_len = h->umeta_len;
                d->stamp_ns = h->stamp_ns;
                d->umeta_ns = h->umeta_ns;
                (void)put_heads(dst, bucket, key, pos, d, NULL, 0, NULL, 0);
            }
            free(d);
        }
    }
}

/*
 * The copy of v at dst's current position taken back where it still stands: a move's
 * tombstone with v's own stamp, so that dst holds nothing of the key there (best effort).
 * t: scratch.
 */
static void take_back(obj_set_t *dst, const char *bucket, const char *key, const obj_info_t *v,
                      obj_info_t *t)
{
    shard_cond_t mine = {.mode = SHARD_IF_UPLOAD};
    memcpy(mine.upload, v->upload_id, sizeof(mine.upload));
    uint64_t mtime = v->mtime_ns, stamp = v->stamp_ns;
    obj_info_clear(t);
    t->deleted = 1;
    t->mtime_ns = mtime;
    t->stamp_ns = stamp;
    memcpy(t->upload_id, OBJ_MOVED_UPLOAD, sizeof(t->upload_id));
    int refused = 0, first_err = 0;
    (void)obj__write_at_cond(dst, bucket, key, "", t, NULL, 0, &mine, &refused, &first_err);
}

/*
 * Before its switch a move's copies are the source's shadow: a version
 * deleted through the source must not stay in them. A move goes back over
 * them (follow_source), but one cut short (its node killed between copy and
 * switch) may never: a key the delete left with no version is not listed
 * for the next pass. Then the version came back, listed and read from the
 * target (a six-node probe killing the mover: 2 versions in a run). So the
 * delete takes them itself: the copy at the target's current position is
 * taken back as a move takes back a refused switch's (its tombstone, same
 * stamp, only where that copy still stands), a noncurrent one retired.
 */
void obj__forget_copies(obj_set_t *s, obj_set_t *from, const char *bucket, const char *key,
                        const obj_info_t *v)
{
    int np = obj_set_pools(s), mine = -1;
    for (int p = 0; p < np && mine < 0; p++)
        if (s->sub[obj__in_pool(s, p, bucket, key)] == from) mine = p;
    if (mine < 0 || !atomic_load(&s->pools[mine].draining)) return;
    char pos[OBJ_VID_LEN + 1];
    obj__vid_of(pos, v->mtime_ns);
    obj_info_t *h = xmalloc(sizeof(*h)), *copy = xmalloc(sizeof(*copy));
    for (int p = 0; p < np; p++) {
        if (p == mine || atomic_load(&s->pools[p].draining)) continue;
        obj_set_t *dst = s->sub[obj__in_pool(s, p, bucket, key)];
        int found = 0;
        pthread_mutex_t *lk = obj__key_lock(dst, bucket, key);
        pthread_mutex_lock(lk);
        if (obj__newest_at(dst, bucket, key, "", h) == 0 && (!h->deleted || h->marker) &&
            !strcmp(h->upload_id, v->upload_id) && !strcmp(h->vid, v->vid)) {
            obj_info_copy(copy, h);
            found = 1;
            take_back(dst, bucket, key, copy, h);
        }
        if (obj__newest_at(dst, bucket, key, pos, h) == 0 && (!h->deleted || h->marker) &&
            !strcmp(h->upload_id, v->upload_id) && !strcmp(h->vid, v->vid)) {
            if (!found) obj_info_copy(copy, h);
            found = 1;
            (void)obj__retire(dst, bucket, key, h);
        }
        pthread_mutex_unlock(lk);
        if (found) {
            log_info("event=move_copy_forgotten key=%s version=%s", key,
                     v->vid[0] ? v->vid : "null");
            if (!copy->deleted) obj__drop_version(dst, bucket, key, copy);
        }
    }
    free(h);
    free(copy);
}

/*
 * The pool key goes to: an active pool that holds a head of it already (an
 * earlier pass's copies, under other weights), else the one a new key goes to.
 */
static int target_pool(obj_set_t *s, int np, int from, const char *bucket, const char *key)
{
    obj_info_t *h = xmalloc(sizeof(*h));
    int to = -1;
    for (int p = 0; p < np && to < 0; p++)
        if (p != from && !atomic_load(&s->pools[p].draining) &&
            obj__newest_head(s->sub[obj__in_pool(s, p, bucket, key)], bucket, key, h) == 0 &&
            !obj__moved_mark(h))
            to = p;
    free(h);
    return to >= 0 ? to : obj__new_key_pool(s, np, bucket, key);
}

int obj_move_key(obj_set_t *s, int from, const char *bucket, const char *key,
                 obj_move_report_t *rep)
{
    drops_t drops = {0};
    int np = obj_set_pools(s);
    if (!s->nsub || from < 0 || from >= np || !atomic_load(&s->pools[from].draining))
        return ERR_INVAL;
    int to = target_pool(s, np, from, bucket, key);
    if (to == from) return ERR_INVAL; /* every pool draining: nowhere to go */
    obj_set_t *src = s->sub[obj__in_pool(s, from, bucket, key)];
    obj_set_t *dst = s->sub[obj__in_pool(s, to, bucket, key)];
    /* A copy to a set with a store away could not be made whole (make_whole): the key waits,
     * and nothing is written that would only be taken back. */
    if (!obj_set_all_up(dst)) {
        rep->waiting = 1;
        return ERR_BUSY;
    }
    obj_info_t *cur = xmalloc(sizeof(*cur)), *dcur = xmalloc(sizeof(*dcur)), *nc = NULL,
               *dnc = NULL, *dprev = xmalloc(sizeof(*dprev));
    int nnc = 0, ndnc = 0, in_way = 0, dst_in_way = 0, has_cur, rc;
    pthread_mutex_t *lk = obj__key_lock(src, bucket, key);
    pthread_mutex_lock(lk);
    rc = obj__standing(src, bucket, key, cur, &in_way);
    if (rc == 0 && in_way) rc = ERR_BUSY; /* a commit in flight: the next pass */
    if (rc && rc != ERR_NOT_FOUND) goto out;
    int has_head = rc == 0;
    has_cur = has_head && (!cur->deleted || cur->marker);
    if ((nnc = obj__noncurrent_all(src, bucket, key, &nc)) < 0) {
        rc = nnc;
        nnc = 0;
        goto out;
    }
    rc = 0;
    /* Nothing here: no head. (A plain tombstone may hide a copy an earlier attempt left in
     * the target: its current version deleted by id meanwhile.) */
    if (!has_cur && nnc == 0 && (!has_head || obj__moved_mark(cur))) goto out;
    if (has_head && obj__moved_mark(cur)) {
        /* Switched: the target is the key's (what it holds may differ by now). Noncurrent
         * heads a cut-short cleanup left here only go. */
        for (int i = 0; i < nnc; i++) {
            char pos[OBJ_VID_LEN + 1];
            obj__vid_of(pos, nc[i].mtime_ns);
            drop_heads(src, bucket, key, pos);
            if (!nc[i].deleted) drop_later(&drops, src, &nc[i]);
        }
        /* And the switched version's own space here, when the cleanup was cut before it: its
         * identity is the target's current version's (the same stamp). */
        int iw = 0;
        if (obj__standing(dst, bucket, key, dcur, &iw) == 0 && dcur->stamp_ns == cur->stamp_ns &&
            !dcur->deleted)
            drop_later(&drops, src, dcur);
        goto out;
    }
    int drc = obj__standing(dst, bucket, key, dcur, &dst_in_way);
    if (drc && drc != ERR_NOT_FOUND) {
        rc = drc;
        goto out;
    }
    if (dst_in_way) {
        rc = ERR_BUSY;
        goto out;
    }
    /*
     * Until its switch stands, the source is the key's (routing prefers it on a tie, so
     * every request goes there): the target's copies follow it. A version an interrupted
     * attempt copied and that was deleted by its id through the source since does not
     * stay in the target.
     */
    int tgt_has = drc == 0 && !obj__moved_mark(dcur), tgt_had = tgt_has, copied_cur = 0;
    {
        if ((ndnc = obj__noncurrent_all(dst, bucket, key, &dnc)) < 0) {
            rc = ndnc;
            ndnc = 0;
            goto out;
        }
        for (int i = 0; i < ndnc; i++)
            if (!in_list(nc, nnc, &dnc[i]) &&
                !(has_cur && !strcmp(dnc[i].upload_id, cur->upload_id))) {
                (void)obj__retire(dst, bucket, key, &dnc[i]);
                if (!dnc[i].deleted) drop_later(&drops, dst, &dnc[i]);
            }
    }
    /* Oldest first: an interrupted move leaves the target a prefix of the key's history. */
    int seen_null = has_cur && !cur->vid[0];
    for (int i = nnc - 1; i >= 0; i--) {
        obj_info_t *v = &nc[i];
        /* A copy of the current one (a promotion's), or a null version below another (a
         * crash's leftover): not versions of their own. */
        if (has_cur && !strcmp(v->upload_id, cur->upload_id) && !strcmp(v->vid, cur->vid)) continue;
        if (!v->vid[0]) {
            int newer_null = seen_null;
            for (int j = i - 1; j >= 0 && !newer_null; j--)
                newer_null = !nc[j].vid[0];
            if (newer_null) continue;
        }
        char pos[OBJ_VID_LEN + 1];
        obj__vid_of(pos, v->mtime_ns);
        if ((rc = copy_version(src, dst, bucket, key, pos, v, NULL, rep)) != 0) goto out;
    }
    if (has_head && !has_cur) {
        /* Only noncurrent versions under a tombstone: the target takes the tombstone too
         * (same stamp), or the source's would keep the key (and its reads) there. */
        if (!obj__moved_mark(cur) && (drc == ERR_NOT_FOUND ? nnc > 0 : older(dcur, cur)) &&
            (rc = copy_version(src, dst, bucket, key, "", cur, drc == 0 ? dcur : NULL, rep)) != 0)
            goto out;
        /* (A version it hides there was deleted: its space goes.) */
        if (drc == 0 && older(dcur, cur) && !dcur->deleted && !in_list(nc, nnc, dcur))
            drop_later(&drops, dst, dcur);
    } else if (has_cur && tgt_has && older(cur, dcur) && !in_list(nc, nnc, dcur)) {
        /* A newer version in the target that the source never had (the key in both pools:
         * writes racing over a weight change): the source's current one is history there. */
        if (cur->vid[0] || dcur->vid[0]) {
            char pos[OBJ_VID_LEN + 1];
            obj__vid_of(pos, cur->mtime_ns);
            if ((rc = copy_version(src, dst, bucket, key, pos, cur, NULL, rep)) != 0) goto out;
        }
    } else if (has_cur) {
        /* cur moves in over what the target holds: a copy an earlier attempt made (kept
         * as noncurrent there only if the source keeps it so), or nothing. */
        int drop = 0;
        copied_cur = 1;
        if (tgt_has) obj_info_copy(dprev, dcur);
        if (tgt_has && strcmp(dcur->upload_id, cur->upload_id) != 0 && !dcur->deleted &&
            !in_list(nc, nnc, dcur))
            drop = 1;
        if ((rc = copy_version(src, dst, bucket, key, "", cur, drc == 0 ? dcur : NULL, rep)) != 0)
            goto out;
        if (drop) drop_later(&drops, dst, dcur);
        if (deleted_in_src(src, bucket, key, cur)) {
            /* Not brought back: the copy goes under a newer tombstone (where it landed). */
            obj_info_t *t = dcur;
            obj_info_clear(t);
            t->deleted = 1;
            t->mtime_ns = t->stamp_ns = obj__now_after(cur);
            if ((rc = obj__new_upload_id(t->upload_id)) != 0) goto out;
            shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = cur->stamp_ns};
            memcpy(bound.upload, cur->upload_id, sizeof(bound.upload));
            int refused = 0, first_err = 0;
            int heads =
                obj__write_at_cond(dst, bucket, key, "", t, NULL, 0, &bound, &refused, &first_err);
            if (!refused && obj__enough(dst, t, heads) && !cur->deleted)
                drop_later(&drops, dst, cur);
            /* (And a copy of it that was noncurrent here, or any other version deleted.) */
            follow_source(src, dst, bucket, key, nc, nnc, dcur, &drops);
            log_info("event=move_deleted_meanwhile key=%s", key);
            rc = ERR_BUSY;
            goto out;
        }
    }
    /* Before the switch as well (and after it, below): a crash between the two would leave
     * a version deleted through the source meanwhile in the target for good. */
    follow_source(src, dst, bucket, key, nc, nnc, dcur, &drops);
    if (has_cur && obj__move_between) {
        /* (As another node's write would come: without this node's key lock.) */
        pthread_mutex_unlock(lk);
        int killed = obj__move_between(obj__move_between_arg, key);
        pthread_mutex_lock(lk);
        if (killed) {
            drops.n = 0; /* (a killed mover drops nothing either) */
            rc = ERR_BUSY;
            goto out;
        }
    }
    if (has_cur) {
        /*
         * The switch: the source's current head becomes a tombstone with the moved
         * version's own stamp, only where that version (or something older) stands.
         * Refused or short, it is taken back where it landed: half a switch would not
         * stand, and a commit would take it for a crash's leftover and cover it without
         * keeping the version it hides.
         */
        obj_info_t *t = dcur;
        obj_info_clear(t);
        t->deleted = 1;
        t->mtime_ns = cur->mtime_ns;
        t->stamp_ns = cur->stamp_ns;
        memcpy(t->upload_id, OBJ_MOVED_UPLOAD, sizeof(t->upload_id));
        shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = cur->stamp_ns};
        memcpy(bound.upload, cur->upload_id, sizeof(bound.upload));
        memcpy(bound.self, OBJ_MOVED_UPLOAD, sizeof(bound.self)); /* a cut-short one's, again */
        int refused = 0, first_err = 0;
        int heads =
            obj__write_at_cond(src, bucket, key, "", t, NULL, 0, &bound, &refused, &first_err);
        if (refused || !obj__enough(src, t, heads)) {
            obj__put_back(src, bucket, key, "", cur, t);
            /*
             * And the copy of cur goes from the target's current position (where it still
             * stands): the source stays the key's until a pass switches it, so that what is
             * deleted there meanwhile (a version by its id) is retired from the target's
             * copies by the next pass, not kept as the target's own.
             */
            if (copied_cur) {
                if (tgt_had) {
                    obj__put_back(dst, bucket, key, "", dprev, cur);
                } else {
                    take_back(dst, bucket, key, cur, t);
                }
            }
            rc = refused ? ERR_BUSY : first_err ? first_err : ERR_UNRECOVERABLE;
            goto out;
        }
    }
    follow_source(src, dst, bucket, key, nc, nnc, dcur, &drops);
    /* The source's copies go: noncurrent heads, then every moved version's space. */
    for (int i = 0; i < nnc; i++) {
        char pos[OBJ_VID_LEN + 1];
        obj__vid_of(pos, nc[i].mtime_ns);
        drop_heads(src, bucket, key, pos);
    }
    for (int i = 0; i < nnc; i++)
        if (!nc[i].deleted && !(has_cur && strcmp(nc[i].upload_id, cur->upload_id) == 0))
            drop_later(&drops, src, &nc[i]);
    if (has_cur && !cur->deleted) drop_later(&drops, src, cur);
out:
    pthread_mutex_unlock(lk);
    for (int i = 0; i < drops.n; i++)
        obj__drop_version(drops.d[i].set, bucket, key, &drops.d[i].v);
    free(drops.d);
    if (rc && rc != ERR_BUSY) log_debug("event=move_failed key=%s err=%s", key, err_name(rc));
    free(nc);
    free(dnc);
    free(cur);
    free(dcur);
    free(dprev);
    return rc;
}
