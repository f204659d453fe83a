/*
 * config: the `wl` command's endpoint, credentials and region from options,
 * environment and aws-style files (config.h has the order).
 */
#include "client/cli/config.h"

#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *want; /* section name wanted */
    cli_config_t *cfg;
    char ak[256], sk[256], region[64], endpoint[4096];
} ini_ctx_t;

static void set(char *dst, size_t cap, const char *v)
{
    if (!dst[0] && v && *v) snprintf(dst, cap, "%s", v);
}

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx_t *x = user;
    if (strcmp(section, x->want) != 0) return 1;
    if (!strcmp(name, "aws_access_key_id")) set(x->ak, sizeof(x->ak), value);
    if (!strcmp(name, "aws_secret_access_key")) set(x->sk, sizeof(x->sk), value);
    if (!strcmp(name, "region")) set(x->region, sizeof(x->region), value);
    if (!strcmp(name, "endpoint_url")) set(x->endpoint, sizeof(x->endpoint), value);
    return 1;
}

/* The file named by env, else ~/.aws/name. */
static void file_path(const char *env, const char *name, char *out, size_t cap)
{
    const char *e = getenv(env), *home = getenv("HOME");
    if (e && *e)
        snprintf(out, cap, "%s", e);
    else
        snprintf(out, cap, "%s/.aws/%s", home ? home : ".", name);
}

int cli_config_load(const char *endpoint, const char *profile, const char *region,
                    cli_config_t *cfg, char *err, size_t errcap)
{
    memset(cfg, 0, sizeof(*cfg));
    set(cfg->profile, sizeof(cfg->profile), profile);
    set(cfg->profile, sizeof(cfg->profile), getenv("AWS_PROFILE"));
    set(cfg->profile, sizeof(cfg->profile), "default");

    set(cfg->endpoints, sizeof(cfg->endpoints), endpoint);
    set(cfg->endpoints, sizeof(cfg->endpoints), getenv("WARMLAKE_ENDPOINTS"));
    set(cfg->endpoints, sizeof(cfg->endpoints), getenv("AWS_ENDPOINT_URL_S3"));
    set(cfg->endpoints, sizeof(cfg->endpoints), getenv("AWS_ENDPOINT_URL"));
    set(cfg->region, sizeof(cfg->region), region);
    set(cfg->region, sizeof(cfg->region), getenv("AWS_REGION"));
    set(cfg->region, sizeof(cfg->region), getenv("AWS_DEFAULT_REGION"));
    /* Keys come as a pair: a key from the environment never meets a secret from a file. */
    const char *eak = getenv("AWS_ACCESS_KEY_ID"), *esk = getenv("AWS_SECRET_ACCESS_KEY");
    if (eak && *eak && esk && *esk) {
        set(cfg->access_key, sizeof(cfg->access_key), eak);
        set(cfg->secret_key, sizeof(cfg->secret_key), esk);
    }

    char path[4096], section[160];
    ini_ctx_t cx = {.want = cfg->profile, .cfg = cfg};
    file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials", path, sizeof(path));
    (void)ini_parse(path, on_ini, &cx); /* a missing file is no error */
    ini_ctx_t fx = {.cfg = cfg};
    if (!strcmp(cfg->profile, "default"))
        snprintf(section, sizeof(section), "default");
    else
        snprintf(section, sizeof(section), "profile %s", cfg->profile);
    fx.want = section;
    file_path("AWS_CONFIG_FILE", "config", path, sizeof(path));
    (void)ini_parse(path, on_ini, &fx);
    if (!cfg->access_key[0] && cx.ak[0] && cx.sk[0]) {
        set(cfg->access_key, sizeof(cfg->access_key), cx.ak);
        set(cfg->secret_key, sizeof(cfg->secret_key), cx.sk);
    }
    if (!cfg->access_key[0] && fx.ak[0] && fx.sk[0]) {
        set(cfg->access_key, sizeof(cfg->access_key), fx.ak);
        set(cfg->secret_key, sizeof(cfg->secret_key), fx.sk);
    }
    set(cfg->region, sizeof(cfg->region), fx.region);
    set(cfg->region, sizeof(cfg->region), cx.region);
    set(cfg->region, sizeof(cfg->region), "us-east-1");
    set(cfg->endpoints, sizeof(cfg->endpoints), fx.endpoint);
    set(cfg->endpoints, sizeof(cfg->endpoints), cx.endpoint);
    const char *nb = getenv("WARMLAKE_NO_BATCH");
    cfg->no_batch = nb && *nb && strcmp(nb, "0") != 0;
    if (!cfg->endpoints[0]) {
        snprintf(err, errcap,
                 "no endpoint: give --endpoint, WARMLAKE_ENDPOINTS, AWS_ENDPOINT_URL or "
                 "endpoint_url in the profile's config");
        return -1;
    }
    return 0;
}
