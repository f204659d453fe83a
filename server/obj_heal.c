/*
 * obj_heal: puts back what one object's current version is missing on its
 * stores: heads where a store has none or an older one (a store that was
 * down or refused during the commit), and blocks that are missing or fail
 * their crc, rebuilt from the stripe's other blocks (ers_verify_stripe).
 * A multipart object heals each of its parts the same way.
 *
 * The version is pinned while it heals (obj_open), so its blocks cannot be
 * dropped under it; heads go under the stores' condition that nothing newer
 * is there (a version committed meanwhile is never covered), blocks are
 * plain puts of records whose identity names this version alone.
 */
#include "server/obj_int.h"

#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

/* The stores that should hold info's head and hold none, or an older one. */
static uint32_t heads_missing(obj_set_t *s, const char *bucket, const char *key,
                              const obj_info_t *info)
{
    uint32_t want = info->sparse ? info->inl : UINT32_MAX, missing = 0;
    int stores[OBJ_MAX_SHARDS], n = obj__stores_in(s, want, stores);
    obj__head_t *h = xmalloc(sizeof(*h) * (size_t)s->n);
    obj__read_heads(s, bucket, key, "", stores, n, h);
    for (int j = 0; j < n; j++) {
        if (h[j].rc == ERR_NOT_FOUND) {
            missing |= 1u << stores[j];
            continue;
        }
        if (!h[j].ok) continue; /* a failing store: nothing to do there now */
        const obj_info_t *o = &h[j].info;
        if (o->stamp_ns < info->stamp_ns ||
            (o->stamp_ns == info->stamp_ns && strcmp(o->upload_id, info->upload_id) < 0))
            missing |= 1u << stores[j];
    }
    free(h);
    return missing;
}

/* Verify every stripe of r's version, rewrite the blocks rebuilt. */
static int heal_blocks(obj_set_t *s, obj_reader_t *r, const char *bucket, const char *key,
                       const obj_info_t *info, obj_heal_report_t *rep)
{
    ers_decoder_t *d = obj__reader_decoder(r);
    char bb[SHARD_MAX_BUCKET + 2];
    obj__blk_bucket(bb, bucket);
    uint64_t stripes = ers_stripe_count(&info->layout);
    uint8_t *rec = xmalloc(info->layout.block_size + 4);
    int rc = 0;
    for (uint64_t st = 0; st < stripes && !rc; st++) {
        uint32_t rebuilt = 0;
        rc = ers_verify_stripe(d, st, obj__block_source, r, &rebuilt);
        rep->blocks_checked += (uint32_t)s->n;
        for (int i = 0; i < s->n && !rc; i++) {
            if (!((rebuilt >> i) & 1)) continue;
            uint32_t len = ers_block_len(&info->layout, st, (unsigned)i);
            memcpy(rec, ers_decoder_block(d, (unsigned)i), len);
            le_put32(rec + len, ers_decoder_block_crc(d, (unsigned)i));
            drive_id_t id = {bb, key, info->upload_id, (uint32_t)(st << SHARD_BITS) | (uint32_t)i};
            int prc = s->st[i].ops->put(s->st[i].ctx, &id, rec, (size_t)len + 4, NULL, 0);
            if (prc == 0)
                rep->blocks_fixed++;
            else
                rep->failed++; /* the store is still away: healed another time */
        }
    }
    free(rec);
    return rc;
}

int obj_heal(obj_set_t *s, const char *bucket, const char *key, obj_heal_report_t *rep)
{
    obj_info_t *info = xmalloc(sizeof(*info));
    int err;
    obj_reader_t *r = obj_open(s, bucket, key, info, &err);
    if (!r) {
        free(info);
        return err == ERR_NOT_FOUND ? 0 : err; /* deleted: nothing to heal */
    }
    rep->objects++;
    obj__reader_ask_all(r);
    uint32_t missing = heads_missing(s, bucket, key, info);
    if (missing) {
        shard_cond_t c = {.mode = SHARD_IF_AT_MOST, .stamp = info->stamp_ns};
        memcpy(c.upload, info->upload_id, sizeof(c.upload));
        memcpy(c.self, info->upload_id, sizeof(c.self));
        uint32_t failed = 0;
        int refused = 0, first_err = 0;
        int n = obj__heads_to(s, bucket, key, info, obj__reader_inline(r), missing, &c, &failed,
                              &refused, &first_err);
        rep->heads_fixed += (uint32_t)n;
        rep->failed += (uint32_t)__builtin_popcount(failed);
    }
    int rc = 0;
    if (info->multipart) {
        const int *nums;
        const uint64_t *sizes;
        int nparts = obj_read_parts(r, &nums, &sizes);
        for (int i = 0; i < nparts && !rc; i++) {
            char pk[64];
            obj__part_key(pk, sizeof(pk), info->upload_id, nums[i]);
            rc = obj_heal(s, MPU_PARTS, pk, rep);
        }
    } else if (!info->inl && obj__reader_decoder(r)) {
        rc = heal_blocks(s, r, bucket, key, info, rep);
    }
    obj_close(r);
    if (rc) log_warn("event=heal_failed key=%s err=%s", key, err_name(rc));
    free(info);
    return rc;
}
