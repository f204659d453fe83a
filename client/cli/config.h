/*
 * config: where the `wl` command finds its endpoint and credentials, in the
 * manner of the aws CLI. In order, the first that gives a value wins:
 *   1. command-line options (--endpoint, --profile, --region)
 *   2. the environment: WARMLAKE_ENDPOINTS (comma-separated node list),
 *      AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
 *      AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_DEFAULT_REGION, AWS_PROFILE,
 *      WARMLAKE_NO_BATCH=1 (never try batch GET: a plain S3 server)
 *   3. the shared files: AWS_SHARED_CREDENTIALS_FILE (default
 *      ~/.aws/credentials: [profile] aws_access_key_id,
 *      aws_secret_access_key) and AWS_CONFIG_FILE (default ~/.aws/config:
 *      [default] or [profile NAME] region, endpoint_url).
 * No credentials anywhere: requests go unsigned.
 */
#ifndef WL_CLI_CONFIG_H
#define WL_CLI_CONFIG_H

#include <stddef.h>

typedef struct {
    char endpoints[4096];
    char access_key[256];
    char secret_key[256];
    char region[64];
    char profile[128];
    int no_batch;
} cli_config_t;

/*
 * Fill cfg from the options given (each may be NULL), the environment and
 * the files. 0, or -1 with a message in err (no endpoint found).
 */
int cli_config_load(const char *endpoint, const char *profile, const char *region,
                    cli_config_t *cfg, char *err, size_t errcap);

#endif
