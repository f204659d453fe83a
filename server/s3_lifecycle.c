/*
 * s3_lifecycle: a bucket's lifecycle configuration (Put/Get/
 * DeleteBucketLifecycleConfiguration) and the x-amz-expiration header of the
 * objects an enabled Expiration rule covers (PUT, GET, HEAD, and
 * CompleteMultipartUpload). Parsing, S3's checks, matching and dates are
 * s3/lifecycle; the worker that carries the rules out comes later: it reads
 * a bucket's rules with s3_lifecycle_load and asks lc_decide.
 *
 * The configuration is kept in its canonical form (made-up rule IDs
 * included, so they stay the same from one GET to the next), as one
 * internal object per bucket incarnation, like CORS rules: a bucket name
 * reused starts without one, and DeleteBucket drops it.
 *
 * The bucket record carries a "lifecycle" entry while a configuration is
 * set, so that a GET or HEAD in a bucket without one costs nothing more
 * than the bucket record it reads anyway; only buckets with one pay a read
 * of the configuration. PUT writes the configuration, then the entry;
 * DELETE clears the entry, then the configuration: whatever the
 * interleaving of racing requests, the entry is never missing while a
 * configuration is stored (an entry left without one is harmless: the
 * header is then left out).
 */
#include "server/s3_int.h"

/* Bucket record entry while a configuration is stored: the stored object's upload id (its
 * version: what the parsed-configuration cache is keyed by; "1" from before the cache). */
#define LC_MARK "lifecycle"

/* The stored configuration of bucket incarnation iname (canonical XML, NUL-terminated): NULL
 * with *err (ERR_NOT_FOUND: none). */
static char *stored_body(obj_set_t *set, const char *iname, size_t *len, int *err)
{
    obj_info_t info;
    obj_reader_t *rd = obj_open(set, LC_OBJECTS, iname, &info, err);
    if (!rd) return NULL;
    if (info.size > LC_BODY_MAX) {
        obj_close(rd);
        *err = ERR_CORRUPT;
        return NULL;
    }
    char *body = xmalloc(info.size + 1);
    *err = obj_read(rd, 0, body, info.size);
    obj_close(rd);
    if (*err) {
        free(body);
        return NULL;
    }
    body[info.size] = 0;
    *len = info.size;
    return body;
}

static int store(ctx_t *x, const char *body, size_t len, char token[33])
{
    int err;
    obj_info_t info;
    obj_writer_t *w = obj_put_begin(x->cfg->set, LC_OBJECTS, x->ibucket, &err);
    if (!w) return err;
    if ((err = obj_put_write(w, body, len)) != 0) {
        obj_put_abort(w);
        return err;
    }
    /* Under the bucket's lock, against the same incarnation, as every commit into it. */
    if ((err = s3_commit_in_bucket(x, w, "application/xml", NULL, 0, &info)) == 0)
        memcpy(token, info.upload_id, 33);
    return err;
}

/* obj_umeta_fn: the bucket record with the LC_MARK entry set (arg non-NULL) or removed. */
static int mark_set(void *arg, const obj_info_t *cur, char *out, size_t *out_len)
{
    buf_t um = {xmalloc(cur->umeta_len + 1), cur->umeta_len, cur->umeta_len + 1};
    memcpy(um.p, cur->umeta, cur->umeta_len);
    s3_pairs_set(&um, LC_MARK, arg);
    int rc = um.len > sizeof(cur->umeta) ? ERR_TOO_LARGE : 0;
    if (!rc) {
        if (um.len) memcpy(out, um.p, um.len);
        *out_len = um.len;
    }
    free(um.p);
    return rc;
}

/* Set or clear the bucket record's entry, exclusive under the bucket's lock, against the
 * request's incarnation (as bucket tags are). */
