/*
 * wl: the warmlake command line, over libwarmlake.
 *
 *   wl ls [wl://BUCKET[/PREFIX]] [-r]     buckets, or keys (rolled up at '/' unless -r)
 *   wl cp [-r] SRC DST                    upload, download, or copy server-side (wl:// to wl://)
 *   wl cat wl://BUCKET/KEY                object to stdout (ranged parts read ahead)
 *   wl rm [-r] wl://BUCKET/KEY            delete a key, or every key under a prefix
 *   wl stat wl://BUCKET/KEY               size, ETag, date, type
 *   wl mb wl://BUCKET / rb [--force]      make / remove a bucket (--force: empty it first)
 *   wl sync SRC DST                       copy what is missing or differs (size, or newer)
 *   wl du wl://BUCKET[/PREFIX]            bytes and objects under a prefix
 *   wl presign wl://BUCKET/KEY [--expires S] [--method M]
 *
 * Options: --endpoint URL[,URL...] --profile P --region R --json --no-batch
 * -j/--jobs N (files at once, default 4) --part-size MiB --quiet --stats
 * --verify (downloads into memory checked against MD5 ETags).
 * Configuration as the aws CLI (config.h). --json prints one JSON object
 * per line for every listed object or transfer. Downloads of many small
 * objects go through batch GET (falling back to single GETs on servers
 * without it, or always with --no-batch / WARMLAKE_NO_BATCH=1).
 * Exit status: 0, 1 when anything failed, 2 for usage errors.
 */
#include "client/cli/cli_int.h"
#include "client/cli/config.h"
#include "client/cli/xfer.h"
#include "client/include/warmlake/wl.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cli_opt_t cli__opt = {.jobs = 4, .expires = 3600, .method = "GET"};
wl_client_t *cli__cl;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: wl [options] COMMAND ARGS\n"
        "  ls [wl://BUCKET[/PREFIX]]   cp [-r] SRC DST   cat wl://B/K   rm [-r] wl://B/K\n"
        "  stat wl://B/K   mb wl://B   rb [--force] wl://B   sync SRC DST   du wl://B[/P]\n"
        "  presign [--expires S] [--method M] wl://B/K\n"
        "options: --endpoint URL[,URL..] --profile P --region R --json --no-batch\n"
        "  -r/--recursive -j/--jobs N --part-size MiB --content-type T -q/--quiet --stats "
        "--verify\n"
        "environment: AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL AWS_PROFILE\n"
        "  AWS_REGION WARMLAKE_ENDPOINTS WARMLAKE_NO_BATCH; files ~/.aws/{credentials,config}\n");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"endpoint", required_argument, 0, 'e'},
        {"profile", required_argument, 0, 'p'},
        {"region", required_argument, 0, 'R'},
        {"json", no_argument, 0, 'J'},
        {"no-batch", no_argument, 0, 'B'},
        {"recursive", no_argument, 0, 'r'},
        {"jobs", required_argument, 0, 'j'},
        {"part-size", required_argument, 0, 'P'},
        {"content-type", required_argument, 0, 'T'},
        {"expires", required_argument, 0, 'x'},
        {"method", required_argument, 0, 'm'},
        {"force", no_argument, 0, 'f'},
        {"quiet", no_argument, 0, 'q'},
        {"stats", no_argument, 0, 'S'},
        {"verify", no_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *endpoint = NULL, *profile = NULL, *region = NULL;
    for (int ch; (ch = getopt_long(argc, argv, "rj:qfh", longs, NULL)) != -1;) {
        switch (ch) {
        case 'e':
            endpoint = optarg;
            break;
        case 'p':
            profile = optarg;
            break;
        case 'R':
            region = optarg;
            break;
        case 'J':
            cli__opt.json = 1;
            break;
        case 'B':
            cli__opt.no_batch = 1;
            break;
        case 'r':
            cli__opt.recursive = 1;
            break;
        case 'j':
            cli__opt.jobs = atoi(optarg);
            if (cli__opt.jobs < 1 || cli__opt.jobs > 64) return cli__usage_err("--jobs: 1 to 64");
            break;
        case 'P':
            cli__opt.part_size = strtoull(optarg, NULL, 10) << 20;
            if (cli__opt.part_size < (5u << 20))
                return cli__usage_err("--part-size: at least 5 (MiB)");
            break;
        case 'T':
            cli__opt.content_type = optarg;
            break;
        case 'x':
            cli__opt.expires = atol(optarg);
            break;
        case 'm':
            cli__opt.method = optarg;
            break;
        case 'f':
            cli__opt.force = 1;
            break;
        case 'q':
            cli__opt.quiet = 1;
            break;
        case 'S':
            cli__opt.stats = 1;
            break;
        case 'V':
            cli__opt.verify = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    int nargs = argc - optind - 1;
    char **args = argv + optind + 1;

    cli_config_t cc;
    char err[256];
    if (cli_config_load(endpoint, profile, region, &cc, err, sizeof(err)) != 0)
        return cli__usage_err("%s", err);
    wl_config_t wc = {.endpoints = cc.endpoints,
                      .access_key = cc.access_key[0] ? cc.access_key : NULL,
                      .secret_key = cc.secret_key[0] ? cc.secret_key : NULL,
                      .region = cc.region,
                      .part_size = cli__opt.part_size,
                      .no_batch = cli__opt.no_batch || cc.no_batch,
                      .conns_per_endpoint = 4 * cli__opt.jobs + 8,
                      .threads = 8,
                      .on_bytes = xfer_bytes,
                      .verify_get = cli__opt.verify};
    if (wl_client_new(&wc, &cli__cl) != WL_OK) return cli__fail("client");
    int rc;
    if (!strcmp(cmd, "ls"))
        rc = cli__cmd_ls(nargs, args);
    else if (!strcmp(cmd, "cp"))
        rc = cli__cmd_cp(nargs, args);
    else if (!strcmp(cmd, "cat"))
        rc = cli__cmd_cat(nargs, args);
    else if (!strcmp(cmd, "rm"))
        rc = cli__cmd_rm(nargs, args);
    else if (!strcmp(cmd, "stat"))
        rc = cli__cmd_stat(nargs, args);
    else if (!strcmp(cmd, "mb"))
        rc = cli__cmd_mb(nargs, args, 1);
    else if (!strcmp(cmd, "rb"))
        rc = cli__cmd_mb(nargs, args, 0);
    else if (!strcmp(cmd, "sync"))
        rc = cli__cmd_sync(nargs, args);
    else if (!strcmp(cmd, "du"))
        rc = cli__cmd_du(nargs, args);
    else if (!strcmp(cmd, "presign"))
        rc = cli__cmd_presign(nargs, args);
    else
        rc = cli__usage_err("unknown command %s (wl --help)", cmd);
    if (cli__opt.stats) {
        wl_stats_t s;
        wl_client_stats(cli__cl, &s);
        fprintf(stderr,
                "{\"requests\":%llu,\"retries\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
                "\"batch_requests\":%llu,\"batch_entries\":%llu,\"single_gets\":%llu,"
                "\"batch_unsupported\":%d}\n",
                (unsigned long long)s.requests, (unsigned long long)s.retries,
                (unsigned long long)s.bytes_in, (unsigned long long)s.bytes_out,
                (unsigned long long)s.batch_requests, (unsigned long long)s.batch_entries,
                (unsigned long long)s.single_gets, s.batch_unsupported);
    }
    fflush(stdout);
    wl_client_free(cli__cl);
    return rc;
}
