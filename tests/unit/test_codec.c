/*
 * On-disk formats of the drive engine (storage/codec.h): every encoder
 * against its decoder, every field of the segment superblock and of each
 * index value corrupted on its own (crc recomputed, so the field's own check
 * is what refuses it), and the same damage on a real drive: the open is
 * refused with ERR_CORRUPT and a log line, and nothing is thrown away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/crc.h"
#include "common/err.h"
#include "common/le.h"
#include "common/log.h"
#include "storage/codec.h"
#include "storage/drive.h"
#include "testlib.h"
#include "storage/idx.h"

#define _XOPEN_SOURCE_EXTRA
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

/* ---- helpers ---- */

static drive_cfg_t cfg_for(const char *dir)
{
    drive_cfg_t c = {0};
    c.path = dir;
    c.iu = 4096;
    c.segment_size = 256 * KiB;
    c.capacity = 16 * MiB;
    return c;
}

static int put_seeded(drive_t *d, const char *key, uint64_t seed, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    tl_fill(buf, len, seed);
    drive_id_t id = {"bkt", key, "", 0};
    int rc = drive_put(d, &id, buf, len, "meta", 4);
    free(buf);
    return rc;
}

static int check_seeded(drive_t *d, const char *key, uint64_t seed, size_t len)
{
    drive_id_t id = {"bkt", key, "", 0};
    uint8_t *got = malloc(len + 1), *want = malloc(len + 1);
    tl_fill(want, len, seed);
    int rc = drive_read(d, &id, 0, got, len);
    if (rc == 0 && memcmp(got, want, len) != 0) rc = -100;
    free(got);
    free(want);
    return rc;
}

/* ---- superblock ---- */

static const seg_sb_t sb_good = {SEG_GC, 0x12345678u, 65536, 5 * GiB, 0, 0};

static void sb_recrc(uint8_t *b)
{
    le_put32(b + 24, crc32c(0, b, 24));
}

static void expect_sb_corrupt(const uint8_t *b, size_t len, const char *what)
{
    seg_sb_t out;
    const char *why = NULL;
    if (codec_sb_decode(b, len, &out, &why) != ERR_CORRUPT)
        fail_msg("superblock %s accepted", what);
    assert_non_null(why);
}

static void test_superblock(void **state)
{
    (void)state;
    uint8_t b[SEG_SB_LEN + 1], c[SEG_SB_LEN + 1];
    seg_sb_t out;
    const char *why = NULL;

    codec_sb_encode(b, &sb_good);
    assert_int_equal(le_get32(b), SEG_MAGIC);
    assert_int_equal(le_get16(b + 4), SEG_VERSION);
    assert_int_equal(codec_sb_decode(b, SEG_SB_LEN, &out, &why), 0);
    assert_int_equal(out.kind, SEG_GC);
    assert_int_equal(out.id, 0x12345678u);
    assert_int_equal(out.iu, 65536);
    assert_int_equal(out.seg_size, 5 * GiB); /* all 64 bits */

    /* Lengths are exact. */
    expect_sb_corrupt(b, SEG_SB_LEN - 1, "short");
    expect_sb_corrupt(b, SEG_SB_LEN + 1, "long");
    /* The crc covers everything before it. */
    for (int i = 0; i < 28; i++) {
        memcpy(c, b, SEG_SB_LEN);
        c[i] ^= 0x10;
        expect_sb_corrupt(c, SEG_SB_LEN, "bit flip");
    }
    /* Each field on its own, with a valid crc. */
    struct {
        const char *what;
        int off, width;
        uint64_t val;
    } bad[] = {
        {"magic", 0, 4, 0x47534c58u},
        {"version 0", 4, 2, 0},
        {"version 3", 4, 2, 3},
        {"kind 0", 6, 1, 0},
        {"kind 3", 6, 1, 3},
        {"reserved", 7, 1, 1},
        {"iu 0", 12, 4, 0},
        {"iu 2048", 12, 4, 2048},
        {"iu 12288", 12, 4, 12288},
        {"iu 2 MiB", 12, 4, 2u << 20},
        {"segment size not a multiple of the iu", 16, 8, 5 * GiB + 4096},
        {"segment size below 4 IUs", 16, 8, 3 * 65536},
        {"segment size 0", 16, 8, 0},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(c, b, SEG_SB_LEN);
        if (bad[i].width == 1) c[bad[i].off] = (uint8_t)bad[i].val;
        if (bad[i].width == 2) le_put16(c + bad[i].off, (uint16_t)bad[i].val);
        if (bad[i].width == 4) le_put32(c + bad[i].off, (uint32_t)bad[i].val);
        if (bad[i].width == 8) le_put64(c + bad[i].off, bad[i].val);
        sb_recrc(c);
        expect_sb_corrupt(c, SEG_SB_LEN, bad[i].what);
    }
    /* The high half of the size is read: 5 GiB and 1 GiB differ. */
    memcpy(c, b, SEG_SB_LEN);
    le_put64(c + 16, 1 * GiB);
    sb_recrc(c);
    assert_int_equal(codec_sb_decode(c, SEG_SB_LEN, &out, NULL), 0);
    assert_int_equal(out.seg_size, 1 * GiB);
    assert_int_equal(out.first_seq, 0); /* version 1 */
}

