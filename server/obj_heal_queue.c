/*
 * obj_heal_queue: the heal queue and its thread (obj.h: obj_set_heal_start,
 * obj_heal_stats; obj_int.h: the notes).
 *
 * Writes acknowledged short of some stores note their keys here: a FIFO of
 * keys (a hash finds one already queued, which then takes the new note's
 * version id too), drained by one thread that heals each through
 * obj__heal_key (obj_heal.c), waits while any store is away (healing then
 * would only fail against it; a drive failed for good is healed around) and
 * puts a key that still fails into a heap of retries, ordered by when each
 * is due (2 s to 64 s of backoff). Fresh notes and due retries are taken by
 * turns; a retry that is not due yet holds no fresh note back (in one FIFO,
 * every note behind it waited up to its 64 s). The same thread runs
 * the drops: the blocks of a dropped version that some stores kept, and
 * retired head records and tombstones a minute after their note.
 */
#include "server/obj_int.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_ns(void)
{
    wl_clock_t *c = clock_real();
    return c->now_ns(c);
}

#define HQ_BUCKETS 65536

/* Versions noted by id for one key, at most: past it, every noncurrent version is healed. */
#define HEAL_VIDS_MAX 32

typedef struct heal_ent {
    char *bucket, *key;
    /* Versions noted by id besides the current one (obj__heal_note's vid): a version
     * written short that is noncurrent by the time the queue reaches it, or the archive of
     * one that a write covered short of some stores. all: more than HEAL_VIDS_MAX. */
    char *vids[HEAL_VIDS_MAX];
    int nvids, all;
    int tries;
    uint64_t not_before_ns;
    size_t at;              /* its place in the retries' heap, while there (not_before_ns) */
    struct heal_ent *next;  /* FIFO */
    struct heal_ent *hnext; /* hash chain */
} heal_ent_t;

/* A dropped version's blocks that stores of mask kept (obj__drop_note), or (pos set) a
 * retired version's head records, due at not_before_ns (obj__head_drop_note). */
typedef struct drop_ent {
    char *bb, *key, *upload, *pos;
    uint64_t stamp; /* a tombstone at pos: that very head only (upload, stamp) */
    uint64_t stripes, not_before_ns;
    uint32_t mask;
    int tries;
    struct drop_ent *next;
} drop_ent_t;

typedef struct {
    drop_ent_t *head, *tail;
} drop_fifo_t;

static void fifo_push(drop_fifo_t *f, drop_ent_t *d)
{
    d->next = NULL;
    if (f->tail)
        f->tail->next = d;
    else
        f->head = d;
    f->tail = d;
}

static drop_ent_t *fifo_pop(drop_fifo_t *f)
{
    drop_ent_t *d = f->head;
    f->head = d->next;
    if (!f->head) f->tail = NULL;
    return d;
}

typedef struct heal_q {
    obj_set_t *s;
    /* Drops in two FIFOs, each in the order they fall due: a dropped version's blocks (due at
     * once), and head records and tombstones (due obj__head_drop_delay_ns after their note).
     * One FIFO held a block drop behind a minute's worth of tombstones. */
    drop_fifo_t at_once, delayed;
    int turn; /* the last drop was at_once's: the delayed one's turn when both are due */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stop;
    heal_ent_t *head, *tail; /* fresh notes, due at once, in the order noted */
    heal_ent_t **retry;      /* keys that failed: a min-heap on not_before_ns */
    size_t nretry, cap_retry;
    int retry_turn;    /* the last heal was a fresh note's: a due retry's turn */
    heal_ent_t **hash; /* HQ_BUCKETS chains: every entry, fresh or retried */
    obj_heal_stats_t st;
} heal_q_t;

