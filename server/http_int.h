/*
 * http_int: the rooms of the HTTP front end and what they share. The door
 * is http.h; behind it:
 *
 *   http_server.c  listener, loop, stop, drain
 *   http_conn.c    the loop side: connections, writes, events, a request's finish
 *   http_parse.c   the loop side: reading and parsing requests, bodies, request ids
 *   http_guard.c   the loop's guards: timeouts, stalled and idle eviction,
 *                  refusal at the connection limit
 *   http_req.c     the worker side: what handlers call
 *   http_head.c    request heads (llhttp callbacks, no I/O)
 *
 * Threads. Each of the server's loops (cfg.loops, http_loop_t) owns the
 * sockets, conn_t and parsers of the connections it accepted; every loop
 * listens on the same socket and the one that wakes first accepts. One loop
 * wrote every response: it ran at 100% of a core with the node's other core
 * half idle (8 clients of 4 KiB or 1 MiB GETs, or of listings). Handlers run
 * on the "wl-http" job pool (common/pool), shared by the loops. They meet in
 * the http_req_t, whose shared fields are guarded by s->mu (one for the
 * server); a worker wakes the request's loop with http__post (the request
 * joins its loop's events, uv_async_send), the loop wakes a worker with r->cv.
 * The guards that weigh connections against each other work across loops:
 * the stalled-request eviction walks s->reqs (every request, under s->mu)
 * and has the chosen one's loop close it; a newcomer at the connection limit
 * whose loop has no idle connection to close for it is handed to the next
 * loop, and refused only once every loop had none.
 *
 * Lifetime of a connection and its requests:
 *
 *   accept ──> conn_t  refs = 2 (tcp handle, timer handle)
 *                │
 *     headers ───┼──> http_req_t  c->req = r, refs + 1 ─────────> pool job
 *     complete   │                                                  │
 *                │    body bytes ──> r->in (loop writes, s->mu)     │ handler:
 *                │    r->out chunks <── worker queues (s->mu) <─────┤ body_read,
 *                │    uv_write ──> on_write (out_pending, nwrites)  │ respond,
 *                │                                                  │ write
 *                │    handler_done = 1 (s->mu) <────────────────────┘ (never
 *                │                                                    touches r
 *     req_finish: handler_done, nothing queued, nothing in flight     again)
 *                │  (nwrites == 0), r off its loop's events and s->reqs: r freed,
 *                │  refs - 1
 *                │  then the next pipelined request, or close
 *                │
 *   conn_close: closing = 1, r->client_gone = 1 (wakes the worker: its
 *     reads and writes now fail with ERR_CLOSED), both handles closed;
 *     libuv cancels pending writes (on_write, status < 0) before the
 *     close callbacks; each close callback drops a ref.
 *
 *   conn_t is freed when refs reach 0: by the last of the two close
 *   callbacks and req_finish. So req_finish must not read c after its
 *   unref when the connection is closing (that was a use-after-free).
 *
 * Stalls. A worker waiting on its client (r->waiting: body bytes to
 * arrive, or its output to drain) is blocked in the pool's terms: queued
 * requests get other threads, up to cfg.max_stalled more; at that bound the
 * pool reports saturation and the loop closes a stalled connection: the
 * slowest (fewest bytes moved lately, http__recent_bytes) of the principal
 * (access key, else client address) that holds the most stalled requests,
 * so that a flood of stalls costs its sender its own slots, not an honest
 * upload that paused for a moment, even one signed with the same key. The per-connection timer
 * closes a request that moved no byte for cfg.io_ms while stalled, or whose answered response is
 * not taken; one whose worker waits for body bytes and has not answered is told first
 * (body_timed_out: http_body_read returns ERR_TIMEOUT), so that it answers (S3: 400
 * RequestTimeout), and closed only if it stalls again.
 */
#ifndef WL_HTTP_INT_H
#define WL_HTTP_INT_H

#include "common/pool.h"
#include "server/http.h"
#include "server/http_head.h"

