/*
 * net: the protocol's loop thread, connections, handshake, multiplexed
 * calls and served requests (the contract is in net.h).
 *
 * Everything on a connection happens on the loop thread: reads, writes,
 * the table of calls in flight, timeouts. Other threads reach it through
 * two queues under net->mu, drained when the async handle fires: calls to
 * start (proto_call*) and replies to send (proto_reply). A call's header
 * and crc are made by its caller's thread, so the loop never walks a
 * payload: it only hands buffers to uv_write.
 *
 * Reading: a connection reads into a 64 KiB staging buffer; frames whole in
 * it are handled from there (a response is decoded into its caller's
 * places, a request copied into its own allocation). A frame larger than
 * what the buffer holds gets its own allocation of its exact size, and the
 * reads that follow land straight in it. The server stops reading (leaving
 * what is staged) while the requests it serves hold more than
 * serve_budget bytes; each reply sent may resume the paused connections.
 *
 * A call completes once it was both written (uv_write's callback: its
 * buffers are free to go) and answered (a response, a timeout or a lost
 * connection), whichever comes last.
 */
#include "proto/net.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define STAGE         (64u << 10)
#define CALL_BUCKETS  64
#define MAX_CONNS     8
#define TICK_MS       100
#define HANDSHAKE_MAX 1024 /* a HELLO or AUTH frame's payload is far smaller */
#define CONN_INFLIGHT 256  /* requests a connection may have being served before reading pauses */
#define SUSPECT_MS    1000 /* a suspect peer's calls: a short deadline until one is answered */
#define PROBE_MS      500  /* a suspect peer is pinged this often: its answer makes it up again */

#define WRITTEN  1
#define ANSWERED 2

enum { C_CONNECTING, C_HELLO, C_AUTH, C_READY, C_CLOSING };

struct proto_conn {
    proto_net_t *net;
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    proto_peer_t *peer; /* NULL: accepted by the listener */
    int state;
    uint64_t since_ms; /* when the state began (handshake deadline) */
    uint8_t nonce_mine[PROTO_NONCE], nonce_theirs[PROTO_NONCE];
    char peer_node[PROTO_MAX_NAME + 1];
    uint8_t *stage;
    size_t stage_len;
    uint8_t *frame; /* a large frame read in place: frame_need bytes when whole */
    size_t frame_len, frame_need;
    proto_call_t *calls[CALL_BUCKETS]; /* client: in flight, by id */
    int ncalls;
    int refs;     /* the handle (until its close callback) + inbounds not yet replied */
    int paused;   /* server: reading stopped (serve budget, or too many requests in flight) */
    int inflight; /* server: requests received whose replies are not yet written */
    uint64_t progress_ms; /* when the frame being read in place last grew */
    struct proto_conn *next;
};

struct proto_peer {
    proto_net_t *net;
    char node[PROTO_MAX_NAME + 1];
    char addr[300];
    struct sockaddr_storage sa;
    proto_conn_t *conns[MAX_CONNS];
    int nconns, connecting;
    proto_call_t *pending, *pending_tail; /* loop: waiting for a ready connection or room */
    int inflight;
    uint64_t retry_at_ms; /* down: no reconnect before */
    int fails;            /* connections lost or refused in a row: the backoff doubles */
    _Atomic int health;
    /*
     * Readers avoid a suspect peer, so its own calls may never come to say
     * it answers again: the loop pings it (one PING in flight at most).
     */
    proto_call_t probe;
    int probing;
    uint64_t probe_ms;                /* when the last probe went */
    _Atomic uint64_t calls, timeouts; /* calls made to it (probes aside), and those timed out */
    struct proto_peer *next;
};

struct proto_net {
    proto_net_cfg_t cfg;
    char *cluster, *node, *listen;
    uint8_t *secret;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t tick;
    uv_tcp_t listener;
    int listening, port;
    uv_thread_t thread;
    pthread_mutex_t mu;
    proto_call_t *submit, *submit_tail;      /* under mu */
    proto_inbound_t *replies, *replies_tail; /* under mu */
    int stopping;                            /* under mu */
    proto_peer_t *peers;                     /* under mu (the list; peers live until stop) */
    proto_conn_t *conns;                     /* loop */
    size_t serving;                          /* loop: bytes of requests being served */
    int inbounds;                            /* loop: requests handed out, not yet replied */
    int closed;                              /* loop: shutting down */
    _Atomic uint64_t epoch;
    _Atomic uint64_t next_id;
    struct {
        _Atomic uint64_t calls, call_errors, timeouts, probes, probe_timeouts, frames_in,
            frames_out, bad_frames, refused, paused_reads;
    } st;
};

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} waiter_t;

