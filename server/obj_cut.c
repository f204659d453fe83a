/*
 * obj_cut.c: commits cut short by a kill in the middle of their heads (room of the object
 * layer; map in obj_int.h): telling a Complete's commit cut short from one that completed
 * (obj__cut_short), carrying one through with its identity (obj__roll_forward), and undoing
 * one as its writer's own undo would have (obj__drop_cut_heads: the reaper, an Abort, the
 * heal, a commit that finds a leftover above the version that stands). The rule that counts a
 * leftover's heads for the version it covered lives with the read of what stands, in
 * obj_commit.c (docs/design-notes.md, "A write cut after half its heads").
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int obj__every_store_answered(obj_set_t *s, const char *bucket, const char *key)
{
    uint32_t all = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    if ((obj__unhealthy(s) | obj__refilling(s)) & all) return 0;
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX, stores), ok = 1;
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++)
        if (!h[j].ok && h[j].rc != ERR_NOT_FOUND) ok = 0;
    free(h);
    return ok;
}

/* current_for_commit for a commit of upload cut short: ERR_NOT_FOUND when nothing stands. */
static int standing_past_a_cut(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best)
{
    shard_cond_t anywhere = {.mode = SHARD_IF_AT_MOST};
    int rc = obj__current_for_commit(s, bucket, key, best, &anywhere, 0, NULL, 0);
    if (rc == ERR_UNRECOVERABLE && obj__every_store_answered(s, bucket, key)) rc = ERR_NOT_FOUND;
    return rc;
}

/* Whether a version of upload lies at its own position (pos of mtime): 1, 0, or an error. */
static int kept_at_position(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                            uint64_t mtime_ns)
{
    char pos[OBJ_VID_LEN + 1];
    obj_info_t *v = xmalloc(sizeof(*v));
    obj__vid_of(pos, mtime_ns);
    int vr = obj__newest_at(s, bucket, key, pos, v);
    int out = vr == 0 ? strcmp(v->upload_id, upload) == 0 : vr == ERR_NOT_FOUND ? 0 : vr;
    free(v);
    return out;
}

int obj__cut_short(obj_set_t *s, const char *bucket, const char *key, const char *upload)
{
    obj_info_t *best = xmalloc(sizeof(*best));
    int rc = standing_past_a_cut(s, bucket, key, best);
    if (rc && rc != ERR_NOT_FOUND) {
        free(best);
        return rc;
    }
    int stands = rc == 0, is_mine = stands && strcmp(best->upload_id, upload) == 0 &&
                                    !(best->deleted && !best->marker); /* not its tombstone */
    /* Every store's current head, as the standing version was decided from. */
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX, stores);
    obj__read_heads(s, bucket, key, "", stores, n, h);
    int own = 0, up = -1, below = -1, fresh_other = 0, failed = 0, out;
    uint64_t now = obj__wall_ns();
    for (int j = 0; j < n; j++) {
        if (!h[j].ok) {
            failed += h[j].rc != ERR_NOT_FOUND;
            continue;
        }
        const obj_info_t *o = &h[j].info;
        int above = !stands || obj__newer(o, best), tomb = o->deleted && !o->marker;
        if (strcmp(o->upload_id, upload) == 0 && !tomb) {
            /* Its own heads, at any stamp (a rewrite of its tags cut short splits them). */
            if (is_mine && strcmp(o->vid, best->vid) == 0) own++;
            int *top = above ? &up : &below;
            if (*top < 0 || obj__newer(o, &h[*top].info)) *top = j;
        } else if (above && o->stamp_ns + OBJ__COMMIT_STALE_NS > now) {
            fresh_other = 1;
        }
    }
    if (is_mine) {
        /* It stands on k heads of its own; by the failing stores' credit alone (they may hold
         * nothing of it), that cannot be told. */
        out = own >= s->k ? 0 : ERR_UNRECOVERABLE;
    } else if (up < 0 && below >= 0 && best->vid[0]) {
        /*
         * Only heads of it below a version that stands: completed, then replaced, when it
         * stood; in a versioned bucket the version that replaced it kept it at its own
         * position. None there: it never stood (its stores missed the later write), and a
         * 200 would name a version nobody finds.
         */
        out = kept_at_position(s, bucket, key, upload, h[below].info.mtime_ns);
        out = out < 0 ? out : out ? 0 : 1;
    } else if (up < 0) {
        /* No head of it above what stands: completed, then replaced (unversioned: nothing
         * tells a head its stores missed the later write over apart). A store that failed
         * its read may hold one above: cannot tell. */
        out = failed ? ERR_UNRECOVERABLE : 0;
    } else if (fresh_other || h[up].info.stamp_ns + OBJ__COMMIT_STALE_NS > now) {
        /* Another writer's head in flight above what stands, or its own (a closer that
         * outlived its bounds, or a resumer through another node, still writing): wait. */
        out = ERR_THROTTLED;
    } else {
        /*
         * A head of it above what stands is its commit cut short, or a copy of a version of
         * it that stood, kept as noncurrent, then promoted back by a delete of the version
         * above it (that promotion cut short): such a copy has its version's mtime, and the
         * version is still at its own position.
         */
        out = kept_at_position(s, bucket, key, upload, h[up].info.mtime_ns);
        out = out < 0 ? out : out ? 0 : 1;
    }
    free(h);
    free(best);
    return out;
}

