/*
 * s3_auth: who is asking. SigV4 by header or presigned query (scope,
 * skew, every x-amz-* header signed), and the request body as the
 * signature covers it: plain, signed SHA-256, or aws-chunked with chunk
 * signatures and trailers.
 */

#include "server/s3_int.h"

const char *s3_secret_of(ctx_t *x, const char *ak)
{
    for (int i = 0; i < x->cfg->nusers; i++)
        if (strcmp(x->cfg->users[i].access_key, ak) == 0) return x->cfg->users[i].secret;
    return NULL;
}

static time_t parse_amz_date(const char *s)
{
    struct tm tm = {0}, back;
    char *end;
    if (!s || strlen(s) != 16 || !(end = strptime(s, "%Y%m%dT%H%M%SZ", &tm)) || *end)
        return (time_t)-1;
    /* A date that is not one (February 30th, which timegm rolls over to March 2nd: a probe)
     * is none. (timegm normalizes its argument: the fields are compared with a copy.) */
    struct tm said = tm;
    time_t t = timegm(&tm);
    if (!gmtime_r(&t, &back) || back.tm_mday != said.tm_mday || back.tm_mon != said.tm_mon ||
        back.tm_hour != said.tm_hour || back.tm_min != said.tm_min || back.tm_sec != said.tm_sec)
        return (time_t)-1;
    return t;
}

/*
 * Whether a request signed by header also carries a query's credentials:
 * S3 takes one mechanism only (400 InvalidArgument, naming the header);
 * 0, or -1 with that answer sent.
 */
static int one_auth_mechanism(ctx_t *x, const char *authz)
{
    static const char *const query_auth[] = {"X-Amz-Algorithm", "X-Amz-Signature", "Signature"};
    for (size_t i = 0; i < sizeof(query_auth) / sizeof(query_auth[0]); i++) {
        int present;
        free(s3_qparam(x->query, query_auth[i], &present));
        if (!present) continue;
        buf_t e = {0};
        buf_printf(&e, "<ArgumentName>Authorization</ArgumentName><ArgumentValue>");
        buf_xml(&e, authz);
        buf_printf(&e, "</ArgumentValue>");
        s3_err_detail(x, S3E_INVALID_ARGUMENT,
                      "Only one auth mechanism allowed; only the X-Amz-Algorithm query "
                      "parameter, Signature query string parameter or the Authorization header "
                      "should be specified",
                      e.p);
        free(e.p);
        return -1;
    }
    return 0;
}

static int has_param(const char *q, const char *name)
{
    int present;
    free(s3_qparam(q, name, &present));
    return present;
}

