/*
 * net_conn.c: the loop and its connections: start and stop, the listener,
 * reading (a 64 KiB staging buffer; a frame larger than it read in place
 * into its own allocation), the dispatch of whole frames to the handshake,
 * the calls or the server, the tick, the queues other threads fill, closing.
 * Design, file map and thread map: net_int.h.
 */
#include "proto/net_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <openssl/crypto.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS       100
#define HANDSHAKE_MAX 1024 /* a HELLO or AUTH frame's payload is far smaller */
#define PROBE_MS      500  /* a suspect peer is pinged this often: its answer makes it up again */

/* ---- helpers ---- */

int net__parse_addr(const char *addr, struct sockaddr_storage *sa)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof(host)) return ERR_INVAL;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || end == colon + 1) return ERR_INVAL;
    size_t hl = (size_t)(colon - addr);
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
        memcpy(host, addr + 1, hl - 2);
        host[hl - 2] = 0;
        return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)sa) ? ERR_INVAL : 0;
    }
    memcpy(host, addr, hl);
    host[hl] = 0;
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)sa) ? ERR_INVAL : 0;
}

/* ---- reading ---- */

/* The allocation's start is kept in the 8 bytes before the frame. */
#define FRAME_PAGE 4096u

uint8_t *net__frame_alloc(size_t total, size_t aligned_at)
{
    uint8_t *base;
    size_t pad = sizeof(base);
    if (aligned_at) {
        pad = (FRAME_PAGE - aligned_at % FRAME_PAGE) % FRAME_PAGE;
        if (pad < sizeof(base)) pad += FRAME_PAGE;
        base = xaligned_alloc(FRAME_PAGE, pad + total);
    } else {
        base = xmalloc(pad + total);
    }
    memcpy(base + pad - sizeof(base), &base, sizeof(base));
    return base + pad;
}

void net__frame_free(uint8_t *frame)
{
    if (!frame) return;
    uint8_t *base;
    memcpy(&base, frame - sizeof(base), sizeof(base));
    free(base);
}

uint8_t *net__frame_shrink(uint8_t *frame, size_t total)
{
    uint8_t *base;
    memcpy(&base, frame - sizeof(base), sizeof(base));
    if (frame - base != (ptrdiff_t)sizeof(base)) { /* placed: a page's alignment to keep */
        uint8_t *cut = net__frame_alloc(total, 0);
        memcpy(cut, frame, total);
        free(base);
        return cut;
    }
    base = xrealloc(base, sizeof(base) + total);
    memcpy(base, &base, sizeof(base));
    return base + sizeof(base);
}

void net__on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    proto_conn_t *c = h->data;
    if (c->frame)
        *buf =
            uv_buf_init((char *)c->frame + c->frame_len, (unsigned)(c->frame_need - c->frame_len));
    else
        *buf = uv_buf_init((char *)c->stage + c->stage_len, (unsigned)(STAGE - c->stage_len));
}

static void handle_frame(proto_conn_t *c, const proto_hdr_t *h, uint8_t *frame, int owned);

/*
 * Handle the whole frames staged, keep a partial one: its start moves to a
 * frame of its own when it is larger than the stage. Stops while paused.
 */
