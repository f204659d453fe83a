/*
 * lifecycle: LifecycleConfiguration parsing, checking, canonical form and
 * rule evaluation (see lifecycle.h).
 *
 * Design: s3/xmltree reads the body into a small element tree (bounded:
 * depth, element count, and text no longer than the body), then one pass
 * over the tree checks it in S3's order and fills the rules. Working on a tree
 * rather than on expat's events keeps "exactly one of", "at most once" and
 * "these cannot go together" as plain counts, each next to the S3 error it
 * earns. Which S3 error a mistake gets follows what S3 answers: a body that
 * does not fit the schema (unknown or repeated elements, a Status other
 * than Enabled/Disabled, a number that is not one) is MalformedXML; a value
 * that fits the schema but not the rules (Days 0, a Date not at midnight, a
 * long or repeated ID) is InvalidArgument; a rule without an action is
 * InvalidRequest.
 */
#include "s3/lifecycle.h"
#include "s3/xmltree.h"

#include "common/err.h"
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX     8     /* LifecycleConfiguration/Rule/Filter/And/Tag/Key is 6 */
#define NODES_MAX     65536 /* 1000 rules of the largest sensible shape fit */
#define TAG_KEY_MAX   128   /* characters, as object tags */
#define TAG_VALUE_MAX 256

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* n fixed digits at *p into *v. */
static int digits(const char **p, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9') return -1;
        *v = *v * 10 + (**p - '0');
    }
    return 0;
}

/*
 * An ISO 8601 date-time as S3 takes it ("2099-11-10", "2099-11-10T00:00:00Z",
 * "...T00:00:00.000Z", "...T00:00:00+01:00"; no zone means UTC) into seconds
 * since the epoch; *frac says whether a non-zero fraction of a second was
 * given. 0, or -1 when it is not a date.
 */
static int parse_date(const xml_node_t *n, int64_t *out, int *frac)
{
    if (n->kids) return -1;
    const char *p = xmltree_text(n);
    int y, mo, d, h = 0, mi = 0, s = 0, tz = 0;
    *frac = 0;
    while (is_space(*p))
        p++;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' || digits(&p, 2, &d))
        return -1;
    if (*p == 'T') {
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi)) return -1;
        if (*p == ':') {
            p++;
            if (digits(&p, 2, &s)) return -1;
            if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9') return -1;
                for (; *p >= '0' && *p <= '9'; p++)
                    *frac |= *p != '0';
            }
        }
        if (*p == 'Z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, th, tm;
            if (digits(&p, 2, &th) || *p++ != ':' || digits(&p, 2, &tm) || th > 23 || tm > 59)
                return -1;
            tz = sign * (th * 3600 + tm * 60);
        }
    }
    while (is_space(*p))
        p++;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*p || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
        h > 23 || mi > 59 || s > 59)
        return -1;
    *out = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + s - tz;
    return 0;
}

/* Characters (code points) of UTF-8 text. */
static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* ---- checking ---- */

static int fail(lc_error_t *err, lc_err_kind_t kind, const char *msg)
{
    err->kind = kind;
    err->message = msg;
    return ERR_INVAL;
}

#define MALFORMED(err)                                                                             \
    fail(err, LC_ERR_MALFORMED_XML,                                                                \
         "The XML you provided was not well-formed or did not validate against our published "     \
         "schema")

static int tag_into(const xml_node_t *t, lc_rule_t *r, lc_error_t *err)
{
    static const char *const names[] = {"Key", "Value", NULL};
    int nk, nv;
    const xml_node_t *k = xmltree_kid(t, "Key", &nk), *v = xmltree_kid(t, "Value", &nv);
    if (!xmltree_kids_ok(t, names, NULL) || !k || !v || k->kids || v->kids) return MALFORMED(err);
    const char *key = xmltree_text(k), *value = xmltree_text(v);
    if (!key[0] || chars(key) > TAG_KEY_MAX)
        return fail(err, LC_ERR_INVALID_ARGUMENT, "The TagKey you have provided is invalid");
    if (chars(value) > TAG_VALUE_MAX)
        return fail(err, LC_ERR_INVALID_ARGUMENT, "The TagValue you have provided is invalid");
    if (r->ntags == LC_MAX_TAGS)
        return fail(err, LC_ERR_INVALID_ARGUMENT,
                    "A rule's filter can have at most 50 tags."); /* none could match beyond */
    for (int i = 0; i < r->ntags; i++)
        if (strcmp(r->tags[i].key, key) == 0)
            return fail(err, LC_ERR_INVALID_REQUEST, "Duplicate Tag Keys are not allowed.");
    r->tags = xrealloc(r->tags, (size_t)(r->ntags + 1) * sizeof(*r->tags));
    r->tags[r->ntags].key = xstrdup(key);
    r->tags[r->ntags].value = xstrdup(value);
    r->ntags++;
    return 0;
}

