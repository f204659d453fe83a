/*
 * s3_object: one object: PutObject (metadata, checksums, Content-MD5,
 * conditional writes), GetObject / HeadObject (conditionals, ranges,
 * stripes sent in place), GetObjectAttributes. CopyObject is in s3_copy.c,
 * the deletes in s3_delete.c.
 */

#include "server/s3_int.h"

#include "s3/hdrlist.h"

/* User metadata from x-amz-meta-* headers as "name\0value\0" pairs; -1 when too large. */
/*
 * The standard headers S3 keeps with an object, as internal user-metadata
 * entries, and the query parameters that override them on a signed GET.
 */
static const struct {
    const char *name, *meta, *param;
} std_hdrs[] = {
    {"Cache-Control", "\001h:cache-control", "response-cache-control"},
    {"Content-Disposition", "\001h:content-disposition", "response-content-disposition"},
    {"Content-Encoding", "\001h:content-encoding", "response-content-encoding"},
    {"Content-Language", "\001h:content-language", "response-content-language"},
    {"Expires", "\001h:expires", "response-expires"},
    /* (No override: S3 serves it to website redirects, which warmlake keeps and returns.) */
    {"x-amz-website-redirect-location", REDIRECT_META, NULL},
};
#define N_STD_HDRS (sizeof(std_hdrs) / sizeof(std_hdrs[0]))

/* Content-Encoding as kept: without the aws-chunked token (a transfer detail), "" if none. */
static void content_encoding(const char *v, buf_t *out)
{
    const char *item;
    for (size_t l; (l = hdrlist_next(&v, &item)) != 0;)
        if (!(l == 11 && strncasecmp(item, "aws-chunked", 11) == 0))
            buf_printf(out, "%s%.*s", out->len ? "," : "", (int)l, item);
}

/*
 * A response-* value as its header carries it. S3 sends these as ISO-8859-1:
 * the parameter's UTF-8 text must map to it (else 400 "Header value cannot be
 * represented using ISO-8859-1.", which is also what bytes that are no UTF-8
 * get) and goes out as those bytes. Control characters (CR and LF would end
 * the line or the head and let a presigned URL built from user input set
 * headers) and values over 1 KiB are refused too. Returns the header text
 * (malloc'd), or NULL with *why set.
 */
static char *header_text(const char *v, const char **why)
{
    size_t n = strlen(v);
    char *out = xmalloc(n + 1), *o = out;
    *why = "A response-* override is not a valid header value.";
    for (size_t i = 0, l; i < n; i += l) {
        const unsigned char *p = (const unsigned char *)v + i;
        l = s3_utf8_char_len(p, n - i);
        unsigned cp = l == 1 ? p[0] : l == 2 ? (unsigned)(p[0] & 0x1f) << 6 | (p[1] & 0x3f) : 0x100;
        if (!l || cp > 0xff) {
            *why = "Header value cannot be represented using ISO-8859-1.";
            free(out);
            return NULL;
        }
        if ((cp < 0x20 && cp != '\t') || (cp >= 0x7f && cp < 0xa0)) {
            free(out);
            return NULL;
        }
        *o++ = (char)cp;
    }
    *o = 0;
    if (o - out > 1024) {
        free(out);
        return NULL;
    }
    return out;
}

/* The header text of the request's response-* parameter name, or NULL (none, or none valid:
 * s3_check_response_overrides has refused those). Malloc'd. */
static char *override_text(ctx_t *x, const char *name)
{
    int present;
    const char *why;
    char *v = s3_qparam(x->query, name, &present);
    char *t = v ? header_text(v, &why) : NULL;
    free(v);
    return t;
}

/*
 * A user metadata value as S3 returns it: as stored when it is US-ASCII, else encoded as
 * RFC 2047 says ("=?UTF-8?B?...?=", mail-safe). Sent raw, UTF-8 in a header reads as
 * mojibake in SDKs (Latin-1 by RFC 9110) and strict HTTP stacks refuse the response.
 */
static void mail_safe(buf_t *hb, const char *val)
{
    size_t n = strlen(val);
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++)
        ascii = (unsigned char)val[i] < 0x80;
    if (ascii) {
        buf_printf(hb, "%s", val);
        return;
    }
    char *b64 = xmalloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)val, (int)n);
    buf_printf(hb, "=?UTF-8?B?%s?=", b64);
    free(b64);
}

/* Content-Type and the kept standard headers of info, or what the request's response-*
 * parameters put instead. */
static void std_headers(ctx_t *x, const obj_info_t *info, buf_t *hb)
{
    char *v = override_text(x, "response-content-type");
    buf_printf(hb, "Content-Type: %s\r\n", v ? v : info->content_type);
    free(v);
    for (size_t i = 0; i < N_STD_HDRS; i++) {
        v = std_hdrs[i].param ? override_text(x, std_hdrs[i].param) : NULL;
        const char *kept = s3_umeta_get(info, std_hdrs[i].meta);
        if (v || kept[0]) buf_printf(hb, "%s: %s\r\n", std_hdrs[i].name, v ? v : kept);
        free(v);
    }
}

