/*
 * obj_head.c: heads and versions (room of the object layer; map in
 * obj_int.h): finding the newest head, writing heads, the key and upload
 * locks, pins and deferred drops, delete markers (in-place metadata
 * rewrites: obj_rewrite.c).
 *
 * Pins keep a version's blocks while a reader streams it: a PUT or DELETE
 * that replaces the version hands its drop to the pin, and the last reader
 * to close runs it. A crash in between leaves the old blocks as
 * unreferenced space, never a reader with its blocks pulled away
 * mid-stream. drop_epoch counts the drops done at once, so obj_open can
 * tell that nothing was dropped between its look at the heads and its pin.
 */
#include "server/obj_int.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

typedef struct deferred_drop {
    char *bucket, *key;
    obj_info_t old;
    struct deferred_drop *next;
} deferred_drop_t;

typedef struct pin {
    char upload_id[33];
    int refs;
    deferred_drop_t *drops; /* run by the last unpin */
    struct pin *next;
} pin_t;

int obj__new_upload_id(char out[33])
{
    uint8_t r[16];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) return ERR_IO;
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    return 0;
}

void obj__blk_bucket(char *out, const char *bucket)
{
    size_t n = strnlen(bucket, SHARD_MAX_BUCKET - 1);
    memcpy(out, bucket, n);
    memcpy(out + n, BLK_SUFFIX, 2);
}

void obj__part_key(char *out, size_t cap, const char *upload, int part)
{
    snprintf(out, cap, "%s/%05d", upload, part);
}

