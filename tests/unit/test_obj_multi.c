/*
 * Several erasure sets as one (server/obj_multi.c): placement, every call
 * on the key's own set, listings merged over the sets (pages, delimiters,
 * versions), multipart uploads, counters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "common/err.h"
#include "common/log.h"
#include "server/obj.h"
#include "server/obj_int.h" /* obj__in_pool: where a pool places a key */
#include "storage/drive.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SETS 3
#define K    4
#define M    2
#define N    (K + M)
#define B    (16u * 1024)

typedef struct {
    char *dir;
    drive_t *d[SETS * N];
    obj_set_t *sets[SETS]; /* owned by multi */
    obj_set_t *multi;
    drive_t *pd[2 * N];  /* a second pool's drives (test_pools) */
    obj_set_t *psets[2]; /* its sets (owned by multi once added) */
} env_t;

/* Set j of N drives DIR/<tag><j*N+i> (opened into d[0..N)). */
static obj_set_t *new_set(const char *dir, const char *tag, int j, drive_t **d)
{
    shard_store_t st[N];
    for (int i = 0; i < N; i++) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s%d", dir, tag, j * N + i);
        drive_cfg_t c = {0};
        c.path = p;
        c.iu = 4096;
        c.segment_size = 4u << 20;
        c.capacity = 128u << 20;
        assert_int_equal(drive_open(&c, &d[i]), 0);
        st[i] = shard_store_local(d[i]);
    }
    int err;
    obj_set_t *s = obj_set_new(st, K, M, B, &err);
    assert_non_null(s);
    return s;
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof(*e));
    e->dir = strdup("/tmp/wl-multi-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    for (int j = 0; j < SETS; j++)
        e->sets[j] = new_set(e->dir, "d", j, e->d + j * N);
    int err;
    assert_non_null(e->multi = obj_set_multi(e->sets, SETS, 0x5eed, &err));
    obj_set_inline_max(e->multi, 1024);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    obj_set_free(e->multi);
    for (int i = 0; i < SETS * N; i++)
        drive_close(e->d[i]);
    for (int i = 0; i < 2 * N; i++)
        if (e->pd[i]) drive_close(e->pd[i]);
    tl_rm_rf(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

static void put_v(obj_set_t *s, const char *key, size_t n, uint32_t seed, obj_versioning_t v,
                  obj_info_t *out)
{
    uint8_t *data = malloc(n ? n : 1);
    fill(data, n, seed);
    int err;
    obj_writer_t *w = obj_put_begin(s, "bkt", key, &err);
    assert_non_null(w);
    obj_put_set_versioning(w, v);
    assert_int_equal(obj_put_write(w, data, n), 0);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, out), 0);
    free(data);
}

static void check(obj_set_t *s, const char *key, size_t n, uint32_t seed)
{
    uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
    fill(want, n, seed);
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open(s, "bkt", key, &info, &err);
    assert_non_null(r);
    assert_int_equal(info.size, n);
    assert_int_equal(obj_read(r, 0, got, n), 0);
    assert_memory_equal(got, want, n);
    obj_close(r);
    free(want);
    free(got);
}

static void test_placement(void **state)
{
    env_t *e = *state;
    int count[SETS] = {0};
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        int p = obj_set_place(e->multi, "bkt", key);
        assert_true(p >= 0 && p < SETS);
        assert_int_equal(obj_set_place(e->multi, "bkt", key), p); /* stable */
        count[p]++;
    }
    for (int j = 0; j < SETS; j++)
        assert_true(count[j] > 800 && count[j] < 1200); /* spread evenly */
    /* Bucket and key are not run together: "ab"/"c" and "a"/"bc" may differ. */
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        char b1[16], bb[16];
        snprintf(b1, sizeof(b1), "b%dx", i);
        snprintf(bb, sizeof(bb), "b%d", i);
        differ += obj_set_place(e->multi, b1, "k") != obj_set_place(e->multi, bb, "xk");
    }
    assert_true(differ > 0);
    assert_int_equal(obj_set_count(e->multi), SETS);
    assert_int_equal(obj_set_count(e->sets[0]), 1);
    assert_int_equal(obj_set_width(e->multi), SETS * N);
    for (int i = 0; i < SETS * N; i++) {
        drive_stats_t st;
        assert_int_equal(obj_set_stats(e->multi, i, &st), 0);
        assert_int_equal(obj_set_health(e->multi, i), SHARD_UP);
    }
    drive_stats_t st;
    assert_int_equal(obj_set_stats(e->multi, SETS * N, &st), ERR_NOT_FOUND);
    assert_int_equal(obj_set_stats(e->multi, -1, &st), ERR_NOT_FOUND);
}

/* Objects (inline and erasure-coded) live on their own set alone, and read back whole. */
static void test_round_trip(void **state)
{
    env_t *e = *state;
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "obj-%02d", i);
        put_v(e->multi, key, i % 2 ? 200 : 100000 + (size_t)i, (uint32_t)i, OBJ_UNVERSIONED, NULL);
    }
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "obj-%02d", i);
        check(e->multi, key, i % 2 ? 200 : 100000 + (size_t)i, (uint32_t)i);
        int home = obj_set_place(e->multi, "bkt", key);
        for (int j = 0; j < SETS; j++) {
            obj_info_t info;
            assert_int_equal(obj_stat(e->sets[j], "bkt", key, &info),
                             j == home ? 0 : ERR_NOT_FOUND);
        }
    }
    /* Deletes and conditions go to the key's set too. */
    assert_int_equal(obj_delete(e->multi, "bkt", "obj-03"), 0);
    obj_info_t info;
    assert_int_equal(obj_stat(e->multi, "bkt", "obj-03", &info), ERR_NOT_FOUND);
    int err;
    obj_writer_t *w = obj_put_begin(e->multi, "bkt", "obj-04", &err);
    obj_cond_t none = {.none_match = 1, .if_size = -1, .if_mtime_s = -1};
    obj_put_set_cond(w, &none);
    assert_int_equal(obj_put_write(w, "x", 1), 0);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), ERR_PRECOND);
    check(e->multi, "obj-04", 100004, 4);
}

typedef struct {
    char (*keys)[64];
    int n, cap, page, taken;
    int cps;
} coll_t;

static int collect(void *arg, const char *key, const obj_info_t *info)
{
    coll_t *c = arg;
    assert_true(c->n < c->cap);
    snprintf(c->keys[c->n++], 64, "%s", key);
    if (!info) c->cps++;
    return c->page && ++c->taken >= c->page;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* A merged listing is every set's keys in order, whole, and pages resume exactly. */
static void test_merged_listing(void **state)
{
    env_t *e = *state;
    enum { KEYS = 150 };
    char want[KEYS + 20][64];
    int nw = 0;
    int on[SETS] = {0};
    for (int i = 0; i < KEYS; i++) {
        snprintf(want[nw], 64, "k%03d", (i * 37) % KEYS);
        on[obj_set_place(e->multi, "bkt", want[nw])]++;
        put_v(e->multi, want[nw++], 10, (uint32_t)i, OBJ_UNVERSIONED, NULL);
    }
    for (int j = 0; j < SETS; j++)
        assert_true(on[j] > 0); /* the merge has something to merge */
    /* Keys under common prefixes, spread over the sets. */
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 5; i++) {
            char k[64];
            snprintf(k, sizeof(k), "dir%d/f%d", d, i);
            put_v(e->multi, k, 10, 999, OBJ_UNVERSIONED, NULL);
            snprintf(want[nw++], 64, "%s", k);
        }
    qsort(want, (size_t)nw, sizeof(want[0]), cmp_str);

    char(*got)[64] = calloc(4 * (KEYS + 20), 64);
    coll_t c = {got, 0, 4 * (KEYS + 20), 0, 0, 0};
    assert_int_equal(obj_list(e->multi, "bkt", NULL, NULL, collect, &c), 0);
    assert_int_equal(c.n, nw);
    for (int i = 0; i < nw; i++)
        assert_string_equal(got[i], want[i]);

    /* In rounds of a few entries per set (a set ending while others go on keeps the rest of
     * its last batch for the next round). */
    for (size_t wantn = 5; wantn <= 40; wantn += 7) {
        c = (coll_t){got, 0, 4 * (KEYS + 20), 0, 0, 0};
        assert_int_equal(obj_list_delim(e->multi, "bkt", NULL, NULL, NULL, wantn, collect, &c), 0);
        assert_int_equal(c.n, nw);
        for (int i = 0; i < nw; i++)
            assert_string_equal(got[i], want[i]);
    }

    /* Pages of 7 (want = 7): resumed after the last key, the same list. */
    for (size_t wantn = 1; wantn <= 16; wantn += 15) {
        c = (coll_t){got, 0, 4 * (KEYS + 20), 7, 0, 0};
        const char *after = NULL;
        char last[64];
        for (int guard = 0; guard < 200; guard++) {
            c.taken = 0;
            int before = c.n;
            int rc = obj_list_delim(e->multi, "bkt", NULL, NULL, after, wantn, collect, &c);
            assert_true(rc == 0 || rc == 1);
            if (c.n == before) break;
            snprintf(last, sizeof(last), "%s", got[c.n - 1]);
            after = last;
            if (rc == 0) break;
        }
        assert_int_equal(c.n, nw);
        for (int i = 0; i < nw; i++)
            assert_string_equal(got[i], want[i]);
    }

    /* A prefix, and a delimiter: each common prefix once though several sets hold it. */
    c = (coll_t){got, 0, 4 * (KEYS + 20), 0, 0, 0};
    assert_int_equal(obj_list_delim(e->multi, "bkt", "", "/", NULL, 0, collect, &c), 0);
    assert_int_equal(c.cps, 3);
    assert_int_equal(c.n, KEYS + 3);
    for (int i = 1; i < c.n; i++)
        assert_true(strcmp(got[i - 1], got[i]) < 0);
    assert_string_equal(got[0], "dir0/"); /* "dir" sorts before "k" */
    assert_string_equal(got[3], "k000");
    /* ... paged one entry at a time, resuming after a common prefix. */
    c = (coll_t){got, 0, 4 * (KEYS + 20), 1, 0, 0};
    char last[64] = "";
    for (int guard = 0; guard < 400; guard++) {
        c.taken = 0;
        int before = c.n;
        int rc = obj_list_delim(e->multi, "bkt", "d", "/", last[0] ? last : NULL, 1, collect, &c);
        if (c.n == before || rc == 0) break;
        snprintf(last, sizeof(last), "%s", got[c.n - 1]);
    }
    assert_int_equal(c.n, 3);
    assert_string_equal(got[0], "dir0/");
    assert_string_equal(got[2], "dir2/");
    free(got);
}

