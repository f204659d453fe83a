/*
 * net: a node's end of the node-to-node protocol: one libuv loop thread
 * that serves the frames peers send (a listener) and carries this node's
 * requests to its peers (client connections), both authenticated with the
 * cluster secret. It knows frames and the handshake, not what requests
 * mean: a server-side handler (server/peer_serve.c) answers them, and
 * client callers (server/peer_store.c) encode and decode their payloads
 * with proto/wire.h.
 *
 * Handshake, on every connection before anything else:
 *   client: HELLO {version, cluster id, node id, epoch, nonce_c}
 *   server: refuses (ERR_DENIED, a log line naming why) another cluster id,
 *           another protocol version or an older epoch than its own; else
 *           {node id, epoch, nonce_s, HMAC-SHA256(secret, "wlp1 server" |
 *           cluster | nonce_c | nonce_s)}
 *   client: checks that mac and that the server's epoch is not older, then
 *           AUTH {HMAC-SHA256(secret, "wlp1 client" | cluster | nonce_s |
 *           nonce_c)}; the server checks it and answers AUTH 0.
 * So each side proves it holds the secret over a fresh nonce of the other,
 * and no request is served before both have.
 *
 * Requests are multiplexed over a few connections per peer (ids, responses
 * in any order). Memory stays bounded: the server stops reading a
 * connection while the requests it is serving hold more than a budget of
 * bytes, and a client keeps at most a bounded number of calls in flight per
 * peer (the rest wait in order). Every call has a deadline: past it the
 * call fails with ERR_IO and its late answer is dropped. A peer's health
 * (up, suspect after a timeout, down after a failed connect or a lost
 * connection) is kept for placement and reads; a down peer's calls fail at
 * once until a reconnect succeeds: tried 50 ms after the failure, then at
 * doubling intervals up to the retry interval.
 *
 * Threads: proto_net_* calls and proto_call* are thread-safe, except where
 * said. Handlers and call callbacks run on the loop thread and must not
 * block.
 */
#ifndef WL_NET_H
#define WL_NET_H

#include "proto/wire.h"

#include <uv.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct proto_net proto_net_t;
typedef struct proto_peer proto_peer_t;
typedef struct proto_conn proto_conn_t;

/* One request received by the server, owned by the handler until proto_reply. */
typedef struct proto_inbound {
    proto_hdr_t hdr;
    proto_req_t req;               /* decoded; its pointers into payload */
    const uint8_t *payload;        /* hdr.len bytes */
    char peer[PROTO_MAX_NAME + 1]; /* the authenticated peer's node id */
    proto_conn_t *conn;            /* net's */
    struct proto_inbound *next;    /* net's */
    uint8_t *reply;                /* proto_reply_buf's (its frame: PROTO_HDR bytes before) */
    size_t reply_cap, reply_len;
    size_t known_at, known_len; /* proto_reply_crc's piece of the reply ... */
    uint32_t known_crc;         /* ... and its crc32c */
    int status;
    size_t charge; /* net's: the bytes the serve budget counts for it until its reply is written */
} proto_inbound_t;

typedef struct {
    const char *listen;  /* HOST:PORT to serve on (port 0: any); NULL: no server */
    const char *cluster; /* cluster id */
    const char *node;    /* this node's id */
    const void *secret;  /* cluster secret, secret_len bytes (at least 16) */
    size_t secret_len;
    uint64_t epoch;      /* cluster map epoch (proto_net_set_epoch) */
    int conns_per_peer;  /* connections per peer; 0 = 2 */
    uint32_t timeout_ms; /* a call's deadline; 0 = 10000 */
    uint32_t retry_ms;   /* a down peer is retried 50 ms on, doubling up to this; 0 = 1000 */
    /*
     * Bytes of requests being served (with their replies, and frames being
     * read) before reading pauses; 0 = 256 MiB. One connection's requests
     * pause it at a quarter of that, so a peer that stops reading its
     * replies holds no more and pauses nobody else; one whose write queue
     * does not shrink for timeout_ms is closed.
     */
    size_t serve_budget;
    int max_inflight; /* calls in flight per peer (more wait); 0 = 256 */
    /*
     * A request arrived (loop thread; must not block). The handler answers
     * it with proto_reply_buf + proto_reply, from any thread, exactly once.
     */
    void (*handle)(void *arg, proto_inbound_t *in);
    void *arg;
    /*
     * Optional (loop thread): the most bytes the handler's reply to q may
     * take (what it will ask of proto_reply_buf). Charged to the serve
     * budget when the request is admitted, before any handler allocates it:
     * requests admitted while replies cannot be written otherwise each
     * allocate a reply the budget never saw.
     */
    size_t (*reply_bound)(void *arg, const proto_req_t *q);
} proto_net_cfg_t;

