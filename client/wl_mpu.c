/*
 * wl_mpu: PUT of a buffer or a file (libwarmlake): one request up to
 * part_size, else a multipart upload whose parts run as tasks on the
 * client's threads (each part's MD5 checked against its ETag), completed in
 * order, or aborted on any failure so no parts are left behind.
 */
#include "client/wl_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    /* A part of a buffer is hashed and sent from where it lies; a file's through src_fill. */
    if (p->src.buf)
        p->rc = wl__put_one(p->c, p->path, query, p->src.buf + p->src.base, NULL, NULL, p->len,
                            NULL, p->etag, &p->err);
    else
        p->rc = wl__put_one(p->c, p->path, query, NULL, src_fill, &p->src, p->len, NULL, p->etag,
                            &p->err);
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
        rc = wl__body_result(done.body_copy, done.body_copy_len, "complete", path, etag, err);
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
