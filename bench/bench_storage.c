/*
 * bench_storage: the drive engine's figures on this machine's disk. Prints
 * ROW lines for bench/report.py; bench/storage.sh measures the fio ceilings
 * in the same run and names them as the rows' ceilings.
 *
 *   bench_storage DIR [quick]
 *
 * Phases (each on a fresh drive under DIR, removed afterwards):
 *   append     durable put throughput, 1 MiB / 64 KiB / 4 KiB records, 1 and
 *              64 writer threads (group commit; 4 KiB also at 8 and 32),
 *              fixed time and byte bounds, with records per flush; the
 *              index's bytes (its flush at the end included) and their
 *              share of host bytes
 *   async      4 KiB drive_put_async from ONE thread keeping 1, 8 or 32
 *              writes in flight (how the object layer writes): appends/s and
 *              records per flush. Left out when built with BENCH_SYNC_ONLY
 *              (to measure a drive engine without asynchronous writes, A/B)
 *   read       random 64 KiB range reads and 1 MiB record reads, 16 threads
 *   wa         write amplification at steady state, 80% full, compaction on:
 *              (a) warm lake: objects written and deleted in batches plus 10%
 *              random single deletes; (b) uniform random deletes
 *   index      index bytes per object (disk, memory) for N objects with
 *              40-byte keys; recovery time after kill -9 with N records (the
 *              index has no WAL: what its memtable held is replayed from the
 *              segments), and a full index rebuild from the segments
 */
#include "common/err.h"
#include "common/log.h"
#include "storage/drive.h"

#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KiB (1024ull)
#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

