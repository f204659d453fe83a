/*
 * libwarmlake (client/include/warmlake/wl.h) against fake S3 servers run
 * in this process on 127.0.0.1: each checks the SigV4 signature of every
 * request (so the client's signing is verified end to end) and can be told
 * to answer the next requests with 503 SlowDown, a reset connection or a
 * body cut short, to serve batch GET or refuse it, to cut or corrupt a batch
 * stream, or to change an object's ETag under a reader. Also SigV4 against
 * AWS's published test-suite vectors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "client/batch.h"
#include "client/include/warmlake/wl.h"
#include "common/crc.h"
#include "common/le.h"
#include "s3/sigv4.h"
#include "testlib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define AK "AKIAFAKE0000000001"
#define SK "fake/secret/key/for/unit/tests/000000000"

/* ---- objects the fake servers share ---- */

typedef struct {
    char key[256];
    uint8_t *data;
    size_t len;
    char etag[40];
} fobj_t;

static fobj_t objs[256];
static int nobjs;
static pthread_mutex_t objs_mu = PTHREAD_MUTEX_INITIALIZER;
/* Multipart uploads: parts of one upload at a time ("u1"). */
static uint8_t *parts[64];
static size_t part_len[64];

static void md5_hex(const void *p, size_t n, char out[33])
{
    unsigned char d[16];
    unsigned int dl;
    EVP_Digest(p, n, d, &dl, EVP_md5(), NULL);
    sigv4_hex(d, 16, out);
}

/* Store a copy (replacing one of the same key). */
static void obj_put(const char *key, const void *data, size_t len, const char *etag)
{
    pthread_mutex_lock(&objs_mu);
    fobj_t *o = NULL;
    for (int i = 0; i < nobjs; i++)
        if (!strcmp(objs[i].key, key)) o = &objs[i];
    if (!o) {
        assert_true(nobjs < 256);
        o = &objs[nobjs++];
    }
    free(o->data);
    snprintf(o->key, sizeof(o->key), "%s", key);
    o->data = malloc(len ? len : 1);
    memcpy(o->data, data, len);
    o->len = len;
    if (etag)
        snprintf(o->etag, sizeof(o->etag), "%s", etag);
    else
        md5_hex(data, len, o->etag);
    pthread_mutex_unlock(&objs_mu);
}

static fobj_t *obj_find(const char *key)
{
    for (int i = 0; i < nobjs; i++)
        if (!strcmp(objs[i].key, key)) return &objs[i];
    return NULL;
}

static void objs_clear(void)
{
    for (int i = 0; i < nobjs; i++)
        free(objs[i].data);
    memset(objs, 0, sizeof(objs));
    nobjs = 0;
}

/* ---- the fake server ---- */

typedef struct {
    int lfd, port;
    pthread_t th;
    atomic_int stop;
    /* what it saw */
    atomic_int requests, gets, batch_posts, auth_bad, aborts, inflight, max_inflight;
    /* what it does to the next requests: each counts down */
    atomic_int fail_503, fail_reset, fail_short, fail_part;
    atomic_int delay_us;    /* every GET waits this long */
    atomic_int etag_flip;   /* ranges after byte 0 carry another ETag */
    atomic_int no_ranges;   /* Range is ignored: 200 and the whole object */
    atomic_int bad_bytes;   /* GET bodies with a byte changed (framing and ETag intact) */
    atomic_int no_if_match; /* If-Match is ignored */
    atomic_int batch_mode;  /* 0: 400 (no extension), 1: serve, 2: cut, 3: corrupt, 4: 501,
                               5: entry batch_at has wrong bytes under a good crc */
    atomic_int batch_at;    /* the entry cut or corrupted */
    atomic_int req_seq;
    /* open connections, shut down by fake_stop, which waits for their threads */
    pthread_mutex_t cmu;
    int cfds[256];
    int nconns;
} fake_t;

typedef struct {
    fake_t *f;
    int fd;
} conn_arg_t;

static int send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void reply(fake_t *f, int fd, int status, const char *extra, const void *body, size_t n,
                  int head)
{
    char h[1024];
    int l = snprintf(h, sizeof(h),
                     "HTTP/1.1 %d X\r\nx-amz-request-id: REQ%d\r\nContent-Length: %zu\r\n%s\r\n",
                     status, atomic_fetch_add(&f->req_seq, 1), n, extra ? extra : "");
    if (send_all(fd, h, (size_t)l) == 0 && !head && n) (void)send_all(fd, body, n);
}

static void reply_error(fake_t *f, int fd, int status, const char *code, int head)
{
    char b[256];
    int n = snprintf(b, sizeof(b), "<Error><Code>%s</Code><Message>m</Message></Error>", code);
    reply(f, fd, status, "Content-Type: application/xml\r\n", b, (size_t)n, head);
}

/* Take one if the counter is positive. */
static int take(atomic_int *c)
{
    int v = atomic_load(c);
    while (v > 0)
        if (atomic_compare_exchange_weak(c, &v, v - 1)) return 1;
    return 0;
}

static int verify_sig(char **names, char **vals, int nh, const char *method, const char *path,
                      const char *query)
{
    sigv4_header_t h[32];
    const char *authz = NULL, *date = NULL, *psha = NULL;
    for (int i = 0; i < nh; i++) {
        h[i] = (sigv4_header_t){names[i], strlen(names[i]), vals[i], strlen(vals[i])};
        if (!strcasecmp(names[i], "authorization")) authz = vals[i];
        if (!strcasecmp(names[i], "x-amz-date")) date = vals[i];
        if (!strcasecmp(names[i], "x-amz-content-sha256")) psha = vals[i];
    }
    if (!authz || !date || !psha) return -1;
    sigv4_auth_t a;
    if (sigv4_parse_header(authz, strlen(authz), &a) != 0) return -1;
    snprintf(a.amz_date, sizeof(a.amz_date), "%s", date);
    sigv4_request_t r = {method, path,       strlen(path), query, query ? strlen(query) : 0,
                         h,      (size_t)nh, psha};
    return sigv4_verify(&r, &a, SK, NULL);
}

/* The keys and ranges of a BatchGet body. */
static int parse_batch(const char *body, char keys[][256], uint64_t *offs, uint64_t *lens, int max)
{
    int n = 0;
    for (const char *p = body; (p = strstr(p, "<Object>")) && n < max; n++) {
        const char *k = strstr(p, "<Key>") + 5, *ke = strstr(k, "</Key>");
        snprintf(keys[n], 256, "%.*s", (int)(ke - k), k);
        const char *end = strstr(p, "</Object>"), *r = strstr(p, "<Range>");
        offs[n] = lens[n] = 0;
        if (r && r < end) {
            unsigned long long a, b;
            assert_int_equal(sscanf(r, "<Range>bytes=%llu-%llu", &a, &b), 2);
            offs[n] = a;
            lens[n] = b - a + 1;
        }
        p = end;
    }
    return n;
}

