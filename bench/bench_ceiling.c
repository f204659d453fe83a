/*
 * bench_ceiling: the CPU ceilings of the S3 suite, one core each, in the
 * same run: memcpy, MD5 (every PUT computes the ETag) and raw ISA-L
 * Reed-Solomon encode at the node's k+m. Prints ROW lines for report.py.
 * MD5 twice: one stream with OpenSSL (what one PUT's ETag can go at), and
 * eight streams at once through the node's own MD5 (common/md5.h), whose
 * vector lanes hash concurrent PUTs' bodies together.
 *   bench_ceiling K M [SECONDS]
 */
#include "common/md5.h"

#include <isa-l/erasure_code.h>
#include <pthread.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { MD5_STREAMS = 8 };

typedef struct {
    const unsigned char *p;
    size_t len;
    double secs, t0, bytes;
} md5_stream_t;

static void *md5_stream(void *arg)
{
    md5_stream_t *st = arg;
    md5_t m;
    md5_init(&m);
    while (now() - st->t0 < st->secs) {
        for (size_t off = 0; off < st->len; off += 1u << 20)
            md5_update(&m, st->p + off, 1u << 20);
        st->bytes += (double)st->len;
    }
    unsigned char d[16];
    md5_final(&m, d);
    return NULL;
}

int main(int argc, char **argv)
{
    int k = argc > 1 ? atoi(argv[1]) : 4, m = argc > 2 ? atoi(argv[2]) : 2;
    double secs = argc > 3 ? atof(argv[3]) : 0.5;
    if (k < 1 || k > 16 || m < 1 || m > 4) return 2;
    const size_t big = 64u << 20, blk = 1u << 20;
    unsigned char *a = malloc(big), *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        a[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(b, 0, big);

    /* memcpy of 64 MiB buffers: larger than the caches, like streamed bodies. */
    double t0 = now(), bytes = 0;
    while (now() - t0 < secs) {
        memcpy(b, a, big);
        a[bytes > 0 ? 1 : 0] ^= b[7];
        bytes += (double)big;
    }
    printf("ROW\tceiling_memcpy\t%.1f\tMB/s\t-\n", bytes / 1e6 / (now() - t0));

    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char d[16];
    t0 = now();
    bytes = 0;
    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    while (now() - t0 < secs) {
        for (size_t off = 0; off < big; off += blk)
            EVP_DigestUpdate(md, a + off, blk);
        bytes += (double)big;
    }
    EVP_DigestFinal_ex(md, d, NULL);
    EVP_MD_CTX_free(md);
    printf("ROW\tceiling_md5\t%.1f\tMB/s\t-\n", bytes / 1e6 / (now() - t0));

    /* Eight streams of 8 MiB each, updated 1 MiB at a time, as eight PUTs' workers do. */
    pthread_t th[MD5_STREAMS];
    md5_stream_t ms[MD5_STREAMS];
    t0 = now();
    for (int i = 0; i < MD5_STREAMS; i++) {
        ms[i] = (md5_stream_t){.p = a + (size_t)i * (big / MD5_STREAMS),
                               .len = big / MD5_STREAMS,
                               .secs = secs,
                               .t0 = t0};
        if (pthread_create(&th[i], NULL, md5_stream, &ms[i]) != 0) return 1;
    }
    bytes = 0;
    for (int i = 0; i < MD5_STREAMS; i++) {
        pthread_join(th[i], NULL);
        bytes += ms[i].bytes;
    }
    printf("ROW\tceiling_md5_%d_streams\t%.1f\tMB/s\t-\n", MD5_STREAMS, bytes / 1e6 / (now() - t0));
    printf("# md5: %d lanes\n", md5_lanes());

    /* Raw ISA-L encode of 1 MiB blocks: data bytes per second. */
    unsigned char *mat = malloc((size_t)(k + m) * k), *tbl = malloc((size_t)32 * k * m);
    gf_gen_cauchy1_matrix(mat, k + m, k);
    ec_init_tables(k, m, mat + k * k, tbl);
    unsigned char *data[16], *par[4];
    for (int i = 0; i < k; i++)
        data[i] = a + (size_t)i * blk;
    for (int i = 0; i < m; i++)
        par[i] = b + (size_t)i * blk;
    t0 = now();
    bytes = 0;
    while (now() - t0 < secs) {
        for (int r = 0; r < 16; r++) {
            ec_encode_data((int)blk, k, m, tbl, data, par);
            bytes += (double)blk * k;
        }
    }
    printf("ROW\tceiling_isal_encode_%d+%d\t%.1f\tMB/s\t-\n", k, m, bytes / 1e6 / (now() - t0));
    printf("# md5 digest %02x (keeps the work)\n", d[0]);
    free(mat);
    free(tbl);
    free(a);
    free(b);
    return 0;
}
