#ifndef CASK_FILE_CALLS_H
#define CASK_FILE_CALLS_H

/// `fallocate(fd, 0, offset, length)`: reserves disk blocks for the range, extending the file.
/// Returns 0, or -1 with errno set (EOPNOTSUPP where the file system cannot). Here because the C
/// library declares `fallocate` only under `_GNU_SOURCE`, which Swift's Glibc module is not built with.
int cask_fallocate(int fd, long long offset, long long length);

#endif
