#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int log_level = LOG_LVL_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static __thread const char *request_id;

void log_set_request(const char *id)
{
    request_id = id;
}

const char *log_request(void)
{
    return request_id;
}

void log_write(int level, const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000,
                 level_names[level < 0   ? 0
                             : level > 3 ? 3
                                         : level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    if (request_id) n += snprintf(line + n, sizeof(line) - (size_t)n - 1, " req=%s", request_id);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    /* One event, one line: control bytes from requests (a key with %0A) cannot forge lines. */
    for (int i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) line[i] = '?';
    /* One write per line so concurrent threads do not interleave. */
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
}

int log_limit_pass(log_limit_t *l, int level)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    long was = atomic_load(&l->sec);
    if (was != ts.tv_sec && atomic_compare_exchange_strong(&l->sec, &was, ts.tv_sec)) {
        atomic_store(&l->n, 0);
        unsigned long d = atomic_exchange(&l->dropped, 0);
        if (d) log_write(level, "event=log_suppressed lines=%lu: more like the next", d);
    }
    if (atomic_fetch_add(&l->n, 1) < LOG_BURST) return 1;
    atomic_fetch_add(&l->dropped, 1);
    return 0;
}

int log_level_parse(const char *s)
{
    static const char *const all[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, all[i]) == 0) return i;
    return -1;
}
