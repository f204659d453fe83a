/*
 * s3_int: the rooms of the S3 API layer and what they share. The door is
 * s3.h (s3_handle); behind it:
 *
 *   s3.c            routing: request id, authentication, naming, dispatch
 *   s3_auth.c       SigV4 (header, presigned), request bodies as signed
 *   s3_bucket.c     buckets: owners, generations, bucket locks, create/delete
 *   s3_gone.c       deleted buckets: what they left on the drives, purged
 *   s3_acl.c        ACLs: canned and grants (s3/acl), Get/Put *Acl
 *   s3_foreign.c    requests by anyone but the bucket's owner, as the ACLs grant
 *   s3_list.c       ListObjects V1/V2, ListObjectVersions
 *   s3_object.c     Put/Get/Head object, attributes
 *   s3_delete.c     DeleteObject, DeleteObjects: conditions, markers, versions
 *   s3_versioning.c bucket versioning, ?versionId, version headers
 *   s3_copy.c       CopyObject, the copy source (UploadPartCopy too)
 *   s3_multipart.c  multipart uploads
 *   s3_mpu_cks.c    multipart checksums (composite, full-object), GET/HEAD ?partNumber
 *   s3_tagging.c    object and bucket tags
 *   s3_cors.c       CORS rules, preflight, Access-Control-* headers
 *   s3_lifecycle.c  lifecycle configuration, x-amz-expiration (rules: s3/lifecycle)
 *   s3_lc_worker.c  the lifecycle worker: passes over buckets carrying the rules out
 *   s3_post.c       browser form uploads (POST Object, signed policies)
 *   s3_batch.c      batch GET (POST ?batch-get, warmlake's: docs/batch-get.md)
 *   s3_reply.c      XML responses, S3 errors (table: s3_errors.h)
 *   s3_unserved.c   what S3 has and warmlake does not serve: refused, or never configured
 *   s3_util.c       buffers, escaping, decoding, dates, user metadata
 *
 * One ctx_t per request, on the worker thread that runs it. Handlers answer
 * (an error included) before they return. Locks, in order: a bucket's rwlock
 * (s3_bucket_lock: commits shared, DeleteBucket/CreateBucket exclusive),
 * then the object layer's own (obj_int.h).
 */
#ifndef WL_S3_INT_H
#define WL_S3_INT_H

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/num.h"
#include "s3/acl.h"
#include "s3/checksum.h"
#include "s3/chunked.h"
#include "s3/cors.h"
#include "s3/lifecycle.h"
#include "s3/sigv4.h"
#include "s3/xml.h"
#include "server/s3.h"
#include "server/s3_errors.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define IO_CHUNK        (1u << 20)
/* A GET body up to this size is sent in one chunk with its head, copied (s3_get_object). */
#define S3_GET_COPY_MAX (16u << 10)
#define BUCKETS                                                                                    \
    "\x02"                                                                                         \
    "buckets" /* internal: one object per bucket */
#define CORS_OBJECTS                                                                               \
    "\x02"                                                                                         \
    "cors" /* internal: one object per bucket incarnation, its CORSConfiguration */
#define LC_OBJECTS                                                                                 \
    "\x02"                                                                                         \
    "lifecycle" /* internal: one object per bucket incarnation, its canonical configuration */
#define GONE_BUCKETS                                                                               \
    "\x02"                                                                                         \
    "gone" /* internal: one empty object per deleted incarnation, until purged (s3_gone.c) */
#define MAX_KEY_LEN        1024
/*
 * A bucket's objects, uploads and parts are stored under "NAME\x04ID", ID
 * a random generation made when the bucket is created (buckets made before
 * generations keep NAME): a bucket deleted and created again, by anyone,
 * starts empty, and nothing written under the old one can surface.
 */
#define INAME_MAX          (64 + 1 + 16 + 1)
#define S3_ERR_NO_BUCKET   (-1000) /* the request's bucket is gone: 404 NoSuchBucket */
#define ERR_MARKER_VERSION (-1001) /* ?versionId names a delete marker: 405 MethodNotAllowed */

