/*
 * s3_post: browser-based uploads (POST Object): an HTML form posted as
 * multipart/form-data to the bucket, authenticated by a signed policy
 * document instead of a signed request: SigV4 form fields (x-amz-algorithm,
 * -credential, -date, -signature) or, as S3 still takes them, SigV2 ones
 * (AWSAccessKeyId, signature: base64 HMAC-SHA1 of the policy).
 *
 * The form's fields before the file are read whole (at most FIELDS_MAX
 * bytes); then the signature over the base64 policy is checked, the
 * policy's expiration and every condition (exact matches, eq, starts-with,
 * content-length-range; every field the form sends must be allowed by one,
 * x-ignore-* aside), and the file part streams into a writer until the
 * boundary, never held whole. Fields after the file are ignored, as S3 does.
 * The object gets the form's key (${filename} replaced by the file's name),
 * acl, Content-Type and standard headers, x-amz-meta-* and tagging; the
 * answer is success_action_redirect (303), or success_action_status 200,
 * 201 (with a PostResponse) or 204 (the default).
 */
#include "server/s3_int.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define FIELDS_MAX (64u << 10) /* every field before the file, together */
#define MAX_FIELDS 64
#define READ_CHUNK (256u << 10)

typedef struct {
    char *name, *value;
} field_t;

typedef struct {
    ctx_t *x;
    char delim[128]; /* "\r\n--BOUNDARY" */
    size_t dl;
    uint8_t *buf; /* bytes read, not yet consumed */
    size_t len, cap;
    int eof;
    field_t f[MAX_FIELDS];
    int nf;
    char filename[256];
    char file_ctype[256];
    const char *key; /* the key field with ${filename} replaced (what conditions see) */
} form_t;

static const char *field(const form_t *fm, const char *name)
{
    for (int i = 0; i < fm->nf; i++)
        if (strcasecmp(fm->f[i].name, name) == 0) return fm->f[i].value;
    return NULL;
}

/* More body bytes into the buffer (at most READ_CHUNK more); 0, or an ERR_*. */
static int fill_more(form_t *fm)
{
    if (fm->eof) return ERR_INVAL;
    if (fm->cap - fm->len < READ_CHUNK) {
        fm->cap = fm->len + READ_CHUNK;
        fm->buf = xrealloc(fm->buf, fm->cap);
    }
    long n = http_body_read(fm->x->r, fm->buf + fm->len, fm->cap - fm->len);
    if (n < 0) return (int)n;
    if (n == 0) fm->eof = 1;
    fm->len += (size_t)n;
    return n ? 0 : ERR_INVAL;
}

static void consume(form_t *fm, size_t n)
{
    memmove(fm->buf, fm->buf + n, fm->len - n);
    fm->len -= n;
}

static const uint8_t *find(const uint8_t *h, size_t hl, const char *n, size_t nl)
{
    return nl <= hl ? memmem(h, hl, n, nl) : NULL;
}

/* A part's headers: name, and filename / Content-Type for the file. -1 when malformed. */
static int part_headers(form_t *fm, const char *h, char *name, size_t cap)
{
    name[0] = 0;
    for (const char *line = h; *line;) {
        const char *e = strstr(line, "\r\n");
        size_t l = e ? (size_t)(e - line) : strlen(line);
        if (l > 20 && strncasecmp(line, "content-disposition:", 20) == 0) {
            char v[1024];
            if (l >= sizeof(v)) return -1;
            memcpy(v, line, l);
            v[l] = 0;
            const char *nm = strstr(v, " name=\"");
            const char *fn = strstr(v, "filename=\"");
            if (!nm) nm = strstr(v, ";name=\"");
            if (!nm) return -1;
            nm = strchr(nm, '"') + 1;
            const char *ne = strchr(nm, '"');
            if (!ne || (size_t)(ne - nm) >= cap) return -1;
            memcpy(name, nm, (size_t)(ne - nm));
            name[ne - nm] = 0;
            if (fn) {
                fn += 10;
                const char *fe = strchr(fn, '"');
                if (!fe || (size_t)(fe - fn) >= sizeof(fm->filename)) return -1;
                memcpy(fm->filename, fn, (size_t)(fe - fn));
                fm->filename[fe - fn] = 0;
            }
        } else if (l > 13 && strncasecmp(line, "content-type:", 13) == 0) {
            const char *v = line + 13;
            while (*v == ' ')
                v++;
            size_t vl = l - (size_t)(v - line);
            if (vl >= sizeof(fm->file_ctype)) return -1;
            memcpy(fm->file_ctype, v, vl);
            fm->file_ctype[vl] = 0;
        }
        line = e ? e + 2 : line + l;
    }
    return name[0] ? 0 : -1;
}

