/*
 * drive_open.c: a drive's open (load what the index knows, replay the
 * segments past it, or rebuild the index from them), close, the offline
 * rebuild and the record dump.
 *
 * Open = load what the index knows, then scan every segment from the tail
 * the index last recorded for it (from the start when it recorded nothing)
 * and apply what is found: the highest sequence number wins, and a copy made
 * by compaction (same sequence number) never displaces an entry whose
 * segment still exists. With the index gone that is a full rebuild, by the
 * same code. Every segment found open is sealed: appends always go to fresh
 * segments after a restart, so a torn tail is never written over.
 *
 * The index has no WAL (idx.h): after a kill -9 it is the state of its last
 * flush, a prefix of the batches written. Every batch that moves a
 * segment's recorded tail carries that segment's accounting, the entries of
 * the records before it and the drive's counters, so the prefix is
 * self-consistent and the rescan from its tails is the same replay as after
 * a power cut. What replay cannot find again is made durable before it is
 * relied on: a segment is unlinked only after a flush (drive_gc.c). The
 * drive's lifetime host bytes lost with the memtable are counted again from
 * the records found past the tails.
 */
#include "storage/drive_int.h"

#include "common/clock.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- open, replay ---- */

typedef struct {
    drive_t *d;
    seg_t *seg;
    idx_batch_t *b;
    uint64_t applied, records;
    uint64_t end; /* end of the last valid record seen in seg */
} replay_t;

/*
 * The accounting of every segment the replay changed since the last time, into b: each
 * write of the replay's batch carries the counters that go with its entries. (Put once per
 * segment, right after its own scan, a segment's count went stale whenever a later one's
 * records took bytes off it: the index kept the entries and the old count, and after a
 * second crash the next open loaded a count that compaction could never bring to zero.)
 */
static void put_dirty(drive_t *d, idx_batch_t *b)
{
    for (uint32_t i = 0; i < d->nsegs; i++)
        if (d->segs[i]->dirty) {
            drive__seg_meta_put(d, b, d->segs[i]);
            d->segs[i]->dirty = 0;
        }
}

/* Apply one record found on disk (the replay rule in the file comment). */
static int replay_record(void *arg, const rec_view_t *v, const uint8_t *raw, uint64_t off)
{
    replay_t *r = arg;
    drive_t *d = r->d;
    ent_t old, e;
    void *oldbuf = NULL;
    uint32_t rec_len = (uint32_t)(v->hdr_len + v->payload_len);
    (void)raw;

    r->records++;
    if (off + rec_len > r->end) r->end = off + rec_len;
    if (v->seq >= d->next_seq) d->next_seq = v->seq + 1;
    /*
     * A segment's sequence range covers every record in it, dead or alive:
     * compaction drops a tombstone only when no segment could still hold an
     * older record of the same identity.
     */
    drive__seg_note_seq(r->seg, v->seq);
    if (drive__ent_get(d, r->b, &v->id, &old, &oldbuf) == 0) {
        int keep = old.seq > v->seq ||
                   (old.seq == v->seq &&
                    (old.seg == r->seg->id ? old.off == off : drive__seg_find(d, old.seg) != NULL));
        if (keep) {
            free(oldbuf);
            return 0;
        }
        seg_t *os = drive__seg_find(d, old.seg);
        if (os && !(os == r->seg && old.off == off)) {
            os->live -= old.rec_len;
            os->dirty = 1;
        }
    }
    free(oldbuf);
    e = (ent_t){v->type,        r->seg->id, off,        rec_len, v->hdr_len,
                v->payload_len, v->seq,     v->hdr_crc, v->meta, v->meta_len};
    drive__ent_put(r->b, &v->id, &e);
    r->seg->live += rec_len;
    r->seg->dirty = 1;
    r->applied++;
    /* Keep the batch bounded during a full rebuild. */
    if (idx_batch_count(r->b) >= 4096) {
        put_dirty(d, r->b);
        int rc = idx_write(d->idx, r->b);
        idx_batch_clear(r->b);
        return rc;
    }
    return 0;
}

/*
 * A segment's accounting from the index. ERR_NOT_FOUND when the index has
 * none (the segment was created but no flush into it was indexed: nothing
 * in the index points into it, so scanning it all loses nothing). A value
 * that does not decode, or does not fit this segment, is ERR_CORRUPT: taking
 * it for "nothing live here" would let compaction release live records.
 */
