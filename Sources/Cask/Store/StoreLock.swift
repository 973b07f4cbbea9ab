#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The single-writer lock: an advisory `flock` on `DIR/LOCK`, holding the owner's pid as text.
/// Released when the descriptor closes: on ``release()`` or when the lock object goes (also when
/// the process dies, however it dies).
package final class StoreLock: Sendable {
    private let file: Mutex<OpenFile?>
    /// The lock file's identity while this lock holds it (nil once released, or when unknown).
    private let held: Mutex<FileIdentity?>

    /// The lock files this process holds, so that a second open here is told apart from another
    /// process's: `flock` is per open file, and the pid in the file can be stale.
    private static let heldHere = Mutex<Set<FileIdentity>>([])

    /// Takes the lock or throws ``CaskError/locked(path:holderPID:)`` naming the holder.
    package init(directory: String, fileSystem: any FileSystem) throws(CaskError) {
        let path = directory + "/" + SegmentName.lockFile
        let file: OpenFile
        do {
            file = try fileSystem.openFile(path, flags: O_RDWR | O_CREAT, mode: 0o600)
        } catch {
            throw CaskError.from(error, operation: "open", path: path)
        }
        do {
            try fileSystem.lock(file.descriptor, exclusive: true)
        } catch {
            // `file` closes as the error leaves: after the holder's pid is read from it.
            if error == .wouldBlock {
                if let identity = try? fileSystem.identity(file.descriptor), Self.heldHere.withLock({ $0.contains(identity) }) {
                    throw CaskError.alreadyOpen(path: directory)
                }
                throw CaskError.locked(path: directory, holderPID: Self.readPID(fd: file.descriptor, fileSystem: fileSystem))
            }
            throw CaskError.from(error, operation: "flock", path: path)
        }
        // One write of a fixed width, and no truncation: a process that finds the lock taken reads
        // a whole pid at any moment (it read an empty file between a truncation and the write),
        // and the file's bytes past the first line are never touched.
        _ = try? Self.pidLine(getpid()).withBytes { (raw) throws(Errno) in try fileSystem.writeAll(file.descriptor, from: raw, at: 0) }
        let identity = try? fileSystem.identity(file.descriptor)
        if let identity { _ = Self.heldHere.withLock { $0.insert(identity) } }
        held = Mutex(identity)
        self.file = Mutex(file)
    }

    deinit { release() }

    /// `pid` as the lock file's first line: left-aligned in ``pidLineLength`` - 1 columns of
    /// spaces, then a newline, so that every pid overwrites the one before it whole.
    static func pidLine(_ pid: Int32) -> [UInt8] {
        let digits = Array(String(pid).utf8)
        return digits + [UInt8](repeating: UInt8(ascii: " "), count: max(0, pidLineLength - 1 - digits.count)) + [UInt8(ascii: "\n")]
    }

    /// Wider than any Linux pid (at most 4,194,304) and its newline.
    static let pidLineLength = 12

    /// Releases the lock (idempotent). The pid stays in the file: it is read only while the lock
    /// is held, by then by a process that wrote its own.
    package func release() {
        if let identity = held.withLock({ $0.take() }) { _ = Self.heldHere.withLock { $0.remove(identity) } }
        file.withLock { $0 = nil }  // Closes the descriptor, if still open.
    }

    static func readPID(fd: Int32, fileSystem: any FileSystem) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = (try? bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }) ?? 0
        let firstLine = bytes[0..<count].split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        return Int32(String(decoding: firstLine, as: UTF8.self).trimmingWhitespace())
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
