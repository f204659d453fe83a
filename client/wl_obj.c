/*
 * wl_obj: the operations of libwarmlake that are one request each (stat,
 * get, put, delete, buckets, list) and presigned URLs. Parallel ones are in
 * wl_range.c, wl_mpu.c, wl_many.c and wl_prefetch.c.
 */
#include "client/wl_int.h"

#include "common/err.h"
#include "common/md5.h"
#include "s3/sigv4.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void stat_from(wl_stat_t *st, const s3c_resp_t *r)
{
    if (!st) return;
    memset(st, 0, sizeof(*st));
    st->size = r->range_total ? r->range_total : r->content_length;
    snprintf(st->etag, sizeof(st->etag), "%s", r->etag);
    snprintf(st->last_modified, sizeof(st->last_modified), "%s", r->last_modified);
    snprintf(st->content_type, sizeof(st->content_type), "%s", r->content_type);
}

int wl__stat(wl_client_t *c, const char *bucket, const char *key, wl_stat_t *st, wl_error_t *err)
{
    char path[WL_PATH_MAX];
    if (wl__path(bucket, key, path)) return wl__fail(err, WL_EINVAL, "bucket or key too long");
    wl_call_t call = {.req = {.method = "HEAD", .path = path}};
    int rc = wl__request(c, &call, err);
    if (rc == 0) stat_from(st, &call.resp);
    return rc;
}

int wl_stat(wl_client_t *c, const char *bucket, const char *key, wl_stat_t *st)
{
    wl_error_t err = {0};
    return wl__ret(&err, wl__stat(c, bucket, key, st, &err));
}

int wl__get(wl_client_t *c, const char *bucket, const char *key, uint64_t off, uint64_t len,
            void *buf, size_t cap, size_t *got, wl_stat_t *st, wl_error_t *err)
{
    return wl__get_ex(c, bucket, key, off, len, 0, NULL, buf, cap, got, st, err);
}

int wl__get_ex(wl_client_t *c, const char *bucket, const char *key, uint64_t off, uint64_t len,
               int whole_ok, const char *if_match, void *buf, size_t cap, size_t *got,
               wl_stat_t *st, wl_error_t *err)
{
    char path[WL_PATH_MAX], range[64], im[132];
    if (got) *got = 0;
    if (wl__path(bucket, key, path)) return wl__fail(err, WL_EINVAL, "bucket or key too long");
    const char *hdrs[5] = {NULL};
    int nh = 0;
    if (off || len) {
        if (len)
            snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)off,
                     (unsigned long long)(off + len - 1));
        else
            snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)off);
        hdrs[nh++] = "range";
        hdrs[nh++] = range;
    }
    if (if_match && *if_match) {
        if (snprintf(im, sizeof(im), "\"%s\"", if_match) >= (int)sizeof(im))
            return wl__fail(err, WL_EINVAL, "ETag too long");
        hdrs[nh++] = "if-match";
        hdrs[nh++] = im;
    }
    wl_call_t call = {
        .req = {.method = "GET", .path = path, .headers = hdrs, .dst = buf, .dst_cap = cap},
        .expect_range = off || len,
        .verify_md5 = c->cfg.verify_get && !off && !len,
        .whole_ok = whole_ok,
        .range_off = off,
        .range_len = len};
    int rc = wl__request(c, &call, err);
    if (rc) return rc;
    if (got) *got = (size_t)call.resp.body_bytes;
    stat_from(st, &call.resp);
    return 0;
}

int wl_get(wl_client_t *c, const char *bucket, const char *key, uint64_t off, uint64_t len,
           void *buf, size_t cap, size_t *got, wl_stat_t *st)
{
    wl_error_t err = {0};
    return wl__ret(&err, wl__get(c, bucket, key, off, len, buf, cap, got, st, &err));
}

/* ---- PUT ---- */

int wl__md5(const void *buf, s3c_fill_fn fill, void *fill_arg, uint64_t len, char hex[33])
{
    /* common/md5: a client's threads hashing at once share vector rounds. */
    md5_t m;
    md5_init(&m);
    if (fill) {
        char *tmp = malloc(1u << 20);
        if (!tmp) return WL_ENOMEM;
        for (uint64_t off = 0; off < len;) {
            size_t n = len - off < (1u << 20) ? (size_t)(len - off) : (1u << 20);
            fill(fill_arg, off, tmp, n);
            md5_update(&m, tmp, n);
            off += n;
        }
        free(tmp);
    } else {
        md5_update(&m, buf, (size_t)len);
    }
    unsigned char d[16];
    md5_final(&m, d);
    sigv4_hex(d, 16, hex);
    return WL_OK;
}

