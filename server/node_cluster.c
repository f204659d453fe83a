/*
 * node_cluster: the member's map and stores, the object layer's sets and
 * pools (contracts in node_cluster.h).
 *
 * Placement (obj_set_multi) hashes a key to a set with a seed; a cluster's
 * seed comes from its id, so that every node routes a key alike. Pools
 * added to the map while the node runs reach the object layer through
 * member_on_pools, recorded in DATA/layout before they take a key.
 */
#include "server/node_cluster.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "server/node_drives.h"

#include <stdio.h>
#include <stdlib.h>

/* The placement seed of a cluster: its id's FNV-1a (fixed: placement depends on it). */
static uint64_t placement_seed(const char *cluster)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = cluster; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

/* nsets sets of k+m stores each (set j: st[j*(k+m)...]) into sets[]: 0, or an ERR_*. */
static int new_sets(const shard_store_t *st, int nsets, int k, int m, uint32_t block,
                    obj_set_t **sets)
{
    int err = 0;
    for (int j = 0; j < nsets; j++)
        if (!(sets[j] = obj_set_new(st + j * (k + m), k, m, block, &err))) {
            while (j--)
                obj_set_free(sets[j]);
            return err;
        }
    return 0;
}

/*
 * The object layer over nsets sets of k+m stores each (set j: st[j*(k+m)...]);
 * with a map, its pools (a cluster's layer is always several sets as one,
 * even of one set: a pool may be added while it runs).
 */
static obj_set_t *make_sets(const shard_store_t *st, int nsets, int k, int m, uint32_t block,
                            uint64_t seed, const cmap_t *map, int *err)
{
    if (nsets == 1 && !map) return obj_set_new(st, k, m, block, err);
    if (nsets > OBJ_MAX_SETS || (map && map->npools > OBJ_MAX_POOLS)) {
        *err = ERR_INVAL;
        return NULL;
    }
    obj_set_t *sets[OBJ_MAX_SETS];
    if ((*err = new_sets(st, nsets, k, m, block, sets)) != 0) return NULL;
    int first = map ? map->pools[0].nsets : nsets;
    obj_set_t *s = obj_set_multi(sets, first, seed, err);
    if (!s) {
        for (int j = 0; j < nsets; j++)
            obj_set_free(sets[j]);
        return NULL;
    }
    for (int p = 0; map && p < map->npools; p++) {
        const cmap_pool_t *pool = &map->pools[p];
        *err =
            p ? obj_set_add_pool(s, sets + pool->first, pool->nsets, pool->weight, pool->draining)
              : obj_set_pool_state(s, 0, pool->weight, pool->draining);
        if (*err) {
            for (int j = pool->first; p && j < nsets; j++) /* those not taken yet */
                obj_set_free(sets[j]);
            obj_set_free(s);
            return NULL;
        }
    }
    return s;
}

/* A pool added to the cluster's map while the node runs (member_pools_t). */
static int pool_added(void *arg, const cmap_t *map, int p, const shard_store_t *st)
{
    node_cluster_t *c = arg;
    const cmap_pool_t *pool = &map->pools[p];
    int k = map->sets[0].k, m = map->sets[0].m, rc;
    if (p != obj_set_pools(c->set)) return ERR_INVAL; /* pools come in order */
    /* Recorded first: a restart with the map that lacks it would not find its objects. */
    if (node_drives_layout_record(c->data, map) != 0) return ERR_IO;
    obj_set_t *sets[OBJ_MAX_SETS];
    if ((rc = new_sets(st, pool->nsets, k, m, c->block, sets)) != 0) return rc;
    if ((rc = obj_set_add_pool(c->set, sets, pool->nsets, pool->weight, pool->draining)) != 0)
        for (int j = 0; j < pool->nsets; j++)
            obj_set_free(sets[j]);
    return rc;
}

/* A pool's weight or state set by the map (member_pools_t). */
static void pool_state(void *arg, int p, uint32_t weight, int draining)
{
    node_cluster_t *c = arg;
    if (obj_set_pool_state(c->set, p, weight, draining) == 0) {
        log_info("event=pool_state pool=%d weight=%u%s", p, weight,
                 draining == OBJ_POOL_REMOVED ? " removed"
                 : draining                   ? " draining"
                                              : "");
        s3_drain_kick(__atomic_load_n(&c->drain, __ATOMIC_ACQUIRE));
    }
}

