/*
 * wl: the warmlake command line, over libwarmlake.
 *
 *   wl ls [wl://BUCKET[/PREFIX]] [-r]     buckets, or keys (rolled up at '/' unless -r)
 *   wl cp [-r] SRC DST                    upload, download, or copy server-side (wl:// to wl://)
 *   wl cat wl://BUCKET/KEY                object to stdout (ranged parts read ahead)
 *   wl rm [-r] wl://BUCKET/KEY            delete a key, or every key under a prefix
 *   wl stat wl://BUCKET/KEY               size, ETag, date, type
 *   wl mb wl://BUCKET / rb [--force]      make / remove a bucket (--force: empty it first)
 *   wl sync SRC DST                       copy what is missing or differs (size, or newer)
 *   wl du wl://BUCKET[/PREFIX]            bytes and objects under a prefix
 *   wl presign wl://BUCKET/KEY [--expires S] [--method M]
 *
 * Options: --endpoint URL[,URL...] --profile P --region R --json --no-batch
 * -j/--jobs N (files at once, default 4) --part-size MiB --quiet --stats.
 * Configuration as the aws CLI (config.h). --json prints one JSON object
 * per line for every listed object or transfer. Downloads of many small
 * objects go through batch GET (falling back to single GETs on servers
 * without it, or always with --no-batch / WARMLAKE_NO_BATCH=1).
 * Exit status: 0, 1 when anything failed, 2 for usage errors.
 */
#include "client/cli/config.h"
#include "client/cli/xfer.h"
#include "client/include/warmlake/wl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SMALL_MAX   (1u << 20) /* objects up to this size download through batch GET */
#define BATCH_GROUP 256

static struct {
    int json, recursive, jobs, quiet, stats, force, no_batch;
    long expires;
    const char *method, *content_type;
    uint64_t part_size;
} opt = {.jobs = 4, .expires = 3600, .method = "GET"};

static wl_client_t *cl;

/* ---- output ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* A failed library call: one line on stderr with what the server said. */
static int fail(const char *what)
{
    const wl_error_t *e = wl_last_error();
    pthread_mutex_lock(&out_mu);
    fprintf(stderr, "wl: %s: %s", what, e->message[0] ? e->message : wl_strerror(e->code));
    if (e->request_id[0]) fprintf(stderr, " (request id %s)", e->request_id);
    fputc('\n', stderr);
    pthread_mutex_unlock(&out_mu);
    return 1;
}

static int usage_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "wl: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 2;
}

/* ---- paths ---- */

typedef struct {
    char bucket[256];
    char key[1100];
} rpath_t;

/* "wl://bucket/key" (or s3://): 1 with rp filled, 0 for a local path. */
static int remote(const char *s, rpath_t *rp)
{
    const char *p;
    if (!strncmp(s, "wl://", 5))
        p = s + 5;
    else if (!strncmp(s, "s3://", 5))
        p = s + 5;
    else
        return 0;
    size_t bl = strcspn(p, "/");
    snprintf(rp->bucket, sizeof(rp->bucket), "%.*s", (int)bl, p);
    snprintf(rp->key, sizeof(rp->key), "%s", p[bl] ? p + bl + 1 : "");
    return 1;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* key under prefix: "" -> rel, "p/" -> "p/rel", "p" -> "p/rel". -1 when it does not fit. */
static int join_key(const char *prefix, const char *rel, char *out, size_t cap)
{
    size_t n = strlen(prefix);
    int w;
    if (!n)
        w = snprintf(out, cap, "%s", rel);
    else if (prefix[n - 1] == '/')
        w = snprintf(out, cap, "%s%s", prefix, rel);
    else
        w = snprintf(out, cap, "%s/%s", prefix, rel);
    if (w < 0 || (size_t)w >= cap) {
        fprintf(stderr, "wl: key too long: %s/%s\n", prefix, rel);
        return -1;
    }
    return 0;
}

static int mkdirs(const char *path) /* the directories above path */
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static time_t parse_time(const char *s)
{
    struct tm tm = {0};
    if (!strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
    return timegm(&tm);
}

/* ---- listings ---- */

typedef struct {
    char *key;
    uint64_t size;
    char etag[128];
    char date[64];
} ent_t;

typedef struct {
    ent_t *v;
    size_t n, cap;
} ents_t;

static void ents_free(ents_t *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].key);
    free(e->v);
    memset(e, 0, sizeof(*e));
}

