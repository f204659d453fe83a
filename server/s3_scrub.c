/*
 * s3_scrub: the heal scanner, and healing a bucket (the heal room of the S3
 * layer: it knows the buckets, the object layer knows how to heal one key).
 *
 * Healing a bucket heals its record, then every version of every object
 * (the current ones and the noncurrent ones a versioned bucket keeps), a
 * listing page at a time (obj_heal runs between pages, never inside a
 * store's walk; a page's objects four at a time): heads put back where a
 * store lacks them, every stripe verified and the blocks missing or failing
 * their crc rebuilt from the others; a multipart object's manifest and
 * parts with it. Then each upload in progress: its record and its parts.
 * The heal call (POST /_warmlake/heal) runs it once, for one bucket.
 *
 * The scanner is a thread that runs a pass over every bucket each interval
 * (--scrub-interval; 0: never). It is paced: the object bytes it verifies
 * per second stay under --scrub-rate, so that a pass reads the drives at a
 * bounded share of their bandwidth, and it waits while any store is away (a
 * heal then only fails against it; the heal queue covers recent writes, the
 * scanner covers rot and what a restart or a full queue lost). A drive
 * failed for good (SHARD_FAILED) is healed around instead, and refilled
 * once it is back (node_drives.c). Its
 * progress (objects and bytes this pass, MB/s, an ETA from the drives' live
 * bytes) is in /_warmlake/stats.
 *
 * While a store is marked refilling (a replaced drive), a bucket's heals go
 * through a refill pipeline (obj_refill_new): the blocks they rebuild are
 * written without a heal waiting, heads once the blocks are durable, and
 * the walk drains it before it reports. A pass walks the sets of the
 * refilling stores first (scope_t) and reports that part to scrub_done, so
 * the mark goes once everything of those sets was written, before the
 * other sets are walked.
 */
#include "server/bgwork.h"
#include "server/s3_int.h"

/* Versions of one listing page (with their sizes), healed between pages. */
typedef struct {
    char **keys;
    char (*vids)[20]; /* "" for the current version (healed as such) */
    uint64_t *sizes;
    int n, cap;
    char *last_key;    /* the listing's last entry (a delete marker too) ... */
    char last_vid[20]; /* ... and its version ("null": the null one) */
} page_keys_t;

static int collect_version(void *arg, const char *key, const obj_info_t *info, int latest)
{
    page_keys_t *p = arg;
    free(p->last_key);
    p->last_key = xstrdup(key);
    snprintf(p->last_vid, sizeof(p->last_vid), "%s", info->vid[0] ? info->vid : "null");
    /* (A delete marker: a head alone, put where a store lacks it; nothing to verify.) */
    p->sizes[p->n] = info->marker ? 0 : info->size;
    snprintf(p->vids[p->n], sizeof(p->vids[p->n]), "%s",
             latest         ? ""
             : info->vid[0] ? info->vid
                            : "null");
    p->keys[p->n++] = xstrdup(key);
    return p->n == p->cap; /* 1: the page is full */
}

#define HEAL_THREADS   4  /* objects of a page healed at once */
#define REFILL_THREADS 12 /* ... while a replaced drive is being refilled */

/*
 * A replaced drive takes one block (or copy) per object. When each was a
 * durable write a heal waited for, more objects at once gave its group
 * commit more to batch (a 2 GiB refill of one of six drives, bench/heal.sh:
 * 4 threads 66-68 MB/s written to it, 12 threads 79-83). With the refill
 * pipeline no heal waits for a write: the threads are how many objects'
 * stripes are read and verified at once. Memory: a stripe's blocks and the
 * decoder's per thread, and the window of blocks in flight.
 */

/* A set mask (bit j: set j) covers every set there can be. */
_Static_assert(OBJ_MAX_SETS <= 64, "a set mask is 64 bits");
#define ALL_SETS UINT64_MAX /* a scope's sets: every one, walked as one merged listing */

