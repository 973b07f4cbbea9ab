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
/// Not thread-safe: the store guards it with a reader-writer lock. One update may run beside readers:
/// compaction's ``switchLocation(_:from:to:)``, which stores an entry's segment-and-offset word in
/// one piece while lookups load it in one piece (see there). Its stored properties opt out of
/// dynamic exclusivity checks (`@exclusivity(unchecked)`): the lock already rules out overlapping
/// access, and the checks cost about a tenth of a put. Complexity: expected O(1 + key length) per
/// operation; growth rehashes in O(n), reading each key once from the arena.
package final class KeyIndex {
    private struct Entry {
        /// The record's segment in the high 32 bits, its offset in the low 32: the one word that
        /// ``KeyIndex/switchLocation(_:from:to:)`` stores while readers load it, first in the entry
        /// (``KeyIndex/place(ofSlot:)`` relies on that).
        var place: UInt64
        /// Position of the key in the arena: chunk << 18 | offset.
        var keyPosition: UInt32
        /// The record length in bits 0–28 (a record is under 2^29 bytes), two more bits of the
        /// key's hash in 29–30 (``KeyIndex/checkBits(_:)``), and in bit 31 a tombstone kept during
        /// recovery.
        var bits: UInt32

        static let lengthMask: UInt32 = 1 << 29 - 1
        static let checkMask: UInt32 = 3 << 29
        static let tombstoneBit: UInt32 = 1 << 31
        /// Byte offsets of the fields read one by one beside a switch (checked in `KeyIndex.init`).
        static let keyPositionOffset = 8, bitsOffset = 12

        init(keyPosition: UInt32, location: RecordLocation, check: UInt32, tombstone: Bool) {
            self.keyPosition = keyPosition
            place = Self.place(of: location)
            bits = check
            point(at: location, tombstone: tombstone)
        }

        static func place(of location: RecordLocation) -> UInt64 { UInt64(location.segmentID) << 32 | UInt64(location.offset) }

        static func location(place: UInt64, bits: UInt32) -> RecordLocation {
            RecordLocation(segmentID: UInt32(truncatingIfNeeded: place >> 32), offset: UInt32(truncatingIfNeeded: place), length: bits & lengthMask)
        }

        var isTombstone: Bool { bits & Self.tombstoneBit != 0 }
        var location: RecordLocation { Self.location(place: place, bits: bits) }
        var check: UInt32 { bits & Self.checkMask }

        mutating func point(at location: RecordLocation, tombstone: Bool) {
            precondition(location.length <= Self.lengthMask, "a record is under 2^29 bytes")
            place = Self.place(of: location)
            bits = bits & Self.checkMask | location.length | (tombstone ? Self.tombstoneBit : 0)
        }
    }

    private static let empty: UInt8 = 0, deleted: UInt8 = 1
    /// Slots per group: the control bytes probed at once (one `UInt64`).
    private static let groupWidth = 8
    /// Load after growing; ``maximumLoad`` is the most the table allows (full and deleted slots counted).
    private static let loadAfterGrowth = 0.6
    private static let maximumLoad = 0.875
    /// Below this many slots, recovery leaves the table as big as it made it.
    private static let shrinkableCapacity = 1 << 16
    /// Slots ahead of a sequential walk whose keys are prefetched from the arena.
    private static let walkPrefetchDistance = 16

    private let hasher: KeyHasher
    @exclusivity(unchecked) private var control: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var table: UnsafeMutablePointer<Entry>
    @exclusivity(unchecked) private var capacity: Int
    /// `capacity / groupWidth`, a prime.
    @exclusivity(unchecked) private var groups: Int
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

    package init(hasher: KeyHasher = KeyHasher(), minimumCapacity: Int = 1024) {
        assert(MemoryLayout<Entry>.offset(of: \.place) == 0 && MemoryLayout<Entry>.offset(of: \.keyPosition) == Entry.keyPositionOffset
            && MemoryLayout<Entry>.offset(of: \.bits) == Entry.bitsOffset)
        self.hasher = hasher
        groups = Self.prime(atLeast: minimumCapacity * 8 / 7 / Self.groupWidth + 1)
        capacity = groups * Self.groupWidth
        (control, table) = Self.allocateTable(capacity: capacity)
    }

    deinit {
        Self.deallocateTable(control, table)
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
        let hash = hasher.hash(key)
        // The entry is most likely in the home group: start loading its two lines now, so that
        // their misses overlap the probe of the control bytes.
        let home = homeGroup(hash) &* Self.groupWidth  // Safe: below capacity.
        cask_prefetch_for_read(table + home)
        cask_prefetch_for_read(table + home + Self.groupWidth / 2)
        guard let slot = find(key, hash: hash, matching: .tag) else { return nil }
        // A tombstone exists only while recovery runs; let the exact lookup judge it.
        return bits(ofSlot: slot) & Entry.tombstoneBit != 0 ? lookup(key) : location(ofSlot: slot)
    }

    /// Starts loading the cache lines an ``upsert(_:_:)`` or a ``recover(_:_:seq:isDelete:)`` of
    /// `key` reads first (its home group's control bytes and entries, and while recovery runs its
    /// sequence numbers), so that the misses overlap whatever the caller does before the update.
    ///
    /// Needs no lock against readers; the caller must rule out a concurrent upsert (the table moves
    /// only when an upsert grows it). A prefetch never faults.
    package func prefetch(_ key: UnsafeRawBufferPointer) {
        let home = homeGroup(hasher.hash(key)) &* Self.groupWidth  // Safe: below capacity.
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
            table[slot].point(at: location, tombstone: false)
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
        cask_store_word_relaxed(table + slot, Entry.place(of: new))
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
            table[slot].point(at: location, tombstone: isDelete)
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

    /// Control bytes and entries for `capacity` slots, all empty; both cache-line aligned, so that
    /// a group's control bytes are one load and its entries two whole lines (``TableMemory``,
    /// which also asks for huge pages). Release them with ``deallocateTable(_:_:)``.
    private static func allocateTable(capacity: Int) -> (UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<Entry>) {
        let control = TableMemory.allocate(byteCount: capacity)
            .initializeMemory(as: UInt8.self, repeating: empty, count: capacity)
        let table = TableMemory.allocate(byteCount: capacity * MemoryLayout<Entry>.stride)
            .bindMemory(to: Entry.self, capacity: capacity)
        return (control, table)
    }

    /// Sequence numbers for `capacity` slots, all 0, aligned like the table (a group's are one line).
    private static func allocateSeqs(capacity: Int) -> UnsafeMutablePointer<UInt64> {
        TableMemory.allocate(byteCount: capacity * 8).initializeMemory(as: UInt64.self, repeating: 0, count: capacity)
    }

    private static func deallocateTable(_ control: UnsafeMutablePointer<UInt8>, _ table: UnsafeMutablePointer<Entry>) {
        TableMemory.deallocate(UnsafeMutableRawPointer(control))
        TableMemory.deallocate(UnsafeMutableRawPointer(table))
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

    /// The group where `hash`'s probe path starts: the high word of hash × groups, which is below
    /// `groups` (Lemire's fast range reduction: any number of groups, no division).
    @inline(__always)
    private func homeGroup(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: groups)).high)
    }

    /// How far `hash`'s probe path moves from one group to the next: 1 to groups - 1, from hash bits
    /// that neither the tag nor the home group use. With a prime number of groups, the path visits
    /// every group.
    @inline(__always)
    private func step(_ hash: UInt64) -> Int {
        // Safe: a 32-bit value times groups - 1 (below 2^32), shifted down 32, is below groups - 1.
        1 &+ Int(truncatingIfNeeded: ((hash >> 7) & 0xFFFF_FFFF) &* UInt64(truncatingIfNeeded: groups &- 1) >> 32)
    }

    /// The next group on a probe path.
    @inline(__always)
    private func next(_ group: Int, step: Int) -> Int {
        let next = group &+ step  // Safe: both below groups.
        return next >= groups ? next &- groups : next
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

    /// The control bytes of group `group` as a little-endian word: slot `group * 8 + i` is byte `i`.
    @inline(__always)
    private func controlWord(_ group: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(control + group &* Self.groupWidth).load(as: UInt64.self))  // Safe: below capacity.
    }

    private static let lowBits: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The zero bytes of `word`, as the high bit of each. The lowest bit set is exact; a bit above a
    /// zero byte can be a false one (the subtraction's borrow), so callers check each candidate.
    @inline(__always)
    private static func zeroBytes(_ word: UInt64) -> UInt64 { (word &- lowBits) & ~word & highBits }

    /// What ``find(_:hash:matching:)`` takes for the key's slot, among the slots on its path whose
    /// tag and check bits match.
    private enum Match {
        /// The slot whose stored key is `key`.
        case key
        /// The first (see ``probableLocation(_:)``).
        case tag
        /// The live entry pointing at this record, without reading the stored key: only the key's
        /// own entry can, as a record holds one key. A compare-and-set then costs no arena miss.
        case location(RecordLocation)
        /// The entry whose key is stored at this arena position (each key has its own).
        case keyPosition(UInt32)
    }

    /// The slot holding `key` (as `match` says), if present.
    ///
    /// A key is in the first group of its path that had a free slot when it was inserted, so the
    /// search ends at a group with an empty slot: a group that has been full since the last rehash
    /// never gets an empty slot back (``removeSlot(_:)`` marks it deleted).
    @inline(__always)
    private func find(_ key: UnsafeRawBufferPointer, hash: UInt64, matching match: Match = .key) -> Int? {
        let tag = Self.tag(hash)
        let tags = Self.lowBits &* UInt64(tag)
        let check = Self.checkBits(hash)
        var group = homeGroup(hash)
        var step = 0
        while true {
            let word = controlWord(group)
            var matches = Self.zeroBytes(word ^ tags)
            while matches != 0 {
                let slot = group &* Self.groupWidth &+ matches.trailingZeroBitCount >> 3  // Safe: below capacity.
                if control[slot] == tag, case let bits = bits(ofSlot: slot), bits & Entry.checkMask == check {
                    switch match {
                    case .tag: return slot
                    case .key: if keyBytes(at: keyPosition(ofSlot: slot)).hasSameBytes(as: key) { return slot }
                    case .location(let expected):
                        if bits & Entry.tombstoneBit == 0 && Entry.location(place: place(ofSlot: slot), bits: bits) == expected { return slot }
                    case .keyPosition(let position): if keyPosition(ofSlot: slot) == position { return slot }
                    }
                }
                matches &= matches &- 1
            }
            if Self.zeroBytes(word) != 0 { return nil }
            if step == 0 { step = self.step(hash) }
            group = next(group, step: step)
        }
    }

    /// The first slot that is not full on the path of `hash`. The table always has one: growth
    /// keeps at least an eighth of the slots empty, and the path visits every group.
    @inline(__always)
    private func freeSlot(for hash: UInt64) -> Int {
        var group = homeGroup(hash)
        var step = 0
        while true {
            let free = ~controlWord(group) & Self.highBits  // empty (0) or deleted (1)
            if free != 0 { return group &* Self.groupWidth &+ free.trailingZeroBitCount >> 3 }  // Safe: below capacity.
            if step == 0 { step = self.step(hash) }
            group = next(group, step: step)
        }
    }

    @discardableResult
    private func insertNew(_ key: UnsafeRawBufferPointer, hash: UInt64, location: RecordLocation, tombstone: Bool = false) -> Int {
        if (usedSlots + 1) * 8 > capacity * 7 { resize(toHold: count + tombstones + 1) }
        let slot = freeSlot(for: hash)
        if control[slot] == Self.empty { usedSlots += 1 }
        control[slot] = Self.tag(hash)
        let position = arena.store(key)
        table[slot] = Entry(keyPosition: position, location: location, check: Self.checkBits(hash), tombstone: tombstone)
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
        if Self.zeroBytes(controlWord(slot / Self.groupWidth)) != 0 {
            control[slot] = Self.empty
            usedSlots -= 1
        } else {
            control[slot] = Self.deleted
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

    // Reads of an entry that may run beside ``switchLocation(_:from:to:)``: the segment-and-offset
    // word in one piece, each other field on its own, never the entry as a whole.

    /// The entry's segment (high half) and offset (low half), loaded in one piece.
    @inline(__always)
    private func place(ofSlot slot: Int) -> UInt64 {
        cask_load_word_relaxed(table + slot)
    }

    @inline(__always)
    private func bits(ofSlot slot: Int) -> UInt32 {
        UnsafeRawPointer(table + slot).load(fromByteOffset: Entry.bitsOffset, as: UInt32.self)
    }

    @inline(__always)
    private func keyPosition(ofSlot slot: Int) -> UInt32 {
        UnsafeRawPointer(table + slot).load(fromByteOffset: Entry.keyPositionOffset, as: UInt32.self)
    }

    @inline(__always)
    private func location(ofSlot slot: Int) -> RecordLocation {
        Entry.location(place: place(ofSlot: slot), bits: bits(ofSlot: slot))
    }

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
        let newGroups = Self.prime(atLeast: shrinking ? needed : Swift.max(groups, needed))
        let newCapacity = newGroups * Self.groupWidth
        let (oldControl, oldTable, oldCapacity, oldSeqs) = (control, table, capacity, seqs)
        (control, table) = Self.allocateTable(capacity: newCapacity)
        capacity = newCapacity
        groups = newGroups
        if oldSeqs != nil { seqs = Self.allocateSeqs(capacity: newCapacity) }
        usedSlots = 0
        for slot in 0..<oldCapacity {
            // The walk is in slot order, the keys at random in the arena: load them ahead.
            let ahead = slot + Self.walkPrefetchDistance
            if ahead < oldCapacity, oldControl[ahead] >= 0x80 { cask_prefetch_for_read(arena.address(oldTable[ahead].keyPosition)) }
            let byte = oldControl[slot]
            guard byte >= 0x80 else { continue }
            let entry = oldTable[slot]
            let target = freeSlot(for: hasher.hash(keyBytes(at: entry.keyPosition)))
            control[target] = byte
            table[target] = entry
            if let oldSeqs { seqs![target] = oldSeqs[slot] }
            usedSlots += 1
        }
        Self.deallocateTable(oldControl, oldTable)
        oldSeqs.map { TableMemory.deallocate($0) }
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
            table[slot].keyPosition = fresh.store(keyBytes(at: table[slot].keyPosition))
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
                table[slot].keyPosition = new
                positions[index] = new
            }
            arena = fresh
        }
        positions.withUnsafeBufferPointer { ordered.rebuild(from: $0, arena: arena) }
    }
}

import CCaskCPU