static const char *base;
static int quick;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void row(const char *name, double v, const char *unit, const char *ceil)
{
    printf("ROW\t%s\t%.6g\t%s\t%s\n", name, v, unit, ceil);
    fflush(stdout);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_rf(const char *p)
{
    nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static char *subdir(const char *name)
{
    char *p = malloc(strlen(base) + strlen(name) + 2);
    sprintf(p, "%s/%s", base, name);
    rm_rf(p);
    return p;
}

static drive_t *open_drive_pool(const char *dir, uint64_t cap, uint64_t seg, int compaction,
                                int pool)
{
    drive_cfg_t c = {0};
    drive_t *d;
    c.path = dir;
    c.capacity = cap;
    c.segment_size = seg;
    c.compaction = compaction;
    c.segment_pool = pool;
    int rc = drive_open(&c, &d);
    if (rc) {
        fprintf(stderr, "bench_storage: open %s: %s\n", dir, err_str(rc));
        exit(1);
    }
    return d;
}

static drive_t *open_drive(const char *dir, uint64_t cap, uint64_t seg, int compaction)
{
    return open_drive_pool(dir, cap, seg, compaction, 0);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- append ---- */

typedef struct {
    drive_t *d;
    int t;
    size_t len;
    double until;
    uint64_t max_ops;
    uint64_t ops;
    uint8_t *buf;
} app_t;

static void *appender(void *arg)
{
    app_t *a = arg;
    char key[64];
    while (a->ops < a->max_ops && now() < a->until) {
        snprintf(key, sizeof(key), "w%02d/%08llu", a->t, (unsigned long long)a->ops);
        drive_id_t id = {"bench", key, "", 0};
        int rc = drive_put(a->d, &id, a->buf, a->len, NULL, 0);
        if (rc) {
            fprintf(stderr, "append: %s\n", err_str(rc));
            break;
        }
        a->ops++;
    }
    return NULL;
}

/*
 * fio's same-run ceiling for n durable 4 KiB appenders: n jobs doing 4 KiB
 * write + fdatasync, each on its own file (bench/storage.sh), the 1-job row
 * for other counts.
 */
static const char *small_ceiling(int n, char *buf, size_t cap)
{
    if (n == 8 || n == 32)
        snprintf(buf, cap, "raw_4KiB_write_fdatasync_j%d_ops", n);
    else
        snprintf(buf, cap, "raw_4KiB_write_fdatasync_ops");
    return buf;
}

/*
 * One writer's durable 1 MiB appends into segments written before: the files
 * of segments compaction released, from the pool (storage/drive_seg.c), as at
 * steady state, when compaction gives back as much as is written. First as
 * many segments as the pool keeps are filled, deleted and compacted away;
 * then the appends go into those files. Beside it, the same appends into
 * fresh files (the pool off), same run: the ratio is what the pool is worth.
 */
static void phase_append_pooled(void)
{
    const uint64_t seg = 64 * MiB;
    const int pool = quick ? 4 : 16;
    double secs = quick ? 1.0 : 3.0;
    uint8_t *buf = malloc(1 * MiB);
    for (size_t i = 0; i < 1 * MiB; i++)
        buf[i] = (uint8_t)(i * 131);
    double rate[2] = {0, 0};
    for (int on = 1; on >= 0; on--) {
        char *dir = subdir("append_pooled");
        drive_t *d = open_drive_pool(dir, 8 * GiB, seg, 0, on ? pool : -1);
        char key[64];
        uint64_t fill = (uint64_t)pool * (seg / MiB);
        for (uint64_t i = 0; i < fill; i++) {
            snprintf(key, sizeof(key), "fill/%08llu", (unsigned long long)i);
            drive_id_t id = {"bench", key, "", 0};
            if (drive_put(d, &id, buf, 1 * MiB, NULL, 0) != 0) exit(1);
        }
        for (uint64_t i = 0; i < fill; i++) {
            snprintf(key, sizeof(key), "fill/%08llu", (unsigned long long)i);
            drive_id_t id = {"bench", key, "", 0};
            if (drive_delete(d, &id) != 0) exit(1);
        }
        (void)drive_compact(d, 0, 1);
        drive_stats_t st;
        drive_stats(d, &st);
        uint64_t before = st.segments_recycled, pooled = st.segments_pooled;
        uint32_t segs = st.segments;
        /* Past the segment that was open (fresh space), into the next one. */
        for (uint64_t i = 0; i < seg / MiB; i++) {
            snprintf(key, sizeof(key), "pad/%08llu", (unsigned long long)i);
            drive_id_t id = {"bench", key, "", 0};
            if (drive_put(d, &id, buf, 1 * MiB, NULL, 0) != 0) exit(1);
            drive_stats(d, &st);
            if (on ? st.segments_recycled > before : st.segments > segs) break;
        }
        before = st.segments_recycled;
        /* At most what the pool holds, so that every append goes into a file written before. */
        uint64_t most = (uint64_t)(pool - 1) * (seg / MiB - 1);
        if (on && pooled < (uint64_t)pool) most = (pooled ? pooled - 1 : 0) * (seg / MiB - 1);
        app_t a = {d, 0, 1 * MiB, now() + secs, most, 0, buf};
        double t0 = now();
        appender(&a);
        double el = now() - t0;
        drive_stats(d, &st);
        rate[on] = (double)a.ops / el * 1.048576;
        if (on) {
            row("append_1MiB_w1_pooled", rate[on], "MB/s", "fio_seq_write_1MiB_fdatasync_qd1");
            row("append_1MiB_w1_pooled_segments", (double)(st.segments_recycled - before + 1),
                "seg", "-");
        } else {
            row("append_1MiB_w1_fresh", rate[on], "MB/s", "fio_seq_write_1MiB_fdatasync_qd1_fresh");
        }
        drive_close(d);
        rm_rf(dir);
        free(dir);
    }
    /* ("times", not "x": the report takes x for a write amplification, lower is better) */
    row("append_1MiB_w1_pooled_vs_fresh", rate[0] > 0 ? rate[1] / rate[0] : 0, "times", "-");
    free(buf);
}

static void phase_append(void)
{
    size_t sizes[] = {1 * MiB, 64 * KiB, 4 * KiB};
    const char *names[] = {"1MiB", "64KiB", "4KiB"};
    int writers[] = {1, 8, 32, 64};
    double secs = quick ? 1.0 : 3.0;
    uint64_t max_bytes = quick ? 512 * MiB : 2 * GiB;

    for (int si = 0; si < 3; si++) {
        for (int wi = 0; wi < 4; wi++) {
            /* Small records are where concurrency counts: 8 and 32 writers only for them. */
            if (sizes[si] > 4 * KiB && (writers[wi] == 8 || writers[wi] == 32)) continue;
            char *dir = subdir("append");
            drive_t *d = open_drive(dir, 8 * GiB, 64 * MiB, 0);
            int n = writers[wi];
            app_t *a = calloc((size_t)n, sizeof(*a));
            pthread_t *th = calloc((size_t)n, sizeof(*th));
            uint8_t *buf = malloc(sizes[si]);
            for (size_t i = 0; i < sizes[si]; i++)
                buf[i] = (uint8_t)(i * 131);
            double t0 = now();
            for (int t = 0; t < n; t++) {
                a[t] = (app_t){d, t,  sizes[si], t0 + secs, max_bytes / sizes[si] / (uint64_t)n,
                               0, buf};
                pthread_create(&th[t], NULL, appender, &a[t]);
            }
            uint64_t ops = 0;
            for (int t = 0; t < n; t++) {
                pthread_join(th[t], NULL);
                ops += a[t].ops;
            }
            double el = now() - t0;
            drive_stats_t st;
            /* The index writes when it flushes (no WAL): count the flush these appends need. */
            if (drive_index_flush(d) != 0) exit(1);
            drive_stats(d, &st);
            char name[64];
            double mbs = (double)ops * (double)sizes[si] / el / 1e6;
            if (sizes[si] >= 64 * KiB) {
                snprintf(name, sizeof(name), "append_%s_w%d", names[si], n);
                /* One writer waits for each flush: compare with fio doing the same. */
                row(name, mbs, "MB/s",
                    n == 1 ? "fio_seq_write_1MiB_fdatasync_qd1" : "fio_seq_write_1MiB");
                /* Like for like: fio appending into fresh preallocated space, as segments are. */
                if (n == 1 && si == 0)
                    row("append_1MiB_w1_vs_fresh_file", mbs, "MB/s",
                        "fio_seq_write_1MiB_fdatasync_qd1_fresh");
            } else {
                char ceil[64];
                snprintf(name, sizeof(name), "append_%s_w%d_ops", names[si], n);
                row(name, (double)ops / el, "ops/s", small_ceiling(n, ceil, sizeof(ceil)));
                snprintf(name, sizeof(name), "append_%s_w%d", names[si], n);
                row(name, mbs, "MB/s", "fio_seq_write_1MiB");
            }
            snprintf(name, sizeof(name), "append_%s_w%d_records_per_flush", names[si], n);
            row(name, st.flushes ? (double)st.flush_records / (double)st.flushes : 0, "rec", "-");
            snprintf(name, sizeof(name), "append_%s_w%d_index_bytes", names[si], n);
            row(name, (double)st.index_bytes, "B", "-");
            snprintf(name, sizeof(name), "append_%s_w%d_index_share", names[si], n);
            row(name, st.host_bytes ? (double)st.index_bytes / (double)st.host_bytes : 0, "frac",
                "-");
            drive_close(d);
            rm_rf(dir);
            free(dir);
            free(a);
            free(th);
            free(buf);
        }
    }
}

/* ---- async: one thread, many writes in flight ---- */

#ifndef BENCH_SYNC_ONLY
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inflight;
    uint64_t done, failed;
} window_t;

static void window_done(void *arg, int rc)
{
    window_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->inflight--;
    w->done++;
    w->failed += rc != 0;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void phase_async(void)
{
    int depths[] = {1, 8, 32};
    double secs = quick ? 1.0 : 3.0;
    uint64_t max_ops = (quick ? 512 * MiB : 2 * GiB) / (4 * KiB);
    uint8_t *buf = malloc(4 * KiB);
    for (size_t i = 0; i < 4 * KiB; i++)
        buf[i] = (uint8_t)(i * 131);
    for (int di = 0; di < 3; di++) {
        int q = depths[di];
        char *dir = subdir("async");
        drive_t *d = open_drive(dir, 8 * GiB, 64 * MiB, 0);
        window_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
        uint64_t sent = 0;
        char key[64];
        double t0 = now(), until = t0 + secs;
        while (sent < max_ops && now() < until) {
            pthread_mutex_lock(&w.mu);
            while (w.inflight >= q)
                pthread_cond_wait(&w.cv, &w.mu);
            w.inflight++;
            pthread_mutex_unlock(&w.mu);
            snprintf(key, sizeof(key), "a/%010llu", (unsigned long long)sent);
            drive_id_t id = {"bench", key, "", 0};
            int rc = drive_put_async(d, &id, buf, 4 * KiB, NULL, 0, window_done, &w);
            if (rc) {
                fprintf(stderr, "async: %s\n", err_str(rc));
                exit(1);
            }
            sent++;
        }
        pthread_mutex_lock(&w.mu);
        while (w.inflight > 0)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        double el = now() - t0;
        if (w.failed) fprintf(stderr, "async: %llu failed\n", (unsigned long long)w.failed);
        drive_stats_t st;
        drive_stats(d, &st);
        char name[64], ceil[64];
        snprintf(name, sizeof(name), "append_4KiB_async_q%d_ops", q);
        row(name, (double)w.done / el, "ops/s", small_ceiling(q, ceil, sizeof(ceil)));
        snprintf(name, sizeof(name), "append_4KiB_async_q%d_records_per_flush", q);
        row(name, st.flushes ? (double)st.flush_records / (double)st.flushes : 0, "rec", "-");
        drive_close(d);
        rm_rf(dir);
        free(dir);
    }
    free(buf);
}
#endif

/* ---- read ---- */

typedef struct {
    drive_t *d;
    int t, nobj;
    size_t len;
    double until;
    uint64_t ops, bad;
    uint8_t *buf;
} rd_t;

static void *reader(void *arg)
{
    rd_t *r = arg;
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(r->t + 1);
    char key[64];
    while (now() < r->until) {
        uint64_t x = rng_next(&s);
        snprintf(key, sizeof(key), "r%06d", (int)(x % (uint64_t)r->nobj));
        drive_id_t id = {"bench", key, "", 0};
        uint64_t off = r->len < MiB ? ((x >> 20) % (MiB / r->len)) * r->len : 0;
        if (drive_read(r->d, &id, off, r->buf, r->len) != 0)
            r->bad++;
        else
            r->ops++;
    }
    return NULL;
}

static void phase_read(void)
{
    char *dir = subdir("read");
    int nobj = quick ? 256 : 1024;
    drive_t *d = open_drive(dir, 4 * GiB, 64 * MiB, 0);
    uint8_t *buf = malloc(MiB);
    char key[64];
    for (size_t i = 0; i < MiB; i++)
        buf[i] = (uint8_t)(i * 7);
    for (int i = 0; i < nobj; i++) {
        snprintf(key, sizeof(key), "r%06d", i);
        drive_id_t id = {"bench", key, "", 0};
        if (drive_put(d, &id, buf, MiB, NULL, 0) != 0) exit(1);
    }
    size_t lens[] = {64 * KiB, MiB};
    const char *rows[] = {"read_rand_64KiB_t16", "read_rand_1MiB_t16"};
    const char *ceil[] = {"fio_randread_64KiB", "fio_seq_read_1MiB"};
    for (int li = 0; li < 2; li++) {
        enum { T = 16 };
        rd_t r[T];
        pthread_t th[T];
        double t0 = now();
        for (int t = 0; t < T; t++) {
            /* Page-aligned, as the gateway's buffers: the drive reads into them directly. */
            r[t] = (rd_t){
                d, t, nobj, lens[li], t0 + (quick ? 1.0 : 3.0), 0, 0, aligned_alloc(4096, MiB)};
            pthread_create(&th[t], NULL, reader, &r[t]);
        }
        uint64_t ops = 0, bad = 0;
        for (int t = 0; t < T; t++) {
            pthread_join(th[t], NULL);
            ops += r[t].ops;
            bad += r[t].bad;
            free(r[t].buf);
        }
        double el = now() - t0;
        if (bad) fprintf(stderr, "read: %llu failed reads\n", (unsigned long long)bad);
        row(rows[li], (double)ops * (double)lens[li] / el / 1e6, "MB/s", ceil[li]);
    }
    drive_close(d);
    rm_rf(dir);
    free(dir);
    free(buf);
}

/* ---- write amplification ---- */

static int put_retry(drive_t *d, const char *key, const uint8_t *buf, size_t len, uint64_t *stalls)
{
    drive_id_t id = {"bench", key, "", 0};
    for (int tries = 0; tries < 1000; tries++) {
        int rc = drive_put(d, &id, buf, len, NULL, 0);
        if (rc != ERR_NOSPC) return rc;
        /* Background compaction fell behind: help it, as a stalled writer would wait. */
        (*stalls)++;
        (void)drive_compact(d, 4, 0);
    }
    return ERR_NOSPC;
}

static void del(drive_t *d, uint64_t obj)
{
    char key[32];
    snprintf(key, sizeof(key), "o%010llu", (unsigned long long)obj);
    drive_id_t id = {"bench", key, "", 0};
    uint64_t stalls = 0;
    for (int tries = 0; tries < 100; tries++) {
        int rc = drive_delete(d, &id);
        if (rc != ERR_NOSPC) return;
        (void)drive_compact(d, 4, 0);
        stalls++;
    }
}

/* workload 0: warm lake (batches + 10% single deletes); 1: uniform random deletes */
static void wa_run(int workload)
{
    char *dir = subdir("wa");
    uint64_t cap = quick ? 1 * GiB : 2 * GiB, seg = 32 * MiB;
    drive_t *d = open_drive(dir, cap, seg, 1);
    const size_t len = 1 * MiB;
    const int batch = 32;
    uint64_t target = (uint64_t)((double)cap * 0.8) / (len + 4096);
    uint64_t churn = (quick ? 2 : 3) * cap / len;
    uint8_t *buf = malloc(len);
    uint64_t *live =
        malloc(sizeof(uint64_t) * (target + churn + 64)); /* every object ever written */
    uint64_t nlive = 0, next = 0, s = 12345 + (uint64_t)workload, stalls = 0, first_live = 0;
    char key[32];
    drive_stats_t a, b;

    memset(buf, 0x5a, len);
    /* live[] is kept in write order for the warm lake; holes are UINT64_MAX. */
    for (uint64_t i = 0; i < target + churn; i++) {
        if (i == target) drive_stats(d, &a); /* steady state starts at 80% fill */
        snprintf(key, sizeof(key), "o%010llu", (unsigned long long)next);
        if (put_retry(d, key, buf, len, &stalls) != 0) {
            fprintf(stderr, "wa: put failed\n");
            exit(1);
        }
        live[nlive++] = next++;
        if (workload == 0) {
            if (rng_next(&s) % 10 == 0 && nlive - first_live > 1) {
                /* a random single delete among the live objects */
                uint64_t j = first_live + rng_next(&s) % (nlive - first_live);
                if (live[j] != UINT64_MAX) {
                    del(d, live[j]);
                    live[j] = UINT64_MAX;
                }
            }
            uint64_t count = 0;
            for (uint64_t j = first_live; j < nlive; j++)
                count += live[j] != UINT64_MAX;
            while (count > target) {
                /* drop the oldest batch whole */
                for (int k = 0; k < batch && first_live < nlive; k++, first_live++)
                    if (live[first_live] != UINT64_MAX) {
                        del(d, live[first_live]);
                        live[first_live] = UINT64_MAX;
                        count--;
                    }
            }
            if (first_live > target) {
                memmove(live, live + first_live, (nlive - first_live) * sizeof(*live));
                nlive -= first_live;
                first_live = 0;
            }
        } else {
            while (nlive > target) {
                uint64_t j = rng_next(&s) % nlive;
                del(d, live[j]);
                live[j] = live[--nlive];
            }
        }
    }
    drive_stats(d, &b);
    double user = (double)(b.user_bytes - a.user_bytes);
    double host = (double)(b.host_bytes - a.host_bytes);
    const char *name = workload == 0 ? "wa_warm_lake_80pct" : "wa_uniform_random_80pct";
    row(name, user > 0 ? host / user : 0, "x", "-");
    char n2[64];
    snprintf(n2, sizeof(n2), "%s_relocated_share", name);
    row(n2, host > 0 ? (double)(b.relocated_bytes - a.relocated_bytes) / host : 0, "frac", "-");
    snprintf(n2, sizeof(n2), "%s_index_share", name);
    row(n2, host > 0 ? (double)(b.index_bytes - a.index_bytes) / host : 0, "frac", "-");
    snprintf(n2, sizeof(n2), "%s_padding_share", name);
    row(n2, host > 0 ? (double)(b.padding_bytes - a.padding_bytes) / host : 0, "frac", "-");
    snprintf(n2, sizeof(n2), "%s_writer_stalls", name);
    row(n2, (double)stalls, "count", "-");
    drive_close(d);
    rm_rf(dir);
    free(dir);
    free(buf);
    free(live);
}

/* ---- index size and recovery ---- */

typedef struct {
    drive_t *d;
    int t, n;
    uint64_t first;
} ix_t;

static void *ix_writer(void *arg)
{
    ix_t *x = arg;
    uint8_t payload[128];
    char key[48];
    memset(payload, 0x33, sizeof(payload));
    for (int i = 0; i < x->n; i++) {
        /* 40-byte keys, like data-lake paths */
        snprintf(key, sizeof(key), "dataset/part-%05d/obj-%015llu.bin", x->t,
                 (unsigned long long)(x->first + (uint64_t)i));
        drive_id_t id = {"bench", key, "", 0};
        if (drive_put(x->d, &id, payload, sizeof(payload), "m", 1) != 0) _exit(3);
    }
    return NULL;
}

enum { IX_T = 64 };

/* The loader of phase_index, in a process of its own: n puts, then kill -9. */
static void index_load(const char *dir, int n)
{
    drive_t *d = open_drive(dir, 8 * GiB, 64 * MiB, 0);
    ix_t x[IX_T];
    pthread_t th[IX_T];
    double t0 = now();
    for (int t = 0; t < IX_T; t++) {
        x[t] = (ix_t){d, t, n / IX_T, (uint64_t)t * (uint64_t)(n / IX_T)};
        pthread_create(&th[t], NULL, ix_writer, &x[t]);
    }
    for (int t = 0; t < IX_T; t++)
        pthread_join(th[t], NULL);
    double el = now() - t0;
    printf("ROW\tindex_load_puts_t64\t%.1f\tops/s\t-\n", (double)n / el);
    fflush(stdout);
    raise(SIGKILL); /* kill -9 with everything acknowledged, memtable unflushed */
}

static void phase_index(void)
{
    char *dir = subdir("index");
    int n = quick ? 200000 : 1000000;
    char ns[16];
    snprintf(ns, sizeof(ns), "%d", n);
    /*
     * A fresh exec, not a plain fork: the earlier phases' RocksDB thread pool
     * may hold its mutex at the fork, and the child's open would wait forever.
     */
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "bench_storage", "--index-load", dir, ns, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status)) {
        fprintf(stderr, "index: loader failed\n");
        exit(1);
    }
    drive_cfg_t c = {0};
    c.path = dir;
    drive_t *d;
    double t0 = now();
    if (drive_open(&c, &d) != 0) exit(1);
    row("recovery_after_kill9_s", now() - t0, "s", "-");
    if (drive_index_flush(d) != 0) exit(1);
    drive_stats_t st;
    drive_stats(d, &st);
    row("recovery_after_kill9_replayed_MiB", (double)st.replayed_bytes / MiB, "MiB", "-");
    row("index_disk_bytes_per_object", (double)st.index_disk_bytes / n, "B/obj", "-");
    row("index_mem_bytes_per_object", (double)st.index_mem_bytes / n, "B/obj", "-");
    drive_close(d);
    t0 = now();
    if (drive_rebuild_index(&c) != 0) exit(1);
    row("index_rebuild_from_segments_s", now() - t0, "s", "-");
    rm_rf(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_storage DIR [quick] [phase...]\n");
        return 2;
    }
    log_level = LOG_LVL_WARN;
    if (argc == 4 && strcmp(argv[1], "--index-load") == 0) index_load(argv[2], atoi(argv[3]));
    base = argv[1];
    int first = 2;
    if (argc > 2 && strcmp(argv[2], "quick") == 0) {
        quick = 1;
        first = 3;
    }
    int all = argc <= first;
    for (int i = first; i < argc || all; i++) {
        const char *p = all ? NULL : argv[i];
        if (all || strcmp(p, "append") == 0) phase_append();
        if (all || strcmp(p, "append") == 0 || strcmp(p, "pooled") == 0) phase_append_pooled();
#ifndef BENCH_SYNC_ONLY
        if (all || strcmp(p, "async") == 0) phase_async();
#endif
        if (all || strcmp(p, "read") == 0) phase_read();
        if (all || strcmp(p, "wa") == 0) {
            wa_run(0);
            wa_run(1);
        }
        if (all || strcmp(p, "index") == 0) phase_index();
        if (all) break;
    }
    return 0;
}
