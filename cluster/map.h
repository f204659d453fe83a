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

#define CMAP_MAX_ID   64
#define CMAP_MAX_ADDR 300
#define CMAP_MAX_SETS 64 /* the object layer's OBJ_MAX_SETS */

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
    char cluster[CMAP_MAX_ID + 1];
    uint64_t epoch;
    cmap_node_t *nodes;
    int nnodes;
    cmap_set_t *sets;
    int nsets;
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
/* The index of node id, or -1. */
int cmap_node_index(const cmap_t *m, const char *id);

#endif
