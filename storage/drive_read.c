/*
 * drive_read.c: reads and listings of the drive engine (map in
 * drive_int.h): metadata from the index, payload ranges verified chunk by
 * chunk (straight into the caller's buffer when aligned), whole records,
 * and ordered scans of a bucket's entries with their metadata.
 */
#include "storage/drive_int.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- reads ---- */

/* What drive_stat and drive_get say of a record from its index entry. */
static void stat_fill(const ent_t *e, drive_stat_t *st, void *meta, size_t meta_cap)
{
    st->len = e->payload_len;
    st->seq = e->seq;
    st->crc = e->hdr_crc;
    st->meta_len = e->meta_len;
    if (meta && e->meta_len) memcpy(meta, e->meta, e->meta_len < meta_cap ? e->meta_len : meta_cap);
}

int drive_stat(drive_t *d, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap)
{
    rec_id_t rid;
    ent_t e;
    void *vb = NULL;
    int rc;
    if ((rc = drive__to_rec_id(id, &rid)) != 0) return rc;
    if ((rc = drive__ent_get(d, NULL, &rid, &e, &vb)) != 0) return rc;
    if (e.type == REC_TOMBSTONE) {
        free(vb);
        return ERR_NOT_FOUND;
    }
    stat_fill(&e, st, meta, meta_cap);
    free(vb);
    return 0;
}

/*
 * A payload read of the record described by e: [off, off+len+tail_len), the
 * first len bytes into out, the rest into tail; *out_crc (if asked) the
 * crc32c of out as it ends up.
 *
 * Direct when the payload from off starts on a DIO_ALIGN boundary of the
 * segment and out is aligned: the aligned bulk of out is read by the device
 * straight into it and its chunks are verified there, so the crc of out is
 * the combination of crcs this pass computed anyway. Otherwise through a
 * bounce buffer and a copy, and the crc of out is computed over the copy.
 */
typedef struct {
    uint64_t off;
    uint8_t *out, *tail;
    size_t len0, tail_len;
    uint32_t *out_crc;
    /* The plan: chunks c0..c1, read as [pstart, pend) of the segment; `direct` bytes into out. */
    uint32_t c0, c1;
    uint64_t pstart, pend;
    size_t direct;
    int near; /* one read for the header and the chunks */
    /* What was read: the header at h, the chunks at p (or out and rest when direct). */
    uint8_t *hbuf, *pbuf, *h, *p, *rest;
} extent_t;

static void extent_plan(const ent_t *e, extent_t *x)
{
    size_t len = x->len0 + x->tail_len;
    uint64_t off = x->off, rec = e->off, pay = rec + e->hdr_len;
    x->c0 = (uint32_t)(off / REC_CHUNK);
    x->c1 = (uint32_t)((off + len - 1) / REC_CHUNK);
    x->pstart = pay + (uint64_t)x->c0 * REC_CHUNK;
    x->pend = pay + ((uint64_t)(x->c1 + 1) * REC_CHUNK < e->payload_len
                         ? (uint64_t)(x->c1 + 1) * REC_CHUNK
                         : e->payload_len);
    x->near = x->pstart - pay <= (16u << 10);
    x->direct = 0;
    if (off == (uint64_t)x->c0 * REC_CHUNK && x->pstart % DIO_ALIGN == 0 &&
        (uintptr_t)x->out % DIO_ALIGN == 0)
        x->direct = align_down(x->len0, DIO_ALIGN);
    x->hbuf = x->pbuf = x->h = x->p = x->rest = NULL;
}

/* The plan's reads, here. */
static int extent_io(drive_t *d, seg_t *s, const ent_t *e, extent_t *x)
{
    uint64_t rec = e->off;
    if (x->direct && x->near)
        return drive__pread_around(d, s->fd, rec, x->pend, x->out, x->pstart, x->direct, &x->hbuf,
                                   &x->h, &x->rest);
    if (x->direct) {
        int rc = drive__pread_aligned(d, s->fd, rec, rec + e->hdr_len, &x->hbuf, &x->h);
        return rc ? rc
                  : drive__pread_around(d, s->fd, x->pstart, x->pend, x->out, x->pstart, x->direct,
                                        &x->pbuf, &x->p, &x->rest);
    }
    if (x->near) {
        int rc = drive__pread_aligned(d, s->fd, rec, x->pend, &x->hbuf, &x->h);
        if (!rc) x->p = x->h + (x->pstart - rec);
        return rc;
    }
    int rc = drive__pread_aligned(d, s->fd, rec, rec + e->hdr_len, &x->hbuf, &x->h);
    return rc ? rc : drive__pread_aligned(d, s->fd, x->pstart, x->pend, &x->pbuf, &x->p);
}