/* Set j of a pool drained and taken out (its nodes may be gone): nothing walks it. */
static int set_removed(const s3_cfg_t *cfg, int j)
{
    for (int p = 0; p < obj_set_pools(cfg->set); p++) {
        int first, state, n = obj_set_pool_sets(cfg->set, p, &first, &state);
        if (j >= first && j < first + n) return state == OBJ_POOL_REMOVED;
    }
    return 0;
}

/* The sets (bit j: set j) that hold a store marked refilling (a replaced drive), but those of
 * a pool taken out: a mark there, with its node gone, would never clear. */
static uint64_t refilling_sets(const s3_cfg_t *cfg)
{
    int per = obj_set_width(obj_set_sub(cfg->set, 0)), n = obj_set_width(cfg->set);
    uint64_t sets = 0;
    for (int i = 0; i < n && i / per < 64; i++)
        if (obj_set_refilling(cfg->set, i) && !set_removed(cfg, i / per)) sets |= 1ull << (i / per);
    return sets;
}

/* Every set that a walk goes through. */
static uint64_t live_sets(const s3_cfg_t *cfg)
{
    uint64_t sets = 0;
    for (int j = 0; j < obj_set_count(cfg->set) && j < 64; j++)
        if (!set_removed(cfg, j)) sets |= 1ull << j;
    return sets;
}

/*
 * What a walk of a bucket covers. A pass that refills a replaced drive walks
 * the sets that drive is in first, through the refill pipeline, and the
 * others after: the drive is whole (and unmarked) once its own sets are
 * walked, not after every object of the cluster was read too (a 4-node
 * cluster's refill verified twice the objects it had to, half of them in
 * the set the drive is not part of: bench/cluster_netns.sh).
 */
typedef struct {
    uint64_t sets; /* bit j: set j's versions and tombstones; ALL_SETS: all of them */
    int refill;    /* heals go through a refill pipeline (obj_refill_new) */
    int uploads;   /* the uploads in progress too (every set's: they are few) */
} scope_t;

/*
 * While a drive is refilled, the blocks rebuilt go to it without a heal
 * waiting for them (obj_refill.c), up to REFILL_WINDOW bytes in flight: the
 * drive's group commit then writes many of them at once.
 */
#define REFILL_WINDOW (64u << 20)

/* One page's keys healed by a few threads: each takes the next key. */
typedef struct {
    const s3_cfg_t *cfg;
    const char *iname;
    obj_refill_t *rf; /* NULL: each heal waits for its writes */
    page_keys_t *pg;
    int (*pace)(void *arg, uint64_t bytes);
    void *pace_arg;
    pthread_mutex_t mu;
    int next, rc, stopped;
    obj_heal_report_t rep;
} page_heal_t;

static void *heal_some(void *arg)
{
    page_heal_t *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        int i = h->next < h->pg->n && !h->rc && !h->stopped ? h->next++ : -1;
        pthread_mutex_unlock(&h->mu);
        if (i < 0) return NULL;
        obj_heal_report_t rep = {0};
        const char *vid = h->pg->vids[i];
        int hr = obj_heal_via(h->rf, h->cfg->set, h->iname, h->pg->keys[i], vid, &rep);
        int stop = !hr && h->pace ? h->pace(h->pace_arg, h->pg->sizes[i]) : 0;
        pthread_mutex_lock(&h->mu);
        h->rep.objects += rep.objects;
        h->rep.heads_fixed += rep.heads_fixed;
        h->rep.blocks_checked += rep.blocks_checked;
        h->rep.blocks_fixed += rep.blocks_fixed;
        h->rep.failed += rep.failed + (hr == ERR_UNRECOVERABLE); /* past repair: go on */
        if (hr && hr != ERR_UNRECOVERABLE && !h->rc) h->rc = hr;
        h->stopped |= stop;
        pthread_mutex_unlock(&h->mu);
    }
}

static void add_report(obj_heal_report_t *to, const obj_heal_report_t *r)
{
    to->objects += r->objects;
    to->heads_fixed += r->heads_fixed;
    to->blocks_checked += r->blocks_checked;
    to->blocks_fixed += r->blocks_fixed;
    to->failed += r->failed;
}

