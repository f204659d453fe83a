/*
 * drive_gc.c: compaction and the background thread.
 *
 * Victims are chosen by cost-benefit, as in LFS: score = (1-u) * age / (1+u),
 * u = live bytes / segment size, age = time since the segment was sealed.
 * Cold, mostly-dead segments go first; a segment with nothing live is
 * released without being read.
 *
 * Compaction only runs when space or garbage demands it (free segments below
 * gc_free_low of the drive, or a segment at least gc_dead_high dead) and
 * only within the endurance budget: it must be able to pay for relocating
 * the victim's live bytes while leaving gc_reserve of the bucket to the
 * foreground. When the budget is spent, compaction stops.
 *
 * Relocation copies each live record verbatim (same header, same sequence
 * number) into a GC segment; the index is switched only where it still
 * points at the old copy (drive_write.c apply_gc). A tombstone is copied
 * while some other segment may still hold an older record it shadows
 * (conservatively: any segment whose lowest sequence number is below the
 * tombstone's); otherwise it is dropped. The victim is released (index
 * flushed, then file unlinked) only when nothing in it is live any more.
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
#include <unistd.h>

typedef struct {
    drive_t *d;
    seg_t *victim;
    uint64_t min_seq_others; /* lowest sequence number any other segment holds */
    uint64_t copied, dropped;
    int rc;
} gc_t;

static int gc_record(void *arg, const rec_view_t *v, const uint8_t *raw, uint64_t off)
{
    gc_t *g = arg;
    drive_t *d = g->d;
    ent_t cur;
    void *vb = NULL;
    uint32_t rec_len = (uint32_t)(v->hdr_len + v->payload_len);
    int rc;

    if (drive__ent_get(d, NULL, &v->id, &cur, &vb) != 0) return 0; /* no entry: dead */
    free(vb);
    if (cur.seg != g->victim->id || cur.off != off)
        return 0; /* overwritten, deleted or already moved */

    if (v->type == REC_TOMBSTONE && v->seq < g->min_seq_others) {
        /* Nothing older survives anywhere else: the tombstone has done its work. */
        uint8_t key[KEY_MAX];
        size_t kl = codec_key_encode(key, &v->id);
        void *again = NULL;
        idx_batch_t *b = idx_batch_new();
        rc = 0;
        /* Checked and written in one critical section: a concurrent put must win. */
        pthread_mutex_lock(&d->lock);
        if (drive__ent_get(d, NULL, &v->id, &cur, &again) == 0 && cur.seg == g->victim->id &&
            cur.off == off) {
            idx_batch_delete(b, key, kl);
            g->victim->live -= rec_len;
            drive__seg_meta_put(d, b, g->victim);
            if ((rc = idx_write(d->idx, b)) != 0) {
                g->victim->live += rec_len;
            } else {
                d->tombstones_dropped++;
                g->dropped++;
            }
        }
        pthread_mutex_unlock(&d->lock);
        idx_batch_free(b);
        free(again);
        return rc;
    }
    /*
     * The copy lands at another offset: its header is re-padded so a large
     * payload stays aligned for direct reads (chunk crcs carried over, the
     * payload copied as read and verified).
     */
    writer_t *w = &d->gw;
    size_t pad_max = rec_pad_max(v->payload_len);
    size_t hlen = rec_header_len(&v->id, v->meta_len, v->payload_len);
    if ((rc = drive__writer_room(d, w, hlen + pad_max + v->payload_len,
                                 hlen + pad_max + v->payload_len, 1)) != 0)
        return rc;
    /* (Compaction's writer copies every record: all of its commit is in w->buf.) */
    assert(!w->ext_bytes);
    uint8_t *p = w->buf + w->fill;
    hlen = rec_repad(v, raw, p, rec_pad_for(w->seg->tail + w->fill, hlen, v->payload_len));
    memcpy(p + hlen, raw + v->hdr_len, v->payload_len);
    uint32_t new_len = (uint32_t)(hlen + v->payload_len);
    w->pend[w->npend++] = (pend_t){(uint32_t)w->fill, new_len, NULL, g->victim->id, off, 0};
    w->fill += new_len;
    g->copied += new_len;
    return 0;
}

/*
 * Release a segment with nothing live: index first, then the file. The index
 * is durable only as of its last flush (no WAL), and the unlink cannot be
 * replayed back: the flush makes durable the segment's removal and every
 * entry moved off it before (relocated, overwritten, deleted, dropped
 * tombstones), so no index a crash can leave names a segment that is gone.
 */
