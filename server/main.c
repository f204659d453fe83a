/*
 * warmlaked: a warmlake storage node serving the S3 API.
 *
 * With no arguments it starts a usable store: data under ./data on 6
 * file-backed drives with 4+2 erasure coding, listening on 127.0.0.1:9000,
 * credentials from WARMLAKE_ACCESS_KEY / WARMLAKE_SECRET_KEY or a generated
 * pair printed at start. SIGTERM/SIGINT drain in-flight requests and exit.
 *
 * Settings come from the options[] table below (see server/options.h):
 * defaults, then the INI files of --config, then the other flags. A bad
 * value, flag or setting exits with status 2 and a message naming it; a
 * store that cannot start (drives, address) exits with status 1.
 */
#include "cluster/map.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/pool.h"
#include "server/http.h"
#include "server/member.h"
#include "server/options.h"
#include "server/s3.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_USERS 64

typedef struct {
    const char *path; /* NULL: DATA/driveN */
    uint64_t capacity, iu;
    double dwpd; /* 0 (or unset): the [drives] value */
} drive_conf_t;

typedef struct {
    char name[64]; /* of [user.NAME] */
    const char *access_key, *secret_key;
} user_conf_t;

/* Settings: defaults, then the config files, then flags. */
typedef struct {
    const char *listen, *data, *domain, *region;
    const char *cluster_map, *node, *cluster_secret_file, *etcd, *etcd_prefix;
    int64_t drives, k, m, workers, max_conns, max_stalled, log_level;
    int64_t header_timeout_s, idle_timeout_s, io_timeout_s, lifecycle_day_s, commit_gather_us;
    int64_t peer_timeout_ms, hedge_ms, write_quorum, scrub_interval_s, lease_ttl_s, reap_grace_s;
    uint64_t scrub_rate, drain_rate;
    uint64_t capacity, segment, block, iu, max_header, inline_max;
    double dwpd;
    drive_conf_t drive[OBJ_MAX_SHARDS]; /* [drive.N] */
    user_conf_t user[MAX_USERS];        /* [user.NAME] */
    int nusers;
} conf_t;

/* Offsets that fail to compile when the field is not of the row's type. */
#define C(field, type) _Generic(((conf_t *)0)->field, type : offsetof(conf_t, field))
#define D(field, type) _Generic(((drive_conf_t *)0)->field, type : offsetof(drive_conf_t, field))
#define U(field, type) _Generic(((user_conf_t *)0)->field, type : offsetof(user_conf_t, field))
#define STR            const char *
#define CAP_MIN        (1ll << 20)
#define CAP_MAX        (1ll << 50)
#define IU_MIN         4096
#define IU_MAX         (1 << 20)
#define DWPD_MAX       1000
#define DAY_S          86400

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
    {"block", "SIZE", "erasure", "block", OPT_SIZE, 0, 64, ERS_MAX_BLOCK, "1M", C(block, uint64_t),
     "erasure block size, a multiple of 64"},
    {"inline-max", "SIZE", "erasure", "inline_max", OPT_SIZE, OPT_ZERO_OK, 1, OBJ_INLINE_LIMIT,
     "64K", C(inline_max, uint64_t),
     "objects up to this size are stored whole in their heads on m+1 drives\n"
     "(one durable round, one read); 0: every object erasure-coded"},
    {"workers", "N", "server", "workers", OPT_INT, 0, 1, 4096, "32", C(workers, int64_t),
     "request worker threads"},
    {"max-conns", "N", "server", "max_conns", OPT_INT, 0, 1, 1 << 20, "1024", C(max_conns, int64_t),
     "connections before 503"},
    {"max-stalled", "N", "server", "max_stalled", OPT_INT, 0, 1, 65536, "256",
     C(max_stalled, int64_t),
     "threads added beyond --workers while clients stall their requests\n"
     "(stalled clients hold at most --workers + N); at that bound, with work\n"
     "waiting, the longest-stalled request of the client (access key, else\n"
     "address) that holds the most workers is closed"},
    {"log-level", "LEVEL", "server", "log_level", OPT_LEVEL, 0, 0, 0, "info", C(log_level, int64_t),
     "log events of this level and above"},
    {"domain", "NAME", "server", "domain", OPT_NAME, 0, 0, 253, NULL, C(domain, STR),
     "also serve virtual-host style: BUCKET.NAME[:port]"},
    {"region", "NAME", "server", "region", OPT_NAME, 0, 1, 63, "us-east-1", C(region, STR),
     "the region buckets report (GetBucketLocation)"},
    {"max-header", "SIZE", "server", "max_header", OPT_SIZE, 0, 1024, 1 << 20, "16K",
     C(max_header, uint64_t), "request line + headers limit (over: 431)"},
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
    conf_t *c = arg;
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
        if (c->nusers == MAX_USERS) {
            snprintf(err, cap, "[%s]: more than %d [user.NAME] sections", sec, MAX_USERS);
            return NULL;
        }
        user_conf_t *u = &c->user[c->nusers++];
        strcpy(u->name, name);
        return u;
    }
    return NULL;
}