/* Every key under prefix (all pages). 0 or 1 (reported). */
static int list_all(const char *bucket, const char *prefix, ents_t *out)
{
    char *token = NULL;
    memset(out, 0, sizeof(*out));
    for (;;) {
        wl_list_t *l;
        if (wl_list(cl, bucket, prefix, NULL, token, 1000, &l) != WL_OK) {
            free(token);
            return fail("list");
        }
        for (size_t i = 0; i < l->n_objects; i++) {
            if (out->n == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 256;
                out->v = realloc(out->v, out->cap * sizeof(ent_t));
                if (!out->v) {
                    fprintf(stderr, "wl: out of memory\n");
                    exit(1);
                }
            }
            ent_t *e = &out->v[out->n++];
            e->key = strdup(l->objects[i].key);
            e->size = l->objects[i].size;
            snprintf(e->etag, sizeof(e->etag), "%s", l->objects[i].etag);
            snprintf(e->date, sizeof(e->date), "%s", l->objects[i].last_modified);
        }
        free(token);
        token = l->truncated && l->next_token ? strdup(l->next_token) : NULL;
        wl_list_free(l);
        if (!token) return 0;
    }
}

static void print_obj(const char *key, uint64_t size, const char *date, const char *etag)
{
    if (opt.json) {
        printf("{\"key\":");
        json_str(stdout, key);
        printf(",\"size\":%llu,\"last_modified\":", (unsigned long long)size);
        json_str(stdout, date);
        printf(",\"etag\":");
        json_str(stdout, etag);
        printf("}\n");
    } else {
        char d[32];
        snprintf(d, sizeof(d), "%.19s", date);
        if (d[10] == 'T') d[10] = ' ';
        printf("%-19s %12llu %s\n", d, (unsigned long long)size, key);
    }
}

static int cmd_ls(int argc, char **argv)
{
    if (argc == 0) {
        wl_list_t *l;
        if (wl_list_buckets(cl, &l) != WL_OK) return fail("list buckets");
        for (size_t i = 0; i < l->n_objects; i++) {
            if (opt.json) {
                printf("{\"bucket\":");
                json_str(stdout, l->objects[i].key);
                printf(",\"created\":");
                json_str(stdout, l->objects[i].last_modified);
                printf("}\n");
            } else {
                printf("%.19s wl://%s\n", l->objects[i].last_modified, l->objects[i].key);
            }
        }
        wl_list_free(l);
        return 0;
    }
    rpath_t rp;
    if (!remote(argv[0], &rp)) return usage_err("ls: want wl://BUCKET[/PREFIX]");
    char *token = NULL;
    for (;;) {
        wl_list_t *l;
        if (wl_list(cl, rp.bucket, rp.key, opt.recursive ? NULL : "/", token, 1000, &l) != WL_OK) {
            free(token);
            return fail("list");
        }
        for (size_t i = 0; i < l->n_prefixes; i++) {
            if (opt.json) {
                printf("{\"prefix\":");
                json_str(stdout, l->prefixes[i]);
                printf("}\n");
            } else {
                printf("%-19s %12s %s\n", "", "PRE", l->prefixes[i]);
            }
        }
        for (size_t i = 0; i < l->n_objects; i++)
            print_obj(l->objects[i].key, l->objects[i].size, l->objects[i].last_modified,
                      l->objects[i].etag);
        free(token);
        token = l->truncated && l->next_token ? strdup(l->next_token) : NULL;
        wl_list_free(l);
        if (!token) return 0;
    }
}

