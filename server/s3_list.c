/*
 * s3_list: ListObjects (V1 and V2) and ListObjectVersions: prefixes,
 * delimiters folded into common prefixes, markers and opaque continuation
 * tokens; a listing that cannot be completed is an error, never short.
 */

#include "server/s3_int.h"

#include "common/crc.h"

typedef struct {
    ctx_t *x;
    buf_t *b;
    const char *prefix, *delim; /* delim NULL: none */
    const char *after;          /* marker / start-after / token */
    int max, count, truncated, url;
    const char *owner; /* entries carry <Owner> (V1 always, V2 with fetch-owner=true) */
    char *last;        /* last key or common prefix returned: the continuation point */
    size_t last_cap;
    buf_t prefixes;
    char tcache[32]; /* list_time's last second */
    uint64_t tsec;
} lst_t;

/*
 * Pieces of a listing entry, without printf: a page is a thousand entries,
 * and formatting them was most of a listing's time.
 */
static void put_s(buf_t *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

static void put_u64(buf_t *b, uint64_t v)
{
    char d[24];
    int i = sizeof(d);
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_put(b, d + i, sizeof(d) - (size_t)i);
}

/* s3_iso8601, its date and time formatted once per second: keys written together share it. */
static void list_time(char cache[32], uint64_t *sec, uint64_t ns, char out[32])
{
    unsigned ms = (unsigned)(ns / 1000000ull % 1000);
    if (!cache[0] || *sec != ns / 1000000000ull) {
        s3_iso8601(ns, cache);
        *sec = ns / 1000000000ull;
    }
    memcpy(out, cache, 20); /* "YYYY-MM-DDTHH:MM:SS." */
    out[20] = (char)('0' + ms / 100);
    out[21] = (char)('0' + ms / 10 % 10);
    out[22] = (char)('0' + ms % 10);
    out[23] = 'Z';
    out[24] = 0;
}

/* One <CommonPrefixes> entry (url: EncodingType=url). */
static void put_prefix(buf_t *b, const char *prefix, int url)
{
    buf_printf(b, "<CommonPrefixes><Prefix>");
    if (url)
        buf_url(b, prefix);
    else
        buf_xml(b, prefix);
    buf_printf(b, "</Prefix></CommonPrefixes>");
}

/* The continuation point: copied into one buffer per listing, not a string per entry. */
static void set_last(char **last, size_t *cap, const char *key)
{
    size_t n = strlen(key) + 1;
    if (n > *cap) {
        *cap = n < 256 ? 256 : n;
        *last = xrealloc(*last, *cap);
    }
    memcpy(*last, key, n);
}

/* A key, or (info NULL) a common prefix the object layer rolled up and will seek past. */
static int list_obj_cb(void *arg, const char *key, const obj_info_t *info)
{
    lst_t *l = arg;
    if (!info) {
        if (l->count == l->max) {
            l->truncated = 1;
            return 1;
        }
        put_prefix(&l->prefixes, key, l->url);
        l->count++;
        set_last(&l->last, &l->last_cap, key);
        return 0;
    }
    if (l->count == l->max) {
        l->truncated = 1;
        return 1;
    }
    char t[32];
    list_time(l->tcache, &l->tsec, info->mtime_ns, t);
    put_s(l->b, "<Contents><Key>");
    if (l->url)
        buf_url(l->b, key);
    else
        buf_xml(l->b, key);
    put_s(l->b, "</Key><LastModified>");
    put_s(l->b, t);
    put_s(l->b, "</LastModified><ETag>&quot;");
    put_s(l->b, info->etag);
    put_s(l->b, "&quot;</ETag>");
    s3_cks_list_xml(l->b, info);
    put_s(l->b, "<Size>");
    put_u64(l->b, info->size);
    put_s(l->b, "</Size>");
    if (l->owner) {
        const char *o = s3_object_owner(info, l->owner);
        put_s(l->b, "<Owner><ID>");
        buf_xml(l->b, o);
        put_s(l->b, "</ID><DisplayName>");
        buf_xml(l->b, o);
        put_s(l->b, "</DisplayName></Owner>");
    }
    put_s(l->b, "<StorageClass>STANDARD</StorageClass></Contents>");
    l->count++;
    set_last(&l->last, &l->last_cap, key);
    return 0;
}

/*
 * Continuation tokens: base64 of the last key or prefix returned, a NUL and the crc32c of the
 * key (4 bytes, big-endian). Opaque to clients, as S3's; the crc makes one that is not ours
 * (base64 of anything) an InvalidArgument, as S3 answers, instead of a listing from wherever
 * it decodes to (a conformance sweep). The NUL makes a build from before the crc refuse these
 * tokens (400), never list from a wrong key, when a cluster's nodes are upgraded in turn.
 */
#define TOKEN_TAIL 5

/* The crc of a token: its key's, then the listing's scope (bucket, prefix): a token is good
 * only for the listing that gave it (S3 refuses one from another). */
static uint32_t token_crc(const void *key, size_t n, const char *scope)
{
    return crc32c(crc32c(0, key, n), scope, strlen(scope) + 1);
}

char *s3_token_encode(const char *last, const char *scope)
{
    size_t n = strlen(last);
    uint8_t *raw = xmalloc(n + TOKEN_TAIL);
    memcpy(raw, last, n);
    uint32_t crc = token_crc(last, n, scope);
    raw[n] = 0;
    for (int i = 0; i < 4; i++)
        raw[n + 1 + (size_t)i] = (uint8_t)(crc >> (24 - 8 * i));
    char *out = xmalloc(4 * ((n + TOKEN_TAIL + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, raw, (int)(n + TOKEN_TAIL));
    free(raw);
    return out;
}

/* NULL when the token is not one of ours. */
char *s3_token_decode(const char *tok, const char *scope)
{
    size_t n = strlen(tok);
    if (n == 0 || n % 4 || n > 4 * ((MAX_KEY_LEN + TOKEN_TAIL + 2) / 3)) return NULL;
    uint8_t *raw = xmalloc(n / 4 * 3 + 1);
    int l = EVP_DecodeBlock(raw, (const unsigned char *)tok, (int)n);
    while (l > 0 && n && tok[--n] == '=') /* DecodeBlock counts the padding as zeros */
        l--;
    char *key = NULL;
    if (l >= TOKEN_TAIL) {
        size_t kl = (size_t)l - TOKEN_TAIL;
        uint32_t crc = 0;
        for (int i = 0; i < 4; i++)
            crc = crc << 8 | raw[kl + 1 + (size_t)i];
        if (raw[kl] == 0 && memchr(raw, 0, kl) == NULL && crc == token_crc(raw, kl, scope) &&
            s3_key_ok((const char *)raw, kl)) {
            key = xmalloc(kl + 1);
            memcpy(key, raw, kl);
            key[kl] = 0;
        }
    }
    free(raw);
    return key;
}

void s3_list_objects(ctx_t *x)
{
    int p1, p2, p3, p4, p5, p6, p7, p8;
    char *v2 = s3_qparam(x->query, "list-type", &p1);
    char *prefix = s3_qparam(x->query, "prefix", &p2);
    buf_t scope = {0}; /* (freed at out) */
    char *delim = s3_qparam(x->query, "delimiter", &p3);
    char *maxk = s3_qparam(x->query, "max-keys", &p4);
    char *token = s3_qparam(x->query, "continuation-token", &p5);
    char *start = s3_qparam(x->query, "start-after", &p6);
    char *marker = s3_qparam(x->query, "marker", &p7);
    char *enc = s3_qparam(x->query, "encoding-type", &p8);
    char *from_token = NULL;
    int is_v2 = v2 && strcmp(v2, "2") == 0, rc = 0;
    buf_t b = {0};
    lst_t l = {.x = x,
               .b = &b,
               .prefix = prefix ? prefix : "",
               .delim = delim && *delim ? delim : NULL,
               .max = 1000};
    obj_info_t bi;
    int fetch_owner = 0;
    char *fo = s3_qparam(x->query, "fetch-owner", &fetch_owner);
    fetch_owner = fo && strcasecmp(fo, "true") == 0; /* a boolean, as S3 reads it: TRUE too */
    free(fo);
    char owner[sizeof(x->auth.access_key)] = "";
    if ((!is_v2 || fetch_owner) && s3_bucket_exists(x, x->bucket, &bi)) {
        snprintf(owner, sizeof(owner), "%s",
                 s3_bucket_owner(&bi)[0] ? s3_bucket_owner(&bi) : x->auth.access_key);
        l.owner = owner;
    }
    l.url = enc && !strcmp(enc, "url");
    if (enc && !l.url) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid Encoding Method specified in Request");
        goto out;
    }
    if (maxk) {
        uint64_t mk;
        if (num_parse_u64(maxk, 0, INT32_MAX, &mk) != 0) {
            s3_err_msg(x, S3E_INVALID_ARGUMENT,
                       "Provided max-keys not an integer or within integer range.");
            goto out;
        }
        l.max = mk > 1000 ? 1000 : (int)mk;
    }
    /* What is echoed must be text a key could hold (buf_xml writes it as XML). */
    const char *in[] = {prefix, delim, start, marker};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
        if (in[i] && !s3_key_ok(in[i], strlen(in[i]))) {
            s3_err_msg(x, S3E_INVALID_ARGUMENT, "Listing parameters must be valid UTF-8.");
            goto out;
        }
    /* A token names its listing: the bucket and the prefix (bucket names hold no '/'). */
    buf_printf(&scope, "%s/%s", x->bucket, prefix ? prefix : "");
    if (is_v2 && token && !(from_token = s3_token_decode(token, scope.p))) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "The continuation token provided is incorrect");
        goto out;
    }
    /* Both a token and start-after: the listing goes on after whichever is further (S3's
     * answer to versitygw's case: a start-after past the token's key skips to it). */
    if (is_v2)
        l.after = from_token && (!start || strcmp(from_token, start) >= 0) ? from_token : start;
    else
        l.after = marker;
    if (l.after && !*l.after) l.after = NULL;
    /* Room for a page of usual entries up front: growing by doubling copies it all again.
     * (An entry with a short key and its default checksum named takes about 290 bytes.) */
    b.cap = 4096 + (size_t)l.max * (l.owner ? 440 : 320);
    b.p = xmalloc(b.cap);
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>");
    buf_xml(&b, x->bucket);
    buf_printf(&b, "</Name><Prefix>");
    if (l.url)
        buf_url(&b, l.prefix);
    else
        buf_xml(&b, l.prefix);
    buf_printf(&b, "</Prefix>");
    if (l.max > 0)
        rc = obj_list_delim(x->cfg->set, x->ibucket, l.prefix, l.delim, l.after, (size_t)l.max + 1,
                            list_obj_cb, &l);
    if (rc < 0) {
        /* A client's bad argument (ERR_INVAL: a prefix past the index's key room) is its
         * 400, not the node's error. */
        if (rc != ERR_INVAL)
            log_error("event=list_failed bucket=%s err=%s", x->bucket, err_name(rc));
        s3_engine_error(x, rc); /* never a short list that looks whole */
        goto out;
    }
    buf_printf(&b, "<MaxKeys>%d</MaxKeys>", l.max);
    if (l.delim) {
        buf_printf(&b, "<Delimiter>");
        if (l.url)
            buf_url(&b, l.delim);
        else
            buf_xml(&b, l.delim);
        buf_printf(&b, "</Delimiter>");
    }
    if (l.url) buf_printf(&b, "<EncodingType>url</EncodingType>");
    buf_printf(&b, "<IsTruncated>%s</IsTruncated>", l.truncated ? "true" : "false");
    if (is_v2) {
        buf_printf(&b, "<KeyCount>%d</KeyCount>", l.count);
        if (token) {
            buf_printf(&b, "<ContinuationToken>");
            buf_xml(&b, token);
            buf_printf(&b, "</ContinuationToken>");
        }
        if (start) {
            buf_printf(&b, "<StartAfter>");
            if (l.url)
                buf_url(&b, start);
            else
                buf_xml(&b, start);
            buf_printf(&b, "</StartAfter>");
        }
        if (l.truncated && l.last) {
            char *t = s3_token_encode(l.last, scope.p);
            buf_printf(&b, "<NextContinuationToken>%s</NextContinuationToken>", t);
            free(t);
        }
    } else {
        buf_printf(&b, "<Marker>");
        if (l.url)
            buf_url(&b, marker ? marker : "");
        else
            buf_xml(&b, marker ? marker : "");
        buf_printf(&b, "</Marker>");
        if (l.truncated && l.last && l.delim) {
            buf_printf(&b, "<NextMarker>");
            if (l.url)
                buf_url(&b, l.last);
            else
                buf_xml(&b, l.last);
            buf_printf(&b, "</NextMarker>");
        }
    }
    if (l.prefixes.len) buf_printf(&b, "%.*s", (int)l.prefixes.len, l.prefixes.p);
    buf_printf(&b, "</ListBucketResult>");
    s3_respond_xml(x, 200, &b);
    b.p = NULL;
out:
    free(b.p);
    free(l.prefixes.p);
    free(l.last);
    free(from_token);
    free(v2);
    free(scope.p);
    free(prefix);
    free(delim);
    free(maxk);
    free(token);
    free(start);
    free(marker);
    free(enc);
}

