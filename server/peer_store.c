/*
 * peer_store: a shard store whose drive is on another node (server/peer.h).
 *
 * Each operation is one proto/ call (a SCAN, one call per page). Requests
 * are encoded on the caller's thread into a buffer on its stack; a PUT's
 * data goes out from the caller's memory without a copy. Responses are
 * decoded on the protocol's loop thread straight into the caller's places
 * (on_resp), except SCAN and STATS pages, which are copied out and walked
 * on the caller's thread, where the scan callback may take its time.
 */
#include "server/peer.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FIELDS_MAX (4 + 3 * 2 + 2 * 255 + 1024 + 4 + 32) /* drive, id, small fields */
#define SCAN_LIMIT 1000                                  /* entries a page asks for */

typedef struct {
    proto_peer_t *peer;
    uint32_t drive;
    _Atomic int refilling; /* peer_store_set_refilling */
    /* peer_store_set_failed: 1 + the peer's comebacks when it was set, 0: not failed */
    _Atomic uint64_t failed;
} remote_t;

/* The fields every per-record request starts with. */
static void w_head(proto_w_t *w, const remote_t *r, const drive_id_t *id)
{
    proto_w_u32(w, r->drive);
    proto_w_id(w, id->bucket, id->key, id->version, id->shard);
}

static int run(remote_t *r, proto_call_t *c, const proto_w_t *w)
{
    if (w->err) return ERR_INVAL; /* a name longer than the wire takes */
    c->fields = w->p;
    c->fields_len = w->len;
    /* A hedged read's or write's: it may be given up on (shard_hedge_token). */
    proto_cancel_t *tok = shard_hedge_token();
    /* Read before the call: a restart of the peer during it (the drive mended) moves it on,
     * and the mark, stamped with the older count, lapses (a review). */
    uint64_t comebacks = proto_peer_comebacks(r->peer);
    int rc = tok ? proto_call_cancelable(r->peer, c, tok) : proto_call(r->peer, c);
    if (rc == ERR_DRIVE_FAILED) {
        /*
         * The drive did not open at its node's start: failed until that node comes back
         * (peer_store_set_failed's mark, which a registration in etcd also sets). A cluster
         * whose map is a file has no registrations: its nodes learn it here, at the first
         * call, and then heal around the drive instead of waiting for it. To the caller, an
         * I/O error as before.
         */
        atomic_store(&r->failed, 1 + comebacks);
        return ERR_IO;
    }
    return rc;
}

static int r_put(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
                 size_t meta_len)
{
    remote_t *r = ctx;
    uint8_t f[FIELDS_MAX + 8];
    uint8_t *fields = meta_len ? xmalloc(FIELDS_MAX + 8 + meta_len) : f;
    proto_w_t w;
    proto_w_init(&w, fields, FIELDS_MAX + 8 + meta_len);
    w_head(&w, r, id);
    proto_w_u8(&w, 0);
    proto_w_blob(&w, meta, meta_len);
    proto_w_blob_len(&w, len);
    proto_call_t c = {.type = PROTO_PUT, .data = data, .data_len = len};
    int rc = run(r, &c, &w);
    if (fields != f) free(fields);
    return rc;
}

/* ---- asynchronous put ---- */

typedef struct {
    proto_call_t call;
    drive_done_fn done;
    void *arg;
    uint8_t fields[];
} async_put_t;

static void put_done(proto_call_t *c, int rc)
{
    async_put_t *a = (async_put_t *)c;
    drive_done_fn done = a->done;
    void *arg = a->arg;
    free(a);
    /* A failed drive's answer teaches the synchronous calls (run) alone: this one may end
     * after its store is gone. */
    done(arg, rc == ERR_DRIVE_FAILED ? ERR_IO : rc);
}

/* A head's condition over the wire: it is checked by the drive's node (shard_put_head_local). */
static int put_async(remote_t *r, const drive_id_t *id, const void *data, size_t len,
                     const void *meta, size_t meta_len, const shard_cond_t *cond,
                     drive_done_fn done, void *arg);

