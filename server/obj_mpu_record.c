/*
 * obj_mpu_record.c: an upload's record (room of the object layer; map in
 * obj_int.h): what it says, and the conditional writes that close and
 * reopen it.
 *
 * The record is an object of its own in MPU_UPLOADS, key the upload id. Its
 * body says where the upload stands:
 *
 *   "bucket\nkey"                       open
 *   "bucket\nkey\0" manifest padding    closing: a Complete closed it, and
 *                                       the manifest is the decision (a kill
 *                                       may have cut the Complete short)
 *   "bucket\nkey\0" padding             aborting: an Abort took such a close
 *                                       over; the reaper ends it
 *
 * The padding (newlines) makes a closing or aborting record longer than any
 * open record of its bucket can be: a node from before closing records
 * tells open records by that length and lists no other. Its content type
 * and metadata are the final object's, kept through every rewrite.
 *
 * Every close is a commit conditioned on the stamp of the record it
 * replaces, so across nodes one closer wins; the losers see the condition
 * fail (obj__upload_close).
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_MAX (64u << 20) /* far above 10,000 parts' lines */

char *obj__upload_record(const char *bucket, const char *key, const char *manifest, size_t mlen,
                         size_t *len)
{
    size_t bl = strlen(bucket), kl = strlen(key);
    *len = bl + 1 + kl + (manifest ? 1 + mlen : 0);
    /* At least one byte: an aborting record is never the bare "bucket\nkey\0". */
    size_t pad = !manifest ? 0 : *len < bl + 2 + SHARD_MAX_KEY ? bl + 2 + SHARD_MAX_KEY - *len : 1;
    char *b = xmalloc(*len + pad + 1);
    memcpy(b, bucket, bl);
    b[bl] = '\n';
    memcpy(b + bl + 1, key, kl);
    b[bl + 1 + kl] = 0;
    if (manifest) memcpy(b + bl + 2 + kl, manifest, mlen);
    memset(b + *len, '\n', pad);
    *len += pad;
    b[*len] = 0;
    return b;
}

/* A closing record's manifest without its padding: its lines, each ending in a newline. */
static size_t unpadded(const char *m, size_t mlen)
{
    while (mlen > 0 && m[mlen - 1] == '\n' && (mlen == 1 || m[mlen - 2] == '\n'))
        mlen--;
    return mlen;
}

/*
 * A record's body (size bytes, NUL after them) split into *v: OBJ__UPLOAD_OPEN,
 * OBJ__UPLOAD_CLOSING or OBJ__UPLOAD_ABORTING, or ERR_NOT_FOUND for bytes no record has
 * (a bucket name holds no newline; a key no NUL).
 */
static int split_record(const char *body, size_t size, obj_upload_view_t *v)
{
    size_t head = strlen(body); /* "bucket\nkey" */
    const char *nl = memchr(body, '\n', head);
    if (!nl || (size > head && size == head + 1)) return ERR_NOT_FOUND;
    v->bucket = body;
    v->bucket_len = (size_t)(nl - body);
    v->key = nl + 1;
    v->key_len = head - v->bucket_len - 1;
    v->manifest = size > head ? body + head + 1 : NULL;
    v->manifest_len = size > head ? unpadded(v->manifest, size - head - 1) : 0;
    if (size == head) return OBJ__UPLOAD_OPEN;
    return v->manifest_len ? OBJ__UPLOAD_CLOSING : OBJ__UPLOAD_ABORTING;
}

int obj__upload_read(obj_set_t *s, const char *upload, obj_info_t *rec, char **body,
                     obj_upload_view_t *v)
{
    int err;
    *body = NULL;
    if (strlen(upload) != 32) return ERR_NOT_FOUND;
    obj_reader_t *r = obj_open(s, MPU_UPLOADS, upload, rec, &err);
    if (!r) return err;
    if (rec->size < 2 || rec->size > 2 + SHARD_MAX_BUCKET + SHARD_MAX_KEY + MANIFEST_MAX) {
        obj_close(r);
        return ERR_NOT_FOUND;
    }
    char *b = xmalloc(rec->size + 1);
    err = obj_read(r, 0, b, rec->size);
    obj_close(r);
    b[rec->size] = 0;
    int state = err ? err : split_record(b, rec->size, v);
    if (state < 0) {
        free(b);
        return state;
    }
    *body = b;
    return state;
}

int obj__upload_state(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                      obj_info_t *rec, char **manifest, size_t *mlen)
{
    char *body;
    obj_upload_view_t v;
    if (manifest) *manifest = NULL;
    int state = obj__upload_read(s, upload, rec, &body, &v);
    if (state < 0) return state;
    if (v.bucket_len != strlen(bucket) || memcmp(v.bucket, bucket, v.bucket_len) != 0 ||
        v.key_len != strlen(key) || memcmp(v.key, key, v.key_len) != 0) {
        free(body);
        return ERR_NOT_FOUND;
    }
    if (manifest && state == OBJ__UPLOAD_CLOSING) {
        memmove(body, v.manifest, v.manifest_len);
        body[v.manifest_len] = 0;
        *mlen = v.manifest_len;
        *manifest = body;
    } else {
        free(body);
    }
    return state;
}

