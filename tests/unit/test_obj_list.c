/*
 * Listings from the index (server/obj_list.c): the ordered indexes of k
 * stores merged, no head read per key; correct under concurrent writes and
 * a store that fails mid-listing.
 */
#include "obj_fixture.h"

/* ---- listings from the index (server/obj_list.c) ---- */

static int size_cb(void *arg, const char *key, const obj_info_t *info)
{
    char *out = arg;
    if (info)
        sprintf(out + strlen(out), "%s=%llu,", key, (unsigned long long)info->size);
    else
        sprintf(out + strlen(out), "[%s],", key);
    return 0;
}

static int vdelim_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    if (info) return vlist_cb(arg, key, info, latest);
    sprintf((char *)arg + strlen(arg), "[%s],", key);
    return 0;
}

/*
 * A listing merges m+1 stores (0..m while they work): heads that some of them
 * missed (never more than m at once: every commit has k heads) are found on
 * another, and the newest head among them wins.
 */
static void test_list_missed_heads(void **state)
{
    env_t *e = *state;
    uint8_t data[64];
    char out[1024] = "", want[256];
    obj_info_t a, mk;
    fill(data, sizeof(data), 7);
    e->f[0].fail_write = e->f[1].fail_write = 1;
    put(e, "h/a", data, 10, NULL);
    e->f[0].fail_write = e->f[1].fail_write = 0;
    e->f[0].fail_write = e->f[2].fail_write = 1;
    put(e, "h/b", data, 20, NULL);
    e->f[0].fail_write = e->f[2].fail_write = 0;
    put(e, "h/c", data, 30, NULL);
    put(e, "h/d", data, 40, NULL);
    /* An overwrite and a delete that stores 1 and 2 missed: they hold the old heads. */
    e->f[1].fail_write = e->f[2].fail_write = 1;
    put(e, "h/c", data, 33, NULL);
    assert_int_equal(obj_delete(e->set, "bkt", "h/d"), 0);
    e->f[1].fail_write = e->f[2].fail_write = 0;
    assert_int_equal(obj_list(e->set, "bkt", "h/", NULL, size_cb, out), 0);
    assert_string_equal(out, "h/a=10,h/b=20,h/c=33,");
    /* A delete marker store 0 missed hides the key from listings, not from versions. */
    vput(e, "h/v", "one", OBJ_VERSIONED, &a);
    e->f[0].fail_write = 1;
    assert_int_equal(obj_delete_current(e->set, "bkt", "h/v", NULL, OBJ_VERSIONED, &mk), 0);
    e->f[0].fail_write = 0;
    out[0] = 0;
    assert_int_equal(obj_list(e->set, "bkt", "h/", NULL, size_cb, out), 0);
    assert_string_equal(out, "h/a=10,h/b=20,h/c=33,");
    out[0] = 0;
    assert_int_equal(obj_list_versions(e->set, "bkt", "h/v", NULL, NULL, vlist_cb, out), 0);
    snprintf(want, sizeof(want), "h/v:%sM*,h/v:%s,", mk.vid, a.vid);
    assert_string_equal(out, want);
    /* An unreadable head is settled over every store. */
    uint8_t junk[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    drive_id_t id = {"bkt", "h/b", "", 2};
    assert_int_equal(drive_put(e->f[2].d, &id, NULL, 0, junk, sizeof(junk)), 0);
    out[0] = 0;
    assert_int_equal(obj_list(e->set, "bkt", "h/", NULL, size_cb, out), 0);
    assert_string_equal(out, "h/a=10,h/b=20,h/c=33,");
    /*
     * A commit cut short (a crash): its head on one store only, one a GET of the key
     * does not ask. The listing agrees with the GET: not listed. Over an older version
     * the GET finds, that one is listed.
     */
    for (int round = 0; round < 2; round++) {
        const char *key = round ? "h/c" : "h/partial";
        int first = (int)obj__first_store(e->set, "bkt", key);
        int lone = -1;
        for (int j = 0; j < N && lone < 0; j++) /* a store the key's lookups never reach */
            if ((j - first + N) % N > M && j < N - M) lone = j; /* ... and a listing merges */
        if (lone < 0) continue;
        obj_info_t part;
        obj_info_clear(&part);
        part.mtime_ns = part.stamp_ns = (uint64_t)time(NULL) * 1000000000ull + 999;
        part.size = 77;
        part.layout = (ers_layout_t){K, M, B, 77};
        strcpy(part.upload_id, "0123456789abcdef0123456789abcdef");
        strcpy(part.etag, "x");
        int fe;
        assert_int_equal(obj__write_at_data(e->set, "bkt", key, "", &part, NULL,
                                            ((1u << N) - 1) & ~(1u << lone), &fe),
                         1);
        out[0] = 0;
        assert_int_equal(obj_list(e->set, "bkt", "h/", NULL, size_cb, out), 0);
        assert_string_equal(out, "h/a=10,h/b=20,h/c=33,");
    }
}

#define MANY 2400 /* more than two chunks of a store's walk (CHUNK_MAX 1088) */

typedef struct {
    int n, bad;
} seq_t;

/* Keys must come as m/00000, m/00001, ...: none skipped, none twice. */
static int seq_cb(void *arg, const char *key, const obj_info_t *info)
{
    seq_t *q = arg;
    char want[32];
    snprintf(want, sizeof(want), "m/%05d", q->n);
    if (!info || strcmp(key, want) != 0) q->bad++;
    q->n++;
    return 0;
}

static int vseq_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    return latest ? seq_cb(arg, key, info) : 1;
}