static int cmd_stat(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !remote(argv[0], &rp) || !rp.key[0])
        return usage_err("stat: want wl://BUCKET/KEY");
    wl_stat_t st;
    if (wl_stat(cl, rp.bucket, rp.key, &st) != WL_OK) return fail(argv[0]);
    if (opt.json) {
        printf("{\"key\":");
        json_str(stdout, rp.key);
        printf(",\"size\":%llu,\"etag\":", (unsigned long long)st.size);
        json_str(stdout, st.etag);
        printf(",\"last_modified\":");
        json_str(stdout, st.last_modified);
        printf(",\"content_type\":");
        json_str(stdout, st.content_type);
        printf("}\n");
    } else {
        printf("key:           %s\nsize:          %llu\netag:          %s\n"
               "last_modified: %s\ncontent_type:  %s\n",
               rp.key, (unsigned long long)st.size, st.etag, st.last_modified, st.content_type);
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Sequential output from parallel ranged GETs: the prefetch queue keeps parts in flight. */
static int cmd_cat(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !remote(argv[0], &rp) || !rp.key[0])
        return usage_err("cat: want wl://BUCKET/KEY");
    wl_stat_t st;
    if (wl_stat(cl, rp.bucket, rp.key, &st) != WL_OK) return fail(argv[0]);
    uint64_t part = opt.part_size ? opt.part_size : 8u << 20;
    wl_prefetch_t *pf;
    if (wl_prefetch_new(cl, rp.bucket, 4, (size_t)(6 * part), &pf) != WL_OK) return fail("cat");
    uint64_t pushed = 0, written = 0;
    int rc = 0;
    while (written < st.size && rc == 0) {
        while (pushed < st.size && pushed < written + 4 * part) {
            uint64_t n = st.size - pushed < part ? st.size - pushed : part;
            if (wl_prefetch_push(pf, rp.key, pushed, n, NULL) != WL_OK) {
                rc = fail("cat");
                break;
            }
            pushed += n;
        }
        if (rc) break;
        void *data;
        size_t len;
        if (wl_prefetch_next(pf, &data, &len, NULL) != WL_OK) {
            rc = fail(argv[0]);
            break;
        }
        if (len == 0 || write_all(1, data, len) != 0) {
            if (len)
                fprintf(stderr, "wl: cat: write: %s\n", strerror(errno));
            else
                fprintf(stderr, "wl: cat: %s shrank while read\n", argv[0]);
            rc = 1;
        }
        written += len;
        free(data);
    }
    wl_prefetch_free(pf);
    return rc;
}

/* ---- transfers ---- */

typedef struct {
    char *local; /* file path */
    char *key;
    uint64_t size;
    int small_done; /* fetched by a batch */
} job_t;

typedef struct {
    job_t *v;
    size_t n, cap;
    const char *bucket;
    uint64_t total;
} jobs_t;

static void jobs_add(jobs_t *j, const char *local, const char *key, uint64_t size)
{
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->v = realloc(j->v, j->cap * sizeof(job_t));
        if (!j->v) {
            fprintf(stderr, "wl: out of memory\n");
            exit(1);
        }
    }
    j->v[j->n++] = (job_t){strdup(local), strdup(key), size, 0};
    j->total += size;
}

static void jobs_free(jobs_t *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->v[i].local);
        free(j->v[i].key);
    }
    free(j->v);
}

static void report(const char *op, const char *src, const char *dst, uint64_t size,
                   const char *etag)
{
    if (opt.quiet) return;
    pthread_mutex_lock(&out_mu);
    if (opt.json) {
        printf("{\"op\":\"%s\",\"src\":", op);
        json_str(stdout, src);
        printf(",\"dst\":");
        json_str(stdout, dst);
        printf(",\"size\":%llu,\"etag\":", (unsigned long long)size);
        json_str(stdout, etag ? etag : "");
        printf("}\n");
    } else if (dst[0]) {
        printf("%s: %s -> %s\n", op, src, dst);
    } else {
        printf("%s: %s\n", op, src);
    }
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
}

static int upload_one(void *arg, size_t i)
{
    jobs_t *j = arg;
    job_t *b = &j->v[i];
    int fd = open(b->local, O_RDONLY | O_CLOEXEC);
    char what[1400], etag[128] = "";
    if (fd < 0) {
        fprintf(stderr, "wl: %s: %s\n", b->local, strerror(errno));
        return 1;
    }
    struct stat st;
    int rc = fstat(fd, &st);
    if (rc == 0)
        rc = wl_put_fd(cl, j->bucket, b->key, fd, (uint64_t)st.st_size, opt.content_type, etag);
    close(fd);
    snprintf(what, sizeof(what), "upload %s", b->local);
    if (rc) return fail(what);
    snprintf(what, sizeof(what), "wl://%s/%s", j->bucket, b->key);
    report("upload", b->local, what, (uint64_t)st.st_size, etag);
    return 0;
}

