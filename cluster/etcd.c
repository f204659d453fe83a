/*
 * etcd: the v3 JSON gateway through libcurl (contract in etcd.h).
 *
 * Requests are JSON objects POSTed to /v3/...; keys and values travel
 * base64-encoded and 64-bit numbers as strings (proto3's JSON mapping,
 * which also omits fields at their default: a txn that failed has no
 * "succeeded", a put event no "type"). A watch is one long POST whose
 * answer is a stream of JSON objects, one per line.
 */
#include "cluster/etcd.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ENDPOINTS   8
#define CALL_TIMEOUT_MS 5000
#define MAX_ANSWER      (64u << 20)

struct etcd {
    char *ep[MAX_ENDPOINTS];
    int nep;
    _Atomic int pref; /* the endpoint that answered last */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

etcd_t *etcd_new(const char *endpoints)
{
    pthread_once(&curl_once, curl_init);
    etcd_t *e = xcalloc(1, sizeof(*e));
    char *list = xstrdup(endpoints), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(t);
        while (n && t[n - 1] == '/')
            t[--n] = 0;
        if (e->nep == MAX_ENDPOINTS || (strncmp(t, "http://", 7) && strncmp(t, "https://", 8)) ||
            n < 9) {
            free(list);
            etcd_free(e);
            return NULL;
        }
        e->ep[e->nep++] = xstrdup(t);
    }
    free(list);
    if (!e->nep) {
        free(e);
        return NULL;
    }
    return e;
}

void etcd_free(etcd_t *e)
{
    if (!e) return;
    for (int i = 0; i < e->nep; i++)
        free(e->ep[i]);
    free(e);
}

/* ---- base64 ---- */

static char *b64(const void *p, size_t n)
{
    char *out = xmalloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

/* Decode s (malloc'd result, NUL-terminated after *n bytes); NULL when it is not base64. */
static char *unb64(const char *s, size_t *n)
{
    size_t l = strlen(s);
    if (l % 4) return NULL;
    char *out = xmalloc(l / 4 * 3 + 1);
    int got = l ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)l) : 0;
    if (got < 0) {
        free(out);
        return NULL;
    }
    size_t pad = l >= 1 && s[l - 1] == '=' ? (l >= 2 && s[l - 2] == '=' ? 2 : 1) : 0;
    *n = (size_t)got - pad;
    out[*n] = 0;
    return out;
}

static int64_t num(json_t *v)
{
    if (json_is_integer(v)) return json_integer_value(v);
    const char *s = json_string_value(v);
    return s ? strtoll(s, NULL, 10) : 0;
}

/* ---- one call ---- */

typedef struct {
    char *p;
    size_t len;
} answer_t;

static size_t collect(char *data, size_t sz, size_t n, void *arg)
{
    answer_t *a = arg;
    size_t add = sz * n;
    if (a->len + add > MAX_ANSWER) return 0; /* aborts the transfer */
    a->p = xrealloc(a->p, a->len + add + 1);
    memcpy(a->p + a->len, data, add);
    a->len += add;
    a->p[a->len] = 0;
    return add;
}

/*
 * POST body (a JSON object, stolen) to path on the first endpoint that
 * answers; the answer parsed into *out. 0 or ERR_IO (logged).
 */
static int call(etcd_t *e, const char *path, json_t *body, json_t **out)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    int first = atomic_load(&e->pref), rc = ERR_IO;
    char why[CURL_ERROR_SIZE] = "";
    for (int t = 0; t < e->nep && rc; t++) {
        int i = (first + t) % e->nep;
        char url[600];
        snprintf(url, sizeof(url), "%s%s", e->ep[i], path);
        CURL *c = curl_easy_init();
        if (!c) break;
        answer_t a = {0};
        long status = 0;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)CALL_TIMEOUT_MS);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, why);
        CURLcode cc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        if (cc == CURLE_OK && status == 200 && a.p) {
            json_error_t je;
            *out = json_loads(a.p, 0, &je);
            if (*out) {
                rc = 0;
                atomic_store(&e->pref, i);
            } else {
                snprintf(why, sizeof(why), "answer is not JSON");
            }
        } else if (cc == CURLE_OK) {
            snprintf(why, sizeof(why), "HTTP %ld: %.200s", status, a.p ? a.p : "");
        }
        free(a.p);
    }
    if (rc) log_warn("event=etcd_call_failed path=%s err=\"%s\"", path, why);
    free(text);
    return rc;
}

