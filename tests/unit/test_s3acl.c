/*
 * s3/acl: the x-amz-grant-* header parser, the AccessControlPolicy parser,
 * the stored form (round trips, and every malformed value refused), and
 * what an ACL gives whom (s3_acl_perms: never more than the grants name).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/err.h"
#include "s3/acl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL  "http://acs.amazonaws.com/groups/global/AllUsers"
#define AUTH "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
#define LOG  "http://acs.amazonaws.com/groups/s3/LogDelivery"

static s3_acl_t acl; /* 7 KiB: not on the stack */

static int header(const char *v, int perm)
{
    acl.n = 0;
    return s3_acl_parse_header(v, perm, &acl);
}

static void test_header(void **state)
{
    (void)state;
    assert_int_equal(header("id=\"AK2\"", S3_PERM_READ), 0);
    assert_int_equal(acl.n, 1);
    assert_int_equal(acl.g[0].type, S3_GRANTEE_USER);
    assert_int_equal(acl.g[0].perm, S3_PERM_READ);
    assert_string_equal(acl.g[0].id, "AK2");
    /* Several, with blanks, unquoted, any case of the type. */
    assert_int_equal(
        header(" id=\"AK2\" ,uri=\"" ALL "\", URI = " AUTH " ,emailAddress=\"a@b\"", S3_PERM_FULL),
        0);
    assert_int_equal(acl.n, 4);
    assert_int_equal(acl.g[1].type, S3_GRANTEE_ALL);
    assert_int_equal(acl.g[2].type, S3_GRANTEE_AUTH);
    assert_int_equal(acl.g[3].type, S3_GRANTEE_EMAIL);
    assert_string_equal(acl.g[3].id, "");
    for (int i = 0; i < 4; i++)
        assert_int_equal(acl.g[i].perm, S3_PERM_FULL);
    assert_int_equal(header("uri=\"" LOG "\"", S3_PERM_WRITE), 0);
    assert_int_equal(acl.g[0].type, S3_GRANTEE_LOG);
    /* IDs no one can have are kept apart, not truncated or mangled into someone's. */
    char longid[100];
    snprintf(longid, sizeof(longid), "id=%0*d", S3_ACL_ID_MAX + 1, 0);
    assert_int_equal(header(longid, S3_PERM_READ), 0);
    assert_int_equal(acl.g[0].type, S3_GRANTEE_BAD_ID);
    assert_int_equal(header("id=\"a b\"", S3_PERM_READ), 0);
    assert_int_equal(acl.g[0].type, S3_GRANTEE_BAD_ID);
    assert_int_equal(header("id=\"a,b\"", S3_PERM_READ), 0); /* quoted: one ID with a comma */
    assert_int_equal(acl.g[0].type, S3_GRANTEE_BAD_ID);
    /* Malformed. */
    static const char *const bad[] = {
        "",
        "   ",
        "id",
        "id=",
        "id=\"\"",
        "=\"AK2\"",
        "id=\"AK2",
        "id=\"AK2\" x",
        "id=\"AK2\",",
        "id=\"AK2\",,id=\"AK\"",
        "user=\"AK2\"",
        "uri=\"http://acs.amazonaws.com/groups/global/Everyone\"",
        "uri=\"" ALL "/\"",
        "emailAddress=\"\"",
        "idd=\"AK2\"",
        "averyveryverylongtype=\"x\"",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(header(bad[i], S3_PERM_READ), ERR_INVAL);
    /* Only the five permissions. */
    assert_int_equal(header("id=AK2", 3), ERR_INVAL);
    assert_int_equal(header("id=AK2", 0), ERR_INVAL);
    /* At most S3_ACL_MAX_GRANTS over all the headers of a request. */
    acl.n = 0;
    for (int i = 0; i < S3_ACL_MAX_GRANTS; i++)
        assert_int_equal(s3_acl_parse_header("uri=" ALL, S3_PERM_READ, &acl), 0);
    assert_int_equal(s3_acl_parse_header("uri=" ALL, S3_PERM_READ, &acl), ERR_INVAL);
    assert_int_equal(acl.n, S3_ACL_MAX_GRANTS);
}

#define POLICY(owner, grants)                                                                      \
    "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" owner                \
    "<AccessControlList>" grants "</AccessControlList></AccessControlPolicy>"
#define OWNER "<Owner><ID>AK</ID><DisplayName>AK</DisplayName></Owner>"
#define GRANT_T(type, grantee, p)                                                                  \
    "<Grant>" XSI(type) grantee "</Grantee><Permission>" p "</Permission></Grant>"
#define GRANT(grantee, p) GRANT_T("CanonicalUser", grantee, p)
#define XSI(type)                                                                                  \
    "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"" type "\">"

static int xml(const char *body, char owner[S3_ACL_ID_MAX + 1])
{
    return s3_acl_parse_xml(body, strlen(body), owner, S3_ACL_ID_MAX + 1, &acl);
}

static void test_xml(void **state)
{
    (void)state;
    char owner[S3_ACL_ID_MAX + 1];
    const char *ok = POLICY(
        OWNER, "<Grant>" XSI(
                   "CanonicalUser") "<ID>AK2</ID><DisplayName>x</DisplayName>"
                                    "</Grantee><Permission>READ_ACP</Permission></Grant>" GRANT_T(
                                        "Group", "<URI>" ALL "</URI>",
                                        "WRITE") GRANT_T("Group", "<URI>" AUTH "</URI>", "READ")
                                        GRANT_T("AmazonCustomerByEmail",
                                                "<EmailAddress>a@b.c</EmailAddress>", "WRITE_ACP")
                                            GRANT("<ID>AK</ID>", "FULL_CONTROL"));
    assert_int_equal(xml(ok, owner), 0);
    assert_string_equal(owner, "AK");
    assert_int_equal(acl.n, 5);
    assert_int_equal(acl.g[0].type, S3_GRANTEE_USER);
    assert_string_equal(acl.g[0].id, "AK2");
    assert_int_equal(acl.g[0].perm, S3_PERM_READ_ACP);
    assert_int_equal(acl.g[1].type, S3_GRANTEE_ALL);
    assert_int_equal(acl.g[1].perm, S3_PERM_WRITE);
    assert_int_equal(acl.g[2].type, S3_GRANTEE_AUTH);
    assert_int_equal(acl.g[3].type, S3_GRANTEE_EMAIL);
    assert_int_equal(acl.g[3].perm, S3_PERM_WRITE_ACP);
    assert_int_equal(acl.g[4].perm, S3_PERM_FULL);
    /* The namespace decides, not the prefix, and it may be declared further up. */
    assert_int_equal(
        xml("<AccessControlPolicy xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\">" OWNER
            "<AccessControlList><Grant><Grantee i:type=\"Group\"><URI>" ALL "</URI></Grantee>"
            "<Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>",
            owner),
        0);
    assert_int_equal(acl.n, 1);
    assert_int_equal(acl.g[0].type, S3_GRANTEE_ALL);
    /* No grants (revoke all), no list at all, no Owner (the caller refuses that). */
    assert_int_equal(xml(POLICY(OWNER, ""), owner), 0);
    assert_int_equal(acl.n, 0);
    assert_int_equal(xml("<AccessControlPolicy>" OWNER "</AccessControlPolicy>", owner), 0);
    assert_int_equal(acl.n, 0);
    assert_int_equal(xml(POLICY("", GRANT_T("Group", "<URI>" ALL "</URI>", "READ")), owner), 0);
    assert_string_equal(owner, "");
    assert_int_equal(xml(POLICY("<Owner><DisplayName>AK</DisplayName></Owner>", ""), owner), 0);
    assert_string_equal(owner, "");
    /* An owner ID longer than the room comes back as none, not cut short. */
    assert_int_equal(
        xml(POLICY("<Owner><ID>AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                   "</ID></Owner>",
                   ""),
            owner),
        0);
    assert_string_equal(owner, "");
    /* Malformed. */
    static const char *const bad[] = {
        "",
        "<AccessControlPolicy>",
        "<Policy/>",
        "<!DOCTYPE x [<!ENTITY e \"AK2\">]><AccessControlPolicy/>",
        POLICY(OWNER OWNER, ""),
        POLICY("<Owner><ID>AK</ID><ID>AK</ID></Owner>", ""),
        POLICY("<Owner><ID><x/></ID></Owner>", ""),
        POLICY("<Owner><Name>AK</Name></Owner>", ""),
        POLICY(OWNER, GRANT("<ID>AK2</ID>", "read")),
        POLICY(OWNER, GRANT("<ID>AK2</ID>", "")),
        POLICY(OWNER, GRANT("<ID>AK2</ID>", "READ,WRITE")),
        POLICY(OWNER, "<Grant><Grantee><ID>AK2</ID></Grantee></Grant>"),
        POLICY(OWNER, "<Grant><Permission>READ</Permission></Grant>"),
        POLICY(OWNER, "<Grant><Grantee><ID>AK2</ID></Grantee><Grantee><ID>AK3</ID></Grantee>"
                      "<Permission>READ</Permission></Grant>"),
        POLICY(OWNER, "<Grant><Grantee><ID>AK2</ID></Grantee><Permission>READ</Permission>"
                      "<Permission>WRITE</Permission></Grant>"),
        POLICY(OWNER, GRANT("<ID>AK2</ID><URI>" ALL "</URI>", "READ")),
        POLICY(OWNER, GRANT("<ID>AK2</ID><ID>AK</ID>", "READ")),
        POLICY(OWNER, GRANT("<DisplayName>AK2</DisplayName>", "READ")),
        POLICY(OWNER, GRANT("", "READ")),
        POLICY(OWNER, GRANT_T("Group", "<URI>" ALL "x</URI>", "READ")),
        POLICY(OWNER, GRANT_T("Group", "<URI>http://acs.amazonaws.com/groups/global/allusers</URI>",
                              "READ")),
        POLICY(OWNER, GRANT("<Nickname>AK2</Nickname>", "READ")),
        POLICY(OWNER, GRANT("<ID><b>AK2</b></ID>", "READ")),
        POLICY(OWNER, "<Rule/>"),
        POLICY(OWNER, "text"),
        "<AccessControlPolicy>" OWNER "<AccessControlList/><AccessControlList/>"
        "</AccessControlPolicy>",
        "<AccessControlPolicy>" OWNER "<Extra/></AccessControlPolicy>",
        POLICY(OWNER, "<Grant><Grantee><ID>A<Grant/></ID></Grantee></Grant>"),
        /* xsi:type: required, and the kind given. */
        POLICY(OWNER,
               "<Grant><Grantee><ID>AK2</ID></Grantee><Permission>READ</Permission></Grant>"),
        POLICY(OWNER, GRANT_T("Group", "<ID>AK2</ID>", "READ")),
        POLICY(OWNER, GRANT_T("CanonicalUser", "<URI>" ALL "</URI>", "READ")),
        POLICY(OWNER, GRANT_T("Group", "<EmailAddress>a@b.c</EmailAddress>", "READ")),
        POLICY(OWNER, GRANT_T("canonicaluser", "<ID>AK2</ID>", "READ")),
        POLICY(OWNER, GRANT_T("User", "<ID>AK2</ID>", "READ")),
        POLICY(OWNER, "<Grant><Grantee xsi:type=\"CanonicalUser\"><ID>AK2</ID></Grantee>"
                      "<Permission>READ</Permission></Grant>"), /* xsi unbound */
        POLICY(OWNER,
               "<Grant><Grantee xmlns:xsi=\"http://example.com/\" xsi:type=\"CanonicalUser\">"
               "<ID>AK2</ID></Grantee><Permission>READ</Permission></Grant>"),
        POLICY(OWNER, "<Grant><Grantee type=\"CanonicalUser\"><ID>AK2</ID></Grantee>"
                      "<Permission>READ</Permission></Grant>"),
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (xml(bad[i], owner) != ERR_INVAL) fail_msg("accepted: %s", bad[i]);
    }
    /* S3_ACL_MAX_GRANTS grants, and not one more. */
    size_t cap = 200 + (S3_ACL_MAX_GRANTS + 1) * 256;
    char *big = malloc(cap);
    assert_non_null(big);
    for (int n = S3_ACL_MAX_GRANTS; n <= S3_ACL_MAX_GRANTS + 1; n++) {
        size_t len =
            (size_t)snprintf(big, cap, "<AccessControlPolicy>" OWNER "<AccessControlList>");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(big + len, cap - len, "%s",
                                    GRANT_T("Group", "<URI>" ALL "</URI>", "READ"));
        len += (size_t)snprintf(big + len, cap - len, "</AccessControlList></AccessControlPolicy>");
        assert_int_equal(s3_acl_parse_xml(big, len, owner, sizeof(owner), &acl),
                         n == S3_ACL_MAX_GRANTS ? 0 : ERR_INVAL);
    }
    free(big);
}

static void test_stored(void **state)
{
    (void)state;
    static s3_acl_t back;
    char out[S3_ACL_STORED_MAX];
    assert_int_equal(header("id=AK2, uri=" ALL ", uri=" AUTH, S3_PERM_WRITE_ACP), 0);
    assert_int_equal(s3_acl_parse_header("id=AK", S3_PERM_FULL, &acl), 0);
    assert_int_equal(s3_acl_encode(&acl, out, sizeof(out)), 0);
    assert_string_equal(out, "+cuAK2,cA,cU,fuAK");
    assert_true(s3_acl_is_grants(out));
    assert_int_equal(s3_acl_decode(out, &back), 0);
    assert_int_equal(back.n, 4);
    assert_memory_equal(back.g, acl.g, sizeof(acl.g[0]) * 4);
    /* No grants. */
    acl.n = 0;
    assert_int_equal(s3_acl_encode(&acl, out, sizeof(out)), 0);
    assert_string_equal(out, "+");
    assert_int_equal(s3_acl_decode("+", &back), 0);
    assert_int_equal(back.n, 0);
    /* What cannot be stored: e-mail, LogDelivery, bad IDs; a small buffer. */
    assert_int_equal(header("emailAddress=a@b", S3_PERM_READ), 0);
    assert_int_equal(s3_acl_encode(&acl, out, sizeof(out)), ERR_INVAL);
    assert_int_equal(header("uri=" LOG, S3_PERM_READ), 0);
    assert_int_equal(s3_acl_encode(&acl, out, sizeof(out)), ERR_INVAL);
    assert_int_equal(header("id=\"a b\"", S3_PERM_READ), 0);
    assert_int_equal(s3_acl_encode(&acl, out, sizeof(out)), ERR_INVAL);
    assert_int_equal(header("id=AK2", S3_PERM_READ), 0);
    assert_int_equal(s3_acl_encode(&acl, out, 6), ERR_INVAL);
    assert_int_equal(s3_acl_encode(&acl, out, 7), 0);
    assert_string_equal(out, "+ruAK2");
    /* The largest list fits S3_ACL_STORED_MAX. */
    acl.n = S3_ACL_MAX_GRANTS;
    for (int i = 0; i < acl.n; i++) {
        acl.g[i].type = S3_GRANTEE_USER;
        acl.g[i].perm = S3_PERM_FULL;
        memset(acl.g[i].id, 'Z', S3_ACL_ID_MAX);
        acl.g[i].id[S3_ACL_ID_MAX] = 0;
    }
    assert_int_equal(s3_acl_encode(&acl, out, sizeof(out)), 0);
    assert_int_equal(s3_acl_decode(out, &back), 0);
    assert_int_equal(back.n, S3_ACL_MAX_GRANTS);
    /* Malformed stored values decode to nothing. */
    static const char *const bad[] = {
        "",    "private", "+,",    "+r",     "+ru",    "+rA,", "+rAx",
        "+xA", "+rX",     "+rUAK", "+ruAK,", "+ruA K", "+,rA", "+rA,,rU",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (s3_acl_decode(bad[i], &back) != ERR_INVAL) fail_msg("decoded: %s", bad[i]);
    char many[2 + 3 * (S3_ACL_MAX_GRANTS + 1)];
    size_t l = 0;
    many[l++] = '+';
    for (int i = 0; i <= S3_ACL_MAX_GRANTS; i++)
        l += (size_t)snprintf(many + l, sizeof(many) - l, i ? ",rA" : "rA");
    assert_int_equal(s3_acl_decode(many, &back), ERR_INVAL);
}

static void test_perms(void **state)
{
    (void)state;
    /* Canned. */
    assert_int_equal(s3_acl_perms("private", "AK2"), 0);
    assert_int_equal(s3_acl_perms("", NULL), 0);
    assert_int_equal(s3_acl_perms("public-read", NULL), S3_PERM_READ);
    assert_int_equal(s3_acl_perms("public-read-write", NULL), S3_PERM_READ | S3_PERM_WRITE);
    assert_int_equal(s3_acl_perms("authenticated-read", NULL), 0);
    assert_int_equal(s3_acl_perms("authenticated-read", "AK2"), S3_PERM_READ);
    assert_int_equal(s3_acl_perms("bucket-owner-full-control", "AK2"), 0);
    assert_int_equal(s3_acl_perms("no-such-acl", "AK2"), 0);
    /* An object's bucket-owner-* ACLs: the bucket's owner, and nobody else. */
    assert_int_equal(s3_acl_perms_of_object("bucket-owner-read", "AK", "AK"), S3_PERM_READ);
    assert_int_equal(s3_acl_perms_of_object("bucket-owner-full-control", "AK", "AK"), S3_PERM_FULL);
    assert_int_equal(s3_acl_perms_of_object("bucket-owner-full-control", "AK2", "AK"), 0);
    assert_int_equal(s3_acl_perms_of_object("bucket-owner-read", NULL, "AK"), 0);
    assert_int_equal(s3_acl_perms_of_object("bucket-owner-read", "AK", ""), 0);
    assert_int_equal(s3_acl_perms_of_object("public-read", NULL, "AK"), S3_PERM_READ);
    /* Grants: the requester's own, the groups' it belongs to; nobody else's. */
    const char *g = "+ruAK2,auAK3,cU,wA";
    assert_int_equal(s3_acl_perms(g, "AK2"), S3_PERM_READ | S3_PERM_WRITE_ACP | S3_PERM_WRITE);
    assert_int_equal(s3_acl_perms(g, "AK3"), S3_PERM_READ_ACP | S3_PERM_WRITE_ACP | S3_PERM_WRITE);
    assert_int_equal(s3_acl_perms(g, "AK"), S3_PERM_WRITE_ACP | S3_PERM_WRITE);
    assert_int_equal(s3_acl_perms(g, NULL), S3_PERM_WRITE);
    /* IDs match whole: no prefix, no case folding. */
    assert_int_equal(s3_acl_perms("+fuAK2", "AK"), 0);
    assert_int_equal(s3_acl_perms("+fuAK", "AK2"), 0);
    assert_int_equal(s3_acl_perms("+fuak2", "AK2"), 0);
    assert_int_equal(s3_acl_perms("+fuAK2", "AK2"), S3_PERM_FULL);
    assert_int_equal(s3_acl_perms("+fU", NULL), 0);
    assert_int_equal(s3_acl_perms("+fU", "x"), S3_PERM_FULL);
    assert_int_equal(s3_acl_perms("+", "AK2"), 0);
    /* A corrupt list gives nothing, even where a prefix of it would give something. */
    assert_int_equal(s3_acl_perms("+fA,", NULL), 0);
    assert_int_equal(s3_acl_perms("+fA,zz", NULL), 0);
    assert_string_equal(s3_acl_perm_name(S3_PERM_FULL), "FULL_CONTROL");
    assert_null(s3_acl_perm_name(3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_xml),
        cmocka_unit_test(test_stored),
        cmocka_unit_test(test_perms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
