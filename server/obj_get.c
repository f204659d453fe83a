/*
 * obj_get.c: the reader (room of the object layer; map in obj_int.h).
 *
 * obj_open pins the newest version, so no overwrite or delete can drop its
 * blocks until obj_close. A read goes through the erasure decoder, which
 * asks block_source for the blocks it needs: healthy data blocks land
 * straight in the caller's buffer (read_split), fetched in parallel on the
 * set's pool; up to m lost or corrupt ones are rebuilt from parity.
 * Read-ahead fetches the data blocks of the next stripe in the background
 * into the buffer the caller will read it into. A multipart object is read
 * part by part, each part through a reader of its own, in the order of the
 * upload's manifest. An inline object is read whole at open, by the calling
 * thread (one lookup and one read on one store, the next store on a
 * failure): no pin, no pool, no decoder.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/le.h"
#include "common/mem.h"
#include "common/uring.h"
#include "storage/rec.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ra_job {
    pool_job_t base;
    obj_reader_t *r;
    unsigned shard;
    uint32_t len;
    int rc;
    ers_crc_t crc;
    /* Through the reader's ring (ra_ring): the read in halves, its I/O the qi-th of the batch. */
    drive_id_t id;
    drive_rd_t *op;
    unsigned qi;
    uint8_t tail[4];
} ra_job_t;

struct obj_reader {
    obj_set_t *s;
    char bbucket[SHARD_MAX_BUCKET + 2];
    char *key;
    ers_decoder_t *dec;
    uint8_t *blk[OBJ_MAX_SHARDS]; /* per shard: block + crc as read (lazily allocated) */
    /*
     * Read-ahead (obj_read_ahead): the data blocks of one stripe fetched in
     * the background straight into the buffer the caller will read that
     * stripe into; the obj_read of it finds them in place. One stripe at most.
     */
    ra_job_t *ra_jobs;
    latch_t ra_latch;
    /* Or through a ring of the reader's own (local drives, io_uring): no pool thread at all. */
    uring_t *ra_ring;
    ssize_t ra_res[OBJ_MAX_SHARDS];
    int ra_by_ring; /* the read-ahead in flight went through ra_ring (ra_wait finishes it) */
    uint64_t ra_stripe;
    uint8_t *ra_buf;  /* block j of ra_stripe lands at ra_buf + j * block_size */
    uint32_t ra_mask; /* shards with a read-ahead block of ra_stripe (in flight or done) */
    /* multipart: parts in order, their sizes, and the part being read */
    int *parts;
    uint64_t *sizes;
    char **notes;      /* each part's note (obj_read_part_note), NULL entries for none */
    char (*etags)[80]; /* each part's ETag, as its Complete read it */
    char (*tags)[OBJ__PART_TAG_LEN + 1]; /* the upload of each part it took (obj__part_key) */
    struct obj_reader *cur;
    int cur_idx;
    uint32_t missing;
    /*
     * Stores skipped for this read (not up: their blocks are rebuilt from
     * parity instead of waiting for a silent node); 0 when more than m are
     * not up, or for the healer (ask_all), which wants every block's answer.
     */
    uint32_t skip;
    int ask_all;
    uint8_t *inl;    /* an inline object's bytes (info.size of them) */
    obj_info_t info; /* last: obj_open clears the fields before it and info without its umeta */
};

static void run_ra(pool_job_t *j)
{
    ra_job_t *a = (ra_job_t *)j;
    obj_reader_t *r = a->r;
    const shard_store_t *st = &r->s->st[a->shard];
    drive_id_t id = {r->bbucket, r->key, r->info.upload_id,
                     (uint32_t)(r->ra_stripe << SHARD_BITS) | a->shard};
    uint8_t c[4];
    uint8_t *dst = r->ra_buf + (size_t)a->shard * r->info.layout.block_size;
    a->crc = (ers_crc_t){0, 0, 1};
    a->rc = st->ops->read_split(st->ctx, &id, dst, a->len, c, 4, &a->crc.actual);
    a->crc.stored = le_get32(c);
}

