/*
 * s3_foreign: requests by anyone but the bucket's owner (anonymous, or
 * another signed-in user), served as far as the ACLs grant (s3_acl_perms)
 * and refused (403 AccessDenied) beyond, after S3's mapping of ACL
 * permissions to actions:
 *
 *   bucket READ       ListObjects (V1, V2), ListObjectVersions, HeadBucket,
 *                     ListMultipartUploads
 *   bucket WRITE      s3:PutObject and s3:DeleteObject: PutObject, CopyObject
 *                     (its source as a GET of it), POST form uploads
 *                     (s3_post.c), DeleteObject and DeleteObjects of current
 *                     versions (no versionId); a multipart upload's create,
 *                     parts (UploadPartCopy too), Complete
 *   bucket READ_ACP   GetBucketAcl        bucket WRITE_ACP  PutBucketAcl
 *   object READ       GetObject, HeadObject
 *   object READ_ACP   GetObjectAcl        object WRITE_ACP  PutObjectAcl
 *
 * FULL_CONTROL is all four. An upload's Abort and ListParts are its
 * initiator's (and the bucket owner's), whatever the grants: S3's defaults
 * for s3:AbortMultipartUpload and s3:ListMultipartUploadParts, which no ACL
 * grants. An object's tags and attributes are its owner's (the bucket's, or
 * the writer's below). Everything else (versions by id, configurations)
 * stays the bucket owner's. The bucket's owner, in turn, reads a writer's
 * object, or its ACL, only as that object's ACL grants (S3's ObjectWriter;
 * s3_object_mine); it may still overwrite or delete it. That a bucket is not there is said to
 * anyone (as S3 does), that a key is not only to whoever may list the bucket. A signed-in writer
 * owns what it writes (S3's ObjectWriter ownership; not under BucketOwnerEnforced, nor under
 * BucketOwnerPreferred when it gives the bucket owner full control: s3_acl.c) and has every
 * permission on it; its x-amz-acl / x-amz-grant-* set the new object's ACL. A copy into one's own
 * bucket may take another's object as its source where that object grants READ, as a GET of it
 * would (s3_copy.c).
 */

#include "server/s3_int.h"

static int has_param(ctx_t *x, const char *name)
{
    int present;
    char *v = s3_qparam(x->query, name, &present);
    free(v);
    return present;
}

/* Permission p in what the ACL stored gives x's requester. */
static int granted(const ctx_t *x, const char *stored, int p)
{
    return (s3_acl_perms(stored, x->anonymous ? NULL : x->auth.access_key) & p) == p;
}

int s3_foreign_may_read(const ctx_t *x, const char *stored_acl)
{
    return granted(x, stored_acl, S3_PERM_READ);
}

int s3_object_mine(const ctx_t *x, const obj_info_t *oi, const char *bucket_owner)
{
    if (x->anonymous || !bucket_owner) return 0;
    const char *o = s3_object_owner(oi, bucket_owner);
    return !o[0] || !strcmp(o, x->auth.access_key); /* "": a bucket from before owners */
}

int s3_object_perms(const ctx_t *x, const obj_info_t *oi, const char *bucket_owner)
{
    if (s3_object_mine(x, oi, bucket_owner)) return S3_PERM_FULL;
    return s3_acl_perms_of_object(s3_umeta_get(oi, ACL_META),
                                  x->anonymous ? NULL : x->auth.access_key, bucket_owner);
}

int s3_may_read_object(const ctx_t *x, const obj_info_t *oi, const char *bucket_owner)
{
    return (s3_object_perms(x, oi, bucket_owner) & S3_PERM_READ) != 0;
}

int s3_foreign_may_write(ctx_t *x, const obj_info_t *bi)
{
    if (!granted(x, s3_umeta_get(bi, "acl"), S3_PERM_WRITE)) return 0;
    if (!x->anonymous && !s3_bucket_acls_disabled(bi))
        x->writer_owns = !strcmp(s3_umeta_get(bi, "ownership"), "BucketOwnerPreferred") ? 2 : 1;
    return 1;
}

int s3_initiated(const ctx_t *x, const obj_info_t *rec)
{
    const char *ini = s3_umeta_get(rec, INITIATOR_META);
    if (!ini[0]) ini = s3_umeta_get(rec, OWNER_META); /* an upload from before INITIATOR_META */
    if (!x->public_view) return !ini[0];              /* the bucket's owner */
    if (x->anonymous) return !strcmp(ini, ANON_INITIATOR);
    return ini[0] && !strcmp(ini, x->auth.access_key);
}

/* A bucket-level request (HeadBucket, ListObjects, ListMultipartUploads, DeleteObjects,
 * Get/PutBucketAcl). */
