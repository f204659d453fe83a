/*
 * The RocksDB index (storage/idx.h): an iteration that RocksDB ends by an
 * error (a damaged SST block) is told apart from one that ran out of keys,
 * up to drive_list, which must not hand out a silently short listing; and
 * the statistics behind the budget's index bytes are not formatted again
 * while nothing is written (an idle drive costs no CPU); and what an open
 * after kill -9 rescans (the index has no WAL) is bounded by the drive's
 * index_flush_bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/err.h"
#include "common/log.h"
#include "storage/drive_int.h"
#include "storage/idx.h"
#include "testlib.h"

#define _XOPEN_SOURCE_EXTRA
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* Damage the largest SST file of a (closed) RocksDB directory in the middle: data blocks. */
static void corrupt_largest_sst(const char *dbdir)
{
    DIR *dir = opendir(dbdir);
    struct dirent *de;
    char best[512] = "", p[512];
    off_t best_size = 0;
    struct stat st;
    assert_non_null(dir);
    while ((de = readdir(dir))) {
        size_t n = strlen(de->d_name);
        if (n < 4 || strcmp(de->d_name + n - 4, ".sst") != 0) continue;
        snprintf(p, sizeof(p), "%s/%s", dbdir, de->d_name);
        if (stat(p, &st) == 0 && st.st_size > best_size) {
            best_size = st.st_size;
            snprintf(best, sizeof(best), "%s", p);
        }
    }
    closedir(dir);
    assert_true(best_size > 512 * (off_t)KiB);
    int fd = open(best, O_RDWR);
    assert_true(fd >= 0);
    uint8_t junk[64];
    memset(junk, 0xa5, sizeof(junk));
    assert_int_equal(pwrite(fd, junk, sizeof(junk), best_size * 2 / 5), (ssize_t)sizeof(junk));
    fsync(fd);
    close(fd);
}

/* ---- the iteration API ---- */

#define NKEYS 8000

static void fill_index(const char *path)
{
    idx_t *x;
    uint8_t val[300];
    char key[32];
    assert_int_equal(idx_open(path, &x), 0);
    idx_batch_t *b = idx_batch_new();
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "k%06d", i);
        tl_fill(val, sizeof(val), (uint64_t)i);
        idx_batch_put(b, key, strlen(key), val, sizeof(val));
    }
    assert_int_equal(idx_write(x, b), 0);
    idx_batch_free(b);
    assert_int_equal(idx_flush(x), 0);
    idx_close(x);
}

static int walk(idx_t *x, int *count)
{
    idx_iter_t *it = idx_iter_new(x, "k", 1);
    *count = 0;
    for (; idx_iter_valid(it); idx_iter_next(it)) {
        size_t kl, vl;
        const char *k = idx_iter_key(it, &kl);
        (void)idx_iter_value(it, &vl);
        char want[32];
        snprintf(want, sizeof(want), "k%06d", *count);
        assert_int_equal(kl, strlen(want));
        assert_memory_equal(k, want, kl);
        assert_int_equal(vl, 300);
        (*count)++;
    }
    int rc = idx_iter_status(it);
    idx_iter_free(it);
    return rc;
}

static void test_iter_exhausted(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("idx");
    idx_t *x;
    int n;
    fill_index(dir);
    assert_int_equal(idx_open(dir, &x), 0);
    assert_int_equal(walk(x, &n), 0);
    assert_int_equal(n, NKEYS);
    /* Past the last key, and a walk stopped early: no error either. */
    idx_iter_t *it = idx_iter_new(x, "l", 1);
    assert_false(idx_iter_valid(it));
    assert_int_equal(idx_iter_status(it), 0);
    idx_iter_free(it);
    it = idx_iter_new(x, "k", 1);
    assert_true(idx_iter_valid(it));
    assert_int_equal(idx_iter_status(it), 0);
    idx_iter_free(it);
    idx_close(x);
    tl_rm_rf(dir);
    free(dir);
}