int etcd_get(etcd_t *e, const char *key, char **val, size_t *len, int64_t *mod_rev)
{
    char *k = b64(key, strlen(key));
    json_t *out;
    int rc = call(e, "/v3/kv/range", json_pack("{s:s}", "key", k), &out);
    free(k);
    if (rc) return rc;
    json_t *kv = json_array_get(json_object_get(out, "kvs"), 0);
    const char *v = json_string_value(json_object_get(kv, "value"));
    rc = ERR_NOT_FOUND;
    if (kv) {
        *val = unb64(v ? v : "", len);
        if (mod_rev) *mod_rev = num(json_object_get(kv, "mod_revision"));
        rc = *val ? 0 : ERR_IO;
    }
    json_decref(out);
    return rc;
}

int etcd_put(etcd_t *e, const char *key, const void *val, size_t len, int64_t lease)
{
    char *k = b64(key, strlen(key)), *v = b64(val, len), id[24];
    snprintf(id, sizeof(id), "%lld", (long long)lease);
    json_t *out, *body = json_pack("{s:s,s:s}", "key", k, "value", v);
    if (lease) json_object_set_new(body, "lease", json_string(id));
    free(k);
    free(v);
    int rc = call(e, "/v3/kv/put", body, &out);
    if (!rc) json_decref(out);
    return rc;
}

/* A compare of a transaction (etcd_txn's). */
static json_t *compare(const etcd_cmp_t *c)
{
    char r[24];
    char *k = b64(c->key, strlen(c->key));
    json_t *cmp;
    if (c->prefix) {
        /* Nothing in [key, key+1) written after rev (etcd 3.3's range compares). */
        size_t pl = strlen(c->key);
        char *end = xstrdup(c->key);
        end[pl - 1]++;
        char *e = b64(end, pl);
        free(end);
        snprintf(r, sizeof(r), "%lld", (long long)c->rev + 1);
        cmp = json_pack("{s:s,s:s,s:s,s:s,s:s}", "key", k, "range_end", e, "target", "MOD",
                        "result", "LESS", "mod_revision", r);
        free(e);
    } else if (c->rev) {
        snprintf(r, sizeof(r), "%lld", (long long)c->rev);
        cmp = json_pack("{s:s,s:s,s:s,s:s}", "key", k, "target", "MOD", "result", "EQUAL",
                        "mod_revision", r);
    } else {
        cmp = json_pack("{s:s,s:s,s:s,s:s}", "key", k, "target", "CREATE", "result", "EQUAL",
                        "create_revision", "0");
    }
    free(k);
    return cmp;
}

int etcd_txn(etcd_t *e, const etcd_cmp_t *cmps, int ncmp, const etcd_kv_t *puts, int nput)
{
    for (int i = 0; i < ncmp; i++)
        if (cmps[i].prefix &&
            (!cmps[i].key[0] || (uint8_t)cmps[i].key[strlen(cmps[i].key) - 1] == 0xff))
            return ERR_INVAL;
    json_t *cj = json_array(), *pj = json_array();
    for (int i = 0; i < ncmp; i++)
        json_array_append_new(cj, compare(&cmps[i]));
    for (int i = 0; i < nput; i++) {
        char *k = b64(puts[i].key, strlen(puts[i].key)), *v = b64(puts[i].val, puts[i].len);
        json_array_append_new(pj, json_pack("{s:{s:s,s:s}}", "request_put", "key", k, "value", v));
        free(k);
        free(v);
    }
    json_t *out;
    int rc = call(e, "/v3/kv/txn", json_pack("{s:o,s:o}", "compare", cj, "success", pj), &out);
    if (rc) return rc;
    rc = json_is_true(json_object_get(out, "succeeded")) ? 0 : ERR_PRECOND;
    json_decref(out);
    return rc;
}