/* n keys fmt % i, copies of one real (inline) object, made by writing their heads alone. */
static void put_heads(env_t *e, const char *fmt, int n)
{
    uint8_t data[16];
    obj_info_t proto, *o = malloc(sizeof(*o));
    fill(data, sizeof(data), 3);
    put(e, "proto", data, sizeof(data), &proto);
    for (int i = 0; i < n; i++) {
        char key[64];
        int fe = 0;
        snprintf(key, sizeof(key), fmt, i);
        obj_info_copy(o, &proto);
        if (o->inl) o->inl = obj__inline_stores(e->set, "bkt", key); /* its bytes' stores */
        /* Half of them sparse (heads on the copies only), half on every store: a listing
         * must find both kinds whichever stores it merges. */
        o->sparse = o->inl && i % 2;
        assert_int_equal(obj__write_at_data(e->set, "bkt", key, "", o, data, 0, &fe),
                         o->sparse ? M + 1 : N);
    }
    free(o);
}

static void test_list_store_fails_midway(void **state)
{
    env_t *e = *state;
    seq_t q = {0, 0};
    put_heads(e, "m/%05d", MANY);
    assert_int_equal(obj_list(e->set, "bkt", "m/", NULL, seq_cb, &q), 0);
    assert_int_equal(q.n, MANY);
    assert_int_equal(q.bad, 0);
    /* A store that dies mid-walk is replaced; the new one resumes where the merge was. */
    e->f[1].scan_left = 1500;
    q = (seq_t){0, 0};
    assert_int_equal(obj_list(e->set, "bkt", "m/", NULL, seq_cb, &q), 0);
    assert_int_equal(e->f[1].scan_left, -1); /* it did die */
    assert_int_equal(q.n, MANY);
    assert_int_equal(q.bad, 0);
    /* m of them (one already dead at the start, one mid-walk): still whole. */
    e->f[0].scan_left = 1300;
    q = (seq_t){0, 0};
    assert_int_equal(obj_list(e->set, "bkt", "m/", NULL, seq_cb, &q), 0);
    assert_int_equal(e->f[0].scan_left, -1);
    assert_int_equal(q.n, MANY);
    assert_int_equal(q.bad, 0);
    /* The same for a versions listing. */
    e->f[0].scan_left = e->f[1].scan_left = 0;
    e->f[2].scan_left = 1400;
    q = (seq_t){0, 0};
    assert_int_equal(obj_list_versions(e->set, "bkt", "m/", NULL, NULL, vseq_cb, &q), 0);
    assert_int_equal(e->f[2].scan_left, -1);
    assert_int_equal(q.n, MANY);
    assert_int_equal(q.bad, 0);
    /* want is a hint: a caller that takes more than it said still gets everything. */
    e->f[2].scan_left = 0;
    e->f[1].scan_left = 333;
    q = (seq_t){0, 0};
    assert_int_equal(obj_list_delim(e->set, "bkt", "m/", NULL, NULL, 10, seq_cb, &q), 0);
    assert_int_equal(e->f[1].scan_left, -1);
    assert_int_equal(q.n, MANY);
    assert_int_equal(q.bad, 0);
    e->f[1].scan_left = 0;
    /* More than m: the listing fails, after a good part of it, never short and whole. */
    e->f[2].scan_left = 0;
    e->f[0].scan_left = 1300; /* in their second chunks (a store holds ~1800 of the heads) */
    e->f[1].scan_left = 1500;
    e->f[3].scan_left = 100; /* store 3 dies early; 4 and 5 take over, until the third dies */
    q = (seq_t){0, 0};
    assert_int_equal(obj_list(e->set, "bkt", "m/", NULL, seq_cb, &q), ERR_UNRECOVERABLE);
    assert_true(q.n > 0 && q.n < MANY);
    assert_int_equal(q.bad, 0);
    for (int i = 0; i < N; i++)
        e->f[i].scan_left = 0;
}

