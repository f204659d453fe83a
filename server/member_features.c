/*
 * member_features: a node's side of the cluster's features (contract in
 * member_features.h; the bits and the rule in cluster/features.h).
 */
#include "server/member_features.h"

#include "cluster/map.h"
#include "cluster/features.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * What this build reads. WARMLAKE_FEATURES_CLAIM (a mask) lowers it, so
 * that a test can run a node as a build without some feature would be.
 */
void features_init(member_features_t *f)
{
    const char *claim = getenv("WARMLAKE_FEATURES_CLAIM");
    f->features = WL_FEATURES_BUILT;
    if (claim && *claim) f->features &= (uint32_t)strtoul(claim, NULL, 0);
    atomic_store(&f->in_use, f->features); /* a map from a file: every feature (features.h) */
}

/* The features in use as etcd holds them: 0 with *mask and *rev (0, 0 when never set), or
 * ERR_IO. */
static int read_in_use(member_features_t *f, uint32_t *mask, int64_t *rev)
{
    char key[300], *val = NULL;
    size_t len;
    snprintf(key, sizeof(key), "%s/features_in_use", f->prefix);
    *mask = 0;
    *rev = 0;
    int rc = etcd_get(f->etcd, key, &val, &len, rev);
    if (rc == ERR_NOT_FOUND) return 0;
    if (rc) return rc;
    *mask = wl_features_in_use_decode(val, len);
    free(val);
    return 0;
}

/*
 * Before serving: say what this build reads (PREFIX/features/ID), then read
 * what the cluster uses, in that order (features.h: a raise that read this
 * node's entry before it went back to an older build fails its compare). 0,
 * 1 (stopped while etcd was away) or 2 (this build lacks a feature in
 * use), with bad set.
 */
int features_join(member_features_t *f, const volatile int *wait_stop, char *bad, size_t cap)
{
    char key[300];
    snprintf(key, sizeof(key), "%s/features/%s", f->prefix, f->node);
    json_t *o =
        json_pack("{s:I,s:s}", "features", (json_int_t)f->features, "build", wl_build_name());
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    uint32_t in_use = 0;
    int64_t rev;
    int rc;
    for (int tries = 0;; tries++) {
        rc = etcd_put(f->etcd, key, text, strlen(text), 0);
        if (!rc) rc = read_in_use(f, &in_use, &rev);
        if (!rc || *wait_stop) break;
        if (tries % 5 == 0)
            fprintf(stderr, "warmlaked: waiting for etcd %s to record this build's features\n",
                    f->etcd_url);
        usleep(1000 * 1000);
    }
    free(text);
    if (rc) {
        snprintf(bad, cap, "stopped while waiting for etcd %s", f->etcd_url);
        return 1;
    }
    if (in_use & ~f->features) {
        char names[256];
        wl_features_names(in_use & ~f->features, names, sizeof(names));
        snprintf(bad, cap,
                 "this build (%s) lacks features the cluster uses (%s): data written with them "
                 "could be misread; run a build that has them",
                 wl_build_name(), names);
        return 2;
    }
    atomic_store(&f->in_use, in_use);
    return 0;
}

typedef struct {
    const cmap_t *map;
    uint32_t *of; /* per node of the map: its features, 0 unknown */
} feats_t;

static int collect_features(void *arg, const char *key, const char *val, size_t len)
{
    feats_t *fs = arg;
    const char *id = strrchr(key, '/');
    int i = id ? cmap_node_index(fs->map, id + 1) : -1;
    if (i < 0) return 0;
    json_t *o = json_loadb(val, len, 0, NULL);
    fs->of[i] = wl_features_of_entry(o);
    json_decref(o);
    return 0;
}

/* Fenced for good: a feature in use that this build lacks. Said once. */
static void features_fence(member_features_t *f, uint32_t lacking)
{
    if (!atomic_exchange(&f->fenced, 1)) {
        char names[256];
        wl_features_names(lacking, names, sizeof(names));
        log_error("event=member_fenced node=%s why=\"the cluster uses features this build "
                  "lacks: %s\": no S3 data served, no peer served; run a build that has them",
                  f->node, names);
    }
    atomic_store(f->node_fenced, 1);
}

/*
 * Each keeper round: a feature in use that this build lacks fences it (it
 * had no say: a removed pool's node); features every voter of the map as
 * etcd holds it reads are put in use, unless the map, any node's entry or
 * in_use changed since they were read. The member list this node applied is
 * not used: a node fenced by a map, or whose watch lags, has an old one.
 */
void features_round(member_features_t *f)
{
    uint32_t in_use;
    int64_t in_rev, list_rev = 0, map_rev = 0;
    if (read_in_use(f, &in_use, &in_rev) != 0) return; /* etcd away: nothing changes */
    atomic_store(&f->in_use, in_use);
    if (in_use & ~f->features) {
        features_fence(f, in_use & ~f->features);
        return;
    }
    /* Nothing this build could add (the steady state): no more calls this round. */
    if (atomic_load(f->node_fenced) || !(f->features & ~in_use)) return;
    char prefix[300], key[300], mapkey[300], *val = NULL, err[300];
    size_t len;
    snprintf(mapkey, sizeof(mapkey), "%s/map", f->prefix);
    if (etcd_get(f->etcd, mapkey, &val, &len, &map_rev) != 0) return;
    cmap_t map;
    int rc = cmap_parse(val, len, &map, err, sizeof(err));
    free(val);
    if (rc) return;
    snprintf(prefix, sizeof(prefix), "%s/features/", f->prefix);
    feats_t fs = {&map, xcalloc((size_t)map.nnodes + 1, sizeof(uint32_t))};
    rc = etcd_list_at(f->etcd, prefix, collect_features, &fs, &list_rev);
    uint32_t common = f->features;
    for (int i = 0; i < map.nnodes; i++)
        if (wl_features_voter(&map, i)) common &= fs.of[i];
    free(fs.of);
    cmap_free(&map);
    if (rc || !(common & ~in_use)) return;
    uint32_t now = in_use | common;
    json_t *o = json_pack("{s:I}", "in_use", (json_int_t)now);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    snprintf(key, sizeof(key), "%s/features_in_use", f->prefix);
    etcd_cmp_t cmps[] = {{key, in_rev, 0}, {prefix, list_rev, 1}, {mapkey, map_rev, 0}};
    etcd_kv_t put = {key, text, strlen(text)};
    rc = etcd_txn(f->etcd, cmps, 3, &put, 1);
    free(text);
    if (rc == 0) {
        char names[256];
        wl_features_names(now & ~in_use, names, sizeof(names));
        log_info("event=member_features_in_use node=%s added=%s in_use=0x%x", f->node, names, now);
        atomic_store(&f->in_use, now);
    }
}