/* A segment written into a file that held another: version 2, with its first sequence number. */
static void test_superblock_v2(void **state)
{
    (void)state;
    uint8_t b[SEG_SB_LEN], c[SEG_SB_LEN];
    seg_sb_t in = sb_good, out;
    in.kind = SEG_USER;
    in.first_seq = 0x0102030405060708ull;
    in.seed = 0xa1b2c3d4u;
    codec_sb_encode(b, &in);
    assert_int_equal(le_get16(b + 4), 2);
    assert_int_equal(codec_sb_decode(b, SEG_SB_LEN, &out, NULL), 0);
    assert_int_equal(out.kind, SEG_USER);
    assert_int_equal(out.id, in.id);
    assert_int_equal(out.seg_size, in.seg_size);
    assert_int_equal(out.first_seq, in.first_seq); /* all 64 bits */
    assert_int_equal(out.seed, in.seed);
    /* The crc covers first_seq and seed too. */
    for (int i = 0; i < 40; i++) {
        memcpy(c, b, SEG_SB_LEN);
        c[i] ^= 0x04;
        expect_sb_corrupt(c, SEG_SB_LEN, "bit flip (version 2)");
    }
    /* Version 2 says a first sequence number; 0 is none. */
    memcpy(c, b, SEG_SB_LEN);
    le_put64(c + 24, 0);
    le_put32(c + 36, crc32c(0, c, 36));
    expect_sb_corrupt(c, SEG_SB_LEN, "first_seq 0");
    memcpy(c, b, SEG_SB_LEN);
    le_put32(c + 32, 0);
    le_put32(c + 36, crc32c(0, c, 36));
    expect_sb_corrupt(c, SEG_SB_LEN, "seed 0");
    /* A version 1 superblock leaves the bytes past its crc zero: read as before. */
    in.first_seq = 0;
    in.seed = 0;
    codec_sb_encode(b, &in);
    assert_int_equal(le_get16(b + 4), 1);
    for (int i = 28; i < SEG_SB_LEN; i++)
        assert_int_equal(b[i], 0);
    assert_int_equal(codec_sb_decode(b, SEG_SB_LEN, &out, NULL), 0);
    assert_int_equal(out.first_seq, 0);
}

/* ---- keys ---- */

