/*
 * Fuzz the node protocol's codec (proto/wire.h): the first 32 bytes as a
 * frame header, the rest as the payload of every request type. Anything
 * must decode inside the input or be refused; a decoded request's pointers
 * stay inside the payload and its names are NUL-free and terminated; a PUT's
 * data offset read from a prefix agrees with the whole decode.
 */
#include "common/err.h"
#include "proto/wire.h"

#include <stdlib.h>
#include <string.h>

static proto_req_t q;

static void check_name(const char *s, size_t cap)
{
    if (!memchr(s, 0, cap)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    proto_hdr_t h;
    int rc = proto_hdr_decode(buf, size, &h);
    if (rc == 0) {
        if (h.type == 0 || h.type >= PROTO_TYPE_END || h.len > PROTO_MAX_PAYLOAD) abort();
        if (size - PROTO_HDR >= h.len) (void)proto_frame_ok(buf, buf + PROTO_HDR, h.len);
    } else if (rc != ERR_AGAIN && rc != ERR_CORRUPT) {
        abort();
    }
    const uint8_t *payload = size > PROTO_HDR ? buf + PROTO_HDR : buf;
    size_t len = size > PROTO_HDR ? size - PROTO_HDR : size;
    for (unsigned t = 0; t <= PROTO_TYPE_END; t++) {
        rc = proto_req_decode(t, payload, len, &q);
        if (rc == ERR_INVAL) continue;
        if (rc == ERR_CORRUPT) continue;
        if (rc != 0) abort();
        check_name(q.id.bucket, sizeof(q.id.bucket));
        check_name(q.id.key, sizeof(q.id.key));
        check_name(q.id.version, sizeof(q.id.version));
        check_name(q.prefix, sizeof(q.prefix));
        if (q.meta && (q.meta < payload || q.meta + q.meta_len > payload + len)) abort();
        if (q.data && (q.data < payload || q.data + q.data_len > payload + len)) abort();
    }
    /* A PUT's data offset, from the payload's prefix: inside it, and where a whole decode puts
     * the data. */
    size_t at = proto_put_data_at(payload, len);
    if (at > len) abort();
    if (proto_req_decode(PROTO_PUT, payload, len, &q) == 0 && at != (size_t)(q.data - payload))
        abort();
    free(buf);
    return 0;
}
