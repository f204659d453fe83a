/*
 * wl-admin: shows and edits a cluster whose map lives in etcd.
 *
 *   wl-admin [--etcd URLS] [--prefix KEY] COMMAND [ARGS]
 *     cluster init --map FILE    store the first map (refused if there is one)
 *     cluster show               print the map
 *     map set --map FILE         replace the map (epoch: at least the stored one + 1)
 *     node add --id ID --s3 HOST:PORT --proto HOST:PORT --drives N
 *     node remove --id ID        (refused while a set uses its drives)
 *     pool add --id P --nodes N1,N2,.. [--ec K+M] [--weight W]
 *                                a pool of sets over these nodes' drives (the
 *                                nodes added first); new objects go to it, in
 *                                proportion to its weight; nothing moves
 *     pool drain|activate --id P no new objects to P, or again
 *     pool weight --id P --weight W
 *     pool weigh                 every pool's weight from its free space (the
 *                                nodes asked; needs the cluster secret)
 *     status [--json]            nodes (registered = alive) and their builds, sets and
 *                                their health, the features in use and those waiting
 *                                for nodes to be upgraded (cluster/features.h), and
 *                                with the cluster secret each drive's space and
 *                                endurance (asked over the node protocol)
 *
 * URLS default to $WARMLAKE_ETCD, else http://127.0.0.1:2379; the prefix to
 * /warmlake. Every edit is a compare-and-swap on the map's revision with a
 * new epoch, checked by the same parser the nodes use before it is stored:
 * two admins editing at once cannot lose an edit, and a bad map never
 * reaches the nodes. Exit status: 0, 1 (etcd or a node unreachable), 2 (a
 * bad command or a change that is refused).
 *
 * Files: this one holds the commands, etcd (load, edit) and what asks the
 * nodes (status, pool weigh/remove, drive replace); wl_admin_map.c the
 * edits of the map document themselves (wl_admin_int.h).
 */
#include "cluster/wl_admin_int.h"

#include "cluster/etcd.h"
#include "cluster/features.h"
#include "cluster/map.h"
#include "common/err.h"
#include "common/log.h"
#include "proto/net.h"
#include "server/peer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prefix = "/warmlake";
static etcd_t *etcd;

static int usage(void)
{
    fprintf(stderr, "usage: wl-admin [--etcd URLS] [--prefix KEY] COMMAND\n"
                    "  cluster init --map FILE | cluster show | map set --map FILE\n"
                    "  node add --id ID --s3 HOST:PORT --proto HOST:PORT --drives N\n"
                    "  node remove --id ID | status [--json]\n"
                    "  pool add --id P --nodes N1,N2,.. [--ec K+M] [--weight W]\n"
                    "  pool drain --id P | pool activate --id P | pool weight --id P --weight W\n"
                    "  pool remove --id P     (a drained pool out of service: its nodes may go)\n"
                    "  pool weigh             (every pool's weight from its free space)\n"
                    "  drive replace NODE/N   (an empty drive took its place: refill it now)\n");
    return 2;
}