static int release(drive_t *d, seg_t *s)
{
    uint8_t k[SEG_KEY_LEN];
    codec_seg_key(k, s->id);
    idx_batch_t *b = idx_batch_new();
    int rc;

    pthread_mutex_lock(&d->lock);
    if (s->live != 0 || s->open) {
        pthread_mutex_unlock(&d->lock);
        idx_batch_free(b);
        return ERR_EXISTS;
    }
    drive__seg_remove(d, s);
    idx_batch_delete(b, k, sizeof(k));
    drive__meta_put(d, b);
    rc = idx_write(d->idx, b);
    idx_batch_free(b);
    if (rc) {
        drive__seg_insert(d, s);
        pthread_mutex_unlock(&d->lock);
        return rc;
    }
    pthread_mutex_unlock(&d->lock);
    /* Waited for outside the lock: appends go on meanwhile (the flush covers what came before). */
    if ((rc = drive__index_flush(d)) != 0) {
        /*
         * The file stays, out of the table (nothing live in it; the drive is
         * read-only now): the next open finds it, nothing points into it,
         * and compaction releases it then.
         */
        drive__seg_release(d, s);
        return rc;
    }
    pthread_mutex_lock(&d->lock);
    d->segments_released++;
    pthread_mutex_unlock(&d->lock);
    drive__seg_retire(d, s); /* unlinked, or renamed into the pool */
    /*
     * Make the unlink (the rename) durable before any tombstone that relied on
     * this segment's records being gone can be dropped: a segment that came
     * back after a power cut could otherwise resurrect deleted objects. (A
     * pooled file's records are never read again: drive_seg.c.)
     */
    if (drive__fsync_dir(d->seg_dir) != 0)
        log_error("event=segment_dir_fsync_failed dir=%s", d->seg_dir);
    log_debug("event=segment_released id=%u", s->id);
    drive__seg_release(d, s); /* the table's reference; readers may still hold theirs */
    return 0;
}

/* Pick a victim under lock, or NULL. *empty is set when it has nothing live. */
static seg_t *pick(drive_t *d, int force, uint32_t below_id, int *empty)
{
    uint64_t now = d->clock->now_ns(d->clock);
    seg_t *best = NULL;
    double best_score = -1;
    uint32_t free_slots = d->slots - d->nsegs;
    int critical = free_slots <= RESERVE_SLOTS + 1;
    int low_space = critical || free_slots < (uint32_t)(d->cfg.gc_free_low * d->slots + 0.5);
    /*
     * Relocating a mostly-live segment buys little space for many written
     * bytes; below critical space such segments are left for their data to
     * die (in a warm lake whole batches are deleted together, and a segment
     * often empties by itself if given time).
     */
    double max_live = critical || force ? 0.98 : d->cfg.gc_max_live;

    *empty = 0;
    for (uint32_t i = 0; i < d->nsegs; i++) {
        seg_t *s = d->segs[i];
        if (s->open || s->gc_skip || s->id >= below_id) continue;
        if (s->live == 0) {
            *empty = 1;
            return s;
        }
        double u = (double)s->live / (double)d->seg_size;
        double age = (double)(now - s->sealed_ns) / 1e9 + 1.0;
        double score = (1 - u) * age / (1 + u);
        int wanted = force || low_space || (1 - u) >= d->cfg.gc_dead_high;
        if (wanted && u < max_live && score > best_score) {
            best = s;
            best_score = score;
        }
    }
    return best;
}