static int r_put_async(void *ctx, const drive_id_t *id, const void *data, size_t len,
                       const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    return put_async(ctx, id, data, len, meta, meta_len, NULL, done, arg);
}

static int r_put_head(void *ctx, const drive_id_t *id, const void *data, size_t len,
                      const void *meta, size_t meta_len, const shard_cond_t *cond,
                      drive_done_fn done, void *arg)
{
    return put_async(ctx, id, data, len, meta, meta_len, cond, done, arg);
}

static int put_async(remote_t *r, const drive_id_t *id, const void *data, size_t len,
                     const void *meta, size_t meta_len, const shard_cond_t *cond,
                     drive_done_fn done, void *arg)
{
    async_put_t *a = xmalloc(sizeof(*a) + FIELDS_MAX + 64 + meta_len);
    proto_w_t w;
    proto_w_init(&w, a->fields, FIELDS_MAX + 64 + meta_len);
    w_head(&w, r, id);
    proto_w_u8(&w, cond ? (uint8_t)cond->mode : 0);
    if (cond) {
        proto_w_u64(&w, cond->stamp);
        proto_w_str(&w, cond->upload);
        proto_w_str(&w, cond->self);
    }
    proto_w_blob(&w, meta, meta_len);
    proto_w_blob_len(&w, len);
    if (w.err) {
        free(a);
        return ERR_INVAL;
    }
    memset(&a->call, 0, sizeof(a->call));
    a->call.type = PROTO_PUT;
    a->call.fields = a->fields;
    a->call.fields_len = w.len;
    a->call.data = data;
    a->call.data_len = len;
    a->call.done = put_done;
    a->done = done;
    a->arg = arg;
    /* A hedged write's (obj__put_start): it may be given up on once the quorum has its round. */
    proto_call_async_cancelable(r->peer, &a->call, shard_hedge_token());
    return 0;
}

/* ---- reads ---- */

typedef struct {
    void *buf, *tail, *meta;
    size_t len, tail_len, meta_cap, cap;
    uint32_t *buf_crc;
    drive_stat_t *st;
} dest_t;

static int read_resp(proto_call_t *c, int status, const uint8_t *p, size_t len)
{
    dest_t *d = c->arg;
    if (status) return status;
    proto_r_t r;
    uint32_t n;
    proto_r_init(&r, p, len);
    const uint8_t *b = proto_r_blob(&r, &n);
    if (proto_r_end(&r) || n != d->len) return ERR_CORRUPT;
    memcpy(d->buf, b, n);
    return 0;
}

static int r_read(void *ctx, const drive_id_t *id, uint64_t off, void *buf, size_t len)
{
    remote_t *r = ctx;
    if (len > PROTO_MAX_PAYLOAD - 4) return ERR_TOO_LARGE;
    uint8_t f[FIELDS_MAX + 12];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    w_head(&w, r, id);
    proto_w_u64(&w, off);
    proto_w_u32(&w, (uint32_t)len);
    dest_t d = {.buf = buf, .len = len};
    proto_call_t c = {.type = PROTO_READ, .on_resp = read_resp, .arg = &d};
    return run(r, &c, &w);
}

static int split_resp(proto_call_t *c, int status, const uint8_t *p, size_t len)
{
    dest_t *d = c->arg;
    if (status) return status;
    proto_r_t r;
    uint32_t n;
    proto_r_init(&r, p, len);
    uint32_t crc = proto_r_u32(&r);
    const uint8_t *b = proto_r_blob(&r, &n);
    if (proto_r_end(&r) || n != d->len + d->tail_len) return ERR_CORRUPT;
    memcpy(d->buf, b, d->len);
    memcpy(d->tail, b + d->len, d->tail_len);
    if (d->buf_crc) *d->buf_crc = crc;
    return 0;
}

