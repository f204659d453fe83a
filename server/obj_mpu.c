/*
 * obj_mpu.c: multipart uploads (room of the object layer; map in
 * obj_int.h): create, parts, abort, listings. Complete is a room of its own
 * (obj_mpu_complete.c), as is the upload's record (obj_mpu_record.c).
 *
 * An upload is an object of its own in the internal bucket MPU_UPLOADS
 * (key: the upload id; body "bucket\nkey" while it is open; its content
 * type and user metadata are the final object's). Each upload of a part is
 * an object in MPU_PARTS, key "<upload>/<part>.<tag>" (obj__part_key), the
 * tag fresh for each: a part uploaded again is a second object, and the
 * latest of them (by commit stamp) is the part. No upload of a part ever
 * replaces another, so the one a Complete took stays what its manifest
 * names, whatever lands after it (an UploadPart through another node: the
 * upload's lock orders one node's calls only).
 *
 * The upload's lock (obj__mpu_lock) makes a part's commit, Complete and
 * Abort of one upload exclude each other, so that a part that finishes
 * after an abort or a complete is refused instead of left behind. One that
 * commits through another node after the close is named by no manifest and
 * no open upload: the reaper takes it (obj_reap.c, parts). A part's commit
 * checks that the record still has its open size (obj__put_begin), so one
 * that lands after a Complete's close through another node is refused too.
 *
 * An Abort closes the upload (a conditional delete marker on its record:
 * one closer wins across nodes), then drops its parts. One that finds a
 * Complete cut short by a kill (a closing record) takes the close over
 * instead, once its closer is surely gone, and leaves the parts to the
 * reaper (abort_closing).
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int obj__put_small(obj_set_t *s, const char *bucket, const char *key, const void *body, size_t len,
                   const char *ctype, const char *umeta, size_t umeta_len, obj_info_t *out)
{
    int err;
    obj_writer_t *w = obj_put_begin(s, bucket, key, &err);
    if (!w) return err;
    if ((err = obj_put_write(w, body, len)) != 0) {
        obj_put_abort(w);
        return err;
    }
    return obj_put_commit(w, ctype, umeta, umeta_len, out);
}

/* The upload record must exist, be for bucket/key, and be open. */
static int mpu_check(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                     obj_info_t *rec)
{
    int rc = obj__upload_state(s, bucket, key, upload, rec, NULL, NULL);
    return rc > 0 ? ERR_NOT_FOUND : rc;
}

int obj_mpu_upload_stat(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                        obj_info_t *rec)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    return mpu_check(s, bucket, key, upload_id, rec);
}

int obj_mpu_create(obj_set_t *s, const char *bucket, const char *key, const char *content_type,
                   const char *umeta, size_t umeta_len, char upload_id[33])
{
    s = obj__route(s, bucket, key);
    /*
     * The time first: a key's uploads sort by id in the order they began, the order
     * ListMultipartUploads gives them in, and its upload-id-marker resumes after an id
     * that need not exist any more (S3: the uploads of the key-marker's key with an id
     * greater than it).
     */
    char rnd[33];
    int rc = obj__new_upload_id(rnd);
    if (rc) return rc;
    snprintf(upload_id, 33, "%016llx%.16s", (unsigned long long)obj__wall_ns(), rnd);
    size_t len;
    char *body = obj__upload_record(bucket, key, NULL, 0, &len);
    rc = obj__put_small(s, MPU_UPLOADS, upload_id, body, len, content_type, umeta, umeta_len, NULL);
    free(body);
    return rc;
}

obj_writer_t *obj_mpu_part_begin(obj_set_t *s, const char *bucket, const char *key,
                                 const char *upload_id, int part, int *err)
{
    obj_info_t rec;
    return obj_mpu_part_begin_rec(s, bucket, key, upload_id, part, &rec, err);
}

