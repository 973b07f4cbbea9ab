import Synchronization

/// An open segment file. Readers hold a reference while they read, so a file that compaction
/// removes stays readable until the last reader lets go; the descriptor closes on deinit.
package final class SegmentFile: Sendable {
    package let id: UInt64
    package let path: String
    package let fd: Int32
    private let fileSystem: any FileSystem
    /// Bytes of the file that have been handed to the OS (`pwrite`): `pread` can serve them.
    /// Bytes past this are still in the writer's buffer.
    package let writtenLength: Atomic<Int64>

    package init(id: UInt64, path: String, fd: Int32, length: Int64, fileSystem: any FileSystem) {
        self.id = id
        self.path = path
        self.fd = fd
        self.fileSystem = fileSystem
        writtenLength = Atomic(length)
    }

    deinit { fileSystem.close(fd) }

    /// Reads `location.length` bytes at `location.offset` into `buffer` (which has at least that many).
    package func read(_ location: RecordLocation, into buffer: UnsafeMutableRawBufferPointer) throws(CaskError) {
        let wanted = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(location.length)])
        let count: Int
        do {
            count = try fileSystem.readFully(fd, into: wanted, at: Int64(location.offset))
        } catch {
            throw CaskError.io(operation: "pread", path: path, errno: error)
        }
        guard count == wanted.count else {
            throw CaskError.corruptRecord(path: path, offset: Int64(location.offset), reason: "file ends inside the record")
        }
    }
}