static int r_read_split(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                        size_t tail_len, uint32_t *buf_crc)
{
    remote_t *r = ctx;
    if (len + tail_len > PROTO_MAX_PAYLOAD - 8) return ERR_TOO_LARGE;
    uint8_t f[FIELDS_MAX + 8];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    w_head(&w, r, id);
    proto_w_u32(&w, (uint32_t)len);
    proto_w_u32(&w, (uint32_t)tail_len);
    dest_t d = {.buf = buf, .len = len, .tail = tail, .tail_len = tail_len, .buf_crc = buf_crc};
    proto_call_t c = {.type = PROTO_READ_SPLIT, .on_resp = split_resp, .arg = &d};
    return run(r, &c, &w);
}

static void stat_out(drive_stat_t *st, const proto_stat_t *ps)
{
    st->len = ps->len;
    st->seq = ps->seq;
    st->crc = ps->crc;
    st->meta_len = ps->meta_len;
}

/* A blob of metadata for a stat: at most meta_cap bytes into d->meta (the stat says the length). */
static void r_meta(proto_r_t *r, const proto_stat_t *ps, dest_t *d)
{
    uint32_t n;
    const uint8_t *m = proto_r_blob(r, &n);
    if (r->err) return;
    if (n != (ps->meta_len < d->meta_cap ? ps->meta_len : d->meta_cap)) {
        r->err = ERR_CORRUPT;
        return;
    }
    stat_out(d->st, ps);
    if (n) memcpy(d->meta, m, n);
}

static int stat_resp(proto_call_t *c, int status, const uint8_t *p, size_t len)
{
    dest_t *d = c->arg;
    if (status) return status;
    proto_r_t r;
    proto_stat_t ps;
    proto_r_init(&r, p, len);
    proto_r_stat(&r, &ps);
    r_meta(&r, &ps, d);
    return proto_r_end(&r) ? ERR_CORRUPT : 0;
}

static int r_stat(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap)
{
    remote_t *r = ctx;
    uint8_t f[FIELDS_MAX + 4];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    w_head(&w, r, id);
    if (!meta) meta_cap = 0;
    proto_w_u32(&w, (uint32_t)(meta_cap < UINT32_MAX ? meta_cap : UINT32_MAX));
    dest_t d = {.st = st, .meta = meta, .meta_cap = meta_cap};
    proto_call_t c = {.type = PROTO_STAT, .on_resp = stat_resp, .arg = &d};
    return run(r, &c, &w);
}

typedef struct {
    proto_call_t call;
    dest_t d;
    drive_done_fn done;
    void *arg;
    uint8_t fields[FIELDS_MAX + 4];
} async_stat_t;

static void stat_done(proto_call_t *c, int rc)
{
    async_stat_t *a = (async_stat_t *)c;
    drive_done_fn done = a->done;
    void *arg = a->arg;
    free(a);
    done(arg, rc == ERR_DRIVE_FAILED ? ERR_IO : rc);
}

static int r_stat_async(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta,
                        size_t meta_cap, drive_done_fn done, void *arg)
{
    remote_t *r = ctx;
    async_stat_t *a = xmalloc(sizeof(*a));
    proto_w_t w;
    proto_w_init(&w, a->fields, sizeof(a->fields));
    w_head(&w, r, id);
    if (!meta) meta_cap = 0;
    proto_w_u32(&w, (uint32_t)(meta_cap < UINT32_MAX ? meta_cap : UINT32_MAX));
    if (w.err) {
        free(a);
        return ERR_INVAL;
    }
    a->d = (dest_t){.st = st, .meta = meta, .meta_cap = meta_cap};
    a->call = (proto_call_t){.type = PROTO_STAT,
                             .fields = a->fields,
                             .fields_len = w.len,
                             .on_resp = stat_resp,
                             .arg = &a->d,
                             .done = stat_done};
    a->done = done;
    a->arg = arg;
    /* A hedged write's (obj__put_start): it may be given up on once the quorum has its round. */
    proto_call_async_cancelable(r->peer, &a->call, shard_hedge_token());
    return 0;
}

