/*
 * drive_seg.c: segment files.
 *
 * A segment is a file of exactly segment_size bytes, preallocated with
 * fallocate so appends never change its size (fdatasync then has no size to
 * journal) and a full filesystem is found when the segment is created, not
 * in the middle of an append. Its first IU is a superblock naming it; records
 * follow. Segment ids only grow, so a file name is never reused.
 *
 * Readers take a reference on a segment for the duration of one pread, so a
 * segment released by compaction stays readable (its fd open, the file
 * unlinked) until the last reader is done.
 *
 * The pool. On ext4 and XFS a preallocated extent is "unwritten" until
 * written, and the fdatasync after the first write into it must also commit
 * the extent's conversion to the filesystem journal: measured here, durable
 * 256 KiB appends ran at 153 MB/s into a fallocated file and 295 MB/s into
 * one written before. So a released segment's file is kept (renamed
 * "<id>.<clear>.free", up to segment_pool of them) and the next user segment is
 * written into it: its superblock (version 2) says first_seq, the drive's
 * next sequence number when it was taken, and every record below that is
 * the file's earlier life, which scans skip (drive__scan) and nothing
 * indexes. Sequence numbers only grow, and a user segment's records get
 * theirs from its writer after the segment was taken, so the rule is exact.
 * Compaction's segments keep their records' sequence numbers, older than
 * any first_seq, so they are always fresh files. The superblock is written
 * and made durable while the file still has its pool name, and only then
 * renamed: a crash leaves a pool file or a whole segment, never a segment
 * whose superblock is torn over old records. What the pool costs: the
 * freed space is not given back (no discard) while a file waits, at most
 * segment_pool segments a drive, and it counts as used when compaction
 * needs a fresh file (the pool gives one back first).
 *
 * The spare. The file system can be full before the drive's slots are (the
 * index beside the segments, a capacity set above the device's, other files
 * on it); then no write could make a segment, not even a delete's tombstone
 * or compaction's copy, and a full drive never got its space back (a fill
 * probe: after a restart at full disk most DELETEs failed and compaction
 * failed NOSPC for good). So one segment's worth of space is held in
 * segments/spare, a plain file nothing reads: what frees space (compaction's
 * segment, and one a tombstone starts) gives it back when the file system
 * says no, and a plain user segment is not made while the spare cannot be
 * made again first. Not metadata-only records: a gateway's heads are such,
 * a new object's as well as a delete's, and a fill took the spare with the
 * heads of its last PUTs. It costs one segment of file-system space a
 * drive; where fallocate is not supported there is none.
 */
#include "storage/drive_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <unistd.h>

char *drive__seg_path(drive_t *d, uint32_t id)
{
    size_t n = strlen(d->seg_dir) + 32;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%08x.seg", d->seg_dir, id);
    return p;
}

int drive__fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    int rc = 0;
    if (fd < 0) return err_from_errno(errno);
    if (fsync(fd) != 0) rc = err_from_errno(errno);
    close(fd);
    return rc;
}

int drive_dio_fits(uint32_t mem_align, uint32_t offset_align)
{
    if (!offset_align) return 1; /* not told: as every file system this runs on */
    return mem_align && mem_align <= DIO_ALIGN && DIO_ALIGN % mem_align == 0 &&
           offset_align <= DIO_ALIGN && DIO_ALIGN % offset_align == 0;
}

/* fd, opened O_DIRECT, takes DIO_ALIGN-aligned I/O (drive_dio_fits); 1 when not told. */
static int dio_fits_fd(int fd)
{
#ifdef STATX_DIOALIGN
    struct statx st;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) == 0 && (st.stx_mask & STATX_DIOALIGN))
        return drive_dio_fits(st.stx_dio_mem_align, st.stx_dio_offset_align);
#else
    (void)fd;
#endif
    return 1;
}