/* Write data to path (mkdir -p, via a temporary name so no half file is left). */
static int save_file(const char *path, int (*fill)(int fd, void *arg), void *arg)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof(tmp), "%s.wl-part", path);
    if (mkdirs(path) != 0) {
        fprintf(stderr, "wl: mkdir for %s: %s\n", path, strerror(errno));
        return 1;
    }
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "wl: %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    int rc = fill(fd, arg);
    if (close(fd) != 0 && rc == 0) rc = 1;
    if (rc == 0 && rename(tmp, path) != 0) {
        fprintf(stderr, "wl: rename to %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    if (rc) unlink(tmp);
    return rc;
}

typedef struct {
    jobs_t *j;
    job_t *b;
    const void *data; /* a batch-fetched body, else NULL */
    size_t len;
} dl_t;

static int dl_fill(int fd, void *arg)
{
    dl_t *d = arg;
    char what[1400];
    snprintf(what, sizeof(what), "download wl://%s/%s", d->j->bucket, d->b->key);
    if (d->data) {
        if (write_all(fd, d->data, d->len) == 0) return 0;
        fprintf(stderr, "wl: %s: %s\n", d->b->local, strerror(errno));
        return 1;
    }
    wl_stat_t st;
    if (wl_get_fd(cl, d->j->bucket, d->b->key, fd, &st) != WL_OK) return fail(what);
    d->len = (size_t)st.size;
    return 0;
}

static int download_one(void *arg, size_t i)
{
    jobs_t *j = arg;
    job_t *b = &j->v[i];
    if (b->small_done) return 0;
    dl_t d = {j, b, NULL, 0};
    int rc = save_file(b->local, dl_fill, &d);
    if (rc == 0) {
        char src[1400];
        snprintf(src, sizeof(src), "wl://%s/%s", j->bucket, b->key);
        report("download", src, b->local, d.len, NULL);
    }
    return rc;
}

/* Small objects in groups through batch GET (libwarmlake falls back to single GETs). An
   entry that failed, or outgrew the size listed, is left to download_one. */
static size_t download_small(jobs_t *j)
{
    size_t failed = 0;
    size_t *idx = malloc(j->n * sizeof(size_t)), ns = 0;
    if (!idx) return 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->v[i].size <= SMALL_MAX) idx[ns++] = i;
    for (size_t g = 0; g < ns; g += BATCH_GROUP) {
        size_t n = ns - g < BATCH_GROUP ? ns - g : BATCH_GROUP;
        wl_item_t *it = calloc(n, sizeof(*it));
        char *mem = NULL;
        uint64_t bytes = 0;
        for (size_t k = 0; k < n; k++)
            bytes += j->v[idx[g + k]].size + 1;
        mem = malloc(bytes ? bytes : 1);
        if (!it || !mem) {
            free(it);
            free(mem);
            break;
        }
        uint64_t o = 0;
        for (size_t k = 0; k < n; k++) {
            job_t *b = &j->v[idx[g + k]];
            it[k].key = b->key;
            it[k].buf = mem + o;
            it[k].cap = (size_t)b->size + 1; /* one more: a grown object shows as too large */
            o += b->size + 1;
        }
        if (wl_get_batch(cl, j->bucket, it, n) < 0) {
            fail("batch get");
        } else {
            for (size_t k = 0; k < n; k++) {
                job_t *b = &j->v[idx[g + k]];
                if (it[k].code != WL_OK || it[k].got != b->size) continue;
                dl_t d = {j, b, it[k].buf, it[k].got};
                if (save_file(b->local, dl_fill, &d) != 0) {
                    failed++;
                } else {
                    char src[1400];
                    snprintf(src, sizeof(src), "wl://%s/%s", j->bucket, b->key);
                    report("download", src, b->local, d.len, NULL);
                }
                b->small_done = 1;
            }
        }
        free(it);
        free(mem);
    }
    free(idx);
    return failed;
}

static int run_downloads(jobs_t *j)
{
    xfer_meter_start(j->total, !opt.quiet && !opt.json);
    size_t failed = download_small(j);
    failed += xfer_run(j->n, opt.jobs, download_one, j);
    xfer_meter_stop();
    return failed ? 1 : 0;
}

static int run_uploads(jobs_t *j)
{
    xfer_meter_start(j->total, !opt.quiet && !opt.json);
    size_t failed = xfer_run(j->n, opt.jobs, upload_one, j);
    xfer_meter_stop();
    return failed ? 1 : 0;
}