/*
 * Whether a field of this name came before (then refused, with the error
 * sent): the policy checks one value of a field while the object would get
 * them all (x-amz-meta-role: viewer, then admin, stored "viewer, admin"
 * under a policy asking viewer). x-ignore-* fields are nobody's business.
 */
static int repeated(form_t *fm, const char *name)
{
    if (strncasecmp(name, "x-ignore-", 9) == 0 || !field(fm, name)) return 0;
    char msg[256];
    snprintf(msg, sizeof(msg), "POST form field '%.128s' may appear only once.", name);
    s3_err_msg(fm->x, S3E_INVALID_ARGUMENT, msg);
    return 1;
}

/*
 * Read the fields up to the file part; on 0 the buffer starts at the file's
 * first byte. -1 with the error sent.
 */
static int read_fields(form_t *fm)
{
    size_t total = 0;
    /* The body opens with "--BOUNDARY\r\n" (the delimiter without its CRLF). */
    while (fm->len < fm->dl)
        if (fill_more(fm) != 0) goto malformed;
    if (memcmp(fm->buf, fm->delim + 2, fm->dl - 2) != 0) goto malformed;
    consume(fm, fm->dl - 2);
    for (;;) {
        /* After a delimiter: "\r\n" and a part, or "--" (the end). */
        while (fm->len < 2)
            if (fill_more(fm) != 0) goto malformed;
        if (memcmp(fm->buf, "--", 2) == 0) {
            s3_err_msg(fm->x, S3E_INVALID_ARGUMENT,
                       "POST requires exactly one file upload per request.");
            return -1;
        }
        if (memcmp(fm->buf, "\r\n", 2) != 0) goto malformed;
        consume(fm, 2);
        const uint8_t *he;
        while (!(he = find(fm->buf, fm->len, "\r\n\r\n", 4)))
            if (fm->len > 8192 || fill_more(fm) != 0) goto malformed;
        size_t hl = (size_t)(he - fm->buf);
        char *h = xmalloc(hl + 1), name[128];
        memcpy(h, fm->buf, hl);
        h[hl] = 0;
        int rc = part_headers(fm, h, name, sizeof(name));
        free(h);
        if (rc != 0) goto malformed;
        consume(fm, hl + 4);
        if (strcasecmp(name, "file") == 0) return 0;
        if (repeated(fm, name)) return -1;
        const uint8_t *end;
        while (!(end = find(fm->buf, fm->len, fm->delim, fm->dl)))
            if (total + fm->len > FIELDS_MAX || fill_more(fm) != 0) goto too_big_or_bad;
        size_t vl = (size_t)(end - fm->buf);
        total += vl + strlen(name);
        if (total > FIELDS_MAX || fm->nf == MAX_FIELDS) goto too_big_or_bad;
        fm->f[fm->nf].name = xstrdup(name);
        fm->f[fm->nf].value = xmalloc(vl + 1);
        memcpy(fm->f[fm->nf].value, fm->buf, vl);
        fm->f[fm->nf].value[vl] = 0;
        fm->nf++;
        consume(fm, vl + fm->dl);
    }
too_big_or_bad:
    if (total + fm->len > FIELDS_MAX || fm->nf == MAX_FIELDS) {
        s3_err_msg(fm->x, S3E_MAX_POST_PRE_DATA, NULL);
        return -1;
    }
malformed:
    s3_err_msg(fm->x, S3E_MALFORMED_POST, NULL);
    return -1;
}