typedef struct {
    const s3_cfg_t *cfg;
    http_req_t *r;
    const struct http_req_info *info;
    char id[33];
    char host_id[132];    /* base64 of "<cfg->host_id>/<id>" (x-amz-id-2, HostId) */
    int anonymous;        /* no credentials: only public-read objects and buckets */
    int public_view;      /* answered as anyone may see it (s3_anonymous_op): no tag counts */
    int copy_source_mine; /* the copy's source is the requester's own (s3_open_copy_source) */
    /* A signed-in writer into someone else's bucket owns what it writes (S3's ObjectWriter
     * ownership): 1; 2 unless it gives the bucket owner full control (BucketOwnerPreferred);
     * 0 the bucket's owner owns it (the owner's own request, anonymous, BucketOwnerEnforced). */
    int writer_owns;
    /* The request's bucket record, read once (routing, access, CORS, listing owner all ask):
     * 0 not read yet, 1 read, -1 absent. Decisions under a bucket lock read it afresh. */
    int bucket_seen;
    /* A bucket lookup failed (too many stores unreachable), not "absent": a NoSuchBucket
     * this request would answer is a guess, so it answers 503 instead (s3_err_detail). */
    int bucket_lookup_failed;
    obj_info_t bucket_rec;
    char bucket[64];
    int vhost;               /* the bucket came in the Host (virtual-host style) */
    char ibucket[INAME_MAX]; /* where this incarnation's objects live (s3_bucket_access) */
    char *key;               /* decoded; "" for bucket-level requests */
    char *vid;               /* ?versionId (checked by s3_version_param), or NULL */
    char *query;
    sigv4_auth_t auth;
    uint8_t key_bytes[32];
    const char *payload; /* x-amz-content-sha256 */
    /* body */
    s3_chunked_t *chunked;
    uint8_t *raw;
    size_t raw_len, raw_off;
    int raw_eof, chunked_done;
    uint64_t decoded; /* aws-chunked: payload bytes delivered so far */
    EVP_MD_CTX *sha;
    int cks_default; /* a checksum s3_stream_body computes and keeps when none is sent */
    /* A checksum s3_stream_body computes beside the one sent, "algo:value" into cks_also_val
     * (a part of an upload without an algorithm: S3's default, whatever the part carries). */
    int cks_also;
    char cks_also_val[16 + CKS_MAX_B64];
} ctx_t;

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

typedef struct {
    uint8_t *out;
    size_t cap, len;
    uint8_t *spill; /* decoded bytes that did not fit */
    size_t spill_len;
} dec_t;

/* An object's ACL (a canned name, "private" when absent, or grants: s3/acl.h); a bucket's is
 * its record's "acl" entry. */
#define ACL_META         "\001acl"
#define CKS_META         "\001cks" /* "algo:base64" of a verified x-amz-checksum-* */
/*
 * The checksum S3 gives an object written without one (PutObject, a POST upload, the copy of
 * a source that has none), as AWS does since December 2024: CRC-64/NVME of the whole object,
 * returned with the ETag and to x-amz-checksum-mode. An erasure-coded object keeps it in
 * CKS_META; an inline one does not (three copies of 28 bytes took 1-byte objects past the
 * 1 KiB a tiny object may cost): its bytes come with its head, and it is computed from them
 * when asked for (s3_cks_of). A multipart upload created without an algorithm gets it too,
 * FULL_OBJECT: each part's is computed (beside any the client sent, CKD_META) and Complete
 * combines them. Objects erasure-coded, and parts uploaded, before this have none.
 */
#define S3_CKS_DEFAULT   CKS_CRC64NVME
/* A part's S3_CKS_DEFAULT "algo:value" when its CKS_META holds another algorithm's (an upload
 * without an algorithm whose client sent, say, CRC32 with the part). */
#define CKD_META         "\001ckd"
/* On a multipart object whose CKS_META is S3's default (its upload had no algorithm): "1".
 * GetObjectAttributes then lists no part, as for an object without a checksum. */
#define CK0_META         "\001ck0"
#define TAG_META         "\001tag" /* the object's tags, canonical "k=v&..." (s3_tagging.c) */
#define REDIRECT_META    "\001h:website-redirect" /* x-amz-website-redirect-location */
#define CKA_META         "\001cka" /* an upload's "algo:COMPOSITE|FULL_OBJECT" (s3_mpu_cks.c) */
/* The object's owner, when its writer is not the bucket's owner (x->writer_owns); absent: the
 * bucket owner's. */
#define OWNER_META       "\001own"
/* An upload's initiator, when not the bucket's owner: its access key, or ANON_INITIATOR
 * (S3 lets only the initiator upload parts and complete, and only it and the bucket owner
 * abort an upload or list its parts). Kept in the object the upload makes (a Complete sent
 * again is answered to its initiator alone), never copied from it (s3_copy.c). */
#define INITIATOR_META   "\001ini"
#define ANON_INITIATOR   "\001anonymous"
#define S3_USER_META_MAX 2048 /* x-amz-meta-* names and values, as S3 */

/* ---- s3.c ---- */
/* x's query names a sub-resource of S3's outside allowed (NULL-terminated; NULL: none):
 * 1 with 405 sent. */
