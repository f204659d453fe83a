#include "storage/idx.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IDX_BLOCK (16u << 10) /* bytes of a table block (uncompressed) */

struct idx {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_readoptions_t *ro;
    rocksdb_writeoptions_t *wo;
    rocksdb_flushoptions_t *fo_wait, *fo_nowait;
    rocksdb_cache_t *cache; /* its own block cache; NULL when it shares one */
    rocksdb_block_based_table_options_t *bbto;
    rocksdb_filterpolicy_t *bloom; /* owned by bbto once set */
    char *path;

    uint64_t writes; /* atomic: batches written and flushes run, so far */
    /* The statistics cache of idx_bytes_written, under stats_lock. */
    pthread_mutex_t stats_lock;
    uint64_t writes_seen; /* `writes` just before the last statistics read */
    uint64_t written;     /* bytes written, as of that read */
    int busy;             /* RocksDB was flushing or compacting then */
    uint64_t stats_reads;
};

/* A batch with an index of its own, so reads can see its uncommitted writes. */
struct idx_batch {
    rocksdb_writebatch_wi_t *wb; /* indexed: lookups see its writes */
    rocksdb_writebatch_t *plain; /* or write-only */
};

struct idx_iter {
    rocksdb_iterator_t *it;
    rocksdb_readoptions_t *ro; /* a bounded scan's own (it points at `end`); NULL: the idx's */
    int rc;                    /* ERR_IO once an error ended the walk */
    size_t end_len;
    char end[]; /* a bounded scan's upper bound (exclusive) */
};

/* One place turns a RocksDB error string into a code and a log line. */
static int rerr(const char *op, char *err)
{
    if (!err) return 0;
    log_error("event=rocksdb_error op=%s err=\"%s\"", op, err);
    /* A full file system is not a broken index: said as such (nothing is set aside for it). */
    int rc = strstr(err, "No space left") ? ERR_NOSPC : ERR_IO;
    rocksdb_free(err);
    return rc;
}

/*
 * 1 when files in dir can be opened with O_DIRECT (not tmpfs). RocksDB only
 * finds out when its first flush fails, so ask the filesystem first.
 */
static int direct_io_works(const char *dir)
{
    char p[4200];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return 0; /* RocksDB reports it */
    snprintf(p, sizeof(p), "%s/direct-io-probe", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0) {
        fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
        unlink(p);
        return 0;
    }
    close(fd);
    unlink(p);
    return 1;
}

struct idx_cache {
    rocksdb_cache_t *lru;
    size_t capacity;
};

idx_cache_t *idx_cache_new(size_t bytes)
{
    idx_cache_t *c = xcalloc(1, sizeof(*c));
    c->lru = rocksdb_cache_create_lru(bytes);
    c->capacity = bytes;
    return c;
}

void idx_cache_free(idx_cache_t *c)
{
    if (!c) return;
    rocksdb_cache_destroy(c->lru);
    free(c);
}

size_t idx_cache_usage(idx_cache_t *c)
{
    return rocksdb_cache_get_usage(c->lru);
}

size_t idx_cache_capacity(idx_cache_t *c)
{
    return c->capacity;
}

int idx_open(const char *path, idx_t **out)
{
    return idx_open_shared(path, NULL, out);
}