/* "Invalid according to Policy: ..." */
static int policy_denied(ctx_t *x, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "Invalid according to Policy: %s", why);
    s3_err_msg(x, S3E_ACCESS_DENIED, msg);
    return -1;
}

/* A policy that is not a policy document (S3: 400 InvalidPolicyDocument, not 403). */
static int policy_invalid(ctx_t *x, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "Invalid Policy: %s", why);
    s3_err_msg(x, S3E_INVALID_POLICY_DOCUMENT, msg);
    return -1;
}

/* The value a policy condition names ("$key" -> the key field; bucket is the request's). */
static const char *cond_value(const form_t *fm, const char *var)
{
    if (*var == '$') var++;
    if (strcasecmp(var, "bucket") == 0) return fm->x->bucket;
    if (strcasecmp(var, "key") == 0 && fm->key) return fm->key;
    return field(fm, var);
}

/*
 * A starts-with condition: got begins with want. A Content-Type value holding
 * commas is a list, and each of its values must begin with want (AWS, "Matching
 * Content-Types in a Comma-Separated List"): "image/png, text/html" does not
 * pass ["starts-with", "$Content-Type", "image/"] (a browser takes it as
 * text/html, the last type of the list).
 */
static int starts_with(const char *var, const char *got, const char *want)
{
    size_t wl = strlen(want);
    const char *name = *var == '$' ? var + 1 : var;
    if (strcasecmp(name, "content-type") != 0 || !strchr(got, ','))
        return strncmp(got, want, wl) == 0;
    for (const char *v = got;; v++) {
        v += strspn(v, " \t");
        if (strncmp(v, want, wl) != 0) return 0;
        v = strchr(v, ',');
        if (!v) return 1;
    }
}

/*
 * The policy: decoded, not expired, and every condition holding; every
 * field covered. min and max: content-length-range (or 0 and UINT64_MAX).
 * 0, or -1 with the error sent.
 */
