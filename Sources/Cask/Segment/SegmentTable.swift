import CCaskCPU
import Synchronization

/// The open segment files by id, as the read path looks them up once per get.
///
/// An array from the lowest id held rather than a dictionary: ids are handed out in increasing
/// order and compaction retires the oldest, so the ids held are nearly contiguous, and a lookup is
/// a subtraction and a bounds check instead of hashing. Slots of retired ids in the middle stay
/// nil; the ends are trimmed. Memory: one word per id between the lowest and the highest held,
/// plus a cache line for each in the published extents.
///
/// Thread-safety: changes, and lookups of files, run under the store's index lock.
/// ``writtenMappedBytes(_:)`` also runs without it, inside ``ReaderRegistry/read(_:)``: it reads
/// the *published extents*, a copy of where each file's records can be read that is replaced whole
/// when a file comes or goes (and freed, like a removed file's mapping, only after the readers
/// that may hold it have left), and whose written lengths grow in place, atomically.
package final class SegmentTable {
    private var files: [SegmentFile?] = []
    /// The id of `files[0]`.
    private var base: UInt32 = 0
    /// What ``writtenMappedBytes(_:)`` reads: an ``ExtentList`` for `files` (replaced, never changed,
    /// but for its extents' written lengths).
    private let published: Atomic<UnsafeMutableRawPointer>
    private let readers: ReaderRegistry

    package init(readers: ReaderRegistry = .shared) {
        self.readers = readers
        published = Atomic(ExtentList.allocate(base: 0, extents: []))
    }

    deinit {
        ExtentList.deallocate(published.load(ordering: .relaxed))
    }

    /// The file of segment `id`, or nil when the store does not hold it. Setting nil removes it.
    /// Setting returns once no reader can be using the extents of the file it replaced or removed.
    package subscript(id: UInt32) -> SegmentFile? {
        get {
            guard id >= base else { return nil }
            let position = Int(id &- base)  // Safe: id >= base.
            return position < files.count ? files[position] : nil
        }
        set {
            // The file replaced or removed stays alive until no reader can be reading its mapping.
            let old = self[id]
            if let file = newValue {
                insert(file, at: id)
            } else if id >= base, Int(id - base) < files.count {
                files[Int(id - base)] = nil
                trim()
            }
            withExtendedLifetime(old) { republish() }
        }
    }

    /// Adds `files` by id, publishing their extents once (setting them one by one publishes, and
    /// waits for readers, once per file). Replaces no file the table holds.
    package func add(_ files: [(id: UInt32, file: SegmentFile)]) {
        for (id, file) in files {
            precondition(self[id] == nil, "segment \(id) is already held")
            insert(file, at: id)
        }
        republish()
    }

    /// The mapped bytes of the record at `location` when its segment is held and mapped and the
    /// table knows the record to be written (see ``noteWritten(_:length:)``); else nil.
    ///
    /// Reads no file object, so it costs no retain and release (nor the atomic load of the file's
    /// written length). Runs under the index lock, or without it inside ``ReaderRegistry/read(_:)``;
    /// the bytes stay valid only while the caller holds the lock or stays inside.
    @inline(__always)
    package func writtenMappedBytes(_ location: RecordLocation) -> UnsafeRawBufferPointer? {
        writtenMappedRecord(location)?.bytes
    }

    /// ``writtenMappedBytes(_:)``, the content of the dictionary the segment's header names (nil
    /// when it names none, or names one that could not be loaded), an encrypted segment's cipher
    /// (unretained: the file owns it) and the key prefix the header names (empty for none), valid
    /// as long as the bytes.
    @inline(__always)
    package func writtenMappedRecord(
        _ location: RecordLocation
    ) -> (bytes: UnsafeRawBufferPointer, dictionary: UnsafeRawBufferPointer?, cipher: Unmanaged<FileCipher>?, keyPrefix: UnsafeRawBufferPointer)? {
        let list = ExtentList(published.load(ordering: .sequentiallyConsistent))
        guard location.segmentID >= list.base else { return nil }
        let position = Int(location.segmentID &- list.base)  // Safe: the id is at least `base`.
        guard position < list.count else { return nil }
        let extent = list.extent(position)
        guard let start = ExtentList.start(of: extent),
              Int64(location.offset) + Int64(location.length) <= ExtentList.readableLength(of: extent)
        else { return nil }
        return (
            UnsafeRawBufferPointer(start: start + Int(location.offset), count: Int(location.length)), ExtentList.dictionary(of: extent),
            ExtentList.cipher(of: extent), SegmentFile.keyPrefix(at: ExtentList.keyPrefix(of: extent)))
    }

    /// Records that segment `id` has `length` bytes written (handed to the OS), so that
    /// ``writtenMappedBytes(_:)`` serves its records up to there. The writer calls it, under the
    /// index lock, as the active segment grows, after the bytes are written; a length below the one
    /// known is ignored.
    package func noteWritten(_ id: UInt32, length: Int64) {
        let list = ExtentList(published.load(ordering: .relaxed))
        guard id >= list.base else { return }
        let position = Int(id &- list.base)
        guard position < list.count else { return }
        let extent = list.extent(position)
        guard ExtentList.start(of: extent) != nil else { return }
        let readable = min(length, ExtentList.mappedLength(of: extent))
        if readable > ExtentList.readableLength(of: extent) { ExtentList.setReadableLength(of: extent, to: readable) }
    }

    /// Whether the table holds no file.
    package var isEmpty: Bool { files.isEmpty }

    /// The ids of the dictionaries the files' headers name (0 for those that name none).
    package var dictionaryIDs: Set<UInt32> { Set(files.compactMap { $0?.dictionary.id }) }

    /// Removes every file, once no reader can be reading their mappings.
    package func removeAll() {
        let old = files
        files = []
        base = 0
        withExtendedLifetime(old) { republish() }
    }

    private func insert(_ file: SegmentFile, at id: UInt32) {
        if files.isEmpty {
            base = id
            files = [file]
        } else if id < base {
            files.insert(contentsOf: [SegmentFile?](repeating: nil, count: Int(base - id)), at: 0)
            base = id
            files[0] = file
        } else {
            let position = Int(id - base)
            if position >= files.count {
                files.append(contentsOf: [SegmentFile?](repeating: nil, count: position - files.count + 1))
            }
            files[position] = file
        }
    }

    /// Drops the nil slots at both ends.
    private func trim() {
        while let last = files.last, last == nil { files.removeLast() }
        let leading = files.prefix { $0 == nil }.count
        if leading > 0 {
            files.removeFirst(leading)
            base = files.isEmpty ? 0 : base + UInt32(leading)
        }
    }

    /// Publishes extents for `files` (keeping the written lengths known for the files still held),
    /// waits until no reader can hold the old ones, and frees them. O(files).
    private func republish() {
        let old = published.load(ordering: .relaxed)
        let oldList = ExtentList(old)
        let extents = files.enumerated().map { position, file -> MappedExtent in
            guard let file else { return MappedExtent() }
            var extent = MappedExtent(file)
            let id = base + UInt32(position)
            if id >= oldList.base, Int(id - oldList.base) < oldList.count {
                let known = oldList.extent(Int(id - oldList.base))
                if ExtentList.start(of: known) == extent.start {
                    extent.readableLength = max(extent.readableLength, ExtentList.readableLength(of: known))
                }
            }
            return extent
        }
        published.store(ExtentList.allocate(base: base, extents: extents), ordering: .sequentiallyConsistent)
        readers.waitForReaders()
        ExtentList.deallocate(old)
    }
}

