/*
 * batch: the client side of warmlake's batch GET (docs/batch-get.md): the
 * request body and an incremental parser of the response stream. Pure: no
 * I/O, no threads, so it is unit-tested and fuzzed on its own.
 *
 * Response stream: one frame per requested entry, in request order, then an
 * end frame. All integers little-endian:
 *
 *   off len field
 *   0   4   magic "WLB1"
 *   4   4   index        entry number in the request; 0xFFFFFFFF = end frame
 *   8   2   status       200, 206 or the entry's error status (403, 404, 416 ...)
 *   10  2   key_len      bytes of key after the header
 *   12  2   etag_len     bytes of etag (no quotes) after the key; 0 on error
 *   14  2   reserved     0
 *   16  8   object_size  whole object size (0 on error)
 *   24  8   payload_len  payload bytes after key+etag: the object's bytes (the
 *                        range for 206) or, on error, the S3 error code as text
 *   32  4   hdr_crc      crc32c of bytes 0..31
 *   36  4   reserved     0
 *   then key, etag, payload, then u32 crc32c of the payload.
 *
 * The parser is fed whatever pieces the socket gives. Payload bytes go to
 * the caller's data callback as they arrive (into the caller's buffer, no
 * staging); key and etag are collected first so the begin callback sees
 * them whole. A frame is only good once its payload crc matched (end
 * callback); a stream that stops earlier is cut, and the entries whose end
 * callback did not run must be fetched again.
 */
#ifndef WL_BATCH_H
#define WL_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define BATCH_MAGIC       "WLB1"
#define BATCH_HDR_LEN     40
#define BATCH_END_INDEX   0xFFFFFFFFu
#define BATCH_ERRCODE_MAX 256 /* longest error payload kept as text (longer is corrupt) */

typedef struct {
    uint32_t index;
    uint16_t status;
    uint64_t object_size;
    uint64_t payload_len;
    const char *key; /* NUL-terminated; valid during callbacks of this frame */
    size_t key_len;
    const char *etag; /* NUL-terminated */
    size_t etag_len;
    const char *error_code; /* error entries, at end: the payload as text; else "" */
} batch_entry_t;

/*
 * Callbacks return 0 to go on, or a negative ERR_* that stops the parse
 * (batch_feed returns it). begin: the header, key and etag arrived. data:
 * payload bytes at payload offset off (success entries only; error payloads
 * are collected into error_code). end: the payload crc matched.
 */
typedef struct {
    int (*begin)(void *arg, const batch_entry_t *e);
    int (*data)(void *arg, const batch_entry_t *e, uint64_t off, const void *p, size_t n);
    int (*end)(void *arg, const batch_entry_t *e);
    void *arg;
} batch_cb_t;

typedef struct batch_parser batch_parser_t;

/* A parser for the response to a request of n entries (frames must come as 0, 1, ... n-1,
   then the end frame). 0 or ERR_NOMEM. Free with batch_parser_free (NULL-safe). */
int batch_parser_new(const batch_cb_t *cb, uint32_t n, batch_parser_t **out)
    __attribute__((warn_unused_result));
void batch_parser_free(batch_parser_t *p);

/*
 * Feed the next len bytes. 0: consumed, more expected. 1: the end frame
 * arrived (bytes after it are refused: ERR_CORRUPT). ERR_CORRUPT: bad magic,
 * header crc, payload crc, an entry out of order, a reserved field set, an
 * error payload longer than BATCH_ERRCODE_MAX, an end
 * frame before n entries. Or a callback's code. After
 * a failure the parser refuses further input with the same code.
 */
int batch_feed(batch_parser_t *p, const void *data, size_t len) __attribute__((warn_unused_result));

/* Entries whose end callback ran (the good ones, a prefix of the request). */
uint32_t batch_done(const batch_parser_t *p);
/* 1 once the end frame was parsed. */
int batch_ended(const batch_parser_t *p);

/*
 * The request body: <BatchGet><Object><Key>..</Key>[<Range>bytes=A-B</Range>]</Object>...
 * Entries with len 0 ask for the whole object; else bytes off..off+len-1.
 * Keys are XML-escaped. Returns a malloc'd NUL-terminated body (caller
 * frees) and its length in *out_len, or NULL when memory is short.
 */
char *batch_request_body(const char *const *keys, const uint64_t *offs, const uint64_t *lens,
                         size_t n, size_t *out_len);

#endif
