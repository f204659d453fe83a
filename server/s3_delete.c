/*
 * s3_delete: DeleteObject and DeleteObjects (up to 1000 keys in one
 * request). Each key's delete is conditional when asked (ETag, last
 * modified time, size: decided under the key's lock), and versioning
 * shapes it: a delete marker, or, with a version id, that version for good.
 */

#include "server/s3_int.h"

int s3_delete_one(ctx_t *x, const char *key, const char *vid, const obj_cond_t *c, obj_info_t *out)
{
    obj_info_clear(out);
    if (vid) {
        if (!obj_vid_valid(vid)) return ERR_INVAL;
        int rc = obj_delete_version(x->cfg->set, x->ibucket, key, vid, c, out);
        /* Deleting a version that is not there is done already (S3: 204), unless a
         * condition named it. */
        if (rc == ERR_NOT_FOUND && !c) {
            rc = 0;
            obj_info_clear(out);
        }
        snprintf(out->vid, sizeof(out->vid), "%s", strcmp(vid, "null") ? vid : "");
        return rc;
    }
    /* Under the bucket's lock against this incarnation: a marker is a write. */
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_rdlock(lk);
    int rc = !s3_bucket_current(x, x->bucket, x->ibucket)
                 ? S3_ERR_NO_BUCKET
                 : obj_delete_current(x->cfg->set, x->ibucket, key, c,
                                      s3_versioning_of(&x->bucket_rec), out);
    pthread_rwlock_unlock(lk);
    /* A marker is a version: another node's DeleteBucket is waited for as by any commit
     * (s3_commit_stays; the marker undone with the bucket). Unfenced, a DELETE and a
     * DeleteBucket through two nodes were both acknowledged (a 4-node probe: 33 in 40). */
    if (rc == 0 && out->marker && x->cfg->fenced) rc = s3_commit_stays(x, out);
    return rc;
}

/*
 * DeleteObject, optionally conditional (If-Match, x-amz-if-match-last-
 * modified-time, x-amz-if-match-size: decided under the key's lock). A
 * missing key is 204, as S3; a condition on a key with no current version
 * is 404 NoSuchKey (S3 evaluates conditions on the current version). With
 * versioning, a delete marker is made (or, with ?versionId, that version
 * goes for good).
 */
void s3_delete_object(ctx_t *x)
{
    if (s3_unknown_param(x, (const char *const[]){"versionId", NULL})) return;
    obj_cond_t c = OBJ_COND_NONE;
    const char *im = s3_hdr(x->info, "if-match");
    const char *lm = s3_hdr(x->info, "x-amz-if-match-last-modified-time");
    const char *sz = s3_hdr(x->info, "x-amz-if-match-size");
    uint64_t size;
    if ((im && strlen(im) >= sizeof(c.if_match)) ||
        (sz && num_parse_u64(sz, 0, INT64_MAX, &size) != 0) ||
        (lm && s3_parse_http_date(lm) == (time_t)-1)) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "A delete condition is not well-formed.");
        return;
    }
    if (im) snprintf(c.if_match, sizeof(c.if_match), "%s", im[0] ? im : "\"\"");
    if (sz) c.if_size = (int64_t)size;
    if (lm) c.if_mtime_s = (int64_t)s3_parse_http_date(lm);
    int conditional = im || sz || lm;
    obj_info_t gone;
    int rc = s3_delete_one(x, x->key, x->vid, conditional ? &c : NULL, &gone);
    if (rc == ERR_NOT_FOUND && conditional) {
        /* No current version (nothing, or a delete marker): 404 NoSuchKey, as S3 answers
         * (measured); a condition on a version named by id that is not there: 412. */
        if (!x->vid) {
            s3_err(x, S3E_NO_SUCH_KEY);
            return;
        }
        rc = ERR_PRECOND;
    }
    if (rc && rc != ERR_NOT_FOUND) {
        s3_engine_error(x, rc);
        return;
    }
    if (rc == 0 && (gone.marker || x->vid)) s3_version_headers(x, &gone);
    char h[128];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond(x->r, 204, h, 0);
}

/* DeleteObjects: up to 1000 keys, each optionally conditional; the body comes with its digest
 * (Content-MD5 or x-amz-checksum-*), which S3 requires. */
