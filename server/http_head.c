#include "server/http_head.h"

#include "common/mem.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void http_head_reset(http_head_t *h)
{
    h->len = 0;
    h->n = 0;
    h->last_was_value = 0;
    h->too_big = 0;
    h->url_off = 0;
}

void http_head_free(http_head_t *h)
{
    free(h->buf);
    h->buf = NULL;
    h->cap = h->len = 0;
}

static int add(http_head_t *h, const char *at, size_t len)
{
    if (h->len + len + 1 > h->max) {
        h->too_big = 1;
        return -1;
    }
    if (h->len + len + 1 > h->cap) {
        h->cap = (h->len + len + 1) * 2;
        if (h->cap > h->max + 1) h->cap = h->max + 1;
        h->buf = xrealloc(h->buf, h->cap);
    }
    memcpy(h->buf + h->len, at, len);
    h->len += len;
    h->buf[h->len] = 0;
    return 0;
}

int http_head_url(http_head_t *h, const char *at, size_t len)
{
    return add(h, at, len);
}

int http_head_url_done(http_head_t *h)
{
    return add(h, "", 1); /* NUL after the URL */
}

int http_head_field(http_head_t *h, const char *at, size_t len)
{
    if (h->last_was_value || h->n == 0) {
        if (h->n == HTTP_MAX_HEADERS) {
            h->too_big = 1;
            return -1;
        }
        h->name_off[h->n] = h->len;
        h->value_off[h->n] = 0;
        h->n++;
        h->last_was_value = 0;
    }
    return add(h, at, len);
}

int http_head_field_done(http_head_t *h)
{
    /* A field line with no name (": v") is no field: 400, as a bad token is (RFC 9110 5.1). */
    if (h->n && h->len == h->name_off[h->n - 1]) return -1;
    if (add(h, "", 1)) return -1;
    h->value_off[h->n - 1] = h->len;
    h->last_was_value = 1;
    return 0;
}

int http_head_value(http_head_t *h, const char *at, size_t len)
{
    return add(h, at, len);
}

int http_head_value_done(http_head_t *h)
{
    /* Whitespace around a field value is not part of it (RFC 9110 5.5): llhttp drops what
     * leads, this what trails. Kept, "Range: bytes=0-9 " was no range and an
     * "x-amz-content-sha256: UNSIGNED-PAYLOAD " a failed signature. */
    size_t start = h->n ? h->value_off[h->n - 1] : h->len;
    while (h->len > start && (h->buf[h->len - 1] == ' ' || h->buf[h->len - 1] == '\t'))
        h->len--;
    return add(h, "", 1);
}

/* Field lines of one name that stay apart: framing is llhttp's (it refuses a second
 * Content-Length or Transfer-Encoding it would have to choose between), and a second Host
 * is a bad request (RFC 9112 3.2), refused by whoever serves it. */
static int kept_apart(const char *name)
{
    return strcasecmp(name, "host") == 0 || strcasecmp(name, "content-length") == 0 ||
           strcasecmp(name, "transfer-encoding") == 0;
}

/*
 * A target in absolute-form ("http://host/path?query"), which a server must accept (RFC 9112
 * 3.2.2), is served as its origin-form ("/path?query") when its authority is the Host
 * header's: what a client signed (SigV4 signs the path and the Host) and which bucket a
 * virtual host names then agree. One whose authority differs, or that has no path, is left
 * as it came (refused as a bad target).
 */
static void origin_form(http_head_view_t *v)
{
    const char *t = v->target;
    size_t skip = !strncasecmp(t, "http://", 7) ? 7 : !strncasecmp(t, "https://", 8) ? 8 : 0;
    if (!skip) return;
    const char *auth = t + skip, *path = strchr(auth, '/');
    if (!path || memchr(auth, '?', (size_t)(path - auth))) return;
    const char *host = NULL;
    for (int i = 0; i < v->nheaders; i++)
        if (!strcasecmp(v->headers[i].name, "host")) host = v->headers[i].value;
    size_t al = (size_t)(path - auth);
    if (host && strlen(host) == al && !strncasecmp(host, auth, al)) v->target = path;
}

void http_head_view(const http_head_t *h, http_head_view_t *v)
{
    /*
     * Field lines of one name are one field whose value is theirs joined by
     * commas, in order (RFC 9110 5.3): so each handler sees what a client
     * signed (SigV4 joins them so) and what S3 takes (x-amz-meta-* values
     * joined). Taking the first or the last of them had a header checked
     * or applied other than the one signed. The copy never outgrows the
     * head: a merged line gives up its name and NUL for one comma (and a
     * name cut short gets its two NULs here).
     */
    v->copy = xmalloc(h->len + 2 * (size_t)h->n + 2);
    size_t o;
    const char *url = h->buf ? h->buf + h->url_off : "";
    size_t ul = strlen(url);
    memcpy(v->copy, url, ul + 1);
    v->target = v->copy;
    o = ul + 1;
    v->nheaders = 0;
    v->content_length = -1;
    v->expect_continue = 0;
    uint8_t merged[HTTP_MAX_HEADERS] = {0};
    for (int i = 0; i < h->n; i++) {
        if (merged[i]) continue;
        const char *name = h->buf + h->name_off[i];
        /* A name without a value (cut by the parser's own checks) reads as empty. */
        const char *val = h->value_off[i] ? h->buf + h->value_off[i] : "";
        http_header_t *out = &v->headers[v->nheaders++];
        size_t nl = strlen(name), vl = strlen(val);
        out->name = v->copy + o;
        memcpy(v->copy + o, name, nl + 1);
        o += nl + 1;
        out->value = v->copy + o;
        memcpy(v->copy + o, val, vl);
        o += vl;
        for (int j = i + 1; j < h->n && !kept_apart(name); j++) {
            if (merged[j] || strcasecmp(name, h->buf + h->name_off[j]) != 0) continue;
            merged[j] = 1;
            const char *more = h->value_off[j] ? h->buf + h->value_off[j] : "";
            size_t ml = strlen(more);
            v->copy[o++] = ',';
            memcpy(v->copy + o, more, ml);
            o += ml;
        }
        v->copy[o++] = 0;
        if (strcasecmp(out->name, "content-length") == 0)
            v->content_length = strtoll(out->value, NULL, 10);
        if (strcasecmp(out->name, "expect") == 0 && strcasecmp(out->value, "100-continue") == 0)
            v->expect_continue = 1;
    }
    origin_form(v);
}

#define DATA_CB(name, fn)                                                                          \
    static int name(llhttp_t *p, const char *at, size_t len)                                       \
    {                                                                                              \
        return fn(p->data, at, len) ? HPE_USER : 0;                                                \
    }
#define DONE_CB(name, fn)                                                                          \
    static int name(llhttp_t *p)                                                                   \
    {                                                                                              \
        return fn(p->data) ? HPE_USER : 0;                                                         \
    }
DATA_CB(cb_url, http_head_url)
DONE_CB(cb_url_done, http_head_url_done)
DATA_CB(cb_field, http_head_field)
DONE_CB(cb_field_done, http_head_field_done)
DATA_CB(cb_value, http_head_value)
DONE_CB(cb_value_done, http_head_value_done)

void http_head_callbacks(llhttp_settings_t *s)
{
    s->on_url = cb_url;
    s->on_url_complete = cb_url_done;
    s->on_header_field = cb_field;
    s->on_header_field_complete = cb_field_done;
    s->on_header_value = cb_value;
    s->on_header_value_complete = cb_value_done;
}
