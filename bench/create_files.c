/*
 * create_files DIR N: the seed's file-creation benchmark, as users of fscrypt
 * run it: N times open(O_CREAT|O_WRONLY|O_EXCL, 0644), write 4096 bytes,
 * close, in DIR. Prints the elapsed seconds (CLOCK_MONOTONIC) on stdout.
 * Built and run by bench/compare_fs.py (workload "seed create").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: create_files DIR N\n");
        return 2;
    }
    const char *dir = argv[1];
    long n = strtol(argv[2], NULL, 10);
    if (n <= 0) {
        fprintf(stderr, "create_files: N must be a positive number\n");
        return 2;
    }
    static char buf[4096];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (char)(i * 131 + 7);
    char path[4096];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/seed-%07ld", dir, i);
        int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0644);
        if (fd < 0) {
            fprintf(stderr, "create_files: open %s: %s\n", path, strerror(errno));
            return 1;
        }
        if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
            fprintf(stderr, "create_files: write %s: %s\n", path, strerror(errno));
            return 1;
        }
        if (close(fd) != 0) {
            fprintf(stderr, "create_files: close %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.6f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}
