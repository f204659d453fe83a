/*
 * The object layer (server/obj_*.c) over the fixture's six drives:
 * round trips verified by content, overwrites, degraded reads with up to m
 * failing or corrupting stores, m+1 failures refused, writes with failing
 * stores, two gateways over the same stores, write quorum, hedged reads and
 * writes, the heal queue and the drops.
 */
#include "obj_fixture.h"

#include "common/uring.h"

static void test_round_trip(void **state)
{
    env_t *e = *state;
    size_t sizes[] = {0, 1, 4095, K * B, K * B + 1, 5u * 1024 * 1024 + 7};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *data = malloc(n + 1);
        char key[32], md5[33];
        obj_info_t info;
        fill(data, n, (uint32_t)i);
        snprintf(key, sizeof(key), "obj/%zu", i);
        put(e, key, data, n, &info);
        md5hex(data, n, md5);
        assert_string_equal(info.etag, md5);
        expect(e, key, data, n);
        obj_info_t st;
        assert_int_equal(obj_stat(e->set, "bkt", key, &st), 0);
        assert_string_equal(st.etag, md5);
        assert_string_equal(st.content_type, "application/x-test");
        assert_int_equal(st.umeta_len, 11);
        assert_memory_equal(st.umeta, "color\0blue\0", 11);
        free(data);
    }
}

/*
 * Pooled writes: the writer takes each buffer and gives it back once its MD5 is done, on a commit
 * and on an abort alike; the ETag is the MD5 of the pieces in order (they end mid-block, so the
 * next piece's MD5 begins with the last one's tail).
 */
static void test_pooled_writes(void **state)
{
    env_t *e = *state;
    bufpool_t *pool = bufpool_new(64u << 20);
    size_t pieces[] = {100, 300 * 1024 + 7, 1u << 20, 65 * 1024 + 63, 5};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
        n += pieces[i];
    uint8_t *data = malloc(n);
    fill(data, n, 77);
    /* Told the size, none, or a wrong one (the encoder lays the bytes out again). */
    uint64_t hints[] = {n, 0, n / 2, 2 * n, 1};
    for (int abort_it = 0; abort_it < 6; abort_it++) {
        int err = 0;
        obj_writer_t *w = obj_put_begin(e->set, "bkt", "pooled", &err);
        assert_non_null(w);
        obj_put_size_hint(w, hints[abort_it % 5]);
        size_t off = 0;
        for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
            uint8_t *b = bufpool_get(pool, pieces[i]);
            memcpy(b, data + off, pieces[i]);
            assert_int_equal(obj_put_write_pooled(w, b, pieces[i], pool), 0);
            off += pieces[i];
        }
        bufpool_stats_t bs;
        bufpool_stats(pool, &bs);
        assert_true(bs.out_bytes > 0); /* the last piece is the writer's until its MD5 is done */
        if (abort_it == 5) {
            obj_put_abort(w);
        } else {
            obj_info_t info;
            char md5[33];
            assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &info), 0);
            md5hex(data, n, md5);
            assert_string_equal(info.etag, md5);
            expect(e, "pooled", data, n);
        }
        bufpool_stats(pool, &bs);
        assert_int_equal(bs.out_bytes, 0);
    }
    /* A writer that failed gives a pooled buffer back at once. */
    int err = 0;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", "pooled2", &err);
    assert_non_null(w);
    (void)obj_put_etag(w); /* the writes are over */
    assert_int_equal(obj_put_write_pooled(w, bufpool_get(pool, 4096), 4096, pool), ERR_CLOSED);
    bufpool_stats_t bs;
    bufpool_stats(pool, &bs);
    assert_int_equal(bs.out_bytes, 0);
    obj_put_abort(w);
    free(data);
    bufpool_free(pool);
}

static void test_overwrite_drops_old_blocks(void **state)
{
    env_t *e = *state;
    size_t n = 3u * K * B + 100;
    uint8_t *a = malloc(n), *b = malloc(n);
    fill(a, n, 11);
    fill(b, n, 12);
    put(e, "ow", a, n, NULL);
    put(e, "ow", b, n, NULL);
    expect(e, "ow", b, n);
    /* Only the new version's blocks remain: 4 stripes on drive 0. */
    int blocks = 0;
    assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "ow", NULL, count_cb, &blocks), 0);
    assert_int_equal(blocks, 4);
    free(a);
    free(b);
}

/*
 * An overwrite drops the old version's blocks on every store at once. The
 * odd stores take deletes without waiting (the fixture's del_async): each is
 * held until all six stores' deletes have begun. The even ones delete on a
 * thread that waits: each waits there until all six have begun. One store
 * after another, or waiting for each delete before the next, a delete would
 * wait alone (for a deadline: the test then fails rather than hangs).
 */
static pthread_mutex_t drop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drop_cv = PTHREAD_COND_INITIALIZER;
static unsigned drop_began, drop_alone;
static struct held_del {
    faulty_t *f;
    char bucket[SHARD_MAX_BUCKET + 2], key[8], version[40];
    uint32_t shard;
    drive_done_fn done;
    void *arg;
} held_dels[K + M];
static int n_held;

/* A store's delete began (drop_mu held): once all have, the held ones run. */
static void drop_begins(uint32_t shard)
{
    drop_began |= 1u << (shard & 63);
    if (drop_began != (1u << (K + M)) - 1) return;
    pthread_cond_broadcast(&drop_cv);
    for (int i = 0; i < n_held; i++) {
        struct held_del *h = &held_dels[i];
        drive_id_t id = {h->bucket, h->key, h->version, h->shard};
        int rc = rf_del_async_inner(h->f, &id, h->done, h->arg);
        if (rc) h->done(h->arg, rc == ERR_NOT_FOUND ? 0 : rc);
    }
    n_held = 0;
}

static void meet_other_drops(const drive_id_t *id)
{
    if (strcmp(id->key, "par") != 0) return;
    pthread_mutex_lock(&drop_mu);
    drop_begins(id->shard);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    int rc = 0;
    while (drop_began != (1u << (K + M)) - 1 && rc == 0)
        rc = pthread_cond_timedwait(&drop_cv, &drop_mu, &dl);
    if (rc) {
        drop_alone++;
        drop_began = (1u << (K + M)) - 1 - (1u << (id->shard & 63)); /* let the rest go */
        drop_begins(id->shard);
    }
    pthread_mutex_unlock(&drop_mu);
}

static int hold_until_all_began(faulty_t *f, const drive_id_t *id, drive_done_fn done, void *arg)
{
    if (strcmp(id->key, "par") != 0) return 0;
    pthread_mutex_lock(&drop_mu);
    struct held_del *h = &held_dels[n_held++];
    *h = (struct held_del){.f = f, .shard = id->shard, .done = done, .arg = arg};
    snprintf(h->bucket, sizeof(h->bucket), "%s", id->bucket);
    snprintf(h->key, sizeof(h->key), "%s", id->key);
    snprintf(h->version, sizeof(h->version), "%s", id->version);
    drop_begins(id->shard);
    pthread_mutex_unlock(&drop_mu);
    return 1;
}

static void test_overwrite_drops_on_every_store_at_once(void **state)
{
    env_t *e = *state;
    size_t n = K * B; /* one stripe: one block a store */
    uint8_t *a = malloc(n), *b = malloc(n);
    fill(a, n, 21);
    fill(b, n, 22);
    put(e, "par", a, n, NULL);
    rf_del_hook = meet_other_drops;
    rf_del_async_hook = hold_until_all_began;
    put(e, "par", b, n, NULL);
    rf_del_hook = NULL;
    rf_del_async_hook = NULL;
    assert_int_equal(drop_began, (1u << (K + M)) - 1);
    assert_int_equal(drop_alone, 0);
    expect(e, "par", b, n);
    int blocks = 0;
    assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "par", NULL, count_cb, &blocks), 0);
    assert_int_equal(blocks, 1);
    free(a);
    free(b);
}

/*
 * A reader streaming a version keeps its blocks while a PUT replaces it and
 * a DELETE removes the replacement; the blocks go when the reader closes.
 */
static void test_reader_outlives_overwrite(void **state)
{
    env_t *e = *state;
    size_t n = 3u * K * B + 100;
    uint8_t *a = malloc(n), *b = malloc(n), *got = malloc(n);
    fill(a, n, 21);
    fill(b, n, 22);
    put(e, "rd", a, n, NULL);
    obj_info_t info;
    int err, blocks = 0;
    obj_reader_t *r = obj_open(e->set, "bkt", "rd", &info, &err);
    assert_non_null(r);
    assert_int_equal(obj_read(r, 0, got, B), 0); /* part of it before the overwrite */
    put(e, "rd", b, n, NULL);
    assert_int_equal(obj_delete(e->set, "bkt", "rd"), 0);
    assert_int_equal(obj_stat(e->set, "bkt", "rd", &info), ERR_NOT_FOUND);
    assert_int_equal(obj_read(r, B, got + B, n - B), 0);
    assert_memory_equal(got, a, n);
    /* b had no reader: gone at once; a still there (4 stripes on drive 0). */
    assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "rd", NULL, count_cb, &blocks), 0);
    assert_int_equal(blocks, 4);
    obj_close(r);
    blocks = 0;
    assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "rd", NULL, count_cb, &blocks), 0);
    assert_int_equal(blocks, 0);
    free(a);
    free(b);
    free(got);
}

typedef struct {
    env_t *e;
    int id;
} racer_t;

static void *racer(void *arg)
{
    racer_t *rc = arg;
    size_t n = K * B + 1000;
    uint8_t *d = malloc(n);
    for (int i = 0; i < 12; i++) {
        uint32_t seed = (uint32_t)(rc->id * 100 + i);
        fill(d, n, seed);
        if (rc->id == 3 && i % 3 == 2) {
            int r = obj_delete(rc->e->set, "bkt", "hot");
            assert_true(r == 0 || r == ERR_NOT_FOUND);
        } else {
            put(rc->e, "hot", d, n, NULL);
        }
    }
    free(d);
    return NULL;
}

/* Concurrent PUTs and DELETEs of one key: every state read is one whole version. */
static void test_concurrent_writers_one_key(void **state)
{
    env_t *e = *state;
    pthread_t th[4];
    racer_t rc[4];
    for (int i = 0; i < 4; i++) {
        rc[i] = (racer_t){e, i};
        pthread_create(&th[i], NULL, racer, &rc[i]);
    }
    size_t n = K * B + 1000;
    uint8_t *got = malloc(n), *want = malloc(n);
    for (int round = 0; round < 200; round++) {
        obj_info_t info;
        int err;
        obj_reader_t *r = obj_open(e->set, "bkt", "hot", &info, &err);
        if (!r) {
            assert_true(err == ERR_NOT_FOUND || err == ERR_AGAIN);
            continue;
        }
        assert_int_equal(info.size, n);
        assert_int_equal(obj_read(r, 0, got, n), 0);
        obj_close(r);
        int match = 0; /* it must be exactly one of the versions written */
        for (int id = 0; id < 4 && !match; id++) {
            for (int i = 0; i < 12 && !match; i++) {
                fill(want, n, (uint32_t)(id * 100 + i));
                match = memcmp(got, want, n) == 0;
            }
        }
        assert_true(match);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* After the race: the key reads (or is deleted) and at most one version's blocks are left. */
    obj_info_t info;
    int blocks = 0;
    if (obj_stat(e->set, "bkt", "hot", &info) == 0) {
        fill(want, n, 0);
        obj_reader_t *r = obj_open(e->set, "bkt", "hot", &info, &blocks);
        assert_non_null(r);
        assert_int_equal(obj_read(r, 0, got, n), 0);
        obj_close(r);
        blocks = 0;
        assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "hot", NULL, count_cb, &blocks), 0);
        assert_int_equal(blocks, 2);
    } else {
        assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "hot", NULL, count_cb, &blocks), 0);
        assert_int_equal(blocks, 0);
    }
    free(got);
    free(want);
}

/* ---- two gateways (two sets over the same stores, as two nodes): the stores decide ---- */

typedef struct {
    obj_set_t *set;
    int id, rounds, conditional, versioned, ok, refused;
    const char *key;
} gw_t;

static size_t gw_size(int id, int round)
{
    return (id + round) % 2 ? 3000 + (size_t)id : K * B + 77 + (size_t)id; /* inline, blocks */
}

static void *gw_writer(void *arg)
{
    gw_t *g = arg;
    uint8_t *data = malloc(K * B + 100);
    for (int i = 0; i < g->rounds; i++) {
        size_t n = gw_size(g->id, i);
        fill(data, n, (uint32_t)(g->id * 1000 + i));
        int err;
        obj_writer_t *w = obj_put_begin(g->set, "bkt", g->key, &err);
        assert_non_null(w);
        if (g->versioned) obj_put_set_versioning(w, OBJ_VERSIONED);
        obj_cond_t c = {.none_match = 1, .if_size = -1, .if_mtime_s = -1};
        if (g->conditional) obj_put_set_cond(w, &c);
        assert_int_equal(obj_put_write(w, data, n), 0);
        int rc = obj_put_commit(w, NULL, NULL, 0, NULL);
        if (rc == 0)
            g->ok++;
        else if (rc == ERR_PRECOND || rc == ERR_THROTTLED)
            g->refused++;
        else
            fail_msg("commit: %s", err_name(rc));
    }
    free(data);
    return NULL;
}

/* Whatever the key reads must be exactly one write of one of the writers, whole. */
static void gw_check_read(obj_set_t *set, const char *key, int writers, int rounds)
{
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open(set, "bkt", key, &info, &err);
    assert_non_null(r);
    uint8_t *got = malloc(info.size + 1), *want = malloc(K * B + 100);
    assert_int_equal(obj_read(r, 0, got, info.size), 0);
    obj_close(r);
    int match = 0;
    for (int id = 0; id < writers && !match; id++)
        for (int i = 0; i < rounds && !match; i++) {
            size_t n = gw_size(id, i);
            fill(want, n, (uint32_t)(id * 1000 + i));
            match = n == info.size && memcmp(got, want, n) == 0;
        }
    assert_true(match);
    char md5[33];
    md5hex(got, info.size, md5);
    assert_string_equal(md5, info.etag);
    free(got);
    free(want);
}

/*
 * The current heads of key once writers are done: one version stands (its
 * heads on k stores, or on all its copies) and every other head a store
 * holds is older (an undone commit may leave an older version's head where
 * the winner, sparse, put none): no reader can pick anything but the winner.
 */
static void gw_check_converged(env_t *e, const char *key)
{
    uint8_t meta[HEAD_MAX];
    obj_info_t *o = malloc(sizeof(*o) * N);
    int have[N] = {0}, top = -1;
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", key, "", (uint32_t)i};
        drive_stat_t st;
        if (drive_stat(e->f[i].d, &id, &st, meta, sizeof(meta)) != 0) continue;
        assert_int_equal(obj_meta_decode(meta, st.meta_len, &o[i]), 0);
        have[i] = 1;
        if (top < 0 || o[i].stamp_ns > o[top].stamp_ns) top = i;
    }
    assert_true(top >= 0);
    int count = 0;
    for (int i = 0; i < N; i++) {
        if (!have[i]) continue;
        if (!strcmp(o[i].upload_id, o[top].upload_id))
            count++;
        else
            assert_true(o[i].stamp_ns < o[top].stamp_ns);
    }
    assert_true(count >= (o[top].sparse ? __builtin_popcount(o[top].inl) : K));
    free(o);
}

static int gw_counts[2]; /* versions listed, of which latest */

static int gw_count_version(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)arg;
    (void)key;
    if (!info || strcmp(key, "vrace") != 0) return 0;
    gw_counts[0]++;
    gw_counts[1] += latest;
    return 0;
}

