/*
 * obj_reap: the reaper (room of the object layer; map in obj_int.h). Blocks
 * that no version names, deleted once they have stayed so for a grace time.
 *
 * Blocks are written before the heads that name them (the commit point), so
 * a write cut short (a gateway killed mid-PUT or mid-commit), a drop that a
 * store missed (away when its version went: the heal queue's notes of those
 * live in memory and go with a restart) or an abort that failed on a store
 * leave block records that no head will ever name. Nothing reads them, and
 * they hold their space for good.
 *
 * A pass walks each store's block records of a bucket (its "<bucket>\x01"
 * namespace), grouped by key and upload id, a page of groups at a time (no
 * other I/O inside a store's walk). A group is named when a head of its key
 * on any store, at any position (current or noncurrent), carries its upload
 * id and is not a tombstone. The common case costs one lookup: the store's
 * own current head. Otherwise every store's heads of the key are read.
 *
 * A group that nothing names is a candidate: remembered with its record
 * count, its bytes and when it was first seen so. Seen again, still named by
 * nothing, with the same records, at least `grace` seconds later, its
 * records are deleted from that store. The grace is what keeps writes in
 * flight safe: a PUT streams its blocks before any head exists, for as long
 * as its client sends (a group that grew between two passes starts its
 * grace again), and the commit after its last block takes seconds; the
 * mover's copies likewise. Any doubt keeps a group: a store that does not
 * answer, a head that does not decode. Candidates live in memory: a restart
 * starts their grace again, never shortens it. Only sets whose stores are
 * all up are reaped (a head on a store that is away could name a group).
 *
 * Parts that no upload will take are reaped the same way, whole objects of
 * MPU_PARTS (reap_parts): an UploadPart whose commit passed its check that
 * the upload is open on its node before a Complete or an Abort through
 * another node closed it, and landed after (the upload's lock orders one
 * node's calls only), is acknowledged and then named by nothing; so are the
 * parts of an upload closed by a Complete or an Abort cut short by a crash.
 * A part of an upload that is open is kept; of one that is closed, only the
 * parts its manifest names are kept (none when it has no manifest: aborted).
 * Any doubt (a record or manifest that cannot be read) keeps them all. An
 * upload a Complete closed and a kill cut short (its closing record) keeps
 * them all too, until nobody has resumed it for the grace: then it is
 * settled (obj__mpu_settle: tidied if its object stands, else opened again).
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAP_PAGE   256  /* groups of one store's walk checked at a time */
#define REAP_HASH   4096 /* candidate hash chains */
#define REAP_ID_LEN 32   /* upload ids: 32 hex digits */

typedef struct cand {
    char *id; /* "<set>/<store>/<bucket>/<key>/<upload>" */
    uint64_t first_s, seen_s, records, bytes;
    struct cand *next;
} cand_t;

struct obj_reaper {
    uint64_t grace_s;
    pthread_mutex_t mu;
    cand_t *h[REAP_HASH];
    uint64_t candidates;
};

obj_reaper_t *obj_reaper_new(uint64_t grace_s)
{
    obj_reaper_t *r = xcalloc(1, sizeof(*r));
    r->grace_s = grace_s;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void obj_reaper_free(obj_reaper_t *r)
{
    if (!r) return;
    for (int i = 0; i < REAP_HASH; i++)
        while (r->h[i]) {
            cand_t *c = r->h[i];
            r->h[i] = c->next;
            free(c->id);
            free(c);
        }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

uint64_t obj_reaper_candidates(obj_reaper_t *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t n = r->candidates;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static uint32_t hash_of(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h % REAP_HASH;
}

/* One store's block records of one key and upload id. */
typedef struct {
    char *key;
    char upload[REAP_ID_LEN + 1];
    uint32_t *shards;
    int n, cap;
    uint64_t bytes;
} group_t;

typedef struct {
    group_t g[REAP_PAGE];
    int n;
} page_t;

static void page_clear(page_t *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->g[i].key);
        free(p->g[i].shards);
    }
    p->n = 0;
}

static int collect_block(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    page_t *p = arg;
    (void)meta;
    group_t *g = p->n ? &p->g[p->n - 1] : NULL;
    if (!g || strcmp(g->key, id->key) != 0 || strcmp(g->upload, id->version) != 0) {
        if (p->n == REAP_PAGE) return 1; /* full: the walk resumes past the last group */
        g = &p->g[p->n++];
        memset(g, 0, sizeof(*g));
        g->key = xstrdup(id->key);
        snprintf(g->upload, sizeof(g->upload), "%s", id->version);
    }
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 4;
        g->shards = xrealloc(g->shards, (size_t)g->cap * sizeof(*g->shards));
    }
    g->shards[g->n++] = id->shard;
    g->bytes += st->len;
    return 0;
}

