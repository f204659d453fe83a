/*
 * net_serve.c: serving the frames peers send: a request copied (or kept, when
 * read in place) into its own allocation and handed to the handler; the
 * serve budget, reads resumed as replies are written; replies queued by any
 * thread and sent by the loop. Design, file map and thread map: net_int.h.
 *
 * The budget counts what serving holds: a request's bytes and its reply's
 * (the most the handler may ask for, charged when the request is admitted:
 * cfg.reply_bound), and a large frame while it is read in place (admitted
 * only when there is room). A connection stops reading while its own share
 * is over a quarter of the budget or it has CONN_INFLIGHT requests, so a
 * peer that stops reading its replies holds that much and pauses only
 * itself (the tick closes it once its write queue has not shrunk for a
 * deadline); while the whole budget is spent, any connection that delivers
 * a request pauses too: the last bound on memory, whoever holds it.
 */
#include "proto/net_int.h"

#include "common/err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

#define CONN_INFLIGHT 256 /* requests a connection may have being served before reading pauses */

/* ---- serving ---- */

static size_t conn_budget(const proto_net_t *n)
{
    return n->cfg.serve_budget / 4;
}

static void charge(proto_conn_t *c, size_t bytes)
{
    c->serving += bytes;
    c->net->serving += bytes;
    atomic_store(&c->net->st.serving, c->net->serving);
}

static void uncharge(proto_conn_t *c, size_t bytes)
{
    c->serving -= bytes;
    c->net->serving -= bytes;
    atomic_store(&c->net->st.serving, c->net->serving);
}

static void pause_reads(proto_conn_t *c)
{
    if (c->paused) return;
    c->paused = 1;
    c->net->npaused++;
    atomic_fetch_add(&c->net->st.paused_reads, 1);
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Whether c may go on reading: its share, its requests, and the budget as a whole. */
static int room(const proto_conn_t *c)
{
    const proto_net_t *n = c->net;
    return c->serving <= conn_budget(n) && c->inflight < CONN_INFLIGHT &&
           n->serving <= n->cfg.serve_budget;
}

int net__admit_frame(proto_conn_t *c, size_t total)
{
    proto_net_t *n = c->net;
    /* (Over the budget only with company: alone, a frame of the largest size always goes.) */
    if ((c->serving && c->serving + total > conn_budget(n)) ||
        (n->serving && n->serving + total > n->cfg.serve_budget)) {
        pause_reads(c);
        return 0;
    }
    charge(c, total);
    c->frame_charge = total;
    return 1;
}

void net__frame_done(proto_conn_t *c)
{
    uncharge(c, c->frame_charge);
    c->frame_charge = 0;
}

void net__serve_frame(proto_conn_t *c, const proto_hdr_t *h, uint8_t *frame, int owned)
{
    proto_net_t *n = c->net;
    if (h->flags & PROTO_F_RESP || h->type == PROTO_HELLO || h->type == PROTO_AUTH || h->status) {
        if (owned) net__frame_free(frame);
        net__conn_close(c, ERR_CORRUPT);
        return;
    }
    if (!owned) {
        uint8_t *copy = net__frame_alloc(PROTO_HDR + (size_t)h->len, 0);
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
    in->known_at = in->known_len = 0;
    in->status = 0;
    snprintf(in->peer, sizeof(in->peer), "%s", c->peer_node);
    c->refs++;
    c->inflight++;
    n->inbounds++;
    int rc = proto_req_decode(h->type, in->payload, h->len, &in->req);
    in->charge = PROTO_HDR + (size_t)h->len +
                 (rc == 0 && n->cfg.reply_bound ? n->cfg.reply_bound(n->cfg.arg, &in->req) : 0);
    charge(c, in->charge);
    if (!room(c)) pause_reads(c);
    if (rc) {
        proto_reply(in, rc == ERR_INVAL ? ERR_INVAL : ERR_CORRUPT, 0);
        return;
    }
    n->cfg.handle(n->cfg.arg, in);
}

void net__resume_paused(proto_net_t *n)
{
    /* (Run after every reply and every wake: none paused, the usual case, costs no walk.) */
    for (proto_conn_t *c = n->conns; c && n->npaused && n->serving <= n->cfg.serve_budget;
         c = c->next) {
        if (!c->paused || c->state == C_CLOSING || !room(c)) continue;
        c->paused = 0;
        c->progress_ms = net__now_ms(n); /* (a staged part's clock starts again) */
        n->npaused--;
        net__drain_stage(c);
        if (c->state != C_CLOSING && !c->paused)
            uv_read_start((uv_stream_t *)&c->tcp, net__on_alloc, net__on_read);
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
    uncharge(c, in->charge);
    n->inbounds--;
    c->inflight--;
    net__frame_free(w->buf);
    free(w);
    free(in);
    if (!n->closed) net__resume_paused(n);
    net__conn_unref(c);
}

/* Loop: send (or drop, on a closed connection) one reply. */
void net__send_reply(proto_net_t *n, proto_inbound_t *in)
{
    proto_conn_t *c = in->conn;
    size_t len = in->reply_len; /* an error may carry a payload too (GET's ERR_RANGE) */
    /*
     * From here until it is written the request holds its reply only: the handler is done
     * with the request's bytes, and a reply buffer over a MiB larger than its reply (a GET
     * sized for the largest record, of a small one or none) is cut to size. What it holds is
     * charged instead of the bound (a peer not reading tiny replies holds tiny amounts).
     */
    net__frame_free((uint8_t *)in->payload - PROTO_HDR);
    in->payload = NULL;
    if (in->reply && in->reply_cap > len + (1u << 20)) { /* (not a small GET's: no realloc) */
        in->reply = net__frame_shrink(in->reply, PROTO_HDR + len);
        in->reply_cap = len;
    }
    size_t held = PROTO_HDR + in->reply_cap;
    if (held > in->charge) {
        charge(c, held - in->charge);
    } else {
        uncharge(c, in->charge - held);
        if (!n->closed) net__resume_paused(n);
    }
    in->charge = held;
    uint8_t *buf = in->reply ? in->reply : net__frame_alloc(PROTO_HDR, 0);
    proto_hdr_t h = {.type = in->hdr.type,
                     .flags = PROTO_F_RESP,
                     .id = in->hdr.id,
                     .len = (uint32_t)len,
                     .status = in->status};
    if (in->known_len && in->known_at + in->known_len <= len)
        proto_hdr_seal_known(buf, &h, buf + PROTO_HDR, in->known_at, in->known_len, in->known_crc);
    else
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

uint8_t *proto_reply_buf_at(proto_inbound_t *in, size_t cap, size_t aligned_at)
{
    if (!cap) return NULL;
    net__frame_free(in->reply);
    in->reply = net__frame_alloc(PROTO_HDR + cap, cap >= (64u << 10) ? PROTO_HDR + aligned_at : 0);
    in->reply_cap = cap;
    return in->reply + PROTO_HDR;
}

uint8_t *proto_reply_buf(proto_inbound_t *in, size_t cap)
{
    if (!cap) return NULL;
    net__frame_free(in->reply);
    in->reply = net__frame_alloc(PROTO_HDR + cap, 0); /* (placed only when asked: _at) */
    in->reply_cap = cap;
    return in->reply + PROTO_HDR;
}

void proto_reply_crc(proto_inbound_t *in, int status, size_t len, size_t at, size_t n, uint32_t crc)
{
    in->known_at = at;
    in->known_len = n;
    in->known_crc = crc;
    proto_reply(in, status, len);
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
