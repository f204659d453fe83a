/*
 * obj_list.c: listing a bucket's objects and their versions (room of the
 * object layer; map in obj_int.h), from the stores' ordered indexes alone.
 *
 * Which stores. A committed version has heads on at least k of the k+m
 * stores, or (a sparse inline object, obj_head_write.c) on its m+1 copies only,
 * so any k stores hold at least one head of every committed version (k +
 * m+1 > k+m; and of every delete marker or tombstone that covers one). A
 * listing walks the indexes of k stores side by side and merges them:
 * at each (key, version position) the newest head among them (by stamp,
 * then upload id, as obj__newest_at) is the answer (list_stores says how
 * many stores: the one place to change if where heads live changes).
 * The metadata comes with the index entry (drive_scan), so a key costs no
 * lookup of its own: never k+m heads per key, and a page costs what its
 * entries cost, however large the bucket.
 *
 * How. Each store is read in chunks (up to CHUNK_MAX entries after a
 * cursor); the merge takes the smallest position over the chunks, and a
 * store whose chunk is used up fetches the next one from the merge's
 * cursor (the last position delivered, or past a common prefix rolled up:
 * one seek however many keys sit under it). Chunks are fetched in
 * parallel on the set's pool, and (without a delimiter) each store's next
 * chunk is fetched there while the merge works through the current one.
 * Heads a commit wrote alike on every store are byte-identical and
 * decoded once.
 *
 * Failures. A store whose walk fails is replaced by one not yet used,
 * which resumes at the cursor: nothing delivered is repeated, nothing
 * after it skipped. More than m failing stores (or too few left to make
 * k) fail the listing: never a short list that looks whole. A head that
 * does not decode is settled over every store (obj__newest_at).
 *
 * Races. No key locks: each head is one index value, so an entry is one
 * version's, never a mix; a key acknowledged before the listing and not
 * deleted until its end has a live head on at least one of the k stores
 * for the whole walk, newer than any tombstone, so it is listed, once.
 * A head that fewer of the merged stores hold than its commit would have
 * put there (a commit in flight or cut short by a crash, a store that
 * missed a write) is settled as a GET settles it (obj__newest_at on the
 * key's own stores): a listing never shows a key a GET would not find.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MAX   1088         /* entries fetched from a store at a time: a page and some */
#define CHUNK_BYTES (512u << 10) /* ... and bytes of names and heads (one entry may exceed it) */
#define ENTRY_GUESS 224          /* bytes of a usual entry (name, head): a chunk's first arena */
#define RUN_MAX     16           /* noncurrent heads a plain listing walks past before a seek */
#define CP_MAX      2            /* entries of one common prefix in a chunk: the rest is skipped */
/* (... at first: see merge_passed_over) */

typedef struct {
    uint32_t key, ver, meta; /* offsets into the arena */
    uint32_t meta_len;
} lent_t;

struct merge;

typedef struct src {
    struct merge *m;
    int store; /* index into the set */
    lent_t e[CHUNK_MAX];
    int n, at;
    uint8_t *arena;
    size_t used, cap;
    int eof;          /* the walk reached the end: nothing after the chunk's last entry */
    int end;          /* filling stopped at a key other than only_key */
    int run;          /* filling: noncurrent heads in a row (plain listings) */
    int cp_first;     /* filling: the first entry of the common prefix the last one is under */
    size_t cp_len;    /* ... its length (0: the last entry was under none) */
    int cp_count;     /* ... and entries under it so far */
    int rc;           /* the last fetch's result */
    int limit;        /* entries the fetch takes at most (chunk_len) */
    obj_info_t *info; /* its head at the merge point, decoded */
    int decoded;      /* info holds this entry's head */
    /* Where the fetch starts: the merge's cursor, or (a prefetch) past the other chunk. */
    drive_from_t from;
    char fkey[SHARD_MAX_KEY + 1], fver[256];
    /* Each source is a pair of chunks: the one merged, and the next one fetched meanwhile
     * on the set's pool (pending), when nothing can make it useless (no delimiter). */
    struct src *ahead;
    pool_job_t job;
    latch_t latch;
    int pending;
} src_t;

