/*
 * s3_acl: canned ACLs (private, public-read) on buckets and objects: Get/Put
 * *Acl, and what an anonymous request may read.
 */

#include "server/s3_int.h"

typedef struct {
    const char *name, *value;
} acl_set_t;

/* obj_umeta_fn: the current version's pairs with the ACL entry set (under the key's lock). */
static int acl_set(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    acl_set_t *a = arg;
    buf_t um = {0};
    s3_umeta_with(cur, a->name, a->value, &um);
    int rc = um.len > sizeof(cur->umeta) ? ERR_TOO_LARGE : 0;
    if (!rc) {
        memcpy(out, um.p, um.len);
        *out_len = um.len;
    }
    free(um.p);
    return rc;
}

/*
 * PutBucketAcl / PutObjectAcl: a canned ACL in x-amz-acl or an
 * AccessControlPolicy body, reduced to private or public-read (the ACLs
 * warmlake enforces). The ACL entry (name) of the target's metadata is
 * rewritten; the data is untouched.
 */
void s3_put_acl(ctx_t *x, const char *bucket, const char *key, const char *name)
{
    const char *canned = s3_hdr(x->info, "x-amz-acl");
    int pub = 0, rc, whole = strcmp(bucket, BUCKETS) == 0;
    if (canned) {
        /* public-read-write: anyone may also write into the bucket (anonymous POST). */
        if (strcmp(canned, "private") != 0 && strcmp(canned, "public-read") != 0 &&
            !(whole && strcmp(canned, "public-read-write") == 0)) {
            s3_err_msg(
                x, S3E_NOT_IMPLEMENTED,
                "Only the private, public-read and (buckets) public-read-write canned ACLs.");
            return;
        }
        pub = strcmp(canned, "public-read") == 0         ? 1
              : strcmp(canned, "public-read-write") == 0 ? 2
                                                         : 0;
    } else {
        size_t len;
        char *body = s3_read_small_body(x, 64u << 10, &len);
        if (!body) return;
        rc = s3_xml_acl(body, len, &pub);
        free(body);
        if (rc == ERR_INVAL) {
            s3_err(x, S3E_MALFORMED_ACL);
            return;
        }
        if (rc) {
            s3_err_msg(x, S3E_NOT_IMPLEMENTED,
                       "Only grants equivalent to the private and public-read canned ACLs.");
            return;
        }
    }
    /*
     * The body may have taken a while: the bucket checked before it may be
     * gone, and its name taken by someone else. Decide under the bucket's
     * lock, against the same incarnation (exclusive when the bucket record
     * itself is rewritten).
     */
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    if (whole)
        pthread_rwlock_wrlock(lk);
    else
        pthread_rwlock_rdlock(lk);
    acl_set_t set = {name, pub == 2 ? "public-read-write" : pub ? "public-read" : "private"};
    int marker = 0;
    if (!s3_bucket_current(x, x->bucket, x->ibucket))
        rc = S3_ERR_NO_BUCKET;
    else
        rc = obj_update_umeta_version(x->cfg->set, bucket, key, whole ? NULL : x->vid, acl_set,
                                      &set, &marker);
    pthread_rwlock_unlock(lk);
    if (rc == ERR_NOT_FOUND && whole) rc = S3_ERR_NO_BUCKET;
    if (rc == ERR_NOT_FOUND && x->vid && !whole) {
        s3_err(x, marker ? S3E_METHOD_NOT_ALLOWED : S3E_NO_SUCH_VERSION);
        return;
    }
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    char h[128];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond_full(x->r, 200, h, NULL, 0);
}

/* GetBucketAcl / GetObjectAcl: the owner's full control, READ (and WRITE) for everyone as the
 * canned ACL says. */
void s3_respond_acl(ctx_t *x, const char *owner, const char *canned)
{
    buf_t b = {0};
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<AccessControlPolicy "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>");
    buf_xml(&b, owner);
    buf_printf(&b, "</ID><DisplayName>");
    buf_xml(&b, owner);
    buf_printf(&b, "</DisplayName></Owner><AccessControlList><Grant><Grantee "
                   "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                   "xsi:type=\"CanonicalUser\"><ID>");
    buf_xml(&b, owner);
    buf_printf(&b, "</ID><DisplayName>");
    buf_xml(&b, owner);
    buf_printf(&b, "</DisplayName></Grantee><Permission>FULL_CONTROL</Permission></Grant>");
    for (int w = 0; w < 2; w++)
        if (!strncmp(canned, "public-read", 11) && (!w || !strcmp(canned, "public-read-write")))
            buf_printf(&b,
                       "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                       "xsi:type=\"Group\"><URI>http://acs.amazonaws.com/groups/global/AllUsers"
                       "</URI></Grantee><Permission>%s</Permission></Grant>",
                       w ? "WRITE" : "READ");
    buf_printf(&b, "</AccessControlList></AccessControlPolicy>");
    s3_respond_xml(x, 200, &b);
}

/*
 * A request without credentials: GET/HEAD of a public-read object, or a
 * listing of a public-read bucket. Anything else, or anything missing, is
 * AccessDenied (which says nothing about what exists).
 */
void s3_anonymous_op(ctx_t *x)
{
    x->public_view = 1;
    const char *m = x->info->method;
    int get = strcmp(m, "GET") == 0, head = strcmp(m, "HEAD") == 0, present;
    obj_info_t bi, oi;
    /* Sub-resources (ACLs, tags, uploads) are the owner's, whatever the object's ACL. */
    present = 0;
    for (const char *const *q =
             (const char *const[]){"acl", "tagging", "uploads", "uploadId", "versions", "location",
                                   "attributes", "cors", "versioning", "lifecycle", NULL};
         *q && !present; q++) {
        char *sub = s3_qparam(x->query, *q, &present);
        free(sub);
    }
    if ((get || head) && !present && x->bucket[0] && s3_bucket_exists(x, x->bucket, &bi)) {
        s3_bucket_iname(x->bucket, &bi, x->ibucket);
        if (x->key[0]) {
            /* The version asked for must be public itself. */
            if (s3_version_param(x) != 0) return;
            if (strlen(x->key) <= MAX_KEY_LEN &&
                obj_stat_version(x->cfg->set, x->ibucket, x->key, x->vid, &oi) == 0 &&
                !oi.deleted && strcmp(s3_umeta_get(&oi, ACL_META), "public-read") == 0) {
                if (s3_has_response_overrides(x))
                    s3_err_msg(x, S3E_INVALID_REQUEST,
                               "Request specific response headers cannot be used for anonymous "
                               "GET requests.");
                else
                    s3_get_object(x, head);
                return;
            }
        } else if (get && strncmp(s3_umeta_get(&bi, "acl"), "public-read", 11) == 0) {
            s3_list_objects(x);
            return;
        }
    }
    s3_err(x, S3E_ACCESS_DENIED);
}
