/*
 * Fuzz the HTTP request path from raw bytes to what a handler sees: llhttp
 * (as warmlaked configures it) feeding server/http_head, over pipelined
 * requests. The same input is parsed whole and in pieces whose size comes
 * from the first byte; both must agree on every message (count, targets,
 * headers, content length) and on whether they fail.
 */
#include "server/http_head.h"

#include <llhttp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    http_head_t head;
    uint64_t digest; /* of every message's head as a handler would see it */
    int messages, heads;
} run_t;

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

static run_t *run_of(llhttp_t *p)
{
    return ((http_head_t *)p->data)->owner;
}

static int on_begin(llhttp_t *p)
{
    http_head_reset(p->data);
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    run_t *r = run_of(p);
    http_head_view_t v;
    http_head_view(&r->head, &v);
    /* Everything a handler reads lies inside the copy and is NUL-terminated there. */
    size_t len = r->head.len;
    if (v.target < v.copy || v.target > v.copy + len) abort();
    if (v.nheaders < 0 || v.nheaders > HTTP_MAX_HEADERS) abort();
    r->digest = mix(r->digest, v.target, strlen(v.target) + 1);
    for (int i = 0; i < v.nheaders; i++) {
        const char *n = v.headers[i].name, *val = v.headers[i].value;
        if (n < v.copy || n > v.copy + len) abort();
        if (val[0] && (val < v.copy || val > v.copy + len)) abort();
        r->digest = mix(r->digest, n, strlen(n) + 1);
        r->digest = mix(r->digest, val, strlen(val) + 1);
    }
    r->digest = mix(r->digest, &v.content_length, sizeof(v.content_length));
    r->digest = mix(r->digest, &v.expect_continue, sizeof(v.expect_continue));
    r->heads++;
    free(v.copy);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    run_of(p)->messages++;
    return 0;
}

static llhttp_errno_t parse(const uint8_t *data, size_t size, size_t step, run_t *r)
{
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    http_head_callbacks(&s); /* the very callbacks warmlaked parses with */
    s.on_message_begin = on_begin;
    s.on_headers_complete = on_headers_complete;
    s.on_message_complete = on_message_complete;
    llhttp_t p;
    llhttp_init(&p, HTTP_REQUEST, &s);
    memset(r, 0, sizeof(*r));
    r->head.max = 2048; /* small, so the too-large path is reached */
    r->head.owner = r;
    p.data = &r->head;
    llhttp_errno_t e = HPE_OK;
    for (size_t pos = 0; pos < size && e == HPE_OK; pos += step) {
        size_t n = size - pos < step ? size - pos : step;
        e = llhttp_execute(&p, (const char *)data + pos, n);
    }
    http_head_free(&r->head);
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t step = 1 + data[0] % 64;
    run_t whole, pieces;
    llhttp_errno_t a = parse(data + 1, size - 1, size, &whole);
    llhttp_errno_t b = parse(data + 1, size - 1, step, &pieces);
    /*
     * Both fail or neither, after the same messages. Which error a broken
     * message gets may differ (a header value over the limit is seen before
     * a bad byte further on only when it arrives in pieces): 400 vs RequestHeaderSectionTooLarge.
     */
    if ((a == HPE_OK) != (b == HPE_OK) || whole.messages != pieces.messages ||
        whole.heads != pieces.heads || whole.digest != pieces.digest)
        abort();
    if (a == HPE_OK && whole.head.too_big != pieces.head.too_big) abort();
    return 0;
}
