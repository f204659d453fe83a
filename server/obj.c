#include "server/obj.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/num.h"
#include "storage/rec.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define BLK_SUFFIX "\x01"
#define SHARD_BITS 5
#define HEAD_MAX   8192 /* a head's metadata: 2 KiB of user metadata and small fields */

/*
 * A small pool per set runs shard I/O in parallel: the k+m block writes of
 * a stripe (so a PUT waits for one durable write per stripe instead of k+m
 * in a row) and the block reads of a stripe for GETs.
 */
typedef struct latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int left;
} latch_t;

typedef struct pool_job {
    void (*run)(struct pool_job *j);
    struct pool_job *next;
    latch_t *latch;
} pool_job_t;

typedef struct {
    pool_job_t base;
    const shard_store_t *st;
    drive_id_t id;
    const void *data;
    size_t len;
    const void *meta; /* heads: metadata only */
    size_t meta_len;
    int rc;
} put_job_t;

static void latch_init(latch_t *l)
{
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->left = 0;
}

static void latch_wait(latch_t *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->left > 0)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

static void latch_destroy(latch_t *l)
{
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
}

static void run_put(pool_job_t *j)
{
    put_job_t *p = (put_job_t *)j;
    p->rc = p->st->ops->put(p->st->ctx, &p->id, p->data, p->len, p->meta, p->meta_len);
}

/*
 * Pins keep a version's blocks while a reader streams it: a PUT or DELETE
 * that replaces the version hands its drop to the pin, and the last reader
 * to close runs it. A crash in between leaves the old blocks as unreferenced
 * space, never a reader with its blocks pulled away mid-stream.
 */
typedef struct pin {
    char upload_id[33];
    int refs;
    struct deferred_drop *drops;
    struct pin *next;
} pin_t;

typedef struct deferred_drop {
    char *bucket, *key;
    obj_info_t old;
    struct deferred_drop *next;
} deferred_drop_t;

/* Commits to one key are serialised (striped locks): the head order is the mtime order. */
#define KEY_LOCKS 256

struct obj_set {
    shard_store_t st[OBJ_MAX_SHARDS];
    int k, m, n;
    uint32_t block;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pool_job_t *head, *tail;
    int queued; /* jobs waiting for a pool thread */
    int stop, nthreads;
    pthread_t threads[8 * OBJ_MAX_SHARDS];
    pthread_mutex_t key_locks[KEY_LOCKS];
    /*
     * Per upload (striped): a part's commit, Complete and Abort of one
     * upload exclude each other, so a part that finishes after an abort or a
     * complete is refused instead of left behind. Taken before key locks.
     */
    pthread_mutex_t mpu_locks[KEY_LOCKS];
    pthread_mutex_t pin_mu;
    pin_t *pins;
    uint64_t drop_epoch; /* versions dropped at once (unpinned); under pin_mu */
    bufpool_t *bufs;     /* stripe-sized buffers of PUTs and GETs */
};

static void *pool_worker(void *arg)
{
    obj_set_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head) break;
        pool_job_t *j = s->head;
        s->queued--;
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        latch_t *l = j->latch; /* j may be gone once the latch opens */
        j->run(j);
        pthread_mutex_lock(&l->mu);
        if (--l->left == 0) pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Queue n jobs on latch l (which counts them); the caller waits with latch_wait. */
static void pool_submit(obj_set_t *s, pool_job_t **jobs, int n, latch_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->left += n;
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < n; i++) {
        jobs[i]->latch = l;
        jobs[i]->next = NULL;
        s->queued++;
        if (s->tail)
            s->tail->next = jobs[i];
        else
            s->head = jobs[i];
        s->tail = jobs[i];
    }
    /*
     * Wake one idle thread per job, not all of them: a broadcast woke every
     * idle thread of the pool (48 here) to fight over the lock and sleep
     * again, ~0.35 ms of a 2-core machine per submit.
     */
    for (int i = 0; i < n; i++)
        pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

obj_set_t *obj_set_new(const shard_store_t *stores, int k, int m, uint32_t block, int *err)
{
    ers_layout_t chk = {(uint8_t)k, (uint8_t)m, block, 1};
    if (k < 1 || m < 0 || ers_layout_check(&chk) != 0) {
        *err = ERR_INVAL;
        return NULL;
    }
    obj_set_t *s = xcalloc(1, sizeof(*s));
    s->k = k;
    s->m = m;
    s->n = k + m;
    s->block = block;
    memcpy(s->st, stores, sizeof(*stores) * (size_t)s->n);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->pin_mu, NULL);
    for (int i = 0; i < KEY_LOCKS; i++) {
        pthread_mutex_init(&s->key_locks[i], NULL);
        pthread_mutex_init(&s->mpu_locks[i], NULL);
    }
    /*
     * Eight per store: a shard write blocks its thread until durable, so the
     * pool size caps how many writes each drive's group commit can batch
     * (measured: 4 KiB PUTs at 32 clients 1075 -> 1190-1415 ops/s going from
     * 2 to 8 per store, large GETs unchanged).
     */
    s->nthreads = 8 * s->n;
    s->bufs = bufpool_new(OBJ_BUF_KEEP);

    int started = 0, rc = 0;
    for (; started < s->nthreads; started++) {
        if ((rc = pthread_create(&s->threads[started], NULL, pool_worker, s)) != 0) break;
        pthread_setname_np(s->threads[started], "wl-pool");
    }
    if (rc) {
        log_error("event=pool_start_failed errno=%d threads=%d", rc, started);
        s->nthreads = started; /* obj_set_free joins the ones that run */
        obj_set_free(s);
        *err = ERR_NOMEM;
        return NULL;
    }
    *err = 0;
    return s;
}

void obj_set_free(obj_set_t *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nthreads; i++)
        pthread_join(s->threads[i], NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->pin_mu);
    for (int i = 0; i < KEY_LOCKS; i++) {
        pthread_mutex_destroy(&s->key_locks[i]);
        pthread_mutex_destroy(&s->mpu_locks[i]);
    }
    bufpool_free(s->bufs);
    free(s);
}

bufpool_t *obj_set_buffers(obj_set_t *s)
{
    return s->bufs;
}

int obj_set_width(const obj_set_t *s)
{
    return s->n;
}

int obj_set_stats(obj_set_t *s, int i, drive_stats_t *st)
{
    if (i < 0 || i >= s->n || !s->st[i].ops->stats) return ERR_NOT_FOUND;
    s->st[i].ops->stats(s->st[i].ctx, st);
    return 0;
}

typedef struct {
    pool_job_t base;
    void (*fn)(void *ctx, unsigned i);
    void *ctx;
    unsigned i;
} par_job_t;

static void run_par(pool_job_t *j)
{
    par_job_t *p = (par_job_t *)j;
    p->fn(p->ctx, p->i);
}

