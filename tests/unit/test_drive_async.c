/*
 * Asynchronous drive writes (drive_put_async, drive_delete_async) and the
 * group commit behind them:
 *
 *   - every accepted write calls back exactly once, with the rc drive_put
 *     would have returned; a refused one (bad identity, too large, nothing
 *     to delete, drive closing) returns the error and never calls back;
 *   - writes from one thread land in submission order (the last put wins);
 *   - asynchronous and synchronous writers mixed, and callbacks submitting
 *     more, all complete;
 *   - writes queued behind a flush in progress go out together in the next
 *     one (records per flush = writers), from one submitting thread or from
 *     32 synchronous ones: the first data fdatasync is held at a gate (the
 *     drive_io table) until all are queued, so nothing depends on timing;
 *   - a failed fdatasync gives every write of that flush ERR_IO, the drive
 *     turns read-only, and later writes get ERR_READONLY;
 *   - drive_close with writes in flight commits them all and runs every
 *     callback before it returns; submissions racing it are refused cleanly.
 *
 * Waits are on condition variables, with a one-minute bound that only turns
 * a hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "storage/drive.h"
#include "storage/rec.h"
#include "testlib.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)

#define WAIT_S 60 /* a wait longer than this is a hang: fail */

static drive_cfg_t cfg_for(const char *dir)
{
    drive_cfg_t c = {0};
    c.path = dir;
    c.iu = 4096;
    c.segment_size = 8 * MiB; /* a run never crosses a segment: flush counts are exact */
    c.capacity = 128 * MiB;
    return c;
}

static void deadline(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += WAIT_S;
}

/* ---- the gate: holds a data fdatasync, fails the next ones on demand ---- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    off_t last_off; /* of the last pwrite: 0 is a superblock, else a flush of records */
    int hold;       /* the next data fdatasync waits at the gate */
    int held;       /* one is waiting there */
    int fail;       /* the next `fail` data fdatasyncs fail with EIO (after the held one) */
} G = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0};

static drive_io_t real_io; /* the table as main found it */

static ssize_t g_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    pthread_mutex_lock(&G.mu);
    G.last_off = off;
    pthread_mutex_unlock(&G.mu);
    return real_io.pwritev(fd, iov, cnt, off);
}

static int g_fdatasync(int fd)
{
    struct timespec ts;
    int fail = 0;
    deadline(&ts);
    pthread_mutex_lock(&G.mu);
    if (G.last_off != 0 && G.hold) {
        G.hold = 0;
        G.held = 1;
        pthread_cond_broadcast(&G.cv);
        while (G.held && pthread_cond_timedwait(&G.cv, &G.mu, &ts) == 0)
            ;
        G.held = 0;
    } else if (G.last_off != 0 && G.fail) {
        G.fail--;
        fail = 1;
    }
    pthread_mutex_unlock(&G.mu);
    if (fail) {
        errno = EIO;
        return -1;
    }
    return real_io.fdatasync(fd);
}

static void gate_install(void)
{
    drive_io.pwritev = g_pwritev;
    drive_io.fdatasync = g_fdatasync;
    pthread_mutex_lock(&G.mu);
    G.last_off = 0;
    G.hold = G.held = G.fail = 0;
    pthread_mutex_unlock(&G.mu);
}

/* Every test's teardown: a test that failed with the gate in leaves no hooks behind. */
static int gate_remove(void **state)
{
    (void)state;
    drive_io = real_io;
    return 0;
}

static void gate_arm(void)
{
    pthread_mutex_lock(&G.mu);
    G.hold = 1;
    pthread_mutex_unlock(&G.mu);
}

/* Wait until a flush is held at the gate. */
static void gate_wait_held(void)
{
    struct timespec ts;
    int rc = 0;
    deadline(&ts);
    pthread_mutex_lock(&G.mu);
    while (!G.held && rc == 0)
        rc = pthread_cond_timedwait(&G.cv, &G.mu, &ts);
    int held = G.held;
    pthread_mutex_unlock(&G.mu);
    if (!held) fail_msg("no flush reached the gate");
}

static void gate_release(int then_fail)
{
    pthread_mutex_lock(&G.mu);
    G.fail = then_fail;
    G.held = 0;
    pthread_cond_broadcast(&G.cv);
    pthread_mutex_unlock(&G.mu);
}

