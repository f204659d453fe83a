#include "server/shard.h"

#include "common/err.h"
#include "common/mem.h"
#include "server/obj_int.h"
#include "storage/rec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The gateway's limits are the local drive's: a name that one takes, the other does too. */
_Static_assert(SHARD_MAX_BUCKET == REC_MAX_BUCKET, "SHARD_MAX_BUCKET must match storage/rec.h");
_Static_assert(SHARD_MAX_KEY == REC_MAX_KEY, "SHARD_MAX_KEY must match storage/rec.h");

static __thread struct proto_cancel *hedge_token;

struct proto_cancel *shard_hedge_token(void)
{
    return hedge_token;
}

void shard_set_hedge_token(struct proto_cancel *t)
{
    hedge_token = t;
}

static int l_refilling(void *ctx)
{
    return drive_refilling(ctx);
}

static int l_read(void *ctx, const drive_id_t *id, uint64_t off, void *buf, size_t len)
{
    return drive_read(ctx, id, off, buf, len);
}

static int l_stat(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t cap)
{
    return drive_stat(ctx, id, st, meta, cap);
}

static int l_list(void *ctx, const char *bucket, const char *prefix, const char *after,
                  drive_list_fn fn, void *arg)
{
    return drive_list(ctx, bucket, prefix, after, fn, arg);
}

static int l_read_split(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                        size_t tail_len, uint32_t *buf_crc)
{
    return drive_read_split(ctx, id, 0, buf, len, tail, tail_len, buf_crc);
}

static int l_read_begin(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                        size_t tail_len, uint32_t *buf_crc, drive_rd_t **op, drive_rd_io_t *io)
{
    return drive_read_begin(ctx, id, 0, buf, len, tail, tail_len, buf_crc, op, io);
}

static int l_get(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap,
                 void *buf, size_t cap)
{
    return drive_get(ctx, id, st, meta, meta_cap, buf, cap);
}

static void l_stats(void *ctx, drive_stats_t *st)
{
    drive_stats(ctx, st);
}

static int l_scan(void *ctx, const char *bucket, const char *prefix, const drive_from_t *from,
                  drive_scan_fn fn, void *arg)
{
    return drive_scan(ctx, bucket, prefix, from, fn, arg);
}

/* ---- conditional heads ---- */

/*
 * One lock per identity (striped, shared by all drives): held from the
 * check of a head put until it is durable and indexed, so the next check
 * of that identity sees it. Taken by one thread and given back by another
 * (the drive's completion), hence a flag under a mutex, not a mutex.
 *
 * Every write of a head holds it, conditional or not, and so does every
 * delete: a condition is checked against what the drive has indexed, and a
 * plain write still in flight (queued for its group commit) is not there
 * yet. The conditional write then landed after it, judged against what it
 * replaced: an archive of a version written over the tombstone of that
 * version's delete by id, in flight on one store (a probe's racing PUT,
 * delete marker and deletes by id: the deleted version listed again, its
 * blocks gone). Blocks (no metadata) are never named by a condition.
 */
#define HEAD_STRIPES 4096
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;
} stripe_t;
static stripe_t stripes[HEAD_STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void)
{
    for (int i = 0; i < HEAD_STRIPES; i++) {
        pthread_mutex_init(&stripes[i].mu, NULL);
        pthread_cond_init(&stripes[i].cv, NULL);
    }
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static stripe_t *stripe_of(const drive_t *d, const drive_id_t *id)
{
    uint64_t h = mix(14695981039346656037ull, &d, sizeof(d));
    h = mix(h, id->bucket, strlen(id->bucket) + 1);
    h = mix(h, id->key, strlen(id->key) + 1);
    h = mix(h, id->version, strlen(id->version) + 1);
    h = mix(h, &id->shard, sizeof(id->shard));
    return &stripes[h % HEAD_STRIPES];
}

static void stripe_take(stripe_t *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->busy)
        pthread_cond_wait(&s->cv, &s->mu);
    s->busy = 1;
    pthread_mutex_unlock(&s->mu);
}

