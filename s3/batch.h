/*
 * batch: the frames of a batch GET's response (warmlake's extension,
 * docs/batch-get.md), encoded and decoded; no I/O. The gateway encodes
 * (server/s3_batch.c); a client, a test or a fuzzer decodes.
 *
 * A frame is a 40-byte head, then key_len bytes of key, etag_len of ETag,
 * payload_len of payload, then the payload's crc32c (4 bytes, LE):
 *
 *   off len field
 *   0   4   magic "WLB1"
 *   4   4   index        entry number in the request; S3_BATCH_END for the end frame
 *   8   2   status       200, 206, or the entry's error status
 *   10  2   key_len
 *   12  2   etag_len     0 on error
 *   14  2   reserved     0
 *   16  8   object_size  the whole object's size (0 on error)
 *   24  8   payload_len  the bytes (the range for 206), or the S3 error code as text
 *   32  4   hdr_crc      crc32c of bytes 0..31
 *   36  4   reserved     0
 *
 * All integers little-endian. The end frame: index S3_BATCH_END, status 200,
 * nothing after the head but a crc of 0 (crc32c of nothing).
 */
#ifndef WL_S3_BATCH_H
#define WL_S3_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define S3_BATCH_HEAD  40
#define S3_BATCH_MAGIC "WLB1"
#define S3_BATCH_END   0xFFFFFFFFu

typedef struct {
    uint32_t index;
    uint16_t status;
    uint16_t key_len, etag_len;
    uint64_t object_size;
    uint64_t payload_len;
} s3_batch_head_t;

/* The 40 bytes of h's head (hdr_crc computed, reserved fields 0). */
void s3_batch_head_encode(const s3_batch_head_t *h, uint8_t out[S3_BATCH_HEAD]);
/*
 * The head in the first S3_BATCH_HEAD bytes of p: 0 with *h filled, ERR_INVAL
 * when the magic, the head crc or a reserved field is wrong, or when an end
 * frame carries anything (a status but 200, a key, an ETag, a size, a payload).
 */
int s3_batch_head_decode(const uint8_t p[S3_BATCH_HEAD], s3_batch_head_t *h)
    __attribute__((warn_unused_result));
/* Bytes of the whole frame h heads (head, key, ETag, payload, crc); UINT64_MAX when that
 * does not fit 64 bits. */
uint64_t s3_batch_frame_len(const s3_batch_head_t *h);

#endif