static void test_two_gateways(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e); /* its own key locks: another node */
    obj_set_t *sets[2] = {e->set, other};
    /* Unconditional writes racing on one key, two writers through each gateway. */
    gw_t g[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        g[i] = (gw_t){.set = sets[i % 2], .id = i, .rounds = 12, .key = "race"};
        pthread_create(&th[i], NULL, gw_writer, &g[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int ok = 0;
    for (int i = 0; i < 4; i++)
        ok += g[i].ok;
    assert_true(ok > 0);
    gw_check_converged(e, "race");
    gw_check_read(e->set, "race", 4, 12);
    gw_check_read(other, "race", 4, 12);
    /* At most the winner's blocks are left (the losers' went, and what each replaced). */
    int blocks = 0;
    assert_int_equal(drive_list(e->f[0].d, "bkt\x01", "race", NULL, count_cb, &blocks), 0);
    assert_true(blocks <= 2);
    /* Versioned: every acknowledged write is a version, none lost between the gateways. */
    for (int i = 0; i < 4; i++) {
        g[i] = (gw_t){.set = sets[i % 2], .id = i, .rounds = 6, .key = "vrace", .versioned = 1};
        pthread_create(&th[i], NULL, gw_writer, &g[i]);
    }
    ok = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ok += g[i].ok;
    }
    gw_check_converged(e, "vrace");
    int versions = 0, latest = 0;
    gw_counts[0] = gw_counts[1] = 0;
    assert_int_equal(obj_list_versions(e->set, "bkt", "vrace", NULL, NULL, gw_count_version, NULL),
                     0);
    versions = gw_counts[0];
    latest = gw_counts[1];
    assert_int_equal(versions, ok);
    assert_int_equal(latest, 1);
    /* Conditional creates (If-None-Match: *) racing through both: exactly one wins. */
    for (int round = 0; round < 10; round++) {
        char key[32];
        snprintf(key, sizeof(key), "cond%d", round);
        gw_t c[2];
        pthread_t ct[2];
        for (int i = 0; i < 2; i++) {
            c[i] = (gw_t){.set = sets[i], .id = i, .rounds = 1, .key = key, .conditional = 1};
            pthread_create(&ct[i], NULL, gw_writer, &c[i]);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(ct[i], NULL);
        assert_true(c[0].ok + c[1].ok <= 1);
        if (c[0].ok + c[1].ok == 1) {
            gw_check_converged(e, key);
            gw_check_read(other, key, 2, 1);
        }
    }
    obj_set_free(other);
}

/* A store that missed a write gets its head and blocks back from obj_heal; a second pass has
 * nothing to do; afterwards m other stores may fail and the object still reads. */
static void test_heal(void **state)
{
    env_t *e = *state;
    size_t n = 2 * K * B + 999; /* three stripes */
    uint8_t *data = malloc(n);
    fill(data, n, 77);
    e->f[2].fail_write = 1;
    put(e, "healme", data, n, NULL);
    e->f[2].fail_write = 0;
    /* Without healing, store 2 plus two others failing is one too many. */
    e->f[0].fail_read = e->f[1].fail_read = 1;
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open(e->set, "bkt", "healme", &info, &err);
    uint8_t *got = malloc(n);
    assert_true(!r || obj_read(r, 0, got, n) != 0);
    if (r) obj_close(r);
    e->f[0].fail_read = e->f[1].fail_read = 0;
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->set, "bkt", "healme", &rep), 0);
    assert_int_equal(rep.objects, 1);
    assert_int_equal(rep.heads_fixed, 1);
    assert_int_equal(rep.blocks_fixed, 3);
    assert_int_equal(rep.failed, 0);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_heal(e->set, "bkt", "healme", &rep), 0);
    assert_int_equal(rep.heads_fixed + rep.blocks_fixed, 0);
    e->f[0].fail_read = e->f[1].fail_read = 1;
    expect(e, "healme", data, n);
    e->f[0].fail_read = e->f[1].fail_read = 0;
    /* A block that rots on its drive is rewritten too. */
    e->f[4].corrupt_read = 1;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_heal(e->set, "bkt", "healme", &rep), 0);
    e->f[4].corrupt_read = 0;
    assert_int_equal(rep.blocks_fixed, 3);
    free(got);
    free(data);
}

/*
 * A stripe's blocks in one submission (obj__block_batch, uring.h): objects with blocks the
 * drives read in place (256 KiB), read whole and in ranges, healthy, with a block rotten
 * below the drive's checks, with a store failing, with both (m = 2), and with a block its
 * drive cannot begin (read whole beside the ring's): every byte right,
 * and the reads went through the ring (uring_reads). Also stripe by stripe with the next one
 * read ahead, as a GET streams. Local drives only; unit_obj_threads runs it again without
 * io_uring (pool threads).
 */
static void test_stripe_reads_in_one_submission(void **state)
{
    env_t *e = *state;
    if (remote) skip();
    int ring = uring_usable(); /* else (unit_obj_threads) the same reads go to pool threads */
    obj_set_t *small = e->set;
    e->set = gateway_with_blocks(e, 256u << 10);
    /* (one stripe, two and a short one, one short stripe: its blocks are whole pages too) */
    const size_t sizes[] = {4 * (256u << 10), 2 * 4 * (256u << 10) + 300 * 1024 + 17, 700001};
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "big%d", i);
        uint8_t *data = malloc(sizes[i]);
        fill(data, sizes[i], 40 + (uint32_t)i);
        put(e, key, data, sizes[i], NULL);
        for (int fault = 0; fault < 5; fault++) {
            e->f[1].corrupt_read = fault == 1 || fault == 3;
            e->f[2].fail_read = fault == 2 || fault == 3;
            e->f[3].begin_again = fault == 4; /* read whole, beside the ring's */
            uint64_t before = uring_reads();
            expect(e, key, data, sizes[i]); /* (unaligned buffers: the drives copy, done at once) */
            /* Into an aligned buffer (as the gateway's): blocks land in it. Whole, then
             * from a block boundary on, then from inside a block. */
            obj_info_t info;
            int err;
            obj_reader_t *r = obj_open(e->set, "bkt", key, &info, &err);
            assert_non_null(r);
            uint8_t *got = NULL;
            assert_int_equal(posix_memalign((void **)&got, 4096, sizes[i]), 0);
            const uint64_t from[] = {0, 256u << 10, 1000};
            for (int j = 0; j < 3; j++) {
                memset(got, 0, sizes[i]);
                assert_int_equal(obj_read(r, from[j], got, sizes[i] - from[j]), 0);
                assert_memory_equal(got, data + from[j], sizes[i] - from[j]);
            }
            /* Stripe by stripe, the next one read ahead while this one is used (as a GET
             * streams): the read-ahead goes through the reader's own ring. */
            const uint64_t sdata = 4 * (256u << 10);
            uint8_t *piece[2] = {NULL, NULL};
            assert_int_equal(posix_memalign((void **)&piece[0], 4096, sdata), 0);
            assert_int_equal(posix_memalign((void **)&piece[1], 4096, sdata), 0);
            int cur = 0;
            uint64_t n0 = sizes[i] < sdata ? sizes[i] : sdata;
            assert_int_equal(obj_read(r, 0, piece[cur], n0), 0);
            for (uint64_t off = 0; off < sizes[i];) {
                uint64_t n = sizes[i] - off < sdata ? sizes[i] - off : sdata;
                uint64_t next = off + n, nn = sizes[i] - next < sdata ? sizes[i] - next : sdata;
                if (next < sizes[i]) obj_read_ahead(r, next, piece[!cur], nn);
                assert_memory_equal(piece[cur], data + off, n);
                if (next >= sizes[i]) break;
                memset(piece[cur], 0, sdata);
                cur = !cur;
                assert_int_equal(obj_read(r, next, piece[cur], nn), 0);
                off = next;
            }
            /* A read-ahead nobody reads: the reader closes over it. */
            if (sizes[i] > sdata) obj_read_ahead(r, sdata, piece[!cur], sdata);
            obj_close(r);
            free(piece[0]);
            free(piece[1]);
            free(got);
            if (ring ? uring_reads() - before < 4 : uring_reads() != before)
                fail_msg("object %d fault %d: %llu reads through rings", i, fault,
                         (unsigned long long)(uring_reads() - before));
        }
        e->f[1].corrupt_read = e->f[2].fail_read = e->f[3].begin_again = 0;
        free(data);
    }
    obj_set_free(e->set);
    e->set = small;
}

/* Whether store i holds a head of key at the current position. */
static int has_head(env_t *e, int i, const char *key)
{
    drive_id_t id = {"bkt", key, "", (uint32_t)i};
    drive_stat_t st;
    return e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &st, NULL, 0) == 0;
}

/* Every head record of key at the current position gone from every store (a delete's
 * tombstones, as the heal thread drops them a minute later). */
static void drop_tombstones(env_t *e, const char *key)
{
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", key, "", (uint32_t)i};
        int rc = drive_delete(e->f[i].d, &id);
        assert_true(rc == 0 || rc == ERR_NOT_FOUND);
    }
}

/*
 * A refill (obj_refill.c): the blocks a heal rebuilds are written without
 * the heal waiting, and the object's head only once they are durable. Store
 * 1 (asynchronous puts) misses an object; its block writes are held: the
 * heal returns with them in flight and no head written; released, the
 * drain counts them and the head, and m other stores can then go. Block
 * writes that fail (answered with an error) are counted as failures and
 * leave no head behind; a heal after that puts everything back.
 */
static void test_refill_heads_after_blocks(void **state)
{
    env_t *e = *state;
    size_t n = 2 * K * B + 999; /* three stripes */
    uint8_t *data = malloc(n);
    fill(data, n, 91);
    e->f[1].fail_write = 1;
    put(e, "rf1", data, n, NULL);
    put(e, "rf2", data, n, NULL);
    e->f[1].fail_write = 0;
    assert_false(has_head(e, 1, "rf1"));

    obj_refill_t *rf = obj_refill_new(4u << 20);
    assert_non_null(rf);
    e->f[1].hold_blocks = 1;
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal_via(rf, e->set, "bkt", "rf1", NULL, &rep), 0);
    assert_int_equal(rep.objects, 1);
    assert_int_equal(rep.blocks_checked, 3 * N);
    assert_int_equal(e->f[1].n_held, 3);
    /* Its blocks are not durable: no head names them yet (nothing else can write it). */
    assert_false(has_head(e, 1, "rf1"));
    assert_int_equal(rep.heads_fixed + rep.blocks_fixed, 0);
    release_blocks(&e->f[1], 0);
    obj_refill_drain(rf, &rep);
    assert_int_equal(rep.blocks_fixed, 3);
    assert_int_equal(rep.heads_fixed, 1);
    assert_int_equal(rep.failed, 0);
    assert_true(has_head(e, 1, "rf1"));
    e->f[0].fail_read = e->f[2].fail_read = 1;
    expect(e, "rf1", data, n);
    e->f[0].fail_read = e->f[2].fail_read = 0;

    /* Block writes that fail once in flight: failures, and no head on that store. */
    e->f[1].hold_blocks = 1;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_heal_via(rf, e->set, "bkt", "rf2", NULL, &rep), 0);
    assert_int_equal(e->f[1].n_held, 3);
    release_blocks(&e->f[1], ERR_IO);
    obj_refill_drain(rf, &rep);
    assert_int_equal(rep.blocks_fixed, 0);
    assert_int_equal(rep.heads_fixed, 0);
    assert_int_equal(rep.failed, 3);
    assert_false(has_head(e, 1, "rf2"));
    obj_refill_free(rf);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_heal(e->set, "bkt", "rf2", &rep), 0);
    assert_int_equal(rep.blocks_fixed, 3);
    assert_int_equal(rep.heads_fixed, 1);
    e->f[0].fail_read = e->f[2].fail_read = 1;
    expect(e, "rf2", data, n);
    e->f[0].fail_read = e->f[2].fail_read = 0;
    free(data);
}

static void test_degraded_reads(void **state)
{
    env_t *e = *state;
    size_t n = 2u * 1024 * 1024 + 333;
    uint8_t *data = malloc(n);
    fill(data, n, 21);
    put(e, "deg", data, n, NULL);
    /* Every pattern of up to m failing stores, some failing, some rotting. */
    for (uint32_t mask = 0; mask < (1u << N); mask++) {
        int nb = __builtin_popcount(mask);
        if (nb > M) continue;
        int j = 0;
        for (int i = 0; i < N; i++) {
            e->f[i].fail_read = (mask >> i & 1) && (j % 2 == 0);
            e->f[i].corrupt_read = (mask >> i & 1) && (j++ % 2 == 1);
        }
        expect(e, "deg", data, n);
    }
    /* m+1 failing stores: a clear error naming them, never wrong bytes. */
    for (int i = 0; i < N; i++)
        e->f[i].fail_read = e->f[i].corrupt_read = 0;
    e->f[0].fail_read = e->f[1].corrupt_read = e->f[2].fail_read = 1;
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open(e->set, "bkt", "deg", &info, &err);
    assert_non_null(r);
    uint8_t *got = malloc(n);
    assert_int_equal(obj_read(r, 0, got, n), ERR_UNRECOVERABLE);
    assert_int_equal(obj_read_missing(r) & 0x7, 0x7);
    obj_close(r);
    for (int i = 0; i < N; i++)
        e->f[i].fail_read = e->f[i].corrupt_read = 0;
    free(got);
    free(data);
}

static void test_writes_with_failing_stores(void **state)
{
    env_t *e = *state;
    size_t n = 1u * 1024 * 1024 + 5;
    uint8_t *a = malloc(n), *b = malloc(n);
    fill(a, n, 31);
    fill(b, n, 32);
    /* m stores down: the PUT succeeds and reads back. */
    e->f[1].fail_write = e->f[4].fail_write = 1;
    put(e, "fw", a, n, NULL);
    e->f[1].fail_write = e->f[4].fail_write = 0;
    expect(e, "fw", a, n);
    /* m+1 stores down: the PUT fails and the previous version stays whole. */
    e->f[0].fail_write = e->f[2].fail_write = e->f[3].fail_write = 1;
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", "fw", &err);
    int rc = obj_put_write(w, b, n);
    if (rc == 0)
        rc = obj_put_commit(w, NULL, NULL, 0, NULL);
    else
        obj_put_abort(w);
    assert_int_equal(rc, ERR_UNRECOVERABLE);
    for (int i = 0; i < N; i++)
        e->f[i].fail_write = 0;
    expect(e, "fw", a, n);
    free(a);
    free(b);
}

static int list_cb(void *arg, const char *key, const obj_info_t *info)
{
    char *out = arg;
    (void)info;
    strcat(out, key);
    strcat(out, ",");
    return 0;
}

/* A PUT of one piece, its result (put() asserts success). */
static int put_rc(env_t *e, const char *key, const uint8_t *data, size_t n)
{
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    if (!w) return err; /* refused at once (too few stores up for the quorum) */
    int rc = obj_put_write(w, data, n);
    if (rc == 0)
        rc = obj_put_commit(w, "application/x-test", NULL, 0, NULL);
    else
        obj_put_abort(w);
    return rc;
}

/* A write quorum of k+1: acknowledged with one store away, refused (and gone) with two. */
static void test_write_quorum(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_write_quorum(e->set, K - 1), ERR_INVAL);
    assert_int_equal(obj_set_write_quorum(e->set, N + 1), ERR_INVAL);
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0);
    obj_set_inline_max(e->set, 4096);
    size_t big = 2 * K * B + 77;
    uint8_t *data = malloc(big);
    fill(data, big, 91);
    e->f[3].fail_write = 1;
    put(e, "q/one-away", data, big, NULL);
    put(e, "q/one-away-small", data, 1000, NULL);
    e->f[1].fail_write = 1;
    size_t sizes[] = {big, 1000};
    const char *keys[] = {"q/two-away", "q/two-away-small"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(put_rc(e, keys[i], data, sizes[i]), ERR_UNRECOVERABLE);
        /*
         * The blocks of the large one failed on two stores: nothing was committed.
         * The small one's only round (its heads) found the two failing: its heads
         * stand on the other four (k), so it stays, whole, in doubt (the client was
         * told it failed; S3 leaves a 5xx's outcome open), and is healed.
         */
        obj_info_t info;
        if (i == 0)
            assert_int_equal(obj_stat(e->set, "bkt", keys[i], &info), ERR_NOT_FOUND);
        else if (obj_stat(e->set, "bkt", keys[i], &info) == 0)
            expect(e, keys[i], data, sizes[i]);
    }
    /* Stores known to be away before the write: refused before anything is written. */
    e->f[1].sick = e->f[3].sick = 1;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(put_rc(e, "q/sick-away", data, sizes[i]), ERR_UNRECOVERABLE);
        obj_info_t info;
        assert_int_equal(obj_stat(e->set, "bkt", "q/sick-away", &info), ERR_NOT_FOUND);
    }
    e->f[1].sick = e->f[3].sick = 0;
    e->f[1].fail_write = e->f[3].fail_write = 0;
    expect(e, "q/one-away", data, big);
    expect(e, "q/one-away-small", data, 1000);
    free(data);
}

/*
 * Writes acknowledged short of a store are healed by the queue once it is
 * back, with no heal call: afterwards two other stores can go.
 */
typedef struct {
    const char *keep; /* an upload id */
    int n;            /* blocks of other uploads */
} other_blocks_t;

static int count_other_blocks(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    other_blocks_t *ob = arg;
    (void)st;
    ob->n += strcmp(id->version, ob->keep) != 0;
    return 0;
}