static int open_seg_fd(drive_t *d, const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC | (d->direct ? O_DIRECT : 0), 0644);
    if (fd < 0 && d->direct && errno == EINVAL) {
        /* The filesystem refuses O_DIRECT (tmpfs): buffered I/O + fdatasync. */
        log_warn("event=no_direct_io path=%s", path);
        d->direct = 0;
        fd = open(path, flags | O_CLOEXEC, 0644);
    } else if (fd >= 0 && d->direct && !dio_fits_fd(fd)) {
        /* A device whose logical block is larger than DIO_ALIGN: every direct read and every
         * commit's pieces would be refused (EINVAL). Buffered, as above. */
        log_warn("event=no_direct_io path=%s why=\"direct I/O alignment above %u bytes\"", path,
                 DIO_ALIGN);
        close(fd);
        d->direct = 0;
        fd = open(path, flags | O_CLOEXEC, 0644);
    }
    return fd;
}

/*
 * A pool file's name: "<id>.<clear>.free", clear (16 hex digits) a sequence
 * number above every record the file holds, from any of its lives. The next
 * segment written into it starts at that or above, whatever the drive's own
 * next number says then: after the index is lost and rebuilt from the
 * segments, that comes from the records of the segments alone, and the
 * newest records may have been in this file.
 */
static char *free_path(drive_t *d, uint32_t id, uint64_t clear)
{
    size_t n = strlen(d->seg_dir) + 48;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%08x.%016llx.free", d->seg_dir, id, (unsigned long long)clear);
    return p;
}

int drive__pool_name(const char *name, uint32_t *id, uint64_t *clear)
{
    /* Exactly "<8 hex>.<16 hex>.free", lowercase: what free_path writes, nothing else. */
    if (strlen(name) != 30 || strspn(name, "0123456789abcdef") != 8 || name[8] != '.' ||
        strspn(name + 9, "0123456789abcdef") != 16 || strcmp(name + 25, ".free") != 0)
        return 0;
    *id = (uint32_t)strtoul(name, NULL, 16);
    *clear = strtoull(name + 9, NULL, 16);
    return 1;
}

static uint64_t clear_of(const char *path)
{
    const char *base = strrchr(path, '/');
    uint32_t id;
    uint64_t clear = 0;
    return drive__pool_name(base ? base + 1 : path, &id, &clear) ? clear : UINT64_MAX;
}

void drive__seg_retire(drive_t *d, seg_t *s)
{
    char *path = drive__seg_path(d, s->id), *fp = NULL;
    pthread_mutex_lock(&d->lock);
    int keep = d->pool_files < d->pool_max;
    if (keep) d->pool_files++;
    /*
     * Above every record it holds, from any of its lives: the drive's next number is past
     * every number handed out (its records', relocated ones' too, and its first_seq, which
     * raised it when the file was reused).
     */
    uint64_t clear = __atomic_load_n(&d->next_seq, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&d->lock);
    if (keep) {
        fp = free_path(d, s->id, clear);
        if (rename(path, fp) != 0) {
            log_warn("event=segment_pool_rename_failed path=%s errno=%d", path, errno);
            free(fp);
            fp = NULL;
            pthread_mutex_lock(&d->lock);
            d->pool_files--;
            pthread_mutex_unlock(&d->lock);
        }
    }
    if (!fp && unlink(path) != 0)
        log_error("event=segment_unlink_failed path=%s errno=%d", path, errno);
    s->free_path = fp; /* the pool takes it when its last reader is done */
    free(path);
}

/* Under lock: fp into the pool, or NULL when it has no room (the caller unlinks it). */
static char *pool_put(drive_t *d, char *fp)
{
    if (d->npool >= d->pool_max || d->nsegs + d->creating + d->pool_files > d->slots) return fp;
    d->pool = xrealloc(d->pool, (d->npool + 1) * sizeof(*d->pool));
    d->pool[d->npool++] = fp;
    return NULL;
}