typedef struct {
    const char *key, *upload;
    int named, doubt;
} look_t;

#define LOOK_PAST  1
#define LOOK_NAMED 2

static int look_head(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    look_t *l = arg;
    if (strcmp(id->key, l->key) != 0) return LOOK_PAST; /* a longer key: this one's are done */
    obj_info_t *o = xmalloc(sizeof(*o));
    int rc = obj_meta_decode(meta, st->meta_len, o), hit = 0;
    if (rc)
        l->doubt = 1; /* a head that does not decode could name it */
    else
        hit = !(o->deleted && !o->marker) && strcmp(o->upload_id, l->upload) == 0;
    free(o);
    if (rc || hit) {
        l->named |= hit;
        return LOOK_NAMED;
    }
    return 0;
}

/* Whether store i's own current head of key names upload (the common case: one lookup). */
static int own_head_names(obj_set_t *s, int i, const char *bucket, const char *key,
                          const char *upload)
{
    uint8_t *meta = xmalloc(HEAD_MAX);
    obj_info_t *o = xmalloc(sizeof(*o));
    drive_stat_t st;
    drive_id_t id = {bucket, key, "", (uint32_t)i};
    int named = s->st[i].ops->stat(s->st[i].ctx, &id, &st, meta, HEAD_MAX) == 0 &&
                st.meta_len <= HEAD_MAX && obj_meta_decode(meta, st.meta_len, o) == 0 &&
                !(o->deleted && !o->marker) && strcmp(o->upload_id, upload) == 0;
    free(o);
    free(meta);
    return named;
}

/* 1 when a head names upload on some store, 0 when none does, -1 when that cannot be told. */
static int names(obj_set_t *s, int i, const char *bucket, const char *key, const char *upload)
{
    if (own_head_names(s, i, bucket, key, upload)) return 1;
    for (int j = 0; j < s->n; j++) {
        look_t l = {.key = key, .upload = upload};
        drive_from_t from = {.how = DRIVE_FROM_START};
        int rc = s->st[j].ops->scan(s->st[j].ctx, bucket, key, &from, look_head, &l);
        if (l.named) return 1;
        if (l.doubt || rc < 0) return -1; /* cannot tell */
    }
    return 0;
}

/* 1 when a head names upload on some store (or that cannot be ruled out), else 0. */
static int named(obj_set_t *s, int i, const char *bucket, const char *key, const char *upload)
{
    return names(s, i, bucket, key, upload) != 0;
}

int obj__upload_named(obj_set_t *s, const char *bucket, const char *key, const char *upload)
{
    return names(s, 0, bucket, key, upload);
}

/*
 * A candidate cid (taken) seen now with records and bytes: 1 when it has been
 * seen so, unchanged, for the grace (it is forgotten then: the caller deletes
 * what it stands for), else 0 (remembered).
 */