/* The record read must be the one the index names, intact: then the bytes go where asked. */
static int extent_check(drive_t *d, seg_t *s, const ent_t *e, const rec_id_t *id, extent_t *x)
{
    rec_view_t v;
    if (rec_parse_header_seeded(x->h, e->hdr_len, s->seed, &v) != 0 || v.hdr_crc != e->hdr_crc ||
        v.seq != e->seq || !rec_id_equal(&v.id, id))
        goto bad;
    if (x->direct) {
        /* Chunk c covers [x0, x1) of what was read: out below `direct`, rest above. */
        uint32_t crc = 0;
        size_t direct = x->direct;
        for (uint32_t c = x->c0; c <= x->c1; c++) {
            size_t x0 = (size_t)(c - x->c0) * REC_CHUNK, x1 = (size_t)(x->pend - x->pstart);
            if (x1 > x0 + REC_CHUNK) x1 = x0 + REC_CHUNK;
            uint32_t cc = 0;
            if (x0 < direct) {
                size_t n = (x1 < direct ? x1 : direct) - x0;
                cc = crc32c(0, x->out + x0, n);
                if (x->out_crc) crc = crc32c_combine(crc, cc, n);
            }
            if (x1 > direct) {
                size_t from = x0 > direct ? x0 : direct;
                cc = crc32c(cc, x->rest + (from - direct), x1 - from);
            }
            if (cc != rec_chunk_crc(&v, c)) goto bad;
        }
        memcpy(x->out + direct, x->rest, x->len0 - direct);
        if (x->tail_len) memcpy(x->tail, x->rest + (x->len0 - direct), x->tail_len);
        if (x->out_crc) *x->out_crc = crc32c(crc, x->out + direct, x->len0 - direct);
        __atomic_fetch_add(&d->reads_direct, 1, __ATOMIC_RELAXED);
    } else {
        if (rec_verify_chunks(&v, x->p, x->c0, x->c1) != 0) goto bad;
        const uint8_t *src = x->p + (x->off - (uint64_t)x->c0 * REC_CHUNK);
        memcpy(x->out, src, x->len0);
        if (x->tail_len) memcpy(x->tail, src + x->len0, x->tail_len);
        if (x->out_crc) *x->out_crc = crc32c(0, x->out, x->len0);
        __atomic_fetch_add(&d->reads_copied, 1, __ATOMIC_RELAXED);
    }
    return 0;
bad:
    log_error("event=read_corrupt seg=%u off=%llu seq=%llu", s->id, (unsigned long long)e->off,
              (unsigned long long)e->seq);
    return ERR_CORRUPT;
}

static void extent_free(drive_t *d, extent_t *x)
{
    drive__bounce_put(d, x->hbuf);
    drive__bounce_put(d, x->pbuf);
}

static int read_extent(drive_t *d, seg_t *s, const ent_t *e, const rec_id_t *id, uint64_t off,
                       uint8_t *out, size_t len0, uint8_t *tail, size_t tail_len, uint32_t *out_crc)
{
    extent_t x = {.off = off,
                  .out = out,
                  .tail = tail,
                  .len0 = len0,
                  .tail_len = tail_len,
                  .out_crc = out_crc};
    extent_plan(e, &x);
    int rc = extent_io(d, s, e, &x);
    if (!rc) rc = extent_check(d, s, e, id, &x);
    extent_free(d, &x);
    return rc;
}

/*
 * The live record of an identity, its segment held against release: *e (its
 * value buffer in *vb, freed by the caller) and *s (drive__seg_release).
 * Compaction may move the record between lookup and acquire: look again.
 * ERR_NOT_FOUND for none or a tombstone.
 */
static int record_acquire(drive_t *d, const rec_id_t *rid, ent_t *e, void **vb, seg_t **s)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        int rc = drive__ent_get(d, NULL, rid, e, vb);
        if (rc) return rc;
        if (e->type == REC_TOMBSTONE) {
            free(*vb);
            *vb = NULL;
            return ERR_NOT_FOUND;
        }
        if ((*s = drive__seg_acquire(d, e->seg)) != NULL) return 0;
        free(*vb);
        *vb = NULL;
    }
    return ERR_IO;
}

struct drive_rd {
    drive_t *d;
    seg_t *s;
    ent_t e;
    void *vb;
    rec_id_t rid;
    extent_t x;
    drive_around_t a;
};