static uint32_t fnv1a(uint32_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

pthread_mutex_t *obj__key_lock(obj_set_t *s, const char *bucket, const char *key)
{
    /* Over "bucket\0key": ("a", "bc") and ("ab", "c") are different keys. */
    uint32_t h = fnv1a(2166136261u, bucket, strlen(bucket) + 1);
    return &s->key_locks[fnv1a(h, key, strlen(key)) % KEY_LOCKS];
}

pthread_mutex_t *obj__mpu_lock(obj_set_t *s, const char *upload)
{
    return &s->mpu_locks[fnv1a(2166136261u, upload, strlen(upload)) % KEY_LOCKS];
}

/* The first store of a key's inline copies (and of its head lookups). */
static uint32_t inline_first(const obj_set_t *s, const char *bucket, const char *key)
{
    return fnv1a(fnv1a(2166136261u, bucket, strlen(bucket) + 1), key, strlen(key)) % (uint32_t)s->n;
}

uint32_t obj__first_store(const obj_set_t *s, const char *bucket, const char *key)
{
    return inline_first(s, bucket, key);
}

/* ---- heads read from several stores at once ---- */

typedef struct {
    latch_t *latch;
    int rc;
    /* HJ_OUT until answered (HJ_ANSWERED) or given up on by the reader (HJ_GIVEN_UP: the
     * answer, when it comes, frees the job and touches nothing else). */
    _Atomic int state;
    drive_stat_t st;
    uint8_t meta[HEAD_MAX];
} head_job_t;
enum { HJ_OUT = 0, HJ_ANSWERED, HJ_GIVEN_UP };

static void head_done(void *arg, int rc)
{
    head_job_t *j = arg;
    j->rc = rc;
    int was = HJ_OUT;
    if (!atomic_compare_exchange_strong(&j->state, &was, HJ_ANSWERED)) {
        free(j); /* its reader went on without it */
        return;
    }
    latch_done(j->latch);
}

static void head_decode(obj__head_t *h, int rc, const drive_stat_t *st, const uint8_t *meta)
{
    h->rc = rc;
    h->ok =
        rc == 0 && st->meta_len <= HEAD_MAX && obj_meta_decode(meta, st->meta_len, &h->info) == 0;
}

void obj__heads_start(obj_set_t *s, obj__heads_rd_t *rd, const char *bucket, const char *key,
                      const char *pos, const int *stores, int n, obj__head_t *out)
{
    *rd = (obj__heads_rd_t){
        .s = s, .bucket = bucket, .key = key, .pos = pos, .stores = stores, .n = n, .out = out};
    for (int j = 0; j < n; j++) {
        const shard_store_t *st = &s->st[stores[j]];
        if (!st->ops->stat_async) continue;
        if (!rd->async) {
            latch_init(&rd->latch);
            rd->async = 1;
        }
        head_job_t *hj = rd->jobs[j] = xmalloc(sizeof(*hj));
        hj->latch = &rd->latch;
        atomic_init(&hj->state, HJ_OUT);
        drive_id_t id = {bucket, key, pos, (uint32_t)stores[j]};
        latch_add(&rd->latch, 1);
        int rc =
            st->ops->stat_async(st->ctx, &id, &hj->st, hj->meta, sizeof(hj->meta), head_done, hj);
        if (rc) head_done(hj, rc);
    }
}

void obj__heads_finish(obj__heads_rd_t *rd)
{
    obj__heads_finish_hedged(rd, 0, 0);
}

void obj__heads_finish_hedged(obj__heads_rd_t *rd, uint32_t hedge_ms, int spare)
{
    uint8_t meta[HEAD_MAX];
    obj_set_t *s = rd->s;
    /* The stores without stat_async (local drives: a lookup each) while the others answer. */
    for (int j = 0; j < rd->n; j++) {
        if (rd->jobs[j]) continue;
        const shard_store_t *st = &s->st[rd->stores[j]];
        drive_id_t id = {rd->bucket, rd->key, rd->pos, (uint32_t)rd->stores[j]};
        drive_stat_t ds;
        int rc = st->ops->stat(st->ctx, &id, &ds, meta, sizeof(meta));
        head_decode(&rd->out[j], rc, &ds, meta);
    }
    if (!rd->async) return;
    int out = 0;
    if (hedge_ms && spare > 0 && latch_wait_ms(&rd->latch, hedge_ms) != 0) {
        for (int j = 0; j < rd->n; j++) {
            head_job_t *hj = rd->jobs[j];
            out += hj && atomic_load(&hj->state) == HJ_OUT;
        }
    }
    if (out && out <= spare) {
        /* Calls still out past the delay, no more than stores left to ask in their place: go
         * on without them (the caller asks those), and read around their stores for a while.
         * More than that, and the verdict would rest on fewer than m+1 answers: wait. */
        for (int j = 0; j < rd->n; j++) {
            head_job_t *hj = rd->jobs[j];
            int was = HJ_OUT;
            if (!hj || !atomic_compare_exchange_strong(&hj->state, &was, HJ_GIVEN_UP)) continue;
            rd->jobs[j] = NULL;
            rd->out[j].rc = ERR_CANCELED;
            rd->out[j].ok = 0;
            obj__mark_slow(s, (unsigned)rd->stores[j]);
            latch_done(&rd->latch);
        }
    }
    latch_wait(&rd->latch);
    for (int j = 0; j < rd->n; j++) {
        head_job_t *hj = rd->jobs[j];
        if (!hj) continue;
        head_decode(&rd->out[j], hj->rc, &hj->st, hj->meta);
        free(hj);
    }
    latch_destroy(&rd->latch);
}

void obj__read_heads(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                     const int *stores, int n, obj__head_t *out)
{
    obj__heads_rd_t rd;
    obj__heads_start(s, &rd, bucket, key, pos, stores, n, out);
    obj__heads_finish(&rd);
}

/* Whether a is newer than b in the order readers pick heads by: stamp, then upload id. */
static int newer(const obj_info_t *a, const obj_info_t *b)
{
    return a->stamp_ns > b->stamp_ns ||
           (a->stamp_ns == b->stamp_ns && strcmp(a->upload_id, b->upload_id) > 0);
}

/* The first store's record, head and payload (newest_at), as a hedged fetch. */
typedef struct {
    const shard_store_t *st;
    const drive_id_t *id;
    drive_stat_t *ds;
    uint8_t *meta;
    void *buf;
    size_t cap;
    int rc;
} first_get_t;

static int first_get(void *ctx, unsigned i)
{
    (void)i;
    first_get_t *g = ctx;
    return g->rc = g->st->ops->get(g->st->ctx, g->id, g->ds, g->meta, HEAD_MAX, g->buf, g->cap);
}

/*
 * obj__newest_at; with ibuf (cap bytes), the first store is asked for its
 * record's payload too (drive_get: the same lookup, and one read), and
 * *ibytes says whether ibuf holds the bytes of the newest head's inline
 * version, checked as obj__inline_load checks them: then the GET of an
 * inline object costs no second lookup on that store.
 */
static int newest_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                     obj_info_t *best, void *ibuf, size_t cap, int *ibytes)
{
    uint8_t meta[HEAD_MAX];
    int found = 0, absent = 0, rc = ERR_NOT_FOUND;
    int ifrom = -1;    /* the store whose payload ibuf holds */
    uint64_t ilen = 0; /* its length */
    char iup[33] = ""; /* the upload id of its head, if it carries bytes */
    /*
     * m+1 stores that answer are enough: a committed version has heads on
     * at least k stores, so any m+1 include one of them (or a newer head).
     * They are the key's inline stores, so an inline object's bytes are
     * read from a store just asked; a store that fails is replaced by the
     * next one. Stores that are not up go last: one whose node went silent
     * is asked only when the others cannot settle it. The stores of a
     * round are asked at once (remote ones answer together).
     */
    int order[OBJ_MAX_SHARDS];
    int no = obj__ask_order(s, UINT32_MAX, inline_first(s, bucket, key), order);
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    /*
     * A small object's heads are on its m+1 copies alone (sparse): "absent" from the other
     * stores settles nothing about it. Those come first only when every copy is slow or not
     * up (asked last); then the copies are asked too, all at once, before "not found": a
     * gateway whose loop had stalled (every remote store slow for a moment) answered
     * NoSuchKey for a small object every listing showed.
     */
    uint32_t copies = obj__inline_stores(s, bucket, key);
    int heard = 0; /* a copy answered: found, or absent */
    for (int next = 0; next < no && (found + absent <= s->m || (!found && !heard));) {
        int from = next, want = s->m + 1 - found - absent;
        if (want < 1) {
            /*
             * The copies, asked last: those not yet asked that are up, moved to the front of
             * what is left. Not the other stores, nor a copy whose node is away: a call to a
             * silent node waits out its deadline (the lookup of a key nobody holds, its
             * copies on a stopped node and one marked slow, called the stopped node).
             */
            uint32_t away = obj__unhealthy(s);
            want = 0;
            for (int j = next; j < no; j++)
                if ((copies >> order[j]) & 1 && !((away >> order[j]) & 1)) {
                    int t = order[next + want];
                    order[next + want] = order[j];
                    order[j] = t;
                    want++;
                }
            if (!want) break; /* no copy to ask: the verdict stays open */
        }
        int gi = ibuf && from == 0 && s->st[order[0]].ops->get ? order[0] : -1, g = gi >= 0;
        next = from + want < no ? from + want : no;
        obj__heads_rd_t rd;
        obj__heads_start(s, &rd, bucket, key, pos, order + from + g, next - from - g, h + g);
        int gave = 0; /* the first store's read given up on */
        if (gi >= 0) {
            /* On this thread, while the others answer. */
            drive_id_t id = {bucket, key, pos, (uint32_t)gi};
            drive_stat_t st;
            const shard_store_t *gs = &s->st[gi];
            int src;
            if (gs->ops->stat_async && s->hedge_ms && next < no) {
                /* Behind the network: given up on if slow (the next round asks another store,
                 * the bytes come from a copy); on a pool thread, as this one must keep time. */
                first_get_t fg = {gs, &id, &st, meta, ibuf, cap, ERR_CANCELED};
                obj__hedged_run(s, 1, 0, 1, first_get, &fg, 1);
                src = fg.rc;
                if (src == ERR_CANCELED) obj__mark_slow(s, (unsigned)gi);
                gave = src == ERR_CANCELED;
            } else {
                src = gs->ops->get(gs->ctx, &id, &st, meta, sizeof(meta), ibuf, cap);
            }
            if (src == 0) {
                ifrom = gi;
                ilen = st.len;
            }
            /* A payload bigger than any inline object, or a failure: stat's answer stands (it is
             * what every other head lookup goes by). */
            if (src != 0 && src != ERR_NOT_FOUND && src != ERR_CANCELED)
                src = gs->ops->stat(gs->ctx, &id, &st, meta, sizeof(meta));
            head_decode(&h[0], src, &st, meta);
        }
        /* Hedged while other stores are left to ask in place of slow ones (one fewer when the
         * first store's was given up on already). */
        obj__heads_finish_hedged(&rd, s->hedge_ms, no - next - gave);
        for (int j = 0; j < next - from; j++) {
            int i = order[from + j];
            obj__head_t *r = &h[j];
            if (r->rc == ERR_NOT_FOUND) absent++;
            if ((r->ok || r->rc == ERR_NOT_FOUND) && ((copies >> i) & 1)) heard = 1;
            if (!r->ok) {
                if (ifrom == i) ifrom = -1;
                continue;
            }
            if (ifrom == i && r->info.inl) snprintf(iup, sizeof(iup), "%s", r->info.upload_id);
            if (!found || newer(&r->info, best)) obj_info_copy(best, &r->info);
            found++;
            rc = 0;
        }
    }
    free(h);
    /*
     * A committed version has heads on at least k stores: when more than m
     * say "absent" it cannot exist; fewer means failing stores hide the
     * verdict, and "not found" would be a guess (a listing would skip a key
     * that is there).
     */
    if (!found && (absent <= s->m || !heard)) return ERR_UNRECOVERABLE;
    if (rc == 0 && ibytes && iup[0] && best->inl && ((best->inl >> ifrom) & 1) && !best->deleted &&
        strcmp(best->upload_id, iup) == 0 && ilen == best->size) {
        /* A copy that rots is left to obj__inline_load: it tries the copies in turn and logs
         * the mismatch once. */
        *ibytes = crc32c(0, ibuf, best->size) == best->inl_crc;
    }
    return rc;
}