static int load_seg_meta(drive_t *d, seg_t *s)
{
    uint8_t k[SEG_KEY_LEN];
    void *v = NULL;
    size_t vl;
    segmeta_t m;
    const char *why = NULL;
    int rc;

    codec_seg_key(k, s->id);
    if ((rc = idx_get(d->idx, NULL, k, sizeof(k), &v, &vl)) != 0) return rc;
    rc = codec_segmeta_decode(v, vl, &m, &why);
    free(v);
    if (!rc && m.kind != s->kind) {
        rc = ERR_CORRUPT;
        why = "kind_differs_from_superblock";
    }
    if (!rc && (m.tail < d->iu || m.tail > d->seg_size || m.tail % d->iu)) {
        rc = ERR_CORRUPT;
        why = "tail";
    }
    if (rc) {
        log_error("event=index_segment_meta_corrupt path=%s seg=%u len=%zu reason=%s "
                  "action=refuse_open hint=\"wl-drive rebuild-index\"",
                  d->path, s->id, vl, why);
        return ERR_CORRUPT;
    }
    s->live = m.live;
    s->tail = m.tail;
    s->min_seq = m.min_seq;
    s->max_seq = m.max_seq;
    s->sealed_ns = m.sealed_ns;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * recount: add the bytes found past the recorded tails to the lifetime
 * counter (0 when the counters come from an index set aside, which counted
 * them already).
 */
static int load_segments(drive_t *d, int recount)
{
    DIR *dir = opendir(d->seg_dir);
    struct dirent *de;
    uint32_t *ids = NULL, n = 0, cap = 0, *pool_ids = NULL, npool = 0, pool_cap = 0;
    uint64_t *pool_clear = NULL;
    int rc = 0;
    replay_t r = {d, NULL, idx_batch_new(), 0, 0, 0};

    if (!dir) return err_from_errno(errno);
    while ((de = readdir(dir))) {
        unsigned id;
        char tail[8];
        uint32_t pid;
        uint64_t clear;
        if (drive__pool_name(de->d_name, &pid, &clear)) {
            /* A released segment's file, kept to be written again (drive_seg.c, the pool). */
            if (pid >= d->next_seg_id) d->next_seg_id = pid + 1; /* its name is never taken */
            /* Never a number its records had: a rebuilt index knows the segments' alone. */
            if (clear > d->next_seq) d->next_seq = clear;
            if (npool == pool_cap) {
                pool_cap = pool_cap ? 2 * pool_cap : 8;
                pool_ids = xrealloc(pool_ids, pool_cap * sizeof(*pool_ids));
                pool_clear = xrealloc(pool_clear, pool_cap * sizeof(*pool_clear));
            }
            pool_ids[npool] = pid;
            pool_clear[npool++] = clear;
            continue;
        }
        if (sscanf(de->d_name, "%8x.se%1s", &id, tail) != 2 || strcmp(tail, "g") != 0) continue;
        if (n == cap) ids = xrealloc(ids, (cap = cap ? cap * 2 : 64) * sizeof(*ids));
        ids[n++] = id;
    }
    closedir(dir);
    if (n) qsort(ids, n, sizeof(*ids), cmp_u32);

    for (uint32_t i = 0; i < n && !rc; i++) {
        seg_t *s = NULL;
        int lrc = drive__seg_load(d, ids[i], &s);
        if (ids[i] >= d->next_seg_id) d->next_seg_id = ids[i] + 1;
        if (lrc == ERR_NOT_FOUND) {
            /* Created but its superblock never became durable: it holds nothing. */
            char *path = drive__seg_path(d, ids[i]);
            log_warn("event=segment_discarded id=%u reason=no_superblock", ids[i]);
            unlink(path);
            free(path);
            continue;
        }
        if (lrc) {
            rc = lrc;
            break;
        }
        if ((lrc = load_seg_meta(d, s)) == ERR_NOT_FOUND) {
            s->tail = d->iu; /* unknown to the index: scan it all */
            s->live = 0;
        } else if (lrc) {
            close(s->fd);
            free(s);
            rc = lrc;
            break;
        }
        s->open = 0;
        if (!s->sealed_ns) s->sealed_ns = d->clock->now_ns(d->clock);
        /* Its earlier lives' numbers are below first_seq: never handed out again. */
        if (s->first_seq > d->next_seq) d->next_seq = s->first_seq;
        drive__seg_insert(d, s);
    }
    free(ids);
    /* The pool's files, once the segments are counted: the slots they fill are known. */
    for (uint32_t i = 0; i < npool; i++)
        drive__seg_pool_found(d, pool_ids[i], pool_clear[i]);
    free(pool_ids);
    free(pool_clear);
    /* Replay after every segment is in the table, so the keep rule sees them all. */
    for (uint32_t i = 0; i < d->nsegs && !rc; i++) {
        seg_t *s = d->segs[i];
        uint64_t before = r.applied;
        r.seg = s;
        r.end = 0;
        rc = drive__scan(d, s, s->tail, replay_record, &r);
        if (r.end > s->tail) {
            /*
             * Written (padding included: flushes end on IU boundaries) but not
             * counted in the counters the index kept: a crash took them.
             */
            uint64_t found = align_up(r.end, d->iu) - s->tail;
            if (recount) d->lifetime_host += found;
            d->replayed_bytes += found;
            /*
             * After a kill -9 they may still be in the page cache only (a commit between
             * its write and its flush, or unsynced writes): durable before the index names
             * them, as at any commit. Unflushed, a power cut after this open lost blocks
             * that heads written since name (a review).
             */
            if (!rc && drive_io.fdatasync(s->fd) != 0) {
                log_error("event=replay_flush_failed path=%s seg=%u errno=%d", d->path, s->id,
                          errno);
                rc = ERR_IO;
            }
        }
        if (r.applied > before)
            log_info("event=replayed seg=%u from=%llu records=%llu", s->id,
                     (unsigned long long)s->tail, (unsigned long long)(r.applied - before));
        s->tail = d->seg_size; /* sealed: nothing more is appended */
        s->dirty = 1;
    }
    if (!rc) {
        put_dirty(d, r.b);
        drive__meta_put(d, r.b);
        rc = idx_write(d->idx, r.b);
    }
    /* What the replay found, made durable: a crash loop does not redo it each time. */
    if (!rc && (r.applied || d->replayed_bytes)) rc = drive__index_flush(d);
    idx_batch_free(r.b);
    return rc;
}

static int mkdir_p(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return err_from_errno(errno);
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return err_from_errno(errno);
    return 0;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

/*
 * The drive's geometry lives in <path>/DRIVE (text, key=value) from its
 * first open on, so tools and restarts need no configuration, and a config
 * that disagrees with what is on disk is refused instead of misreading it.
 */
static int geometry(drive_t *d, const drive_cfg_t *cfg)
{
    char *path = join(d->path, "DRIVE");
    FILE *f = fopen(path, "r");
    unsigned long long iu = 0, seg = 0, cap = 0;
    int rc = 0;

    if (f) {
        char line[128];
        while (fgets(line, sizeof(line), f)) {
            (void)(sscanf(line, "iu=%llu", &iu) || sscanf(line, "segment_size=%llu", &seg) ||
                   sscanf(line, "capacity=%llu", &cap));
        }
        fclose(f);
        if ((cfg->iu && cfg->iu != iu) || (cfg->segment_size && cfg->segment_size != seg) || !iu ||
            !seg) {
            log_error("event=geometry_mismatch path=%s on_disk_iu=%llu on_disk_segment_size=%llu",
                      d->path, iu, seg);
            rc = ERR_INVAL;
        }
        d->iu = (uint32_t)iu;
        d->seg_size = seg;
        if (!d->cfg.capacity) d->cfg.capacity = cap;
    } else {
        d->iu = cfg->iu ? cfg->iu : drive_detect_iu(d->seg_dir);
        d->seg_size = d->cfg.segment_size;
    }
    free(path);
    return rc;
}

static int geometry_save(drive_t *d)
{
    char *path = join(d->path, "DRIVE"), *tmp = join(d->path, "DRIVE.tmp");
    FILE *f;
    int rc = 0;
    struct stat st;

    if (stat(path, &st) == 0) goto out;
    if (!(f = fopen(tmp, "w"))) {
        rc = err_from_errno(errno);
        goto out;
    }
    fprintf(f, "warmlake-drive 1\niu=%u\nsegment_size=%llu\ncapacity=%llu\n", d->iu,
            (unsigned long long)d->seg_size, (unsigned long long)d->cfg.capacity);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) rc = ERR_IO;
    if (fclose(f) != 0) rc = ERR_IO;
    if (!rc && rename(tmp, path) != 0) rc = err_from_errno(errno);
out:
    free(path);
    free(tmp);
    return rc;
}

/*
 * The drive's counters. ERR_AGAIN when the index predates versioned values
 * (the counters are taken, and the caller rebuilds the index in the current
 * layout); ERR_CORRUPT (logged) for a value of any other size or a bad one.
 */
static int load_meta(drive_t *d)
{
    void *v = NULL;
    size_t vl;
    drvmeta_t m;
    const char *why = NULL;
    int rc = idx_get(d->idx, NULL, "m", 1, &v, &vl);
    if (rc == ERR_NOT_FOUND) return 0;
    if (rc) return rc;
    if (codec_drvmeta_decode_v0(v, vl, &m) == 0) {
        rc = ERR_AGAIN;
    } else if ((rc = codec_drvmeta_decode(v, vl, &m, &why)) != 0) {
        log_error("event=index_meta_corrupt path=%s key=m len=%zu want=%d reason=%s "
                  "action=refuse_open hint=\"wl-drive rebuild-index\"",
                  d->path, vl, DRVMETA_LEN, why);
        free(v);
        return ERR_CORRUPT;
    }
    free(v);
    d->next_seq = m.next_seq;
    d->next_seg_id = m.next_seg_id;
    d->lifetime_host = m.lifetime_host;
    return rc;
}

/* Keep the index aside for inspection and start an empty one: open rebuilds it. */
static int index_set_aside(drive_t *d, const char *reason)
{
    char aside[4200];
    idx_close(d->idx);
    d->idx = NULL;
    snprintf(aside, sizeof(aside), "%s.%s-%ld", d->idx_path, reason, (long)time(NULL));
    log_error("event=index_set_aside path=%s moved_to=%s reason=%s action=rebuild", d->idx_path,
              aside, reason);
    if (rename(d->idx_path, aside) != 0) return err_from_errno(errno);
    return idx_open_shared(d->idx_path, d->cfg.index_cache, &d->idx);
}

/*
 * One process per drive: a second one would append to the same segments
 * and, finding RocksDB's lock taken, take the index for unreadable and set
 * it aside. ERR_BUSY (logged) when another process holds the drive.
 */
static int lock_drive(drive_t *d)
{
    char *path = join(d->path, "LOCK");
    d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int rc = d->lock_fd < 0 ? err_from_errno(errno) : 0;
    if (!rc && flock(d->lock_fd, LOCK_EX | LOCK_NB) != 0)
        rc = errno == EWOULDBLOCK ? ERR_BUSY : err_from_errno(errno);
    if (rc == ERR_BUSY)
        log_error("event=drive_busy path=%s hint=\"another process has this drive open\"", d->path);
    free(path);
    return rc;
}

static int open_index(drive_t *d)
{
    int rc = idx_open_shared(d->idx_path, d->cfg.index_cache, &d->idx);
    if (rc == 0) return 0;
    /* Its file system full: the index is whole, only no room to open it (a set-aside copy and
     * a rebuild would need more room still, and each try set another copy aside). */
    if (rc == ERR_NOSPC) {
        log_error("event=index_no_space path=%s: free space on its file system", d->idx_path);
        return rc;
    }
    /* Unreadable index: rebuild from the segments. */
    return index_set_aside(d, "corrupt");
}

int drive_open(const drive_cfg_t *cfg, drive_t **out)
{
    drive_t *d;
    int rc;

    if (!cfg->path) return ERR_INVAL;
    d = xcalloc(1, sizeof(*d));
    d->cfg = *cfg;
    d->path = xstrdup(cfg->path);
    d->seg_dir = join(cfg->path, "segments");
    d->idx_path = cfg->index_path ? xstrdup(cfg->index_path) : join(cfg->path, "index");
    d->clock = cfg->clock ? cfg->clock : clock_real();
    d->direct = !cfg->buffered;
    if (!d->cfg.segment_size) d->cfg.segment_size = 256u << 20;
    if (!d->cfg.max_batch) d->cfg.max_batch = 32u << 20;
    if (!d->cfg.index_flush_bytes) d->cfg.index_flush_bytes = 256ull << 20;
    if (!d->cfg.warranty_years) d->cfg.warranty_years = 5;
    if (!d->cfg.max_delay_ms) d->cfg.max_delay_ms = 2000;
    if (!d->cfg.gc_free_low) d->cfg.gc_free_low = 0.10;
    if (!d->cfg.gc_max_live) d->cfg.gc_max_live = 0.85;
    if (!d->cfg.gc_dead_high) d->cfg.gc_dead_high = 0.75;
    if (!d->cfg.gc_reserve) d->cfg.gc_reserve = 0.25;
    d->pool_max = d->cfg.segment_pool < 0 ? 0
                  : d->cfg.segment_pool   ? (uint32_t)d->cfg.segment_pool
                                          : 4;
    pthread_mutex_init(&d->lock, NULL);
    d->bounce = bufpool_new(BOUNCE_KEEP);
    pthread_mutex_init(&d->q_lock, NULL);
    pthread_cond_init(&d->q_cond, NULL);
    pthread_cond_init(&d->ct_cond, NULL);
    clock_cond_init(&d->q_more);
    pthread_mutex_init(&d->gc_lock, NULL);
    pthread_mutex_init(&d->bg_lock, NULL);
    pthread_cond_init(&d->bg_cond, NULL);
    drive__writer_init(&d->uw, SEG_USER);
    drive__writer_init(&d->gw, SEG_GC);

    d->lock_fd = -1;
    if ((rc = mkdir_p(d->seg_dir)) != 0) goto fail;
    if ((rc = lock_drive(d)) != 0) goto fail;
    if ((rc = geometry(d, cfg)) != 0) goto fail;
    if (d->iu < 4096 || d->iu > (1u << 20) || (d->iu & (d->iu - 1)) || d->seg_size % d->iu ||
        d->seg_size < 4ull * d->iu) {
        log_error("event=bad_geometry iu=%u segment_size=%llu", d->iu,
                  (unsigned long long)d->seg_size);
        rc = ERR_INVAL;
        goto fail;
    }
    d->slots = (uint32_t)(d->cfg.capacity / d->seg_size);
    if (d->slots < RESERVE_SLOTS + 2) {
        log_error("event=capacity_too_small capacity=%llu segments=%u",
                  (unsigned long long)d->cfg.capacity, d->slots);
        rc = ERR_INVAL;
        goto fail;
    }
    if ((rc = geometry_save(d)) != 0) goto fail;
    /* The engine writes only large sequential appends: the sequential rating applies. */
    d->cfg.dwpd = cfg->dwpd > 0 ? cfg->dwpd : cfg->dwpd_random;
    double rate = d->cfg.dwpd * (double)d->cfg.capacity / 86400.0;
    double burst = cfg->burst_bytes ? (double)cfg->burst_bytes : rate * 3600.0;
    budget_init(&d->budget, d->clock, rate, burst, d->cfg.max_delay_ms * 1000000ull);
    d->next_seq = 1;
    if ((rc = open_index(d)) != 0) goto fail;
    /* An index of the layout before versioned values is rebuilt, its counters kept. */
    int recount = 1;
    if ((rc = load_meta(d)) == ERR_AGAIN) {
        rc = index_set_aside(d, "v0");
        recount = 0;
    }
    if (rc || (rc = load_segments(d, recount)) != 0) goto fail;
    d->idx_written_seen = idx_bytes_written(d->idx);
    d->open_ns = d->clock->now_ns(d->clock);
    d->host_at_open = d->lifetime_host;
    log_info("event=drive_open path=%s iu=%u segment_size=%llu segments=%u/%u direct=%d", d->path,
             d->iu, (unsigned long long)d->seg_size, d->nsegs, d->slots, d->direct);
    if (d->replayed_bytes)
        log_info("event=replay_done path=%s replayed_bytes=%llu", d->path,
                 (unsigned long long)d->replayed_bytes);
    if ((rc = drive__commit_start(d)) != 0) goto fail;
    if (cfg->compaction && (rc = drive__bg_start(d)) != 0) goto fail;
    *out = d;
    return 0;
fail:
    log_error("event=drive_open_failed path=%s err=%s", cfg->path, err_name(rc));
    drive_close(d);
    return rc;
}

void drive_close(drive_t *d)
{
    if (!d) return;
    drive__commit_stop(d); /* every queued write committed, every callback run */
    /* Nobody leads now: unsynced writes made durable and indexed (replay would find them too). */
    if (d->idx) (void)drive__settle(d);
    drive__bg_stop(d);
    pthread_mutex_lock(&d->gc_lock);
    (void)drive__writer_flush(d, &d->gw);
    pthread_mutex_unlock(&d->gc_lock);
    if (d->idx) {
        idx_batch_t *b = idx_batch_new();
        pthread_mutex_lock(&d->lock);
        for (uint32_t i = 0; i < d->nsegs; i++)
            drive__seg_meta_put(d, b, d->segs[i]);
        drive__meta_put(d, b);
        pthread_mutex_unlock(&d->lock);
        /* Flushed, so the next open rescans nothing (RocksDB would flush at close too). */
        if (idx_write(d->idx, b) != 0 || idx_flush(d->idx) != 0)
            log_error("event=close_index_write_failed path=%s", d->path);
        idx_batch_free(b);
        idx_close(d->idx);
    }
    for (uint32_t i = 0; i < d->nsegs; i++) {
        close(d->segs[i]->fd);
        free(d->segs[i]);
    }
    free(d->segs);
    drive__seg_pool_free(d);
    drive__writer_free(&d->uw);
    drive__unsynced_free(&d->unsynced);
    drive__writer_free(&d->gw);
    budget_destroy(&d->budget);
    bufpool_free(d->bounce);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->q_lock);
    pthread_cond_destroy(&d->q_cond);
    pthread_cond_destroy(&d->ct_cond);
    pthread_cond_destroy(&d->q_more);
    pthread_mutex_destroy(&d->gc_lock);
    pthread_mutex_destroy(&d->bg_lock);
    pthread_cond_destroy(&d->bg_cond);
    if (d->lock_fd >= 0) close(d->lock_fd); /* the lock goes with it, last */
    free(d->path);
    free(d->seg_dir);
    free(d->idx_path);
    free(d);
}

