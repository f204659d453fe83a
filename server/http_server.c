/*
 * http_server: the listener and the server's lifetime: bind, the loop,
 * stop (signal-safe), and the drain of in-flight requests.
 */
#include "server/http_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

int http_server_new(const http_cfg_t *cfg, http_server_t **out)
{
    http_server_t *s = xcalloc(1, sizeof(*s));
    char host[128];
    int port, rc;
    struct sockaddr_storage addr;

    s->cfg = *cfg;
    if (!s->cfg.workers) s->cfg.workers = 32;
    if (!s->cfg.max_conns) s->cfg.max_conns = 1024;
    if (!s->cfg.max_header) s->cfg.max_header = 16384;
    if (!s->cfg.idle_ms) s->cfg.idle_ms = 60000;
    if (!s->cfg.header_ms) s->cfg.header_ms = 30000;
    if (!s->cfg.io_ms) s->cfg.io_ms = 30000;
    if (!s->cfg.max_stalled) s->cfg.max_stalled = 256;
    /* "host:port", "[v6]:port" */
    const char *colon = strrchr(cfg->listen, ':');
    if (!colon || (size_t)(colon - cfg->listen) >= sizeof(host)) {
        free(s);
        return ERR_INVAL;
    }
    const char *h = cfg->listen;
    size_t hl = (size_t)(colon - h);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    port = atoi(colon + 1);
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr) != 0) {
        free(s);
        return ERR_INVAL;
    }
    uv_loop_init(&s->loop);
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    if ((rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, http__on_connection)) != 0) {
        log_error("event=listen_failed addr=%s err=\"%s\"", cfg->listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        free(s);
        return ERR_IO;
    }
    int alen = sizeof(addr);
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&addr, &alen);
    s->port = ntohs(addr.ss_family == AF_INET ? ((struct sockaddr_in *)&addr)->sin_port
                                              : ((struct sockaddr_in6 *)&addr)->sin6_port);
    uv_async_init(&s->loop, &s->async, http__handle_events);
    s->async.data = s;
    pthread_mutex_init(&s->mu, NULL);
    pool_cfg_t pc = {"wl-http", s->cfg.workers, s->cfg.max_stalled, http__on_saturated, s};
    if (!(s->workers = pool_new(&pc, &rc))) {
        http_server_free(s);
        *out = NULL;
        return rc;
    }
    *out = s;
    return 0;
}

int http_server_port(const http_server_t *s)
{
    return s->port;
}

int http_server_run(http_server_t *s)
{
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return 0;
}

void http_server_stop(http_server_t *s)
{
    /* Only an atomic store and uv_async_send: safe from a signal handler. */
    __atomic_store_n(&s->stop_requested, 1, __ATOMIC_SEQ_CST);
    uv_async_send(&s->async);
}

void http_server_free(http_server_t *s)
{
    if (!s) return;
    pool_free(s->workers); /* every handler has returned */
    uv_loop_close(&s->loop);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