void net__drain_stage(proto_conn_t *c)
{
    size_t at = 0;
    while (c->state != C_CLOSING && !c->paused) {
        proto_hdr_t h;
        int rc = proto_hdr_decode(c->stage + at, c->stage_len - at, &h);
        if (rc == ERR_AGAIN) break;
        if (rc) {
            atomic_fetch_add(&c->net->st.bad_frames, 1);
            log_limited(LOG_LVL_WARN, "event=proto_bad_frame peer=%s",
                        c->peer_node[0] ? c->peer_node : "?");
            net__conn_close(c, ERR_CORRUPT);
            return;
        }
        if (c->state != C_READY && h.len > HANDSHAKE_MAX) {
            /* Before the handshake nobody gets to make this node hold a large frame. */
            atomic_fetch_add(&c->net->st.bad_frames, 1);
            log_limited(LOG_LVL_WARN,
                        "event=proto_bad_frame peer=? why=\"%u-byte frame before the handshake\"",
                        h.len);
            net__conn_close(c, ERR_CORRUPT);
            return;
        }
        size_t total = PROTO_HDR + (size_t)h.len;
        if (c->stage_len - at >= total) {
            handle_frame(c, &h, c->stage + at, 0);
            at += total;
            continue;
        }
        if (total > STAGE) {
            /* A PUT's data on a page: placed once its fields are staged (while the stage has
             * room for them; a PUT whose fields do not decode or fit goes anywhere). */
            size_t data_at = 0;
            if (h.type == PROTO_PUT && !(h.flags & PROTO_F_RESP)) {
                data_at =
                    proto_put_data_at(c->stage + at + PROTO_HDR, c->stage_len - at - PROTO_HDR);
                if (!data_at && c->stage_len < STAGE) break;
            }
            /* A request's frame is served memory from its first byte: it waits for room. */
            if (!c->peer && !net__admit_frame(c, total)) break;
            c->progress_ms = c->frame_ms = net__now_ms(c->net);
            c->frame = net__frame_alloc(total, data_at ? PROTO_HDR + data_at : 0);
            c->frame_need = total;
            c->frame_len = c->stage_len - at;
            memcpy(c->frame, c->stage + at, c->frame_len);
            at = c->stage_len;
        }
        break;
    }
    if (c->state == C_CLOSING) return;
    memmove(c->stage, c->stage + at, c->stage_len - at);
    c->stage_len -= at;
}

void net__on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    proto_conn_t *c = s->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            log_limited(LOG_LVL_INFO, "event=proto_conn_lost peer=%s err=%s",
                        c->peer_node[0] ? c->peer_node : "?", uv_strerror((int)nread));
        net__conn_close(c, ERR_IO);
        return;
    }
    if (c->frame) {
        c->frame_len += (size_t)nread;
        if (nread) c->progress_ms = net__now_ms(c->net);
        if (c->frame_len < c->frame_need) return;
        uint8_t *f = c->frame;
        c->frame = NULL;
        if (!c->peer) net__frame_done(c); /* charged again as the request it is */
        proto_hdr_t h;
        if (proto_hdr_decode(f, c->frame_need, &h) != 0) { /* decoded once already */
            net__frame_free(f);
            net__conn_close(c, ERR_CORRUPT);
            return;
        }
        handle_frame(c, &h, f, 1);
        if (c->state == C_CLOSING) return;
    } else {
        c->stage_len += (size_t)nread;
        if (nread) c->progress_ms = net__now_ms(c->net);
    }
    net__drain_stage(c);
}

static void handle_frame(proto_conn_t *c, const proto_hdr_t *h, uint8_t *frame, int owned)
{
    atomic_fetch_add(&c->net->st.frames_in, 1);
    if (!proto_frame_ok(frame, frame + PROTO_HDR, h->len)) {
        atomic_fetch_add(&c->net->st.bad_frames, 1);
        log_limited(LOG_LVL_WARN, "event=proto_bad_crc peer=%s type=%s",
                    c->peer_node[0] ? c->peer_node : "?", proto_type_name(h->type));
        if (owned) net__frame_free(frame);
        net__conn_close(c, ERR_CORRUPT);
        return;
    }
    if (c->state == C_READY && !c->peer) {
        net__serve_frame(c, h, frame, owned);
        return;
    }
    if (c->state == C_READY)
        net__on_response(c, h, frame + PROTO_HDR);
    else if (c->peer)
        net__client_handshake(c, h, frame + PROTO_HDR);
    else
        net__server_handshake(c, h, frame + PROTO_HDR);
    if (owned) net__frame_free(frame);
}