int obj__newest_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                   obj_info_t *best)
{
    return newest_at(s, bucket, key, pos, best, NULL, 0, NULL);
}

int obj__newest_inline(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best,
                       void *buf, size_t cap, int *have)
{
    *have = 0;
    return newest_at(s, bucket, key, "", best, buf, cap, have);
}

int obj__newest_head(obj_set_t *s, const char *bucket, const char *key, obj_info_t *best)
{
    return obj__newest_at(s, bucket, key, "", best);
}

void (*obj__routed_hook)(void *arg, const char *key);
void *obj__routed_hook_arg;

static int current_only(obj_set_t *set, const char *bucket, const char *key, obj_info_t *info,
                        obj_head_read_fn read)
{
    int rc = read(set, bucket, key, info);
    return rc == 0 && info->deleted ? ERR_NOT_FOUND : rc;
}

int obj__stat_routed(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                     obj_head_read_fn read)
{
    obj_set_t *set = obj__route(s, bucket, key);
    if (obj__routed_hook) obj__routed_hook(obj__routed_hook_arg, key);
    int rc = current_only(set, bucket, key, info, read);
    if (rc == ERR_NOT_FOUND && obj_set_pools(s) > 1) {
        obj_set_t *now = obj__route(s, bucket, key);
        if (now != set) rc = current_only(now, bucket, key, info, read);
    }
    return rc;
}

int obj_stat(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info)
{
    return obj__stat_routed(s, bucket, key, info, obj__newest_head);
}

/* All at once: one durable write's time, not n. */
int obj__write_heads(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                     uint32_t dead, int *first_err)
{
    return obj__write_at(s, bucket, key, "", info, dead, first_err);
}

int obj__write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                  obj_info_t *info, uint32_t dead, int *first_err)
{
    return obj__write_at_data(s, bucket, key, pos, info, NULL, dead, first_err);
}

int obj__enough(const obj_set_t *s, const obj_info_t *info, int heads)
{
    return info->sparse ? heads >= __builtin_popcount(info->inl) : heads >= s->wq;
}

