/*
 * http_server: the listener and the server's lifetime: bind, the loop,
 * stop (signal-safe), and the drain of in-flight requests.
 */
#include "server/http_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    s->nloops = cfg->loops > 0 ? cfg->loops : 1;
    s->loops = xcalloc((size_t)s->nloops, sizeof(*s->loops));
    http_loop_t *l0 = &s->loops[0];
    uv_loop_init(&l0->loop);
    uv_tcp_init(&l0->loop, &l0->listener);
    l0->listener.data = l0;
    if ((rc = uv_tcp_bind(&l0->listener, (struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&l0->listener, 511, http__on_connection)) != 0) {
        log_error("event=listen_failed addr=%s err=\"%s\"", cfg->listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&l0->listener, NULL);
        uv_run(&l0->loop, UV_RUN_DEFAULT);
        uv_loop_close(&l0->loop);
        free(s->loops);
        free(s);
        return ERR_IO;
    }
    int alen = sizeof(addr);
    uv_tcp_getsockname(&l0->listener, (struct sockaddr *)&addr, &alen);
    s->port = ntohs(addr.ss_family == AF_INET ? ((struct sockaddr_in *)&addr)->sin_port
                                              : ((struct sockaddr_in6 *)&addr)->sin6_port);
    pthread_mutex_init(&s->mu, NULL);
    uv_os_fd_t lfd;
    uv_fileno((uv_handle_t *)&l0->listener, &lfd);
    for (int i = 0; i < s->nloops; i++) {
        http_loop_t *l = &s->loops[i];
        l->s = s;
        l->index = i;
        if (i > 0) {
            /* The same listening socket, watched by this loop too: the loop that wakes
             * first accepts (the others find nothing: libuv takes EAGAIN quietly). */
            uv_loop_init(&l->loop);
            uv_tcp_init(&l->loop, &l->listener);
            l->listener.data = l;
            int fd = fcntl(lfd, F_DUPFD_CLOEXEC, 0), opened = 0;
            if (fd < 0 || (rc = uv_tcp_open(&l->listener, fd)) != 0 || !(opened = 1) ||
                (rc = uv_listen((uv_stream_t *)&l->listener, 511, http__on_connection)) != 0) {
                /* The loops made so far serve. */
                log_error("event=loop_listen_failed addr=%s loop=%d err=\"%s\"", cfg->listen, i,
                          fd < 0 ? "dup" : uv_strerror(rc));
                uv_close((uv_handle_t *)&l->listener, NULL); /* (closes fd once opened) */
                if (fd >= 0 && !opened) close(fd);
                uv_run(&l->loop, UV_RUN_DEFAULT);
                uv_loop_close(&l->loop);
                s->nloops = i;
                break;
            }
        }
        l->listening = 1;
        uv_async_init(&l->loop, &l->async, http__handle_events);
        l->async.data = l;
    }
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

static void *loop_main(void *arg)
{
    http_loop_t *l = arg;
    char name[16];
    snprintf(name, sizeof(name), "wl-loop%d", l->index);
    pthread_setname_np(pthread_self(), name);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return NULL;
}

int http_server_run(http_server_t *s)
{
    /* Loop 0 on the caller's thread, the others on threads of their own; each ends once it
     * stopped and its connections are gone. */
    for (int i = 1; i < s->nloops; i++) {
        http_loop_t *l = &s->loops[i];
        if (pthread_create(&l->thread, NULL, loop_main, l) == 0) {
            l->started = 1;
        } else {
            log_error("event=loop_thread_failed loop=%d: its connections go to the others", i);
            http__loop_stop(l); /* (not started: nothing else runs it) */
            uv_run(&l->loop, UV_RUN_DEFAULT);
        }
    }
    uv_run(&s->loops[0].loop, UV_RUN_DEFAULT);
    for (int i = 1; i < s->nloops; i++)
        if (s->loops[i].started) pthread_join(s->loops[i].thread, NULL);
    return 0;
}

void http_server_stop(http_server_t *s)
{
    /* Only an atomic store and uv_async_send: safe from a signal handler. */
    __atomic_store_n(&s->stop_requested, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < s->nloops; i++)
        uv_async_send(&s->loops[i].async);
}

void http_server_free(http_server_t *s)
{
    if (!s) return;
    pool_free(s->workers); /* every handler has returned */
    for (int i = 0; i < s->nloops; i++) {
        http_loop_t *l = &s->loops[i];
        for (handoff_t *h = l->handoffs, *hn; h; h = hn) { /* handed as it ended */
            hn = h->next;
            close(h->fd);
            free(h);
        }
        if (l->listening) uv_close((uv_handle_t *)&l->listener, NULL); /* never run */
        l->listening = 0;
        if (!uv_is_closing((uv_handle_t *)&l->async)) uv_close((uv_handle_t *)&l->async, NULL);
        uv_run(&l->loop, UV_RUN_NOWAIT); /* its close callback */
        uv_loop_close(&l->loop);
    }
    pthread_mutex_destroy(&s->mu);
    free(s->loops);
    free(s);
}
