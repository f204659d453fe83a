/*
 * obj_multi.c: several erasure sets as one (room of the object layer; map
 * in obj_int.h): placement, the set-wide counters, and listings merged
 * over the sets.
 *
 * Placement. A key lives on exactly one set: XXH64 of "bucket\0key" under
 * the placement seed, modulo the number of sets of its pool (pools: the
 * pool that holds the key, or a new key's, obj_pool.c). Everything about a key
 * (its versions, delete markers, an upload in progress and its parts, its
 * heal) stays on that set, so the set's stores alone order its writes (the
 * conditional commit of obj_commit.c) and nothing crosses sets. The sets
 * of a pool never change once data is on them: another count (or seed)
 * would look for every key on another set (warmlaked refuses such a
 * restart; a cluster map cannot change its sets in place).
 *
 * Listings. Each set's listing is exact on its own (obj_list.c); the
 * merged one walks them side by side in rounds: every set still going
 * gives a batch of up to `want` entries after the cursor, the entries up
 * to the smallest last entry of a batch that did not reach its set's end
 * are delivered in order (a common prefix that several sets hold, once),
 * and the next round starts after that entry. A round delivers a whole
 * batch at least, so a page costs each set about one batch however large
 * the bucket; the guarantees (a key acknowledged before and not deleted
 * until the end is listed once) are each set's.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/mem.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* header-only use of Debian's xxhash */
#include <xxhash.h>

obj_set_t *obj_set_multi(obj_set_t **sets, int nsets, uint64_t seed, int *err)
{
    *err = ERR_INVAL;
    if (nsets < 1 || nsets > OBJ_MAX_SETS) return NULL;
    for (int j = 0; j < nsets; j++)
        if (!sets[j] || sets[j]->nsub || sets[j]->k != sets[0]->k || sets[j]->m != sets[0]->m ||
            sets[j]->block != sets[0]->block)
            return NULL;
    obj_set_t *s = xcalloc(1, sizeof(*s));
    s->nsub = nsets;
    s->sub = xcalloc(OBJ_MAX_SETS, sizeof(*s->sub)); /* room for the pools added later */
    memcpy(s->sub, sets, sizeof(*sets) * (size_t)nsets);
    for (int j = 0; j < nsets; j++)
        s->sub[j]->parent = s;
    s->seed = seed;
    s->npool = 1;
    s->pools[0].first = 0;
    s->pools[0].n = nsets;
    s->pools[0].weight = 1;
    pthread_mutex_init(&s->pools_mu, NULL);
    /* The same geometry: one pool of stripe buffers serves every set. */
    for (int j = 1; j < nsets; j++) {
        bufpool_free(s->sub[j]->bufs);
        s->sub[j]->bufs = s->sub[0]->bufs;
        s->sub[j]->bufs_shared = 1;
    }
    s->k = sets[0]->k;
    s->m = sets[0]->m;
    s->n = sets[0]->n;
    s->block = sets[0]->block;
    *err = 0;
    return s;
}

void obj__multi_free(obj_set_t *s)
{
    /* The shared buffer pool goes with set 0, last. */
    for (int j = s->nsub - 1; j >= 0; j--)
        obj_set_free(s->sub[j]);
    free(s->sub);
    pthread_mutex_destroy(&s->pools_mu);
    free(s);
}

int obj_set_count(const obj_set_t *s)
{
    return s->nsub ? s->nsub : 1;
}

int obj__in_pool(const obj_set_t *s, int p, const char *bucket, const char *key)
{
    XXH64_state_t st;
    XXH64_reset(&st, s->seed);
    XXH64_update(&st, bucket, strlen(bucket) + 1); /* the NUL: "ab"+"c" is not "a"+"bc" */
    XXH64_update(&st, key, strlen(key));
    return s->pools[p].first + (int)(XXH64_digest(&st) % (uint64_t)s->pools[p].n);
}