/* ListObjectVersions: every version and delete marker, keys in order, newest first. */
typedef struct {
    buf_t *b;
    const char *prefix, *delim, *after, *owner;
    int max, count, truncated, url;
    char *last, *last_vid; /* the last entry returned (last_vid NULL: a common prefix) */
    buf_t prefixes;
} ver_t;

/* A version, or (info NULL) a common prefix the object layer rolled up and will seek past. */
static int list_version_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    ver_t *v = arg;
    char t[32];
    if (!info) {
        if (v->count == v->max) {
            v->truncated = 1;
            return 1;
        }
        put_prefix(&v->prefixes, key, v->url);
        v->count++;
        free(v->last);
        free(v->last_vid);
        v->last = xstrdup(key);
        v->last_vid = NULL;
        return 0;
    }
    if (v->count == v->max) {
        v->truncated = 1;
        return 1;
    }
    const char *el = info->deleted ? "DeleteMarker" : "Version";
    const char *vid = info->vid[0] ? info->vid : "null";
    s3_iso8601(info->mtime_ns, t);
    buf_printf(v->b, "<%s><Key>", el);
    if (v->url)
        buf_url(v->b, key);
    else
        buf_xml(v->b, key);
    buf_printf(v->b,
               "</Key><VersionId>%s</VersionId><IsLatest>%s</IsLatest><LastModified>%s"
               "</LastModified>",
               vid, latest ? "true" : "false", t);
    if (!info->deleted) {
        buf_printf(v->b, "<ETag>&quot;%s&quot;</ETag>", info->etag);
        s3_cks_list_xml(v->b, info);
        buf_printf(v->b, "<Size>%llu</Size>", (unsigned long long)info->size);
    }
    const char *o = s3_object_owner(info, v->owner);
    buf_printf(v->b, "<Owner><ID>");
    buf_xml(v->b, o);
    buf_printf(v->b, "</ID><DisplayName>");
    buf_xml(v->b, o);
    buf_printf(v->b, "</DisplayName></Owner>");
    if (!info->deleted) buf_printf(v->b, "<StorageClass>STANDARD</StorageClass>");
    buf_printf(v->b, "</%s>", el);
    v->count++;
    free(v->last);
    free(v->last_vid);
    v->last = xstrdup(key);
    v->last_vid = xstrdup(vid);
    return 0;
}