int s3_stray_subresource(ctx_t *x, const char *const *allowed);
/*
 * x's query names anything but a presigned URL's parameters and allowed (NULL-terminated;
 * NULL: none): 1 with 501 sent. The operations that write or delete by default (CreateBucket,
 * DeleteBucket, PutObject, CopyObject, DeleteObject) ask it first, whoever sends them (the
 * owner, or a writer a bucket's ACL lets in): a sub-resource of a newer S3 API than this one
 * knows must not fall through to them (DELETE ?metadataConfiguration deleted the bucket, PUT
 * ?renameObject emptied the object).
 */
int s3_unknown_param(ctx_t *x, const char *const *allowed);

/* ---- s3_unserved.c ---- */
/* A sub-resource or setting S3 has and warmlake does not serve: 1 with the answer sent. */
int s3_unserved(ctx_t *x);

/* ---- s3_util.c ---- */
/* strcmp of a name and *(const char **)b: bsearch over sorted name tables. */
int s3_cmp_name(const void *a, const void *b);
/* 1 when one of the query's parameter names is one match(name, arg) takes. */
int s3_query_name(const char *q, int (*match)(const char *name, const void *arg), const void *arg);
/* An If-Match / If-None-Match value names etag: "*", or one of its comma-separated tags,
 * quoted or not (S3 takes both); a weak one (W/) only when weak_ok (If-None-Match: RFC 9110
 * 13.1.2; If-Match compares strongly). */
int s3_etag_matches(const char *hdr, const char *etag, int weak_ok);
/* Whether an If-Range value (NULL: none) lets a Range be served for an object of etag and
 * mtime (RFC 9110 13.1.5): a strong, exact tag, or the HTTP date of Last-Modified exactly. */
int s3_if_range_holds(const char *hdr, const char *etag, time_t mtime);
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_put(buf_t *b, const void *p, size_t n); /* n bytes as they are */
void buf_xml(buf_t *b, const char *s);           /* escaped as XML text, always well-formed */
void buf_url(buf_t *b, const char *s);           /* URL-encoded, '/' kept (encoding-type=url) */
void buf_url_component(buf_t *b, const char *s); /* URL-encoded, '/' too (query values) */
/* The URL of the request's bucket's object `key` as the client reached the node (http, its
 * Host, the bucket in the path unless it came in the Host, the key URL-encoded): the Location
 * of a CompleteMultipartUpload and of a POST upload, as S3 answers them. A Host with other
 * characters than a host name's gives the path alone. */
void s3_object_url(ctx_t *x, buf_t *b, const char *key);
/* A request header's value (name in any case), or NULL. */
const char *s3_hdr(const struct http_req_info *in, const char *name);
/* Percent-decode n bytes (malloc'd); NULL for a bad escape or a NUL byte. */
char *s3_pdecode(const char *s, size_t n, int plus_space);
/* Decoded value of query parameter name (malloc'd), or NULL; *present tells presence. */
char *s3_qparam(const char *q, const char *name, int *present);
void s3_iso8601(uint64_t ns, char out[32]);
void s3_http_date(uint64_t ns, char out[40]);
time_t s3_parse_http_date(const char *s); /* (time_t)-1 when absent or malformed */
/* The next read of a stream at off with len left: up to the end of the current read unit. */
size_t s3_next_piece(uint64_t off, uint64_t len, size_t unit);
/* Value of a user-metadata pair, or "" when absent; the pairs with name set to value. */
const char *s3_umeta_get(const obj_info_t *info, const char *name);
void s3_umeta_with(const obj_info_t *info, const char *name, const char *value, buf_t *out);

/* ---- s3_reply.c ---- */
void s3_respond_xml(ctx_t *x, int status, buf_t *body); /* takes body->p */
/* An S3 error answer: the table's status and message (or msg), extra elements (XML) or NULL. */
void s3_err(ctx_t *x, s3_err_t e);
void s3_err_msg(ctx_t *x, s3_err_t e, const char *msg);
void s3_err_detail(ctx_t *x, s3_err_t e, const char *msg, const char *extra);
/* An engine ERR_* (or S3_ERR_NO_BUCKET) as the S3 error a client can act on: sent, or
 * only named (a batch GET's entry). */
void s3_engine_error(ctx_t *x, int rc);
s3_err_t s3_engine_err_of(int rc);
/* 200 with an ETag and the kept checksum header (PutObject: whole, with its type; UploadPart). */
void s3_respond_etag(ctx_t *x, const char *etag, const char *cks, int whole);
/* CopyObjectResult / CopyPartResult. */
void s3_respond_copy_result(ctx_t *x, const char *element, const obj_info_t *info);