static int send_chunk(int fd, const void *p, size_t n)
{
    char h[32];
    int l = snprintf(h, sizeof(h), "%zx\r\n", n);
    if (send_all(fd, h, (size_t)l) || send_all(fd, p, n)) return -1;
    return send_all(fd, "\r\n", 2);
}

static void batch_frame(uint8_t **out, size_t *len, uint32_t index, uint16_t status,
                        const char *key, const char *etag, uint64_t size, const void *payload,
                        size_t plen, int corrupt)
{
    size_t kl = strlen(key), el = strlen(etag);
    *len = BATCH_HDR_LEN + kl + el + plen + 4;
    uint8_t *b = *out = calloc(1, *len);
    memcpy(b, BATCH_MAGIC, 4);
    le_put32(b + 4, index);
    le_put16(b + 8, status);
    le_put16(b + 10, (uint16_t)kl);
    le_put16(b + 12, (uint16_t)el);
    le_put64(b + 16, size);
    le_put64(b + 24, plen);
    le_put32(b + 32, crc32c(0, b, 32));
    memcpy(b + BATCH_HDR_LEN, key, kl);
    memcpy(b + BATCH_HDR_LEN + kl, etag, el);
    memcpy(b + BATCH_HDR_LEN + kl + el, payload, plen);
    le_put32(b + BATCH_HDR_LEN + kl + el + plen, crc32c(0, payload, plen));
    if (corrupt && plen) b[BATCH_HDR_LEN + kl + el] ^= 1;
}

/* 0: keep the connection, -1: close it. */
static int serve_batch(fake_t *f, int fd, const char *body)
{
    static char keys[1024][256];
    static uint64_t offs[1024], lens[1024];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    int n = parse_batch(body, keys, offs, lens, 1024);
    const char *h = "HTTP/1.1 200 OK\r\nx-amz-request-id: B1\r\nContent-Type: "
                    "application/x-warmlake-batch\r\nTransfer-Encoding: chunked\r\n\r\n";
    int rc = send_all(fd, h, strlen(h));
    int mode = atomic_load(&f->batch_mode), at = atomic_load(&f->batch_at);
    for (int i = 0; i < n && rc == 0; i++) {
        fobj_t *o = obj_find(keys[i]);
        uint8_t *fr;
        size_t fl;
        if (!o) {
            batch_frame(&fr, &fl, (uint32_t)i, 404, keys[i], "", 0, "NoSuchKey", 9, 0);
        } else if (lens[i]) {
            uint64_t a = offs[i], l = lens[i];
            if (a + l > o->len) l = a < o->len ? o->len - a : 0;
            batch_frame(&fr, &fl, (uint32_t)i, 206, keys[i], o->etag, o->len, o->data + a, l,
                        mode == 3 && i == at);
        } else if (mode == 5 && i == at && o->len) {
            uint8_t *bad = malloc(o->len);
            memcpy(bad, o->data, o->len);
            bad[0] ^= 1;
            batch_frame(&fr, &fl, (uint32_t)i, 200, keys[i], o->etag, o->len, bad, o->len, 0);
            free(bad);
        } else {
            batch_frame(&fr, &fl, (uint32_t)i, 200, keys[i], o->etag, o->len, o->data, o->len,
                        mode == 3 && i == at);
        }
        if (mode == 2 && i == at) {
            (void)send_chunk(fd, fr, fl / 2); /* the stream stops mid-frame */
            free(fr);
            pthread_mutex_unlock(&mu);
            return -1;
        }
        rc = send_chunk(fd, fr, fl);
        free(fr);
    }
    uint8_t *fr;
    size_t fl;
    batch_frame(&fr, &fl, BATCH_END_INDEX, 200, "", "", 0, "", 0, 0);
    if (rc == 0) rc = send_chunk(fd, fr, fl);
    free(fr);
    if (rc == 0) rc = send_all(fd, "0\r\n\r\n", 5);
    pthread_mutex_unlock(&mu);
    return rc;
}

