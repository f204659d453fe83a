/*
 * SigV4 against the worked examples of the Amazon S3 documentation
 * ("Signature Calculations for the Authorization Header", "Query String
 * Authentication", "Transferring Payload in Multiple Chunks"), and the
 * aws-chunked decoder on the same chunked example.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/err.h"
#include "s3/checksum.h"
#include "s3/chunked.h"
#include "s3/cors.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AK    "AKIAIOSFODNN7EXAMPLE"
#define SK    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define H(n, v)                                                                                    \
    {                                                                                              \
        n, sizeof(n) - 1, v, sizeof(v) - 1                                                         \
    }

static void check(const char *method, const char *path, const char *query, const sigv4_header_t *h,
                  size_t nh, const char *payload, const char *signed_h, const char *want)
{
    sigv4_request_t r = {method, path, strlen(path), query, query ? strlen(query) : 0,
                         h,      nh,   payload};
    char auth[512];
    sigv4_auth_t a;
    snprintf(auth, sizeof(auth),
             "AWS4-HMAC-SHA256 Credential=" AK "/20130524/us-east-1/s3/aws4_request, "
             "SignedHeaders=%s, Signature=%s",
             signed_h, want);
    assert_int_equal(sigv4_parse_header(auth, strlen(auth), &a), 0);
    assert_string_equal(a.access_key, AK);
    assert_string_equal(a.region, "us-east-1");
    strcpy(a.amz_date, "20130524T000000Z");
    assert_int_equal(sigv4_verify(&r, &a, SK, NULL), 0);
    /* One flipped character of the secret or the signature is refused. */
    assert_int_equal(sigv4_verify(&r, &a, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEz", NULL),
                     ERR_DENIED);
    /* The same through a cache of one slot: the flipped secret, asked right after the key of
     * the right one was cached, is refused; the right one is a hit and still accepted. */
    sigv4_key_cache_t *c = sigv4_key_cache_new(1);
    uint64_t hits, misses;
    assert_int_equal(sigv4_verify_cached(&r, &a, SK, c, NULL), 0);
    assert_int_equal(sigv4_verify_cached(&r, &a, SK, c, NULL), 0);
    assert_int_equal(
        sigv4_verify_cached(&r, &a, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEz", c, NULL),
        ERR_DENIED);
    assert_int_equal(sigv4_verify_cached(&r, &a, SK, c, NULL), 0);
    sigv4_key_cache_counts(c, &hits, &misses);
    assert_int_equal(hits, 1);
    assert_int_equal(misses, 3);
    a.signature[10] = a.signature[10] == 'a' ? 'b' : 'a';
    assert_int_equal(sigv4_verify(&r, &a, SK, NULL), ERR_DENIED);
    assert_int_equal(sigv4_verify_cached(&r, &a, SK, c, NULL), ERR_DENIED);
    sigv4_key_cache_free(c);
}

/*
 * The signing key cache serves exactly the key sigv4_signing_key derives for
 * the four inputs asked: another secret (even one sharing a long prefix), another
 * date, region or service is derived afresh, whatever the slots held.
 */
static void expect_key(sigv4_key_cache_t *c, const char *secret, const char *date,
                       const char *region, const char *service)
{
    uint8_t want[32], got[32];
    sigv4_signing_key(secret, date, region, service, want);
    sigv4_key_cache_get(c, secret, date, region, service, got);
    assert_memory_equal(got, want, 32);
}

static void test_key_cache(void **state)
{
    (void)state;
    uint64_t hits, misses;
    /* Derived once (check() holds it to the documentation's signatures), then served. */
    uint8_t doc[32];
    sigv4_signing_key(SK, "20130524", "us-east-1", "s3", doc);
    sigv4_key_cache_t *c = sigv4_key_cache_new(8);
    uint8_t k[32];
    sigv4_key_cache_get(c, SK, "20130524", "us-east-1", "s3", k);
    assert_memory_equal(k, doc, 32);
    sigv4_key_cache_get(c, SK, "20130524", "us-east-1", "s3", k);
    assert_memory_equal(k, doc, 32);
    sigv4_key_cache_counts(c, &hits, &misses);
    assert_int_equal(hits, 1);
    assert_int_equal(misses, 1);
    /* A changed secret, date, region or service: each a miss with its own key. */
    const char *alt[][4] = {
        {"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEz", "20130524", "us-east-1", "s3"},
        {SK "x", "20130524", "us-east-1", "s3"},
        {"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE", "20130524", "us-east-1", "s3"},
        {SK, "20130525", "us-east-1", "s3"},
        {SK, "20130524", "eu-west-1", "s3"},
        {SK, "20130524", "us-east-1", "s4"},
        {"", "20130524", "us-east-1", "s3"},
    };
    int n = (int)(sizeof(alt) / sizeof(alt[0]));
    for (int i = 0; i < n; i++)
        expect_key(c, alt[i][0], alt[i][1], alt[i][2], alt[i][3]);
    sigv4_key_cache_counts(c, &hits, &misses);
    assert_int_equal(hits, 1);
    assert_int_equal(misses, 1 + n);
    /* Again, in another order, through caches of 1 and 8 slots: always each one's own key. */
    sigv4_key_cache_t *one = sigv4_key_cache_new(1);
    for (int round = 0; round < 3; round++)
        for (int i = n - 1; i >= 0; i--) {
            expect_key(c, alt[i][0], alt[i][1], alt[i][2], alt[i][3]);
            expect_key(one, alt[i][0], alt[i][1], alt[i][2], alt[i][3]);
            expect_key(one, SK, "20130524", "us-east-1", "s3");
        }
    sigv4_key_cache_counts(one, &hits, &misses);
    assert_int_equal(hits, 0); /* one slot, a different identity every time */
    /* Too long to cache: still the right key, derived every time. */
    char longsk[SIGV4_CACHE_SECRET_MAX + 2];
    memset(longsk, 'k', sizeof(longsk) - 1);
    longsk[sizeof(longsk) - 1] = 0;
    expect_key(c, longsk, "20130524", "us-east-1", "s3");
    longsk[0] = 'j';
    expect_key(c, longsk, "20130524", "us-east-1", "s3");
    /* NULL: no cache at all. */
    expect_key(NULL, SK, "20130524", "us-east-1", "s3");
    sigv4_key_cache_free(one);
    sigv4_key_cache_free(c);
    sigv4_key_cache_free(NULL);
}

/*
 * The HMAC chain of sigv4_signing_key and sigv4_sha256_hex against OpenSSL's
 * one-shot HMAC() and SHA256(), for secrets and inputs of every length
 * around SHA-256's 64-byte block (a longer HMAC key is hashed first).
 */
static void ref_hmac(const uint8_t *k, size_t kl, const char *m, uint8_t out[32])
{
    unsigned int n = 32;
    assert_non_null(HMAC(EVP_sha256(), k, (int)kl, (const uint8_t *)m, strlen(m), out, &n));
}

static void test_hmac_reference(void **state)
{
    (void)state;
    char secret[201];
    for (size_t len = 0; len < sizeof(secret); len++) {
        for (size_t i = 0; i < len; i++)
            secret[i] = (char)('!' + (i * 7 + len) % 90);
        secret[len] = 0;
        char k0[256];
        uint8_t a[32], b[32], want[32], got[32];
        int n = snprintf(k0, sizeof(k0), "AWS4%s", secret);
        ref_hmac((const uint8_t *)k0, (size_t)n, "20130524", a);
        ref_hmac(a, 32, "us-east-1", b);
        ref_hmac(b, 32, "s3", a);
        ref_hmac(a, 32, "aws4_request", want);
        sigv4_signing_key(secret, "20130524", "us-east-1", "s3", got);
        assert_memory_equal(got, want, 32);
        char hex[65], whex[65];
        uint8_t h[32];
        SHA256((const uint8_t *)secret, len, h);
        sigv4_hex(h, 32, whex);
        sigv4_sha256_hex(secret, len, hex);
        assert_string_equal(hex, whex);
    }
}

/* Threads sharing a cache of two slots among four identities: never a neighbour's key. */
typedef struct {
    sigv4_key_cache_t *c;
    int id;
} kc_arg_t;

static void *kc_thread(void *arg)
{
    kc_arg_t *a = arg;
    char secret[32], date[16];
    for (int i = 0; i < 2000; i++) {
        int who = (a->id + i) % 4;
        snprintf(secret, sizeof(secret), "secret-%d", who);
        snprintf(date, sizeof(date), "2013052%d", who % 2);
        expect_key(a->c, secret, date, "us-east-1", "s3");
    }
    return NULL;
}

static void test_key_cache_threads(void **state)
{
    (void)state;
    sigv4_key_cache_t *c = sigv4_key_cache_new(2);
    pthread_t t[4];
    kc_arg_t a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (kc_arg_t){c, i};
        assert_int_equal(pthread_create(&t[i], NULL, kc_thread, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    sigv4_key_cache_free(c);
}

static void test_get_object(void **state)
{
    (void)state;
    sigv4_header_t h[] = {H("Host", "examplebucket.s3.amazonaws.com"), H("Range", "bytes=0-9"),
                          H("x-amz-content-sha256", EMPTY), H("x-amz-date", "20130524T000000Z")};
    check("GET", "/test.txt", NULL, h, 4, EMPTY, "host;range;x-amz-content-sha256;x-amz-date",
          "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void test_put_object(void **state)
{
    (void)state;
    const char *ph = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    char body_hash[65];
    sigv4_sha256_hex("Welcome to Amazon S3.", 21, body_hash);
    assert_string_equal(body_hash, ph);
    sigv4_header_t h[] = {
        H("Host", "examplebucket.s3.amazonaws.com"), H("Date", "Fri, 24 May 2013 00:00:00 GMT"),
        H("x-amz-date", "20130524T000000Z"), H("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        H("x-amz-content-sha256",
          "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")};
    /* "$" arrives raw here; "%24" must sign the same. */
    check("PUT", "/test$file.text", NULL, h, 5, ph,
          "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
          "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    check("PUT", "/test%24file.text", NULL, h, 5, ph,
          "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
          "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void test_bucket_queries(void **state)
{
    (void)state;
    sigv4_header_t h[] = {H("Host", "examplebucket.s3.amazonaws.com"),
                          H("x-amz-content-sha256", EMPTY), H("x-amz-date", "20130524T000000Z")};
    check("GET", "/", "lifecycle", h, 3, EMPTY, "host;x-amz-content-sha256;x-amz-date",
          "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    /* Query order does not matter; the canonical form sorts it. */
    check("GET", "/", "prefix=J&max-keys=2", h, 3, EMPTY, "host;x-amz-content-sha256;x-amz-date",
          "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

/* The client side signs the same documented examples to the same signatures. */
static void sign_check(const char *method, const char *path, const char *query,
                       const sigv4_header_t *h, size_t nh, const char *payload, const char *want)
{
    sigv4_request_t r = {method, path, strlen(path), query, query ? strlen(query) : 0,
                         h,      nh,   payload};
    uint8_t key[32];
    char out[512], expect[512];
    sigv4_signing_key(SK, "20130524", "us-east-1", "s3", key);
    assert_int_equal(sigv4_sign(&r, AK, key, "us-east-1", "20130524T000000Z", out, sizeof(out)), 0);
    snprintf(expect, sizeof(expect), "Signature=%s", want);
    assert_non_null(strstr(out, expect));
    assert_non_null(strstr(out, "Credential=" AK "/20130524/us-east-1/s3/aws4_request, "));
    /* The server side accepts what the client side produced. */
    sigv4_auth_t a;
    assert_int_equal(sigv4_parse_header(out, strlen(out), &a), 0);
    strcpy(a.amz_date, "20130524T000000Z");
    assert_int_equal(sigv4_verify(&r, &a, SK, NULL), 0);
    /* Too small an output buffer is an error, not a truncated header. */
    assert_int_equal(sigv4_sign(&r, AK, key, "us-east-1", "20130524T000000Z", out, 40), ERR_NOSPC);
}

static void test_client_sign(void **state)
{
    (void)state;
    sigv4_header_t get[] = {H("x-amz-date", "20130524T000000Z"), H("range", "bytes=0-9"),
                            H("host", "examplebucket.s3.amazonaws.com"),
                            H("x-amz-content-sha256", EMPTY)};
    sign_check("GET", "/test.txt", NULL, get, 4, EMPTY,
               "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    const char *ph = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    sigv4_header_t put[] = {
        H("host", "examplebucket.s3.amazonaws.com"), H("date", "Fri, 24 May 2013 00:00:00 GMT"),
        H("x-amz-date", "20130524T000000Z"), H("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        H("x-amz-content-sha256",
          "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")};
    sign_check("PUT", "/test$file.text", NULL, put, 5, ph,
               "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    sigv4_header_t list[] = {H("host", "examplebucket.s3.amazonaws.com"),
                             H("x-amz-content-sha256", EMPTY), H("x-amz-date", "20130524T000000Z")};
    sign_check("GET", "/", "max-keys=2&prefix=J", list, 3, EMPTY,
               "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    /* Header names must come lower case: a mixed-case name would sign differently. */
    sigv4_header_t bad[] = {H("Host", "examplebucket.s3.amazonaws.com")};
    sigv4_request_t r = {"GET", "/", 1, NULL, 0, bad, 1, EMPTY};
    uint8_t key[32] = {0};
    char out[512];
    assert_int_equal(sigv4_sign(&r, AK, key, "us-east-1", "20130524T000000Z", out, sizeof(out)),
                     ERR_INVAL);
}

/* The additional checksums against their catalogued check values, whole and in pieces. */
static void test_checksums(void **state)
{
    (void)state;
    static const struct {
        const char *algo, *input, *b64;
    } v[] = {
        {"CRC32", "123456789", "y/Q5Jg=="},         /* 0xCBF43926 */
        {"crc32c", "123456789", "4waSgw=="},        /* 0xE3069283 */
        {"crc64nvme", "123456789", "rosUhgp5mIg="}, /* 0xAE8B14860A799888 */
        {"x-amz-checksum-sha1", "abc", "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="},
        {"sha256", "abc", "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="},
        {"crc32", "", "AAAAAA=="},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        for (size_t split = 0; split <= strlen(v[i].input); split++) {
            cks_t c;
            char out[64];
            assert_int_equal(cks_init(&c, cks_algo(v[i].algo)), 0);
            cks_update(&c, v[i].input, split);
            cks_update(&c, v[i].input + split, strlen(v[i].input) - split);
            cks_final(&c, out, sizeof(out));
            assert_string_equal(out, v[i].b64);
        }
    }
    assert_int_equal(cks_algo("md5"), CKS_MD5); /* one S3 added later */
    assert_int_equal(cks_algo("md4"), CKS_NONE);
    assert_int_equal(cks_algo(NULL), CKS_NONE);
    cks_t c;
    assert_int_equal(cks_init(&c, CKS_NONE), ERR_INVAL);
    assert_string_equal(cks_name(CKS_CRC32C), "crc32c");
}

static void test_presigned(void **state)
{
    (void)state;
    const char *q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"
                    "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-"
                    "Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
                    "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    sigv4_header_t h[] = {H("Host", "examplebucket.s3.amazonaws.com")};
    sigv4_request_t r = {"GET", "/test.txt", 9, q, strlen(q), h, 1, SIGV4_UNSIGNED};
    sigv4_auth_t a;
    assert_int_equal(sigv4_parse_query(q, strlen(q), &a), 0);
    assert_int_equal(a.expires, 86400);
    assert_string_equal(a.amz_date, "20130524T000000Z");
    assert_int_equal(sigv4_verify(&r, &a, SK, NULL), 0);
    r.path = "/test.txu";
    assert_int_equal(sigv4_verify(&r, &a, SK, NULL), ERR_DENIED);
    assert_int_equal(sigv4_parse_query("a=b", 3, &a), ERR_NOT_FOUND);
    const char *bad = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=x";
    assert_int_equal(sigv4_parse_query(bad, strlen(bad), &a), ERR_INVAL);
    /* Any of the parameters twice, the signature too (with its own value again, or another):
     * which one counts would be a guess. */
    const char *twice[] = {"&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d1"
                           "57751f604d404",
                           "&X-Amz-Signature=00", "&X-Amz-Date=20130524T000000Z",
                           "&X-Amz-Algorithm=AWS4-HMAC-SHA256", "&X-Amz-Expires=1"};
    for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
        char dup[1024];
        snprintf(dup, sizeof(dup), "%s%s", q, twice[i]);
        assert_int_equal(sigv4_parse_query(dup, strlen(dup), &a), ERR_INVAL);
    }
    /* A name that only starts like one is another parameter. */
    char other[1024];
    snprintf(other, sizeof(other), "%s&X-Amz-Signatures=1", q);
    assert_int_equal(sigv4_parse_query(other, strlen(other), &a), 0);
}

/* Every x-amz-* header present must be signed, and host always. */
static void test_coverage(void **state)
{
    (void)state;
    sigv4_header_t h[] = {H("Host", "b.example"), H("x-amz-date", "20130524T000000Z"),
                          H("X-Amz-Acl", "public-read"), H("Content-Type", "text/plain")};
    sigv4_request_t r = {"PUT", "/k", 2, NULL, 0, h, 4, SIGV4_UNSIGNED};
    sigv4_auth_t a = {0};
    const char *miss;
    strcpy(a.signed_headers, "host;x-amz-acl;x-amz-date");
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), 0);
    /* Content-Type need not be signed; an x-amz-* header must. */
    strcpy(a.signed_headers, "host;x-amz-date");
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), ERR_DENIED);
    assert_string_equal(miss, "X-Amz-Acl");
    /* A prefix of a signed name is not that name. */
    strcpy(a.signed_headers, "host;x-amz-ac;x-amz-date");
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), ERR_DENIED);
    strcpy(a.signed_headers, "x-amz-acl;x-amz-date");
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), ERR_DENIED);
    assert_string_equal(miss, "host");
    /* Presigned: x-amz-date may come unsigned (its value is in the query), x-amz-acl not. */
    a.presigned = 1;
    strcpy(a.signed_headers, "host");
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), ERR_DENIED);
    assert_string_equal(miss, "X-Amz-Acl");
    r.nheaders = 2;
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), 0);
    a.presigned = 0;
    assert_int_equal(sigv4_check_coverage(&r, &a, &miss), ERR_DENIED);
    assert_string_equal(miss, "x-amz-date");
}

