/*
 * obj_head.c: reading heads (room of the object layer; map in obj_int.h):
 * upload ids and the key and upload locks, heads read from several stores
 * at once (hedged), the newest head and the head that stands, a key's
 * current version routed to its pool (obj_stat), and an inline object's
 * bytes from its copies. Writing heads: obj_head_write.c; dropping
 * replaced versions and pins: obj_pin.c; unversioned deletes:
 * obj_delete.c; in-place metadata rewrites: obj_rewrite.c.
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

int obj__new_upload_id(char out[33])
{
    /* Sixteen ids per getrandom: a syscall per PUT was one of a 4 KiB PUT's few dozen. */
    static __thread uint8_t pool[256];
    static __thread size_t used = sizeof(pool);
    static const char hex[] = "0123456789abcdef";
    if (used == sizeof(pool)) {
        if (getrandom(pool, sizeof(pool), 0) != (ssize_t)sizeof(pool)) return ERR_IO;
        used = 0;
    }
    const uint8_t *r = pool + used;
    used += 16;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[32] = 0;
    return 0;
}

void obj__blk_bucket(char *out, const char *bucket)
{
    size_t n = strnlen(bucket, SHARD_MAX_BUCKET - 1);
    memcpy(out, bucket, n);
    memcpy(out + n, BLK_SUFFIX, 2);
}

void obj__part_key(char *out, size_t cap, const char *upload, int part, const char *tag)
{
    snprintf(out, cap, "%s/%05d%s%s", upload, part, tag && tag[0] ? "." : "", tag ? tag : "");
}

int obj__part_of_key(const char *key, char tag[OBJ__PART_TAG_LEN + 1])
{
    const char *slash = strrchr(key, '/');
    tag[0] = 0;
    if (!slash || strspn(slash + 1, "0123456789") != 5) return 0;
    const char *p = slash + 1;
    int part = (p[0] - '0') * 10000 + (p[1] - '0') * 1000 + (p[2] - '0') * 100 + (p[3] - '0') * 10 +
               (p[4] - '0');
    p += 5;
    if (*p == '.') {
        p++;
        if (strlen(p) != OBJ__PART_TAG_LEN || strspn(p, "0123456789abcdef") != OBJ__PART_TAG_LEN)
            return 0;
        memcpy(tag, p, OBJ__PART_TAG_LEN + 1);
    } else if (*p) {
        return 0;
    }
    return part >= 1 && part <= OBJ_MPU_MAX_PARTS ? part : 0;
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
 * Whether a lookup that heard no copy of the key's small version (a sparse one's heads are on
 * its m+1 copies alone) must ask them before its verdict: when the other stores said nothing
 * (absent) or a tombstone. Neither settles anything about a sparse version: a small PUT over
 * an unversioned DELETE's tombstones writes its heads on the copies only, and the other stores
 * keep the older tombstone (for a minute, or for good) while the PUT is current. A live head
 * there is a version no sparse one replaced (a commit over it is whole-heads).
 */
static int copies_needed(int found, int heard, const obj_info_t *best)
{
    return !heard && (!found || (best->deleted && !best->marker));
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
     * stores settles nothing about it, nor does a tombstone there (copies_needed). Those
     * come first only when every copy is slow or not up (asked last); then the copies are
     * asked too, all at once, before "not found" (or a tombstone's verdict): a
     * gateway whose loop had stalled (every remote store slow for a moment) answered
     * NoSuchKey for a small object every listing showed.
     */
    uint32_t copies = obj__inline_stores(s, bucket, key);
    int heard = 0; /* a copy answered: found, or absent */
    for (int next = 0;
         next < no && (found + absent <= s->m || copies_needed(found, heard, best));) {
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
            if (!found || obj__newer(&r->info, best)) obj_info_copy(best, &r->info);
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
    /* Only tombstones, from stores that cannot hold the small version, and no copy to ask:
     * open too ("not found" would hide a PUT that replaced the deleted version). */
    if (found && copies_needed(found, heard, best)) return ERR_UNRECOVERABLE;
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
