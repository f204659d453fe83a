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

int main(int argc, char **argv)
{
    const char *listen = "127.0.0.1:9000", *data = "./data";
    int drives = 6, k = 4, m = 2, workers = 32, max_conns = 1024;
    uint64_t capacity = 16ull << 30, segment = 0, block = 1u << 20;
    uint32_t iu = 0;
    double dwpd = 0;
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
        {"help", 0, 0, 'h'},
        {0, 0, 0, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'l':
            listen = optarg;
            break;
        case 'd':
            data = optarg;
            break;
        case 'n':
            drives = atoi(optarg);
            break;
        case 'e':
            if (sscanf(optarg, "%d+%d", &k, &m) != 2) {
                fprintf(stderr, "warmlaked: --ec wants K+M\n");
                return 2;
            }
            break;
        case 'c':
            capacity = parse_size(optarg);
            break;
        case 's':
            segment = parse_size(optarg);
            break;
        case 'i':
            iu = (uint32_t)parse_size(optarg);
            break;
        case 'w':
            dwpd = atof(optarg);
            break;
        case 'b':
            block = parse_size(optarg);
            break;
        case 'W':
            workers = atoi(optarg);
            break;
        case 'C':
            max_conns = atoi(optarg);
            break;
        case 'L':
            if ((log_level = log_level_parse(optarg)) < 0) {
                fprintf(stderr, "warmlaked: bad --log-level\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
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
        c.path = path;
        c.capacity = capacity;
        c.segment_size = segment;
        c.iu = iu;
        c.dwpd = dwpd;
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
    s3_cfg_t s3 = {set, users, nusers, "us-east-1", 900};
    http_cfg_t hc = {0};
    hc.listen = listen;
    hc.workers = workers;
    hc.max_conns = max_conns;
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
    return rc ? 1 : 0;
}
