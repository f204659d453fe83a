/*
 * drive_write.c: writers and group commit.
 *
 * A writer packs records back to back into an aligned buffer, pads the end
 * to the IU with zeros, and issues ONE pwritev at the segment's IU-aligned
 * tail and ONE fdatasync for the lot: the only flush of a commit. A large
 * payload in an aligned buffer (a decoder's or the gateway's stripe) is not
 * copied into the buffer: the pwritev takes it from its caller's memory
 * (ext_t), which the caller keeps valid until its request is done anyway.
 * Copying every byte written was a fifth of a refilled drive's commit time. Only then
 * does it update the index (RocksDB's memtable, no WAL: the segments are the
 * truth and what a crash takes from the memtable is replayed from them at
 * open) and complete the callers. Every index_flush_bytes or
 * INDEX_FLUSH_RECORDS appended, it starts an index flush in the background,
 * which bounds that replay. The
 * padded tail of an IU is never written again: the next flush starts at the
 * next boundary.
 *
 * Group commit: callers queue their request, and one leader at a time
 * takes everything queued (in batches of max_batch bytes) into one write
 * and one fdatasync while more requests queue behind it, so batches grow
 * with concurrency. Asynchronous requests (drive_put_async) are led by the
 * drive's commit thread, which runs their callbacks once each batch is
 * durable and indexed: no thread waits per write in flight, and a caller
 * that submits to several drives gets their flushes in parallel. A
 * synchronous caller that finds no leader leads itself (no hand-off at low
 * concurrency) until its own request is done; one that finds a leader sleeps
 * until its request is done or the lead is free.
 *
 * Unsynced writes (drive_put_async_unsynced: a refill's rebuilt blocks, whose
 * heads come later) are packed and written the same way, but a commit made
 * of them alone skips its fdatasync: its callers hear that the bytes are
 * written, and the records wait outside the index (unsynced_t) until a flush
 * covers them: drive_sync, the drive's next durable commit (whose fdatasync
 * of the same segment makes them durable, and which indexes them before its
 * own), the segment's seal, or the close. So "indexed" still means
 * "durable", and one flush serves many commits' worth of writes where a
 * writer needs durability only at its own checkpoints.
 *
 * Failures: every request of a flush whose write or fdatasync failed gets
 * the error, and the segment takes no more appends. Unless the write failed
 * for want of space, the drive then turns read-only (drive__readonly, one
 * log line): a short write is a failed write, and a failed fdatasync is
 * never retried. Reads go on; reopening the drive replays what did land.
 */
#include "storage/drive_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void drive__writer_init(writer_t *w, uint8_t kind)
{
    memset(w, 0, sizeof(*w));
    w->kind = kind;
    /*
     * Compaction's batches hold up to max_batch bytes of small records (10^5
     * entries); an indexed batch made each of its writes and lookups a
     * search of a skiplist that size (half of the node's CPU while it
     * compacted tiny objects, perf). apply_gc needs no reads through its
     * batch (below), so it gets a write-only one.
     */
    w->batch = kind == SEG_GC ? idx_batch_new_plain() : idx_batch_new();
}

void drive__writer_free(writer_t *w)
{
    free(w->buf);
    free(w->ext);
    free(w->iov);
    free(w->pend);
    idx_batch_free(w->batch);
    memset(w, 0, sizeof(*w));
}

/* The bytes of the commit so far that are in w->buf (the rest are callers' payloads). */
static size_t staged(const writer_t *w)
{
    return w->fill - w->ext_bytes;
}

/* Room in w->buf for more bytes, and the IU's padding after them when the commit is all there. */
static void writer_reserve(drive_t *d, writer_t *w, size_t more)
{
    size_t need = align_up(staged(w) + more, d->iu);
    if (need > w->cap) {
        /* Grow with demand: an idle drive with one writer should not pin max_batch bytes. */
        size_t cap = align_up(need * 2, d->iu);
        if (cap > d->cfg.max_batch) cap = need > d->cfg.max_batch ? need : d->cfg.max_batch;
        uint8_t *nb = xaligned_alloc(DIO_ALIGN, cap);
        if (staged(w)) memcpy(nb, w->buf, staged(w));
        free(w->buf);
        w->buf = nb;
        __atomic_store_n(&w->cap, cap, __ATOMIC_RELAXED); /* drive_mem reads it unlocked */
    }
    if (w->npend == w->cap_pend) {
        w->cap_pend = w->cap_pend ? w->cap_pend * 2 : 256;
        w->pend = xrealloc(w->pend, w->cap_pend * sizeof(*w->pend));
    }
}