static int size_into(const xml_node_t *n, int64_t *out, lc_error_t *err)
{
    if (xmltree_integer(n, out) != 0) return MALFORMED(err);
    if (*out < 0)
        return fail(err, LC_ERR_INVALID_ARGUMENT, "'ObjectSize' must be a non-negative integer");
    return 0;
}

/* The predicates of a Filter or of its And (both may hold Prefix, Tag, and the sizes). */
static int predicates_into(const xml_node_t *f, lc_rule_t *r, lc_error_t *err)
{
    int rc = 0;
    for (const xml_node_t *k = f->kids; k && !rc; k = k->next) {
        if (strcmp(k->name, "Prefix") == 0) {
            if (k->kids) return MALFORMED(err);
            free(r->prefix);
            r->prefix = xstrdup(xmltree_text(k));
        } else if (strcmp(k->name, "Tag") == 0) {
            rc = tag_into(k, r, err);
        } else if (strcmp(k->name, "ObjectSizeGreaterThan") == 0) {
            rc = size_into(k, &r->size_gt, err);
        } else if (strcmp(k->name, "ObjectSizeLessThan") == 0) {
            rc = size_into(k, &r->size_lt, err);
            if (!rc && r->size_lt == 0)
                rc = fail(err, LC_ERR_INVALID_ARGUMENT,
                          "'ObjectSizeLessThan' must be a positive integer");
        }
    }
    if (!rc && r->size_gt >= 0 && r->size_lt >= 0 && r->size_gt >= r->size_lt)
        rc = fail(err, LC_ERR_INVALID_ARGUMENT,
                  "'ObjectSizeGreaterThan' must be less than 'ObjectSizeLessThan'");
    return rc;
}

static int filter_into(const xml_node_t *f, lc_rule_t *r, lc_error_t *err)
{
    static const char *const names[] = {
        "Prefix", "Tag", "ObjectSizeGreaterThan", "ObjectSizeLessThan", "And", NULL};
    static const char *const and_names[] = {"Prefix", "Tag", "ObjectSizeGreaterThan",
                                            "ObjectSizeLessThan", NULL};
    static const char *const and_many[] = {"Tag", NULL};
    static const int forms[] = {LC_FILTER_PREFIX, LC_FILTER_TAG, LC_FILTER_GT, LC_FILTER_LT,
                                LC_FILTER_AND};
    /* Exactly one predicate (or none: everything); several need an And. */
    if (!xmltree_kids_ok(f, names, NULL) || (f->kids && f->kids->next)) return MALFORMED(err);
    if (!f->kids) {
        if (!xmltree_blank(f)) return MALFORMED(err);
        r->filter_form = LC_FILTER_EMPTY;
        return 0;
    }
    for (int i = 0; names[i]; i++)
        if (strcmp(f->kids->name, names[i]) == 0) r->filter_form = forms[i];
    if (r->filter_form != LC_FILTER_AND) return predicates_into(f, r, err);
    const xml_node_t *and = f->kids;
    if (!xmltree_kids_ok(and, and_names, and_many) || !and->kids) return MALFORMED(err);
    return predicates_into(and, r, err);
}

static int positive_days(const xml_node_t *n, int64_t *out, lc_error_t *err, const char *msg)
{
    /* Days are an Integer in S3's schema: a number past 32 bits does not fit it. */
    if (xmltree_integer(n, out) != 0 || *out > INT32_MAX || *out < INT32_MIN) return MALFORMED(err);
    if (*out <= 0) return fail(err, LC_ERR_INVALID_ARGUMENT, msg);
    return 0;
}