int etcd_put_if(etcd_t *e, const char *key, const void *val, size_t len, int64_t rev)
{
    etcd_cmp_t c = {key, rev, 0};
    etcd_kv_t p = {key, val, len};
    return etcd_txn(e, &c, 1, &p, 1);
}

int etcd_delete(etcd_t *e, const char *key)
{
    char *k = b64(key, strlen(key));
    json_t *out;
    int rc = call(e, "/v3/kv/deleterange", json_pack("{s:s}", "key", k), &out);
    free(k);
    if (!rc) json_decref(out);
    return rc;
}

int etcd_list(etcd_t *e, const char *prefix, etcd_kv_fn fn, void *arg)
{
    return etcd_list_at(e, prefix, fn, arg, NULL);
}

int etcd_list_at(etcd_t *e, const char *prefix, etcd_kv_fn fn, void *arg, int64_t *rev)
{
    size_t pl = strlen(prefix);
    if (!pl || (uint8_t)prefix[pl - 1] == 0xff) return ERR_INVAL;
    char *end = xstrdup(prefix);
    end[pl - 1]++;
    char *k = b64(prefix, pl), *r = b64(end, pl);
    free(end);
    json_t *out;
    int rc = call(e, "/v3/kv/range", json_pack("{s:s,s:s}", "key", k, "range_end", r), &out);
    free(k);
    free(r);
    if (rc) return rc;
    if (rev) *rev = num(json_object_get(json_object_get(out, "header"), "revision"));
    json_t *kvs = json_object_get(out, "kvs"), *kv;
    size_t i;
    json_array_foreach(kvs, i, kv)
    {
        size_t kl, vl;
        const char *ks = json_string_value(json_object_get(kv, "key"));
        const char *vs = json_string_value(json_object_get(kv, "value"));
        char *key = unb64(ks ? ks : "", &kl), *val = unb64(vs ? vs : "", &vl);
        if (key && val) rc = fn(arg, key, val, vl);
        free(key);
        free(val);
        if (rc) break;
    }
    json_decref(out);
    return rc;
}

int etcd_lease_grant(etcd_t *e, int ttl_s, int64_t *id)
{
    json_t *out;
    int rc = call(e, "/v3/lease/grant", json_pack("{s:i}", "TTL", ttl_s), &out);
    if (rc) return rc;
    *id = num(json_object_get(out, "ID"));
    json_decref(out);
    return *id ? 0 : ERR_IO;
}

int etcd_lease_keepalive(etcd_t *e, int64_t id)
{
    char s[24];
    snprintf(s, sizeof(s), "%lld", (long long)id);
    json_t *out;
    int rc = call(e, "/v3/lease/keepalive", json_pack("{s:s}", "ID", s), &out);
    if (rc) return rc;
    /* An expired lease answers with TTL 0 (omitted). */
    rc = num(json_object_get(json_object_get(out, "result"), "TTL")) > 0 ? 0 : ERR_NOT_FOUND;
    json_decref(out);
    return rc;
}

int etcd_lease_revoke(etcd_t *e, int64_t id)
{
    char s[24];
    snprintf(s, sizeof(s), "%lld", (long long)id);
    json_t *out;
    int rc = call(e, "/v3/lease/revoke", json_pack("{s:s}", "ID", s), &out);
    if (!rc) json_decref(out);
    return rc;
}

/* ---- watch ---- */

struct etcd_watch {
    etcd_t *e;
    char *key;
    int64_t next_rev; /* the first revision not yet delivered */
    etcd_event_fn fn;
    void *arg;
    pthread_t thread;
    _Atomic int stop;
    answer_t line; /* a partial line of the stream */
};