obj_writer_t *obj_mpu_part_begin_rec(obj_set_t *s, const char *bucket, const char *key,
                                     const char *upload_id, int part, obj_info_t *rec, int *err)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    char pk[OBJ__PART_KEY_MAX], tag[OBJ__PART_TAG_LEN + 1];
    if (part < 1 || part > OBJ_MPU_MAX_PARTS) {
        *err = ERR_INVAL;
        return NULL;
    }
    if ((*err = mpu_check(s, bucket, key, upload_id, rec)) != 0) return NULL;
    if ((*err = obj__new_upload_id(tag)) != 0) return NULL;
    obj__part_key(pk, sizeof(pk), upload_id, part, tag);
    return obj__put_begin(s, MPU_PARTS, pk, upload_id, rec->size, err);
}

typedef struct {
    obj__part_fn fn;
    void *arg;
} each_t;

static int each_one(void *arg, const char *key, const obj_info_t *info)
{
    each_t *e = arg;
    char tag[OBJ__PART_TAG_LEN + 1];
    int part = obj__part_of_key(key, tag);
    return e->fn(e->arg, part, tag, key, info);
}

int obj__each_part_of(obj_set_t *s, const char *upload, int wide, obj__part_fn fn, void *arg)
{
    char prefix[40];
    each_t e = {fn, arg};
    snprintf(prefix, sizeof(prefix), "%s/", upload);
    return obj__list(s, MPU_PARTS, prefix, NULL, NULL, 0, wide, each_one, &e);
}

int obj__later_part_upload(uint64_t stamp, const char *tag, uint64_t than_stamp,
                           const char *than_tag)
{
    return stamp > than_stamp || (stamp == than_stamp && strcmp(tag, than_tag) > 0);
}

static int latest_stamp(void *arg, const char *key, const obj_info_t *info)
{
    uint64_t *latest = arg;
    (void)key;
    if (info && info->stamp_ns > *latest) *latest = info->stamp_ns;
    return 0;
}

uint64_t obj__part_stamp_floor(obj_set_t *s, const char *part_key)
{
    char prefix[OBJ__PART_KEY_MAX], tag[OBJ__PART_TAG_LEN + 1];
    const char *slash = strrchr(part_key, '/');
    if (!slash || !obj__part_of_key(part_key, tag)) return 0;
    /* "<upload>/<5 digits>": that part's uploads, and no other part's. */
    snprintf(prefix, sizeof(prefix), "%.*s", (int)(slash - part_key) + 6, part_key);
    uint64_t latest = 0;
    if (obj__list(s, MPU_PARTS, prefix, NULL, NULL, 0, 0, latest_stamp, &latest) < 0) return 0;
    return latest;
}

static int drop_part(void *arg, int part, const char *tag, const char *key, const obj_info_t *info)
{
    (void)part;
    (void)tag;
    (void)info;
    obj__drop_object(arg, MPU_PARTS, key);
    return 0;
}

int obj__drop_parts(obj_set_t *s, const char *upload)
{
    return obj__each_part_of(s, upload, 0, drop_part, s);
}

/*
 * Abort of an upload a Complete closed and a kill cut short (OBJ__UPLOAD_CLOSING, rec its
 * record): once its closer is surely gone, and when no head names the upload (then it was
 * completed: NoSuchUpload, as for any completed upload), the close is taken over by an
 * aborting record (a Complete resuming meanwhile makes it fail). Heads a kill left in the
 * middle of its commit are no completion (obj__cut_short): they go once the close is taken
 * over, before the answer. Nothing else is dropped here: the reaper ends it after its grace,
 * when still no head names the upload (obj__mpu_settle), so that even a closer that outlived
 * every bound cannot have its parts taken from under its object. 0: aborted, ERR_NOT_FOUND,
 * ERR_THROTTLED (wait: its closer may still run, or a store cannot say).
 */