void drive__seg_pool_found(drive_t *d, uint32_t id, uint64_t clear)
{
    char *fp = free_path(d, id, clear);
    pthread_mutex_lock(&d->lock);
    d->pool_files++;
    char *left = pool_put(d, fp);
    if (left) d->pool_files--;
    pthread_mutex_unlock(&d->lock);
    if (left) {
        unlink(left);
        free(left);
    }
}

void drive__seg_pool_free(drive_t *d)
{
    for (uint32_t i = 0; i < d->npool; i++)
        free(d->pool[i]);
    free(d->pool);
    d->pool = NULL;
    d->npool = d->pool_files = 0;
}

/* A segment's seed (rec_encode_header_seeded): random, never 0. */
static int new_seed(uint32_t *seed)
{
    do {
        if (getrandom(seed, sizeof(*seed), 0) != (ssize_t)sizeof(*seed)) return ERR_IO;
    } while (!*seed);
    return 0;
}

/*
 * Write a user segment's superblock into pooled file fp and make it the
 * segment's file (path). 0; ERR_AGAIN when the file will not do (gone,
 * another size: dropped, the caller makes a fresh one); ERR_IO or
 * ERR_NOSPC when the device failed the write or its flush (*what says which:
 * as for a fresh segment, the drive stops writing).
 */
static int reuse_file(drive_t *d, char *fp, const char *path, uint32_t id, uint64_t first_seq,
                      uint32_t seed, int *out_fd, const char **what)
{
    struct stat st;
    uint8_t *sb = NULL;
    int rc = ERR_AGAIN, fd = open_seg_fd(d, fp, O_RDWR), e = 0;
    *what = "open";
    if (fd < 0) goto fail;
    *what = "size";
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != d->seg_size) goto fail;
    sb = xaligned_alloc(DIO_ALIGN, d->iu);
    memset(sb, 0, d->iu);
    codec_sb_encode(sb, &(seg_sb_t){SEG_USER, id, d->iu, d->seg_size, first_seq, seed});
    *what = "superblock_write";
    ssize_t n;
    while ((n = drive__pwrite(fd, sb, d->iu, 0)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)d->iu) {
        e = n < 0 ? errno : 0;
        rc = e == ENOSPC || e == EDQUOT ? ERR_NOSPC : ERR_IO;
        goto fail;
    }
    /* Durable under its pool name first: a crash never leaves a torn superblock on a .seg. */
    *what = "superblock_flush";
    if (drive_io.fdatasync(fd) != 0) {
        e = errno;
        rc = ERR_IO; /* never retried: what the device kept is unknown */
        goto fail;
    }
    *what = "rename";
    if (rename(fp, path) != 0) goto fail;
    *what = "dir_fsync";
    if (drive__fsync_dir(d->seg_dir) != 0) {
        /* Named either way after a crash; as a segment it is whole. Undo: a fresh one. */
        if (rename(path, fp) != 0) unlink(path);
        goto fail;
    }
    free(sb);
    *out_fd = fd;
    return 0;
fail:
    if (!e) e = errno;
    log_warn("event=segment_pool_reuse_failed path=%s op=%s errno=%d err=%s", fp, *what, e,
             err_name(rc));
    if (fd >= 0) close(fd);
    unlink(fp);
    free(sb);
    return rc;
}

static void spare_path(const drive_t *d, char *p, size_t n)
{
    snprintf(p, n, "%s/spare", d->seg_dir);
}

/* 1 when the spare is there (made now if it was not; a file system without fallocate: 1). */
static int spare_ready(drive_t *d)
{
    char p[4200];
    spare_path(d, p, sizeof(p));
    if (access(p, F_OK) == 0) return 1;
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errno == EEXIST; /* (another writer made it meanwhile) */
    int rc = drive_io.fallocate(fd, 0, 0, (off_t)d->seg_size), e = errno;
    close(fd);
    if (rc == 0) return 1;
    unlink(p);
    if (e == EOPNOTSUPP) return 1;
    log_limited(LOG_LVL_WARN,
                "event=segment_spare_missing path=%s err=%s: plain writes wait for room", p,
                strerror(e));
    return 0;
}

