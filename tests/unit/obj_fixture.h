/*
 * The object layer's test fixture, shared by the test_obj*.c suites: a set
 * over six real drives (4+2), each behind a faulty store that can fail, rot,
 * hold or cut its writes on demand. Odd stores take asynchronous puts
 * (put_async), even ones synchronous puts on the pool.
 *
 * "test_obj_SUITE remote" runs a suite with the drives behind proto/: a
 * protocol server in this process serves them, and the set's stores are
 * remote stores (server/peer.h) talking to it over loopback TCP, as a
 * gateway reaches the drives of other nodes. A further argument runs only
 * the tests whose names match it (a glob).
 */
#ifndef WARMLAKE_TESTS_OBJ_FIXTURE_H
#define WARMLAKE_TESTS_OBJ_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster/features.h"
#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "server/obj_int.h"
#include "server/peer.h"
#include "testlib.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 6
#define K 4
#define M 2
#define B (64u * 1024)

/* A shard store in front of a real drive that can fail or rot on demand. */
typedef struct {
    drive_t *d;       /* the drive itself (the tests look at it directly) */
    shard_store_t in; /* how the set reaches it: a local store, or a remote one */
    int fail_read, fail_write, corrupt_read;
    int scan_left; /* > 0: listings fail (ERR_IO) once this many more entries went by */
    long scanned;  /* entries its listings went by */
    long n_scan;   /* listing calls (fetches of a chunk) */
    long n_stat, n_get, n_read; /* calls (test_inline_one_lookup) */
    int sick;        /* health says suspect (the store itself still answers); 2: down; 3: failed */
    long n_split;    /* read_split calls */
    long n_put;      /* writes of any kind (put, put_async, put_head) */
    long n_del;      /* deletes */
    int hold_blocks; /* put_async of a block (no metadata): held until release */
    struct held_put *held; /* ... those held, newest first */
    int n_held;
    int fail_head;   /* conditional head puts fail (blocks still land) */
    int old_node;    /* conditional deletes answered as a node of an older build does */
    int no_if_kept;  /* SHARD_IF_KEPT refused as corrupt, as a build without it does */
    int refilling;   /* a replaced drive, not refilled yet (shard_ops_t.refilling) */
    int begin_again; /* read_begin answers ERR_AGAIN (a block not in place: read it whole) */
    /* With cut_heads: this many more heads at a current position land, then every write
     * fails (the node is killed in the middle of a commit: not even its undo lands). */
    int cut_heads, heads_left;
    int fail_tomb; /* tombstones (a retired version's heads) fail */
    int fail_sync; /* sync (of unsynced block writes) fails */
    long n_sync;   /* sync calls */
} faulty_t;

/* A block write held by its store (hold_blocks): not written, not answered, until released. */
typedef struct held_put {
    char bucket[SHARD_MAX_BUCKET + 2], key[64], version[40];
    uint32_t shard;
    const void *data;
    size_t len;
    drive_done_fn done;
    void *arg;
    struct held_put *next;
} held_put_t;
/* A scan that can die mid-walk: after scan_left entries (counted over every scan). */
typedef struct {
    faulty_t *f;
    drive_scan_fn fn;
    void *arg;
    int died;
} fscan_t;

/* The block writes f held: written now (rc 0), or answered rc without being written. */
void release_blocks(faulty_t *f, int rc);

/* Called before a conditional head put at a current position (tests set it: a racing write). */
extern void (*rf_put_head_hook)(const drive_id_t *id, const void *meta, size_t ml);
/* Called by each store's plain delete (a block's) before it runs (NULL: none). */
extern void (*rf_del_hook)(const drive_id_t *id);
/* Called by an odd store's delete without waiting (the even ones have none): 1 when the
 * hook took it (it then runs it later through rf_del_async_inner), 0 to let it run now. */
extern int (*rf_del_async_hook)(faulty_t *f, const drive_id_t *id, drive_done_fn done, void *arg);
int rf_del_async_inner(faulty_t *f, const drive_id_t *id, drive_done_fn done, void *arg);