typedef struct {
    const shard_store_t *st;
    drive_id_t id;
    uint8_t meta[HEAD_MAX];
    size_t ml;
    shard_cond_t cond;
    int rc, submitted, done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} head_put_t;

static void head_put_done(void *arg, int rc)
{
    head_put_t *h = arg;
    pthread_mutex_lock(&h->mu);
    h->rc = rc;
    h->done = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void *plain_head_put(void *arg)
{
    head_put_t *h = arg;
    head_put_done(h, h->st->ops->put(h->st->ctx, &h->id, NULL, 0, h->meta, h->ml));
    return NULL;
}

static void *cond_head_put(void *arg)
{
    head_put_t *h = arg;
    int rc = h->st->ops->put_head(h->st->ctx, &h->id, NULL, 0, h->meta, h->ml, &h->cond,
                                  head_put_done, h);
    pthread_mutex_lock(&h->mu);
    h->submitted = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (rc) head_put_done(h, rc);
    return NULL;
}

static void head_put_init(head_put_t *h, const shard_store_t *st, const obj_info_t *info)
{
    memset(h, 0, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->st = st;
    h->id = (drive_id_t){"bkt", "gate", "p", 0};
    h->ml = obj_meta_encode(info, h->meta, sizeof(h->meta));
    assert_true(h->ml > 0);
}

/*
 * A conditional head write is judged against every write of that identity
 * before it, including a plain one still in flight: here a version's
 * tombstone (its delete by id), held at the flush, and an archive of the
 * version under SHARD_IF_KEPT. The archive must be refused. Judged against
 * what the drive had indexed, it was taken and landed after the tombstone:
 * the deleted version back (a 3-node probe's racing PUT, marker and deletes
 * by id, one store of six). Locally and through a node serving its peers.
 */
static void test_condition_sees_plain_head_in_flight(void **state)
{
    env_t *e = *state;
    const shard_store_t *st = &e->f[0].in;
    obj_info_t v, tomb, arch;
    obj_info_clear(&v);
    v.stamp_ns = v.mtime_ns = 1000;
    snprintf(v.upload_id, sizeof(v.upload_id), "%032d", 7);
    snprintf(v.etag, sizeof(v.etag), "%032d", 1);
    snprintf(v.content_type, sizeof(v.content_type), "x");
    v.layout = (ers_layout_t){K, M, B, 1000};
    v.size = 1000;
    tomb = v;
    tomb.deleted = 1;
    tomb.stamp_ns = 2000;
    arch = v;
    arch.stamp_ns = 3000; /* newer than the tombstone: only SHARD_IF_KEPT's rule refuses it */

    head_put_t h0, a, b;
    head_put_init(&h0, st, &v);
    assert_int_equal(st->ops->put(st->ctx, &h0.id, NULL, 0, h0.meta, h0.ml), 0);

    /* The drives' next flush held at a gate (testlib): the tombstone queued or being
     * committed, not yet indexed. */
    int (*real_fdatasync)(int) = drive_io.fdatasync;
    tl_gate_arm(real_fdatasync);
    drive_io.fdatasync = tl_gated_fdatasync;
    head_put_init(&a, st, &tomb);
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, plain_head_put, &a), 0);
    tl_gate_wait_held();

    head_put_init(&b, st, &arch);
    b.cond = (shard_cond_t){.mode = SHARD_IF_KEPT, .stamp = arch.stamp_ns};
    memcpy(b.cond.upload, v.upload_id, sizeof(b.cond.upload));
    assert_int_equal(pthread_create(&tb, NULL, cond_head_put, &b), 0);
    /* A fixed build holds the conditional put until the tombstone is in; one that is not
     * takes it at once. A moment either way, then the flush goes on. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&b.mu);
    while (!b.submitted && pthread_cond_timedwait(&b.cv, &b.mu, &ts) == 0)
        ;
    pthread_mutex_unlock(&b.mu);
    tl_gate_open();
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_mutex_lock(&b.mu);
    while (!b.done)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    drive_io.fdatasync = real_fdatasync;

    assert_int_equal(a.rc, 0);
    assert_int_equal(b.rc, ERR_PRECOND);
    uint8_t meta[HEAD_MAX];
    drive_stat_t ds;
    obj_info_t got;
    assert_int_equal(st->ops->stat(st->ctx, &h0.id, &ds, meta, sizeof(meta)), 0);
    assert_int_equal(obj_meta_decode(meta, ds.meta_len, &got), 0);
    assert_true(got.deleted);
    assert_int_equal(got.stamp_ns, 2000);
}

/* A head at h->id (meta of info), put plainly: what the store holds before a delete. */
static void head_set(const shard_store_t *st, const drive_id_t *id, obj_info_t *v, uint64_t stamp,
                     int upload, int deleted)
{
    obj_info_clear(v);
    v->stamp_ns = v->mtime_ns = stamp;
    snprintf(v->upload_id, sizeof(v->upload_id), "%032d", upload);
    snprintf(v->etag, sizeof(v->etag), "%032d", 1);
    v->deleted = deleted;
    v->layout = (ers_layout_t){K, M, B, 10};
    v->size = deleted ? 0 : 10;
    uint8_t meta[HEAD_MAX];
    size_t ml = obj_meta_encode(v, meta, sizeof(meta));
    assert_true(ml > 0);
    assert_int_equal(st->ops->put(st->ctx, id, NULL, 0, meta, ml), 0);
}

/* The upload id of the head st holds at id (0 when none). */
static int head_upload(const shard_store_t *st, const drive_id_t *id)
{
    uint8_t meta[HEAD_MAX];
    drive_stat_t ds;
    obj_info_t got;
    int rc = st->ops->stat(st->ctx, id, &ds, meta, sizeof(meta));
    if (rc == ERR_NOT_FOUND) return 0;
    assert_int_equal(rc, 0);
    assert_int_equal(obj_meta_decode(meta, ds.meta_len, &got), 0);
    return atoi(got.upload_id);
}

/* Whether st holds the head of version upload at id. */
static int head_is(const shard_store_t *st, const drive_id_t *id, const char *upload)
{
    uint8_t meta[HEAD_MAX];
    drive_stat_t ds;
    obj_info_t got;
    if (st->ops->stat(st->ctx, id, &ds, meta, sizeof(meta)) != 0) return 0;
    return obj_meta_decode(meta, ds.meta_len, &got) == 0 && !strcmp(got.upload_id, upload);
}

/*
 * A head's delete under a condition (del_head), judged by the store as a put of nothing
 * would be: an unversioned DELETE that read version 1 removes it (or anything older, or its
 * own tombstone), never version 2 that another node committed after the read; an undo
 * removes only the very head it read (SHARD_IF_UPLOAD with a stamp). Locally and through a
 * node serving its peers (the condition on the wire). Without the condition the store
 * removed version 2.
 */
static void test_conditional_head_delete(void **state)
{
    env_t *e = *state;
    const shard_store_t *st = &e->f[0].in;
    drive_id_t id = {"bkt", "cdel", "", 0};
    obj_info_t v1, v2, t;
    head_set(st, &id, &v1, 1000, 1, 0);
    shard_cond_t read1 = {.mode = SHARD_IF_AT_MOST, .stamp = v1.stamp_ns};
    memcpy(read1.upload, v1.upload_id, sizeof(read1.upload));
    snprintf(read1.self, sizeof(read1.self), "%032d", 9);

    /* Version 2 landed after the read: refused, kept. */
    head_set(st, &id, &v2, 2000, 2, 0);
    assert_int_equal(st->ops->del_head(st->ctx, &id, &read1), ERR_PRECOND);
    assert_int_equal(head_upload(st, &id), 2);
    /* The same stamp, a greater upload id: newer too. */
    head_set(st, &id, &v2, 1000, 3, 0);
    assert_int_equal(st->ops->del_head(st->ctx, &id, &read1), ERR_PRECOND);
    assert_int_equal(head_upload(st, &id), 3);
    /* The version read, an older one, the delete's own tombstone (self): removed. */
    head_set(st, &id, &v1, 1000, 1, 0);
    assert_int_equal(st->ops->del_head(st->ctx, &id, &read1), 0);
    assert_int_equal(head_upload(st, &id), 0);
    assert_int_equal(st->ops->del_head(st->ctx, &id, &read1), ERR_NOT_FOUND);
    head_set(st, &id, &v1, 500, 4, 0);
    assert_int_equal(st->ops->del_head(st->ctx, &id, &read1), 0);
    head_set(st, &id, &t, 5000, 9, 1);
    assert_int_equal(st->ops->del_head(st->ctx, &id, &read1), 0);
    assert_int_equal(head_upload(st, &id), 0);

    /* An undo's delete: that head only, not another rewrite of its version. */
    head_set(st, &id, &v2, 2000, 2, 0);
    shard_cond_t mine = {.mode = SHARD_IF_UPLOAD, .stamp = 1999};
    memcpy(mine.upload, v2.upload_id, sizeof(mine.upload));
    assert_int_equal(st->ops->del_head(st->ctx, &id, &mine), ERR_PRECOND);
    mine.stamp = 2000;
    assert_int_equal(st->ops->del_head(st->ctx, &id, &mine), 0);
    assert_int_equal(head_upload(st, &id), 0);
    /* No condition: the plain delete. */
    head_set(st, &id, &v2, 2000, 2, 0);
    assert_int_equal(st->ops->del_head(st->ctx, &id, NULL), 0);
    assert_int_equal(head_upload(st, &id), 0);
}

/*
 * A rolling upgrade: three of six stores are on nodes of an older build, which answer a
 * conditional DEL as corrupt and remove nothing. The DELETE must not take that for a plain
 * delete, nor fail: those stores keep the old head and take the tombstone (a conditional
 * put they know), newer than it. Counted as failing stores, they got no tombstone, and the
 * three the DELETE reached were short of the quorum: 503 on every unversioned DELETE.
 */
static void test_delete_through_older_nodes(void **state)
{
    env_t *e = *state;
    size_t big = K * B + 9;
    uint8_t *data = malloc(big);
    fill(data, big, 44);
    obj_info_t v, got;
    put(e, "oldn", data, big, &v);
    for (int i = 0; i < 3; i++)
        e->f[i].old_node = 1;
    assert_int_equal(obj_delete(e->set, "bkt", "oldn"), 0);
    for (int i = 0; i < N; i++)
        e->f[i].old_node = 0;
    assert_int_equal(obj_stat(e->set, "bkt", "oldn", &got), ERR_NOT_FOUND);
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", "oldn", "", (uint32_t)i};
        uint8_t meta[HEAD_MAX];
        drive_stat_t ds;
        assert_int_equal(e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &ds, meta, sizeof(meta)), 0);
        assert_int_equal(obj_meta_decode(meta, ds.meta_len, &got), 0);
        assert_true(got.deleted && !got.marker); /* the tombstone, on all six */
    }
    put(e, "oldn", data, 10, NULL);
    expect(e, "oldn", data, 10);
    free(data);
}

/* Versioned PUT of len bytes of data (an erasure-coded one: heads on every store). */
static void vput_bytes(env_t *e, const char *key, const uint8_t *data, size_t len, obj_info_t *out,
                       int want)
{
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, data, len), 0);
    obj_put_set_versioning(w, OBJ_VERSIONED);
    int rc = obj_put_commit(w, NULL, NULL, 0, out);
    assert_true(want ? rc == 0 : rc != 0);
}

/* The stores holding a head of key at version v's own position (its archive). */
static int archived_on(env_t *e, const char *key, const obj_info_t *v)
{
    int n = 0;
    for (int i = 0; i < N; i++) {
        char pos[OBJ_VID_LEN + 1];
        obj__vid_of(pos, v->mtime_ns);
        drive_id_t id = {"bkt", key, pos, (uint32_t)i};
        uint8_t meta[HEAD_MAX];
        drive_stat_t ds;
        n += e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &ds, meta, sizeof(meta)) == 0;
    }
    return n;
}

/*
 * A rolling upgrade: two of six stores are on nodes of a build without SHARD_IF_KEPT, which
 * refuse the mode as corrupt. Until the cluster uses the feature (cluster/features.h), an
 * overwrite archives the version it covers under SHARD_IF_NEWER and every store keeps it;
 * in use, the archive is refused there, short of the write quorum: every versioned
 * overwrite failed while older nodes held two stores of a set.
 */
static void test_archive_waits_for_its_feature(void **state)
{
    env_t *e = *state;
    size_t big = K * B + 9;
    uint8_t *data = malloc(big);
    _Atomic uint32_t in_use = WL_FEATURES_BUILT & ~WL_FEAT_IF_KEPT;
    obj_set_features(e->set, &in_use);
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0); /* a node's default */
    obj_info_t v1, v2, v3;
    fill(data, big, 45);
    vput_bytes(e, "feat", data, big, &v1, 1);
    for (int i = 0; i < 2; i++)
        e->f[i].no_if_kept = 1;
    data[0] ^= 1;
    vput_bytes(e, "feat", data, big, &v2, 1);
    assert_int_equal(archived_on(e, "feat", &v1), N);
    /* Every node reads it now (here: the stores still refuse, to show what it changes). */
    atomic_store(&in_use, WL_FEATURES_BUILT);
    data[1] ^= 1;
    vput_bytes(e, "feat", data, big, &v3, 0);
    assert_int_equal(archived_on(e, "feat", &v2), N - 2);
    for (int i = 0; i < 2; i++)
        e->f[i].no_if_kept = 0;
    obj_set_features(e->set, NULL);
    assert_int_equal(obj_set_write_quorum(e->set, K), 0);
    obj_info_t info;
    assert_int_equal(obj_stat_version(e->set, "bkt", "feat", v1.vid, &info), 0);
    assert_int_equal(obj_stat_version(e->set, "bkt", "feat", v2.vid, &info), 0);
    free(data);
}

/*
 * A small object's heads are on its m+1 copies only. With every copy marked slow (each had a
 * read given up on, as when the gateway's own loop stalls under load), a head lookup asked
 * the other stores first, and their m+1 "absent" answers made a "not found": a GET answered
 * NoSuchKey for a key every listing showed (a 4-node probe, 1 round in 600). Absent answers
 * from stores that cannot hold a sparse head settle nothing: the copies are asked too.
 */
static void test_lookup_asks_slow_copies_before_not_found(void **state)
{
    env_t *e = *state;
    uint8_t small[100];
    fill(small, sizeof(small), 43);
    obj_info_t v, got;
    put(e, "slowcopies", small, sizeof(small), &v);
    assert_true(v.sparse);
    for (int i = 0; i < N; i++)
        if ((v.inl >> i) & 1) obj__mark_slow(e->set, (unsigned)i);
    assert_int_equal(obj_stat(e->set, "bkt", "slowcopies", &got), 0);
    assert_string_equal(got.upload_id, v.upload_id);
    expect(e, "slowcopies", small, sizeof(small));
    /* A key that is nowhere is still "not found". */
    assert_int_equal(obj_stat(e->set, "bkt", "slowcopies-none", &got), ERR_NOT_FOUND);
}

/*
 * An unversioned DELETE leaves its tombstone on every store (for a minute), and a small PUT
 * after it writes its heads on its m+1 copies alone, over the tombstone there: the other
 * stores keep the older tombstone. With every copy marked slow, a head lookup asked those
 * stores first and took their m+1 tombstones for the verdict: GET answered NoSuchKey for
 * the PUT every listing showed, and a DELETE through that gateway answered 204 and left it
 * (a 4-node probe, PUT racing DELETE through other nodes under load: 3 rounds in 200). A
 * tombstone from a store that cannot hold the sparse version settles nothing about it, as
 * an "absent" does not: the copies are asked too.
 */
/*
 * Every drive's file system full (test_delete_at_full_file_systems): fallocate says ENOSPC
 * while a drive's spare (DRIVE/segments/spare) is there; the spare's space, once given
 * back, is taken by that drive's next fallocate alone.
 */
static const char *full_root;
static int full_taken[N];
static int (*real_fallocate)(int, int, off_t, off_t);

static int full_fallocate(int fd, int mode, off_t off, off_t len)
{
    char link[64], path[512] = "";
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    size_t rl = strlen(full_root);
    if (n > 0 && (path[n] = 0, strncmp(path, full_root, rl) == 0) && path[rl] == '/' &&
        path[rl + 1] == 'd' && path[rl + 2] >= '0' && path[rl + 2] < '0' + N) {
        int i = path[rl + 2] - '0';
        char spare[512];
        snprintf(spare, sizeof(spare), "%s/d%d/segments/spare", full_root, i);
        if (access(spare, F_OK) == 0 || full_taken[i]) {
            errno = ENOSPC;
            return -1;
        }
        full_taken[i] = 1;
    }
    return real_fallocate(fd, mode, off, len);
}

