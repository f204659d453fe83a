/*
 * obj_set.c: the erasure set (room of the object layer; map in obj_int.h):
 * its lifecycle, counters, buffers, and the job pool on which the set runs
 * shard I/O in parallel.
 *
 * The pool is common/pool.c's, one per set, with eight threads per store.
 * Shard writes do not hold its threads: obj__put_start hands each to its
 * store's put_async (a local drive's group commit calls back when durable),
 * so what a drive can batch is not capped by the pool's size; only a store
 * without put_async has its put wait on a pool thread (sized for that when
 * every write did: 4 KiB PUTs at 32 clients 1075 -> 1190-1415 ops/s going
 * from 2 to 8 per store). Its jobs never block outside the pool
 * (max_blocked 0).
 */
#include "server/obj_int.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/mem.h"
#include "proto/net.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    s->wq = k;
    s->block = block;
    s->inline_max = OBJ_INLINE_DEFAULT;
    memcpy(s->st, stores, sizeof(*stores) * (size_t)s->n);
    for (int i = 0; i < s->n; i++)
        if (s->st[i].ops->stat_async) s->remote |= 1u << i;
    pthread_mutex_init(&s->pin_mu, NULL);
    for (int i = 0; i < KEY_LOCKS; i++) {
        pthread_mutex_init(&s->key_locks[i], NULL);
        pthread_mutex_init(&s->mpu_locks[i], NULL);
    }
    s->bufs = bufpool_new(OBJ_BUF_KEEP);
    pool_cfg_t pc = {.name = "wl-pool", .threads = 8 * s->n, .max_blocked = 0};
    s->pool = pool_new(&pc, err); /* a thread that failed to start is logged there */
    if (!s->pool) {
        obj_set_free(s);
        return NULL;
    }
    return s;
}

void obj_set_free(obj_set_t *s)
{
    if (!s) return;
    if (s->nsub) {
        obj__multi_free(s);
        return;
    }
    obj__heal_stop(s); /* it uses the pool */
    pool_free(s->pool);
    pthread_mutex_destroy(&s->pin_mu);
    for (int i = 0; i < KEY_LOCKS; i++) {
        pthread_mutex_destroy(&s->key_locks[i]);
        pthread_mutex_destroy(&s->mpu_locks[i]);
    }
    if (!s->bufs_shared) bufpool_free(s->bufs);
    free(s);
}

void obj_set_inline_max(obj_set_t *s, uint32_t bytes)
{
    for (int j = 0; j < s->nsub; j++)
        obj_set_inline_max(s->sub[j], bytes);
    s->inline_max = bytes < OBJ_INLINE_LIMIT ? bytes : OBJ_INLINE_LIMIT;
}

void obj_set_hedge_ms(obj_set_t *s, uint32_t ms)
{
    for (int j = 0; j < s->nsub; j++)
        obj_set_hedge_ms(s->sub[j], ms);
    s->hedge_ms = ms;
}

void obj_set_features(obj_set_t *s, const _Atomic uint32_t *in_use)
{
    for (int j = 0; j < s->nsub; j++)
        obj_set_features(s->sub[j], in_use);
    s->features = in_use;
}

int obj__feature(const obj_set_t *s, uint32_t feature)
{
    return !s->features || (atomic_load(s->features) & feature) == feature;
}

uint64_t obj_set_hedged(const obj_set_t *s)
{
    uint64_t n = atomic_load(&((obj_set_t *)s)->hedged);
    for (int j = 0; j < s->nsub; j++)
        n += obj_set_hedged(s->sub[j]);
    return n;
}

uint64_t obj_set_hedged_writes(const obj_set_t *s)
{
    uint64_t n = atomic_load(&((obj_set_t *)s)->hedged_writes);
    for (int j = 0; j < s->nsub; j++)
        n += obj_set_hedged_writes(s->sub[j]);
    return n;
}

int obj_set_write_quorum(obj_set_t *s, int stores)
{
    if (stores < s->k || stores > s->n) return ERR_INVAL;
    for (int j = 0; j < s->nsub; j++)
        s->sub[j]->wq = stores;
    s->wq = stores;
    return 0;
}

bufpool_t *obj_set_buffers(obj_set_t *s)
{
    return s->nsub ? s->sub[0]->bufs : s->bufs;
}

