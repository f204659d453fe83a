/*
 * ers: Reed-Solomon k+m erasure coding over GF(2^8) with ISA-L, with a
 * CRC-32C on every block so that bitrot is found and repaired on read.
 *
 * Layout. An object of `size` bytes is cut into stripes of k data blocks of
 * `block_size` bytes each; every stripe gets m parity blocks. Block j of
 * stripe s holds object bytes [s*k*B + j*B, +B). Only the last stripe may be
 * short: its data blocks keep their real lengths (some may be empty) and its
 * parity blocks are as long as its longest data block (block 0), so no object
 * is padded to a full stripe. An object smaller than one full stripe gets a
 * smaller block size, ceil(size/k) rounded up to 64, so a 10 KiB object costs
 * (k+m)/k of 10 KiB, not k+m blocks.
 *
 * Shard streams. Shard i (0..k-1 data, k..k+m-1 parity) is the concatenation
 * over stripes of [block bytes][crc32c, 4 bytes little endian]. Stripe s
 * starts at offset s*(B+4) in every shard stream, so a ranged read finds its
 * blocks without an index.
 *
 * Threads. Codecs and the table cache are shared and thread-safe; an encoder
 * or decoder belongs to one thread at a time. Buffers are allocated once per
 * encoder/decoder and reused: nothing is allocated per stripe.
 */
#ifndef WL_ERS_H
#define WL_ERS_H

#include "common/bufpool.h"
#include <stddef.h>
#include <stdint.h>

#define ERS_MAX_K          16
#define ERS_MAX_M          4
#define ERS_MAX_SHARDS     20
#define ERS_MAX_BLOCK      (64u << 20)
#define ERS_DEFAULT_BLOCK  (1u << 20) /* block size for objects of at least k MiB */
#define ERS_CRC_SIZE       4
#define ERS_BLOCK_ALIGN    64
/* A small object's blocks of this size and more are whole 4 KiB pages (the drives keep
 * payloads this large page-aligned: storage/rec.h REC_ALIGN_MIN). */
#define ERS_BLOCK_PAGE_MIN (128u << 10)
#define ERS_LAYOUT_SIZE    32 /* bytes of an encoded layout */

typedef struct {
    uint8_t k, m;
    uint32_t block_size; /* B; 0 only for an empty object */
    uint64_t size;       /* object bytes */
} ers_layout_t;

/* Stripes in the object (0 for an empty object). */
uint64_t ers_stripe_count(const ers_layout_t *l);
/* Bytes of shard `shard` in stripe `stripe` (data or parity), without crc. */
uint32_t ers_block_len(const ers_layout_t *l, uint64_t stripe, unsigned shard);
/* Offset of stripe `stripe`'s block in any shard stream. */
static inline uint64_t ers_shard_offset(const ers_layout_t *l, uint64_t stripe)
{
    return stripe * ((uint64_t)l->block_size + ERS_CRC_SIZE);
}
/* Total bytes of one shard stream (blocks + crcs). */
uint64_t ers_shard_size(const ers_layout_t *l, unsigned shard);

/* Serialize a layout into exactly ERS_LAYOUT_SIZE bytes (versioned, with crc). */
void ers_layout_encode(const ers_layout_t *l, uint8_t out[ERS_LAYOUT_SIZE]);
/* Parse and validate; returns 0, ERR_INVAL (bad values) or ERR_CORRUPT (bad crc/magic). */
int ers_layout_decode(const void *buf, size_t len, ers_layout_t *out)
    __attribute__((warn_unused_result));
/* Validate a layout's fields; 0 or ERR_INVAL. */
int ers_layout_check(const ers_layout_t *l) __attribute__((warn_unused_result));

/* ---- encoding ---- */

/*
 * The encoder hands every finished block to the sink: shard index, stripe
 * index, bytes (valid only during the call) and their crc32c. A non-zero
 * return aborts the encode and is returned by ers_encoder_write/finish.
 */
typedef int (*ers_sink_fn)(void *arg, unsigned shard, uint64_t stripe, const uint8_t *block,
                           uint32_t len, uint32_t crc);

typedef struct ers_encoder ers_encoder_t;

/*
 * New encoder for k+m with maximum block size `block_size` (multiple of 64,
 * <= ERS_MAX_BLOCK). Returns NULL with *err set on bad parameters.
 * Memory: k*B stripe buffer + m*B parity, allocated on first use (never by a
 * placed encoder), reused for every stripe.
 */
ers_encoder_t *ers_encoder_new(int k, int m, uint32_t block_size, ers_sink_fn sink, void *arg,
                               int *err);
/*
 * The same, with the stripe and parity buffers taken from (and given back to)
 * pool: a server making an encoder per PUT does not leave megabytes behind in
 * malloc arenas.
 */
