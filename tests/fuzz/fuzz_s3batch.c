/*
 * Fuzz batch GET's untrusted inputs, the gateway's side (fuzz_batch is the client's parser): the
 * request body (s3_xml_batch_get, first byte even) and, as a client reads it, a response stream of
 * frames (s3/batch.h, first byte odd): heads decoded, lengths bounded by what is there, payload
 * crcs checked, up to the end frame. Refusals are fine; crashes, leaks, reads past the input and
 * results out of bounds are not.
 */
#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "s3/batch.h"
#include "s3/xml.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void body(const uint8_t *p, size_t len)
{
    s3_xml_batch_entry_t *e;
    int n;
    int rc = s3_xml_batch_get((const char *)p, len, &e, &n);
    if (rc != 0) {
        if (rc != ERR_INVAL && rc != ERR_TOO_LARGE && rc != ERR_NOMEM) abort();
        return;
    }
    if (n < 0 || n > S3_XML_BATCH_MAX || (n && !e)) abort();
    for (int i = 0; i < n; i++) {
        size_t kl = strlen(e[i].key);
        if (kl == 0 || kl > S3_XML_MAX_KEY ||
            strnlen(e[i].range, sizeof(e[i].range)) == sizeof(e[i].range) ||
            strnlen(e[i].vid, sizeof(e[i].vid)) == sizeof(e[i].vid) ||
            (e[i].has_vid && !e[i].vid[0]) || (!e[i].has_vid && e[i].vid[0]))
            abort();
    }
    s3_xml_batch_free(e, n);
}

static void stream(const uint8_t *p, size_t len)
{
    size_t off = 0;
    uint32_t expect = 0;
    while (len - off >= S3_BATCH_HEAD) {
        s3_batch_head_t h;
        if (s3_batch_head_decode(p + off, &h) != 0) return;
        /* What decodes re-encodes to the very same bytes. */
        uint8_t again[S3_BATCH_HEAD];
        s3_batch_head_encode(&h, again);
        if (memcmp(again, p + off, S3_BATCH_HEAD) != 0) abort();
        uint64_t fl = s3_batch_frame_len(&h);
        if (fl < S3_BATCH_HEAD + 4 || fl > len - off) return; /* cut */
        const uint8_t *payload = p + off + S3_BATCH_HEAD + h.key_len + h.etag_len;
        uint32_t crc = le_get32(payload + h.payload_len);
        if (crc != crc32c(0, payload, (size_t)h.payload_len)) return;
        if (h.index == S3_BATCH_END) return;
        if (h.index != expect++) return; /* out of order: a client refuses it */
        off += (size_t)fl;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (data[0] & 1)
        stream(data + 1, size - 1);
    else
        body(data + 1, size - 1);
    return 0;
}