/* ers_parallel_fn on the set's pool: the block reads of a stripe at once. */
static void obj_parallel(void *arg, unsigned n, void (*fn)(void *ctx, unsigned i), void *ctx)
{
    obj_set_t *s = arg;
    par_job_t jobs[OBJ_MAX_SHARDS];
    pool_job_t *q[OBJ_MAX_SHARDS];
    latch_t l;
    /* n <= ERS_MAX_K <= OBJ_MAX_SHARDS: the data blocks of one stripe. */
    pthread_mutex_lock(&s->mu);
    int busy = s->queued > 0;
    pthread_mutex_unlock(&s->mu);
    if (busy) {
        /* The drives are busy with other streams: more depth would only lengthen queues. */
        for (unsigned i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    latch_init(&l);
    for (unsigned i = 0; i < n; i++) {
        jobs[i] = (par_job_t){{run_par, NULL, NULL}, fn, ctx, i};
        q[i] = &jobs[i].base;
    }
    pool_submit(s, q, (int)n, &l);
    latch_wait(&l);
    latch_destroy(&l);
}

/* ---- head metadata: u8 version, then (u8 tag, u16 len, bytes)* ---- */

enum {
    T_LAYOUT = 1,
    T_UPLOAD,
    T_ETAG,
    T_CTYPE,
    T_MTIME,
    T_UMETA,
    T_DELETED,
    T_MULTIPART, /* u64 size, u32 parts: the object is the parts of upload T_UPLOAD */
    T_END = 255
};

#define MPU_UPLOADS                                                                                \
    "\x03"                                                                                         \
    "mpu" /* one object per upload: body "bucket\nkey" */
#define MPU_PARTS                                                                                  \
    "\x03"                                                                                         \
    "mpp" /* one object per part: "<upload>/<part, 5 digits>" */
#define MPU_MANIFEST                                                                               \
    "\x03"                                                                                         \
    "mpm" /* per completed upload: "part size etag" lines */

static size_t put_tlv(uint8_t *b, size_t pos, size_t cap, uint8_t tag, const void *v, size_t n)
{
    if (pos == SIZE_MAX || n > 65535 || pos + 3 + n > cap) return SIZE_MAX;
    b[pos] = tag;
    b[pos + 1] = (uint8_t)n;
    b[pos + 2] = (uint8_t)(n >> 8);
    if (n) memcpy(b + pos + 3, v, n);
    return pos + 3 + n;
}

size_t obj_meta_encode(const obj_info_t *in, uint8_t *b, size_t cap)
{
    uint8_t lay[ERS_LAYOUT_SIZE], mt[8];
    size_t pos = 1;
    if (cap < 1) return 0;
    b[0] = 1;
    for (int i = 0; i < 8; i++)
        mt[i] = (uint8_t)(in->mtime_ns >> (8 * i));
    pos = put_tlv(b, pos, cap, T_MTIME, mt, 8);
    pos = put_tlv(b, pos, cap, T_UPLOAD, in->upload_id, strlen(in->upload_id));
    if (in->deleted) {
        pos = put_tlv(b, pos, cap, T_DELETED, NULL, 0);
    } else {
        if (in->multipart) {
            uint8_t mp[12];
            for (int i = 0; i < 8; i++)
                mp[i] = (uint8_t)(in->size >> (8 * i));
            for (int i = 0; i < 4; i++)
                mp[8 + i] = (uint8_t)((uint32_t)in->nparts >> (8 * i));
            pos = put_tlv(b, pos, cap, T_MULTIPART, mp, sizeof(mp));
        } else {
            ers_layout_encode(&in->layout, lay);
            pos = put_tlv(b, pos, cap, T_LAYOUT, lay, sizeof(lay));
        }
        pos = put_tlv(b, pos, cap, T_ETAG, in->etag, strlen(in->etag));
        pos = put_tlv(b, pos, cap, T_CTYPE, in->content_type, strlen(in->content_type));
        pos = put_tlv(b, pos, cap, T_UMETA, in->umeta, in->umeta_len);
    }
    /* An explicit end: a blob cut short at a field boundary is not mistaken for whole. */
    pos = put_tlv(b, pos, cap, T_END, NULL, 0);
    return pos == SIZE_MAX ? 0 : pos;
}

static int get_str(char *dst, size_t cap, const uint8_t *v, size_t n)
{
    if (n >= cap || memchr(v, 0, n)) return ERR_CORRUPT;
    memcpy(dst, v, n);
    dst[n] = 0;
    return 0;
}

int obj_meta_decode(const uint8_t *b, size_t len, obj_info_t *o)
{
    size_t pos = 1;
    int seen = 0;
    memset(o, 0, sizeof(*o));
    if (len < 1 || b[0] != 1) return ERR_CORRUPT;
    while (pos < len) {
        if (len - pos < 3) return ERR_CORRUPT;
        uint8_t tag = b[pos];
        size_t n = (size_t)b[pos + 1] | (size_t)b[pos + 2] << 8;
        const uint8_t *v = b + pos + 3;
        if (n > len - pos - 3) return ERR_CORRUPT;
        switch (tag) {
        case T_LAYOUT:
            if (ers_layout_decode(v, n, &o->layout) != 0) return ERR_CORRUPT;
            o->size = o->layout.size;
            seen |= 1;
            break;
        case T_UPLOAD:
            if (get_str(o->upload_id, sizeof(o->upload_id), v, n)) return ERR_CORRUPT;
            seen |= 2;
            break;
        case T_ETAG:
            if (get_str(o->etag, sizeof(o->etag), v, n)) return ERR_CORRUPT;
            break;
        case T_CTYPE:
            if (get_str(o->content_type, sizeof(o->content_type), v, n)) return ERR_CORRUPT;
            break;
        case T_MTIME:
            if (n != 8) return ERR_CORRUPT;
            for (int i = 0; i < 8; i++)
                o->mtime_ns |= (uint64_t)v[i] << (8 * i);
            seen |= 4;
            break;
        case T_UMETA:
            if (n > sizeof(o->umeta) || (n && v[n - 1] != 0)) return ERR_CORRUPT;
            memcpy(o->umeta, v, n);
            o->umeta_len = n;
            break;
        case T_DELETED:
            o->deleted = 1;
            seen |= 1;
            break;
        case T_MULTIPART:
            if (n != 12) return ERR_CORRUPT;
            o->multipart = 1;
            for (int i = 0; i < 8; i++)
                o->size |= (uint64_t)v[i] << (8 * i);
            for (int i = 0; i < 4; i++)
                o->nparts |= (int)((uint32_t)v[8 + i] << (8 * i));
            if (o->nparts < 1 || o->nparts > 10000) return ERR_CORRUPT;
            seen |= 1;
            break;
        case T_END:
            return seen == 7 && pos + 3 == len ? 0 : ERR_CORRUPT;
        default:
            break; /* newer fields are skipped, not refused */
        }
        pos += 3 + n;
    }
    return ERR_CORRUPT; /* no end marker */
}

/* ---- heads ---- */

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The newest head over all stores; counts how many stores hold it. */
static int newest_head(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best)
{
    uint8_t meta[HEAD_MAX];
    int found = 0, absent = 0, rc = ERR_NOT_FOUND;
    for (int i = 0; i < s->n; i++) {
        drive_id_t id = {bucket, key, "", (uint32_t)i};
        drive_stat_t st;
        obj_info_t o;
        int src = s->st[i].ops->stat(s->st[i].ctx, &id, &st, meta, sizeof(meta));
        if (src == ERR_NOT_FOUND) absent++;
        if (src != 0 || st.meta_len > sizeof(meta) || obj_meta_decode(meta, st.meta_len, &o))
            continue;
        if (!found || o.mtime_ns > best->mtime_ns ||
            (o.mtime_ns == best->mtime_ns && strcmp(o.upload_id, best->upload_id) > 0))
            *best = o;
        found++;
        rc = 0;
    }
    /*
     * A committed version has heads on at least k stores: when more than m
     * say "absent" it cannot exist; fewer means failing stores hide the
     * verdict, and "not found" would be a guess (a listing would skip a key
     * that is there).
     */
    if (!found && absent <= s->m) return ERR_UNRECOVERABLE;
    return rc;
}

int obj_stat(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info)
{
    int rc = newest_head(s, bucket, key, info);
    if (rc == 0 && info->deleted) return ERR_NOT_FOUND;
    return rc;
}

/* out: REC_MAX_BUCKET + 2 bytes; bucket: at most REC_MAX_BUCKET - 1 bytes (checked by callers). */
static void blk_bucket(char *out, const char *bucket)
{
    size_t n = strnlen(bucket, REC_MAX_BUCKET - 1);
    memcpy(out, bucket, n);
    memcpy(out + n, BLK_SUFFIX, 2);
}

/* Delete the blocks of one version (best effort: leftovers are only space). */
static void drop_blocks(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                        uint64_t stripes, uint32_t dead)
{
    char bb[REC_MAX_BUCKET + 2];
    blk_bucket(bb, bucket);
    for (uint64_t st = 0; st < stripes; st++)
        for (int i = 0; i < s->n; i++) {
            if (dead & (1u << i)) continue;
            drive_id_t id = {bb, key, upload, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            (void)s->st[i].ops->del(s->st[i].ctx, &id);
        }
}

/*
 * Write a head on every store not in `dead`. Returns the number written;
 * *first_err gets the first failure.
 */
/* A head on every live store, all at once (one durable write's time, not n). */
static int write_heads(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *info,
                       uint32_t dead, int *first_err)
{
    uint8_t meta[HEAD_MAX];
    size_t ml = obj_meta_encode(info, meta, sizeof(meta));
    put_job_t jobs[OBJ_MAX_SHARDS];
    pool_job_t *q[OBJ_MAX_SHARDS];
    latch_t l;
    int heads = 0, n = 0;
    *first_err = ml ? 0 : ERR_TOO_LARGE;
    if (!ml) return 0;
    for (int i = 0; i < s->n; i++) {
        if (dead & (1u << i)) continue;
        jobs[n] = (put_job_t){.base = {run_put, NULL, NULL},
                              .st = &s->st[i],
                              .id = {bucket, key, "", (uint32_t)i},
                              .meta = meta,
                              .meta_len = ml};
        q[n] = &jobs[n].base;
        n++;
    }
    latch_init(&l);
    pool_submit(s, q, n, &l);
    latch_wait(&l);
    latch_destroy(&l);
    for (int i = 0; i < n; i++) {
        if (jobs[i].rc == 0)
            heads++;
        else if (!*first_err)
            *first_err = jobs[i].rc;
    }
    return heads;
}

static int read_manifest(obj_set_t *s, const char *upload, int nparts, int **part_no,
                         uint64_t **sizes);

/* Delete an internal object; a failure only leaves space behind, so it is logged. */
static void drop_object(obj_set_t *s, const char *bucket, const char *key)
{
    int rc = obj_delete(s, bucket, key);
    if (rc && rc != ERR_NOT_FOUND) log_warn("event=drop_failed key=%s err=%s", key, err_name(rc));
}

static void part_key(char *out, size_t cap, const char *upload, int part)
{
    snprintf(out, cap, "%s/%05d", upload, part);
}

static pthread_mutex_t *key_lock(obj_set_t *s, const char *bucket, const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a over "bucket\0key" */
    for (const char *p = bucket;; p++) {
        h = (h ^ (uint8_t)*p) * 16777619u;
        if (!*p) break;
    }
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &s->key_locks[h % KEY_LOCKS];
}

static pthread_mutex_t *mpu_lock(obj_set_t *s, const char *upload)
{
    uint32_t h = 2166136261u;
    for (const char *p = upload; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &s->mpu_locks[h % KEY_LOCKS];
}

static pin_t **pin_find(obj_set_t *s, const char *upload_id)
{
    pin_t **pp = &s->pins;
    while (*pp && strcmp((*pp)->upload_id, upload_id) != 0)
        pp = &(*pp)->next;
    return pp;
}

/* Pin a version; returns the drop epoch seen under the pin lock. */
static uint64_t pin(obj_set_t *s, const char *upload_id)
{
    pthread_mutex_lock(&s->pin_mu);
    uint64_t epoch = __atomic_load_n(&s->drop_epoch, __ATOMIC_ACQUIRE);
    pin_t **pp = pin_find(s, upload_id);
    if (!*pp) {
        *pp = xcalloc(1, sizeof(pin_t));
        snprintf((*pp)->upload_id, sizeof((*pp)->upload_id), "%s", upload_id);
    }
    (*pp)->refs++;
    pthread_mutex_unlock(&s->pin_mu);
    return epoch;
}

static void drop_version_now(obj_set_t *s, const char *bucket, const char *key,
                             const obj_info_t *old);

static void unpin(obj_set_t *s, const char *upload_id)
{
    pthread_mutex_lock(&s->pin_mu);
    pin_t **pp = pin_find(s, upload_id), *p = *pp;
    deferred_drop_t *drops = NULL;
    if (p && --p->refs == 0) {
        *pp = p->next;
        drops = p->drops;
        free(p);
    }
    pthread_mutex_unlock(&s->pin_mu);
    while (drops) {
        deferred_drop_t *d = drops;
        drops = d->next;
        drop_version_now(s, d->bucket, d->key, &d->old);
        free(d->bucket);
        free(d->key);
        free(d);
    }
}

/* Free the storage of a replaced or deleted version, now or when its last reader closes. */
static void drop_version(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *old)
{
    pthread_mutex_lock(&s->pin_mu);
    pin_t *p = *pin_find(s, old->upload_id);
    if (p) {
        deferred_drop_t *d = xcalloc(1, sizeof(*d));
        d->bucket = xstrdup(bucket);
        d->key = xstrdup(key);
        d->old = *old;
        d->next = p->drops;
        p->drops = d;
    } else {
        __atomic_fetch_add(&s->drop_epoch, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->pin_mu);
    if (!p) drop_version_now(s, bucket, key, old);
}

/* Best effort: what fails to go is unreferenced space, not visible data. */
static void drop_version_now(obj_set_t *s, const char *bucket, const char *key,
                             const obj_info_t *old)
{
    if (!old->multipart) {
        drop_blocks(s, bucket, key, old->upload_id, ers_stripe_count(&old->layout), 0);
        return;
    }
    int *parts = NULL;
    uint64_t *sizes = NULL;
    if (read_manifest(s, old->upload_id, old->nparts, &parts, &sizes) == 0) {
        for (int i = 0; i < old->nparts; i++) {
            char pk[64];
            part_key(pk, sizeof(pk), old->upload_id, parts[i]);
            drop_object(s, MPU_PARTS, pk);
        }
    }
    drop_object(s, MPU_MANIFEST, old->upload_id);
    free(parts);
    free(sizes);
}

/* ---- writer ---- */

struct obj_writer {
    obj_set_t *s;
    char bucket[REC_MAX_BUCKET + 2], bbucket[REC_MAX_BUCKET + 2];
    char *key;
    char upload[33];
    ers_encoder_t *enc;
    EVP_MD_CTX *md5;
    /*
     * Two stripe slots: while the k+m writes of one stripe are in flight the
     * next is received, hashed and encoded into the other. Per slot and
     * shard: block + crc, the record payload (n x (B + 4)).
     */
    uint8_t *blk[2];
    uint32_t blen[2][OBJ_MAX_SHARDS];
    put_job_t jobs[2][OBJ_MAX_SHARDS];
    latch_t latch[2];
    int inflight[2];
    uint32_t dead; /* stores that failed a write: skipped from then on */
    int cause;     /* why stores failed, when it says more than "unavailable": throttled, full */
    int err;
    uint64_t stripes;
    char etag[33];       /* set once the MD5 is final; no writes after that */
    char mpu_upload[33]; /* a part of this upload: it must still be open at the commit */
};

static int new_upload_id(char out[33])
{
    uint8_t r[16];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) return ERR_IO;
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    return 0;
}

/*
 * More than m stores failed: the PUT fails. Say why in the terms a client
 * can act on: throttled (retry later: 503 SlowDown), full (507), else the
 * drives are unavailable.
 */
static int dead_verdict(const obj_writer_t *w)
{
    if (__builtin_popcount(w->dead) <= w->s->m) return 0;
    return w->cause ? w->cause : ERR_UNRECOVERABLE;
}

/* Wait for the writes of a slot's stripe; failed stores join w->dead. */
static int slot_wait(obj_writer_t *w, int slot)
{
    obj_set_t *s = w->s;
    if (!w->inflight[slot]) return 0;
    latch_wait(&w->latch[slot]);
    w->inflight[slot] = 0;
    for (int i = 0; i < s->n; i++) {
        put_job_t *j = &w->jobs[slot][i];
        if (!j->base.run || j->rc == 0) continue;
        /* Up to m stores may fail; the object is still whole on the rest. */
        if (!(w->dead & (1u << i)))
            log_warn("event=shard_write_failed shard=%d key=%s err=%s", i, w->key, err_name(j->rc));
        w->dead |= 1u << i;
        if (j->rc == ERR_THROTTLED || (j->rc == ERR_NOSPC && w->cause != ERR_THROTTLED))
            w->cause = j->rc;
    }
    return dead_verdict(w);
}

/* Start the k+m block writes of one stripe; they finish in the background. */
static int flush_stripe(obj_writer_t *w, uint64_t stripe)
{
    obj_set_t *s = w->s;
    int slot = (int)(stripe & 1), n = 0;
    pool_job_t *q[OBJ_MAX_SHARDS];
    for (int i = 0; i < s->n; i++) {
        put_job_t *j = &w->jobs[slot][i];
        memset(j, 0, sizeof(*j));
        if (w->dead & (1u << i)) continue;
        j->base.run = run_put;
        j->st = &s->st[i];
        j->id = (drive_id_t){w->bbucket, w->key, w->upload,
                             (uint32_t)(stripe << SHARD_BITS) | (uint32_t)i};
        j->data = w->blk[slot] + (size_t)i * (s->block + 4);
        j->len = w->blen[slot][i] + 4;
        q[n++] = &j->base;
    }
    w->inflight[slot] = 1;
    pool_submit(s, q, n, &w->latch[slot]);
    return dead_verdict(w);
}

static int block_sink(void *arg, unsigned shard, uint64_t stripe, const uint8_t *block,
                      uint32_t len, uint32_t crc)
{
    obj_writer_t *w = arg;
    obj_set_t *s = w->s;
    int slot = (int)(stripe & 1), rc;
    /* The slot's previous stripe (two back) must be on its stores before reuse. */
    if (shard == 0 && (rc = slot_wait(w, slot)) != 0) return rc;
    uint8_t *dst = w->blk[slot] + (size_t)shard * (s->block + 4);
    if (stripe + 1 > w->stripes) w->stripes = stripe + 1;
    memcpy(dst, block, len);
    for (int i = 0; i < 4; i++)
        dst[len + (unsigned)i] = (uint8_t)(crc >> (8 * i));
    w->blen[slot][shard] = len;
    /* The encoder hands over shards 0..k+m-1 in order: the last one completes the stripe. */
    return shard == (unsigned)s->n - 1 ? flush_stripe(w, stripe) : 0;
}

obj_writer_t *obj_put_begin(obj_set_t *s, const char *bucket, const char *key, int *err)
{
    if (!bucket[0] || strlen(bucket) > REC_MAX_BUCKET - 1 || strlen(key) > REC_MAX_KEY) {
        *err = ERR_INVAL;
        return NULL;
    }
    obj_writer_t *w = xcalloc(1, sizeof(*w));
    w->s = s;
    latch_init(&w->latch[0]);
    latch_init(&w->latch[1]);
    snprintf(w->bucket, sizeof(w->bucket), "%s", bucket);
    blk_bucket(w->bbucket, bucket);
    w->key = xstrdup(key);
    if ((*err = new_upload_id(w->upload)) != 0) goto fail;
    w->enc = ers_encoder_new_in(s->bufs, s->k, s->m, s->block, block_sink, w, err);
    if (!w->enc) goto fail;
    for (int i = 0; i < 2; i++)
        w->blk[i] = bufpool_get(s->bufs, (size_t)s->n * (s->block + 4));
    w->md5 = EVP_MD_CTX_new();
    if (!w->md5 || !EVP_DigestInit_ex(w->md5, EVP_md5(), NULL)) {
        *err = ERR_NOMEM;
        goto fail;
    }
    return w;
fail:
    obj_put_abort(w);
    return NULL;
}

int obj_put_write(obj_writer_t *w, const void *data, size_t len)
{
    if (w->err) return w->err;
    if (w->etag[0]) return ERR_CLOSED;
    EVP_DigestUpdate(w->md5, data, len);
    return w->err = ers_encoder_write(w->enc, data, len);
}

const char *obj_put_etag(obj_writer_t *w)
{
    if (!w->etag[0]) {
        uint8_t digest[EVP_MAX_MD_SIZE];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(w->md5, digest, &dl);
        for (unsigned i = 0; i < dl && i < 16; i++)
            snprintf(w->etag + 2 * i, 3, "%02x", digest[i]);
    }
    return w->etag;
}

static void writer_free(obj_writer_t *w)
{
    /* No write may still point into the buffers. */
    (void)slot_wait(w, 0);
    (void)slot_wait(w, 1);
    ers_encoder_free(w->enc);
    EVP_MD_CTX_free(w->md5);
    for (int i = 0; i < 2; i++) {
        bufpool_put(w->s->bufs, w->blk[i]);
        latch_destroy(&w->latch[i]);
    }
    free(w->key);
    free(w);
}

void obj_put_abort(obj_writer_t *w)
{
    if (!w) return;
    (void)slot_wait(w, 0);
    (void)slot_wait(w, 1);
    /* The encoder may have stored the first block of the next stripe too. */
    drop_blocks(w->s, w->bucket, w->key, w->upload, w->stripes + 1, w->dead);
    writer_free(w);
}

int obj_put_commit(obj_writer_t *w, const char *content_type, const char *umeta, size_t umeta_len,
                   obj_info_t *out)
{
    obj_set_t *s = w->s;
    obj_info_t info, old;
    int rc = w->err, first_err = 0;

    memset(&info, 0, sizeof(info));
    if (!rc) rc = ers_encoder_finish(w->enc, &info.layout);
    /* Every block durable before the heads that point at them. */
    if (!rc) rc = slot_wait(w, 0);
    if (!rc) rc = slot_wait(w, 1);
    if (!rc && umeta_len > sizeof(info.umeta)) rc = ERR_TOO_LARGE;
    if (rc) {
        obj_put_abort(w);
        return rc;
    }
    snprintf(info.etag, sizeof(info.etag), "%s", obj_put_etag(w));
    info.size = info.layout.size;
    memcpy(info.upload_id, w->upload, sizeof(info.upload_id));
    snprintf(info.content_type, sizeof(info.content_type), "%s",
             content_type ? content_type : "binary/octet-stream");
    if (umeta_len) memcpy(info.umeta, umeta, umeta_len);
    info.umeta_len = umeta_len;

    /* A part commits only while its upload is open (abort and complete take this lock). */
    pthread_mutex_t *ul = w->mpu_upload[0] ? mpu_lock(s, w->mpu_upload) : NULL;
    if (ul) {
        pthread_mutex_lock(ul);
        if ((rc = obj_stat(s, MPU_UPLOADS, w->mpu_upload, &old)) != 0) {
            pthread_mutex_unlock(ul);
            obj_put_abort(w); /* its blocks go now: nothing will ever name them */
            return rc;
        }
    }
    /* The commit point: heads on every store that took the blocks. */
    pthread_mutex_t *lk = key_lock(s, w->bucket, w->key);
    pthread_mutex_lock(lk);
    int had_old = newest_head(s, w->bucket, w->key, &old) == 0;
    info.mtime_ns = wall_ns();
    if (had_old && info.mtime_ns <= old.mtime_ns) info.mtime_ns = old.mtime_ns + 1;
    had_old = had_old && !old.deleted;
    int heads = write_heads(s, w->bucket, w->key, &info, w->dead, &first_err);
    pthread_mutex_unlock(lk);
    if (ul) pthread_mutex_unlock(ul);
    if (heads < s->k) {
        /* Not enough heads to be found reliably: undo, the PUT failed. */
        log_error("event=commit_failed key=%s heads=%d err=%s", w->key, heads, err_name(first_err));
        obj_put_abort(w);
        return first_err ? first_err : ERR_UNRECOVERABLE;
    }
    if (had_old && strcmp(old.upload_id, info.upload_id) != 0)
        drop_version(s, w->bucket, w->key, &old);
    if (out) *out = info;
    writer_free(w);
    return 0;
}

/* ---- reader ---- */

struct obj_reader {
    obj_set_t *s;
    char bbucket[REC_MAX_BUCKET + 2];
    char *key;
    obj_info_t info;
    ers_decoder_t *dec;
    uint8_t *blk[OBJ_MAX_SHARDS]; /* per shard: block + crc as read (lazily allocated) */
    /*
     * Read-ahead (obj_read_ahead): the data blocks of one stripe fetched in
     * the background straight into the buffer the caller will read that
     * stripe into; the obj_read of it finds them in place. One stripe at most.
     */
    struct ra_job *ra_jobs;
    latch_t ra_latch;
    uint64_t ra_stripe;
    uint8_t *ra_buf;  /* block j of ra_stripe lands at ra_buf + j * block_size */
    uint32_t ra_mask; /* shards with a read-ahead block of ra_stripe (in flight or done) */
    /* multipart: parts in order, their sizes, and the part being read */
    int *parts;
    uint64_t *sizes;
    struct obj_reader *cur;
    int cur_idx;
    uint32_t missing;
};

typedef struct ra_job {
    pool_job_t base;
    obj_reader_t *r;
    unsigned shard;
    uint32_t len;
    int rc;
    ers_crc_t crc;
} ra_job_t;

static uint32_t le32_at(const uint8_t *c)
{
    return (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
}

static void run_ra(pool_job_t *j)
{
    ra_job_t *a = (ra_job_t *)j;
    obj_reader_t *r = a->r;
    const shard_store_t *st = &r->s->st[a->shard];
    drive_id_t id = {r->bbucket, r->key, r->info.upload_id,
                     (uint32_t)(r->ra_stripe << SHARD_BITS) | a->shard};
    uint8_t c[4];
    uint8_t *dst = r->ra_buf + (size_t)a->shard * r->info.layout.block_size;
    a->crc = (ers_crc_t){0, 0, 1};
    a->rc = st->ops->read_split(st->ctx, &id, dst, a->len, c, 4, &a->crc.actual);
    a->crc.stored = le32_at(c);
}

/* Wait for the read-ahead in flight, if any. */
static void ra_wait(obj_reader_t *r)
{
    if (r->ra_mask) latch_wait(&r->ra_latch);
}

void obj_read_ahead(obj_reader_t *r, uint64_t off, void *buf, size_t len)
{
    obj_set_t *s = r->s;
    ra_wait(r);
    r->ra_mask = 0;
    if (r->info.multipart) {
        /* Within the part being read only: the next obj_read opens the next part. */
        if (r->cur_idx < 0) return;
        uint64_t base = 0;
        for (int i = 0; i < r->cur_idx; i++)
            base += r->sizes[i];
        if (off >= base && off + len <= base + r->sizes[r->cur_idx])
            obj_read_ahead(r->cur, off - base, buf, len);
        return;
    }
    const ers_layout_t *l = &r->info.layout;
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    /* Whole stripes only, and only while the drives have room: under many streams it only deepens
     * queues. */
    if (!sdata || off % sdata || off >= l->size ||
        len != (l->size - off < sdata ? l->size - off : sdata))
        return;
    for (unsigned j = 0; j < l->k; j++)
        if (!s->st[j].ops->read_split) return;
    pthread_mutex_lock(&s->mu);
    int busy = s->queued > 0;
    pthread_mutex_unlock(&s->mu);
    if (busy) return;
    pool_job_t *q[OBJ_MAX_SHARDS];
    int n = 0;
    if (!r->ra_jobs) r->ra_jobs = xcalloc(OBJ_MAX_SHARDS, sizeof(ra_job_t));
    r->ra_stripe = off / sdata;
    r->ra_buf = buf;
    for (unsigned j = 0; j < l->k; j++) {
        uint32_t blen = ers_block_len(l, r->ra_stripe, j);
        if (!blen) break;
        r->ra_jobs[j] = (ra_job_t){{run_ra, NULL, NULL}, r, j, blen, 0, {0, 0, 0}};
        q[n++] = &r->ra_jobs[j].base;
        r->ra_mask |= 1u << j;
    }
    if (n) pool_submit(s, q, n, &r->ra_latch);
}

static int block_source(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                        ers_crc_t *crc)
{
    obj_reader_t *r = arg;
    obj_set_t *s = r->s;
    const shard_store_t *st = &s->st[shard];
    drive_id_t id = {r->bbucket, r->key, r->info.upload_id,
                     (uint32_t)(stripe << SHARD_BITS) | shard};
    /*
     * Shards of a stripe are read concurrently (obj_parallel), each into its
     * own buffer, made on first use by the one thread reading that shard.
     */
    uint8_t c[4];
    int rc;
    if ((r->ra_mask & (1u << shard)) && r->ra_stripe == stripe && r->ra_jobs[shard].len == len &&
        buf == r->ra_buf + (size_t)shard * r->info.layout.block_size) {
        /* Read ahead into this very place: obj_read waited for it. */
        *crc = r->ra_jobs[shard].crc;
        return r->ra_jobs[shard].rc;
    }
    if (st->ops->read_split) {
        /* Straight into the caller's buffer; only the crc goes elsewhere. */
        if ((rc = st->ops->read_split(st->ctx, &id, buf, len, c, 4, &crc->actual)) != 0) return rc;
        crc->stored = le32_at(c);
        crc->computed = 1;
        return 0;
    }
    if (!r->blk[shard]) r->blk[shard] = bufpool_get(s->bufs, (size_t)r->info.layout.block_size + 4);
    uint8_t *b = r->blk[shard];
    if ((rc = st->ops->read(st->ctx, &id, 0, b, (size_t)len + 4)) != 0) return rc;
    memcpy(buf, b, len);
    crc->stored = le32_at(b + len);
    return 0;
}

/* The manifest of a completed upload: "part size etag" lines, in order. */
static int read_manifest(obj_set_t *s, const char *upload, int nparts, int **part_no,
                         uint64_t **sizes)
{
    obj_info_t mi;
    int err;
    obj_reader_t *m = obj_open(s, MPU_MANIFEST, upload, &mi, &err);
    if (!m) return err;
    char *text = xmalloc(mi.size + 1);
    err = obj_read(m, 0, text, mi.size);
    obj_close(m);
    text[mi.size] = 0;
    *part_no = xcalloc((size_t)nparts, sizeof(int));
    *sizes = xcalloc((size_t)nparts, sizeof(uint64_t));
    char *p = text;
    for (int i = 0; !err && i < nparts; i++) {
        unsigned long long sz;
        int pn, used;
        if (sscanf(p, "%d %llu %*s%n", &pn, &sz, &used) != 2) {
            err = ERR_CORRUPT;
            break;
        }
        (*part_no)[i] = pn;
        (*sizes)[i] = sz;
        p += used;
        while (*p == '\n')
            p++;
    }
    free(text);
    if (err) {
        free(*part_no);
        free(*sizes);
        *part_no = NULL;
        *sizes = NULL;
    }
    return err;
}

obj_reader_t *obj_open(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                       int *err)
{
    obj_reader_t *r = xcalloc(1, sizeof(*r));
    r->s = s;
    latch_init(&r->ra_latch);
    /*
     * Pin the version, then look again: a writer drops the old version only
     * after its new heads are written, so a version still newest after the
     * pin is taken cannot lose its blocks until obj_close. The second look is
     * skipped when no version was dropped since before the first (the drop
     * epoch, read under the pin lock, has not moved).
     */
    for (int tries = 0;; tries++) {
        obj_info_t again;
        uint64_t e0 = __atomic_load_n(&s->drop_epoch, __ATOMIC_ACQUIRE);
        if ((*err = obj_stat(s, bucket, key, &r->info)) != 0) {
            latch_destroy(&r->ra_latch);
            free(r);
            return NULL;
        }
        /* No version was dropped since before the look: what it found is still whole. */
        if (pin(s, r->info.upload_id) == e0) break;
        if (obj_stat(s, bucket, key, &again) == 0 &&
            strcmp(again.upload_id, r->info.upload_id) == 0)
            break;
        unpin(s, r->info.upload_id);
        if (tries == 16) {
            *err = ERR_AGAIN; /* overwritten faster than it can be opened */
            latch_destroy(&r->ra_latch);
            free(r);
            return NULL;
        }
    }
    blk_bucket(r->bbucket, bucket);
    r->key = xstrdup(key);
    r->cur_idx = -1;
    if (r->info.multipart) {
        if ((*err = read_manifest(s, r->info.upload_id, r->info.nparts, &r->parts, &r->sizes)) !=
            0) {
            obj_close(r);
            return NULL;
        }
    } else {
        if (r->info.layout.k != s->k || r->info.layout.m != s->m) {
            *err = ERR_CORRUPT;
            obj_close(r);
            return NULL;
        }
        r->dec = ers_decoder_new(&r->info.layout, err);
        if (!r->dec) {
            obj_close(r);
            return NULL;
        }
        ers_decoder_set_parallel(r->dec, obj_parallel, s);
    }
    if (info) *info = r->info;
    return r;
}

int obj_read(obj_reader_t *r, uint64_t off, void *buf, size_t len)
{
    if (!r->info.multipart) {
        const ers_layout_t *l = &r->info.layout;
        uint64_t sdata = (uint64_t)l->k * l->block_size;
        ra_wait(r); /* its blocks are used below (block_source checks where they are), or stale */
        if (r->ra_mask && (len == 0 || off / sdata != r->ra_stripe)) r->ra_mask = 0;
        int rc = ers_decoder_read(r->dec, off, len, buf, block_source, r);
        r->missing = rc ? ers_decoder_missing(r->dec) : 0;
        r->ra_mask = 0;
        return rc;
    }
    if (off > r->info.size || len > r->info.size - off) return ERR_RANGE;
    uint8_t *out = buf;
    uint64_t base = 0;
    for (int i = 0; i < r->info.nparts && len > 0; i++) {
        uint64_t psz = r->sizes[i];
        if (off >= base + psz) {
            base += psz;
            continue;
        }
        if (r->cur_idx != i) {
            char pk[64];
            int err;
            obj_close(r->cur);
            part_key(pk, sizeof(pk), r->info.upload_id, r->parts[i]);
            r->cur = obj_open(r->s, MPU_PARTS, pk, NULL, &err);
            r->cur_idx = r->cur ? i : -1;
            if (!r->cur) return err == ERR_NOT_FOUND ? ERR_CORRUPT : err;
        }
        uint64_t in = off - base, n = psz - in < len ? psz - in : len;
        int rc = obj_read(r->cur, in, out, (size_t)n);
        if (rc) {
            r->missing = r->cur->missing;
            return rc;
        }
        out += n;
        off += n;
        len -= (size_t)n;
        base += psz;
    }
    return 0;
}

size_t obj_read_unit(const obj_reader_t *r)
{
    return (size_t)r->s->k * r->s->block;
}

uint32_t obj_read_missing(const obj_reader_t *r)
{
    return r->missing;
}

void obj_close(obj_reader_t *r)
{
    if (!r) return;
    obj_close(r->cur);
    ra_wait(r); /* no read may still write into the buffers freed below */
    latch_destroy(&r->ra_latch);
    free(r->ra_jobs);
    unpin(r->s, r->info.upload_id); /* every reader holds a pin from obj_open */
    ers_decoder_free(r->dec);
    free(r->parts);
    free(r->sizes);
    for (int i = 0; i < OBJ_MAX_SHARDS; i++)
        bufpool_put(r->s->bufs, r->blk[i]);
    free(r->key);
    free(r);
}

int obj_set_umeta(obj_set_t *s, const char *bucket, const char *key, const char *umeta,
                  size_t umeta_len)
{
    obj_info_t info;
    int first_err = 0, rc;
    if (umeta_len > sizeof(info.umeta)) return ERR_TOO_LARGE;
    pthread_mutex_t *lk = key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    if ((rc = obj_stat(s, bucket, key, &info)) == 0) {
        memcpy(info.umeta, umeta, umeta_len);
        info.umeta_len = umeta_len;
        info.mtime_ns++; /* the rewritten heads must win over any store that misses them */
        if (write_heads(s, bucket, key, &info, 0, &first_err) < s->k)
            rc = first_err ? first_err : ERR_UNRECOVERABLE;
    }
    pthread_mutex_unlock(lk);
    return rc;
}

int obj_delete(obj_set_t *s, const char *bucket, const char *key)
{
    obj_info_t old, marker;
    int written = 0;
    memset(&marker, 0, sizeof(marker));
    marker.deleted = 1;
    int rc = new_upload_id(marker.upload_id);
    if (rc) return rc;
    pthread_mutex_t *lk = key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    if ((rc = obj_stat(s, bucket, key, &old)) != 0) {
        pthread_mutex_unlock(lk);
        return rc;
    }
    marker.mtime_ns = wall_ns();
    if (marker.mtime_ns <= old.mtime_ns) marker.mtime_ns = old.mtime_ns + 1;
    int first_err;
    written = write_heads(s, bucket, key, &marker, 0, &first_err);
    pthread_mutex_unlock(lk);
    if (written < s->k) return ERR_UNRECOVERABLE;
    drop_version(s, bucket, key, &old);
    return 0;
}

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_list_fn fn;
    void *arg;
    uint32_t shard; /* the store being listed holds heads with this shard index */
    char *last;     /* the last key handed to fn: a store that fails resumes after it */
    int err;        /* a head that could not be read: the listing cannot go on */
} list_t;

static int list_head(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    list_t *l = arg;
    obj_info_t info;
    (void)st;
    /* Each store holds one head per key; the listed store's own stands for all. */
    if (id->version[0] || id->shard != l->shard) return 0;
    int rc = obj_stat(l->s, l->bucket, id->key, &info);
    if (rc == ERR_NOT_FOUND) return 0; /* deleted */
    if (rc) {
        l->err = rc;
        return 1;
    }
    free(l->last);
    l->last = xstrdup(id->key);
    return l->fn(l->arg, id->key, &info);
}

int obj_list(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
             obj_list_fn fn, void *arg)
{
    list_t l = {s, bucket, fn, arg, 0, NULL, 0};
    int rc = ERR_UNRECOVERABLE;
    /*
     * One store lists (heads are on every store); when it fails mid-way the
     * next one goes on after the last key delivered, so nothing is skipped
     * or repeated. Only when more than m stores fail is the listing lost.
     */
    for (int i = 0, failed = 0; i < s->n; i++) {
        l.shard = (uint32_t)i;
        l.err = 0;
        rc = s->st[i].ops->list(s->st[i].ctx, bucket, prefix, l.last ? l.last : after, list_head,
                                &l);
        if (l.err) {
            rc = l.err;
            break;
        }
        if (rc >= 0 || rc == ERR_INVAL) break;
        log_warn("event=list_store_failed shard=%d bucket=%s err=%s", i, bucket, err_name(rc));
        if (++failed > s->m) {
            rc = ERR_UNRECOVERABLE;
            break;
        }
    }
    free(l.last);
    return rc;
}

/* ---- multipart uploads ---- */

/* Put a small internal object whole. */
static int put_small(obj_set_t *s, const char *bucket, const char *key, const void *body,
                     size_t len, const char *ctype, const char *umeta, size_t umeta_len)
{
    int err;
    obj_writer_t *w = obj_put_begin(s, bucket, key, &err);
    if (!w) return err;
    if ((err = obj_put_write(w, body, len)) != 0) {
        obj_put_abort(w);
        return err;
    }
    return obj_put_commit(w, ctype, umeta, umeta_len, NULL);
}

/* The upload record must exist and be for bucket/key. */
static int mpu_check(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                     obj_info_t *rec)
{
    int err;
    if (strlen(upload) != 32) return ERR_NOT_FOUND;
    obj_reader_t *r = obj_open(s, MPU_UPLOADS, upload, rec, &err);
    if (!r) return err;
    size_t want = strlen(bucket) + 1 + strlen(key);
    char *body = xmalloc(rec->size + 1);
    err = rec->size == want ? obj_read(r, 0, body, rec->size) : ERR_NOT_FOUND;
    obj_close(r);
    body[rec->size] = 0;
    if (!err && (strncmp(body, bucket, strlen(bucket)) != 0 || body[strlen(bucket)] != '\n' ||
                 strcmp(body + strlen(bucket) + 1, key) != 0))
        err = ERR_NOT_FOUND;
    free(body);
    return err;
}

int obj_mpu_create(obj_set_t *s, const char *bucket, const char *key, const char *content_type,
                   const char *umeta, size_t umeta_len, char upload_id[33])
{
    int rc = new_upload_id(upload_id);
    if (rc) return rc;
    size_t bl = strlen(bucket), kl = strlen(key);
    char *body = xmalloc(bl + kl + 2);
    memcpy(body, bucket, bl);
    body[bl] = '\n';
    memcpy(body + bl + 1, key, kl + 1);
    rc = put_small(s, MPU_UPLOADS, upload_id, body, bl + 1 + kl, content_type, umeta, umeta_len);
    free(body);
    return rc;
}

obj_writer_t *obj_mpu_part_begin(obj_set_t *s, const char *bucket, const char *key,
                                 const char *upload_id, int part, int *err)
{
    obj_info_t rec;
    char pk[64];
    if (part < 1 || part > 10000) {
        *err = ERR_INVAL;
        return NULL;
    }
    if ((*err = mpu_check(s, bucket, key, upload_id, &rec)) != 0) return NULL;
    part_key(pk, sizeof(pk), upload_id, part);
    obj_writer_t *w = obj_put_begin(s, MPU_PARTS, pk, err);
    if (w) snprintf(w->mpu_upload, sizeof(w->mpu_upload), "%s", upload_id);
    return w;
}

static int hexbyte(const char *p)
{
    int v = 0;
    for (int i = 0; i < 2; i++) {
        char c = p[i];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0);
    }
    return v;
}

typedef struct {
    obj_set_t *s;
    const obj_mpu_part_t *parts;
    int n;
} unused_t;

static int drop_unused_part(void *arg, const char *key, const obj_info_t *info)
{
    unused_t *u = arg;
    const char *slash = strrchr(key, '/');
    int p = 0, lo = 0, hi = u->n;
    if (!slash || num_parse_int(slash + 1, 1, 10000, &p) != 0) return 0; /* not a part */
    (void)info;
    while (lo < hi) { /* parts are ascending */
        int mid = (lo + hi) / 2;
        if (u->parts[mid].part == p) return 0;
        if (u->parts[mid].part < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    drop_object(u->s, MPU_PARTS, key);
    return 0;
}

static int mpu_complete_locked(obj_set_t *s, const char *bucket, const char *key,
                               const char *upload_id, const obj_mpu_part_t *parts, int n,
                               uint64_t min_part, obj_info_t *out, int *why);

int obj_mpu_complete(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                     const obj_mpu_part_t *parts, int n, uint64_t min_part, obj_info_t *out,
                     int *why)
{
    *why = OBJ_MPU_OK;
    if (strlen(upload_id) != 32) {
        *why = OBJ_MPU_NO_UPLOAD;
        return ERR_NOT_FOUND;
    }
    pthread_mutex_t *ul = mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    int rc = mpu_complete_locked(s, bucket, key, upload_id, parts, n, min_part, out, why);
    pthread_mutex_unlock(ul);
    return rc;
}

/* Complete with the upload's lock held: no part commits, and no abort runs, meanwhile. */
static int mpu_complete_locked(obj_set_t *s, const char *bucket, const char *key,
                               const char *upload_id, const obj_mpu_part_t *parts, int n,
                               uint64_t min_part, obj_info_t *out, int *why)
{
    obj_info_t rec, info, old;
    int rc, first_err = 0;
    if ((rc = mpu_check(s, bucket, key, upload_id, &rec)) != 0) {
        *why = OBJ_MPU_NO_UPLOAD;
        return rc;
    }
    if (n < 1 || n > 10000) {
        *why = OBJ_MPU_BAD_PART;
        return ERR_INVAL;
    }
    size_t cap = (size_t)n * 64 + 16, len = 0;
    char *manifest = xmalloc(cap);
    uint8_t md5s[16];
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    uint64_t total = 0;
    for (int i = 0; i < n && !rc; i++) {
        obj_info_t pi;
        char pk[64], want[80];
        if (i > 0 && parts[i].part <= parts[i - 1].part) {
            *why = OBJ_MPU_BAD_ORDER;
            rc = ERR_INVAL;
            break;
        }
        part_key(pk, sizeof(pk), upload_id, parts[i].part);
        /* The client's ETag may carry quotes. */
        const char *e = parts[i].etag;
        size_t el = strlen(e);
        if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
            e++;
            el -= 2;
        }
        snprintf(want, sizeof(want), "%.*s", (int)el, e);
        if (obj_stat(s, MPU_PARTS, pk, &pi) != 0 || strcmp(pi.etag, want) != 0 ||
            strlen(pi.etag) != 32) {
            *why = OBJ_MPU_BAD_PART;
            rc = ERR_INVAL;
            break;
        }
        if (i < n - 1 && pi.size < min_part) {
            *why = OBJ_MPU_TOO_SMALL;
            rc = ERR_INVAL;
            break;
        }
        for (int b = 0; b < 16; b++)
            md5s[b] = (uint8_t)hexbyte(pi.etag + 2 * b);
        EVP_DigestUpdate(md, md5s, 16);
        len += (size_t)snprintf(manifest + len, cap - len, "%d %llu %s\n", parts[i].part,
                                (unsigned long long)pi.size, pi.etag);
        total += pi.size;
    }
    uint8_t d[16];
    EVP_DigestFinal_ex(md, d, NULL);
    EVP_MD_CTX_free(md);
    if (!rc) rc = put_small(s, MPU_MANIFEST, upload_id, manifest, len, NULL, NULL, 0);
    free(manifest);
    if (rc) return rc;

    memset(&info, 0, sizeof(info));
    info.multipart = 1;
    info.nparts = n;
    info.size = total;
    memcpy(info.upload_id, upload_id, 32);
    for (int b = 0; b < 16; b++)
        snprintf(info.etag + 2 * b, 3, "%02x", d[b]);
    snprintf(info.etag + 32, sizeof(info.etag) - 32, "-%d", n);
    snprintf(info.content_type, sizeof(info.content_type), "%s", rec.content_type);
    memcpy(info.umeta, rec.umeta, rec.umeta_len);
    info.umeta_len = rec.umeta_len;
    pthread_mutex_t *lk = key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    int had_old = newest_head(s, bucket, key, &old) == 0;
    info.mtime_ns = wall_ns();
    if (had_old && info.mtime_ns <= old.mtime_ns) info.mtime_ns = old.mtime_ns + 1;
    had_old = had_old && !old.deleted;
    int heads = write_heads(s, bucket, key, &info, 0, &first_err);
    pthread_mutex_unlock(lk);
    if (heads < s->k) {
        drop_object(s, MPU_MANIFEST, upload_id);
        return first_err ? first_err : ERR_UNRECOVERABLE;
    }
    if (had_old && strcmp(old.upload_id, info.upload_id) != 0) drop_version(s, bucket, key, &old);
    /* Parts uploaded but not listed are garbage now; so is the upload record. */
    unused_t u = {s, parts, n};
    char prefix[40];
    snprintf(prefix, sizeof(prefix), "%s/", upload_id);
    if ((rc = obj_list(s, MPU_PARTS, prefix, NULL, drop_unused_part, &u)) < 0)
        log_warn("event=unused_parts_kept upload=%s err=%s", upload_id, err_name(rc));
    drop_object(s, MPU_UPLOADS, upload_id);
    if (out) *out = info;
    return 0;
}

typedef struct {
    obj_set_t *s;
} abort_t;

static int abort_part(void *arg, const char *key, const obj_info_t *info)
{
    abort_t *a = arg;
    (void)info;
    drop_object(a->s, MPU_PARTS, key);
    return 0;
}

int obj_mpu_abort(obj_set_t *s, const char *bucket, const char *key, const char *upload_id)
{
    obj_info_t rec;
    char prefix[40];
    if (strlen(upload_id) != 32) return ERR_NOT_FOUND;
    /*
     * The upload closes first, under its lock: a part still streaming finds
     * it gone at its commit and drops its own blocks. Then every part that
     * did commit is dropped.
     */
    pthread_mutex_t *ul = mpu_lock(s, upload_id);
    pthread_mutex_lock(ul);
    int rc = mpu_check(s, bucket, key, upload_id, &rec);
    if (!rc) rc = obj_delete(s, MPU_UPLOADS, upload_id);
    pthread_mutex_unlock(ul);
    if (rc) return rc;
    abort_t a = {s};
    snprintf(prefix, sizeof(prefix), "%s/", upload_id);
    rc = obj_list(s, MPU_PARTS, prefix, NULL, abort_part, &a);
    if (rc < 0) log_warn("event=abort_parts_incomplete upload=%s err=%s", upload_id, err_name(rc));
    return 0;
}

typedef struct {
    obj_part_fn fn;
    void *arg;
} parts_t;

static int list_part(void *arg, const char *key, const obj_info_t *info)
{
    parts_t *p = arg;
    const char *slash = strrchr(key, '/');
    int part;
    if (!slash || num_parse_int(slash + 1, 1, 10000, &part) != 0) return 0; /* not a part */
    return p->fn(p->arg, part, info);
}

int obj_mpu_list_parts(obj_set_t *s, const char *bucket, const char *key, const char *upload_id,
                       obj_part_fn fn, void *arg)
{
    obj_info_t rec;
    char prefix[40];
    int rc = mpu_check(s, bucket, key, upload_id, &rec);
    if (rc) return rc;
    parts_t p = {fn, arg};
    snprintf(prefix, sizeof(prefix), "%s/", upload_id);
    return obj_list(s, MPU_PARTS, prefix, NULL, list_part, &p);
}

typedef struct {
    obj_set_t *s;
    const char *bucket;
    obj_upload_fn fn;
    void *arg;
} uploads_t;

static int list_upload(void *arg, const char *upload, const obj_info_t *info)
{
    uploads_t *u = arg;
    size_t bl = strlen(u->bucket);
    int err, rc = 0;
    if (info->size <= bl || info->size > bl + 1 + REC_MAX_KEY) return 0;
    obj_reader_t *r = obj_open(u->s, MPU_UPLOADS, upload, NULL, &err);
    if (!r) return 0;
    char *body = xmalloc(info->size + 1);
    if (obj_read(r, 0, body, info->size) == 0) {
        body[info->size] = 0;
        if (strncmp(body, u->bucket, bl) == 0 && body[bl] == '\n')
            rc = u->fn(u->arg, body + bl + 1, upload, info);
    }
    free(body);
    obj_close(r);
    return rc;
}

int obj_mpu_list_uploads(obj_set_t *s, const char *bucket, obj_upload_fn fn, void *arg)
{
    uploads_t u = {s, bucket, fn, arg};
    return obj_list(s, MPU_UPLOADS, NULL, NULL, list_upload, &u);
}
