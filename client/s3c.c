#include "client/s3c.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <expat.h>
#include <llhttp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF_SIZE   (1u << 20) /* socket reads; large so big bodies cost few syscalls */
#define WBUF_SIZE   (1u << 20) /* request head + body pieces */
#define HEAD_MAX    16384
#define MAX_HEADERS 24

struct s3c {
    s3c_cfg_t cfg;
    char host[256]; /* Host header value */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int fd;
    char *rbuf, *wbuf;
    char *keep; /* kept response body */
    size_t keep_cap;
    uint8_t key[32]; /* signing key of key_day */
    char key_day[9];

    /* per-response parse state */
    llhttp_t parser;
    llhttp_settings_t settings;
    s3c_resp_t *resp;
    const s3c_req_t *req;
    char hname[64];
    size_t hname_len;
    int hfield; /* which header is being collected: 0 none, else an H_* below */
    char hval[256];
    size_t hval_len;
    int in_value;
    int done, is_head, keep_over;
    int nomem;     /* a kept body could not grow */
    int too_large; /* a 2xx body does not fit req->dst */
    int direct;    /* the body is a Content-Length one landing in req->dst: recv straight there */
    struct timespec t0;
};

enum { H_NONE, H_ETAG, H_RANGE, H_RETRY, H_REQID, H_LASTMOD, H_CTYPE };

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- response parsing (llhttp callbacks) ---- */

