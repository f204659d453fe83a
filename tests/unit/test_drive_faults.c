/*
 * Injected write faults through the drive's I/O table (drive_io): pwrite
 * failing with EIO or ENOSPC, pwrite writing less than it was given, and
 * fdatasync failing, each at a chosen data write or flush (the Nth), with one
 * appender and with many (group commit: the failed flush carries several
 * requests). Each run shows that
 *
 *   - the append whose flush failed gets a clean error, never success, and
 *     so does every other request of the same flush (and no request of
 *     another flush gets that error);
 *   - after an I/O error, a short write or a failed flush the drive is
 *     read-only (ERR_READONLY for later writes, drive_stats says so) and the
 *     log says so (event=drive_readonly); reads go on; out of space it keeps
 *     writing in other segments;
 *   - nothing acknowledged is lost: closed and reopened with the real I/O,
 *     every record whose put returned 0 reads back byte for byte, and one
 *     whose put failed is either absent or whole.
 *
 * Also a failed pthread_create at open (linked with --wrap=pthread_create).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/err.h"
#include "common/log.h"
#include "storage/drive.h"
#include "testlib.h"
#include "storage/rec.h"

#define _XOPEN_SOURCE_EXTRA
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* ---- helpers ---- */

/* Small segments, so a run crosses segment boundaries (and superblock writes). */
static drive_cfg_t cfg_for(const char *dir)
{
    drive_cfg_t c = {0};
    c.path = dir;
    c.iu = 4096;
    c.segment_size = 256 * KiB;
    c.capacity = 32 * MiB;
    return c;
}

static size_t len_of(uint64_t seed)
{
    return 1000 + (size_t)(tl_mix(seed) % (20 * KiB));
}

static int put_rec(drive_t *d, const char *key, uint64_t seed)
{
    size_t len = len_of(seed);
    uint8_t *buf = malloc(len);
    char meta[32];
    tl_fill(buf, len, seed);
    int n = snprintf(meta, sizeof(meta), "seed=%llu", (unsigned long long)seed);
    drive_id_t id = {"bkt", key, "", 0};
    int rc = drive_put(d, &id, buf, len, meta, (size_t)n);
    free(buf);
    return rc;
}

/* 0: byte-identical (payload and metadata); ERR_NOT_FOUND; -100: different; else the error. */
static int check_rec(drive_t *d, const char *key, uint64_t seed)
{
    size_t len = len_of(seed);
    drive_id_t id = {"bkt", key, "", 0};
    drive_stat_t st;
    char meta[32] = {0}, want_meta[32];
    int rc = drive_stat(d, &id, &st, meta, sizeof(meta) - 1);
    if (rc) return rc;
    snprintf(want_meta, sizeof(want_meta), "seed=%llu", (unsigned long long)seed);
    if (st.len != len || strcmp(meta, want_meta) != 0) return -100;
    uint8_t *got = malloc(len), *want = malloc(len);
    tl_fill(want, len, seed);
    rc = drive_read(d, &id, 0, got, len);
    if (rc == 0 && memcmp(got, want, len) != 0) rc = -100;
    free(got);
    free(want);
    return rc;
}

/* ---- the fault injector ---- */

enum { F_NONE, F_EIO, F_ENOSPC, F_SHORT, F_SYNC, F_SB_EIO };
static const char *const kind_name[] = {"none",  "pwrite EIO", "pwrite ENOSPC",
                                        "short", "fdatasync",  "superblock EIO"};

#define MAX_FAILED 4096

static struct {
    pthread_mutex_t lock;
    int kind;
    int nth;         /* fire at the nth eligible call from arming (1 = the next one) */
    int min_records; /* eligible: a data flush carrying at least this many records */
    int calls, fired;
    /* the last data write: fd, offset and the records it carried */
    int last_fd, last_records;
    off_t last_off;
    /* the flush that failed: its records' keys */
    char *failed[MAX_FAILED];
    int nfailed;
} F = {.lock = PTHREAD_MUTEX_INITIALIZER};

static drive_io_t real_io;