/* The value of --name in argv[from..argc), or NULL. */
static const char *arg(int argc, char **argv, int from, const char *name)
{
    for (int i = from; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return NULL;
}

static int flag(int argc, char **argv, int from, const char *name)
{
    for (int i = from; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

static void map_key(char *out, size_t cap)
{
    snprintf(out, cap, "%s/map", prefix);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (*len == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap + 1);
            if (!buf) abort();
        }
        size_t got = fread(buf + *len, 1, cap - *len, f);
        if (!got) break;
        *len += got;
    }
    fclose(f);
    if (buf) buf[*len] = 0;
    return buf;
}

/* Check text as the nodes will; 0 or 2 (printed). */
static int check(const char *text, size_t len)
{
    cmap_t m;
    char err[300];
    if (cmap_parse(text, len, &m, err, sizeof(err)) != 0) {
        fprintf(stderr, "wl-admin: refused: %s\n", err);
        return 2;
    }
    cmap_free(&m);
    return 0;
}

static int cluster_init(const char *path)
{
    size_t len;
    char *text = read_file(path, &len), key[300];
    if (!text) {
        fprintf(stderr, "wl-admin: cannot read %s: %s\n", path, strerror(errno));
        return 2;
    }
    int rc = check(text, len);
    map_key(key, sizeof(key));
    /*
     * The map and the features in use at once (one transaction): a node waiting for the map
     * never sees it without them. A new cluster uses every feature of this build
     * (cluster/features.h), and what a value left by an earlier cluster there says (in use
     * never shrinks).
     */
    char fk[300], v[64], *old = NULL;
    size_t olen;
    snprintf(fk, sizeof(fk), "%s/features_in_use", prefix);
    uint32_t in_use = WL_FEATURES_BUILT;
    int64_t frev = 0;
    int grc = rc ? 0 : etcd_get(etcd, fk, &old, &olen, &frev);
    if (grc == 0 && old) {
        in_use |= wl_features_in_use_decode(old, olen);
        free(old);
    } else if (grc && grc != ERR_NOT_FOUND) {
        rc = grc;
    }
    int vl = snprintf(v, sizeof(v), "{\"in_use\":%u}", (unsigned)in_use);
    etcd_cmp_t cmps[] = {{key, 0, 0}, {fk, frev, 0}};
    etcd_kv_t puts[] = {{key, text, len}, {fk, v, (size_t)vl}};
    if (!rc) rc = etcd_txn(etcd, cmps, 2, puts, 2);
    free(text);
    if (rc == ERR_PRECOND) {
        fprintf(stderr,
                "wl-admin: %s already holds a map (wl-admin map set replaces it), or "
                "%s changed meanwhile\n",
                key, fk);
        return 2;
    }
    if (rc == 0) printf("wl-admin: map stored at %s\n", key);
    return rc == 0 ? 0 : rc == 2 ? 2 : 1;
}

/* The stored map as JSON and its revision: 0, 1 (etcd), 2 (none). */
static int load(json_t **doc, int64_t *rev)
{
    char key[300], *val;
    size_t len;
    map_key(key, sizeof(key));
    int rc = etcd_get(etcd, key, &val, &len, rev);
    if (rc == ERR_NOT_FOUND) {
        fprintf(stderr, "wl-admin: no map at %s (wl-admin cluster init)\n", key);
        return 2;
    }
    if (rc) return 1;
    json_error_t je;
    *doc = json_loadb(val, len, 0, &je);
    free(val);
    if (!*doc) {
        fprintf(stderr, "wl-admin: the stored map is not JSON: %s\n", je.text);
        return 2;
    }
    return 0;
}

/*
 * Apply edit to the stored map with a new epoch, check it, store it if the
 * map did not change meanwhile (else again, a few times). 0, 1 or 2.
 */
static int edit(int (*fn)(json_t *doc, void *arg), void *arg)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        json_t *doc;
        int64_t rev;
        int rc = load(&doc, &rev);
        if (rc) return rc;
        json_int_t epoch = json_integer_value(json_object_get(doc, "epoch"));
        if ((rc = fn(doc, arg)) != 0) {
            json_decref(doc);
            return rc;
        }
        json_int_t want = json_integer_value(json_object_get(doc, "epoch"));
        json_object_set_new(doc, "epoch", json_integer(want > epoch ? want : epoch + 1));
        char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER), key[300];
        json_decref(doc);
        rc = check(text, strlen(text));
        map_key(key, sizeof(key));
        if (!rc) rc = etcd_put_if(etcd, key, text, strlen(text), rev);
        free(text);
        if (rc == 0) {
            printf("wl-admin: map stored, epoch %lld\n",
                   (long long)(want > epoch ? want : epoch + 1));
            return 0;
        }
        if (rc != ERR_PRECOND) return rc == 2 ? 2 : 1;
    }
    fprintf(stderr, "wl-admin: the map kept changing under this edit; try again\n");
    return 1;
}

/* ---- status ---- */

typedef struct {
    json_t *regs; /* node id -> registration */
} regs_t;

static int collect_reg(void *arg, const char *key, const char *val, size_t len)
{
    regs_t *r = arg;
    const char *id = strrchr(key, '/');
    json_error_t je;
    json_t *o = json_loadb(val, len, 0, &je);
    if (id && o) json_object_set_new(r->regs, id + 1, o);
    return 0;
}

/*
 * Every node of a new pool must be up (registered) before the pool is
 * added: the nodes serve every key's lookups from then on, and a pool that
 * cannot answer holds up each new key's PUT (it might hold the key) and
 * every listing. So: `node add`, start the node (it serves no set yet),
 * then `pool add`, which every running node applies at once. 0, or 1/2.
 */
static int pool_nodes_up(const char *list)
{
    char key[300], *ids = strdup(list), *save = NULL;
    if (!ids) abort();
    snprintf(key, sizeof(key), "%s/nodes/", prefix);
    regs_t r = {json_object()};
    int rc = etcd_list(etcd, key, collect_reg, &r) == 0 ? 0 : 1;
    for (char *t = strtok_r(ids, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save))
        if (!json_object_get(r.regs, t)) {
            fprintf(stderr,
                    "wl-admin: node %s is not up (no registration): start it first (warmlaked "
                    "--etcd ... --node %s); a pool whose nodes cannot answer holds up new keys' "
                    "writes and every listing\n",
                    t, t);
            rc = 2;
        }
    json_decref(r.regs);
    free(ids);
    return rc;
}

/* A NODE_STATS answer: the node's JSON text, copied. */
typedef struct {
    char *text;
} node_state_t;

static int state_resp(proto_call_t *c, int status, const uint8_t *p, size_t len)
{
    node_state_t *st = c->arg;
    if (status) return status;
    st->text = malloc(len + 1);
    if (!st->text) return ERR_NOMEM;
    memcpy(st->text, p, len);
    st->text[len] = 0;
    return 0;
}