static int abort_closing(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                         const obj_info_t *rec, int *completed)
{
    if (rec->stamp_ns + OBJ__CLOSE_STALE_NS > obj__wall_ns()) return ERR_THROTTLED;
    int named = obj__upload_named(s, bucket, key, upload_id);
    int cut = named > 0 ? obj__cut_short(s, bucket, key, upload_id) : 0;
    if (cut) named = cut > 0 ? 0 : -1; /* cut in its heads: not completed */
    *completed = named > 0;
    if (named) return named > 0 ? ERR_NOT_FOUND : ERR_THROTTLED;
    obj_info_t closed;
    size_t blen;
    char *body = obj__upload_record(bucket, key, "", 0, &blen);
    int rc = obj__upload_close(s, upload_id, rec, &closed, body, blen);
    free(body);
    /* The heads its kill left go before the answer (an aborted upload's object never shows);
     * failing that, 503: the reaper drops them with the rest. */
    if (rc == 0 && cut && obj__drop_cut_heads(s, bucket, key, upload_id) != 0) return ERR_THROTTLED;
    if (rc == 0) log_info("event=complete_aborted upload=%s key=%s", upload_id, key);
    return rc;
}

int obj_mpu_abort(obj_set_t *s, const char *bucket, const char *key, const char *upload_id)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    obj_info_t rec;
    if (strlen(upload_id) != 32) return ERR_NOT_FOUND;
    /*
     * The upload closes first, under its lock: a part still streaming finds
     * it gone at its commit and drops its own blocks. Then every part that
     * did commit is dropped.
     */
    pthread_mutex_t *ul = obj__mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    obj_info_t closed;
    int rc = obj__upload_state(s, bucket, key, upload_id, &rec, NULL, NULL), state = rc;
    /*
     * No such upload, for good: completed (a Complete cut after its heads, its record not yet
     * tidied: the reaper's, after its grace), or aborted already. Those answered 503 for the
     * reaper's grace (a day), as a close lost to a racing closer is (a probe: 28 Aborts).
     */
    int final = 0;
    if (rc == OBJ__UPLOAD_OPEN)
        rc = obj__upload_close(s, upload_id, &rec, &closed, NULL, 0); /* one closer, across nodes */
    else if (rc == OBJ__UPLOAD_CLOSING)
        rc = abort_closing(s, bucket, key, upload_id, &rec, &final);
    else if (rc == OBJ__UPLOAD_ABORTING)
        rc = ERR_NOT_FOUND, final = 1;
    if (rc == ERR_NOT_FOUND && !final && state >= 0 &&
        obj__upload_still_there(s, bucket, key, upload_id))
        rc = ERR_THROTTLED;
    pthread_mutex_unlock(ul);
    if (rc || state != OBJ__UPLOAD_OPEN) return rc;
    rc = obj__drop_parts(s, upload_id);
    if (rc < 0) log_warn("event=abort_parts_incomplete upload=%s err=%s", upload_id, err_name(rc));
    obj__drop_object(s, MPU_UPLOADS, upload_id); /* the marker */
    return 0;
}

/* The upload that stands for each part, given once its part's uploads are all seen. */
typedef struct {
    obj_part_fn fn;
    void *arg;
    int held; /* part number of best, 0 for none */
    char tag[OBJ__PART_TAG_LEN + 1];
    obj_info_t *best;
} parts_t;

static int list_part(void *arg, int part, const char *tag, const char *key, const obj_info_t *info)
{
    parts_t *p = arg;
    (void)key;
    if (!part) return 0;
    if (p->held == part) {
        if (obj__later_part_upload(info->stamp_ns, tag, p->best->stamp_ns, p->tag)) {
            obj_info_copy(p->best, info);
            snprintf(p->tag, sizeof(p->tag), "%s", tag);
        }
        return 0;
    }
    int rc = p->held ? p->fn(p->arg, p->held, p->best) : 0;
    p->held = part;
    obj_info_copy(p->best, info);
    snprintf(p->tag, sizeof(p->tag), "%s", tag);
    if (rc) p->held = 0; /* stopped: nothing more is given */
    return rc;
}

