/*
 * net_call.c: the client's calls: prepared (header and crc) on the caller's
 * thread and submitted to the loop, queued per peer, sent over the least
 * busy ready connection, kept in its table until answered, timed out or
 * failed with the connection; completion (a waiter woken, or done run);
 * probes of suspect peers; the peers themselves (made, connected, pumped,
 * their health). Design, file map and thread map: net_int.h.
 */
#include "proto/net_int.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define SUSPECT_MS 1000 /* a suspect peer's calls: a short deadline until one is answered */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} waiter_t;

static int call_prepare(proto_peer_t *p, proto_call_t *c);

/* ---- calls (client side) ---- */

static proto_call_t **call_slot(proto_conn_t *c, uint64_t id)
{
    proto_call_t **pp = &c->calls[id % CALL_BUCKETS];
    while (*pp && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

static void call_complete(proto_call_t *call)
{
    proto_peer_t *p = call->peer;
    if (call->rc && call != &p->probe) atomic_fetch_add(&p->net->st.call_errors, 1);
    if (call->tok) {
        /* Ended: a cancel from now on has nothing to find (and the token may go with done). */
        pthread_mutex_lock(&call->tok->mu);
        call->tok->peer = NULL;
        pthread_mutex_unlock(&call->tok->mu);
        call->tok = NULL;
    }
    if (call->wait) {
        waiter_t *w = call->wait;
        pthread_mutex_lock(&w->mu);
        w->done = 1;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    } else {
        call->done(call, call->rc);
    }
}

/* One of the two events a call waits for; the second completes it. */
static void call_stage(proto_call_t *call, int bit)
{
    call->stage |= bit;
    if (call->stage == (WRITTEN | ANSWERED)) {
        if (call->conn) call->peer->inflight--;
        call_complete(call);
    }
}

/* Answer a call that is in a connection's table (or was never sent) with rc. */
void net__call_fail(proto_call_t *call, int rc)
{
    call->rc = rc;
    call_stage(call, ANSWERED);
}

static void call_written(uv_write_t *req, int status)
{
    proto_call_t *call = req->data;
    proto_conn_t *c = call->conn;
    if (status >= 0) c->wrote_ms = net__now_ms(c->net); /* bytes left: the link is live */
    if (status < 0 && !(call->stage & ANSWERED)) {
        /* Still in the table: the connection failing answers it. */
        call->stage |= WRITTEN;
        net__conn_close(c, ERR_IO);
        return;
    }
    call_stage(call, WRITTEN);
}

static void call_send(proto_conn_t *c, proto_call_t *call)
{
    proto_peer_t *p = c->peer;
    call->conn = c;
    call->stage = 0;
    proto_call_t **slot = &c->calls[call->id % CALL_BUCKETS];
    call->next = *slot;
    *slot = call;
    c->ncalls++;
    p->inflight++;
    call->bufs[0] = uv_buf_init((char *)call->hdr, PROTO_HDR);
    int nb = 1;
    if (call->fields_len)
        call->bufs[nb++] = uv_buf_init((char *)call->fields, (unsigned)call->fields_len);
    if (call->data_len)
        call->bufs[nb++] = uv_buf_init((char *)call->data, (unsigned)call->data_len);
    call->write_req.data = call;
    atomic_fetch_add(&c->net->st.frames_out, 1);
    if (uv_write(&call->write_req, (uv_stream_t *)&c->tcp, call->bufs, (unsigned)nb,
                 call_written) != 0) {
        call->stage |= WRITTEN; /* no callback will come */
        net__conn_close(c, ERR_IO);
    }
}

/* A response frame for connection c: its call answered (an unknown id was timed out: dropped). */
void net__on_response(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload)
{
    proto_call_t **slot = call_slot(c, h->id);
    proto_call_t *call = *slot;
    if (!call) return;
    *slot = call->next;
    c->ncalls--;
    if (call->type != h->type) {
        log_warn("event=proto_bad_response peer=%s want=%s got=%s", c->peer_node,
                 proto_type_name(call->type), proto_type_name(h->type));
        call->rc = ERR_CORRUPT;
    } else {
        call->rc = call->on_resp ? call->on_resp(call, h->status, payload, h->len) : h->status;
        int was = PROTO_PEER_SUSPECT;
        if (atomic_compare_exchange_strong(&c->peer->health, &was, PROTO_PEER_UP))
            log_info("event=proto_peer_up peer=%s why=answered", c->peer->node);
    }
    call_stage(call, ANSWERED);
}

/*
 * Calls given up on (loop thread): each still waiting for a connection or for
 * its response ends now with ERR_CANCELED; a late response finds no call and
 * is dropped. One that ended meanwhile is not found: nothing to do.
 */
void net__cancel(net_cancel_t *cl)
{
    while (cl) {
        net_cancel_t *x = cl;
        cl = x->next;
        proto_peer_t *p = x->peer;
        proto_call_t *found = NULL;
        for (proto_call_t **pp = &p->pending; *pp; pp = &(*pp)->next)
            if ((*pp)->id == x->id) {
                found = *pp;
                *pp = found->next;
                p->pending_tail = NULL;
                for (proto_call_t *c = p->pending; c; c = c->next)
                    p->pending_tail = c;
                found->conn = NULL;
                found->stage = WRITTEN;
                break;
            }
        proto_conn_t *stuck = NULL;
        for (int i = 0; !found && i < p->nconns; i++) {
            proto_call_t **slot = call_slot(p->conns[i], x->id);
            if ((found = *slot) != NULL) {
                *slot = found->next;
                p->conns[i]->ncalls--;
                /* Its bytes still not on the wire: the peer stopped reading. Only closing the
                 * connection gives the call's buffers back (as for a call timed out). Unless
                 * nothing is queued on the stream: then every byte is with the kernel and only
                 * the write's callback is still to come (next loop turn); it completes the
                 * call, and the connection (every other call on it) stays. */
                if (!(found->stage & WRITTEN) &&
                    uv_stream_get_write_queue_size((uv_stream_t *)&p->conns[i]->tcp) > 0)
                    stuck = p->conns[i];
            }
        }
        if (found) net__call_fail(found, ERR_CANCELED);
        if (stuck) {
            log_warn("event=proto_peer_stuck peer=%s: a call given up on was never sent; closing",
                     p->node);
            net__conn_close(stuck, ERR_IO);
        }
        free(x);
    }
}

proto_conn_t *net__pick_conn(proto_peer_t *p)
{
    proto_conn_t *best = NULL;
    for (int i = 0; i < p->nconns; i++) {
        proto_conn_t *c = p->conns[i];
        if (c->state == C_READY && (!best || c->ncalls < best->ncalls)) best = c;
    }
    return best;
}

void net__fail_pending(proto_peer_t *p, int rc)
{
    while (p->pending) {
        proto_call_t *call = p->pending;
        p->pending = call->next;
        call->conn = NULL;
        call->stage = WRITTEN;
        net__call_fail(call, rc);
    }
    p->pending_tail = NULL;
}

static void on_connect(uv_connect_t *req, int status);

void net__peer_connect(proto_peer_t *p)
{
    proto_net_t *n = p->net;
    proto_conn_t *c = xcalloc(1, sizeof(*c));
    c->net = n;
    c->peer = p;
    c->state = C_CONNECTING;
    c->since_ms = net__now_ms(n);
    c->stage = xmalloc(STAGE);
    c->refs = 1;
    c->next = n->conns;
    n->conns = c;
    snprintf(c->peer_node, sizeof(c->peer_node), "%s", p->node);
    uv_tcp_init(&n->loop, &c->tcp);
    c->tcp.data = c;
    p->conns[p->nconns++] = c;
    p->connecting++;
    c->connect_req.data = c;
    if (uv_tcp_connect(&c->connect_req, &c->tcp, (struct sockaddr *)&p->sa, on_connect) != 0) {
        p->connecting--;
        net__conn_close(c, ERR_IO);
    }
}

/* Start what can start: connect while calls wait, send while there is room. */
void net__peer_pump(proto_peer_t *p)
{
    proto_net_t *n = p->net;
    if (!p->pending) return;
    if (n->closed) {
        net__fail_pending(p, ERR_CLOSED);
        return;
    }
    int want = n->cfg.conns_per_peer;
    if (p->nconns < want && !p->connecting && net__now_ms(n) >= p->retry_at_ms)
        net__peer_connect(p);
    if (!p->nconns && net__now_ms(n) < p->retry_at_ms) {
        net__fail_pending(p, ERR_IO); /* down: fail fast until the retry */
        return;
    }
    proto_conn_t *c;
    while (p->pending && p->inflight < n->cfg.max_inflight && (c = net__pick_conn(p))) {
        proto_call_t *call = p->pending;
        p->pending = call->next;
        if (!p->pending) p->pending_tail = NULL;
        call_send(c, call);
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    proto_conn_t *c = req->data;
    proto_peer_t *p = c->peer;
    p->connecting--;
    if (c->state == C_CLOSING) return;
    if (status < 0) {
        log_warn("event=proto_connect_failed peer=%s addr=%s err=%s", p->node, p->addr,
                 uv_strerror(status));
        net__conn_close(c, ERR_IO);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (getrandom(c->nonce_mine, PROTO_NONCE, 0) != PROTO_NONCE ||
        uv_read_start((uv_stream_t *)&c->tcp, net__on_alloc, net__on_read) != 0) {
        net__conn_close(c, ERR_IO);
        return;
    }
    net__client_hello(c);
}

/* ---- probes, the peers' queues (loop thread) ---- */

static void probe_done(proto_call_t *c, int rc)
{
    (void)rc; /* an answer made the peer up (net__on_response); a failure leaves it suspect */
    ((proto_peer_t *)c->arg)->probing = 0;
}

/* Ping a suspect peer (loop thread). */
void net__probe(proto_net_t *n, proto_peer_t *p, uint64_t now)
{
    p->probe = (proto_call_t){.type = PROTO_PING, .done = probe_done, .arg = p};
    if (call_prepare(p, &p->probe) != 0) return;
    p->probing = 1;
    p->probe_ms = now;
    atomic_fetch_add(&n->st.probes, 1);
    net__enqueue(n, &p->probe, now);
}

/* A submitted call joins its peer's queue (loop thread). */
void net__enqueue(proto_net_t *n, proto_call_t *call, uint64_t now)
{
    proto_peer_t *p = call->peer;
    call->next = NULL;
    call->conn = NULL;
    /* A suspect peer (a call of it timed out) gets a short deadline until it answers; so does
     * one the control plane says is gone (asked only when the others cannot settle a read). */
    uint32_t limit = n->cfg.timeout_ms;
    if ((atomic_load(&p->health) == PROTO_PEER_SUSPECT || net__peer_away(p)) && limit > SUSPECT_MS)
        limit = SUSPECT_MS;
    call->deadline_ms = now + limit;
    if (p->pending_tail)
        p->pending_tail->next = call;
    else
        p->pending = call;
    p->pending_tail = call;
    net__peer_pump(p);
}

/* ---- peers and calls (any thread) ---- */

proto_peer_t *proto_net_peer(proto_net_t *n, const char *node, const char *addr)
{
    if (strlen(node) > PROTO_MAX_NAME || strlen(addr) >= sizeof(((proto_peer_t *)0)->addr))
        return NULL;
    pthread_mutex_lock(&n->mu);
    proto_peer_t *p;
    for (p = n->peers; p; p = p->next)
        if (strcmp(p->node, node) == 0 && strcmp(p->addr, addr) == 0) break;
    if (!p) {
        p = xcalloc(1, sizeof(*p));
        p->net = n;
        snprintf(p->node, sizeof(p->node), "%s", node);
        snprintf(p->addr, sizeof(p->addr), "%s", addr);
        if (net__parse_addr(addr, &p->sa) != 0) {
            pthread_mutex_unlock(&n->mu);
            log_error("event=proto_bad_peer_addr peer=%s addr=%s", node, addr);
            free(p);
            return NULL;
        }
        atomic_store(&p->health, PROTO_PEER_UP); /* until a connect says otherwise */
        p->next = n->peers;
        n->peers = p;
    }
    pthread_mutex_unlock(&n->mu);
    return p;
}

/*
 * Away as the control plane last said, unless the peer came back since: a
 * restarted node is back for this one when a connection to it is made ready,
 * not at the next lease check (which says it again if it is still gone).
 */
int net__peer_away(proto_peer_t *p)
{
    uint64_t a = atomic_load(&p->away);
    return a && a - 1 == atomic_load(&p->comebacks);
}

proto_health_t proto_peer_health(const proto_peer_t *p)
{
    proto_peer_t *q = (proto_peer_t *)p;
    if (net__peer_away(q)) return PROTO_PEER_DOWN;
    return (proto_health_t)atomic_load(&q->health);
}

void proto_peer_set_away(proto_peer_t *p, int away)
{
    uint64_t was = atomic_exchange(&p->away, away ? 1 + atomic_load(&p->comebacks) : 0);
    if (!was == !away) return;
    if (away)
        log_warn("event=proto_peer_away peer=%s: its lease is gone; read and written around",
                 p->node);
    else
        log_info("event=proto_peer_back peer=%s: registered again", p->node);
}

const char *proto_peer_node(const proto_peer_t *p)
{
    return p->node;
}

uint64_t proto_peer_comebacks(const proto_peer_t *p)
{
    return atomic_load(&((proto_peer_t *)p)->comebacks);
}

/* Header and crc of c on the caller's thread: the loop only writes buffers. */
static int call_prepare(proto_peer_t *p, proto_call_t *c)
{
    size_t len = c->fields_len + c->data_len;
    if (len > PROTO_MAX_PAYLOAD || c->type == 0 || c->type >= PROTO_TYPE_END) return ERR_TOO_LARGE;
    c->id = atomic_fetch_add(&p->net->next_id, 1);
    c->peer = p;
    c->rc = 0;
    c->stage = 0;
    c->conn = NULL;
    proto_hdr_t h = {.type = c->type, .id = c->id, .len = (uint32_t)len};
    proto_hdr_encode(c->hdr, &h);
    uint32_t crc = proto_hdr_crc_start(c->hdr);
    if (c->fields_len) crc = crc32c(crc, c->fields, c->fields_len);
    if (c->data_len) crc = crc32c(crc, c->data, c->data_len);
    proto_hdr_put_crc(c->hdr, crc);
    return 0;
}

/* Queue a prepared call for the loop; ERR_CLOSED when the net is stopping. */
static int call_submit(proto_peer_t *p, proto_call_t *c)
{
    proto_net_t *n = p->net;
    atomic_fetch_add(&n->st.calls, 1);
    atomic_fetch_add(&p->calls, 1);
    c->next = NULL;
    pthread_mutex_lock(&n->mu);
    if (n->stopping) {
        pthread_mutex_unlock(&n->mu);
        return ERR_CLOSED;
    }
    if (n->submit_tail)
        n->submit_tail->next = c;
    else
        n->submit = c;
    n->submit_tail = c;
    pthread_mutex_unlock(&n->mu);
    uv_async_send(&n->wake);
    return 0;
}

void proto_cancel_init(proto_cancel_t *t)
{
    pthread_mutex_init(&t->mu, NULL);
    t->canceled = 0;
    t->peer = NULL;
    t->id = 0;
}

void proto_cancel_destroy(proto_cancel_t *t)
{
    pthread_mutex_destroy(&t->mu);
}

void proto_cancel(proto_cancel_t *t)
{
    pthread_mutex_lock(&t->mu);
    t->canceled = 1;
    proto_peer_t *p = t->peer;
    if (p) {
        /* The loop finds the call by id: by the time it looks, the call may have ended. */
        net_cancel_t *x = xmalloc(sizeof(*x));
        x->peer = p;
        x->id = t->id;
        proto_net_t *n = p->net;
        pthread_mutex_lock(&n->mu);
        x->next = n->cancels;
        n->cancels = x;
        pthread_mutex_unlock(&n->mu);
        uv_async_send(&n->wake);
    }
    pthread_mutex_unlock(&t->mu);
}

int proto_cancel_in_flight(proto_cancel_t *t)
{
    pthread_mutex_lock(&t->mu);
    int r = t->peer != NULL;
    pthread_mutex_unlock(&t->mu);
    return r;
}

/*
 * Submit c; with a token t (may be NULL), under its lock (then the net's, as proto_cancel
 * takes them): a cancel either comes first (nothing is sent: ERR_CANCELED) or finds the call
 * queued for the loop, which handles submits before cancels. own: the call holds the token
 * until it ends (call_complete lets go of it; an asynchronous call), else its caller does.
 */
static int submit_with(proto_peer_t *p, proto_call_t *c, proto_cancel_t *t, int own)
{
    if (!t) return call_submit(p, c);
    int rc = ERR_CANCELED;
    pthread_mutex_lock(&t->mu);
    if (!t->canceled) {
        t->peer = p;
        t->id = c->id;
        if (own) c->tok = t;
        if ((rc = call_submit(p, c)) != 0) {
            t->peer = NULL;
            c->tok = NULL;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* A call run and waited for; with a token t (may be NULL), one that can be given up on. */
static int call_wait(proto_peer_t *p, proto_call_t *c, proto_cancel_t *t)
{
    int rc = call_prepare(p, c);
    if (rc) return rc;
    waiter_t w = {.done = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    c->wait = &w;
    c->tok = NULL;
    rc = submit_with(p, c, t, 0);
    if (rc == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = c->rc;
    }
    if (t) {
        pthread_mutex_lock(&t->mu);
        t->peer = NULL;
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

int proto_call(proto_peer_t *p, proto_call_t *c)
{
    return call_wait(p, c, NULL);
}

int proto_call_cancelable(proto_peer_t *p, proto_call_t *c, proto_cancel_t *t)
{
    return call_wait(p, c, t);
}

void proto_call_async(proto_peer_t *p, proto_call_t *c)
{
    proto_call_async_cancelable(p, c, NULL);
}

void proto_call_async_cancelable(proto_peer_t *p, proto_call_t *c, proto_cancel_t *t)
{
    c->wait = NULL;
    c->tok = NULL;
    int rc = call_prepare(p, c);
    if (rc == 0) rc = submit_with(p, c, t, 1);
    if (rc) {
        c->rc = rc;
        c->done(c, rc);
    }
}

int proto_net_peers(proto_net_t *n, proto_peer_info_t *out, int cap)
{
    int i = 0;
    pthread_mutex_lock(&n->mu);
    for (proto_peer_t *p = n->peers; p && i < cap; p = p->next, i++) {
        snprintf(out[i].node, sizeof(out[i].node), "%s", p->node);
        out[i].health = (proto_health_t)atomic_load(&p->health);
        out[i].calls = atomic_load(&p->calls);
        out[i].timeouts = atomic_load(&p->timeouts);
    }
    pthread_mutex_unlock(&n->mu);
    return i;
}