int drive_read_begin(drive_t *d, const drive_id_t *id, uint64_t off, void *buf, size_t len,
                     void *tail, size_t tail_len, uint32_t *buf_crc, drive_rd_t **op,
                     drive_rd_io_t *io)
{
    *op = NULL;
    drive_rd_t *r = xcalloc(1, sizeof(*r));
    int rc = drive__to_rec_id(id, &r->rid);
    if (!rc) rc = record_acquire(d, &r->rid, &r->e, &r->vb, &r->s);
    if (rc) {
        free(r);
        return rc;
    }
    r->d = d;
    r->x = (extent_t){.off = off,
                      .out = buf,
                      .tail = tail,
                      .len0 = len,
                      .tail_len = tail_len,
                      .out_crc = buf_crc};
    if (off > r->e.payload_len || len + tail_len > r->e.payload_len - off) {
        rc = ERR_RANGE;
    } else if (len + tail_len == 0) {
        if (buf_crc) *buf_crc = 0;
    } else {
        extent_plan(&r->e, &r->x);
        if (r->x.direct && r->x.near && !drive__io_hooked()) {
            /* The one preadv of a whole aligned block: the caller's to do. */
            drive__around_plan(d, r->e.off, r->x.pend, r->x.out, r->x.pstart, r->x.direct, &r->a);
            io->fd = r->s->fd;
            io->iov = r->a.iov;
            io->cnt = r->a.cnt;
            io->pos = r->a.pos;
            io->len = r->a.len;
            *op = r;
            return 0;
        }
        rc = ERR_AGAIN; /* not one preadv into place: the caller reads it (drive_read_split) */
    }
    drive__seg_release(d, r->s);
    free(r->vb);
    free(r);
    return rc;
}

int drive_read_end(drive_rd_t *r, ssize_t res)
{
    drive_t *d = r->d;
    /*
     * Short, interrupted, refused or failed: the rest read here, from where it stopped (all
     * of it after an error). A failure the device means fails again here (ERR_IO); one of the
     * caller's I/O path (io_uring refusing what preadv takes) costs a read, not the block.
     */
    size_t done = res > 0 ? (size_t)res : 0;
    int rc = done < r->a.len ? drive__around_rest(r->s->fd, &r->a, done) : 0;
    if (!rc) {
        r->x.hbuf = r->a.buf;
        r->x.h = r->a.head;
        r->x.rest = r->a.rest;
        rc = extent_check(d, r->s, &r->e, &r->rid, &r->x);
        extent_free(d, &r->x);
    } else {
        drive__bounce_put(d, r->a.buf);
    }
    drive__seg_release(d, r->s);
    free(r->vb);
    free(r);
    return rc;
}

int drive_read_split(drive_t *d, const drive_id_t *id, uint64_t off, void *buf, size_t len,
                     void *tail, size_t tail_len, uint32_t *buf_crc)
{
    rec_id_t rid;
    ent_t e;
    void *vb = NULL;
    seg_t *s;
    int rc;
    if ((rc = drive__to_rec_id(id, &rid)) != 0 || (rc = record_acquire(d, &rid, &e, &vb, &s)) != 0)
        return rc;
    if (off > e.payload_len || len + tail_len > e.payload_len - off) {
        rc = ERR_RANGE;
    } else if (len + tail_len == 0) {
        if (buf_crc) *buf_crc = 0;
    } else {
        rc = read_extent(d, s, &e, &rid, off, buf, len, tail, tail_len, buf_crc);
    }
    drive__seg_release(d, s);
    free(vb);
    return rc;
}

int drive_read(drive_t *d, const drive_id_t *id, uint64_t off, void *buf, size_t len)
{
    return drive_read_split(d, id, off, buf, len, NULL, 0, NULL);
}

int drive_get(drive_t *d, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap,
              void *buf, size_t cap)
{
    rec_id_t rid;
    ent_t e;
    void *vb = NULL;
    seg_t *s;
    int rc;
    if ((rc = drive__to_rec_id(id, &rid)) != 0 || (rc = record_acquire(d, &rid, &e, &vb, &s)) != 0)
        return rc;
    stat_fill(&e, st, meta, meta_cap);
    /* The index entry and the record it names are one: read_extent checks the header's crc
     * and sequence against the entry, so the metadata above is this payload's. */
    if (e.payload_len > cap)
        rc = ERR_RANGE;
    else if (e.payload_len)
        rc = read_extent(d, s, &e, &rid, 0, buf, (size_t)e.payload_len, NULL, 0, NULL);
    drive__seg_release(d, s);
    free(vb);
    return rc;
}

/*
 * The index key a scan starts at: "o" bucket 0, then what `from` says (see
 * codec.h: key 0 version 0 shard, so key + 0x01 sorts past every version
 * of key, and key 0 version 0x01 past every shard of that version). Past a
 * prefix: its successor (last byte not 0xff incremented, 0xff bytes
 * dropped), or past the whole bucket when there is none. Returns the
 * length, 0 for arguments too long.
 */
