/*
 * s3_cors: a bucket's CORS rules (Put/Get/DeleteBucketCors), preflight
 * OPTIONS requests answered from them, and the Access-Control-* headers of
 * actual requests from an allowed origin (presigned ones included). The
 * rules are kept as the XML the owner sent, one internal object per bucket
 * incarnation (a bucket name reused starts without rules); parsing and
 * matching are s3/cors.
 */
#include "server/s3_int.h"

#define CORS_BODY_MAX (64u << 10)

/* The bucket's rules: 0 (c filled), ERR_NOT_FOUND when it has none, or an engine error. */
static int cors_load(ctx_t *x, const char *iname, cors_config_t *c)
{
    obj_info_t info;
    int err;
    obj_reader_t *rd = obj_open(x->cfg->set, CORS_OBJECTS, iname, &info, &err);
    if (!rd) return err;
    if (info.size > CORS_BODY_MAX) {
        obj_close(rd);
        return ERR_CORRUPT;
    }
    char *body = xmalloc(info.size + 1);
    err = obj_read(rd, 0, body, info.size);
    obj_close(rd);
    if (!err) err = cors_parse_stored(body, info.size, c) == 0 ? 0 : ERR_CORRUPT;
    free(body);
    return err;
}

/* The XML as stored, for GET ?cors. */
static char *cors_body(ctx_t *x, size_t *len, int *err)
{
    obj_info_t info;
    obj_reader_t *rd = obj_open(x->cfg->set, CORS_OBJECTS, x->ibucket, &info, err);
    if (!rd) return NULL;
    char *body = xmalloc(info.size + 1);
    *err = info.size > CORS_BODY_MAX ? ERR_CORRUPT : obj_read(rd, 0, body, info.size);
    obj_close(rd);
    if (*err) {
        free(body);
        return NULL;
    }
    *len = info.size;
    return body;
}

static int cors_store(ctx_t *x, const char *body, size_t len)
{
    int err;
    obj_writer_t *w = obj_put_begin(x->cfg->set, CORS_OBJECTS, x->ibucket, &err);
    if (!w) return err;
    if ((err = obj_put_write(w, body, len)) != 0) {
        obj_put_abort(w);
        return err;
    }
    /* Under the bucket's lock, against the same incarnation, as every commit into it. */
    return s3_commit_in_bucket(x, w, "application/xml", NULL, 0, NULL);
}

void s3_cors_forget(ctx_t *x)
{
    int rc = obj_delete(x->cfg->set, CORS_OBJECTS, x->ibucket);
    if (rc && rc != ERR_NOT_FOUND)
        log_warn("event=cors_drop_failed bucket=%s err=%s", x->bucket, err_name(rc));
}

void s3_cors_op(ctx_t *x)
{
    const char *m = x->info->method;
    char h[256];
    int rc;
    snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    if (strcmp(m, "GET") == 0) {
        size_t len;
        char *body = cors_body(x, &len, &rc);
        if (!body) {
            if (rc == ERR_NOT_FOUND)
                s3_err(x, S3E_NO_SUCH_CORS);
            else
                s3_engine_error(x, rc);
            return;
        }
        snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n", x->id);
        (void)http_respond_full(x->r, 200, h, body, len);
        free(body);
    } else if (strcmp(m, "PUT") == 0) {
        size_t len;
        char *body = s3_read_small_body(x, CORS_BODY_MAX, &len);
        if (!body) return;
        cors_config_t c;
        rc = cors_parse(body, len, &c);
        if (rc == ERR_RANGE || rc == ERR_TOO_LARGE) {
            free(body);
            s3_err_msg(x, S3E_INVALID_REQUEST,
                       rc == ERR_RANGE ? "Found unsupported HTTP method in CORS config."
                                       : "AllowedOrigin or AllowedHeader can not have more than "
                                         "one wildcard.");
            return;
        }
        if (rc) {
            free(body);
            s3_err(x, S3E_MALFORMED_XML);
            return;
        }
        cors_free(&c);
        rc = cors_store(x, body, len);
        free(body);
        if (rc)
            s3_engine_error(x, rc);
        else
            (void)http_respond(x->r, 200, h, 0);
    } else if (strcmp(m, "DELETE") == 0) {
        rc = obj_delete(x->cfg->set, CORS_OBJECTS, x->ibucket);
        if (rc && rc != ERR_NOT_FOUND)
            s3_engine_error(x, rc);
        else
            (void)http_respond(x->r, 204, h, 0);
    } else {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    }
}