static int candidate_due(obj_reaper_t *r, char *cid, uint64_t now_s, uint64_t records,
                         uint64_t bytes)
{
    uint32_t hv = hash_of(cid);
    pthread_mutex_lock(&r->mu);
    cand_t **pp = &r->h[hv], *c;
    while ((c = *pp) && strcmp(c->id, cid) != 0)
        pp = &c->next;
    if (!c) {
        c = xcalloc(1, sizeof(*c));
        c->id = cid;
        c->first_s = now_s;
        c->records = records;
        c->bytes = bytes;
        c->next = r->h[hv];
        r->h[hv] = c;
        r->candidates++;
        c->seen_s = now_s;
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    free(cid);
    c->seen_s = now_s;
    if (c->records != records || c->bytes != bytes) {
        /* Grown (a write still streaming) or shrunk: its grace starts again. */
        c->first_s = now_s;
        c->records = records;
        c->bytes = bytes;
    }
    int due = r->grace_s && now_s >= c->first_s + r->grace_s;
    if (due) {
        *pp = c->next;
        r->candidates--;
        free(c->id);
        free(c);
    }
    pthread_mutex_unlock(&r->mu);
    return due;
}

static void reap_group(obj_set_t *s, obj_reaper_t *r, int i, const char *bb, const char *bucket,
                       group_t *g, uint64_t now_s, obj_reap_report_t *rep)
{
    if (strlen(g->upload) != REAP_ID_LEN || named(s, i, bucket, g->key, g->upload)) return;
    size_t idl = strlen(bb) + strlen(g->key) + REAP_ID_LEN + 48;
    char *cid = xmalloc(idl);
    snprintf(cid, idl, "%p/%d/%s/%s/%s", (void *)s, i, bb, g->key, g->upload);
    rep->groups_seen++;
    if (!candidate_due(r, cid, now_s, (uint64_t)g->n, g->bytes)) return;
    int failed = 0;
    for (int k = 0; k < g->n; k++) {
        drive_id_t id = {bb, g->key, g->upload, g->shards[k]};
        int rc = s->st[i].ops->del(s->st[i].ctx, &id);
        if (rc && rc != ERR_NOT_FOUND) failed++;
    }
    log_info("event=reaped bucket=%s key=%s upload=%s store=%d records=%d bytes=%llu failed=%d",
             bucket, g->key, g->upload, i, g->n, (unsigned long long)g->bytes, failed);
    rep->groups_reaped++;
    rep->records_reaped += (uint64_t)(g->n - failed);
    rep->bytes_reaped += g->bytes;
    rep->failed += failed != 0;
}

/* Every store of one (leaf) set. */
static int reap_set(obj_set_t *s, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                    obj_reap_report_t *rep)
{
    if (obj__unhealthy(s)) return 0; /* a head on a store that is away could name a group */
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, bucket);
    page_t *p = xcalloc(1, sizeof(*p));
    for (int i = 0; i < s->n; i++) {
        drive_from_t from = {.how = DRIVE_FROM_START};
        char *after_key = NULL, after_up[REAP_ID_LEN + 1] = "";
        for (;;) {
            int wr = s->st[i].ops->scan(s->st[i].ctx, bb, "", &from, collect_block, p);
            if (wr < 0) {
                log_warn("event=reap_walk_failed bucket=%s store=%d err=%s", bucket, i,
                         err_name(wr));
                rep->failed++;
                page_clear(p);
                break;
            }
            for (int k = 0; k < p->n; k++)
                reap_group(s, r, i, bb, bucket, &p->g[k], now_s, rep);
            if (wr == 0 || !p->n) {
                page_clear(p);
                break;
            }
            /* Past the page's last group: every record of it was in the page. */
            free(after_key);
            after_key = xstrdup(p->g[p->n - 1].key);
            snprintf(after_up, sizeof(after_up), "%s", p->g[p->n - 1].upload);
            from = (drive_from_t){.how = DRIVE_PAST_VERSION, .key = after_key, .version = after_up};
            page_clear(p);
        }
        free(after_key);
    }
    free(p);
    return 0;
}

/* fn over each leaf set of s (its sub-sets, or s itself), the removed ones passed by. */
typedef void (*leaf_fn)(obj_set_t *leaf, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                        obj_reap_report_t *rep);

static void each_leaf(obj_set_t *s, leaf_fn fn, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                      obj_reap_report_t *rep)
{
    int ns = atomic_load(&s->nsub);
    if (!ns) {
        fn(s, r, bucket, now_s, rep);
        return;
    }
    for (int j = 0; j < ns; j++)
        if (!obj__sub_removed(s, j)) each_leaf(s->sub[j], fn, r, bucket, now_s, rep);
}

