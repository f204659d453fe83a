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

void http_head_view(const http_head_t *h, http_head_view_t *v)
{
    v->copy = xmalloc(h->len + 1);
    if (h->len) memcpy(v->copy, h->buf, h->len);
    v->copy[h->len] = 0;
    v->target = v->copy + h->url_off;
    v->nheaders = h->n;
    v->content_length = -1;
    v->expect_continue = 0;
    for (int i = 0; i < h->n; i++) {
        v->headers[i].name = v->copy + h->name_off[i];
        /* A name without a value (cut by the parser's own checks) reads as empty. */
        v->headers[i].value = h->value_off[i] ? v->copy + h->value_off[i] : "";
        if (strcasecmp(v->headers[i].name, "content-length") == 0)
            v->content_length = strtoll(v->headers[i].value, NULL, 10);
        if (strcasecmp(v->headers[i].name, "expect") == 0 &&
            strcasecmp(v->headers[i].value, "100-continue") == 0)
            v->expect_continue = 1;
    }
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
