/*
 * http_conn: the loop side: connections from accept to close, handing bytes
 * to libuv, the events workers post, a request's finish (reading and parsing
 * requests: http_parse.c; timeouts and eviction: http_guard.c). Runs on the
 * loop thread only; the lifetime of connections and requests is drawn in
 * http_int.h.
 */
#include "server/http_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/*
 * A stopping loop with no connection left lets its wake-up go (unref: its
 * uv_run then returns). The handle itself stays open until http_server_free:
 * a worker or another loop may still send to it (http__on_saturated runs
 * with s->mu held, so it cannot ask under s->mu whether a loop is still there).
 */
static void loop_maybe_end(http_loop_t *l)
{
    if (!l->stopping || l->conns || __atomic_load_n(&l->ended, __ATOMIC_ACQUIRE)) return;
    http_server_t *s = l->s;
    /* Under s->mu: hand_to queues only to a loop not ended, as it sees it under s->mu. */
    pthread_mutex_lock(&s->mu);
    __atomic_store_n(&l->ended, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->mu);
    uv_unref((uv_handle_t *)&l->async);
    /* An eviction asked of this loop as it ended goes to one still running. */
    if (__atomic_load_n(&s->evict, __ATOMIC_ACQUIRE))
        for (int i = 0; i < s->nloops; i++)
            if (!__atomic_load_n(&s->loops[i].ended, __ATOMIC_ACQUIRE)) {
                uv_async_send(&s->loops[i].async);
                break;
            }
}

static void conn_unref(conn_t *c)
{
    if (--c->refs > 0) return;
    http_server_t *s = c->s;
    http_loop_t *l = c->l;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (!c->handed) {
        __atomic_sub_fetch(&s->nconns, 1, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&l->load, 1, __ATOMIC_RELAXED);
    }
    if (c->refused) __atomic_sub_fetch(&s->nrefused, 1, __ATOMIC_RELAXED);
    http_head_free(&c->head);
    free(c->pend);
    free(c);
    loop_maybe_end(l);
}

static void on_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

static void req_free(http_req_t *r)
{
    /* What the handler left to free once its response is out (http_free_after). */
    for (http_after_t *a = r->after, *an; a; a = an) {
        an = a->next;
        a->fn(a->arg, a->p);
        free(a);
    }
    pthread_cond_destroy(&r->cv);
    free(r->in);
    free(r->hcopy);
    free(r->extra);
    free(r);
}

static void req_finish(conn_t *c, http_req_t *r);

/*
 * Count the chunks of one write (o and the ones linked after it, a batch
 * that start_write handed over as one writev) off r: out, or lost when
 * status < 0 (s->mu held).
 */
static void count_out(http_req_t *r, const out_chunk_t *o, int status)
{
    size_t len = 0;
    int ext = 0;
    for (const out_chunk_t *b = o; b; b = b->next) {
        len += b->len;
        ext += b->ext != NULL;
    }
    r->out_pending -= len;
    r->progress_ms = http__mono_ms();
    http__moved(r, len, r->progress_ms);
    r->borrowed -= ext;
    if (status < 0) r->client_gone = 1;
    pthread_cond_broadcast(&r->cv);
}

static void free_chunks(out_chunk_t *o)
{
    for (out_chunk_t *b = o, *bn; b; b = bn) {
        bn = b->next;
        free(b);
    }
}

/* A write's end: the chunks it carried are out or lost. */
static void on_write(uv_write_t *w, int status)
{
    out_chunk_t *o = w->data;
    http_req_t *r = o->req;
    conn_t *c = r->c;
    pthread_mutex_lock(&r->s->mu);
    count_out(r, o, status);
    r->nwrites--;
    /*
     * The last write of a request whose handler is done: finish it here
     * rather than through the event queue, which would cost the loop a
     * wake of its own (an eventfd write and another turn) per response.
     */
    int done = status >= 0 && !c->closing && r->handler_done && !r->out_head &&
               r->out_pending == 0 && r->nwrites == 0;
    if (!done) http__post(r); /* completion may now be possible */
    pthread_mutex_unlock(&r->s->mu);
    free_chunks(o);
    if (done) req_finish(c, r);
}

#define LINGER_MS    5000
#define LINGER_BYTES (64u << 20)

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status;
}

void http__conn_linger(conn_t *c, uint64_t ms, uint64_t max_bytes)
{
    c->lingering = 1;
    c->linger_until = http__now_ms(c->l) + ms;
    c->linger_max = max_bytes;
    c->pend_off = c->pend_len = 0;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        http__conn_close(c);
        return;
    }
    http__start_reading(c);
}