/*
 * An unversioned DELETE when every drive's file system is full: its tombstone heads, which
 * retire the version and let its blocks go, take the space a drive keeps for what frees
 * space (the spare), as the drive's own tombstones do. Before, they were put as any
 * metadata-only record, found no room for a new segment, and the DELETE failed (507; a fill
 * probe: 192 of 242), so a full node could not be emptied through S3.
 */
static void test_delete_at_full_file_systems(void **state)
{
    env_t *e = *state;
    if (remote) skip(); /* the drives are reopened in place */
    size_t n = 300000;
    uint8_t *data = malloc(n);
    fill(data, n, 61);
    obj_info_t v;
    put(e, "full", data, n, &v);
    put(e, "kept", data, 1000, &v);
    /* Reopened: each drive's next write needs a new segment. */
    for (int i = 0; i < N; i++) {
        drive_close(e->f[i].d);
        open_drive(e, i);
    }
    full_root = e->dir;
    memset(full_taken, 0, sizeof(full_taken));
    real_fallocate = drive_io.fallocate;
    drive_io.fallocate = full_fallocate;
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", "new", &err);
    assert_non_null(w);
    int rc = obj_put_write(w, data, n);
    if (rc == 0)
        rc = obj_put_commit(w, "application/x-test", NULL, 0, &v);
    else
        obj_put_abort(w);
    assert_int_equal(rc, ERR_NOSPC);
    assert_int_equal(obj_delete(e->set, "bkt", "full"), 0);
    drive_io.fallocate = real_fallocate;
    obj_info_t got;
    assert_int_equal(obj_stat(e->set, "bkt", "full", &got), ERR_NOT_FOUND);
    expect(e, "kept", data, 1000);
    free(data);
}

static void test_lookup_asks_slow_copies_past_older_tombstones(void **state)
{
    env_t *e = *state;
    uint8_t small[100];
    fill(small, sizeof(small), 47);
    obj_info_t v0, v, got;
    put(e, "slowtomb", small, sizeof(small), &v0);
    assert_true(v0.sparse);
    assert_int_equal(obj_delete(e->set, "bkt", "slowtomb"), 0);
    small[0] ^= 1;
    put(e, "slowtomb", small, sizeof(small), &v);
    assert_true(v.sparse); /* its copies only; the others keep the tombstone */
    int others = 0;
    for (int i = 0; i < N; i++)
        if (!((v.inl >> i) & 1)) others += has_head(e, i, "slowtomb");
    assert_int_equal(others, N - __builtin_popcount(v.inl));
    for (int i = 0; i < N; i++)
        if ((v.inl >> i) & 1) obj__mark_slow(e->set, (unsigned)i);
    assert_int_equal(obj_stat(e->set, "bkt", "slowtomb", &got), 0);
    assert_string_equal(got.upload_id, v.upload_id);
    expect(e, "slowtomb", small, sizeof(small));
    /* A DELETE through this gateway deletes it (it read "not found" and left it). */
    for (int i = 0; i < N; i++)
        if ((v.inl >> i) & 1) obj__mark_slow(e->set, (unsigned)i);
    assert_int_equal(obj_delete(e->set, "bkt", "slowtomb"), 0);
    for (int i = 0; i < N; i++)
        atomic_store(&e->set->slow_until[i], 0);
    assert_int_equal(obj_stat(e->set, "bkt", "slowtomb", &got), ERR_NOT_FOUND);
}

/* obj__delete_read_hook: another node's PUT (an erasure-coded object: heads on every store)
 * commits between the delete's read and its removal round, once. */
typedef struct {
    obj_set_t *other;
    const uint8_t *data;
    size_t n;
    int calls;
    obj_info_t v;
} put_meanwhile_t;

static void put_after_the_read(void *arg, const char *key)
{
    put_meanwhile_t *p = arg;
    if (p->calls++) return;
    int err;
    obj_writer_t *w = obj_put_begin(p->other, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, p->data, p->n), 0);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, &p->v), 0);
}

/*
 * An unversioned DELETE of a small object (its heads on its m+1 copies) while a PUT
 * through another node replaces it with a large one (heads on all six stores), committed
 * between the delete's read and its removal round. The delete answers 204 (it came before
 * the PUT) and the PUT stands, whole. Removing unconditionally, the delete cut the PUT's
 * heads on the three copies' stores: three of six, short of k, and the key was a head in
 * flight to every writer (503 SlowDown for 10 s) while readers found it.
 */
static void test_delete_leaves_a_put_after_its_read(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e); /* its own key locks: another node */
    uint8_t small[100];
    fill(small, sizeof(small), 41);
    obj_info_t v0, got;
    put(e, "pd", small, sizeof(small), &v0);
    assert_true(v0.sparse);
    size_t big = 2 * K * B + 3;
    uint8_t *data = malloc(big);
    fill(data, big, 42);
    put_meanwhile_t p = {.other = other, .data = data, .n = big};
    obj__delete_read_hook = put_after_the_read;
    obj__delete_read_hook_arg = &p;
    int rc = obj_delete(e->set, "bkt", "pd");
    obj__delete_read_hook = NULL;
    assert_int_equal(p.calls, 1);
    assert_int_equal(rc, 0);
    assert_false(p.v.inl);
    int in_way = 1;
    assert_int_equal(obj__standing(e->set, "bkt", "pd", &got, &in_way), 0);
    assert_false(in_way);
    assert_string_equal(got.upload_id, p.v.upload_id);
    int heads = 0;
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", "pd", "", (uint32_t)i};
        heads += head_is(&e->f[i].in, &id, p.v.upload_id);
    }
    assert_int_equal(heads, N);
    expect(e, "pd", data, big);
    /* Nothing in flight: the next write goes through at once. */
    put(e, "pd", small, 7, NULL);
    expect(e, "pd", small, 7);

    /*
     * The same with a store of the copies failing: the delete's fallback, a tombstone on the
     * other stores, is conditioned as its removals are and refused where the PUT landed (the
     * tombstone, stamped after the PUT, went over it on five stores before: the PUT covered,
     * the key gone). The PUT stands, on the five stores that work.
     */
    put(e, "pf", small, sizeof(small), &v0);
    assert_true(v0.sparse);
    int bad = __builtin_ctz(v0.inl);
    e->f[bad].fail_write = 1;
    p = (put_meanwhile_t){.other = other, .data = data, .n = big};
    obj__delete_read_hook = put_after_the_read;
    obj__delete_read_hook_arg = &p;
    rc = obj_delete(e->set, "bkt", "pf");
    obj__delete_read_hook = NULL;
    e->f[bad].fail_write = 0;
    assert_int_equal(rc, 0);
    assert_int_equal(obj__standing(e->set, "bkt", "pf", &got, &in_way), 0);
    assert_false(in_way);
    assert_string_equal(got.upload_id, p.v.upload_id);
    expect(e, "pf", data, big);
    obj_set_free(other);
    free(data);
}

/* obj__heal_write_hook: a DELETE through another node, whole, between the heal's read of
 * the stores missing a head and its write there, once. */
typedef struct {
    obj_set_t *other;
    int calls, rc;
    env_t *e;
    uint32_t fail_after; /* stores whose reads fail once the delete is done */
    int dropped;         /* its tombstones gone at once (a heal slower than their delay) */
    int slept;           /* ... gone after obj__head_drop_delay_ns has passed (as they go) */
} delete_meanwhile_t;

static void sleep_past_the_drop_delay(void)
{
    uint64_t ns = obj__head_drop_delay_ns + 20000000ull;
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void delete_before_the_heal_writes(void *arg, const char *key)
{
    delete_meanwhile_t *d = arg;
    if (d->calls++) return;
    d->rc = obj_delete(d->other, "bkt", key);
    if (d->slept) sleep_past_the_drop_delay();
    if (d->dropped || d->slept) drop_tombstones(d->e, key);
    for (int i = 0; i < N; i++)
        if ((d->fail_after >> i) & 1) d->e->f[i].fail_read = 1;
}

/*
 * A heal reads that a store misses a version's head, then a DELETE through another node
 * removes the version everywhere (204), then the heal writes the head where it was missing:
 * under "nothing newer", which an empty store satisfies. The version was back on one store
 * after its delete was acknowledged (a small object then reads whole from that one copy).
 * The delete's tombstones refuse the heal's write (v 3). A heal slower than their delay
 * (v 0-2: gone at once) reads again where the version was and takes back what it wrote:
 * the key is gone from every store, small (inline copies) or erasure-coded.
 */
static void test_heal_racing_a_delete_puts_nothing_back(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e);
    uint8_t small[100];
    fill(small, sizeof(small), 51);
    size_t big = 2 * K * B + 5;
    uint8_t *data = malloc(big);
    fill(data, big, 52);
    for (int v = 0; v < 4; v++) {
        /* v 2: the stores that held it cannot be read once the delete is done (a review:
         * taken for "still there", the heal kept what it wrote). */
        const char *key = v == 1   ? "hd-big"
                          : v == 2 ? "hd-small-unread"
                          : v == 3 ? "hd-small-tombstones"
                                   : "hd-small";
        obj_info_t info, got;
        put(e, key, v == 1 ? data : small, v == 1 ? big : sizeof(small), &info);
        assert_int_equal(!!info.sparse, v != 1);
        int lost = v == 1 ? 3 : __builtin_ctz(info.inl); /* the store that missed the commit */
        drive_id_t id = {"bkt", key, "", (uint32_t)lost};
        assert_int_equal(drive_delete(e->f[lost].d, &id), 0);
        delete_meanwhile_t d = {.other = other, .e = e, .dropped = v < 3};
        if (v == 2) d.fail_after = info.inl & ~(1u << lost);
        obj__heal_write_hook = delete_before_the_heal_writes;
        obj__heal_write_hook_arg = &d;
        obj_heal_report_t rep = {0};
        int rc = obj_heal(e->set, "bkt", key, &rep);
        obj__heal_write_hook = NULL;
        for (int i = 0; i < N; i++)
            e->f[i].fail_read = 0;
        assert_int_equal(d.calls, 1);
        assert_int_equal(d.rc, 0);
        /* Refused by the tombstones; or written, then taken back: tried again later. */
        assert_int_equal(rc, v == 3 ? 0 : ERR_THROTTLED);
        assert_int_equal(rep.heads_fixed, 0);
        for (int i = 0; i < N; i++)
            assert_false(live_head(e, i, key));
        /* Again: nothing there to heal. */
        assert_int_equal(obj_heal(e->set, "bkt", key, &rep), 0);
        assert_int_equal(obj_stat(e->set, "bkt", key, &got), ERR_NOT_FOUND);
        assert_int_equal(obj_stat(other, "bkt", key, &got), ERR_NOT_FOUND);
    }
    obj_set_free(other);
    free(data);
}

/*
 * A refill writes its blocks to a store that can take them unsynced (store 1: a local drive)
 * without a flush each, and syncs the store once before the heads that name them. A sync that
 * fails: the blocks count as failed and no head goes there (the pass is not whole); the next
 * refill puts it right. Without the sync before the heads, the first half fails.
 */
static void test_refill_syncs_before_heads(void **state)
{
    env_t *e = *state;
    size_t n = 2 * K * B + 999; /* three stripes */
    uint8_t *data = malloc(n);
    fill(data, n, 93);
    e->f[1].fail_write = 1;
    put(e, "rs1", data, n, NULL);
    e->f[1].fail_write = 0;
    assert_false(has_head(e, 1, "rs1"));

    obj_refill_t *rf = obj_refill_new(4u << 20);
    assert_non_null(rf);
    e->f[1].fail_sync = 1;
    long syncs = e->f[1].n_sync;
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal_via(rf, e->set, "bkt", "rs1", NULL, &rep), 0);
    obj_refill_drain(rf, &rep);
    assert_true(e->f[1].n_sync > syncs);
    assert_int_equal(rep.blocks_fixed, 0);
    assert_int_equal(rep.heads_fixed, 0);
    assert_int_equal(rep.failed, 3);
    assert_false(has_head(e, 1, "rs1"));

    e->f[1].fail_sync = 0;
    drive_stats_t before, after;
    drive_stats(e->f[1].d, &before);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_heal_via(rf, e->set, "bkt", "rs1", NULL, &rep), 0);
    obj_refill_drain(rf, &rep);
    drive_stats(e->f[1].d, &after);
    /* (Behind the network the first pass's blocks were written durably, sync or not: found in
     * place now. On the local drive they were never indexed: rebuilt.) */
    assert_int_equal(rep.blocks_fixed, remote ? 0 : 3);
    assert_int_equal(rep.heads_fixed, 1);
    assert_int_equal(rep.failed, 0);
    assert_true(has_head(e, 1, "rs1"));
    /* On a local drive the blocks went without a flush of their own (a remote one has none). */
    if (!remote) assert_true(after.unsynced_commits > before.unsynced_commits);
    obj_refill_free(rf);
    e->f[0].fail_read = e->f[2].fail_read = 1; /* store 1's blocks are needed */
    expect(e, "rs1", data, n);
    e->f[0].fail_read = e->f[2].fail_read = 0;
    free(data);
}

/*
 * The same through a refill (obj_heal_via): its heads follow the blocks once they are
 * durable, long after its read. A DELETE through another node while the blocks are in
 * flight: the heads written then are taken back, and nothing of the key is left.
 */
static void test_refill_racing_a_delete_puts_nothing_back(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e);
    size_t n = 2 * K * B + 17;
    uint8_t *data = malloc(n);
    fill(data, n, 54);
    e->f[1].fail_write = 1;
    put(e, "rfd", data, n, NULL);
    e->f[1].fail_write = 0;
    assert_false(has_head(e, 1, "rfd"));
    obj_refill_t *rf = obj_refill_new(4u << 20);
    assert_non_null(rf);
    e->f[1].hold_blocks = 1;
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal_via(rf, e->set, "bkt", "rfd", NULL, &rep), 0);
    assert_int_equal(e->f[1].n_held, 3);
    assert_int_equal(obj_delete(other, "bkt", "rfd"), 0);
    drop_tombstones(e, "rfd"); /* the refill outlasts them */
    release_blocks(&e->f[1], 0);
    obj_refill_drain(rf, &rep);
    assert_int_equal(rep.heads_fixed, 0);
    for (int i = 0; i < N; i++)
        assert_false(has_head(e, i, "rfd"));
    obj_info_t got;
    assert_int_equal(obj_stat(e->set, "bkt", "rfd", &got), ERR_NOT_FOUND);
    obj_refill_free(rf);
    obj_set_free(other);
    free(data);
}

/* obj__heal_recheck_hook: a second heal, through a third node, between the first heal's
 * write and its re-read, once. */
typedef struct {
    obj_set_t *third;
    int calls, rc;
} second_heal_t;

static void heal_again_before_the_recheck(void *arg, const char *key)
{
    second_heal_t *h = arg;
    if (h->calls++) return;
    obj_heal_report_t rep = {0};
    h->rc = obj_heal(h->third, "bkt", key, &rep);
}

/*
 * Two heals through different nodes and a DELETE (a review): heal 1 reads that copy A
 * misses the version; the DELETE removes it everywhere (204); heal 1 writes A; heal 2 reads
 * A alone holding it, writes the other copies and finds A still there; heal 1 reads the
 * other copies again and finds them there. Each heal's re-read saw the other's writes, and
 * the version stood again, whole. The delete's tombstones refuse heal 1's write, so heal 2
 * finds nothing to heal.
 */
static void test_two_heals_racing_a_delete_put_nothing_back(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e), *third = other_gateway(e);
    uint8_t small[100];
    fill(small, sizeof(small), 55);
    obj_info_t info, got;
    put(e, "h2", small, sizeof(small), &info);
    assert_true(info.sparse);
    int lost = __builtin_ctz(info.inl);
    drive_id_t id = {"bkt", "h2", "", (uint32_t)lost};
    assert_int_equal(drive_delete(e->f[lost].d, &id), 0);
    delete_meanwhile_t d = {.other = other, .e = e};
    second_heal_t h = {.third = third};
    obj__heal_write_hook = delete_before_the_heal_writes;
    obj__heal_write_hook_arg = &d;
    obj__heal_recheck_hook = heal_again_before_the_recheck;
    obj__heal_recheck_hook_arg = &h;
    obj_heal_report_t rep = {0};
    int rc = obj_heal(e->set, "bkt", "h2", &rep);
    obj__heal_write_hook = NULL;
    obj__heal_recheck_hook = NULL;
    assert_int_equal(d.rc, 0);
    assert_true(rc == 0 || rc == ERR_THROTTLED);
    /* The second heal, had it not run between: nothing to heal either. */
    rep = (obj_heal_report_t){0};
    assert_int_equal(obj_heal(third, "bkt", "h2", &rep), 0);
    assert_int_equal(rep.heads_fixed, 0);
    for (int i = 0; i < N; i++)
        assert_false(live_head(e, i, "h2"));
    assert_int_equal(obj_stat(e->set, "bkt", "h2", &got), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(third, "bkt", "h2", &got), ERR_NOT_FOUND);
    obj_set_free(other);
    obj_set_free(third);
}

