/*
 * http_head: collects one HTTP/1.1 request head (request target and header
 * lines) from llhttp's callbacks into one bounded buffer, and hands it out
 * as the header array handlers see. No I/O and no sockets, so the request
 * path from raw bytes to what a handler gets can be fuzzed on its own.
 */
#ifndef WL_HTTP_HEAD_H
#define WL_HTTP_HEAD_H

#include "server/http.h"

#include <llhttp.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t max; /* request line + headers, bytes; over it: 400 RequestHeaderSectionTooLarge */
    char *buf;  /* URL and header names/values, NUL-separated */
    size_t len, cap;
    size_t url_off, name_off[HTTP_MAX_HEADERS], value_off[HTTP_MAX_HEADERS];
    int n, last_was_value;
    int too_big; /* over max, or more than HTTP_MAX_HEADERS lines */
    void *owner; /* whoever parses with it (a connection, a fuzzer run) */
} http_head_t;

/* The parsed head, pointing into a copy the caller frees (copy). */
typedef struct {
    char *copy;
    const char *target;
    http_header_t headers[HTTP_MAX_HEADERS];
    int nheaders;
    int64_t content_length; /* -1 when absent */
    int expect_continue;    /* Expect: 100-continue */
} http_head_view_t;

/* Start a new message (llhttp on_message_begin). */
void http_head_reset(http_head_t *h);
void http_head_free(http_head_t *h);

/*
 * Install the head's llhttp callbacks (URL and header pieces) into s; the
 * parser's data must point at the http_head_t. The caller adds its own
 * message begin/headers complete/body/complete callbacks (on_message_begin
 * must call http_head_reset). A head over its limit stops the parse with
 * HPE_USER and too_big set (answer 400 RequestHeaderSectionTooLarge).
 */
void http_head_callbacks(llhttp_settings_t *s);

/* The pieces, for callers that drive them directly: 0, or -1 when the head grows too big. */
int http_head_url(http_head_t *h, const char *at, size_t len);
int http_head_url_done(http_head_t *h);
int http_head_field(http_head_t *h, const char *at, size_t len);
int http_head_field_done(http_head_t *h);
int http_head_value(http_head_t *h, const char *at, size_t len);
int http_head_value_done(http_head_t *h);

/* At headers complete: fill v (v->copy is malloc'd). */
void http_head_view(const http_head_t *h, http_head_view_t *v);

#endif
