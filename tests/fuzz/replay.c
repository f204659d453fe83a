/*
 * Corpus replay driver for builds without libFuzzer: runs every file named
 * on the command line (or every file in a named directory) through
 * LLVMFuzzerTestOneInput once. libFuzzer accepts the same arguments.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len + 65536 > cap) buf = realloc(buf, cap = (len + 65536) * 2);
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            files++;
            if (run_file(argv[i])) return 1;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        char path[4096];
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            files++;
            if (run_file(path)) return 1;
        }
        if (d) closedir(d);
    }
    printf("replayed %d inputs\n", files);
    return 0;
}
