/*
 * s3_util: the S3 layer's text helpers: growing buffers with XML and URL
 * escaping, percent-decoding, query parameters, HTTP and ISO 8601 dates,
 * and the "name\0value\0" pairs of an object's user metadata.
 */

#include "server/s3_int.h"

#include <ctype.h>

const char *s3_hdr(const struct http_req_info *in, const char *name)
{
    for (int i = 0; i < in->nheaders; i++)
        if (strcasecmp(in->headers[i].name, name) == 0) return in->headers[i].value;
    return NULL;
}

void buf_printf(buf_t *b, const char *fmt, ...)
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

void buf_put(buf_t *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->cap + n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0; /* as buf_printf leaves it */
}

/* Runs of characters that need no escaping go in one copy: listings write a key per entry. */
void buf_xml(buf_t *b, const char *s)
{
    size_t n = strlen(s), i = 0, run = 0;
    char ref[16];
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        size_t l = 1;
        switch (c) {
        case '&':
            esc = "&amp;";
            break;
        case '<':
            esc = "&lt;";
            break;
        case '>':
            esc = "&gt;";
            break;
        case '"':
            esc = "&quot;";
            break;
        case '\'':
            esc = "&apos;";
            break;
        case '\r':
            esc = "&#13;"; /* a literal CR would be read back as LF */
            break;
        default:
            if (c >= 0x20 && c < 0x80) break;
            l = s3_xml_char_len((const unsigned char *)s + i, n - i);
            if (l) break;
            /* A control character or U+FFFE/U+FFFF (keys may hold them): a character
             * reference, as S3 writes them (encoding-type=url is the exact way); anything
             * else (bad UTF-8, echoed input only) becomes U+FFFD. */
            l = s3_utf8_char_len((const unsigned char *)s + i, n - i);
            if (l) {
                unsigned cp =
                    c < 0x80 ? c : (c & 0x0F) << 12 | (s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
                snprintf(ref, sizeof(ref), "&#x%X;", cp);
                esc = ref;
            } else {
                esc = "\xEF\xBF\xBD";
                l = 1;
            }
        }
        if (esc) {
            buf_put(b, s + run, i - run);
            buf_put(b, esc, strlen(esc));
            i += l;
            run = i;
        } else {
            i += l;
        }
    }
    buf_put(b, s + run, n - run);
}

static void url_encode(buf_t *b, const char *s, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && keep_slash)) {
            buf_put(b, s, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            buf_put(b, e, 3);
        }
    }
}

void buf_url(buf_t *b, const char *s)
{
    url_encode(b, s, 1);
}

void buf_url_component(buf_t *b, const char *s)
{
    url_encode(b, s, 0);
}