/* A frame the loop writes itself (handshake, replies): header and payload in one allocation. */
typedef struct {
    uv_write_t req;
    proto_inbound_t *in;       /* a reply's request, freed with it */
    proto_conn_t *close_after; /* a refusal: the connection closes once it is written */
    uint8_t *buf;
} ctl_write_t;

static void conn_close(proto_conn_t *c, int why);
static void peer_pump(proto_peer_t *p);
static void enqueue(proto_net_t *n, proto_call_t *call, uint64_t now);
static int call_prepare(proto_peer_t *p, proto_call_t *c);

/* ---- helpers ---- */

static uint64_t now_ms(proto_net_t *n)
{
    return uv_now(&n->loop);
}

static void mac(const proto_net_t *n, const char *role, const uint8_t *a, const uint8_t *b,
                uint8_t out[PROTO_MAC])
{
    uint8_t msg[16 + PROTO_MAX_NAME + 2 * PROTO_NONCE];
    size_t rl = strlen(role), cl = strlen(n->cluster);
    memcpy(msg, role, rl);
    memcpy(msg + rl, n->cluster, cl);
    memcpy(msg + rl + cl, a, PROTO_NONCE);
    memcpy(msg + rl + cl + PROTO_NONCE, b, PROTO_NONCE);
    unsigned len = PROTO_MAC;
    if (!HMAC(EVP_sha256(), n->secret, (int)n->cfg.secret_len, msg, rl + cl + 2 * PROTO_NONCE, out,
              &len))
        memset(out, 0, PROTO_MAC); /* never matches a real mac */
}

static int parse_addr(const char *addr, struct sockaddr_storage *sa)
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

static void ctl_written(uv_write_t *req, int status)
{
    ctl_write_t *w = req->data;
    proto_conn_t *c = w->close_after;
    free(w->buf);
    free(w);
    if (c) conn_close(c, ERR_DENIED);
}

/*
 * Send one frame the loop made (payload len bytes at buf + PROTO_HDR, header
 * filled here; buf is freed after). A refusal closes the connection once
 * written, so that the peer reads why.
 */
static void send_frame(proto_conn_t *c, uint8_t *buf, unsigned type, uint16_t flags, uint64_t id,
                       int status, size_t len, int refusal)
{
    proto_hdr_t h = {
        .type = (uint8_t)type, .flags = flags, .id = id, .len = (uint32_t)len, .status = status};
    proto_hdr_seal(buf, &h, buf + PROTO_HDR);
    ctl_write_t *w = xmalloc(sizeof(*w));
    w->buf = buf;
    w->in = NULL;
    w->close_after = refusal ? c : NULL;
    w->req.data = w;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)(PROTO_HDR + len));
    atomic_fetch_add(&c->net->st.frames_out, 1);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, ctl_written) != 0) {
        free(buf);
        free(w);
        conn_close(c, ERR_IO);
    }
}

static void send_ctl(proto_conn_t *c, uint8_t *buf, unsigned type, uint16_t flags, uint64_t id,
                     int status, size_t len)
{
    send_frame(c, buf, type, flags, id, status, len, 0);
}

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
static void call_fail(proto_call_t *call, int rc)
{
    call->rc = rc;
    call_stage(call, ANSWERED);
}

static void call_written(uv_write_t *req, int status)
{
    proto_call_t *call = req->data;
    proto_conn_t *c = call->conn;
    if (status < 0 && !(call->stage & ANSWERED)) {
        /* Still in the table: the connection failing answers it. */
        call->stage |= WRITTEN;
        conn_close(c, ERR_IO);
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
        conn_close(c, ERR_IO);
    }
}

/* A response frame for connection c: its call answered (an unknown id was timed out: dropped). */
static void on_response(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload)
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

static proto_conn_t *pick_conn(proto_peer_t *p)
{
    proto_conn_t *best = NULL;
    for (int i = 0; i < p->nconns; i++) {
        proto_conn_t *c = p->conns[i];
        if (c->state == C_READY && (!best || c->ncalls < best->ncalls)) best = c;
    }
    return best;
}