void drive__writer_release(writer_t *w)
{
    free(w->buf);
    w->buf = NULL;
    __atomic_store_n(&w->cap, 0, __ATOMIC_RELAXED); /* drive_mem reads it unlocked */
    w->peak = 0;
    w->since = 0;
    /* The index batch and the list of pending records keep the capacity of the largest
     * commit too (heaptrack: a compaction's batch of 12 MiB of index entries, kept). Both are
     * empty here: a writer is released only with nothing packed. */
    free(w->pend);
    w->pend = NULL;
    w->cap_pend = 0;
    free(w->ext);
    free(w->iov);
    w->ext = NULL;
    w->iov = NULL;
    w->cap_ext = w->cap_iov = 0;
    idx_batch_free(w->batch);
    w->batch = w->kind == SEG_GC ? idx_batch_new_plain() : idx_batch_new();
}

/* After a commit of len bytes: the buffer goes when a long run of commits used a quarter of it
 * at most (WRITER_SHRINK_COMMITS). Empty then, so nothing is copied. */
static void writer_shrink(writer_t *w, size_t len)
{
    if (len > w->peak) w->peak = len;
    if (++w->since < WRITER_SHRINK_COMMITS) return;
    if (w->cap > WRITER_KEEP && w->peak <= w->cap / 4) {
        drive__writer_release(w);
        return;
    }
    w->peak = 0;
    w->since = 0;
}

/*
 * Flush what the writer holds, to make room. The records flushed carry their
 * own outcome (each user request's rc); the one about to be packed is not
 * among them: after a write that failed for want of space it goes on to a
 * new segment, after one that made the drive read-only it is refused as
 * such. A throttled flush throttles it too; compaction stops at a failure.
 */
