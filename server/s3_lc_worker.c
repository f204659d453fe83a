/*
 * s3_lc_worker: the lifecycle worker: a background thread that carries out
 * the buckets' lifecycle rules (decisions: s3/lifecycle's lc_decide).
 *
 * A pass walks the bucket records; for each bucket with a configuration it
 * walks every version of every key (obj_list_versions: a key's versions
 * come together, newest first, so each version's "noncurrent since" is its
 * successor's mtime and its rank among noncurrent ones is its place), and
 * the unfinished multipart uploads. What falls due is done through the
 * paths a client's request takes: a delete of the current version (a
 * delete marker while versioning is on), a delete of a version for good,
 * an abort; under the bucket's lock against the same incarnation, and
 * conditional, under the key's lock, on the version being the very one
 * decided on (upload id and head stamp) and still where it was (current,
 * noncurrent, the only one): a PUT, retag or restore racing the worker is
 * never what it expires. Space comes back as for any delete: the
 * drives reclaim it by compaction, metered by the endurance budget like
 * every other write.
 *
 * Actions are gathered a batch of keys at a time and carried out between
 * walks (the walk resumes after the last key it finished), so no delete
 * runs inside a store's listing and memory stays bounded. A pass runs every
 * quarter day (of --lifecycle-day-seconds when set; an hour otherwise).
 */
#include "server/bgwork.h"
#include "server/s3_int.h"

#include "s3/lifecycle.h"

#define BATCH_KEYS 256

/* One version as the worker needs it (an obj_info_t is 16 KiB: not kept per version). */
typedef struct {
    char vid[sizeof(((obj_info_t *)0)->vid)];
    char upload[33]; /* with stamp: the very version decided on */
    uint64_t stamp;
    uint64_t size;
    int64_t mtime;
    int marker, latest;
    char *tags;
} wver_t;

/* A due action. */
typedef struct {
    char *key;
    lc_action_t act;
    char vid[sizeof(((obj_info_t *)0)->vid)];
    char upload[33]; /* the version's (the upload's, for an abort) */
    uint64_t stamp;
} wact_t;

typedef struct {
    const s3_cfg_t *cfg;
    const lc_config_t *lc;
    int64_t now, day_s;
    /* the key being gathered */
    char *key;
    wver_t *v;
    int nv, cap;
    /* the batch */
    wact_t *acts;
    int nacts, acap, keys;
    char *done_key; /* the last key whose versions were all seen */
    int full;
    uint64_t counts[LC_ACT_ABORT_UPLOAD + 1];
} walk_t;

static void key_reset(walk_t *w)
{
    for (int i = 0; i < w->nv; i++)
        free(w->v[i].tags);
    w->nv = 0;
    free(w->key);
    w->key = NULL;
}

static void act_add(walk_t *w, const char *key, lc_action_t a, const wver_t *v)
{
    if (w->nacts == w->acap) {
        w->acap = w->acap ? 2 * w->acap : 64;
        w->acts = xrealloc(w->acts, (size_t)w->acap * sizeof(*w->acts));
    }
    wact_t *t = &w->acts[w->nacts++];
    memset(t, 0, sizeof(*t));
    t->key = xstrdup(key);
    t->act = a;
    if (v) {
        memcpy(t->vid, v->vid, sizeof(t->vid));
        memcpy(t->upload, v->upload, sizeof(t->upload));
        t->stamp = v->stamp;
    }
}

/* Every version of w->key is in: decide for each. */
static void key_decide(walk_t *w)
{
    int noncurrent = 0;
    for (int i = 0; i < w->nv; i++) {
        const wver_t *v = &w->v[i];
        lc_version_t lv = {.key = w->key, .tags = v->tags, .size = v->size, .mtime = v->mtime};
        if (v->latest && !v->marker) {
            lv.kind = LC_VER_CURRENT;
        } else if (v->latest && w->nv == 1) {
            lv.kind = LC_VER_LONE_MARKER;
        } else if (v->latest || i == 0) {
            continue; /* a current delete marker over older versions stays */
        } else {
            lv.kind = LC_VER_NONCURRENT;
            lv.since = w->v[i - 1].mtime;
            lv.newer_noncurrent = noncurrent++;
        }
        const lc_rule_t *r;
        lc_action_t a = lc_decide(w->lc, &lv, w->now, w->day_s, &r, NULL);
        if (a != LC_ACT_NONE) act_add(w, w->key, a, v);
    }
}

