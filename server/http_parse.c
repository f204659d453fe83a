/*
 * http_parse: reading and parsing requests on the loop thread: llhttp's
 * callbacks (with http_head's), a request handed to a worker once its head is
 * in, its body buffered for the worker under the high-water mark, reading
 * paused and resumed, the client's EOF, and request ids.
 */
#include "server/http_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* The parser's data is the connection's head (for http_head's callbacks); its owner the conn. */
static conn_t *conn_of(llhttp_t *p)
{
    return ((http_head_t *)p->data)->owner;
}

static int on_message_begin(llhttp_t *p)
{
    conn_t *c = conn_of(p);
    http_head_reset(&c->head);
    c->continue_sent = 0;
    c->begun = 1;
    c->msg_begin = http__now_ms(c->l);
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    conn_t *c = conn_of(p);
    http_server_t *s = c->s;
    /* HTTP/2.0 in an HTTP/1 request line is not HTTP/1 to be served as if it were: the parse
     * fails here and the connection gets a 505 (RFC 9110 15.6.6). */
    if (p->http_major != 1) {
        c->bad_version = 1;
        return -1;
    }
    /* An offer to switch protocols (Upgrade: h2c, websocket) is declined by ignoring it (RFC
     * 9110 7.8): served as HTTP/1.1, and so is the next request on the connection. Left to
     * llhttp, what followed was another protocol's: the next request got 400 (a probe: curl
     * --http2 on an http:// URL, two requests). */
    if (p->method != HTTP_CONNECT) p->upgrade = 0;
    http_req_t *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->s = s;
    pthread_cond_init(&r->cv, NULL);
    http_head_view_t v;
    http_head_view(&c->head, &v);
    r->hcopy = v.copy;
    memcpy(r->headers, v.headers, sizeof(v.headers[0]) * (size_t)v.nheaders);
    r->info.method = llhttp_method_name((llhttp_method_t)p->method);
    r->info.target = v.target;
    r->info.peer = c->peer;
    /* Until the handler names it: the client's address, without its port. */
    const char *colon = strrchr(c->peer, ':');
    snprintf(r->principal, sizeof(r->principal), "%.*s",
             (int)(colon ? (size_t)(colon - c->peer) : strlen(c->peer)), c->peer);
    r->info.content_length = v.content_length;
    r->expect_continue = v.expect_continue && p->http_minor >= 1; /* (1.0: ignored, 10.1.1) */
    r->info.headers = r->headers;
    r->info.nheaders = v.nheaders;
    http__new_request_id(r->id);
    r->info.id = r->id;
    r->keep_alive = llhttp_should_keep_alive(p);
    r->http10 = p->http_minor == 0;
    /*
     * No body at all: complete now, before the handler starts. Waiting for
     * on_message_complete raced with a fast handler, whose response then
     * saw an unfinished body and closed a healthy keep-alive connection.
     */
    if (!(p->flags & F_CHUNKED) && !((p->flags & F_CONTENT_LENGTH) && p->content_length > 0))
        r->body_complete = 1;
    c->req = r;
    c->refs++;
    pthread_mutex_lock(&s->mu); /* seen by every loop's eviction from now on */
    r->next = s->reqs;
    if (s->reqs) s->reqs->prev = r;
    s->reqs = r;
    pthread_mutex_unlock(&s->mu);
    r->progress_ms = r->start_ms = http__mono_ms();
    r->job.run = http__run_handler;
    /* Handed to a worker once this read's bytes are parsed (submit_pending). */
    c->to_submit = r;
    return 0;
}

/*
 * The request whose head this read completed goes to a worker only after the
 * rest of the read is parsed: a small body that came with its head (a 4 KiB
 * PUT) is then in r->in when the handler starts, which reads it without
 * waiting, and the loop has no waiting worker to wake per body piece
 * (measured: a third of the futex calls of a 4 KiB PUT were that wait and
 * those wakes). A body still coming is read as before.
 */
