#include "server/s3.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/num.h"
#include "s3/checksum.h"
#include "s3/chunked.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define IO_CHUNK (1u << 20)
#define BUCKETS                                                                                    \
    "\x02"                                                                                         \
    "buckets" /* internal: one object per bucket */
#define MAX_KEY_LEN      1024
/*
 * A bucket's objects, uploads and parts are stored under "NAME\x04ID", ID
 * a random generation made when the bucket is created (buckets made before
 * generations keep NAME): a bucket deleted and created again, by anyone,
 * starts empty, and nothing written under the old one can surface.
 */
#define INAME_MAX        (64 + 1 + 16 + 1)
#define S3_ERR_NO_BUCKET (-1000) /* the request's bucket is gone: 404 NoSuchBucket */

typedef struct {
    const s3_cfg_t *cfg;
    http_req_t *r;
    const struct http_req_info *info;
    char id[33];
    int anonymous; /* no credentials: only public-read objects and buckets */
    char bucket[64];
    char ibucket[INAME_MAX]; /* where this incarnation's objects live (bucket_access) */
    char *key;               /* decoded; "" for bucket-level requests */
    char *query;
    sigv4_auth_t auth;
    uint8_t key_bytes[32];
    const char *payload; /* x-amz-content-sha256 */
    /* body */
    s3_chunked_t *chunked;
    uint8_t *raw;
    size_t raw_len, raw_off;
    int raw_eof, chunked_done;
    EVP_MD_CTX *sha;
} ctx_t;

static void list_objects(ctx_t *x);
static void list_versions(ctx_t *x);
static void delete_objects(ctx_t *x);
static void respond_acl(ctx_t *x, const char *owner, int public_read);
static void list_uploads(ctx_t *x);
static void list_parts(ctx_t *x, const char *upload);

/* ---- helpers ---- */

static const char *hdr(const struct http_req_info *in, const char *name)
{
    for (int i = 0; i < in->nheaders; i++)
        if (strcasecmp(in->headers[i].name, name) == 0) return in->headers[i].value;
    return NULL;
}

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static void bprintf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (b->p && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
}

static void bxml(buf_t *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            bprintf(b, "&amp;");
            break;
        case '<':
            bprintf(b, "&lt;");
            break;
        case '>':
            bprintf(b, "&gt;");
            break;
        case '"':
            bprintf(b, "&quot;");
            break;
        case '\'':
            bprintf(b, "&apos;");
            break;
        case '\r':
            bprintf(b, "&#13;"); /* a literal CR would be read back as LF */
            break;
        default: {
            /* Whatever XML cannot carry (bad UTF-8, control bytes) becomes U+FFFD: always
             * well-formed. Keys are checked on the way in, so this is for echoed input. */
            size_t l = s3_xml_char_len((const unsigned char *)s, strlen(s));
            if (!l) {
                bprintf(b, "\xEF\xBF\xBD");
            } else {
                bprintf(b, "%.*s", (int)l, s);
                s += l - 1;
            }
        }
        }
    }
}

static void burl(buf_t *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || c == '/')
            bprintf(b, "%c", c);
        else
            bprintf(b, "%%%02X", c);
    }
}

static int hexv(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Percent-decode n bytes (plus_space for queries). NULL on a bad escape or NUL. */
static char *pdecode(const char *s, size_t n, int plus_space)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= n || (h = hexv(s[i + 1])) < 0 || (l = hexv(s[i + 2])) < 0) {
                free(out);
                return NULL;
            }
            c = h << 4 | l;
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        if (c == 0) {
            free(out);
            return NULL;
        }
        *o++ = (char)c;
    }
    *o = 0;
    return out;
}

/* Decoded value of query parameter name (malloc'd), or NULL; *present tells presence. */
static char *qparam(const char *q, const char *name, int *present)
{
    size_t nl = strlen(name);
    *present = 0;
    for (const char *p = q; p && *p;) {
        const char *e = strchr(p, '&');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= nl && memcmp(p, name, nl) == 0 && (len == nl || p[nl] == '=')) {
            *present = 1;
            return len == nl ? xstrdup("") : pdecode(p + nl + 1, len - nl - 1, 1);
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

static void iso8601(uint64_t ns, char out[32])
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    char s[24];
    gmtime_r(&t, &tm);
    strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%.19s.%03uZ", s, (unsigned)(ns / 1000000ull % 1000));
}

static void http_date(uint64_t ns, char out[40])
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* An HTTP date (IMF-fixdate), or -1 when absent or unparsable (then it is ignored). */
static time_t parse_http_date(const char *s)
{
    struct tm tm = {0};
    const char *end;
    if (!s || !(end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm)) || *end) return (time_t)-1;
    return timegm(&tm);
}

/* ---- responses ---- */

static void respond_xml(ctx_t *x, int status, buf_t *body)
{
    char h[256];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n", x->id);
    (void)http_respond_full(x->r, status, h, body->p, body->len);
    free(body->p);
}

/* An S3 error; extra: more elements for <Error> (already XML), or NULL. */
static void s3_error_x(ctx_t *x, int status, const char *code, const char *msg, const char *extra)
{
    buf_t b = {0};
    char h[256];
    if (status >= 500) /* the line carries req=ID (log_set_request) */
        log_error("event=s3_error status=%d code=%s method=%s target=%.200s", status, code,
                  x->info->method, x->info->target);
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>",
            code);
    bxml(&b, msg);
    bprintf(&b, "</Message>%s<Resource>", extra ? extra : "");
    bxml(&b, x->info->target);
    bprintf(&b, "</Resource><RequestId>%s</RequestId></Error>", x->id);
    if (strcmp(x->info->method, "HEAD") == 0) {
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
        (void)http_respond(x->r, status, h, 0);
        free(b.p);
        return;
    }
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n%s", x->id,
             status == 503 ? "Retry-After: 1\r\n" : "");
    (void)http_respond_full(x->r, status, h, b.p, b.len);
    free(b.p);
}

static void s3_error(ctx_t *x, int status, const char *code, const char *msg)
{
    s3_error_x(x, status, code, msg, NULL);
}

/* Map an engine error to the S3 answer. */
static void s3_engine_error(ctx_t *x, int rc)
{
    switch (rc) {
    case ERR_NOT_FOUND:
        s3_error(x, 404, "NoSuchKey", "The specified key does not exist.");
        break;
    case S3_ERR_NO_BUCKET:
        s3_error(x, 404, "NoSuchBucket", "The specified bucket does not exist.");
        break;
    case ERR_THROTTLED:
    case ERR_AGAIN: /* an object overwritten faster than a reader could open it */
        s3_error(x, 503, "SlowDown", "Please reduce your request rate.");
        break;
    case ERR_NOSPC:
        s3_error(x, 507, "InsufficientStorage", "Not enough storage space to store the object.");
        break;
    case ERR_UNRECOVERABLE:
        s3_error(x, 503, "ServiceUnavailable", "Too many drives are unavailable.");
        break;
    case ERR_TOO_LARGE:
        s3_error(x, 400, "EntityTooLarge", "Too large.");
        break;
    case ERR_INVAL:
        s3_error(x, 400, "InvalidArgument", "Invalid argument.");
        break;
    default:
        s3_error(x, 500, "InternalError", "We encountered an internal error.");
    }
}

/* ---- authentication ---- */

static const char *secret_of(ctx_t *x, const char *ak)
{
    for (int i = 0; i < x->cfg->nusers; i++)
        if (strcmp(x->cfg->users[i].access_key, ak) == 0) return x->cfg->users[i].secret;
    return NULL;
}

static time_t parse_amz_date(const char *s)
{
    struct tm tm = {0};
    if (!s || strlen(s) != 16 || !strptime(s, "%Y%m%dT%H%M%SZ", &tm)) return (time_t)-1;
    return timegm(&tm);
}

/* 0 when authenticated; otherwise the error response has been sent. */
static int authenticate(ctx_t *x)
{
    const struct http_req_info *in = x->info;
    const char *authz = hdr(in, "authorization");
    const char *target = in->target, *q = strchr(target, '?');
    size_t plen = q ? (size_t)(q - target) : strlen(target);
    int rc;

    if (authz)
        rc = sigv4_parse_header(authz, strlen(authz), &x->auth);
    else
        rc = sigv4_parse_query(q ? q + 1 : "", q ? strlen(q + 1) : 0, &x->auth);
    if (rc == ERR_NOT_FOUND) {
        x->anonymous = 1; /* s3_handle lets it reach public-read data only */
        return 0;
    }
    if (rc) {
        s3_error(x, 400, "AuthorizationHeaderMalformed", "The authorization is malformed.");
        return -1;
    }
    const char *secret = secret_of(x, x->auth.access_key);
    if (!secret) {
        s3_error(x, 403, "InvalidAccessKeyId",
                 "The AWS Access Key Id you provided does not exist in our records.");
        return -1;
    }
    if (!x->auth.presigned) {
        const char *d = hdr(in, "x-amz-date");
        if (!d || strlen(d) != 16) {
            s3_error(x, 403, "AccessDenied", "x-amz-date is required.");
            return -1;
        }
        strcpy(x->auth.amz_date, d);
    }
    time_t t = parse_amz_date(x->auth.amz_date), now = time(NULL);
    if (t == (time_t)-1) {
        s3_error(x, 403, "AccessDenied", "Bad date.");
        return -1;
    }
    if (x->auth.presigned) {
        if (now > t + x->auth.expires) {
            s3_error(x, 403, "AccessDenied", "Request has expired");
            return -1;
        }
        if (t > now + x->cfg->max_skew_s) {
            s3_error(x, 403, "AccessDenied", "Request is not valid yet");
            return -1;
        }
    } else if (t > now + x->cfg->max_skew_s || t < now - x->cfg->max_skew_s) {
        s3_error(x, 403, "RequestTimeTooSkewed",
                 "The difference between the request time and the current time is too large.");
        return -1;
    }
    /* The credential scope must name this node's region and the date being signed. */
    if (strcmp(x->auth.region, x->cfg->region) != 0 || strcmp(x->auth.service, "s3") != 0) {
        buf_t m = {0}, e = {0};
        bprintf(&m, "%s; the region '%s' is wrong; expecting '%s'",
                x->auth.presigned ? "Error parsing the X-Amz-Credential parameter"
                                  : "The authorization header is malformed",
                x->auth.region, x->cfg->region);
        bprintf(&e, "<Region>");
        bxml(&e, x->cfg->region);
        bprintf(&e, "</Region>");
        if (strcmp(x->auth.service, "s3") != 0) {
            free(m.p);
            m = (buf_t){0};
            bprintf(&m, "The authorization is malformed; incorrect service '%s'; expecting 's3'",
                    x->auth.service);
        }
        s3_error_x(x, 400,
                   x->auth.presigned ? "AuthorizationQueryParametersError"
                                     : "AuthorizationHeaderMalformed",
                   m.p, e.p);
        free(m.p);
        free(e.p);
        return -1;
    }
    if (strncmp(x->auth.date, x->auth.amz_date, 8) != 0) {
        if (x->auth.presigned)
            s3_error(x, 403, "SignatureDoesNotMatch",
                     "The request signature we calculated does not match the signature you "
                     "provided.");
        else
            s3_error(x, 400, "AuthorizationHeaderMalformed",
                     "The authorization header is malformed; Invalid credential date. Date is "
                     "not the same as X-Amz-Date.");
        return -1;
    }
    x->payload = x->auth.presigned ? SIGV4_UNSIGNED : hdr(in, "x-amz-content-sha256");
    if (!x->payload) {
        s3_error(x, 400, "InvalidRequest", "Missing required header x-amz-content-sha256.");
        return -1;
    }
    sigv4_header_t h[HTTP_MAX_HEADERS];
    for (int i = 0; i < in->nheaders; i++)
        h[i] = (sigv4_header_t){in->headers[i].name, strlen(in->headers[i].name),
                                in->headers[i].value, strlen(in->headers[i].value)};
    sigv4_request_t req = {
        in->method,           target,    plen, q ? q + 1 : NULL, q ? strlen(q + 1) : 0, h,
        (size_t)in->nheaders, x->payload};
    const char *unsigned_hdr;
    if (sigv4_check_coverage(&req, &x->auth, &unsigned_hdr) != 0) {
        buf_t e = {0};
        bprintf(&e, "<HeadersNotSigned>");
        bxml(&e, unsigned_hdr);
        bprintf(&e, "</HeadersNotSigned>");
        s3_error_x(x, 403, "AccessDenied",
                   "There were headers present in the request which were not signed", e.p);
        free(e.p);
        return -1;
    }
    if (sigv4_verify(&req, &x->auth, secret, x->key_bytes) != 0) {
        s3_error(x, 403, "SignatureDoesNotMatch",
                 "The request signature we calculated does not match the signature you "
                 "provided.");
        return -1;
    }
    return 0;
}

