/*
 * obj_list.c: listing a bucket's objects (room of the object layer; map in
 * obj_int.h). Every store holds a head of every key, so one store's ordered
 * index lists the bucket; each key it yields is resolved to its newest head
 * over the set (obj_stat), delete markers skipped.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_list_fn fn;
    void *arg;
    uint32_t shard; /* the store being listed holds heads with this shard index */
    char *last;     /* the last key handed to fn: a store that fails resumes after it */
    int err;        /* a head that could not be read: the listing cannot go on */
} list_t;

static int list_head(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    list_t *l = arg;
    obj_info_t info;
    (void)st;
    /* Each store holds one head per key; the listed store's own stands for all. */
    if (id->version[0] || id->shard != l->shard) return 0;
    int rc = obj_stat(l->s, l->bucket, id->key, &info);
    if (rc == ERR_NOT_FOUND) return 0; /* deleted */
    if (rc) {
        l->err = rc;
        return 1;
    }
    free(l->last);
    l->last = xstrdup(id->key);
    return l->fn(l->arg, id->key, &info);
}

int obj_list(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
             obj_list_fn fn, void *arg)
{
    list_t l = {s, bucket, fn, arg, 0, NULL, 0};
    int rc = ERR_UNRECOVERABLE;
    /*
     * One store lists (heads are on every store); when it fails mid-way the
     * next one goes on after the last key delivered, so nothing is skipped
     * or repeated. Only when more than m stores fail is the listing lost.
     */
    for (int i = 0, failed = 0; i < s->n; i++) {
        l.shard = (uint32_t)i;
        l.err = 0;
        rc = s->st[i].ops->list(s->st[i].ctx, bucket, prefix, l.last ? l.last : after, list_head,
                                &l);
        if (l.err) {
            rc = l.err;
            break;
        }
        if (rc >= 0 || rc == ERR_INVAL) break;
        log_warn("event=list_store_failed shard=%d bucket=%s err=%s", i, bucket, err_name(rc));
        if (++failed > s->m) {
            rc = ERR_UNRECOVERABLE;
            break;
        }
    }
    free(l.last);
    return rc;
}

/* ---- versions ---- */

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_version_fn fn;
    void *arg;
    uint32_t shard;
    const char *only_key; /* the walk of one key (the first of a listing after a version) */
    const char *gate_pos; /* ... whose versions count only past this position ("": current) */
    char *cur_key;        /* the key being walked, and its current version (for duplicates) */
    obj_info_t cur;       /* valid when has_cur */
    int has_cur, seen_null;
    char *last_key; /* the last head looked at: a store that fails resumes after it */
    char last_pos[OBJ_VID_LEN + 1];
    int err, stopped;
} vlist_t;

static int list_version(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    vlist_t *l = arg;
    obj_info_t o;
    (void)st;
    if (l->only_key && strcmp(id->key, l->only_key) != 0) return 1; /* the key's walk ends */
    if (id->shard != l->shard) return 0;
    if (l->last_key) {
        int c = strcmp(id->key, l->last_key);
        if (c < 0 || (c == 0 && strcmp(id->version, l->last_pos) <= 0)) return 0;
    }
    int rc = obj__newest_at(l->s, l->bucket, id->key, id->version, &o);
    if (rc && rc != ERR_NOT_FOUND) {
        l->err = rc;
        return 1;
    }
    if (!l->last_key || strcmp(l->last_key, id->key) != 0) {
        free(l->last_key);
        l->last_key = xstrdup(id->key);
    }
    snprintf(l->last_pos, sizeof(l->last_pos), "%s", id->version);
    if (!l->cur_key || strcmp(l->cur_key, id->key) != 0) {
        free(l->cur_key);
        l->cur_key = xstrdup(id->key);
        l->has_cur = l->seen_null = 0;
    }
    if (rc || (o.deleted && !o.marker)) return 0; /* nothing there (a tombstone) */
    int latest = !id->version[0];
    if (latest) {
        obj_info_copy(&l->cur, &o);
        l->has_cur = 1;
    } else if (l->has_cur && strcmp(o.upload_id, l->cur.upload_id) == 0 &&
               strcmp(o.vid, l->cur.vid) == 0) {
        return 0; /* a noncurrent copy of the current version (obj_version.c) */
    } else if (!o.vid[0] && l->seen_null) {
        return 0; /* a null version below the null one: stale (a crash's leftover) */
    }
    if (!o.vid[0]) l->seen_null = 1;
    /* Before the marker? By the version's own position: the current head may be a version
     * promoted since the marker was handed out, and must not be skipped for being current. */
    if (l->gate_pos) {
        char here[OBJ_VID_LEN + 1];
        obj__vid_of(here, o.mtime_ns);
        if (strcmp(here, l->gate_pos) <= 0) return 0;
    }
    if (l->fn(l->arg, id->key, &o, latest)) {
        l->stopped = 1;
        return 1;
    }
    return 0;
}

/* One ordered walk, on the first store that can give it whole (failover as obj_list). */
static int walk_versions(vlist_t *l, const char *prefix, const char *after)
{
    for (int i = 0, failed = 0; i < l->s->n; i++) {
        l->shard = (uint32_t)i;
        l->err = 0;
        int rc = l->s->st[i].ops->list(l->s->st[i].ctx, l->bucket, prefix, after, list_version, l);
        if (l->err) return l->err;
        if (l->stopped) return 1;
        if (rc >= 0) return 0;
        if (rc == ERR_INVAL) return rc;
        log_warn("event=list_store_failed shard=%d bucket=%s err=%s", i, l->bucket, err_name(rc));
        if (++failed > l->s->m) break;
    }
    return ERR_UNRECOVERABLE;
}

int obj_list_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
                      const char *after_vid, obj_version_fn fn, void *arg)
{
    vlist_t *l = xcalloc(1, sizeof(*l));
    int rc = 0;
    l->s = s;
    l->bucket = bucket;
    l->fn = fn;
    l->arg = arg;
    if (after && after[0] && after_vid && strncmp(after, prefix, strlen(prefix)) == 0) {
        /*
         * The rest of `after`'s versions first, then the keys after it. Versions
         * sort by position (a version id is its position), so the marker need
         * not exist any more: the walk goes on past where it was. The null
         * version's position is looked up; gone, the key is walked whole.
         */
        char pos[OBJ_VID_LEN + 1] = "";
        if (strcmp(after_vid, "null") == 0) {
            obj_info_t *nul = xmalloc(sizeof(*nul));
            if (obj__locate(s, bucket, after, "null", nul, pos) == 0)
                obj__vid_of(pos, nul->mtime_ns);
            else
                pos[0] = 0;
            free(nul);
        } else {
            snprintf(pos, sizeof(pos), "%s", after_vid);
        }
        l->only_key = after;
        l->gate_pos = pos;
        rc = walk_versions(l, after, NULL);
        l->only_key = NULL;
        l->gate_pos = NULL;
    }
    if (rc == 0) rc = walk_versions(l, prefix, after);
    free(l->cur_key);
    free(l->last_key);
    free(l);
    return rc;
}