static size_t scan_start(uint8_t *k, size_t bl, const drive_from_t *from)
{
    size_t l = 2 + bl, kl = from->key ? strlen(from->key) : 0;
    if (from->how == DRIVE_FROM_START) return l;
    if (kl > REC_MAX_KEY) return 0;
    memcpy(k + l, from->key ? from->key : "", kl);
    if (from->how == DRIVE_PAST_KEY) {
        k[l + kl] = 1;
        return l + kl + 1;
    }
    if (from->how == DRIVE_PAST_VERSION) {
        size_t vl = from->version ? strlen(from->version) : 0;
        if (vl > REC_MAX_VERSION) return 0;
        k[l + kl] = 0;
        memcpy(k + l + kl + 1, from->version ? from->version : "", vl);
        k[l + kl + 1 + vl] = 1;
        return l + kl + vl + 2;
    }
    while (kl && k[l + kl - 1] == 0xff)
        kl--;
    if (!kl) {
        k[1 + bl] = 1; /* past the bucket: the walk ends at once */
        return 2 + bl;
    }
    k[l + kl - 1]++;
    return l + kl;
}

int drive_scan(drive_t *d, const char *bucket, const char *prefix, const drive_from_t *from,
               drive_scan_fn fn, void *arg)
{
    size_t bl = strlen(bucket), pl = prefix ? strlen(prefix) : 0;
    uint8_t base[KEY_MAX], start[KEY_MAX];
    size_t sl;
    int rc = 0;
    static const drive_from_t none = {DRIVE_FROM_START, NULL, NULL};

    if (bl == 0 || bl > REC_MAX_BUCKET || pl > REC_MAX_KEY) return ERR_INVAL;
    if (!from) from = &none;
    base[0] = 'o';
    memcpy(base + 1, bucket, bl);
    base[1 + bl] = 0;
    memcpy(base + 2 + bl, prefix ? prefix : "", pl);
    memcpy(start, base, 2 + bl);
    if ((sl = scan_start(start, bl, from)) == 0) return ERR_INVAL;
    /* The later of the two starts: the prefix's, or from's. */
    size_t bls = 2 + bl + pl;
    int c = memcmp(start, base, sl < bls ? sl : bls);
    if (c < 0 || (c == 0 && sl < bls)) {
        memcpy(start, base, bls);
        sl = bls;
    }
    /* Where the walk ends: past every key under the prefix (past the bucket's heads for none). */
    uint8_t end[KEY_MAX];
    size_t el = bls;
    memcpy(end, base, bls);
    while (el > 2 + bl && end[el - 1] == 0xff)
        el--;
    end[el - 1]++; /* the bucket's 0 when the prefix is all 0xff: "o" bucket 0x01 */
    idx_iter_t *it = idx_iter_range(d->idx, start, sl, end, el);
    for (; idx_iter_valid(it); idx_iter_next(it)) {
        size_t kl, vl;
        const char *k = idx_iter_key(it, &kl), *v = idx_iter_value(it, &vl);
        const char *why = NULL;
        rec_id_t rid;
        ent_t e;
        /* Past the bucket: done. Inside it, a key or value that does not decode is an error. */
        if (kl < 2 + bl || memcmp(k, base, 2 + bl) != 0) break;
        int bad = codec_key_decode(k, kl, &rid) != 0;
        if (bad)
            why = "key";
        else if (pl && (rid.key_len < pl || memcmp(rid.key, prefix, pl) != 0))
            break;
        else
            bad = codec_ent_decode(v, vl, &e, &why) != 0;
        if (bad) {
            log_error("event=list_index_corrupt path=%s key_len=%zu val_len=%zu reason=%s", d->path,
                      kl, vl, why);
            rc = ERR_CORRUPT;
            break;
        }
        if (e.type == REC_TOMBSTONE) continue;
        /* The names as the index key holds them: each ends in the key's 0 separator, so they
         * are NUL-terminated in place (valid until the iterator moves), no copy. */
        drive_id_t id = {bucket, rid.key, rid.version, rid.shard};
        drive_stat_t st = {e.payload_len, e.seq, e.hdr_crc, e.meta_len};
        if ((rc = fn(arg, &id, &st, e.meta)) != 0) break;
    }
    /* Ended by running out of keys, or by an error (then the listing is short: say so). */
    if (rc == 0) rc = idx_iter_status(it);
    idx_iter_free(it);
    return rc;
}

typedef struct {
    drive_list_fn fn;
    void *arg;
} list_shim_t;

static int list_shim(void *arg, const drive_id_t *id, const drive_stat_t *st, const void *meta)
{
    list_shim_t *l = arg;
    (void)meta;
    return l->fn(l->arg, id, st);
}

int drive_list(drive_t *d, const char *bucket, const char *prefix, const char *after,
               drive_list_fn fn, void *arg)
{
    drive_from_t from = {DRIVE_FROM_START, NULL, NULL};
    list_shim_t l = {fn, arg};
    if (after && after[0]) {
        if (strlen(after) > REC_MAX_KEY) return ERR_INVAL;
        from = (drive_from_t){DRIVE_PAST_KEY, after, NULL};
    }
    return drive_scan(d, bucket, prefix, &from, list_shim, &l);
}
