#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/bufpool.h"
#include "common/clock.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/num.h"
#include "common/pool.h"
#include "common/uring.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_crc32c_vectors(void **state)
{
    (void)state;
    /* RFC 3720 B.4 and the common check value. */
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof(ones));
    assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(crc32c(0, ones, 32), 0x62A8AB43u);
    assert_int_equal(crc32c(0, "", 0), 0u);
    /* Chaining equals one pass. */
    assert_int_equal(crc32c(crc32c(0, "12345", 5), "6789", 4), 0xE3069283u);
}

/* CRC-32C a bit at a time: the reference both of crc32c's paths must equal. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t len)
{
    uint32_t c = ~0u;
    for (size_t i = 0; i < len; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_crc32c_short_and_long_buffers(void **state)
{
    (void)state;
    static uint8_t buf[1024];
    uint32_t x = 777;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    /* Under 256 bytes the SSE4.2 instruction, from 256 ISA-L: the same crc at every length
     * and alignment, and chained across the boundary. */
    for (size_t off = 0; off < 8; off++)
        for (size_t len = 0; len + off <= 700; len++)
            assert_int_equal(crc32c(0, buf + off, len), crc32c_bitwise(buf + off, len));
    for (size_t cut = 0; cut <= 600; cut += 37)
        assert_int_equal(crc32c(crc32c(0, buf, cut), buf + cut, 600 - cut),
                         crc32c_bitwise(buf, 600));
}

static void test_crc32c_combine(void **state)
{
    (void)state;
    static uint8_t buf[200000];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    /* Splits at 0, at powers of two (one table entry) and at odd lengths. */
    const size_t lens[] = {0, 1, 3, 4096, 65536, 65537, 131072, 199999, 200000};
    for (size_t a = 0; a < sizeof(lens) / sizeof(lens[0]); a++)
        for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
            size_t la = lens[a] / 2, lb = lens[b] / 2; /* la + lb fits in buf */
            uint32_t ca = crc32c(0, buf, la), cb = crc32c(0, buf + la, lb);
            assert_int_equal(crc32c_combine(ca, cb, lb), crc32c(0, buf, la + lb));
        }
    /* Chunk by chunk, as the drive engine derives a block's crc from its chunk crcs. */
    uint32_t run = 0;
    for (size_t off = 0; off < sizeof(buf); off += 65536) {
        size_t n = sizeof(buf) - off < 65536 ? sizeof(buf) - off : 65536;
        run = crc32c_combine(run, crc32c(0, buf + off, n), n);
    }
    assert_int_equal(run, crc32c(0, buf, sizeof(buf)));
    /* A wrong length gives a wrong crc: the length is part of the operator. */
    assert_int_not_equal(crc32c_combine(crc32c(0, buf, 10), crc32c(0, buf + 10, 10), 11),
                         crc32c(0, buf, 20));
}

static void test_bufpool(void **state)
{
    (void)state;
    bufpool_t *p = bufpool_new(8u << 20);
    bufpool_stats_t st;
    /* Page-aligned; 2 MiB and up on a 2 MiB boundary (transparent huge pages). */
    uint8_t *a = bufpool_get(p, 100), *b = bufpool_get(p, 3u << 20);
    assert_int_equal((uintptr_t)a % 4096, 0);
    assert_int_equal((uintptr_t)b % (2u << 20), 0);
    memset(a, 1, 100);
    memset(b, 2, 3u << 20); /* the whole size asked for is there */
    bufpool_stats(p, &st);
    assert_int_equal(st.maps, 2);
    assert_true(st.out_bytes >= (3u << 20) + 100);
    /* Given back, then reused: no new mapping for a size that fits. */
    bufpool_put(p, b);
    bufpool_put(p, a);
    bufpool_stats(p, &st);
    assert_int_equal(st.out_bytes, 0);
    assert_true(st.kept_bytes >= 3u << 20);
    uint8_t *c = bufpool_get(p, 2u << 20);
    assert_ptr_equal(c, b); /* the smallest that fits: not the 100-byte one */
    uint8_t *d = bufpool_get(p, 50);
    assert_ptr_equal(d, a);
    bufpool_stats(p, &st);
    assert_int_equal(st.maps, 2);
    /* No more than keep_bytes stay kept: the rest is unmapped at once. */
    uint8_t *big[4];
    for (int i = 0; i < 4; i++)
        big[i] = bufpool_get(p, 4u << 20);
    for (int i = 0; i < 4; i++)
        bufpool_put(p, big[i]);
    bufpool_put(p, c);
    bufpool_put(p, d);
    bufpool_stats(p, &st);
    assert_true(st.kept_bytes <= 8u << 20);
    assert_int_equal(st.out_bytes, 0);
    bufpool_put(p, NULL);
    bufpool_free(p);
}

