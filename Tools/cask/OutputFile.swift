import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The file a command writes its output to (`export --output`), opened as what the path names:
///
/// - **nothing yet, or a regular file** (itself or through symbolic links): the output is written
///   under a new temporary name in the same directory (`.<name>.cask-<pid>-<random>.tmp`, mode
///   0600, never an existing file), made durable and renamed into place only when complete, so the
///   path never holds a partial output. A link stays a link: the file it names is replaced. A path
///   that named nothing is never replaced by the rename if something appeared there meanwhile.
/// - **a FIFO, a terminal, a character device or a socket** (itself or through links, such as
///   `/dev/stdout`): written through, as a shell redirection would; never replaced by a file.
/// - **a directory, a dangling link, anything inside the store directory**: refused before the
///   store is read.
///
/// Not thread-safe: one command writes it from one thread.
final class OutputFile {
    /// The path as the user gave it, for messages.
    let path: String
    private let fd: Int32
    /// Set while the output goes to a temporary file: where it is, where it goes, and whether
    /// the destination existed (a rename may replace it) or not (only a new name may be made).
    private let staging: (temporary: String, destination: String, replaces: Bool)?
    private var buffer: [UInt8] = []
    /// Whether the output goes to a temporary file renamed into place (else it is written through).
    var isStaged: Bool { staging != nil }
    private var committed = false

    /// Opens `path` for output; `storeDirectory` is the store the command reads, which the output
    /// must not be inside.
    init(path: String, storeDirectory: String) throws(ToolError) {
        self.path = path
        var target = stat()
        let exists = stat(path, &target) == 0
        if !exists {
            var link = stat()
            if lstat(path, &link) == 0 {
                throw .failure("cannot write \(path): it is a symbolic link to a file that does not exist; remove the link or name another file")
            }
            guard errno == ENOENT else { throw .failure("cannot write \(path): \(Self.reason(errno))") }
        }
        let kind = target.st_mode & S_IFMT
        if exists && kind == S_IFDIR {
            throw .failure("cannot write \(path): it is a directory; name a file")
        }
        if exists && kind != S_IFREG {
            try Self.refuseInside(storeDirectory, parent: Self.parent(of: path), path: path)
            // A FIFO, terminal, device or socket: written through, never replaced.
            let fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)
            guard fd >= 0 else { throw .failure("cannot write \(path): \(Self.reason(errno))") }
            self.fd = fd
            staging = nil
            return
        }
        // A regular file, or none yet: staged next to the file the path names (through its links).
        let destination: String
        if exists {
            guard let resolved = realpath(path, nil) else { throw .failure("cannot write \(path): \(Self.reason(errno))") }
            destination = String(cString: resolved)
            free(resolved)
        } else {
            destination = path
        }
        let parent = Self.parent(of: destination)
        try Self.refuseInside(storeDirectory, parent: parent, path: path)
        let name = (destination as NSString).lastPathComponent
        var opened: (fd: Int32, path: String)?
        for _ in 0..<8 where opened == nil {
            let candidate = parent + "/." + name + ".cask-\(getpid())-\(UInt32.random(in: 0 ... .max)).tmp"
            let fd = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 { opened = (fd, candidate) } else if errno != EEXIST {
                throw .failure("cannot create a temporary file in \(parent) for \(path): \(Self.reason(errno))")
            }
        }
        guard let opened else { throw .failure("cannot create a temporary file in \(parent) for \(path): every name tried exists") }
        fd = opened.fd
        staging = (opened.path, destination, exists)
    }

    deinit {
        close(fd)
        if let staging, !committed { unlink(staging.temporary) }
    }

    func write(_ bytes: [UInt8]) throws(ToolError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(ToolError) in try write(raw) } }.get()
    }

    /// Writes `bytes` (valid during the call): buffered when small, else through at once.
    func write(_ bytes: UnsafeRawBufferPointer) throws(ToolError) {
        if bytes.count >= Self.bufferLimit {
            // A chunk already as large as the buffer goes out as it is, not copied into it first.
            try flush()
            try writeAll(bytes)
            return
        }
        buffer += bytes
        if buffer.count >= Self.bufferLimit { try flush() }
    }

    private static let bufferLimit = 64 << 10

    /// Writes what is buffered and, for a staged file, makes it durable and puts it in place.
    func commit() throws(ToolError) {
        try flush()
        guard let staging else { committed = true; return }
        guard fsync(fd) == 0 else { throw .failure("cannot write \(staging.temporary): \(Self.reason(errno))") }
        if staging.replaces {
            guard rename(staging.temporary, staging.destination) == 0 else {
                throw .failure("cannot rename \(staging.temporary) to \(staging.destination): \(Self.reason(errno))")
            }
        } else {
            // link(2) makes the new name only if nothing took it meanwhile.
            guard link(staging.temporary, staging.destination) == 0 else {
                let cause = errno == EEXIST ? "it was created by someone else during the export" : Self.reason(errno)
                throw .failure("cannot create \(path): \(cause); nothing was replaced")
            }
            unlink(staging.temporary)
        }
        committed = true
        let directoryFD = open(Self.parent(of: staging.destination), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    private func flush() throws(ToolError) {
        try buffer.withUnsafeBytes { raw in Result { () throws(ToolError) in try writeAll(raw) } }.get()
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(ToolError) {
        var done = 0
        while done < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if written < 0 {
                if errno == EINTR { continue }
                throw .failure("cannot write \(staging?.temporary ?? path): \(Self.reason(errno))")
            }
            done += written
        }
    }

    /// The directory holding `path`'s last component.
    private static func parent(of path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        return directory.isEmpty ? "." : directory
    }

    /// Refuses an output whose directory `parent` is the store directory (the same device and
    /// inode, however either is spelled): it would sit among, or replace, the store's own files.
    private static func refuseInside(_ storeDirectory: String, parent: String, path: String) throws(ToolError) {
        var output = stat(), store = stat()
        guard stat(parent, &output) == 0 else { throw .failure("cannot write \(path): \(parent): \(reason(errno))") }
        guard stat(storeDirectory, &store) == 0 else { return }
        if output.st_dev == store.st_dev && output.st_ino == store.st_ino {
            throw .usage("--output \(path) is inside the store directory \(storeDirectory); write the export outside it")
        }
    }

    private static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}