static http_server_t *server;
static volatile int stop_asked; /* a signal came (ends a wait for the cluster map) */

static void on_signal(int sig)
{
    (void)sig;
    stop_asked = 1;
    if (server) http_server_stop(server);
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
    if (*n == MAX_USERS) {
        fprintf(stderr, "warmlaked: %s: more than %d users in all\n", from, MAX_USERS);
        return -1;
    }
    users[(*n)++] = (s3_user_t){ak, sk};
    return 0;
}

/*
 * Replaced drives. A drive directory without its engine's files, on a node
 * whose other drives (or layout) show that data was written before, is an
 * empty drive that took a failed one's place: until the heal scanner has
 * refilled it, it holds none of the heads and inline copies the set expects
 * of it, and a listing that merged it among k stores could miss objects. It
 * is marked (DRIVE/refilling, kept across restarts, and drive_set_refilling:
 * readers take it last), the scanner is started at once, and the marks go
 * when a pass ends with nothing it could not make whole.
 */
typedef struct {
    drive_t **dv;
    char (*path)[4096];
    int n;
} refill_t;

static int drive_is_fresh(const char *path)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof(p), "%s/segments", path);
    return stat(p, &sb) != 0 && errno == ENOENT;
}

/* DRIVE/refilling, durable (the file and its name) before the drive's engine writes a byte. */
static void refill_mark(const char *path)
{
    char p[4200];
    snprintf(p, sizeof(p), "%s/refilling", path);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        log_error("event=refill_mark_failed path=%s err=%s", path, strerror(errno));
    int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0 || fsync(fd) != 0)
        log_error("event=refill_mark_failed path=%s err=%s", p, strerror(errno));
    if (fd >= 0) close(fd);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        log_error("event=refill_mark_failed path=%s err=%s", path, strerror(errno));
    if (dfd >= 0) close(dfd);
}

static int refill_marked(const char *path)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof(p), "%s/refilling", path);
    return stat(p, &sb) == 0;
}

/* s3_cfg_t.scrub_done: a whole pass refilled every marked drive. */
static void refill_done(void *arg, unsigned failed)
{
    refill_t *r = arg;
    if (failed) return; /* not whole yet: the next pass tries again */
    for (int i = 0; i < r->n; i++) {
        if (!r->dv[i] || !drive_refilling(r->dv[i])) continue;
        char p[4200];
        snprintf(p, sizeof(p), "%s/refilling", r->path[i]);
        if (unlink(p) != 0 && errno != ENOENT) {
            log_error("event=refill_unmark_failed path=%s err=%s", p, strerror(errno));
            continue;
        }
        drive_set_refilling(r->dv[i], 0);
        log_info("event=drive_refilled path=%s", r->path[i]);
    }
}

/*
 * Where keys live depends on the sets (obj_set_multi: how many, and in a
 * cluster which drives each holds), so a data directory keeps the layout it
 * was made with: DATA/layout records it on the first start ("sets 2 ec
 * 4+2", and for a cluster member its id and a digest of the map's sets),
 * and a later start with another layout is refused (its keys would be
 * looked for on other sets). A single node compares the number of sets. A
 * data directory from before the file existed held one set. *existed: a
 * layout was there already (data was written before). 0, or 2 with the
 * reason printed.
 */
