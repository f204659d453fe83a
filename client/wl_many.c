/*
 * wl_many: many objects at once (libwarmlake): single GETs as tasks on the
 * client's threads, or warmlake's batch GET (a few POST ?batch-get
 * requests, each a task whose response stream feeds batch.c's parser
 * straight into the items' buffers). A server without the extension is
 * remembered; entries a cut or corrupt stream did not deliver are fetched
 * singly.
 */
#include "client/batch.h"
#include "client/wl_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    wl_task_t task;
    wl_client_t *c;
    wl_group_t *g;
    const char *bucket;
    wl_item_t *it;
} get_one_t;

static void item_result(wl_item_t *it, int rc, const wl_error_t *err)
{
    it->code = rc;
    it->http_status = rc ? err->http_status : it->http_status;
    snprintf(it->s3_code, sizeof(it->s3_code), "%s", rc ? err->s3_code : "");
}

static void get_one_run(wl_task_t *t)
{
    get_one_t *p = (get_one_t *)t;
    wl_item_t *it = p->it;
    atomic_fetch_add(&p->c->n_single, 1);
    wl_stat_t st;
    wl_error_t err = {0};
    size_t got = 0;
    int rc = wl__get(p->c, p->bucket, it->key, it->off, it->len, it->buf, it->cap, &got, &st, &err);
    it->got = got;
    it->object_size = rc == 0 ? st.size : 0;
    it->http_status = rc == 0 ? (it->len ? 206 : 200) : 0;
    item_result(it, rc, &err);
    wl__group_done(p->g);
}

/* GET items[idx[0..n)] (all of them when idx is NULL); the number that failed, or WL_ENOMEM. */
static int get_many(wl_client_t *c, const char *bucket, wl_item_t *items, const size_t *idx,
                    size_t n)
{
    if (n == 0) return 0;
    get_one_t *t = calloc(n, sizeof(*t));
    if (!t) return WL_ENOMEM;
    wl_group_t g;
    wl__group_init(&g);
    for (size_t i = 0; i < n; i++) {
        t[i] = (get_one_t){.task.fn = get_one_run,
                           .c = c,
                           .g = &g,
                           .bucket = bucket,
                           .it = &items[idx ? idx[i] : i]};
        wl__submit(c, &g, &t[i].task);
    }
    wl__group_wait(&g);
    wl__group_destroy(&g);
    free(t);
    int failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += items[idx ? idx[i] : i].code != 0;
    return failed;
}

int wl_get_many(wl_client_t *c, const char *bucket, wl_item_t *items, size_t n)
{
    wl_error_t err = {0};
    int rc = get_many(c, bucket, items, NULL, n);
    if (rc < 0) return wl__ret(&err, wl__fail(&err, rc, "out of memory"));
    wl__ret(&err, 0);
    return rc;
}

/* ---- many objects: batch GET ---- */

#define BATCH_MAX_ENTRIES 1000
#define BATCH_MIN_ENTRIES 16

typedef struct {
    wl_task_t task;
    wl_client_t *c;
    wl_group_t *g;
    const char *bucket;
    wl_item_t *items; /* this batch's first item */
    uint8_t *done;    /* per item: delivered by the batch */
    size_t n;
    batch_parser_t *parser;
    int prc;         /* parser result (sticky) */
    int unsupported; /* the server lacks the extension */
    int rc;          /* a failure of the whole batch (403, memory) */
    wl_error_t err;
} batch_task_t;

static int bt_begin(void *arg, const batch_entry_t *e)
{
    batch_task_t *b = arg;
    wl_item_t *it = &b->items[e->index];
    it->object_size = e->object_size;
    it->http_status = e->status;
    it->got = 0;
    return 0;
}

static int bt_data(void *arg, const batch_entry_t *e, uint64_t off, const void *p, size_t n)
{
    batch_task_t *b = arg;
    wl_item_t *it = &b->items[e->index];
    /* Too large for the buffer: counted, not copied; the entry fails at its end. */
    if (off + n <= it->cap) memcpy((char *)it->buf + off, p, n);
    return 0;
}

static int bt_end(void *arg, const batch_entry_t *e)
{
    batch_task_t *b = arg;
    wl_item_t *it = &b->items[e->index];
    if (e->status == 200 && b->c->cfg.verify_get && e->payload_len <= it->cap &&
        wl__md5_like(e->etag)) {
        char md5[33];
        if (wl__md5(it->buf, NULL, NULL, e->payload_len, md5) != 0 || strcasecmp(md5, e->etag) != 0)
            return 0; /* not done: fetched again singly (and checked again) */
    }
    if (e->status == 200 || e->status == 206) {
        if (e->payload_len > it->cap) {
            it->code = WL_ETOOLARGE;
            it->s3_code[0] = 0;
        } else {
            it->code = 0;
            it->got = (size_t)e->payload_len;
            it->s3_code[0] = 0;
            atomic_fetch_add(&b->c->n_in, e->payload_len);
            if (b->c->cfg.on_bytes) b->c->cfg.on_bytes(b->c->cfg.on_bytes_arg, e->payload_len);
        }
    } else {
        it->code = wl__status_code(e->status);
        it->got = 0;
        snprintf(it->s3_code, sizeof(it->s3_code), "%s", e->error_code);
    }
    b->done[e->index] = 1;
    return 0;
}

