/*
 * drive_io.c: the engine's system calls on segment files and its aligned
 * reads (map in drive_int.h).
 *
 * Every pwritev, pread, preadv, fdatasync and fallocate on a segment file goes
 * through the drive_io table, which tests replace to inject faults and power
 * cuts. Reads are O_DIRECT: whole DIO_ALIGN units, into a bounce buffer from
 * the drive's pool, or straight into the caller's aligned buffer with only
 * the unaligned head and tail bounced (drive__pread_around); the latter in
 * two halves for a caller that does the I/O itself (drive__around_plan and
 * drive__around_rest: drive_read_begin's io_uring reads).
 */
#include "storage/drive_int.h"

#include "common/err.h"
#include "common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static ssize_t sys_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return pwritev(fd, iov, cnt, off);
}
static ssize_t sys_pread(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off);
}
static ssize_t sys_preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return preadv(fd, iov, cnt, off);
}
static int sys_fdatasync(int fd)
{
    return fdatasync(fd);
}
static int sys_fallocate(int fd, int mode, off_t off, off_t len)
{
    return fallocate(fd, mode, off, len);
}

drive_io_t drive_io = {sys_pwritev, sys_pread, sys_preadv, sys_fdatasync, sys_fallocate};

ssize_t drive__pwrite(int fd, const void *buf, size_t n, off_t off)
{
    struct iovec iov = {(void *)buf, n};
    return drive_io.pwritev(fd, &iov, 1, off);
}

static uint8_t *bounce_get(drive_t *d, size_t len)
{
    return bufpool_get(d->bounce, len);
}

void drive__bounce_put(drive_t *d, uint8_t *buf)
{
    bufpool_put(d->bounce, buf);
}

int drive__pread_aligned(drive_t *d, int fd, uint64_t start, uint64_t end, uint8_t **buf,
                         uint8_t **at)
{
    uint64_t a = align_down(start, DIO_ALIGN), b = align_up(end, DIO_ALIGN);
    uint8_t *p = bounce_get(d, b - a);
    uint64_t done = 0;

    while (done < b - a) {
        ssize_t n = drive_io.pread(fd, p + done, b - a - done, (off_t)(a + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            drive__bounce_put(d, p);
            return n < 0 ? ERR_IO : ERR_CORRUPT; /* short file: the extent is not there */
        }
        done += (uint64_t)n;
    }
    *buf = p;
    *at = p + (start - a);
    return 0;
}

void drive__around_plan(drive_t *d, uint64_t start, uint64_t end, uint8_t *dst, uint64_t dst_off,
                        size_t dst_len, drive_around_t *a)
{
    uint64_t lo = align_down(start, DIO_ALIGN), hi = align_up(end, DIO_ALIGN);
    size_t hsz = (size_t)(dst_off - lo), tsz = (size_t)(hi - (dst_off + dst_len));
    uint8_t *p = bounce_get(d, hsz + tsz);
    a->cnt = 0;
    if (hsz) a->iov[a->cnt++] = (struct iovec){p, hsz};
    a->iov[a->cnt++] = (struct iovec){dst, dst_len};
    if (tsz) a->iov[a->cnt++] = (struct iovec){p + hsz, tsz};
    a->pos = lo;
    a->len = (size_t)(hi - lo);
    a->buf = p;
    a->head = p + (start - lo);
    a->rest = p + hsz;
}

/* Move iov[*first..cnt) past n bytes read (whole iovecs dropped, a partial one shortened). */
static void iov_advance(struct iovec *iov, int *first, int cnt, size_t n)
{
    while (n > 0 && *first < cnt) {
        struct iovec *v = &iov[*first];
        if (n >= v->iov_len) {
            n -= v->iov_len;
            (*first)++;
        } else {
            v->iov_base = (uint8_t *)v->iov_base + n;
            v->iov_len -= n;
            n = 0;
        }
    }
}

int drive__around_rest(int fd, drive_around_t *a, size_t done)
{
    struct iovec iov[3];
    int first = 0, cnt = a->cnt;
    memcpy(iov, a->iov, sizeof(iov));
    uint64_t pos = a->pos + done;
    iov_advance(iov, &first, cnt, done); /* what was read already */
    while (first < cnt) {
        ssize_t n = drive_io.preadv(fd, iov + first, cnt - first, (off_t)pos);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? ERR_IO : ERR_CORRUPT; /* short file: the extent is not there */
        pos += (uint64_t)n;
        iov_advance(iov, &first, cnt, (size_t)n);
    }
    return 0;
}

int drive__pread_around(drive_t *d, int fd, uint64_t start, uint64_t end, uint8_t *dst,
                        uint64_t dst_off, size_t dst_len, uint8_t **buf, uint8_t **head,
                        uint8_t **rest)
{
    drive_around_t a;
    drive__around_plan(d, start, end, dst, dst_off, dst_len, &a);
    int rc = drive__around_rest(fd, &a, 0);
    if (rc) {
        drive__bounce_put(d, a.buf);
        return rc;
    }
    *buf = a.buf;
    *head = a.head;
    *rest = a.rest;
    return 0;
}

int drive__io_hooked(void)
{
    return drive_io.preadv != sys_preadv;
}