int obj__upload_still_there(obj_set_t *s, const char *bucket, const char *key, const char *upload)
{
    obj_info_t *rec = xmalloc(sizeof(*rec));
    int st = obj__upload_state(s, bucket, key, upload, rec, NULL, NULL);
    free(rec);
    return st == OBJ__UPLOAD_OPEN || st == OBJ__UPLOAD_CLOSING;
}

int obj__upload_closing(obj_set_t *s, const char *upload_id, uint64_t *stamp)
{
    obj_info_t *rec = xmalloc(sizeof(*rec));
    char *body;
    obj_upload_view_t v;
    int state = obj__upload_read(s, upload_id, rec, &body, &v);
    if (state >= 0) *stamp = rec->stamp_ns;
    free(rec);
    free(body);
    return state < 0 ? state : state != OBJ__UPLOAD_OPEN;
}

/* Whether the upload's record reads as the version stamped stamp. */
static int reads_as(obj_set_t *s, const char *upload_id, uint64_t stamp)
{
    obj_info_t *now = xmalloc(sizeof(*now));
    int same = obj_stat(s, MPU_UPLOADS, upload_id, now) == 0 && now->stamp_ns == stamp;
    free(now);
    return same;
}

/*
 * An upload closes (is completed or aborted) once, whoever closes it through
 * whichever node. The upload lock orders one node's calls; across nodes two
 * Completes with different part lists were both acknowledged, each writing
 * its manifest and dropping the parts the other listed, and a Complete and
 * an Abort both went through: the object was unreadable (a probe: every
 * round). The closer replaces the record under a condition on its stamp,
 * committed as any version is (the stores decide): one closer's stands, the
 * others find the condition failing and answer as for an upload that is gone.
 */
int obj__upload_close(obj_set_t *s, const char *upload_id, const obj_info_t *rec,
                      obj_info_t *closed, const char *body, size_t blen)
{
    obj_cond_t c = OBJ_COND_NONE;
    c.if_stamp = rec->stamp_ns;
    obj_info_clear(closed);
    closed->deleted = closed->marker = 1;
    int rc = obj__new_upload_id(closed->upload_id), first_err = 0;
    if (rc) return rc;
    int doubt = 0; /* a try answered in doubt: its close may stand (a late one: it stays) */
    for (int tries = 0;; tries++) {
        first_err = 0;
        if (body) {
            obj_writer_t *w = obj_put_begin(s, MPU_UPLOADS, upload_id, &first_err);
            if (w && (first_err = obj_put_write(w, body, blen)) != 0) obj_put_abort(w);
            if (w && !first_err) {
                obj_put_set_cond(w, &c);
                first_err =
                    obj_put_commit(w, rec->content_type, rec->umeta, rec->umeta_len, closed);
            }
            if (!first_err) return 0;
        } else {
            int heads = obj__commit_heads(s, MPU_UPLOADS, upload_id, &c, OBJ_UNVERSIONED, closed,
                                          NULL, 0, &first_err);
            if (heads >= 0 && obj__enough(s, closed, heads)) return 0;
        }
        /*
         * The record does not stand for a commit: a small one's copies lost with their
         * drives (one left is enough to read it, not to replace it: a commit takes it
         * for another writer's in flight), or a close a kill cut after its first copies
         * (read as the record, while commits judge by the one it was replacing: the
         * condition fails on it for good). Healed, it stands again; once.
         */
        if (tries == 0 && first_err == ERR_PRECOND && reads_as(s, upload_id, rec->stamp_ns)) {
            obj_heal_report_t rep = {0};
            log_info("event=upload_record_heal upload=%s: read, but it does not stand", upload_id);
            if (obj_heal(s, MPU_UPLOADS, upload_id, &rep) == 0) continue;
        }
        /*
         * The condition fails on the record a try in doubt left (its own close, landed late or
         * on failing stores, healed into place): not another closer's. Answered NoSuchUpload,
         * an Abort of an open upload was told the upload it closed itself never was; in doubt.
         */
        if ((first_err == ERR_PRECOND || first_err == ERR_NOT_FOUND) && doubt)
            return ERR_UNRECOVERABLE;
        if (first_err == ERR_PRECOND || first_err == ERR_NOT_FOUND) return ERR_NOT_FOUND;
        if (first_err == ERR_UNRECOVERABLE) doubt = 1;
        if (tries == 0 && (first_err == ERR_THROTTLED || first_err == ERR_UNRECOVERABLE)) {
            obj_heal_report_t rep = {0};
            if (obj_heal(s, MPU_UPLOADS, upload_id, &rep) == 0) continue;
        }
        return first_err ? first_err : ERR_UNRECOVERABLE;
    }
}

void obj__upload_reopen(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                        const obj_info_t *rec, const obj_info_t *closed)
{
    int err;
    obj_cond_t c = OBJ_COND_NONE;
    c.if_stamp = closed->stamp_ns;
    size_t len;
    char *body = obj__upload_record(bucket, key, NULL, 0, &len);
    obj_writer_t *w = obj_put_begin(s, MPU_UPLOADS, upload_id, &err);
    if (w && (err = obj_put_write(w, body, len)) != 0) obj_put_abort(w);
    if (w && !err) {
        obj_put_set_cond(w, &c);
        err = obj_put_commit(w, rec->content_type, rec->umeta, rec->umeta_len, NULL);
    }
    if (err) log_warn("event=upload_reopen_failed upload=%s err=%s", upload_id, err_name(err));
    free(body);
}
