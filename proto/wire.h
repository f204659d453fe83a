/*
 * wire: the node-to-node protocol's frames and messages, as a pure codec
 * (no I/O, no allocation), so that it can be fuzzed on its own.
 *
 * A frame is a 32-byte header and a payload:
 *
 *   off  size  field
 *     0     4  magic "WLP1" (PROTO_MAGIC, little-endian u32)
 *     4     1  version (PROTO_VERSION): a peer speaking another is refused
 *     5     1  type (proto_type_t)
 *     6     2  flags: PROTO_F_RESP on a response
 *     8     8  request id: a response carries its request's; ids are the
 *              sender's, unique among its requests in flight on the
 *              connection, so responses may come back in any order
 *    16     4  payload length (at most PROTO_MAX_PAYLOAD)
 *    20     4  status: 0, or a response's ERR_* code (common/err.h)
 *    24     4  crc32c of bytes [0, 24) followed by the payload
 *    28     4  reserved, 0
 *
 * All integers are little-endian. Inside a payload, fields follow each
 * other in the order each message lists below, with no padding:
 *   u8 u16 u32 u64     fixed width
 *   str                u16 length, then the bytes (no NUL; NUL inside refused)
 *   blob               u32 length, then the bytes
 *   id                 str bucket, str key, str version, u32 shard
 *   stat               u64 len, u64 seq, u32 crc, u32 meta_len
 *
 * Messages (request -> response payload; a response with a non-zero status
 * has an empty payload unless said otherwise):
 *   HELLO      u16 proto version, str cluster id, str node id, u64 epoch,
 *              16 bytes nonce
 *          ->  str node id, u64 epoch, 16 bytes nonce, 32 bytes mac
 *   AUTH       32 bytes mac                    ->  (empty)
 *   PUT        u32 drive, id, u8 cond (0: none, else a head's condition,
 *              server/shard.h), [u64 stamp, str upload, str self: with a cond],
 *              blob meta, blob data  -> (empty); ERR_PRECOND: cond refused
 *   READ       u32 drive, id, u64 off, u32 len      -> blob data
 *   READ_SPLIT u32 drive, id, u32 len, u32 tail_len -> u32 crc of the first
 *              len bytes, blob data (len + tail_len bytes)
 *   GET        u32 drive, id, u32 meta_cap, u32 cap -> stat, blob data,
 *              blob meta (at most meta_cap); status ERR_RANGE when the
 *              payload is longer than cap, with the stat, no data, the meta
 *   STAT       u32 drive, id, u32 meta_cap     ->  stat, blob meta
 *   DEL        u32 drive, id, [u8 cond (1-5: a head's condition, server/
 *              shard.h), u64 stamp, str upload, str self]  ->  (empty);
 *              ERR_PRECOND: cond refused, nothing removed. The condition
 *              is there only when the payload goes on after the id (a plain
 *              delete ends there, as every build sends it). A node of an
 *              older build reads no condition and finds bytes left over: it
 *              answers ERR_CORRUPT and removes nothing, so a conditional
 *              delete is never taken for an unconditional one (the
 *              gateway counts it as a failing store)
 *   SCAN       u32 drive, str bucket, str prefix, u8 how, str from key,
 *              str from version, u32 limit, u8 with_meta
 *          ->  u32 n, then n x (str key, str version, u32 shard, stat,
 *              blob meta (empty without with_meta)), u8 more
 *   STATS      u32 drive                       ->  u32 n, n x u64 (the
 *              drive's counters in proto_stats order; doubles as IEEE bits)
 *   PING       (empty)                         ->  (empty)
 *   NODE_STATS (empty)                         ->  the node's own state as
 *              JSON text (its heal queue and heal scanner), for wl-admin
 *   HEAL_NOW   (empty)                         ->  (empty): the node's heal
 *              scanner starts a pass now (wl-admin drive replace);
 *              ERR_NOT_FOUND when its scanner is off
 *
 * A SCAN page ends only between two (key, version) pairs, so the next page
 * starts PAST_VERSION of its last entry without losing a shard of it.
 */