static int check_policy(form_t *fm, const char *b64, uint64_t *min, uint64_t *max)
{
    ctx_t *x = fm->x;
    size_t bl = strlen(b64);
    unsigned char *doc = xmalloc(bl + 4);
    int dl = EVP_DecodeBlock(doc, (const unsigned char *)b64, (int)bl);
    if (dl < 0) {
        free(doc);
        return policy_invalid(x, "Policy could not be decoded.");
    }
    while (dl > 0 && doc[dl - 1] == 0) /* the padding DecodeBlock counts */
        dl--;
    json_error_t je;
    json_t *root = json_loadb((const char *)doc, (size_t)dl, JSON_REJECT_DUPLICATES, &je);
    free(doc);
    int rc = -1;
    const char *exp = root ? json_string_value(json_object_get(root, "expiration")) : NULL;
    json_t *conds = root ? json_object_get(root, "conditions") : NULL;
    struct tm tm = {0};
    const char *e = exp ? strptime(exp, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    /* Key names are case-sensitive ("CONDITIONS" is no conditions); a date must be one. */
    if (!root || !json_is_array(conds) || !e || (*e && *e != '.' && *e != 'Z')) {
        policy_invalid(x, !root                   ? "Invalid JSON."
                          : !exp                  ? "Policy missing expiration."
                          : !json_is_array(conds) ? "Policy missing conditions."
                                                  : "Invalid 'expiration' value.");
        goto out;
    }
    if (timegm(&tm) < time(NULL)) {
        policy_denied(x, "Policy expired.");
        goto out;
    }
    int covered[MAX_FIELDS] = {0}, bucket_covered = 0;
    *min = 0;
    *max = UINT64_MAX;
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *var = NULL, *want = NULL, *op = "eq";
        if (json_is_object(c) && json_object_size(c) == 1) {
            var = json_object_iter_key(json_object_iter(c));
            want = json_string_value(json_object_iter_value(json_object_iter(c)));
        } else if (json_is_array(c) && json_array_size(c) >= 1 &&
                   json_is_string(json_array_get(c, 0)) &&
                   !strcasecmp(json_string_value(json_array_get(c, 0)), "content-length-range") &&
                   json_array_size(c) != 3) {
            policy_invalid(x, "Invalid content-length-range condition.");
            goto out;
        } else if (json_is_array(c) && json_array_size(c) == 3 &&
                   json_is_string(json_array_get(c, 0))) {
            op = json_string_value(json_array_get(c, 0));
            if (strcasecmp(op, "content-length-range") == 0) {
                json_int_t lo = json_integer_value(json_array_get(c, 1));
                json_int_t hi = json_integer_value(json_array_get(c, 2));
                if (!json_is_integer(json_array_get(c, 1)) ||
                    !json_is_integer(json_array_get(c, 2)) || lo < 0 || hi < lo) {
                    policy_invalid(x, "Invalid content-length-range condition.");
                    goto out;
                }
                *min = (uint64_t)lo;
                *max = (uint64_t)hi;
                continue;
            }
            var = json_string_value(json_array_get(c, 1));
            want = json_string_value(json_array_get(c, 2));
        }
        if (!var || !want || (strcasecmp(op, "eq") != 0 && strcasecmp(op, "starts-with") != 0)) {
            policy_invalid(x, "Policy has an invalid condition.");
            goto out;
        }
        const char *got = cond_value(fm, var);
        int ok = got &&
                 (strcasecmp(op, "eq") == 0 ? strcmp(got, want) == 0 : starts_with(var, got, want));
        if (!ok) {
            char why[300];
            snprintf(why, sizeof(why), "Policy Condition failed: [\"%s\", \"%.100s\", \"%.100s\"]",
                     op, var, want);
            policy_denied(x, why);
            goto out;
        }
        const char *name = *var == '$' ? var + 1 : var;
        if (strcasecmp(name, "bucket") == 0) bucket_covered = 1;
        for (int k = 0; k < fm->nf; k++)
            if (strcasecmp(fm->f[k].name, name) == 0) covered[k] = 1;
    }
    if (!bucket_covered) {
        policy_denied(x, "Policy Condition failed: [\"eq\", \"$bucket\", ...] is missing");
        goto out;
    }
    for (int k = 0; k < fm->nf; k++) {
        const char *n = fm->f[k].name;
        if (covered[k] || !strcasecmp(n, "policy") || !strcasecmp(n, "x-amz-signature") ||
            !strcasecmp(n, "signature") || !strcasecmp(n, "awsaccesskeyid") ||
            !strncasecmp(n, "x-ignore-", 9))
            continue;
        char why[200];
        snprintf(why, sizeof(why), "Extra input fields: %.100s", n);
        policy_denied(x, why);
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* SigV2 form fields: base64(HMAC-SHA1(secret, policy)). 0, or -1 with the error sent. */
static int check_signature_v2(form_t *fm, const char *ak, const char *sig)
{
    ctx_t *x = fm->x;
    const char *policy = field(fm, "policy");
    if (!policy) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Bucket POST must contain a field named 'policy'.");
        return -1;
    }
    const char *secret = s3_secret_of(x, ak);
    if (!secret) {
        s3_err(x, S3E_INVALID_ACCESS_KEY);
        return -1;
    }
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned ml = 0;
    char want[64];
    HMAC(EVP_sha1(), secret, (int)strlen(secret), (const uint8_t *)policy, strlen(policy), mac,
         &ml);
    EVP_EncodeBlock((unsigned char *)want, mac, (int)ml);
    if (!sigv4_sig_equal(want, sig)) {
        s3_err(x, S3E_SIGNATURE_MISMATCH);
        return -1;
    }
    snprintf(x->auth.access_key, sizeof(x->auth.access_key), "%s", ak);
    return 0;
}

/* Signature, scope and owner: 0, or -1 with the error sent. */
static int check_signature(form_t *fm)
{
    ctx_t *x = fm->x;
    const char *ak2 = field(fm, "awsaccesskeyid"), *sig2 = field(fm, "signature");
    if (ak2 || sig2) {
        if (!ak2 || !sig2) {
            s3_err_msg(x, S3E_INVALID_ARGUMENT,
                       "Bucket POST must contain the fields AWSAccessKeyId, policy and "
                       "signature.");
            return -1;
        }
        return check_signature_v2(fm, ak2, sig2);
    }
    const char *alg = field(fm, "x-amz-algorithm"), *cred = field(fm, "x-amz-credential");
    const char *date = field(fm, "x-amz-date"), *sig = field(fm, "x-amz-signature");
    const char *policy = field(fm, "policy");
    if (!policy || !alg || !cred || !date || !sig) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT,
                   "Bucket POST must contain a policy and its x-amz-algorithm, "
                   "x-amz-credential, x-amz-date and x-amz-signature fields.");
        return -1;
    }
    if (strcmp(alg, "AWS4-HMAC-SHA256") != 0 || sigv4_parse_credential(cred, &x->auth) != 0 ||
        strncmp(x->auth.date, date, 8) != 0 || strlen(date) != 16) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "The x-amz-credential or x-amz-date field is invalid.");
        return -1;
    }
    if (strcmp(x->auth.region, x->cfg->region) != 0 || strcmp(x->auth.service, "s3") != 0) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "The credential scope names another region.");
        return -1;
    }
    const char *secret = s3_secret_of(x, x->auth.access_key);
    if (!secret) {
        s3_err(x, S3E_INVALID_ACCESS_KEY);
        return -1;
    }
    uint8_t key[32];
    char want[65];
    sigv4_key_cache_get(x->cfg->keys, secret, x->auth.date, x->auth.region, "s3", key);
    sigv4_post_signature(key, policy, want);
    if (!sigv4_sig_equal(want, sig)) {
        s3_err(x, S3E_SIGNATURE_MISMATCH);
        return -1;
    }
    return 0;
}