/* Files under dir (recursively), rel paths joined to prefix as keys. */
static int walk(const char *dir, const char *rel, const char *prefix, jobs_t *j)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s%s", dir, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "wl: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char r[PATH_MAX], full[PATH_MAX * 2], key[2048];
        snprintf(r, sizeof(r), "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        snprintf(full, sizeof(full), "%s/%s", dir, r);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            rc |= walk(dir, r, prefix, j);
        } else if (S_ISREG(st.st_mode)) {
            if (join_key(prefix, r, key, sizeof(key)) != 0) {
                rc = 1;
                continue;
            }
            jobs_add(j, full, key, (uint64_t)st.st_size);
        }
    }
    closedir(d);
    return rc;
}

/* Whether a relative path has a ".." component (or an empty one: "a//b"). */
static int escapes(const char *rel)
{
    for (const char *p = rel; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 2 && p[0] == '.' && p[1] == '.')) return 1;
        p += n;
        if (*p) p++;
    }
    return 0;
}

/* Remote keys under prefix as downloads into dir. */
static int remote_jobs(const rpath_t *rp, const char *dir, jobs_t *j)
{
    ents_t es;
    if (list_all(rp->bucket, rp->key, &es)) return 1;
    size_t pl = strlen(rp->key);
    for (size_t i = 0; i < es.n; i++) {
        const char *rel = es.v[i].key + pl;
        while (*rel == '/')
            rel++;
        if (!*rel || es.v[i].key[strlen(es.v[i].key) - 1] == '/' || escapes(rel)) {
            /* A directory marker, or a key that would land outside dir. */
            if (*rel && escapes(rel))
                fprintf(stderr, "wl: skipping %s: it would land outside %s\n", es.v[i].key, dir);
            continue;
        }
        char path[PATH_MAX * 2];
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        jobs_add(j, path, es.v[i].key, es.v[i].size);
    }
    ents_free(&es);
    return 0;
}

typedef struct {
    const rpath_t *src, *dst;
    ents_t *es;
} cp_t;

static int copy_one(void *arg, size_t i)
{
    cp_t *x = arg;
    const char *key = x->es->v[i].key;
    char dkey[2048], what[2400], etag[128];
    const char *rel = key + strlen(x->src->key);
    while (*rel == '/')
        rel++;
    if (!*rel) /* a single copy to a named key */
        snprintf(dkey, sizeof(dkey), "%s", x->dst->key);
    else if (join_key(x->dst->key, rel, dkey, sizeof(dkey)) != 0)
        return 1;
    snprintf(what, sizeof(what), "copy wl://%s/%s", x->src->bucket, key);
    if (wl_copy(cl, x->src->bucket, key, x->dst->bucket, dkey, etag) != WL_OK) return fail(what);
    char src[1400], dst[2400];
    snprintf(src, sizeof(src), "wl://%s/%s", x->src->bucket, key);
    snprintf(dst, sizeof(dst), "wl://%s/%s", x->dst->bucket, dkey);
    report("copy", src, dst, x->es->v[i].size, etag);
    return 0;
}

/* wl:// to wl://: server-side copies, a key or (-r) every key under a prefix. */
static int copy_remote(const rpath_t *src, const rpath_t *dst)
{
    ents_t es = {0};
    rpath_t d = *dst;
    if (opt.recursive) {
        if (list_all(src->bucket, src->key, &es)) return 1;
    } else {
        if (!src->key[0]) return usage_err("cp: want wl://BUCKET/KEY (or -r)");
        size_t dl = strlen(d.key);
        es.v = calloc(1, sizeof(ent_t));
        es.n = es.cap = 1;
        es.v[0].key = strdup(src->key);
        if (!es.v[0].key) return usage_err("out of memory");
        /* Into a "directory": the source's base name under it. */
        rpath_t s = *src;
        snprintf(s.key, sizeof(s.key), "%.*s", (int)(base_name(src->key) - src->key), src->key);
        if (dl && d.key[dl - 1] != '/') {
            /* A named target: copy_one joins the empty remainder to it. */
            snprintf(s.key, sizeof(s.key), "%s", src->key);
        }
        cp_t x = {&s, &d, &es};
        size_t failed = xfer_run(1, 1, copy_one, &x);
        ents_free(&es);
        return failed ? 1 : 0;
    }
    cp_t x = {src, &d, &es};
    size_t failed = xfer_run(es.n, opt.jobs * 4, copy_one, &x);
    ents_free(&es);
    return failed ? 1 : 0;
}