typedef struct {
    char key[64], vid[24];
    int latest, marker;
} ver_t;

typedef struct {
    ver_t *v;
    int n, cap, page, taken;
} vcoll_t;

static int vcollect(void *arg, const char *key, const obj_info_t *info, int latest)
{
    vcoll_t *c = arg;
    assert_true(c->n < c->cap);
    ver_t *v = &c->v[c->n++];
    snprintf(v->key, sizeof(v->key), "%s", key);
    snprintf(v->vid, sizeof(v->vid), "%s", info && info->vid[0] ? info->vid : "null");
    v->latest = latest;
    v->marker = info && info->marker;
    return c->page && ++c->taken >= c->page;
}

/* Versions: each key's versions newest first, keys in order, and pages resume mid-key. */
static void test_merged_versions(void **state)
{
    env_t *e = *state;
    enum { KEYS = 24, VERS = 3 };
    for (int v = 0; v < VERS; v++)
        for (int i = 0; i < KEYS; i++) {
            char k[16];
            snprintf(k, sizeof(k), "v%02d", i);
            put_v(e->multi, k, v == 1 ? 30000 : 20, (uint32_t)(v * 100 + i), OBJ_VERSIONED, NULL);
        }
    /* One key with a delete marker on top, one with a null version under versions. */
    obj_info_t mk;
    assert_int_equal(obj_delete_current(e->multi, "bkt", "v05", NULL, OBJ_VERSIONED, &mk), 0);
    vcoll_t all = {calloc(200, sizeof(ver_t)), 0, 200, 0, 0};
    assert_int_equal(obj_list_versions(e->multi, "bkt", NULL, NULL, NULL, vcollect, &all), 0);
    assert_int_equal(all.n, KEYS * VERS + 1);
    for (int i = 0; i < all.n; i++) {
        if (i) assert_true(strcmp(all.v[i - 1].key, all.v[i].key) <= 0);
        int first = !i || strcmp(all.v[i - 1].key, all.v[i].key) != 0;
        assert_int_equal(all.v[i].latest, first);
        /* Newest first (a version id is its position: ~mtime, so newer sorts lower). */
        if (i && !first) assert_true(strcmp(all.v[i - 1].vid, all.v[i].vid) < 0);
    }
    assert_true(all.v[5 * VERS].marker);

    /* Pages of 2 resumed at (key, version id): the same listing. */
    for (size_t wantn = 2; wantn <= 9; wantn += 7) {
        vcoll_t pg = {calloc(200, sizeof(ver_t)), 0, 200, 2, 0};
        char ak[64] = "", av[24] = "";
        for (int guard = 0; guard < 200; guard++) {
            pg.taken = 0;
            int before = pg.n;
            int rc = obj_list_versions_delim(e->multi, "bkt", NULL, NULL, ak[0] ? ak : NULL,
                                             ak[0] ? av : NULL, wantn, vcollect, &pg);
            assert_true(rc == 0 || rc == 1);
            if (pg.n == before || rc == 0) break;
            snprintf(ak, sizeof(ak), "%s", pg.v[pg.n - 1].key);
            snprintf(av, sizeof(av), "%s", pg.v[pg.n - 1].vid);
        }
        assert_int_equal(pg.n, all.n);
        for (int i = 0; i < all.n; i++) {
            assert_string_equal(pg.v[i].key, all.v[i].key);
            assert_string_equal(pg.v[i].vid, all.v[i].vid);
            assert_int_equal(pg.v[i].latest, all.v[i].latest);
        }
        free(pg.v);
    }
    free(all.v);
}

static int count_upload(void *arg, const char *key, const char *upload_id, const obj_info_t *info)
{
    (void)key;
    (void)upload_id;
    (void)info;
    (*(int *)arg)++;
    return 0;
}

/* Uploads live with their key's set; their listing covers every set. */
static void test_multipart(void **state)
{
    env_t *e = *state;
    char ids[8][33];
    int homes = 0;
    for (int u = 0; u < 8; u++) {
        char k[16];
        snprintf(k, sizeof(k), "mpu-%d", u);
        homes |= 1 << obj_set_place(e->multi, "bkt", k);
        assert_int_equal(obj_mpu_create(e->multi, "bkt", k, NULL, NULL, 0, ids[u]), 0);
    }
    assert_true(__builtin_popcount((unsigned)homes) > 1);
    int n = 0;
    assert_int_equal(obj_mpu_list_uploads(e->multi, "bkt", count_upload, &n), 0);
    assert_int_equal(n, 8);
    /* Two parts and a Complete on one; the object reads back across its parts. */
    uint8_t *data = malloc(300000);
    fill(data, 300000, 77);
    obj_mpu_part_t parts[2];
    for (int p = 0; p < 2; p++) {
        int err;
        obj_writer_t *w = obj_mpu_part_begin(e->multi, "bkt", "mpu-3", ids[3], p + 1, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data + p * 150000, 150000), 0);
        obj_info_t pi;
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        parts[p].part = p + 1;
        snprintf(parts[p].etag, sizeof(parts[p].etag), "%s", pi.etag);
    }
    obj_info_t out;
    int why = 0;
    assert_int_equal(obj_mpu_complete(e->multi, "bkt", "mpu-3", ids[3], parts, 2, 0, NULL,
                                      OBJ_UNVERSIONED, &out, &why),
                     0);
    uint8_t *got = malloc(300000);
    int err;
    obj_reader_t *r = obj_open(e->multi, "bkt", "mpu-3", &out, &err);
    assert_non_null(r);
    assert_int_equal(obj_read(r, 0, got, 300000), 0);
    assert_memory_equal(got, data, 300000);
    obj_close(r);
    /* A heal of it goes to its set (nothing to fix). */
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->multi, "bkt", "mpu-3", &rep), 0);
    assert_int_equal(rep.blocks_fixed + rep.heads_fixed, 0);
    assert_true(rep.objects >= 1);
    for (int u = 0; u < 8; u++) {
        char k[16];
        snprintf(k, sizeof(k), "mpu-%d", u);
        if (u != 3) assert_int_equal(obj_mpu_abort(e->multi, "bkt", k, ids[u]), 0);
    }
    n = 0;
    assert_int_equal(obj_mpu_list_uploads(e->multi, "bkt", count_upload, &n), 0);
    assert_int_equal(n, 0);
    free(data);
    free(got);
}

