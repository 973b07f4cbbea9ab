extension CaskStore {
    /// Calls `body` with every entry in `range` (all of them by default), in key order (or
    /// descending), like Bitcask's fold with LevelDB's order.
    ///
    /// ```swift
    /// try store.forEach(in: .prefix("drafts/ada/")) { key, value in total += value.count }
    /// ```
    ///
    /// **Which keys.** As ``keys(in:after:limit:order:)`` lists them: read from the ordered index a
    /// leaf at a time without the index lock, each resuming where the one before ended. A key
    /// live for the whole call is visited exactly once; a key created or deleted during the call
    /// may be visited or not; none twice or out of order.
    /// Expired keys are skipped. `after` starts after that key (in `order`), for resuming.
    ///
    /// **Which values.** Every value is read as ``get(_:)-(Collection<UInt8>)`` reads one, when its
    /// entry is visited: from a whole record whose checksum and key are verified, expanded from
    /// LZ4 — never torn, never another key's. It is the value the key has then (a key deleted
    /// after its leaf was read is left out), as a get at that moment would return it.
    ///
    /// **Threads.** Thread-safe, alongside reads, writes, deletes and compactions, none of which
    /// waits for it: keys and values are read without the index lock (values as lock-free gets
    /// read them, through the segment table published to such readers). Where that cannot be done
    /// (a leaf the writer kept changing, a value not in a mapping), a key or a slice of 16 is read
    /// under the shared lock for microseconds, the segment files of a slice's records held until
    /// the next slice, so a compaction retiring one cannot close it under the read. `body`
    /// runs on the calling thread with no store lock held: it may call the store, writes included.
    /// A `close()` during the call makes it throw ``CaskError/closed(path:)`` before the next entry.
    ///
    /// **Errors.** A damaged record throws ``CaskError/corruptRecord(path:offset:reason:)`` with its
    /// file and offset, after every entry before it was visited. An error thrown by `body` stops the
    /// iteration and is rethrown as it is; so is a `CaskError` from a store call inside `body`. For a
    /// `body` that throws errors of other types, the overload without typed throws takes it.
    ///
    /// **Cost.** O(log n) per leaf of keys (about 55), then per entry one probe of the hash index
    /// and one record read, as a get makes them: through the segment's memory mapping (no syscall)
    /// or, with `Options.memoryMapping` off, a `pread` (the keys then read under the lock in slices
    /// of 16, reading on through the records after one in the same segment, up to 1 MiB, when
    /// they are next in the listing too). Records still in the
    /// write buffer (`.buffered`) are copied out of it. No allocation per entry: compressed values
    /// are expanded into one reused buffer. Records lie in the order they were written, so a
    /// listing reads them at random unless they were written in key order.
    ///
    /// `key` and `value` are valid only during the call to `body`: copy what you keep.
    public func forEach(
        in range: KeyRange = .all, after: [UInt8]? = nil, order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(CaskError) -> Void
    ) throws(CaskError) {
        var scan = EntryScan(store: self, range: range, after: after, order: order)
        while let visited = try scan.visitNext({ key, value, _ in Result { () throws(CaskError) in try body(key, value) } }) {
            try visited.get()
        }
    }

    /// As the `forEach(in:after:order:_:)` above, for a `body` that throws errors of its own: the
    /// first error, `body`'s or a ``CaskError`` from the store, stops the iteration and is rethrown
    /// as it is. Throwing is also how to stop early.
    public func forEach(
        in range: KeyRange = .all, after: [UInt8]? = nil, order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var scan = EntryScan(store: self, range: range, after: after, order: order)
        while let visited = try scan.visitNext({ key, value, _ in Result { try body(key, value) } }) {
            try visited.get()
        }
    }

    /// `forEach(in: .prefix(prefix), …)`.
    public func forEach(
        prefix: [UInt8], order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(CaskError) -> Void
    ) throws(CaskError) {
        try forEach(in: .prefix(prefix), order: order, body)
    }

    /// `forEach(in: .prefix(prefix), …)`, for a `body` that throws errors of its own.
    public func forEach(
        prefix: [UInt8], order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try forEach(in: .prefix(prefix), order: order, body)
    }

    /// The entries in `range` one at a time, each with its expiry:
    ///
    /// ```swift
    /// var entries = try store.entries(in: .prefix("drafts/"))
    /// while let entry = try entries.next() { try export(entry) }
    /// ```
    ///
    /// The same keys, order, values and errors as `forEach(in:after:order:_:)`; each entry's key
    /// and value are copied into arrays (two allocations per entry). While the iterator lives it
    /// holds the segment files of the slice it is reading (at most 16), whose disk space a
    /// compaction then cannot give back yet: let it go when done.
    public func entries(in range: KeyRange = .all, after: [UInt8]? = nil, order: KeyOrder = .ascending) throws(CaskError) -> EntryIterator {
        if isClosed.load(ordering: .relaxed) { throw CaskError.closed(path: directory) }
        return EntryIterator(scan: EntryScan(store: self, range: range, after: after, order: order))
    }

    /// `entries(in: .prefix(prefix), …)`.
    public func entries(prefix: [UInt8], order: KeyOrder = .ascending) throws(CaskError) -> EntryIterator {
        try entries(in: .prefix(prefix), order: order)
    }

    /// The cursor ``entries(in:after:order:)`` returns. Not an `IteratorProtocol`, whose `next()`
    /// cannot throw; not thread-safe (use it from one thread at a time).
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
}