/*
 * The first half of a round of heads: start the puts on the stores of `to`
 * (the bytes, data, on those of info->inl), meta (HEAD_MAX bytes) and jobs
 * kept by the caller until l opens. Returns the jobs started, or -1 when
 * info's metadata does not encode (*first_err ERR_TOO_LARGE, nothing
 * started).
 */
static int heads_start(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       const obj_info_t *info, const void *data, uint32_t to,
                       const shard_cond_t *cond, int hedge, uint8_t *meta, obj__put_job_t *jobs,
                       latch_t *l, int *first_err)
{
    size_t ml = obj_meta_encode(info, meta, HEAD_MAX);
    int n = 0;
    if (!ml) {
        if (!*first_err) *first_err = ERR_TOO_LARGE;
        return -1;
    }
    for (int i = 0; i < s->n; i++) {
        if (!((to >> i) & 1)) continue;
        int carries = (info->inl >> i) & 1;
        jobs[n] = (obj__put_job_t){.base = {.run = obj__run_put},
                                   .st = &s->st[i],
                                   .id = {bucket, key, pos, (uint32_t)i},
                                   .data = carries ? data : NULL,
                                   .len = carries ? (size_t)info->size : 0,
                                   .meta = meta,
                                   .meta_len = ml,
                                   .cond = cond,
                                   .hedge = hedge && s->hedge_ms};
        n++;
    }
    obj__put_start(s, jobs, n, l);
    return n;
}

/* The second half, once the latch opened: the heads written; failures and refusals counted. */
static int heads_count(const obj__put_job_t *jobs, int n, const shard_cond_t *cond,
                       uint32_t *failed, int *refused, int *first_err)
{
    int heads = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i].rc == 0) {
            heads++;
            continue;
        }
        if (jobs[i].rc == ERR_CANCELED) {
            *failed |= 1u << jobs[i].id.shard; /* given up on: healed, as a store that failed */
            continue;
        }
        if (jobs[i].rc == ERR_PRECOND && cond) {
            (*refused)++; /* the store holds what the condition does not allow to replace */
            continue;
        }
        *failed |= 1u << jobs[i].id.shard;
        if (!*first_err) *first_err = jobs[i].rc;
    }
    return heads;
}

/*
 * One round of heads: on the stores of `to`, the bytes (data) on those of
 * info->inl. Returns the heads written; the stores that failed join *failed.
 */
static int heads_round(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       const obj_info_t *info, const void *data, uint32_t to,
                       const shard_cond_t *cond, int hedge, uint32_t *failed, int *refused,
                       int *first_err)
{
    uint8_t meta[HEAD_MAX];
    obj__put_job_t jobs[OBJ_MAX_SHARDS];
    latch_t l;
    latch_init(&l);
    int n =
        heads_start(s, bucket, key, pos, info, data, to, cond, hedge, meta, jobs, &l, first_err);
    if (n < 0) {
        latch_destroy(&l);
        return 0;
    }
    /*
     * A commit's round is hedged only once the version stands for good (the write quorum, or
     * every copy of a sparse one, durable): then a head given up on that lands late is a
     * head of a committed version, which its store's condition judges as any other (refused
     * under a newer one). Short of that it is waited for, so that an undo never misses a head
     * still on its way (one landing after the undo would be a version that was refused).
     */
    uint32_t gave =
        obj__put_wait(s, jobs, n, &l, info->sparse ? __builtin_popcount(info->inl) : s->wq, 0);
    latch_destroy(&l);
    if (gave)
        log_warn("event=heads_hedged key=%s upload=%s stores=0x%x: the quorum had the heads", key,
                 info->upload_id, gave);
    return heads_count(jobs, n, cond, failed, refused, first_err);
}

int obj__heads_to(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                  const obj_info_t *info, const void *data, uint32_t to, const shard_cond_t *cond,
                  uint32_t *failed, int *refused, int *first_err)
{
    return heads_round(s, bucket, key, pos, info, data, to, cond, 0, failed, refused, first_err);
}

int obj__heads_to_start(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                        const obj_info_t *info, uint32_t to, const shard_cond_t *cond,
                        uint8_t *meta, obj__put_job_t *jobs, latch_t *l, int *first_err)
{
    return heads_start(s, bucket, key, pos, info, NULL, to, cond, 0, meta, jobs, l, first_err);
}

int obj__heads_to_count(const obj__put_job_t *jobs, int n, const shard_cond_t *cond,
                        uint32_t *failed, int *refused, int *first_err)
{
    return n < 0 ? 0 : heads_count(jobs, n, cond, failed, refused, first_err);
}

/* Every store of the set, as a mask. */
static uint32_t all_stores(const obj_set_t *s)
{
    return s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
}

/* The first m+1 stores from the key's first inline store that are not in `skip`. */
static uint32_t copies_avoiding(const obj_set_t *s, const char *bucket, const char *key,
                                uint32_t skip)
{
    uint32_t h = inline_first(s, bucket, key), mask = 0;
    for (int j = 0, got = 0; j < s->n && got <= s->m; j++) {
        uint32_t i = (h + (uint32_t)j) % (uint32_t)s->n;
        if ((skip >> i) & 1) continue;
        mask |= 1u << i;
        got++;
    }
    return mask;
}

int obj__write_at_data(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       obj_info_t *info, const void *data, uint32_t dead, int *first_err)
{
    int refused = 0;
    return obj__write_at_cond(s, bucket, key, pos, info, data, dead, NULL, &refused, first_err);
}

