/*
 * Fuzz wl-bench's response path: client/s3c parsing HTTP responses (status,
 * ETag, Content-Range, Retry-After, chunked and length-delimited bodies,
 * HEAD without body) and pulling S3 error codes out of XML bodies. Fed
 * whole and in pieces: both must agree.
 */
#include "client/s3c.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

static void count(void *arg, uint64_t off, const void *buf, size_t len)
{
    uint64_t *n = arg;
    if (off != *n) abort(); /* pieces arrive in order, without gaps */
    (void)buf;
    *n += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static s3c_t *c;
    if (!c) {
        s3c_cfg_t cfg = {.endpoint = "http://127.0.0.1:1", .max_body_keep = 1 << 20};
        c = s3c_new(&cfg);
    }
    if (size < 2) return 0;
    int head = data[0] & 1, sink = (data[0] >> 1) & 1;
    size_t step = 1 + data[1] % 97;
    s3c_resp_t a, b;
    uint64_t na = 0, nb = 0;
    int ra = s3c_parse_response(c, (const char *)data + 2, size - 2, size, head,
                                sink ? count : NULL, &na, &a);
    char code_a[64];
    memcpy(code_a, a.code, sizeof(code_a));
    int rb = s3c_parse_response(c, (const char *)data + 2, size - 2, step, head,
                                sink ? count : NULL, &nb, &b);
    if ((ra == 0) != (rb == 0)) abort();
    if (ra == 0 && (a.status != b.status || a.body_bytes != b.body_bytes || na != nb ||
                    strcmp(a.etag, b.etag) != 0 || strcmp(code_a, b.code) != 0 ||
                    a.range_start != b.range_start || a.range_total != b.range_total))
        abort();
    if (ra == 0 && sink && b.status < 300 && nb != b.body_bytes) abort();
    return 0;
}