static void header_done(s3c_t *c)
{
    if (!c->hfield) return;
    c->hval[c->hval_len] = 0;
    s3c_resp_t *r = c->resp;
    if (c->hfield == H_ETAG) {
        const char *v = c->hval;
        size_t n = c->hval_len;
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
        snprintf(r->etag, sizeof(r->etag), "%.*s", (int)n, v);
    } else if (c->hfield == H_RANGE) {
        unsigned long long a, b, t;
        if (sscanf(c->hval, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
            r->range_start = a;
            r->range_total = t;
        }
    } else if (c->hfield == H_RETRY) {
        r->retry_after = strtol(c->hval, NULL, 10);
    } else if (c->hfield == H_REQID) {
        snprintf(r->request_id, sizeof(r->request_id), "%.*s", (int)sizeof(r->request_id) - 1,
                 c->hval);
    } else if (c->hfield == H_LASTMOD) {
        snprintf(r->last_modified, sizeof(r->last_modified), "%.*s",
                 (int)sizeof(r->last_modified) - 1, c->hval);
    } else if (c->hfield == H_CTYPE) {
        snprintf(r->content_type, sizeof(r->content_type), "%.*s", (int)sizeof(r->content_type) - 1,
                 c->hval);
    }
    c->hfield = 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    s3c_t *c = p->data;
    if (c->in_value) {
        header_done(c);
        c->in_value = 0;
        c->hname_len = 0;
    }
    size_t n =
        len < sizeof(c->hname) - 1 - c->hname_len ? len : sizeof(c->hname) - 1 - c->hname_len;
    memcpy(c->hname + c->hname_len, at, n);
    c->hname_len += n;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    s3c_t *c = p->data;
    if (!c->in_value) {
        c->in_value = 1;
        c->hname[c->hname_len] = 0;
        c->hval_len = 0;
        static const char *const names[] = {"",
                                            "etag",
                                            "content-range",
                                            "retry-after",
                                            "x-amz-request-id",
                                            "last-modified",
                                            "content-type"};
        c->hfield = H_NONE;
        for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
            if (!strcasecmp(c->hname, names[i])) c->hfield = i;
    }
    if (c->hfield) {
        size_t n =
            len < sizeof(c->hval) - 1 - c->hval_len ? len : sizeof(c->hval) - 1 - c->hval_len;
        memcpy(c->hval + c->hval_len, at, n);
        c->hval_len += n;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    s3c_t *c = p->data;
    if (c->in_value) header_done(c);
    c->in_value = 0;
    c->hname_len = 0;
    s3c_resp_t *r = c->resp;
    r->status = p->status_code;
    r->ttfb_ns = now_ns() - ((int64_t)c->t0.tv_sec * 1000000000 + c->t0.tv_nsec);
    if (p->flags & F_CONTENT_LENGTH) r->content_length = p->content_length;
    if (!r->range_total) r->range_total = r->content_length;
    /* A HEAD response announces a length but carries no body. */
    if (c->is_head) return 1;
    const s3c_req_t *q = c->req;
    if (q->dst && r->status >= 200 && r->status < 300) {
        if ((p->flags & F_CONTENT_LENGTH) && p->content_length > q->dst_cap) {
            c->too_large = 1;
            return -1;
        }
        c->direct = (p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED);
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    s3c_t *c = p->data;
    s3c_resp_t *r = c->resp;
    uint64_t off = r->body_bytes;
    r->body_bytes += len;
    if (c->req->dst && r->status >= 200 && r->status < 300) {
        if (off + len > c->req->dst_cap) {
            c->too_large = 1;
            return -1;
        }
        /* Bytes received straight into dst (read_response) are already in place. */
        if (at != (const char *)c->req->dst + off) memcpy((char *)c->req->dst + off, at, len);
        return 0;
    }
    /* Error bodies are always kept so that the S3 error code can be read. */
    if (c->req->sink && r->status < 300) {
        c->req->sink(c->req->sink_arg, off, at, len);
        return 0;
    }
    if (off + len + 1 > c->cfg.max_body_keep) {
        c->keep_over = 1;
        return 0;
    }
    if (off + len + 1 > c->keep_cap) {
        size_t cap = c->keep_cap ? c->keep_cap : 65536;
        while (cap < off + len + 1)
            cap *= 2;
        char *k = realloc(c->keep, cap);
        if (!k) {
            c->nomem = 1;
            return -1;
        }
        c->keep = k;
        c->keep_cap = cap;
    }
    memcpy(c->keep + off, at, len);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    s3c_t *c = p->data;
    c->done = 1;
    return HPE_PAUSED; /* stop here: anything after belongs to no request of ours */
}

/* ---- connection ---- */

static int parse_endpoint(s3c_t *c, const char *ep)
{
    const char *p = ep;
    if (!strncmp(p, "http://", 7))
        p += 7;
    else if (strstr(p, "://"))
        return ERR_INVAL;
    char host[256];
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0 || n >= sizeof(host)) return ERR_INVAL;
    memcpy(host, p, n);
    host[n] = 0;
    snprintf(c->host, sizeof(c->host), "%s", host);
    char *port = "80";
    char *h = host;
    if (h[0] == '[') { /* [::1]:9000 */
        char *e = strchr(h, ']');
        if (!e) return ERR_INVAL;
        *e = 0;
        h++;
        if (e[1] == ':') port = e + 2;
    } else {
        char *colon = strrchr(h, ':');
        if (colon) {
            *colon = 0;
            port = colon + 1;
        }
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(h, port, &hints, &res) != 0 || !res) return ERR_INVAL;
    memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
    c->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

s3c_t *s3c_new(const s3c_cfg_t *cfg)
{
    s3c_t *c = NULL;
    return s3c_open(cfg, &c) == 0 ? c : NULL;
}

int s3c_open(const s3c_cfg_t *cfg, s3c_t **out)
{
    *out = NULL;
    s3c_t *c = calloc(1, sizeof(*c));
    if (!c) return ERR_NOMEM;
    c->cfg = *cfg;
    if (!c->cfg.region) c->cfg.region = "us-east-1";
    if (c->cfg.timeout_ms <= 0) c->cfg.timeout_ms = 120000;
    if (!c->cfg.max_body_keep) c->cfg.max_body_keep = 16u << 20;
    if (parse_endpoint(c, cfg->endpoint) != 0) {
        log_error("s3c: bad endpoint %s (want http://host:port)", cfg->endpoint);
        free(c);
        return ERR_INVAL;
    }
    c->fd = -1;
    c->rbuf = malloc(RBUF_SIZE);
    c->wbuf = malloc(WBUF_SIZE);
    c->keep = malloc(65536);
    c->keep_cap = 65536;
    if (!c->rbuf || !c->wbuf || !c->keep) {
        s3c_free(c);
        return ERR_NOMEM;
    }
    llhttp_settings_init(&c->settings);
    c->settings.on_header_field = on_header_field;
    c->settings.on_header_value = on_header_value;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_message_complete = on_message_complete;
    *out = c;
    return 0;
}

void s3c_close(s3c_t *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

void s3c_free(s3c_t *c)
{
    if (!c) return;
    s3c_close(c);
    free(c->rbuf);
    free(c->wbuf);
    free(c->keep);
    free(c);
}

static int conn_open(s3c_t *c)
{
    int fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ERR_IO;
    struct timeval tv = {c->cfg.timeout_ms / 1000, (c->cfg.timeout_ms % 1000) * 1000};
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&c->addr, c->addrlen) != 0) {
        close(fd);
        return ERR_IO;
    }
    c->fd = fd;
    return 0;
}

static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return ERR_IO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* URI-encode every byte outside A-Z a-z 0-9 - _ . ~ (and '/' when keep_slash). */
static int uri_encode(const char *in, int keep_slash, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
                    (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= cap) return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = 0;
    return (int)o;
}

int s3c_encode_path(const char *in, char *out, size_t cap)
{
    return uri_encode(in, 1, out, cap);
}

int s3c_encode_query(const char *in, char *out, size_t cap)
{
    return uri_encode(in, 0, out, cap);
}

/* Request line and headers into c->wbuf; returns the length or an error. */
static int build_head(s3c_t *c, const s3c_req_t *req)
{
    char amz_date[17], auth[1536];
    const char *hv[2 * MAX_HEADERS];
    int nh = 0;
    for (const char *const *h = req->headers; h && h[0]; h += 2) {
        if (nh + 2 > 2 * MAX_HEADERS - 6) return ERR_INVAL;
        hv[nh++] = h[0];
        hv[nh++] = h[1];
    }
    if (c->cfg.access_key) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
        if (memcmp(c->key_day, amz_date, 8) != 0) {
            memcpy(c->key_day, amz_date, 8);
            c->key_day[8] = 0;
            sigv4_signing_key(c->cfg.secret, c->key_day, c->cfg.region, "s3", c->key);
        }
        hv[nh++] = "host";
        hv[nh++] = c->host;
        hv[nh++] = "x-amz-date";
        hv[nh++] = amz_date;
        hv[nh++] = "x-amz-content-sha256";
        hv[nh++] = SIGV4_UNSIGNED;
        sigv4_header_t sh[MAX_HEADERS];
        for (int i = 0; i < nh / 2; i++)
            sh[i] = (sigv4_header_t){hv[2 * i], strlen(hv[2 * i]), hv[2 * i + 1],
                                     strlen(hv[2 * i + 1])};
        sigv4_request_t sr = {req->method,
                              req->path,
                              strlen(req->path),
                              req->query,
                              req->query ? strlen(req->query) : 0,
                              sh,
                              (size_t)nh / 2,
                              SIGV4_UNSIGNED};
        int rc =
            sigv4_sign(&sr, c->cfg.access_key, c->key, c->cfg.region, amz_date, auth, sizeof(auth));
        if (rc != 0) return rc;
        hv[nh++] = "authorization";
        hv[nh++] = auth;
    } else {
        hv[nh++] = "host";
        hv[nh++] = c->host;
    }
    int o = snprintf(c->wbuf, HEAD_MAX, "%s %s%s%s HTTP/1.1\r\n", req->method, req->path,
                     req->query && *req->query ? "?" : "", req->query ? req->query : "");
    for (int i = 0; i < nh && o < HEAD_MAX; i += 2)
        o += snprintf(c->wbuf + o, HEAD_MAX - (size_t)o, "%s: %s\r\n", hv[i], hv[i + 1]);
    if (o < HEAD_MAX &&
        (req->body_len || strcmp(req->method, "PUT") == 0 || strcmp(req->method, "POST") == 0))
        o += snprintf(c->wbuf + o, HEAD_MAX - (size_t)o, "content-length: %llu\r\n",
                      (unsigned long long)req->body_len);
    if (o < HEAD_MAX) o += snprintf(c->wbuf + o, HEAD_MAX - (size_t)o, "\r\n");
    return o >= HEAD_MAX ? ERR_TOO_LARGE : o;
}

/* Send head and body in one sendmsg loop, neither copied (a large body in memory). */
static int send_two(int fd, const void *a, size_t alen, const void *b, size_t blen)
{
    struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
    struct iovec *v = iov;
    int nv = 2;
    while (nv > 0) {
        struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)nv};
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return ERR_IO;
        size_t left = (size_t)n;
        while (nv > 0 && left >= v->iov_len) {
            left -= v->iov_len;
            v++;
            nv--;
        }
        if (nv > 0) {
            v->iov_base = (char *)v->iov_base + left;
            v->iov_len -= left;
        }
    }
    return 0;
}

