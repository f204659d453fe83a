/*
 * etcd: a small client of etcd's v3 API through its JSON gateway (HTTP,
 * libcurl), for the control plane's few keys: the cluster map, node
 * registrations held by leases, and a watch on the map.
 *
 * Keys and values are bytes (base64 on the wire, handled here). Every call
 * tries the endpoints in turn until one answers; a call that gets no answer
 * from any fails with ERR_IO (logged once per call). Calls block (at most
 * a few seconds each): call them from threads that may block, never from
 * an event loop.
 *
 * Threads: an etcd_t may be shared; each call uses its own connection.
 */
#ifndef WL_ETCD_H
#define WL_ETCD_H

#include <stddef.h>
#include <stdint.h>

typedef struct etcd etcd_t;

/* endpoints: "http://host:port[,http://host:port...]". NULL on a bad list or no memory. */
etcd_t *etcd_new(const char *endpoints);
void etcd_free(etcd_t *e);

/*
 * The value of key: *val (malloc'd, NUL-terminated beyond *len; the caller
 * frees it) and its mod revision. 0, ERR_NOT_FOUND, ERR_IO.
 */
int etcd_get(etcd_t *e, const char *key, char **val, size_t *len, int64_t *mod_rev)
    __attribute__((warn_unused_result));
/* Put key = val, attached to lease (0: none). 0 or ERR_IO. */
int etcd_put(etcd_t *e, const char *key, const void *val, size_t len, int64_t lease)
    __attribute__((warn_unused_result));
/*
 * Put key = val only if the key's mod revision is rev (rev 0: only if the
 * key does not exist): what makes concurrent editors of the map, or
 * concurrent creators, end with one winner. 0, ERR_PRECOND (another write
 * came first), ERR_IO.
 */
int etcd_put_if(etcd_t *e, const char *key, const void *val, size_t len, int64_t rev)
    __attribute__((warn_unused_result));
/*
 * A transaction: every put, only if every compare holds. A compare is on
 * key's mod revision (rev; 0: the key does not exist) or, with prefix set,
 * on every key starting with key: none written after rev (etcd_list_at's
 * revision: a value decided from a listing is stored only while the listing
 * still holds). 0, ERR_PRECOND (a compare failed), ERR_IO.
 */
typedef struct {
    const char *key;
    int64_t rev;
    int prefix;
} etcd_cmp_t;
typedef struct {
    const char *key;
    const void *val;
    size_t len;
} etcd_kv_t;
int etcd_txn(etcd_t *e, const etcd_cmp_t *cmps, int ncmp, const etcd_kv_t *puts, int nput)
    __attribute__((warn_unused_result));
/* Delete key. 0 (also when absent) or ERR_IO. */
int etcd_delete(etcd_t *e, const char *key) __attribute__((warn_unused_result));

/* Every key starting with prefix, in key order: fn per key (non-zero stops and is returned). */
typedef int (*etcd_kv_fn)(void *arg, const char *key, const char *val, size_t len);
int etcd_list(etcd_t *e, const char *prefix, etcd_kv_fn fn, void *arg)
    __attribute__((warn_unused_result));
/* As etcd_list, and *rev: the store's revision the listing was read at. */
int etcd_list_at(etcd_t *e, const char *prefix, etcd_kv_fn fn, void *arg, int64_t *rev)
    __attribute__((warn_unused_result));

/* A lease of ttl_s seconds: 0 with *id, or ERR_IO. */
int etcd_lease_grant(etcd_t *e, int ttl_s, int64_t *id) __attribute__((warn_unused_result));
/* Renew a lease: 0, ERR_NOT_FOUND (it expired: grant another), ERR_IO. */
int etcd_lease_keepalive(etcd_t *e, int64_t id) __attribute__((warn_unused_result));
/* Revoke a lease (its keys go at once). 0 or ERR_IO. */
int etcd_lease_revoke(etcd_t *e, int64_t id) __attribute__((warn_unused_result));

/*
 * Watch key from revision from_rev on, on a thread of its own: fn runs
 * there for every change (deleted: the key was deleted; val NULL then), in
 * revision order, none missed: a watch whose connection breaks resumes
 * after the last revision seen (retrying every second while etcd is
 * unreachable).
 */
typedef void (*etcd_event_fn)(void *arg, const char *val, size_t len, int64_t mod_rev, int deleted);
typedef struct etcd_watch etcd_watch_t;
etcd_watch_t *etcd_watch_start(etcd_t *e, const char *key, int64_t from_rev, etcd_event_fn fn,
                               void *arg);
/* Stop and free the watch (fn is not running and will not run once it returned). NULL: no-op. */
void etcd_watch_stop(etcd_watch_t *w);

#endif
