import Synchronization
import CCaskCPU

/// An open segment file. Readers hold a reference while they read, so a file that compaction
/// removes stays readable until the last reader lets go; the descriptor closes and the mapping is
/// released on deinit.
///
/// Reads go through a read-only shared mapping when there is one (no syscall, no copy), else `pread`.
/// The mapping may extend past the end of the file (the active segment is mapped at its maximum
/// size up front); readers only touch bytes below ``writtenLength``. `@unchecked Sendable`: the
/// mapping is immutable after init and only read.
package final class SegmentFile: @unchecked Sendable {
    package let id: UInt64
    package let path: String
    package let fd: Int32
    private let fileSystem: any FileSystem
    /// Set (under this lock) when compaction deletes the file; its hint file is written under the
    /// same lock, so that no hint can appear for a segment that is gone.
    package let retired = Lock(false)
    /// The start of the mapping, or nil when the file is read with `pread`.
    package let mapping: UnsafeRawPointer?
    /// Bytes mapped from the start of the file (0 without a mapping).
    package let mappedLength: Int
    /// Bytes of the file that have been handed to the OS (`pwrite`): `pread` can serve them.
    /// Bytes past this are still in the writer's buffer.
    package let writtenLength: Atomic<Int64>

    /// `mapLength`: bytes to map for reading (0 for none); a failed mapping falls back to `pread`.
    package init(id: UInt64, path: String, fd: Int32, length: Int64, fileSystem: any FileSystem, mapLength: Int = 0) {
        self.id = id
        self.path = path
        self.fd = fd
        self.fileSystem = fileSystem
        writtenLength = Atomic(length)
        if mapLength > 0, let address = try? fileSystem.map(fd, length: mapLength) {
            mapping = address
            mappedLength = mapLength
        } else {
            mapping = nil
            mappedLength = 0
        }
    }

    deinit {
        if let mapping { fileSystem.unmap(mapping, length: mappedLength) }
        fileSystem.close(fd)
    }

    /// The mapped bytes of a record that lies below ``writtenLength``, or nil without a mapping.
    /// Valid while this file object is alive.
    @inline(__always)
    package func mappedBytes(_ location: RecordLocation) -> UnsafeRawBufferPointer? {
        guard let mapping, Int(location.offset) + Int(location.length) <= mappedLength else { return nil }
        return UnsafeRawBufferPointer(start: mapping + Int(location.offset), count: Int(location.length))
    }

    /// Starts loading the first cache lines of the record at `location` from the mapping, so that
    /// the miss overlaps whatever the caller does before it reads the record. Never faults: a
    /// prefetch of a page that is not mapped (or not in the file) does nothing.
    @inline(__always) package func prefetch(_ location: RecordLocation) {
        guard let mapping else { return }
        Self.prefetch(record: UnsafeRawBufferPointer(start: mapping + Int(location.offset), count: Int(location.length)))
    }

    /// Starts loading the first line of a record's bytes, and the second when the record reaches
    /// into it (a small record often straddles two lines; the second holds the rest of its key or
    /// value). Never faults.
    @inline(__always) package static func prefetch(record: UnsafeRawBufferPointer) {
        guard let start = record.baseAddress else { return }
        cask_prefetch_for_read(start)
        if record.count > 1, (Int(bitPattern: start) & 63) + record.count > 64 { cask_prefetch_for_read(start + 64) }
    }

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