void s3_object_url(ctx_t *x, buf_t *b, const char *key)
{
    const char *host = s3_hdr(x->info, "host");
    int ok = host && *host && strlen(host) < 256;
    for (const char *c = host; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || strchr(".-_:[]", *c);
    if (ok) buf_printf(b, "http://%s", host);
    buf_printf(b, "/");
    if (!x->vhost) {
        buf_url_component(b, x->bucket);
        buf_printf(b, "/");
    }
    buf_url(b, key);
}

static int hexv(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Percent-decode n bytes (plus_space for queries). NULL on a bad escape or NUL. */
char *s3_pdecode(const char *s, size_t n, int plus_space)
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
char *s3_qparam(const char *q, const char *name, int *present)
{
    size_t nl = strlen(name);
    *present = 0;
    for (const char *p = q; p && *p;) {
        const char *e = strchr(p, '&');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= nl && memcmp(p, name, nl) == 0 && (len == nl || p[nl] == '=')) {
            *present = 1;
            return len == nl ? xstrdup("") : s3_pdecode(p + nl + 1, len - nl - 1, 1);
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

void s3_iso8601(uint64_t ns, char out[32])
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    char s[24];
    gmtime_r(&t, &tm);
    strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%.19s.%03uZ", s, (unsigned)(ns / 1000000ull % 1000));
}

void s3_http_date(uint64_t ns, char out[40])
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* An HTTP date (IMF-fixdate), or -1 when absent or unparsable (then it is ignored). */
time_t s3_parse_http_date(const char *s)
{
    /* IMF-fixdate, and the two obsolete forms a recipient must still take (RFC 9110 5.6.7):
     * RFC 850 (two-digit years: 69-99 the 1900s) and asctime's. */
    static const char *const forms[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                        "%a %b %e %H:%M:%S %Y"};
    for (size_t i = 0; s && i < sizeof(forms) / sizeof(forms[0]); i++) {
        struct tm tm = {0};
        const char *end = strptime(s, forms[i], &tm);
        if (end && !*end) return timegm(&tm);
    }
    return (time_t)-1;
}

int s3_if_range_holds(const char *hdr, const char *etag, time_t mtime)
{
    if (!hdr) return 1;
    size_t len = strlen(hdr);
    /* One validator, not a list: a weak tag (W/"...") never matches, as 13.1.5 asks a strong
     * comparison; an unquoted value is taken for a date, which the parse may refuse. */
    if (hdr[0] == '"')
        return len == strlen(etag) + 2 && hdr[len - 1] == '"' &&
               memcmp(hdr + 1, etag, len - 2) == 0;
    if (hdr[0] == 'W' && hdr[1] == '/') return 0;
    /* A date matches only if it is Last-Modified to the second: an older copy's date, or
     * one a client made up, means its copy may not be the current one. */
    time_t t = s3_parse_http_date(hdr);
    return t != (time_t)-1 && t == mtime;
}

/* The umeta pairs of info with name set to value (replaced or added) into out. */
void s3_umeta_with(const obj_info_t *info, const char *name, const char *value, buf_t *out)
{
    const char *n, *v;
    for (size_t p = 0; obj_umeta_next(info, &p, &n, &v);)
        if (strcmp(n, name) != 0) buf_printf(out, "%s%c%s%c", n, 0, v, 0);
    buf_printf(out, "%s%c%s%c", name, 0, value, 0);
}

/* Value of a pair in an object's user metadata, or "" when absent. */
const char *s3_umeta_get(const obj_info_t *info, const char *name)
{
    return obj_umeta_get(info, name);
}

/* The next read of a stream at off with len left: up to the end of the current read unit. */
size_t s3_next_piece(uint64_t off, uint64_t len, size_t unit)
{
    return (size_t)(len < unit - off % unit ? len : unit - off % unit);
}

int s3_etag_matches(const char *hdr, const char *etag, int weak_ok)
{
    size_t want = strlen(etag);
    while (*hdr) {
        while (*hdr == ' ' || *hdr == '\t' || *hdr == ',')
            hdr++;
        size_t len = strcspn(hdr, ",");
        const char *e = hdr;
        hdr += len;
        while (len && (e[len - 1] == ' ' || e[len - 1] == '\t'))
            len--;
        if (len == 1 && e[0] == '*') return 1;
        if (len >= 2 && e[0] == 'W' && e[1] == '/') {
            if (!weak_ok) continue; /* If-Match compares strongly: a weak tag never matches */
            e += 2;
            len -= 2;
        }
        if (len >= 2 && e[0] == '"' && e[len - 1] == '"') {
            e++;
            len -= 2;
        }
        if (len && len == want && memcmp(e, etag, len) == 0) return 1;
    }
    return 0;
}

int s3_cmp_name(const void *a, const void *b)
{
    const char *const *bb = b;
    return strcmp(a, *bb);
}

int s3_query_name(const char *q, int (*match)(const char *name, const void *arg), const void *arg)
{
    char name[32]; /* every sub-resource name fits; a longer parameter is none of them */
    for (; *q;) {
        size_t len = strcspn(q, "=&");
        if (len > 0 && len < sizeof(name)) {
            memcpy(name, q, len);
            name[len] = 0;
            if (match(name, arg)) return 1;
        }
        q += strcspn(q, "&");
        if (*q) q++;
    }
    return 0;
}