/* One message of the stream: deliver its events. */
static void watch_message(etcd_watch_t *w, const char *text)
{
    json_error_t je;
    json_t *m = json_loads(text, 0, &je);
    json_t *res = json_object_get(m, "result"), *ev;
    size_t i;
    if (num(json_object_get(res, "compact_revision"))) {
        /* Our start was compacted away: deliver the key as it is now, go on from there. */
        char *val = NULL;
        size_t len = 0;
        int64_t rev = 0;
        int rc = etcd_get(w->e, w->key, &val, &len, &rev);
        if (rc == 0) w->fn(w->arg, val, len, rev, 0);
        free(val);
        w->next_rev = rc == 0 ? rev + 1 : num(json_object_get(res, "compact_revision"));
    }
    json_array_foreach(json_object_get(res, "events"), i, ev)
    {
        json_t *kv = json_object_get(ev, "kv");
        int64_t rev = num(json_object_get(kv, "mod_revision"));
        const char *type = json_string_value(json_object_get(ev, "type"));
        int del = type && strcmp(type, "DELETE") == 0;
        size_t len = 0;
        const char *vs = json_string_value(json_object_get(kv, "value"));
        char *val = del ? NULL : unb64(vs ? vs : "", &len);
        if (rev >= w->next_rev && (del || val)) {
            w->fn(w->arg, val, len, rev, del);
            w->next_rev = rev + 1;
        }
        free(val);
    }
    json_decref(m);
}

static size_t watch_data(char *data, size_t sz, size_t n, void *arg)
{
    etcd_watch_t *w = arg;
    size_t add = sz * n;
    if (collect(data, sz, n, &w->line) != add) return 0;
    char *nl;
    while ((nl = memchr(w->line.p, '\n', w->line.len))) {
        *nl = 0;
        watch_message(w, w->line.p);
        size_t rest = w->line.len - (size_t)(nl + 1 - w->line.p);
        memmove(w->line.p, nl + 1, rest);
        w->line.len = rest;
        w->line.p[rest] = 0;
    }
    return add;
}

static int watch_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    return atomic_load(&((etcd_watch_t *)arg)->stop);
}

static void *watch_run(void *arg)
{
    etcd_watch_t *w = arg;
    char *k = b64(w->key, strlen(w->key));
    for (int attempt = 0; !atomic_load(&w->stop); attempt++) {
        etcd_t *e = w->e;
        int i = (atomic_load(&e->pref) + attempt) % e->nep;
        char url[600], rev[24];
        snprintf(url, sizeof(url), "%s/v3/watch", e->ep[i]);
        snprintf(rev, sizeof(rev), "%lld", (long long)w->next_rev);
        json_t *body =
            json_pack("{s:{s:s,s:s}}", "create_request", "key", k, "start_revision", rev);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        CURL *c = curl_easy_init();
        if (c) {
            curl_easy_setopt(c, CURLOPT_URL, url);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_data);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
            curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, watch_progress);
            curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
            curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
            curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
            curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
            CURLcode cc = curl_easy_perform(c);
            curl_easy_cleanup(c);
            if (!atomic_load(&w->stop))
                log_warn("event=etcd_watch_broken key=%s err=\"%s\" resume_rev=%lld", w->key,
                         curl_easy_strerror(cc), (long long)w->next_rev);
        }
        free(text);
        w->line.len = 0;
        for (int t = 0; t < 10 && !atomic_load(&w->stop); t++)
            usleep(100 * 1000);
    }
    free(k);
    return NULL;
}

etcd_watch_t *etcd_watch_start(etcd_t *e, const char *key, int64_t from_rev, etcd_event_fn fn,
                               void *arg)
{
    etcd_watch_t *w = xcalloc(1, sizeof(*w));
    w->e = e;
    w->key = xstrdup(key);
    w->next_rev = from_rev;
    w->fn = fn;
    w->arg = arg;
    if (pthread_create(&w->thread, NULL, watch_run, w) != 0) {
        free(w->key);
        free(w);
        return NULL;
    }
    return w;
}

void etcd_watch_stop(etcd_watch_t *w)
{
    if (!w) return;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    free(w->line.p);
    free(w->key);
    free(w);
}
