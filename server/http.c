#include "server/http.h"
#include "server/http_head.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <llhttp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <uv.h>

#define READ_BUF  65536
#define LOW_WATER (HTTP_HIGH_WATER / 4)

typedef struct out_chunk {
    struct out_chunk *next;
    size_t len;
    uv_write_t wr;
    struct http_req *req;
    const char *ext; /* borrowed bytes (http_write_borrowed); NULL: data[] */
    char data[];
} out_chunk_t;

typedef struct conn conn_t;

struct http_req {
    conn_t *c;
    http_server_t *s;
    struct http_req_info info;
    http_header_t headers[HTTP_MAX_HEADERS];
    char *hcopy;
    char id[17];
    pthread_cond_t cv;
    /* Shared with the loop, under s->mu. */
    uint8_t *in;
    size_t in_off, in_len, in_cap;
    int body_complete, body_error, client_gone;
    int expect_continue, want_continue;
    out_chunk_t *out_head, *out_tail; /* queued, not yet handed to uv_write */
    size_t out_pending;               /* queued + in flight */
    int borrowed;                     /* borrowed chunks not yet written or dropped */
    int nwrites;                      /* uv_writes not yet called back */
    int handler_done, responded, chunked, keep_alive, close_after;
    int in_events;
    /*
     * Stalls: waiting > 0 while the worker is blocked on the client (body
     * bytes to arrive, response bytes to be taken), since wait_ms; progress_ms
     * is when a byte last moved. The loop's timer closes a request stalled
     * for io_ms (s->mu).
     */
    int waiting;
    uint64_t wait_ms, progress_ms;
    struct http_req *ev_next, *job_next;
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    http_server_t *s;
    llhttp_t parser;
    http_head_t head;     /* the request head being received */
    struct http_req *req; /* being received or handled */
    char *pend;           /* bytes read but not parsed (parser paused) */
    size_t pend_off, pend_len;
    char *direct; /* the read in progress goes here, in c->req's inbound buffer */
    int reading, closing, refs, paused, continue_sent;
    /*
     * Lingering close: after answering a request whose body was not read
     * (an early error), the write side is shut and what the client still
     * sends is read and dropped for a while, so its stack does not answer
     * our FIN with a reset that destroys the response before it is read.
     */
    int lingering;
    uint64_t linger_until, linger_bytes;
    uv_shutdown_t shutdown;
    uint64_t last_activity, msg_begin, last_done;
    char peer[64];
    struct conn *next, *prev;
};

struct http_server {
    http_cfg_t cfg;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t async;
    pthread_mutex_t mu;
    pthread_cond_t job_cv, exit_cv;
    struct http_req *jobs_head, *jobs_tail, *events;
    /*
     * Workers (s->mu): nthreads run, idle of them wait for a job, stalled of
     * them are blocked on a client, queued jobs wait for a worker. A worker
     * stalled on its client does not count against cfg.workers: another
     * thread is started for queued work, up to cfg.workers + cfg.max_stalled
     * threads; at that bound the longest-stalled connection is closed
     * (evict). Threads beyond cfg.workers end after a while idle.
     */
    int nthreads, idle, stalled, queued, evict;
    int stopping, stop_requested, nconns, port, workers_exit;
    conn_t *conns;
};

static llhttp_settings_t settings;

static uint64_t now_ms(http_server_t *s)
{
    return uv_now(&s->loop);
}

/* A clock both the loop and the workers read (uv_now is the loop's only). */
static uint64_t mono_ms(void)
{
    return uv_hrtime() / 1000000u;
}

static void *worker_main(void *arg);

/* Start one more worker thread (s->mu held). */
static int spawn_worker(http_server_t *s)
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, worker_main, s);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        log_error("event=worker_start_failed errno=%d threads=%d", rc, s->nthreads);
        return ERR_NOMEM;
    }
    pthread_setname_np(t, "wl-http"); /* names show in top -H and perf */
    s->nthreads++;
    return 0;
}

/*
 * Queued work and no idle worker for it while workers sit blocked on slow
 * clients: start another thread, or at the bound have the loop close the
 * longest-stalled connection (s->mu held).
 */