int obj__roll_forward(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                      const obj_cond_t *cond, obj_versioning_t v, obj_info_t *info, int *first_err)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX, stores), up = -1;
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++)
        if (h[j].ok && strcmp(h[j].info.upload_id, upload) == 0 &&
            !(h[j].info.deleted && !h[j].info.marker) &&
            (up < 0 || obj__newer(&h[j].info, &h[up].info)))
            up = j;
    int heads = -1, src = ERR_NOT_FOUND;
    obj_info_t *best = xmalloc(sizeof(*best));
    if (up >= 0) src = standing_past_a_cut(s, bucket, key, best);
    if (up < 0 || (src == 0 && !obj__newer(&h[up].info, best))) {
        /* Nothing of it left, or only below a version that stands (its stores missed that
         * later write): a commit of its own. */
        *first_err = ERR_NOT_FOUND;
    } else if (src && src != ERR_NOT_FOUND) {
        *first_err = src;
    } else {
        /* A commit like any other (the key's lock, what stands kept or dropped, the condition,
         * every bound), its identity kept. */
        obj_info_copy(info, &h[up].info);
        heads = obj__commit_heads_keep(s, bucket, key, cond, v, info, first_err);
        log_info("event=commit_rolled_forward key=%s upload=%s heads=%d", key, upload, heads);
        if (heads == -1 && *first_err == ERR_NOT_FOUND) *first_err = ERR_UNRECOVERABLE;
        /* Short and undone: but not where the undo could not reach (a store away), and the cut
         * heads there still name the manifest, which must stay (a fourth review). */
        if (heads >= 0 && !obj__enough(s, info, heads)) {
            if (!*first_err) *first_err = ERR_UNRECOVERABLE;
            heads = OBJ__COMMIT_IN_DOUBT;
        }
    }
    free(best);
    free(h);
    return heads;
}

/*
 * The version a commit of upload cut short covered, when none stands now (it lost heads to
 * the cut: a small one's copy, or as many heads as the cut left): of the other versions at
 * the current position, the one with the most heads, the newer on a tie. 0 or ERR_NOT_FOUND.
 */
static int covered_version(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                           obj_info_t *out)
{
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, UINT32_MAX, stores), top = -1, most = 0;
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++) {
        if (!h[j].ok || strcmp(h[j].info.upload_id, upload) == 0) continue;
        int c = 0;
        for (int i = 0; i < n; i++)
            c += h[i].ok && h[i].info.stamp_ns == h[j].info.stamp_ns &&
                 strcmp(h[i].info.upload_id, h[j].info.upload_id) == 0;
        if (c > most || (c == most && obj__newer(&h[j].info, &h[top].info))) {
            top = j;
            most = c;
        }
    }
    if (top >= 0) obj_info_copy(out, &h[top].info);
    free(h);
    return top >= 0 ? 0 : ERR_NOT_FOUND;
}

int obj__drop_cut_heads(obj_set_t *s, const char *bucket, const char *key, const char *upload)
{
    return obj__drop_cut_heads_at(s, bucket, key, upload, 0);
}

int obj__drop_cut_heads_at(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                           uint64_t at)
{
    obj_info_t *best = xmalloc(sizeof(*best)), *cut = xmalloc(sizeof(*cut));
    int rc = standing_past_a_cut(s, bucket, key, best);
    /* Nothing stands: what the cut covered goes back where its heads went, as the commit's own
     * undo would have put it (a small version's copy, bytes and all). */
    if (rc == ERR_NOT_FOUND && covered_version(s, bucket, key, upload, best) == 0) rc = 0;
    void *bytes = NULL;
    if (rc == 0 && strcmp(best->upload_id, upload) == 0) {
        rc = ERR_BUSY; /* it stands now: not cut short */
    } else if (rc == 0 && !best->deleted && best->inl && best->size &&
               obj__inline_load(s, bucket, key, best, bytes = xmalloc(best->size)) != 0) {
        /*
         * The small version to put back cannot be read now (its last copy failing): its cut
         * heads stay, and count for it, until it can. Removed without it (undo_heads' fallback
         * for a version replaced meanwhile), they left it short of standing, and a create-only
         * PUT went over it.
         */
        log_warn("event=cut_heads_kept key=%s upload=%s: the version they covered cannot be "
                 "read to put back",
                 key, upload);
        rc = ERR_UNRECOVERABLE;
    } else if (rc == 0 || rc == ERR_NOT_FOUND) {
        /* As a commit that falls short is undone: the version it covered put back where its
         * heads went (only there: a newer head stays), else the heads removed. */
        obj_info_clear(cut);
        snprintf(cut->upload_id, sizeof(cut->upload_id), "%s", upload);
        rc = obj__undo_heads(s, bucket, key, cut, rc == 0 ? best : NULL, rc == 0 ? bytes : NULL, 0,
                             at)
                 ? ERR_UNRECOVERABLE
                 : 0;
        if (!rc) log_info("event=cut_heads_dropped key=%s upload=%s", key, upload);
    }
    free(bytes);
    free(cut);
    free(best);
    return rc;
}