int obj_set_place(const obj_set_t *s, const char *bucket, const char *key)
{
    if (!s->nsub) return 0;
    return obj__in_pool(s, obj_set_pool_of((obj_set_t *)s, bucket, key), bucket, key);
}

obj_set_t *obj__place(obj_set_t *s, const char *bucket, const char *key)
{
    if (atomic_load(&s->npool) > 1) return obj__pool_route(s, bucket, key);
    return s->sub[obj__in_pool(s, 0, bucket, key)];
}

obj_set_t *obj__store_set(const obj_set_t *s, int *i)
{
    int n = s->sub[0]->n;
    if (*i < 0 || *i >= n * atomic_load(&s->nsub)) return NULL;
    obj_set_t *sub = s->sub[*i / n];
    *i %= n;
    return sub;
}

/* ---- merged listings ---- */

/*
 * An entry of a batch: its key (a common prefix: info NULL), and its head
 * packed (obj_info_t less the unused part of umeta: a head is 16 KiB of
 * struct for a few hundred bytes of content).
 */
typedef struct {
    size_t key, info; /* offsets into the batch's arena; info SIZE_MAX: a common prefix */
    int latest;
} ment_t;

typedef struct {
    ment_t *e;
    int n, cap, at;
    char *arena;
    size_t used, acap;
    size_t limit; /* entries a fetch takes */
    int done;     /* the set's listing ended: nothing after the batch */
} mbatch_t;

#define INFO_HEAD offsetof(obj_info_t, umeta)
#define INFO_TAIL offsetof(obj_info_t, umeta_len)

static size_t arena_put(mbatch_t *b, const void *p, size_t len)
{
    size_t at = b->used, step = (len + 7) & ~(size_t)7;
    if (at + step > b->acap) {
        b->acap = (at + step) * 2 + 4096;
        b->arena = xrealloc(b->arena, b->acap);
    }
    memcpy(b->arena + at, p, len);
    b->used += step;
    return at;
}

static int batch_add(mbatch_t *b, const char *key, const obj_info_t *info, int latest)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 64;
        b->e = xrealloc(b->e, sizeof(*b->e) * (size_t)b->cap);
    }
    ment_t *e = &b->e[b->n++];
    e->key = arena_put(b, key, strlen(key) + 1);
    e->latest = latest;
    e->info = SIZE_MAX;
    if (info) {
        /* Packed as [the fields after umeta][the fields before it][umeta's used bytes]. */
        size_t tail = sizeof(*info) - INFO_TAIL, len = tail + INFO_HEAD + info->umeta_len;
        if (b->used + len + 8 > b->acap) {
            b->acap = (b->used + len + 8) * 2 + 4096;
            b->arena = xrealloc(b->arena, b->acap);
        }
        char *p = b->arena + b->used;
        memcpy(p, (const char *)info + INFO_TAIL, tail);
        memcpy(p + tail, info, INFO_HEAD);
        memcpy(p + tail + INFO_HEAD, info->umeta, info->umeta_len);
        e->info = b->used;
        b->used += (len + 7) & ~(size_t)7;
    }
    return (size_t)b->n >= b->limit;
}

static const char *ent_key(const mbatch_t *b, int i)
{
    return b->arena + b->e[i].key;
}

/* The head of entry i into o (NULL for a common prefix). */
static const obj_info_t *ent_info(const mbatch_t *b, int i, obj_info_t *o)
{
    const ment_t *e = &b->e[i];
    if (e->info == SIZE_MAX) return NULL;
    const char *p = b->arena + e->info;
    size_t tail = sizeof(*o) - INFO_TAIL;
    memcpy((char *)o + INFO_TAIL, p, tail);
    memcpy(o, p + tail, INFO_HEAD);
    memcpy(o->umeta, p + tail + INFO_HEAD, o->umeta_len);
    return o;
}

typedef enum { M_OBJECTS, M_VERSIONS } mkind_t;