static long scans(env_t *e)
{
    long n = 0;
    for (int i = 0; i < N; i++)
        n += __atomic_load_n(&e->f[i].n_scan, __ATOMIC_RELAXED);
    return n;
}

/*
 * A delimiter listing over a prefix whose keys are all deleted (their tombstones stand a
 * minute) fetches ever larger chunks of it, not two entries a round per store: a probe's
 * 30,000 deleted keys took seconds for a page of one.
 */
static void test_list_delimiter_over_deleted_keys(void **state)
{
    env_t *e = *state;
    uint8_t data[8];
    static char out[4096];
    fill(data, sizeof(data), 6);
    char key[32];
    for (int i = 0; i < 400; i++) {
        snprintf(key, sizeof(key), "t/dead/%04d", i);
        put(e, key, data, 1 + (size_t)i % 8, NULL);
        assert_int_equal(obj_delete(e->set, "bkt", key), 0);
    }
    put(e, "t/dead/live", data, 3, NULL);
    put(e, "t/next/1", data, 4, NULL);
    for (int versions = 0; versions < 2; versions++) {
        out[0] = 0;
        long before = scans(e), ents = scanned(e);
        if (versions)
            assert_int_equal(
                obj_list_versions_delim(e->set, "bkt", "t/", "/", NULL, NULL, 0, vdelim_cb, out),
                0);
        else
            assert_int_equal(obj_list_delim(e->set, "bkt", "t/", "/", NULL, 0, size_cb, out), 0);
        assert_string_equal(out, "[t/dead/],[t/next/],");
        /* Two entries a round: 200 rounds of K fetches. Doubling: some ten rounds. */
        assert_true(scans(e) - before < 25 * K);
        assert_true(scanned(e) - ents < 4 * 420 * K);
    }
}

/* A delimiter's common prefix is listed once, when a live key is under it, and the walk
 * seeks past it: how many keys it rolls up costs nothing. */
