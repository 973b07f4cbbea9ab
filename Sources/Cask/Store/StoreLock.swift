#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The single-writer lock: an advisory `flock` on `DIR/LOCK`, holding the owner's pid as text.
/// Released when the descriptor closes (also when the process dies, however it dies).
package final class StoreLock: Sendable {
    private let fd: Mutex<Int32?>
    private let fileSystem: any FileSystem

    /// Takes the lock or throws ``CaskError/locked(path:holderPID:)`` naming the holder.
    package init(directory: String, fileSystem: any FileSystem) throws(CaskError) {
        let path = directory + "/" + SegmentName.lockFile
        let fd: Int32
        do {
            fd = try fileSystem.open(path, flags: O_RDWR | O_CREAT, mode: 0o600)
        } catch {
            throw CaskError.from(error, operation: "open", path: path)
        }
        do {
            try fileSystem.lock(fd, exclusive: true)
        } catch {
            defer { fileSystem.close(fd) }
            if error == .wouldBlock {
                throw CaskError.locked(path: directory, holderPID: Self.readPID(fd: fd, fileSystem: fileSystem))
            }
            throw CaskError.from(error, operation: "flock", path: path)
        }
        self.fd = Mutex(fd)
        self.fileSystem = fileSystem
        let pid = Array("\(getpid())\n".utf8)
        try? fileSystem.ftruncate(fd, length: 0)
        _ = try? pid.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: 0) }
    }

    /// Releases the lock (idempotent).
    package func release() {
        fd.withLock { fd in
            guard let open = fd else { return }
            try? fileSystem.ftruncate(open, length: 0)
            fileSystem.close(open)
            fd = nil
        }
    }

    deinit { release() }

    static func readPID(fd: Int32, fileSystem: any FileSystem) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = (try? bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }) ?? 0
        let text = String(decoding: bytes[0..<count], as: UTF8.self).trimmingWhitespace()
        return Int32(text)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