static int write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                    obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                    int hedge, int *refused, int *first_err);

int obj__write_at_cond(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                       int *refused, int *first_err)
{
    return write_at(s, bucket, key, pos, info, data, dead, cond, 0, refused, first_err);
}

int obj__write_commit(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                      const void *data, uint32_t dead, const shard_cond_t *cond, int *refused,
                      int *first_err)
{
    return write_at(s, bucket, key, "", info, data, dead, cond, 1, refused, first_err);
}

static int write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                    obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                    int hedge, int *refused, int *first_err)
{
    uint32_t all = all_stores(s), failed = 0;
    void *loaded = NULL;
    int heads;
    shard_cond_t newer;
    *first_err = 0;
    *refused = 0;
    if (!cond && !pos[0]) {
        /* The current position: a store keeps a newer head than this one. */
        newer.mode = SHARD_IF_NEWER;
        newer.stamp = info->stamp_ns;
        memcpy(newer.upload, info->upload_id, sizeof(newer.upload));
        cond = &newer;
    }
    if (info->inl && !data && info->size) {
        /* The version moves or gets new metadata: its bytes go with its heads. */
        loaded = xmalloc(info->size);
        if ((*first_err = obj__inline_load(s, bucket, key, info, loaded)) != 0) {
            free(loaded);
            return 0;
        }
        data = loaded;
    }
    if (info->sparse && !(info->inl & dead)) {
        heads = heads_round(s, bucket, key, pos, info, data, info->inl, cond, hedge, &failed,
                            refused, first_err);
        if (heads == __builtin_popcount(info->inl) || *first_err == ERR_TOO_LARGE || *refused)
            goto out;
        log_warn("event=sparse_heads_short key=%s heads=%d err=%s", key, heads,
                 err_name(*first_err));
    }
    if (info->sparse || (info->inl & (dead | failed))) {
        /*
         * A store of the copies is down: the version takes a head on every
         * store instead, its bytes on the first m+1 that work (a reader asks
         * stores in that order, skipping the ones that fail).
         */
        info->sparse = 0;
        info->inl = copies_avoiding(s, bucket, key, dead | failed);
    }
    *first_err = 0;
    heads = heads_round(s, bucket, key, pos, info, data, all & ~(dead | failed), cond, hedge,
                        &failed, refused, first_err);
out:
    free(loaded);
    return heads;
}

uint32_t obj__inline_stores(const obj_set_t *s, const char *bucket, const char *key)
{
    /* m+1 neighbours from the key's hash: any m may fail, and keys spread over all stores. */
    return copies_avoiding(s, bucket, key, 0);
}

/*
 * The record of one store at one position, if it is version v: its bytes
 * into buf, checked against v's crc (rot below the drive's own checks, or a
 * store that lies, is caught here). 0, ERR_NOT_FOUND (another version, or
 * none), or the store's error.
 */
static int inline_from(obj_set_t *s, int i, const drive_id_t *id, const obj_info_t *v, void *buf)
{
    const shard_store_t *st = &s->st[i];
    uint8_t meta[HEAD_MAX];
    drive_stat_t ds, again;
    obj_info_t o;
    int rc;
    if (st->ops->get) {
        rc = st->ops->get(st->ctx, id, &ds, meta, sizeof(meta), buf, v->size);
    } else if ((rc = st->ops->stat(st->ctx, id, &ds, meta, sizeof(meta))) == 0 &&
               ds.len == v->size) {
        /* Without a whole-record read: the same record before and after the bytes. */
        if (v->size) rc = st->ops->read(st->ctx, id, 0, buf, v->size);
        if (!rc) rc = st->ops->stat(st->ctx, id, &again, NULL, 0);
        if (!rc && again.seq != ds.seq) rc = ERR_NOT_FOUND;
    }
    if (rc == ERR_RANGE) return ERR_NOT_FOUND; /* a bigger record: another version */
    if (rc) return rc;
    if (ds.len != v->size || ds.meta_len > sizeof(meta) || obj_meta_decode(meta, ds.meta_len, &o) ||
        strcmp(o.upload_id, v->upload_id) != 0 || !o.inl)
        return ERR_NOT_FOUND;
    if (crc32c(0, buf, v->size) != v->inl_crc) {
        log_error("event=inline_crc_mismatch shard=%d key=%s upload=%s", i, id->key, v->upload_id);
        return ERR_CORRUPT;
    }
    return 0;
}

uint32_t obj__inline_rotten(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                            const obj_info_t *v)
{
    uint32_t rotten = 0;
    void *buf = xmalloc(v->size ? v->size : 1);
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, v->inl & ~obj__unhealthy(s), stores);
    for (int j = 0; j < n; j++) {
        drive_id_t id = {bucket, key, pos, (uint32_t)stores[j]};
        if (inline_from(s, stores[j], &id, v, buf) == ERR_CORRUPT) rotten |= 1u << stores[j];
    }
    free(buf);
    return rotten;
}

/* The copies of an inline version at its current position, read hedged (obj__inline_load). */
typedef struct {
    obj_set_t *s;
    const int *order;
    const char *bucket, *key;
    const obj_info_t *v;
    uint8_t *bufs[OBJ_MAX_SHARDS];
    int rc[OBJ_MAX_SHARDS];
} copies_t;

