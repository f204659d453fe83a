/*
 * Fuzz SigV4 parsing and canonicalisation: the input is split into an
 * Authorization header, a query string, a path and a header block. Any
 * result is fine except a crash or a sanitizer report.
 */
#include "common/err.h"
#include "s3/sigv4.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Fields separated by 0x00 bytes: authz, query, path, then "name:value" lines. */
    const char *f[4] = {"", "", "/", ""};
    size_t l[4] = {0, 0, 1, 0};
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = 0;
    size_t start = 0;
    for (int i = 0, k = 0; k < 4 && (size_t)i <= size; i++) {
        if ((size_t)i == size || buf[i] == 0) {
            f[k] = buf + start;
            l[k] = (size_t)i - start;
            k++;
            start = (size_t)i + 1;
        }
    }
    sigv4_auth_t a;
    int rc = sigv4_parse_header(f[0], l[0], &a);
    if (rc != 0 && rc != ERR_INVAL) abort();
    int presigned = sigv4_parse_query(f[1], l[1], &a) == 0;

    sigv4_header_t h[16];
    size_t nh = 0;
    const char *p = f[3], *end = f[3] + l[3];
    while (p < end && nh < 16) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(e - p));
        if (colon) {
            h[nh++] = (sigv4_header_t){p, (size_t)(colon - p), colon + 1, (size_t)(e - colon - 1)};
        }
        p = nl ? nl + 1 : end;
    }
    sigv4_request_t r = {"GET", f[2], l[2], f[1], l[1], h, nh, SIGV4_UNSIGNED};
    const char *signed_headers = a.signed_headers[0] ? a.signed_headers : "host";
    char *canon = sigv4_canonical_request(&r, signed_headers, presigned);
    free(canon);
    if (a.signature[0] && a.date[0]) {
        rc = sigv4_verify(&r, &a, "secret", NULL);
        if (rc != 0 && rc != ERR_DENIED) abort();
    }
    free(buf);
    return 0;
}
