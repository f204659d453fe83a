/*
 * Fuzz the S3 XML bodies (CompleteMultipartUpload, DeleteObjects, Tagging,
 * CORSConfiguration with its matching, VersioningConfiguration) through expat: the first byte picks
 * the parser. Refusals are fine; crashes, leaks
 * and out-of-bounds results are not.
 */
#include "common/err.h"
#include "s3/checksum.h"
#include "s3/cors.h"
#include "s3/xml.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] >= 0xf0) {
        cors_config_t c;
        if (cors_parse(body, len, &c) == 0) {
            if (c.n < 1 || c.n > CORS_MAX_RULES) abort();
            (void)cors_match(&c, "http://a.example.com", CORS_GET, "x-amz-date, content-type");
            for (int i = 0; i < c.n; i++)
                for (int j = 0; j < c.rules[i].norigins; j++)
                    (void)cors_wildcard(c.rules[i].origins[j], "https://b.example.org", 0);
            cors_free(&c);
        }
    } else if (data[0] >= 0xe8) {
        int status, mfa;
        if (s3_xml_versioning(body, len, &status, &mfa) == 0 &&
            (status < 0 || status > 2 || mfa < 0 || mfa > 1))
            abort();
    } else if (data[0] % 3 == 2) {
        s3_xml_tag_t *tags;
        int n;
        if (s3_xml_tagging(body, len, &tags, &n) == 0) {
            if (n < 0 || n > S3_XML_MAX_TAGS) abort();
            for (int i = 0; i < n; i++)
                if (strnlen(tags[i].key, sizeof(tags[i].key)) == sizeof(tags[i].key) ||
                    strnlen(tags[i].value, sizeof(tags[i].value)) == sizeof(tags[i].value))
                    abort();
            free(tags);
        }
    } else if (data[0] & 1) {
        s3_xml_part_t *parts;
        int n;
        if (s3_xml_complete(body, len, &parts, &n) == 0) {
            if (n < 1 || n > S3_XML_MAX_PARTS) abort();
            for (int i = 0; i < n; i++)
                if (strnlen(parts[i].etag, sizeof(parts[i].etag)) == sizeof(parts[i].etag) ||
                    strnlen(parts[i].cks, sizeof(parts[i].cks)) == sizeof(parts[i].cks) ||
                    parts[i].cks_algo < CKS_NONE || parts[i].cks_algo > CKS_SHA256 ||
                    (parts[i].cks_algo == CKS_NONE && parts[i].cks[0]))
                    abort();
            free(parts);
        }
    } else {
        char **keys;
        int n, quiet;
        s3_xml_delcond_t *conds;
        if (s3_xml_delete(body, len, &keys, &n, &quiet, &conds) == 0) {
            for (int i = 0; i < n; i++)
                if (strnlen(conds[i].etag, sizeof(conds[i].etag)) == sizeof(conds[i].etag) ||
                    strnlen(conds[i].version_id, sizeof(conds[i].version_id)) ==
                        sizeof(conds[i].version_id))
                    abort();
            free(conds);
            if (n < 0 || n > S3_XML_MAX_KEYS) abort();
            for (int i = 0; i < n; i++)
                if (strlen(keys[i]) > S3_XML_MAX_KEY) abort();
            s3_xml_free_keys(keys, n);
        }
    }
    return 0;
}