/* The spare's space given back for a write that frees space: 1 when there was one. */
static int spare_use(drive_t *d)
{
    char p[4200];
    spare_path(d, p, sizeof(p));
    if (unlink(p) != 0) return 0;
    log_warn("event=segment_spare_used path=%s: the file system is full", p);
    return 1;
}

static seg_t *seg_new(uint32_t id, uint8_t kind, int fd)
{
    seg_t *s = xcalloc(1, sizeof(*s));
    s->id = id;
    s->kind = kind;
    s->fd = fd;
    s->refs = 1;
    s->min_seq = UINT64_MAX;
    return s;
}

/* A new segment's file is ready on fd (its superblock durable): the drive's, open. */
static seg_t *seg_created(drive_t *d, uint32_t id, uint8_t kind, int fd, uint64_t first_seq,
                          uint32_t seed)
{
    seg_t *s = seg_new(id, kind, fd);
    s->open = 1;
    s->tail = d->iu;
    s->first_seq = first_seq;
    s->seed = seed;
    pthread_mutex_lock(&d->lock);
    d->creating--;
    d->host_bytes += d->iu;
    d->padding_bytes += d->iu - SEG_SB_LEN;
    d->lifetime_host += d->iu;
    if (seed) d->segments_recycled++;
    drive__seg_insert(d, s);
    pthread_mutex_unlock(&d->lock);
    budget_charge(&d->budget, d->iu);
    log_debug("event=segment_created id=%u kind=%u recycled=%d first_seq=%llu", id, kind, seed != 0,
              (unsigned long long)first_seq);
    return s;
}

