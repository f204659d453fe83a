/*
 * ers_encode: the streaming encoder (ers.h): bytes in, each stripe's k data
 * and m parity blocks out to the sink, from its own buffers or, placed, from
 * the caller's (ers_encoder_place).
 */
#include "erasure/ers_int.h"

#include "common/bufpool.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/mem.h"

#include <isa-l/erasure_code.h>
#include <stdlib.h>
#include <string.h>

struct ers_encoder {
    const codec_t *codec;
    int k, m;
    uint32_t block; /* configured B */
    uint8_t *buf;   /* k*B stripe being filled (own buffers: not when placed) */
    size_t fill;
    uint8_t *parity[ERS_MAX_M];
    bufpool_t *pool;  /* where buf and parity came from (NULL: malloc) */
    uint64_t stripes; /* full stripes sunk so far */
    ers_sink_fn sink;
    void *arg;
    int err; /* sticky: a failed sink ends the object */
    /* Placed blocks (ers_encoder_place): */
    ers_place_fn place;
    uint64_t size_hint;
    uint8_t *cur[ERS_MAX_SHARDS]; /* the stripe being filled, where place() put it */
    int placed;                   /* cur is this stripe's */
    uint32_t lay;                 /* the block size its bytes are laid out at */
};

ers_encoder_t *ers_encoder_new(int k, int m, uint32_t block_size, ers_sink_fn sink, void *arg,
                               int *err)
{
    return ers_encoder_new_in(NULL, k, m, block_size, sink, arg, err);
}

static void *enc_alloc(bufpool_t *pool, size_t n)
{
    return pool ? bufpool_get(pool, n) : xaligned_alloc(64, n);
}

static void enc_free(bufpool_t *pool, void *p)
{
    if (pool)
        bufpool_put(pool, p);
    else
        free(p);
}

ers_encoder_t *ers_encoder_new_in(bufpool_t *pool, int k, int m, uint32_t block_size,
                                  ers_sink_fn sink, void *arg, int *err)
{
    ers_layout_t chk = {(uint8_t)k, (uint8_t)m, block_size, 1};
    ers_encoder_t *e;

    if (k < 1 || m < 0 || k > ERS_MAX_K || m > ERS_MAX_M || ers_layout_check(&chk) != 0) {
        *err = ERR_INVAL;
        return NULL;
    }
    e = xcalloc(1, sizeof(*e));
    e->codec = ers__codec_get(k, m);
    e->k = k;
    e->m = m;
    e->block = block_size;
    e->pool = pool;
    ers_encoder_reset(e, sink, arg);
    *err = 0;
    return e;
}

/* The own stripe and parity buffers, made on first use: a placed encoder seldom needs them. */
static void own_buffers(ers_encoder_t *e)
{
    if (e->buf) return;
    e->buf = enc_alloc(e->pool, (size_t)e->k * e->block);
    for (int i = 0; i < e->m; i++)
        e->parity[i] = enc_alloc(e->pool, e->block);
}

void ers_encoder_reset(ers_encoder_t *e, ers_sink_fn sink, void *arg)
{
    e->fill = 0;
    e->stripes = 0;
    e->sink = sink;
    e->arg = arg;
    e->err = 0;
    e->place = NULL;
    e->placed = 0;
}

void ers_encoder_place(ers_encoder_t *e, ers_place_fn place, uint64_t size_hint)
{
    e->place = place;
    e->size_hint = size_hint;
}

void ers_encoder_free(ers_encoder_t *e)
{
    if (!e) return;
    if (e->buf) {
        for (int i = 0; i < e->m; i++)
            enc_free(e->pool, e->parity[i]);
        enc_free(e->pool, e->buf);
    }
    free(e);
}