int node_cluster_load(node_cluster_t *cl, const node_conf_t *c, const volatile int *stop, char *bad,
                      size_t cap)
{
    cl->drives = (int)c->drives;
    cl->k = (int)c->k;
    cl->m = (int)c->m;
    cl->me = -1;
    if (!c->cluster_map && !c->etcd) {
        cl->nsets = cl->drives / (cl->k + cl->m);
        return 0;
    }
    member_cfg_t mc = {c->cluster_map,
                       c->etcd,
                       c->etcd_prefix,
                       c->node,
                       c->cluster_secret_file,
                       c->data,
                       (uint32_t)c->peer_timeout_ms,
                       (uint32_t)c->lease_ttl_s};
    int rc = member_load(&mc, stop, &cl->member, bad, cap);
    if (rc) return rc;
    cl->map = member_map(cl->member);
    cl->me = member_self(cl->member);
    cl->drives = cl->map->nodes[cl->me].drives;
    cl->k = cl->map->sets[0].k;
    cl->m = cl->map->sets[0].m;
    cl->nsets = cl->map->nsets;
    return 0;
}

int node_cluster_join(node_cluster_t *cl, drive_t **dv)
{
    cl->st = xcalloc((size_t)cl->nsets * (size_t)(cl->k + cl->m), sizeof(*cl->st));
    if (cl->member) return member_join(cl->member, dv, cl->st);
    for (int i = 0; i < cl->drives; i++)
        cl->st[i] = shard_store_local(dv[i]);
    return 0;
}

obj_set_t *node_cluster_set_new(node_cluster_t *cl, const node_conf_t *c, int *rc)
{
    int k = cl->k, m = cl->m, err;
    obj_set_t *set = make_sets(cl->st, cl->nsets, k, m, (uint32_t)c->block,
                               cl->map ? placement_seed(cl->map->cluster) : 0, cl->map, &err);
    if (!set) {
        fprintf(stderr, "warmlaked: bad erasure configuration: %s\n", err_str(err));
        *rc = err;
        return NULL;
    }
    obj_set_inline_max(set, (uint32_t)c->inline_max);
    obj_set_hedge_ms(set, (uint32_t)c->hedge_ms);
    if (cl->member) obj_set_features(set, member_features_in_use(cl->member));
    int wq = c->write_quorum ? (int)c->write_quorum : m > 0 ? k + 1 : k;
    if (obj_set_write_quorum(set, wq) != 0) {
        fprintf(stderr, "warmlaked: --write-quorum %d is outside k..k+m (%d..%d)\n", wq, k, k + m);
        obj_set_free(set);
        *rc = 2;
        return NULL;
    }
    log_info("event=write_quorum stores=%d of=%d", wq, k + m);
    if (obj_set_heal_start(set) != 0)
        log_error("event=heal_queue_off: writes short of a store wait for a bucket heal");
    cl->set = set;
    if (cl->member) {
        cl->data = c->data;
        cl->block = (uint32_t)c->block;
        member_pools_t cb = {pool_added, pool_state, cl};
        member_on_pools(cl->member, &cb);
    }
    return set;
}

void node_cluster_s3_attach(node_cluster_t *cl, s3_cfg_t *s3)
{
    __atomic_store_n(&cl->drain, s3->drain, __ATOMIC_RELEASE);
    if (cl->member) member_node_stats(cl->member, s3_node_state, s3_heal_now, s3);
}

void node_cluster_s3_detach(node_cluster_t *cl)
{
    if (cl->member) member_node_stats(cl->member, NULL, NULL, NULL); /* s3 and the set go now */
    if (cl->member) member_on_pools(cl->member, NULL); /* no kick of a mover stopped */
}

void node_cluster_set_free(node_cluster_t *cl)
{
    if (cl->member) member_on_pools(cl->member, NULL); /* no pool added to a set freed */
    obj_set_free(cl->set);
    cl->set = NULL;
}

void node_cluster_leave(node_cluster_t *cl)
{
    member_leave(cl->member, cl->st, cl->st ? cl->nsets * (cl->k + cl->m) : 0);
    free(cl->st);
    cl->st = NULL;
}

void node_cluster_free(node_cluster_t *cl)
{
    member_free(cl->member);
    cl->member = NULL;
    cl->map = NULL;
}
