/*
 * peer_serve: answers peers' calls from this node's drives (server/peer.h).
 *
 * The protocol's loop thread hands each request here; the drive call runs
 * on this module's pool, never on the loop. A PUT is submitted with
 * drive_put_async and answered from its completion, so a pool thread never
 * waits for a commit and a drive's group commit sees every peer's writes
 * in flight together. Replies are built in place: a READ's bytes land in
 * the reply buffer, after its few header bytes.
 */
#include "server/peer.h"

#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/pool.h"

#include <pthread.h>
#include "storage/rec.h"

#include <stdlib.h>
#include <string.h>

#define STAT_LEN   24         /* proto_stat_t on the wire */
#define PAGE_BYTES (1u << 20) /* a SCAN page stops growing past this */
#define PAGE_MAX   10000      /* ... or this many entries */

#define SCAN_REPLY (PAGE_BYTES + REC_MAX_META + REC_MAX_KEY + REC_MAX_VERSION + 256)

/*
 * The reply buffers the handlers below ask for, by request: peer_serve_reply_bound charges
 * the same to the serve budget when a request arrives (0: refused without one).
 */
static size_t read_reply(const proto_req_t *q)
{
    return q->len > PROTO_MAX_PAYLOAD - 4 ? 0 : 4 + (size_t)q->len;
}

static size_t split_reply(const proto_req_t *q)
{
    size_t total = (size_t)q->len + q->tail_len;
    return total > PROTO_MAX_PAYLOAD - 8 ? 0 : 8 + total;
}

static uint32_t get_meta_cap(const proto_req_t *q)
{
    return q->meta_cap < REC_MAX_META ? q->meta_cap : REC_MAX_META;
}

static uint32_t get_cap(const proto_req_t *q)
{
    uint32_t most = PROTO_MAX_PAYLOAD - STAT_LEN - 8 - get_meta_cap(q);
    return q->cap < most ? q->cap : most;
}

size_t peer_serve_reply_bound(void *arg, const proto_req_t *q)
{
    (void)arg;
    switch (q->type) {
    case PROTO_READ:
        return read_reply(q);
    case PROTO_READ_SPLIT:
        return split_reply(q);
    case PROTO_GET:
        return STAT_LEN + 8 + (size_t)get_cap(q) + get_meta_cap(q);
    case PROTO_STAT:
        return STAT_LEN + 4 + (size_t)get_meta_cap(q);
    case PROTO_SCAN:
        return SCAN_REPLY;
    case PROTO_STATS:
        return 4 + 8 * PROTO_STATS_N;
    default:
        return 0; /* none, or of a size known once made (NODE_STATS: charged when sent) */
    }
}

/* The wire's condition modes are the stores' (a new mode goes in both). */
_Static_assert(PROTO_COND_MAX == SHARD_IF_REWRITE, "proto/wire.h PROTO_COND_MAX: shard.h's modes");

struct peer_serve {
    drive_t **drives;
    int n;
    pool_t *pool;
    pthread_mutex_t stats_mu;       /* held while node_stats runs: unset, it runs no more */
    char *(*node_stats)(void *arg); /* peer_serve_node_stats */
    int (*heal_now)(void *arg);     /* ... and what HEAL_NOW runs */
    void *node_stats_arg;
    int (*gate)(void *arg, const char *node); /* peer_serve_gate */
    void *gate_arg;
};

/* Requests an admin tool (not a member, but holding the secret) may make: it reads counters
 * and may start a heal pass, nothing else. */
static int admin_type(int type)
{
    return type == PROTO_PING || type == PROTO_STATS || type == PROTO_NODE_STATS ||
           type == PROTO_HEAL_NOW;
}

typedef struct {
    pool_job_t job;
    peer_serve_t *sv;
    proto_inbound_t *in;
} serve_job_t;

/* A request's head condition (cond_mode set) as the stores take it: 0, or ERR_INVAL. */
static int cond_of(const proto_req_t *q, shard_cond_t *c)
{
    *c = (shard_cond_t){.mode = q->cond_mode, .stamp = q->cond_stamp};
    size_t ul = strlen(q->cond_upload), sl = strlen(q->cond_self);
    if (ul >= sizeof(c->upload) || sl >= sizeof(c->self)) return ERR_INVAL; /* 32 hex digits */
    memcpy(c->upload, q->cond_upload, ul + 1);
    memcpy(c->self, q->cond_self, sl + 1);
    return 0;
}