typedef struct merge {
    obj_set_t *s;
    const char *bucket;
    const char *scan_prefix; /* what the stores walk */
    const char *only_key;    /* walk this key alone (NULL: every key) */
    const char *delim;       /* the listing's delimiter (NULL: none) */
    size_t plen;             /* ... and its prefix's length */
    int versions;            /* noncurrent heads too */
    int ahead_ok;            /* chunks are fetched ahead */
    size_t want, got;        /* entries the caller will take (0: unknown), and has taken */
    int nsrc;
    src_t *src[OBJ_MAX_SHARDS];
    uint32_t taken; /* stores listed or failed */
    int failed;
    /* The cursor: every position up to it has been merged. */
    int how; /* DRIVE_FROM_START, DRIVE_PAST_* */
    char key[SHARD_MAX_KEY + 1];
    char ver[256];
    obj_info_t *settled; /* a position whose heads did not all decode */
    int cp_max;          /* entries of one common prefix a chunk takes (fill_cb) */
    int cp_dead;         /* ... and those passed over since it was last set */
} merge_t;

/*
 * How many stores a listing merges: k, since every committed version has
 * heads on at least k of the k+m stores or (sparse) on its m+1 copies, and
 * any k stores share one with either. Everything a listing costs is per
 * store merged (a walk of its index, its entries copied and compared), so
 * this is the listing's price: the one place to change when where heads
 * live changes.
 */
static int list_stores(const obj_set_t *s)
{
    return s->n - s->m;
}

/* The common prefix key rolls up into (its length), 0 for none. */
static size_t common_prefix(const char *key, size_t pl, const char *delim)
{
    if (!delim || !delim[0]) return 0;
    const char *d = strstr(key + pl, delim);
    return d ? (size_t)(d - key) + strlen(delim) : 0;
}

static int fill_cb(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    src_t *c = arg;
    merge_t *m = c->m;
    if (m->only_key && strcmp(id->key, m->only_key) != 0) {
        c->end = 1;
        return 1;
    }
    /* Store i holds heads with shard index i; anything else is not this store's head. */
    if (id->shard != (uint32_t)c->store) return 0;
    if (!m->versions && id->version[0]) {
        /* A key's noncurrent heads follow its current one: many of them, and a seek past
         * the key (the next chunk starts past the cursor) is cheaper than walking on. */
        return ++c->run > RUN_MAX && c->n > 0 ? 1 : 0;
    }
    c->run = 0;
    if (m->delim) {
        /* Keys under a common prefix are skipped by a seek once one of them is live: a chunk
         * holds a few, not every one (a page would read them all, ahead of the merge). */
        size_t cl = common_prefix(id->key, m->plen, m->delim);
        if (cl && cl == c->cp_len && c->n > 0 &&
            memcmp(c->arena + c->e[c->cp_first].key, id->key, cl) == 0) {
            if (c->cp_count >= m->cp_max) return 1;
            c->cp_count++;
        } else {
            c->cp_len = cl;
            c->cp_first = c->n;
            c->cp_count = 1;
        }
    }
    size_t kl = strlen(id->key) + 1, vl = strlen(id->version) + 1, need = kl + vl + st->meta_len;
    if (c->n > 0 && (c->n == c->limit || c->used + need > CHUNK_BYTES)) return 1;
    if (c->used + need > c->cap) {
        /* Sized for the entries the fetch takes, so a page's chunk is not copied as it grows;
         * a listing of a few keys holds a few KiB, not CHUNK_BYTES. */
        size_t guess = (size_t)c->limit * ENTRY_GUESS;
        c->cap = c->cap ? 2 * c->cap : guess < CHUNK_BYTES ? guess : CHUNK_BYTES;
        if (c->cap < c->used + need) c->cap = c->used + need;
        c->arena = xrealloc(c->arena, c->cap);
    }
    lent_t *e = &c->e[c->n++];
    e->key = (uint32_t)c->used;
    memcpy(c->arena + c->used, id->key, kl);
    e->ver = (uint32_t)(c->used + kl);
    memcpy(c->arena + e->ver, id->version, vl);
    e->meta = (uint32_t)(c->used + kl + vl);
    e->meta_len = st->meta_len;
    if (st->meta_len) memcpy(c->arena + e->meta, meta, st->meta_len);
    c->used += need;
    return 0;
}

