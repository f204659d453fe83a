/*
 * s3/lifecycle (and s3/xmltree, the tree reader under it): parsing and S3's checks (each refusal
 * with the error S3 gives), the canonical form (a fixed point of parse and serialise), rule
 * matching on key, tags and size, the expiry date of x-amz-expiration
 * (rounded to the next midnight, also with a shortened day), and what the
 * worker is told to do with each kind of version.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/err.h"
#include "s3/lifecycle.h"
#include "s3/xmltree.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD        "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
#define TAIL        "</LifecycleConfiguration>"
/* One rule's elements in a configuration. */
#define RULE(inner) HEAD "<Rule>" inner "</Rule>" TAIL
#define EXP1        "<Expiration><Days>1</Days></Expiration>"

/* 2014-01-15T10:30:00Z, the user guide's example of rounding. */
#define JAN15_1030 INT64_C(1389781800)
#define JAN19      INT64_C(1390089600)
#define DAY        INT64_C(86400)

static int parse(const char *xml, lc_config_t *c, lc_error_t *e)
{
    return lc_parse(xml, strlen(xml), c, e);
}

/* The tree reader under the parser: its bounds, and what the checks ask of it. */
static void test_xmltree(void **state)
{
    (void)state;
    int nomem;
    const char *doc = "<a> <b>1</b><c> -42 </c><b>x</b><d>true</d><e/></a>";
    xml_node_t *t = xmltree_read(doc, strlen(doc), 2, 6, &nomem);
    assert_non_null(t);
    assert_false(nomem);
    assert_string_equal(t->name, "a");
    int n;
    const xml_node_t *b = xmltree_kid(t, "b", &n);
    assert_int_equal(n, 2);
    assert_string_equal(xmltree_text(b), "1");
    assert_string_equal(xmltree_text(xmltree_kid(t, "e", NULL)), "");
    assert_null(xmltree_kid(t, "z", &n));
    assert_int_equal(n, 0);
    int64_t v;
    assert_int_equal(xmltree_integer(xmltree_kid(t, "c", NULL), &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(xmltree_integer(b->next->next, &v), -1); /* "x" */
    assert_int_equal(xmltree_integer(t, &v), -1);             /* not a leaf */
    assert_int_equal(xmltree_bool(xmltree_kid(t, "d", NULL)), 1);
    assert_int_equal(xmltree_bool(b), 1); /* "1" */
    assert_true(xmltree_blank(t));
    static const char *const names[] = {"b", "c", "d", "e", NULL}, *const many[] = {"b", NULL};
    assert_true(xmltree_kids_ok(t, names, many));
    assert_false(xmltree_kids_ok(t, names, NULL));     /* b twice */
    assert_false(xmltree_kids_ok(t, names + 1, many)); /* b unknown */
    xmltree_free(t);
    xmltree_free(NULL);
    /* Bounds: depth, elements, well-formedness, DTDs, text beside elements. */
    assert_null(xmltree_read("<a><b><c/></b></a>", 18, 2, 10, &nomem));
    assert_null(xmltree_read("<a><b/><b/><b/></a>", 19, 2, 3, &nomem));
    assert_null(xmltree_read("<a><b></a>", 10, 4, 10, &nomem));
    assert_null(xmltree_read("<a/><b/>", 8, 4, 10, &nomem));
    doc = "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>";
    assert_null(xmltree_read(doc, strlen(doc), 4, 10, &nomem));
    doc = "<a>text<b/></a>";
    t = xmltree_read(doc, strlen(doc), 4, 10, &nomem);
    assert_non_null(t);
    assert_false(xmltree_kids_ok(t, names, NULL));
    xmltree_free(t);
}

static void test_full_config(void **state)
{
    (void)state;
    const char *xml =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" HEAD
        "<Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status>"
        "<Expiration><Days>30</Days></Expiration>"
        "<NoncurrentVersionExpiration><NoncurrentDays>7</NoncurrentDays>"
        "<NewerNoncurrentVersions>3</NewerNoncurrentVersions></NoncurrentVersionExpiration>"
        "<AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation>"
        "</AbortIncompleteMultipartUpload></Rule>"
        "<Rule><ID>tmp &amp; co</ID><Filter><And><Prefix>tmp/</Prefix>"
        "<Tag><Key>class</Key><Value>scratch</Value></Tag><Tag><Key>k2</Key><Value></Value></Tag>"
        "<ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>"
        "<ObjectSizeLessThan>1000</ObjectSizeLessThan></And></Filter><Status>Disabled</Status>"
        "<Expiration><Date>2099-11-10T00:00:00.000Z</Date></Expiration></Rule>"
        "<Rule><Prefix>old/</Prefix><Status>Enabled</Status>"
        "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"
        "</Rule>"
        "<Rule><Filter></Filter><Status>Enabled</Status>" EXP1 "</Rule>"
        "<Rule><Filter><Tag><Key>a</Key><Value>b</Value></Tag></Filter><Status>Enabled</"
        "Status>" EXP1 "</Rule>"
        "<Rule><Filter><ObjectSizeGreaterThan>0</ObjectSizeGreaterThan></Filter>"
        "<Status>Enabled</Status>" EXP1 "</Rule>"
        "<Rule><ID>rule-3</ID><Filter><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter>"
        "<Status>Enabled</Status>" EXP1 "</Rule>" TAIL;
    lc_config_t c;
    lc_error_t e;
    assert_int_equal(parse(xml, &c, &e), 0);
    assert_int_equal(c.n, 7);
    const lc_rule_t *r = &c.rules[0];
    assert_string_equal(r->id, "logs");
    assert_true(r->enabled);
    assert_int_equal(r->filter_form, LC_FILTER_PREFIX);
    assert_string_equal(r->prefix, "logs/");
    assert_int_equal(r->exp_days, 30);
    assert_int_equal(r->nc_days, 7);
    assert_int_equal(r->nc_newer, 3);
    assert_int_equal(r->abort_days, 2);
    r = &c.rules[1];
    assert_string_equal(r->id, "tmp & co");
    assert_false(r->enabled);
    assert_int_equal(r->filter_form, LC_FILTER_AND);
    assert_int_equal(r->ntags, 2);
    assert_string_equal(r->tags[1].key, "k2");
    assert_string_equal(r->tags[1].value, "");
    assert_int_equal(r->size_gt, 100);
    assert_int_equal(r->size_lt, 1000);
    assert_int_equal(r->exp_date, 4097952000); /* 2099-11-10 */
    assert_int_equal(r->exp_days, 0);
    r = &c.rules[2];
    assert_int_equal(r->filter_form, LC_FILTER_LEGACY);
    assert_int_equal(r->exp_marker, 1);
    /* Made-up IDs: by position, clear of the IDs given ("rule-3" is taken by the last rule). */
    assert_string_equal(c.rules[2].id, "rule-3-2");
    assert_string_equal(c.rules[3].id, "rule-4");
    assert_int_equal(c.rules[3].filter_form, LC_FILTER_EMPTY);
    assert_int_equal(c.rules[4].filter_form, LC_FILTER_TAG);
    assert_int_equal(c.rules[5].size_gt, 0);
    assert_int_equal(c.rules[6].size_lt, 5);

    /* The canonical form parses back to itself. */
    size_t len, len2;
    char *xml1 = lc_serialize(&c, &len);
    assert_int_equal(strlen(xml1), len);
    lc_config_t c2;
    assert_int_equal(lc_parse(xml1, len, &c2, &e), 0);
    assert_int_equal(c2.n, c.n);
    char *xml2 = lc_serialize(&c2, &len2);
    assert_string_equal(xml1, xml2);
    assert_non_null(strstr(xml1, "<ID>tmp &amp; co</ID>"));
    assert_non_null(strstr(xml1, "<Date>2099-11-10T00:00:00.000Z</Date>"));
    assert_non_null(strstr(xml1, "<Rule><ID>rule-3-2</ID><Prefix>old/</Prefix>"));
    assert_non_null(strstr(xml1, "<Filter></Filter>"));
    free(xml1);
    free(xml2);
    lc_free(&c2);
    lc_free(&c);
    lc_free(&c); /* stays empty */
    lc_free(NULL);
}

/* Values that must survive the round trip as they are. */
static void test_round_trip_text(void **state)
{
    (void)state;
    const char *xml = RULE("<ID>a&#13;b\tc</ID><Filter><And><Prefix></Prefix></And></Filter>"
                           "<Status>Enabled</Status>" EXP1);
    lc_config_t c, c2;
    lc_error_t e;
    assert_int_equal(parse(xml, &c, &e), 0);
    assert_string_equal(c.rules[0].id, "a\rb\tc");
    size_t len;
    char *s = lc_serialize(&c, &len);
    assert_int_equal(lc_parse(s, len, &c2, &e), 0);
    assert_string_equal(c2.rules[0].id, "a\rb\tc");
    assert_int_equal(c2.rules[0].filter_form, LC_FILTER_AND);
    free(s);
    lc_free(&c);
    lc_free(&c2);
}

static void test_dates(void **state)
{
    (void)state;
    static const struct {
        const char *date;
        int rc;
        lc_err_kind_t kind;
        int64_t want;
    } cases[] = {
        {"2099-11-10T00:00:00Z", 0, 0, 4097952000},
        {"2099-11-10", 0, 0, 4097952000},
        {" 2099-11-10T00:00:00.000Z ", 0, 0, 4097952000},
        {"2099-11-10T01:00:00+01:00", 0, 0, 4097952000},
        {"2099-11-10T00:00:00+01:00", ERR_INVAL, LC_ERR_INVALID_ARGUMENT, 0},
        {"2099-11-10T12:00:00Z", ERR_INVAL, LC_ERR_INVALID_ARGUMENT, 0},
        {"2099-11-10T00:00:00.001Z", ERR_INVAL, LC_ERR_INVALID_ARGUMENT, 0},
        {"2099-02-29T00:00:00Z", ERR_INVAL, LC_ERR_MALFORMED_XML, 0},
        {"2096-02-29T00:00:00Z", 0, 0, 3981312000},
        {"2099-13-01", ERR_INVAL, LC_ERR_MALFORMED_XML, 0},
        {"tomorrow", ERR_INVAL, LC_ERR_MALFORMED_XML, 0},
        {"2099-11-10T00:00:00Zjunk", ERR_INVAL, LC_ERR_MALFORMED_XML, 0},
        {"1969-12-31", ERR_INVAL, LC_ERR_MALFORMED_XML, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char xml[512];
        (void)snprintf(
            xml, sizeof(xml),
            RULE("<Filter/><Status>Enabled</Status><Expiration><Date>%s</Date></Expiration>"),
            cases[i].date);
        lc_config_t c;
        lc_error_t e = {0};
        int rc = parse(xml, &c, &e);
        if (rc != cases[i].rc) fail_msg("date %s: rc %d", cases[i].date, rc);
        if (rc) {
            assert_int_equal(e.kind, cases[i].kind);
            if (e.kind == LC_ERR_INVALID_ARGUMENT)
                assert_string_equal(e.message, "'Date' must be at midnight GMT");
        } else {
            assert_int_equal(c.rules[0].exp_date, cases[i].want);
            lc_free(&c);
        }
    }
}

/* Each refusal with S3's error and, where S3's wording is known, its message. */
static void test_refusals(void **state)
{
    (void)state;
    char long_id[300], xml_long[1024];
    memset(long_id, 'a', 256);
    long_id[256] = 0;
    (void)snprintf(xml_long, sizeof(xml_long),
                   RULE("<ID>%s</ID><Filter/><Status>Enabled</Status>" EXP1), long_id);
    static const struct {
        const char *xml;
        lc_err_kind_t kind;
        const char *msg; /* NULL: the standard MalformedXML message */
    } cases[] = {
        {"", LC_ERR_MALFORMED_XML, NULL},
        {"<LifecycleConfiguration>", LC_ERR_MALFORMED_XML, NULL},
        {HEAD TAIL, LC_ERR_MALFORMED_XML, NULL},
        {"<Lifecycle><Rule/></Lifecycle>", LC_ERR_MALFORMED_XML, NULL},
        {HEAD "<Rules/>" TAIL, LC_ERR_MALFORMED_XML, NULL},
        {HEAD "text<Rule><Filter/><Status>Enabled</Status>" EXP1 "</Rule>" TAIL,
         LC_ERR_MALFORMED_XML, NULL},
        {"<!DOCTYPE x [<!ENTITY a \"b\">]>" RULE("<Filter/><Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>enabled</Status>" EXP1), LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled </Status>" EXP1), LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/>" EXP1), LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Unknown/>" EXP1), LC_ERR_MALFORMED_XML, NULL},
        /* Neither Prefix nor Filter, or both. */
        {RULE("<Status>Enabled</Status>" EXP1), LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Prefix>a</Prefix><Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        /* A Filter holds one predicate; several need an And. */
        {RULE("<Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"
              "<Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><Prefix>a</Prefix><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter>"
              "<Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value>v</Value>"
              "</Tag></Filter><Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><And/></Filter><Status>Enabled</Status>" EXP1), LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><And><Prefix>a</Prefix><Prefix>b</Prefix></And></Filter>"
              "<Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><Tag><Value>v</Value></Tag></Filter><Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><ObjectSizeLessThan>ten</ObjectSizeLessThan></Filter>"
              "<Status>Enabled</Status>" EXP1),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><ObjectSizeLessThan>0</ObjectSizeLessThan></Filter>"
              "<Status>Enabled</Status>" EXP1),
         LC_ERR_INVALID_ARGUMENT, "'ObjectSizeLessThan' must be a positive integer"},
        {RULE("<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
              "<ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter>"
              "<Status>Enabled</Status>" EXP1),
         LC_ERR_INVALID_ARGUMENT, "'ObjectSizeGreaterThan' must be less than 'ObjectSizeLessThan'"},
        {RULE("<Filter><And><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>k</Key>"
              "<Value>w</Value></Tag></And></Filter><Status>Enabled</Status>" EXP1),
         LC_ERR_INVALID_REQUEST, "Duplicate Tag Keys are not allowed."},
        {RULE("<Filter><Tag><Key></Key><Value>v</Value></Tag></Filter><Status>Enabled</"
              "Status>" EXP1),
         LC_ERR_INVALID_ARGUMENT, "The TagKey you have provided is invalid"},
        /* Actions. */
        {RULE("<Filter/><Status>Enabled</Status>"), LC_ERR_INVALID_REQUEST,
         "At least one action needs to be specified in a rule"},
        {RULE("<Filter/><Status>Enabled</Status><Expiration><Days>0</Days></Expiration>"),
         LC_ERR_INVALID_ARGUMENT, "'Days' for Expiration action must be a positive integer"},
        {RULE("<Filter/><Status>Enabled</Status><Expiration><Days>-3</Days></Expiration>"),
         LC_ERR_INVALID_ARGUMENT, "'Days' for Expiration action must be a positive integer"},
        {RULE("<Filter/><Status>Enabled</Status><Expiration><Days>1.5</Days></Expiration>"),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Expiration><Days>4294967297</Days></Expiration>"),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Expiration/>"), LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Expiration><Days>1</Days>"
              "<Date>2099-11-10T00:00:00Z</Date></Expiration>"),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Expiration><Days>1</Days>"
              "<ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><Expiration>"
              "<ExpiredObjectDeleteMarker>yes</ExpiredObjectDeleteMarker></Expiration>"),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status>"
              "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>"
              "</Expiration>"),
         LC_ERR_INVALID_REQUEST, "ExpiredObjectDeleteMarker cannot be specified with tags."},
        {RULE("<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration>"
              "<NoncurrentDays>0</NoncurrentDays></NoncurrentVersionExpiration>"),
         LC_ERR_INVALID_ARGUMENT,
         "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer"},
        {RULE("<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration>"
              "<NewerNoncurrentVersions>2</NewerNoncurrentVersions>"
              "</NoncurrentVersionExpiration>"),
         LC_ERR_MALFORMED_XML, NULL},
        {RULE("<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration>"
              "<NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>101"
              "</NewerNoncurrentVersions></NoncurrentVersionExpiration>"),
         LC_ERR_INVALID_ARGUMENT,
         "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a positive "
         "integer up to 100"},
        {RULE("<Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload>"
              "<DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>"),
         LC_ERR_INVALID_ARGUMENT,
         "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive "
         "integer"},
        {RULE("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status>"
              "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"
              "</AbortIncompleteMultipartUpload>"),
         LC_ERR_INVALID_REQUEST, "AbortIncompleteMultipartUpload cannot be specified with Tags."},
        {RULE("<Filter/><Status>Enabled</Status><Transition><Days>30</Days>"
              "<StorageClass>GLACIER</StorageClass></Transition>"),
         LC_ERR_NOT_IMPLEMENTED, NULL},
        /* IDs. */
        {HEAD "<Rule><ID>x</ID><Filter/><Status>Enabled</Status>" EXP1 "</Rule>"
              "<Rule><ID>x</ID><Filter/><Status>Disabled</Status>" EXP1 "</Rule>" TAIL,
         LC_ERR_INVALID_ARGUMENT, "Rule ID must be unique. Found same ID for more than one rule"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) + 1; i++) {
        const char *xml = i < sizeof(cases) / sizeof(cases[0]) ? cases[i].xml : xml_long;
        lc_err_kind_t kind =
            i < sizeof(cases) / sizeof(cases[0]) ? cases[i].kind : LC_ERR_INVALID_ARGUMENT;
        const char *msg = i < sizeof(cases) / sizeof(cases[0])
                              ? cases[i].msg
                              : "ID length should not exceed allowed limit of 255";
        lc_config_t c;
        lc_error_t e = {0};
        int rc = parse(xml, &c, &e);
        if (rc != ERR_INVAL) fail_msg("case %zu accepted (%d): %s", i, rc, xml);
        if (e.kind != kind) fail_msg("case %zu: kind %d, want %d: %s", i, e.kind, kind, xml);
        if (msg && strcmp(e.message, msg) != 0) fail_msg("case %zu: %s", i, e.message);
        if (!msg && kind == LC_ERR_MALFORMED_XML)
            assert_non_null(strstr(e.message, "not well-formed"));
        assert_int_equal(c.n, 0);
        assert_null(c.rules);
    }
    /* 255 characters (here 255 two-byte ones) are fine. */
    char xml[2048], id[600] = "";
    for (int i = 0; i < 255; i++)
        memcpy(id + (size_t)2 * i, "\xc3\xa9", 3); /* with the NUL after the last */
    (void)snprintf(xml, sizeof(xml), RULE("<ID>%s</ID><Filter/><Status>Enabled</Status>" EXP1), id);
    lc_config_t c;
    lc_error_t e;
    assert_int_equal(parse(xml, &c, &e), 0);
    lc_free(&c);
}