static drive_id_t id_of(const proto_req_t *q)
{
    return (drive_id_t){q->id.bucket, q->id.key, q->id.version, q->id.shard};
}

static void w_stat(proto_w_t *w, const drive_stat_t *st)
{
    proto_stat_t ps = {st->len, st->seq, st->crc, st->meta_len};
    proto_w_stat(w, &ps);
}

static void put_done(void *arg, int rc)
{
    proto_reply(arg, rc, 0);
}

/* ---- SCAN ---- */

typedef struct {
    proto_w_t w;
    size_t count_at; /* where the entry count goes */
    uint32_t n, limit;
    int with_meta, full;
    char *last_key, *last_ver; /* the last entry's, to end a page only between versions */
} page_t;

static int page_add(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    page_t *pg = arg;
    int same =
        pg->n && strcmp(id->key, pg->last_key) == 0 && strcmp(id->version, pg->last_ver) == 0;
    if (!same && (pg->n >= pg->limit || pg->w.len >= PAGE_BYTES)) {
        pg->full = 1;
        return 1;
    }
    proto_w_str(&pg->w, id->key);
    proto_w_str(&pg->w, id->version);
    proto_w_u32(&pg->w, id->shard);
    w_stat(&pg->w, st);
    proto_w_blob(&pg->w, meta, pg->with_meta ? st->meta_len : 0);
    if (pg->w.err) return ERR_TOO_LARGE; /* cannot happen: the page has room for a whole entry */
    pg->n++;
    snprintf(pg->last_key, REC_MAX_KEY + 1, "%s", id->key);
    snprintf(pg->last_ver, REC_MAX_VERSION + 1, "%s", id->version);
    return 0;
}

static void serve_scan(drive_t *d, proto_inbound_t *in)
{
    const proto_req_t *q = &in->req;
    /* Room for a full page plus one more entry of the largest size. */
    size_t cap = SCAN_REPLY;
    page_t pg = {.limit = q->limit ? q->limit : 1, .with_meta = q->with_meta};
    if (pg.limit > PAGE_MAX) pg.limit = PAGE_MAX;
    pg.last_key = xmalloc(REC_MAX_KEY + 1);
    pg.last_ver = xmalloc(REC_MAX_VERSION + 1);
    proto_w_init(&pg.w, proto_reply_buf(in, cap), cap);
    proto_w_u32(&pg.w, 0);
    drive_from_t from = {q->how, q->from_key, q->from_version};
    int rc = ERR_INVAL;
    if (q->how <= DRIVE_PAST_PREFIX)
        rc = drive_scan(d, q->id.bucket, q->prefix[0] ? q->prefix : NULL, &from, page_add, &pg);
    free(pg.last_key);
    free(pg.last_ver);
    if (rc == 1 && pg.full) rc = 0;
    if (rc) {
        proto_reply(in, rc, 0);
        return;
    }
    proto_w_u8(&pg.w, (uint8_t)pg.full);
    le_put32(pg.w.p, pg.n);
    proto_reply(in, 0, pg.w.len);
}

/* ---- the other calls ---- */