static int expiration_into(const xml_node_t *e, lc_rule_t *r, lc_error_t *err)
{
    static const char *const names[] = {"Days", "Date", "ExpiredObjectDeleteMarker", NULL};
    const xml_node_t *days = xmltree_kid(e, "Days", NULL), *date = xmltree_kid(e, "Date", NULL),
                     *marker = xmltree_kid(e, "ExpiredObjectDeleteMarker", NULL);
    /* One of the three: S3's schema makes Days, Date and the marker exclusive. */
    if (!xmltree_kids_ok(e, names, NULL) || !e->kids || e->kids->next) return MALFORMED(err);
    if (days)
        return positive_days(days, &r->exp_days, err,
                             "'Days' for Expiration action must be a positive integer");
    if (date) {
        int frac;
        /* Dates before 1970 are refused with the malformed ones: nothing can expire then. */
        if (parse_date(date, &r->exp_date, &frac) != 0 || r->exp_date < 0) return MALFORMED(err);
        if (frac || r->exp_date % 86400 != 0)
            return fail(err, LC_ERR_INVALID_ARGUMENT, "'Date' must be at midnight GMT");
        return 0;
    }
    if ((r->exp_marker = xmltree_bool(marker)) < 0) return MALFORMED(err);
    return 0;
}

static int noncurrent_into(const xml_node_t *e, lc_rule_t *r, lc_error_t *err)
{
    static const char *const names[] = {"NoncurrentDays", "NewerNoncurrentVersions", NULL};
    const xml_node_t *days = xmltree_kid(e, "NoncurrentDays", NULL);
    const xml_node_t *newer = xmltree_kid(e, "NewerNoncurrentVersions", NULL);
    if (!xmltree_kids_ok(e, names, NULL) || !days) return MALFORMED(err);
    int rc = positive_days(
        days, &r->nc_days, err,
        "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer");
    if (rc || !newer) return rc;
    int64_t v;
    if (xmltree_integer(newer, &v) != 0 || v > INT32_MAX || v < INT32_MIN) return MALFORMED(err);
    if (v < 1 || v > LC_NEWER_MAX)
        return fail(err, LC_ERR_INVALID_ARGUMENT,
                    "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a "
                    "positive integer up to 100");
    r->nc_newer = (int)v;
    return 0;
}

static int abort_into(const xml_node_t *e, lc_rule_t *r, lc_error_t *err)
{
    static const char *const names[] = {"DaysAfterInitiation", NULL};
    const xml_node_t *days = xmltree_kid(e, "DaysAfterInitiation", NULL);
    if (!xmltree_kids_ok(e, names, NULL) || !days) return MALFORMED(err);
    return positive_days(days, &r->abort_days, err,
                         "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be "
                         "a positive integer");
}