/* GET: stat, blob data, blob meta; ERR_RANGE carries the stat and meta (no data). */
static int get_resp(proto_call_t *c, int status, const uint8_t *p, size_t len)
{
    dest_t *d = c->arg;
    if (status && status != ERR_RANGE) return status;
    proto_r_t r;
    proto_stat_t ps;
    uint32_t n;
    proto_r_init(&r, p, len);
    proto_r_stat(&r, &ps);
    const uint8_t *b = proto_r_blob(&r, &n);
    r_meta(&r, &ps, d);
    if (proto_r_end(&r)) return ERR_CORRUPT;
    if (status) return n ? ERR_CORRUPT : status;
    if (n != ps.len || n > d->cap) return ERR_CORRUPT;
    memcpy(d->buf, b, n);
    return 0;
}

static int r_get(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap,
                 void *buf, size_t cap)
{
    remote_t *r = ctx;
    uint8_t f[FIELDS_MAX + 8];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    w_head(&w, r, id);
    if (!meta) meta_cap = 0;
    if (meta_cap > 1u << 20) meta_cap = 1u << 20;
    if (cap > PROTO_MAX_PAYLOAD - (1u << 20) - 64) cap = PROTO_MAX_PAYLOAD - (1u << 20) - 64;
    proto_w_u32(&w, (uint32_t)meta_cap);
    proto_w_u32(&w, (uint32_t)cap);
    dest_t d = {.st = st, .meta = meta, .meta_cap = meta_cap, .buf = buf, .cap = cap};
    proto_call_t c = {.type = PROTO_GET, .on_resp = get_resp, .arg = &d};
    return run(r, &c, &w);
}

static int r_del(void *ctx, const drive_id_t *id)
{
    remote_t *r = ctx;
    uint8_t f[FIELDS_MAX];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    w_head(&w, r, id);
    proto_call_t c = {.type = PROTO_DEL};
    return run(r, &c, &w);
}

/*
 * The condition after the id: checked by the drive's node (shard_delete_head_local). A node
 * of an older build answers ERR_CORRUPT (bytes after the id) and removes nothing.
 */
static int r_del_head(void *ctx, const drive_id_t *id, const shard_cond_t *cond)
{
    remote_t *r = ctx;
    uint8_t f[FIELDS_MAX + 80];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    w_head(&w, r, id);
    if (cond) {
        proto_w_u8(&w, (uint8_t)cond->mode);
        proto_w_u64(&w, cond->stamp);
        proto_w_str(&w, cond->upload);
        proto_w_str(&w, cond->self);
    }
    proto_call_t c = {.type = PROTO_DEL};
    return run(r, &c, &w);
}

/* ---- pages: copied out, walked on the caller's thread ---- */

typedef struct {
    uint8_t *p;
    size_t len;
} page_t;

static int page_resp(proto_call_t *c, int status, const uint8_t *p, size_t len)
{
    page_t *pg = c->arg;
    if (status) return status;
    pg->p = xmalloc(len ? len : 1);
    memcpy(pg->p, p, len);
    pg->len = len;
    return 0;
}

/* (key, version) against (k, v), in the index's order (key 0 version 0 shard: bytewise). */
static int id_cmp(const proto_id_t *id, const char *k, const char *v)
{
    int c = strcmp(id->key, k);
    return c ? c : strcmp(id->version, v);
}

/*
 * Walk one SCAN page: fn per entry; *more and the last entry's key and version for the next.
 * A page is what the peer says; it is taken only as a store's index walk could have made it:
 * entries in the index's order, the first past where the page was asked to start (first:
 * none asked), each under the prefix, and a page saying there is more holds at least one.
 * Else ERR_CORRUPT: a peer that repeats an entry, or sends empty pages with more to come,
 * would keep the walk (a listing, the scanner) asking forever.
 */
