/*
 * util: what the `wl` commands share: output (JSON strings, one-line
 * errors with the server's code and request id, transfer lines), wl://
 * paths, and full listings (all pages).
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

/* ---- output ---- */

void cli__json_str(FILE *f, const char *s)
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

pthread_mutex_t cli__out_mu = PTHREAD_MUTEX_INITIALIZER;

/* A failed library call: one line on stderr with what the server said. */
int cli__fail(const char *what)
{
    const wl_error_t *e = wl_last_error();
    pthread_mutex_lock(&cli__out_mu);
    fprintf(stderr, "wl: %s: %s", what, e->message[0] ? e->message : wl_strerror(e->code));
    if (e->request_id[0]) fprintf(stderr, " (request id %s)", e->request_id);
    fputc('\n', stderr);
    pthread_mutex_unlock(&cli__out_mu);
    return 1;
}

int cli__usage_err(const char *fmt, ...)
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

/* "wl://bucket/key" (or s3://): 1 with rp filled, 0 for a local path. */
int cli__remote(const char *s, rpath_t *rp)
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

const char *cli__base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* key under prefix: "" -> rel, "p/" -> "p/rel", "p" -> "p/rel". -1 when it does not fit. */
int cli__join_key(const char *prefix, const char *rel, char *out, size_t cap)
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

/* ---- listings ---- */

void cli__ents_free(ents_t *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].key);
    free(e->v);
    memset(e, 0, sizeof(*e));
}

/* Every key under prefix (all pages). 0 or 1 (reported). */
int cli__list_all(const char *bucket, const char *prefix, ents_t *out)
{
    char *token = NULL;
    memset(out, 0, sizeof(*out));
    for (;;) {
        wl_list_t *l;
        if (wl_list(cli__cl, bucket, prefix, NULL, token, 1000, &l) != WL_OK) {
            free(token);
            return cli__fail("list");
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

int cli__write_all(int fd, const void *p, size_t n)
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

void cli__report(const char *op, const char *src, const char *dst, uint64_t size, const char *etag)
{
    if (cli__opt.quiet) return;
    pthread_mutex_lock(&cli__out_mu);
    if (cli__opt.json) {
        printf("{\"op\":\"%s\",\"src\":", op);
        cli__json_str(stdout, src);
        printf(",\"dst\":");
        cli__json_str(stdout, dst);
        printf(",\"size\":%llu,\"etag\":", (unsigned long long)size);
        cli__json_str(stdout, etag ? etag : "");
        printf("}\n");
    } else if (dst[0]) {
        printf("%s: %s -> %s\n", op, src, dst);
    } else {
        printf("%s: %s\n", op, src);
    }
    fflush(stdout);
    pthread_mutex_unlock(&cli__out_mu);
}