static void submit_pending(conn_t *c)
{
    http_req_t *r = c->to_submit;
    if (!r) return;
    c->to_submit = NULL;
    pool_job_t *j = &r->job;
    pool_submit(c->s->workers, &j, 1, NULL);
}

/* Move the unconsumed inbound bytes to the front of the buffer (s->mu held). */
static void inbound_compact(http_req_t *r)
{
    if (!r->in_off) return;
    memmove(r->in, r->in + r->in_off, r->in_len - r->in_off);
    r->in_len -= r->in_off;
    r->in_off = 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    conn_t *c = conn_of(p);
    http_req_t *r = c->req;
    pthread_mutex_lock(&c->s->mu);
    int in_place = r->in && (const uint8_t *)at >= r->in && (const uint8_t *)at < r->in + r->in_cap;
    if (in_place) {
        /* Read in place (body_alloc); moved only if the handler emptied the buffer meanwhile. */
        if ((const uint8_t *)at != r->in + r->in_len) memmove(r->in + r->in_len, at, len);
    } else if (r->in_len + len > r->in_cap) {
        inbound_compact(r); /* grow only past what is already consumed */
        if (r->in_len + len > r->in_cap) {
            r->in_cap = r->in_len + len + READ_BUF;
            r->in = xrealloc(r->in, r->in_cap);
        }
    }
    if (!in_place) memcpy(r->in + r->in_len, at, len);
    r->in_len += len;
    r->progress_ms = http__mono_ms();
    http__moved(r, len, r->progress_ms);
    int full = r->in_len - r->in_off >= HTTP_HIGH_WATER;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&c->s->mu);
    if (full && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    conn_t *c = conn_of(p);
    http_req_t *r = c->req;
    pthread_mutex_lock(&c->s->mu);
    r->body_complete = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&c->s->mu);
    /* One request at a time per connection: wait for its response. */
    c->paused = 1;
    return HPE_PAUSED;
}

static uint64_t salt;
static pthread_once_t salt_once = PTHREAD_ONCE_INIT;

static void salt_init(void)
{
    if (getrandom(&salt, sizeof(salt), 0) != (ssize_t)sizeof(salt))
        salt = ((uint64_t)getpid() << 40) ^ (uint64_t)time(NULL);
}

void http__new_request_id(char id[17])
{
    /* Any loop. The salt, random per process: two nodes started together gave their
     * requests the same ids (a cluster probe), ambiguous in logs and error bodies. */
    static uint64_t counter;
    pthread_once(&salt_once, salt_init);
    uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(id, 17, "%016llX", (unsigned long long)((n ^ ((uint64_t)time(NULL) << 24)) + salt));
}

/* Whether the request being received has a full inbound buffer (reading must wait). */
static int inbound_full(conn_t *c)
{
    int full = 0;
    if (c->req) {
        pthread_mutex_lock(&c->s->mu);
        full = c->req->in_len - c->req->in_off >= HTTP_HIGH_WATER;
        pthread_mutex_unlock(&c->s->mu);
    }
    return full;
}

static void parse_pass(conn_t *c);

/* Feed the pending bytes to the parser until it pauses or runs dry; then start the request. */
void http__parse_more(conn_t *c)
{
    parse_pass(c);
    submit_pending(c);
}