/* ---- s3_auth.c ---- */
/* The secret of an access key, or NULL. */
const char *s3_secret_of(ctx_t *x, const char *ak);
/* 0 when authenticated (or anonymous: x->anonymous); otherwise the error was sent. */
int s3_authenticate(ctx_t *x);
/* S3's largest single PUT (and part): 5 GiB. */
#define S3_MAX_PUT_BYTES (5ull << 30)
/* A PUT's body announced as S3 takes it: with a length (or chunked), at most
 * S3_MAX_PUT_BYTES. 0, or -1 with the error sent, before any 100 Continue. */
int s3_body_announced_ok(ctx_t *x);
/* Request bodies: begin (ERR_INVAL: bad x-amz-content-sha256), read decoded bytes (> 0, 0 at
 * the end, < 0 an ERR_*), end (ERR_DENIED: the signed payload hash does not match). */
int s3_body_begin(ctx_t *x);
long s3_body_read(ctx_t *x, uint8_t *buf, size_t cap, dec_t *st);
int s3_body_end(ctx_t *x);
/* Every trailer an aws-chunked body carried was announced by x-amz-trailer; else 400 sent and
 * -1 (call once s3_body_end took the body). */
int s3_trailers_announced(ctx_t *x);
/* A small body whole (at most cap bytes), NUL-terminated; NULL with the error sent. A
 * Content-MD5 or x-amz-checksum-* sent with it must match it (BadDigest): S3 checks them on
 * any body, and a wrong one was taken. */
char *s3_read_small_body(ctx_t *x, size_t cap, size_t *len);
/* The same for CompleteMultipartUpload, whose x-amz-checksum-* are the object's, not the
 * body's. */
char *s3_read_complete_body(ctx_t *x, size_t cap, size_t *len);
/* The same for a request S3 asks for the body's digest (Content-MD5 or x-amz-checksum-*,
 * checked against the body): NULL with 400 sent when there is none or it does not match. */
char *s3_read_digested_body(ctx_t *x, size_t cap, size_t *len);

/* ---- s3_bucket.c ---- */
int s3_bucket_exists(ctx_t *x, const char *name, obj_info_t *info);
const char *s3_bucket_owner(const obj_info_t *info);
/* The owner of the request's bucket ("": a bucket from before owners; NULL: no such bucket,
 * which owns nothing); read once per request. */
const char *s3_request_bucket_owner(ctx_t *x);
/* The bucket was created with x-amz-object-ownership: BucketOwnerEnforced: ACLs are disabled. */
int s3_bucket_acls_disabled(const obj_info_t *info);
void s3_bucket_iname(const char *name, const obj_info_t *bi, char out[INAME_MAX]);
/* For a background walker (who: its request id in the log): 1 and bucket name's internal name
 * in iname when the bucket exists, else 0. */
int s3_bucket_walked(const s3_cfg_t *cfg, const char *who, const char *name, char iname[INAME_MAX]);
pthread_rwlock_t *s3_bucket_lock(const char *name);
int s3_bucket_current(ctx_t *x, const char *name, const char *iname);
/* The caller's bucket: 0 and iname filled (may be NULL); else the error was sent. */
int s3_bucket_access(ctx_t *x, const char *name, char iname[INAME_MAX]);
/* HeadBucket's 200 (with x-amz-bucket-region). */
void s3_head_bucket_ok(ctx_t *x);
/*
 * Heal bucket name (its objects under iname): its record, then every
 * current object (obj_heal), a listing page at a time; pace (may be NULL)
 * runs after each object with its size and returns 1 to stop. 0, or the
 * first error that ends the walk (an object past repair counts in
 * rep->failed and the walk goes on). s3_scrub.c.
 */
int s3_heal_bucket(const s3_cfg_t *cfg, const char *name, const char *iname, obj_heal_report_t *rep,
                   int (*pace)(void *arg, uint64_t bytes), void *arg);
/* After a commit of ver into x's bucket through a cluster member: 0, or S3_ERR_NO_BUCKET (a
 * DeleteBucket through another node took the bucket; ver undone) or ERR_THROTTLED. */
int s3_commit_stays(ctx_t *x, const obj_info_t *ver);
/* The same wait for another node's DeleteBucket without the undo (the caller's). */
int s3_bucket_stays(ctx_t *x);
/* Commit w into x's bucket if it (this incarnation) still exists; else S3_ERR_NO_BUCKET. */
int s3_commit_in_bucket(ctx_t *x, obj_writer_t *w, const char *ctype, const char *um, size_t ul,
                        obj_info_t *info);
