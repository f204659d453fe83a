/*
 * sigv4: AWS Signature Version 4 for S3, both sides (no I/O).
 *
 * The server verifies: an Authorization header or a presigned query string
 * is parsed into a sigv4_auth_t; sigv4_verify rebuilds the canonical request
 * from what was received and compares signatures in constant time. The
 * client (wl-bench, the C client) signs with sigv4_sign_headers. Streaming
 * uploads (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) chain a signature per chunk
 * from the seed signature: sigv4_chunk_signature.
 *
 * Canonical forms follow the S3 flavour of SigV4: the path is URI-encoded
 * once (each byte outside A-Z a-z 0-9 - _ . ~ and '/' as %XX, upper case),
 * after decoding whatever encoding the client chose, so "/a$b" and
 * "/a%24b" sign the same; query names and values likewise (with '/' encoded),
 * sorted by name then value.
 */
#ifndef WL_SIGV4_H
#define WL_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#define SIGV4_UNSIGNED          "UNSIGNED-PAYLOAD"
#define SIGV4_STREAMING         "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define SIGV4_STREAMING_TRAILER "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define SIGV4_UNSIGNED_TRAILER  "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

typedef struct {
    const char *name; /* any case */
    size_t name_len;
    const char *value;
    size_t value_len;
} sigv4_header_t;

typedef struct {
    const char *method;
    const char *path; /* as received, percent-encoded, without the query */
    size_t path_len;
    const char *query; /* without '?'; may be NULL */
    size_t query_len;
    const sigv4_header_t *headers;
    size_t nheaders;
    const char *payload_hash; /* hex SHA-256, or one of the SIGV4_* payload names */
} sigv4_request_t;

typedef struct {
    char access_key[129];
    char date[9]; /* YYYYMMDD of the credential scope */
    char region[64];
    char service[32];
    char signed_headers[4096]; /* "host;range;x-amz-date" (many x-amz-meta-* fit) */
    char signature[65];
    char amz_date[17]; /* YYYYMMDDTHHMMSSZ; from X-Amz-Date for presigned URLs */
    long expires;      /* presigned: X-Amz-Expires seconds; else 0 */
    int presigned;
} sigv4_auth_t;

/* Parse "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...". 0 or ERR_INVAL. */
int sigv4_parse_header(const char *value, size_t len, sigv4_auth_t *out)
    __attribute__((warn_unused_result));

/* Parse presigned-URL parameters. 0, ERR_NOT_FOUND (not presigned) or ERR_INVAL. */
int sigv4_parse_query(const char *query, size_t len, sigv4_auth_t *out)
    __attribute__((warn_unused_result));

/* "YYYYMMDD/region/service/aws4_request" into buf (at least 128 bytes). */
void sigv4_scope(const sigv4_auth_t *a, char *buf, size_t cap);

/* The signing key: HMAC chain over date, region, service, "aws4_request". */
void sigv4_signing_key(const char *secret, const char *date, const char *region,
                       const char *service, uint8_t key[32]);

/*
 * A cache of signing keys. A key depends on the secret, the date, the
 * region and the service alone, so the four HMACs that derive it are done
 * once a day per user instead of on every request (the fifth, over the
 * string to sign, stays per request). Entries are found by all four inputs
 * compared whole (the secret in constant time): a changed secret or another
 * day is a miss and is derived afresh, never served a neighbour's key. A
 * fixed number of slots, each holding the last key that hashed there: the
 * memory is bounded whatever the requests. Any thread; one mutex, held only
 * to compare and copy a slot, never while an HMAC is computed.
 */
typedef struct sigv4_key_cache sigv4_key_cache_t;

#define SIGV4_CACHE_SECRET_MAX 128 /* longer secrets are not cached (derived every time) */

/* A cache of `slots` keys (at least 1, rounded up to a power of two, at most 4096). */
sigv4_key_cache_t *sigv4_key_cache_new(unsigned slots);
/* Frees c (NULL-safe), the secrets and keys it held wiped first. */
void sigv4_key_cache_free(sigv4_key_cache_t *c);
/* sigv4_signing_key through c (NULL: derived, no cache). */
void sigv4_key_cache_get(sigv4_key_cache_t *c, const char *secret, const char *date,
                         const char *region, const char *service, uint8_t key[32]);