static int copy_fetch(void *ctx, unsigned j)
{
    copies_t *c = ctx;
    drive_id_t id = {c->bucket, c->key, "", (uint32_t)c->order[j]};
    return c->rc[j] = inline_from(c->s, c->order[j], &id, c->v, c->bufs[j]);
}

/*
 * The first copy from a store behind the network, with the next ones as
 * spares: a copy on a slow node costs the hedge delay, then another copy's
 * read. 0 when a copy came in (into buf); else the caller asks in turn.
 */
static int inline_hedged(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v,
                         void *buf, const int *order, int no)
{
    copies_t c = {.s = s, .order = order, .bucket = bucket, .key = key, .v = v};
    unsigned spare = (unsigned)(no - 1 < s->m ? no - 1 : s->m);
    c.bufs[0] = buf;
    c.rc[0] = ERR_CANCELED;
    for (unsigned j = 1; j <= spare; j++) {
        c.bufs[j] = xmalloc(v->size ? v->size : 1);
        c.rc[j] = ERR_CANCELED;
    }
    obj__hedged_run(s, 1, spare, 1, copy_fetch, &c, 0);
    if (c.rc[0] == ERR_CANCELED) obj__mark_slow(s, (unsigned)order[0]);
    int rc = c.rc[0] == 0 ? 0 : ERR_NOT_FOUND;
    for (unsigned j = 1; j <= spare; j++) {
        if (rc != 0 && c.rc[j] == 0) {
            memcpy(buf, c.bufs[j], v->size);
            rc = 0;
        }
        free(c.bufs[j]);
    }
    return rc;
}

int obj__inline_load(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *v,
                     void *buf)
{
    char pos[2][OBJ_VID_LEN + 1] = {""};
    int failed = 0;
    obj__vid_of(pos[1], v->mtime_ns);
    /* The store the key's copies start at first, then the others in turn; the current
     * position first, then the version's noncurrent one; stores that are not up last. */
    int order[OBJ_MAX_SHARDS];
    int no = obj__ask_order(s, v->inl, inline_first(s, bucket, key), order);
    if (s->hedge_ms && no > 1 && s->st[order[0]].ops->stat_async) {
        if (inline_hedged(s, bucket, key, v, buf, order, no) == 0) return 0;
        no = obj__ask_order(s, v->inl, inline_first(s, bucket, key), order); /* slow ones last */
    }
    for (int p = 0; p < 2; p++)
        for (int j = 0; j < no; j++) {
            int i = order[j];
            drive_id_t id = {bucket, key, pos[p], (uint32_t)i};
            int rc = inline_from(s, i, &id, v, buf);
            if (rc == 0) return 0;
            if (rc != ERR_NOT_FOUND) {
                failed++;
                log_warn("event=inline_read_failed shard=%d key=%s err=%s", i, key, err_name(rc));
            }
        }
    return failed ? ERR_UNRECOVERABLE : ERR_NOT_FOUND;
}

void obj__drop_blocks(obj_set_t *s, const char *bucket, const char *key, const char *upload,
                      uint64_t stripes, uint32_t dead)
{
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, bucket);
    /* Not on a store that is not up: each delete would wait out its deadline. Its blocks
     * of this version stay there until it is back: the heal thread drops them then (one
     * that failed a delete too). Before, they stayed for good: a six-node probe killing a
     * node three times left 32-68 of 181 MB in a drained pool. */
    dead |= obj__unhealthy(s);
    uint32_t kept = dead & (s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1);
    for (uint64_t st = 0; st < stripes; st++)
        for (int i = 0; i < s->n; i++) {
            if (dead & (1u << i)) continue;
            drive_id_t id = {bb, key, upload, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            int rc = s->st[i].ops->del(s->st[i].ctx, &id);
            if (rc && rc != ERR_NOT_FOUND) kept |= 1u << i;
        }
    if (kept) obj__drop_note(s, bb, key, upload, stripes, kept);
}

void obj__drop_object(obj_set_t *s, const char *bucket, const char *key)
{
    int rc = obj_delete(s, bucket, key);
    if (rc && rc != ERR_NOT_FOUND) log_warn("event=drop_failed key=%s err=%s", key, err_name(rc));
}

static pin_t **pin_find(obj_set_t *s, const char *upload_id)
{
    pin_t **pp = &s->pins;
    while (*pp && strcmp((*pp)->upload_id, upload_id) != 0)
        pp = &(*pp)->next;
    return pp;
}

uint64_t obj__pin(obj_set_t *s, const char *upload_id)
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

/* Best effort: what fails to go is unreferenced space, not visible data. */
static void drop_version_now(obj_set_t *s, const char *bucket, const char *key,
                             const obj_info_t *old)
{
    if (old->inl) return; /* its bytes went with its heads */
    if (!old->multipart) {
        obj__drop_blocks(s, bucket, key, old->upload_id, ers_stripe_count(&old->layout), 0);
        return;
    }
    int *parts = NULL;
    uint64_t *sizes = NULL;
    if (obj__read_manifest(s, old->upload_id, old->nparts, &parts, &sizes) == 0) {
        for (int i = 0; i < old->nparts; i++) {
            char pk[64];
            obj__part_key(pk, sizeof(pk), old->upload_id, parts[i]);
            obj__drop_object(s, MPU_PARTS, pk);
        }
    }
    obj__drop_object(s, MPU_MANIFEST, old->upload_id);
    free(parts);
    free(sizes);
}

