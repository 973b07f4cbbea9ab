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

/// `copy_file_range(source, &sourceOffset, destination, &destinationOffset, count, 0)`: copies in
/// the kernel (a reflink where the file system shares blocks). Returns the bytes copied (0 at the
/// source's end), or -1 with errno set (EXDEV across file systems the kernel will not bridge,
/// ENOSYS or EOPNOTSUPP where it cannot). Here because the C library declares it only under
/// `_GNU_SOURCE`.
long long cask_copy_file_range(int source, long long sourceOffset, int destination, long long destinationOffset, unsigned long long count);

/// `renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE)`: renames only if `to` does not exist
/// (EEXIST otherwise, whatever it is — an empty directory too, which `rename` would replace).
/// Returns 0, or -1 with errno set (EINVAL where the file system cannot promise it).
int cask_rename_no_replace(const char *from, const char *to);

/// `renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE)`: swaps two names at once, both of
/// which must exist. Returns 0, or -1 with errno set (EINVAL where the file system cannot).
int cask_rename_exchange(const char *first, const char *second);

#endif
