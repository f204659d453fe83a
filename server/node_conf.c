/*
 * node_conf: warmlaked's option table, its --help text, the repeating
 * [drive.N] and [user.NAME] sections, and the S3 users (contracts in
 * node_conf.h).
 *
 * Each setting is one row of options[] (server/options.h): flag, INI key,
 * type, range, default and help, so that --help, the flags and the config
 * file cannot disagree. A bad value, flag or setting exits with status 2
 * and a message naming it.
 */
#include "server/node_conf.h"

#include "cluster/map.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* Offsets that fail to compile when the field is not of the row's type. */
#define C(field, type) _Generic(((node_conf_t *)0)->field, type : offsetof(node_conf_t, field))
#define D(field, type)                                                                             \
    _Generic(((node_drive_conf_t *)0)->field, type : offsetof(node_drive_conf_t, field))
#define U(field, type)                                                                             \
    _Generic(((node_user_conf_t *)0)->field, type : offsetof(node_user_conf_t, field))
#define STR      const char *
#define CAP_MIN  (1ll << 20)
#define CAP_MAX  (1ll << 50)
#define IU_MIN   4096
#define IU_MAX   (1 << 20)
#define DWPD_MAX 1000
#define DAY_S    86400

/* flag, ARG, [section] key, type, flags, min, max, default, where, help */
static const opt_def_t options[] = {
    {"listen", "ADDR:PORT", "server", "listen", OPT_ADDR, 0, 0, 65535, "127.0.0.1:9000",
     C(listen, STR), "address to serve S3 on; port 0 picks a free one, printed at start"},
    {"data", "DIR", "server", "data", OPT_STR, 0, 1, 0, "./data", C(data, STR),
     "data directory; drives are DIR/drive0, DIR/drive1, ..."},
    {"drives", "N", "drives", "count", OPT_INT, 0, 1, OBJ_MAX_SHARDS, "6", C(drives, int64_t),
     "number of file-backed drives"},
    {"ec", "K+M", "erasure", "k+m", OPT_PAIR, 0, 0, 0, NULL, 0,
     "erasure coding: K data + M parity shards; the drives form sets of K+M\n"
     "(a multiple of it; each object lives on one set)"},
    {"drive-capacity", "SIZE", "drives", "capacity", OPT_SIZE, 0, CAP_MIN, CAP_MAX, "16G",
     C(capacity, uint64_t), "bytes each drive may use"},
    {"segment-size", "SIZE", "drives", "segment_size", OPT_SIZE, OPT_ZERO_OK, 1 << 20, 4ll << 30,
     "0", C(segment, uint64_t), "segment size; 0: 256M for drives of 64G or more, else 64M"},
    {"iu", "BYTES", "drives", "iu", OPT_SIZE, OPT_ZERO_OK, IU_MIN, IU_MAX, "0", C(iu, uint64_t),
     "indirection unit, a power of two; 0: detected, else 4096"},
    {"dwpd", "X", "drives", "dwpd", OPT_REAL, 0, 0, DWPD_MAX, "0", C(dwpd, double),
     "rated sequential drive writes per day; 0: no write budget"},
    {"commit-gather", "US", "drives", "commit_gather_us", OPT_INT, 0, 0, 100000, "1000",
     C(commit_gather_us, int64_t),
     "a drive's group commit of less than an IU waits up to this many microseconds\n"
     "(at most a flush's time) for more records while writers keep several in\n"
     "flight: less IU padding for small objects; 0: never wait"},
    {"segment-pool", "N", "drives", "segment_pool", OPT_INT, OPT_ZERO_OK, 0, 1024, "4",
     C(segment_pool, int64_t),
     "files of segments that compaction released, kept per drive to be written again\n"
     "(an extent written before needs no journal commit at its next fdatasync; the\n"
     "space of a kept file is not discarded meanwhile); 0: none"},
    {"index-cache", "SIZE", "drives", "index_cache", OPT_SIZE, OPT_ZERO_OK, 1 << 20, 1ll << 40, "0",
     C(index_cache, uint64_t),
     "block cache of the drives' indexes, shared by all of the node's drives (a busy\n"
     "drive may use what an idle one does not); 0: 32M for each drive"},
    {"block", "SIZE", "erasure", "block", OPT_SIZE, 0, 64, ERS_MAX_BLOCK, "1M", C(block, uint64_t),
     "erasure block size, a multiple of 64"},
    {"inline-max", "SIZE", "erasure", "inline_max", OPT_SIZE, OPT_ZERO_OK, 1, OBJ_INLINE_LIMIT,
     "64K", C(inline_max, uint64_t),
     "objects up to this size are stored whole in their heads on m+1 drives\n"
     "(one durable round, one read); 0: every object erasure-coded"},
    {"workers", "N", "server", "workers", OPT_INT, 0, 1, 4096, "32", C(workers, int64_t),
     "request worker threads"},
    {"http-loops", "N", "server", "http_loops", OPT_INT, OPT_ZERO_OK, 1, 64, "0",
     C(http_loops, int64_t),
     "event loop threads serving connections; 0: one per CPU core, at most 4"},
    {"max-conns", "N", "server", "max_conns", OPT_INT, 0, 1, 1 << 20, "1024", C(max_conns, int64_t),
     "connections before 503"},
    {"max-stalled", "N", "server", "max_stalled", OPT_INT, 0, 1, 65536, "256",
     C(max_stalled, int64_t),
     "threads added beyond --workers while clients stall their requests\n"
     "(stalled clients hold at most --workers + N); at that bound, with work\n"
     "waiting, the slowest stalled request (fewest bytes moved lately) of the\n"
     "client (access key, else address) that holds the most workers is closed"},
    {"log-level", "LEVEL", "server", "log_level", OPT_LEVEL, 0, 0, 0, "info", C(log_level, int64_t),
     "log events of this level and above"},
    {"domain", "NAME", "server", "domain", OPT_NAME, 0, 0, 253, NULL, C(domain, STR),
     "also serve virtual-host style: BUCKET.NAME[:port]"},
    {"region", "NAME", "server", "region", OPT_NAME, 0, 1, 63, "us-east-1", C(region, STR),
     "the region buckets report (GetBucketLocation)"},
    {"max-header", "SIZE", "server", "max_header", OPT_SIZE, 0, 1024, 1 << 20, "16K",
     C(max_header, uint64_t), "request line + headers limit (over: 400)"},
    {"header-timeout", "SEC", "server", "header_timeout", OPT_INT, 0, 1, DAY_S, "30",
     C(header_timeout_s, int64_t), "a request's headers must arrive within"},
    {"idle-timeout", "SEC", "server", "idle_timeout", OPT_INT, 0, 1, DAY_S, "60",
     C(idle_timeout_s, int64_t), "close idle keep-alive connections after"},
    {"io-timeout", "SEC", "server", "io_timeout", OPT_INT, 0, 1, DAY_S, "30",
     C(io_timeout_s, int64_t),
     "close a request stalled on its client this long\n"
     "(no body byte in, no response byte taken)"},
    {"lifecycle-day-seconds", "SEC", "server", "lifecycle_day_seconds", OPT_INT, OPT_ZERO_OK, 1,
     DAY_S, "0", C(lifecycle_day_s, int64_t),
     "length of a lifecycle day, for tests (as Ceph's rgw_lc_debug_interval);\n"
     "0: a real day (86400)"},
    {"cluster", "FILE", "cluster", "map", OPT_STR, 0, 1, 0, NULL, C(cluster_map, STR),
     "join a cluster: its map (JSON, see cluster/map.h); this node serves S3 and\n"
     "the node protocol on the map's addresses, with the map's drive count and sets"},
    {"etcd", "URLS", "cluster", "etcd", OPT_STR, 0, 1, 0, NULL, C(etcd, STR),
     "join a cluster whose map lives in etcd (http://HOST:PORT[,...]): wait until\n"
     "the map lists this node, hold a lease on its registration, apply new epochs"},
    {"etcd-prefix", "KEY", "cluster", "etcd_prefix", OPT_STR, 0, 1, 200, "/warmlake",
     C(etcd_prefix, STR), "where the cluster's keys live in etcd"},
    {"node", "ID", "cluster", "node", OPT_NAME, 0, 1, CMAP_MAX_ID, NULL, C(node, STR),
     "this node's id in the cluster map"},
    {"write-quorum", "N", "erasure", "write_quorum", OPT_INT, OPT_ZERO_OK, 1, OBJ_MAX_SHARDS, "0",
     C(write_quorum, int64_t),
     "drives (shards) a write needs durable before it is acknowledged, k..k+m;\n"
     "0: k+1 when m > 0 (an acknowledged object survives one more loss before\n"
     "healing), else k. k keeps writes going with m drives (or their nodes) away"},
    {"scrub-interval", "SEC", "erasure", "scrub_interval", OPT_INT, OPT_ZERO_OK, 1, 366 * DAY_S,
     "604800", C(scrub_interval_s, int64_t),
     "the heal scanner verifies every bucket's objects (rebuilding missing and\n"
     "rotten blocks) once this often; 0: never (the heal call and queue remain)"},
    {"scrub-rate", "BYTES", "erasure", "scrub_rate", OPT_SIZE, 0, 1 << 20, 1ll << 40, "64M",
     C(scrub_rate, uint64_t), "object bytes the heal scanner verifies per second, at most"},
    {"reap-grace", "SEC", "erasure", "reap_grace", OPT_INT, OPT_ZERO_OK, 1, 366 * DAY_S, "86400",
     C(reap_grace_s, int64_t),
     "block records no version names (a write cut short by a crash, a drop a\n"
     "drive missed) are deleted by the heal scanner's passes once seen so,\n"
     "unchanged, for this long (shorter than the slowest upload is unsafe); 0: never"},
    {"peer-timeout-ms", "MS", "cluster", "peer_timeout_ms", OPT_INT, 0, 100, 600000, "10000",
     C(peer_timeout_ms, int64_t),
     "deadline of a call to another node; a node past it is suspect: reads go\n"
     "around its drives, and it is pinged until it answers again"},
    {"drain-rate", "BYTES", "cluster", "drain_rate", OPT_SIZE, 0, 1 << 20, 1ll << 40, "64M",
     C(drain_rate, uint64_t),
     "object bytes a second this node moves off a draining pool, at most (the drives'\n"
     "endurance budgets meter the writes too)"},
    {"lease-ttl", "SEC", "cluster", "lease_ttl", OPT_INT, 0, 3, 300, "10", C(lease_ttl_s, int64_t),
     "this node's etcd lease, renewed every third of it: a node frozen or cut off\n"
     "this long is taken as down by the others (read and written around)"},
    {"hedge-ms", "MS", "cluster", "hedge_ms", OPT_INT, OPT_ZERO_OK, 1, 600000, "50",
     C(hedge_ms, int64_t),
     "a block read from another node still out after this long gets a parity read\n"
     "beside it, and is given up on once the parity is in (that node is then read\n"
     "around for 2 s): one slow node costs a GET this, not its latency; 0: off"},
    {"cluster-secret-file", "FILE", "cluster", "secret_file", OPT_STR, 0, 1, 0, NULL,
     C(cluster_secret_file, STR),
     "file holding the cluster secret peers authenticate with (at least 16 bytes;\n"
     "or WARMLAKE_CLUSTER_SECRET)"},
    {"config", "FILE", NULL, NULL, OPT_CONFIG, 0, 0, 0, NULL, 0,
     "INI file: [section] key = value, as listed here; flags override it"},
    {"help", NULL, NULL, NULL, OPT_HELP, 0, 0, 0, NULL, 0, "this text"},
    /* config file only */
    {NULL, "N", "erasure", "k", OPT_INT, 0, 1, ERS_MAX_K, "4", C(k, int64_t),
     "data shards (K of --ec)"},
    {NULL, "N", "erasure", "m", OPT_INT, 0, 0, ERS_MAX_M, "2", C(m, int64_t),
     "parity shards (M of --ec)"},
    {NULL, "DIR", "drive.N", "path", OPT_STR, OPT_EACH, 1, 0, NULL, D(path, STR),
     "drive N's directory (N from 0; default DATA/driveN)"},
    {NULL, "SIZE", "drive.N", "capacity", OPT_SIZE, OPT_EACH, CAP_MIN, CAP_MAX, NULL,
     D(capacity, uint64_t), "drive N's capacity (default: [drives] capacity)"},
    {NULL, "BYTES", "drive.N", "iu", OPT_SIZE, OPT_EACH | OPT_ZERO_OK, IU_MIN, IU_MAX, NULL,
     D(iu, uint64_t), "drive N's indirection unit (default: [drives] iu)"},
    {NULL, "X", "drive.N", "dwpd", OPT_REAL, OPT_EACH, 0, DWPD_MAX, NULL, D(dwpd, double),
     "drive N's rated DWPD (default: [drives] dwpd)"},
    {NULL, "KEY", "user.NAME", "access_key", OPT_STR, OPT_EACH, 1, 128, NULL, U(access_key, STR),
     "a user's access key (any number of [user.NAME] sections)"},
    {NULL, "SECRET", "user.NAME", "secret_key", OPT_STR, OPT_EACH, 1, 128, NULL, U(secret_key, STR),
     "that user's secret key"},
};