/* S3's words for two checksums in one request, and for an algorithm it does not take. */
#define S3_CKS_MULTIPLE                                                                            \
    "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
#define S3_CKS_UNSUPPORTED                                                                         \
    "Checksum algorithm provided is unsupported. Please try again with any of the valid types: "   \
    "[CRC32, CRC32C, CRC64NVME, SHA1, SHA256, SHA512, MD5, XXHASH64, XXHASH3, XXHASH128]"
/*
 * A header (or form field) name as a checksum value: its algorithm (CKS_*), 0 when it is none
 * (not x-amz-checksum-*, or its -algorithm, -type or -mode), -1 when it names an algorithm
 * not served (one S3 may add later: refused, never stored unchecked).
 */
int s3_cks_value_name(const char *name);
/* A Content-MD5 value as hex: 0, or -1 when it is not base64 of exactly 16 bytes. */
int s3_content_md5_hex(const char *v, char hex[33]);
void s3_list_buckets(ctx_t *x);
void s3_bucket_op(ctx_t *x);

/* ---- s3_acl.c ---- */
/* A canned ACL (NULL: none) a bucket (or an object) takes: 0, or -1 with 400/501 sent. */
int s3_canned_acl_check(ctx_t *x, const char *acl, int bucket);
/* The S3_PERM_* an x-amz-grant-* header name grants, or 0 when it is none of the five. */
int s3_grant_header(const char *name);
/* The ACL x's x-amz-acl or x-amz-grant-* headers ask for (not both: 400), checked, into out
 * (S3_ACL_STORED_MAX bytes) as it is stored, *given 1; *given 0 when neither is sent. 0, or -1
 * with the error sent. bucket: for a bucket (canned names differ). */
int s3_acl_from_headers(ctx_t *x, int bucket, char *out, int *given);
/* PutBucketAcl (bucket BUCKETS, key the bucket's name, name "acl") / PutObjectAcl (the
 * incarnation's iname, the key, ACL_META); owner: the bucket's, whom a body must name. */
void s3_put_acl(ctx_t *x, const char *bucket, const char *key, const char *name, const char *owner);
/* GetBucketAcl / GetObjectAcl answer for a stored ACL ("": private); owner: the bucket's or
 * the object's, bucket_owner: the bucket's (a bucket-owner-* canned ACL grants it). */
void s3_respond_acl(ctx_t *x, const char *owner, const char *bucket_owner, const char *stored);
/* GetObjectAcl of x's key (x->vid, x->ibucket set); bucket_owner: the bucket's. */
void s3_get_object_acl(ctx_t *x, const char *bucket_owner);
/* Whether a write by x's requester, asking for ACL acl (acl_given: it did ask), makes the
 * object its writer's (OWNER_META; x->writer_owns, s3_acl.c). */
int s3_writer_keeps(const ctx_t *x, int acl_given, const char *acl);
/* An object's owner: its writer's (OWNER_META), else the bucket's (bucket_owner). */
const char *s3_object_owner(const obj_info_t *oi, const char *bucket_owner);

/* ---- s3_foreign.c ---- */
/* A request by anyone but the bucket's owner: what the ACLs grant, else 403. */
void s3_anonymous_op(ctx_t *x);
/* Whether the ACL stored (an object's ACL_META, a bucket's "acl") lets x's requester (another
 * user, or anonymous) read: GET an object version, list a bucket. */
int s3_foreign_may_read(const ctx_t *x, const char *stored_acl);
/* Whether x's requester owns the object version oi (its writer's, OWNER_META, else the
 * bucket's: bucket_owner): the owner has every permission on it. */
int s3_object_mine(const ctx_t *x, const obj_info_t *oi, const char *bucket_owner);
/* What x's requester may do with the object version oi (S3_PERM_*): everything with its own,
 * else what its ACL grants (the bucket's owner too: a writer's object is not the bucket
 * owner's to read ungranted; bucket-owner-read / -full-control grant it). */
int s3_object_perms(const ctx_t *x, const obj_info_t *oi, const char *bucket_owner);
/* s3_object_perms has READ. */
int s3_may_read_object(const ctx_t *x, const obj_info_t *oi, const char *bucket_owner);
/* Whether x's requester (not the bucket's owner) may write into the bucket bi (its WRITE
 * grant); when it may, x->writer_owns is set as the bucket's ownership setting says. */
int s3_foreign_may_write(ctx_t *x, const obj_info_t *bi);
/* Whether x's requester initiated the upload whose record is rec: only it uploads parts and
 * completes (S3); the bucket's owner initiated those whose record names no initiator. */
int s3_initiated(const ctx_t *x, const obj_info_t *rec);