/* An integer member of o, in MiB. */
static double mib(json_t *o, const char *name)
{
    return (double)json_integer_value(json_object_get(o, name)) / (1 << 20);
}

/* The node's heal queue and heal scanner (NULL: not reachable, or too old to say). */
static json_t *node_state(proto_peer_t *p)
{
    node_state_t st = {NULL};
    proto_call_t c = {.type = PROTO_NODE_STATS, .on_resp = state_resp, .arg = &st};
    if (proto_call(p, &c) != 0) {
        free(st.text);
        return NULL;
    }
    json_t *j = json_loads(st.text, 0, NULL);
    free(st.text);
    return j;
}

/* The stored map, parsed: 0, or what load returns, or 2 (it does not parse: said). */
static int load_map(cmap_t *m)
{
    json_t *doc;
    int64_t rev;
    int rc = load(&doc, &rev);
    if (rc) return rc;
    char *text = json_dumps(doc, JSON_COMPACT), err[300];
    rc = cmap_parse(text, strlen(text), m, err, sizeof(err));
    free(text);
    json_decref(doc);
    if (rc) {
        fprintf(stderr, "wl-admin: the stored map does not parse: %s\n", err);
        return 2;
    }
    return 0;
}

/* Whether the environment holds a cluster secret; said when what needs one has none. */
static int have_secret(const char *what)
{
    const char *secret = getenv("WARMLAKE_CLUSTER_SECRET");
    if (secret && strlen(secret) >= 16) return 1;
    if (what)
        fprintf(stderr, "wl-admin: %s needs the cluster secret in WARMLAKE_CLUSTER_SECRET\n", what);
    return 0;
}

/* The node protocol, as wl-admin, with the environment's cluster secret: NULL without one
 * (or when it cannot start). */
static proto_net_t *admin_net(const cmap_t *m, uint32_t timeout_ms)
{
    if (!have_secret(NULL)) return NULL;
    const char *secret = getenv("WARMLAKE_CLUSTER_SECRET");
    proto_net_cfg_t pc = {.cluster = m->cluster,
                          .node = "wl-admin",
                          .secret = secret,
                          .secret_len = strlen(secret),
                          .epoch = m->epoch,
                          .timeout_ms = timeout_ms};
    proto_net_t *net = NULL;
    return proto_net_start(&pc, &net) == 0 ? net : NULL;
}

/*
 * pool remove: a draining pool whose keys have all moved is taken out of
 * service (state "removed"): no node asks it for anything any more, so its
 * nodes may be shut down. Refused unless every set of it reports, through
 * the node that moves its keys (the set's first drive's), a drain pass that
 * found nothing, left nothing and no upload in progress: removed too soon,
 * what it still holds would be lost from the namespace.
 */
static int pool_remove(const char *id)
{
    cmap_t m;
    int rc = load_map(&m);
    if (rc) return rc;
    int p = cmap_pool_index(&m, id);
    if (p < 0 || m.pools[p].draining != 1) {
        fprintf(stderr, "wl-admin: %s\n",
                p < 0                                      ? "no such pool in the map"
                : m.pools[p].draining == CMAP_POOL_REMOVED ? "the pool was removed already"
                                                           : "the pool is not draining: "
                                                             "`pool drain` it first, and wait "
                                                             "for DRAINED in `status`");
        cmap_free(&m);
        return 2;
    }
    if (!have_secret("pool remove (it asks the movers whether they are done)")) {
        cmap_free(&m);
        return 2;
    }
    char key[300];
    regs_t r = {json_object()};
    snprintf(key, sizeof(key), "%s/nodes/", prefix);
    rc = etcd_list(etcd, key, collect_reg, &r) == 0 ? 0 : 1;
    proto_net_t *net = rc ? NULL : admin_net(&m, 3000);
    if (!rc && !net) rc = 1;
    for (int j = m.pools[p].first; !rc && j < m.pools[p].first + m.pools[p].nsets; j++) {
        const cmap_node_t *n = &m.nodes[m.sets[j].d[0].node];
        json_t *st = json_object_get(r.regs, n->id)
                         ? node_state(proto_net_peer(net, n->id, n->proto))
                         : NULL;
        json_t *dr = st ? json_object_get(st, "drain") : NULL;
        int done = dr && json_integer_value(json_object_get(dr, "draining")) &&
                   json_integer_value(json_object_get(dr, "done")) &&
                   !json_integer_value(json_object_get(dr, "left")) &&
                   !json_integer_value(json_object_get(dr, "uploads_left"));
        if (!done) {
            fprintf(stderr,
                    "wl-admin: set %d of pool %s is not drained: %s (its mover, node %s, moves "
                    "its keys; `status` says DRAINED when it is done)\n",
                    j, id, !st ? "its mover is not up or does not answer" : "keys are left", n->id);
            rc = 2;
        }
        json_decref(st);
    }
    if (net) proto_net_stop(net);
    json_decref(r.regs);
    cmap_free(&m);
    if (rc) return rc;
    pool_edit_t pe = {.id = id, .state = CMAP_POOL_REMOVED};
    return edit(admin__set_pool, &pe);
}

