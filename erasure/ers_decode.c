/*
 * ers_decode: the decoder (ers.h): a stripe's blocks read in one parallel
 * round, checked by crc, rebuilt from parity when one is missing, corrupt or
 * slow, and handed out block by block.
 */
#include "erasure/ers_int.h"

#include "common/bufpool.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/mem.h"

#include <isa-l/erasure_code.h>
#include <stdlib.h>
#include <string.h>

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
    ers_batch_fn batch; /* a stripe's blocks in one go (ers_decoder_set_batch) */
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

void ers_decoder_set_batch(ers_decoder_t *d, ers_batch_fn fn)
{
    d->batch = fn;
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
    d->codec = ers__codec_get(l->k, l->m);
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
    if (b->d->batch && b->n > 1) {
        ers_crc_t crc[ERS_MAX_SHARDS] = {{0, 0, 0}};
        if (b->d->batch(b->arg, b->n, b->shard, b->stripe, b->dst, b->len, crc, b->rc)) {
            for (unsigned i = 0; i < b->n; i++) {
                if (b->rc[i] == 0 && !crc_matches(&crc[i], b->dst[i], b->len[i]))
                    b->rc[i] = ERR_CORRUPT;
                b->crc[i] = crc[i].stored;
            }
            return;
        }
    }
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
    const uint8_t *t = ers__pattern_tables(d->codec, surv, want, d->tables);
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
        uint64_t send = sstart + ers__stripe_data_len(l, stripe);
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
