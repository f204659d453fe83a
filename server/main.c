/*
 * warmlaked: a warmlake storage node serving the S3 API.
 *
 * With no arguments it starts a usable store: data under ./data on 6
 * file-backed drives with 4+2 erasure coding, listening on 127.0.0.1:9000,
 * credentials from WARMLAKE_ACCESS_KEY / WARMLAKE_SECRET_KEY or a generated
 * pair printed at start. SIGTERM/SIGINT drain in-flight requests and exit.
 */
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "server/http.h"
#include "server/s3.h"

#include <getopt.h>
#include <ini.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

static http_server_t *server;

static void on_signal(int sig)
{
    (void)sig;
    if (server) http_server_stop(server);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: warmlaked [options]\n"
            "  --listen ADDR:PORT    address to serve S3 on (default 127.0.0.1:9000;\n"
            "                        port 0 picks a free one, printed at start)\n"
            "  --data DIR            data directory; drives are DIR/drive0.. (default ./data)\n"
            "  --drives N            number of file-backed drives (default 6)\n"
            "  --ec K+M              erasure coding: K data + M parity shards, K+M = drives\n"
            "                        (default 4+2)\n"
            "  --drive-capacity SIZE bytes each drive may use, with K/M/G/T suffix (default 16G)\n"
            "  --segment-size SIZE   segment size (default 256M; 64M for small drives)\n"
            "  --iu BYTES            indirection unit (default: detected, else 4096)\n"
            "  --dwpd X              rated sequential drive writes per day (default 0: no budget)\n"
            "  --block SIZE          erasure block size (default 1M)\n"
            "  --workers N           request worker threads (default 32)\n"
            "  --max-conns N         connections before 503 (default 1024)\n"
            "  --log-level LEVEL     debug|info|warn|error (default info)\n"
            "  --domain NAME         also serve virtual-host style: BUCKET.NAME[:port]\n"
            "  --max-header SIZE     request line + headers limit (default 16K; over: 431)\n"
            "  --header-timeout SEC  a request's headers must arrive within (default 30)\n"
            "  --idle-timeout SEC    close idle keep-alive connections after (default 60)\n"
            "  --config FILE         INI file: [server] listen data workers max_conns log_level\n"
            "                        domain max_header header_timeout idle_timeout,\n"
            "                        [erasure] k m block, [drives] count capacity segment_size iu\n"
            "                        dwpd, [drive.N] path capacity iu dwpd, [user.NAME]\n"
            "                        access_key secret_key; flags override the file\n"
            "  --help                this text\n"
            "Credentials: WARMLAKE_ACCESS_KEY and WARMLAKE_SECRET_KEY; extra users as\n"
            "WARMLAKE_USERS=\"AK1:SECRET1,AK2:SECRET2\". Without them a key pair is generated\n"
            "and printed.\n");
}

