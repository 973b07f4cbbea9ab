#define _GNU_SOURCE
#include <fcntl.h>
#include "CaskFileCalls.h"

int cask_fallocate(int fd, long long offset, long long length) {
    return fallocate(fd, 0, (off_t)offset, (off_t)length);
}
