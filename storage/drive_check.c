/*
 * drive_check.c: the engine's accounting checked against its index.
 *
 * A segment's live counter must be the bytes of the index entries that
 * point into it: compaction releases a segment once relocation brings the
 * counter to zero, so a counter above the truth leaves a segment it can
 * never release (compaction_incomplete, then skipped for good) and one
 * below it would let compaction release records still live. Every entry
 * must point into a segment that exists, below its tail.
 */
#include "storage/drive_int.h"

#include "common/err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

int drive_check(drive_t *d, drive_check_fn fn, void *arg, uint64_t *dangling)
{
    *dangling = 0;
    /* No compaction while the entries are summed (writers are the caller's to keep away). */
    pthread_mutex_lock(&d->gc_lock);
    pthread_mutex_lock(&d->lock);
    uint32_t nseg = d->next_seg_id;
    pthread_mutex_unlock(&d->lock);
    uint64_t *sum = xcalloc((size_t)nseg + 1, sizeof(*sum));
    uint64_t *past = xcalloc((size_t)nseg + 1, sizeof(*past));
    uint8_t start = 'o', end = 'o' + 1;
    idx_iter_t *it = idx_iter_range(d->idx, &start, 1, &end, 1);
    int rc = 0;
    for (; idx_iter_valid(it); idx_iter_next(it)) {
        size_t kl, vl;
        const char *k = idx_iter_key(it, &kl), *v = idx_iter_value(it, &vl);
        rec_id_t rid;
        ent_t e;
        if (codec_key_decode(k, kl, &rid) != 0 || codec_ent_decode(v, vl, &e, NULL) != 0) {
            rc = ERR_CORRUPT;
            break;
        }
        pthread_mutex_lock(&d->lock);
        seg_t *s = e.seg < nseg ? drive__seg_find(d, e.seg) : NULL;
        uint64_t tail = s ? s->tail : 0;
        pthread_mutex_unlock(&d->lock);
        if (!s) {
            (*dangling)++;
            continue;
        }
        sum[e.seg] += e.rec_len;
        if (e.off + e.rec_len > tail) past[e.seg] += e.rec_len;
    }
    if (rc == 0) rc = idx_iter_status(it);
    idx_iter_free(it);
    int bad = *dangling != 0;
    for (uint32_t i = 0; rc == 0; i++) {
        pthread_mutex_lock(&d->lock);
        if (i >= d->nsegs) {
            pthread_mutex_unlock(&d->lock);
            break;
        }
        seg_t *s = d->segs[i];
        drive_check_seg_t c = {s->id, s->kind, s->live, s->id < nseg ? sum[s->id] : 0,
                               s->id < nseg ? past[s->id] : 0};
        pthread_mutex_unlock(&d->lock);
        if (c.live != c.indexed || c.past_tail) bad = 1;
        if (fn) fn(arg, &c);
    }
    pthread_mutex_unlock(&d->gc_lock);
    free(sum);
    free(past);
    return rc ? rc : bad;
}
