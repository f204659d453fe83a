/*
 * The HTTP front end with a plain socket client: a small response sent
 * whole with its head (http_respond_full), and bytes lent to the loop
 * whose owner is freed only once they are out (http_free_after): the
 * handler returns while its borrowed bytes are still on their way, the
 * free runs once, after the last byte was written (the free poisons the
 * buffer, so a free that came early shows in the bytes read), and also
 * when the client goes away mid-response. Framing by version: a body of
 * unknown length is chunked for HTTP/1.1 and ends with the connection for
 * HTTP/1.0; other versions get 505; every status has its reason phrase.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "server/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define BIG (32u << 20) /* far more than loopback socket buffers hold */

static int frees, returned;

static uint8_t pat(size_t i)
{
    return (uint8_t)(i * 7 + (i >> 12));
}

static void poison_free(void *arg, void *p)
{
    (void)arg;
    memset(p, 0xee, BIG); /* a free before the bytes are out would show in what is read */
    free(p);
    __atomic_fetch_add(&frees, 1, __ATOMIC_SEQ_CST);
}

/* /hold: the handler waits until released (a request in flight on its connection). */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int holding, hold_released;

static void handler(void *arg, http_req_t *r, const struct http_req_info *info)
{
    (void)arg;
    if (strcmp(info->target, "/hold") == 0) {
        pthread_mutex_lock(&hold_mu);
        holding++;
        pthread_cond_broadcast(&hold_cv);
        while (!hold_released)
            pthread_cond_wait(&hold_cv, &hold_mu);
        pthread_mutex_unlock(&hold_mu);
        (void)http_respond_full(r, 200, NULL, "held", 4);
        return;
    }
    if (strcmp(info->target, "/small") == 0) {
        (void)http_respond_full(r, 200, "X-Test: small\r\n", "hello, world", 12);
        return;
    }
    if (strcmp(info->target, "/chunked") == 0) { /* a length not known up front */
        if (http_respond(r, 200, NULL, -1) == 0 && http_write(r, "hello, ", 7) == 0)
            (void)http_write(r, "world", 5);
        return;
    }
    if (strcmp(info->target, "/echo") == 0) { /* the X-Echo header's value, in brackets */
        char body[256] = "";
        for (int i = 0; i < info->nheaders; i++)
            if (strcasecmp(info->headers[i].name, "x-echo") == 0)
                snprintf(body, sizeof(body), "[%s]", info->headers[i].value);
        (void)http_respond_full(r, 200, NULL, body, strlen(body));
        return;
    }
    if (strncmp(info->target, "/status/", 8) == 0) {
        (void)http_respond_full(r, atoi(info->target + 8), NULL, NULL, 0);
        return;
    }
    uint8_t *b = malloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        b[i] = pat(i);
    if (http_respond(r, 200, NULL, BIG) == 0) (void)http_write_borrowed(r, b, BIG);
    http_free_after(r, poison_free, NULL, b);
    __atomic_store_n(&returned, 1, __ATOMIC_SEQ_CST);
}

static http_server_t *srv;
static pthread_t loop_thread;

static void *run_loop(void *arg)
{
    (void)http_server_run(arg);
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    /* Three loops: the requests of a test go to any of them. */
    http_cfg_t cfg = {.listen = "127.0.0.1:0", .workers = 2, .loops = 3, .handler = handler};
    if (http_server_new(&cfg, &srv) != 0) return -1;
    return pthread_create(&loop_thread, NULL, run_loop, srv);
}

static int teardown(void **state)
{
    (void)state;
    http_server_stop(srv);
    pthread_join(loop_thread, NULL);
    http_server_free(srv);
    return 0;
}

static int dial_to(http_server_t *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(http_server_port(s))};
    int small = 64 << 10;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

static int dial(void)
{
    return dial_to(srv);
}

static void send_get(int fd, const char *target)
{
    char req[128];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
    assert_int_equal(write(fd, req, (size_t)n), n);
}

/* The response head (into buf, NUL-terminated); returns its length; body bytes read past it
 * are left in buf after the head, *extra of them. */
static size_t read_head(int fd, char *buf, size_t cap, size_t *extra)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        assert_true(n > 0);
        got += (size_t)n;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end + 4 - buf);
            *extra = got - hl;
            return hl;
        }
        assert_true(got < cap - 1);
    }
}