static void fail_pending(proto_peer_t *p, int rc)
{
    while (p->pending) {
        proto_call_t *call = p->pending;
        p->pending = call->next;
        call->conn = NULL;
        call->stage = WRITTEN;
        call_fail(call, rc);
    }
    p->pending_tail = NULL;
}

static void on_connect(uv_connect_t *req, int status);

static void peer_connect(proto_peer_t *p)
{
    proto_net_t *n = p->net;
    proto_conn_t *c = xcalloc(1, sizeof(*c));
    c->net = n;
    c->peer = p;
    c->state = C_CONNECTING;
    c->since_ms = now_ms(n);
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
        conn_close(c, ERR_IO);
    }
}

/* Start what can start: connect while calls wait, send while there is room. */
static void peer_pump(proto_peer_t *p)
{
    proto_net_t *n = p->net;
    if (!p->pending) return;
    if (n->closed) {
        fail_pending(p, ERR_CLOSED);
        return;
    }
    int want = n->cfg.conns_per_peer;
    if (p->nconns < want && !p->connecting && now_ms(n) >= p->retry_at_ms) peer_connect(p);
    if (!p->nconns && now_ms(n) < p->retry_at_ms) {
        fail_pending(p, ERR_IO); /* down: fail fast until the retry */
        return;
    }
    proto_conn_t *c;
    while (p->pending && p->inflight < n->cfg.max_inflight && (c = pick_conn(p))) {
        proto_call_t *call = p->pending;
        p->pending = call->next;
        if (!p->pending) p->pending_tail = NULL;
        call_send(c, call);
    }
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
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
static void drain_stage(proto_conn_t *c)
{
    size_t at = 0;
    while (c->state != C_CLOSING && !c->paused) {
        proto_hdr_t h;
        int rc = proto_hdr_decode(c->stage + at, c->stage_len - at, &h);
        if (rc == ERR_AGAIN) break;
        if (rc) {
            atomic_fetch_add(&c->net->st.bad_frames, 1);
            log_warn("event=proto_bad_frame peer=%s", c->peer_node[0] ? c->peer_node : "?");
            conn_close(c, ERR_CORRUPT);
            return;
        }
        if (c->state != C_READY && h.len > HANDSHAKE_MAX) {
            /* Before the handshake nobody gets to make this node hold a large frame. */
            atomic_fetch_add(&c->net->st.bad_frames, 1);
            log_warn("event=proto_bad_frame peer=? why=\"%u-byte frame before the handshake\"",
                     h.len);
            conn_close(c, ERR_CORRUPT);
            return;
        }
        size_t total = PROTO_HDR + (size_t)h.len;
        if (c->stage_len - at >= total) {
            handle_frame(c, &h, c->stage + at, 0);
            at += total;
            continue;
        }
        if (total > STAGE) {
            c->progress_ms = now_ms(c->net);
            c->frame = xmalloc(total);
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

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    proto_conn_t *c = s->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            log_info("event=proto_conn_lost peer=%s err=%s", c->peer_node[0] ? c->peer_node : "?",
                     uv_strerror((int)nread));
        conn_close(c, ERR_IO);
        return;
    }
    if (c->frame) {
        c->frame_len += (size_t)nread;
        if (nread) c->progress_ms = now_ms(c->net);
        if (c->frame_len < c->frame_need) return;
        uint8_t *f = c->frame;
        c->frame = NULL;
        proto_hdr_t h;
        if (proto_hdr_decode(f, c->frame_need, &h) != 0) { /* decoded once already */
            free(f);
            conn_close(c, ERR_CORRUPT);
            return;
        }
        handle_frame(c, &h, f, 1);
        if (c->state == C_CLOSING) return;
    } else {
        c->stage_len += (size_t)nread;
    }
    drain_stage(c);
}

/* ---- the handshake ---- */

static void client_hello(proto_conn_t *c)
{
    proto_net_t *n = c->net;
    uint8_t *buf = xmalloc(PROTO_HDR + 8 + 2 * (PROTO_MAX_NAME + 2) + 8 + PROTO_NONCE);
    proto_w_t w;
    proto_w_init(&w, buf + PROTO_HDR, 8 + 2 * (PROTO_MAX_NAME + 2) + 8 + PROTO_NONCE);
    proto_w_u16(&w, PROTO_VERSION);
    proto_w_str(&w, n->cluster);
    proto_w_str(&w, n->node);
    proto_w_u64(&w, atomic_load(&n->epoch));
    proto_w_bytes(&w, c->nonce_mine, PROTO_NONCE);
    c->state = C_HELLO;
    c->since_ms = now_ms(n);
    send_ctl(c, buf, PROTO_HELLO, 0, 0, 0, w.len);
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
        conn_close(c, ERR_IO);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (getrandom(c->nonce_mine, PROTO_NONCE, 0) != PROTO_NONCE ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c, ERR_IO);
        return;
    }
    client_hello(c);
}

static void refuse(proto_conn_t *c, unsigned type, uint64_t id, const char *why)
{
    atomic_fetch_add(&c->net->st.refused, 1);
    log_warn("event=proto_peer_refused peer=%s why=\"%s\"", c->peer_node[0] ? c->peer_node : "?",
             why);
    c->state = C_CLOSING; /* nothing more is read; closed once the refusal is written */
    uv_read_stop((uv_stream_t *)&c->tcp);
    send_frame(c, xmalloc(PROTO_HDR), type, PROTO_F_RESP, id, ERR_DENIED, 0, 1);
}

/* Server: HELLO or AUTH of an accepted connection. */
static void server_handshake(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload)
{
    proto_net_t *n = c->net;
    proto_req_t *q = xmalloc(sizeof(*q));
    int want = c->state == C_HELLO ? PROTO_HELLO : PROTO_AUTH;
    if (h->type != want || (h->flags & PROTO_F_RESP) ||
        proto_req_decode(h->type, payload, h->len, q) != 0) {
        free(q);
        refuse(c, want, h->id, "bad handshake frame");
        return;
    }
    if (h->type == PROTO_HELLO) {
        char why[400] = "";
        uint64_t epoch = atomic_load(&n->epoch);
        int id_ok = q->node[0] != 0;
        for (const char *p = q->node; *p && id_ok; p++)
            id_ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_';
        snprintf(c->peer_node, sizeof(c->peer_node), "%s", id_ok ? q->node : "?");
        if (!id_ok)
            snprintf(why, sizeof(why), "node id not of letters, digits, '.', '-', '_'");
        else if (q->version != PROTO_VERSION)
            snprintf(why, sizeof(why), "protocol version %u, not %u", q->version, PROTO_VERSION);
        else if (strcmp(q->cluster, n->cluster) != 0)
            snprintf(why, sizeof(why), "cluster id %.255s, not %.100s", q->cluster, n->cluster);
        else if (q->epoch < epoch)
            snprintf(why, sizeof(why), "map epoch %llu older than ours (%llu)",
                     (unsigned long long)q->epoch, (unsigned long long)epoch);
        if (why[0]) {
            free(q);
            refuse(c, PROTO_HELLO, h->id, why);
            return;
        }
        memcpy(c->nonce_theirs, q->nonce, PROTO_NONCE);
        if (getrandom(c->nonce_mine, PROTO_NONCE, 0) != PROTO_NONCE) {
            free(q);
            conn_close(c, ERR_IO);
            return;
        }
        size_t cap = PROTO_MAX_NAME + 2 + 8 + PROTO_NONCE + PROTO_MAC;
        uint8_t *buf = xmalloc(PROTO_HDR + cap);
        proto_w_t w;
        proto_w_init(&w, buf + PROTO_HDR, cap);
        proto_w_str(&w, n->node);
        proto_w_u64(&w, epoch);
        proto_w_bytes(&w, c->nonce_mine, PROTO_NONCE);
        uint8_t m[PROTO_MAC];
        mac(n, "wlp1 server", c->nonce_theirs, c->nonce_mine, m);
        proto_w_bytes(&w, m, PROTO_MAC);
        c->state = C_AUTH;
        send_ctl(c, buf, PROTO_HELLO, PROTO_F_RESP, h->id, 0, w.len);
    } else {
        uint8_t m[PROTO_MAC];
        mac(n, "wlp1 client", c->nonce_mine, c->nonce_theirs, m);
        if (CRYPTO_memcmp(m, q->mac, PROTO_MAC) != 0) {
            free(q);
            refuse(c, PROTO_AUTH, h->id, "bad mac: another cluster secret");
            return;
        }
        c->state = C_READY;
        log_info("event=proto_peer_accepted peer=%s", c->peer_node);
        send_ctl(c, xmalloc(PROTO_HDR), PROTO_AUTH, PROTO_F_RESP, h->id, 0, 0);
    }
    free(q);
}

/* Client: the server's answer to HELLO or AUTH. */
static void client_handshake(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload)
{
    proto_net_t *n = c->net;
    proto_peer_t *p = c->peer;
    int want = c->state == C_HELLO ? PROTO_HELLO : PROTO_AUTH;
    if (h->type != want || !(h->flags & PROTO_F_RESP)) {
        conn_close(c, ERR_CORRUPT);
        return;
    }
    if (h->status) {
        log_warn("event=proto_refused_by_peer peer=%s addr=%s err=%s", p->node, p->addr,
                 err_name(h->status));
        atomic_fetch_add(&n->st.refused, 1);
        conn_close(c, ERR_DENIED);
        return;
    }
    if (h->type == PROTO_AUTH) {
        c->state = C_READY;
        p->fails = 0;
        atomic_store(&p->health, PROTO_PEER_UP);
        log_info("event=proto_peer_up peer=%s addr=%s", p->node, p->addr);
        peer_pump(p);
        return;
    }
    proto_r_t r;
    char node[PROTO_MAX_NAME + 1];
    proto_r_init(&r, payload, h->len);
    proto_r_str(&r, node, sizeof(node));
    uint64_t epoch = proto_r_u64(&r);
    const uint8_t *nonce = proto_r_bytes(&r, PROTO_NONCE);
    const uint8_t *their = proto_r_bytes(&r, PROTO_MAC);
    if (proto_r_end(&r) != 0) {
        conn_close(c, ERR_CORRUPT);
        return;
    }
    memcpy(c->nonce_theirs, nonce, PROTO_NONCE);
    uint8_t m[PROTO_MAC];
    mac(n, "wlp1 server", c->nonce_mine, c->nonce_theirs, m);
    const char *why = NULL;
    if (CRYPTO_memcmp(m, their, PROTO_MAC) != 0)
        why = "bad mac: another cluster secret";
    else if (strcmp(node, p->node) != 0)
        why = "another node answers at this address";
    else if (epoch < atomic_load(&n->epoch))
        why = "map epoch older than ours";
    if (why) {
        atomic_fetch_add(&n->st.refused, 1);
        log_warn("event=proto_peer_refused peer=%s addr=%s answered_as=%s why=\"%s\"", p->node,
                 p->addr, node, why);
        conn_close(c, ERR_DENIED);
        return;
    }
    uint8_t *buf = xmalloc(PROTO_HDR + PROTO_MAC);
    mac(n, "wlp1 client", c->nonce_theirs, c->nonce_mine, buf + PROTO_HDR);
    c->state = C_AUTH;
    send_ctl(c, buf, PROTO_AUTH, 0, 0, 0, PROTO_MAC);
}

/* ---- serving ---- */

static void serve_frame(proto_conn_t *c, const proto_hdr_t *h, uint8_t *frame, int owned)
{
    proto_net_t *n = c->net;
    if (h->flags & PROTO_F_RESP || h->type == PROTO_HELLO || h->type == PROTO_AUTH || h->status) {
        if (owned) free(frame);
        conn_close(c, ERR_CORRUPT);
        return;
    }
    if (!owned) {
        uint8_t *copy = xmalloc(PROTO_HDR + (size_t)h->len);
        memcpy(copy, frame, PROTO_HDR + (size_t)h->len);
        frame = copy;
    }
    proto_inbound_t *in = xmalloc(sizeof(*in));
    in->hdr = *h;
    in->payload = frame + PROTO_HDR;
    in->conn = c;
    in->next = NULL;
    in->reply = NULL;
    in->reply_cap = in->reply_len = 0;
    in->status = 0;
    snprintf(in->peer, sizeof(in->peer), "%s", c->peer_node);
    c->refs++;
    c->inflight++;
    n->inbounds++;
    n->serving += PROTO_HDR + (size_t)h->len;
    if ((n->serving > n->cfg.serve_budget || c->inflight >= CONN_INFLIGHT) && !c->paused) {
        c->paused = 1;
        atomic_fetch_add(&n->st.paused_reads, 1);
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
    int rc = proto_req_decode(h->type, in->payload, h->len, &in->req);
    if (rc) {
        proto_reply(in, rc == ERR_INVAL ? ERR_INVAL : ERR_CORRUPT, 0);
        return;
    }
    n->cfg.handle(n->cfg.arg, in);
}

static void handle_frame(proto_conn_t *c, const proto_hdr_t *h, uint8_t *frame, int owned)
{
    atomic_fetch_add(&c->net->st.frames_in, 1);
    if (!proto_frame_ok(frame, frame + PROTO_HDR, h->len)) {
        atomic_fetch_add(&c->net->st.bad_frames, 1);
        log_warn("event=proto_bad_crc peer=%s type=%s", c->peer_node[0] ? c->peer_node : "?",
                 proto_type_name(h->type));
        if (owned) free(frame);
        conn_close(c, ERR_CORRUPT);
        return;
    }
    if (c->state == C_READY && !c->peer) {
        serve_frame(c, h, frame, owned);
        return;
    }
    if (c->state == C_READY)
        on_response(c, h, frame + PROTO_HDR);
    else if (c->peer)
        client_handshake(c, h, frame + PROTO_HDR);
    else
        server_handshake(c, h, frame + PROTO_HDR);
    if (owned) free(frame);
}

/* Shutting down: once nothing is left, close the async handle and the loop ends. */
static void maybe_finish(proto_net_t *n)
{
    if (n->closed && !n->inbounds && !n->conns && !uv_is_closing((uv_handle_t *)&n->wake))
        uv_close((uv_handle_t *)&n->wake, NULL);
}

static void conn_unref(proto_conn_t *c)
{
    if (--c->refs) return;
    proto_net_t *n = c->net;
    for (proto_conn_t **pp = &n->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    free(c->stage);
    free(c->frame);
    free(c);
    maybe_finish(n);
}

static void resume_paused(proto_net_t *n)
{
    for (proto_conn_t *c = n->conns; c && n->serving <= n->cfg.serve_budget; c = c->next) {
        if (!c->paused || c->state == C_CLOSING || c->inflight >= CONN_INFLIGHT) continue;
        c->paused = 0;
        drain_stage(c);
        if (c->state != C_CLOSING && !c->paused)
            uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    }
}

static void reply_written(uv_write_t *req, int status)
{
    ctl_write_t *w = req->data;
    proto_inbound_t *in = w->in;
    proto_conn_t *c = in->conn;
    proto_net_t *n = c->net;
    /* Memory a request holds is counted until its reply is on the wire, not just queued:
       a peer that stops reading its replies pauses itself. */
    n->serving -= PROTO_HDR + (size_t)in->hdr.len + in->reply_cap;
    n->inbounds--;
    c->inflight--;
    free(w->buf);
    free(w);
    free((uint8_t *)in->payload - PROTO_HDR);
    free(in);
    if (!n->closed) resume_paused(n);
    conn_unref(c);
}

/* Loop: send (or drop, on a closed connection) one reply. */
static void send_reply(proto_net_t *n, proto_inbound_t *in)
{
    proto_conn_t *c = in->conn;
    n->serving += in->reply_cap; /* the reply's memory, until it is written */
    uint8_t *buf = in->reply ? in->reply : xmalloc(PROTO_HDR);
    size_t len = in->reply_len; /* an error may carry a payload too (GET's ERR_RANGE) */
    proto_hdr_t h = {.type = in->hdr.type,
                     .flags = PROTO_F_RESP,
                     .id = in->hdr.id,
                     .len = (uint32_t)len,
                     .status = in->status};
    proto_hdr_seal(buf, &h, buf + PROTO_HDR);
    ctl_write_t *w = xmalloc(sizeof(*w));
    w->buf = buf;
    w->in = in;
    w->close_after = NULL;
    w->req.data = w;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)(PROTO_HDR + len));
    if (c->state == C_CLOSING ||
        uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, reply_written) != 0) {
        reply_written(&w->req, UV_ECANCELED);
        return;
    }
    atomic_fetch_add(&n->st.frames_out, 1);
}