static void bt_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
    batch_task_t *b = arg;
    if (b->prc < 0) return;
    int rc = batch_feed(b->parser, buf, len);
    if (rc != 0) b->prc = rc;
}

static void batch_run(wl_task_t *t)
{
    batch_task_t *b = (batch_task_t *)t;
    const char **keys = malloc(b->n * sizeof(char *));
    uint64_t *offs = malloc(b->n * sizeof(uint64_t)), *lens = malloc(b->n * sizeof(uint64_t));
    char *body = NULL;
    size_t body_len = 0;
    batch_cb_t cb = {bt_begin, bt_data, bt_end, b};
    if (!keys || !offs || !lens || batch_parser_new(&cb, (uint32_t)b->n, &b->parser)) {
        b->rc = wl__fail(&b->err, WL_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < b->n; i++) {
        keys[i] = b->items[i].key;
        offs[i] = b->items[i].off;
        lens[i] = b->items[i].len;
    }
    body = batch_request_body(keys, offs, lens, b->n, &body_len);
    if (!body) {
        b->rc = wl__fail(&b->err, WL_ENOMEM, "out of memory");
        goto out;
    }
    char path[WL_PATH_MAX];
    if (wl__path(b->bucket, NULL, path)) {
        b->rc = wl__fail(&b->err, WL_EINVAL, "bad bucket name");
        goto out;
    }
    const char *hdrs[] = {"content-type", "application/xml", NULL};
    wl_call_t call = {.req = {.method = "POST",
                              .path = path,
                              .query = "batch-get",
                              .headers = hdrs,
                              .body = body,
                              .body_len = body_len,
                              .sink = bt_sink,
                              .sink_arg = b},
                      .no_retry = 1};
    atomic_fetch_add(&b->c->n_batch, 1);
    int rc = wl__request(b->c, &call, &b->err);
    int st = call.resp.status;
    uint32_t delivered = 0;
    for (size_t i = 0; i < b->n; i++)
        delivered += b->done[i];
    atomic_fetch_add(&b->c->n_batch_entries, delivered);
    if (rc && st == 403) {
        b->rc = rc;
    } else if (rc && ((st >= 400 && st < 500) || st == 501) &&
               strcmp(b->err.s3_code, "NoSuchBucket") != 0) {
        /* A server without the extension (a missing bucket is no sign of that: the single
           GETs report it per entry). */
        b->unsupported = 1;
    }
    /* Anything else (a cut stream, a corrupt frame, a 5xx) leaves entries undone: they are
       fetched singly afterwards. */
out:
    batch_parser_free(b->parser);
    b->parser = NULL;
    free(keys);
    free(offs);
    free(lens);
    free(body);
    wl__group_done(b->g);
}

int wl_get_batch(wl_client_t *c, const char *bucket, wl_item_t *items, size_t n)
{
    wl_error_t err = {0};
    if (c->cfg.no_batch || atomic_load(&c->batch_unsupported) || n == 0)
        return wl_get_many(c, bucket, items, n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].len == 0 && items[i].off != 0)
            return wl__ret(&err, wl__fail(&err, WL_EINVAL, "item %zu: off without len", i));
        items[i].code = WL_EIO;
        items[i].got = 0;
    }
    size_t per = (n + (size_t)c->cfg.threads - 1) / (size_t)c->cfg.threads;
    if (per < BATCH_MIN_ENTRIES) per = BATCH_MIN_ENTRIES;
    if (per > BATCH_MAX_ENTRIES) per = BATCH_MAX_ENTRIES;
    size_t nb = (n + per - 1) / per;
    batch_task_t *bt = calloc(nb, sizeof(*bt));
    uint8_t *done = calloc(n, 1);
    size_t *rest = malloc(n * sizeof(size_t));
    int rc = 0;
    if (!bt || !done || !rest) {
        rc = wl__fail(&err, WL_ENOMEM, "out of memory");
        goto out;
    }
    wl_group_t g;
    wl__group_init(&g);
    for (size_t i = 0; i < nb; i++) {
        size_t first = i * per;
        bt[i] = (batch_task_t){.task.fn = batch_run,
                               .c = c,
                               .g = &g,
                               .bucket = bucket,
                               .items = items + first,
                               .done = done + first,
                               .n = n - first < per ? n - first : per};
        wl__submit(c, &g, &bt[i].task);
    }
    wl__group_wait(&g);
    wl__group_destroy(&g);
    for (size_t i = 0; i < nb; i++) {
        if (bt[i].unsupported) atomic_store(&c->batch_unsupported, 1);
        if (bt[i].rc && !rc) {
            err = bt[i].err;
            rc = bt[i].rc;
        }
    }
    if (rc) goto out;
    /* Entries no batch delivered (no extension, a cut stream): single GETs. */
    size_t nr = 0;
    for (size_t i = 0; i < n; i++)
        if (!done[i]) rest[nr++] = i;
    rc = get_many(c, bucket, items, rest, nr);
    if (rc < 0) {
        wl__fail(&err, rc, "out of memory");
        goto out;
    }
    rc = 0;
    for (size_t i = 0; i < n; i++)
        rc += items[i].code != 0;
out:
    free(bt);
    free(done);
    free(rest);
    if (rc < 0) return wl__ret(&err, rc);
    wl__ret(&err, 0);
    return rc;
}
