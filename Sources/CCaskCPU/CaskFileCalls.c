#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "CaskFileCalls.h"

int cask_fallocate(int fd, long long offset, long long length) {
    return fallocate(fd, 0, (off_t)offset, (off_t)length);
}

long long cask_file_system_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long long)info.f_type;
}

long long cask_copy_file_range(int source, long long sourceOffset, int destination, long long destinationOffset, unsigned long long count) {
    off_t from = (off_t)sourceOffset, to = (off_t)destinationOffset;
    return (long long)copy_file_range(source, &from, destination, &to, (size_t)count, 0);
}

int cask_rename_no_replace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int cask_rename_exchange(const char *first, const char *second) {
    return renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE);
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