/* One request: 0 to keep the connection, -1 to close it. */
static int serve_one(fake_t *f, int fd, char *buf, size_t *have)
{
    char *end;
    while (!(end = memmem(buf, *have, "\r\n\r\n", 4))) {
        if (*have >= 65535) return -1;
        ssize_t n = recv(fd, buf + *have, 65535 - *have, 0);
        if (n <= 0) return -1;
        *have += (size_t)n;
    }
    *end = 0;
    size_t head_len = (size_t)(end + 4 - buf);
    char method[16], target[4096];
    if (sscanf(buf, "%15s %4095s", method, target) != 2) return -1;
    char *names[32], *vals[32];
    int nh = 0;
    size_t clen = 0;
    const char *range = NULL, *if_match = NULL;
    for (char *line = strstr(buf, "\r\n"); line && nh < 32;) {
        line += 2;
        char *next = strstr(line, "\r\n");
        if (next) *next = 0;
        char *colon = strchr(line, ':');
        if (colon) {
            *colon = 0;
            char *v = colon + 1;
            while (*v == ' ')
                v++;
            names[nh] = line;
            vals[nh++] = v;
            if (!strcasecmp(line, "content-length")) clen = strtoul(v, NULL, 10);
            if (!strcasecmp(line, "range")) range = v;
            if (!strcasecmp(line, "if-match")) if_match = v;
        }
        line = next;
    }
    char *body = malloc(clen + 1);
    size_t got = *have - head_len < clen ? *have - head_len : clen;
    memcpy(body, buf + head_len, got);
    size_t rest = *have - head_len - got;
    memmove(buf, buf + head_len + got, rest);
    *have = rest;
    while (got < clen) {
        ssize_t n = recv(fd, body + got, clen - got, 0);
        if (n <= 0) {
            free(body);
            return -1;
        }
        got += (size_t)n;
    }
    body[clen] = 0;
    atomic_fetch_add(&f->requests, 1);
    char *query = strchr(target, '?');
    if (query) *query++ = 0;
    int rc = 0, head = !strcmp(method, "HEAD");
    if (verify_sig(names, vals, nh, method, target, query) != 0) {
        atomic_fetch_add(&f->auth_bad, 1);
        reply_error(f, fd, 403, "SignatureDoesNotMatch", head);
        goto out;
    }
    if (take(&f->fail_reset)) {
        struct linger lg = {1, 0}; /* RST, not FIN */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        rc = -1;
        goto out;
    }
    if (take(&f->fail_503)) {
        reply(f, fd, 503, "Content-Type: application/xml\r\n",
              "<Error><Code>SlowDown</Code></Error>", 36, head);
        goto out;
    }
    /* "/bkt/key": the key after the bucket, decoded (the tests' keys need only %20). */
    char key[256] = "";
    const char *k = strchr(target + 1, '/');
    if (k) {
        size_t o = 0;
        for (k++; *k && o < sizeof(key) - 1; k++) {
            if (*k == '%' && k[1] && k[2]) {
                char hx[3] = {k[1], k[2], 0};
                key[o++] = (char)strtol(hx, NULL, 16);
                k += 2;
            } else {
                key[o++] = *k;
            }
        }
        key[o] = 0;
    }
    if (!strcmp(method, "POST") && query && !strcmp(query, "batch-get")) {
        atomic_fetch_add(&f->batch_posts, 1);
        if (atomic_load(&f->batch_mode) == 0)
            reply_error(f, fd, 400, "InvalidRequest", 0);
        else if (atomic_load(&f->batch_mode) == 4)
            reply_error(f, fd, 501, "NotImplemented", 0);
        else
            rc = serve_batch(f, fd, body);
    } else if (!strcmp(method, "GET") || head) {
        if (!head) atomic_fetch_add(&f->gets, 1);
        int now = atomic_fetch_add(&f->inflight, 1) + 1;
        for (int m = atomic_load(&f->max_inflight); now > m;)
            if (atomic_compare_exchange_weak(&f->max_inflight, &m, now)) break;
        if (atomic_load(&f->delay_us)) usleep((useconds_t)atomic_load(&f->delay_us));
        pthread_mutex_lock(&objs_mu);
        fobj_t *o = obj_find(key);
        if (!o) {
            pthread_mutex_unlock(&objs_mu);
            reply_error(f, fd, 404, "NoSuchKey", head);
        } else {
            unsigned long long a = 0, b = o->len ? o->len - 1 : 0;
            int ranged = range && !atomic_load(&f->no_ranges) &&
                         sscanf(range, "bytes=%llu-%llu", &a, &b) >= 1;
            if (ranged && b >= o->len) b = o->len - 1;
            char extra[512];
            const char *etag = ranged && a > 0 && atomic_load(&f->etag_flip) ? "other" : o->etag;
            char quoted[64];
            snprintf(quoted, sizeof(quoted), "\"%s\"", etag);
            if (if_match && strcmp(if_match, quoted) != 0 && !atomic_load(&f->no_if_match)) {
                pthread_mutex_unlock(&objs_mu);
                reply_error(f, fd, 412, "PreconditionFailed", head);
            } else if (ranged && a >= o->len) {
                pthread_mutex_unlock(&objs_mu);
                reply_error(f, fd, 416, "InvalidRange", head);
            } else {
                size_t n = ranged ? (size_t)(b - a + 1) : o->len;
                uint8_t *copy = malloc(n ? n : 1);
                memcpy(copy, o->data + a, n);
                if (n && !head && take(&f->bad_bytes)) copy[n / 2] ^= 0x20;
                size_t total = o->len;
                pthread_mutex_unlock(&objs_mu);
                if (ranged)
                    snprintf(extra, sizeof(extra),
                             "ETag: \"%s\"\r\nContent-Range: bytes %llu-%llu/%zu\r\n", etag, a, b,
                             total);
                else
                    snprintf(extra, sizeof(extra), "ETag: \"%s\"\r\n", etag);
                if (!head && take(&f->fail_short)) {
                    /* The whole length announced, half of it sent, then the end. */
                    char h[1024];
                    int l = snprintf(h, sizeof(h), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n",
                                     ranged ? 206 : 200, n, extra);
                    if (send_all(fd, h, (size_t)l) == 0) (void)send_all(fd, copy, n / 2);
                    rc = -1;
                } else {
                    reply(f, fd, ranged ? 206 : 200, extra, copy, n, head);
                }
                free(copy);
            }
        }
        atomic_fetch_sub(&f->inflight, 1);
    } else if (!strcmp(method, "PUT") && query && strstr(query, "partNumber=")) {
        int pn = atoi(strstr(query, "partNumber=") + 11);
        if (take(&f->fail_part) || pn < 1 || pn > 64) {
            reply_error(f, fd, 500, "InternalError", 0);
        } else {
            char md5[33], extra[64];
            md5_hex(body, clen, md5);
            pthread_mutex_lock(&objs_mu);
            free(parts[pn - 1]);
            parts[pn - 1] = malloc(clen ? clen : 1);
            memcpy(parts[pn - 1], body, clen);
            part_len[pn - 1] = clen;
            pthread_mutex_unlock(&objs_mu);
            snprintf(extra, sizeof(extra), "ETag: \"%s\"\r\n", md5);
            reply(f, fd, 200, extra, "", 0, 0);
        }
    } else if (!strcmp(method, "PUT")) {
        obj_put(key, body, clen, NULL);
        char extra[64];
        snprintf(extra, sizeof(extra), "ETag: \"%s\"\r\n", obj_find(key)->etag);
        reply(f, fd, 200, extra, "", 0, 0);
    } else if (!strcmp(method, "POST") && query && !strcmp(query, "uploads")) {
        const char *b = "<InitiateMultipartUploadResult><UploadId>u1</UploadId>"
                        "</InitiateMultipartUploadResult>";
        reply(f, fd, 200, NULL, b, strlen(b), 0);
    } else if (!strcmp(method, "POST") && query && !strcmp(query, "uploadId=u1")) {
        /* Complete: the parts named, in order, must carry their MD5s. */
        size_t total = 0;
        int np = 0;
        for (const char *p = body; (p = strstr(p, "<PartNumber>")); p++)
            np++;
        for (int i = 0; i < np; i++)
            total += part_len[i];
        uint8_t *all = malloc(total ? total : 1);
        size_t o = 0;
        int ok = 1;
        for (int i = 0; i < np; i++) {
            char md5[33], want[64];
            md5_hex(parts[i], part_len[i], md5);
            snprintf(want, sizeof(want), "<ETag>\"%s\"</ETag>", md5);
            if (!strstr(body, want)) ok = 0;
            memcpy(all + o, parts[i], part_len[i]);
            o += part_len[i];
        }
        if (ok) {
            char etag[40], b[256];
            snprintf(etag, sizeof(etag), "mp-%d", np);
            obj_put(key, all, total, etag);
            int n = snprintf(b, sizeof(b),
                             "<CompleteMultipartUploadResult><ETag>\"%s\"</ETag>"
                             "</CompleteMultipartUploadResult>",
                             etag);
            reply(f, fd, 200, NULL, b, (size_t)n, 0);
        } else {
            reply_error(f, fd, 400, "InvalidPart", 0);
        }
        free(all);
    } else if (!strcmp(method, "DELETE") && query && !strcmp(query, "uploadId=u1")) {
        atomic_fetch_add(&f->aborts, 1);
        reply(f, fd, 204, NULL, "", 0, 0);
    } else {
        reply_error(f, fd, 405, "MethodNotAllowed", head);
    }
out:
    free(body);
    return rc;
}

static void *conn_main(void *arg)
{
    conn_arg_t *ca = arg;
    char *buf = malloc(65536);
    size_t have = 0;
    while (!atomic_load(&ca->f->stop) && serve_one(ca->f, ca->fd, buf, &have) == 0) {
    }
    fake_t *f = ca->f;
    pthread_mutex_lock(&f->cmu);
    for (int i = 0; i < f->nconns; i++)
        if (f->cfds[i] == ca->fd) f->cfds[i] = f->cfds[--f->nconns];
    close(ca->fd);
    pthread_mutex_unlock(&f->cmu);
    free(buf);
    free(ca);
    return NULL;
}

