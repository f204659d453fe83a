/*
 * warmlaked: a warmlake storage node serving the S3 API.
 *
 * With no arguments it starts a usable store: data under ./data on 6
 * file-backed drives with 4+2 erasure coding, listening on 127.0.0.1:9000,
 * credentials from WARMLAKE_ACCESS_KEY / WARMLAKE_SECRET_KEY or a generated
 * pair printed at start. SIGTERM/SIGINT drain in-flight requests and exit.
 *
 * Settings come from the options[] table of node_conf.c (see server/options.h):
 * defaults, then the INI files of --config, then the other flags. A bad
 * value, flag or setting exits with status 2 and a message naming it; a
 * store that cannot start (drives, address) exits with status 1.
 *
 * The rooms: node_conf.c (settings, users), node_drives.c (the data
 * directory's layout, replaced drives, the drives opened), node_cluster.c
 * (the cluster map, every set's stores, the object layer and its pools).
 * This file puts them together, serves S3 and stops on a signal.
 */
#include "common/err.h"
#include "common/log.h"
#include "common/pool.h"
#include "server/http.h"
#include "server/node_cluster.h"
#include "server/node_conf.h"
#include "server/node_drives.h"
#include "server/node_memory.h"
#include "server/s3.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static http_server_t *server;
static volatile int stop_asked; /* a signal came (ends a wait for the cluster map) */

static void on_signal(int sig)
{
    (void)sig;
    stop_asked = 1;
    if (server) http_server_stop(server);
}

/* The S3 layer stopped and freed with the set, as the server has stopped (or never started). */
static void s3_stop(s3_cfg_t *s3, node_cluster_t *cl)
{
    node_cluster_s3_detach(cl);
    s3_drain_stop(s3->drain);
    s3_scrub_stop(s3->scrub);
    pool_free(s3->batch); /* no handler runs now: no batch job is queued */
    sigv4_key_cache_free(s3->keys);
    node_cluster_set_free(cl);
}

int main(int argc, char **argv)
{
    node_memory_setup();
    static node_conf_t conf;
    int r = node_conf_load(&conf, argc, argv);
    if (r != 0) {
        node_conf_free(&conf);
        return r > 0 ? 0 : 2;
    }
    log_level = (int)conf.log_level;

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        fprintf(stderr, "warmlaked: cannot set signal handlers: %s\n", strerror(errno));
        node_conf_free(&conf);
        return 1;
    }
    /* The cluster's map, else the settings, give the drives, coding and sets; then what no
     * single value can say. */
    static node_cluster_t cl;
    char bad[400] = "";
    int lr = node_cluster_load(&cl, &conf, &stop_asked, bad, sizeof(bad));
    if (lr == 1) {
        fprintf(stderr, "warmlaked: %s\n", bad);
        node_conf_free(&conf);
        return 1;
    }
    if (cl.map) conf.listen = cl.map->nodes[cl.me].s3;
    if (bad[0] || node_conf_check(&conf, cl.drives, cl.k, cl.m, cl.map != NULL, bad, sizeof(bad))) {
        fprintf(stderr, "warmlaked: %s\n", bad);
        node_cluster_free(&cl);
        node_conf_free(&conf);
        return 2;
    }

    /* Users: the config file, the environment, else a generated pair. */
    node_conf_users_t users;
    if (node_conf_users_load(&users, &conf) != 0) {
        node_conf_users_free(&users);
        node_cluster_free(&cl);
        node_conf_free(&conf);
        return 2;
    }

    /* Drives, every set's stores, the object layer. */
    static node_drives_t drives;
    int rc, err, bad_setting = 0;
    if ((rc = node_drives_open(&drives, &conf, cl.drives, cl.map, cl.nsets, cl.k, cl.m)) != 0) {
        if (rc == 2) bad_setting = 1; /* a data directory laid out otherwise than this start */
        goto out;
    }
    if ((rc = node_cluster_join(&cl, drives.dv)) != 0) goto out;
    obj_set_t *set = node_cluster_set_new(&cl, &conf, &rc);
    if (!set) goto out;
    s3_cfg_t s3 = {0};
    s3.set = set;
    s3.users = users.user;
    s3.nusers = users.n;
    s3.region = conf.region;
    s3.max_skew_s = 900;
    s3.domain = conf.domain;
    s3.lifecycle_day_s = (long)conf.lifecycle_day_s;
    s3.fenced = cl.member ? member_fenced(cl.member) : NULL;
    s3.net = cl.member ? member_net(cl.member) : NULL;
    /* A key per user and day (and region, service): slots to spare for every user at once. */
    s3.keys = sigv4_key_cache_new(4 * NODE_CONF_MAX_USERS);
    /* Batch GET entries read ahead of their sending: I/O-bound jobs, two windows' worth. */
    pool_cfg_t bpc = {.name = "wl-batch", .threads = 64, .max_blocked = 0};
    s3.batch = pool_new(&bpc, &err);
    if (!s3.batch) {
        fprintf(stderr, "warmlaked: cannot start the batch pool: %s\n", err_str(err));
        sigv4_key_cache_free(s3.keys);
        node_cluster_set_free(&cl);
        rc = err;
        goto out;
    }
    s3.reap_grace_s = (long)conf.reap_grace_s;
    s3.host_id = conf.node; /* (NULL alone: "warmlake") */
    s3.scrub_done = node_drives_refilled;
    s3.scrub_done_arg = &drives;
    s3.memory = node_drives_memory;
    s3.memory_arg = &drives;
    s3_scrub_t *scrub = s3_scrub_start(&s3, (long)conf.scrub_interval_s, conf.scrub_rate);
    s3.scrub = scrub;
    if (drives.refilling && scrub) s3_scrub_kick(scrub); /* a replaced drive: refill it now */
    /* A cluster member moves its share of a draining pool's keys (its map may have pools). */
    s3.drain = cl.member ? s3_drain_start(&s3, conf.drain_rate) : NULL;
    node_cluster_s3_attach(&cl, &s3);
    http_cfg_t hc = {0};
    hc.listen = conf.listen;
    hc.workers = (int)conf.workers;
    hc.loops = (int)conf.http_loops;
    if (!hc.loops) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        hc.loops = cpus < 1 ? 1 : cpus > 4 ? 4 : (int)cpus;
    }
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
        s3_stop(&s3, &cl);
        goto out;
    }
    {
        const char *colon = strrchr(conf.listen, ':'); /* OPT_ADDR: there is one */
        printf("warmlaked: serving S3 on http://%.*s:%d with %d drives under %s, EC %d+%d, "
               "%d set%s\n",
               (int)(colon - conf.listen), conf.listen, http_server_port(server), cl.drives,
               conf.data, cl.k, cl.m, cl.nsets, cl.nsets == 1 ? "" : "s");
        const cmap_t *map = cl.map;
        if (map)
            printf("warmlaked: node %s of cluster %s (epoch %llu, %d nodes), peers on %s\n",
                   map->nodes[cl.me].id, map->cluster, (unsigned long long)map->epoch, map->nnodes,
                   map->nodes[cl.me].proto);
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
    /* Out of the signal handler's reach first: a late signal must not send to freed loops. */
    http_server_t *done = server;
    __atomic_store_n(&server, NULL, __ATOMIC_SEQ_CST);
    http_server_free(done);
    s3_stop(&s3, &cl);
    log_info("event=shutdown");
out:
    node_cluster_leave(&cl);
    node_drives_close(&drives);
    node_conf_users_free(&users);
    node_cluster_free(&cl);
    node_conf_free(&conf);
    return bad_setting ? 2 : rc ? 1 : 0;
}