static void serve(pool_job_t *j)
{
    serve_job_t *sj = (serve_job_t *)j;
    proto_inbound_t *in = sj->in;
    const proto_req_t *q = &in->req;
    peer_serve_t *sv = sj->sv;
    free(sj);
    if (sv->gate && !sv->gate(sv->gate_arg, in->peer) && !admin_type(q->type)) {
        /* It holds the secret but is not in the map (removed, or never added): its handshake
         * proves who it is, not that it may touch these drives. */
        log_limited(LOG_LVL_WARN, "event=peer_not_member peer=%s type=%s: refused", in->peer,
                    proto_type_name(q->type));
        proto_reply(in, ERR_DENIED, 0);
        return;
    }
    if (q->type == PROTO_PING) {
        proto_reply(in, 0, 0);
        return;
    }
    if (q->type == PROTO_NODE_STATS) {
        pthread_mutex_lock(&sv->stats_mu);
        char *text = sv->node_stats ? sv->node_stats(sv->node_stats_arg) : NULL;
        pthread_mutex_unlock(&sv->stats_mu);
        size_t len = text ? strlen(text) : 0;
        if (len) memcpy(proto_reply_buf(in, len), text, len);
        free(text);
        proto_reply(in, text ? 0 : ERR_NOT_FOUND, len);
        return;
    }
    if (q->type == PROTO_HEAL_NOW) {
        pthread_mutex_lock(&sv->stats_mu);
        int rc = sv->heal_now ? sv->heal_now(sv->node_stats_arg) : ERR_NOT_FOUND;
        pthread_mutex_unlock(&sv->stats_mu);
        log_limited(LOG_LVL_INFO, "event=heal_now_asked peer=%s rc=%s", in->peer, err_name(rc));
        proto_reply(in, rc, 0);
        return;
    }
    if (q->drive >= (uint32_t)sv->n) {
        log_limited(LOG_LVL_WARN, "event=peer_bad_drive peer=%s type=%s drive=%u", in->peer,
                    proto_type_name(q->type), q->drive);
        proto_reply(in, ERR_INVAL, 0);
        return;
    }
    drive_t *d = sv->drives[q->drive];
    if (!d) {
        /* It did not open at this node's start (node_drives.c): failed, as its registration
         * tells the peers, which then call it only when they cannot do without it. Said as
         * such, so that the peers of a cluster without etcd learn it from the answer. (A
         * build from before session 39 takes it for an I/O error, as it took the ERR_IO.) */
        proto_reply(in, ERR_DRIVE_FAILED, 0);
        return;
    }
    drive_id_t id = id_of(q);
    drive_stat_t st = {0};
    proto_w_t w;
    int rc;
    switch (q->type) {
    case PROTO_PUT:
        if (q->cond_mode) {
            shard_cond_t c;
            if (cond_of(q, &c)) {
                proto_reply(in, ERR_INVAL, 0);
                return;
            }
            rc = shard_put_head_local(d, &id, q->data, q->data_len, q->meta, q->meta_len, &c,
                                      put_done, in);
        } else {
            rc = shard_put_async_local(d, &id, q->data, q->data_len, q->meta, q->meta_len, put_done,
                                       in);
        }
        if (rc) proto_reply(in, rc, 0);
        return;
    case PROTO_READ: {
        if (!read_reply(q)) {
            proto_reply(in, ERR_TOO_LARGE, 0);
            return;
        }
        /* The block read onto a page (directly, no bounce copy); its crc, which the read
         * verified chunk by chunk, sealed into the frame's without a second pass. */
        uint8_t *b = proto_reply_buf_at(in, read_reply(q), 4);
        uint32_t crc = 0;
        le_put32(b, q->len);
        rc = drive_read_split(d, &id, q->off, b + 4, q->len, NULL, 0, &crc);
        proto_reply_crc(in, rc, rc ? 0 : 4 + (size_t)q->len, 4, q->len, crc);
        return;
    }
    case PROTO_READ_SPLIT: {
        size_t total = (size_t)q->len + q->tail_len;
        if (!split_reply(q)) {
            proto_reply(in, ERR_TOO_LARGE, 0);
            return;
        }
        uint8_t *b = proto_reply_buf_at(in, split_reply(q), 8); /* (as PROTO_READ's) */
        uint32_t crc = 0;
        le_put32(b + 4, (uint32_t)total);
        rc = drive_read_split(d, &id, 0, b + 8, q->len, b + 8 + q->len, q->tail_len, &crc);
        le_put32(b, crc);
        proto_reply_crc(in, rc, rc ? 0 : 8 + total, 8, q->len, crc);
        return;
    }
    case PROTO_GET: {
        uint32_t meta_cap = get_meta_cap(q), cap = get_cap(q);
        /* stat, blob data, blob meta: the data read in place, the (small) meta moved after it */
        uint8_t *b = proto_reply_buf_at(in, STAT_LEN + 8 + (size_t)cap + meta_cap, STAT_LEN + 4);
        uint8_t *data = b + STAT_LEN + 4, *meta = data + cap + 4;
        rc = drive_get(d, &id, &st, meta, meta_cap, data, cap);
        if (rc && rc != ERR_RANGE) {
            proto_reply(in, rc, 0);
            return;
        }
        uint32_t ml = st.meta_len < meta_cap ? st.meta_len : meta_cap;
        uint32_t dl = rc ? 0 : (uint32_t)st.len;
        proto_w_init(&w, b, STAT_LEN + 4);
        w_stat(&w, &st);
        proto_w_u32(&w, dl);
        le_put32(data + dl, ml);
        memmove(data + dl + 4, meta, ml);
        proto_reply(in, rc, STAT_LEN + 8 + (size_t)dl + ml);
        return;
    }
    case PROTO_STAT: {
        uint32_t meta_cap = get_meta_cap(q);
        uint8_t *b = proto_reply_buf(in, STAT_LEN + 4 + (size_t)meta_cap);
        rc = drive_stat(d, &id, &st, meta_cap ? b + STAT_LEN + 4 : NULL, meta_cap);
        if (rc) {
            proto_reply(in, rc, 0);
            return;
        }
        uint32_t ml = st.meta_len < meta_cap ? st.meta_len : meta_cap;
        proto_w_init(&w, b, STAT_LEN + 4);
        w_stat(&w, &st);
        proto_w_u32(&w, ml);
        proto_reply(in, 0, STAT_LEN + 4 + (size_t)ml);
        return;
    }
    case PROTO_DEL: {
        shard_cond_t c;
        if (q->cond_mode && cond_of(q, &c)) {
            proto_reply(in, ERR_INVAL, 0);
            return;
        }
        proto_reply(in, shard_delete_head_local(d, &id, q->cond_mode ? &c : NULL), 0);
        return;
    }
    case PROTO_SCAN:
        serve_scan(d, in);
        return;
    case PROTO_STATS: {
        drive_stats_t ds;
        drive_stats(d, &ds);
        uint8_t *b = proto_reply_buf(in, 4 + 8 * PROTO_STATS_N);
        proto_w_init(&w, b, 4 + 8 * PROTO_STATS_N);
        proto_w_u32(&w, 0);
        uint32_t n = 0;
#define PUT_INT(f)                                                                                 \
    proto_w_u64(&w, (uint64_t)ds.f);                                                               \
    n++;
#define PUT_REAL(f)                                                                                \
    {                                                                                              \
        uint64_t bits;                                                                             \
        memcpy(&bits, &ds.f, sizeof(bits));                                                        \
        proto_w_u64(&w, bits);                                                                     \
        n++;                                                                                       \
    }
        PEER_STATS_INT(PUT_INT)
        PEER_STATS_REAL(PUT_REAL)
        PEER_STATS_MORE(PUT_INT)
#undef PUT_INT
#undef PUT_REAL
        le_put32(b, n);
        proto_reply(in, w.err ? ERR_TOO_LARGE : 0, w.len);
        return;
    }
    default:
        proto_reply(in, ERR_INVAL, 0);
    }
}