static int send_request(s3c_t *c, const s3c_req_t *req, size_t head)
{
    /* A body in memory that would not fit the head's buffer goes from where it lies: a copy
       into wbuf per byte is what a large PUT would otherwise pay. */
    if (!req->fill && req->body && req->body_len > WBUF_SIZE - head)
        return send_two(c->fd, c->wbuf, head, req->body, (size_t)req->body_len);
    /* Head and body share sends: a small body goes out in the head's packet. */
    size_t used = head;
    uint64_t off = 0;
    while (off < req->body_len) {
        size_t n = WBUF_SIZE - used;
        if (n > req->body_len - off) n = (size_t)(req->body_len - off);
        if (req->fill)
            req->fill(req->fill_arg, off, c->wbuf + used, n);
        else
            memcpy(c->wbuf + used, (const char *)req->body + off, n);
        used += n;
        off += n;
        if (used == WBUF_SIZE || off == req->body_len) {
            if (send_all(c->fd, c->wbuf, used) != 0) return ERR_IO;
            used = 0;
        }
    }
    return used ? send_all(c->fd, c->wbuf, used) : 0;
}

static void resp_begin(s3c_t *c)
{
    llhttp_init(&c->parser, HTTP_RESPONSE, &c->settings);
    c->parser.data = c;
    c->done = 0;
    c->in_value = 0;
    c->hname_len = 0;
    c->hfield = 0;
    c->keep_over = 0;
    c->nomem = 0;
    c->too_large = 0;
    c->direct = 0;
}