/// What `CaskStore.forEach(in:after:order:_:)` and ``CaskStore/EntryIterator`` run on: a walk of
/// the ordered index in slices (``KeyRangeCursor``), each slice's keys copied out without the lock
/// and each value read as a lock-free get reads it (or, for a slice read under the lock, its keys
/// and locations copied out under it and their records read one after another without it). Not
/// thread-safe; owned by one iteration.
struct EntryScan: ~Copyable {
    /// One key of the current slice: where its record was, and its key in `keys`.
    private struct Item {
        var location: RecordLocation
        var keyLength: UInt32
        var keyStart: Int
        /// Its segment's file in `files`.
        var file: Int
    }

    /// A `pread` of records reads ahead up to this many bytes of the same segment.
    private static let readAhead: Int64 = 1 << 20

    private let store: CaskStore
    private var cursor: KeyRangeCursor
    /// The current slice, in listing order.
    private var items: [Item] = []
    /// The slice's keys, back to back in the order of `items`. Changed only when the next slice is
    /// read, after every item of this one was visited, so views of it stay valid meanwhile.
    private var keys = ByteBuffer(capacity: 1024)
    private var next = 0
    /// The files of the slice's segments, looked up with its locations under the same lock and
    /// held until the next slice: a compaction that retires one meanwhile cannot close it under
    /// the read, and the reads take no lock per entry. (They took the shared lock once per entry
    /// whose segment differed from the one before — nearly every entry of a store written at
    /// random — and a put waiting beside such a listing had a p99 of 6–8 µs, against 1 µs alone.)
    private var files: [SegmentFile?] = []
    /// The segment ids of `files`.
    private var fileIDs: [UInt32] = []
    /// Bytes read with `pread`, or copied out of the write buffer, and where they come from
    /// (`windowSegment` nil: the write buffer, not to be reused).
    private var window = ByteBuffer(capacity: 0)
    private var windowSegment: UInt32?
    private var windowStart: Int64 = 0
    /// The expanded value of the current entry, when it is compressed; the value of an entry read
    /// without the lock.
    private var value = ByteBuffer(capacity: 0)
    /// A sealed record's key and payload, opened (an encrypted store's).
    private var plain = ByteBuffer(capacity: 0)
    /// A slice listed without the index lock: its keys are in `keys`, each ending at an entry here,
    /// and their values are read as gets without the lock read them (``visitUnlocked(_:_:)``).
    private var unlockedEnds: [Int] = []
    private var nextUnlocked = 0
    /// Room for a value read without the lock at first; it grows to the largest value met.
    private static let initialValueRoom = 4096
    /// How far ahead of the entry being read a listing with values asks for the next entries'
    /// index lines, and then for their records (once those lines are in): the misses of about
    /// four entries overlap instead of coming one after another. Within a slice only, so not for
    /// a slice's first few entries.
    private static let indexPrefetchDistance = 8
    private static let recordPrefetchDistance = 4