uint8_t *proto_reply_buf(proto_inbound_t *in, size_t cap)
{
    if (!cap) return NULL;
    free(in->reply);
    in->reply = xmalloc(PROTO_HDR + cap);
    in->reply_cap = cap;
    return in->reply + PROTO_HDR;
}

void proto_reply(proto_inbound_t *in, int status, size_t len)
{
    proto_net_t *n = in->conn->net;
    in->status = status;
    in->reply_len = len <= in->reply_cap ? len : 0;
    in->next = NULL;
    pthread_mutex_lock(&n->mu);
    if (n->replies_tail)
        n->replies_tail->next = in;
    else
        n->replies = in;
    n->replies_tail = in;
    pthread_mutex_unlock(&n->mu);
    uv_async_send(&n->wake);
}

/* ---- connections ---- */

static void on_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

/* Close c: its calls fail with why (ERR_IO to callers: the peer is lost), its peer forgets it. */
static void conn_close(proto_conn_t *c, int why)
{
    proto_net_t *n = c->net;
    if (c->state == C_CLOSING && uv_is_closing((uv_handle_t *)&c->tcp)) return;
    c->state = C_CLOSING;
    int rc = why == ERR_CLOSED ? ERR_CLOSED : ERR_IO;
    /* The peer's state first: a caller woken by its call failing sees the peer as it is now. */
    proto_peer_t *p = c->peer;
    if (p) {
        for (int i = 0; i < p->nconns; i++)
            if (p->conns[i] == c) {
                p->conns[i] = p->conns[--p->nconns];
                break;
            }
        if (!pick_conn(p)) {
            if (atomic_exchange(&p->health, PROTO_PEER_DOWN) != PROTO_PEER_DOWN && !n->closed)
                log_warn("event=proto_peer_down peer=%s addr=%s", p->node, p->addr);
            /* 50 ms after the first failure, doubling up to retry_ms: a peer that is
               restarting is back soon, one that is gone costs a connect a while. */
            uint64_t wait = 50u << (p->fails < 10 ? p->fails : 10);
            p->retry_at_ms = now_ms(n) + (wait < n->cfg.retry_ms ? wait : n->cfg.retry_ms);
            p->fails++;
            if (!p->connecting) fail_pending(p, rc);
        }
    }
    for (int b = 0; b < CALL_BUCKETS; b++)
        while (c->calls[b]) {
            proto_call_t *call = c->calls[b];
            c->calls[b] = call->next;
            c->ncalls--;
            call_fail(call, rc);
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
    c->since_ms = now_ms(n);
    c->stage = xmalloc(STAGE);
    c->refs = 1;
    uv_tcp_init(&n->loop, &c->tcp);
    c->tcp.data = c;
    c->next = n->conns;
    n->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c, ERR_IO);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) conn_close(c, ERR_IO);
}