/* Feed response bytes: 1 when the response is complete, 0 for more, ERR_INVAL when malformed. */
static int resp_feed(s3c_t *c, const char *buf, size_t n)
{
    llhttp_errno_t e = llhttp_execute(&c->parser, buf, n);
    if (e == HPE_PAUSED) return 1;
    if (e != HPE_OK) {
        if (c->nomem) return ERR_NOMEM;
        if (c->too_large) return ERR_TOO_LARGE;
        log_warn("s3c: bad response: %s", llhttp_get_error_reason(&c->parser));
        return ERR_INVAL;
    }
    return c->done;
}

/* After the last byte: lengths, the kept body and the S3 error code. */
static void resp_end(s3c_t *c, const s3c_req_t *req, s3c_resp_t *resp)
{
    if (resp->content_length == 0) resp->content_length = resp->body_bytes;
    if (!resp->range_total) resp->range_total = resp->content_length;
    if ((!req->sink && !req->dst) || resp->status < 200 || resp->status >= 300) {
        size_t kept = c->keep_over ? 0 : (size_t)resp->body_bytes;
        c->keep[kept] = 0;
        resp->body = c->keep;
        resp->body_len = kept;
        if (resp->status >= 300 && kept)
            s3c_xml_text(c->keep, kept, "Code", resp->code, sizeof(resp->code));
    }
}