/* The request is answered: next one, or close. */
static void req_finish(conn_t *c, http_req_t *r)
{
    /* The worker may have posted it again meanwhile: it must not be seen after the free; nor
     * by another loop's eviction (s->reqs). */
    http_server_t *s = c->s;
    pthread_mutex_lock(&s->mu);
    if (r->in_events) {
        http_req_t **pp = &c->l->events;
        while (*pp && *pp != r)
            pp = &(*pp)->ev_next;
        if (*pp) *pp = r->ev_next;
        r->in_events = 0;
    }
    if (r->prev)
        r->prev->next = r->next;
    else
        s->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    pthread_mutex_unlock(&s->mu);
    log_debug("event=finished req=%s method=%s target=%.80s peer=%s close=%d", r->id,
              r->info.method, r->info.target, r->info.peer, r->close_after || r->client_gone);
    int close_after = r->close_after || r->client_gone || c->l->stopping;
    int r_gone = r->client_gone, body_done = r->body_complete && !r->linger_after;
    c->req = NULL;
    c->begun = 0;
    c->last_done = http__now_ms(c->l);
    c->served = 1;
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
        if (!r_gone && !c->l->stopping && !body_done && !c->peer_eof)
            http__conn_linger(c, LINGER_MS, LINGER_BYTES);
        else
            http__conn_close(c);
        return;
    }
    llhttp_resume(&c->parser);
    c->paused = 0;
    c->last_activity = http__now_ms(c->l);
    http__parse_more(c);
    /* After the client's EOF: all it sent is answered (close), or the next request's body
     * is cut short there (its handler answers that at once, not after --io-timeout). */
    if (c->peer_eof && !c->closing) {
        if (!c->req)
            http__conn_close(c);
        else
            (void)http__body_cut_short(c);
    }
}

/* The bytes of one chunk (the 100 Continue's have len 0: static, not counted in out_pending). */
static uv_buf_t chunk_buf(const out_chunk_t *o, const char *data, size_t len)
{
    return uv_buf_init((char *)(data ? data : o->ext ? o->ext : o->data), (unsigned)len);
}

/*
 * Hand a batch of chunks (o, linked by next, at most WRITE_BATCH) to libuv as
 * one write: a response's head and its first piece leave in one writev, one
 * segment with TCP_NODELAY, so the client wakes once for both. on_write (or
 * this, when the socket took it all at once or refused it) accounts for them.
 */
#define WRITE_BATCH 16
static void start_write(conn_t *c, http_req_t *r, out_chunk_t *o, const char *data, size_t dlen)
{
    http_server_t *s = c->s;
    uv_buf_t b[WRITE_BATCH];
    unsigned n = 0;
    for (out_chunk_t *k = o; k; k = k->next) {
        size_t kl = k == o && data ? dlen : k->len;
        b[n++] = chunk_buf(k, k == o ? data : NULL, kl);
    }
    o->wr.data = o;
    size_t bytes = 0;
    for (unsigned i = 0; i < n; i++)
        bytes += b[i].len;
    r->handed += bytes;
    /*
     * Straight into the socket when it takes it all (a small response, the
     * usual case), counted off here: the caller finishes the request. A
     * uv_write's end cost the loop an epoll_ctl per response (libuv 1.44:
     * its drain re-arms the watcher though nothing waited for POLLOUT), and
     * its callback a turn. What the socket does not take goes by uv_write.
     */
    int sent = uv_try_write((uv_stream_t *)&c->tcp, b, n);
    if (sent > 0 && (size_t)sent == bytes) {
        pthread_mutex_lock(&s->mu);
        count_out(r, o, 0);
        pthread_mutex_unlock(&s->mu);
        free_chunks(o);
        return;
    }
    unsigned first = 0;
    for (size_t skip = sent > 0 ? (size_t)sent : 0; skip;) {
        size_t take = skip < b[first].len ? skip : b[first].len;
        b[first].base += take;
        b[first].len -= (unsigned)take;
        skip -= take;
        if (!b[first].len) first++;
    }
    pthread_mutex_lock(&s->mu);
    r->nwrites++;
    pthread_mutex_unlock(&s->mu);
    if (uv_write(&o->wr, (uv_stream_t *)&c->tcp, b + first, n - first, on_write) < 0) {
        pthread_mutex_lock(&s->mu);
        r->nwrites--;
        count_out(r, o, -1); /* lost: the client is gone */
        pthread_mutex_unlock(&s->mu);
        free_chunks(o);
    }
}

void http_req_set_principal(http_req_t *r, const char *who)
{
    pthread_mutex_lock(&r->s->mu);
    snprintf(r->principal, sizeof(r->principal), "%s", who);
    pthread_mutex_unlock(&r->s->mu);
}