static int heal_uploads(const s3_cfg_t *cfg, const char *iname, obj_heal_report_t *rep,
                        int (*pace)(void *arg, uint64_t bytes), void *arg)
{
    s3_uploads_t u = {0};
    int rc = obj_mpu_list_uploads_all(cfg->set, iname, s3_uploads_collect, &u), stop = 0;
    if (rc > 0) rc = 0;
    for (int i = 0; i < u.n && !rc && !stop; i++) {
        obj_heal_report_t r = {0};
        int hr = obj_heal_upload(cfg->set, iname, u.keys[i], u.ids[i], &r);
        add_report(rep, &r);
        if (hr == ERR_UNRECOVERABLE)
            rep->failed++;
        else if (hr && hr != ERR_NOT_FOUND) /* (completed or aborted meanwhile) */
            rc = hr;
        if (pace) stop = pace(arg, 0);
    }
    s3_uploads_free(&u);
    return rc;
}

/* Retired positions of a set's walk (obj_list_retired), a page of them healed between
 * pages, never inside the walk. */
typedef struct {
    char **keys;
    char (*pos)[OBJ_VID_LEN + 1];
    int n, cap;
} retired_page_t;

static int collect_retired(void *arg, const char *key, const char *pos, const obj_info_t *tomb)
{
    retired_page_t *p = arg;
    (void)tomb;
    p->keys[p->n] = xstrdup(key);
    snprintf(p->pos[p->n], sizeof(p->pos[p->n]), "%s", pos);
    return ++p->n == p->cap;
}

/*
 * The positions whose newest head is a tombstone (a delete's): listings pass them by, so the
 * walk above never comes to them, yet a store that missed the delete (away, failed, or
 * refilled in place) may still hold the version there. Each set walked on its own (a
 * tombstone is in the set the delete went to). Most tombstones go a minute after their
 * delete: the walk finds few, and heals only those.
 */
static int heal_retired(const s3_cfg_t *cfg, const char *iname, uint64_t sets,
                        obj_heal_report_t *rep, int (*pace)(void *arg, uint64_t bytes), void *arg)
{
    retired_page_t pg = {.cap = 1000};
    pg.keys = xcalloc((size_t)pg.cap, sizeof(char *));
    pg.pos = xcalloc((size_t)pg.cap, sizeof(*pg.pos));
    int rc = 0, stop = 0;
    for (int p = 0; p < obj_set_pools(cfg->set) && !rc && !stop; p++) {
        int first, state, nsets = obj_set_pool_sets(cfg->set, p, &first, &state);
        if (state == OBJ_POOL_REMOVED) continue; /* (its nodes may be gone) */
        for (int j = first; j < first + nsets && !rc && !stop; j++) {
            if (sets != ALL_SETS && (j >= 64 || !(sets >> j & 1))) continue;
            obj_set_t *set = obj_set_sub(cfg->set, j);
            char *after = NULL, after_pos[OBJ_VID_LEN + 1] = "";
            for (int more = set != NULL; more && !rc && !stop;) {
                pg.n = 0;
                int lr = obj_list_retired(set, iname, after, after_pos, collect_retired, &pg);
                if (lr < 0) rc = lr;
                more = lr == 1;
                for (int i = 0; i < pg.n && !rc && !stop; i++) {
                    obj_heal_report_t r = {0};
                    int hr = obj_heal_retired(set, iname, pg.keys[i], pg.pos[i], &r);
                    add_report(rep, &r);
                    if (hr == ERR_UNRECOVERABLE || hr == ERR_THROTTLED)
                        rep->failed++; /* (again next pass) */
                    else if (hr)
                        rc = hr;
                    if (pace) stop = pace(arg, 0);
                }
                if (pg.n) {
                    free(after);
                    after = xstrdup(pg.keys[pg.n - 1]);
                    snprintf(after_pos, sizeof(after_pos), "%s", pg.pos[pg.n - 1]);
                }
                for (int i = 0; i < pg.n; i++)
                    free(pg.keys[i]);
            }
            free(after);
        }
    }
    free(pg.keys);
    free(pg.pos);
    return rc ? rc : stop;
}