static void *accept_main(void *arg)
{
    fake_t *f = arg;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0 || atomic_load(&f->stop)) {
            if (fd >= 0) close(fd);
            break;
        }
        struct timeval tv = {10, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        int one = 1; /* head and body go in separate sends: no Nagle wait between them */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn_arg_t *ca = malloc(sizeof(*ca));
        ca->f = f;
        ca->fd = fd;
        pthread_mutex_lock(&f->cmu);
        assert_true(f->nconns < 256);
        f->cfds[f->nconns++] = fd;
        pthread_mutex_unlock(&f->cmu);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, conn_main, ca), 0);
        pthread_detach(t);
    }
    return NULL;
}

static fake_t *fake_start(void)
{
    fake_t *f = calloc(1, sizeof(*f));
    pthread_mutex_init(&f->cmu, NULL);
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(f->lfd, 128), 0);
    socklen_t al = sizeof(a);
    getsockname(f->lfd, (struct sockaddr *)&a, &al);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, accept_main, f), 0);
    return f;
}

/* Stops accepting, shuts the open connections down and waits for their threads. */
static void fake_stop(fake_t *f)
{
    atomic_store(&f->stop, 1);
    shutdown(f->lfd, SHUT_RDWR);
    pthread_join(f->th, NULL);
    close(f->lfd);
    for (int i = 0;; i++) {
        pthread_mutex_lock(&f->cmu);
        int n = f->nconns;
        for (int j = 0; j < n; j++)
            shutdown(f->cfds[j], SHUT_RDWR);
        pthread_mutex_unlock(&f->cmu);
        if (n == 0) break;
        assert_true(i < 10000); /* 10 s */
        usleep(1000);
    }
    pthread_mutex_destroy(&f->cmu);
    free(f);
}

static wl_client_t *client_for(fake_t **fs, int n, int max_attempts, int no_batch)
{
    char eps[512] = "";
    size_t o = 0;
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(eps + o, sizeof(eps) - o, "%shttp://127.0.0.1:%d", i ? "," : "",
                              fs[i]->port);
    wl_config_t cfg = {.endpoints = eps,
                       .access_key = AK,
                       .secret_key = SK,
                       .threads = 4,
                       .conns_per_endpoint = 8,
                       .part_size = 5u << 20,
                       .max_attempts = max_attempts,
                       .backoff_ms = 1,
                       .timeout_ms = 10000,
                       .no_batch = no_batch};
    wl_client_t *c = NULL;
    assert_int_equal(wl_client_new(&cfg, &c), WL_OK);
    return c;
}

static uint8_t *pattern(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    tl_fill(p, n, seed);
    return p;
}

/* ---- tests ---- */

/* AWS's SigV4 test suite (service "service", 2015-08-30): the canonical request and
   signature the client code builds match the published signatures. */