/* A list as one header value: "a, b, c". */
static void join(buf_t *b, char **v, int n)
{
    for (int i = 0; i < n; i++)
        buf_printf(b, "%s%s", i ? ", " : "", v[i]);
}

/* The Access-Control-* lines for origin under rule r. */
static void allow_lines(buf_t *b, const cors_rule_t *r, const char *origin)
{
    int any = 0;
    for (int i = 0; i < r->norigins && !any; i++)
        any = strcmp(r->origins[i], "*") == 0;
    if (any) {
        buf_printf(b, "Access-Control-Allow-Origin: *\r\n");
    } else {
        buf_printf(b,
                   "Access-Control-Allow-Origin: %s\r\nAccess-Control-Allow-Credentials: true\r\n",
                   origin);
    }
    buf_printf(b, "Access-Control-Allow-Methods: ");
    static const char *const names[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};
    for (unsigned i = 0, first = 1; i < 5; i++)
        if (r->methods & (1u << i)) {
            buf_printf(b, "%s%s", first ? "" : ", ", names[i]);
            first = 0;
        }
    buf_printf(b, "\r\n");
    if (r->nexpose) {
        buf_printf(b, "Access-Control-Expose-Headers: ");
        join(b, r->expose, r->nexpose);
        buf_printf(b, "\r\n");
    }
    if (r->max_age >= 0) buf_printf(b, "Access-Control-Max-Age: %ld\r\n", r->max_age);
    buf_printf(b,
               "Vary: Origin, Access-Control-Request-Headers, Access-Control-Request-Method\r\n");
}

/* An origin or header list that can go into a header line as it is (and is not huge). */
static int header_safe(const char *v)
{
    size_t n = 0;
    for (; v[n]; n++)
        if ((unsigned char)v[n] < 0x20 || v[n] == 0x7f) return 0;
    return n <= 1024;
}

/* The request's bucket's rules; 0 or an error (ERR_NOT_FOUND: no bucket, or no rules). */
static int bucket_rules(ctx_t *x, cors_config_t *c)
{
    obj_info_t bi;
    if (!x->bucket[0] || !s3_bucket_exists(x, x->bucket, &bi)) return ERR_NOT_FOUND;
    s3_bucket_iname(x->bucket, &bi, x->ibucket);
    return cors_load(x, x->ibucket, c);
}

void s3_cors_preflight(ctx_t *x)
{
    const char *origin = s3_hdr(x->info, "origin");
    const char *method = s3_hdr(x->info, "access-control-request-method");
    const char *headers = s3_hdr(x->info, "access-control-request-headers");
    const char *bad =
        !origin   ? "Insufficient information. Origin request header needed."
        : !method ? "Insufficient information. Access-Control-Request-Method header needed."
        : !header_safe(origin) ? "The Origin header holds control characters or is over 1024 bytes."
        : headers && !header_safe(headers)
            ? "The Access-Control-Request-Headers header holds control characters or is over "
              "1024 bytes."
            : NULL;
    if (bad) {
        s3_err_msg(x, S3E_INVALID_REQUEST, bad);
        return;
    }
    cors_config_t c;
    int rc = bucket_rules(x, &c);
    if (rc == ERR_NOT_FOUND) {
        s3_err_msg(x, S3E_CORS_FORBIDDEN, "CORSResponse: CORS is not enabled for this bucket.");
        return;
    }
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    const cors_rule_t *r = cors_match(&c, origin, cors_method(method), headers);
    if (!r) {
        cors_free(&c);
        s3_err(x, S3E_CORS_FORBIDDEN);
        return;
    }
    buf_t b = {0};
    buf_printf(&b, "x-amz-request-id: %s\r\n", x->id);
    allow_lines(&b, r, origin);
    if (headers && headers[0]) buf_printf(&b, "Access-Control-Allow-Headers: %s\r\n", headers);
    cors_free(&c);
    (void)http_respond(x->r, 200, b.p, 0);
    free(b.p);
}

void s3_cors_actual(ctx_t *x)
{
    const char *origin = s3_hdr(x->info, "origin");
    if (!origin || !header_safe(origin) || !x->bucket[0]) return;
    cors_config_t c;
    if (bucket_rules(x, &c) != 0) return;
    const cors_rule_t *r = cors_match(&c, origin, cors_method(x->info->method), NULL);
    if (r) {
        buf_t b = {0};
        allow_lines(&b, r, origin);
        http_add_headers(x->r, b.p);
        free(b.p);
    }
    cors_free(&c);
}