#include <llhttp.h>
#include <pthread.h>
#include <stdint.h>
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

/* One http_free_after: fn(arg, p) once the request is finished (loop thread). */
typedef struct http_after {
    struct http_after *next;
    void (*fn)(void *arg, void *p);
    void *arg, *p;
} http_after_t;

struct http_req {
    pool_job_t job; /* the handler's run on a worker (first: a job is its request) */
    conn_t *c;
    http_server_t *s;
    struct http_req_info info;
    http_header_t headers[HTTP_MAX_HEADERS];
    char *hcopy;
    char id[17];
    char *extra; /* http_add_headers: lines every response of r carries */
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
    int aborted;      /* http_abort: a chunked body is not terminated (the client sees it cut) */
    int linger_after; /* a 411: the unframed body is likely still coming (close lingering) */
    int http10;       /* an HTTP/1.0 request: a body of unknown length ends with the connection */
    int in_events;
    struct http_req *ev_next;
    struct http_req *next, *prev; /* s->reqs (s->mu) */
    int evict_asked;              /* another loop chose it: its own loop closes it (s->mu) */
    /*
     * Stalls: waiting > 0 while the worker is blocked on the client (body
     * bytes to arrive, response bytes to be taken), since wait_ms; progress_ms
     * is when a byte last moved. The loop's timer closes a request stalled
     * for io_ms (s->mu).
     */
    int waiting;
    uint64_t wait_ms, progress_ms;
    uint64_t start_ms, moved; /* handler submitted at; body and response bytes moved since */
    size_t handed, delivered; /* response bytes given to libuv; taken by the client (loop) */
    double recent;            /* bytes moved lately, as of recent_ms (http__moved) */
    uint64_t recent_ms;
    char principal[64];  /* whose request (http_req_set_principal; default the client's IP) */
    int running;         /* its handler has a worker (atomic; set once) */
    int body_waiting;    /* the worker waits in http_body_read */
    int body_timed_out;  /* ... for io_ms: it returns ERR_TIMEOUT (then 0 bytes more) */
    http_after_t *after; /* worker side until handler_done, then the loop's */
};

typedef struct http_loop http_loop_t;

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    http_server_t *s;
    http_loop_t *l; /* the loop that owns it */
    llhttp_t parser;
    http_head_t head;           /* the request head being received */
    struct http_req *req;       /* being received or handled */
    struct http_req *to_submit; /* req, once the read that completed its head is parsed */
    char *pend;                 /* bytes read but not parsed (parser paused) */
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
    int refused; /* answered by the loop itself (http__answer_early): lingers, not counted in the
                    limit */
    int bad_version; /* the request is not HTTP/1.x: answered 505 */
    /*
     * The client shut its write side (EOF) while a request was in: a body
     * still coming is cut short there and its handler answers that; a
     * request whose body was in is answered, and so are those the client sent
     * before the EOF. Then the connection closes (no lingering, no reading).
     */
    int peer_eof;
    int begun;  /* a byte of a request came since the last one was answered (llhttp's begin) */
    int served; /* a request of it was answered (idle now: a client's pooled connection) */
    uint64_t linger_until, linger_bytes, linger_max; /* a lingering close ends at either */
    uv_shutdown_t shutdown;
    uint64_t last_activity, msg_begin, last_done;
    char peer[64];
    int handed; /* given to another loop (http__handoff): no longer counted here */
    struct conn *next, *prev;
};

/* A socket accepted by one loop, handed to another at the connection limit. */
typedef struct handoff {
    struct handoff *next;
    uv_os_sock_t fd;
    int hops; /* loops that had no idle connection to close for it */
} handoff_t;

struct http_loop {
    http_server_t *s;
    int index;
    uv_loop_t loop;
    uv_tcp_t listener; /* the server's listening socket (a dup of it past loop 0) */
    uv_async_t async;
    int listening;
    int stopping;
    int ended;               /* stopped with no connection left: its async let go (atomic) */
    int load;                /* its connections, and those handed to it not yet taken (atomic) */
    struct http_req *events; /* posted by workers (s->mu) */
    handoff_t *handoffs;     /* sockets handed to this loop (s->mu) */
    conn_t *conns;           /* its connections (its thread only) */
    pthread_t thread;
    int started;
};

