/*
 * obj_head_write.c: writing heads (room of the object layer; map in
 * obj_int.h): one round of heads on the stores a version goes to, all at
 * once (one durable write's time, not n), conditioned as a commit asks,
 * hedged once the write quorum is durable; which stores hold an inline
 * object's whole copies (m+1 from the key's hash, avoiding stores known to
 * be away).
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

/* All at once: one durable write's time, not n. */
int obj__write_heads(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                     uint32_t dead, int *first_err)
{
    return obj__write_at(s, bucket, key, "", info, dead, first_err);
}

int obj__write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                  obj_info_t *info, uint32_t dead, int *first_err)
{
    return obj__write_at_data(s, bucket, key, pos, info, NULL, dead, first_err);
}

int obj__enough(const obj_set_t *s, const obj_info_t *info, int heads)
{
    return info->sparse ? heads >= __builtin_popcount(info->inl) : heads >= s->wq;
}

/*
 * The first half of a round of heads: start the puts on the stores of `to`
 * (the bytes, data, on those of info->inl), meta (HEAD_MAX bytes) and jobs
 * kept by the caller until l opens. Returns the jobs started, or -1 when
 * info's metadata does not encode (*first_err ERR_TOO_LARGE, nothing
 * started).
 */
static int heads_start(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       const obj_info_t *info, const void *data, uint32_t to,
                       const shard_cond_t *cond, int hedge, uint8_t *meta, obj__put_job_t *jobs,
                       latch_t *l, int *first_err)
{
    size_t ml = obj_meta_encode(info, meta, HEAD_MAX);
    int n = 0;
    if (!ml) {
        if (!*first_err) *first_err = ERR_TOO_LARGE;
        return -1;
    }
    for (int i = 0; i < s->n; i++) {
        if (!((to >> i) & 1)) continue;
        int carries = (info->inl >> i) & 1;
        jobs[n] = (obj__put_job_t){.base = {.run = obj__run_put},
                                   .st = &s->st[i],
                                   .id = {bucket, key, pos, (uint32_t)i},
                                   .data = carries ? data : NULL,
                                   .len = carries ? (size_t)info->size : 0,
                                   .meta = meta,
                                   .meta_len = ml,
                                   .cond = cond,
                                   .hedge = hedge && s->hedge_ms};
        n++;
    }
    obj__put_start(s, jobs, n, l);
    return n;
}

/* The second half, once the latch opened: the heads written; failures and refusals counted. */
static int heads_count(const obj__put_job_t *jobs, int n, const shard_cond_t *cond,
                       uint32_t *failed, int *refused, int *first_err)
{
    int heads = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i].rc == 0) {
            heads++;
            continue;
        }
        if (jobs[i].rc == ERR_CANCELED) {
            *failed |= 1u << jobs[i].id.shard; /* given up on: healed, as a store that failed */
            continue;
        }
        if (jobs[i].rc == ERR_PRECOND && cond) {
            (*refused)++; /* the store holds what the condition does not allow to replace */
            continue;
        }
        *failed |= 1u << jobs[i].id.shard;
        if (!*first_err) *first_err = jobs[i].rc;
    }
    return heads;
}

/*
 * One round of heads: on the stores of `to`, the bytes (data) on those of
 * info->inl. Returns the heads written; the stores that failed join *failed.
 */
static int heads_round(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       const obj_info_t *info, const void *data, uint32_t to,
                       const shard_cond_t *cond, int hedge, uint32_t *failed, int *refused,
                       int *first_err)
{
    uint8_t meta[HEAD_MAX];
    obj__put_job_t jobs[OBJ_MAX_SHARDS];
    latch_t l;
    latch_init(&l);
    int n =
        heads_start(s, bucket, key, pos, info, data, to, cond, hedge, meta, jobs, &l, first_err);
    if (n < 0) {
        latch_destroy(&l);
        return 0;
    }
    /*
     * A commit's round is hedged only once the version stands for good (the write quorum, or
     * every copy of a sparse one, durable): then a head given up on that lands late is a
     * head of a committed version, which its store's condition judges as any other (refused
     * under a newer one). Short of that it is waited for, so that an undo never misses a head
     * still on its way (one landing after the undo would be a version that was refused).
     */
    uint32_t gave =
        obj__put_wait(s, jobs, n, &l, info->sparse ? __builtin_popcount(info->inl) : s->wq, 0);
    latch_destroy(&l);
    if (gave)
        log_warn("event=heads_hedged key=%s upload=%s stores=0x%x: the quorum had the heads", key,
                 info->upload_id, gave);
    return heads_count(jobs, n, cond, failed, refused, first_err);
}

