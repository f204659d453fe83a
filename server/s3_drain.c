/*
 * s3_drain: the mover of draining pools (the drain room of the S3 layer: it
 * knows the buckets, the object layer knows how to move one key,
 * obj_move_key).
 *
 * A thread looks every few seconds (at once when kicked: a map epoch that
 * changed a pool's state) for draining pools. Of each such pool's sets it
 * takes those this node moves (obj_set_mover_here: the first of the set's
 * stores that is up is one of this node's drives, so one node of the set
 * does the work whichever are up; two that disagree for a moment both move,
 * which a move tolerates), and walks every bucket's versions in the set, a
 * page of keys at a time, moving each key. A key that was being written
 * (ERR_BUSY) or failed is left for the next pass. Moved bytes are paced:
 * at most --drain-rate a second, and the drives' endurance budgets meter
 * every write anyway (a throttled move waits and tries again later). The
 * buckets' records and configurations (internal buckets) move the same way,
 * after the objects. A
 * set waits while one of its stores is not up, and a key while a store of
 * the set it goes to is not: nothing is copied that could not be made whole
 * (obj_move_key). Passes that move nothing come less often (2 s doubling to
 * 30 s), and say in one line how many keys failed. The pool is
 * drained, as far as this node's sets go, when a whole pass found no
 * version and no upload in progress in them (uploads finish or expire in
 * the pool that took them; their object moves with the next pass).
 * Progress is in /_warmlake/stats ("drain") and `wl-admin status`.
 */
#include "server/bgwork.h"
#include "server/s3_int.h"

#define DRAIN_PAGE    256  /* keys moved between two walks of a set */
#define DRAIN_THREADS 4    /* keys of a page moved at once */
#define DRAIN_IDLE    5.0  /* seconds between looks for a draining pool */
#define DRAIN_RETRY   2.0  /* seconds before a pass that left keys behind runs again */
#define DRAIN_WAIT    30.0 /* at most, after passes that moved nothing (doubling from RETRY) */

struct s3_drain {
    const s3_cfg_t *cfg;
    double rate; /* object bytes a second, at most */
    bgwork_t w;
    s3_drain_stats_t st; /* under w's lock */
    double retry;        /* seconds to the next pass after one that left keys */
};

static int stopping(s3_drain_t *d)
{
    return bgwork_stopping(&d->w);
}

/* Distinct keys of a listing page (a key's versions come together). */
typedef struct {
    char *keys[DRAIN_PAGE];
    int n, full;
} page_t;

static int on_version(void *arg, const char *key, const obj_info_t *info, int latest)
{
    page_t *p = arg;
    (void)info;
    (void)latest;
    if (p->n && strcmp(p->keys[p->n - 1], key) == 0) return 0;
    if (p->n == DRAIN_PAGE) {
        p->full = 1;
        return 1;
    }
    p->keys[p->n++] = xstrdup(key);
    return 0;
}

static int count_upload(void *arg, const char *key, const char *upload_id, const obj_info_t *info)
{
    (void)key;
    (void)upload_id;
    (void)info;
    (*(uint64_t *)arg)++;
    return 0;
}

typedef struct {
    s3_drain_t *d;
    bgwork_pace_t r;                /* under d's lock, as the rest */
    uint64_t moved, waited, failed; /* this pass's keys */
    char first_failed[256];         /* the first key a move failed for, and why */
    int first_err;
} pacer_t;

/*
 * After each key: count it, keep under the rate. 1: stop. A key whose move failed is said
 * once a pass, with how many did (the first of them by name), not once a key a pass: a
 * target store away for an hour would otherwise log every key of the pool every few seconds.
 */
static int pace(pacer_t *p, const char *key, const obj_move_report_t *r, int rc)
{
    s3_drain_t *d = p->d;
    bgwork_lock(&d->w);
    d->st.bytes += r->bytes;
    d->st.versions += r->versions;
    if (rc == 0 && r->versions) d->st.keys++;
    if (rc == 0) p->moved++;
    if (r->waiting)
        p->waited++;
    else if (rc == ERR_BUSY || rc == ERR_THROTTLED)
        d->st.busy++;
    else if (rc) {
        d->st.failed++;
        if (p->failed++ == 0) {
            snprintf(p->first_failed, sizeof(p->first_failed), "%s", key);
            p->first_err = rc;
        }
    }
    d->st.mb_s = bgwork_pace_count(&p->r, r->bytes);
    int stop = bgwork_pace_hold(&d->w, &p->r);
    /* The budget said no: give the drives a moment before the next key. */
    if (rc == ERR_THROTTLED && !stop) stop = bgwork_nap(&d->w, 1);
    bgwork_unlock(&d->w);
    return stop;
}