/* Wait for the read-ahead in flight, if any. */
static void ra_wait(obj_reader_t *r)
{
    if (r->ra_by_ring) {
        uring_finish(r->ra_ring);
        for (unsigned j = 0; j < OBJ_MAX_SHARDS; j++) {
            ra_job_t *a = &r->ra_jobs[j];
            if (!(r->ra_mask & (1u << j)) || !a->op) continue;
            const shard_store_t *st = &r->s->st[j];
            a->rc = st->ops->read_end(a->op, r->ra_res[a->qi]);
            a->op = NULL;
            if (a->rc == 0) a->crc.stored = le_get32(a->tail);
        }
        r->ra_by_ring = 0;
    } else if (r->ra_mask) {
        latch_wait(&r->ra_latch);
    }
}

/*
 * The read-ahead of stripe's k data blocks through the reader's own ring, when every one of
 * their stores is a local drive that reads in halves: submitted here, finished by ra_wait
 * (the next obj_read). 0 when not taken (nothing begun): the pool threads read it.
 */
static int ra_by_ring(obj_reader_t *r, uint64_t stripe, uint8_t *buf)
{
    obj_set_t *s = r->s;
    const ers_layout_t *l = &r->info.layout;
    for (unsigned j = 0; j < l->k; j++)
        if (!s->st[j].ops->read_begin) return 0;
    if (!r->ra_ring && !(uring_usable() && (r->ra_ring = uring_new()))) return 0;
    uring_read_t q[OBJ_MAX_SHARDS];
    unsigned nq = 0;
    r->ra_stripe = stripe;
    r->ra_buf = buf;
    for (unsigned j = 0; j < l->k; j++) {
        uint32_t blen = ers_block_len(l, stripe, j);
        if (!blen) break;
        const shard_store_t *st = &s->st[j];
        ra_job_t *a = &r->ra_jobs[j];
        *a = (ra_job_t){.r = r, .shard = j, .len = blen, .crc = {0, 0, 1}};
        a->id = (drive_id_t){r->bbucket, r->key, r->info.upload_id,
                             (uint32_t)(stripe << SHARD_BITS) | j};
        drive_rd_io_t io;
        a->rc = st->ops->read_begin(st->ctx, &a->id, buf + (size_t)j * l->block_size, blen, a->tail,
                                    4, &a->crc.actual, &a->op, &io);
        if (a->op) {
            a->qi = nq;
            q[nq++] = (uring_read_t){io.fd, io.iov, io.cnt, io.pos};
        } else if (a->rc == ERR_AGAIN) {
            continue;            /* not in place: not read ahead, obj_read reads it in its turn */
        } else if (a->rc == 0) { /* nothing to read */
            a->crc.stored = le_get32(a->tail);
        }
        r->ra_mask |= 1u << j;
    }
    if (nq) {
        uring_start(r->ra_ring, nq, q, r->ra_res);
        r->ra_by_ring = 1;
    }
    return 1;
}

void obj_read_ahead(obj_reader_t *r, uint64_t off, void *buf, size_t len)
{
    obj_set_t *s = r->s;
    ra_wait(r);
    r->ra_mask = 0;
    if (r->inl) return; /* in memory already */
    if (r->info.multipart) {
        /* Within the part being read only: the next obj_read opens the next part. */
        if (r->cur_idx < 0) return;
        uint64_t base = 0;
        for (int i = 0; i < r->cur_idx; i++)
            base += r->sizes[i];
        if (off >= base && off + len <= base + r->sizes[r->cur_idx])
            obj_read_ahead(r->cur, off - base, buf, len);
        return;
    }
    const ers_layout_t *l = &r->info.layout;
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    /* Whole stripes only, and only while the drives have room: under many streams it only deepens
     * queues. */
    if (!sdata || off % sdata || off >= l->size ||
        len != (l->size - off < sdata ? l->size - off : sdata))
        return;
    /* A data store that is not up is read around (obj_read), not ahead. */
    if (obj__busy(s) || ((obj__unhealthy(s) | obj__slow(s)) & ((1u << l->k) - 1))) return;
    /* Nor while a data shard of this object failed or was slow (read around, not ahead). */
    if (ers_decoder_suspects(r->dec) & ((1u << l->k) - 1)) return;
    if (!r->ra_jobs) r->ra_jobs = xcalloc(OBJ_MAX_SHARDS, sizeof(ra_job_t));
    if (ra_by_ring(r, off / sdata, buf)) return;
    for (unsigned j = 0; j < l->k; j++)
        if (!s->st[j].ops->read_split) return;
    pool_job_t *q[OBJ_MAX_SHARDS];
    int n = 0;
    r->ra_stripe = off / sdata;
    r->ra_buf = buf;
    for (unsigned j = 0; j < l->k; j++) {
        uint32_t blen = ers_block_len(l, r->ra_stripe, j);
        if (!blen) break;
        r->ra_jobs[j] = (ra_job_t){.base = {.run = run_ra}, .r = r, .shard = j, .len = blen};
        q[n++] = &r->ra_jobs[j].base;
        r->ra_mask |= 1u << j;
    }
    if (n) pool_submit(s->pool, q, n, &r->ra_latch);
}

