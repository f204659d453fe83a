/*
 * s3c: a blocking S3 client connection (one TCP connection, keep-alive,
 * one request at a time). Requests are signed with SigV4 (UNSIGNED-PAYLOAD,
 * so large bodies cost no hashing) or sent unsigned for plain HTTP servers.
 * Responses are parsed by llhttp; bodies stream to a caller's sink in the
 * pieces the socket delivers (read in 1 MiB buffers), so a client can read
 * a 64 MiB body without holding it. One s3c_t per thread; not thread-safe.
 *
 * Used by wl-bench; meant to grow into the C client library.
 */
#ifndef WL_S3C_H
#define WL_S3C_H

#include <stddef.h>
#include <stdint.h>

typedef struct s3c s3c_t;

typedef struct {
    const char *endpoint;   /* "http://host:port" (https is not supported) */
    const char *access_key; /* NULL: requests go unsigned */
    const char *secret;
    const char *region;   /* default "us-east-1" */
    int timeout_ms;       /* per socket operation; default 120000 */
    size_t max_body_keep; /* largest body kept for the caller without a sink; default 16 MiB */
} s3c_cfg_t;

typedef struct {
    int status;              /* HTTP status; 0 when the connection failed */
    uint64_t content_length; /* from the header, or the body bytes seen when chunked */
    uint64_t body_bytes;     /* body bytes received */
    uint64_t range_start;    /* Content-Range: bytes START-END/TOTAL, else 0 */
    uint64_t range_total;    /* TOTAL of Content-Range, else the content length */
    int64_t ttfb_ns;         /* request start to the end of the response headers */
    char etag[128];          /* without quotes */
    char code[64];           /* S3 error code of an error body ("" if none) */
    long retry_after;        /* Retry-After seconds, -1 if absent */
    char request_id[128];    /* x-amz-request-id ("" if absent) */
    char last_modified[64];  /* Last-Modified as sent */
    char content_type[128];
    const char *body; /* kept body (no sink given): NUL-terminated, valid until the next call */
    size_t body_len;
} s3c_resp_t;

/* Request body: fill buf with len bytes of the body starting at body offset off. */
typedef void (*s3c_fill_fn)(void *arg, uint64_t off, void *buf, size_t len);
/* Response body piece at body offset off (relative to the body, not the object). */
typedef void (*s3c_sink_fn)(void *arg, uint64_t off, const void *buf, size_t len);

typedef struct {
    const char *method;
    const char *path;  /* URI-encoded "/bucket/key" */
    const char *query; /* without '?', may be NULL */
    const char *const
        *headers; /* NULL-terminated list of "name", "value" pairs, names lower case */
    uint64_t body_len;
    s3c_fill_fn fill; /* body source (required when body_len > 0), or body below */
    void *fill_arg;
    const void *body; /* body bytes when fill is NULL */
    s3c_sink_fn sink; /* NULL: the body is kept in resp->body (up to max_body_keep) */
    void *sink_arg;
    /* A 2xx body lands here instead (sink unused): a Content-Length body is received
       straight into it, no copy. A body larger than dst_cap fails with ERR_TOO_LARGE (the
       connection is dropped). Error bodies are still kept in resp->body. */
    void *dst;
    size_t dst_cap;
} s3c_req_t;

/* Parses the endpoint and resolves it. NULL on a bad endpoint (the reason goes to the log)
   or when memory is short. */
s3c_t *s3c_new(const s3c_cfg_t *cfg);
/* The same with the reason: 0, ERR_INVAL (bad endpoint) or ERR_NOMEM; *out NULL on failure. */
int s3c_open(const s3c_cfg_t *cfg, s3c_t **out) __attribute__((warn_unused_result));
void s3c_free(s3c_t *c);

/*
 * Send one request and read its response. A stale keep-alive connection is
 * reopened and the request retried once when nothing of the response came
 * back. 0 when a response was read (any status), ERR_IO when the connection
 * failed or closed before the response ended (a short body), ERR_INVAL for a
 * response llhttp refuses, ERR_TOO_LARGE when a body does not fit req->dst,
 * ERR_NOMEM when a kept body cannot grow. On any failure the connection is
 * dropped.
 */
int s3c_do(s3c_t *c, const s3c_req_t *req, s3c_resp_t *resp) __attribute__((warn_unused_result));

/*
 * Parse a response held in memory, fed step bytes at a time, as s3c_do
 * would read it from the socket (for tests and fuzzing). 0 when complete,
 * ERR_AGAIN when it ends early, ERR_INVAL when malformed.
 */
int s3c_parse_response(s3c_t *c, const char *data, size_t len, size_t step, int head,
                       s3c_sink_fn sink, void *sink_arg, s3c_resp_t *resp);

/* Drop the connection (the next request opens a new one). */
void s3c_close(s3c_t *c);

/* URI-encode a key for a path ('/' kept) into out; returns the length or -1 if cap is short. */
int s3c_encode_path(const char *in, char *out, size_t cap);
/* The same for a query value ('/' encoded too). */
int s3c_encode_query(const char *in, char *out, size_t cap);

/*
 * Call fn with the text of every <name>...</name> element of an XML body
 * (expat; entity declarations refused). Returns the number of elements or
 * -1 when the body is not well-formed XML.
 */
int s3c_xml_each(const char *body, size_t len, const char *name,
                 void (*fn)(void *arg, const char *text, size_t len), void *arg);
/* The same for several names in one pass over the body: fn learns which (an index into names). */
int s3c_xml_each_of(const char *body, size_t len, const char *const *names, int nnames,
                    void (*fn)(void *arg, int which, const char *text, size_t len), void *arg);

/* Text of the first <name>...</name> element of an XML body into out ("" if absent). */
void s3c_xml_text(const char *body, size_t len, const char *name, char *out, size_t cap);

#endif
