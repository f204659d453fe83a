/*
 * log: leveled, one key=value line per event, to stderr.
 *
 * The level is tested before any formatting (the macros never evaluate their
 * arguments when the level is off), as redis serverLog does.
 */
#ifndef WL_LOG_H
#define WL_LOG_H

#include <stdatomic.h>

enum { LOG_LVL_DEBUG = 0, LOG_LVL_INFO = 1, LOG_LVL_WARN = 2, LOG_LVL_ERROR = 3, LOG_LVL_OFF = 4 };

extern int log_level;

void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The request this thread is serving (NULL: none). While set, every line the
 * thread logs ends with " req=ID", so whatever the layers below log about a
 * request (a shard that failed, a commit that could not finish) can be
 * found by the x-amz-request-id the client was given.
 */
void log_set_request(const char *id);
/* The id log_set_request gave this thread (NULL: none): the job pool hands it to jobs. */
const char *log_request(void);

/* Parse "debug|info|warn|error|off"; returns -1 when unknown. */
int log_level_parse(const char *s);

#define log_at(lvl, ...)                                                                           \
    do {                                                                                           \
        if ((lvl) >= log_level) log_write((lvl), __VA_ARGS__);                                     \
    } while (0)

/*
 * Lines anyone who can reach a port can make the node write at will (a
 * refused handshake, a connection that never finished one, a bad frame):
 * at most LOG_BURST a second from one call site. Those past it are counted,
 * and the next line let through is preceded by one saying how many went.
 */
#define LOG_BURST 10
typedef struct {
    _Atomic long sec;
    _Atomic unsigned n;
    _Atomic unsigned long dropped;
} log_limit_t;
/* 1: write the line (the count of those dropped before it was written first). */
int log_limit_pass(log_limit_t *l, int level);
#define log_limited(lvl, ...)                                                                      \
    do {                                                                                           \
        static log_limit_t log_lim_;                                                               \
        if ((lvl) >= log_level && log_limit_pass(&log_lim_, (lvl))) log_write((lvl), __VA_ARGS__); \
    } while (0)
#define log_debug(...) log_at(LOG_LVL_DEBUG, __VA_ARGS__)
#define log_info(...)  log_at(LOG_LVL_INFO, __VA_ARGS__)
#define log_warn(...)  log_at(LOG_LVL_WARN, __VA_ARGS__)
#define log_error(...) log_at(LOG_LVL_ERROR, __VA_ARGS__)

#endif