/* Shutting down: once nothing is left, close the async handle and the loop ends. */
static void maybe_finish(proto_net_t *n)
{
    if (n->closed && !n->inbounds && !n->conns && !uv_is_closing((uv_handle_t *)&n->wake))
        uv_close((uv_handle_t *)&n->wake, NULL);
}

void net__conn_unref(proto_conn_t *c)
{
    if (--c->refs) return;
    proto_net_t *n = c->net;
    for (proto_conn_t **pp = &n->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    n->npaused -= c->paused;
    free(c->stage);
    if (c->frame && !c->peer) net__frame_done(c);
    net__frame_free(c->frame);
    free(c);
    maybe_finish(n);
}

/* ---- connections ---- */

static void on_closed(uv_handle_t *h)
{
    net__conn_unref(h->data);
}

/* Close c: its calls fail (ERR_IO: the peer is lost; ERR_CLOSED, ERR_DENIED: as why), its peer
 * forgets it. */
void net__conn_close(proto_conn_t *c, int why)
{
    proto_net_t *n = c->net;
    if (c->state == C_CLOSING && uv_is_closing((uv_handle_t *)&c->tcp)) return;
    c->state = C_CLOSING;
    int rc = why == ERR_CLOSED || why == ERR_DENIED ? why : ERR_IO; /* refused: said as such */
    /* The peer's state first: a caller woken by its call failing sees the peer as it is now. */
    proto_peer_t *p = c->peer;
    if (p) {
        for (int i = 0; i < p->nconns; i++)
            if (p->conns[i] == c) {
                p->conns[i] = p->conns[--p->nconns];
                break;
            }
        if (!net__pick_conn(p)) {
            if (atomic_exchange(&p->health, PROTO_PEER_DOWN) != PROTO_PEER_DOWN && !n->closed)
                log_warn("event=proto_peer_down peer=%s addr=%s", p->node, p->addr);
            /* 50 ms after the first failure, doubling up to retry_ms: a peer that is
               restarting is back soon, one that is gone costs a connect a while. */
            uint64_t wait = 50u << (p->fails < 10 ? p->fails : 10);
            p->retry_at_ms = net__now_ms(n) + (wait < n->cfg.retry_ms ? wait : n->cfg.retry_ms);
            p->fails++;
            if (!p->connecting) net__fail_pending(p, rc);
        }
    }
    for (int b = 0; b < CALL_BUCKETS; b++)
        while (c->calls[b]) {
            proto_call_t *call = c->calls[b];
            c->calls[b] = call->next;
            c->ncalls--;
            net__call_fail(call, rc);
        }
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_accept(uv_stream_t *server, int status)
{
    proto_net_t *n = server->data;
    if (status < 0 || n->closed) return;
    proto_conn_t *c = xcalloc(1, sizeof(*c));
    c->net = n;
    c->state = C_HELLO;
    c->since_ms = c->drained_ms = net__now_ms(n);
    c->stage = xmalloc(STAGE);
    c->refs = 1;
    uv_tcp_init(&n->loop, &c->tcp);
    c->tcp.data = c;
    c->next = n->conns;
    n->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        net__conn_close(c, ERR_IO);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, net__on_alloc, net__on_read) != 0)
        net__conn_close(c, ERR_IO);
}

/* ---- the loop ---- */

