/*
 * s3_lifecycle: a bucket's lifecycle configuration (Put/Get/
 * DeleteBucketLifecycleConfiguration) and the x-amz-expiration header of the
 * objects an enabled Expiration rule covers (PUT, GET, HEAD, and
 * CompleteMultipartUpload). Parsing, S3's checks, matching and dates are
 * s3/lifecycle; the worker that carries the rules out comes later: it reads
 * a bucket's rules with s3_lifecycle_load and asks lc_decide.
 *
 * The configuration is kept in its canonical form (made-up rule IDs
 * included, so they stay the same from one GET to the next), as internal
 * objects of the bucket incarnation, like CORS rules: a bucket name reused
 * starts without one, and DeleteBucket drops them.
 *
 * Each configuration PUT is a new object under a key of its own (the
 * incarnation, LC_KEY_SEP and a token made for it), written once and never
 * changed; the bucket record's "lifecycle" entry names the token of the one
 * in force. Rewriting that entry is the PUT's commit point: a PUT whose
 * entry does not stand answers the error (its object, unnamed, is left to
 * be collected), and a PUT that answers 200 is the configuration every node
 * reads from then on.
 * With the configuration in one object, first written and then named
 * (before), a PUT whose rewrite of the record was refused (a 4-node probe,
 * PUTs racing other rewrites of the record: every round) answered 503 with
 * its configuration stored, and every node kept serving the configuration
 * before it, cached under the record's unchanged entry, until the next PUT.
 * Objects the entry no longer names are removed by later PUTs and DELETEs
 * once older than LC_GC_NS (a PUT whose rewrite is refused tries again with
 * the same token: one seen replaced may yet be named; a probe saw it), and
 * with the bucket (every key under its prefix). A PUT whose object was
 * removed all the same writes it again before it answers.
 *
 * A GET or HEAD in a bucket without a configuration costs nothing more than
 * the bucket record it reads anyway; only buckets with one read it (parsed
 * copies are cached by incarnation and token: a token's object never
 * changes, so there is nothing to invalidate).
 */
#include "server/s3_int.h"

/* Bucket record entry while a configuration is set: the token of its object (LC_TOKEN_NEW
 * and 16 hex digits). Records from before keep "1" or the upload id of the one object the
 * incarnation had, at its name alone (LC_KEY_MAX: both fit). */
#define LC_MARK      "lifecycle"
#define LC_TOKEN_NEW '@'
#define LC_KEY_SEP   "\x05" /* no bucket name holds it: an incarnation's keys are a prefix */
#define LC_KEY_MAX   (INAME_MAX + 40)
#define LC_TOKEN_LEN 18 /* LC_TOKEN_NEW, 16 hex digits, NUL */

/* The key in LC_OBJECTS of the configuration token names in incarnation iname. */
static void lc_key(const char *iname, const char *token, char out[LC_KEY_MAX])
{
    if (token[0] == LC_TOKEN_NEW)
        snprintf(out, LC_KEY_MAX, "%s" LC_KEY_SEP "%s", iname, token);
    else
        snprintf(out, LC_KEY_MAX, "%s", iname); /* (a record from before) */
}

/* The token a bucket record names ("" for none). */
static const char *lc_token(const obj_info_t *bucket_rec)
{
    return s3_umeta_get(bucket_rec, LC_MARK);
}

/* The stored configuration token names in bucket incarnation iname (canonical XML,
 * NUL-terminated): NULL with *err (ERR_NOT_FOUND: none). */
static char *stored_body(obj_set_t *set, const char *iname, const char *token, size_t *len,
                         int *err)
{
    obj_info_t info;
    char key[LC_KEY_MAX];
    if (!token[0]) {
        *err = ERR_NOT_FOUND;
        return NULL;
    }
    lc_key(iname, token, key);
    obj_reader_t *rd = obj_open(set, LC_OBJECTS, key, &info, err);
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

/* A configuration as a new object of the request's bucket incarnation, under a new token
 * (fresh: made into token) or token again. Not in force: nothing names it until the bucket
 * record does. */
static int store(ctx_t *x, const char *body, size_t len, char token[LC_TOKEN_LEN], int fresh)
{
    uint8_t rnd[8];
    char key[LC_KEY_MAX];
    int err;
    if (fresh) {
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) return ERR_IO;
        token[0] = LC_TOKEN_NEW;
        for (int i = 0; i < 8; i++)
            snprintf(token + 1 + 2 * i, 3, "%02x", rnd[i]);
    }
    lc_key(x->ibucket, token, key);
    obj_writer_t *w = obj_put_begin(x->cfg->set, LC_OBJECTS, key, &err);
    if (!w) return err;
    if ((err = obj_put_write(w, body, len)) != 0) {
        obj_put_abort(w);
        return err;
    }
    return obj_put_commit(w, "application/xml", NULL, 0, NULL);
}