/* Send a raw request and read the whole answer, up to the server's close (NUL-terminated). */
static size_t exchange(const char *req, char *buf, size_t cap)
{
    int fd = dial();
    struct timeval tv = {.tv_sec = 10};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    size_t got = 0;
    ssize_t n;
    while (got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) > 0)
        got += (size_t)n;
    assert_true(n == 0); /* closed by the server, not timed out */
    buf[got] = 0;
    close(fd);
    return got;
}

static void wait_frees(int want)
{
    for (int i = 0; i < 500 && __atomic_load_n(&frees, __ATOMIC_SEQ_CST) < want; i++)
        usleep(10000);
    usleep(50000); /* and no second one */
    assert_int_equal(__atomic_load_n(&frees, __ATOMIC_SEQ_CST), want);
}

static void test_small_whole(void **state)
{
    (void)state;
    int fd = dial();
    send_get(fd, "/small");
    char buf[4096];
    size_t extra, hl = read_head(fd, buf, sizeof(buf), &extra);
    assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(buf, "Content-Length: 12\r\n"));
    assert_non_null(strstr(buf, "X-Test: small\r\n"));
    while (extra < 12) {
        ssize_t n = read(fd, buf + hl + extra, sizeof(buf) - 1 - hl - extra);
        assert_true(n > 0);
        extra += (size_t)n;
    }
    assert_int_equal(extra, 12);
    assert_memory_equal(buf + hl, "hello, world", 12);
    /* The connection is kept: a second request on it is answered too. */
    send_get(fd, "/small");
    hl = read_head(fd, buf, sizeof(buf), &extra);
    assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
    close(fd);
}

static void test_free_after_out(void **state)
{
    (void)state;
    __atomic_store_n(&frees, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&returned, 0, __ATOMIC_SEQ_CST);
    int fd = dial();
    send_get(fd, "/big");
    /* The handler returns at once, its bytes still lent: nothing is freed yet. */
    for (int i = 0; i < 500 && !__atomic_load_n(&returned, __ATOMIC_SEQ_CST); i++)
        usleep(10000);
    assert_int_equal(__atomic_load_n(&returned, __ATOMIC_SEQ_CST), 1);
    usleep(100000);
    assert_int_equal(__atomic_load_n(&frees, __ATOMIC_SEQ_CST), 0);
    char *buf = malloc(1 << 20);
    size_t extra, hl = read_head(fd, buf, 1 << 20, &extra), at = 0;
    assert_non_null(strstr(buf, "Content-Length: 33554432\r\n"));
    size_t bad = 0;
    for (size_t i = 0; i < extra; i++)
        bad += (uint8_t)buf[hl + i] != pat(at++);
    while (at < BIG) {
        ssize_t n = read(fd, buf, 1 << 20);
        assert_true(n > 0);
        for (ssize_t i = 0; i < n; i++)
            bad += (uint8_t)buf[i] != pat(at++);
    }
    assert_int_equal(at, BIG);
    assert_int_equal(bad, 0);
    free(buf);
    wait_frees(1);
    close(fd);
}

static void test_free_after_client_gone(void **state)
{
    (void)state;
    __atomic_store_n(&frees, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&returned, 0, __ATOMIC_SEQ_CST);
    int fd = dial();
    send_get(fd, "/big");
    char buf[4096];
    size_t extra;
    (void)read_head(fd, buf, sizeof(buf), &extra);
    close(fd); /* mid-response: the lent bytes are dropped, and freed once */
    wait_frees(1);
}

static void test_unknown_length_by_version(void **state)
{
    (void)state;
    char buf[4096];
    /* HTTP/1.0 has no chunked coding: the body runs to the close (RFC 9112 6.1). */
    exchange("GET /chunked HTTP/1.0\r\nHost: t\r\n\r\n", buf, sizeof(buf));
    char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    body[2] = 0; /* the head, each line with its CRLF */
    assert_null(strstr(buf, "Transfer-Encoding"));
    assert_null(strstr(buf, "Content-Length"));
    assert_non_null(strstr(buf, "Connection: close\r\n"));
    assert_string_equal(body + 4, "hello, world");
    /* HTTP/1.1 gets it chunked (this request asks the close, to read to the end). */
    exchange("GET /chunked HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", buf, sizeof(buf));
    assert_non_null(strstr(buf, "Transfer-Encoding: chunked\r\n"));
    body = strstr(buf, "\r\n\r\n");
    assert_string_equal(body + 4, "7\r\nhello, \r\n5\r\nworld\r\n0\r\n\r\n");
}