static void test_sigv4_suite(void **state)
{
    (void)state;
    static const struct {
        const char *method, *path, *query, *sig;
    } v[] = {
        {"GET", "/", NULL, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
        {"GET", "/", "Param2=value2&Param1=value1",
         "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
        {"POST", "/", NULL, "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
        {"GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", NULL,
         "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
        {"GET", "/\xe1\x88\xb4", NULL,
         "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
    };
    const char *empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    uint8_t key[32];
    sigv4_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1",
                      "service", key);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        sigv4_header_t h[] = {{"host", 4, "example.amazonaws.com", 21},
                              {"x-amz-date", 10, "20150830T123600Z", 16}};
        sigv4_request_t r = {v[i].method,
                             v[i].path,
                             strlen(v[i].path),
                             v[i].query,
                             v[i].query ? strlen(v[i].query) : 0,
                             h,
                             2,
                             empty};
        char *canon = sigv4_canonical_request(&r, "host;x-amz-date", 0);
        assert_non_null(canon);
        char sig[65];
        sigv4_signature(key, "20150830T123600Z", "20150830/us-east-1/service/aws4_request", canon,
                        sig);
        free(canon);
        assert_string_equal(sig, v[i].sig);
    }
}

static void test_basic(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    wl_client_t *c = client_for(&f, 1, 3, 0);
    uint8_t *data = pattern(100000, 1);
    char etag[128];
    assert_int_equal(wl_put(c, "bkt", "a key", data, 100000, "application/octet-stream", etag),
                     WL_OK);
    char md5[33];
    md5_hex(data, 100000, md5);
    assert_string_equal(etag, md5);
    uint8_t buf[100000];
    size_t got = 0;
    wl_stat_t st;
    assert_int_equal(wl_get(c, "bkt", "a key", 0, 0, buf, sizeof(buf), &got, &st), WL_OK);
    assert_int_equal(got, 100000);
    assert_memory_equal(buf, data, got);
    assert_string_equal(st.etag, md5);
    assert_int_equal(st.size, 100000);
    /* A range: the bytes asked, the object's whole size. */
    assert_int_equal(wl_get(c, "bkt", "a key", 777, 1000, buf, sizeof(buf), &got, &st), WL_OK);
    assert_int_equal(got, 1000);
    assert_memory_equal(buf, data + 777, 1000);
    assert_int_equal(st.size, 100000);
    assert_int_equal(wl_stat(c, "bkt", "a key", &st), WL_OK);
    assert_int_equal(st.size, 100000);
    /* Errors carry the status, S3 code and request id. */
    assert_int_equal(wl_get(c, "bkt", "missing", 0, 0, buf, sizeof(buf), &got, NULL), WL_ENOTFOUND);
    const wl_error_t *e = wl_last_error();
    assert_int_equal(e->code, WL_ENOTFOUND);
    assert_int_equal(e->http_status, 404);
    assert_string_equal(e->s3_code, "NoSuchKey");
    assert_true(!strncmp(e->request_id, "REQ", 3));
    assert_int_equal(wl_get(c, "bkt", "a key", 200000, 10, buf, sizeof(buf), &got, NULL),
                     WL_ERANGE);
    /* Too small a buffer: refused, and the connection is usable afterwards. */
    assert_int_equal(wl_get(c, "bkt", "a key", 0, 0, buf, 1000, &got, NULL), WL_ETOOLARGE);
    assert_int_equal(wl_get(c, "bkt", "a key", 0, 0, buf, sizeof(buf), &got, NULL), WL_OK);
    /* Every request was signed correctly. */
    assert_int_equal(atomic_load(&f->auth_bad), 0);
    /* A wrong secret is refused as such. */
    wl_config_t bad = {.endpoints = "http://127.0.0.1:1", .access_key = AK, .secret_key = "x"};
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", f->port);
    bad.endpoints = ep;
    wl_client_t *c2 = NULL;
    assert_int_equal(wl_client_new(&bad, &c2), WL_OK);
    assert_int_equal(wl_get(c2, "bkt", "a key", 0, 0, buf, sizeof(buf), &got, NULL), WL_EDENIED);
    assert_string_equal(wl_last_error()->s3_code, "SignatureDoesNotMatch");
    wl_client_free(c2);
    /* Bad endpoints fail at creation. */
    wl_config_t none = {.endpoints = "ftp://x"};
    assert_int_equal(wl_client_new(&none, &c2), WL_EINVAL);
    assert_null(c2);
    wl_client_free(c);
    fake_stop(f);
    free(data);
    objs_clear();
}

static void test_retries(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    wl_client_t *c = client_for(&f, 1, 4, 0);
    uint8_t *data = pattern(300000, 2);
    obj_put("k", data, 300000, NULL);
    uint8_t *buf = malloc(300000);
    size_t got;
    struct {
        atomic_int *knob;
        const char *what;
    } faults[] = {{&f->fail_503, "503"}, {&f->fail_reset, "reset"}, {&f->fail_short, "short"}};
    for (int i = 0; i < 3; i++) {
        /* Three failures, the fourth attempt succeeds with the right bytes. */
        memset(buf, 0, 300000);
        atomic_store(&f->requests, 0);
        atomic_store(faults[i].knob, 3);
        assert_int_equal(wl_get(c, "bkt", "k", 0, 0, buf, 300000, &got, NULL), WL_OK);
        assert_int_equal(got, 300000);
        assert_memory_equal(buf, data, 300000);
        assert_int_equal(atomic_load(&f->requests), 4);
        /* Failures on every attempt exhaust them: an error, not wrong bytes. A reset of a
           reused keep-alive connection before any byte of the response is taken for a
           connection the server closed meanwhile, and s3c sends once more on a fresh one:
           the first attempt then makes two requests. */
        int want = i == 1 ? 5 : 4;
        atomic_store(&f->requests, 0);
        atomic_store(faults[i].knob, want);
        int rc = wl_get(c, "bkt", "k", 0, 0, buf, 300000, &got, NULL);
        assert_int_equal(atomic_load(&f->requests), want);
        if (i == 0) {
            assert_int_equal(rc, WL_ESERVER);
            assert_int_equal(wl_last_error()->http_status, 503);
            assert_string_equal(wl_last_error()->s3_code, "SlowDown");
            assert_true(wl_last_error()->request_id[0] != 0);
        } else {
            assert_int_equal(rc, WL_EIO);
        }
        assert_int_equal(atomic_load(faults[i].knob), 0);
    }
    /* A PUT is retried too, its body sent again whole. */
    atomic_store(&f->fail_reset, 1);
    atomic_store(&f->fail_503, 1);
    assert_int_equal(wl_put(c, "bkt", "p", data, 300000, NULL, NULL), WL_OK);
    assert_int_equal(wl_get(c, "bkt", "p", 0, 0, buf, 300000, &got, NULL), WL_OK);
    assert_memory_equal(buf, data, 300000);
    /* 404 is not retried. */
    atomic_store(&f->requests, 0);
    assert_int_equal(wl_get(c, "bkt", "nope", 0, 0, buf, 300000, &got, NULL), WL_ENOTFOUND);
    assert_int_equal(atomic_load(&f->requests), 1);
    wl_client_free(c);
    fake_stop(f);
    free(data);
    free(buf);
    objs_clear();
}

/* Whole objects read in parallel ranged parts land assembled, into memory and into a file,
   through faults in the middle; an ETag that changes between parts fails the read. */
static void test_ranged_assembly(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    wl_client_t *c = client_for(&f, 1, 4, 0);
    size_t sizes[] = {0, 1, (5u << 20) - 1, 5u << 20, (5u << 20) + 1, (17u << 20) + 12345};
    uint8_t *buf = malloc((18u << 20));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *data = pattern(n, 10 + i);
        obj_put("obj", data, n, NULL);
        atomic_store(&f->gets, 0);
        atomic_store(&f->fail_short, 1);
        atomic_store(&f->fail_503, 1);
        size_t got = 12345678;
        wl_stat_t st;
        memset(buf, 0xAA, n + 16);
        assert_int_equal(wl_get_parallel(c, "bkt", "obj", buf, 18u << 20, &got, &st), WL_OK);
        assert_int_equal(got, n);
        assert_int_equal(st.size, n);
        assert_memory_equal(buf, data, n);
        assert_int_equal(buf[n], 0xAA); /* nothing written past the object */
        /* One GET per 5 MiB part, plus the one cut short (the 503 comes before the GET is
           counted); an empty object takes two (its range is refused) and cannot be cut. */
        int nparts = n ? (int)((n + (5u << 20) - 1) / (5u << 20)) + 1 : 2;
        assert_int_equal(atomic_load(&f->gets), nparts);
        /* Too small a buffer. */
        if (n > 10)
            assert_int_equal(wl_get_parallel(c, "bkt", "obj", buf, n - 1, &got, NULL),
                             WL_ETOOLARGE);
        /* Into a file. */
        char *dir = tl_tmpdir("wlget");
        char path[512];
        snprintf(path, sizeof(path), "%s/out", dir);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(wl_get_fd(c, "bkt", "obj", fd, &st), WL_OK);
        assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)n);
        memset(buf, 0, n);
        assert_int_equal(pread(fd, buf, n, 0), (ssize_t)n);
        assert_memory_equal(buf, data, n);
        close(fd);
        tl_rm_rf(dir);
        free(dir);
        free(data);
    }
    /* The object changes between parts: refused by the server (If-Match), or by the client
       when the server ignores If-Match. */
    atomic_store(&f->etag_flip, 1);
    size_t got;
    assert_int_equal(wl_get_parallel(c, "bkt", "obj", buf, 18u << 20, &got, NULL), WL_EPRECOND);
    assert_int_equal(wl_last_error()->http_status, 412);
    atomic_store(&f->no_if_match, 1);
    assert_int_equal(wl_get_parallel(c, "bkt", "obj", buf, 18u << 20, &got, NULL), WL_ECORRUPT);
    atomic_store(&f->no_if_match, 0);
    atomic_store(&f->etag_flip, 0);
    /* A server that ignores Range: its whole object is never taken for a range... */
    atomic_store(&f->no_ranges, 1);
    assert_int_equal(wl_get(c, "bkt", "obj", 10, 5, buf, 18u << 20, &got, NULL), WL_ECORRUPT);
    assert_int_equal(wl_get(c, "bkt", "obj", 10, 0, buf, 18u << 20, &got, NULL), WL_ECORRUPT);
    /* ...but is a whole-object read done in one part. */
    size_t n = (17u << 20) + 12345;
    uint8_t *data = pattern(n, 15);
    assert_int_equal(wl_get_parallel(c, "bkt", "obj", buf, 18u << 20, &got, NULL), WL_OK);
    assert_int_equal(got, n);
    assert_memory_equal(buf, data, n);
    free(data);
    wl_client_free(c);
    fake_stop(f);
    free(buf);
    objs_clear();
}