/* ---- the loop ---- */

static void probe_done(proto_call_t *c, int rc)
{
    (void)rc; /* an answer made the peer up (on_response); a failure leaves it suspect */
    ((proto_peer_t *)c->arg)->probing = 0;
}

/* Ping a suspect peer (loop thread). */
static void probe(proto_net_t *n, proto_peer_t *p, uint64_t now)
{
    p->probe = (proto_call_t){.type = PROTO_PING, .done = probe_done, .arg = p};
    if (call_prepare(p, &p->probe) != 0) return;
    p->probing = 1;
    p->probe_ms = now;
    atomic_fetch_add(&n->st.probes, 1);
    enqueue(n, &p->probe, now);
}

static void on_tick(uv_timer_t *t)
{
    proto_net_t *n = t->data;
    uint64_t now = now_ms(n);
    for (proto_conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_CLOSING) continue;
        if (c->state != C_READY && now - c->since_ms > n->cfg.timeout_ms) {
            log_warn("event=proto_handshake_timeout peer=%s", c->peer_node[0] ? c->peer_node : "?");
            conn_close(c, ERR_IO);
            continue;
        }
        if (c->frame && now - c->progress_ms > n->cfg.timeout_ms) {
            /* A frame that stopped arriving holds its whole allocation: the peer is stuck. */
            log_warn("event=proto_frame_stalled peer=%s", c->peer_node[0] ? c->peer_node : "?");
            conn_close(c, ERR_IO);
            continue;
        }
        int stuck = 0;
        for (int b = 0; b < CALL_BUCKETS; b++)
            for (proto_call_t **pp = &c->calls[b]; *pp;) {
                proto_call_t *call = *pp;
                if (call->deadline_ms > now) {
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
                call_fail(call, ERR_IO);
            }
        if (stuck) {
            log_warn("event=proto_peer_stuck peer=%s: closing", c->peer->node);
            conn_close(c, ERR_IO);
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
            call_fail(call, ERR_IO);
        }
        p->pending_tail = NULL;
        for (proto_call_t *call = p->pending; call; call = call->next)
            p->pending_tail = call;
        peer_pump(p);
        if (atomic_load(&p->health) == PROTO_PEER_SUSPECT && !p->probing &&
            now - p->probe_ms >= PROBE_MS && !n->closed)
            probe(n, p, now);
        /* A down peer is reconnected on its backoff even when no call waits for it (readers
           avoid it, so none might ever come to find it back). */
        if (atomic_load(&p->health) == PROTO_PEER_DOWN && !n->closed && !p->nconns &&
            !p->connecting && now >= p->retry_at_ms)
            peer_connect(p);
    }
}