/*
 * Two heals through different nodes, both slower than the DELETE's tombstones (design
 * notes: what the recheck alone left open). Heal 1 reads that copy A misses the version;
 * a DELETE through another node removes it everywhere (204) and its tombstones go a drop
 * delay later; only then does heal 1 write. Written, A would hold the version over
 * nothing, heal 2 (between heal 1's write and its recheck) would find A alone holding it
 * and write the other copies, and each recheck would find the other's heads where the
 * version was: back, whole. Heal 1's read is older than a quarter of the delay, so it
 * reads again where the version was, finds it gone, and writes nothing.
 */
static void test_two_heals_after_the_drop_put_nothing_back(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e), *third = other_gateway(e);
    uint8_t small[100];
    fill(small, sizeof(small), 58);
    obj_info_t info, got;
    put(e, "h3", small, sizeof(small), &info);
    assert_true(info.sparse);
    int lost = __builtin_ctz(info.inl);
    drive_id_t id = {"bkt", "h3", "", (uint32_t)lost};
    assert_int_equal(drive_delete(e->f[lost].d, &id), 0);
    obj__head_drop_delay_ns = 80000000ull; /* 80 ms */
    delete_meanwhile_t d = {.other = other, .e = e, .slept = 1};
    second_heal_t h = {.third = third};
    obj__heal_write_hook = delete_before_the_heal_writes;
    obj__heal_write_hook_arg = &d;
    obj__heal_recheck_hook = heal_again_before_the_recheck;
    obj__heal_recheck_hook_arg = &h;
    obj_heal_report_t rep = {0};
    int rc = obj_heal(e->set, "bkt", "h3", &rep);
    obj__heal_write_hook = NULL;
    obj__heal_recheck_hook = NULL;
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, 0);
    assert_int_equal(rc, ERR_THROTTLED); /* again later */
    assert_int_equal(h.calls, 0);        /* nothing written, nothing to recheck */
    assert_int_equal(rep.heads_fixed, 0);
    for (int i = 0; i < N; i++)
        assert_false(has_head(e, i, "h3"));
    assert_int_equal(obj_heal(third, "bkt", "h3", &rep), 0);
    assert_int_equal(rep.heads_fixed, 0);
    assert_int_equal(obj_stat(e->set, "bkt", "h3", &got), ERR_NOT_FOUND);
    assert_int_equal(obj_stat(third, "bkt", "h3", &got), ERR_NOT_FOUND);
    obj_set_free(other);
    obj_set_free(third);
}

/* obj__heal_recheck_hook: count the heals that wrote heads. */
static void count_recheck(void *arg, const char *key)
{
    (void)key;
    (*(int *)arg)++;
}

/*
 * A refill whose blocks take longer than a DELETE's tombstones stay: when its heads are
 * due, its read is older than a quarter of the drop delay, so it reads again where the
 * version was, finds it gone, and writes no head (before, it wrote them over the nothing
 * the dropped tombstones left, and only its recheck took them back: which two heals defeat,
 * above). Nothing is counted as failed: the version is gone, not short.
 */
static void test_refill_slower_than_the_drop_writes_no_head(void **state)
{
    env_t *e = *state;
    obj_set_t *other = other_gateway(e);
    size_t n = 2 * K * B + 19;
    uint8_t *data = malloc(n);
    fill(data, n, 59);
    e->f[1].fail_write = 1;
    put(e, "rfs", data, n, NULL);
    e->f[1].fail_write = 0;
    assert_false(has_head(e, 1, "rfs"));
    obj__head_drop_delay_ns = 80000000ull; /* 80 ms */
    obj_refill_t *rf = obj_refill_new(4u << 20);
    assert_non_null(rf);
    e->f[1].hold_blocks = 1;
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal_via(rf, e->set, "bkt", "rfs", NULL, &rep), 0);
    assert_int_equal(e->f[1].n_held, 3);
    assert_int_equal(obj_delete(other, "bkt", "rfs"), 0);
    sleep_past_the_drop_delay();
    drop_tombstones(e, "rfs");
    int wrote = 0;
    obj__heal_recheck_hook = count_recheck;
    obj__heal_recheck_hook_arg = &wrote;
    release_blocks(&e->f[1], 0);
    obj_refill_drain(rf, &rep);
    obj__heal_recheck_hook = NULL;
    assert_int_equal(wrote, 0);
    assert_int_equal(rep.heads_fixed, 0);
    assert_int_equal(rep.failed, 0);
    for (int i = 0; i < N; i++)
        assert_false(has_head(e, i, "rfs"));
    obj_info_t got;
    assert_int_equal(obj_stat(e->set, "bkt", "rfs", &got), ERR_NOT_FOUND);
    obj_refill_free(rf);
    obj_set_free(other);
    free(data);
}

/*
 * The same slow refill without a delete: its read is stale, the re-read finds the version
 * where it was, and the head is written (v 0). With a store that held it unable to answer
 * the re-read (v 1), nothing is written and the head counts as failed: the pass is not
 * whole, and the next one writes it.
 */
static void test_refill_slower_than_the_drop_reads_again(void **state)
{
    env_t *e = *state;
    size_t n = 2 * K * B + 23;
    uint8_t *data = malloc(n);
    fill(data, n, 60);
    obj__head_drop_delay_ns = 80000000ull; /* 80 ms */
    for (int v = 0; v < 2; v++) {
        const char *key = v ? "rsb" : "rsa";
        e->f[1].fail_write = 1;
        put(e, key, data, n, NULL);
        e->f[1].fail_write = 0;
        assert_false(has_head(e, 1, key));
        obj_refill_t *rf = obj_refill_new(4u << 20);
        assert_non_null(rf);
        e->f[1].hold_blocks = 1;
        obj_heal_report_t rep = {0};
        assert_int_equal(obj_heal_via(rf, e->set, "bkt", key, NULL, &rep), 0);
        sleep_past_the_drop_delay();
        if (v) e->f[0].fail_read = 1;
        release_blocks(&e->f[1], 0);
        obj_refill_drain(rf, &rep);
        e->f[0].fail_read = 0;
        assert_int_equal(rep.heads_fixed, v ? 0 : 1);
        assert_int_equal(rep.failed, v ? 1 : 0);
        assert_int_equal(has_head(e, 1, key), !v);
        obj_refill_free(rf);
        e->f[1].hold_blocks = 0;
        rep = (obj_heal_report_t){0};
        assert_int_equal(obj_heal(e->set, "bkt", key, &rep), 0);
        assert_true(has_head(e, 1, key));
        expect(e, key, data, n);
    }
    free(data);
}

/*
 * An unversioned delete's tombstones (the version's retirement, where its heads were) refuse
 * every head of that version, then go: the heal thread removes them after the drop delay, that
 * very head only. A PUT after the delete stands at once.
 */
static void test_delete_tombstones_refuse_the_version_then_go(void **state)
{
    env_t *e = *state;
    uint8_t small[100];
    fill(small, sizeof(small), 56);
    size_t big = 2 * K * B + 9;
    uint8_t *data = malloc(big);
    fill(data, big, 57);
    obj_info_t v[2], got;
    put(e, "ts", small, sizeof(small), &v[0]);
    put(e, "tb", data, big, &v[1]);
    assert_true(v[0].sparse && !v[1].sparse);
    assert_int_equal(obj_set_heal_start(e->set), 0);
    obj__head_drop_delay_ns = 300000000ull; /* 0.3 s */
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "tb" : "ts";
        assert_int_equal(obj_delete(e->set, "bkt", key), 0);
        /* A heal's write of the version, as it comes from a node that read it before. */
        shard_cond_t c = {.mode = SHARD_IF_AT_MOST, .stamp = v[k].stamp_ns};
        memcpy(c.upload, v[k].upload_id, sizeof(c.upload));
        memcpy(c.self, v[k].upload_id, sizeof(c.self));
        uint32_t failed = 0, to = k ? (1u << N) - 1 : v[k].inl;
        int refused = 0, fe = 0;
        assert_int_equal(obj__heads_to(e->set, "bkt", key, "", &v[k], k ? NULL : small, to, &c,
                                       &failed, &refused, &fe),
                         0);
        assert_int_equal(refused, __builtin_popcount(to));
        assert_int_equal(obj_stat(e->set, "bkt", key, &got), ERR_NOT_FOUND);
    }
    /* Then they go, every head record of both keys. */
    int left = 1;
    for (int t = 0; t < 200 && left; t++) {
        usleep(50000);
        left = 0;
        for (int i = 0; i < N; i++)
            left += has_head(e, i, "ts") + has_head(e, i, "tb");
    }
    assert_int_equal(left, 0);
    /* A PUT after a delete stands at once, its tombstones there or gone. */
    assert_int_equal(obj_delete(e->set, "bkt", "ts"), ERR_NOT_FOUND);
    put(e, "ts", small, 7, NULL);
    expect(e, "ts", small, 7);
    assert_int_equal(obj_delete(e->set, "bkt", "ts"), 0);
    put(e, "ts", small, 9, NULL);
    expect(e, "ts", small, 9);
    obj__head_drop_delay_ns = (uint64_t)OBJ_HEAD_DROP_DELAY_S * 1000000000ull;
    free(data);
}

/* Until the heal queue has nothing pending (at most 30 s); *st its counters then. */
static void heal_queue_drained(env_t *e, obj_heal_stats_t *st)
{
    for (int i = 0; i < 600; i++) {
        obj_heal_stats(e->set, st);
        if (st->pending == 0) break;
        usleep(50000);
    }
}

/* Until no store holds anything at key's position pos (at most 10 s): 1, else 0. */
static int heads_all_gone(env_t *e, const char *key, const char *pos)
{
    for (int t = 0; t < 1000; t++) {
        int any = 0;
        for (int i = 0; i < N; i++)
            any |= head_kind_at(e, i, key, pos) != 0;
        if (!any) return 1;
        usleep(10000);
    }
    return 0;
}

/*
 * A review: a store holding the version (a small one's copy) fails the delete and keeps its
 * head; the tombstones on the others hide it. Dropped after the minute, they left the head
 * it kept as the version: read whole, and healed back onto the other copies. They stay
 * while it keeps that head; once the heal queue has put the tombstone there too, they go.
 */
static void test_delete_keeps_tombstones_over_a_store_that_missed_it(void **state)
{
    env_t *e = *state;
    uint8_t small[100];
    fill(small, sizeof(small), 61);
    obj_info_t info, got;
    put(e, "fd", small, sizeof(small), &info);
    assert_true(info.sparse);
    int keeper = __builtin_ctz(info.inl);
    assert_int_equal(obj_set_heal_start(e->set), 0);
    obj__head_drop_delay_ns = 100000000ull; /* 0.1 s */
    e->f[keeper].fail_write = 1; /* (the queue's heal fails there too, until it is cleared) */
    assert_int_equal(obj_delete(e->set, "bkt", "fd"), 0);
    assert_true(live_head(e, keeper, "fd"));
    /* Another key's tombstones, due after these were: once they are gone, these were due. */
    put(e, "fd-other", small, 10, NULL);
    assert_int_equal(obj_delete(e->set, "bkt", "fd-other"), 0);
    int left = 1;
    for (int t = 0; t < 200 && left; t++) {
        usleep(20000);
        left = 0;
        for (int i = 0; i < N; i++)
            left += has_head(e, i, "fd-other");
    }
    assert_int_equal(left, 0);
    for (int i = 0; i < N; i++)
        if (i != keeper) assert_true(has_head(e, i, "fd")); /* the tombstones stayed */
    assert_int_equal(obj_stat(e->set, "bkt", "fd", &got), ERR_NOT_FOUND);
    assert_true(live_head(e, keeper, "fd"));
    e->f[keeper].fail_write = 0;
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_false(live_head(e, keeper, "fd"));
    assert_true(heads_all_gone(e, "fd", ""));
    assert_int_equal(obj_stat(e->set, "bkt", "fd", &got), ERR_NOT_FOUND);
}

/*
 * A review: a small object's delete with its copies all up and three other stores failing
 * answered 503 (a tombstone on every store, judged by the write quorum): stores that never
 * held the version do not fail its delete. A PUT of the key right after stands.
 */
static void test_small_delete_with_other_stores_failing(void **state)
{
    env_t *e = *state;
    uint8_t small[100];
    fill(small, sizeof(small), 62);
    obj_info_t info, got;
    put(e, "sd", small, sizeof(small), &info);
    assert_true(info.sparse);
    for (int i = 0; i < N; i++)
        if (!((info.inl >> i) & 1)) e->f[i].fail_write = 1;
    assert_int_equal(obj_delete(e->set, "bkt", "sd"), 0);
    for (int i = 0; i < N; i++)
        e->f[i].fail_write = 0;
    assert_int_equal(obj_stat(e->set, "bkt", "sd", &got), ERR_NOT_FOUND);
    put(e, "sd", small, 50, NULL);
    expect(e, "sd", small, 50);
}

/* The drop queue full: a drop not queued is counted (drops_lost), not lost silently. */
static void test_drop_queue_full_is_counted(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    obj_info_t t;
    obj_info_clear(&t);
    t.deleted = 1;
    t.stamp_ns = t.mtime_ns = 1;
    strcpy(t.upload_id, "0123456789abcdef0123456789abcdef");
    for (uint32_t i = 0; i < OBJ_HEAL_QUEUE_MAX + 3; i++)
        obj__tombstone_drop_note(e->set, "bkt", "full", &t, 1);
    obj_heal_stats_t st;
    obj_heal_stats(e->set, &st);
    assert_int_equal(st.drops_pending, OBJ_HEAL_QUEUE_MAX);
    assert_int_equal(st.drops_lost, 3);
}

/*
 * A dropped version's blocks are due at once, tombstones a drop delay after their note: a
 * block drop queued behind a tombstone drop is not held until the tombstone is due (one
 * FIFO held it there, a minute behind every DELETE before it).
 */
static void test_block_drop_does_not_wait_behind_tombstones(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    obj__head_drop_delay_ns = 3600ull * 1000000000ull; /* an hour: never, in this test */
    obj_info_t t;
    obj_info_clear(&t);
    t.deleted = 1;
    t.stamp_ns = t.mtime_ns = 1;
    strcpy(t.upload_id, "0123456789abcdef0123456789abcdef");
    obj__tombstone_drop_note(e->set, "bkt", "tomb", &t, 1);
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, "bkt");
    obj__drop_note(e->set, bb, "blk", "fedcba9876543210fedcba9876543210", 1, (1u << N) - 1);
    obj_heal_stats_t st;
    for (int i = 0; i < 600; i++) { /* at most 30 s; done at once */
        obj_heal_stats(e->set, &st);
        if (st.drops_done >= 1) break;
        usleep(50000);
    }
    assert_int_equal(st.drops_done, 1);
    assert_int_equal(st.drops_pending, 1); /* the tombstone's, not due */
}

/* len bytes of pattern seed, malloc'd. */
static uint8_t *filled(size_t len, int seed)
{
    uint8_t *p = malloc(len);
    fill(p, len, seed);
    return p;
}

/* Store i away (failing its writes, health suspect: the heal queue waits for it), or back. */
static void store_away(env_t *e, int i, int away)
{
    e->f[i].fail_write = away;
    e->f[i].sick = away;
}

/* Version vid of key reads back as data (len bytes). */
static void expect_version(env_t *e, const char *key, const char *vid, const uint8_t *data,
                           size_t len)
{
    obj_info_t info;
    int err;
    obj_reader_t *r = obj_open_version(e->set, "bkt", key, vid, &info, &err);
    assert_non_null(r);
    assert_int_equal(info.size, len);
    uint8_t *got = malloc(len);
    assert_int_equal(obj_read(r, 0, got, len), 0);
    assert_memory_equal(got, data, len);
    obj_close(r);
    free(got);
}

/*
 * A key whose heal keeps failing backs off (2 s, 4 s, 8 s, ...). In one FIFO it held every
 * note queued behind it until its next try: a write short of a store waited for the heal of
 * another key up to 64 s. Retries now wait in a heap of their own, and a fresh note is healed
 * before a retry that is not due (the stuck key's tries stay where they were).
 */
