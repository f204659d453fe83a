/*
 * wl_par: the parallel operations of libwarmlake, run as tasks on the
 * client's threads: whole-object reads in ranged parts, multipart uploads,
 * many-object reads (single GETs or warmlake's batch GET) and the prefetch
 * queue. A task does its requests alone (wl__request) and records its
 * result in its own struct; the caller waits on a group and then reads the
 * results, so no task ever waits for another (no pool deadlock).
 */
#include "client/batch.h"
#include "client/wl_int.h"

#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- whole-object GET in parts ---- */

typedef struct {
    wl_task_t task;
    wl_client_t *c;
    wl_group_t *g;
    const char *bucket, *key;
    const char *etag; /* the first part's */
    uint64_t off, len;
    char *buf; /* buffer mode: the caller's buffer (base) */
    int fd;    /* fd mode: -1 in buffer mode */
    int rc;
    wl_error_t err;
} get_part_t;

static void get_part_run(wl_task_t *t)
{
    get_part_t *p = (get_part_t *)t;
    char *dst = p->buf ? p->buf + p->off : malloc((size_t)p->len);
    wl_stat_t st;
    size_t got = 0;
    if (!dst) {
        p->rc = wl__fail(&p->err, WL_ENOMEM, "out of memory");
        goto out;
    }
    p->rc =
        wl__get(p->c, p->bucket, p->key, p->off, p->len, dst, (size_t)p->len, &got, &st, &p->err);
    if (p->rc == 0 && strcmp(st.etag, p->etag) != 0)
        p->rc = wl__fail(&p->err, WL_ECORRUPT, "%s/%s changed while read (ETag %s, then %s)",
                         p->bucket, p->key, p->etag, st.etag);
    if (p->rc == 0 && got != p->len)
        p->rc = wl__fail(&p->err, WL_ECORRUPT, "%s/%s: part at %llu short", p->bucket, p->key,
                         (unsigned long long)p->off);
    for (size_t o = 0; p->rc == 0 && !p->buf && o < got;) {
        ssize_t n = pwrite(p->fd, dst + o, got - o, (off_t)(p->off + o));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            p->rc = wl__fail(&p->err, WL_EIO, "write: %s", strerror(n < 0 ? errno : EIO));
        else
            o += (size_t)n;
    }
out:
    if (!p->buf) free(dst);
    wl__group_done(p->g);
}

/* The parts after the first, in parallel; buf (buffer mode) or fd. */
static int get_rest(wl_client_t *c, const char *bucket, const char *key, const wl_stat_t *st,
                    uint64_t from, char *buf, int fd, wl_error_t *err)
{
    uint64_t P = c->cfg.part_size;
    size_t n = (size_t)((st->size - from + P - 1) / P);
    if (n == 0) return 0;
    get_part_t *parts = calloc(n, sizeof(*parts));
    if (!parts) return wl__fail(err, WL_ENOMEM, "out of memory");
    wl_group_t g;
    wl__group_init(&g);
    for (size_t i = 0; i < n; i++) {
        get_part_t *p = &parts[i];
        uint64_t off = from + i * P;
        *p = (get_part_t){.task.fn = get_part_run,
                          .c = c,
                          .g = &g,
                          .bucket = bucket,
                          .key = key,
                          .etag = st->etag,
                          .off = off,
                          .len = st->size - off < P ? st->size - off : P,
                          .buf = buf,
                          .fd = fd};
        wl__submit(c, &g, &p->task);
    }
    wl__group_wait(&g);
    wl__group_destroy(&g);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        if (parts[i].rc) {
            *err = parts[i].err;
            rc = parts[i].rc;
        }
    free(parts);
    return rc;
}

