/*
 * map: the cluster map, what every node must agree on to serve one
 * namespace: the cluster's id and epoch, its nodes (S3 and protocol
 * addresses, drive counts) and the erasure sets that span their drives.
 *
 * The map is JSON (the same document a control plane stores):
 *
 *   {
 *     "cluster": "lake1",            ids: letters, digits, '.', '-', '_'
 *     "epoch": 1,                    a new map is a higher epoch
 *     "nodes": [
 *       {"id": "n1", "s3": "127.0.0.1:9001", "proto": "127.0.0.1:9101", "drives": 2},
 *       ...
 *     ],
 *     "sets": [                      optional: without it, the drives taken
 *       {"ec": "4+2",                round-robin over the nodes, cut into
 *        "drives": ["n1/0", "n2/0", "n3/0", "n1/1", "n2/1", "n3/1"]}
 *     ],                             sets of k+m
 *     "ec": "4+2"                    the automatic sets' coding (default: one
 *   }                                set of every drive, m = 2 from 4 drives)
 *
 * Pools. Capacity grows by pools: groups of sets that new objects go to,
 * while every object stays in the pool it was written to (nothing moves
 * when a pool is added). A map with pools lists them instead of top-level
 * "sets" and "ec":
 *
 *     "pools": [
 *       {"id": "p0", "sets": [ ...as above... ]},
 *       {"id": "p1", "ec": "4+2", "nodes": ["n4", "n5", "n6"],  automatic sets
 *        "weight": 2, "state": "draining"}                      over these nodes
 *     ]                                                         (all their drives)
 *
 * "weight" (default 1) is the pool's share of new objects (server/obj_pool.c:
 * a new key's pool is a weighted rendezvous hash, the same on every node
 * of one epoch); "state" is "active" (default), "draining" (no new
 * objects; its keys move to the active pools) or "removed" (drained and out
 * of service: nodes ask it for nothing, so its nodes may be shut down; its
 * sets stay in the map, numbered as they were). Every pool has the same coding (one pool of stripe
 * buffers serves them all). A map without "pools" is one pool, "p0", of its sets. The sets are
 * numbered across the pools in order: pool p's are sets[first .. first + nsets).
 *
 * A node's drive NODE/I is its I-th local drive (DATA/driveI). A set names
 * k+m distinct drives; its shard i lives on its i-th drive. Each object
 * lives on one set (placement: server/obj_multi.c), so the sets of a
 * cluster never change once it holds data. The automatic
 * layout puts consecutive shards on different nodes, so a set spans as many
 * nodes as it can and losing one node loses as few shards as it can.
 */
#ifndef WL_MAP_H
#define WL_MAP_H

#include "erasure/ers.h"

#include <stddef.h>
#include <stdint.h>

#define CMAP_MAX_ID       64
#define CMAP_MAX_ADDR     300
#define CMAP_MAX_SETS     64 /* the object layer's OBJ_MAX_SETS */
#define CMAP_MAX_POOLS    8  /* the object layer's OBJ_MAX_POOLS */
#define CMAP_POOL_REMOVED 2  /* cmap_pool_t.draining: the object layer's OBJ_POOL_REMOVED */

typedef struct {
    char id[CMAP_MAX_ID + 1];
    char s3[CMAP_MAX_ADDR];    /* HOST:PORT its S3 API listens on */
    char proto[CMAP_MAX_ADDR]; /* HOST:PORT its node-to-node protocol listens on */
    int drives;
} cmap_node_t;

typedef struct {
    int node;  /* index into nodes */
    int drive; /* the node's local drive number */
} cmap_drive_t;

typedef struct {
    int k, m;
    cmap_drive_t d[ERS_MAX_SHARDS]; /* k + m of them, in shard order */
} cmap_set_t;

typedef struct {
    char id[CMAP_MAX_ID + 1];
    int first, nsets; /* its sets: sets[first .. first + nsets) */
    uint32_t weight;  /* share of new objects (1 .. 1000000) */
    int draining;     /* no new objects: 1 draining, 2 removed (CMAP_POOL_REMOVED) */
} cmap_pool_t;

typedef struct {
    char cluster[CMAP_MAX_ID + 1];
    uint64_t epoch;
    cmap_node_t *nodes;
    int nnodes;
    cmap_set_t *sets;
    int nsets;
    cmap_pool_t *pools; /* at least one */
    int npools;
} cmap_t;

/*
 * Parse and check a map. 0, or ERR_INVAL with a message in err (errlen
 * bytes) naming what is wrong. *out is freed with cmap_free (on success).
 */
int cmap_parse(const char *json, size_t len, cmap_t *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* cmap_parse of a file's contents (ERR_IO when it cannot be read). */
int cmap_load(const char *path, cmap_t *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void cmap_free(cmap_t *m);
void cmap_copy(cmap_t *dst, const cmap_t *src); /* a deep copy, freed with cmap_free */
/* The index of node id, or -1. */
int cmap_node_index(const cmap_t *m, const char *id);
/* The index of pool id, or -1. */
int cmap_pool_index(const cmap_t *m, const char *id);
/* Whether set a of x and set b of y are the same: coding, and drives on the same node ids. */
int cmap_same_set(const cmap_t *x, int a, const cmap_t *y, int b);

#endif
