/// The open segment files by id, as the read path looks them up once per get.
///
/// An array from the lowest id held rather than a dictionary: ids are handed out in increasing
/// order and compaction retires the oldest, so the ids held are nearly contiguous, and a lookup is
/// a subtraction and a bounds check instead of hashing. Slots of retired ids in the middle stay
/// nil; the ends are trimmed. Memory: one word per id between the lowest and the highest held.
/// Not thread-safe: the store guards it with its index lock.
package struct SegmentTable {
    private var files: [SegmentFile?] = []
    /// Where each file of `files` can be read without a reference to it.
    private var extents: [MappedExtent] = []
    /// The id of `files[0]`.
    private var base: UInt32 = 0

    package init() {}

    /// The file of segment `id`, or nil when the store does not hold it. Setting nil removes it.
    package subscript(id: UInt32) -> SegmentFile? {
        get {
            guard id >= base else { return nil }
            let position = Int(id &- base)  // Safe: id >= base.
            return position < files.count ? files[position] : nil
        }
        set {
            if let file = newValue {
                insert(file, at: id)
            } else if id >= base, Int(id - base) < files.count {
                files[Int(id - base)] = nil
                extents[Int(id - base)] = MappedExtent()
                trim()
            }
        }
    }

    /// The mapped bytes of the record at `location` when its segment is held and mapped and the
    /// table knows the record to be written (see ``noteWritten(_:length:)``); else nil.
    ///
    /// Reads no file object, so it costs no retain and release (nor the atomic load of the file's
    /// written length). The bytes stay valid only while the caller holds the store's index lock,
    /// under which segments are retired.
    @inline(__always)
    package func writtenMappedBytes(_ location: RecordLocation) -> UnsafeRawBufferPointer? {
        guard location.segmentID >= base else { return nil }
        let position = Int(location.segmentID &- base)  // Safe: the id is at least `base`.
        guard position < extents.count else { return nil }
        let extent = extents[position]
        guard let start = extent.start, Int64(location.offset) + Int64(location.length) <= extent.readableLength else { return nil }
        return UnsafeRawBufferPointer(start: start + Int(location.offset), count: Int(location.length))
    }

    /// Records that segment `id` has `length` bytes written (handed to the OS), so that
    /// ``writtenMappedBytes(_:)`` serves its records up to there. The writer calls it, under the
    /// index lock, as the active segment grows; a length below the one known is ignored.
    package mutating func noteWritten(_ id: UInt32, length: Int64) {
        guard id >= base else { return }
        let position = Int(id &- base)
        guard position < extents.count, extents[position].start != nil else { return }
        extents[position].readableLength = max(extents[position].readableLength, min(length, extents[position].mappedLength))
    }

    /// Whether the table holds no file.
    package var isEmpty: Bool { files.isEmpty }

    package mutating func removeAll() {
        files = []
        extents = []
        base = 0
    }

    private mutating func insert(_ file: SegmentFile, at id: UInt32) {
        let extent = MappedExtent(file)
        if files.isEmpty {
            base = id
            files = [file]
            extents = [extent]
        } else if id < base {
            files.insert(contentsOf: [SegmentFile?](repeating: nil, count: Int(base - id)), at: 0)
            extents.insert(contentsOf: [MappedExtent](repeating: MappedExtent(), count: Int(base - id)), at: 0)
            base = id
            files[0] = file
            extents[0] = extent
        } else {
            let position = Int(id - base)
            if position >= files.count {
                files.append(contentsOf: [SegmentFile?](repeating: nil, count: position - files.count + 1))
                extents.append(contentsOf: [MappedExtent](repeating: MappedExtent(), count: position - extents.count + 1))
            }
            files[position] = file
            extents[position] = extent
        }
    }

    /// Drops the nil slots at both ends.
    private mutating func trim() {
        while let last = files.last, last == nil {
            files.removeLast()
            extents.removeLast()
        }
        let leading = files.prefix { $0 == nil }.count
        if leading > 0 {
            files.removeFirst(leading)
            extents.removeFirst(leading)
            base = files.isEmpty ? 0 : base + UInt32(leading)
        }
    }
}

/// Where a segment's records can be read without a reference to its file: the start of its
/// mapping, and how much of it holds written bytes. Plain values, so that the read path that
/// consults them under the index lock does no reference counting.
struct MappedExtent {
    /// The start of the file's mapping; nil when it is read with `pread` (or the slot is empty).
    var start: UnsafeRawPointer?
    var mappedLength: Int64 = 0
    /// Bytes from the start known to be written and mapped (at most `mappedLength`).
    var readableLength: Int64 = 0

    init() {}

    init(_ file: SegmentFile) {
        guard let mapping = file.mapping else { return }
        start = mapping
        mappedLength = Int64(file.mappedLength)
        readableLength = min(file.writtenLength.load(ordering: .acquiring), mappedLength)
    }
}