/* 0 when authenticated; otherwise the error response has been sent. */
int s3_authenticate(ctx_t *x)
{
    const struct http_req_info *in = x->info;
    const char *authz = s3_hdr(in, "authorization");
    const char *target = in->target, *q = strchr(target, '?');
    size_t plen = q ? (size_t)(q - target) : strlen(target);
    int rc;

    if (authz && one_auth_mechanism(x, authz) != 0) return -1;
    if (authz ? strncmp(authz, "AWS4-HMAC-SHA256 ", 17) != 0
              : has_param(x->query, "AWSAccessKeyId") && has_param(x->query, "Signature")) {
        if (!authz || strncmp(authz, "AWS ", 4) == 0) /* SigV2, as S3's newer regions answer it */
            s3_err_msg(x, S3E_INVALID_REQUEST,
                       "The authorization mechanism you have provided is not supported. Please "
                       "use AWS4-HMAC-SHA256.");
        else
            s3_err_msg(x, S3E_INVALID_ARGUMENT, "Unsupported Authorization Type");
        return -1;
    }
    if (authz)
        rc = sigv4_parse_header(authz, strlen(authz), &x->auth);
    else
        rc = sigv4_parse_query(q ? q + 1 : "", q ? strlen(q + 1) : 0, &x->auth);
    if (rc == ERR_NOT_FOUND) {
        x->anonymous = 1; /* s3_handle lets it reach public-read data only */
        return 0;
    }
    if (rc) {
        if (authz)
            s3_err(x, S3E_AUTH_HEADER_MALFORMED);
        else /* presigned: a missing or malformed X-Amz-* parameter, X-Amz-Expires out of range */
            s3_err(x, S3E_AUTH_QUERY_MALFORMED);
        return -1;
    }
    const char *secret = s3_secret_of(x, x->auth.access_key);
    if (!secret) {
        s3_err(x, S3E_INVALID_ACCESS_KEY);
        return -1;
    }
    /*
     * A session token: this node issues none (its keys are long-term, as an IAM user's), and
     * S3 answers a long-term key sent with a token it did not issue with InvalidToken. Taken
     * as if absent, a client whose temporary credentials went stale kept working here and
     * failed against S3 (a probe).
     */
    if (s3_hdr(in, "x-amz-security-token") || has_param(x->query, "X-Amz-Security-Token")) {
        s3_err(x, S3E_INVALID_TOKEN);
        return -1;
    }
    if (!x->auth.presigned) {
        const char *d = s3_hdr(in, "x-amz-date");
        char iso[20];
        if (!d && (d = s3_hdr(in, "date")) && strlen(d) != 16) {
            /* Without x-amz-date SigV4 dates a request by its Date header (AWS looks for
             * x-amz-date first, then Date), which may be an HTTP-date (IMF-fixdate): the
             * string to sign carries the same instant in ISO 8601 basic form. */
            struct tm tm = {0};
            const char *end = strptime(d, "%a, %d %b %Y %H:%M:%S GMT", &tm);
            d = end && !*end && strftime(iso, sizeof(iso), "%Y%m%dT%H%M%SZ", &tm) == 16 ? iso
                                                                                        : NULL;
        }
        if (!d || strlen(d) != 16) {
            s3_err_msg(x, S3E_ACCESS_DENIED,
                       "AWS authentication requires a valid Date or x-amz-date header");
            return -1;
        }
        strcpy(x->auth.amz_date, d);
    }
    time_t t = parse_amz_date(x->auth.amz_date), now = time(NULL);
    if (t == (time_t)-1) {
        s3_err_msg(x, S3E_ACCESS_DENIED,
                   "AWS authentication requires a valid Date or x-amz-date header");
        return -1;
    }
    if (x->auth.presigned) {
        if (x->auth.expires == 0 || now > t + x->auth.expires) {
            s3_err_msg(x, S3E_ACCESS_DENIED, "Request has expired");
            return -1;
        }
        if (t > now + x->cfg->max_skew_s) {
            s3_err_msg(x, S3E_ACCESS_DENIED, "Request is not valid yet");
            return -1;
        }
    } else if (t > now + x->cfg->max_skew_s || t < now - x->cfg->max_skew_s) {
        s3_err(x, S3E_REQUEST_TIME_TOO_SKEWED);
        return -1;
    }
    /* The credential scope must name this node's region and the date being signed. */
    if (strcmp(x->auth.region, x->cfg->region) != 0 || strcmp(x->auth.service, "s3") != 0) {
        buf_t m = {0}, e = {0};
        buf_printf(&m, "%s; the region '%s' is wrong; expecting '%s'",
                   x->auth.presigned ? "Error parsing the X-Amz-Credential parameter"
                                     : "The authorization header is malformed",
                   x->auth.region, x->cfg->region);
        buf_printf(&e, "<Region>");
        buf_xml(&e, x->cfg->region);
        buf_printf(&e, "</Region>");
        if (strcmp(x->auth.service, "s3") != 0) {
            free(m.p);
            m = (buf_t){0};
            buf_printf(&m, "The authorization is malformed; incorrect service '%s'; expecting 's3'",
                       x->auth.service);
        }
        s3_err_detail(x, x->auth.presigned ? S3E_AUTH_QUERY_MALFORMED : S3E_AUTH_HEADER_MALFORMED,
                      m.p, e.p);
        free(m.p);
        free(e.p);
        return -1;
    }
    if (strncmp(x->auth.date, x->auth.amz_date, 8) != 0) {
        if (x->auth.presigned)
            s3_err(x, S3E_SIGNATURE_MISMATCH);
        else
            s3_err_msg(x, S3E_AUTH_HEADER_MALFORMED,
                       "The authorization header is malformed; Invalid credential date. Date is "
                       "not the same as X-Amz-Date.");
        return -1;
    }
    x->payload = x->auth.presigned ? SIGV4_UNSIGNED : s3_hdr(in, "x-amz-content-sha256");
    if (!x->payload) {
        s3_err_msg(x, S3E_INVALID_REQUEST, "Missing required header x-amz-content-sha256.");
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
        buf_printf(&e, "<HeadersNotSigned>");
        buf_xml(&e, unsigned_hdr);
        buf_printf(&e, "</HeadersNotSigned>");
        s3_err_detail(x, S3E_ACCESS_DENIED,
                      "There were headers present in the request which were not signed", e.p);
        free(e.p);
        return -1;
    }
    if (sigv4_verify_cached(&req, &x->auth, secret, x->cfg->keys, x->key_bytes) != 0) {
        s3_err(x, S3E_SIGNATURE_MISMATCH);
        return -1;
    }
    /*
     * A presigned request's canonical form says UNSIGNED-PAYLOAD, but a body hash the client
     * sent as x-amz-content-sha256 is still what it declares the body to be: checked, as with
     * header auth (a mismatching body was stored: hostile probe).
     */
    const char *declared = x->auth.presigned ? s3_hdr(in, "x-amz-content-sha256") : NULL;
    if (declared && strlen(declared) == 64 && strspn(declared, "0123456789abcdef") == 64)
        x->payload = declared;
    return 0;
}

