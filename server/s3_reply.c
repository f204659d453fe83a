/*
 * s3_reply: responses: XML bodies, S3 errors from the one table
 * (s3_errors.h) and the mapping of engine errors to them.
 */

#include "server/s3_int.h"

static void free_body(void *arg, void *p)
{
    (void)arg;
    free(p);
}

/* Bodies from this size on are lent to the connection, not copied (a listing page: 250 KB). */
#define XML_LEND_MIN (16u << 10)

void s3_respond_xml(ctx_t *x, int status, buf_t *body)
{
    char h[256];
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n", x->id);
    if (body->len < XML_LEND_MIN) {
        (void)http_respond_full(x->r, status, h, body->p, body->len);
        free(body->p);
    } else if (http_respond_lent(x->r, status, h, (int64_t)body->len, body->p, body->len) == 0) {
        http_free_after(x->r, free_body, NULL, body->p); /* once the request is finished */
    } else {
        free(body->p);
    }
    body->p = NULL;
    body->len = body->cap = 0;
}

static const s3_err_info_t err_table[S3E_COUNT] = {
#define S3E_ROW(name, code, status, msg) [S3E_##name] = {code, status, msg},
    S3_ERRORS(S3E_ROW)
#undef S3E_ROW
};

const s3_err_info_t *s3_err_info(s3_err_t e)
{
    return &err_table[e < 0 || e >= S3E_COUNT ? S3E_INTERNAL : e];
}

void s3_err_detail(ctx_t *x, s3_err_t e, const char *msg, const char *extra)
{
    if (e == S3E_NO_SUCH_BUCKET && x->bucket_lookup_failed) {
        e = S3E_SERVICE_UNAVAILABLE; /* the bucket could not be looked up: not known absent */
        msg = NULL;
    }
    const s3_err_info_t *ei = s3_err_info(e);
    buf_t b = {0};
    char h[256];
    if (!msg) msg = ei->message;
    /* The line carries req=ID (log_set_request). A 501 is the client's asking for what is
     * not built (SSE, a sub-resource): info, or any client could fill the error log. Each
     * kind at most 10 lines a second (log_limited): with a node away every refused request
     * wrote three lines, 225 a second from four clients (a soak probe). */
    if (ei->status == 501)
        log_limited(LOG_LVL_INFO, "event=s3_error status=%d code=%s method=%s target=%.200s",
                    ei->status, ei->code, x->info->method, x->info->target);
    else if (e == S3E_SLOW_DOWN) /* the client's to retry (a race, a throttle): no fault here */
        log_limited(LOG_LVL_WARN, "event=s3_error status=%d code=%s method=%s target=%.200s",
                    ei->status, ei->code, x->info->method, x->info->target);
    else if (ei->status >= 500)
        log_limited(LOG_LVL_ERROR, "event=s3_error status=%d code=%s method=%s target=%.200s",
                    ei->status, ei->code, x->info->method, x->info->target);
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>",
               ei->code);
    buf_xml(&b, msg);
    buf_printf(&b, "</Message>");
    if (extra) {
        buf_printf(&b, "%s", extra);
    } else if (e == S3E_NO_SUCH_BUCKET && x->bucket[0]) {
        /* What S3 names beside these codes (clients and suites read them). */
        buf_printf(&b, "<BucketName>");
        buf_xml(&b, x->bucket);
        buf_printf(&b, "</BucketName>");
    } else if ((e == S3E_NO_SUCH_KEY || e == S3E_NO_SUCH_VERSION) && x->key[0]) {
        buf_printf(&b, "<Key>");
        buf_xml(&b, x->key);
        buf_printf(&b, "</Key>");
        if (e == S3E_NO_SUCH_VERSION && x->vid) {
            buf_printf(&b, "<VersionId>");
            buf_xml(&b, x->vid);
            buf_printf(&b, "</VersionId>");
        }
    }
    buf_printf(&b, "<Resource>");
    buf_xml(&b, x->info->target);
    buf_printf(&b, "</Resource><RequestId>%s</RequestId><HostId>%s</HostId></Error>", x->id,
               x->host_id);
    if (strcmp(x->info->method, "HEAD") == 0) {
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
        (void)http_respond(x->r, ei->status, h, 0);
        free(b.p);
        return;
    }
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n%s", x->id,
             ei->status == 503 ? "Retry-After: 1\r\n" : "");
    (void)http_respond_full(x->r, ei->status, h, b.p, b.len);
    free(b.p);
}