static void foreign_bucket(ctx_t *x, const obj_info_t *bi, int acl)
{
    const char *m = x->info->method, *stored = s3_umeta_get(bi, "acl");
    const char *owner = s3_bucket_owner(bi);
    int uploads = has_param(x, "uploads"), del = has_param(x, "delete");
    int versions = has_param(x, "versions");
    if (uploads || del || versions) {
        if (uploads + del + versions > 1 || acl)
            s3_err(x, S3E_ACCESS_DENIED);
        else if (uploads && !strcmp(m, "GET") && granted(x, stored, S3_PERM_READ))
            s3_list_uploads(x);
        else if (versions && !strcmp(m, "GET") && granted(x, stored, S3_PERM_READ))
            s3_list_versions(x);
        else if (del && !strcmp(m, "POST") && s3_foreign_may_write(x, bi))
            s3_delete_objects(x); /* each version named by id refused there */
        else
            s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    if (acl && !strcmp(m, "GET") && granted(x, stored, S3_PERM_READ_ACP))
        s3_respond_acl(x, owner, owner, stored);
    else if (acl && !strcmp(m, "PUT") && granted(x, stored, S3_PERM_WRITE_ACP))
        s3_put_acl(x, BUCKETS, x->bucket, "acl", owner);
    else if (!acl && !strcmp(m, "GET") && granted(x, stored, S3_PERM_READ))
        s3_list_objects(x);
    else if (!acl && !strcmp(m, "HEAD") && granted(x, stored, S3_PERM_READ))
        s3_head_bucket_ok(x);
    else
        s3_err(x, S3E_ACCESS_DENIED);
}

/* Abort (DELETE) or ListParts (GET) of an upload: its initiator's. */
static void initiators_only(ctx_t *x, const char *upload)
{
    obj_info_t rec;
    int rc = obj_mpu_upload_stat(x->cfg->set, x->ibucket, x->key, upload, &rec);
    if (rc == ERR_NOT_FOUND)
        s3_err(x, S3E_NO_SUCH_UPLOAD);
    else if (rc)
        s3_engine_error(x, rc);
    else if (!s3_initiated(x, &rec))
        s3_err(x, S3E_ACCESS_DENIED);
    else if (x->info->method[0] == 'D')
        s3_mpu_abort(x, upload);
    else
        s3_list_parts(x, upload);
}

/*
 * A multipart upload into the bucket: create, a part, Complete by a WRITE grantee (the
 * upload id, 128 random bits, names the upload to whoever was given it); Abort and ListParts
 * by its initiator only.
 */
static void foreign_upload(ctx_t *x, const obj_info_t *bi)
{
    const char *m = x->info->method;
    int has_upload, has_part;
    char *upload = s3_qparam(x->query, "uploadId", &has_upload);
    char *part = s3_qparam(x->query, "partNumber", &has_part);
    int uploads = has_param(x, "uploads");
    const char *sc = s3_hdr(x->info, "x-amz-storage-class");
    int initiators = has_upload && !uploads && (!strcmp(m, "DELETE") || !strcmp(m, "GET"));
    if (!initiators && !s3_foreign_may_write(x, bi))
        s3_err(x, S3E_ACCESS_DENIED);
    else if (strlen(x->key) > MAX_KEY_LEN)
        s3_err(x, S3E_KEY_TOO_LONG);
    else if (sc && strcmp(sc, "STANDARD") != 0)
        s3_err(x, S3E_INVALID_STORAGE_CLASS);
    else if (has_upload && (!upload || strlen(upload) != 32))
        s3_err(x, S3E_NO_SUCH_UPLOAD);
    else if (initiators)
        initiators_only(x, upload);
    else if (!strcmp(m, "POST") && uploads && !has_upload)
        s3_mpu_create(x);
    else if (!strcmp(m, "POST") && has_upload)
        s3_mpu_complete(x, upload);
    else if (!strcmp(m, "PUT") && has_upload && has_part && part)
        s3_mpu_upload_part(x, upload, part);
    else
        s3_err(x, S3E_ACCESS_DENIED);
    free(upload);
    free(part);
}

/*
 * The version another user's request names: 0 with *oi; else -1 with the answer sent. One
 * that is not there is said so (NoSuchKey, NoSuchVersion) only to whoever may list the
 * bucket; to anyone else it is AccessDenied, as a private object is.
 */
static int foreign_version(ctx_t *x, const char *bacl, obj_info_t *oi)
{
    if (s3_version_param(x) != 0) return -1;
    int rc = strlen(x->key) <= MAX_KEY_LEN
                 ? obj_stat_version(x->cfg->set, x->ibucket, x->key, x->vid, oi)
                 : ERR_NOT_FOUND;
    if (rc == 0 && oi->deleted) rc = ERR_NOT_FOUND;
    if (rc == 0) return 0;
    if (rc != ERR_NOT_FOUND)
        s3_engine_error(x, rc);
    else if (s3_foreign_may_read(x, bacl))
        s3_err(x, x->vid ? S3E_NO_SUCH_VERSION : S3E_NO_SUCH_KEY);
    else
        s3_err(x, S3E_ACCESS_DENIED);
    return -1;
}

/*
 * An object version's tags: its owner's (no ACL grants them); its attributes: whoever may
 * read it (S3's READ). The operations check again on the version they meet (replaced
 * meanwhile: the tag commit, the attributes' open).
 */
static void object_owners(ctx_t *x, const char *bacl, const char *owner, int tagging)
{
    obj_info_t oi;
    if (foreign_version(x, bacl, &oi) != 0) return;
    if (!(tagging ? s3_object_mine(x, &oi, owner) : s3_may_read_object(x, &oi, owner)))
        s3_err(x, S3E_ACCESS_DENIED);
    else if (tagging)
        s3_tagging_op(x, 0);
    else
        s3_get_object_attributes(x);
}

/* An object-level request. */
static void foreign_object(ctx_t *x, const obj_info_t *bi, int acl)
{
    const char *m = x->info->method, *bacl = s3_umeta_get(bi, "acl");
    const char *owner = s3_bucket_owner(bi);
    int get = !strcmp(m, "GET"), head = !strcmp(m, "HEAD");
    int tagging = has_param(x, "tagging"), attributes = has_param(x, "attributes");
    if (tagging || attributes) {
        if (acl || (x->anonymous && tagging) || (attributes && (!get || tagging)))
            s3_err(x, S3E_ACCESS_DENIED);
        else
            object_owners(x, bacl, owner, tagging);
        return;
    }
    if (!acl && (has_param(x, "uploads") || has_param(x, "uploadId"))) {
        foreign_upload(x, bi);
        return;
    }
    /* Bucket WRITE: a PUT or a copy (no part), or a DELETE of the current version. */
    if (!acl && (!strcmp(m, "PUT") || !strcmp(m, "DELETE"))) {
        const char *sc = s3_hdr(x->info, "x-amz-storage-class");
        if (has_param(x, "partNumber") || has_param(x, "versionId") ||
            !s3_foreign_may_write(x, bi)) {
            s3_err(x, S3E_ACCESS_DENIED);
        } else if (strlen(x->key) > MAX_KEY_LEN) {
            s3_err(x, S3E_KEY_TOO_LONG);
        } else if (m[0] == 'P' && sc && strcmp(sc, "STANDARD") != 0) {
            s3_err(x, S3E_INVALID_STORAGE_CLASS); /* as the owner's PUT (was stored) */
        } else if (m[0] == 'P' && s3_hdr(x->info, "x-amz-copy-source")) {
            s3_copy_object(x); /* its source checked as a GET of it (s3_copy.c) */
        } else if (m[0] == 'P') {
            s3_put_object(x);
        } else {
            s3_delete_object(x);
        }
        return;
    }
    if (!(get || head || (acl && !strcmp(m, "PUT"))) || (acl && head)) {
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    /* The version asked for must be granted itself. */
    obj_info_t oi;
    if (foreign_version(x, bacl, &oi) != 0) return;
    const char *oacl = s3_umeta_get(&oi, ACL_META);
    int mine = s3_object_mine(x, &oi, owner);
    if (acl && get && (mine || granted(x, oacl, S3_PERM_READ_ACP))) {
        s3_respond_acl(x, s3_object_owner(&oi, owner), owner, oacl);
    } else if (acl && !get && (mine || granted(x, oacl, S3_PERM_WRITE_ACP))) {
        s3_put_acl(x, x->ibucket, x->key, ACL_META, owner);
    } else if (!acl && (mine || s3_foreign_may_read(x, oacl))) {
        if (s3_has_response_overrides(x))
            s3_err_msg(x, S3E_INVALID_REQUEST,
                       "Request specific response headers cannot be used for anonymous "
                       "GET requests.");
        else {
            s3_get_object(x, head);
        }
    } else {
        s3_err(x, S3E_ACCESS_DENIED);
    }
}

void s3_anonymous_op(ctx_t *x)
{
    x->public_view = 1;
    const char *m = x->info->method;
    /* Whether there is a bucket is said first, whatever the sub-resource (an anonymous
     * ?lifecycle of a missing bucket was AccessDenied, its ?policy NoSuchBucket). */
    obj_info_t bi;
    if (!x->bucket[0]) {
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    if (!s3_bucket_exists(x, x->bucket, &bi)) {
        /* As S3 answers anyone reading; writes learn nothing. */
        s3_err(x, !strcmp(m, "GET") || !strcmp(m, "HEAD") ? S3E_NO_SUCH_BUCKET : S3E_ACCESS_DENIED);
        return;
    }
    /* Sub-resources other than ?acl (tags, uploads, versions, configurations) are the
     * owner's, whatever the ACLs say. */
    static const char *const owners[] = {"tagging",    "location",  "attributes", "cors",
                                         "versioning", "lifecycle", NULL};
    for (const char *const *q = owners; *q; q++)
        if (has_param(x, *q) &&
            !(x->key[0] && (!strcmp(*q, "tagging") || !strcmp(*q, "attributes")))) {
            s3_err(x, S3E_ACCESS_DENIED);
            return;
        }
    /* DeleteObjects (POST ?delete) and version listings are the bucket's. */
    if ((x->key[0] && (has_param(x, "delete") || has_param(x, "versions"))) ||
        (!x->key[0] && has_param(x, "uploadId"))) {
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    s3_bucket_iname(x->bucket, &bi, x->ibucket);
    int acl = has_param(x, "acl");
    if (x->key[0])
        foreign_object(x, &bi, acl);
    else
        foreign_bucket(x, &bi, acl);
}