static void test_keys(void **state)
{
    (void)state;
    uint8_t k[KEY_MAX];
    rec_id_t id = {"bkt", 3, "a/b", 3, "v1", 2, 0x01020304u}, out;
    size_t n = codec_key_encode(k, &id);
    assert_int_equal(n, 1 + 3 + 1 + 3 + 1 + 2 + 1 + 4);
    assert_int_equal(k[0], 'o');
    assert_int_equal(codec_key_decode(k, n, &out), 0);
    assert_true(rec_id_equal(&id, &out));
    assert_int_equal(out.shard, 0x01020304u);

    /* Empty key and version are fine; an empty bucket is not. */
    rec_id_t e = {"b", 1, "", 0, "", 0, 7};
    n = codec_key_encode(k, &e);
    assert_int_equal(codec_key_decode(k, n, &out), 0);
    assert_true(rec_id_equal(&e, &out));

    n = codec_key_encode(k, &id);
    uint8_t c[KEY_MAX + 8];
    memcpy(c, k, n);
    c[0] = 's';
    assert_int_equal(codec_key_decode(c, n, &out), ERR_CORRUPT);
    memcpy(c, k, n);
    assert_int_equal(codec_key_decode(c, n - 1, &out), ERR_CORRUPT); /* shard cut */
    c[n] = 0;
    assert_int_equal(codec_key_decode(c, n + 1, &out), ERR_CORRUPT); /* trailing byte */
    memcpy(c, "o\0k\0v\0\0\0\0\0", 10);
    assert_int_equal(codec_key_decode(c, 10, &out), ERR_CORRUPT); /* empty bucket */
    memcpy(c, "obkt\0key", 8);
    assert_int_equal(codec_key_decode(c, 8, &out), ERR_CORRUPT); /* no terminators */

    uint8_t s[SEG_KEY_LEN];
    codec_seg_key(s, 0x0a0b0c0du);
    assert_memory_equal(s, "s\x0a\x0b\x0c\x0d", SEG_KEY_LEN);
}

/* ---- entries ---- */

static void put_field(uint8_t *b, int off, int width, uint64_t v)
{
    if (width == 1) b[off] = (uint8_t)v;
    if (width == 4) le_put32(b + off, (uint32_t)v);
    if (width == 8) le_put64(b + off, v);
}