static void test_list_delimiter(void **state)
{
    env_t *e = *state;
    uint8_t data[8];
    static char out[32768]; /* the listing without a delimiter lists every key */
    out[0] = 0;
    obj_info_t c;
    fill(data, sizeof(data), 5);
    const char *keys[] = {"d/a/1", "d/a/2", "d/a/3", "d/b/1", "d/x/1", "d/y/1", "d/y/2"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        put(e, keys[i], data, 8, NULL);
    put(e, "d/c", data, 5, &c);
    assert_int_equal(obj_delete(e->set, "bkt", "d/x/1"), 0);
    assert_int_equal(obj_delete(e->set, "bkt", "d/y/1"), 0);
    put_heads(e, "d/big/%04d", 600);
    long before = scanned(e);
    assert_int_equal(obj_list_delim(e->set, "bkt", "d/", "/", NULL, 0, size_cb, out), 0);
    assert_string_equal(out, "[d/a/],[d/b/],[d/big/],d/c=5,[d/y/],");
    assert_true(scanned(e) - before < 100); /* not the 600 x (m+1) under d/big/ */
    out[0] = 0;
    assert_int_equal(obj_list_delim(e->set, "bkt", "d/", "/", "d/a/", 0, size_cb, out), 0);
    assert_string_equal(out, "[d/b/],[d/big/],d/c=5,[d/y/],");
    out[0] = 0;
    assert_int_equal(obj_list_delim(e->set, "bkt", "d/", "/", "d/big/0007", 0, size_cb, out), 0);
    assert_string_equal(out, "[d/big/],d/c=5,[d/y/],");
    out[0] = 0;
    assert_int_equal(obj_list_delim(e->set, "bkt", "d/", "", NULL, 0, size_cb, out), 0);
    assert_true(strncmp(out, "d/a/1=8,d/a/2=8,d/a/3=8,d/b/1=8,d/big/0000=16,", 46) == 0);
    out[0] = 0;
    before = scanned(e);
    assert_int_equal(
        obj_list_versions_delim(e->set, "bkt", "d/", "/", NULL, NULL, 0, vdelim_cb, out), 0);
    assert_string_equal(out, "[d/a/],[d/b/],[d/big/],d/c:null*,[d/y/],");
    assert_true(scanned(e) - before < 100);
    out[0] = 0;
    assert_int_equal(
        obj_list_versions_delim(e->set, "bkt", "d/", "/", "d/b/", NULL, 0, vdelim_cb, out), 0);
    assert_string_equal(out, "[d/big/],d/c:null*,[d/y/],");
    /* A plain listing walks past a key's many noncurrent versions. */
    for (int i = 0; i < 40; i++)
        vput(e, "d/c", "v", OBJ_VERSIONED, &c);
    out[0] = 0;
    assert_int_equal(obj_list_delim(e->set, "bkt", "d/", "/", NULL, 0, size_cb, out), 0);
    assert_string_equal(out, "[d/a/],[d/b/],[d/big/],d/c=1,[d/y/],");
}

/* Listings racing writes: a writer overwrites keys that stay and makes and deletes others. */
typedef struct {
    env_t *e;
    int stop, ops, errors;
} wracer_t;

static void *wracer(void *arg)
{
    wracer_t *r = arg;
    uint8_t data[32];
    fill(data, sizeof(data), 11);
    for (int i = 0; i < 400 && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); i++) {
        char key[32];
        int err;
        snprintf(key, sizeof(key), i % 2 ? "c/%04d" : "c/%04dx", (i * 37) % 300);
        obj_writer_t *w = obj_put_begin(r->e->set, "bkt", key, &err);
        if (!w || obj_put_write(w, data, 1 + (size_t)i % 31) ||
            obj_put_commit(w, NULL, NULL, 0, NULL))
            r->errors++;
        if (i % 2 == 0 && obj_delete(r->e->set, "bkt", key) != 0) r->errors++;
        __atomic_fetch_add(&r->ops, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

typedef struct {
    int n, bad;
    char last[64];
} stay_t;

/* Every c/NNNN (they stay) once, in order; transient c/NNNNx may or may not be there. */
static int stay_cb(void *arg, const char *key, const obj_info_t *info)
{
    stay_t *q = arg;
    char want[32];
    if (!info || (q->last[0] && strcmp(key, q->last) <= 0)) q->bad++;
    snprintf(q->last, sizeof(q->last), "%s", key);
    if (key[strlen(key) - 1] == 'x') return 0;
    snprintf(want, sizeof(want), "c/%04d", q->n);
    if (strcmp(key, want) != 0) q->bad++;
    q->n++;
    return 0;
}

static void test_list_racing_writes(void **state)
{
    env_t *e = *state;
    put_heads(e, "c/%04d", 300);
    wracer_t r = {e, 0, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wracer, &r), 0);
    /* Bounded in count; how many listings overlap the writes does not matter. */
    for (int round = 0; round < 40 && __atomic_load_n(&r.ops, __ATOMIC_ACQUIRE) < 400; round++) {
        stay_t q = {0, 0, ""};
        assert_int_equal(obj_list(e->set, "bkt", "c/", NULL, stay_cb, &q), 0);
        assert_int_equal(q.bad, 0);
        assert_int_equal(q.n, 300);
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    assert_int_equal(r.errors, 0);
}

/*
 * ---- A third review: a Complete cut in its heads, carried through (obj__roll_forward) ----
 * The first roll forward wrote the cut head as it was, at its old stamp: every bound and
 * staleness rule took it for a crash's leftover. Each test below failed on it; it is a commit
 * now (a fresh stamp, the version id and mtime kept).
 */

/* Store i's head at bkt/key's current position. */
static int rf_head_of(env_t *e, const char *key, int i, obj_info_t *out)
{
    drive_id_t id = {"bkt", key, "", (uint32_t)i};
    drive_stat_t ds;
    uint8_t meta[HEAD_MAX];
    int rc = e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &ds, meta, sizeof(meta));
    return rc ? rc : obj_meta_decode(meta, ds.meta_len, out);
}

/* What a failed test before may have left set. */
static void rf_reset(void)
{
    obj__wall_skew_ns = 0;
    rf_put_head_hook = NULL;
    obj__heal_write_hook = NULL;
    cut_versioning = OBJ_UNVERSIONED;
}

static env_t *rf_env;
static cut_upload_t *rf_u;
static const char *rf_key;
static int rf_rc = 1;
static obj_info_t rf_done;

/* At the racing PUT's first head (another node's: the stores are written in order, store 0
 * first), before it lands: the Complete sent again, through this node. */
static void rf_retry_first(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t h;
    if (strcmp(id->key, rf_key) != 0 || obj_meta_decode(meta, ml, &h) != 0 ||
        strcmp(h.upload_id, rf_u->upload) == 0 || h.deleted)
        return;
    rf_put_head_hook = NULL; /* once */
    int why = 0;
    rf_rc = cut_complete(rf_env, rf_key, rf_u, 2, 0, &why);
    rf_done = cut_done;
}

/*
 * A Complete cut in its heads (lone head, stale), sent again while a PUT through another
 * node commits. The PUT read the lone head as a crash's leftover (bound = its stamp) and
 * archived only the version that stood before it; a roll forward at that same old stamp was
 * covered by the PUT's SHARD_IF_AT_MOST bound: both acknowledged, the Complete's version
 * neither current nor kept. Both must be versions of the key.
 */
static void test_carried_through_complete_racing_a_put(void **state)
{
    env_t *e = *state;
    rf_reset();
    const char *key = "rf-race";
    obj_info_t a, p;
    int err;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &a);
    cut_upload_t u;
    cut_upload_new(e, key, 900, &u);
    cut_lone_head(e, key, 3, &u);
    obj_set_t *other = other_gateway(e);
    rf_env = e;
    rf_u = &u;
    rf_key = key;
    rf_rc = 1;
    obj__wall_skew_ns = CUT_STALE;
    rf_put_head_hook = rf_retry_first;
    obj_writer_t *w = obj_put_begin(other, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, "racing put", 10), 0);
    obj_put_set_versioning(w, OBJ_VERSIONED);
    int prc = obj_put_commit(w, NULL, NULL, 0, &p);
    rf_put_head_hook = NULL;
    obj__wall_skew_ns = 0;
    obj_set_free(other);
    assert_int_equal(prc, 0);   /* the PUT: 200 */
    assert_int_equal(rf_rc, 0); /* the Complete: 200, */
    print_message("complete vid=%s upload=%s; put vid=%s\n", rf_done.vid, u.upload, p.vid);
    assert_string_equal(rf_done.upload_id, u.upload);
    /* ... so both are versions of the key in a versioned bucket. */
    assert_int_equal(versions_naming(e, key, p.upload_id), 1);
    assert_int_equal(versions_naming(e, key, u.upload), 1);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

/*
 * A version B that comes to stand below the cut head after the cut (a writer through
 * another node whose heads were in flight: one landed before the cut commit read, the rest
 * after; simulated by writing them under B's own bound). The cut commit archived A, not B.
 * The roll forward covers B without keeping it; a fresh commit (the code before 3bdf1ec)
 * archives whatever stands when it commits.
 */
static void test_carried_through_complete_keeps_what_stood_since(void **state)
{
    env_t *e = *state;
    rf_reset();
    const char *key = "rf-below";
    obj_info_t a, b, info;
    int why = 0;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &a);
    assert_int_not_equal(put_cut(e, key, 1u << 5), 0); /* B's first head lands (store 5) */
    assert_int_equal(rf_head_of(e, key, 5, &b), 0);
    assert_string_not_equal(b.upload_id, a.upload_id);
    cut_upload_t u;
    cut_upload_new(e, key, 901, &u);
    obj__wall_skew_ns = 11 * 1000000000ll; /* B's head stale by then: covered, A archived */
    cut_lone_head(e, key, 0, &u);
    /* B's heads that were on their way land, under B's bound (A, what B read as current). */
    shard_cond_t bc = {.mode = SHARD_IF_AT_MOST, .stamp = a.stamp_ns};
    memcpy(bc.upload, a.upload_id, sizeof(bc.upload));
    memcpy(bc.self, b.upload_id, sizeof(bc.self));
    uint32_t failed = 0;
    int refused = 0, ferr = 0;
    assert_int_equal(
        obj__heads_to(e->set, "bkt", key, "", &b, NULL, 0x1e, &bc, &failed, &refused, &ferr), 4);
    /* B: 5 heads of 6 (store 0 has the Complete's): stands, acknowledged. */
    assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
    assert_string_equal(info.upload_id, b.upload_id);
    obj__wall_skew_ns = CUT_STALE + 11 * 1000000000ll;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_int_equal(versions_naming(e, key, u.upload), 1);
    assert_int_equal(versions_naming(e, key, b.upload_id), 1); /* B kept */
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

static int rf_nulls_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)latest;
    const char **a = arg;
    if (info && strcmp(key, a[0]) == 0 && !info->vid[0] && !(info->deleted && !info->marker))
        ++*(int *)a[1];
    return 0;
}