static void reap_leaf(obj_set_t *s, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                      obj_reap_report_t *rep)
{
    (void)reap_set(s, r, bucket, now_s, rep);
}

int obj_reap_bucket(obj_set_t *s, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                    obj_reap_report_t *rep)
{
    if (!atomic_load(&s->nsub)) return reap_set(s, r, bucket, now_s, rep);
    each_leaf(s, reap_leaf, r, bucket, now_s, rep);
    return 0;
}

#define PARTS_PAGE 512 /* part keys of one listing checked at a time */

typedef struct {
    char *key[PARTS_PAGE];
    uint64_t size[PARTS_PAGE];
    int n;
} part_page_t;

static int collect_part(void *arg, const char *key, const obj_info_t *info)
{
    part_page_t *p = arg;
    if (!info) return 0;
    p->key[p->n] = xstrdup(key);
    p->size[p->n] = info->size;
    return ++p->n == PARTS_PAGE;
}

/* What a closed upload keeps of its parts (those its manifest names). */
typedef struct {
    char upload[REAP_ID_LEN + 1];
    int verdict; /* KEEP_* */
    int n, *nums;
    char (*tags)[OBJ__PART_TAG_LEN + 1];
} keeps_t;

#define KEEP_ALL   0 /* open, or it cannot be told */
#define KEEP_NAMED 1 /* closed, completed: what the manifest names */
#define KEEP_NONE  2 /* closed, no manifest: aborted */
#define KEEP_GONE  3 /* closed, a manifest whose object no head names any more: its drop lost */

/*
 * A completed upload whose object went (replaced, deleted) without its parts and manifest: a
 * DELETE short of its quorum (a node down) keeps the version's drop "in doubt", and the heal
 * or a later write that rolls it forward drops nothing (a 3-node probe: 5-7 objects, 50-70 MB
 * a run, for good); a deferred drop a kill lost. 1 when the manifest names its object and no
 * head of that key, at any position, names the upload; else 0 (kept: any doubt).
 */
/* 1 when no head of key names upload in s, nor in any pool's set of key (a move copies the
 * manifest and the parts to the target pool before the object's heads: a move cut short
 * leaves them there, named by the source pool's heads); 0 when one does or it cannot be told. */
static int object_unnamed(obj_set_t *s, const char *bucket, const char *key, const char *upload)
{
    if (obj__upload_named(s, bucket, key, upload) != 0) return 0;
    obj_set_t *top = s->parent;
    int np = top ? atomic_load(&top->npool) : 0;
    for (int p = 0; p < np; p++) {
        if (atomic_load(&top->pools[p].draining) == OBJ_POOL_REMOVED) continue;
        obj_set_t *set = top->sub[obj__in_pool(top, p, bucket, key)];
        if (set != s && obj__upload_named(set, bucket, key, upload) != 0) return 0;
    }
    return 1;
}

static int object_gone(obj_set_t *s, const char *upload)
{
    obj_info_t *mi = xmalloc(sizeof(*mi));
    int gone = 0;
    if (obj_stat(s, MPU_MANIFEST, upload, mi) == 0 && !mi->deleted) {
        const char *p = mi->umeta, *end = mi->umeta + mi->umeta_len;
        while (p < end) {
            const char *name = p, *val = name + strnlen(name, (size_t)(end - name)) + 1;
            if (val >= end) break;
            size_t vl = strnlen(val, (size_t)(end - val));
            if (strcmp(name, OBJ__MANIFEST_OWNER) == 0) {
                const char *nl = memchr(val, '\n', vl);
                if (nl && nl - val <= SHARD_MAX_BUCKET) {
                    char bucket[SHARD_MAX_BUCKET + 1];
                    memcpy(bucket, val, (size_t)(nl - val));
                    bucket[nl - val] = 0;
                    gone = object_unnamed(s, bucket, nl + 1, upload);
                }
                break;
            }
            p = val + vl + 1;
        }
    }
    free(mi);
    return gone;
}

