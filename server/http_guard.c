/*
 * http_guard: the loop's guards against clients that hold what others need:
 * the per-connection timer (header, idle and stalled-I/O timeouts, the end of
 * a lingering close), the eviction of a stalled request when every worker the
 * slow-client allowance has is taken, and, at the connection limit, room made
 * by closing an idle connection or the newcomer refused. Loop thread only
 * (http_int.h draws the lifetimes).
 */
#include "server/http_int.h"

#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>

/* An answer from the loop itself (a refusal at the connection limit, a request that is not
 * HTTP) lingers less than a handler's error does, and only so many at once
 * (http__answer_early). */
#define EARLY_LINGER_MS    2000
#define EARLY_LINGER_BYTES (1u << 20)
#define EARLY_LINGER_MAX   64

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

typedef struct {
    conn_t *c;
    http_req_t *r; /* c's request (c->req is its loop's to read) */
    const char *who;
    int stalled_now;
    uint64_t stalled, moved, age;
    double recent;
} held_t;

/* a moved fewer bytes lately than b (ties, such as none at all: a stalled longer). */
static int slower(const held_t *a, const held_t *b)
{
    return a->recent != b->recent ? a->recent < b->recent : a->stalled > b->stalled;
}

static int by_principal(const void *a, const void *b)
{
    return strcmp(((const held_t *)a)->who, ((const held_t *)b)->who);
}

/*
 * Every worker the slow-client allowance has is taken and work waits: close a
 * stalled connection, so that its worker serves others. The principal that
 * holds the most workers (its handlers running, stalled or not) gives up its
 * slowest stalled request: the fewest body and response bytes moved lately
 * (http__recent_bytes; ties, such as none at all: the longest stall). Nothing is closed now while a
 * worker is idle or still starting its request (whose principal is not known yet), or when none of
 * the top holder's requests is stalled: the pool asks again once one of them stalls, and one that
 * ends frees its worker. Longest-stalled of all let a burst of fresh stalls (stalled for
 * milliseconds, or still starting) evict an honest upload whose client had paused for 100 ms
 * (hostile probe); and the longest stall within a principal let such a burst signed with one shared
 * key still evict the honest upload signed with it (re-probe).
 */