int idx_open_shared(const char *path, idx_cache_t *shared, idx_t **out)
{
    idx_t *x = xcalloc(1, sizeof(*x));
    char *err = NULL;
    int direct = direct_io_works(path);

    x->path = xstrdup(path);
    pthread_mutex_init(&x->stats_lock, NULL);
    x->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(x->opts, 1);
    /* Few, large flushes and universal compaction keep RocksDB's own writes low. */
    rocksdb_options_set_write_buffer_size(x->opts, 64u << 20);
    rocksdb_options_set_max_write_buffer_number(x->opts, 3);
    /*
     * A bloom filter over each memtable's whole keys. Most point lookups
     * miss: a PUT of a new key asks every store of its set for the key's
     * heads, checks its condition under the stripe lock and looks up the
     * record it replaces, about a dozen lookups of keys no store holds.
     * Without it each miss was a search of a skiplist of some 10^5 entries.
     * 2% of the write buffer is ~1.3 MiB a memtable, tens of bits a key.
     */
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(x->opts, 0.02);
    rocksdb_options_set_memtable_whole_key_filtering(x->opts, 1);
    rocksdb_options_set_compaction_style(x->opts, rocksdb_universal_compaction);
    rocksdb_options_set_compression(x->opts, rocksdb_lz4_compression);
    rocksdb_options_set_max_open_files(x->opts, 256);
    rocksdb_options_set_max_background_jobs(x->opts, 2);
    rocksdb_options_enable_statistics(x->opts);
    /*
     * RocksDB's own LOG file is in the index's directory: once a write to it failed (its file
     * system full), Debian's librocksdb (built with assertions) aborts the process at the
     * next line it logs there (a fill probe: the recovery thread logging that the space came
     * back). Only the header it writes at open goes there; errors reach our log through the
     * calls that return them. Its MANIFEST is preallocated 64 KiB at a time, not 4 MiB, so
     * an open needs little room on a full file system.
     */
    rocksdb_options_set_info_log_level(x->opts, 5 /* header only */);
    rocksdb_options_set_keep_log_file_num(x->opts, 2);
    rocksdb_options_set_manifest_preallocation_size(x->opts, 64u << 10);
    /*
     * Every byte the index puts on the drive is a flush or a compaction
     * output written with O_DIRECT in writable_file_max_buffer_size chunks at
     * offsets that are multiples of it: large sequential writes, no stream of
     * page writebacks for the drive to read-modify-write. The last write of
     * each file is rounded up to the device's logical block size only (RocksDB
     * pads to that and truncates): the one sub-IU write per file it cannot
     * avoid, besides its MANIFEST, CURRENT and OPTIONS files (small, buffered).
     */
    if (direct) {
        rocksdb_options_set_use_direct_io_for_flush_and_compaction(x->opts, 1);
        rocksdb_options_compaction_readahead_size(x->opts, 2u << 20);
    } else {
        log_warn("event=index_no_direct_io path=%s", path);
    }
    rocksdb_options_set_writable_file_max_buffer_size(x->opts, IDX_WRITE_CHUNK);
    if (!shared) x->cache = rocksdb_cache_create_lru(IDX_OWN_CACHE);
    x->bbto = rocksdb_block_based_options_create();
    /*
     * 16 KiB blocks, not RocksDB's 4 KiB: a listing walks the index block
     * after block, and each block costs a cache lookup, an index step and,
     * on a miss, a read and a decompression of its own. Four times fewer of
     * them cut a listing's CPU per key by about a fifth (same-run A/B, 2*10^5
     * keys, 8 clients: 5.2 -> 4.0 us/key); they also compress better. A point
     * lookup still reads one block, found through the bloom filter.
     */
    rocksdb_block_based_options_set_block_size(x->bbto, IDX_BLOCK);
    /* The options hold their own reference to the cache: a shared one outlives no index. */
    rocksdb_block_based_options_set_block_cache(x->bbto, shared ? shared->lru : x->cache);
    x->bloom = rocksdb_filterpolicy_create_bloom(10);
    rocksdb_block_based_options_set_filter_policy(x->bbto, x->bloom);
    rocksdb_options_set_block_based_table_factory(x->opts, x->bbto);
    x->ro = rocksdb_readoptions_create();
    /*
     * No WAL: the segments are the index's log. A batch lives in the memtable
     * until a flush; after a crash the index is the state as of its last
     * flush (a prefix of the batches, in order), and the drive replays the
     * segments from the positions recorded in it.
     */
    x->wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(x->wo, 1);
    x->fo_wait = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(x->fo_wait, 1);
    x->fo_nowait = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(x->fo_nowait, 0);

    x->db = rocksdb_open(x->opts, path, &err);
    if (err) {
        int rc = rerr("open", err);
        x->db = NULL;
        idx_close(x);
        return rc;
    }
    *out = x;
    return 0;
}

void idx_close(idx_t *x)
{
    if (!x) return;
    if (x->db) rocksdb_close(x->db);
    rocksdb_readoptions_destroy(x->ro);
    rocksdb_writeoptions_destroy(x->wo);
    rocksdb_flushoptions_destroy(x->fo_wait);
    rocksdb_flushoptions_destroy(x->fo_nowait);
    rocksdb_options_destroy(x->opts);
    rocksdb_block_based_options_destroy(x->bbto); /* also frees the filter policy */
    if (x->cache) rocksdb_cache_destroy(x->cache);
    pthread_mutex_destroy(&x->stats_lock);
    free(x->path);
    free(x);
}

/*
 * RocksDB counts into a thread-local perf context on every lookup and every
 * iterator step unless the thread says otherwise (its level is per thread,
 * kEnableCount by default). Nothing here reads those counts, and reaching
 * them from a shared library costs a TLS lookup each time: 6% of a
 * listing's CPU, 3% of a small PUT's (perf). Each thread turns them off the
 * first time it uses an index.
 */
static __thread int perf_counters_off;
static inline void no_perf_counters(void)
{
    if (__builtin_expect(!perf_counters_off, 0)) {
        rocksdb_set_perf_level(rocksdb_disable);
        perf_counters_off = 1;
    }
}