/* The bucket record with the LC_MARK entry set to arg (NULL: removed): an obj_umeta_fn. */
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

/* Set (token) or clear (NULL) the bucket record's entry, exclusive under the bucket's lock,
 * against the request's incarnation (as bucket tags are). 0 once it stands. */
static int mark(ctx_t *x, const char *token)
{
    pthread_rwlock_t *lk = s3_bucket_lock(x->bucket);
    pthread_rwlock_wrlock(lk);
    int rc = s3_bucket_current(x, x->bucket, x->ibucket)
                 ? obj_update_umeta(x->cfg->set, BUCKETS, x->bucket, mark_set, (void *)token)
                 : S3_ERR_NO_BUCKET;
    pthread_rwlock_unlock(lk);
    if (rc && rc != ERR_NOT_FOUND && rc != S3_ERR_NO_BUCKET) {
        /* Whether it stands decides the answer, not the rewrite's own outcome: one that
         * failed short of its quorum may have landed where readers see it, and one undone
         * (ERR_THROTTLED) may have been read in flight by another rewrite of the record
         * (tags, versioning), which carried the entry over (a 4-node probe). */
        obj_info_t bi;
        if (obj_stat_standing(x->cfg->set, BUCKETS, x->bucket, &bi) == 0 &&
            strcmp(lc_token(&bi), token ? token : "") == 0)
            rc = 0;
    }
    return rc == ERR_NOT_FOUND ? S3_ERR_NO_BUCKET : rc;
}

typedef struct {
    char **keys;
    int n, all;
    uint64_t before; /* only objects made before (ns), unless all */
} keys_t;

#define LC_GC_NS  (60ull * 1000000000) /* far longer than a PUT's rewrite takes */
#define LC_GC_MAX 1000                 /* keys at once: one in force, leftovers */

static int collect_key(void *arg, const char *key, const obj_info_t *info)
{
    keys_t *k = arg;
    if (k->all || info->mtime_ns < k->before) k->keys[k->n++] = xstrdup(key);
    return k->n == LC_GC_MAX;
}

/*
 * Remove the request's incarnation's configuration objects but the one the bucket record
 * names: all of them (all: the bucket is gone), or those older than LC_GC_NS (a PUT may
 * still be naming a newer one). Best effort: what is left goes later.
 */
static void collect(ctx_t *x, int all)
{
    char prefix[LC_KEY_MAX], named[LC_KEY_MAX] = "";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    keys_t k = {xcalloc(LC_GC_MAX + 1, sizeof(char *)), 0, all, now - LC_GC_NS};
    snprintf(prefix, sizeof(prefix), "%s" LC_KEY_SEP, x->ibucket);
    int rc = obj_list(x->cfg->set, LC_OBJECTS, prefix, NULL, collect_key, &k);
    k.keys[k.n++] = xstrdup(x->ibucket); /* the one object of a record from before */
    obj_info_t bi;
    if (!all && rc >= 0) {
        /* Read after the listing: a name set since is of an object too new to be listed. */
        rc = obj_stat_standing(x->cfg->set, BUCKETS, x->bucket, &bi);
        if (rc == 0 && lc_token(&bi)[0]) lc_key(x->ibucket, lc_token(&bi), named);
    }
    int n = k.n;
    if (!all && rc < 0) {
        log_warn("event=lifecycle_collect_failed bucket=%s err=%s", x->bucket, err_name(rc));
        n = 0; /* none is known to be unnamed */
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(k.keys[i], named) != 0) {
            int dr = obj_delete(x->cfg->set, LC_OBJECTS, k.keys[i]);
            if (dr && dr != ERR_NOT_FOUND)
                log_warn("event=lifecycle_drop_failed bucket=%s err=%s", x->bucket, err_name(dr));
        }
    }
    for (int i = 0; i < LC_GC_MAX + 1; i++)
        free(k.keys[i]);
    free(k.keys);
}