static int rule_into(const xml_node_t *n, lc_rule_t *r, lc_error_t *err)
{
    static const char *const names[] = {"ID",
                                        "Prefix",
                                        "Filter",
                                        "Status",
                                        "Expiration",
                                        "NoncurrentVersionExpiration",
                                        "AbortIncompleteMultipartUpload",
                                        "Transition",
                                        "NoncurrentVersionTransition",
                                        NULL};
    static const char *const many[] = {"Transition", "NoncurrentVersionTransition", NULL};
    memset(r, 0, sizeof(*r));
    r->size_gt = r->size_lt = r->exp_date = -1;
    r->exp_marker = r->nc_newer = -1;
    if (!xmltree_kids_ok(n, names, many)) return MALFORMED(err);
    const xml_node_t *id = xmltree_kid(n, "ID", NULL), *status = xmltree_kid(n, "Status", NULL);
    const xml_node_t *prefix = xmltree_kid(n, "Prefix", NULL),
                     *filter = xmltree_kid(n, "Filter", NULL);
    const xml_node_t *exp = xmltree_kid(n, "Expiration", NULL);
    const xml_node_t *nce = xmltree_kid(n, "NoncurrentVersionExpiration", NULL);
    const xml_node_t *abrt = xmltree_kid(n, "AbortIncompleteMultipartUpload", NULL);
    int transitions =
        xmltree_kid(n, "Transition", NULL) || xmltree_kid(n, "NoncurrentVersionTransition", NULL);
    if (!status || status->kids ||
        (strcmp(xmltree_text(status), "Enabled") != 0 &&
         strcmp(xmltree_text(status), "Disabled") != 0))
        return MALFORMED(err);
    r->enabled = strcmp(xmltree_text(status), "Enabled") == 0;
    if (id) {
        if (id->kids) return MALFORMED(err);
        if (chars(xmltree_text(id)) > LC_ID_MAX)
            return fail(err, LC_ERR_INVALID_ARGUMENT,
                        "ID length should not exceed allowed limit of 255");
        if (xmltree_text(id)[0]) r->id = xstrdup(xmltree_text(id)); /* empty: one is made up */
    }
    /* The legacy Prefix or a Filter: one of them, not both. */
    if (!prefix == !filter) return MALFORMED(err);
    int rc;
    if (prefix) {
        if (prefix->kids) return MALFORMED(err);
        r->filter_form = LC_FILTER_LEGACY;
        r->prefix = xstrdup(xmltree_text(prefix));
    } else if ((rc = filter_into(filter, r, err)) != 0) {
        return rc;
    }
    if (!r->prefix) r->prefix = xstrdup("");
    if (!exp && !nce && !abrt && !transitions)
        return fail(err, LC_ERR_INVALID_REQUEST,
                    "At least one action needs to be specified in a rule");
    if ((exp && (rc = expiration_into(exp, r, err)) != 0) ||
        (nce && (rc = noncurrent_into(nce, r, err)) != 0) ||
        (abrt && (rc = abort_into(abrt, r, err)) != 0))
        return rc;
    if (r->exp_marker == 1 && r->ntags)
        return fail(err, LC_ERR_INVALID_REQUEST,
                    "ExpiredObjectDeleteMarker cannot be specified with tags.");
    if (r->abort_days && r->ntags)
        return fail(err, LC_ERR_INVALID_REQUEST,
                    "AbortIncompleteMultipartUpload cannot be specified with Tags.");
    if (transitions)
        return fail(err, LC_ERR_NOT_IMPLEMENTED,
                    "Lifecycle transitions are not supported: this store has one storage class.");
    return 0;
}

static void rule_free(lc_rule_t *r)
{
    free(r->id);
    free(r->prefix);
    for (int i = 0; i < r->ntags; i++) {
        free(r->tags[i].key);
        free(r->tags[i].value);
    }
    free(r->tags);
}

void lc_free(lc_config_t *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++)
        rule_free(&c->rules[i]);
    free(c->rules);
    c->rules = NULL;
    c->n = 0;
}

static int id_taken(const lc_config_t *c, const char *id)
{
    for (int i = 0; i < c->n; i++)
        if (c->rules[i].id && strcmp(c->rules[i].id, id) == 0) return 1;
    return 0;
}

/* IDs for the rules that have none: "rule-N" by position, made unique. */
static void name_rules(lc_config_t *c)
{
    char id[64];
    for (int i = 0; i < c->n; i++) {
        if (c->rules[i].id) continue;
        (void)snprintf(id, sizeof(id), "rule-%d", i + 1);
        for (int k = 2; id_taken(c, id); k++)
            (void)snprintf(id, sizeof(id), "rule-%d-%d", i + 1, k);
        c->rules[i].id = xstrdup(id);
    }
}

