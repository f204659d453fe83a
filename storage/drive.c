/*
 * drive.c: the index entries every room uses, writes' entry points and
 * stats (open, replay and close: drive_open.c; reads and listings:
 * drive_read.c; the segment writer: drive_write.c, drive_seg.c;
 * compaction: drive_gc.c).
 *
 * Index keys and values are laid out in codec.h: "o"+identity -> entry,
 * "s"+id -> a segment's accounting, "m" -> the drive's counters (drive_seg.c
 * writes the last two). A value that does not decode is never taken for
 * something else: it refuses the open (segment accounting, counters) or the
 * call (an entry: ERR_CORRUPT), with a log line.
 */
#include "storage/drive_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- entries ---- */

void drive__ent_put(idx_batch_t *b, const rec_id_t *id, const ent_t *e)
{
    uint8_t key[KEY_MAX], small[ENT_FIXED + 256];
    uint8_t *val =
        ENT_FIXED + e->meta_len <= sizeof(small) ? small : xmalloc(ENT_FIXED + e->meta_len);
    idx_batch_put(b, key, codec_key_encode(key, id), val, codec_ent_encode(val, e));
    if (val != small) free(val);
}

int drive__ent_get(drive_t *d, idx_batch_t *b, const rec_id_t *id, ent_t *e, void **valbuf)
{
    uint8_t key[KEY_MAX];
    size_t kl = codec_key_encode(key, id), vl;
    const char *why = NULL;
    int rc = idx_get(d->idx, b, key, kl, valbuf, &vl);
    if (rc) return rc;
    if ((rc = codec_ent_decode(*valbuf, vl, e, &why)) != 0) {
        log_error("event=index_entry_corrupt path=%s len=%zu reason=%s", d->path, vl, why);
        free(*valbuf);
        *valbuf = NULL;
    }
    return rc;
}

int drive__to_rec_id(const drive_id_t *in, rec_id_t *out)
{
    size_t b = in->bucket ? strlen(in->bucket) : 0, k = in->key ? strlen(in->key) : 0;
    size_t v = in->version ? strlen(in->version) : 0;
    if (b == 0 || b > REC_MAX_BUCKET || k > REC_MAX_KEY || v > REC_MAX_VERSION) return ERR_INVAL;
    *out = (rec_id_t){in->bucket,
                      (uint16_t)b,
                      in->key ? in->key : "",
                      (uint16_t)k,
                      in->version ? in->version : "",
                      (uint16_t)v,
                      in->shard};
    return 0;
}

/* ---- writes ---- */

/* A data record's request, checked: 0, ERR_INVAL or ERR_TOO_LARGE. */
static int put_req(drive_t *d, req_t *r, const drive_id_t *id, const void *data, size_t len,
                   const void *meta, size_t meta_len)
{
    int rc;
    memset(r, 0, sizeof(*r));
    if ((rc = drive__to_rec_id(id, &r->id)) != 0 || (rc = rec_id_check(&r->id)) != 0) return rc;
    if (meta_len > REC_MAX_META || len > REC_MAX_PAYLOAD ||
        rec_header_len(&r->id, meta_len, len) + len > d->seg_size - d->iu)
        return ERR_TOO_LARGE;
    r->type = REC_DATA;
    r->data = data;
    r->len = len;
    r->meta = meta;
    r->meta_len = meta_len;
    return 0;
}

/* A tombstone's request: 0, ERR_INVAL, or ERR_NOT_FOUND (nothing to delete). */
static int delete_req(drive_t *d, req_t *r, const drive_id_t *id)
{
    ent_t e;
    void *vb = NULL;
    int rc;
    memset(r, 0, sizeof(*r));
    if ((rc = drive__to_rec_id(id, &r->id)) != 0 || (rc = rec_id_check(&r->id)) != 0) return rc;
    rc = drive__ent_get(d, NULL, &r->id, &e, &vb);
    free(vb);
    if (rc) return rc;
    if (e.type == REC_TOMBSTONE) return ERR_NOT_FOUND;
    r->type = REC_TOMBSTONE;
    return 0;
}

/*
 * Queue an asynchronous copy of r: the identity's names are copied behind
 * it (the caller's may go before the commit), data and meta are not.
 */
