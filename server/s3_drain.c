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
 * pass waits while a store of the node's sets is not up. The pool is
 * drained, as far as this node's sets go, when a whole pass found no
 * version and no upload in progress in them (uploads finish or expire in
 * the pool that took them; their object moves with the next pass).
 * Progress is in /_warmlake/stats ("drain") and `wl-admin status`.
 */
#include "server/s3_int.h"

#include <pthread.h>
#include <time.h>

#define DRAIN_PAGE    256 /* keys moved between two walks of a set */
#define DRAIN_THREADS 4   /* keys of a page moved at once */
#define DRAIN_IDLE    5.0 /* seconds between looks for a draining pool */
#define DRAIN_RETRY   2.0 /* seconds before a pass that left keys behind runs again */

struct s3_drain {
    const s3_cfg_t *cfg;
    double rate; /* object bytes a second, at most */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, kick;
    s3_drain_stats_t st;
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Under mu: wait up to s seconds, or until stopped (or kicked, when heed_kick). Returns stop. */
static int nap_for(s3_drain_t *d, double s, int heed_kick)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + s;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (!d->stop && !(heed_kick && d->kick)) pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    return d->stop;
}

static int nap(s3_drain_t *d, double s)
{
    return nap_for(d, s, 0);
}

static int stopping(s3_drain_t *d)
{
    return __atomic_load_n(&d->stop, __ATOMIC_ACQUIRE);
}

static int set_up(const obj_set_t *set)
{
    for (int i = 0; i < obj_set_width(set); i++)
        if (obj_set_health(set, i) != SHARD_UP) return 0;
    return 1;
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
    double t0;
    uint64_t bytes;
} pacer_t;

