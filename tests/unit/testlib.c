#define _XOPEN_SOURCE_EXTRA
#include "testlib.h"

#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void tl_rm_rf(const char *path)
{
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

char *tl_tmpdir(const char *name)
{
    const char *base = getenv("WL_TEST_DIR") ? getenv("WL_TEST_DIR") : "/tmp";
    char *p = malloc(strlen(base) + strlen(name) + 32);
    sprintf(p, "%s/wl-%s-XXXXXX", base, name);
    assert_non_null(mkdtemp(p));
    return p;
}

uint64_t tl_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

void tl_fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = tl_mix(seed + 1);
    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0) s = tl_mix(s + i);
        p[i] = (uint8_t)(s >> (8 * (i % 8)));
    }
}

static char cap_path[64];
static int cap_saved = -1;

void tl_cap_start(const char *name)
{
    fflush(stderr);
    snprintf(cap_path, sizeof(cap_path), "/tmp/wl-%.20s-log-XXXXXX", name);
    int fd = mkstemp(cap_path);
    assert_true(fd >= 0);
    cap_saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

char *tl_cap_stop(int echo)
{
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    FILE *f = fopen(cap_path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(cap_path);
    if (echo) fputs(buf, stderr);
    return buf;
}

/* The cnt pieces of a pwritev in one buffer (4096-aligned, malloc'd); *n their bytes. */
static uint8_t *iov_join(const struct iovec *iov, int cnt, size_t *n)
{
    size_t len = 0;
    for (int i = 0; i < cnt; i++)
        len += iov[i].iov_len;
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, len ? len : 1) != 0) abort();
    size_t at = 0;
    for (int i = 0; i < cnt; i++) {
        memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    *n = len;
    return buf;
}

ssize_t tl_pwritev_joined(ssize_t (*pwrite_fn)(int, const void *, size_t, off_t), int fd,
                          const struct iovec *iov, int cnt, off_t off)
{
    size_t n;
    uint8_t *buf = iov_join(iov, cnt, &n);
    ssize_t r = pwrite_fn(fd, buf, n, off);
    free(buf);
    return r;
}

ssize_t tl_pwrite_via(ssize_t (*pwritev)(int, const struct iovec *, int, off_t), int fd,
                      const void *buf, size_t n, off_t off)
{
    struct iovec iov = {(void *)buf, n};
    return pwritev(fd, &iov, 1, off);
}

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int armed, held, open;
    int (*real)(int);
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, NULL};

void tl_gate_arm(int (*real_fdatasync)(int))
{
    pthread_mutex_lock(&gate.mu);
    gate.real = real_fdatasync;
    gate.armed = 1;
    gate.held = gate.open = 0;
    pthread_mutex_unlock(&gate.mu);
}

int tl_gated_fdatasync(int fd)
{
    pthread_mutex_lock(&gate.mu);
    if (gate.armed) {
        gate.armed = 0;
        gate.held = 1;
        pthread_cond_broadcast(&gate.cv);
        while (!gate.open)
            pthread_cond_wait(&gate.cv, &gate.mu);
    }
    int (*real)(int) = gate.real;
    pthread_mutex_unlock(&gate.mu);
    if (!real) abort(); /* hooked before tl_gate_arm named the real one */
    return real(fd);
}

void tl_gate_wait_held(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    int rc = 0;
    pthread_mutex_lock(&gate.mu);
    while (!gate.held && rc == 0)
        rc = pthread_cond_timedwait(&gate.cv, &gate.mu, &ts);
    int held = gate.held;
    pthread_mutex_unlock(&gate.mu);
    if (!held) fail_msg("no flush reached the gate");
}

void tl_gate_open(void)
{
    pthread_mutex_lock(&gate.mu);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
}