static int check_layout(const char *data, const char *want, int single, int nsets, int *existed)
{
    char path[4096], had[4096] = "";
    *existed = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/layout", data) >= sizeof(path)) {
        fprintf(stderr, "warmlaked: --data %s: path too long\n", data);
        return 2;
    }
    FILE *f = fopen(path, "r");
    if (f) {
        size_t got = fread(had, 1, sizeof(had) - 1, f);
        had[got] = 0;
        fclose(f);
        while (got && had[got - 1] == '\n')
            had[--got] = 0;
    } else {
        char d0[4096];
        struct stat sb;
        snprintf(d0, sizeof(d0), "%s/drive0", data);
        /* (An empty drive0, a mount point made before the first start, holds nothing.) */
        if (stat(d0, &sb) == 0 && !drive_is_fresh(d0) && nsets != 1)
            snprintf(had, sizeof(had), "sets 1");
    }
    *existed = had[0] != 0;
    /* A cluster's layout may grow by pools (a line each): what was recorded must begin it. */
    size_t hl = strlen(had);
    int hs = 0, same = single ? sscanf(had, "sets %d", &hs) == 1 && hs == nsets
                              : strncmp(had, want, hl) == 0 && (!want[hl] || want[hl] == '\n');
    if (had[0] && !same) {
        fprintf(stderr,
                "warmlaked: %s holds data laid out as \"%s\", but this start makes \"%s\": its "
                "objects would not be found. Start with the layout it was made with.\n",
                data, had, want);
        return 2;
    }
    if (f && (single || strcmp(had, want) == 0)) return 0; /* (a cluster's grew by a pool) */
    if (mkdir(data, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "warmlaked: cannot create %s: %s\n", data, strerror(errno));
        return 1;
    }
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *o = fopen(tmp, "w");
    int bad = !o || fprintf(o, "%s\n", want) < 0 || fflush(o) != 0 || fsync(fileno(o)) != 0;
    if (o && fclose(o) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "warmlaked: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/*
 * A cluster member's layout: a line per pool. The first names the cluster,
 * the coding, pool 0's sets and a digest of which drive (node id and
 * number) holds each shard of each of them (a map without pools is one
 * pool: its line is what it was before pools); each further pool a line of
 * its id, sets and digest.
 */
static void cluster_layout(const cmap_t *map, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (int p = 0; p < map->npools && at < cap; p++) {
        const cmap_pool_t *pool = &map->pools[p];
        uint64_t h = 1469598103934665603ull;
        for (int j = pool->first; j < pool->first + pool->nsets; j++)
            for (int i = 0; i < map->sets[j].k + map->sets[j].m; i++) {
                char d[CMAP_MAX_ID + 16];
                snprintf(d, sizeof(d), "%s/%d;", map->nodes[map->sets[j].d[i].node].id,
                         map->sets[j].d[i].drive);
                for (const char *c = d; *c; c++)
                    h = (h ^ (uint8_t)*c) * 1099511628211ull;
            }
        if (p == 0)
            at += (size_t)snprintf(out + at, cap - at, "cluster %s sets %d ec %d+%d drives %016llx",
                                   map->cluster, pool->nsets, map->sets[0].k, map->sets[0].m,
                                   (unsigned long long)h);
        else
            at += (size_t)snprintf(out + at, cap - at, "\npool %s sets %d drives %016llx", pool->id,
                                   pool->nsets, (unsigned long long)h);
    }
}

/* The placement seed of a cluster: its id's FNV-1a (fixed: placement depends on it). */
static uint64_t placement_seed(const char *cluster)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = cluster; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

/* nsets sets of k+m stores each (set j: st[j*(k+m)...]) into sets[]: 0, or an ERR_*. */
static int new_sets(const shard_store_t *st, int nsets, int k, int m, uint32_t block,
                    obj_set_t **sets)
{
    int err = 0;
    for (int j = 0; j < nsets; j++)
        if (!(sets[j] = obj_set_new(st + j * (k + m), k, m, block, &err))) {
            while (j--)
                obj_set_free(sets[j]);
            return err;
        }
    return 0;
}