static void fetch_src(src_t *c)
{
    merge_t *m = c->m;
    const shard_store_t *st = &m->s->st[c->store];
    c->n = c->at = 0;
    c->used = 0;
    c->run = c->end = 0;
    c->cp_len = 0;
    int rc = st->ops->scan(st->ctx, m->bucket, m->scan_prefix, &c->from, fill_cb, c);
    c->eof = rc == 0 || c->end;
    c->rc = rc < 0 ? rc : 0;
    if (c->rc) c->n = 0;
}

static void run_ahead(pool_job_t *j)
{
    fetch_src((src_t *)((char *)j - offsetof(src_t, job)));
}

/*
 * Fetch the chunks of need[0..n) at once: all but one on the set's pool,
 * the last on this thread meanwhile (it would only wait otherwise: one
 * hand-off fewer per round). When the pool has a queue, all here.
 */
static void fetch_all(merge_t *m, src_t **need, unsigned n)
{
    if (n == 1 || obj__busy(m->s)) {
        for (unsigned i = 0; i < n; i++)
            fetch_src(need[i]);
        return;
    }
    pool_job_t *q[OBJ_MAX_SHARDS];
    latch_t l;
    latch_init(&l);
    for (unsigned i = 0; i + 1 < n; i++) {
        need[i]->job.run = run_ahead;
        q[i] = &need[i]->job;
    }
    pool_submit(m->s->pool, q, (int)n - 1, &l);
    fetch_src(need[n - 1]);
    latch_wait(&l);
    latch_destroy(&l);
}

/*
 * How many entries a fetch takes: CHUNK_MAX, or what the caller still wants
 * (and some for deleted keys), so a page does not read a chunk past its end.
 */
static int chunk_len(const merge_t *m, size_t buffered)
{
    if (!m->want) return CHUNK_MAX;
    size_t left = m->want > m->got + buffered ? m->want - m->got - buffered : 0;
    return left + 64 < CHUNK_MAX ? (int)left + 64 : CHUNK_MAX;
}

/* Start fetching c's next chunk in the background: from just past its last entry. */
static void prefetch(merge_t *m, src_t *c)
{
    src_t *a = c->ahead;
    if (!m->ahead_ok || c->eof || c->n == 0) return;
    if (m->want && m->got + (size_t)c->n >= m->want) return; /* the page ends in this chunk */
    const lent_t *e = &c->e[c->n - 1];
    memcpy(a->fkey, c->arena + e->key, e->ver - e->key);
    memcpy(a->fver, c->arena + e->ver, e->meta - e->ver);
    a->from = (drive_from_t){m->versions ? DRIVE_PAST_VERSION : DRIVE_PAST_KEY, a->fkey, a->fver};
    a->store = c->store;
    a->limit = chunk_len(m, (size_t)c->n);
    a->pending = 1;
    a->job.run = run_ahead;
    pool_job_t *q = &a->job;
    pool_submit(m->s->pool, &q, 1, &a->latch);
}

/* Wait for c's chunk fetched ahead, if any (before the pair is reset or freed). */
static void drain(src_t *c)
{
    if (!c->ahead->pending) return;
    latch_wait(&c->ahead->latch);
    c->ahead->pending = 0;
}

/* The next store not taken yet (one that is up, while any is left), -1 when none is left. */
static int take_store(merge_t *m)
{
    int order[OBJ_MAX_SHARDS];
    int no = obj__ask_order(m->s, ~m->taken, 0, order);
    if (!no) return -1;
    m->taken |= 1u << order[0];
    return order[0];
}