int drive__seg_create(drive_t *d, uint8_t kind, int reserve, seg_t **out)
{
    uint32_t id;
    uint32_t limit;
    int fd = -1, rc = 0, e = 0;
    const char *what = "open";
    char *path = NULL;
    uint8_t *sb = NULL;
    ssize_t n;

    /* A plain user segment only once the spare is there (what frees space comes first). */
    if (kind == SEG_USER && !reserve && !d->failed && !spare_ready(d)) return ERR_NOSPC;
    pthread_mutex_lock(&d->lock);
    /* A read-only drive writes nothing, not even a new segment's superblock. */
    if (d->failed) {
        rc = d->failed;
        pthread_mutex_unlock(&d->lock);
        return rc;
    }
    /* Keep the last segments for compaction, or a full drive could never be cleaned. */
    limit = kind == SEG_GC ? d->slots : reserve ? d->slots - 1 : d->slots - RESERVE_SLOTS;
    if (d->nsegs + d->creating >= limit) {
        pthread_mutex_unlock(&d->lock);
        return ERR_NOSPC;
    }
    id = d->next_seg_id++;
    d->creating++;
    char *reuse = NULL, *evict = NULL;
    uint64_t first_seq = 0;
    if (kind == SEG_USER && d->npool) {
        reuse = d->pool[--d->npool];
        d->pool_files--;
        /*
         * Taken by the user writer's leader, before it numbers the records that go here:
         * they all get first_seq or more. Above everything the file holds (its name says).
         */
        first_seq = __atomic_load_n(&d->next_seq, __ATOMIC_RELAXED);
        uint64_t clear = clear_of(reuse);
        if (clear == UINT64_MAX) {
            evict = reuse; /* a name not ours: not written into */
            reuse = NULL;
        } else if (clear > first_seq) {
            first_seq = clear;
            __atomic_store_n(&d->next_seq, clear, __ATOMIC_RELAXED);
        }
        if (!first_seq) first_seq = 1; /* 0 would say "a fresh file" */
    } else if (d->npool && d->nsegs + d->creating + d->pool_files > d->slots) {
        evict = d->pool[--d->npool]; /* a fresh file: the pool gives its space back */
        d->pool_files--;
    }
    pthread_mutex_unlock(&d->lock);
    int named = reuse != NULL; /* a pooled file may take the id's name before a failure */
    if (evict) {
        unlink(evict);
        free(evict);
    }

    path = drive__seg_path(d, id);
    uint32_t seed = 0;
    int device_failed = 0;
    if (reuse && (rc = new_seed(&seed)) != 0) {
        free(reuse); /* (stays in the directory: found again at the next open) */
        reuse = NULL;
        what = "getrandom";
        goto fail;
    }
    if (reuse) {
        rc = reuse_file(d, reuse, path, id, first_seq, seed, &fd, &what);
        free(reuse);
        if (rc == ERR_IO || rc == ERR_NOSPC) {
            fd = -1;
            device_failed = 1;
            goto fail;
        }
        if (rc == 0) {
            free(path);
            *out = seg_created(d, id, kind, fd, first_seq, seed);
            return 0;
        }
        fd = -1;
        rc = 0;
        what = "open";
    }
    fd = open_seg_fd(d, path, O_RDWR | O_CREAT | O_EXCL);
    if (fd < 0) {
        e = errno;
        rc = err_from_errno(e);
        goto fail;
    }
    int falloc_rc;
    while ((falloc_rc = drive_io.fallocate(fd, 0, 0, (off_t)d->seg_size)) != 0 &&
           (errno == ENOSPC || errno == EDQUOT)) {
        /* The file system is full before the drive's slots are (the index beside it, a
         * capacity set above the device's): the pool's files give their space back first. */
        pthread_mutex_lock(&d->lock);
        char *ev = d->npool ? d->pool[--d->npool] : NULL;
        if (ev) d->pool_files--;
        pthread_mutex_unlock(&d->lock);
        if (!ev) {
            /* ... then, for what frees space, the spare. */
            if ((kind == SEG_GC || reserve == 2) && spare_use(d)) continue;
            break;
        }
        log_warn("event=segment_pool_evicted path=%s reason=no_space", ev);
        unlink(ev);
        free(ev);
    }
    if (falloc_rc != 0) {
        e = errno;
        what = "fallocate";
        if (e != EOPNOTSUPP || ftruncate(fd, (off_t)d->seg_size) != 0) {
            rc = err_from_errno(e);
            goto fail;
        }
        e = 0;
    }
    sb = xaligned_alloc(DIO_ALIGN, d->iu);
    memset(sb, 0, d->iu);
    codec_sb_encode(sb, &(seg_sb_t){kind, id, d->iu, d->seg_size, 0, 0}); /* fresh: version 1 */
    what = "superblock_write";
    while ((n = drive__pwrite(fd, sb, d->iu, 0)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)d->iu) {
        /* Out of space is that; any other failure (a short write too) is the device's. */
        e = n < 0 ? errno : 0;
        rc = e == ENOSPC || e == EDQUOT ? ERR_NOSPC : ERR_IO;
        goto fail;
    }
    what = "superblock_flush";
    if (drive_io.fdatasync(fd) != 0 || drive__fsync_dir(d->seg_dir) != 0) {
        e = errno;
        rc = ERR_IO;
        goto fail;
    }
    free(sb);
    free(path);
    *out = seg_created(d, id, kind, fd, 0, 0); /* fresh: version 1, no seed */
    return 0;
fail:
    log_limited(LOG_LVL_ERROR, "event=segment_create_failed path=%s seg=%u op=%s err=%s errno=%d%s",
                path, id, what, err_name(rc), e, rc == ERR_IO && !e ? " short_write=1" : "");
    if (fd >= 0) {
        close(fd);
        named = unlink(path) != 0;
    }
    free(sb);
    free(path);
    pthread_mutex_lock(&d->lock);
    d->creating--;
    /*
     * Its id back when nothing took a later one, and no compaction running took it for an
     * id of a segment that was there before it began: on a full file system every write
     * tried made a segment that failed, and ids (32 bits, never reused) went by thousands
     * a second. Not while a file may bear its name (a pooled one renamed, an unlink that
     * failed): the next create would find it there.
     */
    if (!named && d->next_seg_id == id + 1 && id >= d->gc_below) d->next_seg_id = id;
    pthread_mutex_unlock(&d->lock);
    if (rc == ERR_IO && (fd >= 0 || device_failed)) drive__readonly(d, what, id, e);
    return rc;
}

