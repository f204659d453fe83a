/*
 * bench_ceiling: the CPU ceilings of the S3 suite, one core each, in the
 * same run: memcpy, MD5 (every PUT computes the ETag) and raw ISA-L
 * Reed-Solomon encode at the node's k+m. Prints ROW lines for report.py.
 *   bench_ceiling K M [SECONDS]
 */
#include <isa-l/erasure_code.h>
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