int lc_parse(const char *body, size_t len, lc_config_t *out, lc_error_t *err)
{
    static const char *const names[] = {"Rule", NULL};
    static const char *const many[] = {"Rule", NULL};
    int nomem = 0, rc = 0;
    memset(out, 0, sizeof(*out));
    xml_node_t *root =
        len > LC_BODY_MAX ? NULL : xmltree_read(body, len, DEPTH_MAX, NODES_MAX, &nomem);
    if (nomem) return ERR_NOMEM;
    if (!root || strcmp(root->name, "LifecycleConfiguration") != 0 ||
        !xmltree_kids_ok(root, names, many) || !root->kids) {
        xmltree_free(root);
        return MALFORMED(err);
    }
    int n = 0;
    for (const xml_node_t *k = root->kids; k; k = k->next)
        n++;
    if (n > LC_MAX_RULES) {
        xmltree_free(root);
        return fail(err, LC_ERR_INVALID_ARGUMENT,
                    "Lifecycle configuration allows a maximum of 1000 rules");
    }
    out->rules = xcalloc((size_t)n, sizeof(*out->rules));
    for (const xml_node_t *k = root->kids; k && !rc; k = k->next) {
        rc = rule_into(k, &out->rules[out->n], err);
        out->n++; /* counted even when refused: lc_free frees what it holds */
        if (!rc && out->rules[out->n - 1].id) {
            for (int i = 0; i < out->n - 1 && !rc; i++)
                if (out->rules[i].id && strcmp(out->rules[i].id, out->rules[out->n - 1].id) == 0)
                    rc = fail(err, LC_ERR_INVALID_ARGUMENT,
                              "Rule ID must be unique. Found same ID for more than one rule");
        }
    }
    xmltree_free(root);
    if (rc) {
        lc_free(out);
        return rc;
    }
    name_rules(out);
    return 0;
}

/* ---- canonical form ---- */

typedef struct {
    char *p;
    size_t len, cap;
} sbuf_t;