static int walk_page(const page_t *pg, const char *bucket, const char *prefix, int first,
                     drive_scan_fn fn, drive_list_fn lfn, void *arg, int *more, char *last_key,
                     char *last_ver)
{
    proto_r_t r;
    proto_r_init(&r, pg->p, pg->len);
    uint32_t n = proto_r_u32(&r);
    proto_id_t *id = xmalloc(sizeof(*id));
    size_t pl = prefix ? strlen(prefix) : 0;
    int rc = 0;
    for (uint32_t i = 0; i < n && !r.err; i++) {
        proto_stat_t ps;
        uint32_t ml;
        proto_r_str(&r, id->key, sizeof(id->key));
        proto_r_str(&r, id->version, sizeof(id->version));
        id->shard = proto_r_u32(&r);
        proto_r_stat(&r, &ps);
        const uint8_t *meta = proto_r_blob(&r, &ml);
        if (r.err || (fn && ml != ps.meta_len)) break;
        int c = id_cmp(id, last_key, last_ver);
        if ((pl && strncmp(id->key, prefix, pl) != 0) || c < 0 || (c == 0 && i == 0 && !first)) {
            log_warn("event=peer_scan_out_of_order bucket=%s: the peer's page is refused", bucket);
            rc = ERR_CORRUPT;
            break;
        }
        drive_id_t did = {bucket, id->key, id->version, id->shard};
        drive_stat_t st;
        stat_out(&st, &ps);
        snprintf(last_key, PROTO_MAX_KEY + 1, "%s", id->key);
        snprintf(last_ver, PROTO_MAX_NAME + 1, "%s", id->version);
        rc = fn ? fn(arg, &did, &st, meta) : lfn(arg, &did, &st);
        if (rc) break;
    }
    if (!rc) {
        *more = proto_r_u8(&r);
        if (proto_r_end(&r) || (*more && n == 0)) rc = ERR_CORRUPT;
    }
    free(id);
    return rc;
}

static int scan_all(remote_t *r, const char *bucket, const char *prefix, const drive_from_t *from,
                    drive_scan_fn fn, drive_list_fn lfn, void *arg)
{
    char *last_key = xcalloc(1, PROTO_MAX_KEY + 1); /* "": before every entry */
    char *last_ver = xcalloc(1, PROTO_MAX_NAME + 1);
    uint8_t *f = xmalloc(FIELDS_MAX + 2 * PROTO_MAX_KEY + 300);
    drive_from_t at = from ? *from : (drive_from_t){DRIVE_FROM_START, NULL, NULL};
    int rc, more = 1, first = 1;
    do {
        proto_w_t w;
        proto_w_init(&w, f, FIELDS_MAX + 2 * PROTO_MAX_KEY + 300);
        proto_w_u32(&w, r->drive);
        proto_w_str(&w, bucket);
        proto_w_str(&w, prefix ? prefix : "");
        proto_w_u8(&w, (uint8_t)at.how);
        proto_w_str(&w, at.how != DRIVE_FROM_START && at.key ? at.key : "");
        proto_w_str(&w, at.how == DRIVE_PAST_VERSION && at.version ? at.version : "");
        proto_w_u32(&w, SCAN_LIMIT);
        proto_w_u8(&w, fn != NULL);
        page_t pg = {0};
        proto_call_t c = {.type = PROTO_SCAN, .on_resp = page_resp, .arg = &pg};
        rc = run(r, &c, &w);
        if (rc) break;
        rc = walk_page(&pg, bucket, prefix, first, fn, lfn, arg, &more, last_key, last_ver);
        first = 0;
        free(pg.p);
        /* A page ends between (key, version) pairs: go on past the last one. */
        at = (drive_from_t){DRIVE_PAST_VERSION, last_key, last_ver};
    } while (!rc && more);
    free(f);
    free(last_key);
    free(last_ver);
    return rc;
}

static int r_scan(void *ctx, const char *bucket, const char *prefix, const drive_from_t *from,
                  drive_scan_fn fn, void *arg)
{
    return scan_all(ctx, bucket, prefix, from, fn, NULL, arg);
}