/* The biggest body of the smallest elements is refused in time linear in its size. */
static void test_many_elements(void **state)
{
    (void)state;
    size_t cap = LC_BODY_MAX + 1, len;
    char *xml = malloc(cap);
    static const char *const heads[] = {"", "<Rule><Filter><And>", "<Rule><Filter><And>"};
    static const char *const units[] = {"<Rule/>", "<Tag/>",
                                        "<Tag><Key>k</Key><Value>v</Value></Tag>"};
    for (int f = 0; f < 3; f++) {
        len = (size_t)snprintf(xml, cap, "%s%s", HEAD, heads[f]);
        /* 60000 Rules stay under the element cap: kids_ok sees them all. */
        while (len + strlen(units[f]) < cap - 1 && (f || len < (size_t)60000 * 7))
            len += (size_t)snprintf(xml + len, cap - len, "%s", units[f]);
        lc_config_t c;
        lc_error_t e;
        assert_int_equal(lc_parse(xml, len, &c, &e), ERR_INVAL);
    }
    /* 50 tags in an And are fine, 51 are not. */
    for (int n = 50; n <= 51; n++) {
        len = (size_t)snprintf(xml, cap, "%s<Rule><Filter><And>", HEAD);
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(xml + len, cap - len,
                                    "<Tag><Key>k%d</Key><Value>v</Value></Tag>", i);
        len += (size_t)snprintf(xml + len, cap - len,
                                "</And></Filter><Status>Enabled</Status>" EXP1 "</Rule>" TAIL);
        lc_config_t c;
        lc_error_t e;
        int rc = lc_parse(xml, len, &c, &e);
        if (n == 50) {
            assert_int_equal(rc, 0);
            assert_int_equal(c.rules[0].ntags, 50);
            lc_free(&c);
        } else {
            assert_int_equal(rc, ERR_INVAL);
            assert_int_equal(e.kind, LC_ERR_INVALID_ARGUMENT);
        }
    }
    free(xml);
}