static void keeps_of(obj_set_t *s, const char *upload_id, keeps_t *k)
{
    char upload[REAP_ID_LEN + 1];
    snprintf(upload, sizeof(upload), "%s", upload_id); /* (it may be k's own) */
    free(k->nums);
    free(k->tags);
    memset(k, 0, sizeof(*k));
    memcpy(k->upload, upload, sizeof(upload));
    obj_info_t *rec = xmalloc(sizeof(*rec));
    int rc = obj_stat(s, MPU_UPLOADS, upload, rec);
    int open = rc == 0 && !rec->deleted;
    free(rec);
    /* (A closing record, a Complete cut short, is kept whole until settled: reap_uploads.) */
    if (open || (rc && rc != ERR_NOT_FOUND)) return; /* KEEP_ALL */
    uint64_t *sizes = NULL;
    rc = obj__read_manifest_all(s, upload, -1, &k->n, &k->nums, &sizes, &k->tags, NULL, NULL);
    free(sizes);
    if (rc == 0)
        k->verdict = object_gone(s, upload) ? KEEP_GONE : KEEP_NAMED;
    else if (rc == ERR_NOT_FOUND)
        k->verdict = KEEP_NONE;
}

static int kept(const keeps_t *k, int part, const char *tag)
{
    if (k->verdict == KEEP_ALL) return 1;
    for (int i = 0; k->verdict == KEEP_NAMED && i < k->n; i++)
        if (k->nums[i] == part && strcmp(k->tags[i], tag) == 0) return 1;
    return 0;
}

/* One (leaf) set's parts that no upload will take (see the top). */
static void reap_parts(obj_set_t *s, obj_reaper_t *r, uint64_t now_s, obj_reap_report_t *rep)
{
    if (obj__unhealthy(s)) return;
    part_page_t *p = xcalloc(1, sizeof(*p));
    keeps_t k = {0};
    char *after = NULL;
    for (;;) {
        /* Every store's (wide): a part whose heads a replaced drive lost is still found. */
        int rc = obj__list(s, MPU_PARTS, NULL, NULL, after, PARTS_PAGE, 1, collect_part, p);
        if (rc < 0) {
            rep->failed++;
            for (int i = 0; i < p->n; i++)
                free(p->key[i]);
            break;
        }
        for (int i = 0; i < p->n; i++) {
            const char *key = p->key[i], *slash = strchr(key, '/');
            char tag[OBJ__PART_TAG_LEN + 1];
            int part = obj__part_of_key(key, tag);
            if (!part || slash - key != REAP_ID_LEN) continue; /* not a part's key */
            if (strncmp(k.upload, key, REAP_ID_LEN) != 0) {
                char up[REAP_ID_LEN + 1];
                memcpy(up, key, REAP_ID_LEN);
                up[REAP_ID_LEN] = 0;
                keeps_of(s, up, &k);
            }
            if (kept(&k, part, tag)) continue;
            size_t idl = strlen(key) + 48;
            char *cid = xmalloc(idl);
            snprintf(cid, idl, "%p/parts/%s", (void *)s, key);
            rep->parts_seen++;
            if (!candidate_due(r, cid, now_s, 1, p->size[i])) continue;
            /* Due: asked again, now (the verdict was kept over a page of keys). */
            keeps_of(s, k.upload, &k);
            if (kept(&k, part, tag)) continue;
            obj__drop_object(s, MPU_PARTS, key); /* what a store misses, the heal queue retries */
            log_info("event=reaped_part key=%s bytes=%llu why=%s", key,
                     (unsigned long long)p->size[i],
                     k.verdict == KEEP_NAMED  ? "not_in_its_manifest"
                     : k.verdict == KEEP_GONE ? "object_gone"
                                              : "upload_closed_unnamed");
            /* Its manifest too (the upload's other parts: no manifest then, KEEP_NONE). */
            if (k.verdict == KEEP_GONE) obj__drop_object(s, MPU_MANIFEST, k.upload);
            rep->parts_reaped++;
            rep->bytes_reaped += p->size[i];
        }
        int full = p->n == PARTS_PAGE;
        free(after);
        after = p->n ? xstrdup(p->key[p->n - 1]) : NULL;
        for (int i = 0; i < p->n; i++)
            free(p->key[i]);
        p->n = 0;
        if (!full) break;
    }
    free(after);
    free(k.nums);
    free(k.tags);
    free(p);
}