void http__evict_stalled(http_loop_t *l)
{
    http_server_t *s = l->s;
    size_t n = 0, cap = 64;
    int leaving = 0;
    held_t *h = xmalloc(cap * sizeof(*h));
    uint64_t now = http__mono_ms();
    pool_stats_t ps;
    pthread_mutex_lock(&s->mu);
    pool_stats(s->workers, &ps); /* (s->mu, then the pool's: stall_begin's order) */
    /* The requests of every loop (s->reqs, under s->mu); a closed connection's has client_gone
     * (set under s->mu by http__conn_close). */
    for (http_req_t *r = s->reqs; r; r = r->next) {
        conn_t *c = r->c;
        if (r->client_gone || r->evict_asked || !__atomic_load_n(&r->running, __ATOMIC_ACQUIRE) ||
            r->handler_done)
            continue;
        /* Told already (below): its worker is on its way out; counted as held (else the
         * count falls short of the threads and nothing is evicted), never taken twice. */
        int told = r->body_timed_out && r->close_after;
        /* Told, and its worker not yet done with it (still to wake from its body read, or
         * answering): a worker is on its way back. Another eviction now takes one too many:
         * with a flood's running uploads all told, the honest upload of the same principal
         * was the only one stalled, and was closed (ASan run, two loops). */
        if (told && (!r->waiting || r->body_waiting)) leaving = 1;
        if (n == cap) h = xrealloc(h, (cap *= 2) * sizeof(*h));
        h[n++] = (held_t){c,
                          r,
                          r->principal,
                          r->waiting > 0 && !told,
                          r->waiting ? stalled_for(r, now) : 0,
                          r->moved,
                          now > r->start_ms ? now - r->start_ms : 0,
                          http__recent_bytes(r, now)};
    }
    /* Workers about to take queued requests, or starting one (whose principal is not known
     * yet): they stall (the pool asks again) or end (freeing their worker). */
    if (ps.idle > 0 || (int)n < ps.threads || leaving) n = 0;
    /* Principals are read while s->mu is held (http_req_set_principal writes under it). */
    qsort(h, n, sizeof(*h), by_principal);
    /* The most workers any principal holds, then the slowest stalled request of those holding as
     * many. */
    size_t most = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && strcmp(h[j].who, h[i].who) == 0; j++)
            ;
        if (j - i > most) most = j - i;
    }
    held_t *best = NULL;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && strcmp(h[j].who, h[i].who) == 0; j++)
            ;
        for (size_t x = i; x < j && j - i == most; x++)
            if (h[x].stalled_now && (!best || slower(&h[x], best))) best = &h[x];
    }
    conn_t *worst = best ? best->c : NULL;
    uint64_t worst_for = best ? best->stalled : 0, worst_moved = best ? best->moved : 0;
    uint64_t worst_age = best ? best->age : 0;
    /*
     * A request waiting for body bytes with nothing answered yet is told, as the io timeout
     * tells one (its worker's body read fails: S3's 400 RequestTimeout, which clients retry),
     * and its connection lingers after the answer. Closed unanswered, its client saw a reset
     * or an EOF and no reason (a probe: 286 uploads so closed under --max-stalled 2, 26 of
     * them sending at full speed). One whose response is under way can only be closed.
     */
    int told = 0, here = 0;
    char peer[64] = "", id[17] = "";
    if (worst) {
        http_req_t *r = best->r;
        snprintf(peer, sizeof(peer), "%s", worst->peer);
        snprintf(id, sizeof(id), "%s", r->id);
        if (r->body_waiting && !r->responded && !r->body_timed_out) {
            r->body_timed_out = 1;
            r->close_after = 1;
            r->progress_ms = now;
            pthread_cond_broadcast(&r->cv);
            told = 1;
        } else if (worst->l == l) {
            here = 1; /* closed below, once s->mu is free */
        } else {
            /* Another loop's: that loop closes it (http__handle_events). */
            r->evict_asked = 1;
            http__post(r);
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(h);
    if (!worst) return;
    log_warn("event=stalled_client_evicted peer=%s stalled_ms=%llu moved=%llu age_ms=%llu "
             "principal_holds=%zu answered=%d req=%s",
             peer, (unsigned long long)worst_for, (unsigned long long)worst_moved,
             (unsigned long long)worst_age, most, told, id);
    if (here) http__conn_close(worst);
}

/*
 * Response bytes of r the client has taken: handed to libuv, less what libuv
 * still holds and what the socket has not had acknowledged (SIOCOUTQ). A
 * write completes only once all of its chunk (a 4 MiB stripe) is in the
 * socket, so a client reading steadily but slower than a chunk per io_ms
 * looked stalled and was closed (third probe: 150 KB/s); this sees its
 * progress at every tick. 0 when it cannot tell.
 */
static size_t response_delivered(conn_t *c, const http_req_t *r)
{
    uv_os_fd_t fd;
    int unacked = 0;
    if (!r->handed || uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 ||
        ioctl(fd, SIOCOUTQ, &unacked) != 0 || unacked < 0)
        return 0;
    size_t held = c->tcp.write_queue_size + (size_t)unacked;
    return r->handed > held ? r->handed - held : 0;
}

/*
 * How long a request may wait on its client without a byte moving: io_ms, and
 * STOP_STALL_MS once the server is stopping. A drain finishes the requests
 * that are moving; one whose client went quiet held a stop (SIGTERM, a
 * service manager's stop with its own timeout) for the whole io_ms, 30 s by
 * default (a probe saw it). A client that pauses longer than this during a
 * stop is cut off as a stop would cut it anyway, and retries.
 */
#define STOP_STALL_MS 1000

static uint64_t stall_limit_ms(const http_server_t *s)
{
    return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE) && s->cfg.io_ms > STOP_STALL_MS
               ? STOP_STALL_MS
               : s->cfg.io_ms;
}