/* 1000 rules are fine, 1001 are not. */
static void test_rule_limit(void **state)
{
    (void)state;
    for (int n = 1000; n <= 1001; n++) {
        size_t cap = 100 + (size_t)n * 120, len = 0;
        char *xml = malloc(cap);
        len += (size_t)snprintf(xml + len, cap - len, HEAD);
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(
                xml + len, cap - len,
                "<Rule><ID>r%d</ID><Filter/><Status>Enabled</Status>" EXP1 "</Rule>", i);
        len += (size_t)snprintf(xml + len, cap - len, TAIL);
        lc_config_t c;
        lc_error_t e;
        int rc = lc_parse(xml, len, &c, &e);
        if (n == 1000) {
            assert_int_equal(rc, 0);
            assert_int_equal(c.n, 1000);
            lc_free(&c);
        } else {
            assert_int_equal(rc, ERR_INVAL);
            assert_int_equal(e.kind, LC_ERR_INVALID_ARGUMENT);
        }
        free(xml);
    }
}

static lc_config_t must_parse(const char *xml)
{
    lc_config_t c;
    lc_error_t e = {0};
    if (parse(xml, &c, &e) != 0) fail_msg("refused (%s): %s", e.message, xml);
    return c;
}

static void test_matching(void **state)
{
    (void)state;
    lc_config_t c = must_parse(
        HEAD
        "<Rule><Filter><And><Prefix>p/</Prefix><Tag><Key>a&amp;b</Key><Value>x=y%</Value>"
        "</Tag><Tag><Key>t</Key><Value>1 2+3</Value></Tag>"
        "<ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
        "<ObjectSizeLessThan>20</ObjectSizeLessThan></And></Filter><Status>Enabled</Status>" EXP1
        "</Rule>" TAIL);
    const lc_rule_t *r = &c.rules[0];
    /* Tags as the tagging code keeps them: %, &, =, + escaped. */
    const char *tags = "t=1 2%2B3&other=&a%26b=x%3Dy%25";
    assert_true(lc_rule_matches(r, "p/k", tags, 11));
    assert_true(lc_rule_matches(r, "p/k", tags, 19));
    assert_false(lc_rule_matches(r, "p/k", tags, 10)); /* strictly greater */
    assert_false(lc_rule_matches(r, "p/k", tags, 20)); /* strictly less */
    assert_false(lc_rule_matches(r, "q/k", tags, 15));
    assert_false(lc_rule_matches(r, "p", tags, 15));
    assert_false(lc_rule_matches(r, "p/k", "t=1 2%2B3", 15));
    assert_false(lc_rule_matches(r, "p/k", "t=1 2%2B3&a%26b=x%3Dy", 15));
    assert_false(lc_rule_matches(r, "p/k", "t=1 2%2B3&a%26b=x%3Dy%25%25", 15));
    assert_false(lc_rule_matches(r, "p/k", NULL, 15));
    assert_false(lc_rule_matches(r, "p/k", "", 15));
    assert_false(lc_rule_matches(r, "p/k", "t=1 2%2B3&a%26b", 15)); /* no value: "" */
    lc_free(&c);
    c = must_parse(RULE("<Filter><Tag><Key>k</Key><Value></Value></Tag></Filter>"
                        "<Status>Enabled</Status>" EXP1));
    assert_true(lc_rule_matches(&c.rules[0], "any", "k", 0));
    assert_true(lc_rule_matches(&c.rules[0], "any", "j=1&k=", 0));
    assert_false(lc_rule_matches(&c.rules[0], "any", "k=1", 0));
    assert_false(lc_rule_matches(&c.rules[0], "any", "kk=", 0));
    lc_free(&c);
    c = must_parse(RULE("<Prefix></Prefix><Status>Enabled</Status>" EXP1));
    assert_true(lc_rule_matches(&c.rules[0], "", NULL, 0));
    assert_true(lc_rule_matches(&c.rules[0], "anything", "a=b", 1ull << 40));
    lc_free(&c);
}

