/*
 * http_req: the worker side of a request: what a handler calls (read the
 * body, respond, write, lend buffers), all under the server lock, waking
 * the loop (http__post) to move the bytes. A worker waiting on its client
 * is counted as blocked in the pool (see http_int.h).
 */
#include "server/http_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void stall_begin(http_req_t *r)
{
    if (r->waiting++) return;
    r->wait_ms = http__mono_ms();
    pool_block_begin(r->s->workers);
}

static void stall_end(http_req_t *r)
{
    if (--r->waiting == 0) pool_block_end(r->s->workers);
}

/*
 * Bytes moved lately: each byte counts for less as it ages (half of it after
 * RECENT_HALF_MS), so a steady stream keeps a level and a stall decays to
 * nothing whatever came before it. What eviction compares within the
 * principal it picks (http_guard.c, http__evict_stalled). s->mu held.
 */
#define RECENT_HALF_MS 700.0

double http__recent_bytes(const http_req_t *r, uint64_t now)
{
    double dt = now > r->recent_ms ? (double)(now - r->recent_ms) : 0;
    return r->recent * exp2(-dt / RECENT_HALF_MS);
}

void http__moved(http_req_t *r, size_t n, uint64_t now)
{
    r->recent = http__recent_bytes(r, now) + (double)n;
    r->recent_ms = now;
    r->moved += n;
}

/* Under s->mu: make the loop look at this request. */
void http__post(http_req_t *r)
{
    http_loop_t *l = r->c->l;
    if (!r->in_events) {
        r->in_events = 1;
        r->ev_next = l->events;
        l->events = r;
    }
    uv_async_send(&l->async);
}