/*
 * Every version in list's sets (cfg->set: all of them, merged) healed, a listing page at a time:
 * 0, 1 when pace said stop, or the error that ended the walk. Each heal goes to the key's own
 * set (obj__route), as a heal call's does.
 */
static int heal_versions(const s3_cfg_t *cfg, obj_set_t *list, const char *iname, obj_refill_t *rf,
                         obj_heal_report_t *rep, int (*pace)(void *arg, uint64_t bytes), void *arg)
{
    page_keys_t pg = {.cap = 1000};
    pg.keys = xcalloc((size_t)pg.cap, sizeof(char *));
    pg.vids = xcalloc((size_t)pg.cap, sizeof(*pg.vids));
    pg.sizes = xcalloc((size_t)pg.cap, sizeof(uint64_t));
    char *after = NULL, after_vid[20] = "";
    int rc = 0, stopped = 0;
    for (int more = 1; more && !rc && !stopped;) {
        pg.n = 0;
        pg.last_vid[0] = 0;
        /* Every store's index (not k): a store emptied by a replaced drive must not hide a
         * version whose other heads are on the rest. */
        int lr = obj_list_versions_all(list, iname, "", after, after ? after_vid : NULL,
                                       collect_version, &pg);
        if (lr < 0) rc = lr;
        more = lr == 1;
        if (!rc && pg.n) {
            /* Objects one after another leave the drives idle between a stripe's reads and
             * the next object's lookups: a few at once keep them busy. */
            page_heal_t h = {
                .cfg = cfg, .iname = iname, .rf = rf, .pg = &pg, .pace = pace, .pace_arg = arg};
            pthread_mutex_init(&h.mu, NULL);
            pthread_t th[REFILL_THREADS];
            int nt = 0, want = rf ? REFILL_THREADS : HEAL_THREADS;
            for (; nt < want && nt < pg.n; nt++)
                if (pthread_create(&th[nt], NULL, heal_some, &h) != 0) break;
            if (nt == 0) heal_some(&h); /* no thread: this one does it */
            for (int t = 0; t < nt; t++)
                pthread_join(th[t], NULL);
            pthread_mutex_destroy(&h.mu);
            rc = h.rc;
            stopped = h.stopped;
            add_report(rep, &h.rep);
        }
        /* The next page starts after the last version the listing gave (markers too). */
        if (pg.last_key) {
            free(after);
            after = pg.last_key;
            pg.last_key = NULL;
            snprintf(after_vid, sizeof(after_vid), "%s", pg.last_vid);
        }
        for (int i = 0; i < pg.n; i++)
            free(pg.keys[i]);
    }
    free(after);
    free(pg.last_key);
    free(pg.keys);
    free(pg.vids);
    free(pg.sizes);
    return rc ? rc : stopped;
}

/* Bucket name healed within sc: 0, 1 when pace said stop, or the error that ended the walk. */
static int heal_bucket_in(const s3_cfg_t *cfg, const char *name, const char *iname,
                          const scope_t *sc, obj_heal_report_t *rep,
                          int (*pace)(void *arg, uint64_t bytes), void *arg)
{
    int rc = obj_heal(cfg->set, BUCKETS, name, rep);
    /* Its configurations stored apart from its record (CORS rules, lifecycle rules: the
     * one the record names). */
    if (!rc) rc = obj_heal(cfg->set, CORS_OBJECTS, iname, rep);
    obj_info_t bi;
    int sr = rc ? rc : obj_stat(cfg->set, BUCKETS, name, &bi);
    if (!sr)
        rc = s3_lifecycle_heal(cfg->set, iname, &bi, rep);
    else if (sr != ERR_NOT_FOUND)
        rc = sr;
    obj_refill_t *rf = sc->refill ? obj_refill_new(REFILL_WINDOW) : NULL;
    if (!rc && sc->sets == ALL_SETS) rc = heal_versions(cfg, cfg->set, iname, rf, rep, pace, arg);
    for (int j = 0; !rc && sc->sets != ALL_SETS && j < obj_set_count(cfg->set) && j < 64; j++)
        if (sc->sets >> j & 1)
            rc = heal_versions(cfg, obj_set_sub(cfg->set, j), iname, rf, rep, pace, arg);
    /* What the refill wrote, and what it failed to: counted before the pass says it is whole. */
    obj_refill_drain(rf, rep);
    obj_refill_free(rf);
    if (!rc) rc = heal_retired(cfg, iname, sc->sets, rep, pace, arg);
    if (!rc && sc->uploads) rc = heal_uploads(cfg, iname, rep, pace, arg);
    return rc;
}