static void test_entry(void **state)
{
    (void)state;
    static uint8_t b[ENT_FIXED + REC_MAX_META + 2], c[sizeof(b)];
    const char meta[] = "etag=abc;size=12";
    ent_t e = {REC_DATA, 9,           123 * 4096ull,         100 + 5000,      100, 5000,
               77,       0xdeadbeefu, (const uint8_t *)meta, sizeof(meta) - 1};
    ent_t out;
    const char *why = NULL;
    size_t n = codec_ent_encode(b, &e);
    assert_int_equal(n, ENT_FIXED + sizeof(meta) - 1);
    assert_int_equal(b[0], ENT_VERSION);
    assert_int_equal(codec_ent_decode(b, n, &out, &why), 0);
    assert_int_equal(out.type, REC_DATA);
    assert_int_equal(out.seg, 9);
    assert_int_equal(out.off, 123 * 4096ull);
    assert_int_equal(out.rec_len, 5100);
    assert_int_equal(out.hdr_len, 100);
    assert_int_equal(out.payload_len, 5000);
    assert_int_equal(out.seq, 77);
    assert_int_equal(out.hdr_crc, 0xdeadbeefu);
    assert_int_equal(out.meta_len, sizeof(meta) - 1);
    assert_memory_equal(out.meta, meta, sizeof(meta) - 1);

    /* A tombstone without metadata: the smallest value. */
    ent_t t = {REC_TOMBSTONE, 1, 4096, REC_FIXED + 8, REC_FIXED + 8, 0, 3, 1, NULL, 0};
    assert_int_equal(codec_ent_encode(c, &t), ENT_FIXED);
    assert_int_equal(codec_ent_decode(c, ENT_FIXED, &out, NULL), 0);
    assert_int_equal(out.type, REC_TOMBSTONE);
    assert_int_equal(out.meta_len, 0);

    struct {
        const char *what;
        int off, width;
        uint64_t val;
    } bad[] = {
        {"version 0", 0, 1, 0},
        {"version 2", 0, 1, 2},
        {"type 0", 1, 1, 0},
        {"type 3", 1, 1, 3},
        {"rec_len one short", 14, 4, 5099},
        {"rec_len one long", 14, 4, 5101},
        {"hdr_len below the fixed header", 18, 4, REC_FIXED - 1},
        {"hdr_len without room for the metadata", 18, 4, REC_FIXED + sizeof(meta) - 2},
        {"payload_len beyond the largest", 22, 8, REC_MAX_PAYLOAD + 1},
        {"payload_len past 32 bits", 22, 8, (1ull << 32) + 5000},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(c, b, n);
        put_field(c, bad[i].off, bad[i].width, bad[i].val);
        why = NULL;
        if (codec_ent_decode(c, n, &out, &why) != ERR_CORRUPT)
            fail_msg("entry with %s accepted", bad[i].what);
        assert_non_null(why);
    }
    /* Lengths: shorter than the fixed part, or more metadata than a record can carry. */
    for (size_t len = 0; len < ENT_FIXED; len++)
        assert_int_equal(codec_ent_decode(b, len, &out, NULL), ERR_CORRUPT);
    ent_t big = e;
    static uint8_t blob[REC_MAX_META + 1];
    big.meta = blob;
    big.meta_len = REC_MAX_META;
    big.hdr_len = REC_FIXED + REC_MAX_META;
    big.rec_len = big.hdr_len + (uint32_t)big.payload_len;
    n = codec_ent_encode(c, &big);
    assert_int_equal(codec_ent_decode(c, n, &out, NULL), 0);
    le_put32(c + 18, big.hdr_len + 1); /* room for one more byte, so only the length is wrong */
    le_put32(c + 14, big.rec_len + 1);
    assert_int_equal(codec_ent_decode(c, n + 1, &out, NULL), ERR_CORRUPT);
}

/* ---- segment accounting ---- */