static const char usage_head[] =
    "usage: warmlaked [options]\n"
    "Each setting: its flag, then its default, its range and its config file key.\n";
static const char usage_tail[] =
    "Credentials: WARMLAKE_ACCESS_KEY and WARMLAKE_SECRET_KEY; extra users as\n"
    "WARMLAKE_USERS=\"AK1:SECRET1,AK2:SECRET2\". Without them (and without [user.NAME])\n"
    "a key pair is generated and printed.\n";

/* [drive.N] and [user.NAME]: the record their keys go into. */
static void *conf_section(void *arg, const char *sec, const char **pattern, char *err, size_t cap)
{
    node_conf_t *c = arg;
    int64_t n;
    if (strncmp(sec, "drive.", 6) == 0) {
        if (opt_parse_int(sec + 6, &n) != 0 || n < 0 || n >= OBJ_MAX_SHARDS) {
            snprintf(err, cap, "[%s]: want [drive.N], N a whole number in 0..%d", sec,
                     OBJ_MAX_SHARDS - 1);
            return NULL;
        }
        *pattern = "drive.N";
        return &c->drive[n];
    }
    if (strncmp(sec, "user.", 5) == 0) {
        const char *name = sec + 5;
        if (!*name || strlen(name) >= sizeof(c->user[0].name)) {
            snprintf(err, cap, "[%s]: want [user.NAME], NAME of 1..%zu characters", sec,
                     sizeof(c->user[0].name) - 1);
            return NULL;
        }
        *pattern = "user.NAME";
        for (int i = 0; i < c->nusers; i++)
            if (strcmp(c->user[i].name, name) == 0) return &c->user[i];
        if (c->nusers == NODE_CONF_MAX_USERS) {
            snprintf(err, cap, "[%s]: more than %d [user.NAME] sections", sec, NODE_CONF_MAX_USERS);
            return NULL;
        }
        node_user_conf_t *u = &c->user[c->nusers++];
        strcpy(u->name, name);
        return u;
    }
    return NULL;
}