/// Where a segment's records can be read without a reference to its file: the start of its
/// mapping, and how much of it holds written bytes. Plain values, so that the read path that
/// consults them does no reference counting.
struct MappedExtent {
    /// The start of the file's mapping; nil when it is read with `pread` (or the slot is empty).
    var start: UnsafeRawPointer?
    var mappedLength: Int64 = 0
    /// Bytes from the start known to be written and mapped (at most `mappedLength`). Once
    /// published, stored and loaded only atomically (``ExtentList/readableLength(of:)``).
    var readableLength: Int64 = 0
    /// The content of the segment's dictionary, owned by the file's ``SegmentFile/dictionary`` (which
    /// outlives every reader of the extent, as the mapping does); nil for none.
    var dictionary: UnsafeRawBufferPointer?
    /// An encrypted segment's cipher, owned by the file's ``SegmentFile/sealing`` (which outlives
    /// every reader of the extent); nil for a store that is not encrypted.
    var cipher: Unmanaged<FileCipher>?
    /// The key prefix the segment's header names, owned by the file (``SegmentFile/keyPrefixRecord``);
    /// nil for none.
    var keyPrefix: UnsafeRawPointer?

    init() {}

    init(_ file: SegmentFile) {
        guard let mapping = file.mapping else { return }
        start = mapping
        mappedLength = Int64(file.mappedLength)
        readableLength = min(file.writtenLength.load(ordering: .acquiring), mappedLength)
        dictionary = file.dictionary.loaded?.lz4.content
        cipher = file.sealing.map { Unmanaged.passUnretained($0.cipher) }
        keyPrefix = file.keyPrefixRecord
    }
}

