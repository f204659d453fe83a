/*
 * cors: a bucket's CORS configuration (S3's CORSConfiguration XML, parsed
 * with expat, DTDs refused) and the rule matching of preflight and actual
 * requests. No I/O.
 *
 * A rule matches a request when one of its AllowedOrigins matches the
 * Origin (at most one '*' wildcard, case-sensitive as S3), the method is
 * one of its AllowedMethods, and every requested header matches one of its
 * AllowedHeaders (case-insensitive, '*' wildcards). The first matching rule
 * answers.
 */
#ifndef WL_CORS_H
#define WL_CORS_H

#include <stddef.h>

enum { CORS_GET = 1, CORS_PUT = 2, CORS_POST = 4, CORS_DELETE = 8, CORS_HEAD = 16 };
#define CORS_MAX_RULES 100

typedef struct {
    char **origins, **headers, **expose;
    int norigins, nheaders, nexpose;
    unsigned methods; /* CORS_* bits */
    long max_age;     /* -1: none */
} cors_rule_t;

typedef struct {
    cors_rule_t *rules;
    int n;
} cors_config_t;

/*
 * Parse a CORSConfiguration. 0; ERR_INVAL (malformed, a rule without an
 * origin or a method, more than CORS_MAX_RULES rules), ERR_RANGE (a
 * method S3 does not allow in CORS), or ERR_TOO_LARGE (an AllowedOrigin or
 * AllowedHeader with more than one wildcard).
 */
int cors_parse(const char *body, size_t len, cors_config_t *out)
    __attribute__((warn_unused_result));
/*
 * The same, for a configuration stored by an earlier build: the limits a PUT checks
 * that do not keep responses safe (a rule ID's length, one wildcard in a header) are
 * not applied, so a bucket's rules do not stop working when a build tightens them.
 */
int cors_parse_stored(const char *body, size_t len, cors_config_t *out)
    __attribute__((warn_unused_result));
void cors_free(cors_config_t *c);

/* The CORS_* bit of an HTTP method name, 0 for any other. */
unsigned cors_method(const char *method);

/*
 * The first rule allowing origin to use method with the requested headers
 * (req_headers: the comma-separated Access-Control-Request-Headers, or
 * NULL), or NULL.
 */
const cors_rule_t *cors_match(const cors_config_t *c, const char *origin, unsigned method,
                              const char *req_headers);

/* Whether pattern (one '*' wildcard at most; icase: ignoring ASCII case) matches s. */
int cors_wildcard(const char *pattern, const char *s, int icase);

#endif