int obj_set_width(const obj_set_t *s)
{
    return s->nsub ? s->n * s->nsub : s->n;
}

int obj_set_data_width(const obj_set_t *s)
{
    return s->k;
}

int obj_set_health(const obj_set_t *s, int i)
{
    if (s->nsub) {
        int j = i / s->n; /* (a removed pool's stores may be gone: nothing waits for them) */
        const obj_set_t *sub = obj__store_set(s, &i);
        return sub && !obj__sub_removed(s, j) ? obj_set_health(sub, i) : SHARD_UP;
    }
    if (i < 0 || i >= s->n || !s->st[i].ops->health) return SHARD_UP;
    return s->st[i].ops->health(s->st[i].ctx);
}

int obj_set_all_up(const obj_set_t *s)
{
    for (int i = 0; i < obj_set_width(s); i++)
        if (obj_set_health(s, i) != SHARD_UP) return 0;
    return 1;
}

int obj_set_none_away(const obj_set_t *s)
{
    for (int i = 0; i < obj_set_width(s); i++) {
        int h = obj_set_health(s, i);
        if (h != SHARD_UP && h != SHARD_FAILED) return 0;
    }
    return 1;
}

int obj_set_stats(obj_set_t *s, int i, drive_stats_t *st)
{
    if (s->nsub) {
        obj_set_t *sub = obj__store_set(s, &i);
        return sub ? obj_set_stats(sub, i, st) : ERR_NOT_FOUND;
    }
    if (i < 0 || i >= s->n || !s->st[i].ops->stats) return ERR_NOT_FOUND;
    s->st[i].ops->stats(s->st[i].ctx, st);
    return 0;
}

int obj_set_refilling(const obj_set_t *s, int i)
{
    if (s->nsub) {
        obj_set_t *sub = obj__store_set(s, &i);
        return sub ? obj_set_refilling(sub, i) : 0;
    }
    if (i < 0 || i >= s->n || !s->st[i].ops->refilling) return 0;
    return s->st[i].ops->refilling(s->st[i].ctx);
}

void obj__run_put(pool_job_t *j)
{
    obj__put_job_t *p = (obj__put_job_t *)j;
    if (p->hedge) shard_set_hedge_token(&p->tok);
    p->rc = p->st->ops->put(p->st->ctx, &p->id, p->data, p->len, p->meta, p->meta_len);
    if (p->hedge) shard_set_hedge_token(NULL);
    atomic_store(&p->fin, 1);
}

/* drive_done_fn of an asynchronous put: the job is its submitter's again after latch_done. */
static void put_done(void *arg, int rc)
{
    obj__put_job_t *p = arg;
    latch_t *l = p->latch;
    p->rc = rc;
    atomic_store(&p->fin, 1);
    latch_done(l);
}

void obj__put_start(obj_set_t *s, obj__put_job_t *jobs, int n, latch_t *l)
{
    pool_job_t *q[OBJ_MAX_SHARDS];
    int nq = 0, hedged = 0;
    for (int i = 0; i < n; i++) {
        obj__put_job_t *j = &jobs[i];
        /* A local drive's write cannot be given up on: not hedged, so that the waiter wakes
         * once, when all are done, not at each (a third of a 4 KiB PUT's futex calls). */
        if (j->st && j->hedge && shard_store_is_local(j->st)) j->hedge = 0;
        hedged |= j->st && j->hedge;
    }
    if (hedged) latch_watch(l); /* obj__put_wait watches it (latch_wait_below) */
    for (int i = 0; i < n; i++) {
        obj__put_job_t *j = &jobs[i];
        if (!j->st) continue;
        j->base.run = obj__run_put;
        j->rc = 0;
        atomic_init(&j->fin, 0);
        if (j->hedge) proto_cancel_init(&j->tok);
        if (!j->cond || !j->st->ops->put_head) {
            if (!j->st->ops->put_async) {
                q[nq++] = &j->base;
                continue;
            }
        }
        /* A store behind the network makes its call with the token (shard_hedge_token). */
        struct proto_cancel *prev = shard_hedge_token();
        if (j->hedge) shard_set_hedge_token(&j->tok);
        j->latch = l;
        latch_add(l, 1);
        int rc;
        if (j->cond && j->st->ops->put_head)
            rc = j->st->ops->put_head(j->st->ctx, &j->id, j->data, j->len, j->meta, j->meta_len,
                                      j->cond, put_done, j);
        else
            rc = j->st->ops->put_async(j->st->ctx, &j->id, j->data, j->len, j->meta, j->meta_len,
                                       put_done, j);
        shard_set_hedge_token(prev);
        if (rc) put_done(j, rc); /* refused at once (ERR_PRECOND): no callback will come */
    }
    if (nq) pool_submit(s->pool, q, nq, l);
}