/* 0 when every response-* parameter can be a header value; else the error was sent. */
int s3_check_response_overrides(ctx_t *x)
{
    const char *names[N_STD_HDRS + 1];
    size_t nn = 0;
    names[nn++] = "response-content-type";
    for (size_t i = 0; i < N_STD_HDRS; i++)
        if (std_hdrs[i].param) names[nn++] = std_hdrs[i].param;
    for (size_t i = 0; i < nn; i++) {
        int present;
        const char *why = "A response-* override is not a valid header value.";
        char *v = s3_qparam(x->query, names[i], &present);
        char *t = v ? header_text(v, &why) : NULL;
        if (present && !t) {
            buf_t e = {0};
            buf_printf(&e, "<ArgumentName>%s</ArgumentName><ArgumentValue>", names[i]);
            buf_xml(&e, v ? v : "");
            buf_printf(&e, "</ArgumentValue>");
            s3_err_detail(x, S3E_INVALID_ARGUMENT, why, e.p);
            free(e.p);
            free(v);
            return -1;
        }
        free(t);
        free(v);
    }
    return 0;
}

/* Whether the request names any response-* override (refused for anonymous GETs, as S3). */
int s3_has_response_overrides(ctx_t *x)
{
    int present;
    char *v = s3_qparam(x->query, "response-content-type", &present);
    free(v);
    for (size_t i = 0; i < N_STD_HDRS && !present; i++) {
        if (!std_hdrs[i].param) continue;
        v = s3_qparam(x->query, std_hdrs[i].param, &present);
        free(v);
    }
    return present;
}

int s3_redirect_header(ctx_t *x, const char **v)
{
    *v = s3_hdr(x->info, "x-amz-website-redirect-location");
    if (*v && strncmp(*v, "/", 1) != 0 && strncmp(*v, "http://", 7) != 0 &&
        strncmp(*v, "https://", 8) != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT,
                   "The website redirect location must have a prefix of 'http://' or 'https://' "
                   "or '/'.");
        return -1;
    }
    return 0;
}

int s3_writer_keeps(const ctx_t *x, int acl_given, const char *acl)
{
    return x->writer_owns == 1 ||
           (x->writer_owns == 2 && !(acl_given && !strcmp(acl, "bucket-owner-full-control")));
}