static int mark(ctx_t *x, const char *token)
{
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_wrlock(lk);
    int rc = s3_bucket_current(x, x->bucket, x->ibucket)
                 ? obj_update_umeta(x->cfg->set, BUCKETS, x->bucket, mark_set, (void *)token)
                 : S3_ERR_NO_BUCKET;
    pthread_rwlock_unlock(lk);
    return rc == ERR_NOT_FOUND ? S3_ERR_NO_BUCKET : rc;
}

int s3_lifecycle_load(obj_set_t *set, const char *iname, lc_config_t *out)
{
    size_t len;
    int rc;
    memset(out, 0, sizeof(*out));
    char *body = stored_body(set, iname, &len, &rc);
    if (!body) return rc;
    lc_error_t e;
    rc = lc_parse(body, len, out, &e);
    free(body);
    if (rc == ERR_INVAL) {
        /* What PUT stored was checked: a refusal now means the object is damaged. */
        log_warn("event=lifecycle_unreadable bucket=%s why=\"%s\"", iname, e.message);
        rc = ERR_CORRUPT;
    }
    return rc;
}

int s3_lifecycle_marked(const obj_info_t *bucket_rec)
{
    return s3_umeta_get(bucket_rec, LC_MARK)[0] != 0;
}

void s3_lifecycle_forget(ctx_t *x)
{
    int rc = obj_delete(x->cfg->set, LC_OBJECTS, x->ibucket);
    if (rc && rc != ERR_NOT_FOUND)
        log_warn("event=lifecycle_drop_failed bucket=%s err=%s", x->bucket, err_name(rc));
}

static void put_lifecycle(ctx_t *x)
{
    size_t len;
    char *body = s3_read_digested_body(x, LC_BODY_MAX + 1, &len);
    if (!body) return;
    lc_config_t c;
    lc_error_t e;
    int rc = lc_parse(body, len, &c, &e);
    free(body);
    if (rc == ERR_INVAL) {
        static const s3_err_t map[] = {[LC_ERR_MALFORMED_XML] = S3E_MALFORMED_XML,
                                       [LC_ERR_INVALID_ARGUMENT] = S3E_INVALID_ARGUMENT,
                                       [LC_ERR_INVALID_REQUEST] = S3E_INVALID_REQUEST,
                                       [LC_ERR_NOT_IMPLEMENTED] = S3E_NOT_IMPLEMENTED};
        s3_err_msg(x, map[e.kind], e.message);
        return;
    }
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    char *canon = lc_serialize(&c, &len);
    lc_free(&c);
    char token[33];
    rc = store(x, canon, len, token);
    free(canon);
    if (!rc) rc = mark(x, token);
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    char h[128];
    (void)snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond(x->r, 200, h, 0);
}

void s3_lifecycle_op(ctx_t *x)
{
    const char *m = x->info->method;
    char h[256];
    int rc;
    if (strcmp(m, "GET") == 0) {
        size_t len;
        char *body = stored_body(x->cfg->set, x->ibucket, &len, &rc);
        if (!body) {
            if (rc == ERR_NOT_FOUND)
                s3_err(x, S3E_NO_SUCH_LIFECYCLE);
            else
                s3_engine_error(x, rc);
            return;
        }
        (void)snprintf(h, sizeof(h), "x-amz-request-id: %s\r\nContent-Type: application/xml\r\n",
                       x->id);
        (void)http_respond_full(x->r, 200, h, body, len);
        free(body);
    } else if (strcmp(m, "PUT") == 0) {
        put_lifecycle(x);
    } else if (strcmp(m, "DELETE") == 0) {
        rc = mark(x, NULL);
        if (!rc) rc = obj_delete(x->cfg->set, LC_OBJECTS, x->ibucket);
        if (rc && rc != ERR_NOT_FOUND) {
            s3_engine_error(x, rc);
            return;
        }
        (void)snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
        (void)http_respond(x->r, 204, h, 0);
    } else {
        s3_err(x, S3E_METHOD_NOT_ALLOWED);
    }
}