/* Whether shard's block of stripe was read ahead into this very place (len bytes at buf). */
static int read_ahead_in(const obj_reader_t *r, unsigned shard, uint64_t stripe, const uint8_t *buf,
                         uint32_t len)
{
    return (r->ra_mask & (1u << shard)) && r->ra_stripe == stripe && r->ra_jobs[shard].len == len &&
           buf == r->ra_buf + (size_t)shard * r->info.layout.block_size;
}

int obj__block_source(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                      ers_crc_t *crc)
{
    obj_reader_t *r = arg;
    obj_set_t *s = r->s;
    const shard_store_t *st = &s->st[shard];
    drive_id_t id = {r->bbucket, r->key, r->info.upload_id,
                     (uint32_t)(stripe << SHARD_BITS) | shard};
    /*
     * Shards of a stripe are read concurrently (obj__parallel), each into
     * its own buffer, made on first use by the one thread reading that shard.
     */
    uint8_t c[4];
    int rc;
    if ((r->skip >> shard) & 1) return ERR_IO; /* not up: rebuilt from the others */
    if (read_ahead_in(r, shard, stripe, buf, len)) {
        /* Read ahead into this very place: obj_read waited for it. */
        *crc = r->ra_jobs[shard].crc;
        return r->ra_jobs[shard].rc;
    }
    if (st->ops->read_split) {
        /* Straight into the caller's buffer; only the crc goes elsewhere. A hedged read's may be
         * given up on once parity stood in for it (obj__hedged): its store was slow. */
        rc = st->ops->read_split(st->ctx, &id, buf, len, c, 4, &crc->actual);
        if (rc == ERR_CANCELED) obj__mark_slow(s, shard);
        if (rc) return rc;
        crc->stored = le_get32(c);
        crc->computed = 1;
        return 0;
    }
    if (!r->blk[shard]) r->blk[shard] = bufpool_get(s->bufs, (size_t)r->info.layout.block_size + 4);
    uint8_t *b = r->blk[shard];
    if ((rc = st->ops->read(st->ctx, &id, 0, b, (size_t)len + 4)) != 0) {
        if (rc == ERR_CANCELED) obj__mark_slow(s, shard);
        return rc;
    }
    memcpy(buf, b, len);
    crc->stored = le_get32(b + len);
    return 0;
}

/* The blocks of a batch its drives could not begin (ERR_AGAIN), read the usual way. */
typedef struct {
    obj_reader_t *r;
    uint64_t stripe;
    unsigned shard[OBJ_MAX_SHARDS];
    uint8_t *buf[OBJ_MAX_SHARDS];
    uint32_t len[OBJ_MAX_SHARDS];
    ers_crc_t *crc[OBJ_MAX_SHARDS];
    int *rc[OBJ_MAX_SHARDS];
} batch_rest_t;

static void read_rest(void *ctx, unsigned i)
{
    batch_rest_t *b = ctx;
    *b->rc[i] = obj__block_source(b->r, b->shard[i], b->stripe, b->buf[i], b->len[i], b->crc[i]);
}