/* Records packed back to back at the start of a flush's buffer (under F.lock). */
static int parse_batch(const uint8_t *buf, size_t n, int keep)
{
    size_t pos = 0;
    int count = 0;
    rec_view_t v;
    while (pos + REC_FIXED <= n && rec_parse_header(buf + pos, n - pos, &v) == 0 &&
           pos + v.hdr_len + v.payload_len <= n) {
        if (keep && F.nfailed < MAX_FAILED) {
            char *k = malloc(v.id.key_len + 1u);
            memcpy(k, v.id.key, v.id.key_len);
            k[v.id.key_len] = 0;
            F.failed[F.nfailed++] = k;
        }
        count++;
        pos += v.hdr_len + v.payload_len;
    }
    return count;
}

static ssize_t f_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    int act = F_NONE;
    pthread_mutex_lock(&F.lock);
    F.last_fd = fd;
    F.last_off = off;
    F.last_records = off ? parse_batch(buf, n, 0) : 0;
    if (!F.fired && off == 0 && F.kind == F_SB_EIO && ++F.calls == F.nth) act = F_SB_EIO;
    if (!F.fired && off != 0 && (F.kind == F_EIO || F.kind == F_ENOSPC || F.kind == F_SHORT) &&
        F.last_records >= F.min_records && ++F.calls == F.nth) {
        act = F.kind;
        parse_batch(buf, n, 1);
    }
    if (act) F.fired = 1;
    pthread_mutex_unlock(&F.lock);

    switch (act) {
    case F_EIO:
    case F_SB_EIO:
        errno = EIO;
        return -1;
    case F_ENOSPC:
        errno = ENOSPC;
        return -1;
    case F_SHORT: {
        /* The device takes the first half (whole 4 KiB blocks) and stops. */
        size_t part = n / 2 / 4096 * 4096;
        if (part && tl_pwrite_via(real_io.pwritev, fd, buf, part, off) != (ssize_t)part) return -1;
        return (ssize_t)part;
    }
    }
    return tl_pwrite_via(real_io.pwritev, fd, buf, n, off);
}

/* A commit's pieces, looked at (and failed) as one write. */
static ssize_t f_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return tl_pwritev_joined(f_pwrite, fd, iov, cnt, off);
}

static int f_fdatasync(int fd)
{
    int act = 0;
    pthread_mutex_lock(&F.lock);
    if (!F.fired && F.kind == F_SYNC && F.last_fd == fd && F.last_off != 0 &&
        F.last_records >= F.min_records && ++F.calls == F.nth)
        act = F.fired = 1;
    pthread_mutex_unlock(&F.lock);
    if (act) {
        errno = EIO;
        return -1;
    }
    return real_io.fdatasync(fd);
}

/* fdatasync fails after the write reached the page cache: remember what that write carried. */
static ssize_t f_pwrite_sync(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t r = f_pwrite(fd, buf, n, off);
    pthread_mutex_lock(&F.lock);
    if (F.kind == F_SYNC && !F.fired && off != 0) {
        for (int i = 0; i < F.nfailed; i++)
            free(F.failed[i]);
        F.nfailed = 0;
        parse_batch(buf, (size_t)(r > 0 ? r : 0), 1);
    }
    pthread_mutex_unlock(&F.lock);
    return r;
}

static ssize_t f_pwritev_sync(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return tl_pwritev_joined(f_pwrite_sync, fd, iov, cnt, off);
}

static void faults_arm(int kind, int nth, int min_records)
{
    pthread_mutex_lock(&F.lock);
    for (int i = 0; i < F.nfailed; i++)
        free(F.failed[i]);
    F.nfailed = 0;
    F.kind = kind;
    F.nth = nth;
    F.min_records = min_records;
    F.calls = F.fired = 0;
    F.last_fd = -1;
    pthread_mutex_unlock(&F.lock);
    real_io = drive_io;
    drive_io.pwritev = kind == F_SYNC ? f_pwritev_sync : f_pwritev;
    drive_io.fdatasync = f_fdatasync;
}

