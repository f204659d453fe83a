/*
 * s3_versioning: bucket versioning (Put/GetBucketVersioning), the request's
 * version (?versionId), the x-amz-version-id and x-amz-delete-marker
 * headers (the object layer keeps the versions: obj_version.c). The
 * deletes, which versioning shapes, are in s3_delete.c.
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