static int rf_nulls(env_t *e, const char *key)
{
    int n = 0;
    const char *a[2] = {key, (const char *)&n};
    assert_int_equal(obj_list_versions(e->set, "bkt", key, NULL, NULL, rf_nulls_cb, a), 0);
    return n;
}

/*
 * Suspended: the cut commit collected the noncurrent null version to retire once it
 * stood; the roll forward retires nothing: two null versions. (Control: the same Complete
 * uncut on another key.)
 */
static void test_carried_through_complete_retires_the_null_version(void **state)
{
    env_t *e = *state;
    rf_reset();
    for (int cut = 0; cut < 2; cut++) {
        const char *key = cut ? "rf-null-cut" : "rf-null-whole";
        obj_info_t n0, v1;
        int why = 0;
        cut_versioning = OBJ_UNVERSIONED;
        vput(e, key, "the first null version", OBJ_UNVERSIONED, &n0);
        vput(e, key, "a version", OBJ_VERSIONED, &v1);
        assert_int_equal(rf_nulls(e, key), 1);
        cut_versioning = OBJ_SUSPENDED;
        cut_upload_t u;
        cut_upload_new(e, key, 902 + (uint32_t)cut, &u);
        if (cut) {
            cut_lone_head(e, key, 4, &u);
            obj__wall_skew_ns = CUT_STALE;
        }
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
        obj__wall_skew_ns = 0;
        int live = live_heads_of(e, key, &n0);
        print_message("%s: null versions listed: %d; live heads of the replaced null: %d\n", key,
                      rf_nulls(e, key), live);
        /* Replaced by the Complete's null version: deleting that one leaves no null. */
        assert_int_equal(obj_delete_version(e->set, "bkt", key, "null", NULL, NULL), 0);
        obj_info_t got;
        int src = obj_stat_version(e->set, "bkt", key, "null", &got);
        print_message("%s: after DELETE ?versionId=null: stat null=%d nulls listed=%d%s\n", key,
                      src, rf_nulls(e, key),
                      src == 0 && !strcmp(got.upload_id, n0.upload_id) ? " (the replaced one)"
                                                                       : "");
        assert_int_equal(live, 0);
        assert_int_equal(src, ERR_NOT_FOUND);
        cut_versioning = OBJ_UNVERSIONED;
        free(u.data);
    }
}

