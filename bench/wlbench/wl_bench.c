/*
 * wl-bench: an S3 load generator. One thread per client, each with its own
 * keep-alive connection (client/s3c), SigV4-signed requests with
 * UNSIGNED-PAYLOAD (so the client spends no time hashing bodies), bodies
 * generated and verified from a per-key seed (bench/wlbench/gen), latencies
 * into per-thread histograms merged at the end (bench/wlbench/hist).
 *
 *   wl-bench WORKLOAD [options]      put get mixed stat delete list multipart
 *   wl-bench gen --dir DIR [options] write the objects as files (for nginx)
 *   wl-bench compare A.json B.json   change per figure between two runs
 *
 * This file is the command line, setup and main; load.c the clients,
 * report.c the results (map in wlb.h).
 */
#include "bench/wlbench/gen.h"
#include "bench/wlbench/wlb.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- gen: the objects as files, for a plain HTTP server's document root ---- */

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    return 0;
}

static int gen_files(void)
{
    char *buf = malloc(1u << 20);
    for (uint64_t n = 0; n < cfg.objects; n++) {
        char key[512], file[2048];
        gen_key(cfg.prefix, n, key, sizeof(key));
        snprintf(file, sizeof(file), "%s/%s/%s", cfg.dir, cfg.bucket, key);
        if (mkdirs(file) != 0) goto fail;
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) goto fail;
        uint64_t size = key_size(n), seed = gen_seed(cfg.seed, key, size);
        for (uint64_t off = 0; off < size;) {
            size_t len = size - off < (1u << 20) ? (size_t)(size - off) : 1u << 20;
            gen_fill(seed, off, buf, len);
            if (write(fd, buf, len) != (ssize_t)len) {
                close(fd);
                goto fail;
            }
            off += len;
        }
        if (close(fd) != 0) goto fail;
    }
    free(buf);
    printf("wl-bench gen: %llu objects under %s/%s/%s\n", (unsigned long long)cfg.objects, cfg.dir,
           cfg.bucket, cfg.prefix);
    return 0;
fail:
    fprintf(stderr, "wl-bench gen: %s\n", strerror(errno));
    free(buf);
    return 1;
}

/* ---- setup ---- */

static int ensure_bucket(s3c_t *c)
{
    char path[512];
    snprintf(path, sizeof(path), "/%s", cfg.bucket);
    s3c_req_t req = {.method = "PUT", .path = path};
    s3c_resp_t r;
    int rc = s3c_do(c, &req, &r);
    if (rc == 0 && (r.status == 200 || !strcmp(r.code, "BucketAlreadyOwnedByYou"))) return 0;
    fprintf(stderr, "wl-bench: cannot create bucket %s: %s\n", cfg.bucket,
            rc          ? err_str(rc)
            : r.code[0] ? r.code
                        : "unexpected status");
    return -1;
}

static void cleanup_objects(void)
{
    uint64_t n = cfg.objects > max_key_used ? cfg.objects : max_key_used;
    for (uint64_t i = 0; i < n; i++) {
        char key[512], path[1400];
        object_path(i, key, sizeof(key), path, sizeof(path));
        s3c_req_t req = {.method = "DELETE", .path = path};
        s3c_resp_t r;
        if (s3c_do(clients[0].c, &req, &r) != 0) break;
    }
}