/* A bounded walk yields exactly [start, end): the bound is exclusive, and copied. */
static void test_iter_range(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("idx");
    idx_t *x;
    fill_index(dir);
    assert_int_equal(idx_open(dir, &x), 0);
    char end[16];
    snprintf(end, sizeof(end), "k%06d", 4321);
    idx_iter_t *it = idx_iter_range(x, "k000100", 7, end, strlen(end));
    memset(end, 'z', sizeof(end)); /* the iterator holds its own copy */
    int n = 100;
    for (; idx_iter_valid(it); idx_iter_next(it)) {
        size_t kl;
        const char *k = idx_iter_key(it, &kl);
        char want[32];
        snprintf(want, sizeof(want), "k%06d", n);
        assert_int_equal(kl, strlen(want));
        assert_memory_equal(k, want, kl);
        n++;
    }
    assert_int_equal(idx_iter_status(it), 0);
    assert_int_equal(n, 4321);
    idx_iter_free(it);
    /* An empty range, and one past every key. */
    it = idx_iter_range(x, "k000100", 7, "k000100", 7);
    assert_false(idx_iter_valid(it));
    assert_int_equal(idx_iter_status(it), 0);
    idx_iter_free(it);
    it = idx_iter_range(x, "k007990", 7, "l", 1);
    n = 0;
    for (; idx_iter_valid(it); idx_iter_next(it))
        n++;
    assert_int_equal(n, NKEYS - 7990);
    idx_iter_free(it);
    idx_close(x);
    tl_rm_rf(dir);
    free(dir);
}

static void test_iter_error(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("idx");
    idx_t *x;
    int n;
    fill_index(dir);
    corrupt_largest_sst(dir);
    assert_int_equal(idx_open(dir, &x), 0);
    assert_int_equal(walk(x, &n), ERR_IO);
    print_message("iteration stopped by the damaged block after %d of %d keys\n", n, NKEYS);
    assert_true(n > 0 && n < NKEYS);
    idx_close(x);
    tl_rm_rf(dir);
    free(dir);
}

/* ---- drive_list over a damaged index ---- */

static drive_cfg_t cfg_for(const char *dir)
{
    drive_cfg_t c = {0};
    c.path = dir;
    c.iu = 4096;
    c.segment_size = 4 * MiB;
    c.capacity = 64 * MiB;
    return c;
}

static int count_cb(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    (void)id;
    (void)st;
    (*(int *)arg)++;
    return 0;
}

#define LIST_THREADS 8
#define LIST_EACH    250

typedef struct {
    drive_t *d;
    int t;
} lw_arg_t;

static void *list_writer(void *arg)
{
    lw_arg_t *a = arg;
    uint8_t meta[2000];
    char key[32];
    for (int i = 0; i < LIST_EACH; i++) {
        snprintf(key, sizeof(key), "k%d/%04d", a->t, i);
        tl_fill(meta, sizeof(meta), (uint64_t)(a->t * 100000 + i));
        drive_id_t id = {"bkt", key, "", 0};
        if (drive_put(a->d, &id, "x", 1, meta, sizeof(meta)) != 0) return (void *)1;
    }
    return NULL;
}

static void test_list_error(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("idx"), ip[512];
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    pthread_t th[LIST_THREADS];
    lw_arg_t a[LIST_THREADS];
    int n = 0;

    assert_int_equal(drive_open(&c, &d), 0);
    for (int t = 0; t < LIST_THREADS; t++) {
        a[t] = (lw_arg_t){d, t};
        assert_int_equal(pthread_create(&th[t], NULL, list_writer, &a[t]), 0);
    }
    for (int t = 0; t < LIST_THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        assert_null(r);
    }
    assert_int_equal(drive_list(d, "bkt", NULL, NULL, count_cb, &n), 0);
    assert_int_equal(n, LIST_THREADS * LIST_EACH);
    assert_int_equal(drive_index_flush(d), 0); /* the entries into one SST */
    drive_close(d);

    snprintf(ip, sizeof(ip), "%s/index", dir);
    corrupt_largest_sst(ip);
    assert_int_equal(drive_open(&c, &d), 0);
    n = 0;
    int rc = drive_list(d, "bkt", NULL, NULL, count_cb, &n);
    print_message("listing over a damaged index: %s after %d of %d\n", err_name(rc), n,
                  LIST_THREADS * LIST_EACH);
    assert_int_equal(rc, ERR_IO);
    assert_true(n < LIST_THREADS * LIST_EACH);
    /* Keys before the damage still list, and a listing that ends before it is whole. */
    n = 0;
    assert_int_equal(drive_list(d, "bkt", "k0/000", NULL, count_cb, &n), 0);
    assert_int_equal(n, 10);
    drive_close(d);
    tl_rm_rf(dir);
    free(dir);
}

/* ---- statistics: read only when something was written ---- */

