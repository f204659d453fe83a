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

/*
 * Sets of every drive: the drives taken round-robin over the nodes (each
 * node's drive 0, then each one's drive 1, ...), cut into sets of k+m, so
 * consecutive shards sit on different nodes and each set spans as many
 * nodes as it can. With "ec", the drives must be a multiple of k+m; without
 * it, one set of every drive (m = 2 from 4 drives).
 */
static int auto_set(cmap_t *m, json_t *ec, char *err, size_t errlen)
{
    int total = 0, most = 0, k, mm;
    for (int i = 0; i < m->nnodes; i++) {
        total += m->nodes[i].drives;
        if (m->nodes[i].drives > most) most = m->nodes[i].drives;
    }
    if (ec) {
        if (!json_is_string(ec) || !parse_ec(json_string_value(ec), &k, &mm))
            return fail(err, errlen, "bad \"ec\" (want K+M)");
        if (total % (k + mm))
            return fail(err, errlen, "\"ec\" %d+%d does not divide the %d drives into sets", k, mm,
                        total);
        if (total / (k + mm) > CMAP_MAX_SETS)
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
    }
    m->nsets = total / (k + mm);
    m->sets = xcalloc((size_t)m->nsets, sizeof(*m->sets));
    int n = 0;
    for (int d = 0; d < most; d++)
        for (int i = 0; i < m->nnodes; i++)
            if (d < m->nodes[i].drives) {
                cmap_set_t *s = &m->sets[n / (k + mm)];
                s->k = k;
                s->m = mm;
                s->d[n % (k + mm)] = (cmap_drive_t){i, d};
                n++;
            }
    return 0;
}

static int parse_sets(json_t *arr, cmap_t *m, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return fail(err, errlen, "\"sets\" must be a non-empty array");
    if (json_array_size(arr) > CMAP_MAX_SETS)
        return fail(err, errlen, "more than %d sets", CMAP_MAX_SETS);
    m->nsets = (int)json_array_size(arr);
    m->sets = xcalloc((size_t)m->nsets, sizeof(*m->sets));
    for (int i = 0; i < m->nsets; i++) {
        json_t *o = json_array_get(arr, (size_t)i);
        cmap_set_t *s = &m->sets[i];
        const char *ec = json_string_value(json_object_get(o, "ec"));
        json_t *dr = json_object_get(o, "drives");
        if (!ec || !parse_ec(ec, &s->k, &s->m))
            return fail(err, errlen, "set %d: bad or missing \"ec\" (want K+M)", i);
        if (!json_is_array(dr) || json_array_size(dr) != (size_t)(s->k + s->m))
            return fail(err, errlen, "set %d: \"drives\" must list k+m = %d drives", i,
                        s->k + s->m);
        for (int j = 0; j < s->k + s->m; j++) {
            const char *name = json_string_value(json_array_get(dr, (size_t)j));
            char node[CMAP_MAX_ID + 2];
            int drive;
            char tail;
            const char *slash = name ? strrchr(name, '/') : NULL;
            if (!slash || (size_t)(slash - name) > CMAP_MAX_ID ||
                sscanf(slash + 1, "%d%c", &drive, &tail) != 1)
                return fail(err, errlen, "set %d: drive %d is not NODE/NUMBER", i, j);
            memcpy(node, name, (size_t)(slash - name));
            node[slash - name] = 0;
            int ni = cmap_node_index(m, node);
            if (ni < 0) return fail(err, errlen, "set %d: drive %s: no node %s", i, name, node);
            if (drive < 0 || drive >= m->nodes[ni].drives)
                return fail(err, errlen, "set %d: node %s has no drive %d", i, node, drive);
            for (int a = 0; a <= i; a++)
                for (int b = 0; b < (a == i ? j : m->sets[a].k + m->sets[a].m); b++)
                    if (m->sets[a].d[b].node == ni && m->sets[a].d[b].drive == drive)
                        return fail(err, errlen, "drive %s is in two places", name);
            s->d[j] = (cmap_drive_t){ni, drive};
        }
    }
    return 0;
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
    json_t *sets = json_object_get(root, "sets");
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
    if (!rc)
        rc = sets ? parse_sets(sets, out, err, errlen)
                  : auto_set(out, json_object_get(root, "ec"), err, errlen);
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

void cmap_free(cmap_t *m)
{
    free(m->nodes);
    free(m->sets);
    memset(m, 0, sizeof(*m));
}