static void test_segmeta(void **state)
{
    (void)state;
    uint8_t b[SEGMETA_LEN + 1], c[SEGMETA_LEN + 1];
    segmeta_t m = {SEG_USER, 1, 12345, 65536, 10, 20, 999}, out;
    const char *why = NULL;
    codec_segmeta_encode(b, &m);
    assert_int_equal(b[0], SEGMETA_VERSION);
    assert_int_equal(codec_segmeta_decode(b, SEGMETA_LEN, &out, &why), 0);
    assert_int_equal(out.kind, m.kind);
    assert_int_equal(out.open, m.open);
    assert_int_equal(out.live, m.live);
    assert_int_equal(out.tail, m.tail);
    assert_int_equal(out.min_seq, m.min_seq);
    assert_int_equal(out.max_seq, m.max_seq);
    assert_int_equal(out.sealed_ns, m.sealed_ns);
    segmeta_t empty = {SEG_GC, 0, 0, 4096, UINT64_MAX, 0, 5};
    codec_segmeta_encode(c, &empty);
    assert_int_equal(codec_segmeta_decode(c, SEGMETA_LEN, &out, NULL), 0);
    assert_int_equal(out.min_seq, UINT64_MAX);

    assert_int_equal(codec_segmeta_decode(b, SEGMETA_LEN - 1, &out, NULL), ERR_CORRUPT);
    assert_int_equal(codec_segmeta_decode(b, SEGMETA_LEN + 1, &out, NULL), ERR_CORRUPT);
    assert_int_equal(codec_segmeta_decode(b, 42, &out, NULL), ERR_CORRUPT); /* the old layout */
    struct {
        const char *what;
        int off, width;
        uint64_t val;
    } bad[] = {
        {"version 0", 0, 1, 0},
        {"version 2", 0, 1, 2},
        {"kind 0", 1, 1, 0},
        {"kind 3", 1, 1, 3},
        {"open 2", 2, 1, 2},
        {"min_seq above max_seq", 19, 8, 21},
        {"empty max_seq", 19, 8, UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(c, b, SEGMETA_LEN);
        put_field(c, bad[i].off, bad[i].width, bad[i].val);
        why = NULL;
        if (codec_segmeta_decode(c, SEGMETA_LEN, &out, &why) != ERR_CORRUPT)
            fail_msg("segment accounting with %s accepted", bad[i].what);
        assert_non_null(why);
    }
}

/* ---- drive counters ---- */

static void test_drvmeta(void **state)
{
    (void)state;
    uint8_t b[DRVMETA_LEN + 1], c[DRVMETA_LEN + 1];
    drvmeta_t m = {1ull << 40, 77, 5 * GiB}, out;
    codec_drvmeta_encode(b, &m);
    assert_int_equal(b[0], DRVMETA_VERSION);
    assert_int_equal(codec_drvmeta_decode(b, DRVMETA_LEN, &out, NULL), 0);
    assert_int_equal(out.next_seq, 1ull << 40);
    assert_int_equal(out.next_seg_id, 77);
    assert_int_equal(out.lifetime_host, 5 * GiB);
    for (size_t len = 0; len <= DRVMETA_LEN + 1; len++)
        if (len != DRVMETA_LEN)
            assert_int_equal(codec_drvmeta_decode(b, len, &out, NULL), ERR_CORRUPT);
    memcpy(c, b, DRVMETA_LEN);
    c[0] = 2;
    assert_int_equal(codec_drvmeta_decode(c, DRVMETA_LEN, &out, NULL), ERR_CORRUPT);
    memcpy(c, b, DRVMETA_LEN);
    le_put64(c + 1, 0);
    assert_int_equal(codec_drvmeta_decode(c, DRVMETA_LEN, &out, NULL), ERR_CORRUPT);

    /* The layout before versions: 20 bytes, read only by its own decoder. */
    uint8_t v0[DRVMETA_LEN_V0];
    le_put64(v0, 500);
    le_put32(v0 + 8, 6);
    le_put64(v0 + 12, 123456);
    assert_int_equal(codec_drvmeta_decode(v0, sizeof(v0), &out, NULL), ERR_CORRUPT);
    assert_int_equal(codec_drvmeta_decode_v0(v0, sizeof(v0), &out), 0);
    assert_int_equal(out.next_seq, 500);
    assert_int_equal(out.next_seg_id, 6);
    assert_int_equal(out.lifetime_host, 123456);
    assert_int_equal(codec_drvmeta_decode_v0(b, DRVMETA_LEN, &out), ERR_CORRUPT);
}

/* ---- the same on a real drive ---- */

#define NREC 30

/* A closed drive with records in several segments. */
static char *make_drive(void)
{
    char *dir = tl_tmpdir("codec");
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    char key[16];
    assert_int_equal(drive_open(&c, &d), 0);
    for (int i = 0; i < NREC; i++) {
        snprintf(key, sizeof(key), "k%02d", i);
        assert_int_equal(put_seeded(d, key, (uint64_t)i, 20000 + (size_t)i * 100), 0);
    }
    drive_stats_t st;
    drive_stats(d, &st);
    assert_true(st.segments >= 3);
    drive_close(d);
    return dir;
}

static void check_drive(const char *dir)
{
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    char key[16];
    assert_int_equal(drive_open(&c, &d), 0);
    for (int i = 0; i < NREC; i++) {
        snprintf(key, sizeof(key), "k%02d", i);
        assert_int_equal(check_seeded(d, key, (uint64_t)i, 20000 + (size_t)i * 100), 0);
    }
    drive_close(d);
}

static int open_rc(const char *dir, char **log)
{
    drive_cfg_t c = cfg_for(dir);
    drive_t *d = NULL;
    tl_cap_start("codec");
    int rc = drive_open(&c, &d);
    *log = tl_cap_stop(1);
    if (rc == 0) drive_close(d);
    return rc;
}

static void seg_file(const char *dir, uint32_t id, char *path, size_t cap)
{
    snprintf(path, cap, "%s/segments/%08x.seg", dir, id);
}

static void rw_file(const char *path, uint8_t *buf, size_t len, uint64_t off, int write)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    if (write)
        assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
    else
        assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static void test_superblock_on_disk(void **state)
{
    (void)state;
    char *dir = make_drive(), path[512], *log;
    uint8_t orig[SEG_SB_LEN], c[SEG_SB_LEN];
    struct stat st;
    seg_file(dir, 1, path, sizeof(path));
    rw_file(path, orig, SEG_SB_LEN, 0, 0);

    struct {
        const char *what;
        int off, width;
        uint64_t val;
        int recrc;
    } bad[] = {
        {"magic", 0, 4, 0x11111111u, 1},
        {"crc", 24, 4, 0, 0},
        {"version", 4, 2, 3, 1},
        {"kind", 6, 1, 9, 1},
        {"reserved", 7, 1, 1, 1},
        {"id", 8, 4, 7, 1},
        {"iu (another valid one)", 12, 4, 8192, 1},
        {"iu (not a power of two)", 12, 4, 5000, 1},
        {"segment size (high half)", 16, 8, (1ull << 32) + 256 * KiB, 1},
        {"segment size (another valid one)", 16, 8, 512 * KiB, 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(c, orig, SEG_SB_LEN);
        if (bad[i].width == 1) c[bad[i].off] = (uint8_t)bad[i].val;
        if (bad[i].width == 2) le_put16(c + bad[i].off, (uint16_t)bad[i].val);
        if (bad[i].width == 4) le_put32(c + bad[i].off, (uint32_t)bad[i].val);
        if (bad[i].width == 8) le_put64(c + bad[i].off, bad[i].val);
        if (bad[i].recrc) sb_recrc(c);
        rw_file(path, c, SEG_SB_LEN, 0, 1);
        int rc = open_rc(dir, &log);
        if (rc != ERR_CORRUPT)
            fail_msg("superblock %s: open returned %s", bad[i].what, err_name(rc));
        assert_true(strstr(log, "event=segment_superblock_corrupt") ||
                    strstr(log, "event=segment_geometry_mismatch"));
        free(log);
        /* Refused, not thrown away: the segment and its records are still there. */
        assert_int_equal(stat(path, &st), 0);
        rw_file(path, orig, SEG_SB_LEN, 0, 1);
        check_drive(dir);
    }
    tl_rm_rf(dir);
    free(dir);
}

/* A superblock that never became durable: discarded if nothing follows it, refused otherwise. */
static void test_superblock_blank(void **state)
{
    (void)state;
    char *dir = make_drive(), path[512], *log;
    uint8_t orig[SEG_SB_LEN], zero[SEG_SB_LEN] = {0};
    struct stat st;

    /* Blank superblock over records: refused. */
    seg_file(dir, 1, path, sizeof(path));
    rw_file(path, orig, SEG_SB_LEN, 0, 0);
    rw_file(path, zero, SEG_SB_LEN, 0, 1);
    assert_int_equal(open_rc(dir, &log), ERR_CORRUPT);
    assert_non_null(strstr(log, "event=segment_superblock_corrupt"));
    free(log);
    assert_int_equal(stat(path, &st), 0);
    rw_file(path, orig, SEG_SB_LEN, 0, 1);
    check_drive(dir);

    /* A segment file created, nothing durable in it (blank or torn): discarded. */
    char extra[512];
    seg_file(dir, 0x50, extra, sizeof(extra));
    int fd = open(extra, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 256 * KiB), 0);
    close(fd);
    assert_int_equal(open_rc(dir, &log), 0);
    free(log);
    assert_int_equal(stat(extra, &st), -1);
    fd = open(extra, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "torn", 4, 0), 4);
    close(fd);
    assert_int_equal(open_rc(dir, &log), 0);
    free(log);
    assert_int_equal(stat(extra, &st), -1);
    check_drive(dir);
    tl_rm_rf(dir);
    free(dir);
}

