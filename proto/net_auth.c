/*
 * net_auth.c: the handshake every connection starts with (net.h): the
 * client's HELLO and AUTH, the server's checks and answers, refusals that
 * name why, and the HMAC-SHA256 over the cluster secret and both nonces;
 * the frames the loop writes itself for it. Design, file map and thread
 * map: net_int.h.
 */
#include "proto/net_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ---- helpers ---- */

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

static void ctl_written(uv_write_t *req, int status)
{
    ctl_write_t *w = req->data;
    proto_conn_t *c = w->close_after;
    free(w->buf);
    free(w);
    if (c) net__conn_close(c, ERR_DENIED);
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
        net__conn_close(c, ERR_IO);
    }
}

static void send_ctl(proto_conn_t *c, uint8_t *buf, unsigned type, uint16_t flags, uint64_t id,
                     int status, size_t len)
{
    send_frame(c, buf, type, flags, id, status, len, 0);
}

/* ---- the handshake ---- */

void net__client_hello(proto_conn_t *c)
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
    c->since_ms = net__now_ms(n);
    send_ctl(c, buf, PROTO_HELLO, 0, 0, 0, w.len);
}

/* s for a log line, in place: what is not a letter, digit, '.', '-' or '_' becomes '?' (a
 * quote or a space in a peer's cluster id would forge fields of the line). */
static const char *printable(char *s)
{
    for (char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '?';
    return s;
}

static void refuse(proto_conn_t *c, unsigned type, uint64_t id, const char *why)
{
    atomic_fetch_add(&c->net->st.refused, 1);
    /* Not authenticated: the node id is only what it claims (a member's, maybe). */
    log_limited(LOG_LVL_WARN, "event=proto_peer_refused claimed=%s why=\"%s\"",
                c->peer_node[0] ? c->peer_node : "?", why);
    c->state = C_CLOSING; /* nothing more is read; closed once the refusal is written */
    uv_read_stop((uv_stream_t *)&c->tcp);
    send_frame(c, xmalloc(PROTO_HDR), type, PROTO_F_RESP, id, ERR_DENIED, 0, 1);
}

/* Server: HELLO or AUTH of an accepted connection. */
void net__server_handshake(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload)
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
            snprintf(why, sizeof(why), "cluster id %.255s, not %.100s", printable(q->cluster),
                     n->cluster);
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
            net__conn_close(c, ERR_IO);
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
void net__client_handshake(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload)
{
    proto_net_t *n = c->net;
    proto_peer_t *p = c->peer;
    int want = c->state == C_HELLO ? PROTO_HELLO : PROTO_AUTH;
    if (h->type != want || !(h->flags & PROTO_F_RESP)) {
        net__conn_close(c, ERR_CORRUPT);
        return;
    }
    if (h->status) {
        log_warn("event=proto_refused_by_peer peer=%s addr=%s err=%s", p->node, p->addr,
                 err_name(h->status));
        atomic_fetch_add(&n->st.refused, 1);
        net__conn_close(c, ERR_DENIED);
        return;
    }
    if (h->type == PROTO_AUTH) {
        c->state = C_READY;
        p->fails = 0;
        if (atomic_exchange(&p->health, PROTO_PEER_UP) == PROTO_PEER_DOWN)
            atomic_fetch_add(&p->comebacks, 1);
        log_info("event=proto_peer_up peer=%s addr=%s", p->node, p->addr);
        net__peer_pump(p);
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
        net__conn_close(c, ERR_CORRUPT);
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
        net__conn_close(c, ERR_DENIED);
        return;
    }
    uint8_t *buf = xmalloc(PROTO_HDR + PROTO_MAC);
    mac(n, "wlp1 client", c->nonce_theirs, c->nonce_mine, buf + PROTO_HDR);
    c->state = C_AUTH;
    send_ctl(c, buf, PROTO_AUTH, 0, 0, 0, PROTO_MAC);
}