int s3_body_announced_ok(ctx_t *x)
{
    const char *te = s3_hdr(x->info, "transfer-encoding");
    if (x->info->content_length < 0 && !te) {
        /* Without either, HTTP reads no body at all: a 0-byte object nobody meant. */
        s3_err(x, S3E_MISSING_CONTENT_LENGTH);
        return -1;
    }
    /* Refused by what it announces, not after 5 GiB have crossed the network. */
    /* The decoded length counts only for an aws-chunked body (its framing is in Content-Length). */
    int streaming = x->payload && strncmp(x->payload, "STREAMING-", 10) == 0;
    const char *dl = streaming ? s3_hdr(x->info, "x-amz-decoded-content-length") : NULL;
    /* (A STREAMING-* framing warmlake does not serve is refused as such by s3_body_begin.) */
    if (streaming && !dl &&
        (!strcmp(x->payload, SIGV4_STREAMING) || !strcmp(x->payload, SIGV4_STREAMING_TRAILER) ||
         !strcmp(x->payload, SIGV4_UNSIGNED_TRAILER))) {
        /* AWS (sigv4-streaming): "For all requests, you must include the
         * x-amz-decoded-content-length header, specifying the size of the object in bytes." */
        s3_err_msg(x, S3E_MISSING_CONTENT_LENGTH,
                   "You must provide the x-amz-decoded-content-length header with an "
                   "aws-chunked body.");
        return -1;
    }
    uint64_t decoded;
    if ((x->info->content_length > 0 && (uint64_t)x->info->content_length > S3_MAX_PUT_BYTES &&
         !dl) ||
        (dl && num_parse_u64(dl, 0, UINT64_MAX, &decoded) == 0 && decoded > S3_MAX_PUT_BYTES)) {
        s3_err(x, S3E_ENTITY_TOO_LARGE);
        return -1;
    }
    return 0;
}

int s3_body_begin(ctx_t *x)
{
    const char *p = x->payload ? x->payload : SIGV4_UNSIGNED; /* anonymous: nothing signed */
    if (strncmp(p, "STREAMING-", 10) == 0) {
        /* Only the framings warmlake checks: anything else is not taken as unsigned chunks. */
        if (strcmp(p, SIGV4_STREAMING) != 0 && strcmp(p, SIGV4_STREAMING_TRAILER) != 0 &&
            strcmp(p, SIGV4_UNSIGNED_TRAILER) != 0)
            return ERR_INVAL;
        int signed_chunks = strcmp(p, SIGV4_UNSIGNED_TRAILER) != 0;
        int trailer = strcmp(p, SIGV4_STREAMING) != 0;
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
long s3_body_read(ctx_t *x, uint8_t *buf, size_t cap, dec_t *st)
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
        x->decoded += n;
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
        x->decoded += st->len;
        if (st->len) return (long)st->len;
        if (rc == 1) return 0;
    }
}

