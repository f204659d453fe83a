/*
 * libwarmlake: a C client for S3 servers, best against warmlake.
 *
 * A wl_client_t holds, per endpoint, a pool of keep-alive HTTP connections
 * (SigV4-signed requests, UNSIGNED-PAYLOAD), and a small thread pool that
 * runs the parts of parallel operations: ranged GETs of one large object,
 * GETs of many objects, the parts of a multipart PUT, a prefetch queue.
 * Requests are spread round robin over all endpoints given (the nodes of a
 * warmlake cluster); a retried request goes to the next endpoint.
 *
 * Reads land in caller-provided buffers: a body with a Content-Length is
 * received from the socket straight into the buffer.
 *
 * Retries: a request that met a connection error, a cut body, or a 500,
 * 502, 503 or 504 is sent again, at most max_attempts times in all, after a
 * randomised exponential backoff (full jitter; Retry-After respected up to
 * the cap). Verification: a GET's body must match its Content-Length (and
 * a part its Content-Range); every part of a parallel read is asked with
 * If-Match: the first part's ETag, and must carry it (an object replaced
 * mid-read fails with WL_EPRECOND, or WL_ECORRUPT from a server that ignores
 * If-Match, instead of mixing versions); a PUT's MD5 must match the ETag
 * returned when the server gives an MD5 ETag; with verify_get, whole reads
 * must hash to an MD5 ETag.
 *
 * Errors: every function returns WL_OK (0) or a negative WL_E* code. The
 * failing call leaves the details (HTTP status, S3 error code, request id, a
 * message) in wl_last_error(), which is per thread.
 *
 * Threads: a wl_client_t may be used from any number of threads at once;
 * every function here blocks until its requests are done. Objects returned
 * (wl_list_t, wl_prefetch_t) belong to one thread at a time.
 *
 * Memory: the library never aborts on a failed allocation; it returns
 * WL_ENOMEM.
 */
#ifndef WL_WL_H
#define WL_WL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Results that must be looked at (every int-returning function here). */
#if defined(__GNUC__) || defined(__clang__)
#define WL_MUST_CHECK __attribute__((warn_unused_result))
#else
#define WL_MUST_CHECK
#endif

/* Return codes (the values of warmlake's common/err.h, plus WL_ESERVER). */
#define WL_OK        0
#define WL_ENOMEM    (-1)   /* out of memory */
#define WL_EIO       (-2)   /* connection failed or cut, after all attempts */
#define WL_EINVAL    (-3)   /* bad argument (endpoint, bucket, key too long ...) */
#define WL_ENOTFOUND (-4)   /* 404: no such bucket or key */
#define WL_ECORRUPT  (-5)   /* body, length, ETag or checksum does not match */
#define WL_ETOOLARGE (-11)  /* the object does not fit the buffer given */
#define WL_ERANGE    (-14)  /* 416: range not satisfiable */
#define WL_EDENIED   (-15)  /* 403: access denied */
#define WL_EPRECOND  (-16)  /* 412 / 304: a precondition does not hold */
#define WL_ESERVER   (-100) /* any other error status; see wl_last_error() */

typedef struct wl_client wl_client_t;

typedef struct {
    const char *endpoints;  /* "http://host:port", several separated by ',' (required) */
    const char *access_key; /* NULL: requests go unsigned */
    const char *secret_key;
    const char *region;     /* default "us-east-1" */
    int conns_per_endpoint; /* keep-alive connections per endpoint at most; default 16 */
    int threads;            /* threads running parallel parts; default 8 */
    uint64_t part_size;     /* parallel GET and multipart PUT part; default 8 MiB, min 5 MiB */
    int max_attempts;       /* tries of one request in all; default 5 */
    int backoff_ms;         /* first backoff; default 50 (doubling, capped at 5 s) */
    int timeout_ms;         /* per socket operation; default 120000 */
    int no_batch;           /* 1: never try warmlake's batch GET (plain S3) */
    int no_verify;          /* 1: do not compute MD5s of uploads */
    /* Called (from any of the client's threads, or the caller's) after each successful
       request with the body bytes it moved: progress meters. May be NULL. */
    void (*on_bytes)(void *arg, uint64_t n);
    void *on_bytes_arg;
    /* 1: whole objects read into buffers (wl_get of a whole object, wl_get_parallel, items
       of wl_get_many / wl_get_batch) are checked against an MD5 ETag when the server gives
       one (not multipart ones): a mismatch is retried, then fails with WL_ECORRUPT. Costs an
       MD5 pass over the bytes. */
    int verify_get;
} wl_config_t;

typedef struct {
    int code;             /* the WL_E* returned */
    int http_status;      /* 0 when no response came */
    char s3_code[64];     /* "NoSuchKey", "SlowDown" ... or "" */
    char request_id[128]; /* x-amz-request-id of the failing response, or "" */
    char message[256];
} wl_error_t;

