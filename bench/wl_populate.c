/*
 * wl-populate: fill a bucket with many keys fast, for listing benchmarks
 * (bench/s3.sh). Writing 10^6..10^7 objects through S3 takes hours here;
 * a listing reads heads only, so this tool writes heads alone, through the
 * object layer (obj__write_at_data: the very records a PUT commits, one per
 * store), from many threads, into a stopped node's drives:
 *
 *   wl-populate --data DIR --drives 6 --ec 4+2 --bucket NAME --like KEY \
 *               --format FMT --count N [--start I] [--threads T]
 *   wl-populate --data DIR --drives 6 --ec 4+2 --bucket NAME --list PREFIX
 *
 * Every key FMT % i (i in [start, start+count); FMT holds one %llu
 * conversion, e.g. "k/%08llu") gets a copy of the head of object KEY,
 * which must exist in bucket NAME: its data stays KEY's, so these keys are
 * for listing, never for reading or deleting. Prints keys written per second.
 */
#include "common/err.h"
#include "common/log.h"
#include "server/obj_int.h"
#include "server/s3_int.h"

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    obj_set_t *set;
    char iname[INAME_MAX];
    obj_info_t proto;
    void *bytes; /* an inline proto's data, carried by the copies' heads as by its own */
    const char *format;
    unsigned long long start, count;
    unsigned long long next; /* atomically claimed batches */
    const char *list;        /* --list: the prefix listed */
    unsigned long long listed;
    int failed;
} g;

#define BATCH 256

static void *worker(void *arg)
{
    obj_info_t *o = malloc(sizeof(*o));
    (void)arg;
    for (;;) {
        unsigned long long b = __atomic_fetch_add(&g.next, BATCH, __ATOMIC_RELAXED);
        if (b >= g.count) break;
        for (unsigned long long i = b; i < b + BATCH && i < g.count; i++) {
            char key[1100];
            int fe = 0;
            snprintf(key, sizeof(key), g.format, g.start + i);
            obj_info_copy(o, &g.proto);
            if (o->inl) o->inl = obj__inline_stores(g.set, g.iname, key); /* the key's own */
            /* Every store's head, or a small object's copies' (sparse: its m+1 alone). */
            int want = o->sparse ? __builtin_popcount(o->inl) : obj_set_width(g.set);
            if (obj__write_at_data(g.set, g.iname, key, "", o, g.bytes, 0, &fe) < want) {
                fprintf(stderr, "wl-populate: %s: %s\n", key, err_str(fe));
                __atomic_store_n(&g.failed, 1, __ATOMIC_RELAXED);
                free(o);
                return NULL;
            }
        }
    }
    free(o);
    return NULL;
}

/* Populating needs no durability record by record: one sync at the end (see main). */
static int no_sync(int fd)
{
    (void)fd;
    return 0;
}

static int count_cb(void *arg, const char *key, const obj_info_t *info)
{
    (void)key;
    (void)info;
    ++*(unsigned long long *)arg;
    return 0;
}