/* Pool 1 of two sets, added to e->multi while it holds data. */
/* A store of the second pool that fails its block writes on demand (flaky_on): puts without
 * metadata, synchronous or not; its heads and reads still work. */
static drive_t *flaky_drive;
static int flaky_on;
static shard_ops_t flaky_ops;
static const shard_ops_t *local_ops;

static int flaky_put(void *ctx, const drive_id_t *id, const void *data, size_t len,
                     const void *meta, size_t ml)
{
    if (ctx == (void *)flaky_drive && flaky_on && !ml) return ERR_IO;
    return local_ops->put(ctx, id, data, len, meta, ml);
}

static int flaky_put_async(void *ctx, const drive_id_t *id, const void *data, size_t len,
                           const void *meta, size_t ml, drive_done_fn done, void *arg)
{
    if (ctx == (void *)flaky_drive && flaky_on && !ml) return ERR_IO;
    return local_ops->put_async(ctx, id, data, len, meta, ml, done, arg);
}

static void add_pool(env_t *e, uint32_t weight)
{
    for (int j = 0; j < 2; j++)
        e->psets[j] = new_set(e->dir, "p", j, e->pd + j * N);
    assert_int_equal(obj_set_add_pool(e->multi, e->psets, 2, weight, 0), 0);
}

/* How many of the n keys "<pfx>N" pool p holds, by asking its sets directly. */
static int held_by_pool1(env_t *e, const char *key)
{
    obj_info_t info;
    return obj_stat(e->psets[0], "bkt", key, &info) == 0 ||
           obj_stat(e->psets[1], "bkt", key, &info) == 0;
}

/*
 * Pools: a pool added while the sets hold data moves nothing; old keys stay
 * (overwrites included), new ones spread by weight, a draining pool takes
 * no new key but serves its own, listings merge every pool, an upload
 * stays in its pool whatever the weights do meanwhile, and a key that two
 * pools hold (writes racing over a weight change) is served by the newest.
 */
static void test_pools(void **state)
{
    env_t *e = *state;
    enum { OLD = 60, NEW = 200 };
    char key[32];
    for (int i = 0; i < OLD; i++) {
        snprintf(key, sizeof(key), "old-%03d", i);
        put_v(e->multi, key, i % 3 ? 300 : 70000, (uint32_t)i, OBJ_UNVERSIONED, NULL);
    }
    assert_int_equal(obj_set_pools(e->multi), 1);
    add_pool(e, 1);
    assert_int_equal(obj_set_pools(e->multi), 2);
    assert_int_equal(obj_set_count(e->multi), SETS + 2);
    assert_int_equal(obj_set_width(e->multi), (SETS + 2) * N);
    for (int i = 0; i < OLD; i++) {
        snprintf(key, sizeof(key), "old-%03d", i);
        assert_int_equal(obj_set_pool_of(e->multi, "bkt", key), 0);
        check(e->multi, key, i % 3 ? 300 : 70000, (uint32_t)i);
        /* Overwritten: still in pool 0, whatever placement would pick for a new key. */
        put_v(e->multi, key, 500, (uint32_t)i + 1000, OBJ_UNVERSIONED, NULL);
        assert_false(held_by_pool1(e, key));
        check(e->multi, key, 500, (uint32_t)i + 1000);
    }
    int in1 = 0;
    for (int i = 0; i < NEW; i++) {
        snprintf(key, sizeof(key), "new-%03d", i);
        put_v(e->multi, key, i % 4 ? 100 : 40000, (uint32_t)i + 5000, OBJ_UNVERSIONED, NULL);
        int p = obj_set_pool_of(e->multi, "bkt", key);
        assert_int_equal(p, held_by_pool1(e, key));
        in1 += p;
    }
    assert_true(in1 > NEW / 4 && in1 < NEW * 3 / 4); /* equal weights: about half each */
    for (int i = 0; i < NEW; i++) {
        snprintf(key, sizeof(key), "new-%03d", i);
        check(e->multi, key, i % 4 ? 100 : 40000, (uint32_t)i + 5000);
    }
    /* A listing merges both pools: every key once, in order. */
    char(*got)[64] = calloc(OLD + NEW + 8, 64);
    coll_t c = {got, 0, OLD + NEW + 8, 0, 0, 0};
    assert_int_equal(obj_list(e->multi, "bkt", NULL, NULL, collect, &c), 0);
    assert_int_equal(c.n, OLD + NEW);
    for (int i = 1; i < c.n; i++)
        assert_true(strcmp(got[i - 1], got[i]) < 0);

    /* Weights: pool 1 at 9 to 1 takes about 90% of new keys. */
    assert_int_equal(obj_set_pool_state(e->multi, 1, 9, 0), 0);
    int w1 = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "w-%04d", i);
        w1 += obj_set_pool_of(e->multi, "bkt", key);
    }
    assert_true(w1 > 820 && w1 < 970);

    /* Draining pool 1: new keys go to pool 0 alone; its own keys stay readable and writable. */
    assert_int_equal(obj_set_pool_state(e->multi, 1, 9, 1), 0);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "late-%03d", i);
        put_v(e->multi, key, 100, (uint32_t)i, OBJ_UNVERSIONED, NULL);
        assert_false(held_by_pool1(e, key));
    }
    for (int i = 0; i < NEW; i++) {
        snprintf(key, sizeof(key), "new-%03d", i);
        if (!held_by_pool1(e, key)) continue;
        put_v(e->multi, key, 200, (uint32_t)i + 7000, OBJ_UNVERSIONED, NULL);
        assert_true(held_by_pool1(e, key));
        check(e->multi, key, 200, (uint32_t)i + 7000);
    }
    assert_int_equal(obj_set_pool_state(e->multi, 1, 1, 0), 0);

    /* An upload stays in its pool: created with pool 1 active, finished with it draining. */
    const char *mk = NULL;
    for (int i = 0; i < 100 && !mk; i++) {
        snprintf(key, sizeof(key), "mpu-%03d", i);
        if (obj_set_pool_of(e->multi, "bkt", key) == 1) mk = key;
    }
    assert_non_null(mk);
    char id[33];
    assert_int_equal(obj_mpu_create(e->multi, "bkt", mk, NULL, NULL, 0, id), 0);
    assert_int_equal(obj_set_pool_state(e->multi, 1, 1, 1), 0);
    uint8_t part[1000];
    fill(part, sizeof(part), 3);
    int err;
    obj_writer_t *w = obj_mpu_part_begin(e->multi, "bkt", mk, id, 1, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, part, sizeof(part)), 0);
    obj_info_t pi;
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
    obj_mpu_part_t mp = {.part = 1};
    snprintf(mp.etag, sizeof(mp.etag), "%s", pi.etag);
    int why = 0;
    obj_info_t out;
    assert_int_equal(
        obj_mpu_complete(e->multi, "bkt", mk, id, &mp, 1, 0, NULL, OBJ_UNVERSIONED, &out, &why), 0);
    assert_true(held_by_pool1(e, mk));
    check(e->multi, mk, sizeof(part), 3);
    assert_int_equal(obj_set_pool_state(e->multi, 1, 1, 0), 0);

    /* One key in both pools (written to each pool's set directly, pool 1's later): the newest
     * is what every call and the listing see. */
    obj_set_t *p0 = e->sets[obj__in_pool(e->multi, 0, "bkt", "twice")],
              *p1 = e->psets[obj__in_pool(e->multi, 1, "bkt", "twice") - SETS];
    put_v(p0, "twice", 111, 1, OBJ_UNVERSIONED, NULL);
    put_v(p1, "twice", 222, 2, OBJ_UNVERSIONED, NULL);
    check(e->multi, "twice", 222, 2);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "twice"), 1);
    c = (coll_t){got, 0, OLD + NEW + 8, 0, 0, 0};
    assert_int_equal(obj_list(e->multi, "bkt", "twice", NULL, collect, &c), 0);
    assert_int_equal(c.n, 1);
    /* Deleted (unversioned): from both pools, or the older copy would be current again. */
    assert_int_equal(obj_delete(e->multi, "bkt", "twice"), 0);
    obj_info_t info;
    assert_int_equal(obj_stat(e->multi, "bkt", "twice", &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(p0, "bkt", "twice", &info), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(p1, "bkt", "twice", &info), ERR_NOT_FOUND);

    /* A write that began for a new key in pool 1 while another node created the key in pool
     * 0: refused at its commit (the retry goes to pool 0), never in two pools. */
    const char *mv = NULL;
    for (int i = 0; i < 100 && !mv; i++) {
        snprintf(key, sizeof(key), "move-%03d", i);
        if (obj_set_pool_of(e->multi, "bkt", key) == 1) mv = key;
    }
    assert_non_null(mv);
    w = obj_put_begin(e->multi, "bkt", mv, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, "late", 4), 0);
    put_v(e->sets[obj__in_pool(e->multi, 0, "bkt", mv)], mv, 300, 9, OBJ_UNVERSIONED, NULL);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), ERR_THROTTLED);
    assert_false(held_by_pool1(e, mv));
    check(e->multi, mv, 300, 9);
    put_v(e->multi, mv, 400, 10, OBJ_UNVERSIONED, NULL); /* the retry */
    assert_false(held_by_pool1(e, mv));
    check(e->multi, mv, 400, 10);
    free(got);
}

