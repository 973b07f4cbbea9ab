#ifndef CASK_FILE_CALLS_H
#define CASK_FILE_CALLS_H

/// `fallocate(fd, 0, offset, length)`: reserves disk blocks for the range, extending the file.
/// Returns 0, or -1 with errno set (EOPNOTSUPP where the file system cannot). Here because the C
/// library declares `fallocate` only under `_GNU_SOURCE`, which Swift's Glibc module is not built with.
int cask_fallocate(int fd, long long offset, long long length);

/// The type of the file system holding `path` (`statfs`'s `f_type`, e.g. 0xEF53 for ext4), or -1
/// with errno set. Here because Swift's Glibc module does not bring in <sys/vfs.h>.
long long cask_file_system_type(const char *path);

/// Copies `count` bytes from `source` to `destination` front to back, in 8-byte stores the compiler
/// may neither reorder nor turn into `memcpy` (which stores in whatever order is fastest, tail
/// first included). For records stored into a segment's mapping: a process killed during the copy
/// leaves a prefix of them in the page cache, never a later record after a gap.
void cask_copy_in_order(void *destination, const void *source, unsigned long count);

#endif
