/*
 * ers: Reed-Solomon erasure coding over ISA-L (see ers.h for the layout).
 *
 * Design. The encoding matrix for (k, m) is ISA-L's Cauchy matrix, whose
 * every k x k submatrix is invertible; its first k rows are the identity, so
 * data blocks are stored as they are and a healthy read needs no math. The
 * expanded GF tables (32*k*rows bytes) are built once per (k, m) and once per
 * erasure pattern (which k shards survive, which shards are wanted) and kept
 * in a process-wide table that only grows (at most TABLE_SLOTS patterns,
 * each at most 32*16*4 = 2 KiB). Past that, a decoder computes tables into
 * its own buffer instead of caching them.
 */
#include "erasure/ers.h"

#include "common/bufpool.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "common/mem.h"

#include <isa-l/erasure_code.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- layout ---- */

uint64_t ers_stripe_count(const ers_layout_t *l)
{
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    return sdata ? (l->size + sdata - 1) / sdata : 0;
}

/* Data bytes of stripe s (k*B except for the last stripe). */
static uint64_t stripe_data_len(const ers_layout_t *l, uint64_t s)
{
    uint64_t sdata = (uint64_t)l->k * l->block_size;
    uint64_t start = s * sdata;
    if (start >= l->size) return 0;
    return l->size - start < sdata ? l->size - start : sdata;
}

uint32_t ers_block_len(const ers_layout_t *l, uint64_t stripe, unsigned shard)
{
    uint64_t r = stripe_data_len(l, stripe);
    uint64_t b = l->block_size;
    if (shard >= l->k) /* parity: as long as block 0 */
        return (uint32_t)(r < b ? r : b);
    if (r <= (uint64_t)shard * b) return 0;
    r -= (uint64_t)shard * b;
    return (uint32_t)(r < b ? r : b);
}

uint64_t ers_shard_size(const ers_layout_t *l, unsigned shard)
{
    uint64_t n = ers_stripe_count(l);
    if (n == 0) return 0;
    return ers_shard_offset(l, n - 1) + ers_block_len(l, n - 1, shard) + ERS_CRC_SIZE;
}

int ers_layout_check(const ers_layout_t *l)
{
    if (l->k < 1 || l->k > ERS_MAX_K || l->m > ERS_MAX_M || l->k + l->m > ERS_MAX_SHARDS)
        return ERR_INVAL;
    if (l->size == 0) return l->block_size == 0 ? 0 : ERR_INVAL;
    if (l->block_size == 0 || l->block_size > ERS_MAX_BLOCK || l->block_size % ERS_BLOCK_ALIGN)
        return ERR_INVAL;
    if (l->size > (1ull << 50)) /* 1 PiB: far beyond any S3 object */
        return ERR_INVAL;
    return 0;
}

#define LAYOUT_MAGIC   0x4c45574cu /* "WLEL" */
#define LAYOUT_VERSION 1

/*
 * Encoded layout, little endian:
 *   0  magic "WLEL"     4  version     5  k     6  m     7  reserved (0)
 *   8  block_size (u32) 12 reserved (0)
 *   16 size (u64)       24 reserved (0) 28 crc32c of bytes 0..27
 */
void ers_layout_encode(const ers_layout_t *l, uint8_t out[ERS_LAYOUT_SIZE])
{
    memset(out, 0, ERS_LAYOUT_SIZE);
    le_put32(out, LAYOUT_MAGIC);
    out[4] = LAYOUT_VERSION;
    out[5] = l->k;
    out[6] = l->m;
    le_put32(out + 8, l->block_size);
    le_put64(out + 16, l->size);
    le_put32(out + 28, crc32c(0, out, 28));
}

int ers_layout_decode(const void *buf, size_t len, ers_layout_t *out)
{
    const uint8_t *p = buf;
    if (len < ERS_LAYOUT_SIZE || le_get32(p) != LAYOUT_MAGIC ||
        le_get32(p + 28) != crc32c(0, p, 28))
        return ERR_CORRUPT;
    if (p[4] != LAYOUT_VERSION) return ERR_INVAL;
    out->k = p[5];
    out->m = p[6];
    out->block_size = le_get32(p + 8);
    out->size = le_get64(p + 16);
    return ers_layout_check(out);
}

