/*
 * peer: drives on other nodes, over proto/.
 *
 *   peer_store.c  a shard store (server/shard.h) whose drive is on another
 *                 node: each call is a proto/ call to that node
 *   peer_serve.c  the other side: answers peers' calls from this node's
 *                 local drives, off the protocol's loop thread
 *
 * A remote store behaves as a local one to the object layer: the same
 * calls, the same ERR_* results, plus ERR_IO when the node cannot be
 * reached or does not answer in time (the object layer already treats a
 * failing store as a missing shard).
 */
#ifndef WL_PEER_H
#define WL_PEER_H

#include "proto/net.h"
#include "server/shard.h"

/* A store for drive number `drive` of the node behind peer (freed with peer_store_free). */
shard_store_t peer_store_new(proto_peer_t *peer, uint32_t drive);
/*
 * The remote drive is being refilled (its node's registration says so):
 * readers take it last (shard_ops_t.refilling). A local store: no effect.
 */
void peer_store_set_refilling(shard_store_t *s, int on);
/*
 * The remote drive did not open at its node's start (its registration says
 * so): its health is SHARD_FAILED whatever the way to the node is doing, until
 * that node comes back from down (a restart). A local store: no effect. A
 * remote store also sets it itself when a call is answered ERR_DRIVE_FAILED
 * (a cluster whose map is a file has no registrations).
 */
void peer_store_set_failed(shard_store_t *s, int on);
void peer_store_free(shard_store_t *st);

/* drive_stats_t's fields in the order a STATS response carries them (integers, then doubles). */
/* clang-format off */
#define PEER_STATS_INT(X) \
    X(iu) X(capacity) X(segment_size) X(segments) X(segments_free) X(segments_gc) \
    X(live_bytes) X(used_bytes) X(user_bytes) X(host_bytes) X(padding_bytes) \
    X(relocated_bytes) X(index_bytes) X(flushes) X(flush_records) X(flush_bytes) \
    X(flush_max_records) X(commit_gathers) X(queued) X(compactions) \
    X(segments_released) X(tombstones_dropped) X(throttled) X(reads_direct) \
    X(reads_copied) X(lifetime_host_bytes) X(index_disk_bytes) X(index_mem_bytes) \
    X(replayed_bytes) X(readonly)
#define PEER_STATS_REAL(X) X(write_amp) X(budget_left) X(budget_rate) X(projected_years)
/* Integers added later, after the doubles: an older peer sends fewer (the count says so). */
#define PEER_STATS_MORE(X) X(segments_recycled) X(segments_pooled)
/* clang-format on */

typedef struct peer_serve peer_serve_t;
/*
 * Serve drives[0..n) (borrowed) to peers: returns the handler and its arg
 * for proto_net_cfg_t. threads: pool threads running the drive calls.
 */
peer_serve_t *peer_serve_new(drive_t **drives, int n, int threads);
void peer_serve_handle(void *arg, proto_inbound_t *in);
/* The most bytes its reply to q takes (proto_net_cfg_t.reply_bound); arg as for handle. */
size_t peer_serve_reply_bound(void *arg, const proto_req_t *q);
/*
 * What a NODE_STATS request answers: fn(arg) returns the node's state as
 * JSON text (malloc'd; the server frees it), on a pool thread; and what a
 * HEAL_NOW request runs: heal_now(arg), 0 or an ERR_*. Unset or NULL:
 * ERR_NOT_FOUND. Once they were set to NULL, they run no more (a call
 * under way finished first).
 */
void peer_serve_node_stats(peer_serve_t *sv, char *(*fn)(void *arg), int (*heal_now)(void *arg),
                           void *arg);
/*
 * Serve only members: fn(arg, node) says whether the authenticated peer
 * `node` is in the cluster map; others (an admin tool, a node removed from
 * the map that still holds the secret) may only PING and read counters
 * (STATS, NODE_STATS), and get ERR_DENIED otherwise. fn runs on pool
 * threads. Set before serving.
 */
void peer_serve_gate(peer_serve_t *sv, int (*fn)(void *arg, const char *node), void *arg);
/* After proto_net_stop (no request is in flight any more). NULL: no-op. */
void peer_serve_free(peer_serve_t *sv);

#endif
