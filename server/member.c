/*
 * member: a node's membership in its cluster (contract in member.h).
 */
#include "server/member.h"

#include "cluster/etcd.h"
#include "cluster/features.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "server/member_features.h"
#include "server/peer.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEASE_TTL_S   10 /* when not set: what a node away this long costs the others */
#define SERVE_THREADS 16
#define PEER_WAIT_MS  10000 /* at start, how long to wait for the set's other nodes */

struct member {
    member_cfg_t cfg;
    char prefix[256];
    cmap_t map; /* as loaded: the layout this node serves */
    int me;
    _Atomic int fenced;
    member_features_t feat; /* what this build reads, and what the cluster uses of it */
    _Atomic uint64_t epoch; /* the newest map epoch applied */
    etcd_t *etcd;
    int64_t map_rev; /* the map's etcd mod revision when loaded */
    int64_t lease;
    etcd_watch_t *watch;
    pthread_t keeper;
    int keeper_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    proto_net_t *net;
    peer_serve_t *serving;
    /* The node ids of the newest map applied (under mu): who may use this node's drives. */
    char (*ids)[CMAP_MAX_ID + 1];
    int nids;
    /* The peers whose drives this node's sets use (owned by net): their leases are watched. */
    proto_peer_t **peers;
    int *registered; /* per peer: seen registered (a node that never was is not "gone") */
    int npeers;
    /* This node's drives and every store of the sets (member_join's), for the refill marks. */
    drive_t **dv;
    shard_store_t *st;
    uint32_t reg_refill; /* own drives marked refilling, as last registered */
    /* Until then (monotonic ms), a peer's registration found gone does not make it away:
     * etcd came back after expiring every lease, and the others register again at their
     * own next round (keeper thread only). */
    uint64_t away_grace_until;
    time_t started; /* the first registration's time (kept when it is rewritten) */
    /* The map whose layout is served (the watch thread's): m->map and the pools added since. */
    cmap_t applied;
    cmap_t pending;           /* a newer map whose pools wait for member_on_pools (has_pending) */
    int has_pending;          /* (both under pools_mu) */
    member_pools_t pools;     /* under pools_mu, held while one runs */
    pthread_mutex_t pools_mu; /* (member_on_pools waits for a callback running) */
    /* The stores of the pools added since the start (freed by member_leave). */
    shard_store_t *xst[CMAP_MAX_POOLS];
    int nxst[CMAP_MAX_POOLS], nx;
};

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* This node's drives marked refilling (drive_refilling), as a mask. */
static uint32_t own_refilling(member_t *m)
{
    uint32_t mask = 0;
    for (int i = 0; m->dv && i < m->map.nodes[m->me].drives && i < 32; i++)
        if (m->dv[i] && drive_refilling(m->dv[i])) mask |= 1u << i;
    return mask;
}

/* This node's drives that did not open at its start (node_drives.c), as a mask. */
static uint32_t own_failed(member_t *m)
{
    uint32_t mask = 0;
    for (int i = 0; m->dv && i < m->map.nodes[m->me].drives && i < 32; i++)
        if (!m->dv[i]) mask |= 1u << i;
    return mask;
}

/* Under mu: the members of map to take requests from. */
static void set_members(member_t *m, const cmap_t *map)
{
    free(m->ids);
    m->ids = xcalloc((size_t)map->nnodes + 1, sizeof(*m->ids));
    for (int i = 0; i < map->nnodes; i++)
        snprintf(m->ids[i], sizeof(m->ids[i]), "%s", map->nodes[i].id);
    m->nids = map->nnodes;
}

/* peer_serve's gate: a node of the newest map applied, unless this build lacks a feature in
 * use (features_fence: what peers write could be misread here). */
static int is_member(void *arg, const char *node)
{
    member_t *m = arg;
    int yes = 0;
    if (atomic_load(&m->feat.fenced)) return 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->nids && !yes; i++)
        yes = strcmp(m->ids[i], node) == 0;
    pthread_mutex_unlock(&m->mu);
    return yes;
}