static void test_expiry(void **state)
{
    (void)state;
    /* The user guide: created 1/15/2014 10:30 UTC, 3 days: expires 1/19/2014 00:00 UTC. */
    assert_int_equal(lc_due(JAN15_1030, 3, LC_DAY_SECONDS), JAN19);
    /* Exactly at midnight: the next midnight after t + days. */
    assert_int_equal(lc_due(JAN19 - DAY * 3, 3, LC_DAY_SECONDS), JAN19 + 86400);
    assert_int_equal(lc_due(JAN19 - 1, 0, LC_DAY_SECONDS), JAN19);
    /* A 10-second day. */
    assert_int_equal(lc_due(1005, 2, 10), 1030);
    assert_int_equal(lc_due(1000, 2, 10), 1030);
    assert_int_equal(lc_due(1009, 1, 10), 1020);
    assert_int_equal(lc_due(-5, 0, 10), 0);
    assert_int_equal(lc_due(1005, 2, 0), lc_due(1005, 2, LC_DAY_SECONDS));

    lc_config_t c = must_parse(
        HEAD "<Rule><ID>off</ID><Filter/><Status>Disabled</Status><Expiration><Days>1</Days>"
             "</Expiration></Rule>"
             "<Rule><ID>markers</ID><Filter/><Status>Enabled</Status><Expiration>"
             "<ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>"
             "<Rule><ID>ten days</ID><Filter/><Status>Enabled</Status><Expiration><Days>10"
             "</Days></Expiration></Rule>"
             "<Rule><ID>pics/\xc3\xa9</ID><Filter><Prefix>pics/</Prefix></Filter>"
             "<Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule>"
             "<Rule><ID>also-3</ID><Filter><Prefix>pics/</Prefix></Filter>"
             "<Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule>"
             "<Rule><ID>picture-deletion-rule</ID><Filter><Prefix>old/</Prefix></Filter>"
             "<Status>Enabled</Status><Expiration><Date>2012-12-23T00:00:00Z</Date>"
             "</Expiration></Rule>" TAIL);
    int64_t t = 0;
    const lc_rule_t *r = lc_expiry(&c, "a", NULL, 1, JAN15_1030, LC_DAY_SECONDS, &t);
    assert_non_null(r);
    assert_string_equal(r->id, "ten days");
    assert_int_equal(t, JAN19 + 7 * DAY); /* 1/25 10:30 rounds to 1/26 */
    /* The earliest wins; on a tie the first rule. */
    r = lc_expiry(&c, "pics/x", NULL, 1, JAN15_1030, LC_DAY_SECONDS, &t);
    assert_string_equal(r->id, "pics/\xc3\xa9");
    assert_int_equal(t, JAN19);
    char h[256];
    size_t n = lc_expiration_header(r, t, h, sizeof(h));
    assert_int_equal(n, strlen(h));
    assert_string_equal(h, "expiry-date=\"Sun, 19 Jan 2014 00:00:00 GMT\", "
                           "rule-id=\"pics%2F%C3%A9\"");
    /* The example of the API reference. */
    r = lc_expiry(&c, "old/y", NULL, 1, JAN15_1030, LC_DAY_SECONDS, &t);
    assert_string_equal(r->id, "picture-deletion-rule");
    lc_expiration_header(r, t, h, sizeof(h));
    assert_string_equal(h, "expiry-date=\"Sun, 23 Dec 2012 00:00:00 GMT\", "
                           "rule-id=\"picture-deletion-rule\"");
    /* Not at midnight (a short day), and a buffer too small. */
    lc_expiration_header(r, 1030, h, sizeof(h));
    assert_non_null(strstr(h, "\"Thu, 01 Jan 1970 00:17:10 GMT\""));
    assert_int_equal(lc_expiration_header(r, t, h, 20), 0);
    assert_string_equal(h, "");
    lc_free(&c);
    /* No rule with Days or Date: no header. */
    c = must_parse(RULE("<Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload>"
                        "<DaysAfterInitiation>1</DaysAfterInitiation>"
                        "</AbortIncompleteMultipartUpload>"));
    assert_null(lc_expiry(&c, "a", NULL, 1, JAN15_1030, LC_DAY_SECONDS, &t));
    assert_null(lc_expiry(NULL, "a", NULL, 1, JAN15_1030, LC_DAY_SECONDS, &t));
    lc_free(&c);
}