/* ---- request bodies: plain, signed-hash, or aws-chunked ---- */

static int body_begin(ctx_t *x)
{
    const char *p = x->payload;
    if (strncmp(p, "STREAMING-", 10) == 0) {
        int signed_chunks = strstr(p, "HMAC") != NULL;
        int trailer = strstr(p, "TRAILER") != NULL;
        char scope[160];
        sigv4_scope(&x->auth, scope, sizeof(scope));
        x->chunked = s3_chunked_new(signed_chunks, trailer, x->key_bytes, x->auth.amz_date, scope,
                                    x->auth.signature);
        x->raw = bufpool_get(obj_set_buffers(x->cfg->set), IO_CHUNK);
    } else if (strcmp(p, SIGV4_UNSIGNED) != 0) {
        if (strlen(p) != 64) return ERR_INVAL;
        x->sha = EVP_MD_CTX_new();
        EVP_DigestInit_ex(x->sha, EVP_sha256(), NULL);
    }
    return 0;
}

typedef struct {
    uint8_t *out;
    size_t cap, len;
    uint8_t *spill; /* decoded bytes that did not fit */
    size_t spill_len;
} dec_t;

static int dec_sink(void *arg, const uint8_t *p, size_t n)
{
    dec_t *d = arg;
    size_t take = n < d->cap - d->len ? n : d->cap - d->len;
    memcpy(d->out + d->len, p, take);
    d->len += take;
    if (take < n) {
        d->spill = xrealloc(d->spill, d->spill_len + n - take);
        memcpy(d->spill + d->spill_len, p + take, n - take);
        d->spill_len += n - take;
    }
    return 0;
}

/* Decoded body bytes: > 0, 0 at the end, < 0 an error code. */
static long body_read(ctx_t *x, uint8_t *buf, size_t cap, dec_t *st)
{
    if (!x->chunked) {
        long n = http_body_read(x->r, buf, cap);
        if (n > 0 && x->sha) EVP_DigestUpdate(x->sha, buf, (size_t)n);
        return n;
    }
    /* Leftover decoded bytes first. */
    if (st->spill_len) {
        size_t n = st->spill_len < cap ? st->spill_len : cap;
        memcpy(buf, st->spill, n);
        memmove(st->spill, st->spill + n, st->spill_len - n);
        st->spill_len -= n;
        return (long)n;
    }
    if (x->chunked_done) return 0;
    for (;;) {
        if (x->raw_off == x->raw_len) {
            if (x->raw_eof) return ERR_INVAL; /* body ended before the last chunk */
            long n = http_body_read(x->r, x->raw, IO_CHUNK);
            if (n < 0) return n;
            if (n == 0) x->raw_eof = 1;
            x->raw_off = 0;
            x->raw_len = (size_t)n;
            if (n == 0) return ERR_INVAL;
        }
        st->out = buf;
        st->cap = cap;
        st->len = 0;
        size_t used = 0;
        int rc = s3_chunked_feed(x->chunked, x->raw + x->raw_off, x->raw_len - x->raw_off, &used,
                                 dec_sink, st);
        x->raw_off += used;
        if (rc < 0) return rc;
        /* The last chunk may end the same feed that produced data: remember it. */
        if (rc == 1) x->chunked_done = 1;
        if (st->len) return (long)st->len;
        if (rc == 1) return 0;
    }
}

/* After the body: the signed payload hash must match. */
static int body_end(ctx_t *x)
{
    if (x->sha) {
        uint8_t h[32];
        char hex[65];
        EVP_DigestFinal_ex(x->sha, h, NULL);
        sigv4_hex(h, 32, hex);
        if (strcmp(hex, x->payload) != 0) return ERR_DENIED;
    }
    return 0;
}

/* ---- buckets ---- */

int s3_bucket_name_ok(const char *n)
{
    size_t l = strlen(n);
    if (l < 3 || l > 63) return 0;
    for (size_t i = 0; i < l; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return 0;
    }
    if (!((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= '0' && n[0] <= '9')) || n[l - 1] == '-' ||
        n[l - 1] == '.' || strstr(n, ".."))
        return 0;
    return 1;
}

static int bucket_exists(ctx_t *x, const char *name, obj_info_t *info)
{
    obj_info_t tmp;
    return obj_stat(x->cfg->set, BUCKETS, name, info ? info : &tmp) == 0;
}

/*
 * Walk the "name\0value\0" pairs of an object's user metadata: from *pos, the
 * next pair's name and value; 0 at the end (or at a truncated pair).
 */
static int umeta_next(const obj_info_t *info, size_t *pos, const char **name, const char **value)
{
    size_t p = *pos;
    if (p >= info->umeta_len) return 0;
    const char *n = info->umeta + p;
    size_t nl = strnlen(n, info->umeta_len - p);
    if (p + nl + 1 >= info->umeta_len) return 0;
    const char *v = n + nl + 1;
    size_t vl = strnlen(v, info->umeta_len - p - nl - 1);
    *pos = p + nl + 1 + vl + 1;
    *name = n;
    *value = v;
    return 1;
}

/* The umeta pairs of info with name set to value (replaced or added) into out. */
static void umeta_with(const obj_info_t *info, const char *name, const char *value, buf_t *out)
{
    const char *n, *v;
    for (size_t p = 0; umeta_next(info, &p, &n, &v);)
        if (strcmp(n, name) != 0) bprintf(out, "%s%c%s%c", n, 0, v, 0);
    bprintf(out, "%s%c%s%c", name, 0, value, 0);
}

/* Value of a pair in an object's user metadata, or "" when absent. */
static const char *umeta_get(const obj_info_t *info, const char *name)
{
    const char *n, *v;
    for (size_t p = 0; umeta_next(info, &p, &n, &v);)
        if (strcmp(n, name) == 0) return v;
    return "";
}

/* The owner recorded in a bucket record, or "" for none. */
static const char *bucket_owner(const obj_info_t *info)
{
    return umeta_get(info, "owner");
}

/* Canned ACLs: "private" (default) or "public-read"; the object metadata name holding it. */
#define ACL_META "\001acl"
#define CKS_META "\001cks" /* "algo:base64" of a verified x-amz-checksum-* */

/* Where the objects of the bucket described by bi live (see INAME_MAX). */
static void bucket_iname(const char *name, const obj_info_t *bi, char out[INAME_MAX])
{
    const char *id = umeta_get(bi, "id");
    if (id[0])
        snprintf(out, INAME_MAX, "%s\x04%s", name, id);
    else
        snprintf(out, INAME_MAX, "%s", name);
}

/*
 * Bucket locks (striped by name): commits into a bucket hold one shared,
 * DeleteBucket and CreateBucket exclusive. So a PUT racing a DeleteBucket
 * either commits first (and the delete finds the bucket not empty) or finds
 * the bucket gone and fails; never an object in a deleted bucket.
 */
#define BUCKET_LOCKS 64
static pthread_rwlock_t bucket_locks[BUCKET_LOCKS];
static pthread_once_t bucket_locks_once = PTHREAD_ONCE_INIT;

static void bucket_locks_init(void)
{
    for (int i = 0; i < BUCKET_LOCKS; i++)
        pthread_rwlock_init(&bucket_locks[i], NULL);
}

static pthread_rwlock_t *bucket_lock(const char *name)
{
    uint32_t h = 2166136261u;
    pthread_once(&bucket_locks_once, bucket_locks_init);
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &bucket_locks[h % BUCKET_LOCKS];
}

/* Under the bucket's lock: the incarnation iname of bucket name still exists. */
static int bucket_current(ctx_t *x, const char *name, const char *iname)
{
    obj_info_t bi;
    char now[INAME_MAX];
    if (!bucket_exists(x, name, &bi)) return 0;
    bucket_iname(name, &bi, now);
    return strcmp(now, iname) == 0;
}

/*
 * The bucket exists and belongs to the caller: 0, with iname (if not NULL)
 * where its objects live. Otherwise the error has been sent (404
 * NoSuchBucket, 403 AccessDenied: each user sees only its own).
 */
static int bucket_access(ctx_t *x, const char *name, char iname[INAME_MAX])
{
    obj_info_t info;
    if (!bucket_exists(x, name, &info)) {
        s3_error(x, 404, "NoSuchBucket", "The specified bucket does not exist.");
        return -1;
    }
    const char *owner = bucket_owner(&info);
    if (owner[0] && strcmp(owner, x->auth.access_key) != 0) {
        s3_error(x, 403, "AccessDenied", "Access Denied");
        return -1;
    }
    if (iname) bucket_iname(name, &info, iname);
    return 0;
}

/*
 * Commit w into the request's bucket, if the bucket (this incarnation) is
 * still there; otherwise w is aborted and S3_ERR_NO_BUCKET returned.
 */