/* wl-bench stats: a warmlake node's engine counters (GET /_warmlake/stats) to stdout. */
static int node_stats(void)
{
    s3c_cfg_t cc = {.endpoint = cfg.endpoint,
                    .access_key = cfg.access_key,
                    .secret = cfg.secret,
                    .region = cfg.region};
    s3c_t *c = s3c_new(&cc);
    if (!c) return 2;
    s3c_req_t req = {.method = "GET", .path = "/_warmlake/stats"};
    s3c_resp_t r;
    int rc = s3c_do(c, &req, &r);
    if (rc == 0 && r.status == 200)
        fwrite(r.body, 1, r.body_len, stdout);
    else
        fprintf(stderr, "wl-bench stats: %s\n", rc ? err_str(rc) : r.code[0] ? r.code : "failed");
    int ok = rc == 0 && r.status == 200;
    s3c_free(c);
    return ok ? 0 : 3;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: wl-bench WORKLOAD [options]   WORKLOAD: put get mixed stat delete list multipart\n"
        "       wl-bench gen --dir DIR [--bucket B --prefix P --objects N --size DIST --seed S]\n"
        "       wl-bench compare A.json B.json\n"
        "       wl-bench stats [--endpoint URL ...]   a warmlake node's drive counters as JSON\n"
        "\n"
        "  --endpoint URL        http://host:port (default http://127.0.0.1:9000)\n"
        "  --access-key K        default $WARMLAKE_ACCESS_KEY or $AWS_ACCESS_KEY_ID\n"
        "  --secret-key S        default $WARMLAKE_SECRET_KEY or $AWS_SECRET_ACCESS_KEY\n"
        "  --region R            SigV4 region (default us-east-1)\n"
        "  --plain               unsigned GETs of /BUCKET/KEY from any HTTP server (files from "
        "'gen')\n"
        "  --bucket B            default wl-bench (created when missing)\n"
        "  --prefix P            key prefix (default wlb/)\n"
        "  --size DIST           object size or distribution, e.g. 1MiB or "
        "4KiB:70,1MiB:25,64MiB:5\n"
        "  --clients N           concurrent clients, one connection each (default 8)\n"
        "  --duration SECS       measured time (default 10; always bounded)\n"
        "  --ops N               stop after N operations (within --duration)\n"
        "  --objects N           key space; put: 0 = a new key per PUT (default 1000, list 10000)\n"
        "  --order random|seq    key order (default random)\n"
        "  --mix OP:W,...        mixed ratios over get put stat delete (default get:90,put:10)\n"
        "  --range SIZE[@ALIGN]  ranged GETs of SIZE bytes at ALIGN-aligned offsets\n"
        "  --part-size SIZE      multipart part size (default 5MiB)\n"
        "  --no-prepare          GET/list/delete objects already there (same seed, prefix, sizes)\n"
        "  --no-verify           do not check GET bodies\n"
        "  --seed N              content seed (default 1)\n"
        "  --cleanup             delete the objects afterwards\n"
        "  --json FILE           write the results as JSON\n"
        "  --quiet               no progress line (also off when stderr is not a terminal)\n"
        "  --quick               a smoke run: 1 s unless --duration, at most 100 objects\n"
        "Exit status: 0 ok, 1 content mismatches, 2 usage, 3 no operation succeeded.\n");
}