int s3_heal_bucket(const s3_cfg_t *cfg, const char *name, const char *iname, obj_heal_report_t *rep,
                   int (*pace)(void *arg, uint64_t bytes), void *arg)
{
    scope_t sc = {.sets = ALL_SETS, .refill = refilling_sets(cfg) != 0, .uploads = 1};
    int rc = heal_bucket_in(cfg, name, iname, &sc, rep, pace, arg);
    return rc == 1 ? 0 : rc;
}

/* ---- the scanner ---- */

/* A pass over a replaced drive that did not refill it whole is tried again this soon, then
 * twice as late each time, up to REFILL_RETRY_MAX_S (never later than the interval). */
#define REFILL_RETRY_S     60
#define REFILL_RETRY_MAX_S 3600

struct s3_scrub {
    const s3_cfg_t *cfg;
    long interval_s;
    double refill_retry_s; /* REFILL_RETRY_S; WARMLAKE_REFILL_RETRY_S for tests */
    int refill_fails;      /* refill passes in a row that left a failure (the thread's) */
    double rate;           /* object bytes per second */
    obj_reaper_t *reap;    /* this thread's alone */
    char *gone_cursor;     /* where the next pass's purge goes on (s3_gone_purge) */
    bgwork_t w;
    s3_scrub_stats_t st; /* under w's lock */
};

typedef struct {
    s3_scrub_t *sc;
    bgwork_pace_t r; /* under sc's lock */
} pacer_t;

/* After each object: count it, keep under the rate, wait while a store is away. 1: stop. */
static int pace(void *arg, uint64_t bytes)
{
    pacer_t *p = arg;
    s3_scrub_t *sc = p->sc;
    bgwork_lock(&sc->w); /* the healing threads of a page pace together */
    sc->st.objects++;
    sc->st.bytes += bytes;
    sc->st.mb_s = bgwork_pace_count(&p->r, bytes);
    if (sc->st.total_est > sc->st.bytes && sc->st.mb_s > 0)
        sc->st.eta_s = (int64_t)((double)(sc->st.total_est - sc->st.bytes) / (sc->st.mb_s * 1e6));
    else
        sc->st.eta_s = 0;
    /* Ahead of the rate: sleep it off (in naps, so that stop is heard). */
    int stop = bgwork_pace_hold(&sc->w, &p->r);
    while (!stop && !obj_set_none_away(sc->cfg->set)) {
        sc->st.waiting = 1;
        stop = bgwork_nap(&sc->w, 1);
    }
    sc->st.waiting = 0;
    bgwork_unlock(&sc->w);
    return stop;
}

/* The user bytes the drives hold, roughly (live bytes times k/n): the pass's ETA. */
static uint64_t estimate_total(const s3_cfg_t *cfg)
{
    int n = obj_set_width(cfg->set);
    uint64_t live = 0;
    for (int i = 0; i < n; i++) {
        drive_stats_t ds;
        if (obj_set_health(cfg->set, i) == SHARD_UP && obj_set_stats(cfg->set, i, &ds) == 0)
            live += ds.live_bytes;
    }
    return n ? live / (uint64_t)n * (uint64_t)obj_set_data_width(cfg->set) : 0;
}

/*
 * The reaper's clock: when a group is seen, not when the pass began. A pass
 * takes as long as the data (a day for a few TB at the default rate), and a
 * candidate seen late in one pass and early in the next was seen twice
 * within much less than the grace that the passes' starts span.
 */
static uint64_t reap_now(void)
{
    return (uint64_t)bgwork_now();
}

static int scrub_stopping(void *arg)
{
    return bgwork_stopping(&((s3_scrub_t *)arg)->w);
}

/*
 * Every bucket's objects healed within scope (one phase of a pass), each bucket's unnamed
 * groups reaped after it when rr is set: the buckets not walked to their end.
 */