ers_encoder_t *ers_encoder_new_in(bufpool_t *pool, int k, int m, uint32_t block_size,
                                  ers_sink_fn sink, void *arg, int *err);
/* Restart for a new object with the same k, m, B and sink (and no placement). */
void ers_encoder_reset(ers_encoder_t *e, ers_sink_fn sink, void *arg);

/*
 * Placed blocks: the caller's buffers hold each stripe's blocks, so that what
 * the sink gets is already where the caller wants it (no copy of every block
 * into the caller's write buffers). place(arg, stripe, blocks) is called
 * before the first byte of each stripe is taken and fills blocks[0, k+m)
 * with buffers of at least B bytes each, which must stay the encoder's until
 * the stripe's blocks have been sunk; the bytes fed are copied into the data
 * blocks, the parity computed into the others, and the sink gets those same
 * pointers. A nonzero return aborts, as the sink's.
 *
 * size_hint: the object's size when known (else 0). An object of one short
 * stripe is cut into blocks of a smaller size at the finish (ers_layout_t);
 * with the size known its bytes go where that size puts them from the start,
 * else the finish moves them there (in place).
 * Call after new or reset, before any write.
 */
typedef int (*ers_place_fn)(void *arg, uint64_t stripe, uint8_t *blocks[]);
void ers_encoder_place(ers_encoder_t *e, ers_place_fn place, uint64_t size_hint);
/* Feed object bytes. Full stripes are encoded and sunk as they complete. */
int ers_encoder_write(ers_encoder_t *e, const void *data, size_t len)
    __attribute__((warn_unused_result));
/* End of object: encode and sink the last (short) stripe; fill *out. */
int ers_encoder_finish(ers_encoder_t *e, ers_layout_t *out) __attribute__((warn_unused_result));
void ers_encoder_free(ers_encoder_t *e);

/* ---- decoding ---- */

/*
 * What a source says about a block's crc: the one stored with it, and, when
 * the source has it already, the crc of the bytes as they now lie in buf
 * (`computed` set). A drive that verified its own chunk crcs over those very
 * bytes derives it without a second pass; the decoder then compares instead
 * of computing. Either way the block must match the crc the encoder made.
 */
typedef struct {
    uint32_t stored;
    uint32_t actual;
    int computed;
} ers_crc_t;

/*
 * The decoder asks the source for one block: read `len` bytes of shard
 * `shard`, stripe `stripe` into buf and fill *crc (it arrives zeroed).
 * Return 0, or any ERR_* when the block cannot be had (missing drive, I/O
 * error); the decoder then treats it as missing. A block whose crc does not
 * match its bytes is treated as missing too, never returned.
 */
typedef int (*ers_source_fn)(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                             ers_crc_t *crc);

/*
 * Optional (ers_decoder_set_batch): the n blocks of one stripe in one go,
 * shard[i]'s len[i] bytes into buf[i], crc[i] (zeroed) and rc[i] filled as
 * ers_source_fn does for one block. 1 when done so; 0 to have them fetched
 * one by one (the source, through the runner), nothing done.
 */
typedef int (*ers_batch_fn)(void *arg, unsigned n, const unsigned *shard, uint64_t stripe,
                            uint8_t *const *buf, const uint32_t *len, ers_crc_t *crc, int *rc);

typedef struct ers_decoder ers_decoder_t;

typedef struct {
    uint64_t blocks_read;   /* source calls that returned data */
    uint64_t blocks_bad;    /* missing, failed or checksum mismatch */
    uint64_t reconstructed; /* blocks rebuilt by decoding */
    uint64_t given_up;      /* slow fetches given up on once parity stood in (hedged reads) */
} ers_stats_t;

ers_decoder_t *ers_decoder_new(const ers_layout_t *l, int *err);
void ers_decoder_free(ers_decoder_t *d);

/*
 * Read object bytes [off, off+len) into out, touching only the stripes and
 * blocks that cover the range. Returns 0; ERR_RANGE when the range passes the
 * end; ERR_UNRECOVERABLE when a stripe has fewer than k healthy blocks
 * (ers_decoder_missing then names the shards that failed).
 */
int ers_decoder_read(ers_decoder_t *d, uint64_t off, uint64_t len, uint8_t *out, ers_source_fn src,
                     void *arg) __attribute__((warn_unused_result));

/*
 * Let the decoder fetch the blocks of a stripe in parallel: run calls
 * fn(ctx, i) for i in 0..n-1, on any threads, and returns when all are done.
 * With a runner set, the source is called concurrently for different shards
 * of a stripe and must allow that.
 */
typedef void (*ers_parallel_fn)(void *arg, unsigned n, void (*fn)(void *ctx, unsigned i),
                                void *ctx);
