/*
 * cmd_obj: the `wl` commands on objects and buckets that move no files:
 * ls, stat, cat (sequential output from ranged parts read ahead), rm, mb,
 * rb, du, presign.
 */
#include "client/cli/cli_int.h"
#include "client/cli/xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void print_obj(const char *key, uint64_t size, const char *date, const char *etag)
{
    if (cli__opt.json) {
        printf("{\"key\":");
        cli__json_str(stdout, key);
        printf(",\"size\":%llu,\"last_modified\":", (unsigned long long)size);
        cli__json_str(stdout, date);
        printf(",\"etag\":");
        cli__json_str(stdout, etag);
        printf("}\n");
    } else {
        char d[32];
        snprintf(d, sizeof(d), "%.19s", date);
        if (d[10] == 'T') d[10] = ' ';
        printf("%-19s %12llu %s\n", d, (unsigned long long)size, key);
    }
}

int cli__cmd_ls(int argc, char **argv)
{
    if (argc == 0) {
        wl_list_t *l;
        if (wl_list_buckets(cli__cl, &l) != WL_OK) return cli__fail("list buckets");
        for (size_t i = 0; i < l->n_objects; i++) {
            if (cli__opt.json) {
                printf("{\"bucket\":");
                cli__json_str(stdout, l->objects[i].key);
                printf(",\"created\":");
                cli__json_str(stdout, l->objects[i].last_modified);
                printf("}\n");
            } else {
                printf("%.19s wl://%s\n", l->objects[i].last_modified, l->objects[i].key);
            }
        }
        wl_list_free(l);
        return 0;
    }
    rpath_t rp;
    if (!cli__remote(argv[0], &rp)) return cli__usage_err("ls: want wl://BUCKET[/PREFIX]");
    char *token = NULL;
    for (;;) {
        wl_list_t *l;
        if (wl_list(cli__cl, rp.bucket, rp.key, cli__opt.recursive ? NULL : "/", token, 1000, &l) !=
            WL_OK) {
            free(token);
            return cli__fail("list");
        }
        for (size_t i = 0; i < l->n_prefixes; i++) {
            if (cli__opt.json) {
                printf("{\"prefix\":");
                cli__json_str(stdout, l->prefixes[i]);
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

int cli__cmd_stat(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !cli__remote(argv[0], &rp) || !rp.key[0])
        return cli__usage_err("stat: want wl://BUCKET/KEY");
    wl_stat_t st;
    if (wl_stat(cli__cl, rp.bucket, rp.key, &st) != WL_OK) return cli__fail(argv[0]);
    if (cli__opt.json) {
        printf("{\"key\":");
        cli__json_str(stdout, rp.key);
        printf(",\"size\":%llu,\"etag\":", (unsigned long long)st.size);
        cli__json_str(stdout, st.etag);
        printf(",\"last_modified\":");
        cli__json_str(stdout, st.last_modified);
        printf(",\"content_type\":");
        cli__json_str(stdout, st.content_type);
        printf("}\n");
    } else {
        printf("key:           %s\nsize:          %llu\netag:          %s\n"
               "last_modified: %s\ncontent_type:  %s\n",
               rp.key, (unsigned long long)st.size, st.etag, st.last_modified, st.content_type);
    }
    return 0;
}

/* Sequential output from parallel ranged GETs: the prefetch queue keeps parts in flight. */
int cli__cmd_cat(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !cli__remote(argv[0], &rp) || !rp.key[0])
        return cli__usage_err("cat: want wl://BUCKET/KEY");
    wl_stat_t st;
    if (wl_stat(cli__cl, rp.bucket, rp.key, &st) != WL_OK) return cli__fail(argv[0]);
    uint64_t part = cli__opt.part_size ? cli__opt.part_size : 8u << 20;
    wl_prefetch_t *pf;
    if (wl_prefetch_new(cli__cl, rp.bucket, 4, (size_t)(6 * part), &pf) != WL_OK)
        return cli__fail("cat");
    uint64_t pushed = 0, written = 0;
    int rc = 0;
    while (written < st.size && rc == 0) {
        while (pushed < st.size && pushed < written + 4 * part) {
            uint64_t n = st.size - pushed < part ? st.size - pushed : part;
            /* If-Match: every part from the version stat saw, never a mix. */
            if (wl_prefetch_push_if(pf, rp.key, pushed, n, st.etag, NULL) != WL_OK) {
                rc = cli__fail("cat");
                break;
            }
            pushed += n;
        }
        if (rc) break;
        void *data;
        size_t len;
        if (wl_prefetch_next(pf, &data, &len, NULL) != WL_OK) {
            rc = cli__fail(argv[0]);
            break;
        }
        if (len == 0 || cli__write_all(1, data, len) != 0) {
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

typedef struct {
    const char *bucket;
    ents_t *es;
} rm_t;

static int rm_one(void *arg, size_t i)
{
    rm_t *r = arg;
    char what[1400];
    snprintf(what, sizeof(what), "rm wl://%s/%s", r->bucket, r->es->v[i].key);
    if (wl_delete(cli__cl, r->bucket, r->es->v[i].key) != WL_OK) return cli__fail(what);
    cli__report("delete", what + 3, "", r->es->v[i].size, NULL);
    return 0;
}

int cli__rm_prefix(const char *bucket, const char *prefix)
{
    ents_t es;
    if (cli__list_all(bucket, prefix, &es)) return 1;
    rm_t r = {bucket, &es};
    size_t failed = xfer_run(es.n, cli__opt.jobs * 4, rm_one, &r);
    cli__ents_free(&es);
    return failed ? 1 : 0;
}

int cli__cmd_rm(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !cli__remote(argv[0], &rp)) return cli__usage_err("rm: want wl://BUCKET/KEY");
    if (cli__opt.recursive) return cli__rm_prefix(rp.bucket, rp.key);
    if (!rp.key[0]) return cli__usage_err("rm: want a key (or -r for a prefix)");
    if (wl_delete(cli__cl, rp.bucket, rp.key) != WL_OK) return cli__fail(argv[0]);
    cli__report("delete", argv[0], "", 0, NULL);
    return 0;
}

int cli__cmd_mb(int argc, char **argv, int make)
{
    rpath_t rp;
    if (argc != 1 || !cli__remote(argv[0], &rp) || rp.key[0])
        return cli__usage_err("%s: want wl://BUCKET", make ? "mb" : "rb");
    if (make) return wl_bucket_create(cli__cl, rp.bucket) != WL_OK ? cli__fail(argv[0]) : 0;
    if (cli__opt.force && cli__rm_prefix(rp.bucket, "")) return 1;
    return wl_bucket_delete(cli__cl, rp.bucket) != WL_OK ? cli__fail(argv[0]) : 0;
}

int cli__cmd_du(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !cli__remote(argv[0], &rp))
        return cli__usage_err("du: want wl://BUCKET[/PREFIX]");
    ents_t es;
    if (cli__list_all(rp.bucket, rp.key, &es)) return 1;
    uint64_t bytes = 0;
    for (size_t i = 0; i < es.n; i++)
        bytes += es.v[i].size;
    if (cli__opt.json)
        printf("{\"bytes\":%llu,\"objects\":%zu}\n", (unsigned long long)bytes, es.n);
    else
        printf("%llu\t%zu\t%s\n", (unsigned long long)bytes, es.n, argv[0]);
    cli__ents_free(&es);
    return 0;
}

int cli__cmd_presign(int argc, char **argv)
{
    rpath_t rp;
    if (argc != 1 || !cli__remote(argv[0], &rp) || !rp.key[0])
        return cli__usage_err("presign: want wl://BUCKET/KEY");
    char url[8192];
    if (wl_presign(cli__cl, cli__opt.method, rp.bucket, rp.key, cli__opt.expires, url,
                   sizeof(url)) != WL_OK)
        return cli__fail(argv[0]);
    if (cli__opt.json) {
        printf("{\"url\":");
        cli__json_str(stdout, url);
        printf("}\n");
    } else {
        printf("%s\n", url);
    }
    return 0;
}