int obj_mpu_list_parts(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                       obj_part_fn fn, void *arg)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    obj_info_t rec;
    int rc = mpu_check(s, bucket, key, upload_id, &rec);
    if (rc) return rc;
    parts_t p = {fn, arg, 0, "", xmalloc(sizeof(obj_info_t))};
    rc = obj__each_part_of(s, upload_id, 0, list_part, &p);
    if (rc >= 0 && p.held) rc = p.fn(p.arg, p.held, p.best);
    free(p.best);
    return rc;
}

typedef struct {
    char **keys;
    int n, cap;
} part_keys_t;

static int collect_part(void *arg, int part, const char *tag, const char *key,
                        const obj_info_t *info)
{
    part_keys_t *p = arg;
    (void)info;
    (void)tag;
    if (!part) return 0;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->keys = xrealloc(p->keys, sizeof(*p->keys) * (size_t)p->cap);
    }
    p->keys[p->n++] = xstrdup(key);
    return 0;
}

int obj_heal_upload(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                    obj_heal_report_t *rep)
{
    s = obj__route_upload(s, bucket, key, upload_id);
    obj_info_t rec;
    int rc = mpu_check(s, bucket, key, upload_id, &rec);
    if (rc) return rc;
    if ((rc = obj_heal(s, MPU_UPLOADS, upload_id, rep)) != 0) return rc;
    /* The parts' keys first, healed after the walk (a heal never runs inside a store's walk). */
    part_keys_t p = {0};
    rc = obj__each_part_of(s, upload_id, 1, collect_part, &p); /* every store: a healer's walk */
    for (int i = 0; i < p.n; i++) {
        int hr = rc < 0 ? 0 : obj_heal(s, MPU_PARTS, p.keys[i], rep);
        if (hr && rc >= 0) rc = hr;
        free(p.keys[i]);
    }
    free(p.keys);
    return rc < 0 ? rc : 0;
}

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_upload_fn fn;
    void *arg;
    int closing; /* closing and aborting records too (a Complete cut short) */
} uploads_t;

static int list_upload(void *arg, const char *upload, const obj_info_t *info)
{
    uploads_t *u = arg;
    size_t bl = strlen(u->bucket);
    int err, rc = 0;
    if (info->size <= bl || (info->size > bl + 1 + SHARD_MAX_KEY && !u->closing))
        return 0; /* or closing */
    obj_reader_t *r = obj_open(u->s, MPU_UPLOADS, upload, NULL, &err);
    if (!r) return 0;
    char *body = xmalloc(info->size + 1);
    if (obj_read(r, 0, body, info->size) == 0) {
        body[info->size] = 0;
        if (strncmp(body, u->bucket, bl) == 0 && body[bl] == '\n' &&
            (u->closing || strlen(body) == info->size)) /* (a closing record) */
            rc = u->fn(u->arg, body + bl + 1, upload, info);
    }
    free(body);
    obj_close(r);
    return rc;
}

static int list_uploads(obj_set_t *s, const char *bucket, int wide, int closing, obj_upload_fn fn,
                        void *arg)
{
    for (int j = 0; j < s->nsub; j++) { /* set by set: callers sort (no order promised) */
        if (obj__sub_removed(s, j)) continue;
        int rc = list_uploads(s->sub[j], bucket, wide, closing, fn, arg);
        if (rc) return rc;
    }
    if (s->nsub) return 0;
    uploads_t u = {s, bucket, fn, arg, closing};
    return obj__list(s, MPU_UPLOADS, NULL, NULL, NULL, 0, wide, list_upload, &u);
}

int obj_mpu_list_uploads(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    return list_uploads(s, bucket, 0, 0, fn, arg);
}

int obj_mpu_list_uploads_all(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    return list_uploads(s, bucket, 1, 0, fn, arg);
}

int obj_mpu_list_uploads_any(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    return list_uploads(s, bucket, 0, 1, fn, arg);
}
