/*
 * node_cluster: this node's place among others, and the object layer over
 * its stores. A single node's stores are its drives, in sets of k+m; a
 * cluster member (--cluster, --etcd: server/member.h) takes its drives,
 * coding and sets from the map, serves its drives to the other nodes and
 * reaches theirs, and takes in pools added to the map while it runs. Main
 * thread, except where a function says otherwise.
 */
#ifndef WL_NODE_CLUSTER_H
#define WL_NODE_CLUSTER_H

#include "cluster/map.h"
#include "server/member.h"
#include "server/node_conf.h"
#include "server/s3.h"

typedef struct {
    member_t *member;        /* NULL: a single node */
    const cmap_t *map;       /* the member's map; NULL: a single node */
    int me;                  /* this node's index in map (-1: none) */
    int drives, k, m, nsets; /* the map's, else the settings' */
    shard_store_t *st;       /* every set's stores, set j's from st[j * (k + m)] */
    /* node_cluster.c's: what the member's pool callbacks work on. */
    obj_set_t *set;
    const char *data;
    uint32_t block;
    s3_drain_t *drain; /* (atomic: set once the mover runs; callbacks end before it stops) */
} node_cluster_t;

/*
 * Where the node's drives, coding and sets come from into cl (zeroed, as a
 * static is): with --cluster or --etcd the map (member_load; an etcd wait
 * ends when *stop is set), else c's settings. Returns 0; 2 with the reason
 * in bad (a setting or map that cannot work); or 1 (etcd unreachable past
 * its wait: also in bad). node_cluster_free(cl) in every case. Blocks
 * (etcd).
 */
int node_cluster_load(node_cluster_t *cl, const node_conf_t *c, const volatile int *stop, char *bad,
                      size_t cap) __attribute__((warn_unused_result));

/*
 * Every set's stores (cl->st) over the node's open drives dv (borrowed
 * until node_cluster_leave): a single node's own, or a member's served to
 * its peers with the others' reached through them (member_join). 0, or 1
 * with the reason printed.
 */
int node_cluster_join(node_cluster_t *cl, drive_t **dv) __attribute__((warn_unused_result));

/*
 * The object layer over every set's stores (a member's: each pool of its
 * map, and pools the map adds from now on), with c's inline size, hedge
 * and write quorum, its heal queue started. The set (cl's until
 * node_cluster_set_free), or NULL with the reason printed and an exit
 * code (not 0) in *rc.
 */
obj_set_t *node_cluster_set_new(node_cluster_t *cl, const node_conf_t *c, int *rc)
    __attribute__((warn_unused_result));

/*
 * The S3 layer hooked to the member: what this node answers wl-admin's
 * NODE_STATS and HEAL_NOW with, and s3->drain (NULL: none) kicked as a
 * pool's state changes. After node_cluster_set_new.
 */
void node_cluster_s3_attach(node_cluster_t *cl, s3_cfg_t *s3);

/* Before the S3 layer stops: its hooks off, no kick of a mover stopped (returns once a
 * callback running has returned). */
void node_cluster_s3_detach(node_cluster_t *cl);

/* The set freed, once no pool can be added to it. */
void node_cluster_set_free(node_cluster_t *cl);

/* A member stops serving and watching (deregistered); every set's stores freed. */
void node_cluster_leave(node_cluster_t *cl);

void node_cluster_free(node_cluster_t *cl);

#endif