static void close_all(proto_net_t *n)
{
    n->closed = 1;
    if (n->listening) uv_close((uv_handle_t *)&n->listener, NULL);
    n->listening = 0;
    for (proto_conn_t *c = n->conns; c; c = c->next)
        if (c->state != C_CLOSING || !uv_is_closing((uv_handle_t *)&c->tcp))
            conn_close(c, ERR_CLOSED);
    pthread_mutex_lock(&n->mu);
    proto_peer_t *peers = n->peers;
    pthread_mutex_unlock(&n->mu);
    for (proto_peer_t *p = peers; p; p = p->next)
        fail_pending(p, ERR_CLOSED);
    if (!uv_is_closing((uv_handle_t *)&n->tick)) uv_close((uv_handle_t *)&n->tick, NULL);
}

/* A submitted call joins its peer's queue (loop thread). */
static void enqueue(proto_net_t *n, proto_call_t *call, uint64_t now)
{
    proto_peer_t *p = call->peer;
    call->next = NULL;
    call->conn = NULL;
    /* A suspect peer (a call of it timed out) gets a short deadline until it answers. */
    uint32_t limit = n->cfg.timeout_ms;
    if (atomic_load(&p->health) == PROTO_PEER_SUSPECT && limit > SUSPECT_MS) limit = SUSPECT_MS;
    call->deadline_ms = now + limit;
    if (p->pending_tail)
        p->pending_tail->next = call;
    else
        p->pending = call;
    p->pending_tail = call;
    peer_pump(p);
}