static void test_stats_cached(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("idx");
    idx_t *x;
    assert_int_equal(idx_open(dir, &x), 0);
    uint64_t w0 = idx_bytes_written(x);
    uint64_t r0 = idx_stats_reads(x);
    assert_int_equal(r0, 1);

    /* Idle: asked a thousand times, read at most once more. */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(idx_bytes_written(x), w0);
    assert_true(idx_stats_reads(x) - r0 <= 1);

    /* A write is looked at, at the next ask, then idle again. It writes nothing: no WAL. */
    idx_batch_t *b = idx_batch_new();
    idx_batch_put(b, "a", 1, "value", 5);
    assert_int_equal(idx_write(x, b), 0);
    uint64_t w1 = idx_bytes_written(x);
    assert_int_equal(w1, w0);
    assert_true(idx_stats_reads(x) > r0);
    uint64_t r1 = idx_stats_reads(x);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(idx_bytes_written(x), w1);
    assert_true(idx_stats_reads(x) - r1 <= 1);

    /* A flush writes an SST: counted. */
    assert_int_equal(idx_flush(x), 0);
    uint64_t w2 = idx_bytes_written(x);
    assert_true(w2 > w1);
    /* Read again while RocksDB finishes its own work (it may still be busy), then idle again. */
    for (int i = 0; i < 500; i++) {
        uint64_t r = idx_stats_reads(x);
        (void)idx_bytes_written(x);
        if (idx_stats_reads(x) == r) break;
        usleep(10 * 1000);
    }
    uint64_t r2 = idx_stats_reads(x);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(idx_bytes_written(x), idx_bytes_written(x));
    assert_true(idx_stats_reads(x) - r2 <= 1);
    idx_batch_free(b);
    idx_close(x);
    tl_rm_rf(dir);
    free(dir);
}

/* An idle drive with its background thread running: the statistics are not read each tick. */
static void test_stats_idle_drive(void **state)
{
    (void)state;
    char *dir = tl_tmpdir("idx");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    drive_stats_t st;
    c.compaction = 1; /* the thread that charges the index's writes every second */
    c.dwpd = 1;
    assert_int_equal(drive_open(&c, &d), 0);
    drive_id_t id = {"bkt", "k", "", 0};
    assert_int_equal(drive_put(d, &id, "data", 4, NULL, 0), 0);
    assert_int_equal(drive_index_flush(d), 0); /* no WAL: the index writes when it flushes */
    drive_stats(d, &st);
    uint64_t idx0 = st.index_bytes;
    assert_true(idx0 > 0);
    /* The thread sees the write, and RocksDB ends what the flush started (while it is busy
     * each tick reads again): a whole tick with no read, waited for, at most a minute. */
    uint64_t r0 = idx_stats_reads(d->idx);
    for (int i = 0; i < 55; i++) {
        usleep(1100 * 1000);
        uint64_t r = idx_stats_reads(d->idx);
        if (i > 0 && r == r0) break;
        r0 = r;
    }
    usleep(3500 * 1000); /* three ticks of an idle drive */
    for (int i = 0; i < 100; i++)
        drive_stats(d, &st);
    uint64_t r1 = idx_stats_reads(d->idx);
    print_message("statistics reads on an idle drive over 3.5 s and 100 stats calls: %llu\n",
                  (unsigned long long)(r1 - r0));
    assert_true(r1 - r0 <= 1);
    assert_int_equal(st.index_bytes, idx0);
    /* A write (flushed) is charged at the next look. */
    assert_int_equal(drive_put(d, &id, "data2", 5, NULL, 0), 0);
    assert_int_equal(drive_index_flush(d), 0);
    drive_stats(d, &st);
    assert_true(st.index_bytes > idx0);
    drive_close(d);
    tl_rm_rf(dir);
    free(dir);
}

/* ---- replay after kill -9: bounded by index_flush_bytes ---- */

#define RB_PUTS 42 /* not a multiple of 4: the last flush is not after the last put */

static drive_cfg_t rb_cfg(const char *dir, uint64_t flush_bytes)
{
    drive_cfg_t c = cfg_for(dir);
    c.segment_size = 8 * MiB;
    c.capacity = 128 * MiB;
    c.index_flush_bytes = flush_bytes;
    return c;
}