void s3_list_versions(ctx_t *x)
{
    int p1, p2, p3, p4, p5, p6;
    char *prefix = s3_qparam(x->query, "prefix", &p1);
    char *marker = s3_qparam(x->query, "key-marker", &p2);
    char *maxk = s3_qparam(x->query, "max-keys", &p3);
    char *vmarker = s3_qparam(x->query, "version-id-marker", &p4);
    char *delim = s3_qparam(x->query, "delimiter", &p5);
    char *enc = s3_qparam(x->query, "encoding-type", &p6);
    buf_t b = {0}, entries = {0};
    obj_info_t bi;
    ver_t v = {.b = &entries, .max = 1000};
    uint64_t mk;
    const char *bad = NULL;
    if (maxk && num_parse_u64(maxk, 0, INT32_MAX, &mk) != 0)
        bad = "Provided max-keys not an integer or within integer range.";
    else if (vmarker && vmarker[0] && (!marker || !marker[0]))
        bad = "A version-id marker cannot be specified without a key marker.";
    else if (vmarker && vmarker[0] && !obj_vid_valid(vmarker))
        bad = "Invalid version id specified";
    else if (enc && strcmp(enc, "url") != 0)
        bad = "Invalid Encoding Method specified in Request";
    /* What is echoed must be text a key could hold (buf_xml writes it as XML). */
    const char *in[] = {prefix, delim, marker};
    for (size_t i = 0; !bad && i < sizeof(in) / sizeof(in[0]); i++)
        if (in[i] && !s3_key_ok(in[i], strlen(in[i])))
            bad = "Listing parameters must be valid UTF-8.";
    if (bad) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, bad);
        goto out;
    }
    if (maxk && mk < 1000) v.max = (int)mk;
    v.prefix = prefix ? prefix : "";
    v.delim = delim && delim[0] ? delim : NULL;
    v.after = marker && marker[0] ? marker : NULL;
    v.url = enc != NULL;
    v.owner = s3_bucket_exists(x, x->bucket, &bi) && s3_bucket_owner(&bi)[0] ? s3_bucket_owner(&bi)
                                                                             : x->auth.access_key;
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListVersionsResult "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>");
    buf_xml(&b, x->bucket);
    buf_printf(&b, "</Name><Prefix>");
    (v.url ? buf_url : buf_xml)(&b, v.prefix);
    buf_printf(&b, "</Prefix><KeyMarker>");
    (v.url ? buf_url : buf_xml)(&b, marker ? marker : "");
    buf_printf(&b, "</KeyMarker><VersionIdMarker>%s</VersionIdMarker>",
               vmarker && marker && marker[0] ? vmarker : "");
    int rc = v.max > 0 ? obj_list_versions_delim(x->cfg->set, x->ibucket, v.prefix, v.delim,
                                                 v.after, vmarker && vmarker[0] ? vmarker : NULL,
                                                 (size_t)v.max + 1, list_version_cb, &v)
                       : 0;
    if (rc < 0) {
        free(b.p);
        s3_engine_error(x, rc);
        goto out;
    }
    if (v.truncated && v.last) {
        buf_printf(&b, "<NextKeyMarker>");
        (v.url ? buf_url : buf_xml)(&b, v.last);
        buf_printf(&b, "</NextKeyMarker>");
        if (v.last_vid) buf_printf(&b, "<NextVersionIdMarker>%s</NextVersionIdMarker>", v.last_vid);
    }
    buf_printf(&b, "<MaxKeys>%d</MaxKeys>", v.max);
    if (v.delim) {
        buf_printf(&b, "<Delimiter>");
        (v.url ? buf_url : buf_xml)(&b, v.delim);
        buf_printf(&b, "</Delimiter>");
    }
    if (v.url) buf_printf(&b, "<EncodingType>url</EncodingType>");
    buf_printf(&b, "<IsTruncated>%s</IsTruncated>%s%s</ListVersionsResult>",
               v.truncated ? "true" : "false", entries.p ? entries.p : "",
               v.prefixes.p ? v.prefixes.p : "");
    s3_respond_xml(x, 200, &b);
out:
    free(entries.p);
    free(v.last);
    free(v.last_vid);
    free(v.prefixes.p);
    free(prefix);
    free(marker);
    free(maxk);
    free(vmarker);
    free(delim);
    free(enc);
}