/* ---- GF tables ---- */

typedef struct {
    uint8_t k, m;
    uint8_t *matrix; /* (k+m) x k encoding matrix */
    uint8_t *tables; /* 32*k*m parity tables */
} codec_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static codec_t *codecs[ERS_MAX_K + 1][ERS_MAX_M + 1];

static const codec_t *codec_get(int k, int m)
{
    codec_t *c;

    pthread_mutex_lock(&cache_lock);
    c = codecs[k][m];
    if (!c) {
        c = xcalloc(1, sizeof(*c));
        c->k = (uint8_t)k;
        c->m = (uint8_t)m;
        c->matrix = xmalloc((size_t)(k + m) * k);
        c->tables = xmalloc((size_t)32 * k * (m ? m : 1));
        gf_gen_cauchy1_matrix(c->matrix, k + m, k);
        if (m) ec_init_tables(k, m, c->matrix + (size_t)k * k, c->tables);
        codecs[k][m] = c;
    }
    pthread_mutex_unlock(&cache_lock);
    return c;
}

#define TABLE_SLOTS 4096

typedef struct {
    uint8_t used, k, m;
    uint32_t surv, want;
    uint8_t *tables;
} pattern_t;

static pattern_t patterns[TABLE_SLOTS];
static unsigned pattern_count;

/*
 * Build decode tables that turn the k surviving shards `surv` (ascending)
 * into the shards of `want` (ascending). Returns 0 or ERR_UNRECOVERABLE if
 * the submatrix is singular (impossible for a Cauchy matrix; kept as a guard).
 */
static int build_tables(const codec_t *c, uint32_t surv, uint32_t want, uint8_t *tables)
{
    uint8_t b[ERS_MAX_K * ERS_MAX_K], inv[ERS_MAX_K * ERS_MAX_K];
    uint8_t rows[ERS_MAX_SHARDS * ERS_MAX_K];
    int k = c->k, r = 0, nw = 0;

    for (int s = 0; s < k + c->m; s++)
        if (surv & (1u << s)) memcpy(b + (size_t)k * r++, c->matrix + (size_t)k * s, (size_t)k);
    if (gf_invert_matrix(b, inv, k) != 0) return ERR_UNRECOVERABLE;
    for (int w = 0; w < k + c->m; w++) {
        if (!(want & (1u << w))) continue;
        uint8_t *row = rows + (size_t)k * nw++;
        if (w < k) {
            memcpy(row, inv + (size_t)k * w, (size_t)k);
            continue;
        }
        /* Parity row: its encoding row times the inverse. */
        for (int j = 0; j < k; j++) {
            uint8_t acc = 0;
            for (int i = 0; i < k; i++)
                acc ^= gf_mul(c->matrix[(size_t)k * w + i], inv[(size_t)k * i + j]);
            row[j] = acc;
        }
    }
    ec_init_tables(k, nw, rows, tables);
    return 0;
}

