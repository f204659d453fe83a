/*
 * codec: the drive engine's on-disk formats other than records (rec.h), each
 * with its encoder and its decoder in one place (pure code, no I/O):
 *
 *   - the segment superblock, the first IU of every segment file;
 *   - the RocksDB index: its keys and its three kinds of value (an
 *     identity's entry, a segment's accounting, the drive's counters).
 *
 * Every value starts with a format version. A decoder checks everything it
 * can without knowing the drive (magic, version, kind, flags, crc, exact
 * lengths, 64-bit sizes, fields that must agree with one another) and
 * returns ERR_CORRUPT otherwise, with a short reason in *why (when why is
 * non-NULL) for the caller's log line. Checks that need the drive's geometry
 * (does a tail fit the segment size?) are the caller's.
 *
 * Integers are little endian, except where a key needs to sort (big endian).
 */
#ifndef WL_CODEC_H
#define WL_CODEC_H

#include "storage/rec.h"

#include <stddef.h>
#include <stdint.h>

/* Segment kinds (superblock and accounting). */
#define SEG_USER 1 /* appends of callers */
#define SEG_GC   2 /* records relocated by compaction */

/* ---- segment superblock ---- */

/*
 * The first IU of a segment file; records start at offset iu, and the rest
 * of the IU is zero. Layout:
 *
 *   off size field
 *   0   4    magic      SEG_MAGIC "WLSG"
 *   4   2    version    1, or 2 for a segment written into a file that held
 *                       an earlier segment (drive_seg.c, the pool)
 *   6   1    kind       SEG_USER or SEG_GC
 *   7   1    reserved   0
 *   8   4    id         segment id (the file is <id as %08x>.seg)
 *   12  4    iu         the drive's IU: a power of two, 4 KiB to 1 MiB
 *   16  8    seg_size   segment file size: a multiple of iu, at least 4 IUs
 *   version 1:
 *   24  4    crc        crc32c of bytes [0, 24)
 *   version 2:
 *   24  8    first_seq  no record of this segment has a lower sequence number:
 *                       records that do are the file's earlier life, not read
 *   32  4    seed       non-zero, random: this segment's records' header crcs
 *                       start at it (rec_encode_header_seeded), so no byte of
 *                       the file's earlier life, chosen by whoever wrote it,
 *                       passes for one of them
 *   36  4    crc        crc32c of bytes [0, 36)
 *
 * A segment in a fresh file is written as version 1 (what binaries before
 * version 2 read), with first_seq 0.
 */
#define SEG_MAGIC      0x47534c57u /* "WLSG" */
#define SEG_VERSION    1
#define SEG_VERSION_V2 2
#define SEG_SB_LEN     40 /* what a reader reads: the longer of the two */

typedef struct {
    uint8_t kind;
    uint32_t id;
    uint32_t iu;
    uint64_t seg_size;
    uint64_t first_seq; /* 0: version 1 */
    uint32_t seed;      /* version 2: non-zero */
} seg_sb_t;

/* Write SEG_SB_LEN bytes (version 1 when first_seq is 0, else 2; the rest zero). */
void codec_sb_encode(uint8_t *buf, const seg_sb_t *sb);
/* len must be SEG_SB_LEN. 0 or ERR_CORRUPT. */
int codec_sb_decode(const uint8_t *buf, size_t len, seg_sb_t *sb, const char **why)
    __attribute__((warn_unused_result));

/* ---- index keys ---- */

/*
 * An identity's entry: "o" bucket 0x00 key 0x00 version 0x00 shard (be32),
 * so a bucket's keys sort together, in key order, for listing.
 * A segment's accounting: "s" id (be32). The drive's counters: "m".
 */
#define KEY_MAX     (1 + REC_MAX_BUCKET + 1 + REC_MAX_KEY + 1 + REC_MAX_VERSION + 1 + 4)
#define SEG_KEY_LEN 5

/* Identity -> key (at most KEY_MAX bytes); returns its length. */
size_t codec_key_encode(uint8_t *buf, const rec_id_t *id);
/* Key -> identity, pointing into buf. 0 or ERR_CORRUPT (not an "o" key, bad lengths). */
int codec_key_decode(const void *buf, size_t len, rec_id_t *id) __attribute__((warn_unused_result));
void codec_seg_key(uint8_t k[SEG_KEY_LEN], uint32_t id);