static int compact_one(drive_t *d, int force, uint32_t below_id)
{
    gc_t g = {d, NULL, UINT64_MAX, 0, 0, 0};
    int empty, rc;
    uint64_t cost;
    int critical;

    pthread_mutex_lock(&d->lock);
    g.victim = pick(d, force, below_id, &empty);
    if (!g.victim) {
        pthread_mutex_unlock(&d->lock);
        return 0;
    }
    g.victim->refs++;
    for (uint32_t i = 0; i < d->nsegs; i++)
        if (d->segs[i] != g.victim && d->segs[i]->min_seq < g.min_seq_others)
            g.min_seq_others = d->segs[i]->min_seq;
    cost = g.victim->live;
    critical = d->slots - d->nsegs <= RESERVE_SLOTS;
    pthread_mutex_unlock(&d->lock);

    if (!empty) {
        /* Pay for the relocation up front, or leave the segment for later. */
        cost = align_up(cost, d->iu);
        if (budget_try_take(&d->budget, cost, critical ? 0.0 : d->cfg.gc_reserve) != 0) {
            drive__seg_release(d, g.victim);
            log_debug("event=compaction_deferred reason=budget need=%llu",
                      (unsigned long long)cost);
            return ERR_THROTTLED;
        }
        rc = drive__scan(d, g.victim, d->iu, gc_record, &g);
        if (!rc) rc = drive__writer_flush(d, &d->gw);
        if (rc) {
            drive__seg_release(d, g.victim);
            log_error("event=compaction_failed seg=%u err=%s", g.victim->id, err_name(rc));
            return rc;
        }
        /* Padding and rounding beyond the estimate are paid after the fact. */
        if (g.copied > cost) budget_charge(&d->budget, g.copied - cost);
    }
    rc = release(d, g.victim);
    if (rc == ERR_EXISTS) {
        pthread_mutex_lock(&d->lock);
        log_error("event=compaction_incomplete seg=%u live=%llu reason=unreadable_records",
                  g.victim->id, (unsigned long long)g.victim->live);
        g.victim->gc_skip = 1;
        pthread_mutex_unlock(&d->lock);
    }
    pthread_mutex_lock(&d->lock);
    d->compactions++;
    pthread_mutex_unlock(&d->lock);
    log_debug("event=compacted seg=%u copied=%llu dropped=%llu empty=%d", g.victim->id,
              (unsigned long long)g.copied, (unsigned long long)g.dropped, empty);
    drive__seg_release(d, g.victim);
    return rc == 0 ? 1 : 0;
}

int drive_compact(drive_t *d, int max_victims, int force)
{
    int released = 0, failed;
    uint32_t below_id;
    pthread_mutex_lock(&d->gc_lock);
    /* Only segments that exist now: GC segments this call fills are not its victims. */
    pthread_mutex_lock(&d->lock);
    below_id = d->gc_below = d->next_seg_id;
    failed = d->failed;
    pthread_mutex_unlock(&d->lock);
    /* A read-only drive writes nothing, index and unlinks included. */
    int none = failed; /* no victim to take (not: one put off by the budget) */
    for (int i = 0; !failed && (max_victims == 0 || i < max_victims); i++) {
        int rc = compact_one(d, force, below_id);
        none = rc == 0;
        if (rc <= 0) break;
        released += rc;
    }
    pthread_mutex_lock(&d->lock);
    d->gc_below = 0;
    pthread_mutex_unlock(&d->lock);
    /* Compaction comes in bursts: once a call finds nothing to do, its buffer (grown to a
     * whole batch, 32 MiB) goes until the next burst. Empty: every victim's copies flushed. */
    if (!released && none && d->gw.buf && !d->gw.fill) drive__writer_release(&d->gw);
    pthread_mutex_unlock(&d->gc_lock);
    return released;
}

void drive_compaction_pause(drive_t *d, int paused)
{
    pthread_mutex_lock(&d->bg_lock);
    d->bg_paused = paused;
    pthread_cond_broadcast(&d->bg_cond);
    pthread_mutex_unlock(&d->bg_lock);
}

void drive__bg_kick(drive_t *d)
{
    pthread_mutex_lock(&d->bg_lock);
    pthread_cond_broadcast(&d->bg_cond);
    pthread_mutex_unlock(&d->bg_lock);
}

static void *bg_main(void *arg)
{
    drive_t *d = arg;
    pthread_mutex_lock(&d->bg_lock);
    while (!d->bg_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&d->bg_cond, &d->bg_lock, &ts);
        if (d->bg_stop) break;
        if (d->bg_paused) continue;
        pthread_mutex_unlock(&d->bg_lock);
        drive__charge_index(d);
        drive__writer_idle(d);
        (void)drive_compact(d, 4, 0); /* a few at a time, then look at stop/pause again */
        pthread_mutex_lock(&d->bg_lock);
    }
    pthread_mutex_unlock(&d->bg_lock);
    return NULL;
}

int drive__bg_start(drive_t *d)
{
    int rc = drive__thread_start(d, &d->bg_thread, bg_main, "wl-compact");
    d->bg_running = rc == 0;
    return rc;
}

void drive__bg_stop(drive_t *d)
{
    if (!d->bg_running) return;
    pthread_mutex_lock(&d->bg_lock);
    d->bg_stop = 1;
    pthread_cond_broadcast(&d->bg_cond);
    pthread_mutex_unlock(&d->bg_lock);
    pthread_join(d->bg_thread, NULL);
    d->bg_running = 0;
}