long http_body_read(http_req_t *r, void *buf, size_t cap)
{
    http_server_t *s = r->s;
    long n;
    pthread_mutex_lock(&s->mu);
    if (r->expect_continue && !r->want_continue) {
        r->want_continue = 1;
        http__post(r);
    }
    if (r->in_off == r->in_len && !r->body_complete && !r->client_gone && !r->body_error &&
        !r->body_timed_out) {
        stall_begin(r);
        r->body_waiting = 1;
        while (r->in_off == r->in_len && !r->body_complete && !r->client_gone && !r->body_error &&
               !r->body_timed_out)
            pthread_cond_wait(&r->cv, &s->mu);
        r->body_waiting = 0;
        stall_end(r);
    }
    if (r->in_off < r->in_len) {
        n = (long)(r->in_len - r->in_off < cap ? r->in_len - r->in_off : cap);
        memcpy(buf, r->in + r->in_off, (size_t)n);
        r->in_off += (size_t)n;
        if (r->in_off == r->in_len) r->in_off = r->in_len = 0;
        if (r->in_len - r->in_off < LOW_WATER) http__post(r); /* the loop may resume reading */
    } else if (r->body_error) {
        n = ERR_INVAL;
    } else if (r->client_gone) {
        n = ERR_CLOSED;
    } else if (r->body_timed_out && !r->body_complete) {
        n = ERR_TIMEOUT;
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/*
 * A chunk of r's output: len bytes of its own in data[] (filled by the
 * caller before it is queued, with no lock held: a 1 MiB piece was copied
 * under the server's lock), or borrowed ext.
 */
static out_chunk_t *chunk_new(http_req_t *r, const void *ext, size_t len)
{
    out_chunk_t *o = xmalloc(sizeof(*o) + (ext ? 0 : len));
    o->next = NULL;
    o->len = len;
    o->req = r;
    o->ext = ext;
    return o;
}

/* Append o to r's output (s->mu held). */
static void enqueue(http_req_t *r, out_chunk_t *o)
{
    if (r->out_tail)
        r->out_tail->next = o;
    else
        r->out_head = o;
    r->out_tail = o;
    if (!r->out_pending) r->progress_ms = http__mono_ms(); /* the client's turn starts now */
    r->out_pending += o->len;
    if (o->ext) r->borrowed++;
    http__post(r);
}

/*
 * Queue pre, then data, then post (pre and post NUL-terminated, may be NULL)
 * as one piece: a chunk's size line and CRLF go with its bytes, one
 * allocation and one wake of the loop. Waits above the high-water mark.
 */
static int queue_framed(http_req_t *r, const char *pre, const void *data, size_t len,
                        const char *post)
{
    http_server_t *s = r->s;
    size_t pl = pre ? strlen(pre) : 0, ql = post ? strlen(post) : 0;
    int rc = 0;
    out_chunk_t *o = NULL;
    if (pl + len + ql) {
        o = chunk_new(r, NULL, pl + len + ql);
        if (pl) memcpy(o->data, pre, pl);
        if (len) memcpy(o->data + pl, data, len);
        if (ql) memcpy(o->data + pl + len, post, ql);
    }
    pthread_mutex_lock(&s->mu);
    if (r->out_pending > HTTP_HIGH_WATER && !r->client_gone) {
        stall_begin(r);
        while (r->out_pending > HTTP_HIGH_WATER && !r->client_gone)
            pthread_cond_wait(&r->cv, &s->mu);
        stall_end(r);
    }
    if (r->client_gone)
        rc = ERR_CLOSED;
    else if (o)
        enqueue(r, o);
    pthread_mutex_unlock(&s->mu);
    if (rc) free(o);
    return rc;
}

static int queue_out(http_req_t *r, const void *data, size_t len)
{
    return queue_framed(r, NULL, data, len, NULL);
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Payload Too Large";
    case 416:
        return "Range Not Satisfiable";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    case 507:
        return "Insufficient Storage";
    default:
        return "Status";
    }
}

/* The most a response head may take (S3 heads stay far below; a bigger one is a bug). */
#define HEAD_MAX (64u << 10)

/*
 * The head, and body (when not NULL: content_length bytes) in the same
 * chunk: a small response is one queued chunk, one wake of the loop and
 * one write on the socket.
 */
static int respond(http_req_t *r, int status, const char *headers, int64_t content_length,
                   const void *body, const void *lend, size_t lend_len)
{
    char date[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    /* Too long a head is refused before anything is marked sent: the caller (or the worker,
     * with a 500 without the extra headers) still answers. */
    size_t hl = (headers ? strlen(headers) : 0) + (r->extra ? strlen(r->extra) : 0);
    if (hl >= HEAD_MAX - 256) return ERR_TOO_LARGE;
    size_t blen = body ? (size_t)content_length : 0, cap = hl + 256;
    out_chunk_t *o = chunk_new(r, NULL, cap + blen); /* head and body, formatted in place */
    char *head = o->data;
    pthread_mutex_lock(&r->s->mu);
    r->responded = 1;
    /* HTTP/1.0 has no chunked coding (RFC 9112 6.1): a body of unknown length is delimited by
     * the connection's close instead. */
    r->chunked = content_length < 0 && !r->http10;
    if (content_length < 0 && r->http10) r->close_after = 1;
    /*
     * A client that sent "Expect: 100-continue" with an empty body still
     * waits for the interim response (botocore reads the next response on a
     * reused connection wrongly otherwise): send it before the final one.
     */
    if (r->expect_continue && r->body_complete && !r->want_continue) {
        r->want_continue = 1;
        http__post(r);
    }
    /* A body we did not read to the end cannot be skipped safely: close after. Nor can a
     * 411's: the client meant a body it did not frame, and its bytes must not be read as
     * the next request (a signed PUT inside one ran: hostile probe). */
    if (!r->body_complete || status == 411) r->close_after = 1;
    if (status == 411) r->linger_after = 1; /* its body is likely still coming: lingering close */
    int keep =
        r->keep_alive && !r->close_after && !__atomic_load_n(&r->s->stopping, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&r->s->mu);
    int n = snprintf(head, cap, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: warmlake\r\n%s%s", status,
                     reason(status), date, headers ? headers : "", r->extra ? r->extra : "");
    /* None on a 204 or a 304 (RFC 9110 8.6): a 304's would have to be the length a 200
     * would have sent, and "0" told caches the representation had become empty. */
    if (content_length >= 0 && status != 204 && status != 304)
        n += snprintf(head + n, cap - (size_t)n, "Content-Length: %lld\r\n",
                      (long long)content_length);
    else if (r->chunked)
        n += snprintf(head + n, cap - (size_t)n, "Transfer-Encoding: chunked\r\n");
    n += snprintf(head + n, cap - (size_t)n, "Connection: %s\r\n\r\n",
                  keep ? "keep-alive" : "close");
    if (!keep) {
        pthread_mutex_lock(&r->s->mu);
        r->close_after = 1;
        pthread_mutex_unlock(&r->s->mu);
    }
    if (blen) memcpy(head + n, body, blen);
    /*
     * Nothing is queued before the head (a 100 Continue is not counted), so no high-water
     * wait. A lent first piece is queued under the same lock: the loop takes both in one
     * turn and writes them as one (a head on its own is a segment and a client wake).
     */
    o->len = (size_t)n + blen;
    out_chunk_t *lent = lend_len ? chunk_new(r, lend, lend_len) : NULL;
    int rc = 0;
    pthread_mutex_lock(&r->s->mu);
    if (r->client_gone) {
        rc = ERR_CLOSED;
    } else {
        enqueue(r, o);
        if (lent) enqueue(r, lent);
    }
    pthread_mutex_unlock(&r->s->mu);
    if (rc) {
        free(o);
        free(lent);
    }
    return rc;
}

int http_respond(http_req_t *r, int status, const char *headers, int64_t content_length)
{
    return respond(r, status, headers, content_length, NULL, NULL, 0);
}

int http_respond_lent(http_req_t *r, int status, const char *headers, int64_t content_length,
                      const void *first, size_t len)
{
    if (content_length < 0 || (uint64_t)len > (uint64_t)content_length) return ERR_INVAL;
    return respond(r, status, headers, content_length, NULL, first, len);
}

int http_write(http_req_t *r, const void *data, size_t len)
{
    if (!r->chunked || len == 0) return len ? queue_out(r, data, len) : 0;
    /* One queued piece per chunk (a batch GET writes many small chunks). */
    char hdr[32];
    snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
    return queue_framed(r, hdr, data, len, "\r\n");
}

int http_write_borrowed(http_req_t *r, const void *data, size_t len)
{
    http_server_t *s = r->s;
    if (r->chunked) return ERR_INVAL;
    if (!len) return 0;
    out_chunk_t *o = chunk_new(r, data, len);
    pthread_mutex_lock(&s->mu);
    if (r->client_gone) {
        pthread_mutex_unlock(&s->mu);
        free(o);
        return ERR_CLOSED;
    }
    enqueue(r, o);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/*
 * Wait until at most at_most borrowed writes of r are pending; with a deadline (NULL: none),
 * ERR_AGAIN once it passes first.
 */
static int wait_borrowed(http_req_t *r, int at_most, const struct timespec *until)
{
    http_server_t *s = r->s;
    int timed_out = 0;
    pthread_mutex_lock(&s->mu);
    if (r->borrowed > at_most) stall_begin(r);
    while (r->borrowed > at_most && !timed_out) {
        if (r->client_gone) {
            /* Queued chunks never reach libuv now: drop them here. */
            for (out_chunk_t **pp = &r->out_head; *pp;) {
                out_chunk_t *o = *pp;
                if (!o->ext) {
                    pp = &o->next;
                    continue;
                }
                *pp = o->next;
                r->out_pending -= o->len;
                r->borrowed--;
                free(o);
            }
            r->out_tail = NULL;
            for (out_chunk_t *o = r->out_head; o; o = o->next)
                r->out_tail = o;
            if (r->borrowed <= at_most) break;
        }
        if (!until)
            pthread_cond_wait(&r->cv, &s->mu);
        else if (pthread_cond_timedwait(&r->cv, &s->mu, until) == ETIMEDOUT)
            timed_out = r->borrowed > at_most && !r->client_gone;
    }
    if (r->waiting) stall_end(r);
    int rc = r->client_gone ? ERR_CLOSED : timed_out ? ERR_AGAIN : 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int http_wait_borrowed(http_req_t *r, int at_most)
{
    return wait_borrowed(r, at_most, NULL);
}

int http_wait_borrowed_for(http_req_t *r, int at_most, unsigned ms)
{
    /* The condition variable's clock: a jump of it only makes this wait longer or shorter. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return wait_borrowed(r, at_most, &until);
}

int http_respond_full(http_req_t *r, int status, const char *headers, const void *body, size_t len)
{
    return respond(r, status, headers, (int64_t)len, len ? body : NULL, NULL, 0);
}

void http_free_after(http_req_t *r, void (*fn)(void *arg, void *p), void *arg, void *p)
{
    /* Only the handler touches r->after until handler_done hands r to the loop (s->mu). */
    http_after_t *a = xmalloc(sizeof(*a));
    *a = (http_after_t){r->after, fn, arg, p};
    r->after = a;
}

void http_abort(http_req_t *r)
{
    pthread_mutex_lock(&r->s->mu);
    r->close_after = 1;
    r->aborted = 1;
    pthread_mutex_unlock(&r->s->mu);
}

int http_responded(const http_req_t *r)
{
    return r->responded;
}

/* A request's turn on a worker: its handler, then the end of its response. */
void http__run_handler(pool_job_t *j)
{
    http_req_t *r = (http_req_t *)j;
    http_server_t *s = r->s;
    __atomic_store_n(&r->running, 1, __ATOMIC_RELEASE);
    s->cfg.handler(s->cfg.arg, r, &r->info);
    log_debug("event=handled method=%s target=%.80s peer=%s req=%s", r->info.method, r->info.target,
              r->info.peer, r->id);
    if (!r->responded) {
        /* The handler could not answer (its head was refused, say): a bare 500, and the
         * connection closes, so no later response can be taken for this one's. */
        free(r->extra);
        r->extra = NULL;
        http_abort(r);
        (void)http_respond_full(r, 500, NULL, NULL, 0);
    }
    /* An aborted chunked body stays unterminated: its client sees a cut, not an end. */
    if (r->chunked && !r->aborted) (void)queue_out(r, "0\r\n\r\n", 5);
    pthread_mutex_lock(&s->mu);
    r->handler_done = 1; /* the worker never touches r again */
    http__post(r);
    pthread_mutex_unlock(&s->mu);
}

/* The pool is at its bound with work waiting (any thread, no pool lock held). */
void http__on_saturated(void *arg)
{
    http_server_t *s = arg;
    __atomic_store_n(&s->evict, 1, __ATOMIC_RELEASE);
    /* Any loop looks across them all (http__evict_stalled): the first still running (s->mu
     * may be held here: stall_begin). */
    for (int i = 0; i < s->nloops; i++)
        if (!__atomic_load_n(&s->loops[i].ended, __ATOMIC_ACQUIRE) || i == s->nloops - 1) {
            uv_async_send(&s->loops[i].async);
            break;
        }
}

void http_add_headers(http_req_t *r, const char *lines)
{
    size_t old = r->extra ? strlen(r->extra) : 0, add = strlen(lines);
    r->extra = xrealloc(r->extra, old + add + 1);
    memcpy(r->extra + old, lines, add + 1);
}