static int load_etcd(member_t *m, const volatile int *wait_stop, char *bad, size_t cap)
{
    char key[300];
    snprintf(key, sizeof(key), "%s/map", m->prefix);
    time_t said = 0;
    for (;;) {
        char *val = NULL, err[300] = "";
        size_t len;
        int rc = etcd_get(m->etcd, key, &val, &len, &m->map_rev);
        if (rc == 0) {
            rc = cmap_parse(val, len, &m->map, err, sizeof(err));
            free(val);
            if (rc) {
                snprintf(bad, cap, "the map at %s in etcd does not parse: %s", key, err);
                return 2;
            }
            if ((m->me = cmap_node_index(&m->map, m->cfg.node)) >= 0) return 0;
            cmap_free(&m->map);
        }
        if (time(NULL) - said >= 5) {
            said = time(NULL);
            fprintf(stderr, "warmlaked: waiting for %s in etcd %s %s\n", key, m->cfg.etcd,
                    rc == ERR_NOT_FOUND ? "(not there yet: wl-admin cluster init)"
                    : rc == 0           ? "to list this node (wl-admin node add)"
                                        : "(etcd unreachable)");
        }
        for (int i = 0; i < 10; i++) {
            if (*wait_stop) {
                snprintf(bad, cap, "stopped while waiting for the cluster map");
                return 1;
            }
            usleep(100 * 1000);
        }
    }
}

int member_load(const member_cfg_t *c, const volatile int *wait_stop, member_t **out, char *bad,
                size_t cap)
{
    if (!c->node) {
        snprintf(bad, cap, "--cluster and --etcd need --node (this node's id in the map)");
        return 2;
    }
    if (c->map_file && c->etcd) {
        snprintf(bad, cap, "--cluster FILE and --etcd: give one (the map lives in one place)");
        return 2;
    }
    member_t *m = xcalloc(1, sizeof(*m));
    m->cfg = *c;
    m->me = -1;
    features_init(&m->feat);
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->pools_mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    snprintf(m->prefix, sizeof(m->prefix), "%s", c->etcd_prefix ? c->etcd_prefix : "/warmlake");
    size_t pl = strlen(m->prefix);
    while (pl > 1 && m->prefix[pl - 1] == '/')
        m->prefix[--pl] = 0;
    int rc = 0;
    if (c->etcd) {
        if (!(m->etcd = etcd_new(c->etcd))) {
            snprintf(bad, cap, "--etcd %s: want http://HOST:PORT[,http://HOST:PORT...]", c->etcd);
            rc = 2;
        } else {
            m->feat.etcd = m->etcd;
            m->feat.prefix = m->prefix;
            m->feat.node = c->node;
            m->feat.etcd_url = c->etcd;
            m->feat.node_fenced = &m->fenced;
            rc = load_etcd(m, wait_stop, bad, cap);
            if (!rc) rc = features_join(&m->feat, wait_stop, bad, cap);
        }
    } else {
        char err[300];
        if (cmap_load(c->map_file, &m->map, err, sizeof(err)) != 0) {
            snprintf(bad, cap, "--cluster %s: %s", c->map_file, err);
            rc = 2;
        } else if ((m->me = cmap_node_index(&m->map, c->node)) < 0) {
            snprintf(bad, cap, "node %s is not in the cluster map %s: it serves no data", c->node,
                     c->map_file);
            rc = 2;
        }
    }
    for (int j = 1; !rc && j < m->map.nsets; j++)
        if (m->map.sets[j].k != m->map.sets[0].k || m->map.sets[j].m != m->map.sets[0].m) {
            snprintf(bad, cap,
                     "the cluster map's sets are coded %d+%d and %d+%d: all its sets "
                     "must have one coding",
                     m->map.sets[0].k, m->map.sets[0].m, m->map.sets[j].k, m->map.sets[j].m);
            rc = 2;
        }
    if (rc) {
        member_free(m);
        return rc;
    }
    cmap_copy(&m->applied, &m->map);
    atomic_store(&m->epoch, m->map.epoch);
    *out = m;
    return 0;
}

