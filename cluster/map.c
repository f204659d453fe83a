/*
 * map: parsing and checking the cluster map (the format is in map.h).
 */
#include "cluster/map.h"

#include "common/err.h"
#include "common/mem.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return ERR_INVAL;
}

static int id_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > CMAP_MAX_ID) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

/* HOST:PORT with a port of 1..65535 (a map names real addresses: no port 0). */
/*
 * IPv4:PORT or [IPv6]:PORT: an address literal, as nodes listen and connect
 * with them (no name is resolved: a host name here parsed, and the node then
 * could not start).
 */
static int addr_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || strlen(s) >= CMAP_MAX_ADDR) return 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != 0 || end == colon + 1 || port < 1 || port > 65535) return 0;
    char host[CMAP_MAX_ADDR];
    size_t hl = (size_t)(colon - s);
    unsigned char bin[16];
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
        memcpy(host, s + 1, hl - 2);
        host[hl - 2] = 0;
        return inet_pton(AF_INET6, host, bin) == 1;
    }
    memcpy(host, s, hl);
    host[hl] = 0;
    return inet_pton(AF_INET, host, bin) == 1;
}

static int parse_ec(const char *s, int *k, int *m)
{
    char tail;
    return sscanf(s, "%d+%d%c", k, m, &tail) == 2 && *k >= 1 && *m >= 0 &&
           *k + *m <= ERS_MAX_SHARDS;
}

int cmap_node_index(const cmap_t *m, const char *id)
{
    for (int i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].id, id) == 0) return i;
    return -1;
}

static int parse_nodes(json_t *arr, cmap_t *m, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return fail(err, errlen, "\"nodes\" must be a non-empty array");
    m->nnodes = (int)json_array_size(arr);
    m->nodes = xcalloc((size_t)m->nnodes, sizeof(*m->nodes));
    for (int i = 0; i < m->nnodes; i++) {
        json_t *o = json_array_get(arr, (size_t)i);
        const char *id = json_string_value(json_object_get(o, "id"));
        const char *s3 = json_string_value(json_object_get(o, "s3"));
        const char *pr = json_string_value(json_object_get(o, "proto"));
        json_t *dr = json_object_get(o, "drives");
        if (!id || !id_ok(id)) return fail(err, errlen, "node %d: bad or missing \"id\"", i);
        if (!s3 || !addr_ok(s3)) return fail(err, errlen, "node %s: bad \"s3\" address", id);
        if (!pr || !addr_ok(pr)) return fail(err, errlen, "node %s: bad \"proto\" address", id);
        if (!json_is_integer(dr) || json_integer_value(dr) < 1 ||
            json_integer_value(dr) > ERS_MAX_SHARDS)
            return fail(err, errlen, "node %s: \"drives\" must be 1..%d", id, ERS_MAX_SHARDS);
        if (cmap_node_index(m, id) >= 0) return fail(err, errlen, "node %s listed twice", id);
        cmap_node_t *n = &m->nodes[i];
        snprintf(n->id, sizeof(n->id), "%s", id);
        snprintf(n->s3, sizeof(n->s3), "%s", s3);
        snprintf(n->proto, sizeof(n->proto), "%s", pr);
        n->drives = (int)json_integer_value(dr);
        for (int j = 0; j < i; j++)
            if (strcmp(m->nodes[j].proto, pr) == 0 || strcmp(m->nodes[j].s3, s3) == 0)
                return fail(err, errlen, "nodes %s and %s share an address", m->nodes[j].id, id);
    }
    return 0;
}

/* A new set at the end of m's (room for CMAP_MAX_SETS), or NULL with a message. */
static cmap_set_t *new_set(cmap_t *m, char *err, size_t errlen)
{
    if (m->nsets >= CMAP_MAX_SETS) {
        fail(err, errlen, "more than %d sets", CMAP_MAX_SETS);
        return NULL;
    }
    return &m->sets[m->nsets++];
}

/*
 * Sets of every drive of the nodes nodes[0..nn): the drives taken
 * round-robin over the nodes (each node's drive 0, then each one's drive
 * 1, ...), cut into sets of k+m, so consecutive shards sit on different
 * nodes and each set spans as many nodes as it can. With "ec", the drives
 * must be a multiple of k+m; without it, one set of every drive (m = 2
 * from 4 drives).
 */