void ers_decoder_set_parallel(ers_decoder_t *d, ers_parallel_fn run, void *arg);
/* A stripe's blocks through fn (with the source's arg) when it takes them; else as above. */
void ers_decoder_set_batch(ers_decoder_t *d, ers_batch_fn fn);

/*
 * Hedged reads: a runner that may give up on slow fetches. It runs fetches
 * 0..n-1 (the data blocks of a whole stripe) in parallel; while some are
 * slow it may also run spares n..n+spare-1 (parity blocks), and once `need`
 * fetches succeeded it may give up on the rest. It returns when every fetch
 * it started has ended; a fetch given up on or never started reports
 * ERR_CANCELED (fn returns each fetch's result) and must have written
 * nothing. With one set, the decoder uses it for whole stripes whose data
 * shards are not known to fail (the parallel runner for everything else):
 * a slow shard costs the runner's delay, not its full latency, and is then
 * read around like a failed one.
 */
/*
 * Take the decoder's scratch blocks from p and give them back to it at
 * ers_decoder_free (p must outlive the decoder); without it they are
 * malloc'd. Either way they are page-aligned (a drive reads into them
 * directly).
 */
void ers_decoder_set_bufpool(ers_decoder_t *d, bufpool_t *p);

typedef void (*ers_hedged_fn)(void *arg, unsigned n, unsigned spare, unsigned need,
                              int (*fn)(void *ctx, unsigned i), void *ctx);
void ers_decoder_set_hedged(ers_decoder_t *d, ers_hedged_fn run, void *arg);
/*
 * Shards to read around from now on (a store known not to be up, or slow):
 * each stripe asks as many parity shards in their place in the same round,
 * and asks them only when the others cannot do without. Replaces the last.
 */
void ers_decoder_avoid(ers_decoder_t *d, uint32_t shards);
/* Shards that failed (or were given up on) in an earlier stripe of this decoder. */
uint32_t ers_decoder_suspects(const ers_decoder_t *d);

/* Bitmask of shards that failed in the last failing stripe. */
uint32_t ers_decoder_missing(const ers_decoder_t *d);
const ers_stats_t *ers_decoder_stats(const ers_decoder_t *d);

/*
 * Verify and repair one stripe: read all k+m blocks, check every crc, rebuild
 * the bad ones. On return *rebuilt is the mask of shards whose block was bad
 * and is now in ers_decoder_block(d, shard) (length ers_block_len) with its
 * crc from ers_decoder_block_crc; a healer rewrites exactly those.
 * Returns 0 (also when nothing was bad) or ERR_UNRECOVERABLE.
 */
int ers_verify_stripe(ers_decoder_t *d, uint64_t stripe, ers_source_fn src, void *arg,
                      uint32_t *rebuilt) __attribute__((warn_unused_result));
/*
 * Refill one stripe's blocks of the shards in want (a replaced drive's):
 * read want's own blocks and k others in one round (more if some fail),
 * check their crcs, and rebuild those of want that did not read. The other
 * m - |want| blocks are not read, so not checked either (a scrub's
 * ers_verify_stripe does that): a refill moves k + |want| blocks per
 * stripe, not k+m. *rebuilt as there (a subset of want).
 * Returns 0 or ERR_UNRECOVERABLE.
 */
int ers_rebuild_stripe(ers_decoder_t *d, uint64_t stripe, uint32_t want, ers_source_fn src,
                       void *arg, uint32_t *rebuilt) __attribute__((warn_unused_result));
const uint8_t *ers_decoder_block(const ers_decoder_t *d, unsigned shard);
uint32_t ers_decoder_block_crc(const ers_decoder_t *d, unsigned shard);
/*
 * A decoder's scratch buffers hold a block and, from ers_decoder_set_slack on, slack bytes
 * more (room for the crc a record carries after it): ers_decoder_buf_len bytes in all. Set
 * between stripes: blocks held are let go. (Not by default: a buffer pool rounds to 64 KiB,
 * so every GET's scratch would grow by that.)
 */
void ers_decoder_set_slack(ers_decoder_t *d, size_t slack);
size_t ers_decoder_buf_len(const ers_decoder_t *d);
/* The pool set with ers_decoder_set_bufpool, or NULL. */
bufpool_t *ers_decoder_bufpool(const ers_decoder_t *d);
/*
 * The buffer that holds shard's block after a verify or rebuild, handed over in exchange for
 * `fresh`, which the decoder uses from then on: a healer writes the rebuilt block from it
 * without copying it. Needs a pool (ers_decoder_set_bufpool): both buffers are the pool's, of
 * at least ers_decoder_buf_len bytes, and each goes back to it (bufpool_put) from whoever
 * holds it last. NULL, and fresh is not taken, without a pool or a block there.
 */
uint8_t *ers_decoder_swap_block(ers_decoder_t *d, unsigned shard, uint8_t *fresh);

#endif
