/*
 * faultfs: an LD_PRELOAD shim that makes chosen pwrite(v) / fdatasync calls of
 * a real process fail, so integration tests can watch a whole node (and its
 * clients) go through a drive's I/O errors.
 *
 *   WL_FAULT="RULE[,RULE...]"   RULE = OP:PATH_PART:AFTER:WHAT
 *     OP         pwrite (pwritev too), write or fdatasync
 *     PATH_PART  the call's file path (from /proc/self/fd) must contain it
 *     AFTER      that many matching calls succeed first; every later one fails
 *     WHAT       EIO, ENOSPC (the call fails with that errno) or short
 *                (pwrite only: half the bytes are written and reported)
 *
 * Only what tests need; not for production builds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_RULES 8

typedef struct {
    char op[16], part[128], what[16];
    long after, seen;
} rule_t;

static rule_t rules[MAX_RULES];
static int nrules = -1;

static void load(void)
{
    const char *env = getenv("WL_FAULT");
    nrules = 0;
    if (!env) return;
    char *copy = strdup(env), *save = NULL;
    for (char *r = strtok_r(copy, ",", &save); r && nrules < MAX_RULES;
         r = strtok_r(NULL, ",", &save)) {
        rule_t *x = &rules[nrules];
        if (sscanf(r, "%15[^:]:%127[^:]:%ld:%15s", x->op, x->part, &x->after, x->what) == 4)
            nrules++;
    }
    free(copy);
}

/* The rule that makes this call fail, or NULL. */
static rule_t *fault_for(const char *op, int fd)
{
    if (nrules < 0) load();
    if (!nrules) return NULL;
    char link[64], path[512];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    if (n <= 0) return NULL;
    path[n] = 0;
    for (int i = 0; i < nrules; i++) {
        rule_t *x = &rules[i];
        if (strcmp(x->op, op) != 0 || !strstr(path, x->part)) continue;
        if (__atomic_fetch_add(&x->seen, 1, __ATOMIC_SEQ_CST) >= x->after) return x;
    }
    return NULL;
}

static int err_of(const rule_t *x)
{
    return strcmp(x->what, "ENOSPC") == 0 ? ENOSPC : EIO;
}

static ssize_t do_pwrite(const char *sym, int fd, const void *buf, size_t len, off_t off)
{
    ssize_t (*real)(int, const void *, size_t, off_t) =
        (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, sym);
    rule_t *x = fault_for("pwrite", fd);
    if (x && strcmp(x->what, "short") == 0 && len > 1) return real(fd, buf, len / 2, off);
    if (x) {
        errno = err_of(x);
        return -1;
    }
    return real(fd, buf, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    return do_pwrite("pwrite", fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    return do_pwrite("pwrite64", fd, buf, len, off);
}

/* A drive's commit is a pwritev of pieces: the "pwrite" rules apply to it as one write. */
static ssize_t do_pwritev(const char *sym, int fd, const struct iovec *iov, int cnt, off_t off)
{
    ssize_t (*real)(int, const struct iovec *, int, off_t) =
        (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, sym);
    rule_t *x = fault_for("pwrite", fd);
    if (x && strcmp(x->what, "short") == 0) {
        size_t len = 0;
        for (int i = 0; i < cnt; i++)
            len += iov[i].iov_len;
        /* The first half of the bytes (whole 4 KiB blocks, as a device takes them under
         * O_DIRECT): whole pieces, then part of one. */
        struct iovec half[cnt > 0 ? cnt : 1];
        size_t want = len / 2 / 4096 * 4096;
        int n = 0;
        for (int i = 0; i < cnt && want; i++, n++) {
            half[n] = iov[i];
            if (half[n].iov_len > want) half[n].iov_len = want;
            want -= half[n].iov_len;
        }
        if (n) return real(fd, half, n, off);
    }
    if (x) {
        errno = err_of(x);
        return -1;
    }
    return real(fd, iov, cnt, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_pwritev("pwritev", fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_pwritev("pwritev64", fd, iov, cnt, off);
}

/* (write: what RocksDB's MANIFEST, OPTIONS and LOG files are written with.) */
ssize_t write(int fd, const void *buf, size_t len)
{
    ssize_t (*real)(int, const void *, size_t) =
        (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    rule_t *x = fd > 2 ? fault_for("write", fd) : NULL;
    if (x) {
        errno = err_of(x);
        return -1;
    }
    return real(fd, buf, len);
}

int fdatasync(int fd)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    rule_t *x = fault_for("fdatasync", fd);
    if (x) {
        errno = err_of(x);
        return -1;
    }
    return real(fd);
}