/* 2023-12-25 (a Monday) for the weekday check of the header. */
static void test_weekdays(void **state)
{
    (void)state;
    lc_rule_t r = {0};
    r.id = "x";
    char h[128];
    static const char *const want[] = {"Mon, 25 Dec 2023", "Tue, 26 Dec 2023", "Wed, 27 Dec 2023",
                                       "Thu, 28 Dec 2023", "Fri, 29 Dec 2023", "Sat, 30 Dec 2023",
                                       "Sun, 31 Dec 2023", "Mon, 01 Jan 2024"};
    for (int i = 0; i < 8; i++) {
        lc_expiration_header(&r, 1703462400 + (int64_t)i * 86400, h, sizeof(h));
        if (!strstr(h, want[i])) fail_msg("%d: %s", i, h);
    }
}

static void test_decide(void **state)
{
    (void)state;
    lc_config_t c = must_parse(
        HEAD "<Rule><ID>cur</ID><Filter><Prefix>c/</Prefix></Filter><Status>Enabled</Status>"
             "<Expiration><Days>2</Days></Expiration></Rule>"
             "<Rule><ID>date</ID><Filter><Prefix>d/</Prefix></Filter><Status>Enabled</Status>"
             "<Expiration><Date>2014-01-19T00:00:00Z</Date></Expiration></Rule>"
             "<Rule><ID>nc</ID><Filter><Prefix>n/</Prefix></Filter><Status>Enabled</Status>"
             "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
             "<NewerNoncurrentVersions>2</NewerNoncurrentVersions>"
             "</NoncurrentVersionExpiration></Rule>"
             "<Rule><ID>dm</ID><Filter><Prefix>m/</Prefix></Filter><Status>Enabled</Status>"
             "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>"
             "</Expiration></Rule>"
             "<Rule><ID>up</ID><Filter><Prefix>u/</Prefix></Filter><Status>Enabled</Status>"
             "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"
             "</AbortIncompleteMultipartUpload></Rule>"
             "<Rule><ID>up-size</ID><Filter><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter>"
             "<Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
             "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
             "<Rule><ID>off</ID><Filter/><Status>Disabled</Status><Expiration><Days>1</Days>"
             "</Expiration><AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
             "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>" TAIL);
    const lc_rule_t *r;
    int64_t due;
    lc_version_t v = {LC_VER_CURRENT, "c/1", NULL, 5, JAN15_1030, 0, 0};
    /* Due at 1/18 00:00: not a second before. */
    assert_int_equal(lc_decide(&c, &v, JAN19 - 86400 - 1, 86400, &r, &due), LC_ACT_NONE);
    assert_null(r);
    assert_int_equal(due, JAN19 - 86400);
    assert_int_equal(lc_decide(&c, &v, JAN19 - 86400, 86400, &r, &due), LC_ACT_EXPIRE_CURRENT);
    assert_string_equal(r->id, "cur");
    v.key = "d/1";
    assert_int_equal(lc_decide(&c, &v, JAN19, 86400, &r, &due), LC_ACT_EXPIRE_CURRENT);
    assert_string_equal(r->id, "date");
    assert_int_equal(due, JAN19);
    v.key = "x/1"; /* no rule selects it */
    assert_int_equal(lc_decide(&c, &v, JAN19 * 2, 86400, &r, &due), LC_ACT_NONE);
    assert_int_equal(due, -1);
    /* Noncurrent: a day after it stopped being current, once two newer ones are kept. */
    v = (lc_version_t){LC_VER_NONCURRENT, "n/1", NULL, 5, 0, JAN15_1030, 1};
    assert_int_equal(lc_decide(&c, &v, JAN19 * 2, 86400, &r, &due), LC_ACT_NONE);
    assert_int_equal(due, -1);
    v.newer_noncurrent = 2;
    assert_int_equal(lc_decide(&c, &v, JAN19 - 3 * DAY, 86400, &r, &due), LC_ACT_NONE);
    assert_int_equal(due, JAN19 - 2 * DAY);
    assert_int_equal(lc_decide(&c, &v, JAN19, 86400, &r, &due), LC_ACT_DELETE_NONCURRENT);
    assert_string_equal(r->id, "nc");
    /* A current version is not touched by noncurrent rules, nor the other way round. */
    v.kind = LC_VER_CURRENT;
    assert_int_equal(lc_decide(&c, &v, JAN19 * 2, 86400, &r, &due), LC_ACT_NONE);
    v = (lc_version_t){LC_VER_NONCURRENT, "c/1", NULL, 5, 0, JAN15_1030, 9};
    assert_int_equal(lc_decide(&c, &v, JAN19 * 2, 86400, &r, &due), LC_ACT_NONE);
    /* Lone delete markers: at once with ExpiredObjectDeleteMarker, after Days with Days. */
    v = (lc_version_t){LC_VER_LONE_MARKER, "m/1", NULL, 0, JAN15_1030, 0, 0};
    assert_int_equal(lc_decide(&c, &v, JAN15_1030, 86400, &r, &due), LC_ACT_DELETE_MARKER);
    assert_string_equal(r->id, "dm");
    v.key = "c/1";
    assert_int_equal(lc_decide(&c, &v, JAN19 - 86400 - 1, 86400, &r, &due), LC_ACT_NONE);
    assert_int_equal(lc_decide(&c, &v, JAN19 - 86400, 86400, &r, &due), LC_ACT_DELETE_MARKER);
    v.key = "d/1"; /* Date rules leave markers alone */
    assert_int_equal(lc_decide(&c, &v, JAN19 * 2, 86400, &r, &due), LC_ACT_NONE);
    /* Uploads: only rules on the key alone (the size rule never selects one). */
    v = (lc_version_t){LC_VER_UPLOAD, "u/1", NULL, 0, 0, JAN15_1030, 0};
    assert_int_equal(lc_decide(&c, &v, JAN19 - 2 * DAY - 1, 86400, &r, &due), LC_ACT_NONE);
    assert_int_equal(lc_decide(&c, &v, JAN19 - 2 * DAY, 86400, &r, &due), LC_ACT_ABORT_UPLOAD);
    assert_string_equal(r->id, "up");
    v.key = "z/1";
    assert_int_equal(lc_decide(&c, &v, JAN19 * 2, 86400, &r, &due), LC_ACT_NONE);
    assert_int_equal(due, -1);
    /* A short day: the debug setting. */
    v = (lc_version_t){LC_VER_CURRENT, "c/1", NULL, 5, 1005, 0, 0};
    assert_int_equal(lc_decide(&c, &v, 1029, 10, &r, &due), LC_ACT_NONE);
    assert_int_equal(due, 1030);
    assert_int_equal(lc_decide(&c, &v, 1030, 10, NULL, NULL), LC_ACT_EXPIRE_CURRENT);
    lc_free(&c);
}