/* The child: RB_PUTS puts of 1 MiB, the index flushes it started finished, then kill -9. */
static void rb_child(const char *dir, uint64_t flush_bytes)
{
    drive_cfg_t c = rb_cfg(dir, flush_bytes);
    drive_t *d;
    char key[32];
    uint8_t *buf = malloc(MiB);
    if (drive_open(&c, &d) != 0) _exit(2);
    for (int i = 0; i < RB_PUTS; i++) {
        snprintf(key, sizeof(key), "rb/%02d", i);
        drive_id_t id = {"bkt", key, "", 0};
        tl_fill(buf, MiB, (uint64_t)i);
        if (drive_put(d, &id, buf, MiB, NULL, 0) != 0) _exit(3);
    }
    /* A started flush is not waited for by the writer: wait here, boundedly. */
    for (int i = 0; i < 3000 && idx_flushing(d->idx); i++)
        usleep(10 * 1000);
    /* The lifetime counter as the child knew it, for the parent to compare after replay. */
    drive_stats_t st;
    char p[512];
    drive_stats(d, &st);
    snprintf(p, sizeof(p), "%s/lifetime", dir);
    FILE *f = fopen(p, "w");
    if (!f || fprintf(f, "%llu\n", (unsigned long long)st.lifetime_host_bytes) < 0 || fclose(f))
        _exit(5);
    raise(SIGKILL);
    _exit(4);
}

/*
 * Run the child as a fresh exec of this binary (a forked one could inherit
 * RocksDB's thread-pool mutex held), reopen, check every put, and return
 * the bytes the open replayed.
 */
static uint64_t rb_round(uint64_t flush_bytes)
{
    char *dir = tl_tmpdir("idx"), fb[32];
    snprintf(fb, sizeof(fb), "%llu", (unsigned long long)flush_bytes);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_idx", "--rb-child", dir, fb, (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    drive_cfg_t c = rb_cfg(dir, flush_bytes);
    drive_t *d;
    drive_stats_t st;
    char key[32];
    uint8_t *buf = malloc(MiB), *want = malloc(MiB);
    assert_int_equal(drive_open(&c, &d), 0);
    drive_stats(d, &st);
    /*
     * The drive's lifetime host bytes lost with the memtable are counted
     * again from the records replayed; what is not (the index's own bytes
     * and new segments' superblocks since the last flush) is small.
     */
    char p[512];
    unsigned long long before = 0;
    snprintf(p, sizeof(p), "%s/lifetime", dir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%llu", &before), 1);
    fclose(f);
    print_message("lifetime host bytes: %llu before kill -9, %llu after replay\n", before,
                  (unsigned long long)st.lifetime_host_bytes);
    assert_true(st.lifetime_host_bytes <= before);
    assert_true(st.lifetime_host_bytes + 256 * KiB >= before);
    for (int i = 0; i < RB_PUTS; i++) {
        snprintf(key, sizeof(key), "rb/%02d", i);
        drive_id_t id = {"bkt", key, "", 0};
        tl_fill(want, MiB, (uint64_t)i);
        assert_int_equal(drive_read(d, &id, 0, buf, MiB), 0);
        assert_memory_equal(buf, want, MiB);
    }
    drive_close(d);
    free(buf);
    free(want);
    tl_rm_rf(dir);
    free(dir);
    return st.replayed_bytes;
}

static void test_replay_bounded(void **state)
{
    (void)state;
    uint64_t bounded = rb_round(4 * MiB), unbounded = rb_round(1ull << 40);
    print_message("replayed after kill -9 of %d MiB appended: %llu bytes with index_flush_bytes "
                  "4 MiB, %llu bytes without\n",
                  RB_PUTS, (unsigned long long)bounded, (unsigned long long)unbounded);
    /* The memtable is lost (no WAL): all of it is replayed when nothing flushed... */
    assert_true(unbounded >= (uint64_t)RB_PUTS * MiB);
    /* ... and at most what came after the last started flush otherwise. */
    assert_true(bounded > 0);
    assert_true(bounded <= 4 * MiB + 2 * MiB);
}

int main(int argc, char **argv)
{
    log_level = getenv("WL_LOG_LEVEL") ? log_level_parse(getenv("WL_LOG_LEVEL")) : LOG_LVL_ERROR;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "--rb-child") == 0)
        rb_child(argv[2], strtoull(argv[3], NULL, 10));
    if (getenv("WL_TEST_FILTER")) cmocka_set_test_filter(getenv("WL_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iter_exhausted), cmocka_unit_test(test_iter_range),
        cmocka_unit_test(test_iter_error),     cmocka_unit_test(test_list_error),
        cmocka_unit_test(test_stats_cached),   cmocka_unit_test(test_stats_idle_drive),
        cmocka_unit_test(test_replay_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
