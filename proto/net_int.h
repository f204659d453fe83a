/*
 * net_int.h: internals shared by net's files.
 *
 * net: the protocol's loop thread, connections, handshake, multiplexed
 * calls and served requests (the contract is in net.h).
 *
 *   net_conn.c   connections and the loop: start, stop, the listener, reading
 *                (the staging buffer, frames read in place), the dispatch of
 *                whole frames, the tick (handshake, stall and call deadlines,
 *                peer upkeep), the wake-up queues, closing, stats
 *   net_call.c   the client's calls: prepare, submit, the table of calls in
 *                flight, completion, deadlines, probes of suspect peers,
 *                peers (made, pumped, connected, health), proto_net_peers
 *   net_serve.c  serving inbound frames: the serve budget, pausing and
 *                resuming reads, replies
 *   net_auth.c   the HELLO/AUTH handshake at both ends, its HMAC, the frames
 *                the loop writes itself for it (answers, refusals)
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
 *
 * Threads. The loop thread (run_loop, net_conn.c) owns every connection
 * (proto_conn_t, all of it), the listener, the timer, net's conns, serving,
 * inbounds and closed, each peer's loop fields (conns, nconns, connecting,
 * pending, inflight, retry_at_ms, fails, probe, probing, probe_ms), and a
 * call from the moment it leaves the submit queue until it completes (conn,
 * stage, next, deadline_ms, write_req, bufs). Handlers (cfg.handle), on_resp
 * and done run there with no lock held (done also runs at once in the
 * caller when proto_call_async is refused). Any other thread: proto_call and
 * proto_call_async prepare a call (id, header, crc; probes are prepared on
 * the loop) and queue it on net->submit, and a synchronous caller then
 * sleeps on its waiter_t until the loop signals it; a handler's thread fills
 * proto_reply_buf and queues proto_reply on net->replies (a connection lives
 * while it has requests not yet replied: refs); proto_net_peer adds peers;
 * proto_net_peers, proto_net_stats and proto_peer_health read. Only
 * proto_net_start (before the thread exists) and proto_net_stop (after it
 * ended) touch loop state from outside.
 *
 * Locks, each a leaf (no other lock is taken under it, none is held across
 * a callback or uv_async_send):
 *   net->mu      the submit and reply queues, `stopping`, the peer list (its
 *                links: peers are only added and live until proto_net_stop,
 *                so the loop walks the list from a head read under mu)
 *   waiter_t.mu  a synchronous caller's wait (net_call.c)
 * Atomics, read by any thread: epoch, next_id, the counters (st), each
 * peer's health (written by the loop, and by proto_net_peer before the peer
 * is listed), calls and timeouts.
 */
#ifndef WL_NET_INT_H
#define WL_NET_INT_H

#include "proto/net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define STAGE        (64u << 10)
#define CALL_BUCKETS 64
#define MAX_CONNS    8

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
    uint64_t progress_ms; /* when the frame being read (in place, or in the stage) last grew,
                             or reading resumed */
    uint64_t frame_ms;    /* when it began */
    size_t wq_bytes;      /* the write queue's size at the last tick */
    uint64_t wrote_ms;    /* when the write queue last shrank (bytes leaving) */
    uint64_t drained_ms;  /* server: when its write queue was last empty or shrank */
    size_t serving;       /* server: the bytes its requests, replies and frame hold (of net's) */
    size_t frame_charge;  /* server: the part of it that is the frame being read in place */
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
    /* The control plane says the node is gone (proto_peer_set_away): 1 + comebacks when it
     * said so, 0: not away. A comeback since makes it stale. */
    _Atomic uint64_t away;
    _Atomic uint64_t
        comebacks; /* connections made ready after it was down (proto_peer_comebacks) */
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
    struct net_cancel *cancels;              /* under mu: calls given up on (proto_cancel) */
    int stopping;                            /* under mu */
    proto_peer_t *peers;                     /* under mu (the list; peers live until stop) */
    proto_conn_t *conns;                     /* loop */
    size_t serving;                          /* loop: bytes of requests being served */
    int npaused;                             /* loop: connections whose reads are paused */
    int inbounds;                            /* loop: requests handed out, not yet replied */
    int closed;                              /* loop: shutting down */
    _Atomic uint64_t epoch;
    _Atomic uint64_t next_id;
    struct {
        _Atomic uint64_t calls, call_errors, timeouts, probes, probe_timeouts, frames_in,
            frames_out, bad_frames, refused, paused_reads, serving; /* (serving: a copy) */
    } st;
};

/* A frame the loop writes itself (handshake, replies): header and payload in one allocation. */
typedef struct {
    uv_write_t req;
    proto_inbound_t *in;       /* a reply's request, freed with it */
    proto_conn_t *close_after; /* a refusal: the connection closes once it is written */
    uint8_t *buf;
} ctl_write_t;

static inline uint64_t net__now_ms(proto_net_t *n)
{
    return uv_now(&n->loop);
}

/* A call given up on, by id (the call itself may be gone by the time the loop looks). */
typedef struct net_cancel {
    proto_peer_t *peer;
    uint64_t id;
    struct net_cancel *next;
} net_cancel_t;

/* net_conn.c */
int net__parse_addr(const char *addr, struct sockaddr_storage *sa);
void net__on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
void net__on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
void net__drain_stage(proto_conn_t *c);
void net__conn_unref(proto_conn_t *c);
void net__conn_close(proto_conn_t *c, int why);

/* net_call.c */
void net__call_fail(proto_call_t *call, int rc);
void net__on_response(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload);
proto_conn_t *net__pick_conn(proto_peer_t *p);
void net__fail_pending(proto_peer_t *p, int rc);
void net__peer_connect(proto_peer_t *p);
int net__peer_away(proto_peer_t *p);
void net__peer_pump(proto_peer_t *p);
void net__probe(proto_net_t *n, proto_peer_t *p, uint64_t now);
void net__enqueue(proto_net_t *n, proto_call_t *call, uint64_t now);
void net__cancel(net_cancel_t *cl);

/* net_serve.c */
void net__serve_frame(proto_conn_t *c, const proto_hdr_t *h, uint8_t *frame, int owned);
/* Server: whether a frame of total bytes may be read in place now (charged if so); else c is
 * paused until the budget has room. */
int net__admit_frame(proto_conn_t *c, size_t total);
/* Server: the charge of the frame read in place taken back (read whole, or c closing). */
void net__frame_done(proto_conn_t *c);
/*
 * A frame of total bytes of its own, placed so that its byte at aligned_at starts a page
 * (0: anywhere): a PUT's data then reaches the drive without a copy (storage/drive_write.c).
 * Freed with net__frame_free only.
 */
uint8_t *net__frame_alloc(size_t total, size_t aligned_at);
void net__frame_free(uint8_t *frame);
/* frame cut to its first total bytes (moved: realloc'd, or copied when it was placed). */
uint8_t *net__frame_shrink(uint8_t *frame, size_t total);
void net__resume_paused(proto_net_t *n);
void net__send_reply(proto_net_t *n, proto_inbound_t *in);

/* net_auth.c */
void net__client_hello(proto_conn_t *c);
void net__server_handshake(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload);
void net__client_handshake(proto_conn_t *c, const proto_hdr_t *h, const uint8_t *payload);

#endif