static int read_response(s3c_t *c, const s3c_req_t *req, s3c_resp_t *resp, int *got_any)
{
    resp_begin(c);
    for (;;) {
        ssize_t n = recv(c->fd, c->rbuf, RBUF_SIZE, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* A body delimited by the connection's end finishes here. */
            if (n == 0 && *got_any && llhttp_finish(&c->parser) == HPE_OK && c->done) break;
            return ERR_IO;
        }
        *got_any = 1;
        int rc = resp_feed(c, c->rbuf, (size_t)n);
        if (rc < 0) return rc;
        if (rc == 1) break;
        /* The rest of a Content-Length body goes from the socket into dst, then llhttp
           walks over it in place (on_body sees its own bytes and copies nothing). */
        while (c->direct && !c->done) {
            uint64_t left = resp->content_length - resp->body_bytes;
            if (left == 0) break;
            char *to = (char *)req->dst + resp->body_bytes;
            n = recv(c->fd, to, left < (1u << 30) ? (size_t)left : (1u << 30), 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return ERR_IO;
            rc = resp_feed(c, to, (size_t)n);
            if (rc < 0) return rc;
        }
        if (c->done) break;
    }
    if (!llhttp_should_keep_alive(&c->parser)) s3c_close(c);
    resp_end(c, req, resp);
    return 0;
}

int s3c_parse_response(s3c_t *c, const char *data, size_t len, size_t step, int head,
                       s3c_sink_fn sink, void *sink_arg, s3c_resp_t *resp)
{
    s3c_req_t req = {.method = head ? "HEAD" : "GET", .sink = sink, .sink_arg = sink_arg};
    memset(resp, 0, sizeof(*resp));
    resp->retry_after = -1;
    c->req = &req;
    c->resp = resp;
    c->is_head = head;
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    resp_begin(c);
    int rc = 0;
    for (size_t pos = 0; pos < len && rc == 0; pos += step) {
        size_t n = len - pos < step ? len - pos : step;
        rc = resp_feed(c, data + pos, n);
    }
    if (rc == 0 && llhttp_finish(&c->parser) == HPE_OK && c->done) rc = 1;
    if (rc != 1) return rc < 0 ? rc : ERR_AGAIN;
    resp_end(c, &req, resp);
    return 0;
}

int s3c_do(s3c_t *c, const s3c_req_t *req, s3c_resp_t *resp)
{
    int head = build_head(c, req);
    if (head < 0) return head;
    c->req = req;
    c->resp = resp;
    c->is_head = strcmp(req->method, "HEAD") == 0;
    for (int attempt = 0;; attempt++) {
        memset(resp, 0, sizeof(*resp));
        resp->retry_after = -1;
        clock_gettime(CLOCK_MONOTONIC, &c->t0);
        int reused = c->fd >= 0;
        if (!reused && conn_open(c) != 0) return ERR_IO;
        int got_any = 0;
        int rc = send_request(c, req, (size_t)head);
        if (rc == 0) rc = read_response(c, req, resp, &got_any);
        if (rc == 0) return 0;
        s3c_close(c);
        /* A keep-alive connection the server closed meanwhile: try once on a fresh one. */
        if (!reused || got_any || attempt > 0) {
            resp->status = got_any ? resp->status : 0;
            return rc;
        }
        head = build_head(c, req); /* the head buffer doubles as the body buffer */
        if (head < 0) return head;
    }
}

/* ---- XML ---- */

typedef struct {
    const char *const *names;
    int nnames;
    int which;    /* the names[] element being read */
    int depth_in; /* >0 while inside a matching element */
    char *text;
    size_t len, cap;
    void (*fn)(void *, int, const char *, size_t);
    void *arg;
    int count;
    int nomem;
    XML_Parser p;
} xml_scan_t;

static void xs_start(void *ud, const char *el, const char **attr)
{
    xml_scan_t *x = ud;
    (void)attr;
    if (x->depth_in) {
        x->depth_in++;
        return;
    }
    for (int i = 0; i < x->nnames; i++) {
        if (!strcmp(el, x->names[i])) {
            x->which = i;
            x->depth_in = 1;
            x->len = 0;
            return;
        }
    }
}

static void xs_end(void *ud, const char *el)
{
    xml_scan_t *x = ud;
    (void)el;
    if (!x->depth_in) return;
    if (--x->depth_in == 0) {
        x->count++;
        if (x->fn) x->fn(x->arg, x->which, x->text ? x->text : "", x->len);
    }
}

static void xs_text(void *ud, const char *s, int len)
{
    xml_scan_t *x = ud;
    if (!x->depth_in) return;
    if (x->len + (size_t)len + 1 > x->cap) {
        size_t cap = (x->len + (size_t)len + 1) * 2;
        char *t = realloc(x->text, cap);
        if (!t) {
            x->nomem = 1;
            XML_StopParser(x->p, XML_FALSE);
            return;
        }
        x->text = t;
        x->cap = cap;
    }
    memcpy(x->text + x->len, s, (size_t)len);
    x->len += (size_t)len;
    x->text[x->len] = 0;
}

static void xs_no_entities(void *ud, const XML_Char *name, int pe, const XML_Char *value, int vlen,
                           const XML_Char *base, const XML_Char *sys, const XML_Char *pub,
                           const XML_Char *notation)
{
    xml_scan_t *x = ud;
    XML_StopParser(x->p, XML_FALSE);
}

int s3c_xml_each_of(const char *body, size_t len, const char *const *names, int nnames,
                    void (*fn)(void *arg, int which, const char *text, size_t len), void *arg)
{
    if (len > (size_t)1 << 30) return -1;
    XML_Parser p = XML_ParserCreate(NULL);
    if (!p) return -1;
    xml_scan_t x = {.names = names, .nnames = nnames, .fn = fn, .arg = arg, .p = p};
    XML_SetElementHandler(p, xs_start, xs_end);
    XML_SetCharacterDataHandler(p, xs_text);
    XML_SetEntityDeclHandler(p, xs_no_entities);
    XML_SetUserData(p, &x);
    int ok = XML_Parse(p, body, (int)len, XML_TRUE) == XML_STATUS_OK && !x.nomem;
    XML_ParserFree(p);
    free(x.text);
    return ok ? x.count : -1;
}

typedef struct {
    void (*fn)(void *arg, const char *text, size_t len);
    void *arg;
} one_name_t;

static void one_name(void *arg, int which, const char *text, size_t len)
{
    one_name_t *o = arg;
    (void)which;
    if (o->fn) o->fn(o->arg, text, len);
}

int s3c_xml_each(const char *body, size_t len, const char *name,
                 void (*fn)(void *arg, const char *text, size_t len), void *arg)
{
    one_name_t o = {fn, arg};
    return s3c_xml_each_of(body, len, &name, 1, one_name, &o);
}

typedef struct {
    char *out;
    size_t cap;
    int got;
} first_t;

static void take_first(void *arg, const char *text, size_t len)
{
    first_t *f = arg;
    if (f->got++) return;
    snprintf(f->out, f->cap, "%.*s", (int)len, text);
}

void s3c_xml_text(const char *body, size_t len, const char *name, char *out, size_t cap)
{
    first_t f = {out, cap, 0};
    if (cap) out[0] = 0;
    if (s3c_xml_each(body, len, name, take_first, &f) < 0 && cap) out[0] = 0;
}