static int get_whole(wl_client_t *c, const char *bucket, const char *key, char *buf, size_t cap,
                     int fd, size_t *got, wl_stat_t *st_out, wl_error_t *err)
{
    uint64_t P = c->cfg.part_size;
    wl_stat_t st;
    size_t first = 0;
    int rc;
    char *tmp = NULL;
    if (got) *got = 0;
    if (buf) {
        rc = wl__get_ex(c, bucket, key, 0, P, 1, buf, cap, &first, &st, err);
    } else {
        tmp = malloc((size_t)P);
        if (!tmp) return wl__fail(err, WL_ENOMEM, "out of memory");
        rc = wl__get_ex(c, bucket, key, 0, P, 1, tmp, (size_t)P, &first, &st, err);
    }
    if (rc == WL_ERANGE) /* an empty object has no byte 0 */
        rc =
            wl__get(c, bucket, key, 0, 0, buf ? buf : tmp, buf ? cap : (size_t)P, &first, &st, err);
    for (size_t o = 0; rc == 0 && tmp && o < first;) {
        ssize_t n = pwrite(fd, tmp + o, first - o, (off_t)o);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            rc = wl__fail(err, WL_EIO, "write: %s", strerror(n < 0 ? errno : EIO));
        else
            o += (size_t)n;
    }
    free(tmp);
    if (rc) return rc;
    if (buf && st.size > cap)
        return wl__fail(err, WL_ETOOLARGE, "%s/%s: %llu bytes, buffer %zu", bucket, key,
                        (unsigned long long)st.size, cap);
    if (first < st.size) rc = get_rest(c, bucket, key, &st, first, buf, buf ? -1 : fd, err);
    if (rc) return rc;
    if (got) *got = (size_t)st.size;
    if (st_out) *st_out = st;
    return 0;
}

int wl_get_parallel(wl_client_t *c, const char *bucket, const char *key, void *buf, size_t cap,
                    size_t *got, wl_stat_t *st)
{
    wl_error_t err = {0};
    if (!buf && cap) return wl__ret(&err, wl__fail(&err, WL_EINVAL, "no buffer"));
    char dummy;
    return wl__ret(&err, get_whole(c, bucket, key, buf ? buf : &dummy, cap, -1, got, st, &err));
}

int wl_get_fd(wl_client_t *c, const char *bucket, const char *key, int fd, wl_stat_t *st)
{
    wl_error_t err = {0};
    return wl__ret(&err, get_whole(c, bucket, key, NULL, 0, fd, NULL, st, &err));
}

/* ---- PUT, multipart ---- */

/* Where upload bytes come from: a buffer or a file. */
typedef struct {
    const char *buf;
    int fd;
    uint64_t base; /* offset of this part in the source */
    int err;       /* errno of a failed pread */
} src_t;

static void src_fill(void *arg, uint64_t off, void *out, size_t len)
{
    src_t *s = arg;
    if (s->buf) {
        memcpy(out, s->buf + s->base + off, len);
        return;
    }
    size_t o = 0;
    while (o < len) {
        ssize_t n = pread(s->fd, (char *)out + o, len - o, (off_t)(s->base + off + o));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* The request goes out with zeros; the caller fails it afterwards. */
            s->err = n < 0 ? errno : EIO;
            memset((char *)out + o, 0, len - o);
            return;
        }
        o += (size_t)n;
    }
}

typedef struct {
    wl_task_t task;
    wl_client_t *c;
    wl_group_t *g;
    const char *path;
    const char *upload_id; /* encoded */
    int number;
    src_t src;
    uint64_t len;
    char etag[128];
    int rc;
    wl_error_t err;
} put_part_t;

static void put_part_run(wl_task_t *t)
{
    put_part_t *p = (put_part_t *)t;
    char query[1200];
    snprintf(query, sizeof(query), "partNumber=%d&uploadId=%s", p->number, p->upload_id);
    p->rc =
        wl__put_one(p->c, p->path, query, NULL, src_fill, &p->src, p->len, NULL, p->etag, &p->err);
    if (p->rc == 0 && p->src.err)
        p->rc = wl__fail(&p->err, WL_EIO, "read: %s", strerror(p->src.err));
    wl__group_done(p->g);
}

