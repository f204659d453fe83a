/*
 * wlb.h: what wl-bench's files share (bench/wlbench): the run's settings,
 * the clients and their counters, and the three rooms:
 *
 *   wl_bench.c  the command line, setup (bucket, gen files), cleanup, main
 *   load.c      the client threads: one operation of each kind, the client
 *               loop, the run against the clock, merging the counters
 *   report.c    the table, the JSON report, comparing two reports
 */
#ifndef WL_WLB_H
#define WL_WLB_H

#include "bench/wlbench/hist.h"
#include "bench/wlbench/sizes.h"
#include "client/s3c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum { OP_PUT, OP_GET, OP_DELETE, OP_STAT, OP_LIST, OP_MPU, OP_N };
extern const char *const op_name[OP_N];

#define MAX_CLIENTS  1024
#define MAX_ERRKINDS 32
#define MAX_PARTS    10000

typedef struct {
    const char *workload;
    const char *endpoint, *access_key, *secret, *region, *bucket, *prefix;
    const char *json_path, *size_spec;
    size_dist_t sizes;
    int clients;
    double duration; /* seconds; always set: every run is bounded in time */
    uint64_t ops;    /* 0: no op limit */
    uint64_t objects;
    int random_order;
    uint64_t mix[OP_N]; /* weights for mixed */
    uint64_t mix_total;
    uint64_t range_size, range_align;
    uint64_t part_size;
    int plain, prepare, verify, quiet, cleanup, quick;
    uint64_t seed;
    const char *dir; /* gen */
} cfg_t;

typedef struct {
    char name[96];
    uint64_t n;
} errkind_t;

typedef struct {
    pthread_t th;
    s3c_t *c;
    uint64_t rng;
    hist_t lat[OP_N], ttfb;
    uint64_t ops[OP_N], bytes[OP_N], errors[OP_N];
    uint64_t mismatches, slowdown, absent, list_keys, list_passes, list_pages;
    errkind_t err[MAX_ERRKINDS];
    int nerr;
    char *scratch; /* multipart ETags, XML */
} client_t;

/*
 * Mixed runs with deletes: which keys this run deleted, so a 404 can be told
 * from a lost object. A 404 is expected only when the key was deleted, or a
 * PUT/DELETE of it was in flight or finished while the GET ran; a key that
 * stayed present and untouched must read back.
 */
typedef struct {
    atomic_uchar absent;
    atomic_uint inflight, changes;
} keystate_t;

typedef struct {
    hist_t lat[OP_N], ttfb;
    uint64_t ops[OP_N], bytes[OP_N], errors[OP_N];
    uint64_t mismatches, slowdown, absent, list_keys, list_passes;
    errkind_t err[MAX_ERRKINDS];
    int nerr;
    double secs;
} total_t;

extern cfg_t cfg;
extern client_t *clients;
extern keystate_t *kstate;            /* mixed runs with deletes: one per key (NULL otherwise) */
extern atomic_uint_fast64_t next_key; /* sequential key order, unique puts, deletes */
extern int phase_prepare;             /* the prepare phase runs the same loop, put only */
extern uint64_t max_key_used;

/* ---- load.c ---- */

/* The size of object n (fixed for the run, so GETs know what to expect). */
uint64_t key_size(uint64_t n);
/* Object n's key (prefix and number) and its request path (/bucket/key). */
void object_path(uint64_t n, char *key, size_t kcap, char *path, size_t pcap);

/* Run all clients until the time or op budget is spent; returns the measured seconds. */
double run_clients(void);
/* The clients' counters summed into t. */
void totals_merge(total_t *t);
/* The clients' counters zeroed (connections and random state kept). */
void clients_reset(void);

/* ---- report.c ---- */

void report_table(const total_t *t);
/* The JSON report at cfg.json_path: 0, or non-zero on failure. */
int report_json(const total_t *t);
/* wl-bench compare: the change per figure from report a to report b. */
int report_compare(const char *a_path, const char *b_path);

#endif