/* A page's keys moved by a few threads, each taking the next key. */
typedef struct {
    s3_drain_t *d;
    int pool;
    const char *iname;
    page_t *pg;
    pacer_t *p;
    pthread_mutex_t mu;
    int next, stop;
    uint64_t left;
} page_move_t;

static void *move_some(void *arg)
{
    page_move_t *m = arg;
    for (;;) {
        pthread_mutex_lock(&m->mu);
        int i = m->next < m->pg->n && !m->stop ? m->next++ : -1;
        pthread_mutex_unlock(&m->mu);
        if (i < 0) return NULL;
        obj_move_report_t r = {0};
        int mr = obj_move_key(m->d->cfg->set, m->pool, m->iname, m->pg->keys[i], &r);
        /* Once more at once: a write that refused the switch may have left what only a
         * fresh look moves (a version deleted by id leaves no version to list the key by). */
        if (mr == ERR_BUSY && !r.waiting)
            mr = obj_move_key(m->d->cfg->set, m->pool, m->iname, m->pg->keys[i], &r);
        int stop = pace(m->p, m->pg->keys[i], &r, mr);
        pthread_mutex_lock(&m->mu);
        m->left += mr != 0;
        m->stop |= stop;
        pthread_mutex_unlock(&m->mu);
    }
}

/*
 * One set's keys of one bucket, moved page by page. *left: keys that stayed.
 * Keys of a page move DRAIN_THREADS at a time: one key's move is a chain of
 * durable round trips (its stripes, its heads, the switch), so several in
 * flight keep the drives busier: bench/drain.sh, 1 GiB of 4 MiB objects,
 * alternating in one window on a quiet machine: four at once 145 and 128
 * MB/s of objects, one at a time 110 and 102.
 */
static void drain_set_bucket(s3_drain_t *d, int pool, int j, const char *iname, pacer_t *p,
                             uint64_t *found, uint64_t *left, uint64_t *uploads)
{
    obj_set_t *set = obj_set_sub(d->cfg->set, j);
    char *after = NULL;
    for (;;) {
        page_t pg = {0};
        int rc = obj_list_versions_all(set, iname, NULL, after, NULL, on_version, &pg);
        if (rc < 0) {
            log_warn("event=drain_list_failed set=%d err=%s", j, err_name(rc));
            (*left)++;
        }
        *found += (uint64_t)pg.n;
        page_move_t m = {.d = d, .pool = pool, .iname = iname, .pg = &pg, .p = p};
        pthread_mutex_init(&m.mu, NULL);
        pthread_t th[DRAIN_THREADS];
        int nt = 0;
        for (; nt < DRAIN_THREADS && nt < pg.n; nt++)
            if (pthread_create(&th[nt], NULL, move_some, &m) != 0) break;
        if (nt == 0) (void)move_some(&m); /* no thread to be had: this one moves them */
        for (int t = 0; t < nt; t++)
            pthread_join(th[t], NULL);
        pthread_mutex_destroy(&m.mu);
        *left += m.left + (uint64_t)(pg.n - m.next); /* those a stop left unmoved */
        for (int i = 0; i < pg.n - 1; i++)
            free(pg.keys[i]);
        free(after);
        after = pg.n ? pg.keys[pg.n - 1] : NULL;
        if (m.stop || rc < 0 || !pg.full) break;
    }
    free(after);
    uint64_t up = 0;
    if (obj_mpu_list_uploads(set, iname, count_upload, &up) >= 0) *uploads += up;
}

