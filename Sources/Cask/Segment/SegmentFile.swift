import Synchronization
import CCaskCPU

/// An open segment file. Readers hold a reference while they read, so a file that compaction
/// removes stays readable until the last reader lets go; the descriptor closes and the mapping is
/// released on deinit.
///
/// Reads go through a shared mapping when there is one (no syscall, no copy), else `pread`.
/// The mapping may extend past the end of the file (the active segment is mapped at its maximum
/// size up front); readers only touch bytes below ``writtenLength``. The active segment's mapping
/// may be writable: the writer then stores records through it (``write(_:at:)``), past
/// ``writtenLength``, in space it reserved in the file. `@unchecked Sendable`: the mapping itself
/// never changes after init; its bytes below ``writtenLength`` are only read, and the writer
/// publishes bytes it stored by raising ``writtenLength`` (a release store).
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
    /// Whether the mapping is writable (see ``write(_:at:)``).
    package let isWritable: Bool
    /// Whether the writable mapping asked for 2 MiB page-cache folios (``FileSystem/map(_:length:writable:hugePages:)``):
    /// the writer then reserves space 2 MiB at a time (``StoreWriter/hugePageReservationStep``).
    package let hasHugePages: Bool
    /// Bytes of the file that have been handed to the OS (`pwrite`, or stored through the
    /// writable mapping): `pread` can serve them.
    /// Bytes past this are still in the writer's buffer.
    package let writtenLength: Atomic<Int64>
    /// The dictionary the segment's header names, which its records flagged
    /// ``RecordFlags/dictionary`` expand with (and the writer compresses with, in the active segment).
    package let dictionary: SegmentDictionary
    /// An encrypted segment's cipher (its records are sealed with it) and salt; nil in a store that
    /// is not encrypted.
    package let sealing: SegmentSealing?
    /// The key prefix's length and then its bytes, at an address that lives as long as the file
    /// object: what readers without a reference to it use (``SegmentTable``); nil for none.
    package let keyPrefixRecord: UnsafeRawPointer?
    /// The key prefix the segment's header names (empty for none), which the keys of its records
    /// flagged ``RecordFlags/keyPrefix`` start with.
    package var keyPrefix: [UInt8] { Array(keyPrefixBytes) }
    /// Where the records start: the end of the header.
    package var contentStart: Int64 { Int64(SegmentHeader.byteCount(encrypted: sealing != nil, keyPrefixLength: keyPrefixBytes.count)) }

    /// The key prefix's bytes (empty for none), valid while the file object lives.
    package var keyPrefixBytes: UnsafeRawBufferPointer { Self.keyPrefix(at: keyPrefixRecord) }

    /// The bytes of the key prefix stored at `record` (``keyPrefixRecord``); empty for nil.
    @inline(__always)
    package static func keyPrefix(at record: UnsafeRawPointer?) -> UnsafeRawBufferPointer {
        guard let record else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: record + 1, count: Int(record.load(as: UInt8.self)))
    }

    /// `mapLength`: bytes to map (0 for none); a failed mapping falls back to `pread`. `writable`:
    /// map for writing too (`fd` must be open for reading and writing); if that fails the mapping
    /// is read-only, and the writer uses `pwrite`. `hugePages`: ask for 2 MiB folios in the writable
    /// mapping (see ``StoreWriter``).
    package init(
        id: UInt64, path: String, fd: Int32, length: Int64, fileSystem: any FileSystem, mapLength: Int = 0, writable: Bool = false,
        hugePages: Bool = false, dictionary: SegmentDictionary = .none, sealing: SegmentSealing? = nil, keyPrefix: [UInt8] = []
    ) {
        precondition(keyPrefix.count <= Limits.maxKeyPrefixLength, "a key prefix fits its header")
        self.id = id
        self.dictionary = dictionary
        self.sealing = sealing
        if keyPrefix.isEmpty {
            keyPrefixRecord = nil
        } else {
            let record = UnsafeMutableRawPointer.allocate(byteCount: keyPrefix.count + 1, alignment: 1)
            record.storeBytes(of: UInt8(keyPrefix.count), as: UInt8.self)
            keyPrefix.withUnsafeBytes { (record + 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            keyPrefixRecord = UnsafeRawPointer(record)
        }
        self.path = path
        self.fd = fd
        self.fileSystem = fileSystem
        writtenLength = Atomic(length)
        if mapLength > 0, writable, let address = try? fileSystem.map(fd, length: mapLength, writable: true, hugePages: hugePages) {
            mapping = UnsafeRawPointer(address)
            mappedLength = mapLength
            isWritable = true
            hasHugePages = hugePages
        } else if mapLength > 0, let address = try? fileSystem.map(fd, length: mapLength) {
            mapping = UnsafeRawPointer(address)
            mappedLength = mapLength
            isWritable = false
            hasHugePages = false
        } else {
            mapping = nil
            mappedLength = 0
            isWritable = false
            hasHugePages = false
        }
    }

    deinit {
        keyPrefixRecord?.deallocate()
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

    /// Stores `bytes` at `offset` of the file through the writable mapping: into the page cache,
    /// as a `pwrite` would, without a system call. For the writer, under its mutex, past
    /// ``writtenLength``. The caller must have reserved the range in the file
    /// (``FileSystem/allocate(_:offset:length:)``): a store to a page past the end of the file
    /// raises SIGBUS, and one to a page without a disk block could, on a full disk.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        precondition(isWritable && offset >= 0 && Int(offset) + bytes.count <= mappedLength, "a mapped write stays inside the writable mapping")
        guard let source = bytes.baseAddress, let mapping else { return }
        // Front to back: a process killed meanwhile leaves a prefix of the records, as a `pwrite`
        // would (`memcpy` may store a later record before an earlier one; recovery would then find
        // a gap followed by a valid record: damage, not a torn tail).
        cask_copy_in_order(UnsafeMutableRawPointer(mutating: mapping + Int(offset)), source, UInt(bytes.count))
    }

    /// Ends the writer's stores through the mapping: it becomes read-only (sealed segments are
    /// never written again). For the writer, under its mutex, when it seals the segment.
    package func endMappedWrites() {
        guard isWritable, let mapping else { return }
        fileSystem.protectReadOnly(mapping, length: mappedLength)
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

/// An encrypted segment's cipher and the salt in its header that it was derived from.
package struct SegmentSealing: Sendable {
    package let cipher: FileCipher
    package let salt: [UInt8]

    package init(cipher: FileCipher, salt: [UInt8]) {
        self.cipher = cipher
        self.salt = salt
    }
}