/* A header name: an RFC 9110 token. */
static int header_name_ok(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s)) return 0;
    return 1;
}

/* A header value: no control characters but HTAB (CR or LF would end the header line). */
static int header_value_ok(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f) return 0;
    return 1;
}

/*
 * The fields kept as the object's headers are header values (and the names of x-amz-meta-*
 * ones header names): a form, unlike a request's head, can carry any bytes in them, and CR
 * or LF kept would write headers, or a whole response, into every GET of the object. 0, or
 * -1 with the error sent.
 */
static int form_headers_ok(form_t *fm)
{
    for (int i = 0; i < fm->nf; i++) {
        const char *nm = fm->f[i].name;
        int meta = !strncasecmp(nm, "x-amz-meta-", 11);
        if (!meta && strcasecmp(nm, "content-type") && strcasecmp(nm, "cache-control") &&
            strcasecmp(nm, "content-disposition") && strcasecmp(nm, "content-encoding") &&
            strcasecmp(nm, "expires") && strcasecmp(nm, "content-language"))
            continue;
        if ((meta && !header_name_ok(nm)) || !header_value_ok(fm->f[i].value)) {
            s3_err_msg(fm->x, S3E_INVALID_ARGUMENT,
                       "A form field kept as a header is not a valid header name and value.");
            return -1;
        }
    }
    if (!header_value_ok(fm->file_ctype)) {
        s3_err_msg(fm->x, S3E_INVALID_ARGUMENT, "The file's Content-Type is not a valid header.");
        return -1;
    }
    return 0;
}