/* Tables for a pattern: cached, or built into `scratch` when the cache is full. */
static const uint8_t *pattern_tables(const codec_t *c, uint32_t surv, uint32_t want,
                                     uint8_t *scratch)
{
    uint32_t h = (surv * 2654435761u) ^ (want * 40503u) ^ ((uint32_t)c->k << 20) ^ c->m;
    const uint8_t *found = NULL;

    pthread_mutex_lock(&cache_lock);
    for (unsigned i = 0; i < TABLE_SLOTS; i++) {
        pattern_t *p = &patterns[(h + i) % TABLE_SLOTS];
        if (!p->used) {
            if (pattern_count >= TABLE_SLOTS * 3 / 4) break;
            uint8_t *t = xmalloc((size_t)32 * c->k * (size_t)__builtin_popcount(want));
            if (build_tables(c, surv, want, t) != 0) {
                free(t);
                break;
            }
            *p = (pattern_t){1, c->k, c->m, surv, want, t};
            pattern_count++;
            found = t;
            break;
        }
        if (p->k == c->k && p->m == c->m && p->surv == surv && p->want == want) {
            found = p->tables;
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (found) return found;
    return build_tables(c, surv, want, scratch) == 0 ? scratch : NULL;
}

/* ---- encoder ---- */

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
    e->codec = codec_get(k, m);
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
    return (uint32_t)align_up((len + (size_t)e->k - 1) / (size_t)e->k, ERS_BLOCK_ALIGN);
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

/* ---- decoder ---- */

struct ers_decoder {
    ers_layout_t l;
    const codec_t *codec;
    uint8_t *blk[ERS_MAX_SHARDS]; /* per-shard scratch, B bytes each, lazily allocated */
    uint32_t crc[ERS_MAX_SHARDS];
    uint8_t *tables; /* fallback when the pattern cache is full */
    uint32_t missing;
    uint32_t suspect; /* shards that failed in an earlier stripe of this decoder */
    uint32_t avoid;   /* shards read around (ers_decoder_avoid) */
    ers_stats_t stats;
    ers_parallel_fn par;
    void *par_arg;
    ers_hedged_fn hedged;
    void *hedged_arg;
    bufpool_t *bufs; /* where the scratch comes from and goes back to; NULL: malloc */
    size_t slack;    /* bytes past a block each scratch buffer has (ers_decoder_set_slack) */
};

static void scratch_release(ers_decoder_t *d, unsigned shard)
{
    if (d->bufs)
        bufpool_put(d->bufs, d->blk[shard]);
    else
        free(d->blk[shard]);
    d->blk[shard] = NULL;
}

void ers_decoder_set_slack(ers_decoder_t *d, size_t slack)
{
    if (slack <= d->slack) return;
    d->slack = slack;
    for (unsigned i = 0; i < ERS_MAX_SHARDS; i++)
        if (d->blk[i]) scratch_release(d, i); /* too short now: taken again at the next read */
}

void ers_decoder_set_parallel(ers_decoder_t *d, ers_parallel_fn run, void *arg)
{
    d->par = run;
    d->par_arg = arg;
}

void ers_decoder_set_bufpool(ers_decoder_t *d, bufpool_t *p)
{
    d->bufs = p;
}

void ers_decoder_set_hedged(ers_decoder_t *d, ers_hedged_fn run, void *arg)
{
    d->hedged = run;
    d->hedged_arg = arg;
}

void ers_decoder_avoid(ers_decoder_t *d, uint32_t shards)
{
    d->avoid = shards;
}

uint32_t ers_decoder_suspects(const ers_decoder_t *d)
{
    return d->suspect;
}

ers_decoder_t *ers_decoder_new(const ers_layout_t *l, int *err)
{
    ers_decoder_t *d;

    if ((*err = ers_layout_check(l)) != 0) return NULL;
    d = xcalloc(1, sizeof(*d));
    d->l = *l;
    d->codec = codec_get(l->k, l->m);
    d->tables = xmalloc((size_t)32 * ERS_MAX_K * ERS_MAX_SHARDS);
    return d;
}

void ers_decoder_free(ers_decoder_t *d)
{
    if (!d) return;
    for (unsigned i = 0; i < ERS_MAX_SHARDS; i++)
        if (d->blk[i]) scratch_release(d, i);
    free(d->tables);
    free(d);
}

uint32_t ers_decoder_missing(const ers_decoder_t *d)
{
    return d->missing;
}

const ers_stats_t *ers_decoder_stats(const ers_decoder_t *d)
{
    return &d->stats;
}

const uint8_t *ers_decoder_block(const ers_decoder_t *d, unsigned shard)
{
    return shard < ERS_MAX_SHARDS ? d->blk[shard] : NULL;
}

uint32_t ers_decoder_block_crc(const ers_decoder_t *d, unsigned shard)
{
    return shard < ERS_MAX_SHARDS ? d->crc[shard] : 0;
}

/*
 * Page-aligned: a local drive reads a block straight into it (O_DIRECT, see
 * drive_read_split) rather than into a bounce buffer, a copy and a second
 * crc pass over the copy. A heal or a degraded read fills these with every
 * block it reads: the copy and the crc were half of a refill's CPU (perf).
 * From the decoder's buffer pool when it has one: a decoder per object (a
 * heal's) otherwise faults in and zeroes fresh pages for every block.
 */
#define SCRATCH_ALIGN 4096

size_t ers_decoder_buf_len(const ers_decoder_t *d)
{
    return (d->l.block_size ? d->l.block_size : 64) + d->slack;
}

bufpool_t *ers_decoder_bufpool(const ers_decoder_t *d)
{
    return d->bufs;
}

uint8_t *ers_decoder_swap_block(ers_decoder_t *d, unsigned shard, uint8_t *fresh)
{
    if (!d->bufs || shard >= ERS_MAX_SHARDS || !d->blk[shard] || !fresh) return NULL;
    uint8_t *full = d->blk[shard];
    d->blk[shard] = fresh;
    return full;
}

static uint8_t *scratch(ers_decoder_t *d, unsigned shard)
{
    size_t len = ers_decoder_buf_len(d);
    if (!d->blk[shard])
        d->blk[shard] = d->bufs ? bufpool_get(d->bufs, len) : xaligned_alloc(SCRATCH_ALIGN, len);
    return d->blk[shard];
}

static int crc_matches(const ers_crc_t *c, const uint8_t *buf, uint32_t len)
{
    return (c->computed ? c->actual : crc32c(0, buf, len)) == c->stored;
}

/* Blocks of one stripe fetched together (in parallel when the decoder has a runner). */
typedef struct {
    ers_decoder_t *d;
    ers_source_fn src;
    void *arg;
    uint64_t stripe;
    unsigned n;
    unsigned shard[ERS_MAX_SHARDS];
    uint8_t *dst[ERS_MAX_SHARDS];
    uint32_t len[ERS_MAX_SHARDS];
    uint32_t crc[ERS_MAX_SHARDS];
    int rc[ERS_MAX_SHARDS];
} batch_t;

/* Source read plus crc check of one block of a batch; touches nothing shared. */
static void batch_fetch(void *ctx, unsigned i)
{
    batch_t *b = ctx;
    ers_crc_t crc = {0, 0, 0};
    int rc = b->src(b->arg, b->shard[i], b->stripe, b->dst[i], b->len[i], &crc);
    if (rc == 0 && !crc_matches(&crc, b->dst[i], b->len[i])) rc = ERR_CORRUPT;
    b->crc[i] = crc.stored;
    b->rc[i] = rc;
}

static int batch_fetch_rc(void *ctx, unsigned i)
{
    batch_fetch(ctx, i);
    return ((batch_t *)ctx)->rc[i];
}

static void batch_run(batch_t *b)
{
    if (b->d->par && b->n > 1)
        b->d->par(b->d->par_arg, b->n, batch_fetch, b);
    else
        for (unsigned i = 0; i < b->n; i++)
            batch_fetch(b, i);
}

/*
 * Make the blocks of `want` (a mask) of stripe `stripe` available in scratch
 * given `ok` (mask of shards already verified and present in scratch, padded
 * to plen), reading more shards as needed. On success the wanted blocks are
 * in d->blk with their crcs.
 */
/*
 * A batch's blocks as read: each that read takes its crc and is zero-padded to
 * the stripe's block length (plen); each that failed counts as bad and, when
 * in suspect_mask, is read last from now on. Returns the mask of those that read.
 */
static uint32_t batch_taken(ers_decoder_t *d, batch_t *bt, uint32_t plen, uint32_t suspect_mask)
{
    uint32_t ok = 0;
    for (unsigned i = 0; i < bt->n; i++) {
        unsigned s = bt->shard[i];
        if (bt->rc[i]) {
            d->stats.blocks_bad++;
            d->suspect |= suspect_mask & (1u << s);
            continue;
        }
        d->stats.blocks_read++;
        d->crc[s] = bt->crc[i];
        memset(bt->dst[i] + bt->len[i], 0, plen - bt->len[i]);
        ok |= 1u << s;
    }
    return ok;
}

static int reconstruct(ers_decoder_t *d, uint64_t stripe, uint32_t ok, uint32_t tried,
                       uint32_t want, ers_source_fn src, void *arg, const uint8_t *const *at,
                       int want_crc)
{
    const ers_layout_t *l = &d->l;
    int k = l->k, n = l->k + l->m;
    uint32_t plen = ers_block_len(l, stripe, (unsigned)k);
    uint32_t surv = 0;
    int have = 0;
    uint8_t *in[ERS_MAX_K], *outp[ERS_MAX_SHARDS];
    int nout = 0;

    for (int s = 0; s < n; s++)
        if (ok & (1u << s)) {
            surv |= 1u << s;
            have++;
        }
    /* As many more as are missing, all at once; again if some of those fail too. */
    while (have < k) {
        batch_t bt = {d, src, arg, stripe, 0, {0}, {0}, {0}, {0}, {0}};
        /* Shards that did not fail before first, suspects last. */
        for (int i = 0; i < 2 * n && have + (int)bt.n < k; i++) {
            int s = i % n;
            if ((int)(((d->suspect | d->avoid) >> s) & 1) != i / n || ((surv | tried) & (1u << s)))
                continue;
            tried |= 1u << s;
            uint32_t len = ers_block_len(l, stripe, (unsigned)s);
            if (len == 0) { /* an empty block of a short stripe: zeros, nothing to read */
                memset(scratch(d, (unsigned)s), 0, plen);
                d->crc[s] = crc32c(0, d->blk[s], 0);
                surv |= 1u << s;
                have++;
                continue;
            }
            bt.shard[bt.n] = (unsigned)s;
            bt.dst[bt.n] = scratch(d, (unsigned)s);
            bt.len[bt.n++] = len;
        }
        if (!bt.n) break;
        batch_run(&bt);
        uint32_t got = batch_taken(d, &bt, plen, UINT32_MAX);
        surv |= got;
        have += __builtin_popcount(got);
    }
    if (have < k) {
        d->missing = ((1u << n) - 1) & ~surv;
        return ERR_UNRECOVERABLE;
    }
    /* Exactly k survivors feed the decode: the lowest-numbered (data shards first). */
    for (int s = n - 1; s >= 0 && have > k; s--)
        if (surv & (1u << s)) {
            surv &= ~(1u << s);
            have--;
        }
    want &= ~surv;
    if (!want) return 0;
    const uint8_t *t = pattern_tables(d->codec, surv, want, d->tables);
    if (!t) return ERR_UNRECOVERABLE;
    have = 0;
    for (int s = 0; s < n; s++) {
        if (surv & (1u << s)) in[have++] = at && at[s] ? (uint8_t *)at[s] : d->blk[s];
        if (want & (1u << s)) outp[nout++] = scratch(d, (unsigned)s);
    }
    if (plen > 0) ec_encode_data((int)plen, k, nout, (unsigned char *)t, in, outp);
    for (int s = 0; s < n; s++)
        if (want & (1u << s)) {
            /* A healer rewrites rebuilt blocks with their crc; a read has no use for it. */
            if (want_crc) d->crc[s] = crc32c(0, d->blk[s], ers_block_len(l, stripe, (unsigned)s));
            d->stats.reconstructed++;
        }
    return 0;
}

int ers_decoder_read(ers_decoder_t *d, uint64_t off, uint64_t len, uint8_t *out, ers_source_fn src,
                     void *arg)
{
    const ers_layout_t *l = &d->l;
    uint64_t B = l->block_size, sdata = (uint64_t)l->k * B;

    if (off > l->size || len > l->size - off) return ERR_RANGE;
    d->missing = 0;
    while (len > 0) {
        uint64_t stripe = off / sdata;
        uint64_t sstart = stripe * sdata;
        uint64_t send = sstart + stripe_data_len(l, stripe);
        uint64_t end = off + len < send ? off + len : send;
        uint32_t need = 0, ok = 0, tried = 0;
        uint32_t plen = ers_block_len(l, stripe, l->k);
        int direct = 1;

        /*
         * Pass 1: the data blocks that cover [off, end), read where they
         * land. A shard that failed in an earlier stripe (a lost drive, most
         * likely) is not asked again: as many parity blocks are read in the
         * same round instead, so a degraded read costs one round, not two.
         * Suspects are asked again every 16 stripes, in case they are back.
         */
        uint32_t skip = (stripe % 16 ? d->suspect : 0) | d->avoid, skipped = 0;
        batch_t bt = {d, src, arg, stripe, 0, {0}, {0}, {0}, {0}, {0}};
        for (unsigned j = (unsigned)((off - sstart) / B); j < l->k; j++) {
            uint64_t bstart = sstart + j * B;
            if (bstart >= end) break;
            uint32_t blen = ers_block_len(l, stripe, j);
            int whole = bstart >= off && bstart + blen <= end;
            need |= 1u << j;
            if (skip & (1u << j)) { /* untried: the decode may still ask it, last */
                skipped++;
                direct = 0;
                continue;
            }
            tried |= 1u << j;
            bt.shard[bt.n] = j;
            bt.dst[bt.n] = whole ? out + (bstart - off) : scratch(d, j);
            bt.len[bt.n++] = blen;
        }
        unsigned skipped_data = skipped; /* data shards not asked (parity asked instead) */
        for (unsigned p = l->k; p < (unsigned)(l->k + l->m) && skipped > 0; p++) {
            if (skip & (1u << p)) continue;
            bt.shard[bt.n] = p;
            bt.dst[bt.n] = scratch(d, p);
            bt.len[bt.n++] = plen;
            tried |= 1u << p;
            skipped--;
        }
        if (d->hedged && l->m > 0 && bt.n == l->k && !skipped_data) {
            /*
             * A whole stripe, every data shard asked (none read around): parity not read
             * around may stand in for slow ones. Each spare is a shard not in the batch, so
             * k fetches in are k distinct shards.
             */
            unsigned spare = 0;
            for (unsigned i = 0; i < bt.n; i++)
                bt.rc[i] = ERR_CANCELED; /* until fetched */
            for (unsigned p = l->k; p < (unsigned)(l->k + l->m) && spare < l->k; p++) {
                if (skip & (1u << p)) continue;
                spare++;
                bt.shard[bt.n] = p;
                bt.dst[bt.n] = scratch(d, p);
                bt.len[bt.n] = plen;
                bt.rc[bt.n++] = ERR_CANCELED;
            }
            d->hedged(d->hedged_arg, l->k, spare, l->k, batch_fetch_rc, &bt);
            for (unsigned i = l->k; i < bt.n; i++)
                if (bt.rc[i] != ERR_CANCELED) tried |= 1u << bt.shard[i];
        } else {
            batch_run(&bt);
        }
        for (unsigned i = 0; i < bt.n; i++) {
            unsigned j = bt.shard[i];
            if (bt.rc[i] == ERR_CANCELED) {
                /* Given up on (slow): read around from now on, as a failed shard is; the
                 * decode may still ask it, last, if the others cannot do without it. */
                if (j < l->k) {
                    d->stats.given_up++;
                    d->suspect |= 1u << j;
                    tried &= ~(1u << j);
                    direct = 0;
                }
                continue;
            }
            if (bt.rc[i] != 0) {
                d->stats.blocks_bad++;
                d->suspect |= 1u << j;
                direct = 0;
                continue;
            }
            d->stats.blocks_read++;
            d->suspect &= ~(1u << j);
            d->crc[j] = bt.crc[i];
            ok |= 1u << j;
        }
        uint32_t in_out = 0; /* whole blocks already read into `out` */
        for (unsigned i = 0; i < bt.n; i++) {
            unsigned j = bt.shard[i];
            if ((ok & (1u << j)) && bt.dst[i] != d->blk[j]) in_out |= 1u << j;
        }
        if (!direct) {
            /*
             * Survivors read into `out` are decoded from there when full
             * length; short ones (a last stripe) are padded in scratch.
             */
            const uint8_t *at[ERS_MAX_SHARDS] = {0};
            for (unsigned i = 0; i < bt.n; i++) {
                unsigned j = bt.shard[i];
                if (!(ok & (1u << j))) continue;
                if ((in_out & (1u << j)) && bt.len[i] == plen) {
                    at[j] = bt.dst[i];
                    continue;
                }
                if (in_out & (1u << j)) memcpy(scratch(d, j), bt.dst[i], bt.len[i]);
                memset(d->blk[j] + bt.len[i], 0, plen - bt.len[i]);
            }
            int rc = reconstruct(d, stripe, ok, tried, need & ~ok, src, arg, at, 0);
            if (rc) return rc;
            ok = need;
        }
        /* Copy the parts that did not land in place. */
        for (unsigned j = 0; j < l->k; j++) {
            if (!(need & (1u << j)) || (in_out & (1u << j))) continue;
            uint64_t bstart = sstart + j * B;
            uint32_t blen = ers_block_len(l, stripe, j);
            uint64_t a = bstart > off ? bstart : off;
            uint64_t b = bstart + blen < end ? bstart + blen : end;
            if (b > a) memcpy(out + (a - off), d->blk[j] + (a - bstart), b - a);
        }
        len -= end - off;
        out += end - off;
        off = end;
    }
    return 0;
}

int ers_rebuild_stripe(ers_decoder_t *d, uint64_t stripe, uint32_t want, ers_source_fn src,
                       void *arg, uint32_t *rebuilt)
{
    const ers_layout_t *l = &d->l;
    int k = l->k, n = l->k + l->m;
    uint32_t ok = 0, tried = 0, all = (1u << n) - 1;
    uint32_t plen = ers_block_len(l, stripe, (unsigned)k);

    *rebuilt = 0;
    d->missing = 0;
    if (stripe >= ers_stripe_count(l)) return ERR_RANGE;
    want &= all;
    /* want's blocks (on a refilled drive a missing one is an index miss) and k others at once:
     * shards that did not fail before first, suspects last. */
    batch_t bt = {d, src, arg, stripe, 0, {0}, {0}, {0}, {0}, {0}};
    int others = 0;
    for (int i = 0; i < 3 * n; i++) {
        int s = i % n, pass = i / n;
        uint32_t bit = 1u << s;
        if (tried & bit) continue;
        if (pass == 0 ? !(want & bit)
                      : (want & bit) || others >= k ||
                            (int)(((d->suspect | d->avoid) >> s) & 1) != pass - 1)
            continue;
        tried |= bit;
        others += !(want & bit);
        bt.shard[bt.n] = (unsigned)s;
        bt.dst[bt.n] = scratch(d, (unsigned)s);
        bt.len[bt.n++] = ers_block_len(l, stripe, (unsigned)s);
    }
    batch_run(&bt);
    ok = batch_taken(d, &bt, plen, ~want); /* a replaced store's miss makes it no suspect */
    uint32_t need = want & ~ok;
    if (!need) return 0;
    int rc = reconstruct(d, stripe, ok, tried, need, src, arg, NULL, 1);
    if (rc) return rc; /* (d->missing set) */
    *rebuilt = need;
    return 0;
}

int ers_verify_stripe(ers_decoder_t *d, uint64_t stripe, ers_source_fn src, void *arg,
                      uint32_t *rebuilt)
{
    const ers_layout_t *l = &d->l;
    int n = l->k + l->m;
    uint32_t ok = 0, all = (1u << n) - 1;
    uint32_t plen = ers_block_len(l, stripe, l->k);

    *rebuilt = 0;
    d->missing = 0;
    if (stripe >= ers_stripe_count(l)) return ERR_RANGE;
    /* Every block at once; empty ones of a short stripe are stored with a crc too. */
    batch_t bt = {d, src, arg, stripe, 0, {0}, {0}, {0}, {0}, {0}};
    for (int s = 0; s < n; s++) {
        bt.shard[bt.n] = (unsigned)s;
        bt.dst[bt.n] = scratch(d, (unsigned)s);
        bt.len[bt.n++] = ers_block_len(l, stripe, (unsigned)s);
    }
    batch_run(&bt);
    ok = batch_taken(d, &bt, plen, 0);
    if (ok == all) return 0;
    int rc = reconstruct(d, stripe, ok, all, all & ~ok, src, arg, NULL, 1);
    if (rc) {
        d->missing = all & ~ok;
        return rc;
    }
    *rebuilt = all & ~ok;
    return 0;
}