/* Lookups that found their key, and keys derived (tests, stats). */
void sigv4_key_cache_counts(sigv4_key_cache_t *c, uint64_t *hits, uint64_t *misses);

/*
 * The canonical request (malloc'd, NUL-terminated; caller frees) for the
 * given signed header list. Presigned requests leave X-Amz-Signature out of
 * the query. Returns NULL when a signed header is missing from the request
 * or an escape is malformed.
 */
char *sigv4_canonical_request(const sigv4_request_t *r, const char *signed_headers, int presigned);

/* hex(HMAC(key, "AWS4-HMAC-SHA256\n" amz_date "\n" scope "\n" hex(sha256(canon)))) */
void sigv4_signature(const uint8_t key[32], const char *amz_date, const char *scope,
                     const char *canonical, char sig[65]);

/*
 * Verify a request against its parsed auth and the secret of a.access_key.
 * Returns 0 or ERR_DENIED (wrong signature, missing signed header). The
 * signing key is left in key_out (if non-NULL) for chunk signatures.
 */
int sigv4_verify(const sigv4_request_t *r, const sigv4_auth_t *a, const char *secret,
                 uint8_t key_out[32]) __attribute__((warn_unused_result));
/* sigv4_verify with the signing key from cache (NULL: derived). */
int sigv4_verify_cached(const sigv4_request_t *r, const sigv4_auth_t *a, const char *secret,
                        sigv4_key_cache_t *cache, uint8_t key_out[32])
    __attribute__((warn_unused_result));

/*
 * Every x-amz-* header the request carries must be signed, and so must
 * host (as AWS requires): otherwise anyone holding a presigned URL could add
 * x-amz-acl or x-amz-copy-source to it. Presigned URLs may carry an
 * unsigned x-amz-date / x-amz-content-sha256 header (their own values are
 * in the query). 0, or ERR_DENIED with *missing the first header not signed.
 */
int sigv4_check_coverage(const sigv4_request_t *r, const sigv4_auth_t *a, const char **missing)
    __attribute__((warn_unused_result));

/* Chunk signature of a streaming upload, chained from prev (seed = request signature). */
void sigv4_chunk_signature(const uint8_t key[32], const char *amz_date, const char *scope,
                           const char *prev, const uint8_t chunk_sha256[32], char sig[65]);

/* Signature of the trailing headers of STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER. */
void sigv4_trailer_signature(const uint8_t key[32], const char *amz_date, const char *scope,
                             const char *prev, const uint8_t trailer_sha256[32], char sig[65]);

/*
 * Client side: sign r (every header in r->headers is signed; names must be
 * lower case and include host and x-amz-date = amz_date) and write the
 * Authorization value into out. key is the signing key for amz_date's day
 * (sigv4_signing_key; a client caches it per day). 0, ERR_INVAL (a header
 * name not lower case, too many headers, a malformed escape) or ERR_NOSPC.
 */
int sigv4_sign(const sigv4_request_t *r, const char *access_key, const uint8_t key[32],
               const char *region, const char *amz_date, char *out, size_t cap)
    __attribute__((warn_unused_result));

/* "AK/YYYYMMDD/region/service/aws4_request" into out's access key and scope. 0 or ERR_INVAL. */
int sigv4_parse_credential(const char *cred, sigv4_auth_t *out) __attribute__((warn_unused_result));
/* A browser-based (POST form) upload's signature: hex(HMAC(key, the base64 policy)). */
void sigv4_post_signature(const uint8_t key[32], const char *policy_b64, char sig[65]);

/* Constant-time comparison of two NUL-terminated hex signatures. */
int sigv4_sig_equal(const char *a, const char *b);

/* Lower-case hex of n bytes into out (2n+1). */
void sigv4_hex(const uint8_t *in, size_t n, char *out);

/* SHA-256 of a buffer as lower-case hex (65 bytes). */
void sigv4_sha256_hex(const void *buf, size_t len, char out[65]);

#endif