/* Every version of bucket "bkt" through the multi set: key, vid, etag, size, mtime, latest. */
typedef struct {
    char key[32], vid[24], etag[80];
    uint64_t size, mtime;
    int latest, marker;
} dver_t;
typedef struct {
    dver_t *v;
    int n, cap;
} dlist_t;

static int dcollect(void *arg, const char *key, const obj_info_t *info, int latest)
{
    dlist_t *c = arg;
    assert_true(c->n < c->cap);
    dver_t *v = &c->v[c->n++];
    snprintf(v->key, sizeof(v->key), "%s", key);
    snprintf(v->vid, sizeof(v->vid), "%s", info->vid[0] ? info->vid : "null");
    snprintf(v->etag, sizeof(v->etag), "%s", info->etag);
    v->size = info->size;
    v->mtime = info->mtime_ns;
    v->latest = latest;
    v->marker = info->marker;
    return 0;
}

static int dkeys(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)info;
    (void)latest;
    dlist_t *c = arg;
    if (c->n && strcmp(c->v[c->n - 1].key, key) == 0) return 0;
    assert_true(c->n < c->cap);
    snprintf(c->v[c->n++].key, sizeof(c->v[0].key), "%s", key);
    return 0;
}

/* One pass of the mover over pool 0's sets: every key it lists, moved. Returns versions moved. */
static uint64_t drain_pass(env_t *e)
{
    int first, draining, ns = obj_set_pool_sets(e->multi, 0, &first, &draining);
    assert_int_equal(ns, SETS);
    assert_true(draining);
    obj_move_report_t rep = {0};
    for (int j = first; j < first + ns; j++) {
        assert_true(obj_set_mover_here(e->multi, j));
        dlist_t keys = {calloc(256, sizeof(dver_t)), 0, 256};
        assert_int_equal(
            obj_list_versions_all(obj_set_sub(e->multi, j), "bkt", NULL, NULL, NULL, dkeys, &keys),
            0);
        for (int i = 0; i < keys.n; i++) {
            int rc = obj_move_key(e->multi, 0, "bkt", keys.v[i].key, &rep);
            if (rc) fprintf(stderr, "move of %s: %s\n", keys.v[i].key, err_name(rc));
            assert_int_equal(rc, 0);
        }
        free(keys.v);
    }
    return rep.versions;
}

static int pool0_versions(env_t *e)
{
    int total = 0;
    for (int j = 0; j < SETS; j++) {
        dlist_t c = {calloc(256, sizeof(dver_t)), 0, 256};
        assert_int_equal(obj_list_versions_all(e->sets[j], "bkt", NULL, NULL, NULL, dcollect, &c),
                         0);
        total += c.n;
        free(c.v);
    }
    return total;
}

static void check_version(obj_set_t *s, const char *key, const char *vid, size_t n, uint32_t seed)
{
    uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
    fill(want, n, seed);
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open_version(s, "bkt", key, vid, &info, &err);
    assert_non_null(r);
    assert_int_equal(info.size, n);
    assert_int_equal(obj_read(r, 0, got, n), 0);
    assert_memory_equal(got, want, n);
    obj_close(r);
    free(want);
    free(got);
}

/* obj__move_between: a write of the key straight into the source set (pool p), as a commit
 * that picked it before the key moved. */
typedef struct {
    env_t *e;
    int pool;
} late_t;

/* obj__move_between: the key's current version deleted by its id through the source. */
static int late_delete(void *arg, const char *key)
{
    late_t *lt = arg;
    int j = obj__in_pool(lt->e->multi, lt->pool, "bkt", key);
    obj_info_t cur;
    assert_int_equal(obj_stat(obj_set_sub(lt->e->multi, j), "bkt", key, &cur), 0);
    assert_int_equal(
        obj_delete_version(obj_set_sub(lt->e->multi, j), "bkt", key, cur.vid, NULL, NULL), 0);
    return 0;
}

/* obj__move_between: a new version, then the oldest deleted by its id, through the source. */
static char res_oldest[24];
static int late_put_and_delete(void *arg, const char *key)
{
    late_t *lt = arg;
    obj_set_t *src = obj_set_sub(lt->e->multi, obj__in_pool(lt->e->multi, lt->pool, "bkt", key));
    put_v(src, key, 900, 307, OBJ_VERSIONED, NULL);
    assert_int_equal(obj_delete_version(src, "bkt", key, res_oldest, NULL, NULL), 0);
    return 0;
}

/* obj__move_between: the mover is killed between its copies and the switch. */
static int killed_here(void *arg, const char *key)
{
    (void)arg;
    (void)key;
    return 1;
}

static int late_write(void *arg, const char *key)
{
    late_t *lt = arg;
    int j = obj__in_pool(lt->e->multi, lt->pool, "bkt", key);
    obj_set_t *src = obj_set_sub(lt->e->multi, j);
    int versioned = strcmp(key, "late-v") == 0;
    put_v(src, key, 900, versioned ? 303 : 304, versioned ? OBJ_VERSIONED : OBJ_UNVERSIONED, NULL);
    return 0;
}

/* obj__move_copied: the mover is killed after its first copy of a part. */
static int killed_after_a_part(void *arg, const char *bucket, const char *key)
{
    int *n = arg;
    (void)key;
    return strcmp(bucket, MPU_PARTS) == 0 && (*n)++ == 0;
}

/*
 * A move of a multipart object cut short (the mover killed, or paused for longer than the
 * reaper's grace) after it copied a part: the copy is named by the manifest copied before
 * it, so the reaper leaves it, and the next move finishes with the object whole. (Parts
 * were copied before their manifest: the target then held parts that nothing named, which
 * the reaper took once the move had lasted its grace.)
 */
static void test_drain_cut_between_parts(void **state)
{
    env_t *e = *state;
    char up[33];
    size_t psz = 150000;
    uint8_t *data = malloc(2 * psz), *got = malloc(2 * psz);
    fill(data, 2 * psz, 78);
    assert_int_equal(obj_mpu_create(e->multi, "bkt", "mp", NULL, NULL, 0, up), 0);
    obj_mpu_part_t parts[2];
    for (int p = 0; p < 2; p++) {
        int err;
        obj_writer_t *w = obj_mpu_part_begin(e->multi, "bkt", "mp", up, p + 1, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data + p * psz, psz), 0);
        obj_info_t pi;
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        parts[p].part = p + 1;
        snprintf(parts[p].etag, sizeof(parts[p].etag), "%s", pi.etag);
    }
    obj_info_t out;
    int why = 0, err;
    assert_int_equal(
        obj_mpu_complete(e->multi, "bkt", "mp", up, parts, 2, 0, NULL, OBJ_UNVERSIONED, &out, &why),
        0);
    add_pool(e, 1);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0);
    int copies = 0;
    obj__move_copied = killed_after_a_part;
    obj__move_copied_arg = &copies;
    obj_move_report_t mr = {0};
    assert_int_equal(obj_move_key(e->multi, 0, "bkt", "mp", &mr), ERR_BUSY);
    obj__move_copied = NULL;
    assert_int_equal(copies, 1);
    /* The reaper, over more than its grace: nothing to take. */
    obj_reaper_t *rp = obj_reaper_new(100);
    for (uint64_t now = 1000; now <= 1200; now += 100) {
        obj_reap_report_t rr = {0};
        obj_reap_internal(e->multi, rp, now, &rr);
        obj_reaper_sweep(rp, now);
        assert_int_equal(rr.parts_seen, 0);
        assert_int_equal(rr.parts_reaped, 0);
    }
    obj_reaper_free(rp);
    assert_true(drain_pass(e) >= 1);
    assert_int_equal(pool0_versions(e), 0);
    obj_reader_t *r = obj_open(e->multi, "bkt", "mp", &out, &err);
    assert_non_null(r);
    assert_int_equal(obj_read(r, 0, got, 2 * psz), 0);
    assert_memory_equal(got, data, 2 * psz);
    obj_close(r);
    free(data);
    free(got);
}