int wl__md5_like(const char *etag)
{
    if (strlen(etag) != 32) return 0;
    for (const char *p = etag; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return 0;
    return 1;
}

int wl__put_one(wl_client_t *c, const char *path, const char *query, const void *buf,
                s3c_fill_fn fill, void *fill_arg, uint64_t len, const char *content_type,
                char *etag, wl_error_t *err)
{
    char md5[33] = "";
    if (!c->cfg.no_verify) {
        int rc = wl__md5(buf, fill, fill_arg, len, md5);
        if (rc) return wl__fail(err, rc, "out of memory");
    }
    const char *hdrs[3] = {NULL};
    if (content_type) {
        hdrs[0] = "content-type";
        hdrs[1] = content_type;
    }
    wl_call_t call = {.req = {.method = "PUT",
                              .path = path,
                              .query = query,
                              .headers = hdrs,
                              .body_len = len,
                              .body = buf,
                              .fill = fill,
                              .fill_arg = fill_arg}};
    int rc = wl__request(c, &call, err);
    if (rc) return rc;
    if (md5[0] && wl__md5_like(call.resp.etag) && strcasecmp(md5, call.resp.etag) != 0)
        return wl__fail(err, WL_ECORRUPT, "PUT %s: ETag %s, MD5 sent %s", path, call.resp.etag,
                        md5);
    if (etag) snprintf(etag, 128, "%s", call.resp.etag);
    return 0;
}

int wl__body_result(const char *body, size_t len, const char *what, const char *path, char *etag,
                    wl_error_t *err)
{
    char code[64], tag[128];
    const char *b = body ? body : "";
    s3c_xml_text(b, len, "Code", code, sizeof(code));
    s3c_xml_text(b, len, "ETag", tag, sizeof(tag));
    if (code[0]) {
        snprintf(err->s3_code, sizeof(err->s3_code), "%s", code);
        return wl__fail(err, WL_ESERVER, "%s %s: %s", what, path, code);
    }
    if (etag) {
        size_t tl = strlen(tag);
        if (tl >= 2 && tag[0] == '"' && tag[tl - 1] == '"')
            snprintf(etag, 128, "%.*s", (int)tl - 2, tag + 1);
        else
            snprintf(etag, 128, "%s", tag);
    }
    return 0;
}

int wl_copy(wl_client_t *c, const char *src_bucket, const char *src_key, const char *bucket,
            const char *key, char *etag)
{
    wl_error_t err = {0};
    char path[WL_PATH_MAX], src[WL_PATH_MAX];
    if (!key || !*key || !src_key || !*src_key || wl__path(bucket, key, path) ||
        wl__path(src_bucket, src_key, src))
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "bad bucket or key"));
    const char *hdrs[] = {"x-amz-copy-source", src, NULL};
    wl_call_t call = {.req = {.method = "PUT", .path = path, .headers = hdrs}, .want_body = 1};
    int rc = wl__request(c, &call, &err);
    if (rc == 0)
        rc = wl__body_result(call.body_copy, call.body_copy_len, "copy to", path, etag, &err);
    free(call.body_copy);
    return wl__ret(&err, rc);
}

/* ---- DELETE, buckets ---- */

static int simple(wl_client_t *c, const char *method, const char *bucket, const char *key)
{
    wl_error_t err = {0};
    char path[WL_PATH_MAX];
    if (wl__path(bucket, key, path))
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "bucket or key too long"));
    wl_call_t call = {.req = {.method = method, .path = path}};
    return wl__ret(&err, wl__request(c, &call, &err));
}

int wl_delete(wl_client_t *c, const char *bucket, const char *key)
{
    return simple(c, "DELETE", bucket, key);
}

int wl_bucket_create(wl_client_t *c, const char *bucket)
{
    return simple(c, "PUT", bucket, NULL);
}

int wl_bucket_delete(wl_client_t *c, const char *bucket)
{
    return simple(c, "DELETE", bucket, NULL);
}

/* ---- list ---- */

/* A SAX reader of ListObjectsV2 / ListAllMyBuckets results: the element path's last three
   names pick what a text is. */
typedef struct {
    wl_list_t *l;
    size_t cap_o, cap_p;
    char names[3][32]; /* grandparent, parent, self */
    int depth;
    char *text;
    size_t tl, tcap;
    int nomem;
    XML_Parser p;
} list_rd_t;

static void lr_start(void *ud, const char *el, const char **attr)
{
    list_rd_t *r = ud;
    r->depth++;
    memmove(r->names[0], r->names[1], sizeof(r->names[0]) * 2);
    snprintf(r->names[2], sizeof(r->names[2]), "%s", el);
    r->tl = 0;
    wl_list_t *l = r->l;
    if (!strcmp(el, "Contents") || !strcmp(el, "Bucket")) {
        if (l->n_objects == r->cap_o) {
            size_t cap = r->cap_o ? r->cap_o * 2 : 64;
            wl_object_t *o = realloc(l->objects, cap * sizeof(*o));
            if (!o) goto nomem;
            l->objects = o;
            r->cap_o = cap;
        }
        memset(&l->objects[l->n_objects++], 0, sizeof(wl_object_t));
    }
    return;
nomem:
    r->nomem = 1;
    XML_StopParser(r->p, XML_FALSE);
}