static void faults_off(void)
{
    drive_io = real_io;
    pthread_mutex_lock(&F.lock);
    F.kind = F_NONE;
    pthread_mutex_unlock(&F.lock);
}

static int in_failed(const char *key)
{
    for (int i = 0; i < F.nfailed; i++)
        if (strcmp(F.failed[i], key) == 0) return 1;
    return 0;
}

/* The error an append gets from the flush that failed, and whether the drive then refuses writes.
 */
static int clean_error(int kind)
{
    return kind == F_ENOSPC ? ERR_NOSPC : ERR_IO;
}

static int goes_readonly(int kind)
{
    return kind != F_ENOSPC;
}

/* What the log must say for each fault. */
static void check_log(const char *log, int kind)
{
    const char *want[] = {NULL,
                          "event=segment_write_failed",
                          "event=segment_write_failed",
                          "event=segment_write_failed",
                          "event=segment_flush_failed",
                          "event=segment_create_failed"};
    const char *reason[] = {NULL,
                            "reason=write_error",
                            NULL,
                            "reason=short_write",
                            "reason=fdatasync_failed",
                            "reason=superblock_write"};
    if (!strstr(log, want[kind]))
        fail_msg("%s: no %s in the log:\n%s", kind_name[kind], want[kind], log);
    if (goes_readonly(kind)) {
        const char *ro = strstr(log, "event=drive_readonly");
        if (!ro || !strstr(ro, reason[kind]) || !strstr(ro, "writes=refused_until_reopen"))
            fail_msg("%s: the log does not say the drive is read-only (%s):\n%s", kind_name[kind],
                     reason[kind], log);
        /* Said once, not once per refused write. */
        assert_null(strstr(ro + 1, "event=drive_readonly"));
    } else {
        assert_null(strstr(log, "event=drive_readonly"));
        assert_non_null(strstr(log, "action=segment_sealed"));
    }
    if (kind == F_SHORT) assert_non_null(strstr(log, "wrote="));
}

/* ---- one appender ---- */

#define SEQ_PUTS 40

static void seq_run(int kind, int nth)
{
    char *dir = tl_tmpdir("faults"), key[16];
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    int rc[SEQ_PUTS], failed_at = -1;
    drive_stats_t st;

    assert_int_equal(drive_open(&c, &d), 0);
    faults_arm(kind, nth, 1);
    tl_cap_start("faults");
    for (int i = 0; i < SEQ_PUTS; i++) {
        snprintf(key, sizeof(key), "s%03d", i);
        rc[i] = put_rec(d, key, (uint64_t)i * 31 + (uint64_t)kind);
    }
    char *log = tl_cap_stop(getenv("WL_FAULTS_VERBOSE") != NULL);
    if (!F.fired) fail_msg("%s #%d: the fault never fired", kind_name[kind], nth);
    for (int i = 0; i < SEQ_PUTS; i++) {
        if (failed_at < 0 && rc[i] != 0) {
            failed_at = i;
            if (rc[i] != clean_error(kind))
                fail_msg("%s #%d: put %d got %s, want %s", kind_name[kind], nth, i, err_name(rc[i]),
                         err_name(clean_error(kind)));
        } else if (failed_at >= 0) {
            int want = goes_readonly(kind) ? ERR_READONLY : 0;
            if (rc[i] != want)
                fail_msg("%s #%d: put %d after the failure got %s, want %s", kind_name[kind], nth,
                         i, err_name(rc[i]), err_name(want));
        }
    }
    assert_true(failed_at >= 0);
    /* One appender: the failed flush carried exactly the failed put (none for a superblock). */
    snprintf(key, sizeof(key), "s%03d", failed_at);
    if (kind == F_SB_EIO)
        assert_int_equal(F.nfailed, 0);
    else
        assert_true(F.nfailed == 1 && in_failed(key));
    check_log(log, kind);
    free(log);
    drive_stats(d, &st);
    assert_int_equal(st.readonly, goes_readonly(kind));

    /* Reads go on, read-only or not. */
    for (int i = 0; i < failed_at; i++) {
        snprintf(key, sizeof(key), "s%03d", i);
        assert_int_equal(check_rec(d, key, (uint64_t)i * 31 + (uint64_t)kind), 0);
    }
    drive_close(d);
    faults_off();

    /* Reopened with the real I/O: every acknowledged record, byte for byte; the rest absent or
     * whole. */
    assert_int_equal(drive_open(&c, &d), 0);
    for (int i = 0; i < SEQ_PUTS; i++) {
        snprintf(key, sizeof(key), "s%03d", i);
        int got = check_rec(d, key, (uint64_t)i * 31 + (uint64_t)kind);
        if (rc[i] == 0 && got != 0)
            fail_msg("%s #%d: acknowledged %s lost after reopen (%d)", kind_name[kind], nth, key,
                     got);
        if (rc[i] != 0 && got != 0 && got != ERR_NOT_FOUND)
            fail_msg("%s #%d: failed %s came back damaged (%d)", kind_name[kind], nth, key, got);
    }
    assert_int_equal(put_rec(d, "after", 7), 0);
    assert_int_equal(check_rec(d, "after", 7), 0);
    drive_close(d);
    tl_rm_rf(dir);
    free(dir);
}

