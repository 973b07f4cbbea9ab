extension CaskStore {
    /// Calls `body` with every entry of the store — or of the keys that start with `prefix` — in
    /// storage order, like Bitcask's fold.
    ///
    /// ```swift
    /// try store.forEach(prefix: Array("drafts/ada/".utf8)) { key, value in total += value.count }
    /// ```
    ///
    /// **Which keys.** A snapshot of the index taken when the call starts: every key live at that
    /// moment (under `prefix`, and not expired), each visited once. A key written after the
    /// snapshot is not visited; a key whose record expires before its turn is skipped.
    ///
    /// **Which values.** Every value is read as ``get(_:)-(Collection<UInt8>)`` reads one: from a whole record
    /// whose checksum and key are verified, expanded from LZ4 — never torn, never another key's. It
    /// is the value the key had at the snapshot, read from the record the index pointed at then
    /// (records are never changed in place). One exception: when a compaction has retired that
    /// record's segment since the snapshot, the key is looked up again and its value at that moment
    /// is visited, or nothing if it has been deleted by then. So a key overwritten during the call
    /// shows its old or its new value, and a key deleted during the call may still be visited with
    /// its last value.
    ///
    /// **Threads.** Thread-safe, alongside reads, writes, deletes and compactions: the segment file
    /// being read is held, so a compaction retiring it cannot close it under the read. `body` runs
    /// on the calling thread with no store lock held: it may call the store, writes included.
    /// A `close()` during the call makes it throw ``CaskError/closed`` before the next entry.
    ///
    /// **Errors.** A damaged record throws ``CaskError/corruptRecord(path:offset:reason:)`` with its
    /// file and offset, after every entry before it was visited. An error thrown by `body` stops the
    /// iteration and is rethrown as it is; so is a `CaskError` from a store call inside `body`. For a
    /// `body` that throws errors of other types, the overload without typed throws takes it.
    ///
    /// **Cost.** Taking the snapshot is one pass over the index under the shared index lock (as long
    /// as ``keys(prefix:)`` holds it; writers wait meanwhile), then, without the lock, a radix sort by
    /// segment and offset: O(n) for n keys. It holds their keys plus 24 bytes each until the call
    /// returns (twice that while it is sorted).
    /// Then each record is read once, in file order: through the segment's memory mapping (no
    /// syscall, sequential page faults) or, with `Options.memoryMappedReads` off, by `pread` calls of
    /// up to 1 MiB spanning consecutive records. Records still in the write buffer (`.buffered`) are
    /// copied out of it. No allocation per entry: compressed values are expanded into one reused buffer.
    ///
    /// `key` and `value` are valid only during the call to `body`: copy what you keep.
    public func forEach(
        prefix: [UInt8] = [],
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(CaskError) -> Void
    ) throws(CaskError) {
        var scan = try EntryScan(store: self, prefix: prefix)
        while let visited = try scan.visitNext({ key, value, _ in Result { () throws(CaskError) in try body(key, value) } }) {
            try visited.get()
        }
    }

    /// As the `forEach(prefix:_:)` above, for a `body` that throws errors of its own: the first
    /// error, `body`'s or a ``CaskError`` from the store, stops the iteration and is rethrown as it
    /// is. Throwing is also how to stop early.
    public func forEach(
        prefix: [UInt8] = [],
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var scan = try EntryScan(store: self, prefix: prefix)
        while let visited = try scan.visitNext({ key, value, _ in Result { try body(key, value) } }) {
            try visited.get()
        }
    }

    /// The entries of the store (or of the keys under `prefix`) one at a time, each with its expiry:
    ///
    /// ```swift
    /// var entries = try store.entries()
    /// while let entry = try entries.next() { try export(entry) }
    /// ```
    ///
    /// The same snapshot, order, values and errors as `forEach(prefix:_:)`; each entry's key and
    /// value are copied into arrays (two allocations per entry). The snapshot is taken here. While
    /// the iterator lives it holds the snapshot and the segment file it is reading, whose disk space
    /// a compaction then cannot give back yet: let it go when done.
    public func entries(prefix: [UInt8] = []) throws(CaskError) -> EntryIterator {
        EntryIterator(scan: try EntryScan(store: self, prefix: prefix))
    }

    /// The cursor ``entries(prefix:)`` returns. Not an `IteratorProtocol`, whose `next()` cannot
    /// throw; not thread-safe (use it from one thread at a time).
    public struct EntryIterator: ~Copyable {
        var scan: EntryScan

        /// The next entry, or nil after the last. A damaged record throws; the call after that goes
        /// on with the entry after it.
        public mutating func next() throws(CaskError) -> Entry? {
            try scan.visitNext { key, value, expiresAt in
                Entry(key: Array(key), value: Array(value), expiresAtMilliseconds: expiresAt)
            }
        }
    }

    /// Segment `id`'s file, or nil when a compaction has retired it.
    fileprivate func segmentFile(_ id: UInt32) throws(CaskError) -> SegmentFile? {
        try state.read { (shared) throws(CaskError) -> SegmentFile? in
            if shared.closed { throw CaskError.closed }
            return shared.segments[id]
        }
    }
}