static int r_list(void *ctx, const char *bucket, const char *prefix, const char *after,
                  drive_list_fn fn, void *arg)
{
    drive_from_t from = {DRIVE_FROM_START, NULL, NULL};
    if (after && after[0]) from = (drive_from_t){DRIVE_PAST_KEY, after, NULL};
    return scan_all(ctx, bucket, prefix, &from, NULL, fn, arg);
}

static void r_stats(void *ctx, drive_stats_t *st)
{
    remote_t *r = ctx;
    memset(st, 0, sizeof(*st));
    uint8_t f[4];
    proto_w_t w;
    proto_w_init(&w, f, sizeof(f));
    proto_w_u32(&w, r->drive);
    page_t pg = {0};
    proto_call_t c = {.type = PROTO_STATS, .on_resp = page_resp, .arg = &pg};
    if (run(r, &c, &w) != 0) return; /* an unreachable drive reports nothing */
    proto_r_t rd;
    proto_r_init(&rd, pg.p, pg.len);
    uint32_t n = proto_r_u32(&rd), i = 0;
#define GET_INT(f)                                                                                 \
    if (i++ < n) st->f = (__typeof__(st->f))proto_r_u64(&rd);
#define GET_REAL(f)                                                                                \
    if (i++ < n) {                                                                                 \
        uint64_t bits = proto_r_u64(&rd);                                                          \
        memcpy(&st->f, &bits, sizeof(double));                                                     \
    }
    PEER_STATS_INT(GET_INT)
    PEER_STATS_REAL(GET_REAL)
    PEER_STATS_MORE(GET_INT)
#undef GET_INT
#undef GET_REAL
    free(pg.p);
}

static int r_health(void *ctx)
{
    remote_t *r = ctx;
    /*
     * Failed as its node's registration said, until that node comes back from down (a
     * restart): then the drive may well serve (mended), and taken as failed until the next
     * read of the registrations, the deletes made meanwhile went around it and left its
     * heads of the deleted versions standing (a review: listed again once two other drives
     * were replaced). Up then, a drive still failed answers ERR_IO until marked again.
     */
    uint64_t f = atomic_load(&r->failed);
    if (f && f - 1 == proto_peer_comebacks(r->peer)) return SHARD_FAILED;
    switch (proto_peer_health(((remote_t *)ctx)->peer)) {
    case PROTO_PEER_UP:
        return SHARD_UP;
    case PROTO_PEER_SUSPECT:
        return SHARD_SUSPECT;
    default:
        return SHARD_DOWN;
    }
}

static int r_refilling(void *ctx)
{
    return atomic_load(&((remote_t *)ctx)->refilling);
}

static const shard_ops_t remote_ops = {
    .put = r_put,
    .read = r_read,
    .stat = r_stat,
    .del = r_del,
    .del_head = r_del_head,
    .list = r_list,
    .read_split = r_read_split,
    .refilling = r_refilling,
    .get = r_get,
    .stats = r_stats,
    .put_async = r_put_async,
    .scan = r_scan,
    .put_head = r_put_head,
    .health = r_health,
    .stat_async = r_stat_async,
};

shard_store_t peer_store_new(proto_peer_t *peer, uint32_t drive)
{
    remote_t *r = xmalloc(sizeof(*r));
    r->peer = peer;
    r->drive = drive;
    atomic_init(&r->refilling, 0);
    atomic_init(&r->failed, (uint64_t)0);
    return (shard_store_t){&remote_ops, r};
}

void peer_store_free(shard_store_t *st)
{
    if (st->ops == &remote_ops) free(st->ctx);
    st->ctx = NULL;
}

void peer_store_set_refilling(shard_store_t *s, int on)
{
    if (s->ops == &remote_ops) atomic_store(&((remote_t *)s->ctx)->refilling, on ? 1 : 0);
}

void peer_store_set_failed(shard_store_t *s, int on)
{
    if (s->ops != &remote_ops) return;
    remote_t *r = s->ctx;
    atomic_store(&r->failed, on ? 1 + proto_peer_comebacks(r->peer) : 0);
}