static void parse_pass(conn_t *c)
{
    while (!c->closing && !c->paused && c->pend_len > c->pend_off) {
        const char *start = c->pend + c->pend_off;
        size_t len = c->pend_len - c->pend_off;
        llhttp_errno_t e = llhttp_execute(&c->parser, start, len);
        if (e == HPE_OK) {
            c->pend_off = c->pend_len;
        } else if (e == HPE_PAUSED) {
            const char *pos = llhttp_get_error_pos(&c->parser);
            c->pend_off += (size_t)(pos - start);
            c->paused = 1;
        } else {
            http_req_t *r = c->req;
            if (r) {
                /* A request is being handled: its body is malformed. */
                pthread_mutex_lock(&c->s->mu);
                r->body_error = 1;
                r->close_after = 1;
                pthread_cond_broadcast(&r->cv);
                pthread_mutex_unlock(&c->s->mu);
                c->pend_off = c->pend_len;
                c->paused = 1;
                return;
            }
            /* Versions llhttp does not know (HTTP/3.0, HTTP/1.2) are no more served than
             * HTTP/2.0; a version that is not one at all (HTTP/1.10) is a bad request. */
            const char *reason = llhttp_get_error_reason(&c->parser);
            if (e == HPE_INVALID_VERSION && reason && strcmp(reason, "Invalid HTTP version") == 0)
                c->bad_version = 1;
            log_info("event=http_parse_error peer=%s reason=\"%s\"", c->peer,
                     reason            ? reason
                     : c->head.too_big ? "header too large"
                                       : "none given");
            if (c->head.too_big) {
                /* S3's answer (not HTTP's 431): 400 with the limit in the body. */
                char extra[64];
                snprintf(extra, sizeof(extra), "<MaxSizeAllowed>%zu</MaxSizeAllowed>", c->head.max);
                http__answer_early(c, "400 Bad Request", "RequestHeaderSectionTooLarge",
                                   "Your request header section exceeds the maximum allowed size.",
                                   extra);
            } else if (c->bad_version) {
                http__answer_early(c, "505 HTTP Version Not Supported", "HttpVersionNotSupported",
                                   "The HTTP version specified is not supported.", "");
            } else {
                http__answer_early(c, "400 Bad Request", "BadRequest",
                                   "The request is not well-formed HTTP/1.1.", "");
            }
            return;
        }
    }
    if (c->pend_off >= c->pend_len) c->pend_off = c->pend_len = 0;
    /* Read more unless paused with a request in hand or its buffer is full. */
    if (!c->closing && !c->paused && !c->reading && !inbound_full(c)) http__start_reading(c);
    /*
     * Paused with a request whose body is in: reading goes on (what comes is kept in pend, up
     * to its size; on_read stops there), so that each request does not cost a uv_read_stop and
     * a uv_read_start, two epoll_ctl calls on the loop (6% of its time at 32 clients of 4 KiB
     * PUTs, where the loop is the bottleneck). An EOF meanwhile answers first (on_read).
     */
    if (c->paused && c->reading && !c->req) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
}

/*
 * While a request's Content-Length body is being received and nothing read
 * is left unparsed, the socket is read straight into the request's inbound
 * buffer: the loop thread, which every connection shares, then parses body
 * bytes (llhttp only counts them down) without also copying each one from
 * its read buffer. Measured: a single PUT stream had the loop thread at 100%
 * CPU with a fifth of it in that copy.
 */
static int body_alloc(conn_t *c, uv_buf_t *buf)
{
    http_req_t *r = c->req;
    uint64_t left = c->parser.content_length;
    if (!r || c->paused || c->lingering || c->pend_off != c->pend_len ||
        (c->parser.flags & F_CHUNKED) || left == 0)
        return 0;
    pthread_mutex_lock(&c->s->mu);
    if (r->body_complete) {
        pthread_mutex_unlock(&c->s->mu);
        return 0;
    }
    if (r->in_off == r->in_len || r->in_cap - r->in_len < READ_BUF) inbound_compact(r);
    /* Room for the rest of the body, up to HTTP_HIGH_WATER: a 4 KiB PUT does not get 1 MiB. */
    size_t want = HTTP_HIGH_WATER;
    if (left < HTTP_HIGH_WATER && r->in_len + left < HTTP_HIGH_WATER)
        want = r->in_len + (size_t)left;
    if (r->in_cap < want) {
        r->in_cap = want;
        r->in = xrealloc(r->in, r->in_cap);
    }
    size_t room = r->in_cap - r->in_len;
    c->direct = room >= READ_BUF || room >= left ? (char *)r->in + r->in_len : NULL;
    pthread_mutex_unlock(&c->s->mu);
    if (!c->direct) return 0;
    *buf = uv_buf_init(c->direct, (unsigned)(room < left ? room : left));
    return 1;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)hint;
    c->direct = NULL;
    if (body_alloc(c, buf)) return;
    /* Append to the pending buffer so a paused parse resumes where it stopped. */
    if (c->pend_off && c->pend_off == c->pend_len) c->pend_off = c->pend_len = 0;
    if (!c->pend) c->pend = xmalloc(READ_BUF * 2);
    if (c->pend_off && READ_BUF * 2 - c->pend_len < READ_BUF) {
        memmove(c->pend, c->pend + c->pend_off, c->pend_len - c->pend_off);
        c->pend_len -= c->pend_off;
        c->pend_off = 0;
    }
    size_t room = READ_BUF * 2 - c->pend_len;
    *buf = uv_buf_init(c->pend + c->pend_len, (unsigned)room);
}