/// What `CaskStore.forEach(prefix:_:)` and ``CaskStore/EntryIterator`` run on: a snapshot of the
/// index in storage order, and the reading of its entries one after another. Not thread-safe;
/// owned by one iteration.
struct EntryScan: ~Copyable {
    /// One key of the snapshot: where its record was, and its key in `keys`.
    private struct Item {
        var location: RecordLocation
        var keyLength: UInt32
        var keyStart: Int

        var storageOrder: UInt64 { UInt64(location.segmentID) << 32 | UInt64(location.offset) }
    }

    /// A `pread` of records reads ahead up to this many bytes of the same segment.
    private static let readAhead: Int64 = 1 << 20

    private let store: CaskStore
    /// Sorted by segment, then offset.
    private let items: [Item]
    /// The snapshot's keys, back to back in the order of `items`. Never changed after `init`, so
    /// views of it stay valid.
    private let keys: ByteBuffer
    private var next = 0
    /// The segment of the entries being read, and its file, held meanwhile (nil: retired since the
    /// snapshot). `UInt32.max` before the first: segment ids stop below it.
    private var segmentID = UInt32.max
    private var segmentFile: SegmentFile?
    /// Bytes read with `pread`, or copied out of the write buffer, and where they come from
    /// (`windowSegment` nil: the write buffer, not to be reused).
    private var window = ByteBuffer(capacity: 0)
    private var windowSegment: UInt32?
    private var windowStart: Int64 = 0
    /// The expanded value of the current entry, when it is compressed.
    private var value = ByteBuffer(capacity: 0)

