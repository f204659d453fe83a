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
#include "server/node_memory.h"
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
    /* The heal scanner, for its progress in /_warmlake/stats (NULL: none). */
    struct s3_scrub *scrub;
    /* The mover of draining pools, for its progress there too (NULL: none). */
    struct s3_drain *drain;
    /* A heal scanner's pass, or the part of a pass that walked the sets of the drives marked
     * refilling (s3_scrub.c, scope_t), ended (not stopped), with `failed` objects it could not
     * make whole or listings it could not go through: when 0, what was waiting for that walk
     * (a replaced drive's mark) may go. Once a pass. NULL: none. */
    void (*scrub_done)(void *arg, unsigned failed);
    void *scrub_done_arg;
    /* Seconds block records no version names stay before the scanner deletes them (the
     * reaper, obj_reap.c); 0: never deleted (--reap-grace). */
    long reap_grace_s;
    /* Signing keys already derived (s3/sigv4.h); NULL: every request derives its own. */
    struct sigv4_key_cache *keys;
    /* Runs batch GET entries' reads ahead of their sending (s3_batch.c); NULL: batch GET is
     * not served (405, as by a server without it). */
    struct pool *batch;
    /* What names this node in every response's x-amz-id-2 and an error's HostId (with the
     * request id: which node answered which request); NULL: "warmlake". */
    const char *host_id;
    /* Fills the drives' share of the node's memory report (index_*, drive_buffers); NULL:
     * the report has the process's and the object layer's figures only. */
    void (*memory)(void *arg, node_memory_t *m);
    void *memory_arg;
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

/*
 * The heal scanner (s3_scrub.c): a thread that heals every bucket's current
 * objects (obj_heal) in a pass every interval_s seconds (the first one
 * interval_s after the start), verifying at most rate object bytes a second
 * (0: 64 MB/s) and waiting while a store is not up. Each pass also runs the
 * reaper over every bucket (obj_reap.c; cfg->reap_grace_s). NULL when interval_s
 * is 0 (no scanner) or the thread cannot start (logged). stop waits for
 * the object under way; NULL-safe.
 */
typedef struct s3_scrub s3_scrub_t;
typedef struct {
    uint64_t passes;         /* passes finished */
    int running, waiting;    /* a pass is under way; it waits for a store to be up */
    uint64_t objects, bytes; /* this pass (or the last) so far */
    uint64_t total_est;      /* object bytes a pass covers, estimated from the drives */
    double mb_s;             /* this pass's rate */
    int64_t eta_s;           /* to the end of this pass at that rate (0: none running) */
    double last_pass_s;      /* how long the last pass took */
    uint64_t heads_fixed, blocks_fixed, failed; /* over every pass */
    /* The reaper, over every pass: groups of blocks (and parts) named by nothing waiting out
     * their grace now, and those deleted (groups, records, payload bytes; parts). */
    uint64_t reap_candidates, reaped_groups, reaped_records, reaped_bytes, reaped_parts,
        settled_uploads;
    /* Deleted buckets purged of what they left (s3_gone.c), and those records and bytes. */
    uint64_t purged_buckets, purged_records, purged_bytes;
} s3_scrub_stats_t;
s3_scrub_t *s3_scrub_start(const s3_cfg_t *cfg, long interval_s, uint64_t rate);
void s3_scrub_stop(s3_scrub_t *sc);
void s3_scrub_stats(s3_scrub_t *sc, s3_scrub_stats_t *st);

/*
 * The mover of draining pools (s3_drain.c): a thread that moves every key
 * of a draining pool's sets this node moves (obj_set_mover_here) to the
 * pools that take new keys (obj_move_key), at most rate object bytes a
 * second (0: 64 MB/s). kick: look now (a pool's state changed). NULL when
 * the thread cannot start (logged); stop waits for the key under way;
 * NULL-safe.
 */
typedef struct s3_drain s3_drain_t;
typedef struct {
    int draining;          /* this node moves sets of a draining pool */
    int running;           /* a pass is under way */
    int waiting;           /* the last pass left keys: a store of their set, or of the set
                              they go to, was not up (nothing is copied then) */
    uint64_t passes;       /* passes finished */
    uint64_t keys;         /* keys moved, over every pass */
    uint64_t versions;     /* versions and delete markers copied */
    uint64_t bytes;        /* object bytes copied */
    uint64_t busy;         /* keys left for a later pass: written meanwhile, or throttled */
    uint64_t failed;       /* keys a move failed for (logged once a pass) */
    uint64_t left;         /* the last pass: keys it could not move */
    uint64_t uploads_left; /* the last pass: uploads in progress in the sets (they stay) */
    int done;              /* the last pass found nothing to move in this node's sets */
    double mb_s;           /* this pass's rate */
    double last_pass_s;
} s3_drain_stats_t;
s3_drain_t *s3_drain_start(const s3_cfg_t *cfg, uint64_t rate);
void s3_drain_kick(s3_drain_t *d);
void s3_drain_stop(s3_drain_t *d);
void s3_drain_stats(s3_drain_t *d, s3_drain_stats_t *st);

/*
 * The node's own state as JSON (malloc'd text: the heal queue and the heal
 * scanner), for wl-admin over the node protocol; cfg is a const s3_cfg_t *.
 */
char *s3_node_state(void *cfg);
/* Start a heal scanner pass now (cfg: the s3_cfg_t): 0, or ERR_NOT_FOUND with the scanner off. */
int s3_heal_now(void *cfg);
/* The same on a scanner: the pass starts now, or right after the one running. */
int s3_scrub_kick(s3_scrub_t *sc);

/* The http handler; arg is a const s3_cfg_t *. */
void s3_handle(void *arg, http_req_t *r, const struct http_req_info *info);

/* Bucket name rules of S3 (3-63 chars, lower case, digits, '.', '-', ...). */
int s3_bucket_name_ok(const char *name);

#endif
