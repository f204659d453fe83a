/*
 * s3: the S3 API on top of the object layer; the http handler of warmlaked.
 *
 * Every request is authenticated (SigV4 header or presigned query; requests
 * without credentials reach public-read data only), routed path-style
 * (/bucket/key) or virtual-host style (BUCKET.domain), and answered with
 * S3's XML and error codes and an x-amz-request-id. Bodies stream:
 * PutObject reads the socket in 1 MiB pieces straight into the erasure
 * encoder, GetObject sends stripes as the drives read them. The rooms
 * behind this door are listed in s3_int.h.
 */
#ifndef WL_S3_H
#define WL_S3_H

#include "server/http.h"
#include "server/obj.h"

#include <stdatomic.h>

typedef struct {
    const char *access_key, *secret;
} s3_user_t;

typedef struct {
    obj_set_t *set;
    const s3_user_t *users;
    int nusers;
    const char *region; /* default "us-east-1" */
    long max_skew_s;    /* default 900 */
    const char *domain; /* virtual-host style for BUCKET.domain; NULL: path style only */
    /* Seconds a lifecycle day lasts; 0: 86400 (--lifecycle-day-seconds, shorter only for tests). */
    long lifecycle_day_s;
    /* A cluster member's fence (server/member.h): while 1, every request answers 503. */
    const _Atomic int *fenced;
    /* A cluster member's protocol endpoint (its counters in /_warmlake/stats); NULL alone. */
    struct proto_net *net;
    /* Signing keys already derived (s3/sigv4.h); NULL: every request derives its own. */
    struct sigv4_key_cache *keys;
} s3_cfg_t;

/*
 * The lifecycle worker (s3_lc_worker.c): a thread that carries out the
 * buckets' lifecycle rules, a pass every quarter day (of lifecycle_day_s
 * when set, else an hour). start: NULL when the thread cannot start (logged).
 */
typedef struct s3_lc_worker s3_lc_worker_t;
s3_lc_worker_t *s3_lifecycle_start(const s3_cfg_t *cfg);
void s3_lifecycle_stop(s3_lc_worker_t *w); /* waits for a pass under way; NULL-safe */
/* One pass now, as at time `now` (seconds since the epoch): for tests and tools. */
void s3_lifecycle_pass(const s3_cfg_t *cfg, int64_t now);

/* The http handler; arg is a const s3_cfg_t *. */
void s3_handle(void *arg, http_req_t *r, const struct http_req_info *info);

/* Bucket name rules of S3 (3-63 chars, lower case, digits, '.', '-', ...). */
int s3_bucket_name_ok(const char *name);

#endif