/* Whether a node's registration (NULL: none) says its drive d did not open at its start. */
static int reg_failed(json_t *reg, int d)
{
    json_t *fa = reg ? json_object_get(reg, "failed") : NULL;
    for (size_t i = 0; json_is_array(fa) && i < json_array_size(fa); i++)
        if (json_integer_value(json_array_get(fa, i)) == d) return 1;
    return 0;
}

/* Drive d's counters, asked of peer p (ds->capacity 0: it did not answer). */
static void remote_stats(proto_peer_t *p, int d, drive_stats_t *ds)
{
    memset(ds, 0, sizeof(*ds));
    if (!p) return;
    shard_store_t st = peer_store_new(p, (uint32_t)d);
    st.ops->stats(st.ctx, ds);
    peer_store_free(&st);
}

/*
 * drive replace NODE/N: the operator put an empty drive in place of NODE's
 * drive N (and restarted the node with it). The node's heal scanner starts
 * a pass at once rather than at its next interval: every set's objects are
 * verified and what the new drive lacks is rebuilt onto it, paced by the
 * node's --scrub-rate; `status` shows the pass. Needs the cluster secret
 * (WARMLAKE_CLUSTER_SECRET): only the cluster's own may ask.
 */
static int drive_replace(const char *spec)
{
    cmap_t m;
    int rc = load_map(&m);
    if (rc) return rc;
    const char *slash = strrchr(spec, '/');
    char node[CMAP_MAX_ID + 1] = "", tail;
    int drive = -1, ni = -1;
    if (slash && (size_t)(slash - spec) <= CMAP_MAX_ID) {
        memcpy(node, spec, (size_t)(slash - spec));
        node[slash - spec] = 0;
        ni = cmap_node_index(&m, node);
        if (sscanf(slash + 1, "%d%c", &drive, &tail) != 1) drive = -1;
    }
    if (ni < 0 || drive < 0 || drive >= m.nodes[ni].drives) {
        fprintf(stderr, "wl-admin: drive replace %s: no such drive in the map (want NODE/N)\n",
                spec);
        rc = 2;
    } else if (!have_secret("drive replace")) {
        rc = 2;
    } else {
        proto_net_t *net = admin_net(&m, 10000);
        proto_peer_t *p = net ? proto_net_peer(net, node, m.nodes[ni].proto) : NULL;
        proto_call_t c = {.type = PROTO_HEAL_NOW};
        rc = p ? proto_call(p, &c) : ERR_IO;
        if (rc == 0)
            printf("%s: heal pass started; it rebuilds what drive %d lacks (wl-admin status "
                   "shows its progress)\n",
                   node, drive);
        else if (rc == ERR_NOT_FOUND)
            fprintf(stderr, "wl-admin: %s runs no heal scanner (--scrub-interval 0)\n", node);
        else
            fprintf(stderr, "wl-admin: %s at %s: %s\n", node, m.nodes[ni].proto, err_str(rc));
        rc = rc ? 1 : 0;
        proto_net_stop(net);
    }
    cmap_free(&m);
    return rc;
}

/*
 * pool weigh: every pool's weight set from its free space (capacity less
 * live bytes over its drives, as the nodes report them), the pool with the
 * most getting 1000000: new objects then go to the pools in proportion to
 * what they can still take. Needs the cluster secret and every drive to
 * answer (a guess would skew the shares): otherwise nothing changes.
 */
static int pool_weigh(void)
{
    cmap_t m;
    int rc = load_map(&m);
    if (rc) return rc;
    if (!have_secret("pool weigh")) {
        cmap_free(&m);
        return 2;
    }
    proto_net_t *net = admin_net(&m, 5000);
    if (!net) {
        cmap_free(&m);
        return 1;
    }
    double freeb[CMAP_MAX_POOLS] = {0}, most = 0;
    for (int p = 0; p < m.npools && !rc; p++) {
        const cmap_pool_t *pool = &m.pools[p];
        for (int j = pool->first; j < pool->first + pool->nsets && !rc; j++)
            for (int i = 0; i < m.sets[j].k + m.sets[j].m && !rc; i++) {
                const cmap_node_t *n = &m.nodes[m.sets[j].d[i].node];
                drive_stats_t ds;
                remote_stats(proto_net_peer(net, n->id, n->proto), m.sets[j].d[i].drive, &ds);
                if (!ds.capacity) {
                    fprintf(stderr, "wl-admin: %s drive %d did not answer: weights unchanged\n",
                            n->id, m.sets[j].d[i].drive);
                    rc = 1;
                    break;
                }
                freeb[p] += ds.capacity > ds.live_bytes ? (double)(ds.capacity - ds.live_bytes) : 0;
            }
        if (freeb[p] > most) most = freeb[p];
    }
    proto_net_stop(net);
    uint32_t w[CMAP_MAX_POOLS];
    for (int p = 0; p < m.npools && !rc; p++) {
        double x = most > 0 ? freeb[p] * 1000000.0 / most : 1;
        w[p] = x < 1 ? 1 : (uint32_t)(x + 0.5);
        printf("pool %s: %.2f GB free, weight %u\n", m.pools[p].id, freeb[p] / 1e9, w[p]);
    }
    pool_edit_t e = {.weighs = w, .nweighs = m.npools};
    if (!rc) rc = edit(admin__weigh_pools, &e);
    cmap_free(&m);
    return rc;
}