static void test_multipart(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    wl_client_t *c = client_for(&f, 1, 3, 0);
    size_t n = (16u << 20) + 999;
    uint8_t *data = pattern(n, 3);
    char etag[128];
    atomic_store(&f->fail_part, 2); /* two part failures, each retried */
    assert_int_equal(wl_put(c, "bkt", "mp", data, n, NULL, etag), WL_OK);
    assert_string_equal(etag, "mp-4");
    pthread_mutex_lock(&objs_mu);
    fobj_t *o = obj_find("mp");
    assert_non_null(o);
    assert_int_equal(o->len, n);
    assert_memory_equal(o->data, data, n);
    pthread_mutex_unlock(&objs_mu);
    assert_int_equal(atomic_load(&f->aborts), 0);
    /* From a file. */
    char *dir = tl_tmpdir("wlput");
    char path[512];
    snprintf(path, sizeof(path), "%s/in", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_int_equal(pwrite(fd, data, n, 0), (ssize_t)n);
    assert_int_equal(wl_put_fd(c, "bkt", "mpf", fd, n, NULL, etag), WL_OK);
    pthread_mutex_lock(&objs_mu);
    o = obj_find("mpf");
    assert_memory_equal(o->data, data, n);
    pthread_mutex_unlock(&objs_mu);
    close(fd);
    tl_rm_rf(dir);
    free(dir);
    /* A part failing every attempt: the upload is aborted, the error returned. */
    atomic_store(&f->fail_part, 1000);
    assert_int_equal(wl_put(c, "bkt", "mp2", data, n, NULL, etag), WL_ESERVER);
    assert_string_equal(wl_last_error()->s3_code, "InternalError");
    assert_int_equal(atomic_load(&f->aborts), 1);
    assert_null(obj_find("mp2"));
    atomic_store(&f->fail_part, 0);
    wl_client_free(c);
    fake_stop(f);
    free(data);
    objs_clear();
}

/* Requests alternate over the endpoints; a dead one is skipped by the retry. */
static void test_round_robin(void **state)
{
    (void)state;
    fake_t *fs[2] = {fake_start(), fake_start()};
    wl_client_t *c = client_for(fs, 2, 3, 0);
    obj_put("k", "v", 1, NULL);
    char b[4];
    size_t got;
    for (int i = 0; i < 20; i++)
        assert_int_equal(wl_get(c, "bkt", "k", 0, 0, b, sizeof(b), &got, NULL), WL_OK);
    assert_int_equal(atomic_load(&fs[0]->requests), 10);
    assert_int_equal(atomic_load(&fs[1]->requests), 10);
    wl_client_free(c);
    /* The second endpoint refuses connections: every request still succeeds. */
    int port = fs[1]->port;
    fake_stop(fs[1]);
    char eps[128];
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,http://127.0.0.1:%d", fs[0]->port, port);
    wl_config_t cfg = {.endpoints = eps, .access_key = AK, .secret_key = SK, .backoff_ms = 1};
    assert_int_equal(wl_client_new(&cfg, &c), WL_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(wl_get(c, "bkt", "k", 0, 0, b, sizeof(b), &got, NULL), WL_OK);
    wl_client_free(c);
    fake_stop(fs[0]);
    objs_clear();
}

#define NB 40

/* Items: objects of varied sizes, a missing key, a range. */
static void batch_items(wl_item_t *it, uint8_t **bufs)
{
    for (int i = 0; i < NB; i++) {
        memset(&it[i], 0, sizeof(it[i]));
        static char keys[NB][32];
        snprintf(keys[i], sizeof(keys[i]), "s/%d", i);
        it[i].key = keys[i];
        it[i].buf = bufs[i];
        it[i].cap = 70000;
        memset(bufs[i], 0, 70000);
    }
    it[7].key = "s/missing";
    it[9].off = 100;
    it[9].len = 50;
}

static void check_items(const wl_item_t *it, uint8_t **bufs)
{
    for (int i = 0; i < NB; i++) {
        if (i == 7) {
            assert_int_equal(it[i].code, WL_ENOTFOUND);
            assert_string_equal(it[i].s3_code, "NoSuchKey");
            continue;
        }
        assert_int_equal(it[i].code, WL_OK);
        size_t n = (size_t)i * 1500;
        uint8_t *want = pattern(n, 100 + (uint64_t)i);
        if (i == 9) {
            assert_int_equal(it[i].got, 50);
            assert_memory_equal(bufs[i], want + 100, 50);
        } else {
            assert_int_equal(it[i].got, n);
            assert_memory_equal(bufs[i], want, n);
        }
        assert_int_equal(it[i].object_size, n);
        free(want);
    }
}

static void test_batch_get(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    for (int i = 0; i < NB; i++) {
        char k[32];
        snprintf(k, sizeof(k), "s/%d", i);
        uint8_t *d = pattern((size_t)i * 1500, 100 + (uint64_t)i);
        obj_put(k, d, (size_t)i * 1500, NULL);
        free(d);
    }
    uint8_t *bufs[NB];
    for (int i = 0; i < NB; i++)
        bufs[i] = malloc(70000);
    wl_item_t it[NB];
    /* The server has the extension: batches only, no single GETs. */
    atomic_store(&f->batch_mode, 1);
    wl_client_t *c = client_for(&f, 1, 3, 0);
    batch_items(it, bufs);
    assert_int_equal(wl_get_batch(c, "bkt", it, NB), 1);
    check_items(it, bufs);
    assert_true(atomic_load(&f->batch_posts) >= 1);
    assert_int_equal(atomic_load(&f->gets), 0);
    wl_stats_t ws;
    wl_client_stats(c, &ws);
    assert_int_equal(ws.batch_entries, NB);
    assert_int_equal(ws.single_gets, 0);
    assert_int_equal(ws.batch_requests, (uint64_t)atomic_load(&f->batch_posts));
    assert_int_equal(ws.batch_unsupported, 0);
    /* A stream cut mid-entry, and one with a corrupt entry: the rest come singly. */
    for (int mode = 2; mode <= 3; mode++) {
        atomic_store(&f->batch_mode, mode);
        atomic_store(&f->batch_at, 5);
        atomic_store(&f->gets, 0);
        batch_items(it, bufs);
        assert_int_equal(wl_get_batch(c, "bkt", it, NB), 1);
        check_items(it, bufs);
        assert_true(atomic_load(&f->gets) > 0);
        assert_true(atomic_load(&f->gets) < NB);
    }
    /* Plain single GETs give the same. */
    batch_items(it, bufs);
    assert_int_equal(wl_get_many(c, "bkt", it, NB), 1);
    check_items(it, bufs);
    wl_client_free(c);
    /* A server without the extension: 400 (or 501), then parallel GETs; the client
       remembers. */
    for (int mode = 0; mode <= 4; mode += 4) {
        atomic_store(&f->batch_mode, mode);
        atomic_store(&f->batch_posts, 0);
        c = client_for(&f, 1, 3, 0);
        for (int round = 0; round < 2; round++) {
            batch_items(it, bufs);
            assert_int_equal(wl_get_batch(c, "bkt", it, NB), 1);
            check_items(it, bufs);
        }
        int posts = atomic_load(&f->batch_posts);
        assert_true(posts >= 1 && posts <= 4); /* the first call's batches only */
        wl_client_stats(c, &ws);
        assert_int_equal(ws.batch_unsupported, 1);
        assert_int_equal(ws.single_gets, 2 * NB);
        assert_int_equal(ws.batch_entries, 0);
        wl_client_free(c);
    }
    /* Batch GET turned off: never tried. */
    atomic_store(&f->batch_mode, 1);
    atomic_store(&f->batch_posts, 0);
    c = client_for(&f, 1, 3, 1);
    batch_items(it, bufs);
    assert_int_equal(wl_get_batch(c, "bkt", it, NB), 1);
    check_items(it, bufs);
    assert_int_equal(atomic_load(&f->batch_posts), 0);
    wl_client_free(c);
    for (int i = 0; i < NB; i++)
        free(bufs[i]);
    fake_stop(f);
    objs_clear();
}

static void test_prefetch(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    wl_client_t *c = client_for(&f, 1, 3, 0);
    for (int i = 0; i < 30; i++) {
        char k[32];
        snprintf(k, sizeof(k), "p/%d", i);
        uint8_t *d = pattern(10000 + (size_t)i, 200 + (uint64_t)i);
        obj_put(k, d, 10000 + (size_t)i, NULL);
        free(d);
    }
    atomic_store(&f->delay_us, 3000);
    for (int depth = 1; depth <= 3; depth += 2) {
        atomic_store(&f->max_inflight, 0);
        wl_prefetch_t *pf;
        assert_int_equal(wl_prefetch_new(c, "bkt", depth, 1 << 20, &pf), WL_OK);
        for (int i = 0; i < 30; i++) {
            char k[32];
            snprintf(k, sizeof(k), i == 4 ? "p/missing" : "p/%d", i);
            /* Whole objects, and ranges every third. */
            uint64_t len = i % 3 == 0 ? 100 : 0;
            assert_int_equal(wl_prefetch_push(pf, k, len ? 5 : 0, len, (void *)(intptr_t)i), WL_OK);
        }
        for (int i = 0; i < 30; i++) {
            void *data, *tag;
            size_t len;
            int rc = wl_prefetch_next(pf, &data, &len, &tag);
            assert_int_equal((intptr_t)tag, i);
            if (i == 4) {
                assert_int_equal(rc, WL_ENOTFOUND);
                assert_null(data);
                continue;
            }
            assert_int_equal(rc, WL_OK);
            uint8_t *want = pattern(10000 + (size_t)i, 200 + (uint64_t)i);
            if (i % 3 == 0) {
                assert_int_equal(len, 100);
                assert_memory_equal(data, want + 5, 100);
            } else {
                assert_int_equal(len, 10000 + (size_t)i);
                assert_memory_equal(data, want, len);
            }
            free(want);
            free(data);
        }
        void *d, *t;
        size_t l;
        assert_int_equal(wl_prefetch_next(pf, &d, &l, &t), WL_EINVAL);
        wl_prefetch_free(pf);
        assert_true(atomic_load(&f->max_inflight) <= depth);
    }
    /* A tight memory bound: one whole object at a time (each counts as 1 MiB until its
       HEAD told its size), whatever the depth. */
    atomic_store(&f->max_inflight, 0);
    wl_prefetch_t *pf;
    assert_int_equal(wl_prefetch_new(c, "bkt", 8, 1000, &pf), WL_OK);
    for (int i = 0; i < 10; i++) {
        char k[32];
        snprintf(k, sizeof(k), "p/%d", i + 10);
        assert_int_equal(wl_prefetch_push(pf, k, 0, 0, NULL), WL_OK);
    }
    for (int i = 0; i < 10; i++) {
        void *data;
        size_t len;
        assert_int_equal(wl_prefetch_next(pf, &data, &len, NULL), WL_OK);
        assert_int_equal(len, 10010 + (size_t)i);
        free(data);
    }
    assert_int_equal(atomic_load(&f->max_inflight), 1);
    /* If-Match: the version asked for, or a refusal. */
    char et[64];
    pthread_mutex_lock(&objs_mu);
    snprintf(et, sizeof(et), "%s", obj_find("p/3")->etag);
    pthread_mutex_unlock(&objs_mu);
    assert_int_equal(wl_prefetch_push_if(pf, "p/3", 0, 10, et, NULL), WL_OK);
    assert_int_equal(wl_prefetch_push_if(pf, "p/3", 10, 10, "stale", NULL), WL_OK);
    void *d3;
    size_t l3;
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_OK);
    assert_int_equal(l3, 10);
    free(d3);
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_EPRECOND);
    assert_null(d3);
    assert_int_equal(wl_last_error()->http_status, 412); /* the entry's details come along */
    assert_string_equal(wl_last_error()->s3_code, "PreconditionFailed");
    /* Into the caller's buffers: the entry's data is the buffer itself, filled; a whole
       object needs no HEAD; one larger than its buffer fails alone; a stale If-Match too. */
    static uint8_t ub[4][20000];
    assert_int_equal(wl_prefetch_push_into(pf, "p/7", 0, 0, NULL, ub[0], sizeof(ub[0]), NULL),
                     WL_OK);
    assert_int_equal(wl_prefetch_push_into(pf, "p/8", 3, 50, et, ub[1], sizeof(ub[1]), NULL),
                     WL_OK);
    assert_int_equal(wl_prefetch_push_into(pf, "p/9", 0, 0, NULL, ub[2], 100, NULL), WL_OK);
    assert_int_equal(wl_prefetch_push_into(pf, "p/3", 0, 10, "stale", ub[3], 10, NULL), WL_OK);
    assert_int_equal(wl_prefetch_push_into(pf, "p/3", 0, 10, et, ub[3], 10, NULL), WL_OK);
    uint8_t *w7 = pattern(10007, 207), *w8 = pattern(10008, 208), *w3 = pattern(10003, 203);
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_OK);
    assert_ptr_equal(d3, ub[0]);
    assert_int_equal(l3, 10007);
    assert_memory_equal(ub[0], w7, 10007);
    /* p/8 carries another ETag than p/3's: refused by If-Match. */
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_EPRECOND);
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_ETOOLARGE);
    assert_null(d3);
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_EPRECOND);
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_OK);
    assert_ptr_equal(d3, ub[3]);
    assert_int_equal(l3, 10);
    assert_memory_equal(ub[3], w3, 10);
    assert_int_equal(wl_prefetch_push_into(pf, "p/8", 3, 50, NULL, ub[1], sizeof(ub[1]), NULL),
                     WL_OK);
    assert_int_equal(wl_prefetch_next(pf, &d3, &l3, NULL), WL_OK);
    assert_ptr_equal(d3, ub[1]);
    assert_int_equal(l3, 50);
    assert_memory_equal(ub[1], w8 + 3, 50);
    free(w7);
    free(w8);
    free(w3);
    assert_int_equal(wl_prefetch_push_into(pf, "p/1", 0, 0, NULL, NULL, 5, NULL), WL_EINVAL);
    /* Freed with entries still queued and running (the caller's buffers are not freed). */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(wl_prefetch_push(pf, "p/1", 0, 0, NULL), WL_OK);
        assert_int_equal(wl_prefetch_push_into(pf, "p/1", 0, 0, NULL, ub[i % 4], 20000, NULL),
                         WL_OK);
    }
    wl_prefetch_free(pf);
    wl_client_free(c);
    fake_stop(f);
    objs_clear();
}