/*
 * Unversioned: the version the cut commit replaced is never dropped by the roll forward
 * (drop_old happens only after a commit stands): its blocks stay, named by no head.
 */
static void test_carried_through_complete_drops_what_it_replaced(void **state)
{
    env_t *e = *state;
    rf_reset();
    for (int cut = 0; cut < 2; cut++) {
        const char *key = cut ? "rf-leak-cut" : "rf-leak-whole";
        obj_info_t a, info;
        int why = 0;
        cut_versioning = OBJ_UNVERSIONED;
        put_big(e, key, OBJ_UNVERSIONED, &a);
        cut_upload_t u;
        cut_upload_new(e, key, 904 + (uint32_t)cut, &u);
        if (cut) {
            cut_lone_head(e, key, 1, &u);
            obj__wall_skew_ns = CUT_STALE;
        }
        assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
        obj__wall_skew_ns = 0;
        assert_int_equal(obj_stat_standing(e->set, "bkt", key, &info), 0);
        assert_string_equal(info.upload_id, u.upload);
        int blocks = 0;
        for (int i = 0; i < N; i++)
            blocks += has_block(e, key, a.upload_id, 0, i);
        print_message("%s: blocks of the replaced version left: %d\n", key, blocks);
        assert_int_equal(blocks, 0);
        free(u.data);
    }
}

