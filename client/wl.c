/*
 * wl: the client object of libwarmlake: endpoints with their keep-alive
 * connection pools, the thread pool of parallel operations, and the one
 * place requests are sent and retried (wl__request). See wl_int.h for the
 * map of the library.
 *
 * Retries: connection errors (including bodies cut short) and 500, 502,
 * 503, 504 are retried up to max_attempts in all, each time on the next
 * endpoint, after a sleep drawn uniformly from [0, min(cap, base * 2^n)]
 * ("full jitter": many clients backing off at once do not come back in
 * step). A Retry-After header raises the sleep, up to the cap.
 */
#include "client/wl_int.h"

#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_CAP_MS 5000

_Static_assert(WL_ENOMEM == ERR_NOMEM && WL_EIO == ERR_IO && WL_EINVAL == ERR_INVAL &&
                   WL_ENOTFOUND == ERR_NOT_FOUND && WL_ECORRUPT == ERR_CORRUPT &&
                   WL_ETOOLARGE == ERR_TOO_LARGE && WL_ERANGE == ERR_RANGE &&
                   WL_EDENIED == ERR_DENIED && WL_EPRECOND == ERR_PRECOND,
               "wl.h codes follow common/err.h");

static __thread wl_error_t last_err;

const wl_error_t *wl_last_error(void)
{
    return &last_err;
}

const char *wl_strerror(int code)
{
    if (code == WL_ESERVER) return "the server refused the request";
    return err_str(code);
}

int wl__set_last(const wl_error_t *err)
{
    last_err = *err;
    return err->code;
}

int wl__ret(wl_error_t *err, int rc)
{
    if (rc == 0) {
        memset(&last_err, 0, sizeof(last_err));
        return 0;
    }
    err->code = rc;
    if (!err->message[0]) snprintf(err->message, sizeof(err->message), "%s", wl_strerror(rc));
    last_err = *err;
    return rc;
}

int wl__fail(wl_error_t *err, int code, const char *fmt, ...)
{
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return code;
}

int wl__status_code(int status)
{
    if (status >= 200 && status < 300) return WL_OK;
    switch (status) {
    case 304:
    case 412:
        return WL_EPRECOND;
    case 403:
        return WL_EDENIED;
    case 404:
        return WL_ENOTFOUND;
    case 416:
        return WL_ERANGE;
    default:
        return WL_ESERVER;
    }
}

int wl__path(const char *bucket, const char *key, char *out)
{
    if (!bucket || !*bucket || strchr(bucket, '/')) return WL_EINVAL;
    out[0] = '/';
    int n = s3c_encode_path(bucket, out + 1, WL_PATH_MAX - 2);
    if (n < 0) return WL_EINVAL;
    if (key) {
        out[1 + n] = '/';
        if (s3c_encode_path(key, out + n + 2, WL_PATH_MAX - (size_t)n - 2) < 0) return WL_EINVAL;
    }
    return 0;
}

/* ---- thread pool ---- */

static void *worker(void *arg)
{
    wl_client_t *c = arg;
    pthread_mutex_lock(&c->tmu);
    for (;;) {
        while (!c->head && !c->stopping)
            pthread_cond_wait(&c->tcv, &c->tmu);
        if (!c->head) break;
        wl_task_t *t = c->head;
        c->head = t->next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->tmu);
        t->fn(t);
        pthread_mutex_lock(&c->tmu);
    }
    pthread_mutex_unlock(&c->tmu);
    return NULL;
}

void wl__submit_task(wl_client_t *c, wl_task_t *t)
{
    t->next = NULL;
    pthread_mutex_lock(&c->tmu);
    if (c->tail)
        c->tail->next = t;
    else
        c->head = t;
    c->tail = t;
    pthread_cond_signal(&c->tcv);
    pthread_mutex_unlock(&c->tmu);
}

void wl__group_init(wl_group_t *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->pending = 0;
}