static int on_version(void *arg, const char *key, const obj_info_t *info, int latest)
{
    walk_t *w = arg;
    if (!w->key || strcmp(w->key, key) != 0) {
        if (w->key) {
            key_decide(w);
            free(w->done_key);
            w->done_key = xstrdup(w->key);
            key_reset(w);
            if (++w->keys >= BATCH_KEYS) {
                w->full = 1;
                return 1; /* this key again, whole, in the next walk */
            }
        }
        w->key = xstrdup(key);
    }
    if (w->nv == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 8;
        w->v = xrealloc(w->v, (size_t)w->cap * sizeof(*w->v));
    }
    wver_t *v = &w->v[w->nv++];
    memset(v, 0, sizeof(*v));
    snprintf(v->vid, sizeof(v->vid), "%s", info->vid[0] ? info->vid : "null");
    snprintf(v->upload, sizeof(v->upload), "%s", info->upload_id);
    v->stamp = info->stamp_ns;
    v->size = info->size;
    v->mtime = (int64_t)(info->mtime_ns / 1000000000ull);
    v->marker = info->deleted;
    v->latest = latest;
    const char *tags = s3_umeta_get(info, TAG_META);
    v->tags = tags[0] ? xstrdup(tags) : NULL;
    return 0;
}

/* Carry out the batch in one bucket incarnation (a synthetic request context). */
static void act_all(walk_t *w, ctx_t *x)
{
    for (int i = 0; i < w->nacts; i++) {
        wact_t *t = &w->acts[i];
        int rc = 0;
        obj_info_t out;
        /*
         * Only the very version decided on, in the place it was decided in: a write
         * since (the same bytes again, a retag, a restore, a new null version) is a
         * different version, or the same one somewhere else, and stays.
         */
        obj_cond_t c = OBJ_COND_NONE;
        memcpy(c.if_upload, t->upload, sizeof(c.if_upload));
        c.if_stamp = t->stamp;
        c.noncurrent = t->act == LC_ACT_DELETE_NONCURRENT;
        c.lone = t->act == LC_ACT_DELETE_MARKER;
        rc = s3_delete_one(x, t->key, t->act == LC_ACT_EXPIRE_CURRENT ? NULL : t->vid, &c, &out);
        if (rc == 0)
            w->counts[t->act]++;
        else if (rc != ERR_PRECOND && rc != ERR_NOT_FOUND)
            /* (per key: a full or failing set fails them all, thousands a second) */
            log_limited(LOG_LVL_WARN,
                        "event=lifecycle_action_failed bucket=%s key=%s action=%d err=%s",
                        x->bucket, t->key, (int)t->act, err_name(rc));
        free(t->key);
    }
    w->nacts = 0;
}

typedef struct {
    walk_t *w;
    ctx_t *x;
} up_t;

static int on_upload(void *arg, const char *key, const char *upload, const obj_info_t *info)
{
    up_t *u = arg;
    lc_version_t lv = {.kind = LC_VER_UPLOAD,
                       .key = key,
                       .mtime = (int64_t)(info->mtime_ns / 1000000000ull),
                       .since = (int64_t)(info->mtime_ns / 1000000000ull)};
    const lc_rule_t *r;
    if (lc_decide(u->w->lc, &lv, u->w->now, u->w->day_s, &r, NULL) == LC_ACT_ABORT_UPLOAD) {
        wact_t *t;
        act_add(u->w, key, LC_ACT_ABORT_UPLOAD, NULL);
        t = &u->w->acts[u->w->nacts - 1];
        snprintf(t->upload, sizeof(t->upload), "%s", upload);
    }
    return 0;
}

static void abort_uploads(walk_t *w, ctx_t *x)
{
    up_t u = {w, x};
    int rc = obj_mpu_list_uploads(x->cfg->set, x->ibucket, on_upload, &u);
    if (rc < 0)
        log_warn("event=lifecycle_uploads_failed bucket=%s err=%s", x->bucket, err_name(rc));
    for (int i = 0; i < w->nacts; i++) {
        wact_t *t = &w->acts[i];
        if (obj_mpu_abort(x->cfg->set, x->ibucket, t->key, t->upload) == 0)
            w->counts[LC_ACT_ABORT_UPLOAD]++;
        free(t->key);
    }
    w->nacts = 0;
}

