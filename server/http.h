/*
 * http: the HTTP/1.1 front end of warmlaked (libuv + llhttp).
 *
 * Design. The loop thread owns the sockets and only moves bytes: it parses
 * requests with llhttp, copies body bytes into the request's inbound
 * buffer and writes what handlers produce. Handlers run on a pool of worker
 * threads and are written as straight-line blocking code: http_body_read()
 * waits for body bytes, http_write() waits while too much output is in
 * flight. Both buffers are bounded (HTTP_HIGH_WATER each), so a 50 GiB PUT or
 * GET holds at most about 2 x HTTP_HIGH_WATER plus one read buffer per
 * connection: the loop stops reading a socket whose request buffer is full
 * and resumes when the handler has drained it.
 *
 * Requests on one connection are answered in order (pipelining): the parser
 * pauses after each request until its response is complete. A request whose
 * handler did not read its whole body closes the connection after the
 * response. "Expect: 100-continue" is answered when the handler first asks
 * for the body, so a request refused early never has its body sent.
 */
#ifndef WL_HTTP_H
#define WL_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_HIGH_WATER  (1u << 20)
#define HTTP_MAX_HEADERS 256 /* field lines; the head's byte bound (max_header) comes first */

typedef struct http_server http_server_t;
typedef struct http_req http_req_t;

typedef struct {
    const char *name, *value; /* NUL-terminated; name as sent */
} http_header_t;

/* What a handler sees of a request; valid until the handler returns. */
struct http_req_info {
    const char *method;
    const char *target; /* raw request target: path and query, percent-encoded */
    const http_header_t *headers;
    int nheaders;
    int64_t content_length; /* -1 when absent (chunked transfer encoding) */
    const char *peer;       /* "ip:port" */
    const char *id;         /* unique request id (16 hex digits): x-amz-request-id, logs */
};

/* Runs on a worker thread; must send a response (http_respond) before returning. */
typedef void (*http_handler_fn)(void *arg, http_req_t *r, const struct http_req_info *info);

typedef struct {
    const char *listen; /* "127.0.0.1:9000" or "[::1]:9000" */
    int workers;        /* handler threads; default 32 */
    int loops;          /* event loop threads, each with connections of its own; default 1 */
    int max_conns;      /* refuse beyond this; default 1024 */
    size_t max_header;  /* bytes of request line + headers; default 16 KiB */
    uint64_t idle_ms;   /* close idle keep-alive connections; default 60 s */
    uint64_t header_ms; /* a request's headers must arrive within; default 30 s */
    uint64_t io_ms;     /* a request stalled on its client (no body byte in, no response
                           byte taken) this long is closed; default 30 s */
    int max_stalled;    /* workers that clients stalling a request may hold at once; beyond
                           it the longest-stalled is closed; default 256 */
    http_handler_fn handler;
    void *arg;
} http_cfg_t;

/* Bind and listen; returns 0 or an ERR_* (address in use...). Port 0 picks one. */
int http_server_new(const http_cfg_t *cfg, http_server_t **out) __attribute__((warn_unused_result));
/* The bound port (useful with port 0). */
int http_server_port(const http_server_t *s);
/* Run the loop until http_server_stop; then drain in-flight requests and return. */
int http_server_run(http_server_t *s);
/* Thread-safe and async-signal-safe: stop accepting, finish in-flight requests, return from run. */
void http_server_stop(http_server_t *s);
void http_server_free(http_server_t *s);

/* ---- for handlers, on their worker thread ---- */

/* Read up to cap body bytes. Returns bytes read, 0 at the end of the body, or a negative ERR_*
 * (ERR_CLOSED when the client went away, ERR_INVAL for a malformed body). */
long http_body_read(http_req_t *r, void *buf, size_t cap);

/*
 * Start the response. headers: "Name: value\r\n" lines (may be NULL).
 * content_length < 0 means chunked transfer encoding. Adds Date, Server,
 * Content-Length or Transfer-Encoding, and Connection as needed.
 */
int http_respond(http_req_t *r, int status, const char *headers, int64_t content_length);
/* Send body bytes (copied). Blocks while more than HTTP_HIGH_WATER is in flight. */
int http_write(http_req_t *r, const void *data, size_t len);
/*
 * Send body bytes without copying them: the bytes must stay valid and
 * unchanged until http_wait_borrowed says they are out. Not for chunked
 * responses. 0, or ERR_CLOSED when the client is gone.
 */
int http_write_borrowed(http_req_t *r, const void *data, size_t len);
/*
 * http_respond with a known length, then http_write_borrowed(first, len),
 * queued together so that the head and the first piece leave in one write.
 */
int http_respond_lent(http_req_t *r, int status, const char *headers, int64_t content_length,
                      const void *first, size_t len);
/* Wait until at most at_most borrowed writes are still pending (0: all out, buffers free). */
int http_wait_borrowed(http_req_t *r, int at_most);
/* The same for at most ms milliseconds: 0, ERR_CLOSED, or ERR_AGAIN when more than at_most
 * are still pending then (the client is not taking them). */
int http_wait_borrowed_for(http_req_t *r, int at_most, unsigned ms);
/*
 * Instead of waiting for borrowed bytes to go out: fn(arg, p) frees p once
 * the request is finished, every write of it done or dropped (on the loop
 * thread, after the handler returned; fn must not block). The handler may
 * then return with its borrowed writes still pending, and its worker serves
 * the next request instead of waiting on the socket. Handler thread only.
 */
void http_free_after(http_req_t *r, void (*fn)(void *arg, void *p), void *arg, void *p);
/*
 * Headers every response of this request carries ("Name: value\r\n" lines,
 * copied; call before responding): CORS headers are decided once, early,
 * whatever the handler answers.
 */
void http_add_headers(http_req_t *r, const char *lines);
/* A complete small response in one call. */
int http_respond_full(http_req_t *r, int status, const char *headers, const void *body, size_t len);
/* The response cannot be completed (e.g. storage failed mid-body): close the connection
 * when the handler returns, so the client sees a short body, never a wrong one (a chunked
 * body is left without its last chunk: cut, not ended). */
void http_abort(http_req_t *r);
/*
 * Whose request this is (an access key, once authenticated; up to 63 bytes kept). When
 * clients stalling their requests hold every worker they may, one of the principal holding
 * the most stalled requests is closed first. Default: the client's IP address.
 */
void http_req_set_principal(http_req_t *r, const char *who);
/* Whether the response has been started. */
int http_responded(const http_req_t *r);

#endif
