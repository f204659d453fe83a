/*
 * Fuzz the S3 XML bodies (CompleteMultipartUpload, DeleteObjects, Tagging,
 * CORSConfiguration with its matching, VersioningConfiguration, AccessControlPolicy and the
 * x-amz-grant-* header values) through expat: the first byte picks
 * the parser. Refusals are fine; crashes, leaks
 * and out-of-bounds results are not.
 */
#include "common/err.h"
#include "s3/acl.h"
#include "s3/checksum.h"
#include "s3/cors.h"
#include "s3/xml.h"

#include <stdint.h>
#include <stdio.h>
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
    } else if (data[0] >= 0xe0 && data[0] < 0xe8) {
        /* Grants: what parses must store, decode to the same list, and give only what it
         * names. */
        static s3_acl_t acl, back;
        char owner[80], stored[S3_ACL_STORED_MAX];
        int rc;
        acl.n = 0;
        if (data[0] & 1) {
            char *v = malloc(len + 1);
            if (!v) return 0;
            memcpy(v, body, len);
            v[len] = 0;
            rc = s3_acl_parse_header(v, S3_PERM_READ << (data[0] >> 1 & 3), &acl);
            free(v);
        } else {
            rc = s3_acl_parse_xml(body, len, owner, sizeof(owner), &acl);
            if (rc == 0 && strnlen(owner, sizeof(owner)) == sizeof(owner)) abort();
        }
        if (acl.n < 0 || acl.n > S3_ACL_MAX_GRANTS) abort();
        int storable = 1;
        for (int i = 0; rc == 0 && i < acl.n; i++)
            storable &= acl.g[i].type == S3_GRANTEE_USER || acl.g[i].type == S3_GRANTEE_ALL ||
                        acl.g[i].type == S3_GRANTEE_AUTH;
        if (rc == 0 && storable) {
            if (s3_acl_encode(&acl, stored, sizeof(stored)) != 0) abort();
            if (s3_acl_decode(stored, &back) != 0 || back.n != acl.n) abort();
            for (int i = 0; i < acl.n; i++)
                if (back.g[i].type != acl.g[i].type || back.g[i].perm != acl.g[i].perm ||
                    strcmp(back.g[i].id, acl.g[i].id) != 0)
                    abort();
            /* No grant to a user: a stranger signed in gets only the groups' permissions. */
            int groups = 0;
            for (int i = 0; i < acl.n; i++)
                if (acl.g[i].type != S3_GRANTEE_USER) groups |= acl.g[i].perm;
            if (s3_acl_perms(stored, "\x7f-nobody") & ~groups) abort();
        }
        /* Any string as a stored value: decoding never reads past it. */
        char *sv = malloc(len + 1);
        if (!sv) return 0;
        memcpy(sv, body, len);
        sv[len] = 0;
        (void)s3_acl_perms(sv, "AK");
        free(sv);
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
                    parts[i].cks_algo < CKS_NONE || parts[i].cks_algo >= CKS_N ||
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