static int status(int as_json)
{
    char key[300];
    cmap_t m;
    int rc = load_map(&m);
    if (rc) return rc;
    regs_t r = {json_object()};
    snprintf(key, sizeof(key), "%s/nodes/", prefix);
    int reach = etcd_list(etcd, key, collect_reg, &r) == 0;
    /* What each node's build reads, and what the cluster uses (cluster/features.h). */
    regs_t fr = {json_object()};
    snprintf(key, sizeof(key), "%s/features/", prefix);
    reach &= etcd_list(etcd, key, collect_reg, &fr) == 0;
    uint32_t in_use = 0;
    {
        char *val;
        size_t len;
        snprintf(key, sizeof(key), "%s/features_in_use", prefix);
        int frc = etcd_get(etcd, key, &val, &len, NULL);
        if (frc == 0) {
            in_use = wl_features_in_use_decode(val, len);
            free(val);
        } else if (frc != ERR_NOT_FOUND) {
            reach = 0;
        }
    }
    /* Drive counters over the node protocol, when this shell holds the cluster secret. */
    proto_net_t *net = admin_net(&m, 3000);
    json_t *out = json_pack("{s:s,s:I,s:[],s:[],s:[]}", "cluster", m.cluster, "epoch",
                            (json_int_t)m.epoch, "nodes", "pools", "sets");
    for (int p = 0; p < m.npools; p++)
        json_array_append_new(json_object_get(out, "pools"),
                              json_pack("{s:s,s:i,s:i,s:i,s:s}", "id", m.pools[p].id, "first_set",
                                        m.pools[p].first, "sets", m.pools[p].nsets, "weight",
                                        (int)m.pools[p].weight, "state",
                                        m.pools[p].draining == CMAP_POOL_REMOVED ? "removed"
                                        : m.pools[p].draining                    ? "draining"
                                                                                 : "active"));
    int *alive = calloc((size_t)m.nnodes, sizeof(int));
    if (!alive) abort();
    for (int i = 0; i < m.nnodes; i++) {
        const cmap_node_t *n = &m.nodes[i];
        json_t *reg = json_object_get(r.regs, n->id);
        alive[i] = reg != NULL;
        json_t *drives = json_array();
        proto_peer_t *p = net ? proto_net_peer(net, n->id, n->proto) : NULL;
        for (int d = 0; d < n->drives; d++) {
            json_t *dj = json_pack("{s:i}", "drive", d);
            if (reg_failed(reg, d)) {
                json_object_set_new(dj, "failed", json_true());
            } else if (p && reg) {
                drive_stats_t ds;
                remote_stats(p, d, &ds);
                if (ds.capacity)
                    json_object_update_new(
                        dj,
                        json_pack("{s:I,s:I,s:I,s:f,s:f,s:b}", "capacity", (json_int_t)ds.capacity,
                                  "used_bytes", (json_int_t)ds.used_bytes, "live_bytes",
                                  (json_int_t)ds.live_bytes, "write_amp", ds.write_amp,
                                  "projected_years", ds.projected_years, "readonly", ds.readonly));
            }
            json_array_append_new(drives, dj);
        }
        json_t *nj = json_pack("{s:s,s:s,s:s,s:b,s:o}", "id", n->id, "s3", n->s3, "proto", n->proto,
                               "alive", reg != NULL, "drives", drives);
        /* Its build and features as it last said (a node away: what it ran; none: never said,
         * a build from before features, or a node never started). */
        json_t *fj = json_object_get(fr.regs, n->id);
        json_t *bv = fj ? json_object_get(fj, "build") : NULL;
        uint32_t nf = wl_features_of_entry(fj);
        char names[256];
        if (in_use & ~nf && fj) {
            /* In use, and this node's build lacks it: fenced, or refused at its start. */
            wl_features_names(in_use & ~nf, names, sizeof(names));
            json_object_set_new(nj, "lacks", json_string(names));
        }
        json_object_set_new(nj, "voter", json_boolean(wl_features_voter(&m, i)));
        wl_features_names(nf, names, sizeof(names));
        json_object_set_new(nj, "build",
                            json_string(json_is_string(bv) ? json_string_value(bv) : "unknown"));
        json_object_set_new(nj, "features", json_string(names));
        json_t *state = p && reg ? node_state(p) : NULL;
        if (state) {
            json_t *v;
            if ((v = json_object_get(state, "heal"))) json_object_set(nj, "heal_queue", v);
            if ((v = json_object_get(state, "scrub"))) json_object_set(nj, "heal_scanner", v);
            if ((v = json_object_get(state, "drain"))) json_object_set(nj, "drain", v);
            if ((v = json_object_get(state, "memory"))) json_object_set(nj, "memory", v);
            json_decref(state);
        }
        json_array_append_new(json_object_get(out, "nodes"), nj);
    }
    for (int s = 0; s < m.nsets; s++) {
        const cmap_set_t *set = &m.sets[s];
        int down = 0;
        json_t *dr = json_array();
        for (int i = 0; i < set->k + set->m; i++) {
            char name[CMAP_MAX_ID + 16];
            snprintf(name, sizeof(name), "%s/%d", m.nodes[set->d[i].node].id, set->d[i].drive);
            json_array_append_new(dr, json_string(name));
            down +=
                !alive[set->d[i].node] ||
                reg_failed(json_object_get(r.regs, m.nodes[set->d[i].node].id), set->d[i].drive);
        }
        int removed = 0;
        for (int p = 0; p < m.npools; p++)
            if (s >= m.pools[p].first && s < m.pools[p].first + m.pools[p].nsets)
                removed = m.pools[p].draining == CMAP_POOL_REMOVED;
        const char *health = removed          ? "removed"
                             : !down          ? "ok"
                             : down <= set->m ? "degraded"
                                              : "unavailable";
        char ec[32];
        snprintf(ec, sizeof(ec), "%d+%d", set->k, set->m);
        json_array_append_new(json_object_get(out, "sets"),
                              json_pack("{s:s,s:o,s:i,s:s}", "ec", ec, "drives", dr, "shards_down",
                                        down, "health", health));
    }
    proto_net_stop(net);
    /* The features some node reads that are not in use yet, and the nodes they wait for. */
    char names[256];
    wl_features_names(in_use, names, sizeof(names));
    json_object_set_new(out, "features_in_use", json_string(names));
    json_t *waiting = json_object();
    for (int i = 0; i < m.nnodes; i++) {
        if (!wl_features_voter(&m, i)) continue; /* a removed pool's: no say */
        uint32_t nf = wl_features_of_entry(json_object_get(fr.regs, m.nodes[i].id));
        for (uint32_t bit = 1; bit && bit <= WL_FEATURES_BUILT; bit <<= 1) {
            if (!(WL_FEATURES_BUILT & bit) || (in_use & bit) || (nf & bit)) continue;
            wl_features_names(bit, names, sizeof(names));
            json_t *list = json_object_get(waiting, names);
            if (!list) json_object_set_new(waiting, names, list = json_array());
            json_array_append_new(list, json_string(m.nodes[i].id));
        }
    }
    json_object_set_new(out, "features_waiting", waiting);
    if (as_json) {
        char *t = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", t);
        free(t);
    } else {
        printf("cluster %s, epoch %llu%s\n", m.cluster, (unsigned long long)m.epoch,
               reach ? "" : " (registrations unreadable)");
        printf("  features in use: %s\n",
               json_string_value(json_object_get(out, "features_in_use")));
        const char *fname;
        json_t *who;
        json_object_foreach(waiting, fname, who)
        {
            printf("  feature %s waits for:", fname);
            size_t q;
            json_t *id;
            json_array_foreach(who, q, id) printf(" %s", json_string_value(id));
            printf(" (their builds do not read it: upgrade them)\n");
        }
        json_t *n;
        size_t i;
        json_array_foreach(json_object_get(out, "nodes"), i, n)
        {
            printf("  node %-12s %-6s s3 %s  proto %s  %s\n",
                   json_string_value(json_object_get(n, "id")),
                   json_is_true(json_object_get(n, "alive")) ? "up" : "DOWN",
                   json_string_value(json_object_get(n, "s3")),
                   json_string_value(json_object_get(n, "proto")),
                   json_string_value(json_object_get(n, "build")));
            if (json_object_get(n, "lacks"))
                printf("    LACKS features in use: %s (fenced or refused: upgrade it)\n",
                       json_string_value(json_object_get(n, "lacks")));
            json_t *d;
            size_t j;
            json_array_foreach(json_object_get(n, "drives"), j, d)
            {
                if (json_is_true(json_object_get(d, "failed")))
                    printf("    drive %lld: FAILED: did not open at the node's start (its log "
                           "says why); mend it and restart the node, or replace it\n",
                           (long long)json_integer_value(json_object_get(d, "drive")));
                if (!json_object_get(d, "capacity")) continue;
                double years = json_real_value(json_object_get(d, "projected_years"));
                char life[64] = "no DWPD budget set";
                if (years >= 0) snprintf(life, sizeof(life), "%.1f years of endurance left", years);
                printf("    drive %lld: %.1f of %.1f GiB used, write amp %.2f, %s%s\n",
                       (long long)json_integer_value(json_object_get(d, "drive")),
                       (double)json_integer_value(json_object_get(d, "used_bytes")) / (1 << 30),
                       (double)json_integer_value(json_object_get(d, "capacity")) / (1 << 30),
                       json_real_value(json_object_get(d, "write_amp")), life,
                       json_is_true(json_object_get(d, "readonly")) ? ", READ-ONLY" : "");
            }
            json_t *hq = json_object_get(n, "heal_queue"), *sc = json_object_get(n, "heal_scanner");
            if (hq)
                printf("    heal queue: %lld pending, %lld healed, %lld retried, %lld dropped\n",
                       (long long)json_integer_value(json_object_get(hq, "pending")),
                       (long long)json_integer_value(json_object_get(hq, "healed")),
                       (long long)json_integer_value(json_object_get(hq, "retries")),
                       (long long)json_integer_value(json_object_get(hq, "dropped")));
            if (sc && json_integer_value(json_object_get(sc, "running"))) {
                double done = (double)json_integer_value(json_object_get(sc, "bytes")),
                       total = (double)json_integer_value(json_object_get(sc, "total_est"));
                printf("    heal scanner: pass %lld under way%s: %lld objects, %.1f of ~%.1f GB "
                       "(%.0f%%), %.1f MB/s, ETA %lld s\n",
                       (long long)json_integer_value(json_object_get(sc, "passes")) + 1,
                       json_integer_value(json_object_get(sc, "waiting"))
                           ? " (waiting for a drive to be up)"
                           : "",
                       (long long)json_integer_value(json_object_get(sc, "objects")), done / 1e9,
                       total / 1e9, total > 0 ? 100.0 * done / total : 0.0,
                       json_real_value(json_object_get(sc, "mb_s")),
                       (long long)json_integer_value(json_object_get(sc, "eta_s")));
            } else if (sc) {
                printf("    heal scanner: %lld passes, the last %.0f s; fixed %lld heads, %lld "
                       "blocks\n",
                       (long long)json_integer_value(json_object_get(sc, "passes")),
                       json_real_value(json_object_get(sc, "last_pass_s")),
                       (long long)json_integer_value(json_object_get(sc, "heads_fixed")),
                       (long long)json_integer_value(json_object_get(sc, "blocks_fixed")));
            }
            json_t *mem = json_object_get(n, "memory");
            if (mem) {
                printf("    memory: %.0f MiB resident, malloc %.0f of %.0f MiB in use; index "
                       "cache %.0f of %.0f MiB, memtables %.0f MiB; commit buffers %.0f MiB, "
                       "stripe buffers %.0f MiB\n",
                       mib(mem, "rss"), mib(mem, "malloc_in_use"), mib(mem, "malloc_held"),
                       mib(mem, "index_cache"), mib(mem, "index_cache_capacity"),
                       mib(mem, "index_memtables"), mib(mem, "writer_buffers"),
                       mib(mem, "stripe_buffers_kept") + mib(mem, "stripe_buffers_out"));
            }
            json_t *dr = json_object_get(n, "drain");
            if (dr && json_integer_value(json_object_get(dr, "draining")))
                printf("    drain: %s%s; %lld keys (%lld versions, %.1f GB) moved, %.1f MB/s; "
                       "last pass left %lld keys and %lld uploads%s\n",
                       json_integer_value(json_object_get(dr, "running")) ? "moving" : "idle",
                       json_integer_value(json_object_get(dr, "waiting"))
                           ? " (waiting for a drive to be up)"
                           : "",
                       (long long)json_integer_value(json_object_get(dr, "keys")),
                       (long long)json_integer_value(json_object_get(dr, "versions")),
                       (double)json_integer_value(json_object_get(dr, "bytes")) / 1e9,
                       json_real_value(json_object_get(dr, "mb_s")),
                       (long long)json_integer_value(json_object_get(dr, "left")),
                       (long long)json_integer_value(json_object_get(dr, "uploads_left")),
                       json_integer_value(json_object_get(dr, "done")) ? ": DRAINED" : "");
        }
        json_array_foreach(json_object_get(out, "pools"), i, n)
        {
            int first = (int)json_integer_value(json_object_get(n, "first_set")),
                ns = (int)json_integer_value(json_object_get(n, "sets"));
            printf("  pool %s: sets %d..%d, weight %lld, %s\n",
                   json_string_value(json_object_get(n, "id")), first, first + ns - 1,
                   (long long)json_integer_value(json_object_get(n, "weight")),
                   json_string_value(json_object_get(n, "state")));
        }
        json_array_foreach(json_object_get(out, "sets"), i, n)
        {
            printf("  set %zu: %s, %s (%lld shards down)\n", i,
                   json_string_value(json_object_get(n, "ec")),
                   json_string_value(json_object_get(n, "health")),
                   (long long)json_integer_value(json_object_get(n, "shards_down")));
        }
    }
    json_decref(out);
    json_decref(r.regs);
    json_decref(fr.regs);
    free(alive);
    cmap_free(&m);
    return reach ? 0 : 1;
}