/* Replace (or delete, val NULL) one index value of a closed drive; returns the old one. */
static void *index_swap(const char *dir, const void *key, size_t kl, const void *val, size_t vl,
                        size_t *old_len)
{
    char ip[512];
    idx_t *x;
    void *old = NULL;
    snprintf(ip, sizeof(ip), "%s/index", dir);
    assert_int_equal(idx_open(ip, &x), 0);
    assert_int_equal(idx_get(x, NULL, key, kl, &old, old_len), 0);
    idx_batch_t *b = idx_batch_new();
    idx_batch_put(b, key, kl, val, vl);
    assert_int_equal(idx_write(x, b), 0);
    assert_int_equal(idx_flush(x), 0);
    idx_batch_free(b);
    idx_close(x);
    return old;
}

static int count_cb(void *arg, const drive_id_t *id, const drive_stat_t *st)
{
    (void)id;
    (void)st;
    (*(int *)arg)++;
    return 0;
}

static void test_index_values_on_disk(void **state)
{
    (void)state;
    char *dir = make_drive(), *log;
    size_t ol;
    uint8_t v[64];

    /* The drive's counters: wrong sizes, a bad version, a zero sequence number. */
    const struct {
        const char *what;
        size_t len;
        uint8_t version;
    } bad_m[] = {{"7 bytes", 7, 1}, {"22 bytes", 22, 1}, {"version 9", 21, 9}, {"seq 0", 21, 1}};
    for (size_t i = 0; i < sizeof(bad_m) / sizeof(bad_m[0]); i++) {
        memset(v, 0x5a, sizeof(v));
        v[0] = bad_m[i].version;
        if (i == 3) le_put64(v + 1, 0);
        void *old = index_swap(dir, "m", 1, v, bad_m[i].len, &ol);
        assert_int_equal(ol, DRVMETA_LEN);
        int rc = open_rc(dir, &log);
        if (rc != ERR_CORRUPT)
            fail_msg("counters (%s): open returned %s", bad_m[i].what, err_name(rc));
        assert_non_null(strstr(log, "event=index_meta_corrupt"));
        free(log);
        free(index_swap(dir, "m", 1, old, ol, &ol));
        free(old);
        check_drive(dir);
    }

    /* A segment's accounting: wrong size, bad fields, a tail that does not fit. */
    uint8_t sk[SEG_KEY_LEN];
    codec_seg_key(sk, 1);
    for (int i = 0; i < 6; i++) {
        size_t len = SEGMETA_LEN;
        char ip[512];
        idx_t *x;
        void *cur;
        snprintf(ip, sizeof(ip), "%s/index", dir);
        assert_int_equal(idx_open(ip, &x), 0);
        assert_int_equal(idx_get(x, NULL, sk, sizeof(sk), &cur, &ol), 0);
        idx_close(x);
        memcpy(v, cur, SEGMETA_LEN);
        free(cur);
        if (i == 0) len = 42; /* the layout before versions */
        if (i == 1) v[0] = 2; /* version */
        if (i == 2) v[1] = 2; /* kind differs from the superblock's (a user segment) */
        if (i == 3) v[2] = 7; /* open */
        if (i == 4) le_put64(v + 11, 4096 + 100);       /* tail off the IU grid */
        if (i == 5) le_put64(v + 11, 256 * KiB + 4096); /* tail past the segment */
        void *old = index_swap(dir, sk, sizeof(sk), v, len, &ol);
        int rc = open_rc(dir, &log);
        if (rc != ERR_CORRUPT)
            fail_msg("segment accounting case %d: open returned %s", i, err_name(rc));
        assert_non_null(strstr(log, "event=index_segment_meta_corrupt"));
        free(log);
        free(index_swap(dir, sk, sizeof(sk), old, ol, &ol));
        free(old);
        check_drive(dir);
    }

    /* An identity's entry: the calls that meet it say ERR_CORRUPT; the rest of the drive works. */
    uint8_t ok[KEY_MAX];
    rec_id_t rid = {"bkt", 3, "k05", 3, "", 0, 0};
    size_t kl = codec_key_encode(ok, &rid);
    memset(v, 0, sizeof(v));
    v[0] = 7; /* version */
    void *old = index_swap(dir, ok, kl, v, ENT_FIXED, &ol);
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    drive_stat_t dst;
    uint8_t buf[16];
    int n = 0;
    assert_int_equal(drive_open(&c, &d), 0);
    drive_id_t id5 = {"bkt", "k05", "", 0}, id6 = {"bkt", "k06", "", 0};
    tl_cap_start("codec");
    int r1 = drive_stat(d, &id5, &dst, NULL, 0), r2 = drive_read(d, &id5, 0, buf, 1);
    int r3 = drive_list(d, "bkt", NULL, NULL, count_cb, &n);
    log = tl_cap_stop(1);
    assert_int_equal(r1, ERR_CORRUPT);
    assert_int_equal(r2, ERR_CORRUPT);
    assert_int_equal(r3, ERR_CORRUPT);
    assert_non_null(strstr(log, "event=index_entry_corrupt"));
    assert_non_null(strstr(log, "event=list_index_corrupt"));
    assert_int_equal(n, 5); /* k00..k04, then the listing stops on the bad entry, loudly */
    free(log);
    assert_int_equal(drive_read(d, &id6, 0, buf, 1), 0);
    drive_close(d);
    free(index_swap(dir, ok, kl, old, ol, &ol));
    free(old);
    check_drive(dir);
    tl_rm_rf(dir);
    free(dir);
}