void http__on_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    uint64_t now = http__now_ms(c->l);
    if (c->lingering && !c->closing && now > c->linger_until) http__conn_close(c);
    if (c->req && !c->closing) {
        /* No byte moved for io_ms while the request waits on its client: close. */
        uint64_t mono = http__mono_ms();
        size_t delivered = response_delivered(c, c->req);
        pthread_mutex_lock(&c->s->mu);
        http_req_t *r = c->req;
        if (delivered > r->delivered) {
            r->delivered = delivered;
            r->progress_ms = mono; /* the client reads: not stalled, however large the chunk */
        }
        uint64_t f = stalled_for(r, mono), limit = stall_limit_ms(c->s);
        /* A body that stopped coming before any answer: the worker answers (S3's 400
         * RequestTimeout, which clients retry), with the limit again for it to go out. */
        int tell = f > limit && r->body_waiting && !r->responded && !r->body_timed_out;
        if (tell) {
            r->body_timed_out = 1;
            r->close_after = 1;
            r->progress_ms = mono;
            pthread_cond_broadcast(&r->cv);
        }
        pthread_mutex_unlock(&c->s->mu);
        if (tell) {
            log_info("event=request_body_timeout peer=%s stalled_ms=%llu req=%s", c->peer,
                     (unsigned long long)f, r->id);
            return;
        }
        if (f > limit) {
            log_info("event=stalled_client_closed peer=%s stalled_ms=%llu req=%s", c->peer,
                     (unsigned long long)f, c->req->id);
            http__conn_close(c);
        }
        return;
    }
    if (c->closing || c->req || c->lingering) return;
    int receiving = c->pend_len > c->pend_off || llhttp_get_errno(&c->parser) != HPE_OK ||
                    c->msg_begin > c->last_done;
    if ((receiving && now - c->msg_begin > c->s->cfg.header_ms) ||
        (!receiving && now - c->last_activity > c->s->cfg.idle_ms))
        http__conn_close(c);
}

/*
 * At the connection limit, a connection that holds a slot for nothing makes room for the new
 * one: 1 when one was closed. That is one idle between requests (none of a request received:
 * a keep-alive connection a client pools, or one that has not sent a byte for HEAD_SLOW_MS
 * since it came), or one whose request head has been coming for HEAD_SLOW_MS or more (a
 * client sends a head at once); the one waiting longest goes. A connection younger than that
 * which sent nothing yet is not idle: its client is likely between connect and send (a burst
 * of new clients at the limit closed some of them unanswered, their requests in flight). Refusing
 * the newcomer instead let 1,024 sockets that never send a byte, or 60 that each sent half a head,
 * shut every client out for the header timeout, again and again (probes). A request whose head came
 * whole is never closed for another.
 */
#define HEAD_SLOW_MS 1000

/*
 * Bytes the client sent that the loop has not read yet. A connection that
 * looked as if it never sent a byte may have its request waiting in the
 * socket (a burst of new connections, each with its request, the loop not yet
 * round to reading them): closing it reset a client that had done nothing
 * wrong (probe: 2 of 40 in each burst).
 */