static int multipart(wl_client_t *c, const char *path, const src_t *src, uint64_t size,
                     const char *content_type, char *etag, wl_error_t *err)
{
    uint64_t P = c->cfg.part_size;
    size_t n = (size_t)((size + P - 1) / P);
    if (n > 10000) return wl__fail(err, WL_EINVAL, "more than 10000 parts; raise part_size");
    const char *hdrs[3] = {NULL};
    if (content_type) {
        hdrs[0] = "content-type";
        hdrs[1] = content_type;
    }
    wl_call_t init = {.req = {.method = "POST", .path = path, .query = "uploads", .headers = hdrs},
                      .want_body = 1};
    int rc = wl__request(c, &init, err);
    if (rc) return rc;
    char id[1024] = "", eid[3100];
    s3c_xml_text(init.body_copy ? init.body_copy : "", init.body_copy_len, "UploadId", id,
                 sizeof(id));
    free(init.body_copy);
    if (!id[0] || s3c_encode_query(id, eid, sizeof(eid)) < 0)
        return wl__fail(err, WL_ECORRUPT, "POST %s?uploads: no UploadId", path);

    put_part_t *parts = calloc(n, sizeof(*parts));
    char *body = NULL;
    char q[3200];
    if (!parts) {
        rc = wl__fail(err, WL_ENOMEM, "out of memory");
        goto abort;
    }
    wl_group_t g;
    wl__group_init(&g);
    for (size_t i = 0; i < n; i++) {
        put_part_t *p = &parts[i];
        *p = (put_part_t){.task.fn = put_part_run,
                          .c = c,
                          .g = &g,
                          .path = path,
                          .upload_id = eid,
                          .number = (int)i + 1,
                          .src = *src,
                          .len = size - i * P < P ? size - i * P : P};
        p->src.base = src->base + i * P;
        wl__submit(c, &g, &p->task);
    }
    wl__group_wait(&g);
    wl__group_destroy(&g);
    for (size_t i = 0; i < n; i++)
        if (parts[i].rc) {
            *err = parts[i].err;
            rc = parts[i].rc;
            goto abort;
        }
    size_t cap = 64 + n * 200, o = 0;
    body = malloc(cap);
    if (!body) {
        rc = wl__fail(err, WL_ENOMEM, "out of memory");
        goto abort;
    }
    o += (size_t)snprintf(body + o, cap - o, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(body + o, cap - o,
                              "<Part><PartNumber>%zu</PartNumber><ETag>\"%.100s\"</ETag></Part>",
                              i + 1, parts[i].etag);
    o += (size_t)snprintf(body + o, cap - o, "</CompleteMultipartUpload>");
    snprintf(q, sizeof(q), "uploadId=%s", eid);
    const char *xh[] = {"content-type", "application/xml", NULL};
    wl_call_t done = {.req = {.method = "POST",
                              .path = path,
                              .query = q,
                              .headers = xh,
                              .body = body,
                              .body_len = o},
                      .want_body = 1};
    rc = wl__request(c, &done, err);
    if (rc == 0) {
        /* S3 may answer 200 and still carry an error in the body. */
        char code[64], tag[128];
        const char *b = done.body_copy ? done.body_copy : "";
        s3c_xml_text(b, done.body_copy_len, "Code", code, sizeof(code));
        s3c_xml_text(b, done.body_copy_len, "ETag", tag, sizeof(tag));
        if (code[0]) {
            snprintf(err->s3_code, sizeof(err->s3_code), "%s", code);
            rc = wl__fail(err, WL_ESERVER, "complete %s: %s", path, code);
        } else if (etag) {
            size_t tl = strlen(tag);
            if (tl >= 2 && tag[0] == '"' && tag[tl - 1] == '"')
                snprintf(etag, 128, "%.*s", (int)tl - 2, tag + 1);
            else
                snprintf(etag, 128, "%s", tag);
        }
    }
    free(done.body_copy);
    if (rc == 0) goto out;
abort:;
    /* Parts left behind would hold space until a lifecycle rule found them. The upload's
       own error is what the caller gets; a failed abort is added to its message. */
    wl_error_t abort_err = {0};
    snprintf(q, sizeof(q), "uploadId=%s", eid);
    wl_call_t ab = {.req = {.method = "DELETE", .path = path, .query = q}};
    if (wl__request(c, &ab, &abort_err) != 0) {
        size_t ml = strlen(err->message);
        snprintf(err->message + ml, sizeof(err->message) - ml, "; abort failed too: %s",
                 abort_err.message);
    }
out:
    free(parts);
    free(body);
    return rc;
}

static int put_src(wl_client_t *c, const char *bucket, const char *key, const src_t *src,
                   uint64_t size, const char *content_type, char *etag, wl_error_t *err)
{
    char path[WL_PATH_MAX];
    if (!key || !*key || wl__path(bucket, key, path))
        return wl__fail(err, WL_EINVAL, "bad bucket or key");
    if (size > c->cfg.part_size) return multipart(c, path, src, size, content_type, etag, err);
    src_t s = *src;
    int rc = wl__put_one(c, path, NULL, src->buf, src->buf ? NULL : src_fill, &s, size,
                         content_type, etag, err);
    if (rc == 0 && s.err) rc = wl__fail(err, WL_EIO, "read: %s", strerror(s.err));
    return rc;
}

int wl_put(wl_client_t *c, const char *bucket, const char *key, const void *buf, size_t len,
           const char *content_type, char *etag)
{
    wl_error_t err = {0};
    src_t src = {.buf = buf ? buf : "", .fd = -1};
    return wl__ret(&err, put_src(c, bucket, key, &src, len, content_type, etag, &err));
}

int wl_put_fd(wl_client_t *c, const char *bucket, const char *key, int fd, uint64_t size,
              const char *content_type, char *etag)
{
    wl_error_t err = {0};
    src_t src = {.fd = fd};
    return wl__ret(&err, put_src(c, bucket, key, &src, size, content_type, etag, &err));
}

/* ---- many objects: single GETs ---- */

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

/* ---- prefetch queue ---- */

enum { PF_QUEUED, PF_RUNNING, PF_DONE };

typedef struct pf_entry {
    wl_task_t task;
    struct wl_prefetch *pf;
    struct pf_entry *next;
    char *key;
    uint64_t off, len;
    void *tag;
    int state;
    size_t reserved; /* bytes counted against mem_bound */
    char *data;
    size_t dlen;
    int code;
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
    if (!size) {
        wl_stat_t st;
        rc = wl__stat(pf->c, pf->bucket, e->key, &st, &err);
        size = st.size;
    }
    char *data = NULL;
    size_t got = 0;
    if (rc == 0) {
        data = malloc(size ? (size_t)size : 1);
        if (!data) rc = WL_ENOMEM;
    }
    if (rc == 0)
        rc = wl__get(pf->c, pf->bucket, e->key, e->off, e->len, data, (size_t)size, &got, NULL,
                     &err);
    if (rc) {
        free(data);
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
        size_t want = e->len ? (size_t)e->len : PF_GUESS;
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
    wl_error_t err = {0};
    if (len == 0 && off != 0) return wl__ret(&err, wl__fail(&err, WL_EINVAL, "off without len"));
    pf_entry_t *e = calloc(1, sizeof(*e));
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return wl__ret(&err, wl__fail(&err, WL_ENOMEM, "out of memory"));
    }
    e->task.fn = pf_run;
    e->pf = pf;
    e->off = off;
    e->len = len;
    e->tag = tag;
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
    if (rc) wl__fail(&err, rc, "GET %s/%s: %s", pf->bucket, e->key, wl_strerror(rc));
    free(e->key);
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
        free(e->data);
        free(e->key);
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