/* The calling thread's last failure (never NULL; code 0 before any). Valid until the
   thread's next call into the library. */
const wl_error_t *wl_last_error(void);
/* A message for a code; never NULL. */
const char *wl_strerror(int code);

/*
 * A client for cfg (copied: strings need not outlive the call). Returns
 * WL_OK with *out set, WL_EINVAL (no endpoint, a malformed one) or
 * WL_ENOMEM. No connection is made until the first request.
 */
int wl_client_new(const wl_config_t *cfg, wl_client_t **out) WL_MUST_CHECK;
/* Closes connections and stops threads. No call may be running. NULL is a no-op. */
void wl_client_free(wl_client_t *c);

/* Counters since the client was made (any thread; each read is a snapshot). */
typedef struct {
    uint64_t requests;       /* responses received, any status */
    uint64_t retries;        /* attempts after the first */
    uint64_t bytes_in;       /* body bytes of successful GETs */
    uint64_t bytes_out;      /* body bytes of successful PUTs */
    uint64_t batch_requests; /* batch GET POSTs sent */
    uint64_t batch_entries;  /* entries delivered by batch GET */
    uint64_t single_gets;    /* entries fetched with single GETs by wl_get_many/wl_get_batch */
    int batch_unsupported;   /* 1 once a server refused batch GET */
} wl_stats_t;

void wl_client_stats(wl_client_t *c, wl_stats_t *out);

typedef struct {
    uint64_t size;
    char etag[128]; /* without quotes */
    char last_modified[64];
    char content_type[128];
} wl_stat_t;

/* HEAD: size, ETag, dates. WL_ENOTFOUND when absent. */
int wl_stat(wl_client_t *c, const char *bucket, const char *key, wl_stat_t *st) WL_MUST_CHECK;

/*
 * One GET of bytes off..off+len-1 (len 0: from off to the end; off 0 len 0:
 * the whole object) into buf (cap bytes). *got: bytes received. st (may be
 * NULL): the object's size (from Content-Range for ranges) and ETag.
 * WL_ETOOLARGE when the body is larger than cap (nothing useful in buf).
 */
int wl_get(wl_client_t *c, const char *bucket, const char *key, uint64_t off, uint64_t len,
           void *buf, size_t cap, size_t *got, wl_stat_t *st) WL_MUST_CHECK;

/*
 * The whole object into buf in parallel ranged parts of part_size: the first
 * part tells the size, the others run on the client's threads, asked with
 * If-Match: its ETag. Same results as wl_get, and WL_EPRECOND / WL_ECORRUPT
 * when the object changed mid-read.
 */
int wl_get_parallel(wl_client_t *c, const char *bucket, const char *key, void *buf, size_t cap,
                    size_t *got, wl_stat_t *st) WL_MUST_CHECK;

/* The whole object written to fd (pwrite at offsets, parallel parts as above; the file
   is not truncated). WL_EIO also when a pwrite fails. */
int wl_get_fd(wl_client_t *c, const char *bucket, const char *key, int fd,
              wl_stat_t *st) WL_MUST_CHECK;

/*
 * PUT len bytes of buf. Up to part_size it is one PUT; larger, a multipart
 * upload whose parts go in parallel (aborted on failure, so no parts are
 * left behind). etag (may be NULL, 128 bytes): the ETag returned.
 */
int wl_put(wl_client_t *c, const char *bucket, const char *key, const void *buf, size_t len,
           const char *content_type, char *etag) WL_MUST_CHECK;
/* The same reading size bytes from fd (pread at offsets). */
int wl_put_fd(wl_client_t *c, const char *bucket, const char *key, int fd, uint64_t size,
              const char *content_type, char *etag) WL_MUST_CHECK;

/*
 * Server-side copy of src_bucket/src_key to bucket/key (PUT with
 * x-amz-copy-source: no bytes pass through the client; S3 allows this up
 * to 5 GiB). etag (may be NULL, 128 bytes): the new object's ETag. S3 may
 * answer 200 with an error in the body: that is an error here too.
 */
int wl_copy(wl_client_t *c, const char *src_bucket, const char *src_key, const char *bucket,
            const char *key, char *etag) WL_MUST_CHECK;

/* DELETE an object (S3: no error when it is absent). */
int wl_delete(wl_client_t *c, const char *bucket, const char *key) WL_MUST_CHECK;
/* Create / delete a bucket. */
int wl_bucket_create(wl_client_t *c, const char *bucket) WL_MUST_CHECK;
int wl_bucket_delete(wl_client_t *c, const char *bucket) WL_MUST_CHECK;

typedef struct {
    char *key; /* a bucket's name for wl_list_buckets */
    uint64_t size;
    char etag[128];
    char last_modified[64];
} wl_object_t;