/* c's store failed: another takes its place, resuming at the cursor. 0 or an ERR_*. */
static int src_failed(merge_t *m, src_t *c)
{
    if (c->rc == ERR_INVAL) return ERR_INVAL;
    log_warn("event=list_store_failed shard=%d bucket=%s err=%s", c->store, m->bucket,
             err_name(c->rc));
    int next = take_store(m);
    if (++m->failed > m->s->m || next < 0) return ERR_UNRECOVERABLE;
    c->store = c->ahead->store = next;
    c->n = c->at = 0;
    c->eof = 0;
    return 0;
}

/* Every source with more to give has an entry at hand; failing stores replaced. */
static int refill(merge_t *m)
{
    for (;;) {
        src_t *need[OBJ_MAX_SHARDS];
        unsigned nn = 0;
        for (int i = 0; i < m->nsrc; i++) {
            src_t *c = m->src[i];
            if (c->at < c->n || c->eof) continue;
            if (c->ahead->pending) {
                /* The next chunk was fetched meanwhile: it is the rest of this one. */
                drain(c);
                m->src[i] = c = c->ahead;
                if (!c->rc) {
                    prefetch(m, c);
                    continue;
                }
                int rc = src_failed(m, c);
                if (rc) return rc;
            }
            c->from = (drive_from_t){m->how, m->key, m->ver};
            c->limit = chunk_len(m, 0);
            need[nn++] = c;
        }
        if (!nn) return 0;
        fetch_all(m, need, nn);
        for (unsigned i = 0; i < nn; i++) {
            int rc = need[i]->rc ? src_failed(m, need[i]) : 0;
            if (rc) return rc;
            if (!need[i]->rc) prefetch(m, need[i]);
        }
    }
}

static const char *ekey(const src_t *c)
{
    return (const char *)c->arena + c->e[c->at].key;
}

static const char *ever(const src_t *c)
{
    return (const char *)c->arena + c->e[c->at].ver;
}

static int pos_cmp(const src_t *a, const src_t *b)
{
    int r = strcmp(ekey(a), ekey(b));
    return r ? r : strcmp(ever(a), ever(b));
}

/*
 * Whether fewer of the merged stores hold best (the newest head at this
 * position) than would if its commit stood whole: a sparse head on every
 * merged store among its copies, any other on every merged store. at[0..na)
 * are the stores with a head here; copy_of[i] the one whose decoded head
 * at[i]'s bytes repeat (i itself when it decoded its own).
 */
static int short_of_heads(const merge_t *m, src_t *const *at, int na, const int *copy_of,
                          const obj_info_t *best)
{
    int holders = 0, want = 0;
    for (int i = 0; i < na; i++) {
        const obj_info_t *o = at[copy_of[i]]->info;
        if (o == best || (o->stamp_ns == best->stamp_ns && !strcmp(o->upload_id, best->upload_id)))
            holders++;
    }
    for (int i = 0; i < m->nsrc; i++)
        if (!best->sparse || ((best->inl >> m->src[i]->store) & 1)) want++;
    return holders < want;
}

/*
 * The next position in order and its newest head: 1 (m->key, m->ver and
 * *out set, the cursor past it), 0 at the end, or an ERR_*. *out stays
 * valid until the next call.
 */