static int commit_in_bucket(ctx_t *x, obj_writer_t *w, const char *ctype, const char *um, size_t ul,
                            obj_info_t *info)
{
    pthread_rwlock_t *lk = bucket_lock(x->bucket);
    int rc;
    pthread_rwlock_rdlock(lk);
    if (!bucket_current(x, x->bucket, x->ibucket)) {
        obj_put_abort(w);
        rc = S3_ERR_NO_BUCKET;
    } else {
        rc = obj_put_commit(w, ctype, um, ul, info);
    }
    pthread_rwlock_unlock(lk);
    return rc;
}

typedef struct {
    buf_t *b;
    const char *owner;
} lb_t;

static int list_bucket_cb(void *arg, const char *key, const obj_info_t *info)
{
    lb_t *l = arg;
    buf_t *b = l->b;
    char t[32];
    const char *owner = bucket_owner(info);
    if (owner[0] && strcmp(owner, l->owner) != 0) return 0;
    iso8601(info->mtime_ns, t);
    bprintf(b, "<Bucket><Name>");
    bxml(b, key);
    bprintf(b, "</Name><CreationDate>%s</CreationDate></Bucket>", t);
    return 0;
}

static void list_buckets(ctx_t *x)
{
    buf_t b = {0};
    bprintf(&b,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult "
            "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>%s</ID>"
            "<DisplayName>%s</DisplayName></Owner><Buckets>",
            x->auth.access_key, x->auth.access_key);
    lb_t l = {&b, x->auth.access_key};
    int rc = obj_list(x->cfg->set, BUCKETS, NULL, NULL, list_bucket_cb, &l);
    if (rc < 0) {
        free(b.p);
        s3_engine_error(x, rc);
        return;
    }
    bprintf(&b, "</Buckets></ListAllMyBucketsResult>");
    respond_xml(x, 200, &b);
}

/*
 * GET /_warmlake/stats (any authenticated user; "_" keeps the name out of
 * the bucket namespace): the engine counters of every drive and the node's
 * totals as JSON, so benchmarks and operators read write amplification and
 * space without stopping the node.
 */
static void node_stats(ctx_t *x)
{
    buf_t b = {0};
    drive_stats_t t = {0};
    int n = obj_set_width(x->cfg->set);
    bprintf(&b, "{\"drives\":[");
    for (int i = 0; i < n; i++) {
        drive_stats_t st;
        if (obj_set_stats(x->cfg->set, i, &st) != 0) continue;
        bprintf(
            &b,
            "%s{\"index\":%d,\"user_bytes\":%llu,\"host_bytes\":%llu,\"relocated_bytes\":%llu,"
            "\"padding_bytes\":%llu,\"index_bytes\":%llu,\"live_bytes\":%llu,\"used_bytes\":%llu,"
            "\"capacity\":%llu,\"write_amp\":%.4f,\"compactions\":%llu,\"throttled\":%llu,"
            "\"budget_rate\":%.0f,\"projected_years\":%.2f,\"reads_direct\":%llu,"
            "\"reads_copied\":%llu}",
            i ? "," : "", i, (unsigned long long)st.user_bytes, (unsigned long long)st.host_bytes,
            (unsigned long long)st.relocated_bytes, (unsigned long long)st.padding_bytes,
            (unsigned long long)st.index_bytes, (unsigned long long)st.live_bytes,
            (unsigned long long)st.used_bytes, (unsigned long long)st.capacity, st.write_amp,
            (unsigned long long)st.compactions, (unsigned long long)st.throttled, st.budget_rate,
            st.projected_years, (unsigned long long)st.reads_direct,
            (unsigned long long)st.reads_copied);
        t.user_bytes += st.user_bytes;
        t.host_bytes += st.host_bytes;
        t.relocated_bytes += st.relocated_bytes;
        t.live_bytes += st.live_bytes;
        t.capacity += st.capacity;
        t.throttled += st.throttled;
    }
    bprintf(&b,
            "],\"total\":{\"user_bytes\":%llu,\"host_bytes\":%llu,\"relocated_bytes\":%llu,"
            "\"live_bytes\":%llu,\"capacity\":%llu,\"throttled\":%llu,\"write_amp\":%.4f}}\n",
            (unsigned long long)t.user_bytes, (unsigned long long)t.host_bytes,
            (unsigned long long)t.relocated_bytes, (unsigned long long)t.live_bytes,
            (unsigned long long)t.capacity, (unsigned long long)t.throttled,
            t.user_bytes ? (double)t.host_bytes / (double)t.user_bytes : 0.0);
    char h[256];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/json\r\n", x->id);
    (void)http_respond_full(x->r, 200, h, b.p, b.len);
    free(b.p);
}

static int any_object(void *arg, const char *key, const obj_info_t *info)
{
    (void)key;
    (void)info;
    *(int *)arg = 1;
    return 1;
}

static int any_upload(void *arg, const char *key, const char *upload, const obj_info_t *info)
{
    (void)upload;
    return any_object(arg, key, info);
}

/* CreateBucket, exclusive under the bucket's lock: one of two racing creates wins. */
static void create_bucket(ctx_t *x)
{
    char h[256];
    if (!s3_bucket_name_ok(x->bucket)) {
        s3_error(x, 400, "InvalidBucketName", "The specified bucket is not valid.");
        return;
    }
    const char *acl = hdr(x->info, "x-amz-acl");
    if (acl && strcmp(acl, "private") != 0 && strcmp(acl, "public-read") != 0) {
        s3_error(x, 501, "NotImplemented", "Only the private and public-read canned ACLs.");
        return;
    }
    uint8_t rnd[8];
    char id[17];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        s3_engine_error(x, ERR_IO);
        return;
    }
    for (int i = 0; i < 8; i++)
        snprintf(id + 2 * i, 3, "%02x", rnd[i]);
    pthread_rwlock_t *lk = bucket_lock(x->bucket);
    pthread_rwlock_wrlock(lk);
    obj_info_t bi;
    if (bucket_exists(x, x->bucket, &bi)) {
        pthread_rwlock_unlock(lk);
        if (!bucket_owner(&bi)[0] || strcmp(bucket_owner(&bi), x->auth.access_key) == 0)
            s3_error(x, 409, "BucketAlreadyOwnedByYou",
                     "Your previous request to create the named bucket succeeded.");
        else
            s3_error(x, 409, "BucketAlreadyExists", "The requested bucket name is not available.");
        return;
    }
    buf_t rec = {0};
    bprintf(&rec, "owner%c%s%cacl%c%s%cid%c%s%c", 0, x->auth.access_key, 0, 0,
            acl ? acl : "private", 0, 0, id, 0);
    int err;
    obj_writer_t *w = obj_put_begin(x->cfg->set, BUCKETS, x->bucket, &err);
    if (w) err = obj_put_commit(w, NULL, rec.p, rec.len, NULL);
    pthread_rwlock_unlock(lk);
    free(rec.p);
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nLocation: /%s\r\n", x->id, x->bucket);
    (void)http_respond_full(x->r, 200, h, NULL, 0);
}

/*
 * DeleteBucket, exclusive under the bucket's lock: only a bucket proven
 * empty (no objects, no unfinished uploads; every store's answer read) goes.
 */