static void on_tick(uv_timer_t *t)
{
    proto_net_t *n = t->data;
    uint64_t now = net__now_ms(n);
    for (proto_conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_CLOSING) continue;
        if (c->state != C_READY && now - c->since_ms > n->cfg.timeout_ms) {
            log_limited(LOG_LVL_WARN, "event=proto_handshake_timeout peer=%s",
                        c->peer_node[0] ? c->peer_node : "?");
            net__conn_close(c, ERR_IO);
            continue;
        }
        /* A frame that stopped arriving holds its whole allocation: the peer is stuck. So is
         * one arriving a byte now and then: a frame has a deadline and a second a MiB. */
        if (c->frame && (now - c->progress_ms > n->cfg.timeout_ms ||
                         now - c->frame_ms > n->cfg.timeout_ms + (c->frame_need >> 20) * 1000)) {
            log_limited(LOG_LVL_WARN, "event=proto_frame_stalled peer=%s bytes=%zu of=%zu",
                        c->peer_node[0] ? c->peer_node : "?", c->frame_len, c->frame_need);
            net__conn_close(c, ERR_IO);
            continue;
        }
        /* So is a frame cut short in the stage (its header, a PUT's fields): once drained,
         * what the stage holds is part of a frame, and a connection read from (not paused)
         * whose part stopped growing has a peer that stopped inside it. */
        if (!c->frame && c->stage_len && !c->paused && c->state == C_READY &&
            now - c->progress_ms > n->cfg.timeout_ms) {
            log_limited(LOG_LVL_WARN, "event=proto_frame_stalled peer=%s bytes=%zu staged",
                        c->peer_node[0] ? c->peer_node : "?", c->stage_len);
            net__conn_close(c, ERR_IO);
            continue;
        }
        /*
         * A slow but live link is not a dead peer: while bytes move on the connection (a
         * response arriving, or requests leaving) within the deadline, its calls wait on.
         * A call's deadline is for a peer that went silent, not for a long transfer.
         */
        size_t wq =
            c->state == C_READY ? uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) : 0;
        if (wq < c->wq_bytes) c->wrote_ms = now;
        if (!wq || wq < c->wq_bytes) c->drained_ms = now;
        c->wq_bytes = wq;
        if (!c->peer && wq && now - c->drained_ms > n->cfg.timeout_ms) {
            /* A peer that does not read its replies: they hold the serve budget until written. */
            log_limited(LOG_LVL_WARN, "event=proto_reader_stalled peer=%s queued=%zu: closing",
                        c->peer_node, wq);
            net__conn_close(c, ERR_IO);
            continue;
        }
        int live = (c->frame && now - c->progress_ms < n->cfg.timeout_ms) ||
                   (wq && now - c->wrote_ms < n->cfg.timeout_ms);
        int stuck = 0;
        for (int b = 0; b < CALL_BUCKETS; b++)
            for (proto_call_t **pp = &c->calls[b]; *pp;) {
                proto_call_t *call = *pp;
                /* Live: a few deadlines more at most (traffic for other calls must not keep
                 * one whose answer never comes waiting forever). */
                if (call->deadline_ms > now ||
                    (live && now < call->deadline_ms + 3ull * n->cfg.timeout_ms)) {
                    pp = &call->next;
                    continue;
                }
                *pp = call->next;
                c->ncalls--;
                atomic_fetch_add(call == &c->peer->probe ? &n->st.probe_timeouts : &n->st.timeouts,
                                 1);
                if (call != &c->peer->probe) atomic_fetch_add(&c->peer->timeouts, 1);
                if (atomic_exchange(&c->peer->health, PROTO_PEER_SUSPECT) == PROTO_PEER_UP) {
                    c->peer->probe_ms = now; /* its first probe a while from now */
                    log_warn("event=proto_peer_suspect peer=%s type=%s why=timeout", c->peer->node,
                             proto_type_name(call->type));
                }
                /* Its bytes still not on the wire: the peer stopped reading. Only closing
                   the connection gives the call's buffers back (and the caller with them). */
                stuck |= !(call->stage & WRITTEN);
                net__call_fail(call, ERR_IO);
            }
        if (stuck) {
            log_warn("event=proto_peer_stuck peer=%s: closing", c->peer->node);
            net__conn_close(c, ERR_IO);
        }
    }
    pthread_mutex_lock(&n->mu);
    proto_peer_t *peers = n->peers;
    pthread_mutex_unlock(&n->mu);
    for (proto_peer_t *p = peers; p; p = p->next) {
        /* Calls waiting for a connection past their deadline. */
        for (proto_call_t **pp = &p->pending; *pp;) {
            proto_call_t *call = *pp;
            if (call->deadline_ms > now) {
                pp = &call->next;
                continue;
            }
            *pp = call->next;
            call->conn = NULL;
            call->stage = WRITTEN;
            atomic_fetch_add(call == &p->probe ? &n->st.probe_timeouts : &n->st.timeouts, 1);
            if (call != &p->probe) atomic_fetch_add(&p->timeouts, 1);
            net__call_fail(call, ERR_IO);
        }
        p->pending_tail = NULL;
        for (proto_call_t *call = p->pending; call; call = call->next)
            p->pending_tail = call;
        net__peer_pump(p);
        if (atomic_load(&p->health) == PROTO_PEER_SUSPECT && !p->probing &&
            now - p->probe_ms >= PROBE_MS && !n->closed)
            net__probe(n, p, now);
        /* A down peer is reconnected on its backoff even when no call waits for it (readers
           avoid it, so none might ever come to find it back). */
        if (atomic_load(&p->health) == PROTO_PEER_DOWN && !n->closed && !p->nconns &&
            !p->connecting && now >= p->retry_at_ms)
            net__peer_connect(p);
    }
}