int drive_rebuild_index(const drive_cfg_t *cfg)
{
    char *ip = cfg->index_path ? xstrdup(cfg->index_path) : join(cfg->path, "index");
    char cmd[8300];
    drive_cfg_t c = *cfg;
    drive_t *d = NULL;
    int rc;
    struct stat st;

    if (stat(ip, &st) == 0) {
        snprintf(cmd, sizeof(cmd), "%s.old-%ld", ip, (long)time(NULL));
        if (rename(ip, cmd) != 0) {
            free(ip);
            return ERR_IO;
        }
        log_info("event=index_moved_aside from=%s to=%s", ip, cmd);
    }
    free(ip);
    c.compaction = 0;
    if ((rc = drive_open(&c, &d)) != 0) return rc;
    drive_close(d);
    return 0;
}

typedef struct {
    drive_dump_fn fn;
    void *arg;
    uint32_t seg;
} dump_t;

static int dump_record(void *arg, const rec_view_t *v, const uint8_t *raw, uint64_t off)
{
    dump_t *x = arg;
    char b[REC_MAX_BUCKET + 1], k[REC_MAX_KEY + 1], ver[REC_MAX_VERSION + 1];
    (void)raw;
    memcpy(b, v->id.bucket, v->id.bucket_len);
    b[v->id.bucket_len] = 0;
    memcpy(k, v->id.key, v->id.key_len);
    k[v->id.key_len] = 0;
    memcpy(ver, v->id.version, v->id.version_len);
    ver[v->id.version_len] = 0;
    drive_id_t id = {b, k, ver, v->id.shard};
    return x->fn(x->arg, x->seg, off, v->type, v->seq, &id, v->payload_len, v->meta, v->meta_len);
}

int drive_dump(drive_t *d, drive_dump_fn fn, void *arg)
{
    dump_t x = {fn, arg, 0};
    int rc = 0;
    pthread_mutex_lock(&d->gc_lock); /* segments do not go away meanwhile */
    for (uint32_t i = 0; i < d->nsegs && !rc; i++) {
        x.seg = d->segs[i]->id;
        rc = drive__scan(d, d->segs[i], d->iu, dump_record, &x);
    }
    pthread_mutex_unlock(&d->gc_lock);
    return rc;
}