void peer_serve_handle(void *arg, proto_inbound_t *in)
{
    peer_serve_t *sv = arg;
    serve_job_t *sj = xmalloc(sizeof(*sj));
    sj->job.run = serve;
    sj->sv = sv;
    sj->in = in;
    pool_job_t *j = &sj->job;
    pool_submit(sv->pool, &j, 1, NULL);
}

peer_serve_t *peer_serve_new(drive_t **drives, int n, int threads)
{
    peer_serve_t *sv = xcalloc(1, sizeof(*sv));
    sv->drives = drives;
    sv->n = n;
    pthread_mutex_init(&sv->stats_mu, NULL);
    int err;
    pool_cfg_t pc = {.name = "wl-peer", .threads = threads > 0 ? threads : 8};
    if (!(sv->pool = pool_new(&pc, &err))) {
        pthread_mutex_destroy(&sv->stats_mu);
        free(sv);
        return NULL;
    }
    return sv;
}

void peer_serve_node_stats(peer_serve_t *sv, char *(*fn)(void *arg), int (*heal_now)(void *arg),
                           void *arg)
{
    pthread_mutex_lock(&sv->stats_mu);
    sv->node_stats = fn;
    sv->heal_now = heal_now;
    sv->node_stats_arg = arg;
    pthread_mutex_unlock(&sv->stats_mu);
}

void peer_serve_gate(peer_serve_t *sv, int (*fn)(void *arg, const char *node), void *arg)
{
    sv->gate_arg = arg;
    sv->gate = fn;
}

void peer_serve_free(peer_serve_t *sv)
{
    if (!sv) return;
    pool_free(sv->pool);
    pthread_mutex_destroy(&sv->stats_mu);
    free(sv);
}