static int merge_next(merge_t *m, const obj_info_t **out)
{
    for (;;) {
        int rc = refill(m);
        if (rc) return rc;
        src_t *at[OBJ_MAX_SHARDS];
        int na = 0;
        for (int i = 0; i < m->nsrc; i++) {
            src_t *c = m->src[i];
            if (c->at == c->n) continue;
            int r = na ? pos_cmp(c, at[0]) : -1;
            if (r < 0) na = 0;
            if (r <= 0) at[na++] = c;
        }
        if (!na) return 0;
        const lent_t *e0 = &at[0]->e[at[0]->at];
        memcpy(m->key, ekey(at[0]), e0->ver - e0->key); /* NULs included */
        memcpy(m->ver, ever(at[0]), e0->meta - e0->ver);
        m->how = m->versions ? DRIVE_PAST_VERSION : DRIVE_PAST_KEY;
        const obj_info_t *best = NULL;
        int bad = 0, copy_of[OBJ_MAX_SHARDS];
        const lent_t *ent[OBJ_MAX_SHARDS];
        for (int i = 0; i < na; i++) {
            src_t *c = at[i];
            const lent_t *e = ent[i] = &c->e[c->at];
            const uint8_t *meta = c->arena + e->meta;
            c->decoded = 0;
            copy_of[i] = i;
            /* The heads of one commit are the same bytes on every store: decoded once.
             * (ent[j], not at[j]'s cursor: that has moved past its entry already.) */
            for (int j = 0; j < i && !c->decoded; j++) {
                const lent_t *f = ent[j];
                if (at[j]->decoded > 0 && f->meta_len == e->meta_len &&
                    memcmp(at[j]->arena + f->meta, meta, e->meta_len) == 0) {
                    c->decoded = -1; /* a copy of one already counted */
                    copy_of[i] = j;
                }
            }
            if (!c->decoded) {
                if (obj_meta_decode(meta, e->meta_len, c->info) != 0) {
                    bad = 1;
                } else {
                    c->decoded = 1;
                    if (!best || obj__newer(c->info, best)) best = c->info;
                }
            }
            c->at++;
        }
        if (!bad && short_of_heads(m, at, na, copy_of, best)) {
            /*
             * Fewer of the merged stores hold this head than a committed one
             * leaves there: a commit in flight or cut short, or a store that
             * missed a write. A GET asks the key's own stores: the listing
             * takes their answer, so it never lists what a GET would not find
             * (or the other way round). If they cannot answer, the merge's.
             */
            rc = obj__newest_at(m->s, m->bucket, m->key, m->ver, m->settled);
            if (rc == ERR_NOT_FOUND) continue;
            if (rc == 0) best = m->settled;
        }
        if (bad) {
            /* Another store may hold the head the unreadable one stands for. */
            rc = obj__newest_at(m->s, m->bucket, m->key, m->ver, m->settled);
            if (rc == ERR_NOT_FOUND) continue;
            if (rc) return rc;
            best = m->settled;
        }
        *out = best;
        return 1;
    }
}

/*
 * An entry passed over (nothing current there) under a common prefix (cl > 0). A chunk takes
 * a few entries of a prefix (cp_max), which is all it needs once one of them is live; but
 * under a prefix whose keys are all deleted (tombstones, delete markers) each few cost a
 * round of fetches, one per store: a delimiter listing of 30,000 deleted keys took seconds
 * (a probe). So each time as many were passed over as a chunk takes, it takes twice as
 * many, up to a whole chunk; anything delivered sets it back (merge_delivered).
 */
static void merge_passed_over(merge_t *m, size_t cl)
{
    if (!cl || m->cp_max >= CHUNK_MAX || ++m->cp_dead < m->cp_max) return;
    m->cp_max *= 2;
    m->cp_dead = 0;
}

/* A key or a common prefix delivered: the next prefix's chunks take a few of it again. */
static void merge_delivered(merge_t *m)
{
    m->cp_max = CP_MAX;
    m->cp_dead = 0;
}

/* Skip every key under cp (a common prefix just delivered): one seek per store. */
static void merge_skip_prefix(merge_t *m, const char *cp, size_t cl)
{
    merge_delivered(m);
    m->how = DRIVE_PAST_PREFIX;
    memcpy(m->key, cp, cl);
    m->key[cl] = 0;
    for (int i = 0; i < m->nsrc; i++) {
        src_t *c = m->src[i];
        while (c->at < c->n && strncmp(ekey(c), cp, cl) == 0)
            c->at++;
    }
}

