/*
 * wl_prefetch: the prefetch queue (libwarmlake): GETs pushed in order start
 * as tasks while fewer than depth run and the bytes held stay under the
 * memory bound (entries start in push order, so the oldest is never kept
 * waiting by younger ones); the consumer takes them in push order.
 */
#include "client/wl_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PF_QUEUED, PF_RUNNING, PF_DONE };

typedef struct pf_entry {
    wl_task_t task;
    struct wl_prefetch *pf;
    struct pf_entry *next;
    char *key;
    char *etag; /* If-Match, or NULL */
    uint64_t off, len;
    void *tag;
    char *ubuf; /* the caller's buffer (wl_prefetch_push_into), or NULL: malloc'd here */
    size_t ucap;
    int state;
    size_t reserved; /* bytes counted against mem_bound */
    char *data;
    size_t dlen;
    int code;
    wl_error_t err; /* the failure's details */
} pf_entry_t;

struct wl_prefetch {
    wl_client_t *c;
    char *bucket;
    int depth;
    size_t mem_bound;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pf_entry_t *head, *tail;
    int running;
    size_t held; /* reserved bytes of running and fetched entries */
};

#define PF_GUESS (1u << 20) /* reserved for a whole object until its size is known */

static void pf_kick(wl_prefetch_t *pf);

static void pf_run(wl_task_t *t)
{
    pf_entry_t *e = (pf_entry_t *)t;
    wl_prefetch_t *pf = e->pf;
    wl_error_t err = {0};
    uint64_t size = e->len;
    int rc = 0;
    if (e->ubuf) {
        /* The caller's buffer: no HEAD for a whole object, the GET fails if it is larger. */
        size = e->len ? e->len : e->ucap;
        if (size > e->ucap)
            rc = wl__fail(&err, WL_ETOOLARGE, "%s: %llu bytes asked, buffer %zu", e->key,
                          (unsigned long long)size, e->ucap);
    } else if (!size) {
        wl_stat_t st;
        rc = wl__stat(pf->c, pf->bucket, e->key, &st, &err);
        size = st.size;
    }
    char *data = NULL;
    size_t got = 0;
    if (rc == 0) {
        data = e->ubuf ? e->ubuf : malloc(size ? (size_t)size : 1);
        if (!data) rc = WL_ENOMEM;
    }
    if (rc == 0)
        rc = wl__get_ex(pf->c, pf->bucket, e->key, e->off, e->len, 0, e->etag, data, (size_t)size,
                        &got, NULL, &err);
    if (rc) {
        if (!e->ubuf) free(data);
        data = NULL;
        got = 0;
    }
    pthread_mutex_lock(&pf->mu);
    pf->held -= e->reserved;
    e->reserved = data ? (size_t)size : 0;
    pf->held += e->reserved;
    e->data = data;
    e->dlen = got;
    e->code = rc;
    e->err = err;
    e->state = PF_DONE;
    pf->running--;
    pf_kick(pf);
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

/* Start queued entries while the depth and the memory bound allow (pf->mu held). */
static void pf_kick(wl_prefetch_t *pf)
{
    for (pf_entry_t *e = pf->head; e && pf->running < pf->depth; e = e->next) {
        if (e->state != PF_QUEUED) continue;
        size_t want = e->len ? (size_t)e->len : e->ubuf ? e->ucap : PF_GUESS;
        if (pf->held > 0 && pf->held + want > pf->mem_bound) break;
        e->state = PF_RUNNING;
        e->reserved = want;
        pf->held += want;
        pf->running++;
        wl__submit_task(pf->c, &e->task);
    }
}

int wl_prefetch_new(wl_client_t *c, const char *bucket, int depth, size_t mem_bound,
                    wl_prefetch_t **out)
{
    wl_error_t err = {0};
    *out = NULL;
    wl_prefetch_t *pf = calloc(1, sizeof(*pf));
    if (!pf || !(pf->bucket = strdup(bucket))) {
        free(pf);
        return wl__ret(&err, wl__fail(&err, WL_ENOMEM, "out of memory"));
    }
    pf->c = c;
    pf->depth = depth > 0 ? depth : 1;
    pf->mem_bound = mem_bound ? mem_bound : (size_t)256 << 20;
    pthread_mutex_init(&pf->mu, NULL);
    pthread_cond_init(&pf->cv, NULL);
    *out = pf;
    return wl__ret(&err, 0);
}

int wl_prefetch_push(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len, void *tag)
{
    return wl_prefetch_push_if(pf, key, off, len, NULL, tag);
}

static int push(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len, const char *etag,
                void *ubuf, size_t ucap, void *tag)
{
    wl_error_t err = {0};
    if (len == 0 && off != 0) return wl__ret(&err, wl__fail(&err, WL_EINVAL, "off without len"));
    pf_entry_t *e = calloc(1, sizeof(*e));
    if (!e || !(e->key = strdup(key)) || (etag && *etag && !(e->etag = strdup(etag)))) {
        if (e) free(e->key);
        free(e);
        return wl__ret(&err, wl__fail(&err, WL_ENOMEM, "out of memory"));
    }
    e->task.fn = pf_run;
    e->pf = pf;
    e->off = off;
    e->len = len;
    e->tag = tag;
    e->ubuf = ubuf;
    e->ucap = ucap;
    pthread_mutex_lock(&pf->mu);
    if (pf->tail)
        pf->tail->next = e;
    else
        pf->head = e;
    pf->tail = e;
    pf_kick(pf);
    pthread_mutex_unlock(&pf->mu);
    return wl__ret(&err, 0);
}

int wl_prefetch_push_if(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len,
                        const char *etag, void *tag)
{
    return push(pf, key, off, len, etag, NULL, 0, tag);
}

int wl_prefetch_push_into(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len,
                          const char *etag, void *buf, size_t cap, void *tag)
{
    if (!buf && cap) {
        wl_error_t err = {0};
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "no buffer"));
    }
    return push(pf, key, off, len, etag, buf ? buf : (void *)"", cap, tag);
}