static void test_other_versions_refused(void **state)
{
    (void)state;
    char buf[4096], req[128];
    const char *versions[] = {"HTTP/2.0", "HTTP/3.0", "HTTP/0.9"};
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        snprintf(req, sizeof(req), "GET /small %s\r\nHost: t\r\n\r\n", versions[i]);
        exchange(req, buf, sizeof(buf));
        assert_true(strncmp(buf, "HTTP/1.1 505 HTTP Version Not Supported\r\n", 41) == 0);
    }
}

/* A version that is not one is a bad request, not an unsupported version. */
static void test_malformed_version(void **state)
{
    (void)state;
    char buf[4096];
    const char *bad[] = {"HTTP/1.10", "HTTP/01.1", "HTTP/1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char req[128];
        snprintf(req, sizeof(req), "GET /small %s\r\nHost: t\r\n\r\n", bad[i]);
        exchange(req, buf, sizeof(buf));
        assert_true(strncmp(buf, "HTTP/1.1 400 ", 13) == 0);
    }
}

/* Whitespace around a header's value is not part of it (RFC 9110 5.5). */
static void test_value_whitespace_trimmed(void **state)
{
    (void)state;
    char buf[4096];
    exchange("GET /echo HTTP/1.1\r\nHost: t\r\nX-Echo:  \t a b \t \r\nConnection: close\r\n\r\n",
             buf, sizeof(buf));
    char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    assert_string_equal(body + 4, "[a b]");
    exchange("GET /echo HTTP/1.1\r\nHost: t\r\nX-Echo:   \r\nConnection: close\r\n\r\n", buf,
             sizeof(buf));
    body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    assert_string_equal(body + 4, "[]");
}

/* Field lines of one name are one field, their values joined by commas in order (RFC 9110
 * 5.3), whatever the names' case; lines of other names in between stay where they are. */
static void test_repeated_fields_joined(void **state)
{
    (void)state;
    char buf[4096];
    exchange("GET /echo HTTP/1.1\r\nHost: t\r\nX-Echo: a \r\nX-Other: o\r\nx-echo:  b\r\n"
             "X-ECHO: c d\r\nConnection: close\r\n\r\n",
             buf, sizeof(buf));
    char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    assert_string_equal(body + 4, "[a,b,c d]");
    /* More lines than the old bound of 100 (S3 takes them: metadata is bounded by bytes). */
    char req[8192];
    int n = snprintf(req, sizeof(req), "GET /echo HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 150; i++)
        n += snprintf(req + n, sizeof(req) - (size_t)n, "X-M%d: %d\r\n", i, i);
    snprintf(req + n, sizeof(req) - (size_t)n, "X-Echo: last\r\nConnection: close\r\n\r\n");
    exchange(req, buf, sizeof(buf));
    body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    assert_string_equal(body + 4, "[last]");
    /* A line with no name is no field: 400. */
    exchange("GET /echo HTTP/1.1\r\nHost: t\r\n: v\r\nConnection: close\r\n\r\n", buf, sizeof(buf));
    assert_true(strncmp(buf, "HTTP/1.1 400 ", 13) == 0);
}

static void test_reason_phrases(void **state)
{
    (void)state;
    char buf[4096];
    const char *want[] = {"201 Created", "303 See Other", "204 No Content"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char req[128], line[64];
        snprintf(req, sizeof(req),
                 "GET /status/%.3s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", want[i]);
        exchange(req, buf, sizeof(buf));
        snprintf(line, sizeof(line), "HTTP/1.1 %s\r\n", want[i]);
        assert_true(strncmp(buf, line, strlen(line)) == 0);
    }
}

/* The status of the one response on fd ("HTTP/1.1 200 ..." -> 200), 0: none (closed). */
static int status_of(int fd)
{
    char buf[1024];
    size_t got = 0;
    while (got < sizeof(buf) - 1) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        long len = 0;
        char *cl = strcasestr(buf, "content-length:");
        if (end && cl) len = atol(cl + 15);
        if (end && got >= (size_t)(end + 4 - buf) + (size_t)len) break;
    }
    buf[got] = 0;
    return got > 12 ? atoi(buf + 9) : 0;
}

