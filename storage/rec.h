/*
 * rec: the on-disk record format of the drive engine (pure codec, no I/O).
 *
 * A record is a self-describing header followed by its payload. Records are
 * packed back to back inside a write; only writes are IU-aligned. Layout,
 * little endian:
 *
 *   off size field
 *   0   4    magic        REC_MAGIC "WLR1"
 *   4   2    version      REC_VERSION
 *   6   1    type         REC_DATA or REC_TOMBSTONE
 *   7   1    flags        0 (reserved)
 *   8   4    hdr_len      bytes from record start to payload (whole header)
 *   12  4    shard        shard index of the object
 *   16  8    seq          drive-wide sequence number, strictly increasing
 *   24  8    payload_len  payload bytes (0 for a tombstone)
 *   32  2    bucket_len
 *   34  2    key_len
 *   36  2    version_len  object version id ("" for the null version)
 *   38  2    reserved (0)
 *   40  4    meta_len     opaque metadata blob length
 *   44  4    hdr_crc      crc32c of bytes [0, hdr_len) with this field zero
 *   48  ...  bucket, key, version, meta, then one crc32c per REC_CHUNK bytes
 *            of payload (ceil(payload_len / REC_CHUNK) of them), then (version
 *            2) 0 to REC_ALIGN-1 zero bytes of padding
 *
 * hdr_crc covers the chunk crcs, which cover the payload: the whole record
 * is protected, and a range read verifies only the chunks it touches.
 *
 * The padding lets a writer start a large payload on a REC_ALIGN boundary of
 * the segment, so a reader can DMA it (O_DIRECT) straight into the caller's
 * buffer instead of through a bounce buffer and a copy. Version 1 records
 * (never padded) are still read.
 */
#ifndef WL_REC_H
#define WL_REC_H

#include <stddef.h>
#include <stdint.h>

#define REC_MAGIC       0x31524c57u /* "WLR1" */
#define REC_VERSION     2
#define REC_ALIGN       4096u        /* payload alignment of padded records (O_DIRECT) */
#define REC_ALIGN_MIN   (128u << 10) /* smaller payloads are not padded: <= 3% */
#define REC_FIXED       48
#define REC_CHUNK       65536u
#define REC_MAX_BUCKET  255
#define REC_MAX_KEY     1024
#define REC_MAX_VERSION 255
#define REC_MAX_META    65536
#define REC_MAX_PAYLOAD (1ull << 30)

enum { REC_DATA = 1, REC_TOMBSTONE = 2 };

/* Identity of a stored shard. Strings are not NUL-terminated here. */
typedef struct {
    const char *bucket;
    uint16_t bucket_len;
    const char *key;
    uint16_t key_len;
    const char *version;
    uint16_t version_len;
    uint32_t shard;
} rec_id_t;

/* A parsed header; pointers point into the buffer that was parsed. */
typedef struct {
    uint8_t type;
    uint32_t hdr_len;
    uint64_t seq;
    uint64_t payload_len;
    uint32_t hdr_crc;
    rec_id_t id;
    const uint8_t *meta;
    uint32_t meta_len;
    const uint8_t *chunk_crcs; /* n_chunks little-endian u32 */
    uint32_t n_chunks;
} rec_view_t;

/* Header bytes for a record with these lengths, without padding. */
size_t rec_header_len(const rec_id_t *id, size_t meta_len, uint64_t payload_len);

/*
 * Padding for a record starting at segment offset rec_off with an unpadded
 * header of hdr_len bytes: what puts its payload on a REC_ALIGN boundary when
 * the payload is at least REC_ALIGN_MIN bytes, else 0.
 */
size_t rec_pad_for(uint64_t rec_off, size_t hdr_len, uint64_t payload_len);
/* The most rec_pad_for can ask for a payload of this size (room to reserve). */
size_t rec_pad_max(uint64_t payload_len);

/* Validate identity lengths and contents (no NUL bytes); 0 or ERR_INVAL. */
int rec_id_check(const rec_id_t *id);

/*
 * Write the header of a record into buf (rec_header_len + pad bytes, pad <
 * REC_ALIGN), computing the chunk crcs from payload. Returns the header length.
 */
size_t rec_encode_header(uint8_t *buf, uint8_t type, const rec_id_t *id, uint64_t seq,
                         const void *meta, size_t meta_len, const void *payload,
                         uint64_t payload_len, size_t pad);
/*
 * The same with hdr_crc started at seed instead of 0: the segment's own (a
 * segment written into a file that held another: drive_seg.c). A record
 * parsed with another seed fails its crc, so bytes of the file's earlier
 * life, whoever chose them, are not taken for this segment's records.
 */
size_t rec_encode_header_seeded(uint8_t *buf, uint32_t seed, uint8_t type, const rec_id_t *id,
                                uint64_t seq, const void *meta, size_t meta_len,
                                const void *payload, uint64_t payload_len, size_t pad);

/*
 * Rewrite the parsed header v (bytes at hdr) into out with `pad` bytes of
 * padding instead of its own; identity, sequence and chunk crcs are kept as
 * they are (the payload is not read again). Returns the new header length.
 * For compaction, which moves records to offsets of another alignment.
 */
size_t rec_repad(const rec_view_t *v, const uint8_t *hdr, uint8_t *out, size_t pad);

/*
 * Parse a header from buf (avail bytes). Returns 0; ERR_AGAIN when avail is
 * too short (then v->hdr_len, if non-zero, says how many bytes are needed);
 * ERR_CORRUPT for a bad magic, version, length or crc.
 */
int rec_parse_header(const void *buf, size_t avail, rec_view_t *v)
    __attribute__((warn_unused_result));
int rec_parse_header_seeded(const void *buf, size_t avail, uint32_t seed, rec_view_t *v)
    __attribute__((warn_unused_result));

/* crc32c stored for chunk i. */
uint32_t rec_chunk_crc(const rec_view_t *v, uint32_t i);

/*
 * Verify payload bytes [chunk_first*REC_CHUNK, ...) held in buf against the
 * stored chunk crcs, for chunks first..last inclusive. 0 or ERR_CORRUPT.
 */
int rec_verify_chunks(const rec_view_t *v, const uint8_t *buf, uint32_t first, uint32_t last)
    __attribute__((warn_unused_result));

/* Same identity? */
int rec_id_equal(const rec_id_t *a, const rec_id_t *b);

#endif