/* The object's metadata from the form: its fields seen as request headers. */
static int form_umeta(form_t *fm, buf_t *um)
{
    ctx_t *x = fm->x;
    http_header_t hs[MAX_FIELDS + 2];
    int n = 0;
    buf_t tags = {0};
    if (form_headers_ok(fm) != 0) return -1;
    for (int i = 0; i < fm->nf; i++) {
        const char *nm = fm->f[i].name;
        if (!strcasecmp(nm, "tagging")) { /* a Tagging XML document, as the header's form */
            s3_xml_tag_t *t = NULL;
            int nt = 0;
            int rc = s3_xml_tagging(fm->f[i].value, strlen(fm->f[i].value), &t, &nt);
            if (rc == ERR_TOO_LARGE || rc == ERR_RANGE) {
                s3_err_tags_too_large(x, rc, 10);
                return -1;
            }
            if (rc) {
                s3_err(x, S3E_MALFORMED_XML);
                return -1;
            }
            for (int k = 0; k < nt; k++) {
                if (k) buf_printf(&tags, "&");
                buf_url(&tags, t[k].key);
                buf_printf(&tags, "=");
                buf_url(&tags, t[k].value);
            }
            free(t);
            hs[n++] = (http_header_t){"x-amz-tagging", tags.p ? tags.p : ""};
        } else if (!strncasecmp(nm, "x-amz-meta-", 11) || !strcasecmp(nm, "acl") ||
                   !strcasecmp(nm, "cache-control") || !strcasecmp(nm, "content-disposition") ||
                   !strcasecmp(nm, "content-encoding") || !strcasecmp(nm, "expires") ||
                   !strcasecmp(nm, "content-language")) {
            hs[n++] = (http_header_t){strcasecmp(nm, "acl") ? nm : "x-amz-acl", fm->f[i].value};
        }
    }
    struct http_req_info fake = *x->info, *real = (struct http_req_info *)x->info;
    fake.headers = hs;
    fake.nheaders = n;
    x->info = &fake;
    int rc = s3_build_umeta(x, um);
    x->info = real;
    free(tags.p);
    return rc;
}

/*
 * The integrity fields of the form, as PutObject's headers: Content-MD5 and
 * at most one x-amz-checksum-ALGO (of an algorithm served). Ignored, a wrong
 * value stored the file unchecked (a sweep). 0 with *algo (CKS_NONE: none)
 * and md5_hex ("" none), or -1 with the error sent.
 */
static int integrity_fields(form_t *fm, int *algo, const char **expect, char md5_hex[33])
{
    ctx_t *x = fm->x;
    const char *cmd5 = field(fm, "content-md5");
    md5_hex[0] = 0;
    *algo = CKS_NONE;
    *expect = NULL;
    if (cmd5 && s3_content_md5_hex(cmd5, md5_hex) != 0) {
        s3_err(x, S3E_INVALID_DIGEST);
        return -1;
    }
    for (int i = 0; i < fm->nf; i++) {
        int a = s3_cks_value_name(fm->f[i].name);
        const char *why = NULL;
        uint8_t dig[64];
        if (!a) continue;
        if (a < 0)
            why = S3_CKS_UNSUPPORTED;
        else if (*algo)
            why = S3_CKS_MULTIPLE;
        else if (cks_decode(a, fm->f[i].value, dig) != 0)
            why = "The checksum field's value is invalid.";
        if (why) {
            s3_err_msg(x, S3E_INVALID_REQUEST, why);
            return -1;
        }
        *algo = a;
        *expect = fm->f[i].value;
    }
    return 0;
}

/* Stream the file part (the buffer starts at its first byte) into w; its size in *size, and
 * ck (when it has an algorithm) takes its bytes. */
static int stream_file(form_t *fm, obj_writer_t *w, uint64_t max, uint64_t *size, cks_t *ck)
{
    *size = 0;
    for (;;) {
        const uint8_t *end = find(fm->buf, fm->len, fm->delim, fm->dl);
        /* Without the delimiter in view, all but its length - 1 bytes are surely data. */
        size_t take = end ? (size_t)(end - fm->buf) : fm->len >= fm->dl ? fm->len - fm->dl + 1 : 0;
        if (take) {
            if (*size + take > max) return ERR_TOO_LARGE;
            if (ck->algo) cks_update(ck, fm->buf, take);
            int rc = obj_put_write(w, fm->buf, take);
            if (rc) return rc;
            *size += take;
            consume(fm, take);
        }
        if (end) return 0;
        int rc = fill_more(fm);
        if (rc) return rc == ERR_INVAL ? ERR_AGAIN : rc; /* ended before the boundary */
    }
}