static void lr_text(void *ud, const char *s, int len)
{
    list_rd_t *r = ud;
    if (r->tl + (size_t)len + 1 > r->tcap) {
        size_t cap = (r->tl + (size_t)len + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) {
            r->nomem = 1;
            XML_StopParser(r->p, XML_FALSE);
            return;
        }
        r->text = t;
        r->tcap = cap;
    }
    memcpy(r->text + r->tl, s, (size_t)len);
    r->tl += (size_t)len;
    r->text[r->tl] = 0;
}

static void lr_end(void *ud, const char *el)
{
    list_rd_t *r = ud;
    wl_list_t *l = r->l;
    const char *t = r->text && r->tl ? r->text : "";
    const char *parent = r->names[1];
    wl_object_t *o = l->n_objects ? &l->objects[l->n_objects - 1] : NULL;
    int in_obj = o && (!strcmp(parent, "Contents") || !strcmp(parent, "Bucket"));
    if (in_obj && (!strcmp(el, "Key") || !strcmp(el, "Name"))) {
        free(o->key);
        if (!(o->key = strdup(t))) r->nomem = 1;
    } else if (in_obj && !strcmp(el, "Size")) {
        o->size = strtoull(t, NULL, 10);
    } else if (in_obj && !strcmp(el, "ETag")) {
        size_t n = strlen(t);
        if (n >= 2 && t[0] == '"' && t[n - 1] == '"') t++, n -= 2;
        snprintf(o->etag, sizeof(o->etag), "%.*s", (int)n, t);
    } else if (in_obj && (!strcmp(el, "LastModified") || !strcmp(el, "CreationDate"))) {
        snprintf(o->last_modified, sizeof(o->last_modified), "%s", t);
    } else if (!strcmp(parent, "CommonPrefixes") && !strcmp(el, "Prefix")) {
        if (l->n_prefixes == r->cap_p) {
            size_t cap = r->cap_p ? r->cap_p * 2 : 16;
            char **p = realloc(l->prefixes, cap * sizeof(*p));
            if (!p) {
                r->nomem = 1;
            } else {
                l->prefixes = p;
                r->cap_p = cap;
            }
        }
        if (!r->nomem && !(l->prefixes[l->n_prefixes++] = strdup(t))) r->nomem = 1;
    } else if (!strcmp(el, "IsTruncated")) {
        l->truncated = !strcmp(t, "true");
    } else if (!strcmp(el, "NextContinuationToken")) {
        free(l->next_token);
        if (!(l->next_token = strdup(t))) r->nomem = 1;
    }
    if (r->nomem) XML_StopParser(r->p, XML_FALSE);
    r->depth--;
    memmove(r->names[1], r->names[0], sizeof(r->names[0]) * 2);
    r->names[0][0] = 0;
    r->tl = 0;
}

static void lr_no_entities(void *ud, const XML_Char *name, int pe, const XML_Char *value, int vlen,
                           const XML_Char *base, const XML_Char *sys, const XML_Char *pub,
                           const XML_Char *notation)
{
    list_rd_t *r = ud;
    XML_StopParser(r->p, XML_FALSE);
}

void wl_list_free(wl_list_t *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n_objects; i++)
        free(l->objects[i].key);
    for (size_t i = 0; i < l->n_prefixes; i++)
        free(l->prefixes[i]);
    free(l->objects);
    free(l->prefixes);
    free(l->next_token);
    free(l);
}

/* Parse a listing body into a new wl_list_t. */
static int parse_list(const char *body, size_t len, wl_list_t **out, wl_error_t *err)
{
    *out = NULL;
    wl_list_t *l = calloc(1, sizeof(*l));
    if (!l) return wl__fail(err, WL_ENOMEM, "out of memory");
    XML_Parser p = XML_ParserCreate(NULL);
    if (!p) {
        free(l);
        return wl__fail(err, WL_ENOMEM, "out of memory");
    }
    list_rd_t r = {.l = l, .p = p};
    XML_SetUserData(p, &r);
    XML_SetElementHandler(p, lr_start, lr_end);
    XML_SetCharacterDataHandler(p, lr_text);
    XML_SetEntityDeclHandler(p, lr_no_entities);
    int ok = len < (1u << 30) && XML_Parse(p, body, (int)len, XML_TRUE) == XML_STATUS_OK;
    XML_ParserFree(p);
    free(r.text);
    for (size_t i = 0; ok && i < l->n_objects; i++)
        if (!l->objects[i].key) ok = 0;
    if (!ok || r.nomem) {
        wl_list_free(l);
        return r.nomem ? wl__fail(err, WL_ENOMEM, "out of memory")
                       : wl__fail(err, WL_ECORRUPT, "malformed listing");
    }
    *out = l;
    return 0;
}