/* ---- index value: an identity's entry ---- */

/*
 * Where the live record of an identity lies. Layout (ENT_FIXED bytes, then
 * the metadata blob, whose length is the rest of the value):
 *
 *   off size field
 *   0   1    version      ENT_VERSION
 *   1   1    type         REC_DATA or REC_TOMBSTONE
 *   2   4    seg          segment id
 *   6   8    off          record start in the segment
 *   14  4    rec_len      header + payload bytes: exactly hdr_len + payload_len
 *   18  4    hdr_len      at least REC_FIXED + meta_len
 *   22  8    payload_len  at most REC_MAX_PAYLOAD
 *   30  8    seq          the record's sequence number
 *   38  4    hdr_crc      the record's header crc (checked on every read)
 *   42  ...  meta         the record's metadata blob, at most REC_MAX_META bytes
 */
#define ENT_VERSION 1
#define ENT_FIXED   42

typedef struct {
    uint8_t type; /* REC_DATA or REC_TOMBSTONE */
    uint32_t seg;
    uint64_t off; /* record start in the segment */
    uint32_t rec_len;
    uint32_t hdr_len;
    uint64_t payload_len;
    uint64_t seq;
    uint32_t hdr_crc;
    const uint8_t *meta; /* points into the value buffer */
    uint32_t meta_len;
} ent_t;

/* Write ENT_FIXED + e->meta_len bytes; returns that length. */
size_t codec_ent_encode(uint8_t *buf, const ent_t *e);
/* e->meta points into buf. 0 or ERR_CORRUPT. */
int codec_ent_decode(const void *buf, size_t len, ent_t *e, const char **why)
    __attribute__((warn_unused_result));

/* ---- index value: a segment's accounting ---- */

/*
 *   off size field
 *   0   1    version    SEGMETA_VERSION
 *   1   1    kind       SEG_USER or SEG_GC (as its superblock says)
 *   2   1    open       0 or 1: a writer was appending to it
 *   3   8    live       bytes of records the index points at
 *   11  8    tail       next write offset (the caller checks it against the IU)
 *   19  8    min_seq    lowest sequence number of any record in it; with
 *   27  8    max_seq    the highest: min <= max, or UINT64_MAX and 0 when empty
 *   35  8    sealed_ns  when it stopped taking appends (0 = open)
 */
#define SEGMETA_VERSION 1
#define SEGMETA_LEN     43

typedef struct {
    uint8_t kind, open;
    uint64_t live, tail, min_seq, max_seq, sealed_ns;
} segmeta_t;

void codec_segmeta_encode(uint8_t *buf, const segmeta_t *m);
/* len must be SEGMETA_LEN. 0 or ERR_CORRUPT. */
int codec_segmeta_decode(const void *buf, size_t len, segmeta_t *m, const char **why)
    __attribute__((warn_unused_result));

/* ---- index value: the drive's counters ---- */

/*
 *   off size field
 *   0   1    version        DRVMETA_VERSION
 *   1   8    next_seq       next record sequence number (>= 1)
 *   9   4    next_seg_id    next segment id
 *   13  8    lifetime_host  every byte the engine wrote to the drive, ever
 *
 * The index layout before versions (DRVMETA_LEN_V0 = 20 bytes: the same
 * fields without the version byte, and entries without theirs) is told
 * apart by this value's length: codec_drvmeta_decode_v0 reads it so the
 * index can be rebuilt in the current layout without losing the counters.
 */
#define DRVMETA_VERSION 1
#define DRVMETA_LEN     21
#define DRVMETA_LEN_V0  20

typedef struct {
    uint64_t next_seq;
    uint32_t next_seg_id;
    uint64_t lifetime_host;
} drvmeta_t;

void codec_drvmeta_encode(uint8_t *buf, const drvmeta_t *m);
/* len must be DRVMETA_LEN. 0 or ERR_CORRUPT. */
int codec_drvmeta_decode(const void *buf, size_t len, drvmeta_t *m, const char **why)
    __attribute__((warn_unused_result));
/* The pre-version layout; len must be DRVMETA_LEN_V0. 0 or ERR_CORRUPT. */
int codec_drvmeta_decode_v0(const void *buf, size_t len, drvmeta_t *m)
    __attribute__((warn_unused_result));

#endif