static void delete_bucket(ctx_t *x)
{
    char h[128];
    pthread_rwlock_t *lk = bucket_lock(x->bucket);
    pthread_rwlock_wrlock(lk);
    int found = 0, rc = S3_ERR_NO_BUCKET;
    if (bucket_current(x, x->bucket, x->ibucket)) {
        rc = obj_list(x->cfg->set, x->ibucket, NULL, NULL, any_object, &found);
        if (rc >= 0 && !found)
            rc = obj_mpu_list_uploads(x->cfg->set, x->ibucket, any_upload, &found);
        if (rc >= 0 && !found) rc = obj_delete(x->cfg->set, BUCKETS, x->bucket);
    }
    pthread_rwlock_unlock(lk);
    if (found) {
        s3_error(x, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty.");
    } else if (rc < 0) {
        log_error("event=delete_bucket_failed bucket=%s err=%s", x->bucket, err_name(rc));
        s3_engine_error(x, rc);
    } else {
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
        (void)http_respond(x->r, 204, h, 0);
    }
}

static char *read_small_body(ctx_t *x, size_t cap, size_t *len);

/*
 * PutBucketAcl / PutObjectAcl: a canned ACL in x-amz-acl or an
 * AccessControlPolicy body, reduced to private or public-read (the ACLs
 * warmlake enforces). The ACL entry (name) of the target's metadata is
 * rewritten; the data is untouched.
 */
static void put_acl(ctx_t *x, const char *bucket, const char *key, const char *name)
{
    const char *canned = hdr(x->info, "x-amz-acl");
    int pub = 0, rc;
    if (canned) {
        if (strcmp(canned, "private") != 0 && strcmp(canned, "public-read") != 0) {
            s3_error(x, 501, "NotImplemented", "Only the private and public-read canned ACLs.");
            return;
        }
        pub = strcmp(canned, "public-read") == 0;
    } else {
        size_t len;
        char *body = read_small_body(x, 64u << 10, &len);
        if (!body) return;
        rc = s3_xml_acl(body, len, &pub);
        free(body);
        if (rc == ERR_INVAL) {
            s3_error(x, 400, "MalformedACLError",
                     "The XML you provided was not well-formed or did not validate.");
            return;
        }
        if (rc) {
            s3_error(x, 501, "NotImplemented",
                     "Only grants equivalent to the private and public-read canned ACLs.");
            return;
        }
    }
    obj_info_t info;
    if ((rc = obj_stat(x->cfg->set, bucket, key, &info)) != 0) {
        if (rc == ERR_NOT_FOUND && !strcmp(bucket, BUCKETS))
            s3_error(x, 404, "NoSuchBucket", "The specified bucket does not exist.");
        else
            s3_engine_error(x, rc);
        return;
    }
    buf_t um = {0};
    umeta_with(&info, name, pub ? "public-read" : "private", &um);
    rc = obj_set_umeta(x->cfg->set, bucket, key, um.p, um.len);
    free(um.p);
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    char h[128];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond_full(x->r, 200, h, NULL, 0);
}

static void bucket_op(ctx_t *x)
{
    const char *m = x->info->method;
    char h[256];
    int present;
    char *acl_q = qparam(x->query, "acl", &present);
    free(acl_q);
    if (strcmp(m, "PUT") == 0 && !present) {
        create_bucket(x);
        return;
    }
    if (bucket_access(x, x->bucket, x->ibucket) != 0) return;
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    if (strcmp(m, "PUT") == 0) {
        char *v = qparam(x->query, "acl", &present);
        free(v);
        if (present)
            put_acl(x, BUCKETS, x->bucket, "acl");
        else
            s3_error(x, 405, "MethodNotAllowed", "The specified method is not allowed.");
    } else if (strcmp(m, "HEAD") == 0) {
        (void)http_respond(x->r, 200, h, 0);
    } else if (strcmp(m, "DELETE") == 0) {
        delete_bucket(x);
    } else if (strcmp(m, "POST") == 0) {
        char *v = qparam(x->query, "delete", &present);
        free(v);
        if (present)
            delete_objects(x);
        else
            s3_error(x, 405, "MethodNotAllowed", "The specified method is not allowed.");
    } else if (strcmp(m, "GET") == 0) {
        char *v = qparam(x->query, "versions", &present);
        free(v);
        if (present) {
            list_versions(x);
            return;
        }
        v = qparam(x->query, "uploads", &present);
        free(v);
        if (present) {
            list_uploads(x);
            return;
        }
        v = qparam(x->query, "acl", &present);
        free(v);
        if (present) {
            obj_info_t bi;
            if (bucket_exists(x, x->bucket, &bi))
                respond_acl(x, bucket_owner(&bi)[0] ? bucket_owner(&bi) : x->auth.access_key,
                            strcmp(umeta_get(&bi, "acl"), "public-read") == 0);
            return;
        }
        v = qparam(x->query, "location", &present);
        free(v);
        if (present) {
            buf_t b = {0};
            bprintf(&b,
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
                    "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s</LocationConstraint>",
                    strcmp(x->cfg->region, "us-east-1") == 0 ? "" : x->cfg->region);
            respond_xml(x, 200, &b);
            return;
        }
        list_objects(x);
    } else {
        s3_error(x, 405, "MethodNotAllowed", "The specified method is not allowed.");
    }
}

/* ---- listing ---- */

typedef struct {
    ctx_t *x;
    buf_t *b;
    const char *prefix, *delim; /* delim NULL: none */
    const char *after;          /* marker / start-after / token: a common prefix equal to it
                                   was returned on an earlier page */
    int max, count, truncated, url;
    char *last;        /* last key or common prefix returned: the continuation point */
    char *last_prefix; /* last CommonPrefix, to fold its keys */
    buf_t prefixes;
} lst_t;

static int list_obj_cb(void *arg, const char *key, const obj_info_t *info)
{
    lst_t *l = arg;
    size_t pl = strlen(l->prefix);
    if (l->delim) {
        const char *d = strstr(key + pl, l->delim);
        if (d) {
            size_t cl = (size_t)(d - key) + strlen(l->delim);
            if (l->last_prefix && strlen(l->last_prefix) == cl &&
                memcmp(l->last_prefix, key, cl) == 0)
                return 0; /* folded into the common prefix already emitted */
            if (l->after && strlen(l->after) == cl && memcmp(l->after, key, cl) == 0)
                return 0; /* that prefix ended the previous page: skip it whole */
            if (l->count == l->max) {
                l->truncated = 1;
                return 1;
            }
            free(l->last_prefix);
            l->last_prefix = xmalloc(cl + 1);
            memcpy(l->last_prefix, key, cl);
            l->last_prefix[cl] = 0;
            bprintf(&l->prefixes, "<CommonPrefixes><Prefix>");
            if (l->url)
                burl(&l->prefixes, l->last_prefix);
            else
                bxml(&l->prefixes, l->last_prefix);
            bprintf(&l->prefixes, "</Prefix></CommonPrefixes>");
            l->count++;
            free(l->last);
            l->last = xstrdup(l->last_prefix);
            return 0;
        }
    }
    if (l->count == l->max) {
        l->truncated = 1;
        return 1;
    }
    char t[32];
    iso8601(info->mtime_ns, t);
    bprintf(l->b, "<Contents><Key>");
    if (l->url)
        burl(l->b, key);
    else
        bxml(l->b, key);
    bprintf(l->b,
            "</Key><LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag><Size>%llu</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>",
            t, info->etag, (unsigned long long)info->size);
    l->count++;
    free(l->last);
    l->last = xstrdup(key);
    return 0;
}

/* Continuation tokens: the last key or prefix returned, base64 (opaque, any bytes). */
static char *token_encode(const char *last)
{
    size_t n = strlen(last);
    char *out = xmalloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)last, (int)n);
    return out;
}

/* NULL when the token is not one of ours. */
static char *token_decode(const char *tok)
{
    size_t n = strlen(tok);
    if (n == 0 || n % 4 || n > 4 * ((MAX_KEY_LEN + 2) / 3)) return NULL;
    char *out = xmalloc(n / 4 * 3 + 1);
    int l = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)tok, (int)n);
    if (l < 0) {
        free(out);
        return NULL;
    }
    while (l > 0 && n && tok[--n] == '=') /* DecodeBlock counts the padding as zeros */
        l--;
    out[l] = 0;
    if ((size_t)l != strlen(out) || !s3_xml_text_ok(out, (size_t)l)) {
        free(out);
        return NULL;
    }
    return out;
}

static void list_objects(ctx_t *x)
{
    int p1, p2, p3, p4, p5, p6, p7, p8;
    char *v2 = qparam(x->query, "list-type", &p1);
    char *prefix = qparam(x->query, "prefix", &p2);
    char *delim = qparam(x->query, "delimiter", &p3);
    char *maxk = qparam(x->query, "max-keys", &p4);
    char *token = qparam(x->query, "continuation-token", &p5);
    char *start = qparam(x->query, "start-after", &p6);
    char *marker = qparam(x->query, "marker", &p7);
    char *enc = qparam(x->query, "encoding-type", &p8);
    char *from_token = NULL;
    int is_v2 = v2 && strcmp(v2, "2") == 0, rc = 0;
    buf_t b = {0};
    lst_t l = {
        x,    &b, prefix ? prefix : "", delim && *delim ? delim : NULL, NULL, 1000, 0, 0, 0, NULL,
        NULL, {0}};
    l.url = enc && !strcmp(enc, "url");
    if (enc && !l.url) {
        s3_error(x, 400, "InvalidArgument", "Invalid Encoding Method specified in Request");
        goto out;
    }
    if (maxk) {
        uint64_t mk;
        if (num_parse_u64(maxk, 0, UINT64_MAX, &mk) != 0) {
            s3_error(x, 400, "InvalidArgument", "max-keys must be a non-negative integer.");
            goto out;
        }
        l.max = mk > 1000 ? 1000 : (int)mk;
    }
    /* What is echoed must be XML text; a key never holds anything else. */
    const char *in[] = {prefix, delim, start, marker};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
        if (in[i] && !s3_xml_text_ok(in[i], strlen(in[i]))) {
            s3_error(x, 400, "InvalidArgument", "Listing parameters must be valid UTF-8.");
            goto out;
        }
    if (is_v2 && token && !(from_token = token_decode(token))) {
        s3_error(x, 400, "InvalidArgument", "The continuation token provided is incorrect");
        goto out;
    }
    l.after = is_v2 ? (from_token ? from_token : start) : marker;
    if (l.after && !*l.after) l.after = NULL;
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>");
    bxml(&b, x->bucket);
    bprintf(&b, "</Name><Prefix>");
    if (l.url)
        burl(&b, l.prefix);
    else
        bxml(&b, l.prefix);
    bprintf(&b, "</Prefix>");
    if (l.max > 0) rc = obj_list(x->cfg->set, x->ibucket, l.prefix, l.after, list_obj_cb, &l);
    if (rc < 0) {
        log_error("event=list_failed bucket=%s err=%s", x->bucket, err_name(rc));
        s3_engine_error(x, rc); /* never a short list that looks whole */
        goto out;
    }
    bprintf(&b, "<MaxKeys>%d</MaxKeys>", l.max);
    if (l.delim) {
        bprintf(&b, "<Delimiter>");
        if (l.url)
            burl(&b, l.delim);
        else
            bxml(&b, l.delim);
        bprintf(&b, "</Delimiter>");
    }
    if (l.url) bprintf(&b, "<EncodingType>url</EncodingType>");
    bprintf(&b, "<IsTruncated>%s</IsTruncated>", l.truncated ? "true" : "false");
    if (is_v2) {
        bprintf(&b, "<KeyCount>%d</KeyCount>", l.count);
        if (token) {
            bprintf(&b, "<ContinuationToken>");
            bxml(&b, token);
            bprintf(&b, "</ContinuationToken>");
        }
        if (start) {
            bprintf(&b, "<StartAfter>");
            if (l.url)
                burl(&b, start);
            else
                bxml(&b, start);
            bprintf(&b, "</StartAfter>");
        }
        if (l.truncated && l.last) {
            char *t = token_encode(l.last);
            bprintf(&b, "<NextContinuationToken>%s</NextContinuationToken>", t);
            free(t);
        }
    } else {
        bprintf(&b, "<Marker>");
        if (l.url)
            burl(&b, marker ? marker : "");
        else
            bxml(&b, marker ? marker : "");
        bprintf(&b, "</Marker>");
        if (l.truncated && l.last && l.delim) {
            bprintf(&b, "<NextMarker>");
            if (l.url)
                burl(&b, l.last);
            else
                bxml(&b, l.last);
            bprintf(&b, "</NextMarker>");
        }
    }
    if (l.prefixes.len) bprintf(&b, "%.*s", (int)l.prefixes.len, l.prefixes.p);
    bprintf(&b, "</ListBucketResult>");
    respond_xml(x, 200, &b);
    b.p = NULL;
out:
    free(b.p);
    free(l.prefixes.p);
    free(l.last);
    free(l.last_prefix);
    free(from_token);
    free(v2);
    free(prefix);
    free(delim);
    free(maxk);
    free(token);
    free(start);
    free(marker);
    free(enc);
}

/* ListObjectVersions for unversioned buckets: every object is its own null version. */
typedef struct {
    buf_t *b;
    int max, count, truncated;
    char *last;
} ver_t;

static int list_version_cb(void *arg, const char *key, const obj_info_t *info)
{
    ver_t *v = arg;
    char t[32];
    if (v->count == v->max) {
        v->truncated = 1;
        return 1;
    }
    iso8601(info->mtime_ns, t);
    bprintf(v->b, "<Version><Key>");
    bxml(v->b, key);
    bprintf(v->b,
            "</Key><VersionId>null</VersionId><IsLatest>true</IsLatest><LastModified>%s"
            "</LastModified><ETag>&quot;%s&quot;</ETag><Size>%llu</Size><StorageClass>STANDARD"
            "</StorageClass></Version>",
            t, info->etag, (unsigned long long)info->size);
    v->count++;
    free(v->last);
    v->last = xstrdup(key);
    return 0;
}