/* Start (or restart) a walk of scan_prefix from the cursor set by the caller. */
static void merge_restart(merge_t *m, const char *scan_prefix, const char *only_key,
                          const char *prefix, const char *delim)
{
    m->scan_prefix = scan_prefix;
    m->only_key = only_key;
    m->delim = delim && delim[0] ? delim : NULL;
    m->plen = strlen(prefix);
    merge_delivered(m); /* a new walk */
    /* A common prefix skipped makes a chunk fetched ahead useless; so does a key's end. */
    m->ahead_ok = !m->delim && !only_key;
    for (int i = 0; i < m->nsrc; i++) {
        drain(m->src[i]);
        m->src[i]->n = m->src[i]->at = 0;
        m->src[i]->eof = 0;
    }
}

/* The cursor just past `after` (past all of it when it is a common prefix itself). */
static void merge_after(merge_t *m, const char *prefix, const char *delim, const char *after)
{
    m->how = DRIVE_FROM_START;
    m->key[0] = m->ver[0] = 0;
    if (!after || !after[0]) return;
    size_t pl = strlen(prefix), al = strlen(after);
    m->how = DRIVE_PAST_KEY;
    if (delim && delim[0] && al > pl && strncmp(after, prefix, pl) == 0) {
        const char *d = strstr(after + pl, delim);
        /* That prefix ended an earlier page: every key under it was rolled up there. */
        if (d && (size_t)(d - after) + strlen(delim) == al) m->how = DRIVE_PAST_PREFIX;
    }
    snprintf(m->key, sizeof(m->key), "%s", after);
}

static src_t *src_new(merge_t *m, int store)
{
    src_t *c = xcalloc(1, sizeof(*c));
    c->m = m;
    c->store = store;
    c->info = xmalloc(sizeof(obj_info_t));
    latch_init(&c->latch);
    return c;
}

static void src_free(src_t *c)
{
    latch_destroy(&c->latch);
    free(c->arena);
    free(c->info);
    free(c);
}

static merge_t *merge_new(obj_set_t *s, const char *bucket, int versions, int wide)
{
    merge_t *m = xcalloc(1, sizeof(*m));
    m->s = s;
    m->bucket = bucket;
    m->versions = versions;
    /* (Wide: every store but those failed for good, which a healer's walk goes on without:
     * never taken, not even in a failing store's place, where they would only fail too.) */
    uint32_t gone = wide ? obj__failed(s) : 0;
    int failed = __builtin_popcount(gone);
    m->nsrc = !wide ? list_stores(s) : failed < s->n - s->m ? s->n - failed : s->n - s->m;
    if (failed < s->n - s->m) m->taken = gone;
    m->settled = xmalloc(sizeof(obj_info_t));
    m->cp_max = CP_MAX;
    for (int i = 0; i < m->nsrc; i++) {
        src_t *c = src_new(m, take_store(m));
        c->ahead = src_new(m, c->store);
        c->ahead->ahead = c;
        m->src[i] = c;
    }
    return m;
}

static void merge_free(merge_t *m)
{
    for (int i = 0; i < m->nsrc; i++) {
        drain(m->src[i]);
        src_free(m->src[i]->ahead);
        src_free(m->src[i]);
    }
    free(m->settled);
    free(m);
}

int obj__list(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
              const char *after, size_t want, int wide, obj_list_fn fn, void *arg)
{
    if (s->nsub) return obj__multi_list(s, bucket, prefix, delim, after, want, wide, fn, arg);
    const char *p = prefix ? prefix : "";
    size_t pl = strlen(p);
    merge_t *m = merge_new(s, bucket, 0, wide);
    const obj_info_t *o;
    m->want = want;
    int rc;
    merge_after(m, p, delim, after);
    merge_restart(m, prefix, NULL, p, delim);
    while ((rc = merge_next(m, &o)) == 1) {
        size_t cl = common_prefix(m->key, pl, delim);
        if (o->deleted) { /* a delete marker or tombstone: nothing current */
            merge_passed_over(m, cl);
            continue;
        }
        if (cl) {
            char cp[SHARD_MAX_KEY + 1];
            memcpy(cp, m->key, cl);
            cp[cl] = 0;
            m->got++;
            if (fn(arg, cp, NULL)) break;
            merge_skip_prefix(m, cp, cl);
            continue;
        }
        m->got++;
        merge_delivered(m);
        if (fn(arg, m->key, o)) break;
    }
    merge_free(m);
    return rc;
}