/* The second pool, its first set's store 0 flaky (flaky_put). */
static void add_flaky_pool(env_t *e)
{
    shard_store_t st[N];
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < N; i++) {
            char p[256];
            snprintf(p, sizeof(p), "%s/f%d", e->dir, j * N + i);
            drive_cfg_t c = {0};
            c.path = p;
            c.iu = 4096;
            c.segment_size = 4u << 20;
            c.capacity = 128u << 20;
            assert_int_equal(drive_open(&c, &e->pd[j * N + i]), 0);
            st[i] = shard_store_local(e->pd[j * N + i]);
        }
        if (j == 0) {
            local_ops = st[0].ops;
            flaky_ops = *st[0].ops;
            flaky_ops.put = flaky_put;
            if (flaky_ops.put_async) flaky_ops.put_async = flaky_put_async;
            flaky_ops.put_unsynced = NULL; /* (the refill's blocks: through put_async above) */
            flaky_ops.sync = NULL;
            flaky_drive = e->pd[0];
            st[0].ops = &flaky_ops;
        }
        int err;
        assert_non_null(e->psets[j] = obj_set_new(st, K, M, B, &err));
    }
    assert_int_equal(obj_set_add_pool(e->multi, e->psets, 2, 1, 0), 0);
}

/*
 * A drain into a pool whose store fails its block writes: the copies were acknowledged at the
 * write quorum, short of that store and noted for no heal, and the source's whole copies
 * dropped (a cluster probe lost 9 of 60 objects that way, a drive lost before the weekly
 * scanner came). A move's copy must be whole: the key stays in the source while a target
 * store fails, and the next pass, once it is back, moves it whole.
 */
static void test_drain_keeps_keys_a_short_copy_would_lose(void **state)
{
    env_t *e = *state;
    enum { KEYS = 12 };
    char k[32];
    for (int i = 0; i < KEYS; i++) {
        snprintf(k, sizeof(k), "sc%02d", i);
        put_v(e->multi, k, 100000, 300u + (uint32_t)i, OBJ_UNVERSIONED, NULL);
    }
    add_flaky_pool(e);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0);
    flaky_on = 1;
    int failed = 0;
    for (int j = 0; j < SETS; j++) {
        dlist_t keys = {calloc(256, sizeof(dver_t)), 0, 256};
        assert_int_equal(
            obj_list_versions_all(obj_set_sub(e->multi, j), "bkt", NULL, NULL, NULL, dkeys, &keys),
            0);
        obj_move_report_t rep = {0};
        for (int i = 0; i < keys.n; i++)
            failed += obj_move_key(e->multi, 0, "bkt", keys.v[i].key, &rep) != 0;
        free(keys.v);
    }
    /* The keys routed to the flaky set stayed in pool 0; the others moved. */
    int stayed = pool0_versions(e);
    print_message("with a target store failing: %d of %d keys stayed (%d moves failed)\n", stayed,
                  KEYS, failed);
    assert_true(stayed > 0);
    assert_int_equal(stayed, failed);
    for (int i = 0; i < KEYS; i++) {
        snprintf(k, sizeof(k), "sc%02d", i);
        check(e->multi, k, 100000, 300u + (uint32_t)i);
    }
    flaky_on = 0;
    (void)drain_pass(e);
    assert_int_equal(pool0_versions(e), 0);
    /* Every copy whole on the flaky set: each of its stores holds a block of each key there. */
    for (int i = 0; i < KEYS; i++) {
        snprintf(k, sizeof(k), "sc%02d", i);
        check(e->multi, k, 100000, 300u + (uint32_t)i);
        obj_info_t info;
        if (obj_stat(e->psets[0], "bkt", k, &info) != 0) continue;
        char bb[SHARD_MAX_BUCKET + 2];
        obj__blk_bucket(bb, "bkt");
        for (int s = 0; s < N; s++) {
            drive_id_t id = {bb, k, info.upload_id, (uint32_t)s};
            drive_stat_t ds;
            assert_int_equal(drive_stat(e->pd[s], &id, &ds, NULL, 0), 0);
        }
    }
}

/*
 * Draining: every version of every key a draining pool holds moves to the
 * other pool with its identity (version ids, ETags, sizes, Last-Modified,
 * delete markers, a multipart object's parts), the source keeps nothing a
 * listing finds, a second pass moves nothing, and a write that reached the
 * source after a key moved keeps the key there until the next pass, which
 * moves it too and keeps the earlier version as noncurrent.
 */
