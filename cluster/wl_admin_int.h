/*
 * wl_admin_int.h: what wl-admin's files share.
 *
 *   wl_admin.c      the commands, the map in etcd (load, and edit: a
 *                   compare-and-swap of the edited map under a new epoch),
 *                   and what asks the nodes (status, pool weigh and
 *                   remove, drive replace)
 *   wl_admin_map.c  the edits of the map document that edit() applies
 *
 * Each edit is an int (*)(json_t *doc, void *arg) for edit(): it changes
 * doc in place and returns 0, or 1 or 2 (wl-admin's exit status) with a
 * line on stderr saying why; edit() then checks and stores the result.
 */
#ifndef WL_WL_ADMIN_INT_H
#define WL_WL_ADMIN_INT_H

#include <jansson.h>
#include <stdint.h>

/* node add, node remove, map set (arg of their edits). */
typedef struct {
    const char *id, *s3, *proto;
    long drives;
    json_t *replacement;
} node_edit_t;

/* pool add, drain, activate, weight, weigh, remove (arg of their edits). */
typedef struct {
    const char *id, *ec, *nodes;
    long weight;      /* 0: as it is (a new pool: 1) */
    int state;        /* -1: as it is, 0 active, 1 draining, 2 removed */
    uint32_t *weighs; /* pool weigh: a weight per pool, in order */
    int nweighs;
} pool_edit_t;

/* node add: node id, s3, proto, drives (a map without "sets" gets its pools pinned first). */
int admin__add_node(json_t *doc, void *arg);
/* node remove: node id (a set that names its drives then fails the check). */
int admin__remove_node(json_t *doc, void *arg);
/* pool add: id, nodes, ec, weight. */
int admin__add_pool(json_t *doc, void *arg);
/* pool drain/activate/remove (state) and weight: id, state, weight. */
int admin__set_pool(json_t *doc, void *arg);
/* pool weigh: weighs, a weight per pool in map order (1 when the pools changed meanwhile). */
int admin__weigh_pools(json_t *doc, void *arg);
/* map set: the document becomes replacement. */
int admin__replace_map(json_t *doc, void *arg);

#endif
