import Synchronization

/// The in-memory hash index: key bytes -> location of the key's latest record.
///
/// Layout, chosen so that a lookup costs one cache miss in the index and the index at most 32 bytes
/// per key beyond the key bytes:
/// - `control`: one byte per slot: 0 empty, 1 deleted, 0x80 | 7 hash bits for a full slot. Slots
///   form aligned groups of 8, and probing reads a group's 8 bytes at once, so a miss rarely touches
///   anything else. The array is small (1 to 1.7 bytes per key) and stays in the CPU's caches.
/// - `table`: one 16-byte entry per slot, in the slot itself: segment and offset (one word), arena
///   position of the key, length, and two more hash bits that a tag match is checked against before
///   the key is read. A group's entries are two cache lines, which a lookup starts loading while it probes the
///   group's control bytes, so the two misses overlap (the old layout, a slot holding the number of
///   an entry kept elsewhere, made them two misses one after the other).
/// - `arena`: the key bytes (``KeyArena``).
/// - `ordered`: the keys in byte order (``OrderedKeys``), for range and prefix walks; 12 bytes per
///   key at its leaves' fill, built when a walk first needs it (``buildOrderedView()``), then
///   updated when a key is created or deleted (an overwrite keeps its place); dropped when
///   recovery begins.
///
/// Probing is double hashing over groups: the hash picks a home group and a step, and the number of
/// groups is prime, so the path visits every group. A key is in the first group of its path that
/// had a free slot when it was inserted, which at the loads allowed (at most 7/8) is its home group
/// for all but a few percent of keys. Any number of groups works (the home group is the high word of
/// hash × groups), so growing sizes the table for a load of 0.6, about 1.46× from 7/8, not 2×. Per key
/// that is 17 / load (19.4 to 28.3) bytes plus 1 (length prefix) plus the last arena chunk's slack,
/// i.e. 20 to 30 bytes from about 200,000 keys on. Sequence numbers are kept only while recovery
/// needs them (``beginRecovery()``), 8 bytes per slot.
///
/// Thread-safety: the store guards it with a reader-writer lock, with two exceptions. Compaction's
/// ``switchLocation(_:from:to:)`` runs beside locked readers, storing an entry's segment-and-offset
/// word in one piece while lookups load it in one piece. And the `…WithoutLock` probes run beside
/// every update, on the table as last published (``SlotTable`` stores and loads the fields they
/// read atomically; a grown-out table is freed only after ``ReaderRegistry/waitForReaders()``).
/// Stored properties opt out of dynamic exclusivity checks (`@exclusivity(unchecked)`): the lock
/// already rules out overlapping access, and the checks cost about a tenth of a put. Complexity:
/// expected O(1 + key length) per operation; growth rehashes in O(n), reading each key once from
/// the arena.
package final class KeyIndex {
    private typealias Entry = SlotEntry

    private static let empty = SlotTable.empty, deleted = SlotTable.deleted
    private static let groupWidth = SlotTable.groupWidth
    /// Load after growing; ``maximumLoad`` is the most the table allows (full and deleted slots counted).
    private static let loadAfterGrowth = 0.6
    private static let maximumLoad = 0.875
    /// Below this many slots, recovery leaves the table as big as it made it.
    private static let shrinkableCapacity = 1 << 16
    /// Slots ahead of a sequential walk whose keys are prefetched from the arena.
    private static let walkPrefetchDistance = 16

    private let hasher: KeyHasher
    /// The table, as the index uses it under the store's lock.
    @exclusivity(unchecked) private var slots: SlotTable
    /// A copy of `slots` in memory of its own, for probes without the lock
    /// (``probableLocationWithoutLock(_:)``): replaced when the table is, and freed, with the table
    /// it describes, only after ``ReaderRegistry/waitForReaders()``.
    private let published: Atomic<UnsafeMutablePointer<SlotTable>>
    private let readers: ReaderRegistry
    private var control: UnsafeMutablePointer<UInt8> { slots.control }
    private var table: UnsafeMutablePointer<Entry> { slots.entries }
    private var capacity: Int { slots.capacity }
    @exclusivity(unchecked) private var usedSlots = 0  // full + deleted
    @exclusivity(unchecked) package private(set) var count = 0
    @exclusivity(unchecked) private var tombstones = 0

    @exclusivity(unchecked) private var arena = KeyArena()
    @exclusivity(unchecked) private var ordered = OrderedKeys()
    /// Whether the ordered view exists (and is kept up by every insert and removal): from the
    /// first ordered walk (``buildOrderedView()``) on, until recovery begins.
    @exclusivity(unchecked) private var maintainsOrder = false

    /// One sequence number per slot, while recovery runs.
    @exclusivity(unchecked) private var seqs: UnsafeMutablePointer<UInt64>?

    package init(hasher: KeyHasher = KeyHasher(), minimumCapacity: Int = 1024, readers: ReaderRegistry = .shared) {
        assert(MemoryLayout<Entry>.offset(of: \.place) == 0 && MemoryLayout<Entry>.offset(of: \.keyPosition) == Entry.keyPositionOffset
            && MemoryLayout<Entry>.offset(of: \.bits) == Entry.bitsOffset)
        self.hasher = hasher
        self.readers = readers
        slots = SlotTable(groups: Self.prime(atLeast: minimumCapacity * 8 / 7 / Self.groupWidth + 1))
        published = Atomic(Self.box(slots))
    }

    deinit {
        slots.deallocate()
        Self.unbox(published.load(ordering: .relaxed))
        seqs.map { TableMemory.deallocate($0) }
    }

    /// Bytes of memory the index holds (tables, arena), for the per-key figure.
    package var memoryBytes: Int {
        capacity + capacity * MemoryLayout<Entry>.stride + arena.memoryBytes + ordered.memoryBytes
            + (seqs == nil ? 0 : capacity * 8)
    }

    /// Test-only: the number of slots in the table.
    package var slotCount: Int { capacity }

    /// Key bytes held (without length prefixes or garbage).
    @exclusivity(unchecked) package private(set) var totalKeyBytes = 0

    // MARK: Lookup and update

    package func lookup(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key)) else { return nil }
        return bits(ofSlot: slot) & Entry.tombstoneBit != 0 ? nil : location(ofSlot: slot)
    }

    /// The location in the first entry on `key`'s probe path whose 9 bits of hash match (the tag
    /// and the entry's check bits), without reading the stored key; nil means `key` is absent.
    ///
    /// Saves the dependent cache miss of the key's bytes in the arena for a caller that checks the
    /// key anyway: a record carries its key, so a get compares the key in the record it reads and
    /// falls back to ``lookup(_:)`` when it differs (an entry of another key with the same bits
    /// came first on the path: about 1% of lookups at the table's loads).
    package func probableLocation(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = firstMatch(key, skipping: 0, in: slots) else { return nil }
        // A tombstone exists only while recovery runs; let the exact lookup judge it.
        return bits(ofSlot: slot) & Entry.tombstoneBit != 0 ? lookup(key) : location(ofSlot: slot)
    }

    /// What a probe without the lock found (``probableLocationWithoutLock(_:)``).
    package enum UnlockedProbe: Equatable {
        case absent
        case location(RecordLocation)
        /// Only a probe under the lock can tell (a tombstone, which exists while recovery runs).
        case unsure
    }

    /// ``probableLocation(_:)`` without the store's lock, beside the writer's updates (but not
    /// beside recovery's): inside ``ReaderRegistry/read(_:)``, on the table published last.
    ///
    /// What it returns held at some instant during the call, but for one case the caller's record
    /// check catches: an entry is stored field by field, so a probe beside an overwrite can pair the
    /// old record's segment and offset with the new one's length (or the reverse), and beside a
    /// slot's reuse can take another key's entry. A record read with the wrong length fails its
    /// checksum, another key's record fails the key check; the caller then asks under the lock.
    /// Stores nothing that another thread loads. O(1) expected.
    ///
    /// `skipping`: the number of matching entries to pass over first, for a caller whose record
    /// check found another key at the ones before (whose tag and check bits equal this key's).
    package func probableLocationWithoutLock(_ key: UnsafeRawBufferPointer, skipping: Int = 0) -> UnlockedProbe {
        let table = published.load(ordering: .sequentiallyConsistent).pointee
        guard let slot = firstMatch(key, skipping: skipping, in: table) else { return .absent }
        let bits = table.bits(ofSlot: slot)
        if bits & Entry.tombstoneBit != 0 { return .unsure }
        return .location(Entry.location(place: table.place(ofSlot: slot), bits: bits))
    }

    /// The first slot on `key`'s path in `table` whose tag and check bits match, after `skipping`
    /// others: what both probable locations read.
    @inline(__always)
    private func firstMatch(_ key: UnsafeRawBufferPointer, skipping: Int, in table: SlotTable) -> Int? {
        let hash = hasher.hash(key)
        // The entry is most likely in the home group: start loading its two lines now, so that
        // their misses overlap the probe of the control bytes.
        let home = table.homeGroup(hash) &* Self.groupWidth  // Safe: below capacity.
        cask_prefetch_for_read(table.entries + home)
        cask_prefetch_for_read(table.entries + home + Self.groupWidth / 2)
        return find(key, hash: hash, matching: .tag(skipping: skipping), in: table)
    }

    /// Whether `key`'s entry points at `location`, without the lock (as
    /// ``probableLocationWithoutLock(_:skipping:)``), reading no stored key: only the key's own
    /// entry can point at a record of it. True means it did at some instant during the call; false
    /// that it did not, or that a write was moving it elsewhere (an entry never comes back to a
    /// record it left).
    package func pointsWithoutLock(_ key: UnsafeRawBufferPointer, at location: RecordLocation) -> Bool {
        let table = published.load(ordering: .sequentiallyConsistent).pointee
        return find(key, hash: hasher.hash(key), matching: .location(location), in: table) != nil
    }

    /// Starts loading the cache lines an ``upsert(_:_:)`` or a ``recover(_:_:seq:isDelete:)`` of
    /// `key` reads first (its home group's control bytes and entries, and while recovery runs its
    /// sequence numbers), so that the misses overlap whatever the caller does before the update.
    ///
    /// Needs no lock against readers; the caller must rule out a concurrent upsert (the table moves
    /// only when an upsert grows it). A prefetch never faults.
    package func prefetch(_ key: UnsafeRawBufferPointer) {
        let home = slots.homeGroup(hasher.hash(key)) &* Self.groupWidth  // Safe: below capacity.
        cask_prefetch_for_write(control + home)
        cask_prefetch_for_write(table + home)
        cask_prefetch_for_write(table + home + Self.groupWidth / 2)
        if let seqs { cask_prefetch_for_write(seqs + home) }
    }

    /// Points `key` at `location`; returns the location it replaced, if any.
    @discardableResult
    package func upsert(_ key: UnsafeRawBufferPointer, _ location: RecordLocation) -> RecordLocation? {
        let hash = hasher.hash(key)
        if let slot = find(key, hash: hash) {
            let old = table[slot]
            slots.point(slot, at: location, tombstone: false)
            if old.isTombstone {
                tombstones -= 1
                count += 1
                return nil
            }
            return old.location
        }
        insertNew(key, hash: hash, location: location)
        count += 1
        return nil
    }

    /// Removes `key`; returns the location it had, if any.
    @discardableResult
    package func remove(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key)) else { return nil }
        let old = table[slot]
        removeSlot(slot)
        if old.isTombstone { tombstones -= 1; return nil }
        count -= 1
        return old.location
    }

    /// Removes `key` only if it still points at `expected` (compare-and-delete).
    @discardableResult
    package func remove(_ key: UnsafeRawBufferPointer, ifAt expected: RecordLocation) -> Bool {
        guard let slot = find(key, hash: hasher.hash(key), matching: .location(expected)) else { return false }
        removeSlot(slot)
        count -= 1
        return true
    }

    /// Points `key` at `new` only if it still points at `expected` (compare-and-set), for a record
    /// that compaction copied whole to `new`: the two locations have the same length.
    ///
    /// The one update that may run while readers use the index, under the store's shared lock: it
    /// stores only the entry's segment-and-offset word, in one piece, and every read of an entry
    /// loads that word in one piece (``place(ofSlot:)``) and the rest, which this never changes, on
    /// its own. A reader beside it gets the old location or the new one, never a mix, and both hold
    /// the same record. The caller must rule out every other update meanwhile (the store holds its
    /// writer mutex, which all other updates take first). O(1) expected; reads no stored key.
    @discardableResult
    package func switchLocation(_ key: UnsafeRawBufferPointer, from expected: RecordLocation, to new: RecordLocation) -> Bool {
        precondition(new.length == expected.length, "a switched record keeps its length")
        guard let slot = find(key, hash: hasher.hash(key), matching: .location(expected)) else { return false }
        slots.setPlace(slot, Entry.place(of: new))
        return true
    }

    /// Calls `body` with every live key and its location, in no particular order.
    /// The key pointer is valid only during the call.
    package func forEach(_ body: (UnsafeRawBufferPointer, RecordLocation) throws -> Void) rethrows {
        for slot in 0..<capacity {
            prefetchKey(ofSlot: slot + Self.walkPrefetchDistance)
            guard control[slot] >= 0x80, bits(ofSlot: slot) & Entry.tombstoneBit == 0 else { continue }
            try body(keyBytes(at: keyPosition(ofSlot: slot)), location(ofSlot: slot))
        }
    }

    // MARK: Ordered walks

    /// Whether the ordered view exists; walks need it (``buildOrderedView()``).
    package var hasOrderedView: Bool { maintainsOrder }

    /// Builds the ordered view from the live keys, which every insert and removal keeps up from
    /// then on: O(n) radix passes over the keys plus sorting of keys that tie in them, about a
    /// quarter of a second for a million keys. The index builds it only when a walk first needs
    /// it, so that a store that is never listed pays neither the build at open nor the tree
    /// insert of each new key. Not while recovery runs.
    package func buildOrderedView() {
        precondition(seqs == nil, "no ordered view while recovery runs")
        guard !maintainsOrder else { return }
        rebuildInKeyOrder(compactingArena: false)
        maintainsOrder = true
    }

    /// Calls `body` with each live key inside `span`, in ascending (or descending) byte order,
    /// until it returns false. The key is valid only during the call; `body` must not change the
    /// index. O(log n) to start, then O(1) amortized per key (a key's bytes are one arena read,
    /// loaded a few keys ahead). Not while recovery runs.
    package func walk(_ span: KeySpan, descending: Bool, _ body: (UnsafeRawBufferPointer) -> Bool) {
        walkPositions(span, descending: descending) { key, _ in body(key) }
    }

    /// As ``walk(_:descending:_:)``, with each key's location: one probe of the hash table per key,
    /// which matches the entry by arena position and reads no stored key.
    package func walkLocations(_ span: KeySpan, descending: Bool, _ body: (UnsafeRawBufferPointer, RecordLocation) -> Bool) {
        walkPositions(span, descending: descending) { key, position in
            let slot = find(key, hash: hasher.hash(key), matching: .keyPosition(position))!
            return body(key, location(ofSlot: slot))
        }
    }

    /// The walk both of those are: each key inside `span` with its arena position.
    private func walkPositions(_ span: KeySpan, descending: Bool, _ body: (UnsafeRawBufferPointer, UInt32) -> Bool) {
        precondition(maintainsOrder, "buildOrderedView() first")
        let (start, end) = descending ? (span.upper, span.lower) : (span.lower, span.upper)
        func run(_ from: OrderedKeys.Start) {
            ordered.walk(from: from, descending: descending, arena: arena) { position in
                let key = keyBytes(at: position)
                guard end.admits(key, asUpper: !descending) else { return false }
                return body(key, position)
            }
        }
        switch start {
        case .unbounded: run(.end)
        case .included(let bound): bound.withUnsafeBytes { run(.key($0, inclusive: true)) }
        case .excluded(let bound): bound.withUnsafeBytes { run(.key($0, inclusive: false)) }
        }
    }

    /// Test-only: traps unless the ordered view is well formed and holds exactly the live keys.
    package func checkOrderedView() {
        guard maintainsOrder else { return }
        ordered.checkInvariants(arena: arena)
        precondition(ordered.count == count, "the ordered view holds \(ordered.count) keys, the table \(count)")
    }

    // MARK: Recovery

    /// Starts recording sequence numbers so that ``recover(_:_:seq:isDelete:)`` can keep the newest
    /// version of each key regardless of the order records are seen in.
    package func beginRecovery() {
        guard seqs == nil else { return }
        seqs = Self.allocateSeqs(capacity: capacity)
        if maintainsOrder {
            maintainsOrder = false
            ordered = OrderedKeys()
        }
    }

    /// Applies one record found by recovery: it wins only if its seq is higher than what is known,
    /// or equal and the record lies later in (segment id, offset) order — so the outcome does not
    /// depend on the order records are seen in, and a compaction (which moves live records to
    /// higher ids) cannot change it. A delete is remembered as a tombstone until ``endRecovery()``,
    /// so that an older put of the same key seen later cannot bring the key back.
    @discardableResult
    package func recover(_ key: UnsafeRawBufferPointer, _ location: RecordLocation, seq: UInt64, isDelete: Bool) -> RecoveryOutcome {
        precondition(seqs != nil, "beginRecovery() first")
        let hash = hasher.hash(key)
        if let slot = find(key, hash: hash) {
            let known = seqs! + slot
            let old = table[slot]
            guard seq > known.pointee
                || (seq == known.pointee && Entry.place(of: location) > old.place)  // (segment, offset) order
            else { return .superseded }
            let oldWasDelete = old.isTombstone
            slots.point(slot, at: location, tombstone: isDelete)
            known.pointee = seq
            switch (oldWasDelete, isDelete) {
            case (false, true): count -= 1; tombstones += 1
            case (true, false): count += 1; tombstones -= 1
            default: break
            }
            return .replaced(old.location, wasDelete: oldWasDelete)
        }
        let slot = insertNew(key, hash: hash, location: location, tombstone: isDelete)
        seqs![slot] = seq
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
            if table[slot].isTombstone { body(table[slot].location) }
        }
    }

    /// Drops the tombstones and the sequence numbers kept for recovery, and shrinks a table that
    /// recovery made more than twice as big as its keys need. O(n) when it shrinks.
    package func endRecovery() {
        seqs.map { TableMemory.deallocate($0) }
        seqs = nil
        if tombstones > 0 {
            for slot in 0..<capacity where control[slot] >= 0x80 && table[slot].isTombstone {
                removeSlot(slot)
            }
            tombstones = 0
        }
        // Recovery sizes the table for every record its hint files list, dead ones included: give
        // the room back when fewer than half the slots ended up used (small tables excepted).
        if capacity > Self.shrinkableCapacity && usedSlots * 2 < capacity {
            resize(toHold: count + 1, load: Self.maximumLoad, shrinking: true)
        }
        if arena.isWasteful { compactArena() }
    }

    // MARK: Internals

    /// Sequence numbers for `capacity` slots, all 0, aligned like the table (a group's are one line).
    private static func allocateSeqs(capacity: Int) -> UnsafeMutablePointer<UInt64> {
        TableMemory.allocate(byteCount: capacity * 8).initializeMemory(as: UInt64.self, repeating: 0, count: capacity)
    }

    /// The smallest prime at least `n` (and at least 2), by trial division: O(√n), a few thousand
    /// divisions for the largest tables, once per growth.
    static func prime(atLeast n: Int) -> Int {
        var candidate = Swift.max(n, 2)
        while true {
            var divisor = 2
            var isPrime = true
            while divisor * divisor <= candidate {
                if candidate % divisor == 0 { isPrime = false; break }
                divisor += divisor == 2 ? 1 : 2
            }
            if isPrime { return candidate }
            candidate += 1
        }
    }

    /// The tag of a full slot: the hash's low 7 bits (its high bits choose the home group, so the
    /// keys of one group share them) and the top bit.
    @inline(__always)
    private static func tag(_ hash: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: hash) | 0x80 }

    /// Two more bits of the hash, kept in the entry (bits 29–30 of ``Entry/bits``): an entry whose
    /// tag matches is checked against them before its key is read, which cuts the needless key
    /// reads (and the wrong records a probable location leads to) by four. Hash bits 39–40, which
    /// the tag, the home group and the step do not use.
    @inline(__always)
    private static func checkBits(_ hash: UInt64) -> UInt32 { (UInt32(truncatingIfNeeded: hash >> 39) & 3) << 29 }

    /// What ``find(_:hash:matching:)`` takes for the key's slot, among the slots on its path whose
    /// tag and check bits match.
    private enum Match {
        /// The slot whose stored key is `key`.
        case key
        /// The first, after `skipping` others (see ``probableLocation(_:)``).
        case tag(skipping: Int)
        /// The live entry pointing at this record, without reading the stored key: only the key's
        /// own entry can, as a record holds one key. A compare-and-set then costs no arena miss.
        case location(RecordLocation)
        /// The entry whose key is stored at this arena position (each key has its own).
        case keyPosition(UInt32)
    }

    /// The slot holding `key` (as `match` says), if present, in `slots` or in `table`.
    ///
    /// A key is in the first group of its path that had a free slot when it was inserted, so the
    /// search ends at a group with an empty slot: a group that has been full since the last rehash
    /// never gets an empty slot back (``removeSlot(_:)`` marks it deleted).
    ///
    /// Beside the writer (``probableLocationWithoutLock(_:)``, `.tag` only) the search still ends:
    /// between rehashes no group gains an empty slot, and at least one group always has one (the
    /// table is at most 7/8 used), so the group that has one when the search ends had it all along,
    /// and the path reaches it within `groups` steps.
    @inline(__always)
    private func find(_ key: UnsafeRawBufferPointer, hash: UInt64, matching match: Match = .key, in table: SlotTable? = nil) -> Int? {
        let table = table ?? slots
        let tag = Self.tag(hash)
        let tags = SlotTable.lowBits &* UInt64(tag)
        let check = Self.checkBits(hash)
        var group = table.homeGroup(hash)
        var step = 0, passed = 0
        while true {
            let word = table.controlWord(group)
            var matches = SlotTable.zeroBytes(word ^ tags)
            while matches != 0 {
                let byte = matches.trailingZeroBitCount >> 3
                let slot = group &* Self.groupWidth &+ byte  // Safe: below capacity.
                if UInt8(truncatingIfNeeded: word >> (byte &* 8)) == tag, case let bits = table.bits(ofSlot: slot), bits & Entry.checkMask == check {
                    switch match {
                    case .tag(let skipping): if passed == skipping { return slot } else { passed &+= 1 }
                    case .key: if keyBytes(at: table.keyPosition(ofSlot: slot)).hasSameBytes(as: key) { return slot }
                    case .location(let expected):
                        if bits & Entry.tombstoneBit == 0 && Entry.location(place: table.place(ofSlot: slot), bits: bits) == expected { return slot }
                    case .keyPosition(let position): if table.keyPosition(ofSlot: slot) == position { return slot }
                    }
                }
                matches &= matches &- 1
            }
            if SlotTable.zeroBytes(word) != 0 { return nil }
            if step == 0 { step = table.step(hash) }
            group = table.next(group, step: step)
        }
    }

    /// The first slot that is not full on the path of `hash`. The table always has one: growth
    /// keeps at least an eighth of the slots empty, and the path visits every group.
    @inline(__always)
    private func freeSlot(for hash: UInt64) -> Int {
        var group = slots.homeGroup(hash)
        var step = 0
        while true {
            let free = ~slots.controlWord(group) & SlotTable.highBits  // empty (0) or deleted (1)
            if free != 0 { return group &* Self.groupWidth &+ free.trailingZeroBitCount >> 3 }  // Safe: below capacity.
            if step == 0 { step = slots.step(hash) }
            group = slots.next(group, step: step)
        }
    }

    @discardableResult
    private func insertNew(_ key: UnsafeRawBufferPointer, hash: UInt64, location: RecordLocation, tombstone: Bool = false) -> Int {
        if (usedSlots + 1) * 8 > capacity * 7 { resize(toHold: count + tombstones + 1) }
        let slot = freeSlot(for: hash)
        if control[slot] == Self.empty { usedSlots += 1 }
        let position = arena.store(key)
        slots.store(Entry(keyPosition: position, location: location, check: Self.checkBits(hash), tombstone: tombstone),
                    control: Self.tag(hash), at: slot)
        if maintainsOrder { ordered.insert(key, at: position, arena: arena) }
        totalKeyBytes += key.count
        return slot
    }

    private func removeSlot(_ slot: Int) {
        let position = table[slot].keyPosition
        let key = arena.bytes(at: position)
        totalKeyBytes -= key.count
        if maintainsOrder {
            let removed = ordered.remove(key, at: position, arena: arena)
            precondition(removed, "a live key is in the ordered view")
        }
        arena.release(position)
        // A group with an empty slot has never been full since the last rehash, so no probe path
        // runs through it: the slot can be empty too. In a full group it must stay on the paths.
        if SlotTable.zeroBytes(slots.controlWord(slot / Self.groupWidth)) != 0 {
            slots.setControl(slot, Self.empty)
            usedSlots -= 1
        } else {
            slots.setControl(slot, Self.deleted)
        }
        if seqs == nil && arena.isWasteful { compactArena() }
    }

    @inline(__always)
    private func keyBytes(at position: UInt32) -> UnsafeRawBufferPointer { arena.bytes(at: position) }

    /// Starts loading the key of `slot`, if it is a full slot of the table, for a walk in slot
    /// order (the keys lie in the arena in insertion order, so such a walk reads them at random).
    @inline(__always)
    private func prefetchKey(ofSlot slot: Int) {
        guard slot < capacity, control[slot] >= 0x80 else { return }
        cask_prefetch_for_read(arena.address(keyPosition(ofSlot: slot)))
    }

    @inline(__always)
    private func bits(ofSlot slot: Int) -> UInt32 { slots.bits(ofSlot: slot) }

    @inline(__always)
    private func keyPosition(ofSlot slot: Int) -> UInt32 { slots.keyPosition(ofSlot: slot) }

    @inline(__always)
    private func location(ofSlot slot: Int) -> RecordLocation { slots.location(ofSlot: slot) }

    /// Makes room for `keys` keys in all without growing the table again.
    /// (A known count does not need the room to grow that `resize` leaves: the table is sized to
    /// hold `keys` at a load of at most 7/8, the most the table allows.)
    package func reserve(_ keys: Int) {
        if (keys + 1) * 8 > capacity * 7 { resize(toHold: keys + 1, load: Self.maximumLoad) }
    }

    /// Rehashes into a table where `keys` keys fill `load` of the slots (or less, if the table is
    /// already bigger and not `shrinking`), dropping the deleted slots.
    private func resize(toHold keys: Int, load: Double = loadAfterGrowth, shrinking: Bool = false) {
        let needed = Int((Double(keys) / load / Double(Self.groupWidth)).rounded(.up))
        let old = slots, oldSeqs = seqs
        let new = SlotTable(groups: Self.prime(atLeast: shrinking ? needed : Swift.max(old.groups, needed)))
        if oldSeqs != nil { seqs = Self.allocateSeqs(capacity: new.capacity) }
        slots = new
        usedSlots = 0
        // The new table is nobody else's yet: plain stores.
        for slot in 0..<old.capacity {
            // The walk is in slot order, the keys at random in the arena: load them ahead.
            let ahead = slot + Self.walkPrefetchDistance
            if ahead < old.capacity, old.controlByte(ahead) >= 0x80 { cask_prefetch_for_read(arena.address(old.keyPosition(ofSlot: ahead))) }
            let byte = old.controlByte(slot)
            guard byte >= 0x80 else { continue }
            let entry = old.entry(slot)
            let target = freeSlot(for: hasher.hash(keyBytes(at: entry.keyPosition)))
            new.control[target] = byte
            new.entries[target] = entry
            if let oldSeqs { seqs![target] = oldSeqs[slot] }
            usedSlots += 1
        }
        publish()
        old.deallocate()
        oldSeqs.map { TableMemory.deallocate($0) }
    }

    /// Publishes `slots` to probes without the lock, and returns once none can be using the table
    /// published before (which the caller may then free).
    private func publish() {
        let box = Self.box(slots)
        let old = published.exchange(box, ordering: .sequentiallyConsistent)
        readers.waitForReaders()
        Self.unbox(old)
    }

    /// `slots` in a cache line of its own: every get loads it, and a line shared with anything
    /// the writer stores to would miss after each put.
    private static func box(_ slots: SlotTable) -> UnsafeMutablePointer<SlotTable> {
        TableMemory.allocate(byteCount: 64).initializeMemory(as: SlotTable.self, repeating: slots, count: 1)
    }

    private static func unbox(_ box: UnsafeMutablePointer<SlotTable>) {
        box.deinitialize(count: 1)
        TableMemory.deallocate(UnsafeMutableRawPointer(box))
    }

    /// Rewrites the arena without deleted keys' bytes: in key order with an ordered view (which
    /// is rebuilt with it), in slot order without one.
    private func compactArena() {
        if maintainsOrder {
            rebuildInKeyOrder(compactingArena: true)
            return
        }
        var fresh = KeyArena()
        for slot in 0..<capacity where control[slot] >= 0x80 {
            slots.setKeyPosition(slot, fresh.store(keyBytes(at: table[slot].keyPosition)))
        }
        arena = fresh
    }

    /// Builds the ordered view afresh from the live keys (walking the old one, or sorting the
    /// table's keys when there is none yet), and with `compactingArena` rewrites the arena with
    /// them in key order (dropping deleted keys' bytes), so that walks in key order read it
    /// sequentially. O(n) with an ordered view; O(n) radix passes plus sorting of keys that share
    /// their first 8 bytes without one.
    private func rebuildInKeyOrder(compactingArena: Bool) {
        var positions: [UInt32] = []
        positions.reserveCapacity(count)
        if maintainsOrder {
            ordered.walk(from: .end, descending: false, arena: arena) { position in
                positions.append(position)
                return true
            }
        } else {
            for slot in 0..<capacity where control[slot] >= 0x80 && !table[slot].isTombstone {
                positions.append(table[slot].keyPosition)
            }
            OrderedKeys.sort(&positions, arena: arena)
        }
        if compactingArena {
            var fresh = KeyArena()
            for index in positions.indices {
                let old = positions[index]
                let key = keyBytes(at: old)
                let new = fresh.store(key)
                let slot = find(key, hash: hasher.hash(key), matching: .keyPosition(old))!
                slots.setKeyPosition(slot, new)
                positions[index] = new
            }
            arena = fresh
        }
        positions.withUnsafeBufferPointer { ordered.rebuild(from: $0, arena: arena) }
    }
}

import CCaskCPU
