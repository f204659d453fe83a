/*
 * xfer: job runner and progress meter of the `wl` command (xfer.h).
 */
#include "client/cli/xfer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    size_t n;
    atomic_size_t next, failed;
    int (*fn)(void *, size_t);
    void *arg;
} run_t;

static void *run_main(void *p)
{
    run_t *r = p;
    for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < r->n;)
        if (r->fn(r->arg, i)) atomic_fetch_add(&r->failed, 1);
    return NULL;
}

size_t xfer_run(size_t n, int jobs, int (*fn)(void *arg, size_t i), void *arg)
{
    run_t r = {.n = n, .fn = fn, .arg = arg};
    if (jobs < 1) jobs = 1;
    if ((size_t)jobs > n) jobs = (int)n;
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < jobs && i < 64; i++)
        if (pthread_create(&th[i], NULL, run_main, &r) == 0) started++;
    if (!started) run_main(&r); /* no thread to be had: do it here */
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&r.failed);
}

static atomic_uint_fast64_t done_bytes;
static uint64_t total_bytes;
static int meter_on;
static atomic_int meter_stop;
static pthread_t meter_th;

void xfer_bytes(void *arg, uint64_t n)
{
    (void)arg;
    atomic_fetch_add(&done_bytes, n);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void human(double b, char *out, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(out, cap, "%.1f %s", b, u[i]);
}

static void draw(double t0, int last)
{
    double el = now_s() - t0;
    uint64_t d = atomic_load(&done_bytes);
    double rate = el > 0 ? (double)d / el : 0;
    char a[32], b[32], r[32], eta[32] = "";
    human((double)d, a, sizeof(a));
    human((double)total_bytes, b, sizeof(b));
    human(rate, r, sizeof(r));
    if (!last && rate > 0 && total_bytes > d)
        snprintf(eta, sizeof(eta), "  ETA %.0fs", (double)(total_bytes - d) / rate);
    fprintf(stderr, "\r%s / %s  %s/s%s\033[K%s", a, b, r, eta, last ? "\n" : "");
}

static void *meter_main(void *p)
{
    (void)p;
    double t0 = now_s();
    while (!atomic_load(&meter_stop)) {
        draw(t0, 0);
        usleep(200000);
    }
    draw(t0, 1);
    return NULL;
}

void xfer_meter_start(uint64_t total, int enabled)
{
    atomic_store(&done_bytes, 0);
    total_bytes = total;
    meter_on = enabled && isatty(2);
    atomic_store(&meter_stop, 0);
    if (meter_on && pthread_create(&meter_th, NULL, meter_main, NULL) != 0) meter_on = 0;
}

void xfer_meter_stop(void)
{
    if (!meter_on) return;
    atomic_store(&meter_stop, 1);
    pthread_join(meter_th, NULL);
    meter_on = 0;
}
