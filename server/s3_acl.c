/*
 * s3_acl: canned ACLs on buckets and objects (private, public-read,
 * public-read-write, authenticated-read, bucket-owner-read and
 * bucket-owner-full-control; the last two are private here, where a bucket's
 * objects are its owner's): Get/Put *Acl, and what an anonymous or another
 * signed-in user may read.
 */

#include "server/s3_int.h"

typedef struct {
    const char *name, *value;
} acl_set_t;

int s3_canned_acl_check(ctx_t *x, const char *acl, int bucket)
{
    static const char *const served[] = {"private",           "public-read",
                                         "public-read-write", "authenticated-read",
                                         "bucket-owner-read", "bucket-owner-full-control"};
    if (!acl) return 0;
    for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++)
        if (!strcmp(acl, served[i])) {
            if (bucket && i >= 4) break; /* object ACLs only */
            return 0;
        }
    if (!strcmp(acl, "log-delivery-write") || !strcmp(acl, "aws-exec-read") ||
        !strncmp(acl, "bucket-owner-", 13)) {
        s3_err_msg(x, S3E_NOT_IMPLEMENTED, "This canned ACL is not served.");
        return -1;
    }
    s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid canned ACL.");
    return -1;
}

int s3_acl_lets_read(const ctx_t *x, const char *acl)
{
    return !strcmp(acl, "public-read") || !strcmp(acl, "public-read-write") ||
           (!strcmp(acl, "authenticated-read") && !x->anonymous);
}

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
        if (s3_canned_acl_check(x, canned, whole) != 0) return;
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
    acl_set_t set = {name, canned ? canned : pub ? "public-read" : "private"};
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
    buf_printf(&b, "</DisplayName></Owner><AccessControlList>");
    /* The groups' grants, then the owner's (the order conformance suites compare in). */
    const char *group = !strncmp(canned, "public-read", 11)     ? "global/AllUsers"
                        : !strcmp(canned, "authenticated-read") ? "global/AuthenticatedUsers"
                                                                : NULL;
    for (int w = 0; group && w < 2; w++)
        if (!w || !strcmp(canned, "public-read-write"))
            buf_printf(&b,
                       "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                       "xsi:type=\"Group\"><URI>http://acs.amazonaws.com/groups/%s"
                       "</URI></Grantee><Permission>%s</Permission></Grant>",
                       group, w ? "WRITE" : "READ");
    buf_printf(&b, "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                   "xsi:type=\"CanonicalUser\"><ID>");
    buf_xml(&b, owner);
    buf_printf(&b, "</ID><DisplayName>");
    buf_xml(&b, owner);
    buf_printf(&b, "</DisplayName></Grantee><Permission>FULL_CONTROL</Permission></Grant>");
    buf_printf(&b, "</AccessControlList></AccessControlPolicy>");
    s3_respond_xml(x, 200, &b);
}

/*
 * A request without credentials, or another user's: GET/HEAD of an object
 * its ACL lets them read, a listing of a bucket whose ACL does, a PUT into a
 * public-read-write bucket. Anything else is AccessDenied; that a bucket is
 * not there is said to anyone (as S3 does), that a key is not to whoever
 * may list the bucket.
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
    /* A public-read-write bucket takes anyone's plain PUT of an object (the bucket owner's
     * object then; ACLs as x-amz-acl says). Copies and uploads stay the owner's. */
    int part_number;
    char *pq = s3_qparam(x->query, "partNumber", &part_number);
    free(pq);
    if (!strcmp(m, "PUT") && !present && !part_number && x->bucket[0] && x->key[0] &&
        !s3_hdr(x->info, "x-amz-copy-source") && s3_bucket_exists(x, x->bucket, &bi) &&
        !strcmp(s3_umeta_get(&bi, "acl"), "public-read-write")) {
        s3_bucket_iname(x->bucket, &bi, x->ibucket);
        if (strlen(x->key) > MAX_KEY_LEN)
            s3_err(x, S3E_KEY_TOO_LONG);
        else
            s3_put_object(x);
        return;
    }
    if ((get || head) && !present && x->bucket[0] && !s3_bucket_exists(x, x->bucket, &bi)) {
        s3_err(x, S3E_NO_SUCH_BUCKET); /* as S3 answers anyone */
        return;
    }
    if ((get || head) && !present && x->bucket[0]) {
        s3_bucket_iname(x->bucket, &bi, x->ibucket);
        int bucket_readable = s3_acl_lets_read(x, s3_umeta_get(&bi, "acl"));
        if (x->key[0]) {
            /* The version asked for must be public itself. */
            if (s3_version_param(x) != 0) return;
            int rc = strlen(x->key) <= MAX_KEY_LEN
                         ? obj_stat_version(x->cfg->set, x->ibucket, x->key, x->vid, &oi)
                         : ERR_NOT_FOUND;
            if (rc == 0 && oi.deleted) rc = ERR_NOT_FOUND;
            /* Who may list the bucket may learn a key is not there. */
            if (rc == ERR_NOT_FOUND && bucket_readable) {
                s3_err(x, x->vid ? S3E_NO_SUCH_VERSION : S3E_NO_SUCH_KEY);
                return;
            }
            if (rc == 0 && s3_acl_lets_read(x, s3_umeta_get(&oi, ACL_META))) {
                if (s3_has_response_overrides(x))
                    s3_err_msg(x, S3E_INVALID_REQUEST,
                               "Request specific response headers cannot be used for anonymous "
                               "GET requests.");
                else
                    s3_get_object(x, head);
                return;
            }
        } else if (get && bucket_readable) {
            s3_list_objects(x);
            return;
        } else if (head && bucket_readable) {
            char h[128];
            snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
            (void)http_respond(x->r, 200, h, 0);
            return;
        }
    }
    s3_err(x, S3E_ACCESS_DENIED);
}