static int auto_sets(cmap_t *m, const int *nodes, int nn, json_t *ec, char *err, size_t errlen)
{
    int total = 0, most = 0, k, mm;
    for (int i = 0; i < nn; i++) {
        total += m->nodes[nodes[i]].drives;
        if (m->nodes[nodes[i]].drives > most) most = m->nodes[nodes[i]].drives;
    }
    if (ec) {
        if (!json_is_string(ec) || !parse_ec(json_string_value(ec), &k, &mm))
            return fail(err, errlen, "bad \"ec\" (want K+M)");
        if (total % (k + mm))
            return fail(err, errlen, "\"ec\" %d+%d does not divide the %d drives into sets", k, mm,
                        total);
        if (m->nsets + total / (k + mm) > CMAP_MAX_SETS)
            return fail(err, errlen, "%d drives make more than %d sets of %d+%d", total,
                        CMAP_MAX_SETS, k, mm);
    } else {
        if (total > ERS_MAX_SHARDS)
            return fail(err, errlen,
                        "%d drives in all: give \"ec\" or list \"sets\" (at most %d drives a "
                        "set)",
                        total, ERS_MAX_SHARDS);
        mm = total >= 4 ? 2 : total >= 2 ? 1 : 0;
        k = total - mm;
        if (m->nsets + 1 > CMAP_MAX_SETS)
            return fail(err, errlen, "more than %d sets", CMAP_MAX_SETS);
    }
    int first = m->nsets, n = 0;
    m->nsets += total / (k + mm);
    for (int d = 0; d < most; d++)
        for (int i = 0; i < nn; i++)
            if (d < m->nodes[nodes[i]].drives) {
                cmap_set_t *s = &m->sets[first + n / (k + mm)];
                s->k = k;
                s->m = mm;
                s->d[n % (k + mm)] = (cmap_drive_t){nodes[i], d};
                n++;
            }
    return 0;
}

static int parse_sets(json_t *arr, cmap_t *m, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return fail(err, errlen, "\"sets\" must be a non-empty array");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *o = json_array_get(arr, i);
        cmap_set_t *s = new_set(m, err, errlen);
        if (!s) return ERR_INVAL;
        const char *ec = json_string_value(json_object_get(o, "ec"));
        json_t *dr = json_object_get(o, "drives");
        if (!ec || !parse_ec(ec, &s->k, &s->m))
            return fail(err, errlen, "set %d: bad or missing \"ec\" (want K+M)", m->nsets - 1);
        if (!json_is_array(dr) || json_array_size(dr) != (size_t)(s->k + s->m))
            return fail(err, errlen, "set %d: \"drives\" must list k+m = %d drives", m->nsets - 1,
                        s->k + s->m);
        for (int j = 0; j < s->k + s->m; j++) {
            const char *name = json_string_value(json_array_get(dr, (size_t)j));
            char node[CMAP_MAX_ID + 2];
            int drive;
            char tail;
            const char *slash = name ? strrchr(name, '/') : NULL;
            if (!slash || (size_t)(slash - name) > CMAP_MAX_ID ||
                sscanf(slash + 1, "%d%c", &drive, &tail) != 1)
                return fail(err, errlen, "set %d: drive %d is not NODE/NUMBER", m->nsets - 1, j);
            memcpy(node, name, (size_t)(slash - name));
            node[slash - name] = 0;
            int ni = cmap_node_index(m, node);
            if (ni < 0)
                return fail(err, errlen, "set %d: drive %s: no node %s", m->nsets - 1, name, node);
            if (drive < 0 || drive >= m->nodes[ni].drives)
                return fail(err, errlen, "set %d: node %s has no drive %d", m->nsets - 1, node,
                            drive);
            s->d[j] = (cmap_drive_t){ni, drive};
        }
    }
    return 0;
}

int cmap_pool_index(const cmap_t *m, const char *id)
{
    for (int i = 0; i < m->npools; i++)
        if (strcmp(m->pools[i].id, id) == 0) return i;
    return -1;
}