void s3_err_msg(ctx_t *x, s3_err_t e, const char *msg)
{
    s3_err_detail(x, e, msg, NULL);
}

void s3_err(ctx_t *x, s3_err_t e)
{
    s3_err_detail(x, e, NULL, NULL);
}

/* The S3 error an engine ERR_* (or S3_ERR_NO_BUCKET) is to a client. */
s3_err_t s3_engine_err_of(int rc)
{
    switch (rc) {
    case ERR_NOT_FOUND:
        return S3E_NO_SUCH_KEY;
    case S3_ERR_NO_BUCKET:
        return S3E_NO_SUCH_BUCKET;
    case ERR_THROTTLED:
    case ERR_AGAIN: /* an object overwritten faster than a reader could open it */
        return S3E_SLOW_DOWN;
    case ERR_NOSPC:
        return S3E_INSUFFICIENT_STORAGE;
    case ERR_UNRECOVERABLE:
    case ERR_IO:     /* a store that could not be reached or written (a peer lost, a drive
                        failing): the stores that remain may take it on a retry */
    case ERR_CLOSED: /* the call's connection closed under it */
        return S3E_SERVICE_UNAVAILABLE;
    case ERR_TOO_LARGE:
        return S3E_ENTITY_TOO_LARGE;
    case ERR_INVAL:
        return S3E_INVALID_ARGUMENT;
    case ERR_PRECOND:
        return S3E_PRECONDITION_FAILED;
    case ERR_TIMEOUT: /* the body stopped coming (http_body_read) */
        return S3E_REQUEST_TIMEOUT;
    default:
        return S3E_INTERNAL;
    }
}

/* Map an engine error to the S3 answer. */
void s3_engine_error(ctx_t *x, int rc)
{
    s3_err_t e = s3_engine_err_of(rc);
    /* Which engine error a 5xx stands for: the status alone does not say (a probe). */
    if (e == S3E_INTERNAL || e == S3E_SERVICE_UNAVAILABLE || e == S3E_SLOW_DOWN)
        log_limited(LOG_LVL_INFO, "event=engine_error err=%s method=%s", err_name(rc),
                    x->info->method);
    s3_err(x, e);
}

/* CopyObjectResult / CopyPartResult: the new object's (or part's) date and ETag. */
void s3_respond_copy_result(ctx_t *x, const char *element, const obj_info_t *info)
{
    buf_t b = {0};
    char t[32];
    s3_iso8601(info->mtime_ns, t);
    buf_printf(&b,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s "
               "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LastModified>%s</LastModified>"
               "<ETag>&quot;%s&quot;</ETag>",
               element, t, info->etag);
    /* The checksum kept, as S3 names it: a client copying an object in parts lists each
     * part's in Complete, which an upload with an algorithm asks for. */
    if (strcmp(element, "CopyPartResult") == 0)
        s3_mpu_cks_part_xml(&b, s3_umeta_get(info, CKS_META));
    else
        s3_mpu_cks_object_xml(&b, info);
    buf_printf(&b, "</%s>", element);
    s3_respond_xml(x, 200, &b);
}

/* 200 with the new object's (or part's) ETag and the checksum kept for it ("algo:value"); a
 * whole object's is FULL_OBJECT, said as S3 says it for PutObject (a part's has no type). */
void s3_respond_etag(ctx_t *x, const char *etag, const char *cks, int whole)
{
    char h[560], ch[160];
    s3_cks_header(cks, ch, sizeof(ch));
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nETag: \"%s\"\r\n%s%s", x->id, etag, ch,
             whole && ch[0] ? "x-amz-checksum-type: FULL_OBJECT\r\n" : "");
    (void)http_respond_full(x->r, 200, h, NULL, 0);
}