static uint32_t ent_hash(const char *bucket, const char *key)
{
    uint32_t h = 2166136261u;
    for (const char *p = bucket; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h % HQ_BUCKETS;
}

static heal_ent_t **ent_slot(heal_q_t *q, const char *bucket, const char *key)
{
    heal_ent_t **pp = &q->hash[ent_hash(bucket, key)];
    while (*pp && (strcmp((*pp)->bucket, bucket) != 0 || strcmp((*pp)->key, key) != 0))
        pp = &(*pp)->hnext;
    return pp;
}

/* Under mu: e into the hash, counted pending. */
static void ent_hash_in(heal_q_t *q, heal_ent_t *e)
{
    heal_ent_t **slot = ent_slot(q, e->bucket, e->key);
    e->hnext = NULL;
    *slot = e;
    q->st.pending++;
}

/* Under mu: append e at the fresh notes' tail (and into the hash). */
static void ent_push(heal_q_t *q, heal_ent_t *e)
{
    e->next = NULL;
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    ent_hash_in(q, e);
}

static int retry_before(const heal_ent_t *a, const heal_ent_t *b)
{
    return a->not_before_ns < b->not_before_ns;
}

/* Under mu: e to its place in the heap, from slot i toward the top. */
static void retry_up(heal_q_t *q, heal_ent_t *e, size_t i)
{
    while (i > 0 && retry_before(e, q->retry[(i - 1) / 2])) {
        q->retry[i] = q->retry[(i - 1) / 2];
        q->retry[i]->at = i;
        i = (i - 1) / 2;
    }
    q->retry[i] = e;
    e->at = i;
}

/* Under mu: e (its not_before_ns set) into the retries' heap (and into the hash). */
static void retry_push(heal_q_t *q, heal_ent_t *e)
{
    if (q->nretry == q->cap_retry) {
        q->cap_retry = q->cap_retry ? 2 * q->cap_retry : 64;
        q->retry = xrealloc(q->retry, q->cap_retry * sizeof(*q->retry));
    }
    retry_up(q, e, q->nretry++);
    ent_hash_in(q, e);
}

/* Under mu: the retry due first, out of the heap (nretry > 0; still in the hash). */
static heal_ent_t *retry_pop(heal_q_t *q)
{
    heal_ent_t *top = q->retry[0], *last = q->retry[--q->nretry];
    size_t i = 0, n = q->nretry;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && retry_before(q->retry[c + 1], q->retry[c])) c++;
        if (!retry_before(q->retry[c], last)) break;
        q->retry[i] = q->retry[c];
        q->retry[i]->at = i;
        i = c;
    }
    if (n) {
        q->retry[i] = last;
        last->at = i;
    }
    top->not_before_ns = 0;
    return top;
}

static void ent_free(heal_ent_t *e)
{
    for (int i = 0; i < e->nvids; i++)
        free(e->vids[i]);
    free(e->bucket);
    free(e->key);
    free(e);
}

/* Under mu: vid (NULL or "": the current version only) among e's versions. */
static void ent_add_vid(heal_ent_t *e, const char *vid)
{
    if (!vid || !vid[0] || e->all) return;
    for (int i = 0; i < e->nvids; i++)
        if (strcmp(e->vids[i], vid) == 0) return;
    if (e->nvids == HEAL_VIDS_MAX)
        e->all = 1;
    else
        e->vids[e->nvids++] = xstrdup(vid);
}