struct http_server {
    http_cfg_t cfg;
    http_loop_t *loops;
    int nloops;
    /*
     * Handlers run on a job pool (common/pool). A worker blocked on its
     * client does not count against cfg.workers: the pool starts threads for
     * queued requests up to cfg.max_stalled more, and at that bound asks the
     * loop (evict) to close the connection stalled longest.
     */
    pool_t *workers;
    int evict; /* atomic */
    pthread_mutex_t mu;
    struct http_req *reqs;              /* every request not yet finished (s->mu) */
    int stopping, stop_requested, port; /* (atomic) */
    int nconns;                         /* of all loops (atomic) */
    int nrefused; /* of nconns: answered early, lingering (outside the limit; atomic) */
};

/* A loop's clock (its thread only). */
static inline uint64_t http__now_ms(http_loop_t *l)
{
    return uv_now(&l->loop);
}

/* A clock both the loop and the workers read (uv_now is the loop's only). */
static inline uint64_t http__mono_ms(void)
{
    return uv_hrtime() / 1000000u;
}

/* ---- http_req.c (worker side) ---- */
/* Under s->mu: make the loop look at this request. */
void http__post(http_req_t *r);
/* A request's turn on a worker (the pool job of r). */
void http__run_handler(pool_job_t *j);
/* n body or response bytes of r moved at now (s->mu held); what r moved lately, decayed to now. */
void http__moved(http_req_t *r, size_t n, uint64_t now);
double http__recent_bytes(const http_req_t *r, uint64_t now);
/* The worker pool is at its bound with requests waiting (pool_cfg_t.on_saturated). */
void http__on_saturated(void *arg);

/* ---- http_conn.c (loop side) ---- */
void http__on_connection(uv_stream_t *l, int status);
void http__handle_events(uv_async_t *a);
/* A loop's end of the stop: its listener and idle connections closed, then its wake-up. */
void http__loop_stop(http_loop_t *l);
/* Close c (its request's worker is told: client_gone). */
void http__conn_close(conn_t *c);

/* http_parse.c */
/* c's parser set up with the server's callbacks (a new connection). */
void http__parser_init(conn_t *c);
/* Parse what c has buffered, as far as its state lets (a request answered: the next). */
void http__parse_more(conn_t *c);
/* Read from c's socket again (paused for a body over the high-water mark, or new). */
void http__start_reading(conn_t *c);
/* After the client's EOF: a request whose body is cut short is told so (1), else 0. */
int http__body_cut_short(conn_t *c);
/* Write resp (whatever of it the socket takes now), then close. */
/* A new request id (16 hex digits; loop thread only). */
void http__new_request_id(char id[17]);
/* An S3 error answered by the loop itself, then a bounded lingering close, outside the
 * connection limit (http_guard.c). */
void http__answer_early(conn_t *c, const char *status, const char *code, const char *message,
                        const char *extra_xml);
/* Shut c's write side, then read and drop what comes for up to ms or max_bytes, then close. */
void http__conn_linger(conn_t *c, uint64_t ms, uint64_t max_bytes);

/* ---- http_guard.c (loop side) ---- */
/* The per-connection timer (every second): timeouts, the end of a lingering close. */
void http__on_timer(uv_timer_t *t);
/* Every worker is held and work waits: close the stalled request that costs the most (of any
 * loop; l: the loop that looks). */
void http__evict_stalled(http_loop_t *l);
/* At the connection limit: close a connection of fresh's loop that holds a slot for nothing
 * (1), or 0. */
int http__evict_idle(http_loop_t *l, conn_t *fresh);
/* At the connection limit with no room made: answer 503 SlowDown, linger, close. */
void http__refuse(conn_t *c);

#endif