/* After each key: count it, keep under the rate. 1: stop. */
static int pace(pacer_t *p, const obj_move_report_t *r, int rc)
{
    s3_drain_t *d = p->d;
    pthread_mutex_lock(&d->mu);
    p->bytes += r->bytes;
    d->st.bytes += r->bytes;
    d->st.versions += r->versions;
    if (rc == 0 && r->versions) d->st.keys++;
    if (rc == ERR_BUSY || rc == ERR_THROTTLED)
        d->st.busy++;
    else if (rc)
        d->st.failed++;
    double el = mono_s() - p->t0;
    d->st.mb_s = el > 0 ? (double)p->bytes / el / 1e6 : 0;
    for (double ahead = (double)p->bytes / d->rate - (mono_s() - p->t0); ahead > 0 && !d->stop;
         ahead = (double)p->bytes / d->rate - (mono_s() - p->t0))
        nap(d, ahead < 1 ? ahead : 1);
    /* The budget said no: give the drives a moment before the next key. */
    if (rc == ERR_THROTTLED && !d->stop) nap(d, 1);
    int stop = d->stop;
    pthread_mutex_unlock(&d->mu);
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
        if (mr == ERR_BUSY)
            mr = obj_move_key(m->d->cfg->set, m->pool, m->iname, m->pg->keys[i], &r);
        int stop = pace(m->p, &r, mr);
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

static int on_bucket(void *arg, const char *key, const obj_info_t *info, int latest)
{
    char ***names = arg;
    if (!latest || info->deleted) return 0;
    size_t n = 0;
    while ((*names)[n])
        n++;
    *names = xrealloc(*names, (n + 2) * sizeof(char *));
    (*names)[n] = xstrdup(key);
    (*names)[n + 1] = NULL;
    return 0;
}

/* A pass over every draining pool's sets this node moves. 1: it had any. */
static int drain_pass(s3_drain_t *d)
{
    const s3_cfg_t *cfg = d->cfg;
    int np = obj_set_pools(cfg->set), any = 0;
    uint64_t left = 0, uploads = 0, found = 0;
    pacer_t p = {.d = d, .t0 = mono_s()};
    char **names = NULL;
    for (int pool = 0; pool < np && !stopping(d); pool++) {
        int first, draining, ns = obj_set_pool_sets(cfg->set, pool, &first, &draining);
        if (ns < 0 || !draining) continue;
        for (int j = first; j < first + ns && !stopping(d); j++) {
            obj_set_t *set = obj_set_sub(cfg->set, j);
            if (!set || !obj_set_mover_here(cfg->set, j)) continue;
            if (!any) {
                any = 1;
                names = xcalloc(1, sizeof(char *));
                int rc =
                    obj_list_versions_all(cfg->set, BUCKETS, NULL, NULL, NULL, on_bucket, &names);
                if (rc < 0) {
                    log_warn("event=drain_buckets_failed err=%s", err_name(rc));
                    left++;
                }
                pthread_mutex_lock(&d->mu);
                d->st.running = 1;
                d->st.mb_s = 0;
                pthread_mutex_unlock(&d->mu);
            }
            if (!set_up(set)) {
                /* A move would only fail against the store away: later. */
                pthread_mutex_lock(&d->mu);
                d->st.waiting = 1;
                pthread_mutex_unlock(&d->mu);
                left++;
                continue;
            }
            for (int b = 0; names[b] && !stopping(d); b++) {
                ctx_t x = {0};
                x.cfg = cfg;
                snprintf(x.id, sizeof(x.id), "drain");
                obj_info_t bi;
                if (!s3_bucket_exists(&x, names[b], &bi)) continue;
                char iname[INAME_MAX];
                s3_bucket_iname(names[b], &bi, iname);
                drain_set_bucket(d, pool, j, iname, &p, &found, &left, &uploads);
            }
            /* The buckets' own records and configurations, once their objects went. */
            static const char *const internal[] = {CORS_OBJECTS, LC_OBJECTS, BUCKETS};
            for (int b = 0; b < 3 && !stopping(d); b++)
                drain_set_bucket(d, pool, j, internal[b], &p, &found, &left, &uploads);
        }
    }
    if (names)
        for (int b = 0; names[b]; b++)
            free(names[b]);
    free(names);
    pthread_mutex_lock(&d->mu);
    d->st.draining = any;
    if (any && !d->stop) {
        d->st.passes++;
        d->st.left = left;
        d->st.uploads_left = uploads;
        d->st.last_pass_s = mono_s() - p.t0;
        /* Drained: a whole pass found nothing to move (the pass that moved the last keys
         * found them, and a write may have reached the pool since). */
        d->st.done = found == 0 && left == 0 && uploads == 0;
    }
    d->st.running = d->st.waiting = 0;
    pthread_mutex_unlock(&d->mu);
    if (any)
        log_info("event=drain_pass keys_left=%llu uploads_left=%llu bytes=%llu seconds=%.1f",
                 (unsigned long long)left, (unsigned long long)uploads, (unsigned long long)p.bytes,
                 mono_s() - p.t0);
    return any;
}

static void *drain_main(void *arg)
{
    s3_drain_t *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        d->kick = 0;
        pthread_mutex_unlock(&d->mu);
        int any = drain_pass(d);
        pthread_mutex_lock(&d->mu);
        /* A pass that left keys (busy, throttled) runs again soon; a drained pool is
         * looked at again in case a late write reached it. */
        nap_for(d, any && !d->st.done ? DRAIN_RETRY : DRAIN_IDLE, 1);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

s3_drain_t *s3_drain_start(const s3_cfg_t *cfg, uint64_t rate)
{
    s3_drain_t *d = xcalloc(1, sizeof(*d));
    d->cfg = cfg;
    d->rate = rate ? (double)rate : 64e6;
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&d->thread, NULL, drain_main, d) != 0) {
        log_error("event=drain_not_started");
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
        free(d);
        return NULL;
    }
    pthread_setname_np(d->thread, "wl-drain");
    return d;
}

void s3_drain_kick(s3_drain_t *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->kick = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

void s3_drain_stop(s3_drain_t *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    __atomic_store_n(&d->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

void s3_drain_stats(s3_drain_t *d, s3_drain_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    *st = d->st;
    pthread_mutex_unlock(&d->mu);
}