/* One pool of "pools": its sets (listed, or automatic over its nodes) at the end of m's. */
static int parse_pool(json_t *o, cmap_t *m, char *err, size_t errlen)
{
    cmap_pool_t *p = &m->pools[m->npools];
    const char *id = json_string_value(json_object_get(o, "id"));
    json_t *sets = json_object_get(o, "sets"), *nodes = json_object_get(o, "nodes"),
           *ec = json_object_get(o, "ec"), *w = json_object_get(o, "weight"),
           *state = json_object_get(o, "state");
    if (!json_is_object(o)) return fail(err, errlen, "pool %d is not an object", m->npools);
    if (!id || !id_ok(id)) return fail(err, errlen, "pool %d: bad or missing \"id\"", m->npools);
    if (cmap_pool_index(m, id) >= 0) return fail(err, errlen, "pool %s listed twice", id);
    snprintf(p->id, sizeof(p->id), "%s", id);
    p->weight = 1;
    if (w) {
        if (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > 1000000)
            return fail(err, errlen, "pool %s: \"weight\" must be 1..1000000", id);
        p->weight = (uint32_t)json_integer_value(w);
    }
    if (state) {
        const char *sv = json_string_value(state);
        if (!sv || (strcmp(sv, "active") != 0 && strcmp(sv, "draining") != 0 &&
                    strcmp(sv, "removed") != 0))
            return fail(err, errlen,
                        "pool %s: \"state\" is \"active\", \"draining\" or \"removed\"", id);
        p->draining = strcmp(sv, "draining") == 0 ? 1 : strcmp(sv, "removed") == 0 ? 2 : 0;
    }
    p->first = m->nsets;
    int rc;
    if (sets && (nodes || ec))
        return fail(err, errlen, "pool %s: \"sets\" or \"nodes\" (with \"ec\"), not both", id);
    if (sets) {
        rc = parse_sets(sets, m, err, errlen);
    } else {
        if (!json_is_array(nodes) || json_array_size(nodes) == 0 ||
            json_array_size(nodes) > (size_t)m->nnodes)
            return fail(err, errlen, "pool %s: give \"sets\", or \"nodes\" (a list of node ids)",
                        id);
        int *ni = xcalloc(json_array_size(nodes), sizeof(*ni)), nn = 0;
        rc = 0;
        for (size_t i = 0; i < json_array_size(nodes) && !rc; i++) {
            const char *nid = json_string_value(json_array_get(nodes, i));
            int x = nid ? cmap_node_index(m, nid) : -1;
            if (x < 0)
                rc = fail(err, errlen, "pool %s: no node %s", id, nid ? nid : "(not a string)");
            for (int j = 0; j < nn && !rc; j++)
                if (ni[j] == x) rc = fail(err, errlen, "pool %s: node %s listed twice", id, nid);
            ni[nn++] = x;
        }
        if (!rc) rc = auto_sets(m, ni, nn, ec, err, errlen);
        free(ni);
    }
    if (rc) return rc;
    p->nsets = m->nsets - p->first;
    m->npools++;
    return 0;
}

/* Every drive in one place at most, and one coding for every set (pools share stripe buffers). */
static int check_sets(const cmap_t *m, char *err, size_t errlen)
{
    for (int a = 0; a < m->nsets; a++) {
        const cmap_set_t *x = &m->sets[a];
        if (x->k != m->sets[0].k || x->m != m->sets[0].m)
            return fail(err, errlen, "set %d is %d+%d, set 0 %d+%d: every set has one coding", a,
                        x->k, x->m, m->sets[0].k, m->sets[0].m);
        for (int i = 0; i < x->k + x->m; i++)
            for (int b = a; b < m->nsets; b++)
                for (int j = b == a ? i + 1 : 0; j < m->sets[b].k + m->sets[b].m; j++)
                    if (m->sets[b].d[j].node == x->d[i].node &&
                        m->sets[b].d[j].drive == x->d[i].drive)
                        return fail(err, errlen, "drive %s/%d is in two places",
                                    m->nodes[x->d[i].node].id, x->d[i].drive);
    }
    return 0;
}

int cmap_same_set(const cmap_t *x, int a, const cmap_t *y, int b)
{
    const cmap_set_t *sa = &x->sets[a], *sb = &y->sets[b];
    if (sa->k != sb->k || sa->m != sb->m) return 0;
    for (int i = 0; i < sa->k + sa->m; i++)
        if (sa->d[i].drive != sb->d[i].drive ||
            strcmp(x->nodes[sa->d[i].node].id, y->nodes[sb->d[i].node].id) != 0)
            return 0;
    return 1;
}

