/*
 * s3_versioning: bucket versioning (Put/GetBucketVersioning), the request's
 * version (?versionId), the x-amz-version-id and x-amz-delete-marker
 * headers, and DeleteObject, which versioning shapes (the object layer
 * keeps the versions: obj_version.c).
 */

#include "server/s3_int.h"

#define VERSIONING_META "versioning" /* in the bucket record: "Enabled" or "Suspended" */

obj_versioning_t s3_versioning_of(const obj_info_t *bucket_rec)
{
    const char *v = s3_umeta_get(bucket_rec, VERSIONING_META);
    return !strcmp(v, "Enabled")     ? OBJ_VERSIONED
           : !strcmp(v, "Suspended") ? OBJ_SUSPENDED
                                     : OBJ_UNVERSIONED;
}

obj_versioning_t s3_bucket_versioning(ctx_t *x)
{
    obj_info_t bi;
    return s3_bucket_exists(x, x->bucket, &bi) ? s3_versioning_of(&bi) : OBJ_UNVERSIONED;
}

int s3_version_param(ctx_t *x)
{
    int present;
    x->vid = s3_qparam(x->query, "versionId", &present);
    if (!present) return 0;
    /* S3 answers an empty or malformed id with 400, an unknown one with 404 NoSuchVersion. */
    if (!x->vid || !obj_vid_valid(x->vid)) {
        s3_err_detail(x, S3E_INVALID_ARGUMENT, "Invalid version id specified",
                      "<ArgumentName>versionId</ArgumentName>");
        return -1;
    }
    return 0;
}

void s3_version_headers(ctx_t *x, const obj_info_t *info)
{
    char h[96];
    /* The null version shows as "null" once the bucket has had versioning, not before. */
    if (!info->vid[0] && !x->vid && s3_bucket_versioning(x) == OBJ_UNVERSIONED) return;
    snprintf(h, sizeof(h), "x-amz-version-id: %s\r\n%s", info->vid[0] ? info->vid : "null",
             info->marker ? "x-amz-delete-marker: true\r\n" : "");
    http_add_headers(x->r, h);
}

void s3_written_headers(ctx_t *x, const obj_info_t *info)
{
    if (info->vid[0]) s3_version_headers(x, info); /* none for a null version (S3) */
    s3_lifecycle_expiration(x, info, NULL);
}

int s3_version_missing(ctx_t *x, int rc, const obj_info_t *info)
{
    if (rc != ERR_NOT_FOUND) return 0;
    if (info->marker) {
        char lm[40], h[64];
        s3_http_date(info->mtime_ns, lm);
        snprintf(h, sizeof(h), "Last-Modified: %s\r\n", lm);
        http_add_headers(x->r, h);
        s3_version_headers(x, info);
        /* A version that is a delete marker cannot be read (405); the current one is 404. */
        if (x->vid)
            s3_err_msg(x, S3E_METHOD_NOT_ALLOWED,
                       "The specified method is not allowed against this resource.");
        else
            s3_err(x, S3E_NO_SUCH_KEY);
        return 1;
    }
    if (x->vid) {
        s3_err_detail(x, S3E_NO_SUCH_VERSION, NULL, NULL);
        return 1;
    }
    return 0;
}

/* obj_umeta_fn: the bucket record with its versioning set. */
static int set_status(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    buf_t um = {xmalloc(cur->umeta_len + 1), cur->umeta_len, cur->umeta_len + 1};
    memcpy(um.p, cur->umeta, cur->umeta_len);
    s3_pairs_set(&um, VERSIONING_META, arg);
    int rc = um.len > sizeof(cur->umeta) ? ERR_TOO_LARGE : 0;
    if (!rc) {
        memcpy(out, um.p, um.len);
        *out_len = um.len;
    }
    free(um.p);
    return rc;
}

static void put_versioning(ctx_t *x)
{
    size_t len;
    int status, mfa;
    char *body = s3_read_small_body(x, 64u << 10, &len);
    if (!body) return;
    int rc = s3_xml_versioning(body, len, &status, &mfa);
    free(body);
    if (rc) {
        s3_err(x, S3E_MALFORMED_XML);
        return;
    }
    if (mfa) {
        s3_err_msg(x, S3E_NOT_IMPLEMENTED, "MFA Delete is not supported.");
        return;
    }
    if (status) {
        /* Exclusive, against this incarnation: the bucket record itself is rewritten. */
        pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
        pthread_rwlock_wrlock(lk);
        if (!s3_bucket_current(x, x->bucket, x->ibucket))
            rc = S3_ERR_NO_BUCKET;
        else
            rc = obj_update_umeta(x->cfg->set, BUCKETS, x->bucket, set_status,
                                  status == 1 ? "Enabled" : "Suspended");
        pthread_rwlock_unlock(lk);
        if (rc == ERR_NOT_FOUND) rc = S3_ERR_NO_BUCKET;
        if (rc) {
            s3_engine_error(x, rc);
            return;
        }
    }
    char h[128];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond(x->r, 200, h, 0);
}

void s3_versioning_op(ctx_t *x)
{
    const char *m = x->info->method;
    if (strcmp(m, "PUT") == 0) {
        put_versioning(x);
    } else if (strcmp(m, "GET") == 0) {
        obj_versioning_t v = s3_bucket_versioning(x);
        buf_t b = {0};
        buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<VersioningConfiguration "
                       "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
        if (v != OBJ_UNVERSIONED)
            buf_printf(&b, "<Status>%s</Status>", v == OBJ_VERSIONED ? "Enabled" : "Suspended");
        buf_printf(&b, "</VersioningConfiguration>");
        s3_respond_xml(x, 200, &b);
    } else {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    }
}

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
