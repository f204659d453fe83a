/*
 * batch: batch GET frame heads (layout in batch.h and docs/batch-get.md).
 */
#include "s3/batch.h"

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"

#include <string.h>

void s3_batch_head_encode(const s3_batch_head_t *h, uint8_t out[S3_BATCH_HEAD])
{
    memcpy(out, S3_BATCH_MAGIC, 4);
    le_put32(out + 4, h->index);
    le_put16(out + 8, h->status);
    le_put16(out + 10, h->key_len);
    le_put16(out + 12, h->etag_len);
    le_put16(out + 14, 0);
    le_put64(out + 16, h->object_size);
    le_put64(out + 24, h->payload_len);
    le_put32(out + 32, crc32c(0, out, 32));
    le_put32(out + 36, 0);
}

int s3_batch_head_decode(const uint8_t p[S3_BATCH_HEAD], s3_batch_head_t *h)
{
    if (memcmp(p, S3_BATCH_MAGIC, 4) != 0 || le_get32(p + 32) != crc32c(0, p, 32) ||
        le_get16(p + 14) != 0 || le_get32(p + 36) != 0)
        return ERR_INVAL;
    h->index = le_get32(p + 4);
    h->status = le_get16(p + 8);
    h->key_len = le_get16(p + 10);
    h->etag_len = le_get16(p + 12);
    h->object_size = le_get64(p + 16);
    h->payload_len = le_get64(p + 24);
    if (h->index == S3_BATCH_END &&
        (h->status != 200 || h->key_len || h->etag_len || h->object_size || h->payload_len))
        return ERR_INVAL;
    return 0;
}

uint64_t s3_batch_frame_len(const s3_batch_head_t *h)
{
    uint64_t fixed = S3_BATCH_HEAD + (uint64_t)h->key_len + h->etag_len + 4;
    return h->payload_len > UINT64_MAX - fixed ? UINT64_MAX : fixed + h->payload_len;
}