static void put(sbuf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(sbuf_t *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Text escaped for XML; control characters (tab, LF, CR: all XML text can hold) as character
 * references, so they come back as they were (a raw CR would be read back as LF). */
static void put_text(sbuf_t *b, const char *s)
{
    char ref[16];
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&')
            puts_(b, "&amp;");
        else if (c == '<')
            puts_(b, "&lt;");
        else if (c == '>')
            puts_(b, "&gt;");
        else if (c < 0x20) {
            (void)snprintf(ref, sizeof(ref), "&#%u;", c);
            puts_(b, ref);
        } else
            put(b, s, 1);
    }
}

static void put_elem(sbuf_t *b, const char *name, const char *text)
{
    puts_(b, "<");
    puts_(b, name);
    puts_(b, ">");
    put_text(b, text);
    puts_(b, "</");
    puts_(b, name);
    puts_(b, ">");
}

static void put_num(sbuf_t *b, const char *name, int64_t v)
{
    char num[32];
    (void)snprintf(num, sizeof(num), "%lld", (long long)v);
    put_elem(b, name, num);
}

static void put_tag(sbuf_t *b, const lc_tag_t *t)
{
    puts_(b, "<Tag>");
    put_elem(b, "Key", t->key);
    put_elem(b, "Value", t->value);
    puts_(b, "</Tag>");
}

static void put_filter(sbuf_t *b, const lc_rule_t *r)
{
    if (r->filter_form == LC_FILTER_LEGACY) {
        put_elem(b, "Prefix", r->prefix);
        return;
    }
    puts_(b, "<Filter>");
    switch (r->filter_form) {
    case LC_FILTER_PREFIX:
        put_elem(b, "Prefix", r->prefix);
        break;
    case LC_FILTER_TAG:
        put_tag(b, &r->tags[0]);
        break;
    case LC_FILTER_GT:
        put_num(b, "ObjectSizeGreaterThan", r->size_gt);
        break;
    case LC_FILTER_LT:
        put_num(b, "ObjectSizeLessThan", r->size_lt);
        break;
    case LC_FILTER_AND:
        puts_(b, "<And>");
        /* An And of an empty Prefix alone must keep it: an empty And is refused. */
        if (r->prefix[0] || (!r->ntags && r->size_gt < 0 && r->size_lt < 0))
            put_elem(b, "Prefix", r->prefix);
        for (int i = 0; i < r->ntags; i++)
            put_tag(b, &r->tags[i]);
        if (r->size_gt >= 0) put_num(b, "ObjectSizeGreaterThan", r->size_gt);
        if (r->size_lt >= 0) put_num(b, "ObjectSizeLessThan", r->size_lt);
        puts_(b, "</And>");
        break;
    default: /* LC_FILTER_EMPTY */
        break;
    }
    puts_(b, "</Filter>");
}

char *lc_serialize(const lc_config_t *c, size_t *len)
{
    sbuf_t b = {0};
    puts_(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LifecycleConfiguration "
              "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (int i = 0; i < c->n; i++) {
        const lc_rule_t *r = &c->rules[i];
        puts_(&b, "<Rule>");
        put_elem(&b, "ID", r->id);
        put_filter(&b, r);
        put_elem(&b, "Status", r->enabled ? "Enabled" : "Disabled");
        if (r->exp_days || r->exp_date >= 0 || r->exp_marker >= 0) {
            puts_(&b, "<Expiration>");
            if (r->exp_days) put_num(&b, "Days", r->exp_days);
            if (r->exp_date >= 0) {
                int64_t y;
                int m, d;
                char date[48];
                civil_from_days(r->exp_date / 86400, &y, &m, &d);
                (void)snprintf(date, sizeof(date), "%04lld-%02d-%02dT00:00:00.000Z", (long long)y,
                               m, d);
                put_elem(&b, "Date", date);
            }
            if (r->exp_marker >= 0)
                put_elem(&b, "ExpiredObjectDeleteMarker", r->exp_marker ? "true" : "false");
            puts_(&b, "</Expiration>");
        }
        if (r->nc_days) {
            puts_(&b, "<NoncurrentVersionExpiration>");
            put_num(&b, "NoncurrentDays", r->nc_days);
            if (r->nc_newer >= 0) put_num(&b, "NewerNoncurrentVersions", r->nc_newer);
            puts_(&b, "</NoncurrentVersionExpiration>");
        }
        if (r->abort_days) {
            puts_(&b, "<AbortIncompleteMultipartUpload>");
            put_num(&b, "DaysAfterInitiation", r->abort_days);
            puts_(&b, "</AbortIncompleteMultipartUpload>");
        }
        puts_(&b, "</Rule>");
    }
    puts_(&b, "</LifecycleConfiguration>");
    *len = b.len;
    return b.p;
}

/* ---- matching ---- */

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Whether the n bytes at enc (canonical escaping: %XX, '+' a space) decode to plain. */
static int decodes_to(const char *enc, size_t n, const char *plain)
{
    size_t i = 0;
    for (; i < n; plain++) {
        int c;
        if (enc[i] == '%' && i + 2 < n && hexval(enc[i + 1]) >= 0 && hexval(enc[i + 2]) >= 0) {
            c = hexval(enc[i + 1]) * 16 + hexval(enc[i + 2]);
            i += 3;
        } else {
            c = enc[i] == '+' ? ' ' : (unsigned char)enc[i];
            i++;
        }
        if (!*plain || (unsigned char)*plain != c) return 0;
    }
    return *plain == 0;
}

/* Whether the canonical tag string holds key=value. */
static int has_tag(const char *tags, const lc_tag_t *t)
{
    for (const char *p = tags; p && *p;) {
        const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *ke = eq ? eq : end;
        if (decodes_to(p, (size_t)(ke - p), t->key) &&
            decodes_to(eq ? eq + 1 : end, eq ? (size_t)(end - eq - 1) : 0, t->value))
            return 1;
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

int lc_rule_matches(const lc_rule_t *r, const char *key, const char *tags, uint64_t size)
{
    if (strncmp(key, r->prefix, strlen(r->prefix)) != 0) return 0;
    if (r->size_gt >= 0 && !(size > (uint64_t)r->size_gt)) return 0;
    if (r->size_lt >= 0 && !(size < (uint64_t)r->size_lt)) return 0;
    for (int i = 0; i < r->ntags; i++)
        if (!has_tag(tags, &r->tags[i])) return 0;
    return 1;
}

int64_t lc_due(int64_t t, int64_t days, int64_t day_s)
{
    if (day_s <= 0) day_s = LC_DAY_SECONDS;
    int64_t x = t + days * day_s;
    int64_t floor = x / day_s - (x % day_s < 0); /* rounds toward minus infinity */
    return (floor + 1) * day_s;
}

const lc_rule_t *lc_expiry(const lc_config_t *c, const char *key, const char *tags, uint64_t size,
                           int64_t mtime, int64_t day_s, int64_t *expiry)
{
    const lc_rule_t *best = NULL;
    int64_t when = 0;
    for (int i = 0; c && i < c->n; i++) {
        const lc_rule_t *r = &c->rules[i];
        if (!r->enabled || (!r->exp_days && r->exp_date < 0) ||
            !lc_rule_matches(r, key, tags, size))
            continue;
        int64_t t = r->exp_days ? lc_due(mtime, r->exp_days, day_s) : r->exp_date;
        if (!best || t < when) {
            best = r;
            when = t;
        }
    }
    if (best) *expiry = when;
    return best;
}

size_t lc_expiration_header(const lc_rule_t *r, int64_t expiry, char *out, size_t cap)
{
    static const char *const wday[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t days = expiry / 86400 - (expiry % 86400 < 0), secs = expiry - days * 86400, y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 1970 || y > 9999) { /* not an HTTP date (Days near 2^31 reach year 5881637) */
        if (cap) out[0] = 0;
        return 0;
    }
    sbuf_t b = {0};
    char head[96];
    (void)snprintf(head, sizeof(head),
                   "expiry-date=\"%s, %02d %s %04lld %02d:%02d:%02d GMT\", rule-id=\"",
                   wday[((days % 7) + 7) % 7], d, mon[m - 1], (long long)y, (int)(secs / 3600),
                   (int)(secs / 60 % 60), (int)(secs % 60));
    puts_(&b, head);
    for (const unsigned char *p = (const unsigned char *)r->id; *p; p++) {
        char esc[4];
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-_.~", *p)) {
            put(&b, (const char *)p, 1);
        } else {
            (void)snprintf(esc, sizeof(esc), "%%%02X", *p);
            put(&b, esc, 3);
        }
    }
    puts_(&b, "\"");
    size_t n = b.len < cap ? b.len : 0;
    if (n)
        memcpy(out, b.p, n + 1);
    else if (cap)
        out[0] = 0;
    free(b.p);
    return n;
}

/* ---- the worker's question ---- */

lc_action_t lc_decide(const lc_config_t *c, const lc_version_t *v, int64_t now, int64_t day_s,
                      const lc_rule_t **rule, int64_t *due)
{
    const lc_rule_t *best = NULL;
    lc_action_t act = LC_ACT_NONE;
    int64_t when = -1;
    for (int i = 0; c && i < c->n; i++) {
        const lc_rule_t *r = &c->rules[i];
        int64_t t = -1;
        lc_action_t a = LC_ACT_NONE;
        if (!r->enabled) continue;
        switch (v->kind) {
        case LC_VER_CURRENT:
            if (!lc_rule_matches(r, v->key, v->tags, v->size)) break;
            a = LC_ACT_EXPIRE_CURRENT;
            if (r->exp_days)
                t = lc_due(v->mtime, r->exp_days, day_s);
            else if (r->exp_date >= 0)
                t = r->exp_date;
            break;
        case LC_VER_NONCURRENT:
            if (!r->nc_days || !lc_rule_matches(r, v->key, v->tags, v->size)) break;
            a = LC_ACT_DELETE_NONCURRENT;
            if (r->nc_newer < 0 || v->newer_noncurrent >= r->nc_newer)
                t = lc_due(v->since, r->nc_days, day_s);
            break;
        case LC_VER_LONE_MARKER:
            /* A marker has no tags and no bytes. */
            if (!lc_rule_matches(r, v->key, NULL, 0)) break;
            a = LC_ACT_DELETE_MARKER;
            if (r->exp_marker == 1)
                t = v->mtime;
            else if (r->exp_days)
                t = lc_due(v->mtime, r->exp_days, day_s);
            break;
        case LC_VER_UPLOAD:
            /* An upload has neither tags nor a size yet: only key filters can select it. */
            if (!r->abort_days || r->ntags || r->size_gt >= 0 || r->size_lt >= 0 ||
                strncmp(v->key, r->prefix, strlen(r->prefix)) != 0)
                break;
            a = LC_ACT_ABORT_UPLOAD;
            t = lc_due(v->since, r->abort_days, day_s);
            break;
        }
        if (t >= 0 && (when < 0 || t < when)) {
            when = t;
            best = r;
            act = a;
        }
    }
    if (due) *due = when;
    if (when < 0 || when > now) {
        if (rule) *rule = NULL;
        return LC_ACT_NONE;
    }
    if (rule) *rule = best;
    return act;
}