/* A pass over every draining pool's sets this node moves. 1: it had any. */
static int drain_pass(s3_drain_t *d)
{
    const s3_cfg_t *cfg = d->cfg;
    int np = obj_set_pools(cfg->set), any = 0;
    uint64_t left = 0, uploads = 0, found = 0;
    pacer_t p = {.d = d, .r = {.t0 = bgwork_now(), .rate = d->rate}};
    char **names = NULL;
    for (int pool = 0; pool < np && !stopping(d); pool++) {
        int first, draining, ns = obj_set_pool_sets(cfg->set, pool, &first, &draining);
        if (ns < 0 || draining != OBJ_POOL_DRAINING) continue;
        for (int j = first; j < first + ns && !stopping(d); j++) {
            obj_set_t *set = obj_set_sub(cfg->set, j);
            if (!set || !obj_set_mover_here(cfg->set, j)) continue;
            if (!any) {
                any = 1;
                int rc;
                names = bgwork_bucket_names(cfg->set, 1, &rc);
                if (rc < 0) {
                    log_warn("event=drain_buckets_failed err=%s", err_name(rc));
                    left++;
                }
                bgwork_lock(&d->w);
                d->st.running = 1;
                d->st.mb_s = 0;
                bgwork_unlock(&d->w);
            }
            if (!obj_set_all_up(set)) {
                /* A move would only fail against the store away: later. */
                p.waited++;
                left++;
                continue;
            }
            for (int b = 0; names[b] && !stopping(d); b++) {
                char iname[INAME_MAX];
                if (!s3_bucket_walked(cfg, "drain", names[b], iname)) continue;
                drain_set_bucket(d, pool, j, iname, &p, &found, &left, &uploads);
            }
            /* The buckets' own records and configurations, once their objects went. */
            static const char *const internal[] = {CORS_OBJECTS, LC_OBJECTS, BUCKETS};
            for (int b = 0; b < 3 && !stopping(d); b++)
                drain_set_bucket(d, pool, j, internal[b], &p, &found, &left, &uploads);
        }
    }
    bgwork_names_free(names);
    bgwork_lock(&d->w);
    d->st.draining = any;
    if (any && !stopping(d)) {
        d->st.passes++;
        d->st.left = left;
        d->st.uploads_left = uploads;
        d->st.last_pass_s = bgwork_now() - p.r.t0;
        /* Drained: a whole pass found nothing to move (the pass that moved the last keys
         * found them, and a write may have reached the pool since). */
        d->st.done = found == 0 && left == 0 && uploads == 0;
        d->st.waiting = p.waited > 0;
        /* Passes that move nothing (a store away, a failing drive) come less often. */
        d->retry = p.moved ? DRAIN_RETRY : d->retry * 2 > DRAIN_WAIT ? DRAIN_WAIT : d->retry * 2;
    }
    d->st.running = 0;
    bgwork_unlock(&d->w);
    if (any)
        log_info("event=drain_pass keys_left=%llu uploads_left=%llu bytes=%llu seconds=%.1f "
                 "moved=%llu waiting=%llu failed=%llu",
                 (unsigned long long)left, (unsigned long long)uploads,
                 (unsigned long long)p.r.bytes, bgwork_now() - p.r.t0, (unsigned long long)p.moved,
                 (unsigned long long)p.waited, (unsigned long long)p.failed);
    if (p.failed)
        log_warn("event=drain_keys_failed count=%llu first_key=%s err=%s: they stay for the "
                 "next pass",
                 (unsigned long long)p.failed, p.first_failed, err_name(p.first_err));
    return any;
}

/* A pass; the next one is due soon when this one left keys (busy, throttled), else later:
 * a drained pool is looked at again in case a late write reached it. */
static double drain_step(void *arg)
{
    s3_drain_t *d = arg;
    int any = drain_pass(d);
    bgwork_lock(&d->w);
    int again = any && !d->st.done;
    double retry = d->retry;
    bgwork_unlock(&d->w);
    return bgwork_now() + (again ? retry : DRAIN_IDLE);
}

s3_drain_t *s3_drain_start(const s3_cfg_t *cfg, uint64_t rate)
{
    s3_drain_t *d = xcalloc(1, sizeof(*d));
    d->cfg = cfg;
    d->rate = rate ? (double)rate : 64e6;
    d->retry = DRAIN_RETRY;
    if (bgwork_start(&d->w, "wl-drain", 0, drain_step, d) != 0) {
        log_error("event=drain_not_started");
        free(d);
        return NULL;
    }
    return d;
}

void s3_drain_kick(s3_drain_t *d)
{
    if (d) bgwork_kick(&d->w);
}

void s3_drain_stop(s3_drain_t *d)
{
    if (!d) return;
    bgwork_stop(&d->w);
    free(d);
}

void s3_drain_stats(s3_drain_t *d, s3_drain_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    if (!d) return;
    bgwork_lock(&d->w);
    *st = d->st;
    bgwork_unlock(&d->w);
}