/*
 * A stripe's blocks in one go (ers_batch_fn): when every store asked is a local drive that
 * reads in halves and every block lands in place (an aligned buffer, a block the drive
 * keeps aligned), their reads go to the devices in one submission from this thread's ring
 * (uring.h), not to a pool thread each. 0 (nothing done) otherwise: obj__block_source then
 * reads them through the decoder's runner, in parallel. A block a drive cannot begin after
 * all (a record written unaligned) is read that way too, while the ring's reads are out.
 */
int obj__block_batch(void *arg, unsigned n, const unsigned *shard, uint64_t stripe,
                     uint8_t *const *buf, const uint32_t *len, ers_crc_t *crc, int *rc)
{
    obj_reader_t *r = arg;
    obj_set_t *s = r->s;
    int ra[OBJ_MAX_SHARDS];
    if (n > OBJ_MAX_SHARDS) return 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned sh = shard[i];
        ra[i] = read_ahead_in(r, sh, stripe, buf[i], len[i]);
        if ((r->skip >> sh) & 1 || ra[i]) continue;
        /* (a drive keeps records of REC_ALIGN_MIN and up aligned: smaller ones, and any
         * buffer off a 4 KiB boundary, are read through a bounce, better on pool threads) */
        if (!s->st[sh].ops->read_begin || (uintptr_t)buf[i] % 4096 || len[i] < REC_ALIGN_MIN)
            return 0;
    }
    uring_t *u = uring_thread();
    if (!u) return 0;
    drive_id_t id[OBJ_MAX_SHARDS];
    uint8_t tail[OBJ_MAX_SHARDS][4];
    drive_rd_t *op[OBJ_MAX_SHARDS];
    drive_rd_io_t io[OBJ_MAX_SHARDS];
    uring_read_t q[OBJ_MAX_SHARDS];
    unsigned qi[OBJ_MAX_SHARDS], nq = 0;
    batch_rest_t rest = {.r = r, .stripe = stripe};
    unsigned nrest = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned sh = shard[i];
        const shard_store_t *st = &s->st[sh];
        if ((r->skip >> sh) & 1) { /* not up: rebuilt from the others */
            rc[i] = ERR_IO;
            continue;
        }
        if (ra[i]) { /* read ahead into this very place: obj_read waited for it */
            crc[i] = r->ra_jobs[sh].crc;
            rc[i] = r->ra_jobs[sh].rc;
            continue;
        }
        id[i] = (drive_id_t){r->bbucket, r->key, r->info.upload_id,
                             (uint32_t)(stripe << SHARD_BITS) | sh};
        op[i] = NULL;
        rc[i] = st->ops->read_begin(st->ctx, &id[i], buf[i], len[i], tail[i], 4, &crc[i].actual,
                                    &op[i], &io[i]);
        if (op[i]) {
            q[nq] = (uring_read_t){io[i].fd, io[i].iov, io[i].cnt, io[i].pos};
            qi[nq++] = i;
        } else if (rc[i] == ERR_AGAIN) {
            rest.shard[nrest] = sh;
            rest.buf[nrest] = buf[i];
            rest.len[nrest] = len[i];
            rest.crc[nrest] = &crc[i];
            rest.rc[nrest++] = &rc[i];
        } else if (rc[i] == 0) { /* nothing to read */
            crc[i].stored = le_get32(tail[i]);
            crc[i].computed = 1;
        }
    }
    ssize_t res[OBJ_MAX_SHARDS];
    if (nq) uring_start(u, nq, q, res);
    if (nrest) obj__parallel(s, nrest, read_rest, &rest);
    if (nq) uring_finish(u);
    for (unsigned j = 0; j < nq; j++) {
        unsigned i = qi[j];
        rc[i] = s->st[shard[i]].ops->read_end(op[i], res[j]);
        if (rc[i] == 0) {
            crc[i].stored = le_get32(tail[i]);
            crc[i].computed = 1;
        }
    }
    return 1;
}