/* Random damage to a good configuration: never a crash or a leak (under ASan); whatever is
 * accepted serialises to a fixed point. */
static void test_mutations(void **state)
{
    (void)state;
    const char *base =
        HEAD "<Rule><ID>a</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>k</Key><Value>v</Value>"
             "</Tag><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan></And></Filter>"
             "<Status>Enabled</Status><Expiration><Days>3</Days></Expiration>"
             "<NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays>"
             "</NoncurrentVersionExpiration></Rule><Rule><Prefix>x</Prefix>"
             "<Status>Disabled</Status><Expiration><Date>2030-01-01</Date></Expiration>"
             "</Rule>" TAIL;
    size_t bl = strlen(base);
    char *buf = malloc(bl + 1);
    int accepted = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        memcpy(buf, base, bl + 1);
        int edits = 1 + (int)(tl_mix(i) % 3);
        for (int j = 0; j < edits; j++) {
            uint64_t m = tl_mix(i * 7 + (uint64_t)j);
            buf[m % bl] = "<>/a0-9 &;TZ\x01"[(m >> 32) % 13];
        }
        lc_config_t c, c2;
        lc_error_t e;
        if (lc_parse(buf, bl, &c, &e) != 0) {
            assert_non_null(e.message);
            continue;
        }
        accepted++;
        size_t l1, l2;
        char *s1 = lc_serialize(&c, &l1);
        assert_int_equal(lc_parse(s1, l1, &c2, &e), 0);
        char *s2 = lc_serialize(&c2, &l2);
        assert_string_equal(s1, s2);
        free(s1);
        free(s2);
        lc_free(&c);
        lc_free(&c2);
    }
    assert_true(accepted > 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xmltree),         cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_round_trip_text), cmocka_unit_test(test_dates),
        cmocka_unit_test(test_refusals),        cmocka_unit_test(test_rule_limit),
        cmocka_unit_test(test_many_elements),   cmocka_unit_test(test_matching),
        cmocka_unit_test(test_expiry),          cmocka_unit_test(test_weekdays),
        cmocka_unit_test(test_decide),          cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
