/*
 * Fuzz the aws-chunked decoder, signed and unsigned, with and without
 * trailers, fed in pieces whose sizes come from the input.
 */
#include "common/err.h"
#include "s3/chunked.h"

#include <stdlib.h>

static int sink(void *arg, const uint8_t *p, size_t n)
{
    (void)p;
    *(size_t *)arg += n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint8_t mode = data[0], step = (uint8_t)(data[1] | 1);
    static const uint8_t key[32] = {1, 2, 3};
    s3_chunked_t *c = s3_chunked_new(
        mode & 1, (mode >> 1) & 1, key, "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
        "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
    size_t pos = 2, total = 0;
    int rc = 0;
    while (pos < size && rc == 0) {
        size_t used = 0, n = size - pos < step ? size - pos : step;
        rc = s3_chunked_feed(c, data + pos, n, &used, sink, &total);
        if (used > n || (rc == 0 && used != n)) abort();
        pos += used;
    }
    if (rc != 0 && rc != 1 && rc != ERR_INVAL && rc != ERR_DENIED) abort();
    if (total != s3_chunked_decoded(c)) abort();
    (void)s3_chunked_trailer(c, "x-amz-checksum-crc32");
    /* Every trailer named is one lookup finds (lowercase, NUL-terminated, not the signature). */
    for (int i = 0; s3_chunked_trailer_name(c, i); i++)
        if (!s3_chunked_trailer(c, s3_chunked_trailer_name(c, i))) abort();
    s3_chunked_free(c);
    return 0;
}