/*
 * Start the loop thread (and the listener, cfg->listen). 0, ERR_INVAL (bad
 * config), ERR_IO (cannot listen: logged), ERR_NOMEM. Strings are copied.
 */
int proto_net_start(const proto_net_cfg_t *cfg, proto_net_t **out)
    __attribute__((warn_unused_result));
/*
 * Stop: close every connection (calls in flight fail with ERR_CLOSED),
 * wait for the handlers' outstanding replies, end the thread, free. NULL:
 * no-op. No call may be made once it began; peers are freed with it.
 */
void proto_net_stop(proto_net_t *n);
/* The port the listener is bound to (0: none). */
int proto_net_port(const proto_net_t *n);
/* A new map epoch: peers older than it are refused from now on. */
void proto_net_set_epoch(proto_net_t *n, uint64_t epoch);

/*
 * The peer at addr (HOST:PORT), expected to be node `node`: made on first
 * use, connected lazily. Owned by the net. NULL: ERR_NOMEM / bad address
 * (logged).
 */
proto_peer_t *proto_net_peer(proto_net_t *n, const char *node, const char *addr);

typedef enum { PROTO_PEER_UP = 0, PROTO_PEER_SUSPECT, PROTO_PEER_DOWN } proto_health_t;
proto_health_t proto_peer_health(const proto_peer_t *p);
/*
 * What the control plane says (the node's etcd lease is gone, or back): while
 * away, the peer's health is down whatever its connections say, so readers
 * and writers go around it at once instead of each waiting out a deadline.
 * Calls made to it anyway go as before. A comeback after it was said (a
 * connection to the peer made ready again) ends it: a restarted node is back
 * at once; the control plane says it again if the node is still gone.
 */
void proto_peer_set_away(proto_peer_t *p, int away);
const char *proto_peer_node(const proto_peer_t *p);
/*
 * How many times a connection to the peer was made ready after every one
 * had been lost: a restart of its node is one (so may a cut network be).
 * What the control plane said of the node before it can be stale after.
 */
uint64_t proto_peer_comebacks(const proto_peer_t *p);

/*
 * A call: one request and its response. The caller fills type, the
 * payload (fields, then optional data sent after them without a copy: the
 * frame's payload is fields followed by data) and on_resp; both must stay
 * valid until the call completed.
 */
typedef struct proto_call {
    uint8_t type;
    const void *fields;
    size_t fields_len;
    const void *data;
    size_t data_len;
    /*
     * The response arrived (loop thread, before completion): decode it into
     * the caller's places. Returns the call's result (status, or
     * ERR_CORRUPT for a payload that does not decode). NULL: the result is
     * the status.
     */
    int (*on_resp)(struct proto_call *c, int status, const uint8_t *payload, size_t len);
    void *arg;
    /* proto_call_async: runs once, on the loop thread (or at once, in the caller, on refusal). */
    void (*done)(struct proto_call *c, int rc);
    int rc;
    /* net's */
    uint64_t id;
    uint64_t deadline_ms;
    uint8_t hdr[PROTO_HDR];
    int stage; /* bits: written, answered */
    proto_peer_t *peer;
    proto_conn_t *conn;
    struct proto_call *next;
    void *wait;               /* a synchronous caller's */
    struct proto_cancel *tok; /* proto_call_async_cancelable's: let go at completion */
    uv_write_t write_req;
    uv_buf_t bufs[3];
} proto_call_t;