static void test_drain(void **state)
{
    env_t *e = *state;
    static const size_t sizes[] = {0, 100, 30000, 200000};
    char k[32];
    for (int i = 0; i < 16; i++) {
        snprintf(k, sizeof(k), "u%02d", i);
        put_v(e->multi, k, sizes[i % 4], (uint32_t)i, OBJ_UNVERSIONED, NULL);
    }
    obj_info_t vi[3];
    put_v(e->multi, "ver", 20, 101, OBJ_VERSIONED, &vi[0]);
    put_v(e->multi, "ver", 30000, 102, OBJ_VERSIONED, &vi[1]);
    obj_info_t mk;
    assert_int_equal(obj_delete_current(e->multi, "bkt", "ver", NULL, OBJ_VERSIONED, &mk), 0);
    put_v(e->multi, "ver", 500, 103, OBJ_VERSIONED, &vi[2]);
    /* A multipart object, and an upload in progress (it stays until completed). */
    char up[33], open_up[33];
    uint8_t *data = malloc(300000);
    fill(data, 300000, 77);
    assert_int_equal(obj_mpu_create(e->multi, "bkt", "mp", NULL, NULL, 0, up), 0);
    assert_int_equal(obj_mpu_create(e->multi, "bkt", "open", NULL, NULL, 0, open_up), 0);
    obj_mpu_part_t parts[2];
    for (int p = 0; p < 2; p++) {
        int err;
        obj_writer_t *w = obj_mpu_part_begin(e->multi, "bkt", "mp", up, p + 1, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data + p * 150000, 150000), 0);
        obj_info_t pi;
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        parts[p].part = p + 1;
        snprintf(parts[p].etag, sizeof(parts[p].etag), "%s", pi.etag);
    }
    obj_info_t out;
    int why = 0;
    assert_int_equal(
        obj_mpu_complete(e->multi, "bkt", "mp", up, parts, 2, 0, NULL, OBJ_UNVERSIONED, &out, &why),
        0);

    dlist_t before = {calloc(256, sizeof(dver_t)), 0, 256};
    assert_int_equal(obj_list_versions(e->multi, "bkt", NULL, NULL, NULL, dcollect, &before), 0);
    assert_int_equal(before.n, 16 + 4 + 1);

    add_pool(e, 1);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0);
    assert_true(drain_pass(e) >= 16 + 4 + 1);
    assert_int_equal(pool0_versions(e), 0);

    /* Everything where it was, read from pool 1. */
    dlist_t after = {calloc(256, sizeof(dver_t)), 0, 256};
    assert_int_equal(obj_list_versions(e->multi, "bkt", NULL, NULL, NULL, dcollect, &after), 0);
    assert_int_equal(after.n, before.n);
    for (int i = 0; i < before.n; i++) {
        assert_string_equal(after.v[i].key, before.v[i].key);
        assert_string_equal(after.v[i].vid, before.v[i].vid);
        assert_string_equal(after.v[i].etag, before.v[i].etag);
        assert_int_equal(after.v[i].size, before.v[i].size);
        assert_int_equal(after.v[i].mtime, before.v[i].mtime);
        assert_int_equal(after.v[i].latest, before.v[i].latest);
        assert_int_equal(after.v[i].marker, before.v[i].marker);
    }
    for (int i = 0; i < 16; i++) {
        snprintf(k, sizeof(k), "u%02d", i);
        assert_int_equal(obj_set_pool_of(e->multi, "bkt", k), 1);
        check(e->multi, k, sizes[i % 4], (uint32_t)i);
    }
    check(e->multi, "ver", 500, 103);
    check_version(e->multi, "ver", vi[0].vid, 20, 101);
    check_version(e->multi, "ver", vi[1].vid, 30000, 102);
    uint8_t *got = malloc(300000);
    int err;
    obj_reader_t *r = obj_open(e->multi, "bkt", "mp", &out, &err);
    assert_non_null(r);
    assert_int_equal(obj_read(r, 0, got, 300000), 0);
    assert_memory_equal(got, data, 300000);
    const int *nums;
    const uint64_t *psz;
    assert_int_equal(obj_read_parts(r, &nums, &psz), 2);
    obj_close(r);

    /* Again: nothing left to move. */
    assert_int_equal(drain_pass(e), 0);

    /* A conditional write that picked the source before the key moved and commits after:
     * refused (the client's retry goes to the key's pool), nothing changed. */
    int s0 = obj__in_pool(e->multi, 0, "bkt", "ver");
    {
        obj_writer_t *w = obj_put_begin(e->sets[s0], "bkt", "ver", &err);
        assert_non_null(w);
        obj_put_set_versioning(w, OBJ_VERSIONED);
        obj_cond_t c = OBJ_COND_NONE;
        c.none_match = 1;
        obj_put_set_cond(w, &c);
        assert_int_equal(obj_put_write(w, data, 10), 0);
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), ERR_THROTTLED);
    }
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "ver"), 1);
    check(e->multi, "ver", 500, 103);
    /* An unconditional one too: it would cover nothing there. */
    {
        obj_writer_t *w = obj_put_begin(e->sets[s0], "bkt", "ver", &err);
        assert_non_null(w);
        obj_put_set_versioning(w, OBJ_VERSIONED);
        assert_int_equal(obj_put_write(w, data, 10), 0);
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), ERR_THROTTLED);
    }
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "ver"), 1);

    /* Writes that reach the source between a key's copy and its switch: the move stops
     * there (ERR_BUSY) and the next pass moves the new version over the copy, keeping the
     * copied one as noncurrent (versioned) or replacing it. */
    put_v(e->multi, "late-v", 300, 301, OBJ_VERSIONED, &vi[0]);
    put_v(e->multi, "late-u", 300, 302, OBJ_UNVERSIONED, NULL);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "late-v"), 1); /* new keys: pool 1 */
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 0), 0);
    assert_int_equal(obj_set_pool_state(e->multi, 1, 1, 1), 0); /* now drain pool 1 into 0 */
    late_t lt = {e, 1};
    obj__move_between = late_write;
    obj__move_between_arg = &lt;
    obj_move_report_t rep = {0};
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "late-v", &rep), ERR_BUSY);
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "late-u", &rep), ERR_BUSY);
    obj__move_between = NULL;
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "late-v"), 1);
    check(e->multi, "late-v", 900, 303);
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "late-v", &rep), 0);
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "late-u", &rep), 0);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "late-v"), 0);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "late-u"), 0);
    check(e->multi, "late-v", 900, 303);
    check_version(e->multi, "late-v", vi[0].vid, 300, 301);
    check(e->multi, "late-u", 900, 304);
    dlist_t lv = {calloc(16, sizeof(dver_t)), 0, 16};
    assert_int_equal(obj_list_versions(e->multi, "bkt", "late-", NULL, NULL, dcollect, &lv), 0);
    assert_int_equal(lv.n, 3); /* late-u once, late-v twice */
    free(lv.v);
    /* The only version deleted by its id through the source between copy and switch: gone
     * everywhere (the copy is hidden by the source's tombstone, moved over it). */
    put_v(obj_set_sub(e->multi, obj__in_pool(e->multi, 1, "bkt", "gone-v")), "gone-v", 300, 305,
          OBJ_VERSIONED, NULL);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "gone-v"), 1);
    obj__move_between = late_delete;
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "gone-v", &rep), ERR_BUSY);
    obj__move_between = NULL;
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "gone-v", &rep), 0);
    obj_info_t gi;
    assert_int_equal(obj_stat(e->multi, "bkt", "gone-v", &gi), ERR_NOT_FOUND);
    dlist_t gv = {calloc(16, sizeof(dver_t)), 0, 16};
    assert_int_equal(obj_list_versions(e->multi, "bkt", "gone-", NULL, NULL, dcollect, &gv), 0);
    assert_int_equal(gv.n, 0);
    free(gv.v);
    /* A new version and the deletion of an old one by its id through the source between
     * copy and switch: the old one does not come back from the target's copy (the copy of
     * the current version is taken back when the switch is refused, and the next look
     * retires the target's copies of versions the source no longer has). */
    obj_set_t *rs = obj_set_sub(e->multi, obj__in_pool(e->multi, 1, "bkt", "res"));
    obj_info_t r0;
    put_v(rs, "res", 300, 310, OBJ_VERSIONED, &r0);
    put_v(rs, "res", 300, 311, OBJ_VERSIONED, NULL);
    snprintf(res_oldest, sizeof(res_oldest), "%s", r0.vid);
    obj__move_between = late_put_and_delete;
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "res", &rep), ERR_BUSY);
    obj__move_between = NULL;
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "res", &rep), 0);
    check(e->multi, "res", 900, 307);
    dlist_t rv = {calloc(16, sizeof(dver_t)), 0, 16};
    assert_int_equal(obj_list_versions(e->multi, "bkt", "res", NULL, NULL, dcollect, &rv), 0);
    assert_int_equal(rv.n, 2);
    for (int i = 0; i < rv.n; i++)
        assert_string_not_equal(rv.v[i].vid, r0.vid);
    free(rv.v);
    /*
     * A mover killed between its copies and the switch, then versions deleted by their ids
     * (through the cluster's set, as S3 does): the target's copies go with them. Before,
     * they came back: listed and read from the target, and the key, left with no version in
     * the source, was never looked at again (a six-node probe killing the mover).
     */
    obj_info_t cv[3];
    obj_set_t *cs = obj_set_sub(e->multi, obj__in_pool(e->multi, 1, "bkt", "cut"));
    for (int i = 0; i < 3; i++)
        put_v(cs, "cut", 300, 320 + (uint32_t)i, OBJ_VERSIONED, &cv[i]);
    obj_set_t *ks = obj_set_sub(e->multi, obj__in_pool(e->multi, 1, "bkt", "cut2"));
    obj_info_t kv[2];
    for (int i = 0; i < 2; i++)
        put_v(ks, "cut2", 300, 330 + (uint32_t)i, OBJ_VERSIONED, &kv[i]);
    obj__move_between = killed_here;
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "cut", &rep), ERR_BUSY);
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "cut2", &rep), ERR_BUSY);
    obj__move_between = NULL;
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "cut"), 1); /* the source's still */
    for (int i = 2; i >= 0; i--)
        assert_int_equal(obj_delete_version(e->multi, "bkt", "cut", cv[i].vid, NULL, NULL), 0);
    assert_int_equal(obj_delete_version(e->multi, "bkt", "cut2", kv[1].vid, NULL, NULL), 0);
    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(obj_stat(e->multi, "bkt", "cut", &gi), ERR_NOT_FOUND);
        for (int i = 0; i < 3; i++) {
            obj_reader_t *cr = obj_open_version(e->multi, "bkt", "cut", cv[i].vid, &gi, &err);
            assert_null(cr);
            assert_int_equal(err, ERR_NOT_FOUND);
        }
        check(e->multi, "cut2", 300, 330);
        dlist_t cl = {calloc(16, sizeof(dver_t)), 0, 16};
        assert_int_equal(obj_list_versions(e->multi, "bkt", "cut", NULL, NULL, dcollect, &cl), 0);
        assert_int_equal(cl.n, 1); /* cut2's first version, once */
        assert_string_equal(cl.v[0].vid, kv[0].vid);
        free(cl.v);
        /* And once the mover is back: the same. */
        assert_int_equal(obj_move_key(e->multi, 1, "bkt", "cut", &rep), 0);
        assert_int_equal(obj_move_key(e->multi, 1, "bkt", "cut2", &rep), 0);
    }
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "cut2"), 0);
    /*
     * A key in both pools mid-move (copies made, the mover killed before the switch), and a
     * version written into the source since: listed once, newest first, one latest, in
     * pages of every size (both pools hold copies of the same versions, and the target's
     * current one is not the key's).
     */
    obj_info_t mv[5];
    obj_set_t *ms = obj_set_sub(e->multi, obj__in_pool(e->multi, 1, "bkt", "mm"));
    for (int i = 0; i < 4; i++)
        put_v(ms, "mm", 100, 340 + (uint32_t)i, OBJ_VERSIONED, &mv[i]);
    obj__move_between = killed_here;
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "mm", &rep), ERR_BUSY);
    obj__move_between = NULL;
    put_v(ms, "mm", 100, 344, OBJ_VERSIONED, &mv[4]);
    for (int page = 1; page <= 6; page++) {
        vcoll_t pg = {calloc(64, sizeof(ver_t)), 0, 64, page, 0};
        char ak[64] = "", av[24] = "";
        for (int guard = 0; guard < 32; guard++) {
            pg.taken = 0;
            int had = pg.n;
            int rc = obj_list_versions_delim(e->multi, "bkt", "mm", NULL, ak[0] ? ak : NULL,
                                             ak[0] ? av : NULL, (size_t)page, vcollect, &pg);
            assert_true(rc == 0 || rc == 1);
            if (pg.n == had || rc == 0) break;
            snprintf(ak, sizeof(ak), "%s", pg.v[pg.n - 1].key);
            snprintf(av, sizeof(av), "%s", pg.v[pg.n - 1].vid);
        }
        if (pg.n != 5)
            for (int i = 0; i < 5; i++)
                fprintf(stderr, "want %s\n", mv[4 - i].vid);
        if (pg.n != 5)
            for (int i = 0; i < pg.n; i++)
                fprintf(stderr, "page %d: %s %s%s\n", page, pg.v[i].key, pg.v[i].vid,
                        pg.v[i].latest ? " latest" : "");
        assert_int_equal(pg.n, 5);
        for (int i = 0; i < 5; i++) {
            assert_string_equal(pg.v[i].vid, mv[4 - i].vid);
            assert_int_equal(pg.v[i].latest, i == 0);
        }
        free(pg.v);
    }
    assert_int_equal(obj_move_key(e->multi, 1, "bkt", "mm", &rep), 0);
    check(e->multi, "mm", 100, 344);
    /* A version with no head on the key's first store (acknowledged while that store was
     * away, or a cleanup cut short there): moved too, not left behind unseen. */
    {
        obj_set_t *fs = obj_set_sub(e->multi, obj__in_pool(e->multi, 1, "bkt", "fs"));
        obj_info_t f0, f1;
        put_v(fs, "fs", 70000, 350, OBJ_VERSIONED, &f0);
        put_v(fs, "fs", 100, 351, OBJ_VERSIONED, &f1);
        uint32_t first = obj__first_store(fs, "bkt", "fs");
        char fpos[OBJ_VID_LEN + 1];
        obj__vid_of(fpos, f0.mtime_ns);
        drive_id_t fid = {"bkt", "fs", fpos, first};
        assert_int_equal(fs->st[first].ops->del(fs->st[first].ctx, &fid), 0);
        assert_int_equal(obj_move_key(e->multi, 1, "bkt", "fs", &rep), 0);
        assert_int_equal(obj_set_pool_of(e->multi, "bkt", "fs"), 0);
        check_version(e->multi, "fs", f0.vid, 70000, 350);
        check(e->multi, "fs", 100, 351);
        dlist_t fl = {calloc(16, sizeof(dver_t)), 0, 16};
        assert_int_equal(obj_list_versions_all(fs, "bkt", "fs", NULL, NULL, dcollect, &fl), 0);
        assert_int_equal(fl.n, 0); /* nothing left in the drained pool */
        free(fl.v);
    }
    assert_int_equal(obj_set_pool_state(e->multi, 1, 1, 0), 0);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0);

    /* The upload begun in pool 0 completes there, and the next pass moves it. */
    {
        obj_writer_t *w = obj_mpu_part_begin(e->multi, "bkt", "open", open_up, 1, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data, 1000), 0);
        obj_info_t pi;
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &pi), 0);
        obj_mpu_part_t one = {.part = 1};
        snprintf(one.etag, sizeof(one.etag), "%s", pi.etag);
        assert_int_equal(obj_mpu_complete(e->multi, "bkt", "open", open_up, &one, 1, 0, NULL,
                                          OBJ_UNVERSIONED, &out, &why),
                         0);
    }
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "open"), 0);
    assert_true(drain_pass(e) >= 1);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "open"), 1);
    assert_int_equal(pool0_versions(e), 0);
    r = obj_open(e->multi, "bkt", "open", &out, &err);
    assert_non_null(r);
    assert_int_equal(obj_read(r, 0, got, 1000), 0);
    assert_memory_equal(got, data, 1000);
    obj_close(r);
    free(got);
    free(data);
    free(before.v);
    free(after.v);
}