/*
 * The two new mechanisms against each other, no stall needed: a roll forward's heads
 * carry the cut commit's old stamp, so a heal running while they are being written takes
 * them for a crash's leftover (split, stale by stamp) and rolls the key back over those
 * already written; the roll forward's remaining heads (SHARD_IF_AT_MOST of the head it read)
 * land over the healed ones. The Complete answers 200 and its version stands nowhere.
 */
static int rf_heal_rc = 1;
static void rf_heal_mid_roll(const drive_id_t *id, const void *meta, size_t ml)
{
    obj_info_t h;
    if (strcmp(id->key, rf_key) != 0 || id->shard != 3 || obj_meta_decode(meta, ml, &h) != 0 ||
        strcmp(h.upload_id, rf_u->upload) != 0)
        return;
    rf_put_head_hook = NULL;
    for (int tries = 0; tries < 1000 && heads_naming(rf_env, rf_key, rf_u->upload) < 3; tries++)
        usleep(1000);
    obj_heal_report_t rep = {0};
    rf_heal_rc = obj_heal(rf_env->set, "bkt", rf_key, &rep);
}

static void test_heal_beside_a_carried_through_complete(void **state)
{
    env_t *e = *state;
    rf_reset();
    char key[32];
    for (int i = 0;; i++) { /* a key whose copies (the stores a read asks first) are 3, 4, 5 */
        snprintf(key, sizeof(key), "rf-rf-heal-%d", i);
        if (obj__inline_stores(e->set, "bkt", key) == 0x38) break;
    }
    obj_info_t a, info, later;
    int why = 0;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &a);
    cut_upload_t u;
    cut_upload_new(e, key, 910, &u);
    cut_lone_head(e, key, 0, &u);
    rf_env = e;
    rf_u = &u;
    rf_key = key;
    rf_heal_rc = 1;
    obj__wall_skew_ns = CUT_STALE;
    rf_put_head_hook = rf_heal_mid_roll;
    int rc = cut_complete(e, key, &u, 2, 0, &why);
    rf_put_head_hook = NULL;
    int sp = obj_stat_standing(e->set, "bkt", key, &info);
    int hn = heads_naming(e, key, u.upload);
    vput(e, key, "later", OBJ_VERSIONED, &later);
    obj__wall_skew_ns = 0;
    int vn = versions_naming(e, key, u.upload);
    print_message("heal=%d complete=%d; its heads %d of %d, standing=%d; its versions after the "
                  "next PUT: %d\n",
                  rf_heal_rc, rc, hn, N, sp, vn);
    assert_int_equal(rc, 0); /* 200 */
    assert_int_equal(sp, 0);
    assert_int_equal(vn, 1);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

