/*
 * features: what a build reads and speaks beyond what every build of the
 * cluster did, one bit each, so that a cluster whose nodes run different
 * builds (a rolling upgrade) knows which formats it may write. In etcd
 * (PREFIX as for the map, member.h):
 *
 *   PREFIX/features/ID    {"features": MASK, "build": "..."}: what node ID's
 *                         build reads, written by the node before it serves;
 *                         no lease, so a node away counts with what it ran
 *   PREFIX/features_in_use {"in_use": MASK}: the features the cluster uses
 *
 * The rules (member.c keeps them; wl-admin shows them):
 * - A feature is put in use once every node of the map (wl_features_voter)
 *   says it reads it; any node raises in_use, by a transaction that fails if
 *   the map or any node's entry changed since it read them (a node going back
 *   to an older build lowers its entry first, then reads in_use).
 * - in_use never shrinks. A node whose build lacks a feature in use refuses
 *   to start, and a node that finds one while it runs (it was out of the
 *   map's vote: a removed pool's) is fenced, to S3 clients and to its peers:
 *   data that only newer builds read must never meet an older one.
 * - `wl-admin cluster init` puts every feature of its build in use: a new
 *   cluster starts with them all. A cluster from before these keys starts
 *   with none, and gains each once its nodes say so.
 * - A single node, or a map from a file, uses every feature of its build.
 *
 * Gated: a writer uses the format only while its feature is in use. The
 * others were written unconditionally before the flag existed; they are
 * listed so that a downgrade past them is refused.
 */
#ifndef WL_FEATURES_H
#define WL_FEATURES_H

#include "cluster/map.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum {
    /* Gated (server/obj_version.c): archives under SHARD_IF_KEPT, the store condition
     * that never writes a version over its own tombstone; a build without it refuses
     * the mode as corrupt, so until every node reads it archives go under SHARD_IF_NEWER. */
    WL_FEAT_IF_KEPT = 1u << 0,
    /* Each upload of a part under a key of its own; tagged manifest lines. */
    WL_FEAT_PART_TAGS = 1u << 1,
    /* Multipart records that say an upload is closing (a Complete or an Abort under way). */
    WL_FEAT_CLOSING_RECORDS = 1u << 2,
    /* Uploads that name their initiator, whose parts and Complete are its alone. */
    WL_FEAT_INITIATORS = 1u << 3,
    /* Listing continuation tokens carrying a crc of their key. */
    WL_FEAT_TOKEN_CRC = 1u << 4,
};

#define WL_FEATURES_BUILT                                                                          \
    (WL_FEAT_IF_KEPT | WL_FEAT_PART_TAGS | WL_FEAT_CLOSING_RECORDS | WL_FEAT_INITIATORS |          \
     WL_FEAT_TOKEN_CRC)

/* This build's name for status lines: "warmlake VERSION (COMMIT)". */
const char *wl_build_name(void);

/*
 * Whether node (an index into map's nodes) has a say in which features are in
 * use: every node but those whose drives serve only pools removed from
 * service (their nodes may be stopped for good; run again, one that lacks a
 * feature in use is fenced like any other).
 */
int wl_features_voter(const cmap_t *map, int node);

/* What a PREFIX/features_in_use value says is in use: UINT32_MAX when it is unreadable
 * (no build is trusted with it). */
uint32_t wl_features_in_use_decode(const char *val, size_t len);
/* What a node's PREFIX/features/ID entry (parsed; NULL: none) says its build reads; 0 when
 * it says nothing (a build from before features, or a node never started). */
uint32_t wl_features_of_entry(const json_t *entry);

/* The features of mask by name, comma-separated ("none" for 0), into out. */
void wl_features_names(uint32_t mask, char *out, size_t cap);

#endif
