/*
 * bench_erasure: encode/decode throughput per core of the erasure layer,
 * next to raw ISA-L (ec_encode_data + crc32_iscsi) and memcpy measured in
 * the same run. Prints ROW lines for bench/report.py.
 *
 * Rows per k+m (1 MiB blocks, throughput in object MB/s on one core):
 *   raw_encode_crc   ec_encode_data + crc32c of all k+m blocks (the ceiling)
 *   encode           ers_encoder over a 64-stripe object, sink discards
 *   decode_healthy   ers_decoder_read of the whole object, all blocks good;
 *                    ceiling: memcpy + crc32c of the data (what any reader
 *                    that verifies must do)
 *   decode_lost1 / decode_lostm: 1 and m data blocks missing per stripe;
 *                    ceiling: raw ISA-L decode of those blocks + crc + copy
 */
#include "common/crc.h"
#include "common/err.h"
#include "common/mem.h"
#include "erasure/ers.h"

#include <isa-l/erasure_code.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MB (1024.0 * 1024.0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void row(const char *name, double v, const char *unit, const char *ceil)
{
    printf("ROW\t%s\t%.3f\t%s\t%s\n", name, v, unit, ceil);
    fflush(stdout);
}

typedef struct {
    uint8_t *stream[ERS_MAX_SHARDS];
    size_t len[ERS_MAX_SHARDS];
    uint32_t lost;
    ers_layout_t l;
    int discard;
} store_t;

static int sink(void *arg, unsigned shard, uint64_t stripe, const uint8_t *b, uint32_t len,
                uint32_t crc)
{
    store_t *s = arg;
    if (s->discard) return 0;
    memcpy(s->stream[shard] + s->len[shard], b, len);
    memcpy(s->stream[shard] + s->len[shard] + len, &crc, 4);
    s->len[shard] += len + 4;
    return 0;
}

static int source(void *arg, unsigned shard, uint64_t stripe, uint8_t *buf, uint32_t len,
                  ers_crc_t *crc)
{
    store_t *s = arg;
    if (s->lost & (1u << shard)) return ERR_NOT_FOUND;
    const uint8_t *p = s->stream[shard] + ers_shard_offset(&s->l, stripe);
    memcpy(buf, p, len);
    memcpy(&crc->stored, p + len, 4);
    return 0;
}

/* Repeat fn until at least min_s seconds passed; returns bytes/s. */
#define MEASURE(bytes_per_iter, min_s, body)                                                       \
    ({                                                                                             \
        body; /* warm-up: page faults and caches stay out of the figure */                         \
        double t0_ = now(), t_;                                                                    \
        long it_ = 0;                                                                              \
        do {                                                                                       \
            body;                                                                                  \
            it_++;                                                                                 \
        } while ((t_ = now() - t0_) < (min_s));                                                    \
        (double)(bytes_per_iter)*it_ / t_;                                                         \
    })

