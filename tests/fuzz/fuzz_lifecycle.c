/*
 * Fuzz the lifecycle configuration parser (s3/lifecycle) and everything that
 * reads what it accepts: a refusal must say which S3 error; an accepted
 * configuration must serialise to a form that parses back to the same
 * canonical text, and matching, expiry dates, the x-amz-expiration value and
 * the worker's decision must run on it without crashing, leaking or going
 * out of bounds.
 */
#include "common/err.h"
#include "s3/lifecycle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lc_config_t c, c2;
    lc_error_t e = {0};
    int rc = lc_parse((const char *)data, size, &c, &e);
    if (rc) {
        if (rc != ERR_INVAL || !e.message || c.n || c.rules) abort();
        return 0;
    }
    if (c.n < 1 || c.n > LC_MAX_RULES) abort();
    size_t l1, l2;
    char *s1 = lc_serialize(&c, &l1);
    if (lc_parse(s1, l1, &c2, &e) != 0) abort();
    char *s2 = lc_serialize(&c2, &l2);
    if (l1 != l2 || memcmp(s1, s2, l1) != 0) abort();
    static const char *const keys[] = {"", "a", "logs/x", "tmp/y", "p/\xc3\xa9"};
    static const char *const tags[] = {NULL, "", "k=v", "class=scratch&a%26b=x%3Dy", "%zz="};
    for (int i = 0; i < 5; i++) {
        int64_t expiry;
        const lc_rule_t *r = lc_expiry(&c, keys[i], tags[i], (uint64_t)i * 100, 1389781800,
                                       i ? 10 * i : LC_DAY_SECONDS, &expiry);
        if (r) {
            char h[4096];
            size_t n = lc_expiration_header(r, expiry, h, sizeof(h));
            /* Empty only for a date past what an HTTP date can say (year 9999). */
            if (strlen(h) != n || (!n && expiry < 253402300800ll)) abort();
        }
        for (int k = LC_VER_CURRENT; k <= LC_VER_UPLOAD; k++) {
            lc_version_t v = {(lc_ver_kind_t)k, keys[i],        tags[i], (uint64_t)i,
                              1389781800,       1389781800 + i, i};
            const lc_rule_t *rule;
            int64_t due;
            lc_action_t a = lc_decide(&c, &v, 1389781800 + 86400 * 40, LC_DAY_SECONDS, &rule, &due);
            if ((a != LC_ACT_NONE) != (rule != NULL)) abort();
        }
    }
    free(s1);
    free(s2);
    lc_free(&c2);
    lc_free(&c);
    return 0;
}
