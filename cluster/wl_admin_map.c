/*
 * wl_admin_map.c: the edits of the cluster map's JSON document that
 * wl-admin's commands make (node add/remove, pool add/drain/activate/
 * weight/weigh/remove, map set): each changes the document in place and
 * leaves the rest to wl_admin.c's edit(), which stores it under a new epoch
 * once the nodes' own parser (cmap_parse) takes it. Pure functions of the
 * document: no etcd, no node asked.
 */
#include "cluster/wl_admin_int.h"

#include "cluster/map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pin_pools(json_t *doc);

int admin__add_node(json_t *doc, void *arg)
{
    node_edit_t *e = arg;
    /* An automatic layout would take the new node's drives: the sets would change under the
       data they hold. Written out first (pool p0 of its sets, drive by drive). */
    int rc = json_object_get(doc, "sets") ? 0 : pin_pools(doc);
    if (rc) return rc;
    json_t *nodes = json_object_get(doc, "nodes");
    json_array_append_new(nodes, json_pack("{s:s,s:s,s:s,s:i}", "id", e->id, "s3", e->s3, "proto",
                                           e->proto, "drives", (int)e->drives));
    return 0;
}

int admin__remove_node(json_t *doc, void *arg)
{
    node_edit_t *e = arg;
    json_t *nodes = json_object_get(doc, "nodes"), *n;
    size_t i;
    json_array_foreach(nodes, i, n)
    {
        if (strcmp(json_string_value(json_object_get(n, "id")) ?: "", e->id) != 0) continue;
        json_array_remove(nodes, i);
        return 0; /* a set that names its drives fails the check: refused */
    }
    fprintf(stderr, "wl-admin: no node %s in the map\n", e->id);
    return 2;
}

/* ---- pools ---- */

/*
 * A map without "pools" is one pool of its sets: written out as such, its
 * sets named drive by drive (an automatic layout pinned: a pool added
 * later must not change it).
 */
static int pin_pools(json_t *doc)
{
    if (json_object_get(doc, "pools")) return 0;
    char *text = json_dumps(doc, JSON_COMPACT), err[300];
    cmap_t m;
    int rc = cmap_parse(text, strlen(text), &m, err, sizeof(err));
    free(text);
    if (rc) {
        fprintf(stderr, "wl-admin: the stored map does not parse: %s\n", err);
        return 2;
    }
    json_t *sets = json_array();
    for (int j = 0; j < m.nsets; j++) {
        char ec[32];
        snprintf(ec, sizeof(ec), "%d+%d", m.sets[j].k, m.sets[j].m);
        json_t *dr = json_array();
        for (int i = 0; i < m.sets[j].k + m.sets[j].m; i++) {
            char name[CMAP_MAX_ID + 16];
            snprintf(name, sizeof(name), "%s/%d", m.nodes[m.sets[j].d[i].node].id,
                     m.sets[j].d[i].drive);
            json_array_append_new(dr, json_string(name));
        }
        json_array_append_new(sets, json_pack("{s:s,s:o}", "ec", ec, "drives", dr));
    }
    cmap_free(&m);
    json_object_del(doc, "sets");
    json_object_del(doc, "ec");
    json_object_set_new(doc, "pools", json_pack("[{s:s,s:o}]", "id", "p0", "sets", sets));
    return 0;
}

static json_t *find_pool(json_t *doc, const char *id)
{
    json_t *p;
    size_t i;
    json_array_foreach(json_object_get(doc, "pools"), i, p)
    {
        if (strcmp(json_string_value(json_object_get(p, "id")) ?: "", id) == 0) return p;
    }
    return NULL;
}

int admin__add_pool(json_t *doc, void *arg)
{
    pool_edit_t *e = arg;
    int rc = pin_pools(doc);
    if (rc) return rc;
    if (find_pool(doc, e->id)) {
        fprintf(stderr, "wl-admin: pool %s is in the map already\n", e->id);
        return 2;
    }
    json_t *nodes = json_array(), *pool = json_pack("{s:s}", "id", e->id);
    char *list = strdup(e->nodes), *save = NULL;
    if (!list) abort();
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(nodes, json_string(t));
    free(list);
    if (e->ec) json_object_set_new(pool, "ec", json_string(e->ec));
    json_object_set_new(pool, "nodes", nodes);
    if (e->weight) json_object_set_new(pool, "weight", json_integer(e->weight));
    json_array_append_new(json_object_get(doc, "pools"), pool);
    return 0; /* a node not in the map, or a drive some pool has, fails the check: refused */
}

int admin__set_pool(json_t *doc, void *arg)
{
    pool_edit_t *e = arg;
    int rc = pin_pools(doc);
    if (rc) return rc;
    json_t *pool = find_pool(doc, e->id);
    if (!pool) {
        fprintf(stderr, "wl-admin: no pool %s in the map\n", e->id);
        return 2;
    }
    const char *was = json_string_value(json_object_get(pool, "state"));
    if (e->state >= 0 && was && strcmp(was, "removed") == 0) {
        /* Its drives kept nothing up to date since: it cannot serve again. */
        fprintf(stderr, "wl-admin: pool %s was removed; add its nodes as a new pool instead\n",
                e->id);
        return 2;
    }
    if (e->state == CMAP_POOL_REMOVED && !(was && strcmp(was, "draining") == 0)) {
        fprintf(stderr, "wl-admin: pool %s is not draining any more\n", e->id);
        return 2; /* (activated since it was found drained) */
    }
    if (e->state >= 0)
        json_object_set_new(pool, "state",
                            json_string(e->state == CMAP_POOL_REMOVED ? "removed"
                                        : e->state                    ? "draining"
                                                                      : "active"));
    if (e->weight) json_object_set_new(pool, "weight", json_integer(e->weight));
    return 0;
}

int admin__weigh_pools(json_t *doc, void *arg)
{
    pool_edit_t *e = arg;
    int rc = pin_pools(doc);
    if (rc) return rc;
    json_t *p;
    size_t i;
    if (json_array_size(json_object_get(doc, "pools")) != (size_t)e->nweighs) {
        fprintf(stderr, "wl-admin: the pools changed while they were weighed; try again\n");
        return 1;
    }
    json_array_foreach(json_object_get(doc, "pools"), i, p)
    {
        json_object_set_new(p, "weight", json_integer(e->weighs[i]));
    }
    return 0;
}

int admin__replace_map(json_t *doc, void *arg)
{
    node_edit_t *e = arg;
    json_object_clear(doc);
    json_object_update(doc, e->replacement);
    return 0;
}