static unsigned heal_buckets(s3_scrub_t *sc, char **names, const scope_t *scope,
                             obj_heal_report_t *rep, pacer_t *p, obj_reap_report_t *rr)
{
    const s3_cfg_t *cfg = sc->cfg;
    unsigned incomplete = 0;
    for (int i = 0; names[i] && !bgwork_stopping(&sc->w); i++) {
        char iname[INAME_MAX];
        if (!s3_bucket_walked(cfg, "scrub", names[i], iname)) continue;
        int hr = heal_bucket_in(cfg, names[i], iname, scope, rep, pace, p);
        if (hr < 0) {
            log_warn("event=scrub_bucket_failed bucket=%s err=%s", names[i], err_name(hr));
            incomplete++;
        }
        if (rr && !bgwork_stopping(&sc->w))
            (void)obj_reap_bucket(cfg->set, sc->reap, iname, reap_now(), rr);
    }
    return incomplete;
}

/*
 * The tombstones of the internal buckets within sets (a deleted bucket's record, an upload
 * closed, a part replaced, a forgotten note): each goes a minute after its delete by the heal
 * thread of the node that made it, and a restart in that minute kept them for good (a
 * review). Old enough and on every store, the walk's heal drops them (heal_deleted). The
 * walks that failed.
 */
static unsigned heal_internal_retired(s3_scrub_t *sc, uint64_t sets, obj_heal_report_t *rep,
                                      pacer_t *p)
{
    unsigned failed = 0;
    const char *const s3_internal[] = {BUCKETS, GONE_BUCKETS, CORS_OBJECTS, LC_OBJECTS};
    const int ns3 = (int)(sizeof(s3_internal) / sizeof(s3_internal[0]));
    const char *name;
    for (int i = 0; !bgwork_stopping(&sc->w) &&
                    (name = i < ns3 ? s3_internal[i] : obj_internal_bucket(i - ns3)) != NULL;
         i++) {
        int hr = heal_retired(sc->cfg, name, sets, rep, pace, p);
        if (hr < 0) log_limited(LOG_LVL_WARN, "event=scrub_internal_failed err=%s", err_name(hr));
        failed += hr < 0;
    }
    return failed;
}

/*
 * One pass: what failed in it (objects, and buckets not walked to their end), or in a pass
 * that refilled a drive, what failed in the refill's phase. Such a pass walks the sets of the
 * drives marked refilling first (scope_t), says so (scrub_done: the drives are unmarked when
 * nothing failed), then the other sets, with the reaper.
 */
