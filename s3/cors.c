#include "s3/cors.h"
#include "s3/hdrlist.h"

#include "common/err.h"
#include "common/mem.h"
#include "common/num.h"

#include <expat.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TEXT_MAX 1024

typedef struct {
    XML_Parser p;
    cors_config_t *c;
    int depth, bad, bad_method, field, in_rule;
    int too_wild; /* an origin or header with more than one wildcard (S3: InvalidRequest) */
    int stored;   /* a configuration stored before: only what keeps responses safe is checked */
    char text[TEXT_MAX + 1];
    size_t tl;
} parse_t;

enum { F_NONE, F_ORIGIN, F_METHOD, F_HEADER, F_EXPOSE, F_MAXAGE, F_ID };

static void fail(parse_t *s)
{
    s->bad = 1;
    XML_StopParser(s->p, XML_FALSE);
}

static void XMLCALL no_doctype(void *ud, const XML_Char *name, const XML_Char *sys,
                               const XML_Char *pub, int has_internal)
{
    (void)name;
    (void)sys;
    (void)pub;
    (void)has_internal;
    fail(ud); /* no DTD: no entity can be declared, so none can blow up */
}

/* A header name (RFC 9110 token), '*' wildcards allowed where S3 allows them. */
static int token_ok(const char *v, int star)
{
    if (!*v) return 0;
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'+-.^_`|~", c) || (star && c == '*')))
            return 0;
    }
    return 1;
}

/*
 * What a rule's values may be: they are echoed into response headers, so
 * header names are tokens, origins printable ASCII with one wildcard at
 * most (no CR/LF: a bucket owner could otherwise write headers, or a whole
 * response, into every answer for an allowed origin).
 */
/* Characters of UTF-8 text: bytes that do not continue one. */
static size_t utf8_chars(const char *v)
{
    size_t n = 0;
    for (; *v; v++)
        n += ((unsigned char)*v & 0xc0) != 0x80;
    return n;
}

/* More than one '*' (S3 allows one in an origin or a header: x-*-* would match none). */
static int two_wildcards(const char *v)
{
    const char *star = strchr(v, '*');
    return star && strchr(star + 1, '*');
}

static int value_ok(int field, const char *v, int stored)
{
    switch (field) {
    case F_HEADER:
        return token_ok(v, 1) && (stored || !two_wildcards(v));
    case F_EXPOSE:
        return token_ok(v, 0);
    case F_ORIGIN: {
        if (!*v || two_wildcards(v)) return 0;
        for (; *v; v++)
            if ((unsigned char)*v <= 0x20 || (unsigned char)*v >= 0x7f) return 0;
        return 1;
    }
    case F_ID: /* S3: up to 255 characters */
        return stored || utf8_chars(v) <= 255;
    default:
        return 1;
    }
}

static void push(char ***v, int *n, const char *s)
{
    *v = xrealloc(*v, (size_t)(*n + 1) * sizeof(char *));
    (*v)[(*n)++] = xstrdup(s);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    parse_t *s = ud;
    (void)attrs;
    s->depth++;
    s->tl = 0;
    s->field = F_NONE;
    if ((s->depth == 1 && strcmp(name, "CORSConfiguration") != 0) ||
        (s->depth == 2 && strcmp(name, "CORSRule") != 0) || s->depth > 3) {
        fail(s);
        return;
    }
    if (s->depth == 2) {
        if (s->c->n == CORS_MAX_RULES) {
            fail(s);
            return;
        }
        s->c->rules = xrealloc(s->c->rules, (size_t)(s->c->n + 1) * sizeof(cors_rule_t));
        memset(&s->c->rules[s->c->n], 0, sizeof(cors_rule_t));
        s->c->rules[s->c->n].max_age = -1;
        s->c->n++;
        s->in_rule = 1;
    } else if (s->depth == 3) {
        static const struct {
            const char *name;
            int field;
        } fields[] = {{"AllowedOrigin", F_ORIGIN}, {"AllowedMethod", F_METHOD},
                      {"AllowedHeader", F_HEADER}, {"ExposeHeader", F_EXPOSE},
                      {"MaxAgeSeconds", F_MAXAGE}, {"ID", F_ID}};
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
            if (strcmp(name, fields[i].name) == 0) s->field = fields[i].field;
        if (!s->field) fail(s);
    }
}