static void test_num_parse(void **state)
{
    (void)state;
    uint64_t v;
    int i;
    assert_int_equal(num_parse_u64("0", 0, 10, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(num_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(num_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), ERR_RANGE);
    assert_int_equal(num_parse_u64("99999999999999999999", 0, UINT64_MAX, &v), ERR_RANGE);
    assert_int_equal(num_parse_u64("000000000000000000001", 0, UINT64_MAX, &v), ERR_INVAL);
    const char *bad[] = {"", "+1", "-1", " 1", "1 ", "1x", "0x10", "1.0", "\t1", "1\n"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        assert_int_equal(num_parse_u64(bad[k], 0, UINT64_MAX, &v), ERR_INVAL);
    assert_int_equal(num_parse_u64(NULL, 0, 1, &v), ERR_INVAL);
    /* The part number that used to wrap to 1. */
    assert_int_equal(num_parse_int("4294967297", 1, 10000, &i), ERR_RANGE);
    assert_int_equal(num_parse_int("10000", 1, 10000, &i), 0);
    assert_int_equal(i, 10000);
    assert_int_equal(num_parse_int("0", 1, 10000, &i), ERR_RANGE);
    assert_int_equal(num_parse_int("00007", 1, 10000, &i), 0);
    assert_int_equal(i, 7);
    assert_int_equal(num_parse_u64n("123456", 3, 0, 1000, &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(num_parse_u64n("12", 0, 0, 1000, &v), ERR_INVAL);
}

/* pool: jobs run, latches count them; a job blocked outside does not starve the others. */
typedef struct {
    pool_job_t base;
    pool_t *p;
    int block; /* wait on the gate, bracketed as blocked */
    int *ran;
} tjob_t;

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open, saturations;

static void tjob_run(pool_job_t *j)
{
    tjob_t *t = (tjob_t *)j;
    if (t->block) {
        pool_block_begin(t->p);
        pthread_mutex_lock(&gate_mu);
        while (!gate_open)
            pthread_cond_wait(&gate_cv, &gate_mu);
        pthread_mutex_unlock(&gate_mu);
        pool_block_end(t->p);
    }
    __atomic_add_fetch(t->ran, 1, __ATOMIC_SEQ_CST);
}

static void on_saturated(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&saturations, 1, __ATOMIC_SEQ_CST);
}

static void test_pool(void **state)
{
    (void)state;
    int err, ran = 0;
    pool_cfg_t cfg = {"wl-test", 1, 2, on_saturated, NULL};
    pool_t *p = pool_new(&cfg, &err);
    assert_non_null(p);
    tjob_t jobs[8];
    pool_job_t *q[8];
    latch_t l;
    latch_init(&l);
    for (int i = 0; i < 8; i++) {
        jobs[i] = (tjob_t){{.run = tjob_run}, p, 0, &ran};
        q[i] = &jobs[i].base;
    }
    pool_submit(p, q, 8, &l);
    latch_wait(&l);
    assert_int_equal(ran, 8);
    /* One thread, two jobs blocked outside: a third job still runs (threads grow to 3). */
    ran = 0;
    jobs[0].block = jobs[1].block = 1;
    pool_submit(p, q, 2, &l);
    pool_stats_t st;
    do {
        pool_stats(p, &st);
    } while (st.blocked < 2);
    latch_t l2;
    latch_init(&l2);
    pool_submit(p, &q[2], 1, &l2);
    latch_wait(&l2);
    assert_int_equal(ran, 1);
    pool_stats(p, &st);
    assert_true(st.threads >= 2 && st.threads <= 3);
    assert_int_equal(saturations, 0);
    /* A third blocked job reaches the bound (1 + 2): the owner is told. */
    jobs[3].block = 1;
    pool_submit(p, &q[3], 1, &l);
    pool_submit(p, &q[4], 1, &l2);
    while (__atomic_load_n(&saturations, __ATOMIC_SEQ_CST) == 0) {
        pthread_mutex_lock(&gate_mu); /* wait for the report without sleeping on a timer */
        pthread_mutex_unlock(&gate_mu);
    }
    pool_stats(p, &st);
    assert_int_equal(st.threads, 3);
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    latch_wait(&l);
    latch_wait(&l2);
    assert_int_equal(ran, 5);
    latch_destroy(&l);
    latch_destroy(&l2);
    pool_free(p);
}

/* pool_spare: idle threads no queued job waits for; 0 once every thread has work. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int hold_open, held;

static void hold_run(pool_job_t *j)
{
    (void)j;
    pthread_mutex_lock(&hold_mu);
    held++;
    pthread_cond_broadcast(&hold_cv);
    while (!hold_open)
        pthread_cond_wait(&hold_cv, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
}

/*
 * Latches on the heap, freed by their waiter the moment it returns, counted
 * down by several threads at once: a latch_done that touched its latch
 * after the last piece opened it would be a use after free (ASan run).
 * Watched latches (latch_wait_below) count down one piece at a time too;
 * and pieces submitted one at a time count it up again after it reached 0.
 */
typedef struct {
    pool_job_t base;
    int *ran;
} ljob_t;

static void ljob_run(pool_job_t *j)
{
    __atomic_add_fetch(((ljob_t *)j)->ran, 1, __ATOMIC_SEQ_CST);
}

static void test_latch_freed_by_its_waiter(void **state)
{
    (void)state;
    int err, ran = 0;
    pool_cfg_t cfg = {"wl-test", 4, 0, NULL, NULL};
    pool_t *p = pool_new(&cfg, &err);
    assert_non_null(p);
    for (int round = 0; round < 3000; round++) {
        latch_t *l = malloc(sizeof(*l));
        ljob_t *jobs = malloc(4 * sizeof(*jobs));
        pool_job_t *q[4];
        latch_init(l);
        int watched = round % 3 == 0;
        if (watched) latch_watch(l);
        for (int i = 0; i < 4; i++) {
            jobs[i] = (ljob_t){.base.run = ljob_run, .ran = &ran};
            q[i] = &jobs[i].base;
        }
        if (round % 3 == 1) {
            /* One piece at a time, as a batch GET's fetchers go: the count may reach 0 and
             * rise again while the piece that took it to 0 has yet to open the latch. */
            for (int i = 0; i < 4; i++)
                pool_submit(p, &q[i], 1, l);
        } else {
            pool_submit(p, q, 4, l);
        }
        if (watched) {
            int left = 4;
            while (left > 0) {
                int now = latch_wait_below(l, left, 60000);
                assert_true(now < left);
                left = now;
            }
        }
        latch_wait(l);
        latch_destroy(l);
        free(l);
        free(jobs);
    }
    assert_int_equal(__atomic_load_n(&ran, __ATOMIC_SEQ_CST), 3000 * 4);
    pool_free(p);
}

/*
 * Idle threads are a stack: a job goes to the thread that went idle last.
 * One job at a time, each submitted once every thread is idle again, all
 * run on one thread (a shared condition variable woke them in turn).
 */
static pthread_barrier_t all_running;

static void barrier_run(pool_job_t *j)
{
    (void)j;
    pthread_barrier_wait(&all_running);
}

typedef struct {
    pool_job_t base;
    pthread_t ran_on;
} wjob_t;

static void wjob_run(pool_job_t *j)
{
    ((wjob_t *)j)->ran_on = pthread_self();
}

/* Until every thread is idle: each is then on the stack (none is starting). */
static void wait_all_idle(pool_t *p)
{
    pool_stats_t st;
    do {
        pool_stats(p, &st);
    } while (st.idle != st.threads);
}

static void test_pool_hands_jobs_to_the_last_idle_thread(void **state)
{
    (void)state;
    int err;
    pool_cfg_t cfg = {"wl-test", 4, 0, NULL, NULL};
    pool_t *p = pool_new(&cfg, &err);
    assert_non_null(p);
    /* Four jobs that meet: every thread has started and taken one. */
    pthread_barrier_init(&all_running, NULL, 5);
    pool_job_t meet[4], *mq[4];
    latch_t l;
    latch_init(&l);
    for (int i = 0; i < 4; i++) {
        meet[i] = (pool_job_t){.run = barrier_run};
        mq[i] = &meet[i];
    }
    pool_submit(p, mq, 4, &l);
    pthread_barrier_wait(&all_running);
    latch_wait(&l);
    pthread_t first = pthread_self();
    for (int i = 0; i < 50; i++) {
        wait_all_idle(p);
        wjob_t job = {.base.run = wjob_run};
        pool_job_t *q = &job.base;
        pool_submit(p, &q, 1, &l);
        latch_wait(&l);
        if (i == 0) first = job.ran_on;
        assert_true(pthread_equal(job.ran_on, first));
    }
    /* All four busy at once again: each job runs, on whichever thread. */
    wait_all_idle(p);
    pool_submit(p, mq, 4, &l);
    pthread_barrier_wait(&all_running);
    latch_wait(&l);
    latch_destroy(&l);
    pthread_barrier_destroy(&all_running);
    pool_free(p);
}

static void test_pool_spare(void **state)
{
    (void)state;
    int err;
    pool_cfg_t cfg = {"wl-test", 3, 0, NULL, NULL};
    pool_t *p = pool_new(&cfg, &err);
    assert_non_null(p);
    assert_int_equal(pool_spare(p), 3);
    pool_job_t jobs[4], *q[4];
    latch_t l;
    latch_init(&l);
    for (int i = 0; i < 4; i++) {
        jobs[i] = (pool_job_t){.run = hold_run};
        q[i] = &jobs[i];
    }
    /* Two jobs queued: whether or not their threads took them yet, one thread is spare. */
    pool_submit(p, q, 2, &l);
    assert_int_equal(pool_spare(p), 1);
    pthread_mutex_lock(&hold_mu);
    while (held < 2)
        pthread_cond_wait(&hold_cv, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
    assert_int_equal(pool_spare(p), 1);
    /* Two more: three run, one waits; none spare. */
    pool_submit(p, &q[2], 2, &l);
    assert_int_equal(pool_spare(p), 0);
    pthread_mutex_lock(&hold_mu);
    hold_open = 1;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
    latch_wait(&l);
    assert_int_equal(held, 4);
    latch_destroy(&l);
    pool_free(p);
}

static void test_err_strings(void **state)
{
    (void)state;
    assert_string_equal(err_name(ERR_NOSPC), "NOSPC");
    assert_non_null(err_str(-9999));
    assert_string_equal(err_name(-9999), "UNKNOWN");
    assert_int_equal(err_from_errno(ENOSPC), ERR_NOSPC);
    assert_int_equal(err_from_errno(EIO), ERR_IO);
}

static void test_sim_clock(void **state)
{
    wl_sim_clock_t c;
    (void)state;
    clock_sim_init(&c, 5);
    assert_int_equal(c.base.now_ns(&c.base), 5);
    c.base.sleep_ns(&c.base, 10);
    assert_int_equal(c.base.now_ns(&c.base), 15);
    assert_true(clock_real()->now_ns(clock_real()) > 0);
}

/*
 * Reads at once through this thread's ring: each lands where its iovecs say, with its own
 * result (bytes, 0 past the end, -errno), and a second call on the same ring works too.
 * Skipped where io_uring cannot be had (the callers then read through pool threads).
 */
static void test_uring_reads_at_once(void **state)
{
    (void)state;
    if (!uring_usable()) skip();
    char path[] = "/tmp/wl-uring-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    const size_t size = 1 << 20;
    uint8_t *file = malloc(size);
    for (size_t i = 0; i < size; i++)
        file[i] = (uint8_t)(i * 7 + (i >> 12));
    assert_int_equal(pwrite(fd, file, size, 0), (ssize_t)size);
    enum { N = 6 };
    uint8_t *buf = calloc(N, 65536);
    struct iovec iov[N][2];
    uring_read_t rd[N];
    for (int i = 0; i < N; i++) {
        /* Two iovecs each: 1000 bytes, then 20000, from 100000 * i on. */
        iov[i][0] = (struct iovec){buf + (size_t)i * 65536, 1000};
        iov[i][1] = (struct iovec){buf + (size_t)i * 65536 + 1000, 20000};
        rd[i] = (uring_read_t){fd, iov[i], 2, 100000u * (unsigned)i};
    }
    rd[4].pos = size + 4096; /* past the end: 0 */
    rd[5].fd = -1;           /* no file: -EBADF */
    for (int round = 0; round < 2; round++) {
        ssize_t res[N];
        memset(buf, 0, (size_t)N * 65536);
        assert_int_equal(uring_readv(N, rd, res), 1);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(res[i], 21000);
            assert_memory_equal(buf + (size_t)i * 65536, file + 100000 * i, 21000);
        }
        assert_int_equal(res[4], 0);
        assert_int_equal(res[5], -EBADF);
    }
    ssize_t one;
    assert_int_equal(uring_readv(URING_MAX_READS + 1, rd, &one), 0); /* too many: not done */
    close(fd);
    free(buf);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_short_and_long_buffers),
        cmocka_unit_test(test_crc32c_combine),
        cmocka_unit_test(test_bufpool),
        cmocka_unit_test(test_err_strings),
        cmocka_unit_test(test_sim_clock),
        cmocka_unit_test(test_num_parse),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_pool_spare),
        cmocka_unit_test(test_pool_hands_jobs_to_the_last_idle_thread),
        cmocka_unit_test(test_latch_freed_by_its_waiter),
        cmocka_unit_test(test_uring_reads_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