int idx_get(idx_t *x, idx_batch_t *b, const void *key, size_t klen, void **val, size_t *vlen)
{
    char *err = NULL;
    no_perf_counters();
    if (b && b->plain) abort(); /* a write-only batch cannot be read through */
    char *v =
        b ? rocksdb_writebatch_wi_get_from_batch_and_db(b->wb, x->db, x->ro, key, klen, vlen, &err)
          : rocksdb_get(x->db, x->ro, key, klen, vlen, &err);
    if (err) return rerr("get", err);
    if (!v) return ERR_NOT_FOUND;
    /* Hand out a plain malloc'd buffer so callers need not know RocksDB. */
    *val = xmalloc(*vlen);
    memcpy(*val, v, *vlen);
    rocksdb_free(v);
    return 0;
}

idx_batch_t *idx_batch_new(void)
{
    idx_batch_t *b = xcalloc(1, sizeof(*b));
    b->wb = rocksdb_writebatch_wi_create(0, 1);
    return b;
}

idx_batch_t *idx_batch_new_plain(void)
{
    idx_batch_t *b = xcalloc(1, sizeof(*b));
    b->plain = rocksdb_writebatch_create();
    return b;
}

void idx_batch_put(idx_batch_t *b, const void *k, size_t kl, const void *v, size_t vl)
{
    if (b->plain)
        rocksdb_writebatch_put(b->plain, k, kl, v, vl);
    else
        rocksdb_writebatch_wi_put(b->wb, k, kl, v, vl);
}

void idx_batch_delete(idx_batch_t *b, const void *k, size_t kl)
{
    if (b->plain)
        rocksdb_writebatch_delete(b->plain, k, kl);
    else
        rocksdb_writebatch_wi_delete(b->wb, k, kl);
}

void idx_batch_clear(idx_batch_t *b)
{
    if (b->plain)
        rocksdb_writebatch_clear(b->plain);
    else
        rocksdb_writebatch_wi_clear(b->wb);
}

int idx_batch_count(idx_batch_t *b)
{
    return b->plain ? rocksdb_writebatch_count(b->plain) : rocksdb_writebatch_wi_count(b->wb);
}

void idx_batch_free(idx_batch_t *b)
{
    if (!b) return;
    if (b->plain)
        rocksdb_writebatch_destroy(b->plain);
    else
        rocksdb_writebatch_wi_destroy(b->wb);
    free(b);
}

int idx_write(idx_t *x, idx_batch_t *b)
{
    char *err = NULL;
    no_perf_counters();
    if (b->plain)
        rocksdb_write(x->db, x->wo, b->plain, &err);
    else
        rocksdb_write_writebatch_wi(x->db, x->wo, b->wb, &err);
    /* Counted once written: a statistics read that missed it sees the count move. */
    __atomic_add_fetch(&x->writes, 1, __ATOMIC_RELEASE);
    return rerr("write", err);
}

idx_iter_t *idx_iter_new(idx_t *x, const void *start, size_t len)
{
    idx_iter_t *it = xmalloc(sizeof(*it));
    no_perf_counters();
    it->it = rocksdb_create_iterator(x->db, x->ro);
    it->ro = NULL;
    it->rc = 0;
    it->end_len = 0;
    rocksdb_iter_seek(it->it, start, len);
    return it;
}

idx_iter_t *idx_iter_range(idx_t *x, const void *start, size_t len, const void *end, size_t end_len)
{
    idx_iter_t *it = xmalloc(sizeof(*it) + end_len);
    no_perf_counters();
    it->rc = 0;
    it->end_len = end_len;
    memcpy(it->end, end, end_len);
    /*
     * An upper bound lets RocksDB stop each sorted run at the end of the
     * range instead of reading on into what follows it (a bucket's block
     * entries sort right after its heads) and skip the table files wholly
     * past it. The bound is read through the options for the iterator's
     * life: options of its own, pointing at the copy above.
     */
    it->ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_upper_bound(it->ro, it->end, end_len);
    it->it = rocksdb_create_iterator(x->db, it->ro);
    rocksdb_iter_seek(it->it, start, len);
    return it;
}

/* The iterator is not valid: by exhaustion, or by an error (kept and logged once). */
static void iter_check(idx_iter_t *it)
{
    char *err = NULL;
    if (it->rc) return;
    rocksdb_iter_get_error(it->it, &err);
    if (err) it->rc = rerr("iterate", err);
}

int idx_iter_valid(idx_iter_t *it)
{
    if (rocksdb_iter_valid(it->it)) return 1;
    iter_check(it);
    return 0;
}

void idx_iter_next(idx_iter_t *it)
{
    rocksdb_iter_next(it->it);
}

const char *idx_iter_key(idx_iter_t *it, size_t *len)
{
    return rocksdb_iter_key(it->it, len);
}