static void test_a_fresh_note_waits_for_no_retry(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *data = filled(big, 81), *fresh = filled(300000, 82);
    obj_info_t stuck, v;
    store_away(e, 5, 1);
    put(e, "stuck", data, big, &stuck); /* short of store 5: noted */
    /* Its first stripe lost on three stores: no heal can rebuild it. */
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, "bkt");
    for (int i = 0; i < 3; i++) {
        drive_id_t id = {bb, "stuck", stuck.upload_id, (uint32_t)i};
        assert_int_equal(drive_delete(e->f[i].d, &id), 0);
    }
    store_away(e, 5, 0);
    obj_heal_stats_t st = {0};
    for (int i = 0; i < 1200 && st.retries < 3; i++) { /* its next try 8 s away */
        obj_heal_stats(e->set, &st);
        usleep(20000);
    }
    assert_int_equal(st.retries, 3);
    uint64_t healed = st.healed;
    store_away(e, 4, 1);
    put(e, "fresh", fresh, 300000, &v); /* short of store 4: noted */
    assert_false(live_head(e, 4, "fresh"));
    store_away(e, 4, 0);
    for (int i = 0; i < 1500 && st.healed == healed; i++) {
        obj_heal_stats(e->set, &st);
        usleep(20000);
    }
    assert_int_equal(st.healed, healed + 1);
    assert_int_equal(st.retries, 3); /* before the stuck key's next try */
    assert_true(live_head(e, 4, "fresh"));
    free(data);
    free(fresh);
}

/*
 * A drive failed for good (it did not open: SHARD_FAILED) is healed around, not waited for:
 * a write short of another store too is healed onto that store once it is back, and a
 * healer's walk over every store goes on without the failed one. Before, the heal queue
 * waited while any store was not up and the walk failed, so with one failed drive nothing
 * in its set was healed again until the drive was replaced.
 */
static void test_heal_goes_on_without_a_failed_store(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_write_quorum(e->set, K), 0);
    assert_int_equal(obj_set_heal_start(e->set), 0);
    e->f[5].fail_read = e->f[5].fail_write = 1;
    e->f[5].sick = 3;
    e->f[1].fail_write = 1; /* a write to it fails; its health says up */
    uint8_t *data = filled(300000, 71);
    obj_info_t v;
    put(e, "short", data, 300000, &v);
    assert_false(live_head(e, 1, "short"));
    e->f[1].fail_write = 0;
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.healed, 1);
    assert_true(live_head(e, 1, "short"));
    assert_true(has_block(e, "short", v.upload_id, 0, 1));
    char listed[256] = "";
    assert_true(obj_list_versions_all(e->set, "bkt", NULL, NULL, NULL, vlist_cb, listed) >= 0);
    assert_non_null(strstr(listed, "short:"));
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->set, "bkt", "short", &rep), 0);
    assert_int_equal(rep.failed, 0);
    e->f[5].fail_read = e->f[5].fail_write = 0;
    e->f[5].sick = 0;
    expect(e, "short", data, 300000);
    free(data);
}

/*
 * An unversioned delete while a store was down: that store kept its live head, the others'
 * tombstones stayed for good, and nothing put one there once it was back (a review). Two
 * more drives lost (their refill carries no tombstone), a reader asking m+1 stores found the
 * deleted object on that one. Now the heal queue puts the tombstone there, then the
 * tombstones go as a whole delete's do.
 */
static void test_a_delete_short_of_a_store_reaches_it_once_back(void **state)
{
    env_t *e = *state;
    obj__head_drop_delay_ns = 200000000ull; /* 0.2 s */
    assert_int_equal(obj_set_heal_start(e->set), 0);
    uint8_t *data = filled(300000, 77);
    put(e, "gone", data, 300000, NULL);
    e->f[5].fail_read = e->f[5].fail_write = 1;
    e->f[5].sick = 2; /* down */
    assert_int_equal(obj_delete(e->set, "bkt", "gone"), 0);
    assert_int_equal(head_kind_at(e, 5, "gone", ""), 'L');
    e->f[5].fail_read = e->f[5].fail_write = 0;
    e->f[5].sick = 0;
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_int_not_equal(head_kind_at(e, 5, "gone", ""), 'L');
    assert_true(heads_all_gone(e, "gone", ""));
    obj_info_t info;
    assert_int_equal(obj_stat(e->set, "bkt", "gone", &info), ERR_NOT_FOUND);
    free(data);
}

/*
 * A delete short of its write quorum (two stores away of 4+2, quorum k+1) answers an error
 * and keeps the version's blocks, its outcome open; its tombstones, on k stores, stand. Once
 * the stores are back the heal puts the tombstone on them and rolls the delete forward: the
 * version's blocks go. Before, nothing dropped them (a 3-node probe: a multipart object's
 * parts, 50-70 MB a run, for good).
 */
static void test_a_delete_short_of_its_quorum_is_rolled_forward(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0);
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *data = filled(big, 95);
    obj_info_t v;
    put(e, "doubt", data, big, &v);
    store_away(e, 4, 1);
    store_away(e, 5, 1);
    assert_int_not_equal(obj_delete(e->set, "bkt", "doubt"), 0);
    assert_true(has_block(e, "doubt", v.upload_id, 0, 0));
    store_away(e, 4, 0);
    store_away(e, 5, 0);
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_false(live_head(e, 4, "doubt"));
    assert_false(live_head(e, 5, "doubt"));
    int left = 1;
    for (int t = 0; t < 500 && left; t++) {
        left = 0;
        for (int i = 0; i < N; i++)
            left += has_block(e, "doubt", v.upload_id, 0, i);
        if (left) usleep(10000);
    }
    assert_int_equal(left, 0);
    obj_info_t info;
    assert_int_equal(obj_stat(e->set, "bkt", "doubt", &info), ERR_NOT_FOUND);
    free(data);
}

static int retired_cb(void *arg, const char *key, const char *pos, const obj_info_t *tomb)
{
    char *out = arg;
    assert_true(tomb->deleted && !tomb->marker);
    sprintf(out + strlen(out), "%s@%s,", key, pos);
    return 0;
}

/*
 * The same delete while store 5 was failed for good: the queue heals around it and forgets
 * the key. Back (refilled in place: its sets could not spare it), the healer's walk of the
 * positions whose newest head is a tombstone finds the key (listings pass it by) and puts
 * the tombstone on store 5.
 */
static void test_a_delete_while_a_store_failed_reaches_it_through_the_walk(void **state)
{
    env_t *e = *state;
    obj__head_drop_delay_ns = 200000000ull;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    uint8_t *data = filled(300000, 78);
    put(e, "gone", data, 300000, NULL);
    put(e, "kept", data, 300000, NULL);
    e->f[5].fail_read = e->f[5].fail_write = 1;
    e->f[5].sick = 3; /* failed */
    assert_int_equal(obj_delete(e->set, "bkt", "gone"), 0);
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(head_kind_at(e, 5, "gone", ""), 'L');
    e->f[5].fail_read = e->f[5].fail_write = 0;
    e->f[5].sick = 0;
    e->f[5].refilling = 1;
    char walked[256] = "";
    assert_int_equal(obj_list_retired(e->set, "bkt", NULL, NULL, retired_cb, walked), 0);
    assert_string_equal(walked, "gone@,");
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal_retired(e->set, "bkt", "gone", "", &rep), 0);
    assert_int_equal(head_kind_at(e, 5, "gone", ""), 'T');
    assert_true(rep.heads_fixed >= 1);
    assert_true(heads_all_gone(e, "gone", ""));
    walked[0] = 0;
    assert_int_equal(obj_list_retired(e->set, "bkt", NULL, NULL, retired_cb, walked), 0);
    assert_string_equal(walked, "");
    e->f[5].refilling = 0;
    expect(e, "kept", data, 300000);
    free(data);
}

/* A delete marker written short of a store: put there once it is back (the heal of a key
 * whose current head is a marker did nothing), the version it covers archived there too. */
static void test_a_delete_marker_short_of_a_store_reaches_it_once_back(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *data = filled(big, 79);
    obj_info_t v1, mk;
    vput_bytes(e, "mk", data, big, &v1, 1);
    store_away(e, 5, 1);
    assert_int_equal(obj_delete_current(e->set, "bkt", "mk", NULL, OBJ_VERSIONED, &mk), 0);
    assert_int_equal(head_kind_at(e, 5, "mk", ""), 'L');
    store_away(e, 5, 0);
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(head_kind_at(e, 5, "mk", ""), 'M');
    assert_int_equal(live_heads_of(e, "mk", &v1), N);
    expect_version(e, "mk", v1.vid, data, big);
    free(data);
}

/* A version deleted by id while a store was away: its tombstone put there once it is back,
 * then gone with the others. */
static void test_a_delete_by_id_short_of_a_store_reaches_it_once_back(void **state)
{
    env_t *e = *state;
    obj__head_drop_delay_ns = 200000000ull;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *d1 = filled(big, 80), *d2 = filled(big, 81);
    obj_info_t v1, v2;
    vput_bytes(e, "rt", d1, big, &v1, 1);
    vput_bytes(e, "rt", d2, big, &v2, 1);
    assert_int_equal(live_heads_of(e, "rt", &v1), N);
    store_away(e, 5, 1);
    assert_int_equal(obj_delete_version(e->set, "bkt", "rt", v1.vid, NULL, NULL), 0);
    assert_int_equal(live_heads_of(e, "rt", &v1), 1);
    store_away(e, 5, 0);
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(live_heads_of(e, "rt", &v1), 0);
    char pos[OBJ_VID_LEN + 1];
    obj__vid_of(pos, v1.mtime_ns);
    assert_true(heads_all_gone(e, "rt", pos));
    obj_info_t info;
    assert_int_equal(obj_stat_version(e->set, "bkt", "rt", v1.vid, &info), ERR_NOT_FOUND);
    expect_version(e, "rt", v2.vid, d2, big);
    free(d1);
    free(d2);
}

/* Records of namespace ns on store i (every position, every shard). */
static int count_records(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    (void)id;
    (void)st;
    (void)meta;
    (*(int *)arg)++;
    return 0;
}

static int records_in(env_t *e, int i, const char *ns)
{
    int n = 0;
    drive_from_t from = {.how = DRIVE_FROM_START};
    assert_int_equal(e->f[i].in.ops->scan(e->f[i].in.ctx, ns, "", &from, count_records, &n), 0);
    return n;
}

/*
 * A deleted bucket's internal name purged (s3_gone.c): heads at every position, tombstones
 * and block records, a write's blocks that no head names, on every store; another bucket's
 * kept. A store away is left (ERR_UNRECOVERABLE, counted), the others purged all the same,
 * and a second purge with it back finds it.
 */
static void test_purge_of_a_deleted_buckets_name(void **state)
{
    env_t *e = *state;
    size_t big = 2 * K * B + 5;
    uint8_t *data = filled(big, 90);
    int err;
    for (int i = 0; i < 3; i++) {
        char key[8];
        snprintf(key, sizeof(key), "g%d", i);
        obj_writer_t *w = obj_put_begin(e->set, "gone", key, &err);
        assert_non_null(w);
        assert_int_equal(obj_put_write(w, data, i == 0 ? 100 : big), 0);
        obj_put_set_versioning(w, i == 2 ? OBJ_VERSIONED : OBJ_UNVERSIONED);
        assert_int_equal(obj_put_commit(w, NULL, NULL, 0, NULL), 0);
    }
    assert_int_equal(obj_delete(e->set, "gone", "g1"), 0);          /* its tombstones */
    obj_writer_t *cut = obj_put_begin(e->set, "gone", "cut", &err); /* blocks, no head */
    assert_non_null(cut);
    assert_int_equal(obj_put_write(cut, data, big), 0);
    put(e, "kept", data, big, NULL);
    int kept_before[N];
    for (int i = 0; i < N; i++) {
        assert_true(records_in(e, i, "gone") > 0);
        kept_before[i] = records_in(e, i, "bkt") + records_in(e, i, "bkt\x01");
    }
    store_away(e, 4, 1);
    obj_purge_report_t rep = {0};
    assert_int_equal(obj_purge_bucket(e->set, "gone", &rep), ERR_UNRECOVERABLE);
    assert_int_equal(rep.stores_left, 1);
    assert_true(rep.records > 0 && rep.bytes > 2 * big / K);
    for (int i = 0; i < N; i++)
        if (i != 4) assert_int_equal(records_in(e, i, "gone") + records_in(e, i, "gone\x01"), 0);
    assert_true(records_in(e, 4, "gone") > 0);
    store_away(e, 4, 0);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_purge_bucket(e->set, "gone", &rep), 0);
    assert_true(rep.records > 0);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(obj_purge_bucket(e->set, "gone", &rep), 0);
    assert_int_equal(rep.records, 0); /* nothing left: the note may go */
    for (int i = 0; i < N; i++) {
        assert_int_equal(records_in(e, i, "gone") + records_in(e, i, "gone\x01"), 0);
        assert_int_equal(records_in(e, i, "bkt") + records_in(e, i, "bkt\x01"), kept_before[i]);
    }
    expect(e, "kept", data, big);
    obj_put_abort(cut);
    free(data);
}

/*
 * A version written while a store was away and covered by the next before the queue came to
 * it: the queue healed the key's current version only, so the covered one stayed short of
 * that store, and two more stores lost made it unreadable (a cluster probe: 36 of 65 such
 * versions, with every queue empty and every set "ok"). Noted by its id, it is healed too.
 */
static void test_heal_queue_heals_covered_versions(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *d1 = filled(big, 71), *d2 = filled(big, 72), *d3 = filled(big, 73);
    store_away(e, 2, 1); /* the queue waits for it */
    obj_info_t v1, v2, v3;
    vput_bytes(e, "cv", d1, big, &v1, 1);
    vput_bytes(e, "cv", d2, big, &v2, 1); /* covers v1, short of store 2 too */
    vput_bytes(e, "cv", d3, big, &v3, 1);
    store_away(e, 2, 0);
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(archived_on(e, "cv", &v1), N);
    assert_int_equal(archived_on(e, "cv", &v2), N);
    /* Every version whole with two other stores gone: store 2 holds its blocks again. */
    e->f[0].fail_read = e->f[1].fail_read = 1;
    expect_version(e, "cv", v1.vid, d1, big);
    expect_version(e, "cv", v2.vid, d2, big);
    expect_version(e, "cv", v3.vid, d3, big);
    e->f[0].fail_read = e->f[1].fail_read = 0;
    free(d1);
    free(d2);
    free(d3);
}

/* obj__heal_write_hook: another client's write of the key, short of store 2 (it went away
 * again), while the queue heals the key's entry: noted again, in a new entry. */
typedef struct {
    env_t *e;
    const uint8_t *data;
    size_t len;
    int calls, rc;
    _Atomic int done;
    obj_info_t v;
} write_meanwhile_t;

static void *write_meanwhile_thread(void *arg)
{
    write_meanwhile_t *w = arg;
    int err;
    obj_writer_t *wr = obj_put_begin(w->e->set, "bkt", "rv", &err);
    if (!wr) {
        w->rc = err;
        return NULL;
    }
    w->rc = obj_put_write(wr, w->data, w->len);
    obj_put_set_versioning(wr, OBJ_VERSIONED);
    if (!w->rc) w->rc = obj_put_commit(wr, NULL, NULL, 0, &w->v);
    return NULL;
}

static void write_before_the_heal_writes(void *arg, const char *key)
{
    write_meanwhile_t *w = arg;
    if (strcmp(key, "rv") != 0 || w->calls++) return;
    w->e->f[2].fail_write = 1;
    w->e->f[2].sick = 1; /* away again: this heal fails there */
    pthread_t t;         /* (not the heal thread: its own notes are ignored) */
    pthread_create(&t, NULL, write_meanwhile_thread, w);
    pthread_join(t, NULL);
    w->done = 1;
}

/*
 * An entry whose heal failed while the key was noted again meanwhile was dropped ("that one
 * stays"): fine when an entry meant the current version only, but the versions noted by id
 * in the dropped entry went with it, and the new entry names only what was noted since.
 */