void obj__put_all(obj_set_t *s, obj__put_job_t *jobs, int n)
{
    latch_t l;
    latch_init(&l);
    obj__put_start(s, jobs, n, &l);
    (void)obj__put_wait(s, jobs, n, &l, n + 1, 0); /* nothing given up on */
    latch_destroy(&l);
}

uint32_t obj__put_wait(obj_set_t *s, obj__put_job_t *jobs, int n, latch_t *l, int need,
                       uint32_t lost)
{
    uint32_t gave = 0;
    int hedged = 0;
    for (int i = 0; i < n; i++)
        hedged |= jobs[i].st && jobs[i].hedge;
    /*
     * The delay runs from the moment the quorum has the round, not from its start: a store
     * is given up on only when it lags the others by hedge_ms, so a machine that is merely
     * busy (every store slower alike) does not lose redundancy to the hedge. Then the puts
     * still out are given up on if each is a call in flight to another node: its bytes are
     * with the net (or on the wire) and a cancel gives them back at once. A local put, or a
     * pool put not yet sent, is waited for.
     */
    uint64_t at = 0;
    while (hedged && s->hedge_ms && need <= n) {
        int ok = 0, out = 0, remote = 0;
        for (int i = 0; i < n; i++) {
            obj__put_job_t *j = &jobs[i];
            if (!j->st) continue;
            if (atomic_load(&j->fin)) {
                ok += j->rc == 0 && !((lost >> (j->st - s->st)) & 1);
                continue;
            }
            out++;
            remote += j->hedge && proto_cancel_in_flight(&j->tok);
        }
        if (!out || ok + out < need) break; /* all ended, or the quorum is out of reach */
        uint64_t now = obj__now_ms(), wait = s->hedge_ms;
        if (ok >= need) {
            if (!at) at = now + s->hedge_ms;
            if (now >= at && remote == out) {
                for (int i = 0; i < n; i++)
                    if (jobs[i].st && jobs[i].hedge && !atomic_load(&jobs[i].fin))
                        proto_cancel(&jobs[i].tok); /* one that ended meanwhile ignores it */
                break;
            }
            if (now < at) wait = at - now;
        }
        (void)latch_wait_below(l, out, (uint32_t)wait); /* one more ended, or time to look */
    }
    latch_wait(l);
    for (int i = 0; i < n; i++) {
        obj__put_job_t *j = &jobs[i];
        if (!j->st || !j->hedge) continue;
        proto_cancel_destroy(&j->tok);
        if (j->rc != ERR_CANCELED) continue;
        unsigned st = (unsigned)(j->st - s->st);
        gave |= 1u << st;
        /* Slow for a while, as a read given up on marks it: the next writes skip it. */
        atomic_store(&s->slow_until[st], obj__now_ms() + OBJ_SLOW_MS);
        atomic_fetch_add(&s->hedged_writes, 1);
    }
    return gave;
}

int obj__busy(obj_set_t *s)
{
    /*
     * Saturated, not merely "a job queued": a job another GET queued a moment
     * ago and whose thread is still waking made a fifth of the 1 MiB GETs
     * at 8 clients read their four blocks one after another on a pool of 48
     * mostly idle threads (p90 latency 15-18 ms against 10-11 ms in parallel).
     */
    return pool_spare(s->pool) == 0;
}

uint32_t obj__unhealthy(const obj_set_t *s)
{
    uint32_t mask = 0;
    for (int i = 0; i < s->n; i++)
        if (s->st[i].ops->health && s->st[i].ops->health(s->st[i].ctx) != SHARD_UP) mask |= 1u << i;
    return mask;
}

uint32_t obj__down(const obj_set_t *s)
{
    uint32_t mask = 0;
    for (int i = 0; i < s->n; i++)
        if (s->st[i].ops->health && s->st[i].ops->health(s->st[i].ctx) >= SHARD_DOWN)
            mask |= 1u << i;
    return mask;
}