/* X-Amz-Expires is strictly 0..604800 digits (0: expired at once, the caller's 403). */
static void test_presigned_expires(void **state)
{
    (void)state;
    const char *base = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"
                       "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"
                       "X-Amz-SignedHeaders=host&X-Amz-Signature="
                       "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404&"
                       "X-Amz-Expires=";
    const char *bad[] = {"604801", "%2B5", "%205", "5x", "", "99999999999999999999999", "-1"};
    const char *good[] = {"0", "1", "604800", "0060"};
    char q[512];
    sigv4_auth_t a;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(q, sizeof(q), "%s%s", base, bad[i]);
        assert_int_equal(sigv4_parse_query(q, strlen(q), &a), ERR_INVAL);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(q, sizeof(q), "%s%s", base, good[i]);
        assert_int_equal(sigv4_parse_query(q, strlen(q), &a), 0);
    }
}

/* What may be a key: UTF-8 in shortest form, no surrogates, only characters XML 1.0 carries. */
static void test_xml_text(void **state)
{
    (void)state;
    const char *ok[] = {"plain",
                        "tab\there",
                        "line\nbreak",
                        "cr\rkey",
                        "\xc3\xa9t\xc3\xa9",
                        "\xf0\x9f\x98\x80",
                        "\xef\xbf\xbd",
                        "\x7f",
                        ""};
    const char *bad[] = {"\xff",         "a\x01b",       "\xc0\xaf",     "\xe0\x80\xaf",
                         "\xed\xa0\x80", "\xef\xbf\xbf", "\xef\xbf\xbe", "\xf4\x90\x80\x80",
                         "\xc3",         "\xe2\x82",     "\x80",         "\xf8\x88\x80\x80\x80"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_true(s3_xml_text_ok(ok[i], strlen(ok[i])));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(s3_xml_text_ok(bad[i], strlen(bad[i])));
}

/* CORS rules: parse, wildcards, first matching rule. */
static void test_cors(void **state)
{
    (void)state;
    const char *x =
        "<CORSConfiguration><CORSRule><AllowedOrigin>https://*.example.org</AllowedOrigin>"
        "<AllowedMethod>PUT</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader>"
        "<ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>30</MaxAgeSeconds></CORSRule>"
        "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
        "</CORSRule></CORSConfiguration>";
    cors_config_t c;
    assert_int_equal(cors_parse(x, strlen(x), &c), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.rules[0].max_age, 30);
    assert_ptr_equal(cors_match(&c, "https://a.example.org", CORS_PUT, "X-Amz-Date"), &c.rules[0]);
    assert_null(cors_match(&c, "https://a.example.org", CORS_PUT, "X-Amz-Date, Authorization"));
    assert_null(cors_match(&c, "http://a.example.org", CORS_PUT, NULL));
    assert_ptr_equal(cors_match(&c, "http://anything", CORS_GET, NULL), &c.rules[1]);
    assert_null(cors_match(&c, "http://anything", CORS_DELETE, NULL));
    cors_free(&c);
    assert_true(cors_wildcard("a*z", "az", 0));
    assert_false(cors_wildcard("a*b*c", "abc", 0)); /* one wildcard at most */
    assert_true(cors_wildcard("X-AMZ-*", "x-amz-meta-a", 1));
    assert_false(cors_wildcard("X-AMZ-*", "x-amz-meta-a", 0));
    const char *bad[] = {
        "<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>"
        "</CORSConfiguration>",
        "<CORSConfiguration></CORSConfiguration>", "<Other/>",
        "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
        "</AllowedMethod><MaxAgeSeconds>-1</MaxAgeSeconds></CORSRule></CORSConfiguration>",
        /* Two wildcards in a header (S3: one at most): it would match nothing (a probe). */
        "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
        "</AllowedMethod><AllowedHeader>x-*-*</AllowedHeader></CORSRule></CORSConfiguration>"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(cors_parse(bad[i], strlen(bad[i]), &c),
                         i + 1 == sizeof(bad) / sizeof(bad[0]) ? ERR_TOO_LARGE : ERR_INVAL);
    /* ... but one stored by a build that took it still loads: its other rules go on. */
    const char *old = bad[sizeof(bad) / sizeof(bad[0]) - 1];
    assert_int_equal(cors_parse_stored(old, strlen(old), &c), 0);
    assert_ptr_equal(cors_match(&c, "http://x", CORS_GET, NULL), &c.rules[0]);
    assert_null(cors_match(&c, "http://x", CORS_GET, "x-a-b"));
    cors_free(&c);
    const char *patch = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
                        "<AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>";
    assert_int_equal(cors_parse(patch, strlen(patch), &c), ERR_RANGE);
    /* A rule's ID: 255 characters at most, as S3 (counted as characters, not bytes). */
    char idx[2048];
    for (int n = 255; n <= 256; n++) {
        int o = snprintf(idx, sizeof(idx), "<CORSConfiguration><CORSRule><ID>");
        for (int i = 0; i < n; i++)
            o += snprintf(idx + o, sizeof(idx) - (size_t)o, "\u00e9");
        snprintf(idx + o, sizeof(idx) - (size_t)o,
                 "</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
                 "</CORSRule></CORSConfiguration>");
        assert_int_equal(cors_parse(idx, strlen(idx), &c), n == 255 ? 0 : ERR_INVAL);
        if (n == 255) cors_free(&c);
        assert_int_equal(cors_parse_stored(idx, strlen(idx), &c), 0); /* stored before */
        cors_free(&c);
    }
}

static void test_parse_errors(void **state)
{
    (void)state;
    sigv4_auth_t a;
    const char *bad[] = {
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host",
        "AWS4-HMAC-SHA256 Credential=AK/2013052/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=zz",
        "AWS AK:sig",
        "",
        /* A component twice: which would the client mean? (It was the last.) */
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, "
        "Credential=AK2/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sigv4_parse_header(bad[i], strlen(bad[i]), &a), ERR_INVAL);
    /* A signed header the request lacks cannot verify. */
    sigv4_header_t h[] = {H("Host", "x")};
    sigv4_request_t r = {"GET", "/", 1, NULL, 0, h, 1, EMPTY};
    assert_null(sigv4_canonical_request(&r, "host;range", 0));
    r.path = "/%zz";
    r.path_len = 4;
    assert_null(sigv4_canonical_request(&r, "host", 0));
}

/* The documented 64 KiB + 1 KiB chunked upload. */
static int collect(void *arg, const uint8_t *p, size_t n)
{
    size_t *total = arg;
    for (size_t i = 0; i < n; i++)
        if (p[i] != 'a') return -100;
    *total += n;
    return 0;
}

static size_t build_chunked(uint8_t *out, const char *s1, const char *s2, const char *s3)
{
    size_t o = 0;
    o += (size_t)sprintf((char *)out + o, "10000;chunk-signature=%s\r\n", s1);
    memset(out + o, 'a', 65536);
    o += 65536;
    o += (size_t)sprintf((char *)out + o, "\r\n400;chunk-signature=%s\r\n", s2);
    memset(out + o, 'a', 1024);
    o += 1024;
    o += (size_t)sprintf((char *)out + o, "\r\n0;chunk-signature=%s\r\n\r\n", s3);
    return o;
}

/* Feed a signed body of chunks of the given sizes (then the last, empty one); the result. */
static int feed_signed(const size_t *sizes, size_t n)
{
    const char *seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
    const char *scope = "20130524/us-east-1/s3/aws4_request";
    uint8_t key[32], h[32];
    char prev[65], sig[65];
    sigv4_signing_key(SK, "20130524", "us-east-1", "s3", key);
    snprintf(prev, sizeof(prev), "%s", seed);
    uint8_t *body = malloc(n * 20000 + 200), data[16384];
    memset(data, 'a', sizeof(data));
    size_t o = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t len = i < n ? sizes[i] : 0;
        SHA256(data, len, h);
        sigv4_chunk_signature(key, "20130524T000000Z", scope, prev, h, sig);
        o += (size_t)sprintf((char *)body + o, "%zx;chunk-signature=%s\r\n", len, sig);
        memcpy(body + o, data, len);
        o += len;
        if (len) o += (size_t)sprintf((char *)body + o, "\r\n");
        memcpy(prev, sig, sizeof(prev));
    }
    o += (size_t)sprintf((char *)body + o, "\r\n");
    s3_chunked_t *c = s3_chunked_new(1, 0, key, "20130524T000000Z", scope, seed);
    size_t total = 0, used;
    int rc = s3_chunked_feed(c, body, o, &used, collect, &total);
    s3_chunked_free(c);
    free(body);
    return rc;
}

static void test_streaming_chunks(void **state)
{
    (void)state;
    const char *seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
    const char *c1 = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648";
    const char *c2 = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497";
    const char *c3 = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9";
    sigv4_header_t h[] = {H("Host", "s3.amazonaws.com"),
                          H("x-amz-date", "20130524T000000Z"),
                          H("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                          H("x-amz-content-sha256", SIGV4_STREAMING),
                          H("Content-Encoding", "aws-chunked"),
                          H("x-amz-decoded-content-length", "66560"),
                          H("Content-Length", "66824")};
    check("PUT", "/examplebucket/chunkObject.txt", NULL, h, 7, SIGV4_STREAMING,
          "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
          "x-amz-decoded-content-length;x-amz-storage-class",
          seed);

    uint8_t key[32];
    sigv4_signing_key(SK, "20130524", "us-east-1", "s3", key);
    const char *scope = "20130524/us-east-1/s3/aws4_request";
    uint8_t *body = malloc(70000);
    size_t n = build_chunked(body, c1, c2, c3);
    assert_int_equal(n, 66824); /* the documented Content-Length */

    /* Fed in every split position class: byte by byte is the hardest. */
    size_t steps[] = {n, 1, 7, 4096};
    for (size_t si = 0; si < 4; si++) {
        s3_chunked_t *c = s3_chunked_new(1, 0, key, "20130524T000000Z", scope, seed);
        size_t total = 0, pos = 0, used = 0;
        int rc = 0;
        while (pos < n && rc == 0) {
            size_t len = n - pos < steps[si] ? n - pos : steps[si];
            rc = s3_chunked_feed(c, body + pos, len, &used, collect, &total);
            pos += used;
        }
        assert_int_equal(rc, 1);
        assert_int_equal(pos, n);
        assert_int_equal(total, 66560);
        s3_chunked_free(c);
    }
    /* A changed byte of data fails its chunk's signature. */
    body[100] = 'b';
    s3_chunked_t *c = s3_chunked_new(1, 0, key, "20130524T000000Z", scope, seed);
    size_t used;
    assert_int_equal(s3_chunked_feed(c, body, n, &used, NULL, NULL), ERR_DENIED);
    s3_chunked_free(c);
    free(body);
    /* S3: every signed chunk but the last with data holds 8 KiB at least. */
    const size_t ok[][3] = {{8192, 8192, 1}, {1000, 0, 0}, {16384, 8192, 0}};
    const size_t nok[] = {3, 1, 2};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(feed_signed(ok[i], nok[i]), 1);
    const size_t bad[][3] = {{1000, 1000, 0}, {8192, 8191, 8192}, {1, 16384, 0}};
    const size_t nbad[] = {2, 3, 2};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(feed_signed(bad[i], nbad[i]), ERR_RANGE);
}

static void test_unsigned_trailer(void **state)
{
    (void)state;
    const char *body =
        "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\nNEXT";
    s3_chunked_t *c = s3_chunked_new(0, 1, NULL, NULL, NULL, NULL);
    size_t used;
    assert_int_equal(s3_chunked_feed(c, (const uint8_t *)body, strlen(body), &used, NULL, NULL), 1);
    assert_int_equal(used, strlen(body) - 4);
    assert_int_equal(s3_chunked_decoded(c), 11);
    assert_string_equal(s3_chunked_trailer(c, "x-amz-checksum-crc32"), "DUoRhQ==");
    s3_chunked_free(c);
    /* Malformed bodies are refused, not guessed at. */
    const char *bad[] = {
        "zz\r\n", "5\r\nhelloXY", "5;chunk-signature=00\r\n", "5\nhello\r\n",
        "10000000000000000\r\n",
        /* A trailer twice (in any case): which value would be the body's? */
        "0\r\nx-amz-checksum-crc32:DUoRhQ==\r\nX-Amz-Checksum-CRC32:AAAAAA==\r\n\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        c = s3_chunked_new(0, 1, NULL, NULL, NULL, NULL);
        assert_int_equal(
            s3_chunked_feed(c, (const uint8_t *)bad[i], strlen(bad[i]), &used, NULL, NULL),
            ERR_INVAL);
        s3_chunked_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_object),
        cmocka_unit_test(test_put_object),
        cmocka_unit_test(test_bucket_queries),
        cmocka_unit_test(test_presigned),
        cmocka_unit_test(test_client_sign),
        cmocka_unit_test(test_checksums),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_streaming_chunks),
        cmocka_unit_test(test_unsigned_trailer),
        cmocka_unit_test(test_coverage),
        cmocka_unit_test(test_presigned_expires),
        cmocka_unit_test(test_xml_text),
        cmocka_unit_test(test_cors),
        cmocka_unit_test(test_key_cache),
        cmocka_unit_test(test_hmac_reference),
        cmocka_unit_test(test_key_cache_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