static void XMLCALL on_text(void *ud, const XML_Char *t, int len)
{
    parse_t *s = ud;
    if (!s->field) return;
    if (s->tl + (size_t)len > TEXT_MAX) {
        fail(s);
        return;
    }
    memcpy(s->text + s->tl, t, (size_t)len);
    s->tl += (size_t)len;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    parse_t *s = ud;
    (void)name;
    if (s->bad) { /* expat still reports the ends of elements refused at their start */
        s->depth--;
        return;
    }
    if (s->depth == 3 && s->field && s->in_rule) {
        cors_rule_t *r = &s->c->rules[s->c->n - 1];
        s->text[s->tl] = 0;
        if (!value_ok(s->field, s->text, s->stored)) {
            s->too_wild = (s->field == F_ORIGIN || s->field == F_HEADER) && two_wildcards(s->text);
            fail(s);
            s->depth--;
            return;
        }
        s->text[s->tl] = 0;
        switch (s->field) {
        case F_ORIGIN:
            push(&r->origins, &r->norigins, s->text);
            break;
        case F_METHOD: {
            unsigned m = cors_method(s->text);
            if (!m) s->bad_method = 1;
            r->methods |= m;
            break;
        }
        case F_HEADER:
            push(&r->headers, &r->nheaders, s->text);
            break;
        case F_EXPOSE:
            push(&r->expose, &r->nexpose, s->text);
            break;
        case F_MAXAGE: {
            uint64_t v;
            if (num_parse_u64(s->text, 0, INT32_MAX, &v) != 0) fail(s);
            r->max_age = (long)v;
            break;
        }
        default:
            break;
        }
        s->field = F_NONE;
    } else if (s->depth == 2 && s->in_rule) {
        const cors_rule_t *r = &s->c->rules[s->c->n - 1];
        if (!r->norigins || (!r->methods && !s->bad_method)) fail(s);
        s->in_rule = 0;
    }
    s->depth--;
}

static int parse(const char *body, size_t len, int stored, cors_config_t *out)
{
    parse_t s = {0};
    memset(out, 0, sizeof(*out));
    s.c = out;
    s.stored = stored;
    s.p = XML_ParserCreate(NULL);
    if (!s.p) return ERR_NOMEM;
    XML_SetUserData(s.p, &s);
    XML_SetStartDoctypeDeclHandler(s.p, no_doctype);
    XML_SetElementHandler(s.p, on_start, on_end);
    XML_SetCharacterDataHandler(s.p, on_text);
    int ok = len <= (size_t)1 << 20 && XML_Parse(s.p, body, (int)len, XML_TRUE) == XML_STATUS_OK &&
             !s.bad && out->n > 0;
    XML_ParserFree(s.p);
    if (!ok || s.bad_method) {
        cors_free(out);
        return ok ? ERR_RANGE : s.too_wild ? ERR_TOO_LARGE : ERR_INVAL;
    }
    return 0;
}

int cors_parse(const char *body, size_t len, cors_config_t *out)
{
    return parse(body, len, 0, out);
}

int cors_parse_stored(const char *body, size_t len, cors_config_t *out)
{
    return parse(body, len, 1, out);
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void cors_free(cors_config_t *c)
{
    for (int i = 0; i < c->n; i++) {
        free_list(c->rules[i].origins, c->rules[i].norigins);
        free_list(c->rules[i].headers, c->rules[i].nheaders);
        free_list(c->rules[i].expose, c->rules[i].nexpose);
    }
    free(c->rules);
    memset(c, 0, sizeof(*c));
}

unsigned cors_method(const char *m)
{
    static const char *const names[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};
    for (unsigned i = 0; i < 5; i++)
        if (strcmp(m, names[i]) == 0) return 1u << i;
    return 0;
}

int cors_wildcard(const char *pattern, const char *s, int icase)
{
    const char *star = strchr(pattern, '*');
    size_t pl = strlen(pattern), sl = strlen(s);
    int (*cmp)(const char *, const char *, size_t) = icase ? strncasecmp : strncmp;
    if (!star) return pl == sl && cmp(pattern, s, pl) == 0;
    size_t pre = (size_t)(star - pattern), post = pl - pre - 1;
    if (strchr(star + 1, '*')) return 0; /* one wildcard at most */
    return sl >= pre + post && cmp(pattern, s, pre) == 0 && cmp(star + 1, s + sl - post, post) == 0;
}

/* Every header of the comma-separated list is allowed by one of r's AllowedHeaders. */
static int headers_allowed(const cors_rule_t *r, const char *list)
{
    char name[256];
    const char *p = list ? list : "", *item;
    for (size_t l; (l = hdrlist_next(&p, &item)) != 0;) {
        if (l >= sizeof(name)) return 0;
        memcpy(name, item, l);
        name[l] = 0;
        int ok = 0;
        for (int i = 0; i < r->nheaders && !ok; i++)
            ok = cors_wildcard(r->headers[i], name, 1);
        if (!ok) return 0;
    }
    return 1;
}

const cors_rule_t *cors_match(const cors_config_t *c, const char *origin, unsigned method,
                              const char *req_headers)
{
    for (int i = 0; c && i < c->n; i++) {
        const cors_rule_t *r = &c->rules[i];
        if (!(r->methods & method)) continue;
        int o = 0;
        for (int j = 0; j < r->norigins && !o; j++)
            o = cors_wildcard(r->origins[j], origin, 0);
        if (o && headers_allowed(r, req_headers)) return r;
    }
    return NULL;
}