static void conn_adopt(http_loop_t *l, uv_os_sock_t fd, int hops);

void http__handle_events(uv_async_t *a)
{
    http_loop_t *l = a->data;
    http_server_t *s = l->s;
    /*
     * Take the pending requests out as an array: once in_events is cleared a
     * worker may post a request again, which rewrites its ev_next link.
     */
    size_t n = 0, cap = 16;
    http_req_t **list = xmalloc(cap * sizeof(*list));
    pthread_mutex_lock(&s->mu);
    for (http_req_t *r = l->events; r; r = r->ev_next) {
        if (n == cap) list = xrealloc(list, (cap *= 2) * sizeof(*list));
        list[n++] = r;
    }
    for (size_t i = 0; i < n; i++)
        list[i]->in_events = 0;
    l->events = NULL;
    handoff_t *handed = l->handoffs;
    l->handoffs = NULL;
    pthread_mutex_unlock(&s->mu);
    for (handoff_t *h = handed, *hn; h; h = hn) {
        hn = h->next;
        conn_adopt(l, h->fd, h->hops);
        free(h);
    }

    for (size_t i = 0; i < n; i++) {
        http_req_t *r = list[i];
        conn_t *c = r->c;
        out_chunk_t *chunks;
        pthread_mutex_lock(&s->mu);
        chunks = r->out_head;
        r->out_head = r->out_tail = NULL;
        int want_continue = r->want_continue, room = r->in_len - r->in_off < LOW_WATER;
        int gone = r->client_gone, evict = r->evict_asked;
        r->evict_asked = 0;
        pthread_mutex_unlock(&s->mu);
        /* Another loop's eviction chose it (http__evict_stalled): closed here, its loop. */
        if (evict && !c->closing) {
            http__conn_close(c);
            gone = 1;
        }

        /* (not to a client that has shut its side: no body can come) */
        if (!c->closing && want_continue && !c->continue_sent && !c->peer_eof) {
            static char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            out_chunk_t *o = xmalloc(sizeof(*o));
            o->len = 0; /* static bytes, not counted in out_pending */
            o->ext = NULL;
            o->req = r;
            o->next = NULL;
            c->continue_sent = 1;
            start_write(c, r, o, cont, sizeof(cont) - 1);
        }
        while (chunks) {
            out_chunk_t *o = chunks;
            if (c->closing || gone) {
                chunks = o->next;
                pthread_mutex_lock(&s->mu);
                r->out_pending -= o->len;
                if (o->ext) r->borrowed--;
                pthread_cond_broadcast(&r->cv);
                pthread_mutex_unlock(&s->mu);
                free(o);
                continue;
            }
            /* Up to WRITE_BATCH chunks in one write; the batch's links end at its last. */
            out_chunk_t *last = o;
            for (int k = 1; k < WRITE_BATCH && last->next; k++)
                last = last->next;
            chunks = last->next;
            last->next = NULL;
            start_write(c, r, o, NULL, 0);
        }
        if (!c->closing && room && !c->reading && !r->body_complete && !c->paused)
            http__start_reading(c);
        /*
         * Finished? Asked only now: the chunks dropped above (client gone) or
         * refused by uv_write were the last thing the request waited for, and
         * nothing would post it again (that leaked the connection).
         */
        pthread_mutex_lock(&s->mu);
        int done = r->handler_done && !r->out_head && r->out_pending == 0 && r->nwrites == 0;
        pthread_mutex_unlock(&s->mu);
        if (done) req_finish(c, r);
    }
    free(list);
    if (__atomic_exchange_n(&s->evict, 0, __ATOMIC_ACQ_REL)) http__evict_stalled(l);
    if (__atomic_load_n(&s->stop_requested, __ATOMIC_ACQUIRE) && !l->stopping) {
        __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
        http__loop_stop(l);
    }
    loop_maybe_end(l);
}

void http__loop_stop(http_loop_t *l)
{
    l->stopping = 1;
    if (l->listening) uv_close((uv_handle_t *)&l->listener, NULL);
    l->listening = 0;
    for (conn_t *c = l->conns; c; c = c->next)
        if (!c->req && !c->closing) http__conn_close(c);
    loop_maybe_end(l);
}

void http__conn_close(conn_t *c)
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