typedef struct {
    int n;
    char key[PARTS_PAGE][REAP_ID_LEN + 1];
    uint64_t stamp[PARTS_PAGE];
} upload_page_t;

static int collect_upload(void *arg, const char *key, const obj_info_t *info)
{
    upload_page_t *p = arg;
    /* Closing and aborting records are padded past every open one (obj_mpu.c). */
    if (!info || strlen(key) != REAP_ID_LEN || info->size < 2 + SHARD_MAX_KEY) return 0;
    memcpy(p->key[p->n], key, REAP_ID_LEN + 1);
    p->stamp[p->n] = info->stamp_ns;
    return ++p->n == PARTS_PAGE;
}

/*
 * One (leaf) set's Completes cut short (closing records) and Aborts of them (aborting
 * records) that have stood, unchanged, for the grace: settled (obj__mpu_settle). A walk
 * of the upload records of its own, since such an upload may have no part left (an
 * object completed, then overwritten: the parts went with it).
 */
static void reap_uploads(obj_set_t *s, obj_reaper_t *r, uint64_t now_s, obj_reap_report_t *rep)
{
    if (obj__unhealthy(s)) return;
    upload_page_t *p = xcalloc(1, sizeof(*p));
    char after[REAP_ID_LEN + 1] = "";
    for (;;) {
        p->n = 0;
        int rc = obj__list(s, MPU_UPLOADS, NULL, NULL, after[0] ? after : NULL, PARTS_PAGE, 1,
                           collect_upload, p);
        if (rc < 0) {
            rep->failed++;
            break;
        }
        for (int i = 0; i < p->n; i++) {
            uint64_t stamp;
            if (obj__upload_closing(s, p->key[i], &stamp) != 1 || stamp != p->stamp[i]) continue;
            size_t idl = REAP_ID_LEN + 64;
            char *cid = xmalloc(idl);
            snprintf(cid, idl, "%p/closing/%s/%llu", (void *)s, p->key[i],
                     (unsigned long long)stamp);
            if (candidate_due(r, cid, now_s, 1, 0) && obj__mpu_settle(s, p->key[i], stamp))
                rep->uploads_settled++;
        }
        if (p->n < PARTS_PAGE) break;
        memcpy(after, p->key[p->n - 1], REAP_ID_LEN + 1);
    }
    free(p);
}

static void reap_multipart(obj_set_t *s, obj_reaper_t *r, const char *bucket, uint64_t now_s,
                           obj_reap_report_t *rep)
{
    (void)bucket;
    reap_uploads(s, r, now_s, rep);
    reap_parts(s, r, now_s, rep);
}

const char *obj_internal_bucket(int i)
{
    static const char *const names[] = {MPU_UPLOADS, MPU_PARTS, MPU_MANIFEST};
    return i >= 0 && i < (int)(sizeof(names) / sizeof(names[0])) ? names[i] : NULL;
}

void obj_reap_internal(obj_set_t *s, obj_reaper_t *r, uint64_t now_s, obj_reap_report_t *rep)
{
    each_leaf(s, reap_multipart, r, NULL, now_s, rep);
    static const char *const internal[] = {MPU_UPLOADS, MPU_PARTS, MPU_MANIFEST};
    for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
        (void)obj_reap_bucket(s, r, internal[i], now_s, rep);
}

void obj_reaper_sweep(obj_reaper_t *r, uint64_t pass_start_s)
{
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < REAP_HASH; i++)
        for (cand_t **pp = &r->h[i]; *pp;) {
            cand_t *c = *pp;
            if (c->seen_s >= pass_start_s) {
                pp = &c->next;
                continue;
            }
            *pp = c->next; /* named meantime, or gone: not a candidate any more */
            r->candidates--;
            free(c->id);
            free(c);
        }
    pthread_mutex_unlock(&r->mu);
}

/* ---- a deleted bucket's namespaces ---- */

#define PURGE_PAGE 1024 /* records of one store's walk deleted at a time (whole groups) */

/* A page of one store's records: whole (key, version) groups, ids kept whole (a drive takes
 * versions longer than an upload id). */