static void test_write_faults(void **state)
{
    (void)state;
    static const int kinds[] = {F_EIO, F_ENOSPC, F_SHORT, F_SYNC};
    static const int nths[] = {1, 2, 5, 11, 17};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (size_t n = 0; n < sizeof(nths) / sizeof(nths[0]); n++)
            seq_run(kinds[k], nths[n]);
}

/* A new segment's superblock write fails (the 2nd and 3rd segment of the run). */
static void test_superblock_fault(void **state)
{
    (void)state;
    seq_run(F_SB_EIO, 1);
    seq_run(F_SB_EIO, 2);
}

/* ---- many appenders: group commit ---- */

#define MT_THREADS 8
#define MT_EACH    30

typedef struct {
    drive_t *d;
    int t, kind;
    int rc[MT_EACH];
} mt_arg_t;

static uint64_t mt_seed(int kind, int t, int i)
{
    return (uint64_t)kind * 1000003u + (uint64_t)t * 1000 + (uint64_t)i;
}

static void *mt_writer(void *arg)
{
    mt_arg_t *a = arg;
    char key[16];
    for (int i = 0; i < MT_EACH; i++) {
        snprintf(key, sizeof(key), "t%d/%03d", a->t, i);
        a->rc[i] = put_rec(a->d, key, mt_seed(a->kind, a->t, i));
    }
    return NULL;
}