typedef struct {
    obj_set_t *s;
    mkind_t kind;
    const char *bucket, *prefix, *delim;
    size_t want;
    int wide;
    obj_list_fn lfn;
    obj_version_fn vfn;
    void *arg;
    mbatch_t *b;
    int ns; /* the sets listed (more may come meanwhile: a pool added) */
} mlist_t;

static int col_obj(void *arg, const char *key, const obj_info_t *info)
{
    return batch_add(arg, key, info, 0);
}

static int col_ver(void *arg, const char *key, const obj_info_t *info, int latest)
{
    return batch_add(arg, key, info, latest);
}

/* Fetch set j's batch after (after, after_vid). 0, or an ERR_*. */
static int fetch(mlist_t *ml, int j, const char *after, const char *after_vid)
{
    mbatch_t *b = &ml->b[j];
    b->n = b->at = 0;
    b->used = 0;
    int rc = ml->kind == M_OBJECTS
                 ? obj__list(ml->s->sub[j], ml->bucket, ml->prefix, ml->delim, after, b->limit,
                             ml->wide, col_obj, b)
                 : obj__list_versions(ml->s->sub[j], ml->bucket, ml->prefix, ml->delim, after,
                                      after_vid, b->limit, ml->wide, col_ver, b);
    if (rc < 0) return rc;
    b->done = rc == 0;
    return 0;
}

/*
 * A key that two sets hold (two pools each took it: writes racing on
 * nodes with other pool weights): the set with the newest head is listed,
 * as obj__pool_route serves it; the others' entries of the key are
 * passed. best's entry is an object; o is scratch.
 */
static int newest_of_key(mlist_t *ml, int best, const char *bound, int lim, const int *going,
                         obj_info_t *o)
{
    mbatch_t *bb = &ml->b[best];
    const char *key = ent_key(bb, bb->at);
    const obj_info_t *i0 = ent_info(bb, bb->at, o);
    uint64_t stamp = i0->stamp_ns;
    char up[sizeof(i0->upload_id)];
    memcpy(up, i0->upload_id, sizeof(up));
    for (int j = 0; j < ml->ns; j++) {
        mbatch_t *b = &ml->b[j];
        if (j == best || !going[j] || b->at >= b->n || b->e[b->at].info == SIZE_MAX ||
            strcmp(ent_key(b, b->at), key) != 0)
            continue;
        if (bound && j != lim && strcmp(key, bound) > 0) continue;
        const obj_info_t *ij = ent_info(b, b->at, o);
        /* obj__pool_route's order: stamp, then upload id */
        if (ij->stamp_ns > stamp || (ij->stamp_ns == stamp && strcmp(ij->upload_id, up) > 0)) {
            ml->b[best].at++; /* the older entry, passed */
            best = j;
            stamp = ij->stamp_ns;
            memcpy(up, ij->upload_id, sizeof(up));
        } else {
            b->at++;
        }
    }
    return best;
}

/*
 * The versions listed of the current key. A key held by two pools while it
 * is moved (obj_move.c) has the same versions in both: the second set's
 * copies of a version already listed are passed. Only entries of a second
 * set are looked up, so a key in one set costs an append per version.
 */
typedef struct {
    char *key;
    int set;          /* the set that listed the key first */
    char (*vids)[56]; /* version id and upload id (null versions all have the id "") */
    int n, cap;
} vseen_t;

static int seen_version(vseen_t *v, int set, const char *key, const char *vid, const char *upload)
{
    char id[56];
    snprintf(id, sizeof(id), "%s/%s", vid, upload);
    if (!v->key || strcmp(v->key, key) != 0) {
        free(v->key);
        v->key = xstrdup(key);
        v->set = set;
        v->n = 0;
    } else if (set != v->set) {
        for (int i = 0; i < v->n; i++)
            if (strcmp(v->vids[i], id) == 0) return 1;
    }
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->vids = xrealloc(v->vids, (size_t)v->cap * sizeof(*v->vids));
    }
    snprintf(v->vids[v->n++], sizeof(v->vids[0]), "%s", id);
    return 0;
}