int main(int argc, char **argv)
{
    const uint32_t B = 1 << 20;
    const int stripes = argc > 1 ? atoi(argv[1]) : 16;
    const double min_s = argc > 2 ? atof(argv[2]) : 0.5;
    int cfg[][2] = {{4, 2}, {8, 3}, {10, 4}, {12, 4}};
    char name[64], ceil[64];

    /* Machine ceilings: memcpy and crc32c on one core, 64 MiB buffers. */
    size_t big = 64u << 20;
    uint8_t *a = xaligned_alloc(64, big), *b = xaligned_alloc(64, big);
    for (size_t i = 0; i < big; i++)
        a[i] = (uint8_t)(i * 131 + 7);
    memset(b, 0, big);
    volatile uint32_t sinkv = 0;
    double memcpy_bps = MEASURE(big, min_s, memcpy(b, a, big));
    double crc_bps = MEASURE(big, min_s, sinkv ^= crc32c(0, a, big));
    row("memcpy", memcpy_bps / MB, "MB/s", "-");
    row("crc32c_raw", crc_bps / MB, "MB/s", "-");
    double copy_crc = 1.0 / (1.0 / memcpy_bps + 1.0 / crc_bps);
    row("memcpy_plus_crc32c", copy_crc / MB, "MB/s", "-");

    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        int k = cfg[c][0], m = cfg[c][1], err;
        size_t size = (size_t)k * B * (size_t)stripes;
        uint8_t *obj = xaligned_alloc(64, size), *out = xaligned_alloc(64, size);
        for (size_t i = 0; i < size; i++)
            obj[i] = (uint8_t)(i * 2654435761u >> 13);

        /* Raw ISA-L: encode one stripe + crc of all k+m blocks. */
        uint8_t mat[ERS_MAX_SHARDS * ERS_MAX_K], tbl[32 * ERS_MAX_K * ERS_MAX_M];
        uint8_t *data[ERS_MAX_K], *par[ERS_MAX_M];
        gf_gen_cauchy1_matrix(mat, k + m, k);
        ec_init_tables(k, m, mat + k * k, tbl);
        for (int i = 0; i < k; i++)
            data[i] = obj + (size_t)i * B;
        for (int i = 0; i < m; i++)
            par[i] = xaligned_alloc(64, B);
        /* Same memory traffic as the layer: every stripe of the object in turn. */
        double raw = MEASURE(size, min_s, {
            for (int st = 0; st < stripes; st++) {
                for (int i = 0; i < k; i++)
                    data[i] = obj + ((size_t)st * k + i) * B;
                ec_encode_data((int)B, k, m, tbl, data, par);
                for (int i = 0; i < k; i++)
                    sinkv ^= crc32c(0, data[i], B);
                for (int i = 0; i < m; i++)
                    sinkv ^= crc32c(0, par[i], B);
            }
        });
        for (int i = 0; i < k; i++)
            data[i] = obj + (size_t)i * B;
        snprintf(name, sizeof(name), "ec%d+%d_raw_isal_encode_crc", k, m);
        row(name, raw / MB, "MB/s", "-");
        snprintf(ceil, sizeof(ceil), "%s", name);

        /* Layer encode, sink discards. */
        store_t s = {0};
        s.discard = 1;
        ers_encoder_t *e = ers_encoder_new(k, m, B, sink, &s, &err);
        double enc = MEASURE(size, min_s, {
            ers_encoder_reset(e, sink, &s);
            if (ers_encoder_write(e, obj, size) || ers_encoder_finish(e, &s.l)) abort();
        });
        snprintf(name, sizeof(name), "ec%d+%d_encode", k, m);
        row(name, enc / MB, "MB/s", ceil);

        /* Store once for decoding. */
        s.discard = 0;
        for (int i = 0; i < k + m; i++)
            s.stream[i] = xmalloc((size_t)stripes * (B + 4));
        ers_encoder_reset(e, sink, &s);
        if (ers_encoder_write(e, obj, size) || ers_encoder_finish(e, &s.l)) abort();
        ers_encoder_free(e);

        ers_decoder_t *d = ers_decoder_new(&s.l, &err);
        double dec = MEASURE(size, min_s, {
            if (ers_decoder_read(d, 0, size, out, source, &s)) abort();
        });
        if (memcmp(out, obj, size) != 0) abort();
        snprintf(name, sizeof(name), "ec%d+%d_decode_healthy", k, m);
        row(name, dec / MB, "MB/s", "memcpy_plus_crc32c");

        for (int lost = 1; lost <= m; lost += (m > 1 ? m - 1 : 1)) {
            /* Raw ceiling: reconstruct `lost` blocks from k survivors + crc + copy. */
            uint8_t dm[ERS_MAX_K * ERS_MAX_K], inv[ERS_MAX_K * ERS_MAX_K];
            uint8_t rows_[ERS_MAX_M * ERS_MAX_K], dt[32 * ERS_MAX_K * ERS_MAX_M];
            uint8_t *surv[ERS_MAX_K], *rec[ERS_MAX_M];
            for (int i = 0; i < k; i++) {
                int src_row = i < k - lost ? i + lost : k + (i - (k - lost));
                memcpy(dm + i * k, mat + src_row * k, (size_t)k);
                surv[i] = src_row < k ? data[src_row] : par[src_row - k];
            }
            gf_invert_matrix(dm, inv, k);
            for (int i = 0; i < lost; i++) {
                memcpy(rows_ + i * k, inv + i * k, (size_t)k);
                rec[i] = out + (size_t)i * B;
            }
            ec_init_tables(k, lost, rows_, dt);
            double rawd = MEASURE(size, min_s, {
                for (int st = 0; st < stripes; st++) {
                    size_t base = (size_t)st * k * B;
                    for (int i = 0; i < k; i++)
                        sinkv ^= crc32c(0, surv[i], B);
                    for (int i = 0; i < lost; i++)
                        rec[i] = out + base + (size_t)i * B;
                    ec_encode_data((int)B, k, lost, dt, surv, rec);
                    memcpy(out + base + (size_t)lost * B, obj + base + (size_t)lost * B,
                           (size_t)(k - lost) * B);
                }
            });
            snprintf(ceil, sizeof(ceil), "ec%d+%d_raw_isal_decode_lost%d", k, m, lost);
            row(ceil, rawd / MB, "MB/s", "-");

            s.lost = (1u << lost) - 1;
            memset(out, 0, size);
            double dd = MEASURE(size, min_s, {
                if (ers_decoder_read(d, 0, size, out, source, &s)) abort();
            });
            if (memcmp(out, obj, size) != 0) abort();
            s.lost = 0;
            snprintf(name, sizeof(name), "ec%d+%d_decode_lost%d", k, m, lost);
            row(name, dd / MB, "MB/s", ceil);
        }
        ers_decoder_free(d);
        for (int i = 0; i < k + m; i++)
            free(s.stream[i]);
        for (int i = 0; i < m; i++)
            free(par[i]);
        free(obj);
        free(out);
    }
    free(a);
    free(b);
    return sinkv == 0x12345678 ? 1 : 0;
}