static uint64_t parse_size(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    switch (*e) {
    case 'k':
    case 'K':
        v *= 1024.0;
        break;
    case 'm':
    case 'M':
        v *= 1048576.0;
        break;
    case 'g':
    case 'G':
        v *= 1073741824.0;
        break;
    case 't':
    case 'T':
        v *= 1099511627776.0;
        break;
    case 0:
        break;
    default:
        return 0;
    }
    return (uint64_t)v;
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

/* Settings: defaults, then the config file, then flags. */
typedef struct {
    const char *listen, *data, *domain;
    int drives, k, m, workers, max_conns;
    uint64_t max_header, header_timeout_s, idle_timeout_s;
    uint64_t capacity, segment, block;
    uint32_t iu;
    double dwpd;
    /* per drive (config file [drive.N]): path, capacity, iu, dwpd; 0/NULL = the defaults */
    char *drive_path[OBJ_MAX_SHARDS];
    uint64_t drive_cap[OBJ_MAX_SHARDS];
    uint32_t drive_iu[OBJ_MAX_SHARDS];
    double drive_dwpd[OBJ_MAX_SHARDS];
    s3_user_t users[64];
    int nusers;
    char *strings[256]; /* what the config file allocated, freed at exit */
    int nstrings;
} conf_t;

static char *keep(conf_t *c, const char *v)
{
    char *p = xstrdup(v);
    if (c->nstrings < 256) c->strings[c->nstrings++] = p;
    return p;
}

/*
 * INI config (inih from Debian):
 *   [server]  listen, data, workers, max_conns, log_level, domain, max_header,
 *             header_timeout, idle_timeout
 *   [erasure] k, m, block
 *   [drives]  count, capacity, segment_size, iu, dwpd       (defaults for every drive)
 *   [drive.N] path, capacity, iu, dwpd                      (one drive, N from 0)
 *   [user.NAME] access_key, secret_key                      (any number of users)
 */
static int conf_entry(void *arg, const char *sec, const char *name, const char *value)
{
    conf_t *c = arg;
    int n;
    if (strcmp(sec, "server") == 0) {
        if (strcmp(name, "listen") == 0)
            c->listen = keep(c, value);
        else if (strcmp(name, "data") == 0)
            c->data = keep(c, value);
        else if (strcmp(name, "workers") == 0)
            c->workers = atoi(value);
        else if (strcmp(name, "max_conns") == 0)
            c->max_conns = atoi(value);
        else if (strcmp(name, "domain") == 0)
            c->domain = keep(c, value);
        else if (strcmp(name, "max_header") == 0)
            c->max_header = parse_size(value);
        else if (strcmp(name, "header_timeout") == 0)
            c->header_timeout_s = strtoull(value, NULL, 10);
        else if (strcmp(name, "idle_timeout") == 0)
            c->idle_timeout_s = strtoull(value, NULL, 10);
        else if (strcmp(name, "log_level") == 0)
            return (log_level = log_level_parse(value)) >= 0;
        else
            return 0;
    } else if (strcmp(sec, "erasure") == 0) {
        if (strcmp(name, "k") == 0)
            c->k = atoi(value);
        else if (strcmp(name, "m") == 0)
            c->m = atoi(value);
        else if (strcmp(name, "block") == 0)
            c->block = parse_size(value);
        else
            return 0;
    } else if (strcmp(sec, "drives") == 0) {
        if (strcmp(name, "count") == 0)
            c->drives = atoi(value);
        else if (strcmp(name, "capacity") == 0)
            c->capacity = parse_size(value);
        else if (strcmp(name, "segment_size") == 0)
            c->segment = parse_size(value);
        else if (strcmp(name, "iu") == 0)
            c->iu = (uint32_t)parse_size(value);
        else if (strcmp(name, "dwpd") == 0)
            c->dwpd = atof(value);
        else
            return 0;
    } else if (sscanf(sec, "drive.%d", &n) == 1) {
        if (n < 0 || n >= OBJ_MAX_SHARDS) return 0;
        if (strcmp(name, "path") == 0)
            c->drive_path[n] = keep(c, value);
        else if (strcmp(name, "capacity") == 0)
            c->drive_cap[n] = parse_size(value);
        else if (strcmp(name, "iu") == 0)
            c->drive_iu[n] = (uint32_t)parse_size(value);
        else if (strcmp(name, "dwpd") == 0)
            c->drive_dwpd[n] = atof(value);
        else
            return 0;
    } else if (strncmp(sec, "user.", 5) == 0) {
        /* inih reports a section's keys together: a new slot when the last one is full. */
        if (c->nusers == 0 ||
            (c->users[c->nusers - 1].access_key && c->users[c->nusers - 1].secret)) {
            if (c->nusers == 64) return 0;
            c->users[c->nusers++] = (s3_user_t){NULL, NULL};
        }
        s3_user_t *u = &c->users[c->nusers - 1];
        if (strcmp(name, "access_key") == 0 && !u->access_key)
            u->access_key = keep(c, value);
        else if (strcmp(name, "secret_key") == 0 && !u->secret)
            u->secret = keep(c, value);
        else
            return 0;
    } else {
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    static conf_t conf = {
        .listen = "127.0.0.1:9000",
        .data = "./data",
        .drives = 6,
        .k = 4,
        .m = 2,
        .workers = 32,
        .max_conns = 1024,
        .capacity = 16ull << 30,
        .block = 1u << 20,
    };
    static struct option opts[] = {
        {"listen", 1, 0, 'l'},
        {"data", 1, 0, 'd'},
        {"drives", 1, 0, 'n'},
        {"ec", 1, 0, 'e'},
        {"drive-capacity", 1, 0, 'c'},
        {"segment-size", 1, 0, 's'},
        {"iu", 1, 0, 'i'},
        {"dwpd", 1, 0, 'w'},
        {"block", 1, 0, 'b'},
        {"workers", 1, 0, 'W'},
        {"max-conns", 1, 0, 'C'},
        {"log-level", 1, 0, 'L'},
        {"config", 1, 0, 'f'},
        {"help", 0, 0, 'h'},
        {"domain", 1, 0, 'D'},
        {"max-header", 1, 0, 'H'},
        {"header-timeout", 1, 0, 'T'},
        {"idle-timeout", 1, 0, 'I'},
        {0, 0, 0, 0},
    };
    /* The config file first, so that flags override it. */
    for (int i = 1; i < argc; i++) {
        const char *file = NULL;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            file = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
        if (!file) continue;
        int line = ini_parse(file, conf_entry, &conf);
        if (line != 0) {
            fprintf(stderr, "warmlaked: %s: %s%d\n", file,
                    line < 0 ? "cannot read the file " : "bad setting on line ", line);
            return 2;
        }
    }
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'l':
            conf.listen = optarg;
            break;
        case 'd':
            conf.data = optarg;
            break;
        case 'n':
            conf.drives = atoi(optarg);
            break;
        case 'e':
            if (sscanf(optarg, "%d+%d", &conf.k, &conf.m) != 2) {
                fprintf(stderr, "warmlaked: --ec wants K+M\n");
                return 2;
            }
            break;
        case 'c':
            conf.capacity = parse_size(optarg);
            break;
        case 's':
            conf.segment = parse_size(optarg);
            break;
        case 'i':
            conf.iu = (uint32_t)parse_size(optarg);
            break;
        case 'w':
            conf.dwpd = atof(optarg);
            break;
        case 'b':
            conf.block = parse_size(optarg);
            break;
        case 'W':
            conf.workers = atoi(optarg);
            break;
        case 'C':
            conf.max_conns = atoi(optarg);
            break;
        case 'L':
            if ((log_level = log_level_parse(optarg)) < 0) {
                fprintf(stderr, "warmlaked: bad --log-level\n");
                return 2;
            }
            break;
        case 'D':
            conf.domain = optarg;
            break;
        case 'H':
            conf.max_header = parse_size(optarg);
            break;
        case 'T':
            conf.header_timeout_s = strtoull(optarg, NULL, 10);
            break;
        case 'I':
            conf.idle_timeout_s = strtoull(optarg, NULL, 10);
            break;
        case 'f':
            break; /* read above */
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    const char *listen = conf.listen, *data = conf.data;
    int drives = conf.drives, k = conf.k, m = conf.m, workers = conf.workers,
        max_conns = conf.max_conns;
    uint64_t capacity = conf.capacity, segment = conf.segment, block = conf.block;
    uint32_t iu = conf.iu;
    double dwpd = conf.dwpd;
    if (k + m != drives || k < 1 || m < 0 || k + m > OBJ_MAX_SHARDS || capacity == 0 ||
        block == 0 || block % 64) {
        fprintf(stderr,
                "warmlaked: need K+M = drives (%d+%d vs %d), K+M <= %d, block a "
                "multiple of 64\n",
                k, m, drives, OBJ_MAX_SHARDS);
        return 2;
    }
    if (!segment) segment = capacity >= (64ull << 30) ? 256u << 20 : 64u << 20;

    /* Users: the environment, else a generated pair. */
    s3_user_t users[64];
    int nusers = 0;
    char gen_ak[21], gen_sk[41];
    for (int i = 0; i < conf.nusers; i++) {
        if (!conf.users[i].access_key || !conf.users[i].secret) {
            fprintf(stderr, "warmlaked: a [user.*] section needs access_key and secret_key\n");
            return 2;
        }
        users[nusers++] = conf.users[i];
    }
    const char *ak = getenv("WARMLAKE_ACCESS_KEY"), *sk = getenv("WARMLAKE_SECRET_KEY");
    if (ak && sk && *ak && *sk) {
        users[nusers++] = (s3_user_t){ak, sk};
    }
    char *more = getenv("WARMLAKE_USERS") ? xstrdup(getenv("WARMLAKE_USERS")) : NULL;
    for (char *save = NULL, *tok = more ? strtok_r(more, ",", &save) : NULL; tok && nusers < 64;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (colon) {
            *colon = 0;
            users[nusers++] = (s3_user_t){tok, colon + 1};
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
    mkdir(data, 0755);
    drive_t *dv[OBJ_MAX_SHARDS] = {0};
    shard_store_t st[OBJ_MAX_SHARDS];
    int rc = 0;
    for (int i = 0; i < drives; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/drive%d", data, i);
        drive_cfg_t c = {0};
        c.path = conf.drive_path[i] ? conf.drive_path[i] : path;
        c.capacity = conf.drive_cap[i] ? conf.drive_cap[i] : capacity;
        c.segment_size = segment;
        c.iu = conf.drive_iu[i] ? conf.drive_iu[i] : iu;
        c.dwpd = conf.drive_dwpd[i] ? conf.drive_dwpd[i] : dwpd;
        c.compaction = 1;
        if ((rc = drive_open(&c, &dv[i])) != 0) {
            fprintf(stderr, "warmlaked: cannot open drive %s: %s\n", path, err_str(rc));
            goto out;
        }
        st[i] = shard_store_local(dv[i]);
    }
    int err;
    obj_set_t *set = obj_set_new(st, k, m, (uint32_t)block, &err);
    if (!set) {
        fprintf(stderr, "warmlaked: bad erasure configuration: %s\n", err_str(err));
        rc = err;
        goto out;
    }
    s3_cfg_t s3 = {set, users, nusers, "us-east-1", 900, conf.domain};
    http_cfg_t hc = {0};
    hc.listen = listen;
    hc.workers = workers;
    hc.max_conns = max_conns;
    hc.max_header = conf.max_header;
    hc.header_ms = conf.header_timeout_s * 1000;
    hc.idle_ms = conf.idle_timeout_s * 1000;
    hc.handler = s3_handle;
    hc.arg = &s3;
    if ((rc = http_server_new(&hc, &server)) != 0) {
        fprintf(stderr, "warmlaked: cannot listen on %s\n", listen);
        obj_set_free(set);
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *colon = strrchr(listen, ':');
    printf("warmlaked: serving S3 on http://%.*s:%d with %d drives under %s, EC %d+%d\n",
           (int)(colon - listen), listen, http_server_port(server), drives, data, k, m);
    printf("warmlaked: ready port=%d\n", http_server_port(server));
    fflush(stdout);
    http_server_run(server);
    http_server_free(server);
    server = NULL;
    obj_set_free(set);
    log_info("event=shutdown");
out:
    for (int i = 0; i < drives; i++)
        drive_close(dv[i]);
    free(more);
    for (int i = 0; i < conf.nstrings; i++)
        free(conf.strings[i]);
    return rc ? 1 : 0;
}