int obj__read_manifest(obj_set_t *s, const char *upload, int nparts, int **part_no,
                       uint64_t **sizes, char (**tags)[OBJ__PART_TAG_LEN + 1])
{
    return obj__read_manifest_all(s, upload, nparts, NULL, part_no, sizes, tags, NULL, NULL);
}

/*
 * One manifest line: "<part>[.<tag>] <size> <etag>[ <note>]". The tag names
 * the upload of the part the Complete took; manifests written before tags
 * have none (the part's key then has none either). p moves past the line.
 */
int obj__manifest_line(const char **pp, int *part, unsigned long long *size, char tag[33],
                       char et[80], const char **note, size_t *note_len)
{
    const char *p = *pp;
    char *end;
    long pn = strtol(p, &end, 10);
    if (end == p || pn < 1 || pn > OBJ_MPU_MAX_PARTS) return ERR_CORRUPT;
    p = end;
    tag[0] = 0;
    if (*p == '.') {
        size_t tl = strspn(p + 1, "0123456789abcdef");
        if (tl != OBJ__PART_TAG_LEN) return ERR_CORRUPT;
        memcpy(tag, p + 1, tl);
        tag[tl] = 0;
        p += 1 + tl;
    }
    int used;
    if (*p != ' ' || sscanf(p, "%llu %79s%n", size, et, &used) != 2) return ERR_CORRUPT;
    p += used;
    *part = (int)pn;
    /* An optional note ends the line (manifests written before notes have none). */
    while (*p == ' ')
        p++;
    *note = p;
    *note_len = strcspn(p, "\n");
    p += *note_len;
    while (*p == '\n')
        p++;
    *pp = p;
    return 0;
}

int obj__read_manifest_all(obj_set_t *s, const char *upload, int nparts, int *nparts_out,
                           int **part_no, uint64_t **sizes, char (**tags)[OBJ__PART_TAG_LEN + 1],
                           char ***notes, char (**etags)[80])
{
    obj_info_t mi;
    int err;
    obj_reader_t *m = obj_open(s, MPU_MANIFEST, upload, &mi, &err);
    if (!m) return err;
    char *text = xmalloc(mi.size + 1);
    err = obj_read(m, 0, text, mi.size);
    obj_close(m);
    text[mi.size] = 0;
    if (nparts < 0) { /* as many as it has lines */
        nparts = 0;
        for (const char *q = text; *q; q++)
            nparts += *q == '\n';
        if (nparts > OBJ_MPU_MAX_PARTS) err = ERR_CORRUPT;
    }
    if (nparts_out) *nparts_out = nparts;
    size_t n = nparts > 0 ? (size_t)nparts : 1;
    *part_no = xcalloc(n, sizeof(int));
    *sizes = xcalloc(n, sizeof(uint64_t));
    if (tags) *tags = xcalloc(n, sizeof(**tags));
    if (notes) *notes = xcalloc(n, sizeof(char *));
    if (etags) *etags = xcalloc(n, sizeof(**etags));
    const char *p = text;
    for (int i = 0; !err && i < nparts; i++) {
        unsigned long long sz;
        int pn;
        char et[80], tag[OBJ__PART_TAG_LEN + 1];
        const char *note;
        size_t nl;
        if ((err = obj__manifest_line(&p, &pn, &sz, tag, et, &note, &nl)) != 0) break;
        (*part_no)[i] = pn;
        (*sizes)[i] = sz;
        if (tags) memcpy((*tags)[i], tag, sizeof(tag));
        if (etags) snprintf((*etags)[i], sizeof(**etags), "%s", et);
        if (notes && nl) {
            (*notes)[i] = xmalloc(nl + 1);
            memcpy((*notes)[i], note, nl);
            (*notes)[i][nl] = 0;
        }
    }
    free(text);
    if (err) {
        free(*part_no);
        free(*sizes);
        *part_no = NULL;
        *sizes = NULL;
        if (tags) {
            free(*tags);
            *tags = NULL;
        }
        if (notes) {
            for (int i = 0; i < nparts; i++)
                free((*notes)[i]);
            free(*notes);
            *notes = NULL;
        }
        if (etags) {
            free(*etags);
            *etags = NULL;
        }
    }
    return err;
}