typedef struct {
    wl_client_t *c;
    int id, ok;
} hammer_t;

static void *hammer(void *arg)
{
    hammer_t *h = arg;
    uint8_t buf[5000];
    for (int i = 0; i < 40; i++) {
        char k[32];
        int o = (h->id * 7 + i) % 20;
        snprintf(k, sizeof(k), "h/%d", o);
        size_t got;
        if (wl_get(h->c, "bkt", k, 0, 0, buf, sizeof(buf), &got, NULL) != WL_OK) return NULL;
        uint8_t *want = pattern(1000 + (size_t)o, 300 + (uint64_t)o);
        int same = got == 1000 + (size_t)o && !memcmp(buf, want, got);
        free(want);
        if (!same) return NULL;
        /* The last error is per thread: a failure here leaves the others' alone. */
        if (i % 10 == 0 && (wl_stat(h->c, "bkt", "h/none", NULL) != WL_ENOTFOUND ||
                            wl_last_error()->http_status != 404))
            return NULL;
    }
    h->ok = 1;
    return NULL;
}

/* Many caller threads on one client with few connections: every answer right, connections
   shared (callers wait for one), parallel reads running alongside. */
static void test_threads(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    for (int i = 0; i < 20; i++) {
        char k[32];
        snprintf(k, sizeof(k), "h/%d", i);
        uint8_t *d = pattern(1000 + (size_t)i, 300 + (uint64_t)i);
        obj_put(k, d, 1000 + (size_t)i, NULL);
        free(d);
    }
    uint8_t *big = pattern(12u << 20, 9);
    obj_put("big", big, 12u << 20, NULL);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", f->port);
    wl_config_t cfg = {.endpoints = ep,
                       .access_key = AK,
                       .secret_key = SK,
                       .conns_per_endpoint = 2,
                       .threads = 3,
                       .part_size = 5u << 20};
    wl_client_t *c;
    assert_int_equal(wl_client_new(&cfg, &c), WL_OK);
    hammer_t h[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        h[i] = (hammer_t){c, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &h[i]), 0);
    }
    uint8_t *buf = malloc(12u << 20);
    for (int r = 0; r < 3; r++) {
        size_t got;
        assert_int_equal(wl_get_parallel(c, "bkt", "big", buf, 12u << 20, &got, NULL), WL_OK);
        assert_memory_equal(buf, big, 12u << 20);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_true(h[i].ok);
    }
    assert_int_equal(atomic_load(&f->auth_bad), 0);
    wl_client_free(c);
    fake_stop(f);
    free(buf);
    free(big);
    objs_clear();
}