static void list_versions(ctx_t *x)
{
    int p1, p2, p3;
    char *prefix = qparam(x->query, "prefix", &p1);
    char *marker = qparam(x->query, "key-marker", &p2);
    char *maxk = qparam(x->query, "max-keys", &p3);
    buf_t b = {0};
    ver_t v = {&b, 1000, 0, 0, NULL};
    uint64_t mk;
    if (maxk && num_parse_u64(maxk, 0, UINT64_MAX, &mk) != 0) {
        s3_error(x, 400, "InvalidArgument", "max-keys must be a non-negative integer.");
        free(prefix);
        free(marker);
        free(maxk);
        return;
    }
    if (maxk && mk < 1000) v.max = (int)mk;
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListVersionsResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>");
    bxml(&b, x->bucket);
    bprintf(&b, "</Name><Prefix>");
    bxml(&b, prefix ? prefix : "");
    bprintf(&b, "</Prefix><KeyMarker>");
    bxml(&b, marker ? marker : "");
    bprintf(&b, "</KeyMarker><VersionIdMarker></VersionIdMarker>");
    int rc = v.max > 0 ? obj_list(x->cfg->set, x->ibucket, prefix ? prefix : "", marker,
                                  list_version_cb, &v)
                       : 0;
    if (rc < 0) {
        free(b.p);
        free(v.last);
        free(prefix);
        free(marker);
        free(maxk);
        s3_engine_error(x, rc);
        return;
    }
    bprintf(&b, "<MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>", v.max,
            v.truncated ? "true" : "false");
    if (v.truncated && v.last) {
        bprintf(&b, "<NextKeyMarker>");
        bxml(&b, v.last);
        bprintf(&b, "</NextKeyMarker><NextVersionIdMarker>null</NextVersionIdMarker>");
    }
    bprintf(&b, "</ListVersionsResult>");
    respond_xml(x, 200, &b);
    free(v.last);
    free(prefix);
    free(marker);
    free(maxk);
}

/* ---- objects ---- */