typedef struct {
    drive_id_t *id;
    uint64_t *len;
    int n, cap, full;
} purge_page_t;

static int collect_record(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    purge_page_t *p = arg;
    (void)meta;
    int same = p->n && strcmp(p->id[p->n - 1].key, id->key) == 0 &&
               strcmp(p->id[p->n - 1].version, id->version) == 0;
    if (p->n >= PURGE_PAGE && !same) {
        p->full = 1;
        return 1; /* full: the walk resumes past the last group */
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->id = xrealloc(p->id, (size_t)p->cap * sizeof(*p->id));
        p->len = xrealloc(p->len, (size_t)p->cap * sizeof(*p->len));
    }
    p->id[p->n] = (drive_id_t){NULL, same ? p->id[p->n - 1].key : xstrdup(id->key),
                               same ? p->id[p->n - 1].version : xstrdup(id->version), id->shard};
    p->len[p->n++] = st->len;
    return 0;
}

static void purge_page_clear(purge_page_t *p)
{
    for (int k = 0; k < p->n; k++)
        if (k == 0 || p->id[k].key != p->id[k - 1].key) {
            free((char *)p->id[k].key);
            free((char *)p->id[k].version);
        }
    p->n = p->full = 0;
}

/* Every record of namespace ns on store i deleted: 0 when the walk ran to its end. */
static int purge_store(obj_set_t *s, int i, const char *ns, obj_purge_report_t *rep)
{
    purge_page_t p = {0};
    drive_from_t from = {.how = DRIVE_FROM_START};
    char *after_key = NULL, *after_v = NULL;
    int rc = 0;
    for (;;) {
        int wr = s->st[i].ops->scan(s->st[i].ctx, ns, "", &from, collect_record, &p);
        if (wr < 0 && !p.full) {
            rc = wr; /* (what the walk gave before it failed goes all the same: a record
                      * that does not decode must not hold back the others for good) */
            p.full = 0;
        }
        for (int k = 0; k < p.n; k++) {
            drive_id_t id = p.id[k];
            id.bucket = ns;
            int dr = s->st[i].ops->del(s->st[i].ctx, &id);
            if (dr == 0) {
                rep->records++;
                rep->bytes += p.len[k];
            } else if (dr != ERR_NOT_FOUND) {
                rep->failed++;
                if (!rc) rc = dr;
            }
        }
        if (!p.full) {
            purge_page_clear(&p);
            break;
        }
        /* Past the page's last group (whole in it): one that failed to go is passed by, not
         * walked again and again. */
        free(after_key);
        free(after_v);
        after_key = xstrdup(p.id[p.n - 1].key);
        after_v = xstrdup(p.id[p.n - 1].version);
        from = (drive_from_t){.how = DRIVE_PAST_VERSION, .key = after_key, .version = after_v};
        purge_page_clear(&p);
    }
    free(after_key);
    free(after_v);
    free(p.id);
    free(p.len);
    return rc;
}

static void purge_leaf(obj_set_t *s, const char *bucket, obj_purge_report_t *rep)
{
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, bucket);
    uint32_t away = obj__unhealthy(s);
    for (int i = 0; i < s->n; i++) {
        if ((away >> i) & 1) {
            rep->stores_left++; /* (a store away, or failed: the next pass) */
            continue;
        }
        int rc = purge_store(s, i, bucket, rep);
        if (!rc) rc = purge_store(s, i, bb, rep);
        if (rc) {
            log_limited(LOG_LVL_WARN, "event=purge_walk_failed bucket=%s store=%d err=%s", bucket,
                        i, err_name(rc));
            rep->stores_left++;
        }
    }
}

int obj_purge_bucket(obj_set_t *s, const char *bucket, obj_purge_report_t *rep)
{
    int ns = atomic_load(&s->nsub);
    if (!ns) {
        purge_leaf(s, bucket, rep);
    } else {
        for (int j = 0; j < ns; j++)
            if (!obj__sub_removed(s, j)) purge_leaf(s->sub[j], bucket, rep);
    }
    return rep->stores_left ? ERR_UNRECOVERABLE : 0;
}