obj_reader_t *obj_open(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                       int *err)
{
    return obj_open_version(s, bucket, key, NULL, info, err);
}

/* A version's head for reading: ERR_NOT_FOUND for a delete marker (its head in *info). */
static int stat_readable(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                         obj_info_t *info)
{
    int rc = obj_stat_version(s, bucket, key, vid, info);
    return rc == 0 && info->deleted ? ERR_NOT_FOUND : rc;
}

/*
 * stat_readable; for the current version of a set that stores objects
 * inline, the first store's record is read whole with its head (*ibuf,
 * malloc'd, the caller frees): *have says it holds the version's bytes.
 */
static int look(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                obj_info_t *info, uint8_t **ibuf, int *have)
{
    if (vid || !s->inline_max) return stat_readable(s, bucket, key, vid, info);
    *ibuf = xmalloc(s->inline_max);
    int rc = obj__newest_inline(s, bucket, key, info, *ibuf, s->inline_max, have);
    if (rc == ERR_NOT_FOUND) obj_info_clear(info); /* (not a delete marker: nothing) */
    if (rc != 0 || !info->deleted) return rc;
    /* What obj__locate makes of the newest head: a tombstone is no version at all, a delete
     * marker is "not found" with its head in *info. */
    if (!info->marker) obj_info_clear(info);
    return ERR_NOT_FOUND;
}

static obj_reader_t *open_version(obj_set_t *s, const char *bucket, const char *key,
                                  const char *vid, obj_info_t *info, int *err);

obj_reader_t *obj_open_version(obj_set_t *s, const char *bucket, const char *key, const char *vid,
                               obj_info_t *info, int *err)
{
    obj_set_t *set = obj__route(s, bucket, key);
    obj_reader_t *r = open_version(set, bucket, key, vid, info, err);
    if (!r && *err == ERR_NOT_FOUND && obj_set_pools(s) > 1) {
        /* Routed just before its key moved off a draining pool (obj_move.c): where it is. */
        obj_set_t *now = obj__route(s, bucket, key);
        if (now != set) r = open_version(now, bucket, key, vid, info, err);
    }
    return r;
}

