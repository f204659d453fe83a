/*
 * wl_range: whole objects read in parallel ranged parts (libwarmlake). The
 * first part (part_size bytes from 0) tells the size and the ETag; the
 * others run as tasks on the client's threads, each into its own slice of
 * the caller's buffer (or pwrite to a file at its offset), and each must
 * carry the first part's ETag: an object replaced mid-read fails instead
 * of mixing versions. A task does its request alone and records its result
 * in its own struct; the caller waits on a group (no task waits for
 * another, so the pool cannot deadlock).
 */
#include "client/wl_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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
    /* If-Match: a server honouring it refuses another version's bytes outright. */
    p->rc = wl__get_ex(p->c, p->bucket, p->key, p->off, p->len, 0, p->etag[0] ? p->etag : NULL, dst,
                       (size_t)p->len, &got, &st, &p->err);
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
        rc = wl__get_ex(c, bucket, key, 0, P, 1, NULL, buf, cap, &first, &st, err);
    } else {
        tmp = malloc((size_t)P);
        if (!tmp) return wl__fail(err, WL_ENOMEM, "out of memory");
        rc = wl__get_ex(c, bucket, key, 0, P, 1, NULL, tmp, (size_t)P, &first, &st, err);
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
    if (buf && c->cfg.verify_get && wl__md5_like(st.etag)) {
        /* The parts all carried this ETag; together they must hash to it. */
        char md5[33];
        rc = wl__md5(buf, NULL, NULL, st.size, md5);
        if (rc) return wl__fail(err, rc, "out of memory");
        if (strcasecmp(md5, st.etag) != 0)
            return wl__fail(err, WL_ECORRUPT, "%s/%s: bytes hash to %s, ETag %s", bucket, key, md5,
                            st.etag);
    }
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