int obj_list_delim(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                   const char *after, size_t want, obj_list_fn fn, void *arg)
{
    return obj__list(s, bucket, prefix, delim, after, want, 0, fn, arg);
}

int obj_list(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
             obj_list_fn fn, void *arg)
{
    return obj_list_delim(s, bucket, prefix, NULL, after, 0, fn, arg);
}

/* ---- versions ---- */

typedef struct {
    obj_version_fn fn;
    obj_retired_fn rfn; /* a retired walk (obj_list_retired): tombstones alone, to it */
    void *arg;
    const char *prefix, *delim;
    const char *gate_pos;            /* the walk of `after` past a version: positions up to it go */
    char cur_key[SHARD_MAX_KEY + 1]; /* the key being walked, and its current version */
    char cur_upload[33], cur_vid[OBJ_VID_LEN + 1];
    int has_cur, seen_null, fresh;
    char last_cp[SHARD_MAX_KEY + 1]; /* `after`'s walk may roll up what the next walk does */
} vwalk_t;

/* One merged walk: 1 when fn stopped it, 0 at its end, or an ERR_*. */
static int walk_versions(merge_t *m, vwalk_t *w)
{
    size_t pl = strlen(w->prefix);
    const obj_info_t *o;
    int rc;
    while ((rc = merge_next(m, &o)) == 1) {
        if (w->fresh || strcmp(w->cur_key, m->key) != 0) {
            snprintf(w->cur_key, sizeof(w->cur_key), "%s", m->key);
            w->has_cur = w->seen_null = w->fresh = 0;
        }
        if (w->rfn) { /* the newest head at this position a tombstone: to it */
            if (!o->deleted || o->marker || obj__moved_mark(o) ||
                (w->gate_pos && strcmp(m->ver, w->gate_pos) <= 0))
                continue; /* (a moved key's mark is no delete's: obj_move.c) */
            m->got++;
            if (w->rfn(w->arg, m->key, m->ver, o)) return 1;
            continue;
        }
        if (o->deleted && !o->marker) { /* nothing there (a tombstone) */
            merge_passed_over(m, common_prefix(m->key, pl, w->delim));
            continue;
        }
        int latest = !m->ver[0];
        if (latest) {
            memcpy(w->cur_upload, o->upload_id, sizeof(w->cur_upload));
            memcpy(w->cur_vid, o->vid, sizeof(w->cur_vid));
            w->has_cur = 1;
        } else if (w->has_cur && strcmp(o->upload_id, w->cur_upload) == 0 &&
                   strcmp(o->vid, w->cur_vid) == 0) {
            continue; /* a noncurrent copy of the current version (obj_version.c) */
        } else if (!o->vid[0] && w->seen_null) {
            continue; /* a null version below the null one: stale (a crash's leftover) */
        }
        if (!o->vid[0]) w->seen_null = 1;
        /* Before the marker? By the version's own position: the current head may be a version
         * promoted since the marker was handed out, and must not be skipped for being current. */
        if (w->gate_pos) {
            char here[OBJ_VID_LEN + 1];
            obj__vid_of(here, o->mtime_ns);
            if (strcmp(here, w->gate_pos) <= 0) {
                merge_passed_over(m, common_prefix(m->key, pl, w->delim));
                continue;
            }
        }
        size_t cl = common_prefix(m->key, pl, w->delim);
        if (cl) {
            char cp[SHARD_MAX_KEY + 1];
            memcpy(cp, m->key, cl);
            cp[cl] = 0;
            m->got++;
            if (strcmp(cp, w->last_cp) != 0 && w->fn(w->arg, cp, NULL, 0)) return 1;
            memcpy(w->last_cp, cp, cl + 1);
            merge_skip_prefix(m, cp, cl);
            w->fresh = 1;
            continue;
        }
        m->got++;
        merge_delivered(m);
        if (w->fn(w->arg, m->key, o, latest)) return 1;
    }
    return rc;
}