static void test_heal_queue_keeps_noted_versions_of_a_failed_try(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *d1 = filled(big, 81), *d2 = filled(big, 82), *d3 = filled(big, 83);
    store_away(e, 2, 1);
    obj_info_t v1, v2;
    vput_bytes(e, "rv", d1, big, &v1, 1);
    vput_bytes(e, "rv", d2, big, &v2, 1); /* v1 archived short of store 2: noted by id */
    write_meanwhile_t w = {.e = e, .data = d3, .len = big};
    obj__heal_write_hook = write_before_the_heal_writes;
    obj__heal_write_hook_arg = &w;
    store_away(e, 2, 0); /* the queue takes the entry; the hook makes store 2 go again */
    obj_heal_stats_t st;
    for (int i = 0; i < 600; i++) {
        obj_heal_stats(e->set, &st);
        /* The write's entry queued, the first entry's try over (pending: the write's alone) */
        if (w.done && st.queued >= 2 && st.pending == 1) break;
        usleep(50000);
    }
    obj__heal_write_hook = NULL;
    assert_int_equal(w.rc, 0);
    assert_int_equal(st.pending, 1);
    store_away(e, 2, 0);
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    /* v1 noted by id, its entry's try failed: still healed (here it was not). */
    assert_int_equal(archived_on(e, "rv", &v1), N);
    e->f[0].fail_read = e->f[1].fail_read = 1;
    expect_version(e, "rv", v1.vid, d1, big);
    expect_version(e, "rv", v2.vid, d2, big);
    expect_version(e, "rv", w.v.vid, d3, big);
    e->f[0].fail_read = e->f[1].fail_read = 0;
    free(d1);
    free(d2);
    free(d3);
}

/* obj__heal_write_hook: the first heal write of key "fv" finds store 2 away again. */
static int fail_heal_calls;
static void fail_the_first_heal(void *arg, const char *key)
{
    env_t *e = arg;
    if (strcmp(key, "fv") != 0 || fail_heal_calls++) return;
    e->f[2].fail_write = 1;
    e->f[2].sick = 1;
}

/*
 * A version written short notes its own id; the queue's first try finds it current and heals
 * it as such, and that heal fails. The retry kept only the noted ids whose own heal failed:
 * none. Covered by a write acknowledged on every store before the retry (no note), the
 * version was never healed by id again (a review).
 */
static void test_heal_queue_retry_keeps_version_current_at_the_failed_try(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *d1 = filled(big, 91), *d2 = filled(big, 92);
    store_away(e, 2, 1);
    obj_info_t v1, v2;
    vput_bytes(e, "fv", d1, big, &v1, 1); /* short of store 2: noted with v1's id */
    fail_heal_calls = 0;
    obj__heal_write_hook = fail_the_first_heal;
    obj__heal_write_hook_arg = e;
    store_away(e, 2, 0); /* the queue takes the entry; its heal fails on store 2 */
    obj_heal_stats_t st = {0};
    for (int i = 0; i < 600 && !(fail_heal_calls && st.retries >= 1); i++) {
        obj_heal_stats(e->set, &st);
        usleep(20000);
    }
    obj__heal_write_hook = NULL;
    assert_int_equal(st.retries, 1);
    store_away(e, 2, 0);                  /* back: the retry is 2 s away */
    vput_bytes(e, "fv", d2, big, &v2, 1); /* every store: no note; v1 archived */
    heal_queue_drained(e, &st);
    assert_int_equal(st.pending, 0);
    e->f[0].fail_read = e->f[1].fail_read = 1;
    expect_version(e, "fv", v2.vid, d2, big);
    fprintf(stderr, "v2 whole with stores 0,1 failing; now v1 (retries=%llu healed=%llu)\n",
            (unsigned long long)st.retries, (unsigned long long)st.healed);
    expect_version(e, "fv", v1.vid, d1, big);
    e->f[0].fail_read = e->f[1].fail_read = 0;
    free(d1);
    free(d2);
}

/* obj__heal_write_hook: holds the queue on another key's heal until told to go on. */
typedef struct {
    const char *key;
    _Atomic int in, go;
} hold_heal_t;

static void hold_the_heal(void *arg, const char *key)
{
    hold_heal_t *h = arg;
    if (strcmp(key, h->key) != 0 || h->in) return;
    h->in = 1;
    for (int i = 0; i < 1200 && !h->go; i++)
        usleep(10000);
}

static void put_with(env_t *e, const char *key, const uint8_t *data, size_t len, obj_versioning_t v,
                     obj_info_t *out)
{
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", key, &err);
    assert_non_null(w);
    assert_int_equal(obj_put_write(w, data, len), 0);
    obj_put_set_versioning(w, v);
    assert_int_equal(obj_put_commit(w, NULL, NULL, 0, out), 0);
}

/*
 * A version acknowledged short of store 2, then covered once store 2 was back (a new version
 * archives it whole: no archive note) before the queue came to it (busy with another key).
 */
static void covered_after_the_store_came_back(env_t *e, obj_versioning_t first)
{
    assert_int_equal(obj_set_heal_start(e->set), 0);
    size_t big = 2 * K * B + 5;
    uint8_t *d0 = filled(big, 91), *d1 = filled(big, 92), *d2 = filled(big, 93);
    store_away(e, 2, 1);
    obj_info_t v0, v1, v2;
    put_with(e, "hn/first", d0, big, OBJ_UNVERSIONED, &v0); /* queued first: holds the queue */
    put_with(e, "hn/key", d1, big, first, &v1);             /* short of store 2 */
    hold_heal_t h = {.key = "hn/first"};
    obj__heal_write_hook = hold_the_heal;
    obj__heal_write_hook_arg = &h;
    store_away(e, 2, 0);
    for (int i = 0; i < 600 && !h.in; i++)
        usleep(10000);
    assert_true(h.in);
    put_with(e, "hn/key", d2, big, OBJ_VERSIONED, &v2); /* archives v1 whole: nothing short */
    h.go = 1;
    obj_heal_stats_t st;
    heal_queue_drained(e, &st);
    obj__heal_write_hook = NULL;
    assert_int_equal(st.pending, 0);
    e->f[0].fail_read = e->f[1].fail_read = 1;
    expect_version(e, "hn/key", v2.vid, d2, big);
    expect_version(e, "hn/key", v1.vid[0] ? v1.vid : "null", d1, big); /* store 2 healed */
    e->f[0].fail_read = e->f[1].fail_read = 0;
    free(d0);
    free(d1);
    free(d2);
}

/* The commit's own note (obj_commit.c, commit_heads): the only one that names v1 here. */
static void test_heal_queue_heals_a_version_covered_later(void **state)
{
    covered_after_the_store_came_back(*state, OBJ_VERSIONED);
}

/* The same for a null version (a Suspended bucket's write): the commit noted info->vid,
 * "" for it, so the entry named the current version only and the null one stayed short. */
static void test_heal_queue_heals_a_covered_null_version(void **state)
{
    covered_after_the_store_came_back(*state, OBJ_SUSPENDED);
}

static void test_heal_queue(void **state)
{
    env_t *e = *state;
    assert_int_equal(obj_set_heal_start(e->set), 0);
    obj_set_inline_max(e->set, 4096);
    size_t big = 3 * K * B + 5;
    uint8_t *data = malloc(big);
    fill(data, big, 17);
    /* A small key whose copies include store 2 (else it is written whole without it). */
    char small[32];
    for (int i = 0;; i++) {
        snprintf(small, sizeof(small), "hq/small%d", i);
        if ((obj__inline_stores(e->set, "bkt", small) >> 2) & 1) break;
    }
    e->f[2].fail_write = 1;
    e->f[2].sick = 1; /* away: the queue waits for it */
    put(e, "hq/big", data, big, NULL);
    put(e, small, data + 9, 2000, NULL);
    put(e, "hq/big", data, big, NULL); /* again: one entry */
    obj_heal_stats_t st;
    obj_heal_stats(e->set, &st);
    assert_int_equal(st.pending, 2);
    assert_int_equal(st.healed, 0);
    e->f[2].fail_write = 0;
    e->f[2].sick = 0;
    for (int i = 0; i < 600; i++) {
        obj_heal_stats(e->set, &st);
        if (st.pending == 0 && st.healed >= 2 && st.drops_pending == 0) break;
        usleep(50000);
    }
    assert_int_equal(st.pending, 0);
    assert_true(st.healed >= 2);
    assert_true(st.blocks_fixed > 0 && st.heads_fixed >= 2);
    /* The first hq/big's blocks, kept by store 2 when the second replaced it while it was
     * away, went once it was back: store 2 holds the current version's blocks only. */
    assert_int_equal(st.drops_pending, 0);
    assert_true(st.drops_done >= 1);
    obj_info_t cur;
    assert_int_equal(obj_stat(e->set, "bkt", "hq/big", &cur), 0);
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, "bkt");
    other_blocks_t ob = {cur.upload_id, 0};
    assert_true(e->f[2].in.ops->list(e->f[2].in.ctx, bb, "hq/big", NULL, count_other_blocks, &ob) >=
                0);
    assert_int_equal(ob.n, 0);
    e->f[0].fail_read = e->f[1].fail_read = 1;
    expect(e, "hq/big", data, big);
    expect(e, small, data + 9, 2000);
    e->f[0].fail_read = e->f[1].fail_read = 0;
    free(data);
}

static long asked(const faulty_t *f)
{
    return f->n_stat + f->n_get + f->n_read + f->n_split + f->scanned;
}

/*
 * A store whose node went silent (suspect) is read around: blocks rebuilt
 * from parity, heads and inline bytes from the other stores, listings from
 * the others; asked only when more than m stores are not up.
 */
static void test_reads_avoid_sick_stores(void **state)
{
    env_t *e = *state;
    obj_set_inline_max(e->set, 4096);
    size_t big = 3 * K * B + 123;
    uint8_t *data = malloc(big);
    fill(data, big, 77);
    put(e, "sick/big", data, big, NULL);
    put(e, "sick/small", data + 5, 1000, NULL);
    for (int sick = 0; sick < N; sick++) {
        for (int j = 0; j < N; j++) {
            e->f[j].sick = j == sick;
            e->f[j].n_stat = e->f[j].n_get = e->f[j].n_read = e->f[j].n_split = 0;
            e->f[j].scanned = 0;
        }
        expect(e, "sick/big", data, big);
        expect(e, "sick/small", data + 5, 1000);
        char out[256] = "";
        assert_int_equal(obj_list(e->set, "bkt", "sick/", NULL, list_cb, out), 0);
        assert_string_equal(out, "sick/big,sick/small,");
        assert_int_equal(asked(&e->f[sick]), 0);
    }
    /* More than m not up: they are asked (the read cannot do without them). */
    for (int j = 0; j < N; j++) {
        e->f[j].sick = j <= M;
        e->f[j].n_stat = e->f[j].n_get = e->f[j].n_read = e->f[j].n_split = 0;
    }
    expect(e, "sick/big", data, big);
    expect(e, "sick/small", data + 5, 1000);
    long sick_asked = 0;
    for (int j = 0; j <= M; j++)
        sick_asked += asked(&e->f[j]);
    assert_true(sick_asked > 0);
    for (int j = 0; j < N; j++)
        e->f[j].sick = 0;
    free(data);
}

/*
 * Hedged reads (remote stores): a node that holds the block reads of one
 * drive costs a read the hedge delay, not its silence. Each stripe's read of
 * that drive is given up on once parity read beside it is in, its store is
 * read around from then on (no more reads wait on it), and the bytes are
 * exact. The held reads answered late are dropped. Without hedging (delay 0)
 * the same read would wait for the held requests: that is not run here (it
 * would hang until the call deadline), but the counter shows the path taken.
 */
static void test_hedged_block_reads(void **state)
{
    env_t *e = *state;
    if (!remote) skip(); /* a local drive's read cannot be given up on */
    obj_set_inline_max(e->set, 0);
    size_t big = 4 * K * B + 77; /* five stripes */
    uint8_t *data = malloc(big);
    fill(data, big, 99);
    put(e, "hedge/big", data, big, NULL); /* whole: its writes are not hedged */
    obj_set_hedge_ms(e->set, 20);
    uint64_t hedged0 = obj_set_hedged(e->set);
    pthread_mutex_lock(&hold_mu);
    hold_drive = 1; /* a data shard whose store reads split (odd stores) */
    nheld = 0;
    pthread_mutex_unlock(&hold_mu);
    expect(e, "hedge/big", data, big);
    assert_true(obj_set_hedged(e->set) > hedged0);
    /* Read around from now on: a second read sends the held drive nothing. */
    pthread_mutex_lock(&hold_mu);
    int before = nheld;
    pthread_mutex_unlock(&hold_mu);
    assert_true(before >= 1);
    assert_true(obj__slow(e->set) & (1u << 1));
    expect(e, "hedge/big", data, big);
    pthread_mutex_lock(&hold_mu);
    assert_int_equal(nheld, before);
    pthread_mutex_unlock(&hold_mu);
    /* The late answers find no call waiting for them; the next reads are whole. */
    release_held(e->serve);
    expect(e, "hedge/big", data, big);
    atomic_store(&e->set->slow_until[1], 0);
    expect(e, "hedge/big", data, big);
    /*
     * A slow store and a failing one in the same stripe: both parity blocks must stand in
     * (one spare per slow call would leave the stripe a block short, waiting on the held one
     * for ever). Then the held reads are answered late again.
     */
    e->f[3].fail_read = 1;
    pthread_mutex_lock(&hold_mu);
    hold_drive = 1;
    pthread_mutex_unlock(&hold_mu);
    expect(e, "hedge/big", data, big);
    release_held(e->serve);
    e->f[3].fail_read = 0;
    atomic_store(&e->set->slow_until[1], 0);
    expect(e, "hedge/big", data, big);
    free(data);
}

static int setup_long(void **state)
{
    client_timeout_ms = 600000; /* a held call never times out within the test */
    int rc = setup(state);
    client_timeout_ms = 0;
    return rc;
}

/* A PUT run on its own thread, so that the test can tell one that waits on held calls. */
typedef struct {
    env_t *e;
    const char *key;
    const uint8_t *data;
    size_t n;
    int rc;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} bg_put_t;