typedef struct {
    char *dir;
    faulty_t f[N];
    obj_set_t *set;
    drive_t *drives[N];
    proto_net_t *server, *client; /* remote mode */
    peer_serve_t *serve;
} env_t;

extern int remote; /* "test_obj remote": the stores are behind proto/ */
/* The remote stores' call deadline (0: proto's default); setup_long sets ten minutes. */
extern uint32_t client_timeout_ms;

/*
 * A node that does not answer block reads of one drive (hold_drive): the
 * server holds those requests (test_hedged_block_reads) until released.
 */
extern pthread_mutex_t hold_mu;
extern int hold_drive;
extern proto_inbound_t *held;
extern int nheld;

/*
 * Writes held too (test_hedged_writes): what hold_what names of drive hold_put_drive.
 * HOLD_ALL is a frozen node's drive: nothing it is asked is answered.
 */
enum { HOLD_BLOCKS = 1, HOLD_HEADS = 2, HOLD_ALL = 7 };
extern int hold_put_drive, hold_what;

/* Stop holding; the held requests are served now (their answers come late). */
void release_held(peer_serve_t *sv);

/* cmocka's setup and teardown: a fresh set over six fresh drives in a temp dir, and gone. */
int setup(void **state);
/* Drive i of e opened (again, after a drive_close in a test), its local store behind f[i]. */
void open_drive(env_t *e, int i);
int teardown(void **state);

/* n pseudo-random bytes from seed. */
void fill(uint8_t *p, size_t n, uint32_t seed);
/* PUT bkt/key of data (in uneven pieces), acknowledged. */
void put(env_t *e, const char *key, const uint8_t *data, size_t n, obj_info_t *info);
/* bkt/key reads back as data, whole and in a range. */
void expect(env_t *e, const char *key, const uint8_t *data, size_t n);
void md5hex(const uint8_t *p, size_t n, char out[33]);
/* drive_list_fn: counts the records (arg: an int). */
int count_cb(void *arg, const drive_id_t *id, const drive_stat_t *st);

/* A second set over e's stores, as another node's gateway would have (freed by the caller). */
obj_set_t *other_gateway(env_t *e);
/* Another gateway over the same stores whose new objects have blocks of `block` bytes. */
obj_set_t *gateway_with_blocks(env_t *e, uint32_t block);

/* Whether store i holds a live head of key at the current position (not a tombstone). */
int live_head(env_t *e, int i, const char *key);
/* What store i holds at key's position pos ("": the current one): 0 (nothing), 'L' (a live
 * head), 'T' (a tombstone), 'M' (a delete marker), '?' (a head that does not decode). */
int head_kind_at(env_t *e, int i, const char *key, const char *pos);

/* ---- versioning (server/obj_version.c) ---- */

void vput(env_t *e, const char *key, const char *body, obj_versioning_t v, obj_info_t *out);

/* The version's bytes, or "" when it cannot be opened. */
void vread(env_t *e, const char *key, const char *vid, char *out, size_t cap);

int vlist_cb(void *arg, const char *key, const obj_info_t *info, int latest);

/* The stores whose head at the position of version v is v itself, live. */
int live_heads_of(env_t *e, const char *key, const obj_info_t *v);

/*
 * A write in a Suspended bucket replaces the noncurrent null version: its heads retired, its
 * blocks dropped. The retire fell short (three stores refused tombstones) and the blocks went
 * all the same: the null version's heads stayed on those stores, naming blocks that were
 * gone. Now its blocks stay while its heads do.
 */
/* obj_umeta_fn: the metadata becomes tag=yes. */
int umeta_tagged(void *arg, const obj_info_t *cur, char *out, size_t *out_len);

/* The stores that hold a head of bkt/key at pos (any: a tombstone too), as a mask. */
uint32_t heads_at(env_t *e, const char *key, const char *pos);

/* Whether store i holds the block of upload's stripe. */
int has_block(env_t *e, const char *key, const char *upload, uint32_t stripe, int i);

int part_keys(env_t *e, const char *upload);

obj_reap_report_t reap_internal_pass(env_t *e, obj_reaper_t *r, uint64_t now);

typedef struct {
    int n, part[8];
    char etag[8][80];
} listed_parts_t;

int list_parts_cb(void *arg, int part, const obj_info_t *info);

