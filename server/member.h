/*
 * member: this node's membership in a cluster. It finds the map (a file,
 * or etcd, where it waits until the map lists this node), serves the local
 * drives to peers (proto/ + peer_serve), makes the erasure set's stores
 * (local drives for this node's shards, remote stores for the others'),
 * and with etcd holds a lease on its registration and watches the map:
 *
 *   PREFIX/map          the cluster map (cluster/map.h), edited by wl-admin
 *   PREFIX/nodes/ID     this node's registration, alive while its lease is
 *                       (TTL 10 s, renewed every 3 s)
 *   PREFIX/features/ID  what this node's build reads, and the features in
 *   PREFIX/features_in_use  use (cluster/features.h: a build that lacks one
 *                       refuses to start, or is fenced)
 *
 * A new map epoch is applied without a restart when it keeps the sets
 * served as they are (nodes added, pools added or their weights and states
 * changed, addresses of nodes outside the sets, any other change of the
 * document): peers then handshake at the new epoch and refuse those still
 * at the old one. A map that changes a set already served, this node's
 * addresses or drive count, or drops this node, fences it: every S3
 * request answers 503 from then on, and the log says that a restart
 * applies the new layout (a node must never serve with a layout the others
 * no longer use; sets never change under their data).
 */
#ifndef WL_MEMBER_H
#define WL_MEMBER_H

#include "cluster/map.h"
#include "server/shard.h"

#include <stdatomic.h>

typedef struct member member_t;

typedef struct {
    const char *map_file;     /* --cluster FILE, or */
    const char *etcd;         /* --etcd URL[,URL] */
    const char *etcd_prefix;  /* keys under it (default "/warmlake") */
    const char *node;         /* --node ID */
    const char *secret_file;  /* --cluster-secret-file (else WARMLAKE_CLUSTER_SECRET) */
    const char *data;         /* for the registration: where the drives live */
    uint32_t peer_timeout_ms; /* a call's deadline (proto_net_cfg_t.timeout_ms; 0: its default) */
    uint32_t lease_ttl_s;     /* --lease-ttl: the etcd lease (0: 10 s), renewed every third */
} member_cfg_t;

/*
 * Load the map and find this node in it: 0, or 2 with a message in bad (a
 * setting or map that cannot work), or 1 (etcd unreachable past its wait:
 * also in bad). *wait_stop, when set by a signal, ends an etcd wait (1).
 */
int member_load(const member_cfg_t *c, const volatile int *wait_stop, member_t **out, char *bad,
                size_t cap);
const cmap_t *member_map(const member_t *m);
int member_self(const member_t *m); /* this node's index in the map */
/* 1 once a map change fenced this node: answer no S3 request with data. */
const _Atomic int *member_fenced(const member_t *m);
/* The features the cluster uses (cluster/features.h), kept current while the node runs. */
const _Atomic uint32_t *member_features_in_use(const member_t *m);
/* The node's protocol endpoint (its counters: /_warmlake/stats); NULL before member_join. */
struct proto_net *member_net(const member_t *m);
/* What this node answers wl-admin's NODE_STATS with, and runs for its HEAL_NOW
 * (peer_serve_node_stats); after member_join. */
void member_node_stats(member_t *m, char *(*fn)(void *arg), int (*heal_now)(void *arg), void *arg);

/*
 * Serve drives dv (the node's, borrowed) to peers and fill st with the
 * stores of every set in map order (set j's store i at j*(k+m) + i; room
 * for nsets * (k+m)); with etcd, register and start watching. 0, or 1 with
 * the reason printed.
 */
int member_join(member_t *m, drive_t **dv, shard_store_t *st);
/*
 * A new epoch that adds pools (the sets served so far kept as they are) is
 * applied without a restart: add(arg, map, p, st) for each pool p added,
 * st its sets' stores (k+m per set, in order; the member's until
 * member_leave), then state(arg, p, weight, draining) for every pool of the
 * map. add failing (not 0) fences the node. cb NULL: none from then on
 * (returns once a callback running has returned).
 */
typedef struct {
    int (*add)(void *arg, const cmap_t *map, int pool, const shard_store_t *st);
    void (*state)(void *arg, int pool, uint32_t weight, int draining);
    void *arg;
} member_pools_t;
void member_on_pools(member_t *m, const member_pools_t *cb);
/* Stop watching, deregister (the lease revoked), stop serving peers, free the remote stores. */
void member_leave(member_t *m, shard_store_t *st, int n);
void member_free(member_t *m);

#endif