static void mt_run(int kind, int nth)
{
    char *dir = tl_tmpdir("faults"), key[16];
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    pthread_t th[MT_THREADS];
    static mt_arg_t a[MT_THREADS];
    int nclean = 0, nok = 0;

    assert_int_equal(drive_open(&c, &d), 0);
    /* The nth flush that carries at least two requests fails. */
    faults_arm(kind, nth, 2);
    tl_cap_start("faults");
    for (int t = 0; t < MT_THREADS; t++) {
        a[t].d = d;
        a[t].t = t;
        a[t].kind = kind;
        assert_int_equal(pthread_create(&th[t], NULL, mt_writer, &a[t]), 0);
    }
    for (int t = 0; t < MT_THREADS; t++)
        pthread_join(th[t], NULL);
    char *log = tl_cap_stop(getenv("WL_FAULTS_VERBOSE") != NULL);
    if (!F.fired) fail_msg("%s #%d: no flush of several requests failed", kind_name[kind], nth);
    assert_true(F.nfailed >= 2);

    /* Every request of the failed flush got the clean error, and only those did. */
    for (int t = 0; t < MT_THREADS; t++)
        for (int i = 0; i < MT_EACH; i++) {
            snprintf(key, sizeof(key), "t%d/%03d", t, i);
            int r = a[t].rc[i];
            if (in_failed(key) && r != clean_error(kind))
                fail_msg("%s #%d: %s was in the failed flush but got %s", kind_name[kind], nth, key,
                         err_name(r));
            if (!in_failed(key) && r == clean_error(kind))
                fail_msg("%s #%d: %s got %s but was not in the failed flush", kind_name[kind], nth,
                         key, err_name(r));
            if (!in_failed(key) && r != 0 && !(goes_readonly(kind) && r == ERR_READONLY))
                fail_msg("%s #%d: %s got %s", kind_name[kind], nth, key, err_name(r));
            nclean += r == clean_error(kind);
            nok += r == 0;
        }
    print_message("%s at flush #%d of several requests: %d requests in it failed, %d "
                  "acknowledged, %d refused after\n",
                  kind_name[kind], nth, nclean, nok, MT_THREADS * MT_EACH - nclean - nok);
    assert_int_equal(nclean, F.nfailed);
    check_log(log, kind);
    free(log);

    /* Reads on the open (maybe read-only) drive, then after a reopen with the real I/O. */
    for (int pass = 0; pass < 2; pass++) {
        for (int t = 0; t < MT_THREADS; t++)
            for (int i = 0; i < MT_EACH; i++) {
                snprintf(key, sizeof(key), "t%d/%03d", t, i);
                int got = check_rec(d, key, mt_seed(kind, t, i));
                if (a[t].rc[i] == 0 && got != 0)
                    fail_msg("%s #%d: acknowledged %s unreadable (%d, pass %d)", kind_name[kind],
                             nth, key, got, pass);
                if (a[t].rc[i] != 0 && got != 0 && got != ERR_NOT_FOUND)
                    fail_msg("%s #%d: failed %s came back damaged (%d)", kind_name[kind], nth, key,
                             got);
            }
        drive_close(d);
        faults_off();
        assert_int_equal(drive_open(&c, &d), 0);
    }
    assert_int_equal(put_rec(d, "after", 7), 0);
    drive_close(d);
    tl_rm_rf(dir);
    free(dir);
}

static void test_group_commit_faults(void **state)
{
    (void)state;
    static const int kinds[] = {F_SYNC, F_EIO, F_SHORT, F_ENOSPC};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        mt_run(kinds[k], 1);
        mt_run(kinds[k], 3);
    }
}

/* ---- a thread that cannot be started ---- */

int __real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);
static int fail_thread_create;

int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (__atomic_exchange_n(&fail_thread_create, 0, __ATOMIC_SEQ_CST)) return EAGAIN;
    return __real_pthread_create(th, attr, fn, arg);
}

static void test_thread_create_fault(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("faults");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d = NULL;
    assert_int_equal(drive_open(&c, &d), 0);
    assert_int_equal(put_rec(d, "x", 1), 0);
    drive_close(d);

    c.compaction = 1;
    fail_thread_create = 1;
    d = NULL;
    tl_cap_start("faults");
    int rc = drive_open(&c, &d);
    char *log = tl_cap_stop(getenv("WL_FAULTS_VERBOSE") != NULL);
    assert_int_equal(rc, ERR_NOMEM);
    assert_null(d);
    assert_int_equal(fail_thread_create, 0); /* it was the drive's thread that failed */
    assert_non_null(strstr(log, "event=thread_create_failed"));
    assert_non_null(strstr(log, "event=drive_open_failed"));
    free(log);
    /* Nothing was left behind (ASan's leak check) and the drive opens as before. */
    assert_int_equal(drive_open(&c, &d), 0);
    assert_int_equal(check_rec(d, "x", 1), 0);
    drive_close(d);
    tl_rm_rf(dir);
    free(dir);
}

int main(void)
{
    log_level = getenv("WL_LOG_LEVEL") ? log_level_parse(getenv("WL_LOG_LEVEL")) : LOG_LVL_ERROR;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("WL_TEST_FILTER")) cmocka_set_test_filter(getenv("WL_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_faults),
        cmocka_unit_test(test_superblock_fault),
        cmocka_unit_test(test_group_commit_faults),
        cmocka_unit_test(test_thread_create_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