/* ---- A Complete cut short by a kill (obj_mpu.c, closing records) ---- */

extern int cut_stage, stall_stage;
extern obj_versioning_t cut_versioning;
#define CUT_STALE (46 * 1000000000ll) /* past OBJ__CLOSE_STALE_NS: a closer is surely gone */

extern int rewrite_before_close; /* stage 0: the record rewritten, still open (a heal) */
extern const char *rewrite_key;
extern env_t *rewrite_env;

int cut_at(const char *upload, int stage);

typedef struct {
    char upload[33];
    obj_mpu_part_t parts[2];
    uint8_t *data; /* the object's bytes: the two parts */
    size_t psz;    /* each part's */
} cut_upload_t;

void cut_upload_new(env_t *e, const char *key, uint32_t seed, cut_upload_t *u);

extern obj_info_t cut_done; /* what the last cut_complete answered */

int cut_complete(env_t *e, const char *key, cut_upload_t *u, int n, int stage, int *why);

/* The object bkt/key reads as u's two parts. */
void assert_cut_object(env_t *e, const char *key, const cut_upload_t *u);

int uploads_listed(env_t *e, cut_upload_t *u);

/* Stage 2 (its manifest written): the heads that follow land on store cut_lone alone, and then
 * nothing lands anywhere (a kill in the middle of the heads: no undo either). */
extern env_t *cut_env;
extern int cut_lone;

int cut_in_heads(const char *upload, int stage);

/* The stores whose head of bkt/key (its current position) names upload. */
int heads_naming(env_t *e, const char *key, const char *upload);

int count_versions_of(void *arg, const char *key, const obj_info_t *info, int latest);

/* A Complete of u cut in its heads: its head lands on store `lone` alone, then a kill. */
void cut_lone_head(env_t *e, const char *key, int lone, cut_upload_t *u);

/* The next heads at a current position land on the stores of `on` only, then a kill. */
void cut_heads_on(env_t *e, uint32_t on);

void cut_heads_clear(env_t *e);

/* A key whose copies (a small version's stores) are 0, 1, 2. */
void key_on_012(env_t *e, const char *prefix, char *key, size_t cap);

/* A create-only PUT (If-None-Match: *) of a small body through set: its commit's answer. */
int put_create_only(obj_set_t *set, const char *key);

/* A hook's bounded wait (5 s at most) for another thread's flag. */
void wait_flag(int *flag);

/* A PUT of 100 KB (erasure-coded: a head on every store) whose heads are cut as above. */
int put_cut(env_t *e, const char *key, uint32_t on);

/* The versions of bkt/key (ListObjectVersions), delete markers included. */
int versions_of(env_t *e, const char *key);

/* The versions of bkt/key (ListObjectVersions) made of upload. */
int versions_naming(env_t *e, const char *key, const char *upload);

/* ---- A second review of the cut-short mends ---- */

/* A 100 KB PUT (erasure-coded: a head on every store), acknowledged. */
void put_big(env_t *e, const char *key, obj_versioning_t v, obj_info_t *out);

void cut_complete_on(env_t *e, const char *key, uint32_t mask, cut_upload_t *u);

/* ---- A plain PUT cut after half its heads ---- */

/* The head store `store` holds at bkt/key's current position. */
int head_on(env_t *e, const char *key, int store, obj_info_t *out);

#define PAST_COMMIT_STALE (11 * 1000000000ll) /* a head older than any commit takes */

/* A 100 KB PUT over `w` killed after its heads on stores 0-2 (of six): *x, its cut head. */
void put_cut_in_half(env_t *e, const char *key, const obj_info_t *w, obj_info_t *x);

/* rf_put_head_hook: the first of stores 3-5 to take a head of the PUT stalls until stores 0-2
 * hold theirs, then a heal runs past COMMIT_STALE_NS; the others wait for it. */
extern env_t *stall_env;
extern const char *stall_key, *stall_before;

/* Entries e's stores' listings went by, all together. */
long scanned(env_t *e);

/* A suite's arguments: "remote" and a test-name glob (see above); the log level. */
void obj_fixture_args(int argc, char **argv);

#endif
