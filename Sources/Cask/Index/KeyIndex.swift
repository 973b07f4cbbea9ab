/// The in-memory hash index: key bytes -> location of the key's latest record.
///
/// Layout, chosen for memory per key (the target is at most 32 bytes beyond the key bytes):
/// - `control`: one byte per slot: 0 empty, 1 deleted, 0x80 | 7 hash bits for a full slot.
///   Probing reads these bytes sequentially, so a miss rarely touches anything else.
/// - `slots`: a `UInt32` entry number per slot. Open addressing, linear probing, load <= 3/4.
///   (At 7/8, the long probes of linear probing near full load met other keys' tags often enough
///   to cost `fillrandom` 7%: each such meeting reads an entry and its key, two cache misses.)
/// - `entries`: 16-byte entries (arena position of the key, segment, offset, length) in
///   fixed-size chunks, so growing never copies them and the only slack is in the last chunk.
/// - `arena`: the key bytes, each prefixed by its length as a varint, in 1 MiB chunks.
///
/// Per key: 16 (entry) + 5 / load (control and slot, load 0.375 to 0.75) + 1 (length prefix) + chunk
/// slack, i.e. 24 to 31 bytes from about 100,000 keys on.
/// Sequence numbers are kept only while recovery needs them (``beginRecovery()``).
///
/// Not thread-safe: the store guards it with a reader-writer lock. Its stored properties opt out of
/// dynamic exclusivity checks (`@exclusivity(unchecked)`): that lock already rules out overlapping
/// access, and the checks cost about a tenth of a put. Complexity: expected O(1 + key
/// length) per operation; growth rehashes in O(n) without touching entries or keys.
package final class KeyIndex {
    private struct Entry {
        /// Position of the key in the arena: chunk << 18 | offset. For a free entry, the next free entry.
        var keyPosition: UInt32
        /// `UInt32.max` marks a free entry (segment ids stop below it).
        var segmentID: UInt32
        var offset: UInt32
        /// The record length; the top bit marks a tombstone kept during recovery.
        var length: UInt32
    }

    private static let tombstoneBit: UInt32 = 1 << 31
    /// Chunk sizes bound the slack (the unused end of the last chunk) to a few bytes per key from
    /// about 100,000 keys on: 16K entries (256 KiB) and 256 KiB of keys (a key is at most 64 KiB).
    private static let entryChunkShift = 14
    private static let entriesPerChunk = 1 << entryChunkShift
    private static let arenaChunkShift = 18
    private static let arenaChunkSize = 1 << arenaChunkShift
    private static let arenaOffsetMask = UInt32(arenaChunkSize - 1)
    private static let empty: UInt8 = 0, deleted: UInt8 = 1

    private let hasher: KeyHasher
    @exclusivity(unchecked) private var control: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var slots: UnsafeMutablePointer<UInt32>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private var usedSlots = 0  // full + deleted
    @exclusivity(unchecked) package private(set) var count = 0
    @exclusivity(unchecked) private var tombstones = 0

    @exclusivity(unchecked) private var entryChunks: [UnsafeMutablePointer<Entry>] = []
    @exclusivity(unchecked) private var entryCount = 0  // entries handed out, free ones included
    @exclusivity(unchecked) private var freeEntry: UInt32 = .max

    @exclusivity(unchecked) private var arenaChunks: [UnsafeMutableRawPointer] = []
    @exclusivity(unchecked) private var arenaUsed = 0  // bytes used in the last chunk
    /// Chunk 0 of the entries and of the arena starts small and grows (by copying) to full size,
    /// so that a store with a handful of keys does not pay for a full chunk of each.
    @exclusivity(unchecked) private var entryChunk0Capacity = 0
    @exclusivity(unchecked) private var arenaChunk0Capacity = 0
    @exclusivity(unchecked) private var arenaGarbage = 0
    @exclusivity(unchecked) private var arenaLive = 0

    @exclusivity(unchecked) private var seqChunks: [UnsafeMutablePointer<UInt64>]?

    package init(hasher: KeyHasher = KeyHasher(), minimumCapacity: Int = 1024) {
        self.hasher = hasher
        var capacity = 16
        while capacity * 4 < minimumCapacity * 5 { capacity *= 2 }
        self.capacity = capacity
        control = .allocate(capacity: capacity)
        control.initialize(repeating: Self.empty, count: capacity)
        slots = .allocate(capacity: capacity)
    }

    deinit {
        control.deallocate()
        slots.deallocate()
        entryChunks.forEach { $0.deallocate() }
        arenaChunks.forEach { $0.deallocate() }
        seqChunks?.forEach { $0.deallocate() }
    }

    /// Bytes of memory the index holds (tables, entries, arena), for the per-key figure.
    package var memoryBytes: Int {
        capacity * 5 + entryCapacity * MemoryLayout<Entry>.stride
            + (arenaChunks.count <= 1 ? arenaChunk0Capacity : arenaChunks.count * Self.arenaChunkSize)
            + (seqChunks?.count ?? 0) * Self.entriesPerChunk * 8
    }

    /// Entries that fit in the allocated chunks.
    private var entryCapacity: Int {
        entryChunks.count <= 1 ? entryChunk0Capacity : entryChunks.count * Self.entriesPerChunk
    }

    /// Key bytes held (without length prefixes or garbage).
    @exclusivity(unchecked) package private(set) var totalKeyBytes = 0

    // MARK: Lookup and update

    package func lookup(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key)) else { return nil }
        let entry = entryPointer(slots[slot]).pointee
        guard entry.length & Self.tombstoneBit == 0 else { return nil }
        return RecordLocation(segmentID: entry.segmentID, offset: entry.offset, length: entry.length)
    }

    /// The location of the first entry on `key`'s probe path whose hash tag matches, without
    /// reading the stored key; nil means `key` is absent.
    ///
    /// Saves the dependent cache miss of the key's bytes in the arena for a caller that checks the
    /// key anyway: a record carries its key, so a get compares the key in the record it reads and
    /// falls back to ``lookup(_:)`` when it differs (an entry of another key with the same 7-bit
    /// tag came first on the path: under 1% of lookups at the table's load).
    package func probableLocation(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key), comparingKeys: false) else { return nil }
        let entry = entryPointer(slots[slot]).pointee
        // A tombstone exists only while recovery runs; let the exact lookup judge it.
        guard entry.length & Self.tombstoneBit == 0 else { return lookup(key) }
        return RecordLocation(segmentID: entry.segmentID, offset: entry.offset, length: entry.length)
    }

    /// Starts loading the cache lines an ``upsert(_:_:)`` of `key` reads first (its control byte and
    /// slot), so that the misses overlap whatever the caller does before the upsert.
    ///
    /// Needs no lock against readers; the caller must rule out a concurrent upsert (the table moves
    /// only when an upsert grows it). A prefetch never faults.
    package func prefetch(_ key: UnsafeRawBufferPointer) {
        let slot = Int(truncatingIfNeeded: hasher.hash(key)) & (capacity - 1)
        cask_prefetch_for_write(control + slot)
        cask_prefetch_for_write(slots + slot)
    }

    /// Points `key` at `location`; returns the location it replaced, if any.
    @discardableResult
    package func upsert(_ key: UnsafeRawBufferPointer, _ location: RecordLocation) -> RecordLocation? {
        let hash = hasher.hash(key)
        if let slot = find(key, hash: hash) {
            let entry = entryPointer(slots[slot])
            let old = entry.pointee
            entry.pointee.segmentID = location.segmentID
            entry.pointee.offset = location.offset
            entry.pointee.length = location.length
            if old.length & Self.tombstoneBit != 0 {
                tombstones -= 1
                count += 1
                return nil
            }
            return RecordLocation(segmentID: old.segmentID, offset: old.offset, length: old.length)
        }
        insertNew(key, hash: hash, location: location)
        count += 1
        return nil
    }

    /// Removes `key`; returns the location it had, if any.
    @discardableResult
    package func remove(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key)) else { return nil }
        let number = slots[slot]
        let old = entryPointer(number).pointee
        let wasTombstone = old.length & Self.tombstoneBit != 0
        removeSlot(slot)
        if wasTombstone { tombstones -= 1; return nil }
        count -= 1
        return RecordLocation(segmentID: old.segmentID, offset: old.offset, length: old.length)
    }

    /// Removes `key` only if it still points at `expected` (compare-and-delete).
    @discardableResult
    package func remove(_ key: UnsafeRawBufferPointer, ifAt expected: RecordLocation) -> Bool {
        guard let slot = find(key, hash: hasher.hash(key)) else { return false }
        let entry = entryPointer(slots[slot]).pointee
        guard entry.length & Self.tombstoneBit == 0,
              RecordLocation(segmentID: entry.segmentID, offset: entry.offset, length: entry.length) == expected
        else { return false }
        removeSlot(slot)
        count -= 1
        return true
    }

    /// Replaces the location of `key` only if it is still `expected` (compare-and-set).
    @discardableResult
    package func replace(_ key: UnsafeRawBufferPointer, expected: RecordLocation, with location: RecordLocation) -> Bool {
        guard let slot = find(key, hash: hasher.hash(key)) else { return false }
        let entry = entryPointer(slots[slot])
        guard entry.pointee.length & Self.tombstoneBit == 0,
              RecordLocation(segmentID: entry.pointee.segmentID, offset: entry.pointee.offset, length: entry.pointee.length) == expected
        else { return false }
        entry.pointee.segmentID = location.segmentID
        entry.pointee.offset = location.offset
        entry.pointee.length = location.length
        return true
    }

    /// Calls `body` with every live key and its location, in no particular order.
    /// The key pointer is valid only during the call.
    package func forEach(_ body: (UnsafeRawBufferPointer, RecordLocation) throws -> Void) rethrows {
        // Walks the entries, not the slots: entries (and, mostly, their keys in the arena) lie in
        // insertion order, so the walk reads memory sequentially; through the slots every key
        // costs two cache misses. A free entry has segment id `UInt32.max`.
        for number in 0..<UInt32(entryCount) {
            let entry = entryPointer(number).pointee
            guard entry.segmentID != .max, entry.length & Self.tombstoneBit == 0 else { continue }
            try body(keyBytes(at: entry.keyPosition), RecordLocation(segmentID: entry.segmentID, offset: entry.offset, length: entry.length))
        }
    }

    // MARK: Recovery

    /// Starts recording sequence numbers so that ``recover(_:_:seq:isDelete:)`` can keep the newest
    /// version of each key regardless of the order records are seen in.
    package func beginRecovery() {
        if seqChunks == nil { seqChunks = [] }
    }

    /// Applies one record found by recovery: it wins only if its seq is higher than what is known,
    /// or equal and the record lies later in (segment id, offset) order — so the outcome does not
    /// depend on the order records are seen in, and a compaction (which moves live records to
    /// higher ids) cannot change it. A delete is remembered as a tombstone until ``endRecovery()``,
    /// so that an older put of the same key seen later cannot bring the key back.
    @discardableResult
    package func recover(_ key: UnsafeRawBufferPointer, _ location: RecordLocation, seq: UInt64, isDelete: Bool) -> RecoveryOutcome {
        precondition(seqChunks != nil, "beginRecovery() first")
        let hash = hasher.hash(key)
        let length = isDelete ? location.length | Self.tombstoneBit : location.length
        if let slot = find(key, hash: hash) {
            let number = slots[slot]
            let known = seqPointer(number)
            let entry = entryPointer(number)
            let old = entry.pointee
            guard seq > known.pointee
                || (seq == known.pointee && (location.segmentID, location.offset) > (old.segmentID, old.offset))
            else { return .superseded }
            let oldWasDelete = old.length & Self.tombstoneBit != 0
            entry.pointee.segmentID = location.segmentID
            entry.pointee.offset = location.offset
            entry.pointee.length = length
            known.pointee = seq
            switch (oldWasDelete, isDelete) {
            case (false, true): count -= 1; tombstones += 1
            case (true, false): count += 1; tombstones -= 1
            default: break
            }
            let oldLocation = RecordLocation(segmentID: old.segmentID, offset: old.offset, length: old.length & ~Self.tombstoneBit)
            return .replaced(oldLocation, wasDelete: oldWasDelete)
        }
        let number = insertNew(key, hash: hash, location: RecordLocation(segmentID: location.segmentID, offset: location.offset, length: length))
        seqPointer(number).pointee = seq
        if isDelete { tombstones += 1 } else { count += 1 }
        return .inserted
    }

    package enum RecoveryOutcome: Equatable {
        /// The key was new.
        case inserted
        /// The record is newer than what was known, which it replaced (a put or a delete).
        case replaced(RecordLocation, wasDelete: Bool)
        /// A newer record of the key was already known; this one is dead.
        case superseded
    }

    /// The locations of the tombstones recovery kept (deletes newer than every put of their key).
    package func forEachTombstone(_ body: (RecordLocation) -> Void) {
        for slot in 0..<capacity where control[slot] >= 0x80 {
            let entry = entryPointer(slots[slot]).pointee
            if entry.length & Self.tombstoneBit != 0 {
                body(RecordLocation(segmentID: entry.segmentID, offset: entry.offset, length: entry.length & ~Self.tombstoneBit))
            }
        }
    }

    /// Drops the tombstones and the sequence numbers kept for recovery.
    package func endRecovery() {
        if tombstones > 0 {
            for slot in 0..<capacity where control[slot] >= 0x80 {
                if entryPointer(slots[slot]).pointee.length & Self.tombstoneBit != 0 { removeSlot(slot) }
            }
            tombstones = 0
        }
        seqChunks?.forEach { $0.deallocate() }
        seqChunks = nil
        compactArenaIfWasteful()
    }

    // MARK: Internals

    @inline(__always)
    private func entryPointer(_ number: UInt32) -> UnsafeMutablePointer<Entry> {
        let number = Int(number)
        return entryChunks[number >> Self.entryChunkShift] + (number & (Self.entriesPerChunk - 1))
    }

    @inline(__always)
    private func seqPointer(_ number: UInt32) -> UnsafeMutablePointer<UInt64> {
        let number = Int(number)
        while seqChunks!.count <= number >> Self.entryChunkShift {
            let chunk = UnsafeMutablePointer<UInt64>.allocate(capacity: Self.entriesPerChunk)
            chunk.initialize(repeating: 0, count: Self.entriesPerChunk)
            seqChunks!.append(chunk)
        }
        return seqChunks![number >> Self.entryChunkShift] + (number & (Self.entriesPerChunk - 1))
    }

    @inline(__always)
    private func keyBytes(at position: UInt32) -> UnsafeRawBufferPointer {
        let chunk = arenaChunks[Int(position >> Self.arenaChunkShift)]
        let start = Int(position & Self.arenaOffsetMask)
        // The length varint was written whole by `storeKey`, so reading it stays inside the chunk.
        let header = UnsafeRawBufferPointer(start: chunk + start, count: 3)
        var offset = 0
        let length = Int(Varint.read(header, at: &offset)!)
        return UnsafeRawBufferPointer(start: chunk + start + offset, count: length)
    }

    @inline(__always)
    private static func tag(_ hash: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: hash >> 57) | 0x80 }

    /// The slot holding `key`, if present; without `comparingKeys`, the first slot on its probe
    /// path whose tag matches (see ``probableLocation(_:)``).
    @inline(__always)
    private func find(_ key: UnsafeRawBufferPointer, hash: UInt64, comparingKeys: Bool = true) -> Int? {
        let mask = capacity - 1
        let tag = Self.tag(hash)
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let byte = control[slot]
            if byte == Self.empty { return nil }
            if byte == tag {
                guard comparingKeys else { return slot }
                let entry = entryPointer(slots[slot])
                let stored = keyBytes(at: entry.pointee.keyPosition)
                if stored.hasSameBytes(as: key) { return slot }
            }
            slot = (slot + 1) & mask
        }
    }

    @discardableResult
    private func insertNew(_ key: UnsafeRawBufferPointer, hash: UInt64, location: RecordLocation) -> UInt32 {
        if (usedSlots + 1) * 4 > capacity * 3 { resize(toHold: count + tombstones + 1) }
        let number = allocateEntry()
        entryPointer(number).pointee = Entry(
            keyPosition: storeKey(key), segmentID: location.segmentID, offset: location.offset, length: location.length)
        let mask = capacity - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while control[slot] >= 0x80 { slot = (slot + 1) & mask }
        if control[slot] == Self.empty { usedSlots += 1 }
        control[slot] = Self.tag(hash)
        slots[slot] = number
        totalKeyBytes += key.count
        return number
    }

    private func removeSlot(_ slot: Int) {
        let number = slots[slot]
        let entry = entryPointer(number)
        let key = keyBytes(at: entry.pointee.keyPosition)
        totalKeyBytes -= key.count
        arenaGarbage += key.count + Varint.size(of: UInt64(key.count))
        arenaLive -= key.count + Varint.size(of: UInt64(key.count))
        entry.pointee = Entry(keyPosition: freeEntry, segmentID: .max, offset: 0, length: 0)
        freeEntry = number
        // If the next slot is empty, no probe sequence runs through this one: mark it empty.
        if control[(slot + 1) & (capacity - 1)] == Self.empty {
            control[slot] = Self.empty
            usedSlots -= 1
        } else {
            control[slot] = Self.deleted
        }
        if seqChunks == nil { compactArenaIfWasteful() }
    }

    private func allocateEntry() -> UInt32 {
        if freeEntry != .max {
            let number = freeEntry
            freeEntry = entryPointer(number).pointee.keyPosition
            return number
        }
        precondition(entryCount < Int(UInt32.max - 1), "the index holds at most 4,294,967,294 keys")
        if entryCount == entryCapacity {
            if entryChunks.isEmpty {
                entryChunks.append(.allocate(capacity: 256))
                entryChunk0Capacity = 256
            } else if entryChunk0Capacity < Self.entriesPerChunk {
                let grown = UnsafeMutablePointer<Entry>.allocate(capacity: entryChunk0Capacity * 2)
                grown.moveInitialize(from: entryChunks[0], count: entryCount)
                entryChunks[0].deallocate()
                entryChunks[0] = grown
                entryChunk0Capacity *= 2
            } else {
                entryChunks.append(.allocate(capacity: Self.entriesPerChunk))
            }
        }
        let number = UInt32(entryCount)
        entryCount += 1
        return number
    }

    private func storeKey(_ key: UnsafeRawBufferPointer) -> UInt32 {
        let needed = Varint.size(of: UInt64(key.count)) + key.count
        if arenaChunks.count == 1, arenaChunk0Capacity < Self.arenaChunkSize, arenaUsed + needed > arenaChunk0Capacity {
            var grownCapacity = arenaChunk0Capacity * 2
            while grownCapacity < arenaUsed + needed && grownCapacity < Self.arenaChunkSize { grownCapacity *= 2 }
            grownCapacity = min(grownCapacity, Self.arenaChunkSize)  // a second chunk comes only after this one is full size
            let grown = UnsafeMutableRawPointer.allocate(byteCount: grownCapacity, alignment: 8)
            grown.copyMemory(from: arenaChunks[0], byteCount: arenaUsed)
            arenaChunks[0].deallocate()
            arenaChunks[0] = grown
            arenaChunk0Capacity = grownCapacity
        }
        let lastCapacity = arenaChunks.count == 1 ? arenaChunk0Capacity : Self.arenaChunkSize
        if arenaChunks.isEmpty || arenaUsed + needed > lastCapacity {
            precondition(arenaChunks.count < 1 << (32 - Self.arenaChunkShift), "the index holds at most 4 GiB of keys")
            if arenaChunks.isEmpty {
                var initial = 4096
                while initial < needed { initial *= 2 }
                arenaChunk0Capacity = min(initial, Self.arenaChunkSize)
                arenaChunks.append(.allocate(byteCount: arenaChunk0Capacity, alignment: 8))
            } else {
                arenaChunks.append(.allocate(byteCount: Self.arenaChunkSize, alignment: 8))
            }
            arenaUsed = 0
        }
        let chunk = arenaChunks[arenaChunks.count - 1]
        let position = UInt32(arenaChunks.count - 1) << Self.arenaChunkShift | UInt32(arenaUsed)
        var used = Varint.write(UInt64(key.count), to: chunk + arenaUsed)
        if let base = key.baseAddress { (chunk + arenaUsed + used).copyMemory(from: base, byteCount: key.count) }
        used += key.count
        arenaUsed += used
        arenaLive += used
        return position
    }

    /// Makes room for `keys` keys in all without growing the table again.
    /// (A known count does not need the room to grow that `resize` leaves: the table is sized to
    /// hold `keys` at a load of at most 3/4, the most the table allows.)
    package func reserve(_ keys: Int) {
        if (keys + 1) * 4 > capacity * 3 { resize(toHold: keys, maximumLoad: 0.75) }
    }

    /// Grows the table until `keys` keys fill at most half of it (or rehashes in place, dropping
    /// deleted slots, when those are what fills it). Growing from 75% doubles (load 0.375), never
    /// quadruples.
    private func resize(toHold keys: Int, maximumLoad: Double = 0.5) {
        var newCapacity = capacity
        while Double(keys) > Double(newCapacity) * maximumLoad { newCapacity *= 2 }
        control.deallocate()
        slots.deallocate()
        control = .allocate(capacity: newCapacity)
        control.initialize(repeating: Self.empty, count: newCapacity)
        slots = .allocate(capacity: newCapacity)
        capacity = newCapacity
        usedSlots = 0
        let mask = newCapacity - 1
        // Walk the entries rather than the old slots: entries, and the keys in the arena, are in
        // insertion order, so rehashing reads memory sequentially instead of at random.
        for number in 0..<UInt32(entryCount) {
            let entry = entryPointer(number).pointee
            guard entry.segmentID != .max else { continue }  // a free entry
            let hash = hasher.hash(keyBytes(at: entry.keyPosition))
            var target = Int(truncatingIfNeeded: hash) & mask
            while control[target] != Self.empty { target = (target + 1) & mask }
            control[target] = Self.tag(hash)
            slots[target] = number
            usedSlots += 1
        }
    }

    /// Rewrites the arena when deleted keys waste more than half of it.
    private func compactArenaIfWasteful() {
        guard arenaGarbage > Self.arenaChunkSize, arenaGarbage > arenaLive else { return }
        let oldChunks = arenaChunks
        arenaChunks = []
        arenaUsed = 0
        arenaChunk0Capacity = 0
        arenaLive = 0
        arenaGarbage = 0
        for slot in 0..<capacity where control[slot] >= 0x80 {
            let entry = entryPointer(slots[slot])
            let position = entry.pointee.keyPosition
            let chunk = oldChunks[Int(position >> Self.arenaChunkShift)]
            let start = Int(position & Self.arenaOffsetMask)
            var offset = 0
            let header = UnsafeRawBufferPointer(start: chunk + start, count: 3)
            let length = Int(Varint.read(header, at: &offset)!)
            entry.pointee.keyPosition = storeKey(UnsafeRawBufferPointer(start: chunk + start + offset, count: length))
        }
        oldChunks.forEach { $0.deallocate() }
    }
}

import CCaskCPU
