/*
 * wl-drive: offline tools for one warmlake drive directory.
 *
 *   wl-drive stats DIR            open the drive (replaying what the index
 *                                 lacks) and print its counters
 *   wl-drive rebuild-index DIR    move the index aside and rebuild it from
 *                                 the segments alone
 *   wl-drive compact DIR          run compaction until nothing qualifies,
 *                                 then the index's own (one sorted run)
 *   wl-drive dump DIR             list every valid record in the segments
 *   wl-drive check DIR            each segment's live counter against the
 *                                 index entries in it (exit 1 if any differ)
 *
 * The geometry (IU, segment size, capacity) is read from DIR/DRIVE.
 */
#include "common/err.h"
#include "common/log.h"
#include "storage/drive.h"

#include <stdio.h>
#include <string.h>

static void usage(void)
{
    fprintf(stderr, "usage: wl-drive stats|rebuild-index|compact|dump|check DIR\n");
}

static void print_stats(drive_t *d)
{
    drive_stats_t s;
    drive_stats(d, &s);
    printf("iu                 %u\n", s.iu);
    printf("capacity           %llu\n", (unsigned long long)s.capacity);
    printf("segment_size       %llu\n", (unsigned long long)s.segment_size);
    printf("segments           %u (free %u, gc %u)\n", s.segments, s.segments_free, s.segments_gc);
    printf("live_bytes         %llu\n", (unsigned long long)s.live_bytes);
    printf("used_bytes         %llu\n", (unsigned long long)s.used_bytes);
    printf("written_bytes      %llu\n", (unsigned long long)s.written_bytes);
    printf("lifetime_host      %llu\n", (unsigned long long)s.lifetime_host_bytes);
    printf("this run: user %llu host %llu padding %llu relocated %llu index %llu wa %.3f\n",
           (unsigned long long)s.user_bytes, (unsigned long long)s.host_bytes,
           (unsigned long long)s.padding_bytes, (unsigned long long)s.relocated_bytes,
           (unsigned long long)s.index_bytes, s.write_amp);
    printf("compactions        %llu (released %llu, tombstones dropped %llu)\n",
           (unsigned long long)s.compactions, (unsigned long long)s.segments_released,
           (unsigned long long)s.tombstones_dropped);
}

static void check_one(void *arg, const drive_check_seg_t *c)
{
    int *all = arg;
    int bad = c->live != c->indexed || c->past_tail;
    if (bad || *all)
        printf("seg=%u kind=%s live=%llu indexed=%llu past_tail=%llu%s\n", c->seg,
               c->kind == 2 ? "gc" : "user", (unsigned long long)c->live,
               (unsigned long long)c->indexed, (unsigned long long)c->past_tail,
               bad ? " MISMATCH" : "");
}

static int dump_one(void *arg, uint32_t seg, uint64_t off, int type, uint64_t seq,
                    const drive_id_t *id, uint64_t len, const void *meta, size_t meta_len)
{
    (void)arg;
    printf("seg=%u off=%llu type=%s seq=%llu bucket=%s key=%s version=%s shard=%u len=%llu "
           "meta=%.*s\n",
           seg, (unsigned long long)off, type == 1 ? "data" : "tombstone", (unsigned long long)seq,
           id->bucket, id->key, id->version, id->shard, (unsigned long long)len,
           (int)(meta_len > 64 ? 64 : meta_len), (const char *)meta);
    return 0;
}

int main(int argc, char **argv)
{
    drive_cfg_t cfg = {0};
    drive_t *d = NULL;
    int rc;

    if (argc != 3) {
        usage();
        return 2;
    }
    cfg.path = argv[2];
    if (strcmp(argv[1], "rebuild-index") == 0) {
        rc = drive_rebuild_index(&cfg);
        if (rc) {
            fprintf(stderr, "wl-drive: rebuild failed: %s\n", err_str(rc));
            return 1;
        }
        if ((rc = drive_open(&cfg, &d)) != 0) return 1;
        print_stats(d);
        drive_close(d);
        return 0;
    }
    if (strcmp(argv[1], "stats") != 0 && strcmp(argv[1], "compact") != 0 &&
        strcmp(argv[1], "dump") != 0 && strcmp(argv[1], "check") != 0) {
        usage();
        return 2;
    }
    if ((rc = drive_open(&cfg, &d)) != 0) {
        fprintf(stderr, "wl-drive: cannot open %s: %s\n", cfg.path, err_str(rc));
        return 1;
    }
    if (strcmp(argv[1], "dump") == 0) {
        rc = drive_dump(d, dump_one, NULL);
        drive_close(d);
        return rc ? 1 : 0;
    }
    if (strcmp(argv[1], "check") == 0) {
        uint64_t dangling = 0;
        int all = 0;
        drive_compaction_pause(d, 1);
        rc = drive_check(d, check_one, &all, &dangling);
        drive_close(d);
        if (dangling)
            printf("entries naming a missing segment: %llu\n", (unsigned long long)dangling);
        if (rc < 0)
            fprintf(stderr, "wl-drive: check failed: %s\n", err_str(rc));
        else
            printf("%s\n",
                   rc ? "accounting differs from the index" : "accounting matches the index");
        return rc ? 1 : 0;
    }
    rc = 0;
    if (strcmp(argv[1], "compact") == 0) {
        printf("released %d segments\n", drive_compact(d, 0, 1));
        if ((rc = drive_index_compact(d)) != 0)
            fprintf(stderr, "wl-drive: index compaction failed: %s\n", err_str(rc));
    }
    print_stats(d);
    drive_close(d);
    return rc ? 1 : 0;
}