static int bytes_waiting(conn_t *c)
{
    uv_os_fd_t fd;
    int n = 0;
    return uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

int http__evict_idle(http_loop_t *l, conn_t *fresh)
{
    conn_t *victim = NULL;
    uint64_t now = http__now_ms(l), since = 0;
    for (conn_t *c = l->conns; c; c = c->next) {
        if (c == fresh || c->closing || c->req || c->lingering) continue;
        uint64_t t = c->begun ? c->msg_begin : c->last_activity;
        if (c->begun ? now - c->msg_begin < HEAD_SLOW_MS : c->pend_len != c->pend_off) continue;
        if (!c->served && !c->begun && now - c->last_activity < HEAD_SLOW_MS) continue;
        if ((!victim || t < since) && !c->begun && bytes_waiting(c)) continue;
        if (!victim || t < since) {
            victim = c;
            since = t;
        }
    }
    if (!victim) return 0;
    log_info("event=idle_conn_evicted peer=%s waiting_ms=%llu head_begun=%d", victim->peer,
             (unsigned long long)(now - since), victim->begun);
    http__conn_close(victim);
    return 1;
}

/*
 * An answer from the loop itself, before any handler (a refusal, a request that is not
 * HTTP): S3's XML error with a request id, as every other error carries one, then a
 * lingering close. The request is likely on its way still, and a close with unread bytes in
 * the socket sends a reset, which can destroy the answer before the client reads it (it then
 * saw a reset, not the error): so the write side is shut and what comes is read and dropped
 * for a while. These lingerers are kept outside the connection limit (one garbage packet per
 * connection held a slot for the linger's time, and a lingering connection is not idle to
 * evict), bounded in number, time and bytes: past EARLY_LINGER_MAX of them one closes at
 * once.
 */
void http__answer_early(conn_t *c, const char *status, const char *code, const char *message,
                        const char *extra_xml)
{
    http_server_t *s = c->s;
    char id[17], body[512], resp[1024];
    http__new_request_id(id);
    int blen = snprintf(body, sizeof(body),
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                        "<Message>%s</Message>%s<RequestId>%s</RequestId></Error>",
                        code, message, extra_xml, id);
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 %s\r\nx-amz-request-id: %s\r\nContent-Type: application/xml\r\n"
                     "Content-Length: %d\r\n%sConnection: close\r\n\r\n%s",
                     status, id, blen, strncmp(status, "503", 3) == 0 ? "Retry-After: 1\r\n" : "",
                     body);
    if (blen < 0 || (size_t)blen >= sizeof(body) || n < 0 || (size_t)n >= sizeof(resp)) {
        http__conn_close(c); /* cannot happen with the callers' texts; never a cut answer */
        return;
    }
    int lingering = __atomic_load_n(&s->nrefused, __ATOMIC_RELAXED);
    log_info("event=answered_early peer=%s status=\"%s\" code=%s req=%s lingering=%d", c->peer,
             status, code, id, lingering);
    uv_buf_t b = uv_buf_init(resp, (unsigned)n);
    int sent = uv_try_write((uv_stream_t *)&c->tcp, &b, 1) == n;
    /* The slot is taken before it is weighed: loops on other threads refuse at once too, and a
     * look then an add let each of them past the cap. */
    int slot = sent && __atomic_add_fetch(&s->nrefused, 1, __ATOMIC_RELAXED) <= EARLY_LINGER_MAX;
    if (!slot) {
        if (sent) __atomic_sub_fetch(&s->nrefused, 1, __ATOMIC_RELAXED);
        http__conn_close(c);
        return;
    }
    http__conn_linger(c, EARLY_LINGER_MS, EARLY_LINGER_BYTES);
    if (c->closing) {
        __atomic_sub_fetch(&s->nrefused, 1, __ATOMIC_RELAXED);
        return;
    }
    c->refused = 1; /* its slot is given back when it is freed */
    uv_timer_start(&c->timer, http__on_timer, 1000, 1000);
}

/* A newcomer at the limit with no room to make: 503 SlowDown, which S3 clients retry after a
 * pause. */
void http__refuse(conn_t *c)
{
    http_server_t *s = c->s;
    log_info("event=conn_refused conns=%d lingering=%d",
             __atomic_load_n(&s->nconns, __ATOMIC_RELAXED),
             __atomic_load_n(&s->nrefused, __ATOMIC_RELAXED));
    http__answer_early(c, "503 Service Unavailable", "SlowDown",
                       "Too many connections; reduce your request rate.", "");
}