/* A short stripe's block size: the object spread over all k (a small object's only stripe). */
static uint32_t short_block(const ers_encoder_t *e, size_t len)
{
    size_t b = align_up((len + (size_t)e->k - 1) / (size_t)e->k, ERS_BLOCK_ALIGN);
    /* Large ones whole pages, so that the stripe's blocks lie page-aligned in a reader's
     * buffer and the drives read them there in place (a 1,000,000-byte object's blocks 1-3
     * went through a bounce and a copy); at most a page more in each parity block, <= 3%. */
    if (b >= ERS_BLOCK_PAGE_MIN) b = align_up(b, 4096);
    return (uint32_t)(b < e->block ? b : e->block);
}

/*
 * Encode one stripe whose k data blocks are at dp[] (dlen bytes of data, at
 * most k*bs, block j holding bytes [j*bs, (j+1)*bs)), parity into par[], and
 * sink its k+m blocks. Each data block must be readable for min(dlen, bs)
 * bytes, zero past its data (the caller makes it so).
 */
static int encode_blocks(ers_encoder_t *e, uint8_t *const *dp, uint8_t *const *par, size_t dlen,
                         uint32_t bs, uint64_t stripe)
{
    uint32_t plen = (uint32_t)(dlen < bs ? dlen : bs);
    int rc;

    if (e->m)
        ec_encode_data((int)plen, e->k, e->m, (unsigned char *)e->codec->tables,
                       (unsigned char **)dp, (unsigned char **)par);
    for (int j = 0; j < e->k; j++) {
        size_t start = (size_t)j * bs;
        uint32_t len = dlen > start ? (uint32_t)(dlen - start < bs ? dlen - start : bs) : 0;
        if ((rc = e->sink(e->arg, (unsigned)j, stripe, dp[j], len, crc32c(0, dp[j], len))))
            return rc;
    }
    for (int i = 0; i < e->m; i++) {
        rc = e->sink(e->arg, (unsigned)(e->k + i), stripe, par[i], plen, crc32c(0, par[i], plen));
        if (rc) return rc;
    }
    return 0;
}

/* The same for a stripe whose data lies contiguously at `data`. */
static int encode_stripe(ers_encoder_t *e, const uint8_t *data, size_t dlen, uint32_t bs,
                         uint64_t stripe)
{
    uint8_t *dp[ERS_MAX_K];
    for (int j = 0; j < e->k; j++)
        dp[j] = (uint8_t *)data + (size_t)j * bs;
    return encode_blocks(e, dp, e->parity, dlen, bs, stripe);
}

/*
 * Lay the placed stripe's fill bytes out again at block size `to` (they are at e->lay), in
 * place: only when the size hint was wrong, or missing. Byte o moves from (o / lay, o % lay)
 * to (o / to, o % to), where the byte it overwrites is o' = (o / to) * lay + o % to: o' >= o
 * when the blocks shrink, o' <= o when they grow. So the bytes move in runs (each within one
 * old and one new block) from the last when shrinking, from the first when growing: every byte
 * overwritten has moved already, and memmove takes a run's overlap with itself.
 */
static void relayout(ers_encoder_t *e, uint32_t to)
{
    size_t lay = e->lay, fill = e->fill;
    if (to < lay) {
        for (size_t end = fill; end > 0;) {
            size_t bo = (end - 1) / lay, bn = (end - 1) / to;
            size_t o = bo * lay > bn * to ? bo * lay : bn * to;
            memmove(e->cur[bn] + (o - bn * to), e->cur[bo] + (o - bo * lay), end - o);
            end = o;
        }
    } else {
        for (size_t o = 0; o < fill;) {
            size_t n = lay - o % lay;
            if (n > to - o % to) n = to - o % to;
            if (n > fill - o) n = fill - o;
            memmove(e->cur[o / to] + o % to, e->cur[o / lay] + o % lay, n);
            o += n;
        }
    }
    e->lay = to;
}