/*
 * Whose versions of a key are listed when two sets list it (a key being
 * moved off a draining pool, or held by two pools after writes raced over
 * a weight change): the set of the pool that routing takes it from, and
 * only that one. Both sets' versions merged, the target's copy of the
 * version current when the move was cut short came out as the latest,
 * before the newer one written into the source since, and a page that
 * ended on it skipped that one (test_drain).
 */
typedef struct {
    char *key;
    int set; /* -1: every set's versions, each once (vseen_t) */
} vholder_t;

static int vholder_of(mlist_t *ml, vholder_t *h, int best, const char *key, const char *bound,
                      int lim, const int *going)
{
    if (h->key && strcmp(h->key, key) == 0) return h->set;
    int others = 0;
    for (int j = 0; j < ml->ns && !others; j++) {
        mbatch_t *b = &ml->b[j];
        if (j == best || !going[j] || b->at >= b->n || b->e[b->at].info == SIZE_MAX ||
            strcmp(ent_key(b, b->at), key) != 0)
            continue;
        others = !(bound && j != lim && strcmp(key, bound) > 0);
    }
    free(h->key);
    h->key = xstrdup(key);
    h->set = -1;
    if (others) {
        int p = obj__pool_holder(ml->s, ml->bucket, key);
        if (p >= 0) h->set = obj__in_pool(ml->s, p, ml->bucket, key);
    }
    return h->set;
}