const cmap_t *member_map(const member_t *m)
{
    return &m->map;
}

int member_self(const member_t *m)
{
    return m->me;
}

void member_node_stats(member_t *m, char *(*fn)(void *arg), int (*heal_now)(void *arg), void *arg)
{
    if (m->serving) peer_serve_node_stats(m->serving, fn, heal_now, arg);
}

struct proto_net *member_net(const member_t *m)
{
    return m->net;
}

const _Atomic uint32_t *member_features_in_use(const member_t *m)
{
    return &m->feat.in_use;
}

const _Atomic int *member_fenced(const member_t *m)
{
    return &m->fenced;
}

/* The cluster secret: the file or WARMLAKE_CLUSTER_SECRET. Its length, or -1 (printed). */
static int read_secret(const member_cfg_t *c, char *out, size_t cap)
{
    size_t n = 0;
    if (c->secret_file) {
        FILE *f = fopen(c->secret_file, "rb");
        if (!f) {
            fprintf(stderr, "warmlaked: cannot read %s: %s\n", c->secret_file, strerror(errno));
            return -1;
        }
        n = fread(out, 1, cap, f);
        fclose(f);
        while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
            n--;
    } else if (getenv("WARMLAKE_CLUSTER_SECRET")) {
        n = strlen(getenv("WARMLAKE_CLUSTER_SECRET"));
        if (n > cap) n = cap;
        memcpy(out, getenv("WARMLAKE_CLUSTER_SECRET"), n);
    }
    if (n < 16) {
        fprintf(stderr, "warmlaked: a cluster needs a secret of at least 16 bytes "
                        "(--cluster-secret-file or WARMLAKE_CLUSTER_SECRET)\n");
        return -1;
    }
    return (int)n;
}

/* ---- etcd: registration and the map watch ---- */

static int put_registration(member_t *m)
{
    const cmap_node_t *n = &m->map.nodes[m->me];
    char key[400];
    snprintf(key, sizeof(key), "%s/nodes/%s", m->prefix, n->id);
    uint32_t refill = own_refilling(m);
    if (!m->started) m->started = time(NULL);
    /* Its drives being refilled (replaced, not yet whole): other nodes read them last too. */
    json_t *ra = json_array();
    for (int i = 0; i < 32; i++)
        if ((refill >> i) & 1) json_array_append_new(ra, json_integer(i));
    /* Its drives that did not open: other nodes call them only when they cannot do without. */
    uint32_t failed = own_failed(m);
    json_t *fa = json_array();
    for (int i = 0; i < 32; i++)
        if ((failed >> i) & 1) json_array_append_new(fa, json_integer(i));
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:o,s:o,s:s,s:I}", "id", n->id, "s3", n->s3,
                          "proto", n->proto, "data", m->cfg.data ? m->cfg.data : "", "pid",
                          (int)getpid(), "epoch", (json_int_t)atomic_load(&m->epoch), "started",
                          (json_int_t)m->started, "refilling", ra, "failed", fa, "build",
                          wl_build_name(), "features", (json_int_t)m->feat.features);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    int rc = etcd_put(m->etcd, key, text, strlen(text), m->lease);
    free(text);
    if (rc == 0) m->reg_refill = refill;
    return rc;
}

typedef struct {
    char (*ids)[CMAP_MAX_ID + 1];
    uint32_t *refill; /* each one's drives being refilled */
    uint32_t *failed; /* each one's drives that did not open */
    int n, cap;
} regs_t;

/* A registration's list of drive numbers under name, as a mask. */
static uint32_t drive_mask(json_t *o, const char *name)
{
    uint32_t mask = 0;
    json_t *ra = o ? json_object_get(o, name) : NULL;
    for (size_t i = 0; json_is_array(ra) && i < json_array_size(ra); i++) {
        json_int_t d = json_integer_value(json_array_get(ra, i));
        if (d >= 0 && d < 32) mask |= 1u << d;
    }
    return mask;
}