static obj_reader_t *open_version(obj_set_t *s, const char *bucket, const char *key,
                                  const char *vid, obj_info_t *info, int *err)
{
    /* Not calloc: that cleared the 16 KiB of info.umeta on every GET, for a few bytes used. */
    obj_reader_t *r = xmalloc(sizeof(*r));
    memset(r, 0, offsetof(obj_reader_t, info));
    obj_info_clear(&r->info);
    r->s = s;
    latch_init(&r->ra_latch);
    r->cur_idx = -1;
    /*
     * Pin the version, then look again: a writer drops the old version only
     * after its new heads are written, so a version still newest after the
     * pin is taken cannot lose its blocks until obj_close. The second look is
     * skipped when no version was dropped since before the first (the drop
     * epoch, read under the pin lock, has not moved).
     */
    for (int tries = 0;; tries++) {
        obj_info_t again;
        uint8_t *ibuf = NULL;
        int have = 0;
        uint64_t e0 = __atomic_load_n(&s->drop_epoch, __ATOMIC_ACQUIRE);
        if ((*err = look(s, bucket, key, vid, &r->info, &ibuf, &have)) != 0) {
            free(ibuf);
            if (info && *err == ERR_NOT_FOUND && r->info.marker)
                obj_info_copy(info, &r->info);
            else if (info)
                obj_info_clear(info);
            latch_destroy(&r->ra_latch);
            free(r);
            return NULL;
        }
        if (r->info.inl && have) {
            r->inl = ibuf; /* read with the heads, and checked */
            break;
        }
        free(ibuf);
        if (r->info.inl) {
            /* The bytes are read now, so nothing can take them away: no pin. */
            r->inl = xmalloc(r->info.size ? r->info.size : 1);
            *err = obj__inline_load(s, bucket, key, &r->info, r->inl);
            if (*err == 0) break;
            free(r->inl);
            r->inl = NULL;
            /* Replaced since the look (no store holds it now): look again. */
            if (*err != ERR_NOT_FOUND || tries == 16) {
                if (*err == ERR_NOT_FOUND) *err = ERR_AGAIN;
                if (info) obj_info_clear(info);
                latch_destroy(&r->ra_latch);
                free(r);
                return NULL;
            }
            continue;
        }
        /* No version was dropped since before the look: what it found is still whole. */
        if (obj__pin(s, r->info.upload_id) == e0) break;
        if (stat_readable(s, bucket, key, vid, &again) == 0 &&
            strcmp(again.upload_id, r->info.upload_id) == 0)
            break;
        obj__unpin(s, r->info.upload_id);
        if (tries == 16) {
            *err = ERR_AGAIN; /* overwritten faster than it can be opened */
            latch_destroy(&r->ra_latch);
            free(r);
            return NULL;
        }
    }
    obj__blk_bucket(r->bbucket, bucket);
    r->key = xstrdup(key);
    if (r->inl) {
        /* Read whole already. */
    } else if (r->info.multipart) {
        if ((*err = obj__read_manifest_all(s, r->info.upload_id, r->info.nparts, NULL, &r->parts,
                                           &r->sizes, &r->tags, &r->notes, &r->etags)) != 0) {
            obj_close(r);
            return NULL;
        }
    } else {
        if (r->info.layout.k != s->k || r->info.layout.m != s->m) {
            *err = ERR_CORRUPT;
            obj_close(r);
            return NULL;
        }
        r->dec = ers_decoder_new(&r->info.layout, err);
        if (!r->dec) {
            obj_close(r);
            return NULL;
        }
        ers_decoder_set_parallel(r->dec, obj__parallel, s);
        ers_decoder_set_batch(r->dec, obj__block_batch);
        ers_decoder_set_bufpool(r->dec, s->bufs);
        /* A local read cannot be given up on (obj__hedged): with no store behind the
         * network, hedging would only hand the caller's own read to a pool thread and add
         * a lock every block's end goes through (1 MiB GETs at 8 clients: 16.7 -> 11 context
         * switches a GET, +4..24% GET/s). */
        if (s->hedge_ms && s->remote) ers_decoder_set_hedged(r->dec, obj__hedged, s);
    }
    if (info) obj_info_copy(info, &r->info);
    return r;
}

/* A multipart object: the parts that [off, off+len) spans, each through its own reader. */
static int read_parts(obj_reader_t *r, uint64_t off, void *buf, size_t len)
{
    if (off > r->info.size || len > r->info.size - off) return ERR_RANGE;
    uint8_t *out = buf;
    uint64_t base = 0;
    for (int i = 0; i < r->info.nparts && len > 0; i++) {
        uint64_t psz = r->sizes[i];
        if (off >= base + psz) {
            base += psz;
            continue;
        }
        if (r->cur_idx != i) {
            char pk[OBJ__PART_KEY_MAX];
            int err;
            obj_close(r->cur);
            obj__read_part_key(r, i, pk);
            obj_info_t pi;
            r->cur = obj_open(r->s, MPU_PARTS, pk, &pi, &err);
            r->cur_idx = r->cur ? i : -1;
            if (!r->cur) return err == ERR_NOT_FOUND ? ERR_CORRUPT : err;
            if (r->etags && strcmp(pi.etag, r->etags[i]) != 0) {
                /* Not the part its Complete read: a part's commit through another node that
                 * passed its check of the upload before the Complete closed it, and landed
                 * after. Its bytes are not this object's: never served as such. (Said at
                 * each power of two: every GET of such an object finds it.) */
                static uint64_t seen;
                uint64_t n = __atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED);
                if (!(n & (n - 1)))
                    log_error("event=multipart_part_replaced key=%s upload=%s part=%d etag=%s "
                              "manifest_etag=%s times=%llu",
                              r->key, r->info.upload_id, r->parts[i], pi.etag, r->etags[i],
                              (unsigned long long)n);
                obj_close(r->cur);
                r->cur = NULL;
                r->cur_idx = -1;
                return ERR_CORRUPT;
            }
        }
        uint64_t in = off - base, n = psz - in < len ? psz - in : len;
        int rc = obj_read(r->cur, in, out, (size_t)n);
        if (rc) {
            r->missing = r->cur->missing;
            return rc;
        }
        out += n;
        off += n;
        len -= (size_t)n;
        base += psz;
    }
    return 0;
}