const char *idx_iter_value(idx_iter_t *it, size_t *len)
{
    return rocksdb_iter_value(it->it, len);
}

int idx_iter_status(idx_iter_t *it)
{
    if (!rocksdb_iter_valid(it->it)) iter_check(it);
    return it->rc;
}

void idx_iter_free(idx_iter_t *it)
{
    if (!it) return;
    rocksdb_iter_destroy(it->it);
    if (it->ro) rocksdb_readoptions_destroy(it->ro);
    free(it);
}

/* Sum "<name> COUNT : N" from RocksDB's statistics text. */
static uint64_t ticker(const char *stats, const char *name)
{
    const char *p = stats;
    size_t n = strlen(name);
    while ((p = strstr(p, name)) != NULL) {
        if ((p == stats || p[-1] == '\n') && p[n] == ' ') {
            const char *c = strstr(p, "COUNT : ");
            if (c) return strtoull(c + 8, NULL, 10);
        }
        p += n;
    }
    return 0;
}

static uint64_t prop(idx_t *x, const char *name)
{
    uint64_t v = 0;
    if (rocksdb_property_int(x->db, name, &v) != 0) return 0;
    return v;
}

/* RocksDB has a flush or a compaction running or waiting: it is writing on its own. */
static int bg_busy(idx_t *x)
{
    return prop(x, "rocksdb.num-running-flushes") || prop(x, "rocksdb.num-running-compactions") ||
           prop(x, "rocksdb.mem-table-flush-pending") || prop(x, "rocksdb.compaction-pending");
}

uint64_t idx_bytes_written(idx_t *x)
{
    uint64_t total;
    pthread_mutex_lock(&x->stats_lock);
    uint64_t writes = __atomic_load_n(&x->writes, __ATOMIC_ACQUIRE);
    int busy = bg_busy(x);
    if (x->stats_reads == 0 || writes != x->writes_seen || x->busy || busy) {
        char *s = rocksdb_options_statistics_get_string(x->opts);
        x->stats_reads++;
        x->writes_seen = writes;
        x->busy = busy;
        if (s) {
            total = ticker(s, "rocksdb.wal.bytes") + ticker(s, "rocksdb.flush.write.bytes") +
                    ticker(s, "rocksdb.compact.write.bytes");
            rocksdb_free(s);
            /* Tickers only grow; never hand out a smaller figure than before. */
            if (total > x->written) x->written = total;
        }
    }
    total = x->written;
    pthread_mutex_unlock(&x->stats_lock);
    return total;
}

uint64_t idx_stats_reads(idx_t *x)
{
    pthread_mutex_lock(&x->stats_lock);
    uint64_t n = x->stats_reads;
    pthread_mutex_unlock(&x->stats_lock);
    return n;
}

uint64_t idx_disk_bytes(idx_t *x)
{
    return prop(x, "rocksdb.total-sst-files-size");
}

void idx_mem(idx_t *x, idx_mem_t *m)
{
    /* size-all-mem-tables, not cur-size-: flushed memtables kept for iterators still hold. */
    m->memtables = prop(x, "rocksdb.size-all-mem-tables");
    m->readers = prop(x, "rocksdb.estimate-table-readers-mem");
    m->cache = x->cache ? rocksdb_cache_get_usage(x->cache) : 0;
}

uint64_t idx_mem_bytes(idx_t *x)
{
    idx_mem_t m;
    idx_mem(x, &m);
    return m.memtables + m.readers + m.cache;
}

int idx_flush(idx_t *x)
{
    char *err = NULL;
    rocksdb_flush(x->db, x->fo_wait, &err);
    __atomic_add_fetch(&x->writes, 1, __ATOMIC_RELEASE);
    return rerr("flush", err);
}

int idx_compact(idx_t *x)
{
    /* The C API's manual compaction reports no status: its failure is a background error. */
    uint64_t errs = prop(x, "rocksdb.background-errors");
    rocksdb_compact_range(x->db, NULL, 0, NULL, 0);
    __atomic_add_fetch(&x->writes, 1, __ATOMIC_RELEASE);
    if (prop(x, "rocksdb.background-errors") == errs) return 0;
    log_warn("event=index_compact_failed path=%s", x->path);
    return ERR_IO;
}

int idx_flush_start(idx_t *x)
{
    char *err = NULL;
    rocksdb_flush(x->db, x->fo_nowait, &err);
    __atomic_add_fetch(&x->writes, 1, __ATOMIC_RELEASE);
    return rerr("flush", err);
}

int idx_flushing(idx_t *x)
{
    return prop(x, "rocksdb.num-running-flushes") || prop(x, "rocksdb.mem-table-flush-pending");
}