/*
 * Nothing was ever appended to the segment open on fd: its first IU of
 * records (at offset iu, where the first append goes) is zeros or not there.
 */
static int never_appended(drive_t *d, int fd)
{
    uint8_t *buf = NULL, *at;
    int blank = 1;
    int rc = drive__pread_aligned(d, fd, d->iu, (uint64_t)d->iu + DIO_ALIGN, &buf, &at);
    if (rc) return rc == ERR_CORRUPT; /* the file ends before: nothing there; unreadable: unknown */
    for (size_t i = 0; i < DIO_ALIGN && blank; i++)
        blank = at[i] == 0;
    drive__bounce_put(d, buf);
    return blank;
}

int drive__seg_load(drive_t *d, uint32_t id, seg_t **out)
{
    char *path = drive__seg_path(d, id);
    uint8_t *buf = NULL, *sb;
    seg_sb_t h;
    const char *why = NULL;
    int rc = 0;
    int fd = open_seg_fd(d, path, O_RDWR);

    if (fd < 0) {
        rc = err_from_errno(errno);
        goto done;
    }
    rc = drive__pread_aligned(d, fd, 0, SEG_SB_LEN, &buf, &sb);
    if (rc == ERR_CORRUPT) rc = ERR_NOT_FOUND; /* shorter than a superblock: never set up */
    if (rc) goto done;
    if ((rc = codec_sb_decode(sb, SEG_SB_LEN, &h, &why)) == 0 && h.id != id) {
        rc = ERR_CORRUPT;
        why = "id";
    }
    if (rc) {
        /*
         * A superblock that never became durable (zeros, or torn) comes with
         * nothing appended after it: the segment held nothing. Otherwise its
         * records are there and must not be thrown away with it.
         */
        if (never_appended(d, fd)) {
            rc = ERR_NOT_FOUND;
            goto done;
        }
        log_error("event=segment_superblock_corrupt path=%s id=%u reason=%s action=refuse_open",
                  path, id, why);
        goto done;
    }
    if (h.iu != d->iu || h.seg_size != d->seg_size) {
        log_error("event=segment_geometry_mismatch path=%s id=%u iu=%u seg_size=%llu drive_iu=%u "
                  "drive_seg_size=%llu",
                  path, id, h.iu, (unsigned long long)h.seg_size, d->iu,
                  (unsigned long long)d->seg_size);
        rc = ERR_CORRUPT; /* the drive's own files disagree: not a config mistake */
        goto done;
    }
    *out = seg_new(id, h.kind, fd);
    (*out)->tail = d->iu;
    (*out)->first_seq = h.first_seq;
    (*out)->seed = h.seed;
    fd = -1;
done:
    if (fd >= 0) close(fd);
    drive__bounce_put(d, buf);
    free(path);
    return rc;
}