int wl_list(wl_client_t *c, const char *bucket, const char *prefix, const char *delimiter,
            const char *token, int max_keys, wl_list_t **out)
{
    wl_error_t err = {0};
    char path[WL_PATH_MAX];
    *out = NULL;
    if (wl__path(bucket, NULL, path))
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "bad bucket name"));
    /* Encoded values can triple in length. */
    size_t cap = 128 + 3 * ((prefix ? strlen(prefix) : 0) + (delimiter ? strlen(delimiter) : 0) +
                            (token ? strlen(token) : 0));
    char *q = malloc(cap), *tmp = malloc(cap);
    int rc = WL_ENOMEM;
    if (!q || !tmp) goto out;
    size_t o = (size_t)snprintf(q, cap, "list-type=2");
    if (max_keys > 0) o += (size_t)snprintf(q + o, cap - o, "&max-keys=%d", max_keys);
    const char *names[] = {"continuation-token", "delimiter", "prefix"};
    const char *vals[] = {token, delimiter, prefix};
    for (int i = 0; i < 3; i++) {
        if (!vals[i] || !*vals[i]) continue;
        if (s3c_encode_query(vals[i], tmp, cap) < 0) goto out;
        o += (size_t)snprintf(q + o, cap - o, "&%s=%s", names[i], tmp);
    }
    wl_call_t call = {.req = {.method = "GET", .path = path, .query = q}, .want_body = 1};
    rc = wl__request(c, &call, &err);
    if (rc == 0)
        rc = parse_list(call.body_copy ? call.body_copy : "", call.body_copy_len, out, &err);
    free(call.body_copy);
out:
    free(q);
    free(tmp);
    if (rc == WL_ENOMEM && !err.message[0]) wl__fail(&err, rc, "out of memory");
    return wl__ret(&err, rc);
}

int wl_list_buckets(wl_client_t *c, wl_list_t **out)
{
    wl_error_t err = {0};
    *out = NULL;
    wl_call_t call = {.req = {.method = "GET", .path = "/"}, .want_body = 1};
    int rc = wl__request(c, &call, &err);
    if (rc == 0)
        rc = parse_list(call.body_copy ? call.body_copy : "", call.body_copy_len, out, &err);
    free(call.body_copy);
    return wl__ret(&err, rc);
}

/* ---- presign ---- */

int wl_presign(wl_client_t *c, const char *method, const char *bucket, const char *key,
               long expires, char *out, size_t cap)
{
    wl_error_t err = {0};
    char path[WL_PATH_MAX], cred[512], ecred[1024], query[2048], host[256];
    if (!c->access_key || !c->secret_key)
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "presigning needs credentials"));
    if (wl__path(bucket, key, path) || expires <= 0 || expires > 604800)
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "bad bucket, key or expiry"));
    const char *url = c->ep[0].url;
    const char *h = strstr(url, "://") ? strstr(url, "://") + 3 : url;
    snprintf(host, sizeof(host), "%.*s", (int)strcspn(h, "/"), h);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char amz_date[17], day[9];
    strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
    snprintf(day, sizeof(day), "%.8s", amz_date);
    snprintf(cred, sizeof(cred), "%s/%s/%s/s3/aws4_request", c->access_key, day, c->region);
    if (s3c_encode_query(cred, ecred, sizeof(ecred)) < 0)
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "access key too long"));
    snprintf(query, sizeof(query),
             "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&"
             "X-Amz-Expires=%ld&X-Amz-SignedHeaders=host",
             ecred, amz_date, expires);
    sigv4_header_t hh = {"host", 4, host, strlen(host)};
    sigv4_request_t r = {method, path, strlen(path), query, strlen(query), &hh, 1, SIGV4_UNSIGNED};
    char *canon = sigv4_canonical_request(&r, "host", 1);
    if (!canon) return wl__ret(&err, wl__fail(&err, WL_ENOMEM, "out of memory"));
    uint8_t k[32];
    sigv4_signing_key(c->secret_key, day, c->region, "s3", k);
    char scope[160], sig[65];
    snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", day, c->region);
    sigv4_signature(k, amz_date, scope, canon, sig);
    free(canon);
    int n = snprintf(out, cap, "%.*s%s?%s&X-Amz-Signature=%s", (int)(h - url) + (int)strlen(host),
                     url, path, query, sig);
    if (n < 0 || (size_t)n >= cap)
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "output buffer too short"));
    return wl__ret(&err, 0);
}