void s3_delete_objects(ctx_t *x)
{
    size_t len;
    char *body = s3_read_digested_body(x, 2u << 20, &len);
    if (!body) return;
    char **keys = NULL;
    s3_xml_delcond_t *conds = NULL;
    int nkeys = 0, quiet = 0;
    int bad = s3_xml_delete(body, len, &keys, &nkeys, &quiet, &conds);
    free(body);
    buf_t b = {0};
    /* S3 refuses a request naming no object, or an object with an empty key. */
    for (int i = 0; !bad && i < nkeys; i++)
        bad = !keys[i][0];
    if (!bad && nkeys == 0) bad = 1;
    if (bad) {
        if (keys) s3_xml_free_keys(keys, nkeys);
        free(conds);
        s3_err_msg(x, S3E_MALFORMED_XML, "The XML you provided was not well-formed.");
        return;
    }
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DeleteResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (int i = 0; i < nkeys; i++) {
        /* An entry's ETag, LastModifiedTime and Size are conditions, as on DeleteObject. */
        obj_cond_t c = OBJ_COND_NONE;
        const s3_xml_delcond_t *dc = &conds[i];
        int conditional = dc->etag[0] || dc->mtime[0] || dc->size >= 0, rc = 0;
        snprintf(c.if_match, sizeof(c.if_match), "%s", dc->etag);
        c.if_size = dc->size;
        if (dc->mtime[0]) {
            struct tm tm = {0};
            const char *e = strptime(dc->mtime, "%Y-%m-%dT%H:%M:%S", &tm);
            if (!e || (*e && *e != '.' && *e != 'Z'))
                rc = ERR_INVAL;
            else
                c.if_mtime_s = (int64_t)timegm(&tm);
        }
        if (!rc && strlen(keys[i]) > MAX_KEY_LEN) rc = ERR_INVAL;
        const char *vid = dc->version_id[0] ? dc->version_id : NULL;
        /* Another user's (bucket WRITE: s3:DeleteObject) deletes current versions only; a
         * version by id is s3:DeleteObjectVersion, the owner's. */
        int denied = !rc && vid && x->public_view;
        obj_info_t gone;
        if (!rc && !denied) rc = s3_delete_one(x, keys[i], vid, conditional ? &c : NULL, &gone);
        /* As DeleteObject: a condition on a key with no current version is NoSuchKey. */
        int no_current = rc == ERR_NOT_FOUND && conditional && !vid;
        if (rc == ERR_NOT_FOUND && conditional) rc = ERR_PRECOND;
        if ((rc == 0 || rc == ERR_NOT_FOUND) && !denied) {
            if (!quiet) {
                buf_printf(&b, "<Deleted><Key>");
                buf_xml(&b, keys[i]);
                buf_printf(&b, "</Key>");
                if (vid) buf_printf(&b, "<VersionId>%s</VersionId>", vid);
                if (rc == 0 && gone.marker)
                    buf_printf(&b,
                               "<DeleteMarker>true</DeleteMarker><DeleteMarkerVersionId>%s"
                               "</DeleteMarkerVersionId>",
                               gone.vid[0] ? gone.vid : "null");
                buf_printf(&b, "</Deleted>");
            }
        } else if (rc == S3_ERR_NO_BUCKET) {
            buf_printf(&b, "<Error><Key>");
            buf_xml(&b, keys[i]);
            buf_printf(&b, "</Key><Code>NoSuchBucket</Code><Message>The specified bucket does "
                           "not exist.</Message></Error>");
        } else {
            buf_printf(&b, "<Error><Key>");
            buf_xml(&b, keys[i]);
            buf_printf(&b, "</Key>");
            if (vid) {
                buf_printf(&b, "<VersionId>");
                buf_xml(&b, vid);
                buf_printf(&b, "</VersionId>");
            }
            s3_err_t e = denied                                   ? S3E_ACCESS_DENIED
                         : rc == ERR_INVAL                        ? S3E_INVALID_ARGUMENT
                         : no_current                             ? S3E_NO_SUCH_KEY
                         : rc == ERR_PRECOND                      ? S3E_PRECONDITION_FAILED
                         : rc == ERR_THROTTLED || rc == ERR_AGAIN ? S3E_SLOW_DOWN
                         : rc == ERR_UNRECOVERABLE || rc == ERR_IO || rc == ERR_CLOSED
                             ? S3E_SERVICE_UNAVAILABLE /* as s3_engine_err_of says it */
                             : S3E_INTERNAL;
            buf_printf(&b, "<Code>%s</Code><Message>%s</Message></Error>", s3_err_info(e)->code,
                       s3_err_info(e)->message);
        }
    }
    buf_printf(&b, "</DeleteResult>");
    s3_respond_xml(x, 200, &b);
    s3_xml_free_keys(keys, nkeys);
    free(conds);
}
