import CCaskCPU
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one seam through which Cask reaches the operating system's file I/O.
///
/// Nothing else in the library calls `open`, `pread`, `pwrite`, `fdatasync`, `ftruncate`, `rename`,
/// `unlink` or `flock`. Production code uses ``PosixFileSystem``; tests install a wrapper that
/// injects `ENOSPC`, `EIO`, short writes and failed syncs, or that simulates a power cut.
///
/// Every method reports failure as an ``Errno``. `EINTR` is retried inside the implementation.
/// Methods may be called from any thread concurrently.
package protocol FileSystem: Sendable {
    /// Opens a file of a store (or, with `O_DIRECTORY`, a directory).
    ///
    /// A store directory is hostile ground: whoever can write it can plant links and special files
    /// in it. So, unless `flags` has `O_DIRECTORY`, the real file system opens only a regular file,
    /// and a file to write only if it has no other name:
    /// - a symbolic link is never followed (`O_NOFOLLOW`): ``Errno/symbolicLink``;
    /// - a directory, FIFO, socket or device is refused, without blocking on a FIFO and without
    ///   becoming the controlling terminal: ``Errno/notRegularFile``;
    /// - a file opened for writing that has other hard links is refused, so that no write (nor
    ///   `O_TRUNC`) reaches a file outside the store through a second name: ``Errno/hardLinked``.
    ///   `O_TRUNC` takes effect only after these checks.
    func open(_ path: String, flags: Int32, mode: UInt32) throws(Errno) -> Int32
    func close(_ fd: Int32)
    /// Reads up to `buffer.count` bytes at `offset`; returns the number read (0 at end of file).
    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int
    /// Writes up to `buffer.count` bytes at `offset`; returns the number written (may be short).
    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) -> Int
    func fdatasync(_ fd: Int32) throws(Errno)
    func fsync(_ fd: Int32) throws(Errno)
    func ftruncate(_ fd: Int32, length: Int64) throws(Errno)
    func fileSize(_ fd: Int32) throws(Errno) -> Int64
    func rename(_ from: String, to: String) throws(Errno)
    func unlink(_ path: String) throws(Errno)
    func makeDirectory(_ path: String, mode: UInt32) throws(Errno)
    /// The names in a directory, without `.` and `..`.
    func listDirectory(_ path: String) throws(Errno) -> [String]
    /// `flock(fd, LOCK_EX | LOCK_NB)` or `LOCK_SH | LOCK_NB`; throws `.wouldBlock` when held elsewhere.
    func lock(_ fd: Int32, exclusive: Bool) throws(Errno)
    /// Whether a path exists and is a directory (`nil` when it does not exist).
    func isDirectory(_ path: String) -> Bool?
    /// Checks `access(path, W_OK)`.
    func isWritable(_ path: String) -> Bool
    /// Reserves disk blocks for `offset ..< offset + length`, extending the file (`fallocate(2)`,
    /// mode 0), so that writes there through a mapping never need a block the disk may not have.
    /// Throws `.noSpace` when the disk is full, and `.notSupported` where the file system cannot
    /// reserve (nothing was changed then).
    func allocate(_ fd: Int32, offset: Int64, length: Int64) throws(Errno)
    /// Whether the active segment of a store in `directory` may be written through a shared mapping
    /// (see ``StoreWriter``). The real file system: where `fallocate` reserves blocks that later
    /// stores into the mapping are sure to have (ext4, XFS, tmpfs), so that a full disk is an
    /// error from `fallocate`, never SIGBUS from a store (a copy-on-write file system such as btrfs
    /// can need new blocks for every write). The test file systems see and fault data writes as
    /// `pwrite` calls, so they say no and the store writes with `pwrite`.
    func supportsMappedWrites(in directory: String) -> Bool
    /// Copies up to `length` bytes of `source` at `offset` to `output` at `outputOffset`; returns
    /// the bytes copied (fewer only at the source's end, 0 there). The real file system copies in
    /// the kernel (`copy_file_range`: no trip through user memory, a reflink where the file system
    /// shares blocks) and falls back to `pread`/`pwrite` where the kernel will not; the test file
    /// systems copy with their own `pread`/`pwrite`, so that they see, and fault, every byte.
    func copyRange(from source: Int32, at offset: Int64, to output: Int32, at outputOffset: Int64, length: Int64) throws(Errno) -> Int64
    /// Gives the file at `existing` a second name `new` (`link(2)`, not following a link at
    /// `existing`: a symbolic link there is linked as itself). The test file systems throw
    /// `.notSupported`, so callers must be ready to copy instead.
    func link(_ existing: String, to new: String) throws(Errno)
    /// The device and inode of an open file (`fstat`).
    func identity(_ fd: Int32) throws(Errno) -> FileIdentity
    /// Removes an empty directory (`rmdir(2)`).
    func removeDirectory(_ path: String) throws(Errno)
    /// Renames `from` to `to` only if nothing is at `to` (`renameat2(RENAME_NOREPLACE)`): never
    /// replaces a file, a link or an empty directory there (`.exists`).
    func renameNoReplace(_ from: String, to: String) throws(Errno)
    /// Swaps the names `first` and `second`, both of which must exist, in one step
    /// (`renameat2(RENAME_EXCHANGE)`): whoever looks up either name finds the one file or the other,
    /// never nothing. The test file systems throw `.notSupported`.
    func exchange(_ first: String, _ second: String) throws(Errno)
    /// The absolute path of `path` with every symbolic link in it followed (`realpath(3)`).
    func resolvedPath(_ path: String) throws(Errno) -> String
}