uint32_t obj__failed(const obj_set_t *s)
{
    uint32_t mask = 0;
    for (int i = 0; i < s->n; i++)
        if (s->st[i].ops->health && s->st[i].ops->health(s->st[i].ctx) == SHARD_FAILED)
            mask |= 1u << i;
    return mask;
}

uint32_t obj__refilling(const obj_set_t *s)
{
    uint32_t mask = 0;
    for (int i = 0; i < s->n; i++)
        if (s->st[i].ops->refilling && s->st[i].ops->refilling(s->st[i].ctx)) mask |= 1u << i;
    return mask;
}

int obj__stores_in(const obj_set_t *s, uint32_t mask, int stores[OBJ_MAX_SHARDS])
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        if ((mask >> i) & 1) stores[n++] = i;
    return n;
}

int obj__ask_order(const obj_set_t *s, uint32_t from, uint32_t first, int order[OBJ_MAX_SHARDS])
{
    /* Slow ones last too, and drives not yet refilled (they may lack what is asked). */
    uint32_t sick = obj__unhealthy(s) | obj__slow(s) | obj__refilling(s);
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < s->n; j++) {
            int i = (int)((first + (uint32_t)j) % (uint32_t)s->n);
            if (((from >> i) & 1) && (int)((sick >> i) & 1) == pass) order[n++] = i;
        }
    return n;
}