static int cmd_cp(int argc, char **argv)
{
    if (argc != 2) return usage_err("cp: want SRC DST");
    rpath_t rs, rd;
    int sr = remote(argv[0], &rs), dr = remote(argv[1], &rd);
    jobs_t j = {0};
    int rc;
    if (sr && dr) return copy_remote(&rs, &rd);
    if (!sr && !dr) return usage_err("cp: one side must be a wl:// path");
    if (!sr) {
        j.bucket = rd.bucket;
        if (opt.recursive) {
            if (!is_dir(argv[0])) return usage_err("cp -r: %s is not a directory", argv[0]);
            rc = walk(argv[0], "", rd.key, &j);
        } else {
            struct stat st;
            if (stat(argv[0], &st) != 0 || !S_ISREG(st.st_mode))
                return usage_err("cp: %s is not a file (directories need -r)", argv[0]);
            char key[2048];
            size_t kl = strlen(rd.key);
            if (!kl || rd.key[kl - 1] == '/') {
                if (join_key(rd.key, base_name(argv[0]), key, sizeof(key)) != 0) return 1;
            } else
                snprintf(key, sizeof(key), "%s", rd.key);
            jobs_add(&j, argv[0], key, (uint64_t)st.st_size);
            rc = 0;
        }
        rc |= run_uploads(&j);
    } else {
        j.bucket = rs.bucket;
        if (opt.recursive) {
            rc = remote_jobs(&rs, argv[1], &j);
        } else {
            if (!rs.key[0]) return usage_err("cp: want wl://BUCKET/KEY");
            wl_stat_t st;
            if (wl_stat(cl, rs.bucket, rs.key, &st) != WL_OK) return fail(argv[0]);
            char path[PATH_MAX * 2];
            size_t dl = strlen(argv[1]);
            if (is_dir(argv[1]) || (dl && argv[1][dl - 1] == '/'))
                snprintf(path, sizeof(path), "%s/%s", argv[1], base_name(rs.key));
            else
                snprintf(path, sizeof(path), "%s", argv[1]);
            jobs_add(&j, path, rs.key, st.size);
            rc = 0;
        }
        rc |= run_downloads(&j);
    }
    jobs_free(&j);
    return rc;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const ent_t *)a)->key, ((const ent_t *)b)->key);
}

/* Copy what is missing on the other side, differs in size, or is newer here. */
static int cmd_sync(int argc, char **argv)
{
    if (argc != 2) return usage_err("sync: want SRC DST");
    rpath_t rs, rd;
    int sr = remote(argv[0], &rs), dr = remote(argv[1], &rd);
    if (sr == dr) return usage_err("sync: one side local, the other wl://");
    jobs_t all = {0}, todo = {0};
    ents_t es;
    int rc = 0;
    if (!sr) {
        if (!is_dir(argv[0])) return usage_err("sync: %s is not a directory", argv[0]);
        rc = walk(argv[0], "", rd.key, &all);
        if (list_all(rd.bucket, rd.key, &es)) return 1;
        if (es.n) qsort(es.v, es.n, sizeof(ent_t), cmp_key);
        todo.bucket = rd.bucket;
        for (size_t i = 0; i < all.n; i++) {
            ent_t k = {.key = all.v[i].key};
            ent_t *r = es.n ? bsearch(&k, es.v, es.n, sizeof(ent_t), cmp_key) : NULL;
            struct stat st;
            if (r && stat(all.v[i].local, &st) == 0 && r->size == all.v[i].size &&
                st.st_mtime <= parse_time(r->date))
                continue;
            jobs_add(&todo, all.v[i].local, all.v[i].key, all.v[i].size);
        }
        rc |= run_uploads(&todo);
    } else {
        rc = remote_jobs(&rs, argv[1], &all);
        if (list_all(rs.bucket, rs.key, &es)) return 1;
        if (es.n) qsort(es.v, es.n, sizeof(ent_t), cmp_key);
        todo.bucket = rs.bucket;
        for (size_t i = 0; i < all.n; i++) {
            ent_t k = {.key = all.v[i].key};
            ent_t *r = es.n ? bsearch(&k, es.v, es.n, sizeof(ent_t), cmp_key) : NULL;
            struct stat st;
            if (r && stat(all.v[i].local, &st) == 0 && (uint64_t)st.st_size == r->size &&
                st.st_mtime >= parse_time(r->date))
                continue;
            jobs_add(&todo, all.v[i].local, all.v[i].key, all.v[i].size);
        }
        rc |= run_downloads(&todo);
    }
    ents_free(&es);
    jobs_free(&all);
    jobs_free(&todo);
    return rc;
}