/* One bucket: its configuration, its versions, its uploads. */
static void run_bucket(const s3_cfg_t *cfg, const char *name, int64_t now, int64_t day_s,
                       uint64_t counts[], bgwork_t *bg)
{
    ctx_t x = {0};
    x.cfg = cfg;
    x.info = NULL;
    snprintf(x.id, sizeof(x.id), "lifecycle");
    snprintf(x.bucket, sizeof(x.bucket), "%s", name);
    obj_info_t bi;
    if (!s3_bucket_exists(&x, name, &bi) || !s3_lifecycle_marked(&bi)) return;
    s3_bucket_iname(name, &bi, x.ibucket);
    lc_config_t lc;
    int rc = s3_lifecycle_load(cfg->set, x.ibucket, &bi, &lc);
    if (rc) {
        if (rc != ERR_NOT_FOUND)
            log_warn("event=lifecycle_read_failed bucket=%s err=%s", name, err_name(rc));
        return;
    }
    walk_t w = {.cfg = cfg, .lc = &lc, .now = now, .day_s = day_s};
    for (;;) {
        char *after = w.done_key ? xstrdup(w.done_key) : NULL;
        w.full = 0;
        w.keys = 0;
        rc = obj_list_versions(cfg->set, x.ibucket, "", after, NULL, on_version, &w);
        free(after);
        if (rc < 0) {
            log_warn("event=lifecycle_list_failed bucket=%s err=%s", name, err_name(rc));
            key_reset(&w);
            break;
        }
        if (!w.full && w.key) { /* the walk's end: its last key is whole */
            key_decide(&w);
            key_reset(&w);
        }
        act_all(&w, &x);
        if (!w.full || bgwork_stopping(bg)) break;
    }
    abort_uploads(&w, &x);
    for (int a = 0; a <= LC_ACT_ABORT_UPLOAD; a++)
        counts[a] += w.counts[a];
    free(w.v);
    free(w.acts);
    free(w.done_key);
    lc_free(&lc);
}

struct s3_lc_worker {
    const s3_cfg_t *cfg;
    bgwork_t w;
};

/* A pass over every bucket; a stop of bg (may be NULL) ends it early. */
static void pass(const s3_cfg_t *cfg, int64_t now, bgwork_t *bg)
{
    int64_t day_s = cfg->lifecycle_day_s > 0 ? cfg->lifecycle_day_s : LC_DAY_SECONDS;
    uint64_t counts[LC_ACT_ABORT_UPLOAD + 1] = {0};
    int rc;
    char **names = bgwork_bucket_names(cfg->set, 0, &rc);
    if (rc < 0) log_warn("event=lifecycle_buckets_failed err=%s", err_name(rc));
    for (int i = 0; names[i] && !bgwork_stopping(bg); i++)
        run_bucket(cfg, names[i], now, day_s, counts, bg);
    bgwork_names_free(names);
    if (counts[1] + counts[2] + counts[3] + counts[4])
        log_info("event=lifecycle_pass expired=%llu noncurrent=%llu markers=%llu aborted=%llu",
                 (unsigned long long)counts[LC_ACT_EXPIRE_CURRENT],
                 (unsigned long long)counts[LC_ACT_DELETE_NONCURRENT],
                 (unsigned long long)counts[LC_ACT_DELETE_MARKER],
                 (unsigned long long)counts[LC_ACT_ABORT_UPLOAD]);
}

void s3_lifecycle_pass(const s3_cfg_t *cfg, int64_t now)
{
    pass(cfg, now, NULL);
}

/* A pass each period (a quarter of --lifecycle-day-seconds; an hour), counted from a pass's end. */
static double worker_step(void *arg)
{
    s3_lc_worker_t *lw = arg;
    int64_t period = lw->cfg->lifecycle_day_s > 0 ? lw->cfg->lifecycle_day_s / 4 : 3600;
    if (period < 1) period = 1;
    pass(lw->cfg, (int64_t)time(NULL), &lw->w);
    return bgwork_now() + (double)period;
}

s3_lc_worker_t *s3_lifecycle_start(const s3_cfg_t *cfg)
{
    s3_lc_worker_t *lw = xcalloc(1, sizeof(*lw));
    lw->cfg = cfg;
    if (bgwork_start(&lw->w, NULL, 0, worker_step, lw) != 0) {
        log_error("event=lifecycle_worker_not_started");
        free(lw);
        return NULL;
    }
    return lw;
}

void s3_lifecycle_stop(s3_lc_worker_t *lw)
{
    if (!lw) return;
    bgwork_stop(&lw->w);
    free(lw);
}