static int merged(mlist_t *ml, const char *after, const char *after_vid)
{
    obj_set_t *s = ml->s;
    int ns = ml->ns = atomic_load(&s->nsub), rc = 0;
    ml->b = xcalloc((size_t)ns, sizeof(*ml->b));
    /*
     * A set's share of a page, and some: keys spread evenly over the sets, so
     * a page of `want` takes about want/ns from each; fetching `want` from
     * every set would read ns times the page. A set that runs short of its
     * share is fetched again from the cursor in the next round.
     */
    size_t want = ml->want ? ml->want : 1000, share = want * 5 / (4 * (size_t)ns) + 16;
    for (int j = 0; j < ns; j++)
        ml->b[j].limit = share < want ? share : want;
    int *going = xcalloc((size_t)ns, sizeof(*going));
    for (int j = 0; j < ns; j++)
        going[j] = !obj__sub_removed(s, j); /* a removed pool's sets hold nothing to list */
    obj_info_t *o = xmalloc(sizeof(*o));
    char *cur = after ? xstrdup(after) : NULL, *cur_vid = after_vid ? xstrdup(after_vid) : NULL;
    char *last_cp = NULL;
    vseen_t seen = {.set = -1};
    vholder_t hold = {.set = -1};
    for (;;) {
        for (int j = 0; j < ns && !rc; j++)
            if (going[j]) rc = fetch(ml, j, cur, cur_vid);
        if (rc) break;
        /* The bound: the smallest last entry of a batch whose set goes on. */
        int lim = -1;
        for (int j = 0; j < ns; j++) {
            mbatch_t *b = &ml->b[j];
            if (!going[j] || b->done || !b->n) continue;
            if (lim < 0 || strcmp(ent_key(b, b->n - 1), ent_key(&ml->b[lim], ml->b[lim].n - 1)) < 0)
                lim = j;
        }
        const char *bound = lim >= 0 ? ent_key(&ml->b[lim], ml->b[lim].n - 1) : NULL;
        /* Deliver in order up to the bound (set lim's whole batch). */
        for (;;) {
            int best = -1;
            for (int j = 0; j < ns; j++) {
                mbatch_t *b = &ml->b[j];
                if (!going[j] || b->at >= b->n) continue;
                if (bound && j != lim && strcmp(ent_key(b, b->at), bound) > 0) continue;
                if (best < 0 ||
                    strcmp(ent_key(b, b->at), ent_key(&ml->b[best], ml->b[best].at)) < 0)
                    best = j;
            }
            if (best < 0) break;
            if (ml->kind == M_OBJECTS && ml->b[best].e[ml->b[best].at].info != SIZE_MAX)
                best = newest_of_key(ml, best, bound, lim, going, o);
            if (ml->kind == M_VERSIONS && ml->b[best].e[ml->b[best].at].info != SIZE_MAX) {
                int h = vholder_of(ml, &hold, best, ent_key(&ml->b[best], ml->b[best].at), bound,
                                   lim, going);
                if (h >= 0 && h != best) {
                    ml->b[best].at++; /* another pool's copy of the key: not its versions */
                    continue;
                }
            }
            mbatch_t *b = &ml->b[best];
            int i = b->at++;
            const char *key = ent_key(b, i);
            const obj_info_t *info = ent_info(b, i, o);
            if (!info) {
                if (last_cp && strcmp(last_cp, key) == 0) continue; /* another set's too */
                free(last_cp);
                last_cp = xstrdup(key);
            } else if (ml->kind == M_VERSIONS &&
                       seen_version(&seen, best, key, info->vid, info->upload_id)) {
                continue; /* a key being moved off a draining pool: both pools list it */
            }
            int stop = ml->kind == M_OBJECTS
                           ? ml->lfn(ml->arg, key, info)
                           : ml->vfn(ml->arg, key, info, info ? b->e[i].latest : 0);
            if (stop) {
                rc = 1;
                goto out;
            }
        }
        if (lim < 0) break; /* every set's listing ended */
        /* The next round starts after the bound; sets whose listing ended are done. */
        mbatch_t *lb = &ml->b[lim];
        const ment_t *le = &lb->e[lb->n - 1];
        free(cur);
        free(cur_vid);
        cur = xstrdup(bound);
        cur_vid = NULL;
        if (ml->kind == M_VERSIONS && le->info != SIZE_MAX) {
            const obj_info_t *li = ent_info(lb, lb->n - 1, o);
            cur_vid = xstrdup(li->vid[0] ? li->vid : "null");
        }
        for (int j = 0; j < ns; j++) /* (one that ended past the bound is fetched again) */
            if (going[j] && ml->b[j].done && ml->b[j].at >= ml->b[j].n) going[j] = 0;
    }
out:
    for (int j = 0; j < ns; j++) {
        free(ml->b[j].e);
        free(ml->b[j].arena);
    }
    free(ml->b);
    free(going);
    free(o);
    free(cur);
    free(cur_vid);
    free(last_cp);
    free(seen.key);
    free(seen.vids);
    free(hold.key);
    return rc;
}

int obj__multi_list(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                    const char *after, size_t want, int wide, obj_list_fn fn, void *arg)
{
    if (atomic_load(&s->nsub) == 1)
        return obj__list(s->sub[0], bucket, prefix, delim, after, want, wide, fn, arg);
    mlist_t ml = {.s = s,
                  .wide = wide,
                  .kind = M_OBJECTS,
                  .bucket = bucket,
                  .prefix = prefix,
                  .delim = delim,
                  .want = want,
                  .lfn = fn,
                  .arg = arg};
    return merged(&ml, after, NULL);
}

int obj__multi_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                        const char *after, const char *after_vid, size_t want, int wide,
                        obj_version_fn fn, void *arg)
{
    if (atomic_load(&s->nsub) == 1)
        return obj__list_versions(s->sub[0], bucket, prefix, delim, after, after_vid, want, wide,
                                  fn, arg);
    mlist_t ml = {.s = s,
                  .wide = wide,
                  .kind = M_VERSIONS,
                  .bucket = bucket,
                  .prefix = prefix,
                  .delim = delim,
                  .want = want,
                  .vfn = fn,
                  .arg = arg};
    return merged(&ml, after, after_vid);
}