typedef struct {
    const char *bucket;
    ents_t *es;
} rm_t;

static int rm_one(void *arg, size_t i)
{
    rm_t *r = arg;
    char what[1400];
    snprintf(what, sizeof(what), "rm wl://%s/%s", r->bucket, r->es->v[i].key);
    if (wl_delete(cl, r->bucket, r->es->v[i].key) != WL_OK) return fail(what);
    report("delete", what + 3, "", r->es->v[i].size, NULL);
    return 0;
}

static int rm_prefix(const char *bucket, const char *prefix)
{
    ents_t es;
    if (list_all(bucket, prefix, &es)) return 1;
    rm_t r = {bucket, &es};
    size_t failed = xfer_run(es.n, opt.jobs * 4, rm_one, &r);
    ents_free(&es);
    return failed ? 1 : 0;
}

static int cmd_rm(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !remote(argv[0], &rp)) return usage_err("rm: want wl://BUCKET/KEY");
    if (opt.recursive) return rm_prefix(rp.bucket, rp.key);
    if (!rp.key[0]) return usage_err("rm: want a key (or -r for a prefix)");
    if (wl_delete(cl, rp.bucket, rp.key) != WL_OK) return fail(argv[0]);
    report("delete", argv[0], "", 0, NULL);
    return 0;
}

static int cmd_mb(int argc, char **argv, int make)
{
    rpath_t rp;
    if (argc != 1 || !remote(argv[0], &rp) || rp.key[0])
        return usage_err("%s: want wl://BUCKET", make ? "mb" : "rb");
    if (make) return wl_bucket_create(cl, rp.bucket) != WL_OK ? fail(argv[0]) : 0;
    if (opt.force && rm_prefix(rp.bucket, "")) return 1;
    return wl_bucket_delete(cl, rp.bucket) != WL_OK ? fail(argv[0]) : 0;
}

static int cmd_du(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !remote(argv[0], &rp)) return usage_err("du: want wl://BUCKET[/PREFIX]");
    ents_t es;
    if (list_all(rp.bucket, rp.key, &es)) return 1;
    uint64_t bytes = 0;
    for (size_t i = 0; i < es.n; i++)
        bytes += es.v[i].size;
    if (opt.json)
        printf("{\"bytes\":%llu,\"objects\":%zu}\n", (unsigned long long)bytes, es.n);
    else
        printf("%llu\t%zu\t%s\n", (unsigned long long)bytes, es.n, argv[0]);
    ents_free(&es);
    return 0;
}

