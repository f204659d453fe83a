/*
 * wl_int.h: what the files of libwarmlake share.
 *
 * Map:
 *   wl.c       client object, endpoints and their connection pools, the
 *              thread pool, one request with retries (wl__request), errors
 *   wl_obj.c   single-request operations: stat, get, put, delete, buckets,
 *              list, presign
 *   wl_range.c whole-object GET in parallel ranged parts (memory or file)
 *   wl_mpu.c   PUT: single or multipart with parallel parts
 *   wl_many.c  many objects: parallel single GETs, batch GET with fallback
 *   wl_prefetch.c  the prefetch queue
 *   batch.c    batch GET body and response parser (pure)
 *   s3c.c      one blocking keep-alive connection
 *
 * Parallel operations run as tasks on the client's threads (wl__submit); a
 * task does its requests alone and records its result in its own struct;
 * the caller waits on a group, so no task ever waits for another (the pool
 * cannot deadlock).
 *
 * Locks: each endpoint's pool mutex, the thread pool's queue mutex, a
 * group's mutex, a prefetch queue's mutex. Only the prefetch queue's is held
 * while another is taken (the thread pool's, to submit); none across I/O.
 */
#ifndef WL_WL_INT_H
#define WL_WL_INT_H

#include "client/include/warmlake/wl.h"
#include "client/s3c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define WL_PATH_MAX 4096 /* "/bucket/key" URI-encoded */

typedef struct {
    char url[256];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    s3c_t **idle; /* conns_per_endpoint slots */
    int n_idle;
    int n_open; /* idle plus checked out */
} wl_endpoint_t;

/* A unit of work for the thread pool, embedded in its caller's struct. */
typedef struct wl_task {
    void (*fn)(struct wl_task *t);
    struct wl_task *next;
} wl_task_t;

/* Tasks a caller waits for. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
} wl_group_t;

struct wl_client {
    wl_config_t cfg;
    char *endpoints_s, *access_key, *secret_key, *region; /* owned copies */
    wl_endpoint_t *ep;
    int n_ep;
    atomic_uint rr; /* round robin */
    atomic_int batch_unsupported;
    atomic_uint_fast64_t n_requests, n_retries, n_in, n_out, n_batch, n_batch_entries, n_single;

    pthread_mutex_t tmu;
    pthread_cond_t tcv;
    wl_task_t *head, *tail;
    int stopping;
    pthread_t *threads;
    int n_threads;
};

/* One request: what to send, where the body goes, what came back. */
typedef struct {
    s3c_req_t req;
    s3c_resp_t resp;
    int expect_range; /* a ranged GET (range_len 0: to the end): the body must be that range */
    uint64_t range_off, range_len;
    int whole_ok;    /* a 200 with the whole object answers the range well too */
    char *body_copy; /* the kept response body copied out (want_body), malloc'd */
    size_t body_copy_len;
    int want_body;
    int no_retry;   /* one attempt only (a streamed body cannot be fed twice) */
    int verify_md5; /* a 200 into dst: its bytes must hash to an MD5 ETag (when it is one) */
} wl_call_t;

/*
 * Send call on some endpoint, retrying per the config. WL_OK when a 2xx
 * came (and the body checks held); else the code, with err filled. Any
 * thread.
 */
int wl__request(wl_client_t *c, wl_call_t *call, wl_error_t *err) WL_MUST_CHECK;

/* Code for an error status. */
int wl__status_code(int status);
/* Fill err (code, message) and return code. */
int wl__fail(wl_error_t *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Copy err into the calling thread's last error; returns err->code. */
int wl__set_last(const wl_error_t *err);
/* End of a public call: rc into err (a message from the code when none) and the thread's last
   error (cleared on success); returns rc. */
int wl__ret(wl_error_t *err, int rc);

/* "/bucket" or "/bucket/key" URI-encoded into out (WL_PATH_MAX). 0 or WL_EINVAL. */
int wl__path(const char *bucket, const char *key, char *out);

void wl__group_init(wl_group_t *g);
void wl__group_destroy(wl_group_t *g);
/* Run t on the client's threads, counted in g. */
void wl__submit(wl_client_t *c, wl_group_t *g, wl_task_t *t);
/* A task of g finished (call last thing in the task). */
void wl__group_done(wl_group_t *g);
/* Wait until g's tasks are all done. */
void wl__group_wait(wl_group_t *g);
/* Run t on the client's threads without a group. */
void wl__submit_task(wl_client_t *c, wl_task_t *t);

/* Single GET into a buffer (wl_obj.c), error into err. */
int wl__get(wl_client_t *c, const char *bucket, const char *key, uint64_t off, uint64_t len,
            void *buf, size_t cap, size_t *got, wl_stat_t *st, wl_error_t *err) WL_MUST_CHECK;
/* The same; whole_ok: a 200 with the whole object is a good answer to the range (the first
   part of a whole-object read); if_match (NULL: none): the object must still carry this ETag
   (WL_EPRECOND otherwise). */
int wl__get_ex(wl_client_t *c, const char *bucket, const char *key, uint64_t off, uint64_t len,
               int whole_ok, const char *if_match, void *buf, size_t cap, size_t *got,
               wl_stat_t *st, wl_error_t *err) WL_MUST_CHECK;
int wl__stat(wl_client_t *c, const char *bucket, const char *key, wl_stat_t *st,
             wl_error_t *err) WL_MUST_CHECK;
/* Single PUT from a buffer or a fill callback. */
int wl__put_one(wl_client_t *c, const char *path, const char *query, const void *buf,
                s3c_fill_fn fill, void *fill_arg, uint64_t len, const char *content_type,
                char *etag, wl_error_t *err) WL_MUST_CHECK;
/*
 * A 2xx reply's body (len bytes; NULL: none), which S3 may still fill with an error
 * (CompleteMultipartUpload, CopyObject): WL_ESERVER with its Code in err, the message
 * "<what> <path>: <Code>"; else 0, and the body's ETag, quotes stripped, into etag (128
 * bytes; NULL: not wanted).
 */
int wl__body_result(const char *body, size_t len, const char *what, const char *path, char *etag,
                    wl_error_t *err) WL_MUST_CHECK;
/* Whether an ETag looks like an MD5 (32 hex digits): multipart and SSE ones do not. */
int wl__md5_like(const char *etag);
/* MD5 of the bytes given by fill (or buf) as hex into hex[33]; 0 or WL_ENOMEM. */
int wl__md5(const void *buf, s3c_fill_fn fill, void *fill_arg, uint64_t len,
            char hex[33]) WL_MUST_CHECK;

#endif
