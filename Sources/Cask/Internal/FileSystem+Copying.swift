import CCaskCPU
#if canImport(Glibc)
import Glibc
#endif

/// Which file an open descriptor or a name is: its device and inode. Two names of one file (hard
/// links) have the same identity; a file replaced under a name has a new one.
package struct FileIdentity: Equatable, Hashable, Sendable {
    package var device: UInt64
    package var inode: UInt64
}

extension FileSystem {
    /// The test file systems' copy: their own `pread`s and `pwrite`s, 1 MiB at a time.
    package func copyRange(from source: Int32, at offset: Int64, to output: Int32, at outputOffset: Int64, length: Int64) throws(Errno) -> Int64 {
        try copyThroughMemory(from: source, at: offset, to: output, at: outputOffset, length: min(length, 1 << 20))
    }

    package func link(_ existing: String, to new: String) throws(Errno) { throw Errno.notSupported }

    /// `fstat`, as the real file system: the test file systems' descriptors are real ones.
    package func identity(_ fd: Int32) throws(Errno) -> FileIdentity {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Errno.current }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// `rmdir(2)`, as the real file system.
    package func removeDirectory(_ path: String) throws(Errno) {
        guard rmdir(path) == 0 else { throw Errno.current }
    }

    package func exchange(_ first: String, _ second: String) throws(Errno) { throw Errno.notSupported }

    /// `realpath(3)`, as the real file system.
    package func resolvedPath(_ path: String) throws(Errno) -> String {
        guard let resolved = realpath(path, nil) else { throw Errno.current }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Checks, then renames: enough for the test file systems, whose directories no one else writes.
    package func renameNoReplace(_ from: String, to: String) throws(Errno) {
        if isDirectory(to) != nil { throw Errno.exists }
        try rename(from, to: to)
    }

    /// Copies exactly `length` bytes of `source` at `offset` to `output` at `outputOffset`, through
    /// ``copyRange(from:at:to:at:length:)`` 8 MiB at a time, calling `advance` with each piece's
    /// size. A source that ends sooner is `.ioError` (its length was known: a file that shrank).
    package func copyAll(
        from source: Int32, at offset: Int64, to output: Int32, at outputOffset: Int64, length: Int64, advance: (Int64) -> Void = { _ in }
    ) throws(Errno) {
        var done: Int64 = 0
        while done < length {
            let copied = try copyRange(from: source, at: offset + done, to: output, at: outputOffset + done, length: min(8 << 20, length - done))
            guard copied > 0 else { throw Errno.ioError }
            done += copied
            advance(copied)
        }
    }

    /// One `pread` and `pwrite` of up to `length` bytes (a short read is the source's end).
    fileprivate func copyThroughMemory(from source: Int32, at offset: Int64, to output: Int32, at outputOffset: Int64, length: Int64) throws(Errno) -> Int64 {
        guard length > 0 else { return 0 }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(length), alignment: 4096)
        defer { buffer.deallocate() }
        let read = try readFully(source, into: buffer, at: offset)
        try writeAll(output, from: UnsafeRawBufferPointer(rebasing: buffer[..<read]), at: outputOffset)
        return Int64(read)
    }
}

extension PosixFileSystem {
    package func copyRange(from source: Int32, at offset: Int64, to output: Int32, at outputOffset: Int64, length: Int64) throws(Errno) -> Int64 {
        guard length > 0 else { return 0 }
        do {
            return Int64(try retryingInterrupts { cask_copy_file_range(source, offset, output, outputOffset, UInt64(length)) })
        } catch {
            // Across file systems the kernel does not bridge (EXDEV), or where it cannot copy (old
            // kernels, special files): copy through memory, 4 MiB at a time.
            guard [EXDEV, ENOSYS, EOPNOTSUPP, EINVAL].contains(error.rawValue) else { throw error }
            return try copyThroughMemory(from: source, at: offset, to: output, at: outputOffset, length: min(length, 4 << 20))
        }
    }

    package func link(_ existing: String, to new: String) throws(Errno) {
        _ = try retryingInterrupts { linkat(AT_FDCWD, existing, AT_FDCWD, new, 0) }
    }

    package func renameNoReplace(_ from: String, to: String) throws(Errno) {
        _ = try retryingInterrupts { cask_rename_no_replace(from, to) }
    }

    package func exchange(_ first: String, _ second: String) throws(Errno) {
        _ = try retryingInterrupts { cask_rename_exchange(first, second) }
    }
}