/* Stores 1 and 2 fail the object's head puts (and only those). */
static void fail_low_stores(const drive_id_t *id, const void *meta, size_t ml)
{
    (void)meta;
    (void)ml;
    int obj = strcmp(id->bucket, "bkt") == 0 && strcmp(id->key, rf_key) == 0;
    if (id->shard == 1 || id->shard == 2) rf_env->f[id->shard].fail_head = obj;
}

/* Once the manifest is written (the cut head on store 0 already read): store 0 turns suspect,
 * so the carried-through commit neither writes nor undoes there. */
static int sick_after_manifest(const char *upload, int stage)
{
    (void)upload;
    if (stage == 2) rf_env->f[0].sick = 1;
    return 0;
}

/*
 * A Complete carried through that falls short was undone, but not on a store away (an undo
 * skips those), and answered as a clean failure: its manifest dropped and the upload opened
 * again while the cut head there still named the manifest (a fourth review). The manifest
 * stays, the upload stays closing: sent again, later.
 */
static void test_carried_through_complete_short_keeps_its_manifest(void **state)
{
    env_t *e = *state;
    rf_reset();
    const char *key = "rf-short";
    obj_info_t a, mi;
    int why = 0;
    cut_versioning = OBJ_VERSIONED;
    put_big(e, key, OBJ_VERSIONED, &a);
    cut_upload_t u;
    cut_upload_new(e, key, 933, &u);
    cut_lone_head(e, key, 0, &u);
    rf_env = e;
    rf_u = &u;
    rf_key = key;
    rf_put_head_hook = fail_low_stores;
    obj__wall_skew_ns = CUT_STALE;
    obj__complete_cut_hook = sick_after_manifest;
    obj_info_t done;
    int rc = obj_mpu_complete(e->set, "bkt", key, u.upload, u.parts, 2, 1, NULL, cut_versioning,
                              &done, &why);
    obj__complete_cut_hook = NULL;
    rf_put_head_hook = NULL;
    e->f[0].sick = 0;
    e->f[1].fail_head = e->f[2].fail_head = 0;
    obj__wall_skew_ns = 0;
    assert_int_not_equal(rc, 0);
    assert_true(heads_naming(e, key, u.upload) > 0);
    assert_int_equal(obj_stat(e->set, MPU_MANIFEST, u.upload, &mi), 0);
    assert_int_equal(uploads_listed(e, &u), 0); /* still closing, not opened again */
    /* Sent again with every store back: it stands. */
    obj__wall_skew_ns = 2 * CUT_STALE;
    assert_int_equal(cut_complete(e, key, &u, 2, 0, &why), 0);
    obj__wall_skew_ns = 0;
    assert_cut_object(e, key, &u);
    cut_versioning = OBJ_UNVERSIONED;
    free(u.data);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_missed_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_store_fails_midway, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_delimiter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_delimiter_over_deleted_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_racing_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_carried_through_complete_racing_a_put, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_carried_through_complete_keeps_what_stood_since, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_carried_through_complete_retires_the_null_version,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_carried_through_complete_drops_what_it_replaced, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heal_beside_a_carried_through_complete, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_carried_through_complete_short_keeps_its_manifest,
                                        setup, teardown),
    };
    obj_fixture_args(argc, argv);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