void obj__unpin(obj_set_t *s, const char *upload_id)
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

void obj__drop_version(obj_set_t *s, const char *bucket, const char *key, const obj_info_t *old)
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

int obj_delete(obj_set_t *s, const char *bucket, const char *key)
{
    return obj_delete_if(s, bucket, key, NULL);
}

void (*obj__delete_read_hook)(void *arg, const char *key);
void *obj__delete_read_hook_arg;

int obj__del_head(obj_set_t *s, int i, const drive_id_t *id, const shard_cond_t *cond)
{
    const shard_store_t *st = &s->st[i];
    /* A store that cannot judge the condition fails the delete: never an unconditional one. */
    return st->ops->del_head ? st->ops->del_head(st->ctx, id, cond) : ERR_INVAL;
}

int obj__undo_del(obj_set_t *s, int i, const drive_id_t *id, const obj_info_t *v)
{
    /*
     * Only that very head (its upload id and stamp): read as the undoer's just before, it
     * may be covered since by a writer that took it for standing (failing stores count for
     * a version), and that writer's head must stay.
     */
    shard_cond_t that = {.mode = SHARD_IF_UPLOAD, .stamp = v->stamp_ns};
    memcpy(that.upload, v->upload_id, sizeof(that.upload));
    int rc = obj__del_head(s, i, id, &that);
    /* A node of an older build reads no condition in a delete and answers ERR_CORRUPT: the
     * plain delete it knows, right after the read, as before conditional deletes. */
    if (rc == ERR_CORRUPT || rc == ERR_INVAL) rc = s->st[i].ops->del(s->st[i].ctx, id);
    return rc;
}

/* One store's conditional delete of a key's current head, as a pool job. */
typedef struct {
    pool_job_t base;
    obj_set_t *s;
    drive_id_t id;
    const shard_cond_t *cond;
    int rc;
} del_job_t;

static void run_del(pool_job_t *j)
{
    del_job_t *d = (del_job_t *)j;
    d->rc = obj__del_head(d->s, (int)d->id.shard, &d->id, d->cond);
    if (d->rc == ERR_NOT_FOUND) d->rc = 0; /* nothing there (a sparse object's other stores) */
}

/*
 * An unversioned delete removes the key's head records from every store, in
 * one parallel round: nothing stays behind in the index for listings to
 * walk past (a delete-heavy bucket does not grow its index). A store that
 * fails keeps the old head; then the stores that did delete get a
 * tombstone head, newer than it, and at least k of them must take it (as
 * any head) for the delete to stand.
 *
 * Every removal and every tombstone is conditioned on the version the
 * delete read (SHARD_IF_AT_MOST: that version, anything older, nothing, or
 * any head of that version: a rewrite of its metadata, the tombstone): a
 * store that took a commit through another node after the read keeps it. A refusal means another
 * writer came after the read; the delete linearizes before it, and waits for it to settle
 * (obj__delete_settle): once a version newer than the one read stands, the
 * delete is done (204: that version replaced the one it deleted). A writer
 * that is undone instead puts back, where it landed, the version it covered,
 * which may be the one deleted here: the round goes again and removes it.
 * So a version this delete answered 204 for never comes back from a
 * refusing store. A head in the way for longer than any commit takes is a
 * crash's leftover, never acknowledged: removed with the rest. Writers still
 * in flight after the commit's tries: 503 SlowDown, the version read kept
 * (its blocks stay: the outcome is open).
 */
static int delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c);

int obj_delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c)
{
    obj_set_t *top = s;
    s = obj__route(s, bucket, key);
    int rc = delete_if(s, bucket, key, c);
    if (rc == ERR_NOT_FOUND && obj_set_pools(top) > 1) {
        /* Routed before its key moved off a draining pool, found here after (obj_move.c):
         * where the key is now. */
        obj_set_t *now = obj__route(top, bucket, key);
        if (now != s) rc = delete_if(s = now, bucket, key, c);
    }
    if (rc || obj_set_pools(top) < 2) return rc;
    /*
     * A key that two pools hold (writes racing over a weight change): the
     * older pool's copy would be current again once the newest is gone.
     * Deleted too.
     */
    obj_info_t *h = xmalloc(sizeof(*h));
    for (int p = 0; p < obj_set_pools(top) && !rc; p++) {
        obj_set_t *other = top->sub[obj__in_pool(top, p, bucket, key)];
        if (other != s && obj__newest_head(other, bucket, key, h) == 0 && !h->deleted) {
            rc = delete_if(other, bucket, key, NULL);
            if (rc == ERR_NOT_FOUND) rc = 0;
        }
    }
    free(h);
    return rc;
}

/* Best effort: marker's tombstone heads, wherever they still are. */
static void tombstones_go(obj_set_t *s, const char *bucket, const char *key,
                          const obj_info_t *marker)
{
    shard_cond_t mine = {.mode = SHARD_IF_UPLOAD, .stamp = marker->stamp_ns};
    memcpy(mine.upload, marker->upload_id, sizeof(mine.upload));
    del_job_t jobs[OBJ_MAX_SHARDS];
    pool_job_t *q[OBJ_MAX_SHARDS];
    uint32_t away = obj__unhealthy(s);
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if ((away >> i) & 1) continue;
        jobs[n] = (del_job_t){
            .base = {.run = run_del}, .s = s, .id = {bucket, key, "", (uint32_t)i}, .cond = &mine};
        q[n] = &jobs[n].base;
        n++;
    }
    obj__run_all(s, q, n);
    for (int i = 0; i < n; i++)
        if (jobs[i].rc && jobs[i].rc != ERR_PRECOND)
            log_warn("event=delete_tombstone_left shard=%u key=%s err=%s", jobs[i].id.shard, key,
                     err_name(jobs[i].rc));
}

