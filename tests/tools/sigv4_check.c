/*
 * sigv4_check: verify one captured request with warmlake's SigV4 and
 * aws-chunked code, for the integration tests that compare against botocore.
 *
 * stdin:  secret, method, raw path, raw query, x-amz-content-sha256 value,
 *         header count N, then N lines "name: value" (one line each)
 * argv[1] (optional): file with the request body (aws-chunked or plain)
 * stdout: "OK" or "DENIED", then for bodies "DECODED <bytes> <sha256 hex>"
 *         and one "TRAILER name value" line per trailing header.
 */
#include "common/err.h"
#include "s3/chunked.h"
#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_LINES 256

static char *lines[HTTP_LINES];
static int nlines;

static char *line(void)
{
    char buf[16384];
    if (!fgets(buf, sizeof(buf), stdin)) {
        fprintf(stderr, "sigv4_check: short input\n");
        exit(2);
    }
    buf[strcspn(buf, "\r\n")] = 0;
    if (nlines == HTTP_LINES) exit(2);
    return lines[nlines++] = strdup(buf);
}

static int sink(void *arg, const uint8_t *p, size_t n)
{
    EVP_DigestUpdate(arg, p, n);
    return 0;
}

static void release(void)
{
    for (int i = 0; i < nlines; i++)
        free(lines[i]);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    atexit(release);
    char *secret = line(), *method = line(), *path = line(), *query = line(), *payload = line();
    int n = atoi(line());
    sigv4_header_t *h = calloc((size_t)n + 1, sizeof(*h));
    const char *authz = NULL, *amz_date = NULL, *trailer = NULL;
    for (int i = 0; i < n; i++) {
        char *l = line(), *colon = strchr(l, ':');
        if (!colon) return 2;
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        h[i] = (sigv4_header_t){l, (size_t)(colon - l), v, strlen(v)};
        *colon = 0;
        if (strcasecmp(l, "authorization") == 0) authz = v;
        if (strcasecmp(l, "x-amz-date") == 0) amz_date = v;
        if (strcasecmp(l, "x-amz-trailer") == 0) trailer = v;
    }
    sigv4_auth_t a;
    int rc = authz ? sigv4_parse_header(authz, strlen(authz), &a)
                   : sigv4_parse_query(query, strlen(query), &a);
    if (rc) {
        printf("PARSE_ERROR %s\n", err_name(rc));
        return 1;
    }
    if (!a.presigned) {
        if (!amz_date || strlen(amz_date) != 16) return 2;
        strcpy(a.amz_date, amz_date);
    }
    sigv4_request_t r = {method, path, strlen(path), query, strlen(query), h, (size_t)n, payload};
    uint8_t key[32];
    rc = sigv4_verify(&r, &a, secret, key);
    printf("%s\n", rc == 0 ? "OK" : "DENIED");
    if (rc) return 1;
    if (argc < 2) return 0;

    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    int chunked = strncmp(payload, "STREAMING-", 10) == 0;
    char scope[160];
    sigv4_scope(&a, scope, sizeof(scope));
    s3_chunked_t *c = chunked ? s3_chunked_new(strstr(payload, "HMAC") != NULL, trailer != NULL,
                                               key, a.amz_date, scope, a.signature)
                              : NULL;
    uint8_t buf[65536];
    size_t got, total = 0;
    int done = !chunked;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
        if (!chunked) {
            EVP_DigestUpdate(md, buf, got);
            total += got;
            continue;
        }
        size_t used = 0;
        rc = s3_chunked_feed(c, buf, got, &used, sink, md);
        if (rc < 0) {
            printf("BODY_ERROR %s\n", err_name(rc));
            return 1;
        }
        done = rc == 1;
    }
    fclose(f);
    if (!done) {
        printf("BODY_ERROR truncated\n");
        return 1;
    }
    uint8_t d[32];
    char hex[65];
    EVP_DigestFinal_ex(md, d, NULL);
    sigv4_hex(d, 32, hex);
    printf("DECODED %llu %s\n", (unsigned long long)(chunked ? s3_chunked_decoded(c) : total), hex);
    if (chunked && trailer) {
        const char *v = s3_chunked_trailer(c, trailer);
        printf("TRAILER %s %s\n", trailer, v ? v : "(missing)");
    }
    s3_chunked_free(c);
    EVP_MD_CTX_free(md);
    free(h);
    return 0;
}
