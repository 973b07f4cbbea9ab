/// The writer's state: the active segment, the write buffer, the sequence counter.
/// Lives inside the store's writer mutex; every method runs with that mutex held.
package struct StoreWriter: ~Copyable {
    package var active: SegmentFile
    /// Logical end of the active segment, including bytes still in `buffer`.
    package var end: Int64
    /// Bytes of the active segment handed to the OS; `buffer` holds `flushed ..< end`.
    package var flushed: Int64
    package var buffer: ByteBuffer
    package let encoder = RecordEncoder()
    package var nextSeq: UInt64
    package var nextSegmentID: UInt64
    /// Sealed segments written since their last `fdatasync` (os and buffered modes).
    package var unsyncedSealed: [SegmentFile] = []
    /// Set when the store can no longer write safely (a failed sync, or a failed rollback).
    package var failure: CaskError?
    package var closed = false

    let fileSystem: any FileSystem
    let directory: String
    /// The store's index, only to prefetch (``KeyIndex/prefetch(_:)``): its contents are read and
    /// written under the store's index lock. Only writers grow its table, and they hold this
    /// mutex, so the table cannot move while a write prefetches.
    let index: KeyIndex

    package init(
        active: SegmentFile, length: Int64, nextSeq: UInt64, nextSegmentID: UInt64, bufferCapacity: Int,
        fileSystem: any FileSystem, directory: String, index: KeyIndex
    ) {
        self.active = active
        self.index = index
        end = length
        flushed = length
        buffer = ByteBuffer(capacity: bufferCapacity)
        self.nextSeq = nextSeq
        self.nextSegmentID = nextSegmentID
        self.fileSystem = fileSystem
        self.directory = directory
    }

    package func checkUsable() throws(CaskError) {
        if closed { throw CaskError.closed }
        if let failure { throw failure }
    }

    /// Hands the buffer to the OS. On failure the partial write is cut off again, the buffer is
    /// kept for a later attempt, and the error is thrown.
    package mutating func flush(bufferLimit: Int) throws(CaskError) {
        guard buffer.count > 0 else { return }
        let fd = active.fd
        let at = flushed
        do throws(Errno) {
            try buffer.withUnsafeBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: at) }
        } catch {
            do { try fileSystem.ftruncate(fd, length: at) } catch let truncateError {
                failure = CaskError.io(operation: "ftruncate (rolling back a failed write)", path: active.path, errno: truncateError)
            }
            throw CaskError.from(error, operation: "pwrite", path: active.path)
        }
        flushed = end
        active.writtenLength.store(flushed, ordering: .releasing)
        buffer.reset(shrinkingTo: max(bufferLimit * 2, 64 << 10))
    }

    /// Creates segment `id` with its header and makes its directory entry durable.
    /// `mapLength`: bytes to map for reads up front (the segment's maximum size), 0 for `pread`.
    package static func createSegment(
        id: UInt64, baseSeq: UInt64, directory: String, fileSystem: any FileSystem, mapLength: Int
    ) throws(CaskError) -> SegmentFile {
        let path = directory + "/" + SegmentName.segment(id)
        guard id < UInt64(UInt32.max) else {
            throw CaskError.corruptFile(path: path, reason: "segment ids are exhausted (limit \(UInt32.max - 1))")
        }
        let header = SegmentHeader(segmentID: id, baseSeq: baseSeq).encoded()
        let fd: Int32
        do {
            fd = try fileSystem.open(path, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        } catch {
            throw CaskError.from(error, operation: "create segment", path: path)
        }
        do {
            try header.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: 0) }
            // The header before the name: a segment that a power cut leaves without its header is
            // damage unless it is the newest, and compaction outputs get newer ids than the active one.
            try fileSystem.fdatasync(fd)
            try fileSystem.syncDirectory(directory)
        } catch {
            fileSystem.close(fd)
            try? fileSystem.unlink(path)
            throw CaskError.from(error, operation: "create segment", path: path)
        }
        return SegmentFile(id: id, path: path, fd: fd, length: Int64(header.count), fileSystem: fileSystem, mapLength: mapLength)
    }
}

#if canImport(Glibc)
import Glibc
#endif