#ifndef WL_WIRE_H
#define WL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC       0x31504c57u /* "WLP1" */
#define PROTO_VERSION     1
#define PROTO_HDR         32
#define PROTO_MAX_PAYLOAD ((64u << 20) + (256u << 10)) /* the largest block, with its meta */
#define PROTO_F_RESP      1
#define PROTO_NONCE       16
#define PROTO_MAC         32
#define PROTO_MAX_NAME    255  /* bucket, version, cluster and node ids */
#define PROTO_MAX_KEY     1024 /* keys */
#define PROTO_COND_MAX    5    /* the highest condition mode (server/shard.h's SHARD_IF_*) */

typedef enum {
    PROTO_HELLO = 1,
    PROTO_AUTH,
    PROTO_PUT,
    PROTO_READ,
    PROTO_READ_SPLIT,
    PROTO_GET,
    PROTO_STAT,
    PROTO_DEL,
    PROTO_SCAN,
    PROTO_STATS,
    PROTO_PING,
    PROTO_NODE_STATS,
    PROTO_HEAL_NOW,
    PROTO_TYPE_END
} proto_type_t;

/* The name of a type for log lines ("PUT"), "?" when unknown. */
const char *proto_type_name(unsigned type);

typedef struct {
    uint8_t type;
    uint16_t flags;
    uint64_t id;
    uint32_t len;   /* payload bytes */
    int32_t status; /* 0 or ERR_* */
    uint32_t crc;
} proto_hdr_t;

/*
 * Encode h into out with the crc over out[0, 24) followed by the payload
 * whose crc32c chain is given: crc_payload(h) runs the chain. Callers with
 * a payload in several pieces (fields, then a caller's data) use
 * proto_hdr_seal: encode, crc32c each piece on top of proto_hdr_crc_start,
 * then proto_hdr_put_crc.
 */
void proto_hdr_encode(uint8_t out[PROTO_HDR], const proto_hdr_t *h);
uint32_t proto_hdr_crc_start(const uint8_t hdr[PROTO_HDR]);
void proto_hdr_put_crc(uint8_t hdr[PROTO_HDR], uint32_t crc);
/* Encode and seal a header whose payload is one piece (may be NULL when len is 0). */
void proto_hdr_seal(uint8_t out[PROTO_HDR], const proto_hdr_t *h, const void *payload);
/*
 * The same, with payload bytes [at, at + n) of known crc32c (computed as they were written
 * there: a drive read verifies its chunks and combines their crcs): combined in, not read
 * again (crc32c_combine). The rest of the payload is read as by proto_hdr_seal.
 */
void proto_hdr_seal_known(uint8_t out[PROTO_HDR], const proto_hdr_t *h, const uint8_t *payload,
                          size_t at, size_t n, uint32_t crc);

/*
 * Decode a header from n bytes: 0, ERR_AGAIN (fewer than PROTO_HDR bytes),
 * ERR_CORRUPT (bad magic, version, reserved field, type or length: the
 * stream cannot be trusted past it). The crc is checked by proto_frame_ok
 * once the payload is in.
 */
int proto_hdr_decode(const uint8_t *p, size_t n, proto_hdr_t *h)
    __attribute__((warn_unused_result));
/* Whether the header bytes and payload match the header's crc. */
int proto_frame_ok(const uint8_t hdr[PROTO_HDR], const void *payload, size_t len);

/* ---- payload fields ---- */

/* A writer over caller memory: overflow sets err (ERR_TOO_LARGE) and writes nothing more. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int err;
} proto_w_t;

void proto_w_init(proto_w_t *w, void *buf, size_t cap);
void proto_w_u8(proto_w_t *w, uint8_t v);
void proto_w_u16(proto_w_t *w, uint16_t v);
void proto_w_u32(proto_w_t *w, uint32_t v);
void proto_w_u64(proto_w_t *w, uint64_t v);
void proto_w_bytes(proto_w_t *w, const void *b, size_t n); /* raw, no length */
void proto_w_str(proto_w_t *w, const char *s);             /* NUL-terminated; at most 65535 */
void proto_w_blob(proto_w_t *w, const void *b, size_t n);
/* The u32 length of a blob whose bytes the caller sends after the fields (zero copy). */
void proto_w_blob_len(proto_w_t *w, size_t n);