static int submit_copy(drive_t *d, const req_t *r, drive_done_fn done, void *arg)
{
    const rec_id_t *id = &r->id;
    req_t *a = xmalloc(sizeof(*a) + id->bucket_len + id->key_len + id->version_len + 3u);
    char *p = (char *)(a + 1);
    *a = *r;
    a->done_fn = done;
    a->done_arg = arg;
    memcpy(p, id->bucket, id->bucket_len);
    p[id->bucket_len] = 0;
    a->id.bucket = p;
    p += id->bucket_len + 1;
    memcpy(p, id->key, id->key_len);
    p[id->key_len] = 0;
    a->id.key = p;
    p += id->key_len + 1;
    memcpy(p, id->version, id->version_len);
    p[id->version_len] = 0;
    a->id.version = p;
    int rc = drive__submit_async(d, a);
    if (rc) free(a);
    return rc;
}

int drive_put(drive_t *d, const drive_id_t *id, const void *data, size_t len, const void *meta,
              size_t meta_len)
{
    req_t r;
    int rc = put_req(d, &r, id, data, len, meta, meta_len);
    return rc ? rc : drive__submit(d, &r);
}

int drive__thread_start(drive_t *d, pthread_t *th, void *(*fn)(void *), const char *name)
{
    int e = pthread_create(th, NULL, fn, d);
    if (e != 0) {
        log_error("event=thread_create_failed path=%s thread=%s errno=%d", d->path, name, e);
        return e == ENOMEM || e == EAGAIN ? ERR_NOMEM : ERR_IO;
    }
    pthread_setname_np(*th, name);
    return 0;
}

int drive_delete(drive_t *d, const drive_id_t *id)
{
    req_t r;
    int rc = delete_req(d, &r, id);
    return rc ? rc : drive__submit(d, &r);
}

int drive_put_async(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                    const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    req_t r;
    int rc = put_req(d, &r, id, data, len, meta, meta_len);
    return rc ? rc : submit_copy(d, &r, done, arg);
}

int drive_put_async_frees(drive_t *d, const drive_id_t *id, const void *meta, size_t meta_len,
                          drive_done_fn done, void *arg)
{
    req_t r;
    int rc = put_req(d, &r, id, NULL, 0, meta, meta_len);
    r.frees = 1;
    return rc ? rc : submit_copy(d, &r, done, arg);
}

int drive_put_async_unsynced(drive_t *d, const drive_id_t *id, const void *data, size_t len,
                             const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    req_t r;
    int rc = put_req(d, &r, id, data, len, meta, meta_len);
    r.unsynced = 1;
    return rc ? rc : submit_copy(d, &r, done, arg);
}

int drive_sync(drive_t *d)
{
    req_t r;
    memset(&r, 0, sizeof(r));
    r.sync = 1;
    return drive__submit(d, &r);
}

int drive_delete_async(drive_t *d, const drive_id_t *id, drive_done_fn done, void *arg)
{
    req_t r;
    int rc = delete_req(d, &r, id);
    return rc ? rc : submit_copy(d, &r, done, arg);
}

/* ---- stats ---- */

void drive__charge_index(drive_t *d)
{
    uint64_t now = idx_bytes_written(d->idx), delta;
    pthread_mutex_lock(&d->lock);
    delta = now > d->idx_written_seen ? now - d->idx_written_seen : 0;
    d->idx_written_seen = now;
    d->index_bytes += delta;
    d->host_bytes += delta;
    d->lifetime_host += delta;
    pthread_mutex_unlock(&d->lock);
    if (delta) budget_charge(&d->budget, delta);
}