/* A connection on loop l, counted (not yet accepted or opened). */
static conn_t *conn_new(http_loop_t *l)
{
    http_server_t *s = l->s;
    conn_t *c = xcalloc(1, sizeof(*c));
    c->s = s;
    c->l = l;
    c->head.max = s->cfg.max_header;
    c->refs = 2; /* tcp + timer handles */
    uv_tcp_init(&l->loop, &c->tcp);
    uv_timer_init(&l->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->next = l->conns;
    if (l->conns) l->conns->prev = c;
    l->conns = c;
    __atomic_add_fetch(&s->nconns, 1, __ATOMIC_RELAXED);
    return c;
}

/*
 * At the limit with no idle connection of this loop to close for it: the
 * next loop looks at its own (1: handed). A socket of its own for the next
 * loop (a dup: this loop's handle closes the one it has), queued under s->mu.
 */
static int hand_to(conn_t *c, http_loop_t *next, int hops)
{
    http_server_t *s = c->s;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0) return 0;
    int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) return 0;
    handoff_t *h = xmalloc(sizeof(*h));
    *h = (handoff_t){NULL, dupfd, hops + 1};
    pthread_mutex_lock(&s->mu);
    int open = !__atomic_load_n(&next->ended, __ATOMIC_ACQUIRE);
    if (open) {
        /* Counted there from now on, before that loop can take it and weigh the limit. */
        c->handed = 1;
        __atomic_sub_fetch(&s->nconns, 1, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&c->l->load, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&next->load, 1, __ATOMIC_RELAXED);
        h->next = next->handoffs;
        next->handoffs = h;
    }
    pthread_mutex_unlock(&s->mu);
    if (!open) {
        close(dupfd);
        free(h);
        return 0;
    }
    uv_async_send(&next->async);
    http__conn_close(c);
    return 1;
}

/* The next loop still running after c's, unless every loop has had the newcomer (hops). */
static int hand_on(conn_t *c, int hops)
{
    http_server_t *s = c->s;
    for (int i = 1; hops + i < s->nloops; i++) {
        http_loop_t *next = &s->loops[(c->l->index + i) % s->nloops];
        if (!__atomic_load_n(&next->ended, __ATOMIC_ACQUIRE)) return hand_to(c, next, hops + i - 1);
    }
    return 0;
}

/*
 * The loop that wakes first accepts every connection waiting (libuv accepts
 * until none is left): 8 clients connecting at once all went to one loop,
 * which ran at 100% while the other idled. A newcomer goes to the loop with
 * the fewest connections (1: handed there).
 */
static int balance(conn_t *c)
{
    http_server_t *s = c->s;
    http_loop_t *best = c->l;
    int least = __atomic_load_n(&c->l->load, __ATOMIC_RELAXED) - 1; /* c aside */
    for (int i = 0; i < s->nloops; i++) {
        http_loop_t *l = &s->loops[i];
        int n = __atomic_load_n(&l->load, __ATOMIC_RELAXED);
        if (l != c->l && n < least && !__atomic_load_n(&l->ended, __ATOMIC_ACQUIRE)) {
            best = l;
            least = n;
        }
    }
    /* (hops -1: the loop it goes to is the first to weigh the limit for it, and every loop
     * after it, this one included, may still) */
    return best != c->l && hand_to(c, best, -1);
}

/* A connection accepted (or handed over): the limit, then reading. */
static void conn_start(conn_t *c, int hops)
{
    http_server_t *s = c->s;
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
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port); /* (a refusal logs it too) */
    }
    if (__atomic_load_n(&s->nconns, __ATOMIC_RELAXED) -
                __atomic_load_n(&s->nrefused, __ATOMIC_RELAXED) >
            s->cfg.max_conns &&
        !http__evict_idle(c->l, c)) {
        if (!hand_on(c, hops)) http__refuse(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    http__parser_init(c);
    c->head.owner = c;
    c->parser.data = &c->head;
    c->last_activity = c->msg_begin = http__now_ms(c->l);
    uv_timer_start(&c->timer, http__on_timer, 1000, 1000);
    http__start_reading(c);
}

void http__on_connection(uv_stream_t *lst, int status)
{
    http_loop_t *l = lst->data;
    if (status < 0) return;
    conn_t *c = conn_new(l);
    __atomic_add_fetch(&l->load, 1, __ATOMIC_RELAXED);
    if (uv_accept(lst, (uv_stream_t *)&c->tcp) != 0 || l->stopping) {
        http__conn_close(c);
        return;
    }
    if (l->s->nloops > 1 && balance(c)) return;
    conn_start(c, 0);
}

/* A socket another loop accepted and handed on (hand_on). */
static void conn_adopt(http_loop_t *l, uv_os_sock_t fd, int hops)
{
    conn_t *c = conn_new(l);
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        close(fd);
        http__conn_close(c);
        return;
    }
    if (l->stopping) {
        http__conn_close(c);
        return;
    }
    conn_start(c, hops);
}