    /// Takes the snapshot: under the index lock, the location and key of every live key under
    /// `prefix` that has not expired; then sorts it into storage order.
    init(store: CaskStore, prefix: [UInt8]) throws(CaskError) {
        var items: [Item] = []
        var keys = ByteBuffer(capacity: 0)
        try store.state.read { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed }
            if prefix.isEmpty {
                items.reserveCapacity(shared.index.count)
                keys.reserve(shared.index.totalKeyBytes)
            }
            let now = CaskStore.nowMilliseconds()
            shared.index.forEach { key, location in
                guard key.count >= prefix.count && key.prefix(prefix.count).elementsEqual(prefix) else { return }
                guard shared.expiries.isEmpty || !shared.expiries.isExpired(key, now: now) else { return }
                items.append(Item(location: location, keyLength: UInt32(key.count), keyStart: keys.count))
                keys.append(key)
            }
        }
        Self.sortIntoStorageOrder(&items)
        // The keys in the same order, so that reading them along with the records is sequential too
        // (in the index's order, every key compared would be a cache miss).
        var sortedKeys = ByteBuffer(capacity: keys.count)
        keys.withUnsafeBytes { keys in
            for index in items.indices {
                let start = items[index].keyStart
                items[index].keyStart = sortedKeys.count
                sortedKeys.append(UnsafeRawBufferPointer(rebasing: keys[start..<(start + Int(items[index].keyLength))]))
            }
        }
        self.store = store
        self.items = items
        self.keys = sortedKeys
    }

    /// Sorts `items` by ``Item/storageOrder``: a least-significant-digit radix sort, a byte at a
    /// time, skipping the bytes every item shares (most of the segment id's). O(n): at a million
    /// keys it takes a fraction of what comparison sorting took.
    private static func sortIntoStorageOrder(_ items: inout [Item]) {
        guard items.count > 1 else { return }
        // One pass counts every byte position at once.
        var counts = [Int](repeating: 0, count: 8 << 8)
        for item in items {
            let order = item.storageOrder
            for byte in 0..<8 { counts[byte << 8 | Int(truncatingIfNeeded: order >> UInt64(byte * 8)) & 0xFF] += 1 }
        }
        let first = items[0].storageOrder
        var scratch = items
        for byte in 0..<8 {
            let shift = UInt64(byte * 8)
            guard counts[byte << 8 | Int(truncatingIfNeeded: first >> shift) & 0xFF] < items.count else { continue }
            var next = [Int](repeating: 0, count: 256)
            var position = 0
            for digit in 0..<256 {
                next[digit] = position
                position += counts[byte << 8 | digit]
            }
            for item in items {
                let digit = Int(truncatingIfNeeded: item.storageOrder >> shift) & 0xFF
                scratch[next[digit]] = item
                next[digit] += 1
            }
            swap(&items, &scratch)
        }
    }

    /// Reads the next entry and returns what `body` makes of its key, value and expiry (views valid
    /// only during the call); nil when there are no more. Skips entries that expired, and keys
    /// deleted since the snapshot whose segment a compaction retired meanwhile.
    mutating func visitNext<R>(
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ expiresAt: UInt64?) -> R
    ) throws(CaskError) -> R? {
        while next < items.count {
            if store.isClosed.load(ordering: .relaxed) { throw CaskError.closed }
            let index = next
            let item = items[index]
            next += 1
            if item.location.segmentID != segmentID {
                segmentFile = nil  // let a retired segment go before holding the next
                let file = try store.segmentFile(item.location.segmentID)
                segmentID = item.location.segmentID
                segmentFile = file
            }
            let key = keyBytes(item)
            if let file = segmentFile {
                if let result = try visit(item.location, in: file, key: key, readAheadFrom: index, body) { return result }
            } else if let (location, file) = try store.locate(key: key) {
                // A compaction retired the segment since the snapshot: the record has moved, or the
                // key has been written since. Read what the index holds now, as `get` would.
                if let result = try visit(location, in: file, key: key, readAheadFrom: nil, body) { return result }
            }
        }
        return nil
    }

    /// Validates the record of `key` at `location` and calls `body` with it; nil when it has expired.
    private mutating func visit<R>(
        _ location: RecordLocation, in file: SegmentFile, key: UnsafeRawBufferPointer, readAheadFrom index: Int?,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UInt64?) -> R
    ) throws(CaskError) -> R? {
        let record = try recordBytes(location, in: file, readAheadFrom: index)
        guard let valid = try CaskStore.validateRecord(record, key: key, file: file, offset: location.offset) else { return nil }
        guard valid.header.isCompressed else { return body(valid.key, valid.payload, valid.header.expiresAt) }
        let length = valid.header.valueLength
        value.count = 0
        value.reserve(length)
        try value.withUnsafeMutableCapacity { (space) throws(CaskError) in
            let destination = UnsafeMutableRawBufferPointer(rebasing: space[0..<length])
            try CaskStore.expand(valid, into: destination, file: file, offset: location.offset)
        }
        value.count = length
        return value.withUnsafeBytes { body(valid.key, $0, valid.header.expiresAt) }
    }

    /// The bytes of the record at `location` of `file`, valid until the next call: mapped, copied
    /// out of the write buffer, or read with `pread` — when the location is `items[index]`'s, together
    /// with the records after it (``readAheadLength(from:upTo:)``).
    private mutating func recordBytes(
        _ location: RecordLocation, in file: SegmentFile, readAheadFrom index: Int?
    ) throws(CaskError) -> UnsafeRawBufferPointer {
        let start = Int64(location.offset)
        let end = start + Int64(location.length)
        if end > file.writtenLength.load(ordering: .acquiring) {
            // Copied under the writer mutex, so that `body` runs without it.
            let store = store
            let copied = store.withBufferedRecord(location, in: file) { record in
                window.count = 0
                window.append(record)
                return true
            }
            if copied == true {
                windowSegment = nil
                return window.withUnsafeBytes { $0 }
            }
        }
        let written = file.writtenLength.load(ordering: .acquiring)
        // Never touch mapped bytes the file may not have (that would be SIGBUS, not an error).
        if end <= written, let mapped = file.mappedBytes(location) { return mapped }
        if windowSegment != location.segmentID || start < windowStart || end > windowStart + Int64(window.count) {
            var length = end - start
            if let index, end <= written { length = readAheadLength(from: index, upTo: written) }
            let span = RecordLocation(segmentID: location.segmentID, offset: location.offset, length: UInt32(length))
            window.count = 0
            windowSegment = nil
            window.reserve(Int(length))
            try window.withUnsafeMutableCapacity { (space) throws(CaskError) in try file.read(span, into: space) }
            window.count = Int(length)
            windowSegment = location.segmentID
            windowStart = start
        }
        let offset = Int(start - windowStart)
        return window.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + Int(location.length))]) }
    }

    /// Bytes to `pread` from `items[index]`'s record on: through the last record after it in the
    /// same segment that ends within ``readAhead`` bytes and below `written` (at least the one record).
    /// Gaps between them (dead records) are read too, so the reads stay sequential.
    private func readAheadLength(from index: Int, upTo written: Int64) -> Int64 {
        let first = items[index].location
        let start = Int64(first.offset)
        var end = start + Int64(first.length)
        var following = index + 1
        while following < items.count, items[following].location.segmentID == first.segmentID {
            let location = items[following].location
            let itemEnd = Int64(location.offset) + Int64(location.length)
            guard itemEnd - start <= Self.readAhead, itemEnd <= written else { break }
            end = itemEnd
            following += 1
        }
        return end - start
    }

    /// `item`'s key, viewed in `keys` (which does not change after `init`).
    private func keyBytes(_ item: Item) -> UnsafeRawBufferPointer {
        keys.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[item.keyStart..<(item.keyStart + Int(item.keyLength))]) }
    }
}