static void close_all(proto_net_t *n)
{
    n->closed = 1;
    if (n->listening) uv_close((uv_handle_t *)&n->listener, NULL);
    n->listening = 0;
    for (proto_conn_t *c = n->conns; c; c = c->next)
        if (c->state != C_CLOSING || !uv_is_closing((uv_handle_t *)&c->tcp))
            net__conn_close(c, ERR_CLOSED);
    pthread_mutex_lock(&n->mu);
    proto_peer_t *peers = n->peers;
    pthread_mutex_unlock(&n->mu);
    for (proto_peer_t *p = peers; p; p = p->next)
        net__fail_pending(p, ERR_CLOSED);
    if (!uv_is_closing((uv_handle_t *)&n->tick)) uv_close((uv_handle_t *)&n->tick, NULL);
}

static void on_wake(uv_async_t *a)
{
    proto_net_t *n = a->data;
    pthread_mutex_lock(&n->mu);
    proto_call_t *calls = n->submit;
    proto_inbound_t *replies = n->replies;
    n->submit = n->submit_tail = NULL;
    n->replies = n->replies_tail = NULL;
    net_cancel_t *cancels = n->cancels;
    n->cancels = NULL;
    int stopping = n->stopping;
    pthread_mutex_unlock(&n->mu);
    uint64_t now = net__now_ms(n);
    if (stopping && !n->closed) close_all(n);
    while (replies) {
        proto_inbound_t *in = replies;
        replies = in->next;
        net__send_reply(n, in);
    }
    if (!n->closed) net__resume_paused(n);
    while (calls) {
        proto_call_t *call = calls;
        calls = call->next;
        net__enqueue(n, call, now);
    }
    /* After the submits: a call given up on may have been submitted in the same wake. */
    net__cancel(cancels);
    maybe_finish(n);
}

static void run_loop(void *arg)
{
    proto_net_t *n = arg;
    uv_run(&n->loop, UV_RUN_DEFAULT);
}