/*
 * Parsed configurations, kept between requests: a GET or HEAD in a bucket
 * with a configuration would otherwise read and parse it every time (a read
 * of k+m heads and a stripe, and up to a 1 MiB parse: measured 2.3 ms ->
 * 18 ms per HEAD with 1000 rules). Keyed by bucket incarnation and the
 * stored configuration's version (the bucket record's LC_MARK entry, read
 * with the record anyway), so a new configuration is a new key: nothing
 * to invalidate. Entries are shared, counted: a request keeps its one while
 * another replaces it in the table.
 */
#define LC_CACHE_SLOTS 64

typedef struct {
    int refs; /* the table's, and each request's holding it */
    char iname[INAME_MAX], token[40];
    lc_config_t c;
} lc_cached_t;

static pthread_mutex_t lc_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static lc_cached_t *lc_cache[LC_CACHE_SLOTS];

static void cached_put(lc_cached_t *e)
{
    if (e && __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        lc_free(&e->c);
        free(e);
    }
}

static lc_cached_t *cached_get(ctx_t *x, const char *token)
{
    uint32_t h = 2166136261u;
    for (const char *p = x->ibucket; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    lc_cached_t **slot = &lc_cache[h % LC_CACHE_SLOTS], *e;
    pthread_mutex_lock(&lc_cache_mu);
    if ((e = *slot) && !strcmp(e->iname, x->ibucket) && !strcmp(e->token, token)) {
        __atomic_add_fetch(&e->refs, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_unlock(&lc_cache_mu);
        return e;
    }
    pthread_mutex_unlock(&lc_cache_mu);
    e = xcalloc(1, sizeof(*e));
    int rc = s3_lifecycle_load(x->cfg->set, x->ibucket, &e->c);
    if (rc) {
        if (rc != ERR_NOT_FOUND)
            log_warn("event=lifecycle_read_failed bucket=%s err=%s", x->bucket, err_name(rc));
        free(e);
        return NULL;
    }
    snprintf(e->iname, sizeof(e->iname), "%s", x->ibucket);
    snprintf(e->token, sizeof(e->token), "%s", token);
    e->refs = 2;
    pthread_mutex_lock(&lc_cache_mu);
    lc_cached_t *old = *slot;
    *slot = e;
    pthread_mutex_unlock(&lc_cache_mu);
    cached_put(old);
    return e;
}

void s3_lifecycle_expiration(ctx_t *x, const obj_info_t *info, buf_t *hb)
{
    /* The bucket record is read once per request anyway: without the entry, nothing to do. */
    if (!s3_bucket_exists(x, x->bucket, NULL) || !s3_lifecycle_marked(&x->bucket_rec)) return;
    lc_cached_t *cached = cached_get(x, s3_umeta_get(&x->bucket_rec, LC_MARK));
    if (!cached) return; /* the header is advice: the request goes on without it */
    const lc_config_t *cp = &cached->c;
    /* Real days, whatever --lifecycle-day-seconds makes the worker's: the header is S3's
     * date (RGW's debug interval does the same; suites compare it with real days). */
    int64_t expiry;
    const lc_rule_t *r =
        lc_expiry(cp, x->key, s3_umeta_get(info, TAG_META), info->size,
                  (int64_t)(info->mtime_ns / 1000000000ull), LC_DAY_SECONDS, &expiry);
    /* A rule ID is at most 255 characters, each at most 12 bytes URL-encoded. */
    char v[3200];
    if (r && lc_expiration_header(r, expiry, v, sizeof(v))) {
        if (hb)
            buf_printf(hb, "x-amz-expiration: %s\r\n", v);
        else {
            buf_t line = {0};
            buf_printf(&line, "x-amz-expiration: %s\r\n", v);
            http_add_headers(x->r, line.p);
            free(line.p);
        }
    }
    cached_put(cached);
}