/* Run a call and wait for it: its result (0, the response's ERR_*, ERR_IO, ERR_CLOSED). */
int proto_call(proto_peer_t *p, proto_call_t *c) __attribute__((warn_unused_result));
/* Start a call; c->done runs when it completed. */
void proto_call_async(proto_peer_t *p, proto_call_t *c);

/*
 * Calls that can be given up on (hedged reads): a token, owned by whoever may
 * give up, and a call made with it. proto_cancel (any thread, any time, even
 * before the call starts or after it ended) makes the call end at once with
 * ERR_CANCELED unless its response was already taken: a call that ends with
 * ERR_CANCELED never ran on_resp, so it wrote nothing into the caller's places.
 * One call at a time per token; proto_cancel_init again before reuse.
 */
typedef struct proto_cancel {
    pthread_mutex_t mu;
    int canceled;
    proto_peer_t *peer; /* the call in flight with it, if any */
    uint64_t id;
} proto_cancel_t;
void proto_cancel_init(proto_cancel_t *t);
void proto_cancel_destroy(proto_cancel_t *t);
void proto_cancel(proto_cancel_t *t);
/* 1 while a call made with t is in flight: giving up on it would free its caller. */
int proto_cancel_in_flight(proto_cancel_t *t);
/* proto_call with a token: ERR_CANCELED at once if t was canceled already. */
int proto_call_cancelable(proto_peer_t *p, proto_call_t *c, proto_cancel_t *t)
    __attribute__((warn_unused_result));
/*
 * proto_call_async with a token (hedged writes): done runs once, with
 * ERR_CANCELED once given up on (at once, in the caller, if t was canceled
 * already). Either way done runs only when the net holds no pointer into the
 * call's buffers any more: a call given up on while its bytes were partly
 * written closes the connection first (the rest of the frame is never sent,
 * and the peer drops the part it read), so the caller may reuse its data
 * buffer from done on, never before. The token is let go before done runs.
 */
void proto_call_async_cancelable(proto_peer_t *p, proto_call_t *c, proto_cancel_t *t);

/*
 * A reply's payload room (cap bytes) for in, valid until proto_reply. The
 * payload is written there and its length given to proto_reply. NULL only
 * for cap 0.
 */
uint8_t *proto_reply_buf(proto_inbound_t *in, size_t cap);
/*
 * The same, placed so that payload byte aligned_at starts a page when cap is large (64 KiB
 * and more): a drive reads a block there directly (storage/drive_read.c), not through a
 * bounce buffer and a copy.
 */
uint8_t *proto_reply_buf_at(proto_inbound_t *in, size_t cap, size_t aligned_at);
/* Answer in (from any thread) with status and len payload bytes of proto_reply_buf; frees in. */
void proto_reply(proto_inbound_t *in, int status, size_t len);
/*
 * The same, for a reply whose payload bytes [at, at + n) have crc32c crc, computed over those
 * bytes as they were put there: the frame's crc combines it rather than reading them again
 * (a shard read's block: its crc is the combination of the chunk crcs its read verified).
 */
void proto_reply_crc(proto_inbound_t *in, int status, size_t len, size_t at, size_t n,
                     uint32_t crc);

/* Counters, for tests and stats. */
typedef struct {
    uint64_t calls, call_errors, timeouts, frames_in, frames_out, bad_frames, refused;
    uint64_t probes, probe_timeouts; /* pings of suspect peers (not in calls or timeouts) */
    uint64_t serving_bytes, paused_reads;
} proto_net_stats_t;
void proto_net_stats(proto_net_t *n, proto_net_stats_t *st);

/* One peer's state and counters (calls made to it and those timed out; probes aside). */
typedef struct {
    char node[PROTO_MAX_NAME + 1];
    proto_health_t health;
    uint64_t calls, timeouts;
} proto_peer_info_t;
/* Up to cap peers into out, in no particular order; returns how many. */
int proto_net_peers(proto_net_t *n, proto_peer_info_t *out, int cap);

#endif