/// One published copy of a ``SegmentTable``'s extents, in one allocation: a header (the id of the
/// first, their count) followed by the extents, each in a cache line of its own. A view of the raw
/// memory, which ``SegmentTable`` allocates, publishes and frees.
///
/// The writer stores the active segment's written length after every put; readers load the
/// extents of the segments their records are in, mostly sealed ones. Sharing a line, those loads
/// would each miss after every put (measured: a reader beside a writer at full speed did 0.53× the
/// gets it did alone, with 24-byte extents).
private struct ExtentList {
    private struct Header {
        var base: UInt32
        var count: Int
    }

    let raw: UnsafeMutableRawPointer

    init(_ raw: UnsafeMutableRawPointer) { self.raw = raw }

    var base: UInt32 { raw.assumingMemoryBound(to: Header.self).pointee.base }
    var count: Int { raw.assumingMemoryBound(to: Header.self).pointee.count }

    @inline(__always)
    func extent(_ position: Int) -> UnsafeMutablePointer<MappedExtent> {
        (raw + (Self.lineBytes &+ position &* Self.lineBytes)).assumingMemoryBound(to: MappedExtent.self)  // Safe: position < count.
    }

    private static let lineBytes = 64
    private static let startOffset = MemoryLayout<MappedExtent>.offset(of: \.start)!
    private static let mappedOffset = MemoryLayout<MappedExtent>.offset(of: \.mappedLength)!
    private static let readableOffset = MemoryLayout<MappedExtent>.offset(of: \.readableLength)!
    private static let dictionaryOffset = MemoryLayout<MappedExtent>.offset(of: \.dictionary)!
    private static let cipherOffset = MemoryLayout<MappedExtent>.offset(of: \.cipher)!
    private static let keyPrefixOffset = MemoryLayout<MappedExtent>.offset(of: \.keyPrefix)!

    // Each field on its own, never the extent whole: readers load the written length while the
    // writer stores it.

    @inline(__always)
    static func start(of extent: UnsafeMutablePointer<MappedExtent>) -> UnsafeRawPointer? {
        UnsafeRawPointer(extent).load(fromByteOffset: startOffset, as: UnsafeRawPointer?.self)
    }

    @inline(__always)
    static func mappedLength(of extent: UnsafeMutablePointer<MappedExtent>) -> Int64 {
        UnsafeRawPointer(extent).load(fromByteOffset: mappedOffset, as: Int64.self)
    }

    /// Never changes once published.
    @inline(__always)
    static func dictionary(of extent: UnsafeMutablePointer<MappedExtent>) -> UnsafeRawBufferPointer? {
        UnsafeRawPointer(extent).load(fromByteOffset: dictionaryOffset, as: UnsafeRawBufferPointer?.self)
    }

    /// Never changes once published.
    @inline(__always)
    static func cipher(of extent: UnsafeMutablePointer<MappedExtent>) -> Unmanaged<FileCipher>? {
        UnsafeRawPointer(extent).load(fromByteOffset: cipherOffset, as: Unmanaged<FileCipher>?.self)
    }

    /// Never changes once published.
    @inline(__always)
    static func keyPrefix(of extent: UnsafeMutablePointer<MappedExtent>) -> UnsafeRawPointer? {
        UnsafeRawPointer(extent).load(fromByteOffset: keyPrefixOffset, as: UnsafeRawPointer?.self)
    }

    /// The extent's written length, loaded after the writer's stores of the bytes it covers.
    @inline(__always)
    static func readableLength(of extent: UnsafeMutablePointer<MappedExtent>) -> Int64 {
        Int64(bitPattern: cask_load_word_acquire(UnsafeRawPointer(extent) + readableOffset))
    }

    static func setReadableLength(of extent: UnsafeMutablePointer<MappedExtent>, to length: Int64) {
        cask_store_word_release(UnsafeMutableRawPointer(extent) + readableOffset, UInt64(bitPattern: length))
    }

    static func allocate(base: UInt32, extents: [MappedExtent]) -> UnsafeMutableRawPointer {
        precondition(MemoryLayout<MappedExtent>.size <= lineBytes, "an extent fits its cache line")
        let raw = TableMemory.allocate(byteCount: (1 + extents.count) * lineBytes)
        raw.initializeMemory(as: Header.self, repeating: Header(base: base, count: extents.count), count: 1)
        for (position, extent) in extents.enumerated() {
            (raw + lineBytes + position * lineBytes).initializeMemory(as: MappedExtent.self, repeating: extent, count: 1)
        }
        return raw
    }

    static func deallocate(_ raw: UnsafeMutableRawPointer) {
        TableMemory.deallocate(raw)
    }
}