/* After the body: the signed payload hash must match. */
int s3_body_end(ctx_t *x)
{
    if (x->chunked) {
        /* Nothing may follow the last chunk (and its trailers) in the body. */
        uint8_t extra[1];
        if (x->raw_off < x->raw_len) return ERR_INVAL;
        if (!x->raw_eof && http_body_read(x->r, extra, sizeof(extra)) != 0) return ERR_INVAL;
        /* x-amz-decoded-content-length, when sent, is what the chunks held. */
        const char *dl = s3_hdr(x->info, "x-amz-decoded-content-length");
        uint64_t want;
        if (dl && (num_parse_u64(dl, 0, UINT64_MAX, &want) != 0 || want != x->decoded))
            return ERR_INVAL;
    }
    if (x->sha) {
        uint8_t h[32];
        char hex[65];
        EVP_DigestFinal_ex(x->sha, h, NULL);
        sigv4_hex(h, 32, hex);
        if (strcmp(hex, x->payload) != 0) return ERR_DENIED;
    }
    return 0;
}

static int digest_present(ctx_t *x);
static int digest_check(ctx_t *x, const char *body, size_t len);

int s3_trailers_announced(ctx_t *x)
{
    if (!x->chunked) return 0;
    const char *announced = s3_hdr(x->info, "x-amz-trailer");
    for (int i = 0;; i++) {
        const char *name = s3_chunked_trailer_name(x->chunked, i);
        if (!name) return 0;
        /* x-amz-trailer names one field, or a list of them. */
        size_t nl = strlen(name);
        int found = 0;
        for (const char *p = announced; p && *p && !found;) {
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
            size_t l = strcspn(p, ", \t");
            found = l == nl && strncasecmp(p, name, l) == 0;
            p += l;
        }
        if (!found) {
            /* A checksum nobody announced was neither checked nor kept: a wrong one passed. */
            char msg[160];
            (void)snprintf(msg, sizeof(msg),
                           "The trailer %.64s was not announced by the x-amz-trailer header.",
                           name);
            s3_err_msg(x, S3E_INVALID_REQUEST, msg);
            return -1;
        }
    }
}

static char *read_body(ctx_t *x, size_t cap, size_t *len, int digests);

char *s3_read_small_body(ctx_t *x, size_t cap, size_t *len)
{
    return read_body(x, cap, len, 1);
}

char *s3_read_complete_body(ctx_t *x, size_t cap, size_t *len)
{
    return read_body(x, cap, len, 0);
}

/* A small request body whole (at most cap bytes); digests: the checksum headers, if any, are
 * the body's. NULL and a response sent on error. */
static char *read_body(ctx_t *x, size_t cap, size_t *len, int digests)
{
    *len = 0;
    if (!x->chunked && x->info->content_length >= (int64_t)cap) {
        /* Announced too large: refused now, not after reading cap bytes of it. */
        s3_err_msg(x, S3E_MALFORMED_XML, "The XML you provided was too large.");
        return NULL;
    }
    char *body = xmalloc(cap + 1);
    dec_t st = {0};
    long n;
    if (s3_body_begin(x) != 0) {
        free(body);
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Bad x-amz-content-sha256.");
        return NULL;
    }
    while ((n = s3_body_read(x, (uint8_t *)body + *len, cap - *len, &st)) > 0) {
        *len += (size_t)n;
        if (*len == cap) {
            free(st.spill);
            free(body);
            s3_err_msg(x, S3E_MALFORMED_XML, "The XML you provided was too large.");
            return NULL;
        }
    }
    free(st.spill);
    int end = n < 0 ? 0 : s3_body_end(x);
    if (n < 0 || end != 0) {
        free(body);
        s3_err(x, n == ERR_RANGE      ? S3E_INVALID_CHUNK_SIZE
                  : n == ERR_TIMEOUT  ? S3E_REQUEST_TIMEOUT
                  : n == ERR_DENIED   ? S3E_SIGNATURE_MISMATCH
                  : end == ERR_DENIED ? S3E_SHA256_MISMATCH
                                      : S3E_INCOMPLETE_BODY);
        return NULL;
    }
    /* Whatever digest it came with holds (S3 checks a Content-MD5 or checksum on any body). */
    if (s3_trailers_announced(x) != 0 ||
        (digests && digest_present(x) && digest_check(x, body, *len))) {
        free(body);
        return NULL;
    }
    body[*len] = 0;
    return body;
}

