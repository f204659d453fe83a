/*
 * obj_list.c: listing a bucket's objects (room of the object layer; map in
 * obj_int.h). Every store holds a head of every key, so one store's ordered
 * index lists the bucket; each key it yields is resolved to its newest head
 * over the set (obj_stat), delete markers skipped.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdlib.h>

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_list_fn fn;
    void *arg;
    uint32_t shard; /* the store being listed holds heads with this shard index */
    char *last;     /* the last key handed to fn: a store that fails resumes after it */
    int err;        /* a head that could not be read: the listing cannot go on */
} list_t;

static int list_head(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    list_t *l = arg;
    obj_info_t info;
    (void)st;
    /* Each store holds one head per key; the listed store's own stands for all. */
    if (id->version[0] || id->shard != l->shard) return 0;
    int rc = obj_stat(l->s, l->bucket, id->key, &info);
    if (rc == ERR_NOT_FOUND) return 0; /* deleted */
    if (rc) {
        l->err = rc;
        return 1;
    }
    free(l->last);
    l->last = xstrdup(id->key);
    return l->fn(l->arg, id->key, &info);
}

int obj_list(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
             obj_list_fn fn, void *arg)
{
    list_t l = {s, bucket, fn, arg, 0, NULL, 0};
    int rc = ERR_UNRECOVERABLE;
    /*
     * One store lists (heads are on every store); when it fails mid-way the
     * next one goes on after the last key delivered, so nothing is skipped
     * or repeated. Only when more than m stores fail is the listing lost.
     */
    for (int i = 0, failed = 0; i < s->n; i++) {
        l.shard = (uint32_t)i;
        l.err = 0;
        rc = s->st[i].ops->list(s->st[i].ctx, bucket, prefix, l.last ? l.last : after, list_head,
                                &l);
        if (l.err) {
            rc = l.err;
            break;
        }
        if (rc >= 0 || rc == ERR_INVAL) break;
        log_warn("event=list_store_failed shard=%d bucket=%s err=%s", i, bucket, err_name(rc));
        if (++failed > s->m) {
            rc = ERR_UNRECOVERABLE;
            break;
        }
    }
    free(l.last);
    return rc;
}