int obj__list_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                       const char *after, const char *after_vid, size_t want, int wide,
                       obj_version_fn fn, void *arg)
{
    if (s->nsub)
        return obj__multi_versions(s, bucket, prefix, delim, after, after_vid, want, wide, fn, arg);
    vwalk_t *w = xcalloc(1, sizeof(*w));
    merge_t *m = merge_new(s, bucket, 1, wide);
    int rc = 0;
    m->want = want;
    w->fn = fn;
    w->arg = arg;
    w->prefix = prefix ? prefix : "";
    w->delim = delim && delim[0] ? delim : NULL;
    w->fresh = 1;
    if (after && after[0] && after_vid && strncmp(after, w->prefix, strlen(w->prefix)) == 0) {
        /*
         * The rest of `after`'s versions first, then the keys after it. Versions
         * sort by position (a version id is its position), so the marker need
         * not exist any more: the walk goes on past where it was. The null
         * version's position is looked up; gone, the key is walked whole.
         */
        char pos[OBJ_VID_LEN + 1] = "";
        if (strcmp(after_vid, "null") == 0) {
            obj_info_t *nul = xmalloc(sizeof(*nul));
            if (obj__locate(s, bucket, after, "null", nul, pos) == 0)
                obj__vid_of(pos, nul->mtime_ns);
            else
                pos[0] = 0;
            free(nul);
        } else {
            snprintf(pos, sizeof(pos), "%s", after_vid);
        }
        w->gate_pos = pos;
        merge_after(m, w->prefix, NULL, NULL);
        merge_restart(m, after, after, w->prefix, w->delim);
        rc = walk_versions(m, w);
        w->gate_pos = NULL;
    }
    if (rc == 0) {
        merge_after(m, w->prefix, w->delim, after);
        merge_restart(m, prefix, NULL, w->prefix, w->delim);
        rc = walk_versions(m, w);
    }
    merge_free(m);
    free(w);
    return rc;
}

int obj_list_versions_delim(obj_set_t *s, const char *bucket, const char *prefix, const char *delim,
                            const char *after, const char *after_vid, size_t want,
                            obj_version_fn fn, void *arg)
{
    return obj__list_versions(s, bucket, prefix, delim, after, after_vid, want, 0, fn, arg);
}

int obj_list_versions_all(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
                          const char *after_vid, obj_version_fn fn, void *arg)
{
    return obj__list_versions(s, bucket, prefix, NULL, after, after_vid, 0, 1, fn, arg);
}

int obj_list_retired(obj_set_t *s, const char *bucket, const char *after, const char *after_pos,
                     obj_retired_fn fn, void *arg)
{
    if (s->nsub) return ERR_INVAL; /* one set at a time (obj_set_sub) */
    vwalk_t *w = xcalloc(1, sizeof(*w));
    merge_t *m = merge_new(s, bucket, 1, 1);
    int rc = 0;
    w->rfn = fn;
    w->arg = arg;
    w->prefix = "";
    w->fresh = 1;
    if (after && after[0] && after_pos) {
        /* The rest of `after`'s positions first (past after_pos; "" the current one). */
        w->gate_pos = after_pos;
        merge_after(m, "", NULL, NULL);
        merge_restart(m, after, after, "", NULL);
        rc = walk_versions(m, w);
        w->gate_pos = NULL;
    }
    if (rc == 0) {
        merge_after(m, "", NULL, after);
        merge_restart(m, NULL, NULL, "", NULL);
        rc = walk_versions(m, w);
    }
    merge_free(m);
    free(w);
    return rc;
}

int obj_list_versions(obj_set_t *s, const char *bucket, const char *prefix, const char *after,
                      const char *after_vid, obj_version_fn fn, void *arg)
{
    return obj_list_versions_delim(s, bucket, prefix, NULL, after, after_vid, 0, fn, arg);
}