int s3_build_umeta(ctx_t *x, buf_t *um)
{
    size_t user = 0; /* bytes of names (after x-amz-meta-) and values, not their separators */
    for (int i = 0; i < x->info->nheaders; i++) {
        const char *n = x->info->headers[i].name;
        if (strncasecmp(n, "x-amz-meta-", 11) == 0) {
            for (const char *c = n + 11; *c; c++)
                buf_printf(um, "%c", (*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
            buf_printf(um, "%c%s%c", 0, x->info->headers[i].value, 0);
            user += strlen(n + 11) + strlen(x->info->headers[i].value);
        }
    }
    /* S3's limit on user-defined metadata: 2 KiB, "the sum of the number of bytes in the
     * UTF-8 encoding of each key and value" (the NULs that separate them here are ours). */
    if (user > S3_USER_META_MAX) {
        s3_err(x, S3E_METADATA_TOO_LARGE);
        return -1;
    }
    /* The ACL asked for; and who owns the object: a signed-in writer into another's bucket,
     * as the bucket's ownership setting says (x->writer_owns, s3_acl.c). */
    char *acl = xmalloc(S3_ACL_STORED_MAX);
    int given;
    if (s3_acl_from_headers(x, 0, acl, &given) != 0) {
        free(acl);
        return -1;
    }
    if (given && strcmp(acl, "private") != 0) buf_printf(um, "%s%c%s%c", ACL_META, 0, acl, 0);
    if (s3_writer_keeps(x, given, acl))
        buf_printf(um, "%s%c%s%c", OWNER_META, 0, x->auth.access_key, 0);
    free(acl);
    /* x-amz-tagging: the object's tags, checked and kept in canonical form. */
    const char *tagging = s3_hdr(x->info, "x-amz-tagging");
    if (tagging) {
        buf_t tags = {0};
        if (s3_tags_from_query(x, tagging, &tags) != 0) return -1;
        if (tags.len) buf_printf(um, "%s%c%s%c", TAG_META, 0, tags.p, 0);
        free(tags.p);
    }
    const char *redirect;
    if (s3_redirect_header(x, &redirect) != 0) return -1;
    for (size_t i = 0; i < N_STD_HDRS; i++) {
        const char *v = s3_hdr(x->info, std_hdrs[i].name);
        if (!v) continue;
        buf_t enc = {0};
        if (i == 2) { /* Content-Encoding */
            content_encoding(v, &enc);
            v = enc.p;
        }
        if (v && v[0]) buf_printf(um, "%s%c%s%c", std_hdrs[i].meta, 0, v, 0);
        free(enc.p);
    }
    if (um->len > sizeof(((obj_info_t *)0)->umeta)) {
        s3_err(x, S3E_METADATA_TOO_LARGE);
        return -1;
    }
    return 0;
}

/*
 * Stream the request body into w and check Content-MD5. On failure the
 * error response is sent, w is aborted, and -1 returned.
 */

/* The body refused over its checksum of kind algo (fmt names it with %s): w aborted, -1. */
static int cks_refused(ctx_t *x, obj_writer_t *w, s3_err_t e, const char *fmt, int algo)
{
    char msg[128];
    snprintf(msg, sizeof(msg), fmt, cks_name(algo));
    obj_put_abort(w);
    s3_err_msg(x, e, msg);
    return -1;
}

int s3_stream_body(ctx_t *x, obj_writer_t *w, char cks_out[128])
{
    const char *cmd5 = s3_hdr(x->info, "content-md5");
    const char *trailer = s3_hdr(x->info, "x-amz-trailer");
    const char *expect = NULL;
    char hname[40], cmd5_hex[33] = "";
    int algo = CKS_NONE;
    cks_out[0] = 0;
    /* The size the client says, for the encoder to lay a short object out as it comes. */
    uint64_t said;
    const char *dcl = s3_hdr(x->info, "x-amz-decoded-content-length");
    if (!x->chunked && x->info->content_length > 0)
        obj_put_size_hint(w, (uint64_t)x->info->content_length);
    else if (x->chunked && dcl && num_parse_u64(dcl, 0, UINT64_MAX, &said) == 0)
        obj_put_size_hint(w, said);
    /* A malformed Content-MD5 is refused before the body is read. */
    if (cmd5 && s3_content_md5_hex(cmd5, cmd5_hex) != 0) {
        obj_put_abort(w);
        s3_err(x, S3E_INVALID_DIGEST);
        return -1;
    }
    /* x-amz-checksum-ALGO as a header, or named by x-amz-trailer to follow the body. */
    int nalgo = 0;
    for (int a = CKS_CRC32; a < CKS_N; a++) {
        snprintf(hname, sizeof(hname), "x-amz-checksum-%s", cks_name(a));
        const char *v = s3_hdr(x->info, hname);
        if (v && !algo) {
            expect = v;
            algo = a;
        }
        nalgo += v != NULL;
    }
    /* A checksum header and a checksum trailer: two checksums as well (S3 refuses it). */
    if (nalgo && trailer && strncasecmp(trailer, "x-amz-checksum-", 15) == 0) nalgo++;
    if (nalgo > 1) { /* each must hold, or none is checked twice: S3 refuses the request */
        obj_put_abort(w);
        s3_err_msg(x, S3E_INVALID_REQUEST, S3_CKS_MULTIPLE);
        return -1;
    }
    /* What the request says of its checksum must be one thing, and well formed (S3 refuses
     * the rest with InvalidRequest, not BadDigest: nothing was compared yet). */
    const char *sdk = s3_hdr(x->info, "x-amz-sdk-checksum-algorithm");
    int sdk_algo = cks_algo(sdk), named = algo ? algo : cks_algo(trailer);
    uint8_t dig[64];
    const char *why = NULL;
    char why_buf[160];
    if (sdk && !sdk_algo) {
        why = "Value for x-amz-sdk-checksum-algorithm header is invalid.";
    } else if (sdk_algo && named && sdk_algo != named) {
        why = "Value for x-amz-sdk-checksum-algorithm header is invalid.";
    } else if (expect && cks_decode(algo, expect, dig) != 0) {
        snprintf(why_buf, sizeof(why_buf), "Value for x-amz-checksum-%s header is invalid.",
                 cks_name(algo));
        why = why_buf;
    }
    if (why) {
        obj_put_abort(w);
        s3_err_msg(x, S3E_INVALID_REQUEST, why);
        return -1;
    }
    if (!algo && trailer) {
        algo = cks_algo(trailer);
        if (!algo || strncasecmp(trailer, "x-amz-checksum-", 15) != 0) {
            obj_put_abort(w);
            s3_err_msg(x, S3E_INVALID_REQUEST,
                       "The x-amz-trailer header names no supported checksum.");
            return -1;
        }
    }
    if (!algo) algo = x->cks_default; /* a part of an upload with a checksum algorithm */
    cks_t ck, ck2;
    int also = x->cks_also != algo ? x->cks_also : CKS_NONE;
    x->cks_also_val[0] = 0;
    if ((algo && cks_init(&ck, algo) != 0) || (also && cks_init(&ck2, also) != 0)) {
        if (algo) cks_free(&ck);
        obj_put_abort(w);
        s3_engine_error(x, ERR_NOMEM);
        return -1;
    }
    /*
     * A buffer for each piece of the body: the writer keeps the last one until its MD5 is
     * done (obj_put_write_pooled), which is then hashed in the MD5 hub beside other PUTs' while
     * this reads on.
     */
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    uint8_t *buf = NULL;
    dec_t st = {0};
    long n;
    int64_t total = 0;
    int err = 0;
    while ((n = s3_body_read(x, buf = bufpool_get(pool, IO_CHUNK), IO_CHUNK, &st)) > 0) {
        total += n;
        if ((uint64_t)total > S3_MAX_PUT_BYTES) { /* chunked: no length said so up front */
            err = ERR_TOO_LARGE;
            break;
        }
        if (algo) cks_update(&ck, buf, (size_t)n);
        if (also) cks_update(&ck2, buf, (size_t)n);
        err = obj_put_write_pooled(w, buf, (size_t)n, pool); /* buf is w's now */
        buf = NULL;
        if (err) break;
    }
    if (buf) bufpool_put(pool, buf);
    free(st.spill);
    char got[CKS_MAX_B64] = "";
    if (algo) cks_final(&ck, got, sizeof(got));
    if (also) {
        char v[CKS_MAX_B64];
        cks_final(&ck2, v, sizeof(v));
        snprintf(x->cks_also_val, sizeof(x->cks_also_val), "%s:%s", cks_name(also), v);
    }
    int end = n < 0 || err ? 0 : s3_body_end(x);
    if (n < 0 || err || end != 0 ||
        (!x->chunked && x->info->content_length >= 0 && total != x->info->content_length)) {
        obj_put_abort(w);
        if (n == ERR_DENIED)
            s3_err_msg(x, S3E_SIGNATURE_MISMATCH, "A chunk signature does not match.");
        else if (n == ERR_RANGE)
            s3_err(x, S3E_INVALID_CHUNK_SIZE);
        else if (n == ERR_TIMEOUT)
            s3_err(x, S3E_REQUEST_TIMEOUT);
        else if (n < 0 || end == ERR_INVAL)
            s3_err(x, S3E_INCOMPLETE_BODY);
        else if (err)
            s3_engine_error(x, err);
        else
            s3_err(x, S3E_SHA256_MISMATCH);
        return -1;
    }
    if (s3_trailers_announced(x) != 0) {
        obj_put_abort(w);
        return -1;
    }
    if (algo && trailer && !expect) {
        char lower[64];
        snprintf(lower, sizeof(lower), "x-amz-checksum-%s", cks_name(algo));
        expect = x->chunked ? s3_chunked_trailer(x->chunked, lower) : NULL;
        if (!expect) {
            obj_put_abort(w);
            s3_err_msg(x, S3E_INVALID_REQUEST, "The announced checksum trailer is missing.");
            return -1;
        }
        /* A value that is no checksum of this kind was not compared: not BadDigest (S3). */
        if (cks_decode(algo, expect, dig) != 0)
            return cks_refused(x, w, S3E_INVALID_REQUEST,
                               "Value for x-amz-checksum-%s trailing header is invalid.", algo);
    }
    /* Every checksum sent must match before anything becomes visible. */
    if (expect && strcmp(expect, got) != 0)
        return cks_refused(x, w, S3E_BAD_DIGEST,
                           "The %s you specified did not match the calculated checksum.", algo);
    if (algo) snprintf(cks_out, 128, "%s:%s", cks_name(algo), got);
    if (cmd5_hex[0] && strcmp(cmd5_hex, obj_put_etag(w)) != 0) {
        obj_put_abort(w);
        s3_err(x, S3E_BAD_DIGEST);
        return -1;
    }
    return 0;
}

int s3_cks_value_name(const char *name)
{
    static const char *const words[] = {"algorithm", "mode", "type"};
    if (strncasecmp(name, "x-amz-checksum-", 15) != 0) return 0;
    for (size_t j = 0; j < sizeof(words) / sizeof(words[0]); j++)
        if (strcasecmp(name + 15, words[j]) == 0) return 0;
    int a = cks_algo(name);
    return a ? a : -1;
}

int s3_content_md5_hex(const char *v, char hex[33])
{
    uint8_t md[24];
    /* 16 bytes are 24 base64 characters, the last two "==" padding. */
    if (strlen(v) != 24 || v[22] != '=' || v[23] != '=' || strchr(v, '=') != v + 22) return -1;
    if (EVP_DecodeBlock(md, (const unsigned char *)v, 24) != 18) return -1;
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* "x-amz-checksum-crc32: VALUE\r\n" for a kept "crc32:VALUE" (empty when none is kept). */
void s3_cks_header(const char *kept, char *out, size_t cap)
{
    const char *colon = kept ? strchr(kept, ':') : NULL;
    if (!colon)
        out[0] = 0;
    else
        snprintf(out, cap, "x-amz-checksum-%.*s: %s\r\n", (int)(colon - kept), kept, colon + 1);
}

/*
 * Conditional writes: If-None-Match: * (create only) and If-Match: ETAG
 * (replace only that version) into c; 0, or -1 with the error sent. The
 * object layer decides at the commit point; a first look here spares the
 * client sending a body that cannot be stored.
 */
int s3_write_cond(ctx_t *x, obj_cond_t *c)
{
    const char *inm = s3_hdr(x->info, "if-none-match"), *im = s3_hdr(x->info, "if-match");
    *c = (obj_cond_t)OBJ_COND_NONE;
    if (inm && strcmp(inm, "*") != 0) {
        s3_err_msg(x, S3E_NOT_IMPLEMENTED, "If-None-Match takes only *.");
        return -1;
    }
    c->none_match = inm != NULL;
    if (im && strlen(im) >= sizeof(c->if_match)) {
        s3_err(x, S3E_PRECONDITION_FAILED);
        return -1;
    }
    if (im) snprintf(c->if_match, sizeof(c->if_match), "%s", im[0] ? im : "\"\"");
    if (!inm && !im) return 0;
    obj_info_t cur;
    int rc = obj_stat(x->cfg->set, x->ibucket, x->key, &cur);
    if (rc && rc != ERR_NOT_FOUND) {
        s3_engine_error(x, rc);
        return -1;
    }
    if ((rc = obj_cond_check(c, rc ? NULL : &cur)) != 0) {
        s3_engine_error(x, rc);
        return -1;
    }
    return 0;
}

void s3_put_object(ctx_t *x)
{
    if (s3_unknown_param(x, NULL)) return;
    int err;
    buf_t um = {0};
    obj_cond_t cond;
    if (s3_body_announced_ok(x) != 0 || s3_write_cond(x, &cond) != 0) return;
    if (s3_build_umeta(x, &um) != 0 || s3_body_begin(x) != 0) {
        if (!http_responded(x->r)) s3_err_msg(x, S3E_INVALID_ARGUMENT, "Bad x-amz-content-sha256.");
        free(um.p);
        return;
    }
    obj_writer_t *w = obj_put_begin(x->cfg->set, x->ibucket, x->key, &err);
    if (!w) {
        free(um.p);
        s3_engine_error(x, err);
        return;
    }
    obj_put_set_cond(w, &cond);
    char cks[128];
    int named = s3_cks_request_algo(x);
    x->cks_default = S3_CKS_DEFAULT; /* when the request sends none */
    if (s3_stream_body(x, w, cks) != 0) {
        free(um.p);
        return;
    }
    if (cks[0] && (named || !obj_put_inline(w))) buf_printf(&um, "%s%c%s%c", CKS_META, 0, cks, 0);
    obj_info_t info;
    err = um.len > sizeof(info.umeta)
              ? ERR_TOO_LARGE
              : s3_commit_in_bucket(x, w, s3_hdr(x->info, "content-type"), um.p, um.len, &info);
    int too_large = err == ERR_TOO_LARGE && um.len > sizeof(info.umeta);
    if (too_large) obj_put_abort(w);
    free(um.p);
    if (too_large) {
        s3_err(x, S3E_METADATA_TOO_LARGE); /* with its checksum: not the object's size */
        return;
    }
    if (err) {
        s3_engine_error(x, err);
        return;
    }
    s3_written_headers(x, &info);
    s3_respond_etag(x, info.etag, cks, 1);
}

/*
 * n decimal digits at s (1*DIGIT, RFC 9110 14.1.1: any length, leading zeros
 * too), saturated at UINT64_MAX: a position past any size still means past
 * this one. 0, or -1 for no digits or anything else in them.
 */
static int range_number(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Parse "bytes=a-b", "bytes=a-", "bytes=-n". 1 = range set, 0 = none/ignored, -1 = 416. */
int s3_parse_range(const char *v, uint64_t size, uint64_t *off, uint64_t *len)
{
    uint64_t a, b;
    if (!v || strncmp(v, "bytes=", 6) != 0 || strchr(v, ',')) return 0;
    v += 6;
    if (*v == '-') {
        if (range_number(v + 1, strlen(v + 1), &a) != 0) return 0;
        if (a == 0) return -1;
        *len = a > size ? size : a;
        *off = size - *len;
        return size ? 1 : -1;
    }
    const char *dash = strchr(v, '-');
    if (!dash || range_number(v, (size_t)(dash - v), &a) != 0) return 0;
    const char *bs = dash + 1;
    if (*bs == 0) {
        b = size ? size - 1 : 0;
    } else {
        if (range_number(bs, strlen(bs), &b) != 0) return 0;
        /* last < first is no range at all (RFC 9110 14.1.1): ignored, as S3 does (200). */
        if (b < a) return 0;
        if (b >= size) b = size ? size - 1 : 0;
    }
    if (a >= size) return -1;
    *off = a;
    *len = b - a + 1;
    return 1;
}

/* http_free_after's: a GET's piece back to the set's buffers once it is out. */
static void put_buf(void *pool, void *buf)
{
    bufpool_put(pool, buf);
}

/*
 * How long a GET's client may leave a lent piece untaken before the GET stops
 * reading ahead for it. Long enough that a client that keeps up is never
 * taken for a slow one; a stall costs one piece read twice at most.
 */
#define GET_STALL_MS 250

/*
 * The body of a GET from off (len bytes; the piece at off read into
 * bufs[0]), lent piece by piece. A client that does not take the piece lent
 * within GET_STALL_MS gets no read-ahead until it does again: the piece read
 * ahead is given back to the pool (and read again when its turn comes), so a
 * GET stalled on its client holds one stripe (400 readers that never read
 * held 3.85 GB when a GET kept three).
 */
static void get_stream(ctx_t *x, obj_reader_t *rd, bufpool_t *pool, uint8_t *bufs[2], uint64_t off,
                       uint64_t len, size_t unit)
{
    size_t bsz = len < unit ? (size_t)len : unit, step = s3_next_piece(off, len, unit);
    int cur = 0, paced = 0, err, first = 1;
    for (;;) {
        /* (the first piece was lent with the head) */
        if (!first && http_write_borrowed(x->r, bufs[cur], step) != 0) return;
        first = 0;
        off += step;
        len -= step;
        if (!len) return;
        step = s3_next_piece(off, len, unit);
        int ahead = !paced; /* the next piece is read into bufs[!cur] while bufs[cur] goes out */
        if (ahead) {
            if (!bufs[!cur]) bufs[!cur] = bufpool_get(pool, bsz);
            obj_read_ahead(rd, off, bufs[!cur], step);
        }
        int w = http_wait_borrowed_for(x->r, 0, GET_STALL_MS);
        paced = w == ERR_AGAIN;
        if (paced && ahead) {
            /* The buffer read ahead into may be given back only once the read is done; an
             * error it met is met again when the piece is read in its turn. */
            err = obj_read(rd, off, bufs[!cur], step);
            (void)err;
            bufpool_put(pool, bufs[!cur]);
            bufs[!cur] = NULL;
            ahead = 0;
        }
        if (paced) w = http_wait_borrowed(x->r, 0);
        if (w != 0) return;
        if (ahead) cur = !cur; /* else the piece lent is out: its buffer takes the next */
        if ((err = obj_read(rd, off, bufs[cur], step)) != 0) {
            /* The status line is out: all we can do is cut the connection short. */
            log_error("event=get_failed key=%s off=%llu err=%s missing=0x%x", x->key,
                      (unsigned long long)off, err_name(err), obj_read_missing(rd));
            http_abort(x->r);
            return;
        }
    }
}

void s3_get_object(ctx_t *x, int head)
{
    obj_info_t info;
    int err;
    if (s3_check_response_overrides(x) != 0) return;
    int pn = s3_part_number(x), pidx = -1; /* ?partNumber (s3_mpu_cks.c) */
    uint64_t poff = 0, plen = 0;
    if (pn < 0) return;
    obj_reader_t *rd = obj_open_version(x->cfg->set, x->ibucket, x->key, x->vid, &info, &err);
    if (!rd) {
        if (s3_version_missing(x, err, &info)) return;
        if (err == ERR_NOT_FOUND && !s3_bucket_exists(x, x->bucket, NULL))
            s3_err(x, S3E_NO_SUCH_BUCKET);
        else
            s3_engine_error(x, err);
        return;
    }
    /* The version opened (pinned now) must grant READ itself: another user's (or anonymous)
     * read was let in on the version it looked at, which may be older; and a writer's object
     * is not the bucket owner's to read ungranted (S3's ObjectWriter). */
    if (!s3_may_read_object(x, &info, s3_request_bucket_owner(x))) {
        obj_close(rd);
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    s3_version_headers(x, &info);
    if (pn && (pidx = s3_part_locate(x, rd, &info, pn, &poff, &plen)) < 0) {
        obj_close(rd);
        return;
    }
    char lm[40];
    s3_http_date(info.mtime_ns, lm);
    const char *inm = s3_hdr(x->info, "if-none-match"), *im = s3_hdr(x->info, "if-match");
    /* RFC 7232 order: If-Match, else If-Unmodified-Since; If-None-Match, else If-Modified-Since. */
    time_t mt = (time_t)(info.mtime_ns / 1000000000ull);
    time_t ius = s3_parse_http_date(s3_hdr(x->info, "if-unmodified-since"));
    time_t ims = s3_parse_http_date(s3_hdr(x->info, "if-modified-since"));
    /* A date later than now is invalid (RFC 2616 14.25) and ignored: S3 then answers 200.
     * (Not one the object's own mtime reaches: a writer's clock ahead of this node's.) */
    if (ims != (time_t)-1 && ims > time(NULL) && ims > mt) ims = (time_t)-1;
    if ((im && !s3_etag_matches(im, info.etag, 0)) || (!im && ius != (time_t)-1 && mt > ius)) {
        obj_close(rd);
        s3_err(x, S3E_PRECONDITION_FAILED);
        return;
    }
    /* Headers of any length (user metadata can be 2 KiB): a growing buffer, not a fixed one. */
    buf_t hb = {0};
    buf_printf(&hb,
               "x-amz-request-id: %s\r\nETag: \"%s\"\r\nLast-Modified: %s\r\n"
               "Accept-Ranges: bytes\r\n",
               x->id, info.etag, lm);
    std_headers(x, &info, &hb);
    if (!x->vid) s3_lifecycle_expiration(x, &info, &hb); /* current versions expire */
    int ntags = s3_tag_count(s3_umeta_get(&info, TAG_META));
    /* The tags are the object owner's to know (no ACL grants them, not even their number). */
    if (ntags && s3_object_mine(x, &info, s3_request_bucket_owner(x)))
        buf_printf(&hb, "x-amz-tagging-count: %d\r\n", ntags);
    for (size_t p = 0; p < info.umeta_len;) {
        const char *name = info.umeta + p, *val = name + strlen(name) + 1;
        if (name[0] != '\001') { /* internal (ACL, checksum, standard headers) entries */
            buf_printf(&hb, "x-amz-meta-%s: ", name);
            mail_safe(&hb, val);
            buf_printf(&hb, "\r\n");
        }
        p = (size_t)(val - info.umeta) + strlen(val) + 1;
    }
    if ((inm && s3_etag_matches(inm, info.etag, 1)) || (!inm && ims != (time_t)-1 && mt <= ims)) {
        /* No checksum on a 304: there is no body it could be of (newer botocore, asked for
         * one, then fails validating an empty body against it). */
        obj_close(rd);
        (void)http_respond(x->r, 304, hb.p, 0);
        free(hb.p);
        return;
    }
    /* The stored checksum, when asked for, of the whole object or of the part returned. */
    s3_cks_get_headers(x, &info, rd, pidx, &hb);
    if (pn && info.multipart) buf_printf(&hb, "x-amz-mp-parts-count: %d\r\n", info.nparts);
    uint64_t off = 0, len = info.size;
    int status = 200;
    /* An If-Range that does not hold asks for the whole object instead (RFC 9110 13.2.2):
     * a client resuming a download of an object since replaced must not splice the new
     * object's bytes into the old one's. */
    const char *range = s3_hdr(x->info, "range");
    if (range && !s3_if_range_holds(s3_hdr(x->info, "if-range"), info.etag, mt)) range = NULL;
    int rr = pn ? 0 : s3_parse_range(range, info.size, &off, &len);
    if (pn) {
        /* A part is a range: 206, as S3. An empty one (only the last part may be) is just
         * empty: 200 and no body, as no Content-Range can name it. Served as the whole
         * object, a client checking the part's checksum failed, and one joining the parts
         * got the object twice (a probe). */
        off = poff;
        len = plen;
        rr = plen != 0;
    }
    if (rr < 0) {
        /* As S3: the size in Content-Range (RFC 9110 15.5.17) and in the error. */
        char cr[64];
        buf_t extra = {0};
        obj_close(rd);
        free(hb.p);
        snprintf(cr, sizeof(cr), "Content-Range: bytes */%llu\r\n", (unsigned long long)info.size);
        http_add_headers(x->r, cr);
        buf_printf(&extra, "<RangeRequested>");
        buf_xml(&extra, s3_hdr(x->info, "range"));
        buf_printf(&extra, "</RangeRequested><ActualObjectSize>%llu</ActualObjectSize>",
                   (unsigned long long)info.size);
        s3_err_detail(x, S3E_INVALID_RANGE, NULL, extra.p);
        free(extra.p);
        return;
    }
    if (rr > 0) {
        status = 206;
        buf_printf(&hb, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)off,
                   (unsigned long long)(off + len - 1), (unsigned long long)info.size);
    }
    /*
     * Stripe-sized pieces at stripe offsets: a stripe's blocks are read at
     * once, in place (the drives DMA them into these page-aligned buffers).
     * Two buffers take turns: one lent to the loop on its way to the socket
     * (not copied), the other read ahead meanwhile. The kernel's send buffer
     * keeps the wire busy while the lent one is swapped for the next.
     */
    size_t unit = obj_read_unit(rd), bsz = len && len < unit ? (size_t)len : unit;
    bufpool_t *pool = obj_set_buffers(x->cfg->set);
    uint8_t *bufs[2] = {bufpool_get(pool, bsz), NULL};
    size_t step = s3_next_piece(off, len, unit);
    /* Read the first piece before the status line: a lost object gets a real error. */
    if (!head && step && (err = obj_read(rd, off, bufs[0], step)) != 0) {
        log_error("event=get_failed key=%s off=%llu err=%s missing=0x%x", x->key,
                  (unsigned long long)off, err_name(err), obj_read_missing(rd));
        obj_close(rd);
        bufpool_put(pool, bufs[0]);
        free(hb.p);
        s3_engine_error(x, err);
        return;
    }
    if (!head && step == len && len <= S3_GET_COPY_MAX) {
        /* A small body goes with the head, copied: one chunk, one write, and the worker is done
         * (a borrowed buffer would hold it until the loop has written it). */
        obj_close(rd);
        (void)http_respond_full(x->r, status, hb.p, bufs[0], (size_t)len);
        free(hb.p);
        bufpool_put(pool, bufs[0]);
        return;
    }
    int rc = head || !step ? http_respond(x->r, status, hb.p, (int64_t)len)
                           : http_respond_lent(x->r, status, hb.p, (int64_t)len, bufs[0], step);
    free(hb.p);
    if (rc == 0 && !head && step) get_stream(x, rd, pool, bufs, off, len, unit);
    obj_close(rd); /* no read-ahead may still write into the buffers */
    /*
     * Nothing lent may be freed before it is out, but the worker need not
     * wait for that: the buffers go back to the pool when the response is
     * finished, and the worker takes the next request now.
     */
    for (int i = 0; i < 2; i++)
        if (bufs[i]) http_free_after(x->r, put_buf, pool, bufs[i]);
}

/*
 * GetObjectAttributes (GET ?attributes): what x-amz-object-attributes names
 * of ETag, Checksum, ObjectParts (paginated by x-amz-max-parts and
 * x-amz-part-number-marker), StorageClass and ObjectSize, without the data.
 */
void s3_get_object_attributes(ctx_t *x)
{
    static const char *const names[] = {"ETag", "Checksum", "ObjectParts", "StorageClass",
                                        "ObjectSize"};
    const char *want = s3_hdr(x->info, "x-amz-object-attributes");
    unsigned mask = 0;
    const char *p = want ? want : "", *item;
    for (size_t l; (l = hdrlist_next(&p, &item)) != 0;) {
        unsigned bit = 0;
        for (unsigned i = 0; i < 5; i++)
            if (strlen(names[i]) == l && strncmp(item, names[i], l) == 0) bit = 1u << i;
        if (!bit) {
            s3_err_msg(x, S3E_INVALID_ARGUMENT, "Invalid attribute name specified.");
            return;
        }
        mask |= bit;
    }
    if (!mask) {
        s3_err_msg(
            x, S3E_INVALID_REQUEST,
            "The x-amz-object-attributes header specifying the attributes to be retrieved is "
            "either missing or empty");
        return;
    }
    int max_parts = 1000, marker = 0;
    const char *mp = s3_hdr(x->info, "x-amz-max-parts");
    const char *pm = s3_hdr(x->info, "x-amz-part-number-marker");
    if ((mp && num_parse_int(mp, 0, 1000000, &max_parts) != 0) ||
        (pm && num_parse_int(pm, 0, 1000000, &marker) != 0)) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "max-parts and part-number-marker must be integers.");
        return;
    }
    if (max_parts > 1000) max_parts = 1000;
    obj_info_t info;
    int err;
    obj_reader_t *rd = obj_open_version(x->cfg->set, x->ibucket, x->key, x->vid, &info, &err);
    if (!rd) {
        if (!s3_version_missing(x, err, &info)) s3_engine_error(x, err);
        return;
    }
    if (!s3_may_read_object(x, &info, s3_request_bucket_owner(x))) { /* S3: READ's */
        obj_close(rd);
        s3_err(x, S3E_ACCESS_DENIED);
        return;
    }
    s3_version_headers(x, &info);
    buf_t b = {0};
    buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<GetObjectAttributesResponse "
                   "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    if (mask & 1) buf_printf(&b, "<ETag>%s</ETag>", info.etag);
    if (mask & 2) s3_mpu_cks_attributes_xml(&b, &info, rd);
    const int *nums;
    const uint64_t *sizes;
    int nparts = obj_read_parts(rd, &nums, &sizes);
    /* Without an additional checksum S3 lists no part of a general purpose bucket's object:
     * their count only (S3's default, given to an upload without an algorithm, is none). */
    if ((mask & 4) && nparts &&
        (!s3_umeta_get(&info, CKS_META)[0] || s3_umeta_get(&info, CK0_META)[0])) {
        buf_printf(&b, "<ObjectParts><PartsCount>%d</PartsCount></ObjectParts>", nparts);
    } else if ((mask & 4) && nparts) {
        int shown = 0, last = marker, i = 0;
        buf_t parts = {0};
        for (; i < nparts; i++) {
            if (nums[i] <= marker) continue;
            if (shown == max_parts) break;
            buf_printf(&parts, "<Part><PartNumber>%d</PartNumber><Size>%llu</Size>", nums[i],
                       (unsigned long long)sizes[i]);
            s3_mpu_cks_part_xml(&parts, obj_read_part_note(rd, i));
            buf_printf(&parts, "</Part>");
            last = nums[i];
            shown++;
        }
        buf_printf(&b,
                   "<ObjectParts><PartsCount>%d</PartsCount><PartNumberMarker>%d</PartNumberMarker>"
                   "<NextPartNumberMarker>%d</NextPartNumberMarker><MaxParts>%d</MaxParts>"
                   "<IsTruncated>%s</IsTruncated>%s</ObjectParts>",
                   nparts, marker, last, max_parts, i < nparts ? "true" : "false",
                   parts.p ? parts.p : "");
        free(parts.p);
    }
    obj_close(rd);
    if (mask & 8) buf_printf(&b, "<StorageClass>STANDARD</StorageClass>");
    if (mask & 16) buf_printf(&b, "<ObjectSize>%llu</ObjectSize>", (unsigned long long)info.size);
    buf_printf(&b, "</GetObjectAttributesResponse>");
    char lm[40], h[256];
    s3_http_date(info.mtime_ns, lm);
    snprintf(h, sizeof(h),
             "x-amz-request-id: %s\r\nLast-Modified: %s\r\nContent-Type: application/xml\r\n",
             x->id, lm);
    (void)http_respond_full(x->r, 200, h, b.p, b.len);
    free(b.p);
}