/* A server of its own for a test (the shared one has no connection limit), run on t. */
static http_server_t *start_own(int loops, int workers, int max_conns, pthread_t *t)
{
    http_cfg_t cfg = {.listen = "127.0.0.1:0",
                      .workers = workers,
                      .loops = loops,
                      .max_conns = max_conns,
                      .handler = handler};
    http_server_t *s;
    assert_int_equal(http_server_new(&cfg, &s), 0);
    assert_int_equal(pthread_create(t, NULL, run_loop, s), 0);
    return s;
}

static void stop_own(http_server_t *s, pthread_t t)
{
    http_server_stop(s);
    pthread_join(t, NULL);
    http_server_free(s);
}

/* A connection to s whose reads give up after 10 s (a test fails rather than hangs). */
static int dial_timed(http_server_t *s)
{
    struct timeval tv = {.tv_sec = 10};
    int fd = dial_to(s);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    return fd;
}

/*
 * At the connection limit, a newcomer takes the slot of an idle connection
 * whichever loop holds it: the limit is the server's, not a loop's. Two
 * loops, two connections at most: one with a request in flight, one idle
 * between requests; the newcomer lands on either loop (the one that wakes
 * first), and is served while the idle one is closed. Handled by its own
 * loop alone, a newcomer on the busy connection's loop found nothing to
 * close there and was refused (503): half the rounds.
 */
static void test_limit_across_loops(void **state)
{
    (void)state;
    pthread_t t2;
    http_server_t *s2 = start_own(2, 4, 2, &t2);
    int busy = dial_timed(s2);
    send_get(busy, "/hold");
    pthread_mutex_lock(&hold_mu);
    while (!holding)
        pthread_cond_wait(&hold_cv, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
    for (int round = 0; round < 8; round++) {
        /* An idle connection: one request answered (so it is surely in), then nothing. The
         * last round's connections may not be closed yet: then it is the one refused. */
        int idle = -1;
        for (int tries = 0; tries < 200 && idle < 0; tries++) {
            idle = dial_timed(s2);
            send_get(idle, "/small");
            if (status_of(idle) != 200) {
                close(idle);
                idle = -1;
                usleep(10000);
            }
        }
        assert_true(idle >= 0);
        int fresh = dial_timed(s2);
        send_get(fresh, "/small");
        assert_int_equal(status_of(fresh), 200);
        char b;
        assert_int_equal(read(idle, &b, 1), 0); /* closed for it */
        close(idle);
        close(fresh);
    }
    pthread_mutex_lock(&hold_mu);
    hold_released = 1;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
    assert_int_equal(status_of(busy), 200);
    close(busy);
    stop_own(s2, t2);
}

/*
 * A burst of new connections at the limit, each with its request sent at
 * once: every client gets an answer (200, or 503 SlowDown), never a close
 * with no answer. One whose request was still in its socket, unread, looked
 * as if it had never sent a byte, and was closed as idle for a newcomer
 * (probe: 2 of 40 a burst).
 */
static void test_burst_at_the_limit_is_answered(void **state)
{
    (void)state;
    pthread_t t2;
    http_server_t *s2 = start_own(2, 2, 4, &t2);
    /* 3 rounds of N - 4 refusals stay under the server's 64 lingering at once however late
     * the lingerers see their clients' closes (with 40 a round, a loaded machine still had the
     * last round's when the next came, and the cap closed answers unread: no sleep is long
     * enough everywhere). */
    enum { N = 24 };
    int unanswered = 0;
    for (int round = 0; round < 3; round++) {
        int fd[N];
        for (int i = 0; i < N; i++) {
            fd[i] = dial_timed(s2);
            send_get(fd[i], "/small");
        }
        for (int i = 0; i < N; i++) {
            int st = status_of(fd[i]);
            if (st != 200 && st != 503) unanswered++;
            close(fd[i]);
        }
    }
    assert_int_equal(unanswered, 0);
    stop_own(s2, t2);
}

int main(void)
{
    /* As warmlaked does (server/main.c): a write to a client that left is an error, not a
     * signal that ends the process. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_whole),
        cmocka_unit_test(test_free_after_out),
        cmocka_unit_test(test_free_after_client_gone),
        cmocka_unit_test(test_unknown_length_by_version),
        cmocka_unit_test(test_other_versions_refused),
        cmocka_unit_test(test_reason_phrases),
        cmocka_unit_test(test_malformed_version),
        cmocka_unit_test(test_value_whitespace_trimmed),
        cmocka_unit_test(test_repeated_fields_joined),
        cmocka_unit_test(test_limit_across_loops),
        cmocka_unit_test(test_burst_at_the_limit_is_answered),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