static void respond(form_t *fm, const obj_info_t *info, const char *key)
{
    ctx_t *x = fm->x;
    const char *redirect = field(fm, "success_action_redirect");
    const char *status = field(fm, "success_action_status");
    buf_t h = {0}, b = {0};
    int redirecting = redirect &&
                      (!strncmp(redirect, "http://", 7) || !strncmp(redirect, "https://", 8)) &&
                      !strpbrk(redirect, "\r\n");
    buf_printf(&h, "x-amz-request-id: %s\r\nETag: \"%s\"\r\n", x->id, info->etag);
    buf_t url = {0};
    s3_object_url(x, &url, key);
    if (!redirecting) /* one Location: the redirect's, or the object's */
        buf_printf(&h, "Location: %s\r\n", url.p);
    if (redirecting) {
        buf_printf(&h, "Location: %s%sbucket=", redirect, strchr(redirect, '?') ? "&" : "?");
        buf_url_component(&h, x->bucket);
        buf_printf(&h, "&key=");
        buf_url_component(&h, key);
        buf_printf(&h, "&etag=%%22%s%%22\r\n", info->etag);
        (void)http_respond(x->r, 303, h.p, 0);
    } else if (status && !strcmp(status, "201")) {
        buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse><Location>");
        buf_xml(&b, url.p);
        buf_printf(&b, "</Location><Bucket>");
        buf_xml(&b, x->bucket);
        buf_printf(&b, "</Bucket><Key>");
        buf_xml(&b, key);
        buf_printf(&b, "</Key><ETag>\"%s\"</ETag></PostResponse>", info->etag);
        buf_printf(&h, "Content-Type: application/xml\r\n");
        (void)http_respond_full(x->r, 201, h.p, b.p, b.len);
    } else {
        (void)http_respond(x->r, status && !strcmp(status, "200") ? 200 : 204, h.p, 0);
    }
    free(h.p);
    free(b.p);
    free(url.p);
}