static unsigned scrub_pass(s3_scrub_t *sc)
{
    const s3_cfg_t *cfg = sc->cfg;
    int rc;
    char **names = bgwork_bucket_names(cfg->set, 1, &rc);
    /* What the pass could not go through (a listing that failed): not whole, whatever it
     * healed; what waits for a whole pass (a replaced drive's mark) waits on. */
    unsigned incomplete = rc < 0;
    if (rc < 0) log_warn("event=scrub_buckets_failed err=%s", err_name(rc));
    bgwork_lock(&sc->w);
    sc->st.running = 1;
    sc->st.objects = sc->st.bytes = 0;
    sc->st.mb_s = 0;
    sc->st.eta_s = 0;
    bgwork_unlock(&sc->w);
    uint64_t total = estimate_total(cfg);
    bgwork_lock(&sc->w);
    sc->st.total_est = total;
    bgwork_unlock(&sc->w);
    pacer_t p = {.sc = sc, .r = {.t0 = bgwork_now(), .rate = sc->rate}};
    obj_heal_report_t rep = {0};
    obj_reap_report_t rr = {0};
    uint64_t now_s = (uint64_t)bgwork_now(); /* the pass's start: what the sweep needs */
    /*
     * Every bucket's record first: the few bytes without which a bucket's objects cannot be
     * reached get their full redundancy back in seconds after a drive is replaced, not after
     * the refill of every bucket that sorts before theirs. Healed again with the bucket
     * below, which then finds nothing to do.
     */
    for (int i = 0; names[i] && !bgwork_stopping(&sc->w); i++) {
        obj_heal_report_t r = {0};
        int hr = obj_heal(cfg->set, BUCKETS, names[i], &r);
        if (hr && hr != ERR_NOT_FOUND)
            log_warn("event=scrub_bucket_record_failed bucket=%s err=%s", names[i], err_name(hr));
        r.objects = 0; /* (counted with the bucket) */
        add_report(&rep, &r);
    }
    uint64_t first = refilling_sets(cfg), live = live_sets(cfg);
    scope_t rest = {.sets = ALL_SETS, .refill = first != 0, .uploads = 1};
    int split = first && (first & live) != live;
    unsigned refill_failed = 0;
    if (split) {
        scope_t refill = {.sets = first, .refill = 1, .uploads = 1};
        obj_heal_report_t r = {0};
        unsigned inc = incomplete + heal_buckets(sc, names, &refill, &r, &p, NULL);
        inc += heal_internal_retired(sc, first, &r, &p);
        refill_failed = r.failed + inc;
        add_report(&rep, &r);
        if (!bgwork_stopping(&sc->w)) {
            if (cfg->scrub_done) cfg->scrub_done(cfg->scrub_done_arg, refill_failed);
            bgwork_lock(&sc->w);
            uint64_t bytes = sc->st.bytes;
            bgwork_unlock(&sc->w);
            log_info("event=refill_pass sets=%#llx objects=%u bytes=%llu seconds=%.3f "
                     "heads_fixed=%u blocks_fixed=%u failed=%u",
                     (unsigned long long)first, r.objects, (unsigned long long)bytes,
                     bgwork_now() - p.r.t0, r.heads_fixed, r.blocks_fixed, refill_failed);
        }
        rest = (scope_t){.sets = live & ~first, .refill = 0, .uploads = 0};
        /*
         * A refill part that fell short ends the pass here, so that it is tried again within
         * minutes (scrub_step), not after the other sets' walk, which at the scrub rate can
         * take hours. After six such passes in a row (retries an hour apart) the pass goes on
         * regardless: a drive that cannot be refilled must not keep the rest from a scrub.
         */
        if (refill_failed && sc->refill_fails < 6) rest.sets = 0;
    }
    if (rest.sets) incomplete += heal_buckets(sc, names, &rest, &rep, &p, &rr);
    bgwork_names_free(names);
    if (rest.sets && !bgwork_stopping(&sc->w)) {
        /* The internal buckets: uploads, parts, manifests; bucket records and configurations. */
        obj_reap_internal(cfg->set, sc->reap, reap_now(), &rr);
        (void)obj_reap_bucket(cfg->set, sc->reap, BUCKETS, reap_now(), &rr);
        (void)obj_reap_bucket(cfg->set, sc->reap, CORS_OBJECTS, reap_now(), &rr);
        (void)obj_reap_bucket(cfg->set, sc->reap, LC_OBJECTS, reap_now(), &rr);
        obj_reaper_sweep(sc->reap, now_s);
        heal_internal_retired(sc, rest.sets, &rep, &p);
    }
    s3_gone_report_t gr = {0};
    if (rest.sets && !bgwork_stopping(&sc->w))
        s3_gone_purge(cfg, cfg->reap_grace_s > 0 ? (uint64_t)cfg->reap_grace_s : 0,
                      &sc->gone_cursor, scrub_stopping, sc, &gr);
    double el = bgwork_now() - p.r.t0;
    bgwork_lock(&sc->w);
    sc->st.running = 0;
    sc->st.eta_s = 0;
    sc->st.heads_fixed += rep.heads_fixed;
    sc->st.blocks_fixed += rep.blocks_fixed;
    sc->st.failed += rep.failed;
    sc->st.reap_candidates = obj_reaper_candidates(sc->reap);
    sc->st.reaped_groups += rr.groups_reaped;
    sc->st.reaped_records += rr.records_reaped;
    sc->st.reaped_bytes += rr.bytes_reaped;
    sc->st.reaped_parts += rr.parts_reaped;
    sc->st.settled_uploads += rr.uploads_settled;
    sc->st.purged_buckets += gr.buckets;
    sc->st.purged_records += gr.records;
    sc->st.purged_bytes += gr.bytes;
    int done = !bgwork_stopping(&sc->w);
    if (done) {
        sc->st.passes++;
        sc->st.last_pass_s = el;
    }
    bgwork_unlock(&sc->w);
    if (done && !split && cfg->scrub_done)
        cfg->scrub_done(cfg->scrub_done_arg, rep.failed + incomplete);
    log_info("event=scrub_pass objects=%u bytes=%llu seconds=%.3f heads_fixed=%u blocks_fixed=%u "
             "failed=%u unnamed_groups=%llu reaped_groups=%llu reaped_parts=%llu "
             "reaped_bytes=%llu",
             rep.objects, (unsigned long long)p.r.bytes, el, rep.heads_fixed, rep.blocks_fixed,
             rep.failed, (unsigned long long)rr.groups_seen, (unsigned long long)rr.groups_reaped,
             (unsigned long long)rr.parts_reaped, (unsigned long long)rr.bytes_reaped);
    if (!done) return 0;
    return split ? refill_failed : rep.failed + incomplete;
}