seg_t *drive__seg_find(drive_t *d, uint32_t id)
{
    uint32_t lo = 0, hi = d->nsegs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (d->segs[mid]->id == id) return d->segs[mid];
        if (d->segs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void drive__seg_insert(drive_t *d, seg_t *s)
{
    uint32_t i;
    if (d->nsegs == d->cap_segs) {
        d->cap_segs = d->cap_segs ? d->cap_segs * 2 : 64;
        d->segs = xrealloc(d->segs, d->cap_segs * sizeof(*d->segs));
    }
    /* New segments have the largest id: this is an append except at load. */
    for (i = d->nsegs; i > 0 && d->segs[i - 1]->id > s->id; i--)
        d->segs[i] = d->segs[i - 1];
    d->segs[i] = s;
    d->nsegs++;
}

void drive__seg_remove(drive_t *d, seg_t *s)
{
    for (uint32_t i = 0; i < d->nsegs; i++) {
        if (d->segs[i] == s) {
            memmove(&d->segs[i], &d->segs[i + 1], (d->nsegs - i - 1) * sizeof(*d->segs));
            d->nsegs--;
            return;
        }
    }
}

seg_t *drive__seg_acquire(drive_t *d, uint32_t id)
{
    pthread_mutex_lock(&d->lock);
    seg_t *s = drive__seg_find(d, id);
    if (s) s->refs++;
    pthread_mutex_unlock(&d->lock);
    return s;
}

void drive__seg_release(drive_t *d, seg_t *s)
{
    int last;
    pthread_mutex_lock(&d->lock);
    last = --s->refs == 0;
    char *left = NULL;
    if (last && s->free_path) {
        /* Released into the pool, and its last reader done: it may be written again. */
        left = pool_put(d, s->free_path);
        if (left) d->pool_files--;
    }
    pthread_mutex_unlock(&d->lock);
    if (left) {
        unlink(left);
        free(left);
    }
    if (last) {
        close(s->fd);
        free(s);
    }
}

void drive__seg_seal(drive_t *d, seg_t *s)
{
    s->open = 0;
    s->sealed_ns = d->clock->now_ns(d->clock);
}

/* Segment accounting: key "s" + id, value codec.h segmeta_t. */
void drive__seg_meta_put(drive_t *d, idx_batch_t *b, const seg_t *s)
{
    uint8_t k[SEG_KEY_LEN], v[SEGMETA_LEN];
    (void)d;
    codec_seg_key(k, s->id);
    codec_segmeta_encode(
        v, &(segmeta_t){s->kind, s->open, s->live, s->tail, s->min_seq, s->max_seq, s->sealed_ns});
    idx_batch_put(b, k, sizeof(k), v, sizeof(v));
}

/* Drive counters: key "m", value codec.h drvmeta_t. */
void drive__meta_put(drive_t *d, idx_batch_t *b)
{
    uint8_t v[DRVMETA_LEN];
    codec_drvmeta_encode(v, &(drvmeta_t){d->next_seq, d->next_seg_id, d->lifetime_host});
    idx_batch_put(b, "m", 1, v, sizeof(v));
}

/*
 * Walk the records of a segment from offset `from` to its end. A position
 * that does not hold a valid record (zeros past the last write, a torn
 * write, bitrot) is skipped to the next IU boundary, where the next write
 * began, so one bad record never hides the ones after it. Only records whose
 * header and every payload chunk verify are passed to fn.
 */
int drive__scan(drive_t *d, seg_t *s, uint64_t from, scan_fn fn, void *arg)
{
    size_t cap = 8u << 20;
    uint8_t *buf = xaligned_alloc(DIO_ALIGN, cap);
    uint64_t wstart = 0, wlen = 0; /* window [wstart, wstart+wlen) held in buf */
    uint64_t pos = from < d->iu ? d->iu : from;
    uint64_t end = d->seg_size;
    int rc = 0;

    while (pos + REC_FIXED <= end) {
        rec_view_t v;
        uint64_t need = REC_FIXED;
        int prc;

        for (;;) {
            if (pos < wstart || pos + need > wstart + wlen) {
                /* Refill the window at pos, large enough for `need`. */
                if (need + DIO_ALIGN > cap) {
                    free(buf);
                    cap = align_up(need + DIO_ALIGN, 1u << 20);
                    buf = xaligned_alloc(DIO_ALIGN, cap);
                }
                wstart = align_down(pos, DIO_ALIGN);
                wlen = end - wstart < cap ? end - wstart : cap;
                uint64_t got = 0;
                while (got < wlen) {
                    ssize_t n = drive_io.pread(s->fd, buf + got, wlen - got, (off_t)(wstart + got));
                    if (n < 0 && errno == EINTR) continue;
                    if (n <= 0) {
                        rc = ERR_IO;
                        goto out;
                    }
                    got += (uint64_t)n;
                }
            }
            prc = rec_parse_header_seeded(buf + (pos - wstart), wstart + wlen - pos, s->seed, &v);
            if (prc == ERR_AGAIN && v.hdr_len > 0 && pos + v.hdr_len <= end && need < v.hdr_len) {
                need = v.hdr_len;
                continue;
            }
            if (prc == 0 && pos + v.hdr_len + v.payload_len <= end &&
                need < v.hdr_len + v.payload_len &&
                pos + v.hdr_len + v.payload_len > wstart + wlen) {
                need = v.hdr_len + v.payload_len;
                continue;
            }
            break;
        }
        if (prc != 0 || pos + v.hdr_len + v.payload_len > end) {
            /*
             * A segment in a file that held another: its records are a chain from the
             * superblock, each right after the one before or at the next IU (a flush's
             * start), and where the chain breaks the file's earlier life begins, which
             * is not read (not even by a resync that could land inside an old payload).
             */
            if (s->first_seq && pos % d->iu == 0) break;
            pos = s->first_seq ? align_up(pos, d->iu) : align_up(pos + 1, d->iu);
            continue;
        }
        const uint8_t *raw = buf + (pos - wstart);
        if (v.seq < s->first_seq) break; /* (and its seed passed: 2^-32) the earlier life */
        if (v.n_chunks && rec_verify_chunks(&v, raw + v.hdr_len, 0, v.n_chunks - 1) != 0) {
            log_warn("event=scan_bad_payload seg=%u off=%llu seq=%llu", s->id,
                     (unsigned long long)pos, (unsigned long long)v.seq);
            /* In a reused file the chain ends here: what follows is not told from old bytes
             * (records after it on this drive are rebuilt by the heal, from the others). */
            if (s->first_seq) break;
            pos = align_up(pos + 1, d->iu);
            continue;
        }
        if ((rc = fn(arg, &v, raw, pos)) != 0) goto out;
        pos += v.hdr_len + v.payload_len;
    }
out:
    free(buf);
    return rc;
}

static int iu_ok(uint64_t v)
{
    return v >= 4096 && v <= (1u << 20) && (v & (v - 1)) == 0;
}

uint32_t drive_iu_choose(uint64_t optimal_io_size, uint64_t physical_block_size,
                         uint64_t logical_block_size)
{
    /* Every write must be whole logical blocks (O_DIRECT) and whole physical ones. */
    uint64_t floor =
        physical_block_size > logical_block_size ? physical_block_size : logical_block_size;
    if (floor > (1u << 20) || (floor & (floor - 1)) != 0) floor = 0; /* nonsense: ignore */
    if (iu_ok(optimal_io_size) && optimal_io_size % (floor ? floor : 1) == 0)
        return (uint32_t)optimal_io_size;
    if (iu_ok(floor)) return (uint32_t)floor;
    return 4096;
}

/* One queue/ attribute of the block device holding st (a partition's lives in its parent's). */
static uint64_t queue_attr(const struct stat *st, const char *name)
{
    char p[256];
    for (int up = 0; up < 2; up++) {
        snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/%squeue/%s", major(st->st_dev),
                 minor(st->st_dev), up ? "../" : "", name);
        FILE *f = fopen(p, "r");
        unsigned long long v = 0;
        if (!f) continue;
        if (fscanf(f, "%llu", &v) != 1) v = 0;
        fclose(f);
        return v;
    }
    return 0;
}

uint32_t drive_detect_iu(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return 4096;
    return drive_iu_choose(queue_attr(&st, "optimal_io_size"),
                           queue_attr(&st, "physical_block_size"),
                           queue_attr(&st, "logical_block_size"));
}