extension FileSystem {
    /// The size of the regular file at `path` (opened read-only, as ``open(_:flags:mode:)`` opens
    /// any file: a link or another kind of file fails).
    package func fileSize(atPath path: String) throws(Errno) -> Int64 {
        let file = try openFile(path, flags: O_RDONLY, mode: 0)
        return try fileSize(file.descriptor)
    }

    /// Whether the directory `path` is the directory `ancestor` or lies below it, found by walking
    /// up through `..` on the disk rather than through the path's text (links and relative paths
    /// count as the kernel follows them; the root is its own parent). O(depth) opens.
    package func directory(_ path: String, isWithin ancestor: String) throws(Errno) -> Bool {
        func identity(of directory: String) throws(Errno) -> FileIdentity {
            let opened = try openFile(directory, flags: O_RDONLY | O_DIRECTORY, mode: 0)
            return try self.identity(opened.descriptor)
        }
        let target = try identity(of: ancestor)
        var current = path
        var below: FileIdentity?
        for _ in 0..<1024 {
            let here = try identity(of: current)
            if here == target { return true }
            if here == below { return false }
            below = here
            current += "/.."
        }
        return false
    }

    package func allocate(_ fd: Int32, offset: Int64, length: Int64) throws(Errno) { throw Errno.notSupported }
    package func supportsMappedWrites(in directory: String) -> Bool { false }
}