static void *bg_put_run(void *arg)
{
    bg_put_t *b = arg;
    int err;
    obj_writer_t *w = obj_put_begin(b->e->set, "bkt", b->key, &err);
    int rc = w ? 0 : err;
    if (w && b->n) rc = obj_put_write(w, b->data, b->n);
    if (w && !rc)
        rc = obj_put_commit(w, NULL, NULL, 0, NULL);
    else if (w)
        obj_put_abort(w);
    pthread_mutex_lock(&b->mu);
    b->rc = rc;
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void bg_put_start(bg_put_t *b, pthread_t *t, env_t *e, const char *key, const uint8_t *data,
                         size_t n)
{
    *b = (bg_put_t){.e = e, .key = key, .data = data, .n = n};
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    assert_int_equal(pthread_create(t, NULL, bg_put_run, b), 0);
}

/* Whether the PUT ended within ms; if it did not by then, the held calls are let go first. */
static int bg_put_wait(bg_put_t *b, pthread_t t, env_t *e, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&b->mu);
    while (!b->done && pthread_cond_timedwait(&b->cv, &b->mu, &dl) == 0) {
    }
    int done = b->done;
    pthread_mutex_unlock(&b->mu);
    if (!done) release_held(e->serve); /* so that the thread can end */
    pthread_join(t, NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    return done;
}

/* A PUT that must end while the held calls are still held (they never time out here). */
static void put_while_held(env_t *e, const char *key, const uint8_t *data, size_t n)
{
    bg_put_t b;
    pthread_t t;
    bg_put_start(&b, &t, e, key, data, n);
    /* Far above the hedge delay: only a PUT that waits for the held store misses it. */
    assert_true(bg_put_wait(&b, t, e, 30000));
    assert_int_equal(b.rc, 0);
}

static void hold_writes(int drive, int what)
{
    pthread_mutex_lock(&hold_mu);
    hold_put_drive = drive;
    hold_what = what;
    pthread_mutex_unlock(&hold_mu);
}

static int held_count(void)
{
    pthread_mutex_lock(&hold_mu);
    int n = nheld;
    pthread_mutex_unlock(&hold_mu);
    return n;
}

/*
 * Hedged writes (remote stores): a node that holds the writes of one drive
 * (its answers never come: the call deadline is ten minutes) costs a PUT the
 * hedge delay once the write quorum has each round: a single-stripe
 * object whose heads are held there, a multi-stripe one whose blocks are,
 * and an inline one whose copies include a drive that answers nothing (a
 * frozen node: the commit's read of the heads is given up on too). Each
 * reads back exact while the drive still holds everything; then the held
 * calls land late (a block or head of a committed version), the heal queue
 * puts back what the drive missed, and the objects read whole with two
 * other stores failing (they need the healed drive). A commit whose quorum
 * fails elsewhere does not give up on the held head: it waits for it, and
 * its undo then finds and removes it (a head landing after the undo would
 * be a refused version). Without hedged writes every PUT here waits for the
 * held calls: bg_put_wait gives up after 30 s and the test fails.
 */
static void test_hedged_writes(void **state)
{
    env_t *e = *state;
    if (!remote) skip(); /* a local drive's write cannot be given up on */
    const int hd = 1;    /* the drive whose node holds its writes */
    assert_int_equal(obj_set_heal_start(e->set), 0);
    obj_set_inline_max(e->set, 4096);
    /*
     * A long delay and quorum k: a store given up on by chance (a loaded machine, ASan:
     * calls slower than the delay) would spend the write's margin, and a round that needs
     * the held store waits for it. k+1 below, where the test needs a commit that cannot
     * reach its quorum.
     */
    obj_set_hedge_ms(e->set, 500);
    size_t one = K * B - 9, multi = 3 * K * B + 77, small = 1500;
    uint8_t *data = malloc(multi);
    fill(data, multi, 7);
    char skey[32]; /* an inline key whose copies include the held drive */
    for (int i = 0;; i++) {
        snprintf(skey, sizeof(skey), "hw/small%d", i);
        if ((obj__inline_stores(e->set, "bkt", skey) >> hd) & 1) break;
    }
    put(e, "hw/one", data + 1, 100, NULL); /* versions to replace: not new keys */
    put(e, "hw/undo", data + 2, one, NULL);

    /* The heads round: blocks land, the heads of the held drive do not. */
    uint64_t w0 = obj_set_hedged_writes(e->set);
    hold_writes(hd, HOLD_HEADS);
    put_while_held(e, "hw/one", data, one);
    assert_true(obj_set_hedged_writes(e->set) > w0);
    assert_true(held_count() >= 1);
    assert_true(obj__slow(e->set) & (1u << hd));
    /* Slow: the next PUT does not even ask it (nothing of it is given up on). */
    w0 = obj_set_hedged_writes(e->set);
    put_while_held(e, "hw/one2", data + 3, one);
    assert_int_equal(obj_set_hedged_writes(e->set), w0);

    /* Block rounds: every stripe's block of the held drive is held. */
    atomic_store(&e->set->slow_until[hd], 0);
    hold_writes(hd, HOLD_BLOCKS | HOLD_HEADS);
    w0 = obj_set_hedged_writes(e->set);
    put_while_held(e, "hw/multi", data, multi);
    assert_true(obj_set_hedged_writes(e->set) > w0);

    /* A frozen drive: its heads are not read either; the inline copies go around it. */
    atomic_store(&e->set->slow_until[hd], 0);
    hold_writes(hd, HOLD_ALL);
    put_while_held(e, skey, data + 5, small);
    expect(e, "hw/one", data, one);
    expect(e, "hw/one2", data + 3, one);
    expect(e, "hw/multi", data, multi);
    expect(e, skey, data + 5, small);

    /* The late calls land; the heal queue puts back what the drive missed. */
    release_held(e->serve);
    atomic_store(&e->set->slow_until[hd], 0);
    obj_heal_stats_t st;
    for (int i = 0; i < 600; i++) {
        obj_heal_stats(e->set, &st);
        if (st.pending == 0 && st.healed >= 4) break;
        usleep(50000);
    }
    assert_int_equal(st.pending, 0);
    assert_true(st.healed >= 4);
    e->f[0].fail_read = e->f[2].fail_read = 1; /* m stores fail: the healed one is needed */
    expect(e, "hw/one", data, one);
    expect(e, "hw/one2", data + 3, one);
    expect(e, "hw/multi", data, multi);
    expect(e, skey, data + 5, small);
    e->f[0].fail_read = e->f[2].fail_read = 0;

    /*
     * A commit short of its quorum elsewhere (three stores fail heads: 2 heads + the held one
     * can never make k+1, nor the k that would make it stand) is not hedged: it waits for the
     * held head, which lands once released, and is undone with the rest. The version that stood
     * before is what every store holds.
     */
    obj_info_t prev;
    assert_int_equal(obj_stat(e->set, "bkt", "hw/undo", &prev), 0);
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0);
    int before = held_count();
    hold_writes(hd, HOLD_HEADS);
    e->f[3].fail_head = e->f[4].fail_head = e->f[5].fail_head = 1;
    bg_put_t b;
    pthread_t t;
    bg_put_start(&b, &t, e, "hw/undo", data + 11, one);
    for (int i = 0; i < 600 && held_count() == before; i++)
        usleep(10000);                        /* its head reached the held drive */
    assert_false(bg_put_wait(&b, t, e, 300)); /* still waiting on it: released now */
    assert_int_not_equal(b.rc, 0);
    e->f[3].fail_head = e->f[4].fail_head = e->f[5].fail_head = 0;
    for (int i = 0; i < N; i++) {
        drive_id_t id = {"bkt", "hw/undo", "", (uint32_t)i};
        drive_stat_t ds;
        uint8_t meta[HEAD_MAX];
        obj_info_t h;
        assert_int_equal(e->f[i].in.ops->stat(e->f[i].in.ctx, &id, &ds, meta, sizeof(meta)), 0);
        assert_int_equal(obj_meta_decode(meta, ds.meta_len, &h), 0);
        assert_string_equal(h.upload_id, prev.upload_id);
    }
    expect(e, "hw/undo", data + 2, one);
    free(data);
}

/*
 * A head left on one store by a commit that never stood (its undo failed):
 * the newest head of m+1 stores may be it, the version that stands is not.
 * obj_stat_standing answers what a commit would replace (CreateBucket's
 * owner), and a conditional create still sees the standing version.
 */
static void test_stat_standing(void **state)
{
    env_t *e = *state;
    size_t big = 100000; /* erasure-coded: a head on every store */
    uint8_t *data = malloc(big);
    fill(data, big, 5);
    obj_info_t v1, ghost, got;
    put(e, "stand", data, 300, &v1); /* inline first: which stores readers ask (its copies) */
    int first = __builtin_ctz(v1.inl);
    put(e, "stand", data, big, &v1);
    assert_int_equal(v1.inl, 0);
    /* The ghost: newer, another upload, on one of the stores readers ask, nowhere else. */
    obj_info_copy(&ghost, &v1);
    memset(ghost.upload_id, 'f', 32);
    ghost.upload_id[32] = 0;
    ghost.stamp_ns = ghost.mtime_ns = v1.stamp_ns + 1000;
    uint8_t meta[20480];
    size_t ml = obj_meta_encode(&ghost, meta, sizeof(meta));
    assert_true(ml > 0);
    drive_id_t id = {"bkt", "stand", "", (uint32_t)first};
    assert_int_equal(e->f[first].in.ops->put(e->f[first].in.ctx, &id, NULL, 0, meta, ml), 0);
    assert_int_equal(obj_stat(e->set, "bkt", "stand", &got), 0);
    assert_string_equal(got.upload_id, ghost.upload_id); /* what a plain read may see */
    assert_int_equal(obj_stat_standing(e->set, "bkt", "stand", &got), 0);
    assert_string_equal(got.upload_id, v1.upload_id);
    /* A key with no standing version (the ghost alone): not found. */
    drive_id_t id2 = {"bkt", "lonely", "", (uint32_t)first};
    assert_int_equal(e->f[first].in.ops->put(e->f[first].in.ctx, &id2, NULL, 0, meta, ml), 0);
    assert_int_equal(obj_stat_standing(e->set, "bkt", "lonely", &got), ERR_NOT_FOUND);
    /* Deleted: not found either. */
    assert_int_equal(obj_delete(e->set, "bkt", "stand"), 0);
    assert_int_equal(obj_stat_standing(e->set, "bkt", "stand", &got), ERR_NOT_FOUND);
    free(data);
}

static int version_list_cb(void *arg, const char *key, const obj_info_t *info, int latest)
{
    (void)latest;
    return list_cb(arg, key, info);
}

/*
 * A drive replaced by an empty one: an inline object keeps two of its m+1
 * copies. A listing merges k stores, which may be the empty one and stores
 * holding no copy: it misses the key. What a healer walks
 * (obj_list_versions_all: every store) finds it, and a heal puts the copy
 * back, after which the ordinary listing finds it again.
 */
static void test_heal_walk_sees_all_stores(void **state)
{
    env_t *e = *state;
    uint8_t data[200];
    fill(data, sizeof(data), 8);
    obj_info_t info;
    char key[32];
    uint32_t last = (1u << N) - (1u << (N - M - 1)); /* the last m+1 stores */
    for (int i = 0;; i++) {
        assert_true(i < 2000);
        snprintf(key, sizeof(key), "walk/%d", i);
        put(e, key, data, sizeof(data), &info);
        if (info.sparse && info.inl == last) break;
        assert_int_equal(obj_delete(e->set, "bkt", key), 0);
    }
    /* The lowest copy's store loses everything of this key (its drive was replaced). */
    int lost = __builtin_ctz(last);
    drive_id_t id = {"bkt", key, "", (uint32_t)lost};
    assert_int_equal(e->f[lost].in.ops->del(e->f[lost].in.ctx, &id), 0);
    char out[256] = "";
    assert_int_equal(obj_list(e->set, "bkt", "walk/", NULL, list_cb, out), 0);
    assert_string_equal(out, ""); /* the k stores merged hold no copy now */
    out[0] = 0;
    assert_int_equal(
        obj_list_versions_all(e->set, "bkt", "walk/", NULL, NULL, version_list_cb, out), 0);
    char want[64];
    snprintf(want, sizeof(want), "%s,", key);
    assert_string_equal(out, want);
    obj_heal_report_t rep = {0};
    assert_int_equal(obj_heal(e->set, "bkt", key, &rep), 0);
    assert_int_equal(rep.heads_fixed, 1);
    out[0] = 0;
    assert_int_equal(obj_list(e->set, "bkt", "walk/", NULL, list_cb, out), 0);
    assert_string_equal(out, want);
}

/*
 * Writes skip stores that are not up (a silent node would hold each write
 * for its deadline): nothing is sent there, the object stands on the rest
 * and reads back whole, and a heal puts back what the store missed.
 */
static void test_writes_skip_sick_stores(void **state)
{
    env_t *e = *state;
    obj_set_inline_max(e->set, 4096);
    assert_int_equal(obj_set_write_quorum(e->set, K), 0);
    size_t big = 2 * K * B + 77;
    uint8_t *data = malloc(big);
    fill(data, big, 91);
    put(e, "skip/seed", data, 10, NULL); /* overwritten below: commits that cover a version */
    e->f[1].sick = e->f[4].sick = 1;
    e->f[1].n_put = e->f[4].n_put = e->f[1].n_del = e->f[4].n_del = e->f[0].n_del = 0;
    put(e, "skip/big", data, big, NULL);
    put(e, "skip/small", data + 3, 1000, NULL);
    put(e, "skip/seed", data + 1, 2000, NULL);
    assert_int_equal(obj_delete(e->set, "bkt", "skip/small"), 0);
    put(e, "skip/small", data + 4, 900, NULL);
    put(e, "skip/big", data, big, NULL); /* the old version's blocks are dropped */
    assert_int_equal(e->f[1].n_put + e->f[4].n_put + e->f[1].n_del + e->f[4].n_del, 0);
    assert_true(e->f[0].n_del > 0); /* (the stores that are up did see deletes) */
    expect(e, "skip/big", data, big);
    expect(e, "skip/small", data + 4, 900);
    expect(e, "skip/seed", data + 1, 2000);
    /* Back up: a heal fills them in, and then they carry reads on their own. */
    e->f[1].sick = e->f[4].sick = 0;
    const char *keys[] = {"skip/big", "skip/small", "skip/seed"};
    for (int i = 0; i < 3; i++) {
        obj_heal_report_t rep = {0};
        assert_int_equal(obj_heal(e->set, "bkt", keys[i], &rep), 0);
        assert_int_equal(rep.failed, 0);
    }
    assert_true(e->f[1].n_put > 0 && e->f[4].n_put > 0);
    for (int j = 0; j < N; j++)
        e->f[j].fail_read = j != 1 && j != 4 && j != 0 && j != 2; /* m stores away */
    expect(e, "skip/big", data, big);
    expect(e, "skip/small", data + 4, 900);
    expect(e, "skip/seed", data + 1, 2000);
    for (int j = 0; j < N; j++)
        e->f[j].fail_read = 0;
    /* More stores away than the quorum allows: refused before anything is written. */
    assert_int_equal(obj_set_write_quorum(e->set, K + 1), 0);
    e->f[1].sick = e->f[4].sick = 1;
    e->f[1].n_put = e->f[4].n_put = 0;
    int err;
    /* At once (begin), or as soon as the object is too big for inline copies that avoid them. */
    obj_writer_t *w = obj_put_begin(e->set, "bkt", "skip/refused", &err);
    int rc = w ? obj_put_write(w, data, big) : err;
    if (w && rc == 0)
        rc = obj_put_commit(w, NULL, NULL, 0, NULL);
    else if (w)
        obj_put_abort(w);
    assert_int_equal(rc, ERR_UNRECOVERABLE);
    assert_int_equal(e->f[1].n_put + e->f[4].n_put, 0);
    obj_info_t info;
    assert_int_equal(obj_stat(e->set, "bkt", "skip/refused", &info), ERR_NOT_FOUND);
    e->f[1].sick = e->f[4].sick = 0;
    free(data);
}

static void test_delete_and_list(void **state)
{
    env_t *e = *state;
    uint8_t data[100];
    fill(data, sizeof(data), 41);
    const char *keys[] = {"l/c", "l/a", "l/b", "m/x"};
    for (int i = 0; i < 4; i++)
        put(e, keys[i], data, sizeof(data), NULL);
    char out[256] = "";
    assert_int_equal(obj_list(e->set, "bkt", "l/", NULL, list_cb, out), 0);
    assert_string_equal(out, "l/a,l/b,l/c,");
    /* One store misses the delete: the marker on the others still wins. */
    e->f[0].fail_write = 1;
    assert_int_equal(obj_delete(e->set, "bkt", "l/b"), 0);
    e->f[0].fail_write = 0;
    obj_info_t info;
    assert_int_equal(obj_stat(e->set, "bkt", "l/b", &info), ERR_NOT_FOUND);
    out[0] = 0;
    assert_int_equal(obj_list(e->set, "bkt", "l/", NULL, list_cb, out), 0);
    assert_string_equal(out, "l/a,l/c,");
    out[0] = 0;
    assert_int_equal(obj_list(e->set, "bkt", "l/", "l/a", list_cb, out), 0);
    assert_string_equal(out, "l/c,");
    assert_int_equal(obj_delete(e->set, "bkt", "l/b"), ERR_NOT_FOUND);
    /* An aborted upload leaves nothing visible. */
    int err;
    obj_writer_t *w = obj_put_begin(e->set, "bkt", "aborted", &err);
    assert_int_equal(obj_put_write(w, data, sizeof(data)), 0);
    obj_put_abort(w);
    assert_int_equal(obj_stat(e->set, "bkt", "aborted", &info), ERR_NOT_FOUND);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_avoid_sick_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stripe_reads_in_one_submission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_skip_sick_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stat_standing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heal_walk_sees_all_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_quorum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hedged_block_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hedged_writes, setup_long, teardown),
        cmocka_unit_test_setup_teardown(test_block_drop_does_not_wait_behind_tombstones, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heal_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_condition_sees_plain_head_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conditional_head_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_leaves_a_put_after_its_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heal_racing_a_delete_puts_nothing_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refill_racing_a_delete_puts_nothing_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_two_heals_racing_a_delete_put_nothing_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_two_heals_after_the_drop_put_nothing_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refill_slower_than_the_drop_writes_no_head, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refill_slower_than_the_drop_reads_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_delete_tombstones_refuse_the_version_then_go, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_delete_keeps_tombstones_over_a_store_that_missed_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_delete_with_other_stores_failing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drop_queue_full_is_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_asks_slow_copies_before_not_found, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_delete_at_full_file_systems, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heal_goes_on_without_a_failed_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fresh_note_waits_for_no_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_delete_short_of_a_store_reaches_it_once_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_purge_of_a_deleted_buckets_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_delete_short_of_its_quorum_is_rolled_forward, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_delete_while_a_store_failed_reaches_it_through_the_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_delete_marker_short_of_a_store_reaches_it_once_back,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_delete_by_id_short_of_a_store_reaches_it_once_back,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_asks_slow_copies_past_older_tombstones, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_delete_through_older_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_archive_waits_for_its_feature, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heal_queue_heals_covered_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heal_queue_heals_a_version_covered_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heal_queue_heals_a_covered_null_version, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heal_queue_keeps_noted_versions_of_a_failed_try, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_heal_queue_retry_keeps_version_current_at_the_failed_try, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pooled_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overwrite_drops_old_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overwrite_drops_on_every_store_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reader_outlives_overwrite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers_one_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_gateways, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refill_heads_after_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refill_syncs_before_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_degraded_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_with_failing_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_and_list, setup, teardown),
    };
    obj_fixture_args(argc, argv);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