int s3_lifecycle_load(obj_set_t *set, const char *iname, const obj_info_t *bucket_rec,
                      lc_config_t *out)
{
    size_t len;
    int rc;
    memset(out, 0, sizeof(*out));
    char *body = stored_body(set, iname, lc_token(bucket_rec), &len, &rc);
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
    return lc_token(bucket_rec)[0] != 0;
}

int s3_lifecycle_heal(obj_set_t *set, const char *iname, const obj_info_t *bucket_rec,
                      obj_heal_report_t *rep)
{
    char key[LC_KEY_MAX];
    int rc = obj_heal(set, LC_OBJECTS, iname, rep); /* (the one object from before, if any) */
    const char *token = lc_token(bucket_rec);
    if (!rc && token[0] == LC_TOKEN_NEW) {
        lc_key(iname, token, key);
        rc = obj_heal(set, LC_OBJECTS, key, rep);
    }
    return rc;
}

void s3_lifecycle_forget(ctx_t *x)
{
    collect(x, 1);
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
    char token[LC_TOKEN_LEN] = "", key[LC_KEY_MAX];
    rc = store(x, canon, len, token, 1);
    if (!rc) rc = mark(x, token);
    lc_key(x->ibucket, token, key);
    /* Not named: the object is left to collect() (another rewrite may yet carry the entry
     * over from this one's, read in flight: removed now, the record could name nothing). */
    if (!rc) {
        /* Named: there it must be (a collection that took it for a leftover of a PUT that
         * failed, had this one taken more than LC_GC_NS, is undone). */
        obj_info_t oi;
        if (obj_stat(x->cfg->set, LC_OBJECTS, key, &oi) == ERR_NOT_FOUND)
            rc = store(x, canon, len, token, 0);
        if (!rc) collect(x, 0);
    } else if (rc == S3_ERR_NO_BUCKET && token[0]) {
        /* The incarnation is gone (a DeleteBucket between the store and the mark): nothing of
         * it will collect this object later; removed now (a rewrite of a deleted record never
         * lands, so nothing can name it). */
        int dr = obj_delete(x->cfg->set, LC_OBJECTS, key);
        if (dr && dr != ERR_NOT_FOUND)
            log_warn("event=lifecycle_drop_failed bucket=%s err=%s", x->bucket, err_name(dr));
    }
    free(canon);
    if (rc) {
        s3_engine_error(x, rc);
        return;
    }
    char h[128];
    (void)snprintf(h, sizeof(h), "x-amz-request-id: %s\r\n", x->id);
    (void)http_respond(x->r, 200, h, 0);
}

static void get_lifecycle(ctx_t *x)
{
    char h[256];
    size_t len;
    int rc = ERR_NOT_FOUND;
    char *body = NULL;
    for (int i = 0; i < 4 && !body; i++) {
        char token[LC_KEY_MAX];
        snprintf(token, sizeof(token), "%s", lc_token(&x->bucket_rec));
        body = stored_body(x->cfg->set, x->ibucket, token, &len, &rc);
        /* Gone: replaced since the record was read (its object removed). Read it again. */
        if (body || rc != ERR_NOT_FOUND || !token[0]) break;
        if (!s3_bucket_current(x, x->bucket, x->ibucket)) {
            s3_err(x, S3E_NO_SUCH_BUCKET);
            return;
        }
        if (!strcmp(token, lc_token(&x->bucket_rec))) break; /* named, yet gone: none */
    }
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
}

void s3_lifecycle_op(ctx_t *x)
{
    const char *m = x->info->method;
    char h[256];
    if (strcmp(m, "GET") == 0) {
        get_lifecycle(x);
    } else if (strcmp(m, "PUT") == 0) {
        put_lifecycle(x);
    } else if (strcmp(m, "DELETE") == 0) {
        int rc = mark(x, NULL);
        if (rc) {
            s3_engine_error(x, rc);
            return;
        }
        collect(x, 0);
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
 * token of the configuration's object (the bucket record's LC_MARK entry,
 * read with the record anyway), which never changes: a new configuration is
 * a new key, nothing to invalidate. Entries are shared, counted: a request keeps its one while
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
    int rc = s3_lifecycle_load(x->cfg->set, x->ibucket, &x->bucket_rec, &e->c);
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