    init(store: CaskStore, range: KeyRange, after: [UInt8]?, order: KeyOrder) {
        self.store = store
        cursor = KeyRangeCursor(range, after: after, order: order)
        items.reserveCapacity(CaskStore.locatingSlice)
    }

    /// Reads the next slice's keys and locations (expired keys left out) into `items` and `keys`,
    /// and their segments' files into `files`.
    private static func readSlice(
        _ cursor: inout KeyRangeCursor, _ items: inout [Item], _ keys: inout ByteBuffer, _ files: inout [SegmentFile?],
        _ fileIDs: inout [UInt32], store: CaskStore
    ) throws(CaskError) {
        items.removeAll(keepingCapacity: true)
        keys.count = 0
        files.removeAll(keepingCapacity: true)  // lets the last slice's segments go before holding the next
        fileIDs.removeAll(keepingCapacity: true)
        let now = CaskStore.nowMilliseconds()
        try cursor.nextSlice(of: store, budget: CaskStore.locatingSlice, withLocations: true) { shared, key, location in
            guard shared.expiries.isEmpty || !shared.expiries.isExpired(key, now: now) else { return }
            let location = location!
            // A slice is at most 16 entries: a search of the segments seen so far beats a dictionary.
            var file = fileIDs.lastIndex(of: location.segmentID) ?? -1
            if file < 0 {
                file = fileIDs.count
                fileIDs.append(location.segmentID)
                files.append(shared.segments[location.segmentID])
            }
            items.append(Item(location: location, keyLength: UInt32(key.count), keyStart: keys.count, file: file))
            keys.append(key)
        }
    }