static int collect_reg(void *arg, const char *key, const char *val, size_t len)
{
    regs_t *r = arg;
    const char *id = strrchr(key, '/');
    if (!id || strlen(id + 1) > CMAP_MAX_ID) return 0;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        r->ids = xrealloc(r->ids, sizeof(*r->ids) * (size_t)r->cap);
        r->refill = xrealloc(r->refill, sizeof(*r->refill) * (size_t)r->cap);
        r->failed = xrealloc(r->failed, sizeof(*r->failed) * (size_t)r->cap);
    }
    json_t *o = json_loadb(val, len, 0, NULL);
    r->refill[r->n] = drive_mask(o, "refilling");
    r->failed[r->n] = drive_mask(o, "failed");
    json_decref(o);
    snprintf(r->ids[r->n++], sizeof(r->ids[0]), "%s", id + 1);
    return 0;
}

/* The stores st of sets [first, first + n) of map: those of other nodes' drives being
 * refilled, as their registrations say, are read last; those that did not open are down. */
static void mark_sets(const cmap_t *map, int me, int first, int n, shard_store_t *st,
                      const regs_t *r)
{
    for (int j = first, at = 0; j < first + n; j++) {
        const cmap_set_t *set = &map->sets[j];
        for (int i = 0; i < set->k + set->m; i++, at++) {
            if (set->d[i].node == me) continue;
            const char *id = map->nodes[set->d[i].node].id;
            int on = 0, failed = 0;
            for (int q = 0; q < r->n; q++)
                if (strcmp(r->ids[q], id) == 0) {
                    on = (r->refill[q] >> set->d[i].drive) & 1;
                    failed = (r->failed[q] >> set->d[i].drive) & 1;
                }
            peer_store_set_refilling(&st[at], on);
            peer_store_set_failed(&st[at], failed);
        }
    }
}

/* Under pools_mu: the sets served from the start, and the pools added since. */
static void mark_refilling(member_t *m, const regs_t *r)
{
    if (!m->st) return;
    mark_sets(&m->map, m->me, 0, m->map.nsets, m->st, r);
    int me = cmap_node_index(&m->applied, m->cfg.node);
    for (int x = 0; x < m->nx && m->map.npools + x < m->applied.npools; x++) {
        const cmap_pool_t *pool = &m->applied.pools[m->map.npools + x];
        mark_sets(&m->applied, me, pool->first, pool->nsets, m->xst[x], r);
    }
}

/*
 * The peers whose registration (their lease) is gone, once it was seen (a
 * node still starting is not gone), are away: health down, so reads and
 * writes go around them at once rather than each waiting out a call
 * deadline (a node frozen or cut off holds its connections open). When
 * etcd cannot be read, nobody is called away: health then comes from the
 * calls alone.
 */
static void check_leases(member_t *m)
{
    /* (Within away_grace_until a registration found gone changes nothing: after an etcd
     * outage longer than the lease, every node's was gone at once, and every node wrote
     * around all the others, refusing every PUT, until each had registered again.) */
    char key[300];
    regs_t r = {0};
    snprintf(key, sizeof(key), "%s/nodes/", m->prefix);
    int ok = etcd_list(m->etcd, key, collect_reg, &r) == 0;
    pthread_mutex_lock(&m->pools_mu); /* the peers and stores of pools added meanwhile */
    for (int i = 0; i < m->npeers; i++) {
        int found = 0;
        for (int j = 0; j < r.n && !found; j++)
            found = strcmp(r.ids[j], proto_peer_node(m->peers[i])) == 0;
        if (found) m->registered[i] = 1;
        /* Gone once seen: a node still starting (not registered yet) is not away. */
        int grace = now_ms() < m->away_grace_until;
        if (found || !grace) proto_peer_set_away(m->peers[i], ok && !found && m->registered[i]);
    }
    if (ok) mark_refilling(m, &r);
    pthread_mutex_unlock(&m->pools_mu);
    free(r.ids);
    free(r.refill);
    free(r.failed);
}

static int lease_ttl(const member_t *m)
{
    return m->cfg.lease_ttl_s ? (int)m->cfg.lease_ttl_s : LEASE_TTL_S;
}