void obj__heal_note(obj_set_t *s, const char *bucket, const char *key, const char *vid)
{
    heal_q_t *q = s->healq;
    if (!q || obj__healing()) return;
    pthread_mutex_lock(&q->mu);
    heal_ent_t *queued = *ent_slot(q, bucket, key);
    if (queued) {
        ent_add_vid(queued, vid); /* queued already: one heal covers both writes */
        if (queued->not_before_ns) {
            /* Backing off after failed heals: a new write short of a store is healed now,
             * with tries of its own, not after the old backoff (a review). */
            queued->not_before_ns = 0;
            queued->tries = 0;
            retry_up(q, queued, queued->at);
            pthread_cond_signal(&q->cv);
        }
        pthread_mutex_unlock(&q->mu);
        return;
    }
    if (q->st.pending >= OBJ_HEAL_QUEUE_MAX) {
        if (q->st.dropped++ % 10000 == 0)
            log_warn("event=heal_queue_full pending=%llu dropped=%llu: heal the bucket later",
                     (unsigned long long)q->st.pending, (unsigned long long)q->st.dropped);
        pthread_mutex_unlock(&q->mu);
        return;
    }
    heal_ent_t *e = xcalloc(1, sizeof(*e));
    e->bucket = xstrdup(bucket);
    e->key = xstrdup(key);
    ent_add_vid(e, vid);
    ent_push(q, e);
    q->st.queued++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void drop_free(drop_ent_t *d)
{
    free(d->bb);
    free(d->key);
    free(d->upload);
    free(d->pos);
    free(d);
}

static void drop_push(heal_q_t *q, drop_ent_t *d);

void obj__drop_note(obj_set_t *s, const char *bb, const char *key, const char *upload,
                    uint64_t stripes, uint32_t mask)
{
    heal_q_t *q = s->healq;
    if (!q) return;
    drop_ent_t *d = xcalloc(1, sizeof(*d));
    d->bb = xstrdup(bb);
    d->key = xstrdup(key);
    d->upload = xstrdup(upload);
    d->stripes = stripes;
    d->mask = mask;
    drop_push(q, d);
}

void obj__head_drop_note(obj_set_t *s, const char *bucket, const char *key, const char *pos)
{
    heal_q_t *q = s->healq;
    if (!q) return;
    drop_ent_t *d = xcalloc(1, sizeof(*d));
    d->bb = xstrdup(bucket);
    d->key = xstrdup(key);
    d->pos = xstrdup(pos);
    d->mask = s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
    d->not_before_ns = mono_ns() + obj__head_drop_delay_ns;
    drop_push(q, d);
}

void obj__tombstone_drop_note(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *t, uint32_t mask)
{
    obj__tombstone_drop_at(s, bucket, key, "", t, mask);
}

void obj__tombstone_drop_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                            const obj_info_t *t, uint32_t mask)
{
    heal_q_t *q = s->healq;
    if (!q || !mask) return;
    drop_ent_t *d = xcalloc(1, sizeof(*d));
    d->bb = xstrdup(bucket);
    d->key = xstrdup(key);
    d->pos = xstrdup(pos);
    d->upload = xstrdup(t->upload_id);
    d->stamp = t->stamp_ns;
    d->mask = mask;
    d->not_before_ns = mono_ns() + obj__head_drop_delay_ns;
    drop_push(q, d);
}