int cmap_parse(const char *json, size_t len, cmap_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return fail(err, errlen, "not JSON: line %d: %s", je.line, je.text);
    int rc = 0;
    const char *cluster = json_string_value(json_object_get(root, "cluster"));
    json_t *epoch = json_object_get(root, "epoch");
    json_t *sets = json_object_get(root, "sets"), *pools = json_object_get(root, "pools");
    if (!json_is_object(root))
        rc = fail(err, errlen, "the map must be a JSON object");
    else if (!cluster || !id_ok(cluster))
        rc = fail(err, errlen, "bad or missing \"cluster\" id");
    else if (!json_is_integer(epoch) || json_integer_value(epoch) < 1)
        rc = fail(err, errlen, "\"epoch\" must be an integer >= 1");
    if (!rc) {
        snprintf(out->cluster, sizeof(out->cluster), "%s", cluster);
        out->epoch = (uint64_t)json_integer_value(epoch);
        rc = parse_nodes(json_object_get(root, "nodes"), out, err, errlen);
    }
    if (!rc && sets && json_object_get(root, "ec"))
        rc = fail(err, errlen, "give \"ec\" inside each set when \"sets\" are listed");
    if (!rc && pools && (sets || json_object_get(root, "ec")))
        rc = fail(err, errlen, "a map with \"pools\" gives its sets and \"ec\" in its pools");
    if (!rc) {
        out->sets = xcalloc(CMAP_MAX_SETS, sizeof(*out->sets));
        out->pools = xcalloc(CMAP_MAX_POOLS, sizeof(*out->pools));
    }
    if (!rc && pools) {
        if (!json_is_array(pools) || json_array_size(pools) == 0 ||
            json_array_size(pools) > CMAP_MAX_POOLS)
            rc = fail(err, errlen, "\"pools\" must be an array of 1..%d pools", CMAP_MAX_POOLS);
        for (size_t i = 0; !rc && i < json_array_size(pools); i++)
            rc = parse_pool(json_array_get(pools, i), out, err, errlen);
        int active = 0;
        for (int i = 0; !rc && i < out->npools; i++)
            active += !out->pools[i].draining;
        if (!rc && !active) rc = fail(err, errlen, "every pool is draining: new objects have none");
    } else if (!rc) {
        cmap_pool_t *p = &out->pools[out->npools++];
        snprintf(p->id, sizeof(p->id), "p0");
        p->weight = 1;
        if (sets) {
            rc = parse_sets(sets, out, err, errlen);
        } else {
            int *all = xcalloc((size_t)out->nnodes, sizeof(*all));
            for (int i = 0; i < out->nnodes; i++)
                all[i] = i;
            rc = auto_sets(out, all, out->nnodes, json_object_get(root, "ec"), err, errlen);
            free(all);
        }
        p->nsets = out->nsets;
    }
    if (!rc) rc = check_sets(out, err, errlen);
    json_decref(root);
    if (rc) cmap_free(out);
    return rc;
}

int cmap_load(const char *path, cmap_t *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return ERR_IO;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= (16u << 20)) break; /* no sane map is this large */
            cap = cap ? cap * 2 : 4096;
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        if (!got) break;
        len += got;
    }
    int bad = ferror(f);
    fclose(f);
    int rc = bad ? (snprintf(err, errlen, "cannot read %s", path), ERR_IO)
                 : cmap_parse(buf ? buf : "", len, out, err, errlen);
    free(buf);
    return rc;
}

void cmap_copy(cmap_t *dst, const cmap_t *src)
{
    *dst = *src;
    dst->nodes = xcalloc((size_t)src->nnodes, sizeof(*dst->nodes));
    memcpy(dst->nodes, src->nodes, sizeof(*dst->nodes) * (size_t)src->nnodes);
    dst->sets = xcalloc(CMAP_MAX_SETS, sizeof(*dst->sets));
    memcpy(dst->sets, src->sets, sizeof(*dst->sets) * (size_t)src->nsets);
    dst->pools = xcalloc(CMAP_MAX_POOLS, sizeof(*dst->pools));
    memcpy(dst->pools, src->pools, sizeof(*dst->pools) * (size_t)src->npools);
}

void cmap_free(cmap_t *m)
{
    free(m->nodes);
    free(m->sets);
    free(m->pools);
    memset(m, 0, sizeof(*m));
}
