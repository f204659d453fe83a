/*
 * obj_pool.c: pools of sets (room of the object layer; map in obj_int.h).
 *
 * Capacity grows by pools: a pool is a group of sets appended to a multi
 * set (obj_set_add_pool), and adding one moves nothing. So a key is found
 * where it was written, and new keys go to the new pool mostly:
 *
 * - A key that a pool holds (a head of any kind: a version, a delete
 *   marker, a deletion's tombstone) is served by that pool: every call
 *   naming the key goes to the set its placement picks in that pool, and
 *   the set's stores order its writes and decide its conditions as they do
 *   with one pool. Finding it costs a head lookup (m+1 stores) in each pool.
 * - A key no pool holds goes to an active (not draining) pool picked by a
 *   rendezvous hash of bucket and key weighted by the pools' weights: the
 *   same pool on every node whose map gives the same weights, so two nodes
 *   racing to create one key (If-None-Match: * included) pick one pool and
 *   its set decides between them. The weights come from the cluster map
 *   (`wl-admin pool weigh` sets them from the pools' free space; `pool add`
 *   and `pool weight` as given); they are not each node's own view of free
 *   space, which differs from node to node and would split racing creates
 *   over pools.
 * - Two pools may still hold one key when the weights change under racing
 *   writes (a new map epoch applied by one node before another). The
 *   newest head wins then, on every node: calls go to the pool holding it,
 *   and merged listings list that pool's entry (obj_multi.c).
 * - A pool that cannot say whether it holds a key (more than m of the
 *   stores its lookup asked failed) is where the key goes when no other
 *   pool holds it: reads and writes then fail there as that pool's lookup
 *   does, instead of a write creating the key in a second pool.
 * - An upload is found by its id (obj__route_upload): the pool that took
 *   CreateMultipartUpload keeps its parts and its Complete.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/mem.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

int obj_set_pools(const obj_set_t *s)
{
    return s->nsub ? atomic_load(&((obj_set_t *)s)->npool) : 1;
}

int obj_set_add_pool(obj_set_t *s, obj_set_t **sets, int nsets, uint32_t weight, int draining)
{
    if (!s->nsub || nsets < 1 || weight < 1) return ERR_INVAL;
    for (int j = 0; j < nsets; j++)
        if (!sets[j] || sets[j]->nsub || sets[j]->k != s->k || sets[j]->m != s->m ||
            sets[j]->block != s->block)
            return ERR_INVAL;
    pthread_mutex_lock(&s->pools_mu);
    int np = atomic_load(&s->npool), first = atomic_load(&s->nsub);
    if (np >= OBJ_MAX_POOLS || first + nsets > OBJ_MAX_SETS) {
        pthread_mutex_unlock(&s->pools_mu);
        return ERR_INVAL;
    }
    obj_set_t *s0 = s->sub[0];
    for (int j = 0; j < nsets; j++) {
        obj_set_t *x = sets[j];
        /* The settings of the sets already there, and their stripe buffers. */
        bufpool_free(x->bufs);
        x->bufs = s0->bufs;
        x->bufs_shared = 1;
        obj_set_inline_max(x, s0->inline_max);
        obj_set_hedge_ms(x, s0->hedge_ms);
        obj_set_features(x, s0->features);
        x->wq = s0->wq;
        /* A queue that cannot start is logged by it; the heal scanner covers what it misses. */
        int hrc = s0->healq ? obj_set_heal_start(x) : 0;
        (void)hrc;
        x->parent = s;
        s->sub[first + j] = x;
    }
    s->pools[np].first = first;
    s->pools[np].n = nsets;
    atomic_store(&s->pools[np].weight, weight);
    atomic_store(&s->pools[np].draining, draining);
    /* The sets before the pool that names them, and both before the counts (seq_cst). */
    atomic_store(&s->nsub, first + nsets);
    atomic_store(&s->npool, np + 1);
    pthread_mutex_unlock(&s->pools_mu);
    return 0;
}

int obj_set_pool_state(obj_set_t *s, int p, uint32_t weight, int draining)
{
    if (!s->nsub || p < 0 || p >= atomic_load(&s->npool) || weight < 1 || draining < 0 ||
        draining > OBJ_POOL_REMOVED)
        return ERR_INVAL;
    atomic_store(&s->pools[p].weight, weight);
    atomic_store(&s->pools[p].draining, draining);
    return 0;
}

/*
 * The pool a new key goes to: of the active pools, the one with the
 * highest -weight / ln(u), u a hash of (pool, bucket, key) in (0, 1):
 * weighted rendezvous hashing, so each pool takes its weight's share of
 * new keys, and a pool's weight changing moves only the keys that it wins
 * or loses. With every pool draining (a map never has that), pool 0.
 */
int obj__new_key_pool(const obj_set_t *s, int np, const char *bucket, const char *key)
{
    int best = 0;
    double top = -1;
    for (int p = 0; p < np; p++) {
        if (atomic_load(&s->pools[p].draining)) continue;
        XXH64_state_t st;
        XXH64_reset(&st, s->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(p + 1)));
        XXH64_update(&st, bucket, strlen(bucket) + 1);
        XXH64_update(&st, key, strlen(key));
        /* 53 bits, never 0 or 1 */
        double u = ((double)(XXH64_digest(&st) >> 11) + 0.5) / 9007199254740992.0;
        double score = -(double)atomic_load(&s->pools[p].weight) / log(u);
        if (score > top) {
            top = score;
            best = p;
        }
    }
    return best;
}