/* ---- s3_list.c ---- */
void s3_list_objects(ctx_t *x);
/* A continuation token naming where a listing goes on (malloc'd), and the name one names
 * (malloc'd; NULL when it is not one of ours, or another listing's: scope names the
 * listing). */
char *s3_token_encode(const char *last, const char *scope);
char *s3_token_decode(const char *tok, const char *scope);
void s3_list_versions(ctx_t *x);

/* ---- s3_object.c ---- */
/* x-amz-website-redirect-location (NULL: none): 0, or -1 with InvalidArgument sent when it is
 * no path or http(s) URL. */
int s3_redirect_header(ctx_t *x, const char **v);
/* User metadata from x-amz-meta-* (and the canned ACL); -1 with the error sent. */
int s3_build_umeta(ctx_t *x, buf_t *um);
/* The body into w, checksums and Content-MD5 checked; -1 with the error sent, w aborted. */
int s3_stream_body(ctx_t *x, obj_writer_t *w, char cks_out[128]);
void s3_cks_header(const char *kept, char *out, size_t cap);
int s3_has_response_overrides(ctx_t *x);
int s3_check_response_overrides(ctx_t *x);
/* Conditional-write headers into c (and a first look): 0, or -1 with the error sent. */
int s3_write_cond(ctx_t *x, obj_cond_t *c);
/* x-amz-copy-source-if-* against the source: 0, or -1 with 412 sent. */
int s3_copy_source_cond(ctx_t *x, const obj_info_t *si);
void s3_put_object(ctx_t *x);
void s3_get_object(ctx_t *x, int head);
/* A Range header's value (NULL: none) against an object of size bytes: 1 with *off, *len
 * set, 0 when there is none or it is ignored (several ranges, malformed: the whole object,
 * as S3), -1 when unsatisfiable (416). */
int s3_parse_range(const char *v, uint64_t size, uint64_t *off, uint64_t *len);
void s3_get_object_attributes(ctx_t *x);
obj_reader_t *s3_open_copy_source(ctx_t *x, obj_info_t *si, int *same);
/* Copy [off, off+len) of rd into w; with x->cks_default, that checksum of the bytes into
 * cks_out ("algo:value"; "" without). 0 or an ERR_*. */
int s3_copy_range(ctx_t *x, obj_reader_t *rd, obj_writer_t *w, uint64_t off, uint64_t len,
                  char cks_out[128]);
void s3_copy_object(ctx_t *x);

/* ---- s3_versioning.c ---- */
obj_versioning_t s3_versioning_of(const obj_info_t *bucket_rec);
obj_versioning_t s3_bucket_versioning(ctx_t *x); /* of the request's bucket */
/* ?versionId into x->vid: 0, or -1 with 400 sent (malformed). */
int s3_version_param(ctx_t *x);
/* x-amz-version-id (and x-amz-delete-marker) of info on the response. */
void s3_version_headers(ctx_t *x, const obj_info_t *info);
/* What the answer to a write names of the version it made: x-amz-version-id (not for a
 * null version) and x-amz-expiration (PUT, CopyObject, CompleteMultipartUpload). */
void s3_written_headers(ctx_t *x, const obj_info_t *info);
/* rc (from opening x->vid, or the current version) names a delete marker or a missing
 * version: 1 with the answer sent (405/404 with the marker's headers, NoSuchVersion). */
int s3_version_missing(ctx_t *x, int rc, const obj_info_t *info);
void s3_versioning_op(ctx_t *x); /* GET/PUT ?versioning */

/* ---- s3_delete.c ---- */
/* Delete key (vid: that version for good, else the current one as the bucket's versioning
 * says); *out the marker made or the version deleted. */
int s3_delete_one(ctx_t *x, const char *key, const char *vid, const obj_cond_t *c, obj_info_t *out);
void s3_delete_object(ctx_t *x);
void s3_delete_objects(ctx_t *x);

/* ---- s3_tagging.c ---- */
/* x-amz-tagging ("k=v&...", URL-encoded) checked into canonical form; -1 with the error sent. */
int s3_tags_from_query(ctx_t *x, const char *q, buf_t *out);
int s3_tag_count(const char *canon);
/* A CreateBucketConfiguration's Tags (Tag: Key, Value) checked into canonical form, the bucket
 * tags' rules; -1 with the error sent. */
struct xml_node;
int s3_bucket_tags_from_xml(ctx_t *x, const struct xml_node *tags, buf_t *out);
/* The error for s3_xml_tagging's ERR_TOO_LARGE (too many tags) / ERR_RANGE (a key or value
 * too long), max 10 (an object's tags) or 50 (a bucket's): S3 answers more than 10 tags of an
 * object with BadRequest, the rest with InvalidTag. */