void s3_post_object(ctx_t *x)
{
    const char *ct = s3_hdr(x->info, "content-type");
    const char *bd = ct ? strstr(ct, "boundary=") : NULL;
    form_t fm = {.x = x};
    char *key = NULL;
    buf_t um = {0};
    if (!bd) {
        s3_err_msg(x, S3E_MALFORMED_POST, NULL);
        return;
    }
    bd += 9;
    size_t bl = strcspn(bd, ";");
    if (bl >= 2 && bd[0] == '"' && bd[bl - 1] == '"') {
        bd++;
        bl -= 2;
    }
    if (bl == 0 || bl > 70) {
        s3_err_msg(x, S3E_MALFORMED_POST, NULL);
        return;
    }
    fm.dl = (size_t)snprintf(fm.delim, sizeof(fm.delim), "\r\n--%.*s", (int)bl, bd);
    if (read_fields(&fm) != 0) goto out;
    uint64_t min = 0, max = 5ull << 30, size;
    /* The key as stored (S3 checks the policy's $key conditions against it). */
    const char *k = field(&fm, "key");
    if (!k || !k[0]) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "Bucket POST must contain a field named 'key'.");
        goto out;
    }
    /* ${filename}: the name of the file the browser sent, without its path. */
    buf_t kb = {0};
    const char *fn = strrchr(fm.filename, '/') ? strrchr(fm.filename, '/') + 1 : fm.filename;
    for (const char *p = k; *p;) {
        if (!strncmp(p, "${filename}", 11)) {
            buf_printf(&kb, "%s", fn);
            p += 11;
        } else {
            buf_printf(&kb, "%c", *p++);
        }
    }
    key = kb.p;
    if (strlen(key) > MAX_KEY_LEN || !s3_key_ok(key, strlen(key))) {
        s3_err_msg(x, S3E_INVALID_ARGUMENT, "The key is not a valid object key.");
        goto out;
    }
    fm.key = key;
    if (!field(&fm, "policy") && !field(&fm, "x-amz-signature") &&
        !field(&fm, "x-amz-credential") && !field(&fm, "signature") &&
        !field(&fm, "awsaccesskeyid")) {
        /* No policy and no signature: anyone's upload, into a public-read-write bucket only. */
        obj_info_t bi;
        if (!s3_bucket_exists(x, x->bucket, &bi)) {
            s3_err(x, S3E_NO_SUCH_BUCKET);
            goto out;
        }
        if (strcmp(s3_umeta_get(&bi, "acl"), "public-read-write") != 0) {
            s3_err(x, S3E_ACCESS_DENIED);
            goto out;
        }
        s3_bucket_iname(x->bucket, &bi, x->ibucket);
    } else {
        if (check_signature(&fm) != 0) goto out;
        http_req_set_principal(x->r, x->auth.access_key); /* its stalls are the signer's */
        /* The signer must own the bucket, or have its WRITE (and then owns the object as
         * the bucket's ownership setting says). */
        obj_info_t bi;
        if (!s3_bucket_exists(x, x->bucket, &bi)) {
            s3_err(x, S3E_NO_SUCH_BUCKET);
            goto out;
        }
        const char *owner = s3_bucket_owner(&bi);
        if (owner[0] && strcmp(owner, x->auth.access_key) != 0 && !s3_foreign_may_write(x, &bi)) {
            s3_err(x, S3E_ACCESS_DENIED);
            goto out;
        }
        s3_bucket_iname(x->bucket, &bi, x->ibucket);
        if (check_policy(&fm, field(&fm, "policy"), &min, &max) != 0) goto out;
    }
    free(x->key);
    x->key = xstrdup(key);
    const char *sc = field(&fm, "x-amz-storage-class");
    if (sc && strcmp(sc, "STANDARD") != 0) {
        s3_err(x, S3E_INVALID_STORAGE_CLASS);
        goto out;
    }
    if (form_umeta(&fm, &um) != 0) goto out;
    int algo;
    const char *expect;
    char md5_hex[33];
    if (integrity_fields(&fm, &algo, &expect, md5_hex) != 0) goto out;
    int named = algo;
    if (!algo) algo = S3_CKS_DEFAULT; /* none sent: S3's default (s3_int.h) */
    int err;
    obj_writer_t *w = obj_put_begin(x->cfg->set, x->ibucket, key, &err);
    if (!w) {
        s3_engine_error(x, err);
        goto out;
    }
    cks_t ck = {0};
    if (algo && cks_init(&ck, algo) != 0) {
        obj_put_abort(w);
        s3_engine_error(x, ERR_NOMEM);
        goto out;
    }
    err = stream_file(&fm, w, max, &size, &ck);
    if (!err && size < min) err = ERR_RANGE;
    char got[CKS_MAX_B64] = "";
    if (algo) cks_final(&ck, got, sizeof(got));
    if (err) {
        obj_put_abort(w);
        if (err == ERR_TOO_LARGE)
            s3_err(x, S3E_ENTITY_TOO_LARGE);
        else if (err == ERR_RANGE)
            s3_err(x, S3E_ENTITY_TOO_SMALL);
        else if (err == ERR_AGAIN)
            s3_err(x, S3E_INCOMPLETE_BODY);
        else
            s3_engine_error(x, err);
        goto out;
    }
    /* Every digest given must match before anything becomes visible. */
    if ((expect && strcmp(expect, got) != 0) || (md5_hex[0] && strcmp(md5_hex, obj_put_etag(w)))) {
        obj_put_abort(w);
        s3_err(x, S3E_BAD_DIGEST);
        goto out;
    }
    if (named || !obj_put_inline(w))
        buf_printf(&um, "%s%c%s:%s%c", CKS_META, 0, cks_name(algo), got, 0);
    const char *ctype = field(&fm, "content-type");
    if (!ctype && fm.file_ctype[0]) ctype = fm.file_ctype;
    obj_info_t info;
    if ((err = s3_commit_in_bucket(x, w, ctype, um.p, um.len, &info)) != 0) {
        s3_engine_error(x, err);
        goto out;
    }
    respond(&fm, &info, key);
out:
    for (int i = 0; i < fm.nf; i++) {
        free(fm.f[i].name);
        free(fm.f[i].value);
    }
    free(fm.buf);
    free(key);
    free(um.p);
}