    /// Reads the next entry and returns what `body` makes of its key, value and expiry (views valid
    /// only during the call); nil when there are no more. Skips entries that expired.
    mutating func visitNext<R>(
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ expiresAt: UInt64?) -> R
    ) throws(CaskError) -> R? {
        while true {
            if store.isClosed.load(ordering: .relaxed) { throw CaskError.closed(path: store.directory) }
            if nextUnlocked < unlockedEnds.count {
                let key = unlockedKey(nextUnlocked)!
                let ahead = CaskStore.ReadAhead(
                    index: unlockedKey(nextUnlocked + Self.indexPrefetchDistance), record: unlockedKey(nextUnlocked + Self.recordPrefetchDistance))
                nextUnlocked += 1
                if let result = try visitUnlocked(key, ahead: ahead, body) { return result }
                continue
            }
            if next == items.count {
                if cursor.finished { break }
                items.removeAll(keepingCapacity: true)
                files.removeAll(keepingCapacity: true)  // lets the last slice's segments go
                fileIDs.removeAll(keepingCapacity: true)
                keys.count = 0
                unlockedEnds.removeAll(keepingCapacity: true)
                nextUnlocked = 0
                next = 0
                // Without mappings every value is a `pread`: the slices under the lock read the
                // records that follow one another in a segment together.
                if store.options.memoryMapping, try cursor.nextKeysWithoutLock(
                    of: store, budget: CaskStore.listingSlice, keys: &keys, ends: &unlockedEnds, expiriesAllowed: true
                ) {
                    // The first entries' lines, which no read before theirs asks for.
                    for n in 0..<min(Self.indexPrefetchDistance, unlockedEnds.count) {
                        store.prefetchWithoutLock(CaskStore.ReadAhead(index: unlockedKey(n), record: nil))
                    }
                    continue
                }
                try Self.readSlice(&cursor, &items, &keys, &files, &fileIDs, store: store)
                continue
            }
            let index = next
            let item = items[index]
            next += 1
            let key = keyBytes(item)
            // Under one lock the index points only into segments the store holds (a compaction adds
            // its outputs before it moves keys to them, and retires its inputs after); a get of
            // a key whose segment is missing would find nothing either.
            guard let file = files[item.file] else { continue }
            if let result = try visit(item.location, in: file, key: key, readAheadFrom: index, body) { return result }
        }
        return nil
    }

    /// The `n`th key of the slice listed without the lock, nil past its end; a view into `keys`,
    /// valid until the next slice.
    private func unlockedKey(_ n: Int) -> UnsafeRawBufferPointer? {
        guard n < unlockedEnds.count else { return nil }
        let start = n == 0 ? 0 : unlockedEnds[n - 1]
        return keys.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[start..<unlockedEnds[n]]) }
    }

    /// Reads the latest value of `key` (listed without the lock) as a get does: without the lock
    /// when it can (``CaskStore/copyEntryWithoutLock(key:into:expiresAt:)``), else through the full
    /// path. Nil when the key has no value now (deleted since it was listed, or expired).
    private mutating func visitUnlocked<R>(
        _ key: UnsafeRawBufferPointer, ahead: CaskStore.ReadAhead, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UInt64?) -> R
    ) throws(CaskError) -> R? {
        value.count = 0
        if value.capacity < Self.initialValueRoom { value.reserve(Self.initialValueRoom) }
        var expiresAt: UInt64?
        var found = value.withUnsafeMutableCapacity { space in
            store.copyEntryWithoutLock(key: key, into: space, expiresAt: &expiresAt, prefetching: ahead)
        }
        if case .tooLarge(let length) = found {
            value.reserve(length)
            found = value.withUnsafeMutableCapacity { space in store.copyEntryWithoutLock(key: key, into: space, expiresAt: &expiresAt) }
        }
        switch found {
        case .absent:
            return nil
        case .copied(let count):
            value.count = count
            return value.withUnsafeBytes { body(key, $0, expiresAt) }
        case .tooLarge, .fallBack:
            return try store.withRecord(key: key) { (valid, file, offset) throws(CaskError) in
                try CaskStore.withValueBytes(of: valid, file: file, offset: offset) { body(valid.key, $0, valid.header.expiresAt) }
            }
        }
    }

    /// Validates the record of `key` at `location` and calls `body` with it; nil when it has expired.
    private mutating func visit<R>(
        _ location: RecordLocation, in file: SegmentFile, key: UnsafeRawBufferPointer, readAheadFrom index: Int,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UInt64?) -> R
    ) throws(CaskError) -> R? {
        let record = try recordBytes(location, in: file, readAheadFrom: index)
        if file.sealing != nil && plain.capacity < record.count { plain.reserve(record.count) }
        let opened = try plain.withUnsafeMutableCapacity { (space) throws(CaskError) in
            try CaskStore.validateRecord(record, key: key, file: file, offset: location.offset, plain: space)
        }
        guard let valid = opened else { return nil }
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
    /// out of the write buffer, or read with `pread` together
    /// with the records after it (``readAheadLength(from:upTo:)``).
    private mutating func recordBytes(
        _ location: RecordLocation, in file: SegmentFile, readAheadFrom index: Int
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
            if end <= written { length = readAheadLength(from: index, upTo: written) }
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

    /// Bytes to `pread` from `items[index]`'s record on: through the last of the records listed
    /// after it that follow it in the same segment, in file order, ending within ``readAhead``
    /// bytes and below `written` (at least the one record). Gaps between them (dead records) are
    /// read too, so the reads stay sequential. Records written in key order are read this way in
    /// a few large reads; records written at random, one by one.
    private func readAheadLength(from index: Int, upTo written: Int64) -> Int64 {
        let first = items[index].location
        let start = Int64(first.offset)
        var end = start + Int64(first.length)
        var following = index + 1
        while following < items.count, items[following].location.segmentID == first.segmentID,
              Int64(items[following].location.offset) >= end {
            let location = items[following].location
            let itemEnd = Int64(location.offset) + Int64(location.length)
            guard itemEnd - start <= Self.readAhead, itemEnd <= written else { break }
            end = itemEnd
            following += 1
        }
        return end - start
    }

    /// `item`'s key, viewed in `keys` (which does not change until the next slice).
    private func keyBytes(_ item: Item) -> UnsafeRawBufferPointer {
        keys.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[item.keyStart..<(item.keyStart + Int(item.keyLength))]) }
    }
}