/*
 * EOF from a client whose request's body has not all come (a malformed
 * chunked body the parser gave up on, or one cut short), after which it may
 * still be reading: the handler is told the body is bad (it answers 400) and
 * reading stops; req_finish closes once the answer is out. Closing at once
 * left such a client with no answer at all. 0 when the body was complete
 * (nothing is owed a client that left between requests).
 */
int http__body_cut_short(conn_t *c)
{
    http_req_t *r = c->req;
    pthread_mutex_lock(&c->s->mu);
    int cut = !r->body_complete;
    if (cut) {
        r->body_error = 1;
        r->close_after = 1;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&c->s->mu);
    if (!cut) return 0;
    c->peer_eof = 1;
    c->paused = 1; /* nothing more to parse: nothing restarts reading */
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
    return 1;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    conn_t *c = st->data;
    (void)buf;
    if (n == UV_EOF && c->req && !c->lingering && http__body_cut_short(c)) return;
    if (n == UV_EOF && c->req && !c->lingering && !c->closing) {
        /* The client is done sending, and its request is being answered: answer it (and what
         * it sent before), then close (req_finish). */
        c->peer_eof = 1;
        uv_read_stop(st);
        c->reading = 0;
        return;
    }
    if (n < 0) {
        http__conn_close(c);
        return;
    }
    if (c->lingering) {
        c->pend_off = c->pend_len = 0; /* dropped */
        c->linger_bytes += (uint64_t)n;
        if (c->linger_bytes > c->linger_max) http__conn_close(c);
        return;
    }
    c->last_activity = http__now_ms(c->l);
    if (c->direct) {
        /* Body bytes in place: the parser sees them where they are (on_body keeps them). */
        char *at = c->direct;
        c->direct = NULL;
        llhttp_errno_t e = n ? llhttp_execute(&c->parser, at, (size_t)n) : HPE_OK;
        if (e == HPE_PAUSED) c->paused = 1; /* the message is complete */
        /* Nothing else can fail inside a Content-Length body. */
        http__parse_more(c);
        return;
    }
    c->pend_len += (size_t)n;
    if (c->pend_len == READ_BUF * 2 && c->paused) {
        /* Buffer full while waiting for a response: stop reading. */
        uv_read_stop(st);
        c->reading = 0;
    }
    http__parse_more(c);
}

void http__start_reading(conn_t *c)
{
    if (c->reading || c->closing || c->peer_eof) return;
    if (c->pend && c->pend_len - c->pend_off >= READ_BUF) return; /* plenty unparsed already */
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = 1;
}

/* The parser's callbacks, the same for every connection. */
static llhttp_settings_t settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static void settings_init(void)
{
    llhttp_settings_init(&settings);
    http_head_callbacks(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
}

void http__parser_init(conn_t *c)
{
    pthread_once(&settings_once, settings_init);
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
}
