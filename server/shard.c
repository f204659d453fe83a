#include "server/shard.h"

#include "storage/rec.h"

/* The gateway's limits are the local drive's: a name that one takes, the other does too. */
_Static_assert(SHARD_MAX_BUCKET == REC_MAX_BUCKET, "SHARD_MAX_BUCKET must match storage/rec.h");
_Static_assert(SHARD_MAX_KEY == REC_MAX_KEY, "SHARD_MAX_KEY must match storage/rec.h");

static int l_put(void *ctx, const drive_id_t *id, const void *data, size_t len, const void *meta,
                 size_t meta_len)
{
    return drive_put(ctx, id, data, len, meta, meta_len);
}

static int l_read(void *ctx, const drive_id_t *id, uint64_t off, void *buf, size_t len)
{
    return drive_read(ctx, id, off, buf, len);
}

static int l_stat(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t cap)
{
    return drive_stat(ctx, id, st, meta, cap);
}

static int l_del(void *ctx, const drive_id_t *id)
{
    return drive_delete(ctx, id);
}

static int l_list(void *ctx, const char *bucket, const char *prefix, const char *after,
                  drive_list_fn fn, void *arg)
{
    return drive_list(ctx, bucket, prefix, after, fn, arg);
}

static int l_read_split(void *ctx, const drive_id_t *id, void *buf, size_t len, void *tail,
                        size_t tail_len, uint32_t *buf_crc)
{
    return drive_read_split(ctx, id, 0, buf, len, tail, tail_len, buf_crc);
}

static int l_get(void *ctx, const drive_id_t *id, drive_stat_t *st, void *meta, size_t meta_cap,
                 void *buf, size_t cap)
{
    return drive_get(ctx, id, st, meta, meta_cap, buf, cap);
}

static void l_stats(void *ctx, drive_stats_t *st)
{
    drive_stats(ctx, st);
}

static int l_put_async(void *ctx, const drive_id_t *id, const void *data, size_t len,
                       const void *meta, size_t meta_len, drive_done_fn done, void *arg)
{
    return drive_put_async(ctx, id, data, len, meta, meta_len, done, arg);
}

static int l_scan(void *ctx, const char *bucket, const char *prefix, const drive_from_t *from,
                  drive_scan_fn fn, void *arg)
{
    return drive_scan(ctx, bucket, prefix, from, fn, arg);
}

static const shard_ops_t local_ops = {
    .put = l_put,
    .read = l_read,
    .stat = l_stat,
    .del = l_del,
    .list = l_list,
    .read_split = l_read_split,
    .get = l_get,
    .stats = l_stats,
    .put_async = l_put_async,
    .scan = l_scan,
};

shard_store_t shard_store_local(drive_t *d)
{
    return (shard_store_t){&local_ops, d};
}