static int parse_mix(const char *s)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    memset(cfg.mix, 0, sizeof(cfg.mix));
    cfg.mix_total = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *c = strchr(t, ':');
        if (!c) return -1;
        *c = 0;
        int op = -1;
        for (int i = 0; i < OP_N; i++)
            if (!strcmp(t, op_name[i])) op = i;
        if (op != OP_GET && op != OP_PUT && op != OP_STAT && op != OP_DELETE) return -1;
        char *end;
        unsigned long w = strtoul(c + 1, &end, 10);
        if (*end || end == c + 1) return -1;
        cfg.mix[op] = w;
        cfg.mix_total += w;
    }
    return cfg.mix_total ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "compare")) {
        if (argc != 4) {
            usage(stderr);
            return 2;
        }
        return report_compare(argv[2], argv[3]);
    }
    cfg.workload = argv[1];
    static const char *const workloads[] = {"put",  "get",       "mixed", "stat", "delete",
                                            "list", "multipart", "gen",   "stats"};
    int known = 0;
    for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
        known |= !strcmp(cfg.workload, workloads[i]);
    if (!known) {
        fprintf(stderr, "wl-bench: unknown workload %s\n", cfg.workload);
        usage(stderr);
        return 2;
    }
    cfg.endpoint = "http://127.0.0.1:9000";
    cfg.access_key =
        getenv("WARMLAKE_ACCESS_KEY") ? getenv("WARMLAKE_ACCESS_KEY") : getenv("AWS_ACCESS_KEY_ID");
    cfg.secret = getenv("WARMLAKE_SECRET_KEY") ? getenv("WARMLAKE_SECRET_KEY")
                                               : getenv("AWS_SECRET_ACCESS_KEY");
    cfg.region = "us-east-1";
    cfg.bucket = "wl-bench";
    cfg.prefix = "wlb/";
    cfg.size_spec = "1MiB";
    cfg.clients = 8;
    cfg.duration = -1;
    cfg.objects = UINT64_MAX;
    cfg.random_order = 1;
    cfg.part_size = 5u << 20;
    cfg.prepare = 1;
    cfg.verify = 1;
    cfg.seed = 1;
    parse_mix("get:90,put:10");
    enum {
        O_EP = 256,
        O_AK,
        O_SK,
        O_REGION,
        O_PLAIN,
        O_BUCKET,
        O_PREFIX,
        O_SIZE,
        O_CLIENTS,
        O_DUR,
        O_OPS,
        O_OBJ,
        O_ORDER,
        O_MIX,
        O_RANGE,
        O_PART,
        O_NOPREP,
        O_NOVER,
        O_SEED,
        O_CLEAN,
        O_JSON,
        O_QUIET,
        O_DIR,
        O_QUICK
    };
    static const struct option opts[] = {{"endpoint", 1, 0, O_EP},
                                         {"access-key", 1, 0, O_AK},
                                         {"secret-key", 1, 0, O_SK},
                                         {"region", 1, 0, O_REGION},
                                         {"plain", 0, 0, O_PLAIN},
                                         {"bucket", 1, 0, O_BUCKET},
                                         {"prefix", 1, 0, O_PREFIX},
                                         {"size", 1, 0, O_SIZE},
                                         {"clients", 1, 0, O_CLIENTS},
                                         {"duration", 1, 0, O_DUR},
                                         {"ops", 1, 0, O_OPS},
                                         {"objects", 1, 0, O_OBJ},
                                         {"order", 1, 0, O_ORDER},
                                         {"mix", 1, 0, O_MIX},
                                         {"range", 1, 0, O_RANGE},
                                         {"part-size", 1, 0, O_PART},
                                         {"no-prepare", 0, 0, O_NOPREP},
                                         {"no-verify", 0, 0, O_NOVER},
                                         {"seed", 1, 0, O_SEED},
                                         {"cleanup", 0, 0, O_CLEAN},
                                         {"json", 1, 0, O_JSON},
                                         {"quiet", 0, 0, O_QUIET},
                                         {"dir", 1, 0, O_DIR},
                                         {"quick", 0, 0, O_QUICK},
                                         {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 2;
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (o) {
        case O_EP:
            cfg.endpoint = optarg;
            break;
        case O_AK:
            cfg.access_key = optarg;
            break;
        case O_SK:
            cfg.secret = optarg;
            break;
        case O_REGION:
            cfg.region = optarg;
            break;
        case O_PLAIN:
            cfg.plain = 1;
            break;
        case O_BUCKET:
            cfg.bucket = optarg;
            break;
        case O_PREFIX:
            cfg.prefix = optarg;
            break;
        case O_SIZE:
            cfg.size_spec = optarg;
            break;
        case O_CLIENTS:
            cfg.clients = atoi(optarg);
            break;
        case O_DUR:
            cfg.duration = strtod(optarg, &end);
            break;
        case O_OPS:
            cfg.ops = strtoull(optarg, &end, 10);
            break;
        case O_OBJ:
            cfg.objects = strtoull(optarg, &end, 10);
            break;
        case O_ORDER:
            if (strcmp(optarg, "random") && strcmp(optarg, "seq")) goto bad;
            cfg.random_order = !strcmp(optarg, "random");
            break;
        case O_MIX:
            if (parse_mix(optarg) != 0) goto bad;
            break;
        case O_RANGE: {
            char tmp[128];
            snprintf(tmp, sizeof(tmp), "%s", optarg);
            char *at = strchr(tmp, '@');
            if (at) *at++ = 0;
            if (size_parse(tmp, &cfg.range_size) != 0 || cfg.range_size == 0) goto bad;
            if (at && (size_parse(at, &cfg.range_align) != 0 || cfg.range_align == 0)) goto bad;
            break;
        }
        case O_PART:
            if (size_parse(optarg, &cfg.part_size) != 0 || cfg.part_size == 0) goto bad;
            break;
        case O_NOPREP:
            cfg.prepare = 0;
            break;
        case O_NOVER:
            cfg.verify = 0;
            break;
        case O_SEED:
            cfg.seed = strtoull(optarg, &end, 10);
            break;
        case O_CLEAN:
            cfg.cleanup = 1;
            break;
        case O_JSON:
            cfg.json_path = optarg;
            break;
        case O_QUIET:
            cfg.quiet = 1;
            break;
        case O_QUICK:
            cfg.quick = 1;
            break;
        case O_DIR:
            cfg.dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            goto bad;
        }
        if (end && *end) goto bad;
    }
    if (optind != argc || size_dist_parse(cfg.size_spec, &cfg.sizes) != 0 || cfg.clients < 1 ||
        strlen(cfg.prefix) > 400 || strlen(cfg.bucket) > 63 || cfg.clients > MAX_CLIENTS)
        goto bad;
    const char *w = cfg.workload;
    if (cfg.objects == UINT64_MAX)
        cfg.objects = !strcmp(w, "put") || !strcmp(w, "multipart") ? 0
                      : !strcmp(w, "list")                         ? 10000
                                                                   : 1000;
    if (!strcmp(w, "stats")) return node_stats();
    if (!strcmp(w, "gen")) {
        if (!cfg.dir) goto bad;
        return gen_files();
    }
    if (cfg.quick && cfg.objects > 100) cfg.objects = 100; /* a smoke run: small and short */
    if (cfg.duration < 0) cfg.duration = cfg.quick ? 1 : cfg.ops ? 3600 : 10;
    if (cfg.duration <= 0 || cfg.duration > 86400) goto bad;
    int reads = !strcmp(w, "get") || !strcmp(w, "stat") || !strcmp(w, "list") ||
                !strcmp(w, "delete") || !strcmp(w, "mixed");
    if (reads && cfg.objects == 0) goto bad;
    if (cfg.plain && strcmp(w, "get") && strcmp(w, "stat")) {
        fprintf(stderr, "wl-bench: --plain serves get and stat only\n");
        return 2;
    }
    if (!cfg.plain && (!cfg.access_key || !cfg.secret)) {
        fprintf(stderr,
                "wl-bench: no credentials (--access-key/--secret-key or WARMLAKE_ACCESS_KEY/"
                "WARMLAKE_SECRET_KEY), or --plain for an unsigned HTTP server\n");
        return 2;
    }
    if (!strcmp(w, "mixed") && cfg.mix[OP_DELETE]) kstate = calloc(cfg.objects, sizeof(*kstate));

    clients = calloc((size_t)cfg.clients, sizeof(client_t));
    s3c_cfg_t cc = {.endpoint = cfg.endpoint, .region = cfg.region, .max_body_keep = 64u << 20};
    if (!cfg.plain) {
        cc.access_key = cfg.access_key;
        cc.secret = cfg.secret;
    }
    for (int i = 0; i < cfg.clients; i++) {
        if (!(clients[i].c = s3c_new(&cc))) return 2;
        clients[i].rng = cfg.seed * 1000003 + (uint64_t)i * 7919;
    }
    if (!cfg.plain && ensure_bucket(clients[0].c) != 0) return 3;

    if (reads && cfg.prepare && !cfg.plain) {
        phase_prepare = 1;
        clients_reset();
        atomic_store(&next_key, 0);
        double s = run_clients();
        total_t t;
        totals_merge(&t);
        if (t.errors[OP_PUT]) {
            fprintf(stderr, "wl-bench: prepare: %llu of %llu PUTs failed (%s)\n",
                    (unsigned long long)t.errors[OP_PUT], (unsigned long long)cfg.objects,
                    t.nerr ? t.err[0].name : "?");
            return 3;
        }
        if (!cfg.quiet)
            printf("prepared %llu objects in %.1f s\n", (unsigned long long)cfg.objects, s);
        phase_prepare = 0;
    }

    clients_reset();
    atomic_store(&next_key, 0);
    total_t t;
    double secs = run_clients();
    totals_merge(&t);
    t.secs = secs;
    max_key_used = atomic_load(&next_key);
    report_table(&t);
    if (cfg.json_path && report_json(&t) != 0) return 2;
    if (cfg.cleanup && !cfg.plain) cleanup_objects();
    uint64_t good = 0;
    for (int i = 0; i < OP_N; i++)
        good += t.ops[i];
    for (int i = 0; i < cfg.clients; i++)
        s3c_free(clients[i].c);
    free(clients);
    free(kstate);
    if (t.mismatches) return 1;
    return good ? 0 : 3;
bad:
    fprintf(stderr, "wl-bench: bad arguments (see wl-bench --help)\n");
    return 2;
}