int obj_read(obj_reader_t *r, uint64_t off, void *buf, size_t len)
{
    if (r->inl) {
        if (off > r->info.size || len > r->info.size - off) return ERR_RANGE;
        memcpy(buf, r->inl + off, len);
        return 0;
    }
    if (r->info.multipart) return read_parts(r, off, buf, len);
    const ers_layout_t *l = &r->info.layout;
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    ra_wait(r); /* its blocks are used below (block_source checks where they are), or stale */
    if (r->ra_mask && (len == 0 || off / sdata != r->ra_stripe)) r->ra_mask = 0;
    r->skip = r->ask_all ? 0 : obj__unhealthy(r->s);
    if (__builtin_popcount(r->skip) > (int)l->m) r->skip = 0; /* cannot do without them */
    /* Parity is asked in their place in the same round; a slow store is still asked when the
     * others cannot do without it (one not up fails at once, above). */
    uint32_t avoid = r->ask_all ? 0 : r->skip | obj__slow(r->s);
    ers_decoder_avoid(r->dec, __builtin_popcount(avoid) > (int)l->m ? r->skip : avoid);
    int rc = ers_decoder_read(r->dec, off, len, buf, obj__block_source, r);
    r->missing = rc ? ers_decoder_missing(r->dec) : 0;
    r->ra_mask = 0;
    return rc;
}

size_t obj_read_unit(const obj_reader_t *r)
{
    return (size_t)r->s->k * r->s->block;
}

uint32_t obj_read_missing(const obj_reader_t *r)
{
    return r->missing;
}

void obj_close(obj_reader_t *r)
{
    if (!r) return;
    obj_close(r->cur);
    ra_wait(r); /* no read may still write into the buffers freed below */
    latch_destroy(&r->ra_latch);
    uring_free(r->ra_ring);
    free(r->ra_jobs);
    if (r->inl)
        free(r->inl);
    else
        obj__unpin(r->s, r->info.upload_id); /* every other reader holds a pin from obj_open */
    ers_decoder_free(r->dec);
    for (int i = 0; r->notes && i < r->info.nparts; i++)
        free(r->notes[i]);
    free(r->notes);
    free(r->etags);
    free(r->tags);
    free(r->parts);
    free(r->sizes);
    for (int i = 0; i < OBJ_MAX_SHARDS; i++)
        bufpool_put(r->s->bufs, r->blk[i]);
    free(r->key);
    free(r);
}

int obj_read_parts(const obj_reader_t *r, const int **numbers, const uint64_t **sizes)
{
    if (!r->info.multipart) return 0;
    *numbers = r->parts;
    *sizes = r->sizes;
    return r->info.nparts;
}

const char *obj__read_part_etag(const obj_reader_t *r, int i)
{
    if (!r->info.multipart || !r->etags || i < 0 || i >= r->info.nparts) return "";
    return r->etags[i];
}

void obj__read_part_key(const obj_reader_t *r, int i, char *out)
{
    obj__part_key(out, OBJ__PART_KEY_MAX, r->info.upload_id, r->parts[i],
                  r->tags ? r->tags[i] : "");
}

const char *obj_read_part_note(const obj_reader_t *r, int i)
{
    if (!r->info.multipart || !r->notes || i < 0 || i >= r->info.nparts || !r->notes[i]) return "";
    return r->notes[i];
}

void obj__reader_ask_all(obj_reader_t *r)
{
    r->ask_all = 1;
}

ers_decoder_t *obj__reader_decoder(obj_reader_t *r)
{
    return r->dec;
}

const uint8_t *obj_read_inline(const obj_reader_t *r)
{
    return r->inl;
}

const uint8_t *obj__reader_inline(const obj_reader_t *r)
{
    return r->inl;
}
