#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/vfs.h>
#include "CaskFileCalls.h"

int cask_fallocate(int fd, long long offset, long long length) {
    return fallocate(fd, 0, (off_t)offset, (off_t)length);
}

long long cask_file_system_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long long)info.f_type;
}

typedef uint64_t __attribute__((aligned(1))) cask_unaligned_word;

void cask_copy_in_order(void *destination, const void *source, unsigned long count) {
    volatile unsigned char *to = destination;
    const unsigned char *from = source;
    unsigned long at = 0;
    for (; at + 8 <= count; at += 8) {
        uint64_t word;
        memcpy(&word, from + at, 8);
        *(volatile cask_unaligned_word *)(to + at) = word;
    }
    for (; at < count; at++) to[at] = from[at];
}