/* Encode the placed stripe, e->fill bytes laid out at block size bs, and start the next. */
static int encode_placed(ers_encoder_t *e, uint32_t bs)
{
    size_t plen = e->fill < bs ? e->fill : bs;
    /* Zero what the encode reads past the data: each block is read for plen bytes. */
    for (int j = 0; j < e->k; j++) {
        size_t start = (size_t)j * bs;
        size_t have = e->fill > start ? (e->fill - start < bs ? e->fill - start : bs) : 0;
        if (have < plen) memset(e->cur[j] + have, 0, plen - have);
    }
    int rc = encode_blocks(e, e->cur, e->cur + e->k, e->fill, bs, e->stripes);
    e->stripes++;
    e->fill = 0;
    e->placed = 0;
    return rc;
}

static int write_placed(ers_encoder_t *e, const uint8_t *p, size_t len)
{
    size_t sdata = (size_t)e->k * e->block;
    while (len > 0) {
        if (!e->placed) {
            if ((e->err = e->place(e->arg, e->stripes, e->cur)) != 0) return e->err;
            e->placed = 1;
            /* An object of one short stripe, by its size: laid out at its block size already. */
            e->lay = e->stripes == 0 && e->size_hint < sdata && e->size_hint > 0
                         ? short_block(e, (size_t)e->size_hint)
                         : e->block;
        }
        if (e->fill == (size_t)e->k * e->lay) relayout(e, e->block); /* the hint was short */
        size_t j = e->fill / e->lay, in = e->fill % e->lay, n = e->lay - in;
        if (n > len) n = len;
        memcpy(e->cur[j] + in, p, n);
        e->fill += n;
        p += n;
        len -= n;
        if (e->fill == sdata && (e->err = encode_placed(e, e->block)) != 0) return e->err;
    }
    return 0;
}

int ers_encoder_write(ers_encoder_t *e, const void *data, size_t len)
{
    const uint8_t *p = data;
    size_t sdata = (size_t)e->k * e->block;

    if (e->err) return e->err;
    if (e->place) return write_placed(e, p, len);
    own_buffers(e);
    while (len > 0) {
        /* Whole stripes straight from the caller's buffer: no copy. */
        if (e->fill == 0 && len >= sdata) {
            if ((e->err = encode_stripe(e, p, sdata, e->block, e->stripes))) return e->err;
            e->stripes++;
            p += sdata;
            len -= sdata;
            continue;
        }
        size_t n = sdata - e->fill < len ? sdata - e->fill : len;
        memcpy(e->buf + e->fill, p, n);
        e->fill += n;
        p += n;
        len -= n;
        if (e->fill == sdata) {
            if ((e->err = encode_stripe(e, e->buf, sdata, e->block, e->stripes))) return e->err;
            e->stripes++;
            e->fill = 0;
        }
    }
    return 0;
}

int ers_encoder_finish(ers_encoder_t *e, ers_layout_t *out)
{
    size_t sdata = (size_t)e->k * e->block;
    uint32_t bs = e->block;

    if (e->err) return e->err;
    out->k = (uint8_t)e->k;
    out->m = (uint8_t)e->m;
    out->size = e->stripes * sdata + e->fill;
    /* A small object: shrink the block so the object spreads over all k. */
    if (e->stripes == 0) bs = short_block(e, e->fill);
    out->block_size = out->size ? bs : 0;
    if (e->fill == 0) return 0;
    if (e->place) {
        if (e->lay != bs) relayout(e, bs);
        return e->err = encode_placed(e, bs);
    }
    /* Zero what encode_stripe reads past the data, no more: each of the k blocks is read
     * for min(fill, bs) bytes from j * bs. A 1 MiB object in a 4 MiB stripe buffer read
     * as 4 blocks of 256 KiB needs none (this was 3 MiB of memset per such PUT). */
    size_t end = (size_t)(e->k - 1) * bs + (e->fill < bs ? e->fill : bs);
    memset(e->buf + e->fill, 0, end - e->fill);
    if ((e->err = encode_stripe(e, e->buf, e->fill, bs, e->stripes))) return e->err;
    e->stripes++;
    e->fill = 0;
    return 0;
}