static int cmd_presign(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !remote(argv[0], &rp) || !rp.key[0])
        return usage_err("presign: want wl://BUCKET/KEY");
    char url[8192];
    if (wl_presign(cl, opt.method, rp.bucket, rp.key, opt.expires, url, sizeof(url)) != WL_OK)
        return fail(argv[0]);
    if (opt.json) {
        printf("{\"url\":");
        json_str(stdout, url);
        printf("}\n");
    } else {
        printf("%s\n", url);
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: wl [options] COMMAND ARGS\n"
        "  ls [wl://BUCKET[/PREFIX]]   cp [-r] SRC DST   cat wl://B/K   rm [-r] wl://B/K\n"
        "  stat wl://B/K   mb wl://B   rb [--force] wl://B   sync SRC DST   du wl://B[/P]\n"
        "  presign [--expires S] [--method M] wl://B/K\n"
        "options: --endpoint URL[,URL..] --profile P --region R --json --no-batch\n"
        "  -r/--recursive -j/--jobs N --part-size MiB --content-type T -q/--quiet --stats\n"
        "environment: AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL AWS_PROFILE\n"
        "  AWS_REGION WARMLAKE_ENDPOINTS WARMLAKE_NO_BATCH; files ~/.aws/{credentials,config}\n");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"endpoint", required_argument, 0, 'e'},
        {"profile", required_argument, 0, 'p'},
        {"region", required_argument, 0, 'R'},
        {"json", no_argument, 0, 'J'},
        {"no-batch", no_argument, 0, 'B'},
        {"recursive", no_argument, 0, 'r'},
        {"jobs", required_argument, 0, 'j'},
        {"part-size", required_argument, 0, 'P'},
        {"content-type", required_argument, 0, 'T'},
        {"expires", required_argument, 0, 'x'},
        {"method", required_argument, 0, 'm'},
        {"force", no_argument, 0, 'f'},
        {"quiet", no_argument, 0, 'q'},
        {"stats", no_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *endpoint = NULL, *profile = NULL, *region = NULL;
    for (int ch; (ch = getopt_long(argc, argv, "rj:qfh", longs, NULL)) != -1;) {
        switch (ch) {
        case 'e':
            endpoint = optarg;
            break;
        case 'p':
            profile = optarg;
            break;
        case 'R':
            region = optarg;
            break;
        case 'J':
            opt.json = 1;
            break;
        case 'B':
            opt.no_batch = 1;
            break;
        case 'r':
            opt.recursive = 1;
            break;
        case 'j':
            opt.jobs = atoi(optarg);
            if (opt.jobs < 1 || opt.jobs > 64) return usage_err("--jobs: 1 to 64");
            break;
        case 'P':
            opt.part_size = strtoull(optarg, NULL, 10) << 20;
            if (opt.part_size < (5u << 20)) return usage_err("--part-size: at least 5 (MiB)");
            break;
        case 'T':
            opt.content_type = optarg;
            break;
        case 'x':
            opt.expires = atol(optarg);
            break;
        case 'm':
            opt.method = optarg;
            break;
        case 'f':
            opt.force = 1;
            break;
        case 'q':
            opt.quiet = 1;
            break;
        case 'S':
            opt.stats = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    int nargs = argc - optind - 1;
    char **args = argv + optind + 1;

    cli_config_t cc;
    char err[256];
    if (cli_config_load(endpoint, profile, region, &cc, err, sizeof(err)) != 0)
        return usage_err("%s", err);
    wl_config_t wc = {.endpoints = cc.endpoints,
                      .access_key = cc.access_key[0] ? cc.access_key : NULL,
                      .secret_key = cc.secret_key[0] ? cc.secret_key : NULL,
                      .region = cc.region,
                      .part_size = opt.part_size,
                      .no_batch = opt.no_batch || cc.no_batch,
                      .conns_per_endpoint = 4 * opt.jobs + 8,
                      .threads = 8,
                      .on_bytes = xfer_bytes};
    if (wl_client_new(&wc, &cl) != WL_OK) return fail("client");
    int rc;
    if (!strcmp(cmd, "ls"))
        rc = cmd_ls(nargs, args);
    else if (!strcmp(cmd, "cp"))
        rc = cmd_cp(nargs, args);
    else if (!strcmp(cmd, "cat"))
        rc = cmd_cat(nargs, args);
    else if (!strcmp(cmd, "rm"))
        rc = cmd_rm(nargs, args);
    else if (!strcmp(cmd, "stat"))
        rc = cmd_stat(nargs, args);
    else if (!strcmp(cmd, "mb"))
        rc = cmd_mb(nargs, args, 1);
    else if (!strcmp(cmd, "rb"))
        rc = cmd_mb(nargs, args, 0);
    else if (!strcmp(cmd, "sync"))
        rc = cmd_sync(nargs, args);
    else if (!strcmp(cmd, "du"))
        rc = cmd_du(nargs, args);
    else if (!strcmp(cmd, "presign"))
        rc = cmd_presign(nargs, args);
    else
        rc = usage_err("unknown command %s (wl --help)", cmd);
    if (opt.stats) {
        wl_stats_t s;
        wl_client_stats(cl, &s);
        fprintf(stderr,
                "{\"requests\":%llu,\"retries\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
                "\"batch_requests\":%llu,\"batch_entries\":%llu,\"single_gets\":%llu,"
                "\"batch_unsupported\":%d}\n",
                (unsigned long long)s.requests, (unsigned long long)s.retries,
                (unsigned long long)s.bytes_in, (unsigned long long)s.bytes_out,
                (unsigned long long)s.batch_requests, (unsigned long long)s.batch_entries,
                (unsigned long long)s.single_gets, s.batch_unsupported);
    }
    fflush(stdout);
    wl_client_free(cl);
    return rc;
}