void s3_err_tags_too_large(ctx_t *x, int rc, int max);
/* In a buffer of name\0value\0 pairs: set name to value, or remove it (NULL). */
void s3_pairs_set(buf_t *um, const char *name, const char *value);
/* GET/PUT/DELETE ?tagging of the request's object, or of its bucket. */
void s3_tagging_op(ctx_t *x, int bucket_level);

/* ---- s3_post.c ---- */
void s3_post_object(ctx_t *x); /* POST multipart/form-data to a bucket: browser uploads */

/* ---- s3_batch.c ---- */
/* POST /BUCKET?batch-get: by the owner, or (foreign) as each object's ACL grants. */
void s3_batch_get(ctx_t *x);

/* ---- s3_cors.c ---- */
void s3_cors_op(ctx_t *x);        /* GET/PUT/DELETE ?cors of the request's bucket */
void s3_cors_preflight(ctx_t *x); /* OPTIONS */
void s3_cors_actual(ctx_t *x);    /* CORS headers for a request carrying Origin */
void s3_cors_forget(ctx_t *x);    /* the deleted bucket's rules go (best effort) */

/* ---- s3_gone.c ---- */
/* A deleted bucket incarnation's internal name, noted for the scanner's purge (best effort:
 * logged when it cannot be). */
void s3_gone_note(ctx_t *x, const char *iname);
typedef struct {
    uint64_t buckets;        /* deleted incarnations purged and forgotten */
    uint64_t records, bytes; /* records they left, deleted (payload bytes) */
} s3_gone_report_t;
/* One scanner pass's purge of the incarnations deleted over grace_s ago (0: none), a
 * bounded number of them: *cursor (the caller's, NULL at first; freed and set) says where the
 * next pass goes on. stop (may be NULL): asked between incarnations. Blocks. */
void s3_gone_purge(const s3_cfg_t *cfg, uint64_t grace_s, char **cursor, int (*stop)(void *arg),
                   void *stop_arg, s3_gone_report_t *rep);

/* ---- s3_lifecycle.c ---- */
void s3_lifecycle_op(ctx_t *x);     /* GET/PUT/DELETE ?lifecycle of the request's bucket */
void s3_lifecycle_forget(ctx_t *x); /* the deleted bucket's configuration goes (best effort) */
/* The configuration bucket_rec (the record of incarnation iname) names (for the lifecycle
 * worker too): 0 with *out filled (lc_free it), ERR_NOT_FOUND when none is set (or the one
 * named was replaced since the record was read), or an engine error. Blocks (reads). */
int s3_lifecycle_load(obj_set_t *set, const char *iname, const obj_info_t *bucket_rec,
                      lc_config_t *out);
/* Heal the configuration bucket_rec names (obj_heal's answers). Blocks. */
int s3_lifecycle_heal(obj_set_t *set, const char *iname, const obj_info_t *bucket_rec,
                      obj_heal_report_t *rep);
/* Whether a bucket record says a configuration is set (cheap: no read). */
int s3_lifecycle_marked(const obj_info_t *bucket_rec);
/* x-amz-expiration for the object info describes, when an enabled Expiration rule covers it:
 * appended to hb, or (hb NULL) added to the response with http_add_headers (PUT, GET, HEAD,
 * CompleteMultipartUpload). */
void s3_lifecycle_expiration(ctx_t *x, const obj_info_t *info, buf_t *hb);

/* ---- s3_multipart.c ---- */
void s3_mpu_create(ctx_t *x);
void s3_mpu_upload_part(ctx_t *x, const char *upload, const char *partstr);
void s3_mpu_complete(ctx_t *x, const char *upload);
void s3_mpu_abort(ctx_t *x, const char *upload);
void s3_list_parts(ctx_t *x, const char *upload);
void s3_list_uploads(ctx_t *x);
/* A bucket's unfinished uploads, collected by a walk (s3_uploads_collect as the obj_upload_fn of
 * obj_mpu_list_uploads(_all)) to be acted on once it is done; freed by s3_uploads_free. */
typedef struct {
    char **keys, **ids;
    int n, cap;
} s3_uploads_t;
int s3_uploads_collect(void *arg, const char *key, const char *upload_id, const obj_info_t *info);
void s3_uploads_free(s3_uploads_t *u);

/* ---- s3_mpu_cks.c ---- */
/* CreateMultipartUpload: x-amz-checksum-algorithm/-type into um (CKA_META) and the response's
 * headers into hdr ("" when none); -1 with the error sent. */
