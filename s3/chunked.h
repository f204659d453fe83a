/*
 * chunked: incremental decoder of aws-chunked request bodies (no I/O).
 *
 *   signed:   <hex-size>;chunk-signature=<64 hex>\r\n<data>\r\n ... 0;chunk-signature=..\r\n
 *   unsigned: <hex-size>\r\n<data>\r\n ... 0\r\n
 * followed by "\r\n", or, when trailers are announced (x-amz-trailer), by
 * trailer lines "name:value\r\n" (x-amz-checksum-crc32 etc., and for signed
 * bodies x-amz-trailer-signature) and an empty line.
 *
 * Signed chunks are verified as they complete, each chained from the one
 * before (the seed is the request's signature). Data is handed to the sink
 * as it arrives, before its chunk's signature is checked: the caller must
 * not make anything visible until the decoder reports the end (1); any
 * error means the whole body is to be discarded.
 */
#ifndef WL_CHUNKED_H
#define WL_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

#define S3_CHUNKED_MAX_CHUNK (1ull << 30)
/* A signed chunk's least size, the last chunk with data aside (S3's rule). */
#define S3_CHUNKED_MIN_CHUNK 8192

typedef int (*s3_chunk_sink_fn)(void *arg, const uint8_t *data, size_t len);

typedef struct s3_chunked s3_chunked_t;

/*
 * signed_chunks=1 verifies chunk signatures with key/amz_date/scope, chained
 * from seed_sig. trailer=1 expects trailing headers after the last chunk.
 */
s3_chunked_t *s3_chunked_new(int signed_chunks, int trailer, const uint8_t key[32],
                             const char *amz_date, const char *scope, const char *seed_sig);
void s3_chunked_free(s3_chunked_t *c);

/*
 * Feed body bytes. Decoded data goes to sink (a non-zero return aborts and is
 * returned). Returns 0 when all input was consumed and more is expected, 1
 * when the body is complete (*used = bytes consumed; the rest is not part of
 * it), ERR_INVAL for a malformed body, ERR_DENIED for a bad signature,
 * ERR_RANGE for a signed chunk under S3_CHUNKED_MIN_CHUNK bytes that another
 * chunk with data follows.
 */
int s3_chunked_feed(s3_chunked_t *c, const uint8_t *in, size_t len, size_t *used,
                    s3_chunk_sink_fn sink, void *arg) __attribute__((warn_unused_result));

/* Decoded bytes so far. */
uint64_t s3_chunked_decoded(const s3_chunked_t *c);

/* Value of a trailer (e.g. "x-amz-checksum-crc32c") once complete, else NULL. */
const char *s3_chunked_trailer(const s3_chunked_t *c, const char *name);
/* The i-th trailer's name (lowercase; not x-amz-trailer-signature) once complete, else NULL. */
const char *s3_chunked_trailer_name(const s3_chunked_t *c, int i);

#endif