typedef struct {
    wl_object_t *objects;
    size_t n_objects;
    char **prefixes; /* CommonPrefixes (with a delimiter) */
    size_t n_prefixes;
    int truncated;
    char *next_token; /* continuation token of the next page, or NULL */
} wl_list_t;

/*
 * One page of ListObjectsV2: keys under prefix (NULL: all), rolled up at
 * delimiter (NULL: none), after the continuation token (NULL: first page),
 * at most max_keys (0: server default). *out is the caller's: wl_list_free.
 */
int wl_list(wl_client_t *c, const char *bucket, const char *prefix, const char *delimiter,
            const char *token, int max_keys, wl_list_t **out) WL_MUST_CHECK;
/* The buckets (objects[i].key is the name). */
int wl_list_buckets(wl_client_t *c, wl_list_t **out) WL_MUST_CHECK;
void wl_list_free(wl_list_t *l);

/* One entry of a multi-object GET. */
typedef struct {
    const char *key;      /* in */
    uint64_t off;         /* in: range start */
    uint64_t len;         /* in: range length; 0: the whole object (off must be 0) */
    void *buf;            /* in: destination */
    size_t cap;           /* in */
    size_t got;           /* out: bytes received */
    uint64_t object_size; /* out */
    int code;             /* out: WL_OK or the entry's WL_E* */
    int http_status;      /* out */
    char s3_code[64];     /* out */
} wl_item_t;

/*
 * GET every item in parallel (single GETs on the client's threads). Returns
 * the number of items that failed (their code says why), or a negative code
 * when the call could not run at all (WL_ENOMEM).
 */
int wl_get_many(wl_client_t *c, const char *bucket, wl_item_t *items, size_t n) WL_MUST_CHECK;

/*
 * The same through warmlake's batch GET: a few POST ?batch-get requests
 * carry all the items and return them as one framed stream each. A server
 * answering the batch with a 4xx other than 403 (or 501) lacks the extension: the
 * client remembers that and uses wl_get_many (as it does with no_batch).
 * Entries a cut stream did not deliver are fetched singly. A 403 on the
 * batch itself fails the call with WL_EDENIED.
 */
int wl_get_batch(wl_client_t *c, const char *bucket, wl_item_t *items, size_t n) WL_MUST_CHECK;

/*
 * Presigned URL for method ("GET", "PUT" ...) on bucket/key valid for
 * expires seconds, at the first endpoint, into out (cap bytes). WL_EINVAL
 * without credentials or when out is short.
 */
int wl_presign(wl_client_t *c, const char *method, const char *bucket, const char *key,
               long expires, char *out, size_t cap) WL_MUST_CHECK;

/*
 * A prefetch queue: GETs pushed in order run ahead of the consumer, at most
 * depth in flight, and no more than mem_bound bytes held by fetched or
 * running entries (one entry may exceed it alone). The consumer takes them
 * in push order with wl_prefetch_next.
 */
typedef struct wl_prefetch wl_prefetch_t;

int wl_prefetch_new(wl_client_t *c, const char *bucket, int depth, size_t mem_bound,
                    wl_prefetch_t **out) WL_MUST_CHECK;
/* Queue a GET of key (len 0: whole object; its size found by HEAD). tag comes back. */
int wl_prefetch_push(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len,
                     void *tag) WL_MUST_CHECK;
/* The same, sent with If-Match: etag (unquoted; copied): parts of one object read in
   several entries all come from the version that carried etag (WL_EPRECOND otherwise). */
int wl_prefetch_push_if(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len,
                        const char *etag, void *tag) WL_MUST_CHECK;
/* The same into the caller's buffer buf (cap bytes) instead of one malloc'd per entry: a
   consumer that reads a stream of parts can cycle a few buffers (no allocation, no page
   faults per part). len 0 reads the whole object (no HEAD; WL_ETOOLARGE when it is larger
   than cap); etag may be NULL. wl_prefetch_next returns buf itself as *data (not to be
   freed). buf must stay valid, and be neither read nor written, until the entry has come
   out of wl_prefetch_next or the queue is freed. */
int wl_prefetch_push_into(wl_prefetch_t *pf, const char *key, uint64_t off, uint64_t len,
                          const char *etag, void *buf, size_t cap, void *tag) WL_MUST_CHECK;
/*
 * The oldest pushed entry, waiting for it. *data is malloc'd and becomes the
 * caller's (free() it; it no longer counts against mem_bound), or is the buffer
 * given to wl_prefetch_push_into; *len its
 * length; *tag the push's tag. Returns the entry's code (*data NULL on
 * failure), or WL_EINVAL when nothing is queued.
 */
int wl_prefetch_next(wl_prefetch_t *pf, void **data, size_t *len, void **tag) WL_MUST_CHECK;
/* Waits for running entries, drops the rest. NULL is a no-op. */
void wl_prefetch_free(wl_prefetch_t *pf);
/* free() for the data wl_prefetch_next returns, for callers with another allocator (ctypes). */
void wl_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