/* Renew the lease every few seconds; when it was lost (etcd was away too long), take a new one. */
static void *keep_alive(void *arg)
{
    member_t *m = arg;
    int down = 0;
    uint64_t down_since = 0;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += lease_ttl(m) / 3 ? lease_ttl(m) / 3 : 1;
        pthread_cond_timedwait(&m->cv, &m->mu, &until);
        if (m->stopping) break;
        pthread_mutex_unlock(&m->mu);
        int rc = etcd_lease_keepalive(m->etcd, m->lease);
        if (rc == ERR_NOT_FOUND) {
            /* Expired while etcd was away from this node (or it from everyone): the others'
             * leases likely went too, and they register again within a round of theirs. */
            m->away_grace_until = now_ms() + 1000ull * (uint64_t)lease_ttl(m);
            log_warn("event=member_lease_lost node=%s: registering again", m->cfg.node);
            int64_t id;
            rc = etcd_lease_grant(m->etcd, lease_ttl(m), &id);
            if (rc == 0) {
                m->lease = id;
                rc = put_registration(m);
            }
        }
        /* A drive refilled (or marked) since the registration was written: say so. */
        if (rc == 0 && own_refilling(m) != m->reg_refill) rc = put_registration(m);
        if (rc && !down) {
            log_warn("event=member_etcd_unreachable node=%s", m->cfg.node);
            down_since = now_ms();
        }
        if (!rc && down) {
            /* etcd back: leases it expired meanwhile are being taken again (as above). */
            if (now_ms() - down_since >= 1000ull * (uint64_t)lease_ttl(m))
                m->away_grace_until = now_ms() + 1000ull * (uint64_t)lease_ttl(m);
            log_info("event=member_etcd_back node=%s", m->cfg.node);
        }
        down = rc != 0;
        check_leases(m);
        if (!down) features_round(&m->feat);
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/*
 * Whether b keeps a's layout: this node at the same addresses with the
 * same drives, and a's pools as b's first ones, each with the same sets on
 * the same drives of nodes at the same protocol addresses. b may add pools.
 */
static int keeps_layout(const cmap_t *a, int me_a, const cmap_t *b, int me_b)
{
    if (me_b < 0 || b->npools < a->npools || strcmp(a->cluster, b->cluster) != 0) return 0;
    if (strcmp(a->nodes[me_a].proto, b->nodes[me_b].proto) ||
        strcmp(a->nodes[me_a].s3, b->nodes[me_b].s3) ||
        a->nodes[me_a].drives != b->nodes[me_b].drives)
        return 0;
    for (int p = 0; p < a->npools; p++)
        if (a->pools[p].first != b->pools[p].first || a->pools[p].nsets != b->pools[p].nsets ||
            (p && strcmp(a->pools[p].id, b->pools[p].id) != 0)) /* (DATA/layout names them) */
            return 0;
    for (int s = 0; s < a->nsets; s++) {
        if (!cmap_same_set(a, s, b, s)) return 0;
        const cmap_set_t *x = &a->sets[s], *y = &b->sets[s];
        for (int i = 0; i < x->k + x->m; i++)
            if (strcmp(a->nodes[x->d[i].node].proto, b->nodes[y->d[i].node].proto)) return 0;
    }
    return 1;
}

/*
 * The stores of pool p of map (k+m per set, in set order) into st: this
 * node's drives local, the others' remote. 0, or ERR_INVAL (a bad peer
 * address: logged).
 */
static int pool_stores(member_t *m, const cmap_t *map, int me, int p, shard_store_t *st)
{
    const cmap_pool_t *pool = &map->pools[p];
    for (int j = 0, at = 0; j < pool->nsets; j++) {
        const cmap_set_t *set = &map->sets[pool->first + j];
        for (int i = 0; i < set->k + set->m; i++, at++) {
            const cmap_node_t *n = &map->nodes[set->d[i].node];
            if (set->d[i].node == me) {
                st[at] = shard_store_local(m->dv[set->d[i].drive]);
                continue;
            }
            proto_peer_t *peer = proto_net_peer(m->net, n->id, n->proto);
            if (!peer) return ERR_INVAL;
            st[at] = peer_store_new(peer, (uint32_t)set->d[i].drive);
            /* Its lease watched from now on, as the first sets' peers are (check_leases). */
            int seen = 0;
            for (int q = 0; q < m->npeers && !seen; q++)
                seen = m->peers[q] == peer;
            if (!seen) {
                m->peers = xrealloc(m->peers, sizeof(*m->peers) * (size_t)(m->npeers + 1));
                m->registered =
                    xrealloc(m->registered, sizeof(*m->registered) * (size_t)(m->npeers + 1));
                m->registered[m->npeers] = 0;
                m->peers[m->npeers++] = peer;
            }
        }
    }
    return 0;
}

/* Serve the pools that nm adds to m->applied (the object layer takes them). 0, or fenced. */
static int add_pools_locked(member_t *m, const cmap_t *nm, int me)
{
    member_pools_t cb = m->pools;
    for (int p = m->applied.npools; p < nm->npools; p++) {
        const cmap_pool_t *pool = &nm->pools[p];
        int k = nm->sets[pool->first].k, mm = nm->sets[pool->first].m, n = pool->nsets * (k + mm);
        if (!cb.add) return 2; /* the object layer is not up yet: applied once it is */
        if (m->nx >= CMAP_MAX_POOLS) return 1;
        shard_store_t *st = xcalloc((size_t)n, sizeof(*st));
        int rc = pool_stores(m, nm, me, p, st);
        if (!rc) rc = cb.add(cb.arg, nm, p, st);
        if (rc) {
            log_error("event=member_pool_failed pool=%s err=%s", pool->id, err_name(rc));
            for (int i = 0; i < n; i++)
                if (st[i].ctx) peer_store_free(&st[i]);
            free(st);
            return 1;
        }
        m->xst[m->nx] = st;
        m->nxst[m->nx++] = n;
        log_info("event=member_pool_added pool=%s sets=%d weight=%u%s", pool->id, pool->nsets,
                 pool->weight,
                 pool->draining == CMAP_POOL_REMOVED ? " removed"
                 : pool->draining                    ? " draining"
                                                     : "");
    }
    for (int p = 0; cb.state && p < nm->npools; p++)
        cb.state(cb.arg, p, nm->pools[p].weight, nm->pools[p].draining);
    return 0;
}

static void on_map(void *arg, const char *val, size_t len, int64_t rev, int deleted)
{
    member_t *m = arg;
    if (deleted) {
        log_error("event=member_map_deleted node=%s: fenced (no S3 data served)", m->cfg.node);
        atomic_store(&m->fenced, 1);
        return;
    }
    cmap_t nm;
    char err[300];
    if (cmap_parse(val, len, &nm, err, sizeof(err)) != 0) {
        log_error("event=member_map_bad rev=%lld err=\"%s\": ignored", (long long)rev, err);
        return;
    }
    uint64_t cur = atomic_load(&m->epoch);
    if (nm.epoch <= cur) {
        if (nm.epoch < cur)
            log_warn("event=member_map_older epoch=%llu ours=%llu: ignored",
                     (unsigned long long)nm.epoch, (unsigned long long)cur);
        cmap_free(&nm);
        return;
    }
    int me = cmap_node_index(&nm, m->cfg.node), rc = 0;
    pthread_mutex_lock(&m->pools_mu); /* applied, pending, the callbacks */
    const char *why =
        me < 0 ? "this node left the map"
        : !keeps_layout(&m->applied, cmap_node_index(&m->applied, m->cfg.node), &nm, me)
            ? "the map changes the sets this node serves"
            : NULL;
    /* Peers at the new epoch first: a new pool's nodes refuse calls from an older one. */
    if (!why) {
        pthread_mutex_lock(&m->mu);
        set_members(m, &nm);
        pthread_mutex_unlock(&m->mu);
        atomic_store(&m->epoch, nm.epoch);
        proto_net_set_epoch(m->net, nm.epoch);
        if ((rc = add_pools_locked(m, &nm, me)) == 1) why = "a pool it adds could not be served";
    }
    if (why) {
        pthread_mutex_unlock(&m->pools_mu);
        log_error("event=member_fenced node=%s epoch=%llu why=\"%s\": no S3 data served until a "
                  "restart applies the new map",
                  m->cfg.node, (unsigned long long)nm.epoch, why);
        atomic_store(&m->fenced, 1);
        cmap_free(&nm);
        return;
    }
    log_info("event=member_epoch node=%s epoch=%llu nodes=%d pools=%d%s", m->cfg.node,
             (unsigned long long)nm.epoch, nm.nnodes, nm.npools,
             rc == 2 ? " (its pools once the node serves)" : "");
    cmap_t *into = rc == 2 ? &m->pending : &m->applied;
    cmap_free(into);
    *into = nm; /* (moved) */
    m->has_pending = rc == 2;
    pthread_mutex_unlock(&m->pools_mu);
}

void member_on_pools(member_t *m, const member_pools_t *cb)
{
    pthread_mutex_lock(&m->pools_mu);
    m->pools = cb ? *cb : (member_pools_t){0};
    if (cb && m->has_pending) {
        /* A map that added pools came while the node started: applied now. */
        int rc = add_pools_locked(m, &m->pending, cmap_node_index(&m->pending, m->cfg.node));
        if (rc) {
            log_error("event=member_fenced node=%s epoch=%llu why=\"a pool it adds could not be "
                      "served\": no S3 data served until a restart applies the new map",
                      m->cfg.node, (unsigned long long)m->pending.epoch);
            atomic_store(&m->fenced, 1);
        } else {
            cmap_free(&m->applied);
            m->applied = m->pending; /* (moved) */
            memset(&m->pending, 0, sizeof(m->pending));
        }
        m->has_pending = 0;
    }
    pthread_mutex_unlock(&m->pools_mu);
}

/* ---- joining ---- */

/*
 * Wait until every peer answers a PING, at most PEER_WAIT_MS: a node that
 * says "ready" can then reach its set (nodes started together find each
 * other), and one whose peers stay away says so and serves what it can.
 */
static void wait_peers(proto_peer_t **peers, int n)
{
    int *up = xcalloc((size_t)n + 1, sizeof(*up)), left = n;
    for (int t = 0; left && t < PEER_WAIT_MS / 100; t++) {
        for (int i = 0; i < n; i++) {
            proto_call_t c = {.type = PROTO_PING};
            if (up[i]) continue;
            int rc = proto_call(peers[i], &c);
            if (rc == 0 || rc == ERR_DENIED) { /* up; or refusing us (said), not starting */
                up[i] = rc == 0 ? 1 : -1;
                left--;
            }
        }
        if (left) usleep(100 * 1000);
    }
    for (int i = 0; i < n; i++)
        if (up[i] <= 0)
            log_warn("event=member_peer_%s peer=%s: serving without it",
                     up[i] ? "refusing" : "unreachable", proto_peer_node(peers[i]));
    free(up);
}

int member_join(member_t *m, drive_t **dv, shard_store_t *st)
{
    char secret[1024];
    int slen = read_secret(&m->cfg, secret, sizeof(secret));
    if (slen < 0) return 1;
    const cmap_node_t *self = &m->map.nodes[m->me];
    m->serving = peer_serve_new(dv, self->drives, SERVE_THREADS);
    pthread_mutex_lock(&m->mu);
    set_members(m, &m->map);
    pthread_mutex_unlock(&m->mu);
    if (m->serving) peer_serve_gate(m->serving, is_member, m);
    proto_net_cfg_t pc = {0};
    pc.listen = self->proto;
    pc.cluster = m->map.cluster;
    pc.node = self->id;
    pc.secret = secret;
    pc.secret_len = (size_t)slen;
    pc.epoch = m->map.epoch;
    pc.timeout_ms = m->cfg.peer_timeout_ms;
    pc.handle = peer_serve_handle;
    pc.reply_bound = peer_serve_reply_bound;
    pc.arg = m->serving;
    int rc = m->serving ? proto_net_start(&pc, &m->net) : ERR_NOMEM;
    memset(secret, 0, sizeof(secret));
    if (rc) {
        fprintf(stderr, "warmlaked: cannot serve peers on %s: %s\n", pc.listen, err_str(rc));
        return 1;
    }
    proto_peer_t **peers = xcalloc((size_t)m->map.nnodes, sizeof(*peers));
    int npeers = 0;
    for (int j = 0, at = 0; j < m->map.nsets; j++) {
        const cmap_set_t *set = &m->map.sets[j];
        for (int i = 0; i < set->k + set->m; i++, at++) {
            const cmap_node_t *n = &m->map.nodes[set->d[i].node];
            if (set->d[i].node == m->me) {
                st[at] = shard_store_local(dv[set->d[i].drive]);
                continue;
            }
            proto_peer_t *p = proto_net_peer(m->net, n->id, n->proto);
            if (!p) {
                fprintf(stderr, "warmlaked: peer %s at %s: bad address\n", n->id, n->proto);
                free(peers);
                return 1;
            }
            st[at] = peer_store_new(p, (uint32_t)set->d[i].drive);
            int seen = 0;
            for (int q = 0; q < npeers; q++)
                seen |= peers[q] == p;
            if (!seen) peers[npeers++] = p;
        }
    }
    wait_peers(peers, npeers);
    m->dv = dv;
    m->st = st;
    m->peers = peers; /* (the net owns the peers; this array is ours) */
    m->registered = xcalloc((size_t)npeers + 1, sizeof(*m->registered));
    m->npeers = npeers;
    if (!m->etcd) return 0;
    if (etcd_lease_grant(m->etcd, lease_ttl(m), &m->lease) != 0 || put_registration(m) != 0) {
        fprintf(stderr, "warmlaked: cannot register in etcd %s\n", m->cfg.etcd);
        return 1;
    }
    if (pthread_create(&m->keeper, NULL, keep_alive, m) != 0) {
        fprintf(stderr, "warmlaked: cannot start the lease keeper\n");
        return 1;
    }
    m->keeper_running = 1;
    char key[300];
    snprintf(key, sizeof(key), "%s/map", m->prefix);
    if (!(m->watch = etcd_watch_start(m->etcd, key, m->map_rev + 1, on_map, m))) {
        fprintf(stderr, "warmlaked: cannot watch the cluster map\n");
        return 1;
    }
    log_info("event=member_registered node=%s lease=%lld epoch=%llu", self->id, (long long)m->lease,
             (unsigned long long)m->map.epoch);
    return 0;
}

void member_leave(member_t *m, shard_store_t *st, int n)
{
    if (!m) return;
    etcd_watch_stop(m->watch);
    m->watch = NULL;
    if (m->keeper_running) {
        pthread_mutex_lock(&m->mu);
        m->stopping = 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->keeper, NULL);
        m->keeper_running = 0;
    }
    if (m->lease && etcd_lease_revoke(m->etcd, m->lease) != 0)
        log_warn("event=member_deregister_failed node=%s: the lease expires by itself",
                 m->cfg.node);
    m->lease = 0;
    m->npeers = 0; /* the net frees them */
    proto_net_stop(m->net);
    m->net = NULL;
    peer_serve_free(m->serving);
    m->serving = NULL;
    for (int i = 0; i < n; i++)
        if (st[i].ctx) peer_store_free(&st[i]);
    for (int x = 0; x < m->nx; x++) {
        for (int i = 0; i < m->nxst[x]; i++)
            if (m->xst[x][i].ctx) peer_store_free(&m->xst[x][i]);
        free(m->xst[x]);
    }
    m->nx = 0;
}

void member_free(member_t *m)
{
    if (!m) return;
    free(m->peers);
    free(m->registered);
    free(m->ids);
    cmap_free(&m->map);
    cmap_free(&m->applied);
    cmap_free(&m->pending);
    pthread_mutex_destroy(&m->pools_mu);
    etcd_free(m->etcd);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}