void obj__run_all(obj_set_t *s, pool_job_t **jobs, int n)
{
    latch_t l;
    latch_init(&l);
    pool_submit(s->pool, jobs, n, &l);
    latch_wait(&l);
    latch_destroy(&l);
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

/* fn(ctx, i) for i in [0, n) at once (n <= OBJ_MAX_SHARDS): the block reads of a stripe, the
 * deletes of a dropped version's blocks. */
void obj__parallel(void *arg, unsigned n, void (*fn)(void *ctx, unsigned i), void *ctx)
{
    obj_set_t *s = arg;
    par_job_t jobs[OBJ_MAX_SHARDS];
    pool_job_t *q[OBJ_MAX_SHARDS];
    if (obj__busy(s)) {
        /* The drives are busy with other streams: more depth would only lengthen queues. */
        for (unsigned i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    /*
     * The caller reads the first block itself while pool threads read the
     * others: a thread fewer to wake, and the caller, which would only wait,
     * often finds the others done and does not sleep at all (context switches
     * per 1 MiB GET at 8 clients 13.6 -> 11.9).
     */
    latch_t l;
    latch_init(&l);
    for (unsigned i = 1; i < n; i++) {
        jobs[i] = (par_job_t){{.run = run_par}, fn, ctx, i};
        q[i - 1] = &jobs[i].base;
    }
    if (n > 1) pool_submit(s->pool, q, (int)n - 1, &l);
    if (n) fn(ctx, 0);
    latch_wait(&l);
    latch_destroy(&l);
}

/* ---- hedged reads ---- */

uint64_t obj__now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

void obj__mark_slow(obj_set_t *s, unsigned i)
{
    if (i >= OBJ_MAX_SHARDS) return;
    atomic_store(&s->slow_until[i], obj__now_ms() + OBJ_SLOW_MS);
    atomic_fetch_add(&s->hedged, 1);
}

uint32_t obj__slow(const obj_set_t *s)
{
    uint32_t mask = 0;
    uint64_t now = 0;
    for (int i = 0; i < s->n; i++) {
        uint64_t until = atomic_load(&((obj_set_t *)s)->slow_until[i]);
        if (!until) continue;
        if (!now) now = obj__now_ms();
        if (until > now) mask |= 1u << i;
    }
    return mask;
}

typedef struct hedge hedge_t;
typedef struct {
    pool_job_t base;
    hedge_t *h;
    unsigned i;
    proto_cancel_t tok;
} hedge_job_t;

struct hedge {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a fetch ended */
    unsigned ended, ok;
    uint32_t done; /* fetches ended, as a mask */
    int (*fn)(void *ctx, unsigned i);
    void *ctx;
    hedge_job_t job[OBJ_MAX_SHARDS];
};

static void run_hedge(pool_job_t *j)
{
    hedge_job_t *hj = (hedge_job_t *)j;
    hedge_t *h = hj->h;
    shard_set_hedge_token(&hj->tok);
    int rc = h->fn(h->ctx, hj->i);
    shard_set_hedge_token(NULL);
    pthread_mutex_lock(&h->mu);
    h->done |= 1u << hj->i;
    h->ended++;
    h->ok += rc == 0;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/*
 * The block reads of a whole stripe, hedged. The data blocks are read as by
 * obj__parallel; those still out after hedge_ms whose read is a call to
 * another node in flight (a local read cannot be given up on, so waiting for
 * parity beside it would only add reads) get as many parity reads beside
 * them; once k blocks are in, the reads still out are given up on (their
 * calls end with ERR_CANCELED, having written nothing) and waited for, which
 * is at once. The store of a read given up on is marked slow by the reader.
 */
void obj__hedged(void *arg, unsigned n, unsigned spare, unsigned need,
                 int (*fn)(void *ctx, unsigned i), void *ctx)
{
    obj__hedged_run(arg, n, spare, need, fn, ctx, 0);
}

void obj__hedged_run(obj_set_t *s, unsigned n, unsigned spare, unsigned need,
                     int (*fn)(void *ctx, unsigned i), void *ctx, int alone)
{
    hedge_t h;
    pool_job_t *q[OBJ_MAX_SHARDS];
    if (n + spare > OBJ_MAX_SHARDS) spare = OBJ_MAX_SHARDS - n;
    pthread_mutex_init(&h.mu, NULL);
    clock_cond_init(&h.cv);
    h.ended = h.ok = 0;
    h.done = 0;
    h.fn = fn;
    h.ctx = ctx;
    for (unsigned i = 0; i < n + spare; i++) {
        h.job[i] = (hedge_job_t){.base = {.run = run_hedge}, .h = &h, .i = i};
        proto_cancel_init(&h.job[i].tok);
        q[i] = &h.job[i].base;
    }
    latch_t l;
    latch_init(&l);
    unsigned started = n;
    if (obj__busy(s)) {
        /* No spare thread: one after another, as obj__parallel does; nothing to hedge with. */
        for (unsigned i = 0; i < n; i++)
            run_hedge(q[i]);
    } else {
        pool_submit(s->pool, q, (int)n, &l);
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)s->hedge_ms * 1000000ull;
        dl.tv_sec += (time_t)(ns / 1000000000ull);
        dl.tv_nsec = (long)(ns % 1000000000ull);
        pthread_mutex_lock(&h.mu);
        while (h.ended < n && pthread_cond_timedwait(&h.cv, &h.mu, &dl) != ETIMEDOUT) {
        }
        /*
         * Past the delay. Slow: fetches 0..n-1 still out as calls to other nodes (spares are
         * not hedged in turn). Enough spares run to reach `need` without the slow ones, given
         * what else may still come; one that fails is replaced while spares are left. Once
         * `need` are in, the slow ones are given up on. With no slow one, this only waits.
         */
        int give_up = 0;
        while (h.ok < need && h.ended < started) {
            unsigned slow = 0;
            for (unsigned i = 0; i < n; i++)
                if (!((h.done >> i) & 1) && proto_cancel_in_flight(&h.job[i].tok)) slow++;
            if (slow && alone && !spare) {
                give_up = 1; /* nothing to stand in here: the caller asks elsewhere */
                break;
            }
            unsigned other = started - h.ended - slow; /* may still come */
            unsigned short_by = need > h.ok + other ? need - h.ok - other : 0;
            unsigned left = n + spare - started, add = short_by < left ? short_by : left;
            if (slow && add) {
                unsigned from = started;
                started += add; /* before they can end: ended never passes it */
                pthread_mutex_unlock(&h.mu);
                pool_submit(s->pool, q + from, (int)add, &l);
                pthread_mutex_lock(&h.mu);
                continue;
            }
            pthread_cond_wait(&h.cv, &h.mu);
        }
        if (h.ok >= need || give_up)
            for (unsigned i = 0; i < started; i++) /* a call that ended ignores it */
                if (!((h.done >> i) & 1)) proto_cancel(&h.job[i].tok);
        pthread_mutex_unlock(&h.mu);
    }
    latch_wait(&l);
    latch_destroy(&l);
    for (unsigned i = 0; i < n + spare; i++)
        proto_cancel_destroy(&h.job[i].tok);
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
}