/* obj__routed_hook: the key moves off pool 0 (its switch lands) once a read has been
 * routed to it, and not again. */
typedef struct {
    env_t *e;
    int moves;
} move_after_route_t;

static void move_after_route(void *arg, const char *key)
{
    move_after_route_t *m = arg;
    if (m->moves++) return;
    obj__routed_hook = NULL; /* (the move reads heads too) */
    obj_move_report_t rep = {0};
    assert_int_equal(obj_move_key(m->e->multi, 0, "bkt", key, &rep), 0);
}

/*
 * A review: a key deleted in a draining pool. Its tombstone (not listed: the drain finds the
 * pool empty) counted as the pool holding the key, and a new write of it went back to the
 * pool the operator may now remove.
 */
static void test_delete_in_a_draining_pool(void **state)
{
    env_t *e = *state;
    obj_info_t info;
    put_v(e->multi, "dk", 5000, 7, OBJ_UNVERSIONED, &info);
    add_pool(e, 1);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0); /* pool 0 drains */
    assert_int_equal(obj_delete(e->multi, "bkt", "dk"), 0);
    (void)drain_pass(e);
    assert_int_equal(pool0_versions(e), 0);
    put_v(e->multi, "dk", 5000, 8, OBJ_UNVERSIONED, &info);
    assert_int_equal(obj_set_pool_of(e->multi, "bkt", "dk"), 1);
    assert_int_equal(pool0_versions(e), 0);
    assert_true(held_by_pool1(e, "dk"));
}

/* obj__move_between: the mover is killed between its copies and its switch. */
static int killed_before_the_switch(void *arg, const char *key)
{
    (void)key;
    ++*(int *)arg;
    return 1;
}

/*
 * A review: an unversioned DELETE cut short (its tombstones on three stores of six) in a
 * draining pool, whose key a move cut short had already copied to the active pool. The
 * heal finishes the delete where it was cut (obj__finish_cut_delete); the copy the move
 * made must go too, as a whole delete's does (obj_delete_if), or, once the tombstones are
 * dropped, the copy is the key's only head: the deleted object back.
 */
static void test_cut_delete_finished_in_a_draining_pool(void **state)
{
    env_t *e = *state;
    obj_info_t v, info;
    put_v(e->multi, "cd", 5000, 9, OBJ_UNVERSIONED, &v);
    add_pool(e, 1);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0); /* pool 0 drains */
    int copies = 0;
    obj__move_between = killed_before_the_switch;
    obj__move_between_arg = &copies;
    obj_move_report_t mr = {0};
    int mrc = obj_move_key(e->multi, 0, "bkt", "cd", &mr);
    obj__move_between = NULL;
    print_message("move: %d, copies %d, pool 1 holds it: %d\n", mrc, copies,
                  held_by_pool1(e, "cd"));
    assert_true(held_by_pool1(e, "cd"));
    /* The DELETE, cut after its tombstones on stores 0-2 of the key's set in pool 0. */
    obj_set_t *src = e->multi->sub[obj__in_pool(e->multi, 0, "bkt", "cd")];
    assert_int_equal(obj_stat(src, "bkt", "cd", &info), 0);
    obj_info_t tomb;
    obj_info_copy(&tomb, &info);
    tomb.deleted = 1;
    tomb.marker = 0;
    tomb.umeta_len = 0;
    tomb.mtime_ns = tomb.stamp_ns = obj__now_after(&info);
    shard_cond_t bound = {.mode = SHARD_IF_AT_MOST, .stamp = info.stamp_ns};
    memcpy(bound.upload, info.upload_id, sizeof(bound.upload));
    memcpy(bound.self, info.upload_id, sizeof(bound.self));
    uint32_t failed = 0;
    int refused = 0, first_err = 0;
    assert_int_equal(obj__heads_to(src, "bkt", "cd", "", &tomb, NULL, 0x7, &bound, &failed,
                                   &refused, &first_err),
                     3);
    obj__wall_skew_ns = 11 * 1000000000ll; /* older than any delete takes */
    obj_heal_report_t rep = {0};
    int hrc = obj_heal(e->multi, "bkt", "cd", &rep);
    obj__wall_skew_ns = 0;
    int st = obj_stat(e->multi, "bkt", "cd", &info);
    print_message("heal %d; stat %d; pool 1 holds it: %d\n", hrc, st, held_by_pool1(e, "cd"));
    assert_int_equal(st, ERR_NOT_FOUND);
    assert_false(held_by_pool1(e, "cd"));
}