static void stripe_give(stripe_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->busy = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Whether head meta (len bytes) is a version's retirement: a tombstone, no delete marker. */
static int is_tombstone(const void *meta, size_t len, char upload[33])
{
    obj_info_t *o = xmalloc(sizeof(*o));
    obj_info_clear(o);
    int t = len <= HEAD_MAX && obj_meta_decode(meta, len, o) == 0 && o->deleted && !o->marker;
    if (upload) memcpy(upload, o->upload_id, 33);
    free(o);
    return t;
}

/*
 * 1 when what the drive holds at id lets a put of head nmeta (nlen bytes) under c replace
 * it, 0 when not, or an error. nmeta NULL: a delete (nothing replaces it), judged by the
 * mode alone.
 */
static int cond_holds(drive_t *d, const drive_id_t *id, const shard_cond_t *c, const void *nmeta,
                      size_t nlen)
{
    uint8_t *meta = xmalloc(HEAD_MAX);
    obj_info_t *o = xmalloc(sizeof(*o));
    drive_stat_t st;
    int rc = drive_stat(d, id, &st, meta, HEAD_MAX), holds;
    int head = rc == 0 && st.meta_len <= HEAD_MAX && obj_meta_decode(meta, st.meta_len, o) == 0;
    if (rc && rc != ERR_NOT_FOUND)
        holds = rc; /* cannot tell: the put fails as a failing store */
    else if (c->mode == SHARD_IF_UPLOAD)
        holds =
            head && strcmp(o->upload_id, c->upload) == 0 && (!c->stamp || o->stamp_ns == c->stamp);
    else if (c->mode == SHARD_IF_AT_MOST)
        holds = !head || o->stamp_ns < c->stamp ||
                (o->stamp_ns == c->stamp && strcmp(o->upload_id, c->upload) <= 0) ||
                (c->self[0] && strcmp(o->upload_id, c->self) == 0);
    else if (c->mode == SHARD_IF_REWRITE)
        holds = head && (o->stamp_ns < c->stamp ||
                         (o->stamp_ns == c->stamp && strcmp(o->upload_id, c->upload) <= 0));
    else if (c->mode == SHARD_IF_KEPT && head && o->deleted && !o->marker &&
             strcmp(o->upload_id, c->upload) == 0)
        holds = 0; /* retired: deleted by its id */
    else
        holds = !head || c->stamp > o->stamp_ns ||
                (c->stamp == o->stamp_ns && strcmp(c->upload, o->upload_id) >= 0);
    /*
     * An archive (a commit keeping the version it covers as noncurrent) never over a copy
     * of that version whose metadata is newer than its own: a rewrite by version id (tags,
     * ACL) that landed there after the current head was copied from that position (a
     * promotion). Written over it, the acknowledged tags were lost on every store (a 3-node
     * probe's tagging by id, a promotion and a delete marker at once: 1 round in 200). A
     * refusal counts as kept, and the commit reads the position again (obj__archive).
     */
    if (holds == 1 && nmeta && c->mode == SHARD_IF_KEPT && head && !o->deleted &&
        strcmp(o->upload_id, c->upload) == 0) {
        obj_info_t *nv = xmalloc(sizeof(*nv));
        if (nlen <= HEAD_MAX && obj_meta_decode(nmeta, nlen, nv) == 0 && !nv->deleted &&
            strcmp(nv->upload_id, o->upload_id) == 0 && obj_umeta_ns(o) > obj_umeta_ns(nv))
            holds = 0;
        free(nv);
    }
    /*
     * Never a version over its own tombstone (deleted by its id), whatever the mode: a
     * tagging rewrite that read a noncurrent version before its delete by id took the
     * tombstone for "the head of version self" (same upload id) and brought the version
     * back on every store, its blocks dropped (a 3-node probe: 23 rounds in 40).
     */
    if (holds == 1 && nmeta && head && o->deleted && !o->marker) {
        char up[33];
        if (!is_tombstone(nmeta, nlen, up) && strcmp(up, o->upload_id) == 0) holds = 0;
    }
    free(meta);
    free(o);
    return holds;
}

typedef struct {
    stripe_t *s;
    drive_done_fn done;
    void *arg;
} held_t;

static void held_done(void *arg, int rc)
{
    held_t *h = arg;
    drive_done_fn done = h->done;
    void *darg = h->arg;
    stripe_give(h->s);
    free(h);
    done(darg, rc);
}

/*
 * A put under the identity's lock, held until the drive's callback: under cond (NULL: none)
 * only when what the drive holds lets it (ERR_PRECOND when not), judged under the same lock.
 */
static int put_held(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                    const void *meta, size_t meta_len, const shard_cond_t *cond, drive_done_fn done,
                    void *arg)
{
    pthread_once(&stripes_once, stripes_init);
    stripe_t *s = stripe_of(d, id);
    stripe_take(s);
    int rc;
    if (cond && (rc = cond_holds(d, id, cond, meta, meta_len)) <= 0) {
        stripe_give(s);
        return rc ? rc : ERR_PRECOND;
    }
    held_t *h = xmalloc(sizeof(*h));
    *h = (held_t){s, done, arg};
    /* A version's retirement frees space: it may take what a full drive keeps for deletes
     * (without it an unversioned DELETE at a full file system failed 507, a fill probe). */
    if (!len && is_tombstone(meta, meta_len, NULL))
        rc = drive_put_async_frees(d, id, meta, meta_len, held_done, h);
    else
        rc = drive_put_async(d, id, data, len, meta, meta_len, held_done, h);
    if (rc != 0) {
        stripe_give(s);
        free(h);
    }
    return rc;
}

int shard_put_async_local(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                          const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    if (!meta_len) return drive_put_async(d, id, data, len, meta, meta_len, done, arg);
    return put_held(d, id, data, len, meta, meta_len, NULL, done, arg);
}

int shard_delete_local(drive_t *d, const drive_id_t *id)
{
    return shard_delete_head_local(d, id, NULL);
}

/*
 * A head's delete is judged as a put of nothing would be, under the same lock: an
 * unversioned DELETE that read version X removes X (or anything older), never a commit
 * another node made after its read. Unconditional (shard_delete_local), the removal cut
 * some of a racing PUT's heads, and a small one's copies: the key read as the PUT but did
 * not stand, and every write of it was 503 SlowDown for 10 s (a 4-node probe: 4 rounds in
 * 40).
 */
int shard_delete_head_local(drive_t *d, const drive_id_t *id, const shard_cond_t *cond)
{
    pthread_once(&stripes_once, stripes_init);
    stripe_t *s = stripe_of(d, id);
    stripe_take(s);
    int rc = cond ? cond_holds(d, id, cond, NULL, 0) : 1;
    if (rc == 1)
        rc = drive_delete(d, id);
    else if (rc == 0)
        rc = ERR_PRECOND;
    stripe_give(s);
    return rc;
}

static int l_put(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
                 size_t meta_len)
{
    if (!meta_len) return drive_put(ctx, id, data, len, meta, meta_len);
    pthread_once(&stripes_once, stripes_init);
    stripe_t *s = stripe_of(ctx, id);
    stripe_take(s);
    int rc = drive_put(ctx, id, data, len, meta, meta_len);
    stripe_give(s);
    return rc;
}

static int l_put_async(void *ctx, const drive_id_t *id, const void *data, size_t len,
                       const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    return shard_put_async_local(ctx, id, data, len, meta, meta_len, done, arg);
}

/* No stripe lock: a block, as l_del_async's. */
static int l_put_unsynced(void *ctx, const drive_id_t *id, const void *data, size_t len,
                          drive_done_fn done, void *arg)
{
    return drive_put_async_unsynced(ctx, id, data, len, NULL, 0, done, arg);
}

static int l_sync(void *ctx)
{
    return drive_sync(ctx);
}

static int l_del(void *ctx, const drive_id_t *id)
{
    return shard_delete_local(ctx, id);
}

/* No stripe lock: a block's id names its version's upload, which no head put or delete
 * judged under the lock shares (those are heads'). */
static int l_del_async(void *ctx, const drive_id_t *id, drive_done_fn done, void *arg)
{
    return drive_delete_async(ctx, id, done, arg);
}

int shard_put_head_local(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                         const void *meta, size_t meta_len, const shard_cond_t *cond,
                         drive_done_fn done, void *arg)
{
    return put_held(d, id, data, len, meta, meta_len, cond, done, arg);
}

static int l_del_head(void *ctx, const drive_id_t *id, const shard_cond_t *cond)
{
    return shard_delete_head_local(ctx, id, cond);
}

static int l_put_head(void *ctx, const drive_id_t *id, const void *data, size_t len,
                      const void *meta, size_t meta_len, const shard_cond_t *cond,
                      drive_done_fn done, void *arg)
{
    return shard_put_head_local(ctx, id, data, len, meta, meta_len, cond, done, arg);
}

static const shard_ops_t local_ops = {
    .put = l_put,
    .read = l_read,
    .stat = l_stat,
    .del = l_del,
    .del_head = l_del_head,
    .del_async = l_del_async,
    .list = l_list,
    .read_split = l_read_split,
    .read_begin = l_read_begin,
    .read_end = drive_read_end,
    .get = l_get,
    .stats = l_stats,
    .put_async = l_put_async,
    .scan = l_scan,
    .put_head = l_put_head,
    .refilling = l_refilling,
    .put_unsynced = l_put_unsynced,
    .sync = l_sync,
};

/*
 * A drive that did not open: every call fails at once and its health is
 * failed, so readers take it last and writers leave it out, as for a node
 * that is away, and healers go on without it.
 */
static int f_put(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
                 size_t meta_len)
{
    (void)ctx, (void)id, (void)data, (void)len, (void)meta, (void)meta_len;
    return ERR_IO;
}

static int f_read(void *ctx, const drive_id_t *id, uint64_t off, void *buf, size_t len)
{
    (void)ctx, (void)id, (void)off, (void)buf, (void)len;
    return ERR_IO;
}

static int f_stat(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t cap)
{
    (void)ctx, (void)id, (void)st, (void)meta, (void)cap;
    return ERR_IO;
}

static int f_del(void *ctx, const drive_id_t *id)
{
    (void)ctx, (void)id;
    return ERR_IO;
}

static int f_del_head(void *ctx, const drive_id_t *id, const shard_cond_t *cond)
{
    (void)ctx, (void)id, (void)cond;
    return ERR_IO;
}

static int f_list(void *ctx, const char *bucket, const char *prefix, const char *after,
                  drive_list_fn fn, void *arg)
{
    (void)ctx, (void)bucket, (void)prefix, (void)after, (void)fn, (void)arg;
    return ERR_IO;
}

static int f_put_async(void *ctx, const drive_id_t *id, const void *data, size_t len,
                       const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    (void)ctx, (void)id, (void)data, (void)len, (void)meta, (void)meta_len, (void)done, (void)arg;
    return ERR_IO;
}

static int f_scan(void *ctx, const char *bucket, const char *prefix, const drive_from_t *from,
                  drive_scan_fn fn, void *arg)
{
    (void)ctx, (void)bucket, (void)prefix, (void)from, (void)fn, (void)arg;
    return ERR_IO;
}

static int f_put_head(void *ctx, const drive_id_t *id, const void *data, size_t len,
                      const void *meta, size_t meta_len, const shard_cond_t *cond,
                      drive_done_fn done, void *arg)
{
    (void)cond;
    return f_put_async(ctx, id, data, len, meta, meta_len, done, arg);
}

static int f_health(void *ctx)
{
    (void)ctx;
    return SHARD_FAILED;
}

static const shard_ops_t failed_ops = {
    .put = f_put,
    .read = f_read,
    .stat = f_stat,
    .del = f_del,
    .del_head = f_del_head,
    .list = f_list,
    .put_async = f_put_async,
    .scan = f_scan,
    .put_head = f_put_head,
    .health = f_health,
};

int shard_store_is_local(const shard_store_t *st)
{
    return st->ops == &local_ops || st->ops == &failed_ops;
}

shard_store_t shard_store_local(drive_t *d)
{
    return d ? (shard_store_t){&local_ops, d} : (shard_store_t){&failed_ops, NULL};
}