int s3_mpu_cks_create(ctx_t *x, buf_t *um, char hdr[160]);
/* ChecksumAlgorithm and ChecksumType of an upload record (ListParts, ListMultipartUploads). */
void s3_mpu_cks_upload_xml(buf_t *b, const obj_info_t *rec);
/* UploadPart(Copy) into the upload of record rec: its algorithm into x->cks_default, a body
 * checksum in another one refused, and an UploadPart's body without one (copy 0) into a
 * COMPOSITE upload; -1 with the error sent. No I/O. */
int s3_mpu_cks_part_begin(ctx_t *x, const obj_info_t *rec, int copy);
/* A Complete's checksum state: the hooks' argument. */
typedef struct {
    const ctx_t *x;               /* the request: its requester must be the upload's initiator */
    const s3_xml_part_t *xp;      /* the parts as listed */
    int algo, full;               /* the upload's (the begin hook reads them) */
    int expect_algo;              /* x-amz-checksum-ALGO of the whole object: its algorithm, and */
    char expect[CKS_MAX_B64 + 8]; /* its value ("-N" too), "" if none */
    char type[16];                /* x-amz-checksum-type, "" if none */
    long long mp_size;            /* x-amz-mp-object-size, -1 if none */
    uint64_t total;               /* bytes of the parts seen */
    cks_t comp;                   /* COMPOSITE: over the parts' digests */
    uint64_t crc;                 /* FULL_OBJECT: the parts' CRCs combined so far */
    int n;                        /* parts folded in */
    int dflt_parts;               /* no algorithm: parts whose S3_CKS_DEFAULT was folded into crc */
    int dflt_missing; /* no algorithm: a part without it (uploaded before it was kept) */
    int began;        /* the begin hook ran (else the Complete was one done already) */
    int refused;      /* a hook refused the Complete, with err (msg "": the table's) */
    s3_err_t err;
    char msg[256];
} s3_mpu_cks_t;
/* Set c and hooks up for a Complete (no I/O); -1 with the error sent. End with _end. */
int s3_mpu_cks_complete_begin(ctx_t *x, const s3_xml_part_t *xp, int np, s3_mpu_cks_t *c,
                              obj_mpu_hooks_t *hooks);
/* When a hook refused the Complete: its error sent, 1; else 0. */
int s3_mpu_cks_complete_error(ctx_t *x, s3_mpu_cks_t *c);
void s3_mpu_cks_complete_end(s3_mpu_cks_t *c);
/* A listed object's or version's checksum: its algorithm and type (ListObjects, V2,
 * ListObjectVersions), nothing when it has none. */
void s3_cks_list_xml(buf_t *b, const obj_info_t *info);
/* The algorithm of the checksum a request sends with its body (a value header or a trailer
 * named), CKS_NONE for none: what s3_stream_body checks before x->cks_default. */
int s3_cks_request_algo(ctx_t *x);
/* An object's checksum, "algo:value": the one kept, or an inline object's default
 * (S3_CKS_DEFAULT of its bytes, from rd) into buf; "" for none. */
#define S3_CKS_MAX 128
const char *s3_cks_of(const obj_info_t *info, obj_reader_t *rd, char buf[S3_CKS_MAX]);
/* The object's <ChecksumALGO> and <ChecksumType> (CompleteMultipartUploadResult). */
void s3_mpu_cks_object_xml(buf_t *b, const obj_info_t *info);
/* The algorithm of a kept "algo:value" when the value is composite ("-N"), else CKS_NONE. */
int s3_cks_composite_algo(const char *kept);
/* A part's <ChecksumALGO> from a kept "algo:value" (nothing for ""). */
void s3_mpu_cks_part_xml(buf_t *b, const char *kept);
/* GetObjectAttributes' <Checksum> (nothing when the object has none). */
void s3_mpu_cks_attributes_xml(buf_t *b, const obj_info_t *info, obj_reader_t *rd);
/* GET/HEAD with x-amz-checksum-mode: ENABLED: x-amz-checksum-ALGO and -type of the object, or
 * (part_idx >= 0, a multipart object) of that part. */
void s3_cks_get_headers(ctx_t *x, const obj_info_t *info, obj_reader_t *rd, int part_idx,
                        buf_t *hb);
/* GET/HEAD ?partNumber: 0 when absent, the number, or -1 with the error sent (not 1..10000,
 * or with a Range). */
int s3_part_number(ctx_t *x);
/* Where part pn lies: its index (0 for a single-PUT object's part 1), *off and *len; -1 with
 * 416 InvalidPartNumber sent. */
int s3_part_locate(ctx_t *x, obj_reader_t *rd, const obj_info_t *info, int pn, uint64_t *off,
                   uint64_t *len);

#endif