void drive_stats(drive_t *d, drive_stats_t *st)
{
    drive__charge_index(d);
    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&d->q_lock);
    st->queued = (uint64_t)d->q_sync + d->q_async;
    pthread_mutex_unlock(&d->q_lock);
    pthread_mutex_lock(&d->lock);
    st->iu = d->iu;
    st->capacity = d->cfg.capacity;
    st->segment_size = d->seg_size;
    st->segments = d->nsegs;
    st->segments_free = d->slots > d->nsegs ? d->slots - d->nsegs : 0;
    for (uint32_t i = 0; i < d->nsegs; i++) {
        st->live_bytes += d->segs[i]->live;
        st->written_bytes += d->segs[i]->tail;
        st->segments_gc += d->segs[i]->kind == SEG_GC;
    }
    st->used_bytes = (uint64_t)d->nsegs * d->seg_size;
    st->user_bytes = d->user_bytes;
    st->host_bytes = d->host_bytes;
    st->padding_bytes = d->padding_bytes;
    st->relocated_bytes = d->relocated_bytes;
    st->index_bytes = d->index_bytes;
    st->flushes = d->flushes;
    st->unsynced_commits = d->unsynced_commits;
    st->uncopied_bytes = d->uncopied_bytes;
    st->flush_records = d->flush_records;
    st->flush_bytes = d->flush_bytes;
    st->flush_max_records = d->flush_max_records;
    st->commit_gathers = __atomic_load_n(&d->commit_gathers, __ATOMIC_RELAXED);
    st->compactions = d->compactions;
    st->segments_released = d->segments_released;
    st->segments_recycled = d->segments_recycled;
    st->segments_pooled = d->npool;
    st->tombstones_dropped = d->tombstones_dropped;
    st->throttled = d->throttled;
    st->reads_direct = __atomic_load_n(&d->reads_direct, __ATOMIC_RELAXED);
    st->reads_copied = __atomic_load_n(&d->reads_copied, __ATOMIC_RELAXED);
    st->replayed_bytes = d->replayed_bytes;
    st->lifetime_host_bytes = d->lifetime_host;
    st->write_amp = d->user_bytes ? (double)d->host_bytes / (double)d->user_bytes : 0;
    uint64_t now = d->clock->now_ns(d->clock);
    double days = (double)(now - d->open_ns) / 1e9 / 86400.0;
    double rated = d->cfg.dwpd * (double)d->cfg.capacity * 365.0 * d->cfg.warranty_years;
    double rate = days > 0 ? (double)(d->lifetime_host - d->host_at_open) / days : 0;
    double left = rated - (double)d->lifetime_host;
    st->projected_years = rate > 0 ? (left > 0 ? left : 0) / rate / 365.0 : -1;
    st->readonly = d->failed != 0;
    st->refilling = atomic_load(&d->refilling);
    pthread_mutex_unlock(&d->lock);
    st->budget_left = budget_tokens(&d->budget);
    st->budget_rate = d->budget.rate;
    st->index_disk_bytes = idx_disk_bytes(d->idx);
    st->index_mem_bytes = idx_mem_bytes(d->idx);
}

void drive_mem(drive_t *d, drive_mem_t *m)
{
    idx_mem_t im;
    bufpool_stats_t bs;
    idx_mem(d->idx, &im);
    bufpool_stats(d->bounce, &bs);
    m->index_memtables = im.memtables;
    m->index_readers = im.readers;
    m->index_cache = im.cache;
    m->buffers_kept = bs.kept_bytes;
    m->buffers_out = bs.out_bytes;
    m->writer_buffers = __atomic_load_n(&d->uw.cap, __ATOMIC_RELAXED) +
                        __atomic_load_n(&d->gw.cap, __ATOMIC_RELAXED);
}

int drive__index_flush(drive_t *d)
{
    pthread_mutex_lock(&d->lock);
    d->idx_unflushed = d->idx_unflushed_recs = 0;
    pthread_mutex_unlock(&d->lock);
    int rc = idx_flush(d->idx);
    if (rc) drive__readonly(d, "index_flush_failed", 0, 0);
    return rc;
}

int drive_index_flush(drive_t *d)
{
    return drive__index_flush(d);
}

int drive_index_compact(drive_t *d)
{
    pthread_mutex_lock(&d->lock);
    int failed = d->failed;
    pthread_mutex_unlock(&d->lock);
    if (failed) return ERR_READONLY; /* it writes nothing, index included */
    int rc = drive__index_flush(d);
    if (rc) return rc;
    rc = idx_compact(d->idx);
    drive__charge_index(d);
    return rc;
}

void drive_set_refilling(drive_t *d, int on)
{
    atomic_store(&d->refilling, on ? 1 : 0);
}

int drive_refilling(drive_t *d)
{
    return atomic_load(&d->refilling);
}
