/*
 * node_conf: warmlaked's settings and its S3 users.
 *
 * Settings come from one table (node_conf.c, parsed by server/options.h):
 * defaults, then the INI files of --config, then the other flags. The users
 * come from [user.NAME] sections, then WARMLAKE_ACCESS_KEY and
 * WARMLAKE_SECRET_KEY, then WARMLAKE_USERS; with none of them a key pair is
 * generated and printed. Everything here runs on the main thread at start.
 */
#ifndef WL_NODE_CONF_H
#define WL_NODE_CONF_H

#include "server/obj.h"
#include "server/options.h"
#include "server/s3.h"

#include <stddef.h>
#include <stdint.h>

#define NODE_CONF_MAX_USERS 64

typedef struct {
    const char *path; /* NULL: DATA/driveN */
    uint64_t capacity, iu;
    double dwpd; /* 0 (or unset): the [drives] value */
} node_drive_conf_t;

typedef struct {
    char name[64]; /* of [user.NAME] */
    const char *access_key, *secret_key;
} node_user_conf_t;

/* Settings: defaults, then the config files, then flags. */
typedef struct {
    const char *listen, *data, *domain, *region;
    const char *cluster_map, *node, *cluster_secret_file, *etcd, *etcd_prefix;
    int64_t drives, k, m, workers, max_conns, max_stalled, log_level;
    int64_t http_loops; /* 0: one per CPU core, at most 4 */
    int64_t header_timeout_s, idle_timeout_s, io_timeout_s, lifecycle_day_s, commit_gather_us;
    int64_t peer_timeout_ms, hedge_ms, write_quorum, scrub_interval_s, lease_ttl_s, reap_grace_s;
    int64_t segment_pool;
    uint64_t scrub_rate, drain_rate;
    uint64_t capacity, segment, block, iu, max_header, inline_max, index_cache;
    double dwpd;
    node_drive_conf_t drive[OBJ_MAX_SHARDS];    /* [drive.N] */
    node_user_conf_t user[NODE_CONF_MAX_USERS]; /* [user.NAME] */
    int nusers;
    opt_ctx_t opts; /* the parser's; owns the strings above until node_conf_free */
} node_conf_t;

/*
 * Fills c (zeroed, as a static is) from the defaults, the --config files
 * and the flags of argv. Returns 0; 1 when --help was asked for (printed on
 * stdout: exit 0); or -1 with the reason printed on stderr (exit 2).
 * node_conf_free(c) in every case.
 */
int node_conf_load(node_conf_t *c, int argc, char **argv) __attribute__((warn_unused_result));

/*
 * What no single value can say, for a node of drives drives coded k+m
 * (clustered: the map's, whose drive count need not be a multiple of k+m).
 * 0, or -1 with the reason in bad.
 */
int node_conf_check(const node_conf_t *c, int drives, int k, int m, int clustered, char *bad,
                    size_t cap) __attribute__((warn_unused_result));

/* Frees the copies of c's string values (none in a c zeroed and never loaded). */
void node_conf_free(node_conf_t *c);

/* The S3 users; user[] points into c, the environment and this struct. */
typedef struct {
    s3_user_t user[NODE_CONF_MAX_USERS];
    int n;
    char gen_ak[21], gen_sk[41]; /* a generated pair */
    char *env;                   /* a copy of WARMLAKE_USERS, which user[] points into */
} node_conf_users_t;

/*
 * The users of c's [user.NAME] sections and of the environment, else a
 * generated pair (printed on stdout). 0, or -1 with the reason printed (a
 * bad setting: exit 2). u is valid until node_conf_users_free and c's
 * node_conf_free; node_conf_users_free(u) in every case.
 */
int node_conf_users_load(node_conf_users_t *u, const node_conf_t *c)
    __attribute__((warn_unused_result));

void node_conf_users_free(node_conf_users_t *u);

#endif