/* ---- completions ---- */

#define MAXW 1024

typedef struct {
    char key[32];
    uint64_t seed;
    size_t len;
    uint8_t *buf;
    int calls, rc;
    int accepted; /* the submit returned 0: a callback is owed */
} wr_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finished;
    drive_t *chain_d; /* chained writes submit their successor from the callback */
    int chain_left;
} C = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, 0};

static wr_t W[MAXW];

static void on_done(void *arg, int rc)
{
    wr_t *w = arg;
    pthread_mutex_lock(&C.mu);
    w->calls++;
    w->rc = rc;
    C.finished++;
    pthread_cond_broadcast(&C.cv);
    pthread_mutex_unlock(&C.mu);
}

static void reset(void)
{
    for (int i = 0; i < MAXW; i++) {
        free(W[i].buf);
        memset(&W[i], 0, sizeof(W[i]));
    }
    pthread_mutex_lock(&C.mu);
    C.finished = 0;
    pthread_mutex_unlock(&C.mu);
}

/* W[i] as a record: key, seeded payload of len bytes, meta "seed=N". */
static void wr_make(int i, const char *key, uint64_t seed, size_t len)
{
    wr_t *w = &W[i];
    free(w->buf);
    snprintf(w->key, sizeof(w->key), "%s", key);
    w->seed = seed;
    w->len = len;
    w->buf = malloc(len + 1);
    tl_fill(w->buf, len, seed);
}

static char meta_of[MAXW][32];

static int wr_submit(drive_t *d, int i)
{
    wr_t *w = &W[i];
    int n = snprintf(meta_of[i], sizeof(meta_of[i]), "seed=%llu", (unsigned long long)w->seed);
    /* The identity is copied: a stack buffer that is gone before the commit is fine. */
    char key[32];
    snprintf(key, sizeof(key), "%s", w->key);
    drive_id_t id = {"bkt", key, "", 0};
    int rc = drive_put_async(d, &id, w->buf, w->len, meta_of[i], (size_t)n, on_done, w);
    memset(key, 'X', sizeof(key) - 1);
    w->accepted = rc == 0;
    return rc;
}

static void wait_finished(int n)
{
    struct timespec ts;
    int rc = 0;
    deadline(&ts);
    pthread_mutex_lock(&C.mu);
    while (C.finished < n && rc == 0)
        rc = pthread_cond_timedwait(&C.cv, &C.mu, &ts);
    int got = C.finished;
    pthread_mutex_unlock(&C.mu);
    if (got < n) fail_msg("%d of %d callbacks ran", got, n);
}

/* 0: the record reads back as W[i] wrote it; ERR_NOT_FOUND; -100: different; else the error. */
static int wr_check(drive_t *d, int i)
{
    wr_t *w = &W[i];
    drive_id_t id = {"bkt", w->key, "", 0};
    drive_stat_t st;
    char meta[32] = {0}, want[32];
    int rc = drive_stat(d, &id, &st, meta, sizeof(meta) - 1);
    if (rc) return rc;
    snprintf(want, sizeof(want), "seed=%llu", (unsigned long long)w->seed);
    if (st.len != w->len || strcmp(meta, want) != 0) return -100;
    uint8_t *got = malloc(w->len + 1);
    rc = drive_read(d, &id, 0, got, w->len);
    if (rc == 0 && memcmp(got, w->buf, w->len) != 0) rc = -100;
    free(got);
    return rc;
}

/* ---- exactly once, refusals, order ---- */