int obj__pool_holder(obj_set_t *s, const char *bucket, const char *key)
{
    int np = s->nsub ? atomic_load(&s->npool) : 1;
    obj_info_t *h = xmalloc(sizeof(*h)), *best = xmalloc(sizeof(*best));
    int holder = -1, unsure = -1;
    for (int p = 0; p < np; p++) {
        if (atomic_load(&s->pools[p].draining) == OBJ_POOL_REMOVED) continue; /* moved off */
        obj_set_t *set = s->sub[obj__in_pool(s, p, bucket, key)];
        /*
         * A draining pool's head as a commit reads it (what stands on every store): a
         * move's switch cut short by a crash (its tombstone on some stores) must not send
         * the key to one pool or the other depending on which stores answer.
         */
        int iw = 0;
        int rc = atomic_load(&s->pools[p].draining) ? obj__standing(set, bucket, key, h, &iw)
                                                    : obj__newest_head(set, bucket, key, h);
        /* A move's tombstone holds nothing: the key left this pool (obj_move.c). Counted,
         * a key deleted in the pool it went to would come back to this one. Nor does a
         * delete's in a draining pool (a review): a drain pass lists no tombstone, so the
         * pool drained "done" while a new write of the key went back to it. */
        if (rc == 0 && (obj__moved_mark(h) ||
                        (atomic_load(&s->pools[p].draining) && h->deleted && !h->marker)))
            rc = ERR_NOT_FOUND;
        if (rc == 0) {
            int cmp = holder < 0                      ? 1
                      : h->stamp_ns != best->stamp_ns ? (h->stamp_ns > best->stamp_ns ? 1 : -1)
                                                      : strcmp(h->upload_id, best->upload_id);
            /*
             * The same stamp in two pools: a key being moved off a draining pool
             * (obj_move.c), copied but not switched yet. The source is the key's until
             * the switch stands (its tombstone, ignored above, then leaves the target):
             * every request goes there meanwhile, so that the copy only follows it and
             * nothing is written to, or deleted from, a copy that may yet be taken back.
             */
            if (holder >= 0 && h->stamp_ns == best->stamp_ns &&
                atomic_load(&s->pools[p].draining) != atomic_load(&s->pools[holder].draining))
                cmp = atomic_load(&s->pools[p].draining) ? 1 : -1;
            if (cmp > 0) {
                holder = p;
                obj_info_copy(best, h);
            }
        } else if (rc != ERR_NOT_FOUND && unsure < 0) {
            unsure = p;
        }
    }
    free(h);
    free(best);
    return holder >= 0 ? holder : unsure;
}

int obj_set_pool_of(obj_set_t *s, const char *bucket, const char *key)
{
    if (!s->nsub) return 0;
    int np = atomic_load(&s->npool);
    if (np <= 1) return 0;
    int p = obj__pool_holder(s, bucket, key);
    return p >= 0 ? p : obj__new_key_pool(s, np, bucket, key);
}

obj_set_t *obj__pool_route(obj_set_t *s, const char *bucket, const char *key)
{
    return s->sub[obj__in_pool(s, obj_set_pool_of(s, bucket, key), bucket, key)];
}

obj_set_t *obj__route_upload(obj_set_t *s, const char *bucket, const char *key,
                             const char *upload_id)
{
    int np = s->nsub ? atomic_load(&s->npool) : 1;
    if (np > 1 && strlen(upload_id) == 32) {
        obj_info_t *rec = xmalloc(sizeof(*rec));
        obj_set_t *unsure = NULL;
        for (int p = 0; p < np; p++) {
            if (atomic_load(&s->pools[p].draining) == OBJ_POOL_REMOVED) continue;
            obj_set_t *set = s->sub[obj__in_pool(s, p, bucket, key)];
            int rc = obj_stat(set, MPU_UPLOADS, upload_id, rec);
            if (rc == 0) {
                free(rec);
                return set;
            }
            if (rc != ERR_NOT_FOUND && !unsure) unsure = set;
        }
        free(rec);
        /* A pool that could not say may hold it: there the call fails as that pool fails it
         * (503), where the key's pool would answer NoSuchUpload and end the upload. */
        if (unsure) return unsure;
    }
    return obj__route(s, bucket, key);
}

int obj_set_pool_sets(const obj_set_t *s, int p, int *first, int *draining)
{
    if (!s->nsub) {
        if (p != 0) return ERR_INVAL;
        *first = 0;
        *draining = 0;
        return 1;
    }
    if (p < 0 || p >= atomic_load(&((obj_set_t *)s)->npool)) return ERR_INVAL;
    *first = s->pools[p].first;
    *draining = atomic_load(&((obj_set_t *)s)->pools[p].draining);
    return s->pools[p].n;
}

obj_set_t *obj_set_sub(const obj_set_t *s, int j)
{
    if (!s->nsub) return j == 0 ? (obj_set_t *)s : NULL;
    return j >= 0 && j < atomic_load(&((obj_set_t *)s)->nsub) ? s->sub[j] : NULL;
}

int obj_set_mover_here(const obj_set_t *s, int j)
{
    const obj_set_t *set = obj_set_sub(s, j);
    /*
     * The node of the set's first store, and only it: two movers of one key at once (one
     * with a stale view of the key's versions) could undo or retire what the other moved.
     * A set whose first node is away waits for it (a node taking over while another
     * restarts was how a probe first got two).
     */
    return set && shard_store_is_local(&set->st[0]);
}