/* verify_get: whole objects whose bytes do not hash to their MD5 ETag are read again, or
   refused; never returned as good. */
static void test_verify_get(void **state)
{
    (void)state;
    fake_t *f = fake_start();
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", f->port);
    wl_config_t cfg = {.endpoints = ep,
                       .access_key = AK,
                       .secret_key = SK,
                       .part_size = 5u << 20,
                       .backoff_ms = 1,
                       .max_attempts = 3,
                       .verify_get = 1};
    wl_client_t *c;
    assert_int_equal(wl_client_new(&cfg, &c), WL_OK);
    size_t n = 12u << 20;
    uint8_t *data = pattern(n, 21), *buf = malloc(n);
    obj_put("v", data, 100000, NULL);
    size_t got;
    atomic_store(&f->requests, 0);
    atomic_store(&f->bad_bytes, 1);
    assert_int_equal(wl_get(c, "bkt", "v", 0, 0, buf, n, &got, NULL), WL_OK);
    assert_memory_equal(buf, data, 100000);
    assert_int_equal(atomic_load(&f->requests), 2);
    atomic_store(&f->bad_bytes, 3);
    assert_int_equal(wl_get(c, "bkt", "v", 0, 0, buf, n, &got, NULL), WL_ECORRUPT);
    assert_non_null(strstr(wl_last_error()->message, "hash"));
    /* Assembled from parts: checked whole. */
    obj_put("big", data, n, NULL);
    atomic_store(&f->bad_bytes, 0);
    assert_int_equal(wl_get_parallel(c, "bkt", "big", buf, n, &got, NULL), WL_OK);
    atomic_store(&f->bad_bytes, 1);
    assert_int_equal(wl_get_parallel(c, "bkt", "big", buf, n, &got, NULL), WL_ECORRUPT);
    /* A batch entry with wrong bytes under a good frame crc is fetched again singly. */
    for (int i = 0; i < 8; i++) {
        char k[16];
        snprintf(k, sizeof(k), "e/%d", i);
        obj_put(k, data + i, 1000, NULL);
    }
    atomic_store(&f->batch_mode, 5);
    atomic_store(&f->batch_at, 3);
    atomic_store(&f->gets, 0);
    wl_item_t it[8];
    uint8_t bufs[8][1000];
    static char keys[8][16];
    memset(it, 0, sizeof(it));
    for (int i = 0; i < 8; i++) {
        snprintf(keys[i], sizeof(keys[i]), "e/%d", i);
        it[i].key = keys[i];
        it[i].buf = bufs[i];
        it[i].cap = sizeof(bufs[i]);
    }
    assert_int_equal(wl_get_batch(c, "bkt", it, 8), 0);
    for (int i = 0; i < 8; i++)
        assert_memory_equal(bufs[i], data + i, 1000);
    assert_int_equal(atomic_load(&f->gets), 1);
    /* Without verify_get the same bad bytes would pass: the check is what caught them. */
    wl_client_free(c);
    cfg.verify_get = 0;
    assert_int_equal(wl_client_new(&cfg, &c), WL_OK);
    atomic_store(&f->bad_bytes, 1);
    assert_int_equal(wl_get(c, "bkt", "v", 0, 0, buf, n, &got, NULL), WL_OK);
    assert_memory_not_equal(buf, data, 100000);
    wl_client_free(c);
    fake_stop(f);
    free(data);
    free(buf);
    objs_clear();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigv4_suite), cmocka_unit_test(test_basic),
        cmocka_unit_test(test_retries),     cmocka_unit_test(test_ranged_assembly),
        cmocka_unit_test(test_multipart),   cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_batch_get),   cmocka_unit_test(test_prefetch),
        cmocka_unit_test(test_threads),     cmocka_unit_test(test_verify_get),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