int proto_net_start(const proto_net_cfg_t *cfg, proto_net_t **out)
{
    if (!cfg->cluster || !cfg->node || !cfg->secret || cfg->secret_len < 16 ||
        strlen(cfg->cluster) > PROTO_MAX_NAME || strlen(cfg->node) > PROTO_MAX_NAME ||
        (cfg->listen && !cfg->handle))
        return ERR_INVAL;
    proto_net_t *n = xcalloc(1, sizeof(*n));
    n->cfg = *cfg;
    if (!n->cfg.conns_per_peer) n->cfg.conns_per_peer = 2;
    if (n->cfg.conns_per_peer > MAX_CONNS) n->cfg.conns_per_peer = MAX_CONNS;
    if (!n->cfg.timeout_ms) n->cfg.timeout_ms = 10000;
    if (!n->cfg.retry_ms) n->cfg.retry_ms = 1000;
    if (!n->cfg.serve_budget) n->cfg.serve_budget = 256u << 20;
    if (!n->cfg.max_inflight) n->cfg.max_inflight = 256;
    n->cluster = xstrdup(cfg->cluster);
    n->node = xstrdup(cfg->node);
    n->secret = xmalloc(cfg->secret_len);
    memcpy(n->secret, cfg->secret, cfg->secret_len);
    atomic_store(&n->epoch, cfg->epoch);
    atomic_store(&n->next_id, 1);
    pthread_mutex_init(&n->mu, NULL);
    uv_loop_init(&n->loop);
    uv_async_init(&n->loop, &n->wake, on_wake);
    n->wake.data = n;
    uv_timer_init(&n->loop, &n->tick);
    n->tick.data = n;
    uv_timer_start(&n->tick, on_tick, TICK_MS, TICK_MS);
    if (cfg->listen) {
        struct sockaddr_storage sa;
        int rc = net__parse_addr(cfg->listen, &sa);
        uv_tcp_init(&n->loop, &n->listener);
        n->listener.data = n;
        n->listening = 1;
        if (rc == 0) rc = uv_tcp_bind(&n->listener, (struct sockaddr *)&sa, 0);
        if (rc == 0) rc = uv_listen((uv_stream_t *)&n->listener, 128, on_accept);
        if (rc) {
            log_error("event=proto_listen_failed addr=%s err=%s", cfg->listen,
                      rc == ERR_INVAL ? "bad address" : uv_strerror(rc));
            close_all(n);
            uv_close((uv_handle_t *)&n->wake, NULL);
            uv_run(&n->loop, UV_RUN_DEFAULT);
            uv_loop_close(&n->loop);
            pthread_mutex_destroy(&n->mu);
            free(n->cluster);
            free(n->node);
            free(n->secret);
            free(n);
            return rc == ERR_INVAL ? ERR_INVAL : ERR_IO;
        }
        struct sockaddr_storage bound;
        int blen = sizeof(bound);
        if (uv_tcp_getsockname(&n->listener, (struct sockaddr *)&bound, &blen) == 0)
            n->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                        : ((struct sockaddr_in *)&bound)->sin_port);
    }
    if (uv_thread_create(&n->thread, run_loop, n) != 0) abort(); /* as xmalloc: no way on */
    *out = n;
    return 0;
}

void proto_net_stop(proto_net_t *n)
{
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    n->stopping = 1;
    pthread_mutex_unlock(&n->mu);
    uv_async_send(&n->wake);
    uv_thread_join(&n->thread);
    uv_loop_close(&n->loop);
    for (net_cancel_t *x = n->cancels, *next; x; x = next) {
        next = x->next;
        free(x);
    }
    for (proto_peer_t *p = n->peers, *next; p; p = next) {
        next = p->next;
        free(p);
    }
    pthread_mutex_destroy(&n->mu);
    free(n->cluster);
    free(n->node);
    OPENSSL_cleanse(n->secret, n->cfg.secret_len);
    free(n->secret);
    free(n);
}

int proto_net_port(const proto_net_t *n)
{
    return n->port;
}

void proto_net_set_epoch(proto_net_t *n, uint64_t epoch)
{
    atomic_store(&n->epoch, epoch);
}

void proto_net_stats(proto_net_t *n, proto_net_stats_t *st)
{
    st->calls = atomic_load(&n->st.calls);
    st->call_errors = atomic_load(&n->st.call_errors);
    st->timeouts = atomic_load(&n->st.timeouts);
    st->probes = atomic_load(&n->st.probes);
    st->probe_timeouts = atomic_load(&n->st.probe_timeouts);
    st->frames_in = atomic_load(&n->st.frames_in);
    st->frames_out = atomic_load(&n->st.frames_out);
    st->bad_frames = atomic_load(&n->st.bad_frames);
    st->refused = atomic_load(&n->st.refused);
    st->paused_reads = atomic_load(&n->st.paused_reads);
    st->serving_bytes = atomic_load(&n->st.serving);
}