/*
 * A head read routed to a draining pool just before its key's switch lands
 * there reads the key where it went: the current version, not the move's
 * tombstone (which made PUTs into a bucket whose record was moving fail
 * NoSuchBucket, the record's standing read finding "nothing"). Both reads:
 * obj_stat's newest head and obj_stat_standing's head that stands.
 */
static void test_read_routed_before_switch(void **state)
{
    env_t *e = *state;
    obj_info_t want[2], got;
    put_v(e->multi, "rec-a", 300, 51, OBJ_UNVERSIONED, &want[0]);
    put_v(e->multi, "rec-b", 300, 52, OBJ_UNVERSIONED, &want[1]);
    add_pool(e, 1);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0);
    for (int standing = 0; standing < 2; standing++) {
        const char *key = standing ? "rec-b" : "rec-a";
        assert_int_equal(obj_set_pool_of(e->multi, "bkt", key), 0);
        move_after_route_t m = {e, 0};
        obj__routed_hook = move_after_route;
        obj__routed_hook_arg = &m;
        int rc = standing ? obj_stat_standing(e->multi, "bkt", key, &got)
                          : obj_stat(e->multi, "bkt", key, &got);
        obj__routed_hook = NULL;
        assert_int_equal(m.moves, 1);
        assert_int_equal(rc, 0);
        assert_int_equal(obj_set_pool_of(e->multi, "bkt", key), 1);
        assert_string_equal(got.etag, want[standing].etag);
        assert_int_equal(got.stamp_ns, want[standing].stamp_ns);
        check(e->multi, key, 300, 51 + (uint32_t)standing);
    }
}

static void test_refuses_mixed_sets(void **state)
{
    (void)state;
    char dir[] = "/tmp/wl-multi-mix-XXXXXX";
    assert_non_null(mkdtemp(dir));
    drive_t *d[N + 4];
    shard_store_t st[N + 4];
    for (int i = 0; i < N + 4; i++) {
        char p[256];
        snprintf(p, sizeof(p), "%s/d%d", dir, i);
        drive_cfg_t c = {0};
        c.path = p;
        c.iu = 4096;
        c.segment_size = 4u << 20;
        c.capacity = 64u << 20;
        assert_int_equal(drive_open(&c, &d[i]), 0);
        st[i] = shard_store_local(d[i]);
    }
    int err;
    obj_set_t *a = obj_set_new(st, K, M, B, &err), *b = obj_set_new(st + N, 2, 2, B, &err);
    obj_set_t *two[2] = {a, b};
    assert_null(obj_set_multi(two, 2, 1, &err));
    assert_int_equal(err, ERR_INVAL);
    assert_null(obj_set_multi(two, 0, 1, &err));
    obj_set_free(a);
    obj_set_free(b);
    for (int i = 0; i < N + 4; i++)
        drive_close(d[i]);
    tl_rm_rf(dir);
}

static int retired_cb(void *arg, const char *key, const char *pos, const obj_info_t *tomb)
{
    char *out = arg;
    snprintf(out + strlen(out), 1024 - strlen(out), "%s@%s,", key, pos);
    return !tomb->deleted || tomb->marker; /* (never: a tombstone) */
}

/*
 * A review: the healers' walk of tombstoned positions found the mark a mover leaves in a
 * draining pool (a tombstone of its own upload id, the moved version's stamp), and its heal
 * dropped it a minute on, as a delete's tombstones go once every store has them. A commit
 * routed there before the move then found nothing in its way. The mark stays.
 */
static void test_a_moved_mark_is_no_deletes_tombstone(void **state)
{
    env_t *e = *state;
    obj__head_drop_delay_ns = 100000000ull; /* 0.1 s */
    put_v(e->multi, "mv", 5000, 9, OBJ_UNVERSIONED, NULL);
    add_pool(e, 1);
    assert_int_equal(obj_set_heal_start(e->multi), 0);
    assert_int_equal(obj_set_pool_state(e->multi, 0, 1, 1), 0); /* pool 0 drains */
    obj_move_report_t mr = {0};
    assert_int_equal(obj_move_key(e->multi, 0, "bkt", "mv", &mr), 0);
    obj_set_t *src = e->multi->sub[obj__in_pool(e->multi, 0, "bkt", "mv")];
    obj_info_t h;
    assert_int_equal(obj__newest_head(src, "bkt", "mv", &h), 0);
    assert_true(obj__moved_mark(&h));
    char walked[1024] = "";
    assert_int_equal(obj_list_retired(src, "bkt", NULL, NULL, retired_cb, walked), 0);
    assert_string_equal(walked, "");
    usleep(300000); /* older than twice the drop delay */
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal_retired(src, "bkt", "mv", "", &rep), 0);
    assert_int_equal(obj_heal(src, "bkt", "mv", &rep), 0);
    usleep(500000); /* a drop noted then would have fallen due */
    assert_int_equal(obj__newest_head(src, "bkt", "mv", &h), 0);
    assert_true(obj__moved_mark(&h));
    check(e->multi, "mv", 5000, 9);
}

/* The walk of tombstoned positions, one position a page, resumed from (after, after_pos):
 * every position once, in order. */
typedef struct {
    char key[16], pos[OBJ_VID_LEN + 1];
    int n;
} one_pos_t;

static int one_pos(void *arg, const char *key, const char *pos, const obj_info_t *tomb)
{
    one_pos_t *o = arg;
    (void)tomb;
    snprintf(o->key, sizeof(o->key), "%s", key);
    snprintf(o->pos, sizeof(o->pos), "%s", pos);
    o->n++;
    return 1;
}

static void test_retired_walk_pages(void **state)
{
    env_t *e = *state;
    obj_set_t *s = e->sets[0];
    obj_info_t v[4];
    for (int i = 0; i < 4; i++)
        put_v(s, "pk", 3000 + (size_t)i, 50 + i, OBJ_VERSIONED, &v[i]);
    for (int i = 0; i < 3; i++)
        assert_int_equal(obj_delete_version(s, "bkt", "pk", v[i].vid, NULL, NULL), 0);
    put_v(s, "pa", 100, 1, OBJ_UNVERSIONED, NULL);
    put_v(s, "pz", 100, 1, OBJ_UNVERSIONED, NULL);
    assert_int_equal(obj_delete(s, "bkt", "pa"), 0);
    assert_int_equal(obj_delete(s, "bkt", "pz"), 0);
    char all[1024] = "", paged[1024] = "";
    assert_int_equal(obj_list_retired(s, "bkt", NULL, NULL, retired_cb, all), 0);
    char want[1024];
    snprintf(want, sizeof(want), "pa@,pk@%s,pk@%s,pk@%s,pz@,", v[2].vid, v[1].vid, v[0].vid);
    /* (positions in index order: newer versions first) */
    if (strcmp(all, want) != 0)
        snprintf(want, sizeof(want), "pa@,pk@%s,pk@%s,pk@%s,pz@,", v[0].vid, v[1].vid, v[2].vid);
    assert_string_equal(all, want);
    one_pos_t o = {0};
    int pages = 0, rc;
    do {
        o.n = 0;
        rc = obj_list_retired(s, "bkt", pages ? o.key : NULL, o.pos, one_pos, &o);
        assert_true(rc >= 0);
        if (o.n)
            snprintf(paged + strlen(paged), sizeof(paged) - strlen(paged), "%s@%s,", o.key, o.pos);
        pages++;
    } while (rc == 1 && pages < 50);
    assert_string_equal(paged, all);
    assert_int_equal(pages, 6); /* five positions, then an empty page */
}

int main(void)
{
    log_level = LOG_LVL_ERROR;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_placement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merged_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merged_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_keeps_keys_a_short_copy_would_lose, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drain_cut_between_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_in_a_draining_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_delete_finished_in_a_draining_pool, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_routed_before_switch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_moved_mark_is_no_deletes_tombstone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retired_walk_pages, setup, teardown),
        cmocka_unit_test(test_refuses_mixed_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