static void maybe_grow(http_server_t *s)
{
    while (s->queued > s->idle && s->stalled > 0 && !s->workers_exit &&
           s->nthreads - s->idle - s->stalled < s->cfg.workers) {
        if (s->nthreads >= s->cfg.workers + s->cfg.max_stalled || spawn_worker(s) != 0) {
            if (!s->evict) {
                s->evict = 1;
                uv_async_send(&s->async);
            }
            return;
        }
        s->idle++; /* the new thread takes a job before it counts as busy */
    }
}

/* The worker of r blocks on its client (s->mu held); stall_end when it wakes for good. */
static void stall_begin(http_req_t *r)
{
    if (r->waiting++) return;
    r->wait_ms = mono_ms();
    r->s->stalled++;
    maybe_grow(r->s);
}

static void stall_end(http_req_t *r)
{
    if (--r->waiting == 0) r->s->stalled--;
}

/* ---- worker side ---- */

/* Under s->mu: make the loop look at this request. */
static void post(http_req_t *r)
{
    if (!r->in_events) {
        r->in_events = 1;
        r->ev_next = r->s->events;
        r->s->events = r;
    }
    uv_async_send(&r->s->async);
}

long http_body_read(http_req_t *r, void *buf, size_t cap)
{
    http_server_t *s = r->s;
    long n;
    pthread_mutex_lock(&s->mu);
    if (r->expect_continue && !r->want_continue) {
        r->want_continue = 1;
        post(r);
    }
    if (r->in_off == r->in_len && !r->body_complete && !r->client_gone && !r->body_error) {
        stall_begin(r);
        while (r->in_off == r->in_len && !r->body_complete && !r->client_gone && !r->body_error)
            pthread_cond_wait(&r->cv, &s->mu);
        stall_end(r);
    }
    if (r->in_off < r->in_len) {
        n = (long)(r->in_len - r->in_off < cap ? r->in_len - r->in_off : cap);
        memcpy(buf, r->in + r->in_off, (size_t)n);
        r->in_off += (size_t)n;
        if (r->in_off == r->in_len) r->in_off = r->in_len = 0;
        if (r->in_len - r->in_off < LOW_WATER) post(r); /* the loop may resume reading */
    } else if (r->body_error) {
        n = ERR_INVAL;
    } else if (r->client_gone) {
        n = ERR_CLOSED;
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Append a chunk of len bytes (own copy in data[], or borrowed ext) to r's output (s->mu held). */
static out_chunk_t *enqueue(http_req_t *r, const void *ext, size_t len)
{
    out_chunk_t *o = xmalloc(sizeof(*o) + (ext ? 0 : len));
    o->next = NULL;
    o->len = len;
    o->req = r;
    o->ext = ext;
    if (r->out_tail)
        r->out_tail->next = o;
    else
        r->out_head = o;
    r->out_tail = o;
    if (!r->out_pending) r->progress_ms = mono_ms(); /* the client's turn starts now */
    r->out_pending += len;
    if (ext) r->borrowed++;
    post(r);
    return o;
}

static int queue_out(http_req_t *r, const void *data, size_t len)
{
    http_server_t *s = r->s;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (r->out_pending > HTTP_HIGH_WATER && !r->client_gone) {
        stall_begin(r);
        while (r->out_pending > HTTP_HIGH_WATER && !r->client_gone)
            pthread_cond_wait(&r->cv, &s->mu);
        stall_end(r);
    }
    if (r->client_gone) {
        rc = ERR_CLOSED;
    } else if (len) {
        memcpy(enqueue(r, NULL, len)->data, data, len); /* the loop runs it only after s->mu */
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
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
    case 507:
        return "Insufficient Storage";
    default:
        return "Status";
    }
}

int http_respond(http_req_t *r, int status, const char *headers, int64_t content_length)
{
    char head[8192], date[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    pthread_mutex_lock(&r->s->mu);
    r->responded = 1;
    r->chunked = content_length < 0;
    /*
     * A client that sent "Expect: 100-continue" with an empty body still
     * waits for the interim response (botocore reads the next response on a
     * reused connection wrongly otherwise): send it before the final one.
     */
    if (r->expect_continue && r->body_complete && !r->want_continue) {
        r->want_continue = 1;
        post(r);
    }
    /* A body we did not read to the end cannot be skipped safely: close after. */
    if (!r->body_complete) r->close_after = 1;
    int keep = r->keep_alive && !r->close_after && !r->s->stopping;
    pthread_mutex_unlock(&r->s->mu);
    int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: warmlake\r\n%s",
                     status, reason(status), date, headers ? headers : "");
    if (n < 0 || (size_t)n >= sizeof(head) - 128) return ERR_TOO_LARGE;
    if (content_length >= 0)
        n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Length: %lld\r\n",
                      (long long)content_length);
    else
        n += snprintf(head + n, sizeof(head) - (size_t)n, "Transfer-Encoding: chunked\r\n");
    n += snprintf(head + n, sizeof(head) - (size_t)n, "Connection: %s\r\n\r\n",
                  keep ? "keep-alive" : "close");
    if (!keep) {
        pthread_mutex_lock(&r->s->mu);
        r->close_after = 1;
        pthread_mutex_unlock(&r->s->mu);
    }
    return queue_out(r, head, (size_t)n);
}

int http_write(http_req_t *r, const void *data, size_t len)
{
    if (!r->chunked || len == 0) return len ? queue_out(r, data, len) : 0;
    char hdr[32];
    int n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
    int rc = queue_out(r, hdr, (size_t)n);
    if (!rc) rc = queue_out(r, data, len);
    if (!rc) rc = queue_out(r, "\r\n", 2);
    return rc;
}

int http_write_borrowed(http_req_t *r, const void *data, size_t len)
{
    http_server_t *s = r->s;
    if (r->chunked) return ERR_INVAL;
    if (!len) return 0;
    pthread_mutex_lock(&s->mu);
    if (r->client_gone) {
        pthread_mutex_unlock(&s->mu);
        return ERR_CLOSED;
    }
    enqueue(r, data, len);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int http_wait_borrowed(http_req_t *r, int at_most)
{
    http_server_t *s = r->s;
    pthread_mutex_lock(&s->mu);
    if (r->borrowed > at_most) stall_begin(r);
    while (r->borrowed > at_most) {
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
        pthread_cond_wait(&r->cv, &s->mu);
    }
    if (r->waiting) stall_end(r);
    int rc = r->client_gone ? ERR_CLOSED : 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int http_respond_full(http_req_t *r, int status, const char *headers, const void *body, size_t len)
{
    int rc = http_respond(r, status, headers, (int64_t)len);
    if (!rc && len) rc = queue_out(r, body, len);
    return rc;
}

void http_abort(http_req_t *r)
{
    pthread_mutex_lock(&r->s->mu);
    r->close_after = 1;
    pthread_mutex_unlock(&r->s->mu);
}

int http_responded(const http_req_t *r)
{
    return r->responded;
}

#define SPARE_WORKER_MS 10000 /* a thread beyond cfg.workers ends after this long idle */

static void *worker_main(void *arg)
{
    http_server_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* Counted idle already: by maybe_grow for a new thread, below for the others. */
        while (!s->jobs_head && !s->workers_exit) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += SPARE_WORKER_MS / 1000;
            if (pthread_cond_timedwait(&s->job_cv, &s->mu, &ts) != 0 && !s->jobs_head &&
                s->nthreads > s->cfg.workers)
                break;
        }
        if (!s->jobs_head) break;
        http_req_t *r = s->jobs_head;
        s->jobs_head = r->job_next;
        if (!s->jobs_head) s->jobs_tail = NULL;
        s->queued--;
        s->idle--;
        pthread_mutex_unlock(&s->mu);
        s->cfg.handler(s->cfg.arg, r, &r->info);
        log_debug("event=handled method=%s target=%.80s peer=%s req=%s", r->info.method,
                  r->info.target, r->info.peer, r->id);
        if (!r->responded) (void)http_respond_full(r, 500, NULL, NULL, 0);
        if (r->chunked) (void)queue_out(r, "0\r\n\r\n", 5);
        pthread_mutex_lock(&s->mu);
        r->handler_done = 1;
        post(r);
        s->idle++;
    }
    s->idle--;
    s->nthreads--;
    pthread_cond_broadcast(&s->exit_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- loop side ---- */

static void conn_close(conn_t *c);

static void conn_unref(conn_t *c)
{
    if (--c->refs > 0) return;
    http_server_t *s = c->s;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    http_head_free(&c->head);
    free(c->pend);
    free(c);
    if (s->stopping && !s->conns && !uv_is_closing((uv_handle_t *)&s->async))
        uv_close((uv_handle_t *)&s->async, NULL);
}

static void on_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

static void req_free(http_req_t *r)
{
    pthread_cond_destroy(&r->cv);
    free(r->in);
    free(r->hcopy);
    free(r);
}

static void on_write(uv_write_t *w, int status)
{
    out_chunk_t *o = w->data;
    http_req_t *r = o->req;
    pthread_mutex_lock(&r->s->mu);
    r->out_pending -= o->len;
    r->nwrites--;
    r->progress_ms = mono_ms();
    if (o->ext) r->borrowed--;
    if (status < 0) r->client_gone = 1;
    pthread_cond_broadcast(&r->cv);
    post(r); /* completion may now be possible */
    pthread_mutex_unlock(&r->s->mu);
    free(o);
}

static void parse_more(conn_t *c);

static void start_reading(conn_t *c);

#define LINGER_MS    5000
#define LINGER_BYTES (64u << 20)

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status;
}

static void conn_linger(conn_t *c)
{
    c->lingering = 1;
    c->linger_until = now_ms(c->s) + LINGER_MS;
    c->pend_off = c->pend_len = 0;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    start_reading(c);
}

/* The request is answered: next one, or close. */
static void req_finish(conn_t *c, http_req_t *r)
{
    /* The worker may have posted it again meanwhile: it must not be seen after the free. */
    pthread_mutex_lock(&c->s->mu);
    if (r->in_events) {
        http_req_t **pp = &c->s->events;
        while (*pp && *pp != r)
            pp = &(*pp)->ev_next;
        if (*pp) *pp = r->ev_next;
        r->in_events = 0;
    }
    pthread_mutex_unlock(&c->s->mu);
    log_debug("event=finished req=%s method=%s target=%.80s peer=%s close=%d", r->id,
              r->info.method, r->info.target, r->info.peer, r->close_after || r->client_gone);
    int close_after = r->close_after || r->client_gone || c->s->stopping;
    int r_gone = r->client_gone, body_done = r->body_complete;
    c->req = NULL;
    c->last_done = now_ms(c->s);
    req_free(r);
    /*
     * The request's reference goes last: when the connection is closing its
     * handles may have been released already, and then this frees c.
     */
    if (c->closing) {
        conn_unref(c);
        return;
    }
    conn_unref(c); /* the tcp and timer handles still hold c */
    if (close_after) {
        /* A client still sending a body it will never get to finish: answer, then linger. */
        if (!r_gone && !c->s->stopping && !body_done)
            conn_linger(c);
        else
            conn_close(c);
        return;
    }
    llhttp_resume(&c->parser);
    c->paused = 0;
    c->last_activity = now_ms(c->s);
    parse_more(c);
}

/* Hand one chunk to libuv; on_write (or the failure path here) accounts for it. */
static void start_write(conn_t *c, http_req_t *r, out_chunk_t *o, char *data, size_t len)
{
    http_server_t *s = c->s;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    o->wr.data = o;
    pthread_mutex_lock(&s->mu);
    r->nwrites++;
    pthread_mutex_unlock(&s->mu);
    if (uv_write(&o->wr, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
        pthread_mutex_lock(&s->mu);
        r->nwrites--;
        r->out_pending -= o->len;
        if (o->ext) r->borrowed--;
        r->client_gone = 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&s->mu);
        free(o);
    }
}

/* How long r has been stalled on its client (0: not stalled; s->mu held). */
static uint64_t stalled_for(const http_req_t *r, uint64_t now)
{
    uint64_t since;
    if (r->waiting)
        since = r->wait_ms > r->progress_ms ? r->wait_ms : r->progress_ms;
    else if (r->handler_done && r->out_pending)
        since = r->progress_ms; /* answered, and the client does not take it */
    else
        return 0;
    return now > since ? now - since : 1;
}

/*
 * Every worker the slow-client allowance has is taken and work waits: close
 * the connection stalled longest, so that its worker serves others.
 */
static void evict_stalled(http_server_t *s)
{
    conn_t *worst = NULL;
    uint64_t worst_for = 0, now = mono_ms();
    pthread_mutex_lock(&s->mu);
    for (conn_t *c = s->conns; c; c = c->next) {
        if (!c->req || c->closing || !c->req->waiting) continue;
        uint64_t f = stalled_for(c->req, now);
        if (f >= worst_for) {
            worst = c;
            worst_for = f;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!worst) return;
    log_warn("event=stalled_client_evicted peer=%s stalled_ms=%llu req=%s", worst->peer,
             (unsigned long long)worst_for, worst->req->id);
    conn_close(worst);
}

static void handle_events(uv_async_t *a)
{
    http_server_t *s = a->data;
    /*
     * Take the pending requests out as an array: once in_events is cleared a
     * worker may post a request again, which rewrites its ev_next link.
     */
    size_t n = 0, cap = 16;
    http_req_t **list = xmalloc(cap * sizeof(*list));
    pthread_mutex_lock(&s->mu);
    for (http_req_t *r = s->events; r; r = r->ev_next) {
        if (n == cap) list = xrealloc(list, (cap *= 2) * sizeof(*list));
        list[n++] = r;
    }
    for (size_t i = 0; i < n; i++)
        list[i]->in_events = 0;
    s->events = NULL;
    pthread_mutex_unlock(&s->mu);

    for (size_t i = 0; i < n; i++) {
        http_req_t *r = list[i];
        conn_t *c = r->c;
        out_chunk_t *chunks;
        pthread_mutex_lock(&s->mu);
        chunks = r->out_head;
        r->out_head = r->out_tail = NULL;
        int want_continue = r->want_continue, room = r->in_len - r->in_off < LOW_WATER;
        int done =
            r->handler_done && !r->out_head && r->out_pending == 0 && !chunks && r->nwrites == 0;
        int gone = r->client_gone;
        pthread_mutex_unlock(&s->mu);

        if (!c->closing && want_continue && !c->continue_sent) {
            static char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            out_chunk_t *o = xmalloc(sizeof(*o));
            o->len = 0; /* static bytes, not counted in out_pending */
            o->ext = NULL;
            o->req = r;
            c->continue_sent = 1;
            start_write(c, r, o, cont, sizeof(cont) - 1);
        }
        for (out_chunk_t *o = chunks, *on; o; o = on) {
            on = o->next;
            if (c->closing || gone) {
                pthread_mutex_lock(&s->mu);
                r->out_pending -= o->len;
                if (o->ext) r->borrowed--;
                pthread_cond_broadcast(&r->cv);
                pthread_mutex_unlock(&s->mu);
                free(o);
                continue;
            }
            start_write(c, r, o, o->ext ? (char *)o->ext : o->data, o->len);
        }
        if (!c->closing && room && !c->reading && !r->body_complete && !c->paused) start_reading(c);
        if (done) req_finish(c, r);
    }
    free(list);
    pthread_mutex_lock(&s->mu);
    int evict = s->evict;
    s->evict = 0;
    pthread_mutex_unlock(&s->mu);
    if (evict) evict_stalled(s);
    if (s->stop_requested && !s->stopping) {
        s->stopping = 1;
        uv_close((uv_handle_t *)&s->listener, NULL);
        for (conn_t *c = s->conns; c; c = c->next)
            if (!c->req && !c->closing) conn_close(c);
    }
    if (s->stopping && !s->conns && !uv_is_closing((uv_handle_t *)&s->async))
        uv_close((uv_handle_t *)&s->async, NULL);
}

/* ---- parsing ---- */

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
    c->msg_begin = now_ms(c->s);
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    conn_t *c = conn_of(p);
    http_server_t *s = c->s;
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
    r->info.content_length = v.content_length;
    r->expect_continue = v.expect_continue;
    r->info.headers = r->headers;
    r->info.nheaders = v.nheaders;
    static uint64_t counter; /* loop thread only */
    snprintf(r->id, sizeof(r->id), "%016llX",
             (unsigned long long)(++counter ^ ((uint64_t)time(NULL) << 24)));
    r->info.id = r->id;
    r->keep_alive = llhttp_should_keep_alive(p);
    c->req = r;
    c->refs++;
    pthread_mutex_lock(&s->mu);
    if (s->jobs_tail)
        s->jobs_tail->job_next = r;
    else
        s->jobs_head = r;
    s->jobs_tail = r;
    s->queued++;
    r->progress_ms = mono_ms();
    maybe_grow(s);
    pthread_cond_signal(&s->job_cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
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
    r->progress_ms = mono_ms();
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

static void respond_raw_and_close(conn_t *c, const char *resp)
{
    static uv_write_t dummy;
    uv_buf_t b = uv_buf_init((char *)resp, (unsigned)strlen(resp));
    (void)dummy;
    uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    conn_close(c);
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

/* Feed the pending bytes to the parser until it pauses or runs dry. */
static void parse_more(conn_t *c)
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
            log_info("event=http_parse_error peer=%s reason=\"%s\"", c->peer,
                     llhttp_get_error_reason(&c->parser));
            respond_raw_and_close(
                c, c->head.too_big
                       ? "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: "
                         "0\r\nConnection: close\r\n\r\n"
                       : "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: "
                         "close\r\n\r\n");
            return;
        }
    }
    if (c->pend_off >= c->pend_len) c->pend_off = c->pend_len = 0;
    /* Read more unless paused with a request in hand or its buffer is full. */
    if (!c->closing && !c->paused && !c->reading && !inbound_full(c)) start_reading(c);
    if (c->paused && c->reading && (!c->req || c->req->body_complete)) {
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

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    conn_t *c = st->data;
    (void)buf;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (c->lingering) {
        c->pend_off = c->pend_len = 0; /* dropped */
        c->linger_bytes += (uint64_t)n;
        if (c->linger_bytes > LINGER_BYTES) conn_close(c);
        return;
    }
    c->last_activity = now_ms(c->s);
    if (c->direct) {
        /* Body bytes in place: the parser sees them where they are (on_body keeps them). */
        char *at = c->direct;
        c->direct = NULL;
        llhttp_errno_t e = n ? llhttp_execute(&c->parser, at, (size_t)n) : HPE_OK;
        if (e == HPE_PAUSED) c->paused = 1; /* the message is complete */
        /* Nothing else can fail inside a Content-Length body. */
        parse_more(c);
        return;
    }
    c->pend_len += (size_t)n;
    if (c->pend_len == READ_BUF * 2 && c->paused) {
        /* Buffer full while waiting for a response: stop reading. */
        uv_read_stop(st);
        c->reading = 0;
    }
    parse_more(c);
}

static void start_reading(conn_t *c)
{
    if (c->reading || c->closing) return;
    if (c->pend && c->pend_len - c->pend_off >= READ_BUF) return; /* plenty unparsed already */
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = 1;
}

static void on_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    uint64_t now = now_ms(c->s);
    if (c->lingering && !c->closing && now > c->linger_until) conn_close(c);
    if (c->req && !c->closing) {
        /* No byte moved for io_ms while the request waits on its client: close. */
        pthread_mutex_lock(&c->s->mu);
        uint64_t f = stalled_for(c->req, mono_ms());
        pthread_mutex_unlock(&c->s->mu);
        if (f > c->s->cfg.io_ms) {
            log_info("event=stalled_client_closed peer=%s stalled_ms=%llu req=%s", c->peer,
                     (unsigned long long)f, c->req->id);
            conn_close(c);
        }
        return;
    }
    if (c->closing || c->req || c->lingering) return;
    int receiving = c->pend_len > c->pend_off || llhttp_get_errno(&c->parser) != HPE_OK ||
                    c->msg_begin > c->last_done;
    if ((receiving && now - c->msg_begin > c->s->cfg.header_ms) ||
        (!receiving && now - c->last_activity > c->s->cfg.idle_ms))
        conn_close(c);
}

static void conn_close(conn_t *c)
{
    if (c->closing) return;
    c->closing = 1;
    if (c->req) {
        pthread_mutex_lock(&c->s->mu);
        c->req->client_gone = 1;
        pthread_cond_broadcast(&c->req->cv);
        pthread_mutex_unlock(&c->s->mu);
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_closed);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_connection(uv_stream_t *l, int status)
{
    http_server_t *s = l->data;
    if (status < 0) return;
    conn_t *c = xcalloc(1, sizeof(*c));
    c->s = s;
    c->head.max = s->cfg.max_header;
    c->refs = 2; /* tcp + timer handles */
    uv_tcp_init(&s->loop, &c->tcp);
    uv_timer_init(&s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0 || s->stopping) {
        conn_close(c);
        return;
    }
    if (s->nconns > s->cfg.max_conns) {
        respond_raw_and_close(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: "
                                 "0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n");
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char ip[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else {
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
    }
    uv_tcp_nodelay(&c->tcp, 1);
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->head.owner = c;
    c->parser.data = &c->head;
    c->last_activity = c->msg_begin = now_ms(s);
    uv_timer_start(&c->timer, on_timer, 1000, 1000);
    start_reading(c);
}

int http_server_new(const http_cfg_t *cfg, http_server_t **out)
{
    http_server_t *s = xcalloc(1, sizeof(*s));
    char host[128];
    int port, rc;
    struct sockaddr_storage addr;

    llhttp_settings_init(&settings);
    http_head_callbacks(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;

    s->cfg = *cfg;
    if (!s->cfg.workers) s->cfg.workers = 32;
    if (!s->cfg.max_conns) s->cfg.max_conns = 1024;
    if (!s->cfg.max_header) s->cfg.max_header = 16384;
    if (!s->cfg.idle_ms) s->cfg.idle_ms = 60000;
    if (!s->cfg.header_ms) s->cfg.header_ms = 30000;
    if (!s->cfg.io_ms) s->cfg.io_ms = 30000;
    if (!s->cfg.max_stalled) s->cfg.max_stalled = 256;
    /* "host:port", "[v6]:port" */
    const char *colon = strrchr(cfg->listen, ':');
    if (!colon || (size_t)(colon - cfg->listen) >= sizeof(host)) {
        free(s);
        return ERR_INVAL;
    }
    const char *h = cfg->listen;
    size_t hl = (size_t)(colon - h);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    port = atoi(colon + 1);
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr) != 0) {
        free(s);
        return ERR_INVAL;
    }
    uv_loop_init(&s->loop);
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    if ((rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection)) != 0) {
        log_error("event=listen_failed addr=%s err=\"%s\"", cfg->listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        free(s);
        return ERR_IO;
    }
    int alen = sizeof(addr);
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&addr, &alen);
    s->port = ntohs(addr.ss_family == AF_INET ? ((struct sockaddr_in *)&addr)->sin_port
                                              : ((struct sockaddr_in6 *)&addr)->sin6_port);
    uv_async_init(&s->loop, &s->async, handle_events);
    s->async.data = s;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->job_cv, NULL);
    pthread_cond_init(&s->exit_cv, NULL);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->cfg.workers; i++) {
        if ((rc = spawn_worker(s)) != 0) break;
        s->idle++;
    }
    pthread_mutex_unlock(&s->mu);
    *out = s;
    if (rc) {
        http_server_free(s);
        *out = NULL;
        return rc;
    }
    return 0;
}

int http_server_port(const http_server_t *s)
{
    return s->port;
}

int http_server_run(http_server_t *s)
{
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return 0;
}

void http_server_stop(http_server_t *s)
{
    /* Only an atomic store and uv_async_send: safe from a signal handler. */
    __atomic_store_n(&s->stop_requested, 1, __ATOMIC_SEQ_CST);
    uv_async_send(&s->async);
}

void http_server_free(http_server_t *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->workers_exit = 1;
    pthread_cond_broadcast(&s->job_cv);
    while (s->nthreads > 0) /* detached: each says when it is gone */
        pthread_cond_wait(&s->exit_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    uv_loop_close(&s->loop);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->job_cv);
    pthread_cond_destroy(&s->exit_cv);
    free(s);
}