/*
 * The object layer over nsets sets of k+m stores each (set j: st[j*(k+m)...]);
 * with a map, its pools (a cluster's layer is always several sets as one,
 * even of one set: a pool may be added while it runs).
 */
static obj_set_t *make_sets(const shard_store_t *st, int nsets, int k, int m, uint32_t block,
                            uint64_t seed, const cmap_t *map, int *err)
{
    if (nsets == 1 && !map) return obj_set_new(st, k, m, block, err);
    if (nsets > OBJ_MAX_SETS || (map && map->npools > OBJ_MAX_POOLS)) {
        *err = ERR_INVAL;
        return NULL;
    }
    obj_set_t *sets[OBJ_MAX_SETS];
    if ((*err = new_sets(st, nsets, k, m, block, sets)) != 0) return NULL;
    int first = map ? map->pools[0].nsets : nsets;
    obj_set_t *s = obj_set_multi(sets, first, seed, err);
    if (!s) {
        for (int j = 0; j < nsets; j++)
            obj_set_free(sets[j]);
        return NULL;
    }
    for (int p = 0; map && p < map->npools; p++) {
        const cmap_pool_t *pool = &map->pools[p];
        *err =
            p ? obj_set_add_pool(s, sets + pool->first, pool->nsets, pool->weight, pool->draining)
              : obj_set_pool_state(s, 0, pool->weight, pool->draining);
        if (*err) {
            for (int j = pool->first; p && j < nsets; j++) /* those not taken yet */
                obj_set_free(sets[j]);
            obj_set_free(s);
            return NULL;
        }
    }
    return s;
}

/* A pool added to the cluster's map while the node runs (member_pools_t). */
typedef struct {
    obj_set_t *set;
    const char *data;
    uint32_t block;
    s3_drain_t *drain; /* (atomic: set once the mover runs; callbacks end before it stops) */
} pools_ctx_t;

static int pool_added(void *arg, const cmap_t *map, int p, const shard_store_t *st)
{
    pools_ctx_t *c = arg;
    const cmap_pool_t *pool = &map->pools[p];
    int k = map->sets[0].k, m = map->sets[0].m, existed, rc;
    if (p != obj_set_pools(c->set)) return ERR_INVAL; /* pools come in order */
    /* Recorded first: a restart with the map that lacks it would not find its objects. */
    char want[4096];
    cluster_layout(map, want, sizeof(want));
    if (check_layout(c->data, want, 0, 0, &existed) != 0) return ERR_IO;
    obj_set_t *sets[OBJ_MAX_SETS];
    if ((rc = new_sets(st, pool->nsets, k, m, c->block, sets)) != 0) return rc;
    if ((rc = obj_set_add_pool(c->set, sets, pool->nsets, pool->weight, pool->draining)) != 0)
        for (int j = 0; j < pool->nsets; j++)
            obj_set_free(sets[j]);
    return rc;
}

static void pool_state(void *arg, int p, uint32_t weight, int draining)
{
    pools_ctx_t *c = arg;
    if (obj_set_pool_state(c->set, p, weight, draining) == 0) {
        log_info("event=pool_state pool=%d weight=%u%s", p, weight,
                 draining == OBJ_POOL_REMOVED ? " removed"
                 : draining                   ? " draining"
                                              : "");
        s3_drain_kick(__atomic_load_n(&c->drain, __ATOMIC_ACQUIRE));
    }
}

/* One drive's open on its own thread (open_drives). */
typedef struct {
    const drive_cfg_t *cfg;
    drive_t **out;
    int rc;
    pthread_t tid;
} drive_opener_t;

static void *drive_opener(void *arg)
{
    drive_opener_t *o = arg;
    o->rc = drive_open(o->cfg, o->out);
    return NULL;
}

/* Opens n drives side by side, each on a thread of its own (a thread that cannot start
 * opens its drive in place). 0, or the first failure's code once every open has ended; the
 * drives that did open stay in dv for the caller's cleanup. */