/* User metadata from x-amz-meta-* headers as "name\0value\0" pairs; -1 when too large. */
static int build_umeta(ctx_t *x, buf_t *um)
{
    for (int i = 0; i < x->info->nheaders; i++) {
        const char *n = x->info->headers[i].name;
        if (strncasecmp(n, "x-amz-meta-", 11) == 0) {
            for (const char *c = n + 11; *c; c++)
                bprintf(um, "%c", (*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
            bprintf(um, "%c%s%c", 0, x->info->headers[i].value, 0);
        }
    }
    const char *acl = hdr(x->info, "x-amz-acl");
    if (acl && strcmp(acl, "private") != 0 && strcmp(acl, "public-read") != 0) {
        s3_error(x, 501, "NotImplemented", "Only the private and public-read canned ACLs.");
        return -1;
    }
    if (acl && strcmp(acl, "public-read") == 0) bprintf(um, "%s%c%s%c", ACL_META, 0, acl, 0);
    if (um->len > sizeof(((obj_info_t *)0)->umeta)) {
        s3_error(x, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum size.");
        return -1;
    }
    return 0;
}

/*
 * Stream the request body into w and check Content-MD5. On failure the
 * error response is sent, w is aborted, and -1 returned.
 */
static int stream_body(ctx_t *x, obj_writer_t *w, char cks_out[128])
{
    const char *cmd5 = hdr(x->info, "content-md5");
    const char *trailer = hdr(x->info, "x-amz-trailer");
    const char *expect = NULL;
    char hname[40];
    int algo = CKS_NONE;
    cks_out[0] = 0;
    /* x-amz-checksum-ALGO as a header, or named by x-amz-trailer to follow the body. */
    for (int a = CKS_CRC32; a <= CKS_SHA256 && !algo; a++) {
        snprintf(hname, sizeof(hname), "x-amz-checksum-%s", cks_name(a));
        if ((expect = hdr(x->info, hname)) != NULL) algo = a;
    }
    if (!algo && trailer) {
        algo = cks_algo(trailer);
        if (!algo || strncasecmp(trailer, "x-amz-checksum-", 15) != 0) {
            obj_put_abort(w);
            s3_error(x, 400, "InvalidRequest",
                     "The x-amz-trailer header names no supported checksum.");
            return -1;
        }
    }
    /* Only the algorithm named: the checksum is computed and kept for later reads. */
    if (!algo) algo = cks_algo(hdr(x->info, "x-amz-sdk-checksum-algorithm"));
    cks_t ck;
    if (algo && cks_init(&ck, algo) != 0) {
        obj_put_abort(w);
        s3_engine_error(x, ERR_NOMEM);
        return -1;
    }
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    uint8_t *buf = bufpool_get(pool, IO_CHUNK);
    dec_t st = {0};
    long n;
    int64_t total = 0;
    int err = 0;
    while ((n = body_read(x, buf, IO_CHUNK, &st)) > 0) {
        total += n;
        if (algo) cks_update(&ck, buf, (size_t)n);
        if ((err = obj_put_write(w, buf, (size_t)n)) != 0) break;
    }
    bufpool_put(pool, buf);
    free(st.spill);
    char got[64] = "";
    if (algo) cks_final(&ck, got, sizeof(got));
    if (n < 0 || err || body_end(x) != 0 ||
        (!x->chunked && x->info->content_length >= 0 && total != x->info->content_length)) {
        obj_put_abort(w);
        if (n == ERR_DENIED)
            s3_error(x, 403, "SignatureDoesNotMatch", "A chunk signature does not match.");
        else if (n < 0)
            s3_error(x, 400, "IncompleteBody", "The request body is incomplete or malformed.");
        else if (err)
            s3_engine_error(x, err);
        else
            s3_error(x, 400, "XAmzContentSHA256Mismatch",
                     "The provided 'x-amz-content-sha256' header does not match what was "
                     "computed.");
        return -1;
    }
    if (algo && trailer && !expect) {
        char lower[64];
        snprintf(lower, sizeof(lower), "x-amz-checksum-%s", cks_name(algo));
        expect = x->chunked ? s3_chunked_trailer(x->chunked, lower) : NULL;
        if (!expect) {
            obj_put_abort(w);
            s3_error(x, 400, "InvalidRequest", "The announced checksum trailer is missing.");
            return -1;
        }
    }
    /* Every checksum sent must match before anything becomes visible. */
    if (expect && strcmp(expect, got) != 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "The %s you specified did not match the calculated checksum.",
                 cks_name(algo));
        obj_put_abort(w);
        s3_error(x, 400, "BadDigest", msg);
        return -1;
    }
    if (algo) snprintf(cks_out, 128, "%s:%s", cks_name(algo), got);
    if (cmd5) {
        uint8_t md[64];
        char hex[33] = "";
        size_t cl = strlen(cmd5);
        int ml = cl < 64 ? EVP_DecodeBlock(md, (const unsigned char *)cmd5, (int)cl) : -1;
        if (ml >= 16)
            for (int i = 0; i < 16; i++)
                snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (ml < 16 || strcmp(hex, obj_put_etag(w)) != 0) {
            obj_put_abort(w);
            s3_error(x, 400, "BadDigest",
                     "The Content-MD5 you specified did not match what we received.");
            return -1;
        }
    }
    return 0;
}

/* "x-amz-checksum-crc32: VALUE\r\n" for a kept "crc32:VALUE" (empty when none is kept). */
static void cks_header(const char *kept, char *out, size_t cap)
{
    const char *colon = kept ? strchr(kept, ':') : NULL;
    if (!colon)
        out[0] = 0;
    else
        snprintf(out, cap, "x-amz-checksum-%.*s: %s\r\n", (int)(colon - kept), kept, colon + 1);
}

static void put_object(ctx_t *x)
{
    int err;
    buf_t um = {0};
    if (build_umeta(x, &um) != 0 || body_begin(x) != 0) {
        if (!http_responded(x->r)) s3_error(x, 400, "InvalidArgument", "Bad x-amz-content-sha256.");
        free(um.p);
        return;
    }
    obj_writer_t *w = obj_put_begin(x->cfg->set, x->ibucket, x->key, &err);
    if (!w) {
        free(um.p);
        s3_engine_error(x, err);
        return;
    }
    char cks[128], ch[160];
    if (stream_body(x, w, cks) != 0) {
        free(um.p);
        return;
    }
    if (cks[0]) bprintf(&um, "%s%c%s%c", CKS_META, 0, cks, 0);
    obj_info_t info;
    err = um.len > sizeof(info.umeta)
              ? ERR_TOO_LARGE
              : commit_in_bucket(x, w, hdr(x->info, "content-type"), um.p, um.len, &info);
    if (err == ERR_TOO_LARGE && um.len > sizeof(info.umeta)) obj_put_abort(w);
    free(um.p);
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    char h[512];
    cks_header(cks, ch, sizeof(ch));
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nETag: \"%s\"\r\n%s", x->id, info.etag, ch);
    (void)http_respond_full(x->r, 200, h, NULL, 0);
}

/* ---- multipart ---- */

static void mpu_create(ctx_t *x)
{
    buf_t um = {0}, b = {0};
    char upload[33];
    if (build_umeta(x, &um) != 0) {
        free(um.p);
        return;
    }
    pthread_rwlock_t *lk = bucket_lock(x->bucket);
    pthread_rwlock_rdlock(lk);
    int rc = !bucket_current(x, x->bucket, x->ibucket)
                 ? S3_ERR_NO_BUCKET
                 : obj_mpu_create(x->cfg->set, x->ibucket, x->key, hdr(x->info, "content-type"),
                                  um.p, um.len, upload);
    pthread_rwlock_unlock(lk);
    free(um.p);
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>");
    bxml(&b, x->bucket);
    bprintf(&b, "</Bucket><Key>");
    bxml(&b, x->key);
    bprintf(&b, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>", upload);
    respond_xml(x, 200, &b);
}

/* The next read of a stream at off with len left: up to the end of the current read unit. */
static size_t next_piece(uint64_t off, uint64_t len, size_t unit)
{
    return (size_t)(len < unit - off % unit ? len : unit - off % unit);
}

static obj_reader_t *open_copy_source(ctx_t *x, obj_info_t *si, int *same);

/* CopyObjectResult / CopyPartResult: the new object's (or part's) date and ETag. */
static void respond_copy_result(ctx_t *x, const char *element, const obj_info_t *info)
{
    buf_t b = {0};
    char t[32];
    iso8601(info->mtime_ns, t);
    bprintf(&b,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s "
            "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LastModified>%s</LastModified>"
            "<ETag>&quot;%s&quot;</ETag></%s>",
            element, t, info->etag, element);
    respond_xml(x, 200, &b);
}
static int copy_range(ctx_t *x, obj_reader_t *rd, obj_writer_t *w, uint64_t off, uint64_t len);

/* UploadPartCopy: a part from (a byte range of) an existing object. */
static void mpu_upload_part_copy(ctx_t *x, const char *upload, int part)
{
    obj_info_t si, info;
    int same, err;
    obj_reader_t *rd = open_copy_source(x, &si, &same);
    if (!rd) return;
    uint64_t off = 0, len = si.size;
    const char *range = hdr(x->info, "x-amz-copy-source-range");
    if (range) {
        uint64_t a = 0, b = 0;
        const char *dash = strncmp(range, "bytes=", 6) == 0 ? strchr(range + 6, '-') : NULL;
        if (!dash ||
            num_parse_u64n(range + 6, (size_t)(dash - range - 6), 0, UINT64_MAX, &a) != 0 ||
            num_parse_u64(dash + 1, 0, UINT64_MAX, &b) != 0 || a > b || b >= si.size) {
            obj_close(rd);
            s3_error(x, 400, "InvalidArgument",
                     "The x-amz-copy-source-range value must be of the form bytes=first-last "
                     "where first and last are zero-based offsets within the source object.");
            return;
        }
        off = a;
        len = b - a + 1;
    }
    obj_writer_t *w = obj_mpu_part_begin(x->cfg->set, x->ibucket, x->key, upload, part, &err);
    if (!w) {
        obj_close(rd);
        if (err == ERR_NOT_FOUND)
            s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
        else
            s3_engine_error(x, err);
        return;
    }
    err = copy_range(x, rd, w, off, len);
    obj_close(rd);
    if (err)
        obj_put_abort(w);
    else if ((err = obj_put_commit(w, NULL, NULL, 0, &info)) == ERR_NOT_FOUND)
        err = ERR_CLOSED; /* the upload went while the part was copied */
    if (err == ERR_CLOSED) {
        s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
        return;
    }
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    respond_copy_result(x, "CopyPartResult", &info);
}

static void mpu_upload_part(ctx_t *x, const char *upload, const char *partstr)
{
    int part, err;
    if (num_parse_int(partstr, 1, 10000, &part) != 0) {
        s3_error(x, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000.");
        return;
    }
    if (hdr(x->info, "x-amz-copy-source")) {
        mpu_upload_part_copy(x, upload, (int)part);
        return;
    }
    if (body_begin(x) != 0) {
        s3_error(x, 400, "InvalidArgument", "Bad x-amz-content-sha256.");
        return;
    }
    obj_writer_t *w = obj_mpu_part_begin(x->cfg->set, x->ibucket, x->key, upload, (int)part, &err);
    if (!w) {
        if (err == ERR_NOT_FOUND)
            s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
        else
            s3_engine_error(x, err);
        return;
    }
    char cks[128], ch[160];
    if (stream_body(x, w, cks) != 0) return;
    obj_info_t info;
    if ((err = obj_put_commit(w, NULL, NULL, 0, &info)) != 0) {
        if (err == ERR_NOT_FOUND) /* aborted or completed while the part streamed */
            s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
        else
            s3_engine_error(x, err);
        return;
    }
    char h[512];
    cks_header(cks, ch, sizeof(ch));
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nETag: \"%s\"\r\n%s", x->id, info.etag, ch);
    (void)http_respond_full(x->r, 200, h, NULL, 0);
}

/* Read a small request body whole (at most cap bytes). NULL and a response sent on error. */
static char *read_small_body(ctx_t *x, size_t cap, size_t *len)
{
    char *body = xmalloc(cap + 1);
    dec_t st = {0};
    long n;
    *len = 0;
    if (body_begin(x) != 0) {
        free(body);
        s3_error(x, 400, "InvalidArgument", "Bad x-amz-content-sha256.");
        return NULL;
    }
    while ((n = body_read(x, (uint8_t *)body + *len, cap - *len, &st)) > 0) {
        *len += (size_t)n;
        if (*len == cap) {
            free(st.spill);
            free(body);
            s3_error(x, 400, "MalformedXML", "The XML you provided was too large.");
            return NULL;
        }
    }
    free(st.spill);
    if (n < 0 || body_end(x) != 0) {
        free(body);
        s3_error(x, 400, "IncompleteBody", "The request body is incomplete or malformed.");
        return NULL;
    }
    body[*len] = 0;
    return body;
}

static void mpu_complete(ctx_t *x, const char *upload)
{
    size_t len;
    char *body = read_small_body(x, 2u << 20, &len);
    if (!body) return;
    s3_xml_part_t *xp = NULL;
    int np = 0;
    int bad = s3_xml_complete(body, len, &xp, &np);
    free(body);
    if (bad) {
        s3_error(x, 400, "MalformedXML", "The XML you provided was not well-formed.");
        return;
    }
    obj_mpu_part_t *parts = xcalloc((size_t)np, sizeof(*parts));
    for (int i = 0; i < np; i++) {
        parts[i].part = xp[i].part;
        memcpy(parts[i].etag, xp[i].etag, sizeof(parts[i].etag));
    }
    free(xp);
    obj_info_t info;
    int why = 0;
    pthread_rwlock_t *lk = bucket_lock(x->bucket);
    pthread_rwlock_rdlock(lk);
    int rc = !bucket_current(x, x->bucket, x->ibucket)
                 ? S3_ERR_NO_BUCKET
                 : obj_mpu_complete(x->cfg->set, x->ibucket, x->key, upload, parts, np, 5u << 20,
                                    &info, &why);
    pthread_rwlock_unlock(lk);
    free(parts);
    if (rc) {
        switch (why) {
        case OBJ_MPU_NO_UPLOAD:
            s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
            break;
        case OBJ_MPU_BAD_PART:
            s3_error(x, 400, "InvalidPart",
                     "One or more of the specified parts could not be found.");
            break;
        case OBJ_MPU_BAD_ORDER:
            s3_error(x, 400, "InvalidPartOrder", "The list of parts was not in ascending order.");
            break;
        case OBJ_MPU_TOO_SMALL:
            s3_error(x, 400, "EntityTooSmall",
                     "Your proposed upload is smaller than the minimum allowed object size.");
            break;
        default:
            s3_engine_error(x, rc);
        }
        return;
    }
    buf_t b = {0};
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Location>/");
    bxml(&b, x->bucket);
    bprintf(&b, "/");
    bxml(&b, x->key);
    bprintf(&b, "</Location><Bucket>");
    bxml(&b, x->bucket);
    bprintf(&b, "</Bucket><Key>");
    bxml(&b, x->key);
    bprintf(&b, "</Key><ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>", info.etag);
    respond_xml(x, 200, &b);
}

static void mpu_abort(ctx_t *x, const char *upload)
{
    int rc = obj_mpu_abort(x->cfg->set, x->ibucket, x->key, upload);
    char h[128];
    if (rc == ERR_NOT_FOUND) {
        s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
        return;
    }
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond(x->r, 204, h, 0);
}

/* Parse "bytes=a-b", "bytes=a-", "bytes=-n". 1 = range set, 0 = none/ignored, -1 = 416. */
static int parse_range(const char *v, uint64_t size, uint64_t *off, uint64_t *len)
{
    uint64_t a, b;
    if (!v || strncmp(v, "bytes=", 6) != 0 || strchr(v, ',')) return 0;
    v += 6;
    if (*v == '-') {
        if (num_parse_u64(v + 1, 0, UINT64_MAX, &a) != 0) return 0;
        if (a == 0) return -1;
        *len = a > size ? size : a;
        *off = size - *len;
        return size ? 1 : -1;
    }
    const char *dash = strchr(v, '-');
    if (!dash || num_parse_u64n(v, (size_t)(dash - v), 0, UINT64_MAX, &a) != 0) return 0;
    const char *bs = dash + 1;
    if (*bs == 0) {
        b = size ? size - 1 : 0;
    } else {
        if (num_parse_u64(bs, 0, UINT64_MAX, &b) != 0) return 0;
        if (b >= size) b = size ? size - 1 : 0;
    }
    if (a >= size || b < a) return -1;
    *off = a;
    *len = b - a + 1;
    return 1;
}

static void get_object(ctx_t *x, int head)
{
    obj_info_t info;
    int err;
    obj_reader_t *rd = obj_open(x->cfg->set, x->ibucket, x->key, &info, &err);
    if (!rd) {
        if (err == ERR_NOT_FOUND && !bucket_exists(x, x->bucket, NULL))
            s3_error(x, 404, "NoSuchBucket", "The specified bucket does not exist.");
        else
            s3_engine_error(x, err);
        return;
    }
    char lm[40], h[4096];
    http_date(info.mtime_ns, lm);
    const char *inm = hdr(x->info, "if-none-match"), *im = hdr(x->info, "if-match");
    char quoted[96];
    snprintf(quoted, sizeof(quoted), "\"%s\"", info.etag);
    /* RFC 7232 order: If-Match, else If-Unmodified-Since; If-None-Match, else If-Modified-Since. */
    time_t mt = (time_t)(info.mtime_ns / 1000000000ull);
    time_t ius = parse_http_date(hdr(x->info, "if-unmodified-since"));
    time_t ims = parse_http_date(hdr(x->info, "if-modified-since"));
    if ((im && strcmp(im, quoted) != 0 && strcmp(im, "*") != 0) ||
        (!im && ius != (time_t)-1 && mt > ius)) {
        obj_close(rd);
        s3_error(x, 412, "PreconditionFailed", "At least one of the preconditions failed.");
        return;
    }
    int n = snprintf(h, sizeof(h),
                     "x-amz-request-id: %s\r\nETag: \"%s\"\r\nLast-Modified: %s\r\n"
                     "Content-Type: %s\r\nAccept-Ranges: bytes\r\n",
                     x->id, info.etag, lm, info.content_type);
    for (size_t p = 0; p < info.umeta_len;) {
        const char *name = info.umeta + p, *val = name + strlen(name) + 1;
        if (name[0] != '\001') /* internal (ACL, checksum) entries are not user metadata */
            n += snprintf(h + n, sizeof(h) - (size_t)n, "x-amz-meta-%s: %s\r\n", name, val);
        p = (size_t)(val - info.umeta) + strlen(val) + 1;
    }
    /* The stored checksum, when asked for and the whole object is returned. */
    const char *mode = hdr(x->info, "x-amz-checksum-mode");
    if (mode && !strcasecmp(mode, "ENABLED") && !hdr(x->info, "range")) {
        char ch[160];
        cks_header(umeta_get(&info, CKS_META), ch, sizeof(ch));
        n += snprintf(h + n, sizeof(h) - (size_t)n, "%s", ch);
    }
    if ((inm && (strcmp(inm, quoted) == 0 || strcmp(inm, "*") == 0)) ||
        (!inm && ims != (time_t)-1 && mt <= ims)) {
        obj_close(rd);
        (void)http_respond(x->r, 304, h, 0);
        return;
    }
    uint64_t off = 0, len = info.size;
    int status = 200;
    int rr = parse_range(hdr(x->info, "range"), info.size, &off, &len);
    if (rr < 0) {
        obj_close(rd);
        s3_error(x, 416, "InvalidRange", "The requested range is not satisfiable.");
        return;
    }
    if (rr > 0) {
        status = 206;
        snprintf(h + n, sizeof(h) - (size_t)n, "Content-Range: bytes %llu-%llu/%llu\r\n",
                 (unsigned long long)off, (unsigned long long)(off + len - 1),
                 (unsigned long long)info.size);
    }
    /*
     * Stripe-sized pieces at stripe offsets: a stripe's blocks are read at
     * once, in place (the drives DMA them into these page-aligned buffers).
     * Three buffers take turns: one on its way to the socket (lent to the
     * loop, not copied), one being read, one being read ahead.
     */
    size_t unit = obj_read_unit(rd), bsz = len && len < unit ? (size_t)len : unit;
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    uint8_t *bufs[3] = {bufpool_get(pool, bsz), NULL, NULL}, *buf = bufs[0];
    size_t step = next_piece(off, len, unit);
    /* Read the first piece before the status line: a lost object gets a real error. */
    if (!head && step && (err = obj_read(rd, off, buf, step)) != 0) {
        log_error("event=get_failed key=%s off=%llu err=%s missing=0x%x", x->key,
                  (unsigned long long)off, err_name(err), obj_read_missing(rd));
        obj_close(rd);
        bufpool_put(pool, buf);
        s3_engine_error(x, err);
        return;
    }
    if (http_respond(x->r, status, h, (int64_t)len) != 0 || head) {
        obj_close(rd);
        bufpool_put(pool, buf);
        return;
    }
    for (int turn = 0; len > 0; turn = (turn + 1) % 3) {
        int next = (turn + 1) % 3, after = (turn + 2) % 3;
        if (http_write_borrowed(x->r, buf, step) != 0) break;
        off += step;
        len -= step;
        if (!len) break;
        /*
         * bufs[after] went out two turns ago and bufs[next] before that: once
         * at most this one is pending, both are free.
         */
        if (http_wait_borrowed(x->r, 1) != 0) break;
        if (!bufs[next]) bufs[next] = bufpool_get(pool, bsz);
        buf = bufs[next];
        step = next_piece(off, len, unit);
        if ((err = obj_read(rd, off, buf, step)) != 0) {
            /* The status line is out: all we can do is cut the connection short. */
            log_error("event=get_failed key=%s off=%llu err=%s missing=0x%x", x->key,
                      (unsigned long long)off, err_name(err), obj_read_missing(rd));
            http_abort(x->r);
            break;
        }
        if (step < len) {
            if (!bufs[after]) bufs[after] = bufpool_get(pool, bsz);
            obj_read_ahead(rd, off + step, bufs[after], next_piece(off + step, len - step, unit));
        }
    }
    (void)http_wait_borrowed(x->r, 0); /* nothing lent may be freed before it is out */
    obj_close(rd);                     /* nor before a read-ahead into it is done */
    for (int i = 0; i < 3; i++)
        bufpool_put(pool, bufs[i]);
}

/* CopyObject: stream the source through a new writer (metadata copied or replaced). */
/*
 * Open the object named by x-amz-copy-source ("/bucket/key" or "bucket/key",
 * URL-encoded, ?versionId=null allowed) after checking the caller may read
 * it. NULL with the error response sent. *same: it is the request's own key.
 */
static obj_reader_t *open_copy_source(ctx_t *x, obj_info_t *si, int *same)
{
    const char *src = hdr(x->info, "x-amz-copy-source");
    const char *q = strchr(src, '?'); /* ?versionId=null is the only version there is */
    size_t sl = q ? (size_t)(q - src) : strlen(src);
    int err;
    if (sl && src[0] == '/') {
        src++;
        sl--;
    }
    char *path = pdecode(src, sl, 0);
    char *slash = path ? strchr(path, '/') : NULL;
    if (!slash || slash == path || !slash[1]) {
        free(path);
        s3_error(x, 400, "InvalidArgument", "Copy Source must mention the source bucket and key.");
        return NULL;
    }
    *slash = 0;
    const char *sbucket = path, *skey = slash + 1;
    *same = strcmp(sbucket, x->bucket) == 0 && strcmp(skey, x->key) == 0;
    char siname[INAME_MAX];
    if (strlen(sbucket) >= sizeof(x->bucket) || strlen(skey) > MAX_KEY_LEN) {
        free(path);
        s3_error(x, 400, "InvalidArgument", "Copy Source names no valid bucket and key.");
        return NULL;
    }
    if (bucket_access(x, sbucket, siname) != 0) {
        free(path);
        return NULL;
    }
    obj_reader_t *rd = obj_open(x->cfg->set, siname, skey, si, &err);
    free(path);
    if (!rd) {
        if (err == ERR_NOT_FOUND)
            s3_error(x, 404, "NoSuchKey", "The specified key does not exist.");
        else
            s3_engine_error(x, err);
    }
    return rd;
}

/* Stream [off, off+len) of rd into w; 0 or an ERR_*. */
static int copy_range(ctx_t *x, obj_reader_t *rd, obj_writer_t *w, uint64_t off, uint64_t len)
{
    size_t unit = obj_read_unit(rd);
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    uint8_t *buf = bufpool_get(pool, unit); /* page-aligned: blocks land in it directly */
    int err = 0;
    while (!err && len > 0) {
        size_t n = next_piece(off, len, unit);
        if ((err = obj_read(rd, off, buf, n)) == 0) err = obj_put_write(w, buf, n);
        off += n;
        len -= n;
    }
    bufpool_put(pool, buf);
    return err;
}

static void copy_object(ctx_t *x)
{
    const char *dir = hdr(x->info, "x-amz-metadata-directive");
    int replace = dir && strcasecmp(dir, "REPLACE") == 0, err, same;
    if (dir && !replace && strcasecmp(dir, "COPY") != 0) {
        s3_error(x, 400, "InvalidArgument", "Unknown metadata directive.");
        return;
    }
    obj_info_t si;
    obj_reader_t *rd = open_copy_source(x, &si, &same);
    if (!rd) return;
    if (!replace && same) {
        obj_close(rd);
        s3_error(x, 400, "InvalidRequest",
                 "This copy request is illegal because it is trying to copy an object to itself "
                 "without changing the object's metadata.");
        return;
    }
    buf_t um = {0};
    if (replace && build_umeta(x, &um) != 0) {
        obj_close(rd);
        free(um.p);
        return;
    }
    obj_writer_t *w = obj_put_begin(x->cfg->set, x->ibucket, x->key, &err);
    if (w) err = copy_range(x, rd, w, 0, si.size);
    obj_close(rd);
    obj_info_t info;
    if (w && err)
        obj_put_abort(w);
    else if (w)
        err = replace ? commit_in_bucket(x, w, hdr(x->info, "content-type"), um.p, um.len, &info)
                      : commit_in_bucket(x, w, si.content_type, si.umeta, si.umeta_len, &info);
    free(um.p);
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    respond_copy_result(x, "CopyObjectResult", &info);
}

static void delete_objects(ctx_t *x)
{
    size_t len;
    char *body = read_small_body(x, 2u << 20, &len);
    if (!body) return;
    char **keys = NULL;
    int nkeys = 0, quiet = 0;
    int bad = s3_xml_delete(body, len, &keys, &nkeys, &quiet);
    free(body);
    buf_t b = {0};
    if (bad) {
        s3_error(x, 400, "MalformedXML", "The XML you provided was not well-formed.");
        return;
    }
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DeleteResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (int i = 0; i < nkeys; i++) {
        int rc = strlen(keys[i]) > MAX_KEY_LEN ? ERR_INVAL
                                               : obj_delete(x->cfg->set, x->ibucket, keys[i]);
        if (rc == 0 || rc == ERR_NOT_FOUND) {
            if (!quiet) {
                bprintf(&b, "<Deleted><Key>");
                bxml(&b, keys[i]);
                bprintf(&b, "</Key></Deleted>");
            }
        } else {
            bprintf(&b, "<Error><Key>");
            bxml(&b, keys[i]);
            bprintf(&b, "</Key><Code>%s</Code><Message>%s</Message></Error>",
                    rc == ERR_INVAL ? "InvalidArgument" : "InternalError", err_str(rc));
        }
    }
    bprintf(&b, "</DeleteResult>");
    respond_xml(x, 200, &b);
    s3_xml_free_keys(keys, nkeys);
}

/* ListParts: the parts uploaded so far, after part-number-marker, at most max-parts. */
typedef struct {
    buf_t *b;
    int marker, max, count, truncated, last;
} lp_t;

static int list_part_cb(void *arg, int part, const obj_info_t *info)
{
    lp_t *l = arg;
    char t[32];
    if (part <= l->marker) return 0;
    if (l->count == l->max) {
        l->truncated = 1;
        return 1;
    }
    iso8601(info->mtime_ns, t);
    bprintf(l->b,
            "<Part><PartNumber>%d</PartNumber><LastModified>%s</LastModified><ETag>&quot;%s"
            "&quot;</ETag><Size>%llu</Size></Part>",
            part, t, info->etag, (unsigned long long)info->size);
    l->count++;
    l->last = part;
    return 0;
}

static void list_parts(ctx_t *x, const char *upload)
{
    int p1, p2;
    char *marker = qparam(x->query, "part-number-marker", &p1);
    char *maxp = qparam(x->query, "max-parts", &p2);
    buf_t parts = {0}, b = {0};
    lp_t l = {&parts, 0, 1000, 0, 0, 0};
    uint64_t mp = 1000;
    int bad = (marker && num_parse_int(marker, 0, 10000, &l.marker) != 0) ||
              (maxp && num_parse_u64(maxp, 0, UINT64_MAX, &mp) != 0);
    free(marker);
    free(maxp);
    if (bad) {
        s3_error(x, 400, "InvalidArgument",
                 "part-number-marker and max-parts must be non-negative integers.");
        return;
    }
    if (mp < 1000) l.max = (int)mp;
    int rc = obj_mpu_list_parts(x->cfg->set, x->ibucket, x->key, upload, list_part_cb, &l);
    if (rc < 0) { /* > 0: the walk stopped at max-parts */
        free(parts.p);
        if (rc == ERR_NOT_FOUND)
            s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
        else
            s3_engine_error(x, rc);
        return;
    }
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>");
    bxml(&b, x->bucket);
    bprintf(&b, "</Bucket><Key>");
    bxml(&b, x->key);
    bprintf(&b,
            "</Key><UploadId>%s</UploadId><PartNumberMarker>%d</PartNumberMarker>"
            "<NextPartNumberMarker>%d</NextPartNumberMarker><MaxParts>%d</MaxParts>"
            "<IsTruncated>%s</IsTruncated><StorageClass>STANDARD</StorageClass>",
            upload, l.marker, l.last, l.max, l.truncated ? "true" : "false");
    if (parts.len) bprintf(&b, "%.*s", (int)parts.len, parts.p);
    bprintf(&b, "</ListPartsResult>");
    free(parts.p);
    respond_xml(x, 200, &b);
}

/* ListMultipartUploads: uploads in progress in this bucket, by key. */
typedef struct {
    char *key;
    char upload[33];
    uint64_t mtime_ns;
} up_t;

typedef struct {
    up_t *v;
    int n, cap;
    const char *prefix;
} ups_t;

static int list_upload_cb(void *arg, const char *key, const char *upload, const obj_info_t *info)
{
    ups_t *u = arg;
    if (u->prefix && strncmp(key, u->prefix, strlen(u->prefix)) != 0) return 0;
    if (u->n == 10000) return 1;
    if (u->n == u->cap)
        u->v = xrealloc(u->v, (size_t)(u->cap = u->cap ? u->cap * 2 : 16) * sizeof(*u->v));
    u->v[u->n].key = xstrdup(key);
    snprintf(u->v[u->n].upload, sizeof(u->v[u->n].upload), "%s", upload);
    u->v[u->n].mtime_ns = info->mtime_ns;
    u->n++;
    return 0;
}

static int up_cmp(const void *a, const void *b)
{
    const up_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

static void list_uploads(ctx_t *x)
{
    int present;
    char *prefix = qparam(x->query, "prefix", &present);
    ups_t u = {NULL, 0, 0, prefix};
    int rc = obj_mpu_list_uploads(x->cfg->set, x->ibucket, list_upload_cb, &u);
    if (rc < 0) {
        for (int i = 0; i < u.n; i++)
            free(u.v[i].key);
        free(u.v);
        free(prefix);
        s3_engine_error(x, rc);
        return;
    }
    if (u.n) qsort(u.v, (size_t)u.n, sizeof(*u.v), up_cmp);
    buf_t b = {0};
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>");
    bxml(&b, x->bucket);
    bprintf(&b, "</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><Prefix>");
    bxml(&b, prefix ? prefix : "");
    bprintf(&b, "</Prefix><MaxUploads>10000</MaxUploads><IsTruncated>false</IsTruncated>");
    for (int i = 0; i < u.n; i++) {
        char t[32];
        iso8601(u.v[i].mtime_ns, t);
        bprintf(&b, "<Upload><Key>");
        bxml(&b, u.v[i].key);
        bprintf(&b,
                "</Key><UploadId>%s</UploadId><Initiated>%s</Initiated>"
                "<StorageClass>STANDARD</StorageClass></Upload>",
                u.v[i].upload, t);
        free(u.v[i].key);
    }
    bprintf(&b, "</ListMultipartUploadsResult>");
    free(u.v);
    free(prefix);
    respond_xml(x, 200, &b);
}

/* GetBucketAcl / GetObjectAcl: the owner's full control, and READ for everyone if public. */
static void respond_acl(ctx_t *x, const char *owner, int public_read)
{
    buf_t b = {0};
    bprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<AccessControlPolicy "
                "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>");
    bxml(&b, owner);
    bprintf(&b, "</ID><DisplayName>");
    bxml(&b, owner);
    bprintf(&b, "</DisplayName></Owner><AccessControlList><Grant><Grantee "
                "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                "xsi:type=\"CanonicalUser\"><ID>");
    bxml(&b, owner);
    bprintf(&b, "</ID><DisplayName>");
    bxml(&b, owner);
    bprintf(&b, "</DisplayName></Grantee><Permission>FULL_CONTROL</Permission></Grant>");
    if (public_read)
        bprintf(&b, "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                    "xsi:type=\"Group\"><URI>http://acs.amazonaws.com/groups/global/AllUsers"
                    "</URI></Grantee><Permission>READ</Permission></Grant>");
    bprintf(&b, "</AccessControlList></AccessControlPolicy>");
    respond_xml(x, 200, &b);
}

/*
 * A request without credentials: GET/HEAD of a public-read object, or a
 * listing of a public-read bucket. Anything else, or anything missing, is
 * AccessDenied (which says nothing about what exists).
 */
static void anonymous_op(ctx_t *x)
{
    const char *m = x->info->method;
    int get = strcmp(m, "GET") == 0, head = strcmp(m, "HEAD") == 0, present;
    obj_info_t bi, oi;
    char *sub = qparam(x->query, "acl", &present);
    free(sub);
    if ((get || head) && !present && x->bucket[0] && bucket_exists(x, x->bucket, &bi)) {
        bucket_iname(x->bucket, &bi, x->ibucket);
        if (x->key[0]) {
            if (strlen(x->key) <= MAX_KEY_LEN &&
                obj_stat(x->cfg->set, x->ibucket, x->key, &oi) == 0 &&
                strcmp(umeta_get(&oi, ACL_META), "public-read") == 0) {
                get_object(x, head);
                return;
            }
        } else if (get && strcmp(umeta_get(&bi, "acl"), "public-read") == 0) {
            list_objects(x);
            return;
        }
    }
    s3_error(x, 403, "AccessDenied", "Access Denied");
}

static void object_op(ctx_t *x)
{
    const char *m = x->info->method;
    if (strlen(x->key) > MAX_KEY_LEN) {
        s3_error(x, 400, "KeyTooLongError", "Your key is too long.");
        return;
    }
    if (bucket_access(x, x->bucket, x->ibucket) != 0) return;
    int has_upload, has_part, has_uploads;
    char *upload = qparam(x->query, "uploadId", &has_upload);
    char *part = qparam(x->query, "partNumber", &has_part);
    char *ups = qparam(x->query, "uploads", &has_uploads);
    free(ups);
    int has_acl;
    ups = qparam(x->query, "acl", &has_acl);
    free(ups);
    if (has_upload && (!upload || strlen(upload) != 32)) {
        s3_error(x, 404, "NoSuchUpload", "The specified upload does not exist.");
    } else if (strcmp(m, "POST") == 0 && has_uploads) {
        mpu_create(x);
    } else if (strcmp(m, "POST") == 0 && has_upload) {
        mpu_complete(x, upload);
    } else if (strcmp(m, "PUT") == 0 && has_upload && has_part && part) {
        mpu_upload_part(x, upload, part);
    } else if (strcmp(m, "DELETE") == 0 && has_upload) {
        mpu_abort(x, upload);
    } else if (strcmp(m, "GET") == 0 && has_upload) {
        list_parts(x, upload);
    } else if (has_upload) {
        s3_error(x, 405, "MethodNotAllowed", "The specified method is not allowed.");
    } else if (strcmp(m, "GET") == 0 && has_acl) {
        obj_info_t oi, bi;
        int rc = obj_stat(x->cfg->set, x->ibucket, x->key, &oi);
        if (rc)
            s3_engine_error(x, rc);
        else if (bucket_exists(x, x->bucket, &bi))
            respond_acl(x, bucket_owner(&bi)[0] ? bucket_owner(&bi) : x->auth.access_key,
                        strcmp(umeta_get(&oi, ACL_META), "public-read") == 0);
        else
            s3_error(x, 404, "NoSuchBucket", "The specified bucket does not exist.");
    } else if (strcmp(m, "PUT") == 0 && has_acl) {
        put_acl(x, x->ibucket, x->key, ACL_META);
    } else if (strcmp(m, "PUT") == 0 && hdr(x->info, "x-amz-copy-source")) {
        copy_object(x);
    } else if (strcmp(m, "PUT") == 0) {
        put_object(x);
    } else if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
        get_object(x, m[0] == 'H');
    } else if (strcmp(m, "DELETE") == 0) {
        int rc = obj_delete(x->cfg->set, x->ibucket, x->key);
        char h[128];
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
        if (rc && rc != ERR_NOT_FOUND)
            s3_engine_error(x, rc);
        else
            (void)http_respond(x->r, 204, h, 0);
    } else {
        s3_error(x, 405, "MethodNotAllowed", "The specified method is not allowed.");
    }
    free(upload);
    free(part);
}

/* The bucket named by a Host of the form BUCKET.DOMAIN[:port], or NULL (malloc'd). */
static char *vhost_bucket(ctx_t *x)
{
    const char *d = x->cfg->domain, *host = hdr(x->info, "host");
    if (!d || !*d || !host) return NULL;
    size_t hl = strlen(host), dl = strlen(d);
    const char *colon = strrchr(host, ':');
    if (colon && host[0] != '[') hl = (size_t)(colon - host);
    if (hl <= dl + 1 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, d, dl) != 0)
        return NULL;
    char *b = xmalloc(hl - dl);
    memcpy(b, host, hl - dl - 1);
    b[hl - dl - 1] = 0;
    return b;
}