int main(int argc, char **argv)
{
    log_level = LOG_LVL_WARN; /* an etcd that does not answer says why (etcd_call_failed) */
    const char *urls = getenv("WARMLAKE_ETCD") ? getenv("WARMLAKE_ETCD") : "http://127.0.0.1:2379";
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (i + 1 >= argc) return usage();
        if (strcmp(argv[i], "--etcd") == 0)
            urls = argv[i + 1];
        else if (strcmp(argv[i], "--prefix") == 0)
            prefix = argv[i + 1];
        else
            return usage();
    }
    if (i >= argc) return usage();
    if (!(etcd = etcd_new(urls))) {
        fprintf(stderr, "wl-admin: --etcd %s: want http://HOST:PORT[,...]\n", urls);
        return 2;
    }
    const char *cmd = argv[i], *sub = i + 1 < argc ? argv[i + 1] : "";
    node_edit_t e = {arg(argc, argv, i, "--id"), arg(argc, argv, i, "--s3"),
                     arg(argc, argv, i, "--proto"), 0, NULL};
    int rc;
    if (strcmp(cmd, "cluster") == 0 && strcmp(sub, "init") == 0 && arg(argc, argv, i, "--map")) {
        rc = cluster_init(arg(argc, argv, i, "--map"));
    } else if (strcmp(cmd, "cluster") == 0 && strcmp(sub, "show") == 0) {
        json_t *doc;
        int64_t rev;
        if ((rc = load(&doc, &rev)) == 0) {
            char *t = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            printf("%s\n", t);
            free(t);
            json_decref(doc);
        }
    } else if (strcmp(cmd, "map") == 0 && strcmp(sub, "set") == 0 && arg(argc, argv, i, "--map")) {
        size_t len;
        char *text = read_file(arg(argc, argv, i, "--map"), &len);
        json_error_t je;
        e.replacement = text ? json_loadb(text, len, 0, &je) : NULL;
        free(text);
        if (!e.replacement) {
            fprintf(stderr, "wl-admin: cannot read the map %s\n", arg(argc, argv, i, "--map"));
            rc = 2;
        } else {
            rc = edit(admin__replace_map, &e);
            json_decref(e.replacement);
        }
    } else if (strcmp(cmd, "node") == 0 && strcmp(sub, "add") == 0 && e.id && e.s3 && e.proto &&
               arg(argc, argv, i, "--drives")) {
        e.drives = strtol(arg(argc, argv, i, "--drives"), NULL, 10);
        rc = edit(admin__add_node, &e);
    } else if (strcmp(cmd, "node") == 0 && strcmp(sub, "remove") == 0 && e.id) {
        rc = edit(admin__remove_node, &e);
        if (rc == 0) {
            /* What its build read goes with it: an id added again counts once it says. */
            char fk[400];
            snprintf(fk, sizeof(fk), "%s/features/%s", prefix, e.id);
            if (etcd_delete(etcd, fk) != 0)
                fprintf(stderr,
                        "wl-admin: could not delete %s (harmless: a node of that id "
                        "added again writes its own)\n",
                        fk);
        }
    } else if (strcmp(cmd, "pool") == 0 && strcmp(sub, "add") == 0 && e.id &&
               arg(argc, argv, i, "--nodes")) {
        pool_edit_t pe = {
            e.id, arg(argc, argv, i, "--ec"), arg(argc, argv, i, "--nodes"), 0, -1, NULL, 0};
        const char *w = arg(argc, argv, i, "--weight");
        pe.weight = w ? strtol(w, NULL, 10) : 0;
        rc = w && pe.weight < 1 ? usage() : pool_nodes_up(pe.nodes);
        if (!rc) rc = edit(admin__add_pool, &pe);
    } else if (strcmp(cmd, "pool") == 0 &&
               (strcmp(sub, "drain") == 0 || strcmp(sub, "activate") == 0) && e.id) {
        pool_edit_t pe = {.id = e.id, .state = strcmp(sub, "drain") == 0};
        rc = edit(admin__set_pool, &pe);
    } else if (strcmp(cmd, "pool") == 0 && strcmp(sub, "remove") == 0 && e.id) {
        rc = pool_remove(e.id);
    } else if (strcmp(cmd, "pool") == 0 && strcmp(sub, "weight") == 0 && e.id &&
               arg(argc, argv, i, "--weight")) {
        pool_edit_t pe = {
            .id = e.id, .state = -1, .weight = strtol(arg(argc, argv, i, "--weight"), NULL, 10)};
        rc = pe.weight < 1 ? usage() : edit(admin__set_pool, &pe);
    } else if (strcmp(cmd, "pool") == 0 && strcmp(sub, "weigh") == 0) {
        rc = pool_weigh();
    } else if (strcmp(cmd, "drive") == 0 && strcmp(sub, "replace") == 0 && i + 2 < argc) {
        rc = drive_replace(argv[i + 2]);
    } else if (strcmp(cmd, "status") == 0) {
        rc = status(flag(argc, argv, i, "--json"));
    } else {
        rc = usage();
    }
    etcd_free(etcd);
    return rc;
}