int obj__heads_to(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                  const obj_info_t *info, const void *data, uint32_t to, const shard_cond_t *cond,
                  uint32_t *failed, int *refused, int *first_err)
{
    return heads_round(s, bucket, key, pos, info, data, to, cond, 0, failed, refused, first_err);
}

int obj__heads_to_start(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                        const obj_info_t *info, uint32_t to, const shard_cond_t *cond,
                        uint8_t *meta, obj__put_job_t *jobs, latch_t *l, int *first_err)
{
    return heads_start(s, bucket, key, pos, info, NULL, to, cond, 0, meta, jobs, l, first_err);
}

int obj__heads_to_count(const obj__put_job_t *jobs, int n, const shard_cond_t *cond,
                        uint32_t *failed, int *refused, int *first_err)
{
    return n < 0 ? 0 : heads_count(jobs, n, cond, failed, refused, first_err);
}

/* Every store of the set, as a mask. */
static uint32_t all_stores(const obj_set_t *s)
{
    return s->n >= 32 ? UINT32_MAX : (1u << s->n) - 1;
}

/* The first m+1 stores from the key's first inline store that are not in `skip`. */
static uint32_t copies_avoiding(const obj_set_t *s, const char *bucket, const char *key,
                                uint32_t skip)
{
    uint32_t h = obj__first_store(s, bucket, key), mask = 0;
    for (int j = 0, got = 0; j < s->n && got <= s->m; j++) {
        uint32_t i = (h + (uint32_t)j) % (uint32_t)s->n;
        if ((skip >> i) & 1) continue;
        mask |= 1u << i;
        got++;
    }
    return mask;
}

int obj__write_at_data(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       obj_info_t *info, const void *data, uint32_t dead, int *first_err)
{
    int refused = 0;
    return obj__write_at_cond(s, bucket, key, pos, info, data, dead, NULL, &refused, first_err);
}

static int write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                    obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                    int hedge, int *refused, int *first_err);

int obj__write_at_cond(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                       obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                       int *refused, int *first_err)
{
    return write_at(s, bucket, key, pos, info, data, dead, cond, 0, refused, first_err);
}

int obj__write_commit(obj_set_t *s, const char *bucket, const char *key, obj_info_t *info,
                      const void *data, uint32_t dead, const shard_cond_t *cond, int *refused,
                      int *first_err)
{
    return write_at(s, bucket, key, "", info, data, dead, cond, 1, refused, first_err);
}

static int write_at(obj_set_t *s, const char *bucket, const char *key, const char *pos,
                    obj_info_t *info, const void *data, uint32_t dead, const shard_cond_t *cond,
                    int hedge, int *refused, int *first_err)
{
    uint32_t all = all_stores(s), failed = 0;
    void *loaded = NULL;
    int heads;
    shard_cond_t newer;
    *first_err = 0;
    *refused = 0;
    if (!cond && !pos[0]) {
        /* The current position: a store keeps a newer head than this one. */
        newer.mode = SHARD_IF_NEWER;
        newer.stamp = info->stamp_ns;
        memcpy(newer.upload, info->upload_id, sizeof(newer.upload));
        cond = &newer;
    }
    if (info->inl && !data && info->size) {
        /* The version moves or gets new metadata: its bytes go with its heads. */
        loaded = xmalloc(info->size);
        if ((*first_err = obj__inline_load(s, bucket, key, info, loaded)) != 0) {
            free(loaded);
            return 0;
        }
        data = loaded;
    }
    if (info->sparse && !(info->inl & dead)) {
        heads = heads_round(s, bucket, key, pos, info, data, info->inl, cond, hedge, &failed,
                            refused, first_err);
        if (heads == __builtin_popcount(info->inl) || *first_err == ERR_TOO_LARGE || *refused)
            goto out;
        log_limited(LOG_LVL_WARN, "event=sparse_heads_short key=%s heads=%d err=%s", key, heads,
                    err_name(*first_err));
    }
    if (info->sparse || (info->inl & (dead | failed))) {
        /*
         * A store of the copies is down: the version takes a head on every
         * store instead, its bytes on the first m+1 that work (a reader asks
         * stores in that order, skipping the ones that fail).
         */
        info->sparse = 0;
        info->inl = copies_avoiding(s, bucket, key, dead | failed);
    }
    *first_err = 0;
    heads = heads_round(s, bucket, key, pos, info, data, all & ~(dead | failed), cond, hedge,
                        &failed, refused, first_err);
out:
    free(loaded);
    return heads;
}

uint32_t obj__inline_stores(const obj_set_t *s, const char *bucket, const char *key)
{
    /* m+1 neighbours from the key's hash: any m may fail, and keys spread over all stores. */
    return copies_avoiding(s, bucket, key, 0);
}
