/*
 * member_features: what this node's build reads, and what the cluster uses
 * (cluster/features.h holds the bits and the rule; this is a node's side of
 * it, for member.c).
 *
 * Before serving, features_join says what this build reads and refuses to
 * start when the cluster uses a feature it lacks. Each lease-keeper round,
 * features_round fences the node on such a feature and puts in use what every
 * voter of the map reads.
 */
#ifndef WARMLAKE_SERVER_MEMBER_FEATURES_H
#define WARMLAKE_SERVER_MEMBER_FEATURES_H

#include "cluster/etcd.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    etcd_t *etcd;         /* not owned */
    const char *prefix;   /* the cluster's etcd prefix, without a trailing '/' */
    const char *node;     /* this node's id */
    const char *etcd_url; /* for what is said while etcd is away */
    uint32_t features;    /* what this build reads */
    _Atomic uint32_t in_use;
    _Atomic int fenced;       /* a feature in use lacked: neither S3 clients nor peers served */
    _Atomic int *node_fenced; /* the member's fence, set with fenced */
} member_features_t;

/*
 * This build's features, lowered by WARMLAKE_FEATURES_CLAIM (a mask) so that
 * a test can run a node as an older build; in_use starts as all of them (a
 * map from a file uses every feature).
 */
void features_init(member_features_t *f);

/*
 * Before serving: write PREFIX/features/NODE, then read the features in
 * use, in that order (features.h). 0; 1 when stopped while etcd was away;
 * 2 when this build lacks a feature in use; bad says which.
 */
int features_join(member_features_t *f, const volatile int *wait_stop, char *bad, size_t cap);

/*
 * A keeper round: fence on a feature in use this build lacks; unless the
 * node is fenced, put in use what every voter of the map as etcd holds it
 * reads, unless the map, any node's entry or in_use changed since read.
 * Etcd away: nothing changes.
 */
void features_round(member_features_t *f);

#endif