static void random_token(char *out, size_t n, const char *alphabet)
{
    uint8_t r[64];
    size_t al = strlen(alphabet);
    if (getrandom(r, n, 0) != (ssize_t)n) abort();
    for (size_t i = 0; i < n; i++)
        out[i] = alphabet[r[i] % al];
    out[n] = 0;
}

static int add_user(s3_user_t *users, int *n, const char *ak, const char *sk, const char *from)
{
    if (*n == NODE_CONF_MAX_USERS) {
        fprintf(stderr, "warmlaked: %s: more than %d users in all\n", from, NODE_CONF_MAX_USERS);
        return -1;
    }
    users[(*n)++] = (s3_user_t){ak, sk};
    return 0;
}

int node_conf_load(node_conf_t *c, int argc, char **argv)
{
    c->opts.defs = options;
    c->opts.ndefs = sizeof(options) / sizeof(options[0]);
    c->opts.conf = c;
    c->opts.resolve = conf_section;
    if (opt_defaults(&c->opts) != 0) {
        fprintf(stderr, "warmlaked: %s\n", c->opts.err);
        return -1;
    }
    int r = opt_command_line(&c->opts, argc, argv, stdout, usage_head, usage_tail);
    if (r < 0) fprintf(stderr, "warmlaked: %s\n", c->opts.err);
    return r;
}