/*
 * S3 asks some requests (DeleteObjects, PutBucketLifecycleConfiguration)
 * for their body's digest: a Content-MD5 or an x-amz-checksum-* (a header,
 * or a trailer of an aws-chunked body). Whether the request announces one
 * (before the body is read)...
 */
static int digest_present(ctx_t *x)
{
    char name[40];
    if (s3_hdr(x->info, "content-md5") || s3_hdr(x->info, "x-amz-trailer")) return 1;
    for (int a = CKS_CRC32; a < CKS_N; a++) {
        (void)snprintf(name, sizeof(name), "x-amz-checksum-%s", cks_name(a));
        if (s3_hdr(x->info, name)) return 1;
    }
    return 0;
}

/* ...and whether what it announced matches the body: 0, or -1 with the error sent. */
static int digest_check(ctx_t *x, const char *body, size_t len)
{
    const char *cmd5 = s3_hdr(x->info, "content-md5");
    if (cmd5) {
        uint8_t want[24], got[EVP_MAX_MD_SIZE];
        unsigned gl = 0;
        /* 16 bytes are 24 base64 characters, the last two "==" padding. */
        if (strlen(cmd5) != 24 || strchr(cmd5, '=') != cmd5 + 22 || cmd5[23] != '=' ||
            EVP_DecodeBlock(want, (const unsigned char *)cmd5, 24) != 18) {
            s3_err(x, S3E_INVALID_DIGEST);
            return -1;
        }
        if (!EVP_Digest(body, len, got, &gl, EVP_md5(), NULL) || gl != 16 ||
            memcmp(want, got, 16) != 0) {
            s3_err(x, S3E_BAD_DIGEST);
            return -1;
        }
    }
    char name[40];
    const char *expect = NULL;
    int algo = CKS_NONE, n = 0;
    for (int a = CKS_CRC32; a < CKS_N; a++) {
        (void)snprintf(name, sizeof(name), "x-amz-checksum-%s", cks_name(a));
        const char *v = s3_hdr(x->info, name);
        if (v && !algo) {
            algo = a;
            expect = v;
        }
        n += v != NULL;
    }
    const char *trailer = s3_hdr(x->info, "x-amz-trailer");
    if (!algo && trailer) {
        algo = cks_algo(trailer);
        (void)snprintf(name, sizeof(name), "x-amz-checksum-%s", algo ? cks_name(algo) : "");
        expect = algo && x->chunked ? s3_chunked_trailer(x->chunked, name) : NULL;
        if (!expect) {
            s3_err_msg(x, S3E_INVALID_REQUEST, "The announced checksum trailer is missing.");
            return -1;
        }
    }
    if (n > 1) {
        s3_err_msg(x, S3E_INVALID_REQUEST, S3_CKS_MULTIPLE);
        return -1;
    }
    if (!algo) return 0;
    cks_t ck;
    char got[CKS_MAX_B64];
    if (cks_init(&ck, algo) != 0) {
        s3_engine_error(x, ERR_NOMEM);
        return -1;
    }
    cks_update(&ck, body, len);
    cks_final(&ck, got, sizeof(got));
    if (strcmp(got, expect) != 0) {
        char msg[128];
        (void)snprintf(msg, sizeof(msg),
                       "The %s you specified did not match the calculated checksum.",
                       cks_name(algo));
        s3_err_msg(x, S3E_BAD_DIGEST, msg);
        return -1;
    }
    return 0;
}

char *s3_read_digested_body(ctx_t *x, size_t cap, size_t *len)
{
    if (!digest_present(x)) {
        s3_err_msg(x, S3E_INVALID_REQUEST,
                   "Missing required header for this request: Content-MD5 OR x-amz-checksum-*");
        return NULL;
    }
    return s3_read_small_body(x, cap, len); /* (which checks it) */
}