static int delete_if(obj_set_t *s, const char *bucket, const char *key, const obj_cond_t *c)
{
    obj_info_t old, marker;
    del_job_t jobs[OBJ_MAX_SHARDS];
    pool_job_t *q[OBJ_MAX_SHARDS];
    uint32_t failed = 0, uncond = 0, targets = 0;
    int written = 0, first_err = 0, tombed = 0;
    int rc;
    obj_info_clear(&marker);
    marker.deleted = 1;
    pthread_mutex_t *lk = obj__key_lock(s, bucket, key);
    pthread_mutex_lock(lk);
    if ((rc = obj_stat(s, bucket, key, &old)) != 0 || (rc = obj_cond_check(c, &old)) != 0) {
        pthread_mutex_unlock(lk);
        return rc;
    }
    if (obj__delete_read_hook) obj__delete_read_hook(obj__delete_read_hook_arg, key);
    /*
     * The version read, anything older, nothing, or any head of that version (`self`): a
     * metadata rewrite of it (tags, ACL through another node) is newer by its stamp but is
     * still the version deleted here, and goes (before: the DELETE took it for a newer
     * version and stood back, the object kept with its tags after a 204). The tombstone is
     * that version's retirement, with its upload id: `self` too, and no head of the version
     * (a rewrite, an undo putting it back) is put over it at a store (shard.c cond_holds).
     */
    shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = old.stamp_ns};
    memcpy(bound.upload, old.upload_id, sizeof(bound.upload));
    memcpy(bound.self, old.upload_id, sizeof(bound.self));
    memcpy(marker.upload_id, old.upload_id, sizeof(marker.upload_id));
    /* One stamp for every round: a tombstone written again is the same one. */
    marker.mtime_ns = marker.stamp_ns = obj__now_after(&old);
    /* A sparse version has heads on its copies alone (and no other store a live one). */
    for (int i = 0; i < s->n; i++)
        if (!old.sparse || ((old.inl >> i) & 1)) targets |= 1u << i;
    for (int attempt = 0;; attempt++) {
        /* A store not up is not asked (it would hold the delete for its deadline): it keeps
         * the old head, as one that fails, and the tombstone covers it. */
        uint32_t away = obj__unhealthy(s);
        int n = 0, refused = 0;
        failed = uncond = 0;
        for (int i = 0; i < s->n; i++) {
            if (!((targets >> i) & 1)) continue;
            if ((away >> i) & 1) {
                failed |= 1u << i;
                continue;
            }
            jobs[n] = (del_job_t){.base = {.run = run_del},
                                  .s = s,
                                  .id = {bucket, key, "", (uint32_t)i},
                                  .cond = &bound};
            q[n] = &jobs[n].base;
            n++;
        }
        obj__run_all(s, q, n);
        for (int i = 0; i < n; i++) {
            if (jobs[i].rc == ERR_PRECOND) {
                refused++; /* holds a newer head: another writer's, after the read */
                targets |= 1u << jobs[i].id.shard;
            } else if (jobs[i].rc == ERR_CORRUPT || jobs[i].rc == ERR_INVAL) {
                /* Cannot judge the condition (a node of an older build: a DEL with bytes after
                 * the id is corrupt to it). It keeps the old head and takes the tombstone, a
                 * conditional put it knows, as the stores did before deletes left nothing. */
                uncond |= 1u << jobs[i].id.shard;
            } else if (jobs[i].rc) {
                failed |= 1u << jobs[i].id.shard;
                log_warn("event=delete_head_failed shard=%u key=%s err=%s", jobs[i].id.shard, key,
                         err_name(jobs[i].rc));
            }
        }
        written = 0;
        if (failed | uncond) {
            /* Under the same condition: never over a newer head (a racing commit's). */
            int tref = 0;
            written = obj__write_at_cond(s, bucket, key, "", &marker, NULL, failed, &bound, &tref,
                                         &first_err);
            refused += tref;
            tombed |= written > 0;
        }
        if (!refused) break;
        int settled = obj__delete_settle(s, bucket, key, &bound, attempt);
        if (settled < 0) {
            pthread_mutex_unlock(lk);
            log_warn("event=delete_in_doubt key=%s: writers through other nodes stay in flight",
                     key);
            return settled;
        }
        if (settled) {
            /* A newer version stands: this delete came before it, which replaced (and drops)
             * the version deleted here. A tombstone of this delete's, newer by its stamp than
             * that version where it landed first, would hide it from readers there: it goes
             * (that very one only). */
            if (tombed) tombstones_go(s, bucket, key, &marker);
            failed = uncond = 0;
            break;
        }
        /* The tombstone went to every store that did not fail: the next round removes it
         * there too (it is this delete's own: `self`), or writes it again where stores
         * still fail. */
        if (failed | uncond) targets |= s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    }
    pthread_mutex_unlock(lk);
    if ((failed | uncond) && !obj__enough(s, &marker, written)) return ERR_UNRECOVERABLE;
    obj__drop_version(s, bucket, key, &old);
    return 0;
}