static int flush_for_room(drive_t *d, writer_t *w)
{
    int rc = drive__writer_flush(d, w);
    if (!rc || w->kind != SEG_USER || rc == ERR_THROTTLED) return rc;
    pthread_mutex_lock(&d->lock);
    rc = d->failed;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

int drive__writer_room(drive_t *d, writer_t *w, size_t rec_len, size_t staged_len, int reserve)
{
    int rc;

    if (w->fill && w->fill + rec_len > d->cfg.max_batch && (rc = flush_for_room(d, w))) return rc;
    if (w->seg && w->seg->tail + align_up(w->fill + rec_len, d->iu) > d->seg_size) {
        if (w->fill && (rc = flush_for_room(d, w))) return rc;
    }
    if (w->seg && w->seg->tail + align_up(rec_len, d->iu) > d->seg_size) {
        /*
         * A sealed segment holds no unsynced records: compaction and the
         * segment's recorded state take the index as the whole truth.
         */
        if (w == &d->uw && (rc = drive__settle(d)) != 0) return rc;
        /*
         * Segment meta is written in the same critical section that snapshots
         * it, so a later write never carries an older snapshot of `live`.
         */
        idx_batch_t *b = idx_batch_new();
        pthread_mutex_lock(&d->lock);
        drive__seg_seal(d, w->seg);
        drive__seg_meta_put(d, b, w->seg);
        rc = idx_write(d->idx, b);
        pthread_mutex_unlock(&d->lock);
        idx_batch_free(b);
        if (rc) drive__readonly(d, "index_write_failed", w->seg->id, 0);
        w->seg = NULL;
        drive__bg_kick(d);
    }
    if (!w->seg && (rc = drive__seg_create(d, w->kind, reserve, &w->seg))) return rc;
    writer_reserve(d, w, staged_len);
    return 0;
}

void drive__readonly(drive_t *d, const char *reason, uint32_t seg, int err_no)
{
    int first;
    pthread_mutex_lock(&d->lock);
    first = !d->failed;
    d->failed = ERR_READONLY;
    pthread_mutex_unlock(&d->lock);
    if (first)
        log_error("event=drive_readonly path=%s reason=%s seg=%u errno=%d "
                  "writes=refused_until_reopen reads=served",
                  d->path, reason, seg, err_no);
}

/*
 * The pieces of a commit of len bytes (its padding in w->buf already): runs of
 * w->buf between the callers' payloads. Every piece starts and ends on a
 * DIO_ALIGN boundary of the file and of memory (WRITER_EXT_MAX). Returns the count.
 */
static int writer_pieces(writer_t *w, size_t len)
{
    size_t at = 0, from = 0; /* the commit's offset, and w->buf's, of the next run */
    int n = 0;
    if (w->cap_iov < 2 * w->next + 1) {
        w->cap_iov = 2 * w->next + 1;
        w->iov = xrealloc(w->iov, w->cap_iov * sizeof(*w->iov));
    }
    for (size_t i = 0; i < w->next; i++) {
        const ext_t *x = &w->ext[i];
        if (x->off > at) w->iov[n++] = (struct iovec){w->buf + from, x->off - at};
        from += x->off - at;
        w->iov[n++] = (struct iovec){(void *)x->data, x->len};
        at = x->off + x->len;
    }
    if (len > at) w->iov[n++] = (struct iovec){w->buf + from, len - at};
    return n;
}

/*
 * One pwritev of a whole flush. A short count is a failure like an error: the
 * device did not take what it was given, and writing the rest would be a
 * write neither a multiple of the IU nor aligned to it. *err_no is errno, or
 * 0 for a short write.
 */
static int write_all(int fd, writer_t *w, size_t len, uint64_t off, ssize_t *n, int *err_no)
{
    int cnt = writer_pieces(w, len);
    while ((*n = drive_io.pwritev(fd, w->iov, cnt, (off_t)off)) < 0 && errno == EINTR)
        ;
    *err_no = *n < 0 ? errno : 0;
    if (*n == (ssize_t)len) return 0;
    return *err_no == ENOSPC || *err_no == EDQUOT ? ERR_NOSPC : ERR_IO;
}

/*
 * The segments whose live bytes a flush's records changed, each written to
 * the batch once at the end of the flush rather than once per record: a GC
 * flush of a few thousand small records all from one victim put the
 * victim's meta into the indexed batch a few thousand times (14% of the
 * node's CPU while it compacted, perf).
 */
#define TOUCHED_MAX 16
typedef struct {
    seg_t *s[TOUCHED_MAX];
    int n;
} touched_t;

static void touch(drive_t *d, idx_batch_t *b, touched_t *t, seg_t *s)
{
    for (int i = 0; i < t->n; i++)
        if (t->s[i] == s) return;
    if (t->n < TOUCHED_MAX)
        t->s[t->n++] = s;
    else
        drive__seg_meta_put(d, b, s); /* the last put of a segment carries its final state */
}

static void touched_put(drive_t *d, idx_batch_t *b, const touched_t *t)
{
    for (int i = 0; i < t->n; i++)
        drive__seg_meta_put(d, b, t->s[i]);
}

/* The index update of one user record at off in seg, parsed from hdr (avail bytes of it at
 * least its header): it replaces what its identity had. Under lock. */
static void apply_rec(drive_t *d, idx_batch_t *b, touched_t *t, seg_t *seg, const uint8_t *hdr,
                      size_t avail, uint64_t off, uint32_t rec_len)
{
    rec_view_t v;
    ent_t old;
    void *oldbuf = NULL;
    if (rec_parse_header_seeded(hdr, avail, seg->seed, &v) != 0) abort(); /* we encoded it */
    if (drive__ent_get(d, b, &v.id, &old, &oldbuf) == 0) {
        seg_t *os = drive__seg_find(d, old.seg);
        if (os) {
            os->live -= old.rec_len;
            if (os != seg) touch(d, b, t, os);
        }
    }
    free(oldbuf);
    ent_t e = {v.type,        seg->id, off,       rec_len, v.hdr_len,
               v.payload_len, v.seq,   v.hdr_crc, v.meta,  v.meta_len};
    drive__ent_put(b, &v.id, &e);
    seg->live += rec_len;
    drive__seg_note_seq(seg, v.seq);
    d->user_bytes += v.payload_len;
}

/* The header of p in w->buf, and the bytes of w->buf from it on (at least the header's). */
static const uint8_t *pend_header(const writer_t *w, const pend_t *p, size_t *avail)
{
    size_t at = p->buf_off - p->ext_before;
    *avail = staged(w) - at < p->rec_len ? staged(w) - at : p->rec_len;
    return w->buf + at;
}

/* Index updates of a user flush: each record replaces what its identity had. Under lock. */
static void apply_user(drive_t *d, writer_t *w, seg_t *seg, uint64_t base)
{
    touched_t t = {.n = 0};
    for (size_t i = 0; i < w->npend; i++) {
        pend_t *p = &w->pend[i];
        size_t avail;
        const uint8_t *hdr = pend_header(w, p, &avail);
        apply_rec(d, w->batch, &t, seg, hdr, avail, base + p->buf_off, p->rec_len);
    }
    touched_put(d, w->batch, &t);
}

/*
 * A user flush written without an fdatasync: its records' headers kept, to be
 * indexed once durable (apply_unsynced). Under lock.
 */
static void stash_unsynced(drive_t *d, writer_t *w, seg_t *seg, uint64_t base)
{
    unsynced_t *u = &d->unsynced;
    assert(!u->n || u->seg == seg); /* settled before its segment was sealed */
    u->seg = seg;
    for (size_t i = 0; i < w->npend; i++) {
        pend_t *p = &w->pend[i];
        rec_view_t v;
        size_t avail;
        const uint8_t *hdr = pend_header(w, p, &avail);
        if (rec_parse_header_seeded(hdr, avail, seg->seed, &v) != 0) abort();
        if (u->n == u->cap) {
            u->cap = u->cap ? u->cap * 2 : 64;
            u->recs = xrealloc(u->recs, u->cap * sizeof(*u->recs));
        }
        if (u->hdrs_len + v.hdr_len > u->hdrs_cap) {
            u->hdrs_cap = u->hdrs_cap ? u->hdrs_cap * 2 : 16384;
            if (u->hdrs_cap < u->hdrs_len + v.hdr_len) u->hdrs_cap = u->hdrs_len + v.hdr_len;
            u->hdrs = xrealloc(u->hdrs, u->hdrs_cap);
        }
        memcpy(u->hdrs + u->hdrs_len, hdr, v.hdr_len);
        u->recs[u->n++] =
            (unsynced_rec_t){base + p->buf_off, p->rec_len, (uint32_t)u->hdrs_len, v.hdr_len};
        u->hdrs_len += v.hdr_len;
    }
}

/* The unsynced records, durable now, into b (their segment's state too); none left. Under lock. */
static size_t apply_unsynced(drive_t *d, idx_batch_t *b)
{
    unsynced_t *u = &d->unsynced;
    size_t n = u->n;
    if (!n) return 0;
    touched_t t = {.n = 0};
    for (size_t i = 0; i < n; i++) {
        unsynced_rec_t *r = &u->recs[i];
        apply_rec(d, b, &t, u->seg, u->hdrs + r->hdr_at, r->hdr_len, r->off, r->rec_len);
    }
    touch(d, b, &t, u->seg);
    touched_put(d, b, &t);
    u->n = 0;
    u->hdrs_len = 0;
    u->seg = NULL;
    return n;
}

/* The unsynced records given up on: the drive failed (nothing of them is indexed). */
static void unsynced_drop(drive_t *d)
{
    pthread_mutex_lock(&d->lock);
    d->unsynced.n = 0;
    d->unsynced.hdrs_len = 0;
    d->unsynced.seg = NULL;
    pthread_mutex_unlock(&d->lock);
}

void drive__unsynced_free(unsynced_t *u)
{
    free(u->recs);
    free(u->hdrs);
    memset(u, 0, sizeof(*u));
}

/*
 * Whether a relocation's source (segment, offset) came earlier in the same
 * flush: an open-addressing set of the sources seen, sized for npend.
 */
typedef struct {
    uint64_t *slot; /* (seg << 40 | off) + 1; 0 = empty */
    size_t mask;
} sources_t;

static void sources_init(sources_t *t, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    t->slot = xcalloc(cap, sizeof(*t->slot));
    t->mask = cap - 1;
}

/* 1 when (seg, off) was there already; adds it. Offsets are below 2^40 (segments are far smaller).
 */
static int sources_seen(sources_t *t, uint32_t seg, uint64_t off)
{
    uint64_t k = ((uint64_t)seg << 40 | off) + 1;
    for (size_t i = (size_t)(k * 0x9E3779B97F4A7C15ull >> 20) & t->mask;; i = (i + 1) & t->mask) {
        if (t->slot[i] == k) return 1;
        if (!t->slot[i]) {
            t->slot[i] = k;
            return 0;
        }
    }
}

/*
 * Index updates of a GC flush: switch an entry to the copy only if it still
 * points where the record was copied from, so a concurrent overwrite or
 * delete wins and nothing dead comes back. Under lock.
 *
 * The lookups go to the index alone, not through the flush's own batch: a
 * copy switched earlier in this flush would be the only thing the batch
 * could show, and only a second copy of the same source could be affected
 * by it (a pass cut short and begun again while its copies waited here).
 * Such a second copy is dead, as the batch would have shown.
 */
static void apply_gc(drive_t *d, writer_t *w, seg_t *seg, uint64_t base)
{
    touched_t t = {.n = 0};
    sources_t src;
    sources_init(&src, w->npend);
    for (size_t i = 0; i < w->npend; i++) {
        pend_t *p = &w->pend[i];
        rec_view_t v;
        ent_t cur;
        void *curbuf = NULL;
        if (rec_parse_header_seeded(w->buf + p->buf_off, p->rec_len, seg->seed, &v) != 0) abort();
        if (!sources_seen(&src, p->from_seg, p->from_off) &&
            drive__ent_get(d, NULL, &v.id, &cur, &curbuf) == 0 && cur.seg == p->from_seg &&
            cur.off == p->from_off) {
            seg_t *from = drive__seg_find(d, p->from_seg);
            if (from) {
                from->live -= cur.rec_len;
                touch(d, w->batch, &t, from);
            }
            cur.seg = seg->id;
            cur.off = base + p->buf_off;
            /* The copy's header was re-padded for its new offset. */
            cur.rec_len = p->rec_len;
            cur.hdr_len = v.hdr_len;
            cur.hdr_crc = v.hdr_crc;
            drive__ent_put(w->batch, &v.id, &cur);
            seg->live += p->rec_len;
        }
        /* Dead copies count too: they are on disk until this segment goes. */
        drive__seg_note_seq(seg, v.seq);
        free(curbuf);
        d->relocated_bytes += p->rec_len;
    }
    free(src.slot);
    touched_put(d, w->batch, &t);
}

/* Under lock: what a durable write into the index adds toward its next flush; 1 when one is due. */
static int index_flush_due(drive_t *d, uint64_t bytes, uint64_t recs)
{
    d->idx_unflushed += bytes;
    d->idx_unflushed_recs += recs;
    if (d->idx_unflushed < d->cfg.index_flush_bytes && d->idx_unflushed_recs < INDEX_FLUSH_RECORDS)
        return 0;
    d->idx_unflushed = d->idx_unflushed_recs = 0;
    return 1;
}

/* Whether every record w holds was asked for without a flush (drive_put_async_unsynced). */
static int all_unsynced(const writer_t *w)
{
    if (w->kind != SEG_USER || !w->npend) return 0;
    for (size_t i = 0; i < w->npend; i++)
        if (!w->pend[i].req || !w->pend[i].req->unsynced) return 0;
    return 1;
}

int drive__writer_flush(drive_t *d, writer_t *w)
{
    seg_t *seg = w->seg;
    size_t wlen;
    ssize_t n = 0;
    int rc = 0, e = 0, flush_index = 0;
    /* Unsynced records written and kept out of the index; a durable commit indexes them too. */
    int unsynced = all_unsynced(w);
    size_t settled = 0;

    if (w->fill == 0) return 0;
    wlen = align_up(w->fill, d->iu);
    /* The padding goes in w->buf, after its last run (callers' payloads before it may have
     * left less room than a whole IU of it). */
    if (staged(w) + (wlen - w->fill) > w->cap) writer_reserve(d, w, wlen - w->fill);
    memset(w->buf + staged(w), 0, wlen - w->fill);

    pthread_mutex_lock(&d->lock);
    rc = d->failed;
    pthread_mutex_unlock(&d->lock);
    /* Foreground appends wait for budget; compaction paid before it started. */
    if (!rc && w->kind == SEG_USER) {
        rc = budget_take(&d->budget, wlen);
        if (rc == ERR_THROTTLED) {
            pthread_mutex_lock(&d->lock);
            d->throttled += w->npend;
            pthread_mutex_unlock(&d->lock);
        }
    }
    if (!rc && (rc = write_all(seg->fd, w, wlen, seg->tail, &n, &e)) != 0) {
        /*
         * The region may be half written: never append to this segment again.
         * Out of space, the drive goes on in other segments; any other failure
         * (an error, a short write) is the device's, and the drive stops writing.
         * The segment's unsynced records, before the region, are settled first
         * (out of space) or given up on with the drive.
         */
        log_error("event=segment_write_failed path=%s seg=%u off=%llu len=%zu wrote=%zd errno=%d "
                  "err=%s records=%zu action=%s",
                  d->path, seg->id, (unsigned long long)seg->tail, wlen, n, e, err_name(rc),
                  w->npend, rc == ERR_NOSPC ? "segment_sealed" : "drive_readonly");
        if (w->kind == SEG_USER && rc == ERR_NOSPC)
            (void)drive__settle(d);
        else if (w->kind == SEG_USER)
            unsynced_drop(d);
        if (w->seg) { /* (settle seals it when its flush fails) */
            pthread_mutex_lock(&d->lock);
            drive__seg_seal(d, seg);
            pthread_mutex_unlock(&d->lock);
            w->seg = NULL;
        }
        if (rc != ERR_NOSPC) drive__readonly(d, n < 0 ? "write_error" : "short_write", seg->id, e);
    }
    if (!rc && !unsynced && drive_io.fdatasync(seg->fd) != 0) {
        /* Never retried: after a failed flush the page state is unknown (fsyncgate). */
        e = errno;
        log_error("event=segment_flush_failed path=%s seg=%u off=%llu len=%zu errno=%d "
                  "records=%zu unsynced=%zu action=drive_readonly",
                  d->path, seg->id, (unsigned long long)seg->tail, wlen, e, w->npend,
                  w->kind == SEG_USER ? d->unsynced.n : 0);
        if (w->kind == SEG_USER) unsynced_drop(d);
        pthread_mutex_lock(&d->lock);
        drive__seg_seal(d, seg);
        pthread_mutex_unlock(&d->lock);
        w->seg = NULL;
        drive__readonly(d, "fdatasync_failed", seg->id, e);
        rc = ERR_IO;
    }
    if (!rc) {
        pthread_mutex_lock(&d->lock);
        if (unsynced) {
            /* Written, not durable: the records wait outside the index (drive__settle). */
            stash_unsynced(d, w, seg, seg->tail);
            d->idx_unflushed += wlen; /* (replay's bound: indexed at the settle) */
            d->unsynced_commits++;
        } else if (w->kind == SEG_USER) {
            /* Durable with this flush too (the same segment, earlier): indexed first. */
            settled = apply_unsynced(d, w->batch);
            apply_user(d, w, seg, seg->tail);
        } else {
            apply_gc(d, w, seg, seg->tail);
        }
        seg->tail += wlen;
        d->host_bytes += wlen;
        d->lifetime_host += wlen;
        d->padding_bytes += wlen - w->fill;
        d->uncopied_bytes += w->ext_bytes;
        if (!unsynced) {
            d->flushes++;
            d->flush_records += w->npend + settled;
            d->flush_bytes += wlen;
            if (w->npend > d->flush_max_records) d->flush_max_records = w->npend;
            drive__seg_meta_put(d, w->batch, seg);
            drive__meta_put(d, w->batch);
            rc = idx_write(d->idx, w->batch);
            flush_index = index_flush_due(d, wlen, w->npend + settled);
        }
        pthread_mutex_unlock(&d->lock);
        /* Data is durable; replay at the next open indexes it. Stop writing meanwhile. */
        if (rc) drive__readonly(d, "index_write_failed", seg->id, 0);
        /* Not waited for: the callers' records are durable already, in the segment. */
        if (!rc && flush_index && idx_flush_start(d->idx) != 0)
            drive__readonly(d, "index_flush_failed", seg->id, 0);
    }
    idx_batch_clear(w->batch);
    for (size_t i = 0; i < w->npend; i++)
        if (w->pend[i].req) w->pend[i].req->rc = rc;
    size_t buffered = staged(w) + (wlen - w->fill);
    w->fill = 0;
    w->ext_bytes = 0;
    w->next = 0;
    w->npend = 0;
    writer_shrink(w, buffered);
    return rc;
}

int drive__settle(drive_t *d)
{
    unsynced_t *u = &d->unsynced;
    pthread_mutex_lock(&d->lock);
    int rc = d->failed;
    size_t n = u->n;
    seg_t *seg = u->seg;
    pthread_mutex_unlock(&d->lock);
    if (!n) return rc;
    if (rc) {
        unsynced_drop(d);
        return rc;
    }
    if (drive_io.fdatasync(seg->fd) != 0) {
        int e = errno;
        log_error("event=segment_flush_failed path=%s seg=%u off=%llu errno=%d unsynced=%zu "
                  "action=drive_readonly",
                  d->path, seg->id, (unsigned long long)seg->tail, e, n);
        unsynced_drop(d);
        pthread_mutex_lock(&d->lock);
        drive__seg_seal(d, seg);
        pthread_mutex_unlock(&d->lock);
        if (d->uw.seg == seg) d->uw.seg = NULL;
        drive__readonly(d, "fdatasync_failed", seg->id, e);
        return ERR_IO;
    }
    idx_batch_t *b = idx_batch_new();
    pthread_mutex_lock(&d->lock);
    apply_unsynced(d, b);
    drive__seg_meta_put(d, b, seg);
    drive__meta_put(d, b);
    d->flushes++;
    d->flush_records += n;
    rc = idx_write(d->idx, b);
    int flush_index = index_flush_due(d, 0, n);
    pthread_mutex_unlock(&d->lock);
    idx_batch_free(b);
    if (rc) drive__readonly(d, "index_write_failed", seg->id, 0);
    if (!rc && flush_index && idx_flush_start(d->idx) != 0)
        drive__readonly(d, "index_flush_failed", seg->id, 0);
    return rc;
}

/* A payload rec_pad_for aligns starts where a piece of a pwritev may (O_DIRECT). */
_Static_assert(REC_ALIGN % DIO_ALIGN == 0, "record payloads aligned for direct I/O");

/*
 * Whether r's payload goes to the file from its caller's memory: large enough
 * that its record starts it on a REC_ALIGN boundary, in an aligned buffer (a
 * decoder's or the gateway's pool buffer), and a piece left for it.
 */
static int uncopied(const writer_t *w, const req_t *r)
{
    return r->len >= REC_ALIGN_MIN && (uintptr_t)r->data % DIO_ALIGN == 0 &&
           w->next < WRITER_EXT_MAX;
}

/* The aligned part of r's payload, written from the caller's memory at off in the commit. */
static void ext_push(writer_t *w, size_t off, const req_t *r, size_t len)
{
    if (w->next == w->cap_ext) {
        w->cap_ext = w->cap_ext ? w->cap_ext * 2 : 16;
        w->ext = xrealloc(w->ext, w->cap_ext * sizeof(*w->ext));
    }
    w->ext[w->next++] = (ext_t){off, len, r->data};
    w->ext_bytes += len;
}

/* Commit a list of user requests (the leader, without q_lock). */
static void commit_user(drive_t *d, req_t *list)
{
    writer_t *w = &d->uw;
    int sync = 0;
    for (req_t *r = list; r; r = r->next) {
        if (r->sync) { /* drive_sync: once the batch is written (below) */
            sync = 1;
            continue;
        }
        size_t hlen = rec_header_len(&r->id, r->meta_len, r->len);
        size_t pad_max = rec_pad_max(r->len);
        /*
         * The reserve takes what frees space: tombstones, and metadata-only
         * records (the gateway's delete markers are such), so a full drive
         * can still be emptied. They are tiny; payload-bearing puts are not let in.
         * The file system's spare goes only to what lets space go: tombstones, and
         * puts said to free it (the gateway's retirement of a version), not to
         * every metadata-only record (a new empty object's head, tags).
         */
        /* Copied: the payload's last partial DIO_ALIGN unit, or all of it. */
        size_t copied = uncopied(w, r) ? r->len % DIO_ALIGN : r->len;
        int rc = drive__writer_room(d, w, hlen + pad_max + r->len, hlen + pad_max + copied,
                                    r->type == REC_TOMBSTONE || r->frees ? 2 : r->len == 0);
        if (rc) {
            r->rc = rc;
            continue;
        }
        /* Sequence numbers are handed out by the leader alone, in write order. */
        uint64_t seq = __atomic_fetch_add(&d->next_seq, 1, __ATOMIC_RELAXED);
        uint8_t *p = w->buf + staged(w);
        size_t ext_before = w->ext_bytes;
        hlen = rec_encode_header_seeded(p, w->seg->seed, r->type, &r->id, seq, r->meta, r->meta_len,
                                        r->data, r->len,
                                        rec_pad_for(w->seg->tail + w->fill, hlen, r->len));
        if (copied < r->len) {
            assert((w->seg->tail + w->fill + hlen) % DIO_ALIGN == 0); /* rec_pad_for */
            ext_push(w, w->fill + hlen, r, r->len - copied);
        }
        if (copied) memcpy(p + hlen, (const uint8_t *)r->data + (r->len - copied), copied);
        w->pend[w->npend++] =
            (pend_t){(uint32_t)w->fill, (uint32_t)(hlen + r->len), r, 0, 0, (uint32_t)ext_before};
        w->fill += hlen + r->len;
    }
    (void)drive__writer_flush(d, w); /* sets each pending request's rc */
    if (!sync) return;
    int rc = drive__settle(d);
    for (req_t *r = list; r; r = r->next)
        if (r->sync) r->rc = rc;
}

/* What r puts in a commit: its record, header included (padding aside); a sync, nothing. */
static size_t req_bytes(const req_t *r)
{
    return r->sync ? 0 : rec_header_len(&r->id, r->meta_len, r->len) + r->len;
}

/* Append r to the queue (q_lock held). */
static void enqueue(drive_t *d, req_t *r)
{
    r->next = NULL;
    if (d->q_tail)
        d->q_tail->next = r;
    else
        d->q_head = r;
    d->q_tail = r;
    if (r->done_fn)
        d->q_async++;
    else
        d->q_sync++;
    d->q_bytes += req_bytes(r);
    if (d->gathering) pthread_cond_signal(&d->q_more);
}

/*
 * Before a group commit of less than an IU (q_lock held, the leader): while
 * callers keep several requests in flight (the last commit carried more
 * than one), wait a little for more, at most commit_gather_us and at most
 * what a commit takes. The IU is written whole either way; what fills it
 * instead of padding is records that would otherwise take a flush (and an
 * IU) of their own. A lone caller never waits.
 */
static void gather(drive_t *d)
{
    if (!d->cfg.commit_gather_us || d->last_recs < 2 || d->q_bytes >= d->iu || d->closing) return;
    uint64_t wait = (uint64_t)d->cfg.commit_gather_us * 1000;
    if (d->flush_ns_avg && d->flush_ns_avg < wait) wait = d->flush_ns_avg; /* 0: not known */
    /* (A timed wait needs real time: the drive's clock only measures the commits.) */
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + wait;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    __atomic_add_fetch(&d->commit_gathers, 1, __ATOMIC_RELAXED);
    d->gathering = 1;
    while (d->q_bytes < d->iu && !d->closing)
        if (pthread_cond_timedwait(&d->q_more, &d->q_lock, &until) == ETIMEDOUT) break;
    d->gathering = 0;
}

/* Take up to max_batch bytes of requests off the queue, at least one (q_lock held). */
static req_t *take_batch(drive_t *d)
{
    req_t *head = d->q_head, *last = head;
    size_t bytes = last->len;
    while (last->next && bytes + last->next->len <= d->cfg.max_batch) {
        last = last->next;
        bytes += last->len;
    }
    d->q_head = last->next;
    if (!d->q_head) d->q_tail = NULL;
    last->next = NULL;
    d->last_recs = 0;
    for (req_t *x = head; x; x = x->next) {
        if (x->done_fn)
            d->q_async--;
        else
            d->q_sync--;
        d->q_bytes -= req_bytes(x);
        d->last_recs += !x->sync;
    }
    return head;
}

/*
 * Run the callbacks of a committed batch's asynchronous requests (and free
 * them); return its synchronous ones, still to be marked done under q_lock.
 * No lock held: a callback may submit again.
 */
static req_t *run_callbacks(req_t *list)
{
    req_t *sync = NULL;
    for (req_t *x = list, *nx; x; x = nx) {
        nx = x->next;
        if (x->done_fn) {
            x->done_fn(x->done_arg, x->rc);
            free(x);
        } else {
            x->next = sync;
            sync = x;
        }
    }
    return sync;
}

/*
 * Commit what is queued, batch after batch, as the leader (q_lock held on
 * entry and on return; the queue not empty on entry). A synchronous caller
 * (mine) stops leading once its own request is done, so nobody waits on
 * others' writes for more than the commit that carried its own: what is
 * still queued goes to the commit thread (asynchronous requests) and to the
 * synchronous callers waiting (theirs), whoever takes the lead first. The
 * commit thread (mine NULL) leads until the queue is empty.
 */
static void lead(drive_t *d, req_t *mine)
{
    d->leader = 1;
    for (;;) {
        gather(d);
        req_t *head = take_batch(d);
        pthread_mutex_unlock(&d->q_lock);
        uint64_t t0 = d->clock->now_ns(d->clock);
        commit_user(d, head);
        uint64_t took = d->clock->now_ns(d->clock) - t0;
        req_t *sync = run_callbacks(head);
        pthread_mutex_lock(&d->q_lock);
        d->flush_ns_avg = d->flush_ns_avg ? (d->flush_ns_avg * 7 + took) / 8 : took;
        d->last_commit_ns = t0 + took;
        for (req_t *x = sync, *nx; x; x = nx) {
            nx = x->next;
            x->done = 1; /* x belongs to its caller again once q_lock is released */
        }
        int more = d->q_head && !(mine && mine->done);
        if (!more) d->leader = 0;
        /* Wake the callers whose requests are done, and those that may lead now. */
        if (sync || (!more && d->q_sync)) pthread_cond_broadcast(&d->q_cond);
        if (more) continue;
        if (d->q_async || d->closing) pthread_cond_signal(&d->ct_cond);
        return;
    }
}

void drive__writer_idle(drive_t *d)
{
    pthread_mutex_lock(&d->q_lock);
    uint64_t now = d->clock->now_ns(d->clock);
    if (!d->leader && !d->q_head && d->uw.buf && !d->uw.fill &&
        now - d->last_commit_ns >= WRITER_IDLE_NS)
        drive__writer_release(&d->uw);
    pthread_mutex_unlock(&d->q_lock);
}

int drive__submit(drive_t *d, req_t *r)
{
    r->rc = 0;
    r->done = 0;
    r->done_fn = NULL;
    pthread_mutex_lock(&d->q_lock);
    if (d->closing) {
        pthread_mutex_unlock(&d->q_lock);
        return ERR_CLOSED;
    }
    enqueue(d, r);
    while (!r->done) {
        /* Not done and no leader: r is still queued, so the queue is not empty. */
        if (!d->leader)
            lead(d, r);
        else
            pthread_cond_wait(&d->q_cond, &d->q_lock);
    }
    pthread_mutex_unlock(&d->q_lock);
    return r->rc;
}

int drive__submit_async(drive_t *d, req_t *r)
{
    r->rc = 0;
    r->done = 0;
    pthread_mutex_lock(&d->q_lock);
    if (d->closing) {
        pthread_mutex_unlock(&d->q_lock);
        return ERR_CLOSED;
    }
    enqueue(d, r);
    /* A leader at work takes it (or hands it to the commit thread when it stops). */
    if (!d->leader) pthread_cond_signal(&d->ct_cond);
    pthread_mutex_unlock(&d->q_lock);
    return 0;
}

/*
 * The commit thread: leads whenever asynchronous requests are queued and no
 * one else leads; at close, once the queue is empty and no caller leads, it
 * ends. It never sleeps on a timer: every enqueue without a leader and
 * every leader that stops with asynchronous work left signals it.
 */
static void *commit_main(void *arg)
{
    drive_t *d = arg;
    pthread_mutex_lock(&d->q_lock);
    for (;;) {
        if (d->q_head && !d->leader) {
            lead(d, NULL);
            continue;
        }
        if (d->closing && !d->q_head && !d->leader) break;
        pthread_cond_wait(&d->ct_cond, &d->q_lock);
    }
    pthread_mutex_unlock(&d->q_lock);
    return NULL;
}

int drive__commit_start(drive_t *d)
{
    int rc = drive__thread_start(d, &d->ct_thread, commit_main, "wl-commit");
    d->ct_running = rc == 0;
    return rc;
}

void drive__commit_stop(drive_t *d)
{
    pthread_mutex_lock(&d->q_lock);
    d->closing = 1;
    pthread_cond_signal(&d->ct_cond);
    pthread_cond_signal(&d->q_more);
    pthread_mutex_unlock(&d->q_lock);
    if (!d->ct_running) return;
    pthread_join(d->ct_thread, NULL);
    d->ct_running = 0;
}