void wl__group_destroy(wl_group_t *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

void wl__submit(wl_client_t *c, wl_group_t *g, wl_task_t *t)
{
    pthread_mutex_lock(&g->mu);
    g->pending++;
    pthread_mutex_unlock(&g->mu);
    wl__submit_task(c, t);
}

void wl__group_done(wl_group_t *g)
{
    pthread_mutex_lock(&g->mu);
    if (--g->pending == 0) pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void wl__group_wait(wl_group_t *g)
{
    pthread_mutex_lock(&g->mu);
    while (g->pending > 0)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* ---- client ---- */

static char *dup_or_null(const char *s, int *nomem)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *nomem = 1;
    return d;
}

int wl_client_new(const wl_config_t *cfg, wl_client_t **out)
{
    wl_error_t err = {0};
    *out = NULL;
    if (!cfg || !cfg->endpoints || !*cfg->endpoints)
        return wl__set_last(&(wl_error_t){.code = WL_EINVAL, .message = "no endpoint"});
    wl_client_t *c = calloc(1, sizeof(*c));
    if (!c) return wl__set_last(&(wl_error_t){.code = WL_ENOMEM, .message = "out of memory"});
    c->cfg = *cfg;
    int nomem = 0;
    c->endpoints_s = dup_or_null(cfg->endpoints, &nomem);
    c->access_key = dup_or_null(cfg->access_key, &nomem);
    c->secret_key = dup_or_null(cfg->secret_key, &nomem);
    c->region = dup_or_null(cfg->region ? cfg->region : "us-east-1", &nomem);
    pthread_mutex_init(&c->tmu, NULL);
    pthread_cond_init(&c->tcv, NULL);
    if (nomem) goto nomem;
    c->cfg.endpoints = c->endpoints_s;
    c->cfg.access_key = c->access_key;
    c->cfg.secret_key = c->secret_key;
    c->cfg.region = c->region;
    if (c->cfg.conns_per_endpoint <= 0) c->cfg.conns_per_endpoint = 16;
    if (c->cfg.threads <= 0) c->cfg.threads = 8;
    if (c->cfg.part_size == 0) c->cfg.part_size = 8u << 20;
    if (c->cfg.part_size < (5u << 20)) c->cfg.part_size = 5u << 20;
    if (c->cfg.max_attempts <= 0) c->cfg.max_attempts = 5;
    if (c->cfg.backoff_ms <= 0) c->cfg.backoff_ms = 50;
    if (c->cfg.timeout_ms <= 0) c->cfg.timeout_ms = 120000;

    int n = 1;
    for (const char *p = c->endpoints_s; *p; p++)
        n += *p == ',';
    c->ep = calloc((size_t)n, sizeof(*c->ep));
    if (!c->ep) goto nomem;
    char *save = NULL;
    for (char *tok = strtok_r(c->endpoints_s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (!*tok) continue;
        wl_endpoint_t *e = &c->ep[c->n_ep];
        if (snprintf(e->url, sizeof(e->url), "%s", tok) >= (int)sizeof(e->url)) {
            wl__fail(&err, WL_EINVAL, "endpoint too long: %s", tok);
            goto fail;
        }
        /* Check the endpoint now: a typo fails here, not at the first request. */
        s3c_t *probe = NULL;
        s3c_cfg_t sc = {.endpoint = e->url};
        int rc = s3c_open(&sc, &probe);
        s3c_free(probe);
        if (rc) {
            wl__fail(&err, rc, "bad endpoint %s (want http://host:port)", tok);
            goto fail;
        }
        e->idle = calloc((size_t)c->cfg.conns_per_endpoint, sizeof(s3c_t *));
        if (!e->idle) goto nomem;
        pthread_mutex_init(&e->mu, NULL);
        pthread_cond_init(&e->cv, NULL);
        c->n_ep++;
    }
    if (c->n_ep == 0) {
        wl__fail(&err, WL_EINVAL, "no endpoint");
        goto fail;
    }
    c->threads = calloc((size_t)c->cfg.threads, sizeof(pthread_t));
    if (!c->threads) goto nomem;
    for (int i = 0; i < c->cfg.threads; i++) {
        if (pthread_create(&c->threads[i], NULL, worker, c) != 0) {
            wl__fail(&err, WL_ENOMEM, "cannot start a thread");
            goto fail;
        }
        c->n_threads++;
    }
    *out = c;
    return WL_OK;
nomem:
    wl__fail(&err, WL_ENOMEM, "out of memory");
fail:
    wl_client_free(c);
    return wl__set_last(&err);
}

void wl_client_free(wl_client_t *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->tmu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->tcv);
    pthread_mutex_unlock(&c->tmu);
    for (int i = 0; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    free(c->threads);
    for (int i = 0; i < c->n_ep; i++) {
        wl_endpoint_t *e = &c->ep[i];
        for (int j = 0; j < e->n_idle; j++)
            s3c_free(e->idle[j]);
        free(e->idle);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    }
    free(c->ep);
    pthread_mutex_destroy(&c->tmu);
    pthread_cond_destroy(&c->tcv);
    free(c->endpoints_s);
    free(c->access_key);
    if (c->secret_key) memset(c->secret_key, 0, strlen(c->secret_key));
    free(c->secret_key);
    free(c->region);
    free(c);
}

/* ---- connections ---- */

/* An idle connection of e, or a new one when fewer than the limit are open (else wait). */
static int conn_get(wl_client_t *c, wl_endpoint_t *e, s3c_t **out)
{
    pthread_mutex_lock(&e->mu);
    while (e->n_idle == 0 && e->n_open >= c->cfg.conns_per_endpoint)
        pthread_cond_wait(&e->cv, &e->mu);
    if (e->n_idle > 0) {
        *out = e->idle[--e->n_idle];
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    e->n_open++;
    pthread_mutex_unlock(&e->mu);
    s3c_cfg_t sc = {.endpoint = e->url,
                    .access_key = c->access_key,
                    .secret = c->secret_key,
                    .region = c->region,
                    .timeout_ms = c->cfg.timeout_ms,
                    .max_body_keep = 64u << 20};
    int rc = s3c_open(&sc, out);
    if (rc) {
        pthread_mutex_lock(&e->mu);
        e->n_open--;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
    }
    return rc;
}

static void conn_put(wl_endpoint_t *e, s3c_t *s)
{
    pthread_mutex_lock(&e->mu);
    e->idle[e->n_idle++] = s;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* ---- requests ---- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static unsigned jitter_seed(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned)(t.tv_nsec ^ (long)pthread_self());
}

static int retryable_status(int s)
{
    return s == 500 || s == 502 || s == 503 || s == 504;
}

static void fill_from_resp(wl_error_t *err, const s3c_resp_t *r, const char *what)
{
    err->http_status = r->status;
    snprintf(err->s3_code, sizeof(err->s3_code), "%s", r->code);
    snprintf(err->request_id, sizeof(err->request_id), "%s", r->request_id);
    snprintf(err->message, sizeof(err->message), "%s: HTTP %d%s%s", what, r->status,
             r->code[0] ? " " : "", r->code);
}

int wl__request(wl_client_t *c, wl_call_t *call, wl_error_t *err)
{
    unsigned seed = jitter_seed();
    unsigned start = atomic_fetch_add(&c->rr, 1);
    char what[160];
    snprintf(what, sizeof(what), "%s %.120s", call->req.method, call->req.path);
    int rc = WL_EIO;
    int attempts = call->no_retry ? 1 : c->cfg.max_attempts;
    for (int attempt = 0; attempt < attempts; attempt++) {
        if (attempt > 0) {
            atomic_fetch_add(&c->n_retries, 1);
            long cap = (long)c->cfg.backoff_ms << (attempt - 1 < 16 ? attempt - 1 : 16);
            if (cap > BACKOFF_CAP_MS) cap = BACKOFF_CAP_MS;
            long ms = (long)(rand_r(&seed) % (unsigned)(cap + 1));
            if (call->resp.retry_after > 0) {
                long ra = call->resp.retry_after * 1000;
                if (ra > ms) ms = ra < BACKOFF_CAP_MS ? ra : BACKOFF_CAP_MS;
            }
            sleep_ms(ms);
        }
        wl_endpoint_t *e = &c->ep[(start + (unsigned)attempt) % (unsigned)c->n_ep];
        s3c_t *s = NULL;
        rc = conn_get(c, e, &s);
        if (rc) return wl__fail(err, rc, "%s: cannot open a connection: %s", what, err_str(rc));
        memset(err, 0, sizeof(*err));
        rc = s3c_do(s, &call->req, &call->resp);
        s3c_resp_t *r = &call->resp;
        if (rc == 0) atomic_fetch_add(&c->n_requests, 1);
        if (rc == 0 && r->status >= 200 && r->status < 300 && call->expect_range) {
            /* A ranged GET must return the bytes asked (fewer only at the object's end). A
               200 is the whole object: acceptable only as the first bytes of a range from 0. */
            const char *bad = NULL;
            if (r->status == 206) {
                uint64_t end = call->range_len ? call->range_off + call->range_len : UINT64_MAX;
                if (r->range_total && end > r->range_total) end = r->range_total;
                uint64_t want = end > call->range_off ? end - call->range_off : 0;
                if (r->range_start != call->range_off || r->body_bytes != want)
                    bad = "a Content-Range other than asked";
            } else if (!call->whole_ok && (call->range_off != 0 ||
                                           (call->range_len && r->body_bytes > call->range_len))) {
                bad = "the whole object for a range";
            }
            if (bad) {
                s3c_close(s);
                conn_put(e, s);
                rc = wl__fail(err, WL_ECORRUPT, "%s: asked bytes %llu+%llu, got %s", what,
                              (unsigned long long)call->range_off,
                              (unsigned long long)call->range_len, bad);
                continue;
            }
        }
        if (rc == 0 && r->status >= 200 && r->status < 300 && r->content_length &&
            r->body_bytes != r->content_length && strcmp(call->req.method, "HEAD") != 0) {
            /* s3c reads to the announced length; a difference means a broken framing. */
            s3c_close(s);
            conn_put(e, s);
            rc = wl__fail(err, WL_EIO, "%s: short body", what);
            continue;
        }
        if (rc == 0 && call->verify_md5 && r->status == 200 && call->req.dst &&
            wl__md5_like(r->etag)) {
            char md5[33];
            int mrc = wl__md5(call->req.dst, NULL, NULL, r->body_bytes, md5);
            if (mrc) {
                conn_put(e, s);
                return wl__fail(err, mrc, "out of memory");
            }
            if (strcasecmp(md5, r->etag) != 0) {
                /* Another attempt (on the next endpoint) may read good bytes. */
                conn_put(e, s);
                rc =
                    wl__fail(err, WL_ECORRUPT, "%s: bytes hash to %s, ETag %s", what, md5, r->etag);
                continue;
            }
        }
        if (rc == 0 && call->want_body && r->body_len) {
            free(call->body_copy);
            call->body_copy = malloc(r->body_len + 1);
            if (!call->body_copy) {
                conn_put(e, s);
                return wl__fail(err, WL_ENOMEM, "out of memory");
            }
            memcpy(call->body_copy, r->body, r->body_len);
            call->body_copy[r->body_len] = 0;
            call->body_copy_len = r->body_len;
        }
        conn_put(e, s);
        if (rc == ERR_NOMEM || rc == ERR_TOO_LARGE) {
            fill_from_resp(err, r, what);
            return wl__fail(err, rc, "%s: %s", what,
                            rc == ERR_NOMEM ? "out of memory" : "body larger than the buffer");
        }
        if (rc != 0) {
            /* Connection refused, reset, cut mid-body, or a response llhttp refused. */
            rc = wl__fail(err, WL_EIO, "%s: connection failed (%s)", what, e->url);
            continue;
        }
        if (r->status >= 200 && r->status < 300) {
            uint64_t moved = 0;
            if (!strcmp(call->req.method, "GET")) {
                moved = r->body_bytes;
                atomic_fetch_add(&c->n_in, moved);
            } else if (!strcmp(call->req.method, "PUT")) {
                moved = call->req.body_len;
                atomic_fetch_add(&c->n_out, moved);
            }
            if (moved && c->cfg.on_bytes) c->cfg.on_bytes(c->cfg.on_bytes_arg, moved);
            return WL_OK;
        }
        fill_from_resp(err, r, what);
        err->code = rc = wl__status_code(r->status);
        if (!retryable_status(r->status)) return rc;
    }
    return rc;
}

void wl_client_stats(wl_client_t *c, wl_stats_t *out)
{
    out->requests = atomic_load(&c->n_requests);
    out->retries = atomic_load(&c->n_retries);
    out->bytes_in = atomic_load(&c->n_in);
    out->bytes_out = atomic_load(&c->n_out);
    out->batch_requests = atomic_load(&c->n_batch);
    out->batch_entries = atomic_load(&c->n_batch_entries);
    out->single_gets = atomic_load(&c->n_single);
    out->batch_unsupported = atomic_load(&c->batch_unsupported);
}