static void test_async_exactly_once(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    char key[32];
    enum { NW = 300, NKEYS = 250 };
    reset();
    assert_int_equal(drive_open(&c, &d), 0);

    /* Refused at once, and never called back. */
    static wr_t bad;
    drive_id_t nobucket = {"", "k", "", 0}, ok = {"bkt", "k", "", 0};
    uint8_t byte = 0;
    assert_int_equal(drive_put_async(d, &nobucket, &byte, 1, NULL, 0, on_done, &bad), ERR_INVAL);
    assert_int_equal(drive_put_async(d, &ok, &byte, 1, &byte, REC_MAX_META + 1, on_done, &bad),
                     ERR_TOO_LARGE);
    assert_int_equal(drive_put_async(d, &ok, &byte, 9 * MiB, NULL, 0, on_done, &bad),
                     ERR_TOO_LARGE);
    assert_int_equal(drive_delete_async(d, &ok, on_done, &bad), ERR_NOT_FOUND);

    /* NKEYS keys, the last NW - NKEYS of them written twice: the later write must win. */
    for (int i = 0; i < NW; i++) {
        snprintf(key, sizeof(key), "k%03d", i % NKEYS);
        wr_make(i, key, 1000 + (uint64_t)i, (size_t)(tl_mix((uint64_t)i) % (20 * KiB)));
        assert_int_equal(wr_submit(d, i), 0);
    }
    wait_finished(NW);
    for (int i = 0; i < NW; i++) {
        assert_int_equal(W[i].calls, 1);
        assert_int_equal(W[i].rc, 0);
    }
    for (int i = NW - NKEYS; i < NW; i++)
        assert_int_equal(wr_check(d, i), 0);

    /* An asynchronous delete: done when its callback says so. */
    wr_t del = {0};
    drive_id_t victim = {"bkt", W[NW - 1].key, "", 0};
    assert_int_equal(drive_delete_async(d, &victim, on_done, &del), 0);
    wait_finished(NW + 1);
    assert_int_equal(del.calls, 1);
    assert_int_equal(del.rc, 0);
    drive_stat_t st;
    assert_int_equal(drive_stat(d, &victim, &st, NULL, 0), ERR_NOT_FOUND);
    assert_int_equal(bad.calls, 0);

    drive_stats_t ds;
    drive_stats(d, &ds);
    assert_int_equal(ds.flush_records, NW + 1);
    assert_int_equal(ds.queued, 0);
    drive_close(d);

    /* Durable: all there after a reopen. */
    assert_int_equal(drive_open(&c, &d), 0);
    for (int i = NW - NKEYS; i < NW - 1; i++)
        assert_int_equal(wr_check(d, i), 0);
    assert_int_equal(wr_check(d, NW - 1), ERR_NOT_FOUND);
    drive_close(d);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

/* ---- mixed with synchronous writers; callbacks that submit ---- */

#define SYNC_T    8
#define SYNC_EACH 50
#define CHAIN     40

typedef struct {
    drive_t *d;
    int t, errors;
} sw_t;

static void *sync_writer(void *arg)
{
    sw_t *a = arg;
    char key[32];
    uint8_t buf[3000];
    for (int i = 0; i < SYNC_EACH; i++) {
        snprintf(key, sizeof(key), "s%d/%02d", a->t, i);
        tl_fill(buf, sizeof(buf), (uint64_t)(a->t * 100 + i));
        drive_id_t id = {"bkt", key, "", 0};
        if (drive_put(a->d, &id, buf, sizeof(buf), NULL, 0) != 0) a->errors++;
    }
    return NULL;
}

/* Chain link i: when durable, submit link i+1 (from the commit's own thread). */
static void on_chain(void *arg, int rc)
{
    wr_t *w = arg;
    int next = (int)(w - W) + 1;
    on_done(arg, rc);
    pthread_mutex_lock(&C.mu);
    int go = rc == 0 && C.chain_left > 0;
    if (go) C.chain_left--;
    pthread_mutex_unlock(&C.mu);
    if (!go) return;
    wr_t *n = &W[next];
    drive_id_t id = {"bkt", n->key, "", 0};
    if (drive_put_async(C.chain_d, &id, n->buf, n->len, NULL, 0, on_chain, n) != 0)
        on_done(n, ERR_IO); /* counted, and the test sees the failure */
}

static void test_async_mixed(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    pthread_t th[SYNC_T];
    sw_t a[SYNC_T];
    char key[32];
    enum { NA = 400 };
    reset();
    assert_int_equal(drive_open(&c, &d), 0);

    /* The chain's links: W[NA .. NA + CHAIN]. */
    for (int i = 0; i <= CHAIN; i++) {
        snprintf(key, sizeof(key), "c%02d", i);
        wr_make(NA + i, key, 5000 + (uint64_t)i, 1500);
    }
    pthread_mutex_lock(&C.mu);
    C.chain_d = d;
    C.chain_left = CHAIN;
    pthread_mutex_unlock(&C.mu);

    for (int t = 0; t < SYNC_T; t++) {
        a[t] = (sw_t){d, t, 0};
        assert_int_equal(pthread_create(&th[t], NULL, sync_writer, &a[t]), 0);
    }
    drive_id_t first = {"bkt", W[NA].key, "", 0};
    assert_int_equal(drive_put_async(d, &first, W[NA].buf, W[NA].len, NULL, 0, on_chain, &W[NA]),
                     0);
    for (int i = 0; i < NA; i++) {
        snprintf(key, sizeof(key), "a%03d", i);
        wr_make(i, key, 2000 + (uint64_t)i, 100 + (size_t)(tl_mix((uint64_t)i) % (8 * KiB)));
        assert_int_equal(wr_submit(d, i), 0);
    }
    for (int t = 0; t < SYNC_T; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(a[t].errors, 0);
    }
    wait_finished(NA + CHAIN + 1);
    for (int i = 0; i < NA + CHAIN + 1; i++) {
        assert_int_equal(W[i].calls, 1);
        assert_int_equal(W[i].rc, 0);
    }
    for (int i = 0; i < NA; i += 7)
        assert_int_equal(wr_check(d, i), 0);
    drive_stats_t st;
    drive_stats(d, &st);
    assert_int_equal(st.flush_records, NA + CHAIN + 1 + SYNC_T * SYNC_EACH);
    print_message("mixed: %llu records in %llu flushes (max %llu)\n",
                  (unsigned long long)st.flush_records, (unsigned long long)st.flushes,
                  (unsigned long long)st.flush_max_records);
    drive_close(d);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

/* ---- batches grow with the writes waiting ---- */

#define BATCH 32

/* One asynchronous submitter: 32 writes queued behind a held flush go out in one. */
static void test_async_batches(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    char key[32];
    reset();
    assert_int_equal(drive_open(&c, &d), 0);
    gate_install();
    gate_arm();
    wr_make(0, "first", 1, 4096);
    assert_int_equal(wr_submit(d, 0), 0);
    gate_wait_held();
    /* The first flush is at its fdatasync: everything submitted now waits in the queue. */
    for (int i = 1; i <= BATCH; i++) {
        snprintf(key, sizeof(key), "b%02d", i);
        wr_make(i, key, 10 + (uint64_t)i, 4096);
        assert_int_equal(wr_submit(d, i), 0);
    }
    drive_stats_t st;
    drive_stats(d, &st);
    assert_int_equal(st.queued, BATCH);
    gate_release(0);
    wait_finished(BATCH + 1);
    for (int i = 0; i <= BATCH; i++) {
        assert_int_equal(W[i].calls, 1);
        assert_int_equal(W[i].rc, 0);
        assert_int_equal(wr_check(d, i), 0);
    }
    drive_stats(d, &st);
    assert_int_equal(st.flushes, 2);
    assert_int_equal(st.flush_records, BATCH + 1);
    assert_int_equal(st.flush_max_records, BATCH);
    drive_close(d);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

typedef struct {
    drive_t *d;
    int i, rc;
} one_t;

static void *sync_one(void *arg)
{
    one_t *o = arg;
    wr_t *w = &W[o->i];
    drive_id_t id = {"bkt", w->key, "", 0};
    o->rc = drive_put(o->d, &id, w->buf, w->len, NULL, 0);
    return NULL;
}

/* 32 synchronous writers queued behind a held flush: one flush carries all of them. */
static void test_sync_batches(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    pthread_t th[BATCH + 1];
    one_t o[BATCH + 1];
    char key[32];
    drive_stats_t st;
    reset();
    assert_int_equal(drive_open(&c, &d), 0);
    gate_install();
    gate_arm();
    for (int i = 0; i <= BATCH; i++) {
        snprintf(key, sizeof(key), "y%02d", i);
        wr_make(i, key, 300 + (uint64_t)i, 4096);
        o[i] = (one_t){d, i, -1};
    }
    /* Writer 0 leads the first commit and stops at the gate. */
    assert_int_equal(pthread_create(&th[0], NULL, sync_one, &o[0]), 0);
    gate_wait_held();
    for (int i = 1; i <= BATCH; i++)
        assert_int_equal(pthread_create(&th[i], NULL, sync_one, &o[i]), 0);
    /* Until all 32 are queued (they only enqueue and sleep: bounded by the gate's minute). */
    for (int spins = 0;; spins++) {
        drive_stats(d, &st);
        if (st.queued == BATCH) break;
        if (spins > WAIT_S * 1000)
            fail_msg("only %llu writers queued", (unsigned long long)st.queued);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    gate_release(0);
    for (int i = 0; i <= BATCH; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(o[i].rc, 0);
    }
    drive_stats(d, &st);
    assert_int_equal(st.flushes, 2);
    assert_int_equal(st.flush_max_records, BATCH);
    drive_close(d);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

/* ---- gathering small commits (commit_gather_us) ---- */

/*
 * While writers keep several records in flight, a commit of less than an IU
 * waits for more: here the gathering leader's commit ends when an IU's worth
 * is queued, so three writes take one flush whoever picked up the first. A
 * lone synchronous writer never waits.
 */
static void test_commit_gather(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    /*
     * A wait is bounded by commit_gather_us and by a commit's time as the drive's
     * clock measures it: a clock that stands still measures none, so here only an
     * IU's worth queued (or a close) ends a wait, never the time it took.
     */
    wl_sim_clock_t clk;
    clock_sim_init(&clk, 1);
    c.clock = &clk.base;
    c.commit_gather_us = WAIT_S * 1000000;
    drive_t *d;
    drive_stats_t st;
    reset();
    assert_int_equal(drive_open(&c, &d), 0);
    for (int i = 0; i < 4; i++) { /* one at a time: never gathered */
        char key[16];
        snprintf(key, sizeof(key), "lone%d", i);
        drive_id_t id = {"bkt", key, "", 0};
        assert_int_equal(drive_put(d, &id, "x", 1, NULL, 0), 0);
    }
    drive_stats(d, &st);
    assert_int_equal(st.commit_gathers, 0);
    assert_int_equal(st.flushes, 4);
    /* Several in flight: two small writes queued behind a held flush go out together. */
    gate_install();
    gate_arm();
    wr_make(0, "g0", 1, 100);
    assert_int_equal(wr_submit(d, 0), 0);
    gate_wait_held();
    wr_make(1, "g1", 2, 100);
    wr_make(2, "g2", 3, 100);
    assert_int_equal(wr_submit(d, 1), 0);
    assert_int_equal(wr_submit(d, 2), 0);
    gate_release(0);
    wait_finished(3);
    drive_stats(d, &st);
    assert_int_equal(st.flushes, 6);
    /* Now a small write waits for company; an IU's worth ends the wait: one flush. */
    wr_make(3, "g3", 4, 100);
    wr_make(4, "g4", 5, 100);
    wr_make(5, "g5", 6, 4096);
    for (int i = 3; i <= 5; i++)
        assert_int_equal(wr_submit(d, i), 0);
    wait_finished(6);
    for (int i = 0; i <= 5; i++) {
        assert_int_equal(W[i].rc, 0);
        assert_int_equal(wr_check(d, i), 0);
    }
    drive_stats(d, &st);
    assert_int_equal(st.flushes, 7);
    /* Closing while a leader gathers does not wait out its window. */
    wr_make(6, "g6", 7, 100);
    assert_int_equal(wr_submit(d, 6), 0);
    drive_close(d);
    wait_finished(7);
    assert_int_equal(W[6].rc, 0);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

/* ---- a failed fdatasync ---- */

static void test_async_fsync_fails(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    char key[32];
    drive_stats_t st;
    reset();
    assert_int_equal(drive_open(&c, &d), 0);
    gate_install();
    gate_arm();
    wr_make(0, "first", 1, 4096);
    assert_int_equal(wr_submit(d, 0), 0);
    gate_wait_held();
    for (int i = 1; i <= BATCH; i++) {
        snprintf(key, sizeof(key), "f%02d", i);
        wr_make(i, key, 10 + (uint64_t)i, 1000 + 100 * (size_t)i);
        assert_int_equal(wr_submit(d, i), 0);
    }
    /* The held flush succeeds; the next one, carrying the 32, fails at its fdatasync. */
    int saved = log_level;
    log_level = LOG_LVL_OFF; /* the failure's log lines are expected */
    gate_release(1);
    wait_finished(BATCH + 1);
    assert_int_equal(W[0].calls, 1);
    assert_int_equal(W[0].rc, 0);
    for (int i = 1; i <= BATCH; i++) {
        assert_int_equal(W[i].calls, 1);
        assert_int_equal(W[i].rc, ERR_IO);
    }
    drive_stats(d, &st);
    assert_true(st.readonly);
    /* Read-only from then on, asynchronous or not; reads go on. */
    wr_make(BATCH + 1, "later", 99, 4096);
    assert_int_equal(wr_submit(d, BATCH + 1), 0);
    wait_finished(BATCH + 2);
    assert_int_equal(W[BATCH + 1].rc, ERR_READONLY);
    drive_id_t id = {"bkt", "later", "", 0};
    assert_int_equal(drive_put(d, &id, "x", 1, NULL, 0), ERR_READONLY);
    log_level = saved;
    assert_int_equal(wr_check(d, 0), 0);
    drive_close(d);

    /* Reopened: the acknowledged write is there; the failed ones absent or whole. */
    assert_int_equal(drive_open(&c, &d), 0);
    assert_int_equal(wr_check(d, 0), 0);
    for (int i = 1; i <= BATCH; i++) {
        int got = wr_check(d, i);
        if (got != 0 && got != ERR_NOT_FOUND) fail_msg("failed write %d came back damaged", i);
    }
    assert_int_equal(wr_check(d, BATCH + 1), ERR_NOT_FOUND);
    drive_close(d);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

/* ---- close with writes in flight ---- */

static void *closer(void *arg)
{
    drive_close(arg);
    return NULL;
}

static void test_async_close_drains(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("async");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    pthread_t th;
    char key[32];
    reset();
    assert_int_equal(drive_open(&c, &d), 0);
    gate_install();
    gate_arm();
    wr_make(0, "first", 1, 4096);
    assert_int_equal(wr_submit(d, 0), 0);
    gate_wait_held();
    for (int i = 1; i <= BATCH; i++) {
        snprintf(key, sizeof(key), "z%02d", i);
        wr_make(i, key, 10 + (uint64_t)i, 4096);
        assert_int_equal(wr_submit(d, i), 0);
    }
    /* Close while one flush is held and 32 writes wait behind it. */
    assert_int_equal(pthread_create(&th, NULL, closer, d), 0);
    /*
     * Keep submitting until the drive refuses (ERR_CLOSED: close has begun);
     * what was accepted meanwhile is owed a callback like the rest. The
     * drive cannot go away before the gate opens.
     */
    int n = BATCH + 1, refused = 0;
    while (!refused && n < MAXW) {
        snprintf(key, sizeof(key), "r%04d", n);
        wr_make(n, key, 7000 + (uint64_t)n, 0);
        int rc = wr_submit(d, n);
        if (rc == ERR_CLOSED)
            refused = 1;
        else {
            assert_int_equal(rc, 0);
            n++;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    assert_true(refused);
    gate_release(0);
    pthread_join(th, NULL);
    /* drive_close returned: every callback has run, exactly once, each write durable. */
    pthread_mutex_lock(&C.mu);
    assert_int_equal(C.finished, n);
    pthread_mutex_unlock(&C.mu);
    assert_int_equal(W[n].calls, 0); /* the refused one */
    for (int i = 0; i < n; i++) {
        assert_int_equal(W[i].calls, 1);
        assert_int_equal(W[i].rc, 0);
    }
    assert_int_equal(drive_open(&c, &d), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(wr_check(d, i), 0);
    drive_close(d);
    print_message("close drained %d writes in flight\n", n);
    reset();
    tl_rm_rf(dir);
    free(dir);
}

int main(void)
{
    log_level = getenv("WL_LOG_LEVEL") ? log_level_parse(getenv("WL_LOG_LEVEL")) : LOG_LVL_ERROR;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("WL_TEST_FILTER")) cmocka_set_test_filter(getenv("WL_TEST_FILTER"));
    real_io = drive_io;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_async_exactly_once, gate_remove),
        cmocka_unit_test_teardown(test_async_mixed, gate_remove),
        cmocka_unit_test_teardown(test_async_batches, gate_remove),
        cmocka_unit_test_teardown(test_sync_batches, gate_remove),
        cmocka_unit_test_teardown(test_async_fsync_fails, gate_remove),
        cmocka_unit_test_teardown(test_async_close_drains, gate_remove),
        cmocka_unit_test_teardown(test_commit_gather, gate_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