void s3_handle(void *arg, http_req_t *r, const struct http_req_info *info)
{
    ctx_t x = {0};
    x.cfg = arg;
    x.r = r;
    x.info = info;
    snprintf(x.id, sizeof(x.id), "%s", info->id);
    log_set_request(x.id);
    const char *t = info->target;
    const char *q = strchr(t, '?');
    x.query = q ? xstrdup(q + 1) : xstrdup("");
    if (t[0] != '/') {
        s3_error(&x, 400, "InvalidRequest", "Bad request target.");
        goto out;
    }
    if (authenticate(&x) != 0) goto out;
    /* Virtual-host style (Host: bucket.domain) when a domain is set, else path style. */
    const char *p = t + 1, *pe = q ? q : t + strlen(t);
    char *b = vhost_bucket(&x);
    if (b) {
        x.key = pdecode(p, (size_t)(pe - p), 0);
    } else {
        const char *slash = memchr(p, '/', (size_t)(pe - p));
        size_t bl = slash ? (size_t)(slash - p) : (size_t)(pe - p);
        b = pdecode(p, bl, 0);
        x.key = slash ? pdecode(slash + 1, (size_t)(pe - slash - 1), 0) : xstrdup("");
    }
    if (!b || !x.key || strlen(b) >= sizeof(x.bucket)) {
        free(b);
        s3_error(&x, 400, "InvalidURI", "Couldn't parse the specified URI.");
        goto out;
    }
    strcpy(x.bucket, b);
    free(b);
    /* Keys appear in listings as XML text: only what XML can carry (AWS: 400). */
    if (!s3_xml_text_ok(x.key, strlen(x.key))) {
        s3_error(&x, 400, "InvalidArgument", "Object key must be valid UTF-8 text.");
        goto out;
    }
    log_debug("event=request id=%s method=%s bucket=%s key=%s peer=%s", x.id, info->method,
              x.bucket, x.key, info->peer);
    if (x.anonymous) {
        anonymous_op(&x);
    } else if (!strcmp(x.bucket, "_warmlake") && !strcmp(x.key, "stats") &&
               !strcmp(info->method, "GET")) {
        node_stats(&x);
    } else if (!x.bucket[0]) {
        if (strcmp(info->method, "GET") == 0)
            list_buckets(&x);
        else
            s3_error(&x, 405, "MethodNotAllowed", "The specified method is not allowed.");
    } else if (!x.key[0]) {
        bucket_op(&x);
    } else {
        object_op(&x);
    }
out:
    s3_chunked_free(x.chunked);
    EVP_MD_CTX_free(x.sha);
    bufpool_put(obj_set_buffers(x.cfg->set), x.raw);
    free(x.key);
    free(x.query);
    log_set_request(NULL);
}