/* An index of the layout before versioned values is rebuilt at open, its counters kept. */
static void test_index_v0_rebuilt(void **state)
{
    (void)state;
    char *dir = make_drive(), *log;
    size_t ol;
    uint8_t v0[DRVMETA_LEN_V0];
    le_put64(v0, 5);
    le_put32(v0 + 8, 1);
    le_put64(v0 + 12, 1ull << 40);
    free(index_swap(dir, "m", 1, v0, sizeof(v0), &ol));
    assert_int_equal(open_rc(dir, &log), 0);
    assert_non_null(strstr(log, "event=index_set_aside"));
    assert_non_null(strstr(log, "reason=v0"));
    free(log);
    drive_cfg_t c = cfg_for(dir);
    drive_t *d;
    drive_stats_t st;
    assert_int_equal(drive_open(&c, &d), 0);
    drive_stats(d, &st);
    assert_true(st.lifetime_host_bytes >= (1ull << 40));
    /* New segments do not reuse ids and new records sort after the old ones. */
    assert_int_equal(put_seeded(d, "new", 99, 1000), 0);
    assert_int_equal(check_seeded(d, "new", 99, 1000), 0);
    drive_close(d);
    check_drive(dir);
    tl_rm_rf(dir);
    free(dir);
}

int main(void)
{
    log_level = getenv("WL_LOG_LEVEL") ? log_level_parse(getenv("WL_LOG_LEVEL")) : LOG_LVL_ERROR;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("WL_TEST_FILTER")) cmocka_set_test_filter(getenv("WL_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_superblock),
        cmocka_unit_test(test_superblock_v2),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_entry),
        cmocka_unit_test(test_segmeta),
        cmocka_unit_test(test_drvmeta),
        cmocka_unit_test(test_superblock_on_disk),
        cmocka_unit_test(test_superblock_blank),
        cmocka_unit_test(test_index_values_on_disk),
        cmocka_unit_test(test_index_v0_rebuilt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