static int open_drives(const drive_cfg_t *cfg, int n, drive_t **dv)
{
    drive_opener_t op[OBJ_MAX_SHARDS];
    int started[OBJ_MAX_SHARDS] = {0}, rc = 0;
    for (int i = 0; i < n; i++) {
        op[i] = (drive_opener_t){.cfg = &cfg[i], .out = &dv[i]};
        started[i] = pthread_create(&op[i].tid, NULL, drive_opener, &op[i]) == 0;
        if (!started[i]) drive_opener(&op[i]);
    }
    for (int i = 0; i < n; i++) {
        if (started[i]) pthread_join(op[i].tid, NULL);
        if (op[i].rc && !rc) {
            fprintf(stderr, "warmlaked: cannot open drive %s: %s\n", cfg[i].path,
                    err_str(op[i].rc));
            rc = op[i].rc;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    static conf_t conf;
    opt_ctx_t oc = {0};
    oc.defs = options;
    oc.ndefs = sizeof(options) / sizeof(options[0]);
    oc.conf = &conf;
    oc.resolve = conf_section;
    if (opt_defaults(&oc) != 0) {
        fprintf(stderr, "warmlaked: %s\n", oc.err);
        opt_free(&oc);
        return 2;
    }
    int r = opt_command_line(&oc, argc, argv, stdout, usage_head, usage_tail);
    if (r != 0) {
        if (r < 0) fprintf(stderr, "warmlaked: %s\n", oc.err);
        opt_free(&oc);
        return r > 0 ? 0 : 2;
    }
    log_level = (int)conf.log_level;

    /* What no single value can say. */
    int drives = (int)conf.drives, k = (int)conf.k, m = (int)conf.m, nsets = 1;
    char bad[400] = "";
    member_t *member = NULL;
    const cmap_t *map = NULL;
    int me = -1, clustered = conf.cluster_map || conf.etcd;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        fprintf(stderr, "warmlaked: cannot set signal handlers: %s\n", strerror(errno));
        opt_free(&oc);
        return 1;
    }
    if (clustered) {
        member_cfg_t mc = {conf.cluster_map,
                           conf.etcd,
                           conf.etcd_prefix,
                           conf.node,
                           conf.cluster_secret_file,
                           conf.data,
                           (uint32_t)conf.peer_timeout_ms,
                           (uint32_t)conf.lease_ttl_s};
        int lr = member_load(&mc, &stop_asked, &member, bad, sizeof(bad));
        if (lr == 1) {
            fprintf(stderr, "warmlaked: %s\n", bad);
            opt_free(&oc);
            return 1;
        }
        if (lr == 0) {
            map = member_map(member);
            me = member_self(member);
            drives = map->nodes[me].drives;
            k = map->sets[0].k;
            m = map->sets[0].m;
            nsets = map->nsets;
            conf.listen = map->nodes[me].s3;
        }
    }
    if (bad[0])
        ;
    else if (!clustered && drives % (k + m))
        snprintf(bad, sizeof(bad),
                 "--drives %d ([drives] count) must be a multiple of --ec %d+%d ([erasure] k, m): "
                 "the drives form sets of k+m",
                 drives, k, m);
    else if (conf.block % 64)
        snprintf(bad, sizeof(bad), "--block %llu ([erasure] block) must be a multiple of 64",
                 (unsigned long long)conf.block);
    else if (conf.iu & (conf.iu - 1))
        snprintf(bad, sizeof(bad), "--iu %llu ([drives] iu) must be a power of two",
                 (unsigned long long)conf.iu);
    for (int i = 0; i < OBJ_MAX_SHARDS && !bad[0]; i++)
        if (conf.drive[i].iu & (conf.drive[i].iu - 1))
            snprintf(bad, sizeof(bad), "[drive.%d] iu %llu must be a power of two", i,
                     (unsigned long long)conf.drive[i].iu);
    if (bad[0]) {
        fprintf(stderr, "warmlaked: %s\n", bad);
        member_free(member);
        opt_free(&oc);
        return 2;
    }
    uint64_t capacity = conf.capacity, segment = conf.segment;
    if (!segment) segment = capacity >= (64ull << 30) ? 256u << 20 : 64u << 20;

    /* Users: the config file, the environment, else a generated pair. */
    s3_user_t users[MAX_USERS];
    int nusers = 0, rc = 0, status = 0; /* status: 2 for a bad setting */
    char gen_ak[21], gen_sk[41];
    char *more = NULL;
    for (int i = 0; i < conf.nusers; i++) {
        if (!conf.user[i].access_key || !conf.user[i].secret_key) {
            fprintf(stderr, "warmlaked: [user.%s] needs access_key and secret_key\n",
                    conf.user[i].name);
            status = 2;
            goto out_users;
        }
        users[nusers++] = (s3_user_t){conf.user[i].access_key, conf.user[i].secret_key};
    }
    const char *ak = getenv("WARMLAKE_ACCESS_KEY"), *sk = getenv("WARMLAKE_SECRET_KEY");
    if (ak && sk && *ak && *sk && add_user(users, &nusers, ak, sk, "WARMLAKE_ACCESS_KEY") != 0) {
        status = 2;
        goto out_users;
    }
    more = getenv("WARMLAKE_USERS") ? xstrdup(getenv("WARMLAKE_USERS")) : NULL;
    for (char *save = NULL, *tok = more ? strtok_r(more, ",", &save) : NULL; tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon || colon == tok || !colon[1]) {
            fprintf(stderr, "warmlaked: WARMLAKE_USERS: want AK1:SECRET1,AK2:SECRET2\n");
            status = 2;
            goto out_users;
        }
        *colon = 0;
        if (add_user(users, &nusers, tok, colon + 1, "WARMLAKE_USERS") != 0) {
            status = 2;
            goto out_users;
        }
    }
    if (!nusers) {
        random_token(gen_ak, 20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
        random_token(gen_sk, 40, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
        users[nusers++] = (s3_user_t){gen_ak, gen_sk};
        printf("warmlaked: generated credentials\n  AWS_ACCESS_KEY_ID=%s\n  "
               "AWS_SECRET_ACCESS_KEY=%s\n",
               gen_ak, gen_sk);
    }

    /* Drives. */
    if (!clustered) nsets = drives / (k + m);
    drive_t *dv[OBJ_MAX_SHARDS] = {0};
    shard_store_t *st = xcalloc((size_t)nsets * (size_t)(k + m), sizeof(*st));
    int made_data = 0, had_layout = 0;
    {
        char want[4096];
        if (clustered)
            cluster_layout(map, want, sizeof(want));
        else
            snprintf(want, sizeof(want), "sets %d ec %d+%d", nsets, k, m);
        if ((rc = check_layout(conf.data, want, !clustered, nsets, &had_layout)) != 0) goto out;
    }
    static char dpath[OBJ_MAX_SHARDS][4096]; /* each drive's directory (refill_t) */
    int fresh[OBJ_MAX_SHARDS] = {0}, nfresh = 0;
    for (int i = 0; i < drives; i++) {
        if (conf.drive[i].path)
            snprintf(dpath[i], sizeof(dpath[i]), "%s", conf.drive[i].path);
        else
            snprintf(dpath[i], sizeof(dpath[i]), "%s/drive%d", conf.data, i);
        nfresh += fresh[i] = drive_is_fresh(dpath[i]);
    }
    /* Drives fresh while others are not (or the layout was written before): replaced. Marked
     * before they are opened, so that no crash leaves one written to and unmarked. */
    for (int i = 0; i < drives; i++) {
        if (!fresh[i] || (nfresh == drives && !had_layout)) continue;
        log_warn("event=drive_replaced path=%s: empty where data was; refilled by the heal "
                 "scanner, read last until then",
                 dpath[i]);
        refill_mark(dpath[i]);
    }
    /* Each drive's configuration, then all opened at once: an open replays the drive's log
     * past its index, which takes seconds on a big drive; twenty drives one after another
     * made a restart twenty times as long. */
    drive_cfg_t dcfg[OBJ_MAX_SHARDS];
    for (int i = 0; i < drives; i++) {
        const drive_conf_t *dc = &conf.drive[i];
        if (!dc->path) {
            if (!made_data && mkdir(conf.data, 0755) != 0 && errno != EEXIST) {
                fprintf(stderr, "warmlaked: cannot create %s: %s\n", conf.data, strerror(errno));
                rc = 1;
                goto out;
            }
            made_data = 1;
            if ((size_t)snprintf(NULL, 0, "%s/drive%d", conf.data, i) >= sizeof(dpath[i])) {
                fprintf(stderr, "warmlaked: --data %s: path too long\n", conf.data);
                rc = 1;
                goto out;
            }
        }
        drive_cfg_t c = {0};
        c.path = dpath[i];
        c.capacity = dc->capacity ? dc->capacity : capacity;
        c.segment_size = segment;
        c.iu = (uint32_t)(dc->iu ? dc->iu : conf.iu);
        c.dwpd = dc->dwpd ? dc->dwpd : conf.dwpd;
        c.compaction = 1;
        c.commit_gather_us = (uint32_t)conf.commit_gather_us;
        dcfg[i] = c;
    }
    if ((rc = open_drives(dcfg, drives, dv)) != 0) goto out;
    if (!clustered)
        for (int i = 0; i < drives; i++)
            st[i] = shard_store_local(dv[i]);
    int refilling = 0;
    for (int i = 0; i < drives; i++) {
        if (refill_marked(dpath[i])) drive_set_refilling(dv[i], 1);
        refilling += drive_refilling(dv[i]);
    }
    refill_t refill = {dv, dpath, drives};
    if (member && (rc = member_join(member, dv, st)) != 0) goto out;
    int err;
    obj_set_t *set = make_sets(st, nsets, k, m, (uint32_t)conf.block,
                               map ? placement_seed(map->cluster) : 0, map, &err);
    if (set) obj_set_inline_max(set, (uint32_t)conf.inline_max);
    if (set) obj_set_hedge_ms(set, (uint32_t)conf.hedge_ms);
    if (set) {
        int wq = conf.write_quorum ? (int)conf.write_quorum : m > 0 ? k + 1 : k;
        if (obj_set_write_quorum(set, wq) != 0) {
            fprintf(stderr, "warmlaked: --write-quorum %d is outside k..k+m (%d..%d)\n", wq, k,
                    k + m);
            obj_set_free(set);
            rc = 2;
            goto out;
        }
        log_info("event=write_quorum stores=%d of=%d", wq, k + m);
        if (obj_set_heal_start(set) != 0)
            log_error("event=heal_queue_off: writes short of a store wait for a bucket heal");
    }
    static pools_ctx_t pools_ctx;
    if (set && member) {
        pools_ctx = (pools_ctx_t){set, conf.data, (uint32_t)conf.block, NULL};
        member_pools_t cb = {pool_added, pool_state, &pools_ctx};
        member_on_pools(member, &cb);
    }
    if (!set) {
        fprintf(stderr, "warmlaked: bad erasure configuration: %s\n", err_str(err));
        rc = err;
        goto out;
    }
    s3_cfg_t s3 = {0};
    s3.set = set;
    s3.users = users;
    s3.nusers = nusers;
    s3.region = conf.region;
    s3.max_skew_s = 900;
    s3.domain = conf.domain;
    s3.lifecycle_day_s = (long)conf.lifecycle_day_s;
    s3.fenced = member ? member_fenced(member) : NULL;
    s3.net = member ? member_net(member) : NULL;
    /* A key per user and day (and region, service): slots to spare for every user at once. */
    s3.keys = sigv4_key_cache_new(4 * MAX_USERS);
    /* Batch GET entries read ahead of their sending: I/O-bound jobs, two windows' worth. */
    pool_cfg_t bpc = {.name = "wl-batch", .threads = 64, .max_blocked = 0};
    s3.batch = pool_new(&bpc, &err);
    if (!s3.batch) {
        fprintf(stderr, "warmlaked: cannot start the batch pool: %s\n", err_str(err));
        sigv4_key_cache_free(s3.keys);
        if (member) member_on_pools(member, NULL); /* no pool added to a set freed */
        obj_set_free(set);
        rc = err;
        goto out;
    }
    s3.reap_grace_s = (long)conf.reap_grace_s;
    s3.host_id = conf.node; /* (NULL alone: "warmlake") */
    s3.scrub_done = refill_done;
    s3.scrub_done_arg = &refill;
    s3_scrub_t *scrub = s3_scrub_start(&s3, (long)conf.scrub_interval_s, conf.scrub_rate);
    s3.scrub = scrub;
    if (refilling && scrub) s3_scrub_kick(scrub); /* a replaced drive: refill it now */
    /* A cluster member moves its share of a draining pool's keys (its map may have pools). */
    s3.drain = member ? s3_drain_start(&s3, conf.drain_rate) : NULL;
    __atomic_store_n(&pools_ctx.drain, s3.drain, __ATOMIC_RELEASE);
    if (member) member_node_stats(member, s3_node_state, s3_heal_now, &s3);
    http_cfg_t hc = {0};
    hc.listen = conf.listen;
    hc.workers = (int)conf.workers;
    hc.max_conns = (int)conf.max_conns;
    hc.max_header = (size_t)conf.max_header;
    hc.header_ms = (uint64_t)conf.header_timeout_s * 1000;
    hc.idle_ms = (uint64_t)conf.idle_timeout_s * 1000;
    hc.io_ms = (uint64_t)conf.io_timeout_s * 1000;
    hc.max_stalled = (int)conf.max_stalled;
    hc.handler = s3_handle;
    hc.arg = &s3;
    if ((rc = http_server_new(&hc, &server)) != 0) {
        fprintf(stderr, "warmlaked: cannot listen on %s: %s\n", conf.listen, err_str(rc));
        if (member) member_node_stats(member, NULL, NULL, NULL);
        if (member) member_on_pools(member, NULL); /* no kick of a mover stopped */
        s3_drain_stop(s3.drain);
        s3_scrub_stop(scrub);
        pool_free(s3.batch);
        sigv4_key_cache_free(s3.keys);
        if (member) member_on_pools(member, NULL); /* no pool added to a set freed */
        obj_set_free(set);
        goto out;
    }
    {
        const char *colon = strrchr(conf.listen, ':'); /* OPT_ADDR: there is one */
        printf("warmlaked: serving S3 on http://%.*s:%d with %d drives under %s, EC %d+%d, "
               "%d set%s\n",
               (int)(colon - conf.listen), conf.listen, http_server_port(server), drives, conf.data,
               k, m, nsets, nsets == 1 ? "" : "s");
        if (map)
            printf("warmlaked: node %s of cluster %s (epoch %llu, %d nodes), peers on %s\n",
                   map->nodes[me].id, map->cluster, (unsigned long long)map->epoch, map->nnodes,
                   map->nodes[me].proto);
        printf("warmlaked: ready port=%d\n", http_server_port(server));
        fflush(stdout);
        s3_lc_worker_t *lc = s3_lifecycle_start(&s3);
        /* A signal that came before the server existed: stop it now (run returns at once,
           its loop's handles closed as on any stop). */
        if (stop_asked) http_server_stop(server);
        rc = http_server_run(server);
        s3_lifecycle_stop(lc);
        if (rc) fprintf(stderr, "warmlaked: server stopped: %s\n", err_str(rc));
    }
    http_server_free(server);
    server = NULL;
    if (member) member_node_stats(member, NULL, NULL, NULL); /* s3 and the set go now */
    if (member) member_on_pools(member, NULL);               /* no kick of a mover stopped */
    s3_drain_stop(s3.drain);
    s3_scrub_stop(scrub);
    pool_free(s3.batch); /* no handler runs now: no batch job is queued */
    sigv4_key_cache_free(s3.keys);
    if (member) member_on_pools(member, NULL); /* no pool added to a set freed */
    obj_set_free(set);
    log_info("event=shutdown");
out:
    member_leave(member, st, nsets * (k + m));
    free(st);
    for (int i = 0; i < drives; i++)
        if (dv[i]) drive_close(dv[i]);
out_users:
    free(more);
    member_free(member);
    opt_free(&oc);
    return status ? status : rc ? 1 : 0;
}
