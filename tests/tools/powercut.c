/*
 * powercut: an LD_PRELOAD shim that gives a whole node the disk a power cut
 * sees. Writes (pwrite, pwritev) to files whose path contains WL_POWERCUT are held in
 * the process's own memory, per file, and put in the file only when the file
 * is flushed (fdatasync or fsync), oldest first, as a disk with a volatile
 * cache would. Reads (pread, preadv) see the held writes over the file. A
 * SIGKILL of the node then loses every write no flush covered, which kill -9
 * alone never does (the page cache keeps them).
 *
 * The kernel's writeback ahead of a flush is modelled as well: about one write
 * in four goes to the file at once after the file's older held writes, either
 * whole or a first part of whole 4 KiB pages (a torn write); WL_POWERCUT_SEED
 * seeds the choice.
 *
 *   WL_POWERCUT=PATH_PART   e.g. "/segments/": the drives' segment files
 *
 * io_uring is refused (io_uring_queue_init), so the node reads through preadv.
 * RocksDB's files are left alone: the index is rebuilt from the segments, and
 * RocksDB's own durability is RocksDB's. Directory entries are not modelled
 * (a file created is there). Only what tests need; not for production builds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

typedef struct held {
    dev_t dev;
    ino_t ino;
    off_t off;
    size_t len;
    uint8_t *data;
    struct held *next;
} held_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static held_t *head;
static uint64_t rng;
static const char *part;
static int loaded;

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void load(void)
{
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&mu);
    if (!loaded) {
        real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
        real_pwritev =
            (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
        real_pread = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
        real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
        real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
        part = getenv("WL_POWERCUT");
        if (part && !part[0]) part = NULL;
        const char *seed = getenv("WL_POWERCUT_SEED");
        rng = seed ? strtoull(seed, NULL, 10) : 1;
        __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mu);
}

/* 1 when fd is a file this shim holds writes for; its identity in *dev, *ino. */
static int held_file(int fd, dev_t *dev, ino_t *ino)
{
    load();
    if (!part || fd < 0) return 0;
    char link[64], path[1024];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    if (!strstr(path, part)) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 1;
}

/* The file's held writes into it, oldest first (mu held). */
static int put_held(int fd, dev_t dev, ino_t ino)
{
    for (held_t **pp = &head, *h; (h = *pp);) {
        if (h->dev != dev || h->ino != ino) {
            pp = &h->next;
            continue;
        }
        if (real_pwrite(fd, h->data, h->len, h->off) != (ssize_t)h->len) return -1;
        *pp = h->next;
        free(h->data);
        free(h);
    }
    return 0;
}

static ssize_t do_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    dev_t dev;
    ino_t ino;
    if (!held_file(fd, &dev, &ino)) return real_pwrite(fd, buf, n, off);
    pthread_mutex_lock(&mu);
    rng = mix(rng);
    size_t now = 0;
    if (rng % 4 == 0) now = (rng >> 8) % 2 ? n : (size_t)((rng >> 16) % (n / 4096 + 1)) * 4096;
    ssize_t rc = (ssize_t)n;
    if (now && (put_held(fd, dev, ino) != 0 || real_pwrite(fd, buf, now, off) != (ssize_t)now))
        rc = -1;
    if (rc >= 0 && now < n) {
        held_t *h = calloc(1, sizeof(*h)), **tail = &head;
        /* Aligned: O_DIRECT files take the copy as they took the original. */
        if (!h || posix_memalign((void **)&h->data, 4096, n - now) != 0) abort();
        h->dev = dev;
        h->ino = ino;
        h->off = off + (off_t)now;
        h->len = n - now;
        memcpy(h->data, (const uint8_t *)buf + now, h->len);
        while (*tail)
            tail = &(*tail)->next;
        *tail = h;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return do_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    return do_pwrite(fd, buf, n, off);
}

/* A drive's commit (pieces of its buffer and of callers' payloads): held as one write. */
static ssize_t do_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    dev_t dev;
    ino_t ino;
    if (!held_file(fd, &dev, &ino)) return real_pwritev(fd, iov, cnt, off);
    size_t n = 0, at = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, n ? n : 1) != 0) abort();
    for (int i = 0; i < cnt; i++) {
        memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    ssize_t rc = do_pwrite(fd, buf, n, off);
    free(buf);
    return rc;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_pwritev(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_pwritev(fd, iov, cnt, off);
}

static ssize_t do_pread(int fd, void *buf, size_t n, off_t off)
{
    dev_t dev;
    ino_t ino;
    if (!held_file(fd, &dev, &ino)) return real_pread(fd, buf, n, off);
    pthread_mutex_lock(&mu);
    ssize_t r = real_pread(fd, buf, n, off);
    for (held_t *h = r > 0 ? head : NULL; h; h = h->next) {
        if (h->dev != dev || h->ino != ino) continue;
        off_t a = h->off > off ? h->off : off;
        off_t e = off + (off_t)r, he = h->off + (off_t)h->len;
        off_t b = he < e ? he : e;
        if (a < b) memcpy((uint8_t *)buf + (a - off), h->data + (a - h->off), (size_t)(b - a));
    }
    pthread_mutex_unlock(&mu);
    return r;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    return do_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    return do_pread(fd, buf, n, off);
}

static ssize_t do_preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    ssize_t total = 0;
    for (int i = 0; i < cnt; i++) {
        ssize_t r = do_pread(fd, iov[i].iov_base, iov[i].iov_len, off + total);
        if (r < 0) return total ? total : r;
        total += r;
        if ((size_t)r < iov[i].iov_len) break;
    }
    return total;
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_preadv(fd, iov, cnt, off);
}

ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_preadv(fd, iov, cnt, off);
}

/*
 * Reads through an io_uring would pass the held writes by (the kernel reads the file): the
 * node is told it has none, and reads through preadv above (common/uring.c's fallback).
 */
struct io_uring;
struct io_uring_params;
int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
    (void)entries;
    (void)ring;
    (void)flags;
    return -ENOSYS;
}

int io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
    (void)entries;
    (void)ring;
    (void)p;
    return -ENOSYS;
}

static int flush(int fd, int (*real)(int))
{
    dev_t dev;
    ino_t ino;
    if (held_file(fd, &dev, &ino)) {
        pthread_mutex_lock(&mu);
        int rc = put_held(fd, dev, ino);
        pthread_mutex_unlock(&mu);
        if (rc) {
            errno = EIO;
            return -1;
        }
    }
    return real(fd);
}

int fdatasync(int fd)
{
    load();
    return flush(fd, real_fdatasync);
}

int fsync(int fd)
{
    load();
    return flush(fd, real_fsync);
}