static void on_wake(uv_async_t *a)
{
    proto_net_t *n = a->data;
    pthread_mutex_lock(&n->mu);
    proto_call_t *calls = n->submit;
    proto_inbound_t *replies = n->replies;
    n->submit = n->submit_tail = NULL;
    n->replies = n->replies_tail = NULL;
    int stopping = n->stopping;
    pthread_mutex_unlock(&n->mu);
    uint64_t now = now_ms(n);
    if (stopping && !n->closed) close_all(n);
    while (replies) {
        proto_inbound_t *in = replies;
        replies = in->next;
        send_reply(n, in);
    }
    if (!n->closed) resume_paused(n);
    while (calls) {
        proto_call_t *call = calls;
        calls = call->next;
        enqueue(n, call, now);
    }
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
        int rc = parse_addr(cfg->listen, &sa);
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
        if (parse_addr(addr, &p->sa) != 0) {
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

proto_health_t proto_peer_health(const proto_peer_t *p)
{
    return (proto_health_t)atomic_load(&((proto_peer_t *)p)->health);
}

const char *proto_peer_node(const proto_peer_t *p)
{
    return p->node;
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

int proto_call(proto_peer_t *p, proto_call_t *c)
{
    int rc = call_prepare(p, c);
    if (rc) return rc;
    waiter_t w = {.done = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    c->wait = &w;
    rc = call_submit(p, c);
    if (rc == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = c->rc;
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

void proto_call_async(proto_peer_t *p, proto_call_t *c)
{
    c->wait = NULL;
    int rc = call_prepare(p, c);
    if (rc == 0) rc = call_submit(p, c);
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
    st->serving_bytes = 0;
}
