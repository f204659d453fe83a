/*
 * cmd_xfer: the `wl` commands that move files: cp (upload, download,
 * server-side copy; -r for trees) and sync (what is missing on the other
 * side, differs in size, or is newer). Files go N at once (xfer.h), each
 * split into parallel parts by libwarmlake; small objects come down in
 * groups through batch GET.
 */
#include "client/cli/cli_int.h"
#include "client/cli/xfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SMALL_MAX   (1u << 20) /* objects up to this size download through batch GET */
#define BATCH_GROUP 256        /* entries per batch GET call */

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
        rc = wl_put_fd(cli__cl, j->bucket, b->key, fd, (uint64_t)st.st_size, cli__opt.content_type,
                       etag);
    close(fd);
    snprintf(what, sizeof(what), "upload %s", b->local);
    if (rc) return cli__fail(what);
    snprintf(what, sizeof(what), "wl://%s/%s", j->bucket, b->key);
    cli__report("upload", b->local, what, (uint64_t)st.st_size, etag);
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
        if (cli__write_all(fd, d->data, d->len) == 0) return 0;
        fprintf(stderr, "wl: %s: %s\n", d->b->local, strerror(errno));
        return 1;
    }
    wl_stat_t st;
    if (wl_get_fd(cli__cl, d->j->bucket, d->b->key, fd, &st) != WL_OK) return cli__fail(what);
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
        cli__report("download", src, b->local, d.len, NULL);
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
        if (wl_get_batch(cli__cl, j->bucket, it, n) < 0) {
            cli__fail("batch get");
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
                    cli__report("download", src, b->local, d.len, NULL);
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
    xfer_meter_start(j->total, !cli__opt.quiet && !cli__opt.json);
    size_t failed = download_small(j);
    failed += xfer_run(j->n, cli__opt.jobs, download_one, j);
    xfer_meter_stop();
    return failed ? 1 : 0;
}

static int run_uploads(jobs_t *j)
{
    xfer_meter_start(j->total, !cli__opt.quiet && !cli__opt.json);
    size_t failed = xfer_run(j->n, cli__opt.jobs, upload_one, j);
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
            if (cli__join_key(prefix, r, key, sizeof(key)) != 0) {
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
    if (cli__list_all(rp->bucket, rp->key, &es)) return 1;
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
    cli__ents_free(&es);
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
    else if (cli__join_key(x->dst->key, rel, dkey, sizeof(dkey)) != 0)
        return 1;
    snprintf(what, sizeof(what), "copy wl://%s/%s", x->src->bucket, key);
    if (wl_copy(cli__cl, x->src->bucket, key, x->dst->bucket, dkey, etag) != WL_OK)
        return cli__fail(what);
    char src[1400], dst[2400];
    snprintf(src, sizeof(src), "wl://%s/%s", x->src->bucket, key);
    snprintf(dst, sizeof(dst), "wl://%s/%s", x->dst->bucket, dkey);
    cli__report("copy", src, dst, x->es->v[i].size, etag);
    return 0;
}

/* wl:// to wl://: server-side copies, a key or (-r) every key under a prefix. */
static int copy_remote(const rpath_t *src, const rpath_t *dst)
{
    ents_t es = {0};
    rpath_t d = *dst;
    if (cli__opt.recursive) {
        if (cli__list_all(src->bucket, src->key, &es)) return 1;
    } else {
        if (!src->key[0]) return cli__usage_err("cp: want wl://BUCKET/KEY (or -r)");
        size_t dl = strlen(d.key);
        es.v = calloc(1, sizeof(ent_t));
        es.n = es.cap = 1;
        es.v[0].key = strdup(src->key);
        if (!es.v[0].key) return cli__usage_err("out of memory");
        /* Into a "directory": the source's base name under it. */
        rpath_t s = *src;
        snprintf(s.key, sizeof(s.key), "%.*s", (int)(cli__base_name(src->key) - src->key),
                 src->key);
        if (dl && d.key[dl - 1] != '/') {
            /* A named target: copy_one joins the empty remainder to it. */
            snprintf(s.key, sizeof(s.key), "%s", src->key);
        }
        cp_t x = {&s, &d, &es};
        size_t failed = xfer_run(1, 1, copy_one, &x);
        cli__ents_free(&es);
        return failed ? 1 : 0;
    }
    cp_t x = {src, &d, &es};
    size_t failed = xfer_run(es.n, cli__opt.jobs * 4, copy_one, &x);
    cli__ents_free(&es);
    return failed ? 1 : 0;
}

int cli__cmd_cp(int argc, char **argv)
{
    if (argc != 2) return cli__usage_err("cp: want SRC DST");
    rpath_t rs, rd;
    int sr = cli__remote(argv[0], &rs), dr = cli__remote(argv[1], &rd);
    jobs_t j = {0};
    int rc;
    if (sr && dr) return copy_remote(&rs, &rd);
    if (!sr && !dr) return cli__usage_err("cp: one side must be a wl:// path");
    if (!sr) {
        j.bucket = rd.bucket;
        if (cli__opt.recursive) {
            if (!is_dir(argv[0])) return cli__usage_err("cp -r: %s is not a directory", argv[0]);
            rc = walk(argv[0], "", rd.key, &j);
        } else {
            struct stat st;
            if (stat(argv[0], &st) != 0 || !S_ISREG(st.st_mode))
                return cli__usage_err("cp: %s is not a file (directories need -r)", argv[0]);
            char key[2048];
            size_t kl = strlen(rd.key);
            if (!kl || rd.key[kl - 1] == '/') {
                if (cli__join_key(rd.key, cli__base_name(argv[0]), key, sizeof(key)) != 0) return 1;
            } else
                snprintf(key, sizeof(key), "%s", rd.key);
            jobs_add(&j, argv[0], key, (uint64_t)st.st_size);
            rc = 0;
        }
        rc |= run_uploads(&j);
    } else {
        j.bucket = rs.bucket;
        if (cli__opt.recursive) {
            rc = remote_jobs(&rs, argv[1], &j);
        } else {
            if (!rs.key[0]) return cli__usage_err("cp: want wl://BUCKET/KEY");
            wl_stat_t st;
            if (wl_stat(cli__cl, rs.bucket, rs.key, &st) != WL_OK) return cli__fail(argv[0]);
            char path[PATH_MAX * 2];
            size_t dl = strlen(argv[1]);
            if (is_dir(argv[1]) || (dl && argv[1][dl - 1] == '/'))
                snprintf(path, sizeof(path), "%s/%s", argv[1], cli__base_name(rs.key));
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
int cli__cmd_sync(int argc, char **argv)
{
    if (argc != 2) return cli__usage_err("sync: want SRC DST");
    rpath_t rs, rd;
    int sr = cli__remote(argv[0], &rs), dr = cli__remote(argv[1], &rd);
    if (sr == dr) return cli__usage_err("sync: one side local, the other wl://");
    jobs_t all = {0}, todo = {0};
    ents_t es;
    int rc = 0;
    if (!sr) {
        if (!is_dir(argv[0])) return cli__usage_err("sync: %s is not a directory", argv[0]);
        rc = walk(argv[0], "", rd.key, &all);
        if (cli__list_all(rd.bucket, rd.key, &es)) return 1;
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
        if (cli__list_all(rs.bucket, rs.key, &es)) return 1;
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
    cli__ents_free(&es);
    jobs_free(&all);
    jobs_free(&todo);
    return rc;
}