/* A reader: a short or malformed field sets err (ERR_CORRUPT) and reads zeros after. */
typedef struct {
    const uint8_t *p;
    size_t len, off;
    int err;
} proto_r_t;

void proto_r_init(proto_r_t *r, const void *buf, size_t len);
uint8_t proto_r_u8(proto_r_t *r);
uint16_t proto_r_u16(proto_r_t *r);
uint32_t proto_r_u32(proto_r_t *r);
uint64_t proto_r_u64(proto_r_t *r);
/* n raw bytes (a pointer into the buffer), NULL on error. */
const uint8_t *proto_r_bytes(proto_r_t *r, size_t n);
/* A str into out (cap bytes with its NUL): longer than cap - 1, or holding NUL: err. */
void proto_r_str(proto_r_t *r, char *out, size_t cap);
/* A blob: its bytes in the buffer (*n of them), NULL with *n 0 on error. */
const uint8_t *proto_r_blob(proto_r_t *r, uint32_t *n);
/* 0 when every byte was read and nothing failed, else ERR_CORRUPT. */
int proto_r_end(const proto_r_t *r) __attribute__((warn_unused_result));

/* ---- messages ---- */

/* A record's identity with the strings in place (NUL-terminated). */
typedef struct {
    char bucket[PROTO_MAX_NAME + 1];
    char key[PROTO_MAX_KEY + 1];
    char version[PROTO_MAX_NAME + 1];
    uint32_t shard;
} proto_id_t;

typedef struct {
    uint64_t len, seq;
    uint32_t crc, meta_len;
} proto_stat_t;

void proto_w_id(proto_w_t *w, const char *bucket, const char *key, const char *version,
                uint32_t shard);
void proto_r_id(proto_r_t *r, proto_id_t *id);
void proto_w_stat(proto_w_t *w, const proto_stat_t *st);
void proto_r_stat(proto_r_t *r, proto_stat_t *st);

/*
 * A decoded request. Pointers (meta, data) point into the payload decoded,
 * which must outlive the struct's use. Fields a type does not carry are 0.
 */
typedef struct {
    uint8_t type;
    uint32_t drive;
    proto_id_t id;
    uint64_t off;
    uint32_t len, tail_len, meta_cap, cap, limit;
    const uint8_t *meta, *data;
    uint32_t meta_len, data_len;
    /* PUT of a head, DEL: its condition (cond_mode 0: none) */
    uint8_t cond_mode;
    uint64_t cond_stamp;
    char cond_upload[PROTO_MAX_NAME + 1];
    char cond_self[PROTO_MAX_NAME + 1];
    /* SCAN */
    char prefix[PROTO_MAX_KEY + 1];
    uint8_t how, with_meta;
    char from_key[PROTO_MAX_KEY + 1];
    char from_version[PROTO_MAX_NAME + 1];
    /* HELLO, AUTH */
    uint16_t version;
    char cluster[PROTO_MAX_NAME + 1];
    char node[PROTO_MAX_NAME + 1];
    uint64_t epoch;
    uint8_t nonce[PROTO_NONCE];
    uint8_t mac[PROTO_MAC];
} proto_req_t;

/*
 * Decode the payload of a request of type `type` into q (every field read,
 * no byte left over). 0 or ERR_CORRUPT (ERR_INVAL: a type with no request).
 */
int proto_req_decode(unsigned type, const void *payload, size_t len, proto_req_t *q)
    __attribute__((warn_unused_result));
/*
 * Where a PUT's data starts in its payload, read from the first avail bytes of
 * it (the fields before the data: a frame's start, before the rest arrives);
 * 0 when they are not all there or do not decode. A receiver places the frame
 * so that the data lands on a page, and the drive writes it from there.
 */
size_t proto_put_data_at(const void *payload, size_t avail) __attribute__((warn_unused_result));

/* The number of counters in a STATS response (proto_stats_put / _get order). */
#define PROTO_STATS_N 40

#endif