static void *lister(void *arg)
{
    unsigned long long n = 0;
    (void)arg;
    int err = obj_list(g.set, g.iname, g.list, NULL, count_cb, &n);
    if (err < 0) {
        fprintf(stderr, "wl-populate: list: %s\n", err_str(err));
        __atomic_store_n(&g.failed, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&g.listed, n, __ATOMIC_RELAXED);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    const char *data = NULL, *bucket = NULL, *like = NULL, *list = NULL;
    int drives = 6, k = 4, m = 2, threads = 16;
    static const struct option opts[] = {
        {"data", 1, 0, 'd'},    {"drives", 1, 0, 'n'}, {"ec", 1, 0, 'e'},    {"bucket", 1, 0, 'b'},
        {"like", 1, 0, 'l'},    {"format", 1, 0, 'f'}, {"count", 1, 0, 'c'}, {"start", 1, 0, 's'},
        {"threads", 1, 0, 't'}, {"list", 1, 0, 'L'},   {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'd':
            data = optarg;
            break;
        case 'n':
            drives = atoi(optarg);
            break;
        case 'e':
            if (sscanf(optarg, "%d+%d", &k, &m) != 2) return 2;
            break;
        case 'b':
            bucket = optarg;
            break;
        case 'l':
            like = optarg;
            break;
        case 'f':
            g.format = optarg;
            break;
        case 'c':
            g.count = strtoull(optarg, NULL, 10);
            break;
        case 's':
            g.start = strtoull(optarg, NULL, 10);
            break;
        case 't':
            threads = atoi(optarg);
            break;
        case 'L':
            list = optarg;
            break;
        default:
            return 2;
        }
    }
    if (!data || !bucket || (!list && (!like || !g.format)) || drives != k + m ||
        drives > OBJ_MAX_SHARDS || threads < 1 || threads > 256) {
        fprintf(stderr,
                "usage: wl-populate --data DIR --drives N --ec K+M --bucket NAME --like KEY "
                "--format FMT --count N [--start I] [--threads T]\n");
        return 2;
    }
    log_level = LOG_LVL_WARN;
    drive_io.fdatasync = no_sync;
    drive_t *dv[OBJ_MAX_SHARDS] = {0};
    shard_store_t st[OBJ_MAX_SHARDS];
    int rc = 1, err;
    for (int i = 0; i < drives; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/drive%d", data, i);
        drive_cfg_t c = {0};
        c.path = path; /* capacity, IU: as the drive recorded them */
        if ((err = drive_open(&c, &dv[i])) != 0) {
            fprintf(stderr, "wl-populate: cannot open %s: %s\n", path, err_str(err));
            goto out;
        }
        st[i] = shard_store_local(dv[i]);
    }
    /* The block size only matters to writers of data; heads carry their own layout. */
    g.set = obj_set_new(st, k, m, 1u << 20, &err);
    if (!g.set) goto out;
    obj_info_t *bi = malloc(sizeof(*bi));
    if (obj_stat(g.set, BUCKETS, bucket, bi) != 0) {
        fprintf(stderr, "wl-populate: no bucket %s\n", bucket);
        free(bi);
        goto out;
    }
    s3_bucket_iname(bucket, bi, g.iname);
    free(bi);
    if (list) {
        /* The object layer's listing alone, in this process: what S3 listings could reach.
         * threads listings at once, as many S3 clients would. */
        pthread_t th[256];
        g.list = list;
        double t0 = now_s();
        for (int i = 0; i < threads; i++)
            pthread_create(&th[i], NULL, lister, NULL);
        for (int i = 0; i < threads; i++)
            pthread_join(th[i], NULL);
        double secs = now_s() - t0;
        if (g.failed) goto out;
        printf("wl-populate: listed %llu keys in %.2f s (%.0f keys/s)\n", g.listed, secs,
               (double)g.listed / (secs > 0 ? secs : 1e-9));
        rc = 0;
        goto out;
    }
    if ((err = obj_stat(g.set, g.iname, like, &g.proto)) != 0) {
        fprintf(stderr, "wl-populate: %s/%s: %s\n", bucket, like, err_str(err));
        goto out;
    }
    if (g.proto.inl && g.proto.size) {
        g.bytes = malloc(g.proto.size);
        if ((err = obj__inline_load(g.set, g.iname, like, &g.proto, g.bytes)) != 0) {
            fprintf(stderr, "wl-populate: %s/%s: %s\n", bucket, like, err_str(err));
            goto out;
        }
    }
    pthread_t th[256];
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double secs = now_s() - t0;
    if (!g.failed) {
        printf("wl-populate: %llu keys in %.1f s (%.0f keys/s)\n", g.count, secs,
               (double)g.count / (secs > 0 ? secs : 1e-9));
        rc = 0;
    }
out:
    if (g.set) obj_set_free(g.set);
    for (int i = 0; i < drives; i++)
        drive_close(dv[i]);
    sync(); /* what no_sync skipped, all at once */
    free(g.bytes);
    return rc;
}