int node_conf_check(const node_conf_t *c, int drives, int k, int m, int clustered, char *bad,
                    size_t cap)
{
    if (!clustered && drives % (k + m))
        snprintf(bad, cap,
                 "--drives %d ([drives] count) must be a multiple of --ec %d+%d ([erasure] k, m): "
                 "the drives form sets of k+m",
                 drives, k, m);
    else if (c->block % 64)
        snprintf(bad, cap, "--block %llu ([erasure] block) must be a multiple of 64",
                 (unsigned long long)c->block);
    else if (c->iu & (c->iu - 1))
        snprintf(bad, cap, "--iu %llu ([drives] iu) must be a power of two",
                 (unsigned long long)c->iu);
    for (int i = 0; i < OBJ_MAX_SHARDS && !bad[0]; i++)
        if (c->drive[i].iu & (c->drive[i].iu - 1))
            snprintf(bad, cap, "[drive.%d] iu %llu must be a power of two", i,
                     (unsigned long long)c->drive[i].iu);
    return bad[0] ? -1 : 0;
}

void node_conf_free(node_conf_t *c)
{
    opt_free(&c->opts);
}

int node_conf_users_load(node_conf_users_t *u, const node_conf_t *c)
{
    u->n = 0;
    u->env = NULL;
    for (int i = 0; i < c->nusers; i++) {
        if (!c->user[i].access_key || !c->user[i].secret_key) {
            fprintf(stderr, "warmlaked: [user.%s] needs access_key and secret_key\n",
                    c->user[i].name);
            return -1;
        }
        u->user[u->n++] = (s3_user_t){c->user[i].access_key, c->user[i].secret_key};
    }
    const char *ak = getenv("WARMLAKE_ACCESS_KEY"), *sk = getenv("WARMLAKE_SECRET_KEY");
    if (ak && sk && *ak && *sk && add_user(u->user, &u->n, ak, sk, "WARMLAKE_ACCESS_KEY") != 0)
        return -1;
    u->env = getenv("WARMLAKE_USERS") ? xstrdup(getenv("WARMLAKE_USERS")) : NULL;
    for (char *save = NULL, *tok = u->env ? strtok_r(u->env, ",", &save) : NULL; tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon || colon == tok || !colon[1]) {
            fprintf(stderr, "warmlaked: WARMLAKE_USERS: want AK1:SECRET1,AK2:SECRET2\n");
            return -1;
        }
        *colon = 0;
        if (add_user(u->user, &u->n, tok, colon + 1, "WARMLAKE_USERS") != 0) return -1;
    }
    if (!u->n) {
        random_token(u->gen_ak, 20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
        random_token(u->gen_sk, 40,
                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
        u->user[u->n++] = (s3_user_t){u->gen_ak, u->gen_sk};
        printf("warmlaked: generated credentials\n  AWS_ACCESS_KEY_ID=%s\n  "
               "AWS_SECRET_ACCESS_KEY=%s\n",
               u->gen_ak, u->gen_sk);
    }
    return 0;
}

void node_conf_users_free(node_conf_users_t *u)
{
    free(u->env);
    u->env = NULL;
}