/*
 * The first pass one interval after the start, then one interval after each began, or at once
 * when kicked (s3_scrub_kick). A pass that left a replaced drive short (a heal failed: a store
 * away, an object past repair) is tried again within minutes: the drive stayed marked
 * refilling, read last, until the next interval, a week by default (a cluster probe).
 */
static double scrub_step(void *arg)
{
    s3_scrub_t *sc = arg;
    double next = bgwork_now() + (double)sc->interval_s;
    int refill = refilling_sets(sc->cfg) != 0;
    unsigned failed = scrub_pass(sc);
    if (refill && failed && refilling_sets(sc->cfg)) {
        int shift = sc->refill_fails < 6 ? sc->refill_fails : 6;
        double wait = sc->refill_retry_s * (double)(1 << shift);
        if (wait > REFILL_RETRY_MAX_S) wait = REFILL_RETRY_MAX_S;
        sc->refill_fails++;
        if (bgwork_now() + wait < next) next = bgwork_now() + wait;
        log_warn("event=refill_pass_short failed=%u retry_s=%.0f", failed, next - bgwork_now());
    } else {
        sc->refill_fails = 0;
    }
    return next;
}

int s3_scrub_kick(s3_scrub_t *sc)
{
    if (!sc) return ERR_NOT_FOUND;
    bgwork_kick(&sc->w);
    log_info("event=scrub_kicked");
    return 0;
}

int s3_heal_now(void *cfg)
{
    return s3_scrub_kick(((s3_cfg_t *)cfg)->scrub);
}

s3_scrub_t *s3_scrub_start(const s3_cfg_t *cfg, long interval_s, uint64_t rate)
{
    if (interval_s <= 0) return NULL;
    s3_scrub_t *sc = xcalloc(1, sizeof(*sc));
    sc->cfg = cfg;
    sc->interval_s = interval_s;
    const char *retry = getenv("WARMLAKE_REFILL_RETRY_S");
    sc->refill_retry_s = retry && atof(retry) > 0 ? atof(retry) : REFILL_RETRY_S;
    sc->rate = rate ? (double)rate : 64e6;
    sc->reap = obj_reaper_new(cfg->reap_grace_s > 0 ? (uint64_t)cfg->reap_grace_s : 0);
    if (bgwork_start(&sc->w, "wl-scrub", (double)interval_s, scrub_step, sc) != 0) {
        log_error("event=scrub_not_started");
        obj_reaper_free(sc->reap);
        free(sc);
        return NULL;
    }
    return sc;
}

void s3_scrub_stop(s3_scrub_t *sc)
{
    if (!sc) return;
    bgwork_stop(&sc->w);
    obj_reaper_free(sc->reap);
    free(sc->gone_cursor);
    free(sc);
}

void s3_scrub_stats(s3_scrub_t *sc, s3_scrub_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    if (!sc) return;
    bgwork_lock(&sc->w);
    *st = sc->st;
    bgwork_unlock(&sc->w);
}