/* Queue d (FIFO: due times only grow), or let it go when the queue is full. */
static void drop_push(heal_q_t *q, drop_ent_t *d)
{
    pthread_mutex_lock(&q->mu);
    if (q->st.drops_pending >= OBJ_HEAL_QUEUE_MAX) {
        uint64_t lost = ++q->st.drops_lost;
        pthread_mutex_unlock(&q->mu);
        /* Said once at each power of two: a burst of deletes past the queue logs a few lines. */
        if (!(lost & (lost - 1)))
            log_warn("event=drop_queue_full lost=%llu: block records or tombstones stay "
                     "(the scanner reaps the blocks; the next write of a key covers its tombstone)",
                     (unsigned long long)lost);
        drop_free(d);
        return;
    }
    fifo_push(d->not_before_ns ? &q->delayed : &q->at_once, d);
    q->st.drops_pending++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* d's blocks on the stores of its mask; the stores where a delete failed stay in it. */
static void drop_run(obj_set_t *s, drop_ent_t *d)
{
    uint32_t left = 0;
    for (int i = 0; i < s->n && d->pos; i++) { /* head records */
        if (!(d->mask & (1u << i))) continue;
        drive_id_t id = {d->bb, d->key, d->pos, (uint32_t)i};
        int rc;
        if (d->stamp) {
            shard_cond_t that = {.mode = SHARD_IF_UPLOAD, .stamp = d->stamp};
            snprintf(that.upload, sizeof(that.upload), "%s", d->upload);
            rc = obj__del_head(s, i, &id, &that);
            if (rc == ERR_PRECOND || rc == ERR_INVAL || rc == ERR_CORRUPT)
                rc = 0; /* covered since, or an older node: it stays, passed by */
        } else {
            rc = s->st[i].ops->del(s->st[i].ctx, &id);
        }
        if (rc && rc != ERR_NOT_FOUND) left |= 1u << i;
    }
    for (int i = 0; i < s->n && !d->pos; i++) {
        if (!(d->mask & (1u << i))) continue;
        for (uint64_t st = 0; st < d->stripes; st++) {
            drive_id_t id = {d->bb, d->key, d->upload, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            int rc = s->st[i].ops->del(s->st[i].ctx, &id);
            if (rc && rc != ERR_NOT_FOUND) {
                left |= 1u << i;
                break;
            }
        }
    }
    d->mask = left;
}

/* Under mu: wait until woken or ns pass. */
static void wait_ns(heal_q_t *q, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    pthread_cond_timedwait(&q->cv, &q->mu, &ts);
}

/* obj__heal_key's failed: a version the retry heals (NULL: every noncurrent one). */
static void note_failed(void *arg, const char *vid)
{
    heal_ent_t *f = arg;
    if (!vid)
        f->all = 1;
    else
        ent_add_vid(f, vid);
}

static void *heal_main(void *arg)
{
    heal_q_t *q = arg;
    obj_set_t *s = q->s;
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        heal_ent_t *e = q->head;
        heal_ent_t *r = q->nretry ? q->retry[0] : NULL;
        uint64_t now = mono_ns();
        if (!e && !r && !q->at_once.head && !q->delayed.head) {
            pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        if (obj__unhealthy(s) & ~obj__failed(s)) {
            /* A store is away: healing now would fail against it. Look again in a while. (A
             * drive failed for good is not waited for: healed around, refilled once back.) */
            wait_ns(q, 500000000ull);
            continue;
        }
        /* Both due: by turns (a block drop that keeps failing holds no tombstone back). */
        drop_fifo_t *f = &q->delayed;
        if (q->at_once.head &&
            !(q->turn && q->delayed.head && q->delayed.head->not_before_ns <= now))
            f = &q->at_once;
        q->turn = f == &q->at_once;
        drop_ent_t *d = f->head;
        int retry_due = r && r->not_before_ns <= now;
        if (d && d->not_before_ns > now && !e && !retry_due) {
            /* Until the drop, or a retry, falls due. */
            uint64_t until = d->not_before_ns;
            if (r && r->not_before_ns < until) until = r->not_before_ns;
            wait_ns(q, until - now);
            continue;
        }
        if (d && d->not_before_ns <= now) {
            fifo_pop(f);
            pthread_mutex_unlock(&q->mu);
            drop_run(s, d);
            pthread_mutex_lock(&q->mu);
            if (!d->mask || ++d->tries >= OBJ_HEAL_TRIES) {
                q->st.drops_pending--;
                q->st.drops_done += !d->mask;
                drop_free(d);
            } else { /* (a store went away again: later, behind the others; due already) */
                fifo_push(f, d);
                wait_ns(q, 500000000ull);
            }
            continue;
        }
        if (!e && !retry_due) {
            /* Only retries backing off: until the first is due, or a delayed drop first (it
             * waited up to a heal's 64 s backoff past its own time: a probe). */
            uint64_t until = r->not_before_ns;
            if (d && d->not_before_ns < until) until = d->not_before_ns;
            wait_ns(q, until - now);
            continue;
        }
        /* A fresh note and a due retry: by turns (neither kind holds the other back). */
        if (retry_due && (!e || q->retry_turn)) {
            e = retry_pop(q);
            q->retry_turn = 0;
        } else {
            q->head = e->next;
            if (!q->head) q->tail = NULL;
            q->retry_turn = retry_due;
        }
        *ent_slot(q, e->bucket, e->key) = e->hnext;
        pthread_mutex_unlock(&q->mu); /* still counted pending until its heal is done */

        obj_heal_report_t rep = {0};
        heal_ent_t failed = {0};
        int rc = obj__heal_key(s, e->bucket, e->key, e->vids, e->nvids, e->all, &rep, note_failed,
                               &failed);
        /*
         * Tried again: the current version (always) and the noted versions that failed, not
         * every one again. Past HEAL_VIDS_MAX every noncurrent version was walked, each
         * stripe read, on this thread and at each retry (a review).
         */
        for (int i = 0; i < e->nvids; i++)
            free(e->vids[i]);
        memcpy(e->vids, failed.vids, sizeof(e->vids));
        e->nvids = failed.nvids;
        e->all = failed.all;

        pthread_mutex_lock(&q->mu);
        q->st.pending--;
        q->st.heads_fixed += rep.heads_fixed;
        q->st.blocks_fixed += rep.blocks_fixed;
        if (rc == 0 && rep.failed == 0) {
            q->st.healed++;
            ent_free(e);
            continue;
        }
        heal_ent_t *again = *ent_slot(q, e->bucket, e->key);
        if (again && e->tries + 1 < OBJ_HEAL_TRIES) {
            /* noted again meanwhile: that one stays, and heals this one's versions too */
            if (e->all) again->all = 1;
            for (int i = 0; i < e->nvids; i++)
                ent_add_vid(again, e->vids[i]);
        }
        if (++e->tries >= OBJ_HEAL_TRIES || again) {
            /* Given up (the bucket heal finds it), or noted again meanwhile (that one stays). */
            if (e->tries >= OBJ_HEAL_TRIES) {
                q->st.dropped++;
                log_limited(LOG_LVL_WARN, "event=heal_gave_up key=%s tries=%d err=%s failed=%u",
                            e->key, e->tries, err_name(rc), rep.failed);
            }
            ent_free(e);
            continue;
        }
        q->st.retries++;
        int shift = e->tries < 6 ? e->tries : 6;
        e->not_before_ns = mono_ns() + (1000000000ull << shift); /* 2 s .. 64 s */
        retry_push(q, e);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int obj_set_heal_start(obj_set_t *s)
{
    /* Tests: a shorter delay before tombstones go (what a restart in it leaves). */
    const char *delay = getenv("WARMLAKE_HEAD_DROP_DELAY_S");
    if (delay && atof(delay) > 0) obj__head_drop_delay_ns = (uint64_t)(atof(delay) * 1e9);
    for (int j = 0; j < s->nsub; j++) {
        int rc = obj_set_heal_start(s->sub[j]);
        if (rc) return rc;
    }
    if (s->nsub) return 0;
    if (s->healq) return 0;
    heal_q_t *q = xcalloc(1, sizeof(*q));
    q->s = s;
    q->hash = xcalloc(HQ_BUCKETS, sizeof(*q->hash));
    pthread_mutex_init(&q->mu, NULL);
    clock_cond_init(&q->cv);
    int rc = pthread_create(&q->thread, NULL, heal_main, q);
    if (rc != 0) {
        log_error("event=heal_thread_failed err=%s", strerror(rc));
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        free(q->hash);
        free(q);
        return ERR_IO;
    }
    pthread_setname_np(q->thread, "wl-heal");
    s->healq = q;
    return 0;
}

void obj__heal_stop(obj_set_t *s)
{
    heal_q_t *q = s->healq;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    s->healq = NULL;
    for (heal_ent_t *e = q->head, *next; e; e = next) {
        next = e->next;
        ent_free(e);
    }
    for (size_t i = 0; i < q->nretry; i++)
        ent_free(q->retry[i]);
    free(q->retry);
    drop_fifo_t *fifos[2] = {&q->at_once, &q->delayed};
    for (int i = 0; i < 2; i++)
        for (drop_ent_t *d = fifos[i]->head, *next; d; d = next) {
            next = d->next;
            drop_free(d);
        }
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->hash);
    free(q);
}

void obj_heal_stats(obj_set_t *s, obj_heal_stats_t *st)
{
    heal_q_t *q = s->healq;
    memset(st, 0, sizeof(*st));
    if (s->nsub) {
        for (int j = 0; j < s->nsub; j++) {
            obj_heal_stats_t one;
            obj_heal_stats(s->sub[j], &one);
            st->queued += one.queued;
            st->healed += one.healed;
            st->retries += one.retries;
            st->dropped += one.dropped;
            st->pending += one.pending;
            st->heads_fixed += one.heads_fixed;
            st->blocks_fixed += one.blocks_fixed;
            st->drops_pending += one.drops_pending;
            st->drops_done += one.drops_done;
            st->drops_lost += one.drops_lost;
        }
        return;
    }
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    *st = q->st;
    pthread_mutex_unlock(&q->mu);
}