int wl_prefetch_next(wl_prefetch_t *pf, void **data, size_t *len, void **tag)
{
    wl_error_t err = {0};
    *data = NULL;
    *len = 0;
    pthread_mutex_lock(&pf->mu);
    pf_entry_t *e = pf->head;
    if (!e) {
        pthread_mutex_unlock(&pf->mu);
        return wl__ret(&err, wl__fail(&err, WL_EINVAL, "nothing queued"));
    }
    while (e->state != PF_DONE)
        pthread_cond_wait(&pf->cv, &pf->mu);
    pf->head = e->next;
    if (!pf->head) pf->tail = NULL;
    pf->held -= e->reserved;
    pf_kick(pf);
    pthread_mutex_unlock(&pf->mu);
    *data = e->data;
    *len = e->dlen;
    if (tag) *tag = e->tag;
    int rc = e->code;
    if (rc) {
        err = e->err;
        if (!err.message[0])
            wl__fail(&err, rc, "GET %s/%s: %s", pf->bucket, e->key, wl_strerror(rc));
    }
    free(e->key);
    free(e->etag);
    free(e);
    return wl__ret(&err, rc);
}

void wl_prefetch_free(wl_prefetch_t *pf)
{
    if (!pf) return;
    pthread_mutex_lock(&pf->mu);
    /* Nothing more starts; running entries finish. */
    pf->depth = 0;
    while (pf->running > 0)
        pthread_cond_wait(&pf->cv, &pf->mu);
    pthread_mutex_unlock(&pf->mu);
    for (pf_entry_t *e = pf->head, *n; e; e = n) {
        n = e->next;
        if (!e->ubuf) free(e->data);
        free(e->key);
        free(e->etag);
        free(e);
    }
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    free(pf->bucket);
    free(pf);
}

void wl_free(void *p)
{
    free(p);
}