/// The real file system.
package struct PosixFileSystem: FileSystem {
    package init() {}

    package func open(_ path: String, flags: Int32, mode: UInt32) throws(Errno) -> Int32 {
        if flags & O_DIRECTORY != 0 {
            return try retryingInterrupts { Glibc.open(path, flags | O_CLOEXEC, mode_t(mode)) }
        }
        // O_NONBLOCK: opening a FIFO must not wait for its other end (a FIFO to write with no
        // reader fails with ENXIO, as does a device with nothing behind it; a directory to write,
        // with EISDIR); O_TRUNC only once the file is known to be ours.
        let checkedFlags = (flags & ~O_TRUNC) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY
        let fd: Int32
        do { fd = try retryingInterrupts { Glibc.open(path, checkedFlags, mode_t(mode)) } } catch {
            throw error == Errno(rawValue: ENXIO) || error == Errno(rawValue: EISDIR) ? .notRegularFile : error
        }
        do throws(Errno) {
            var info = stat()
            _ = try retryingInterrupts { fstat(fd, &info) }
            guard info.st_mode & S_IFMT == S_IFREG else { throw .notRegularFile }
            let writing = flags & O_ACCMODE != O_RDONLY
            if writing && info.st_nlink > 1 { throw .hardLinked }
            _ = try retryingInterrupts { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) }
            if writing && flags & O_TRUNC != 0 { _ = try retryingInterrupts { Glibc.ftruncate(fd, 0) } }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    package func close(_ fd: Int32) {
        _ = Glibc.close(fd)  // Linux releases the descriptor even when close reports EINTR.
    }

    package func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        guard buffer.count > 0 else { return 0 }
        return try retryingInterrupts { Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    package func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        guard buffer.count > 0 else { return 0 }
        return try retryingInterrupts { Glibc.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    package func fdatasync(_ fd: Int32) throws(Errno) {
        _ = try retryingInterrupts { Glibc.fdatasync(fd) }
    }

    package func fsync(_ fd: Int32) throws(Errno) {
        _ = try retryingInterrupts { Glibc.fsync(fd) }
    }

    package func ftruncate(_ fd: Int32, length: Int64) throws(Errno) {
        _ = try retryingInterrupts { Glibc.ftruncate(fd, off_t(length)) }
    }

    package func fileSize(_ fd: Int32) throws(Errno) -> Int64 {
        var info = stat()
        _ = try retryingInterrupts { fstat(fd, &info) }
        return Int64(info.st_size)
    }

    package func rename(_ from: String, to: String) throws(Errno) {
        _ = try retryingInterrupts { Glibc.rename(from, to) }
    }

    package func unlink(_ path: String) throws(Errno) {
        _ = try retryingInterrupts { Glibc.unlink(path) }
    }

    package func makeDirectory(_ path: String, mode: UInt32) throws(Errno) {
        _ = try retryingInterrupts { mkdir(path, mode_t(mode)) }
    }

    package func listDirectory(_ path: String) throws(Errno) -> [String] {
        guard let dir = opendir(path) else { throw Errno.current }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    package func lock(_ fd: Int32, exclusive: Bool) throws(Errno) {
        _ = try retryingInterrupts { flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) }
    }

    package func isDirectory(_ path: String) -> Bool? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (info.st_mode & S_IFMT) == S_IFDIR
    }

    package func isWritable(_ path: String) -> Bool {
        access(path, W_OK) == 0
    }

    package func allocate(_ fd: Int32, offset: Int64, length: Int64) throws(Errno) {
        _ = try retryingInterrupts { cask_fallocate(fd, offset, length) }
    }

    package func supportsMappedWrites(in directory: String) -> Bool {
        // ext4 (and ext2/3), XFS, tmpfs.
        [0xEF53, 0x5846_5342, 0x0102_1994].contains(cask_file_system_type(directory))
    }

    /// Runs a libc call, retrying while it fails with `EINTR`; throws any other failure.
    func retryingInterrupts<R: BinaryInteger>(_ call: () -> R) throws(Errno) -> R {
        while true {
            let result = call()
            if result >= 0 { return result }
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }
}

extension FileSystem {
    /// Maps `length` bytes of `fd` shared (`mmap(MAP_SHARED)`), read-only or, with `writable`, for
    /// reading and writing (the descriptor must be open for both), so that bytes written to the
    /// file later are visible through the mapping, and bytes stored through it are the file's.
    /// Touching a page past the end of the file raises SIGBUS: callers touch only bytes below a
    /// length they know the file has. A default implementation, so that test file systems need
    /// not forward it.
    ///
    /// A mapping of 2 MiB or more starts on a 2 MiB boundary, so that the kernel can map each 2 MiB
    /// page-cache folio of the file with one huge-page entry: a random read then costs no page walk.
    /// `hugePages` also asks the kernel (`MADV_HUGEPAGE`) to give the pages first touched through
    /// the mapping 2 MiB folios; a hint, ignored where the kernel or file system has no large folios.
    package func map(_ fd: Int32, length: Int, writable: Bool = false, hugePages: Bool = false) throws(Errno) -> UnsafeMutableRawPointer {
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        let huge = TableMemory.hugePageSize
        guard length >= huge else {
            guard let address = mmap(nil, length, protection, MAP_SHARED, fd, 0), address != MAP_FAILED else { throw Errno.current }
            return address
        }
        // Reserve 2 MiB more address space than needed, map the file at the first boundary inside
        // it, and give back the rest.
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        func pageRounded(_ count: Int) -> Int { (count + pageSize - 1) / pageSize * pageSize }
        let reservedLength = pageRounded(length) + huge
        guard let reservation = mmap(nil, reservedLength, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              reservation != MAP_FAILED
        else { throw Errno.current }
        let reservedStart = Int(bitPattern: reservation)
        let start = (reservedStart + huge - 1) & ~(huge - 1)
        guard let address = mmap(UnsafeMutableRawPointer(bitPattern: start), length, protection, MAP_SHARED | MAP_FIXED, fd, 0),
              address != MAP_FAILED
        else {
            let error = Errno.current
            munmap(reservation, reservedLength)
            throw error
        }
        let end = start + pageRounded(length)
        if start > reservedStart { munmap(reservation, start - reservedStart) }
        if reservedStart + reservedLength > end { munmap(UnsafeMutableRawPointer(bitPattern: end), reservedStart + reservedLength - end) }
        if hugePages { _ = madvise(address, length & ~(huge - 1), MADV_HUGEPAGE) }
        return address
    }

    /// Makes a writable mapping read-only (`mprotect(PROT_READ)`). Done when a segment is sealed:
    /// the kernel's writeback then has no writable entry to clean for the segment's pages (each
    /// such clean interrupts the threads reading through the mapping, to flush their TLBs).
    package func protectReadOnly(_ address: UnsafeRawPointer, length: Int) {
        _ = mprotect(UnsafeMutableRawPointer(mutating: address), length, PROT_READ)
    }

    package func unmap(_ address: UnsafeRawPointer, length: Int) {
        _ = munmap(UnsafeMutableRawPointer(mutating: address), length)
    }

    /// Writes all of `buffer` at `offset`, looping over short writes.
    /// On failure, some prefix of the buffer may have been written.
    package func writeAll(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        var done = 0
        while done < buffer.count {
            let rest = UnsafeRawBufferPointer(rebasing: buffer[done...])
            let written = try pwrite(fd, from: rest, at: offset + Int64(done))
            if written == 0 { throw Errno.ioError }  // A regular file never accepts zero bytes for a non-empty write.
            done += written
        }
    }

    /// Reads exactly `buffer.count` bytes at `offset`, or fewer only at end of file; returns the count read.
    package func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        var done = 0
        while done < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
            let count = try pread(fd, into: rest, at: offset + Int64(done))
            if count == 0 { break }
            done += count
        }
        return done
    }

    /// Opens and closes `path` as a directory, following links; throws what the open finds wrong
    /// (`ENOENT` for a link to nothing, `ELOOP` for a loop of links, `ENOTDIR`, `EACCES`).
    package func probeDirectory(_ path: String) throws(Errno) {
        try openDirectory(path).close()
    }

    private func openDirectory(_ path: String) throws(Errno) -> OpenFile {
        try openFile(path, flags: O_RDONLY | O_DIRECTORY, mode: 0)
    }

    /// Makes the creation, rename or removal of entries in a directory durable.
    package func syncDirectory(_ path: String) throws(Errno) {
        let directory = try openDirectory(path)
        try fsync(directory.descriptor)
    }

    /// Writes `bytes` to `path` atomically: a temporary file, fsync, rename, directory fsync. Without
    /// `replacing`, neither the temporary file nor `path` may exist (`O_EXCL`, `RENAME_NOREPLACE`):
    /// nothing there is ever replaced, and `.exists` is thrown.
    package func writeFileAtomically(_ path: String, directory: String, bytes: [UInt8], replacing: Bool = true) throws(Errno) {
        let temporary = path + ".tmp"
        let file = try openFile(temporary, flags: O_WRONLY | O_CREAT | (replacing ? O_TRUNC : O_EXCL), mode: 0o600)
        do throws(Errno) {
            try bytes.withBytes { (raw) throws(Errno) in try writeAll(file.descriptor, from: raw, at: 0) }
            try fdatasync(file.descriptor)
        } catch {
            file.close()  // before the unlink
            try? unlink(temporary)
            throw error
        }
        file.close()  // before the rename
        do throws(Errno) {
            if replacing { try rename(temporary, to: path) } else { try renameNoReplace(temporary, to: path) }
            try syncDirectory(directory)
        } catch {
            try? unlink(temporary)
            throw error
        }
    }
}
